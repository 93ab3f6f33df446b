//! The records of the v2 B-tree types, and the context their decoding needs.

use super::Btree2Type;
use super::heap_id::InlineHeapId;
use crate::error::{FormatError, Result};
use crate::reader::{Reader, Sizes};
use crate::writer::Writer;

/// Length of the fractal heap IDs of dense link storage (types 5 and 6) in libhdf5.
pub const LINK_HEAP_ID_LEN: usize = 7;
/// Length of the fractal heap IDs of dense attribute storage and shared messages (types 7–9).
pub const OBJECT_HEAP_ID_LEN: usize = 8;

/// Width in bytes of the "chunk size" field of filtered chunk records (B-tree type 11, and
/// filtered fixed/extensible array elements) for chunks of `chunk_bytes` unfiltered bytes: one
/// byte more than `chunk_bytes` needs (a filter may grow a chunk), at most 8.
pub fn chunk_size_len(chunk_bytes: u64) -> usize {
    // At most 63 / 8 + 2 = 9, clamped to 8.
    let log2 = 63u32.saturating_sub(chunk_bytes.leading_zeros()) as usize;
    log2.saturating_add(8)
        .checked_div(8)
        .unwrap_or(0)
        .saturating_add(1)
        .min(8)
}

/// Width of the "chunk size" field of filtered chunk records in the chunk index of a dataset
/// whose layout message has version `layout_version`: from version 5 (HDF5 2.0) the file's
/// length size, so a filter may grow a chunk past any bound; before, [`chunk_size_len`].
pub fn filtered_chunk_size_len(layout_version: u8, sizes: Sizes, chunk_bytes: u64) -> usize {
    if layout_version >= crate::message::layout::WIDE_CHUNK_SIZES_VERSION {
        usize::from(sizes.length)
    } else {
        chunk_size_len(chunk_bytes)
    }
}

/// What decoding a record needs besides its bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RecordContext {
    /// Address and length sizes of the file.
    pub sizes: Sizes,
    /// Heap ID length of link records (types 5 and 6); [`LINK_HEAP_ID_LEN`] in libhdf5 files.
    pub heap_id_len: usize,
    /// Rank of the dataset (number of scaled offsets) for chunk records (types 10 and 11).
    pub rank: usize,
    /// Width of the chunk size field of filtered chunk records (type 11), see
    /// [`chunk_size_len`].
    pub chunk_size_len: usize,
}

impl RecordContext {
    /// A context for the non-chunk types (heap ID length [`LINK_HEAP_ID_LEN`]).
    pub fn new(sizes: Sizes) -> Self {
        Self {
            sizes,
            heap_id_len: LINK_HEAP_ID_LEN,
            rank: 0,
            chunk_size_len: 0,
        }
    }

    /// A context for the chunk index of a dataset of `rank` dimensions whose unfiltered
    /// chunks are `chunk_bytes` bytes.
    pub fn for_chunks(sizes: Sizes, rank: usize, chunk_bytes: u64) -> Self {
        Self {
            rank,
            chunk_size_len: chunk_size_len(chunk_bytes),
            ..Self::new(sizes)
        }
    }

    /// The record size a tree of type `t` must have in this context.
    pub fn record_size(&self, t: Btree2Type) -> usize {
        let o = usize::from(self.sizes.offset);
        let l = usize::from(self.sizes.length);
        // `o` and `l` are at most 255; the context's lengths may come from a file: saturated.
        let sum = |terms: &[usize]| terms.iter().fold(0usize, |a, &t| a.saturating_add(t));
        match t {
            Btree2Type::HugeIndirect => sum(&[o, l, l]),
            Btree2Type::HugeIndirectFiltered => sum(&[o, l, l, l, 4]),
            Btree2Type::HugeDirect => sum(&[o, l]),
            Btree2Type::HugeDirectFiltered => sum(&[o, l, l, 4]),
            Btree2Type::LinkName => sum(&[4, self.heap_id_len]),
            Btree2Type::LinkCreationOrder => sum(&[8, self.heap_id_len]),
            Btree2Type::SharedMessages => sum(&[1, 4, (4 + OBJECT_HEAP_ID_LEN).max(sum(&[4, o]))]),
            Btree2Type::AttributeName => OBJECT_HEAP_ID_LEN + 1 + 4 + 4,
            Btree2Type::AttributeCreationOrder => OBJECT_HEAP_ID_LEN + 1 + 4,
            Btree2Type::Chunks => o.saturating_add(self.rank.saturating_mul(8)),
            Btree2Type::FilteredChunks => {
                sum(&[o, self.chunk_size_len, 4, self.rank.saturating_mul(8)])
            }
        }
    }

