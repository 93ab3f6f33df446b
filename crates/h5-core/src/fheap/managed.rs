//! Managed objects: placing, rewriting and removing objects in direct blocks, and growing and
//! shrinking the heap's blocks as libhdf5 does (`H5HFman.c`, `H5HFdblock.c`, `H5HFiblock.c`,
//! `H5HFhdr.c`; the byte-exact layout of sequential inserts is checked against
//! `FractalHeapBuilder`, itself checked against libhdf5's files).
//!
//! Growth: an object goes into the best free section; without one, a new direct block of at
//! least libhdf5's minimum size for it is made at the next-block iterator. The first block is
//! the root direct block; the next turns the root into an indirect block of `starting_root_rows`
//! rows (the old root its entry 0); a full root indirect block is freed and allocated again
//! with twice the rows; rows past the direct rows hold child indirect blocks, made with all
//! their rows. Slots too small for the block wanted are skipped (they become free slots).
//!
//! Shrinking: a direct block whose data area is all free is freed (its slot becomes a free
//! slot, or, for the last block, the iterator moves back to the end of the previous block); an
//! indirect block left without children is freed; a root indirect block left with only its
//! first direct block turns back into a root direct block; a root direct block left empty
//! empties the heap.
//!
//! Counters (header): managed space is the span of the root block; allocated managed space the
//! sum of the direct blocks' sizes; managed free space the data bytes of every direct-block
//! slot the root covers (made or not) minus the bytes of the managed objects.

use h5_format::UNDEFINED_ADDRESS;
use h5_format::heap::fractal::{ChildKind, FractalDirectBlock, FractalIndirectBlock, RootBlock};
use h5_metacache::MetadataKind as K;

use super::space::Section;
use super::{
    DirectAt, HeapChange, IblockAt, MAX_DEPTH, corrupt, dblock_entry, dblock_load, empty_iblock,
    iblock, iblock_entry, iblock_load, locate_direct,
};
use crate::error::{Error, Result};

/// Where the next-block iterator points: an indirect block and a slot of it (`row` equal to
/// the block's rows when the iterator is past the root's end).
#[derive(Clone, Copy, Debug)]
struct Position {
    ib: IblockAt,
    row: u32,
    entry: usize,
}

fn unsupported(what: String) -> Error {
    Error::Unsupported(format!("fractal heap: {what}"))
}

impl HeapChange<'_, '_> {
    fn overhead(&self) -> u64 {
        self.hdr.direct_block_header_len() as u64
    }

    fn width(&self) -> usize {
        usize::from(self.hdr.table.width)
    }

    /// The slots of `rows` rows: the index of the first slot of row `rows`.
    fn slots(&self, rows: u32) -> Result<usize> {
        usize::try_from(rows)
            .ok()
            .and_then(|r| r.checked_mul(self.width()))
            .ok_or_else(|| corrupt(self.hdr.address, format!("{rows} rows of slots")))
    }

    /// The row of slot `entry`.
    fn row_of(&self, entry: usize) -> Result<u32> {
        entry
            .checked_div(self.width())
            .and_then(|r| u32::try_from(r).ok())
            .ok_or_else(|| corrupt(self.hdr.address, format!("the row of slot {entry}")))
    }

    fn root_iblock(&self) -> Option<IblockAt> {
        match self.hdr.root() {
            RootBlock::Indirect { address, rows } => Some(IblockAt {
                addr: address,
                rows,
                block_offset: 0,
            }),
            _ => None,
        }
    }

    /// libhdf5's smallest direct block for an object of `len` bytes.
    fn min_block_size(&self, len: u64) -> Result<u64> {
        self.hdr.min_block_size(len).ok_or_else(|| {
            unsupported(format!(
                "an object of {len} bytes needs a direct block over the maximum"
            ))
        })
    }

    /// Heap offset of slot `entry` of `ib`.
    fn entry_offset(&self, ib: IblockAt, entry: usize) -> Result<u64> {
        self.table()
            .entry_offset(ib.block_offset, entry)
            .ok_or_else(|| corrupt(ib.addr, format!("slot {entry}")))
    }

