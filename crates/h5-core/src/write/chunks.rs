//! Writable chunk-cache layouts: contiguous data at one block (allocated at creation or at the
//! first write), and chunked data whose chunks are found and recorded through its index, a
//! [`WritableChunkIndex`] (one implementation per index kind: `crate::indexes::{farray,
//! earray}` change the arrays in place, `chunk_index::btree1` the version 1 B-tree (in place,
//! `crate::btree1::chunk`), `chunk_index::simple` the single-chunk and implicit indexes,
//! `chunk_index::table` the v2 B-tree for now).

use std::sync::{Arc, Mutex};

use h5_chunkcache::selection::CopyRun;
use h5_chunkcache::{
    Capabilities, Chunk, ChunkCoord, ChunkLayout, DirectPlan, DiskLocation, Encoded, InsertRequest,
    LayoutError, LayoutInfo, Lookup, Udata,
};

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::ChunkRecord;
use crate::write::alloc::SpaceKind;

/// Indexed storage K of chunk B-trees in new files (children per node: twice this).
pub(crate) const CHUNK_BTREE_K: u16 = 32;

/// The direct-I/O plan of a chunk: the caller's runs address the stored image itself when it
/// is the raw elements (no filters), otherwise the transfer must go through the cache.
fn direct_plan(raw: bool) -> DirectPlan {
    if raw {
        DirectPlan::Selection(None)
    } else {
        DirectPlan::NotPossible
    }
}

/// Elements and bytes of a block of `dims` elements of `elem_size` bytes (a chunk, or a
/// contiguous dataset's data), or [`Error::TooLarge`] when they do not fit in memory.
pub(crate) fn block_size(what: &str, dims: &[u64], elem_size: usize) -> Result<(usize, usize)> {
    let elems = crate::buffer::product(dims.iter().copied());
    let sizes = elems
        .and_then(|n| usize::try_from(n).ok())
        .and_then(|n| Some((n, n.checked_mul(elem_size)?)));
    sizes.ok_or_else(|| {
        Error::too_large(
            what,
            elems.and_then(|n| n.checked_mul(u64::try_from(elem_size).ok()?)),
        )
    })
}

pub(crate) fn fill_chunk(bytes: usize, fill: &[u8]) -> Vec<u8> {
    if fill.is_empty() || fill.iter().all(|b| *b == 0) {
        vec![0; bytes]
    } else {
        fill.iter().copied().cycle().take(bytes).collect()
    }
}

/// File space for chunks: the file's allocator and base address (not the file itself, so that
/// a file flushed as it is dropped can still place its last chunks).
#[derive(Debug, Clone)]
pub(crate) struct ChunkSpace {
    pub(crate) alloc: Arc<Mutex<crate::write::alloc::FileAlloc>>,
    pub(crate) base: u64,
}

impl ChunkSpace {
    fn allocate(&self, len: u64) -> Result<u64, LayoutError> {
        let a = self
            .alloc
            .lock()
            .map_err(|_| "allocator lock poisoned")?
            .allocate(SpaceKind::Raw, len)?;
        Ok(crate::file::absolute(self.base, a)?)
    }

    /// Whether readers in other processes follow the file (see
    /// [`FileAlloc::readers_follow`](crate::write::alloc::FileAlloc::readers_follow)).
    fn readers_follow(&self) -> Result<bool, LayoutError> {
        Ok(self
            .alloc
            .lock()
            .map_err(|_| "allocator lock poisoned")?
            .readers_follow())
    }

    fn free(&self, abs: u64, len: u64) -> Result<(), LayoutError> {
        self.alloc
            .lock()
            .map_err(|_| "allocator lock poisoned")?
            .free(SpaceKind::Raw, self.rel(abs)?, len)?;
        Ok(())
    }

    /// Frees `len` bytes of raw data at absolute `abs` (nothing for an empty chunk).
    pub(crate) fn raw_free(&self, abs: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let rel = self.rel(abs)?;
        self.alloc
            .lock()
            .map_err(|_| Error::Poisoned)?
            .free(SpaceKind::Raw, rel, len)?;
        Ok(())
    }

    /// The relative address of the chunk at absolute `abs`.
    fn rel(&self, abs: u64) -> Result<u64> {
        abs.checked_sub(self.base)
            .ok_or_else(|| Error::Unsupported("a chunk below the base address".into()))
    }

