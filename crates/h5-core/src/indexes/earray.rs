//! Extensible array chunk indexes (layout version 4, one unlimited dimension), both directions.
//!
//! Element `i` is the chunk whose scaled coordinates, the unlimited dimension moved to the
//! front, are row-major index `i` over the chunk grid of the maximum dimensions. The header
//! (`EAHD`) points at the index block (`EAIB`), which holds the first elements, the data blocks
//! (`EADB`) of the first super blocks and the addresses of the later super blocks (`EASB`),
//! which point at their data blocks; a data block of more than `2^page_bits` elements is paged,
//! its super block keeping a bitmap of initialised pages (see `h5_format::extensible_array`).
//!
//! Lookups walk header → index block → super block → data block or page through the metadata
//! cache. Writers change one element at a time, in place, as libhdf5 does: the index block is
//! created with the first element set, a super block or data block when one of its elements is
//! first set, a page when one of its elements is first set (its bit set in the super block);
//! the header's statistics count the blocks and elements created and the highest element set.
//! Flush dependencies as libhdf5 sets them: header → index block → super block → data block,
//! and the super block → each of its pages (a child is written before its parent).

use std::sync::Arc;

use h5_chunkcache::{ChunkCoord, LayoutError};
use h5_format::UNDEFINED_ADDRESS;
use h5_format::extensible_array::{
    DataBlockParent, ExtensibleArrayDataBlock, ExtensibleArrayHeader, ExtensibleArrayIndexBlock,
    ExtensibleArrayParams, ExtensibleArraySlot, ExtensibleArrayStats, ExtensibleArraySuperBlock,
    PageSlot, decode_page, encode_page,
};
use h5_format::fixed_array::{ChunkEntry, ElementFormat};
use h5_metacache::MetadataKind as K;

use super::farray::set_bit;
use super::{element, empty_element, geometry_overflow, layout_error, linear, record, usize_of};
use crate::access::{CacheAccess, CacheHandle, Slot};
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::{ChunkIndex, ChunkRecord};
use crate::meta::{Decoded, EncodeFn, Load, encoder};
use crate::write::chunks::{AtFlush, ChunkSpace, WritableChunkIndex};

/// The structure a geometry error names.
const HEADER: &str = "extensible array header";

/// libhdf5's extensible array creation parameters for chunk indexes (`H5Dpkg.h`): max element
/// bits, index block elements, super block minimum data block pointers, data block minimum
/// elements, page bits — in the layout message's order.
pub(crate) const EA_PARAMS: [u8; 5] = [32, 4, 4, 16, 10];

/// The creation parameters of a chunk index array of elements `format`, from the layout
/// message's `[max bits, index block elements, min pointers, min elements, page bits]`.
pub(crate) fn params(format: ElementFormat, p: [u8; 5]) -> ExtensibleArrayParams {
    let [
        max_elements_bits,
        index_block_elements,
        super_block_min_data_pointers,
        data_block_min_elements,
        page_bits,
    ] = p;
    ExtensibleArrayParams {
        format,
        max_elements_bits,
        index_block_elements,
        data_block_min_elements,
        super_block_min_data_pointers,
        page_bits,
    }
}

/// An extensible array chunk index: its header's relative address and what addresses its
/// elements.
#[derive(Debug)]
pub struct ExtensibleArrayIndex {
    /// The file's metadata cache.
    pub(crate) meta: CacheHandle,
    /// Relative address of the header.
    pub(crate) header: u64,
    /// Chunks per dimension over the maximum dimensions (the unlimited one ignored).
    pub(crate) counts: Vec<u64>,
    /// The unlimited dimension (moved to the front when linearising, as libhdf5 does).
    pub(crate) unlimited: usize,
    /// Bytes of an unfiltered chunk (the size of elements that store none).
    pub(crate) chunk_bytes: u64,
    /// File space for new blocks and chunks (`None`: read only).
    pub(crate) space: Option<ChunkSpace>,
    /// The structures' encoders, made at the first change.
    pub(crate) encoders: std::sync::OnceLock<Encoders>,
    /// The unpaged data block the last change set an element of, so that the next change into
    /// it protects that block alone (not the index block or super block holding its address).
    /// A data block never moves while its array exists; [`WritableChunkIndex::free`] forgets it.
    pub(crate) last_data_block: std::sync::Mutex<Option<KnownDataBlock>>,
}

/// Where an existing, unpaged data block is: its place in the array's geometry (the super
/// block index and the first element it holds), its address and its flush-dependency parent's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KnownDataBlock {
    super_block: usize,
    block_offset: u64,
    elements: u64,
    address: u64,
    parent: u64,
}

impl KnownDataBlock {
    /// The element of this (unpaged) data block that `slot` is, if it is one of them.
    fn element_of(&self, slot: &ExtensibleArraySlot) -> Option<u64> {
        match *slot {
            ExtensibleArraySlot::DataBlock {
                super_block,
                block_offset,
                element,
                page: None,
                ..
            } if super_block == self.super_block && block_offset == self.block_offset => {
                Some(element)
            }
            _ => None,
        }
    }
}

