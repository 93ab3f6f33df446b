//! The fractal heap header (`FRHP`, version 0).
//!
//! Layout (spec "Fractal Heap Header"; O = `sizes.offset`, L = `sizes.length`):
//! signature (4), version (1), heap ID length (2), I/O filters' encoded length (2), flags (1),
//! maximum size of managed objects (4), next huge object ID (L), v2 B-tree address of huge
//! objects (O), amount of free space in managed blocks (L), address of managed block free space
//! manager (O), amount of managed space (L), amount of allocated managed space (L), offset of
//! direct block allocation iterator (L), number of managed objects (L), size of huge objects
//! (L), number of huge objects (L), size of tiny objects (L), number of tiny objects (L), table
//! width (2), starting block size (L), maximum direct block size (L), maximum heap size in bits
//! (2), starting number of rows in root indirect block (2), address of root block (O), current
//! number of rows in root indirect block (2); if the filters' length is non-zero: size of the
//! filtered root direct block (L), I/O filter mask (4), the filter pipeline message (filters'
//! length bytes); checksum (4, lookup3 of everything before it).
//!
//! Flags: bit 0 = huge object IDs have wrapped, bit 1 = direct blocks are checksummed.

use super::dtable::DoublingTable;
use super::{bytes_for_bits, encode_error, put_length, put_offset};
use crate::checksum::lookup3;
use crate::error::Result;
use crate::reader::{Reader, Sizes, UNDEFINED_ADDRESS};
use crate::writer::Writer;

const STRUCTURE: &str = "fractal heap header";

/// The root direct block's filtered size and mask (filtered heaps only).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FilteredRoot {
    /// Size of the filtered root direct block on disk.
    pub size: u64,
    /// Filters skipped for it.
    pub filter_mask: u32,
}

/// What the root of the managed space is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum RootBlock {
    /// No managed objects yet.
    Empty,
    /// A single direct block at heap offset 0.
    Direct {
        /// Its address.
        address: u64,
        /// Its size in memory (the starting block size).
        size: u64,
        /// Its size on disk (differs from `size` when filtered).
        disk_size: u64,
    },
    /// An indirect block at heap offset 0.
    Indirect {
        /// Its address.
        address: u64,
        /// Its number of rows.
        rows: u16,
    },
}

/// A decoded fractal heap header.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FractalHeapHeader {
    /// File address of the header (direct and indirect blocks point back to it).
    pub address: u64,
    /// Address and length sizes of the file.
    pub sizes: Sizes,
    /// Length in bytes of the heap IDs.
    pub heap_id_len: u16,
    /// Length of the encoded I/O filter pipeline (0 when unfiltered).
    pub io_filters_len: u16,
    /// Flag bit 0: the huge object ID counter has wrapped.
    pub huge_ids_wrapped: bool,
    /// Flag bit 1: direct blocks carry a checksum.
    pub checksum_direct_blocks: bool,
    /// Largest object stored in managed space.
    pub max_managed_object_size: u32,
    /// Next huge object ID.
    pub next_huge_id: u64,
    /// Address of the v2 B-tree of huge objects.
    pub huge_btree_address: u64,
    /// Free space in managed blocks.
    pub managed_free_space: u64,
    /// Address of the managed block free-space manager.
    pub free_space_manager_address: u64,
    /// Managed space in the heap.
    pub managed_space: u64,
    /// Allocated managed space.
    pub allocated_managed_space: u64,
    /// Offset of the direct block allocation iterator.
    pub allocation_iterator_offset: u64,
    /// Number of managed objects.
    pub managed_object_count: u64,
    /// Total size of huge objects.
    pub huge_objects_size: u64,
    /// Number of huge objects.
    pub huge_object_count: u64,
    /// Total size of tiny objects.
    pub tiny_objects_size: u64,
    /// Number of tiny objects.
    pub tiny_object_count: u64,
    /// The doubling table.
    pub table: DoublingTable,
    /// Starting number of rows in the root indirect block.
    pub starting_root_rows: u16,
    /// Address of the root block.
    pub root_block_address: u64,
    /// Current number of rows in the root indirect block (0: the root is a direct block).
    pub root_rows: u16,
    /// Filtered root direct block information (filtered heaps only).
    pub filtered_root: Option<FilteredRoot>,
    /// The encoded I/O filter pipeline message (empty when unfiltered).
    pub filter_pipeline: Vec<u8>,
}

