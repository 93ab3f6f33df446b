//! Hand-built fractal heap images (8-byte sizes unless said otherwise).

use super::*;
use crate::checksum::lookup3;
use crate::{FormatError, Sizes, UNDEFINED_ADDRESS};

/// Parameters of a hand-built header.
struct H {
    id_len: u16,
    filters: Vec<u8>,
    flags: u8,
    max_man: u32,
    width: u16,
    start: u64,
    max_direct: u64,
    bits: u16,
    root: u64,
    rows: u16,
}

impl Default for H {
    /// libhdf5's defaults for a group's link heap: ID length 7, width 4, 512-byte starting
    /// blocks, 64 KiB direct blocks, 32-bit heap, checksummed direct blocks.
    fn default() -> Self {
        Self {
            id_len: 7,
            filters: Vec::new(),
            flags: 2,
            max_man: 4096,
            width: 4,
            start: 512,
            max_direct: 65536,
            bits: 32,
            root: 0x1000,
            rows: 1,
        }
    }
}

const HDR_ADDR: u64 = 0x1b2;

fn header_bytes(h: &H) -> Vec<u8> {
    let mut b = b"FRHP\0".to_vec();
    b.extend(h.id_len.to_le_bytes());
    b.extend((h.filters.len() as u16).to_le_bytes());
    b.push(h.flags);
    b.extend(h.max_man.to_le_bytes());
    b.extend(0u64.to_le_bytes()); // next huge ID
    b.extend(u64::MAX.to_le_bytes()); // huge B-tree
    b.extend(0x40u64.to_le_bytes()); // free space
    b.extend(0x26au64.to_le_bytes()); // free-space manager
    for v in [0x800u64, 0x800, 0x800, 100, 0, 0, 0, 0] {
        b.extend(v.to_le_bytes());
    }
    b.extend(h.width.to_le_bytes());
    b.extend(h.start.to_le_bytes());
    b.extend(h.max_direct.to_le_bytes());
    b.extend(h.bits.to_le_bytes());
    b.extend(1u16.to_le_bytes()); // starting rows
    b.extend(h.root.to_le_bytes());
    b.extend(h.rows.to_le_bytes());
    if !h.filters.is_empty() {
        b.extend(300u64.to_le_bytes());
        b.extend(5u32.to_le_bytes());
        b.extend(&h.filters);
    }
    let c = lookup3(&b, 0);
    b.extend(c.to_le_bytes());
    b
}

fn header(h: &H) -> FractalHeapHeader {
    FractalHeapHeader::decode(&header_bytes(h), Sizes::EIGHT, HDR_ADDR).unwrap()
}

#[test]
fn decodes_header() {
    let b = header_bytes(&H::default());
    assert_eq!(b.len(), 146);
    assert_eq!(
        FractalHeapHeader::total_len(&b[..9], Sizes::EIGHT, 0).unwrap(),
        146
    );
    let h = FractalHeapHeader::decode(&b, Sizes::EIGHT, HDR_ADDR).unwrap();
    assert_eq!(h.heap_id_len, 7);
    assert!(h.checksum_direct_blocks);
    assert!(!h.huge_ids_wrapped);
    assert_eq!(h.huge_btree_address, UNDEFINED_ADDRESS);
    assert_eq!(h.managed_object_count, 100);
    assert_eq!(h.heap_offset_size(), 4);
    assert_eq!(h.heap_length_size(), 2);
    assert_eq!(h.direct_block_header_len(), 5 + 8 + 4 + 4);
    assert_eq!(h.indirect_block_len(1), 5 + 8 + 4 + 4 * 8 + 4);
    assert_eq!(
        h.root(),
        RootBlock::Indirect {
            address: 0x1000,
            rows: 1
        }
    );
    assert!(h.filtered_root.is_none());
}

