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
#[allow(clippy::arithmetic_side_effects, reason = "a 1-byte size")]
fn free_len(sizes: Sizes) -> u64 {
    2 * u64::from(sizes.length)
}

/// libhdf5's `H5HL_MIN_HEAP`: a segment is never shrunk below this.
const MIN_SHRINK: u64 = 128;

/// The "no next free block" marker libhdf5 writes.
const FREE_LIST_END: u64 = 1;

/// `n` rounded up to the heap's alignment, or an error naming the heap at `heap` when that
/// overflows (a size read from a damaged heap).
fn align(heap: u64, n: u64) -> Result<u64> {
    n.checked_next_multiple_of(LOCAL_HEAP_ALIGN as u64)
        .ok_or_else(|| corrupt(heap, format!("size {n} overflows when aligned")))
}

/// `a + b` for offsets and sizes of the heap at `heap`, or an error when it overflows.
fn sum(heap: u64, a: u64, b: u64) -> Result<u64> {
    a.checked_add(b)
        .ok_or_else(|| corrupt(heap, format!("offset {a} + {b} overflows")))
}

/// `a - b` for offsets and sizes of the heap at `heap`, or an error when `b > a`.
fn diff(heap: u64, a: u64, b: u64) -> Result<u64> {
    a.checked_sub(b)
        .ok_or_else(|| corrupt(heap, format!("offset {a} - {b} underflows")))
}

/// The segment offset just past free block `b`.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "free_list() checks offset + size <= the segment size of every block it reads, and \
              the blocks made here stay inside the segment"
)]
fn end(b: &FreeBlock) -> u64 {
    b.offset + b.size
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

/// The pieces (one per page) of bytes `offset..offset + len` of the data segment of `hdr`.
fn pieces(hdr: &LocalHeapHeader, offset: u64, len: u64) -> Result<Vec<Piece>> {
    let mut out = Vec::new();
    let mut at = offset;
    let end = sum(hdr.data_segment_address, offset, len)?;
    while at < end {
        let page = page_start(at);
        let stop = end.min(page.saturating_add(PAGE));
        out.push(Piece {
            offset: page,
            address: page_address(hdr, page)?,
            range: in_page(at, page)..in_page(stop, page),
        });
        at = stop;
    }
    Ok(out)
}

/// The part of a byte range of a data segment that lies in one page.
struct Piece {
    /// The page's segment offset.
    offset: u64,
    /// The page's file address.
    address: u64,
    /// The part's bytes within the page.
    range: std::ops::Range<usize>,
}

/// The segment offset of the page after the one holding `at`, if there is one.
fn next_page(at: u64) -> Option<u64> {
    page_start(at).checked_add(PAGE)
}

/// The start of the page holding segment offset `at`.
#[allow(clippy::arithmetic_side_effects, reason = "at / PAGE * PAGE <= at")]
fn page_start(at: u64) -> u64 {
    at / PAGE * PAGE
}

/// The position of segment offset `at` (at most one page past `page`) within page `page`.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "page <= at <= page + PAGE: the difference is at most PAGE"
)]
fn in_page(at: u64, page: u64) -> usize {
    (at - page) as usize
}

/// The file address of the page at segment offset `page`.
fn page_address(hdr: &LocalHeapHeader, page: u64) -> Result<u64> {
    sum(hdr.data_segment_address, hdr.data_segment_address, page)
}

