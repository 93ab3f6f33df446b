//! Local heap (`HEAP`, version 0): the name store of an old-style (symbol table) group.
//!
//! Layout of the header (spec "Local Heap"):
//!
//! | field                          | bytes          |
//! |--------------------------------|----------------|
//! | signature `HEAP`               | 4              |
//! | version (0)                    | 1              |
//! | reserved                       | 3              |
//! | data segment size              | `sizes.length` |
//! | offset to head of free list    | `sizes.length` |
//! | address of data segment        | `sizes.offset` |
//!
//! The data segment is a separate byte range (libhdf5 usually places it right after the
//! header). Names are null-terminated strings at offsets into it. Free blocks in the data
//! segment start with the offset of the next free block and the block's size (both
//! `sizes.length` bytes); the end of the list is 1 (what libhdf5 writes) or all bits set.

use crate::error::{FormatError, Result};
use crate::reader::{Reader, Sizes, UNDEFINED_ADDRESS};
use crate::writer::Writer;

const STRUCTURE: &str = "local heap";
const SEGMENT: &str = "local heap data segment";

/// The decoded header of a local heap.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LocalHeapHeader {
    /// Size of the data segment in bytes.
    pub data_segment_size: u64,
    /// Offset (into the data segment) of the first free block, `None` when there is none.
    pub free_list_head: Option<u64>,
    /// File address of the data segment.
    pub data_segment_address: u64,
}

impl LocalHeapHeader {
    /// Encoded size of the header (fixed for given `sizes`).
    #[allow(clippy::arithmetic_side_effects, reason = "constants and 1-byte sizes")]
    pub fn encoded_len(sizes: Sizes) -> usize {
        8 + 2 * usize::from(sizes.length) + usize::from(sizes.offset)
    }

    /// Decodes the header from `bytes` (at least [`Self::encoded_len`] bytes; extra bytes, e.g.
    /// a data segment loaded with it, are ignored). `address` is the header's file address.
    pub fn decode(bytes: &[u8], sizes: Sizes, address: u64) -> Result<Self> {
        let mut r = Reader::new(bytes, STRUCTURE, address);
        r.signature(b"HEAP")?;
        let version = r.u8()?;
        if version != 0 {
            return Err(r.unsupported(format!("local heap version {version}")));
        }
        r.skip(3)?;
        let data_segment_size = r.length(sizes)?;
        let raw_free = r.length(sizes)?;
        let data_segment_address = r.offset(sizes)?;
        let free_list_head = if raw_free == 1 || raw_free == all_ones(sizes.length) {
            None
        } else if raw_free >= data_segment_size {
            return Err(r.corrupted(format!(
                "free list head {raw_free} outside the {data_segment_size}-byte data segment"
            )));
        } else {
            Some(raw_free)
        };
        if data_segment_address == UNDEFINED_ADDRESS && data_segment_size > 0 {
            return Err(r.corrupted("undefined data segment address"));
        }
        Ok(Self {
            data_segment_size,
            free_list_head,
            data_segment_address,
        })
    }

    /// Encodes the header ([`Self::encoded_len`] bytes). No free list is written as 1, the
    /// end marker libhdf5 writes.
    pub fn encode(&self, sizes: Sizes) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::encoded_len(sizes));
        w.bytes(b"HEAP");
        w.u8(0);
        w.zeros(3);
        w.length(sizes, self.data_segment_size);
        w.length(sizes, self.free_list_head.unwrap_or(FREE_LIST_END));
        w.offset(sizes, self.data_segment_address);
        w.into_bytes()
    }

    /// If the data segment immediately follows the header (as libhdf5 writes it), the byte
    /// range of the data segment within an image that starts at the header.
    pub fn contiguous_segment(&self, sizes: Sizes, header_address: u64) -> Option<(usize, usize)> {
        let start = header_address.checked_add(Self::encoded_len(sizes) as u64)?;
        if start != self.data_segment_address {
            return None;
        }
        let len = usize::try_from(self.data_segment_size).ok()?;
        let begin = Self::encoded_len(sizes);
        Some((begin, begin.checked_add(len)?))
    }

    /// The name at `offset` in `data_segment` (this heap's data segment), reporting errors
    /// against the data segment's address.
    pub fn name_at<'a>(&self, data_segment: &'a [u8], offset: u64) -> Result<&'a [u8]> {
        name_in(data_segment, offset, self.data_segment_address)
    }
}

/// The "no next free block" marker libhdf5 writes.
const FREE_LIST_END: u64 = 1;

