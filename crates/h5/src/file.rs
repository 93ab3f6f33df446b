//! Opening files.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use h5_chunkcache::{ChunkCacheConfig, ChunkCacheStats};
use h5_core::file::{CacheSettings, FileShared};
use h5_core::free_space::PersistedSpace;
use h5_io::{Locking, Storage};
use h5_metacache::{CacheConfig, Stats};
use h5_pagebuf::{PageBufferConfig, PageBufferStats};

use crate::open::{Mode, explain, open_path};
use crate::{Dataset, Error, Group, Result};

/// `e`, from opening the file at `path`, naming the file when it comes from the layers below.
fn in_file(e: Error, path: &Path) -> Error {
    e.in_object(|| path.display().to_string(), "/")
}

/// Wraps the storage of a file opened by path (see [`FileAccess::storage_decorator`]).
pub type StorageDecorator = Arc<dyn Fn(Arc<dyn Storage>) -> Arc<dyn Storage> + Send + Sync>;

/// How to open a file: cache configurations (the seed's defaults otherwise), locking,
/// durability and crash safety.
#[derive(Clone, Default)]
pub struct FileAccess {
    settings: CacheSettings,
    locking: Locking,
    no_journal: bool,
    swmr_write: bool,
    decorator: Option<StorageDecorator>,
}

impl std::fmt::Debug for FileAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileAccess")
            .field("settings", &self.settings)
            .field("locking", &self.locking)
            .field("rollback_journal", &!self.no_journal)
            .field("swmr_write", &self.swmr_write)
            .field("storage_decorator", &self.decorator.is_some())
            .finish()
    }
}

impl FileAccess {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The metadata cache's configuration.
    pub fn metadata_cache(mut self, config: CacheConfig) -> Self {
        self.settings.metadata = Some(config);
        self
    }

    /// The chunk cache's configuration.
    pub fn chunk_cache(mut self, config: ChunkCacheConfig) -> Self {
        self.settings.chunks = config;
        self
    }

    /// Re-validate the whole metadata cache after every call when `h5-metacache` is built with
    /// its `extreme-checks` feature (the workspace's test builds); a no-op otherwise. For tests
    /// with small caches: the check costs O(cached entries) per call.
    pub fn metadata_invariant_checks(mut self, on: bool) -> Self {
        self.settings.invariant_checks = on;
        self
    }

    /// Open files whose superblock says a writer has them open (a writer that is still running,
    /// or died without closing the file: libhdf5 leaves version 3 superblocks so) instead of
    /// refusing them with [`crate::Error::OpenForWriting`], libhdf5's behaviour and the
    /// default. The values read may be inconsistent when the writer is still running or died
    /// in the middle of a flush; [`File::marked_open_for_writing`] tells the caller to warn.
    /// [`crate::clear_status_flags`] (`h5 clear`) resets the flags for good.
    pub fn ignore_open_for_writing(mut self, on: bool) -> Self {
        self.settings.ignore_open_for_writing = on;
        self
    }

    /// File locking, as libhdf5's `H5Pset_file_locking`: `use_locking` takes an OS lock
    /// (`flock`) shared for readers and exclusive for writers; `ignore_when_disabled` treats a
    /// file system without locks as success. The default is libhdf5's (both on). The
    /// environment variable `HDF5_USE_FILE_LOCKING` (`TRUE`/`1`, `FALSE`/`0`, `BEST_EFFORT`)
    /// overrides this setting, as in libhdf5. Whatever the setting, a file is never open twice
    /// in one process in conflicting modes (a second writer, or readers and a writer):
    /// `h5_io::Error::AlreadyOpen`.
    pub fn file_locking(mut self, use_locking: bool, ignore_when_disabled: bool) -> Self {
        self.locking = match (use_locking, ignore_when_disabled) {
            (false, _) => Locking::Disabled,
            (true, true) => Locking::BestEffort,
            (true, false) => Locking::Enabled,
        };
        self
    }

    /// Make `flush` and `close` durable: the file is synced (`fsync`) at every flush, and the
    /// rollback journal is synced in the order that survives power loss (docs/design.md §6).
    /// Off by default, as in libhdf5: a completed flush then survives a killed process, and a
    /// power cut only once the operating system has written its cache.
    ///
    /// ```
    /// let access = h5::FileAccess::new().sync(true);
    /// # let dir = tempfile::tempdir().unwrap();
    /// let file = h5::File::create_with(dir.path().join("d.h5"), &access, &Default::default())?;
    /// file.close()?; // flushed and fsynced
    /// # Ok::<(), h5::Error>(())
    /// ```
    pub fn sync(mut self, on: bool) -> Self {
        self.settings.sync = on;
        self
    }

