//! An extensible array chunk index remembers the unpaged data block its last change set an
//! element in, and sets the next element of that block without protecting the index block or
//! super block that holds the block's address. These tests move a dataset's writes across
//! every boundary that makes the remembered block wrong: into the next data block, into a new
//! super block, into paged data blocks and back, after a shrink and regrowth, after the file is
//! reopened (a new index, nothing remembered) and after the dataset is deleted and another one
//! takes its place. The file is written as a VFD SWMR writer ending a tick after each batch (a
//! dataset's index lives across ticks, as in `h5-bench swmr` perf test 1). Every value is read
//! back after each tick by the writer and through a reader's view of the published tick, and by
//! h5py (libhdf5) at the end. Needs `scripts/setup-tools`; fails without it.

use crate::swmr_common;

use std::path::Path;

use h5_testkit::verify::run_python;
use ndarray::SliceInfoElem;
use swmr_common::*;

/// Page-buffer pages of the writer.
const PAGES: usize = 64;

fn create(path: &Path) -> h5::File {
    h5::File::create_with(path, &access(writer_cfg(0), PAGES), &paged()).unwrap()
}

/// The value written at row `r` in pass `pass` (never the fill value 0).
fn value(r: usize, pass: i32) -> i32 {
    (r as i32 + 1) * 10 + pass
}

fn span(start: usize, end: usize) -> [SliceInfoElem; 1] {
    [SliceInfoElem::Slice {
        start: start as isize,
        end: Some(end as isize),
        step: 1,
    }]
}

/// Writes rows `start..end` of `d` (growing it first when needed) with pass `pass`'s values,
/// keeping `model` (the expected contents, 0 where nothing was written) in step.
fn write(d: &h5::Dataset, model: &mut Vec<i32>, start: usize, end: usize, pass: i32) {
    if end > model.len() {
        d.resize([end]).unwrap();
        model.resize(end, 0);
    }
    let v: Vec<i32> = (start..end).map(|r| value(r, pass)).collect();
    d.write_slice(&v, span(start, end)).unwrap();
    model[start..end].copy_from_slice(&v);
}

/// Checks every row of `got` against `model`.
fn check(got: &[i32], model: &[i32], what: &str) {
    assert_eq!(got.len(), model.len(), "{what}: length");
    if let Some(r) = (0..model.len()).find(|&r| got[r] != model[r]) {
        panic!("{what}: row {r} is {} instead of {}", got[r], model[r]);
    }
}

/// Ends a tick and checks every row of dataset `name` (`d`) against `model`, as the writer
/// reads it and as a reader of the published tick does.
fn tick_and_check(
    f: &h5::File,
    path: &Path,
    d: &h5::Dataset,
    name: &str,
    model: &[i32],
    what: &str,
) {
    f.end_tick().unwrap();
    check(&d.read_1d().unwrap().to_vec(), model, what);
    let r = snapshot(path);
    let seen: Vec<i32> = r.dataset(name).unwrap().read_1d().unwrap().to_vec();
    check(&seen, model, &format!("{what}, reader's view"));
}

fn new_dataset(f: &h5::File, name: &str) -> h5::Dataset {
    f.root()
        .unwrap()
        .new_dataset::<i32>()
        .shape([0])
        .max_shape([None])
        .chunk([1])
        .create(name)
        .unwrap()
}

/// Checks with h5py that dataset `name` of the file at `path` holds `model`.
fn check_with_libhdf5(path: &Path, name: &str, model: &[i32]) {
    let expected: String = model
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(",");
    // Next to the file: each test has its own directory.
    let list = path.with_extension(format!("{name}.txt"));
    std::fs::write(&list, expected).unwrap();
    let out = run_python(
        "import sys, h5py\n\
         f = h5py.File(sys.argv[1], 'r')\n\
         want = [int(x) for x in open(sys.argv[3]).read().split(',') if x]\n\
         got = [int(x) for x in f[sys.argv[2]][:]]\n\
         bad = [i for i in range(min(len(got), len(want))) if got[i] != want[i]]\n\
         print(len(got) == len(want), bad[:5])",
        &[path.to_str().unwrap(), name, list.to_str().unwrap()],
    );
    std::fs::remove_file(&list).unwrap();
    assert_eq!(out.trim(), "True []", "h5py's view of {name}");
}

