//! The page buffer's errors.

/// Errors of the page buffer's configuration and SWMR operations (I/O through its storage
/// faces reports [`h5_io::Error`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PageBufferError {
    /// A minimum percentage above 100.
    #[error("minimum {what} fractions must be between 0 and 100 inclusive (got {value})")]
    Percentage {
        /// "metadata" or "raw data".
        what: &'static str,
        /// The percentage given.
        value: u32,
    },
    /// The two minimum percentages add up to more than 100.
    #[error(
        "sum of minimum metadata ({meta}) and raw data ({raw}) fractions can't be bigger than 100"
    )]
    PercentageSum {
        /// Metadata percentage.
        meta: u32,
        /// Raw-data percentage.
        raw: u32,
    },
    /// A page buffer smaller than one page (and not a multiple of it).
    #[error("page buffer size {size} must be >= the page size {page_size}")]
    SmallerThanPage {
        /// Configured size.
        size: usize,
        /// The file's page size.
        page_size: u64,
    },
    /// The file does not use the paged file-space strategy (libhdf5: "Enabling Page
    /// Buffering requires PAGE file space strategy").
    #[error("enabling page buffering requires the PAGE file space strategy")]
    RequiresPagedStrategy,
    /// A zero page size.
    #[error("invalid page size {page_size}")]
    PageSize {
        /// The page size given.
        page_size: u64,
    },
    /// The buffer is not in the mode the operation needs (e.g. a tick-list call without VFD
    /// SWMR writer mode).
    #[error("page buffer operation needs {needed} mode")]
    WrongMode {
        /// The mode the operation needs.
        needed: &'static str,
    },
    /// An I/O error of the underlying storage.
    #[error(transparent)]
    Io(#[from] h5_io::Error),
    /// The lock guarding the buffer was poisoned by a panic.
    #[error("page buffer lock poisoned")]
    Poisoned,
}