    /// Allocates `len` bytes of metadata space (relative address).
    pub(crate) fn meta_allocate(&self, len: u64) -> Result<u64> {
        Ok(self
            .alloc
            .lock()
            .map_err(|_| Error::Poisoned)?
            .allocate(SpaceKind::Meta, len)?)
    }

    /// Frees `len` bytes of metadata space at relative `rel`.
    pub(crate) fn meta_free(&self, rel: u64, len: u64) -> Result<()> {
        Ok(self
            .alloc
            .lock()
            .map_err(|_| Error::Poisoned)?
            .free(SpaceKind::Meta, rel, len)?)
    }
}

/// Contiguous data in one block allocated when the dataset was created.
#[derive(Debug)]
pub(crate) struct ContiguousLayout {
    pub(crate) dims: Vec<u64>,
    pub(crate) elem_size: usize,
    pub(crate) fill: Vec<u8>,
    /// Where the data is (absolute); `None` until allocated (late allocation).
    pub(crate) location: Mutex<Option<DiskLocation>>,
}

impl ContiguousLayout {
    fn location(&self) -> Result<Option<DiskLocation>, LayoutError> {
        Ok(*self.location.lock().map_err(|_| "layout lock poisoned")?)
    }
}

impl ChunkLayout for ContiguousLayout {
    fn query(&self) -> LayoutInfo {
        let dims: Vec<u64> = self.dims.iter().map(|d| (*d).max(1)).collect();
        LayoutInfo {
            capabilities: Capabilities::SELECTION_READ | Capabilities::SELECTION_WRITE,
            ..LayoutInfo::dense(&dims, self.elem_size, &self.fill)
        }
    }

    fn extent(&self) -> Vec<u64> {
        self.dims.clone()
    }

    fn extent_into(&self, out: &mut [u64; h5_chunkcache::MAX_RANK]) -> Option<usize> {
        out.get_mut(..self.dims.len())?.copy_from_slice(&self.dims);
        Some(self.dims.len())
    }

    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let location = self.location()?;
        Ok(coords
            .iter()
            .map(|_| Lookup::dense(location, 0, Box::new(())))
            .collect())
    }

    fn new_chunk(&self, _: &ChunkCoord, _: bool) -> Result<(Chunk, Udata), LayoutError> {
        let (_, n) = block_size("contiguous data", &self.dims, self.elem_size)?;
        Ok((Chunk::Dense(fill_chunk(n, &self.fill)), Box::new(())))
    }

    fn encode(
        &self,
        _: &ChunkCoord,
        _: &Chunk,
        _: bool,
        _: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        Ok(Encoded::SameAsCache)
    }

    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        let location = self
            .location()?
            .ok_or("contiguous data written before its block was allocated")?;
        reqs.iter()
            .map(|r| {
                if r.new_size > location.size {
                    Err("contiguous data larger than its block".into())
                } else {
                    Ok(location)
                }
            })
            .collect()
    }

    fn delete_chunk(
        &self,
        _: &ChunkCoord,
        _: Option<DiskLocation>,
        _: &mut Udata,
    ) -> Result<(), LayoutError> {
        Err("contiguous data cannot be deleted".into())
    }

    fn plan_selection_read(
        &self,
        _: &ChunkCoord,
        _: Option<&Chunk>,
        _: DiskLocation,
        _: &[CopyRun],
        _: bool,
        _: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        Ok(direct_plan(true))
    }

    fn plan_selection_write(
        &self,
        _: &ChunkCoord,
        _: Option<&Chunk>,
        _: DiskLocation,
        _: &[CopyRun],
        _: bool,
        _: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        Ok(direct_plan(true))
    }
}

/// Work a dataset's storage does at flush (besides what the metadata cache writes): a layout
/// message rewritten (single chunk, compact data), a B-tree table laid out (the adapter).
pub(crate) trait AtFlush: Send + Sync + std::fmt::Debug {
    /// Brings the file up to date with the changes since the last flush (nothing for
    /// structures changed in place through the metadata cache).
    fn flush(&self, _file: &FileShared) -> Result<()> {
        Ok(())
    }

    /// The dataset header this storage rewrites at flush (`None`: it rewrites none, or the
    /// header does not exist yet), so that a deleted dataset's storage is dropped first.
    fn dataset_header(&self) -> Option<u64> {
        None
    }
}

