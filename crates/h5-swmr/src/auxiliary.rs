//! The auxiliary process (the RFC's §3.5.2.2.3, `vfd_swmr_aux`): applies a writer's updater
//! files, strictly in sequence order, to a local metadata file that readers use as if the
//! writer maintained it. The `h5 swmr aux` command runs it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use h5_io::{FileStorage, OpenMode, Storage};

use crate::error::{Result, SwmrError};
use crate::log::{SwmrLog, Tag};
use crate::swmr_log;
use crate::updater::{self, CREATE_METADATA_FILE_ONLY, FINAL_UPDATE};

/// How the auxiliary process polls.
#[derive(Clone, Debug)]
pub struct AuxOptions {
    /// Tick length in tenths of a second.
    pub tick_len: u32,
    /// Polls per tick for the next updater file.
    pub polls_per_tick: u32,
    /// max_lag: a gap in the sequence lasting longer than this many ticks is logged.
    pub max_lag: u32,
    /// Give up when no new file arrives for this long (`None`: wait forever).
    pub idle_timeout: Option<Duration>,
    /// How often a refused (possibly half-written) file is read again before giving up.
    pub retries: u32,
    /// Log file.
    pub log: Option<Arc<SwmrLog>>,
}

impl Default for AuxOptions {
    fn default() -> Self {
        AuxOptions {
            tick_len: 4,
            polls_per_tick: 10,
            max_lag: 7,
            idle_timeout: None,
            retries: 10,
            log: None,
        }
    }
}

/// What the auxiliary process did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuxStats {
    /// Updater files applied, in order (sequence numbers).
    pub applied: Vec<u64>,
    /// Images written into the metadata file.
    pub images: u64,
    /// Polls that found no next file.
    pub empty_polls: u64,
    /// Reads of a refused file retried.
    pub retries: u64,
}

fn fs(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SwmrError {
    let path = path.to_path_buf();
    move |source| SwmrError::Fs { what, path, source }
}

/// Applies the updater files `<ud_base>.0`, `<ud_base>.1`, … to the metadata file `md` until
/// one carries the final-update flag (then the metadata file is removed and the function
/// returns). A file that appears out of order waits for the gap to fill (SWMR-123); a refused
/// file is read again a few times (it may still be being renamed into place), then is an error
/// (SWMR-124).
pub fn run(md: &Path, ud_base: &Path, opts: &AuxOptions) -> Result<AuxStats> {
    let poll = Duration::from_millis(
        (100 * u64::from(opts.tick_len.max(1)) / u64::from(opts.polls_per_tick.max(1))).max(1),
    );
    let mut stats = AuxStats::default();
    let mut seq = 0u64;
    let mut storage: Option<Arc<dyn Storage>> = None;
    let mut idle_since = Instant::now();
    let mut gap_logged = false;
    loop {
        let name = updater::file_name(ud_base, seq);
        let bytes = match std::fs::read(&name) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                stats.empty_polls += 1;
                let waited = idle_since.elapsed();
                if !gap_logged
                    && waited > poll * opts.polls_per_tick.max(1) * opts.max_lag
                    && updater::file_name(ud_base, seq + 1).exists()
                {
                    swmr_log!(
                        &opts.log,
                        Tag::ChecksumRetry,
                        "updater file {seq} missing while later ones exist"
                    );
                    gap_logged = true;
                }
                if opts.idle_timeout.is_some_and(|t| waited > t) {
                    return Err(SwmrError::Timeout {
                        what: "no updater file arrived",
                        path: name,
                        secs: waited.as_secs_f64(),
                    });
                }
                std::thread::sleep(poll);
                continue;
            }
            Err(e) => return Err(fs("reading the updater file", &name)(e)),
        };
        let mut tries = 0;
        let u = loop {
            match updater::decode(&bytes) {
                Ok(u) => break u,
                Err(r) if r.retry && tries < opts.retries => {
                    tries += 1;
                    stats.retries += 1;
                    swmr_log!(
                        &opts.log,
                        Tag::ChecksumRetry,
                        "updater file {seq}: {}",
                        r.reason
                    );
                    std::thread::sleep(poll);
                }
                Err(r) => {
                    return Err(SwmrError::Updater {
                        path: name,
                        reason: r.reason,
                    });
                }
            }
        };
        if u.header.sequence != seq {
            return Err(SwmrError::Updater {
                path: name,
                reason: format!("sequence number {} in file {seq}", u.header.sequence),
            });
        }
        if storage.is_none() {
            let s = FileStorage::open(md, OpenMode::Create)?;
            storage = Some(Arc::new(s));
        }
        if u.header.flags & CREATE_METADATA_FILE_ONLY == 0
            && let Some(s) = &storage
        {
            updater::apply(&u, &bytes, &**s)?;
            stats.images += u.entries.len() as u64;
        }
        stats.applied.push(seq);
        swmr_log!(
            &opts.log,
            Tag::EndOfTick,
            "applied updater file {seq} (tick {})",
            u.header.tick
        );
        if u.header.flags & FINAL_UPDATE != 0 {
            drop(storage);
            std::fs::remove_file(md).map_err(fs("removing the metadata file", md))?;
            return Ok(stats);
        }
        seq += 1;
        idle_since = Instant::now();
        gap_logged = false;
    }
}