type Header = ExtensibleArrayHeader;
type Sizes = h5_format::Sizes;

fn header_load(sizes: Sizes, at: u64) -> Load {
    Load::exact(Header::encoded_len(sizes), move |b| {
        Header::decode(b, sizes, at)
    })
}

fn index_block_load(hdr: &Arc<Header>, sizes: Sizes) -> Result<Load> {
    let (h, at) = (Arc::clone(hdr), hdr.index_block_address);
    Ok(Load::exact(
        usize_of(hdr.index_block_len(sizes))?,
        move |b| ExtensibleArrayIndexBlock::decode(b, &h, sizes, at),
    ))
}

fn super_block_load(hdr: &Arc<Header>, sizes: Sizes, s: usize, at: u64) -> Result<Load> {
    let h = Arc::clone(hdr);
    Ok(Load::exact(
        usize_of(hdr.super_block_len(sizes, s))?,
        move |b| ExtensibleArraySuperBlock::decode(b, &h, sizes, s, at),
    ))
}

fn data_block_load(hdr: &Arc<Header>, sizes: Sizes, n: u64, at: u64) -> Result<Load> {
    let h = Arc::clone(hdr);
    Ok(Load::exact(
        usize_of(hdr.data_block_len(sizes, n))?,
        move |b| ExtensibleArrayDataBlock::decode(b, &h, sizes, n, at),
    ))
}

fn page_load(hdr: &Arc<Header>, sizes: Sizes, at: u64) -> Result<Load> {
    let h = Arc::clone(hdr);
    Ok(Load::exact(usize_of(hdr.page_len())?, move |b| {
        decode_page(b, &h, sizes, at)
    }))
}

fn header_encoder(sizes: Sizes) -> EncodeFn {
    encoder(move |h: &Header| Ok(h.encode(sizes)))
}

fn index_block_encoder(hdr: &Arc<Header>, sizes: Sizes) -> EncodeFn {
    let h = Arc::clone(hdr);
    encoder(move |b: &ExtensibleArrayIndexBlock| b.encode(&h, sizes))
}

fn super_block_encoder(hdr: &Arc<Header>, sizes: Sizes) -> EncodeFn {
    let h = Arc::clone(hdr);
    encoder(move |b: &ExtensibleArraySuperBlock| b.encode(&h, sizes))
}

fn data_block_encoder(hdr: &Arc<Header>, sizes: Sizes, n: u64) -> EncodeFn {
    let h = Arc::clone(hdr);
    encoder(move |b: &ExtensibleArrayDataBlock| b.encode(&h, sizes, n))
}

fn page_encoder(hdr: &Arc<Header>, sizes: Sizes) -> EncodeFn {
    let h = Arc::clone(hdr);
    encoder(move |e: &Vec<ChunkEntry>| encode_page(&h, sizes, e))
}

/// Bytes of a data block's space: its prefix, elements and page checksums (libhdf5 allocates
/// a paged data block and its pages as one block, and counts that in the statistics).
fn data_block_space(hdr: &Header, sizes: Sizes, n: u64) -> Result<u64> {
    let es = hdr.format.element_size as u64;
    n.checked_mul(es)
        .and_then(|elements| elements.checked_add(hdr.data_block_prefix_len(sizes)))
        .and_then(|b| b.checked_add(hdr.pages_per_data_block(n).checked_mul(4)?))
        .ok_or_else(|| geometry_overflow(HEADER, hdr.address))
}

/// Where a data block is: who points at it and its geometry.
struct DataBlockAt {
    parent: DataBlockParent,
    super_block: usize,
    elements: u64,
    block_offset: u64,
}

impl ExtensibleArrayIndex {
    /// Creates an empty extensible array with `params` at relative `header` (its space
    /// allocated by the caller) in the cache.
    pub(crate) fn create(
        meta: &CacheHandle,
        header: u64,
        params: ExtensibleArrayParams,
    ) -> Result<()> {
        let sizes = meta.sizes;
        let h = Header::new(
            sizes,
            header,
            params,
            ExtensibleArrayStats::default(),
            UNDEFINED_ADDRESS,
        )?;
        let mut txn = meta.lock()?;
        txn.put(
            K::ExtensibleArrayHeader,
            header,
            Decoded::writable(Header::encoded_len(sizes), h, move |h: &Header| {
                Ok(h.encode(sizes))
            }),
        )?;
        txn.finish()
    }

    fn load_header(&self) -> Result<Arc<Header>> {
        self.meta.load(
            K::ExtensibleArrayHeader,
            self.header,
            header_load(self.meta.sizes, self.header),
        )
    }

