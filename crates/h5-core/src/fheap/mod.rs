//! Fractal heaps as metadata-cache clients, in both directions: the header, indirect and
//! direct blocks are cache entries read, changed and written one at a time. Objects are read,
//! inserted, removed and rewritten in place:
//!
//! * tiny objects live in their heap ID (libhdf5 stores every object that fits there);
//! * managed objects live in direct blocks laid out by the doubling table, placed as libhdf5
//!   places them (`managed.rs`): best fit among the heap's free sections, else a new direct
//!   block at the next-block iterator (the root direct block becomes an indirect block, a full
//!   root indirect block doubles its rows, rows past the direct rows hold child indirect
//!   blocks); a direct block left empty is freed (the heap shrinks back when it was the last
//!   one, and reverts to a root direct block when only the first block is left);
//! * huge objects (larger than the managed maximum) are blocks of their own, tracked by the
//!   heap's v2 B-tree (type 1, or 3 when the heap ID can hold the address; `huge.rs`).
//!
//! The heap's free space (`space.rs`) is kept as libhdf5 keeps it in its free-space manager:
//! free ranges inside direct blocks and direct-block slots below the iterator that hold no
//! block. The manager is persisted as libhdf5 persists it: its header (the heap header points
//! at it) stays where it is; its section list is freed when a session takes the sections over
//! (the heap's first change) and written again, holding the single sections, at each flush
//! that follows a change (libhdf5 reads them back; the slots, which libhdf5 keeps as row
//! sections, both libraries find again from the blocks). A heap without free sections keeps
//! no manager.
//!
//! Every block is a flush-dependency child of the block or header that points at it, as in
//! libhdf5, so the cache writes a block before its parent.

mod huge;
mod managed;
mod space;

use std::sync::Arc;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::heap::fractal::{
    ChildDirectBlock, ChildKind, DoublingTable, FractalDirectBlock, FractalHeapHeader,
    FractalHeapParams, FractalIndirectBlock, HeapId, RootBlock,
};
use h5_metacache::MetadataKind as K;

pub(crate) use space::{HeapSpace, persist_all};

use crate::access::{MetaAccess, Session};
use crate::error::{Error, Result};
use crate::meta::{Decoded, Load};

/// A huge object's bytes (a block of its own, outside the managed space).
#[derive(Clone, Debug)]
pub(crate) struct HugeObject(pub(crate) Vec<u8>);

/// Deeper than any real heap's indirect blocks: a damaged file with a cycle stops here.
const MAX_DEPTH: usize = 64;

fn corrupt(address: u64, reason: impl Into<String>) -> Error {
    Error::Format(h5_format::FormatError::Corrupted {
        structure: "fractal heap",
        address,
        reason: reason.into(),
    })
}

/// How to load the header at relative `addr` (writable).
fn header_load(sizes: h5_format::Sizes, addr: u64) -> Load {
    Load::sized(
        256,
        move |b| FractalHeapHeader::total_len(b, sizes, addr),
        move |b| FractalHeapHeader::decode(b, sizes, addr),
    )
    .writable_with(|h: &FractalHeapHeader| h.encode())
}

/// The header at relative `addr`.
pub(crate) fn header(a: &mut dyn MetaAccess, addr: u64) -> Result<Arc<FractalHeapHeader>> {
    let sizes = a.file().sizes;
    crate::access::get(a, K::FractalHeapHeader, addr, || header_load(sizes, addr))
}

/// How to load the direct block at relative `addr` of `size` bytes (writable; `geom` is the
/// heap's header, whose geometry never changes).
fn dblock_load(geom: &Arc<FractalHeapHeader>, addr: u64, size: u64) -> Result<Load> {
    Ok(dblock_loader(geom, addr, size, dblock_len(addr, size)?))
}

/// [`dblock_load`] for a block whose size is `len` bytes in memory.
fn dblock_loader(geom: &Arc<FractalHeapHeader>, addr: u64, size: u64, len: usize) -> Load {
    let (g, e) = (Arc::clone(geom), Arc::clone(geom));
    Load::exact(len, move |b| FractalDirectBlock::decode(b, &g, addr, size))
        .writable_with(move |b: &FractalDirectBlock| b.encode(&e))
}

/// A direct block's `size` as a length in memory.
fn dblock_len(addr: u64, size: u64) -> Result<usize> {
    usize::try_from(size).map_err(|_| corrupt(addr, "direct block too large"))
}

