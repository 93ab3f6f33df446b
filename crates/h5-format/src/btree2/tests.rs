//! Hand-built v2 B-tree images (from the format specification) and corruption tests.

use super::testutil::{le, seal, sweep};
use super::*;
use crate::FormatError;
use crate::writer::Writer;

const S4: Sizes = Sizes {
    offset: 4,
    length: 4,
};

#[allow(clippy::too_many_arguments)]
fn header_image(
    sizes: Sizes,
    t: u8,
    node_size: u32,
    record_size: u16,
    depth: u16,
    root: u64,
    root_records: u16,
    total: u64,
) -> Vec<u8> {
    let mut b = b"BTHD".to_vec();
    b.extend([0, t]);
    b.extend(node_size.to_le_bytes());
    b.extend(record_size.to_le_bytes());
    b.extend(depth.to_le_bytes());
    b.extend([100, 40]);
    b.extend(le(root, sizes.offset.into()));
    b.extend(root_records.to_le_bytes());
    b.extend(le(total, sizes.length.into()));
    seal(&mut b);
    b
}

/// A node image: signature, version, type, records, then the pointer bytes, checksum, and
/// zero padding to `node_size`. Returns the image and the used length.
fn node_image(
    sig: &[u8; 4],
    t: u8,
    records: &[Vec<u8>],
    pointers: &[u8],
    node_size: usize,
) -> (Vec<u8>, usize) {
    let mut b = sig.to_vec();
    b.extend([0, t]);
    for r in records {
        b.extend(r);
    }
    b.extend(pointers);
    seal(&mut b);
    let used = b.len();
    assert!(used <= node_size);
    b.resize(node_size, 0);
    (b, used)
}

fn chunk_record(addr: u64, scaled: [u64; 2]) -> Vec<u8> {
    let mut r = le(addr, 4);
    for s in scaled {
        r.extend(s.to_le_bytes());
    }
    r
}

#[test]
fn encoded_sizes_of_counts() {
    assert_eq!(limit_enc_size(0), 1);
    assert_eq!(limit_enc_size(1), 1);
    assert_eq!(limit_enc_size(255), 1);
    assert_eq!(limit_enc_size(256), 2);
    assert_eq!(limit_enc_size(65_535), 2);
    assert_eq!(limit_enc_size(65_536), 3);
    assert_eq!(limit_enc_size(u64::MAX), 8);
    assert_eq!(chunk_size_len(1), 2);
    assert_eq!(chunk_size_len(4), 2);
    assert_eq!(chunk_size_len(255), 2);
    assert_eq!(chunk_size_len(256), 3);
    assert_eq!(chunk_size_len(1 << 24), 5);
    assert_eq!(chunk_size_len(u64::MAX), 8);
}

/// The limits libhdf5 derives for its own trees: dense link names (512-byte nodes, 11-byte
/// records) and chunk indexes (2048-byte nodes, 24-byte records of a 2-D dataset).
#[test]
fn node_limits_follow_the_library() {
    let b = header_image(Sizes::EIGHT, 5, 512, 11, 2, 0x1000, 3, 1200);
    let h = Btree2Header::decode(&b, Sizes::EIGHT, 0).unwrap();
    assert_eq!(b.len(), Btree2Header::encoded_len(Sizes::EIGHT));
    assert_eq!(h.max_records_size, 1);
    let l: Vec<(u64, u64, u8)> = h
        .limits
        .iter()
        .map(|l| (l.max_records, l.cumulative_max_records, l.cumulative_size))
        .collect();
    // Leaf: (512-10)/11 = 45. Depth 1: pointer 8+1 = 9, (512-10-9)/(11+9) = 24,
    // 25·45+24 = 1149 (2 bytes). Depth 2: pointer 8+1+2 = 11, (512-10-11)/22 = 22,
    // 23·1149+22 = 26449.
    assert_eq!(l, vec![(45, 45, 0), (24, 1149, 2), (22, 26_449, 2)]);
    assert_eq!(h.pointer_len(Sizes::EIGHT, 1), 9);
    assert_eq!(h.pointer_len(Sizes::EIGHT, 2), 11);

    let b = header_image(Sizes::EIGHT, 10, 2048, 24, 1, 0x1000, 1, 144);
    let h = Btree2Header::decode(&b, Sizes::EIGHT, 0).unwrap();
    assert_eq!(h.limits[0].max_records, 84);
    assert_eq!(h.limits[1].max_records, 61);
    assert_eq!(h.limits[1].cumulative_max_records, 62 * 84 + 61);
    assert_eq!(h.tree_type, Btree2Type::Chunks);
    assert_eq!(h.root.records, 1);
    assert_eq!(h.root.total_records, 144);
}