    /// Makes the block at `child` a flush-dependency child of its parent (`None`: the
    /// header).
    fn link(&mut self, parent: Option<IblockAt>, child: u64) -> Result<()> {
        match parent {
            Some(p) => self.s.depend(K::FractalHeapIndirectBlock, p.addr, child),
            None => {
                let h = self.held.as_ref().ok_or_else(|| {
                    Error::Unsupported("a finished heap change used again".into())
                })?;
                self.s.depend_held(h, child)
            }
        }
    }

    /// Sets slot `entry` of `ib` to `addr`.
    fn set_entry(&mut self, ib: IblockAt, entry: usize, addr: u64) -> Result<()> {
        let load = iblock_load(&self.geom, ib.addr, ib.rows);
        self.s.modify(
            K::FractalHeapIndirectBlock,
            ib.addr,
            load,
            |b: &mut FractalIndirectBlock| {
                // Direct slots first, then indirect ones.
                let slot = match entry.checked_sub(b.direct.len()) {
                    None => b.direct.get_mut(entry).map(|d| &mut d.address),
                    Some(i) => b.indirect.get_mut(i),
                };
                *slot.ok_or_else(|| corrupt(ib.addr, format!("no slot {entry}")))? = addr;
                Ok(())
            },
        )
    }

    /// Where the next-block iterator is: the deepest existing indirect block covering it.
    fn position(&mut self) -> Result<Position> {
        let mut ib = self
            .root_iblock()
            .ok_or_else(|| corrupt(self.hdr.address, "iterator without a root indirect block"))?;
        let off = self.hdr.allocation_iterator_offset;
        let t = self.table();
        for _ in 0..MAX_DEPTH {
            if t.indirect_span(ib.rows)
                .and_then(|span| ib.block_offset.checked_add(span))
                .is_some_and(|end| off >= end)
            {
                return Ok(Position {
                    ib,
                    row: u32::from(ib.rows),
                    entry: self.slots(u32::from(ib.rows))?,
                });
            }
            let loc = t.locate(ib.block_offset, ib.rows, off)?;
            if let ChildKind::Indirect { rows } = loc.kind {
                let child = iblock(self.s, &self.geom, ib)?
                    .child_address(loc.entry)
                    .unwrap_or(UNDEFINED_ADDRESS);
                if child != UNDEFINED_ADDRESS {
                    ib = IblockAt {
                        addr: child,
                        rows,
                        block_offset: loc.block_offset,
                    };
                    continue;
                }
            }
            return Ok(Position {
                ib,
                row: u32::from(loc.row),
                entry: loc.entry,
            });
        }
        Err(corrupt(self.hdr.address, "indirect blocks nested too deep"))
    }

    /// Makes a direct block of `size` bytes at heap offset `block_offset` in slot `entry` of
    /// `parent` (`None`: the root); returns its free section (bytes, heap offset).
    fn create_dblock(
        &mut self,
        parent: Option<IblockAt>,
        entry: usize,
        block_offset: u64,
        size: u64,
    ) -> Result<(u64, u64)> {
        let block = FractalDirectBlock::empty(&self.hdr, block_offset, size)?;
        let addr = self.s.allocate(size)?;
        self.s.insert(
            K::FractalHeapDirectBlock,
            addr,
            dblock_entry(&self.geom, block),
        )?;
        match parent {
            Some(p) => self.set_entry(p, entry, addr)?,
            None => {
                self.hdr.root_block_address = addr;
                self.hdr.root_rows = 0;
            }
        }
        self.link(parent, addr)?;
        self.hdr.allocated_managed_space = self.add(self.hdr.allocated_managed_space, size)?;
        let overhead = self.overhead();
        Ok((self.sub(size, overhead)?, self.add(block_offset, overhead)?))
    }

    /// Puts the new indirect block `b` into the file and the cache, a flush-dependency child of
    /// `parent` (`None`: the header); returns where it is.
    fn put_iblock(
        &mut self,
        b: FractalIndirectBlock,
        parent: Option<IblockAt>,
    ) -> Result<IblockAt> {
        let (rows, block_offset) = (b.rows, b.block_offset);
        let addr = self.s.allocate(self.hdr.indirect_block_len(rows) as u64)?;
        self.s.insert(
            K::FractalHeapIndirectBlock,
            addr,
            iblock_entry(&self.geom, b),
        )?;
        self.link(parent, addr)?;
        Ok(IblockAt {
            addr,
            rows,
            block_offset,
        })
    }