/// How to load the indirect block at relative `addr` of `rows` rows (writable).
fn iblock_load(geom: &Arc<FractalHeapHeader>, addr: u64, rows: u16) -> Load {
    let (g, e) = (Arc::clone(geom), Arc::clone(geom));
    Load::exact(geom.indirect_block_len(rows), move |b| {
        FractalIndirectBlock::decode(b, &g, addr, rows)
    })
    .writable_with(move |b: &FractalIndirectBlock| b.encode(&e))
}

fn dblock_entry(geom: &Arc<FractalHeapHeader>, block: FractalDirectBlock) -> Decoded {
    let g = Arc::clone(geom);
    Decoded::writable(block.image.len(), block, move |b: &FractalDirectBlock| {
        b.encode(&g)
    })
}

fn iblock_entry(geom: &Arc<FractalHeapHeader>, block: FractalIndirectBlock) -> Decoded {
    let g = Arc::clone(geom);
    let len = geom.indirect_block_len(block.rows);
    Decoded::writable(len, block, move |b: &FractalIndirectBlock| b.encode(&g))
}

fn header_entry(h: FractalHeapHeader) -> Decoded {
    Decoded::writable(h.encoded_len(), h, |h: &FractalHeapHeader| h.encode())
}

/// An empty indirect block of `rows` rows at heap offset `block_offset`.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "rows and width are u16: their product fits in usize (32 bits or wider)"
)]
fn empty_iblock(geom: &FractalHeapHeader, block_offset: u64, rows: u16) -> FractalIndirectBlock {
    let (direct, indirect) = geom.table.split_rows(rows);
    let width = usize::from(geom.table.width);
    let filtered = geom.is_filtered();
    FractalIndirectBlock {
        block_offset,
        rows,
        direct: vec![
            ChildDirectBlock {
                address: UNDEFINED_ADDRESS,
                filtered_size: filtered.then_some(0),
                filter_mask: filtered.then_some(0),
            };
            direct as usize * width
        ],
        indirect: vec![UNDEFINED_ADDRESS; indirect as usize * width],
    }
}

/// Where a direct block is: its address, size, heap offset, and the indirect block holding
/// it (`None`: it is the root).
#[derive(Clone, Copy, Debug)]
struct DirectAt {
    addr: u64,
    size: u64,
    block_offset: u64,
    parent: Option<IblockAt>,
    entry: usize,
}

/// An indirect block: address, rows and heap offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct IblockAt {
    addr: u64,
    rows: u16,
    block_offset: u64,
}

/// The direct block holding heap offset `offset` (`None`: the heap has no block there).
fn locate_direct(
    a: &mut dyn MetaAccess,
    geom: &Arc<FractalHeapHeader>,
    hdr: &FractalHeapHeader,
    offset: u64,
) -> Result<Option<DirectAt>> {
    let mut ib = match hdr.root() {
        RootBlock::Empty => return Ok(None),
        RootBlock::Direct { address, size, .. } => {
            return Ok((offset < size).then_some(DirectAt {
                addr: address,
                size,
                block_offset: 0,
                parent: None,
                entry: 0,
            }));
        }
        RootBlock::Indirect { address, rows } => IblockAt {
            addr: address,
            rows,
            block_offset: 0,
        },
    };
    for _ in 0..MAX_DEPTH {
        if hdr
            .table
            .indirect_span(ib.rows)
            .is_some_and(|s| offset >= ib.block_offset.saturating_add(s))
        {
            return Ok(None);
        }
        let block = iblock(a, geom, ib)?;
        let loc = hdr.table.locate(ib.block_offset, ib.rows, offset)?;
        let child = block.child_address(loc.entry).unwrap_or(UNDEFINED_ADDRESS);
        if child == UNDEFINED_ADDRESS {
            return Ok(None);
        }
        match loc.kind {
            ChildKind::Direct => {
                return Ok(Some(DirectAt {
                    addr: child,
                    size: loc.block_size,
                    block_offset: loc.block_offset,
                    parent: Some(ib),
                    entry: loc.entry,
                }));
            }
            ChildKind::Indirect { rows } => {
                ib = IblockAt {
                    addr: child,
                    rows,
                    block_offset: loc.block_offset,
                };
            }
        }
    }
    Err(corrupt(hdr.address, "indirect blocks nested too deep"))
}

fn iblock(
    a: &mut dyn MetaAccess,
    geom: &Arc<FractalHeapHeader>,
    at: IblockAt,
) -> Result<Arc<FractalIndirectBlock>> {
    let b: Arc<FractalIndirectBlock> =
        crate::access::get(a, K::FractalHeapIndirectBlock, at.addr, || {
            iblock_load(geom, at.addr, at.rows)
        })?;
    if b.rows != at.rows || b.block_offset != at.block_offset {
        return Err(corrupt(
            at.addr,
            format!(
                "indirect block of {} rows at heap offset {} where {} rows at {} are expected",
                b.rows, b.block_offset, at.rows, at.block_offset
            ),
        ));
    }
    Ok(b)
}

