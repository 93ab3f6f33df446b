//! Removing from a v2 B-tree (libhdf5's `H5B2_remove`: children holding the merge threshold are
//! merged or redistributed before the descent enters them, a record found in an internal node
//! is replaced by its successor, a root of one record whose children fit one node collapses)
//! and deleting a whole tree.

use std::cmp::Ordering;
use std::sync::Arc;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree2::{Btree2Header, Btree2Node, ChildPointer, Record};
use h5_metacache::MetadataKind as K;

use super::reshape::{Level, plan_sparse, reshape};
use super::shadow::{pin_header, shadow, shadow_if_changed};
use super::{
    Key, Tree, check_node, child_depth, child_index, corrupt, count_removed, header_load, locate,
    merge_nrec, node, node_kind, protect_node, release_node,
};
use crate::access::{Held, MetaAccess, Session};
use crate::error::Result;

/// What a descent removes: the record of a key, or the smallest record of a subtree (the
/// successor that replaces a record removed from an internal node).
#[derive(Clone, Copy)]
enum Target<'k> {
    Key(&'k dyn Key),
    Min,
}

impl Target<'_> {
    /// The child to descend into (and whether the key is the record before it, `Equal`).
    fn locate(&self, a: &mut dyn MetaAccess, recs: &[Record]) -> Result<(usize, Ordering)> {
        match self {
            Target::Min => Ok((0, Ordering::Less)),
            Target::Key(k) => {
                let (idx, cmp) = locate(a, *k, recs)?;
                Ok((child_index(idx, cmp), cmp))
            }
        }
    }
}

/// Removes the record whose key is `key` and returns it (`None`, changing nothing, when there
/// is none).
pub(crate) fn remove(s: &mut Session<'_>, tree: &Tree, key: &dyn Key) -> Result<Option<Record>> {
    // libhdf5 reshapes nodes on the way down before it knows whether the record exists; a
    // lookup first keeps a failed removal from changing the tree.
    if super::find(s, tree, key)?.is_none() {
        return Ok(None);
    }
    let sizes = s.file().sizes;
    let hh = s.protect(K::BTreeV2Header, tree.addr, || {
        header_load(sizes, tree.addr)
    })?;
    let r = pin_header(s, &hh).and_then(|()| remove_under(s, tree, &hh, key));
    s.release(hh)?;
    r.map(Some)
}

fn remove_under(s: &mut Session<'_>, tree: &Tree, hh: &Held, key: &dyn Key) -> Result<Record> {
    let mut hdr: Btree2Header = s.value::<Btree2Header>(hh)?.clone();
    let geom = Arc::new(hdr.clone());
    let mut root = hdr.root;
    let mut depth_decreased = 0u16;
    let rec = if hdr.depth > 0 {
        remove_internal(
            s,
            tree,
            &geom,
            hdr.depth,
            &mut root,
            hh,
            Target::Key(key),
            &mut depth_decreased,
            true,
        )?
    } else {
        remove_leaf(s, tree, &geom, &mut root, hh, Target::Key(key))?
    };
    if depth_decreased > 0 {
        hdr = Btree2Header::new(
            s.file().sizes,
            hdr.address,
            hdr.params(),
            hdr.depth
                .checked_sub(depth_decreased)
                .ok_or_else(|| corrupt(hdr.address, "depth below 0"))?,
            root,
        )?;
    }
    hdr.root = root;
    *s.value_mut::<Btree2Header>(hh)? = hdr;
    Ok(rec)
}

fn remove_leaf(
    s: &mut Session<'_>,
    tree: &Tree,
    geom: &Arc<Btree2Header>,
    ptr: &mut ChildPointer,
    parent: &Held,
    target: Target<'_>,
) -> Result<Record> {
    let mut h = protect_node(s, tree, geom, *ptr, 0)?;
    let n: Arc<Btree2Node> = s.value_arc(&h)?;
    check_node(&n, *ptr, 0)?;
    let idx = match target {
        Target::Min => 0,
        Target::Key(k) => {
            let (idx, cmp) = locate(s, k, &n.records)?;
            if cmp != Ordering::Equal {
                drop(n);
                s.release(h)?;
                return Err(corrupt(ptr.address, "record to remove not in its leaf"));
            }
            idx
        }
    };
    if idx >= n.records.len() {
        drop(n);
        s.release(h)?;
        return Err(corrupt(ptr.address, "removing from an empty leaf"));
    }
    drop(n);
    let rec = s.value_mut::<Btree2Node>(&h)?.records.remove(idx);
    count_removed(ptr, true)?;
    if ptr.records == 0 {
        // Only a root leaf empties: the tree is empty again.
        s.release_deleted(h, u64::from(geom.node_size))?;
        ptr.address = UNDEFINED_ADDRESS;
    } else {
        shadow(s, geom, &mut h, ptr)?;
        s.depend_held(parent, ptr.address)?;
        s.release(h)?;
    }
    Ok(rec)
}

