//! Building a new fractal heap of managed objects, sans I/O, laid out as libhdf5 lays out a
//! heap filled by sequential inserts (dense link storage, dense attribute storage).
//!
//! The builder follows libhdf5's allocation rules so that the blocks, their heap offsets and
//! the header's counters come out as libhdf5 writes them:
//!
//! - Objects no longer than [`FractalHeapHeader::tiny_max_len`] are stored in their heap ID.
//! - A managed object goes into the free section that fits it best (the smallest free section
//!   at least as large, the lowest heap offset among equals), at the section's start.
//! - When no section fits, a new direct block is created at the *next-block iterator*: the
//!   first object's block is the root direct block (when the object fits a starting-size
//!   block); the next one turns the root into an indirect block of `starting_root_rows` rows
//!   holding the old root as entry 0; a full root indirect block doubles its rows; rows past
//!   the direct rows hold child indirect blocks, created with all their rows.
//! - An object too large for the block at the iterator skips blocks (they become free
//!   sections, instantiated later when an object picks them) up to a row whose blocks hold it.
//! - The free space counter covers every direct block the root indirect block can hold,
//!   created or not, minus the managed objects' bytes; the allocated space counts created
//!   direct blocks; the iterator offset is the heap offset after the last block placed.
//!
//! Not supported (typed errors): objects larger than the maximum managed object size (libhdf5
//! stores them as *huge* objects, outside the managed space) and skipping whole child indirect
//! blocks (impossible with libhdf5's link and attribute heap parameters). No free-space
//! manager is written: the header records the undefined address, which libhdf5 accepts.

// The builder lays out heaps of the engine's own objects, never bytes from a file: the doubling
// table's invariants (checked by `DoublingTable::new` when the builder is made) bound every heap
// offset and block size below 2^max_heap_size_bits ≤ 2^64, and objects are at most the maximum
// managed object size (a u32).
#![allow(
    clippy::arithmetic_side_effects,
    reason = "offsets bounded by the doubling table's invariants, checked at construction"
)]

use std::collections::{BTreeMap, BTreeSet};

use super::block::{ChildDirectBlock, FractalDirectBlock, FractalIndirectBlock};
use super::dtable::{ChildKind, DoublingTable};
use super::encode_error;
use super::header::FractalHeapHeader;
use super::id::HeapId;
use crate::error::Result;
use crate::reader::{Sizes, UNDEFINED_ADDRESS};

const STRUCTURE: &str = "fractal heap builder";

/// Creation parameters of a fractal heap.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FractalHeapParams {
    /// Columns of the doubling table (a power of two).
    pub table_width: u16,
    /// Size of the first blocks (a power of two).
    pub start_block_size: u64,
    /// Largest direct block size (a power of two).
    pub max_direct_block_size: u64,
    /// Bits of the heap's address space.
    pub max_heap_size_bits: u16,
    /// Rows of the root indirect block when it is created (0: all rows at once).
    pub starting_root_rows: u16,
    /// Largest object stored in managed space.
    pub max_managed_object_size: u32,
    /// Bytes of a heap ID.
    pub heap_id_len: u16,
    /// Whether direct blocks carry a checksum.
    pub checksum_direct_blocks: bool,
}

impl FractalHeapParams {
    /// libhdf5's parameters for a group's dense link storage (link messages): width 4,
    /// 512-byte starting blocks, 64 KiB direct blocks, 32-bit heap, one starting root row,
    /// 4 KiB managed objects, 7-byte IDs, checksummed direct blocks.
    pub fn dense_links() -> Self {
        Self {
            table_width: 4,
            start_block_size: 512,
            max_direct_block_size: 64 * 1024,
            max_heap_size_bits: 32,
            starting_root_rows: 1,
            max_managed_object_size: 4 * 1024,
            heap_id_len: 7,
            checksum_direct_blocks: true,
        }
    }

    /// libhdf5's parameters for an object's dense attribute storage (attribute messages):
    /// as for links but 1 KiB starting blocks, a 40-bit heap and 8-byte IDs.
    pub fn dense_attributes() -> Self {
        Self {
            start_block_size: 1024,
            max_heap_size_bits: 40,
            heap_id_len: 8,
            ..Self::dense_links()
        }
    }
}

