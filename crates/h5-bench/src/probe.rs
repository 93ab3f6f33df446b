//! Timing and peak-memory measurement of one phase of a workload, in this process.
//!
//! [`Probe::start`] resets the kernel's peak-RSS mark (writing `5` to `/proc/self/clear_refs`
//! sets `VmHWM` back to the current RSS, Linux 4.0+), records the current RSS and starts the
//! clock; [`Probe::stop`] stops the clock first and then reads `VmHWM`. The reported figure is
//! the **peak RSS growth**: `VmHWM` at the end minus `VmRSS` at the start, so the memory the
//! process already held (the source data of a write, the interpreter) is not counted. Reading
//! `/proc` happens outside the timed interval. Off Linux (or if `/proc` is not writable) the
//! peak is `None`.

use std::fs;
use std::time::Instant;

/// One measured phase: seconds and peak RSS growth in bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sample {
    /// Wall-clock seconds of the phase.
    pub(crate) secs: f64,
    /// Peak RSS growth during the phase, bytes (`None`: not measurable here).
    pub(crate) peak: Option<u64>,
}

/// A running measurement (see the module documentation).
pub(crate) struct Probe {
    base: Option<u64>,
    t0: Instant,
}

/// A field of `/proc/self/status` (`VmRSS`, `VmHWM`) in bytes.
pub(crate) fn status_bytes(key: &str) -> Option<u64> {
    let s = fs::read_to_string("/proc/self/status").ok()?;
    parse_status(&s, key)
}

/// The `key:` line of a `/proc/<pid>/status` text, in bytes (the file gives kB).
fn parse_status(s: &str, key: &str) -> Option<u64> {
    s.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        let kib: u64 = rest.split_whitespace().next()?.parse().ok()?;
        Some(kib * 1024)
    })
}

impl Probe {
    /// Resets the peak RSS, records the RSS, starts the clock.
    pub(crate) fn start() -> Probe {
        let base = fs::write("/proc/self/clear_refs", "5")
            .ok()
            .and_then(|()| status_bytes("VmRSS"));
        Probe {
            base,
            t0: Instant::now(),
        }
    }

    /// Stops the clock, then reads the peak.
    pub(crate) fn stop(self) -> Sample {
        let secs = self.t0.elapsed().as_secs_f64();
        let peak = match (self.base, status_bytes("VmHWM")) {
            (Some(b), Some(h)) => Some(h.saturating_sub(b)),
            _ => None,
        };
        Sample { secs, peak }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_parse_to_bytes() {
        let s = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t    1024 kB\n";
        assert_eq!(parse_status(s, "VmRSS"), Some(1 << 20));
        assert_eq!(parse_status(s, "VmHWM"), Some(2 << 20));
        assert_eq!(parse_status(s, "VmSwap"), None);
    }

    #[test]
    fn a_large_allocation_shows_as_peak_growth() {
        let p = Probe::start();
        let v = vec![1u8; 64 << 20];
        std::hint::black_box(&v);
        drop(v);
        let s = p.stop();
        assert!(s.secs >= 0.0);
        if let Some(peak) = s.peak {
            assert!(peak >= 60 << 20, "peak growth {peak}");
        }
    }
}
