//! The engine against reference models: random inserts and removes on group trees (with their
//! symbol table nodes and local heap) and chunk trees, small node K so trees grow several
//! levels, a 1 KiB metadata cache with per-call invariant checks, the tree's structure checked
//! after each step and everything re-read after a flush and a reopen of the file.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree1::{BtreeV1Node, NodeType};
use h5_format::symbol_node::ScratchPad;
use h5_io::{MemoryStorage, Storage};
use h5_metacache::CacheConfig;
use proptest::prelude::*;

use super::chunk::ChunkBtree;
use super::{Class, Tree, group};
use crate::access::CacheAccess;
use crate::file::{CacheSettings, FileShared};
use crate::layouts::ChunkRecord;
use crate::stab::{GroupKs, SymbolTable, Target};
use crate::write::{CreateOptions, FormatBounds};

fn settings() -> CacheSettings {
    CacheSettings {
        metadata: Some(CacheConfig::fixed_size(1024)),
        invariant_checks: true,
        ..CacheSettings::default()
    }
}

fn new_file(storage: &Arc<MemoryStorage>) -> Arc<FileShared> {
    FileShared::create(
        Arc::clone(storage) as Arc<dyn Storage>,
        &settings(),
        &CreateOptions {
            bounds: FormatBounds::Earliest,
            ..CreateOptions::default()
        },
        None,
    )
    .expect("create")
}

fn reopen(storage: &Arc<MemoryStorage>) -> Arc<FileShared> {
    FileShared::open_rw(Arc::clone(storage) as Arc<dyn Storage>, &settings(), None).expect("reopen")
}

/// Every node of the tree by level (the root's level first), each level in key order; checks
/// the structure on the way: levels, key and child counts, sibling links and the keys shared
/// by neighbours and by a parent and its children (`same` compares the parts of two keys that
/// must agree).
fn check_structure<C: Class>(
    c: &mut CacheAccess,
    t: &Tree,
    same: &dyn Fn(&C::Key, &C::Key) -> bool,
) -> Vec<Vec<(u64, Arc<BtreeV1Node>)>> {
    let root = t.read(c, t.root).expect("root");
    let mut levels = vec![vec![(t.root, Arc::clone(&root))]];
    let mut seen = HashSet::from([t.root]);
    loop {
        let level = levels.last().expect("a level");
        if level[0].1.level == 0 {
            break;
        }
        let mut next = Vec::new();
        for (addr, node) in level {
            let keys = C::keys(&node.keys).expect("keys");
            for (i, &child) in node.children.iter().enumerate() {
                assert!(seen.insert(child), "node {child:#x} reached twice");
                let n = t.read_at(c, child, Some(node.level - 1)).expect("child");
                let ck = C::keys(&n.keys).expect("child keys");
                assert!(!n.children.is_empty(), "empty non-root node {child:#x}");
                assert!(
                    same(&ck[0], &keys[i]),
                    "left key of {child:#x} under {addr:#x}"
                );
                assert!(
                    same(&ck[n.children.len()], &keys[i + 1]),
                    "right key of {child:#x} under {addr:#x}"
                );
                next.push((child, n));
            }
        }
        levels.push(next);
    }
    for level in &levels {
        for (i, (addr, node)) in level.iter().enumerate() {
            let keys = C::keys(&node.keys).expect("keys");
            assert_eq!(keys.len(), node.children.len() + 1, "keys of {addr:#x}");
            assert!(node.children.len() <= 2 * usize::from(t.k));
            let left = if i == 0 {
                UNDEFINED_ADDRESS
            } else {
                level[i - 1].0
            };
            let right = level.get(i + 1).map_or(UNDEFINED_ADDRESS, |n| n.0);
            assert_eq!(node.left_sibling, left, "left sibling of {addr:#x}");
            assert_eq!(node.right_sibling, right, "right sibling of {addr:#x}");
            if let Some((_, next)) = level.get(i + 1) {
                let nk = C::keys(&next.keys).expect("keys");
                assert!(
                    same(&keys[node.children.len()], &nk[0]),
                    "keys shared by {addr:#x} and its right sibling"
                );
            }
        }
    }
    levels
}

