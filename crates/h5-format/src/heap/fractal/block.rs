//! Fractal heap direct blocks (`FHDB`) and indirect blocks (`FHIB`), version 0.
//!
//! Direct block: signature (4), version (1), heap header address (O), block offset (heap
//! offset size bytes), checksum (4, only when the header's flag bit 1 is set: lookup3 of the
//! whole block with the checksum field zeroed), then object data up to the block size. Heap
//! offsets inside the block count from the block's first byte, header included.
//!
//! Indirect block: signature (4), version (1), heap header address (O), block offset (heap
//! offset size bytes), then `direct rows * width` direct-block entries (address, and for
//! filtered heaps the filtered size (L) and filter mask (4)), then `indirect rows * width`
//! indirect-block addresses, then a checksum (lookup3 of everything before it). Unused
//! entries hold the undefined address.

use super::header::FractalHeapHeader;
use super::{encode_error, put_length, put_offset, put_uint};
use crate::checksum::lookup3;
use crate::error::Result;
use crate::reader::{Reader, UNDEFINED_ADDRESS};
use crate::writer::Writer;

const DIRECT: &str = "fractal heap direct block";
const INDIRECT: &str = "fractal heap indirect block";

/// Writes the common prefix (signature, version, heap address, block offset).
fn put_prefix(
    w: &mut Writer,
    structure: &'static str,
    sig: &[u8; 4],
    hdr: &FractalHeapHeader,
    block_offset: u64,
) -> Result<()> {
    w.bytes(sig);
    w.u8(0);
    put_offset(w, structure, "heap header address", hdr.sizes, hdr.address)?;
    put_uint(
        w,
        structure,
        "block offset",
        block_offset,
        hdr.heap_offset_size(),
    )
}

/// Reads the common prefix (signature, version, heap address, block offset) and checks the
/// heap address against the header.
fn prefix(r: &mut Reader<'_>, sig: &[u8; 4], hdr: &FractalHeapHeader) -> Result<u64> {
    r.signature(sig)?;
    let version = r.u8()?;
    if version != 0 {
        return Err(r.unsupported(format!("{} version {version}", r.structure())));
    }
    let heap = r.offset(hdr.sizes)?;
    if heap != hdr.address {
        return Err(r.corrupted(format!(
            "belongs to the heap at {heap:#x}, not {:#x}",
            hdr.address
        )));
    }
    r.uint(hdr.heap_offset_size())
}

/// A decoded direct block; it keeps the whole block image to serve objects from.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FractalDirectBlock {
    /// Heap offset of the block's first byte.
    pub block_offset: u64,
    /// The block image (header included), `block size` bytes.
    pub image: Vec<u8>,
    /// Bytes of the block header (objects start after it).
    pub header_len: usize,
}

impl FractalDirectBlock {
    /// Decodes the direct block whose (unfiltered) image is `bytes`, of `block_size` bytes
    /// (the row's block size from the doubling table; for filtered heaps, the size after
    /// removing the filters). Verifies the checksum when the heap checksums direct blocks.
    pub fn decode(
        bytes: &[u8],
        hdr: &FractalHeapHeader,
        address: u64,
        block_size: u64,
    ) -> Result<Self> {
        let mut outer = Reader::new(bytes, "fractal heap direct block", address);
        let size = outer.check_len(block_size)?;
        // `r` covers exactly the block.
        let mut r = outer.sub(size)?;
        let image = r.all();
        let block_offset = prefix(&mut r, b"FHDB", hdr)?;
        if hdr.checksum_direct_blocks {
            let at = r.pos();
            let stored = r.u32()?;
            let mut copy = image.to_vec();
            if let Some(field) = copy.get_mut(at..at.saturating_add(4)) {
                field.fill(0);
            }
            let computed = lookup3(&copy, 0);
            if !crate::checksum::matches(stored, computed) {
                return Err(r.corrupted(format!(
                    "checksum {stored:#010x} stored, {computed:#010x} computed"
                )));
            }
        }
        if block_offset.checked_add(block_size).is_none() {
            return Err(r.corrupted(format!("block offset {block_offset} overflows")));
        }
        Ok(Self {
            block_offset,
            header_len: r.pos(),
            image: image.to_vec(),
        })
    }

