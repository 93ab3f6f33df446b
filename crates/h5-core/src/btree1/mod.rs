//! Version 1 B-trees (`TREE`) as metadata-cache clients, read and changed one node at a time:
//! lookup, insert (with node splits and root growth), update of a record, remove, whole-tree
//! deletion and in-order visits, for both node types (group nodes, [`group`]; raw-data chunk
//! nodes, [`chunk`]). The algorithms are libhdf5's (`H5B.c`), read for its facts:
//!
//! * a node holds at most `2K` children and `2K + 1` keys; child `i` lies between key `i` and
//!   key `i + 1`, and which of the two bounds it exactly (the *critical* key) depends on the
//!   tree: the right one for groups (the last name of a symbol table node), the left one for
//!   chunks (the chunk's own key);
//! * a full node splits when a child is added: the old node keeps `2K × ratio` children (0.9
//!   for the rightmost node of its level, 0.1 for the leftmost, 0.5 otherwise; libhdf5's
//!   default split ratios), adjusted so that the new child stays beside the one that split;
//!   the new node goes to its right and the sibling pointers are relinked;
//! * when the root splits, its contents move to a new node and the root, at the same address
//!   (the symbol table or layout message points at it), becomes its parent;
//! * removal never rebalances: a node left without children is freed (unless it is the root,
//!   which goes back to level 0) and the keys of its neighbours are fixed up.
//!
//! Every node a change touches is protected, changed and unprotected dirtied through the
//! metadata cache ([`CacheAccess::put`], [`CacheAccess::modify`]) while the caller holds the cache
//! for the whole operation. No flush dependencies are set between nodes: libhdf5 sets none for
//! version 1 B-trees (their cache class has no notify callback, and their chunk index refuses
//! SWMR access), so the order in which a flush writes a parent and its children does not matter
//! to readers of a closed file; h5 writes them in address order like every other entry.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::sync::Arc;

use h5_format::btree1::{BtreeV1Node, Keys, NodeType, node_len};
use h5_format::{FormatError, UNDEFINED_ADDRESS};
use h5_metacache::MetadataKind as K;

use crate::access::CacheAccess;
use crate::error::{Error, Result};
use crate::meta::{Decoded, Load};

pub(crate) mod chunk;
pub(crate) mod group;
#[cfg(test)]
mod tests;

/// libhdf5's default split ratios (`H5D_XFER_BTREE_SPLIT_RATIO_DEF`): the share of a full
/// node's children the old node keeps when it is the leftmost of its level, in the middle, or
/// the rightmost (or only) one.
const SPLIT_RATIOS: [f64; 3] = [0.1, 0.5, 0.9];

/// What a change below a node asks of it (libhdf5's `H5B_ins_t`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Ins {
    /// Nothing more to do.
    Noop,
    /// Add the new child to the left of the one followed.
    Left,
    /// Add the new child to the right of the one followed.
    Right,
    /// The child followed has a new address.
    Change,
    /// Remove the child followed.
    Remove,
    /// The record sought is not in the tree (nothing changed).
    Absent,
}

/// Why a leaf's `new_node` callback is called.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum NewNode {
    /// The first child of an empty tree.
    First,
    /// A new child left of every other.
    Left,
    /// A new child right of every other.
    Right,
}

/// Which key of a child bounds it exactly.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Critical {
    /// Key `i` of child `i` (chunk trees).
    Left,
    /// Key `i + 1` of child `i` (group trees).
    Right,
}

/// The fixed parameters of one tree.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tree {
    /// Relative address of the root node (never changes).
    pub(crate) root: u64,
    /// Node K: `2K` children per node.
    pub(crate) k: u16,
    /// Group or raw-data nodes.
    pub(crate) node_type: NodeType,
    /// Offsets in a chunk key (dataset rank + 1); 0 for groups.
    pub(crate) rank_plus_one: usize,
}

impl Tree {
    #[allow(clippy::arithmetic_side_effects, reason = "K is a u16")]
    fn two_k(&self) -> usize {
        2 * usize::from(self.k)
    }

    fn node_len(&self, c: &CacheAccess) -> Result<usize> {
        Ok(node_len(
            c.sizes,
            self.k,
            self.node_type,
            self.rank_plus_one,
        )?)
    }

