//! The v2 B-tree engine against a reference map: random inserts, updates and removals with a
//! structural check after every change, a tiny metadata cache with per-call invariant checks,
//! and flushes and reopenings at random points.

use std::collections::BTreeMap;
use std::sync::Arc;

use h5_format::btree2::{Btree2Type, Record, RecordContext};
use proptest::prelude::*;

use super::*;
use crate::access::{Reading, Session};
use crate::file::FileShared;
use crate::testutil::{new_file, settings};

/// The trees under test: their record type and how to make a record and its key from a
/// number.
#[derive(Clone, Copy, Debug)]
enum Use {
    /// Chunk records of a 2-d dataset (2048-byte nodes).
    Chunks,
    /// Filtered chunk records of a 3-d dataset.
    FilteredChunks,
    /// Link creation orders (512-byte nodes).
    LinkOrder,
    /// Attribute creation orders.
    AttrOrder,
    /// Huge objects by ID.
    HugeIds,
}

impl Use {
    fn ctx(self, sizes: h5_format::Sizes) -> RecordContext {
        match self {
            Use::Chunks => RecordContext::for_chunks(sizes, 2, 4096),
            Use::FilteredChunks => RecordContext::for_chunks(sizes, 3, 4096),
            _ => RecordContext::new(sizes),
        }
    }

    fn tree_type(self) -> Btree2Type {
        match self {
            Use::Chunks => Btree2Type::Chunks,
            Use::FilteredChunks => Btree2Type::FilteredChunks,
            Use::LinkOrder => Btree2Type::LinkCreationOrder,
            Use::AttrOrder => Btree2Type::AttributeCreationOrder,
            Use::HugeIds => Btree2Type::HugeIndirect,
        }
    }

    fn scaled(self, k: u64) -> Vec<u64> {
        match self {
            Use::FilteredChunks => vec![k % 7, k / 7 % 13, k / 91],
            _ => vec![k / 100, k % 100],
        }
    }

    /// The record of key `k` carrying `v`.
    fn record(self, k: u64, v: u64) -> Record {
        let mut id = v.to_le_bytes()[..7].to_vec();
        id[0] = 0x20;
        match self {
            Use::Chunks => Record::Chunk {
                address: v,
                scaled: self.scaled(k),
            },
            Use::FilteredChunks => Record::FilteredChunk {
                address: v,
                size: v % 4000,
                filter_mask: (v % 3) as u32,
                scaled: self.scaled(k),
            },
            Use::LinkOrder => Record::LinkCreationOrder {
                creation_order: k,
                heap_id: h5_format::btree2::InlineHeapId::new(&id).expect("7 bytes fit"),
            },
            Use::AttrOrder => Record::AttributeCreationOrder {
                heap_id: v.to_le_bytes(),
                flags: 0,
                creation_order: k as u32,
            },
            Use::HugeIds => Record::HugeIndirect {
                address: v,
                length: v / 2,
                id: k + 1,
            },
        }
    }

    fn key(self, k: u64) -> Box<dyn Key> {
        match self {
            Use::Chunks | Use::FilteredChunks => Box::new(OwnedChunkKey(self.scaled(k))),
            Use::LinkOrder | Use::AttrOrder => Box::new(OrderKey(k)),
            Use::HugeIds => Box::new(HugeIdKey(k + 1)),
        }
    }

    /// Every key this use can make sorts the same way as the numbers (for the reference map).
    fn sort_key(self, k: u64) -> Vec<u64> {
        match self {
            Use::Chunks | Use::FilteredChunks => self.scaled(k),
            _ => vec![k],
        }
    }
}

struct OwnedChunkKey(Vec<u64>);

impl Key for OwnedChunkKey {
    fn cmp(&self, a: &mut dyn crate::access::MetaAccess, rec: &Record) -> Result<Ordering> {
        ChunkKey(&self.0).cmp(a, rec)
    }
}

fn order_of(u: Use) -> impl Fn(&Record, &Record) -> Ordering {
    move |a: &Record, b: &Record| {
        let k = |r: &Record| match r {
            Record::Chunk { scaled, .. } | Record::FilteredChunk { scaled, .. } => scaled.clone(),
            Record::LinkCreationOrder { creation_order, .. } => vec![*creation_order],
            Record::AttributeCreationOrder { creation_order, .. } => {
                vec![u64::from(*creation_order)]
            }
            Record::HugeIndirect { id, .. } => vec![*id],
            _ => Vec::new(),
        };
        let _ = u;
        k(a).cmp(&k(b))
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u64, u64),
    Remove(u64),
    Update(u64, u64),
    Flush,
    Reopen,
}

