//! Reading a v2 B-tree: lookup by key (one node per level) and in-order iteration.

use std::cmp::Ordering;
use std::ops::ControlFlow;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree2::{ChildPointer, Record};

use super::{Key, Tree, child_depth, child_index, corrupt, header, locate, node};
use crate::access::MetaAccess;
use crate::error::Result;

/// The record whose key is `key`, if any: one node per level of the tree.
pub(crate) fn find(a: &mut dyn MetaAccess, tree: &Tree, key: &dyn Key) -> Result<Option<Record>> {
    let geom = header(a, tree)?;
    if geom.root.address == UNDEFINED_ADDRESS {
        return Ok(None);
    }
    let mut ptr = geom.root;
    let mut depth = geom.depth;
    loop {
        let n = node(a, &geom, tree.ctx, ptr, depth)?;
        let (idx, cmp) = locate(a, key, &n.records)?;
        if cmp == Ordering::Equal {
            return Ok(n.records.get(idx).cloned());
        }
        if depth == 0 {
            return Ok(None);
        }
        ptr = *n
            .children
            .get(child_index(idx, cmp))
            .ok_or_else(|| corrupt(ptr.address, "child pointer missing"))?;
        depth = child_depth(depth, ptr)?;
    }
}

/// Records in the tree (the header's count).
pub(crate) fn count(a: &mut dyn MetaAccess, tree: &Tree) -> Result<u64> {
    Ok(header(a, tree)?.root.total_records)
}

/// A visitor of records: it may read other structures, and breaks to stop the iteration.
pub(crate) type Visit<'a> = dyn FnMut(&mut dyn MetaAccess, &Record) -> Result<ControlFlow<()>> + 'a;

/// Calls `f` on every record in key order until it breaks.
pub(crate) fn iterate(a: &mut dyn MetaAccess, tree: &Tree, f: &mut Visit<'_>) -> Result<()> {
    let geom = header(a, tree)?;
    if geom.root.address == UNDEFINED_ADDRESS {
        return Ok(());
    }
    let _ = walk(a, tree, &geom, geom.root, geom.depth, f)?;
    Ok(())
}

fn walk(
    a: &mut dyn MetaAccess,
    tree: &Tree,
    geom: &std::sync::Arc<h5_format::btree2::Btree2Header>,
    ptr: ChildPointer,
    depth: u16,
    f: &mut Visit<'_>,
) -> Result<ControlFlow<()>> {
    let n = node(a, geom, tree.ctx, ptr, depth)?;
    if depth == 0 {
        for r in &n.records {
            if f(a, r)?.is_break() {
                return Ok(ControlFlow::Break(()));
            }
        }
        return Ok(ControlFlow::Continue(()));
    }
    // In order: child 0, record 0, child 1, ..., child n. The depth falls by one per level,
    // so a damaged file cannot make this loop.
    for (i, child) in n.children.iter().enumerate() {
        if walk(a, tree, geom, *child, child_depth(depth, ptr)?, f)?.is_break() {
            return Ok(ControlFlow::Break(()));
        }
        if let Some(r) = n.records.get(i)
            && f(a, r)?.is_break()
        {
            return Ok(ControlFlow::Break(()));
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// Every record in key order.
#[cfg(test)]
pub(crate) fn records(a: &mut dyn MetaAccess, tree: &Tree) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    iterate(a, tree, &mut |_, r| {
        out.push(r.clone());
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(out)
}
