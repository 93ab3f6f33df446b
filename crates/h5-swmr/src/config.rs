//! The VFD SWMR configuration record (the RFC's `H5F_vfd_swmr_config_t`, §3.1.1) and its
//! validation, plus a few Rust-side extensions (timeouts, debugging switches).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Result, SwmrError};
use crate::log::Tag;

/// The only record version (`H5F_CURR_VFD_SWMR_CONFIG_VERSION`).
pub const CONFIG_VERSION: i32 = 1;
/// The smallest max_lag accepted.
pub const MIN_MAX_LAG: i32 = 3;
/// The smallest max_lag recommended.
pub const RECOMMENDED_MAX_LAG: i32 = 7;
/// Longest path accepted for the metadata file (Linux's `PATH_MAX`).
pub const MAX_PATH: usize = 4096;
/// Longest file name accepted (Linux's `NAME_MAX`).
pub const MAX_NAME: usize = 255;

/// How a file takes part in VFD SWMR.
///
/// **The user's duties** (the RFC's): there is exactly one writer per file; `tick_len`,
/// `max_lag`, `md_pages_reserved` and the metadata file location are the same on the writer
/// and every reader. Behaviour is only guaranteed while each reader API call takes less than
/// about a tick and readers lag less than `max_lag` ticks: when that is not so, use a longer
/// tick or a larger `max_lag` (API calls are never retried automatically). With updater files
/// on NFS-like storage, use ticks of tens of seconds and a generous `max_lag`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwmrConfig {
    /// Record version; must be [`CONFIG_VERSION`].
    pub version: i32,
    /// Tick length in tenths of a second; 0 means manual ticks (`end_tick` only).
    pub tick_len: i32,
    /// Largest expected lag of a reader behind the writer, in ticks (at least 3; 7 or more
    /// recommended).
    pub max_lag: i32,
    /// Readers only: whether the HDF5 and metadata files are on a POSIX file system local to
    /// the reader, and the writer maintains the metadata file itself (no updater files). When
    /// true a reader may open the HDF5 file before a writer has opened it or after it has
    /// closed (reading it as it is); when false it waits for the metadata file.
    pub presume_posix_semantics: bool,
    /// Whether this process is the writer (create and read-write opens) or a reader
    /// (read-only opens).
    pub writer: bool,
    /// Writer: whether it creates and maintains the metadata file itself.
    pub maintain_metadata_file: bool,
    /// Writer: whether it writes updater files for an auxiliary process to apply.
    pub generate_updater_files: bool,
    /// Writer: whether every end of tick also writes raw data to the HDF5 file, so raw data is
    /// as current as the published metadata. This greatly increases the end of tick's I/O and
    /// can break real-time guarantees unless the tick is long.
    pub flush_raw_data: bool,
    /// Pages reserved at the head of the metadata file for the header and index (≥ 1).
    pub md_pages_reserved: i32,
    /// Directory of the metadata file (empty: the HDF5 file's directory).
    pub md_file_path: PathBuf,
    /// File name of the metadata file (`None` or empty: the HDF5 file's name plus ".md").
    pub md_file_name: Option<String>,
    /// Writer with updater files: directory and base name of the updater files.
    pub updater_file_path: PathBuf,
    /// Log file (empty: no log). Give every process its own path: the file is truncated.
    pub log_file_path: PathBuf,
    /// Early end of tick once the page buffer grows past this many times its size (0: off;
    /// at most 100).
    pub pb_expansion_threshold: i32,
    /// Rust extension: how long a reader waits at open for the files to appear (`None`:
    /// max(10 s, (max_lag + 2) ticks)).
    pub open_timeout: Option<Duration>,
    /// Rust extension (debugging): keep the metadata file after the writer closes.
    pub keep_md_file: bool,
    /// Rust extension: readers check before every read that they are at most max_lag ticks
    /// behind (SWMR-089).
    pub strict_lag: bool,
    /// Rust extension: whether index entries written back to the HDF5 file leave the index
    /// (`None`: yes with a maintained metadata file and no updater files, OQ-22).
    pub index_removal: Option<bool>,
    /// Rust extension: delete updater files more than max_lag + 1 ticks old.
    pub prune_updater_files: bool,
    /// Rust extension: log only these tags (`None`: all).
    pub log_only: Option<Vec<Tag>>,
    /// Rust extension, readers with timed ticks: the shorter retry delay of OQ-17. A reader
    /// whose end of tick found no new tick (and a reader just opened) looks again after this
    /// delay instead of a whole tick; after it found a new tick it looks again one tick minus
    /// this delay later, just before the writer's next tick is due. A new tick is then seen at
    /// most about this delay after the writer published it, instead of up to a tick, for about
    /// two header reads per tick. `None`: a whole tick after every reader end of tick, as the
    /// RFC's reader does. Must be shorter than the tick; ignored by writers.
    pub reader_retry: Option<Duration>,
}

