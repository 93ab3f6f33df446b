//! Storage failures on every write path (issue 14): creating a file, creating groups and
//! datasets, writing attributes, writing and resizing datasets, flushing and closing.
//!
//! Each path runs once to count the storage calls it makes (after the file is open), then
//! again once per call and kind of fault, with that call failing: EIO and ENOSPC on writes,
//! vector writes and length changes, torn writes and torn vector writes, failing `fsync` (files
//! opened with `FileAccess::sync`). Every time:
//!
//! * the error surfaces (from the operation or from `close`);
//! * when it surfaced before `close`, the file is in the failed state: the next change is
//!   refused with `Error::Failed`, and reading the flushed data still works;
//! * reopened (which rolls the journal back), the file holds its last flushed state with every
//!   value, in h5 and in h5py.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use h5::{File, FileAccess};
use h5_io::{FaultInjection, FaultPlan, IoOp, Storage};

/// The last flushed state every faulty session starts from.
const BASE: [i64; 100] = {
    let mut v = [0i64; 100];
    let mut i = 0;
    while i < 100 {
        v[i] = i as i64 * 3 - 50;
        i += 1;
    }
    v
};

fn base_file(path: &Path) {
    let f = File::create(path).unwrap();
    let root = f.root().unwrap();
    root.new_dataset::<i64>()
        .shape([100])
        .max_shape([None])
        .chunk([32])
        .deflate(3)
        .create_with_data("d", &BASE)
        .unwrap();
    root.new_dataset::<i64>()
        .shape([100])
        .create_with_data("c", &BASE)
        .unwrap();
    let g = f.create_group("grp").unwrap();
    g.write_attr_scalar("a", 7i32).unwrap();
    f.close().unwrap();
}

/// One write path: what it does to an open file (the session then closes the file).
type WritePath = fn(&File) -> h5::Result<()>;

fn paths() -> Vec<(&'static str, WritePath)> {
    vec![
        ("create_group", |f| {
            for i in 0..20 {
                f.create_group(&format!("new/g{i}"))?;
            }
            Ok(())
        }),
        ("create_dataset", |f| {
            f.root()?
                .new_dataset::<f32>()
                .shape([50, 4])
                .chunk([10, 4])
                .deflate(2)
                .create("nd")?
                .write(&[1.5f32; 200])
        }),
        ("attributes", |f| {
            let g = f.group("grp")?;
            for i in 0..12 {
                g.write_attr_scalar(&format!("x{i}"), i as u64)?;
            }
            g.write_attr_scalar("a", 8i32)?;
            g.delete_attr("x3")
        }),
        ("write", |f| {
            let v: Vec<i64> = (0..100).map(|i| -i).collect();
            f.dataset("c")?.write(&v)?;
            f.dataset("d")?.write(&v)
        }),
        ("resize", |f| {
            let d = f.dataset("d")?;
            d.resize([300])?;
            let v: Vec<i64> = (100..300).collect();
            d.write_slice(
                &v,
                [ndarray::SliceInfoElem::Slice {
                    start: 100,
                    end: Some(300),
                    step: 1,
                }],
            )?;
            d.resize([40])
        }),
        ("flush", |f| {
            f.create_group("flushed")?;
            f.flush()?;
            f.create_group("after_flush")?;
            f.flush()
        }),
        ("close", |_| Ok(())),
    ]
}

