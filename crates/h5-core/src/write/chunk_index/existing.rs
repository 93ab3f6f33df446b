//! Chunk tables of datasets that existed before the file was opened for writing: their records
//! read through the file's index, and the shape that lays the index out again at flush.

use std::sync::{Arc, Mutex};

use h5_format::UNDEFINED_ADDRESS;
use h5_format::message::dataspace::UNLIMITED;
use h5_format::message::layout::{ChunkIndex, LayoutClass};

use super::bt2::{BT2_MERGE_PERCENT, BT2_NODE_SIZE, BT2_SPLIT_PERCENT};
use super::earray::EA_PARAMS;
use super::farray::FA_PAGE_BITS;
use super::{ArrayIndex, ChunkIndexKind};
use crate::dataset::DatasetInfo;
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::ChunkRecord;
use crate::write::alloc::SpaceKind;
use crate::write::chunks::{ChunkSpace, ChunkTable, IndexShape};

/// The chunk table of an existing chunked dataset with a layout version 4 index (single chunk,
/// implicit, fixed array, extensible array, v2 B-tree), or `None` when h5 cannot lay that
/// index out again (creation parameters other than the ones h5 writes, which are libhdf5's
/// defaults; an implicit index never allocated). A header never allocated is allocated now and
/// recorded in the layout message.
pub(crate) fn load(
    file: &Arc<FileShared>,
    info: &DatasetInfo,
    chunk: &[u64],
    space: ChunkSpace,
) -> Result<Option<ChunkTable>> {
    let LayoutClass::Chunked { index, .. } = &info.layout.class else {
        return Ok(None);
    };
    let kind = ChunkIndexKind::of(index);
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
    let (shape, allocated) = match *index {
        ChunkIndex::BtreeV1 { .. } => return Ok(None),
        ChunkIndex::SingleChunk { address, .. } => (
            IndexShape::Single {
                layout: info.layout.clone(),
                header: Mutex::new(Some(info.address)),
            },
            address != UNDEFINED_ADDRESS,
        ),
        ChunkIndex::Implicit { address } => {
            if address == UNDEFINED_ADDRESS {
                return Ok(None);
            }
            (
                IndexShape::Implicit {
                    base: file.abs(address)?,
                    counts: counts.clone(),
                    chunk_bytes,
                },
                true,
            )
        }
        ChunkIndex::FixedArray { address, page_bits } => {
            if page_bits != FA_PAGE_BITS {
                return Ok(None);
            }
            array_shape(
                file,
                info,
                kind,
                address,
                &counts,
                chunk,
                chunk_bytes,
                filtered,
            )?
        }
        ChunkIndex::ExtensibleArray {
            address,
            max_bits,
            index_elements,
            min_pointers,
            min_elements,
            page_bits,
        } => {
            if [
                max_bits,
                index_elements,
                min_pointers,
                min_elements,
                page_bits,
            ] != EA_PARAMS
            {
                return Ok(None);
            }
            array_shape(
                file,
                info,
                kind,
                address,
                &counts,
                chunk,
                chunk_bytes,
                filtered,
            )?
        }
        ChunkIndex::BtreeV2 {
            address,
            node_size,
            split_percent,
            merge_percent,
        } => {
            if (node_size, split_percent, merge_percent)
                != (BT2_NODE_SIZE, BT2_SPLIT_PERCENT, BT2_MERGE_PERCENT)
            {
                return Ok(None);
            }
            array_shape(
                file,
                info,
                kind,
                address,
                &counts,
                chunk,
                chunk_bytes,
                filtered,
            )?
        }
    };
    let table = ChunkTable::new(space, shape, chunk.to_vec());
    if allocated {
        let records = read_records(file, info, chunk)?;
        *table.records.lock().map_err(|_| Error::Poisoned)? = records;
    }
    table.mark_clean()?;
    Ok(Some(table))
}

/// The shape of a fixed array, extensible array or v2 B-tree index, its header allocated (and
/// recorded in the layout message) if it never was; and whether it holds records.
#[allow(clippy::too_many_arguments)]
fn array_shape(
    file: &Arc<FileShared>,
    info: &DatasetInfo,
    kind: ChunkIndexKind,
    address: u64,
    counts: &[u64],
    chunk: &[u64],
    chunk_bytes: u64,
    filtered: bool,
) -> Result<(IndexShape, bool)> {
    let allocated = address != UNDEFINED_ADDRESS;
    let header = if allocated {
        address
    } else {
        let h = file.allocate(
            SpaceKind::Meta,
            ArrayIndex::header_len(kind, file.sizes) as u64,
        )?;
        let mut class = info.layout.class.clone();
        if let LayoutClass::Chunked {
            index:
                ChunkIndex::FixedArray { address, .. }
                | ChunkIndex::ExtensibleArray { address, .. }
                | ChunkIndex::BtreeV2 { address, .. },
            ..
        } = &mut class
        {
            *address = h;
        }
        super::create::rewrite_layout_message(
            file,
            info.address,
            h5_format::message::layout::Layout {
                version: info.layout.version,
                class,
            },
        )?;
        h
    };
    Ok((
        IndexShape::Array(ArrayIndex {
            kind,
            header,
            counts: counts.to_vec(),
            chunk_dims: chunk.to_vec(),
            chunk_bytes,
            chunk_size_len: h5_format::btree2::filtered_chunk_size_len(
                info.layout.version,
                file.sizes,
                chunk_bytes,
            ),
            filtered,
        }),
        allocated,
    ))
}

/// Every written chunk's record, by element offset, read through the file's index.
fn read_records(
    file: &Arc<FileShared>,
    info: &DatasetInfo,
    chunk: &[u64],
) -> Result<std::collections::BTreeMap<Vec<u64>, ChunkRecord>> {
    let layout = crate::dataset::build_layout(file, info)?;
    let counts = crate::indexes::grid(info.dims(), chunk);
    let mut out = std::collections::BTreeMap::new();
    crate::dataset::visit_chunks(layout.as_ref(), &counts, "take over for writing", |c, l| {
        if let Some(r) = l.udata.downcast_ref::<ChunkRecord>() {
            let off = c.as_slice().iter().zip(chunk).map(|(s, d)| s * d).collect();
            out.insert(off, *r);
        }
        Ok(())
    })?;
    Ok(out)
}