#[test]
fn decodes_a_two_level_chunk_tree_with_small_sizes() {
    // Type 10, rank 2, 4-byte addresses: 20-byte records; 100-byte nodes: leaves hold 4,
    // depth-1 nodes hold (100-10-5)/25 = 3.
    let ctx = RecordContext::for_chunks(S4, 2, 64);
    assert_eq!(ctx.record_size(Btree2Type::Chunks), 20);
    let hb = header_image(S4, 10, 100, 20, 1, 0x300, 1, 3);
    sweep(&hb, hb.len(), |b| Btree2Header::decode(b, S4, 0x200));
    let h = Btree2Header::decode(&hb, S4, 0x200).unwrap();
    assert_eq!(h.limits[1].max_records, 3);
    assert_eq!(h.encode(S4).unwrap(), hb);
    assert_eq!(
        Btree2Header::new(S4, 0x200, h.params(), h.depth, h.root).unwrap(),
        h
    );

    let (leaf, used) = node_image(
        b"BTLF",
        10,
        &[chunk_record(0x1000, [0, 0]), chunk_record(0x2000, [0, 1])],
        &[],
        100,
    );
    sweep(&leaf, used, |b| {
        Btree2Node::decode(b, &h, 0, 2, &ctx, 0x400)
    });
    let n = Btree2Node::decode(&leaf, &h, 0, 2, &ctx, 0x400).unwrap();
    assert!(n.is_leaf());
    assert_eq!(n.encode(&h, &ctx).unwrap(), leaf);
    assert_eq!(
        n.records[1],
        Record::Chunk {
            address: 0x2000,
            scaled: vec![0, 1]
        }
    );

    // Root: one record between a 2-record leaf and an empty-but-valid 0-record leaf.
    let mut ptrs = le(0x400, 4);
    ptrs.push(2);
    ptrs.extend(le(0x500, 4));
    ptrs.push(0);
    let (root, used) = node_image(b"BTIN", 10, &[chunk_record(0x3000, [1, 0])], &ptrs, 100);
    sweep(&root, used, |b| {
        Btree2Node::decode(b, &h, 1, 1, &ctx, 0x300)
    });
    let n = Btree2Node::decode(&root, &h, 1, 1, &ctx, 0x300).unwrap();
    assert_eq!(n.encode(&h, &ctx).unwrap(), root);
    assert_eq!(
        n.children,
        vec![
            ChildPointer {
                address: 0x400,
                records: 2,
                total_records: 2
            },
            ChildPointer {
                address: 0x500,
                records: 0,
                total_records: 0
            }
        ]
    );
    // More records than the parent may claim, or a child claiming too many, are errors.
    assert!(Btree2Node::decode(&root, &h, 1, 4, &ctx, 0x300).is_err());
    assert!(Btree2Node::decode(&leaf, &h, 0, 5, &ctx, 0x400).is_err());
    // The wrong kind of node, or a depth the tree does not have.
    assert!(Btree2Node::decode(&leaf, &h, 1, 1, &ctx, 0x400).is_err());
    assert!(Btree2Node::decode(&root, &h, 0, 1, &ctx, 0x300).is_err());
    assert!(Btree2Node::decode(&root, &h, 2, 1, &ctx, 0x300).is_err());
    // A context of another rank disagrees with the record size.
    let ctx3 = RecordContext::for_chunks(S4, 3, 64);
    assert!(matches!(
        Btree2Node::decode(&leaf, &h, 0, 2, &ctx3, 0x400),
        Err(FormatError::Corrupted { .. })
    ));
}

