//! An h5 writer in legacy SWMR mode (`File::start_swmr_write`, `FileAccess::swmr_write`;
//! libhdf5's `H5Fstart_swmr_write` / `H5F_ACC_SWMR_WRITE`), in one process: libhdf5's rules for
//! entering the mode, the superblock's status flags, the rollback journal left off, structure
//! changes refused, freed space held until close, and the file h5py and h5dump read after
//! close. The multi-process test with h5py readers is `legacy_swmr_procs.rs`.

use std::path::{Path, PathBuf};

use h5::{CreateOptions, FileAccess, FormatBounds, SwmrWriteError};
use h5_testkit::verify::{h5dump, h5dump_data_values, run_python};

/// The superblock signature every reader looks for at offset 0.
const SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

fn latest() -> CreateOptions {
    CreateOptions::with_bounds(FormatBounds::V110, FormatBounds::LATEST)
}

/// The version 3 superblock's status flags ("file consistency flags", byte 11) as on disk, and
/// the first 8 bytes.
fn on_disk(path: &Path) -> (Vec<u8>, u8) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes[8], 3, "superblock version");
    (bytes[..8].to_vec(), bytes[11])
}

fn swmr_error(e: &h5::Error) -> &SwmrWriteError {
    match e.inner() {
        h5::Error::SwmrWrite(s) => s,
        other => panic!("a SwmrWriteError expected, got {other:?}"),
    }
}

/// A file of the 1.10 formats with one appendable dataset `d` (extensible array index).
fn new_file(dir: &Path) -> (PathBuf, h5::File, h5::Dataset) {
    let path = dir.join("w.h5");
    let f = h5::File::create_with(&path, &FileAccess::new(), &latest()).unwrap();
    let d = f
        .new_dataset::<i64>()
        .shape([0])
        .max_shape([None])
        .chunk([8])
        .create("d")
        .unwrap();
    (path, f, d)
}

#[test]
fn start_swmr_write_marks_the_superblock_and_close_clears_the_marks() {
    let dir = tempfile::tempdir().unwrap();
    let (path, f, d) = new_file(dir.path());
    f.flush().unwrap();
    assert_eq!(on_disk(&path).1, 0);
    assert!(!f.is_swmr_writing());
    f.start_swmr_write().unwrap();
    assert!(f.is_swmr_writing());
    // Written at once: write access 0x01 | SWMR write 0x04, libhdf5's marks.
    assert_eq!(on_disk(&path).1, 0x05);
    for i in 0..20i64 {
        d.append(&[i * 3]).unwrap();
        f.flush().unwrap();
        assert_eq!(on_disk(&path), (SIGNATURE.to_vec(), 0x05));
    }
    f.close().unwrap();
    assert_eq!(on_disk(&path), (SIGNATURE.to_vec(), 0));
    let out = run_python(
        "import sys, h5py\nf = h5py.File(sys.argv[1], 'r')\nprint(f['d'][...].tolist())",
        &[&path],
    );
    let want: Vec<String> = (0..20).map(|i| (i * 3).to_string()).collect();
    assert_eq!(out.trim(), format!("[{}]", want.join(", ")));
    let dump = h5dump(&["-d", "/d"], &path).unwrap();
    assert_eq!(h5dump_data_values(&dump, "/d"), want);
}

#[test]
fn no_rollback_journal_and_no_in_place_marker_while_swmr_writing() {
    let dir = tempfile::tempdir().unwrap();
    let (path, f, d) = new_file(dir.path());
    d.append(&[1i64, 2, 3]).unwrap();
    f.flush().unwrap();
    let journal = dir.path().join("w.h5-journal");
    assert!(journal.exists(), "a plain writer keeps its journal");
    f.start_swmr_write().unwrap();
    assert!(!journal.exists(), "SWMR writing removes the journal");
    // In-place changes between flushes: a plain writer spoils the signature until the flush
    // completes; a SWMR writer never does (readers open the file at any time).
    for i in 0..40i64 {
        d.append(&[i]).unwrap();
        if i % 8 == 7 {
            f.flush().unwrap();
        }
        assert_eq!(on_disk(&path).0, SIGNATURE.to_vec());
    }
    assert!(!journal.exists());
    f.close().unwrap();
}

