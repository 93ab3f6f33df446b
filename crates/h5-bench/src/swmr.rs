//! `h5-bench swmr`: W7 and the seed's VFD SWMR performance tests (§5.3).
//!
//! * W7 latency: a writer appends 1000 values, each the wall-clock time it was written; a
//!   reader in another process polls and, for each value it sees, records now − value. Four
//!   runs in the same invocation: h5 VFD SWMR with ticks of 0.1 s (the reader looking once a
//!   tick, then again with a 10 ms retry delay), h5 VFD SWMR with `end_tick`
//!   after every append, and libhdf5 legacy SWMR (h5py writer with a flush per append, h5py
//!   reader with `refresh`).
//! * Writer throughput: the same appends with and without VFD SWMR.
//! * Perf test 1: many small extensible datasets appended round-robin; perf test 2: ten large
//!   datasets growing by a plane per round; each with and without VFD SWMR (the overhead).
//! * The API check's cost with no SWMR file open and with one.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::{cpu_secs, selected, thread_cpu_secs};
use h5::{
    CreateOptions, FileAccess, FileSpaceOptions, FormatBounds, PageBufferConfig, SpaceStrategy,
    SwmrConfig,
};

/// Options of `h5-bench swmr`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct SwmrOptions {
    /// Appends of W7.
    #[arg(long, default_value_t = 1000)]
    pub(crate) appends: usize,
    /// Datasets of perf test 1.
    #[arg(long, default_value_t = 1000)]
    pub(crate) datasets: usize,
    /// Rounds of perf test 1 (the seed's run is longer than its 20 rounds would take here:
    /// 200 make a run of about a second, long enough to measure).
    #[arg(long, default_value_t = 200)]
    pub(crate) rounds: usize,
    /// Side of the planes of perf test 2 (the seed's 1000).
    #[arg(long, default_value_t = 1000)]
    pub(crate) plane: usize,
    /// Rounds of perf test 2.
    #[arg(long, default_value_t = 4)]
    pub(crate) planes: usize,
    /// Small sizes (a quick run).
    #[arg(long)]
    pub(crate) quick: bool,
    /// The Python interpreter with h5py (default: the workspace's .venv).
    #[arg(long)]
    pub(crate) python: Option<PathBuf>,
    /// Skip the libhdf5 comparison.
    #[arg(long)]
    pub(crate) no_python: bool,
    /// Runs of each side of the perf tests, alternating (no SWMR, SWMR, no SWMR, ...), the best
    /// of each side reported; also the alternating W7 runs of h5 `end_tick` and libhdf5.
    #[arg(long, default_value_t = 5)]
    pub(crate) runs: usize,
    /// Run only these parts (comma-separated: w7, perf1, perf2, guard; default: all).
    #[arg(long, value_delimiter = ',')]
    pub(crate) only: Vec<String>,
    /// Which side of the perf tests runs (`swmr` alone: for a profiler).
    #[arg(long, value_enum, default_value_t = Sides::Both)]
    pub(crate) side: Sides,
    /// Perf test 1 with a fixed number of ticks: the SWMR writer ends a tick explicitly after
    /// every this many rounds (its tick length is a minute, so the clock ends none), and the
    /// thread CPU of those end-of-tick calls is reported per tick. Both sides then do the same
    /// work however loaded the machine is (by default ticks follow the wall clock).
    #[arg(long)]
    pub(crate) tick_every: Option<usize>,
    /// Skip the traced SWMR run (with a reader process) that follows the timed runs of each
    /// perf test: a profiler's run then holds only the timed runs (and ends sooner).
    #[arg(long)]
    pub(crate) no_trace: bool,
}

/// The sides of the perf tests that run.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sides {
    /// Without and with VFD SWMR, alternating.
    Both,
    /// Without VFD SWMR only.
    Plain,
    /// With VFD SWMR only.
    Swmr,
}

/// Perf test 1's explicit ticks: none (ticks follow the clock), or one after every `n` rounds;
/// the thread CPU seconds spent in those `end_tick` calls accumulate in `eot_cpu`.
#[derive(Clone, Copy, Debug, Default)]
struct ExplicitTicks {
    every: Option<usize>,
    eot_cpu: f64,
}

/// What one run cost: wall seconds, CPU seconds of the thread that ran it (nanosecond
/// resolution) and of the whole process (10 ms resolution), and the ticks a VFD SWMR writer
/// published (0 without SWMR; ticks follow the wall clock, so a slower run publishes more).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Cost {
    wall: f64,
    cpu: f64,
    cpu_process: f64,
    ticks: u64,
}

impl Cost {
    /// The smaller of each figure (the best of several runs).
    fn best(self, o: Cost) -> Cost {
        Cost {
            wall: self.wall.min(o.wall),
            cpu: self.cpu.min(o.cpu),
            cpu_process: self.cpu_process.min(o.cpu_process),
            ticks: self.ticks.min(o.ticks),
        }
    }
}

