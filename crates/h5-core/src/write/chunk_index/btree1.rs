//! The version 1 B-tree chunk index of a written dataset behind [`WritableChunkIndex`]: the
//! tree is changed in place, one node at a time, through the metadata cache
//! (`crate::btree1::chunk`); nothing is laid out at flush.

use h5_chunkcache::ChunkCoord;

use crate::btree1::chunk::ChunkBtree;
use crate::error::Result;
use crate::file::FileShared;
use crate::layouts::ChunkRecord;
use crate::write::chunks::{AtFlush, ChunkSpace, WritableChunkIndex};

/// A dataset's version 1 B-tree chunk index and the file space of its chunks.
#[derive(Debug)]
pub(crate) struct BtreeV1Chunks {
    /// The tree (its root fixed: the layout message points at it).
    pub(crate) tree: ChunkBtree,
    /// Where the chunks' space is freed when the dataset is deleted.
    pub(crate) space: ChunkSpace,
}

impl AtFlush for BtreeV1Chunks {}

impl WritableChunkIndex for BtreeV1Chunks {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>> {
        let scaled: Vec<&[u64]> = coords.iter().map(ChunkCoord::as_slice).collect();
        self.tree.lookup(&scaled)
    }

    fn insert(&self, scaled: &[u64], record: ChunkRecord) -> Result<()> {
        self.tree.insert(scaled, record)
    }

    fn remove(&self, scaled: &[u64]) -> Result<()> {
        self.tree.remove(scaled).map(|_| ())
    }

    fn free(&self, _file: &FileShared) -> Result<()> {
        for r in self.tree.delete()? {
            self.space.raw_free(r.addr, r.size)?;
        }
        Ok(())
    }
}