    /// Makes an empty indirect block of `rows` rows at heap offset `block_offset` in slot
    /// `entry` of `parent`.
    fn create_child_iblock(
        &mut self,
        parent: IblockAt,
        entry: usize,
        rows: u16,
        block_offset: u64,
    ) -> Result<IblockAt> {
        let child = self.put_iblock(empty_iblock(&self.hdr, block_offset, rows), Some(parent))?;
        self.set_entry(parent, entry, child.addr)?;
        Ok(child)
    }

    /// Skips `n` slots of `ib` from `start`: each becomes a free slot and the iterator moves
    /// past it.
    fn skip(&mut self, ib: IblockAt, start: usize, n: usize) -> Result<()> {
        let t = self.table();
        let end = start
            .checked_add(n)
            .ok_or_else(|| corrupt(ib.addr, format!("{n} slots from {start}")))?;
        for entry in start..end {
            let row = self.row_of(entry)?;
            if row >= t.max_direct_rows() {
                return Err(unsupported(format!(
                    "skipping the indirect blocks of row {row}"
                )));
            }
            let size = t
                .row_block_size(row)
                .ok_or_else(|| corrupt(ib.addr, format!("row {row}")))?;
            let offset = self.entry_offset(ib, entry)?;
            let overhead = self.overhead();
            self.space.add_slot(offset, self.sub(size, overhead)?);
            self.hdr.allocation_iterator_offset =
                self.add(self.hdr.allocation_iterator_offset, size)?;
        }
        Ok(())
    }

    /// Turns the root (empty or a direct block) into an indirect block.
    fn create_root_indirect(&mut self, min: u64) -> Result<()> {
        let t = self.table();
        let rows = self.hdr.new_root_rows(min);
        let rows = u16::try_from(rows)
            .ok()
            .filter(|&r| u32::from(r) <= t.max_root_rows())
            .ok_or_else(|| unsupported(format!("a root indirect block of {rows} rows")))?;
        let old = match self.hdr.root() {
            RootBlock::Direct { address, .. } => Some(address),
            _ => None,
        };
        let mut b = empty_iblock(&self.hdr, 0, rows);
        if let (Some(first), Some(old)) = (b.direct.first_mut(), old) {
            first.address = old;
        }
        let root = self.put_iblock(b, None)?;
        let addr = root.addr;
        if let Some(old) = old {
            self.s.undepend(self.hdr.address, old)?;
            self.link(Some(root), old)?;
        }
        self.hdr.root_block_address = addr;
        self.hdr.root_rows = rows;
        let has_direct = usize::from(old.is_some());
        self.hdr.allocation_iterator_offset = if old.is_some() { t.start_block_size } else { 0 };
        if min > t.start_block_size {
            // Every slot of the direct rows but the last and the old root's.
            let n = self
                .slots(u32::from(rows).saturating_sub(1))?
                .saturating_sub(has_direct);
            self.skip(root, has_direct, n)?;
        }
        let counted = if old.is_some() {
            self.hdr.row_free_space(0)
        } else {
            0
        };
        let added = self.sub(self.hdr.rows_free_space(u32::from(rows)), counted)?;
        self.hdr.managed_free_space = self.add(self.hdr.managed_free_space, added)?;
        self.hdr.managed_space = t
            .indirect_span(rows)
            .ok_or_else(|| corrupt(addr, format!("span of {rows} rows")))?;
        Ok(())
    }

