//! A structural check of a whole v2 B-tree (used by the tests after every change): every
//! pointer's counts match its node and subtree, depths fall by one per level, every node holds
//! at least one record and at most its depth's maximum, and, given an order, the records are
//! strictly increasing in key order.

use std::cmp::Ordering;
use std::sync::Arc;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree2::{Btree2Header, ChildPointer, Record};

use super::{Tree, corrupt, header, node};
use crate::access::MetaAccess;
use crate::error::Result;

/// How two records' keys compare.
pub(crate) type RecordOrder<'a> = &'a dyn Fn(&Record, &Record) -> Ordering;

/// Checks the tree (see the module doc); returns its record count.
pub(crate) fn check(
    a: &mut dyn MetaAccess,
    tree: &Tree,
    order: Option<RecordOrder<'_>>,
) -> Result<u64> {
    let geom = header(a, tree)?;
    if geom.root.address == UNDEFINED_ADDRESS {
        if geom.root.records != 0 || geom.root.total_records != 0 || geom.depth != 0 {
            return Err(corrupt(tree.addr, "empty tree with records or depth"));
        }
        return Ok(0);
    }
    let mut last: Option<Record> = None;
    subtree(
        a, tree, &geom, geom.root, geom.depth, true, order, &mut last,
    )?;
    Ok(geom.root.total_records)
}

#[allow(clippy::too_many_arguments)]
fn subtree(
    a: &mut dyn MetaAccess,
    tree: &Tree,
    geom: &Arc<Btree2Header>,
    ptr: ChildPointer,
    depth: u16,
    root: bool,
    order: Option<RecordOrder<'_>>,
    last: &mut Option<Record>,
) -> Result<u64> {
    let n = node(a, geom, tree.ctx, ptr, depth)?;
    let max = geom.limits_at(depth).map_or(0, |l| l.max_records);
    let count = n.records.len() as u64;
    if count > max || (!root && count == 0) {
        return Err(corrupt(
            ptr.address,
            format!("{count} records (at most {max})"),
        ));
    }
    let see = |r: &Record, last: &mut Option<Record>| -> Result<()> {
        if let (Some(o), Some(prev)) = (order, last.as_ref())
            && o(prev, r) != Ordering::Less
        {
            return Err(corrupt(ptr.address, format!("{prev:?} not before {r:?}")));
        }
        *last = Some(r.clone());
        Ok(())
    };
    let mut total = count;
    if depth == 0 {
        for r in &n.records {
            see(r, last)?;
        }
    } else {
        if n.children.len() as u64 != count + 1 {
            return Err(corrupt(ptr.address, "children and records disagree"));
        }
        for (i, c) in n.children.iter().enumerate() {
            let below = subtree(a, tree, geom, *c, depth - 1, false, order, last)?;
            if below != c.total_records {
                return Err(corrupt(
                    c.address,
                    format!(
                        "subtree holds {below}, its pointer says {}",
                        c.total_records
                    ),
                ));
            }
            total += below;
            if let Some(r) = n.records.get(i) {
                see(r, last)?;
            }
        }
    }
    if total != ptr.total_records {
        return Err(corrupt(
            ptr.address,
            format!(
                "subtree holds {total}, its pointer says {}",
                ptr.total_records
            ),
        ));
    }
    Ok(total)
}
