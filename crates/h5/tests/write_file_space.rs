//! File-space strategies on the write side, checked by the real thing (h5py / libhdf5 1.14.4 and
//! h5dump): each strategy with and without persisted free space and a few page sizes, datasets
//! created, deleted and created again; the settings and the free space libhdf5 reports; libhdf5
//! and h5 reusing the free space h5 persisted; the paged-allocation invariants on every block h5
//! writes; libhdf5-written persisting files changed by h5. These tests need the h5py reference
//! (`scripts/setup-tools`) and fail loudly without it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use h5::{CreateOptions, FileAccess, FileSpaceOptions, FormatBounds, SpaceStrategy};
use h5_io::{FileStorage, IoOp, Metrics, OpenMode};
use h5_testkit::verify::{h5dump, run_python, workspace_dir};
use serde_json::Value;

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    (dir, p)
}

/// What libhdf5 reports about a file (read-only open), and the sum and length of each named
/// dataset (`None` when it does not exist).
const REPORT: &str = r#"
import ctypes, glob, json, os, sys
import h5py
from h5py import h5f
lib = ctypes.CDLL(glob.glob(os.path.join(os.path.dirname(h5py.__file__), "..", "h5py.libs", "libhdf5-*.so*"))[0])
class S(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_uint64), ("size", ctypes.c_uint64)]
def sections(fid):
    n = lib.H5Fget_free_sections(ctypes.c_int64(fid.id), ctypes.c_int(0), ctypes.c_size_t(0), None)
    assert n >= 0
    if n == 0:
        return []
    buf = (S * n)()
    assert lib.H5Fget_free_sections(ctypes.c_int64(fid.id), ctypes.c_int(0), ctypes.c_size_t(n), buf) == n
    return sorted([[s.addr, s.size] for s in buf])
path = sys.argv[1]
fid = h5f.open(path.encode(), h5f.ACC_RDONLY)
fcpl = fid.get_create_plist()
st, persist, threshold = fcpl.get_file_space_strategy()
out = {"strategy": int(st), "persist": bool(persist), "threshold": int(threshold),
       "page_size": int(fcpl.get_file_space_page_size()), "freespace": int(fid.get_freespace()),
       "sections": sections(fid), "file_size": os.path.getsize(path)}
fid.close()
data = {}
with h5py.File(path, "r") as f:
    for name in sys.argv[2:]:
        data[name] = [float(f[name][()].astype("float64").sum()), int(f[name].size)] if name in f else None
out["data"] = data
if st == 1:
    # libhdf5's page buffer reads paged files page by page and refuses metadata that breaks
    # the paged layout; read every dataset through it.
    with h5py.File(path, "r", page_buf_size=8 * int(fcpl.get_file_space_page_size())) as f:
        paged = {}
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                paged[name] = float(obj[()].astype("float64").sum())
        f.visititems(visit)
    out["paged_read"] = paged
print(json.dumps(out))
"#;

fn report(path: &Path, names: &[&str]) -> Value {
    let mut args = vec![path.to_str().unwrap().to_string()];
    args.extend(names.iter().map(|s| s.to_string()));
    let out = run_python(REPORT, &args);
    serde_json::from_str(&out).expect("report JSON")
}

fn code(s: SpaceStrategy) -> u64 {
    match s {
        SpaceStrategy::FsmAggr => 0,
        SpaceStrategy::Page => 1,
        SpaceStrategy::Aggr => 2,
        _ => 3,
    }
}

fn options(space: FileSpaceOptions, bounds: FormatBounds) -> CreateOptions {
    CreateOptions {
        bounds,
        file_space: space,
        ..CreateOptions::default()
    }
}

fn values(n: usize, seed: i32) -> Vec<i32> {
    (0..n as i32).map(|i| i * 3 + seed).collect()
}

fn sum(v: &[i32]) -> f64 {
    v.iter().map(|&x| f64::from(x)).sum()
}

