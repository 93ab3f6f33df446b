//! The reader's side: loading the metadata file's header and index (with bounded retries for
//! torn writes, SWMR-080 … SWMR-083) and the storage driver that serves indexed pages from the
//! metadata file and everything else from the HDF5 file (SWMR-084 … SWMR-089).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use h5_format::checksum::lookup3;
use h5_io::{IoOp, LockMode, ReadSegment, Storage, StorageExt, WriteSegment};

use crate::error::{Result, SwmrError};
use crate::format::{Fault, HEADER_LEN, IndexEntry, MdHeader, MdIndex};
use crate::log::{SwmrLog, Tag};
use crate::swmr_log;

/// What the reader needs to know.
#[derive(Clone, Debug)]
pub struct ReaderParams {
    /// Pages reserved at the head of the metadata file (the fast-path read size).
    pub md_pages_reserved: u64,
    /// max_lag.
    pub max_lag: u64,
    /// The tick length (zero: manual ticks).
    pub tick: Duration,
    /// How long torn reads are retried before giving up (OQ-19).
    pub retry_limit: Duration,
    /// Check the header's tick before every read and fail when this reader's index is more
    /// than max_lag ticks old (SWMR-089; off by default).
    pub strict_lag: bool,
}

/// One load of the metadata file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// The header's tick has not changed.
    Unchanged,
    /// A newer tick: the previous index is returned for comparison.
    Advanced {
        /// The index before.
        previous: MdIndex,
    },
}

/// The metadata file as the reader sees it.
#[derive(Debug)]
pub struct MdReader {
    md: Option<Arc<dyn Storage>>,
    path: PathBuf,
    params: ReaderParams,
    header: Option<MdHeader>,
    index: MdIndex,
    /// The index was found outside the reserved pages once: always read it separately now.
    non_adjacent: bool,
    log: Option<Arc<SwmrLog>>,
    /// Torn reads retried so far.
    pub retries: u64,
}

enum Attempt {
    Retry(String),
    Fatal(SwmrError),
}

impl From<h5_io::Error> for Attempt {
    fn from(e: h5_io::Error) -> Attempt {
        Attempt::Fatal(e.into())
    }
}

impl MdReader {
    /// A reader of the metadata file `md` (at `path`), nothing loaded yet. `md = None` is the
    /// make-believe file of tick 0 with an empty index (SWMR-105).
    pub fn new(
        md: Option<Arc<dyn Storage>>,
        path: PathBuf,
        params: ReaderParams,
        log: Option<Arc<SwmrLog>>,
    ) -> MdReader {
        MdReader {
            md,
            path,
            params,
            header: None,
            index: MdIndex::default(),
            non_adjacent: false,
            log,
            retries: 0,
        }
    }

    /// The tick of the index in use (0: make-believe).
    pub fn tick(&self) -> u64 {
        self.index.tick
    }

    /// The index in use.
    pub fn index(&self) -> &MdIndex {
        &self.index
    }

    /// The page size from the header (`None` before a header was read).
    pub fn page_size(&self) -> Option<u64> {
        self.header.map(|h| u64::from(h.page_size))
    }

    /// The metadata file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a metadata file is open (false: make-believe).
    pub fn has_md_file(&self) -> bool {
        self.md.is_some()
    }

    /// Adopts a metadata file that appeared after open (make-believe → real, SWMR-105).
    pub fn attach(&mut self, md: Arc<dyn Storage>) {
        self.md = Some(md);
    }

    fn corrupt(&self, reason: impl Into<String>) -> SwmrError {
        SwmrError::CorruptMdFile {
            path: self.path.clone(),
            reason: reason.into(),
        }
    }