    fn load(&self, c: &CacheAccess, addr: u64) -> Result<Load> {
        let sizes = c.sizes;
        let k = self.k;
        let dims = (self.node_type == NodeType::RawData).then_some(self.rank_plus_one);
        Ok(Load::codec(
            self.node_len(c)?,
            move |b| BtreeV1Node::decode(b, sizes, addr, dims),
            move |n: &BtreeV1Node| n.encode(sizes, k),
        ))
    }

    fn entry(&self, c: &CacheAccess, node: BtreeV1Node) -> Result<Decoded> {
        let sizes = c.sizes;
        let k = self.k;
        Ok(Decoded::writable(
            self.node_len(c)?,
            node,
            move |n: &BtreeV1Node| n.encode(sizes, k),
        ))
    }

    fn read(&self, c: &mut CacheAccess, addr: u64) -> Result<Arc<BtreeV1Node>> {
        if self.k == 0 {
            return Err(corrupt(addr, "node K of 0"));
        }
        let load = self.load(c, addr)?;
        let node: Arc<BtreeV1Node> = c.read(K::BTreeV1Node, addr, &load)?;
        if node.children.len() > self.two_k() {
            return Err(corrupt(
                addr,
                format!(
                    "{} children in a node of at most {}",
                    node.children.len(),
                    self.two_k()
                ),
            ));
        }
        Ok(node)
    }

    /// The node at `addr`, which must be at `level` when one is expected.
    fn read_at(
        &self,
        c: &mut CacheAccess,
        addr: u64,
        level: Option<u8>,
    ) -> Result<Arc<BtreeV1Node>> {
        let node = self.read(c, addr)?;
        if level.is_some_and(|l| l != node.level) {
            return Err(corrupt(
                addr,
                format!(
                    "node at level {} where level {level:?} was expected",
                    node.level
                ),
            ));
        }
        Ok(node)
    }

    fn write(&self, c: &mut CacheAccess, addr: u64, node: BtreeV1Node) -> Result<()> {
        let entry = self.entry(c, node)?;
        c.put(K::BTreeV1Node, addr, entry)
    }

    fn modify(
        &self,
        c: &mut CacheAccess,
        addr: u64,
        change: impl FnOnce(&mut BtreeV1Node) -> Result<()>,
    ) -> Result<()> {
        let load = self.load(c, addr)?;
        c.modify(K::BTreeV1Node, addr, &load, change)
    }
}

fn corrupt(address: u64, reason: impl Into<String>) -> Error {
    Error::Format(FormatError::Corrupted {
        structure: "v1 B-tree",
        address,
        reason: reason.into(),
    })
}

/// A tree kind (its keys) together with one request on it (what is sought, inserted or
/// removed): libhdf5's `H5B_class_t` with its user data. The leaf callbacks not used by an
/// operation keep their defaults.
pub(crate) trait Class {
    /// A key.
    type Key: Clone + PartialEq;
    /// An insert left of every key descends to the leftmost child (else a new child is made).
    const FOLLOW_MIN: bool;
    /// An insert right of every key descends to the rightmost child (else a new child is made).
    const FOLLOW_MAX: bool;
    /// Which key bounds a child exactly.
    const CRITICAL: Critical;

    /// The node's keys, when it is of this tree's type.
    fn keys(keys: &Keys) -> Option<&Vec<Self::Key>>;
    /// The node's keys, mutably.
    fn keys_mut(keys: &mut Keys) -> Option<&mut Vec<Self::Key>>;
    /// Keys as a node holds them.
    fn wrap(keys: Vec<Self::Key>) -> Keys;
    /// The key of an empty tree.
    fn empty_key(&self) -> Self::Key;

    /// Where the request lies against the child between `lt` and `rt`: `Less` left of it,
    /// `Greater` right of it, `Equal` inside.
    fn cmp3(&mut self, c: &mut CacheAccess, lt: &Self::Key, rt: &Self::Key) -> Result<Ordering>;

    /// Lookup at a leaf: whether the leaf child `child` (left key `lt`) holds the request.
    fn found(&mut self, _c: &mut CacheAccess, _child: u64, _lt: &Self::Key) -> Result<bool> {
        Err(Error::Unsupported("lookup in this B-tree".into()))
    }

    /// Insert: a new leaf child for the request; sets the keys it owns and returns the child.
    fn new_node(
        &mut self,
        _c: &mut CacheAccess,
        _op: NewNode,
        _lt: &mut Self::Key,
        _rt: &mut Self::Key,
    ) -> Result<u64> {
        Err(Error::Unsupported("insertion into this B-tree".into()))
    }

