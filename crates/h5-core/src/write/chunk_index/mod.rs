//! Chunk indexes of written datasets: which index a dataset gets (libhdf5's rule per format
//! bound), and how the layout version 4 indexes (fixed array, extensible array, v2 B-tree) are
//! laid out at flush from the dataset's ordered chunk table.
//!
//! Invariants: the index's header (the structure the layout message points at) never moves;
//! everything below it is re-placed as a whole when the table changed since the last flush, the
//! old blocks' space being freed first. Every structure goes into the metadata cache as the
//! decoded value the reader loads (so a reader in the same process sees the same types), and the
//! cache writes them in ascending address order at flush.

mod bt2;
pub(crate) mod create;
mod earray;
pub(crate) mod existing;
mod farray;

use std::collections::BTreeMap;

use h5_format::message::dataspace::UNLIMITED;
use h5_metacache::MetadataKind;

use crate::error::Result;
use crate::file::FileShared;
use crate::layouts::ChunkRecord;
use crate::write::FormatBounds;

pub(crate) use bt2::{BT2_MERGE_PERCENT, BT2_NODE_SIZE, BT2_SPLIT_PERCENT};
pub(crate) use earray::EA_PARAMS;
pub(crate) use farray::{FA_PAGE_BITS, linear};

/// The kind of chunk index of a chunked dataset.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum ChunkIndexKind {
    /// Version 1 B-tree (layout version 3; every HDF5 library reads it).
    BtreeV1,
    /// One chunk covering the whole dataset, its address in the layout message (needs dims ==
    /// max dims == chunk dims).
    SingleChunk,
    /// Chunks allocated together at creation, at computed addresses (needs fixed maximum
    /// dimensions, no filters and early allocation).
    Implicit,
    /// A fixed array over the chunks of the maximum dimensions (needs fixed maximum dimensions).
    FixedArray,
    /// An extensible array (needs exactly one unlimited dimension).
    ExtensibleArray,
    /// A version 2 B-tree of chunk records (any maximum dimensions).
    BtreeV2,
}

impl ChunkIndexKind {
    /// The kind of the index a layout message names.
    pub fn of(index: &h5_format::message::layout::ChunkIndex) -> ChunkIndexKind {
        use h5_format::message::layout::ChunkIndex as I;
        match index {
            I::BtreeV1 { .. } => ChunkIndexKind::BtreeV1,
            I::SingleChunk { .. } => ChunkIndexKind::SingleChunk,
            I::Implicit { .. } => ChunkIndexKind::Implicit,
            I::FixedArray { .. } => ChunkIndexKind::FixedArray,
            I::ExtensibleArray { .. } => ChunkIndexKind::ExtensibleArray,
            I::BtreeV2 { .. } => ChunkIndexKind::BtreeV2,
        }
    }
}

/// The index libhdf5 gives a chunked dataset of `dims`/`max` in chunks of `chunk`, for files
/// whose low format bound is `bounds`: below 1.10 always the v1 B-tree; from 1.10 a single chunk
/// when the dataset is exactly one fixed chunk, implicit when unfiltered with early allocation
/// and fixed maximum dimensions, a fixed array for other fixed maximum dimensions, an extensible
/// array for exactly one unlimited dimension, else a v2 B-tree.
pub fn choose(
    bounds: FormatBounds,
    dims: &[u64],
    max: &[u64],
    chunk: &[u64],
    filtered: bool,
    early: bool,
) -> ChunkIndexKind {
    if bounds < FormatBounds::V110 {
        return ChunkIndexKind::BtreeV1;
    }
    let unlimited = max.iter().filter(|m| **m == UNLIMITED).count();
    if unlimited == 0 && dims == max && dims == chunk {
        ChunkIndexKind::SingleChunk
    } else if unlimited == 0 && early && !filtered {
        ChunkIndexKind::Implicit
    } else if unlimited == 0 {
        ChunkIndexKind::FixedArray
    } else if unlimited == 1 {
        ChunkIndexKind::ExtensibleArray
    } else {
        ChunkIndexKind::BtreeV2
    }
}

