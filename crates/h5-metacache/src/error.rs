//! The metadata cache's error type.

use crate::config::ConfigError;

/// An error returned by a client callback. Boxed so that each client (the format engine, a test mock) can
/// return its own error type; callers that need the original can downcast it.
pub type ClientError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The client callback that failed, for [`CacheError::Client`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Callback {
    /// `get_initial_load_size`.
    GetInitialLoadSize,
    /// `get_final_load_size`.
    GetFinalLoadSize,
    /// `verify_checksum`.
    VerifyChecksum,
    /// `deserialize`.
    Deserialize,
    /// `image_len`.
    ImageLen,
    /// `pre_serialize`.
    PreSerialize,
    /// `serialize`.
    Serialize,
    /// `notify`.
    Notify,
    /// `free_icr`.
    FreeIcr,
    /// `clear`.
    Clear,
    /// `get_fsf_size`.
    GetFsfSize,
    /// The file context's `free_file_space`.
    FreeFileSpace,
}

impl std::fmt::Display for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            Callback::GetInitialLoadSize => "get_initial_load_size",
            Callback::GetFinalLoadSize => "get_final_load_size",
            Callback::VerifyChecksum => "verify_checksum",
            Callback::Deserialize => "deserialize",
            Callback::ImageLen => "image_len",
            Callback::PreSerialize => "pre_serialize",
            Callback::Serialize => "serialize",
            Callback::Notify => "notify",
            Callback::FreeIcr => "free_icr",
            Callback::Clear => "clear",
            Callback::GetFsfSize => "get_fsf_size",
            Callback::FreeFileSpace => "free_file_space",
        };
        f.write_str(name)
    }
}