    /// Insert into the leaf child `child`: what the node must do and, for `Left`, `Right` and
    /// `Change`, the new child. `md` receives the key between the old and a new child.
    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        _c: &mut CacheAccess,
        _child: u64,
        _lt: &mut Self::Key,
        _lt_changed: &mut bool,
        _md: &mut Self::Key,
        _rt: &mut Self::Key,
        _rt_changed: &mut bool,
    ) -> Result<(Ins, u64)> {
        Err(Error::Unsupported("insertion into this B-tree".into()))
    }

    /// Remove from the leaf child `child`: `Remove` when the child goes, `Noop` when it stays
    /// (keys it changed are flagged), `Absent` when it does not hold the request.
    fn remove(
        &mut self,
        _c: &mut CacheAccess,
        _child: u64,
        _lt: &mut Self::Key,
        _lt_changed: &mut bool,
        _rt: &mut Self::Key,
        _rt_changed: &mut bool,
    ) -> Result<Ins> {
        Ok(Ins::Remove)
    }
}

/// The node's keys, checked to be one more than its children (child `i` lies between keys `i`
/// and `i + 1`).
fn keys_of<C: Class>(node: &BtreeV1Node, addr: u64) -> Result<&Vec<C::Key>> {
    let keys = C::keys(&node.keys).ok_or_else(|| corrupt(addr, "a node of another tree type"))?;
    check_key_count(keys.len(), node.children.len(), addr)?;
    Ok(keys)
}

/// The node's keys, mutably, checked as by [`keys_of`].
fn keys_mut_of<C: Class>(node: &mut BtreeV1Node, addr: u64) -> Result<&mut Vec<C::Key>> {
    let children = node.children.len();
    let keys =
        C::keys_mut(&mut node.keys).ok_or_else(|| corrupt(addr, "a node of another tree type"))?;
    check_key_count(keys.len(), children, addr)?;
    Ok(keys)
}

fn check_key_count(keys: usize, children: usize, addr: u64) -> Result<()> {
    if children.checked_add(1) != Some(keys) {
        return Err(corrupt(
            addr,
            format!("{keys} keys for {children} children"),
        ));
    }
    Ok(())
}

fn missing_key(addr: u64, i: usize) -> Error {
    corrupt(addr, format!("no key {i} in the node"))
}

/// Key `i` of a node's keys.
fn key<K>(keys: &[K], i: usize, addr: u64) -> Result<&K> {
    keys.get(i).ok_or_else(|| missing_key(addr, i))
}

/// Key `i` of a node's keys, mutably.
fn key_mut<K>(keys: &mut [K], i: usize, addr: u64) -> Result<&mut K> {
    keys.get_mut(i).ok_or_else(|| missing_key(addr, i))
}

/// Keys `i` and `i + 1`: the bounds of child `i`.
fn bounds<K>(keys: &[K], i: usize, addr: u64) -> Result<(&K, &K)> {
    match keys.get(i..) {
        Some([lt, rt, ..]) => Ok((lt, rt)),
        _ => Err(missing_key(addr, i)),
    }
}

/// Keys `i` and `i + 1`, mutably.
fn bounds_mut<K>(keys: &mut [K], i: usize, addr: u64) -> Result<(&mut K, &mut K)> {
    match keys.get_mut(i..) {
        Some([lt, rt, ..]) => Ok((lt, rt)),
        _ => Err(missing_key(addr, i)),
    }
}

/// Child `i` of a node.
fn child(node: &BtreeV1Node, i: usize, addr: u64) -> Result<u64> {
    node.children
        .get(i)
        .copied()
        .ok_or_else(|| corrupt(addr, format!("no child {i} in the node")))
}

/// The level of a node's children (the node is not a leaf).
fn below(node: &BtreeV1Node, addr: u64) -> Result<u8> {
    node.level
        .checked_sub(1)
        .ok_or_else(|| corrupt(addr, "a leaf has no level below it"))
}

fn empty_node<C: Class>(cls: &C, node_type: NodeType) -> BtreeV1Node {
    BtreeV1Node {
        node_type,
        level: 0,
        left_sibling: UNDEFINED_ADDRESS,
        right_sibling: UNDEFINED_ADDRESS,
        keys: C::wrap(vec![cls.empty_key()]),
        children: Vec::new(),
    }
}

