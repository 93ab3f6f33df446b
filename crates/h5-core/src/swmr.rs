//! VFD SWMR in the engine: opening a file as writer or reader, the end of tick of each, flush
//! and close (docs/design.md §8.2 … §8.4). The metadata file, the index and the queue are
//! `h5-swmr`'s; the page buffer is `h5-pagebuf`'s; this module drives them with the caches.
//!
//! Writer end of tick: everything is flushed into the page buffer (raw data, chunk indexes,
//! group tables, the metadata cache; the superblock last) without touching the HDF5 file's
//! length, the tick list is published, HDF5 file space freed more than max_lag ticks ago is
//! released, the tick advances. Reader end of tick: the new index is compared with the old,
//! changed pages leave the page buffer, then the metadata cache entries in them, then the
//! chunk cache is emptied (raw data is not covered by the index) and open datasets see a new
//! generation, on which they re-read their object header (`FileShared::swmr_generation`).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use h5_io::{FileStorage, OpenMode, Storage};
use h5_metacache::ExpungeFlags;
use h5_pagebuf::PageBufferError;
use h5_swmr::format::IndexEntry;
use h5_swmr::log::{SwmrLog, Tag};
use h5_swmr::queue::{self, EntryId, TickTarget, Trigger};
use h5_swmr::reader::{MdReader, ReaderParams, ReaderStorage};
use h5_swmr::writer::{MdWriter, WriterParams};
use h5_swmr::{SwmrConfig, SwmrError, swmr_log, updater};

use crate::error::{Error, Result};
use crate::file::{CacheSettings, FileShared};
use crate::write::CreateOptions;
use crate::write::alloc::SpaceKind;

/// Whether a writer or a reader holds a file open, by canonical path, in this process (E-13).
static OPEN: Mutex<Option<HashMap<PathBuf, (bool, usize)>>> = Mutex::new(None);

fn registry() -> MutexGuard<'static, Option<HashMap<PathBuf, (bool, usize)>>> {
    OPEN.lock().unwrap_or_else(|p| p.into_inner())
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The state both sides keep for the queue.
#[derive(Debug)]
struct Common {
    /// The file's queue entry (kept while end of tick is disabled).
    id: EntryId,
    deadline: Instant,
    disabled: bool,
    failed: Option<String>,
    closed: bool,
}

#[derive(Debug)]
struct WriterSide {
    common: Common,
    md: MdWriter,
    updater_seq: u64,
    /// The end of allocation of the last end of tick's flush (relative).
    last_eoa: u64,
}

#[derive(Debug)]
struct ReaderSide {
    common: Common,
    driver: Arc<ReaderStorage>,
}

#[derive(Debug)]
enum Side {
    Writer(Box<WriterSide>),
    Reader(ReaderSide),
}

impl Side {
    fn common(&mut self) -> &mut Common {
        match self {
            Side::Writer(w) => &mut w.common,
            Side::Reader(r) => &mut r.common,
        }
    }
}

/// A file's VFD SWMR state.
#[derive(Debug)]
pub(crate) struct SwmrFile {
    config: SwmrConfig,
    hdf5_path: PathBuf,
    md_path: PathBuf,
    log: Option<Arc<SwmrLog>>,
    side: Mutex<Side>,
    /// Writer: HDF5 file space freed, waiting max_lag ticks: (tick freed, kind, address,
    /// length). A lock of its own: frees happen inside the writer's end of tick.
    frees: Mutex<VecDeque<(u64, SpaceKind, u64, u64)>>,
    /// Reader: bumped at every end of tick that saw a new index.
    generation: AtomicU64,
    /// Set once the file's VFD SWMR side is closed (frees are no longer deferred).
    closed: std::sync::atomic::AtomicBool,
    chunk_config: h5_chunkcache::ChunkCacheConfig,
}

/// What a VFD SWMR file's state looks like (SWMR-027).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwmrStatus {
    /// Writer or reader.
    pub writer: bool,
    /// The writer's current tick (the next one to publish), or the reader's index tick.
    pub tick: u64,
    /// When the current tick ends.
    pub deadline: Instant,
    /// The metadata file.
    pub md_path: PathBuf,
    /// End of tick disabled.
    pub disabled: bool,
    /// The next updater file's sequence number (writers).
    pub next_updater_seq: u64,
    /// Entries in the (writer's or reader's) index.
    pub index_len: usize,
    /// Extents waiting in the metadata file's delayed-free list (writers).
    pub md_delayed_frees: usize,
    /// HDF5 file extents waiting max_lag ticks before reuse (writers).
    pub hdf5_delayed_frees: usize,
    /// The queue entry's id.
    pub queue_id: EntryId,
}

fn swmr_err(e: SwmrError) -> Error {
    Error::Swmr(e)
}

fn pb_err(e: PageBufferError) -> Error {
    match e {
        PageBufferError::RequiresPagedStrategy => swmr_err(SwmrError::NotPaged),
        other => Error::PageBuffer(other),
    }
}

fn config_of(settings: &CacheSettings) -> Result<&SwmrConfig> {
    settings
        .swmr
        .as_ref()
        .ok_or(Error::Swmr(SwmrError::NotSwmr))
}

/// Checks a configuration for opening in `mode` (E-1 … E-10 except the file's own strategy).
fn check_open(settings: &CacheSettings, writer: bool, mode: &'static str) -> Result<Vec<String>> {
    let c = config_of(settings)?;
    let warnings = c.validate().map_err(swmr_err)?;
    if c.writer != writer {
        return Err(swmr_err(SwmrError::WriterFlagMismatch {
            writer: c.writer,
            mode,
        }));
    }
    if settings.page_buffer.is_none_or(|p| p.size() == 0) {
        return Err(swmr_err(SwmrError::NoPageBuffer));
    }
    Ok(warnings)
}

