//! An h5 writer in legacy SWMR mode grows datasets with two unlimited dimensions — version 2
//! B-tree chunk indexes, unfiltered and deflated, in 2×2 chunks — in both dimensions over 100
//! flushes, while an h5py reader process (`swmr=True`, `refresh()`) checks every value and shape
//! it sees. The writer moves every B-tree node it changes for the first time in a flush epoch
//! (shadowing, docs/design.md §8.6): without that, a reader holding the B-tree header of one
//! flush reads a leaf changed in place by the next, fails its checksum and retries without end.
//! Every wait is bounded: a reader that reports nothing for [`STALL`] is killed and fails the
//! test. After close, h5py (without SWMR) and h5dump read every value.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use h5::{CreateOptions, FileAccess, FormatBounds};
use h5_testkit::verify::{h5dump, h5dump_data_values, python, run_python};

/// The generator both sides share (never the fill value 0).
fn v(i: u64, j: u64) -> i32 {
    (i * 1000 + j) as i32 + 1
}

/// The extent after round `r`: both dimensions grow.
fn extent(r: u64) -> (u64, u64) {
    (3 + r * 3 / 2, 2 + r / 3)
}

const ROUNDS: u64 = 100;

/// The longest a reader may go without reporting anything before it counts as stalled.
const STALL: Duration = Duration::from_secs(60);

const READER: &str = r#"
import sys, time, json, traceback
import numpy as np, h5py
path, rows_total, cols_total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def expect(r, c):
    return (np.arange(r, dtype=np.int64)[:, None] * 1000 + np.arange(c)[None, :] + 1).astype(np.int32)

try:
    f = h5py.File(path, "r", libver="latest", swmr=True)
    names = ["c", "z"]
    ds = {n: f[n] for n in names}
    print("READY", flush=True)
    last = {n: (0, 0) for n in names}
    shapes = {n: set() for n in names}
    passes = 0
    deadline = time.time() + 240
    while True:
        done = True
        for n in names:
            d = ds[n]
            d.refresh()
            val = d[...]
            shape = val.shape
            if shape[0] < last[n][0] or shape[1] < last[n][1]:
                print(f"FAIL {n}: shape shrank from {last[n]} to {shape}", flush=True)
                sys.exit(1)
            want = expect(*shape)
            if not np.array_equal(val, want):
                bad = np.argwhere(val != want)[:5].tolist()
                print(f"FAIL {n}: {shape} differs at {bad}", flush=True)
                sys.exit(1)
            if shape != last[n]:
                print(f"SEEN {n} {shape[0]} {shape[1]}", flush=True)
            last[n] = shape
            shapes[n].add(shape)
            if shape != (rows_total, cols_total):
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

/// What the child wrote on its standard error (read to the end).
fn stderr_of(child: &mut Child) -> String {
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    err
}

/// The reader's lines, as they come, from a thread (so that every wait can be bounded).
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let out = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in out.lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next line of the reader, or the test fails (the reader killed) when it reports nothing
/// for [`STALL`] or ends without the line.
fn next_line(child: &mut Child, rx: &mpsc::Receiver<String>, seen: &[String]) -> Option<String> {
    match rx.recv_timeout(STALL) {
        Ok(l) => Some(l),
        Err(mpsc::RecvTimeoutError::Disconnected) => None,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the reader made no progress for {STALL:?}; last lines: {:?}",
                &seen[seen.len().saturating_sub(5)..]
            );
        }
    }
}

