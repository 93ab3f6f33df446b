//! Fractal heap IDs.
//!
//! The first byte holds the ID version in bits 6–7 (0) and the type in bits 4–5: 0 managed,
//! 1 huge, 2 tiny.
//!
//! - Managed: heap offset (heap offset size bytes), then object length (heap length size
//!   bytes; see [`FractalHeapHeader::heap_length_size`]).
//! - Tiny: the object itself follows. Its length minus one is in the low 4 bits of the first
//!   byte, or, when the heap ID is longer than 18 bytes ("extended"), in those 4 bits (high)
//!   and the second byte (low), the data then starting at byte 2.
//! - Huge, "directly accessed" when the ID has room: unfiltered heaps store the address (O) and
//!   length (L) of the object; filtered heaps the address (O), filtered length (L), filter mask
//!   (4) and unfiltered size (L). Otherwise the ID holds a key of the heap's v2 B-tree of huge
//!   objects, `min(heap ID length - 1, 8)` bytes.

use super::header::FractalHeapHeader;
use super::{encode_error, put_length, put_offset, put_uint};
use crate::error::Result;
use crate::reader::Reader;
use crate::writer::Writer;

const STRUCTURE: &str = "fractal heap ID";

/// Type bits (4–5) of the first ID byte.
const TYPE_MANAGED: u8 = 0x00;
const TYPE_HUGE: u8 = 0x10;
const TYPE_TINY: u8 = 0x20;

/// Where a huge object is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum HugeId {
    /// Look the object up by this key in the heap's v2 B-tree of huge objects (record type 1
    /// for unfiltered heaps, 2 for filtered ones).
    BtreeKey(u64),
    /// Unfiltered object stored at `address`.
    Direct {
        /// File address of the object.
        address: u64,
        /// Its length.
        len: u64,
    },
    /// Filtered object stored at `address`.
    DirectFiltered {
        /// File address of the filtered object.
        address: u64,
        /// Its length on disk.
        len: u64,
        /// Filters skipped for it.
        filter_mask: u32,
        /// Its length after removing the filters.
        size: u64,
    },
}

/// A decoded fractal heap ID.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum HeapId<'a> {
    /// An object in managed space.
    Managed {
        /// Heap offset of the object.
        offset: u64,
        /// Its length.
        len: u64,
    },
    /// An object stored inside the ID.
    Tiny(&'a [u8]),
    /// An object stored outside managed space.
    Huge(HugeId),
}

/// Tiny objects switch to a 2-byte length when `heap ID length - 1` exceeds this + 1.
const TINY_LEN_SHORT: usize = 16;

impl<'a> HeapId<'a> {
    /// Decodes `id` (exactly the heap's ID length) of the heap described by `hdr`.
    pub fn decode(id: &'a [u8], hdr: &FractalHeapHeader) -> Result<Self> {
        let mut r = Reader::new(id, "fractal heap ID", hdr.address);
        if id.len() != usize::from(hdr.heap_id_len) {
            return Err(r.corrupted(format!(
                "heap ID of {} bytes, the heap uses {}",
                id.len(),
                hdr.heap_id_len
            )));
        }
        let flags = r.u8()?;
        if flags >> 6 != 0 {
            return Err(r.unsupported(format!("heap ID version {}", flags >> 6)));
        }
        match (flags >> 4) & 0b11 {
            0 => {
                let offset = r.uint(hdr.heap_offset_size())?;
                let len = r.uint(hdr.heap_length_size())?;
                let bits = u32::from(hdr.table.max_heap_size_bits);
                let fits = offset
                    .checked_add(len)
                    .is_some_and(|end| bits >= 64 || end <= 1u64 << bits);
                if len == 0 || len > u64::from(hdr.max_managed_object_size) || !fits {
                    return Err(r.corrupted(format!(
                        "managed object of {len} bytes at heap offset {offset}"
                    )));
                }
                Ok(Self::Managed { offset, len })
            }
            1 => Ok(Self::Huge(Self::huge(&mut r, hdr)?)),
            2 => {
                let extended = hdr.tiny_len_extended();
                let len = if extended {
                    let low = r.u8()?;
                    // At most 2^12.
                    (usize::from(flags & 0x0f) << 8 | usize::from(low)).saturating_add(1)
                } else {
                    usize::from(flags & 0x0f).saturating_add(1)
                };
                Ok(Self::Tiny(r.bytes(len)?))
            }
            t => Err(r.corrupted(format!("heap ID type {t}"))),
        }
    }