    /// Element `i`, read through the cache (`None`: in no block).
    fn entry(
        &self,
        hdr: &Arc<Header>,
        ib: &ExtensibleArrayIndexBlock,
        i: u64,
    ) -> Result<Option<ChunkEntry>> {
        let sizes = self.meta.sizes;
        let Some(slot) = hdr.locate(i) else {
            return Ok(None);
        };
        let (super_block, parent, n, element, page) = match slot {
            ExtensibleArraySlot::IndexBlock { element } => {
                return Ok(ib.elements.get(element).copied());
            }
            ExtensibleArraySlot::DataBlock {
                super_block,
                parent,
                data_block_elements,
                element,
                page,
                ..
            } => (super_block, parent, data_block_elements, element, page),
        };
        let (db_addr, sb) = match parent {
            DataBlockParent::IndexBlock { slot } => {
                (ib.data_block_addresses.get(slot).copied(), None)
            }
            DataBlockParent::SuperBlock { slot, data_block } => {
                let Some(&sb_addr) = ib.super_block_addresses.get(slot) else {
                    return Ok(None);
                };
                if sb_addr == UNDEFINED_ADDRESS {
                    return Ok(None);
                }
                let sb: Arc<ExtensibleArraySuperBlock> = self.meta.load(
                    K::ExtensibleArraySuperBlock,
                    sb_addr,
                    super_block_load(hdr, sizes, super_block, sb_addr)?,
                )?;
                (sb.data_block_addresses.get(data_block).copied(), Some(sb))
            }
        };
        let Some(db_addr) = db_addr.filter(|&a| a != UNDEFINED_ADDRESS) else {
            return Ok(None);
        };
        if let Some(p) = page {
            if let (Some(bit), Some(sb)) = (p.bitmap_bit, &sb)
                && !sb.page_initialized(bit)
            {
                return Ok(None);
            }
            let at = hdr.page_address(sizes, db_addr, p.page);
            let entries: Arc<Vec<ChunkEntry>> = self.meta.load(
                K::ExtensibleArrayDataBlockPage,
                at,
                page_load(hdr, sizes, at)?,
            )?;
            return Ok(entries.get(p.element).copied());
        }
        let db: Arc<ExtensibleArrayDataBlock> = self.meta.load(
            K::ExtensibleArrayDataBlock,
            db_addr,
            data_block_load(hdr, sizes, n, db_addr)?,
        )?;
        Ok(db.elements.get(usize_of(element)?).copied())
    }