#[test]
fn an_h5py_swmr_reader_follows_growing_v2_b_tree_datasets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bt_w.h5");
    let script = dir.path().join("reader.py");
    std::fs::write(&script, READER).unwrap();
    let options = CreateOptions::with_bounds(FormatBounds::V110, FormatBounds::LATEST);
    let f = h5::File::create_with(&path, &FileAccess::new(), &options).unwrap();
    let new = |name: &str, deflate: bool| {
        let b = f
            .new_dataset::<i32>()
            .shape([0, 0])
            .max_shape([None, None])
            .chunk([2, 2]);
        let b = if deflate { b.deflate(4) } else { b };
        let d = b.create(name).unwrap();
        assert_eq!(d.chunk_index(), Some(h5::ChunkIndexKind::BtreeV2));
        d
    };
    let dc = new("c", false);
    let dz = new("z", true);
    f.start_swmr_write().unwrap();
    let (rows_total, cols_total) = extent(ROUNDS - 1);
    let mut child = Command::new(python())
        .arg(&script)
        .arg(&path)
        .arg(rows_total.to_string())
        .arg(cols_total.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the pinned Python with h5py (scripts/setup-tools)");
    let rx = lines_of(&mut child);
    let mut seen: Vec<String> = Vec::new();
    let first = next_line(&mut child, &rx, &seen);
    if first.as_deref() != Some("READY") {
        let err = stderr_of(&mut child);
        panic!("reader did not start: {first:?}\n{err}");
    }
    let (mut rows, mut cols) = (0u64, 0u64);
    for r in 0..ROUNDS {
        let (r2, c2) = extent(r);
        let fill = |i0: u64, i1: u64, j0: u64, j1: u64| {
            h5::ndarray::Array2::from_shape_fn(
                ((i1 - i0) as usize, (j1 - j0) as usize),
                |(i, j)| v(i0 + i as u64, j0 + j as u64),
            )
        };
        for d in [&dc, &dz] {
            d.resize([r2 as usize, c2 as usize]).unwrap();
            d.write_slice(
                &fill(rows, r2, 0, c2),
                h5::ndarray::s![rows as usize..r2 as usize, 0..c2 as usize],
            )
            .unwrap();
            if c2 > cols && rows > 0 {
                d.write_slice(
                    &fill(0, rows, cols, c2),
                    h5::ndarray::s![0..rows as usize, cols as usize..c2 as usize],
                )
                .unwrap();
            }
        }
        (rows, cols) = (r2, c2);
        f.flush().unwrap();
        std::thread::sleep(Duration::from_millis(5));
        // Whatever the reader said so far (it fails fast on a wrong value).
        while let Ok(l) = rx.try_recv() {
            assert!(!l.starts_with("FAIL"), "reader: {l}");
            seen.push(l);
        }
    }
    let result = loop {
        match next_line(&mut child, &rx, &seen) {
            Some(l) if l.starts_with("RESULT ") => break l,
            Some(l) => {
                assert!(!l.starts_with("FAIL"), "reader: {l}");
                seen.push(l);
            }
            None => {
                let err = stderr_of(&mut child);
                panic!("the reader ended without a result: {seen:?}\n{err}");
            }
        }
    };
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "reader: {seen:?}\n{}",
        stderr_of(&mut child)
    );
    let v_json: serde_json::Value =
        serde_json::from_str(result.strip_prefix("RESULT ").unwrap()).unwrap();
    for name in ["c", "z"] {
        let shapes = v_json["shapes"][name].as_u64().unwrap();
        assert!(shapes >= 3, "{name}: the reader followed growth ({v_json})");
    }
    f.close().unwrap();
    // After close: the marks are gone and libhdf5 reads every value without SWMR.
    assert_eq!(std::fs::read(&path).unwrap()[11], 0, "status flags cleared");
    let out = run_python(
        r#"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
for n in ["c", "z"]:
    d = f[n][...]
    r, c = d.shape
    want = (np.arange(r)[:, None] * 1000 + np.arange(c)[None, :] + 1).astype(np.int32)
    print(n, r, c, bool(np.array_equal(d, want)))
"#,
        &[&path],
    );
    for (line, name) in out.lines().zip(["c", "z"]) {
        assert_eq!(line, format!("{name} {rows_total} {cols_total} True"));
    }
    let want: Vec<String> = (0..rows_total)
        .flat_map(|i| (0..cols_total).map(move |j| v(i, j).to_string()))
        .collect();
    for name in ["/c", "/z"] {
        let dump = h5dump(&["-d", name], &path).unwrap();
        assert_eq!(h5dump_data_values(&dump, name), want, "{name}");
    }
}