fn claim(path: &Path, writer: bool) -> Result<PathBuf> {
    let key = canonical(path);
    let mut reg = registry();
    let map = reg.get_or_insert_with(HashMap::new);
    match map.get_mut(&key) {
        // Several readers of one file may share a process; a writer shares it with no one.
        Some((false, n)) if !writer => {
            #[allow(
                clippy::arithmetic_side_effects,
                reason = "one per open reader handle: fewer than usize::MAX"
            )]
            {
                *n += 1;
            }
        }
        Some(&mut (w, _)) => {
            return Err(swmr_err(SwmrError::AlreadyOpen {
                path: path.to_path_buf(),
                mode: if w { "writer" } else { "reader" },
            }));
        }
        None => {
            map.insert(key.clone(), (writer, 1));
        }
    }
    Ok(key)
}

fn unclaim(key: &Path) {
    if let Some(map) = registry().as_mut()
        && let Some((_, n)) = map.get_mut(key)
    {
        // Entries hold at least 1 (inserted with 1, removed at 0).
        *n = n.saturating_sub(1);
        if *n == 0 {
            map.remove(key);
        }
    }
}

fn open_log(c: &SwmrConfig) -> Result<Option<Arc<SwmrLog>>> {
    if c.log_file_path.as_os_str().is_empty() {
        return Ok(None);
    }
    let only = c.log_only.as_ref().map(|v| v.iter().copied().collect());
    Ok(Some(Arc::new(
        SwmrLog::create(&c.log_file_path, only).map_err(swmr_err)?,
    )))
}

impl FileShared {
    /// Creates the HDF5 file at `path` as the VFD SWMR writer (`settings.swmr` with `writer`
    /// set, a page buffer, the paged file-space strategy and the 1.10 formats or newer). The
    /// metadata file is created empty; its first header and index appear at the first end of
    /// tick (SWMR-098, SWMR-099).
    ///
    /// `open` opens (and truncates) the HDF5 file under the caller's exclusive lock: it returns
    /// the storage and what releases the lock at close. Once the writer is set up the lock is
    /// downgraded to shared, so that readers are never refused while plain writers are. The
    /// superblock is marked (write and SWMR-write status flags, as libhdf5's VFD SWMR writer
    /// marks it) from the first end of tick until close: plain opens, h5's and libhdf5's,
    /// refuse the file while the writer lives or after it died (`h5 recover` clears them).
    pub fn create_swmr(
        path: &Path,
        settings: &CacheSettings,
        options: &CreateOptions,
        open: OpenSwmrStorage<'_>,
    ) -> Result<Arc<FileShared>> {
        let warnings = check_open(settings, true, "create")?;
        let config = config_of(settings)?.clone();
        if options.file_space.strategy() != crate::space::SpaceStrategy::Page {
            return Err(swmr_err(SwmrError::NotPaged));
        }
        if options.bounds < crate::write::FormatBounds::V110 {
            return Err(Error::Invalid(
                "VFD SWMR needs the 1.10 file formats or newer (FormatBounds::V110+)".into(),
            ));
        }
        let md_path = config.md_path(path).map_err(swmr_err)?;
        if md_path.exists() {
            return Err(swmr_err(SwmrError::MdFileExists { path: md_path }));
        }
        let key = claim(path, true)?;
        let made =
            (|| {
                let (storage, unlock) = open()?;
                let dir = path.parent().map(Path::to_path_buf);
                let file = FileShared::create(Arc::clone(&storage), settings, options, dir)
                    .map_err(|e| match e {
                        Error::PageBuffer(p) => pb_err(p),
                        other => other,
                    })?;
                file.storage.set_on_close(unlock);
                file.attach_writer(config, path, md_path, true, warnings, settings)?;
                file.mark_swmr_writer(None)?;
                downgrade_writer_lock(&*storage)?;
                Ok(file)
            })();
        if made.is_err() {
            unclaim(&key);
        }
        made
    }

    /// Opens the HDF5 file at `path` with VFD SWMR: as the writer when `writable` (its header
    /// and an empty index are published at once, SWMR-101), else as a reader (waiting for the
    /// files as the configuration says, SWMR-102 … SWMR-106).
    ///
    /// `open` opens the HDF5 file under the caller's locking (shared for the writer too, so
    /// that readers are never refused while plain writers are) and returns what releases the
    /// lock at close. The writer marks the superblock in the HDF5 file at once (see
    /// [`create_swmr`](Self::create_swmr)).
    pub fn open_swmr(
        path: &Path,
        settings: &CacheSettings,
        writable: bool,
        open: OpenSwmrStorage<'_>,
    ) -> Result<Arc<FileShared>> {
        let mode = if writable { "read-write" } else { "read-only" };
        let warnings = check_open(settings, writable, mode)?;
        let config = config_of(settings)?.clone();
        let md_path = config.md_path(path).map_err(swmr_err)?;
        if writable && md_path.exists() {
            return Err(swmr_err(SwmrError::MdFileExists { path: md_path }));
        }
        let key = claim(path, writable)?;
        let made = (|| {
            let dir = path.parent().map(Path::to_path_buf);
            if writable {
                let (storage, unlock) = open()?;
                let file = FileShared::open_rw(Arc::clone(&storage), settings, dir).map_err(
                    |e| match e {
                        Error::PageBuffer(p) => pb_err(p),
                        other => other,
                    },
                )?;
                file.storage.set_on_close(unlock);
                file.attach_writer(config, path, md_path, false, warnings, settings)?;
                file.mark_swmr_writer(Some(&*storage))?;
                downgrade_writer_lock(&*storage)?;
                Ok(file)
            } else {
                open_reader(path, md_path, settings, config, dir, open)
            }
        })();
        if made.is_err() {
            unclaim(&key);
        }
        made
    }

