//! `h5 dump` of references against h5dump 1.10 itself (not golden files): files with object
//! and region references in every position h5dump prints specially (datasets and attributes,
//! one and two dimensions, scalars, inside compounds, references to groups, committed
//! datatypes, scalar, string, compound and empty datasets and to datasets of references, point
//! and block lists long enough to wrap), written by h5py (libhdf5) and by h5; the two outputs
//! must be byte-identical. Fails (never skips) without h5py or h5dump.

use std::path::Path;
use std::process::Command;

use h5::{RegionRef, Selection};
use h5_testkit::verify::{h5dump, run_python};

/// Writes the h5py side of the files (a Python script, so libhdf5 writes them).
const MAKE: &str = r#"
import sys
import h5py, numpy as np
from h5py import h5r, h5s
with h5py.File(sys.argv[1], "w") as f:
    d = f.create_dataset("data", data=np.arange(24, dtype="<i4").reshape(6, 4))
    d1 = f.create_dataset("d1", data=np.arange(10.0))
    big = f.create_dataset("big", data=np.arange(10000, dtype="<i4").reshape(100, 100))
    g = f.create_group("grp")
    f["t"] = np.dtype("<i2")
    s = f.create_dataset("s", data=np.array([b"ab", b"cd"]))
    sc = f.create_dataset("sc", data=3.5)
    c = f.create_dataset("c", data=np.array([(1, 2.0)], dtype=[("a", "<i4"), ("b", "<f8")]))
    e = f.create_dataset("e", shape=(0,), dtype="i4")
    def pts(ds, p):
        sp = ds.id.get_space()
        sp.select_elements(np.array(p, dtype="u8"))
        return h5r.create(f.id, ds.name.encode(), h5r.DATASET_REGION, sp)
    def blocks(ds, n):
        sp = ds.id.get_space()
        sp.select_none()
        for i in range(n):
            sp.select_hyperslab((i * 3, i * 2), (1, 1), op=h5s.SELECT_OR)
        return h5r.create(f.id, ds.name.encode(), h5r.DATASET_REGION, sp)
    rr = [pts(d, [[0, 0], [1, 1]]), pts(d, [[2, 2]]), d.regionref[0:2, 0:2], d1.regionref[3:5],
          pts(d1, [[1], [2]]), d.regionref[0:6:2, 3], d.regionref[...], h5py.RegionReference()]
    rr += [pts(big, [[i, i + 1] for i in range(n)]) for n in (8, 9, 13, 30)]
    rr += [blocks(big, n) for n in (3, 4, 5, 12)]
    f.create_dataset("regions", data=np.array(rr, dtype=h5py.regionref_dtype))
    f.create_dataset("regions2d", data=np.array(rr[:6], dtype=h5py.regionref_dtype).reshape(2, 3))
    f.attrs.create("ra", np.array(rr[:8], dtype=h5py.regionref_dtype), dtype=h5py.regionref_dtype)
    o = f.create_dataset("objs", data=np.array(
        [d.ref, g.ref, d1.ref, h5py.Reference(), f["t"].ref, s.ref, sc.ref, c.ref, e.ref],
        dtype=h5py.ref_dtype))
    f.create_dataset("oo", data=np.array([o.ref, f.ref], dtype=h5py.ref_dtype))
    f.attrs.create("oa", np.array([d.ref, g.ref, h5py.Reference()], dtype=h5py.ref_dtype),
                   dtype=h5py.ref_dtype)
    dt = np.dtype([("a", "<i4"), ("r", h5py.regionref_dtype), ("o", h5py.ref_dtype)])
    arr = np.zeros(2, dtype=dt)
    arr[0] = (1, rr[2], d.ref)
    arr[1] = (2, rr[0], g.ref)
    f.create_dataset("comp", data=arr)
    f.create_dataset("scalar_reg", data=rr[2], dtype=h5py.regionref_dtype)
    f.create_dataset("scalar_obj", data=d.ref, dtype=h5py.ref_dtype)
