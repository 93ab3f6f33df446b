//! Chunk indexes that live in metadata (v1 B-tree, fixed array, extensible array, v2 B-tree).
//!
//! Fixed and extensible arrays have one module each that serves both directions: lookups (for
//! readers and writers) and in-place changes (for writers), one entry at a time through the
//! metadata cache. The v1 and v2 B-trees are descended per lookup (`crate::btree1::chunk`,
//! `crate::write::chunk_index::bt2`).
//!
//! A B-tree layout holds a `Weak` reference to its file: the file owns the chunk cache that
//! owns the layout, so a strong one would be a cycle. Array indexes hold the file's metadata
//! cache itself (`CacheHandle`), which owns no layout.

pub mod earray;
pub mod farray;

use std::sync::{Arc, Weak};

use h5_chunkcache::{ChunkCoord, LayoutError};
use h5_format::UNDEFINED_ADDRESS;
use h5_format::fixed_array::{ArrayClient, ChunkEntry, ElementFormat};

use crate::access::CacheHandle;
use crate::btree1::chunk::ChunkBtree;
use crate::file::FileShared;
use crate::layouts::{ChunkIndex, ChunkRecord};

fn file_of(w: &Weak<FileShared>) -> Result<Arc<FileShared>, LayoutError> {
    w.upgrade().ok_or_else(|| "the file was closed".into())
}

/// `v` as a memory size.
pub(crate) fn usize_of(v: u64) -> crate::Result<usize> {
    usize::try_from(v).map_err(|_| crate::Error::Unsupported("size does not fit in memory".into()))
}

/// A size or index the array header's geometry gives overflows 64 bits: the header (at
/// `address`) is damaged.
pub(crate) fn geometry_overflow(structure: &'static str, address: u64) -> crate::Error {
    crate::Error::Format(h5_format::FormatError::Corrupted {
        structure,
        address,
        reason: "its geometry gives a size or index past 2^64".into(),
    })
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
    meta: &CacheHandle,
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
    meta: &CacheHandle,
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

/// The record of item `k` of a batch insert (the array indexes' `insert_many`).
pub(crate) fn batch_record(
    records: &[(ChunkCoord, ChunkRecord)],
    k: usize,
) -> crate::Result<&ChunkRecord> {
    records
        .get(k)
        .map(|(_, r)| r)
        .ok_or_else(|| crate::Error::Unsupported("a batch insert past its records".into()))
}

/// The unallocated element of an array of `format`.
pub(crate) fn empty_element(format: &ElementFormat) -> ChunkEntry {
    ChunkEntry {
        address: UNDEFINED_ADDRESS,
        size: (format.client == ArrayClient::FilteredChunks).then_some(0),
        filter_mask: 0,
    }
}

/// The element format of an array indexing chunks (with a size of `chunk_size_len` bytes and a
/// filter mask per element when `filtered`; see `h5_format::btree2::filtered_chunk_size_len`).
pub(crate) fn element_format(
    sizes: h5_format::Sizes,
    filtered: bool,
    chunk_size_len: usize,
) -> crate::Result<ElementFormat> {
    let client = if filtered {
        ArrayClient::FilteredChunks
    } else {
        ArrayClient::Chunks
    };
    Ok(ElementFormat::for_client(client, sizes, chunk_size_len)?)
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

/// Advances `scaled` to the next chunk of a grid of `counts` in row-major order (a dimension
/// that reaches its count wraps to 0 and carries); false after the last.
pub(crate) fn next_coords(scaled: &mut [u64], counts: &[u64]) -> bool {
    for (x, &n) in scaled.iter_mut().zip(counts).rev() {
        *x = x.checked_add(1).filter(|&next| next < n).unwrap_or(0);
        if *x != 0 {
            return true;
        }
    }
    false
}

/// v1 B-tree chunk index (layouts v1–v3): every lookup descends the tree through the metadata
/// cache (a batch of lookups shares the nodes it reads); nothing is kept besides the cache.
#[derive(Debug)]
pub struct BtreeV1Index {
    tree: ChunkBtree,
}

impl BtreeV1Index {
    /// The index of `file` whose root node is at relative `root`, for a layout with chunk
    /// dimensions `dims` (the element size last, as in the layout message).
    pub fn new(file: &FileShared, root: u64, dims: Vec<u64>) -> Self {
        BtreeV1Index {
            tree: ChunkBtree::open(file.cache_handle(), root, file.chunk_btree_k(), dims),
        }
    }
}

impl ChunkIndex for BtreeV1Index {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>, LayoutError> {
        let scaled: Vec<&[u64]> = coords.iter().map(ChunkCoord::as_slice).collect();
        self.tree
            .lookup(&scaled)
            .map_err(|e| Box::new(e) as LayoutError)
    }
}

/// v2 B-tree chunk index (layout v4, several unlimited dimensions): each lookup descends the
/// tree through the metadata cache, one node per level.
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
}

impl ChunkIndex for BtreeV2Index {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>, LayoutError> {
        let file = file_of(&self.file)?;
        let tree = crate::write::chunk_index::ChunkBtree {
            header: self.header,
            rank: self.rank,
            chunk_bytes: self.chunk_bytes,
            chunk_size_len: self.chunk_size_len,
            filtered: false,
        };
        let mut a = crate::access::Reading(&file);
        let mut out = Vec::with_capacity(coords.len());
        for c in coords {
            let r = tree.lookup(&mut a, c.as_slice()).map_err(layout_error)?;
            out.push(match r {
                Some(r) => Some(ChunkRecord {
                    addr: file.abs(r.addr).map_err(layout_error)?,
                    ..r
                }),
                None => None,
            });
        }
        Ok(out)
    }
}
