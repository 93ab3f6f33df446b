//! The VFD SWMR log (the seed's §3.11): one line per event, `<seconds> <TAG> <body>`, where
//! seconds count from the log's creation (monotonic clock, millisecond resolution). Off unless
//! `log_file_path` is set; each process must use its own path (the file is truncated at open).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use crate::error::{Result, SwmrError};

/// What a log line reports. Adding one: a variant, a name, a code.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum Tag {
    /// The file was opened (writer or reader).
    FileOpen,
    /// The file was closed.
    FileClose,
    /// An end of tick ran: tick, writer/reader, where it was started.
    EndOfTick,
    /// How long an end of tick took.
    EotProcessingTime,
    /// Writer: entries in the index and entries added, changed, removed.
    IndexSize,
    /// Writer: images added to the metadata file (count, bytes, multi-page ones).
    MdFileImages,
    /// Reader: pages evicted from the page buffer and entries from the metadata cache.
    Evictions,
    /// Reader end of tick with no new tick.
    NoChange,
    /// A torn header or index read, retried.
    ChecksumRetry,
    /// The index was found outside the reserved pages.
    NonAdjacentIndex,
    /// A metadata request split at page boundaries.
    SplitIo,
    /// An end of tick requested early by the page buffer's growth.
    EarlyEot,
    /// A tag code out of range.
    Undefined,
}

impl Tag {
    /// Every defined tag in code order.
    pub const ALL: [Tag; 12] = [
        Tag::FileOpen,
        Tag::FileClose,
        Tag::EndOfTick,
        Tag::EotProcessingTime,
        Tag::IndexSize,
        Tag::MdFileImages,
        Tag::Evictions,
        Tag::NoChange,
        Tag::ChecksumRetry,
        Tag::NonAdjacentIndex,
        Tag::SplitIo,
        Tag::EarlyEot,
    ];

    /// The tag of a numeric code; out of range is [`Tag::Undefined`].
    pub fn from_code(code: usize) -> Tag {
        Tag::ALL.get(code).copied().unwrap_or(Tag::Undefined)
    }

    /// The name printed in the log.
    pub fn name(self) -> &'static str {
        match self {
            Tag::FileOpen => "FILE_OPEN",
            Tag::FileClose => "FILE_CLOSE",
            Tag::EndOfTick => "END_OF_TICK",
            Tag::EotProcessingTime => "EOT_PROCESSING_TIME",
            Tag::IndexSize => "INDEX_SIZE",
            Tag::MdFileImages => "MD_FILE_IMAGES",
            Tag::Evictions => "EVICTIONS",
            Tag::NoChange => "NO_CHANGE",
            Tag::ChecksumRetry => "CHECKSUM_RETRY",
            Tag::NonAdjacentIndex => "NON_ADJACENT_INDEX",
            Tag::SplitIo => "SPLIT_IO",
            Tag::EarlyEot => "EARLY_EOT",
            Tag::Undefined => "UNDEFINED",
        }
    }
}

/// An open log file.
#[derive(Debug)]
pub struct SwmrLog {
    file: Mutex<std::fs::File>,
    start: Instant,
    only: Option<HashSet<Tag>>,
}

impl SwmrLog {
    /// Creates (truncates) the log at `path`; with `only`, lines of other tags are dropped
    /// (SWMR-132).
    pub fn create(path: &Path, only: Option<HashSet<Tag>>) -> Result<SwmrLog> {
        let file = std::fs::File::create(path).map_err(|source| SwmrError::Fs {
            what: "creating the VFD SWMR log",
            path: path.to_path_buf(),
            source,
        })?;
        Ok(SwmrLog {
            file: Mutex::new(file),
            start: Instant::now(),
            only,
        })
    }

    /// Writes one line. Logging failures are ignored (the log never fails an operation).
    pub fn log(&self, tag: Tag, body: std::fmt::Arguments<'_>) {
        if self.only.as_ref().is_some_and(|o| !o.contains(&tag)) {
            return;
        }
        let mut line = String::with_capacity(64);
        let _ = write!(
            line,
            "{:.3} {} {}",
            self.start.elapsed().as_secs_f64(),
            tag.name(),
            body
        );
        line.push('\n');
        if let Ok(mut f) = self.file.lock() {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// Logs through an optional log (a no-op without one).
#[macro_export]
macro_rules! swmr_log {
    ($log:expr, $tag:expr, $($arg:tt)*) => {
        if let Some(l) = $log {
            l.log($tag, format_args!($($arg)*));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    // SWMR-129, SWMR-132: the line grammar, UNDEFINED for bad codes, the filter; SWMR-013: an
    // existing log file is truncated.
    #[test]
    fn swmr_129_132_013_log_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("swmr.log");
        std::fs::write(&p, "junk from before\n").unwrap();
        let log = SwmrLog::create(&p, None).unwrap();
        log.log(Tag::FileOpen, format_args!("writer {}", "a.h5"));
        std::thread::sleep(std::time::Duration::from_millis(150));
        log.log(Tag::from_code(99), format_args!("x"));
        drop(log);
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let parse = |l: &str| {
            let mut it = l.splitn(3, ' ');
            let t: f64 = it.next().unwrap().parse().unwrap();
            (
                t,
                it.next().unwrap().to_owned(),
                it.next().unwrap_or("").to_owned(),
            )
        };
        let (t0, tag0, body0) = parse(lines[0]);
        let (t1, tag1, _) = parse(lines[1]);
        assert_eq!(
            (tag0.as_str(), body0.as_str()),
            ("FILE_OPEN", "writer a.h5")
        );
        assert_eq!(tag1, "UNDEFINED");
        assert!(t1 - t0 >= 0.1, "150 ms apart: {t0} {t1}");
        let only = SwmrLog::create(&p, Some([Tag::EndOfTick].into_iter().collect())).unwrap();
        only.log(Tag::FileOpen, format_args!("dropped"));
        only.log(Tag::EndOfTick, format_args!("tick 1"));
        drop(only);
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().count(), 1);
        assert!(text.contains("END_OF_TICK tick 1"));
    }
}