/// Group: the structure, then every symbol table node in order: entries sorted and above the
/// node's left key, its last name the node's right key. Returns the names.
fn check_group(c: &mut CacheAccess, st: SymbolTable, ks: GroupKs) -> Vec<Vec<u8>> {
    let t = Tree {
        root: st.btree,
        k: ks.internal,
        node_type: NodeType::Group,
        rank_plus_one: 0,
    };
    let levels = check_structure::<group::Walk>(c, &t, &|a, b| a == b);
    let heap = crate::lheap::LocalHeap { addr: st.heap };
    let leaves = group::Leaves { k: ks.leaf };
    let mut names: Vec<Vec<u8>> = Vec::new();
    for (_, node) in levels.last().expect("leaves") {
        if node.level != 0 {
            continue;
        }
        let keys = group::Walk::keys(&node.keys).expect("keys");
        for (i, &snod) in node.children.iter().enumerate() {
            let s = leaves.read(c, snod).expect("symbol table node");
            assert!(!s.entries.is_empty(), "empty symbol table node {snod:#x}");
            let lt = heap.string(c, keys[i]).expect("left key");
            let last = s.entries.last().expect("entry").link_name_offset;
            assert_eq!(last, keys[i + 1], "right key of {snod:#x}");
            let mut prev = lt;
            for e in &s.entries {
                let name = heap.string(c, e.link_name_offset).expect("name");
                assert!(name > prev, "names out of order in {snod:#x}");
                names.push(name.clone());
                prev = name;
            }
        }
    }
    names
}

/// Chunks: the structure (keys compared by offsets), then the leaves' keys strictly increasing.
/// Returns the chunks' records by scaled coordinates.
fn check_chunks(c: &mut CacheAccess, t: &Tree, dims: &[u64]) -> BTreeMap<Vec<u64>, (u64, u64)> {
    let levels = check_structure::<kinds::Chunks>(c, t, &|a, b| a.offsets == b.offsets);
    let mut out = BTreeMap::new();
    let mut prev: Option<Vec<u64>> = None;
    for (_, node) in levels.last().expect("leaves") {
        if node.level != 0 {
            continue;
        }
        let keys = kinds::Chunks::keys(&node.keys).expect("keys");
        for (i, &child) in node.children.iter().enumerate() {
            let k = &keys[i];
            assert!(k.chunk_size > 0, "a chunk key without a size");
            assert!(
                prev.as_ref().is_none_or(|p| *p < k.offsets),
                "keys out of order"
            );
            assert!(
                k.offsets < keys[i + 1].offsets,
                "right key not past the chunk"
            );
            prev = Some(k.offsets.clone());
            let rank = dims.len() - 1;
            let scaled = k
                .offsets
                .iter()
                .zip(dims)
                .take(rank)
                .map(|(o, d)| o / d)
                .collect();
            out.insert(scaled, (child, u64::from(k.chunk_size)));
        }
    }
    out
}

#[derive(Clone, Debug)]
enum GroupOp {
    Hard(u16),
    Soft(u16, u8),
    Remove(u16),
    Flush,
}

fn group_op() -> impl Strategy<Value = GroupOp> {
    prop_oneof![
        6 => (0u16..300).prop_map(GroupOp::Hard),
        2 => (0u16..300, 1u8..40).prop_map(|(n, l)| GroupOp::Soft(n, l)),
        5 => (0u16..300).prop_map(GroupOp::Remove),
        1 => Just(GroupOp::Flush),
    ]
}

/// Names of varied lengths (so heap blocks are reused, merged and split) in a scrambled order.
fn name_of(n: u16) -> Vec<u8> {
    let len = 1 + (usize::from(n) * 7) % 23;
    let mut s = format!("{:03}", (u32::from(n) * 37) % 1000).into_bytes();
    s.resize(len.max(3), b'a' + (n % 26) as u8);
    s
}

