//! A chunk index that knows the box its stored chunks lie in, so that the lookup of a chunk past
//! it (each new chunk of an appended dataset) answers "not allocated" without descending the
//! index. libhdf5 asks its index for every chunk its cache does not hold; for an append that is a
//! B-tree or array walk per new chunk, and with a thousand datasets appended in turn the walked
//! nodes have often left the metadata cache.
//!
//! The box is known only when the index starts empty in this session (a new dataset, or an
//! existing one that never had chunks) and every change of it goes through this wrapper: an
//! index read from the file may hold chunks anywhere (past the extent too), so its box is
//! unknown and every lookup goes to the index.

use std::sync::Mutex;

use h5_chunkcache::ChunkCoord;

use super::super::chunks::{AtFlush, WritableChunkIndex};
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::ChunkRecord;

/// Exclusive upper bounds of the scaled coordinates of every chunk the index holds, one per
/// dimension (all zero: the index is empty).
///
/// Invariant: every chunk inserted into the index through this wrapper has, in each dimension,
/// a scaled coordinate below the bound. Removals leave the box as it is (it stays a box around
/// the chunks; only its tightness is lost).
#[derive(Debug)]
pub(crate) struct BoundedIndex {
    inner: std::sync::Arc<dyn WritableChunkIndex>,
    bound: Mutex<Vec<u64>>,
}

impl BoundedIndex {
    /// Wraps `inner`, an index of rank `rank` that holds no chunk yet.
    pub(crate) fn empty(inner: std::sync::Arc<dyn WritableChunkIndex>, rank: usize) -> Self {
        Self {
            inner,
            bound: Mutex::new(vec![0; rank]),
        }
    }

    /// Grows the box around the chunks at `coords`.
    fn grow<'c>(&self, coords: impl Iterator<Item = &'c [u64]>) -> Result<()> {
        let mut bound = self.bound.lock().map_err(|_| Error::Poisoned)?;
        for scaled in coords {
            if bound.len() == scaled.len() {
                for (b, s) in bound.iter_mut().zip(scaled) {
                    *b = (*b).max(s.saturating_add(1));
                }
            } else {
                // Not expected (the index has one rank); stop filtering rather than guess.
                *bound = Vec::new();
                break;
            }
        }
        Ok(())
    }

    /// Whether the chunk at `scaled` lies in the box (so the index may hold it). A rank that
    /// differs from the index's is left to the index to judge.
    fn may_hold(bound: &[u64], scaled: &[u64]) -> bool {
        bound.len() != scaled.len() || scaled.iter().zip(bound).all(|(s, b)| s < b)
    }
}

impl AtFlush for BoundedIndex {
    fn flush(&self, file: &FileShared) -> Result<()> {
        self.inner.flush(file)
    }

    fn dataset_header(&self) -> Option<u64> {
        self.inner.dataset_header()
    }
}

impl WritableChunkIndex for BoundedIndex {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>> {
        let asked: Vec<bool> = {
            let bound = self.bound.lock().map_err(|_| Error::Poisoned)?;
            coords
                .iter()
                .map(|c| Self::may_hold(&bound, c.as_slice()))
                .collect()
        };
        if asked.iter().all(|a| *a) {
            return self.inner.lookup(coords);
        }
        let inside: Vec<ChunkCoord> = coords
            .iter()
            .zip(&asked)
            .filter(|(_, a)| **a)
            .map(|(c, _)| *c)
            .collect();
        let mut found = if inside.is_empty() {
            Vec::new()
        } else {
            self.inner.lookup(&inside)?
        }
        .into_iter();
        let out = asked
            .iter()
            .map(|a| if *a { found.next().flatten() } else { None })
            .collect();
        Ok(out)
    }

    fn insert(&self, scaled: &[u64], record: ChunkRecord) -> Result<()> {
        // The box grows before the index changes: a failed insert leaves it larger, never too
        // small.
        self.grow(std::iter::once(scaled))?;
        self.inner.insert(scaled, record)
    }

    fn insert_many(&self, records: &[(ChunkCoord, ChunkRecord)]) -> Result<()> {
        self.grow(records.iter().map(|(c, _)| c.as_slice()))?;
        self.inner.insert_many(records)
    }

