//! Chunk indexes of written datasets: which index a dataset gets (libhdf5's rule per format
//! bound), creating it, and the kinds without a structure of their own (`simple.rs`: single
//! chunk, implicit). Every index is changed in place through the metadata cache: fixed and
//! extensible arrays by their modules in `crate::indexes`, the version 1 B-tree by
//! `crate::btree1::chunk` (`btree1.rs`), the v2 B-tree record by record (`bt2.rs` over
//! `crate::btree2`, behind the trait in `btree2.rs`).
//!
//! Invariants: an index's root or header (the structure the layout message points at) never
//! moves once made; it is made with the dataset's first chunk (`lazy.rs`) unless allocation is
//! early. Every structure goes into the metadata cache as the decoded value the reader loads
//! (so a reader in the same process sees the same types).

pub(crate) mod bounded;
mod bt2;
pub(crate) mod btree1;
pub(crate) mod btree2;
pub(crate) mod create;
pub(crate) mod existing;
pub(crate) mod lazy;
pub(crate) mod simple;

use h5_format::message::dataspace::UNLIMITED;

use crate::error::Result;
use crate::file::FileShared;
use crate::layouts::ChunkRecord;
use crate::write::FormatBounds;

pub(crate) use crate::indexes::earray::EA_PARAMS;
pub(crate) use crate::indexes::farray::FA_PAGE_BITS;
pub(crate) use bt2::{BT2_MERGE_PERCENT, BT2_NODE_SIZE, BT2_SPLIT_PERCENT, ChunkBtree};

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

/// Bytes of the header an index of `kind` needs allocated at creation (fixed array, extensible
/// array or v2 B-tree).
pub(crate) fn header_len(kind: ChunkIndexKind, sizes: h5_format::Sizes) -> usize {
    match kind {
        ChunkIndexKind::FixedArray => h5_format::fixed_array::FixedArrayHeader::encoded_len(sizes),
        ChunkIndexKind::ExtensibleArray => {
            h5_format::extensible_array::ExtensibleArrayHeader::encoded_len(sizes)
        }
        _ => h5_format::btree2::Btree2Header::encoded_len(sizes),
    }
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
}