/// One chunked dataset's index as the write path changes it: every call works on the index's
/// own structure (through the metadata cache, one entry at a time) by scaled chunk
/// coordinates, so that no whole-index table exists and a flush writes what changed. Records
/// carry absolute addresses; the chunk space itself belongs to the caller, except in `free`.
pub(crate) trait WritableChunkIndex: AtFlush {
    /// The records of the chunks at `coords` (`None`: not allocated).
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>>;

    /// Sets the record of the chunk at `scaled` (inserted, or replacing the old one).
    fn insert(&self, scaled: &[u64], record: ChunkRecord) -> Result<()>;

    /// Sets the records of the chunks at the given coordinates, in order, as that many
    /// [`WritableChunkIndex::insert`] calls would (the same index afterwards). Array indexes
    /// make it one metadata-cache change: each block protected, dirtied and released once for
    /// the whole batch (a flush inserts all of one dataset's new chunks at once).
    fn insert_many(&self, records: &[(ChunkCoord, ChunkRecord)]) -> Result<()> {
        for (c, r) in records {
            self.insert(c.as_slice(), *r)?;
        }
        Ok(())
    }

    /// Removes the record of the chunk at `scaled` (a shrink deleted the chunk).
    fn remove(&self, scaled: &[u64]) -> Result<()>;

    /// The dataset is being deleted: frees every chunk's space and the index's structures.
    fn free(&self, file: &FileShared) -> Result<()>;

    /// Where the chunk at `scaled` lives when the index computes it (implicit indexes), else
    /// `None`.
    fn computed(&self, _scaled: &[u64]) -> Option<DiskLocation> {
        None
    }
}

/// An engine error as a chunk-cache layout error.
fn boxed(e: Error) -> LayoutError {
    Box::new(e)
}

/// Per-chunk state: the filter mask of its last encoding.
struct Mask(u32);

/// The filter mask a writable chunked layout keeps for a chunk in its lookup data (`None`:
/// the data is another layout's).
pub(crate) fn udata_mask(udata: &Udata) -> Option<u32> {
    udata.downcast_ref::<Mask>().map(|m| m.0)
}

/// Chunked data: its index (any kind) and filter pipeline.
#[derive(Debug)]
pub(crate) struct ChunkedWriteLayout {
    pub(crate) dims: Mutex<Vec<u64>>,
    pub(crate) chunk_dims: Vec<u64>,
    pub(crate) elem_size: usize,
    pub(crate) fill: Vec<u8>,
    pub(crate) index: Arc<dyn WritableChunkIndex>,
    /// File space for chunks.
    pub(crate) space: ChunkSpace,
    pub(crate) pipeline: Option<h5_filters::Pipeline>,
    /// Partial edge chunks (those reaching past the extent) are stored without the filters
    /// (layout flag `DONT_FILTER_PARTIAL_EDGE_CHUNKS`); only set when there are filters.
    pub(crate) unfiltered_edges: bool,
    /// Early allocation: every chunk of the extent exists (made when the extent grows).
    pub(crate) early: bool,
    /// When fill values are written into newly allocated chunks.
    pub(crate) fill_time: h5_format::message::fill_value::FillTime,
    /// Implicit chunks deleted by a shrink, to be refilled.
    pub(crate) cleared: Mutex<Vec<DiskLocation>>,
}

impl ChunkedWriteLayout {
    /// Sets the filter mask of the written chunk at `coord` (a direct chunk write).
    pub(crate) fn set_filter_mask(&self, coord: &ChunkCoord, mask: u32) -> Result<()> {
        let found = self.index.lookup(std::slice::from_ref(coord))?;
        let mut r = found
            .into_iter()
            .next()
            .flatten()
            .ok_or_else(|| Error::Invalid("the chunk written directly has no record".into()))?;
        r.filter_mask = mask;
        self.index.insert(coord.as_slice(), r)
    }

    /// Writes the fill value over the implicit chunks a shrink deleted (their space stays
    /// theirs, and a growth must not show their old contents).
    pub(crate) fn refill_cleared(&self, file: &FileShared) -> Result<()> {
        let cleared = std::mem::take(&mut *self.cleared.lock().map_err(|_| Error::Poisoned)?);
        if cleared.is_empty() {
            return Ok(());
        }
        let image = fill_chunk(self.chunk_bytes()?, &self.fill);
        for l in cleared {
            file.storage.write_at(l.addr, &image)?;
        }
        Ok(())
    }

