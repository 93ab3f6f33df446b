//! Version 2 B-trees: the header (`BTHD`), internal nodes (`BTIN`) and leaf nodes (`BTLF`).
//!
//! A v2 B-tree stores fixed-size records whose meaning depends on the tree type (see
//! [`Record`]). Every node occupies `node_size` bytes on disk, but only a prefix is used: the
//! records (and, for internal nodes, one child pointer more than records), then the checksum.
//!
//! The widths of the "number of records" fields in child pointers are not stored; they follow
//! from the node size, record size and tree depth ([`NodeLimits`]), exactly as the library
//! computes them when it opens a tree:
//!
//! * a leaf holds `max(0) = (node_size - 10) / record_size` records (10 = signature, version,
//!   type, checksum);
//! * every child pointer's "records in child" field is `enc(max(0))` bytes wide, where
//!   `enc(n) = floor(log2(n)) / 8 + 1` (the leaf maximum is the largest of all levels);
//! * at depth `d ≥ 1` a pointer is `offset + enc(max(0)) + (d > 1 ? enc(cum(d - 1)) : 0)` bytes,
//!   an internal node holds `max(d) = (node_size - 10 - pointer) / (record_size + pointer)`
//!   records, and `cum(d) = (max(d) + 1) · cum(d - 1) + max(d)` (with `cum(0) = max(0)`) bounds
//!   the records below a node of depth `d`; the "total records in child" field of a node at
//!   depth `d` (present only when `d > 1`) is `enc(cum(d - 1))` bytes wide.

mod heap_id;
mod record;

pub use heap_id::InlineHeapId;
pub use record::{
    LINK_HEAP_ID_LEN, OBJECT_HEAP_ID_LEN, Record, RecordContext, SharedMessageRecord,
    chunk_size_len, filtered_chunk_size_len,
};

use std::sync::Arc;

use crate::error::{FormatError, Result};
use crate::reader::{Reader, Sizes};
use crate::writer::Writer;

/// Bytes of the signature, version, type and checksum that every node spends besides its
/// records and pointers.
const NODE_OVERHEAD: usize = 4 + 1 + 1 + 4;

/// Reads the 4-byte lookup3 checksum that follows the bytes consumed so far and checks it
/// against them (initial value 0, as for every checksummed v2 structure).
pub(crate) fn verify_checksum(r: &mut Reader<'_>) -> Result<()> {
    let computed = crate::checksum::lookup3(r.consumed(), 0);
    let stored = r.u32()?;
    if !crate::checksum::matches(stored, computed) {
        return Err(r.corrupted(format!(
            "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        )));
    }
    Ok(())
}

/// Bytes needed to encode any value up to `n`: `floor(log2(n)) / 8 + 1` (1 for `n` = 0).
#[allow(
    clippy::arithmetic_side_effects,
    reason = "the base-2 logarithm of a u64 is at most 63"
)]
pub fn limit_enc_size(n: u64) -> u8 {
    let log2 = 63u32.saturating_sub(n.leading_zeros());
    (log2 / 8 + 1) as u8
}

/// The v2 B-tree types (the "type" byte of the header and nodes).
#[non_exhaustive]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Btree2Type {
    /// 1: huge fractal heap objects, indirectly accessed, not filtered.
    HugeIndirect,
    /// 2: huge fractal heap objects, indirectly accessed, filtered.
    HugeIndirectFiltered,
    /// 3: huge fractal heap objects, directly accessed, not filtered.
    HugeDirect,
    /// 4: huge fractal heap objects, directly accessed, filtered.
    HugeDirectFiltered,
    /// 5: link names of an indexed group.
    LinkName,
    /// 6: link creation order of an indexed group.
    LinkCreationOrder,
    /// 7: shared object header messages.
    SharedMessages,
    /// 8: attribute names of indexed attributes.
    AttributeName,
    /// 9: attribute creation order of indexed attributes.
    AttributeCreationOrder,
    /// 10: chunks of a dataset without filters.
    Chunks,
    /// 11: chunks of a dataset with filters.
    FilteredChunks,
}