/// The kinds of fault, each aimed at the `n`-th call of its operation.
fn fault(kind: &str, n: u64) -> (IoOp, FaultPlan) {
    use std::io::ErrorKind::{Other, StorageFull};
    match kind {
        "eio-write" => (
            IoOp::Write,
            FaultPlan::new().fail_nth_with(IoOp::Write, n, Other),
        ),
        "enospc-write" => (
            IoOp::Write,
            FaultPlan::new().fail_nth_with(IoOp::Write, n, StorageFull),
        ),
        "eio-vector" => (
            IoOp::WriteVectored,
            FaultPlan::new().fail_nth_with(IoOp::WriteVectored, n, Other),
        ),
        "enospc-vector" => (
            IoOp::WriteVectored,
            FaultPlan::new().fail_nth_with(IoOp::WriteVectored, n, StorageFull),
        ),
        "enospc-set-len" => (
            IoOp::SetLen,
            FaultPlan::new().fail_nth_with(IoOp::SetLen, n, StorageFull),
        ),
        "torn-write" => (IoOp::Write, FaultPlan::new().torn_write_nth(n, 5)),
        "torn-vector" => (IoOp::WriteVectored, FaultPlan::new().torn_vector_nth(n, 5)),
        "fsync" => (
            IoOp::Sync,
            FaultPlan::new().fail_nth_with(IoOp::Sync, n, Other),
        ),
        _ => unreachable!(),
    }
}

const KINDS: [&str; 8] = [
    "eio-write",
    "enospc-write",
    "eio-vector",
    "enospc-vector",
    "enospc-set-len",
    "torn-write",
    "torn-vector",
    "fsync",
];

type Slot = Arc<Mutex<Option<Arc<FaultInjection<Arc<dyn Storage>>>>>>;

/// File access whose storage goes through a fault injector, handed out in `slot`.
fn faulty_access(slot: &Slot, sync: bool) -> FileAccess {
    let slot = Arc::clone(slot);
    FileAccess::new().sync(sync).storage_decorator(move |s| {
        let f = Arc::new(FaultInjection::new(s));
        *slot.lock().unwrap() = Some(Arc::clone(&f));
        f as Arc<dyn Storage>
    })
}

fn injector(slot: &Slot) -> Arc<FaultInjection<Arc<dyn Storage>>> {
    slot.lock()
        .unwrap()
        .clone()
        .expect("opened through the decorator")
}

/// Runs `path` and closes; returns the first error.
fn session(f: File, path: WritePath) -> (Option<h5::Error>, Option<String>) {
    match path(&f) {
        Ok(()) => (f.close().err(), None),
        Err(e) => {
            // The failed state: changes refused, flushed data still readable.
            let refused = match f.create_group("refused") {
                Err(h5::Error::Failed(_)) => None,
                other => Some(format!("a change after the failure gave {other:?}")),
            };
            let read = f
                .dataset("c")
                .and_then(|d| d.read_1d::<i64>())
                .map(|v| v.to_vec());
            let problem = refused.or(match read {
                Ok(v) if v.len() == 100 => None,
                other => Some(format!("reading after the failure gave {other:?}")),
            });
            let _ = f.close();
            (Some(e), problem)
        }
    }
}

/// Counts the calls of `op` that `path` and the closing flush make.
fn count(dir: &Path, path: WritePath, op: IoOp, sync: bool) -> u64 {
    let p = dir.join("count.h5");
    base_file(&p);
    let slot: Slot = Arc::default();
    let f = File::open_rw_with(&p, &faulty_access(&slot, sync)).unwrap();
    let inj = injector(&slot);
    inj.reset_calls();
    let (err, _) = session(f, path);
    assert!(err.is_none(), "{err:?}");
    inj.calls(op)
}

fn check_base_h5(path: &Path) -> Result<(), String> {
    let f = File::open(path).map_err(|e| format!("open: {e}"))?;
    for name in ["c", "d"] {
        let v = f
            .dataset(name)
            .and_then(|d| d.read_1d::<i64>())
            .map_err(|e| format!("{name}: {e}"))?;
        // The session's own change may be complete (a fault after its flush committed).
        let changed: Vec<i64> = (0..100).map(|i| -i).collect();
        let ok = v.as_slice() == Some(&BASE[..])
            || v.as_slice() == Some(&changed[..])
            || (name == "d" && v.len() == 40 && v.as_slice() == Some(&BASE[..40]));
        if !ok {
            return Err(format!("{name} = {:?}...", &v.to_vec()[..v.len().min(8)]));
        }
    }
    let a: i32 = f
        .group("grp")
        .and_then(|g| g.attr("a"))
        .and_then(|a| a.read_scalar())
        .map_err(|e| format!("grp/a: {e}"))?;
    if a != 7 && a != 8 {
        return Err(format!("grp/a = {a}"));
    }
    Ok(())
}

