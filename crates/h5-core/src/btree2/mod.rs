//! Version 2 B-trees as metadata-cache clients, for every record type (huge fractal heap
//! objects, dense links and attributes, shared messages, chunk indexes): the header, internal
//! nodes and leaves are cache entries read, changed and written one at a time, in both
//! directions (lookup and iteration for readers; insert, update in place and remove for
//! writers), with libhdf5's algorithms so that trees grow and shrink as libhdf5's do:
//!
//! * insert splits or redistributes a full child before entering it (a node is full at
//!   `split_percent` of its capacity; 2-way redistribution at the edges, 3-way in the middle,
//!   two attempts before a split), and splits the root when it is full (the tree grows by one
//!   level);
//! * remove merges or redistributes a child holding `merge_percent` of its capacity before
//!   entering it (2-way/3-way as for insert), replaces a record found in an internal node by its
//!   successor, collapses a root of one record whose two children fit one node (the tree
//!   shrinks by one level), and deletes a root leaf left empty;
//! * every pointer carries the records of its child and of the child's subtree, kept exact.
//!
//! Node sizes, split and merge percents per use are libhdf5's ([`params_for`]). While a change
//! runs, the nodes on its path stay protected; each changed node is made a flush-dependency
//! child of its parent (the header for the root), so the cache writes children before parents
//! (libhdf5 sets the same dependencies when writing for SWMR).
//!
//! Records are ordered by the tree type's key ([`Key`], `keys.rs`): name hash then name for
//! types 5 and 8 (names read from the fractal heap on a hash tie), creation order for 6 and 9,
//! scaled chunk coordinates for 10 and 11, object ID for huge objects 1–2 and address for 3–4.
//! Shared-message indexes (type 7) are read and written by the same engine given a key; h5
//! does not write shared messages, so it has none.

#[cfg(test)]
mod check;
mod insert;
mod keys;
mod read;
mod remove;
mod reshape;
mod shadow;

use std::cmp::Ordering;
use std::sync::Arc;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree2::RecordContext;
use h5_format::btree2::{Btree2Header, Btree2Node, Btree2Params, Btree2Type, ChildPointer, Record};
use h5_metacache::MetadataKind as K;

#[cfg(test)]
pub(crate) use check::check;
pub(crate) use insert::{insert, update};
pub(crate) use keys::{ChunkKey, HugeAddrKey, HugeIdKey, NameKey, NamedIn, OrderKey};
#[cfg(test)]
pub(crate) use read::records;
pub(crate) use read::{count, find, iterate};
pub(crate) use remove::{delete, remove};

use crate::access::{MetaAccess, Session};
use crate::error::{Error, Result};
use crate::meta::{Decoded, Load};

/// libhdf5's node size of chunk index trees (`H5D_BT2_NODE_SIZE`).
pub(crate) const CHUNK_NODE_SIZE: u32 = 2048;
/// libhdf5's node size of the other trees (links, attributes, huge objects, shared messages).
pub(crate) const NODE_SIZE: u32 = 512;
/// libhdf5's split percent of every tree it creates.
pub(crate) const SPLIT_PERCENT: u8 = 100;
/// libhdf5's merge percent of every tree it creates.
pub(crate) const MERGE_PERCENT: u8 = 40;

/// The creation parameters libhdf5 gives a tree of `tree_type` whose records are described by
/// `ctx`: 2048-byte nodes for chunk indexes (`H5Dbtree2.c`), 512 for dense links and attributes
/// (`H5Gdense.c`, `H5Adense.c`), huge objects (`H5HFhuge.c`) and shared messages; split 100 %,
/// merge 40 % for all.
pub(crate) fn params_for(tree_type: Btree2Type, ctx: &RecordContext) -> Result<Btree2Params> {
    let node_size = match tree_type {
        Btree2Type::Chunks | Btree2Type::FilteredChunks => CHUNK_NODE_SIZE,
        _ => NODE_SIZE,
    };
    Ok(Btree2Params {
        tree_type,
        node_size,
        record_size: u16::try_from(ctx.record_size(tree_type)).map_err(|_| {
            Error::Unsupported(format!(
                "v2 B-tree records of {} bytes",
                ctx.record_size(tree_type)
            ))
        })?,
        split_percent: SPLIT_PERCENT,
        merge_percent: MERGE_PERCENT,
    })
}

/// One v2 B-tree: its header's relative address and what its records need to decode.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tree {
    /// Relative address of the header.
    pub(crate) addr: u64,
    /// Record decoding context.
    pub(crate) ctx: RecordContext,
}

/// How a sought key compares to the key of a record (libhdf5's per-type `compare` callback).
pub(crate) trait Key {
    /// `Less` when the sought key sorts before `rec`'s, `Equal` when it is `rec`'s. May read
    /// other structures (names stored in a fractal heap).
    fn cmp(&self, a: &mut dyn MetaAccess, rec: &Record) -> Result<Ordering>;
}