    /// The records of the chunks at `coords` (scaled coordinates).
    fn records(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>> {
        let sizes = self.meta.sizes;
        if self.header == UNDEFINED_ADDRESS {
            // Never created: no chunk was written.
            return Ok(vec![None; coords.len()]);
        }
        let hdr = self.load_header()?;
        if hdr.index_block_address == UNDEFINED_ADDRESS {
            return Ok(vec![None; coords.len()]);
        }
        let ib: Arc<ExtensibleArrayIndexBlock> = self.meta.load(
            K::ExtensibleArrayIndexBlock,
            hdr.index_block_address,
            index_block_load(&hdr, sizes)?,
        )?;
        let mut out = Vec::with_capacity(coords.len());
        for c in coords {
            let e = match linear(c.as_slice(), &self.counts, Some(self.unlimited)) {
                Some(i) => self.entry(&hdr, &ib, i)?,
                None => None,
            };
            out.push(match e {
                Some(e) => record(&self.meta, &e, self.chunk_bytes)?,
                None => None,
            });
        }
        Ok(out)
    }

    /// Forgets the remembered data block (its array is going away).
    fn forget_known_data_block(&self) -> Result<()> {
        *self.last_data_block.lock().map_err(|_| Error::Poisoned)? = None;
        Ok(())
    }

    fn index_of(&self, scaled: &[u64]) -> Result<u64> {
        linear(scaled, &self.counts, Some(self.unlimited)).ok_or_else(|| {
            Error::Invalid(format!("chunk {scaled:?} outside the maximum dimensions"))
        })
    }

    /// Sets each element `items[k]` to what `make(header, k)` returns, in place, in one
    /// metadata-cache change: the header and index block are protected once, each block is
    /// released (dirtied) once and the header's highest element set is raised once. With
    /// `create`, missing blocks are made (and counted in the header); without (clearing
    /// elements), an element in a block that does not exist is left alone.
    fn set_many(
        &self,
        items: &[u64],
        make: impl Fn(&Header, usize) -> Result<ChunkEntry>,
        create: bool,
    ) -> Result<()> {
        let sizes = self.meta.sizes;
        let space = self.space.as_ref().ok_or(Error::ReadOnly)?;
        let mut known = *self.last_data_block.lock().map_err(|_| Error::Poisoned)?;
        let mut txn = self.meta.lock()?;
        let (hs, mut hdr) =
            txn.protect_lazy::<Header>(K::ExtensibleArrayHeader, self.header, || {
                Ok(header_load(sizes, self.header))
            })?;
        // One past the highest element set by this batch.
        let mut max_set = 0u64;
        let enc = self.encoders.get_or_init(|| Encoders::new(&hdr, sizes));
        for (k, &i) in items.iter().enumerate() {
            let entry = make(&hdr, k)?;
            let slot = hdr.locate(i).ok_or_else(|| {
                Error::Unsupported(format!("chunk {i} beyond the extensible array's range"))
            })?;
            let remembered = known.and_then(|b| Some((b, b.element_of(&slot)?)));
            if let Some((db, element)) = remembered
                && txn.depends(db.parent, db.address)?
            {
                let mut cx = Change::new(&mut txn, space, sizes, hs, &hdr, create, enc);
                cx.set_in_known_data_block(&db, element, entry)?;
                if create {
                    max_set = max_set.max(one_past(i, self.header)?);
                }
                continue;
            }
            if hdr.index_block_address == UNDEFINED_ADDRESS {
                if !create {
                    continue;
                }
                let len = hdr.index_block_len(sizes);
                let at = space.meta_allocate(len)?;
                let empty = empty_element(&hdr.format);
                let ib = ExtensibleArrayIndexBlock {
                    address: at,
                    elements: vec![empty; usize::from(hdr.index_block_elements)],
                    data_block_addresses: vec![UNDEFINED_ADDRESS; hdr.index_block_data_blocks],
                    super_block_addresses: vec![
                        UNDEFINED_ADDRESS;
                        hdr.index_block_super_block_addresses
                    ],
                };
                txn.put(
                    K::ExtensibleArrayIndexBlock,
                    at,
                    Decoded {
                        len: usize_of(len)?,
                        value: Arc::new(ib),
                        encode: Some(Arc::clone(&enc.index_block)),
                    },
                )?;
                hdr = txn
                    .change(hs, &enc.header, |h: &mut Header| {
                        h.index_block_address = at;
                        h.stats.elements_realized = h
                            .stats
                            .elements_realized
                            .saturating_add(u64::from(h.index_block_elements));
                    })?
                    .1;
            }
            let (is, ib) = txn.protect_lazy::<ExtensibleArrayIndexBlock>(
                K::ExtensibleArrayIndexBlock,
                hdr.index_block_address,
                || index_block_load(&hdr, sizes),
            )?;
            txn.depend(hs, hdr.index_block_address)?;
            let done = match slot {
                ExtensibleArraySlot::IndexBlock { element } => {
                    // The index block's value is not shared while it changes (no copy).
                    drop(ib);
                    txn.change(is, &enc.index_block, |b: &mut ExtensibleArrayIndexBlock| {
                        if let Some(e) = b.elements.get_mut(element) {
                            *e = entry;
                        }
                    })?;
                    true
                }
                ExtensibleArraySlot::DataBlock {
                    super_block,
                    parent,
                    data_block_elements,
                    block_offset,
                    element,
                    page,
                } => {
                    let at = DataBlockAt {
                        parent,
                        super_block,
                        elements: data_block_elements,
                        block_offset,
                    };
                    let mut cx = Change::new(&mut txn, space, sizes, hs, &hdr, create, enc);
                    let done = cx.set_in_data_block((is, ib), &at, element, page, entry)?;
                    known = cx.found.or(known);
                    done
                }
            };
            if done && create {
                max_set = max_set.max(one_past(i, self.header)?);
            }
        }
        if max_set > txn.value::<Header>(hs)?.stats.max_index_set {
            drop(hdr);
            txn.change(hs, &enc.header, |h: &mut Header| {
                h.stats.max_index_set = max_set;
            })?;
        }
        txn.finish()?;
        *self.last_data_block.lock().map_err(|_| Error::Poisoned)? = known;
        Ok(())
    }

    /// Every allocated element's record, and every block below the header to remove:
    /// `(kind, relative address, bytes of space to free)` children before parents (pages
    /// have no space of their own).
    fn walk(
        &self,
        txn: &mut CacheAccess<'_>,
        hdr: &Arc<Header>,
        mut f: impl FnMut(ChunkRecord) -> Result<()>,
    ) -> Result<Vec<(K, u64, u64)>> {
        let sizes = self.meta.sizes;
        let mut blocks = Vec::new();
        let (is, ib) = txn.protect::<ExtensibleArrayIndexBlock>(
            K::ExtensibleArrayIndexBlock,
            hdr.index_block_address,
            &index_block_load(hdr, sizes)?,
        )?;
        let mut visit = |entries: &[ChunkEntry]| -> Result<()> {
            for e in entries {
                if let Some(r) = record(&self.meta, e, self.chunk_bytes)? {
                    f(r)?;
                }
            }
            Ok(())
        };
        visit(&ib.elements)?;
        // Data blocks of the index block: the first super blocks' blocks, in order.
        let mut slot = 0usize;
        for info in hdr.super_blocks.iter().take(hdr.index_block_super_blocks) {
            for _ in 0..info.data_blocks {
                if let Some(&at) = ib.data_block_addresses.get(slot)
                    && at != UNDEFINED_ADDRESS
                {
                    let n = info.data_block_elements;
                    self.walk_data_block(txn, hdr, at, n, None, &mut visit, &mut blocks)?;
                }
                // Past the addresses the index block has, `get` finds none.
                slot = slot.saturating_add(1);
            }
        }
        for (k, &sb_at) in ib.super_block_addresses.iter().enumerate() {
            if sb_at == UNDEFINED_ADDRESS {
                continue;
            }
            let s = hdr
                .index_block_super_blocks
                .checked_add(k)
                .ok_or_else(|| geometry_overflow(HEADER, hdr.address))?;
            let info = *hdr
                .super_blocks
                .get(s)
                .ok_or_else(|| Error::Invalid("extensible array super block geometry".into()))?;
            let (ss, sb) = txn.protect::<ExtensibleArraySuperBlock>(
                K::ExtensibleArraySuperBlock,
                sb_at,
                &super_block_load(hdr, sizes, s, sb_at)?,
            )?;
            let npages = hdr.pages_per_data_block(info.data_block_elements);
            for (d, &at) in sb.data_block_addresses.iter().enumerate() {
                if at != UNDEFINED_ADDRESS {
                    let first_bit = (d as u64)
                        .checked_mul(npages)
                        .ok_or_else(|| geometry_overflow(HEADER, hdr.address))?;
                    let bits = (first_bit, &*sb);
                    self.walk_data_block(
                        txn,
                        hdr,
                        at,
                        info.data_block_elements,
                        Some(bits),
                        &mut visit,
                        &mut blocks,
                    )?;
                }
            }
            txn.release(ss)?;
            blocks.push((
                K::ExtensibleArraySuperBlock,
                sb_at,
                hdr.super_block_len(sizes, s),
            ));
        }
        txn.release(is)?;
        blocks.push((
            K::ExtensibleArrayIndexBlock,
            hdr.index_block_address,
            hdr.index_block_len(sizes),
        ));
        Ok(blocks)
    }

    /// Visits a data block's elements (in its pages when paged: those whose bit is set in the
    /// super block's bitmap starting at `bits.0`, or all of them for the index block's data
    /// blocks) and records its pages and itself for removal.
    #[allow(clippy::too_many_arguments)]
    fn walk_data_block(
        &self,
        txn: &mut CacheAccess<'_>,
        hdr: &Arc<Header>,
        at: u64,
        n: u64,
        bits: Option<(u64, &ExtensibleArraySuperBlock)>,
        visit: &mut impl FnMut(&[ChunkEntry]) -> Result<()>,
        blocks: &mut Vec<(K, u64, u64)>,
    ) -> Result<()> {
        let sizes = self.meta.sizes;
        let npages = hdr.pages_per_data_block(n);
        if npages == 0 {
            let (ds, db) = txn.protect::<ExtensibleArrayDataBlock>(
                K::ExtensibleArrayDataBlock,
                at,
                &data_block_load(hdr, sizes, n, at)?,
            )?;
            visit(&db.elements)?;
            txn.release(ds)?;
        } else {
            for p in 0..npages {
                if let Some((first, sb)) = bits {
                    let bit = first
                        .checked_add(p)
                        .ok_or_else(|| geometry_overflow(HEADER, hdr.address))?;
                    if !sb.page_initialized(bit) {
                        continue;
                    }
                }
                let pa = hdr.page_address(sizes, at, p);
                let (ps, entries) = txn.protect::<Vec<ChunkEntry>>(
                    K::ExtensibleArrayDataBlockPage,
                    pa,
                    &page_load(hdr, sizes, pa)?,
                )?;
                visit(&entries)?;
                txn.release(ps)?;
                blocks.push((K::ExtensibleArrayDataBlockPage, pa, 0));
            }
        }
        blocks.push((
            K::ExtensibleArrayDataBlock,
            at,
            data_block_space(hdr, sizes, n)?,
        ));
        Ok(())
    }
}

/// One past element `i` of the array whose header is at `header`.
fn one_past(i: u64, header: u64) -> Result<u64> {
    i.checked_add(1)
        .ok_or_else(|| geometry_overflow(HEADER, header))
}

/// One in-place change below the index block: the transaction, the header's slot and value,
/// and whether missing blocks are created.
struct Change<'t, 'a> {
    txn: &'t mut CacheAccess<'a>,
    space: &'t ChunkSpace,
    sizes: Sizes,
    hs: Slot,
    hdr: Arc<Header>,
    create: bool,
    enc: &'t Encoders,
    /// The unpaged data block the change set an element of, once it has.
    found: Option<KnownDataBlock>,
}

impl<'t, 'a> Change<'t, 'a> {
    /// A change of the array whose header is `hdr` (in slot `hs`), nothing found yet.
    fn new(
        txn: &'t mut CacheAccess<'a>,
        space: &'t ChunkSpace,
        sizes: Sizes,
        hs: Slot,
        hdr: &Arc<Header>,
        create: bool,
        enc: &'t Encoders,
    ) -> Self {
        Change {
            txn,
            space,
            sizes,
            hs,
            hdr: Arc::clone(hdr),
            create,
            enc,
            found: None,
        }
    }
}

/// The encoders of an array's structures, made once per index: each captures the header's
/// geometry (one copy of the header, taken once and shared by all), which no change alters.
pub(crate) struct Encoders {
    hdr: Arc<Header>,
    sizes: Sizes,
    header: EncodeFn,
    index_block: EncodeFn,
    super_block: EncodeFn,
    page: EncodeFn,
    /// Data block encoders by super block index (their element count).
    data_blocks: Vec<std::sync::OnceLock<EncodeFn>>,
}

impl std::fmt::Debug for Encoders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoders").finish_non_exhaustive()
    }
}

