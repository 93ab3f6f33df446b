//! Moving records between sibling nodes: libhdf5's 1→2 split, 2- and 3-way redistribution and
//! 2→1 and 3→2 merges are all "lay the siblings' records and the separators between them out
//! again with these counts", which is what [`reshape`] does. Which records end where depends
//! only on the counts, so the result is the one libhdf5's record moves produce.
//!
//! Invariants: the records and child pointers of the siblings keep their order; the first
//! nodes keep their addresses (in SWMR-writing mode they move first, `shadow.rs`), a node the
//! reshape adds is allocated after them and a node it drops (the last ones) is deleted with its
//! space freed; every child that changes parent has its flush dependency moved along.

use std::sync::Arc;

use h5_format::btree2::{Btree2Header, Btree2Node, ChildPointer, Record};

use super::shadow::{placed, shadow};
use super::{Tree, check_node, child_depth, corrupt, node_entry, node_kind, node_load, pointer_to};
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
            right: idx.checked_add(1).and_then(count),
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
/// `redistribute` (retries left), else a 1→2 split. `None` when the counts (from a damaged
/// file) do not add up.
pub(super) fn plan_full(a: &Around, idx: usize, split: u64, redistribute: bool) -> Option<Plan> {
    let here = a.here.unwrap_or(0);
    let room = |c: Option<u64>| redistribute && c.is_some_and(|c| c < split);
    let plan = |first, inputs, outputs: Vec<u64>| Plan {
        first,
        inputs,
        outputs,
    };
    let split1 = || Some(plan(idx, 1, split_counts(here)?.to_vec()));
    // The left sibling's index (in the branches where `idx > 0`).
    let before = idx.checked_sub(1);
    if idx == 0 {
        match a.right {
            Some(r) if room(a.right) => Some(plan(0, 2, redistribute2_counts(here, r)?.to_vec())),
            _ => split1(),
        }
    } else if idx == a.last {
        match a.left {
            Some(l) if room(a.left) => {
                Some(plan(before?, 2, redistribute2_counts(l, here)?.to_vec()))
            }
            _ => split1(),
        }
    } else if room(a.left) || room(a.right) {
        let (l, r) = (a.left.unwrap_or(0), a.right.unwrap_or(0));
        Some(plan(before?, 3, redistribute3_counts(l, here, r)?.to_vec()))
    } else {
        split1()
    }
}