fn ops(max_key: u64) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            6 => (0..max_key, 1..u32::MAX as u64).prop_map(|(k, v)| Op::Insert(k, v)),
            3 => (0..max_key).prop_map(Op::Remove),
            1 => (0..max_key, 1..u32::MAX as u64).prop_map(|(k, v)| Op::Update(k, v)),
            1 => Just(Op::Flush),
            1 => Just(Op::Reopen),
        ],
        1..400,
    )
}

/// Runs `ops` on a fresh tree of `u` and checks it against a map after each one.
fn run(u: Use, ops: &[Op], tiny: bool, check_each: bool) {
    let _ = run_in(u, ops, tiny, check_each, false);
}

/// The file's bytes.
fn image(storage: &dyn h5_io::Storage) -> Vec<u8> {
    let mut bytes = vec![0u8; storage.len().unwrap() as usize];
    storage.read_at(0, &mut bytes).unwrap();
    bytes
}

/// Relative addresses of every node of `tree` (as the cache and the file have them).
fn node_addrs(a: &mut dyn crate::access::MetaAccess, tree: &Tree) -> Vec<u64> {
    fn walk(
        a: &mut dyn crate::access::MetaAccess,
        geom: &Arc<Btree2Header>,
        ctx: RecordContext,
        ptr: ChildPointer,
        depth: u16,
        out: &mut Vec<u64>,
    ) {
        let n = node(a, geom, ctx, ptr, depth).unwrap();
        out.push(ptr.address);
        for c in &n.children {
            walk(a, geom, ctx, *c, depth - 1, out);
        }
    }
    let geom = header(a, tree).unwrap();
    let mut out = Vec::new();
    if geom.root.address != UNDEFINED_ADDRESS {
        walk(a, &geom, tree.ctx, geom.root, geom.depth, &mut out);
    }
    out
}

/// [`run`], with the file in legacy SWMR-writing mode when `swmr` (reopenings become
/// flushes). Then, at each flush, every node the last flush left in the file (what a reader
/// that read the header then may still follow) must be byte for byte where it was: nodes
/// changed since moved (shadowing). Returns the greatest depth the tree had at a flush.
fn run_in(u: Use, ops: &[Op], tiny: bool, check_each: bool, swmr: bool) -> u16 {
    let mut deepest = 0;
    let (storage, mut file) = new_file(tiny);
    if swmr {
        file.start_swmr_write().unwrap();
    }
    // The nodes of the last flush and the file's bytes then.
    let mut published: Option<(Vec<u64>, Vec<u8>)> = None;
    let sizes = file.sizes;
    let ctx = u.ctx(sizes);
    let addr = {
        let mut s = Session::new(&file).unwrap();
        create(&mut s, params_for(u.tree_type(), &ctx).unwrap()).unwrap()
    };
    let tree = Tree { addr, ctx };
    let mut model: BTreeMap<Vec<u64>, (u64, Record)> = BTreeMap::new();
    let order = order_of(u);
    for op in ops {
        match *op {
            Op::Insert(k, v) => {
                let mut s = Session::new(&file).unwrap();
                let r = insert(&mut s, &tree, u.key(k).as_ref(), u.record(k, v));
                drop(s);
                match model.entry(u.sort_key(k)) {
                    std::collections::btree_map::Entry::Occupied(_) => {
                        assert!(matches!(r, Err(crate::Error::Exists(_))), "{r:?}");
                    }
                    std::collections::btree_map::Entry::Vacant(e) => {
                        r.unwrap();
                        e.insert((k, u.record(k, v)));
                    }
                }
            }
            Op::Remove(k) => {
                let mut s = Session::new(&file).unwrap();
                let r = remove(&mut s, &tree, u.key(k).as_ref()).unwrap();
                drop(s);
                assert_eq!(r, model.remove(&u.sort_key(k)).map(|(_, r)| r));
            }
            Op::Update(k, v) => {
                let mut s = Session::new(&file).unwrap();
                let new = u.record(k, v);
                let n2 = new.clone();
                let found =
                    update(&mut s, &tree, u.key(k).as_ref(), &mut |r| *r = n2.clone()).unwrap();
                drop(s);
                assert_eq!(found, model.contains_key(&u.sort_key(k)));
                if let Some(e) = model.get_mut(&u.sort_key(k)) {
                    e.1 = new;
                }
            }
            Op::Flush | Op::Reopen if swmr => {
                file.flush().unwrap();
                let now = image(&*storage);
                let geom = header(&mut Reading(&file), &tree).unwrap();
                deepest = deepest.max(geom.depth);
                let node_len = geom.node_size as usize;
                if let Some((nodes, then)) = &published {
                    for &n in nodes {
                        let at = file.abs(n).unwrap() as usize;
                        assert_eq!(
                            now.get(at..at + node_len),
                            then.get(at..at + node_len),
                            "node {n:#x} of the last flush changed in place"
                        );
                    }
                }
                published = Some((node_addrs(&mut Reading(&file), &tree), now));
            }
            Op::Flush => file.flush().unwrap(),
            Op::Reopen => {
                file.flush().unwrap();
                drop(file);
                file = FileShared::open_rw(Arc::clone(&storage), &settings(tiny), None).unwrap();
            }
        }
        if check_each {
            let n = check(&mut Reading(&file), &tree, Some(&order)).unwrap();
            assert_eq!(n, model.len() as u64);
        }
    }
    let want: Vec<Record> = model.values().map(|(_, r)| r.clone()).collect();
    assert_eq!(records(&mut Reading(&file), &tree).unwrap(), want);
    for (k, r) in model.values() {
        assert_eq!(
            find(&mut Reading(&file), &tree, u.key(*k).as_ref())
                .unwrap()
                .as_ref(),
            Some(r)
        );
    }
    // Read back from the bytes alone, by a read-only handle.
    if swmr {
        file.close().unwrap();
    } else {
        file.flush().unwrap();
    }
    drop(file);
    let file = FileShared::open(storage, &settings(false), None).unwrap();
    assert_eq!(records(&mut Reading(&file), &tree).unwrap(), want);
    assert_eq!(
        check(&mut Reading(&file), &tree, Some(&order)).unwrap(),
        want.len() as u64
    );
    deepest
}

