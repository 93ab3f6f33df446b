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
    /// Legacy SWMR writing refused: the file cannot enter the mode, or the operation is not
    /// allowed in it.
    #[error(transparent)]
    SwmrWrite(#[from] crate::legacy_swmr::SwmrWriteError),
    /// The operation needs more memory than can be had: a buffer of `bytes` bytes (saturated at
    /// `u64::MAX` when the size overflows) for `what`, derived from the file (a dataset's
    /// dimensions × element size, a count). Refused before anything is allocated; reading in
    /// parts (a selection, `h5 dump`'s blocks) still works.
    #[error("{what}: {bytes} bytes do not fit in memory")]
    TooLarge {
        /// What would have been allocated (a dataset read, an attribute, a chunk).
        what: String,
        /// Bytes it needs.
        bytes: u64,
    },
    /// Following links met more soft or external links than the limit: a loop (or a chain too
    /// long to be anything else), as libhdf5 reports it ("too many links").
    #[error("{path}: too many {kind} links (a loop?)")]
    TooManyLinks {
        /// Where resolution stopped.
        path: String,
        /// `"soft"` or `"external"`.
        kind: &'static str,
    },
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

/// What kind of failure an [`Error`] is, whatever layer it came from: what a caller branches on
/// ([`Error::kind`]).
#[non_exhaustive]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ErrorKind {
    /// The file is damaged: a structure fails its checks (signature, version, checksum, field
    /// values, sizes that do not fit what the file holds), is truncated, or points past the end
    /// of the file; a filter found a chunk's data corrupt.
    Corrupted,
    /// The file is not an HDF5 file (no superblock signature).
    NotHdf5,
    /// A valid feature this implementation does not support (a filter not built in, a message
    /// version, a datatype class).
    Unsupported,
    /// The operation needs more memory than can be had ([`Error::TooLarge`]).
    TooLarge,
    /// No such object, attribute or link.
    NotFound,
    /// Link resolution met too many soft or external links (a loop).
    TooManyLinks,
    /// The storage failed (an I/O error of the operating system, a lock held elsewhere).
    Io,
    /// A bad argument: shape, selection, buffer size, a type conversion that is impossible or
    /// would lose values, an object of another kind.
    Invalid,
    /// Refused by the file's state: opened read-only, marked open for writing, a name that
    /// exists, an earlier failed write.
    State,
    /// An internal error (a poisoned lock, a cache invariant).
    Internal,
}