/// Every write h5 made: small blocks (shorter than a page) inside one page, larger ones starting
/// on a page boundary.
fn check_paged_writes(ops: &[(u64, u64)], page: u64) {
    for &(at, len) in ops {
        if len == 0 {
            continue;
        }
        if len < page {
            assert_eq!(
                at / page,
                (at + len - 1) / page,
                "a {len}-byte block at {at} crosses a {page}-byte page"
            );
        } else {
            assert_eq!(
                at % page,
                0,
                "a {len}-byte block at {at} is not page-aligned"
            );
        }
    }
}

/// Datasets of several sizes (contiguous and chunked) in the root and a group; some deleted and
/// one created again, smaller, after a flush. Returns the datasets left and their values.
fn populate(f: &h5::File) -> Vec<(&'static str, Vec<i32>)> {
    let root = f.root().unwrap();
    let g = f.create_group("g").unwrap();
    let sizes = [10usize, 300, 1000, 20, 5000, 64, 3000];
    let names = ["d0", "d1", "g/d2", "d3", "d4", "g/d5", "d6"];
    for (i, (&n, name)) in sizes.iter().zip(names).enumerate() {
        let v = values(n, i as i32);
        let (parent, leaf) = match name.strip_prefix("g/") {
            Some(l) => (&g, l),
            None => (&root, name),
        };
        let b = parent.new_dataset::<i32>().shape([n]);
        let b = if i % 2 == 1 {
            b.chunk([n.div_ceil(2)])
        } else {
            b
        };
        b.create(leaf).unwrap().write(&v).unwrap();
    }
    f.flush().unwrap();
    root.unlink("d1").unwrap();
    root.unlink("d4").unwrap();
    g.unlink("d5").unwrap();
    f.flush().unwrap();
    let again = values(700, 42);
    root.new_dataset::<i32>()
        .shape([700])
        .create("d4")
        .unwrap()
        .write(&again)
        .unwrap();
    root.unlink("d6").unwrap();
    vec![
        ("d0", values(10, 0)),
        ("g/d2", values(1000, 2)),
        ("d3", values(20, 3)),
        ("d4", again),
    ]
}

