//! Inserting into a v2 B-tree (libhdf5's `H5B2_insert`: full children are split or
//! redistributed before the descent enters them, a full root splits) and updating a record in
//! place.

use std::cmp::Ordering;
use std::sync::Arc;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree2::{Btree2Header, Btree2Node, ChildPointer, Record};
use h5_metacache::MetadataKind as K;

use super::reshape::{Level, plan_full, reshape, split_counts};
use super::shadow::{pin_header, placed, shadow, shadow_if_changed};
use super::{
    Key, Tree, check_node, child_depth, child_index, corrupt, count_added, header_load, locate,
    node_entry, protect_node, release_node, split_nrec,
};
use crate::access::{Held, Session};
use crate::error::{Error, Result};

/// Inserts `rec`, whose key is `key`. A record with an equal key is an error
/// ([`Error::Exists`]), as in libhdf5.
pub(crate) fn insert(s: &mut Session<'_>, tree: &Tree, key: &dyn Key, rec: Record) -> Result<()> {
    let sizes = s.file().sizes;
    let hh = s.protect(K::BTreeV2Header, tree.addr, || {
        header_load(sizes, tree.addr)
    })?;
    let r = pin_header(s, &hh).and_then(|()| insert_under(s, tree, &hh, key, rec));
    s.release(hh)?;
    r
}

fn insert_under(
    s: &mut Session<'_>,
    tree: &Tree,
    hh: &Held,
    key: &dyn Key,
    rec: Record,
) -> Result<()> {
    let mut hdr: Btree2Header = s.value::<Btree2Header>(hh)?.clone();
    if hdr.root.address == UNDEFINED_ADDRESS {
        // The first record: a root leaf.
        let addr = s.allocate(u64::from(hdr.node_size))?;
        placed(s, addr)?;
        let geom = Arc::new(hdr.clone());
        let leaf = Btree2Node {
            address: addr,
            depth: 0,
            records: vec![rec],
            children: Vec::new(),
        };
        let h = s.insert_held(K::BTreeV2Leaf, addr, node_entry(leaf, &geom, tree.ctx))?;
        s.depend_held(hh, addr)?;
        s.release(h)?;
        hdr.root = ChildPointer {
            address: addr,
            records: 1,
            total_records: 1,
        };
        *s.value_mut::<Btree2Header>(hh)? = hdr;
        return Ok(());
    }
    if hdr.root.records == split_nrec(&hdr, hdr.depth)? {
        split_root(s, tree, hh, &mut hdr)?;
    }
    let geom = Arc::new(hdr.clone());
    let mut root = hdr.root;
    // Nodes split on the way down stay split when the insert fails (a record with that key
    // exists): the pointers are written back either way.
    let r = if hdr.depth > 0 {
        insert_internal(s, tree, &geom, hdr.depth, &mut root, hh, key, rec)
    } else {
        insert_leaf(s, tree, &geom, &mut root, hh, key, rec)
    };
    hdr.root = root;
    *s.value_mut::<Btree2Header>(hh)? = hdr;
    r
}

/// The tree grows by one level: a new root internal node whose only child, the old root, is
/// split in two.
fn split_root(s: &mut Session<'_>, tree: &Tree, hh: &Held, hdr: &mut Btree2Header) -> Result<()> {
    let sizes = s.file().sizes;
    let depth = hdr
        .depth
        .checked_add(1)
        .ok_or_else(|| corrupt(tree.addr, "tree too deep"))?;
    let old = hdr.root;
    *hdr = Btree2Header::new(
        sizes,
        hdr.address,
        hdr.params(),
        depth,
        ChildPointer {
            address: UNDEFINED_ADDRESS,
            records: 0,
            total_records: 0,
        },
    )?;
    let geom = Arc::new(hdr.clone());
    let addr = s.allocate(u64::from(hdr.node_size))?;
    placed(s, addr)?;
    let root = Btree2Node {
        address: addr,
        depth,
        records: Vec::new(),
        children: vec![old],
    };
    let rh = s.insert_held(K::BTreeV2Internal, addr, node_entry(root, &geom, tree.ctx))?;
    s.move_dependency(tree.addr, &rh, old.address)?;
    let mut ptr = ChildPointer {
        address: addr,
        records: 0,
        total_records: old.total_records,
    };
    let counts = split_counts(old.records)
        .ok_or_else(|| corrupt(old.address, "a root of no records cannot split"))?;
    let level = Level {
        tree,
        geom: &geom,
        depth,
        node: &rh,
    };
    let r = reshape(s, &level, &mut ptr, 0, 1, &counts);
    s.depend_held(hh, addr)?;
    s.release(rh)?;
    r?;
    hdr.root = ptr;
    Ok(())
}