    /// The bytes of the managed object at `heap_offset` of `len` bytes (from a managed heap
    /// ID). Errors if the object is not entirely inside this block's data area.
    pub fn object(&self, heap_offset: u64, len: u64) -> Result<&[u8]> {
        let r = Reader::new(&self.image, "fractal heap direct block", UNDEFINED_ADDRESS);
        let start = heap_offset
            .checked_sub(self.block_offset)
            .filter(|&s| s >= self.header_len as u64)
            .and_then(|s| usize::try_from(s).ok())
            .ok_or_else(|| {
                r.corrupted(format!(
                    "object at heap offset {heap_offset} not in the data of the block at heap offset {}",
                    self.block_offset
                ))
            })?;
        let len = usize::try_from(len).map_err(|_| r.corrupted("object length"))?;
        start
            .checked_add(len)
            .and_then(|end| self.image.get(start..end))
            .ok_or_else(|| {
                r.corrupted(format!(
                    "object of {len} bytes at heap offset {heap_offset} runs past the block end"
                ))
            })
    }
}

impl FractalDirectBlock {
    /// An empty (all-zero) direct block of `block_size` bytes at heap offset `block_offset`,
    /// as libhdf5 creates one before objects are written into it.
    pub fn empty(hdr: &FractalHeapHeader, block_offset: u64, block_size: u64) -> Result<Self> {
        let header_len = hdr.direct_block_header_len();
        let size = usize::try_from(block_size)
            .ok()
            .filter(|&s| s >= header_len)
            .ok_or_else(|| {
                encode_error(
                    DIRECT,
                    format!("block of {block_size} bytes (header {header_len})"),
                )
            })?;
        Ok(Self {
            block_offset,
            image: vec![0; size],
            header_len,
        })
    }

    /// Encodes the (unfiltered) block image, the inverse of [`Self::decode`]: the header is
    /// written from `block_offset` and the heap's address (and the checksum recomputed when
    /// the heap checksums direct blocks); the object bytes after the header stay as stored.
    /// Errors when the stored header length disagrees with the heap's or the block offset
    /// does not fit the heap's offsets.
    pub fn encode(&self, hdr: &FractalHeapHeader) -> Result<Vec<u8>> {
        let header_len = hdr.direct_block_header_len();
        let data = self
            .image
            .get(header_len..)
            .filter(|_| self.header_len == header_len)
            .ok_or_else(|| {
                encode_error(
                    DIRECT,
                    format!(
                        "{}-byte image with a {}-byte header; the heap's blocks have {header_len}",
                        self.image.len(),
                        self.header_len
                    ),
                )
            })?;
        let mut w = Writer::with_capacity(self.image.len());
        put_prefix(&mut w, DIRECT, b"FHDB", hdr, self.block_offset)?;
        let checksum_at = w.len();
        if hdr.checksum_direct_blocks {
            w.u32(0);
        }
        w.bytes(data);
        if hdr.checksum_direct_blocks {
            let sum = lookup3(w.as_slice(), 0);
            w.patch(checksum_at, &sum.to_le_bytes());
        }
        Ok(w.into_bytes())
    }

    /// The data area of the block (after its header), for writing objects into.
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.image.get_mut(self.header_len..).unwrap_or_default()
    }
}

/// A direct-block entry of an indirect block.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ChildDirectBlock {
    /// Address of the direct block ([`UNDEFINED_ADDRESS`] if not allocated).
    pub address: u64,
    /// Size of the filtered block on disk (filtered heaps only).
    pub filtered_size: Option<u64>,
    /// Filters skipped for the block (filtered heaps only).
    pub filter_mask: Option<u32>,
}

/// A decoded indirect block.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FractalIndirectBlock {
    /// Heap offset of the block's first byte.
    pub block_offset: u64,
    /// Rows of the block.
    pub rows: u16,
    /// Direct-block entries, row by row (`direct rows * width`).
    pub direct: Vec<ChildDirectBlock>,
    /// Indirect-block addresses, row by row (`indirect rows * width`).
    pub indirect: Vec<u64>,
}

