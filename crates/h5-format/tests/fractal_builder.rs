//! The fractal heap builder: heaps of 1 to 10 000 objects decode with the heap decoders
//! (checksums verified) and every object reads back through its heap ID; limits are typed
//! errors; random inserts round-trip (proptest).

use std::collections::BTreeMap;

use h5_format::heap::fractal::{
    ChildKind, EncodedFractalHeap, FractalBlockKind, FractalDirectBlock, FractalHeapBuilder,
    FractalHeapHeader, FractalHeapParams, FractalIndirectBlock, HeapId, RootBlock,
};
use h5_format::{FormatError, Sizes, UNDEFINED_ADDRESS};
use proptest::prelude::*;

/// A finished heap laid out in memory from address 0x1000 on, as a file.
struct Image {
    bytes: Vec<u8>,
    base: u64,
    heap: EncodedFractalHeap,
}

fn finish(b: FractalHeapBuilder) -> Image {
    let base = 0x1000u64;
    let mut next = base;
    let mut kinds = Vec::new();
    let heap = b
        .finish(&mut |kind, len| {
            kinds.push(kind);
            let a = next;
            next += len;
            a
        })
        .unwrap();
    assert_eq!(kinds.first(), Some(&FractalBlockKind::Header));
    let mut bytes = vec![0u8; (next - base) as usize];
    for blk in &heap.blocks {
        let s = (blk.address - base) as usize;
        bytes[s..s + blk.bytes.len()].copy_from_slice(&blk.bytes);
    }
    Image { bytes, base, heap }
}

impl Image {
    fn at(&self, addr: u64, len: usize) -> &[u8] {
        let s = (addr - self.base) as usize;
        &self.bytes[s..s + len]
    }

    fn header(&self) -> FractalHeapHeader {
        let a = self.heap.header.address;
        let total = FractalHeapHeader::total_len(self.at(a, 9), Sizes::EIGHT, a).unwrap();
        let h = FractalHeapHeader::decode(self.at(a, total), Sizes::EIGHT, a).unwrap();
        assert_eq!(h, self.heap.header);
        h
    }

    /// Decodes every block (checksums verified); returns the direct blocks by heap offset
    /// and the number of indirect blocks.
    fn blocks(&self, h: &FractalHeapHeader) -> (BTreeMap<u64, FractalDirectBlock>, usize) {
        let mut direct = BTreeMap::new();
        let mut indirect = 0;
        match h.root() {
            RootBlock::Empty => {}
            RootBlock::Direct { address, size, .. } => {
                let d =
                    FractalDirectBlock::decode(self.at(address, size as usize), h, address, size)
                        .unwrap();
                direct.insert(d.block_offset, d);
            }
            RootBlock::Indirect { address, rows } => {
                self.walk(h, address, rows, 0, &mut direct, &mut indirect)
            }
        }
        (direct, indirect)
    }

    fn walk(
        &self,
        h: &FractalHeapHeader,
        addr: u64,
        rows: u16,
        offset: u64,
        direct: &mut BTreeMap<u64, FractalDirectBlock>,
        indirect: &mut usize,
    ) {
        let ib =
            FractalIndirectBlock::decode(self.at(addr, h.indirect_block_len(rows)), h, addr, rows)
                .unwrap();
        assert_eq!(ib.block_offset, offset);
        *indirect += 1;
        let width = usize::from(h.table.width);
        for entry in 0..usize::from(rows) * width {
            let child = ib.child_address(entry).unwrap();
            if child == UNDEFINED_ADDRESS {
                continue;
            }
            let row = (entry / width) as u32;
            let at = offset
                + h.table.row_offset(row).unwrap()
                + (entry % width) as u64 * h.table.row_block_size(row).unwrap();
            let loc = h.table.locate(offset, rows, at).unwrap();
            match loc.kind {
                ChildKind::Direct => {
                    let d = FractalDirectBlock::decode(
                        self.at(child, loc.block_size as usize),
                        h,
                        child,
                        loc.block_size,
                    )
                    .unwrap();
                    assert_eq!(d.block_offset, at);
                    direct.insert(at, d);
                }
                ChildKind::Indirect { rows } => self.walk(h, child, rows, at, direct, indirect),
            }
        }
    }
}

/// Reads an object back through its ID, resolving managed IDs from the root down.
fn read(h: &FractalHeapHeader, direct: &BTreeMap<u64, FractalDirectBlock>, id: &[u8]) -> Vec<u8> {
    match HeapId::decode(id, h).unwrap() {
        HeapId::Tiny(b) => b.to_vec(),
        HeapId::Managed { offset, len } => {
            let (_, d) = direct.range(..=offset).next_back().unwrap();
            d.object(offset, len).unwrap().to_vec()
        }
        HeapId::Huge(_) => panic!("no huge objects"),
    }
}

/// Deterministic pseudo-random object sizes in `lo..=hi`.
fn objects(n: usize, lo: usize, hi: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut x = seed | 1;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = lo + (x % (hi - lo + 1) as u64) as usize;
            (0..len).map(|k| (i * 31 + k * 7) as u8 | 1).collect()
        })
        .collect()
}

