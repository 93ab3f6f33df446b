//! Legacy SWMR (what libhdf5 releases speak): an h5py writer in `swmr_mode` appends to a dataset
//! and flushes; h5 opens the file read-only while it is being written and follows it with
//! `Dataset::refresh`. This is the weaker protocol: a reader sees each object as of the writer's
//! last flush of it, with no tick-wide snapshot (docs/design.md §8.6).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WRITER: &str = r#"
import sys, time, h5py, numpy as np
path, rounds = sys.argv[1], int(sys.argv[2])
f = h5py.File(path, "w", libver="latest")
d = f.create_dataset("d", shape=(0,), maxshape=(None,), chunks=(16,), dtype="i8")
g = f.create_dataset("g", shape=(0, 2), maxshape=(None, 2), chunks=(8, 2), dtype="f8")
f.swmr_mode = True
print("READY", flush=True)
for r in range(rounds):
    d.resize((r + 1,))
    d[r] = r * 7
    g.resize((r + 1, 2))
    g[r] = [r, -r]
    d.flush()
    g.flush()
    print("ROUND", r, flush=True)
    time.sleep(0.02)
sys.stdin.readline()
f.close()
"#;

#[test]
fn h5_follows_an_h5py_swmr_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("legacy.h5");
    let script = dir.path().join("writer.py");
    std::fs::write(&script, WRITER).unwrap();
    let mut child = Command::new(h5_testkit::verify::python())
        .arg(&script)
        .arg(&path)
        .arg("60")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the pinned Python with h5py (scripts/setup-tools)");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "READY");
    // The writer marked the superblock (write and SWMR-write status flags): a plain open is
    // refused, as libhdf5 refuses it; a SWMR read open is not.
    let plain = h5::File::open(&path).unwrap_err();
    assert!(
        matches!(plain.inner(), h5::Error::OpenForWriting { flags } if *flags & 0b101 == 0b101),
        "{plain}"
    );
    let f = h5::File::open_with(&path, &h5::FileAccess::new().swmr_read(true)).unwrap();
    assert!(f.marked_open_for_writing());
    let d = f.dataset("d").unwrap();
    let g = f.dataset("g").unwrap();
    let mut seen = Vec::new();
    let stop = Instant::now() + Duration::from_secs(60);
    let mut last_round = None;
    loop {
        d.refresh().unwrap();
        g.refresh().unwrap();
        let v: Vec<i64> = d.read_1d().unwrap().to_vec();
        for (i, x) in v.iter().enumerate() {
            assert_eq!(*x, i as i64 * 7, "d[{i}] of {}", v.len());
        }
        let m = g.read_2d::<f64>().unwrap();
        for (i, row) in m.outer_iter().enumerate() {
            assert_eq!(row.to_vec(), vec![i as f64, -(i as f64)]);
        }
        if seen.last() != Some(&v.len()) {
            seen.push(v.len());
        }
        if v.len() == 60 {
            break;
        }
        assert!(Instant::now() < stop, "stuck at {seen:?}");
        if let Some(Ok(l)) = lines.next() {
            last_round = l
                .strip_prefix("ROUND ")
                .map(|r| r.parse::<usize>().unwrap());
        }
    }
    assert!(last_round.is_some());
    assert!(
        seen.len() > 3,
        "followed the writer through several flushes: {seen:?}"
    );
    child.stdin.take().unwrap().write_all(b"\n").unwrap();
    assert!(child.wait().unwrap().success());
}