/// What a structure handed to the allocator is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum FractalBlockKind {
    /// The heap header (`FRHP`).
    Header,
    /// A direct block (`FHDB`).
    DirectBlock,
    /// An indirect block (`FHIB`).
    IndirectBlock,
}

/// One encoded structure of a finished heap.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct EncodedFractalBlock {
    /// What it is.
    pub kind: FractalBlockKind,
    /// The address the allocator gave it.
    pub address: u64,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// A finished heap: its header and every structure to write.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct EncodedFractalHeap {
    /// The header as encoded (its `address` is the heap's address).
    pub header: FractalHeapHeader,
    /// The header first, then the blocks in the order they were allocated.
    pub blocks: Vec<EncodedFractalBlock>,
}

/// A block of the heap under construction (index into the builder's arenas).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Node {
    Direct(usize),
    Indirect(usize),
}

/// An indirect block under construction.
#[derive(Clone, Debug)]
struct IndirectNode {
    block_offset: u64,
    rows: u16,
    /// `rows * width` slots, row by row.
    entries: Vec<Option<Node>>,
}

/// A free section: free bytes in a direct block, or a skipped (not yet created) direct block.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
enum SectionKind {
    InBlock,
    SkippedBlock,
}

/// Free sections ordered for best fit: size, then heap offset.
type Section = (u64, u64, SectionKind);

/// Where the next-block iterator points: a slot of an indirect block (`row` equal to the
/// block's rows when it is past the root's end).
#[derive(Clone, Copy, Debug)]
struct Position {
    iblock: usize,
    row: u32,
    entry: usize,
}

/// Builds a new fractal heap of managed (and tiny) objects; see the module documentation.
#[derive(Clone, Debug)]
pub struct FractalHeapBuilder {
    /// The header under construction: parameters and counters (address and root are set by
    /// [`Self::finish`]).
    hdr: FractalHeapHeader,
    direct: Vec<FractalDirectBlock>,
    indirect: Vec<IndirectNode>,
    /// Direct blocks by heap offset.
    direct_at: BTreeMap<u64, usize>,
    root: Option<Node>,
    free: BTreeSet<Section>,
    /// Blocks in allocation order (the root indirect block moves to the end when it grows,
    /// as libhdf5 reallocates it).
    order: Vec<Node>,
}

impl FractalHeapBuilder {
    /// An empty heap with these parameters, in a file with these address and length sizes.
    /// Errors when the parameters do not describe a valid heap.
    pub fn new(params: FractalHeapParams, sizes: Sizes) -> Result<Self> {
        let table = DoublingTable::new(
            params.table_width,
            params.start_block_size,
            params.max_direct_block_size,
            params.max_heap_size_bits,
        )?;
        let hdr = FractalHeapHeader {
            address: UNDEFINED_ADDRESS,
            sizes,
            heap_id_len: params.heap_id_len,
            io_filters_len: 0,
            huge_ids_wrapped: false,
            checksum_direct_blocks: params.checksum_direct_blocks,
            max_managed_object_size: params.max_managed_object_size,
            next_huge_id: 0,
            huge_btree_address: UNDEFINED_ADDRESS,
            managed_free_space: 0,
            free_space_manager_address: UNDEFINED_ADDRESS,
            managed_space: 0,
            allocated_managed_space: 0,
            allocation_iterator_offset: 0,
            managed_object_count: 0,
            huge_objects_size: 0,
            huge_object_count: 0,
            tiny_objects_size: 0,
            tiny_object_count: 0,
            table,
            starting_root_rows: params.starting_root_rows,
            root_block_address: UNDEFINED_ADDRESS,
            root_rows: 0,
            filtered_root: None,
            filter_pipeline: Vec::new(),
        };
        let invalid = |what: String| Err(encode_error(STRUCTURE, what));
        if u32::from(params.max_heap_size_bits) > 8 * u32::from(sizes.length) {
            return invalid(format!(
                "a {}-bit heap in a file of {}-byte lengths",
                params.max_heap_size_bits, sizes.length
            ));
        }
        if u32::from(params.starting_root_rows) > table.max_root_rows() {
            return invalid(format!(
                "{} starting root rows (at most {})",
                params.starting_root_rows,
                table.max_root_rows()
            ));
        }
        let overhead = hdr.direct_block_header_len() as u64;
        if params.max_managed_object_size == 0
            || u64::from(params.max_managed_object_size)
                > params.max_direct_block_size.saturating_sub(overhead)
        {
            return invalid(format!(
                "maximum managed object size {} with {}-byte direct blocks",
                params.max_managed_object_size, params.max_direct_block_size
            ));
        }
        if usize::from(params.heap_id_len) < 1 + hdr.heap_offset_size() + hdr.heap_length_size() {
            return invalid(format!(
                "heap ID length {} too short for managed objects",
                params.heap_id_len
            ));
        }
        Ok(Self {
            hdr,
            direct: Vec::new(),
            indirect: Vec::new(),
            direct_at: BTreeMap::new(),
            root: None,
            free: BTreeSet::new(),
            order: Vec::new(),
        })
    }