    /// The filters a chunk's image goes through: none for a partial edge chunk of a layout
    /// that stores those unfiltered.
    pub(crate) fn filters(&self, partial_bound: bool) -> Option<&h5_filters::Pipeline> {
        if self.unfiltered_edges && partial_bound {
            None
        } else {
            self.pipeline.as_ref()
        }
    }

    /// Elements of one chunk.
    fn chunk_elems(&self) -> Result<usize> {
        Ok(block_size("a chunk", &self.chunk_dims, self.elem_size)?.0)
    }

    /// Bytes of one unfiltered chunk.
    fn chunk_bytes(&self) -> Result<usize> {
        Ok(block_size("a chunk", &self.chunk_dims, self.elem_size)?.1)
    }
}

impl ChunkLayout for ChunkedWriteLayout {
    fn query(&self) -> LayoutInfo {
        let raw = self.pipeline.is_none();
        LayoutInfo {
            needs_codec: !raw,
            edge_chunks_differ: self.unfiltered_edges,
            capabilities: if raw {
                Capabilities::SELECTION_READ | Capabilities::SELECTION_WRITE
            } else {
                Capabilities::NONE
            },
            ..LayoutInfo::dense(&self.chunk_dims, self.elem_size, &self.fill)
        }
    }

    fn extent(&self) -> Vec<u64> {
        self.dims.lock().map(|d| d.clone()).unwrap_or_default()
    }

