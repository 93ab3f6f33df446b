//! Errors of the engine.

use h5_format::FormatError;

/// Everything the engine can report.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file's bytes are damaged, or a structure is not supported.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The metadata cache failed (its error carries the structure and address).
    #[error(transparent)]
    Cache(#[from] h5_metacache::CacheError),
    /// The chunk cache failed.
    #[error(transparent)]
    Chunks(#[from] h5_chunkcache::ChunkCacheError),
    /// Storage I/O failed.
    #[error(transparent)]
    Io(#[from] h5_io::Error),
    /// A filter failed.
    #[error("filter: {0}")]
    Filter(String),
    /// A filter asked for a new dataset cannot be set up for its datatype or chunks.
    #[error(transparent)]
    FilterSetup(#[from] crate::filters::FilterSetupError),
    /// The file is not an HDF5 file (no superblock signature).
    #[error("not an HDF5 file: no superblock signature found")]
    NotHdf5,
    /// No object at this path.
    #[error("{0}: no such object")]
    NotFound(String),
    /// The object exists but is not of the kind asked for.
    #[error("{path}: {expected} expected, found {found}")]
    WrongKind {
        /// The path.
        path: String,
        /// What was asked for.
        expected: &'static str,
        /// What is there.
        found: &'static str,
    },
    /// Type conversion impossible or refused.
    #[error(transparent)]
    Convert(#[from] crate::convert::ConvertError),
    /// A feature of a valid file that is not supported yet.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The arguments do not fit the object (shape, selection, buffer size).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// File space could not be allocated or freed.
    #[error(transparent)]
    Alloc(#[from] crate::write::alloc::AllocError),
    /// The file was opened read-only and the operation writes.
    #[error("the file is open read-only")]
    ReadOnly,
    /// A name that already exists in the group.
    #[error("{0}: already exists")]
    Exists(String),
    /// An earlier write to the file's storage failed: the handle refuses further changes (the
    /// file on disk holds what was written before; close, reopen and check it).
    #[error("an earlier write to this file failed ({0}); no further changes are accepted")]
    Failed(String),
    /// A lock was poisoned by a panic in another thread.
    #[error("internal lock poisoned")]
    Poisoned,
    /// The page buffer's settings do not fit the file, or one of its operations failed.
    #[error(transparent)]
    PageBuffer(#[from] h5_pagebuf::PageBufferError),
    /// VFD SWMR: a configuration, metadata file or end-of-tick error.
    #[error(transparent)]
    Swmr(#[from] h5_swmr::SwmrError),
}

impl Error {
    /// The filter error behind this one, when a filter failed on a chunk (for example a
    /// mandatory filter that could not encode it while writing or flushing).
    pub fn filter_failure(&self) -> Option<&h5_filters::FilterError> {
        match self {
            Error::Chunks(h5_chunkcache::ChunkCacheError::Layout { source, .. }) => {
                source.downcast_ref::<h5_filters::FilterError>()
            }
            _ => None,
        }
    }
}

/// Result alias of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;
