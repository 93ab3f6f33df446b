//! Local heaps (`HEAP`, the name store of old-style groups) as metadata-cache clients, read and
//! changed in place: strings inserted into the heap's free list (the data segment grown in place
//! when the space after it is free, moved when it must be), removed with their space merged back,
//! the segment shrunk when its free tail passes half of it — libhdf5's `H5HL` rules.
//!
//! The prefix (header) is one cache entry; the data segment is cached as pages of [`PAGE`]
//! bytes (the last one shorter), each its own entry, so a change dirties, and a flush writes,
//! only the pages it touched. The free list lives in the data segment as libhdf5 writes it
//! (each free block starts with the offset of the next block and its own size); it is read
//! from the pages for each change, and only the blocks whose fields change are rewritten.
//!
//! Invariants: the header's data segment size and address describe the pages exactly; every
//! free block lies inside the segment, is at least [`FREE_LEN`] bytes and aligned to 8 bytes;
//! the header's free list head is the first block's offset.

use std::sync::Arc;

use h5_format::heap::local::{FreeBlock, LOCAL_HEAP_ALIGN, LocalHeapHeader};
use h5_format::writer::Writer;
use h5_format::{FormatError, Sizes, UNDEFINED_ADDRESS};
use h5_metacache::MetadataKind as K;

use crate::access::CacheAccess;
use crate::error::{Error, Result};
use crate::meta::{Decoded, Load};

/// Bytes of one cached page of a data segment.
pub(crate) const PAGE: u64 = 4096;

/// Bytes of a free block's two fields (next offset and size, one length each): libhdf5's
/// `H5HL_SIZEOF_FREE` for 8-byte lengths.
fn free_len(sizes: Sizes) -> u64 {
    2 * u64::from(sizes.length)
}

/// libhdf5's `H5HL_MIN_HEAP`: a segment is never shrunk below this.
const MIN_SHRINK: u64 = 128;

/// The "no next free block" marker libhdf5 writes.
const FREE_LIST_END: u64 = 1;

fn align(n: u64) -> u64 {
    n.next_multiple_of(LOCAL_HEAP_ALIGN as u64)
}

fn corrupt(address: u64, reason: impl Into<String>) -> Error {
    Error::Format(FormatError::Corrupted {
        structure: "local heap",
        address,
        reason: reason.into(),
    })
}

fn prefix_load(sizes: Sizes, addr: u64) -> Load {
    Load::codec(
        LocalHeapHeader::encoded_len(sizes),
        move |b| LocalHeapHeader::decode(b, sizes, addr),
        move |h: &LocalHeapHeader| Ok(h.encode(sizes)),
    )
}

fn page_load(len: usize) -> Load {
    Load::codec(len, |b| Ok(b.to_vec()), |p: &Vec<u8>| Ok(p.clone()))
}

fn page_entry(bytes: Vec<u8>) -> Decoded {
    Decoded::writable(bytes.len(), bytes, |p: &Vec<u8>| Ok(p.clone()))
}

/// The byte range `(page address, range within the page)` pieces of `offset..offset + len` of a
/// data segment of `hdr`.
fn pieces(hdr: &LocalHeapHeader, offset: u64, len: u64) -> Vec<(u64, usize, usize)> {
    let mut out = Vec::new();
    let mut at = offset;
    let end = offset + len;
    while at < end {
        let page = at / PAGE * PAGE;
        let stop = end.min(page + PAGE);
        // Within one page: fits in usize.
        out.push((
            hdr.data_segment_address + page,
            (at - page) as usize,
            (stop - page) as usize,
        ));
        at = stop;
    }
    out
}

/// Length of the page starting at segment offset `page` of a segment of `size` bytes.
fn page_len(size: u64, page: u64) -> Result<usize> {
    usize::try_from((size - page).min(PAGE)).map_err(|_| Error::Unsupported("page length".into()))
}

/// One old-style group's local heap, by the address of its prefix.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LocalHeap {
    /// Relative address of the prefix.
    pub(crate) addr: u64,
}

impl LocalHeap {
    /// The heap's header.
    pub(crate) fn header(self, c: &mut CacheAccess) -> Result<LocalHeapHeader> {
        let load = prefix_load(c.sizes, self.addr);
        Ok(*c.read::<LocalHeapHeader>(K::LocalHeapPrefix, self.addr, &load)?)
    }