impl Encoders {
    fn new(hdr: &Header, sizes: Sizes) -> Self {
        // One copy shared by every encoder: a header's super block table is about 1 KiB, and
        // W4 (latest bounds) keeps the encoders of 1,000 datasets.
        let shared = Arc::new(hdr.clone());
        Encoders {
            sizes,
            header: header_encoder(sizes),
            index_block: index_block_encoder(&shared, sizes),
            super_block: super_block_encoder(&shared, sizes),
            page: page_encoder(&shared, sizes),
            data_blocks: hdr
                .super_blocks
                .iter()
                .map(|_| std::sync::OnceLock::new())
                .collect(),
            hdr: shared,
        }
    }

    /// The encoder of the data blocks of super block `s`, of `n` elements.
    fn data_block(&self, s: usize, n: u64) -> EncodeFn {
        let make = || data_block_encoder(&self.hdr, self.sizes, n);
        match self.data_blocks.get(s) {
            Some(e) => Arc::clone(e.get_or_init(make)),
            None => make(),
        }
    }
}

impl Change<'_, '_> {
    /// Adds `f`'s change to the header's statistics.
    fn count(&mut self, f: impl FnOnce(&mut ExtensibleArrayStats)) -> Result<()> {
        self.txn
            .change(self.hs, &self.enc.header, |h: &mut Header| f(&mut h.stats))?;
        Ok(())
    }

