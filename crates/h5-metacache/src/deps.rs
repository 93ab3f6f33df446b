//! Flush dependencies (spec §3.11, Q-07).
//!
//! We follow Q-07's recommended generalisation: a child may have several parents. Each entry keeps its
//! parents, its children, and `ndirty_children`, the number of children whose subtree (the child or any
//! descendant) is dirty. A parent may be written only when that count is 0, which orders every write
//! path children-first (MDC-078, MDC-087). A parent is pinned by the cache while it has children
//! (MDC-060, MDC-085). Heights are computed on demand and bounded by [`MAX_FLUSH_DEP_HEIGHT`].

use crate::cache::MetadataCache;
use crate::class::CacheTypes;
use crate::error::{CacheError, Result};
use crate::trace::{Outcome, TraceOp};

/// Largest allowed height of a flush-dependency tree (a leaf has height 0).
pub const MAX_FLUSH_DEP_HEIGHT: usize = 8;

impl<T: CacheTypes> MetadataCache<T> {
    fn dep_err(parent: u64, child: u64, reason: &'static str) -> CacheError {
        CacheError::FlushDependency {
            parent,
            child,
            reason,
        }
    }

    /// Height of the subtree under `slot` (0 for an entry with no children).
    pub(crate) fn height_of(&self, slot: u32) -> usize {
        let children = &self.slab.entry(slot).children;
        children
            .iter()
            .map(|&c| 1 + self.height_of(c))
            .max()
            .unwrap_or(0)
    }

    /// Longest path from `slot` up to a root.
    fn depth_above(&self, slot: u32) -> usize {
        let parents = &self.slab.entry(slot).parents;
        parents
            .iter()
            .map(|&p| 1 + self.depth_above(p))
            .max()
            .unwrap_or(0)
    }

    /// Whether `target` is `slot` or one of its descendants.
    fn reaches(&self, slot: u32, target: u32) -> bool {
        if slot == target {
            return true;
        }
        let children = &self.slab.entry(slot).children;
        children.iter().any(|&c| self.reaches(c, target))
    }

    /// Make `child` be written before `parent` (MDC-082, MDC-084). The parent must be pinned or
    /// protected; it is pinned by the cache while it has children.
    pub fn create_flush_dependency(&mut self, parent: u64, child: u64) -> Result<()> {
        let r = self.create_dep_inner(parent, child);
        self.trace_op(
            |_| TraceOp::FlushDep { parent, child },
            r.is_ok().then_some(Outcome::Ok),
        );
        self.after_op();
        r
    }

    fn create_dep_inner(&mut self, parent: u64, child: u64) -> Result<()> {
        if parent == child {
            return Err(Self::dep_err(
                parent,
                child,
                "an entry cannot depend on itself",
            ));
        }
        let p = self
            .peek(parent)
            .ok_or_else(|| Self::dep_err(parent, child, "parent is not resident"))?;
        let c = self
            .peek(child)
            .ok_or_else(|| Self::dep_err(parent, child, "child is not resident"))?;
        let pe = self.slab.entry(p);
        if !(pe.is_pinned() || pe.place == crate::cache::Place::Protected) {
            return Err(Self::dep_err(
                parent,
                child,
                "the parent must be pinned or protected",
            ));
        }
        if pe.children.contains(&c) {
            return Err(Self::dep_err(
                parent,
                child,
                "the dependency already exists",
            ));
        }
        if self.reaches(c, p) {
            return Err(Self::dep_err(
                parent,
                child,
                "the dependency would make a cycle",
            ));
        }
        if self.height_of(c) + 1 + self.depth_above(p) >= MAX_FLUSH_DEP_HEIGHT {
            return Err(Self::dep_err(
                parent,
                child,
                "the dependency tree would exceed the maximum height",
            ));
        }
        let parent_before = self.slab.entry(p).subtree_dirty();
        self.slab.entry_mut(p).children.push(c);
        self.slab.entry_mut(c).parents.push(p);
        if self.slab.entry(c).subtree_dirty() {
            self.slab.entry_mut(p).ndirty_children += 1;
            let after = self.slab.entry(p).subtree_dirty();
            if after != parent_before {
                self.propagate_subtree_dirty(p, after);
            }
        }
        // Gaining a first child pins the parent (it is pinned or protected already, so it is on no
        // list that changes); re-place it in case it was on the LRU through an outer protect path.
        self.replace_if_pin_changed(p);
        self.stats.flush_deps_created += 1;
        Ok(())
    }

    /// Remove a dependency (MDC-083). A parent left without children loses its cache pin and, unless
    /// the client pins it or it is protected, goes to the LRU head.
    pub fn destroy_flush_dependency(&mut self, parent: u64, child: u64) -> Result<()> {
        let r = self.destroy_dep_inner(parent, child);
        self.trace_op(
            |_| TraceOp::FlushUndep { parent, child },
            r.is_ok().then_some(Outcome::Ok),
        );
        self.after_op();
        r
    }

    fn destroy_dep_inner(&mut self, parent: u64, child: u64) -> Result<()> {
        let p = self
            .peek(parent)
            .ok_or_else(|| Self::dep_err(parent, child, "parent is not resident"))?;
        let c = self
            .peek(child)
            .ok_or_else(|| Self::dep_err(parent, child, "child is not resident"))?;
        if !self.slab.entry(p).children.contains(&c) {
            return Err(Self::dep_err(parent, child, "no such dependency"));
        }
        self.unlink_dependency(p, c);
        Ok(())
    }

    /// Remove the link `p -> c`, fixing dirty counts and the parent's pin.
    pub(crate) fn unlink_dependency(&mut self, p: u32, c: u32) {
        let parent_before = self.slab.entry(p).subtree_dirty();
        self.slab.entry_mut(p).children.retain(|&x| x != c);
        self.slab.entry_mut(c).parents.retain(|&x| x != p);
        if self.slab.entry(c).subtree_dirty() {
            self.slab.entry_mut(p).ndirty_children -= 1;
            let after = self.slab.entry(p).subtree_dirty();
            if after != parent_before {
                self.propagate_subtree_dirty(p, after);
            }
        }
        self.replace_if_pin_changed(p);
        self.stats.flush_deps_destroyed += 1;
    }

    /// Height of the entry at `addr` in its dependency tree (MDC-082).
    pub fn flush_dependency_height(&self, addr: u64) -> Option<usize> {
        self.peek(addr).map(|s| self.height_of(s))
    }

    /// Whether the entry at `child` has the entry at `parent` as a flush-dependency parent
    /// (`None`: `child` is not cached). Allocates nothing, unlike
    /// [`MetadataCache::flush_dependency_parents`].
    pub fn has_flush_dependency(&self, parent: u64, child: u64) -> Option<bool> {
        let s = self.peek(child)?;
        Some(
            self.slab
                .entry(s)
                .parents
                .iter()
                .any(|&p| self.slab.entry(p).addr == parent),
        )
    }

    /// Parents of the entry at `addr`.
    pub fn flush_dependency_parents(&self, addr: u64) -> Vec<u64> {
        self.peek(addr)
            .map(|s| {
                self.slab
                    .entry(s)
                    .parents
                    .iter()
                    .map(|&p| self.slab.entry(p).addr)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Children of the entry at `addr`.
    pub fn flush_dependency_children(&self, addr: u64) -> Vec<u64> {
        self.peek(addr)
            .map(|s| {
                self.slab
                    .entry(s)
                    .children
                    .iter()
                    .map(|&c| self.slab.entry(c).addr)
                    .collect()
            })
            .unwrap_or_default()
    }
}