fn dblock(
    a: &mut dyn MetaAccess,
    geom: &Arc<FractalHeapHeader>,
    at: &DirectAt,
) -> Result<Arc<FractalDirectBlock>> {
    let len = dblock_len(at.addr, at.size)?;
    let b: Arc<FractalDirectBlock> =
        crate::access::get(a, K::FractalHeapDirectBlock, at.addr, || {
            dblock_loader(geom, at.addr, at.size, len)
        })?;
    if b.block_offset != at.block_offset {
        return Err(corrupt(
            at.addr,
            format!(
                "direct block at heap offset {} where {} is expected",
                b.block_offset, at.block_offset
            ),
        ));
    }
    Ok(b)
}

/// The object with heap ID `id` in the heap at relative `heap`.
pub(crate) fn read(a: &mut dyn MetaAccess, heap: u64, id: &[u8]) -> Result<Vec<u8>> {
    HeapReader::once(heap).read(a, id)
}

/// Reads objects of one heap, keeping its header and the direct blocks read (up to
/// [`HeapReader::KEPT_BLOCKS`]) between reads: a listing in name-hash order visits the heap's
/// few blocks at random, so most reads then cost no index descent and no cache lookup. The kept
/// values are the versions current at their read (a reader's snapshot); use a reader for one
/// pass, not across changes of the heap.
pub(crate) struct HeapReader {
    heap: u64,
    hdr: Option<Arc<FractalHeapHeader>>,
    /// Direct blocks read, by heap offset: their size and value.
    blocks: std::collections::BTreeMap<u64, (u64, Arc<FractalDirectBlock>)>,
    /// Blocks kept at most (0: a single read keeps none, so it allocates nothing for them).
    keep: usize,
}

impl HeapReader {
    /// Direct blocks a reader for a pass keeps at most (a heap of 64 KiB blocks: 16 MiB).
    const KEPT_BLOCKS: usize = 256;

    /// A reader of the heap at relative `heap` for a pass over many of its objects.
    pub(crate) fn new(heap: u64) -> Self {
        Self {
            heap,
            hdr: None,
            blocks: std::collections::BTreeMap::new(),
            keep: Self::KEPT_BLOCKS,
        }
    }

    /// A reader for one object (a lookup by name): it keeps no block.
    pub(crate) fn once(heap: u64) -> Self {
        Self {
            keep: 0,
            ..Self::new(heap)
        }
    }

    /// The object with heap ID `id`.
    pub(crate) fn read(&mut self, a: &mut dyn MetaAccess, id: &[u8]) -> Result<Vec<u8>> {
        let hdr = match &self.hdr {
            Some(h) => Arc::clone(h),
            None => {
                let h = header(a, self.heap)?;
                self.hdr = Some(Arc::clone(&h));
                h
            }
        };
        match HeapId::decode(id, &hdr)? {
            HeapId::Tiny(b) => Ok(b.to_vec()),
            HeapId::Managed { offset, len } => {
                if hdr.is_filtered() {
                    return Err(Error::Unsupported("fractal heaps with I/O filters".into()));
                }
                if let Some((start, (size, b))) = self.blocks.range(..=offset).next_back()
                    && offset.checked_sub(*start).is_some_and(|d| d < *size)
                {
                    return Ok(b.object(offset, len)?.to_vec());
                }
                let at = locate_direct(a, &hdr, &hdr, offset)?
                    .ok_or_else(|| corrupt(self.heap, "object in an unallocated block"))?;
                let b = dblock(a, &hdr, &at)?;
                let out = b.object(offset, len)?.to_vec();
                if self.blocks.len() < self.keep {
                    self.blocks.insert(at.block_offset, (at.size, b));
                }
                Ok(out)
            }
            HeapId::Huge(h) => huge::read(a, &hdr, h),
        }
    }
}

/// libhdf5's parameters of a new heap (its header only; blocks come with the first objects).
pub(crate) fn create(s: &mut Session<'_>, params: FractalHeapParams) -> Result<u64> {
    // The builder's checks and its empty header: one source of the new heap's header.
    let mut hdr = h5_format::heap::fractal::FractalHeapBuilder::new(params, s.file().sizes)?
        .header()
        .clone();
    hdr.address = s.allocate(hdr.encoded_len() as u64)?;
    let addr = hdr.address;
    s.insert(K::FractalHeapHeader, addr, header_entry(hdr))?;
    s.file()
        .state()?
        .heap_space
        .insert(addr, HeapSpace::default());
    Ok(addr)
}

