//! A flush inserts all of one dataset's new chunks into its index in one batch
//! (`WritableChunkIndex::insert_many`: array indexes protect each block once for the batch). A
//! property test over random sets of chunks, for every index kind that stores records: the file
//! whose chunks were all inserted by one flush has the same index (the same chunks, sizes and
//! filter masks, found at the same coordinates) and the same values as the file whose chunks were
//! inserted one flush each, and h5py reads both. Needs `scripts/setup-tools`; fails without it.

use std::collections::BTreeMap;
use std::path::Path;

use h5::{ChunkIndexKind, FileAccess, FormatBounds};
use h5_chunkcache::ChunkCacheConfig;
use h5_testkit::verify::{DatasetExpect, Expectations, check_files_with_h5py, digest_le};
use ndarray::SliceInfoElem;
use proptest::prelude::*;

const COLS: usize = 2;
const FILL: i32 = -3;
/// Rows of the fixed array's datasets: one-row chunks over three pages of 1024.
const FA_ROWS: usize = 2100;

/// Rows a chunk set is drawn from, per kind: for the arrays, the regions that reach their
/// index block, data blocks, super blocks and pages.
fn row_strategy(kind: ChunkIndexKind) -> BoxedStrategy<usize> {
    match kind {
        ChunkIndexKind::FixedArray => {
            prop_oneof![0usize..64, 1000usize..1100, 2040usize..FA_ROWS].boxed()
        }
        _ => prop_oneof![0usize..64, 1000usize..1100, 140_000usize..140_100].boxed(),
    }
}

/// Every chunk of the cache stays resident until the flush (one batch per dataset).
fn access() -> FileAccess {
    FileAccess::new().chunk_cache(ChunkCacheConfig {
        limit: 64 << 20,
        ..ChunkCacheConfig::default()
    })
}

fn row(r: usize) -> [SliceInfoElem; 2] {
    [
        SliceInfoElem::Slice {
            start: r as isize,
            end: Some(r as isize + 1),
            step: 1,
        },
        SliceInfoElem::Slice {
            start: 0,
            end: Some(COLS as isize),
            step: 1,
        },
    ]
}

fn values(r: usize, seed: i32) -> [i32; COLS] {
    [seed.wrapping_add(r as i32), seed ^ (r as i32)]
}

/// Writes the rows (one chunk each) into a new file, flushing after each row when `one_by_one`
/// (one record per insert) or once at the end (one batch).
fn write(
    path: &Path,
    kind: ChunkIndexKind,
    filtered: bool,
    rows: &BTreeMap<usize, i32>,
    one_by_one: bool,
) -> Result<usize, TestCaseError> {
    let fail = |what: &str, e: h5::Error| TestCaseError::fail(format!("{what}: {e}"));
    let options = h5::CreateOptions {
        bounds: match kind {
            ChunkIndexKind::BtreeV1 => FormatBounds::V18,
            _ => FormatBounds::V110,
        },
        ..Default::default()
    };
    let file = h5::File::create_with(path, &access(), &options).map_err(|e| fail("create", e))?;
    let max = match kind {
        ChunkIndexKind::FixedArray => Some(FA_ROWS),
        _ => None,
    };
    let extent = rows.keys().next_back().map_or(1, |r| r + 1);
    let mut b = file
        .root()
        .map_err(|e| fail("root", e))?
        .new_dataset::<i32>()
        .shape([extent, COLS])
        .max_shape([max, Some(COLS)])
        .chunk([1, COLS])
        .fill_value(FILL)
        .chunk_index(kind);
    if filtered {
        b = b.shuffle().deflate(1);
    }
    let ds = b.create("d").map_err(|e| fail("create dataset", e))?;
    for (&r, &seed) in rows {
        ds.write_slice(&values(r, seed), row(r))
            .map_err(|e| fail("write", e))?;
        if one_by_one {
            file.flush().map_err(|e| fail("flush", e))?;
        }
    }
    file.close().map_err(|e| fail("close", e))?;
    Ok(extent)
}

