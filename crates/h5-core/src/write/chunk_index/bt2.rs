//! Version 2 B-tree chunk indexes (record types 10 and 11, keyed by scaled coordinates):
//! rebuilt bottom-up at flush as the shallowest tree holding every record, the records spread
//! evenly over the nodes of each level.

use std::collections::BTreeMap;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree2::{
    Btree2Header, Btree2Node, Btree2Params, Btree2Type, ChildPointer, Record, RecordContext,
};
use h5_metacache::MetadataKind as K;

use super::{ArrayIndex, LaidOut, put_parent};
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::ChunkRecord;
use crate::meta::Decoded;
use crate::write::alloc::SpaceKind;

/// libhdf5's node size of chunk index B-trees (`H5D_BT2_NODE_SIZE`).
pub(crate) const BT2_NODE_SIZE: u32 = 2048;
/// libhdf5's split percentage (`H5D_BT2_SPLIT_PERC`).
pub(crate) const BT2_SPLIT_PERCENT: u8 = 100;
/// libhdf5's merge percentage (`H5D_BT2_MERGE_PERC`).
pub(crate) const BT2_MERGE_PERCENT: u8 = 40;

/// Deepest tree built (far beyond any real chunk count).
const MAX_DEPTH: u16 = 8;

/// The tree parameters and record context of `ix`.
fn params(ix: &ArrayIndex, sizes: h5_format::Sizes) -> Result<(Btree2Params, RecordContext)> {
    let ctx = RecordContext {
        chunk_size_len: ix.chunk_size_len,
        ..RecordContext::for_chunks(sizes, ix.chunk_dims.len(), ix.chunk_bytes)
    };
    let tree_type = if ix.filtered {
        Btree2Type::FilteredChunks
    } else {
        Btree2Type::Chunks
    };
    let record_size = u16::try_from(ctx.record_size(tree_type))
        .map_err(|_| Error::Unsupported("a chunk record of that rank".into()))?;
    Ok((
        Btree2Params {
            tree_type,
            node_size: BT2_NODE_SIZE,
            record_size,
            split_percent: BT2_SPLIT_PERCENT,
            merge_percent: BT2_MERGE_PERCENT,
        },
        ctx,
    ))
}

/// Builds the subtree of `depth` holding `recs` (which fit it); returns its pointer.
fn build(
    file: &FileShared,
    limits: &Btree2Header,
    depth: u16,
    recs: &[Record],
    nodes: &mut Vec<Btree2Node>,
) -> Result<ChildPointer> {
    let address = file.allocate(SpaceKind::Meta, u64::from(BT2_NODE_SIZE))?;
    if depth == 0 {
        nodes.push(Btree2Node {
            address,
            depth,
            records: recs.to_vec(),
            children: Vec::new(),
        });
        return Ok(ChildPointer {
            address,
            records: recs.len() as u64,
            total_records: recs.len() as u64,
        });
    }
    let below = limits
        .limits_at(depth - 1)
        .ok_or_else(|| Error::Unsupported("v2 B-tree geometry".into()))?
        .cumulative_max_records;
    let n = recs.len() as u64;
    // k children and k - 1 separating records, each child holding at most `below`.
    let k = (n + 1).div_ceil(below + 1).max(2);
    let in_children = n - (k - 1);
    let mut records = Vec::with_capacity(k as usize - 1);
    let mut children = Vec::with_capacity(k as usize);
    let mut at = 0usize;
    for c in 0..k {
        let take = (in_children / k + u64::from(c < in_children % k)) as usize;
        children.push(build(file, limits, depth - 1, &recs[at..at + take], nodes)?);
        at += take;
        if c + 1 < k {
            records.push(recs[at].clone());
            at += 1;
        }
    }
    let total = n;
    nodes.push(Btree2Node {
        address,
        depth,
        records,
        children,
    });
    Ok(ChildPointer {
        address,
        records: k - 1,
        total_records: total,
    })
}

pub(super) fn lay_out(
    ix: &ArrayIndex,
    file: &FileShared,
    records: &BTreeMap<Vec<u64>, ChunkRecord>,
) -> Result<LaidOut> {
    let sizes = file.sizes;
    let (params, ctx) = params(ix, sizes)?;
    let mut recs = Vec::with_capacity(records.len());
    for (off, r) in records {
        let e = ix.entry(file, r)?;
        let scaled = ix.scaled(off);
        recs.push(if ix.filtered {
            Record::FilteredChunk {
                address: e.address,
                size: r.size,
                filter_mask: r.filter_mask,
                scaled,
            }
        } else {
            Record::Chunk {
                address: e.address,
                scaled,
            }
        });
    }
    let empty = ChildPointer {
        address: UNDEFINED_ADDRESS,
        records: 0,
        total_records: 0,
    };
    let deep = Btree2Header::new(sizes, ix.header, params, MAX_DEPTH, empty)?;
    let mut out = LaidOut::default();
    let (depth, root) = if recs.is_empty() {
        (0, empty)
    } else {
        let n = recs.len() as u64;
        let depth = (0..=MAX_DEPTH)
            .find(|d| {
                deep.limits_at(*d)
                    .is_some_and(|l| l.cumulative_max_records >= n)
            })
            .ok_or_else(|| Error::Unsupported("too many chunks for a v2 B-tree".into()))?;
        let mut nodes = Vec::new();
        let root = build(file, &deep, depth, &recs, &mut nodes)?;
        let header = Btree2Header::new(sizes, ix.header, params, depth, root)?;
        // `nodes` is in post-order: every node after the nodes it points at.
        for node in nodes {
            let kind = if node.depth == 0 {
                K::BTreeV2Leaf
            } else {
                K::BTreeV2Internal
            };
            out.placed
                .push((kind, node.address, u64::from(BT2_NODE_SIZE)));
            let children: Vec<u64> = node.children.iter().map(|c| c.address).collect();
            let h = header.clone();
            put_parent(
                file,
                kind,
                node.address,
                Decoded::writable(BT2_NODE_SIZE as usize, node, move |n: &Btree2Node| {
                    n.encode(&h, &ctx)
                }),
                &children,
                &mut out.deps,
            )?;
        }
        (depth, root)
    };
    let header = Btree2Header::new(sizes, ix.header, params, depth, root)?;
    let children: Vec<u64> = if root.address == UNDEFINED_ADDRESS {
        Vec::new()
    } else {
        vec![root.address]
    };
    put_parent(
        file,
        K::BTreeV2Header,
        ix.header,
        Decoded::writable(
            Btree2Header::encoded_len(sizes),
            header,
            move |h: &Btree2Header| h.encode(sizes),
        ),
        &children,
        &mut out.deps,
    )?;
    Ok(out)
}