    /// The header as it stands (counters up to date; address and root set by
    /// [`Self::finish`]).
    pub fn header(&self) -> &FractalHeapHeader {
        &self.hdr
    }

    /// Stores `obj` and returns its heap ID (the heap's ID length). Tiny objects go into the
    /// ID, others into managed space. Errors (leaving the heap unchanged) for an empty
    /// object, an object larger than the maximum managed object size (a huge object, not
    /// supported) or a full heap.
    pub fn insert(&mut self, obj: &[u8]) -> Result<Vec<u8>> {
        if obj.is_empty() {
            return Err(encode_error(STRUCTURE, "an empty object".into()));
        }
        let len = obj.len() as u64;
        if len > u64::from(self.hdr.max_managed_object_size) {
            return Err(encode_error(
                STRUCTURE,
                format!(
                    "huge object of {len} bytes (managed objects are at most {} bytes)",
                    self.hdr.max_managed_object_size
                ),
            ));
        }
        if obj.len() <= self.hdr.tiny_max_len() {
            let id = HeapId::Tiny(obj).encode(&self.hdr)?;
            self.hdr.tiny_object_count += 1;
            self.hdr.tiny_objects_size += len;
            return Ok(id);
        }
        // A failure restores the bookkeeping (the block images are only appended to or
        // written last, so truncating them undoes the rest).
        let saved = (
            self.hdr.clone(),
            self.indirect.clone(),
            self.direct_at.clone(),
            self.root,
            self.free.clone(),
            self.order.clone(),
            self.direct.len(),
        );
        match self
            .insert_managed(obj)
            .and_then(|offset| HeapId::Managed { offset, len }.encode(&self.hdr))
        {
            Ok(id) => Ok(id),
            Err(e) => {
                let (hdr, indirect, direct_at, root, free, order, direct_len) = saved;
                self.hdr = hdr;
                self.indirect = indirect;
                self.direct_at = direct_at;
                self.root = root;
                self.free = free;
                self.order = order;
                self.direct.truncate(direct_len);
                Err(e)
            }
        }
    }