/// Runs `f` (which returns the ticks it published) and measures it.
fn measure(f: impl FnOnce() -> Result<u64, String>) -> Result<Cost, String> {
    let (t0, p0) = (
        thread_cpu_secs().unwrap_or(f64::NAN),
        cpu_secs().unwrap_or(f64::NAN),
    );
    let start = Instant::now();
    let ticks = f()?;
    let wall = start.elapsed().as_secs_f64();
    Ok(Cost {
        ticks,
        wall,
        cpu: thread_cpu_secs().unwrap_or(f64::NAN) - t0,
        cpu_process: cpu_secs().unwrap_or(f64::NAN) - p0,
    })
}

/// `runs` alternating runs of `f(swmr)` for the selected sides; the best of each side
/// (`None` for a side that did not run). A fresh file per run.
fn best_of(
    runs: usize,
    sides: Sides,
    mut f: impl FnMut(bool, usize) -> Result<u64, String>,
) -> Result<(Option<Cost>, Option<Cost>), String> {
    let (mut plain, mut swmr): (Option<Cost>, Option<Cost>) = (None, None);
    for i in 0..runs.max(1) {
        for on in [false, true] {
            let wanted = match sides {
                Sides::Both => true,
                Sides::Plain => !on,
                Sides::Swmr => on,
            };
            if !wanted {
                continue;
            }
            let c = measure(|| f(on, i))?;
            let slot = if on { &mut swmr } else { &mut plain };
            *slot = Some(slot.map_or(c, |b| b.best(c)));
        }
    }
    Ok((plain, swmr))
}

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn paged() -> CreateOptions {
    CreateOptions {
        bounds: FormatBounds::V110,
        file_space: FileSpaceOptions::default()
            .with_strategy(SpaceStrategy::Page, false, 1)
            .with_page_size(4096),
        ..CreateOptions::default()
    }
}

fn access(cfg: Option<SwmrConfig>) -> FileAccess {
    let a = FileAccess::default()
        .page_buffer(PageBufferConfig::new(1024 * 4096, 0, 0).expect("valid page buffer"));
    match cfg {
        Some(c) => a.vfd_swmr(c),
        None => a,
    }
}

fn writer_cfg(tick_len: i32) -> SwmrConfig {
    SwmrConfig {
        tick_len,
        max_lag: 7,
        flush_raw_data: true,
        ..SwmrConfig::writer()
    }
}

fn e(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Median of unsorted values.
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    pct(&s, 0.5)
}

/// Percentile of sorted values.
fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// What W7's writer measured: appends per second and, with `end_tick` after each append, the
/// sorted durations of those calls (seconds).
struct W7Writer {
    rate: f64,
    end_ticks: Vec<f64>,
}

/// The writer of W7: `n` appends of the current time to dataset "t"; `end_tick` after each
/// when `manual`.
fn w7_write(
    path: &Path,
    n: usize,
    cfg: Option<SwmrConfig>,
    manual: bool,
) -> Result<W7Writer, String> {
    let f = h5::File::create_with(path, &access(cfg.clone()), &paged()).map_err(e)?;
    let d = f
        .root()
        .map_err(e)?
        .new_dataset::<f64>()
        .shape([0])
        .max_shape([None])
        .chunk([256])
        .create("t")
        .map_err(e)?;
    if cfg.is_some() {
        f.end_tick().map_err(e)?;
    }
    let mut end_ticks = Vec::with_capacity(if manual { n } else { 0 });
    let start = Instant::now();
    for i in 0..n {
        d.resize([i + 1]).map_err(e)?;
        d.write_slice(
            &[now_secs()],
            [ndarray::SliceInfoElem::Slice {
                start: i as isize,
                end: Some(i as isize + 1),
                step: 1,
            }],
        )
        .map_err(e)?;
        if manual {
            let t = Instant::now();
            f.end_tick().map_err(e)?;
            end_ticks.push(t.elapsed().as_secs_f64());
        }
        // A steady stream, as an instrument would produce (W7's shape).
        std::thread::sleep(Duration::from_micros(500));
    }
    let secs = start.elapsed().as_secs_f64();
    f.close().map_err(e)?;
    end_ticks.sort_by(f64::total_cmp);
    Ok(W7Writer {
        rate: n as f64 / secs,
        end_ticks,
    })
}

/// The VFD SWMR log file of one W7 process when `H5_BENCH_SWMR_LOG` names a directory (each
/// end of tick's processing time and torn-read retries, for looking into the latency tail).
fn log_path(cfg: &mut SwmrConfig, name: &str) {
    if let Some(dir) = std::env::var_os("H5_BENCH_SWMR_LOG") {
        cfg.log_file_path = Path::new(&dir).join(name);
    }
}

/// One value the W7 reader saw: its latency, how late the reader's poll before it woke (past
/// its 200 µs sleep), and how long that poll's end of tick and then its shape and read took
/// (seconds).
#[derive(Clone, Copy, Debug)]
struct Seen {
    lat: f64,
    woke_late: f64,
    eot: f64,
    read: f64,
}

