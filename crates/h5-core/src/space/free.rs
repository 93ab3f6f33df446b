//! Giving space back: free-space sections, their merging, and shrinking the end of allocation.
//!
//! A freed block becomes a section of its free list. On the way in it merges with adjacent
//! sections of the same list (small sections only within one page), and the merged section may
//! then *shrink the container*: give itself back to the end of allocation when it ends there,
//! or (non-paged) join an adjacent aggregator. When a section disappears that way, the list's
//! last section is tried in turn, so a run of sections at the end unwinds in one free.
//! Libhdf5's rules (`H5MF.c`, `H5MFsection.c`, `H5FSsection.c`), per section class:
//! * simple (non-paged): merges with any adjacent section; shrinks at the end of allocation or
//!   into the aggregator of its list (the aggregator takes the section, or the section takes
//!   the aggregator when the two would make a block or more);
//! * small (paged, under a page): merges only inside its page; never shrinks the container; a
//!   merge that fills the whole page frees the page, which becomes a large section;
//! * large (paged): merges with any adjacent large section; shrinks at the end of allocation
//!   only when at least a page long, keeping its partial first page (if any) so the end of
//!   allocation stays on a page boundary.

use super::aggregator::AggrId;
use super::sections::{add_below_eoa, in_one_page, misalign};
use super::{FreeList, SpaceKind, SpaceManager, SpaceStrategy};

/// How a section shrinks the container.
#[derive(Clone, Copy, Debug)]
enum Shrink {
    /// It ends at the end of allocation, which moves down over it.
    Eoa,
    /// It adjoins an aggregator that takes it.
    IntoAggr(AggrId),
    /// It adjoins an aggregator and the two make a block or more: the section takes the
    /// aggregator's rest (when the caller allows; otherwise the aggregator takes the section).
    TakeAggr(AggrId),
}

/// The section classes of libhdf5's file free-space managers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    Simple,
    Small,
    Large,
}

impl SpaceManager {
    pub(crate) fn class(&self, list: FreeList) -> Class {
        match (self.config.strategy, list) {
            (SpaceStrategy::Page, FreeList::Large) => Class::Large,
            (SpaceStrategy::Page, _) => Class::Small,
            _ => Class::Simple,
        }
    }

    /// Whether section `(a1, l1)` and the following section `(a2, l2)` of `list` merge.
    pub(crate) fn can_merge(
        &self,
        list: FreeList,
        (a1, l1): (u64, u64),
        (a2, l2): (u64, u64),
    ) -> bool {
        a1.checked_add(l1) == Some(a2)
            && (self.class(list) != Class::Small
                || in_one_page(a1, add_below_eoa(a2, l2), self.config.page_size))
    }

    fn can_shrink(&self, list: FreeList, addr: u64, len: u64, eoa_only: bool) -> Option<Shrink> {
        let at_eoa = add_below_eoa(addr, len) == self.eoa;
        match self.class(list) {
            Class::Small => None,
            Class::Large => (at_eoa && len >= self.config.page_size).then_some(Shrink::Eoa),
            Class::Simple if at_eoa => Some(Shrink::Eoa),
            Class::Simple if eoa_only => None,
            Class::Simple => {
                let id = match list {
                    FreeList::RawData => AggrId::SmallData,
                    _ => AggrId::Meta,
                };
                let ag = self.aggr(id);
                if !ag.adjoins(addr, len) {
                    None
                } else if add_below_eoa(ag.size, len) >= ag.block_size {
                    Some(Shrink::TakeAggr(id))
                } else {
                    Some(Shrink::IntoAggr(id))
                }
            }
        }
    }

    /// Applies a shrink; returns what is left of the section (to be linked), if anything.
    fn shrink(
        &mut self,
        how: Shrink,
        addr: u64,
        len: u64,
        allow_take_aggr: bool,
    ) -> Option<(u64, u64)> {
        match how {
            Shrink::Eoa if self.config.strategy == SpaceStrategy::Page => {
                // Large section: free its whole pages, keep the partial first page.
                let head = misalign(addr, self.config.page_size);
                // The section is at least a page long, so head < len.
                self.eoa = add_below_eoa(addr, head);
                (head > 0).then_some((addr, head))
            }
            Shrink::Eoa => {
                self.eoa = addr;
                None
            }
            Shrink::TakeAggr(id) if allow_take_aggr => {
                let ag = self.aggr_mut(id);
                // The aggregator's rest adjoins the section on one side.
                let merged_len = add_below_eoa(len, ag.size);
                let merged = if add_below_eoa(addr, len) == ag.addr {
                    (addr, merged_len)
                } else {
                    (ag.addr, merged_len)
                };
                ag.reset();
                Some(merged)
            }
            Shrink::TakeAggr(id) | Shrink::IntoAggr(id) => {
                let ag = self.aggr_mut(id);
                if add_below_eoa(addr, len) == ag.addr {
                    ag.addr = addr;
                    // Space joined at the front counts against what the aggregator has taken.
                    ag.tot_size = ag.tot_size.saturating_sub(len);
                }
                ag.size = add_below_eoa(ag.size, len);
                None
            }
        }
    }