/// The kind of a boxed error from a layer's callback (the metadata cache's clients, the chunk
/// cache's layouts): the typed errors this workspace puts there, [`ErrorKind::Corrupted`] for
/// anything else (a layout callback's plain message is about the file's contents).
fn boxed_kind(e: &(dyn std::error::Error + 'static)) -> ErrorKind {
    if let Some(e) = e.downcast_ref::<Error>() {
        e.kind()
    } else if let Some(e) = e.downcast_ref::<FormatError>() {
        format_kind(e)
    } else if let Some(e) = e.downcast_ref::<h5_filters::FilterError>() {
        filter_kind(e)
    } else if let Some(e) = e.downcast_ref::<h5_io::Error>() {
        io_kind(e)
    } else if let Some(e) = e.downcast_ref::<h5_metacache::CacheError>() {
        cache_kind(e)
    } else if let Some(e) = e.downcast_ref::<h5_chunkcache::ChunkCacheError>() {
        chunks_kind(e)
    } else if let Some(e) = e.downcast_ref::<crate::convert::ConvertError>() {
        let _ = e;
        ErrorKind::Invalid
    } else {
        ErrorKind::Corrupted
    }
}

fn format_kind(e: &FormatError) -> ErrorKind {
    match e {
        FormatError::Unsupported { .. } => ErrorKind::Unsupported,
        _ => ErrorKind::Corrupted,
    }
}

fn filter_kind(e: &h5_filters::FilterError) -> ErrorKind {
    use h5_filters::FilterError as F;
    match e {
        F::Unknown { .. } | F::Unsupported { .. } => ErrorKind::Unsupported,
        F::EncodeFailed { .. } => ErrorKind::Invalid,
        F::TooLarge { .. } => ErrorKind::TooLarge,
        _ => ErrorKind::Corrupted,
    }
}

fn io_kind(e: &h5_io::Error) -> ErrorKind {
    match e {
        // Reads are only asked where the file's structures say: past the end, they are wrong.
        h5_io::Error::OutOfBounds { .. } | h5_io::Error::AddressOverflow { .. } => {
            ErrorKind::Corrupted
        }
        _ => ErrorKind::Io,
    }
}

fn cache_kind(e: &h5_metacache::CacheError) -> ErrorKind {
    use h5_metacache::CacheError as C;
    match e {
        C::Io(e) => io_kind(e),
        C::Client { source, .. } => boxed_kind(source.as_ref()),
        C::PastEndOfAllocation { .. }
        | C::Checksum { .. }
        | C::LoadSizeGrew { .. }
        | C::InvalidSize { .. }
        | C::Overlap { .. } => ErrorKind::Corrupted,
        C::Config(_) | C::InvalidArgument { .. } | C::InvalidFlags { .. } => ErrorKind::Invalid,
        _ => ErrorKind::Internal,
    }
}

fn chunks_kind(e: &h5_chunkcache::ChunkCacheError) -> ErrorKind {
    use h5_chunkcache::ChunkCacheError as C;
    match e {
        C::Layout { source, .. } => boxed_kind(source.as_ref()),
        C::Io(e) => io_kind(e),
        C::InvalidLayout { .. } | C::InvalidLayoutSizes { .. } => ErrorKind::Corrupted,
        C::Config { .. }
        | C::Selection(_)
        | C::BufferSize { .. }
        | C::Misaligned { .. }
        | C::OutOfExtent { .. }
        | C::NotAllocated { .. }
        | C::BufferTooSmall { .. } => ErrorKind::Invalid,
        C::DefinedNotSupported { .. } | C::NotCached(_) => ErrorKind::Unsupported,
        _ => ErrorKind::Internal,
    }
}

impl Error {
    /// What kind of failure this is, looking through [`Error::Context`] and the errors of the
    /// layers below (a damaged structure behind a metadata cache load or a chunk decode is
    /// [`ErrorKind::Corrupted`] however deep it was found).
    pub fn kind(&self) -> ErrorKind {
        match self.inner() {
            Error::Format(e) => format_kind(e),
            Error::Cache(e) => cache_kind(e),
            Error::Chunks(e) => chunks_kind(e),
            Error::Io(e) => io_kind(e),
            Error::FilterSetup(_) | Error::Convert(_) | Error::Invalid(_) => ErrorKind::Invalid,
            Error::WrongKind { .. } => ErrorKind::Invalid,
            Error::NotHdf5 => ErrorKind::NotHdf5,
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::Unsupported(_) => ErrorKind::Unsupported,
            Error::TooLarge { .. } => ErrorKind::TooLarge,
            Error::TooManyLinks { .. } => ErrorKind::TooManyLinks,
            Error::Alloc(_) => ErrorKind::Internal,
            Error::ReadOnly
            | Error::Exists(_)
            | Error::Failed(_)
            | Error::OpenForWriting { .. }
            | Error::Closed
            | Error::NeedsRecovery(_) => ErrorKind::State,
            Error::Poisoned | Error::Context { .. } => ErrorKind::Internal,
            Error::PageBuffer(e) => page_buffer_kind(e),
            Error::Swmr(e) => swmr_kind(e),
            Error::SwmrWrite(_) => ErrorKind::State,
        }
    }

    /// The error a layout callback returned (a chunk index lookup, a chunk decode) made typed:
    /// the engine's or the format's error it carries, else the message as the corruption of
    /// `structure` it reports.
    pub fn from_layout(e: h5_chunkcache::LayoutError, structure: &'static str) -> Error {
        match e.downcast::<Error>() {
            Ok(e) => *e,
            Err(e) => match e.downcast::<FormatError>() {
                Ok(e) => Error::Format(*e),
                Err(e) => match e.downcast::<h5_io::Error>() {
                    Ok(e) => Error::Io(*e),
                    Err(e) => Error::Format(FormatError::Corrupted {
                        structure,
                        address: u64::MAX,
                        reason: e.to_string(),
                    }),
                },
            },
        }
    }

    /// [`Error::TooLarge`] for a buffer of `bytes` bytes (`None`: the size overflows) for
    /// `what`.
    pub fn too_large(what: impl Into<String>, bytes: Option<u64>) -> Error {
        Error::TooLarge {
            what: what.into(),
            bytes: bytes.unwrap_or(u64::MAX),
        }
    }

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

/// The kind of a page buffer error: its settings are arguments; its I/O is the storage's.
fn page_buffer_kind(e: &h5_pagebuf::PageBufferError) -> ErrorKind {
    use h5_pagebuf::PageBufferError as P;
    match e {
        P::Io(io) => io_kind(io),
        P::RequiresPagedStrategy | P::WrongMode { .. } => ErrorKind::State,
        P::Poisoned => ErrorKind::Internal,
        _ => ErrorKind::Invalid,
    }
}

/// The kind of a VFD SWMR error: configuration errors are arguments, the state of the files
/// and of end of tick is state, damaged metadata files are corruption.
fn swmr_kind(e: &h5_swmr::SwmrError) -> ErrorKind {
    use h5_swmr::SwmrError as S;
    match e {
        S::Io(io) => io_kind(io),
        S::PageBuffer(p) => page_buffer_kind(p),
        S::Config { .. } | S::WriterFlagMismatch { .. } | S::PathTooLong { .. } => {
            ErrorKind::Invalid
        }
        S::CorruptMdFile { .. } | S::PersistentTorn { .. } | S::EntryChecksum { .. } => {
            ErrorKind::Corrupted
        }
        S::FormatLimit { .. } => ErrorKind::Unsupported,
        S::Fs { .. } | S::Updater { .. } | S::Timeout { .. } => ErrorKind::Io,
        S::Poisoned => ErrorKind::Internal,
        _ => ErrorKind::State,
    }
}
