//! The fractal heap engine: sequential inserts lay the heap out as `FractalHeapBuilder` (itself
//! byte-exact against libhdf5) does; random inserts, rewrites and removals of tiny, managed and
//! huge objects match a reference map with a tiny metadata cache and invariant checks, across
//! flushes and reopenings; freed blocks shrink the heap back.

use std::collections::BTreeMap;
use std::sync::Arc;

use h5_format::heap::fractal::{
    FractalBlockKind, FractalHeapBuilder, FractalHeapHeader, FractalHeapParams, HeapId,
};
use proptest::prelude::*;

use super::*;
use crate::access::{Reading, Session};
use crate::file::FileShared;
use crate::testutil::{new_file, settings};

fn object(len: usize, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(seed) as u8)
        .collect()
}

fn insert(file: &FileShared, heap: u64, obj: &[u8]) -> Vec<u8> {
    let mut s = Session::new(file).unwrap();
    let mut c = HeapChange::begin(&mut s, heap).unwrap();
    let id = c.insert(obj).unwrap();
    c.finish().unwrap();
    id
}

fn remove(file: &FileShared, heap: u64, id: &[u8]) {
    let mut s = Session::new(file).unwrap();
    let mut c = HeapChange::begin(&mut s, heap).unwrap();
    c.remove(id).unwrap();
    c.finish().unwrap();
}

fn new_heap(file: &FileShared, params: FractalHeapParams) -> u64 {
    let mut s = Session::new(file).unwrap();
    create(&mut s, params).unwrap()
}

/// The header without its addresses (which depend on the allocation order).
fn shape(h: &FractalHeapHeader) -> FractalHeapHeader {
    let mut h = h.clone();
    h.address = 0;
    h.root_block_address = 0;
    h.huge_btree_address = 0;
    h
}

/// Objects inserted one after another give the IDs and header counters of the builder, for
/// link and attribute heap parameters, with objects big enough to skip blocks and rows.
#[test]
fn sequential_inserts_lay_out_as_the_builder() {
    let sizes_of: Vec<Vec<usize>> = vec![
        vec![20; 400],
        (0..300).map(|i| 10 + (i * 37) % 200).collect(),
        vec![
            30, 3000, 40, 4000, 17, 2500, 4096, 9, 1000, 4000, 4000, 4000,
        ],
    ];
    for params in [
        FractalHeapParams::dense_links(),
        FractalHeapParams::dense_attributes(),
    ] {
        for sizes in &sizes_of {
            let (_storage, file) = new_file(false);
            let heap = new_heap(&file, params);
            let mut b = FractalHeapBuilder::new(params, file.sizes).unwrap();
            let mut ids = Vec::new();
            for (i, &n) in sizes.iter().enumerate() {
                let obj = object(n, i as u64);
                let want = b.insert(&obj).unwrap();
                let got = insert(&file, heap, &obj);
                assert_eq!(got, want, "object {i} of {n} bytes");
                ids.push(got);
            }
            let mut next = 1u64 << 20;
            let built = b
                .finish(&mut |_k: FractalBlockKind, len| {
                    next += len;
                    next - len
                })
                .unwrap();
            let h = header(&mut Reading(&file), heap).unwrap();
            assert_eq!(shape(&h), shape(&built.header));
            for (i, (&n, id)) in sizes.iter().zip(&ids).enumerate() {
                assert_eq!(
                    read(&mut Reading(&file), heap, id).unwrap(),
                    object(n, i as u64)
                );
            }
        }
    }
}

/// Removing every object frees every block: the heap is empty again, its space given back.
#[test]
fn removing_everything_empties_the_heap() {
    let (_storage, file) = new_file(false);
    let heap = new_heap(&file, FractalHeapParams::dense_links());
    let ids: Vec<Vec<u8>> = (0..2_000)
        .map(|i| insert(&file, heap, &object(20 + i % 50, i as u64)))
        .collect();
    let h = header(&mut Reading(&file), heap).unwrap();
    assert!(h.root_rows > 4, "{h:?}");
    // Oldest first, then the rest backwards: blocks in the middle free up before the last.
    for (n, id) in ids.iter().enumerate() {
        if n % 2 == 0 {
            remove(&file, heap, id);
        }
    }
    for id in ids.iter().skip(1).step_by(2).rev() {
        remove(&file, heap, id);
    }
    let h = header(&mut Reading(&file), heap).unwrap();
    assert_eq!(h.root(), h5_format::heap::fractal::RootBlock::Empty);
    assert_eq!(
        (
            h.managed_object_count,
            h.managed_space,
            h.allocated_managed_space,
            h.managed_free_space,
            h.allocation_iterator_offset
        ),
        (0, 0, 0, 0, 0)
    );
}

/// A heap reverts to a root direct block when only its first block is left, and grows again.
#[test]
fn the_root_reverts_to_a_direct_block() {
    let (_storage, file) = new_file(false);
    let heap = new_heap(&file, FractalHeapParams::dense_links());
    let first = insert(&file, heap, &object(40, 1));
    let later: Vec<Vec<u8>> = (0..40)
        .map(|i| insert(&file, heap, &object(100, i)))
        .collect();
    assert!(header(&mut Reading(&file), heap).unwrap().root_rows > 0);
    for id in later.iter().rev() {
        remove(&file, heap, id);
    }
    let h = header(&mut Reading(&file), heap).unwrap();
    assert_eq!(h.root_rows, 0, "{h:?}");
    assert_eq!(h.managed_space, 512);
    assert_eq!(
        read(&mut Reading(&file), heap, &first).unwrap(),
        object(40, 1)
    );
    let again = insert(&file, heap, &object(300, 9));
    assert_eq!(
        read(&mut Reading(&file), heap, &again).unwrap(),
        object(300, 9)
    );
}