/// Each strategy, persisted or not, under the earliest, 1.8 and 1.10 formats, paged with three
/// page sizes: libhdf5 reads the settings, the data and exactly the free space h5 persisted; the
/// paged files' writes keep the paged-allocation invariants; h5dump reads every file.
#[test]
fn every_strategy_reads_back_with_its_settings_and_free_space() {
    let cases: Vec<(SpaceStrategy, bool, u64, u64)> = vec![
        (SpaceStrategy::FsmAggr, false, 1, 4096),
        (SpaceStrategy::FsmAggr, true, 1, 4096),
        (SpaceStrategy::FsmAggr, true, 64, 4096),
        (SpaceStrategy::Page, false, 1, 4096),
        (SpaceStrategy::Page, true, 1, 4096),
        (SpaceStrategy::Page, true, 1, 512),
        (SpaceStrategy::Page, true, 1, 8192),
        (SpaceStrategy::Aggr, false, 1, 4096),
        (SpaceStrategy::None, false, 1, 4096),
    ];
    for bounds in [
        FormatBounds::Earliest,
        FormatBounds::V18,
        FormatBounds::V110,
    ] {
        for &(strategy, persist, threshold, page) in &cases {
            let what = format!(
                "{strategy:?} persist={persist} threshold={threshold} page={page} {bounds:?}"
            );
            let (_d, path) = tmp("fs.h5");
            let space = FileSpaceOptions::default()
                .with_strategy(strategy, persist, threshold)
                .with_page_size(page);
            let storage = Arc::new(Metrics::new(
                FileStorage::open(&path, OpenMode::Create).unwrap(),
            ));
            storage.record_ops(true);
            let f = h5::File::create_in(
                storage.clone(),
                &FileAccess::default(),
                &options(space, bounds),
                None,
            )
            .unwrap();
            let left = populate(&f);
            f.close().unwrap();
            if strategy == SpaceStrategy::Page {
                let ops: Vec<(u64, u64)> = storage
                    .ops()
                    .iter()
                    .filter(|r| matches!(r.op, IoOp::Write | IoOp::WriteVectored))
                    .map(|r| (r.offset, r.len))
                    .collect();
                // Superblock, extension, headers, heaps, nodes, managers and raw data.
                assert!(ops.len() > 20, "{what}: {} writes", ops.len());
                check_paged_writes(&ops, page);
            }
            drop(storage);
            // h5's own view of what it persisted.
            let h5f = h5::File::open(&path).unwrap();
            let ours: Vec<Vec<u64>> = match h5f.persisted_free_space().unwrap() {
                // The defaults write no file space info message.
                None => {
                    assert!(space.is_default(), "{what}: no message");
                    Vec::new()
                }
                Some(persisted) => {
                    assert_eq!(persisted.strategy, strategy, "{what}");
                    assert_eq!(persisted.persist, persist, "{what}");
                    // The message's EOA field is the final end of allocation (libhdf5 1.10.1+).
                    let eoa = persist.then(|| std::fs::metadata(&path).unwrap().len());
                    assert_eq!(persisted.eoa_pre_fsm_fsalloc, eoa, "{what}");
                    persisted
                        .sections()
                        .iter()
                        .map(|s| vec![s.addr, s.len])
                        .collect()
                }
            };
            for (name, v) in &left {
                let got: Vec<i32> = h5f
                    .dataset(name)
                    .unwrap()
                    .read::<i32>()
                    .unwrap()
                    .into_iter()
                    .collect();
                assert_eq!(&got, v, "{what}: {name}");
            }
            drop(h5f);
            let names: Vec<&str> = left
                .iter()
                .map(|(n, _)| *n)
                .chain(["d1", "d6", "g/d5"])
                .collect();
            let r = report(&path, &names);
            assert_eq!(r["strategy"], code(strategy), "{what}");
            assert_eq!(r["persist"], persist, "{what}");
            assert_eq!(
                r["threshold"],
                if strategy.tracks_free_space() {
                    threshold
                } else {
                    1
                },
                "{what}"
            );
            assert_eq!(r["page_size"], page, "{what}");
            if persist {
                assert!(
                    !ours.is_empty(),
                    "{what}: deleted datasets leave free space"
                );
                assert_eq!(r["sections"], serde_json::json!(ours), "{what}");
                let free: u64 = ours.iter().map(|s| s[1]).sum();
                assert_eq!(r["freespace"], free, "{what}");
            } else {
                assert_eq!(r["freespace"], 0, "{what}");
            }
            if strategy == SpaceStrategy::Page {
                assert_eq!(r["file_size"].as_u64().unwrap() % page, 0, "{what}");
                for (name, v) in &left {
                    assert_eq!(
                        r["paged_read"][*name],
                        sum(v),
                        "{what}: {name} via the page buffer"
                    );
                }
            }
            for (name, v) in &left {
                assert_eq!(
                    r["data"][*name],
                    serde_json::json!([sum(v), v.len()]),
                    "{what}: {name}"
                );
            }
            for gone in ["d1", "d6", "g/d5"] {
                assert!(r["data"][gone].is_null(), "{what}: {gone}");
            }
            h5dump(&["-H"], &path).unwrap_or_else(|e| panic!("{what}: h5dump failed: {e}"));
            back_and_forth(&path, &what);
        }
    }
}