impl Btree2Type {
    /// The type for an on-disk type byte (0, the library's test type, is not supported).
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::HugeIndirect,
            2 => Self::HugeIndirectFiltered,
            3 => Self::HugeDirect,
            4 => Self::HugeDirectFiltered,
            5 => Self::LinkName,
            6 => Self::LinkCreationOrder,
            7 => Self::SharedMessages,
            8 => Self::AttributeName,
            9 => Self::AttributeCreationOrder,
            10 => Self::Chunks,
            11 => Self::FilteredChunks,
            _ => return None,
        })
    }

    /// The on-disk type byte.
    pub fn as_u8(self) -> u8 {
        match self {
            Self::HugeIndirect => 1,
            Self::HugeIndirectFiltered => 2,
            Self::HugeDirect => 3,
            Self::HugeDirectFiltered => 4,
            Self::LinkName => 5,
            Self::LinkCreationOrder => 6,
            Self::SharedMessages => 7,
            Self::AttributeName => 8,
            Self::AttributeCreationOrder => 9,
            Self::Chunks => 10,
            Self::FilteredChunks => 11,
        }
    }
}

/// Record limits of the nodes at one depth (0 = leaves), derived from the header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct NodeLimits {
    /// Most records a node at this depth holds.
    pub max_records: u64,
    /// Most records a node at this depth and all nodes below it hold together.
    pub cumulative_max_records: u64,
    /// Width in bytes of a "total records in child" field that counts records below a node of
    /// this depth (0 for leaves, whose pointers carry no such field).
    pub cumulative_size: u8,
}

/// A pointer from a node (or the header) to a child node.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ChildPointer {
    /// File address of the child node.
    pub address: u64,
    /// Records in the child node itself.
    pub records: u64,
    /// Records in the child and all its descendants (equal to `records` for a leaf child).
    pub total_records: u64,
}

/// The creation parameters of a v2 B-tree (what [`Btree2Header::new`] needs besides the
/// current root).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Btree2Params {
    /// What the records are.
    pub tree_type: Btree2Type,
    /// Bytes of every node on disk (libhdf5 uses 512 for group, attribute and chunk indexes).
    pub node_size: u32,
    /// Bytes of one record ([`RecordContext::record_size`]).
    pub record_size: u16,
    /// Percent full at which a node splits (libhdf5: 100).
    pub split_percent: u8,
    /// Percent full below which nodes merge (libhdf5: 40).
    pub merge_percent: u8,
}

fn encode_error(structure: &'static str, what: String) -> FormatError {
    FormatError::Unsupported {
        structure,
        address: crate::UNDEFINED_ADDRESS,
        what,
    }
}

/// A v2 B-tree header (`BTHD`, version 0).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Btree2Header {
    /// File address of the header.
    pub address: u64,
    /// What the records are.
    pub tree_type: Btree2Type,
    /// Bytes of every node on disk.
    pub node_size: u32,
    /// Bytes of one record.
    pub record_size: u16,
    /// Depth of the tree (0: the root is a leaf).
    pub depth: u16,
    /// Percent full at which a node splits.
    pub split_percent: u8,
    /// Percent full below which nodes merge.
    pub merge_percent: u8,
    /// The root node (address undefined when the tree is empty); `total_records` counts every
    /// record of the tree.
    pub root: ChildPointer,
    /// Width of every "records in child" field (from the leaf maximum).
    pub max_records_size: u8,
    /// Limits per depth, index 0 = leaves, up to `depth` (shared: a header is copied for every
    /// change of its root pointer, its limits only when the depth changes).
    pub limits: Arc<[NodeLimits]>,
}

