//! Issue 11: the new-style structures (v2 B-trees, fractal heaps, dense links and attributes,
//! the v2 B-tree chunk index) are changed one entry at a time, so a flush writes what a change
//! touched, not the structure. Bytes are counted by the `Metrics` storage decorator.

use std::sync::Arc;

use h5::{FileAccess, FormatBounds};
use h5_io::{FileStorage, MemoryStorage, Metrics, OpenMode, Storage};
use h5_metacache::CacheConfig;
use h5_testkit::verify::run_python;
use ndarray::SliceInfoElem as S;

/// The most a flush after one small change may write.
const FLUSH_BUDGET: u64 = 64 * 1024;

use crate::metered;
use metered::bytes_of;

fn latest_in_memory() -> (Arc<Metrics<MemoryStorage>>, h5::File) {
    metered::in_memory(FormatBounds::LATEST)
}

/// Adding one link to a dense group of 100,000 links writes at most 64 KiB.
#[test]
fn one_link_added_to_a_group_of_100000_links() {
    let (storage, file) = latest_in_memory();
    let g = file.create_group("big").unwrap();
    for i in 0..100_000 {
        g.link_soft(&format!("link{i:06}"), "/big").unwrap();
    }
    assert_eq!(g.is_dense(), Some(true));
    let n = bytes_of(&storage, &file, || {
        g.link_soft("one more", "/big").unwrap();
    });
    println!("one link added to 100,000: {n} bytes written by the flush");
    assert!(n <= FLUSH_BUDGET, "{n} bytes written");
    assert_eq!(g.member_names().unwrap().len(), 100_001);
}

/// Adding one attribute to an object with 10,000 dense attributes writes at most 64 KiB.
#[test]
fn one_attribute_added_to_an_object_with_10000() {
    let (storage, file) = latest_in_memory();
    let g = file.create_group("attrs").unwrap();
    for i in 0..10_000u32 {
        g.write_attr_scalar(&format!("a{i:05}"), i).unwrap();
    }
    let n = bytes_of(&storage, &file, || {
        g.write_attr_scalar("one more", 7u32).unwrap();
    });
    println!("one attribute added to 10,000: {n} bytes written by the flush");
    assert!(n <= FLUSH_BUDGET, "{n} bytes written");
    assert_eq!(g.attr_names().unwrap().len(), 10_001);
}

/// Appending one chunk to a v2 B-tree indexed dataset of 100,000 chunks writes at most 64 KiB.
#[test]
fn one_chunk_appended_to_a_btree_indexed_dataset_of_100000_chunks() {
    let (storage, file) = latest_in_memory();
    let data: Vec<i32> = (0..100_000).collect();
    let ds = file
        .root()
        .unwrap()
        .new_dataset::<i32>()
        .shape([1000, 100])
        .max_shape([None, None])
        .chunk([1, 1])
        .create("chunks")
        .unwrap();
    ds.write(&data).unwrap();
    assert_eq!(ds.chunk_index(), Some(h5::ChunkIndexKind::BtreeV2));
    let n = bytes_of(&storage, &file, || {
        ds.resize([1001, 100]).unwrap();
        ds.write_points(&[vec![1000, 0]], &[-1i32]).unwrap();
    });
    println!("one chunk appended to 100,000: {n} bytes written by the flush");
    assert!(n <= FLUSH_BUDGET, "{n} bytes written");
    let back: Vec<i32> = ds.read_vec().unwrap();
    assert_eq!(back[100_000], -1);
    assert_eq!(&back[..100_000], &data[..]);
}

/// A 1,000,000-chunk dataset with two unlimited dimensions written by h5py (v2 B-tree index):
/// opening it and reading one chunk reads at most 256 KiB (the lookup descends the tree, one
/// node per level); reading every chunk keeps the metadata cache within its configured
/// maximum.
#[test]
fn a_million_chunk_btree_index_written_by_h5py() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("million.h5");
    run_python(
        include_str!("scripts/bt2_million_chunks.py"),
        &[path.to_str().unwrap()],
    );
    let value = |i: usize, j: usize| ((1000 * i + j) % 251) as u8;

    let storage = Arc::new(Metrics::new(
        FileStorage::open(&path, OpenMode::ReadOnly).unwrap(),
    ));
    let f = h5::File::from_storage(
        Arc::clone(&storage) as Arc<dyn Storage>,
        &FileAccess::default(),
        None,
    )
    .unwrap();
    let ds = f.dataset("m").unwrap();
    assert_eq!(ds.chunk_index(), Some(h5::ChunkIndexKind::BtreeV2));
    let one = ds
        .read_slice::<u8>([
            S::Slice {
                start: 777,
                end: Some(778),
                step: 1,
            },
            S::Slice {
                start: 333,
                end: Some(334),
                step: 1,
            },
        ])
        .unwrap();
    assert_eq!(
        one.iter().copied().collect::<Vec<u8>>(),
        vec![value(777, 333)]
    );
    let read = storage.snapshot().bytes_read;
    println!("open + one chunk of 1,000,000: {read} bytes read");
    assert!(read <= 256 * 1024, "{read} bytes read");

    // Every chunk (its stored bytes, found through the index: the chunk cache's bookkeeping
    // of a million one-byte chunks would only slow the test), through a metadata cache of
    // 1 MiB.
    let max = 1 << 20;
    let access = FileAccess::default().metadata_cache(CacheConfig::fixed_size(max));
    let f = h5::File::open_with(&path, &access).unwrap();
    let ds = f.dataset("m").unwrap();
    for i in 0..1000 {
        for j in 0..1000 {
            let (mask, bytes) = ds
                .read_chunk(&[i, j])
                .unwrap()
                .expect("every chunk is written");
            assert_eq!((mask, bytes), (0, vec![value(i as usize, j as usize)]));
        }
    }
    let stats = f.metadata_cache_stats().unwrap();
    println!(
        "every chunk of 1,000,000 read: metadata cache peak {} bytes in {} entries (maximum {max})",
        stats.max.index_size, stats.max.index_len
    );
    assert!(stats.max.index_size <= max, "peak {}", stats.max.index_size);
}

