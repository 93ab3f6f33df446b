//! Heap allocations of W4's steady append (h5-bench: many extensible 1-D datasets, each grown
//! by a `resize` and a `write_slice` of the new tail in turn), counted by dhat's global
//! allocator, at the default and the latest format bounds. The appends write into a chunk an
//! earlier append made and into new chunks; the counts bound what one append allocates so a
//! change that brings per-call allocations back fails here.

use h5::{CreateOptions, FormatBounds};
use ndarray::SliceInfoElem as S;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const DATASETS: usize = 20;
const PER: usize = 100;
const CHUNK: usize = 1024;

fn slice(start: usize, end: usize) -> [S; 1] {
    [S::Slice {
        start: start as isize,
        end: Some(end as isize),
        step: 1,
    }]
}

/// Heap blocks allocated per append over `rounds` rounds after `warm` rounds, and the values
/// read back.
fn allocations_per_append(bounds: FormatBounds, warm: usize, rounds: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("append.h5");
    let file = h5::File::create_with(
        &path,
        &h5::FileAccess::default(),
        &CreateOptions {
            bounds,
            ..Default::default()
        },
    )
    .unwrap();
    let dsets: Vec<h5::Dataset> = (0..DATASETS)
        .map(|j| {
            file.new_dataset::<i32>()
                .shape([0])
                .max_shape([None])
                .chunk([CHUNK])
                .create(&format!("d{j:02}"))
                .unwrap()
        })
        .collect();
    let value = |j: usize, i: usize| (j * 1_000_000 + i) as i32;
    let mut buf = vec![0i32; PER];
    let mut round = |k: usize| {
        let (lo, hi) = (k * PER, (k + 1) * PER);
        for (j, d) in dsets.iter().enumerate() {
            d.resize([hi]).unwrap();
            for (e, v) in buf.iter_mut().enumerate() {
                *v = value(j, lo + e);
            }
            d.write_slice(&buf, slice(lo, hi)).unwrap();
        }
    };
    for k in 0..warm {
        round(k);
    }
    let before = dhat::HeapStats::get().total_blocks;
    for k in warm..warm + rounds {
        round(k);
    }
    let after = dhat::HeapStats::get().total_blocks;
    let len = (warm + rounds) * PER;
    for (j, d) in dsets.iter().enumerate() {
        let got = d.read_vec::<i32>().unwrap();
        assert_eq!(got.len(), len);
        assert!(
            got.iter().enumerate().all(|(i, v)| *v == value(j, i)),
            "d{j:02}"
        );
    }
    drop(dsets);
    file.close().unwrap();
    (after - before) as f64 / (rounds * DATASETS) as f64
}

#[test]
fn steady_appends_allocate_little() {
    let _profiler = dhat::Profiler::builder().testing().build();
    // 25 rounds of 100 elements: 2.4 chunks of 1024 per dataset, so both resident-chunk
    // appends and appends that make a new chunk are counted.
    for bounds in [FormatBounds::default(), FormatBounds::LATEST] {
        let per = allocations_per_append(bounds, 5, 25);
        eprintln!("{bounds:?}: {per:.2} allocations per append");
        assert!(per <= 6.0, "{bounds:?}: {per:.2} allocations per append");
    }
}