/// Length of the page starting at segment offset `page` of a segment of `size` bytes.
fn page_len(size: u64, page: u64) -> Result<usize> {
    let rest = size
        .checked_sub(page)
        .ok_or_else(|| Error::Invalid(format!("page {page} past the {size}-byte segment")))?;
    usize::try_from(rest.min(PAGE)).map_err(|_| Error::Unsupported("page length".into()))
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
        let size = align(UNDEFINED_ADDRESS, size_hint.max(free_len(sizes)))?;
        let prefix_len = LocalHeapHeader::encoded_len(sizes) as u64;
        let addr = c.allocate(sum(UNDEFINED_ADDRESS, prefix_len, size)?)?;
        let hdr = LocalHeapHeader {
            data_segment_size: size,
            free_list_head: Some(0),
            data_segment_address: sum(addr, addr, prefix_len)?,
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
        let need = align(self.addr, data.len().max(1) as u64)?;
        let mut offset = None;
        // The free block closest to the end, among those passed over.
        let mut last: Option<(usize, FreeBlock)> = None;
        // The free block used whole.
        let mut exact = None;
        for (i, b) in free.iter_mut().enumerate() {
            if let Some(rest) = b.size.checked_sub(need).filter(|&r| r > 0 && r >= fl) {
                offset = Some(b.offset);
                b.offset = sum(self.addr, b.offset, need)?;
                b.size = rest;
                break;
            } else if b.size == need {
                offset = Some(b.offset);
                exact = Some(i);
                break;
            } else if last.is_none_or(|(_, l)| l.offset < b.offset) {
                last = Some((i, *b));
            }
        }
        if let Some(i) = exact {
            free.remove(i);
        }
        let offset = match offset {
            Some(o) => o,
            None => {
                let old_size = hdr.data_segment_size;
                let tail = last.filter(|(_, l)| end(l) == old_size);
                // The segment grows by `need + extra`: by its own size when that is more than
                // `need`, and never leaving a piece too small for a free block out of the list.
                let mut extra = old_size.saturating_sub(need);
                if tail.is_none() && extra < fl {
                    extra = 0;
                }
                let more = sum(self.addr, need, extra)?;
                self.grow(c, &mut hdr, sum(self.addr, old_size, more)?)?;
                match tail {
                    Some((l, b)) => {
                        let grown = FreeBlock {
                            offset: sum(self.addr, b.offset, need)?,
                            size: sum(self.addr, b.size, extra)?,
                        };
                        if grown.size < fl {
                            free.remove(l);
                        } else if let Some(slot) = free.get_mut(l) {
                            *slot = grown;
                        }
                        b.offset
                    }
                    None => {
                        if extra >= fl {
                            free.insert(
                                0,
                                FreeBlock {
                                    offset: sum(self.addr, old_size, need)?,
                                    size: extra,
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
        let size = align(self.addr, len)?;
        let Some(stop) = offset.checked_add(size).filter(|&e| {
            e <= hdr.data_segment_size && offset.is_multiple_of(LOCAL_HEAP_ALIGN as u64)
        }) else {
            return Err(corrupt(
                self.addr,
                format!("removing {len} bytes at {offset} outside the data segment"),
            ));
        };
        let old_free = free_list(c, &hdr)?;
        let mut free = old_free.clone();
        // The first block next to the removed range (none before it touches the merged block
        // again: it would have been the first); merged with the range, then with the block on
        // its other side.
        let touched = match free
            .iter()
            .position(|b| b.offset == stop || end(b) == offset)
        {
            Some(i) => {
                let b = free.remove(i);
                let after = b.offset == stop;
                let mut merged = FreeBlock {
                    offset: b.offset.min(offset),
                    size: sum(self.addr, b.size, size)?,
                };
                // The range was just before `b`: a block ending at the merged start; just after
                // it: a block starting at the merged end.
                let other = free.iter().position(|n| {
                    if after {
                        end(n) == merged.offset
                    } else {
                        n.offset == end(&merged)
                    }
                });
                if let Some(j) = other {
                    let n = free.remove(j);
                    merged.offset = merged.offset.min(n.offset);
                    merged.size = sum(self.addr, merged.size, n.size)?;
                }
                free.insert(i.min(free.len()), merged);
                Some(merged)
            }
            None if size < fl => None,
            None => {
                let b = FreeBlock { offset, size };
                free.insert(0, b);
                Some(b)
            }
        };
        if let Some(b) = touched
            && end(&b) == hdr.data_segment_size
            && b.size > hdr.data_segment_size / 2
        {
            self.minimize(c, &mut hdr, &mut free)?;
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
        let extra = diff(self.addr, new_size, old_size)?;
        if old_size > 0 && c.try_extend(hdr.data_segment_address, old_size, extra)? {
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
        let heap = self.addr;
        let Some(l) = free.iter().position(|b| end(b) == size) else {
            return Ok(());
        };
        let only = free.len() == 1;
        let Some(tail) = free.get_mut(l) else {
            return Ok(());
        };
        if tail.size < size / 2 || size <= MIN_SHRINK {
            return Ok(());
        }
        // The smallest segment that still holds the tail block's fields.
        let keep = sum(heap, tail.offset, fl)?;
        let mut new_size = size;
        while new_size > MIN_SHRINK && new_size >= keep {
            new_size /= 2;
        }
        if new_size < keep && !only {
            new_size = tail.offset;
            free.remove(l);
        } else {
            if new_size < keep {
                // Halved once too often (the loop ran at least once: `size >= keep`).
                new_size = new_size
                    .checked_mul(2)
                    .ok_or_else(|| corrupt(heap, "segment size overflows"))?;
            }
            let rest = new_size
                .checked_sub(tail.offset)
                .ok_or_else(|| corrupt(heap, "free block past the shrunk segment"))?;
            tail.size = align(heap, rest)?;
            new_size = end(tail);
        }
        if new_size >= size {
            return Ok(());
        }
        let first_gone = new_size
            .checked_next_multiple_of(PAGE)
            .ok_or_else(|| corrupt(heap, "segment size overflows"))?;
        forget_pages(c, hdr, first_gone)?;
        let last = page_start(new_size);
        if last < new_size {
            let now = page_len(size, last)?;
            let cut = page_len(new_size, last)?;
            c.modify_sized(
                K::LocalHeapDataBlock,
                page_address(hdr, last)?,
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
            page_address(hdr, new_size)?,
            diff(heap, size, new_size)?,
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
    // Grown page by page: `len` comes from the file and is only known to fit once read.
    let mut out = Vec::with_capacity(usize::try_from(len.min(PAGE)).unwrap_or(0));
    for piece in pieces(hdr, offset, len)? {
        let plen = page_len(size, piece.offset)?;
        let bytes: Arc<Vec<u8>> = c.read(K::LocalHeapDataBlock, piece.address, &page_load(plen))?;
        out.extend_from_slice(bytes.get(piece.range).ok_or_else(|| {
            corrupt(
                piece.address,
                "cached page shorter than the data segment says",
            )
        })?);
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
    let mut at = Some(offset);
    while let Some(a) = at.filter(|&a| a < size) {
        let page = page_start(a);
        let plen = page_len(size, page)?;
        let address = page_address(hdr, page)?;
        let bytes: Arc<Vec<u8>> = c.read(K::LocalHeapDataBlock, address, &page_load(plen))?;
        let rest = bytes
            .get(in_page(a, page)..)
            .ok_or_else(|| corrupt(address, "cached page shorter than the data segment says"))?;
        let name = rest.split(|&b| b == 0).next().unwrap_or(rest);
        out.extend_from_slice(name);
        if name.len() < rest.len() {
            return Ok(out);
        }
        at = next_page(a);
    }
    Err(corrupt(
        hdr.data_segment_address,
        format!("the string at {offset} has no terminator"),
    ))
}

/// Writes `data` at `offset` of the data segment (every page it touches dirtied).
fn write(c: &mut CacheAccess, hdr: &LocalHeapHeader, offset: u64, data: &[u8]) -> Result<()> {
    let size = hdr.data_segment_size;
    let mut rest = data;
    for piece in pieces(hdr, offset, data.len() as u64)? {
        let plen = page_len(size, piece.offset)?;
        let short = || {
            corrupt(
                piece.address,
                "cached page shorter than the data segment says",
            )
        };
        let (part, after) = rest.split_at_checked(piece.range.len()).ok_or_else(short)?;
        c.modify(
            K::LocalHeapDataBlock,
            piece.address,
            &page_load(plen),
            |p: &mut Vec<u8>| {
                p.get_mut(piece.range.clone())
                    .ok_or_else(short)?
                    .copy_from_slice(part);
                Ok(())
            },
        )?;
        rest = after;
    }
    Ok(())
}

/// Puts zero-filled pages into the cache for the segment from offset `from` (a page boundary
/// or the old end of a segment that grew in place) to its end; a partial last page of the old
/// segment is lengthened with zeros.
fn new_pages(c: &mut CacheAccess, hdr: &LocalHeapHeader, from: u64) -> Result<()> {
    let size = hdr.data_segment_size;
    let mut at = Some(from);
    if !from.is_multiple_of(PAGE) {
        let page = page_start(from);
        let old = page_len(from, page)?;
        let new = page_len(size, page)?;
        c.modify_sized(
            K::LocalHeapDataBlock,
            page_address(hdr, page)?,
            &page_load(old),
            |p: &mut Vec<u8>, len| {
                p.resize(new, 0);
                *len = new;
                Ok(())
            },
        )?;
        at = next_page(from);
    }
    while let Some(a) = at.filter(|&a| a < size) {
        let len = page_len(size, a)?;
        c.put(
            K::LocalHeapDataBlock,
            page_address(hdr, a)?,
            page_entry(vec![0; len]),
        )?;
        at = next_page(a);
    }
    Ok(())
}

/// Drops the cached pages of the segment from offset `from` (a page boundary) on, unwritten.
fn forget_pages(c: &mut CacheAccess, hdr: &LocalHeapHeader, from: u64) -> Result<()> {
    if hdr.data_segment_address == UNDEFINED_ADDRESS {
        return Ok(());
    }
    let mut at = Some(from);
    while let Some(a) = at.filter(|&a| a < hdr.data_segment_size) {
        c.forget(K::LocalHeapDataBlock, page_address(hdr, a)?)?;
        at = next_page(a);
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
    let max = size.checked_div(fl).unwrap_or(0);
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

#[allow(
    clippy::arithmetic_side_effects,
    reason = "n < 8: the shift is below 64 and its result at least 1"
)]
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
        let nexts = list
            .iter()
            .skip(1)
            .map(|n| n.offset)
            .chain(std::iter::once(FREE_LIST_END));
        list.iter()
            .zip(nexts)
            .map(|(b, next)| (b.offset, b.size, next))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use crate::testutil::new_file;

    /// Offsets and sizes that overflow on a damaged heap (a data segment at the top of the
    /// address space, a removal of `u64::MAX` bytes) are corrupt-heap errors, not a panic or
    /// a wrapped page address; the heap is read as before when its header is sound.
    #[test]
    fn overflowing_offsets_are_errors() {
        let (_storage, file) = new_file(false);
        let handle = file.cache_handle();
        let mut c = handle.lock().unwrap();
        let heap = LocalHeap::create(&mut c, 64).unwrap();
        let at = heap.insert(&mut c, b"name\0").unwrap();
        assert_eq!(heap.string(&mut c, at).unwrap(), b"name");

        let err = heap.remove(&mut c, at, u64::MAX).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupted, "{err}");

        // A segment whose second page's address is past `u64::MAX`.
        let sound = heap.header(&mut c).unwrap();
        let mut bad = sound;
        bad.data_segment_address = u64::MAX - 8;
        bad.data_segment_size = 3 * PAGE;
        heap.set_header(&mut c, bad).unwrap();
        let err = heap.string(&mut c, PAGE + 8).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupted, "{err}");
        assert!(err.to_string().contains("overflows"), "{err}");

        heap.set_header(&mut c, sound).unwrap();
        assert_eq!(heap.string(&mut c, at).unwrap(), b"name");
    }
}