fn run_group_ops(ops: &[GroupOp], ks: GroupKs) {
    let storage = Arc::new(MemoryStorage::new());
    let file = new_file(&storage);
    let st = SymbolTable::create(&mut file.cache().expect("cache"), ks).expect("create");
    let mut model: BTreeMap<Vec<u8>, Target> = BTreeMap::new();
    for op in ops {
        match op {
            GroupOp::Hard(n) | GroupOp::Soft(n, _) => {
                let name = name_of(*n);
                let target = match op {
                    GroupOp::Soft(_, l) => Target::Soft(vec![b'/'; usize::from(*l)]),
                    _ => Target::Hard {
                        addr: 0x1000 + u64::from(*n),
                        scratch: ScratchPad::None,
                    },
                };
                let r = st.insert(&mut file.cache().expect("cache"), ks, &name, &target);
                match model.entry(name) {
                    std::collections::btree_map::Entry::Occupied(_) => {
                        assert!(matches!(r, Err(crate::Error::Exists(_))), "{r:?}");
                    }
                    std::collections::btree_map::Entry::Vacant(e) => {
                        r.expect("insert");
                        e.insert(target);
                    }
                }
            }
            GroupOp::Remove(n) => {
                let name = name_of(*n);
                let got = st
                    .remove(&mut file.cache().expect("cache"), ks, &name)
                    .expect("remove");
                assert_eq!(got.map(|l| l.target), model.remove(&name));
            }
            GroupOp::Flush => file.flush().expect("flush"),
        }
        let names = check_group(&mut file.cache().expect("cache"), st, ks);
        assert_eq!(names, model.keys().cloned().collect::<Vec<_>>());
    }
    let verify = |file: &FileShared| {
        let mut c = file.cache().expect("cache");
        let links = st.links(&mut c, ks).expect("links");
        let got: BTreeMap<Vec<u8>, Target> =
            links.into_iter().map(|l| (l.name, l.target)).collect();
        assert_eq!(got, model);
        for (name, target) in &model {
            let l = st.find(&mut c, ks, name).expect("find").expect("found");
            assert_eq!(&l.target, target);
        }
        assert!(st.find(&mut c, ks, b"absent~").expect("find").is_none());
    };
    verify(&file);
    file.flush().expect("flush");
    drop(file);
    let file = reopen(&storage);
    verify(&file);
    check_group(&mut file.cache().expect("cache"), st, ks);
    // Deleting the group frees every node, the heap and the B-tree root: the file shrinks back
    // to its size before the group existed.
    let deleted = st
        .delete(&mut file.cache().expect("cache"), ks)
        .expect("delete");
    assert_eq!(deleted.len(), model.len());
    file.flush().expect("flush");
}

#[derive(Clone, Debug)]
enum ChunkOp {
    Put(u8, u8, u32),
    Remove(u8, u8),
    Flush,
}

fn chunk_op() -> impl Strategy<Value = ChunkOp> {
    prop_oneof![
        6 => (0u8..24, 0u8..12, 1u32..5000).prop_map(|(a, b, s)| ChunkOp::Put(a, b, s)),
        3 => (0u8..24, 0u8..12).prop_map(|(a, b)| ChunkOp::Remove(a, b)),
        1 => Just(ChunkOp::Flush),
    ]
}

fn run_chunk_ops(ops: &[ChunkOp], k: u16) {
    let storage = Arc::new(MemoryStorage::new());
    let file = new_file(&storage);
    let dims = vec![5u64, 3, 4];
    let tree = ChunkBtree::create(file.cache_handle(), k, dims.clone()).expect("create");
    let t = Tree {
        root: tree.root(),
        k,
        node_type: NodeType::RawData,
        rank_plus_one: 3,
    };
    let mut model: BTreeMap<Vec<u64>, (u64, u64)> = BTreeMap::new();
    for op in ops {
        match *op {
            ChunkOp::Put(a, b, size) => {
                let scaled = vec![u64::from(a), u64::from(b)];
                // Addresses are arbitrary: the index does not look at the chunks.
                let addr =
                    0x10_0000 + u64::from(a) * 0x1000 + u64::from(b) * 0x10 + u64::from(size);
                tree.insert(
                    &scaled,
                    ChunkRecord {
                        addr,
                        size: u64::from(size),
                        filter_mask: size % 3,
                    },
                )
                .expect("insert");
                model.insert(scaled, (addr, u64::from(size)));
            }
            ChunkOp::Remove(a, b) => {
                let scaled = vec![u64::from(a), u64::from(b)];
                let got = tree.remove(&scaled).expect("remove");
                assert_eq!(got.map(|r| (r.addr, r.size)), model.remove(&scaled));
            }
            ChunkOp::Flush => file.flush().expect("flush"),
        }
        let got = check_chunks(&mut file.cache().expect("cache"), &t, &dims);
        assert_eq!(got, model);
    }
    let verify = |tree: &ChunkBtree| {
        let mut coords: Vec<Vec<u64>> = (0..24)
            .flat_map(|a| (0..12).map(move |b| vec![a, b]))
            .collect();
        coords.push(vec![99, 0]);
        let refs: Vec<&[u64]> = coords.iter().map(Vec::as_slice).collect();
        let found = tree.lookup(&refs).expect("lookup");
        for (c, f) in coords.iter().zip(found) {
            assert_eq!(f.map(|r| (r.addr, r.size)), model.get(c).copied(), "{c:?}");
            if let Some(r) = f {
                assert_eq!(u64::from(r.filter_mask), r.size % 3);
            }
        }
        let records = tree.records().expect("records");
        assert_eq!(records.len(), model.len());
    };
    verify(&tree);
    file.flush().expect("flush");
    drop(tree);
    drop(file);
    let file = reopen(&storage);
    let tree = ChunkBtree::open(file.cache_handle(), t.root, k, dims.clone());
    verify(&tree);
    assert_eq!(tree.delete().expect("delete").len(), model.len());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn group_trees_follow_a_reference_map(ops in proptest::collection::vec(group_op(), 1..220)) {
        run_group_ops(&ops, GroupKs { leaf: 2, internal: 2 });
    }

    #[test]
    fn group_trees_with_the_default_k_follow_a_reference_map(
        ops in proptest::collection::vec(group_op(), 1..220)
    ) {
        run_group_ops(&ops, GroupKs { leaf: 4, internal: 16 });
    }

    #[test]
    fn chunk_trees_follow_a_reference_map(ops in proptest::collection::vec(chunk_op(), 1..260)) {
        run_chunk_ops(&ops, 2);
    }
}