/// Alignment of objects in a local heap data segment (libhdf5 aligns every name to 8 bytes).
pub const LOCAL_HEAP_ALIGN: usize = 8;

/// Lays out `names` the way libhdf5 fills a new group's heap: the empty name at offset 0,
/// then each name null-terminated, every entry padded with zeros to a multiple of
/// [`LOCAL_HEAP_ALIGN`]. Returns the bytes and the offset of each name.
pub fn pack_names(names: &[&[u8]]) -> (Vec<u8>, Vec<u64>) {
    let mut w = Writer::new();
    w.zeros(LOCAL_HEAP_ALIGN);
    let mut offsets = Vec::with_capacity(names.len());
    for name in names {
        offsets.push(w.len() as u64);
        w.bytes(name);
        w.u8(0);
        w.align(LOCAL_HEAP_ALIGN);
    }
    (w.into_bytes(), offsets)
}

/// Encodes a data segment: `used` (the names, as from [`pack_names`]) padded with zeros to
/// `segment_size` bytes, with the free list `free` (in list order) written into its blocks
/// (each block's next offset, 1 for the last, then its size; the rest of a block is zero).
/// Errors if a block is smaller than its two fields, lies outside the segment or overlaps
/// `used`, or `used` is longer than the segment.
pub fn encode_data_segment(
    used: &[u8],
    segment_size: u64,
    sizes: Sizes,
    free: &[FreeBlock],
) -> Result<Vec<u8>> {
    let total = usize::try_from(segment_size)
        .ok()
        .filter(|&t| t >= used.len())
        .ok_or_else(|| {
            seg_corrupted(format!(
                "{} bytes of names do not fit a {segment_size}-byte data segment",
                used.len()
            ))
        })?;
    let mut w = Writer::with_capacity(total);
    w.bytes(used);
    w.zeros(total.saturating_sub(used.len()));
    let entry = 2 * u64::from(sizes.length);
    for (i, b) in free.iter().enumerate() {
        let end = b.offset.checked_add(b.size);
        if b.size < entry || b.offset < used.len() as u64 || end.is_none_or(|e| e > segment_size) {
            return Err(seg_corrupted(format!(
                "free block at {} of size {} does not fit the data segment",
                b.offset, b.size
            )));
        }
        let next = free
            .get(i.saturating_add(1))
            .map_or(FREE_LIST_END, |n| n.offset);
        let mut f = Writer::new();
        f.length(sizes, next);
        f.length(sizes, b.size);
        // In range: checked against the segment size above.
        w.patch(b.offset as usize, f.as_slice());
    }
    Ok(w.into_bytes())
}

fn all_ones(n: u8) -> u64 {
    crate::reader::all_ones(usize::from(n))
}

/// The null-terminated string (without its terminator) at `offset` in a local heap data
/// segment. Errors if the offset is outside the segment or no terminator follows it.
pub fn name_at(data_segment: &[u8], offset: u64) -> Result<&[u8]> {
    name_in(data_segment, offset, UNDEFINED_ADDRESS)
}

fn name_in(data_segment: &[u8], offset: u64, address: u64) -> Result<&[u8]> {
    let start = match usize::try_from(offset) {
        Ok(s) if s < data_segment.len() => s,
        _ => {
            return Err(FormatError::Corrupted {
                structure: SEGMENT,
                address,
                reason: format!(
                    "name offset {offset} outside the {}-byte data segment",
                    data_segment.len()
                ),
            });
        }
    };
    let mut r = Reader::new(data_segment, SEGMENT, address);
    r.skip(start)?;
    r.cstr()
}

/// One block of a local heap's free list.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FreeBlock {
    /// Offset of the block in the data segment.
    pub offset: u64,
    /// Size of the block in bytes.
    pub size: u64,
}

