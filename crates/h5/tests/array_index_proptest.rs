//! Property test of the fixed and extensible array chunk indexes changed in place: random
//! sequences of chunk writes, overwrites, shrinks (which delete chunks), growths, flushes and
//! reopenings for writing, on filtered and unfiltered datasets, applied to a reference map and to
//! a file whose metadata cache is 1 KiB with the cache's per-call invariant checks on. Rows are
//! drawn from regions that reach the arrays' larger structures (fixed array pages; extensible
//! array data blocks, super blocks and paged data blocks). h5 re-reads the file after every
//! reopening and at the end, h5py after every closing (reopenings and the end). Needs
//! `scripts/setup-tools`; fails without it.

use std::collections::BTreeMap;
use std::path::Path;

use h5::{ChunkIndexKind, FileAccess, FormatBounds};
use h5_chunkcache::ChunkCacheConfig;
use h5_metacache::CacheConfig;
use h5_testkit::verify::{DatasetExpect, Expectations, check_with_h5py, digest_le};
use ndarray::SliceInfoElem;
use proptest::prelude::*;

const COLS: usize = 2;
const FILL: i32 = -1;
/// Rows of the fixed array (its maximum): 2100 one-row chunks, three pages of 1024.
const FA_ROWS: usize = 2100;

/// A change; rows are picked in `regions` of the dataset's kind.
#[derive(Clone, Debug)]
enum Op {
    /// Writes `n` rows from a row of region `region` at `offset` into it (growing first).
    Write {
        region: usize,
        offset: usize,
        n: usize,
        seed: i32,
    },
    /// Resizes to `sixteenths`/16 of the current rows (deleting the chunks cut off).
    Shrink {
        sixteenths: usize,
    },
    /// Grows by `n` rows (fill values where chunks were deleted).
    Grow {
        n: usize,
    },
    Flush,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0usize..3, 0usize..64, 1usize..6, any::<i32>())
            .prop_map(|(region, offset, n, seed)| Op::Write { region, offset, n, seed }),
        2 => (0usize..16).prop_map(|sixteenths| Op::Shrink { sixteenths }),
        1 => (1usize..50).prop_map(|n| Op::Grow { n }),
        2 => Just(Op::Flush),
        2 => Just(Op::Reopen),
    ]
}

/// First rows of the regions writes land in: for the fixed array its first, second and last
/// page; for the extensible array the index block and small data blocks, a super block's data
/// blocks, and a super block whose data blocks are paged.
fn regions(kind: ChunkIndexKind) -> [usize; 3] {
    match kind {
        ChunkIndexKind::FixedArray => [0, 1000, FA_ROWS - 64],
        _ => [0, 1000, 140_000],
    }
}

/// The reference: the dataset's rows and the values of the rows written since.
#[derive(Debug)]
struct Model {
    rows: usize,
    values: BTreeMap<usize, [i32; COLS]>,
}

impl Model {
    fn row(&self, r: usize) -> [i32; COLS] {
        self.values.get(&r).copied().unwrap_or([FILL; COLS])
    }

    fn all(&self) -> Vec<i32> {
        (0..self.rows).flat_map(|r| self.row(r)).collect()
    }

    /// Rows worth reading back: every written row and its neighbours, and the last row.
    fn sample(&self) -> Vec<usize> {
        let mut rows: Vec<usize> = self
            .values
            .keys()
            .flat_map(|&r| [r.saturating_sub(1), r, r + 1])
            .chain(self.rows.checked_sub(1))
            .filter(|&r| r < self.rows)
            .collect();
        rows.sort_unstable();
        rows.dedup();
        rows
    }
}

fn access() -> FileAccess {
    FileAccess::new()
        .metadata_invariant_checks(true)
        .metadata_cache(CacheConfig::fixed_size(1024))
        .chunk_cache(ChunkCacheConfig {
            limit: 16 * 1024,
            ..ChunkCacheConfig::default()
        })
}

fn rows(a: usize, b: usize) -> [SliceInfoElem; 2] {
    [
        SliceInfoElem::Slice {
            start: a as isize,
            end: Some(b as isize),
            step: 1,
        },
        SliceInfoElem::Slice {
            start: 0,
            end: Some(COLS as isize),
            step: 1,
        },
    ]
}

