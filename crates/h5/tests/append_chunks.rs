//! Appends that make a new chunk every few rounds, with a user fill value, through each chunk
//! index that knows the box of its chunks while it is written (v1 B-tree, extensible array,
//! v2 B-tree, fixed array: the lookup of a chunk past the box is answered without the index).
//! Each new chunk's first write is partial, so its untouched part must read as fill; a growth
//! that skips a whole chunk must read fill there; a shrink deletes chunks the box still covers
//! and a regrowth must read fill, not their old values; a file opened again (an index whose box
//! is unknown) keeps appending. Run with the default chunk cache and with one that holds no
//! chunk (every chunk written out and looked up in the index again). Checked by h5 and by h5py
//! (HDF5 1.14).

use std::path::Path;

use h5::ChunkIndexKind;
use h5_testkit::verify::run_python;
use ndarray::SliceInfoElem as S;

const FILL: i32 = -7;

fn slice(start: usize, end: usize) -> [S; 1] {
    [S::Slice {
        start: start as isize,
        end: Some(end as isize),
        step: 1,
    }]
}

/// Grows `ds` (and its model) to `len` + `values.len()` and writes `values` at `at`.
fn append(ds: &h5::Dataset, model: &mut Vec<i32>, at: usize, values: &[i32]) {
    let end = at + values.len();
    if end > model.len() {
        ds.resize([end]).unwrap();
        model.resize(end, FILL);
    }
    ds.write_slice(values, slice(at, end)).unwrap();
    model[at..end].copy_from_slice(values);
}

fn check_h5(ds: &h5::Dataset, model: &[i32], what: &str) {
    assert_eq!(ds.shape(), [model.len()], "{what}: shape");
    assert_eq!(ds.read_vec::<i32>().unwrap(), model, "{what}: values");
}

/// Every dataset's values as h5py reads them.
fn h5py_values(path: &Path) -> serde_json::Value {
    let out = run_python(
        "import h5py, json, sys\n\
         with h5py.File(sys.argv[1], 'r') as f:\n    \
             print(json.dumps({k: [int(x) for x in f[k][()]] for k in f}))",
        &[path.to_str().expect("utf-8 path")],
    );
    serde_json::from_str(out.trim()).expect("h5py's JSON")
}

fn check_h5py(path: &Path, models: &[(String, Vec<i32>)]) {
    let got = h5py_values(path);
    for (name, model) in models {
        assert_eq!(got[name], serde_json::json!(model), "h5py reads {name}");
    }
}

#[test]
fn appended_chunks_read_back_with_fill_through_every_tracked_index() {
    run(&h5::FileAccess::default());
}

#[test]
fn appended_chunks_read_back_with_fill_when_no_chunk_stays_cached() {
    run(
        &h5::FileAccess::default().chunk_cache(h5::ChunkCacheConfig {
            limit: 1,
            default_dataset_min: 0,
            ..h5::ChunkCacheConfig::default()
        }),
    );
}

fn run(access: &h5::FileAccess) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("append.h5");
    let kinds = [
        (ChunkIndexKind::BtreeV1, None),
        (ChunkIndexKind::ExtensibleArray, None),
        (ChunkIndexKind::BtreeV2, None),
        (ChunkIndexKind::FixedArray, Some(200)),
    ];
    let mut models: Vec<(String, Vec<i32>)> = Vec::new();
    {
        let file = h5::File::create_with(&path, access, &h5::CreateOptions::default()).unwrap();
        for (n, (kind, max)) in kinds.iter().enumerate() {
            let name = format!("d{n}");
            let ds = file
                .new_dataset::<i32>()
                .shape([0])
                .max_shape([*max])
                .chunk([10])
                .fill_value(FILL)
                .chunk_index(*kind)
                .create(&name)
                .unwrap();
            assert_eq!(ds.chunk_index(), Some(*kind), "{name}");
            let base = (n as i32 + 1) * 1000;
            let mut model = Vec::new();
            // Rounds of 3: every chunk of 10 is first written in part.
            for round in 0..12 {
                let at = model.len();
                let v: Vec<i32> = (0..3).map(|i| base + (round * 3 + i)).collect();
                append(&ds, &mut model, at, &v);
                check_h5(&ds, &model, &format!("{name} round {round}"));
            }
            // 36 → 51: chunk 4 (40..50) is never written, chunk 5 only at its start.
            ds.resize([48]).unwrap();
            model.resize(48, FILL);
            append(&ds, &mut model, 48, &[base + 500, base + 501, base + 502]);
            check_h5(&ds, &model, &format!("{name} after a gap"));
            // Shrink into chunk 2 (chunks 3.. deleted, the end of chunk 2 cleared), then grow
            // past every chunk that was there: fill, not the old values.
            ds.resize([25]).unwrap();
            model.truncate(25);
            ds.resize([60]).unwrap();
            model.resize(60, FILL);
            check_h5(&ds, &model, &format!("{name} shrunk and regrown"));
            append(&ds, &mut model, 60, &[base + 600, base + 601, base + 602]);
            // An overwrite of old chunks inside the box.
            append(&ds, &mut model, 5, &[base + 700, base + 701]);
            check_h5(&ds, &model, &format!("{name} last append"));
            models.push((name, model));
        }
        file.close().unwrap();
    }
    check_h5py(&path, &models);
    {
        // Opened again: the indexes' boxes are unknown, lookups go to the index.
        let file = h5::File::open_rw_with(&path, access).unwrap();
        for (n, (name, model)) in models.iter_mut().enumerate() {
            let ds = file.dataset(name).unwrap();
            check_h5(&ds, model, &format!("{name} reopened"));
            let base = (n as i32 + 1) * 1000;
            // Into the chunk the last append made (60..70), then a new one (70..80).
            append(
                &ds,
                model,
                63,
                &[base + 800, base + 801, base + 802, base + 803],
            );
            append(&ds, model, 70, &[base + 900]);
            check_h5(&ds, model, &format!("{name} appended after reopening"));
        }
        file.close().unwrap();
    }
    check_h5py(&path, &models);
    let file = h5::File::open(&path).unwrap();
    for (name, model) in &models {
        check_h5(
            &file.dataset(name).unwrap(),
            model,
            &format!("{name} read-only"),
        );
    }
}