/// Walks the free list of a data segment starting at `head` (from
/// [`LocalHeapHeader::free_list_head`]). Errors on blocks that are too small or do not fit in
/// the segment; the walk is bounded by the number of blocks that could fit, so a cycle ends in
/// an error too.
pub fn free_blocks(data_segment: &[u8], sizes: Sizes, head: Option<u64>) -> Result<Vec<FreeBlock>> {
    let entry = 2 * usize::from(sizes.length);
    // A free block must hold its own two fields, so at most len / entry blocks exist.
    let max_blocks = data_segment.len().checked_div(entry).unwrap_or(0);
    let mut out = Vec::new();
    let mut next = head;
    while let Some(offset) = next {
        if out.len() >= max_blocks {
            return Err(seg_corrupted("free list has a cycle or too many blocks"));
        }
        let start = usize::try_from(offset)
            .ok()
            .filter(|&s| s < data_segment.len())
            .ok_or_else(|| seg_corrupted(format!("free block offset {offset} out of range")))?;
        let mut r = Reader::new(data_segment, SEGMENT, UNDEFINED_ADDRESS);
        r.skip(start)?;
        let raw_next = r.length(sizes)?;
        let size = r.length(sizes)?;
        let end = offset.checked_add(size);
        if size < entry as u64 || end.is_none_or(|e| e > data_segment.len() as u64) {
            return Err(seg_corrupted(format!(
                "free block at {offset} of size {size} does not fit the data segment"
            )));
        }
        out.push(FreeBlock { offset, size });
        next = if raw_next == 1 || raw_next == all_ones(sizes.length) {
            None
        } else {
            Some(raw_next)
        };
    }
    Ok(out)
}

