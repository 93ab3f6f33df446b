//! A heap's free space, as libhdf5's fractal-heap free-space manager tracks it: free ranges
//! inside direct blocks ("single" sections) and direct-block slots below the next-block
//! iterator that hold no block (libhdf5's row and indirect sections, one slot each here).
//! Allocation is best fit: the smallest section that holds the object, the lowest heap offset
//! among equals (libhdf5's free-space manager order).
//!
//! Invariants: a single section lies inside the data area of one existing direct block and
//! never touches another single (neighbours merge); a slot's block lies entirely below the
//! iterator and holds no block; the two kinds never share an offset (a slot starts at a block's
//! first byte, a single after the block's header).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::free_space::{FreeSpaceHeader, FreeSpaceSections, SectionFormat};
use h5_format::heap::fractal::{FractalHeapHeader, RootBlock};
use h5_metacache::MetadataKind as K;

use super::{HeapChange, IblockAt, MAX_DEPTH, corrupt, iblock, locate_direct};
use crate::access::{MetaAccess, Session};
use crate::error::Result;
use crate::meta::Load;

/// A free section handed out for an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Section {
    /// Free bytes inside an existing direct block.
    Single {
        /// Heap offset of the first free byte.
        offset: u64,
        /// Free bytes.
        size: u64,
    },
    /// A slot whose direct block does not exist (created when used).
    Slot {
        /// Heap offset of the block.
        offset: u64,
        /// The block's data bytes (block size minus its header).
        size: u64,
    },
}

/// The free space of one heap (see the module doc).
#[derive(Clone, Debug, Default)]
pub(crate) struct HeapSpace {
    /// Every section by (free bytes, heap offset).
    fit: BTreeSet<(u64, u64)>,
    /// Single sections: heap offset → free bytes.
    singles: BTreeMap<u64, u64>,
    /// Slots: block heap offset → data bytes.
    slots: BTreeMap<u64, u64>,
    /// Changed since the heap's manager was last written.
    pub(super) dirty: bool,
    /// Where the heap's persisted manager is (taken over from the file or written here), to
    /// write it again in place.
    manager: Option<Manager>,
}

/// A persisted free-space manager: header address, section list address and allocated length.
#[derive(Clone, Copy, Debug)]
struct Manager {
    header: u64,
    list: u64,
    list_alloc: u64,
}

impl HeapSpace {
    /// Takes the best section for `len` bytes out of the free space.
    pub(super) fn best_fit(&mut self, len: u64) -> Option<Section> {
        let &(size, offset) = self.fit.range((len, 0)..).next()?;
        self.fit.remove(&(size, offset));
        self.dirty = true;
        if self.singles.remove(&offset).is_some() {
            Some(Section::Single { offset, size })
        } else {
            self.slots.remove(&offset);
            Some(Section::Slot { offset, size })
        }
    }

    /// Adds a single section (the caller merged it with its neighbours).
    pub(super) fn add_single(&mut self, offset: u64, size: u64) {
        self.dirty = true;
        if size > 0 {
            self.singles.insert(offset, size);
            self.fit.insert((size, offset));
        }
    }

    /// The single section ending exactly at `offset`, taken out.
    pub(super) fn take_single_ending_at(&mut self, offset: u64) -> Option<(u64, u64)> {
        let (&start, &size) = self.singles.range(..offset).next_back()?;
        (start.checked_add(size) == Some(offset)).then(|| {
            self.dirty = true;
            self.singles.remove(&start);
            self.fit.remove(&(size, start));
            (start, size)
        })
    }

    /// The single section starting exactly at `offset`, taken out.
    pub(super) fn take_single_at(&mut self, offset: u64) -> Option<u64> {
        let size = self.singles.remove(&offset)?;
        self.fit.remove(&(size, offset));
        self.dirty = true;
        Some(size)
    }

    /// Adds the slot of the (absent) direct block at `offset` with `size` data bytes.
    pub(super) fn add_slot(&mut self, offset: u64, size: u64) {
        self.dirty = true;
        self.slots.insert(offset, size);
        self.fit.insert((size, offset));
    }