    fn set_header(self, c: &mut CacheAccess, hdr: LocalHeapHeader) -> Result<()> {
        let load = prefix_load(c.sizes, self.addr);
        c.modify(
            K::LocalHeapPrefix,
            self.addr,
            &load,
            |h: &mut LocalHeapHeader| {
                *h = hdr;
                Ok(())
            },
        )
    }

    /// The null-terminated string at `offset` (without its terminator): a link name or a soft
    /// link's value.
    pub(crate) fn string(self, c: &mut CacheAccess, offset: u64) -> Result<Vec<u8>> {
        let hdr = self.header(c)?;
        string(c, &hdr, offset)
    }

    /// Creates a new heap whose data segment of `size_hint` bytes (rounded up to the alignment,
    /// at least one free block) follows the prefix, all of it free, as libhdf5's `H5HL_create`
    /// makes it. Returns the heap.
    pub(crate) fn create(c: &mut CacheAccess, size_hint: u64) -> Result<LocalHeap> {
        let sizes = c.sizes;
        let size = align(size_hint.max(free_len(sizes)));
        let prefix_len = LocalHeapHeader::encoded_len(sizes) as u64;
        let addr = c.allocate(prefix_len + size)?;
        let hdr = LocalHeapHeader {
            data_segment_size: size,
            free_list_head: Some(0),
            data_segment_address: addr + prefix_len,
        };
        let heap = LocalHeap { addr };
        c.put(
            K::LocalHeapPrefix,
            addr,
            Decoded::writable(prefix_len as usize, hdr, move |h: &LocalHeapHeader| {
                Ok(h.encode(sizes))
            }),
        )?;
        new_pages(c, &hdr, 0)?;
        write_free_list(c, &hdr, &[], &[FreeBlock { offset: 0, size }])?;
        Ok(heap)
    }

    /// Inserts `data` (stored as is; its space is rounded up to the alignment) and returns its
    /// offset: the first free block that fits (leaving nothing or room for a free block),
    /// else the segment grows by at least its own size.
    pub(crate) fn insert(self, c: &mut CacheAccess, data: &[u8]) -> Result<u64> {
        let sizes = c.sizes;
        let fl = free_len(sizes);
        let mut hdr = self.header(c)?;
        let old_free = free_list(c, &hdr)?;
        let mut free = old_free.clone();
        let need = align(data.len().max(1) as u64);
        let mut offset = None;
        // The free block closest to the end, among those passed over.
        let mut last: Option<usize> = None;
        for i in 0..free.len() {
            let b = free[i];
            if b.size > need && b.size - need >= fl {
                offset = Some(b.offset);
                free[i].offset += need;
                free[i].size -= need;
                break;
            } else if b.size == need {
                offset = Some(b.offset);
                free.remove(i);
                break;
            } else if last.is_none_or(|l| free[l].offset < b.offset) {
                last = Some(i);
            }
        }
        let offset = match offset {
            Some(o) => o,
            None => {
                let old_size = hdr.data_segment_size;
                let tail = last.filter(|&l| free[l].offset + free[l].size == old_size);
                let mut more = need.max(old_size);
                if tail.is_none() && more < need + fl {
                    more = need;
                }
                self.grow(c, &mut hdr, old_size + more)?;
                match tail {
                    Some(l) => {
                        let o = free[l].offset;
                        free[l].offset += need;
                        free[l].size += more - need;
                        if free[l].size < fl {
                            free.remove(l);
                        }
                        o
                    }
                    None => {
                        if more - need >= fl {
                            free.insert(
                                0,
                                FreeBlock {
                                    offset: old_size + need,
                                    size: more - need,
                                },
                            );
                        }
                        old_size
                    }
                }
            }
        };
        write(c, &hdr, offset, data)?;
        write_free_list(c, &hdr, &old_free, &free)?;
        hdr.free_list_head = free.first().map(|b| b.offset);
        self.set_header(c, hdr)?;
        Ok(offset)
    }