#[derive(Clone, Debug)]
enum Op {
    Insert(usize, u64),
    Remove(usize),
    Rewrite(usize, u64),
    Flush,
    Reopen,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let size = prop_oneof![
        3 => 1usize..7,
        10 => 7usize..200,
        3 => 200usize..4096,
        1 => 4097usize..12_000,
    ];
    prop::collection::vec(
        prop_oneof![
            6 => (size, any::<u64>()).prop_map(|(n, s)| Op::Insert(n, s)),
            4 => any::<usize>().prop_map(Op::Remove),
            1 => (any::<usize>(), any::<u64>()).prop_map(|(i, s)| Op::Rewrite(i, s)),
            1 => Just(Op::Flush),
            1 => Just(Op::Reopen),
        ],
        1..150,
    )
}

/// Structural check of the heap against the live objects: counters, and every managed object
/// inside one direct block's data area, none overlapping.
fn check_heap(file: &FileShared, heap: u64, live: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let h = header(&mut Reading(file), heap).unwrap();
    let (mut managed, mut tiny, mut huge, mut tiny_bytes, mut huge_bytes, mut man_bytes) =
        (0, 0, 0, 0, 0, 0);
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for (id, obj) in live {
        match HeapId::decode(id, &h).unwrap() {
            HeapId::Tiny(_) => {
                tiny += 1;
                tiny_bytes += obj.len() as u64;
            }
            HeapId::Managed { offset, len } => {
                managed += 1;
                man_bytes += len;
                spans.push((offset, len));
                let at = locate_direct(&mut Reading(file), &h, &h, offset)
                    .unwrap()
                    .expect("a managed object's block exists");
                assert!(offset >= at.block_offset + h.direct_block_header_len() as u64);
                assert!(offset + len <= at.block_offset + at.size);
                assert!(at.block_offset + at.size <= h.managed_space.max(1) || h.root_rows == 0);
            }
            HeapId::Huge(_) => {
                huge += 1;
                huge_bytes += obj.len() as u64;
            }
        }
        assert_eq!(&read(&mut Reading(file), heap, id).unwrap(), obj);
    }
    spans.sort_unstable();
    for w in spans.windows(2) {
        assert!(w[0].0 + w[0].1 <= w[1].0, "overlapping objects {w:?}");
    }
    assert_eq!(
        (
            h.managed_object_count,
            h.tiny_object_count,
            h.huge_object_count
        ),
        (managed, tiny, huge)
    );
    assert_eq!(
        (h.tiny_objects_size, h.huge_objects_size),
        (tiny_bytes, huge_bytes)
    );
    if managed == 0 {
        assert_eq!(h.managed_free_space, 0);
    }
    let _ = man_bytes;
}

fn run(ops: &[Op], tiny: bool) {
    let (storage, mut file) = new_file(tiny);
    let heap = new_heap(&file, FractalHeapParams::dense_attributes());
    let mut live: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for op in ops {
        match *op {
            Op::Insert(n, seed) => {
                let obj = object(n, seed);
                let id = insert(&file, heap, &obj);
                if live.contains_key(&id) {
                    // Tiny objects are their IDs: the same bytes twice is the same ID. The heap
                    // counted both; the second is removed again so that it counts what the
                    // map holds.
                    assert!(n <= 7, "a managed or huge ID handed out twice");
                    remove(&file, heap, &id);
                    check_heap(&file, heap, &live);
                    continue;
                }
                live.insert(id, obj);
            }
            Op::Remove(i) if !live.is_empty() => {
                let id = live.keys().nth(i % live.len()).unwrap().clone();
                remove(&file, heap, &id);
                live.remove(&id);
            }
            Op::Rewrite(i, seed) if !live.is_empty() => {
                let id = live.keys().nth(i % live.len()).unwrap().clone();
                let n = live[&id].len();
                let obj = object(n, seed);
                let mut s = Session::new(&file).unwrap();
                let mut c = HeapChange::begin(&mut s, heap).unwrap();
                let new_id = c.write(&id, &obj).unwrap();
                c.finish().unwrap();
                drop(s);
                live.remove(&id);
                live.insert(new_id, obj);
            }
            Op::Flush => file.flush().unwrap(),
            Op::Reopen => {
                file.flush().unwrap();
                drop(file);
                file = FileShared::open_rw(Arc::clone(&storage), &settings(tiny), None).unwrap();
            }
            _ => {}
        }
        check_heap(&file, heap, &live);
    }
    file.flush().unwrap();
    drop(file);
    let file = FileShared::open(storage, &settings(false), None).unwrap();
    check_heap(&file, heap, &live);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Tiny, managed and huge objects inserted, rewritten and removed at random, a tiny cache
    /// with invariant checks after every call.
    #[test]
    fn random_changes_match_a_map(ops in ops(), tiny in any::<bool>()) {
        run(&ops, tiny);
    }
}

/// Header counters of a damaged heap at their maximum (object counts, the next huge ID) make
/// an insert fail with a corrupt-heap error instead of wrapping the counter.
#[test]
fn header_counters_that_overflow_are_errors() {
    let (_storage, file) = new_file(false);
    let heap = new_heap(&file, FractalHeapParams::dense_links());
    let mut s = Session::new(&file).unwrap();
    let mut c = HeapChange::begin(&mut s, heap).unwrap();
    c.hdr.managed_object_count = u64::MAX;
    let err = c.insert(&object(40, 1)).unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::Corrupted, "{err}");
    c.hdr.tiny_object_count = u64::MAX;
    let err = c.insert(&object(2, 2)).unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::Corrupted, "{err}");
    c.hdr.tiny_object_count = 0;
    c.hdr.managed_object_count = 0;
    c.insert(&object(40, 3)).unwrap();
    c.finish().unwrap();
}
