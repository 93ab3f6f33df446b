//! Version 2 B-tree chunk indexes (layout version 4, record types 10 and 11, keyed by scaled
//! chunk coordinates) as operations by coordinates on the tree in the metadata cache
//! ([`crate::btree2`]): lookup for readers and writers, insert-or-update and remove for the
//! chunk cache's inserts and deletions, and the whole tree's deletion with its dataset. Nothing
//! is kept besides the tree: a lookup descends one node per level.

use h5_format::btree2::{Btree2Type, Record, RecordContext};

use crate::access::{MetaAccess, Session};
use crate::btree2::{self, ChunkKey, Tree};
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::ChunkRecord;

/// libhdf5's node size of chunk index B-trees (`H5D_BT2_NODE_SIZE`).
pub(crate) const BT2_NODE_SIZE: u32 = btree2::CHUNK_NODE_SIZE;
/// libhdf5's split percentage (`H5D_BT2_SPLIT_PERC`).
pub(crate) const BT2_SPLIT_PERCENT: u8 = btree2::SPLIT_PERCENT;
/// libhdf5's merge percentage (`H5D_BT2_MERGE_PERC`).
pub(crate) const BT2_MERGE_PERCENT: u8 = btree2::MERGE_PERCENT;

/// One dataset's v2 B-tree chunk index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChunkBtree {
    /// Relative address of the tree's header (fixed: the layout message points at it).
    pub(crate) header: u64,
    /// Dataset rank (scaled coordinates per record).
    pub(crate) rank: usize,
    /// Bytes of an unfiltered chunk.
    pub(crate) chunk_bytes: u64,
    /// Width of a filtered record's chunk size (from the layout message version, see
    /// `h5_format::btree2::filtered_chunk_size_len`).
    pub(crate) chunk_size_len: usize,
    /// Records carry a stored size and filter mask (type 11).
    pub(crate) filtered: bool,
}

impl ChunkBtree {
    fn tree(&self, sizes: h5_format::Sizes) -> Tree {
        Tree {
            addr: self.header,
            ctx: RecordContext {
                chunk_size_len: self.chunk_size_len,
                ..RecordContext::for_chunks(sizes, self.rank, self.chunk_bytes)
            },
        }
    }

    fn tree_type(&self) -> Btree2Type {
        if self.filtered {
            Btree2Type::FilteredChunks
        } else {
            Btree2Type::Chunks
        }
    }

    /// The record of chunk `scaled` (`addr` relative, as stored).
    fn record(&self, scaled: &[u64], r: &ChunkRecord) -> Record {
        if self.filtered {
            Record::FilteredChunk {
                address: r.addr,
                size: r.size,
                filter_mask: r.filter_mask,
                scaled: scaled.to_vec(),
            }
        } else {
            Record::Chunk {
                address: r.addr,
                scaled: scaled.to_vec(),
            }
        }
    }

    /// What a record says about its chunk (relative address).
    fn chunk_of(&self, r: &Record) -> Result<(Vec<u64>, ChunkRecord)> {
        match r {
            Record::Chunk { address, scaled } => Ok((
                scaled.clone(),
                ChunkRecord {
                    addr: *address,
                    size: self.chunk_bytes,
                    filter_mask: 0,
                },
            )),
            Record::FilteredChunk {
                address,
                size,
                filter_mask,
                scaled,
            } => Ok((
                scaled.clone(),
                ChunkRecord {
                    addr: *address,
                    size: *size,
                    filter_mask: *filter_mask,
                },
            )),
            _ => Err(Error::Unsupported(format!(
                "a type {} record in a chunk index",
                r.tree_type().as_u8()
            ))),
        }
    }

    /// Puts the header of an empty index at its (allocated) address.
    pub(crate) fn create(&self, file: &FileShared) -> Result<()> {
        let t = self.tree(file.sizes);
        let params = btree2::params_for(self.tree_type(), &t.ctx)?;
        btree2::create_at(&mut Session::new(file)?, self.header, params)
    }

    /// The chunk at scaled coordinates `scaled`, if it has one (relative address).
    pub(crate) fn lookup(
        &self,
        a: &mut dyn MetaAccess,
        scaled: &[u64],
    ) -> Result<Option<ChunkRecord>> {
        let t = self.tree(a.file().sizes);
        match btree2::find(a, &t, &ChunkKey(scaled))? {
            Some(r) => Ok(Some(self.chunk_of(&r)?.1)),
            None => Ok(None),
        }
    }

    /// Records chunk `scaled` at `r` (relative address): the record is updated in place when
    /// the chunk has one, inserted otherwise.
    pub(crate) fn upsert(&self, file: &FileShared, scaled: &[u64], r: &ChunkRecord) -> Result<()> {
        let t = self.tree(file.sizes);
        let rec = self.record(scaled, r);
        let mut s = Session::new(file)?;
        let new = rec.clone();
        if btree2::update(&mut s, &t, &ChunkKey(scaled), &mut |old| *old = new.clone())? {
            return Ok(());
        }
        btree2::insert(&mut s, &t, &ChunkKey(scaled), rec)
    }

    /// Removes the record of chunk `scaled`; returns what it said (`None`: no record).
    pub(crate) fn remove(&self, file: &FileShared, scaled: &[u64]) -> Result<Option<ChunkRecord>> {
        let t = self.tree(file.sizes);
        let mut s = Session::new(file)?;
        match btree2::remove(&mut s, &t, &ChunkKey(scaled))? {
            Some(r) => Ok(Some(self.chunk_of(&r)?.1)),
            None => Ok(None),
        }
    }

    /// Deletes the whole index (every node and the header), `f` seeing every chunk first.
    pub(crate) fn delete(
        &self,
        file: &FileShared,
        f: &mut dyn FnMut(&mut Session<'_>, ChunkRecord) -> Result<()>,
    ) -> Result<()> {
        let t = self.tree(file.sizes);
        let me = *self;
        btree2::delete(&mut Session::new(file)?, &t, &mut |s, r| {
            let (_, c) = me.chunk_of(r)?;
            f(s, c)
        })
    }
}