    /// Doubles the rows of the root indirect block (at least to the row of `min`-byte
    /// blocks): libhdf5 frees it and allocates it again at its new size.
    fn double_root(&mut self, min: u64) -> Result<()> {
        let root = self
            .root_iblock()
            .ok_or_else(|| corrupt(self.hdr.address, "doubling without a root indirect block"))?;
        let t = self.table();
        let old = u32::from(root.rows);
        let (new, min_rows) = self.hdr.doubled_root_rows(old, min).ok_or_else(|| {
            unsupported(format!(
                "heap full: the root indirect block has all {old} rows of a {}-bit heap",
                t.max_heap_size_bits
            ))
        })?;
        let skip_direct = min_rows > 0;
        let new_rows = u16::try_from(new).map_err(|_| unsupported(format!("{new} rows")))?;
        let before: FractalIndirectBlock = (*iblock(self.s, &self.geom, root)?).clone();
        let mut after = empty_iblock(&self.hdr, 0, new_rows);
        for (d, s) in after.direct.iter_mut().zip(&before.direct) {
            *d = *s;
        }
        for (d, s) in after.indirect.iter_mut().zip(&before.indirect) {
            *d = *s;
        }
        let children: Vec<u64> = before
            .direct
            .iter()
            .map(|d| d.address)
            .chain(before.indirect.iter().copied())
            .filter(|&a| a != UNDEFINED_ADDRESS)
            .collect();
        self.s.remove(
            K::FractalHeapIndirectBlock,
            root.addr,
            self.hdr.indirect_block_len(root.rows) as u64,
        )?;
        let grown = self.put_iblock(after, None)?;
        let addr = grown.addr;
        for c in children {
            self.link(Some(grown), c)?;
        }
        self.hdr.root_block_address = addr;
        self.hdr.root_rows = new_rows;
        if skip_direct {
            let first = self.slots(old)?;
            let upto = self.slots(min_rows.saturating_sub(1))?;
            self.skip(grown, first, upto.saturating_sub(first))?;
        }
        let added = self.sub(self.hdr.rows_free_space(new), self.hdr.rows_free_space(old))?;
        self.hdr.managed_free_space = self.add(self.hdr.managed_free_space, added)?;
        self.hdr.managed_space = t
            .indirect_span(new_rows)
            .ok_or_else(|| corrupt(addr, format!("span of {new} rows")))?;
        Ok(())
    }

    fn create_child_for(&mut self, pos: Position, min: u64, min_row: u32) -> Result<()> {
        let t = self.table();
        let rows = t
            .child_rows(pos.row)
            .ok_or_else(|| corrupt(pos.ib.addr, format!("child rows of row {}", pos.row)))?;
        let largest = u32::from(rows)
            .checked_sub(1)
            .and_then(|r| t.row_block_size(r))
            .unwrap_or(0);
        if largest < min {
            return Err(unsupported(format!(
                "skipping {rows}-row indirect blocks for a {min}-byte direct block"
            )));
        }
        let block_offset = self.entry_offset(pos.ib, pos.entry)?;
        let child = self.create_child_iblock(pos.ib, pos.entry, rows, block_offset)?;
        if min > t.start_block_size {
            self.skip(child, 0, self.slots(min_row)?)?;
        }
        Ok(())
    }

    /// Moves the iterator to a slot that can hold a direct block of `min` bytes, making or
    /// growing indirect blocks and skipping slots too small.
    fn update_iterator(&mut self, min: u64) -> Result<()> {
        if self.root_iblock().is_none() {
            return self.create_root_indirect(min);
        }
        let min_row = self.table().size_to_row(min);
        let pos = self.position()?;
        let rows = u32::from(pos.ib.rows);
        if min_row > pos.row && pos.row < rows {
            let end = self.slots(min_row.min(rows))?;
            self.skip(pos.ib, pos.entry, end.saturating_sub(pos.entry))?;
        }
        loop {
            let mut walked = false;
            let mut pos = self.position()?;
            while pos.row >= u32::from(pos.ib.rows) {
                self.double_root(min)?;
                pos = self.position()?;
                walked = true;
            }
            if pos.row >= self.table().max_direct_rows() {
                self.create_child_for(pos, min, min_row)?;
                walked = true;
            }
            if !walked {
                return Ok(());
            }
        }
    }