impl Default for SwmrConfig {
    /// A reader's defaults: tick 0.4 s, max_lag 7, one reserved page, metadata file next to
    /// the HDF5 file, no log.
    fn default() -> Self {
        SwmrConfig {
            version: CONFIG_VERSION,
            tick_len: 4,
            max_lag: RECOMMENDED_MAX_LAG,
            presume_posix_semantics: false,
            writer: false,
            maintain_metadata_file: true,
            generate_updater_files: false,
            flush_raw_data: false,
            md_pages_reserved: 1,
            md_file_path: PathBuf::new(),
            md_file_name: None,
            updater_file_path: PathBuf::new(),
            log_file_path: PathBuf::new(),
            pb_expansion_threshold: 0,
            open_timeout: None,
            keep_md_file: false,
            strict_lag: false,
            index_removal: None,
            prune_updater_files: false,
            log_only: None,
            reader_retry: None,
        }
    }
}

fn bad(field: &'static str, reason: impl Into<String>) -> SwmrError {
    SwmrError::Config {
        field,
        reason: reason.into(),
    }
}

impl SwmrConfig {
    /// The defaults with `writer` set.
    pub fn writer() -> Self {
        SwmrConfig {
            writer: true,
            ..Self::default()
        }
    }

    /// The defaults of a reader.
    pub fn reader() -> Self {
        Self::default()
    }

    /// Checks every field (E-1 … E-5, E-7, E-8); returns warnings for accepted values below the
    /// recommendations (max_lag 3 … 6).
    pub fn validate(&self) -> Result<Vec<String>> {
        let mut warnings = Vec::new();
        if self.version != CONFIG_VERSION {
            return Err(bad(
                "version",
                format!("must be {CONFIG_VERSION} (got {})", self.version),
            ));
        }
        if self.tick_len < 0 {
            return Err(bad(
                "tick_len",
                format!("must be ≥ 0 (got {})", self.tick_len),
            ));
        }
        if self.max_lag < MIN_MAX_LAG {
            return Err(bad(
                "max_lag",
                format!("must be at least {MIN_MAX_LAG} (got {})", self.max_lag),
            ));
        }
        if self.max_lag < RECOMMENDED_MAX_LAG {
            warnings.push(format!(
                "max_lag {} is below the recommended minimum of {RECOMMENDED_MAX_LAG}",
                self.max_lag
            ));
        }
        if self.md_pages_reserved < 1 {
            return Err(bad(
                "md_pages_reserved",
                format!("must be ≥ 1 (got {})", self.md_pages_reserved),
            ));
        }
        if !(0..=100).contains(&self.pb_expansion_threshold) {
            return Err(bad(
                "pb_expansion_threshold",
                format!("must be in [0, 100] (got {})", self.pb_expansion_threshold),
            ));
        }
        if self.writer && !self.maintain_metadata_file && !self.generate_updater_files {
            return Err(bad(
                "maintain_metadata_file / generate_updater_files",
                "at least one must be true for a writer",
            ));
        }
        if self.writer
            && self.generate_updater_files
            && self.updater_file_path.as_os_str().is_empty()
        {
            return Err(bad(
                "updater_file_path",
                "must name the updater files' directory and base name",
            ));
        }
        if let Some(retry) = self.reader_retry
            && !self.writer
            && (retry.is_zero() || retry >= self.tick())
        {
            return Err(bad(
                "reader_retry",
                format!(
                    "must be longer than zero and shorter than the tick of {:?} (got {retry:?})",
                    self.tick()
                ),
            ));
        }
        Ok(warnings)
    }

    /// The tick length.
    pub fn tick(&self) -> Duration {
        Duration::from_millis(100 * self.tick_len.max(0) as u64)
    }