/// libhdf5 changes the file (a dataset deleted, one added), then h5 does (one more added):
/// both read everything, libhdf5 reports the free sections h5 persisted last, and the
/// settings are unchanged.
fn back_and_forth(path: &Path, what: &str) {
    let before = report(path, &[]);
    run_python(
        r#"
import sys, h5py, numpy as np
path = sys.argv[1]
fid = h5py.h5f.open(path.encode(), h5py.h5f.ACC_RDONLY)
fcpl = fid.get_create_plist()
kw = {"page_buf_size": 8 * fcpl.get_file_space_page_size()} if fcpl.get_file_space_strategy()[0] == 1 else {}
fid.close()
with h5py.File(path, "r+", **kw) as f:
    del f["d0"]
    f.create_dataset("py", data=np.arange(300, dtype="<i4"))
"#,
        &[path.to_str().unwrap()],
    );
    let v = values(123, 7);
    {
        let f = h5::File::open_rw(path).unwrap_or_else(|e| panic!("{what}: {e}"));
        let py: Vec<i32> = f
            .dataset("py")
            .unwrap()
            .read::<i32>()
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(py, (0..300).collect::<Vec<i32>>(), "{what}");
        f.root()
            .unwrap()
            .new_dataset::<i32>()
            .shape([123])
            .create("h5b")
            .unwrap()
            .write(&v)
            .unwrap();
        f.close().unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    let r = report(path, &["py", "h5b", "d0", "d3"]);
    for key in ["strategy", "persist", "threshold", "page_size"] {
        assert_eq!(r[key], before[key], "{what}: {key}");
    }
    assert_eq!(r["data"]["py"], serde_json::json!([44850.0, 300]), "{what}");
    assert_eq!(
        r["data"]["h5b"],
        serde_json::json!([sum(&v), 123]),
        "{what}"
    );
    assert!(r["data"]["d0"].is_null(), "{what}");
    assert_eq!(
        r["data"]["d3"],
        serde_json::json!([sum(&values(20, 3)), 20]),
        "{what}"
    );
    let ours: Vec<Vec<u64>> = h5::File::open(path)
        .unwrap()
        .persisted_free_space()
        .unwrap()
        .filter(|p| p.persist)
        .map(|p| p.sections().iter().map(|s| vec![s.addr, s.len]).collect())
        .unwrap_or_default();
    assert_eq!(r["sections"], serde_json::json!(ours), "{what}");
    h5dump(&["-H"], path).unwrap_or_else(|e| panic!("{what}: h5dump failed: {e}"));
}

/// libhdf5's `H5Pset_file_space_*` rules: persist and threshold reset for strategies that track
/// nothing; page sizes outside 512 B–1 GiB refused at creation; the default settings write no
/// superblock extension (superblock 0 under the earliest bound).
#[test]
fn settings_follow_libhdf5_rules() {
    let o = FileSpaceOptions::default().with_strategy(SpaceStrategy::Aggr, true, 100);
    assert!(!o.persist());
    assert_eq!(o.threshold(), 1);
    let o = FileSpaceOptions::default().with_strategy(SpaceStrategy::None, true, 7);
    assert_eq!((o.persist(), o.threshold()), (false, 1));
    let o = FileSpaceOptions::default().with_strategy(SpaceStrategy::Page, true, 7);
    assert_eq!((o.persist(), o.threshold()), (true, 7));
    assert!(FileSpaceOptions::default().is_default());
    for bad in [511u64, (1 << 30) + 1, 0] {
        let (_d, path) = tmp("bad.h5");
        let opts = options(
            FileSpaceOptions::default()
                .with_strategy(SpaceStrategy::Page, false, 1)
                .with_page_size(bad),
            FormatBounds::V18,
        );
        assert!(
            matches!(
                h5::File::create_with(&path, &FileAccess::default(), &opts),
                Err(h5::Error::Invalid(_))
            ),
            "page size {bad}"
        );
    }
    // Defaults: no message. Non-default under the earliest bound: superblock 2.
    let (_d, path) = tmp("default.h5");
    let f = h5::File::create_with(
        &path,
        &FileAccess::default(),
        &options(FileSpaceOptions::default(), FormatBounds::Earliest),
    )
    .unwrap();
    f.close().unwrap();
    assert_eq!(std::fs::read(&path).unwrap()[8], 0);
    assert!(
        h5::File::open(&path)
            .unwrap()
            .persisted_free_space()
            .unwrap()
            .is_none()
    );
    let (_d, path) = tmp("aggr.h5");
    let f = h5::File::create_with(
        &path,
        &FileAccess::default(),
        &options(
            FileSpaceOptions::default().with_strategy(SpaceStrategy::Aggr, false, 1),
            FormatBounds::Earliest,
        ),
    )
    .unwrap();
    f.close().unwrap();
    assert_eq!(std::fs::read(&path).unwrap()[8], 2);
}

fn persisting(path: &Path, strategy: SpaceStrategy, bounds: FormatBounds) -> h5::File {
    h5::File::create_with(
        path,
        &FileAccess::default(),
        &options(
            FileSpaceOptions::default().with_strategy(strategy, true, 1),
            bounds,
        ),
    )
    .unwrap()
}

/// A file with a 40 000-byte hole (a deleted contiguous dataset) in the middle.
fn file_with_hole(path: &Path, strategy: SpaceStrategy) {
    let f = persisting(path, strategy, FormatBounds::Earliest);
    let root = f.root().unwrap();
    root.new_dataset::<i32>()
        .shape([10_000])
        .create("big")
        .unwrap()
        .write(&values(10_000, 1))
        .unwrap();
    root.new_dataset::<i32>()
        .shape([100])
        .create("after")
        .unwrap()
        .write(&values(100, 2))
        .unwrap();
    f.flush().unwrap();
    root.unlink("big").unwrap();
    f.close().unwrap();
}

/// libhdf5 reopening a file h5 persisted reports the same free space and puts a new dataset
/// into it: the file does not grow.
#[test]
fn libhdf5_reuses_the_space_h5_persisted() {
    for strategy in [SpaceStrategy::FsmAggr, SpaceStrategy::Page] {
        let (_d, path) = tmp("hole.h5");
        file_with_hole(&path, strategy);
        let persisted = h5::File::open(&path)
            .unwrap()
            .persisted_free_space()
            .unwrap()
            .unwrap();
        let free = persisted.free_bytes();
        assert!(free >= 40_000, "{strategy:?}: {free}");
        let out = run_python(
            r#"
import os, sys, h5py, numpy as np
path = sys.argv[1]
before = os.path.getsize(path)
fid = h5py.h5f.open(path.encode(), h5py.h5f.ACC_RDONLY)
fcpl = fid.get_create_plist()
paged = fcpl.get_file_space_strategy()[0] == 1
kw = {"page_buf_size": 8 * fcpl.get_file_space_page_size()} if paged else {}
fid.close()
with h5py.File(path, "r+", **kw) as f:
    print(f.id.get_freespace())
    f.create_dataset("new", data=np.arange(8000, dtype="<i4"))
with h5py.File(path, "r") as f:
    assert (f["new"][()] == np.arange(8000)).all()
    assert (f["after"][()] == np.arange(100) * 3 + 2).all()
print(before, os.path.getsize(path))
"#,
            &[path.to_str().unwrap()],
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0].parse::<u64>().unwrap(), free, "{strategy:?}");
        let sizes: Vec<u64> = lines[1].split(' ').map(|s| s.parse().unwrap()).collect();
        assert!(
            sizes[1] <= sizes[0],
            "{strategy:?}: file grew from {} to {}",
            sizes[0],
            sizes[1]
        );
        h5dump(&["-H"], &path).unwrap();
    }
}