    /// Errors unless `size` is the record size of type `t` in this context.
    pub(crate) fn check_record_size(
        &self,
        r: &Reader<'_>,
        t: Btree2Type,
        size: usize,
    ) -> Result<()> {
        let want = self.record_size(t);
        if size != want {
            return Err(r.corrupted(format!(
                "record size {size}, type {} records are {want} bytes here",
                t.as_u8()
            )));
        }
        if matches!(t, Btree2Type::LinkName | Btree2Type::LinkCreationOrder)
            && self.heap_id_len > InlineHeapId::CAPACITY
        {
            return Err(r.unsupported(format!("link heap IDs of {} bytes", self.heap_id_len)));
        }
        if t == Btree2Type::FilteredChunks && !(1..=8).contains(&self.chunk_size_len) {
            return Err(r.unsupported(format!("chunk size width {}", self.chunk_size_len)));
        }
        Ok(())
    }
}

/// A record of the shared object header message index (type 7).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum SharedMessageRecord {
    /// The message is stored in the index's fractal heap.
    InHeap {
        /// Hash of the encoded message.
        hash: u32,
        /// Objects sharing the message.
        reference_count: u32,
        /// Fractal heap ID of the message.
        heap_id: [u8; OBJECT_HEAP_ID_LEN],
    },
    /// The message is stored in an object header.
    InObjectHeader {
        /// Hash of the encoded message.
        hash: u32,
        /// Message type.
        message_type: u8,
        /// Index of the message within the object header.
        index: u16,
        /// Address of the object header.
        address: u64,
    },
}

/// One v2 B-tree record, by tree type.
#[non_exhaustive]
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Record {
    /// Type 1: a huge object, indirectly accessed, not filtered.
    HugeIndirect {
        /// Address of the object.
        address: u64,
        /// Its length on disk.
        length: u64,
        /// The object's heap ID.
        id: u64,
    },
    /// Type 2: a huge object, indirectly accessed, filtered.
    HugeIndirectFiltered {
        /// Address of the filtered object.
        address: u64,
        /// Its length on disk.
        length: u64,
        /// Filters skipped (bit i set: filter i not applied).
        filter_mask: u32,
        /// Its size once unfiltered.
        memory_size: u64,
        /// The object's heap ID.
        id: u64,
    },
    /// Type 3: a huge object, directly accessed, not filtered.
    HugeDirect {
        /// Address of the object.
        address: u64,
        /// Its length.
        length: u64,
    },
    /// Type 4: a huge object, directly accessed, filtered.
    HugeDirectFiltered {
        /// Address of the filtered object.
        address: u64,
        /// Its length on disk.
        length: u64,
        /// Filters skipped.
        filter_mask: u32,
        /// Its size once unfiltered.
        memory_size: u64,
    },
    /// Type 5: a link of an indexed group, by name.
    LinkName {
        /// Jenkins lookup3 hash of the link name (initial value 0).
        hash: u32,
        /// Fractal heap ID of the link message.
        heap_id: InlineHeapId,
    },
    /// Type 6: a link of an indexed group, by creation order.
    LinkCreationOrder {
        /// Creation order of the link.
        creation_order: u64,
        /// Fractal heap ID of the link message.
        heap_id: InlineHeapId,
    },
    /// Type 7: a shared object header message.
    SharedMessage(SharedMessageRecord),
    /// Type 8: an attribute in dense storage, by name.
    AttributeName {
        /// Fractal heap ID of the attribute message.
        heap_id: [u8; OBJECT_HEAP_ID_LEN],
        /// Message flags (bit 0: shared, etc.).
        flags: u8,
        /// Creation order of the attribute.
        creation_order: u32,
        /// Jenkins lookup3 hash of the attribute name.
        hash: u32,
    },
    /// Type 9: an attribute in dense storage, by creation order.
    AttributeCreationOrder {
        /// Fractal heap ID of the attribute message.
        heap_id: [u8; OBJECT_HEAP_ID_LEN],
        /// Message flags.
        flags: u8,
        /// Creation order of the attribute.
        creation_order: u32,
    },
    /// Type 10: a chunk of a dataset without filters.
    Chunk {
        /// Address of the chunk.
        address: u64,
        /// Chunk offsets divided by the chunk dimensions, one per dataset dimension.
        scaled: Vec<u64>,
    },
    /// Type 11: a chunk of a dataset with filters.
    FilteredChunk {
        /// Address of the chunk.
        address: u64,
        /// Its size on disk (after filtering).
        size: u64,
        /// Filters skipped (bit i set: filter i not applied).
        filter_mask: u32,
        /// Chunk offsets divided by the chunk dimensions, one per dataset dimension.
        scaled: Vec<u64>,
    },
}

