//! Property test of one-dimensional writes, the chunk cache's resident-run path included: random
//! appends, overwrites and growths (runs that stay in one chunk, cross into the next, or span
//! many; written with step 1 or as single elements) on datasets of random chunk sizes with a fill
//! value, at both format bounds, with the default chunk cache and with one that holds no chunk
//! (every run then takes the general flow). Checked against a model after every step, after
//! reopening, and by h5py (HDF5 1.14) for the last file of each case.

use std::path::Path;

use h5::{CreateOptions, FileAccess, FormatBounds};
use h5_testkit::verify::{DatasetExpect, Expectations, Reference, check_with};
use ndarray::SliceInfoElem as S;
use proptest::prelude::*;
use serde_json::json;

const FILL: i32 = -7;

/// One step on dataset `ds % datasets`.
#[derive(Clone, Debug)]
enum Op {
    /// Grow by `n` and write the new tail.
    Append { ds: usize, n: usize },
    /// Write `n` elements from position `at % len` (clipped at the end).
    Overwrite { ds: usize, at: usize, n: usize },
    /// Grow by `n` without writing (the tail reads as fill).
    Grow { ds: usize, n: usize },
    /// Write one element at `at % len`, indexed (`s![i]`).
    Element { ds: usize, at: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 1..70usize).prop_map(|(ds, n)| Op::Append { ds, n }),
        2 => (0..3usize, 0..1000usize, 1..40usize)
            .prop_map(|(ds, at, n)| Op::Overwrite { ds, at, n }),
        1 => (0..3usize, 1..30usize).prop_map(|(ds, n)| Op::Grow { ds, n }),
        1 => (0..3usize, 0..1000usize).prop_map(|(ds, at)| Op::Element { ds, at }),
    ]
}

fn run_slice(start: usize, end: usize) -> [S; 1] {
    [S::Slice {
        start: start as isize,
        end: Some(end as isize),
        step: 1,
    }]
}

/// Applies `ops` to a new file at `path` and to the models; checks h5 after every step.
fn apply(
    path: &Path,
    access: &FileAccess,
    bounds: FormatBounds,
    chunks: &[usize],
    ops: &[Op],
) -> Vec<Vec<i32>> {
    let file = h5::File::create_with(
        path,
        access,
        &CreateOptions {
            bounds,
            ..Default::default()
        },
    )
    .unwrap();
    let dsets: Vec<h5::Dataset> = chunks
        .iter()
        .enumerate()
        .map(|(j, &c)| {
            file.new_dataset::<i32>()
                .shape([0])
                .max_shape([None])
                .chunk([c])
                .fill_value(FILL)
                .create(&format!("d{j}"))
                .unwrap()
        })
        .collect();
    let mut models = vec![Vec::<i32>::new(); chunks.len()];
    let mut next = 1i32;
    let mut values = |n: usize| -> Vec<i32> {
        let v = (next..next + n as i32).collect();
        next += n as i32;
        v
    };
    for (step, o) in ops.iter().enumerate() {
        let j = match *o {
            Op::Append { ds, .. }
            | Op::Overwrite { ds, .. }
            | Op::Grow { ds, .. }
            | Op::Element { ds, .. } => ds % chunks.len(),
        };
        let (d, m) = (&dsets[j], &mut models[j]);
        match *o {
            Op::Append { n, .. } => {
                let at = m.len();
                let v = values(n);
                d.resize([at + n]).unwrap();
                d.write_slice(&v, run_slice(at, at + n)).unwrap();
                m.extend_from_slice(&v);
            }
            Op::Overwrite { at, n, .. } => {
                if m.is_empty() {
                    continue;
                }
                let at = at % m.len();
                let end = (at + n).min(m.len());
                let v = values(end - at);
                d.write_slice(&v, run_slice(at, end)).unwrap();
                m[at..end].copy_from_slice(&v);
            }
            Op::Grow { n, .. } => {
                d.resize([m.len() + n]).unwrap();
                m.resize(m.len() + n, FILL);
            }
            Op::Element { at, .. } => {
                if m.is_empty() {
                    continue;
                }
                let at = at % m.len();
                let v = values(1);
                d.write_slice(&v[..], [S::Index(at as isize)]).unwrap();
                m[at] = v[0];
            }
        }
        assert_eq!(
            d.read_vec::<i32>().unwrap(),
            *m,
            "d{j} after step {step}: {o:?}"
        );
    }
    drop(dsets);
    file.close().unwrap();
    models
}

/// Reads the file back with h5 and, when `h5py` holds the chunk shapes, with h5py: values
/// (fill in the unwritten parts), shapes, chunks and fill value.
fn check(path: &Path, models: &[Vec<i32>], h5py: Option<&[usize]>) {
    let file = h5::File::open(path).unwrap();
    for (j, m) in models.iter().enumerate() {
        let got = file
            .dataset(&format!("d{j}"))
            .unwrap()
            .read_vec::<i32>()
            .unwrap();
        assert_eq!(got, *m, "d{j} reopened");
    }
    drop(file);
    if let Some(chunks) = h5py {
        let mut exp = Expectations::new();
        for (j, (m, &c)) in models.iter().zip(chunks).enumerate() {
            let d = DatasetExpect::new("<i4", &[m.len() as u64])
                .maxshape(&[None])
                .chunks(&[c as u64])
                .fillvalue(json!(FILL))
                .values(json!(m));
            exp = exp.dataset(&format!("d{j}"), d);
        }
        check_with(Reference::Hdf5v114, path, &exp).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn one_dimensional_writes_match_the_model(
        chunks in prop::collection::vec(1..48usize, 1..4),
        ops in prop::collection::vec(op(), 1..40),
        latest in any::<bool>(),
    ) {
        let bounds = if latest { FormatBounds::LATEST } else { FormatBounds::default() };
        let dir = tempfile::tempdir().unwrap();
        let no_cache = FileAccess::default().chunk_cache(h5::ChunkCacheConfig {
            limit: 1,
            default_dataset_min: 0,
            ..h5::ChunkCacheConfig::default()
        });
        for (k, access) in [FileAccess::default(), no_cache].iter().enumerate() {
            let path = dir.path().join(format!("runs{k}.h5"));
            let models = apply(&path, access, bounds, &chunks, &ops);
            check(&path, &models, None);
        }
    }
}

/// A fixed sequence through the resident-run path (appends of 3 into chunks of 10 with a fill
/// value: every chunk's first write is partial, the rest land in the resident chunk; a run
/// across a chunk boundary; an overwrite; a growth left unwritten), read by h5py.
#[test]
fn resident_runs_read_back_in_h5py() {
    let dir = tempfile::tempdir().unwrap();
    let mut ops: Vec<Op> = (0..14).map(|k| Op::Append { ds: k % 2, n: 3 }).collect();
    ops.extend([
        Op::Append { ds: 0, n: 15 },
        Op::Overwrite { ds: 1, at: 4, n: 9 },
        Op::Element { ds: 0, at: 2 },
        Op::Grow { ds: 1, n: 5 },
        Op::Append { ds: 1, n: 2 },
    ]);
    for bounds in [FormatBounds::default(), FormatBounds::LATEST] {
        let path = dir.path().join(format!("h5py_{bounds:?}.h5"));
        let models = apply(&path, &FileAccess::default(), bounds, &[10, 7], &ops);
        assert_eq!(models[0].len(), 7 * 3 + 15);
        assert_eq!(models[1][21..26], [FILL; 5]);
        check(&path, &models, Some(&[10, 7]));
    }
}
