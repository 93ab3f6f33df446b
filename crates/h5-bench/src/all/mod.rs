//! `h5-bench` (or `h5-bench all`): the standard workloads W1–W7 on h5, on libhdf5 through
//! h5py and (with the `c-api` feature) on libhdf5 through its C API, side by side, in one run
//! (see `docs/benchmarks.md`).
//!
//! The design is `h5-bench read`'s: one long-lived Python process (`py/h5py_all.py`, which
//! imports `py/h5py_side.py`) answers JSON commands and times only the h5py work; the C side
//! (`cside`) runs in this process. Every workload runs once per system as an untimed warm-up,
//! then `reps` times with the systems' order rotated at each repetition; medians are reported
//! with the ratios `h5/C` and `h5/h5py` of time and of peak memory (below 1: h5 is better). All data and positions are
//! generated from fixed seeds on the Rust side ([`field`], [`SplitMix`]) and sent to Python, or
//! computed by the same formula there; what each run read is checked outside the timed phases
//! against a checksum computed here, and after the warm-up each system also reads the other's
//! file (an untimed cross-check of both writers).

#[cfg(feature = "c-api")]
mod cside;
#[cfg(not(feature = "c-api"))]
#[path = "cside_stub.rs"]
mod cside;
mod field;
mod h5side;

use std::fs;
use std::io::Write as _;
use std::time::Instant;

use h5::{ChunkCacheConfig, FileAccess, FormatBounds};
use serde_json::{Value, json};

use crate::common::{
    BenchResult, PySide, SplitMix, THP_TUNABLE, default_python, format_rate, format_ratio,
    format_secs, markdown_table, median, permutation, selected, slab_starts,
};
use crate::probe::Sample;
use h5side::{AppendSizes, Field, FieldKind};

/// The read workloads' helper, imported by [`HELPER`].
const SIDE_HELPER: &str = include_str!("../../py/h5py_side.py");
/// The Python helper of the standard workloads.
const HELPER: &str = include_str!("../../py/h5py_all.py");

/// Seed of W3's hyperslab corners.
const W3_SEED: u64 = 0x5EED_0603;
/// Seed of W5's member order.
const W5_SEED: u64 = 0x5EED_0605;
/// Seed of W6's (dataset, corner) draws.
const W6_SEED: u64 = 0x5EED_0606;
/// h5py's chunk-cache slot count when W3 gives it 256 MiB: a prime above the dataset's 4096
/// chunks, so that hash collisions do not evict (libhdf5's advice for a large cache).
const W3_BIG_SLOTS: u64 = 10_007;

/// Options of the standard workloads (`h5-bench [all]`).
#[derive(clap::Args, Clone, Debug, PartialEq)]
pub(crate) struct AllOptions {
    /// What every side-by-side command takes.
    #[command(flatten)]
    pub(crate) common: crate::common::SideBySide,
    /// Internal: run only the h5 side of this workload once, in this fresh process, and print
    /// its phases as one JSON line (the parent's peak-memory measurement).
    #[arg(long, hide = true)]
    pub(crate) mem_child: Option<String>,
    /// Internal: which system the memory child runs (`h5` or `c`).
    #[arg(long, hide = true, default_value = "h5")]
    pub(crate) mem_side: String,
    /// Do not time h5py (it still writes the W3/W6 inputs and checks h5's files); for quicker
    /// h5-against-C runs.
    #[arg(long)]
    pub(crate) skip_h5py: bool,
    /// Durable writes on every system: h5 opens with `FileAccess::sync(true)` (its close then
    /// fsyncs), h5py and the C side fsync the file after closing it, inside the timed region.
    #[arg(long)]
    pub(crate) sync: bool,
    /// Time every run of h5 and of the C side in a fresh process of its own (this program
    /// again), so that no run inherits the heap or the pending writeback another system's runs
    /// left in this process. h5py's runs are in their own process either way.
    #[arg(long)]
    pub(crate) fresh: bool,
}

/// Whether workload `id` is selected by `only`: by its id or by the id without its trailing
/// letters (`2` selects `2a` and `2b`).
pub(crate) fn chosen(only: &[String], id: &str) -> bool {
    selected(only, id) || selected(only, id.trim_end_matches(|c: char| c.is_ascii_alphabetic()))
}

/// The sizes of every workload at a scale (1: full, 16: `--quick`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Params {
    /// Side of the W1/W2 field (W1 writes it as one 1-D dataset of `side²` elements).
    pub(crate) side: usize,
    /// W2 chunk side.
    pub(crate) chunk: usize,
    /// W3 random reads.
    pub(crate) w3_reads: usize,
    /// W3 block side.
    pub(crate) w3_block: usize,
    /// W4 sizes.
    pub(crate) w4: (usize, usize, usize),
    /// W5 members.
    pub(crate) w5_members: usize,
    /// W6 datasets.
    pub(crate) w6_dsets: usize,
    /// W6 dataset side.
    pub(crate) w6_side: usize,
    /// W6 chunk side.
    pub(crate) w6_chunk: usize,
    /// W6 random reads.
    pub(crate) w6_reads: usize,
    /// W6 block side.
    pub(crate) w6_block: usize,
    /// Side of W6's hot region (the first 2×2 chunks).
    pub(crate) w6_hot: usize,
}

impl Params {
    /// The sizes for `quick` (volumes / 16) or full runs.
    pub(crate) fn new(quick: bool) -> Params {
        let scale = if quick { 16 } else { 1 };
        // Areas divide by 16, so sides divide by 4.
        let side_div = if quick { 4 } else { 1 };
        let w6_side = 4096 / side_div;
        Params {
            side: 16384 / side_div,
            chunk: 256,
            w3_reads: 2000 / scale,
            w3_block: 64,
            w4: (1000 / scale, 100, 100),
            w5_members: 20_000 / scale,
            w6_dsets: 64,
            w6_side,
            w6_chunk: 512,
            w6_reads: 2000 / scale,
            w6_block: 128,
            w6_hot: (2 * 512).min(w6_side),
        }
    }
}

/// h5py's `libver` for files comparable to h5's at `bounds` (HDF5 1.14 has no 2.0 bound; its
/// `latest` is the newest it writes).
pub(crate) fn h5py_libver(bounds: FormatBounds) -> Value {
    match bounds {
        FormatBounds::Earliest => json!("earliest"),
        FormatBounds::V18 => json!(["v108", "latest"]),
        FormatBounds::V110 => json!(["v110", "latest"]),
        FormatBounds::V112 => json!(["v112", "latest"]),
        FormatBounds::V114 => json!(["v114", "latest"]),
        // V200 and any newer bound: HDF5 1.14's newest.
        _ => json!("latest"),
    }
}