    /// Encodes the ID (exactly the heap's ID length, zero-padded), the inverse of
    /// [`Self::decode`]. Errors when the object cannot be named this way in this heap: a
    /// managed object that is empty, larger than the maximum managed size or past the heap's
    /// address space; a tiny object that is empty or longer than
    /// [`FractalHeapHeader::tiny_max_len`]; a huge object of the wrong kind for the heap's ID
    /// length and filters.
    pub fn encode(&self, hdr: &FractalHeapHeader) -> Result<Vec<u8>> {
        let id_len = usize::from(hdr.heap_id_len);
        let mut w = Writer::with_capacity(id_len);
        match *self {
            Self::Managed { offset, len } => {
                let bits = u32::from(hdr.table.max_heap_size_bits);
                let fits = offset
                    .checked_add(len)
                    .is_some_and(|end| bits >= 64 || end <= 1u64 << bits);
                if len == 0 || len > u64::from(hdr.max_managed_object_size) || !fits {
                    return Err(encode_error(
                        STRUCTURE,
                        format!("managed object of {len} bytes at heap offset {offset}"),
                    ));
                }
                w.u8(TYPE_MANAGED);
                put_uint(
                    &mut w,
                    STRUCTURE,
                    "heap offset",
                    offset,
                    hdr.heap_offset_size(),
                )?;
                put_uint(
                    &mut w,
                    STRUCTURE,
                    "object length",
                    len,
                    hdr.heap_length_size(),
                )?;
            }
            Self::Tiny(obj) => {
                if obj.is_empty() || obj.len() > hdr.tiny_max_len() {
                    return Err(encode_error(
                        STRUCTURE,
                        format!(
                            "tiny object of {} bytes (1..={} fit in the ID)",
                            obj.len(),
                            hdr.tiny_max_len()
                        ),
                    ));
                }
                let encoded_len = obj.len().saturating_sub(1);
                if hdr.tiny_len_extended() {
                    w.u8(TYPE_TINY | (encoded_len >> 8) as u8 & 0x0f);
                    w.u8(encoded_len as u8);
                } else {
                    w.u8(TYPE_TINY | encoded_len as u8);
                }
                w.bytes(obj);
            }
            Self::Huge(huge) => {
                w.u8(TYPE_HUGE);
                Self::encode_huge(&mut w, huge, hdr)?;
            }
        }
        if w.len() > id_len {
            return Err(encode_error(
                STRUCTURE,
                format!("{} bytes in a {id_len}-byte heap ID", w.len()),
            ));
        }
        w.zeros(id_len.saturating_sub(w.len()));
        Ok(w.into_bytes())
    }

    fn encode_huge(w: &mut Writer, huge: HugeId, hdr: &FractalHeapHeader) -> Result<()> {
        let sizes = hdr.sizes;
        let room = usize::from(hdr.heap_id_len).saturating_sub(1);
        let o = usize::from(sizes.offset);
        let l = usize::from(sizes.length);
        // `o` and `l` are at most 255.
        let direct = if hdr.is_filtered() {
            room >= o.saturating_add(l).saturating_add(4).saturating_add(l)
        } else {
            room >= o.saturating_add(l)
        };
        match huge {
            HugeId::BtreeKey(key) if !direct => {
                put_uint(w, STRUCTURE, "huge object key", key, room.min(8))
            }
            HugeId::Direct { address, len } if direct && !hdr.is_filtered() => {
                put_offset(w, STRUCTURE, "huge object address", sizes, address)?;
                put_length(w, STRUCTURE, "huge object length", sizes, len)
            }
            HugeId::DirectFiltered {
                address,
                len,
                filter_mask,
                size,
            } if direct && hdr.is_filtered() => {
                put_offset(w, STRUCTURE, "huge object address", sizes, address)?;
                put_length(w, STRUCTURE, "huge object length", sizes, len)?;
                w.u32(filter_mask);
                put_length(w, STRUCTURE, "huge object size", sizes, size)
            }
            other => Err(encode_error(
                STRUCTURE,
                format!(
                    "{other:?} in a {}-byte ID of a heap {} filters",
                    hdr.heap_id_len,
                    if hdr.is_filtered() { "with" } else { "without" }
                ),
            )),
        }
    }

    fn huge(r: &mut Reader<'_>, hdr: &FractalHeapHeader) -> Result<HugeId> {
        let room = usize::from(hdr.heap_id_len).saturating_sub(1);
        let o = usize::from(hdr.sizes.offset);
        let l = usize::from(hdr.sizes.length);
        if hdr.is_filtered() {
            if room >= o.saturating_add(l).saturating_add(4).saturating_add(l) {
                return Ok(HugeId::DirectFiltered {
                    address: r.offset(hdr.sizes)?,
                    len: r.length(hdr.sizes)?,
                    filter_mask: r.u32()?,
                    size: r.length(hdr.sizes)?,
                });
            }
        } else if room >= o.saturating_add(l) {
            return Ok(HugeId::Direct {
                address: r.offset(hdr.sizes)?,
                len: r.length(hdr.sizes)?,
            });
        }
        Ok(HugeId::BtreeKey(r.uint(room.min(8))?))
    }
}

impl FractalHeapHeader {
    /// Whether tiny objects carry their length in two bytes (IDs longer than 18 bytes).
    pub fn tiny_len_extended(&self) -> bool {
        usize::from(self.heap_id_len).saturating_sub(1) > TINY_LEN_SHORT + 1
    }

    /// The largest object stored inside a heap ID (libhdf5 stores every object up to this
    /// size as a tiny object).
    pub fn tiny_max_len(&self) -> usize {
        let room = usize::from(self.heap_id_len).saturating_sub(1);
        if self.tiny_len_extended() {
            // Twelve bits of length minus one.
            room.saturating_sub(1).min(1 << 12)
        } else {
            room.min(TINY_LEN_SHORT)
        }
    }
}