    /// How long after a reader end of tick the next one is due: a whole tick, or with
    /// [`SwmrConfig::reader_retry`] the retry delay when `found_new_tick` is false (also right
    /// after open) and the tick minus the retry delay when it is true.
    pub fn reader_next_look(&self, found_new_tick: bool) -> Duration {
        match self.reader_retry {
            Some(retry) if found_new_tick => self.tick().saturating_sub(retry),
            Some(retry) => retry,
            None => self.tick(),
        }
    }

    /// max_lag as a tick count.
    pub fn max_lag_ticks(&self) -> u64 {
        self.max_lag.max(0) as u64
    }

    /// How long a reader waits at open (OQ-18).
    pub fn open_timeout(&self) -> Duration {
        self.open_timeout.unwrap_or_else(|| {
            if self.tick_len == 0 {
                Duration::from_secs(10)
            } else {
                Duration::from_secs(10).max(self.tick() * (self.max_lag_ticks() as u32 + 2))
            }
        })
    }

    /// How long torn reads of the metadata file are retried (OQ-19).
    pub fn retry_limit(&self) -> Duration {
        if self.tick_len == 0 {
            Duration::from_secs(10)
        } else {
            self.tick() * self.max_lag_ticks() as u32
        }
    }

    /// Whether index entries leave the index once written back (OQ-22).
    pub fn index_removal(&self) -> bool {
        self.index_removal
            .unwrap_or(self.maintain_metadata_file && !self.generate_updater_files)
    }