/// One run of a workload on one system.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RunOut {
    /// Measured.
    Done {
        /// One sample per phase.
        phases: Vec<Sample>,
        /// Seconds of the fsync inside each phase (h5py's writers; 0 elsewhere).
        fsync: Vec<f64>,
        /// Checksum of what the run read back.
        checksum: u64,
        /// Size of the file written.
        size: Option<u64>,
    },
    /// The system cannot do this workload (yet); the reason.
    NotAvailable(String),
}

impl RunOut {
    /// A measured run without fsync figures.
    pub(crate) fn done(phases: Vec<Sample>, checksum: u64, size: Option<u64>) -> RunOut {
        let fsync = vec![0.0; phases.len()];
        RunOut::Done {
            phases,
            fsync,
            checksum,
            size,
        }
    }

    /// The helper's answer.
    fn from_py(v: &Value) -> BenchResult<RunOut> {
        let phases = v["phases"].as_array().ok_or("answer without phases")?;
        let mut samples = Vec::with_capacity(phases.len());
        let mut fsync = Vec::with_capacity(phases.len());
        for p in phases {
            samples.push(Sample {
                secs: p["secs"].as_f64().ok_or("phase without secs")?,
                peak: p["peak"].as_u64(),
            });
            fsync.push(p["fsync"].as_f64().unwrap_or(0.0));
        }
        Ok(RunOut::Done {
            phases: samples,
            fsync,
            checksum: v["checksum"].as_u64().ok_or("answer without checksum")?,
            size: v["size"].as_u64(),
        })
    }
}

/// One table row: a phase of a workload.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Phase {
    /// Row label.
    pub(crate) label: String,
    /// Size description.
    pub(crate) size: String,
    /// Units of work for the rate columns (amount, unit).
    pub(crate) rate: Option<(f64, &'static str)>,
    /// Whether the row shows the file sizes.
    pub(crate) file: bool,
}

fn phase(label: &str, size: &str, rate: Option<(f64, &'static str)>, file: bool) -> Phase {
    Phase {
        label: label.to_owned(),
        size: size.to_owned(),
        rate,
        file,
    }
}

/// The untimed cross-check: h5 reads h5py's file, h5py reads h5's file.
struct Cross<'a> {
    h5_reads_py: Box<dyn Fn() -> BenchResult<u64> + 'a>,
    py_reads_h5: Value,
}

/// One run of a workload on a system in this process.
type Run<'a> = Box<dyn FnMut() -> BenchResult<RunOut> + 'a>;

/// A workload: its rows, the h5 run, the C-API run (when built with `c-api`), the h5py command
/// doing the same work.
struct Workload<'a> {
    id: &'static str,
    phases: Vec<Phase>,
    expected: u64,
    h5: Run<'a>,
    c: Option<Run<'a>>,
    py: Value,
    cross: Option<Cross<'a>>,
}

/// The systems compared.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum System {
    /// h5 (this library).
    H5,
    /// libhdf5 through its C API, in this process.
    C,
    /// libhdf5 through h5py, in the helper process.
    Py,
}

/// A measured cell: medians over the repetitions.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cell {
    /// Median seconds, median peak RSS growth, median fsync seconds inside the phase.
    Measured {
        /// Seconds.
        secs: f64,
        /// Peak RSS growth, bytes.
        peak: Option<u64>,
        /// Seconds of fsync included.
        fsync: f64,
    },
    /// Not measured: the text to print.
    Na(String),
}

impl Cell {
    fn secs(&self) -> f64 {
        match self {
            Cell::Measured { secs, .. } => *secs,
            Cell::Na(_) => f64::NAN,
        }
    }

    fn peak(&self) -> Option<u64> {
        match self {
            Cell::Measured { peak, .. } => *peak,
            Cell::Na(_) => None,
        }
    }
}

/// One line of the table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    /// The phase (label, size, rate, file column).
    pub(crate) phase: Phase,
    /// h5's figures.
    pub(crate) h5: Cell,
    /// libhdf5's through its C API (`Na` when not built with `c-api`).
    pub(crate) c: Cell,
    /// h5py's figures.
    pub(crate) py: Cell,
    /// h5's file size.
    pub(crate) h5_file: Option<u64>,
    /// The C side's file size.
    pub(crate) c_file: Option<u64>,
    /// h5py's file size.
    pub(crate) py_file: Option<u64>,
    /// Every check passed (`None`: nothing to check).
    pub(crate) ok: Option<bool>,
}

/// Bytes as MiB with one decimal.
pub(crate) fn format_mib(b: Option<u64>) -> String {
    b.map_or_else(
        || "n/a".to_owned(),
        |b| format!("{:.1} MiB", b as f64 / 1_048_576.0),
    )
}

/// Peaks below this count as this much in the memory ratio, so that two near-zero growths do
/// not make a meaningless ratio.
pub(crate) const MEM_RATIO_FLOOR: u64 = 1 << 20;

/// The peak-memory ratio `h5/other`, each peak at least [`MEM_RATIO_FLOOR`] (n/a when either
/// is unknown).
pub(crate) fn format_mem_ratio(h5: Option<u64>, other: Option<u64>) -> String {
    match (h5, other) {
        (Some(a), Some(b)) => {
            format_ratio(a.max(MEM_RATIO_FLOOR) as f64, b.max(MEM_RATIO_FLOOR) as f64)
        }
        _ => "n/a".to_owned(),
    }
}