fn corrupt(address: u64, reason: impl Into<String>) -> Error {
    Error::Format(h5_format::FormatError::Corrupted {
        structure: "v2 B-tree",
        address,
        reason: reason.into(),
    })
}

/// How to load the header at relative `addr` (writable: it carries its encoder).
fn header_load(sizes: h5_format::Sizes, addr: u64) -> Load {
    let len = Btree2Header::encoded_len(sizes);
    // One allocation per load (the decoder); the encoder is made only when the header is read
    // (a cached header, the common case, needs none).
    Load {
        initial: len,
        final_len: None,
        decode: Box::new(move |b| {
            let h = Btree2Header::decode(b, sizes, addr)?;
            Ok(Decoded::writable(len, h, move |h: &Btree2Header| {
                h.encode(sizes)
            }))
        }),
    }
}

/// The header at `tree.addr`.
pub(crate) fn header(a: &mut dyn MetaAccess, tree: &Tree) -> Result<Arc<Btree2Header>> {
    let sizes = a.file().sizes;
    let h: Arc<Btree2Header> = crate::access::get(a, K::BTreeV2Header, tree.addr, || {
        header_load(sizes, tree.addr)
    })?;
    if usize::from(h.record_size) != tree.ctx.record_size(h.tree_type) {
        return Err(corrupt(
            tree.addr,
            format!(
                "record size {} where type {} records are {} bytes",
                h.record_size,
                h.tree_type.as_u8(),
                tree.ctx.record_size(h.tree_type)
            ),
        ));
    }
    Ok(h)
}

/// The cache class of a node at `depth`.
fn node_kind(depth: u16) -> K {
    if depth == 0 {
        K::BTreeV2Leaf
    } else {
        K::BTreeV2Internal
    }
}

/// How to load the node `ptr` points at, at `depth`, in a tree whose geometry is `geom`.
fn node_load(geom: &Arc<Btree2Header>, ctx: RecordContext, ptr: ChildPointer, depth: u16) -> Load {
    let g = Arc::clone(geom);
    let len = geom.node_len();
    // One allocation per load (the decoder): protects and reads of cached nodes, most of a
    // descent, make no encoder; a node read from the file gets its own.
    Load {
        initial: len,
        final_len: None,
        decode: Box::new(move |b| {
            let n = Btree2Node::decode(b, &g, depth, ptr.records, &ctx, ptr.address)?;
            Ok(node_entry(n, &g, ctx))
        }),
    }
}

/// Protects (holds) the node `ptr` points at, at `depth`, for a change below it.
fn protect_node(
    s: &mut Session<'_>,
    tree: &Tree,
    geom: &Arc<Btree2Header>,
    ptr: ChildPointer,
    depth: u16,
) -> Result<crate::access::Held> {
    s.protect(node_kind(depth), ptr.address, || {
        node_load(geom, tree.ctx, ptr, depth)
    })
}

/// Ends a change of held node `h`: it becomes a flush-dependency child of `parent` (when it is
/// still cached) and is released.
fn release_node(
    s: &mut Session<'_>,
    parent: &crate::access::Held,
    h: crate::access::Held,
) -> Result<()> {
    s.depend_held(parent, h.addr)?;
    s.release(h)
}

/// A node as a new cache entry.
fn node_entry(node: Btree2Node, geom: &Arc<Btree2Header>, ctx: RecordContext) -> Decoded {
    let g = Arc::clone(geom);
    Decoded::writable(geom.node_len(), node, move |n: &Btree2Node| {
        n.encode(&g, &ctx)
    })
}

/// The node `ptr` points at, at `depth`, checked against its pointer.
fn node(
    a: &mut dyn MetaAccess,
    geom: &Arc<Btree2Header>,
    ctx: RecordContext,
    ptr: ChildPointer,
    depth: u16,
) -> Result<Arc<Btree2Node>> {
    let n: Arc<Btree2Node> = crate::access::get(a, node_kind(depth), ptr.address, || {
        node_load(geom, ctx, ptr, depth)
    })?;
    check_node(&n, ptr, depth)?;
    Ok(n)
}

/// A node read (or cached) must be the one its pointer describes.
fn check_node(n: &Btree2Node, ptr: ChildPointer, depth: u16) -> Result<()> {
    if n.depth != depth || n.records.len() as u64 != ptr.records {
        return Err(corrupt(
            ptr.address,
            format!(
                "node of depth {} with {} records where its parent says depth {depth}, {} records",
                n.depth,
                n.records.len(),
                ptr.records
            ),
        ));
    }
    Ok(())
}

/// Records a node at `depth` holds before it splits (libhdf5's `split_nrec`).
fn split_nrec(geom: &Btree2Header, depth: u16) -> Result<u64> {
    let l = geom
        .limits_at(depth)
        .ok_or_else(|| corrupt(geom.address, format!("no depth {depth}")))?;
    percent_of(geom, l.max_records, geom.split_percent)
}

