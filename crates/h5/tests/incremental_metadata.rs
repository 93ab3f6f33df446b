//! Issue 11: the new-style structures (v2 B-trees, fractal heaps, dense links and attributes,
//! the v2 B-tree chunk index) are changed one entry at a time, so a flush writes what a change
//! touched, not the structure. Bytes are counted by the `Metrics` storage decorator.

use std::sync::Arc;

use h5::{CreateOptions, FileAccess, FormatBounds};
use h5_io::{MemoryStorage, Metrics, Storage};

/// The most a flush after one small change may write.
const FLUSH_BUDGET: u64 = 64 * 1024;

fn latest_in_memory() -> (Arc<Metrics<MemoryStorage>>, h5::File) {
    let storage = Arc::new(Metrics::new(MemoryStorage::new()));
    let file = h5::File::create_in(
        Arc::clone(&storage) as Arc<dyn Storage>,
        &FileAccess::default(),
        &CreateOptions {
            bounds: FormatBounds::LATEST,
            ..CreateOptions::default()
        },
        None,
    )
    .unwrap();
    (storage, file)
}

/// Bytes written by `change` followed by a flush.
fn bytes_of(storage: &Metrics<MemoryStorage>, file: &h5::File, change: impl FnOnce()) -> u64 {
    file.flush().unwrap();
    let before = storage.snapshot();
    change();
    file.flush().unwrap();
    storage.snapshot().since(&before).bytes_written
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
    let mut ds = file
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