    /// Reads the header alone (retrying torn reads).
    pub fn read_header(&mut self) -> Result<Option<MdHeader>> {
        let Some(md) = self.md.clone() else {
            return Ok(None);
        };
        self.retrying(|this| {
            let mut b = [0u8; HEADER_LEN];
            if md.len()? < HEADER_LEN as u64 {
                return Err(Attempt::Retry(
                    "metadata file shorter than its header".into(),
                ));
            }
            md.read_at(0, &mut b)?;
            match MdHeader::decode(&b) {
                Ok(h) => Ok(h),
                Err(Fault::Torn(r)) => Err(Attempt::Retry(r)),
                Err(Fault::Corrupt(r)) => Err(Attempt::Fatal(this.corrupt(r))),
            }
        })
        .map(Some)
    }

    /// "Get tick and index" with reload (SWMR-083): re-reads the header; an unchanged tick
    /// returns at once, a lower one is an error, a higher one loads the new index.
    pub fn load(&mut self) -> Result<Loaded> {
        let Some(h) = self.read_header()? else {
            return Ok(Loaded::Unchanged);
        };
        if self.header.is_some() && h.tick == self.index.tick {
            return Ok(Loaded::Unchanged);
        }
        if self.header.is_some() && h.tick < self.index.tick {
            return Err(SwmrError::TickWentBackwards {
                old: self.index.tick,
                new: h.tick,
            });
        }
        let (header, index) = self.load_both()?;
        if header.tick < self.index.tick {
            return Err(SwmrError::TickWentBackwards {
                old: self.index.tick,
                new: header.tick,
            });
        }
        self.header = Some(header);
        let previous = std::mem::replace(&mut self.index, index);
        Ok(Loaded::Advanced { previous })
    }

    /// Reads a consistent header and index.
    fn load_both(&mut self) -> Result<(MdHeader, MdIndex)> {
        let Some(md) = self.md.clone() else {
            return Err(self.corrupt("no metadata file"));
        };
        self.retrying(|this| this.attempt(&*md))
    }

    fn attempt(&mut self, md: &dyn Storage) -> std::result::Result<(MdHeader, MdIndex), Attempt> {
        let len = md.len()?;
        if len < HEADER_LEN as u64 {
            return Err(Attempt::Retry(
                "metadata file shorter than its header".into(),
            ));
        }
        let mut hb = [0u8; HEADER_LEN];
        md.read_at(0, &mut hb)?;
        let h = match MdHeader::decode(&hb) {
            Ok(h) => h,
            Err(Fault::Torn(r)) => return Err(Attempt::Retry(r)),
            Err(Fault::Corrupt(r)) => return Err(Attempt::Fatal(self.corrupt(r))),
        };
        let ps = u64::from(h.page_size);
        let reserved = ps.saturating_mul(self.params.md_pages_reserved);
        if !self.non_adjacent && h.index_offset == HEADER_LEN as u64 && !h.index_in(reserved) {
            // E-20 / OQ-29: the header says "adjacent" but the index does not fit this
            // reader's reserved pages: read it separately (a configuration mismatch).
            swmr_log!(
                &self.log,
                Tag::NonAdjacentIndex,
                "index of {} bytes at 36 exceeds md_pages_reserved = {} (configuration mismatch?)",
                h.index_length,
                self.params.md_pages_reserved
            );
        }
        if !self.non_adjacent && h.index_in(reserved) {
            // Fast path: one read of the reserved pages holds both.
            let n = reserved.min(len) as usize;
            let mut b = vec![0u8; n];
            md.read_at(0, &mut b)?;
            let h = match MdHeader::decode(&b) {
                Ok(h) => h,
                Err(Fault::Torn(r)) => return Err(Attempt::Retry(r)),
                Err(Fault::Corrupt(r)) => return Err(Attempt::Fatal(self.corrupt(r))),
            };
            let end = h.index_offset.saturating_add(h.index_length);
            if end > reserved {
                return Err(Attempt::Retry("header changed between reads".into()));
            }
            if end > n as u64 {
                return Err(Attempt::Retry("index not written yet".into()));
            }
            let ib = &b[h.index_offset as usize..end as usize];
            let ix = match MdIndex::decode(ib, ps) {
                Ok(ix) => ix,
                Err(Fault::Torn(r)) => return Err(Attempt::Retry(r)),
                Err(Fault::Corrupt(r)) => return Err(Attempt::Fatal(self.corrupt(r))),
            };
            return self.match_ticks(h, ix, true);
        }
        if !self.non_adjacent {
            self.non_adjacent = true;
            swmr_log!(
                &self.log,
                Tag::NonAdjacentIndex,
                "index at {} ({} bytes) outside the reserved pages",
                h.index_offset,
                h.index_length
            );
        }
        // Separate index (relocated, SWMR-081): a bad checksum or tick here is fatal.
        let end = h.index_offset.saturating_add(h.index_length);
        if end > len {
            return Err(Attempt::Fatal(self.corrupt(format!(
                "index at {}..{end} past the end of the metadata file ({len} bytes)",
                h.index_offset
            ))));
        }
        let ib = md.read_vec(h.index_offset, h.index_length as usize)?;
        let ix = match MdIndex::decode(&ib, ps) {
            Ok(ix) => ix,
            Err(f) => {
                return Err(Attempt::Fatal(self.corrupt(format!(
                    "index checksum mismatch (reader may have exceeded max_lag, or the writer \
                     wrote out of order): {f}"
                ))));
            }
        };
        self.match_ticks(h, ix, false)
    }

