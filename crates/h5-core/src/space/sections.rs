//! One free list: the free-space sections of one free-space manager, indexed by address (for
//! merging and overlap checks) and by size (for best-fit searches).
//!
//! Invariants (checked by `debug_check`): `by_addr` and `by_size` hold exactly the same
//! sections; no two sections overlap; every section has a non-zero length. Adjacent sections
//! may coexist here: whether they merge is the caller's rule (a small-section list never merges
//! across a page boundary).

use std::collections::{BTreeMap, BTreeSet};

/// The sections of one free list.
#[derive(Clone, Debug, Default)]
pub(crate) struct SectionList {
    /// Start → length.
    by_addr: BTreeMap<u64, u64>,
    /// (length, start): the best fit is the first entry at or after `(len, 0)`.
    by_size: BTreeSet<(u64, u64)>,
    /// Whether the free-space manager of this list has been started (libhdf5 starts a manager
    /// on the first section it has to track and never stops it before the file closes; until
    /// then a freed block is only offered to the end of allocation and the aggregators).
    pub(crate) started: bool,
}

impl SectionList {
    /// Links a section without merging. The caller guarantees it overlaps no other section.
    pub(crate) fn insert(&mut self, addr: u64, len: u64) {
        debug_assert!(len > 0);
        self.by_addr.insert(addr, len);
        self.by_size.insert((len, addr));
    }

    /// Unlinks the section starting at `addr`, returning its length.
    pub(crate) fn remove(&mut self, addr: u64) -> Option<u64> {
        let len = self.by_addr.remove(&addr)?;
        self.by_size.remove(&(len, addr));
        Some(len)
    }

    /// The section with the greatest start below `addr`.
    pub(crate) fn before(&self, addr: u64) -> Option<(u64, u64)> {
        self.by_addr
            .range(..addr)
            .next_back()
            .map(|(&a, &l)| (a, l))
    }

    /// The section with the smallest start above `addr`.
    pub(crate) fn after(&self, addr: u64) -> Option<(u64, u64)> {
        let from = addr.checked_add(1)?;
        self.by_addr.range(from..).next().map(|(&a, &l)| (a, l))
    }

    /// The length of the section starting exactly at `addr`.
    pub(crate) fn at(&self, addr: u64) -> Option<u64> {
        self.by_addr.get(&addr).copied()
    }

    /// The section with the highest address.
    pub(crate) fn last(&self) -> Option<(u64, u64)> {
        self.by_addr.iter().next_back().map(|(&a, &l)| (a, l))
    }

    /// The smallest section of at least `len` bytes, the lowest-addressed among equals
    /// (libhdf5's free-space manager keeps sections in size bins of address-ordered lists and
    /// takes the first of the smallest fitting size).
    pub(crate) fn best_fit(&self, len: u64) -> Option<(u64, u64)> {
        self.by_size.range((len, 0)..).next().map(|&(l, a)| (a, l))
    }

    /// Like [`Self::best_fit`], but the block must start on a multiple of `align`: returns the
    /// section and the fragment (`0..align`) to split off its front.
    pub(crate) fn best_fit_aligned(&self, len: u64, align: u64) -> Option<(u64, u64, u64)> {
        self.by_size.range((len, 0)..).find_map(|&(l, a)| {
            let frag = misalign(a, align);
            (l.checked_sub(frag)? >= len).then_some((a, l, frag))
        })
    }

    /// A section overlapping `addr..end`, if any.
    pub(crate) fn overlapping(&self, addr: u64, end: u64) -> Option<(u64, u64)> {
        if let Some((a, l)) = self.before(addr.saturating_add(1))
            && add_below_eoa(a, l) > addr
        {
            return Some((a, l));
        }
        self.by_addr.range(addr..end).next().map(|(&a, &l)| (a, l))
    }

    /// Sections in address order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.by_addr.iter().map(|(&a, &l)| (a, l))
    }

    /// Number of sections.
    pub(crate) fn len(&self) -> usize {
        self.by_addr.len()
    }

    /// Bytes held by the sections.
    pub(crate) fn total(&self) -> u64 {
        self.by_addr.values().sum()
    }

    #[cfg(debug_assertions)]
    pub(crate) fn debug_check(&self) {
        debug_assert_eq!(self.by_addr.len(), self.by_size.len());
        let mut prev_end = 0;
        for (&a, &l) in &self.by_addr {
            debug_assert!(l > 0 && a >= prev_end && self.by_size.contains(&(l, a)));
            prev_end = add_below_eoa(a, l);
        }
    }
}