    /// Makes a direct block for `len` bytes at the iterator; returns its free section.
    fn new_direct_block(&mut self, len: u64) -> Result<(u64, u64)> {
        let min = self.min_block_size(len)?;
        let start = self.table().start_block_size;
        if self.hdr.root() == RootBlock::Empty && min == start {
            self.hdr.managed_space = start;
            let free = self.sub(start, self.overhead())?;
            self.hdr.managed_free_space = self.add(self.hdr.managed_free_space, free)?;
            return self.create_dblock(None, 0, 0, start);
        }
        self.update_iterator(min)?;
        let pos = self.position()?;
        let size = self
            .table()
            .row_block_size(pos.row)
            .filter(|&s| s >= min)
            .ok_or_else(|| {
                corrupt(
                    self.hdr.address,
                    format!("row {} cannot hold a {min}-byte block", pos.row),
                )
            })?;
        let block_offset = self.entry_offset(pos.ib, pos.entry)?;
        self.hdr.allocation_iterator_offset =
            self.add(self.hdr.allocation_iterator_offset, size)?;
        self.create_dblock(Some(pos.ib), pos.entry, block_offset, size)
    }

    /// Makes the direct block of the free slot at `offset` (and the indirect blocks above it
    /// that no longer exist); returns its free section.
    fn create_slot_block(&mut self, offset: u64) -> Result<(u64, u64)> {
        let mut ib = self.root_iblock().ok_or_else(|| {
            corrupt(
                self.hdr.address,
                "a free slot without a root indirect block",
            )
        })?;
        let t = self.table();
        for _ in 0..MAX_DEPTH {
            let loc = t.locate(ib.block_offset, ib.rows, offset)?;
            let child = iblock(self.s, &self.geom, ib)?
                .child_address(loc.entry)
                .unwrap_or(UNDEFINED_ADDRESS);
            match loc.kind {
                ChildKind::Indirect { rows } => {
                    ib = if child == UNDEFINED_ADDRESS {
                        self.create_child_iblock(ib, loc.entry, rows, loc.block_offset)?
                    } else {
                        IblockAt {
                            addr: child,
                            rows,
                            block_offset: loc.block_offset,
                        }
                    };
                }
                ChildKind::Direct if child == UNDEFINED_ADDRESS && loc.block_offset == offset => {
                    return self.create_dblock(Some(ib), loc.entry, offset, loc.block_size);
                }
                ChildKind::Direct => {
                    return Err(corrupt(
                        self.hdr.address,
                        format!("free slot at heap offset {offset} holds a block"),
                    ));
                }
            }
        }
        Err(corrupt(self.hdr.address, "indirect blocks nested too deep"))
    }

    /// Places `obj` in managed space; returns its heap offset.
    pub(super) fn insert_managed(&mut self, obj: &[u8]) -> Result<u64> {
        let len = obj.len() as u64;
        // Checked before anything changes.
        let count = self.add(self.hdr.managed_object_count, 1)?;
        let (size, offset) = match self.space.best_fit(len) {
            Some(Section::Single { offset, size }) => (size, offset),
            Some(Section::Slot { offset, .. }) => self.create_slot_block(offset)?,
            None => self.new_direct_block(len)?,
        };
        if size > len {
            self.space
                .add_single(self.add(offset, len)?, self.sub(size, len)?);
        }
        self.write_managed(offset, obj)?;
        self.hdr.managed_object_count = count;
        self.hdr.managed_free_space = self.hdr.managed_free_space.saturating_sub(len);
        Ok(offset)
    }

    /// Writes `bytes` at heap offset `offset` of its direct block.
    pub(super) fn write_managed(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        let at = locate_direct(self.s, &self.geom, &self.hdr, offset)?
            .ok_or_else(|| corrupt(self.hdr.address, "object in an unallocated block"))?;
        let load = dblock_load(&self.geom, at.addr, at.size)?;
        let rel = usize::try_from(self.sub(offset, at.block_offset)?)
            .map_err(|_| corrupt(at.addr, "offset"))?;
        self.s.modify_in_place(
            K::FractalHeapDirectBlock,
            at.addr,
            load,
            |b: &mut FractalDirectBlock| {
                b.image
                    .get_mut(rel..)
                    .and_then(|rest| rest.get_mut(..bytes.len()))
                    .ok_or_else(|| corrupt(at.addr, "object past its direct block"))?
                    .copy_from_slice(bytes);
                Ok(())
            },
        )?;
        self.link(at.parent, at.addr)
    }