/// Bytes a session that changes a few objects may add to a file although its data goes into free
/// space: the replaced metadata (free-space managers, header continuations) whose old blocks
/// the delayed-reuse rule keeps until the session's flush completes.
const METADATA_CHURN: u64 = 1024;

/// h5 reopening the file for writing loads the persisted sections and frees the old managers:
/// a new dataset goes into the hole, the file grows by no more than the replaced metadata, and
/// libhdf5 reads everything and the free space h5 persisted this time.
#[test]
fn h5_reuses_persisted_space_at_open_rw() {
    for strategy in [SpaceStrategy::FsmAggr, SpaceStrategy::Page] {
        let (_d, path) = tmp("hole.h5");
        file_with_hole(&path, strategy);
        let before = std::fs::metadata(&path).unwrap().len();
        let f = h5::File::open_rw(&path).unwrap();
        let v = values(8000, 5);
        f.root()
            .unwrap()
            .new_dataset::<i32>()
            .shape([8000])
            .create("new")
            .unwrap()
            .write(&v)
            .unwrap();
        f.close().unwrap();
        // The dataset's 32 KB went into the hole; what grows is the metadata replaced in this
        // session (managers, header continuations), whose old blocks stay allocated until the
        // flush that stops using them completes (delayed reuse, docs/design.md §6).
        let after = std::fs::metadata(&path).unwrap().len();
        assert!(
            after <= before + METADATA_CHURN,
            "{strategy:?}: file grew from {before} to {after}"
        );
        let persisted = h5::File::open(&path)
            .unwrap()
            .persisted_free_space()
            .unwrap()
            .unwrap();
        let ours: Vec<Vec<u64>> = persisted
            .sections()
            .iter()
            .map(|s| vec![s.addr, s.len])
            .collect();
        let r = report(&path, &["new", "after"]);
        assert_eq!(r["sections"], serde_json::json!(ours), "{strategy:?}");
        assert_eq!(r["data"]["new"], serde_json::json!([sum(&v), 8000]));
        assert_eq!(
            r["data"]["after"],
            serde_json::json!([sum(&values(100, 2)), 100])
        );
        h5dump(&["-H"], &path).unwrap();
    }
}