    /// Encodes the heap: asks `alloc` for the address of every structure (the header first,
    /// then the blocks in libhdf5's creation order) with its size in bytes, and returns the
    /// header and every structure's bytes.
    pub fn finish(
        mut self,
        alloc: &mut dyn FnMut(FractalBlockKind, u64) -> u64,
    ) -> Result<EncodedFractalHeap> {
        self.hdr.address = alloc(FractalBlockKind::Header, self.hdr.encoded_len() as u64);
        let mut direct_addr = vec![UNDEFINED_ADDRESS; self.direct.len()];
        let mut indirect_addr = vec![UNDEFINED_ADDRESS; self.indirect.len()];
        for &node in &self.order {
            match node {
                Node::Direct(d) => {
                    let len = self.direct.get(d).map_or(0, |b| b.image.len() as u64);
                    if let Some(a) = direct_addr.get_mut(d) {
                        *a = alloc(FractalBlockKind::DirectBlock, len);
                    }
                }
                Node::Indirect(i) => {
                    let rows = self.indirect.get(i).map_or(0, |b| b.rows);
                    let len = self.hdr.indirect_block_len(rows) as u64;
                    if let Some(a) = indirect_addr.get_mut(i) {
                        *a = alloc(FractalBlockKind::IndirectBlock, len);
                    }
                }
            }
        }
        let address_of = |node: Option<Node>| match node {
            Some(Node::Direct(d)) => direct_addr.get(d).copied().unwrap_or(UNDEFINED_ADDRESS),
            Some(Node::Indirect(i)) => indirect_addr.get(i).copied().unwrap_or(UNDEFINED_ADDRESS),
            None => UNDEFINED_ADDRESS,
        };
        self.hdr.root_block_address = address_of(self.root);
        self.hdr.root_rows = match self.root {
            Some(Node::Indirect(i)) => self.indirect.get(i).map_or(0, |b| b.rows),
            _ => 0,
        };
        let mut blocks = vec![EncodedFractalBlock {
            kind: FractalBlockKind::Header,
            address: self.hdr.address,
            bytes: self.hdr.encode()?,
        }];
        let width = usize::from(self.hdr.table.width);
        for &node in &self.order {
            let (kind, bytes) = match node {
                Node::Direct(d) => {
                    let block = self.direct.get(d).ok_or_else(|| lost(node))?;
                    (FractalBlockKind::DirectBlock, block.encode(&self.hdr)?)
                }
                Node::Indirect(i) => {
                    let block = self.indirect.get(i).ok_or_else(|| lost(node))?;
                    let (direct_rows, _) = self.hdr.table.split_rows(block.rows);
                    let split = direct_rows as usize * width;
                    let encoded = FractalIndirectBlock {
                        block_offset: block.block_offset,
                        rows: block.rows,
                        direct: block
                            .entries
                            .iter()
                            .take(split)
                            .map(|&e| ChildDirectBlock {
                                address: address_of(e),
                                filtered_size: None,
                                filter_mask: None,
                            })
                            .collect(),
                        indirect: block
                            .entries
                            .iter()
                            .skip(split)
                            .map(|&e| address_of(e))
                            .collect(),
                    };
                    (FractalBlockKind::IndirectBlock, encoded.encode(&self.hdr)?)
                }
            };
            blocks.push(EncodedFractalBlock {
                kind,
                address: address_of(Some(node)),
                bytes,
            });
        }
        Ok(EncodedFractalHeap {
            header: self.hdr,
            blocks,
        })
    }

    // ---- managed space ------------------------------------------------------------------

    fn overhead(&self) -> u64 {
        self.hdr.direct_block_header_len() as u64
    }

    fn table(&self) -> DoublingTable {
        self.hdr.table
    }

    fn width(&self) -> usize {
        usize::from(self.hdr.table.width)
    }

    /// Places `obj` in managed space and returns its heap offset.
    fn insert_managed(&mut self, obj: &[u8]) -> Result<u64> {
        let len = obj.len() as u64;
        let best = self
            .free
            .range((len, 0, SectionKind::InBlock)..)
            .next()
            .copied();
        let (size, offset) = match best {
            Some(section @ (size, offset, kind)) => {
                self.free.remove(&section);
                match kind {
                    SectionKind::InBlock => (size, offset),
                    SectionKind::SkippedBlock => self.create_skipped_block(offset)?,
                }
            }
            None => self.new_direct_block(len)?,
        };
        if size > len {
            self.free
                .insert((size - len, offset + len, SectionKind::InBlock));
        }
        self.write_object(offset, obj)?;
        self.hdr.managed_object_count += 1;
        self.hdr.managed_free_space = self.hdr.managed_free_space.saturating_sub(len);
        Ok(offset)
    }

    fn write_object(&mut self, offset: u64, obj: &[u8]) -> Result<()> {
        let (&start, &d) = self
            .direct_at
            .range(..=offset)
            .next_back()
            .ok_or_else(|| internal(format!("no direct block holds heap offset {offset}")))?;
        let block = self
            .direct
            .get_mut(d)
            .ok_or_else(|| lost(Node::Direct(d)))?;
        let at = usize::try_from(offset - start).map_err(|_| internal("offset".into()))?;
        block
            .image
            .get_mut(at..at + obj.len())
            .ok_or_else(|| internal(format!("object at heap offset {offset} past its block")))?
            .copy_from_slice(obj);
        Ok(())
    }