/// Checks that `kind` can index a dataset of `max` dims in chunks of `chunk`; returns why not.
pub(crate) fn check(
    kind: ChunkIndexKind,
    dims: &[u64],
    max: &[u64],
    chunk: &[u64],
    filtered: bool,
    early: bool,
) -> std::result::Result<(), String> {
    let unlimited = max.iter().filter(|m| **m == UNLIMITED).count();
    match kind {
        ChunkIndexKind::SingleChunk if !(dims == max && dims == chunk) => {
            Err("a single-chunk index needs dims == max dims == chunk dims".into())
        }
        ChunkIndexKind::Implicit if unlimited > 0 || filtered || !early => Err(
            "an implicit index needs fixed maximum dimensions, no filters and early allocation"
                .into(),
        ),
        ChunkIndexKind::FixedArray if unlimited > 0 => {
            Err("a fixed array index needs fixed maximum dimensions".into())
        }
        ChunkIndexKind::ExtensibleArray if unlimited != 1 => {
            Err("an extensible array index needs exactly one unlimited dimension".into())
        }
        _ => Ok(()),
    }
}

/// What an index laid out at flush needs to know besides its chunk table.
#[derive(Clone, Debug)]
pub(crate) struct ArrayIndex {
    /// Which structure (fixed array, extensible array or v2 B-tree).
    pub(crate) kind: ChunkIndexKind,
    /// Relative address of its header (fixed).
    pub(crate) header: u64,
    /// Chunks per dimension over the maximum dimensions (unlimited ones: `u64::MAX`).
    pub(crate) counts: Vec<u64>,
    /// Chunk dimensions.
    pub(crate) chunk_dims: Vec<u64>,
    /// Bytes of an unfiltered chunk.
    pub(crate) chunk_bytes: u64,
    /// Width of a filtered record's chunk size (from the layout message version, see
    /// `h5_format::btree2::filtered_chunk_size_len`).
    pub(crate) chunk_size_len: usize,
    /// Whether records carry a size and filter mask.
    pub(crate) filtered: bool,
}

/// One structure placed below a header: its cache class, relative address and length (0 for
/// pages, whose space is their block's).
pub(crate) type Placed = (MetadataKind, u64, u64);

/// A flush dependency: the parent (class, relative address) is written after the child
/// (relative address), so that a structure on disk never points at one not yet written.
pub(crate) type Dep = (MetadataKind, u64, u64);

/// What one layout of an index put into the cache below its header.
#[derive(Debug, Default)]
pub(crate) struct LaidOut {
    /// The blocks (removed, and their space freed, when the index is laid out again).
    pub(crate) placed: Vec<Placed>,
    /// Parent → child flush dependencies among the header and the blocks.
    pub(crate) deps: Vec<Dep>,
}

impl ArrayIndex {
    /// Bytes of the header this index needs allocated at creation.
    pub(crate) fn header_len(kind: ChunkIndexKind, sizes: h5_format::Sizes) -> usize {
        match kind {
            ChunkIndexKind::FixedArray => {
                h5_format::fixed_array::FixedArrayHeader::encoded_len(sizes)
            }
            ChunkIndexKind::ExtensibleArray => {
                h5_format::extensible_array::ExtensibleArrayHeader::encoded_len(sizes)
            }
            _ => h5_format::btree2::Btree2Header::encoded_len(sizes),
        }
    }

    /// Scaled chunk coordinates of the element offsets `off`.
    pub(crate) fn scaled(&self, off: &[u64]) -> Vec<u64> {
        off.iter()
            .zip(&self.chunk_dims)
            .map(|(o, c)| o / c.max(&1))
            .collect()
    }

    /// Puts the header and the blocks for `records` (keyed by element offsets, absolute
    /// addresses) into the cache bottom-up, each block or header a flush-dependency parent of
    /// the blocks it points at; returns what was placed (the header excluded).
    pub(crate) fn lay_out(
        &self,
        file: &FileShared,
        records: &BTreeMap<Vec<u64>, ChunkRecord>,
    ) -> Result<LaidOut> {
        match self.kind {
            ChunkIndexKind::FixedArray => farray::lay_out(self, file, records),
            ChunkIndexKind::ExtensibleArray => earray::lay_out(self, file, records),
            _ => bt2::lay_out(self, file, records),
        }
    }