    /// Gives `len` bytes at `offset` back to the free list (merged with the blocks next to
    /// them; a piece too small to be a free block is lost, as in libhdf5), shrinking the
    /// segment when its free tail passes half of it.
    pub(crate) fn remove(self, c: &mut CacheAccess, offset: u64, len: u64) -> Result<()> {
        let sizes = c.sizes;
        let fl = free_len(sizes);
        let mut hdr = self.header(c)?;
        let size = align(len);
        if !offset.is_multiple_of(LOCAL_HEAP_ALIGN as u64)
            || offset
                .checked_add(size)
                .is_none_or(|e| e > hdr.data_segment_size)
        {
            return Err(corrupt(
                self.addr,
                format!("removing {len} bytes at {offset} outside the data segment"),
            ));
        }
        let old_free = free_list(c, &hdr)?;
        let mut free = old_free.clone();
        let mut merged = None;
        for i in 0..free.len() {
            if offset + size == free[i].offset {
                free[i].offset = offset;
                free[i].size += size;
                if let Some(j) =
                    (i + 1..free.len()).find(|&j| free[j].offset + free[j].size == free[i].offset)
                {
                    free[i].offset = free[j].offset;
                    free[i].size += free[j].size;
                    free.remove(j);
                }
                merged = Some(i);
                break;
            } else if free[i].offset + free[i].size == offset {
                free[i].size += size;
                if let Some(j) =
                    (i + 1..free.len()).find(|&j| free[i].offset + free[i].size == free[j].offset)
                {
                    free[i].size += free[j].size;
                    free.remove(j);
                }
                merged = Some(i);
                break;
            }
        }
        let touched = match merged {
            Some(i) => Some(i),
            None if size < fl => None,
            None => {
                free.insert(0, FreeBlock { offset, size });
                Some(0)
            }
        };
        if let Some(i) = touched {
            let b = free[i];
            if b.offset + b.size == hdr.data_segment_size && 2 * b.size > hdr.data_segment_size {
                self.minimize(c, &mut hdr, &mut free)?;
            }
        }
        write_free_list(c, &hdr, &old_free, &free)?;
        hdr.free_list_head = free.first().map(|b| b.offset);
        self.set_header(c, hdr)
    }

    /// Deletes the heap: its prefix and pages leave the cache and their space is freed.
    pub(crate) fn delete(self, c: &mut CacheAccess) -> Result<()> {
        let hdr = self.header(c)?;
        forget_pages(c, &hdr, 0)?;
        let prefix_len = LocalHeapHeader::encoded_len(c.sizes) as u64;
        c.delete(K::LocalHeapPrefix, self.addr, prefix_len)?;
        if hdr.data_segment_size > 0 {
            c.free(
                crate::write::alloc::SpaceKind::Meta,
                hdr.data_segment_address,
                hdr.data_segment_size,
            )?;
        }
        Ok(())
    }

    /// Grows the data segment to `new_size`: in place when the space after it is free, else
    /// moved to a new block (the old one freed first, as libhdf5's `H5HL__dblk_realloc` does).
    fn grow(self, c: &mut CacheAccess, hdr: &mut LocalHeapHeader, new_size: u64) -> Result<()> {
        let old_size = hdr.data_segment_size;
        if old_size > 0 && c.try_extend(hdr.data_segment_address, old_size, new_size - old_size)? {
            hdr.data_segment_size = new_size;
            return new_pages(c, hdr, old_size);
        }
        self.realloc(c, hdr, new_size)
    }

    /// Moves the data segment to a new block of `new_size` bytes, its content copied (cut or
    /// padded with zeros).
    fn realloc(self, c: &mut CacheAccess, hdr: &mut LocalHeapHeader, new_size: u64) -> Result<()> {
        let old_size = hdr.data_segment_size;
        let keep = old_size.min(new_size);
        let content = read(c, hdr, 0, keep)?;
        forget_pages(c, hdr, 0)?;
        if old_size > 0 {
            c.free(
                crate::write::alloc::SpaceKind::Meta,
                hdr.data_segment_address,
                old_size,
            )?;
        }
        hdr.data_segment_address = c.allocate(new_size)?;
        hdr.data_segment_size = new_size;
        new_pages(c, hdr, 0)?;
        write(c, hdr, 0, &content)
    }