    /// Creates a direct block of `size` bytes at heap offset `block_offset` in slot `slot`
    /// of an indirect block (`None`: the root); returns its free section (size, offset).
    fn create_direct(
        &mut self,
        slot: Option<(usize, usize)>,
        block_offset: u64,
        size: u64,
    ) -> Result<(u64, u64)> {
        let block = FractalDirectBlock::empty(&self.hdr, block_offset, size)?;
        let d = self.direct.len();
        self.direct.push(block);
        self.direct_at.insert(block_offset, d);
        match slot {
            Some((i, entry)) => *self.slot_mut(i, entry)? = Some(Node::Direct(d)),
            None => self.root = Some(Node::Direct(d)),
        }
        self.order.push(Node::Direct(d));
        self.hdr.allocated_managed_space += size;
        let overhead = self.overhead();
        Ok((size - overhead, block_offset + overhead))
    }

    fn slot_mut(&mut self, iblock: usize, entry: usize) -> Result<&mut Option<Node>> {
        self.indirect
            .get_mut(iblock)
            .and_then(|b| b.entries.get_mut(entry))
            .ok_or_else(|| internal(format!("slot {entry} of indirect block {iblock}")))
    }

    fn iblock(&self, i: usize) -> Result<&IndirectNode> {
        self.indirect.get(i).ok_or_else(|| lost(Node::Indirect(i)))
    }

    /// Creates the direct block of a skipped section at heap offset `block_offset`.
    fn create_skipped_block(&mut self, block_offset: u64) -> Result<(u64, u64)> {
        let Some(Node::Indirect(mut i)) = self.root else {
            return Err(internal(
                "skipped block without a root indirect block".into(),
            ));
        };
        loop {
            let b = self.iblock(i)?;
            let loc = self.table().locate(b.block_offset, b.rows, block_offset)?;
            match (loc.kind, b.entries.get(loc.entry).copied().flatten()) {
                (ChildKind::Indirect { .. }, Some(Node::Indirect(child))) => i = child,
                (ChildKind::Direct, None) if loc.block_offset == block_offset => {
                    return self.create_direct(Some((i, loc.entry)), block_offset, loc.block_size);
                }
                _ => {
                    return Err(internal(format!(
                        "skipped block at heap offset {block_offset} not free"
                    )));
                }
            }
        }
    }

    /// libhdf5's smallest direct block size for an object of `len` bytes.
    fn min_block_size(&self, len: u64) -> Result<u64> {
        let start = self.table().start_block_size;
        let mut min = if len < start {
            start
        } else {
            1u64.checked_shl(1 + (63 - len.leading_zeros()))
                .unwrap_or(u64::MAX)
        };
        if min < self.overhead() + len {
            min = min.saturating_mul(2);
        }
        if min > self.table().max_direct_block_size {
            return Err(encode_error(
                STRUCTURE,
                format!("object of {len} bytes needs a direct block of {min} bytes"),
            ));
        }
        Ok(min)
    }

    /// Creates a direct block large enough for `len` bytes; returns its free section.
    fn new_direct_block(&mut self, len: u64) -> Result<(u64, u64)> {
        let min = self.min_block_size(len)?;
        let start = self.table().start_block_size;
        if self.root.is_none() && min == start {
            self.hdr.managed_space = start;
            self.hdr.managed_free_space += start - self.overhead();
            return self.create_direct(None, 0, start);
        }
        self.update_iterator(min)?;
        let pos = self.position()?;
        let size = self
            .table()
            .row_block_size(pos.row)
            .filter(|&s| s >= min)
            .ok_or_else(|| internal(format!("row {} cannot hold a {min}-byte block", pos.row)))?;
        let block_offset = self.entry_offset(pos.iblock, pos.entry)?;
        self.hdr.allocation_iterator_offset += size;
        self.create_direct(Some((pos.iblock, pos.entry)), block_offset, size)
    }

    /// Row of the blocks of `size` bytes.
    fn size_to_row(&self, size: u64) -> u32 {
        let start = self.table().start_block_size;
        if size <= start {
            0
        } else {
            size.trailing_zeros() - start.trailing_zeros() + 1
        }
    }

    /// Heap offset of slot `entry` of indirect block `i`.
    fn entry_offset(&self, i: usize, entry: usize) -> Result<u64> {
        let b = self.iblock(i)?;
        let row = (entry / self.width()) as u32;
        let column = (entry % self.width()) as u64;
        let t = self.table();
        match (t.row_offset(row), t.row_block_size(row)) {
            (Some(off), Some(size)) => Ok(b.block_offset + off + column * size),
            _ => Err(internal(format!("row {row}"))),
        }
    }