/// A new, empty tree: its root node allocated and put into the cache. Returns the tree.
pub(crate) fn create<C: Class>(
    c: &mut CacheAccess,
    cls: &C,
    k: u16,
    node_type: NodeType,
    rank_plus_one: usize,
) -> Result<Tree> {
    let mut tree = Tree {
        root: 0,
        k,
        node_type,
        rank_plus_one,
    };
    tree.root = c.allocate(tree.node_len(c)? as u64)?;
    tree.write(c, tree.root, empty_node(cls, node_type))?;
    Ok(tree)
}

/// Binary search of a node's children for the request (libhdf5's loop): the child index and
/// how the request compares with the last child tried.
fn search<C: Class>(
    c: &mut CacheAccess,
    cls: &mut C,
    keys: &[C::Key],
    n: usize,
    init: Ordering,
    addr: u64,
) -> Result<(usize, Ordering)> {
    let (mut lo, mut hi, mut idx, mut cmp) = (0, n, 0, init);
    while lo < hi && cmp != Ordering::Equal {
        idx = lo.midpoint(hi);
        let (lt, rt) = bounds(keys, idx, addr)?;
        cmp = cls.cmp3(c, lt, rt)?;
        if cmp == Ordering::Less {
            hi = idx;
        } else {
            // idx < hi: no overflow.
            lo = idx.saturating_add(1);
        }
    }
    Ok((idx, cmp))
}

/// Looks the request up: descends to the leaf child that may hold it and asks the class.
pub(crate) fn find<C: Class>(c: &mut CacheAccess, t: &Tree, cls: &mut C) -> Result<bool> {
    let mut addr = t.root;
    let mut level = None;
    loop {
        let node = t.read_at(c, addr, level)?;
        let keys = keys_of::<C>(&node, addr)?;
        let (idx, cmp) = search(c, cls, keys, node.children.len(), Ordering::Greater, addr)?;
        if cmp != Ordering::Equal {
            return Ok(false);
        }
        if node.level == 0 {
            return cls.found(c, child(&node, idx, addr)?, key(keys, idx, addr)?);
        }
        level = Some(below(&node, addr)?);
        addr = child(&node, idx, addr)?;
    }
}

/// Inserts the request (or updates its record: a `Change` from the leaf).
pub(crate) fn insert<C: Class>(c: &mut CacheAccess, t: &Tree, cls: &mut C) -> Result<()> {
    let mut lt = cls.empty_key();
    let mut md = cls.empty_key();
    let mut rt = cls.empty_key();
    let (mut lt_changed, mut rt_changed) = (false, false);
    let Some(split) = insert_helper(
        c,
        t,
        cls,
        t.root,
        None,
        &mut lt,
        &mut lt_changed,
        &mut md,
        &mut rt,
        &mut rt_changed,
    )?
    else {
        return Ok(());
    };
    // The root split: its contents move to a new node and the root becomes the parent of that
    // node and of the one split off (libhdf5's `H5B_insert`).
    let old_root = (*t.read(c, t.root)?).clone();
    let right = t.read(c, split)?;
    if !lt_changed {
        lt = key(keys_of::<C>(&old_root, t.root)?, 0, t.root)?.clone();
    }
    if !rt_changed {
        rt = key(keys_of::<C>(&right, split)?, right.children.len(), split)?.clone();
    }
    let moved = c.allocate(t.node_len(c)? as u64)?;
    let level = old_root.level;
    let new_level = level
        .checked_add(1)
        .ok_or_else(|| corrupt(t.root, "tree deeper than 255 levels"))?;
    t.write(c, moved, old_root)?;
    t.modify(c, split, |n| {
        n.left_sibling = moved;
        Ok(())
    })?;
    let root = BtreeV1Node {
        node_type: t.node_type,
        level: new_level,
        left_sibling: UNDEFINED_ADDRESS,
        right_sibling: UNDEFINED_ADDRESS,
        keys: C::wrap(vec![lt, md, rt]),
        children: vec![moved, split],
    };
    t.write(c, t.root, root)
}

