//! Every target on its seed corpus (cut from the fixture files) and on the findings kept as
//! regressions (`fixtures/corrupt/fuzz/<target>/`), as plain tests. Each target runs in a child
//! process (`h5-fuzz-tool run`) under the fuzzer's limits: 1 GiB of address space (an allocation
//! over it aborts) and 10 s per input; it must exit cleanly.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The fuzzer's hang limit per input.
const LIMIT: Duration = Duration::from_secs(10);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

/// Runs target `name` on `files` in a child under the limits; returns the failure, if any.
fn replay(name: &str, files: &[PathBuf]) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    let t = Instant::now();
    let out = Command::new("prlimit")
        .arg(format!("--as={}", 1u64 << 30))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_h5-fuzz-tool"))
        .arg("run")
        .arg(name)
        .args(files)
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .expect("prlimit (util-linux) runs");
    let limit = LIMIT * u32::try_from(files.len()).unwrap_or(u32::MAX);
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let last: Vec<&str> = err.lines().rev().take(12).collect();
        return Some(format!(
            "{name}: {} ({} inputs); last lines:\n{}",
            out.status,
            files.len(),
            last.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    let slow: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (path, took) = l.rsplit_once(": returned in ")?;
            let secs: f64 = took.trim_end_matches('s').parse().ok()?;
            (secs > LIMIT.as_secs_f64()).then(|| format!("{name} on {path}: {took}"))
        })
        .collect();
    if !slow.is_empty() {
        return Some(slow.join("\n"));
    }
    (t.elapsed() > limit).then(|| format!("{name}: {:?} for {} inputs", t.elapsed(), files.len()))
}

#[test]
fn every_target_returns_on_its_seeds() {
    let seeds = h5_fuzz::seeds::from_dirs(&[&fixtures()]).expect("fixtures");
    let dir = tempfile_dir("seeds");
    seeds.write(&dir).expect("seeds written");
    let mut failures = Vec::new();
    for (name, _) in h5_fuzz::TARGETS {
        let files = files_in(&dir.join(name));
        assert!(!files.is_empty(), "no seeds for target {name}");
        failures.extend(replay(name, &files));
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_regression_input_returns() {
    let dir = fixtures().join("corrupt/fuzz");
    let mut failures = Vec::new();
    let mut n = 0;
    for (name, _) in h5_fuzz::TARGETS {
        let files = files_in(&dir.join(name));
        n += files.len();
        failures.extend(replay(name, &files));
    }
    assert!(n > 0, "no regression inputs in {}", dir.display());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The files of `dir` (none when it does not exist), sorted.
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// A fresh directory under the build's temporary directory.
fn tempfile_dir(what: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temporary directory");
    d
}