#[test]
fn libhdf5s_rules_for_entering_swmr_writing() {
    let dir = tempfile::tempdir().unwrap();
    // Superblock version 2 (h5's default bounds, V18).
    let old = dir.path().join("old.h5");
    let f = h5::File::create(&old).unwrap();
    let e = f.start_swmr_write().unwrap_err();
    assert!(
        matches!(
            swmr_error(&e),
            SwmrWriteError::SuperblockVersion { version: 2 }
        ),
        "{e}"
    );
    assert!(!f.is_swmr_writing());
    f.close().unwrap();
    // Read-only.
    let (path, f, _) = new_file(dir.path());
    f.close().unwrap();
    let r = h5::File::open(&path).unwrap();
    let e = r.start_swmr_write().unwrap_err();
    assert!(matches!(swmr_error(&e), SwmrWriteError::NotWritable), "{e}");
    assert_eq!(e.kind(), h5::ErrorKind::State);
    drop(r);
    // Twice.
    let f = h5::File::open_rw(&path).unwrap();
    f.start_swmr_write().unwrap();
    let e = f.start_swmr_write().unwrap_err();
    assert!(
        matches!(swmr_error(&e), SwmrWriteError::AlreadyWriting),
        "{e}"
    );
    f.close().unwrap();
    assert_eq!(on_disk(&path).1, 0);
    // H5F_ACC_SWMR_WRITE: at open, not at create.
    let access = FileAccess::new().swmr_write(true);
    let e = h5::File::create_with(dir.path().join("c.h5"), &access, &latest()).unwrap_err();
    assert!(matches!(e.inner(), h5::Error::Invalid(_)), "{e}");
    let f = h5::File::open_rw_with(&path, &access).unwrap();
    assert!(f.is_swmr_writing());
    assert_eq!(on_disk(&path).1, 0x05);
    f.close().unwrap();
    let e = h5::File::open_rw_with(&old, &access).unwrap_err();
    assert!(
        matches!(
            swmr_error(&e),
            SwmrWriteError::SuperblockVersion { version: 2 }
        ),
        "{e}"
    );
    // The refused open left the file closed and unlocked.
    h5::File::open_rw(&old).unwrap().close().unwrap();
}

#[test]
fn a_marked_file_is_refused_to_plain_writers_and_readers() {
    let dir = tempfile::tempdir().unwrap();
    let (path, f, d) = new_file(dir.path());
    d.append(&[5i64]).unwrap();
    f.start_swmr_write().unwrap();
    // Another process: libhdf5 refuses a plain open of a SWMR writer's file and accepts a
    // SWMR read open.
    let out = run_python(
        r#"
import sys, h5py
try:
    h5py.File(sys.argv[1], "r")
    print("opened")
except OSError:
    print("refused")
f = h5py.File(sys.argv[1], "r", libver="latest", swmr=True)
print(f["d"][...].tolist())
"#,
        &[&path],
    );
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        ["refused", "[5]"]
    );
    f.close().unwrap();
}

#[test]
fn structure_changes_are_refused_while_swmr_writing() {
    let dir = tempfile::tempdir().unwrap();
    let (path, f, d) = new_file(dir.path());
    f.create_group("g").unwrap();
    d.new_attr::<i32>()
        .shape([1])
        .create("a")
        .unwrap()
        .write(&[1])
        .unwrap();
    f.start_swmr_write().unwrap();
    let refused = |r: h5::Result<()>, what: &str| {
        let e = r.unwrap_err();
        match swmr_error(&e) {
            SwmrWriteError::StructureChange { what: w } => assert_eq!(*w, what, "{e}"),
            other => panic!("{other:?}"),
        }
    };
    refused(f.create_group("h").map(drop), "creating a group");
    refused(
        f.new_dataset::<u8>().shape([1]).create("x").map(drop),
        "creating a dataset",
    );
    refused(f.link_soft("s", "/d"), "adding a link");
    refused(f.unlink("g"), "removing a link");
    refused(
        d.new_attr::<i32>().create("b").map(drop),
        "writing an attribute",
    );
    refused(d.delete_attr("a"), "deleting an attribute");
    // Appending and writing existing datasets is what the mode is for.
    d.append(&[1i64, 2]).unwrap();
    d.write_slice(&[9i64], h5::ndarray::s![0..1]).unwrap();
    f.flush().unwrap();
    f.close().unwrap();
    let f = h5::File::open(&path).unwrap();
    assert_eq!(f.member_names().unwrap(), ["d", "g"]);
    assert_eq!(f.dataset("d").unwrap().read_vec::<i64>().unwrap(), [9, 2]);
    assert_eq!(f.dataset("d").unwrap().attr_names().unwrap(), ["a"]);
}

#[test]
fn freed_space_is_not_reused_before_close() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.h5");
    let f = h5::File::create_with(&path, &FileAccess::new(), &latest()).unwrap();
    // Deflated chunks change size as they fill: each rewrite goes to new space and frees the
    // old, which a plain writer reuses after the next flush.
    let d = f
        .new_dataset::<i64>()
        .shape([0])
        .max_shape([None])
        .chunk([512])
        .deflate(6)
        .create("z")
        .unwrap();
    let value = |i: u64| (i * 2_654_435_761 % 1_000_003) as i64;
    let rows = |from: u64, n: u64| (from..from + n).map(value).collect::<Vec<_>>();
    d.append(&rows(0, 10)).unwrap();
    f.flush().unwrap();
    f.start_swmr_write().unwrap();
    let mut seen = std::collections::BTreeMap::new();
    for round in 0..30u64 {
        d.append(&rows(10 + round * 10, 10)).unwrap();
        f.flush().unwrap();
        let c: Vec<h5::ChunkInfo> = d.iter_chunks().unwrap().collect();
        assert_eq!(c.len(), 1);
        // A chunk's place is never one that held an earlier version of it.
        for (addr, size) in &seen {
            let (a, s) = (c[0].address, c[0].size);
            assert!(
                a == *addr && s == *size || a + s <= *addr || addr + size <= a,
                "round {round}: chunk at {a}+{s} over an earlier one at {addr}+{size}"
            );
        }
        seen.insert(c[0].address, c[0].size);
    }
    assert!(seen.len() > 10, "the chunk moved as it grew: {seen:?}");
    f.close().unwrap();
    let out = run_python(
        "import sys, h5py\nf = h5py.File(sys.argv[1], 'r')\nprint(','.join(map(str, f['z'][...])))",
        &[&path],
    );
    let want: Vec<String> = rows(0, 310).iter().map(|v| v.to_string()).collect();
    assert_eq!(out.trim(), want.join(","));
}

