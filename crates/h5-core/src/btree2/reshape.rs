//! Moving records between sibling nodes: libhdf5's 1→2 split, 2- and 3-way redistribution and
//! 2→1 and 3→2 merges are all "lay the siblings' records and the separators between them out
//! again with these counts", which is what [`reshape`] does. Which records end where depends
//! only on the counts, so the result is the one libhdf5's record moves produce.
//!
//! Invariants: the records and child pointers of the siblings keep their order; the first
//! nodes keep their addresses, a node the reshape adds is allocated after them and a node it
//! drops (the last ones) is deleted with its space freed; every child that changes parent has
//! its flush dependency moved along.

use std::sync::Arc;

use h5_format::btree2::{Btree2Header, Btree2Node, ChildPointer, Record};

use super::{Tree, check_node, corrupt, node_entry, node_kind, node_load, pointer_to};
use crate::access::{Held, Session};
use crate::error::Result;

/// A held internal node whose children are reshaped: its tree, geometry and depth.
pub(super) struct Level<'a> {
    pub(super) tree: &'a Tree,
    pub(super) geom: &'a Arc<Btree2Header>,
    pub(super) depth: u16,
    pub(super) node: &'a Held,
}

/// Record counts around child `idx` of a node: of the child and its siblings, and the node's
/// record count (its last child's index).
#[derive(Clone, Copy, Debug)]
pub(super) struct Around {
    pub(super) last: usize,
    pub(super) left: Option<u64>,
    pub(super) here: Option<u64>,
    pub(super) right: Option<u64>,
}

impl Level<'_> {
    /// The counts around child `idx`.
    pub(super) fn around(&self, s: &Session<'_>, idx: usize) -> Result<Around> {
        let n: Arc<Btree2Node> = s.value_arc(self.node)?;
        let count = |i: usize| n.children.get(i).map(|c| c.records);
        Ok(Around {
            last: n.records.len(),
            left: idx.checked_sub(1).and_then(count),
            here: count(idx),
            right: count(idx + 1),
        })
    }

    /// Lays out `plan` (see [`reshape`]), the node's pointer being `ptr`.
    pub(super) fn apply(
        &self,
        s: &mut Session<'_>,
        ptr: &mut ChildPointer,
        plan: &Plan,
    ) -> Result<()> {
        reshape(s, self, ptr, plan.first, plan.inputs, &plan.outputs)
    }
}

/// Which siblings a reshape takes (`inputs` children from `first`) and the record counts it
/// gives the nodes it lays out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Plan {
    pub(super) first: usize,
    pub(super) inputs: usize,
    pub(super) outputs: Vec<u64>,
}

/// libhdf5's reshape of a full child `idx` before an insert enters it (`H5B2__insert_internal`):
/// redistribution with a sibling that has room (2-way at the edges, 3-way in the middle) while
/// `redistribute` (retries left), else a 1→2 split.
pub(super) fn plan_full(a: &Around, idx: usize, split: u64, redistribute: bool) -> Plan {
    let here = a.here.unwrap_or(0);
    let room = |c: Option<u64>| redistribute && c.is_some_and(|c| c < split);
    let plan = |first, inputs, outputs: Vec<u64>| Plan {
        first,
        inputs,
        outputs,
    };
    let split1 = plan(idx, 1, split_counts(here).to_vec());
    if idx == 0 {
        match a.right {
            Some(r) if room(a.right) => plan(0, 2, redistribute2_counts(here, r).to_vec()),
            _ => split1,
        }
    } else if idx == a.last {
        match a.left {
            Some(l) if room(a.left) => plan(idx - 1, 2, redistribute2_counts(l, here).to_vec()),
            _ => split1,
        }
    } else if room(a.left) || room(a.right) {
        let (l, r) = (a.left.unwrap_or(0), a.right.unwrap_or(0));
        plan(idx - 1, 3, redistribute3_counts(l, here, r).to_vec())
    } else {
        split1
    }
}

