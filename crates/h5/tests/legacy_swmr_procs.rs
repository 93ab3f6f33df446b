//! An h5 writer in legacy SWMR mode followed by h5py SWMR readers in other processes (issue 12,
//! "legacy SWMR interop", the h5-writer direction; the other direction is `legacy_swmr.rs`).
//!
//! The writer (this test process) appends rows to three datasets — extensible array indexes
//! (one unlimited dimension, what the latest formats write for appendable datasets), one and
//! two dimensional, with and without deflate — and flushes after each round, while two `.venv/bin/python` processes open the file with
//! `h5py.File(path, "r", libver="latest", swmr=True)` and, in a loop, `refresh()` each dataset
//! and check every value they see against the generator and that no shape shrinks. Any
//! mismatch or reader error fails the test; so does a reader that saw too few distinct shapes
//! (no growth followed). After close, h5py (without SWMR) and h5dump read every value.
//!
//! Datasets with version 2 B-tree chunk indexes (two unlimited dimensions) have their own
//! multi-process test, `legacy_swmr_procs_btree.rs`.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use h5::{CreateOptions, FileAccess, FormatBounds};
use h5_testkit::verify::{h5dump, h5dump_data_values, python, run_python};

/// The generator both sides share (the reader script has the same formulas).
fn a(i: u64) -> i64 {
    i as i64 * 7 + 1
}
fn b(i: u64, j: u64) -> f64 {
    (i * 10 + j) as f64 + 0.5
}
fn z(i: u64) -> i64 {
    (i * 2_654_435_761 % 1_000_003) as i64
}

const READER: &str = r#"
import sys, time, json, traceback
import numpy as np, h5py
path, total = sys.argv[1], int(sys.argv[2])

def expect(name, n):
    i = np.arange(n, dtype=np.int64)
    if name == "a":
        return i * 7 + 1
    if name == "b":
        return (i[:, None] * 10 + np.arange(3)[None, :]).astype(np.float64) + 0.5
    return (i * 2654435761) % 1000003

try:
    f = h5py.File(path, "r", libver="latest", swmr=True)
    names = ["a", "b", "z"]
    ds = {n: f[n] for n in names}
    print("READY", flush=True)
    last = {n: 0 for n in names}
    shapes = {n: set() for n in names}
    passes = 0
    deadline = time.time() + 300
    while True:
        done = True
        for n in names:
            d = ds[n]
            d.refresh()
            v = d[...]
            rows = v.shape[0]
            if rows < last[n]:
                print(f"FAIL {n}: shape shrank from {last[n]} to {rows}", flush=True)
                sys.exit(1)
            last[n] = rows
            shapes[n].add(rows)
            want = expect(n, rows)
            if v.shape != want.shape or not np.array_equal(v, want):
                bad = np.argwhere(v != want)[:5].tolist() if v.shape == want.shape else "shape"
                print(f"FAIL {n}: {rows} rows, {v.shape}, differs at {bad}", flush=True)
                sys.exit(1)
            if rows < total:
                done = False
        passes += 1
        if done:
            break
        if time.time() > deadline:
            print(f"FAIL timeout at {last}", flush=True)
            sys.exit(1)
        time.sleep(0.001)
    print("RESULT " + json.dumps({"passes": passes, "shapes": {n: len(s) for n, s in shapes.items()}}), flush=True)
except SystemExit:
    raise
except BaseException:
    print("FAIL " + traceback.format_exc().replace("\n", " | "), flush=True)
    sys.exit(1)
"#;

/// Rows appended in round `r` (1 to 3, so flushes see chunks filled part-way and across).
fn rows_in_round(r: u64) -> u64 {
    1 + r % 3
}

const ROUNDS: u64 = 150;

/// What the child wrote on its standard error (read to the end).
fn stderr_of(child: &mut Child) -> String {
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    err
}