/// The rows as an aligned Markdown table; the C API's columns only `with_c`.
pub(crate) fn format_table(rows: &[Row], with_c: bool) -> String {
    // (name, cell, file) of each system shown, h5 first.
    let systems = |r: &Row| -> Vec<(&'static str, Cell, Option<u64>)> {
        let mut v = vec![("h5", r.h5.clone(), r.h5_file)];
        if with_c {
            v.push(("C", r.c.clone(), r.c_file));
        }
        v.push(("h5py", r.py.clone(), r.py_file));
        v
    };
    let names: Vec<&str> = if with_c {
        vec!["h5", "C", "h5py"]
    } else {
        vec!["h5", "h5py"]
    };
    let mut header: Vec<String> = vec!["workload".into(), "size".into()];
    header.extend(names.iter().map(|n| (*n).to_owned()));
    header.extend(names[1..].iter().map(|n| format!("time h5/{n}")));
    header.extend(names.iter().map(|n| format!("{n} peak")));
    header.extend(names[1..].iter().map(|n| format!("mem h5/{n}")));
    header.extend(names.iter().map(|n| format!("{n} rate")));
    header.extend(names.iter().map(|n| format!("{n} file")));
    header.push("check".into());
    let time = |c: &Cell| match c {
        Cell::Measured { secs, .. } => format_secs(*secs),
        Cell::Na(s) => s.clone(),
    };
    let peak = |c: &Cell| match c {
        Cell::Measured { peak, .. } => format_mib(*peak),
        Cell::Na(_) => "n/a".to_owned(),
    };
    let rate = |r: &Row, c: &Cell| match (r.phase.rate, c) {
        (Some((amount, unit)), Cell::Measured { secs, .. }) => format_rate(amount, unit, *secs),
        (Some(_), Cell::Na(_)) => "n/a".to_owned(),
        (None, _) => "-".to_owned(),
    };
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let sys = systems(r);
            let h5 = &sys[0].1;
            let mut line = vec![r.phase.label.clone(), r.phase.size.clone()];
            line.extend(sys.iter().map(|(_, c, _)| time(c)));
            line.extend(
                sys[1..]
                    .iter()
                    .map(|(_, c, _)| format_ratio(h5.secs(), c.secs())),
            );
            line.extend(sys.iter().map(|(_, c, _)| peak(c)));
            line.extend(
                sys[1..]
                    .iter()
                    .map(|(_, c, _)| format_mem_ratio(h5.peak(), c.peak())),
            );
            line.extend(sys.iter().map(|(_, c, _)| rate(r, c)));
            line.extend(sys.iter().map(|(_, _, f)| {
                if r.phase.file {
                    format_mib(*f)
                } else {
                    "-".to_owned()
                }
            }));
            line.push(
                match r.ok {
                    Some(true) => "ok",
                    Some(false) => "MISMATCH",
                    None => "-",
                }
                .to_owned(),
            );
            line
        })
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    markdown_table(&header, &cells, 2)
}

/// Every sample of one system for one workload.
#[derive(Default)]
struct Series {
    secs: Vec<Vec<f64>>,
    peaks: Vec<Vec<u64>>,
    fsync: Vec<Vec<f64>>,
    size: Option<u64>,
    na: Option<String>,
    /// Peaks per phase from a fresh process; replace the in-process ones when present.
    fresh_peaks: Option<Vec<Option<u64>>>,
}

impl Series {
    /// Adds a run; returns its checksum (`None` when not available).
    fn add(&mut self, out: RunOut) -> Option<u64> {
        match out {
            RunOut::NotAvailable(why) => {
                self.na = Some(why);
                None
            }
            RunOut::Done {
                phases,
                fsync,
                checksum,
                size,
            } => {
                self.secs.resize(phases.len(), Vec::new());
                self.peaks.resize(phases.len(), Vec::new());
                self.fsync.resize(phases.len(), Vec::new());
                for (i, s) in phases.iter().enumerate() {
                    self.secs[i].push(s.secs);
                    if let Some(p) = s.peak {
                        self.peaks[i].push(p);
                    }
                    self.fsync[i].push(fsync.get(i).copied().unwrap_or(0.0));
                }
                self.size = size;
                Some(checksum)
            }
        }
    }

    fn cell(&self, i: usize) -> Cell {
        if self.na.is_some() {
            return Cell::Na("n/a".to_owned());
        }
        let Some(secs) = self.secs.get(i).filter(|v| !v.is_empty()) else {
            return Cell::Na("n/a".to_owned());
        };
        let peaks = self.peaks.get(i).cloned().unwrap_or_default();
        let in_process = if peaks.is_empty() {
            None
        } else {
            Some(median(peaks.iter().map(|&p| p as f64).collect()) as u64)
        };
        Cell::Measured {
            secs: median(secs.clone()),
            peak: match &self.fresh_peaks {
                Some(f) => f.get(i).copied().flatten(),
                None => in_process,
            },
            fsync: median(self.fsync.get(i).cloned().unwrap_or_default()),
        }
    }
}

/// Runs the h5 side of workload `id` once (this process is a fresh memory child) and prints
/// its phases' peak RSS growths as one JSON line.
fn mem_child(workloads: &mut [Workload<'_>], id: &str, side: &str) -> BenchResult<bool> {
    let w = workloads
        .iter_mut()
        .find(|w| w.id == id)
        .ok_or_else(|| format!("no workload {id}"))?;
    let expected = w.expected;
    let run: &mut Run<'_> = match side {
        "c" => {
            w.c.as_mut()
                .ok_or("the C side is not built (feature c-api)")?
        }
        _ => &mut w.h5,
    };
    // Extra runs before the reported one (for profiling this process with `perf`).
    let extra: usize = std::env::var("H5_BENCH_CHILD_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1usize)
        .saturating_sub(1);
    // The fastest time of each phase over all runs (a figure robust to other load, for
    // before/after comparisons of one side).
    let mut best: Vec<f64> = Vec::new();
    let mut keep_best = |out: &RunOut| {
        if let RunOut::Done { phases, .. } = out {
            best.resize(phases.len(), f64::INFINITY);
            for (b, s) in best.iter_mut().zip(phases) {
                *b = b.min(s.secs);
            }
        }
    };
    for _ in 0..extra {
        keep_best(&run()?);
    }
    let out = run()?;
    keep_best(&out);
    let (peaks, secs, size): (Vec<Option<u64>>, Vec<f64>, Option<u64>) = match out {
        RunOut::Done {
            phases,
            checksum,
            size,
            ..
        } => {
            if checksum != expected {
                return Err(format!(
                    "the fresh-process run of W{id} read checksum {checksum}, expected {expected}"
                ));
            }
            (
                phases.iter().map(|s| s.peak).collect(),
                phases.iter().map(|s| s.secs).collect(),
                size,
            )
        }
        RunOut::NotAvailable(_) => (Vec::new(), Vec::new(), None),
    };
    println!(
        "{}",
        json!({ "peaks": peaks, "best_secs": best, "secs": secs, "checksum": expected, "size": size })
    );
    Ok(true)
}

/// What a fresh process needs to repeat a workload for its peak memory.
struct Fresh<'a> {
    python: &'a std::path::Path,
    dir: &'a std::path::Path,
    quick: bool,
    sync: bool,
    side: usize,
    /// `--fresh`: the timed runs of h5 and the C side too.
    timing: bool,
}

