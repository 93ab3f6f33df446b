//! Chunk indexes that live in metadata (v1 B-tree, fixed array, extensible array, v2 B-tree):
//! each lookup walks the index through the metadata cache.
//!
//! A layout holds a `Weak` reference to its file: the file owns the chunk cache that owns the
//! layout, so a strong one would be a cycle.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use h5_chunkcache::{ChunkCoord, LayoutError};
use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree1::{BtreeV1Node, Keys, NodeType, node_len};
use h5_format::btree2::{Record, RecordContext};
use h5_format::extensible_array::{
    DataBlockParent, ExtensibleArrayDataBlock, ExtensibleArrayHeader, ExtensibleArrayIndexBlock,
    ExtensibleArraySlot, ExtensibleArraySuperBlock,
};
use h5_format::fixed_array::{
    ChunkEntry, FixedArrayDataBlock, FixedArrayHeader, FixedArraySlot, decode_page,
};
use h5_metacache::MetadataKind as K;

use crate::file::FileShared;
use crate::layouts::{ChunkIndex, ChunkRecord};
use crate::meta::Load;
use crate::walk;

fn file_of(w: &Weak<FileShared>) -> Result<Arc<FileShared>, LayoutError> {
    w.upgrade().ok_or_else(|| "the file was closed".into())
}

fn usize_of(v: u64) -> Result<usize, LayoutError> {
    usize::try_from(v).map_err(|_| "size does not fit in memory".into())
}

/// Row-major linear index of `coord` over a grid of `counts` chunks per dimension (with the
/// dimension `first` moved to the front, for extensible arrays).
fn linear(coord: &ChunkCoord, counts: &[u64], first: Option<usize>) -> Option<u64> {
    let c = coord.as_slice();
    let mut order: Vec<usize> = (0..c.len()).collect();
    if let Some(f) = first
        && f < order.len()
    {
        order.remove(f);
        order.insert(0, f);
    }
    let mut lin = 0u64;
    for (k, &d) in order.iter().enumerate() {
        let n = if k == 0 && first.is_some() {
            u64::MAX // the unlimited dimension, slowest: any count
        } else {
            counts[d]
        };
        if c[d] >= n {
            return None;
        }
        lin = lin
            .checked_mul(if k == 0 { 1 } else { n })?
            .checked_add(c[d])?;
    }
    Some(lin)
}

fn record(e: &ChunkEntry, full: u64) -> Option<ChunkRecord> {
    e.is_allocated().then(|| ChunkRecord {
        addr: e.address,
        size: e.size.unwrap_or(full),
        filter_mask: e.filter_mask,
    })
}

/// Chunk count per dimension for `dims` in chunks of `chunk`.
pub fn grid(dims: &[u64], chunk: &[u64]) -> Vec<u64> {
    dims.iter()
        .zip(chunk)
        .map(|(&d, &c)| d.div_ceil(c.max(1)))
        .collect()
}

/// Converts relative chunk addresses into absolute ones.
fn absolute(file: &FileShared, r: Option<ChunkRecord>) -> Result<Option<ChunkRecord>, LayoutError> {
    match r {
        Some(mut r) => {
            r.addr = file.abs(r.addr).map_err(|e| Box::new(e) as LayoutError)?;
            Ok(Some(r))
        }
        None => Ok(None),
    }
}

/// v1 B-tree chunk index (layouts v1–v3): the whole tree is read once and kept as a map from
/// scaled coordinates to records.
#[derive(Debug)]
pub struct BtreeV1Index {
    /// The file.
    pub file: Weak<FileShared>,
    /// Root node address.
    pub root: u64,
    /// Chunk dimensions.
    pub chunk_dims: Vec<u64>,
    /// The map, built on first use.
    pub map: ChunkMap,
}

impl BtreeV1Index {
    fn build(&self, file: &FileShared) -> Result<HashMap<Vec<u64>, ChunkRecord>, LayoutError> {
        Ok(read_chunk_btree(file, self.root, &self.chunk_dims)?.0)
    }
}

/// Chunk records by scaled chunk coordinates.
pub(crate) type ChunkRecords = HashMap<Vec<u64>, ChunkRecord>;