impl Record {
    /// Decodes one record of a tree of type `t` from `r` (exactly the record's bytes; the
    /// record size was checked against `ctx` by the caller).
    pub fn decode(r: &mut Reader<'_>, t: Btree2Type, ctx: &RecordContext) -> Result<Self> {
        let s = ctx.sizes;
        Ok(match t {
            Btree2Type::HugeIndirect => Self::HugeIndirect {
                address: r.offset(s)?,
                length: r.length(s)?,
                id: r.length(s)?,
            },
            Btree2Type::HugeIndirectFiltered => Self::HugeIndirectFiltered {
                address: r.offset(s)?,
                length: r.length(s)?,
                filter_mask: r.u32()?,
                memory_size: r.length(s)?,
                id: r.length(s)?,
            },
            Btree2Type::HugeDirect => Self::HugeDirect {
                address: r.offset(s)?,
                length: r.length(s)?,
            },
            Btree2Type::HugeDirectFiltered => Self::HugeDirectFiltered {
                address: r.offset(s)?,
                length: r.length(s)?,
                filter_mask: r.u32()?,
                memory_size: r.length(s)?,
            },
            Btree2Type::LinkName => Self::LinkName {
                hash: r.u32()?,
                heap_id: link_heap_id(r, ctx.heap_id_len)?,
            },
            Btree2Type::LinkCreationOrder => Self::LinkCreationOrder {
                creation_order: r.u64()?,
                heap_id: link_heap_id(r, ctx.heap_id_len)?,
            },
            Btree2Type::SharedMessages => Self::SharedMessage(decode_shared(r, s)?),
            Btree2Type::AttributeName => Self::AttributeName {
                heap_id: heap_id8(r)?,
                flags: r.u8()?,
                creation_order: r.u32()?,
                hash: r.u32()?,
            },
            Btree2Type::AttributeCreationOrder => Self::AttributeCreationOrder {
                heap_id: heap_id8(r)?,
                flags: r.u8()?,
                creation_order: r.u32()?,
            },
            Btree2Type::Chunks => Self::Chunk {
                address: r.offset(s)?,
                scaled: scaled(r, ctx.rank)?,
            },
            Btree2Type::FilteredChunks => Self::FilteredChunk {
                address: r.offset(s)?,
                size: r.uint(ctx.chunk_size_len)?,
                filter_mask: r.u32()?,
                scaled: scaled(r, ctx.rank)?,
            },
        })
    }
}

impl Record {
    /// The tree type whose records this is.
    pub fn tree_type(&self) -> Btree2Type {
        match self {
            Self::HugeIndirect { .. } => Btree2Type::HugeIndirect,
            Self::HugeIndirectFiltered { .. } => Btree2Type::HugeIndirectFiltered,
            Self::HugeDirect { .. } => Btree2Type::HugeDirect,
            Self::HugeDirectFiltered { .. } => Btree2Type::HugeDirectFiltered,
            Self::LinkName { .. } => Btree2Type::LinkName,
            Self::LinkCreationOrder { .. } => Btree2Type::LinkCreationOrder,
            Self::SharedMessage(_) => Btree2Type::SharedMessages,
            Self::AttributeName { .. } => Btree2Type::AttributeName,
            Self::AttributeCreationOrder { .. } => Btree2Type::AttributeCreationOrder,
            Self::Chunk { .. } => Btree2Type::Chunks,
            Self::FilteredChunk { .. } => Btree2Type::FilteredChunks,
        }
    }

