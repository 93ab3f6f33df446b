//! The indexes without an index structure: a single chunk (its address, size and filter mask
//! in the layout message, rewritten at flush) and implicit chunks (addresses computed over one
//! block allocated at creation).

use std::sync::Mutex;

use h5_chunkcache::{ChunkCoord, DiskLocation};
use h5_format::message::layout::Layout;

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::indexes::linear;
use crate::layouts::ChunkRecord;
use crate::write::chunks::{AtFlush, ChunkSpace, WritableChunkIndex};

/// A dataset of exactly one chunk: its record as the layout message holds it.
#[derive(Debug)]
pub(crate) struct SingleChunk {
    /// The layout message (its index address and size updated at flush).
    pub(crate) layout: Layout,
    /// The dataset's object header (relative), set once it exists.
    pub(crate) header: Mutex<Option<u64>>,
    /// The chunk's record (`None`: not allocated) and whether the message is stale.
    state: Mutex<(Option<ChunkRecord>, bool)>,
    space: ChunkSpace,
}

impl SingleChunk {
    /// The index of a dataset whose layout message is `layout` and whose chunk is `record`
    /// (the message is up to date).
    pub(crate) fn new(
        layout: Layout,
        header: Option<u64>,
        record: Option<ChunkRecord>,
        space: ChunkSpace,
    ) -> Self {
        SingleChunk {
            layout,
            header: Mutex::new(header),
            state: Mutex::new((record, false)),
            space,
        }
    }

    fn set(&self, record: Option<ChunkRecord>) -> Result<()> {
        *self.state.lock().map_err(|_| Error::Poisoned)? = (record, true);
        Ok(())
    }
}

impl AtFlush for SingleChunk {
    /// Rewrites the layout message when the chunk changed.
    fn flush(&self, file: &FileShared) -> Result<()> {
        let Some(at) = *self.header.lock().map_err(|_| Error::Poisoned)? else {
            return Ok(());
        };
        let record = {
            let mut s = self.state.lock().map_err(|_| Error::Poisoned)?;
            if !s.1 {
                return Ok(());
            }
            s.1 = false;
            s.0
        };
        super::single_update(file, at, &self.layout, record.as_ref())
    }

    fn dataset_header(&self) -> Option<u64> {
        self.header.lock().ok().and_then(|h| *h)
    }
}

impl WritableChunkIndex for SingleChunk {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>> {
        let r = self.state.lock().map_err(|_| Error::Poisoned)?.0;
        Ok(coords
            .iter()
            .map(|c| {
                if c.as_slice().iter().all(|x| *x == 0) {
                    r
                } else {
                    None
                }
            })
            .collect())
    }

    fn insert(&self, _: &[u64], record: ChunkRecord) -> Result<()> {
        self.set(Some(record))
    }

    fn remove(&self, _: &[u64]) -> Result<()> {
        self.set(None)
    }

    fn free(&self, _: &FileShared) -> Result<()> {
        let mut s = self.state.lock().map_err(|_| Error::Poisoned)?;
        if let Some(r) = s.0.take() {
            self.space.raw_free(r.addr, r.size)?;
        }
        s.1 = false;
        Ok(())
    }
}

/// Chunks at computed addresses in one block allocated (and filled) at creation: every chunk
/// of the maximum dimensions exists.
#[derive(Debug)]
pub(crate) struct ImplicitChunks {
    /// Absolute address of the first chunk.
    pub(crate) base: u64,
    /// Chunks per dimension over the maximum dimensions.
    pub(crate) counts: Vec<u64>,
    /// Bytes per chunk.
    pub(crate) chunk_bytes: u64,
    pub(crate) space: ChunkSpace,
}

/// Nothing is recorded: nothing to do at flush.
impl AtFlush for ImplicitChunks {}

impl WritableChunkIndex for ImplicitChunks {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>> {
        Ok(coords
            .iter()
            .map(|c| {
                self.computed(c.as_slice()).map(|l| ChunkRecord {
                    addr: l.addr,
                    size: l.size,
                    filter_mask: 0,
                })
            })
            .collect())
    }

    fn insert(&self, scaled: &[u64], record: ChunkRecord) -> Result<()> {
        match self.computed(scaled) {
            Some(l) if l.addr == record.addr && l.size == record.size => Ok(()),
            _ => Err(Error::Invalid(format!(
                "chunk {scaled:?} of an implicit index recorded elsewhere"
            ))),
        }
    }

    /// An implicit chunk keeps its space (the layout refills it).
    fn remove(&self, _: &[u64]) -> Result<()> {
        Ok(())
    }

    /// Frees the whole block of chunks.
    fn free(&self, _: &FileShared) -> Result<()> {
        let total = self
            .counts
            .iter()
            .try_fold(self.chunk_bytes, |a, c| a.checked_mul(*c))
            .ok_or_else(|| Error::Invalid("implicit chunk block too large".into()))?;
        self.space.raw_free(self.base, total)
    }

    fn computed(&self, scaled: &[u64]) -> Option<DiskLocation> {
        let lin = linear(scaled, &self.counts, None)?;
        Some(DiskLocation {
            addr: lin.checked_mul(self.chunk_bytes)?.checked_add(self.base)?,
            size: self.chunk_bytes,
        })
    }
}
