//! Fixed array chunk indexes (layout version 4, fixed maximum dimensions), both directions.
//!
//! Element `i` is the chunk whose scaled coordinates are row-major index `i` over the chunk grid
//! of the maximum dimensions. The header (`FAHD`) points at one data block (`FADB`); a data
//! block of more than `2^page_bits` elements is paged: it holds a bitmap of initialised pages,
//! and the pages follow it in its space.
//!
//! Lookups load the header, the data block and the page holding an element through the
//! metadata cache. Writers change one element at a time, in place: the header, the data block
//! and the page are protected read-write, changed and released dirtied. As libhdf5 does, the
//! data block (with its pages' space) is created when the first element is set, and a page when
//! one of its elements is first set (its bit set in the data block's bitmap); an uninitialised
//! page reads as all chunks unallocated. Flush dependencies: the header is the parent of the
//! data block, the data block the parent of its pages (a child is written before its parent).

use std::sync::Arc;

use h5_chunkcache::{ChunkCoord, LayoutError};
use h5_format::UNDEFINED_ADDRESS;
use h5_format::fixed_array::{
    ChunkEntry, FixedArrayDataBlock, FixedArrayHeader, FixedArraySlot, decode_page, encode_page,
};
use h5_metacache::MetadataKind as K;

use super::{element, empty_element, geometry_overflow, layout_error, linear, record, usize_of};
use crate::access::{CacheAccess, CacheHandle};
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::{ChunkIndex, ChunkRecord};
use crate::meta::{Decoded, EncodeFn, Load, encoder};
use crate::write::chunks::{AtFlush, ChunkSpace, WritableChunkIndex};

/// log2 of the elements of a data block page (libhdf5's `H5D_FARRAY_MAX_DBLK_PAGE_NELMTS_BITS`).
pub(crate) const FA_PAGE_BITS: u8 = 10;

/// Most elements of a fixed array index h5 creates (its data block's page bitmap is then at
/// most 1 MiB).
const MAX_ELEMENTS: u64 = 1 << 33;

/// A fixed array chunk index: its header's relative address and what addresses its elements.
#[derive(Debug)]
pub struct FixedArrayIndex {
    /// The file's metadata cache.
    pub(crate) meta: CacheHandle,
    /// Relative address of the header.
    pub(crate) header: u64,
    /// Chunks per dimension over the maximum dimensions.
    pub(crate) counts: Vec<u64>,
    /// Bytes of an unfiltered chunk (the size of elements that store none).
    pub(crate) chunk_bytes: u64,
    /// File space for new blocks and chunks (`None`: read only).
    pub(crate) space: Option<ChunkSpace>,
}

fn header_load(sizes: h5_format::Sizes, at: u64) -> Load {
    Load::exact(FixedArrayHeader::encoded_len(sizes), move |b| {
        FixedArrayHeader::decode(b, sizes, at)
    })
}

fn block_load(hdr: &Arc<FixedArrayHeader>, sizes: h5_format::Sizes) -> Result<Load> {
    let h = Arc::clone(hdr);
    let at = hdr.data_block_address;
    Ok(Load::exact(
        usize_of(hdr.data_block_len(sizes))?,
        move |b| FixedArrayDataBlock::decode(b, &h, sizes, at),
    ))
}

fn page_load(hdr: &FixedArrayHeader, sizes: h5_format::Sizes, slot: FixedArraySlot) -> Load {
    let format = hdr.format;
    let (len, elements, address) = match slot {
        FixedArraySlot::Page {
            len,
            elements,
            address,
            ..
        } => (len, elements, address),
        FixedArraySlot::DataBlock { .. } => (0, 0, UNDEFINED_ADDRESS),
    };
    Load::exact(len, move |b| {
        decode_page(b, &format, sizes, elements, address)
    })
}

fn header_encoder(sizes: h5_format::Sizes) -> EncodeFn {
    encoder(move |h: &FixedArrayHeader| Ok(h.encode(sizes)))
}