    /// Keep a rollback journal (`<file>-journal`) while the file is open for writing, so that
    /// a writer killed at any instant leaves the file as of its last completed flush (on by
    /// default; see docs/design.md §6). Off, a kill during a flush, or after a flush while
    /// flushed structures are changed in place, can leave a file mixing two states, as with
    /// libhdf5. A hot journal left by an earlier writer is rolled back either way.
    pub fn rollback_journal(mut self, on: bool) -> Self {
        self.no_journal = !on;
        self
    }

    /// Wraps the storage of files opened by path (`open`, `open_rw`, `create`) before the
    /// engine and its rollback journal use it: metrics, logging or fault injection
    /// (`h5_io::{Metrics, Logging, FaultInjection}`).
    pub fn storage_decorator(
        mut self,
        f: impl Fn(Arc<dyn Storage>) -> Arc<dyn Storage> + Send + Sync + 'static,
    ) -> Self {
        self.decorator = Some(Arc::new(f));
        self
    }

    /// A page buffer of the given settings between both caches and the file (libhdf5's
    /// `H5Pset_page_buffer_size`; the percentages are checked by [`PageBufferConfig::new`]).
    /// Opening or creating a file then needs the paged file-space strategy
    /// ([`crate::FileSpaceOptions`] with [`crate::SpaceStrategy::Page`]), and a size of at
    /// least one page (larger sizes are rounded down to whole pages).
    pub fn page_buffer(mut self, config: PageBufferConfig) -> Self {
        self.settings.page_buffer = Some(config);
        self
    }

    /// Read a file a legacy SWMR writer has open (libhdf5's `H5F_ACC_SWMR_READ`, h5py's
    /// `File(..., swmr=True)`): a version 3 superblock marked by a SWMR writer (both the write
    /// and the SWMR-write status flags) is accepted instead of refused with
    /// [`crate::Error::OpenForWriting`]. Follow the writer with [`Dataset::refresh`].
    pub fn swmr_read(mut self, on: bool) -> Self {
        self.settings.swmr_read = on;
        self
    }

    /// Open for legacy SWMR writing (libhdf5's `H5F_ACC_SWMR_WRITE`): [`File::open_rw_with`]
    /// enters the mode at once, as [`File::start_swmr_write`] does (see it for the rules).
    pub fn swmr_write(mut self, on: bool) -> Self {
        self.swmr_write = on;
        self
    }

    /// Whether files are opened for legacy SWMR writing.
    pub fn is_swmr_write(&self) -> bool {
        self.swmr_write
    }

    pub(crate) fn settings(&self) -> &CacheSettings {
        &self.settings
    }

    pub(crate) fn settings_mut(&mut self) -> &mut CacheSettings {
        &mut self.settings
    }

    pub(crate) fn locking(&self) -> Locking {
        self.locking
    }

    pub(crate) fn journal(&self) -> bool {
        !self.no_journal
    }

    pub(crate) fn decorate(&self, s: Arc<dyn Storage>) -> Arc<dyn Storage> {
        match &self.decorator {
            Some(f) => f(s),
            None => s,
        }
    }
}

/// An open HDF5 file.
///
/// Dereferences to its root [`Group`], so every group call works on the file itself
/// (`file.dataset("a/b")`, `file.create_group("g")`, `file.new_dataset::<T>()`,
/// `file.attr("title")`, `file.walk()`), as hdf5-metno's `File` does.
///
/// Cheap to clone: clones share the open file (its caches and, for a writable file, its
/// changes); the file is flushed when the last handle to it, including every group and
/// dataset handle, is dropped. `Send + Sync`: handles may move to and be used from several
/// threads at once. Reads of the same or of different datasets overlap (the chunk cache's
/// lock is released while chunks are read and decoded); changes (writes, resizes, new
/// objects) are serialised by the file's locks, each one applied whole.
///
/// A file opened by path holds an OS lock (shared for reading, exclusive for writing, as
/// libhdf5 does) until it is closed: [`File::close`], or dropping the last handle of the file
/// (the `File`s, groups, datasets and attributes). After `close` every handle of the file
/// refuses calls with [`Error::Closed`](crate::Error::Closed) (libhdf5's strong close degree,
/// as h5py's `File.close`).
///
/// ```
/// # fn main() -> h5::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("file.h5");
/// let file = h5::File::create(&path)?;
/// file.new_dataset::<i32>().shape([3]).create("x")?.write(&[1, 2, 3])?;
/// file.close()?;
/// let file = h5::File::open(&path)?;
/// assert_eq!(file.dataset("x")?.read_vec::<i64>()?, [1, 2, 3]);
/// assert_eq!(file.member_names()?, ["x"]);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct File {
    root: Group,
    path: Option<PathBuf>,
}

impl Deref for File {
    type Target = Group;

    fn deref(&self) -> &Group {
        &self.root
    }
}