#[test]
fn decodes_filtered_header_and_roots() {
    let h = header(&H {
        filters: vec![2, 1, 0, 0, 1, 0, 0, 0],
        rows: 0,
        id_len: 30,
        ..H::default()
    });
    assert_eq!(
        h.filtered_root,
        Some(FilteredRoot {
            size: 300,
            filter_mask: 5
        })
    );
    assert_eq!(h.filter_pipeline, vec![2, 1, 0, 0, 1, 0, 0, 0]);
    assert_eq!(
        h.root(),
        RootBlock::Direct {
            address: 0x1000,
            size: 512,
            disk_size: 300
        }
    );
    assert_eq!(h.indirect_block_len(1), 5 + 8 + 4 + 4 * 20 + 4);
    let e = header(&H {
        root: u64::MAX,
        rows: 0,
        ..H::default()
    });
    assert_eq!(e.root(), RootBlock::Empty);
}

#[test]
fn header_corruption_is_an_error() {
    let b = header_bytes(&H::default());
    for n in 0..b.len() {
        assert!(FractalHeapHeader::decode(&b[..n], Sizes::EIGHT, 0).is_err());
    }
    // Every single-bit flip is caught (by the checksum or a field check).
    for i in 0..b.len() {
        let mut x = b.clone();
        x[i] ^= 0x10;
        assert!(
            FractalHeapHeader::decode(&x, Sizes::EIGHT, HDR_ADDR).is_err(),
            "byte {i}"
        );
    }
    // Bad field values with a valid checksum.
    for bad in [
        H {
            width: 3,
            ..H::default()
        },
        H {
            width: 0,
            ..H::default()
        },
        H {
            start: 0,
            ..H::default()
        },
        H {
            start: 1024,
            max_direct: 512,
            ..H::default()
        },
        H {
            bits: 65,
            ..H::default()
        },
        H {
            bits: 10,
            ..H::default()
        },
        H {
            max_man: 100_000,
            ..H::default()
        },
        H {
            rows: 40,
            ..H::default()
        },
        H {
            id_len: 4,
            ..H::default()
        },
        H {
            flags: 4,
            ..H::default()
        },
    ] {
        assert!(matches!(
            FractalHeapHeader::decode(&header_bytes(&bad), Sizes::EIGHT, 0),
            Err(FormatError::Corrupted { .. })
        ));
    }
}

#[test]
fn doubling_table_math() {
    // width 4, start 512, max direct 64 KiB, 32-bit heap.
    let t = DoublingTable::new(4, 512, 65536, 32).unwrap();
    assert_eq!(t.first_row_bits(), 11);
    assert_eq!(t.max_root_rows(), 22);
    assert_eq!(t.max_direct_rows(), 9);
    assert_eq!(t.row_block_size(0), Some(512));
    assert_eq!(t.row_block_size(1), Some(512));
    assert_eq!(t.row_block_size(2), Some(1024));
    assert_eq!(t.row_block_size(8), Some(65536));
    assert_eq!(t.row_block_size(9), Some(131072));
    assert_eq!(t.row_block_size(22), None);
    assert_eq!(t.row_offset(1), Some(2048));
    assert_eq!(t.row_offset(2), Some(4096));
    assert_eq!(t.child_rows(9), Some(7)); // 128 KiB = 2^17 -> 17 - 11 + 1
    let l = t.locate(0, 1, 0x600).unwrap();
    assert_eq!(
        l,
        BlockLocation {
            row: 0,
            column: 3,
            entry: 3,
            block_offset: 0x600,
            block_size: 512,
            kind: ChildKind::Direct
        }
    );
    let l = t.locate(0, 3, 5000).unwrap();
    assert_eq!((l.row, l.column, l.entry), (2, 0, 8));
    assert_eq!((l.block_offset, l.block_size), (4096, 1024));
    // Outside a one-row block.
    assert!(t.locate(0, 1, 2048).is_err());
    assert!(t.locate(0, 0, 0).is_err());
    assert!(t.locate(100, 1, 50).is_err());
    // An indirect row: row 9 starts at 2^19; its blocks are 128 KiB indirect blocks of 7 rows.
    let l = t.locate(0, 12, (1 << 19) + 3 * 131072 + 17).unwrap();
    assert_eq!((l.row, l.column), (9, 3));
    assert_eq!(l.kind, ChildKind::Indirect { rows: 7 });
    assert_eq!(l.block_offset, (1 << 19) + 3 * 131072);
    // Inside the child: offset relative to it lands in row 0, column 0.
    let c = t
        .locate(l.block_offset, 7, (1 << 19) + 3 * 131072 + 17)
        .unwrap();
    assert_eq!((c.row, c.column, c.block_offset), (0, 0, l.block_offset));
    // Exhaustive check against a naive walk over every block of a 6-row table.
    let mut off = 0u64;
    for row in 0..6u32 {
        for col in 0..4u64 {
            let size = t.row_block_size(row).unwrap();
            for probe in [off, off + size / 2, off + size - 1] {
                let l = t.locate(0, 6, probe).unwrap();
                assert_eq!((u32::from(l.row), u64::from(l.column)), (row, col));
                assert_eq!(l.block_offset, off);
            }
            off += size;
        }
    }
    assert_eq!(t.indirect_span(6), Some(off));
    // A 64-bit heap: the whole address space.
    let t = DoublingTable::new(1, 1, 1, 64).unwrap();
    assert_eq!(t.max_root_rows(), 65);
    let l = t.locate(0, 65, u64::MAX).unwrap();
    assert_eq!(l.row, 64);
    assert!(DoublingTable::new(4, 512, 256, 32).is_err());
}

