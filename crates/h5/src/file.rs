//! Opening files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use h5_chunkcache::{ChunkCacheConfig, ChunkCacheStats};
use h5_core::file::{CacheSettings, FileShared};
use h5_core::free_space::PersistedSpace;
use h5_io::{Locking, Storage};
use h5_metacache::{CacheConfig, Stats};

use crate::open::{Mode, explain, open_path};
use crate::{Dataset, Group, Result};

/// Wraps the storage of a file opened by path (see [`FileAccess::storage_decorator`]).
pub type StorageDecorator = Arc<dyn Fn(Arc<dyn Storage>) -> Arc<dyn Storage> + Send + Sync>;

/// How to open a file: cache configurations (the seed's defaults otherwise), locking,
/// durability and crash safety.
#[derive(Clone, Default)]
pub struct FileAccess {
    settings: CacheSettings,
    locking: Locking,
    no_journal: bool,
    decorator: Option<StorageDecorator>,
}

impl std::fmt::Debug for FileAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileAccess")
            .field("settings", &self.settings)
            .field("locking", &self.locking)
            .field("rollback_journal", &!self.no_journal)
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

    pub(crate) fn settings(&self) -> &CacheSettings {
        &self.settings
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

/// An open HDF5 file. Cheap to clone; `Send + Sync`: several threads may read at once.
///
/// A file opened by path holds an OS lock (shared for reading, exclusive for writing, as
/// libhdf5 does) until it is closed: [`File::close`], or dropping the last handle of the file
/// (the `File`s, groups, datasets and attributes). After `close` every handle of the file
/// refuses calls with [`Error::Closed`](crate::Error::Closed) (libhdf5's strong close degree,
/// as h5py's `File.close`).
#[derive(Clone, Debug)]
pub struct File {
    shared: Arc<FileShared>,
    path: Option<PathBuf>,
}

impl File {
    /// Opens the file at `path` for reading.
    pub fn open(path: impl AsRef<Path>) -> Result<File> {
        Self::open_with(path, &FileAccess::default())
    }

    /// Opens the file at `path` for reading with the given cache settings.
    pub fn open_with(path: impl AsRef<Path>, access: &FileAccess) -> Result<File> {
        let path = path.as_ref();
        let opened = open_path(path, Mode::Read, access)?;
        let dir = path.parent().map(Path::to_path_buf);
        let shared = FileShared::open(opened.storage, &access.settings, dir)
            .map_err(|e| explain(path, e))?;
        shared.storage().set_on_close(opened.on_close);
        Ok(File {
            shared,
            path: Some(path.to_path_buf()),
        })
    }

    /// Opens an HDF5 image held by any storage (for example in memory). External links and
    /// external raw data resolve against `dir` when given.
    pub fn from_storage(
        storage: Arc<dyn Storage>,
        access: &FileAccess,
        dir: Option<PathBuf>,
    ) -> Result<File> {
        Ok(File {
            shared: FileShared::open(storage, &access.settings, dir)?,
            path: None,
        })
    }

    pub(crate) fn from_shared(shared: Arc<FileShared>, path: Option<PathBuf>) -> File {
        File { shared, path }
    }

    pub(crate) fn shared(&self) -> &Arc<FileShared> {
        &self.shared
    }

    /// The path the file was opened from.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The superblock version (0–3).
    pub fn superblock_version(&self) -> u8 {
        self.shared.superblock().version
    }

    /// The root group.
    pub fn root(&self) -> Result<Group> {
        Group::open(&self.shared, "/")
    }

    /// The group at `path`.
    pub fn group(&self, path: &str) -> Result<Group> {
        Group::open(&self.shared, path)
    }

    /// The dataset at `path`.
    pub fn dataset(&self, path: &str) -> Result<Dataset> {
        Dataset::open(&self.shared, path)
    }

    /// Names of the root group's members, sorted.
    pub fn member_names(&self) -> Result<Vec<String>> {
        self.root()?.member_names()
    }

    /// Reads several datasets in one chunk-cache call, returning each one's elements (file
    /// representation, C order).
    pub fn read_many_raw(&self, datasets: &[&Dataset]) -> Result<Vec<Vec<u8>>> {
        let mut bufs: Vec<Vec<u8>> = datasets
            .iter()
            .map(|d| vec![0u8; d.size() * d.element_size()])
            .collect();
        let all = h5_chunkcache::selection::Selection::All;
        let mut reqs: Vec<(
            &h5_core::dataset::DatasetInfo,
            &h5_chunkcache::selection::Selection,
            &mut [u8],
        )> = datasets
            .iter()
            .zip(bufs.iter_mut())
            .map(|(d, b)| (d.info(), &all, b.as_mut_slice()))
            .collect();
        h5_core::dataset::read_many(&self.shared, &mut reqs)?;
        Ok(bufs)
    }

    /// The metadata cache's statistics so far.
    pub fn metadata_cache_stats(&self) -> Result<Stats> {
        self.shared.metadata_cache_stats()
    }

    /// The chunk cache's statistics so far.
    pub fn chunk_cache_stats(&self) -> Result<ChunkCacheStats> {
        self.shared.chunk_cache_stats()
    }

    /// The file's file-space settings (strategy, threshold, page size) and the free space
    /// libhdf5 persisted in it, by free list; `None` for a file with libhdf5's default
    /// settings (FSM_AGGR, nothing persisted), which records none.
    pub fn persisted_free_space(&self) -> Result<Option<PersistedSpace>> {
        self.shared.persisted_free_space()
    }
}