    /// The index's entry for `r` (relative address).
    pub(crate) fn entry(
        &self,
        file: &FileShared,
        r: &ChunkRecord,
    ) -> Result<h5_format::fixed_array::ChunkEntry> {
        let address = r.addr.checked_sub(file.base).ok_or_else(|| {
            crate::error::Error::Unsupported("a chunk below the base address".into())
        })?;
        Ok(h5_format::fixed_array::ChunkEntry {
            address,
            size: self.filtered.then_some(r.size),
            filter_mask: if self.filtered { r.filter_mask } else { 0 },
        })
    }

    /// The array element format of this index's records.
    pub(crate) fn element_format(
        &self,
        sizes: h5_format::Sizes,
    ) -> Result<h5_format::fixed_array::ElementFormat> {
        use h5_format::fixed_array::{ArrayClient, ElementFormat};
        let client = if self.filtered {
            ArrayClient::FilteredChunks
        } else {
            ArrayClient::Chunks
        };
        Ok(ElementFormat::for_client(
            client,
            sizes,
            self.chunk_size_len,
        )?)
    }

    /// The unallocated entry.
    pub(crate) fn empty_entry(&self) -> h5_format::fixed_array::ChunkEntry {
        h5_format::fixed_array::ChunkEntry {
            address: h5_format::UNDEFINED_ADDRESS,
            size: self.filtered.then_some(0),
            filter_mask: 0,
        }
    }
}

/// Sets bits `0..n` of an MSB-first bitmap of `len` bytes.
pub(crate) fn full_bitmap(len: usize, n: u64) -> Vec<u8> {
    let mut b = vec![0u8; len];
    for i in 0..n {
        if let Some(byte) = usize::try_from(i / 8).ok().and_then(|k| b.get_mut(k)) {
            *byte |= 0x80u8 >> (i % 8);
        }
    }
    b
}

/// Puts a parent structure into the cache after its `children` (relative addresses), then makes
/// it their flush-dependency parent (recorded in `deps`), so that the cache writes it only
/// after them. Blocks are put bottom-up for this: a child already evicted has been written.
pub(crate) fn put_parent(
    file: &FileShared,
    kind: MetadataKind,
    addr: u64,
    value: crate::meta::Decoded,
    children: &[u64],
    deps: &mut Vec<Dep>,
) -> Result<()> {
    crate::write::put(file, kind, addr, value)?;
    deps.extend(children.iter().map(|c| (kind, addr, *c)));
    depend(file, kind, addr, children)
}

/// Makes `parent` the flush-dependency parent of its resident `children`. The parent is
/// protected while the dependencies are made (the cache requires a pinned or protected parent;
/// having children then keeps it pinned).
fn depend(file: &FileShared, kind: MetadataKind, parent: u64, children: &[u64]) -> Result<()> {
    use h5_metacache::{ProtectFlags, UnprotectFlags};
    let p = file.abs(parent)?;
    let mut meta = file
        .meta
        .lock()
        .map_err(|_| crate::error::Error::Poisoned)?;
    let mut resident = Vec::with_capacity(children.len());
    for c in children {
        let c = file.abs(*c)?;
        if meta.contains(c) {
            resident.push(c);
        }
    }
    if resident.is_empty() || !meta.contains(p) {
        return Ok(());
    }
    let never =
        crate::meta::Load::exact(0, |_| -> std::result::Result<(), h5_format::FormatError> {
            Err(h5_format::FormatError::Unsupported {
                structure: "chunk index",
                address: h5_format::UNDEFINED_ADDRESS,
                what: "reloading a block being laid out".into(),
            })
        });
    let h = meta
        .protect(kind.id(), p, &never, ProtectFlags::NONE)
        .map_err(crate::file::cache_error)?;
    let mut r = Ok(());
    for c in resident {
        r = meta
            .create_flush_dependency(p, c)
            .map_err(crate::file::cache_error);
        if r.is_err() {
            break;
        }
    }
    meta.unprotect(h, UnprotectFlags::NONE)
        .map_err(|e| crate::error::Error::Cache(e.error))?;
    r
}