    /// Free space of all direct blocks in one slot of `row` (a direct block, or a whole child
    /// indirect block).
    fn row_free_space(&self, row: u32) -> u64 {
        let t = self.table();
        if row < t.max_direct_rows() {
            t.row_block_size(row)
                .map_or(0, |s| s.saturating_sub(self.overhead()))
        } else {
            let rows = t.child_rows(row).map_or(0, u32::from);
            (0..rows)
                .map(|r| self.row_free_space(r) * self.width() as u64)
                .sum()
        }
    }

    /// Where the next-block iterator is: the deepest existing indirect block covering the
    /// iterator offset, and the slot there.
    fn position(&self) -> Result<Position> {
        let Some(Node::Indirect(mut i)) = self.root else {
            return Err(internal("iterator without a root indirect block".into()));
        };
        let off = self.hdr.allocation_iterator_offset;
        loop {
            let b = self.iblock(i)?;
            let past_end = self
                .table()
                .indirect_span(b.rows)
                .is_some_and(|span| off >= b.block_offset + span);
            if past_end {
                return Ok(Position {
                    iblock: i,
                    row: u32::from(b.rows),
                    entry: usize::from(b.rows) * self.width(),
                });
            }
            let loc = self.table().locate(b.block_offset, b.rows, off)?;
            match (loc.kind, b.entries.get(loc.entry).copied().flatten()) {
                (ChildKind::Indirect { .. }, Some(Node::Indirect(child))) => i = child,
                _ => {
                    return Ok(Position {
                        iblock: i,
                        row: u32::from(loc.row),
                        entry: loc.entry,
                    });
                }
            }
        }
    }

    /// Moves the iterator to a slot that can hold a direct block of `min` bytes, creating
    /// (or growing) indirect blocks and skipping blocks that are too small.
    fn update_iterator(&mut self, min: u64) -> Result<()> {
        if !matches!(self.root, Some(Node::Indirect(_))) {
            return self.create_root_indirect(min);
        }
        let min_row = self.size_to_row(min);
        let pos = self.position()?;
        let rows = u32::from(self.iblock(pos.iblock)?.rows);
        if min_row > pos.row && pos.row < rows {
            let end_row = min_row.min(rows) as usize;
            self.skip(pos.iblock, pos.entry, end_row * self.width() - pos.entry)?;
        }
        loop {
            let mut walked = false;
            let mut pos = self.position()?;
            while pos.row >= u32::from(self.iblock(pos.iblock)?.rows) {
                self.double_root(min)?;
                pos = self.position()?;
                walked = true;
            }
            if pos.row >= self.table().max_direct_rows() {
                self.create_child_indirect(pos, min, min_row)?;
                walked = true;
            }
            if !walked {
                return Ok(());
            }
        }
    }

    fn create_child_indirect(&mut self, pos: Position, min: u64, min_row: u32) -> Result<()> {
        let t = self.table();
        let rows = t
            .child_rows(pos.row)
            .ok_or_else(|| internal(format!("child rows of row {}", pos.row)))?;
        let largest = t.row_block_size(u32::from(rows) - 1).unwrap_or(0);
        if largest < min {
            return Err(encode_error(
                STRUCTURE,
                format!("skipping {rows}-row indirect blocks for a {min}-byte direct block"),
            ));
        }
        let block_offset = self.entry_offset(pos.iblock, pos.entry)?;
        let child = self.indirect.len();
        self.indirect.push(IndirectNode {
            block_offset,
            rows,
            entries: vec![None; usize::from(rows) * self.width()],
        });
        *self.slot_mut(pos.iblock, pos.entry)? = Some(Node::Indirect(child));
        self.order.push(Node::Indirect(child));
        if min > t.start_block_size {
            self.skip(child, 0, min_row as usize * self.width())?;
        }
        Ok(())
    }

