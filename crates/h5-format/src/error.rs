//! Errors of the format layer.

/// Everything decoding an on-disk structure can report. Every variant names the structure and,
/// where known, its file address, so a caller can say exactly what is wrong with a file.
#[non_exhaustive]
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum FormatError {
    /// The bytes end before the structure does.
    #[error(
        "{structure} at {address:#x}: truncated ({needed} bytes needed, {available} available)"
    )]
    Truncated {
        /// The structure being decoded.
        structure: &'static str,
        /// Its file address (`u64::MAX` when unknown).
        address: u64,
        /// Bytes needed from the start of the structure.
        needed: u64,
        /// Bytes available.
        available: u64,
    },
    /// A signature, version, checksum or field value is wrong: the file is damaged (or not
    /// HDF5).
    #[error("{structure} at {address:#x}: corrupted: {reason}")]
    Corrupted {
        /// The structure being decoded.
        structure: &'static str,
        /// Its file address (`u64::MAX` when unknown).
        address: u64,
        /// What is wrong.
        reason: String,
    },
    /// A valid feature this implementation does not support (yet).
    #[error("{structure} at {address:#x}: unsupported: {what}")]
    Unsupported {
        /// The structure being decoded.
        structure: &'static str,
        /// Its file address (`u64::MAX` when unknown).
        address: u64,
        /// The feature.
        what: String,
    },
}

/// Result alias of the format layer.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;