fn direct_block(h: &FractalHeapHeader, offset: u32, size: usize, sum: bool) -> Vec<u8> {
    let mut b = b"FHDB\0".to_vec();
    b.extend(HDR_ADDR.to_le_bytes());
    b.extend(offset.to_le_bytes());
    let at = b.len();
    if sum {
        b.extend([0; 4]);
    }
    b.extend(b"\x01\x00\x08link_000");
    b.resize(size, 0);
    if sum {
        let c = lookup3(&b, 0);
        b[at..at + 4].copy_from_slice(&c.to_le_bytes());
    }
    let _ = h;
    b
}

#[test]
fn decodes_direct_block() {
    let h = header(&H::default());
    let b = direct_block(&h, 0x600, 512, true);
    let d = FractalDirectBlock::decode(&b, &h, 0xae5, 512).unwrap();
    assert_eq!(d.block_offset, 0x600);
    assert_eq!(d.header_len, 21);
    assert_eq!(d.object(0x600 + 21, 11).unwrap(), b"\x01\x00\x08link_000");
    assert!(d.object(0x600 + 20, 2).is_err()); // inside the header
    assert!(d.object(0x600 + 500, 13).is_err()); // past the end
    assert!(d.object(0x500, 1).is_err());
    assert!(d.object(u64::MAX, u64::MAX).is_err());
    for n in 0..b.len() {
        assert!(FractalDirectBlock::decode(&b[..n], &h, 0, 512).is_err());
    }
    for i in 0..b.len() {
        let mut x = b.clone();
        x[i] ^= 1;
        assert!(
            FractalDirectBlock::decode(&x, &h, 0, 512).is_err(),
            "byte {i}"
        );
    }
    // Without checksums.
    let h2 = header(&H {
        flags: 0,
        ..H::default()
    });
    let b = direct_block(&h2, 0, 512, false);
    let d = FractalDirectBlock::decode(&b, &h2, 0, 512).unwrap();
    assert_eq!(d.header_len, 17);
    assert_eq!(d.object(17, 3).unwrap(), b"\x01\x00\x08");
    // Wrong heap.
    let other = FractalHeapHeader {
        address: 0x99,
        ..h2.clone()
    };
    assert!(FractalDirectBlock::decode(&b, &other, 0, 512).is_err());
    assert!(FractalDirectBlock::decode(&b, &h2, 0, u64::MAX).is_err());
}