/// The reader of W7 (runs in its own process): polls until `n` values are visible; prints
/// what it saw of each value as JSON.
pub(crate) fn w7_read(path: &Path, n: usize, tick_len: i32, retry_ms: u64) -> Result<(), String> {
    let mut cfg = SwmrConfig {
        tick_len,
        reader_retry: (retry_ms > 0).then(|| Duration::from_millis(retry_ms)),
        max_lag: 7,
        presume_posix_semantics: false,
        open_timeout: Some(Duration::from_secs(60)),
        ..SwmrConfig::reader()
    };
    log_path(&mut cfg, &format!("reader_{tick_len}.log"));
    let f = h5::File::open_with(path, &access(Some(cfg))).map_err(e)?;
    let d = f.dataset("t").map_err(e)?;
    let mut out: Vec<Seen> = Vec::with_capacity(n);
    let mut seen = 0usize;
    let stop = Instant::now() + Duration::from_secs(600);
    let pause = Duration::from_micros(200);
    let mut woke_late = 0.0;
    while seen < n && Instant::now() < stop {
        let poll = Instant::now();
        if tick_len == 0 {
            f.end_tick().map_err(e)?;
        } else {
            // Any API call runs an expired end of tick.
            f.member_names().map_err(e)?;
        }
        let eot = poll.elapsed().as_secs_f64();
        let len = d.shape()[0];
        if len > seen {
            // The new values only, as libhdf5's reader reads them.
            let v: Vec<f64> = d
                .read_slice::<f64>([ndarray::SliceInfoElem::Slice {
                    start: seen as isize,
                    end: Some(len as isize),
                    step: 1,
                }])
                .map_err(e)?
                .iter()
                .copied()
                .collect();
            let now = now_secs();
            let read = poll.elapsed().as_secs_f64() - eot;
            for x in &v {
                out.push(Seen {
                    lat: now - x,
                    woke_late,
                    eot,
                    read,
                });
            }
            seen = len;
        }
        let slept = Instant::now();
        std::thread::sleep(pause);
        woke_late = slept.elapsed().saturating_sub(pause).as_secs_f64();
    }
    let rows: Vec<[f64; 4]> = out
        .iter()
        .map(|s| [s.lat, s.woke_late, s.eot, s.read])
        .collect();
    println!("{}", serde_json::to_string(&rows).map_err(e)?);
    f.close().map_err(e)
}

/// W7's reader retry delay in its second timed-tick run (`SwmrConfig::reader_retry`).
const W7_RETRY_MS: u64 = 10;