impl Btree2Header {
    /// The header's size on disk.
    #[allow(clippy::arithmetic_side_effects, reason = "constants and 1-byte sizes")]
    pub fn encoded_len(sizes: Sizes) -> usize {
        4 + 1
            + 1
            + 4
            + 2
            + 2
            + 1
            + 1
            + usize::from(sizes.offset)
            + 2
            + usize::from(sizes.length)
            + 4
    }

    /// Decodes and checks a header from `bytes` (at least [`Self::encoded_len`] bytes) at file
    /// `address`, and derives the per-depth limits.
    pub fn decode(bytes: &[u8], sizes: Sizes, address: u64) -> Result<Self> {
        let mut r = Reader::new(bytes, "v2 B-tree header", address);
        r.signature(b"BTHD")?;
        let version = r.u8()?;
        if version != 0 {
            return Err(r.unsupported(format!("version {version}")));
        }
        let type_byte = r.u8()?;
        let tree_type = Btree2Type::from_u8(type_byte)
            .ok_or_else(|| r.unsupported(format!("B-tree type {type_byte}")))?;
        let node_size = r.u32()?;
        let record_size = r.u16()?;
        let depth = r.u16()?;
        let split_percent = r.u8()?;
        let merge_percent = r.u8()?;
        let root_address = r.offset(sizes)?;
        let root_records = u64::from(r.u16()?);
        let total_records = r.length(sizes)?;
        verify_checksum(&mut r)?;
        let (max_records_size, limits) = node_limits(&r, sizes, node_size, record_size, depth)?;
        let root_max = limits.last().map_or(0, |l| l.max_records);
        if root_records > root_max {
            return Err(r.corrupted(format!(
                "root holds {root_records} records, at most {root_max} fit"
            )));
        }
        Ok(Self {
            address,
            tree_type,
            node_size,
            record_size,
            depth,
            split_percent,
            merge_percent,
            root: ChildPointer {
                address: root_address,
                records: root_records,
                total_records,
            },
            max_records_size,
            limits: limits.into(),
        })
    }

    /// A header at `address` for a tree made with `params`, of `depth`, whose root is `root`
    /// (address undefined and counts 0 for an empty tree), with the per-depth limits derived.
    /// Errors as [`Self::decode`] does on an impossible geometry.
    pub fn new(
        sizes: Sizes,
        address: u64,
        params: Btree2Params,
        depth: u16,
        root: ChildPointer,
    ) -> Result<Self> {
        let bytes = encode_header(
            sizes,
            params.tree_type,
            params.node_size,
            params.record_size,
            depth,
            params.split_percent,
            params.merge_percent,
            root,
        )?;
        Self::decode(&bytes, sizes, address)
    }

    /// The creation parameters.
    pub fn params(&self) -> Btree2Params {
        Btree2Params {
            tree_type: self.tree_type,
            node_size: self.node_size,
            record_size: self.record_size,
            split_percent: self.split_percent,
            merge_percent: self.merge_percent,
        }
    }

    /// Encodes the header ([`Self::encoded_len`] bytes, checksum included). Errors when the
    /// root's record count does not fit its 2-byte field.
    pub fn encode(&self, sizes: Sizes) -> Result<Vec<u8>> {
        encode_header(
            sizes,
            self.tree_type,
            self.node_size,
            self.record_size,
            self.depth,
            self.split_percent,
            self.merge_percent,
            self.root,
        )
    }

    /// Bytes to load for any node of this tree.
    pub fn node_len(&self) -> usize {
        self.node_size as usize
    }

    /// The limits of nodes at `depth` (0 = leaves), if the tree is that deep.
    pub fn limits_at(&self, depth: u16) -> Option<&NodeLimits> {
        self.limits.get(usize::from(depth))
    }

    /// Bytes of one child pointer in an internal node at `depth` (≥ 1).
    pub fn pointer_len(&self, sizes: Sizes, depth: u16) -> usize {
        pointer_len(sizes, self.max_records_size, depth, &self.limits)
    }
}

