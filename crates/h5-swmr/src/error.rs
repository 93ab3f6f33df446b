//! VFD SWMR's errors.

use std::path::PathBuf;

/// Everything VFD SWMR can report. Each variant names what a caller can act on; messages name
/// the file and the offending value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SwmrError {
    /// A configuration field is out of range (E-1 … E-5, E-7, E-8).
    #[error("VFD SWMR configuration: {field} {reason}")]
    Config {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The writer flag does not match how the file is opened (E-6).
    #[error("writer flag does not match open mode (writer = {writer}, opened {mode})")]
    WriterFlagMismatch {
        /// The configuration's writer flag.
        writer: bool,
        /// "create", "read-write" or "read-only".
        mode: &'static str,
    },
    /// The file does not use paged file-space allocation (E-9).
    #[error("VFD SWMR requires paged file-space allocation")]
    NotPaged,
    /// No page buffer in the access options (E-10).
    #[error("VFD SWMR requires the page buffer")]
    NoPageBuffer,
    /// The metadata file path is longer than the platform allows (E-11).
    #[error("metadata file path too long ({len} bytes, at most {max}): {}", path.display())]
    PathTooLong {
        /// The path.
        path: PathBuf,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The metadata file exists when a writer creates or opens the HDF5 file (E-12).
    #[error(
        "metadata file already exists (another writer? or a stale file left by a crash: \
         recover with `h5 recover` or remove it): {}", path.display()
    )]
    MdFileExists {
        /// The metadata file.
        path: PathBuf,
    },
    /// One process opened the same file as writer and reader (E-13).
    #[error("{} is already open with VFD SWMR in this process as {mode}", path.display())]
    AlreadyOpen {
        /// The HDF5 file.
        path: PathBuf,
        /// "writer" or "reader".
        mode: &'static str,
    },
    /// An end-of-tick call on a file not opened with VFD SWMR (E-14).
    #[error("file not opened with VFD SWMR")]
    NotSwmr,
    /// `end_tick` while end of tick is disabled (E-15).
    #[error("end of tick is disabled for this file")]
    EndOfTickDisabled,
    /// `disable_end_of_tick` twice, or `enable_end_of_tick` while enabled (E-16).
    #[error("end of tick is already {state} for this file")]
    EndOfTickState {
        /// "disabled" or "enabled".
        state: &'static str,
    },
    /// A reader waited too long at open (E-18).
    #[error("{what} within {secs:.1} s: {}", path.display())]
    Timeout {
        /// What did not happen ("metadata file did not appear", ...).
        what: &'static str,
        /// The file waited for.
        path: PathBuf,
        /// How long the reader waited.
        secs: f64,
    },
    /// The header or index kept failing its checks through every retry (E-19).
    #[error("persistent torn write / corrupt metadata file after {retries} retries: {reason} ({})", path.display())]
    PersistentTorn {
        /// The metadata file.
        path: PathBuf,
        /// Retries made.
        retries: u32,
        /// The last failure.
        reason: String,
    },
    /// The metadata file is damaged beyond a torn write (E-20, E-21, E-23, E-26).
    #[error("corrupt metadata file {}: {reason}", path.display())]
    CorruptMdFile {
        /// The metadata file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The metadata file's tick went down (E-24).
    #[error("metadata file tick went backwards ({old} → {new})")]
    TickWentBackwards {
        /// Tick before.
        old: u64,
        /// Tick read now.
        new: u64,
    },
    /// A page image in the metadata file does not match its index entry's checksum (E-25).
    #[error(
        "checksum mismatch of HDF5 page {page} in the metadata file (the reader may have fallen \
         more than max_lag ticks behind, or the writer reused space too early or wrote out of order)"
    )]
    EntryChecksum {
        /// The HDF5 page.
        page: u64,
    },
    /// The reader's index is more than max_lag ticks old (the strict-lag option, SWMR-089).
    #[error("reader fell behind by more than max_lag ({lag} > {max_lag} ticks)")]
    ReaderTooFarBehind {
        /// Ticks behind.
        lag: u64,
        /// The configured max_lag.
        max_lag: u64,
    },
    /// The metadata file's page size differs from the HDF5 file's (E-27).
    #[error("page size mismatch: metadata file {md}, HDF5 file {file}")]
    PageSizeMismatch {
        /// Page size in the metadata file header.
        md: u64,
        /// Page size of the HDF5 file.
        file: u64,
    },
    /// A value does not fit the metadata file's 32-bit fields (E-29).
    #[error("metadata file index format limit exceeded: {what} = {value}")]
    FormatLimit {
        /// The field.
        what: &'static str,
        /// The value.
        value: u64,
    },
    /// A flush with manual ticks (tick_len 0) while writes are still delayed (E-33).
    #[error(
        "{0} delayed writes pending with manual ticking (tick_len 0): call end_tick max_lag times \
         before flushing"
    )]
    DelayedWritesPending(usize),
    /// An end of tick failed earlier: the file refuses work until closed (E-32).
    #[error("file in failed VFD SWMR state: {0}")]
    Failed(String),
    /// An end of tick started by an API call failed (SWMR-040).
    #[error("end-of-tick processing failed for {}: {source}", path.display())]
    EndOfTick {
        /// The HDF5 file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An updater file is malformed (E-34, E-35).
    #[error("updater file {}: {reason}", path.display())]
    Updater {
        /// The updater file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Storage I/O failed.
    #[error(transparent)]
    Io(#[from] h5_io::Error),
    /// File-system I/O failed (creating, renaming, removing files).
    #[error("{what} {}: {source}", path.display())]
    Fs {
        /// What was attempted.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The page buffer failed.
    #[error(transparent)]
    PageBuffer(#[from] h5_pagebuf::PageBufferError),
    /// A lock was poisoned.
    #[error("VFD SWMR lock poisoned")]
    Poisoned,
}

/// Result alias of this crate.
pub type Result<T, E = SwmrError> = std::result::Result<T, E>;