fn check_base_h5py(files: &[PathBuf]) {
    let code = r#"
import sys, h5py, numpy as np
base = np.arange(100, dtype=np.int64) * 3 - 50
changed = -np.arange(100, dtype=np.int64)
bad = []
for p in sys.argv[1:]:
    try:
        with h5py.File(p, "r") as f:
            for name in ("c", "d"):
                v = f[name][()]
                if not (np.array_equal(v, base) or np.array_equal(v, changed) or (name == "d" and np.array_equal(v, base[:40]))):
                    bad.append("%s: %s wrong" % (p, name))
            if int(f["grp"].attrs["a"]) not in (7, 8):
                bad.append("%s: grp/a" % p)
    except Exception as e:
        bad.append("%s: %s" % (p, e))
print("\n".join(bad) if bad else "ok")
"#;
    let args: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    let out = h5_testkit::verify::run_python(code, &args);
    assert_eq!(out.trim(), "ok", "h5py:\n{out}");
}

#[test]
fn every_failure_on_every_write_path_is_sticky_and_keeps_the_last_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mut problems = Vec::new();
    let mut files = Vec::new();
    let mut runs = 0;
    for (name, path) in paths() {
        for kind in KINDS {
            let sync = kind == "fsync";
            let (op, _) = fault(kind, 1);
            let calls = count(dir.path(), path, op, sync);
            for n in 1..=calls {
                let p = dir.path().join(format!("{name}-{kind}-{n}.h5"));
                base_file(&p);
                let slot: Slot = Arc::default();
                let f = File::open_rw_with(&p, &faulty_access(&slot, sync)).unwrap();
                let inj = injector(&slot);
                inj.reset_calls();
                inj.set_plan(fault(kind, n).1);
                let (err, problem) = session(f, path);
                runs += 1;
                let what = format!("{name}, {kind} on call {n} of {calls}");
                if err.is_none() {
                    problems.push(format!("{what}: no error surfaced"));
                }
                if let Some(p) = problem {
                    problems.push(format!("{what}: {p}"));
                }
                if let Err(e) = check_base_h5(&p) {
                    problems.push(format!("{what}: reopened: {e}"));
                }
                files.push(p);
            }
        }
    }
    eprintln!("{runs} faulty sessions");
    assert!(runs > 100, "{runs}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    check_base_h5py(&files);
}

#[test]
fn failures_while_creating_a_file_surface_and_stick() {
    let dir = tempfile::tempdir().unwrap();
    let mut runs = 0;
    for kind in ["eio-write", "enospc-vector", "enospc-set-len", "torn-write"] {
        let (op, _) = fault(kind, 1);
        for n in 1..=6 {
            let p = dir.path().join(format!("create-{kind}-{n}.h5"));
            let slot: Slot = Arc::default();
            let access = faulty_access(&slot, false);
            // The fault is armed before the file exists: the very first calls can fail.
            let armed = Arc::new(Mutex::new(Some(fault(kind, n).1)));
            let access = {
                let armed = Arc::clone(&armed);
                let slot2 = Arc::clone(&slot);
                access.storage_decorator(move |s| {
                    let f = Arc::new(FaultInjection::with_plan(
                        s,
                        armed.lock().unwrap().take().unwrap_or_default(),
                    ));
                    *slot2.lock().unwrap() = Some(Arc::clone(&f));
                    f as Arc<dyn Storage>
                })
            };
            let r = File::create_with(&p, &access, &h5::CreateOptions::default()).and_then(|f| {
                let g = f.create_group("g")?;
                g.write_attr_scalar("a", 1u8)?;
                f.root()?
                    .new_dataset::<u16>()
                    .create_with_data("x", &[1u16; 4000])?;
                f.close()
            });
            runs += 1;
            let calls = injector(&slot).calls(op);
            if calls >= n {
                assert!(r.is_err(), "{kind} on call {n}: no error");
            }
        }
    }
    assert_eq!(runs, 24);
}
