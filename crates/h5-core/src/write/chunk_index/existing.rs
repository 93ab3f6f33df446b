//! Writable indexes of chunked datasets that existed before the file was opened for writing,
//! with a layout version 4 index. Fixed and extensible arrays are changed in place whatever
//! their creation parameters; a single chunk and implicit chunks need no structure; a v2
//! B-tree is changed in place too (when it has libhdf5's default parameters).

use std::sync::Arc;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::message::dataspace::UNLIMITED;
use h5_format::message::layout::{ChunkIndex, LayoutClass};

use super::ChunkBtree as Btree2Index;
use super::bounded::BoundedIndex;
use super::bt2::{BT2_MERGE_PERCENT, BT2_NODE_SIZE, BT2_SPLIT_PERCENT};
use super::btree2::BtreeV2Chunks;
use super::create::Structure;
use super::lazy::LazyIndex;
use super::simple::{ImplicitChunks, SingleChunk};
use crate::dataset::DatasetInfo;
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::indexes::earray::ExtensibleArrayIndex;
use crate::indexes::farray::FixedArrayIndex;
use crate::layouts::ChunkRecord;
use crate::write::chunks::{ChunkSpace, WritableChunkIndex};

/// The writable index of an existing chunked dataset with a layout version 4 index (single
/// chunk, implicit, fixed array, extensible array, v2 B-tree), or `None` when h5 cannot write
/// that index (a v2 B-tree with creation parameters other than libhdf5's defaults, which h5
/// lays out; an implicit index never allocated). An index never made (address undefined) is
/// made with the first chunk written (`lazy.rs`).
pub(crate) fn load(
    file: &Arc<FileShared>,
    info: &DatasetInfo,
    chunk: &[u64],
    space: ChunkSpace,
) -> Result<Option<Arc<dyn WritableChunkIndex>>> {
    let LayoutClass::Chunked { index, .. } = &info.layout.class else {
        return Ok(None);
    };
    let dims = info.dims().to_vec();
    let max = info
        .dataspace
        .max_dims
        .clone()
        .unwrap_or_else(|| dims.clone());
    let chunk_elems = chunk
        .iter()
        .try_fold(1u64, |a, c| a.checked_mul(*c))
        .ok_or_else(|| Error::Invalid("chunk too large".into()))?;
    let chunk_bytes = chunk_elems
        .checked_mul(info.elem_size() as u64)
        .ok_or_else(|| Error::Invalid("chunk too large".into()))?;
    let filtered = info
        .pipeline
        .as_ref()
        .is_some_and(|p| !p.filters.is_empty());
    let counts: Vec<u64> = max
        .iter()
        .zip(chunk)
        .map(|(m, c)| {
            if *m == UNLIMITED {
                u64::MAX
            } else {
                m.div_ceil((*c).max(1))
            }
        })
        .collect();
    let sizes = file.sizes;
    let chunk_size_len =
        h5_format::btree2::filtered_chunk_size_len(info.layout.version, sizes, chunk_bytes);
    // h5 writes v2 B-trees with libhdf5's default parameters only.
    if let ChunkIndex::BtreeV2 {
        node_size,
        split_percent,
        merge_percent,
        ..
    } = *index
        && (node_size, split_percent, merge_percent)
            != (BT2_NODE_SIZE, BT2_SPLIT_PERCENT, BT2_MERGE_PERCENT)
    {
        return Ok(None);
    }
    let out: Arc<dyn WritableChunkIndex> = match *index {
        ChunkIndex::BtreeV1 { .. } => return Ok(None),
        ChunkIndex::SingleChunk { address, filtered } => {
            let record = if address == UNDEFINED_ADDRESS {
                None
            } else {
                let (size, filter_mask) = filtered.unwrap_or((chunk_bytes, 0));
                Some(ChunkRecord {
                    addr: file.abs(address)?,
                    size,
                    filter_mask,
                })
            };
            Arc::new(SingleChunk::new(
                info.layout.clone(),
                Some(info.address),
                record,
                space,
            ))
        }
        ChunkIndex::Implicit { address } => {
            if address == UNDEFINED_ADDRESS {
                return Ok(None);
            }
            Arc::new(ImplicitChunks {
                base: file.abs(address)?,
                counts,
                chunk_bytes,
                space,
            })
        }
        // (Single-chunk and implicit indexes are matched above.)
        _ if index.address() == UNDEFINED_ADDRESS => {
            // Never written (libhdf5 makes the index with the first chunk): so does h5. It
            // holds no chunk: bounded like every index that starts empty in this session.
            let mut cdims = chunk.to_vec();
            cdims.push(info.elem_size() as u64);
            let structure = Structure {
                template: *index,
                cdims,
                counts,
                chunk_bytes,
                chunk_size_len,
                filtered,
                unlimited: max.iter().position(|m| *m == UNLIMITED).unwrap_or(0),
                space,
            };
            let lazy = Arc::new(LazyIndex::new(
                Arc::downgrade(file),
                Some(info.address),
                info.layout.clone(),
                Box::new(move |f: &FileShared| structure.make(f)),
            ));
            Arc::new(BoundedIndex::empty(lazy, chunk.len()))
        }
        ChunkIndex::FixedArray { address, .. } => Arc::new(FixedArrayIndex {
            meta: file.cache_handle(),
            header: address,
            counts,
            chunk_bytes,
            space: Some(space),
        }),
        ChunkIndex::ExtensibleArray { address, .. } => Arc::new(ExtensibleArrayIndex {
            meta: file.cache_handle(),
            header: address,
            counts,
            unlimited: max.iter().position(|m| *m == UNLIMITED).unwrap_or(0),
            chunk_bytes,
            space: Some(space),
            encoders: Default::default(),
            last_data_block: Default::default(),
        }),
        ChunkIndex::BtreeV2 { address, .. } => {
            // The tree is changed in place: nothing to read.
            let tree = Btree2Index {
                header: address,
                rank: chunk.len(),
                chunk_bytes,
                chunk_size_len,
                filtered,
            };
            Arc::new(BtreeV2Chunks::new(tree, Arc::downgrade(file), space))
        }
    };
    Ok(Some(out))
}
