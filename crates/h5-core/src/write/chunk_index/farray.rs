//! Fixed array chunk indexes: one element per chunk of the maximum dimensions (row-major),
//! in a data block that is paged when it holds more than `2^FA_PAGE_BITS` elements.

use std::collections::BTreeMap;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::fixed_array::{
    ChunkEntry, FixedArrayDataBlock, FixedArrayHeader, FixedArraySlot, encode_page,
};
use h5_metacache::MetadataKind as K;

use super::{ArrayIndex, LaidOut, full_bitmap, put_parent};
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::ChunkRecord;
use crate::meta::Decoded;
use crate::write::alloc::SpaceKind;
use crate::write::put;

/// log2 of the elements of a data block page (libhdf5's `H5D_FARRAY_MAX_DBLK_PAGE_NELMTS_BITS`).
pub(crate) const FA_PAGE_BITS: u8 = 10;

/// Most elements a fixed array index is built for here (its data block is built in memory).
const MAX_ELEMENTS: u64 = 1 << 26;

/// Row-major index of `scaled` over `counts`.
pub(crate) fn linear(scaled: &[u64], counts: &[u64]) -> Option<u64> {
    let mut lin = 0u64;
    for (&x, &n) in scaled.iter().zip(counts) {
        if x >= n {
            return None;
        }
        lin = lin.checked_mul(n)?.checked_add(x)?;
    }
    Some(lin)
}

pub(super) fn lay_out(
    ix: &ArrayIndex,
    file: &FileShared,
    records: &BTreeMap<Vec<u64>, ChunkRecord>,
) -> Result<LaidOut> {
    let sizes = file.sizes;
    let n = ix
        .counts
        .iter()
        .try_fold(1u64, |a, c| a.checked_mul(*c))
        .filter(|n| *n <= MAX_ELEMENTS)
        .ok_or_else(|| Error::Unsupported("a fixed array index of that many chunks".into()))?;
    let mut header = FixedArrayHeader {
        address: ix.header,
        format: ix.element_format(sizes)?,
        page_bits: FA_PAGE_BITS,
        num_elements: n,
        data_block_address: UNDEFINED_ADDRESS,
    };
    let mut out = LaidOut::default();
    if !records.is_empty() {
        let mut elements = vec![ix.empty_entry(); n as usize];
        for (off, r) in records {
            let i = linear(&ix.scaled(off), &ix.counts)
                .ok_or_else(|| Error::Invalid("a chunk outside the maximum dimensions".into()))?;
            elements[i as usize] = ix.entry(file, r)?;
        }
        let es = header.format.element_size as u64;
        let pages = header.page_count();
        let total = header.data_block_len(sizes)
            + (0..pages)
                .map(|p| header.page_len_elements(p) * es + 4)
                .sum::<u64>();
        let addr = file.allocate(SpaceKind::Meta, total)?;
        out.placed.push((K::FixedArrayDataBlock, addr, total));
        header.data_block_address = addr;
        // Pages first, then the data block over them, then the header.
        let per = header.page_elements() as usize;
        let mut pages_at = Vec::new();
        for (p, chunk) in elements.chunks(per).enumerate().take_while(|_| pages > 0) {
            let Some(FixedArraySlot::Page { address, len, .. }) =
                header.locate(sizes, p as u64 * per as u64)
            else {
                return Err(Error::Unsupported("fixed array page geometry".into()));
            };
            let format = header.format;
            // Inside the data block's space: forgotten, not freed, when the index moves.
            out.placed.push((K::FixedArrayDataBlockPage, address, 0));
            pages_at.push(address);
            put(
                file,
                K::FixedArrayDataBlockPage,
                address,
                Decoded::writable(len, chunk.to_vec(), move |e: &Vec<ChunkEntry>| {
                    encode_page(&format, sizes, e)
                }),
            )?;
        }
        let block = FixedArrayDataBlock {
            address: addr,
            header_address: ix.header,
            page_bitmap: full_bitmap(header.bitmap_len() as usize, pages),
            elements: if header.is_paged() {
                Vec::new()
            } else {
                elements
            },
        };
        let h = header.clone();
        put_parent(
            file,
            K::FixedArrayDataBlock,
            addr,
            Decoded::writable(
                header.data_block_len(sizes) as usize,
                block,
                move |b: &FixedArrayDataBlock| b.encode(&h, sizes),
            ),
            &pages_at,
            &mut out.deps,
        )?;
    }
    let children: Vec<u64> = out
        .placed
        .iter()
        .filter(|p| p.0 == K::FixedArrayDataBlock)
        .map(|p| p.1)
        .collect();
    put_parent(
        file,
        K::FixedArrayHeader,
        ix.header,
        Decoded::writable(
            FixedArrayHeader::encoded_len(sizes),
            header,
            move |h: &FixedArrayHeader| Ok(h.encode(sizes)),
        ),
        &children,
        &mut out.deps,
    )?;
    Ok(out)
}
