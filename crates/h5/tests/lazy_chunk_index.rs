//! A chunked dataset's index is made with its first chunk, as libhdf5 makes it: a dataset
//! created (or opened for writing) and never written has no index structure in the file, and
//! the first chunk written makes it, whatever the index kind (v1 B-tree, fixed array,
//! extensible array, v2 B-tree). Checked against h5py (sizes, values, chunk counts).

use std::path::{Path, PathBuf};

use h5::{ChunkIndexKind, CreateOptions, FileAccess, FormatBounds};
use h5_testkit::verify::{h5dump, run_python};
use ndarray::SliceInfoElem as S;

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    (dir, p)
}

fn opts(bounds: FormatBounds) -> CreateOptions {
    CreateOptions {
        bounds,
        ..CreateOptions::default()
    }
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// One dataset shape per index kind: (name, shape, max shape, chunk, the kind at latest bounds).
type Shape = (
    &'static str,
    [usize; 2],
    [Option<usize>; 2],
    [usize; 2],
    ChunkIndexKind,
);
const SHAPES: [Shape; 3] = [
    (
        "ea",
        [0, 4],
        [None, Some(4)],
        [8, 4],
        ChunkIndexKind::ExtensibleArray,
    ),
    (
        "fa",
        [16, 4],
        [Some(64), Some(4)],
        [8, 4],
        ChunkIndexKind::FixedArray,
    ),
    ("bt2", [0, 0], [None, None], [8, 4], ChunkIndexKind::BtreeV2),
];

fn create_empty(file: &h5::File, prefix: &str, n: usize) {
    for j in 0..n {
        for (name, shape, max, chunk, _) in SHAPES {
            file.new_dataset::<i32>()
                .shape(shape)
                .max_shape(max)
                .chunk(chunk)
                .create(&format!("{prefix}{name}{j}"))
                .unwrap();
        }
    }
}

const H5PY_EMPTY: &str = r#"
import sys, h5py
with h5py.File(sys.argv[1], "w", libver=sys.argv[2]) as f:
    for j in range(int(sys.argv[3])):
        f.create_dataset(f"ea{j}", shape=(0, 4), maxshape=(None, 4), chunks=(8, 4), dtype="<i4")
        f.create_dataset(f"fa{j}", shape=(16, 4), maxshape=(64, 4), chunks=(8, 4), dtype="<i4")
        f.create_dataset(f"bt2{j}", shape=(0, 0), maxshape=(None, None), chunks=(8, 4), dtype="<i4")
"#;

/// Never-written datasets cost what libhdf5's cost: no index structure each (a v1 B-tree root
/// alone is 2 KiB, an extensible array header 40 bytes plus its index block).
#[test]
fn never_written_datasets_are_no_larger_than_libhdf5s() {
    let n = 100;
    for (bounds, libver) in [
        (FormatBounds::Earliest, "earliest"),
        (FormatBounds::V114, "latest"),
    ] {
        let (_d, ours) = tmp("ours.h5");
        let (_e, theirs) = tmp("theirs.h5");
        let file = h5::File::create_with(&ours, &FileAccess::default(), &opts(bounds)).unwrap();
        create_empty(&file, "", n);
        file.close().unwrap();
        run_python(
            H5PY_EMPTY,
            &[theirs.to_str().unwrap(), libver, &n.to_string()],
        );
        let (a, b) = (size(&ours), size(&theirs));
        assert!(
            a <= b,
            "{libver}: h5 wrote {a} bytes for {n} x 3 empty datasets, libhdf5 {b}"
        );
        let counts = run_python(
            "import sys, h5py\nf = h5py.File(sys.argv[1])\nprint(sum(d.id.get_num_chunks() for d in f.values()), len(f))",
            &[ours.to_str().unwrap()],
        );
        assert_eq!(counts.trim(), format!("0 {}", 3 * n));
        h5dump(&["-H"], &ours).unwrap();
    }
}

/// Writes `j`'s value block into each of the three datasets named with `prefix`/`j` (growing
/// them first) and returns what h5py must read back.
fn write_one_chunk(file: &h5::File, prefix: &str, j: usize) {
    for (name, _, _, _, _) in SHAPES {
        let d = file.dataset(&format!("{prefix}{name}{j}")).unwrap();
        if d.shape()[0] == 0 {
            d.resize([8, 4]).unwrap();
        }
        let v: Vec<i32> = (0..32).map(|i| (j * 100 + i) as i32).collect();
        d.write_slice(
            &v,
            [
                S::Slice {
                    start: 0,
                    end: Some(8),
                    step: 1,
                },
                S::Slice {
                    start: 0,
                    end: Some(4),
                    step: 1,
                },
            ],
        )
        .unwrap();
    }
}

const H5PY_CHECK: &str = r#"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1])
for name, d in sorted(f.items()):
    j = int(name[-1])
    written = name.startswith("w")
    want = np.arange(j * 100, j * 100 + 32, dtype="<i4").reshape(8, 4)
    got = d[0:8, 0:4] if d.shape[0] >= 8 else None
    if written:
        assert (got == want).all(), (name, got)
        assert d.id.get_num_chunks() == 1, (name, d.id.get_num_chunks())
    else:
        assert d.id.get_num_chunks() == 0, (name, d.id.get_num_chunks())
        if d.size:
            assert (d[...] == 0).all(), name
print("ok", len(f))
"#;

/// The first chunk makes the index: in the session that created the dataset, and after
/// reopening a never-written dataset for writing (h5's and h5py's); datasets left unwritten
/// keep no index; h5, h5py and h5dump read every value.
#[test]
fn the_first_chunk_makes_the_index_of_every_kind() {
    for (bounds, libver) in [
        (FormatBounds::Earliest, "earliest"),
        (FormatBounds::V114, "latest"),
    ] {
        let (_d, path) = tmp("first.h5");
        // h5py's never-written datasets: "w" ones written by h5 after reopening, "u" ones not.
        run_python(H5PY_EMPTY, &[path.to_str().unwrap(), libver, "0"]);
        {
            let file = h5::File::create_with(&path, &FileAccess::default(), &opts(bounds)).unwrap();
            create_empty(&file, "w", 2);
            create_empty(&file, "u", 1);
            if bounds == FormatBounds::V114 {
                for (name, _, _, _, kind) in SHAPES {
                    let d = file.dataset(&format!("w{name}0")).unwrap();
                    assert_eq!(d.chunk_index(), Some(kind), "{name}");
                }
            }
            // Written in the creating session.
            write_one_chunk(&file, "w", 0);
            file.close().unwrap();
        }
        {
            // Written after reopening.
            let file = h5::File::open_rw(&path).unwrap();
            write_one_chunk(&file, "w", 1);
            file.close().unwrap();
        }
        let file = h5::File::open(&path).unwrap();
        for j in 0..2usize {
            for (name, _, _, _, _) in SHAPES {
                let d = file.dataset(&format!("w{name}{j}")).unwrap();
                let v = d.read::<i32>().unwrap();
                assert_eq!(v[[7, 3]], (j * 100 + 31) as i32, "w{name}{j}");
                assert_eq!(d.num_chunks().unwrap(), 1, "w{name}{j}");
            }
        }
        drop(file);
        let out = run_python(H5PY_CHECK, &[path.to_str().unwrap()]);
        assert_eq!(out.trim(), "ok 9", "{libver}");
        h5dump(&[], &path).unwrap();
    }
}

/// Opening a file for writing does not make the indexes of its never-written datasets: h5py's
/// file keeps its size and its datasets keep no chunk.
#[test]
fn opening_for_writing_makes_no_index() {
    for libver in ["earliest", "latest"] {
        let (_d, path) = tmp("h5py.h5");
        run_python(H5PY_EMPTY, &[path.to_str().unwrap(), libver, "20"]);
        let before = size(&path);
        let file = h5::File::open_rw(&path).unwrap();
        for j in 0..20 {
            for (name, _, _, _, _) in SHAPES {
                let d = file.dataset(&format!("{name}{j}")).unwrap();
                assert_eq!(d.num_chunks().unwrap(), 0);
            }
        }
        file.close().unwrap();
        assert_eq!(size(&path), before, "{libver}");
        let out = run_python(
            "import sys, h5py\nf = h5py.File(sys.argv[1])\nprint(sum(d.id.get_num_chunks() for d in f.values()), len(f))",
            &[path.to_str().unwrap()],
        );
        assert_eq!(out.trim(), "0 60", "{libver}");
    }
}

/// In legacy-SWMR-writing mode the first chunk of a dataset created before the mode makes
/// its index; the object header naming it is written after it; h5py reads the values.
#[test]
fn the_first_chunk_makes_the_index_while_swmr_writing() {
    let (_d, path) = tmp("swmr.h5");
    let file =
        h5::File::create_with(&path, &FileAccess::default(), &opts(FormatBounds::V114)).unwrap();
    file.new_dataset::<i32>()
        .shape([0])
        .max_shape([None])
        .chunk([4])
        .create("x")
        .unwrap();
    file.start_swmr_write().unwrap();
    let d = file.dataset("x").unwrap();
    for k in 0..5usize {
        d.resize([(k + 1) * 4]).unwrap();
        let v: Vec<i32> = (k * 4..k * 4 + 4).map(|i| i as i32 * 3).collect();
        d.write_slice(
            &v,
            [S::Slice {
                start: (k * 4) as isize,
                end: Some((k * 4 + 4) as isize),
                step: 1,
            }],
        )
        .unwrap();
        file.flush().unwrap();
        let seen = run_python(
            "import sys, h5py\nf = h5py.File(sys.argv[1], 'r', libver='latest', swmr=True)\nprint(','.join(str(v) for v in f['x'][...]))",
            &[path.to_str().unwrap()],
        );
        let want: Vec<String> = (0..(k + 1) * 4).map(|i| (i * 3).to_string()).collect();
        assert_eq!(seen.trim(), want.join(","), "after flush {k}");
    }
    drop(d);
    file.close().unwrap();
}
