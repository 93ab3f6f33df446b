//! The fractal heap builder against libhdf5: the heaps of dense groups written by HDF5 1.14.4
//! (h5py 3.12.1; `tests/data/make_fractal_builder_fixtures.py`) are rebuilt from the objects
//! libhdf5 stored, inserted in creation order, and compared: the same direct blocks at the same
//! heap offsets with the same bytes, the same indirect blocks, the same header counters. Only
//! addresses differ (and the builder writes no free-space manager).
//!
//! `H5_FHEAP_REFERENCE_DIR=<dir> cargo test -p h5-format --test integration
//! fractal_builder_vs_libhdf5:: -- --ignored` compares the files the script writes into `<dir>` (e.g. with 5000 links, whose
//! heap has child indirect blocks).

use std::collections::BTreeMap;

use h5_format::Sizes;
use h5_format::heap::fractal::{
    ChildKind, FractalDirectBlock, FractalHeapBuilder, FractalHeapHeader, FractalHeapParams,
    FractalIndirectBlock, RootBlock,
};

/// What a heap holds, independent of addresses.
#[derive(Debug, PartialEq)]
struct Shape {
    /// Header counters: free space, managed space, allocated space, iterator offset, managed
    /// objects, root rows.
    counters: [u64; 6],
    /// Direct blocks: heap offset → data area.
    direct: BTreeMap<u64, Vec<u8>>,
    /// Indirect blocks: (heap offset, rows, which slots are used).
    indirect: Vec<(u64, u16, Vec<bool>)>,
}

fn shape(file: &[u8], base: u64) -> Shape {
    let at = |a: u64, n: usize| &file[(a - base) as usize..(a - base) as usize + n];
    let hdr_at = file.windows(4).position(|w| w == b"FRHP").unwrap() as u64 + base;
    let total = FractalHeapHeader::total_len(at(hdr_at, 9), Sizes::EIGHT, hdr_at).unwrap();
    let h = FractalHeapHeader::decode(at(hdr_at, total), Sizes::EIGHT, hdr_at).unwrap();
    let mut s = Shape {
        counters: [
            h.managed_free_space,
            h.managed_space,
            h.allocated_managed_space,
            h.allocation_iterator_offset,
            h.managed_object_count,
            u64::from(h.root_rows),
        ],
        direct: BTreeMap::new(),
        indirect: Vec::new(),
    };
    let mut direct = |a: u64, size: u64| {
        let mut d = FractalDirectBlock::decode(at(a, size as usize), &h, a, size).unwrap();
        s.direct.insert(d.block_offset, d.data_mut().to_vec());
    };
    let mut pending = Vec::new();
    match h.root() {
        RootBlock::Empty => {}
        RootBlock::Direct { address, size, .. } => direct(address, size),
        RootBlock::Indirect { address, rows } => pending.push((address, rows, 0u64)),
    }
    while let Some((a, rows, offset)) = pending.pop() {
        let ib =
            FractalIndirectBlock::decode(at(a, h.indirect_block_len(rows)), &h, a, rows).unwrap();
        let width = usize::from(h.table.width);
        let n = usize::from(rows) * width;
        let used: Vec<bool> = (0..n)
            .map(|e| ib.child_address(e).unwrap() != h5_format::UNDEFINED_ADDRESS)
            .collect();
        for (e, _) in used.iter().enumerate().filter(|(_, u)| **u) {
            let row = (e / width) as u32;
            let child_at = offset
                + h.table.row_offset(row).unwrap()
                + (e % width) as u64 * h.table.row_block_size(row).unwrap();
            let loc = h.table.locate(offset, rows, child_at).unwrap();
            let child = ib.child_address(e).unwrap();
            match loc.kind {
                ChildKind::Direct => direct(child, loc.block_size),
                ChildKind::Indirect { rows } => pending.push((child, rows, child_at)),
            }
        }
        s.indirect.push((offset, rows, used));
    }
    s.indirect.sort();
    s
}

/// Splits a block's data area into the objects libhdf5 packed at its start (up to the zero
/// free space), given a function measuring the object at the start of a slice.
fn objects(s: &Shape, measure: impl Fn(&[u8]) -> usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for data in s.direct.values() {
        let mut p = 0;
        while p < data.len() && data[p] != 0 {
            let n = measure(&data[p..]);
            out.push(data[p..p + n].to_vec());
            p += n;
        }
    }
    out
}

