//! A dataset handle holds its dataset's slot (the current description, the chunk-cache
//! registration and the writable layout, shared by every handle of the dataset) instead of
//! looking them up by address per call (issue 15, W4 appends). These tests change a dataset
//! through one handle (resize, write, flush, eviction, another dataset's deletion) and check
//! that every other handle still reads and writes it correctly, and that h5py agrees.

use std::path::Path;

use h5::ndarray::SliceInfoElem;
use h5_testkit::verify::run_python;

fn slice(lo: usize, hi: usize) -> [SliceInfoElem; 1] {
    [SliceInfoElem::Slice {
        start: lo as isize,
        end: Some(hi as isize),
        step: 1,
    }]
}

/// Resizes `ds` to `hi` and writes `lo..hi` with values from `base`; mirrors it in `model`.
fn append(ds: &h5::Dataset, model: &mut Vec<i32>, n: usize, base: i32) {
    let lo = model.len();
    let values: Vec<i32> = (0..n).map(|i| base + i as i32).collect();
    ds.resize([lo + n]).unwrap();
    ds.write_slice(&values, slice(lo, lo + n)).unwrap();
    model.extend_from_slice(&values);
}

/// The values of dataset `name` as h5py reads them.
fn h5py_values(path: &Path, name: &str) -> Vec<i32> {
    let out = run_python(
        "import h5py, json, sys\n\
         with h5py.File(sys.argv[1], 'r') as f:\n    \
             print(json.dumps([int(x) for x in f[sys.argv[2]][()]]))",
        &[path.to_str().expect("utf-8 path"), name],
    );
    serde_json::from_str(out.trim()).expect("h5py's JSON")
}

fn extensible(file: &h5::File, name: &str) -> h5::Dataset {
    file.new_dataset::<i32>()
        .shape([0])
        .max_shape([None])
        .chunk([16])
        .create(name)
        .unwrap()
}

fn two_handles_interleaved(access: &h5::FileAccess, path: &Path) {
    let file = h5::File::create_with(path, access, &h5::CreateOptions::default()).unwrap();
    let a = extensible(&file, "d");
    let b = file.dataset("d").unwrap();
    let mut model = Vec::new();
    append(&a, &mut model, 10, 0);
    assert_eq!(b.shape(), [10], "the other handle sees the resize");
    append(&b, &mut model, 10, 100);
    assert_eq!(a.shape(), [20]);
    file.flush().unwrap();
    append(&a, &mut model, 25, 200);
    // A handle opened after the changes shares the same state.
    let c = file.dataset("d").unwrap();
    append(&c, &mut model, 3, 300);
    append(&b, &mut model, 40, 400);
    for (h, what) in [(&a, "a"), (&b, "b"), (&c, "c")] {
        assert_eq!(h.shape(), [model.len()], "{what}: shape");
        assert_eq!(h.read_vec::<i32>().unwrap(), model, "{what}: values");
    }
    drop((a, b, c));
    file.close().unwrap();
    assert_eq!(h5py_values(path, "d"), model);
}

#[test]
fn handles_of_one_dataset_share_resizes_writes_and_flushes() {
    let dir = tempfile::tempdir().unwrap();
    two_handles_interleaved(&h5::FileAccess::default(), &dir.path().join("two.h5"));
}

#[test]
fn handles_of_one_dataset_share_writes_when_no_chunk_stays_cached() {
    let dir = tempfile::tempdir().unwrap();
    let access = h5::FileAccess::default().chunk_cache(h5::ChunkCacheConfig {
        limit: 1,
        default_dataset_min: 0,
        ..h5::ChunkCacheConfig::default()
    });
    two_handles_interleaved(&access, &dir.path().join("evicted.h5"));
}

/// Another dataset's deletion takes it out of the chunk cache, which changes the cache's
/// registrations epoch: the handle checks its own registration again and goes on appending.
#[test]
fn a_handle_appends_on_after_another_dataset_left_the_chunk_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deleted.h5");
    let file = h5::File::create(&path).unwrap();
    let keep = extensible(&file, "keep");
    let gone = extensible(&file, "gone");
    let mut model = Vec::new();
    let mut other = Vec::new();
    append(&keep, &mut model, 20, 0);
    append(&gone, &mut other, 20, 1000);
    file.unlink("gone").unwrap();
    append(&keep, &mut model, 30, 100);
    // A dataset made after the deletion (it may take the freed space) is its own.
    let new = extensible(&file, "new");
    let mut fresh = Vec::new();
    append(&new, &mut fresh, 17, 5000);
    append(&keep, &mut model, 5, 200);
    assert_eq!(keep.read_vec::<i32>().unwrap(), model);
    assert_eq!(new.read_vec::<i32>().unwrap(), fresh);
    drop((keep, gone, new));
    file.close().unwrap();
    assert_eq!(h5py_values(&path, "keep"), model);
    assert_eq!(h5py_values(&path, "new"), fresh);
}

/// A file reopened for writing: the handle's first resize registers the existing dataset
/// (its layout made from the file) and later ones reuse what it found.
#[test]
fn a_reopened_dataset_is_registered_once_and_appended_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reopened.h5");
    let mut model = Vec::new();
    {
        let file = h5::File::create(&path).unwrap();
        let d = extensible(&file, "d");
        append(&d, &mut model, 20, 0);
        drop(d);
        file.close().unwrap();
    }
    let file = h5::File::open_rw(&path).unwrap();
    let d = file.dataset("d").unwrap();
    let e = file.dataset("d").unwrap();
    for k in 0..6 {
        append(if k % 2 == 0 { &d } else { &e }, &mut model, 7, 100 * k);
    }
    assert_eq!(e.read_vec::<i32>().unwrap(), model);
    drop((d, e));
    file.close().unwrap();
    assert_eq!(h5py_values(&path, "d"), model);
}