/// Sequential inserts grow the tree to depth 2 and more; removing everything in another order
/// shrinks it back to empty (root collapses), with the structure checked all the way.
#[test]
fn grows_and_shrinks_through_every_depth() {
    for u in [Use::LinkOrder, Use::Chunks] {
        let n = if matches!(u, Use::Chunks) {
            12_000
        } else {
            4_000
        };
        let mut ops: Vec<Op> = (0..n).map(|k| Op::Insert(k, k * 3 + 1)).collect();
        ops.push(Op::Reopen);
        ops.extend((0..n).map(|k| Op::Remove((k * 7919) % n)));
        run(u, &ops, false, false);
    }
    // Depth reached, checked on a tree kept full.
    let (_storage, file) = new_file(false);
    let ctx = Use::LinkOrder.ctx(file.sizes);
    let mut s = Session::new(&file).unwrap();
    let addr = create(
        &mut s,
        params_for(Btree2Type::LinkCreationOrder, &ctx).unwrap(),
    )
    .unwrap();
    let tree = Tree { addr, ctx };
    for k in 0..5_000u64 {
        insert(&mut s, &tree, &OrderKey(k), Use::LinkOrder.record(k, k)).unwrap();
    }
    drop(s);
    let h = header(&mut Reading(&file), &tree).unwrap();
    assert!(h.depth >= 2, "depth {}", h.depth);
    assert_eq!(h.root.total_records, 5_000);
    let order = order_of(Use::LinkOrder);
    assert_eq!(
        check(&mut Reading(&file), &tree, Some(&order)).unwrap(),
        5_000
    );
}

