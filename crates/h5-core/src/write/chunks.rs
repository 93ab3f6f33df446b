//! Writable chunk-cache layouts: contiguous data at one block (allocated at creation or at the
//! first write), and chunked data kept as an ordered chunk table that reaches the file through
//! its index at flush (the v1 B-tree here; the layout version 4 indexes in `chunk_index/`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use h5_chunkcache::selection::CopyRun;
use h5_chunkcache::{
    Capabilities, Chunk, ChunkCoord, ChunkLayout, DirectPlan, DiskLocation, Encoded, InsertRequest,
    LayoutError, LayoutInfo, Lookup, Udata,
};
use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree1::{BtreeV1Node, ChunkKey, Keys, NodeType, node_len};
use h5_metacache::MetadataKind as K;

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::ChunkRecord;
use crate::meta::Decoded;
use crate::write::alloc::SpaceKind;
use crate::write::put;

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
    /// A version 1 B-tree whose root is at this relative address (fixed: the layout message
    /// points at it).
    BtreeV1 {
        /// Relative root address.
        root: u64,
        /// Node K (the file's indexed storage K: children per node are twice this).
        k: u16,
    },
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

/// The chunks of one dataset by element offset (row-major order of their scaled
/// coordinates), and how they reach the file.
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
    /// The file, for an index changed in place (a v2 B-tree): set when the table is made.
    pub(crate) file: std::sync::OnceLock<std::sync::Weak<FileShared>>,
    /// Changes of a v2 B-tree index made while the file was being dropped (its last flush),
    /// applied by that flush: `(scaled coordinates, record)`, `None` for a deletion.
    pending: Mutex<Vec<(Vec<u64>, Option<ChunkRecord>)>>,
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
            file: std::sync::OnceLock::new(),
            pending: Mutex::new(Vec::new()),
        }
    }

    /// The table of an existing dataset's version 1 B-tree index (root node at relative
    /// `root`): its records, and the nodes a new layout replaces.
    pub(crate) fn load_btree(
        file: &FileShared,
        space: ChunkSpace,
        root: u64,
        chunk_dims: Vec<u64>,
    ) -> Result<Self> {
        let (map, nodes) =
            crate::indexes::read_chunk_btree(file, root, &chunk_dims).map_err(|e| {
                match e.downcast::<Error>() {
                    Ok(e) => *e,
                    Err(e) => Error::Unsupported(format!("reading the chunk index: {e}")),
                }
            })?;
        let records = map
            .into_iter()
            .map(|(scaled, r)| {
                let off = scaled.iter().zip(&chunk_dims).map(|(s, d)| s * d).collect();
                (off, r)
            })
            .collect();
        let table = ChunkTable {
            space,
            shape: IndexShape::BtreeV1 {
                root,
                k: file.chunk_btree_k(),
            },
            chunk_dims,
            records: Mutex::new(records),
            placed: Mutex::new(
                nodes
                    .into_iter()
                    .map(|(a, l)| (K::BTreeV1Node, a, l))
                    .collect(),
            ),
            deps: Mutex::new(Vec::new()),
            dirty: Mutex::new(false),
            file: std::sync::OnceLock::new(),
            pending: Mutex::new(Vec::new()),
        };
        Ok(table)
    }

    /// Frees every chunk and every index block below the root or header, and a version 1
    /// B-tree's root (the dataset is being deleted; other indexes' headers and an implicit
    /// block's unwritten chunks are left unused).
    pub(crate) fn free(&self, file: &FileShared) -> Result<()> {
        if let Some(bt) = self.btree() {
            let space = self.space.clone();
            bt.delete(file, &mut |_, r| {
                if r.size > 0 {
                    space
                        .free(r.addr + space.base, r.size)
                        .map_err(|e| Error::Unsupported(e.to_string()))?;
                }
                Ok(())
            })?;
            *self.dirty.lock().map_err(|_| Error::Poisoned)? = false;
            return Ok(());
        }
        let records = std::mem::take(&mut *self.records.lock().map_err(|_| Error::Poisoned)?);
        if !matches!(self.shape, IndexShape::Compact(_)) {
            for r in records.values() {
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
        if let IndexShape::BtreeV1 { root, k } = &self.shape {
            let rank1 = self.chunk_dims.len() + 1;
            let nlen = node_len(file.sizes, *k, NodeType::RawData, rank1)? as u64;
            crate::write::drop_entry(file, K::BTreeV1Node, *root, nlen)?;
        }
        *self.dirty.lock().map_err(|_| Error::Poisoned)? = false;
        Ok(())
    }

    /// The v2 B-tree index of this table, if it is one: its records live in the tree (changed
    /// in place as chunks come and go), not in `records`.
    pub(crate) fn btree(&self) -> Option<crate::write::chunk_index::ChunkBtree> {
        match &self.shape {
            IndexShape::Array(ix) => ix.btree(),
            _ => None,
        }
    }

    /// The record of chunk `coord` in the B-tree index `bt` (absolute address).
    fn tree_lookup(
        &self,
        bt: &crate::write::chunk_index::ChunkBtree,
        coord: &[u64],
    ) -> Result<Option<ChunkRecord>, LayoutError> {
        let pending = self.pending.lock().map_err(|_| "index lock poisoned")?;
        if let Some((_, r)) = pending.iter().rev().find(|(c, _)| c.as_slice() == coord) {
            return Ok(*r);
        }
        drop(pending);
        let file = self.file_ref()?;
        let r = bt.lookup(&mut crate::access::Reading(&file), coord)?;
        Ok(r.map(|r| ChunkRecord {
            addr: r.addr + self.space.base,
            ..r
        }))
    }

    fn file_ref(&self) -> Result<Arc<FileShared>, LayoutError> {
        self.file
            .get()
            .and_then(std::sync::Weak::upgrade)
            .ok_or_else(|| "the file of a v2 B-tree chunk index is closed".into())
    }

    /// Records chunk `coord` as `r` (absolute address; `None`: deleted) in the B-tree index
    /// `bt`, in place; while the file is being dropped, at its last flush.
    fn tree_set(
        &self,
        bt: &crate::write::chunk_index::ChunkBtree,
        coord: &[u64],
        r: Option<ChunkRecord>,
    ) -> Result<(), LayoutError> {
        match self.file.get().and_then(std::sync::Weak::upgrade) {
            Some(file) => Ok(self.apply(&file, bt, coord, r)?),
            None => {
                self.pending
                    .lock()
                    .map_err(|_| "index lock poisoned")?
                    .push((coord.to_vec(), r));
                Ok(())
            }
        }
    }

    fn apply(
        &self,
        file: &FileShared,
        bt: &crate::write::chunk_index::ChunkBtree,
        coord: &[u64],
        r: Option<ChunkRecord>,
    ) -> Result<()> {
        match r {
            Some(r) => {
                let rel = ChunkRecord {
                    addr: r.addr.checked_sub(self.space.base).ok_or_else(|| {
                        Error::Unsupported("a chunk below the base address".into())
                    })?,
                    ..r
                };
                bt.upsert(file, coord, &rel)
            }
            None => bt.remove(file, coord).map(|_| ()),
        }
    }

    /// Applies the B-tree index changes made while the file was being dropped.
    pub(crate) fn apply_pending(&self, file: &FileShared) -> Result<()> {
        let Some(bt) = self.btree() else {
            return Ok(());
        };
        let pending = std::mem::take(&mut *self.pending.lock().map_err(|_| Error::Poisoned)?);
        for (coord, r) in pending {
            self.apply(file, &bt, &coord, r)?;
        }
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

    fn key(&self, offsets: &[u64], r: Option<&ChunkRecord>) -> Result<ChunkKey> {
        let mut o = offsets.to_vec();
        o.push(0);
        Ok(ChunkKey {
            chunk_size: match r {
                Some(r) => u32::try_from(r.size)
                    .map_err(|_| Error::Unsupported("a chunk of 4 GiB or more".into()))?,
                None => 0,
            },
            filter_mask: r.map_or(0, |r| r.filter_mask),
            offsets: o,
        })
    }

    /// Writes the index into the cache: leaves of up to 2K chunks, then internal levels up to the
    /// root at its fixed address.
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
            IndexShape::BtreeV1 { root, k } => self.lay_out_btree(file, *root, *k),
            IndexShape::Implicit { .. } | IndexShape::Compact(_) => Ok(()),
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

    /// Lays out the v1 B-tree under the root at `root`.
    fn lay_out_btree(&self, file: &FileShared, root_addr: u64, k: u16) -> Result<()> {
        let sizes = file.sizes;
        let rank1 = self.chunk_dims.len() + 1;
        let nlen = node_len(sizes, k, NodeType::RawData, rank1)? as u64;
        let records = self.records.lock().map_err(|_| Error::Poisoned)?.clone();
        // (child address, first key, right key) per child of the level being built.
        let mut level: Vec<(u64, ChunkKey, ChunkKey)> = Vec::with_capacity(records.len());
        for (off, r) in &records {
            let right: Vec<u64> = off
                .iter()
                .zip(&self.chunk_dims)
                .map(|(o, d)| o + d)
                .collect();
            let addr = r
                .addr
                .checked_sub(file.base)
                .ok_or(Error::Unsupported("a chunk below the base address".into()))?;
            level.push((addr, self.key(off, Some(r))?, self.key(&right, None)?));
        }
        let fanout = 2 * usize::from(k);
        let mut depth = 0u8;
        let mut placed = Vec::new();
        loop {
            let empty = [(
                0u64,
                self.key(&vec![0; rank1 - 1], None)?,
                self.key(&vec![0; rank1 - 1], None)?,
            )];
            let groups: Vec<&[(u64, ChunkKey, ChunkKey)]> = if level.is_empty() {
                vec![&empty[..0]]
            } else {
                level.chunks(fanout).collect()
            };
            let root = groups.len() == 1;
            let mut addrs = Vec::with_capacity(groups.len());
            if root {
                addrs.push(root_addr);
            } else {
                for _ in &groups {
                    let a = file.allocate(SpaceKind::Meta, nlen)?;
                    placed.push((K::BTreeV1Node, a, nlen));
                    addrs.push(a);
                }
            }
            let mut next = Vec::with_capacity(groups.len());
            for (i, g) in groups.iter().enumerate() {
                let mut keys: Vec<ChunkKey> = g.iter().map(|c| c.1.clone()).collect();
                let right = g.last().map_or_else(|| empty[0].2.clone(), |c| c.2.clone());
                keys.push(right.clone());
                let node = BtreeV1Node {
                    node_type: NodeType::RawData,
                    level: depth,
                    left_sibling: if i == 0 {
                        UNDEFINED_ADDRESS
                    } else {
                        addrs[i - 1]
                    },
                    right_sibling: addrs.get(i + 1).copied().unwrap_or(UNDEFINED_ADDRESS),
                    keys: Keys::RawData(keys.clone()),
                    children: g.iter().map(|c| c.0).collect(),
                };
                put(
                    file,
                    K::BTreeV1Node,
                    addrs[i],
                    Decoded::writable(nlen as usize, node, move |n: &BtreeV1Node| {
                        n.encode(sizes, k)
                    }),
                )?;
                let first = g
                    .first()
                    .map_or_else(|| empty[0].1.clone(), |c| c.1.clone());
                next.push((addrs[i], first, right));
            }
            if root {
                break;
            }
            level = next;
            depth = depth
                .checked_add(1)
                .ok_or_else(|| Error::Unsupported("chunk B-tree too deep".into()))?;
        }
        *self.placed.lock().map_err(|_| Error::Poisoned)? = placed;
        Ok(())
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
        if let Some(bt) = self.index.btree() {
            let boxed = |e: LayoutError| Error::Unsupported(e.to_string());
            let r = self
                .index
                .tree_lookup(&bt, coord.as_slice())
                .map_err(boxed)?
                .ok_or_else(|| Error::Invalid("the chunk written directly has no record".into()))?;
            let r = ChunkRecord {
                filter_mask: mask,
                ..r
            };
            return self
                .index
                .tree_set(&bt, coord.as_slice(), Some(r))
                .map_err(boxed);
        }
        let mut records = self.index.records.lock().map_err(|_| Error::Poisoned)?;
        let r = records
            .get_mut(&self.index.offsets(coord))
            .ok_or_else(|| Error::Invalid("the chunk written directly has no record".into()))?;
        r.filter_mask = mask;
        drop(records);
        self.index.mark_dirty()
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
        let hint = self.chunk_elems() * self.elem_size;
        let found = |r: Option<ChunkRecord>| match r {
            Some(r) => Lookup::dense(
                Some(DiskLocation {
                    addr: r.addr,
                    size: r.size,
                }),
                hint,
                Box::new(Mask(r.filter_mask)),
            ),
            None => Lookup::dense(None, 0, Box::new(Mask(0))),
        };
        if let Some(bt) = self.index.btree() {
            return coords
                .iter()
                .map(|c| Ok(found(self.index.tree_lookup(&bt, c.as_slice())?)))
                .collect();
        }
        let records = self
            .index
            .records
            .lock()
            .map_err(|_| "index lock poisoned")?;
        Ok(coords
            .iter()
            .map(|c| match records.get(&self.index.offsets(c)) {
                // Implicit chunks all exist from creation (holding the fill value).
                None if self.index.implicit(c).is_some() => {
                    Lookup::dense(self.index.implicit(c), hint, Box::new(Mask(0)))
                }
                r => found(r.copied()),
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
        // A v2 B-tree index takes each record in place; the others' tables are laid out at
        // flush.
        let bt = self.index.btree();
        let mut records = match bt {
            Some(_) => None,
            None => Some(
                self.index
                    .records
                    .lock()
                    .map_err(|_| "index lock poisoned")?,
            ),
        };
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
            let rec = ChunkRecord {
                addr: loc.addr,
                size: loc.size,
                filter_mask: mask,
            };
            match (&bt, records.as_mut()) {
                (Some(bt), _) => self.index.tree_set(bt, r.coord.as_slice(), Some(rec))?,
                (None, Some(records)) => {
                    records.insert(self.index.offsets(&r.coord), rec);
                }
                (None, None) => {}
            }
            out.push(loc);
        }
        if bt.is_none() {
            *self.index.dirty.lock().map_err(|_| "index lock poisoned")? = true;
        }
        Ok(out)
    }

    fn delete_chunk(
        &self,
        coord: &ChunkCoord,
        location: Option<DiskLocation>,
        _: &mut Udata,
    ) -> Result<(), LayoutError> {
        if let Some(bt) = self.index.btree() {
            self.index.tree_set(&bt, coord.as_slice(), None)?;
            if let Some(l) = location {
                self.index.space.free(l.addr, l.size)?;
            }
            return Ok(());
        }
        self.index
            .records
            .lock()
            .map_err(|_| "index lock poisoned")?
            .remove(&self.index.offsets(coord));
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
        *self.index.dirty.lock().map_err(|_| "index lock poisoned")? = true;
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