#[allow(clippy::too_many_arguments)]
fn encode_header(
    sizes: Sizes,
    tree_type: Btree2Type,
    node_size: u32,
    record_size: u16,
    depth: u16,
    split_percent: u8,
    merge_percent: u8,
    root: ChildPointer,
) -> Result<Vec<u8>> {
    let root_records = u16::try_from(root.records).map_err(|_| {
        encode_error(
            "v2 B-tree header",
            format!("{} records in the root", root.records),
        )
    })?;
    let mut w = Writer::with_capacity(Btree2Header::encoded_len(sizes));
    w.bytes(b"BTHD");
    w.u8(0);
    w.u8(tree_type.as_u8());
    w.u32(node_size);
    w.u16(record_size);
    w.u16(depth);
    w.u8(split_percent);
    w.u8(merge_percent);
    w.offset(sizes, root.address);
    w.u16(root_records);
    w.length(sizes, root.total_records);
    w.checksum_from(0);
    Ok(w.into_bytes())
}

/// Width of a child pointer of a node at `depth` (≥ 1), given the limits of the lower depths.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "1-byte widths: the sum is below 800"
)]
fn pointer_len(sizes: Sizes, max_records_size: u8, depth: u16, limits: &[NodeLimits]) -> usize {
    let below = if depth > 1 {
        limits
            .get(usize::from(depth).saturating_sub(1))
            .map_or(0, |l| usize::from(l.cumulative_size))
    } else {
        0
    };
    usize::from(sizes.offset) + usize::from(max_records_size) + below
}

/// Computes the record limits for depths `0..=depth` (see the module documentation). Errors
/// when a level cannot hold a record or the counts overflow (no real tree is that deep).
fn node_limits(
    r: &Reader<'_>,
    sizes: Sizes,
    node_size: u32,
    record_size: u16,
    depth: u16,
) -> Result<(u8, Vec<NodeLimits>)> {
    let node = u64::from(node_size);
    let rec = u64::from(record_size);
    if rec == 0 {
        return Err(r.corrupted("record size 0"));
    }
    let leaf_max = node
        .saturating_sub(NODE_OVERHEAD as u64)
        .checked_div(rec)
        .unwrap_or(0);
    if leaf_max == 0 {
        return Err(r.corrupted(format!(
            "node size {node_size} holds no record of {record_size} bytes"
        )));
    }
    let max_records_size = limit_enc_size(leaf_max);
    let mut limits = vec![NodeLimits {
        max_records: leaf_max,
        cumulative_max_records: leaf_max,
        cumulative_size: 0,
    }];
    // A pointer at depth d uses the cumulative width of depth d - 1, which the loop has
    // computed by then.
    for d in 1..=depth {
        let ptr = pointer_len(sizes, max_records_size, d, &limits) as u64;
        let max = node
            .checked_sub((NODE_OVERHEAD as u64).saturating_add(ptr))
            .and_then(|room| room.checked_div(rec.saturating_add(ptr)))
            .unwrap_or(0);
        if max == 0 {
            return Err(r.corrupted(format!(
                "depth {depth} impossible: an internal node at depth {d} holds no record"
            )));
        }
        let prev = limits.last().map_or(0, |l| l.cumulative_max_records);
        let cum = max
            .checked_add(1)
            .and_then(|m| m.checked_mul(prev))
            .and_then(|v| v.checked_add(max))
            .ok_or_else(|| r.corrupted(format!("depth {depth} overflows the record counts")))?;
        limits.push(NodeLimits {
            max_records: max,
            cumulative_max_records: cum,
            cumulative_size: limit_enc_size(cum),
        });
    }
    Ok((max_records_size, limits))
}

/// A decoded v2 B-tree node: a leaf (`BTLF`) or an internal node (`BTIN`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Btree2Node {
    /// File address of the node.
    pub address: u64,
    /// Depth of the node (0 = leaf).
    pub depth: u16,
    /// The records, in key order.
    pub records: Vec<Record>,
    /// For an internal node, `records.len() + 1` child pointers (child `i` holds the keys
    /// before record `i`); empty for a leaf.
    pub children: Vec<ChildPointer>,
}