fn spawn_reader(
    script: &Path,
    path: &Path,
    total: u64,
) -> (Child, std::io::Lines<BufReader<std::process::ChildStdout>>) {
    let mut child = Command::new(python())
        .arg(script)
        .arg(path)
        .arg(total.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the pinned Python with h5py (scripts/setup-tools)");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().map(|l| l.unwrap());
    if first.as_deref() != Some("READY") {
        let err = stderr_of(&mut child);
        panic!("reader did not start: {first:?}\n{err}");
    }
    (child, lines)
}

#[test]
fn h5py_swmr_readers_follow_an_h5_legacy_swmr_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("legacy_w.h5");
    let script = dir.path().join("reader.py");
    std::fs::write(&script, READER).unwrap();
    let options = CreateOptions::with_bounds(FormatBounds::V110, FormatBounds::LATEST);
    let f = h5::File::create_with(&path, &FileAccess::new(), &options).unwrap();
    let da = f
        .new_dataset::<i64>()
        .shape([0])
        .max_shape([None])
        .chunk([16])
        .create("a")
        .unwrap();
    let db = f
        .new_dataset::<f64>()
        .shape([0, 3])
        .max_shape([None, Some(3)])
        .chunk([8, 3])
        .create("b")
        .unwrap();
    let dz = f
        .new_dataset::<i64>()
        .shape([0])
        .max_shape([None])
        .chunk([32])
        .deflate(4)
        .create("z")
        .unwrap();
    f.start_swmr_write().unwrap();
    let total: u64 = (0..ROUNDS).map(rows_in_round).sum();
    let readers: Vec<_> = (0..2)
        .map(|_| spawn_reader(&script, &path, total))
        .collect();
    let mut n = 0u64;
    for r in 0..ROUNDS {
        let k = rows_in_round(r);
        let rows = n..n + k;
        da.append(&rows.clone().map(a).collect::<Vec<_>>()).unwrap();
        let bb: Vec<f64> = rows
            .clone()
            .flat_map(|i| (0..3).map(move |j| b(i, j)))
            .collect();
        db.append(&h5::ndarray::Array2::from_shape_vec((k as usize, 3), bb).unwrap())
            .unwrap();
        dz.append(&rows.clone().map(z).collect::<Vec<_>>()).unwrap();
        n += k;
        f.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
    assert_eq!(n, total);
    for (mut child, lines) in readers {
        let out: Vec<String> = lines.map(|l| l.unwrap()).collect();
        let status = child.wait().unwrap();
        let err = stderr_of(&mut child);
        assert!(status.success(), "reader failed: {out:?}\n{err}");
        let result = out
            .iter()
            .find_map(|l| l.strip_prefix("RESULT "))
            .unwrap_or_else(|| panic!("no result: {out:?}"));
        let v: serde_json::Value = serde_json::from_str(result).unwrap();
        for name in ["a", "b", "z"] {
            let shapes = v["shapes"][name].as_u64().unwrap();
            assert!(shapes >= 3, "{name}: the reader followed growth ({v})");
        }
    }
    f.close().unwrap();
    // After close: the marks are gone and libhdf5 reads every value without SWMR.
    assert_eq!(std::fs::read(&path).unwrap()[11], 0, "status flags cleared");
    let out = run_python(
        r#"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
for n in ["a", "b", "z"]:
    print(n, f[n].shape[0], f[n][...].astype(np.float64).sum())
"#,
        &[&path],
    );
    let sum = |g: &dyn Fn(u64) -> f64| (0..total).map(g).sum::<f64>();
    let want = [
        ("a", sum(&|i| a(i) as f64)),
        ("b", sum(&|i| (0..3).map(|j| b(i, j)).sum())),
        ("z", sum(&|i| z(i) as f64)),
    ];
    for (line, (name, s)) in out.lines().zip(want) {
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(parts[0], name);
        assert_eq!(parts[1].parse::<u64>().unwrap(), total, "{line}");
        assert_eq!(parts[2].parse::<f64>().unwrap(), s, "{line}");
    }
    let dump = h5dump(&["-d", "/a"], &path).unwrap();
    let want_a: Vec<String> = (0..total).map(|i| a(i).to_string()).collect();
    assert_eq!(h5dump_data_values(&dump, "/a"), want_a);
}
