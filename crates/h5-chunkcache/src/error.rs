//! Errors of the chunk cache.

use crate::DatasetId;
use crate::layout::LayoutError;
use crate::selection::SelectionError;

/// Everything a [`ChunkCache`](crate::cache::ChunkCache) operation can report.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ChunkCacheError {
    /// A configuration value is not acceptable.
    #[error("invalid configuration `{field}`: {reason}")]
    Config {
        /// The field.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// The dataset is not registered.
    #[error("dataset {0:?} is not registered")]
    UnknownDataset(DatasetId),
    /// The dataset is already registered.
    #[error("dataset {0:?} is already registered")]
    AlreadyRegistered(DatasetId),
    /// The layout's constants are unusable.
    #[error("dataset {dataset:?}: invalid layout: {reason}")]
    InvalidLayout {
        /// The dataset.
        dataset: DatasetId,
        /// Why.
        reason: String,
    },
    /// The caller's buffer does not have the selection's size.
    #[error("buffer size: {needed} bytes needed, {got} given")]
    BufferSize {
        /// Bytes the selection needs.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// The selection does not fit the dataset.
    #[error(transparent)]
    Selection(#[from] SelectionError),
    /// A layout callback failed.
    #[error("dataset {dataset:?}, chunk {coord:?}: layout callback `{callback}` failed: {source}")]
    Layout {
        /// The dataset.
        dataset: DatasetId,
        /// The chunk's scaled coordinates (empty for batched calls).
        coord: Vec<u64>,
        /// Which callback.
        callback: &'static str,
        /// The layout's error.
        source: LayoutError,
    },
    /// A layout callback returned a result of the wrong size or count.
    #[error(
        "dataset {dataset:?}: layout callback `{callback}` returned {got}, expected {expected}"
    )]
    InvalidLayoutSizes {
        /// The dataset.
        dataset: DatasetId,
        /// Which callback.
        callback: &'static str,
        /// What was expected (bytes or results).
        expected: usize,
        /// What was returned.
        got: usize,
    },
    /// The operation needs a layout that tracks defined elements and uses the cache (erase,
    /// EC-01); nothing was changed.
    #[error("dataset {dataset:?}: defined elements not supported for this layout: {reason}")]
    DefinedNotSupported {
        /// The dataset.
        dataset: DatasetId,
        /// Why.
        reason: &'static str,
    },
    /// The operation needs the cache, but the dataset's layout does not use it (EC-02).
    #[error("dataset {0:?}: its layout does not use the chunk cache")]
    NotCached(DatasetId),
    /// A direct chunk operation's offset is not on a chunk boundary.
    #[error("offset {offset:?} is not aligned to the chunk dimensions {chunk_dims:?}")]
    Misaligned {
        /// The element offset given.
        offset: Vec<u64>,
        /// The chunk dimensions.
        chunk_dims: Vec<u64>,
    },
    /// A direct chunk operation's offset lies outside the current extent.
    #[error("offset {offset:?} is outside the extent {extent:?}")]
    OutOfExtent {
        /// The element offset given.
        offset: Vec<u64>,
        /// The current extent.
        extent: Vec<u64>,
    },
    /// A direct chunk read of a chunk that has no storage (and no dirty cached copy).
    #[error("chunk at offset {offset:?} is not allocated")]
    NotAllocated {
        /// The element offset given.
        offset: Vec<u64>,
    },
    /// A direct chunk read's buffer cannot hold the chunk; nothing was copied.
    #[error("buffer too small: {needed} bytes needed")]
    BufferTooSmall {
        /// The chunk's size on disk.
        needed: usize,
    },
    /// An internal invariant was broken (a bug in the cache); nothing was lost silently.
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// Storage I/O failed.
    #[error(transparent)]
    Io(#[from] h5_io::Error),
}

/// Result alias of the chunk cache.
pub type Result<T, E = ChunkCacheError> = std::result::Result<T, E>;
