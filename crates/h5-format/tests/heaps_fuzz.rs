//! Arbitrary bytes behind valid signatures: the heap, symbol-node and v1 B-tree decoders must
//! return errors or values, never panic or over-allocate.

use h5_format::btree1::BtreeV1Node;
use h5_format::heap::fractal::{
    DoublingTable, FractalDirectBlock, FractalHeapHeader, FractalIndirectBlock, HeapId,
};
use h5_format::heap::global::{GlobalHeapCollection, GlobalHeapId};
use h5_format::heap::local::{LocalHeapHeader, free_blocks, name_at};
use h5_format::symbol_node::SymbolTableNode;
use h5_format::{Sizes, UNDEFINED_ADDRESS};
use proptest::prelude::*;

fn with(sig: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut b = sig.to_vec();
    b.extend_from_slice(rest);
    b
}

fn sizes() -> impl Strategy<Value = Sizes> {
    (1u8..=8, 1u8..=8).prop_map(|(o, l)| Sizes::new(o, l, "t", 0).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn never_panics(rest in proptest::collection::vec(any::<u8>(), 0..600), s in sizes(),
                    dims in proptest::option::of(0usize..40), rows in any::<u16>(),
                    off in any::<u64>(), len in any::<u64>()) {
        let _ = LocalHeapHeader::decode(&with(b"HEAP\0", &rest), s, 0);
        let _ = name_at(&rest, off);
        let _ = free_blocks(&rest, s, Some(off % 700));
        let _ = GlobalHeapCollection::decode(&with(b"GCOL\x01", &rest), s, 0);
        let _ = GlobalHeapCollection::needed_len(&with(b"GCOL\x01", &rest), s, 0);
        let _ = GlobalHeapId::decode(&rest, s, 0);
        let _ = SymbolTableNode::decode(&with(b"SNOD\x01", &rest), s, 0);
        let _ = BtreeV1Node::decode(&with(b"TREE", &rest), s, 0, dims);
        let _ = FractalHeapHeader::decode(&with(b"FRHP\0", &rest), s, 0);
        if let Ok(t) = DoublingTable::new(1 << (rows % 16), 1 << (off % 40), 1 << (len % 50), rows % 70) {
            let _ = t.locate(off % 1000, rows % 80, len);
            let _ = t.child_rows(u32::from(rows % 80));
        }
    }

    #[test]
    fn blocks_and_ids_never_panic(rest in proptest::collection::vec(any::<u8>(), 0..400),
                                  id in proptest::collection::vec(any::<u8>(), 0..40),
                                  rows in 0u16..30, size in 0u64..1000, off in any::<u64>()) {
        // A valid header built from the real fixture's values, with fuzzed ID length.
        let mut h = FractalHeapHeader::decode(&real_header(), Sizes::EIGHT, 0x1b2).unwrap();
        h.heap_id_len = id.len() as u16;
        let _ = HeapId::decode(&id, &h);
        h.io_filters_len = 4;
        let _ = HeapId::decode(&id, &h);
        let _ = FractalIndirectBlock::decode(&with(b"FHIB\0\xb2\x01\0\0\0\0\0\0", &rest), &h, 0, rows);
        h.io_filters_len = 0;
        let _ = FractalIndirectBlock::decode(&with(b"FHIB\0\xb2\x01\0\0\0\0\0\0", &rest), &h, 0, rows);
        if let Ok(d) = FractalDirectBlock::decode(&with(b"FHDB\0\xb2\x01\0\0\0\0\0\0", &rest), &h, UNDEFINED_ADDRESS, size) {
            let _ = d.object(off, size);
        }
    }
}

/// The fractal heap header of `tests/data/latest_links.h5` (at 0x1b2).
fn real_header() -> Vec<u8> {
    let f = std::fs::read(format!(
        "{}/tests/data/latest_links.h5",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    f[0x1b2..0x1b2 + 146].to_vec()
}