    fn extent_into(&self, out: &mut [u64; h5_chunkcache::MAX_RANK]) -> Option<usize> {
        let d = self.dims.lock().ok()?;
        out.get_mut(..d.len())?.copy_from_slice(&d);
        Some(d.len())
    }

    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let records = self.index.lookup(coords).map_err(boxed)?;
        let hint = self.chunk_bytes()?;
        Ok(records
            .into_iter()
            .map(|r| match r {
                Some(r) => Lookup::dense(
                    Some(DiskLocation {
                        addr: r.addr,
                        size: r.size,
                    }),
                    hint,
                    Box::new(Mask(r.filter_mask)),
                ),
                None => Lookup::dense(None, 0, Box::new(Mask(0))),
            })
            .collect())
    }

    fn decode(
        &self,
        coord: &ChunkCoord,
        image: Vec<u8>,
        partial_bound: bool,
        udata: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        // Without a spare, the pipeline's plain decode.
        self.decode_reusing(coord, image, partial_bound, udata, Vec::new())
            .map(|(chunk, _)| chunk)
    }

    fn decode_reusing(
        &self,
        _: &ChunkCoord,
        image: Vec<u8>,
        partial_bound: bool,
        udata: &mut Udata,
        spare: Vec<u8>,
    ) -> Result<(Chunk, Vec<u8>), LayoutError> {
        let Some(p) = self.filters(partial_bound) else {
            if self.unfiltered_edges && image.len() != self.chunk_bytes()? {
                return Err(format!(
                    "an unfiltered edge chunk of {} bytes, {} expected",
                    image.len(),
                    self.chunk_bytes()?
                )
                .into());
            }
            return Ok((Chunk::Dense(image), spare));
        };
        let mask = udata.downcast_ref::<Mask>().map_or(0, |m| m.0);
        let (out, leftover) =
            p.decode_reusing(image, mask, self.elem_size, self.chunk_elems()?, spare)?;
        Ok((Chunk::Dense(out), leftover))
    }

    fn new_chunk(&self, _: &ChunkCoord, _: bool) -> Result<(Chunk, Udata), LayoutError> {
        let n = self.chunk_bytes()?;
        Ok((Chunk::Dense(fill_chunk(n, &self.fill)), Box::new(Mask(0))))
    }

    fn encode(
        &self,
        _: &ChunkCoord,
        chunk: &Chunk,
        partial_bound: bool,
        udata: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        let Some(p) = self.filters(partial_bound) else {
            if self.pipeline.is_some() {
                // An edge chunk stored unfiltered: no filter was applied.
                *udata = Box::new(Mask(0));
            }
            return Ok(Encoded::SameAsCache);
        };
        let bytes = chunk.as_dense().ok_or("a custom chunk in a dense layout")?;
        let (image, mask) = p.encode(bytes.to_vec(), self.elem_size, self.chunk_elems()?)?;
        *udata = Box::new(Mask(mask));
        Ok(Encoded::Owned(image))
    }

    /// As [`encode`](Self::encode), filtering the chunk's own buffer instead of a copy.
    fn encode_in_place(
        &self,
        _: &ChunkCoord,
        chunk: Chunk,
        partial_bound: bool,
        udata: &mut Udata,
    ) -> Result<Vec<u8>, LayoutError> {
        let Chunk::Dense(bytes) = chunk else {
            return Err("a custom chunk in a dense layout".into());
        };
        let Some(p) = self.filters(partial_bound) else {
            if self.pipeline.is_some() {
                *udata = Box::new(Mask(0));
            }
            return Ok(bytes);
        };
        let (image, mask) = p.encode(bytes, self.elem_size, self.chunk_elems()?)?;
        *udata = Box::new(Mask(mask));
        Ok(image)
    }

    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        let space = &self.space;
        // While SWMR readers follow the file an encoded chunk is never rewritten in place,
        // even at its old size: a reader decoding it meanwhile would read a torn stream. Its
        // old place is freed like any other (held or delayed max_lag ticks).
        let move_encoded = self.pipeline.is_some() && space.readers_follow()?;
        let mut out = Vec::with_capacity(reqs.len());
        // Every chunk's space first, then all the records in one index change.
        let mut records = Vec::with_capacity(reqs.len());
        for r in reqs.iter_mut() {
            let mask = r.udata.downcast_ref::<Mask>().map_or(0, |m| m.0);
            let loc = match (r.old, self.index.computed(r.coord.as_slice())) {
                (_, Some(fixed)) if fixed.size == r.new_size => fixed,
                (_, Some(_)) => return Err("an implicit chunk changed size".into()),
                (Some(old), None) if old.size == r.new_size && !move_encoded => {
                    // Rewritten in place without filters: the index already holds this
                    // record (address, size, mask 0), so it is left alone (a VFD SWMR writer
                    // rewrites each partial chunk at every tick).
                    if self.pipeline.is_none() {
                        out.push(old);
                        continue;
                    }
                    old
                }
                (old, None) => {
                    if let Some(old) = old {
                        space.free(old.addr, old.size)?;
                    }
                    DiskLocation {
                        addr: space.allocate(r.new_size)?,
                        size: r.new_size,
                    }
                }
            };
            records.push((
                *r.coord,
                ChunkRecord {
                    addr: loc.addr,
                    size: loc.size,
                    filter_mask: mask,
                },
            ));
            out.push(loc);
        }
        if !records.is_empty() {
            self.index.insert_many(&records).map_err(boxed)?;
        }
        Ok(out)
    }

    fn delete_chunk(
        &self,
        coord: &ChunkCoord,
        location: Option<DiskLocation>,
        _: &mut Udata,
    ) -> Result<(), LayoutError> {
        self.index.remove(coord.as_slice()).map_err(boxed)?;
        match self.index.computed(coord.as_slice()) {
            // An implicit chunk keeps its space: it is refilled (`refill_cleared`) so that a
            // later growth shows fill values there.
            Some(fixed) => self
                .cleared
                .lock()
                .map_err(|_| "layout lock poisoned")?
                .push(fixed),
            None => {
                if let Some(l) = location {
                    self.space.free(l.addr, l.size)?;
                }
            }
        }
        Ok(())
    }

    fn plan_selection_read(
        &self,
        _: &ChunkCoord,
        _: Option<&Chunk>,
        _: DiskLocation,
        _: &[CopyRun],
        _: bool,
        _: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        Ok(direct_plan(self.pipeline.is_none()))
    }

    fn plan_selection_write(
        &self,
        _: &ChunkCoord,
        _: Option<&Chunk>,
        _: DiskLocation,
        _: &[CopyRun],
        _: bool,
        _: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        Ok(direct_plan(self.pipeline.is_none()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn block_sizes_that_do_not_fit_are_too_large_errors() {
        assert_eq!(block_size("a chunk", &[4, 5], 8).unwrap(), (20, 160));
        assert_eq!(block_size("a chunk", &[], 8).unwrap(), (1, 8));
        let e = block_size("a chunk", &[1 << 40, 1 << 40], 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");
        let e = block_size("a chunk", &[1 << 62], 8).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");
        assert!(e.to_string().contains("a chunk"), "{e}");
    }
}