fn block_encoder(hdr: &FixedArrayHeader, sizes: h5_format::Sizes) -> EncodeFn {
    let h = hdr.clone();
    encoder(move |b: &FixedArrayDataBlock| b.encode(&h, sizes))
}

fn page_encoder(hdr: &FixedArrayHeader, sizes: h5_format::Sizes) -> EncodeFn {
    let format = hdr.format;
    encoder(move |e: &Vec<ChunkEntry>| encode_page(&format, sizes, e))
}

/// Bytes of the data block's space: the block and all its pages.
fn block_space(hdr: &FixedArrayHeader, sizes: h5_format::Sizes) -> Result<u64> {
    let es = hdr.format.element_size as u64;
    // Every page but the last holds page_elements() elements, the last the rest: the pages
    // hold num_elements elements and a 4-byte checksum each.
    let pages = if hdr.page_count() > 0 {
        hdr.num_elements
            .checked_mul(es)
            .and_then(|elements| elements.checked_add(hdr.page_count().checked_mul(4)?))
    } else {
        Some(0)
    };
    pages
        .and_then(|p| p.checked_add(hdr.data_block_len(sizes)))
        .ok_or_else(|| geometry_overflow("fixed array header", hdr.address))
}

impl FixedArrayIndex {
    /// Creates an empty fixed array of `num_elements` elements in pages of `2^page_bits` at
    /// relative `header` (its space allocated by the caller) in the cache.
    pub(crate) fn create(
        meta: &CacheHandle,
        header: u64,
        format: h5_format::fixed_array::ElementFormat,
        num_elements: u64,
        page_bits: u8,
    ) -> Result<()> {
        if num_elements > MAX_ELEMENTS {
            return Err(Error::Unsupported(format!(
                "a fixed array index of {num_elements} chunks"
            )));
        }
        let sizes = meta.sizes;
        let h = FixedArrayHeader {
            address: header,
            format,
            page_bits,
            num_elements,
            data_block_address: UNDEFINED_ADDRESS,
        };
        let mut txn = meta.lock()?;
        txn.put(
            K::FixedArrayHeader,
            header,
            Decoded::writable(
                FixedArrayHeader::encoded_len(sizes),
                h,
                move |h: &FixedArrayHeader| Ok(h.encode(sizes)),
            ),
        )?;
        txn.finish()
    }

    fn load_header(&self) -> Result<Arc<FixedArrayHeader>> {
        self.meta.load(
            K::FixedArrayHeader,
            self.header,
            header_load(self.meta.sizes, self.header),
        )
    }