#[test]
fn sequential_appends_fill_left_nodes_as_libhdf5_does() {
    // K = 2 (four children per node): the rightmost node splits 3 / 1 (ratio 0.9), so appends
    // leave every node but the last with three children.
    let storage = Arc::new(MemoryStorage::new());
    let file = new_file(&storage);
    let dims = vec![1u64, 4];
    let tree = ChunkBtree::create(file.cache_handle(), 2, dims.clone()).expect("create");
    let root = tree.root();
    for i in 0..30u64 {
        let rec = ChunkRecord {
            addr: 0x8000 + 4 * i,
            size: 4,
            filter_mask: 0,
        };
        tree.insert(&[i], rec).expect("insert");
    }
    let t = Tree {
        root,
        k: 2,
        node_type: NodeType::RawData,
        rank_plus_one: 2,
    };
    let mut c = file.cache().expect("cache");
    let got = check_chunks(&mut c, &t, &dims);
    assert_eq!(got.len(), 30);
    let levels = check_structure::<kinds::Chunks>(&mut c, &t, &|a, b| a.offsets == b.offsets);
    let leaves = levels.last().expect("leaves");
    let fill: Vec<usize> = leaves.iter().map(|(_, n)| n.children.len()).collect();
    assert!(fill[..fill.len() - 1].iter().all(|&n| n == 3), "{fill:?}");
    // The root stays where the layout message points; the tree grew under it.
    assert_eq!(levels[0][0].0, root);
    assert!(levels.len() >= 3, "{} levels", levels.len());
}

#[test]
fn removing_everything_leaves_an_empty_root_and_frees_the_nodes() {
    let storage = Arc::new(MemoryStorage::new());
    let file = new_file(&storage);
    file.flush().expect("flush");
    let empty_len = storage.len().expect("len");
    let ks = GroupKs {
        leaf: 2,
        internal: 2,
    };
    let st = SymbolTable::create(&mut file.cache().expect("cache"), ks).expect("create");
    let names: BTreeSet<Vec<u8>> = (0..200).map(name_of).collect();
    for n in &names {
        let t = Target::Soft(b"/x".to_vec());
        st.insert(&mut file.cache().expect("cache"), ks, n, &t)
            .expect("insert");
    }
    file.flush().expect("flush");
    assert!(storage.len().expect("len") > empty_len + 4000);
    for n in names.iter().rev() {
        st.remove(&mut file.cache().expect("cache"), ks, n)
            .expect("remove")
            .expect("present");
    }
    let mut c = file.cache().expect("cache");
    assert!(check_group(&mut c, st, ks).is_empty());
    let t = Tree {
        root: st.btree,
        k: ks.internal,
        node_type: NodeType::Group,
        rank_plus_one: 0,
    };
    let root = t.read(&mut c, st.btree).expect("root");
    assert_eq!((root.level, root.children.len()), (0, 0));
    st.delete(&mut c, ks).expect("delete");
    drop(c);
    // The freed space was part of the flushed file: it is released once the next flush has
    // committed (delayed reuse), and a second flush cuts it off the end.
    file.flush().expect("flush");
    file.flush().expect("flush");
    // Every node, heap block and the heap and root themselves were freed: the file ends where
    // it ended before the group.
    assert_eq!(storage.len().expect("len"), empty_len);
}