    /// Forgets every slot at or past heap offset `end` (the iterator moved back over them).
    pub(super) fn drop_slots_from(&mut self, end: u64) {
        let gone: Vec<(u64, u64)> = self.slots.range(end..).map(|(o, s)| (*o, *s)).collect();
        for (o, s) in gone {
            self.dirty = true;
            self.slots.remove(&o);
            self.fit.remove(&(s, o));
        }
    }

    /// Forgets everything (the heap is empty).
    pub(super) fn clear(&mut self) {
        *self = HeapSpace {
            dirty: true,
            manager: self.manager,
            ..HeapSpace::default()
        };
    }
}

/// The free space of the heap being changed, at its first change in this session: the single
/// sections of the heap's persisted manager (whose header is kept, to be written again in
/// place, and whose list is freed as libhdf5 frees it when it takes the sections over), and
/// every slot below the iterator that holds no block.
pub(super) fn take_over(c: &mut HeapChange<'_, '_>) -> Result<HeapSpace> {
    let mut sp = HeapSpace::default();
    let geom = Arc::clone(&c.geom);
    if c.hdr.free_space_manager_address != UNDEFINED_ADDRESS {
        let fs = manager_header(c.s, &geom)?;
        let sections = manager_sections(c.s, &geom)?;
        // As libhdf5 does when it takes a manager's sections into memory, the list's space
        // is freed now (a new list is written at the next flush); the header stays.
        if fs.sections_address != UNDEFINED_ADDRESS {
            c.s.remove(
                K::FreeSpaceSections,
                fs.sections_address,
                fs.sections_alloc_len,
            )?;
        }
        sp.manager = Some(Manager {
            header: fs.address,
            list: UNDEFINED_ADDRESS,
            list_alloc: 0,
        });
        // The header names a list no longer there: it is written again at the next flush.
        sp.dirty = true;
        for (offset, size, kind) in sections {
            // Only single sections (type 0) are taken; rows and indirect sections are slots,
            // found below from the blocks themselves.
            if kind != 0 || size == 0 {
                continue;
            }
            let Some(at) = locate_direct(c.s, &geom, &c.hdr, offset)? else {
                continue;
            };
            // A section outside its block's data is dropped, like one in no block.
            let data = at
                .block_offset
                .checked_add(geom.direct_block_header_len() as u64);
            let end = at.block_offset.checked_add(at.size);
            if let (Some(data), Some(end)) = (data, end)
                && offset >= data
                && offset.checked_add(size).is_some_and(|e| e <= end)
            {
                sp.add_single(offset, size);
            }
        }
    }
    if let RootBlock::Indirect { address, rows } = c.hdr.root() {
        let at = IblockAt {
            addr: address,
            rows,
            block_offset: 0,
        };
        scan_slots(c.s, &geom, at, c.hdr.allocation_iterator_offset, &mut sp, 0)?;
    }
    Ok(sp)
}

/// Adds the slots of the indirect block `at` below `iter` that hold no direct block, within
/// child indirect blocks too; an indirect block that does not exist (`at.addr` undefined) has
/// every slot free.
fn scan_slots(
    a: &mut dyn MetaAccess,
    geom: &Arc<FractalHeapHeader>,
    at: IblockAt,
    iter: u64,
    sp: &mut HeapSpace,
    level: usize,
) -> Result<()> {
    if level > MAX_DEPTH {
        return Err(corrupt(at.addr, "indirect blocks nested too deep"));
    }
    let block = if at.addr == UNDEFINED_ADDRESS {
        None
    } else {
        Some(iblock(a, geom, at)?)
    };
    let t = geom.table;
    let overhead = geom.direct_block_header_len() as u64;
    let width = usize::from(t.width);
    let slots = usize::from(at.rows)
        .checked_mul(width)
        .ok_or_else(|| corrupt(at.addr, format!("{} rows of slots", at.rows)))?;
    for entry in 0..slots {
        let Some(row) = entry.checked_div(width).and_then(|r| u32::try_from(r).ok()) else {
            break;
        };
        let (Some(offset), Some(size)) = (
            t.entry_offset(at.block_offset, entry),
            t.row_block_size(row),
        ) else {
            break;
        };
        if offset >= iter {
            break;
        }
        let child = block
            .as_ref()
            .and_then(|b| b.child_address(entry))
            .unwrap_or(UNDEFINED_ADDRESS);
        match t.child_rows(row).filter(|_| row >= t.max_direct_rows()) {
            None => {
                if child == UNDEFINED_ADDRESS && offset.checked_add(size).is_some_and(|e| e <= iter)
                {
                    let free = size.checked_sub(overhead).ok_or_else(|| {
                        corrupt(
                            at.addr,
                            format!("{size}-byte blocks of {overhead} header bytes"),
                        )
                    })?;
                    sp.add_slot(offset, free);
                }
            }
            Some(rows) => {
                let child_at = IblockAt {
                    addr: child,
                    rows,
                    block_offset: offset,
                };
                // Checked against MAX_DEPTH on entry: saturating keeps it past.
                scan_slots(a, geom, child_at, iter, sp, level.saturating_add(1))?;
            }
        }
    }
    Ok(())
}