/// The stored chunks (offset, size, filter mask) and every row, as h5 reads them.
type Seen = (Vec<(Vec<u64>, u64, u32)>, Vec<i32>);

fn read(path: &Path, kind: ChunkIndexKind) -> Result<Seen, TestCaseError> {
    let fail = |what: &str, e: h5::Error| TestCaseError::fail(format!("{what}: {e}"));
    let f = h5::File::open(path).map_err(|e| fail("open", e))?;
    let ds = f.dataset("d").map_err(|e| fail("dataset", e))?;
    prop_assert_eq!(ds.chunk_index(), Some(kind));
    let mut chunks: Vec<(Vec<u64>, u64, u32)> = ds
        .iter_chunks()
        .map_err(|e| fail("chunks", e))?
        .map(|c| (c.offset, c.size, c.filter_mask))
        .collect();
    chunks.sort();
    let all: Vec<i32> = ds.read_vec::<i32>().map_err(|e| fail("read", e))?;
    Ok((chunks, all))
}

fn run(
    kind: ChunkIndexKind,
    filtered: bool,
    rows: &BTreeMap<usize, i32>,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("temp dir");
    let (single, batch) = (dir.path().join("single.h5"), dir.path().join("batch.h5"));
    let extent = write(&single, kind, filtered, rows, true)?;
    write(&batch, kind, filtered, rows, false)?;
    let (chunks_single, values_single) = read(&single, kind)?;
    let (chunks_batch, values_batch) = read(&batch, kind)?;
    // The same index: every written chunk found at its coordinates with its size and mask.
    prop_assert_eq!(&chunks_batch, &chunks_single);
    let offsets: Vec<Vec<u64>> = chunks_batch.iter().map(|c| c.0.clone()).collect();
    let expected_offsets: Vec<Vec<u64>> = rows.keys().map(|&r| vec![r as u64, 0]).collect();
    prop_assert_eq!(offsets, expected_offsets);
    // The values the rows were written with, fill values elsewhere.
    let mut expected = vec![FILL; extent * COLS];
    for (&r, &seed) in rows {
        expected[r * COLS..(r + 1) * COLS].copy_from_slice(&values(r, seed));
    }
    prop_assert_eq!(&values_batch, &expected);
    prop_assert_eq!(&values_single, &expected);
    let exp = Expectations::new().dataset(
        "/d",
        DatasetExpect::new("<i4", &[extent as u64, COLS as u64]).digest(digest_le(&expected)),
    );
    check_files_with_h5py(&[&single, &batch], &exp).map_err(TestCaseError::fail)?;
    Ok(())
}

fn chunk_set(kind: ChunkIndexKind) -> impl Strategy<Value = BTreeMap<usize, i32>> {
    prop::collection::btree_map(row_strategy(kind), any::<i32>(), 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    #[test]
    fn extensible_array_batches_match_single_inserts(
        filtered in any::<bool>(),
        rows in chunk_set(ChunkIndexKind::ExtensibleArray),
    ) {
        run(ChunkIndexKind::ExtensibleArray, filtered, &rows)?;
    }

    #[test]
    fn fixed_array_batches_match_single_inserts(
        filtered in any::<bool>(),
        rows in chunk_set(ChunkIndexKind::FixedArray),
    ) {
        run(ChunkIndexKind::FixedArray, filtered, &rows)?;
    }

    #[test]
    fn v2_btree_batches_match_single_inserts(
        filtered in any::<bool>(),
        rows in chunk_set(ChunkIndexKind::BtreeV2),
    ) {
        run(ChunkIndexKind::BtreeV2, filtered, &rows)?;
    }

    #[test]
    fn v1_btree_batches_match_single_inserts(
        filtered in any::<bool>(),
        rows in chunk_set(ChunkIndexKind::BtreeV1),
    ) {
        run(ChunkIndexKind::BtreeV1, filtered, &rows)?;
    }
}