/// libhdf5's reshape of a child `idx` holding the merge threshold before a removal enters it
/// (`H5B2__remove_internal`): redistribution with a sibling that can give (2-way at the edges,
/// 3-way in the middle) while `redistribute`, else a 2→1 or 3→2 merge.
pub(super) fn plan_sparse(a: &Around, idx: usize, merge: u64, redistribute: bool) -> Plan {
    let here = a.here.unwrap_or(0);
    let gives = |c: Option<u64>| redistribute && c.is_some_and(|c| c > merge);
    let plan = |first, inputs, outputs: Vec<u64>| Plan {
        first,
        inputs,
        outputs,
    };
    let (l, r) = (a.left.unwrap_or(0), a.right.unwrap_or(0));
    if idx == 0 {
        if gives(a.right) {
            plan(0, 2, redistribute2_counts(here, r).to_vec())
        } else {
            plan(0, 2, vec![here + r + 1])
        }
    } else if idx == a.last {
        if gives(a.left) {
            plan(idx - 1, 2, redistribute2_counts(l, here).to_vec())
        } else {
            plan(idx - 1, 2, vec![l + here + 1])
        }
    } else if gives(a.left) || gives(a.right) {
        plan(idx - 1, 3, redistribute3_counts(l, here, r).to_vec())
    } else {
        plan(idx - 1, 3, merge3_counts(l, here, r).to_vec())
    }
}

/// Lays the `inputs` children of `at`'s node (its pointer `parent_ptr`) starting at child
/// `first`, with the node's separators between them, out again as `outputs.len()` nodes holding
/// `outputs[i]` records each.
pub(super) fn reshape(
    s: &mut Session<'_>,
    at: &Level<'_>,
    parent_ptr: &mut ChildPointer,
    first: usize,
    inputs: usize,
    outputs: &[u64],
) -> Result<()> {
    let (tree, geom, depth, parent) = (at.tree, at.geom, at.depth, at.node);
    let child_depth = depth - 1;
    let kind = node_kind(child_depth);
    let pnode: Arc<Btree2Node> = s.value_arc(parent)?;
    let ptrs: Vec<ChildPointer> = pnode
        .children
        .get(first..first + inputs)
        .ok_or_else(|| corrupt(parent.addr, "siblings past the node's children"))?
        .to_vec();
    let seps: Vec<Record> = pnode
        .records
        .get(first..first + inputs - 1)
        .ok_or_else(|| corrupt(parent.addr, "separators past the node's records"))?
        .to_vec();
    drop(pnode);
    let total: u64 = outputs.iter().sum::<u64>() + outputs.len() as u64 - 1;
    let given: u64 = ptrs.iter().map(|p| p.records).sum::<u64>() + seps.len() as u64;
    if total != given {
        return Err(corrupt(
            parent.addr,
            format!("{given} records to lay out as {outputs:?} (internal inconsistency)"),
        ));
    }
    // The siblings, held, their records and children moved out end to end with the separators
    // (each sibling is given its new records below, or deleted). The counts were checked
    // against the parent's pointers above and each sibling against its pointer here, so
    // nothing is taken out before the inputs are known to add up.
    let mut held = Vec::with_capacity(inputs);
    let mut records = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    // (child pointer, address of the sibling it came from)
    let mut children: Vec<(ChildPointer, u64)> = Vec::new();
    for p in &ptrs {
        let h = s.protect(kind, p.address, node_load(geom, tree.ctx, *p, child_depth))?;
        check_node(&*s.value_arc::<Btree2Node>(&h)?, *p, child_depth)?;
        held.push(h);
    }
    for (i, h) in held.iter().enumerate() {
        let n = s.value_mut::<Btree2Node>(h)?;
        records.append(&mut n.records);
        let from = h.addr;
        children.extend(n.children.drain(..).map(|c| (c, from)));
        if let Some(sep) = seps.get(i) {
            records.push(sep.clone());
        }
    }
    let mut recs = records.into_iter();
    let mut kids = children.into_iter();
    let mut new_seps = Vec::with_capacity(outputs.len() - 1);
    let mut new_ptrs = Vec::with_capacity(outputs.len());
    let mut out_held = Vec::with_capacity(outputs.len());
    let mut reused = held.into_iter();
    for (j, &n) in outputs.iter().enumerate() {
        let node_recs: Vec<Record> = recs.by_ref().take(n as usize).collect();
        let node_kids: Vec<(ChildPointer, u64)> = if child_depth > 0 {
            kids.by_ref().take(n as usize + 1).collect()
        } else {
            Vec::new()
        };
        let (addr, h) = if let Some(h) = reused.next() {
            (h.addr, h)
        } else {
            let addr = s.allocate(u64::from(geom.node_size))?;
            let placeholder = Btree2Node {
                address: addr,
                depth: child_depth,
                records: Vec::new(),
                children: Vec::new(),
            };
            let h = s.insert_held(kind, addr, node_entry(placeholder, geom, tree.ctx))?;
            (addr, h)
        };
        let node = Btree2Node {
            address: addr,
            depth: child_depth,
            records: node_recs,
            children: node_kids.iter().map(|(c, _)| *c).collect(),
        };
        new_ptrs.push(pointer_to(&node));
        *s.value_mut::<Btree2Node>(&h)? = node;
        for (c, from) in &node_kids {
            if *from != addr {
                s.move_dependency(*from, &h, c.address)?;
            }
        }
        if j + 1 < outputs.len() {
            new_seps.push(
                recs.next()
                    .ok_or_else(|| corrupt(parent.addr, "separator missing"))?,
            );
        }
        out_held.push(h);
    }
    // Siblings left over (a merge) are deleted.
    for h in reused {
        s.release_deleted(h, u64::from(geom.node_size))?;
    }
    {
        let p = s.value_mut::<Btree2Node>(parent)?;
        p.records.splice(first..first + inputs - 1, new_seps);
        p.children.splice(first..first + inputs, new_ptrs);
    }
    parent_ptr.records = parent_ptr.records + outputs.len() as u64 - inputs as u64;
    for h in out_held {
        s.depend_held(parent, h.addr)?;
        s.release(h)?;
    }
    Ok(())
}