/// Node sizes and split/merge percents are libhdf5's per use.
#[test]
fn parameters_are_libhdf5s() {
    let sizes = h5_format::Sizes::EIGHT;
    let p = params_for(
        Btree2Type::FilteredChunks,
        &RecordContext::for_chunks(sizes, 2, 1 << 20),
    )
    .unwrap();
    assert_eq!(
        (p.node_size, p.split_percent, p.merge_percent),
        (2048, 100, 40)
    );
    for t in [
        Btree2Type::LinkName,
        Btree2Type::LinkCreationOrder,
        Btree2Type::AttributeName,
        Btree2Type::AttributeCreationOrder,
        Btree2Type::HugeIndirect,
    ] {
        let p = params_for(t, &RecordContext::new(sizes)).unwrap();
        assert_eq!(
            (p.node_size, p.split_percent, p.merge_percent),
            (512, 100, 40)
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random changes on every use, a tiny cache with invariant checks after every call.
    #[test]
    fn random_changes_match_a_map_with_a_tiny_cache(
        which in 0usize..5,
        ops in ops(3_000),
    ) {
        let u = [Use::Chunks, Use::FilteredChunks, Use::LinkOrder, Use::AttrOrder, Use::HugeIds][which];
        run(u, &ops, true, true);
    }

    /// Dense key ranges make deep trees with many merges and redistributions.
    #[test]
    fn dense_keys_with_many_merges(ops in ops(600)) {
        run(Use::LinkOrder, &ops, false, true);
    }

    /// Random changes in legacy SWMR-writing mode (every changed node shadowed), a tiny cache:
    /// the tree matches the map, and no node of the last flush changes in place.
    #[test]
    fn random_changes_while_swmr_writing_never_touch_published_nodes(
        which in 0usize..3,
        ops in ops(1_500),
    ) {
        let u = [Use::Chunks, Use::FilteredChunks, Use::LinkOrder][which];
        let _ = run_in(u, &ops, true, true, true);
    }
}

/// In SWMR-writing mode, a tree grows to depth 2 and more (root growth, splits and
/// redistributions of internal nodes), every record is updated, and it shrinks back to empty
/// (merges, root collapses), flushed every 50 changes: no node of a flush changes in place
/// after it, and the tree matches the map throughout.
#[test]
fn grows_updates_and_shrinks_through_every_depth_while_swmr_writing() {
    let n = 4_000u64;
    let mut ops = Vec::new();
    let every = |ops: &mut Vec<Op>, i: u64| {
        if i % 50 == 49 {
            ops.push(Op::Flush);
        }
    };
    for k in 0..n {
        ops.push(Op::Insert((k * 7919) % n, k + 1));
        every(&mut ops, k);
    }
    for k in 0..n {
        ops.push(Op::Update((k * 104_729) % n, k + 7));
        every(&mut ops, k);
    }
    for k in 0..n {
        ops.push(Op::Remove((k * 7_907) % n));
        every(&mut ops, k);
    }
    ops.push(Op::Flush);
    let deepest = run_in(Use::LinkOrder, &ops, false, false, true);
    assert!(deepest >= 2, "depth {deepest}");
}

/// A tree of `u` in a file in legacy SWMR-writing mode (`swmr`) or not.
fn tree_in(u: Use, swmr: bool) -> (Arc<dyn h5_io::Storage>, Arc<FileShared>, Tree) {
    let (storage, file) = new_file(false);
    if swmr {
        file.start_swmr_write().unwrap();
    }
    let ctx = u.ctx(file.sizes);
    let addr = {
        let mut s = Session::new(&file).unwrap();
        create(&mut s, params_for(u.tree_type(), &ctx).unwrap()).unwrap()
    };
    (storage, file, Tree { addr, ctx })
}

fn put(file: &FileShared, tree: &Tree, u: Use, k: u64) {
    let mut s = Session::new(file).unwrap();
    insert(&mut s, tree, u.key(k).as_ref(), u.record(k, k + 1)).unwrap();
}

fn root_of(file: &FileShared, tree: &Tree) -> ChildPointer {
    header(&mut Reading(file), tree).unwrap().root
}

/// The bytes of the node at relative `addr` in the file.
fn node_bytes(storage: &dyn h5_io::Storage, file: &FileShared, addr: u64) -> Vec<u8> {
    let mut b = vec![0u8; CHUNK_NODE_SIZE as usize];
    storage.read_at(file.abs(addr).unwrap(), &mut b).unwrap();
    b
}

/// Shadowing (SWMR-writing mode): a node changed twice in one epoch moves once, a node
/// changed in the next epoch moves again, and the old node's bytes stay as they were.
#[test]
fn a_changed_node_moves_once_per_flush_epoch() {
    let u = Use::Chunks;
    let (storage, file, tree) = tree_in(u, true);
    put(&file, &tree, u, 0);
    let created = root_of(&file, &tree).address;
    // Created in this epoch: changes in place.
    put(&file, &tree, u, 1);
    assert_eq!(root_of(&file, &tree).address, created);
    file.flush().unwrap();
    let first = node_bytes(&*storage, &file, created);
    // First change in the next epoch: moves; a second change in it: stays.
    put(&file, &tree, u, 2);
    let moved = root_of(&file, &tree).address;
    assert_ne!(moved, created);
    put(&file, &tree, u, 3);
    assert_eq!(root_of(&file, &tree).address, moved);
    file.flush().unwrap();
    assert_eq!(
        node_bytes(&*storage, &file, created),
        first,
        "old node intact"
    );
    let second = node_bytes(&*storage, &file, moved);
    // The next epoch: it moves again, both old copies intact.
    let mut s = Session::new(&file).unwrap();
    let n2 = u.record(2, 99);
    assert!(update(&mut s, &tree, u.key(2).as_ref(), &mut |r| *r = n2.clone()).unwrap());
    drop(s);
    let again = root_of(&file, &tree).address;
    assert!(again != moved && again != created, "{again:#x}");
    file.flush().unwrap();
    assert_eq!(node_bytes(&*storage, &file, created), first);
    assert_eq!(node_bytes(&*storage, &file, moved), second);
    assert_eq!(
        records(&mut Reading(&file), &tree).unwrap(),
        [u.record(0, 1), u.record(1, 2), n2, u.record(3, 4)]
    );
    file.close().unwrap();
}

/// Outside SWMR-writing mode nodes change in place.
#[test]
fn nodes_stay_in_place_outside_swmr_writing() {
    let u = Use::Chunks;
    let (_storage, file, tree) = tree_in(u, false);
    put(&file, &tree, u, 0);
    let root = root_of(&file, &tree).address;
    file.flush().unwrap();
    put(&file, &tree, u, 1);
    file.flush().unwrap();
    assert_eq!(root_of(&file, &tree).address, root);
}

/// An update deep in a tree of depth 1 moves the leaf and the root above it (the root's
/// pointer to the leaf changed), once each per epoch; a leaf split (reshape) and the root's
/// growth move what they change too; every node of the last flush stays intact.
#[test]
fn updates_and_splits_shadow_the_path_to_the_root() {
    let u = Use::Chunks;
    let (storage, file, tree) = tree_in(u, true);
    let mut k = 0;
    while header(&mut Reading(&file), &tree).unwrap().depth == 0 {
        put(&file, &tree, u, k);
        k += 1;
    }
    file.flush().unwrap();
    let before = node_addrs(&mut Reading(&file), &tree);
    let bytes: Vec<Vec<u8>> = before
        .iter()
        .map(|&a| node_bytes(&*storage, &file, a))
        .collect();
    // Update the first record: its leaf and the root move, the other leaf does not.
    let n0 = u.record(0, 7);
    let mut s = Session::new(&file).unwrap();
    assert!(update(&mut s, &tree, u.key(0).as_ref(), &mut |r| *r = n0.clone()).unwrap());
    drop(s);
    let after = node_addrs(&mut Reading(&file), &tree);
    assert_eq!(after.len(), before.len());
    assert_ne!(after[0], before[0], "root moved");
    assert_ne!(after[1], before[1], "first leaf moved");
    assert_eq!(after[2..], before[2..], "untouched leaves stay");
    // Inserts until leaves split again: every node of the last flush stays intact.
    for _ in 0..400 {
        put(&file, &tree, u, k);
        k += 1;
    }
    file.flush().unwrap();
    for (a, b) in before.iter().zip(&bytes) {
        assert_eq!(
            &node_bytes(&*storage, &file, *a),
            b,
            "node {a:#x} changed in place"
        );
    }
    assert!(node_addrs(&mut Reading(&file), &tree).len() > before.len());
    let order = order_of(u);
    assert_eq!(check(&mut Reading(&file), &tree, Some(&order)).unwrap(), k);
    file.close().unwrap();
}

/// Record counts of a damaged tree (a child pointer's subtree count at `u64::MAX`, a count
/// already 0) are corrupt-tree errors when a change would step past them, not a wrap or a
/// panic.
#[test]
fn record_counts_that_overflow_are_errors() {
    let mut full = ChildPointer {
        address: 0x800,
        records: 3,
        total_records: u64::MAX,
    };
    let err = count_added(&mut full, true).unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::Corrupted, "{err}");
    let mut empty = ChildPointer {
        address: 0x800,
        records: 0,
        total_records: 0,
    };
    let err = count_removed(&mut empty, false).unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::Corrupted, "{err}");
    let mut fine = ChildPointer {
        address: 0x800,
        records: 1,
        total_records: 5,
    };
    count_added(&mut fine, true).unwrap();
    assert_eq!((fine.records, fine.total_records), (2, 6));
    count_removed(&mut fine, false).unwrap();
    assert_eq!((fine.records, fine.total_records), (2, 5));
    let node = Btree2Node {
        address: 0x900,
        depth: 1,
        records: Vec::new(),
        children: vec![full, fine],
    };
    let err = pointer_to(&node).unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::Corrupted, "{err}");
}