#[test]
fn depth_two_pointers_carry_subtree_totals() {
    // Same tree shape, depth 2: depth-1 cumulative max 4·4+3 = 19 (1 byte), so depth-2
    // pointers are 4+1+1 bytes and depth-2 nodes hold (100-10-6)/26 = 3 records.
    let ctx = RecordContext::for_chunks(S4, 2, 64);
    let h = Btree2Header::decode(&header_image(S4, 10, 100, 20, 2, 0x300, 1, 25), S4, 0).unwrap();
    assert_eq!(h.limits[1].cumulative_max_records, 19);
    assert_eq!(h.limits[2].max_records, 3);
    let mut ptrs = Vec::new();
    for (addr, n, total) in [(0x400u64, 3u8, 15u8), (0x500, 2, 9)] {
        ptrs.extend(le(addr, 4));
        ptrs.extend([n, total]);
    }
    let (root, used) = node_image(b"BTIN", 10, &[chunk_record(0x3000, [5, 0])], &ptrs, 100);
    sweep(&root, used, |b| {
        Btree2Node::decode(b, &h, 2, 1, &ctx, 0x300)
    });
    let n = Btree2Node::decode(&root, &h, 2, 1, &ctx, 0x300).unwrap();
    assert_eq!(n.encode(&h, &ctx).unwrap(), root);
    assert_eq!(n.children[0].total_records, 15);
    assert_eq!(n.children[1].records, 2);
    assert_eq!(n.children[1].total_records, 9);

    // A subtree total below its own node's count, or above the cumulative maximum, is
    // corrupt.
    for (n_, total) in [(3u8, 2u8), (3, 20)] {
        let mut ptrs = le(0x400, 4);
        ptrs.extend([n_, total]);
        ptrs.extend(le(0x500, 4));
        ptrs.extend([0, 0]);
        let (bad, _) = node_image(b"BTIN", 10, &[chunk_record(0x3000, [5, 0])], &ptrs, 100);
        assert!(Btree2Node::decode(&bad, &h, 2, 1, &ctx, 0x300).is_err());
    }
}