    /// Removes the managed object of `len` bytes at heap offset `offset`.
    pub(super) fn remove_managed(&mut self, offset: u64, len: u64) -> Result<()> {
        let at = locate_direct(self.s, &self.geom, &self.hdr, offset)?
            .ok_or_else(|| corrupt(self.hdr.address, "object in an unallocated block"))?;
        let data = self.add(at.block_offset, self.overhead())?;
        let end = self.add(at.block_offset, at.size)?;
        if offset < data || offset.checked_add(len).is_none_or(|e| e > end) {
            return Err(corrupt(
                at.addr,
                format!("object of {len} bytes at heap offset {offset} outside its block's data"),
            ));
        }
        self.hdr.managed_object_count = self.hdr.managed_object_count.saturating_sub(1);
        self.hdr.managed_free_space = self.add(self.hdr.managed_free_space, len)?;
        let (mut start, mut size) = (offset, len);
        if let Some((s0, z0)) = self.space.take_single_ending_at(start) {
            start = s0;
            size = self.add(size, z0)?;
        }
        if let Some(z1) = self.space.take_single_at(self.add(start, size)?) {
            size = self.add(size, z1)?;
        }
        if start == data && self.add(start, size)? == end {
            self.destroy_dblock(at)
        } else {
            self.space.add_single(start, size);
            Ok(())
        }
    }

    /// Frees the direct block `at`, whose data area is all free.
    fn destroy_dblock(&mut self, at: DirectAt) -> Result<()> {
        let Some(parent) = at.parent else {
            // The root direct block: the heap is empty.
            self.s.remove(K::FractalHeapDirectBlock, at.addr, at.size)?;
            self.empty();
            return Ok(());
        };
        let path = self.path_to(at.block_offset)?;
        self.s.remove(K::FractalHeapDirectBlock, at.addr, at.size)?;
        self.set_entry(parent, at.entry, UNDEFINED_ADDRESS)?;
        self.hdr.allocated_managed_space = self.hdr.allocated_managed_space.saturating_sub(at.size);
        if at.block_offset.checked_add(at.size) == Some(self.hdr.allocation_iterator_offset) {
            self.reverse_iterator(at.block_offset)?;
        } else {
            let overhead = self.overhead();
            self.space
                .add_slot(at.block_offset, self.sub(at.size, overhead)?);
        }
        // Indirect blocks left without children go, from the bottom up.
        for &(ib, entry_in_parent) in path.iter().rev() {
            if has_children(&*iblock(self.s, &self.geom, ib)?) {
                break;
            }
            match entry_in_parent {
                None => {
                    self.s.remove(
                        K::FractalHeapIndirectBlock,
                        ib.addr,
                        self.hdr.indirect_block_len(ib.rows) as u64,
                    )?;
                    self.empty();
                    return Ok(());
                }
                Some((up, entry)) => {
                    self.s.remove(
                        K::FractalHeapIndirectBlock,
                        ib.addr,
                        self.hdr.indirect_block_len(ib.rows) as u64,
                    )?;
                    self.set_entry(up, entry, UNDEFINED_ADDRESS)?;
                }
            }
        }
        self.revert_root()
    }

    /// The indirect blocks from the root down to the one holding the block at heap offset
    /// `offset`, each with its parent and slot there (`None` for the root).
    #[allow(clippy::type_complexity)]
    fn path_to(&mut self, offset: u64) -> Result<Vec<(IblockAt, Option<(IblockAt, usize)>)>> {
        let mut ib = self
            .root_iblock()
            .ok_or_else(|| corrupt(self.hdr.address, "no root indirect block"))?;
        let mut path = vec![(ib, None)];
        let t = self.table();
        for _ in 0..MAX_DEPTH {
            let loc = t.locate(ib.block_offset, ib.rows, offset)?;
            let ChildKind::Indirect { rows } = loc.kind else {
                return Ok(path);
            };
            let child = iblock(self.s, &self.geom, ib)?
                .child_address(loc.entry)
                .unwrap_or(UNDEFINED_ADDRESS);
            if child == UNDEFINED_ADDRESS {
                return Ok(path);
            }
            let next = IblockAt {
                addr: child,
                rows,
                block_offset: loc.block_offset,
            };
            path.push((next, Some((ib, loc.entry))));
            ib = next;
        }
        Err(corrupt(self.hdr.address, "indirect blocks nested too deep"))
    }