    /// libhdf5's `H5HL__minimize_heap_space`: halves the segment while its free tail allows,
    /// keeping a free block at the end unless it is not the only one. The tail is freed in
    /// place.
    fn minimize(
        self,
        c: &mut CacheAccess,
        hdr: &mut LocalHeapHeader,
        free: &mut Vec<FreeBlock>,
    ) -> Result<()> {
        let fl = free_len(c.sizes);
        let size = hdr.data_segment_size;
        let Some(l) = free.iter().position(|b| b.offset + b.size == size) else {
            return Ok(());
        };
        if free[l].size < size / 2 || size <= MIN_SHRINK {
            return Ok(());
        }
        let mut new_size = size;
        while new_size > MIN_SHRINK && new_size >= free[l].offset + fl {
            new_size /= 2;
        }
        if new_size < free[l].offset + fl {
            if free.len() == 1 {
                new_size *= 2;
                free[l].size = align(new_size - free[l].offset);
                new_size = free[l].offset + free[l].size;
            } else {
                new_size = free[l].offset;
                free.remove(l);
            }
        } else {
            free[l].size = align(new_size - free[l].offset);
            new_size = free[l].offset + free[l].size;
        }
        if new_size >= size {
            return Ok(());
        }
        forget_pages(c, hdr, new_size.div_ceil(PAGE) * PAGE)?;
        let last = new_size / PAGE * PAGE;
        if last < new_size {
            let now = page_len(size, last)?;
            let cut = page_len(new_size, last)?;
            c.modify_sized(
                K::LocalHeapDataBlock,
                hdr.data_segment_address + last,
                &page_load(now),
                |p: &mut Vec<u8>, len| {
                    p.truncate(cut);
                    *len = cut;
                    Ok(())
                },
            )?;
        }
        c.free(
            crate::write::alloc::SpaceKind::Meta,
            hdr.data_segment_address + new_size,
            size - new_size,
        )?;
        hdr.data_segment_size = new_size;
        Ok(())
    }
}

/// Bytes `offset..offset + len` of the data segment.
fn read(c: &mut CacheAccess, hdr: &LocalHeapHeader, offset: u64, len: u64) -> Result<Vec<u8>> {
    let size = hdr.data_segment_size;
    if offset.checked_add(len).is_none_or(|e| e > size) {
        return Err(corrupt(
            hdr.data_segment_address,
            format!("{len} bytes at {offset} outside the {size}-byte data segment"),
        ));
    }
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    for (page, from, to) in pieces(hdr, offset, len) {
        let plen = page_len(size, page - hdr.data_segment_address)?;
        let bytes: Arc<Vec<u8>> = c.read(K::LocalHeapDataBlock, page, &page_load(plen))?;
        out.extend_from_slice(
            bytes
                .get(from..to)
                .ok_or_else(|| corrupt(page, "cached page shorter than the data segment says"))?,
        );
    }
    Ok(out)
}

/// The null-terminated string at `offset` of the heap whose header is `hdr`, without the
/// terminator.
pub(crate) fn string(c: &mut CacheAccess, hdr: &LocalHeapHeader, offset: u64) -> Result<Vec<u8>> {
    let size = hdr.data_segment_size;
    if offset >= size {
        return Err(corrupt(
            hdr.data_segment_address,
            format!("name offset {offset} outside the {size}-byte data segment"),
        ));
    }
    let mut out = Vec::new();
    let mut at = offset;
    while at < size {
        let page = at / PAGE * PAGE;
        let plen = page_len(size, page)?;
        let bytes: Arc<Vec<u8>> = c.read(
            K::LocalHeapDataBlock,
            hdr.data_segment_address + page,
            &page_load(plen),
        )?;
        let from = (at - page) as usize;
        let rest = bytes
            .get(from..)
            .ok_or_else(|| corrupt(page, "cached page shorter than the data segment says"))?;
        match rest.iter().position(|&b| b == 0) {
            Some(n) => {
                out.extend_from_slice(&rest[..n]);
                return Ok(out);
            }
            None => {
                out.extend_from_slice(rest);
                at = page + PAGE;
            }
        }
    }
    Err(corrupt(
        hdr.data_segment_address,
        format!("the string at {offset} has no terminator"),
    ))
}

/// Writes `data` at `offset` of the data segment (every page it touches dirtied).
fn write(c: &mut CacheAccess, hdr: &LocalHeapHeader, offset: u64, data: &[u8]) -> Result<()> {
    let size = hdr.data_segment_size;
    let mut done = 0usize;
    for (page, from, to) in pieces(hdr, offset, data.len() as u64) {
        let plen = page_len(size, page - hdr.data_segment_address)?;
        let part = &data[done..done + (to - from)];
        c.modify(
            K::LocalHeapDataBlock,
            page,
            &page_load(plen),
            |p: &mut Vec<u8>| {
                p.get_mut(from..to)
                    .ok_or_else(|| corrupt(page, "cached page shorter than the data segment says"))?
                    .copy_from_slice(part);
                Ok(())
            },
        )?;
        done += to - from;
    }
    Ok(())
}

