//! Extensible array chunk indexes (one unlimited dimension): element `i` is the chunk whose
//! scaled coordinates, the unlimited dimension moved to the front, are row-major index `i`
//! over the chunk grid of the maximum dimensions. Built as libhdf5 grows one: the index block
//! holds the first elements, then data blocks (paged when large) directly or through super
//! blocks; only blocks holding an allocated chunk exist.

use std::collections::BTreeMap;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::extensible_array::{
    DataBlockParent, ExtensibleArrayDataBlock, ExtensibleArrayHeader, ExtensibleArrayIndexBlock,
    ExtensibleArrayParams, ExtensibleArraySlot, ExtensibleArrayStats, ExtensibleArraySuperBlock,
    encode_page,
};
use h5_format::fixed_array::ChunkEntry;
use h5_metacache::MetadataKind as K;

use super::{ArrayIndex, LaidOut, put_parent};
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::ChunkRecord;
use crate::meta::Decoded;
use crate::write::alloc::SpaceKind;
use crate::write::put;

/// libhdf5's extensible array creation parameters for chunk indexes (`H5Dpkg.h`): max element
/// bits, index block elements, super block minimum data block pointers, data block minimum
/// elements, page bits — in the layout message's order.
pub(crate) const EA_PARAMS: [u8; 5] = [32, 4, 4, 16, 10];

/// Element index of `scaled` with dimension `first` moved to the front (unbounded), the
/// others row-major over `counts`.
fn linear(scaled: &[u64], counts: &[u64], first: usize) -> Option<u64> {
    let mut lin = *scaled.get(first)?;
    for (d, (&x, &n)) in scaled.iter().zip(counts).enumerate() {
        if d == first {
            continue;
        }
        if x >= n {
            return None;
        }
        lin = lin.checked_mul(n)?.checked_add(x)?;
    }
    Some(lin)
}

/// A data block being built: its super block, stored offset and elements.
struct Block {
    elements: Vec<ChunkEntry>,
    block_offset: u64,
}

