//! Direct chunk read and write (spec §2.4, OQ-36): raw disk images, no decoding or conversion.
//!
//! A chunk is named by the element coordinates of its first element, which must lie on a chunk
//! boundary and inside the current extent. A read first flushes a dirty cached copy of that chunk
//! alone, so the bytes returned are current; a write first drops any cached copy (clean, dirty or
//! pre-encoded) without writing it, then allocates through the layout's `insert` and writes the
//! bytes at the address returned.
//!
//! Filter masks belong to the layout/format layer (they are recorded in the chunk index), so
//! these calls carry none: a caller that needs one passes it to its layout itself.

use std::sync::Arc;

use super::{ChunkCache, layout_err, to_usize};
use crate::error::{ChunkCacheError, Result};
use crate::layout::{ChunkLayout, DiskLocation, InsertRequest, Lookup};
use crate::selection::SelectionError;
use crate::{ChunkCoord, ChunkKey, DatasetId};

impl ChunkCache {
    /// Copies the raw disk image of the chunk starting at element `offset` of `ds` into the
    /// front of `buf` and returns its size in bytes. A dirty cached copy is flushed first (that
    /// entry only). Errors: the layout does not use the cache ([`ChunkCacheError::NotCached`]),
    /// the offset is not on a chunk boundary or outside the extent, the chunk is not allocated
    /// ([`ChunkCacheError::NotAllocated`]; `buf` untouched), or `buf` is shorter than the image
    /// ([`ChunkCacheError::BufferTooSmall`] with the size needed; nothing copied, no change).
    pub fn direct_chunk_read(
        &mut self,
        ds: DatasetId,
        offset: &[u64],
        buf: &mut [u8],
    ) -> Result<usize> {
        let key = self.direct_key(ds, offset)?;
        let Some(loc) = self.direct_location(key)? else {
            return Err(ChunkCacheError::NotAllocated {
                offset: offset.to_vec(),
            });
        };
        let size = to_usize(loc.size)?;
        let Some(dst) = buf.get_mut(..size) else {
            return Err(ChunkCacheError::BufferTooSmall { needed: size });
        };
        Arc::clone(&self.state(ds)?.storage).read_at(loc.addr, dst)?;
        self.stats.bytes_read += loc.size;
        Ok(size)
    }

    /// The size in bytes of the disk image of the chunk starting at element `offset` of `ds`,
    /// or `None` if it is not allocated. A dirty cached copy is flushed first, so the size is the
    /// one [`direct_chunk_read`](ChunkCache::direct_chunk_read) would copy. Same errors as that
    /// call, except the two about the chunk and the buffer.
    pub fn direct_chunk_size(&mut self, ds: DatasetId, offset: &[u64]) -> Result<Option<u64>> {
        Ok(self
            .direct_chunk_lookup(ds, offset)?
            .location
            .map(|l| l.size))
    }

    /// The layout's lookup of the chunk starting at element `offset` of `ds`: its disk location
    /// (`None`: not allocated) and the layout's per-chunk data (for example what the chunk's
    /// filters recorded). A dirty cached copy is flushed first, as for
    /// [`direct_chunk_size`](ChunkCache::direct_chunk_size); same errors.
    pub fn direct_chunk_lookup(&mut self, ds: DatasetId, offset: &[u64]) -> Result<Lookup> {
        let key = self.direct_key(ds, offset)?;
        self.direct_lookup(key)
    }

    /// Writes `bytes` as the disk image of the chunk starting at element `offset` of `ds`, with
    /// no encoding. Any cached copy of the chunk is dropped first without being written; the old
    /// location is looked up and handed to the layout's `insert`, which says where the bytes go.
    pub fn direct_chunk_write(
        &mut self,
        ds: DatasetId,
        offset: &[u64],
        bytes: &[u8],
    ) -> Result<()> {
        let key = self.direct_key(ds, offset)?;
        if let Some(id) = self.lookup_id(&key) {
            // Dirty data and pre-encoded images go with it, unwritten.
            self.remove(id);
        }
        let layout = Arc::clone(&self.state(ds)?.layout);
        let mut found = lookup_one(&layout, ds, &key.coord)?;
        let mut reqs = [InsertRequest {
            coord: &key.coord,
            old: found.location,
            new_size: bytes.len() as u64,
            udata: &mut found.udata,
        }];
        self.index_changes += 1;
        let locs = layout
            .insert(&mut reqs)
            .map_err(layout_err(ds, Some(&key.coord), "insert"))?;
        let [loc] = locs[..] else {
            return Err(ChunkCacheError::InvalidLayoutSizes {
                dataset: ds,
                callback: "insert",
                expected: 1,
                got: locs.len(),
            });
        };
        Arc::clone(&self.state(ds)?.storage).write_at(loc.addr, bytes)?;
        self.stats.bytes_written += bytes.len() as u64;
        Ok(())
    }

    /// Checks a direct operation's dataset and offset and returns the chunk's key.
    fn direct_key(&self, ds: DatasetId, offset: &[u64]) -> Result<ChunkKey> {
        let st = self.state(ds)?;
        if !st.info.uses_cache {
            return Err(ChunkCacheError::NotCached(ds));
        }
        let dims = &st.info.chunk_dims;
        if offset.len() != dims.len() {
            return Err(SelectionError::RankMismatch {
                expected: dims.len(),
                got: offset.len(),
            }
            .into());
        }
        if offset.iter().zip(dims).any(|(o, d)| o % d != 0) {
            return Err(ChunkCacheError::Misaligned {
                offset: offset.to_vec(),
                chunk_dims: dims.clone(),
            });
        }
        let extent = st.layout.extent();
        if extent.len() != offset.len() || offset.iter().zip(&extent).any(|(o, e)| o >= e) {
            return Err(ChunkCacheError::OutOfExtent {
                offset: offset.to_vec(),
                extent,
            });
        }
        let scaled: Vec<u64> = offset.iter().zip(dims).map(|(o, d)| o / d).collect();
        let coord =
            ChunkCoord::new(&scaled).ok_or(SelectionError::RankTooLarge { rank: scaled.len() })?;
        Ok(ChunkKey { dataset: ds, coord })
    }

    /// Flushes a dirty cached copy of `key` (that entry only), then looks the chunk up.
    fn direct_location(&mut self, key: ChunkKey) -> Result<Option<DiskLocation>> {
        Ok(self.direct_lookup(key)?.location)
    }

    /// The lookup of `key`'s chunk after flushing a dirty cached copy of it.
    fn direct_lookup(&mut self, key: ChunkKey) -> Result<Lookup> {
        if let Some(id) = self.lookup_id(&key)
            && self.entry(id).is_some_and(|e| e.dirty)
        {
            self.flush_entries(key.dataset, &[id.0])?;
        }
        let layout = Arc::clone(&self.state(key.dataset)?.layout);
        lookup_one(&layout, key.dataset, &key.coord)
    }
}

/// A lookup batch of one.
fn lookup_one(layout: &Arc<dyn ChunkLayout>, ds: DatasetId, coord: &ChunkCoord) -> Result<Lookup> {
    let found = layout
        .lookup(std::slice::from_ref(coord))
        .map_err(layout_err(ds, Some(coord), "lookup"))?;
    let got = found.len();
    found
        .into_iter()
        .next()
        .filter(|_| got == 1)
        .ok_or_else(|| ChunkCacheError::InvalidLayoutSizes {
            dataset: ds,
            callback: "lookup",
            expected: 1,
            got,
        })
}