/// The chunk kind's keys, for the structure checks.
mod kinds {
    use h5_format::btree1::{ChunkKey, Keys};

    use super::super::{Class, Critical};
    use crate::access::CacheAccess;

    pub(super) struct Chunks;

    impl Class for Chunks {
        type Key = ChunkKey;
        const FOLLOW_MIN: bool = false;
        const FOLLOW_MAX: bool = false;
        const CRITICAL: Critical = Critical::Left;
        fn keys(keys: &Keys) -> Option<&Vec<ChunkKey>> {
            match keys {
                Keys::RawData(k) => Some(k),
                Keys::Group(_) => None,
            }
        }
        fn keys_mut(keys: &mut Keys) -> Option<&mut Vec<ChunkKey>> {
            match keys {
                Keys::RawData(k) => Some(k),
                Keys::Group(_) => None,
            }
        }
        fn wrap(keys: Vec<ChunkKey>) -> Keys {
            Keys::RawData(keys)
        }
        fn empty_key(&self) -> ChunkKey {
            unreachable!("not used by the checks")
        }
        fn cmp3(
            &mut self,
            _: &mut CacheAccess,
            _: &ChunkKey,
            _: &ChunkKey,
        ) -> crate::Result<std::cmp::Ordering> {
            unreachable!("not used by the checks")
        }
    }
}

/// The shape of a tree: per node in key order, level by level, its level and keys (chunk keys
/// as size and offsets, group keys as heap offsets); and for group trees each symbol table
/// node's entries' name offsets.
type Shape = (Vec<(u8, Vec<Vec<u64>>)>, Vec<Vec<u64>>);

fn chunk_shape(c: &mut CacheAccess, t: &Tree, dims: &[u64]) -> Shape {
    check_chunks(c, t, dims);
    let levels = check_structure::<kinds::Chunks>(c, t, &|a, b| a.offsets == b.offsets);
    let nodes = levels
        .iter()
        .flatten()
        .map(|(_, n)| {
            let keys = kinds::Chunks::keys(&n.keys).expect("keys");
            let keys = keys
                .iter()
                .map(|k| {
                    let mut v = vec![u64::from(k.chunk_size)];
                    v.extend(&k.offsets);
                    v
                })
                .collect();
            (n.level, keys)
        })
        .collect();
    (nodes, Vec::new())
}

fn group_shape(c: &mut CacheAccess, st: SymbolTable, ks: GroupKs) -> Shape {
    check_group(c, st, ks);
    let t = Tree {
        root: st.btree,
        k: ks.internal,
        node_type: NodeType::Group,
        rank_plus_one: 0,
    };
    let levels = check_structure::<group::Walk>(c, &t, &|a, b| a == b);
    let leaves = group::Leaves { k: ks.leaf };
    let mut snods = Vec::new();
    let mut nodes = Vec::new();
    for (_, n) in levels.iter().flatten() {
        let keys = group::Walk::keys(&n.keys).expect("keys").clone();
        nodes.push((n.level, vec![keys]));
        if n.level == 0 {
            for &s in &n.children {
                let s = leaves.read(c, s).expect("symbol table node");
                snods.push(s.entries.iter().map(|e| e.link_name_offset).collect());
            }
        }
    }
    let hdr = crate::lheap::LocalHeap { addr: st.heap }
        .header(c)
        .expect("heap");
    snods.push(vec![hdr.data_segment_size, hdr.free_list_head.unwrap_or(1)]);
    (nodes, snods)
}