    /// Appends the record (exactly `ctx.record_size(self.tree_type())` bytes). Errors when a
    /// heap ID or the scaled offsets do not match `ctx`, or a filtered chunk's size does not
    /// fit `ctx.chunk_size_len` bytes.
    pub fn encode(&self, w: &mut Writer, ctx: &RecordContext) -> Result<()> {
        let s = ctx.sizes;
        let start = w.len();
        match self {
            Self::HugeIndirect {
                address,
                length,
                id,
            } => {
                w.offset(s, *address);
                w.length(s, *length);
                w.length(s, *id);
            }
            Self::HugeIndirectFiltered {
                address,
                length,
                filter_mask,
                memory_size,
                id,
            } => {
                w.offset(s, *address);
                w.length(s, *length);
                w.u32(*filter_mask);
                w.length(s, *memory_size);
                w.length(s, *id);
            }
            Self::HugeDirect { address, length } => {
                w.offset(s, *address);
                w.length(s, *length);
            }
            Self::HugeDirectFiltered {
                address,
                length,
                filter_mask,
                memory_size,
            } => {
                w.offset(s, *address);
                w.length(s, *length);
                w.u32(*filter_mask);
                w.length(s, *memory_size);
            }
            Self::LinkName { hash, heap_id } => {
                check_id(heap_id, ctx)?;
                w.u32(*hash);
                w.bytes(heap_id);
            }
            Self::LinkCreationOrder {
                creation_order,
                heap_id,
            } => {
                check_id(heap_id, ctx)?;
                w.u64(*creation_order);
                w.bytes(heap_id);
            }
            Self::SharedMessage(SharedMessageRecord::InHeap {
                hash,
                reference_count,
                heap_id,
            }) => {
                w.u8(0);
                w.u32(*hash);
                w.u32(*reference_count);
                w.bytes(heap_id);
            }
            Self::SharedMessage(SharedMessageRecord::InObjectHeader {
                hash,
                message_type,
                index,
                address,
            }) => {
                w.u8(1);
                w.u32(*hash);
                w.u8(0);
                w.u8(*message_type);
                w.u16(*index);
                w.offset(s, *address);
            }
            Self::AttributeName {
                heap_id,
                flags,
                creation_order,
                hash,
            } => {
                w.bytes(heap_id);
                w.u8(*flags);
                w.u32(*creation_order);
                w.u32(*hash);
            }
            Self::AttributeCreationOrder {
                heap_id,
                flags,
                creation_order,
            } => {
                w.bytes(heap_id);
                w.u8(*flags);
                w.u32(*creation_order);
            }
            Self::Chunk { address, scaled } => {
                check_rank(scaled, ctx)?;
                w.offset(s, *address);
                scaled.iter().for_each(|&v| w.u64(v));
            }
            Self::FilteredChunk {
                address,
                size,
                filter_mask,
                scaled,
            } => {
                check_rank(scaled, ctx)?;
                let n = ctx.chunk_size_len;
                if !(1..=8).contains(&n) || *size > crate::reader::all_ones(n) {
                    return Err(encode_error(format!(
                        "chunk size {size} in a {n}-byte field"
                    )));
                }
                w.offset(s, *address);
                w.uint(*size, n);
                w.u32(*filter_mask);
                scaled.iter().for_each(|&v| w.u64(v));
            }
        }
        // Every record is fixed-size; pad the shared message variant that is shorter.
        let want = ctx.record_size(self.tree_type());
        w.zeros(start.saturating_add(want).saturating_sub(w.len()));
        Ok(())
    }
}

fn encode_error(what: String) -> FormatError {
    FormatError::Unsupported {
        structure: "v2 B-tree record",
        address: crate::UNDEFINED_ADDRESS,
        what,
    }
}

fn check_id(id: &[u8], ctx: &RecordContext) -> Result<()> {
    if id.len() != ctx.heap_id_len {
        return Err(encode_error(format!(
            "heap ID of {} bytes where records hold {}",
            id.len(),
            ctx.heap_id_len
        )));
    }
    Ok(())
}

fn check_rank(scaled: &[u64], ctx: &RecordContext) -> Result<()> {
    if scaled.len() != ctx.rank {
        return Err(encode_error(format!(
            "{} scaled offsets for rank {}",
            scaled.len(),
            ctx.rank
        )));
    }
    Ok(())
}

/// A link record's heap ID of `len` bytes (at most [`InlineHeapId::CAPACITY`]).
fn link_heap_id(r: &mut Reader<'_>, len: usize) -> Result<InlineHeapId> {
    let bytes = r.bytes(len)?;
    InlineHeapId::new(bytes).ok_or_else(|| r.unsupported(format!("link heap IDs of {len} bytes")))
}

fn heap_id8(r: &mut Reader<'_>) -> Result<[u8; OBJECT_HEAP_ID_LEN]> {
    let mut id = [0u8; OBJECT_HEAP_ID_LEN];
    id.copy_from_slice(r.bytes(OBJECT_HEAP_ID_LEN)?);
    Ok(id)
}

fn scaled(r: &mut Reader<'_>, rank: usize) -> Result<Vec<u64>> {
    r.check_len((rank as u64).saturating_mul(8))?;
    (0..rank).map(|_| r.u64()).collect()
}

fn decode_shared(r: &mut Reader<'_>, s: Sizes) -> Result<SharedMessageRecord> {
    let location = r.u8()?;
    let hash = r.u32()?;
    match location {
        0 => Ok(SharedMessageRecord::InHeap {
            hash,
            reference_count: r.u32()?,
            heap_id: heap_id8(r)?,
        }),
        1 => {
            let _reserved = r.u8()?;
            Ok(SharedMessageRecord::InObjectHeader {
                hash,
                message_type: r.u8()?,
                index: r.u16()?,
                address: r.offset(s)?,
            })
        }
        other => Err(r.corrupted(format!("shared message location {other}"))),
    }
}