/// Puts zero-filled pages into the cache for the segment from offset `from` (a page boundary
/// or the old end of a segment that grew in place) to its end; a partial last page of the old
/// segment is lengthened with zeros.
fn new_pages(c: &mut CacheAccess, hdr: &LocalHeapHeader, from: u64) -> Result<()> {
    let size = hdr.data_segment_size;
    let mut at = from;
    if !at.is_multiple_of(PAGE) {
        let page = at / PAGE * PAGE;
        let old = page_len(at, page)?;
        let new = page_len(size, page)?;
        c.modify_sized(
            K::LocalHeapDataBlock,
            hdr.data_segment_address + page,
            &page_load(old),
            |p: &mut Vec<u8>, len| {
                p.resize(new, 0);
                *len = new;
                Ok(())
            },
        )?;
        at = page + PAGE;
    }
    while at < size {
        let len = page_len(size, at)?;
        c.put(
            K::LocalHeapDataBlock,
            hdr.data_segment_address + at,
            page_entry(vec![0; len]),
        )?;
        at += PAGE;
    }
    Ok(())
}

/// Drops the cached pages of the segment from offset `from` (a page boundary) on, unwritten.
fn forget_pages(c: &mut CacheAccess, hdr: &LocalHeapHeader, from: u64) -> Result<()> {
    if hdr.data_segment_address == UNDEFINED_ADDRESS {
        return Ok(());
    }
    let mut at = from;
    while at < hdr.data_segment_size {
        c.forget(K::LocalHeapDataBlock, hdr.data_segment_address + at)?;
        at += PAGE;
    }
    Ok(())
}

/// The free list, in list order, read from the pages. Errors on blocks that do not fit the
/// segment, are too small or misaligned, and on lists longer than the segment could hold (a
/// cycle).
fn free_list(c: &mut CacheAccess, hdr: &LocalHeapHeader) -> Result<Vec<FreeBlock>> {
    let sizes = c.sizes;
    let fl = free_len(sizes);
    let size = hdr.data_segment_size;
    let max = size / fl;
    let mut out = Vec::new();
    let mut next = hdr.free_list_head;
    while let Some(offset) = next {
        if out.len() as u64 >= max {
            return Err(corrupt(
                hdr.data_segment_address,
                "free list has a cycle or too many blocks",
            ));
        }
        if !offset.is_multiple_of(LOCAL_HEAP_ALIGN as u64)
            || offset.checked_add(fl).is_none_or(|e| e > size)
        {
            return Err(corrupt(
                hdr.data_segment_address,
                format!("free block at {offset} outside the data segment"),
            ));
        }
        let fields = read(c, hdr, offset, fl)?;
        let mut r = h5_format::reader::Reader::new(&fields, "local heap free block", offset);
        let raw_next = r.length(sizes)?;
        let block = r.length(sizes)?;
        if block < fl || offset.checked_add(block).is_none_or(|e| e > size) {
            return Err(corrupt(
                hdr.data_segment_address,
                format!("free block at {offset} of {block} bytes does not fit the data segment"),
            ));
        }
        out.push(FreeBlock {
            offset,
            size: block,
        });
        next =
            (raw_next != FREE_LIST_END && raw_next != all_ones(sizes.length)).then_some(raw_next);
    }
    Ok(out)
}

fn all_ones(n: u8) -> u64 {
    if n >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * u32::from(n))) - 1
    }
}

/// Rewrites the fields of the free blocks of `new` that differ from `old` (offset, size or
/// next block).
fn write_free_list(
    c: &mut CacheAccess,
    hdr: &LocalHeapHeader,
    old: &[FreeBlock],
    new: &[FreeBlock],
) -> Result<()> {
    let sizes = c.sizes;
    let linked = |list: &[FreeBlock]| -> Vec<(u64, u64, u64)> {
        list.iter()
            .enumerate()
            .map(|(i, b)| {
                let next = list.get(i + 1).map_or(FREE_LIST_END, |n| n.offset);
                (b.offset, b.size, next)
            })
            .collect()
    };
    let before = linked(old);
    for (offset, size, next) in linked(new) {
        if before.contains(&(offset, size, next)) {
            continue;
        }
        let mut w = Writer::new();
        w.length(sizes, next);
        w.length(sizes, size);
        write(c, hdr, offset, w.as_slice())?;
    }
    Ok(())
}
