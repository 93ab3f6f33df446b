//! Sanity checks (spec §3.18, MDC-135).
//!
//! Three levels: `debug_assert!`s on cheap conditions in every build with debug assertions; the full
//! [`MetadataCache::check_invariants`], public so tests can call it; and the `extreme-checks` feature,
//! which runs the full check after every public call that is not nested inside a callback.

use std::collections::HashSet;

use crate::cache::{MetadataCache, Place, Slab};
use crate::class::CacheTypes;
use crate::error::{CacheError, Result};
use crate::list::Chain;

impl<T: CacheTypes> MetadataCache<T> {
    /// Called at the end of every public operation. With `extreme-checks`, runs the full check unless
    /// the call is nested inside a callback (the outer call is mid-way) or checks were switched off.
    pub(crate) fn after_op(&self) {
        #[cfg(feature = "extreme-checks")]
        if self.invariant_checks
            && self.callback_depth == 0
            && let Err(e) = self.check_invariants()
        {
            panic!("metadata cache invariant violated after a public call: {e}");
        }
    }

    /// Switch the per-call full check of the `extreme-checks` feature on or off (default on). The
    /// check is O(entries), so a test that builds a very large cache may turn it off and call
    /// [`check_invariants`](Self::check_invariants) itself. Without the feature this does nothing.
    pub fn set_invariant_checks(&mut self, on: bool) {
        self.invariant_checks = on;
    }

    /// Re-validate every invariant of the cache (listed in `docs/design.md` §2.3 and in the `cache`
    /// module's documentation).
    pub fn check_invariants(&self) -> Result<()> {
        let fail = |what: &'static str| Err(CacheError::Invariant(what));
        let mut n_entries = 0usize;
        let mut n_dirty = 0usize;
        let (mut total, mut clean, mut dirty, mut last) = (0usize, 0usize, 0usize, 0usize);
        for (slot, node) in self.slab.nodes.iter().enumerate() {
            let Some(e) = &node.entry else { continue };
            let slot = slot as u32;
            n_entries += 1;
            total += e.size;
            if e.dirty {
                dirty += e.size;
                n_dirty += 1;
                if self.slist.get(e.slist_pos as usize) != Some(&slot) {
                    return fail("dirty entry missing from the slist");
                }
            } else {
                clean += e.size;
            }
            if e.flush_last {
                last += 1;
            }
            if self.peek(e.addr) != Some(slot) {
                return fail("entry not found in the index under its address");
            }
            if e.place != Place::Protected {
                let want = if e.is_pinned() {
                    Place::Pinned
                } else {
                    Place::Lru
                };
                if e.place != want {
                    return fail("unprotected entry on the wrong list for its pinned state");
                }
            }
            if (e.ro_refs > 0) != (e.place == Place::Protected && e.read_only) {
                return fail("read-only count does not match read-only protection");
            }
            let dirty_children = e
                .children
                .iter()
                .filter(|&&c| self.slab.entry(c).subtree_dirty())
                .count() as u32;
            if dirty_children != e.ndirty_children {
                return fail("dirty-children count is wrong");
            }
            for &c in &e.children {
                if !self.slab.entry(c).parents.contains(&slot) {
                    return fail("child does not list its parent");
                }
            }
            for &p in &e.parents {
                if !self.slab.entry(p).children.contains(&slot) {
                    return fail("parent does not list its child");
                }
            }
        }
        if n_entries != self.index_len || total != self.index_size {
            return fail("index length or size does not match the entries");
        }
        if clean != self.clean_size || dirty != self.dirty_size || clean + dirty != total {
            return fail("clean and dirty totals do not add up");
        }
        // Every dirty entry's position points back at it, so with as many positions as dirty
        // entries (and no slot twice) the slist holds no clean or missing entry.
        if self.slist.len() != n_dirty
            || self.slist.len() != self.slist.iter().collect::<HashSet<_>>().len()
            || self.slist_size != dirty
        {
            return fail("slist size does not equal the dirty total");
        }
        if last != self.num_last_entries {
            return fail("flush-last count is wrong");
        }
        // Lists: membership, lengths and sizes.
        let mut seen = HashSet::new();
        let mut markers = 0;
        let (mut pl_len, mut pl_size) = (0usize, 0usize);
        for (slot, node) in self.slab.nodes.iter().enumerate() {
            if let Some(e) = node.entry.as_ref().filter(|e| e.place == Place::Protected) {
                seen.insert(slot as u32);
                pl_len += 1;
                pl_size += e.size;
            }
        }
        if pl_len != self.pl.len || pl_size != self.pl.size {
            return fail("protected count or size is wrong");
        }
        for (list, place) in [(&self.lru, Place::Lru), (&self.pel, Place::Pinned)] {
            let (mut len, mut size) = (0usize, 0usize);
            for s in list.iter(&self.slab, Chain::Main) {
                if Slab::<T::Icr>::is_marker(s) {
                    if place != Place::Lru || !self.markers.is_active(s) {
                        return fail("marker on a list it does not belong to");
                    }
                    markers += 1;
                    continue;
                }
                if !seen.insert(s) {
                    return fail("entry on more than one list");
                }
                let e = self.slab.entry(s);
                if e.place != place {
                    return fail("entry's place does not match its list");
                }
                len += 1;
                size += e.size;
            }
            if len != list.len || size != list.size {
                return fail("list length or size is wrong");
            }
        }
        if markers != self.markers.active_count() {
            return fail("marker count is wrong");
        }
        if seen.len() != self.index_len
            || self.lru.len + self.pl.len + self.pel.len != self.index_len
            || self.lru.size + self.pl.size + self.pel.size != self.index_size
        {
            return fail("lists do not add up to the index");
        }
        for (aux, want_dirty) in [(&self.clru, false), (&self.dlru, true)] {
            let (mut len, mut size) = (0usize, 0usize);
            for s in aux.iter(&self.slab, Chain::Aux) {
                let e = self.slab.entry(s);
                if e.place != Place::Lru || e.dirty != want_dirty {
                    return fail("clean/dirty LRU membership is wrong");
                }
                len += 1;
                size += e.size;
            }
            if len != aux.len || size != aux.size {
                return fail("clean/dirty LRU length or size is wrong");
            }
        }
        if self.clru.len + self.dlru.len != self.lru.len
            || self.clru.size + self.dlru.size != self.lru.size
        {
            return fail("clean and dirty LRU do not add up to the LRU");
        }
        Ok(())
    }

    /// Test support: corrupt a total so that a test can show the checks catch it (MDC-135).
    #[doc(hidden)]
    pub fn debug_corrupt_totals_for_test(&mut self) {
        self.clean_size += 1;
    }
}
