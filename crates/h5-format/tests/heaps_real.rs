//! Heaps, symbol table nodes and v1 B-trees decoded from real files written by HDF5 1.14.4
//! (h5py 3.12.1); the files and the script that made them are in `tests/data/`
//! (`make_heap_fixtures.py` says what each file holds).

use std::collections::BTreeMap;

use h5_format::btree1::{BtreeV1Node, Keys, NodeType, node_len};
use h5_format::heap::fractal::{
    ChildKind, FractalDirectBlock, FractalHeapHeader, FractalIndirectBlock, HeapId, HugeId,
    RootBlock,
};
use h5_format::heap::global::{GlobalHeapCollection, GlobalHeapId};
use h5_format::heap::local::LocalHeapHeader;
use h5_format::symbol_node::{ScratchPad, SymbolTableEntry, SymbolTableNode};
use h5_format::{Reader, Sizes};

fn file(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn at(f: &[u8], addr: u64) -> &[u8] {
    &f[addr as usize..]
}

/// Addresses where the 4-byte `sig` occurs.
fn find_all(f: &[u8], sig: &[u8; 4]) -> Vec<u64> {
    f.windows(4)
        .enumerate()
        .filter(|(_, w)| w == sig)
        .map(|(i, _)| i as u64)
        .collect()
}

/// Superblock version 0: sizes at bytes 13/14, group leaf K at 16, internal K at 18, the root
/// group's symbol table entry at 56 (after four addresses).
struct Sb0 {
    sizes: Sizes,
    leaf_k: u16,
    internal_k: u16,
    root: SymbolTableEntry,
}

fn superblock0(f: &[u8]) -> Sb0 {
    assert_eq!(&f[..8], b"\x89HDF\r\n\x1a\n");
    assert_eq!(f[8], 0);
    let sizes = Sizes::new(f[13], f[14], "superblock", 0).unwrap();
    let leaf_k = u16::from_le_bytes([f[16], f[17]]);
    let internal_k = u16::from_le_bytes([f[18], f[19]]);
    let mut r = Reader::new(&f[24 + 4 * usize::from(sizes.offset)..], "superblock", 0);
    let root = SymbolTableEntry::decode(&mut r, sizes).unwrap();
    Sb0 {
        sizes,
        leaf_k,
        internal_k,
        root,
    }
}

/// Every entry of an old-style group, with its name, walking the B-tree from `btree`.
fn group_entries(
    f: &[u8],
    sb: &Sb0,
    btree: u64,
    heap: u64,
) -> (Vec<(String, SymbolTableEntry)>, Vec<u8>) {
    let h = LocalHeapHeader::decode(at(f, heap), sb.sizes, heap).unwrap();
    let seg = &at(f, h.data_segment_address)[..h.data_segment_size as usize];
    let len = node_len(sb.sizes, sb.internal_k, NodeType::Group, 0).unwrap();
    let mut out = Vec::new();
    let mut stack = vec![btree];
    while let Some(a) = stack.pop() {
        let n = BtreeV1Node::decode(&at(f, a)[..len], sb.sizes, a, None).unwrap();
        let Keys::Group(keys) = &n.keys else { panic!() };
        assert_eq!(keys.len(), n.children.len() + 1);
        if n.level > 0 {
            stack.extend(n.children.iter().rev());
            continue;
        }
        for &c in &n.children {
            let snod_len = SymbolTableNode::node_len(sb.sizes, sb.leaf_k);
            let s = SymbolTableNode::decode(&at(f, c)[..snod_len], sb.sizes, c).unwrap();
            for e in s.entries {
                let name = h.name_at(seg, e.link_name_offset).unwrap();
                out.push((String::from_utf8(name.to_vec()).unwrap(), e));
            }
        }
    }
    (out, seg.to_vec())
}

#[test]
fn old_style_group_local_heap_snods_and_btree() {
    let f = file("earliest_group.h5");
    let sb = superblock0(&f);
    assert_eq!((sb.leaf_k, sb.internal_k), (4, 16));
    let ScratchPad::SymbolTable {
        btree_address,
        heap_address,
    } = sb.root.scratch
    else {
        panic!("root entry caches its symbol table")
    };
    let (root, _) = group_entries(&f, &sb, btree_address, heap_address);
    assert_eq!(root.len(), 1);
    assert_eq!(root[0].0, "g");
    let ScratchPad::SymbolTable {
        btree_address,
        heap_address,
    } = root[0].1.scratch
    else {
        panic!("g caches its symbol table")
    };
    let (g, seg) = group_entries(&f, &sb, btree_address, heap_address);
    let names: Vec<&str> = g.iter().map(|(n, _)| n.as_str()).collect();
    let mut expected: Vec<String> = (0..16).map(|i| format!("soft_{i:02}")).collect();
    expected.extend((0..4).map(|i| format!("sub_{i}")));
    assert_eq!(names, expected, "20 members in name order");
    for (name, e) in &g {
        match e.scratch {
            ScratchPad::SoftLink {
                link_value_offset: value_offset,
            } => {
                let v = h5_format::heap::local::name_at(&seg, u64::from(value_offset)).unwrap();
                assert_eq!(v, format!("/target_{}", &name[5..]).as_bytes());
            }
            ScratchPad::SymbolTable { .. } => assert!(name.starts_with("sub_")),
            ScratchPad::None => panic!("{name}: nothing cached"),
        }
    }
}

#[test]
fn chunk_btree() {
    let f = file("earliest_chunked.h5");
    let sb = superblock0(&f);
    // Chunk nodes are those with node type 1; rank 2 -> 3 key dimensions; K = 32.
    let nodes: Vec<u64> = find_all(&f, b"TREE")
        .into_iter()
        .filter(|&a| f[a as usize + 4] == 1)
        .collect();
    let len = node_len(sb.sizes, 32, NodeType::RawData, 3).unwrap();
    let decoded: Vec<BtreeV1Node> = nodes
        .iter()
        .map(|&a| BtreeV1Node::decode(&at(&f, a)[..len], sb.sizes, a, Some(3)).unwrap())
        .collect();
    let roots: Vec<&BtreeV1Node> = decoded.iter().filter(|n| n.level == 1).collect();
    assert_eq!(roots.len(), 1, "100 chunks need two levels with K = 32");
    let mut chunks = BTreeMap::new();
    for n in decoded.iter().filter(|n| n.level == 0) {
        assert!(
            roots[0]
                .children
                .contains(&nodes[decoded.iter().position(|x| x == n).unwrap()])
        );
        let Keys::RawData(keys) = &n.keys else {
            panic!()
        };
        for (k, &child) in keys.iter().zip(&n.children) {
            assert_eq!(k.chunk_size, 64);
            assert_eq!(k.filter_mask, 0);
            assert_eq!(k.offsets[2], 0);
            chunks.insert((k.offsets[0], k.offsets[1]), child);
        }
    }
    assert_eq!(chunks.len(), 100);
    for ((r0, c0), addr) in chunks {
        assert!(r0 % 4 == 0 && c0 % 4 == 0 && r0 < 40 && c0 < 40);
        let d = at(&f, addr);
        for (i, v) in d[..64].chunks(4).enumerate() {
            let (r, c) = (r0 + i as u64 / 4, c0 + i as u64 % 4);
            assert_eq!(i32::from_le_bytes(v.try_into().unwrap()) as u64, r * 40 + c);
        }
    }
}

#[test]
fn global_heap_collection() {
    let f = file("earliest_vlen.h5");
    let sizes = superblock0(&f).sizes;
    let addrs = find_all(&f, b"GCOL");
    assert_eq!(addrs.len(), 1);
    let a = addrs[0];
    let n = GlobalHeapCollection::needed_len(&at(&f, a)[..16], sizes, a).unwrap();
    assert_eq!(n, 4096);
    let c = GlobalHeapCollection::decode(&at(&f, a)[..n], sizes, a).unwrap();
    let mut got: Vec<String> = c
        .objects
        .iter()
        .map(|o| String::from_utf8(o.data.clone()).unwrap())
        .collect();
    got.sort();
    let mut expected: Vec<String> = (0..10)
        .map(|i| format!("vlen_{}", i.to_string().repeat(i + 1)))
        .collect();
    expected.sort();
    assert_eq!(got, expected);
    let used: u64 = c
        .objects
        .iter()
        .map(|o| 16 + o.data.len().div_ceil(8) as u64 * 8)
        .sum();
    assert_eq!(c.free_space, 4096 - 16 - used);
    let first = &c.objects[0];
    assert_eq!(c.get(u32::from(first.index)), Some(first.data.as_slice()));
    // The dataset's elements: a 4-byte sequence length, then a global heap ID naming this
    // collection. Find them by the collection's address and resolve each, in element order.
    let mut elements = Vec::new();
    for p in 4..f.len() - 12 {
        if f[p..p + 8] == a.to_le_bytes() {
            let id = GlobalHeapId::decode(&f[p..], sizes, p as u64).unwrap();
            assert_eq!(id.collection_address, a);
            let data = c.get(id.index).unwrap();
            let len = u32::from_le_bytes(f[p - 4..p].try_into().unwrap());
            assert_eq!(data.len(), len as usize);
            elements.push(String::from_utf8(data.to_vec()).unwrap());
        }
    }
    let in_order: Vec<String> = (0..10)
        .map(|i| format!("vlen_{}", i.to_string().repeat(i + 1)))
        .collect();
    assert_eq!(elements, in_order);
    // Corruption sweep over the real collection: never a panic.
    for cut in 0..n {
        assert!(GlobalHeapCollection::decode(&at(&f, a)[..cut], sizes, a).is_err());
    }
}

/// The heap IDs of the name index (v2 B-tree, record type 5: 4-byte hash + 7-byte heap ID):
/// records of the root internal node and of its leaves (depth 1).
fn name_index_ids(f: &[u8]) -> Vec<[u8; 7]> {
    let hd = find_all(f, b"BTHD")[0] as usize;
    let depth = u16::from_le_bytes([f[hd + 12], f[hd + 13]]);
    assert_eq!(depth, 1);
    let root = u64::from_le_bytes(f[hd + 16..hd + 24].try_into().unwrap()) as usize;
    let nrec = u16::from_le_bytes([f[hd + 24], f[hd + 25]]) as usize;
    assert_eq!(&f[root..root + 4], b"BTIN");
    let rec = |base: usize, i: usize| -> [u8; 7] {
        f[base + 6 + 11 * i + 4..base + 6 + 11 * i + 11]
            .try_into()
            .unwrap()
    };
    let mut ids: Vec<[u8; 7]> = (0..nrec).map(|i| rec(root, i)).collect();
    // Child pointers: address (8) + record count (1 byte for 512-byte nodes).
    let mut p = root + 6 + 11 * nrec;
    for _ in 0..=nrec {
        let child = u64::from_le_bytes(f[p..p + 8].try_into().unwrap()) as usize;
        let n = f[p + 8] as usize;
        p += 9;
        assert_eq!(&f[child..child + 4], b"BTLF");
        ids.extend((0..n).map(|i| rec(child, i)));
    }
    ids
}

#[test]
fn fractal_heap_of_a_new_style_group() {
    let f = file("latest_links.h5");
    let sizes = Sizes::EIGHT;
    let a = find_all(&f, b"FRHP")[0];
    let total = FractalHeapHeader::total_len(&at(&f, a)[..9], sizes, a).unwrap();
    let h = FractalHeapHeader::decode(&at(&f, a)[..total], sizes, a).unwrap();
    assert_eq!(h.managed_object_count, 100);
    assert!(h.checksum_direct_blocks);
    let RootBlock::Indirect { address, rows } = h.root() else {
        panic!("100 links need more than one direct block")
    };
    let ib_len = h.indirect_block_len(rows);
    let root = FractalIndirectBlock::decode(&at(&f, address)[..ib_len], &h, address, rows).unwrap();
    assert_eq!(root.block_offset, 0);

    let ids = name_index_ids(&f);
    assert_eq!(ids.len(), 100);
    let mut names = Vec::new();
    for id in &ids {
        let HeapId::Managed { offset, len } = HeapId::decode(id, &h).unwrap() else {
            panic!("link messages are managed objects")
        };
        let loc = h.table.locate(0, root.rows, offset).unwrap();
        assert_eq!(loc.kind, ChildKind::Direct);
        let da = root.child_address(loc.entry).unwrap();
        let size = loc.block_size as usize;
        let d = FractalDirectBlock::decode(&at(&f, da)[..size], &h, da, loc.block_size).unwrap();
        assert_eq!(d.block_offset, loc.block_offset);
        let obj = d.object(offset, len).unwrap();
        // Link message version 1, flags 0 (1-byte name length), name, hard link address.
        assert_eq!(obj[0], 1);
        let n = obj[2] as usize;
        names.push(String::from_utf8(obj[3..3 + n].to_vec()).unwrap());
    }
    names.sort();
    let expected: Vec<String> = (0..100).map(|i| format!("link_{i:03}")).collect();
    assert_eq!(names, expected);

    // Corruption sweeps over the real structures: errors, never panics.
    let hb = &at(&f, a)[..total];
    for cut in 0..total {
        assert!(FractalHeapHeader::decode(&hb[..cut], sizes, a).is_err());
    }
    for i in 0..total {
        let mut x = hb.to_vec();
        x[i] ^= 0x80;
        assert!(FractalHeapHeader::decode(&x, sizes, a).is_err(), "byte {i}");
    }
    let ib = &at(&f, address)[..ib_len];
    for cut in 0..ib_len {
        assert!(FractalIndirectBlock::decode(&ib[..cut], &h, address, rows).is_err());
    }
    let da = root.direct[0].address;
    let db = &at(&f, da)[..512];
    for cut in 0..512 {
        assert!(FractalDirectBlock::decode(&db[..cut], &h, da, 512).is_err());
    }
    for i in (0..512).step_by(7) {
        let mut x = db.to_vec();
        x[i] ^= 0x01;
        assert!(
            FractalDirectBlock::decode(&x, &h, da, 512).is_err(),
            "byte {i}"
        );
    }
}

#[test]
fn real_structures_survive_truncation() {
    let f = file("earliest_group.h5");
    let sb = superblock0(&f);
    for a in find_all(&f, b"SNOD") {
        let n = SymbolTableNode::node_len(sb.sizes, sb.leaf_k);
        let full = &at(&f, a)[..n];
        let count = u16::from_le_bytes([full[6], full[7]]) as usize;
        for cut in 0..8 + count * 40 {
            assert!(SymbolTableNode::decode(&full[..cut], sb.sizes, a).is_err());
        }
    }
    let len = node_len(sb.sizes, sb.internal_k, NodeType::Group, 0).unwrap();
    for a in find_all(&f, b"TREE") {
        let full = &at(&f, a)[..len];
        let n = BtreeV1Node::decode(full, sb.sizes, a, None).unwrap();
        let used = 24 + n.children.len() * 16 + 8;
        for cut in 0..used {
            assert!(BtreeV1Node::decode(&full[..cut], sb.sizes, a, None).is_err());
        }
    }
    for a in find_all(&f, b"HEAP") {
        for cut in 0..32 {
            assert!(LocalHeapHeader::decode(&at(&f, a)[..cut], sb.sizes, a).is_err());
        }
    }
}

#[test]
fn fractal_heap_with_a_huge_object() {
    let f = file("latest_dense_attrs.h5");
    let sizes = Sizes::EIGHT;
    let a = find_all(&f, b"FRHP")[0];
    let total = FractalHeapHeader::total_len(&at(&f, a)[..9], sizes, a).unwrap();
    let h = FractalHeapHeader::decode(&at(&f, a)[..total], sizes, a).unwrap();
    assert_eq!((h.heap_id_len, h.table.max_heap_size_bits), (8, 40));
    assert_eq!((h.huge_object_count, h.managed_object_count), (1, 10));
    let RootBlock::Direct { address, size, .. } = h.root() else {
        panic!("ten small attributes fit in the root direct block")
    };
    let d =
        FractalDirectBlock::decode(&at(&f, address)[..size as usize], &h, address, size).unwrap();
    // Two v2 B-trees: the name index (record type 8: heap ID (8), flags (1), creation order
    // (4), hash (4)) and the huge objects (type 1: address, length, ID). Both are one leaf.
    let mut names = Vec::new();
    let mut huge_keys = Vec::new();
    let mut huge_records = BTreeMap::new();
    for hd in find_all(&f, b"BTHD") {
        let hd = hd as usize;
        let ty = f[hd + 5];
        let rec_len = u16::from_le_bytes([f[hd + 10], f[hd + 11]]) as usize;
        let root = u64::from_le_bytes(f[hd + 16..hd + 24].try_into().unwrap()) as usize;
        let nrec = u16::from_le_bytes([f[hd + 24], f[hd + 25]]) as usize;
        assert_eq!(&f[root..root + 4], b"BTLF");
        for i in 0..nrec {
            let r = &f[root + 6 + i * rec_len..root + 6 + (i + 1) * rec_len];
            if ty == 1 {
                let w = |k: usize| u64::from_le_bytes(r[8 * k..8 * k + 8].try_into().unwrap());
                huge_records.insert(w(2), (w(0), w(1)));
                continue;
            }
            assert_eq!(ty, 8);
            match HeapId::decode(&r[..8], &h).unwrap() {
                HeapId::Managed { offset, len } => {
                    let msg = d.object(offset, len).unwrap();
                    // Attribute message version 3: the name starts at byte 9.
                    let n = u16::from_le_bytes([msg[2], msg[3]]) as usize;
                    names.push(String::from_utf8(msg[9..9 + n - 1].to_vec()).unwrap());
                }
                HeapId::Huge(HugeId::BtreeKey(k)) => huge_keys.push(k),
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    names.sort();
    let expected: Vec<String> = (0..10).map(|i| format!("a{i}")).collect();
    assert_eq!(names, expected);
    assert_eq!(huge_keys, vec![1]);
    let (addr, len) = huge_records[&1];
    let msg = &f[addr as usize..(addr + len) as usize];
    assert_eq!(&msg[9..13], b"big\0");
    // The data (2000 int32 counting up) ends the message.
    let data = &msg[msg.len() - 8000..];
    assert!(
        data.chunks(4)
            .enumerate()
            .all(|(i, v)| { i32::from_le_bytes(v.try_into().unwrap()) == i as i32 })
    );
}