    /// The tick rules of SWMR-080: equal ticks accept; a difference of one is a write in
    /// progress (the header and index are written together, so either may be the newer);
    /// anything else is fatal.
    fn match_ticks(
        &self,
        h: MdHeader,
        ix: MdIndex,
        fast: bool,
    ) -> std::result::Result<(MdHeader, MdIndex), Attempt> {
        if h.tick == ix.tick {
            return Ok((h, ix));
        }
        if fast && h.tick.abs_diff(ix.tick) == 1 {
            return Err(Attempt::Retry(format!(
                "header tick {} and index tick {}",
                h.tick, ix.tick
            )));
        }
        Err(Attempt::Fatal(self.corrupt(format!(
            "header tick {} and index tick {} (reader may have exceeded max_lag)",
            h.tick, ix.tick
        ))))
    }

    /// Runs `f` until it succeeds, retrying torn reads with exponential backoff (1 ms doubling,
    /// at most a tenth of a tick), for at most the retry limit; every retry is logged.
    fn retrying<T>(
        &mut self,
        mut f: impl FnMut(&mut Self) -> std::result::Result<T, Attempt>,
    ) -> Result<T> {
        let start = Instant::now();
        let cap = (self.params.tick / 10).max(Duration::from_millis(1));
        let mut pause = Duration::from_millis(1);
        let mut tries = 0u32;
        loop {
            match f(self) {
                Ok(v) => return Ok(v),
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry(reason)) => {
                    tries += 1;
                    self.retries += 1;
                    swmr_log!(&self.log, Tag::ChecksumRetry, "retry {tries}: {reason}");
                    if start.elapsed() >= self.params.retry_limit {
                        return Err(SwmrError::PersistentTorn {
                            path: self.path.clone(),
                            retries: tries,
                            reason,
                        });
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(cap);
                }
            }
        }
    }
}

/// Verified images of recently read entries, keyed by (metadata file page, checksum).
#[derive(Debug, Default)]
struct ImageCache {
    map: HashMap<(u64, u32), Arc<Vec<u8>>>,
    order: VecDeque<(u64, u32)>,
}

const IMAGE_CACHE_ENTRIES: usize = 64;

/// The reader's storage driver: reads of HDF5 pages the index lists come from the metadata
/// file (checksum verified), everything else from the HDF5 file; bytes past the HDF5 file's end
/// read as zeros (the metadata file may be ahead of it, SWMR-087); writes are refused.
#[derive(Debug)]
pub struct ReaderStorage {
    hdf5: Arc<dyn Storage>,
    state: Mutex<(MdReader, ImageCache)>,
    /// The writer's end of allocation as last published (the superblock's end of file): the
    /// file is at least that long for this reader, unwritten bytes reading as zeros.
    min_len: std::sync::atomic::AtomicU64,
}

