//! Chunk indexes that live in metadata (v1 B-tree, fixed array, extensible array, v2 B-tree).
//!
//! Fixed and extensible arrays have one module each that serves both directions: lookups (for
//! readers and writers) and in-place changes (for writers), one entry at a time through the
//! metadata cache. The B-tree readers here still read a whole tree into a map on first use.
//!
//! A B-tree layout holds a `Weak` reference to its file: the file owns the chunk cache that
//! owns the layout, so a strong one would be a cycle. Array indexes hold the file's metadata
//! cache itself (`MetaFile`), which owns no layout.

pub mod earray;
pub mod farray;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use h5_chunkcache::{ChunkCoord, LayoutError};
use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree1::{BtreeV1Node, Keys, NodeType, node_len};
use h5_format::btree2::{Record, RecordContext};
use h5_format::fixed_array::{ArrayClient, ChunkEntry, ElementFormat};
use h5_metacache::MetadataKind as K;

use crate::file::{FileShared, MetaFile};
use crate::layouts::{ChunkIndex, ChunkRecord};
use crate::meta::Load;
use crate::walk;

fn file_of(w: &Weak<FileShared>) -> Result<Arc<FileShared>, LayoutError> {
    w.upgrade().ok_or_else(|| "the file was closed".into())
}

/// `v` as a memory size.
pub(crate) fn usize_of(v: u64) -> crate::Result<usize> {
    usize::try_from(v).map_err(|_| crate::Error::Unsupported("size does not fit in memory".into()))
}

/// Row-major linear index of the scaled coordinates `scaled` over a grid of `counts` chunks
/// per dimension, with dimension `first` (an extensible array's unlimited one, any count)
/// moved to the front; `None` outside the grid.
pub(crate) fn linear(scaled: &[u64], counts: &[u64], first: Option<usize>) -> Option<u64> {
    let mut lin = match first {
        Some(f) => *scaled.get(f)?,
        None => 0,
    };
    for (d, (&x, &n)) in scaled.iter().zip(counts).enumerate() {
        if Some(d) == first {
            continue;
        }
        if x >= n {
            return None;
        }
        lin = lin.checked_mul(n)?.checked_add(x)?;
    }
    Some(lin)
}

/// The record of an array element (`full`: bytes of an unfiltered chunk, for elements without
/// a size); `None` when unallocated.
pub(crate) fn record(
    meta: &MetaFile,
    e: &ChunkEntry,
    full: u64,
) -> crate::Result<Option<ChunkRecord>> {
    if !e.is_allocated() {
        return Ok(None);
    }
    Ok(Some(ChunkRecord {
        addr: meta.abs(e.address)?,
        size: e.size.unwrap_or(full),
        filter_mask: e.filter_mask,
    }))
}

/// The array element of record `r` (absolute address) in an array of `format`.
pub(crate) fn element(
    meta: &MetaFile,
    format: &ElementFormat,
    r: &ChunkRecord,
) -> crate::Result<ChunkEntry> {
    let address = r
        .addr
        .checked_sub(meta.base)
        .ok_or_else(|| crate::Error::Unsupported("a chunk below the base address".into()))?;
    let filtered = format.client == ArrayClient::FilteredChunks;
    Ok(ChunkEntry {
        address,
        size: filtered.then_some(r.size),
        filter_mask: if filtered { r.filter_mask } else { 0 },
    })
}

/// The unallocated element of an array of `format`.
pub(crate) fn empty_element(format: &ElementFormat) -> ChunkEntry {
    ChunkEntry {
        address: UNDEFINED_ADDRESS,
        size: (format.client == ArrayClient::FilteredChunks).then_some(0),
        filter_mask: 0,
    }
}

/// The element format of an array indexing chunks of `chunk_bytes` (with a size and filter
/// mask per element when `filtered`).
pub(crate) fn element_format(
    sizes: h5_format::Sizes,
    filtered: bool,
    chunk_bytes: u64,
) -> crate::Result<ElementFormat> {
    let client = if filtered {
        ArrayClient::FilteredChunks
    } else {
        ArrayClient::Chunks
    };
    Ok(ElementFormat::for_client(
        client,
        sizes,
        h5_format::btree2::chunk_size_len(chunk_bytes),
    )?)
}

/// A reader's error as a layout error.
pub(crate) fn layout_error(e: crate::Error) -> LayoutError {
    Box::new(e)
}

/// Chunk count per dimension for `dims` in chunks of `chunk`.
pub fn grid(dims: &[u64], chunk: &[u64]) -> Vec<u64> {
    dims.iter()
        .zip(chunk)
        .map(|(&d, &c)| d.div_ceil(c.max(1)))
        .collect()
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
    /// The map, built on first use.
    pub map: ChunkMap,
}

impl ChunkIndex for BtreeV2Index {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>, LayoutError> {
        let file = file_of(&self.file)?;
        lookup_in_map(&self.map, coords, || {
            let ctx = RecordContext::for_chunks(file.sizes, self.rank, self.chunk_bytes);
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