    /// Sets `entry` at `element` of the data block `at` (under the index block protected at
    /// `ib`); returns whether the element was set (false: clearing an element of a block that
    /// does not exist). Values are dropped before their entries change, so that no change
    /// copies a block.
    fn set_in_data_block(
        &mut self,
        ib: (Slot, Arc<ExtensibleArrayIndexBlock>),
        at: &DataBlockAt,
        element: u64,
        page: Option<PageSlot>,
        entry: ChunkEntry,
    ) -> Result<bool> {
        let (is, ib) = ib;
        let sizes = self.sizes;
        let hdr = Arc::clone(&self.hdr);
        let geometry = || Error::Invalid("extensible array index block geometry".into());
        // The data block's parent (protected), the block's address in it and, under a super
        // block, whether the element's page exists.
        let (parent, parent_at, db_addr, initialised) = match at.parent {
            DataBlockParent::IndexBlock { slot } => {
                let a = *ib.data_block_addresses.get(slot).ok_or_else(geometry)?;
                drop(ib);
                (is, hdr.index_block_address, a, true)
            }
            DataBlockParent::SuperBlock { slot, data_block } => {
                let mut sb_at = *ib.super_block_addresses.get(slot).ok_or_else(geometry)?;
                drop(ib);
                if sb_at == UNDEFINED_ADDRESS {
                    if !self.create {
                        return Ok(false);
                    }
                    sb_at = self.new_super_block(is, slot, at.super_block)?;
                }
                let (ss, sb) = self.txn.protect::<ExtensibleArraySuperBlock>(
                    K::ExtensibleArraySuperBlock,
                    sb_at,
                    &super_block_load(&hdr, sizes, at.super_block, sb_at)?,
                )?;
                self.txn.depend(is, sb_at)?;
                let a = *sb.data_block_addresses.get(data_block).ok_or_else(|| {
                    Error::Invalid("extensible array super block geometry".into())
                })?;
                // A page of a super block's data block exists once its bit is set; the pages
                // of the index block's (paged) data blocks were all made with their block.
                let initialised = match page.and_then(|p| p.bitmap_bit) {
                    Some(bit) => sb.page_initialized(bit),
                    None => true,
                };
                (ss, sb_at, a, initialised)
            }
        };
        let db_addr = if db_addr == UNDEFINED_ADDRESS {
            if !self.create {
                return Ok(false);
            }
            self.new_data_block(parent, at)?
        } else {
            db_addr
        };
        let n = at.elements;
        let Some(p) = page else {
            let (ds, _) = self.txn.protect_lazy::<ExtensibleArrayDataBlock>(
                K::ExtensibleArrayDataBlock,
                db_addr,
                || data_block_load(&hdr, sizes, n, db_addr),
            )?;
            self.txn.depend(parent, db_addr)?;
            let element = usize_of(element)?;
            let encode = self.enc.data_block(at.super_block, n);
            self.txn
                .change(ds, &encode, |b: &mut ExtensibleArrayDataBlock| {
                    if let Some(e) = b.elements.get_mut(element) {
                        *e = entry;
                    }
                })?;
            self.found = Some(KnownDataBlock {
                super_block: at.super_block,
                block_offset: at.block_offset,
                elements: n,
                address: db_addr,
                parent: parent_at,
            });
            return Ok(true);
        };
        let page_at = hdr.page_address(sizes, db_addr, p.page);
        if initialised {
            let (ps, _) = self.txn.protect::<Vec<ChunkEntry>>(
                K::ExtensibleArrayDataBlockPage,
                page_at,
                &page_load(&hdr, sizes, page_at)?,
            )?;
            self.txn.depend(parent, page_at)?;
            self.txn
                .change(ps, &self.enc.page, |e: &mut Vec<ChunkEntry>| {
                    if let Some(x) = e.get_mut(p.element) {
                        *x = entry;
                    }
                })?;
            return Ok(true);
        }
        if !self.create {
            return Ok(false);
        }
        let mut entries = vec![empty_element(&hdr.format); usize_of(hdr.page_elements())?];
        if let Some(x) = entries.get_mut(p.element) {
            *x = entry;
        }
        self.insert_page(page_at, entries)?;
        if let Some(bit) = p.bitmap_bit {
            self.txn.change(
                parent,
                &self.enc.super_block,
                |b: &mut ExtensibleArraySuperBlock| set_bit(&mut b.page_bitmap, bit),
            )?;
        }
        self.txn.depend(parent, page_at)?;
        Ok(true)
    }