    /// Turns the root (empty or a direct block) into an indirect block.
    fn create_root_indirect(&mut self, min: u64) -> Result<()> {
        let t = self.table();
        let rows = if self.hdr.starting_root_rows == 0 {
            t.max_root_rows()
        } else {
            let mut row_off = min.trailing_zeros() - t.start_bits();
            if row_off > 0 {
                row_off += 1;
            }
            u32::from(self.hdr.starting_root_rows).max(1 + row_off)
        };
        let rows = u16::try_from(rows)
            .ok()
            .filter(|&r| u32::from(r) <= t.max_root_rows())
            .ok_or_else(|| {
                encode_error(STRUCTURE, format!("root indirect block of {rows} rows"))
            })?;
        let old_root = self.root;
        let mut entries = vec![None; usize::from(rows) * self.width()];
        if let (Some(first), Some(Node::Direct(_))) = (entries.first_mut(), old_root) {
            *first = old_root;
        }
        let has_direct = usize::from(old_root.is_some());
        let i = self.indirect.len();
        self.indirect.push(IndirectNode {
            block_offset: 0,
            rows,
            entries,
        });
        self.root = Some(Node::Indirect(i));
        self.order.push(Node::Indirect(i));
        self.hdr.allocation_iterator_offset = if has_direct == 1 {
            t.start_block_size
        } else {
            0
        };
        if min > t.start_block_size {
            let n = (usize::from(rows) - 1) * self.width() - has_direct;
            self.skip(i, has_direct, n)?;
        }
        let all: u64 = (0..u32::from(rows))
            .map(|r| self.row_free_space(r) * self.width() as u64)
            .sum();
        let counted = if has_direct == 1 {
            self.row_free_space(0)
        } else {
            0
        };
        self.hdr.managed_free_space += all - counted;
        self.hdr.managed_space = t
            .indirect_span(rows)
            .ok_or_else(|| internal(format!("span of {rows} rows")))?;
        Ok(())
    }

    /// Doubles the rows of the root indirect block (at least to the row of `min`-byte
    /// blocks); libhdf5 reallocates it, so it moves to the end of the allocation order.
    fn double_root(&mut self, min: u64) -> Result<()> {
        let Some(Node::Indirect(i)) = self.root else {
            return Err(internal("doubling without a root indirect block".into()));
        };
        let t = self.table();
        let old = u32::from(self.iblock(i)?.rows);
        let next_size = t.row_block_size(old);
        let skip_direct = old < t.max_direct_rows() && next_size.is_some_and(|s| min > s);
        let min_rows = if skip_direct {
            1 + self.size_to_row(min)
        } else {
            0
        };
        let new = min_rows.max((2 * old).min(t.max_root_rows()));
        if new <= old {
            return Err(encode_error(
                STRUCTURE,
                format!(
                    "heap full: the root indirect block has all {old} rows of a {}-bit heap",
                    t.max_heap_size_bits
                ),
            ));
        }
        let width = self.width();
        let new_rows = u16::try_from(new).map_err(|_| internal(format!("{new} rows")))?;
        let b = self
            .indirect
            .get_mut(i)
            .ok_or_else(|| lost(Node::Indirect(i)))?;
        b.rows = new_rows;
        b.entries.resize(new as usize * width, None);
        self.order.retain(|&n| n != Node::Indirect(i));
        self.order.push(Node::Indirect(i));
        if skip_direct {
            let first = old as usize * width;
            self.skip(i, first, (min_rows as usize - 1) * width - first)?;
        }
        let added: u64 = (old..new)
            .map(|r| self.row_free_space(r) * width as u64)
            .sum();
        self.hdr.managed_free_space += added;
        self.hdr.managed_space = t
            .indirect_span(new_rows)
            .ok_or_else(|| internal(format!("span of {new} rows")))?;
        Ok(())
    }

    /// Skips `n` slots of indirect block `i` from `start`: each becomes a free section of
    /// a whole (not yet created) direct block, and the iterator moves past them.
    fn skip(&mut self, i: usize, start: usize, n: usize) -> Result<()> {
        for entry in start..start + n {
            let row = (entry / self.width()) as u32;
            let t = self.table();
            if row >= t.max_direct_rows() {
                return Err(encode_error(
                    STRUCTURE,
                    format!("skipping the indirect blocks of row {row}"),
                ));
            }
            let size = t
                .row_block_size(row)
                .ok_or_else(|| internal(format!("row {row}")))?;
            let offset = self.entry_offset(i, entry)?;
            self.free
                .insert((size - self.overhead(), offset, SectionKind::SkippedBlock));
            self.hdr.allocation_iterator_offset += size;
        }
        Ok(())
    }
}

fn internal(what: String) -> crate::FormatError {
    encode_error(STRUCTURE, format!("internal inconsistency: {what}"))
}

fn lost(node: Node) -> crate::FormatError {
    internal(format!("{node:?} missing"))
}