/// libhdf5's `H5B__insert_helper` on the node at `addr` (a working copy, written back once if
/// it changed). Returns the address of the node split off to its right, if it split (`md` then
/// holds the key between them).
#[allow(clippy::too_many_arguments)]
fn insert_helper<C: Class>(
    c: &mut CacheAccess,
    t: &Tree,
    cls: &mut C,
    addr: u64,
    level: Option<u8>,
    lt: &mut C::Key,
    lt_changed: &mut bool,
    md: &mut C::Key,
    rt: &mut C::Key,
    rt_changed: &mut bool,
) -> Result<Option<u64>> {
    *lt_changed = false;
    *rt_changed = false;
    let mut node = (*t.read_at(c, addr, level)?).clone();
    let original = node.clone();
    let n = node.children.len();
    let (mut idx, cmp) = search(c, cls, keys_of::<C>(&node, addr)?, n, Ordering::Less, addr)?;
    // The last child (none in an empty node).
    let last = n.checked_sub(1);
    let (my_ins, new_child) = if n == 0 {
        if node.level != 0 {
            return Err(corrupt(addr, "an empty node above the leaves"));
        }
        let (mut k0, mut k1) = (cls.empty_key(), cls.empty_key());
        let child = cls.new_node(c, NewNode::First, &mut k0, &mut k1)?;
        node.keys = C::wrap(vec![k0, k1]);
        node.children = vec![child];
        idx = 0;
        if C::FOLLOW_MIN {
            descend(c, t, cls, &mut node, addr, 0, lt_changed, md, rt_changed)?
        } else {
            (Ins::Noop, 0)
        }
    } else if cmp == Ordering::Less && idx == 0 {
        if node.level > 0 || C::FOLLOW_MIN {
            descend(c, t, cls, &mut node, addr, 0, lt_changed, md, rt_changed)?
        } else {
            let first = key_mut(keys_mut_of::<C>(&mut node, addr)?, 0, addr)?;
            *md = first.clone();
            let child = cls.new_node(c, NewNode::Left, first, md)?;
            *lt_changed = true;
            (Ins::Left, child)
        }
    } else if let Some(last) = last.filter(|&l| cmp == Ordering::Greater && idx >= l) {
        idx = last;
        if node.level > 0 || C::FOLLOW_MAX {
            descend(c, t, cls, &mut node, addr, idx, lt_changed, md, rt_changed)?
        } else {
            let keys = keys_mut_of::<C>(&mut node, addr)?;
            let (_, rt) = bounds_mut(keys, idx, addr)?;
            *md = rt.clone();
            let child = cls.new_node(c, NewNode::Right, md, rt)?;
            *rt_changed = true;
            (Ins::Right, child)
        }
    } else if cmp != Ordering::Equal {
        return Err(corrupt(addr, "keys out of order: no child for the record"));
    } else {
        descend(c, t, cls, &mut node, addr, idx, lt_changed, md, rt_changed)?
    };

    let count = node.children.len();
    let keys = keys_mut_of::<C>(&mut node, addr)?;
    let (klt, krt) = bounds(keys, idx, addr)?;
    if *lt_changed {
        if idx > 0 {
            *lt_changed = false;
        } else {
            *lt = klt.clone();
        }
    }
    if *rt_changed {
        // Not the last child: `idx + 1 < count`.
        if idx < count.saturating_sub(1) {
            *rt_changed = false;
        } else {
            *rt = krt.clone();
        }
    }
    let mut split = None;
    match my_ins {
        Ins::Change => {
            *node
                .children
                .get_mut(idx)
                .ok_or_else(|| corrupt(addr, format!("no child {idx} in the node")))? = new_child
        }
        Ins::Left | Ins::Right => {
            if count == t.two_k() {
                let (twin_addr, mut twin) = split_node::<C>(c, t, &mut node, addr, idx)?;
                match idx.checked_sub(node.children.len()) {
                    None => insert_child::<C>(&mut node, addr, idx, new_child, my_ins, md)?,
                    Some(at) => insert_child::<C>(&mut twin, twin_addr, at, new_child, my_ins, md)?,
                }
                *md = key(keys_of::<C>(&twin, twin_addr)?, 0, twin_addr)?.clone();
                t.write(c, twin_addr, twin)?;
                split = Some(twin_addr);
            } else {
                insert_child::<C>(&mut node, addr, idx, new_child, my_ins, md)?;
            }
        }
        _ => {}
    }
    if node != original {
        t.write(c, addr, node)?;
    }
    Ok(split)
}