/// Builds a heap of `objs`, checks it decodes and reads back; returns the image.
fn build_and_check(params: FractalHeapParams, objs: &[Vec<u8>]) -> Image {
    let mut b = FractalHeapBuilder::new(params, Sizes::EIGHT).unwrap();
    let ids: Vec<Vec<u8>> = objs.iter().map(|o| b.insert(o).unwrap()).collect();
    let img = finish(b);
    let h = img.header();
    let (direct, _) = img.blocks(&h);
    for (o, id) in objs.iter().zip(&ids) {
        assert_eq!(id.len(), usize::from(params.heap_id_len));
        assert_eq!(&read(&h, &direct, id), o);
    }
    // The counters: objects, their bytes, allocated blocks.
    let tiny = objs.iter().filter(|o| o.len() <= h.tiny_max_len()).count() as u64;
    assert_eq!(h.tiny_object_count, tiny);
    assert_eq!(h.managed_object_count, objs.len() as u64 - tiny);
    let managed_bytes: u64 = objs
        .iter()
        .filter(|o| o.len() > h.tiny_max_len())
        .map(|o| o.len() as u64)
        .sum();
    let block_bytes: u64 = direct.values().map(|d| d.image.len() as u64).sum();
    assert_eq!(h.allocated_managed_space, block_bytes);
    let overhead = h.direct_block_header_len() as u64;
    // Free space covers every direct block the root can hold; created blocks are part of it.
    let created_free = block_bytes - overhead * direct.len() as u64 - managed_bytes;
    assert!(h.managed_free_space >= created_free);
    assert_eq!(h.free_space_manager_address, UNDEFINED_ADDRESS);
    img
}

#[test]
fn heaps_of_1_to_10000_objects_read_back() {
    for n in [1usize, 10, 100, 1000, 10_000] {
        for params in [
            FractalHeapParams::dense_links(),
            FractalHeapParams::dense_attributes(),
        ] {
            let objs = objects(n, 10, 300, n as u64);
            let img = build_and_check(params, &objs);
            let h = img.header();
            let (_, indirect) = img.blocks(&h);
            if n == 10_000 {
                // ~1.5 MB of objects: past the root's direct rows, into child indirect blocks.
                assert!(indirect > 1, "{n} objects: {indirect} indirect blocks");
            }
        }
    }
}

#[test]
fn large_objects_skip_blocks_and_small_ones_fill_them() {
    let p = FractalHeapParams::dense_links();
    let mut objs = objects(30, 20, 100, 7);
    objs.insert(3, vec![0xaa; 2000]);
    objs.insert(10, vec![0xbb; 4096]);
    objs.extend(objects(200, 10, 600, 9));
    build_and_check(p, &objs);
    // A first object larger than a starting block: the root is an indirect block at once.
    let img = build_and_check(p, &[vec![1u8; 3000], vec![2u8; 50]]);
    assert!(img.header().root_rows > 0);
}

#[test]
fn tiny_objects_live_in_their_ids() {
    let p = FractalHeapParams::dense_links();
    let mut b = FractalHeapBuilder::new(p, Sizes::EIGHT).unwrap();
    let id = b.insert(b"abc").unwrap();
    assert_eq!(id, [0x22, b'a', b'b', b'c', 0, 0, 0]);
    assert_eq!(b.insert(b"abcdef").unwrap()[0], 0x25);
    assert_eq!(b.insert(b"abcdefg").unwrap()[0], 0x00); // managed
    let img = build_and_check(
        FractalHeapParams {
            heap_id_len: 22,
            ..p
        },
        &objects(50, 1, 40, 3),
    );
    assert!(img.header().tiny_object_count > 0);
}

#[test]
fn an_empty_heap_has_only_a_header() {
    let b = FractalHeapBuilder::new(FractalHeapParams::dense_attributes(), Sizes::EIGHT).unwrap();
    let img = finish(b);
    assert_eq!(img.heap.blocks.len(), 1);
    let h = img.header();
    assert_eq!(h.root(), RootBlock::Empty);
    assert_eq!((h.managed_space, h.managed_free_space), (0, 0));
}

#[test]
fn limits_are_typed_errors() {
    let p = FractalHeapParams::dense_links();
    let mut b = FractalHeapBuilder::new(p, Sizes::EIGHT).unwrap();
    b.insert(&[1; 100]).unwrap();
    let before = b.header().clone();
    for bad in [vec![], vec![0u8; 4097], vec![0u8; 100_000]] {
        assert!(matches!(
            b.insert(&bad),
            Err(FormatError::Unsupported { .. })
        ));
    }
    assert_eq!(b.header(), &before);
    // A heap that fills up: 11-bit address space, 16-byte blocks, width 2.
    let small = FractalHeapParams {
        table_width: 2,
        start_block_size: 64,
        max_direct_block_size: 128,
        max_heap_size_bits: 10,
        starting_root_rows: 1,
        max_managed_object_size: 64,
        heap_id_len: 4,
        checksum_direct_blocks: false,
    };
    let mut b = FractalHeapBuilder::new(small, Sizes::EIGHT).unwrap();
    let mut stored = Vec::new();
    let err = loop {
        match b.insert(&[7u8; 40]) {
            Ok(id) => stored.push(id),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, FormatError::Unsupported { .. }), "{err:?}");
    assert!(!stored.is_empty());
    // Still usable after the error: what was stored reads back.
    let img = finish(b);
    let h = img.header();
    let (direct, _) = img.blocks(&h);
    for id in &stored {
        assert_eq!(read(&h, &direct, id), [7u8; 40]);
    }
    // Invalid parameters.
    for bad in [
        FractalHeapParams {
            table_width: 3,
            ..p
        },
        FractalHeapParams {
            max_managed_object_size: 65536,
            ..p
        },
        FractalHeapParams {
            heap_id_len: 5,
            ..p
        },
        FractalHeapParams {
            max_heap_size_bits: 40,
            ..p
        },
    ] {
        let sizes = Sizes::new(8, 4, "t", 0).unwrap();
        assert!(FractalHeapBuilder::new(bad, sizes).is_err(), "{bad:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn random_objects_read_back(
        objs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..1500), 1..120),
        attrs in any::<bool>(),
    ) {
        let p = if attrs {
            FractalHeapParams::dense_attributes()
        } else {
            FractalHeapParams::dense_links()
        };
        build_and_check(p, &objs);
    }
}