/// A change of one heap: its header held (protected) for the change's duration, the working
/// copy of the header, and the heap's free space.
pub(crate) struct HeapChange<'s, 'a> {
    s: &'s mut Session<'a>,
    held: Option<crate::access::Held>,
    /// The header as changed so far.
    hdr: FractalHeapHeader,
    /// The header's geometry for the blocks' encoders.
    geom: Arc<FractalHeapHeader>,
    space: HeapSpace,
}

impl<'s, 'a> HeapChange<'s, 'a> {
    /// Starts a change of the heap at relative `addr`: its header is held, its free space
    /// taken over (from the file's manager at the heap's first change in this session).
    pub(crate) fn begin(s: &'s mut Session<'a>, addr: u64) -> Result<Self> {
        let sizes = s.file().sizes;
        let held = s.protect(K::FractalHeapHeader, addr, || header_load(sizes, addr))?;
        let hdr: FractalHeapHeader = s.value::<FractalHeapHeader>(&held)?.clone();
        let geom = Arc::new(hdr.clone());
        let known = s.file().state()?.heap_space.remove(&addr);
        let mut change = HeapChange {
            s,
            held: Some(held),
            hdr,
            geom,
            space: HeapSpace::default(),
        };
        change.space = match known {
            Some(sp) => sp,
            None => space::take_over(&mut change)?,
        };
        Ok(change)
    }

    /// Ends the change: the header is written back when it changed and released.
    pub(crate) fn finish(mut self) -> Result<()> {
        let held = self.held.take();
        let addr = self.hdr.address;
        let space = std::mem::take(&mut self.space);
        self.s.file().state()?.heap_space.insert(addr, space);
        if let Some(h) = held {
            let current: &FractalHeapHeader = self.s.value(&h)?;
            if *current != self.hdr {
                *self.s.value_mut::<FractalHeapHeader>(&h)? = self.hdr.clone();
            }
            self.s.release(h)?;
        }
        Ok(())
    }

    fn table(&self) -> DoublingTable {
        self.hdr.table
    }

    /// `a + b` for offsets, sizes and counters of this heap (the header's from the file
    /// included), or an error naming the heap when it overflows.
    fn add(&self, a: u64, b: u64) -> Result<u64> {
        a.checked_add(b)
            .ok_or_else(|| corrupt(self.hdr.address, format!("{a} + {b} overflows")))
    }

    /// `a - b` for offsets, sizes and counters of this heap, or an error when `b > a`.
    fn sub(&self, a: u64, b: u64) -> Result<u64> {
        a.checked_sub(b)
            .ok_or_else(|| corrupt(self.hdr.address, format!("{a} - {b} underflows")))
    }

    /// Stores `obj`; returns its heap ID.
    pub(crate) fn insert(&mut self, obj: &[u8]) -> Result<Vec<u8>> {
        if obj.is_empty() {
            return Err(Error::Invalid("an empty fractal heap object".into()));
        }
        let len = obj.len() as u64;
        if len > u64::from(self.hdr.max_managed_object_size) {
            return huge::insert(self, obj);
        }
        if obj.len() <= self.hdr.tiny_max_len() {
            let id = HeapId::Tiny(obj).encode(&self.hdr)?;
            self.hdr.tiny_object_count = self.add(self.hdr.tiny_object_count, 1)?;
            self.hdr.tiny_objects_size = self.add(self.hdr.tiny_objects_size, len)?;
            return Ok(id);
        }
        if self.hdr.is_filtered() {
            return Err(Error::Unsupported(
                "writing into a fractal heap with I/O filters".into(),
            ));
        }
        let offset = self.insert_managed(obj)?;
        Ok(HeapId::Managed { offset, len }.encode(&self.hdr)?)
    }

    /// Removes the object `id`.
    pub(crate) fn remove(&mut self, id: &[u8]) -> Result<()> {
        match HeapId::decode(id, &self.hdr)? {
            HeapId::Tiny(b) => {
                let n = b.len() as u64;
                self.hdr.tiny_object_count = self.hdr.tiny_object_count.saturating_sub(1);
                self.hdr.tiny_objects_size = self.hdr.tiny_objects_size.saturating_sub(n);
                Ok(())
            }
            HeapId::Managed { offset, len } => {
                if self.hdr.is_filtered() {
                    return Err(Error::Unsupported(
                        "writing into a fractal heap with I/O filters".into(),
                    ));
                }
                self.remove_managed(offset, len)
            }
            HeapId::Huge(h) => huge::remove(self, h),
        }
    }