impl FractalIndirectBlock {
    /// Decodes an indirect block of `rows` rows (the header's current root rows for the root,
    /// else [`super::BlockLocation`]'s `rows` from the parent) from `bytes` (at least
    /// [`FractalHeapHeader::indirect_block_len`] bytes). Verifies the checksum.
    pub fn decode(bytes: &[u8], hdr: &FractalHeapHeader, address: u64, rows: u16) -> Result<Self> {
        let mut outer = Reader::new(bytes, "fractal heap indirect block", address);
        if rows == 0 || u32::from(rows) > hdr.table.max_root_rows() {
            return Err(outer.corrupted(format!("indirect block of {rows} rows")));
        }
        let total = outer.check_len(hdr.indirect_block_len(rows) as u64)?;
        // `r` covers exactly the block (checksum included), so every count below fits.
        let mut r = outer.sub(total)?;
        let block_offset = prefix(&mut r, b"FHIB", hdr)?;
        let (direct_rows, indirect_rows) = hdr.table.split_rows(rows);
        let width = usize::from(hdr.table.width);
        // Rows × width entries, each at least an address: `r` covers them all (checked above).
        let n_direct = (direct_rows as usize).saturating_mul(width);
        let mut direct = Vec::with_capacity(n_direct);
        for _ in 0..n_direct {
            let address = r.offset(hdr.sizes)?;
            let (filtered_size, filter_mask) = if hdr.is_filtered() {
                (Some(r.length(hdr.sizes)?), Some(r.u32()?))
            } else {
                (None, None)
            };
            direct.push(ChildDirectBlock {
                address,
                filtered_size,
                filter_mask,
            });
        }
        let n_indirect = (indirect_rows as usize).saturating_mul(width);
        let mut indirect = Vec::with_capacity(n_indirect);
        for _ in 0..n_indirect {
            indirect.push(r.offset(hdr.sizes)?);
        }
        let computed = lookup3(r.consumed(), 0);
        let stored = r.u32()?;
        if !crate::checksum::matches(stored, computed) {
            return Err(r.corrupted(format!(
                "checksum {stored:#010x} stored, {computed:#010x} computed"
            )));
        }
        if hdr
            .table
            .indirect_span(rows)
            .is_some_and(|s| block_offset.checked_rem(s) != Some(0))
        {
            return Err(r.corrupted(format!(
                "block offset {block_offset} not aligned to the block's span"
            )));
        }
        Ok(Self {
            block_offset,
            rows,
            direct,
            indirect,
        })
    }

    /// The address of the child in slot `entry` (as in [`super::BlockLocation::entry`]), or
    /// `None` if the slot does not exist. May be [`UNDEFINED_ADDRESS`].
    pub fn child_address(&self, entry: usize) -> Option<u64> {
        match self.direct.get(entry) {
            Some(d) => Some(d.address),
            None => self
                .indirect
                .get(entry.checked_sub(self.direct.len())?)
                .copied(),
        }
    }

    /// Encodes the block ([`FractalHeapHeader::indirect_block_len`] bytes, checksum
    /// included), the inverse of [`Self::decode`]. Errors when the entry counts do not match
    /// the block's rows, when the filtered entries' sizes and masks are missing on a filtered
    /// heap (or present on an unfiltered one), or when a value does not fit its field.
    pub fn encode(&self, hdr: &FractalHeapHeader) -> Result<Vec<u8>> {
        let (direct_rows, indirect_rows) = hdr.table.split_rows(self.rows);
        let width = usize::from(hdr.table.width);
        let want = (
            (direct_rows as usize).saturating_mul(width),
            (indirect_rows as usize).saturating_mul(width),
        );
        if self.rows == 0 || (self.direct.len(), self.indirect.len()) != want {
            return Err(encode_error(
                INDIRECT,
                format!(
                    "{} direct and {} indirect entries in a {}-row block (needs {} and {})",
                    self.direct.len(),
                    self.indirect.len(),
                    self.rows,
                    want.0,
                    want.1
                ),
            ));
        }
        let mut w = Writer::with_capacity(hdr.indirect_block_len(self.rows));
        put_prefix(&mut w, INDIRECT, b"FHIB", hdr, self.block_offset)?;
        for child in &self.direct {
            put_offset(
                &mut w,
                INDIRECT,
                "direct block address",
                hdr.sizes,
                child.address,
            )?;
            match (hdr.is_filtered(), child.filtered_size, child.filter_mask) {
                (true, Some(size), Some(mask)) => {
                    put_length(&mut w, INDIRECT, "filtered block size", hdr.sizes, size)?;
                    w.u32(mask);
                }
                (false, None, None) => {}
                _ => {
                    return Err(encode_error(
                        INDIRECT,
                        format!(
                            "direct block entry {child:?} in a heap {} filters",
                            if hdr.is_filtered() { "with" } else { "without" }
                        ),
                    ));
                }
            }
        }
        for &address in &self.indirect {
            put_offset(
                &mut w,
                INDIRECT,
                "indirect block address",
                hdr.sizes,
                address,
            )?;
        }
        w.checksum_from(0);
        Ok(w.into_bytes())
    }
}
