//! Pieces shared by the side-by-side benchmarks (`read` and the standard workloads): the
//! long-lived h5py process, the value checksum, fixed-seed positions, formatting of durations,
//! rates and ratios, aligned Markdown tables, and the huge-page re-execution.

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

/// Modulus of the position weights of [`checksum`] (the helper uses the same).
const WEIGHT_MOD: u64 = 1_000_003;

/// The environment variable and value that make glibc's malloc ask for transparent huge pages on
/// its large (mmap) allocations, as numpy does for its arrays.
pub(crate) const THP_TUNABLE: (&str, &str) = ("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1");

/// Options of the side-by-side commands (`all`, `read`): both run workloads on h5 and on h5py.
#[derive(clap::Args, Clone, Debug, PartialEq)]
pub(crate) struct SideBySide {
    /// Volumes divided by 16 (finishes in a few minutes).
    #[arg(long)]
    pub(crate) quick: bool,
    /// Python interpreter with h5py (default: .venv/bin/python if it exists, else python3).
    #[arg(long)]
    pub(crate) python: Option<PathBuf>,
    /// Timed repetitions per system and workload (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub(crate) reps: usize,
    /// Directory of the files written and read (default: a directory under the system's
    /// temporary directory, reused by later runs where inputs match).
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    /// No side asks for transparent huge pages for its large arrays: h5
    /// (`h5::set_huge_pages(false)`), numpy and (`all`) the C side's buffers; `read` is then
    /// not re-run under GLIBC_TUNABLES=glibc.malloc.hugetlb=1 either. By default every side
    /// asks for them, as numpy does (where a huge-page fault is dear, e.g. in a virtual machine
    /// whose balloon reports free memory to the host, the read rows then measure the faults).
    #[arg(long)]
    pub(crate) no_thp: bool,
    /// Run only these workloads (comma-separated ids; `all`: 1, 2a, 2b, 3, 3m, 4, 4l, 5, 6, 6m,
    /// 6e, 7, an id without its letter selecting its variants; `read`: 1, 2, 3, 3b, 4, 5).
    #[arg(long, value_delimiter = ',')]
    pub(crate) only: Vec<String>,
}

/// Whether workload `id` is selected by `only` (empty: every workload).
pub(crate) fn selected(only: &[String], id: &str) -> bool {
    only.is_empty() || only.iter().any(|o| o.trim().eq_ignore_ascii_case(id))
}

/// CPU seconds this process has used (all threads; `/proc/self/stat`, 10 ms ticks), if known.
pub(crate) fn cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which ends with ')'): utime is the 12th, stime the 13th.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// CPU seconds the calling thread has run (`/proc/thread-self/schedstat`, nanoseconds), if
/// known: finer than [`cpu_secs`] for a single-threaded workload.
pub(crate) fn thread_cpu_secs() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

/// Errors of a benchmark run: a message for the user.
pub(crate) type BenchResult<T> = Result<T, String>;