impl File {
    /// Opens the file at `path` for reading.
    pub fn open(path: impl AsRef<Path>) -> Result<File> {
        crate::swmr::api(|| Self::open_with(path, &FileAccess::default()))
    }

    /// Opens the file at `path` for reading with the given cache settings.
    pub fn open_with(path: impl AsRef<Path>, access: &FileAccess) -> Result<File> {
        crate::swmr::api(|| {
            let path = path.as_ref();
            if access.settings.swmr.is_some() {
                let shared = crate::swmr::open(path, access, false)
                    .map_err(|e| in_file(explain(path, e), path))?;
                return Ok(File::from_shared(shared, Some(path.to_path_buf())));
            }
            let opened = open_path(path, Mode::Read, access)?;
            let dir = path.parent().map(Path::to_path_buf);
            let shared = FileShared::open(Arc::clone(&opened.storage), &access.settings, dir)
                .map_err(|e| in_file(explain(path, e), path))?;
            opened.attach(&shared);
            Ok(File::from_shared(shared, Some(path.to_path_buf())))
        })
    }

    /// Whether the superblock says a writer has the file open (only such files opened with
    /// [`FileAccess::ignore_open_for_writing`] are): a caller may warn that values can be
    /// inconsistent.
    pub fn marked_open_for_writing(&self) -> bool {
        self.shared().marked_open_for_writing()
    }

    /// Opens an HDF5 image held by any storage (for example in memory). External links and
    /// external raw data resolve against `dir` when given.
    pub fn from_storage(
        storage: Arc<dyn Storage>,
        access: &FileAccess,
        dir: Option<PathBuf>,
    ) -> Result<File> {
        crate::swmr::api(|| {
            crate::swmr::refuse_storage(access)?;
            Ok(File::from_shared(
                FileShared::open(storage, &access.settings, dir)?,
                None,
            ))
        })
    }

    pub(crate) fn from_shared(shared: Arc<FileShared>, path: Option<PathBuf>) -> File {
        if let Some(p) = &path {
            shared.set_path(p);
        }
        File {
            root: Group::root(&shared),
            path,
        }
    }

    pub(crate) fn shared(&self) -> &Arc<FileShared> {
        self.root.file_shared()
    }

    /// The path the file was opened from (`None` for other storage).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The superblock version (0–3).
    pub fn superblock_version(&self) -> u8 {
        self.shared().superblock().version
    }

    /// The root group (the group `File` dereferences to).
    pub fn root(&self) -> Result<Group> {
        crate::swmr::api(|| {
            self.shared().check_open()?;
            Ok(self.root.clone())
        })
    }

    /// Reads several datasets in one chunk-cache call, returning each one's elements (file
    /// representation, C order).
    pub fn read_many_raw(&self, datasets: &[&Dataset]) -> Result<Vec<Vec<u8>>> {
        crate::swmr::api(|| {
            let mut bufs: Vec<Vec<u8>> = datasets
                .iter()
                .map(|d| {
                    let len = (d.size() as u64).checked_mul(d.element_size() as u64);
                    h5_core::buffer::zeroed(|| format!("reading {}", d.path()), len)
                })
                .collect::<Result<_>>()?;
            let infos: Vec<_> = datasets.iter().map(|d| d.info()).collect();
            let all = h5_chunkcache::selection::Selection::All;
            let mut reqs: Vec<(
                &h5_core::dataset::DatasetInfo,
                &h5_chunkcache::selection::Selection,
                &mut [u8],
            )> = infos
                .iter()
                .zip(bufs.iter_mut())
                .map(|(d, b)| (&**d, &all, b.as_mut_slice()))
                .collect();
            h5_core::dataset::read_many(self.shared(), &mut reqs).map_err(|e| self.wrap(e))?;
            Ok(bufs)
        })
    }

    /// The page buffer's statistics so far (`None` without a page buffer).
    pub fn page_buffer_stats(&self) -> Option<PageBufferStats> {
        self.shared().page_buffer_stats()
    }

    /// The metadata cache's statistics so far.
    pub fn metadata_cache_stats(&self) -> Result<Stats> {
        crate::swmr::api(|| self.shared().metadata_cache_stats())
    }

    /// The chunk cache's statistics so far.
    pub fn chunk_cache_stats(&self) -> Result<ChunkCacheStats> {
        crate::swmr::api(|| self.shared().chunk_cache_stats())
    }

    /// The file's file-space settings (strategy, threshold, page size) and the free space
    /// libhdf5 persisted in it, by free list; `None` for a file with libhdf5's default
    /// settings (FSM_AGGR, nothing persisted), which records none.
    pub fn persisted_free_space(&self) -> Result<Option<PersistedSpace>> {
        crate::swmr::api(|| self.shared().persisted_free_space())
    }
}