/// Records a node at `depth` holds before it merges (libhdf5's `merge_nrec`).
fn merge_nrec(geom: &Btree2Header, depth: u16) -> Result<u64> {
    let l = geom
        .limits_at(depth)
        .ok_or_else(|| corrupt(geom.address, format!("no depth {depth}")))?;
    percent_of(geom, l.max_records, geom.merge_percent)
}

/// `percent` % of `max_records`, rounded down as libhdf5 does.
fn percent_of(geom: &Btree2Header, max_records: u64, percent: u8) -> Result<u64> {
    max_records
        .checked_mul(u64::from(percent))
        .map(|n| n / 100)
        .ok_or_else(|| corrupt(geom.address, format!("{max_records} records per node")))
}

/// The pointer to `n`: its records, and its subtree's.
fn pointer_to(n: &Btree2Node) -> Result<ChildPointer> {
    let own = n.records.len() as u64;
    let total_records = n
        .children
        .iter()
        .try_fold(own, |t, c| t.checked_add(c.total_records))
        .ok_or_else(|| corrupt(n.address, "subtree record counts overflow"))?;
    Ok(ChildPointer {
        address: n.address,
        records: own,
        total_records,
    })
}

/// libhdf5's binary search of `recs` for `key`: the index of an equal record (`Equal`), or of
/// the last record compared (`Less`: the key sorts before it; `Greater`: after it, only when
/// the key sorts after every record).
fn locate(a: &mut dyn MetaAccess, key: &dyn Key, recs: &[Record]) -> Result<(usize, Ordering)> {
    let (mut lo, mut hi) = (0usize, recs.len());
    let (mut idx, mut cmp) = (0usize, Ordering::Less);
    while cmp != Ordering::Equal {
        // The middle record of `lo..hi` (none when it is empty).
        let Some(rec) = recs.get(lo..hi).and_then(|r| r.get(r.len() / 2)) else {
            break;
        };
        idx = lo.midpoint(hi);
        cmp = key.cmp(a, rec)?;
        if cmp == Ordering::Less {
            hi = idx;
        } else {
            // idx < hi: no overflow.
            lo = idx.saturating_add(1);
        }
    }
    Ok((idx, cmp))
}

/// The depth of the children of the internal node `ptr` points at, at `depth` (above 0).
fn child_depth(depth: u16, ptr: ChildPointer) -> Result<u16> {
    depth
        .checked_sub(1)
        .ok_or_else(|| corrupt(ptr.address, "a leaf has no children"))
}

/// Counts one record more in the subtree of `ptr` (and in its own node when `own`).
fn count_added(ptr: &mut ChildPointer, own: bool) -> Result<()> {
    let overflow = || corrupt(ptr.address, "record counts overflow");
    if own {
        ptr.records = ptr.records.checked_add(1).ok_or_else(overflow)?;
    }
    ptr.total_records = ptr.total_records.checked_add(1).ok_or_else(overflow)?;
    Ok(())
}

/// Counts one record less in the subtree of `ptr` (and in its own node when `own`).
fn count_removed(ptr: &mut ChildPointer, own: bool) -> Result<()> {
    let underflow = || corrupt(ptr.address, "record counts below the records removed");
    if own {
        ptr.records = ptr.records.checked_sub(1).ok_or_else(underflow)?;
    }
    ptr.total_records = ptr.total_records.checked_sub(1).ok_or_else(underflow)?;
    Ok(())
}

/// The child of an internal node to descend into for a key located at `(idx, cmp)`.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "idx is a record index, below the length of a Vec"
)]
fn child_index(idx: usize, cmp: Ordering) -> usize {
    if cmp == Ordering::Less { idx } else { idx + 1 }
}

/// Creates an empty tree of `params` (its header allocated now); returns the header's
/// relative address.
pub(crate) fn create(s: &mut Session<'_>, params: Btree2Params) -> Result<u64> {
    let sizes = s.file().sizes;
    let addr = s.allocate(Btree2Header::encoded_len(sizes) as u64)?;
    create_at(s, addr, params)?;
    Ok(addr)
}

/// Puts the header of an empty tree of `params` at relative `addr` (space already allocated,
/// as for chunk indexes whose header address is fixed at dataset creation).
pub(crate) fn create_at(s: &mut Session<'_>, addr: u64, params: Btree2Params) -> Result<()> {
    let sizes = s.file().sizes;
    let empty = ChildPointer {
        address: UNDEFINED_ADDRESS,
        records: 0,
        total_records: 0,
    };
    let h = Btree2Header::new(sizes, addr, params, 0, empty)?;
    s.insert(
        K::BTreeV2Header,
        addr,
        Decoded::writable(
            Btree2Header::encoded_len(sizes),
            h,
            move |h: &Btree2Header| h.encode(sizes),
        ),
    )
}

#[cfg(test)]
mod tests;