/// Reads a whole v1 B-tree chunk index (root at relative `root`, chunks of `chunk_dims`):
/// every record by scaled coordinates, and the relative address and length of every node but
/// the root (what a rewrite of the index frees).
pub(crate) fn read_chunk_btree(
    file: &FileShared,
    root: u64,
    chunk_dims: &[u64],
) -> Result<(ChunkRecords, Vec<(u64, u64)>), LayoutError> {
    let sizes = file.sizes;
    let k = file.superblock.indexed_storage_k.unwrap_or(32);
    let rank1 = chunk_dims.len() + 1;
    let len = node_len(sizes, k, NodeType::RawData, rank1)?;
    let mut map = HashMap::new();
    let mut nodes = Vec::new();
    let mut stack = vec![(root, 0usize)];
    while let Some((addr, depth)) = stack.pop() {
        if depth > 64 {
            return Err("chunk B-tree too deep (a cycle?)".into());
        }
        let node: Arc<BtreeV1Node> = file
            .load(
                K::BTreeV1Node,
                addr,
                Load::exact(len, move |b| {
                    BtreeV1Node::decode(b, sizes, addr, Some(rank1))
                }),
            )
            .map_err(|e| Box::new(e) as LayoutError)?;
        if addr != root {
            nodes.push((addr, len as u64));
        }
        if node.level > 0 {
            stack.extend(node.children.iter().map(|&c| (c, depth + 1)));
            continue;
        }
        let Keys::RawData(keys) = &node.keys else {
            return Err("group node in a chunk B-tree".into());
        };
        for (key, &child) in keys.iter().zip(&node.children) {
            let scaled: Vec<u64> = key
                .offsets
                .iter()
                .zip(chunk_dims)
                .map(|(&o, &c)| o / c.max(1))
                .collect();
            map.insert(
                scaled,
                ChunkRecord {
                    addr: file.abs(child).map_err(|e| Box::new(e) as LayoutError)?,
                    size: u64::from(key.chunk_size),
                    filter_mask: key.filter_mask,
                },
            );
        }
    }
    Ok((map, nodes))
}

/// A B-tree index read once into a map from scaled coordinates to records.
pub type ChunkMap = Mutex<Option<HashMap<Vec<u64>, ChunkRecord>>>;

/// Looks `coords` up in `map`, building it with `build` on first use.
fn lookup_in_map(
    map: &ChunkMap,
    coords: &[ChunkCoord],
    build: impl FnOnce() -> Result<HashMap<Vec<u64>, ChunkRecord>, LayoutError>,
) -> Result<Vec<Option<ChunkRecord>>, LayoutError> {
    let mut guard = map.lock().map_err(|_| "index lock poisoned")?;
    if guard.is_none() {
        *guard = Some(build()?);
    }
    let map = guard.as_ref().ok_or("index not built")?;
    Ok(coords
        .iter()
        .map(|c| map.get(c.as_slice()).copied())
        .collect())
}

impl ChunkIndex for BtreeV1Index {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>, LayoutError> {
        let file = file_of(&self.file)?;
        lookup_in_map(&self.map, coords, || self.build(&file))
    }
}

/// v2 B-tree chunk index (layout v4, several unlimited dimensions): read once into a map.
#[derive(Debug)]
pub struct BtreeV2Index {
    /// The file.
    pub file: Weak<FileShared>,
    /// Header address.
    pub header: u64,
    /// Dataset rank.
    pub rank: usize,
    /// Bytes of an unfiltered chunk.
    pub chunk_bytes: u64,
    /// Width of the records' chunk size field (filtered chunks), from the layout version.
    pub chunk_size_len: usize,
    /// The map, built on first use.
    pub map: ChunkMap,
}

impl ChunkIndex for BtreeV2Index {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>, LayoutError> {
        let file = file_of(&self.file)?;
        lookup_in_map(&self.map, coords, || {
            let ctx = RecordContext {
                chunk_size_len: self.chunk_size_len,
                ..RecordContext::for_chunks(file.sizes, self.rank, self.chunk_bytes)
            };
            let recs = walk::btree2_records(&file, self.header, ctx)
                .map_err(|e| Box::new(e) as LayoutError)?;
            let mut map = HashMap::new();
            for r in recs {
                let (addr, size, mask, scaled) = match r {
                    Record::Chunk { address, scaled } => (address, self.chunk_bytes, 0, scaled),
                    Record::FilteredChunk {
                        address,
                        size,
                        filter_mask,
                        scaled,
                    } => (address, size, filter_mask, scaled),
                    _ => return Err("a non-chunk record in a chunk B-tree".into()),
                };
                let abs = file.abs(addr).map_err(|e| Box::new(e) as LayoutError)?;
                map.insert(
                    scaled,
                    ChunkRecord {
                        addr: abs,
                        size,
                        filter_mask: mask,
                    },
                );
            }
            Ok(map)
        })
    }
}