/// Inserts below child `idx` of `node` (a subtree, or a leaf child through the class), its
/// bounding keys taken from and written back to `node`. Returns what `node` must do.
#[allow(clippy::too_many_arguments)]
fn descend<C: Class>(
    c: &mut CacheAccess,
    t: &Tree,
    cls: &mut C,
    node: &mut BtreeV1Node,
    addr: u64,
    idx: usize,
    lt_changed: &mut bool,
    md: &mut C::Key,
    rt_changed: &mut bool,
) -> Result<(Ins, u64)> {
    let child = child(node, idx, addr)?;
    let (klt, krt) = bounds(keys_mut_of::<C>(node, addr)?, idx, addr)?;
    let mut lt = klt.clone();
    let mut rt = krt.clone();
    let r = if node.level > 0 {
        let level = Some(below(node, addr)?);
        match insert_helper(
            c, t, cls, child, level, &mut lt, lt_changed, md, &mut rt, rt_changed,
        )? {
            Some(split) => (Ins::Right, split),
            None => (Ins::Noop, 0),
        }
    } else {
        cls.insert(c, child, &mut lt, lt_changed, md, &mut rt, rt_changed)?
    };
    let (klt, krt) = bounds_mut(keys_mut_of::<C>(node, addr)?, idx, addr)?;
    *klt = lt;
    *krt = rt;
    Ok(r)
}

/// libhdf5's `H5B__split`: moves the right part of the full `node` to a new node (returned
/// with its address, not yet written) and relinks the siblings. `idx` is the child that grows.
fn split_node<C: Class>(
    c: &mut CacheAccess,
    t: &Tree,
    node: &mut BtreeV1Node,
    addr: u64,
    idx: usize,
) -> Result<(u64, BtreeV1Node)> {
    let two_k = t.two_k();
    let ratio = if node.right_sibling == UNDEFINED_ADDRESS {
        SPLIT_RATIOS[2]
    } else if node.left_sibling == UNDEFINED_ADDRESS {
        SPLIT_RATIOS[0]
    } else {
        SPLIT_RATIOS[1]
    };
    // Truncation, as libhdf5 converts the product.
    let mut nleft = (two_k as f64 * ratio) as usize;
    if idx < nleft && nleft == two_k {
        // `two_k >= 2` (K >= 1, checked on read).
        nleft = two_k.saturating_sub(1);
    } else if idx >= nleft && nleft == 0 {
        nleft = 1;
    }
    let twin_addr = c.allocate(t.node_len(c)? as u64)?;
    let keys = keys_mut_of::<C>(node, addr)?;
    if nleft >= keys.len() {
        return Err(corrupt(
            addr,
            format!("splitting at {nleft} of {} keys", keys.len()),
        ));
    }
    let twin_keys = keys.split_off(nleft);
    keys.push(key(&twin_keys, 0, addr)?.clone());
    let twin = BtreeV1Node {
        node_type: node.node_type,
        level: node.level,
        left_sibling: addr,
        right_sibling: node.right_sibling,
        keys: C::wrap(twin_keys),
        children: node.children.split_off(nleft),
    };
    if node.right_sibling != UNDEFINED_ADDRESS {
        t.modify(c, node.right_sibling, |n| {
            n.left_sibling = twin_addr;
            Ok(())
        })?;
    }
    node.right_sibling = twin_addr;
    Ok((twin_addr, twin))
}

/// libhdf5's `H5B__insert_child`: `child` goes left or right (`anchor`) of child `idx`, with
/// `md` as the key between them.
fn insert_child<C: Class>(
    node: &mut BtreeV1Node,
    addr: u64,
    idx: usize,
    child: u64,
    anchor: Ins,
    md: &C::Key,
) -> Result<()> {
    let keys = keys_mut_of::<C>(node, addr)?;
    let Some(after) = idx.checked_add(1).filter(|&i| i <= keys.len()) else {
        return Err(corrupt(addr, "child index past the keys"));
    };
    keys.insert(after, md.clone());
    let at = if anchor == Ins::Right { after } else { idx };
    if at > node.children.len() {
        return Err(corrupt(addr, "child index past the children"));
    }
    node.children.insert(at, child);
    Ok(())
}

/// Removes the request. Returns whether it was in the tree.
pub(crate) fn remove<C: Class>(c: &mut CacheAccess, t: &Tree, cls: &mut C) -> Result<bool> {
    let mut lt = cls.empty_key();
    let mut rt = cls.empty_key();
    let (mut lt_changed, mut rt_changed) = (false, false);
    let r = remove_helper(
        c,
        t,
        cls,
        t.root,
        None,
        true,
        &mut lt,
        &mut lt_changed,
        &mut rt,
        &mut rt_changed,
    )?;
    Ok(r != Ins::Absent)
}