/// Any displayable error as a message.
pub(crate) fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The interpreter used when `--python` is not given: `.venv/bin/python` under `cwd` if it
/// exists, else `python3` from the `PATH`.
pub(crate) fn default_python(cwd: &Path) -> PathBuf {
    let venv = cwd.join(".venv").join("bin").join("python");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// `h5/h5py` written like `0.42x` (below 1: h5 is faster).
pub(crate) fn format_ratio(h5: f64, py: f64) -> String {
    if py > 0.0 && h5.is_finite() && py.is_finite() {
        format!("{:.2}x", h5 / py)
    } else {
        "n/a".to_owned()
    }
}

/// A duration in seconds, written in ms below 1 s.
pub(crate) fn format_secs(secs: f64) -> String {
    if secs < 1.0 {
        format!("{:.1} ms", secs * 1e3)
    } else {
        format!("{secs:.2} s")
    }
}

/// A rate: `amount` units of work in `secs`.
pub(crate) fn format_rate(amount: f64, unit: &str, secs: f64) -> String {
    if secs > 0.0 {
        let r = amount / secs;
        if r >= 100.0 {
            format!("{r:.0} {unit}")
        } else {
            format!("{r:.1} {unit}")
        }
    } else {
        "n/a".to_owned()
    }
}

/// The median of the values (the upper one of an even count); `NaN` when empty.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `sum_i bits_i * (i mod 1000003 + 1)` in wrapping u64 arithmetic, over the elements in order.
pub(crate) fn checksum(bits: impl IntoIterator<Item = u64>) -> u64 {
    bits.into_iter().zip(0u64..).fold(0u64, |acc, (b, i)| {
        acc.wrapping_add(b.wrapping_mul(i % WEIGHT_MOD + 1))
    })
}

/// Element bit patterns for [`checksum`] (4-byte elements zero-extended).
pub(crate) trait Bits: Copy {
    /// The bit pattern.
    fn bits(self) -> u64;
}

impl Bits for f32 {
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}

impl Bits for f64 {
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

impl Bits for i64 {
    fn bits(self) -> u64 {
        self.cast_unsigned()
    }
}

/// A small fixed-seed generator (SplitMix64) for positions and orders.
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n` > 0; the modulo bias is irrelevant here).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// `count` random top-left corners of `k`×`k` blocks inside a `side`×`side` array.
pub(crate) fn slab_starts(count: usize, side: usize, k: usize, seed: u64) -> Vec<(usize, usize)> {
    let mut rng = SplitMix::new(seed);
    let span = side.saturating_sub(k) + 1;
    (0..count)
        .map(|_| (rng.below(span), rng.below(span)))
        .collect()
}

/// A random permutation of `0..n` (Fisher–Yates).
pub(crate) fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut rng = SplitMix::new(seed);
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.below(i + 1);
        v.swap(i, j);
    }
    v
}

/// `cells` under `header` as a Markdown table with aligned columns: the first `text_cols`
/// columns left-aligned, the others (figures) right-aligned.
pub(crate) fn markdown_table(header: &[&str], cells: &[Vec<String>], text_cols: usize) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in cells {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |items: &[String]| {
        let mut s = String::from("|");
        for (i, (w, c)) in width.iter().zip(items).enumerate() {
            let pad = w.saturating_sub(c.chars().count());
            if i < text_cols {
                s.push_str(&format!(" {c}{} |", " ".repeat(pad)));
            } else {
                s.push_str(&format!(" {}{c} |", " ".repeat(pad)));
            }
        }
        s.push('\n');
        s
    };
    let head: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    let mut out = line(&head);
    out.push('|');
    for (i, w) in width.iter().enumerate() {
        let dashes = "-".repeat(*w);
        if i < text_cols {
            out.push_str(&format!(" {dashes} |"));
        } else {
            out.push_str(&format!(" {}: |", &dashes[1..]));
        }
    }
    out.push('\n');
    for row in cells {
        out.push_str(&line(row));
    }
    out
}

/// The long-lived h5py process.
pub(crate) struct PySide {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl PySide {
    /// Starts `python script`.
    pub(crate) fn start(python: &Path, script: &Path) -> BenchResult<Self> {
        let mut child = Command::new(python)
            .arg(script)
            // h5's setting holds for every side: numpy follows it (`--no-thp`).
            .env("H5_BENCH_NO_THP", if h5::huge_pages() { "0" } else { "1" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start the Python interpreter {}: {e} (give one with h5py installed \
                     with --python PATH)",
                    python.display()
                )
            })?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .map(BufReader::new)
            .ok_or("no stdout pipe to the Python helper")?;
        Ok(Self {
            child,
            stdin,
            stdout,
        })
    }

    /// Sends one command and returns the answer (an error if the helper failed).
    pub(crate) fn call(&mut self, cmd: &Value) -> BenchResult<Value> {
        let stdin = self.stdin.as_mut().ok_or("the Python helper is closed")?;
        writeln!(stdin, "{cmd}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("cannot send a command to the Python helper: {e}"))?;
        let mut line = String::new();
        let n = self
            .stdout
            .read_line(&mut line)
            .map_err(|e| format!("cannot read the Python helper's answer: {e}"))?;
        if n == 0 {
            return Err("the Python helper exited (see its error output above)".to_owned());
        }
        let v: Value = serde_json::from_str(&line)
            .map_err(|e| format!("bad answer from the Python helper ({e}): {line}"))?;
        if v["ok"].as_bool() == Some(true) {
            Ok(v)
        } else {
            Err(format!(
                "the Python helper failed: {}",
                v["error"].as_str().unwrap_or("unknown error")
            ))
        }
    }

    /// Runs a timed command: (seconds, checksum).
    pub(crate) fn timed(&mut self, cmd: &Value) -> BenchResult<(f64, u64)> {
        let v = self.call(cmd)?;
        let secs = v["secs"].as_f64().ok_or("answer without secs")?;
        let cs = v["checksum"].as_u64().ok_or("answer without checksum")?;
        Ok((secs, cs))
    }
}

impl Drop for PySide {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = writeln!(stdin, "{}", json!({"op": "quit"}));
        }
        let _ = self.child.wait();
    }
}

/// If huge pages were not asked for yet, runs this program again with
/// `GLIBC_TUNABLES=glibc.malloc.hugetlb=1` and returns its exit code.
pub(crate) fn reexec_with_thp(no_thp: bool) -> Option<i32> {
    if no_thp || std::env::var_os(THP_TUNABLE.0).is_some() {
        return None;
    }
    let exe = std::env::current_exe().ok()?;
    let status = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(THP_TUNABLE.0, THP_TUNABLE.1)
        .status()
        .ok()?;
    Some(status.code().unwrap_or(1))
}

/// The lines of a [`markdown_table`], each split into its trimmed cells (tests check tables
/// with it); every line must have the width of the first (aligned columns).
#[cfg(test)]
pub(crate) fn table_cells(t: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines.iter().all(|l| l.len() == lines[0].len()), "{t}");
    lines
        .iter()
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// An h5 error as a message.
pub(crate) fn h5e(e: h5::Error) -> String {
    format!("h5: {e}")
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn ratios_are_written_with_two_decimals_and_x() {
        assert_eq!(format_ratio(0.42, 1.0), "0.42x");
        assert_eq!(format_ratio(3.0, 2.0), "1.50x");
        assert_eq!(format_ratio(1.0, 0.0), "n/a");
        assert_eq!(format_ratio(f64::NAN, 1.0), "n/a");
    }

    #[test]
    fn seconds_and_rates() {
        assert_eq!(format_secs(0.0123), "12.3 ms");
        assert_eq!(format_secs(12.345), "12.35 s");
        assert_eq!(format_secs(5.0569), "5.06 s");
        assert_eq!(format_rate(100.0, "MB/s", 0.5), "200 MB/s");
        assert_eq!(format_rate(3.0, "reads/s", 2.0), "1.5 reads/s");
        assert_eq!(format_rate(3.0, "reads/s", 0.0), "n/a");
    }

    #[test]
    fn workload_selection() {
        assert!(selected(&[], "3b"));
        let only = vec!["1".to_owned(), "3B".to_owned()];
        assert!(selected(&only, "1"));
        assert!(selected(&only, "3b"));
        assert!(!selected(&only, "3"));
        assert!(!selected(&only, "4"));
    }

    #[test]
    fn median_takes_the_middle() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(median(Vec::new()).is_nan());
    }

    #[test]
    fn checksum_weights_positions() {
        assert_eq!(checksum([]), 0);
        assert_eq!(checksum([17, 3, 10]), 17 + 3 * 2 + 10 * 3);
        // The same values in another order give another checksum.
        assert_ne!(checksum([1, 2]), checksum([2, 1]));
        // Wrapping arithmetic, weights restart after the modulus.
        assert_eq!(checksum([u64::MAX, 1]), u64::MAX.wrapping_add(2));
        assert_eq!(1.5f32.bits(), 0x3FC0_0000);
        assert_eq!((-1i64).bits(), u64::MAX);
    }

    #[test]
    fn positions_and_orders_are_fixed_and_in_range() {
        let a = slab_starts(100, 1024, 64, 7);
        assert_eq!(a, slab_starts(100, 1024, 64, 7));
        assert!(a.iter().all(|&(r, c)| r <= 960 && c <= 960));
        let p = permutation(1000, 9);
        let mut sorted = p.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert_ne!(p, sorted);
        assert_eq!(permutation(1000, 9), p);
    }

    #[test]
    fn default_python_prefers_the_venv() {
        let dir = std::env::temp_dir().join(format!("h5-bench-py-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(default_python(&dir), PathBuf::from("python3"));
        let bin = dir.join(".venv").join("bin");
        fs::create_dir_all(&bin).expect("mkdir");
        fs::write(bin.join("python"), "").expect("write");
        assert_eq!(default_python(&dir), bin.join("python"));
        let _ = fs::remove_dir_all(&dir);
    }
}
