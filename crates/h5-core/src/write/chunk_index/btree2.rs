//! The v2 B-tree chunk index of a written dataset behind [`WritableChunkIndex`]: records are
//! inserted, updated and removed in the tree itself, one node at a time through the metadata
//! cache (`bt2.rs`, over `crate::btree2`); nothing is laid out at flush.
//!
//! The tree's changes go through a [`crate::access::Session`] on the file, which the index
//! reaches through a `Weak` (the file owns the chunk cache that owns this index). Changes the
//! chunk cache makes while the file is being dropped (its last flush, when the `Weak` no longer
//! upgrades) are queued and applied by that flush ([`AtFlush::flush`]); lookups see them.

use std::sync::{Mutex, Weak};

use h5_chunkcache::ChunkCoord;

use super::ChunkBtree;
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::ChunkRecord;
use crate::write::chunks::{AtFlush, ChunkSpace, WritableChunkIndex};

/// A change waiting for the file: scaled coordinates and the record (absolute address), `None`
/// for a removal.
type Pending = (Vec<u64>, Option<ChunkRecord>);

/// A dataset's v2 B-tree chunk index and the file space of its chunks.
#[derive(Debug)]
pub(crate) struct BtreeV2Chunks {
    tree: ChunkBtree,
    file: Weak<FileShared>,
    space: ChunkSpace,
    pending: Mutex<Vec<Pending>>,
}

impl BtreeV2Chunks {
    /// The index `tree` of `file` (whose header exists).
    pub(crate) fn new(tree: ChunkBtree, file: Weak<FileShared>, space: ChunkSpace) -> Self {
        BtreeV2Chunks {
            tree,
            file,
            space,
            pending: Mutex::new(Vec::new()),
        }
    }

    fn relative(&self, r: &ChunkRecord) -> Result<ChunkRecord> {
        Ok(ChunkRecord {
            addr: r
                .addr
                .checked_sub(self.space.base)
                .ok_or_else(|| Error::Unsupported("a chunk below the base address".into()))?,
            ..*r
        })
    }

    /// Applies one change to the tree (`r`: absolute address; `None`: removal).
    fn apply(&self, file: &FileShared, scaled: &[u64], r: Option<ChunkRecord>) -> Result<()> {
        match r {
            Some(r) => self.tree.upsert(file, scaled, &self.relative(&r)?),
            None => self.tree.remove(file, scaled).map(|_| ()),
        }
    }

    /// Applies the change now, or queues it while the file is being dropped.
    fn set(&self, scaled: &[u64], r: Option<ChunkRecord>) -> Result<()> {
        match self.file.upgrade() {
            Some(file) => self.apply(&file, scaled, r),
            None => {
                self.pending
                    .lock()
                    .map_err(|_| Error::Poisoned)?
                    .push((scaled.to_vec(), r));
                Ok(())
            }
        }
    }
}

impl AtFlush for BtreeV2Chunks {
    /// Applies the changes made while the file was being dropped.
    fn flush(&self, file: &FileShared) -> Result<()> {
        let pending = std::mem::take(&mut *self.pending.lock().map_err(|_| Error::Poisoned)?);
        for (scaled, r) in pending {
            self.apply(file, &scaled, r)?;
        }
        Ok(())
    }
}

impl WritableChunkIndex for BtreeV2Chunks {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>> {
        let pending = self.pending.lock().map_err(|_| Error::Poisoned)?.clone();
        let file = self.file.upgrade();
        let mut out = Vec::with_capacity(coords.len());
        for c in coords {
            let scaled = c.as_slice();
            if let Some((_, r)) = pending.iter().rev().find(|(p, _)| p.as_slice() == scaled) {
                out.push(*r);
                continue;
            }
            let file = file
                .as_ref()
                .ok_or_else(|| Error::Unsupported("the file of a chunk index is closed".into()))?;
            let r = self
                .tree
                .lookup(&mut crate::access::Reading(file), scaled)?;
            out.push(match r {
                Some(r) => Some(ChunkRecord {
                    addr: crate::file::absolute(self.space.base, r.addr)?,
                    ..r
                }),
                None => None,
            });
        }
        Ok(out)
    }

    fn insert(&self, scaled: &[u64], record: ChunkRecord) -> Result<()> {
        self.set(scaled, Some(record))
    }

    fn remove(&self, scaled: &[u64]) -> Result<()> {
        self.set(scaled, None)
    }

    /// Frees every chunk, every node and the header.
    fn free(&self, file: &FileShared) -> Result<()> {
        self.flush(file)?;
        let space = self.space.clone();
        self.tree.delete(file, &mut |_, r| {
            space.raw_free(crate::file::absolute(space.base, r.addr)?, r.size)
        })
    }
}