    /// Merges a new section `addr..addr + len` into `list` and lets it shrink the container.
    /// Returns the section to link, or `None` when nothing is left to link (merged into a freed
    /// page, shrunk away, or the section tested last is one still linked).
    fn merge_and_shrink(
        &mut self,
        list: FreeList,
        kind: SpaceKind,
        mut addr: u64,
        mut len: u64,
        allow_take_aggr: bool,
    ) -> Option<(u64, u64)> {
        let small = self.class(list) == Class::Small;
        let page = self.config.page_size;
        loop {
            let mut merged = false;
            if let Some(prev) = self.lists[list].before(addr)
                && self.can_merge(list, prev, (addr, len))
            {
                self.lists[list].remove(prev.0);
                addr = prev.0;
                len = add_below_eoa(len, prev.1);
                merged = true;
            }
            if small && merged && len == page {
                self.xfree(kind, addr, len);
                return None;
            }
            if let Some(next) = self.lists[list].after(addr)
                && self.can_merge(list, (addr, len), next)
            {
                self.lists[list].remove(next.0);
                len = add_below_eoa(len, next.1);
                if small && len == page {
                    self.xfree(kind, addr, len);
                    return None;
                }
                merged = true;
            }
            if !merged {
                break;
            }
        }
        let mut sect = Some((addr, len));
        // Whether `sect` is a section still linked in the list (the last one, tried after the
        // section being added shrank away).
        let mut linked = false;
        while let Some((a, l)) = sect {
            let Some(how) = self.can_shrink(list, a, l, false) else {
                break;
            };
            if linked {
                self.lists[list].remove(a);
                linked = false;
            }
            sect = self.shrink(how, a, l, allow_take_aggr);
            if sect.is_none() {
                sect = self.lists[list].last();
                linked = sect.is_some();
            }
        }
        if linked { None } else { sect }
    }

    /// Adds a section to `list` with merging and shrinking (libhdf5's `H5MF__add_sect`).
    pub(crate) fn add_section(&mut self, list: FreeList, kind: SpaceKind, addr: u64, len: u64) {
        self.lists[list].started = true;
        if let Some((a, l)) = self.merge_and_shrink(list, kind, addr, len, true) {
            self.lists[list].insert(a, l);
        }
    }

    /// Frees a block that the caller has validated (libhdf5's `H5MF_xfree`).
    pub(crate) fn xfree(&mut self, kind: SpaceKind, addr: u64, len: u64) {
        let list = self.list_for(kind, len);
        let threshold = self.config.threshold;
        if !self.lists[list].started {
            // No manager yet: only the end of allocation or an aggregator can take it.
            if let Some(how) = self.can_shrink(list, addr, len, false) {
                if let Some((_, lost)) = self.shrink(how, addr, len, false) {
                    self.leaked = self.leaked.saturating_add(lost);
                }
                return;
            }
            if len < threshold || !self.config.strategy.tracks_free_space() {
                self.leaked = self.leaked.saturating_add(len);
                return;
            }
            self.lists[list].started = true;
        }
        match self.merge_and_shrink(list, kind, addr, len, true) {
            None => {}
            // Under the threshold a section is kept only if it merged with something.
            Some((_, l)) if len < threshold && l == len => {
                self.leaked = self.leaked.saturating_add(len);
            }
            Some((a, l)) => self.lists[list].insert(a, l),
        }
    }

    /// Shrinks the end of allocation over whatever free space ends there, repeatedly, looking
    /// only at the last section of every list and at the aggregators (libhdf5's
    /// `H5MF__close_shrink_eoa`).
    pub(crate) fn shrink_eoa_fully(&mut self) {
        loop {
            let mut shrank = false;
            for list in FreeList::ALL {
                if let Some((a, l)) = self.lists[list].last()
                    && let Some(how) = self.can_shrink(list, a, l, true)
                {
                    self.lists[list].remove(a);
                    if let Some((ra, rl)) = self.shrink(how, a, l, true) {
                        self.lists[list].insert(ra, rl);
                    }
                    shrank = true;
                }
            }
            if self.config.strategy != SpaceStrategy::Page {
                for id in [AggrId::Meta, AggrId::SmallData] {
                    let ag = *self.aggr(id);
                    if ag.size > 0 && ag.end() == self.eoa {
                        self.eoa = ag.addr;
                        self.aggr_mut(id).reset();
                        shrank = true;
                    }
                }
            }
            if !shrank {
                break;
            }
        }
    }
}