impl Fresh<'_> {
    /// The peaks per phase of h5 or the C side (`side` = `h5` or `c`): this program again,
    /// running the workload's side once.
    fn child(&self, id: &str, side: &str) -> BenchResult<Vec<Option<u64>>> {
        let v = self.spawn(id, side)?;
        Ok(v["peaks"]
            .as_array()
            .map(|a| a.iter().map(Value::as_u64).collect())
            .unwrap_or_default())
    }

    /// One timed run of h5 or the C side in a fresh process (`--fresh`): its phases (time
    /// and peak), checksum (checked by the child) and file size.
    fn timed(&self, id: &str, side: &str) -> BenchResult<RunOut> {
        let v = self.spawn(id, side)?;
        let secs: Vec<f64> = v["secs"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        let peaks: Vec<Option<u64>> = v["peaks"]
            .as_array()
            .map(|a| a.iter().map(Value::as_u64).collect())
            .unwrap_or_default();
        let phases = secs
            .iter()
            .enumerate()
            .map(|(i, &secs)| Sample {
                secs,
                peak: peaks.get(i).copied().flatten(),
            })
            .collect();
        let checksum = v["checksum"]
            .as_u64()
            .ok_or_else(|| format!("no checksum from the fresh-process run of W{id}"))?;
        Ok(RunOut::done(phases, checksum, v["size"].as_u64()))
    }

    /// Runs this program again on one side of workload `id` once and returns its JSON line.
    fn spawn(&self, id: &str, side: &str) -> BenchResult<Value> {
        let exe = std::env::current_exe().map_err(crate::common::err)?;
        let mut cmd = std::process::Command::new(exe);
        cmd.arg("all").arg("--dir").arg(self.dir).args([
            "--only",
            id,
            "--mem-child",
            id,
            "--mem-side",
            side,
        ]);
        if !h5::huge_pages() {
            cmd.arg("--no-thp");
        }
        if self.quick {
            cmd.arg("--quick");
        }
        if self.sync {
            cmd.arg("--sync");
        }
        let out = cmd.output().map_err(crate::common::err)?;
        if !out.status.success() {
            return Err(format!(
                "the fresh-process run of W{id} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(text.lines().last().unwrap_or(""))
            .map_err(|e| format!("bad answer from the fresh-process run of W{id}: {e}"))
    }

    /// h5py's peaks per phase: a new helper process running the workload's command once (its
    /// checksum must be `expected`).
    fn py(&self, id: &str, cmd: &Value, expected: u64) -> BenchResult<Vec<Option<u64>>> {
        let mut py = PySide::start(self.python, &self.dir.join("h5py_all.py"))?;
        if FIELD_IDS.contains(&id) {
            py.call(&json!({"op": "field", "side": self.side}))?;
        }
        let v = py.call(cmd)?;
        if v["checksum"].as_u64() != Some(expected) {
            return Err(format!(
                "h5py's memory run of W{id} read checksum {}, expected {expected}",
                v["checksum"]
            ));
        }
        Ok(v["phases"]
            .as_array()
            .map(|a| a.iter().map(|p| p["peak"].as_u64()).collect())
            .unwrap_or_default())
    }
}

/// One run of `w` on `sys`.
fn run_on(w: &mut Workload<'_>, py: &mut PySide, sys: System) -> BenchResult<RunOut> {
    match sys {
        System::H5 => (w.h5)(),
        System::C => match w.c.as_mut() {
            Some(run) => run(),
            None => Ok(RunOut::NotAvailable("not built with c-api".to_owned())),
        },
        System::Py => RunOut::from_py(&py.call(&w.py)?),
    }
}

/// The name of a system in messages.
fn system_name(sys: System) -> &'static str {
    match sys {
        System::H5 => "h5",
        System::C => "C",
        System::Py => "h5py",
    }
}

fn measure(
    w: &mut Workload<'_>,
    py: &mut PySide,
    reps: usize,
    fresh: &Fresh<'_>,
    skip_py: bool,
) -> BenchResult<Vec<Row>> {
    print!("  W{} warm-up", w.id);
    let _ = std::io::stdout().flush();
    let mut systems = vec![System::H5];
    if w.c.is_some() {
        systems.push(System::C);
    }
    if !skip_py {
        systems.push(System::Py);
    }
    let slot = |sys: System| match sys {
        System::H5 => 0,
        System::C => 1,
        System::Py => 2,
    };
    let mut series: [Series; 3] = Default::default();
    let mut ok = true;
    let expected = w.expected;
    let mismatch = |what: &str, got: Option<u64>, ok: &mut bool| {
        if let Some(cs) = got
            && cs != expected
        {
            print!(" [{what}: checksum {cs}, expected {expected}]");
            *ok = false;
        }
    };
    // Warm-up: one untimed run per system; only a "not available" answer is kept.
    for &sys in &systems {
        let mut warm = Series::default();
        let cs = warm.add(run_on(w, py, sys)?);
        mismatch(system_name(sys), cs, &mut ok);
        if let Some(why) = &warm.na {
            print!(" [{}: n/a, {why}]", system_name(sys));
        }
        series[slot(sys)].na = warm.na;
    }
    if let Some(cross) = &w.cross {
        // Without h5py's runs (`--skip-h5py`) there is no file of h5py's to read.
        if !skip_py {
            mismatch(
                "h5 reading h5py's file",
                Some((cross.h5_reads_py)()?),
                &mut ok,
            );
        }
        if series[0].na.is_none() {
            let v = py.call(&cross.py_reads_h5)?;
            mismatch("h5py reading h5's file", v["checksum"].as_u64(), &mut ok);
        }
        print!(" + cross-check");
    }
    for rep in 0..reps {
        // The order rotates: each system runs first, second, ... equally often.
        for k in 0..systems.len() {
            let sys = systems[(rep + k) % systems.len()];
            if series[slot(sys)].na.is_some() {
                continue;
            }
            let out = match sys {
                System::H5 if fresh.timing => fresh.timed(w.id, "h5")?,
                System::C if fresh.timing => fresh.timed(w.id, "c")?,
                _ => run_on(w, py, sys)?,
            };
            let cs = series[slot(sys)].add(out);
            mismatch(system_name(sys), cs, &mut ok);
        }
        print!(".");
        let _ = std::io::stdout().flush();
    }
    // Peak memory: one more run per system, each in a fresh process (memory freed by earlier
    // runs but kept by the allocators would otherwise hide the growth).
    print!(" + fresh-process memory runs");
    let _ = std::io::stdout().flush();
    for &sys in &systems {
        let s = &mut series[slot(sys)];
        if s.na.is_some() {
            continue;
        }
        s.fresh_peaks = Some(match sys {
            System::H5 => fresh.child(w.id, "h5")?,
            System::C => fresh.child(w.id, "c")?,
            System::Py => fresh.py(w.id, &w.py, w.expected)?,
        });
    }
    let [h5s, cs, pys] = &series;
    let not_run = |sys: System, s: &Series, i: usize| {
        if systems.contains(&sys) {
            s.cell(i)
        } else {
            Cell::Na("-".to_owned())
        }
    };
    let rows: Vec<Row> = w
        .phases
        .iter()
        .enumerate()
        .map(|(i, ph)| Row {
            phase: ph.clone(),
            h5: h5s.cell(i),
            c: not_run(System::C, cs, i),
            py: not_run(System::Py, pys, i),
            h5_file: h5s.size,
            c_file: cs.size,
            py_file: pys.size,
            ok: Some(ok),
        })
        .collect();
    for r in &rows {
        let fs = match &r.py {
            Cell::Measured { fsync, .. } if *fsync > 0.0 => {
                format!(" (h5py fsync {})", format_secs(*fsync))
            }
            _ => String::new(),
        };
        let secs = |c: &Cell| match c {
            Cell::Measured { secs, .. } => format_secs(*secs),
            Cell::Na(s) => s.clone(),
        };
        print!(
            "\n    {}: h5 {} | C {} | h5py {}{fs} | h5/C {} | h5/h5py {}",
            r.phase.label,
            secs(&r.h5),
            secs(&r.c),
            secs(&r.py),
            format_ratio(r.h5.secs(), r.c.secs()),
            format_ratio(r.h5.secs(), r.py.secs())
        );
    }
    println!("{}", if ok { "" } else { "\n    VALUE MISMATCH" });
    Ok(rows)
}

/// The 1-, 5- and 15-minute load averages.
fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "n/a".to_owned())
}