    /// The records of the chunks at `coords` (scaled coordinates).
    fn records(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>> {
        let sizes = self.meta.sizes;
        if self.header == UNDEFINED_ADDRESS {
            // Never created: no chunk was written.
            return Ok(vec![None; coords.len()]);
        }
        let hdr = self.load_header()?;
        if hdr.data_block_address == UNDEFINED_ADDRESS {
            return Ok(vec![None; coords.len()]);
        }
        let db: Arc<FixedArrayDataBlock> = self.meta.load(
            K::FixedArrayDataBlock,
            hdr.data_block_address,
            block_load(&hdr, sizes)?,
        )?;
        let mut out = Vec::with_capacity(coords.len());
        for c in coords {
            let slot = linear(c.as_slice(), &self.counts, None).and_then(|i| hdr.locate(sizes, i));
            let entry = match slot {
                None => None,
                Some(FixedArraySlot::DataBlock { element }) => db.elements.get(element).copied(),
                Some(
                    s @ FixedArraySlot::Page {
                        page,
                        element,
                        address,
                        ..
                    },
                ) => {
                    if db.page_initialized(page) {
                        let entries: Arc<Vec<ChunkEntry>> = self.meta.load(
                            K::FixedArrayDataBlockPage,
                            address,
                            page_load(&hdr, sizes, s),
                        )?;
                        entries.get(element).copied()
                    } else {
                        None
                    }
                }
            };
            out.push(match entry {
                Some(e) => record(&self.meta, &e, self.chunk_bytes)?,
                None => None,
            });
        }
        Ok(out)
    }

    /// Sets each element `items[k]` to what `make(header, k)` returns, in place, in one
    /// metadata-cache change (each block protected and released once for the batch). With
    /// `create`, missing blocks are made; without (clearing elements), an element in a block
    /// that does not exist is left alone.
    fn set_many(
        &self,
        items: &[u64],
        make: impl Fn(&FixedArrayHeader, usize) -> Result<ChunkEntry>,
        create: bool,
    ) -> Result<()> {
        let sizes = self.meta.sizes;
        let space = self.space.as_ref().ok_or(Error::ReadOnly)?;
        let mut txn = self.meta.lock()?;
        let (hs, mut hdr) = txn.protect::<FixedArrayHeader>(
            K::FixedArrayHeader,
            self.header,
            &header_load(sizes, self.header),
        )?;
        // Made once per batch (each copies the header's geometry).
        let block_enc = block_encoder(&hdr, sizes);
        let page_enc = page_encoder(&hdr, sizes);
        for (k, &i) in items.iter().enumerate() {
            let entry = make(&hdr, k)?;
            if i >= hdr.num_elements {
                return Err(Error::Invalid(format!("chunk {i} outside the fixed array")));
            }
            if hdr.data_block_address == UNDEFINED_ADDRESS {
                if !create {
                    continue;
                }
                let at = space.meta_allocate(block_space(&hdr, sizes)?)?;
                let block = FixedArrayDataBlock {
                    address: at,
                    header_address: self.header,
                    page_bitmap: vec![0; usize_of(hdr.bitmap_len())?],
                    elements: if hdr.is_paged() {
                        Vec::new()
                    } else {
                        vec![empty_element(&hdr.format); usize_of(hdr.num_elements)?]
                    },
                };
                txn.put(
                    K::FixedArrayDataBlock,
                    at,
                    Decoded {
                        len: usize_of(hdr.data_block_len(sizes))?,
                        value: Arc::new(block),
                        encode: Some(Arc::clone(&block_enc)),
                    },
                )?;
                hdr = txn
                    .change(hs, &header_encoder(sizes), |h: &mut FixedArrayHeader| {
                        h.data_block_address = at;
                    })?
                    .1;
            }
            // Page addresses follow the data block's.
            let slot = hdr
                .locate(sizes, i)
                .ok_or_else(|| Error::Invalid(format!("chunk {i} outside the fixed array")))?;
            let (ds, db) = txn.protect::<FixedArrayDataBlock>(
                K::FixedArrayDataBlock,
                hdr.data_block_address,
                &block_load(&hdr, sizes)?,
            )?;
            txn.depend(hs, hdr.data_block_address)?;
            // Read what is needed, then drop the value so that a change does not copy it.
            let initialised = match slot {
                FixedArraySlot::Page { page, .. } => db.page_initialized(page),
                FixedArraySlot::DataBlock { .. } => true,
            };
            drop(db);
            match slot {
                FixedArraySlot::DataBlock { element } => {
                    txn.change(ds, &block_enc, |b: &mut FixedArrayDataBlock| {
                        if let Some(e) = b.elements.get_mut(element) {
                            *e = entry;
                        }
                    })?;
                }
                FixedArraySlot::Page {
                    page,
                    element,
                    address,
                    len,
                    elements,
                } => {
                    if initialised {
                        let (ps, _) = txn.protect::<Vec<ChunkEntry>>(
                            K::FixedArrayDataBlockPage,
                            address,
                            &page_load(&hdr, sizes, slot),
                        )?;
                        txn.depend(ds, address)?;
                        txn.change(ps, &page_enc, |p: &mut Vec<ChunkEntry>| {
                            if let Some(e) = p.get_mut(element) {
                                *e = entry;
                            }
                        })?;
                    } else if create {
                        let mut entries = vec![empty_element(&hdr.format); usize_of(elements)?];
                        if let Some(e) = entries.get_mut(element) {
                            *e = entry;
                        }
                        txn.put(
                            K::FixedArrayDataBlockPage,
                            address,
                            Decoded {
                                len,
                                value: Arc::new(entries),
                                encode: Some(Arc::clone(&page_enc)),
                            },
                        )?;
                        txn.change(ds, &block_enc, |b: &mut FixedArrayDataBlock| {
                            set_bit(&mut b.page_bitmap, page);
                        })?;
                        txn.depend(ds, address)?;
                    }
                }
            }
        }
        txn.finish()
    }

    /// Element `i` of the linearised chunk at `scaled`.
    fn index_of(&self, scaled: &[u64]) -> Result<u64> {
        linear(scaled, &self.counts, None).ok_or_else(|| {
            Error::Invalid(format!("chunk {scaled:?} outside the maximum dimensions"))
        })
    }

    /// Every allocated element's record.
    fn for_each_record(
        &self,
        txn: &mut CacheAccess<'_>,
        hdr: &Arc<FixedArrayHeader>,
        mut f: impl FnMut(ChunkRecord) -> Result<()>,
    ) -> Result<Vec<u64>> {
        let sizes = self.meta.sizes;
        let (ds, db) = txn.protect::<FixedArrayDataBlock>(
            K::FixedArrayDataBlock,
            hdr.data_block_address,
            &block_load(hdr, sizes)?,
        )?;
        let mut pages = Vec::new();
        let mut visit = |entries: &[ChunkEntry]| -> Result<()> {
            for e in entries {
                if let Some(r) = record(&self.meta, e, self.chunk_bytes)? {
                    f(r)?;
                }
            }
            Ok(())
        };
        visit(&db.elements)?;
        for p in 0..hdr.page_count() {
            if !db.page_initialized(p) {
                continue;
            }
            let first = p
                .checked_mul(hdr.page_elements())
                .ok_or_else(|| geometry_overflow("fixed array header", self.header))?;
            let slot = hdr
                .locate(sizes, first)
                .ok_or_else(|| Error::Invalid("fixed array page geometry".into()))?;
            let FixedArraySlot::Page { address, .. } = slot else {
                continue;
            };
            let (ps, entries) = txn.protect::<Vec<ChunkEntry>>(
                K::FixedArrayDataBlockPage,
                address,
                &page_load(hdr, sizes, slot),
            )?;
            visit(&entries)?;
            txn.release(ps)?;
            pages.push(address);
        }
        txn.release(ds)?;
        Ok(pages)
    }
}

/// Sets bit `i` of an MSB-first bitmap.
pub(crate) fn set_bit(bitmap: &mut [u8], i: u64) {
    if let Some(byte) = usize::try_from(i / 8).ok().and_then(|k| bitmap.get_mut(k)) {
        *byte |= 0x80u8 >> (i % 8);
    }
}

impl ChunkIndex for FixedArrayIndex {
    fn lookup(
        &self,
        coords: &[ChunkCoord],
    ) -> std::result::Result<Vec<Option<ChunkRecord>>, LayoutError> {
        self.records(coords).map_err(layout_error)
    }
}

/// Changed in place: nothing to do at flush.
impl AtFlush for FixedArrayIndex {}

impl WritableChunkIndex for FixedArrayIndex {
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
        let sizes = self.meta.sizes;
        let space = self.space.as_ref().ok_or(Error::ReadOnly)?;
        let mut txn = self.meta.lock()?;
        let (hs, hdr) = txn.protect::<FixedArrayHeader>(
            K::FixedArrayHeader,
            self.header,
            &header_load(sizes, self.header),
        )?;
        if hdr.data_block_address != UNDEFINED_ADDRESS {
            let pages = self.for_each_record(&mut txn, &hdr, |r| space.raw_free(r.addr, r.size))?;
            for p in pages {
                txn.forget(K::FixedArrayDataBlockPage, p)?;
            }
            txn.forget(K::FixedArrayDataBlock, hdr.data_block_address)?;
            space.meta_free(hdr.data_block_address, block_space(&hdr, sizes)?)?;
        }
        txn.release(hs)?;
        txn.forget(K::FixedArrayHeader, self.header)?;
        space.meta_free(self.header, FixedArrayHeader::encoded_len(sizes) as u64)?;
        txn.finish()
    }
}