    /// The metadata file of the HDF5 file at `hdf5` (SWMR-010, SWMR-011): `md_file_path` (or
    /// the HDF5 file's directory) joined with `md_file_name` (or the HDF5 file's name plus
    /// ".md"). Too long a path is an error, never truncated (E-11).
    pub fn md_path(&self, hdf5: &Path) -> Result<PathBuf> {
        let dir = if self.md_file_path.as_os_str().is_empty() {
            hdf5.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            self.md_file_path.clone()
        };
        let name = match self.md_file_name.as_deref() {
            Some(n) if !n.is_empty() => n.to_owned(),
            _ => {
                let base = hdf5
                    .file_name()
                    .ok_or_else(|| bad("md_file_name", "the HDF5 path has no file name"))?;
                format!("{}.md", base.to_string_lossy())
            }
        };
        let path = dir.join(&name);
        let len = path.as_os_str().len();
        if len > MAX_PATH || name.len() > MAX_NAME {
            return Err(SwmrError::PathTooLong {
                path,
                len,
                max: if name.len() > MAX_NAME {
                    MAX_NAME
                } else {
                    MAX_PATH
                },
            });
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // OQ-17's shorter retry delay: accepted only below the tick for readers; the next look
    // after a reader end of tick.
    #[test]
    fn reader_retry_is_checked_and_sets_the_next_look() {
        let reader = |tick_len, ms| SwmrConfig {
            tick_len,
            reader_retry: Some(Duration::from_millis(ms)),
            ..SwmrConfig::reader()
        };
        assert_eq!(field(reader(1, 0).validate()), "reader_retry");
        assert_eq!(field(reader(1, 100).validate()), "reader_retry");
        assert_eq!(field(reader(0, 10).validate()), "reader_retry");
        let ok = reader(1, 10);
        assert!(ok.validate().unwrap().is_empty());
        assert_eq!(ok.reader_next_look(false), Duration::from_millis(10));
        assert_eq!(ok.reader_next_look(true), Duration::from_millis(90));
        let writer = SwmrConfig {
            writer: true,
            ..reader(0, 10)
        };
        assert!(writer.validate().is_ok(), "writers ignore the retry delay");
        let plain = SwmrConfig::reader();
        assert_eq!(plain.reader_next_look(false), plain.tick());
        assert_eq!(plain.reader_next_look(true), plain.tick());
    }

    fn field(r: Result<Vec<String>>) -> &'static str {
        match r {
            Err(SwmrError::Config { field, .. }) => field,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    // SWMR-002, SWMR-003, SWMR-005, SWMR-009, SWMR-014, SWMR-016, SWMR-012: every check and
    // the field each error names.
    #[test]
    fn swmr_002_003_005_009_014_016_012_validation() {
        for v in [0, 2] {
            let c = SwmrConfig {
                version: v,
                ..SwmrConfig::writer()
            };
            assert_eq!(field(c.validate()), "version");
        }
        assert!(SwmrConfig::writer().validate().unwrap().is_empty());
        let c = SwmrConfig {
            tick_len: -1,
            ..SwmrConfig::writer()
        };
        assert_eq!(field(c.validate()), "tick_len");
        let c = SwmrConfig {
            max_lag: 2,
            ..SwmrConfig::writer()
        };
        assert_eq!(field(c.validate()), "max_lag");
        let c = SwmrConfig {
            max_lag: 3,
            ..SwmrConfig::writer()
        };
        let w = c.validate().unwrap();
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("recommended minimum of 7"));
        let c = SwmrConfig {
            max_lag: 7,
            ..SwmrConfig::writer()
        };
        assert!(c.validate().unwrap().is_empty());
        let c = SwmrConfig {
            md_pages_reserved: 0,
            ..SwmrConfig::writer()
        };
        assert_eq!(field(c.validate()), "md_pages_reserved");
        assert!(
            SwmrConfig {
                md_pages_reserved: 1,
                ..SwmrConfig::writer()
            }
            .validate()
            .is_ok()
        );
        for t in [-1, 101] {
            let c = SwmrConfig {
                pb_expansion_threshold: t,
                ..SwmrConfig::writer()
            };
            assert_eq!(field(c.validate()), "pb_expansion_threshold");
        }
        for t in [0, 100] {
            assert!(
                SwmrConfig {
                    pb_expansion_threshold: t,
                    ..SwmrConfig::writer()
                }
                .validate()
                .is_ok()
            );
        }
        let none = SwmrConfig {
            maintain_metadata_file: false,
            generate_updater_files: false,
            ..SwmrConfig::writer()
        };
        assert!(field(none.validate()).contains("maintain_metadata_file"));
        let reader = SwmrConfig {
            maintain_metadata_file: false,
            generate_updater_files: false,
            updater_file_path: PathBuf::from("\u{1}garbage"),
            ..SwmrConfig::reader()
        };
        assert!(
            reader.validate().is_ok(),
            "readers ignore both flags and the updater path"
        );
        let ud = SwmrConfig {
            generate_updater_files: true,
            ..SwmrConfig::writer()
        };
        assert_eq!(field(ud.validate()), "updater_file_path");
    }

    // SWMR-010, SWMR-011: the metadata file's path, its default name, and the length limit.
    #[test]
    fn swmr_010_011_md_path() {
        let c = SwmrConfig::writer();
        assert_eq!(
            c.md_path(Path::new("/d/data.h5")).unwrap(),
            PathBuf::from("/d/data.h5.md")
        );
        assert_eq!(
            c.md_path(Path::new("/d/other.h5")).unwrap(),
            PathBuf::from("/d/other.h5.md")
        );
        let c = SwmrConfig {
            md_file_path: PathBuf::from("/ram"),
            md_file_name: Some("x.md".into()),
            ..SwmrConfig::writer()
        };
        assert_eq!(
            c.md_path(Path::new("/d/data.h5")).unwrap(),
            PathBuf::from("/ram/x.md")
        );
        let long = SwmrConfig {
            md_file_name: Some("n".repeat(5000)),
            ..SwmrConfig::writer()
        };
        let e = long.md_path(Path::new("/d/data.h5")).unwrap_err();
        assert!(e.to_string().contains("metadata file path too long"), "{e}");
    }

    #[test]
    fn durations() {
        let c = SwmrConfig {
            tick_len: 5,
            max_lag: 7,
            ..SwmrConfig::reader()
        };
        assert_eq!(c.tick(), Duration::from_millis(500));
        assert_eq!(c.open_timeout(), Duration::from_secs(10));
        let c = SwmrConfig {
            tick_len: 20,
            max_lag: 7,
            ..SwmrConfig::reader()
        };
        assert_eq!(c.open_timeout(), Duration::from_secs(18));
        let c = SwmrConfig {
            tick_len: 0,
            ..SwmrConfig::reader()
        };
        assert_eq!(c.retry_limit(), Duration::from_secs(10));
        assert!(SwmrConfig::writer().index_removal());
        assert!(
            !SwmrConfig {
                generate_updater_files: true,
                ..SwmrConfig::writer()
            }
            .index_removal()
        );
    }
}