pub(super) fn lay_out(
    ix: &ArrayIndex,
    file: &FileShared,
    records: &BTreeMap<Vec<u64>, ChunkRecord>,
) -> Result<LaidOut> {
    let sizes = file.sizes;
    let [max_bits, ib_elems, min_ptrs, min_elems, page_bits] = EA_PARAMS;
    let params = ExtensibleArrayParams {
        format: ix.element_format(sizes)?,
        max_elements_bits: max_bits,
        index_block_elements: ib_elems,
        data_block_min_elements: min_elems,
        super_block_min_data_pointers: min_ptrs,
        page_bits,
    };
    let first = ix
        .counts
        .iter()
        .position(|c| *c == u64::MAX)
        .ok_or_else(|| Error::Invalid("an extensible array without unlimited dimension".into()))?;
    let probe = ExtensibleArrayHeader::new(
        sizes,
        ix.header,
        params,
        ExtensibleArrayStats::default(),
        UNDEFINED_ADDRESS,
    )?;
    let mut stats = ExtensibleArrayStats::default();
    let mut out = LaidOut::default();
    let mut ib_address = UNDEFINED_ADDRESS;
    if !records.is_empty() {
        let empty = ix.empty_entry();
        let mut ib = ExtensibleArrayIndexBlock {
            address: UNDEFINED_ADDRESS,
            elements: vec![empty; usize::from(ib_elems)],
            data_block_addresses: vec![UNDEFINED_ADDRESS; probe.index_block_data_blocks],
            super_block_addresses: vec![UNDEFINED_ADDRESS; probe.index_block_super_block_addresses],
        };
        // Data blocks by (super block slot or usize::MAX for the index block, slot in parent).
        let mut blocks: BTreeMap<(usize, usize), Block> = BTreeMap::new();
        // Super blocks by slot: geometry index.
        let mut supers: BTreeMap<usize, usize> = BTreeMap::new();
        let mut max_set = 0u64;
        for (off, r) in records {
            let i = linear(&ix.scaled(off), &ix.counts, first)
                .ok_or_else(|| Error::Invalid("a chunk outside the maximum dimensions".into()))?;
            max_set = max_set.max(i + 1);
            let e = ix.entry(file, r)?;
            match probe.locate(i) {
                Some(ExtensibleArraySlot::IndexBlock { element }) => ib.elements[element] = e,
                Some(ExtensibleArraySlot::DataBlock {
                    super_block,
                    parent,
                    data_block_elements,
                    block_offset,
                    element,
                    ..
                }) => {
                    let key = match parent {
                        DataBlockParent::IndexBlock { slot } => (usize::MAX, slot),
                        DataBlockParent::SuperBlock { slot, data_block } => {
                            supers.insert(slot, super_block);
                            (slot, data_block)
                        }
                    };
                    let b = blocks.entry(key).or_insert_with(|| Block {
                        elements: vec![empty; data_block_elements as usize],
                        block_offset,
                    });
                    b.elements[element as usize] = e;
                }
                None => {
                    return Err(Error::Unsupported(format!(
                        "chunk {i} beyond the extensible array's range"
                    )));
                }
            }
        }
        let ib_len = probe.index_block_len(sizes);
        ib_address = file.allocate(SpaceKind::Meta, ib_len)?;
        ib.address = ib_address;
        out.placed
            .push((K::ExtensibleArrayIndexBlock, ib_address, ib_len));
        let mut sblocks: BTreeMap<usize, ExtensibleArraySuperBlock> = BTreeMap::new();
        // The blocks each parent points at (flush-dependency children).
        let mut ib_children = Vec::new();
        let mut sb_children: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
        for (&slot, &s) in &supers {
            let info = probe.super_blocks[s];
            let len = probe.super_block_len(sizes, s);
            let addr = file.allocate(SpaceKind::Meta, len)?;
            out.placed.push((K::ExtensibleArraySuperBlock, addr, len));
            ib_children.push(addr);
            stats.super_blocks += 1;
            stats.super_blocks_size += len;
            ib.super_block_addresses[slot] = addr;
            let npages = probe.pages_per_data_block(info.data_block_elements);
            let bitmap_len = npages.div_ceil(8) * info.data_blocks;
            sblocks.insert(
                slot,
                ExtensibleArraySuperBlock {
                    address: addr,
                    index: s,
                    block_offset: info.start_index,
                    page_bitmap: vec![0; bitmap_len as usize],
                    data_block_addresses: vec![UNDEFINED_ADDRESS; info.data_blocks as usize],
                },
            );
        }
        stats.elements_realized = u64::from(ib_elems);
        let es = params.format.element_size as u64;
        let mut data_blocks = Vec::new();
        for ((parent, slot), b) in blocks {
            let n = b.elements.len() as u64;
            let npages = probe.pages_per_data_block(n);
            let len = probe.data_block_prefix_len(sizes) + n * es + npages * 4;
            let addr = file.allocate(SpaceKind::Meta, len)?;
            out.placed.push((K::ExtensibleArrayDataBlock, addr, len));
            stats.data_blocks += 1;
            stats.data_blocks_size += len;
            stats.elements_realized += n;
            if parent == usize::MAX {
                ib.data_block_addresses[slot] = addr;
                ib_children.push(addr);
            } else if let Some(sb) = sblocks.get_mut(&parent) {
                sb.data_block_addresses[slot] = addr;
                sb_children.entry(parent).or_default().push(addr);
                for bit in slot as u64 * npages..(slot as u64 + 1) * npages {
                    if let Some(byte) = sb.page_bitmap.get_mut((bit / 8) as usize) {
                        *byte |= 0x80u8 >> (bit % 8);
                    }
                }
            }
            data_blocks.push((addr, n, npages, b));
        }
        stats.max_index_set = max_set;
        let header = ExtensibleArrayHeader::new(sizes, ix.header, params, stats, ib_address)?;
        // Bottom-up: pages, data blocks, super blocks, the index block, the header.
        for (addr, n, npages, b) in data_blocks {
            let per = header.page_elements() as usize;
            let mut pages_at = Vec::new();
            for (p, page) in b
                .elements
                .chunks(per)
                .enumerate()
                .take_while(|_| npages > 0)
            {
                let at = header.page_address(sizes, addr, p as u64);
                out.placed.push((K::ExtensibleArrayDataBlockPage, at, 0));
                pages_at.push(at);
                let h = header.clone();
                put(
                    file,
                    K::ExtensibleArrayDataBlockPage,
                    at,
                    Decoded::writable(
                        header.page_len() as usize,
                        page.to_vec(),
                        move |e: &Vec<ChunkEntry>| encode_page(&h, sizes, e),
                    ),
                )?;
            }
            let h = header.clone();
            let block = ExtensibleArrayDataBlock {
                address: addr,
                block_offset: b.block_offset,
                elements: if npages > 0 { Vec::new() } else { b.elements },
            };
            put_parent(
                file,
                K::ExtensibleArrayDataBlock,
                addr,
                Decoded::writable(
                    header.data_block_len(sizes, n) as usize,
                    block,
                    move |d: &ExtensibleArrayDataBlock| d.encode(&h, sizes, n),
                ),
                &pages_at,
                &mut out.deps,
            )?;
        }
        for (slot, sb) in sblocks {
            let h = header.clone();
            let len = header.super_block_len(sizes, sb.index) as usize;
            let addr = sb.address;
            put_parent(
                file,
                K::ExtensibleArraySuperBlock,
                addr,
                Decoded::writable(len, sb, move |b: &ExtensibleArraySuperBlock| {
                    b.encode(&h, sizes)
                }),
                sb_children.get(&slot).map_or(&[][..], Vec::as_slice),
                &mut out.deps,
            )?;
        }
        let h = header.clone();
        put_parent(
            file,
            K::ExtensibleArrayIndexBlock,
            ib_address,
            Decoded::writable(ib_len as usize, ib, move |b: &ExtensibleArrayIndexBlock| {
                b.encode(&h, sizes)
            }),
            &ib_children,
            &mut out.deps,
        )?;
        put_header(file, header, &[ib_address], &mut out.deps)?;
        return Ok(out);
    }
    put_header(
        file,
        ExtensibleArrayHeader::new(sizes, ix.header, params, stats, ib_address)?,
        &[],
        &mut out.deps,
    )?;
    Ok(out)
}

fn put_header(
    file: &FileShared,
    header: ExtensibleArrayHeader,
    children: &[u64],
    deps: &mut Vec<super::Dep>,
) -> Result<()> {
    let sizes = file.sizes;
    put_parent(
        file,
        K::ExtensibleArrayHeader,
        header.address,
        Decoded::writable(
            ExtensibleArrayHeader::encoded_len(sizes),
            header,
            move |h: &ExtensibleArrayHeader| Ok(h.encode(sizes)),
        ),
        children,
        deps,
    )
}

#[cfg(test)]
mod tests {
    use super::linear;

    #[test]
    fn unlimited_dimension_is_slowest() {
        // counts: dim 0 has 3 chunks, dim 1 unlimited.
        let c = [3, u64::MAX];
        assert_eq!(linear(&[0, 0], &c, 1), Some(0));
        assert_eq!(linear(&[2, 0], &c, 1), Some(2));
        assert_eq!(linear(&[0, 1], &c, 1), Some(3));
        assert_eq!(linear(&[3, 0], &c, 1), None);
    }
}