impl Btree2Node {
    /// Decodes the node at `depth` (0 = leaf) that its parent pointer (or the header's root)
    /// says holds `records` records. `bytes` is the node as loaded (`header.node_len()` bytes,
    /// or at least the used prefix).
    pub fn decode(
        bytes: &[u8],
        header: &Btree2Header,
        depth: u16,
        records: u64,
        ctx: &RecordContext,
        address: u64,
    ) -> Result<Self> {
        if depth == 0 {
            Self::decode_leaf(bytes, header, records, ctx, address)
        } else {
            Self::decode_internal(bytes, header, depth, records, ctx, address)
        }
    }

    /// Decodes a leaf node holding `records` records.
    pub fn decode_leaf(
        bytes: &[u8],
        header: &Btree2Header,
        records: u64,
        ctx: &RecordContext,
        address: u64,
    ) -> Result<Self> {
        let mut r = Reader::new(bytes, "v2 B-tree leaf node", address);
        r.signature(b"BTLF")?;
        let recs = decode_prefix_and_records(&mut r, header, 0, records, ctx)?;
        verify_checksum(&mut r)?;
        Ok(Self {
            address,
            depth: 0,
            records: recs,
            children: Vec::new(),
        })
    }

    /// Decodes an internal node at `depth` (1..=tree depth) holding `records` records.
    pub fn decode_internal(
        bytes: &[u8],
        header: &Btree2Header,
        depth: u16,
        records: u64,
        ctx: &RecordContext,
        address: u64,
    ) -> Result<Self> {
        let mut r = Reader::new(bytes, "v2 B-tree internal node", address);
        if depth == 0 {
            return Err(r.corrupted("an internal node cannot be at depth 0"));
        }
        r.signature(b"BTIN")?;
        let recs = decode_prefix_and_records(&mut r, header, depth, records, ctx)?;
        let child = header
            .limits_at(depth.saturating_sub(1))
            .copied()
            .ok_or_else(|| r.corrupted(format!("depth {depth} below the tree's")))?;
        let count_width = usize::from(header.max_records_size);
        let total_width = if depth > 1 {
            usize::from(child.cumulative_size)
        } else {
            0
        };
        // records + 1 pointers; `records` was bounded by the node's maximum above, so this
        // allocation is bounded by the node size.
        let mut children = Vec::with_capacity(recs.len().saturating_add(1));
        for _ in 0..=recs.len() {
            let address = r.offset(ctx.sizes)?;
            let n = r.uint(count_width)?;
            if n > child.max_records {
                return Err(r.corrupted(format!(
                    "child holds {n} records, at most {} fit",
                    child.max_records
                )));
            }
            let total = if depth > 1 { r.uint(total_width)? } else { n };
            if total < n || total > child.cumulative_max_records {
                return Err(r.corrupted(format!(
                    "child subtree claims {total} records ({n} in the child itself)"
                )));
            }
            children.push(ChildPointer {
                address,
                records: n,
                total_records: total,
            });
        }
        verify_checksum(&mut r)?;
        Ok(Self {
            address,
            depth,
            records: recs,
            children,
        })
    }