/// h5's view of the sampled rows equals the model's.
fn check_h5(ds: &h5::Dataset, m: &Model, when: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(ds.shape(), vec![m.rows, COLS], "{}", when);
    for r in m.sample() {
        let got: Vec<i32> = ds
            .read_slice::<i32>(rows(r, r + 1))
            .map_err(|e| TestCaseError::fail(format!("{when}: reading row {r}: {e}")))?
            .into_iter()
            .collect();
        prop_assert_eq!(got, m.row(r).to_vec(), "{}: row {}", when, r);
    }
    Ok(())
}

fn run(kind: ChunkIndexKind, filtered: bool, ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("arrays.h5");
    let fail = |what: &str, e: h5::Error| TestCaseError::fail(format!("{what}: {e}"));
    let max = match kind {
        ChunkIndexKind::FixedArray => Some(FA_ROWS),
        _ => None,
    };
    let limit = max.unwrap_or(usize::MAX);
    let options = h5::CreateOptions {
        bounds: FormatBounds::V110,
        ..Default::default()
    };
    let mut m = Model {
        rows: 8,
        values: BTreeMap::new(),
    };
    let mut file =
        h5::File::create_with(&path, &access(), &options).map_err(|e| fail("create", e))?;
    let mut b = file
        .root()
        .map_err(|e| fail("root", e))?
        .new_dataset::<i32>()
        .shape([m.rows, COLS])
        .max_shape([max, Some(COLS)])
        .chunk([1, COLS])
        .fill_value(FILL)
        .chunk_index(kind);
    if filtered {
        b = b.shuffle().deflate(1);
    }
    let mut ds = b.create("d").map_err(|e| fail("create dataset", e))?;
    let starts = regions(kind);
    for (step, op) in ops.iter().enumerate() {
        let when = format!("step {step} {op:?}");
        match op {
            Op::Write {
                region,
                offset,
                n,
                seed,
            } => {
                let start = (starts[*region] + offset).min(limit - 1);
                let end = (start + n).min(limit);
                if end > m.rows {
                    ds.resize([end, COLS]).map_err(|e| fail(&when, e))?;
                    m.rows = end;
                }
                let mut v = Vec::new();
                for r in start..end {
                    let row = [seed.wrapping_add(r as i32), seed ^ (r as i32)];
                    m.values.insert(r, row);
                    v.extend(row);
                }
                ds.write_slice(&v, rows(start, end))
                    .map_err(|e| fail(&when, e))?;
            }
            Op::Shrink { sixteenths } => {
                let to = m.rows * sixteenths / 16;
                ds.resize([to, COLS]).map_err(|e| fail(&when, e))?;
                m.rows = to;
                m.values.retain(|r, _| *r < to);
            }
            Op::Grow { n } => {
                let to = (m.rows + n).min(limit);
                ds.resize([to, COLS]).map_err(|e| fail(&when, e))?;
                m.rows = to;
            }
            Op::Flush => file.flush().map_err(|e| fail(&when, e))?,
            Op::Reopen => {
                file.close().map_err(|e| fail(&when, e))?;
                check_h5py(&path, &m, &when)?;
                file = h5::File::open_rw_with(&path, &access()).map_err(|e| fail(&when, e))?;
                ds = file.dataset("d").map_err(|e| fail(&when, e))?;
                check_h5(&ds, &m, &when)?;
            }
        }
    }
    check_h5(&ds, &m, "before closing")?;
    file.close().map_err(|e| fail("close", e))?;
    let f = h5::File::open_with(&path, &access()).map_err(|e| fail("open", e))?;
    let ds = f.dataset("d").map_err(|e| fail("open dataset", e))?;
    prop_assert_eq!(ds.chunk_index(), Some(kind));
    check_h5(&ds, &m, "after closing")?;
    check_h5py(&path, &m, "at the end")
}

/// h5py's view of the closed file equals the model's.
fn check_h5py(path: &Path, m: &Model, when: &str) -> Result<(), TestCaseError> {
    let exp = Expectations::new().dataset(
        "/d",
        DatasetExpect::new("<i4", &[m.rows as u64, COLS as u64]).digest(digest_le(&m.all())),
    );
    check_with_h5py(path, &exp)
        .map_err(|e| TestCaseError::fail(format!("{when}: h5py disagrees:\n{e}")))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn fixed_arrays_match_the_model(filtered in any::<bool>(), ops in prop::collection::vec(op(), 1..24)) {
        run(ChunkIndexKind::FixedArray, filtered, &ops)?;
    }

    #[test]
    fn extensible_arrays_match_the_model(filtered in any::<bool>(), ops in prop::collection::vec(op(), 1..24)) {
        run(ChunkIndexKind::ExtensibleArray, filtered, &ops)?;
    }
}