fn insert_leaf(
    s: &mut Session<'_>,
    tree: &Tree,
    geom: &Arc<Btree2Header>,
    ptr: &mut ChildPointer,
    parent: &Held,
    key: &dyn Key,
    rec: Record,
) -> Result<()> {
    let mut h = protect_node(s, tree, geom, *ptr, 0)?;
    let n: Arc<Btree2Node> = s.value_arc(&h)?;
    check_node(&n, *ptr, 0)?;
    let (idx, cmp) = locate(s, key, &n.records)?;
    drop(n);
    if cmp == Ordering::Equal {
        s.release(h)?;
        return Err(Error::Exists(
            "a record with that key in the v2 B-tree".into(),
        ));
    }
    s.value_mut::<Btree2Node>(&h)?
        .records
        .insert(child_index(idx, cmp), rec);
    count_added(ptr, true)?;
    shadow(s, geom, &mut h, ptr)?;
    release_node(s, parent, h)
}

#[allow(clippy::too_many_arguments)]
fn insert_internal(
    s: &mut Session<'_>,
    tree: &Tree,
    geom: &Arc<Btree2Header>,
    depth: u16,
    ptr: &mut ChildPointer,
    parent: &Held,
    key: &dyn Key,
    rec: Record,
) -> Result<()> {
    let mut h = protect_node(s, tree, geom, *ptr, depth)?;
    let r = insert_through(s, tree, geom, depth, ptr, &h, key, rec);
    let moved = shadow_if_changed(s, geom, &mut h, ptr);
    release_node(s, parent, h)?;
    moved?;
    r
}

/// Where in held node `h` the key goes: the child index, after the preemptive split or
/// redistribution of a full child (libhdf5 tries redistribution twice, then splits).
#[allow(clippy::too_many_arguments)]
fn insert_through(
    s: &mut Session<'_>,
    tree: &Tree,
    geom: &Arc<Btree2Header>,
    depth: u16,
    ptr: &mut ChildPointer,
    h: &Held,
    key: &dyn Key,
    rec: Record,
) -> Result<()> {
    let locate_child = |s: &mut Session<'_>| -> Result<usize> {
        let n: Arc<Btree2Node> = s.value_arc(h)?;
        let (idx, cmp) = locate(s, key, &n.records)?;
        if cmp == Ordering::Equal {
            return Err(Error::Exists(
                "a record with that key in the v2 B-tree".into(),
            ));
        }
        Ok(child_index(idx, cmp))
    };
    {
        let n: Arc<Btree2Node> = s.value_arc(h)?;
        check_node(&n, *ptr, depth)?;
    }
    let mut idx = locate_child(s)?;
    let split = split_nrec(geom, child_depth(depth, *ptr)?)?;
    let level = Level {
        tree,
        geom,
        depth,
        node: h,
    };
    let mut retries = 2u32;
    loop {
        let around = level.around(s, idx)?;
        if around.here != Some(split) {
            break;
        }
        let plan = plan_full(&around, idx, split, retries > 0)
            .ok_or_else(|| corrupt(ptr.address, format!("child record counts {around:?}")))?;
        level.apply(s, ptr, &plan)?;
        idx = locate_child(s)?;
        retries = retries.saturating_sub(1);
    }
    let mut child = *s
        .value::<Btree2Node>(h)?
        .children
        .get(idx)
        .ok_or_else(|| corrupt(ptr.address, "child pointer missing"))?;
    let r = if depth > 1 {
        insert_internal(
            s,
            tree,
            geom,
            depth.saturating_sub(1),
            &mut child,
            h,
            key,
            rec,
        )
    } else {
        insert_leaf(s, tree, geom, &mut child, h, key, rec)
    };
    if let Some(c) = s.value_mut::<Btree2Node>(h)?.children.get_mut(idx) {
        *c = child;
    }
    r?;
    count_added(ptr, false)
}