impl FractalHeapHeader {
    /// Bytes of the header without the filter part and checksum.
    #[allow(clippy::arithmetic_side_effects, reason = "constants and 1-byte sizes")]
    fn base_len(sizes: Sizes) -> usize {
        22 + 12 * usize::from(sizes.length) + 3 * usize::from(sizes.offset)
    }

    /// The full size of the header from a prefix of at least 9 bytes (signature, version,
    /// heap ID length and filters' length).
    pub fn total_len(prefix: &[u8], sizes: Sizes, address: u64) -> Result<usize> {
        let mut r = Reader::new(prefix, STRUCTURE, address);
        r.signature(b"FRHP")?;
        let version = r.u8()?;
        if version != 0 {
            return Err(r.unsupported(format!("fractal heap header version {version}")));
        }
        r.skip(2)?;
        let filters = usize::from(r.u16()?);
        let filter_part = if filters > 0 {
            usize::from(sizes.length)
                .saturating_add(4)
                .saturating_add(filters)
        } else {
            0
        };
        Ok(Self::base_len(sizes)
            .saturating_add(filter_part)
            .saturating_add(4))
    }

    /// Decodes and checks the header (checksum, doubling table, counts).
    pub fn decode(bytes: &[u8], sizes: Sizes, address: u64) -> Result<Self> {
        let total = Self::total_len(bytes, sizes, address)?;
        let mut outer = Reader::new(bytes, STRUCTURE, address);
        // `r` covers the header exactly, checksum included.
        let mut r = outer.sub(total)?;
        let body = r.all().get(..total.saturating_sub(4)).unwrap_or_default();
        r.skip(5)?;
        let heap_id_len = r.u16()?;
        let io_filters_len = r.u16()?;
        let flags = r.u8()?;
        let max_managed_object_size = r.u32()?;
        let next_huge_id = r.length(sizes)?;
        let huge_btree_address = r.offset(sizes)?;
        let managed_free_space = r.length(sizes)?;
        let free_space_manager_address = r.offset(sizes)?;
        let managed_space = r.length(sizes)?;
        let allocated_managed_space = r.length(sizes)?;
        let allocation_iterator_offset = r.length(sizes)?;
        let managed_object_count = r.length(sizes)?;
        let huge_objects_size = r.length(sizes)?;
        let huge_object_count = r.length(sizes)?;
        let tiny_objects_size = r.length(sizes)?;
        let tiny_object_count = r.length(sizes)?;
        let width = r.u16()?;
        let start_block_size = r.length(sizes)?;
        let max_direct_block_size = r.length(sizes)?;
        let max_heap_size_bits = r.u16()?;
        let starting_root_rows = r.u16()?;
        let root_block_address = r.offset(sizes)?;
        let root_rows = r.u16()?;
        let (filtered_root, filter_pipeline) = if io_filters_len > 0 {
            let size = r.length(sizes)?;
            let filter_mask = r.u32()?;
            let pipeline = r.bytes(usize::from(io_filters_len))?.to_vec();
            (Some(FilteredRoot { size, filter_mask }), pipeline)
        } else {
            (None, Vec::new())
        };
        let stored = r.u32()?;
        let computed = lookup3(body, 0);
        if !crate::checksum::matches(stored, computed) {
            return Err(r.corrupted(format!(
                "checksum {stored:#010x} stored, {computed:#010x} computed"
            )));
        }
        if flags & !0b11 != 0 {
            return Err(r.corrupted(format!("unknown flags {flags:#04x}")));
        }
        let table = DoublingTable::new(
            width,
            start_block_size,
            max_direct_block_size,
            max_heap_size_bits,
        )
        .map_err(|e| match e {
            crate::FormatError::Corrupted { reason, .. } => r.corrupted(reason),
            other => other,
        })?;
        if u32::from(max_heap_size_bits) > 8 * u32::from(sizes.length) {
            return Err(r.corrupted(format!(
                "maximum heap size of {max_heap_size_bits} bits exceeds the file's lengths"
            )));
        }
        if u64::from(max_managed_object_size) > max_direct_block_size {
            return Err(r.corrupted(format!(
                "maximum managed object size {max_managed_object_size} exceeds the maximum direct block size"
            )));
        }
        if heap_id_len < 2 {
            return Err(r.corrupted(format!("heap ID length {heap_id_len}")));
        }
        let max_rows = table.max_root_rows();
        if u32::from(root_rows) > max_rows || u32::from(starting_root_rows) > max_rows {
            return Err(r.corrupted(format!(
                "root indirect block of {root_rows} rows (starting {starting_root_rows}; at most {max_rows})"
            )));
        }
        let h = Self {
            address,
            sizes,
            heap_id_len,
            io_filters_len,
            huge_ids_wrapped: flags & 1 != 0,
            checksum_direct_blocks: flags & 2 != 0,
            max_managed_object_size,
            next_huge_id,
            huge_btree_address,
            managed_free_space,
            free_space_manager_address,
            managed_space,
            allocated_managed_space,
            allocation_iterator_offset,
            managed_object_count,
            huge_objects_size,
            huge_object_count,
            tiny_objects_size,
            tiny_object_count,
            table,
            starting_root_rows,
            root_block_address,
            root_rows,
            filtered_root,
            filter_pipeline,
        };
        if usize::from(heap_id_len)
            < h.heap_offset_size()
                .saturating_add(h.heap_length_size())
                .saturating_add(1)
        {
            return Err(r.corrupted(format!(
                "heap ID length {heap_id_len} too short for managed object IDs"
            )));
        }
        Ok(h)
    }