    /// Sets `entry` at `element` of the existing, unpaged data block `db` without protecting
    /// its parent. The caller checked that the block is cached as a flush-dependency child of
    /// its parent (a block evicted and reloaded, or loaded by a lookup, is not: it takes the
    /// path through its parent, which makes the dependency again).
    fn set_in_known_data_block(
        &mut self,
        db: &KnownDataBlock,
        element: u64,
        entry: ChunkEntry,
    ) -> Result<()> {
        let (sizes, hdr) = (self.sizes, Arc::clone(&self.hdr));
        let (ds, _) = self.txn.protect_lazy::<ExtensibleArrayDataBlock>(
            K::ExtensibleArrayDataBlock,
            db.address,
            || data_block_load(&hdr, sizes, db.elements, db.address),
        )?;
        let element = usize_of(element)?;
        let encode = self.enc.data_block(db.super_block, db.elements);
        self.txn
            .change(ds, &encode, |b: &mut ExtensibleArrayDataBlock| {
                if let Some(e) = b.elements.get_mut(element) {
                    *e = entry;
                }
            })?;
        Ok(())
    }

    fn insert_page(&mut self, at: u64, entries: Vec<ChunkEntry>) -> Result<()> {
        self.txn.put(
            K::ExtensibleArrayDataBlockPage,
            at,
            Decoded {
                len: usize_of(self.hdr.page_len())?,
                value: Arc::new(entries),
                encode: Some(Arc::clone(&self.enc.page)),
            },
        )
    }

    /// Creates super block `s` at `slot` of the index block (protected at `is`).
    fn new_super_block(&mut self, is: Slot, slot: usize, s: usize) -> Result<u64> {
        let (sizes, hdr) = (self.sizes, Arc::clone(&self.hdr));
        let info = *hdr
            .super_blocks
            .get(s)
            .ok_or_else(|| Error::Invalid("extensible array super block geometry".into()))?;
        let len = hdr.super_block_len(sizes, s);
        let at = self.space.meta_allocate(len)?;
        let npages = hdr.pages_per_data_block(info.data_block_elements);
        let bitmap_len = npages
            .div_ceil(8)
            .checked_mul(info.data_blocks)
            .ok_or_else(|| geometry_overflow(HEADER, hdr.address))?;
        let sb = ExtensibleArraySuperBlock {
            address: at,
            index: s,
            block_offset: info.start_index,
            page_bitmap: vec![0; usize_of(bitmap_len)?],
            data_block_addresses: vec![UNDEFINED_ADDRESS; usize_of(info.data_blocks)?],
        };
        self.txn.put(
            K::ExtensibleArraySuperBlock,
            at,
            Decoded {
                len: usize_of(len)?,
                value: Arc::new(sb),
                encode: Some(Arc::clone(&self.enc.super_block)),
            },
        )?;
        self.txn.change(
            is,
            &self.enc.index_block,
            |b: &mut ExtensibleArrayIndexBlock| {
                if let Some(a) = b.super_block_addresses.get_mut(slot) {
                    *a = at;
                }
            },
        )?;
        self.count(|st| {
            st.super_blocks = st.super_blocks.saturating_add(1);
            st.super_blocks_size = st.super_blocks_size.saturating_add(len);
        })?;
        Ok(at)
    }

    /// Creates the data block `at` describes, recorded in its protected `parent` (the index
    /// block or a super block).
    fn new_data_block(&mut self, parent: Slot, at: &DataBlockAt) -> Result<u64> {
        let (sizes, hdr) = (self.sizes, Arc::clone(&self.hdr));
        let n = at.elements;
        let space = data_block_space(&hdr, sizes, n)?;
        let addr = self.space.meta_allocate(space)?;
        let npages = hdr.pages_per_data_block(n);
        let block = ExtensibleArrayDataBlock {
            address: addr,
            block_offset: at.block_offset,
            elements: if npages > 0 {
                Vec::new()
            } else {
                vec![empty_element(&hdr.format); usize_of(n)?]
            },
        };
        self.txn.put(
            K::ExtensibleArrayDataBlock,
            addr,
            Decoded {
                len: usize_of(hdr.data_block_len(sizes, n))?,
                value: Arc::new(block),
                encode: Some(self.enc.data_block(at.super_block, n)),
            },
        )?;
        match at.parent {
            DataBlockParent::IndexBlock { slot } => {
                self.txn.change(
                    parent,
                    &self.enc.index_block,
                    |b: &mut ExtensibleArrayIndexBlock| {
                        if let Some(a) = b.data_block_addresses.get_mut(slot) {
                            *a = addr;
                        }
                    },
                )?;
                // The index block's data blocks have no page bitmap: all their pages exist.
                for p in 0..npages {
                    let pa = hdr.page_address(sizes, addr, p);
                    let entries = vec![empty_element(&hdr.format); usize_of(hdr.page_elements())?];
                    self.insert_page(pa, entries)?;
                    self.txn.depend(parent, pa)?;
                }
            }
            DataBlockParent::SuperBlock { data_block, .. } => {
                self.txn.change(
                    parent,
                    &self.enc.super_block,
                    |b: &mut ExtensibleArraySuperBlock| {
                        if let Some(a) = b.data_block_addresses.get_mut(data_block) {
                            *a = addr;
                        }
                    },
                )?;
            }
        }
        self.txn.depend(parent, addr)?;
        self.count(|st| {
            st.data_blocks = st.data_blocks.saturating_add(1);
            st.data_blocks_size = st.data_blocks_size.saturating_add(space);
            st.elements_realized = st.elements_realized.saturating_add(n);
        })?;
        Ok(addr)
    }
}