/// Fixed array chunk index (layout v4, fixed maximum dimensions).
#[derive(Debug)]
pub struct FixedArrayIndex {
    /// The file.
    pub file: Weak<FileShared>,
    /// Header address.
    pub header: u64,
    /// Chunks per dimension over the maximum dimensions.
    pub counts: Vec<u64>,
    /// Bytes of an unfiltered chunk.
    pub chunk_bytes: u64,
}

impl ChunkIndex for FixedArrayIndex {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>, LayoutError> {
        let file = file_of(&self.file)?;
        let sizes = file.sizes;
        let at = self.header;
        let hdr: Arc<FixedArrayHeader> = file
            .load(
                K::FixedArrayHeader,
                at,
                Load::exact(FixedArrayHeader::encoded_len(sizes), move |b| {
                    FixedArrayHeader::decode(b, sizes, at)
                }),
            )
            .map_err(|e| Box::new(e) as LayoutError)?;
        if hdr.data_block_address == UNDEFINED_ADDRESS {
            return Ok(vec![None; coords.len()]);
        }
        let h = Arc::clone(&hdr);
        let db_at = hdr.data_block_address;
        let db: Arc<FixedArrayDataBlock> = file
            .load(
                K::FixedArrayDataBlock,
                db_at,
                Load::exact(usize_of(hdr.data_block_len(sizes))?, move |b| {
                    FixedArrayDataBlock::decode(b, &h, sizes, db_at)
                }),
            )
            .map_err(|e| Box::new(e) as LayoutError)?;
        let mut out = Vec::with_capacity(coords.len());
        for c in coords {
            let Some(i) = linear(c, &self.counts, None) else {
                out.push(None);
                continue;
            };
            let entry = match hdr.locate(sizes, i) {
                None => None,
                Some(FixedArraySlot::DataBlock { element }) => db.elements.get(element).copied(),
                Some(FixedArraySlot::Page {
                    page,
                    element,
                    address,
                    len,
                    elements,
                }) => {
                    if !db.page_initialized(page) {
                        None
                    } else {
                        let format = hdr.format;
                        let page_entries: Arc<Vec<ChunkEntry>> = file
                            .load(
                                K::FixedArrayDataBlockPage,
                                address,
                                Load::exact(len, move |b| {
                                    decode_page(b, &format, sizes, elements, address)
                                }),
                            )
                            .map_err(|e| Box::new(e) as LayoutError)?;
                        page_entries.get(element).copied()
                    }
                }
            };
            out.push(absolute(
                &file,
                entry.and_then(|e| record(&e, self.chunk_bytes)),
            )?);
        }
        Ok(out)
    }
}

/// Extensible array chunk index (layout v4, one unlimited dimension).
#[derive(Debug)]
pub struct ExtensibleArrayIndex {
    /// The file.
    pub file: Weak<FileShared>,
    /// Header address.
    pub header: u64,
    /// Chunks per dimension over the maximum dimensions (the unlimited one ignored).
    pub counts: Vec<u64>,
    /// The unlimited dimension (moved to the front when linearising, as libhdf5 does).
    pub unlimited: usize,
    /// Bytes of an unfiltered chunk.
    pub chunk_bytes: u64,
}