/// libhdf5's reshape of a child `idx` holding the merge threshold before a removal enters it
/// (`H5B2__remove_internal`): redistribution with a sibling that can give (2-way at the edges,
/// 3-way in the middle) while `redistribute`, else a 2→1 or 3→2 merge. `None` when the counts
/// (from a damaged file) do not add up.
pub(super) fn plan_sparse(a: &Around, idx: usize, merge: u64, redistribute: bool) -> Option<Plan> {
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
            Some(plan(0, 2, redistribute2_counts(here, r)?.to_vec()))
        } else {
            Some(plan(0, 2, vec![merge2_count(here, r)?]))
        }
    } else {
        // The left sibling's index.
        let before = idx.checked_sub(1)?;
        if idx == a.last {
            if gives(a.left) {
                Some(plan(before, 2, redistribute2_counts(l, here)?.to_vec()))
            } else {
                Some(plan(before, 2, vec![merge2_count(l, here)?]))
            }
        } else if gives(a.left) || gives(a.right) {
            Some(plan(before, 3, redistribute3_counts(l, here, r)?.to_vec()))
        } else {
            Some(plan(before, 3, merge3_counts(l, here, r)?.to_vec()))
        }
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
    let child_depth = child_depth(depth, *parent_ptr)?;
    let kind = node_kind(child_depth);
    let pnode: Arc<Btree2Node> = s.value_arc(parent)?;
    // The siblings `first..end` and the separators between them, `first..end - 1`.
    let end = first
        .checked_add(inputs)
        .filter(|&e| e <= pnode.children.len() && inputs > 0)
        .ok_or_else(|| corrupt(parent.addr, "siblings past the node's children"))?;
    let sep_end = end.saturating_sub(1);
    let ptrs: Vec<ChildPointer> = pnode
        .children
        .get(first..end)
        .ok_or_else(|| corrupt(parent.addr, "siblings past the node's children"))?
        .to_vec();
    let seps: Vec<Record> = pnode
        .records
        .get(first..sep_end)
        .ok_or_else(|| corrupt(parent.addr, "separators past the node's records"))?
        .to_vec();
    drop(pnode);
    // The outputs' records and the separators between them, against the inputs' (as their
    // parent counts them) and the separators between those.
    let total = outputs
        .iter()
        .try_fold(0u64, |t, &n| t.checked_add(n))
        .and_then(|t| t.checked_add(outputs.len() as u64))
        .and_then(|t| t.checked_sub(1));
    let given = ptrs
        .iter()
        .try_fold(0u64, |t, p| t.checked_add(p.records))
        .and_then(|t| t.checked_add(seps.len() as u64));
    let total = match (total, given) {
        (Some(t), Some(g)) if t == g => t,
        _ => {
            return Err(corrupt(
                parent.addr,
                format!("{given:?} records to lay out as {outputs:?} (internal inconsistency)"),
            ));
        }
    };
    // The siblings, held, their records and children moved out end to end with the separators
    // (each sibling is given its new records below, or deleted). The counts were checked
    // against the parent's pointers above and each sibling against its pointer here, so
    // nothing is taken out before the inputs are known to add up.
    let mut held = Vec::with_capacity(inputs);
    let mut records = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    // (child pointer, address of the sibling it came from)
    let mut children: Vec<(ChildPointer, u64)> = Vec::new();
    for (i, p) in ptrs.iter().enumerate() {
        let mut h = s.protect(kind, p.address, || {
            node_load(geom, tree.ctx, *p, child_depth)
        })?;
        check_node(&*s.value_arc::<Btree2Node>(&h)?, *p, child_depth)?;
        if i < outputs.len() {
            // A sibling that stays changes: it moves first in SWMR-writing mode, before its
            // children's dependencies are moved by address below. (Its pointer in the parent
            // is rebuilt from its new address.)
            shadow(s, geom, &mut h, &mut p.clone())?;
        }
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
    let mut new_seps = Vec::with_capacity(outputs.len().saturating_sub(1));
    let mut new_ptrs = Vec::with_capacity(outputs.len());
    let mut out_held = Vec::with_capacity(outputs.len());
    let mut reused = held.into_iter();
    let last = outputs.len().saturating_sub(1);
    for (j, &n) in outputs.iter().enumerate() {
        // At most `records.len()` (checked above): fits in usize.
        let n = usize::try_from(n).map_err(|_| corrupt(parent.addr, "record count"))?;
        let node_recs: Vec<Record> = recs.by_ref().take(n).collect();
        let node_kids: Vec<(ChildPointer, u64)> = if child_depth > 0 {
            kids.by_ref().take(n.saturating_add(1)).collect()
        } else {
            Vec::new()
        };
        let (addr, h) = if let Some(h) = reused.next() {
            (h.addr, h)
        } else {
            let addr = s.allocate(u64::from(geom.node_size))?;
            placed(s, addr)?;
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
        new_ptrs.push(pointer_to(&node)?);
        *s.value_mut::<Btree2Node>(&h)? = node;
        for (c, from) in &node_kids {
            if *from != addr {
                s.move_dependency(*from, &h, c.address)?;
            }
        }
        if j < last {
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
        // The ranges were checked against this held node above.
        p.records.splice(first..sep_end, new_seps);
        p.children.splice(first..end, new_ptrs);
    }
    parent_ptr.records = parent_ptr
        .records
        .checked_add(outputs.len() as u64)
        .and_then(|r| r.checked_sub(inputs as u64))
        .ok_or_else(|| corrupt(parent.addr, "record counts overflow"))?;
    for h in out_held {
        s.depend_held(parent, h.addr)?;
        s.release(h)?;
    }
    Ok(())
}

/// libhdf5's 1→2 split of child `idx` (of `n` records): `n / 2` records stay, the next one
/// moves up, the rest go to a new right sibling.
pub(super) fn split_counts(n: u64) -> Option<[u64; 2]> {
    let mid = n / 2;
    Some([mid, n.checked_sub(mid)?.checked_sub(1)?])
}

/// libhdf5's 2-way redistribution of siblings of `l` and `r` records: the one with more gives
/// to the other until they differ by at most one (the receiving side ends with the extra one
/// when the left gave, the left side when the right gave).
pub(super) fn redistribute2_counts(l: u64, r: u64) -> Option<[u64; 2]> {
    let total = l.checked_add(r)?;
    let half = total / 2;
    let rest = total.checked_sub(half)?;
    Some(if l < r { [rest, half] } else { [half, rest] })
}

/// libhdf5's 2→1 merge of siblings of `l` and `r` records (the separator joins them).
pub(super) fn merge2_count(l: u64, r: u64) -> Option<u64> {
    l.checked_add(r)?.checked_add(1)
}

/// libhdf5's 3-way redistribution of siblings of `l`, `m` and `r` records.
pub(super) fn redistribute3_counts(l: u64, m: u64, r: u64) -> Option<[u64; 3]> {
    let total = l.checked_add(m)?.checked_add(r)?;
    let middle = total / 3;
    let outer = total.checked_sub(middle)?;
    let left = outer / 2;
    Some([left, middle, outer.checked_sub(left)?])
}

/// libhdf5's 3→2 merge of siblings of `l`, `m` and `r` records.
pub(super) fn merge3_counts(l: u64, m: u64, r: u64) -> Option<[u64; 2]> {
    // Both separators join; one moves up to the parent.
    let kept = l.checked_add(m)?.checked_add(r)?.checked_add(1)?;
    let left = kept / 2;
    Some([left, kept.checked_sub(left)?])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts conserve the records (separators included) and follow libhdf5's arithmetic.
    #[test]
    fn counts_follow_libhdf5() {
        assert_eq!(split_counts(45), Some([22, 22]));
        assert_eq!(split_counts(44), Some([22, 21]));
        assert_eq!(redistribute2_counts(45, 20), Some([32, 33]));
        assert_eq!(redistribute2_counts(20, 45), Some([33, 32]));
        assert_eq!(redistribute2_counts(18, 30), Some([24, 24]));
        assert_eq!(redistribute3_counts(45, 45, 20), Some([37, 36, 37]));
        assert_eq!(merge3_counts(18, 18, 19), Some([28, 28]));
        assert_eq!(merge2_count(18, 19), Some(38));
        for (l, m, r) in [(1u64, 2u64, 3u64), (17, 18, 40), (0, 0, 5)] {
            let three = redistribute3_counts(l, m, r).unwrap();
            assert_eq!(three.iter().sum::<u64>(), l + m + r);
            let two = merge3_counts(l, m, r).unwrap();
            assert_eq!(two.iter().sum::<u64>() + 1, l + m + r + 2);
        }
    }

    /// Counts from a damaged file that cannot be laid out give `None`, not a wrap or a panic:
    /// an empty child cannot split (a split percent of 0 makes an empty child "full"), and
    /// sums past `u64::MAX` do not add up.
    #[test]
    fn impossible_counts_are_refused() {
        assert_eq!(split_counts(0), None);
        assert_eq!(redistribute2_counts(u64::MAX, 1), None);
        assert_eq!(merge2_count(u64::MAX, 0), None);
        assert_eq!(redistribute3_counts(u64::MAX, 1, 0), None);
        assert_eq!(merge3_counts(u64::MAX - 1, 0, 1), None);
        let full_but_empty = Around {
            last: 1,
            left: None,
            here: Some(0),
            right: Some(0),
        };
        assert_eq!(plan_full(&full_but_empty, 0, 0, false), None);
    }
}
