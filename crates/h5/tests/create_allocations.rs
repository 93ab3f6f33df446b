//! Heap allocations of W5's creates (h5-bench: one group of many one-element datasets, each
//! made by `create_with_data`), counted by dhat's global allocator. The group is past its
//! compact-link limit (dense links: a fractal heap and a v2 B-tree name index) before counting
//! starts, so the counts bound what one create into dense storage allocates: a change that
//! brings per-record or per-call allocations back fails here.

use h5::{CreateOptions, FormatBounds};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn name(i: usize) -> String {
    format!("d{i:05}")
}

fn value(i: usize) -> i64 {
    i as i64 * 7 + 3
}

/// Heap blocks allocated per create over `counted` creates after `warm` creates, and the
/// members read back by name.
fn allocations_per_create(bounds: FormatBounds, warm: usize, counted: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("create.h5");
    let file = h5::File::create_with(
        &path,
        &h5::FileAccess::default(),
        &CreateOptions {
            bounds,
            ..Default::default()
        },
    )
    .unwrap();
    let g = file.create_group("g").unwrap();
    let create = |i: usize| {
        g.new_dataset::<i64>()
            .create_with_data(&name(i), &[value(i)])
            .unwrap();
    };
    (0..warm).for_each(create);
    let before = dhat::HeapStats::get().total_blocks;
    (warm..warm + counted).for_each(create);
    let after = dhat::HeapStats::get().total_blocks;
    drop(g);
    file.close().unwrap();
    let file = h5::File::open(&path).unwrap();
    let g = file.group("g").unwrap();
    assert_eq!(g.len().unwrap(), warm + counted);
    for i in (0..warm + counted).step_by(97) {
        let got = g.dataset(&name(i)).unwrap().read_vec::<i64>().unwrap();
        assert_eq!(got, vec![value(i)], "{}", name(i));
    }
    (after - before) as f64 / counted as f64
}

#[test]
fn creates_into_dense_links_allocate_little() {
    let _profiler = dhat::Profiler::builder().testing().build();
    for bounds in [FormatBounds::default(), FormatBounds::LATEST] {
        let per = allocations_per_create(bounds, 300, 1000);
        eprintln!("{bounds:?}: {per:.1} allocations per create");
        assert!(per <= 70.0, "{bounds:?}: {per:.1} allocations per create");
    }
}