    /// Replaces the bytes of object `id` by `obj` of the same length, in place (libhdf5's
    /// `H5HF_write`); a tiny object's new ID is returned (its bytes are its ID).
    pub(crate) fn write(&mut self, id: &[u8], obj: &[u8]) -> Result<Vec<u8>> {
        match HeapId::decode(id, &self.hdr)? {
            HeapId::Tiny(b) if b.len() == obj.len() => Ok(HeapId::Tiny(obj).encode(&self.hdr)?),
            HeapId::Managed { offset, len } if len == obj.len() as u64 => {
                self.write_managed(offset, obj)?;
                Ok(id.to_vec())
            }
            HeapId::Huge(h) => {
                huge::write(self, h, obj)?;
                Ok(id.to_vec())
            }
            _ => Err(Error::Invalid(
                "rewriting a fractal heap object with another length".into(),
            )),
        }
    }
}

/// Deletes the heap at relative `addr`: every block, huge object, its huge-object B-tree, its
/// free-space manager and the header leave the cache and their space is freed.
pub(crate) fn delete(s: &mut Session<'_>, addr: u64) -> Result<()> {
    let hdr = header(s, addr)?;
    let geom = Arc::clone(&hdr);
    match hdr.root() {
        RootBlock::Empty => {}
        RootBlock::Direct {
            address,
            size,
            disk_size,
        } => {
            let _ = size;
            s.remove(K::FractalHeapDirectBlock, address, disk_size)?;
        }
        RootBlock::Indirect { address, rows } => delete_iblock(
            s,
            &geom,
            IblockAt {
                addr: address,
                rows,
                block_offset: 0,
            },
            0,
        )?,
    }
    huge::delete_all(s, &hdr)?;
    let known = s.file().state()?.heap_space.remove(&addr);
    space::delete_manager(s, &hdr, known.as_ref())?;
    s.remove(K::FractalHeapHeader, addr, hdr.encoded_len() as u64)
}

fn delete_iblock(
    s: &mut Session<'_>,
    geom: &Arc<FractalHeapHeader>,
    at: IblockAt,
    level: usize,
) -> Result<()> {
    if level > MAX_DEPTH {
        return Err(corrupt(at.addr, "indirect blocks nested too deep"));
    }
    let b = iblock(s, geom, at)?;
    let width = usize::from(geom.table.width);
    for (entry, child) in b.direct.iter().enumerate() {
        if child.address != UNDEFINED_ADDRESS {
            let row = entry
                .checked_div(width)
                .and_then(|r| u32::try_from(r).ok())
                .ok_or_else(|| corrupt(at.addr, format!("the row of slot {entry}")))?;
            let size = geom
                .table
                .row_block_size(row)
                .ok_or_else(|| corrupt(at.addr, format!("row {row}")))?;
            s.remove(
                K::FractalHeapDirectBlock,
                child.address,
                child.filtered_size.unwrap_or(size),
            )?;
        }
    }
    let (direct_rows, _) = geom.table.split_rows(at.rows);
    for (i, &child) in b.indirect.iter().enumerate() {
        if child == UNDEFINED_ADDRESS {
            continue;
        }
        // The heap offset of the slot: its row's offset plus the blocks before it in the row.
        let row = i
            .checked_div(width)
            .and_then(|r| u32::try_from(r).ok())
            .and_then(|r| direct_rows.checked_add(r));
        let column = i.checked_rem(width).map(|c| c as u64);
        let offset = row
            .zip(column)
            .and_then(|(row, column)| {
                let start = geom.table.row_offset(row)?;
                let block = geom.table.row_block_size(row)?;
                at.block_offset
                    .checked_add(start)?
                    .checked_add(column.checked_mul(block)?)
            })
            .ok_or_else(|| corrupt(at.addr, format!("the heap offset of indirect slot {i}")))?;
        let loc = geom.table.locate(at.block_offset, at.rows, offset)?;
        let ChildKind::Indirect { rows } = loc.kind else {
            return Err(corrupt(at.addr, "indirect entry in a direct row"));
        };
        delete_iblock(
            s,
            geom,
            IblockAt {
                addr: child,
                rows,
                block_offset: loc.block_offset,
            },
            // Checked against MAX_DEPTH on entry: saturating keeps it past.
            level.saturating_add(1),
        )?;
    }
    drop(b);
    s.remove(
        K::FractalHeapIndirectBlock,
        at.addr,
        geom.indirect_block_len(at.rows) as u64,
    )
}

#[cfg(test)]
mod tests;