fn indirect_block(h: &FractalHeapHeader, rows: u16, offset: u32, addrs: &[u64]) -> Vec<u8> {
    let mut b = b"FHIB\0".to_vec();
    b.extend(HDR_ADDR.to_le_bytes());
    b.extend(offset.to_le_bytes());
    let (d, i) = h.table.split_rows(rows);
    let n = (d + i) as usize * usize::from(h.table.width);
    for k in 0..n {
        b.extend(addrs.get(k).copied().unwrap_or(u64::MAX).to_le_bytes());
        if h.is_filtered() && k < d as usize * usize::from(h.table.width) {
            b.extend(100u64.to_le_bytes());
            b.extend(0u32.to_le_bytes());
        }
    }
    let c = lookup3(&b, 0);
    b.extend(c.to_le_bytes());
    b
}

#[test]
fn decodes_indirect_blocks() {
    let h = header(&H::default());
    let b = indirect_block(&h, 1, 0, &[0x10e5, 0xee5, 0xce5, 0xae5]);
    assert_eq!(b.len(), h.indirect_block_len(1));
    let ib = FractalIndirectBlock::decode(&b, &h, 0x12e5, 1).unwrap();
    assert_eq!(ib.block_offset, 0);
    assert_eq!(ib.direct.len(), 4);
    assert!(ib.indirect.is_empty());
    assert_eq!(ib.child_address(3), Some(0xae5));
    assert_eq!(ib.child_address(4), None);
    assert_eq!(ib.direct[0].filtered_size, None);
    for n in 0..b.len() {
        assert!(FractalIndirectBlock::decode(&b[..n], &h, 0, 1).is_err());
    }
    for i in 0..b.len() {
        let mut x = b.clone();
        x[i] ^= 4;
        assert!(
            FractalIndirectBlock::decode(&x, &h, 0, 1).is_err(),
            "byte {i}"
        );
    }
    assert!(FractalIndirectBlock::decode(&b, &h, 0, 0).is_err());
    assert!(FractalIndirectBlock::decode(&b, &h, 0, 1000).is_err());
    // 11 rows: 9 direct rows (36 entries), 2 indirect rows (8 entries).
    let mut addrs: Vec<u64> = (0..44).map(|k| 0x10000 + k * 0x100).collect();
    addrs[40] = u64::MAX;
    let b = indirect_block(&h, 11, 0, &addrs);
    let ib = FractalIndirectBlock::decode(&b, &h, 0, 11).unwrap();
    assert_eq!((ib.direct.len(), ib.indirect.len()), (36, 8));
    assert_eq!(ib.child_address(36), Some(0x10000 + 36 * 0x100));
    assert_eq!(ib.child_address(40), Some(UNDEFINED_ADDRESS));
    // A child indirect block must sit at an offset aligned to its span.
    let b = indirect_block(&h, 7, 1 << 19, &[]);
    assert!(FractalIndirectBlock::decode(&b, &h, 0, 7).is_ok());
    let b = indirect_block(&h, 7, (1 << 19) + 512, &[]);
    assert!(FractalIndirectBlock::decode(&b, &h, 0, 7).is_err());
    // Filtered heap entries carry size and mask.
    let hf = header(&H {
        filters: vec![0; 8],
        ..H::default()
    });
    let b = indirect_block(&hf, 1, 0, &[0x2000]);
    let ib = FractalIndirectBlock::decode(&b, &hf, 0, 1).unwrap();
    assert_eq!(
        ib.direct[0],
        ChildDirectBlock {
            address: 0x2000,
            filtered_size: Some(100),
            filter_mask: Some(0)
        }
    );
}