/// One-element chunks written a few at a time, a tick ended after each batch: the batches run through
/// the index block's elements, the index block's data blocks, the data blocks of later super
/// blocks (each boundary crossed inside a batch and between batches), then jump to paged data
/// blocks far out and come back to rewrite rows of blocks written long before.
#[test]
fn writes_across_block_boundaries_land_in_the_right_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("known.h5");
    let f = create(&path);
    let d = new_dataset(&f, "d");
    let mut model = Vec::new();
    // Dense appends of 7 rows: boundaries at 4, 20, 36, 68, ... fall inside batches.
    let mut at = 0;
    while at < 700 {
        write(&d, &mut model, at, at + 7, 0);
        tick_and_check(&f, &path, &d, "d", &model, &format!("append at {at}"));
        at += 7;
    }
    // Far rows in paged data blocks, then back into unpaged blocks written earlier (the block
    // remembered last is not theirs), alternating so that every write changes block.
    for (k, start) in [5000usize, 30, 140_000, 3, 600, 5010, 21, 140_004]
        .into_iter()
        .enumerate()
    {
        write(&d, &mut model, start, start + 3, 1 + k as i32);
        tick_and_check(&f, &path, &d, "d", &model, &format!("rewrite at {start}"));
    }
    f.close().unwrap();
    check_with_libhdf5(&path, "d", &model);
}

/// A shrink clears the elements past the new end; regrowth sets them again, into the blocks
/// that already exist; a reopened file starts with nothing remembered; a deleted dataset's
/// successor (whose array may reuse the freed space) starts with nothing remembered.
#[test]
fn shrink_regrow_reopen_and_replace_keep_values_exact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shrink.h5");
    let mut model = Vec::new();
    {
        let f = create(&path);
        let d = new_dataset(&f, "d");
        for start in (0..120).step_by(8) {
            write(&d, &mut model, start, start + 8, 0);
            tick_and_check(&f, &path, &d, "d", &model, &format!("append at {start}"));
        }
        d.resize([50]).unwrap();
        model.truncate(50);
        tick_and_check(&f, &path, &d, "d", &model, "shrunk to 50");
        d.resize([90]).unwrap();
        model.resize(90, 0);
        tick_and_check(&f, &path, &d, "d", &model, "regrown to 90, unwritten");
        for start in (50..90).step_by(5) {
            write(&d, &mut model, start, start + 5, 2);
            tick_and_check(&f, &path, &d, "d", &model, &format!("regrowth at {start}"));
        }
        f.close().unwrap();
    }
    {
        let f = h5::File::open_rw_with(&path, &access(writer_cfg(0), PAGES)).unwrap();
        let d = f.dataset("d").unwrap();
        for start in [85usize, 40, 90, 2, 95] {
            write(&d, &mut model, start, start + 5, 3);
            tick_and_check(&f, &path, &d, "d", &model, &format!("reopened, at {start}"));
        }
        // Another dataset's array in the same file: each index remembers its own block.
        let e = new_dataset(&f, "e");
        let mut other = Vec::new();
        for start in (0..60).step_by(6) {
            write(&e, &mut other, start, start + 6, 4);
            write(&d, &mut model, start, start + 2, 5);
            tick_and_check(&f, &path, &e, "e", &other, &format!("e at {start}"));
            tick_and_check(
                &f,
                &path,
                &d,
                "d",
                &model,
                &format!("d beside e at {start}"),
            );
        }
        f.root().unwrap().unlink("e").unwrap();
        f.end_tick().unwrap();
        let e = new_dataset(&f, "e");
        let mut other = Vec::new();
        for start in (0..40).step_by(4) {
            write(&e, &mut other, start, start + 4, 6);
            tick_and_check(&f, &path, &e, "e", &other, &format!("new e at {start}"));
        }
        f.close().unwrap();
        check_with_libhdf5(&path, "e", &other);
    }
    check_with_libhdf5(&path, "d", &model);
}
