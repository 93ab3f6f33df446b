//! The v2 B-tree chunk index behind [`WritableChunkIndex`], for now as before: an ordered
//! table of every chunk record kept while the file is open and laid out below the fixed header
//! at the flush that follows a change. The in-place B-tree implementation replaces this
//! adapter; nothing else depends on it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use h5_chunkcache::ChunkCoord;

use super::ArrayIndex;
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::ChunkRecord;
use crate::write::chunks::{AtFlush, ChunkSpace, WritableChunkIndex};

/// Which B-tree the table is laid out as.
#[derive(Debug)]
pub(crate) enum TableShape {
    /// A v2 B-tree under a fixed header.
    BtreeV2(ArrayIndex),
}

/// The chunks of one dataset by element offset (row-major order of their scaled
/// coordinates), laid out as a B-tree at flush.
#[derive(Debug)]
pub(crate) struct TableIndex {
    space: ChunkSpace,
    shape: TableShape,
    chunk_dims: Vec<u64>,
    records: Mutex<BTreeMap<Vec<u64>, ChunkRecord>>,
    /// Blocks of the last layout below the fixed root or header.
    placed: Mutex<Vec<super::Placed>>,
    /// Flush dependencies of the last layout.
    deps: Mutex<Vec<super::Dep>>,
    dirty: Mutex<bool>,
}

impl TableIndex {
    /// An empty table (laid out at the next flush).
    pub(crate) fn new(space: ChunkSpace, shape: TableShape, chunk_dims: Vec<u64>) -> Self {
        TableIndex {
            space,
            shape,
            chunk_dims,
            records: Mutex::new(BTreeMap::new()),
            placed: Mutex::new(Vec::new()),
            deps: Mutex::new(Vec::new()),
            dirty: Mutex::new(true),
        }
    }

    /// A table holding `records` (by scaled coordinates) that matches the file.
    pub(crate) fn with_records(
        space: ChunkSpace,
        shape: TableShape,
        chunk_dims: Vec<u64>,
        records: impl IntoIterator<Item = (Vec<u64>, ChunkRecord)>,
        placed: Vec<super::Placed>,
    ) -> Self {
        let records = records
            .into_iter()
            .map(|(scaled, r)| {
                let off = scaled.iter().zip(&chunk_dims).map(|(s, d)| s * d).collect();
                (off, r)
            })
            .collect();
        TableIndex {
            space,
            shape,
            chunk_dims,
            records: Mutex::new(records),
            placed: Mutex::new(placed),
            deps: Mutex::new(Vec::new()),
            dirty: Mutex::new(false),
        }
    }

    fn offsets(&self, scaled: &[u64]) -> Vec<u64> {
        scaled
            .iter()
            .zip(&self.chunk_dims)
            .map(|(i, d)| i * d)
            .collect()
    }

    fn mark_dirty(&self) -> Result<()> {
        *self.dirty.lock().map_err(|_| Error::Poisoned)? = true;
        Ok(())
    }
}

impl AtFlush for TableIndex {
    /// Writes the index into the cache when the table changed since the last layout.
    fn flush(&self, file: &FileShared) -> Result<()> {
        {
            let mut d = self.dirty.lock().map_err(|_| Error::Poisoned)?;
            if !*d {
                return Ok(());
            }
            *d = false;
        }
        let old_deps = std::mem::take(&mut *self.deps.lock().map_err(|_| Error::Poisoned)?);
        super::undepend(file, &old_deps)?;
        let old = std::mem::take(&mut *self.placed.lock().map_err(|_| Error::Poisoned)?);
        super::remove(file, old)?;
        match &self.shape {
            TableShape::BtreeV2(ix) => {
                let records = self.records.lock().map_err(|_| Error::Poisoned)?.clone();
                let out = ix.lay_out(file, &records)?;
                *self.placed.lock().map_err(|_| Error::Poisoned)? = out.placed;
                *self.deps.lock().map_err(|_| Error::Poisoned)? = out.deps;
                Ok(())
            }
        }
    }
}

impl WritableChunkIndex for TableIndex {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>> {
        let records = self.records.lock().map_err(|_| Error::Poisoned)?;
        Ok(coords
            .iter()
            .map(|c| records.get(&self.offsets(c.as_slice())).copied())
            .collect())
    }

    fn insert(&self, scaled: &[u64], record: ChunkRecord) -> Result<()> {
        self.records
            .lock()
            .map_err(|_| Error::Poisoned)?
            .insert(self.offsets(scaled), record);
        self.mark_dirty()
    }

    fn remove(&self, scaled: &[u64]) -> Result<()> {
        self.records
            .lock()
            .map_err(|_| Error::Poisoned)?
            .remove(&self.offsets(scaled));
        self.mark_dirty()
    }

    /// Frees every chunk and every index block below the header (which is left unused).
    fn free(&self, file: &FileShared) -> Result<()> {
        let records = std::mem::take(&mut *self.records.lock().map_err(|_| Error::Poisoned)?);
        for r in records.values() {
            self.space.raw_free(r.addr, r.size)?;
        }
        let deps = std::mem::take(&mut *self.deps.lock().map_err(|_| Error::Poisoned)?);
        super::undepend(file, &deps)?;
        let placed = std::mem::take(&mut *self.placed.lock().map_err(|_| Error::Poisoned)?);
        super::remove(file, placed)?;
        *self.dirty.lock().map_err(|_| Error::Poisoned)? = false;
        Ok(())
    }
}