/// One record of each type, decoded from a leaf holding just it.
#[test]
fn every_record_type_decodes() {
    let ctx = RecordContext {
        sizes: S4,
        heap_id_len: 7,
        rank: 1,
        chunk_size_len: 3,
    };
    let id7 = vec![1u8, 2, 3, 4, 5, 6, 7];
    let id8 = [9u8, 8, 7, 6, 5, 4, 3, 2];
    let cat = |parts: &[&[u8]]| parts.concat();
    let cases: Vec<(u8, Vec<u8>, Record)> = vec![
        (
            1,
            cat(&[&le(0x10, 4), &le(0x20, 4), &le(7, 4)]),
            Record::HugeIndirect {
                address: 0x10,
                length: 0x20,
                id: 7,
            },
        ),
        (
            2,
            cat(&[
                &le(0x10, 4),
                &le(0x20, 4),
                &le(3, 4),
                &le(0x40, 4),
                &le(8, 4),
            ]),
            Record::HugeIndirectFiltered {
                address: 0x10,
                length: 0x20,
                filter_mask: 3,
                memory_size: 0x40,
                id: 8,
            },
        ),
        (
            3,
            cat(&[&le(0x10, 4), &le(0x20, 4)]),
            Record::HugeDirect {
                address: 0x10,
                length: 0x20,
            },
        ),
        (
            4,
            cat(&[&le(0x10, 4), &le(0x20, 4), &le(1, 4), &le(0x40, 4)]),
            Record::HugeDirectFiltered {
                address: 0x10,
                length: 0x20,
                filter_mask: 1,
                memory_size: 0x40,
            },
        ),
        (
            5,
            cat(&[&le(0xabcd, 4), &id7]),
            Record::LinkName {
                hash: 0xabcd,
                heap_id: InlineHeapId::new(&id7).expect("7 bytes fit"),
            },
        ),
        (
            6,
            cat(&[&le(42, 8), &id7]),
            Record::LinkCreationOrder {
                creation_order: 42,
                heap_id: InlineHeapId::new(&id7).expect("7 bytes fit"),
            },
        ),
        (
            7,
            cat(&[&[0], &le(0x55, 4), &le(3, 4), &id8]),
            Record::SharedMessage(SharedMessageRecord::InHeap {
                hash: 0x55,
                reference_count: 3,
                heap_id: id8,
            }),
        ),
        (
            7,
            // Location 1, hash, reserved, type, index, address, then padding to 17 bytes.
            cat(&[
                &[1],
                &le(0x66, 4),
                &[0, 12],
                &le(2, 2),
                &le(0x800, 4),
                &[0, 0, 0, 0],
            ]),
            Record::SharedMessage(SharedMessageRecord::InObjectHeader {
                hash: 0x66,
                message_type: 12,
                index: 2,
                address: 0x800,
            }),
        ),
        (
            8,
            cat(&[&id8, &[1], &le(5, 4), &le(0x77, 4)]),
            Record::AttributeName {
                heap_id: id8,
                flags: 1,
                creation_order: 5,
                hash: 0x77,
            },
        ),
        (
            9,
            cat(&[&id8, &[0], &le(6, 4)]),
            Record::AttributeCreationOrder {
                heap_id: id8,
                flags: 0,
                creation_order: 6,
            },
        ),
        (
            10,
            cat(&[&le(0x900, 4), &le(11, 8)]),
            Record::Chunk {
                address: 0x900,
                scaled: vec![11],
            },
        ),
        (
            11,
            cat(&[&le(0x900, 4), &le(0x12345, 3), &le(2, 4), &le(11, 8)]),
            Record::FilteredChunk {
                address: 0x900,
                size: 0x12345,
                filter_mask: 2,
                scaled: vec![11],
            },
        ),
    ];
    for (t, bytes, want) in cases {
        let ty = Btree2Type::from_u8(t).unwrap();
        assert_eq!(ty.as_u8(), t);
        assert_eq!(bytes.len(), ctx.record_size(ty), "type {t}");
        let rs = bytes.len() as u16;
        let h = Btree2Header::decode(&header_image(S4, t, 512, rs, 0, 0x100, 1, 1), S4, 0).unwrap();
        let (leaf, used) = node_image(b"BTLF", t, &[bytes], &[], 512);
        let n = Btree2Node::decode_leaf(&leaf, &h, 1, &ctx, 0x100).unwrap();
        assert_eq!(n.records, vec![want], "type {t}");
        assert_eq!(n.encode(&h, &ctx).unwrap(), leaf, "type {t}");
        sweep(&leaf, used, |b| {
            Btree2Node::decode_leaf(b, &h, 1, &ctx, 0x100)
        });
    }
    // An unknown shared message location is corrupt.
    let h = Btree2Header::decode(&header_image(S4, 7, 512, 17, 0, 0x100, 1, 1), S4, 0).unwrap();
    let (leaf, _) = node_image(b"BTLF", 7, &[vec![2; 17]], &[], 512);
    assert!(Btree2Node::decode_leaf(&leaf, &h, 1, &ctx, 0x100).is_err());
}

#[test]
fn impossible_headers_are_errors() {
    let s = Sizes::EIGHT;
    let bad = [
        header_image(s, 10, 2048, 0, 0, 0, 0, 0), // record size 0
        header_image(s, 10, 9, 24, 0, 0, 0, 0),   // node smaller than its overhead
        header_image(s, 10, 40, 24, 1, 0, 0, 0),  // a leaf fits 1, an internal node 0
        header_image(s, 10, 2048, 24, u16::MAX, 0, 0, 0), // absurd depth
        header_image(s, 10, u32::MAX, 1, u16::MAX, 0, 0, 0), // counts overflow
        header_image(s, 10, 2048, 24, 0, 0x10, 85, 85), // root fuller than a leaf can be
        header_image(s, 0, 2048, 24, 0, 0, 0, 0), // test type
        header_image(s, 12, 2048, 24, 0, 0, 0, 0), // unknown type
    ];
    for (i, b) in bad.iter().enumerate() {
        assert!(Btree2Header::decode(b, s, 0).is_err(), "case {i}");
    }
    let mut v1 = header_image(s, 10, 2048, 24, 0, 0, 0, 0);
    v1[4] = 1;
    assert!(matches!(
        Btree2Header::decode(&v1, s, 0),
        Err(FormatError::Unsupported { .. } | FormatError::Corrupted { .. })
    ));
}