/// Version 2 B-tree indexes (two unlimited dimensions) are written in the mode, their nodes
/// shadowed (the multi-process and write-by-write checks are `legacy_swmr_procs.rs` and
/// `legacy_swmr_flush_order.rs`); a version 1 B-tree index is refused, as libhdf5 does not
/// support it under SWMR either.
#[test]
fn v2_b_trees_are_written_and_v1_b_trees_refused_while_swmr_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bt.h5");
    let f = h5::File::create_with(&path, &FileAccess::new(), &latest()).unwrap();
    let d = f
        .new_dataset::<i32>()
        .shape([0, 2])
        .max_shape([None, None])
        .chunk([2, 2])
        .create("c")
        .unwrap();
    assert_eq!(d.chunk_index(), Some(h5::ChunkIndexKind::BtreeV2));
    d.append(&h5::ndarray::arr2(&[[1i32, 2]])).unwrap();
    let old = f
        .new_dataset::<i32>()
        .shape([2])
        .max_shape([None])
        .chunk([2])
        .chunk_index(h5::ChunkIndexKind::BtreeV1)
        .create("old")
        .unwrap();
    old.write(&[5, 6]).unwrap();
    f.start_swmr_write().unwrap();
    d.resize([3, 2]).unwrap();
    d.write_slice(&[7i32], h5::ndarray::s![0, 0..1]).unwrap();
    d.append(&h5::ndarray::arr2(&[[3i32, 4]])).unwrap();
    let refused = |r: h5::Result<()>| {
        let e = r.unwrap_err();
        assert!(
            matches!(
                swmr_error(&e),
                SwmrWriteError::BtreeIndex {
                    index: "version 1 B-tree"
                }
            ),
            "{e}"
        );
    };
    refused(old.resize([4]));
    refused(old.write_slice(&[9i32], h5::ndarray::s![0..1]));
    assert_eq!(old.read_vec::<i32>().unwrap(), [5, 6]);
    f.close().unwrap();
    let out = run_python(
        "import sys, h5py\nf = h5py.File(sys.argv[1], 'r')\nprint(f['c'][...].ravel().tolist(), f['old'][...].tolist())",
        &[&path],
    );
    assert_eq!(out.trim(), "[7, 2, 0, 0, 0, 0, 3, 4] [5, 6]");
}

/// A deflated chunk rewritten at its old size moves while SWMR writing (libhdf5 rewrites it in
/// place, so its SWMR readers can decode a torn stream): xorshift values do not compress, so
/// both versions deflate to the same size. Before SWMR writing the same rewrite stays in place.
#[test]
fn an_encoded_chunk_rewritten_at_its_old_size_moves() {
    let noisy = |seed: u64| {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..512)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as i64
            })
            .collect::<Vec<_>>()
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("same.h5");
    let f = h5::File::create_with(&path, &FileAccess::new(), &latest()).unwrap();
    let d = f
        .new_dataset::<i64>()
        .shape([512])
        .chunk([512])
        .deflate(1)
        .create("z")
        .unwrap();
    let place = |d: &h5::Dataset| {
        let c: Vec<h5::ChunkInfo> = d.iter_chunks().unwrap().collect();
        (c[0].address, c[0].size)
    };
    d.write(&noisy(1)).unwrap();
    f.flush().unwrap();
    let first = place(&d);
    d.write(&noisy(2)).unwrap();
    f.flush().unwrap();
    assert_eq!(place(&d), first, "a plain writer rewrites it in place");
    f.start_swmr_write().unwrap();
    d.write(&noisy(3)).unwrap();
    f.flush().unwrap();
    let moved = place(&d);
    assert_eq!(moved.1, first.1, "the same size");
    assert!(
        moved.0 + moved.1 <= first.0 || first.0 + first.1 <= moved.0,
        "a new place: {moved:?} against {first:?}"
    );
    f.close().unwrap();
    let out = run_python(
        "import sys, h5py\nf = h5py.File(sys.argv[1], 'r')\nprint(','.join(map(str, f['z'][...])))",
        &[&path],
    );
    let want: Vec<String> = noisy(3).iter().map(|v| v.to_string()).collect();
    assert_eq!(out.trim(), want.join(","));
}