#[test]
fn decodes_heap_ids() {
    let h = header(&H::default());
    // Managed: offset 0x615 (4 bytes), length 0x13 (2 bytes).
    let id = [0x00, 0x15, 0x06, 0, 0, 0x13, 0];
    assert_eq!(
        HeapId::decode(&id, &h).unwrap(),
        HeapId::Managed {
            offset: 0x615,
            len: 0x13
        }
    );
    // Tiny: 3 bytes "abc" (length - 1 = 2 in the low bits).
    let id = [0x22, b'a', b'b', b'c', 0, 0, 0];
    assert_eq!(HeapId::decode(&id, &h).unwrap(), HeapId::Tiny(b"abc"));
    let id = [0x25, b'a', b'b', b'c', b'd', b'e', b'f'];
    assert_eq!(HeapId::decode(&id, &h).unwrap(), HeapId::Tiny(b"abcdef"));
    assert!(HeapId::decode(&[0x26, 0, 0, 0, 0, 0, 0], &h).is_err()); // 7 bytes don't fit
    // Huge through the B-tree (7-byte IDs cannot hold an address and a length).
    let id = [0x10, 5, 0, 0, 0, 0, 0];
    assert_eq!(
        HeapId::decode(&id, &h).unwrap(),
        HeapId::Huge(HugeId::BtreeKey(5))
    );
    // Bad version, bad type, zero or oversized length, wrong ID length.
    for bad in [
        [0x40, 0, 0, 0, 0, 1, 0],
        [0x30, 0, 0, 0, 0, 1, 0],
        [0x00, 0, 0, 0, 0, 0, 0],
        [0x00, 0, 0, 0, 0, 0x01, 0x20],
        [0x00, 0xff, 0xff, 0xff, 0xff, 0x10, 0],
    ] {
        assert!(HeapId::decode(&bad, &h).is_err(), "{bad:?}");
    }
    assert!(HeapId::decode(&[0x00, 0, 0], &h).is_err());

    // 17-byte IDs: huge objects directly (address + length); tiny up to 16 bytes.
    let h17 = header(&H {
        id_len: 17,
        ..H::default()
    });
    let mut id = vec![0x10];
    id.extend(0x5000u64.to_le_bytes());
    id.extend(70000u64.to_le_bytes());
    assert_eq!(
        HeapId::decode(&id, &h17).unwrap(),
        HeapId::Huge(HugeId::Direct {
            address: 0x5000,
            len: 70000
        })
    );
    let mut id = vec![0x2f];
    id.extend([7u8; 16]);
    assert_eq!(HeapId::decode(&id, &h17).unwrap(), HeapId::Tiny(&[7u8; 16]));

    // 20-byte IDs: extended tiny length (2 bytes), 18 bytes max.
    let h20 = header(&H {
        id_len: 20,
        ..H::default()
    });
    let mut id = vec![0x20, 17];
    id.extend([9u8; 18]);
    assert_eq!(HeapId::decode(&id, &h20).unwrap(), HeapId::Tiny(&[9u8; 18]));
    id[1] = 18;
    assert!(HeapId::decode(&id, &h20).is_err());

    // Filtered heap, 29-byte IDs: direct filtered huge objects.
    let hf = header(&H {
        id_len: 29,
        filters: vec![0; 8],
        ..H::default()
    });
    let mut id = vec![0x10];
    id.extend(0x6000u64.to_le_bytes());
    id.extend(100u64.to_le_bytes());
    id.extend(1u32.to_le_bytes());
    id.extend(400u64.to_le_bytes());
    assert_eq!(
        HeapId::decode(&id, &hf).unwrap(),
        HeapId::Huge(HugeId::DirectFiltered {
            address: 0x6000,
            len: 100,
            filter_mask: 1,
            size: 400
        })
    );
    // Filtered heap, 17-byte IDs: through the B-tree, 8-byte key.
    let hf17 = header(&H {
        id_len: 17,
        filters: vec![0; 8],
        ..H::default()
    });
    let mut id = vec![0x10];
    id.extend(9u64.to_le_bytes());
    id.extend([0u8; 8]);
    assert_eq!(
        HeapId::decode(&id, &hf17).unwrap(),
        HeapId::Huge(HugeId::BtreeKey(9))
    );
}