fn manager_header(
    a: &mut dyn MetaAccess,
    geom: &FractalHeapHeader,
) -> Result<Arc<FreeSpaceHeader>> {
    let sizes = a.file().sizes;
    let at = geom.free_space_manager_address;
    let h: Arc<FreeSpaceHeader> = crate::access::get(a, K::FreeSpaceHeader, at, || {
        Load::exact(FreeSpaceHeader::encoded_len(sizes), move |b| {
            FreeSpaceHeader::decode(b, sizes, at)
        })
    })?;
    if h.client != h5_format::free_space::FreeSpaceClient::FractalHeap {
        return Err(corrupt(
            geom.address,
            "the heap's free-space manager belongs to another client",
        ));
    }
    Ok(h)
}

/// The sections `(heap offset, size, type)` of the heap's persisted manager.
fn manager_sections(
    a: &mut dyn MetaAccess,
    geom: &Arc<FractalHeapHeader>,
) -> Result<Vec<(u64, u64, u8)>> {
    let fs = manager_header(a, geom)?;
    if fs.sections_address == UNDEFINED_ADDRESS || fs.serial_sections == 0 {
        return Ok(Vec::new());
    }
    let sizes = a.file().sizes;
    let len = usize::try_from(fs.sections_len)
        .map_err(|_| corrupt(fs.address, "section list too large"))?;
    let at = fs.sections_address;
    let format = SectionFormat::FractalHeap {
        heap_offset_len: geom.heap_offset_size() as u8,
    };
    let list: Arc<FreeSpaceSections> = crate::access::get(a, K::FreeSpaceSections, at, || {
        let h = Arc::clone(&fs);
        Load::exact(len, move |b| {
            FreeSpaceSections::decode(b, &h, sizes, at, format)
        })
    })?;
    Ok(list.iter().collect())
}

/// libhdf5's fractal-heap free-space manager parameters (`H5HFspace.c`): four section
/// classes (single, first row, normal row, indirect), shrink 80 %, expand 120 %.
const SECTION_CLASSES: u16 = 4;
const SHRINK_PERCENT: u16 = 80;
const EXPAND_PERCENT: u16 = 120;

/// Writes the free-space manager of every heap whose free space changed since the last flush
/// (the manager written before, if any, is freed first): a header and a list of the single
/// sections, which libhdf5 takes over when it changes the heap (slots are found again from the
/// blocks: libhdf5 keeps them as row sections, which it also finds without them). A heap with
/// no single section keeps no manager.
pub(crate) fn persist_all(file: &crate::file::FileShared) -> Result<()> {
    let mut dirty: Vec<u64> = match file.state() {
        Ok(w) => w
            .heap_space
            .iter()
            .filter(|(_, sp)| sp.dirty)
            .map(|(a, _)| *a)
            .collect(),
        Err(_) => return Ok(()),
    };
    dirty.sort_unstable();
    for heap in dirty {
        let Some(mut sp) = file.state()?.heap_space.remove(&heap) else {
            continue;
        };
        let r = persist(file, heap, &mut sp);
        if r.is_ok() {
            sp.dirty = false;
        }
        file.state()?.heap_space.insert(heap, sp);
        r?;
    }
    Ok(())
}