/// Where the dataset `/d` keeps its chunk B-tree and the group `/g` its symbol table.
fn structures(file: &FileShared) -> (u64, SymbolTable) {
    use h5_format::message::Message;
    use h5_format::message::layout::{ChunkIndex, LayoutClass};
    let root = crate::object::ObjectHeader::load(file, file.root_address()).expect("root");
    let target = |name: &str| match crate::group::find(file, &root, name)
        .expect("find")
        .expect("link")
        .value
    {
        crate::group::LinkValue::Hard(a) => crate::object::ObjectHeader::load(file, a).expect("oh"),
        v => panic!("{name}: {v:?}"),
    };
    let d = target("d");
    let btree = d
        .find(|m| match m {
            Message::Layout(l) => match &l.class {
                LayoutClass::Chunked {
                    index: ChunkIndex::BtreeV1 { address },
                    ..
                } => Some(*address),
                _ => None,
            },
            _ => None,
        })
        .expect("a v1 B-tree layout");
    let g = target("g");
    let st = g
        .find(|m| match m {
            Message::SymbolTable(s) => Some(SymbolTable {
                btree: s.btree_address,
                heap: s.heap_address,
            }),
            _ => None,
        })
        .expect("a symbol table");
    (btree, st)
}

/// libhdf5 (h5py) and the engine apply the same inserts and removes, from the same file (node K
/// of 2 for every tree, so they split often): the trees come out node for node the same —
/// split points, root growth, keys, symbol table node contents, name offsets in the heap, the
/// heap's size and free list.
#[test]
fn trees_match_what_libhdf5_builds_from_the_same_changes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let start = dir.join("start.h5");
    let ours = dir.join("ours.h5");
    let theirs = dir.join("theirs.h5");
    let mut ops: Vec<serde_json::Value> = Vec::new();
    // Chunks: scattered, then appended, then the tail cut off.
    for k in 0..40u64 {
        ops.push(serde_json::json!(["chunk", (k * 7) % 40]));
    }
    for i in 40..75u64 {
        ops.push(serde_json::json!(["chunk", i]));
    }
    ops.push(serde_json::json!(["shrink", 23]));
    // Links: names of many lengths in a scrambled order, some removed, some added again;
    // `live` follows the names in the order they went into the heap.
    let name = |n: u64| String::from_utf8(name_of(n as u16)).expect("ascii");
    let mut live: Vec<u64> = Vec::new();
    for n in 0..150u64 {
        let n = (n * 61) % 150;
        ops.push(serde_json::json!(["link", name(n)]));
        live.push(n);
    }
    for n in (0..150u64).step_by(3) {
        let n = (n * 61) % 150;
        ops.push(serde_json::json!(["unlink", name(n)]));
        live.retain(|&l| l != n);
    }
    for n in (0..150u64).step_by(6) {
        let n = (n * 61) % 150;
        ops.push(serde_json::json!(["link", name(n)]));
        live.push(n);
    }
    // Soft links (their values in the heap too), then the latest links removed first: the
    // heap's free tail passes half of it and the heap shrinks.
    for n in 150..190u64 {
        let path = "/d".repeat(1 + (n as usize % 9));
        ops.push(serde_json::json!(["soft", name(n), path]));
        live.push(n);
    }
    for n in live[12..].iter().rev() {
        ops.push(serde_json::json!(["unlink", name(*n)]));
    }
    let ops_json = serde_json::Value::Array(ops.clone()).to_string();
    h5_testkit::verify::run_python(
        r#"
import sys, json, shutil, ctypes, glob, os, h5py, numpy as np
start, theirs, ops = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
# h5py does not wrap H5Pset_sym_k / H5Pset_istore_k: call them in the libhdf5 h5py loaded.
libs = os.path.join(os.path.dirname(h5py.__file__), "..", "h5py.libs", "libhdf5-*.so*")
lib = ctypes.CDLL(sorted(glob.glob(libs))[0])
fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
assert lib.H5Pset_sym_k(ctypes.c_int64(fcpl.id), ctypes.c_uint(2), ctypes.c_uint(2)) >= 0
assert lib.H5Pset_istore_k(ctypes.c_int64(fcpl.id), ctypes.c_uint(2)) >= 0
fid = h5py.h5f.create(start.encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl)
with h5py.File(fid) as f:
    f.create_dataset("d", shape=(0,), maxshape=(None,), chunks=(1,), dtype="<i4")
    f.create_group("g")
shutil.copy(start, theirs)
# Chunks go straight into the index, in the order written (no chunk cache reordering them).
with h5py.File(theirs, "r+", rdcc_nbytes=0) as f:
    d, g = f["d"], f["g"]
    for op in ops:
        if op[0] == "chunk":
            if d.shape[0] <= op[1]:
                d.resize((op[1] + 1,))
            d.id.write_direct_chunk((op[1],), np.int32(op[1]).tobytes())
        elif op[0] == "shrink":
            d.resize((op[1],))
        elif op[0] == "link":
            g[op[1]] = d
        elif op[0] == "soft":
            g[op[1]] = h5py.SoftLink(op[2])
        else:
            del g[op[1]]
"#,
        &[
            start.to_str().expect("path"),
            theirs.to_str().expect("path"),
            &ops_json,
        ],
    );
    std::fs::copy(&start, &ours).expect("copy");
    let storage: Arc<dyn Storage> =
        Arc::new(h5_io::FileStorage::open(&ours, h5_io::OpenMode::ReadWrite).expect("open"));
    let file = FileShared::open_rw(storage, &settings(), None).expect("open rw");
    let (root, st) = structures(&file);
    let ks = file.group_ks();
    assert_eq!((ks.leaf, ks.internal, file.chunk_btree_k()), (2, 2, 2));
    let dims = vec![1u64, 4];
    // libhdf5 makes the index with the first chunk.
    assert_eq!(root, UNDEFINED_ADDRESS);
    let tree = ChunkBtree::create(file.cache_handle(), 2, dims.clone()).expect("create");
    let root = tree.root();
    let target = crate::stab::Target::Hard {
        addr: 0x40,
        scratch: ScratchPad::None,
    };
    let mut len = 0u64;
    let mut heap_peak = 0u64;
    for op in &ops {
        let arg = &op[1];
        match op[0].as_str().expect("op") {
            "chunk" => {
                let i = arg.as_u64().expect("index");
                len = len.max(i + 1);
                let rec = ChunkRecord {
                    addr: 0x10_0000 + 4 * i,
                    size: 4,
                    filter_mask: 0,
                };
                tree.insert(&[i], rec).expect("insert");
            }
            "shrink" => {
                for i in arg.as_u64().expect("length")..len {
                    tree.remove(&[i]).expect("remove");
                }
            }
            "link" => st
                .insert(
                    &mut file.cache().expect("cache"),
                    ks,
                    arg.as_str().expect("name").as_bytes(),
                    &target,
                )
                .expect("link"),
            "soft" => {
                let path = op[2].as_str().expect("path").as_bytes().to_vec();
                st.insert(
                    &mut file.cache().expect("cache"),
                    ks,
                    arg.as_str().expect("name").as_bytes(),
                    &crate::stab::Target::Soft(path),
                )
                .expect("soft link")
            }
            _ => {
                st.remove(
                    &mut file.cache().expect("cache"),
                    ks,
                    arg.as_str().expect("name").as_bytes(),
                )
                .expect("unlink")
                .expect("present");
            }
        }
        let size = crate::lheap::LocalHeap { addr: st.heap }
            .header(&mut file.cache().expect("cache"))
            .expect("heap")
            .data_segment_size;
        heap_peak = heap_peak.max(size);
    }
    let heap_now = |file: &FileShared| {
        crate::lheap::LocalHeap { addr: st.heap }
            .header(&mut file.cache().expect("cache"))
            .expect("heap")
            .data_segment_size
    };
    let t = Tree {
        root,
        k: 2,
        node_type: NodeType::RawData,
        rank_plus_one: 2,
    };
    // The heap grew (in place or moved) and shrank again.
    assert!(heap_peak > 4 * heap_hint_default(), "{heap_peak}");
    assert!(
        heap_now(&file) <= heap_peak / 2,
        "{} of {heap_peak}",
        heap_now(&file)
    );
    let ours_shape = {
        let mut c = file.cache().expect("cache");
        (chunk_shape(&mut c, &t, &dims), group_shape(&mut c, st, ks))
    };
    let theirs_file = FileShared::open(
        Arc::new(h5_io::FileStorage::open(&theirs, h5_io::OpenMode::ReadOnly).expect("open")),
        &CacheSettings::default(),
        None,
    )
    .expect("open theirs");
    let (their_root, their_st) = structures(&theirs_file);
    let theirs_shape = {
        let mut c = theirs_file.cache().expect("cache");
        let t = Tree {
            root: their_root,
            ..t
        };
        (
            chunk_shape(&mut c, &t, &dims),
            group_shape(&mut c, their_st, ks),
        )
    };
    assert_eq!(ours_shape.0, theirs_shape.0, "chunk trees");
    assert_eq!(ours_shape.1, theirs_shape.1, "group trees");
}

/// The data segment of a new group's heap (libhdf5's estimate for 8-byte lengths).
fn heap_hint_default() -> u64 {
    88
}