/// One W7 run: writer here, reader in a child process. Returns what the reader saw of each
/// value, sorted by latency, and what the writer measured.
fn w7(
    dir: &Path,
    name: &str,
    n: usize,
    tick_len: i32,
    manual: bool,
    retry_ms: u64,
) -> Result<(Vec<Seen>, W7Writer), String> {
    let path = dir.join(name);
    let exe = std::env::current_exe().map_err(e)?;
    let reader = Command::new(exe)
        .args([
            "swmr-read",
            &path.display().to_string(),
            &n.to_string(),
            &tick_len.to_string(),
            &retry_ms.to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(e)?;
    let mut cfg = writer_cfg(tick_len);
    log_path(&mut cfg, &format!("writer_{tick_len}.log"));
    let written = w7_write(&path, n, Some(cfg), manual)?;
    let out = reader.wait_with_output().map_err(e)?;
    if !out.status.success() {
        return Err(format!("W7 reader failed: {}", out.status));
    }
    let rows: Vec<[f64; 4]> = serde_json::from_slice(&out.stdout).map_err(e)?;
    let mut seen: Vec<Seen> = rows
        .into_iter()
        .map(|[lat, woke_late, eot, read]| Seen {
            lat,
            woke_late,
            eot,
            read,
        })
        .collect();
    seen.sort_by(|a, b| a.lat.total_cmp(&b.lat));
    Ok((seen, written))
}

const LEGACY: &str = r#"
import sys, time, json, subprocess, h5py, numpy as np
mode, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "write":
    f = h5py.File(path, "w", libver="latest")
    d = f.create_dataset("t", shape=(0,), maxshape=(None,), chunks=(256,), dtype="f8")
    f.swmr_mode = True
    r = subprocess.Popen([sys.executable, sys.argv[0], "read", path, str(n)], stdout=subprocess.PIPE)
    time.sleep(0.5)
    t0 = time.time()
    for i in range(n):
        d.resize((i + 1,))
        d[i] = time.time()
        d.flush()
        time.sleep(0.0005)
    rate = n / (time.time() - t0)
    lat = json.loads(r.communicate()[0])
    f.close()
    print(json.dumps({"lat": lat, "rate": rate}))
else:
    while True:
        try:
            f = h5py.File(path, "r", libver="latest", swmr=True)
            break
        except OSError:
            time.sleep(0.01)
    d = f["t"]
    seen, lat = 0, []
    while seen < n:
        d.refresh()
        m = d.shape[0]
        if m > seen:
            v = d[seen:m]
            now = time.time()
            lat.extend(float(now - x) for x in v)
            seen = m
        time.sleep(0.0002)
    print(json.dumps(sorted(lat)))
"#;

fn legacy(dir: &Path, python: &Path, n: usize) -> Result<(Vec<f64>, f64), String> {
    let script = dir.join("legacy_swmr.py");
    std::fs::write(&script, LEGACY).map_err(e)?;
    let out = Command::new(python)
        .arg(&script)
        .args([
            "write",
            &dir.join("legacy.h5").display().to_string(),
            &n.to_string(),
        ])
        .output()
        .map_err(e)?;
    if !out.status.success() {
        return Err(format!(
            "h5py legacy SWMR: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(e)?;
    let lat = v["lat"]
        .as_array()
        .ok_or("no latencies")?
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect();
    Ok((lat, v["rate"].as_f64().unwrap_or(f64::NAN)))
}

/// What a perf test's traced run records (SWMR-148, SWMR-149): the create and append phases'
/// wall seconds, and when the first dataset reached each length (its first dimension, UNIX
/// seconds after the write returned).
#[derive(Debug, Default)]
struct Trace {
    create_secs: f64,
    append_secs: f64,
    first_dataset: Vec<(usize, f64)>,
    /// The reader process: the writer keeps ending ticks until it has seen everything and
    /// exited, as a writer that stays open would (a run shorter than a tick publishes nothing
    /// before its close removes the metadata file).
    reader: Option<std::process::Child>,
}

impl Trace {
    /// Before the traced writer closes `f`: end ticks until the reader has exited.
    fn hold_open(&mut self, f: &h5::File) -> Result<(), String> {
        let Some(r) = self.reader.as_mut() else {
            return Ok(());
        };
        let stop = Instant::now() + Duration::from_secs(600);
        while r.try_wait().map_err(e)?.is_none() && Instant::now() < stop {
            f.end_tick().map_err(e)?;
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }
}

/// Perf test 1: `datasets` extensible 1-d datasets, `rounds` round-robin passes appending 10
/// values to each. Returns the ticks published.
fn perf1(
    path: &Path,
    datasets: usize,
    rounds: usize,
    swmr: bool,
    ticks: &mut ExplicitTicks,
) -> Result<u64, String> {
    perf1_traced(path, datasets, rounds, swmr, ticks, None)
}

/// [`perf1`], recording its phases and the first dataset's writes in `trace`.
fn perf1_traced(
    path: &Path,
    datasets: usize,
    rounds: usize,
    swmr: bool,
    ticks: &mut ExplicitTicks,
    mut trace: Option<&mut Trace>,
) -> Result<u64, String> {
    let tick_len = if ticks.every.is_some() { 600 } else { 1 };
    let cfg = swmr.then(|| writer_cfg(tick_len));
    let start = Instant::now();
    let f = h5::File::create_with(path, &access(cfg), &paged()).map_err(e)?;
    let mut ds = Vec::with_capacity(datasets);
    for j in 0..datasets {
        ds.push(
            f.root()
                .map_err(e)?
                .new_dataset::<i32>()
                .shape([0])
                .max_shape([None])
                .chunk([64])
                .create(&format!("d{j}"))
                .map_err(e)?,
        );
    }
    let appends = Instant::now();
    if let Some(t) = trace.as_deref_mut() {
        t.create_secs = start.elapsed().as_secs_f64();
    }
    for r in 0..rounds {
        for (j, d) in ds.iter_mut().enumerate() {
            d.resize([(r + 1) * 10]).map_err(e)?;
            d.write_slice(
                &[r as i32; 10],
                [ndarray::SliceInfoElem::Slice {
                    start: (r * 10) as isize,
                    end: Some((r * 10 + 10) as isize),
                    step: 1,
                }],
            )
            .map_err(e)?;
            if j == 0
                && let Some(t) = trace.as_deref_mut()
            {
                t.first_dataset.push(((r + 1) * 10, now_secs()));
            }
        }
        if swmr && ticks.every.is_some_and(|n| (r + 1) % n.max(1) == 0) {
            let t0 = thread_cpu_secs().unwrap_or(f64::NAN);
            f.end_tick().map_err(e)?;
            ticks.eot_cpu += thread_cpu_secs().unwrap_or(f64::NAN) - t0;
        }
    }
    if let Some(t) = trace {
        t.append_secs = appends.elapsed().as_secs_f64();
        t.hold_open(&f)?;
    }
    close_counting_ticks(f)
}

/// Closes `f`; returns the ticks it published (0 without VFD SWMR).
fn close_counting_ticks(f: h5::File) -> Result<u64, String> {
    let ticks = if f.is_vfd_swmr() {
        f.vfd_swmr_status().map_err(e)?.tick.saturating_sub(1)
    } else {
        0
    };
    f.close().map_err(e)?;
    Ok(ticks)
}

/// Perf test 2: ten int32 datasets n × side × side, chunks 1 × side × side, one plane per
/// dataset per round. Returns the ticks published.
fn perf2(path: &Path, side: usize, planes: usize, swmr: bool) -> Result<u64, String> {
    perf2_traced(path, side, planes, swmr, None)
}

/// [`perf2`], recording its phases and the first dataset's planes in `trace`.
fn perf2_traced(
    path: &Path,
    side: usize,
    planes: usize,
    swmr: bool,
    mut trace: Option<&mut Trace>,
) -> Result<u64, String> {
    let cfg = swmr.then(|| writer_cfg(1));
    let start = Instant::now();
    let f = h5::File::create_with(path, &access(cfg), &paged()).map_err(e)?;
    let mut ds = Vec::new();
    for j in 0..10 {
        ds.push(
            f.root()
                .map_err(e)?
                .new_dataset::<i32>()
                .shape([0, side, side])
                .max_shape([None, Some(side), Some(side)])
                .chunk([1, side, side])
                .create(&format!("p{j}"))
                .map_err(e)?,
        );
    }
    let plane = vec![7i32; side * side];
    let all = ndarray::SliceInfoElem::Slice {
        start: 0,
        end: None,
        step: 1,
    };
    let appends = Instant::now();
    if let Some(t) = trace.as_deref_mut() {
        t.create_secs = start.elapsed().as_secs_f64();
    }
    for r in 0..planes {
        for (j, d) in ds.iter_mut().enumerate() {
            d.resize([r + 1, side, side]).map_err(e)?;
            d.write_slice(
                &plane,
                [
                    ndarray::SliceInfoElem::Slice {
                        start: r as isize,
                        end: Some(r as isize + 1),
                        step: 1,
                    },
                    all,
                    all,
                ],
            )
            .map_err(e)?;
            if j == 0
                && let Some(t) = trace.as_deref_mut()
            {
                t.first_dataset.push((r + 1, now_secs()));
            }
        }
    }
    if let Some(t) = trace {
        t.append_secs = appends.elapsed().as_secs_f64();
        t.hold_open(&f)?;
    }
    close_counting_ticks(f)
}

/// The reader process of the perf tests' latency runs (`swmr-watch-len`): polls `dataset`'s
/// first dimension until it reaches `len`; prints every growth it saw as JSON
/// `[[length, UNIX seconds], ...]`.
pub(crate) fn watch_len(path: &Path, dataset: &str, len: usize) -> Result<(), String> {
    let cfg = SwmrConfig {
        tick_len: 1,
        max_lag: 7,
        presume_posix_semantics: false,
        open_timeout: Some(Duration::from_secs(60)),
        ..SwmrConfig::reader()
    };
    let f = h5::File::open_with(path, &access(Some(cfg))).map_err(e)?;
    let stop = Instant::now() + Duration::from_secs(600);
    let mut seen: Vec<(usize, f64)> = Vec::new();
    let mut last = 0usize;
    while last < len && Instant::now() < stop {
        // Opening the dataset is an API call: it runs the reader's end of tick once its tick
        // (0.1 s) has expired. Before the writer's first tick after creating it, it is absent.
        if let Ok(d) = f.dataset(dataset) {
            let n = d.shape().first().copied().unwrap_or(0);
            if n > last {
                seen.push((n, now_secs()));
                last = n;
            }
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    println!("{}", serde_json::to_string(&seen).map_err(e)?);
    f.close().map_err(e)
}

/// Write-to-visible latencies (seconds): for each write `(length, time)`, the first time the
/// reader saw the dataset at least that long, minus the write's time.
fn latencies(writes: &[(usize, f64)], seen: &[(usize, f64)]) -> Vec<f64> {
    writes
        .iter()
        .filter_map(|&(len, at)| {
            seen.iter()
                .find(|&&(n, _)| n >= len)
                .map(|&(_, t)| (t - at).max(0.0))
        })
        .collect()
}

/// A traced SWMR run of a perf test with a reader process watching its first dataset: the
/// phases and the write-to-visible latencies of that dataset's writes.
fn traced_with_reader(
    path: &Path,
    dataset: &str,
    len: usize,
    run: impl FnOnce(&mut Trace) -> Result<u64, String>,
) -> Result<(Trace, Vec<f64>), String> {
    let exe = std::env::current_exe().map_err(e)?;
    let reader = Command::new(exe)
        .args([
            "swmr-watch-len",
            &path.display().to_string(),
            dataset,
            &len.to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(e)?;
    let mut trace = Trace {
        reader: Some(reader),
        ..Trace::default()
    };
    run(&mut trace)?;
    let reader = trace.reader.take().ok_or("the reader process was lost")?;
    let out = reader.wait_with_output().map_err(e)?;
    if !out.status.success() {
        return Err(format!("the perf tests' reader failed: {}", out.status));
    }
    let seen: Vec<(usize, f64)> = serde_json::from_slice(&out.stdout).map_err(e)?;
    let lat = latencies(&trace.first_dataset, &seen);
    if lat.len() != trace.first_dataset.len() {
        return Err(format!(
            "the reader saw {} of {} writes",
            lat.len(),
            trace.first_dataset.len()
        ));
    }
    Ok((trace, lat))
}

/// Reports a traced run (SWMR-148, SWMR-149): phases, per-object times and latencies.
fn report_traced(
    rep: &mut Report,
    what: &str,
    objects: usize,
    writes: usize,
    t: &Trace,
    lat: &[f64],
) {
    rep.add(
        &format!("{what}: SWMR create / append phases (reader attached)"),
        format!("{:.3} s / {:.3} s", t.create_secs, t.append_secs),
    );
    rep.add(
        &format!("{what}: per-dataset create / per-write time"),
        format!(
            "{:.1} µs / {:.1} µs",
            1e6 * t.create_secs / objects.max(1) as f64,
            1e6 * t.append_secs / writes.max(1) as f64
        ),
    );
    let (min, max) = lat.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| {
        (lo.min(x), hi.max(x))
    });
    let mean = lat.iter().sum::<f64>() / lat.len().max(1) as f64;
    rep.add(
        &format!(
            "{what}: write-to-visible latency min / mean / max ({} writes of the first dataset)",
            lat.len()
        ),
        format!("{} / {} / {}", ms(min), ms(mean), ms(max)),
    );
}

/// Cost of the API guard per call: (no SWMR file open, one open), in nanoseconds.
fn guard_cost(dir: &Path) -> Result<(f64, f64), String> {
    let calls = 200_000;
    let time = || {
        let start = Instant::now();
        for _ in 0..calls {
            let g = h5_swmr::queue::enter().map_err(e)?;
            g.exit().map_err(e)?;
        }
        Ok::<f64, String>(start.elapsed().as_nanos() as f64 / calls as f64)
    };
    let none = time()?;
    let f = h5::File::create_with(
        dir.join("guard.h5"),
        &access(Some(writer_cfg(100))),
        &paged(),
    )
    .map_err(e)?;
    let one = time()?;
    f.close().map_err(e)?;
    Ok((none, one))
}

/// What `h5-bench swmr` measured.
#[derive(Debug, Default)]
pub(crate) struct Report {
    lines: Vec<(String, String)>,
}

impl Report {
    fn add(&mut self, what: &str, value: String) {
        println!("{what:<58} {value}");
        self.lines.push((what.to_owned(), value));
    }

    #[cfg(test)]
    fn has(&self, what: &str) -> bool {
        self.lines
            .iter()
            .any(|(w, v)| w.starts_with(what) && !v.contains("NaN"))
    }
}

fn ms(x: f64) -> String {
    format!("{:.2} ms", 1000.0 * x)
}

/// Reports one perf test: best wall and CPU of each side that ran, and the SWMR throughput
/// relative to no SWMR (wall and CPU) when both ran.
fn report_perf(rep: &mut Report, what: &str, runs: usize, sides: (Option<Cost>, Option<Cost>)) {
    let secs = |c: Option<Cost>, f: fn(&Cost) -> f64| {
        c.map_or("-".to_owned(), |c| format!("{:.3} s", f(&c)))
    };
    let (plain, swmr) = sides;
    rep.add(
        &format!("{what}: no SWMR / SWMR, wall (best of {runs})"),
        format!("{} / {}", secs(plain, |c| c.wall), secs(swmr, |c| c.wall)),
    );
    rep.add(
        &format!("{what}: no SWMR / SWMR, CPU of the thread"),
        format!("{} / {}", secs(plain, |c| c.cpu), secs(swmr, |c| c.cpu)),
    );
    rep.add(
        &format!("{what}: no SWMR / SWMR, CPU of the process"),
        format!(
            "{} / {}",
            secs(plain, |c| c.cpu_process),
            secs(swmr, |c| c.cpu_process)
        ),
    );
    if let (Some(p), Some(s)) = (plain, swmr) {
        rep.add(
            &format!("{what}: ticks of the SWMR run; extra CPU per tick"),
            if s.ticks == 0 {
                "0 ; -".to_owned()
            } else {
                format!("{} ; {}", s.ticks, ms((s.cpu - p.cpu) / s.ticks as f64))
            },
        );
        rep.add(
            &format!("{what}: SWMR throughput vs no SWMR, wall / CPU (target >= 90 %)"),
            format!(
                "{:.0} % / {:.0} %",
                100.0 * p.wall / s.wall,
                100.0 * p.cpu / s.cpu
            ),
        );
    }
}

/// Runs everything; `python = None` skips the libhdf5 comparison.
pub(crate) fn run(o: &SwmrOptions, python: Option<&Path>) -> Result<Report, String> {
    let dir = tempfile_dir()?;
    let (appends, datasets, rounds, side, planes) = if o.quick {
        (200, 100, 5, 200, 2)
    } else {
        (o.appends, o.datasets, o.rounds, o.plane, o.planes)
    };
    let mut rep = Report::default();
    if selected(&o.only, "w7") {
        w7_all(&mut rep, &dir, appends, o.runs, python)?;
    }
    if selected(&o.only, "perf1") {
        // The cheapest end of tick per tick over the SWMR runs (explicit ticks only).
        let mut eot_best = f64::INFINITY;
        let sides = best_of(o.runs, o.side, |on, i| {
            let p = dir.join(format!("p1_{on}_{i}.h5"));
            let mut ticks = ExplicitTicks {
                every: o.tick_every,
                eot_cpu: 0.0,
            };
            let r = perf1(&p, datasets, rounds, on, &mut ticks);
            let _ = std::fs::remove_file(&p);
            if let (true, Ok(n), Some(_)) = (on, &r, o.tick_every)
                && *n > 0
            {
                eot_best = eot_best.min(ticks.eot_cpu / *n as f64);
            }
            r
        })?;
        let what = format!("perf test 1 ({datasets} datasets x {rounds} rounds)");
        report_perf(&mut rep, &what, o.runs, sides);
        if o.side != Sides::Plain && !o.no_trace {
            let p = dir.join("p1_traced.h5");
            let (t, lat) = traced_with_reader(&p, "d0", rounds * 10, |t| {
                perf1_traced(
                    &p,
                    datasets,
                    rounds,
                    true,
                    &mut ExplicitTicks::default(),
                    Some(t),
                )
            })?;
            let _ = std::fs::remove_file(&p);
            report_traced(&mut rep, &what, datasets, datasets * rounds, &t, &lat);
        }
        if o.tick_every.is_some() && eot_best.is_finite() {
            rep.add(
                &format!("{what}: end_tick CPU per explicit tick (best run)"),
                ms(eot_best),
            );
        }
    }
    if selected(&o.only, "perf2") {
        let sides = best_of(o.runs, o.side, |on, i| {
            let p = dir.join(format!("p2_{on}_{i}.h5"));
            let r = perf2(&p, side, planes, on);
            let _ = std::fs::remove_file(&p);
            r
        })?;
        let what = format!("perf test 2 (10 x {planes} planes of {side}^2 int32)");
        report_perf(&mut rep, &what, o.runs, sides);
        if o.side != Sides::Plain && !o.no_trace {
            let p = dir.join("p2_traced.h5");
            let (t, lat) = traced_with_reader(&p, "p0", planes, |t| {
                perf2_traced(&p, side, planes, true, Some(t))
            })?;
            let _ = std::fs::remove_file(&p);
            report_traced(&mut rep, &what, 10, 10 * planes, &t, &lat);
        }
    }
    if selected(&o.only, "guard") {
        let (none, one) = guard_cost(&dir)?;
        rep.add(
            "API guard per call: no SWMR file / one SWMR file",
            format!("{none:.0} ns / {one:.0} ns"),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(rep)
}

/// W7: h5 with ticks of 0.1 s, then `runs` alternating runs of h5 with `end_tick` per append
/// and of libhdf5's legacy SWMR (when `python` is given), and the writer throughput.
fn w7_all(
    rep: &mut Report,
    dir: &Path,
    appends: usize,
    runs: usize,
    python: Option<&Path>,
) -> Result<(), String> {
    let (seen, tick_w) = w7(dir, "w7_tick.h5", appends, 1, false, 0)?;
    let lat: Vec<f64> = seen.iter().map(|s| s.lat).collect();
    rep.add(
        "W7 h5 VFD SWMR, tick 0.1 s: latency p50 / p99",
        format!("{} / {}", ms(pct(&lat, 0.5)), ms(pct(&lat, 0.99))),
    );
    rep.add(
        "W7 h5 p99 in ticks (target <= 2)",
        format!("{:.2}", pct(&lat, 0.99) / 0.1),
    );
    // The reader looking again 10 ms after a look that found no new tick (OQ-17): a new tick is
    // seen about 10 ms after it is published instead of up to a tick later.
    let (seen, _) = w7(dir, "w7_retry.h5", appends, 1, false, W7_RETRY_MS)?;
    let lat: Vec<f64> = seen.iter().map(|s| s.lat).collect();
    rep.add(
        &format!("W7 h5 VFD SWMR, tick 0.1 s, reader retry {W7_RETRY_MS} ms: latency p50 / p99"),
        format!("{} / {}", ms(pct(&lat, 0.5)), ms(pct(&lat, 0.99))),
    );
    rep.add(
        &format!("W7 h5 p99 in ticks, reader retry {W7_RETRY_MS} ms (target <= 2)"),
        format!("{:.2}", pct(&lat, 0.99) / 0.1),
    );
    // h5 with end_tick per append and libhdf5's legacy SWMR, alternating: the tail is set by
    // the machine's scheduling (see the breakdown), so one run's ratio says little.
    let (mut seen_e, mut p99_h5, mut p99_l, mut end_ticks) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut rate_e, mut rate_l) = (Vec::new(), Vec::new());
    for i in 0..runs.max(1) {
        let (seen, w) = w7(dir, &format!("w7_end_{i}.h5"), appends, 0, true, 0)?;
        let lat: Vec<f64> = seen.iter().map(|s| s.lat).collect();
        p99_h5.push(pct(&lat, 0.99));
        seen_e.extend(seen);
        end_ticks.extend(w.end_ticks);
        rate_e.push(w.rate);
        if let Some(py) = python {
            let (lat_l, r) = legacy(dir, py, appends)?;
            p99_l.push(pct(&lat_l, 0.99));
            rate_l.push(r);
        }
    }
    seen_e.sort_by(|a, b| a.lat.total_cmp(&b.lat));
    end_ticks.sort_by(f64::total_cmp);
    let lat_e: Vec<f64> = seen_e.iter().map(|s| s.lat).collect();
    let list = |v: &[f64]| v.iter().map(|&x| ms(x)).collect::<Vec<_>>().join(", ");
    rep.add(
        &format!("W7 h5 VFD SWMR, end_tick per append: latency p50 / p99 ({runs} runs pooled)"),
        format!("{} / {}", ms(pct(&lat_e, 0.5)), ms(pct(&lat_e, 0.99))),
    );
    rep.add("W7 h5 end_tick: p99 of each run", list(&p99_h5));
    rep.add(
        "W7 h5 writer end_tick call: p50 / p99 / max",
        format!(
            "{} / {} / {}",
            ms(pct(&end_ticks, 0.5)),
            ms(pct(&end_ticks, 0.99)),
            ms(pct(&end_ticks, 1.0))
        ),
    );
    // Where the time of the slowest 1 % of values went, next to the median value's.
    let tail = &seen_e[seen_e.len() - seen_e.len().div_ceil(100)..];
    let mean = |f: fn(&Seen) -> f64| tail.iter().map(f).sum::<f64>() / tail.len().max(1) as f64;
    let mid = seen_e.get(seen_e.len() / 2).copied();
    let at_mid = |f: fn(&Seen) -> f64| mid.as_ref().map_or(f64::NAN, f);
    for (what, f) in [
        ("latency", (|s: &Seen| s.lat) as fn(&Seen) -> f64),
        ("reader woke late", |s| s.woke_late),
        ("reader end of tick", |s| s.eot),
        ("reader shape + read", |s| s.read),
    ] {
        rep.add(
            &format!("W7 end_tick {what}: median value / slowest 1 % (mean)"),
            format!("{} / {}", ms(at_mid(f)), ms(mean(f))),
        );
    }
    if python.is_some() {
        rep.add("W7 libhdf5 legacy SWMR: p99 of each run", list(&p99_l));
        let ratios: Vec<f64> = p99_h5.iter().zip(&p99_l).map(|(h, l)| h / l).collect();
        rep.add(
            "W7 p99 ratio h5 end_tick / libhdf5 legacy, per run",
            ratios
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
        rep.add(
            "W7 p99 ratio of the medians (target <= 1)",
            format!("{:.2}", median(&p99_h5) / median(&p99_l)),
        );
        rep.add(
            "W7 libhdf5 legacy writer appends/s (median)",
            format!("{:.0}", median(&rate_l)),
        );
    }
    let plain = w7_write(&dir.join("w7_plain.h5"), appends, None, false)?.rate;
    rep.add(
        "W7 h5 writer appends/s: no SWMR / tick 0.1 s / end_tick each",
        format!("{plain:.0} / {:.0} / {:.0}", tick_w.rate, median(&rate_e)),
    );
    Ok(())
}

fn tempfile_dir() -> Result<PathBuf, String> {
    let d = std::env::temp_dir().join(format!("h5-bench-swmr-{}", std::process::id()));
    std::fs::create_dir_all(&d).map_err(e)?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    // SWMR-150: the benchmark runs both of the seed's workloads with and without VFD SWMR and
    // reports the ratio (here at a tiny size; the seed's sizes are `h5-bench swmr`'s defaults);
    // the guard's cost is measured (docs/benchmarks.md).
    #[test]
    fn swmr_150_report_every_figure() {
        let dir = tempfile_dir().unwrap();
        let p1 = measure(|| {
            perf1(
                &dir.join("a.h5"),
                20,
                3,
                true,
                &mut ExplicitTicks::default(),
            )
        })
        .unwrap();
        let p2 = measure(|| perf2(&dir.join("b.h5"), 32, 2, true)).unwrap();
        assert!(p1.wall > 0.0 && p2.wall > 0.0);
        assert!(p1.cpu > 0.0 && p1.cpu.is_finite(), "thread CPU {}", p1.cpu);
        let f = h5::File::open(dir.join("a.h5")).unwrap();
        assert_eq!(f.dataset("d19").unwrap().shape(), vec![30]);
        let f = h5::File::open(dir.join("b.h5")).unwrap();
        assert_eq!(f.dataset("p9").unwrap().shape(), vec![2, 32, 32]);
        let (none, one) = guard_cost(&dir).unwrap();
        assert!(none > 0.0 && one > 0.0);
        let mut rep = Report::default();
        report_perf(&mut rep, "perf test 1", 1, (Some(p1), Some(p1)));
        assert!(rep.has("perf test 1: SWMR throughput"));
        assert!(rep.lines.iter().any(|(_, v)| v == "100 % / 100 %"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `--tick-every`: the SWMR side publishes exactly one tick per that many rounds (the clock
    /// ends none), their CPU is counted, and the data is all there.
    #[test]
    fn explicit_ticks_fix_the_tick_count() {
        let dir = tempfile_dir().unwrap().join("explicit");
        std::fs::create_dir_all(&dir).unwrap();
        let mut ticks = ExplicitTicks {
            every: Some(2),
            eot_cpu: 0.0,
        };
        let n = perf1(&dir.join("a.h5"), 20, 6, true, &mut ticks).unwrap();
        assert_eq!(n, 3);
        // A measurement (the thread's scheduler clock may not advance over calls this short).
        assert!(
            ticks.eot_cpu >= 0.0 && ticks.eot_cpu.is_finite(),
            "{ticks:?}"
        );
        let f = h5::File::open(dir.join("a.h5")).unwrap();
        assert_eq!(f.dataset("d7").unwrap().read_1d::<i32>().unwrap()[55], 5);
        let mut plain = ExplicitTicks {
            every: Some(2),
            eot_cpu: 0.0,
        };
        assert_eq!(
            perf1(&dir.join("b.h5"), 20, 6, false, &mut plain).unwrap(),
            0
        );
        assert_eq!(plain.eot_cpu, 0.0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