fn io_error(op: IoOp, offset: u64, e: SwmrError) -> h5_io::Error {
    h5_io::Error::Io {
        op,
        offset,
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    }
}

fn refuse(op: IoOp, offset: u64) -> h5_io::Error {
    h5_io::Error::Io {
        op,
        offset,
        source: std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "a VFD SWMR reader cannot write, truncate or extend the file",
        ),
    }
}

impl ReaderStorage {
    /// A driver over the HDF5 file's storage (opened read-only) and a loaded reader.
    pub fn new(hdf5: Arc<dyn Storage>, reader: MdReader) -> ReaderStorage {
        ReaderStorage {
            hdf5,
            state: Mutex::new((reader, ImageCache::default())),
            min_len: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn reader(&self) -> Result<MutexGuard<'_, (MdReader, ImageCache)>> {
        self.state.lock().map_err(|_| SwmrError::Poisoned)
    }

    /// Runs `f` on the metadata-file reader.
    pub fn with_reader<T>(&self, f: impl FnOnce(&mut MdReader) -> T) -> Result<T> {
        Ok(f(&mut self.reader()?.0))
    }

    /// Records the writer's published end of allocation (see [`Storage::len`]).
    pub fn set_min_len(&self, len: u64) {
        self.min_len
            .store(len, std::sync::atomic::Ordering::Release);
    }

    /// The tick of the index in use.
    pub fn tick(&self) -> u64 {
        self.state.lock().map_or(0, |s| s.0.tick())
    }

    /// The page size the header gives (`None` on make-believe data).
    pub fn page_size(&self) -> Option<u64> {
        self.state.lock().ok().and_then(|s| s.0.page_size())
    }

    /// Reader end of tick, driver part: re-reads the header and, when the tick went up, the
    /// index; returns the entries to invalidate (new or changed, SWMR-092). With make-believe
    /// data, a metadata file that has appeared is opened first (`open_md`).
    pub fn refresh(
        &self,
        open_md: impl FnOnce() -> Option<Arc<dyn Storage>>,
    ) -> Result<Option<Vec<IndexEntry>>> {
        let mut st = self.reader()?;
        if !st.0.has_md_file() {
            match open_md() {
                Some(md) => st.0.attach(md),
                None => return Ok(None),
            }
        }
        match st.0.load()? {
            Loaded::Unchanged => Ok(None),
            Loaded::Advanced { previous } => Ok(Some(crate::format::changed_entries(
                &previous.entries,
                &st.0.index.entries,
            ))),
        }
    }

    fn read_entry(
        st: &mut (MdReader, ImageCache),
        e: &IndexEntry,
        ps: u64,
    ) -> Result<Arc<Vec<u8>>> {
        let key = (e.md_page, e.checksum);
        if let Some(img) = st.1.map.get(&key)
            && img.len() == e.length as usize
        {
            return Ok(Arc::clone(img));
        }
        let md =
            st.0.md
                .clone()
                .ok_or_else(|| st.0.corrupt("indexed page without a metadata file"))?;
        let mut img = vec![0u8; e.length as usize];
        md.read_at(e.md_page * ps, &mut img)?;
        if lookup3(&img, 0) != e.checksum {
            return Err(SwmrError::EntryChecksum { page: e.hdf5_page });
        }
        let img = Arc::new(img);
        if st.1.order.len() >= IMAGE_CACHE_ENTRIES
            && let Some(old) = st.1.order.pop_front()
        {
            st.1.map.remove(&old);
        }
        st.1.order.push_back(key);
        st.1.map.insert(key, Arc::clone(&img));
        Ok(img)
    }

    fn read_inner(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut st = self.reader()?;
        if st.0.params.strict_lag
            && let Some(h) = st.0.read_header()?
        {
            let lag = h.tick.saturating_sub(st.0.tick());
            if lag > st.0.params.max_lag {
                return Err(SwmrError::ReaderTooFarBehind {
                    lag,
                    max_lag: st.0.params.max_lag,
                });
            }
        }
        let Some(ps) = st.0.page_size() else {
            drop(st);
            return Ok(self.hdf5.read_at_zero_fill(offset, buf)?);
        };
        let end = offset + buf.len() as u64;
        let mut at = offset;
        while at < end {
            let page = at / ps;
            match st.0.index.lookup(page, ps).copied() {
                Some(e) => {
                    let start = e.hdf5_page * ps;
                    let img_end = start + u64::from(e.length);
                    if at < img_end {
                        let img = Self::read_entry(&mut st, &e, ps)?;
                        let stop = img_end.min(end);
                        buf[(at - offset) as usize..(stop - offset) as usize]
                            .copy_from_slice(&img[(at - start) as usize..(stop - start) as usize]);
                        at = stop;
                    } else {
                        // The last page of a multi-page entry, past the entry's length.
                        let stop = ((page + 1) * ps).min(end);
                        self.hdf5.read_at_zero_fill(
                            at,
                            &mut buf[(at - offset) as usize..(stop - offset) as usize],
                        )?;
                        at = stop;
                    }
                }
                None => {
                    // Up to the next indexed page.
                    let entries = &st.0.index.entries;
                    let i = entries.partition_point(|x| x.hdf5_page <= page);
                    let stop = entries.get(i).map_or(end, |x| (x.hdf5_page * ps).min(end));
                    self.hdf5.read_at_zero_fill(
                        at,
                        &mut buf[(at - offset) as usize..(stop - offset) as usize],
                    )?;
                    at = stop;
                }
            }
        }
        Ok(())
    }
}

#[deny(clippy::missing_trait_methods)]
impl Storage for ReaderStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> h5_io::Result<()> {
        offset
            .checked_add(buf.len() as u64)
            .ok_or(h5_io::Error::AddressOverflow {
                offset,
                len: buf.len() as u64,
            })?;
        self.read_inner(offset, buf).map_err(|e| match e {
            SwmrError::Io(io) => io,
            other => io_error(IoOp::Read, offset, other),
        })
    }