/// The changes `dense_changes.py change` makes, made with h5 (see the script).
fn change_with_h5(path: &std::path::Path, n: usize) {
    let f = h5::File::open_rw(path).unwrap();
    let g = f.group("g").unwrap();
    let a = f.group("a").unwrap();
    for i in 0..n {
        match i % 6 {
            0 => g.link_soft(&format!("n{i}"), "/a").unwrap(),
            1 => g.unlink(&g.member_names().unwrap()[0]).unwrap(),
            2 => g
                .move_link(&g.member_names().unwrap()[0], &format!("r{i}"))
                .unwrap(),
            3 => a.write_attr_scalar(&format!("x{i}"), i as i32).unwrap(),
            4 => a.delete_attr(&a.attr_names().unwrap()[0]).unwrap(),
            _ => a
                .rename_attr(&a.attr_names().unwrap()[0], &format!("y{i}"))
                .unwrap(),
        }
    }
    f.close().unwrap();
}

/// What h5py reads in a file: link names and targets of /g, attribute names and values of /a.
fn read_with_h5py(path: &std::path::Path) -> String {
    run_python(
        "import sys, json, h5py\n\
         f = h5py.File(sys.argv[1], 'r')\n\
         g, a = f['g'], f['a']\n\
         links = {k: g.get(k, getlink=True).path for k in g.keys()}\n\
         attrs = {k: int(a.attrs[k]) for k in a.attrs.keys()}\n\
         print(json.dumps({'links': links, 'attrs': attrs}, sort_keys=True))",
        &[path.to_str().unwrap()],
    )
}

/// A group and the dense attributes of a file libhdf5 wrote, changed 1,000 times (links and
/// attributes added, removed, renamed): the file ends no larger than libhdf5 leaves it after
/// the same changes, h5py reads the same links and values in both, h5dump reads h5's.
#[test]
fn a_thousand_changes_of_dense_storage_leave_the_file_no_larger_than_libhdf5() {
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("h5.h5");
    let theirs = dir.path().join("h5py.h5");
    let script = include_str!("scripts/dense_changes.py");
    run_python(script, &["make", ours.to_str().unwrap()]);
    std::fs::copy(&ours, &theirs).unwrap();
    let before = std::fs::metadata(&ours).unwrap().len();
    let n = 1000;
    change_with_h5(&ours, n);
    run_python(
        script,
        &["change", theirs.to_str().unwrap(), &n.to_string()],
    );
    let (mine, libhdf5) = (
        std::fs::metadata(&ours).unwrap().len(),
        std::fs::metadata(&theirs).unwrap().len(),
    );
    println!("{n} changes: {before} bytes before, h5 {mine}, libhdf5 {libhdf5}");
    // The closing flush reuses freed space at once (the rollback journal keeps its old bytes,
    // docs/design.md §6.4), as libhdf5 does: the blocks it writes anew (the heaps' free-space
    // section lists) take their old copies' space.
    assert!(mine <= libhdf5, "h5 left {mine} bytes, libhdf5 {libhdf5}");
    let seen = read_with_h5py(&ours);
    assert_eq!(seen, read_with_h5py(&theirs));
    let counts = |json: &str| {
        let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        (
            v["links"].as_object().unwrap().len(),
            v["attrs"].as_object().unwrap().len(),
            v["attrs"]["x999"].as_i64(),
        )
    };
    // 166 whole rounds of six changes, then a link added, removed, renamed and an attribute
    // added.
    assert_eq!(counts(&seen), (40, 31, Some(999)), "{seen}");
    h5_testkit::verify::h5dump(&[], &ours).unwrap_or_else(|e| panic!("h5dump: {e}"));
    // And libhdf5 goes on changing what h5 wrote (its free-space managers included).
    run_python(script, &["change", ours.to_str().unwrap(), "60", "6000"]);
    let again = read_with_h5py(&ours);
    assert_eq!(counts(&again).0, 40, "{again}");
    assert_eq!(counts(&again).1, 31, "{again}");
    h5_testkit::verify::h5dump(&[], &ours).unwrap_or_else(|e| panic!("h5dump: {e}"));
}
