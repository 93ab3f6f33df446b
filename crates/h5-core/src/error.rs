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
    /// The superblock's status flags say a writer has the file open (or died without closing
    /// it); libhdf5 refuses it too. `h5 clear FILE` (or `h5clear -s FILE`) resets the flags,
    /// `FileAccess::ignore_open_for_writing` reads it anyway.
    #[error(
        "the file is marked open for writing{} (status flags {flags:#04x}): its writer is still \
         running or died without closing it; if no process writes it, reset the flags with \
         `h5 clear FILE`, or read it anyway with FileAccess::ignore_open_for_writing \
         (`--ignore-open-for-writing` of the h5 command)",
        if flags & crate::file::STATUS_SWMR_WRITE != 0 { " by a SWMR writer" } else { "" }
    )]
    OpenForWriting {
        /// The superblock's status flags.
        flags: u32,
    },
    /// The file was closed (`File::close`): handles that outlive it refuse every call.
    #[error("the file was closed")]
    Closed,
    /// The file was being changed in place by an h5 writer that stopped, and the rollback
    /// journal that would bring it back to its last flush is missing or cannot be applied.
    #[error("{0}")]
    NeedsRecovery(String),
    /// A lock was poisoned by a panic in another thread.
    #[error("internal lock poisoned")]
    Poisoned,
    /// The page buffer's settings do not fit the file, or one of its operations failed.
    #[error(transparent)]
    PageBuffer(#[from] h5_pagebuf::PageBufferError),
    /// VFD SWMR: a configuration, metadata file or end-of-tick error.
    #[error(transparent)]
    Swmr(#[from] h5_swmr::SwmrError),
    /// An error of the layers below (damaged bytes, storage, caches, filters, file space) with
    /// the file and the object it happened in; [`Error::inner`] is the error itself.
    #[error("{file}: {object}: {source}")]
    Context {
        /// The file's path (or a description of its storage).
        file: String,
        /// The object's path in the file.
        object: String,
        /// What went wrong.
        source: Box<Error>,
    },
}

impl Error {
    /// The filter error behind this one, when a filter failed on a chunk (for example a
    /// mandatory filter that could not encode it while writing or flushing).
    pub fn filter_failure(&self) -> Option<&h5_filters::FilterError> {
        match self.inner() {
            Error::Chunks(h5_chunkcache::ChunkCacheError::Layout { source, .. }) => {
                source.downcast_ref::<h5_filters::FilterError>()
            }
            _ => None,
        }
    }

    /// The error without the file and object [`Error::Context`] adds (itself for every other
    /// variant): what to match on.
    pub fn inner(&self) -> &Error {
        match self {
            Error::Context { source, .. } => source.inner(),
            other => other,
        }
    }

    /// Whether the error comes from the layers below the API (bytes, storage, caches,
    /// filters, file space): those are the ones [`Error::Context`] wraps.
    pub fn is_from_below(&self) -> bool {
        matches!(
            self,
            Error::Format(_)
                | Error::Cache(_)
                | Error::Chunks(_)
                | Error::Io(_)
                | Error::Filter(_)
                | Error::Alloc(_)
                | Error::PageBuffer(_)
        )
    }

    /// This error with the file and object it happened in, when it comes from the layers below
    /// and has no context yet; other errors already say what they are about and stay matchable
    /// as they are.
    pub fn in_object(self, file: impl FnOnce() -> String, object: &str) -> Error {
        if self.is_from_below() {
            Error::Context {
                file: file(),
                object: object.to_owned(),
                source: Box::new(self),
            }
        } else {
            self
        }
    }
}

/// Result alias of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;
