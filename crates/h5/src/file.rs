//! Opening files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use h5_chunkcache::{ChunkCacheConfig, ChunkCacheStats};
use h5_core::file::{CacheSettings, FileShared};
use h5_core::free_space::PersistedSpace;
use h5_io::{FileStorage, OpenMode, Storage};
use h5_metacache::{CacheConfig, Stats};
use h5_pagebuf::{PageBufferConfig, PageBufferStats};

use crate::{Dataset, Group, Result};

/// How to open a file: cache configurations (the seed's defaults otherwise).
#[derive(Clone, Debug, Default)]
pub struct FileAccess {
    settings: CacheSettings,
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

    /// A page buffer of the given settings between both caches and the file (libhdf5's
    /// `H5Pset_page_buffer_size`; the percentages are checked by [`PageBufferConfig::new`]).
    /// Opening or creating a file then needs the paged file-space strategy
    /// ([`crate::FileSpaceOptions`] with [`crate::SpaceStrategy::Page`]), and a size of at
    /// least one page (larger sizes are rounded down to whole pages).
    pub fn page_buffer(mut self, config: PageBufferConfig) -> Self {
        self.settings.page_buffer = Some(config);
        self
    }

    /// Re-validate the whole metadata cache after every call when `h5-metacache` is built with
    /// its `extreme-checks` feature (the workspace's test builds); a no-op otherwise. For tests
    /// with small caches: the check costs O(cached entries) per call.
    pub fn metadata_invariant_checks(mut self, on: bool) -> Self {
        self.settings.invariant_checks = on;
        self
    }

    pub(crate) fn settings(&self) -> &CacheSettings {
        &self.settings
    }

    pub(crate) fn settings_mut(&mut self) -> &mut CacheSettings {
        &mut self.settings
    }
}

/// An open HDF5 file (read-only for now). Cheap to clone; `Send + Sync`: several threads may
/// read at once.
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
        crate::swmr::api(|| {
            let path = path.as_ref();
            if access.settings.swmr.is_some() {
                return Ok(File {
                    shared: FileShared::open_swmr(path, &access.settings, false)?,
                    path: Some(path.to_path_buf()),
                });
            }
            let storage = FileStorage::open(path, OpenMode::ReadOnly)?;
            let dir = path.parent().map(Path::to_path_buf);
            Ok(File {
                shared: FileShared::open(Arc::new(storage), &access.settings, dir)?,
                path: Some(path.to_path_buf()),
            })
        })
    }

    /// Opens an HDF5 image held by any storage (for example in memory). External links and
    /// external raw data resolve against `dir` when given.
    pub fn from_storage(
        storage: Arc<dyn Storage>,
        access: &FileAccess,
        dir: Option<PathBuf>,
    ) -> Result<File> {
        crate::swmr::refuse_storage(access)?;
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
        crate::swmr::api(|| Group::open(&self.shared, "/"))
    }

    /// The group at `path`.
    pub fn group(&self, path: &str) -> Result<Group> {
        crate::swmr::api(|| Group::open(&self.shared, path))
    }

    /// The dataset at `path`.
    pub fn dataset(&self, path: &str) -> Result<Dataset> {
        crate::swmr::api(|| Dataset::open(&self.shared, path))
    }

    /// Names of the root group's members, sorted.
    pub fn member_names(&self) -> Result<Vec<String>> {
        crate::swmr::api(|| self.root()?.member_names())
    }

    /// Reads several datasets in one chunk-cache call, returning each one's elements (file
    /// representation, C order).
    pub fn read_many_raw(&self, datasets: &[&Dataset]) -> Result<Vec<Vec<u8>>> {
        crate::swmr::api(|| {
            let mut bufs: Vec<Vec<u8>> = datasets
                .iter()
                .map(|d| vec![0u8; d.size() * d.element_size()])
                .collect();
            let all = h5_chunkcache::selection::Selection::All;
            let infos: Vec<_> = datasets.iter().map(|d| d.info()).collect();
            let mut reqs: Vec<(
                &h5_core::dataset::DatasetInfo,
                &h5_chunkcache::selection::Selection,
                &mut [u8],
            )> = infos
                .iter()
                .zip(bufs.iter_mut())
                .map(|(i, b)| (&**i, &all, b.as_mut_slice()))
                .collect();
            h5_core::dataset::read_many(&self.shared, &mut reqs)?;
            Ok(bufs)
        })
    }

    /// The metadata cache's statistics so far.
    pub fn metadata_cache_stats(&self) -> Result<Stats> {
        self.shared.metadata_cache_stats()
    }

    /// The page buffer's statistics so far (`None` without a page buffer).
    pub fn page_buffer_stats(&self) -> Option<PageBufferStats> {
        self.shared.page_buffer_stats()
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