fn seg_corrupted(reason: impl Into<String>) -> FormatError {
    FormatError::Corrupted {
        structure: SEGMENT,
        address: UNDEFINED_ADDRESS,
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header with 8-byte sizes: data segment of 0x58 bytes, free list at 0x10, segment at
    /// 0x2c8 (bytes copied from the `earliest_group.h5` fixture's root group heap at 0x2a8).
    const HEADER: [u8; 32] = [
        b'H', b'E', b'A', b'P', 0, 0, 0, 0, // signature, version 0, reserved
        0x58, 0, 0, 0, 0, 0, 0, 0, // data segment size
        0x10, 0, 0, 0, 0, 0, 0, 0, // free list head
        0xc8, 0x02, 0, 0, 0, 0, 0, 0, // data segment address
    ];

    #[test]
    fn decodes_header() {
        let h = LocalHeapHeader::decode(&HEADER, Sizes::EIGHT, 0x2a8).unwrap();
        assert_eq!(
            h,
            LocalHeapHeader {
                data_segment_size: 0x58,
                free_list_head: Some(0x10),
                data_segment_address: 0x2c8
            }
        );
        assert_eq!(LocalHeapHeader::encoded_len(Sizes::EIGHT), 32);
        assert_eq!(
            h.contiguous_segment(Sizes::EIGHT, 0x2a8),
            Some((32, 32 + 0x58))
        );
        assert_eq!(h.contiguous_segment(Sizes::EIGHT, 0x100), None);
    }

    #[test]
    fn small_sizes_and_no_free_list() {
        // 4-byte offsets, 2-byte lengths; free list "1" (libhdf5's end marker).
        let b = [
            b'H', b'E', b'A', b'P', 0, 0, 0, 0, 0x20, 0, 1, 0, 0x10, 0, 0, 0,
        ];
        let s = Sizes::new(4, 2, "t", 0).unwrap();
        let h = LocalHeapHeader::decode(&b, s, 0).unwrap();
        assert_eq!(h.data_segment_size, 0x20);
        assert_eq!(h.free_list_head, None);
        assert_eq!(h.data_segment_address, 0x10);
        let mut b2 = b;
        b2[10] = 0xff;
        b2[11] = 0xff;
        assert_eq!(
            LocalHeapHeader::decode(&b2, s, 0).unwrap().free_list_head,
            None
        );
    }

    #[test]
    fn corruption_is_an_error() {
        for n in 0..HEADER.len() {
            assert!(LocalHeapHeader::decode(&HEADER[..n], Sizes::EIGHT, 0).is_err());
        }
        let mut b = HEADER;
        b[0] = b'X';
        assert!(LocalHeapHeader::decode(&b, Sizes::EIGHT, 0).is_err());
        let mut b = HEADER;
        b[4] = 1;
        assert!(matches!(
            LocalHeapHeader::decode(&b, Sizes::EIGHT, 0),
            Err(FormatError::Unsupported { .. })
        ));
        let mut b = HEADER;
        b[16] = 0x60; // free list beyond the segment
        assert!(LocalHeapHeader::decode(&b, Sizes::EIGHT, 0).is_err());
    }

    #[test]
    fn names_are_bounds_checked() {
        let seg = b"\0abc\0de";
        assert_eq!(name_at(seg, 0).unwrap(), b"");
        assert_eq!(name_at(seg, 1).unwrap(), b"abc");
        assert_eq!(name_at(seg, 2).unwrap(), b"bc");
        assert!(name_at(seg, 5).is_err()); // no terminator
        assert!(name_at(seg, 7).is_err());
        assert!(name_at(seg, u64::MAX).is_err());
        let h = LocalHeapHeader::decode(&HEADER, Sizes::EIGHT, 0).unwrap();
        let e = h.name_at(seg, 99).unwrap_err();
        assert!(matches!(e, FormatError::Corrupted { address: 0x2c8, .. }));
    }

    #[test]
    fn free_list_walk() {
        let s = Sizes::new(8, 2, "t", 0).unwrap();
        // 24-byte segment: free blocks at 4 (size 8, next 16) and 16 (size 8, end = 1).
        let mut seg = [0u8; 24];
        seg[4..6].copy_from_slice(&16u16.to_le_bytes());
        seg[6..8].copy_from_slice(&8u16.to_le_bytes());
        seg[16..18].copy_from_slice(&1u16.to_le_bytes());
        seg[18..20].copy_from_slice(&8u16.to_le_bytes());
        let blocks = free_blocks(&seg, s, Some(4)).unwrap();
        assert_eq!(
            blocks,
            vec![
                FreeBlock { offset: 4, size: 8 },
                FreeBlock {
                    offset: 16,
                    size: 8
                }
            ]
        );
        assert!(free_blocks(&seg, s, None).unwrap().is_empty());
        // A cycle: the second block points back to the first.
        seg[16..18].copy_from_slice(&4u16.to_le_bytes());
        assert!(free_blocks(&seg, s, Some(4)).is_err());
        // A block running past the end.
        seg[18..20].copy_from_slice(&9u16.to_le_bytes());
        assert!(free_blocks(&seg, s, Some(16)).is_err());
        assert!(free_blocks(&seg, s, Some(23)).is_err());
        assert!(free_blocks(&seg, s, Some(100)).is_err());
    }

    #[test]
    fn encodes_header_byte_exact() {
        let h = LocalHeapHeader::decode(&HEADER, Sizes::EIGHT, 0x2a8).unwrap();
        assert_eq!(h.encode(Sizes::EIGHT), HEADER);
        let s = Sizes::new(4, 2, "t", 0).unwrap();
        let b = [
            b'H', b'E', b'A', b'P', 0, 0, 0, 0, 0x20, 0, 1, 0, 0x10, 0, 0, 0,
        ];
        let h = LocalHeapHeader::decode(&b, s, 0).unwrap();
        assert_eq!(h.encode(s), b);
        assert_eq!(h.encode(s).len(), LocalHeapHeader::encoded_len(s));
        for h in [
            LocalHeapHeader {
                data_segment_size: 0,
                free_list_head: None,
                data_segment_address: UNDEFINED_ADDRESS,
            },
            LocalHeapHeader {
                data_segment_size: 1000,
                free_list_head: Some(999),
                data_segment_address: 0x1234,
            },
        ] {
            assert_eq!(LocalHeapHeader::decode(&h.encode(s), s, 0).unwrap(), h);
        }
    }

    #[test]
    fn data_segment_round_trip() {
        let (used, offsets) = pack_names(&[b"a", b"longer_than_8"]);
        assert_eq!(offsets, vec![8, 16]);
        assert_eq!(used.len(), 32);
        let s = Sizes::EIGHT;
        let free = [
            FreeBlock {
                offset: 32,
                size: 16,
            },
            FreeBlock {
                offset: 64,
                size: 24,
            },
        ];
        let seg = encode_data_segment(&used, 88, s, &free).unwrap();
        assert_eq!(seg.len(), 88);
        assert_eq!(free_blocks(&seg, s, Some(32)).unwrap(), free);
        assert_eq!(name_at(&seg, 8).unwrap(), b"a");
        assert_eq!(name_at(&seg, 16).unwrap(), b"longer_than_8");
        assert_eq!(name_at(&seg, 0).unwrap(), b"");
        assert_eq!(&seg[32..40], &64u64.to_le_bytes());
        assert_eq!(&seg[64..72], &1u64.to_le_bytes());
        // Blocks that do not fit are errors.
        for bad in [
            FreeBlock {
                offset: 8,
                size: 16,
            },
            FreeBlock {
                offset: 80,
                size: 16,
            },
            FreeBlock {
                offset: 40,
                size: 8,
            },
            FreeBlock {
                offset: 40,
                size: u64::MAX,
            },
        ] {
            assert!(encode_data_segment(&used, 88, s, &[bad]).is_err());
        }
        assert!(encode_data_segment(&used, 16, s, &[]).is_err());
    }
}