#[allow(clippy::too_many_arguments)]
fn remove_internal(
    s: &mut Session<'_>,
    tree: &Tree,
    geom: &Arc<Btree2Header>,
    depth: u16,
    ptr: &mut ChildPointer,
    parent: &Held,
    target: Target<'_>,
    depth_decreased: &mut u16,
    is_root: bool,
) -> Result<Record> {
    let h = protect_node(s, tree, geom, *ptr, depth)?;
    let merge = merge_nrec(geom, child_depth(depth, *ptr)?)?;
    let (n_recs, c0, c1) = {
        let n: Arc<Btree2Node> = s.value_arc(&h)?;
        check_node(&n, *ptr, depth)?;
        (
            n.records.len(),
            n.children.first().map_or(0, |c| c.records),
            n.children.get(1).map_or(0, |c| c.records),
        )
    };
    // The records of the two children and the root's: a node of them fits when at most
    // `2 * merge + 2` (counts from the file that overflow do not fit).
    let merged = c0
        .checked_add(c1)
        .and_then(|b| b.checked_add(1))
        .filter(|&m| {
            merge
                .checked_mul(2)
                .and_then(|l| l.checked_add(2))
                .is_some_and(|l| m <= l)
        });
    if is_root
        && n_recs == 1
        && let Some(merged) = merged
    {
        // The root's two children fit one node: merge them, drop the root, and go on in the
        // merged child, the new root (one level less).
        let level = Level {
            tree,
            geom,
            depth,
            node: &h,
        };
        reshape(s, &level, ptr, 0, 2, &[merged])?;
        let child = *s
            .value::<Btree2Node>(&h)?
            .children
            .first()
            .ok_or_else(|| corrupt(ptr.address, "collapsed root without a child"))?;
        s.move_dependency(ptr.address, parent, child.address)?;
        s.release_deleted(h, u64::from(geom.node_size))?;
        *ptr = child;
        *depth_decreased = depth_decreased
            .checked_add(1)
            .ok_or_else(|| corrupt(geom.address, "depth decreased past 65535"))?;
        return if depth > 1 {
            remove_internal(
                s,
                tree,
                geom,
                depth.saturating_sub(1),
                ptr,
                parent,
                target,
                depth_decreased,
                true,
            )
        } else {
            remove_leaf(s, tree, geom, ptr, parent, target)
        };
    }
    let r = remove_through(
        s,
        tree,
        geom,
        depth,
        ptr,
        &h,
        target,
        merge,
        depth_decreased,
    );
    let mut h = h;
    let moved = shadow_if_changed(s, geom, &mut h, ptr);
    release_node(s, parent, h)?;
    moved?;
    r
}

/// The removal below held node `h` (not a collapsing root): the child to enter is merged or
/// redistributed first when it holds the merge threshold (libhdf5 tries redistribution twice,
/// then merges).
#[allow(clippy::too_many_arguments)]
fn remove_through(
    s: &mut Session<'_>,
    tree: &Tree,
    geom: &Arc<Btree2Header>,
    depth: u16,
    ptr: &mut ChildPointer,
    h: &Held,
    target: Target<'_>,
    merge: u64,
    depth_decreased: &mut u16,
) -> Result<Record> {
    let locate_child = |s: &mut Session<'_>| -> Result<(usize, Ordering)> {
        let n: Arc<Btree2Node> = s.value_arc(h)?;
        target.locate(s, &n.records)
    };
    let (mut idx, mut cmp) = locate_child(s)?;
    let level = Level {
        tree,
        geom,
        depth,
        node: h,
    };
    let mut retries = 2u32;
    loop {
        let around = level.around(s, idx)?;
        if around.here != Some(merge) {
            break;
        }
        let plan = plan_sparse(&around, idx, merge, retries > 0)
            .ok_or_else(|| corrupt(ptr.address, format!("child record counts {around:?}")))?;
        level.apply(s, ptr, &plan)?;
        (idx, cmp) = locate_child(s)?;
        retries = retries.saturating_sub(1);
    }
    // A record of this node is the one removed: its successor (the smallest record of the
    // subtree to its right) takes its place.
    let here = matches!(target, Target::Key(_)) && cmp == Ordering::Equal;
    let below = if here { Target::Min } else { target };
    let mut child = *s
        .value::<Btree2Node>(h)?
        .children
        .get(idx)
        .ok_or_else(|| corrupt(ptr.address, "child pointer missing"))?;
    let mut removed = if depth > 1 {
        remove_internal(
            s,
            tree,
            geom,
            depth.saturating_sub(1),
            &mut child,
            h,
            below,
            depth_decreased,
            false,
        )?
    } else {
        remove_leaf(s, tree, geom, &mut child, h, below)?
    };
    let n = s.value_mut::<Btree2Node>(h)?;
    if let Some(c) = n.children.get_mut(idx) {
        *c = child;
    }
    if here {
        // The record left of child `idx` (the one found: `idx` is past it).
        let slot = idx
            .checked_sub(1)
            .and_then(|i| n.records.get_mut(i))
            .ok_or_else(|| corrupt(ptr.address, "removed record's slot missing"))?;
        std::mem::swap(slot, &mut removed);
    }
    count_removed(ptr, false)?;
    Ok(removed)
}

/// Deletes the whole tree: `f` sees every record (to free what it points at), then every node
/// and the header leave the cache and their space is freed.
pub(crate) fn delete(
    s: &mut Session<'_>,
    tree: &Tree,
    f: &mut dyn FnMut(&mut Session<'_>, &Record) -> Result<()>,
) -> Result<()> {
    let geom = super::header(s, tree)?;
    if geom.root.address != UNDEFINED_ADDRESS {
        delete_subtree(s, tree, &geom, geom.root, geom.depth, f)?;
    }
    let len = Btree2Header::encoded_len(s.file().sizes) as u64;
    s.remove(K::BTreeV2Header, tree.addr, len)
}

fn delete_subtree(
    s: &mut Session<'_>,
    tree: &Tree,
    geom: &Arc<Btree2Header>,
    ptr: ChildPointer,
    depth: u16,
    f: &mut dyn FnMut(&mut Session<'_>, &Record) -> Result<()>,
) -> Result<()> {
    let n = node(s, geom, tree.ctx, ptr, depth)?;
    if depth > 0 {
        for c in &n.children {
            delete_subtree(s, tree, geom, *c, child_depth(depth, ptr)?, f)?;
        }
    }
    for r in &n.records {
        f(s, r)?;
    }
    drop(n);
    s.remove(node_kind(depth), ptr.address, u64::from(geom.node_size))
}