/// libhdf5-written files of `fixtures/fsm/` opened for writing by h5, changed (a dataset
/// deleted, one added) and closed: libhdf5 reads the same settings, the data, and exactly the
/// free space h5 persisted.
#[test]
fn libhdf5_files_changed_by_h5_keep_their_settings_and_free_space() {
    let dir = workspace_dir().join("fixtures/fsm");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fsm.json")).unwrap()).unwrap();
    for (name, exp) in expected.as_object().unwrap() {
        let (_d, path) = tmp(name);
        std::fs::copy(dir.join(name), &path).unwrap();
        let v = values(200, 9);
        let before = std::fs::metadata(&path).unwrap().len();
        {
            let f = h5::File::open_rw(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            let root = f.root().unwrap();
            root.unlink("d0")
                .or_else(|_| root.unlink("d1"))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            root.new_dataset::<i32>()
                .shape([200])
                .create("h5_new")
                .unwrap()
                .write(&v)
                .unwrap();
            f.close().unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let persisted = h5::File::open(&path)
            .unwrap()
            .persisted_free_space()
            .unwrap();
        let r = report(&path, &["h5_new"]);
        for key in ["strategy", "persist", "threshold", "page_size"] {
            assert_eq!(r[key], exp[key], "{name}: {key}");
        }
        assert_eq!(
            r["data"]["h5_new"],
            serde_json::json!([sum(&v), 200]),
            "{name}"
        );
        if let Some(persisted) = persisted.filter(|p| p.persist) {
            let ours: Vec<Vec<u64>> = persisted
                .sections()
                .iter()
                .map(|s| vec![s.addr, s.len])
                .collect();
            assert!(!ours.is_empty(), "{name}");
            // The new dataset went into space libhdf5 left free (with a threshold of 512, the
            // old managers' small blocks are not tracked and the new ones go to the end).
            let after = std::fs::metadata(&path).unwrap().len();
            if persisted.threshold == 1 {
                assert!(
                    after <= before + METADATA_CHURN,
                    "{name}: grew from {before} to {after}"
                );
            }
            assert_eq!(r["sections"], serde_json::json!(ours), "{name}");
        } else {
            assert_eq!(r["freespace"], 0, "{name}");
        }
        if exp["strategy"] == 1 {
            assert_eq!(
                r["file_size"].as_u64().unwrap() % exp["page_size"].as_u64().unwrap(),
                0,
                "{name}"
            );
        }
        h5dump(&["-H"], &path).unwrap_or_else(|e| panic!("{name}: h5dump failed: {e}"));
    }
}

/// Hundreds of free sections of many sizes (every other dataset of 400 deleted): the managers'
/// section lists need multi-byte counts and several sets, and are sized right the first time or
/// after growing; libhdf5 reports exactly the sections h5 persisted.
#[test]
fn many_free_sections_persist_exactly() {
    for (strategy, page) in [(SpaceStrategy::FsmAggr, 4096), (SpaceStrategy::Page, 1024)] {
        let (_d, path) = tmp("many.h5");
        let f = h5::File::create_with(
            &path,
            &FileAccess::default(),
            &options(
                FileSpaceOptions::default()
                    .with_strategy(strategy, true, 1)
                    .with_page_size(page),
                FormatBounds::V18,
            ),
        )
        .unwrap();
        let root = f.root().unwrap();
        for i in 0..400usize {
            let n = 1 + (i * 7) % 300;
            root.new_dataset::<u8>()
                .shape([n])
                .create(&format!("d{i:03}"))
                .unwrap()
                .write(&vec![i as u8; n])
                .unwrap();
        }
        f.flush().unwrap();
        for i in (0..400usize).step_by(2) {
            root.unlink(&format!("d{i:03}")).unwrap();
        }
        f.close().unwrap();
        let persisted = h5::File::open(&path)
            .unwrap()
            .persisted_free_space()
            .unwrap()
            .unwrap();
        let ours: Vec<Vec<u64>> = persisted
            .sections()
            .iter()
            .map(|s| vec![s.addr, s.len])
            .collect();
        assert!(ours.len() > 100, "{strategy:?}: {} sections", ours.len());
        let r = report(&path, &["d001", "d399"]);
        assert_eq!(r["sections"], serde_json::json!(ours), "{strategy:?}");
        assert_eq!(r["freespace"], persisted.free_bytes(), "{strategy:?}");
        let n = |i: usize| 1 + (i * 7) % 300;
        assert_eq!(r["data"]["d001"], serde_json::json!([(n(1)) as f64, n(1)]));
        assert_eq!(
            r["data"]["d399"],
            serde_json::json!([(399 % 256 * n(399)) as f64, n(399)])
        );
        h5dump(&["-H"], &path).unwrap();
    }
}

/// A small persisting file (its only free space the metadata aggregator's rest, given back
/// before the raw data's block): libhdf5 reports the same section, then changes the file.
#[test]
fn small_persisting_file_changed_by_libhdf5() {
    let (_d, path) = tmp("empty.h5");
    let f = persisting(&path, SpaceStrategy::FsmAggr, FormatBounds::V18);
    f.root()
        .unwrap()
        .new_dataset::<i32>()
        .shape([4])
        .create("x")
        .unwrap()
        .write(&[1, 2, 3, 4])
        .unwrap();
    f.close().unwrap();
    let persisted = h5::File::open(&path)
        .unwrap()
        .persisted_free_space()
        .unwrap()
        .unwrap();
    let ours: Vec<Vec<u64>> = persisted
        .sections()
        .iter()
        .map(|s| vec![s.addr, s.len])
        .collect();
    let r = report(&path, &["x"]);
    assert_eq!(r["sections"], serde_json::json!(ours));
    assert_eq!(r["data"]["x"], serde_json::json!([10.0, 4]));
    run_python(
        "import sys, h5py\nwith h5py.File(sys.argv[1], 'r+') as f:\n    f['y'] = [5]\n",
        &[path.to_str().unwrap()],
    );
    let r = report(&path, &["x", "y"]);
    assert_eq!(r["data"]["y"], serde_json::json!([5.0, 1]));
    h5dump(&["-H"], &path).unwrap();
}

/// The paged-write check itself catches both violations.
#[test]
fn the_paged_write_check_catches_violations() {
    check_paged_writes(&[(0, 48), (4000, 96), (8192, 4096), (16384, 9000)], 4096);
    for bad in [(4090, 10), (100, 4096)] {
        assert!(std::panic::catch_unwind(|| check_paged_writes(&[bad], 4096)).is_err());
    }
}