/// Resolves `off` from the root down to a direct block, as the engine does through the cache.
fn resolve(t: &DoublingTable, root_rows: u16, off: u64) -> (u64, u64, usize) {
    let (mut base, mut rows, mut depth) = (0u64, root_rows, 0usize);
    loop {
        let l = t.locate(base, rows, off).unwrap();
        match l.kind {
            ChildKind::Direct => return (l.block_offset, l.block_size, depth),
            ChildKind::Indirect { rows: r } => {
                assert!(l.entry >= t.split_rows(rows).0 as usize * usize::from(t.width));
                assert_eq!(t.indirect_span(r), Some(l.block_size));
                base = l.block_offset;
                rows = r;
                depth += 1;
            }
        }
    }
}

#[test]
fn nested_indirect_blocks_partition_the_heap() {
    // width 2, 16-byte starting blocks, 32-byte direct blocks at most, 10-bit heap:
    // rows 0..=2 direct (16, 16, 32), rows 3..=5 indirect (64, 128, 256 bytes each).
    let t = DoublingTable::new(2, 16, 32, 10).unwrap();
    assert_eq!((t.max_root_rows(), t.max_direct_rows()), (6, 3));
    assert_eq!(t.indirect_span(6), Some(1024));
    let mut next = 0u64;
    let mut deepest = 0;
    for off in 0..1024u64 {
        let (start, size, depth) = resolve(&t, 6, off);
        assert!(start <= off && off < start + size && size <= 32);
        if start == off {
            // Direct blocks follow one another without gaps.
            assert_eq!(start, next);
            next = start + size;
        }
        deepest = deepest.max(depth);
    }
    assert_eq!(next, 1024);
    // A 256-byte indirect block has 4 rows (16, 16, 32, then two 64-byte indirect blocks of 2
    // direct rows each): root -> 256 -> 64 -> direct.
    assert_eq!(deepest, 2);
    assert!(t.locate(0, 6, 1024).is_err());
}

#[test]
fn extreme_tables_do_not_overflow() {
    // Row 0 alone covers the whole 64-bit space.
    let t = DoublingTable::new(2, 1 << 63, 1 << 63, 64).unwrap();
    assert_eq!(t.max_root_rows(), 1);
    let l = t.locate(0, 1, u64::MAX).unwrap();
    assert_eq!((l.row, l.column, l.block_offset), (0, 1, 1 << 63));
    // A table that breaks the invariants (built by hand) errors instead of panicking.
    let bad = DoublingTable {
        width: 3,
        start_block_size: 0,
        max_direct_block_size: 7,
        max_heap_size_bits: 1000,
    };
    assert!(bad.locate(0, 1, 0).is_err());
    let _ = (
        bad.max_root_rows(),
        bad.max_direct_rows(),
        bad.row_block_size(900),
    );
    let _ = (
        bad.row_offset(900),
        bad.child_rows(900),
        bad.indirect_span(900),
    );
}

#[test]
fn headers_re_encode_byte_exact() {
    for h in [
        H::default(),
        H {
            filters: vec![2, 1, 0, 0, 1, 0, 0, 0],
            rows: 0,
            id_len: 30,
            ..H::default()
        },
        H {
            flags: 3,
            root: u64::MAX,
            rows: 0,
            ..H::default()
        },
    ] {
        let b = header_bytes(&h);
        let d = FractalHeapHeader::decode(&b, Sizes::EIGHT, HDR_ADDR).unwrap();
        assert_eq!(d.encoded_len(), b.len());
        assert_eq!(d.encode().unwrap(), b);
    }
}