    fn attach_writer(
        self: &Arc<Self>,
        config: SwmrConfig,
        path: &Path,
        md_path: PathBuf,
        created: bool,
        warnings: Vec<String>,
        settings: &CacheSettings,
    ) -> Result<()> {
        let pb = self
            .pagebuf
            .as_ref()
            .ok_or(Error::Swmr(SwmrError::NoPageBuffer))?;
        let ps = pb.page_size().ok_or(Error::Swmr(SwmrError::NotPaged))?;
        // Whole unfiltered chunks a write covers go straight to the file, as without SWMR: raw
        // data is not versioned by the metadata file either way (a flushed chunk is written
        // in place too), the chunk index changes through the metadata cache and is published
        // at the next end of tick, and freed space waits max_lag ticks on both paths.
        let log = open_log(&config)?;
        for w in &warnings {
            swmr_log!(&log, Tag::FileOpen, "warning: {w}");
        }
        let md_storage: Option<Arc<dyn Storage>> = if config.maintain_metadata_file {
            match FileStorage::open(&md_path, OpenMode::CreateNew) {
                Ok(s) => Some(Arc::new(s)),
                Err(h5_io::Error::Open { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists =>
                {
                    return Err(swmr_err(SwmrError::MdFileExists { path: md_path }));
                }
                Err(e) => return Err(e.into()),
            }
        } else {
            None
        };
        let mut md = MdWriter::new(
            md_storage,
            WriterParams {
                page_size: ps,
                md_pages_reserved: config.md_pages_reserved as u64,
                max_lag: config.max_lag_ticks(),
                index_removal: config.index_removal(),
            },
        );
        let mut updater_seq = 0;
        if config.generate_updater_files {
            let b = updater::create_only(ps as u32);
            updater::publish(&config.updater_file_path, 0, &b).map_err(swmr_err)?;
            updater_seq = 1;
        }
        if !created {
            let out = md.publish_empty().map_err(swmr_err)?;
            if config.generate_updater_files {
                let b = updater::build(&out, updater_seq, ps, false).map_err(swmr_err)?;
                updater::publish(&config.updater_file_path, updater_seq, &b).map_err(swmr_err)?;
                updater_seq = next_updater_seq(updater_seq)?;
            }
        }
        pb.set_tick(md.tick()).map_err(Error::PageBuffer)?;
        let deadline = later(Instant::now(), config.tick());
        let weak: Weak<dyn TickTarget> = Arc::downgrade(&(Arc::clone(self) as Arc<dyn TickTarget>));
        let id = if config.tick_len > 0 {
            queue::register(weak, true, md.tick(), deadline)
        } else {
            // Manual ticks: the file never expires; it stays on the queue for bookkeeping.
            queue::register(weak, true, md.tick(), far_future())
        };
        if config.pb_expansion_threshold > 0 {
            queue::watch_early(true);
        }
        swmr_log!(
            &log,
            Tag::FileOpen,
            "writer {} {} tick {} page_size {ps}",
            if created { "create" } else { "open" },
            path.display(),
            md.tick()
        );
        let state = SwmrFile {
            chunk_config: settings.chunks.clone(),
            config,
            hdf5_path: path.to_path_buf(),
            md_path,
            log,
            side: Mutex::new(Side::Writer(Box::new(WriterSide {
                common: Common {
                    id,
                    deadline,
                    disabled: false,
                    failed: None,
                    closed: false,
                },
                md,
                updater_seq,
                last_eoa: 0,
            }))),
            frees: Mutex::new(VecDeque::new()),
            generation: AtomicU64::new(0),
            closed: Default::default(),
        };
        self.swmr
            .set(state)
            .map_err(|_| Error::Invalid("VFD SWMR state set twice".into()))?;
        if let Some(a) = &self.alloc {
            a.lock()
                .map_err(|_| Error::Poisoned)?
                .set_readers_follow(true);
        }
        Ok(())
    }

    /// Marks the superblock as open by a SWMR writer: in its cache entry, so every image the
    /// writer publishes and later writes to the HDF5 file carries the mark, and, for a file
    /// that already exists, straight in the HDF5 file (`file`, below the page buffer), so plain
    /// opens are refused from now on rather than once the page's delayed write lands. The
    /// direct write changes only the flags: its bytes are those the first end of tick publishes.
    fn mark_swmr_writer(&self, file: Option<&dyn Storage>) -> Result<()> {
        if self.superblock.version < 3 {
            return Ok(());
        }
        let marks = crate::file::STATUS_WRITE_ACCESS | crate::file::STATUS_SWMR_WRITE;
        self.set_status_flags(marks)?;
        if let Some(file) = file {
            crate::status::write_status_flags(file, marks)?;
        }
        Ok(())
    }

    fn swmr_file(&self) -> Result<&SwmrFile> {
        self.swmr.get().ok_or(Error::Swmr(SwmrError::NotSwmr))
    }

    fn side(&self) -> Result<MutexGuard<'_, Side>> {
        self.swmr_file()?.side.lock().map_err(|_| Error::Poisoned)
    }

    /// Whether the file is open with VFD SWMR.
    pub fn is_swmr(&self) -> bool {
        self.swmr.get().is_some()
    }

    /// The VFD SWMR configuration the file was opened with (SWMR-001).
    pub fn swmr_config(&self) -> Option<&SwmrConfig> {
        self.swmr.get().map(|s| &s.config)
    }

    /// The metadata file's path.
    pub fn swmr_md_path(&self) -> Option<&Path> {
        self.swmr.get().map(|s| s.md_path.as_path())
    }

    /// A reader's generation: how many ends of tick brought a new index (0 otherwise). Open
    /// objects compare it with the generation they were read at and re-read when it moved.
    pub fn swmr_generation(&self) -> u64 {
        self.swmr
            .get()
            .map_or(0, |s| s.generation.load(Ordering::Acquire))
    }

    /// The file's VFD SWMR state (SWMR-027).
    pub fn swmr_status(&self) -> Result<SwmrStatus> {
        let sf = self.swmr_file()?;
        let hdf5_delayed_frees = sf.frees.lock().map_or(0, |f| f.len());
        let mut side = self.side()?;
        Ok(match &mut *side {
            Side::Writer(w) => SwmrStatus {
                writer: true,
                tick: w.md.tick(),
                deadline: w.common.deadline,
                md_path: sf.md_path.clone(),
                disabled: w.common.disabled,
                next_updater_seq: w.updater_seq,
                index_len: w.md.index().len(),
                md_delayed_frees: w.md.delayed_frees().len(),
                hdf5_delayed_frees,
                queue_id: w.common.id,
            },
            Side::Reader(r) => SwmrStatus {
                writer: false,
                tick: r.driver.tick(),
                deadline: r.common.deadline,
                md_path: sf.md_path.clone(),
                disabled: r.common.disabled,
                next_updater_seq: 0,
                index_len: r
                    .driver
                    .with_reader(|m| m.index().entries.len())
                    .unwrap_or(0),
                md_delayed_frees: 0,
                hdf5_delayed_frees: 0,
                queue_id: r.common.id,
            },
        })
    }

    /// The index the writer published last, or the reader's current index.
    pub fn swmr_index(&self) -> Result<Vec<IndexEntry>> {
        let side = self.side()?;
        Ok(match &*side {
            Side::Writer(w) => {
                w.md.last_published()
                    .map(|i| i.entries.clone())
                    .unwrap_or_default()
            }
            Side::Reader(r) => r
                .driver
                .with_reader(|m| m.index().entries.clone())
                .map_err(swmr_err)?,
        })
    }

    /// Runs end-of-tick processing now (SWMR-020): an error on a file not opened with VFD
    /// SWMR (E-14) or with end of tick disabled (E-15). The entry check of the API call that
    /// wraps this one has already run any expired end of tick, so an expired tick still gives
    /// exactly one (SWMR-023).
    pub fn end_tick(&self) -> Result<()> {
        self.check_open()?;
        let disabled = self.side()?.common().disabled;
        if disabled {
            return Err(swmr_err(SwmrError::EndOfTickDisabled));
        }
        self.run_eot(Trigger::Explicit)
    }

    /// Suspends end-of-tick processing for this file (SWMR-024, SWMR-025): its queue entry is
    /// removed until [`FileShared::enable_end_of_tick`].
    pub fn disable_end_of_tick(&self) -> Result<()> {
        self.check_open()?;
        let mut side = self.side()?;
        let c = side.common();
        if c.disabled {
            return Err(swmr_err(SwmrError::EndOfTickState { state: "disabled" }));
        }
        c.disabled = true;
        queue::remove(c.id);
        Ok(())
    }

    /// Resumes end-of-tick processing, running it at once when the tick has expired
    /// (SWMR-026).
    pub fn enable_end_of_tick(self: &Arc<Self>) -> Result<()> {
        let (expired, writer, tick, deadline, id) = {
            let mut side = self.side()?;
            let (writer, tick) = match &*side {
                Side::Writer(w) => (true, w.md.tick()),
                Side::Reader(r) => (false, r.driver.tick()),
            };
            let c = side.common();
            if !c.disabled {
                return Err(swmr_err(SwmrError::EndOfTickState { state: "enabled" }));
            }
            c.disabled = false;
            (Instant::now() >= c.deadline, writer, tick, c.deadline, c.id)
        };
        let manual = self.swmr_file()?.config.tick_len == 0;
        let weak: Weak<dyn TickTarget> = Arc::downgrade(&(Arc::clone(self) as Arc<dyn TickTarget>));
        queue::reinsert(
            id,
            weak,
            writer,
            tick,
            if manual { far_future() } else { deadline },
        );
        if expired && !manual {
            self.run_eot(Trigger::Enable)?;
        }
        Ok(())
    }

    /// Runs this file's end of tick (writer or reader) and re-queues it. A failure leaves the
    /// file in a failed state: later calls fail until it is closed (E-32).
    pub(crate) fn run_eot(&self, trigger: Trigger) -> Result<()> {
        let sf = self.swmr_file()?;
        let mut side = self.side()?;
        {
            let c = side.common();
            if let Some(why) = &c.failed {
                return Err(swmr_err(SwmrError::Failed(why.clone())));
            }
            if c.closed {
                return Ok(());
            }
        }
        let start = Instant::now();
        let r = match &mut *side {
            Side::Writer(w) => self.writer_eot(sf, w, trigger).map(|()| true),
            Side::Reader(r) => self.reader_eot(sf, r, trigger),
        };
        let (tick, writer) = match &*side {
            Side::Writer(w) => (w.md.tick(), true),
            Side::Reader(r) => (r.driver.tick(), false),
        };
        let c = side.common();
        let new_tick = match r {
            Ok(new_tick) => new_tick,
            Err(e) => {
                c.failed = Some(e.to_string());
                queue::remove(c.id);
                if writer {
                    // What the failed end of tick left in the page buffer and the HDF5 file is
                    // unknown: no later change may reach the file (the guard's failed state).
                    self.storage.fail(|| format!("VFD SWMR end of tick: {e}"));
                }
                return Err(swmr_err(SwmrError::EndOfTick {
                    path: sf.hdf5_path.clone(),
                    source: Box::new(e),
                }));
            }
        };
        let now = Instant::now();
        let next = if writer {
            sf.config.tick()
        } else {
            sf.config.reader_next_look(new_tick)
        };
        c.deadline = later(now, next);
        if sf.config.tick_len > 0 {
            queue::update(c.id, tick, c.deadline);
        } else {
            queue::update(c.id, tick, far_future());
        }
        swmr_log!(
            &sf.log,
            Tag::EotProcessingTime,
            "{} {:.6} s",
            if writer { "writer" } else { "reader" },
            now.saturating_duration_since(start).as_secs_f64()
        );
        Ok(())
    }

    fn writer_eot(&self, sf: &SwmrFile, w: &mut WriterSide, trigger: Trigger) -> Result<()> {
        let pb = self
            .pagebuf
            .as_ref()
            .ok_or(Error::Swmr(SwmrError::NoPageBuffer))?;
        swmr_log!(
            &sf.log,
            Tag::EndOfTick,
            "writer tick {} ({trigger:?})",
            w.md.tick()
        );
        if trigger == Trigger::Early {
            swmr_log!(
                &sf.log,
                Tag::EarlyEot,
                "page buffer past {} × its size",
                sf.config.pb_expansion_threshold
            );
        }
        w.last_eoa = self.flush_into_storage()?;
        if sf.config.flush_raw_data {
            pb.flush_raw()?;
        }
        self.defer_allocator_frees(sf)?;
        for (off, len) in pb.take_split_log() {
            swmr_log!(&sf.log, Tag::SplitIo, "{len} bytes at {off}");
        }
        let (out, rep) = w.md.end_of_tick(pb).map_err(swmr_err)?;
        if sf.config.generate_updater_files {
            let ps = pb.page_size().unwrap_or(0);
            let b = updater::build(&out, w.updater_seq, ps, false).map_err(swmr_err)?;
            updater::publish(&sf.config.updater_file_path, w.updater_seq, &b).map_err(swmr_err)?;
            if sf.config.prune_updater_files {
                let keep = sf.config.max_lag_ticks().saturating_add(2);
                if let Some(old_seq) = w.updater_seq.checked_sub(keep) {
                    let old = updater::file_name(&sf.config.updater_file_path, old_seq);
                    let _ = std::fs::remove_file(old);
                }
            }
            w.updater_seq = next_updater_seq(w.updater_seq)?;
        }
        self.release_hdf5_frees(sf, w.md.tick(), false)?;
        // The published tick is the writer's commit point: space freed before it (and held
        // max_lag ticks above) is reusable now, as after a flush's commit.
        if let Some(a) = &self.alloc {
            a.lock().map_err(|_| Error::Poisoned)?.release_deferred()?;
        }
        swmr_log!(
            &sf.log,
            Tag::IndexSize,
            "tick {} entries {} added {} changed {} removed {} index_offset {}",
            rep.tick,
            rep.entries,
            rep.added,
            rep.changed,
            rep.removed,
            rep.index_offset
        );
        swmr_log!(
            &sf.log,
            Tag::MdFileImages,
            "tick {} images {} bytes {} mpmdes {}",
            rep.tick,
            rep.images,
            rep.image_bytes,
            rep.mpmdes
        );
        Ok(())
    }

    /// Moves the space freed straight to the allocator in this tick (raw data: a filtered chunk
    /// that moved, chunks of a shrunk or deleted dataset) to the file's delayed-free list, so
    /// that it waits max_lag ticks like metadata space: until then a reader may still follow an
    /// index that points there. Space allocated and freed within the tick was freed at once.
    fn defer_allocator_frees(&self, sf: &SwmrFile) -> Result<()> {
        let Some(a) = &self.alloc else {
            return Ok(());
        };
        let taken = a.lock().map_err(|_| Error::Poisoned)?.take_deferred();
        self.delay_frees(sf, taken)
    }

    /// Puts `frees` on the file's delayed-free list, tagged with the page buffer's tick.
    fn delay_frees(
        &self,
        sf: &SwmrFile,
        frees: impl IntoIterator<Item = (SpaceKind, u64, u64)>,
    ) -> Result<()> {
        let tick = self.pagebuf.as_ref().and_then(|p| p.tick()).unwrap_or(0);
        sf.frees.lock().map_err(|_| Error::Poisoned)?.extend(
            frees
                .into_iter()
                .map(|(kind, addr, len)| (tick, kind, addr, len)),
        );
        Ok(())
    }

    /// Releases HDF5 file space freed more than max_lag ticks before `tick` (all of it with
    /// `all`, at close).
    fn release_hdf5_frees(&self, sf: &SwmrFile, tick: u64, all: bool) -> Result<()> {
        let due: Vec<(SpaceKind, u64, u64)> = {
            let mut f = sf.frees.lock().map_err(|_| Error::Poisoned)?;
            let mut due = Vec::new();
            while let Some(&(tag, kind, addr, len)) = f.front() {
                if !all && tick <= tag.saturating_add(sf.config.max_lag_ticks()) {
                    break;
                }
                due.push((kind, addr, len));
                f.pop_front();
            }
            due
        };
        for (kind, addr, len) in due {
            self.free_now(kind, addr, len)?;
        }
        Ok(())
    }

    /// A reader's end of tick; returns whether the metadata file had a new tick.
    fn reader_eot(&self, sf: &SwmrFile, r: &mut ReaderSide, trigger: Trigger) -> Result<bool> {
        let md_path = sf.md_path.clone();
        let changed = r
            .driver
            .refresh(|| {
                FileStorage::open(&md_path, OpenMode::ReadOnly)
                    .ok()
                    .map(|s| Arc::new(s) as Arc<dyn Storage>)
            })
            .map_err(swmr_err)?;
        let Some(changed) = changed else {
            swmr_log!(&sf.log, Tag::NoChange, "reader tick {}", r.driver.tick());
            return Ok(false);
        };
        swmr_log!(
            &sf.log,
            Tag::EndOfTick,
            "reader tick {} ({trigger:?}) changed {}",
            r.driver.tick(),
            changed.len()
        );
        // The page buffer first, then the metadata cache: refreshing a cache entry may read
        // through the page buffer (SWMR-093).
        let pb = self
            .pagebuf
            .as_ref()
            .ok_or(Error::Swmr(SwmrError::NoPageBuffer))?;
        let ps = pb.page_size().unwrap_or(0);
        let mut pages = 0;
        for e in &changed {
            pages = pb
                .evict_range(e.hdf5_page, u64::from(e.length))
                .saturating_add(pages);
        }
        swmr_log!(&sf.log, Tag::Evictions, "page buffer {pages}");
        let (entries, bytes) = self.evict_metadata_in(&changed, ps)?;
        swmr_log!(
            &sf.log,
            Tag::Evictions,
            "metadata cache {entries} ({bytes} bytes)"
        );
        r.driver.set_min_len(self.published_eof()?);
        let len = self.storage.len()?;
        self.meta.lock().map_err(|_| Error::Poisoned)?.ctx_mut().eoa = len;
        // Raw data is not covered by the index: cached chunks and chunk indexes may be stale.
        let fresh = h5_chunkcache::ChunkCache::new(
            Arc::clone(&self.storage) as Arc<dyn Storage>,
            sf.chunk_config.clone(),
        )?;
        *self.chunks.lock().map_err(|_| Error::Poisoned)? = fresh;
        // Dataset descriptions (shapes, chunk indexes) are read again from their headers.
        self.descriptions.clear();
        sf.generation.fetch_add(1, Ordering::AcqRel);
        Ok(true)
    }

    /// Legacy SWMR reading (a libhdf5 writer with `H5Fstart_swmr_write`, h5py's
    /// `swmr_mode`): drops every clean metadata cache entry, takes the file's new length as
    /// its end, and forgets the chunks cached for the dataset at `dataset` (relative address),
    /// so what is read next comes from the file as the writer last flushed it.
    pub fn refresh_metadata(&self, dataset: u64) -> Result<()> {
        let len = self.storage.len()?;
        {
            let mut meta = self.meta.lock().map_err(|_| Error::Poisoned)?;
            for addr in meta.cached_addrs() {
                let Some(s) = meta.status(addr) else {
                    continue;
                };
                if s.dirty || s.protected || s.pinned_by_client || s.pinned_by_cache {
                    continue;
                }
                meta.expunge(s.class, addr, ExpungeFlags::NONE)
                    .map_err(crate::file::cache_error)?;
            }
            meta.ctx_mut().eoa = len;
        }
        let id = h5_chunkcache::DatasetId(self.abs(dataset)?);
        let mut chunks = self.chunks.lock().map_err(|_| Error::Poisoned)?;
        if chunks.is_registered(id) {
            chunks.close_dataset(id)?;
        }
        Ok(())
    }

    /// The end of file the superblock records (absolute; the writer publishes it every tick).
    fn published_eof(&self) -> Result<u64> {
        use h5_format::superblock::{self, Superblock};
        let at = self.base;
        let load = crate::meta::Load::sized(
            superblock::MAX_LEN,
            move |b| superblock::needed_len(b, at),
            move |b| Superblock::decode(b, at),
        );
        let sb: Arc<Superblock> = self.load(h5_metacache::MetadataKind::Superblock, 0, load)?;
        Ok(sb.eof_address)
    }

    /// Expunges every metadata cache entry lying (even partly) in the changed entries' pages;
    /// returns how many and their bytes.
    fn evict_metadata_in(&self, changed: &[IndexEntry], ps: u64) -> Result<(usize, u64)> {
        let mut meta = self.meta.lock().map_err(|_| Error::Poisoned)?;
        let addrs = meta.cached_addrs();
        let snapshot: Vec<(u64, u64, (u8, usize))> = addrs
            .into_iter()
            .filter_map(|a| {
                meta.status(a)
                    .map(|s| (a, s.size as u64, (s.class, s.size)))
            })
            .collect();
        let map = h5_swmr::pagemap::PageMap::build(ps, snapshot);
        let (mut n, mut bytes) = (0usize, 0u64);
        for e in changed {
            for (addr, (class, size)) in map.in_range(e.hdf5_page, u64::from(e.length)) {
                if !meta.contains(addr) {
                    continue;
                }
                meta.expunge(class, addr, ExpungeFlags::NONE)
                    .map_err(crate::file::cache_error)?;
                n = n.saturating_add(1);
                bytes = bytes.saturating_add(size as u64);
            }
        }
        Ok((n, bytes))
    }

    /// A VFD SWMR writer's flush (SWMR-108): an end of tick, every page that may be written
    /// goes to the HDF5 file, then a tick at a time until no write is delayed; then the file's
    /// length and sync. With manual ticks and delayed writes it is an error unless `force`
    /// (close), which runs the ticks without waiting (E-33).
    pub(crate) fn swmr_flush(&self, force: bool) -> Result<()> {
        let sf = self.swmr_file()?;
        self.run_eot(Trigger::Flush)?;
        let pb = self
            .pagebuf
            .as_ref()
            .ok_or(Error::Swmr(SwmrError::NoPageBuffer))?;
        pb.flush()?;
        while pb.counts().dwl_len > 0 {
            if sf.config.tick_len == 0 {
                if !force {
                    return Err(swmr_err(SwmrError::DelayedWritesPending(
                        pb.counts().dwl_len,
                    )));
                }
            } else {
                let deadline = self.side()?.common().deadline;
                let now = Instant::now();
                if deadline > now {
                    std::thread::sleep(deadline.saturating_duration_since(now));
                }
            }
            self.run_eot(Trigger::Flush)?;
            pb.flush()?;
        }
        // Everything is published and in the HDF5 file: its length, and sync.
        let eoa = match &*self.side()? {
            Side::Writer(w) => w.last_eoa,
            Side::Reader(_) => return Ok(()),
        };
        self.finish_flush(eoa).map(drop)
    }

    /// Closes the VFD SWMR side of the file (SWMR-109 … SWMR-112): a writer flushes (waiting
    /// out delayed writes), publishes an empty index at a new tick, closes and unlinks the
    /// metadata file (kept with `keep_md_file`); a reader just leaves the queue. Idempotent.
    pub fn close_swmr(&self) -> Result<()> {
        let Some(sf) = self.swmr.get() else {
            return Ok(());
        };
        let closed = self.side()?.common().closed;
        if closed {
            return Ok(());
        }
        let writer = matches!(&*self.side()?, Side::Writer(_));
        let failed = self.side()?.common().failed.clone();
        let mut result = Ok(());
        if writer && failed.is_none() {
            // The superblock's marks go with the last flush (a writer that fails or dies leaves
            // them: `h5 recover` or `h5 clear`).
            result = if self.superblock.version >= 3 {
                self.set_status_flags(0)
            } else {
                Ok(())
            };
            if result.is_ok() {
                result = self.swmr_flush(true);
            }
            if result.is_ok() {
                result = self.final_publication(sf);
            }
        }
        let mut side = self.side()?;
        let c = side.common();
        c.closed = true;
        sf.closed.store(true, Ordering::Release);
        queue::remove(c.id);
        if writer && sf.config.pb_expansion_threshold > 0 {
            queue::watch_early(false);
        }
        unclaim(&canonical(&sf.hdf5_path));
        swmr_log!(&sf.log, Tag::FileClose, "{}", sf.hdf5_path.display());
        result
    }

    /// After the last flush (every image published and written to the HDF5 file): an empty
    /// index at a new tick, so readers go to the HDF5 file for everything, whose bytes equal
    /// the last images. HDF5 space still waiting to be released stays unused (a lagging reader
    /// may still read it).
    fn final_publication(&self, sf: &SwmrFile) -> Result<()> {
        let mut side = self.side()?;
        let Side::Writer(w) = &mut *side else {
            return Ok(());
        };
        let out = w.md.publish_empty().map_err(swmr_err)?;
        if sf.config.generate_updater_files {
            let ps = self
                .pagebuf
                .as_ref()
                .and_then(|p| p.page_size())
                .unwrap_or(0);
            let b = updater::build(&out, w.updater_seq, ps, true).map_err(swmr_err)?;
            updater::publish(&sf.config.updater_file_path, w.updater_seq, &b).map_err(swmr_err)?;
            w.updater_seq = next_updater_seq(w.updater_seq)?;
        }
        if sf.config.maintain_metadata_file && !sf.config.keep_md_file {
            std::fs::remove_file(&sf.md_path).map_err(|source| {
                swmr_err(SwmrError::Fs {
                    what: "removing the metadata file",
                    path: sf.md_path.clone(),
                    source,
                })
            })?;
        }
        Ok(())
    }

    /// Whether this file is a VFD SWMR writer still open.
    /// Takes no lock: it is asked inside the writer's own end of tick.
    pub(crate) fn is_swmr_writer(&self) -> bool {
        self.swmr
            .get()
            .is_some_and(|s| s.config.writer && !s.closed.load(Ordering::Acquire))
    }

    /// A VFD SWMR writer does not reuse freed HDF5 file space for max_lag ticks (a lagging
    /// reader may still read what was there): the free is queued with the tick in progress
    /// (the page buffer's). Returns whether it was.
    pub(crate) fn defer_free(&self, kind: SpaceKind, addr: u64, len: u64) -> Result<bool> {
        let Some(sf) = self.swmr.get() else {
            return Ok(false);
        };
        if !sf.config.writer || sf.closed.load(Ordering::Acquire) {
            return Ok(false);
        }
        self.delay_frees(sf, [(kind, addr, len)])?;
        Ok(true)
    }
}

impl TickTarget for FileShared {
    fn end_of_tick(&self, trigger: Trigger) -> h5_swmr::Result<()> {
        self.run_eot(trigger).map_err(|e| match e {
            Error::Swmr(s) => s,
            other => SwmrError::EndOfTick {
                path: self
                    .swmr
                    .get()
                    .map(|s| s.hdf5_path.clone())
                    .unwrap_or_default(),
                source: Box::new(other),
            },
        })
    }