#[test]
fn encoders_reject_what_does_not_fit() {
    let ctx = RecordContext::for_chunks(S4, 2, 64);
    let params = Btree2Params {
        tree_type: Btree2Type::Chunks,
        node_size: 100,
        record_size: 20,
        split_percent: 100,
        merge_percent: 40,
    };
    let root = ChildPointer {
        address: 0x300,
        records: 1,
        total_records: 3,
    };
    let h = Btree2Header::new(S4, 0, params, 1, root).unwrap();
    let rec = |i: u64| Record::Chunk {
        address: 0x1000 + i,
        scaled: vec![i, 0],
    };
    let leaf = |n: u64| Btree2Node {
        address: 0x400,
        depth: 0,
        records: (0..n).map(rec).collect(),
        children: vec![],
    };
    // A full leaf round-trips; one more record does not fit.
    let full = leaf(4);
    let b = full.encode(&h, &ctx).unwrap();
    assert_eq!(b.len(), 100);
    assert_eq!(Btree2Node::decode(&b, &h, 0, 4, &ctx, 0x400).unwrap(), full);
    assert!(leaf(5).encode(&h, &ctx).is_err());
    // Wrong rank, wrong type, missing pointers, a child that claims too much.
    let mut bad = leaf(1);
    bad.records[0] = Record::Chunk {
        address: 1,
        scaled: vec![1],
    };
    assert!(bad.encode(&h, &ctx).is_err());
    let mut bad = leaf(1);
    bad.records[0] = Record::HugeDirect {
        address: 1,
        length: 2,
    };
    assert!(bad.encode(&h, &ctx).is_err());
    let mut internal = Btree2Node {
        address: 0x300,
        depth: 1,
        records: vec![rec(9)],
        children: vec![
            ChildPointer {
                address: 0x400,
                records: 4,
                total_records: 4,
            };
            2
        ],
    };
    let b = internal.encode(&h, &ctx).unwrap();
    assert_eq!(
        Btree2Node::decode(&b, &h, 1, 1, &ctx, 0x300).unwrap(),
        internal
    );
    internal.children[1].records = 5;
    internal.children[1].total_records = 5;
    assert!(internal.encode(&h, &ctx).is_err());
    internal.children.pop();
    assert!(internal.encode(&h, &ctx).is_err());
    let mut deep = internal.clone();
    deep.depth = 2;
    assert!(deep.encode(&h, &ctx).is_err());
    // Root record counts are 2 bytes.
    let mut big = h.clone();
    big.root.records = 70000;
    assert!(big.encode(S4).is_err());
    // A filtered chunk size wider than its field.
    let fctx = RecordContext {
        chunk_size_len: 1,
        ..ctx
    };
    let r = Record::FilteredChunk {
        address: 1,
        size: 256,
        filter_mask: 0,
        scaled: vec![0, 0],
    };
    assert!(r.encode(&mut Writer::new(), &fctx).is_err());
    let id = Record::LinkName {
        hash: 1,
        heap_id: InlineHeapId::new(&[0; 6]).expect("6 bytes fit"),
    };
    assert!(
        id.encode(&mut Writer::new(), &RecordContext::new(S4))
            .is_err()
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600),
                                       depth in 0u16..4, n in 0u64..100) {
            let _ = Btree2Header::decode(&bytes, Sizes::EIGHT, 0);
            let h = Btree2Header::decode(
                &header_image(S4, 10, 100, 20, 3, 0x300, 1, 3), S4, 0).unwrap();
            let ctx = RecordContext::for_chunks(S4, 2, 64);
            let _ = Btree2Node::decode(&bytes, &h, depth, n, &ctx, 0);
            // With a valid signature and type, so the body is exercised too.
            let mut b = b"BTIN\0\x0a".to_vec();
            b.extend(&bytes);
            let _ = Btree2Node::decode(&b, &h, depth.max(1), n, &ctx, 0);
            b[..4].copy_from_slice(b"BTLF");
            let _ = Btree2Node::decode(&b, &h, 0, n, &ctx, 0);
        }

        /// Link records (types 5 and 6) hold their heap IDs inline: any record image decodes
        /// and encodes back byte for byte, for the 7-byte IDs of libhdf5's group heaps and
        /// other lengths up to the inline capacity.
        #[test]
        fn link_records_round_trip_byte_for_byte(
            id_len in 1usize..=InlineHeapId::CAPACITY,
            by_order in any::<bool>(),
            image in proptest::collection::vec(any::<u8>(), 8 + InlineHeapId::CAPACITY)) {
            let ctx = RecordContext { heap_id_len: id_len, ..RecordContext::new(S4) };
            let t = if by_order { Btree2Type::LinkCreationOrder } else { Btree2Type::LinkName };
            let size = ctx.record_size(t);
            let bytes = &image[..size];
            let mut r = Reader::new(bytes, "v2 B-tree record", 0);
            ctx.check_record_size(&r, t, size).unwrap();
            let rec = Record::decode(&mut r, t, &ctx).unwrap();
            let (lead, id) = bytes.split_at(size - id_len);
            match &rec {
                Record::LinkName { hash, heap_id } => {
                    prop_assert_eq!(u64::from(*hash), le_value(lead));
                    prop_assert_eq!(heap_id.as_slice(), id);
                }
                Record::LinkCreationOrder { creation_order, heap_id } => {
                    prop_assert_eq!(*creation_order, le_value(lead));
                    prop_assert_eq!(heap_id.as_slice(), id);
                }
                other => prop_assert!(false, "{other:?}"),
            }
            let mut w = Writer::new();
            rec.encode(&mut w, &ctx).unwrap();
            prop_assert_eq!(w.as_slice(), bytes);
        }

        #[test]
        fn chunk_leaves_round_trip(recs in proptest::collection::vec(
                                       (0..u32::MAX, any::<u64>(), any::<u64>()), 0..5)) {
            let h = Btree2Header::decode(
                &header_image(S4, 10, 100, 20, 0, 0x300, 1, 1), S4, 0).unwrap();
            let ctx = RecordContext::for_chunks(S4, 2, 64);
            let node = Btree2Node {
                address: 0x300,
                depth: 0,
                records: recs
                    .iter()
                    .map(|&(a, x, y)| Record::Chunk { address: u64::from(a), scaled: vec![x, y] })
                    .collect(),
                children: vec![],
            };
            let b = node.encode(&h, &ctx).unwrap();
            let n = recs.len() as u64;
            prop_assert_eq!(Btree2Node::decode(&b, &h, 0, n, &ctx, 0x300).unwrap(), node);
        }
    }
}

/// The little-endian value of up to 8 bytes.
fn le_value(b: &[u8]) -> u64 {
    b.iter().rev().fold(0, |v, &x| (v << 8) | u64::from(x))
}

/// A tree whose link records would hold heap IDs longer than a record keeps inline is refused
/// with a typed error when its record size is checked, and when a record is decoded.
#[test]
fn link_heap_ids_past_the_inline_capacity_are_refused() {
    let ctx = RecordContext {
        heap_id_len: InlineHeapId::CAPACITY + 1,
        ..RecordContext::new(S4)
    };
    let bytes = [0u8; 8 + InlineHeapId::CAPACITY + 1];
    for t in [Btree2Type::LinkName, Btree2Type::LinkCreationOrder] {
        let size = ctx.record_size(t);
        let mut r = Reader::new(&bytes[..size], "v2 B-tree record", 0);
        assert!(matches!(
            ctx.check_record_size(&r, t, size),
            Err(FormatError::Unsupported { .. })
        ));
        assert!(matches!(
            Record::decode(&mut r, t, &ctx),
            Err(FormatError::Unsupported { .. })
        ));
    }
}