fn access_with_limit(limit: usize) -> FileAccess {
    FileAccess::new().chunk_cache(ChunkCacheConfig {
        limit,
        ..ChunkCacheConfig::default()
    })
}

/// The standard workloads' test data at (`r`, `c`) of the `side`×`side` field of `salt`.
pub(crate) fn field_value(side: usize, salt: u64, r: usize, c: usize) -> f32 {
    field::value(side, salt, r, c)
}

/// The C side's run of a workload, made by `make` from the path of its file; `None` when
/// this build has no C side.
fn c_run<'a>(
    path: &std::path::Path,
    make: impl FnOnce(std::path::PathBuf) -> Run<'a>,
) -> Option<Run<'a>> {
    cside::AVAILABLE.then(|| make(path.to_path_buf()))
}

use cside::{field_write_read as c_field, slabs as c_slabs, w4 as c_w4, w5 as c_w5};

/// Workloads that use the W1/W2 field.
const FIELD_IDS: [&str; 5] = ["1", "2a", "2b", "3", "3m"];

/// Prints the run's header: versions, format bounds, allocation and memory notes, load.
fn print_header(
    opts: &AllOptions,
    reps: usize,
    py: &mut PySide,
    python: &std::path::Path,
    dir: &std::path::Path,
    bounds: FormatBounds,
    c_version: &str,
) -> BenchResult<()> {
    let v = py.call(&json!({"op": "versions"}))?;
    println!(
        "h5-bench{}: standard workloads, {reps} timed repetitions per system, alternating, medians",
        if opts.common.quick {
            " --quick (volumes / 16)"
        } else {
            ""
        }
    );
    println!(
        "  h5py {} (HDF5 {}), numpy {}, Python {} at {}",
        v["h5py"].as_str().unwrap_or("?"),
        v["hdf5"].as_str().unwrap_or("?"),
        v["numpy"].as_str().unwrap_or("?"),
        v["python"].as_str().unwrap_or("?"),
        python.display()
    );
    println!(
        "  C API: libhdf5 {c_version} (same property lists as h5py; chunk cache: its default, \
         or h5py's rdcc_nbytes where given){}",
        if opts.skip_h5py {
            "; h5py not timed (--skip-h5py)"
        } else {
            ""
        }
    );
    println!(
        "  durability: {}",
        if opts.sync {
            "--sync: h5 FileAccess::sync(true), h5py and C fsync after closing (timed)"
        } else {
            "no fsync on any system (h5's default, as libhdf5's H5Fclose)"
        }
    );
    println!(
        "  format bounds: h5 default {bounds:?} vs h5py libver={}; latest: h5 {:?} vs h5py \
         libver={}",
        h5py_libver(bounds),
        FormatBounds::LATEST,
        h5py_libver(FormatBounds::LATEST)
    );
    let thp = std::env::var(THP_TUNABLE.0).unwrap_or_default();
    println!(
        "  allocations: {}{}",
        if h5::huge_pages() {
            "fresh arrays of 4 MiB or more get transparent huge pages requested (madvise), by \
             numpy, by h5 and by the C side's buffers"
        } else {
            "--no-thp: no side requests transparent huge pages (h5::set_huge_pages(false), \
             numpy's _set_madvise_hugepage(False), the C side's buffers not madvised)"
        },
        if thp.contains("hugetlb=1") {
            "; glibc.malloc.hugetlb=1 set by the caller"
        } else {
            ""
        }
    );
    println!(
        "  peak memory: one extra untimed run per workload and system in a fresh process; RSS \
         growth during each phase (VmHWM after resetting it via /proc/self/clear_refs, minus \
         VmRSS at the phase's start); the ratio counts growths below 1 MiB as 1 MiB"
    );
    println!(
        "  timed runs: {}",
        if opts.fresh {
            "--fresh: every run of h5 and of the C side in a fresh process of its own"
        } else {
            "h5 and the C side alternate in this process (h5py in its own)"
        }
    );
    println!("  load average at start: {}", loadavg());
    println!("  files in {}", dir.display());
    Ok(())
}