    /// The header's size on disk (checksum included).
    pub fn encoded_len(&self) -> usize {
        let filter_part = if self.is_filtered() {
            usize::from(self.sizes.length)
                .saturating_add(4)
                .saturating_add(usize::from(self.io_filters_len))
        } else {
            0
        };
        Self::base_len(self.sizes)
            .saturating_add(filter_part)
            .saturating_add(4)
    }

    /// Encodes the header ([`Self::encoded_len`] bytes, checksum included), the inverse of
    /// [`Self::decode`]. Errors when a value does not fit its field or the filter fields
    /// disagree (`io_filters_len` must be the pipeline's length, and the filtered root
    /// information must be present exactly when there is a pipeline).
    pub fn encode(&self) -> Result<Vec<u8>> {
        let sizes = self.sizes;
        if usize::from(self.io_filters_len) != self.filter_pipeline.len()
            || self.filtered_root.is_some() != self.is_filtered()
        {
            return Err(encode_error(
                STRUCTURE,
                format!(
                    "filter length {} with a {}-byte pipeline and {} filtered root",
                    self.io_filters_len,
                    self.filter_pipeline.len(),
                    if self.filtered_root.is_some() {
                        "a"
                    } else {
                        "no"
                    }
                ),
            ));
        }
        let mut w = Writer::with_capacity(self.encoded_len());
        w.bytes(b"FRHP");
        w.u8(0);
        w.u16(self.heap_id_len);
        w.u16(self.io_filters_len);
        w.u8(u8::from(self.huge_ids_wrapped) | u8::from(self.checksum_direct_blocks) << 1);
        w.u32(self.max_managed_object_size);
        let len = |w: &mut Writer, field: &str, v: u64| put_length(w, STRUCTURE, field, sizes, v);
        let addr = |w: &mut Writer, field: &str, v: u64| put_offset(w, STRUCTURE, field, sizes, v);
        len(&mut w, "next huge object ID", self.next_huge_id)?;
        addr(
            &mut w,
            "huge object B-tree address",
            self.huge_btree_address,
        )?;
        len(&mut w, "managed free space", self.managed_free_space)?;
        addr(
            &mut w,
            "free-space manager address",
            self.free_space_manager_address,
        )?;
        len(&mut w, "managed space", self.managed_space)?;
        len(
            &mut w,
            "allocated managed space",
            self.allocated_managed_space,
        )?;
        len(
            &mut w,
            "allocation iterator offset",
            self.allocation_iterator_offset,
        )?;
        len(&mut w, "managed object count", self.managed_object_count)?;
        len(&mut w, "huge objects size", self.huge_objects_size)?;
        len(&mut w, "huge object count", self.huge_object_count)?;
        len(&mut w, "tiny objects size", self.tiny_objects_size)?;
        len(&mut w, "tiny object count", self.tiny_object_count)?;
        w.u16(self.table.width);
        len(&mut w, "starting block size", self.table.start_block_size)?;
        len(
            &mut w,
            "maximum direct block size",
            self.table.max_direct_block_size,
        )?;
        w.u16(self.table.max_heap_size_bits);
        w.u16(self.starting_root_rows);
        addr(&mut w, "root block address", self.root_block_address)?;
        w.u16(self.root_rows);
        if let Some(root) = self.filtered_root {
            len(&mut w, "filtered root block size", root.size)?;
            w.u32(root.filter_mask);
            w.bytes(&self.filter_pipeline);
        }
        w.checksum_from(0);
        Ok(w.into_bytes())
    }