/// Destroys the flush dependencies of a previous layout (those whose entries are still
/// resident; an evicted entry took its dependencies with it).
pub(crate) fn undepend(file: &FileShared, deps: &[Dep]) -> Result<()> {
    let mut meta = file
        .meta
        .lock()
        .map_err(|_| crate::error::Error::Poisoned)?;
    for &(_, parent, child) in deps {
        let (p, c) = (file.abs(parent)?, file.abs(child)?);
        if meta.contains(p) && meta.contains(c) {
            meta.destroy_flush_dependency(p, c)
                .map_err(crate::file::cache_error)?;
        }
    }
    Ok(())
}

/// Removes the blocks of a previous layout from the cache, freeing the space of those with a
/// length (pages inside a block have none: their block's space covers them).
pub(crate) fn remove(file: &FileShared, placed: Vec<Placed>) -> Result<()> {
    for (kind, addr, len) in placed {
        if len > 0 {
            crate::write::drop_entry(file, kind, addr, len)?;
        } else {
            let abs = file.abs(addr)?;
            let mut meta = file
                .meta
                .lock()
                .map_err(|_| crate::error::Error::Poisoned)?;
            if meta.contains(abs) {
                meta.expunge(kind.id(), abs, h5_metacache::ExpungeFlags::NONE)
                    .map_err(crate::file::cache_error)?;
            }
        }
    }
    Ok(())
}

/// Rewrites the layout message of the single-chunk dataset whose header is at `at` with the
/// chunk's address (and, when filtered, its stored size and filter mask).
pub(crate) fn single_update(
    file: &FileShared,
    at: u64,
    template: &h5_format::message::layout::Layout,
    record: Option<&ChunkRecord>,
) -> Result<()> {
    use h5_format::message::layout::{ChunkIndex, LayoutClass};
    let mut layout = template.clone();
    if let LayoutClass::Chunked {
        index: ChunkIndex::SingleChunk { address, filtered },
        ..
    } = &mut layout.class
    {
        *address = match record {
            Some(r) => r.addr.checked_sub(file.base).ok_or_else(|| {
                crate::error::Error::Unsupported("a chunk below the base address".into())
            })?,
            None => h5_format::UNDEFINED_ADDRESS,
        };
        if let Some(f) = filtered {
            *f = record.map_or((0, 0), |r| (r.size, r.filter_mask));
        }
    }
    create::rewrite_layout_message(file, at, layout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choice_follows_libhdf5() {
        use ChunkIndexKind as K;
        let u = UNLIMITED;
        let b = FormatBounds::V110;
        assert_eq!(
            choose(FormatBounds::Earliest, &[4], &[4], &[4], false, false),
            K::BtreeV1
        );
        assert_eq!(
            choose(FormatBounds::V18, &[4], &[u], &[2], false, false),
            K::BtreeV1
        );
        assert_eq!(
            choose(b, &[4, 4], &[4, 4], &[4, 4], true, false),
            K::SingleChunk
        );
        assert_eq!(
            choose(b, &[4, 4], &[8, 4], &[2, 2], false, true),
            K::Implicit
        );
        assert_eq!(
            choose(b, &[4, 4], &[8, 4], &[2, 2], true, true),
            K::FixedArray
        );
        assert_eq!(
            choose(b, &[4, 4], &[8, 4], &[2, 2], false, false),
            K::FixedArray
        );
        assert_eq!(
            choose(b, &[4, 4], &[u, 4], &[2, 2], false, false),
            K::ExtensibleArray
        );
        assert_eq!(
            choose(b, &[4, 4], &[u, u], &[2, 2], false, false),
            K::BtreeV2
        );
        assert!(check(K::ExtensibleArray, &[4], &[8], &[2], false, false).is_err());
        assert!(check(K::Implicit, &[4], &[8], &[2], false, false).is_err());
        assert!(check(K::BtreeV2, &[4], &[8], &[2], true, false).is_ok());
    }

    #[test]
    fn bitmap_is_msb_first() {
        assert_eq!(full_bitmap(2, 10), vec![0xFF, 0xC0]);
    }
}