/// libhdf5's 1→2 split of child `idx` (of `n` records): `n / 2` records stay, the next one
/// moves up, the rest go to a new right sibling.
pub(super) fn split_counts(n: u64) -> [u64; 2] {
    let mid = n / 2;
    [mid, n - mid - 1]
}

/// libhdf5's 2-way redistribution of siblings of `l` and `r` records: the one with more gives
/// to the other until they differ by at most one (the receiving side ends with the extra one
/// when the left gave, the left side when the right gave).
pub(super) fn redistribute2_counts(l: u64, r: u64) -> [u64; 2] {
    if l < r {
        let right = (l + r) / 2;
        [l + r - right, right]
    } else {
        let left = (l + r) / 2;
        [left, l + r - left]
    }
}

/// libhdf5's 3-way redistribution of siblings of `l`, `m` and `r` records.
pub(super) fn redistribute3_counts(l: u64, m: u64, r: u64) -> [u64; 3] {
    let total = l + m + r;
    let middle = total / 3;
    let left = (total - middle) / 2;
    [left, middle, total - left - middle]
}

/// libhdf5's 3→2 merge of siblings of `l`, `m` and `r` records.
pub(super) fn merge3_counts(l: u64, m: u64, r: u64) -> [u64; 2] {
    let total = l + m + r + 2;
    let left = (total - 1) / 2;
    [left, total - 1 - left]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts conserve the records (separators included) and follow libhdf5's arithmetic.
    #[test]
    fn counts_follow_libhdf5() {
        assert_eq!(split_counts(45), [22, 22]);
        assert_eq!(split_counts(44), [22, 21]);
        assert_eq!(redistribute2_counts(45, 20), [32, 33]);
        assert_eq!(redistribute2_counts(20, 45), [33, 32]);
        assert_eq!(redistribute2_counts(18, 30), [24, 24]);
        assert_eq!(redistribute3_counts(45, 45, 20), [37, 36, 37]);
        assert_eq!(merge3_counts(18, 18, 19), [28, 28]);
        for (l, m, r) in [(1u64, 2u64, 3u64), (17, 18, 40), (0, 0, 5)] {
            assert_eq!(redistribute3_counts(l, m, r).iter().sum::<u64>(), l + m + r);
            assert_eq!(
                merge3_counts(l, m, r).iter().sum::<u64>() + 1,
                l + m + r + 2
            );
        }
    }
}
