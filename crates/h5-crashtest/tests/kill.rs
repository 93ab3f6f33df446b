//! Writers killed with SIGKILL at seeded random moments (issue 14).
//!
//! A writer process runs the workload (appending to extensible unfiltered and deflated
//! datasets, creating groups with attributes, flushing every few operations) on one file,
//! continuing what earlier writers left. It is killed at a random moment: before it has opened
//! the file, or up to 150 ms after. After each kill:
//!
//! 1. the file and its journal are copied as they are, for h5py to open before any recovery
//!    (it must refuse the file or read correct values, never wrong ones);
//! 2. h5 opens the file (rolling a hot journal back) and checks every value: everything the
//!    last completed flush wrote must be there, and nothing present may be wrong;
//! 3. the recovered file is copied for h5py, which must read it all correctly.
//!
//! The h5py checks run in one process at the end. `H5_KILL_RUNS` sets the number of kills
//! (20 by default; the figure is 200) and `H5_KILL_SEED` the seed. The same run with
//! h5py as the writer is `h5py_writer_for_comparison` (ignored: it reports, it does not pass
//! or fail, since libhdf5 makes no such promise).

#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use h5_crashtest::{Checkpoint, Rng, Wrong, last_progress, progress_path, py_script, verify};

const FLUSH_EVERY: &str = "4";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum WriterKind {
    H5,
    H5py,
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn python() -> PathBuf {
    h5_testkit::verify::python()
}

fn spawn(kind: WriterKind, path: &Path, seed: u64) -> Child {
    let mut cmd = match kind {
        WriterKind::H5 => {
            let mut c = Command::new(env!("CARGO_BIN_EXE_h5-crashtest"));
            c.arg("write");
            c
        }
        WriterKind::H5py => {
            let mut c = Command::new(python());
            c.arg(py_script("h5py_writer.py"));
            c
        }
    };
    cmd.arg(path)
        .arg(seed.to_string())
        .arg(FLUSH_EVERY)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("writer process")
}

/// Waits for the writer's `started` line (or its end).
fn wait_started(child: &mut Child) -> bool {
    let Some(out) = child.stdout.take() else {
        return false;
    };
    let mut line = String::new();
    let mut reader = BufReader::new(out);
    reader.read_line(&mut line).is_ok() && line.trim() == "started"
}

/// Copies the file (an empty one when the writer died before creating it) and its journal.
fn copy_with_journal(from: &Path, to: &Path) {
    copy_file(from, to);
    let j = h5::journal_path(from);
    if j.exists() {
        std::fs::copy(&j, h5::journal_path(to)).expect("copy journal");
    }
}

fn hot_journal(path: &Path) -> bool {
    use h5_io::{FileStorage, OpenMode};
    let j = h5::journal_path(path);
    match (
        FileStorage::open(path, OpenMode::ReadOnly),
        FileStorage::open(&j, OpenMode::ReadOnly),
    ) {
        (Ok(d), Ok(j)) => h5_io::is_hot(&d, &j).unwrap_or(false),
        _ => false,
    }
}

fn copy_file(from: &Path, to: &Path) {
    if from.exists() {
        std::fs::copy(from, to).expect("copy");
    } else {
        std::fs::write(to, b"").expect("empty copy");
    }
}

/// What one kill left, as checked.
#[derive(Debug)]
struct Kill {
    flushed: Option<Checkpoint>,
    /// The journal was hot: the kill came while flushed structures were being changed.
    hot: bool,
    h5: Result<Checkpoint, Wrong>,
    /// h5py on the file as the kill left it.
    h5py_before: String,
    /// h5py on the file once h5 has opened it.
    h5py_after: String,
}

/// Checks the copies of the last kills with h5py (one process), fills their results in and
/// deletes the copies (200 kills of copies would not fit a small disk).
fn check_pending(out: &mut [Kill], pending: &mut Vec<(usize, PathBuf, PathBuf)>) {
    if pending.is_empty() {
        return;
    }
    let items: Vec<(PathBuf, Option<Checkpoint>)> = pending
        .iter()
        .flat_map(|(i, raw, rec)| {
            [
                (raw.clone(), out[*i].flushed),
                (rec.clone(), out[*i].flushed),
            ]
        })
        .collect();
    let results = h5py_check(&items);
    for ((i, raw, rec), pair) in pending.drain(..).zip(results.chunks(2)) {
        out[i].h5py_before = pair[0].clone();
        out[i].h5py_after = pair[1].clone();
        for p in [h5::journal_path(&raw), raw, rec] {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn h5py_check(items: &[(PathBuf, Option<Checkpoint>)]) -> Vec<String> {
    let list: Vec<serde_json::Value> = items
        .iter()
        .map(|(p, c)| {
            let c = c.unwrap_or_default();
            serde_json::json!({"path": p, "at_least": [c.raw, c.zip, c.grid, c.groups]})
        })
        .collect();
    let dir = items[0].0.parent().unwrap();
    let spec = dir.join("check.json");
    std::fs::write(&spec, serde_json::to_string(&list).unwrap()).unwrap();
    let out = Command::new(python())
        .arg(py_script("check.py"))
        .arg(&spec)
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "check.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("check.py output")
}

/// Runs `kills` kills of `kind` writers; returns every kill's results.
fn run(kind: WriterKind, kills: u64, seed: u64, dir: &Path) -> Vec<Kill> {
    let path = dir.join("kill.h5");
    let progress = progress_path(&path);
    let mut rng = Rng::new(seed);
    let mut flushed: Option<Checkpoint> = None;
    let mut out: Vec<Kill> = Vec::new();
    let mut pending = Vec::new();
    for i in 0..kills {
        let mut child = spawn(kind, &path, seed.wrapping_add(i));
        // One kill in ten lands while the writer starts and opens the file.
        if rng.below(10) == 0 {
            std::thread::sleep(Duration::from_millis(rng.below(40)));
        } else {
            wait_started(&mut child);
            std::thread::sleep(Duration::from_millis(rng.below(150)));
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        if let Some(c) = last_progress(&progress) {
            flushed = Some(c);
        }
        let raw = dir.join(format!("raw{i:03}.h5"));
        copy_with_journal(&path, &raw);
        let hot = hot_journal(&raw);
        let h5 = match h5::File::open(&path) {
            Ok(f) => verify(&f, &flushed.unwrap_or_default()),
            Err(e) => Err(Wrong::Unreadable(format!("open: {e}"))),
        };
        let recovered = dir.join(format!("rec{i:03}.h5"));
        copy_file(&path, &recovered);
        if h5.is_err() {
            // What the next writer could not continue is started afresh.
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_file(h5::journal_path(&path));
            let _ = std::fs::remove_file(&progress);
        }
        out.push(Kill {
            flushed,
            hot,
            h5,
            h5py_before: String::new(),
            h5py_after: String::new(),
        });
        pending.push((out.len() - 1, raw, recovered));
        if pending.len() == 20 {
            check_pending(&mut out, &mut pending);
        }
        if out.last().is_some_and(|k| k.h5.is_err()) {
            flushed = None;
        }
    }
    check_pending(&mut out, &mut pending);
    out
}

/// Counts of results, for the report.
fn tally<'a>(results: impl Iterator<Item = &'a str>) -> String {
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for r in results {
        let kind = r.split(':').next().unwrap_or(r);
        *counts.entry(kind).or_default() += 1;
    }
    format!("{counts:?}")
}

#[test]
fn h5_writer_killed_at_random_moments_loses_nothing_flushed() {
    let kills = env_u64("H5_KILL_RUNS", 20);
    let seed = env_u64("H5_KILL_SEED", 14);
    let dir = tempfile::tempdir().unwrap();
    let results = run(WriterKind::H5, kills, seed, dir.path());
    let mut failures = Vec::new();
    for (i, k) in results.iter().enumerate() {
        match (&k.h5, k.flushed) {
            (Ok(_), _) | (Err(Wrong::Unreadable(_)), None) => {}
            (Err(w), _) => failures.push(format!("kill {i}: h5: {w} (flushed {:?})", k.flushed)),
        }
    }
    let before: Vec<&str> = results.iter().map(|k| k.h5py_before.as_str()).collect();
    let after: Vec<&str> = results.iter().map(|k| k.h5py_after.as_str()).collect();
    for (i, (k, (b, a))) in results.iter().zip(before.iter().zip(&after)).enumerate() {
        // Before recovery h5py must refuse the file (the in-place marker) or read it right.
        if !(*b == "ok"
            || b.starts_with("unopenable")
            || k.flushed.is_none() && !b.starts_with("wrong"))
        {
            failures.push(format!("kill {i}: h5py before recovery: {b}"));
        }
        if k.flushed.is_some() && *a != "ok" {
            failures.push(format!("kill {i}: h5py after recovery: {a}"));
        }
    }
    let flushes = results.iter().filter(|k| k.flushed.is_some()).count();
    let hot = results.iter().filter(|k| k.hot).count();
    eprintln!(
        "{kills} kills (seed {seed}), {flushes} after a completed flush, {hot} with a hot \
         journal (rolled back); last state {:?}\n\
         h5 after recovery: {}\nh5py before recovery: {}\nh5py after recovery: {}",
        results.last().and_then(|k| k.h5.as_ref().ok()),
        tally(
            results
                .iter()
                .map(|k| if k.h5.is_ok() { "ok" } else { "failed" })
        ),
        tally(before.iter().copied()),
        tally(after.iter().copied()),
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(flushes > 0, "no kill came after a completed flush");
}

/// The same kills with h5py (libhdf5 1.14) as the writer, checked by h5 and h5py: a report for
/// comparison, not a pass/fail test (run with `--ignored --nocapture`).
#[test]
#[ignore]
fn h5py_writer_for_comparison() {
    let kills = env_u64("H5_KILL_RUNS", 20);
    let seed = env_u64("H5_KILL_SEED", 14);
    let dir = tempfile::tempdir().unwrap();
    let results = run(WriterKind::H5py, kills, seed, dir.path());
    let h5py: Vec<String> = results.iter().map(|k| k.h5py_before.clone()).collect();
    eprintln!(
        "h5py writer, {kills} kills (seed {seed}), {} after a completed flush\n\
         h5: {}\nh5py: {}",
        results.iter().filter(|k| k.flushed.is_some()).count(),
        tally(
            results
                .iter()
                .map(|k| match &k.h5 {
                    Ok(_) => "ok".to_string(),
                    Err(w) => w.to_string(),
                })
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str)
        ),
        tally(h5py.iter().map(String::as_str)),
    );
    for (i, (k, p)) in results.iter().zip(&h5py).enumerate() {
        if k.h5.is_err() || p != "ok" {
            eprintln!("kill {i}: flushed {:?}: h5 {:?}; h5py {p}", k.flushed, k.h5);
        }
    }
}