    fn wants_early_tick(&self) -> bool {
        let Some(sf) = self.swmr.get() else {
            return false;
        };
        let t = sf.config.pb_expansion_threshold;
        if t <= 0 || !sf.config.writer {
            return false;
        }
        let Some(pb) = &self.pagebuf else {
            return false;
        };
        if pb.over_expansion_threshold(t as u32) {
            return true;
        }
        // The metadata changed in this tick reaches the page buffer only at the end of the
        // tick (the metadata cache holds it until then): count it as what the buffer will have
        // to hold (OQ-15, docs/design.md §8.3).
        let dirty = self
            .meta
            .try_lock()
            .map_or(0, |m| m.totals().dirty_size as u64);
        let c = pb.counts();
        c.index_size.saturating_add(dirty) > c.max_size.saturating_mul(t as u64)
    }
}

/// A deadline never reached: a hundred years from now.
fn far_future() -> Instant {
    later(Instant::now(), Duration::from_secs(100 * 365 * 24 * 3600))
}

/// `from + d`, or the latest instant the clock can represent near that (a tick length from
/// the configuration may be out of the clock's range).
fn later(from: Instant, d: Duration) -> Instant {
    from.checked_add(d)
        .or_else(|| from.checked_add(Duration::from_secs(u64::from(u32::MAX))))
        .unwrap_or(from)
}

/// The updater file sequence number after `seq`.
fn next_updater_seq(seq: u64) -> Result<u64> {
    seq.checked_add(1).ok_or(swmr_err(SwmrError::FormatLimit {
        what: "updater file sequence number",
        value: seq,
    }))
}

/// The HDF5 file opened under the reader's shared lock, or `None` while a writer holds it
/// exclusively (a VFD SWMR writer does from creating the file until its metadata file is
/// published; the reader then waits as for a file that has not appeared).
///
/// A lock held longer than [`WRITER_SETUP_GRACE`] is not a writer setting up (a plain writer
/// has the file): the reader then fails with the lock error instead of waiting.
fn open_hdf5_unless_locked(
    open: OpenSwmrStorage<'_>,
    locked_since: &mut Option<Instant>,
) -> Result<Option<(Arc<dyn Storage>, crate::guard::OnClose)>> {
    match open() {
        Ok(opened) => Ok(Some(opened)),
        Err(Error::Io(h5_io::Error::Locked))
            if locked_since.get_or_insert_with(Instant::now).elapsed() < WRITER_SETUP_GRACE =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// How long a reader waits for an HDF5 file that is locked exclusively: a VFD SWMR writer holds
/// its new file so from creating it until its metadata file is published, milliseconds.
const WRITER_SETUP_GRACE: Duration = Duration::from_secs(2);

/// Opens the reader: waits for the files as the configuration allows (SWMR-102 … SWMR-105),
/// then the HDF5 file through the reader driver and the page buffer.
fn open_reader(
    path: &Path,
    md_path: PathBuf,
    settings: &CacheSettings,
    config: SwmrConfig,
    dir: Option<PathBuf>,
    open: OpenSwmrStorage<'_>,
) -> Result<Arc<FileShared>> {
    let log = open_log(&config)?;
    let params = ReaderParams {
        md_pages_reserved: config.md_pages_reserved as u64,
        max_lag: config.max_lag_ticks(),
        tick: config.tick(),
        retry_limit: config.retry_limit(),
        strict_lag: config.strict_lag,
    };
    let timeout = config.open_timeout();
    let start = Instant::now();
    #[allow(
        clippy::arithmetic_side_effects,
        reason = "division by a non-zero constant"
    )]
    let poll = (config.tick() / 10).clamp(Duration::from_millis(5), Duration::from_millis(100));
    let mut locked_since = None;
    let (reader, (hdf5, unlock)) = loop {
        let md_exists = md_path.exists();
        let h5_exists = path.exists();
        if md_exists {
            let md: Arc<dyn Storage> = Arc::new(FileStorage::open(&md_path, OpenMode::ReadOnly)?);
            let mut r = MdReader::new(
                Some(md),
                md_path.clone(),
                ReaderParams {
                    retry_limit: Duration::from_millis(50),
                    ..params.clone()
                },
                log.clone(),
            );
            // An empty or half-written metadata file: the writer has not published yet.
            if h5_exists && r.load().is_ok() {
                let md: Arc<dyn Storage> =
                    Arc::new(FileStorage::open(&md_path, OpenMode::ReadOnly)?);
                let mut r = MdReader::new(Some(md), md_path.clone(), params.clone(), log.clone());
                r.load().map_err(swmr_err)?;
                if let Some(opened) = open_hdf5_unless_locked(open, &mut locked_since)? {
                    break (r, opened);
                }
            }
        } else if h5_exists
            && config.presume_posix_semantics
            && let Some(opened) = open_hdf5_unless_locked(open, &mut locked_since)?
        {
            // Under the HDF5 file's lock no writer can be setting up now, so a metadata file
            // still absent means none is running; one that appeared meanwhile is waited for.
            if !md_path.exists() {
                break (
                    MdReader::new(None, md_path.clone(), params.clone(), log.clone()),
                    opened,
                );
            }
        }
        if start.elapsed() >= timeout {
            let what = match (h5_exists, md_exists) {
                (false, false) => "neither the HDF5 file nor its metadata file appeared",
                (_, false) => "metadata file did not appear",
                (false, true) => "HDF5 file did not appear",
                (true, true) => "metadata file got no valid header and index",
            };
            return Err(swmr_err(SwmrError::Timeout {
                what,
                path: if md_exists || !h5_exists {
                    md_path
                } else {
                    path.to_path_buf()
                },
                secs: timeout.as_secs_f64(),
            }));
        }
        queue::wait_outside_api(|| std::thread::sleep(poll));
    };
    let md_page_size = reader.page_size();
    let tick = reader.tick();
    // The tick and page size are known before the HDF5 file's superblock is read (SWMR-079).
    swmr_log!(
        &log,
        Tag::FileOpen,
        "reader metadata file tick {tick} page_size {}",
        md_page_size.map_or_else(
            || "unknown (no metadata file)".to_owned(),
            |p| p.to_string()
        )
    );
    let driver = Arc::new(ReaderStorage::new(hdf5, reader));
    let file =
        FileShared::open(Arc::clone(&driver) as Arc<dyn Storage>, settings, dir).map_err(|e| {
            match e {
                Error::PageBuffer(p) => pb_err(p),
                other => other,
            }
        })?;
    let pb = file
        .pagebuf
        .as_ref()
        .ok_or(Error::Swmr(SwmrError::NoPageBuffer))?;
    let ps = pb.page_size().ok_or(Error::Swmr(SwmrError::NotPaged))?;
    file.storage.set_on_close(unlock);
    driver.set_min_len(file.superblock().eof_address);
    file.meta.lock().map_err(|_| Error::Poisoned)?.ctx_mut().eoa = file.storage.len()?;
    if let Some(mps) = md_page_size
        && mps != ps
    {
        return Err(swmr_err(SwmrError::PageSizeMismatch { md: mps, file: ps }));
    }
    // When the tick just read was published is unknown: with a retry delay, look soon.
    let deadline = later(Instant::now(), config.reader_next_look(false));
    let weak: Weak<dyn TickTarget> = Arc::downgrade(&(Arc::clone(&file) as Arc<dyn TickTarget>));
    let id = queue::register(
        weak,
        false,
        tick,
        if config.tick_len > 0 {
            deadline
        } else {
            far_future()
        },
    );
    swmr_log!(
        &log,
        Tag::FileOpen,
        "reader opened {} tick {tick} page_size {ps}",
        path.display()
    );
    let state = SwmrFile {
        chunk_config: settings.chunks.clone(),
        config,
        hdf5_path: path.to_path_buf(),
        md_path,
        log,
        side: Mutex::new(Side::Reader(ReaderSide {
            common: Common {
                id,
                deadline,
                disabled: false,
                failed: None,
                closed: false,
            },
            driver,
        })),
        frees: Mutex::new(VecDeque::new()),
        generation: AtomicU64::new(0),
        closed: Default::default(),
    };
    file.swmr
        .set(state)
        .map_err(|_| Error::Invalid("VFD SWMR state set twice".into()))?;
    Ok(file)
}

/// Once a VFD SWMR writer is set up, its lock on the HDF5 file is a shared one (a writer that
/// created the file held it exclusively until now), so that readers (shared locks, kept until
/// they close) are never refused while any plain writer still is. libhdf5 releases a (VFD) SWMR writer's lock altogether at this point
/// (`H5F_open`), because it has marked the superblock (write and SWMR-write status flags) and
/// the marks keep other writers out; h5 does not mark the superblock, so it keeps the shared
/// lock instead.
fn downgrade_writer_lock(storage: &dyn Storage) -> Result<()> {
    Ok(storage.lock(h5_io::LockMode::Shared)?)
}

/// Opens a VFD SWMR file's HDF5 file under the caller's locking: its storage, and what
/// releases the lock.
pub type OpenSwmrStorage<'a> = &'a dyn Fn() -> Result<(Arc<dyn Storage>, crate::guard::OnClose)>;

/// The once-set slot for a file's VFD SWMR state.
pub(crate) type SwmrSlot = OnceLock<SwmrFile>;