/// Every way a metadata-cache call can fail. Each variant names what a caller can act on; none carries a
/// free-form message.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The storage layer failed.
    #[error("storage error: {0}")]
    Io(#[from] h5_io::Error),
    /// A client callback failed; its error is the source.
    #[error("{class} {callback} failed for the entry at {addr:#x}: {source}")]
    Client {
        /// Name of the client class.
        class: &'static str,
        /// Which callback failed.
        callback: Callback,
        /// Address of the entry concerned.
        addr: u64,
        /// The client's own error.
        #[source]
        source: ClientError,
    },
    /// A configuration was rejected (the cache is unchanged).
    #[error("invalid cache configuration: {0}")]
    Config(#[from] ConfigError),
    /// Construction arguments were invalid.
    #[error("invalid cache construction argument `{what}`: {reason}")]
    InvalidArgument {
        /// The argument.
        what: &'static str,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A class id is not registered, or the class table is malformed.
    #[error("bad class table or class id {id}: {reason}")]
    BadClass {
        /// The class id concerned.
        id: usize,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// The address is already cached (insert, or a move onto an address in use).
    #[error("an entry is already cached at {addr:#x}")]
    AddressInUse {
        /// The address.
        addr: u64,
    },
    /// The block overlaps another cached block (debug check).
    #[error("the block [{addr:#x}, +{size}) overlaps the cached entry at {other:#x}")]
    Overlap {
        /// Start of the new block.
        addr: u64,
        /// Its size.
        size: usize,
        /// The cached entry it overlaps.
        other: u64,
    },
    /// No entry is cached at the address.
    #[error("no entry is cached at {addr:#x}")]
    NotCached {
        /// The address.
        addr: u64,
    },
    /// The cached entry belongs to a different class than the call named.
    #[error("the entry at {addr:#x} is of class {cached}, not {requested}")]
    ClassMismatch {
        /// The address.
        addr: u64,
        /// Class of the cached entry.
        cached: &'static str,
        /// Class the call named.
        requested: &'static str,
    },
    /// A handle no longer refers to the entry it was issued for.
    #[error("stale entry handle")]
    StaleHandle,
    /// The entry's state does not allow the operation (for example unprotecting an unprotected entry).
    #[error("the entry at {addr:#x} is in the wrong state: {reason}")]
    WrongState {
        /// The address.
        addr: u64,
        /// What was wrong.
        reason: &'static str,
    },
    /// The entry is being written, evicted or handed to a callback, and a callback tried to operate on it.
    #[error("the entry at {addr:#x} is busy in a callback of its own")]
    EntryBusy {
        /// The address.
        addr: u64,
    },
    /// A flag is not valid for this call, or flags were combined illegally.
    #[error("invalid flags for {call}: {reason}")]
    InvalidFlags {
        /// The call.
        call: &'static str,
        /// What was wrong.
        reason: &'static str,
    },
    /// A size of zero, or a size that does not fit.
    #[error("invalid size {size} for the entry at {addr:#x}")]
    InvalidSize {
        /// The address.
        addr: u64,
        /// The size.
        size: usize,
    },
    /// A non-speculative read or any write reaches past the end of allocated file space.
    #[error("{what} of [{addr:#x}, +{len}) reaches past the end of allocated space ({eoa:#x})")]
    PastEndOfAllocation {
        /// "read" or "write".
        what: &'static str,
        /// Start address.
        addr: u64,
        /// Length.
        len: usize,
        /// End of allocation.
        eoa: u64,
    },
    /// SWMR-074: with the VFD SWMR page check on, an entry that is not a fixed or extensible
    /// array data block page would be written across a page boundary without starting on one
    /// (an internal error: the file-space manager keeps every other entry inside a page or
    /// page-aligned).
    #[error(
        "{class} at {addr:#x} ({len} bytes) crosses a {page_size}-byte page boundary without \
         starting on one; only array data block pages may"
    )]
    MisalignedWrite {
        /// The entry's class.
        class: &'static str,
        /// Its address.
        addr: u64,
        /// Its length.
        len: usize,
        /// The page size.
        page_size: u64,
    },
    /// A speculative load still reported a larger size after its second attempt, or a compressed
    /// entry's actual size is above its bound.
    #[error("the entry at {addr:#x} reported size {reported}, larger than the {bound} bytes read")]
    LoadSizeGrew {
        /// The address.
        addr: u64,
        /// Bytes read.
        bound: usize,
        /// Size reported by the client.
        reported: usize,
    },
    /// The checksum did not verify after every retry.
    #[error("checksum mismatch in {class} at {addr:#x} after {attempts} reads")]
    Checksum {
        /// Class name.
        class: &'static str,
        /// The address.
        addr: u64,
        /// Number of reads attempted.
        attempts: u32,
    },
    /// A `NO_IO` test class was asked to load.
    #[error("class {class} does no I/O and cannot be loaded")]
    NoIoClass {
        /// Class name.
        class: &'static str,
    },
    /// A flush was requested from inside a flush.
    #[error("flush requested while a flush is in progress")]
    FlushInProgress,
    /// A flush left entries unwritten because they are protected.
    #[error("{count} protected entries could not be flushed")]
    ProtectedEntries {
        /// How many.
        count: usize,
    },
    /// A flush could not write some dirty entries (e.g. their flush-dependency children are protected).
    #[error("{count} dirty entries could not be written")]
    UnflushableEntries {
        /// How many.
        count: usize,
    },
    /// Flush-invalidate stopped making progress with pinned entries left.
    #[error("{count} pinned entries remain and are not being unpinned")]
    PinnedEntriesRemain {
        /// How many.
        count: usize,
    },
    /// Writing is not permitted now (parallel mode between sync points).
    #[error("metadata writes are not permitted now")]
    WriteNotPermitted,
    /// A flush dependency request was invalid.
    #[error("invalid flush dependency {parent:#x} -> {child:#x}: {reason}")]
    FlushDependency {
        /// The parent address.
        parent: u64,
        /// The child address.
        child: u64,
        /// What was wrong.
        reason: &'static str,
    },
    /// Tags are enforced (`ignore_tags` off) and no current tag was set.
    #[error("no current tag set for the entry at {addr:#x} while tags are enforced")]
    MissingTag {
        /// The address.
        addr: u64,
    },
    /// The trace file could not be written.
    #[error("trace file error: {0}")]
    Trace(#[source] std::io::Error),
    /// An internal invariant was violated (a bug; reported rather than panicking in release builds).
    #[error("metadata cache invariant violated: {0}")]
    Invariant(&'static str),
}

/// Result alias for the metadata cache.
pub type Result<T, E = CacheError> = std::result::Result<T, E>;

/// A failed [`unprotect`](crate::MetadataCache::unprotect).
///
/// When the call was rejected before it changed anything, `handle` gives the protection back so that
/// the caller can release it properly (otherwise the entry would stay protected for good). Converts
/// into [`CacheError`] with `?`.
#[derive(Debug)]
pub struct UnprotectError {
    /// What went wrong.
    pub error: CacheError,
    /// The still-held protection, when nothing was changed.
    pub handle: Option<crate::ProtectHandle>,
}

impl std::fmt::Display for UnprotectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for UnprotectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.error)
    }
}

impl From<UnprotectError> for CacheError {
    fn from(e: UnprotectError) -> Self {
        e.error
    }
}