impl ChunkIndex for ExtensibleArrayIndex {
    fn lookup(
        &self,
        coords: &[ChunkCoord],
    ) -> std::result::Result<Vec<Option<ChunkRecord>>, LayoutError> {
        self.records(coords).map_err(layout_error)
    }
}

/// Changed in place: nothing to do at flush.
impl AtFlush for ExtensibleArrayIndex {}

impl WritableChunkIndex for ExtensibleArrayIndex {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>> {
        self.records(coords)
    }

    fn insert(&self, scaled: &[u64], r: ChunkRecord) -> Result<()> {
        let i = self.index_of(scaled)?;
        self.set_many(&[i], |h, _| element(&self.meta, &h.format, &r), true)
    }

    fn insert_many(&self, records: &[(ChunkCoord, ChunkRecord)]) -> Result<()> {
        let items = records
            .iter()
            .map(|(c, _)| self.index_of(c.as_slice()))
            .collect::<Result<Vec<u64>>>()?;
        self.set_many(
            &items,
            |h, k| element(&self.meta, &h.format, super::batch_record(records, k)?),
            true,
        )
    }

    fn remove(&self, scaled: &[u64]) -> Result<()> {
        let i = self.index_of(scaled)?;
        self.set_many(&[i], |h, _| Ok(empty_element(&h.format)), false)
    }

    fn free(&self, _file: &FileShared) -> Result<()> {
        self.forget_known_data_block()?;
        let sizes = self.meta.sizes;
        let space = self.space.as_ref().ok_or(Error::ReadOnly)?;
        let mut txn = self.meta.lock()?;
        let (hs, hdr) = txn.protect::<Header>(
            K::ExtensibleArrayHeader,
            self.header,
            &header_load(sizes, self.header),
        )?;
        if hdr.index_block_address != UNDEFINED_ADDRESS {
            let blocks = self.walk(&mut txn, &hdr, |r| space.raw_free(r.addr, r.size))?;
            for (kind, at, len) in blocks {
                txn.forget(kind, at)?;
                if len > 0 {
                    space.meta_free(at, len)?;
                }
            }
        }
        txn.release(hs)?;
        txn.forget(K::ExtensibleArrayHeader, self.header)?;
        space.meta_free(self.header, Header::encoded_len(sizes) as u64)?;
        txn.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use h5_format::fixed_array::ArrayClient;

    #[test]
    fn data_block_sizes_past_2_64_are_corrupted_errors() {
        let params = ExtensibleArrayParams {
            format: ElementFormat {
                client: ArrayClient::Chunks,
                element_size: 8,
                chunk_size_len: 0,
            },
            max_elements_bits: 64,
            index_block_elements: 4,
            data_block_min_elements: 16,
            super_block_min_data_pointers: 4,
            page_bits: 10,
        };
        let sizes = Sizes {
            offset: 8,
            length: 8,
        };
        let hdr = Header::new(
            sizes,
            0x200,
            params,
            ExtensibleArrayStats::default(),
            UNDEFINED_ADDRESS,
        )
        .unwrap();
        let e = data_block_space(&hdr, sizes, 1 << 62).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Corrupted, "{e}");
        assert!(e.to_string().contains("0x200"), "{e}");
        // 1024 elements of 8 bytes: no pages, prefix + elements.
        assert_eq!(
            data_block_space(&hdr, sizes, 1024).unwrap(),
            hdr.data_block_prefix_len(sizes) + 8 * 1024
        );
    }

    #[test]
    fn unlimited_dimension_is_slowest() {
        // counts: dim 0 has 3 chunks, dim 1 unlimited.
        let c = [3, u64::MAX];
        assert_eq!(linear(&[0, 0], &c, Some(1)), Some(0));
        assert_eq!(linear(&[2, 0], &c, Some(1)), Some(2));
        assert_eq!(linear(&[0, 1], &c, Some(1)), Some(3));
        assert_eq!(linear(&[3, 0], &c, Some(1)), None);
    }
}
