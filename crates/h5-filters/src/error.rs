//! The typed error of every filter.

/// Why a filter could not decode or encode a chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// The pipeline names a filter id this crate does not know.
    #[error("unknown filter {id}{}", name.as_ref().map(|n| format!(" ({n})")).unwrap_or_default())]
    Unknown {
        /// The filter id from the pipeline message.
        id: u16,
        /// The filter name from the pipeline message, when it has one.
        name: Option<String>,
    },
    /// A known filter (or a variant of it) that this crate does not implement.
    #[error("filter {filter} is not supported: {reason}")]
    Unsupported {
        /// The filter's name.
        filter: &'static str,
        /// What exactly is missing.
        reason: String,
    },
    /// The filter's client data do not make sense for this chunk.
    #[error("filter {filter}: bad parameters: {reason}")]
    BadParameters {
        /// The filter's name.
        filter: &'static str,
        /// What is wrong with them.
        reason: String,
    },
    /// The filtered bytes are corrupt (truncated, garbled, wrong size).
    #[error("filter {filter}: corrupt data: {reason}")]
    Corrupt {
        /// The filter's name.
        filter: &'static str,
        /// What was found.
        reason: String,
    },
    /// The Fletcher-32 checksum stored with the chunk does not match its content.
    #[error("fletcher32 checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// The checksum stored after the data.
        stored: u32,
        /// The checksum of the data as read.
        computed: u32,
    },
    /// A filter could not encode the chunk (for example a compressor that does not shrink it).
    #[error("filter {filter}: encoding failed: {reason}")]
    EncodeFailed {
        /// The filter's name.
        filter: &'static str,
        /// Why.
        reason: String,
    },
    /// The decoded chunk (of a size the chunk's data or the dataset declare, at most the
    /// chunk's size) cannot be allocated.
    #[error("filter {filter}: {bytes} decoded bytes do not fit in memory")]
    TooLarge {
        /// The filter's name.
        filter: &'static str,
        /// Bytes asked for.
        bytes: usize,
    },
}

impl FilterError {
    /// A [`FilterError::Corrupt`] for `filter`.
    pub(crate) fn corrupt(filter: &'static str, reason: impl Into<String>) -> Self {
        Self::Corrupt {
            filter,
            reason: reason.into(),
        }
    }

    /// A [`FilterError::BadParameters`] for `filter`.
    pub(crate) fn params(filter: &'static str, reason: impl Into<String>) -> Self {
        Self::BadParameters {
            filter,
            reason: reason.into(),
        }
    }

    /// A [`FilterError::Unsupported`] for `filter`.
    pub(crate) fn unsupported(filter: &'static str, reason: impl Into<String>) -> Self {
        Self::Unsupported {
            filter,
            reason: reason.into(),
        }
    }

    /// A [`FilterError::EncodeFailed`] for `filter`.
    pub(crate) fn encode(filter: &'static str, reason: impl Into<String>) -> Self {
        Self::EncodeFailed {
            filter,
            reason: reason.into(),
        }
    }
}