/// Runs the standard workloads; returns whether every check passed.
#[allow(clippy::too_many_lines)]
pub(crate) fn run(opts: &AllOptions) -> BenchResult<bool> {
    let p = Params::new(opts.common.quick);
    let reps = opts.common.reps.max(1);
    let dir = opts.common.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir()
            .join("h5-bench-all")
            .join(if opts.common.quick { "quick" } else { "full" })
    });
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (name, text) in [("h5py_side.py", SIDE_HELPER), ("h5py_all.py", HELPER)] {
        let path = dir.join(name);
        fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let python = match &opts.common.python {
        Some(p) => p.clone(),
        None => default_python(&std::env::current_dir().map_err(crate::common::err)?),
    };
    let child = opts.mem_child.clone();
    let sync = opts.sync;
    // h5's file access for the writers: durable closes only with --sync.
    let h5_access = FileAccess::new().sync(sync);
    let h5_access = &h5_access;
    let bounds = FormatBounds::default();
    let libver = h5py_libver(bounds);
    let latest_libver = h5py_libver(FormatBounds::LATEST);
    // The h5py process (none in a memory child, which runs h5 only on existing inputs).
    let mut py = match child {
        Some(_) => None,
        None => Some(PySide::start(&python, &dir.join("h5py_all.py"))?),
    };
    let c_version = cside::init();
    if let Some(py) = py.as_mut() {
        print_header(opts, reps, py, &python, &dir, bounds, &c_version)?;
    }
    let t_start = Instant::now();

    // The W1/W2 field, generated on both sides when a workload needs it; the checksums must
    // agree.
    let need_field = FIELD_IDS.iter().any(|id| chosen(&opts.common.only, id));
    let t0 = Instant::now();
    let values = if need_field {
        field::make(p.side, 0)
    } else {
        Vec::new()
    };
    let field_cs = crate::common::checksum(values.iter().map(|x| u64::from(x.to_bits())));
    let fld = Field {
        values,
        side: p.side,
        checksum: field_cs,
    };
    let mut all_ok = true;
    if let (Some(py), true) = (py.as_mut(), need_field) {
        let py_field = py.call(&json!({"op": "field", "side": p.side}))?;
        all_ok = py_field["checksum"].as_u64() == Some(field_cs);
        println!(
            "  field {n}x{n} f32 generated on both sides in {}: checksums {}",
            format_secs(t0.elapsed().as_secs_f64()),
            if all_ok { "agree" } else { "DIFFER" },
            n = p.side
        );
    }

    let at = |name: &str| dir.join(name);
    let field_mb = (p.side * p.side * 4) as f64 / 1e6;
    let mib = (p.side * p.side * 4) as f64 / 1_048_576.0;
    let grid = format!("{n}x{n} f32, {c}x{c} chunks", n = p.side, c = p.chunk);
    let w3_file = at("w3.h5");
    let w3_reads: Vec<(usize, usize, usize)> = slab_starts(p.w3_reads, p.side, p.w3_block, W3_SEED)
        .into_iter()
        .map(|(r, c)| (0, r, c))
        .collect();
    let w3_json: Vec<[usize; 3]> = w3_reads.iter().map(|&(j, r, c)| [j, r, c]).collect();
    // The field is only generated when a workload needs it.
    let w3_expected = if need_field {
        h5side::slabs_expected(&w3_reads, p.w3_block, |_, r, c| fld.values[r * p.side + c])
    } else {
        0
    };
    let data_name = vec!["data".to_owned()];
    let order = permutation(p.w5_members, W5_SEED);
    let w6_file = at("w6.h5");
    let w6_names: Vec<String> = (0..p.w6_dsets).map(|j| format!("d{j:02}")).collect();
    let w6_reads: Vec<(usize, usize, usize)> = {
        let mut rng = SplitMix::new(W6_SEED);
        let span = p.w6_hot - p.w6_block + 1;
        (0..p.w6_reads)
            .map(|_| (rng.below(p.w6_dsets), rng.below(span), rng.below(span)))
            .collect()
    };
    let mut workloads: Vec<Workload<'_>> = Vec::new();
    for (id, kind, label, size) in [
        (
            "1",
            FieldKind::Contiguous,
            "W1 contiguous",
            format!("{mib:.0} MiB f32 1-D"),
        ),
        ("2a", FieldKind::Chunked, "W2a chunked", grid.clone()),
        (
            "2b",
            FieldKind::Deflate,
            "W2b shuffle+deflate(1)",
            grid.clone(),
        ),
    ] {
        if !chosen(&opts.common.only, id) {
            continue;
        }
        let h5_path = at(&format!("h5_w{id}.h5"));
        let py_path = at(&format!("py_w{id}.h5"));
        let fld = &fld;
        let chunk = p.chunk;
        workloads.push(Workload {
            id,
            phases: vec![
                phase(
                    &format!("{label} write"),
                    &size,
                    Some((field_mb, "MB/s")),
                    true,
                ),
                phase(
                    &format!("{label} read"),
                    &size,
                    Some((field_mb, "MB/s")),
                    false,
                ),
            ],
            expected: field_cs,
            h5: Box::new({
                let h5_path = h5_path.clone();
                move || h5side::field_write_read(&h5_path, kind, fld, chunk, bounds, h5_access)
            }),
            c: c_run(&at(&format!("c_w{id}.h5")), |path| {
                Box::new(move || c_field(&path, kind, fld, chunk, bounds, sync))
            }),
            py: json!({"op": "field_write_read", "path": py_path, "kind": kind.py_name(),
                       "chunk": chunk, "libver": libver, "sync": sync}),
            cross: Some(Cross {
                h5_reads_py: Box::new({
                    let py_path = py_path.clone();
                    move || h5side::check_field(&py_path, fld)
                }),
                py_reads_h5: json!({"op": "check_field", "path": h5_path}),
            }),
        });
    }

    // W3: random hyperslabs of h5py's W2(b) file, read by both.
    if chosen(&opts.common.only, "3") || chosen(&opts.common.only, "3m") {
        if let Some(py) = py.as_mut() {
            let t0 = Instant::now();
            py.call(
                &json!({"op": "w2b_gen", "path": w3_file, "chunk": p.chunk, "libver": libver}),
            )?;
            println!(
                "  W3 input (W2b's layout, written by h5py) in {}",
                format_secs(t0.elapsed().as_secs_f64())
            );
        }
        for (id, label, access, nbytes, nslots) in [
            (
                "3",
                "W3 random 64x64, default caches",
                FileAccess::new(),
                None,
                None,
            ),
            (
                "3m",
                "W3 random 64x64, 256 MiB caches",
                access_with_limit(256 << 20),
                Some(256u64 << 20),
                Some(W3_BIG_SLOTS),
            ),
        ] {
            let (path, names, reads) = (&w3_file, &data_name, &w3_reads);
            let k = p.w3_block;
            if !chosen(&opts.common.only, id) {
                continue;
            }
            workloads.push(Workload {
                id,
                phases: vec![phase(
                    label,
                    &format!("{} reads of W2b", p.w3_reads),
                    Some((p.w3_reads as f64, "reads/s")),
                    false,
                )],
                expected: w3_expected,
                h5: Box::new(move || h5side::slabs(path, names, reads, k, &access)),
                c: c_run(path, |path| {
                    Box::new(move || c_slabs(&path, names, reads, k, nbytes, nslots))
                }),
                py: json!({"op": "slabs", "path": w3_file, "dsets": data_name, "size": k,
                           "reads": w3_json, "rdcc_nbytes": nbytes, "rdcc_nslots": nslots}),
                cross: None,
            });
        }
    }

    // W4: many extensible datasets, default and latest bounds.
    let w4 = AppendSizes {
        n: p.w4.0,
        rounds: p.w4.1,
        per: p.w4.2,
    };
    let w4_expected = h5side::w4_expected(w4);
    for (id, b, lv, tag) in [
        ("4", bounds, libver.clone(), "default bounds"),
        (
            "4l",
            FormatBounds::LATEST,
            latest_libver.clone(),
            "latest bounds",
        ),
    ] {
        if !chosen(&opts.common.only, id) {
            continue;
        }
        let h5_path = at(&format!("h5_w{id}.h5"));
        let py_path = at(&format!("py_w{id}.h5"));
        let size = format!("{} datasets", w4.n);
        workloads.push(Workload {
            id,
            phases: vec![
                phase(
                    &format!("W4 create, {tag}"),
                    &size,
                    Some((w4.n as f64, "datasets/s")),
                    false,
                ),
                phase(
                    &format!("W4 append, {tag}"),
                    &format!("{} rounds x {} x {} elements", w4.rounds, w4.n, w4.per),
                    Some(((w4.n * w4.rounds) as f64, "appends/s")),
                    true,
                ),
            ],
            expected: w4_expected,
            h5: Box::new({
                let h5_path = h5_path.clone();
                move || h5side::w4(&h5_path, w4, b, h5_access)
            }),
            c: c_run(&at(&format!("c_w{id}.h5")), |path| {
                Box::new(move || c_w4(&path, w4, b, sync))
            }),
            py: json!({"op": "w4", "path": py_path, "n": w4.n, "rounds": w4.rounds,
                       "per": w4.per, "libver": lv, "sync": sync}),
            cross: Some(Cross {
                h5_reads_py: Box::new({
                    let py_path = py_path.clone();
                    move || h5side::check_w4(&py_path, w4)
                }),
                py_reads_h5: json!({"op": "check_w4", "path": h5_path, "n": w4.n,
                                    "rounds": w4.rounds, "per": w4.per}),
            }),
        });
    }

    // W5: one group of many tiny datasets.
    if chosen(&opts.common.only, "5") {
        let h5_path = at("h5_w5.h5");
        let py_path = at("py_w5.h5");
        let size = format!("{} members", p.w5_members);
        let members = p.w5_members;
        let rate = Some((members as f64, "members/s"));
        let order = &order;
        workloads.push(Workload {
            id: "5",
            phases: vec![
                phase("W5 create group + close", &size, rate, true),
                phase("W5 reopen, open each by name", &size, rate, false),
                phase("W5 open + list names", &size, rate, false),
            ],
            expected: h5side::w5_expected(order),
            h5: Box::new({
                let h5_path = h5_path.clone();
                move || h5side::w5(&h5_path, members, order, bounds, h5_access)
            }),
            c: c_run(&at("c_w5.h5"), |path| {
                Box::new(move || c_w5(&path, members, order, bounds, sync))
            }),
            py: json!({"op": "w5", "path": py_path, "members": members, "order": order,
                       "libver": libver, "sync": sync}),
            cross: Some(Cross {
                h5_reads_py: Box::new({
                    let py_path = py_path.clone();
                    move || h5side::check_w5(&py_path, order)
                }),
                py_reads_h5: json!({"op": "check_w5", "path": h5_path, "order": order}),
            }),
        });
    }

    // W6: many deflated datasets read in their hot corners through one shared cache.
    if ["6", "6m", "6e"]
        .iter()
        .any(|id| chosen(&opts.common.only, id))
    {
        if let Some(py) = py.as_mut() {
            let t0 = Instant::now();
            let g = py.call(
                &json!({"op": "w6_gen", "path": w6_file, "dsets": p.w6_dsets,
                                    "side": p.w6_side, "chunk": p.w6_chunk}),
            )?;
            println!(
                "  W6 input ({} datasets {s}x{s} f32, {c}x{c} chunks, shuffle+deflate(1); {}) {} in {}",
                p.w6_dsets,
                format_mib(g["size"].as_u64()),
                if g["generated"].as_bool() == Some(true) {
                    "written by h5py"
                } else {
                    "reused"
                },
                format_secs(t0.elapsed().as_secs_f64()),
                s = p.w6_side,
                c = p.w6_chunk
            );
        }
        let w6_json: Vec<[usize; 3]> = w6_reads.iter().map(|&(j, r, c)| [j, r, c]).collect();
        let w6_expected = h5side::slabs_expected(&w6_reads, p.w6_block, |j, r, c| {
            field::value(p.w6_side, j as u64 + 1, r, c)
        });
        let default_mib = ChunkCacheConfig::default().limit >> 20;
        for (id, label, access, per_ds) in [
            (
                "6",
                format!("W6 hot corners, h5 default ({default_mib} MiB) vs 1 MiB/dataset"),
                FileAccess::new(),
                1u64 << 20,
            ),
            (
                // libhdf5 2.0's default is 8 MiB per dataset.
                "6m",
                format!("W6 hot corners, h5 default ({default_mib} MiB) vs 8 MiB/dataset"),
                FileAccess::new(),
                8 << 20,
            ),
            (
                // Equal totals: h5's one budget as large as 8 MiB times the datasets.
                "6e",
                format!("W6 hot corners, h5 {} MiB vs 8 MiB/dataset", 8 * p.w6_dsets),
                access_with_limit((8 << 20) * p.w6_dsets),
                8 << 20,
            ),
        ] {
            let c_per_ds = Some(per_ds);
            let (path, names, reads) = (&w6_file, &w6_names, &w6_reads);
            let k = p.w6_block;
            if !chosen(&opts.common.only, id) {
                continue;
            }
            workloads.push(Workload {
                id,
                phases: vec![Phase {
                    label,
                    size: format!(
                        "{} reads of {}x{k} in {} datasets",
                        p.w6_reads, k, p.w6_dsets
                    ),
                    rate: Some((p.w6_reads as f64, "reads/s")),
                    file: false,
                }],
                expected: w6_expected,
                h5: Box::new(move || h5side::slabs(path, names, reads, k, &access)),
                c: c_run(path, |path| {
                    Box::new(move || c_slabs(&path, names, reads, k, c_per_ds, None))
                }),
                py: json!({"op": "slabs", "path": w6_file, "dsets": w6_names, "size": k,
                           "reads": w6_json, "rdcc_nbytes": per_ds}),
                cross: None,
            });
        }
    }

    if let Some(id) = &child {
        return mem_child(&mut workloads, id, &opts.mem_side);
    }
    let Some(mut py) = py else {
        return Err("no h5py process".to_owned());
    };
    let fresh = Fresh {
        python: &python,
        dir: &dir,
        quick: opts.common.quick,
        sync,
        side: p.side,
        timing: opts.fresh,
    };
    println!();
    let mut rows = Vec::new();
    for w in &mut workloads {
        let r = measure(w, &mut py, reps, &fresh, opts.skip_h5py)?;
        all_ok &= r.iter().all(|r| r.ok != Some(false));
        rows.extend(r);
    }
    drop(workloads);
    drop(py);
    if chosen(&opts.common.only, "7") && child.is_none() {
        // W7 needs a writer and a reader process, and libhdf5's side is legacy SWMR through
        // h5py: its own command measures it.
        let na = Cell::Na("see `h5-bench swmr`".to_owned());
        rows.push(Row {
            phase: phase("W7 SWMR write-to-visibility", "-", None, false),
            h5: na.clone(),
            c: na.clone(),
            py: na,
            h5_file: None,
            c_file: None,
            py_file: None,
            ok: None,
        });
    }
    println!(
        "\nResults ({}; medians; time and memory ratios h5/C and h5/h5py: below 1 = h5 better; \
         peak = RSS growth in a fresh process; load average at end: {}; total {}):\n",
        if opts.common.quick {
            "--quick"
        } else {
            "full sizes"
        },
        loadavg(),
        format_secs(t_start.elapsed().as_secs_f64())
    );
    print!("{}", format_table(&rows, cside::AVAILABLE));
    Ok(all_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_divides_volumes_by_16() {
        let full = Params::new(false);
        let quick = Params::new(true);
        assert_eq!(full.side * full.side * 4, 1 << 30);
        assert_eq!(quick.side * quick.side * 16, full.side * full.side);
        assert_eq!(full.w3_reads, 2000);
        assert_eq!(quick.w3_reads, 125);
        assert_eq!(full.w4, (1000, 100, 100));
        assert_eq!(full.w5_members, 20_000);
        assert_eq!(quick.w5_members, 1250);
        assert_eq!((full.w6_side, full.w6_hot), (4096, 1024));
        assert_eq!(
            quick.w6_side * quick.w6_side * 16,
            full.w6_side * full.w6_side
        );
        assert_eq!(quick.w6_hot, 1024);
    }

    #[test]
    fn ids_select_their_variants() {
        let only = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(chosen(&[], "6m"));
        assert!(chosen(&only(&["2"]), "2a") && chosen(&only(&["2"]), "2b"));
        assert!(chosen(&only(&["4"]), "4l"));
        assert!(chosen(&only(&["3m"]), "3m"));
        assert!(!chosen(&only(&["3m"]), "3"));
        assert!(!chosen(&only(&["2a"]), "2b"));
        assert!(chosen(&only(&["1"]), "1"));
    }

    #[test]
    fn mem_ratio_has_a_floor() {
        assert_eq!(format_mem_ratio(Some(64 << 20), Some(0)), "64.00x");
        assert_eq!(format_mem_ratio(Some(0), Some(1000)), "1.00x");
        assert_eq!(format_mem_ratio(None, Some(1)), "n/a");
    }

    #[test]
    fn h5py_libver_matches_the_bounds() {
        assert_eq!(h5py_libver(FormatBounds::Earliest), json!("earliest"));
        assert_eq!(h5py_libver(FormatBounds::V18), json!(["v108", "latest"]));
        assert_eq!(h5py_libver(FormatBounds::LATEST), json!("latest"));
    }

    #[test]
    fn table_shows_ratios_memory_and_na() {
        let rows = vec![
            Row {
                phase: phase("W1 write", "64 MiB", Some((64.0, "MB/s")), true),
                h5: Cell::Measured {
                    secs: 0.5,
                    peak: Some(2 << 20),
                    fsync: 0.0,
                },
                c: Cell::Measured {
                    secs: 0.25,
                    peak: Some(1 << 20),
                    fsync: 0.0,
                },
                py: Cell::Measured {
                    secs: 1.0,
                    peak: Some(4 << 20),
                    fsync: 0.2,
                },
                h5_file: Some(64 << 20),
                c_file: Some(32 << 20),
                py_file: Some(64 << 20),
                ok: Some(true),
            },
            Row {
                phase: phase("W4 append, latest", "x", None, true),
                h5: Cell::Na("n/a".to_owned()),
                c: Cell::Na("-".to_owned()),
                py: Cell::Measured {
                    secs: 2.0,
                    peak: Some(0),
                    fsync: 0.0,
                },
                h5_file: None,
                c_file: None,
                py_file: Some(1 << 20),
                ok: Some(false),
            },
        ];
        // With the C columns.
        let lines = crate::common::table_cells(&format_table(&rows, true));
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[0],
            [
                "workload",
                "size",
                "h5",
                "C",
                "h5py",
                "time h5/C",
                "time h5/h5py",
                "h5 peak",
                "C peak",
                "h5py peak",
                "mem h5/C",
                "mem h5/h5py",
                "h5 rate",
                "C rate",
                "h5py rate",
                "h5 file",
                "C file",
                "h5py file",
                "check"
            ]
        );
        assert_eq!(
            lines[2],
            [
                "W1 write",
                "64 MiB",
                "500.0 ms",
                "250.0 ms",
                "1.00 s",
                "2.00x",
                "0.50x",
                "2.0 MiB",
                "1.0 MiB",
                "4.0 MiB",
                "2.00x",
                "0.50x",
                "128 MB/s",
                "256 MB/s",
                "64.0 MB/s",
                "64.0 MiB",
                "32.0 MiB",
                "64.0 MiB",
                "ok"
            ]
        );
        assert_eq!(lines[3][3], "-");
        // Without them (a build without the c-api feature).
        let lines = crate::common::table_cells(&format_table(&rows, false));
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[2],
            [
                "W1 write",
                "64 MiB",
                "500.0 ms",
                "1.00 s",
                "0.50x",
                "2.0 MiB",
                "4.0 MiB",
                "0.50x",
                "128 MB/s",
                "64.0 MB/s",
                "64.0 MiB",
                "64.0 MiB",
                "ok"
            ]
        );
        assert_eq!(
            lines[3],
            [
                "W4 append, latest",
                "x",
                "n/a",
                "2.00 s",
                "n/a",
                "n/a",
                "0.0 MiB",
                "n/a",
                "-",
                "-",
                "n/a",
                "1.0 MiB",
                "MISMATCH"
            ]
        );
    }

    #[test]
    fn series_medians_and_not_available() {
        let mut s = Series::default();
        for (t, p) in [(3.0, 30), (1.0, 10), (2.0, 20)] {
            let out = RunOut::done(
                vec![Sample {
                    secs: t,
                    peak: Some(p),
                }],
                7,
                Some(5),
            );
            assert_eq!(s.add(out), Some(7));
        }
        assert_eq!(
            s.cell(0),
            Cell::Measured {
                secs: 2.0,
                peak: Some(20),
                fsync: 0.0
            }
        );
        assert_eq!(s.size, Some(5));
        let mut na = Series::default();
        assert_eq!(na.add(RunOut::NotAvailable("why".to_owned())), None);
        assert_eq!(na.cell(0), Cell::Na("n/a".to_owned()));
    }

    #[test]
    fn py_answers_parse() {
        let v = json!({"phases": [{"secs": 1.5, "peak": 4096, "fsync": 0.25}, {"secs": 0.5,
                       "peak": null}], "checksum": 9, "size": 100});
        assert_eq!(
            RunOut::from_py(&v).expect("parses"),
            RunOut::Done {
                phases: vec![
                    Sample {
                        secs: 1.5,
                        peak: Some(4096)
                    },
                    Sample {
                        secs: 0.5,
                        peak: None
                    }
                ],
                fsync: vec![0.25, 0.0],
                checksum: 9,
                size: Some(100),
            }
        );
        assert!(RunOut::from_py(&json!({"checksum": 1})).is_err());
    }
}