/// Bytes from `addr` up to the next multiple of `align` (0 when aligned, or when `align` is 0).
pub(crate) fn misalign(addr: u64, align: u64) -> u64 {
    match addr.checked_rem(align) {
        None | Some(0) => 0,
        #[allow(clippy::arithmetic_side_effects, reason = "r = addr % align < align")]
        Some(r) => align - r,
    }
}

/// `a + b` where the manager's invariant bounds the sum by the EOA: the start and length of a
/// block it holds (a free section, an aggregator's rest) or has checked
/// (`SpaceManager::check_block`, `grow_eoa`, `from_persistent`), or the lengths of adjacent
/// blocks that together lie below the EOA.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "the sum is at most the EOA, itself at most max_eoa < u64::MAX"
)]
pub(crate) fn add_below_eoa(a: u64, b: u64) -> u64 {
    a + b
}

/// Whether the block `addr..end` lies inside one page of `page` bytes (false for an empty
/// block or a zero page size).
pub(crate) fn in_one_page(addr: u64, end: u64, page: u64) -> bool {
    let last = end.checked_sub(1).filter(|&last| last >= addr);
    match (
        addr.checked_div(page),
        last.and_then(|l| l.checked_div(page)),
    ) {
        (Some(first_page), Some(last_page)) => first_page == last_page,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(sections: &[(u64, u64)]) -> SectionList {
        let mut l = SectionList::default();
        for &(a, n) in sections {
            l.insert(a, n);
        }
        l
    }

    #[test]
    fn best_fit_takes_smallest_then_lowest_address() {
        let l = list(&[(100, 50), (300, 30), (500, 30), (700, 200)]);
        assert_eq!(l.best_fit(25), Some((300, 30)));
        assert_eq!(l.best_fit(31), Some((100, 50)));
        assert_eq!(l.best_fit(51), Some((700, 200)));
        assert_eq!(l.best_fit(201), None);
    }

    #[test]
    fn best_fit_aligned_skips_sections_too_small_after_alignment() {
        // 4100..8200 is the smallest, but only 8 bytes of it lie past the boundary 8192.
        let l = list(&[(4100, 4100), (9000, 9000), (20480, 5000)]);
        assert_eq!(l.best_fit_aligned(4096, 4096), Some((20480, 5000, 0)));
        assert_eq!(l.best_fit_aligned(5001, 4096), Some((9000, 9000, 3288)));
        assert_eq!(l.best_fit_aligned(5713, 4096), None);
    }

    #[test]
    fn overlapping_finds_sections_on_both_sides() {
        let l = list(&[(100, 50), (200, 10)]);
        assert_eq!(l.overlapping(140, 145), Some((100, 50)));
        assert_eq!(l.overlapping(150, 200), None);
        assert_eq!(l.overlapping(150, 201), Some((200, 10)));
        assert_eq!(l.overlapping(90, 101), Some((100, 50)));
        assert_eq!(l.overlapping(0, 100), None);
    }

    #[test]
    fn neighbours() {
        let l = list(&[(100, 50), (200, 10)]);
        assert_eq!(l.before(200), Some((100, 50)));
        assert_eq!(l.after(100), Some((200, 10)));
        assert_eq!(l.after(200), None);
        assert_eq!(l.last(), Some((200, 10)));
        assert_eq!(l.total(), 60);
    }

    #[test]
    fn in_one_page_and_misalign_at_the_edges() {
        assert!(in_one_page(4096, 8192, 4096));
        assert!(!in_one_page(4095, 4097, 4096));
        assert!(!in_one_page(100, 100, 4096), "empty block");
        assert!(!in_one_page(0, 10, 0), "zero page size");
        assert!(in_one_page(u64::MAX - 10, u64::MAX, 4096));
        assert_eq!(misalign(4097, 4096), 4095);
        assert_eq!(misalign(8192, 4096), 0);
        assert_eq!(misalign(5, 0), 0);
    }
}
