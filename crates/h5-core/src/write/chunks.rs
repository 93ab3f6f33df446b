//! Writable chunk-cache layouts: contiguous data at one block (allocated at creation or at the
//! first write), and chunked data whose records reach the file through its index: a version 1
//! B-tree is changed in place as chunks are inserted and deleted (`crate::btree1::chunk`); the
//! layout version 4 indexes are kept as an ordered chunk table laid out at flush
//! (`chunk_index/`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use h5_chunkcache::selection::CopyRun;
use h5_chunkcache::{
    Capabilities, Chunk, ChunkCoord, ChunkLayout, DirectPlan, DiskLocation, Encoded, InsertRequest,
    LayoutError, LayoutInfo, Lookup, Udata,
};

use crate::btree1::chunk::ChunkBtree;
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::ChunkRecord;
use crate::write::alloc::SpaceKind;

/// Indexed storage K of chunk B-trees in new files (children per node: twice this).
pub(crate) const CHUNK_BTREE_K: u16 = 32;

fn layout_error(e: Error) -> LayoutError {
    Box::new(e)
}

/// The direct-I/O plan of a chunk: the caller's runs address the stored image itself when it
/// is the raw elements (no filters), otherwise the transfer must go through the cache.
fn direct_plan(raw: bool) -> DirectPlan {
    if raw {
        DirectPlan::Selection(None)
    } else {
        DirectPlan::NotPossible
    }
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
        Ok(a + self.base)
    }

    fn free(&self, abs: u64, len: u64) -> Result<(), LayoutError> {
        self.alloc
            .lock()
            .map_err(|_| "allocator lock poisoned")?
            .free(SpaceKind::Raw, abs - self.base, len)?;
        Ok(())
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

    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let location = self.location()?;
        Ok(coords
            .iter()
            .map(|_| Lookup::dense(location, 0, Box::new(())))
            .collect())
    }

    fn new_chunk(&self, _: &ChunkCoord, _: bool) -> Result<(Chunk, Udata), LayoutError> {
        let elements: u64 = self.dims.iter().product();
        let n = usize::try_from(elements)
            .map_err(|_| "contiguous data too large")?
            .saturating_mul(self.elem_size);
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

/// How a chunk table reaches the file.
#[derive(Debug)]
pub(crate) enum IndexShape {
    /// A version 1 B-tree, changed in place (its root is fixed: the layout message points at
    /// it); the table keeps no records for it.
    BtreeV1(ChunkBtree),
    /// The one chunk's address (and filtered size and mask) is in the layout message, which
    /// is rewritten at flush.
    Single {
        /// The layout message (its index address and size updated at flush).
        layout: h5_format::message::layout::Layout,
        /// The dataset's object header (relative), set once it exists.
        header: Mutex<Option<u64>>,
    },
    /// Chunks at computed addresses in one block allocated at creation (no index structure).
    Implicit {
        /// Absolute address of the first chunk.
        base: u64,
        /// Chunks per dimension over the maximum dimensions.
        counts: Vec<u64>,
        /// Bytes per chunk.
        chunk_bytes: u64,
    },
    /// A fixed array, extensible array or v2 B-tree under a fixed header.
    Array(crate::write::chunk_index::ArrayIndex),
    /// Not chunked: compact data, rewritten into the layout message at flush.
    Compact(Arc<crate::write::compact::CompactData>),
}

/// The chunks of one dataset and how they reach the file: a version 1 B-tree holds its own
/// records; the other indexes are a table by element offset (row-major order of the scaled
/// coordinates) laid out at flush.
#[derive(Debug)]
pub(crate) struct ChunkTable {
    pub(crate) space: ChunkSpace,
    pub(crate) shape: IndexShape,
    pub(crate) chunk_dims: Vec<u64>,
    pub(crate) records: Mutex<BTreeMap<Vec<u64>, ChunkRecord>>,
    /// Blocks of the last layout below the fixed root or header.
    placed: Mutex<Vec<crate::write::chunk_index::Placed>>,
    /// Flush dependencies of the last layout.
    deps: Mutex<Vec<crate::write::chunk_index::Dep>>,
    dirty: Mutex<bool>,
}

impl ChunkTable {
    pub(crate) fn new(space: ChunkSpace, shape: IndexShape, chunk_dims: Vec<u64>) -> Self {
        ChunkTable {
            space,
            shape,
            chunk_dims,
            records: Mutex::new(BTreeMap::new()),
            placed: Mutex::new(Vec::new()),
            deps: Mutex::new(Vec::new()),
            dirty: Mutex::new(true),
        }
    }

    /// Frees every chunk and every index block below the root or header, and a version 1
    /// B-tree's root (the dataset is being deleted; other indexes' headers and an implicit
    /// block's unwritten chunks are left unused).
    pub(crate) fn free(&self, file: &FileShared) -> Result<()> {
        let mut records: Vec<ChunkRecord> =
            std::mem::take(&mut *self.records.lock().map_err(|_| Error::Poisoned)?)
                .into_values()
                .collect();
        if let IndexShape::BtreeV1(tree) = &self.shape {
            records.extend(tree.delete()?);
        }
        if !matches!(self.shape, IndexShape::Compact(_)) {
            for r in &records {
                if r.size > 0 {
                    self.space
                        .free(r.addr, r.size)
                        .map_err(|e| Error::Unsupported(e.to_string()))?;
                }
            }
        }
        let deps = std::mem::take(&mut *self.deps.lock().map_err(|_| Error::Poisoned)?);
        crate::write::chunk_index::undepend(file, &deps)?;
        let placed = std::mem::take(&mut *self.placed.lock().map_err(|_| Error::Poisoned)?);
        crate::write::chunk_index::remove(file, placed)?;
        *self.dirty.lock().map_err(|_| Error::Poisoned)? = false;
        Ok(())
    }

    /// The dataset header a single-chunk or compact table rewrites at flush (`None` for
    /// other shapes, or before the header exists).
    pub(crate) fn header(&self) -> Option<u64> {
        match &self.shape {
            IndexShape::Single { header, .. } => header.lock().ok().and_then(|h| *h),
            IndexShape::Compact(d) => d.header.lock().ok().and_then(|h| *h),
            _ => None,
        }
    }

    /// Marks the table as matching the file (nothing to lay out until it changes).
    pub(crate) fn mark_clean(&self) -> Result<()> {
        *self.dirty.lock().map_err(|_| Error::Poisoned)? = false;
        Ok(())
    }

    /// Marks the table changed (laid out again at the next flush).
    pub(crate) fn mark_dirty(&self) -> Result<()> {
        *self.dirty.lock().map_err(|_| Error::Poisoned)? = true;
        Ok(())
    }

    /// The location of chunk `c` of an implicit index (`None`: another index, or outside).
    fn implicit(&self, c: &ChunkCoord) -> Option<DiskLocation> {
        let IndexShape::Implicit {
            base,
            counts,
            chunk_bytes,
        } = &self.shape
        else {
            return None;
        };
        let lin = crate::write::chunk_index::linear(c.as_slice(), counts)?;
        Some(DiskLocation {
            addr: lin.checked_mul(*chunk_bytes)?.checked_add(*base)?,
            size: *chunk_bytes,
        })
    }

    fn offsets(&self, c: &ChunkCoord) -> Vec<u64> {
        c.as_slice()
            .iter()
            .zip(&self.chunk_dims)
            .map(|(i, d)| i * d)
            .collect()
    }

    /// The records of the chunks at `coords` (absolute addresses).
    pub(crate) fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>> {
        if let IndexShape::BtreeV1(tree) = &self.shape {
            let scaled: Vec<&[u64]> = coords.iter().map(ChunkCoord::as_slice).collect();
            return tree.lookup(&scaled);
        }
        let records = self.records.lock().map_err(|_| Error::Poisoned)?;
        Ok(coords
            .iter()
            .map(|c| records.get(&self.offsets(c)).copied())
            .collect())
    }

    /// Records (or changes) the chunk at `coord`: in place in a version 1 B-tree, else in the
    /// table, laid out at the next flush.
    pub(crate) fn set(&self, coord: &ChunkCoord, record: ChunkRecord) -> Result<()> {
        if let IndexShape::BtreeV1(tree) = &self.shape {
            return tree.insert(coord.as_slice(), record);
        }
        self.records
            .lock()
            .map_err(|_| Error::Poisoned)?
            .insert(self.offsets(coord), record);
        self.mark_dirty()
    }

    /// Forgets the chunk at `coord` (its space is the caller's to free).
    pub(crate) fn unset(&self, coord: &ChunkCoord) -> Result<()> {
        if let IndexShape::BtreeV1(tree) = &self.shape {
            return tree.remove(coord.as_slice()).map(|_| ());
        }
        self.records
            .lock()
            .map_err(|_| Error::Poisoned)?
            .remove(&self.offsets(coord));
        self.mark_dirty()
    }

    /// Writes a table-kept index into the cache (a version 1 B-tree has nothing to lay out:
    /// it was changed in place).
    pub(crate) fn lay_out(&self, file: &FileShared) -> Result<()> {
        if let IndexShape::Compact(data) = &self.shape {
            return data.lay_out(file);
        }
        {
            let mut d = self.dirty.lock().map_err(|_| Error::Poisoned)?;
            if !*d {
                return Ok(());
            }
            *d = false;
        }
        let old_deps = std::mem::take(&mut *self.deps.lock().map_err(|_| Error::Poisoned)?);
        crate::write::chunk_index::undepend(file, &old_deps)?;
        let old = std::mem::take(&mut *self.placed.lock().map_err(|_| Error::Poisoned)?);
        crate::write::chunk_index::remove(file, old)?;
        match &self.shape {
            IndexShape::BtreeV1(_) | IndexShape::Implicit { .. } | IndexShape::Compact(_) => Ok(()),
            IndexShape::Single { layout, header } => {
                let Some(at) = *header.lock().map_err(|_| Error::Poisoned)? else {
                    return Ok(());
                };
                let records = self.records.lock().map_err(|_| Error::Poisoned)?;
                crate::write::chunk_index::single_update(file, at, layout, records.values().next())
            }
            IndexShape::Array(ix) => {
                let records = self.records.lock().map_err(|_| Error::Poisoned)?.clone();
                let out = ix.lay_out(file, &records)?;
                *self.placed.lock().map_err(|_| Error::Poisoned)? = out.placed;
                *self.deps.lock().map_err(|_| Error::Poisoned)? = out.deps;
                Ok(())
            }
        }
    }
}

/// Per-chunk state: the filter mask of its last encoding.
struct Mask(u32);

/// The filter mask a writable chunked layout keeps for a chunk in its lookup data (`None`:
/// the data is another layout's).
pub(crate) fn udata_mask(udata: &Udata) -> Option<u32> {
    udata.downcast_ref::<Mask>().map(|m| m.0)
}

/// Chunked data with a v1 B-tree index and a filter pipeline.
#[derive(Debug)]
pub(crate) struct ChunkedWriteLayout {
    pub(crate) dims: Mutex<Vec<u64>>,
    pub(crate) chunk_dims: Vec<u64>,
    pub(crate) elem_size: usize,
    pub(crate) fill: Vec<u8>,
    pub(crate) index: Arc<ChunkTable>,
    pub(crate) pipeline: Option<h5_filters::Pipeline>,
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
        let mut record = self
            .index
            .lookup(std::slice::from_ref(coord))?
            .pop()
            .flatten()
            .ok_or_else(|| Error::Invalid("the chunk written directly has no record".into()))?;
        record.filter_mask = mask;
        self.index.set(coord, record)
    }

    /// Writes the fill value over the implicit chunks a shrink deleted (their space stays
    /// theirs, and a growth must not show their old contents).
    pub(crate) fn refill_cleared(&self, file: &FileShared) -> Result<()> {
        let cleared = std::mem::take(&mut *self.cleared.lock().map_err(|_| Error::Poisoned)?);
        if cleared.is_empty() {
            return Ok(());
        }
        let image = fill_chunk(self.chunk_elems() * self.elem_size, &self.fill);
        for l in cleared {
            file.storage.write_at(l.addr, &image)?;
        }
        Ok(())
    }

    fn chunk_elems(&self) -> usize {
        self.chunk_dims.iter().product::<u64>() as usize
    }
}

