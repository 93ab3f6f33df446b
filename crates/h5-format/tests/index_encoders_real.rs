//! The encoders of heaps, symbol table nodes, v1 and v2 B-trees, fixed and extensible arrays
//! against the structures libhdf5 1.14.4 wrote into the files of `tests/data`: every
//! structure found by its signature is decoded, encoded again and compared byte for byte with
//! the file.

use h5_format::btree1::{BtreeV1Node, NodeType, node_len};
use h5_format::btree2::{Btree2Header, Btree2Node, Btree2Type, RecordContext};
use h5_format::extensible_array::{
    ExtensibleArrayDataBlock, ExtensibleArrayHeader, ExtensibleArrayIndexBlock,
    ExtensibleArraySuperBlock,
};
use h5_format::fixed_array::{FixedArrayDataBlock, FixedArrayHeader, FixedArraySlot};
use h5_format::heap::global::GlobalHeapCollection;
use h5_format::heap::local::{LocalHeapHeader, encode_data_segment, free_blocks, pack_names};
use h5_format::symbol_node::SymbolTableNode;
use h5_format::{Sizes, UNDEFINED_ADDRESS};

const S: Sizes = Sizes::EIGHT;

fn file(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn at(f: &[u8], addr: u64, len: u64) -> &[u8] {
    &f[addr as usize..(addr + len) as usize]
}

fn find_all(f: &[u8], sig: &[u8; 4]) -> Vec<u64> {
    f.windows(4)
        .enumerate()
        .filter(|(_, w)| w == sig)
        .map(|(i, _)| i as u64)
        .collect()
}

/// The files with a version 0 superblock (default sizes, group K 4/16, chunk K 32).
const OLD_FILES: [&str; 5] = [
    "earliest.h5",
    "earliest_chunked.h5",
    "earliest_group.h5",
    "earliest_vlen.h5",
    "groups.h5",
];

#[test]
fn local_heaps_are_byte_exact() {
    let mut seen = 0;
    for name in OLD_FILES {
        let f = file(name);
        for a in find_all(&f, b"HEAP") {
            let hb = at(&f, a, LocalHeapHeader::encoded_len(S) as u64);
            let h = LocalHeapHeader::decode(hb, S, a).unwrap();
            assert_eq!(h.encode(S), hb, "{name} heap at {a:#x}");
            let seg = at(&f, h.data_segment_address, h.data_segment_size);
            let free = free_blocks(seg, S, h.free_list_head).unwrap();
            // Everything before the first free block is names; libhdf5 zero-fills the free
            // blocks beyond their two fields.
            let used_end = free
                .iter()
                .map(|b| b.offset)
                .min()
                .unwrap_or(seg.len() as u64);
            assert!(free.iter().all(|b| b.offset >= used_end));
            let e = encode_data_segment(&seg[..used_end as usize], h.data_segment_size, S, &free)
                .unwrap();
            assert_eq!(e, seg, "{name} heap data segment at {a:#x}");
            seen += 1;
        }
    }
    assert!(seen >= 5, "{seen} heaps");
    // The root group heap of earliest_group.h5 holds "" and "g", as pack_names lays them out.
    let f = file("earliest_group.h5");
    let h = LocalHeapHeader::decode(at(&f, 0x2a8, 32), S, 0x2a8).unwrap();
    let seg = at(&f, h.data_segment_address, h.data_segment_size);
    let (names, offsets) = pack_names(&[b"g"]);
    assert_eq!(offsets, vec![8]);
    assert_eq!(&seg[..names.len()], names.as_slice());
}

#[test]
fn symbol_table_nodes_are_byte_exact() {
    let mut seen = 0;
    for name in OLD_FILES {
        let f = file(name);
        let len = SymbolTableNode::node_len(S, 4) as u64;
        for a in find_all(&f, b"SNOD") {
            let b = at(&f, a, len);
            let n = SymbolTableNode::decode(b, S, a).unwrap();
            assert_eq!(n.encode(S, 4).unwrap(), b, "{name} SNOD at {a:#x}");
            seen += 1;
        }
    }
    assert!(seen >= 5, "{seen} nodes");
}

#[test]
fn v1_btree_nodes_are_byte_exact() {
    let (mut groups, mut chunks) = (0, 0);
    for name in OLD_FILES {
        let f = file(name);
        for a in find_all(&f, b"TREE") {
            let (k, dims, ty) = match f[a as usize + 4] {
                0 => (16, None, NodeType::Group),
                // Chunk trees: earliest.h5 has a rank-1 dataset, earliest_chunked.h5 a rank-2
                // one (keys have one dimension more).
                _ => (
                    32,
                    Some(if name == "earliest.h5" { 2 } else { 3 }),
                    NodeType::RawData,
                ),
            };
            let len = node_len(S, k, ty, dims.unwrap_or(0)).unwrap() as u64;
            let b = at(&f, a, len);
            let n = BtreeV1Node::decode(b, S, a, dims).unwrap();
            assert!(n.encode(S, k).unwrap() == b, "{name} TREE at {a:#x}");
            if dims.is_some() {
                chunks += 1;
            } else {
                groups += 1;
            }
        }
    }
    assert!(
        groups >= 3 && chunks >= 3,
        "{groups} group, {chunks} chunk nodes"
    );
}

#[test]
fn global_heap_collection_is_byte_exact() {
    let f = file("earliest_vlen.h5");
    let a = find_all(&f, b"GCOL")[0];
    let n = GlobalHeapCollection::needed_len(at(&f, a, 16), S, a).unwrap() as u64;
    let b = at(&f, a, n);
    let c = GlobalHeapCollection::decode(b, S, a).unwrap();
    assert_eq!(c.encode(S).unwrap(), b);
    // The same objects in a collection built the library's way.
    let d = GlobalHeapCollection::with_objects(S, c.objects.clone()).unwrap();
    assert_eq!(d, c);
}

/// The record context of a v2 B-tree, derived from its header (chunk trees: the rank from
/// the record size, which also fixes the filtered chunk size width).
fn context(h: &Btree2Header) -> RecordContext {
    let mut ctx = RecordContext::new(S);
    let rs = usize::from(h.record_size);
    let o = usize::from(S.offset);
    match h.tree_type {
        Btree2Type::Chunks => ctx.rank = (rs - o) / 8,
        Btree2Type::FilteredChunks => {
            ctx.rank = (rs - o - 4 - 1) / 8;
            ctx.chunk_size_len = rs - o - 4 - 8 * ctx.rank;
        }
        _ => {}
    }
    assert_eq!(ctx.record_size(h.tree_type), rs);
    ctx
}

#[test]
fn v2_btrees_are_byte_exact() {
    let (mut headers, mut leaves, mut internals) = (0, 0, 0);
    for name in ["btree2.h5", "latest_links.h5", "latest_dense_attrs.h5"] {
        let f = file(name);
        for a in find_all(&f, b"BTHD") {
            let hb = at(&f, a, Btree2Header::encoded_len(S) as u64);
            let h = Btree2Header::decode(hb, S, a).unwrap();
            assert_eq!(h.encode(S).unwrap(), hb, "{name} BTHD at {a:#x}");
            assert_eq!(
                Btree2Header::new(S, a, h.params(), h.depth, h.root).unwrap(),
                h
            );
            headers += 1;
            let ctx = context(&h);
            if h.root.address == UNDEFINED_ADDRESS {
                continue;
            }
            let mut stack = vec![(h.root.address, h.depth, h.root.records)];
            while let Some((addr, depth, n)) = stack.pop() {
                let b = at(&f, addr, u64::from(h.node_size));
                let node = Btree2Node::decode(b, &h, depth, n, &ctx, addr).unwrap();
                assert_eq!(
                    node.encode(&h, &ctx).unwrap(),
                    b,
                    "{name} node at {addr:#x} (depth {depth})"
                );
                if depth == 0 {
                    leaves += 1;
                } else {
                    internals += 1;
                }
                for c in &node.children {
                    stack.push((c.address, depth - 1, c.records));
                }
            }
        }
    }
    assert!(
        headers >= 4 && leaves >= 4 && internals >= 1,
        "{headers} headers, {leaves} leaves, {internals} internal nodes"
    );
}

#[test]
fn fixed_arrays_are_byte_exact() {
    let f = file("farray.h5");
    let (mut blocks, mut pages) = (0, 0);
    for a in find_all(&f, b"FAHD") {
        let hb = at(&f, a, FixedArrayHeader::encoded_len(S) as u64);
        let h = FixedArrayHeader::decode(hb, S, a).unwrap();
        assert_eq!(h.encode(S), hb, "FAHD at {a:#x}");
        if h.data_block_address == UNDEFINED_ADDRESS {
            continue;
        }
        let db = at(&f, h.data_block_address, h.data_block_len(S));
        let d = FixedArrayDataBlock::decode(db, &h, S, h.data_block_address).unwrap();
        assert_eq!(d.encode(&h, S).unwrap(), db, "FADB of {a:#x}");
        blocks += 1;
        for p in 0..h.page_count() {
            if !d.page_initialized(p) {
                continue;
            }
            let Some(FixedArraySlot::Page {
                address,
                len,
                elements,
                ..
            }) = h.locate(S, p * h.page_elements())
            else {
                panic!("page {p}")
            };
            let pb = at(&f, address, len as u64);
            let e =
                h5_format::fixed_array::decode_page(pb, &h.format, S, elements, address).unwrap();
            assert_eq!(
                h5_format::fixed_array::encode_page(&h.format, S, &e).unwrap(),
                pb
            );
            pages += 1;
        }
    }
    assert!(
        blocks >= 2 && pages >= 1,
        "{blocks} data blocks, {pages} pages"
    );
}

/// A data block to check: its address, elements, and for blocks of a super block that
/// super block's page bitmap with the block's first bit in it.
type DataBlockRef = (u64, u64, Option<(Vec<u8>, u64)>);

#[test]
fn extensible_arrays_are_byte_exact() {
    let f = file("earray.h5");
    let (mut ibs, mut sbs, mut dbs, mut pages) = (0, 0, 0, 0);
    for a in find_all(&f, b"EAHD") {
        let hb = at(&f, a, ExtensibleArrayHeader::encoded_len(S) as u64);
        let h = ExtensibleArrayHeader::decode(hb, S, a).unwrap();
        assert_eq!(h.encode(S), hb, "EAHD at {a:#x}");
        assert_eq!(
            ExtensibleArrayHeader::new(S, a, h.params(), h.stats, h.index_block_address).unwrap(),
            h
        );
        if h.index_block_address == UNDEFINED_ADDRESS {
            continue;
        }
        let ia = h.index_block_address;
        let ib_bytes = at(&f, ia, h.index_block_len(S));
        let ib = ExtensibleArrayIndexBlock::decode(ib_bytes, &h, S, ia).unwrap();
        assert_eq!(ib.encode(&h, S).unwrap(), ib_bytes, "EAIB at {ia:#x}");
        ibs += 1;
        let mut data_blocks: Vec<DataBlockRef> = Vec::new();
        for (g, &da) in ib.data_block_addresses.iter().enumerate() {
            let info = h
                .super_blocks
                .iter()
                .find(|s| {
                    (s.start_data_block..s.start_data_block + s.data_blocks).contains(&(g as u64))
                })
                .unwrap();
            data_blocks.push((da, info.data_block_elements, None));
        }
        for (slot, &sa) in ib.super_block_addresses.iter().enumerate() {
            if sa == UNDEFINED_ADDRESS {
                continue;
            }
            let index = h.index_block_super_blocks + slot;
            let sb_bytes = at(&f, sa, h.super_block_len(S, index));
            let sb = ExtensibleArraySuperBlock::decode(sb_bytes, &h, S, index, sa).unwrap();
            assert_eq!(sb.encode(&h, S).unwrap(), sb_bytes, "EASB at {sa:#x}");
            sbs += 1;
            let info = h.super_blocks[index];
            let npages = h.pages_per_data_block(info.data_block_elements);
            for (k, &da) in sb.data_block_addresses.iter().enumerate() {
                data_blocks.push((
                    da,
                    info.data_block_elements,
                    Some((sb.page_bitmap.clone(), k as u64 * npages)),
                ));
            }
        }
        for (da, n, bitmap) in data_blocks {
            if da == UNDEFINED_ADDRESS {
                continue;
            }
            let db_bytes = at(&f, da, h.data_block_len(S, n));
            let db = ExtensibleArrayDataBlock::decode(db_bytes, &h, S, n, da).unwrap();
            assert_eq!(db.encode(&h, S, n).unwrap(), db_bytes, "EADB at {da:#x}");
            dbs += 1;
            for p in 0..h.pages_per_data_block(n) {
                let init = bitmap.as_ref().is_none_or(|(bm, first)| {
                    let bit = first + p;
                    bm[(bit / 8) as usize] & (0x80 >> (bit % 8)) != 0
                });
                if !init {
                    continue;
                }
                let pa = h.page_address(S, da, p);
                let pb = at(&f, pa, h.page_len());
                let e = h5_format::extensible_array::decode_page(pb, &h, S, pa).unwrap();
                assert_eq!(
                    h5_format::extensible_array::encode_page(&h, S, &e).unwrap(),
                    pb,
                    "page {p} of EADB at {da:#x}"
                );
                pages += 1;
            }
        }
    }
    assert!(
        ibs >= 1 && dbs >= 1,
        "{ibs} index, {sbs} super, {dbs} data blocks, {pages} pages"
    );
    eprintln!("{ibs} index, {sbs} super, {dbs} data blocks, {pages} pages");
}

mod round_trips {
    use super::*;
    use h5_format::btree1::{ChunkKey, Keys};
    use h5_format::heap::global::GlobalHeapObject;
    use h5_format::symbol_node::{ScratchPad, SymbolTableEntry};
    use proptest::prelude::*;

    fn addr() -> impl Strategy<Value = u64> {
        prop_oneof![Just(UNDEFINED_ADDRESS), 0..u64::MAX - 1]
    }

    fn entry() -> impl Strategy<Value = SymbolTableEntry> {
        (
            any::<u64>(),
            addr(),
            prop_oneof![
                Just(ScratchPad::None),
                (addr(), addr()).prop_map(|(b, h)| ScratchPad::SymbolTable {
                    btree_address: b,
                    heap_address: h
                }),
                any::<u32>().prop_map(|v| ScratchPad::SoftLink {
                    link_value_offset: v
                }),
            ],
        )
            .prop_map(|(n, o, scratch)| SymbolTableEntry {
                link_name_offset: n,
                object_header_address: o,
                scratch,
            })
    }

    proptest! {
        #[test]
        fn symbol_table_nodes(entries in proptest::collection::vec(entry(), 0..9)) {
            let n = SymbolTableNode { entries };
            let b = n.encode(S, 4).unwrap();
            prop_assert_eq!(b.len(), SymbolTableNode::node_len(S, 4));
            prop_assert_eq!(SymbolTableNode::decode(&b, S, 0).unwrap(), n);
        }

        #[test]
        fn group_btree_nodes(keys in proptest::collection::vec(any::<u64>(), 1..34),
                             level in any::<u8>(), left in addr(), right in addr()) {
            let children = (0..keys.len() as u64 - 1).map(|i| 0x1000 + i).collect();
            let n = BtreeV1Node {
                node_type: NodeType::Group,
                level,
                left_sibling: left,
                right_sibling: right,
                keys: Keys::Group(keys),
                children,
            };
            let b = n.encode(S, 16).unwrap();
            prop_assert_eq!(BtreeV1Node::decode(&b, S, 0, None).unwrap(), n);
        }

        #[test]
        fn chunk_btree_nodes(n in 0usize..6, dims in 1usize..5, seed in any::<u64>()) {
            let keys = (0..=n as u64)
                .map(|i| ChunkKey {
                    chunk_size: (seed ^ i) as u32,
                    filter_mask: i as u32,
                    offsets: (0..dims as u64).map(|d| seed.wrapping_mul(d + i)).collect(),
                })
                .collect();
            let node = BtreeV1Node {
                node_type: NodeType::RawData,
                level: 0,
                left_sibling: UNDEFINED_ADDRESS,
                right_sibling: 0x10,
                keys: Keys::RawData(keys),
                children: (0..n as u64).map(|i| 0x2000 + i).collect(),
            };
            let b = node.encode(S, 32).unwrap();
            prop_assert_eq!(BtreeV1Node::decode(&b, S, 0, Some(dims)).unwrap(), node);
        }

        #[test]
        fn global_heap_collections(datas in proptest::collection::vec(
                                       (any::<u16>(), proptest::collection::vec(any::<u8>(), 0..300)),
                                       0..20)) {
            let objects = datas
                .into_iter()
                .enumerate()
                .map(|(i, (rc, data))| GlobalHeapObject {
                    index: i as u16 + 1,
                    reference_count: rc,
                    data,
                })
                .collect();
            let c = GlobalHeapCollection::with_objects(S, objects).unwrap();
            let b = c.encode(S).unwrap();
            prop_assert_eq!(b.len() as u64, c.collection_size);
            prop_assert_eq!(GlobalHeapCollection::decode(&b, S, 0).unwrap(), c);
        }
    }
}