    /// The heap holds no managed block any more (libhdf5's `H5HF__hdr_empty`).
    fn empty(&mut self) {
        self.hdr.managed_space = 0;
        self.hdr.allocated_managed_space = 0;
        self.hdr.root_block_address = UNDEFINED_ADDRESS;
        self.hdr.root_rows = 0;
        self.hdr.allocation_iterator_offset = 0;
        self.hdr.managed_free_space = 0;
        self.space.clear();
    }

    /// Moves the iterator back to the end of the last direct block below heap offset `limit`
    /// (the start of the block just freed); slots past it are no longer free slots.
    fn reverse_iterator(&mut self, limit: u64) -> Result<()> {
        let end = match self.root_iblock() {
            Some(root) => self.last_block_end(root, limit, 0)?.unwrap_or(0),
            None => 0,
        };
        self.hdr.allocation_iterator_offset = end;
        self.space.drop_slots_from(end);
        Ok(())
    }

    /// The end of the last direct block of `ib` (and its children) below `limit`.
    fn last_block_end(&mut self, ib: IblockAt, limit: u64, level: usize) -> Result<Option<u64>> {
        if level > MAX_DEPTH {
            return Err(corrupt(ib.addr, "indirect blocks nested too deep"));
        }
        let b = iblock(self.s, &self.geom, ib)?;
        let t = self.table();
        for entry in (0..self.slots(u32::from(ib.rows))?).rev() {
            let offset = self.entry_offset(ib, entry)?;
            if offset >= limit {
                continue;
            }
            let child = b.child_address(entry).unwrap_or(UNDEFINED_ADDRESS);
            if child == UNDEFINED_ADDRESS {
                continue;
            }
            let row = self.row_of(entry)?;
            let size = t
                .row_block_size(row)
                .ok_or_else(|| corrupt(ib.addr, format!("row {row}")))?;
            match t.child_rows(row).filter(|_| row >= t.max_direct_rows()) {
                None => return Ok(Some(self.add(offset, size)?)),
                Some(rows) => {
                    let below = IblockAt {
                        addr: child,
                        rows,
                        block_offset: offset,
                    };
                    // Checked against MAX_DEPTH on entry: saturating keeps it past.
                    if let Some(e) = self.last_block_end(below, limit, level.saturating_add(1))? {
                        return Ok(Some(e));
                    }
                }
            }
        }
        Ok(None)
    }

    /// A root indirect block whose only child is its first direct block turns back into a root
    /// direct block (libhdf5's `H5HF__man_iblock_root_revert`).
    fn revert_root(&mut self) -> Result<()> {
        let Some(root) = self.root_iblock() else {
            return Ok(());
        };
        let b = iblock(self.s, &self.geom, root)?;
        let first = b.direct.first().map_or(UNDEFINED_ADDRESS, |d| d.address);
        let others = b
            .direct
            .iter()
            .skip(1)
            .map(|d| d.address)
            .chain(b.indirect.iter().copied())
            .any(|a| a != UNDEFINED_ADDRESS);
        drop(b);
        if first == UNDEFINED_ADDRESS || others {
            return Ok(());
        }
        let start = self.table().start_block_size;
        self.s.remove(
            K::FractalHeapIndirectBlock,
            root.addr,
            self.hdr.indirect_block_len(root.rows) as u64,
        )?;
        self.link(None, first)?;
        let capacity = self.hdr.rows_free_space(u32::from(root.rows));
        let first_free = self.sub(start, self.overhead())?;
        self.hdr.managed_free_space = self
            .add(self.hdr.managed_free_space, first_free)?
            .saturating_sub(capacity);
        self.hdr.root_block_address = first;
        self.hdr.root_rows = 0;
        self.hdr.allocation_iterator_offset = start;
        self.hdr.managed_space = start;
        self.space.drop_slots_from(start);
        Ok(())
    }
}

fn has_children(b: &FractalIndirectBlock) -> bool {
    b.direct.iter().any(|d| d.address != UNDEFINED_ADDRESS)
        || b.indirect.iter().any(|&a| a != UNDEFINED_ADDRESS)
}