/// Changes the record whose key is `key` with `change` (which must keep its key); returns
/// whether it was found. Only the node holding the record is written, and in SWMR-writing mode
/// the nodes above it that move with it (shadowing: each changed node moves once per epoch, and
/// its parent's pointer to it changes).
pub(crate) fn update(
    s: &mut Session<'_>,
    tree: &Tree,
    key: &dyn Key,
    change: &mut dyn FnMut(&mut Record),
) -> Result<bool> {
    let sizes = s.file().sizes;
    let hh = s.protect(K::BTreeV2Header, tree.addr, || {
        header_load(sizes, tree.addr)
    })?;
    let geom: Arc<Btree2Header> = s.value_arc(&hh)?;
    if geom.root.address == UNDEFINED_ADDRESS {
        s.release(hh)?;
        return Ok(false);
    }
    // The held nodes from the root down, each with the pointer to it and its index among its
    // parent's children.
    let mut path: Vec<(Held, ChildPointer, usize)> = Vec::new();
    let r = update_path(s, tree, &geom, key, change, &mut path).and_then(|found| {
        if found {
            pin_header(s, &hh)?;
            write_back(s, &geom, &hh, &mut path)?;
        }
        Ok(found)
    });
    while let Some((h, _, _)) = path.pop() {
        s.release(h)?;
    }
    s.release(hh)?;
    r
}

/// Descends to the record whose key is `key`, holding each node on the way in `path`, and
/// changes it; returns whether it was found.
fn update_path(
    s: &mut Session<'_>,
    tree: &Tree,
    geom: &Arc<Btree2Header>,
    key: &dyn Key,
    change: &mut dyn FnMut(&mut Record),
    path: &mut Vec<(Held, ChildPointer, usize)>,
) -> Result<bool> {
    let (mut ptr, mut depth, mut at) = (geom.root, geom.depth, 0usize);
    loop {
        let h = protect_node(s, tree, geom, ptr, depth)?;
        let n: Arc<Btree2Node> = s.value_arc(&h)?;
        let checked = check_node(&n, ptr, depth);
        let located = checked.and_then(|()| locate(s, key, &n.records));
        let (idx, cmp) = match located {
            Ok(l) => l,
            Err(e) => {
                drop(n);
                path.push((h, ptr, at));
                return Err(e);
            }
        };
        if cmp == Ordering::Equal {
            drop(n);
            path.push((h, ptr, at));
            let (h, ..) = path
                .last()
                .ok_or_else(|| corrupt(ptr.address, "empty path"))?;
            let r = s
                .value_mut::<Btree2Node>(h)?
                .records
                .get_mut(idx)
                .ok_or_else(|| corrupt(ptr.address, "record missing"))?;
            change(r);
            return Ok(true);
        }
        let next = if depth == 0 {
            None
        } else {
            let i = child_index(idx, cmp);
            n.children.get(i).copied().map(|c| (i, c))
        };
        drop(n);
        path.push((h, ptr, at));
        match next {
            Some((i, c)) => {
                depth = child_depth(depth, ptr)?;
                ptr = c;
                at = i;
            }
            None => return Ok(false),
        }
    }
}

/// After the last node of `path` changed: from the bottom up, each changed node moves when it
/// must (shadowing) and becomes a flush-dependency child of its parent, whose pointer to it
/// follows a move (which changes the parent in turn); the root's pointer is the header's.
fn write_back(
    s: &mut Session<'_>,
    geom: &Btree2Header,
    hh: &Held,
    path: &mut [(Held, ChildPointer, usize)],
) -> Result<()> {
    // The pointer to the changed node below and its index among this node's children.
    let mut below: Option<(ChildPointer, usize)> = None;
    for (h, ptr, at) in path.iter_mut().rev() {
        if let Some((child, idx)) = below.take() {
            let old = s
                .value::<Btree2Node>(h)?
                .children
                .get(idx)
                .map(|c| c.address);
            if old != Some(child.address) {
                let slot = s
                    .value_mut::<Btree2Node>(h)?
                    .children
                    .get_mut(idx)
                    .ok_or_else(|| corrupt(ptr.address, "child pointer missing"))?;
                *slot = child;
            }
            s.depend_held(h, child.address)?;
        }
        shadow_if_changed(s, geom, h, ptr)?;
        if s.is_dirtied(h)? {
            below = Some((*ptr, *at));
        }
    }
    if let Some((root, _)) = below {
        if root.address != geom.root.address {
            s.value_mut::<Btree2Header>(hh)?.root.address = root.address;
        }
        s.depend_held(hh, root.address)?;
    }
    Ok(())
}