impl ChunkLayout for ChunkedWriteLayout {
    fn query(&self) -> LayoutInfo {
        let raw = self.pipeline.is_none();
        LayoutInfo {
            needs_codec: !raw,
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

    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let records = self.index.lookup(coords).map_err(layout_error)?;
        let hint = self.chunk_elems() * self.elem_size;
        Ok(coords
            .iter()
            .zip(records)
            .map(|(c, r)| match r {
                // Implicit chunks all exist from creation (holding the fill value).
                None if self.index.implicit(c).is_some() => {
                    Lookup::dense(self.index.implicit(c), hint, Box::new(Mask(0)))
                }
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
        _: &ChunkCoord,
        image: Vec<u8>,
        _: bool,
        udata: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        let Some(p) = &self.pipeline else {
            return Ok(Chunk::Dense(image));
        };
        let mask = udata.downcast_ref::<Mask>().map_or(0, |m| m.0);
        Ok(Chunk::Dense(p.decode(
            image,
            mask,
            self.elem_size,
            self.chunk_elems(),
        )?))
    }

    fn new_chunk(&self, _: &ChunkCoord, _: bool) -> Result<(Chunk, Udata), LayoutError> {
        let n = self.chunk_elems() * self.elem_size;
        Ok((Chunk::Dense(fill_chunk(n, &self.fill)), Box::new(Mask(0))))
    }

    fn encode(
        &self,
        _: &ChunkCoord,
        chunk: &Chunk,
        _: bool,
        udata: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        let Some(p) = &self.pipeline else {
            return Ok(Encoded::SameAsCache);
        };
        let bytes = chunk.as_dense().ok_or("a custom chunk in a dense layout")?;
        let (image, mask) = p.encode(bytes.to_vec(), self.elem_size, self.chunk_elems())?;
        *udata = Box::new(Mask(mask));
        Ok(Encoded::Owned(image))
    }

    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        let space = &self.index.space;
        let mut out = Vec::with_capacity(reqs.len());
        for r in reqs.iter_mut() {
            let mask = r.udata.downcast_ref::<Mask>().map_or(0, |m| m.0);
            let loc = match (r.old, self.index.implicit(&r.coord)) {
                (_, Some(fixed)) if fixed.size == r.new_size => fixed,
                (_, Some(_)) => return Err("an implicit chunk changed size".into()),
                (Some(old), None) if old.size == r.new_size => old,
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
            self.index
                .set(
                    &r.coord,
                    ChunkRecord {
                        addr: loc.addr,
                        size: loc.size,
                        filter_mask: mask,
                    },
                )
                .map_err(layout_error)?;
            out.push(loc);
        }
        Ok(out)
    }

    fn delete_chunk(
        &self,
        coord: &ChunkCoord,
        location: Option<DiskLocation>,
        _: &mut Udata,
    ) -> Result<(), LayoutError> {
        self.index.unset(coord).map_err(layout_error)?;
        match self.index.implicit(coord) {
            // An implicit chunk keeps its space: it is refilled (`take_cleared`) so that a
            // later growth shows fill values there.
            Some(fixed) => self
                .cleared
                .lock()
                .map_err(|_| "layout lock poisoned")?
                .push(fixed),
            None => {
                if let Some(l) = location {
                    self.index.space.free(l.addr, l.size)?;
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