    fn remove(&self, scaled: &[u64]) -> Result<()> {
        self.inner.remove(scaled)
    }

    fn free(&self, file: &FileShared) -> Result<()> {
        self.inner.free(file)
    }

    fn computed(&self, scaled: &[u64]) -> Option<h5_chunkcache::DiskLocation> {
        self.inner.computed(scaled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An index of records in a table that counts the coordinates it is asked for.
    #[derive(Debug, Default)]
    struct Table {
        records: Mutex<Vec<(Vec<u64>, ChunkRecord)>>,
        asked: AtomicUsize,
    }

    impl AtFlush for Table {}

    impl WritableChunkIndex for Table {
        fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>> {
            self.asked.fetch_add(coords.len(), Ordering::Relaxed);
            let t = self.records.lock().unwrap();
            Ok(coords
                .iter()
                .map(|c| {
                    t.iter()
                        .find(|(s, _)| s.as_slice() == c.as_slice())
                        .map(|(_, r)| *r)
                })
                .collect())
        }

        fn insert(&self, scaled: &[u64], record: ChunkRecord) -> Result<()> {
            let mut t = self.records.lock().unwrap();
            t.retain(|(s, _)| s.as_slice() != scaled);
            t.push((scaled.to_vec(), record));
            Ok(())
        }

        fn remove(&self, scaled: &[u64]) -> Result<()> {
            self.records.lock().unwrap().retain(|(s, _)| s != scaled);
            Ok(())
        }

        fn free(&self, _: &FileShared) -> Result<()> {
            Ok(())
        }
    }

    fn rec(addr: u64) -> ChunkRecord {
        ChunkRecord {
            addr,
            size: 16,
            filter_mask: 0,
        }
    }

    fn c(s: &[u64]) -> ChunkCoord {
        ChunkCoord::new(s).unwrap()
    }

    #[test]
    fn chunks_past_the_box_are_absent_without_asking_the_index() {
        let table = Arc::new(Table::default());
        let b = BoundedIndex::empty(Arc::clone(&table) as Arc<dyn WritableChunkIndex>, 2);
        // Empty: nothing is asked.
        assert_eq!(b.lookup(&[c(&[0, 0]), c(&[3, 1])]).unwrap(), [None, None]);
        assert_eq!(table.asked.load(Ordering::Relaxed), 0);
        b.insert(&[2, 0], rec(100)).unwrap();
        b.insert(&[0, 3], rec(200)).unwrap();
        // The box is [0, 3) x [0, 4): (2, 3) is asked (and absent), (3, 0) and (0, 4) are not.
        let got = b
            .lookup(&[c(&[3, 0]), c(&[2, 0]), c(&[2, 3]), c(&[0, 4]), c(&[0, 3])])
            .unwrap();
        assert_eq!(got, [None, Some(rec(100)), None, None, Some(rec(200))]);
        assert_eq!(table.asked.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn a_removed_chunk_keeps_the_box_and_is_found_absent_by_the_index() {
        let table = Arc::new(Table::default());
        let b = BoundedIndex::empty(Arc::clone(&table) as Arc<dyn WritableChunkIndex>, 1);
        b.insert(&[5], rec(1)).unwrap();
        b.remove(&[5]).unwrap();
        assert_eq!(b.lookup(&[c(&[5])]).unwrap(), [None]);
        assert_eq!(table.asked.load(Ordering::Relaxed), 1);
        b.insert(&[5], rec(2)).unwrap();
        assert_eq!(b.lookup(&[c(&[5]), c(&[6])]).unwrap(), [Some(rec(2)), None]);
    }

    #[test]
    fn another_rank_is_left_to_the_index() {
        let table = Arc::new(Table::default());
        let b = BoundedIndex::empty(Arc::clone(&table) as Arc<dyn WritableChunkIndex>, 1);
        table.insert(&[0, 0], rec(9)).unwrap();
        assert_eq!(b.lookup(&[c(&[0, 0])]).unwrap(), [Some(rec(9))]);
    }
}