fn persist(file: &crate::file::FileShared, heap: u64, sp: &mut HeapSpace) -> Result<()> {
    let mut s = Session::new(file)?;
    let sizes = file.sizes;
    let hh = s.protect(K::FractalHeapHeader, heap, || {
        super::header_load(sizes, heap)
    })?;
    let hdr: FractalHeapHeader = s.value::<FractalHeapHeader>(&hh)?.clone();
    let header_len = FreeSpaceHeader::encoded_len(sizes) as u64;
    let old = sp.manager.take();
    let mut addr = UNDEFINED_ADDRESS;
    if sp.singles.is_empty() {
        if let Some(m) = old {
            if m.list != UNDEFINED_ADDRESS {
                s.remove(K::FreeSpaceSections, m.list, m.list_alloc)?;
            }
            s.remove(K::FreeSpaceHeader, m.header, header_len)?;
        }
    } else {
        let format = SectionFormat::FractalHeap {
            heap_offset_len: hdr.heap_offset_size() as u8,
        };
        let header_addr = match old {
            Some(m) => m.header,
            None => s.allocate(header_len)?,
        };
        addr = header_addr;
        let list = FreeSpaceSections::from_sections(
            UNDEFINED_ADDRESS,
            header_addr,
            sp.singles.iter().map(|(&o, &n)| (o, n, 0u8)),
        );
        let mut fs = FreeSpaceHeader {
            client: h5_format::free_space::FreeSpaceClient::FractalHeap,
            section_classes: SECTION_CLASSES,
            shrink_percent: SHRINK_PERCENT,
            expand_percent: EXPAND_PERCENT,
            address_bits: hdr.table.max_heap_size_bits,
            max_section_size: hdr.table.max_direct_block_size,
            ..FreeSpaceHeader::file_manager(header_addr, 1)
        };
        fs.summarize(&list, sizes, format)?;
        // The list is written again where it was while it fits there.
        (fs.sections_address, fs.sections_alloc_len) = match old {
            Some(m) if m.list != UNDEFINED_ADDRESS && fs.sections_len <= m.list_alloc => {
                s.forget(K::FreeSpaceSections, m.list)?;
                (m.list, m.list_alloc)
            }
            _ => {
                if let Some(m) = old.filter(|m| m.list != UNDEFINED_ADDRESS) {
                    s.remove(K::FreeSpaceSections, m.list, m.list_alloc)?;
                }
                (s.allocate(fs.sections_len)?, fs.sections_len)
            }
        };
        s.forget(K::FreeSpaceHeader, header_addr)?;
        let list = FreeSpaceSections {
            address: fs.sections_address,
            ..list
        };
        let h = fs.clone();
        s.insert(
            K::FreeSpaceSections,
            fs.sections_address,
            crate::meta::Decoded::writable(fs.sections_len as usize, list, move |l| {
                l.encode(&h, sizes, format)
            }),
        )?;
        sp.manager = Some(Manager {
            header: header_addr,
            list: fs.sections_address,
            list_alloc: fs.sections_alloc_len,
        });
        s.insert(
            K::FreeSpaceHeader,
            header_addr,
            crate::meta::Decoded::writable(header_len as usize, fs, move |h: &FreeSpaceHeader| {
                Ok(h.encode(sizes))
            }),
        )?;
    }
    if hdr.free_space_manager_address != addr {
        s.value_mut::<FractalHeapHeader>(&hh)?
            .free_space_manager_address = addr;
    }
    s.release(hh)
}

/// Frees the heap's persisted free-space manager (header and section list), if it has one:
/// as this session knows it (`known`: a list taken over is already freed), else as the file
/// describes it.
pub(super) fn delete_manager(
    s: &mut Session<'_>,
    geom: &FractalHeapHeader,
    known: Option<&HeapSpace>,
) -> Result<()> {
    let header_len = FreeSpaceHeader::encoded_len(s.file().sizes) as u64;
    let m = match known {
        Some(sp) => match sp.manager {
            Some(m) => m,
            None => return Ok(()),
        },
        None => {
            if geom.free_space_manager_address == UNDEFINED_ADDRESS {
                return Ok(());
            }
            let fs = manager_header(s, geom)?;
            Manager {
                header: fs.address,
                list: fs.sections_address,
                list_alloc: fs.sections_alloc_len,
            }
        }
    };
    if m.list != UNDEFINED_ADDRESS {
        s.remove(K::FreeSpaceSections, m.list, m.list_alloc)?;
    }
    s.remove(K::FreeSpaceHeader, m.header, header_len)
}