impl ExtensibleArrayIndex {
    fn entry(
        &self,
        file: &FileShared,
        hdr: &Arc<ExtensibleArrayHeader>,
        ib: &ExtensibleArrayIndexBlock,
        i: u64,
    ) -> Result<Option<ChunkEntry>, LayoutError> {
        let sizes = file.sizes;
        let boxed = |e: crate::Error| Box::new(e) as LayoutError;
        let Some(slot) = hdr.locate(i) else {
            return Ok(None);
        };
        let (super_block, parent, n, element, page) = match slot {
            ExtensibleArraySlot::IndexBlock { element } => {
                return Ok(ib.elements.get(element).copied());
            }
            ExtensibleArraySlot::DataBlock {
                super_block,
                parent,
                data_block_elements,
                element,
                page,
                ..
            } => (super_block, parent, data_block_elements, element, page),
        };
        let (db_addr, sb) = match parent {
            DataBlockParent::IndexBlock { slot } => {
                (ib.data_block_addresses.get(slot).copied(), None)
            }
            DataBlockParent::SuperBlock { slot, data_block } => {
                let Some(&sb_addr) = ib.super_block_addresses.get(slot) else {
                    return Ok(None);
                };
                if sb_addr == UNDEFINED_ADDRESS {
                    return Ok(None);
                }
                let h = Arc::clone(hdr);
                let sb: Arc<ExtensibleArraySuperBlock> = file
                    .load(
                        K::ExtensibleArraySuperBlock,
                        sb_addr,
                        Load::exact(
                            usize_of(hdr.super_block_len(sizes, super_block))?,
                            move |b| {
                                ExtensibleArraySuperBlock::decode(
                                    b,
                                    &h,
                                    sizes,
                                    super_block,
                                    sb_addr,
                                )
                            },
                        ),
                    )
                    .map_err(boxed)?;
                (sb.data_block_addresses.get(data_block).copied(), Some(sb))
            }
        };
        let Some(db_addr) = db_addr.filter(|&a| a != UNDEFINED_ADDRESS) else {
            return Ok(None);
        };
        let element = usize_of(element)?;
        if let Some(p) = page {
            if let (Some(bit), Some(sb)) = (p.bitmap_bit, &sb)
                && !sb.page_initialized(bit)
            {
                return Ok(None);
            }
            let page_addr = hdr.page_address(sizes, db_addr, p.page);
            let h = Arc::clone(hdr);
            let entries: Arc<Vec<ChunkEntry>> = file
                .load(
                    K::ExtensibleArrayDataBlockPage,
                    page_addr,
                    Load::exact(usize_of(hdr.page_len())?, move |b| {
                        h5_format::extensible_array::decode_page(b, &h, sizes, page_addr)
                    }),
                )
                .map_err(boxed)?;
            return Ok(entries.get(p.element).copied());
        }
        let h = Arc::clone(hdr);
        let db: Arc<ExtensibleArrayDataBlock> = file
            .load(
                K::ExtensibleArrayDataBlock,
                db_addr,
                Load::exact(usize_of(hdr.data_block_len(sizes, n))?, move |b| {
                    ExtensibleArrayDataBlock::decode(b, &h, sizes, n, db_addr)
                }),
            )
            .map_err(boxed)?;
        Ok(db.elements.get(element).copied())
    }
}

impl ChunkIndex for ExtensibleArrayIndex {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>, LayoutError> {
        let file = file_of(&self.file)?;
        let sizes = file.sizes;
        let at = self.header;
        let boxed = |e: crate::Error| Box::new(e) as LayoutError;
        let hdr: Arc<ExtensibleArrayHeader> = file
            .load(
                K::ExtensibleArrayHeader,
                at,
                Load::exact(ExtensibleArrayHeader::encoded_len(sizes), move |b| {
                    ExtensibleArrayHeader::decode(b, sizes, at)
                }),
            )
            .map_err(boxed)?;
        if hdr.index_block_address == UNDEFINED_ADDRESS {
            return Ok(vec![None; coords.len()]);
        }
        let h = Arc::clone(&hdr);
        let ib_at = hdr.index_block_address;
        let ib: Arc<ExtensibleArrayIndexBlock> = file
            .load(
                K::ExtensibleArrayIndexBlock,
                ib_at,
                Load::exact(usize_of(hdr.index_block_len(sizes))?, move |b| {
                    ExtensibleArrayIndexBlock::decode(b, &h, sizes, ib_at)
                }),
            )
            .map_err(boxed)?;
        let mut out = Vec::with_capacity(coords.len());
        for c in coords {
            let e = match linear(c, &self.counts, Some(self.unlimited)) {
                Some(i) => self.entry(&file, &hdr, &ib, i)?,
                None => None,
            };
            out.push(absolute(
                &file,
                e.and_then(|e| record(&e, self.chunk_bytes)),
            )?);
        }
        Ok(out)
    }
}