#[test]
fn header_encode_errors() {
    let h = header(&H::default());
    let small = FractalHeapHeader {
        sizes: Sizes::new(4, 2, "t", 0).unwrap(),
        ..h.clone()
    };
    // 0x800 of managed space does not fit... it does in 2 bytes; 100_000 does not.
    let too_big = FractalHeapHeader {
        managed_object_count: 100_000,
        ..small.clone()
    };
    assert!(matches!(
        too_big.encode(),
        Err(FormatError::Unsupported { .. })
    ));
    let far = FractalHeapHeader {
        root_block_address: 1 << 40,
        ..small
    };
    assert!(matches!(far.encode(), Err(FormatError::Unsupported { .. })));
    let mismatched = FractalHeapHeader {
        io_filters_len: 3,
        ..h.clone()
    };
    assert!(matches!(
        mismatched.encode(),
        Err(FormatError::Unsupported { .. })
    ));
    let no_root_info = FractalHeapHeader {
        io_filters_len: 1,
        filter_pipeline: vec![0],
        ..h
    };
    assert!(no_root_info.encode().is_err());
}

#[test]
fn direct_blocks_re_encode_with_and_without_checksum() {
    for (flags, sum) in [(2, true), (0, false)] {
        let h = header(&H {
            flags,
            ..H::default()
        });
        let b = direct_block(&h, 0x600, 512, sum);
        let d = FractalDirectBlock::decode(&b, &h, 0xae5, 512).unwrap();
        assert_eq!(d.encode(&h).unwrap(), b);
        // The checksum is recomputed from the contents.
        let mut changed = d.clone();
        changed.data_mut()[0] = 0x7f;
        let e = changed.encode(&h).unwrap();
        let mut back = FractalDirectBlock::decode(&e, &h, 0xae5, 512).unwrap();
        assert_eq!(back.data_mut(), changed.data_mut());
    }
    let h = header(&H::default());
    let mut empty = FractalDirectBlock::empty(&h, 0x800, 512).unwrap();
    assert_eq!(empty.data_mut().len(), 512 - 21);
    let e = empty.encode(&h).unwrap();
    assert_eq!(e.len(), 512);
    let mut back = FractalDirectBlock::decode(&e, &h, 0, 512).unwrap();
    assert_eq!(back.block_offset, 0x800);
    assert!(back.data_mut().iter().all(|&b| b == 0));
    assert!(FractalDirectBlock::empty(&h, 0, 8).is_err());
    // A header length that disagrees with the heap, an offset past the heap's 4 offset bytes.
    let wrong = FractalDirectBlock {
        header_len: 17,
        ..empty.clone()
    };
    assert!(matches!(
        wrong.encode(&h),
        Err(FormatError::Unsupported { .. })
    ));
    let far = FractalDirectBlock {
        block_offset: 1 << 32,
        ..empty
    };
    assert!(matches!(
        far.encode(&h),
        Err(FormatError::Unsupported { .. })
    ));
}

#[test]
fn indirect_blocks_re_encode_byte_exact() {
    let h = header(&H::default());
    let mut addrs: Vec<u64> = (0..44).map(|k| 0x10000 + k * 0x100).collect();
    addrs[40] = u64::MAX;
    for (rows, offset, a) in [
        (1, 0, &addrs[..4]),
        (11, 0, &addrs[..]),
        (7, 1 << 19, &[][..]),
    ] {
        let b = indirect_block(&h, rows, offset, a);
        let ib = FractalIndirectBlock::decode(&b, &h, 0, rows).unwrap();
        assert_eq!(ib.encode(&h).unwrap(), b);
    }
    let hf = header(&H {
        filters: vec![0; 8],
        ..H::default()
    });
    let b = indirect_block(&hf, 1, 0, &[0x2000]);
    let ib = FractalIndirectBlock::decode(&b, &hf, 0, 1).unwrap();
    assert_eq!(ib.encode(&hf).unwrap(), b);
    // Filtered entries on an unfiltered heap (and the reverse), wrong entry counts.
    assert!(matches!(
        ib.encode(&h),
        Err(FormatError::Unsupported { .. })
    ));
    let plain = FractalIndirectBlock::decode(&indirect_block(&h, 1, 0, &[1]), &h, 0, 1).unwrap();
    assert!(plain.encode(&hf).is_err());
    let mut short = plain.clone();
    short.direct.pop();
    assert!(short.encode(&h).is_err());
    let zero = FractalIndirectBlock {
        rows: 0,
        direct: vec![],
        ..plain
    };
    assert!(zero.encode(&h).is_err());
}