/// libhdf5's `H5B__remove_helper` on the node at `addr` (`is_root` for the root).
#[allow(clippy::too_many_arguments)]
fn remove_helper<C: Class>(
    c: &mut CacheAccess,
    t: &Tree,
    cls: &mut C,
    addr: u64,
    level: Option<u8>,
    is_root: bool,
    lt: &mut C::Key,
    lt_changed: &mut bool,
    rt: &mut C::Key,
    rt_changed: &mut bool,
) -> Result<Ins> {
    let mut node = (*t.read_at(c, addr, level)?).clone();
    let original = node.clone();
    let n = node.children.len();
    let (idx, cmp) = search(
        c,
        cls,
        keys_of::<C>(&node, addr)?,
        n,
        Ordering::Greater,
        addr,
    )?;
    if cmp != Ordering::Equal {
        return Ok(Ins::Absent);
    }
    let child = child(&node, idx, addr)?;
    let (left, right) = (node.left_sibling, node.right_sibling);
    let (klt, krt) = bounds(keys_of::<C>(&node, addr)?, idx, addr)?;
    let (mut klt, mut krt) = (klt.clone(), krt.clone());
    let ret = if node.level > 0 {
        let below = Some(below(&node, addr)?);
        remove_helper(
            c, t, cls, child, below, false, &mut klt, lt_changed, &mut krt, rt_changed,
        )?
    } else {
        cls.remove(c, child, &mut klt, lt_changed, &mut krt, rt_changed)?
    };
    if ret == Ins::Absent {
        return Ok(Ins::Absent);
    }
    let keys = keys_mut_of::<C>(&mut node, addr)?;
    let (lt_slot, rt_slot) = bounds_mut(keys, idx, addr)?;
    *lt_slot = klt;
    *rt_slot = krt;
    if *lt_changed {
        if idx > 0 {
            *lt_changed = false;
        } else {
            lt.clone_from(lt_slot);
        }
    }
    if *rt_changed {
        // Not the last child: `idx + 1 < n`.
        if idx < n.saturating_sub(1) {
            *rt_changed = false;
        } else {
            rt.clone_from(rt_slot);
        }
    }
    let mut ret = if ret == Ins::Remove {
        Ins::Remove
    } else {
        Ins::Noop
    };
    if ret == Ins::Remove {
        if n == 1 {
            if !is_root {
                // Unlink the emptied node from its siblings, keeping their keys consistent,
                // and free it.
                if left != UNDEFINED_ADDRESS {
                    let new_key = key(keys, 1, addr)?.clone();
                    t.modify(c, left, |s| {
                        let last = s.children.len();
                        if C::CRITICAL == Critical::Left {
                            *key_mut(keys_mut_of::<C>(s, left)?, last, left)? = new_key;
                        }
                        s.right_sibling = right;
                        Ok(())
                    })?;
                }
                if right != UNDEFINED_ADDRESS {
                    let new_key = key(keys, 0, addr)?.clone();
                    t.modify(c, right, |s| {
                        if C::CRITICAL == Critical::Right {
                            *key_mut(keys_mut_of::<C>(s, right)?, 0, right)? = new_key;
                        }
                        s.left_sibling = left;
                        Ok(())
                    })?;
                }
                c.delete(K::BTreeV1Node, addr, t.node_len(c)? as u64)?;
                return Ok(Ins::Remove);
            }
            // The root's last child: the root goes back to an empty leaf.
            node.children.clear();
            node.level = 0;
            node.keys = C::wrap(vec![cls.empty_key()]);
        } else if idx == 0 {
            // n >= 2 children here: n + 1 >= 3 keys.
            if C::CRITICAL == Critical::Left {
                keys.remove(0);
                *lt = key(keys, 0, addr)?.clone();
                *lt_changed = true;
            } else {
                keys.remove(1);
            }
            node.children.remove(0);
        } else if Some(idx) == n.checked_sub(1) {
            if C::CRITICAL == Critical::Left {
                keys.remove(idx);
            } else {
                keys.truncate(n);
                *rt = key(keys, idx, addr)?.clone();
                *rt_changed = true;
            }
            node.children.pop();
        } else {
            // 0 < idx < n - 1: `idx + 1` is a key of the node.
            #[allow(
                clippy::arithmetic_side_effects,
                reason = "idx + 1 < n (a child index)"
            )]
            let gone = if C::CRITICAL == Critical::Left {
                idx
            } else {
                idx + 1
            };
            keys.remove(gone);
            node.children.remove(idx);
        }
        ret = Ins::Noop;
    }
    // Patch the neighbour's copy of a key that changed at this node's edge.
    let count = node.children.len();
    if *lt_changed && node.left_sibling != UNDEFINED_ADDRESS {
        let new_key = key(keys_of::<C>(&node, addr)?, 0, addr)?.clone();
        let left = node.left_sibling;
        t.modify(c, left, |s| {
            let last = s.children.len();
            *key_mut(keys_mut_of::<C>(s, left)?, last, left)? = new_key;
            Ok(())
        })?;
    } else if *rt_changed && node.right_sibling != UNDEFINED_ADDRESS {
        let new_key = key(keys_of::<C>(&node, addr)?, count, addr)?.clone();
        let right = node.right_sibling;
        t.modify(c, right, |s| {
            *key_mut(keys_mut_of::<C>(s, right)?, 0, right)? = new_key;
            Ok(())
        })?;
    }
    if node != original {
        t.write(c, addr, node)?;
    }
    Ok(ret)
}

