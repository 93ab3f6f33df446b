//! Sets of byte ranges, kept merged.

use std::collections::BTreeMap;
use std::ops::Range;

/// A set of `u64` positions stored as disjoint, non-adjacent half-open ranges (adjacent or
/// overlapping ranges are merged on insert).
///
/// ```
/// use h5_io::RangeSet;
///
/// let mut s = RangeSet::new();
/// s.insert(10..20);
/// s.insert(20..25);
/// s.insert(40..50);
/// assert_eq!(s.ranges(), vec![10..25, 40..50]);
/// assert_eq!(s.gaps(0..45), vec![0..10, 25..40]);
/// assert!(s.covers(12..24) && !s.covers(24..26));
/// s.remove(15..45);
/// assert_eq!(s.ranges(), vec![10..15, 45..50]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    /// Start → end of each range; invariant: disjoint and non-adjacent, every range non-empty.
    map: BTreeMap<u64, u64>,
}

impl RangeSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Empties the set.
    pub fn clear(&mut self) {
        self.map.clear();
    }

    /// The ranges, in increasing order.
    pub fn ranges(&self) -> Vec<Range<u64>> {
        self.map.iter().map(|(&s, &e)| s..e).collect()
    }

    /// Total number of positions in the set.
    pub fn len(&self) -> u64 {
        self.map.iter().map(|(s, e)| e - s).sum()
    }

    /// Adds `r` (an empty range adds nothing).
    pub fn insert(&mut self, r: Range<u64>) {
        if r.is_empty() {
            return;
        }
        let (mut start, mut end) = (r.start, r.end);
        // The range starting at or before `start` may touch it: it grows in place.
        if let Some((&s, &e)) = self.map.range(..=start).next_back()
            && e >= start
        {
            start = s;
            end = end.max(e);
        }
        // Every range starting after `start` and inside `end` merges (none, when the insert
        // extends the last range, as allocations in order do).
        while let Some((&s, &e)) = self
            .map
            .range((
                std::ops::Bound::Excluded(start),
                std::ops::Bound::Included(end),
            ))
            .next()
        {
            self.map.remove(&s);
            end = end.max(e);
        }
        self.map.insert(start, end);
    }

    /// Removes `r` from the set.
    pub fn remove(&mut self, r: Range<u64>) {
        if r.is_empty() {
            return;
        }
        let mut cut: Vec<(u64, u64)> = Vec::new();
        if let Some((&s, &e)) = self.map.range(..r.start).next_back()
            && e > r.start
        {
            cut.push((s, e));
        }
        cut.extend(self.map.range(r.start..r.end).map(|(&s, &e)| (s, e)));
        for (s, e) in cut {
            self.map.remove(&s);
            if s < r.start {
                self.map.insert(s, r.start);
            }
            if e > r.end {
                self.map.insert(r.end, e);
            }
        }
    }

    /// The parts of `r` not in the set, in increasing order.
    pub fn gaps(&self, r: Range<u64>) -> Vec<Range<u64>> {
        let mut out = Vec::new();
        if r.is_empty() {
            return out;
        }
        let mut at = r.start;
        let first = self
            .map
            .range(..=r.start)
            .next_back()
            .map_or(r.start, |(&s, _)| s);
        for (&s, &e) in self.map.range(first..r.end) {
            if e <= at {
                continue;
            }
            if s > at {
                out.push(at..s.min(r.end));
            }
            at = at.max(e);
            if at >= r.end {
                return out;
            }
        }
        if at < r.end {
            out.push(at..r.end);
        }
        out
    }

    /// Whether every position of `r` is in the set (true for an empty `r`).
    pub fn covers(&self, r: Range<u64>) -> bool {
        self.gaps(r).is_empty()
    }

    /// Whether some position of `r` is in the set.
    pub fn intersects(&self, r: Range<u64>) -> bool {
        let len = r.end.saturating_sub(r.start);
        let free: u64 = self.gaps(r).iter().map(|g| g.end - g.start).sum();
        free < len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn insert_merges_overlaps_and_neighbours() {
        let mut s = RangeSet::new();
        s.insert(5..5);
        assert!(s.is_empty());
        s.insert(10..20);
        s.insert(30..40);
        s.insert(20..30);
        assert_eq!(s.ranges(), vec![10..40]);
        s.insert(0..11);
        s.insert(39..41);
        assert_eq!(s.ranges(), vec![0..41]);
        s.insert(50..60);
        s.insert(45..55);
        assert_eq!(s.ranges(), vec![0..41, 45..60]);
        assert_eq!(s.len(), 56);
    }

    #[test]
    fn remove_splits() {
        let mut s = RangeSet::new();
        s.insert(0..100);
        s.remove(10..20);
        s.remove(90..200);
        s.remove(0..1);
        assert_eq!(s.ranges(), vec![1..10, 20..90]);
        s.remove(5..25);
        assert_eq!(s.ranges(), vec![1..5, 25..90]);
    }

    #[test]
    fn gaps_and_cover() {
        let mut s = RangeSet::new();
        s.insert(10..20);
        s.insert(30..40);
        assert_eq!(s.gaps(0..50), vec![0..10, 20..30, 40..50]);
        assert_eq!(s.gaps(12..35), vec![20..30]);
        assert_eq!(s.gaps(15..18), Vec::<Range<u64>>::new());
        assert!(s.covers(10..20) && s.covers(3..3) && !s.covers(19..21));
        assert!(s.intersects(19..21) && !s.intersects(20..30));
    }

    proptest! {
        /// The set agrees with a bitmap model under any sequence of inserts and removes.
        #[test]
        fn matches_a_bitmap(ops in prop::collection::vec((any::<bool>(), 0u64..64, 0u64..16), 0..40),
                            q in (0u64..64, 0u64..32)) {
            let mut s = RangeSet::new();
            let mut model = [false; 96];
            for (add, start, len) in ops {
                let r = start..start + len;
                if add { s.insert(r.clone()) } else { s.remove(r.clone()) }
                for b in &mut model[r.start as usize..r.end as usize] { *b = add; }
            }
            let ranges = s.ranges();
            for w in ranges.windows(2) {
                prop_assert!(w[0].end < w[1].start, "merged and ordered");
            }
            for (i, &b) in model.iter().enumerate() {
                let i = i as u64;
                prop_assert_eq!(b, ranges.iter().any(|r| r.contains(&i)));
            }
            let (qs, ql) = q;
            let gaps = s.gaps(qs..qs + ql);
            for i in qs..qs + ql {
                prop_assert_eq!(!model[i as usize], gaps.iter().any(|g| g.contains(&i)));
            }
        }
    }
}