    /// Bytes of a heap offset (block offsets and managed IDs): `ceil(max heap size bits / 8)`.
    pub fn heap_offset_size(&self) -> usize {
        bytes_for_bits(u32::from(self.table.max_heap_size_bits))
    }

    /// Bytes of the length in a managed object ID: the smaller of the bytes for an offset in
    /// the largest direct block and the bytes needed for the maximum managed object size.
    pub fn heap_length_size(&self) -> usize {
        let in_block = bytes_for_bits(self.table.max_direct_block_size.trailing_zeros());
        let max = u64::from(self.max_managed_object_size);
        // floor(log2(max)) / 8 + 1, with log2(0) taken as 0.
        let for_max =
            (63u32.saturating_sub(max.max(1).leading_zeros()) / 8).saturating_add(1) as usize;
        in_block.min(for_max)
    }

    /// Whether the heap has an I/O filter pipeline.
    pub fn is_filtered(&self) -> bool {
        self.io_filters_len > 0
    }

    /// Bytes of a direct block's header (signature, version, heap address, block offset and,
    /// when direct blocks are checksummed, the checksum).
    pub fn direct_block_header_len(&self) -> usize {
        5usize
            .saturating_add(usize::from(self.sizes.offset))
            .saturating_add(self.heap_offset_size())
            .saturating_add(if self.checksum_direct_blocks { 4 } else { 0 })
    }

    /// Bytes of an indirect block with `rows` rows.
    pub fn indirect_block_len(&self, rows: u16) -> usize {
        let (direct, indirect) = self.table.split_rows(rows);
        let width = usize::from(self.table.width);
        let addr = usize::from(self.sizes.offset);
        let direct_entry = if self.is_filtered() {
            addr.saturating_add(usize::from(self.sizes.length))
                .saturating_add(4)
        } else {
            addr
        };
        // rows ≤ 65535 and width ≤ 32768: at most ~2^31 entries of ≤ 20 bytes, no overflow
        // on 64-bit targets; saturate elsewhere (the load then fails as truncated).
        5usize
            .saturating_add(addr)
            .saturating_add(self.heap_offset_size())
            .saturating_add(4)
            .saturating_add(
                (direct as usize)
                    .saturating_mul(width)
                    .saturating_mul(direct_entry),
            )
            .saturating_add(
                (indirect as usize)
                    .saturating_mul(width)
                    .saturating_mul(addr),
            )
    }

    /// The root of the managed space.
    pub fn root(&self) -> RootBlock {
        if self.root_block_address == UNDEFINED_ADDRESS {
            RootBlock::Empty
        } else if self.root_rows == 0 {
            let size = self.table.start_block_size;
            RootBlock::Direct {
                address: self.root_block_address,
                size,
                disk_size: self.filtered_root.map_or(size, |f| f.size),
            }
        } else {
            RootBlock::Indirect {
                address: self.root_block_address,
                rows: self.root_rows,
            }
        }
    }
}
