//! Errors of the file-space allocator.

/// Everything the allocator can refuse. Every variant names the request that was refused; the
/// allocator's state is unchanged when one is returned, except for [`SpaceError::AddressOverflow`]
/// raised in the middle of an operation that had already reused free space (the space stays
/// accounted for: nothing is lost or handed out twice).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpaceError {
    /// A request of zero bytes (allocate, free, or extend by or from zero bytes).
    #[error("zero-length file space request")]
    ZeroLength,
    /// The request would move the end of allocation past the largest address the file's
    /// address size can store.
    #[error(
        "file space request of {len} bytes at end of allocation {eoa:#x} exceeds the largest address {max_eoa:#x}"
    )]
    AddressOverflow {
        /// End of allocation when the request was made.
        eoa: u64,
        /// Bytes the end of allocation had to grow by.
        len: u64,
        /// The largest end of allocation allowed by the address size.
        max_eoa: u64,
    },
    /// A freed (or extended) block reaches past the end of allocation: it was never handed out.
    #[error("block {addr:#x}+{len} lies past the end of allocation {eoa:#x}")]
    PastEoa {
        /// Start of the block.
        addr: u64,
        /// Length of the block.
        len: u64,
        /// End of allocation.
        eoa: u64,
    },
    /// A freed (or extended) block overlaps space that is already free: a double free, or a
    /// block that was never allocated.
    #[error("block {addr:#x}+{len} overlaps free space {free_addr:#x}+{free_len}: double free")]
    DoubleFree {
        /// Start of the block.
        addr: u64,
        /// Length of the block.
        len: u64,
        /// Start of the free range it overlaps (a free-space section or an aggregator's rest).
        free_addr: u64,
        /// Length of that free range.
        free_len: u64,
    },
    /// Paged strategy: a large block (at least one page) that does not start on a page boundary.
    #[error(
        "large block {addr:#x}+{len} does not start on a page boundary (page size {page_size})"
    )]
    MisalignedLarge {
        /// Start of the block.
        addr: u64,
        /// Length of the block.
        len: u64,
        /// The file-space page size.
        page_size: u64,
    },
    /// Paged strategy: a small block (under one page) that crosses a page boundary.
    #[error("small block {addr:#x}+{len} crosses a page boundary (page size {page_size})")]
    CrossesPage {
        /// Start of the block.
        addr: u64,
        /// Length of the block.
        len: u64,
        /// The file-space page size.
        page_size: u64,
    },
    /// The configuration cannot be used (see the message for the field).
    #[error("invalid file space configuration: {0}")]
    InvalidConfig(&'static str),
    /// A persisted free-space section cannot be taken back: empty, past the end of allocation,
    /// overlapping another, in a list the strategy does not have, or breaking the page rules.
    #[error("persisted free-space section {addr:#x}+{len} refused: {reason}")]
    InvalidSection {
        /// Start of the section.
        addr: u64,
        /// Length of the section.
        len: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The starting end of allocation is past the largest address the address size allows.
    #[error("end of allocation {eoa:#x} exceeds the largest address {max_eoa:#x}")]
    EoaTooLarge {
        /// The end of allocation given.
        eoa: u64,
        /// The largest end of allocation allowed by the address size.
        max_eoa: u64,
    },
}

/// Result alias of the allocator.
pub type Result<T, E = SpaceError> = std::result::Result<T, E>;