/// A callback on one leaf child: `(cache, left key, child, right key)`.
pub(crate) type LeafVisit<'a, K, R> = dyn FnMut(&mut CacheAccess, &K, u64, &K) -> Result<R> + 'a;

/// Visits every leaf child in key order: `visit(c, lt, child, rt)` (its bounding keys); stops
/// early when `visit` returns `false`. Each node is visited once: a node reached twice (a
/// damaged file) is an error.
pub(crate) fn visit<C: Class>(
    c: &mut CacheAccess,
    t: &Tree,
    visit: &mut LeafVisit<'_, C::Key, bool>,
) -> Result<()> {
    let mut seen = HashSet::new();
    visit_node::<C>(c, t, t.root, None, &mut seen, visit)?;
    Ok(())
}

fn visit_node<C: Class>(
    c: &mut CacheAccess,
    t: &Tree,
    addr: u64,
    level: Option<u8>,
    seen: &mut HashSet<u64>,
    visit: &mut LeafVisit<'_, C::Key, bool>,
) -> Result<bool> {
    if !seen.insert(addr) {
        return Err(corrupt(addr, "node reached twice"));
    }
    let node = t.read_at(c, addr, level)?;
    let keys = keys_of::<C>(&node, addr)?;
    for (i, &child) in node.children.iter().enumerate() {
        let go_on = if node.level > 0 {
            visit_node::<C>(c, t, child, Some(below(&node, addr)?), seen, visit)?
        } else {
            let (lt, rt) = bounds(keys, i, addr)?;
            visit(c, lt, child, rt)?
        };
        if !go_on {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Deletes the whole tree (libhdf5's `H5B_delete`): `leaf(c, lt, child, rt)` for every leaf
/// child, then every node, the root included, leaves the cache and gives its space back.
pub(crate) fn delete<C: Class>(
    c: &mut CacheAccess,
    t: &Tree,
    leaf: &mut LeafVisit<'_, C::Key, ()>,
) -> Result<()> {
    let mut seen = HashSet::new();
    delete_node::<C>(c, t, t.root, None, &mut seen, leaf)
}

fn delete_node<C: Class>(
    c: &mut CacheAccess,
    t: &Tree,
    addr: u64,
    level: Option<u8>,
    seen: &mut HashSet<u64>,
    leaf: &mut LeafVisit<'_, C::Key, ()>,
) -> Result<()> {
    if !seen.insert(addr) {
        return Err(corrupt(addr, "node reached twice"));
    }
    let node = t.read_at(c, addr, level)?;
    let keys = keys_of::<C>(&node, addr)?;
    for (i, &child) in node.children.iter().enumerate() {
        if node.level > 0 {
            delete_node::<C>(c, t, child, Some(below(&node, addr)?), seen, leaf)?;
        } else {
            let (lt, rt) = bounds(keys, i, addr)?;
            leaf(c, lt, child, rt)?;
        }
    }
    c.delete(K::BTreeV1Node, addr, t.node_len(c)? as u64)
}