    fn write_at(&self, offset: u64, _data: &[u8]) -> h5_io::Result<()> {
        Err(refuse(IoOp::Write, offset))
    }

    /// The HDF5 file's length, or the end of the last indexed entry, or the writer's published
    /// end of allocation, whichever is furthest.
    fn len(&self) -> h5_io::Result<u64> {
        let file = self.hdf5.len()?;
        let st = self.state.lock().map_err(|_| refuse(IoOp::Len, 0))?;
        let ps = st.0.page_size().unwrap_or(0);
        let indexed =
            st.0.index
                .entries
                .last()
                .map_or(0, |e| e.hdf5_page * ps + u64::from(e.length));
        Ok(file
            .max(indexed)
            .max(self.min_len.load(std::sync::atomic::Ordering::Acquire)))
    }

    fn set_len(&self, len: u64) -> h5_io::Result<()> {
        Err(refuse(IoOp::SetLen, len))
    }

    fn sync(&self) -> h5_io::Result<()> {
        Ok(())
    }

    /// A reader changes nothing: there is nothing to commit.
    fn commit(&self, _point: &h5_io::CommitPoint) -> h5_io::Result<()> {
        Ok(())
    }

    /// A reader writes nothing, so journals nothing.
    fn journals_overwrites(&self) -> bool {
        false
    }

    fn lock(&self, mode: LockMode) -> h5_io::Result<()> {
        self.hdf5.lock(mode)
    }

    fn unlock(&self) -> h5_io::Result<()> {
        self.hdf5.unlock()
    }

    fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> h5_io::Result<()> {
        for s in segments.iter() {
            s.offset
                .checked_add(s.buf.len() as u64)
                .ok_or(h5_io::Error::AddressOverflow {
                    offset: s.offset,
                    len: s.buf.len() as u64,
                })?;
        }
        for s in segments.iter_mut() {
            self.read_at(s.offset, s.buf)?;
        }
        Ok(())
    }

    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> h5_io::Result<()> {
        Err(refuse(
            IoOp::WriteVectored,
            segments.first().map_or(0, |s| s.offset),
        ))
    }
}