"#;

pub(crate) fn h5_dump(path: &Path) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_h5"))
        .args(["dump", path.to_str().expect("utf-8")])
        .output()
        .expect("run h5");
    assert!(
        o.status.success(),
        "h5 dump: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf-8")
}

pub(crate) fn same_as_h5dump(path: &Path) {
    let ours = h5_dump(path);
    let theirs = h5dump(&[], path).unwrap_or_else(|e| panic!("h5dump: {e}"));
    if ours != theirs {
        let first = ours
            .lines()
            .zip(theirs.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        panic!(
            "{} differs at line {}:\n  ours:   {:?}\n  h5dump: {:?}",
            path.display(),
            first + 1,
            ours.lines().nth(first),
            theirs.lines().nth(first)
        );
    }
}

#[test]
fn references_written_by_libhdf5_dump_as_h5dump_prints_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("refs.h5");
    run_python(MAKE, &[&path]);
    same_as_h5dump(&path);
    let ddl = h5_dump(&path);
    // The constructs are there (the comparison above is not vacuous).
    for needle in [
        "DATASET \"/data\"{\n",
        "REGION_TYPE POINT  (0,1), (1,2)",
        "REGION_TYPE BLOCK  (0,3)-(0,3), (2,3)-(2,3), (4,3)-(4,3)",
        "DATATYPE ",
        "GROUP ",
        "NULL",
    ] {
        assert!(ddl.contains(needle), "{needle:?} missing");
    }
}

/// Region references written by h5 (earliest format) print as h5dump prints them.
#[test]
fn references_written_by_h5_dump_as_h5dump_prints_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("h5refs.h5");
    let f = h5::File::create_with(
        &path,
        &h5::FileAccess::default(),
        &h5::CreateOptions {
            bounds: h5::FormatBounds::Earliest,
            ..Default::default()
        },
    )
    .unwrap();
    let root = f.root().unwrap();
    let data = root
        .new_dataset::<i16>()
        .shape([40, 40])
        .create("data")
        .unwrap();
    data.write(&(0..1600).map(|i| i as i16).collect::<Vec<i16>>())
        .unwrap();
    let coords: Vec<u64> = (0..25).flat_map(|i| [i, 39 - i]).collect();
    let refs = vec![
        data.region(Selection::Points { rank: 2, coords }).unwrap(),
        data.region(Selection::Regular {
            start: vec![1, 2],
            stride: vec![5, 7],
            count: vec![6, 5],
            block: vec![2, 3],
        })
        .unwrap(),
        data.region(Selection::All).unwrap(),
        RegionRef::null(),
    ];
    root.new_dataset::<RegionRef>()
        .shape([refs.len()])
        .create("regions")
        .unwrap()
        .write(&refs)
        .unwrap();
    root.new_dataset::<h5::ObjectRef>()
        .shape([2])
        .create("objects")
        .unwrap()
        .write(&[data.reference(), h5::ObjectRef::null()])
        .unwrap();
    f.close().unwrap();
    same_as_h5dump(&path);
}

/// A committed datatype reached through a second hard link prints as h5dump prints it: one
/// `DATATYPE "name" HARDLINK "/first"` line (h5 printed the type and its attributes again).
#[test]
fn a_datatype_linked_twice_dumps_as_a_hard_link_as_h5dump_prints_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("types.h5");
    let make = r#"
import sys
import h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["Datatype"] = np.dtype("<i4")
    t = f["Datatype"]
    t.attrs["Attribute"] = np.int32(8)
    f["Link_to_Datatype"] = t
    f.create_dataset("Dataset", data=np.int32(3), dtype=t)
"#;
    run_python(make, &[&path]);
    same_as_h5dump(&path);
    assert!(
        h5_dump(&path).contains("DATATYPE \"Link_to_Datatype\" HARDLINK \"/Datatype\"\n"),
        "the hard link is there (the comparison above is not vacuous)"
    );
}