    /// Encodes the node (a leaf at depth 0, else an internal node) padded with zeros to the
    /// tree's node size, as libhdf5 writes it: signature, version, type, the records, for an
    /// internal node `records + 1` child pointers, the checksum. Errors when the records or
    /// children do not match the tree (type, count, limits, `ctx`).
    pub fn encode(&self, header: &Btree2Header, ctx: &RecordContext) -> Result<Vec<u8>> {
        let name = if self.depth == 0 {
            "v2 B-tree leaf node"
        } else {
            "v2 B-tree internal node"
        };
        let err = |what: String| encode_error(name, what);
        let limits = header.limits_at(self.depth).ok_or_else(|| {
            err(format!(
                "depth {} beyond the tree's {}",
                self.depth, header.depth
            ))
        })?;
        if self.records.len() as u64 > limits.max_records {
            return Err(err(format!(
                "{} records, at most {} fit",
                self.records.len(),
                limits.max_records
            )));
        }
        let want_children = if self.depth == 0 {
            0
        } else {
            self.records.len().saturating_add(1)
        };
        if self.children.len() != want_children {
            return Err(err(format!(
                "{} child pointers for {} records at depth {}",
                self.children.len(),
                self.records.len(),
                self.depth
            )));
        }
        if ctx.record_size(header.tree_type) != usize::from(header.record_size) {
            return Err(err(format!(
                "record size {} does not match the context",
                header.record_size
            )));
        }
        let len = header.node_len();
        let mut w = Writer::with_capacity(len);
        w.bytes(if self.depth == 0 { b"BTLF" } else { b"BTIN" });
        w.u8(0);
        w.u8(header.tree_type.as_u8());
        for rec in &self.records {
            if rec.tree_type() != header.tree_type {
                return Err(err(format!(
                    "a type {} record in a type {} tree",
                    rec.tree_type().as_u8(),
                    header.tree_type.as_u8()
                )));
            }
            rec.encode(&mut w, ctx)?;
        }
        if self.depth > 0 {
            let child = header
                .limits_at(self.depth.saturating_sub(1))
                .copied()
                .ok_or_else(|| err(format!("depth {}", self.depth)))?;
            let count_width = usize::from(header.max_records_size);
            for c in &self.children {
                if c.records > child.max_records
                    || c.total_records < c.records
                    || c.total_records > child.cumulative_max_records
                    || (self.depth == 1 && c.total_records != c.records)
                {
                    return Err(err(format!(
                        "child pointer with {} records ({} in its subtree)",
                        c.records, c.total_records
                    )));
                }
                w.offset(ctx.sizes, c.address);
                w.uint(c.records, count_width);
                if self.depth > 1 {
                    w.uint(c.total_records, usize::from(child.cumulative_size));
                }
            }
        }
        w.checksum_from(0);
        if w.len() > len {
            return Err(err(format!("{} bytes in a {len}-byte node", w.len())));
        }
        w.zeros(len.saturating_sub(w.len()));
        Ok(w.into_bytes())
    }

    /// Whether this node is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.depth == 0
    }
}

/// Reads the version and type (the signature is already consumed) and `records` records of a
/// node at `depth`.
fn decode_prefix_and_records(
    r: &mut Reader<'_>,
    header: &Btree2Header,
    depth: u16,
    records: u64,
    ctx: &RecordContext,
) -> Result<Vec<Record>> {
    let version = r.u8()?;
    if version != 0 {
        return Err(r.unsupported(format!("version {version}")));
    }
    let type_byte = r.u8()?;
    if type_byte != header.tree_type.as_u8() {
        return Err(r.corrupted(format!(
            "type {type_byte}, the header says {}",
            header.tree_type.as_u8()
        )));
    }
    let limits = header
        .limits_at(depth)
        .ok_or_else(|| r.corrupted(format!("depth {depth} beyond the tree's {}", header.depth)))?;
    if records > limits.max_records {
        return Err(r.corrupted(format!(
            "{records} records, at most {} fit",
            limits.max_records
        )));
    }
    let size = usize::from(header.record_size);
    ctx.check_record_size(r, header.tree_type, size)?;
    // Bounded: max_records · record_size ≤ node_size.
    let n = records as usize;
    r.check_len((n as u64).saturating_mul(size as u64))?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut rec = r.sub(size)?;
        out.push(Record::decode(&mut rec, header.tree_type, ctx)?);
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod testutil;

#[cfg(test)]
mod tests;