fn uint(b: &[u8]) -> usize {
    b.iter().rev().fold(0, |acc, &x| acc << 8 | usize::from(x))
}

/// Length of a link message (version 1) and its name.
fn link_message(m: &[u8]) -> (usize, &[u8]) {
    let flags = m[1];
    let mut p = 2;
    let mut kind = 0;
    if flags & 0x08 != 0 {
        kind = m[p];
        p += 1;
    }
    if flags & 0x04 != 0 {
        p += 8;
    }
    if flags & 0x10 != 0 {
        p += 1;
    }
    let w = 1 << (flags & 3);
    let name_len = uint(&m[p..p + w]);
    p += w;
    let name = &m[p..p + name_len];
    p += name_len;
    p += if kind == 0 { 8 } else { 2 + uint(&m[p..p + 2]) };
    (p, name)
}

/// Length of an attribute message (version 3; data of `elements * element size` bytes for
/// version 2 dataspaces) and its name.
fn attribute_message(m: &[u8]) -> (usize, &[u8]) {
    assert_eq!(m[0], 3);
    let name_len = uint(&m[2..4]);
    let dt_len = uint(&m[4..6]);
    let ds_len = uint(&m[6..8]);
    let dt = &m[9 + name_len..];
    let ds = &dt[dt_len..];
    let elem = uint(&dt[4..8]);
    assert_eq!(ds[0], 2);
    let rank = usize::from(ds[1]);
    let count: usize = (0..rank)
        .map(|k| uint(&ds[4 + 8 * k..12 + 8 * k]))
        .product();
    let name = &m[9..9 + name_len - 1];
    (9 + name_len + dt_len + ds_len + elem * count, name)
}

/// Rebuilds the heap of `file` and compares; `measure` splits and names its objects.
fn compare(file: &[u8], params: FractalHeapParams, measure: fn(&[u8]) -> (usize, &[u8])) {
    let reference = shape(file, 0);
    let mut objs = objects(&reference, |m| measure(m).0);
    // Names sort in creation order.
    objs.sort_by(|a, b| measure(a).1.cmp(measure(b).1));
    let mut b = FractalHeapBuilder::new(params, Sizes::EIGHT).unwrap();
    for o in &objs {
        b.insert(o).unwrap();
    }
    let mut next = 0x800u64;
    let heap = b
        .finish(&mut |_, len| {
            let a = next;
            next += len;
            a
        })
        .unwrap();
    let mut image = vec![0u8; next as usize];
    for blk in &heap.blocks {
        image[blk.address as usize..blk.address as usize + blk.bytes.len()]
            .copy_from_slice(&blk.bytes);
    }
    let ours = shape(&image, 0);
    assert_eq!(ours.counters, reference.counters, "header counters");
    assert_eq!(ours.indirect, reference.indirect, "indirect blocks");
    assert_eq!(
        ours.direct.keys().collect::<Vec<_>>(),
        reference.direct.keys().collect::<Vec<_>>(),
        "direct block offsets"
    );
    for (off, data) in &reference.direct {
        assert!(
            ours.direct[off] == *data,
            "direct block at heap offset {off}"
        );
    }
}

fn data(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn dense_links_heap_matches_libhdf5() {
    compare(
        &data("fheap_links.h5"),
        FractalHeapParams::dense_links(),
        link_message,
    );
}

#[test]
fn dense_attributes_heap_with_skipped_blocks_matches_libhdf5() {
    compare(
        &data("fheap_attrs.h5"),
        FractalHeapParams::dense_attributes(),
        attribute_message,
    );
}

#[test]
#[ignore = "needs H5_FHEAP_REFERENCE_DIR with files from make_fractal_builder_fixtures.py"]
fn reference_dir_heaps_match_libhdf5() {
    let dir = std::env::var("H5_FHEAP_REFERENCE_DIR").expect("H5_FHEAP_REFERENCE_DIR");
    let read = |n: &str| std::fs::read(format!("{dir}/{n}")).unwrap();
    compare(
        &read("fheap_links.h5"),
        FractalHeapParams::dense_links(),
        link_message,
    );
    compare(
        &read("fheap_attrs.h5"),
        FractalHeapParams::dense_attributes(),
        attribute_message,
    );
}