#[test]
fn heap_ids_re_encode() {
    let h = header(&H::default());
    for id in [
        vec![0x00, 0x15, 0x06, 0, 0, 0x13, 0],
        vec![0x22, b'a', b'b', b'c', 0, 0, 0],
        vec![0x25, b'a', b'b', b'c', b'd', b'e', b'f'],
        vec![0x10, 5, 0, 0, 0, 0, 0],
    ] {
        assert_eq!(HeapId::decode(&id, &h).unwrap().encode(&h).unwrap(), id);
    }
    assert_eq!(h.tiny_max_len(), 6);
    assert!(!h.tiny_len_extended());
    for bad in [
        HeapId::Tiny(b""),
        HeapId::Tiny(b"abcdefg"),
        HeapId::Managed { offset: 0, len: 0 },
        HeapId::Managed {
            offset: 0,
            len: 4097,
        },
        HeapId::Managed {
            offset: u64::from(u32::MAX),
            len: 2,
        },
        HeapId::Huge(HugeId::Direct { address: 1, len: 1 }),
    ] {
        assert!(
            matches!(bad.encode(&h), Err(FormatError::Unsupported { .. })),
            "{bad:?}"
        );
    }
    // 17-byte IDs: 16-byte tiny objects with the short length, direct huge objects.
    let h17 = header(&H {
        id_len: 17,
        ..H::default()
    });
    assert_eq!((h17.tiny_max_len(), h17.tiny_len_extended()), (16, false));
    let mut id = vec![0x2f];
    id.extend([7u8; 16]);
    assert_eq!(HeapId::Tiny(&[7u8; 16]).encode(&h17).unwrap(), id);
    let mut id = vec![0x10];
    id.extend(0x5000u64.to_le_bytes());
    id.extend(70000u64.to_le_bytes());
    let huge = HeapId::decode(&id, &h17).unwrap();
    assert_eq!(huge.encode(&h17).unwrap(), id);
    assert!(HeapId::Huge(HugeId::BtreeKey(1)).encode(&h17).is_err());
    // 18-byte IDs: the boundary (16 bytes, short length); 20-byte IDs: extended lengths.
    let h18 = header(&H {
        id_len: 18,
        ..H::default()
    });
    assert_eq!((h18.tiny_max_len(), h18.tiny_len_extended()), (16, false));
    let h20 = header(&H {
        id_len: 20,
        ..H::default()
    });
    assert_eq!((h20.tiny_max_len(), h20.tiny_len_extended()), (18, true));
    for n in [1usize, 5, 18] {
        let obj = vec![9u8; n];
        let id = HeapId::Tiny(&obj).encode(&h20).unwrap();
        assert_eq!(id.len(), 20);
        assert_eq!((id[0], id[1]), (0x20, (n - 1) as u8));
        assert_eq!(HeapId::decode(&id, &h20).unwrap(), HeapId::Tiny(&obj));
    }
    assert!(HeapId::Tiny(&[0; 19]).encode(&h20).is_err());
    // Filtered heaps: direct filtered huge IDs (29 bytes) and B-tree keys (17 bytes).
    let hf = header(&H {
        id_len: 29,
        filters: vec![0; 8],
        ..H::default()
    });
    let f = HeapId::Huge(HugeId::DirectFiltered {
        address: 0x6000,
        len: 100,
        filter_mask: 1,
        size: 400,
    });
    assert_eq!(HeapId::decode(&f.encode(&hf).unwrap(), &hf).unwrap(), f);
    assert!(f.encode(&h17).is_err());
    let hf17 = header(&H {
        id_len: 17,
        filters: vec![0; 8],
        ..H::default()
    });
    let k = HeapId::Huge(HugeId::BtreeKey(9));
    assert_eq!(HeapId::decode(&k.encode(&hf17).unwrap(), &hf17).unwrap(), k);
}
