//! Space in the metadata file: runs of whole pages handed out and given back (the RFC's
//! `H5MV` manager), and the delayed-free list that keeps superseded images untouched for
//! `max_lag` ticks. Lives in memory only; nothing of it is ever written (SWMR-056).
//!
//! Invariants: free sections are page-aligned, disjoint, never adjacent (merged on free) and
//! all below the end of allocation; none ends at the end of allocation (it would have shrunk).

use std::collections::{BTreeMap, VecDeque};

/// The metadata file's space manager. Offsets and lengths are in bytes, multiples of the page
/// size.
#[derive(Clone, Debug)]
pub struct MdSpace {
    page_size: u64,
    eoa: u64,
    free: BTreeMap<u64, u64>,
}

impl MdSpace {
    /// An empty metadata file.
    pub fn new(page_size: u64) -> MdSpace {
        MdSpace {
            page_size,
            eoa: 0,
            free: BTreeMap::new(),
        }
    }

    /// `len` rounded up to whole pages.
    pub fn round(&self, len: u64) -> u64 {
        len.div_ceil(self.page_size).max(1) * self.page_size
    }

    /// The end of allocation.
    pub fn eoa(&self) -> u64 {
        self.eoa
    }

    /// The free sections (offset, length), in offset order.
    pub fn free_sections(&self) -> Vec<(u64, u64)> {
        self.free.iter().map(|(&a, &l)| (a, l)).collect()
    }

    /// A page-aligned run of at least `len` bytes: the first free section big enough (its
    /// remainder stays free), else at the end of allocation.
    pub fn allocate(&mut self, len: u64) -> u64 {
        let need = self.round(len);
        let hit = self
            .free
            .iter()
            .find(|&(_, &l)| l >= need)
            .map(|(&a, &l)| (a, l));
        if let Some((addr, l)) = hit {
            self.free.remove(&addr);
            if l > need {
                self.free.insert(addr + need, l - need);
            }
            return addr;
        }
        let addr = self.eoa;
        self.eoa += need;
        addr
    }

    /// Gives `[addr, addr + len)` (rounded to pages) back, merging with free neighbours and
    /// shrinking the end of allocation over free space at its end (SWMR-057).
    pub fn free(&mut self, addr: u64, len: u64) {
        let mut start = addr;
        let mut size = self.round(len);
        if let Some((&a, &l)) = self.free.range(..start).next_back()
            && a + l == start
        {
            self.free.remove(&a);
            start = a;
            size += l;
        }
        if let Some(&l) = self.free.get(&(start + size)) {
            self.free.remove(&(start + size));
            size += l;
        }
        if start + size >= self.eoa {
            self.eoa = start;
        } else {
            self.free.insert(start, size);
        }
    }

    /// Grows the allocated run `[addr, addr + len)` by `extra` bytes in place: at the end of
    /// allocation, or into a free section right after it that is big enough (SWMR-058).
    pub fn try_extend(&mut self, addr: u64, len: u64, extra: u64) -> bool {
        let end = addr + self.round(len);
        let extra = self.round(extra);
        if end == self.eoa {
            self.eoa += extra;
            return true;
        }
        match self.free.get(&end).copied() {
            Some(l) if l >= extra => {
                self.free.remove(&end);
                if l > extra {
                    self.free.insert(end + extra, l - extra);
                }
                true
            }
            _ => false,
        }
    }
}

/// Superseded extents waiting `max_lag` ticks before their space may be reused (SWMR-059).
#[derive(Clone, Debug, Default)]
pub struct DelayedFrees {
    /// (tick superseded, offset, length), newest at the front.
    list: VecDeque<(u64, u64, u64)>,
}

impl DelayedFrees {
    /// Records that `[addr, addr + len)` stopped being referenced at `tick`.
    pub fn push(&mut self, tick: u64, addr: u64, len: u64) {
        self.list.push_front((tick, addr, len));
    }

    /// Entries waiting.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether none wait.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Every extent superseded more than `max_lag` ticks before `tick` (`tick > tag +
    /// max_lag`, OQ-9), oldest first, removed from the list. The scan stops at the first one
    /// too young.
    pub fn due(&mut self, tick: u64, max_lag: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        while let Some(&(tag, addr, len)) = self.list.back() {
            if tick <= tag + max_lag {
                break;
            }
            out.push((addr, len));
            self.list.pop_back();
        }
        out
    }

    /// Everything still waiting (at close).
    pub fn drain(&mut self) -> Vec<(u64, u64)> {
        self.list.drain(..).map(|(_, a, l)| (a, l)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    // SWMR-056: the reserved region first at offset 0; best placement reuses free sections and
    // splits them; the end of allocation otherwise.
    #[test]
    fn swmr_056_allocation() {
        let mut s = MdSpace::new(P);
        assert_eq!(s.allocate(P * 2), 0, "the reserved region");
        let a = s.allocate(100);
        assert_eq!(a, 2 * P);
        let b = s.allocate(5 * P);
        assert_eq!(b, 3 * P);
        let _tail = s.allocate(P);
        s.free(b, 5 * P);
        assert_eq!(s.allocate(3 * P), b);
        assert_eq!(s.free_sections(), vec![(b + 3 * P, 2 * P)]);
        let eoa = s.eoa();
        assert_eq!(s.allocate(10 * P), eoa);
    }

    // SWMR-057: merging and shrinking.
    #[test]
    fn swmr_057_merge_and_shrink() {
        let mut s = MdSpace::new(P);
        let runs: Vec<u64> = (0..6).map(|_| s.allocate(P)).collect();
        s.free(runs[1], P);
        s.free(runs[2], P);
        assert_eq!(s.free_sections(), vec![(P, 2 * P)]);
        s.free(runs[3], P);
        assert_eq!(s.free_sections(), vec![(P, 3 * P)]);
        let eoa = s.eoa();
        s.free(runs[5], P);
        assert_eq!(s.eoa(), eoa - P, "the last run shrinks the file");
        s.free(runs[4], P);
        assert_eq!(
            s.eoa(),
            P,
            "and merges down over the free section before it"
        );
        assert!(s.free_sections().is_empty());
    }

    // SWMR-058: extension in place.
    #[test]
    fn swmr_058_try_extend() {
        let mut s = MdSpace::new(P);
        let a = s.allocate(P);
        assert!(s.try_extend(a, P, P), "at the end of allocation");
        let b = s.allocate(P);
        let c = s.allocate(3 * P);
        let _d = s.allocate(P);
        s.free(c, 3 * P);
        assert!(s.try_extend(b, P, 2 * P), "into the free section after it");
        assert_eq!(s.free_sections(), vec![(c + 2 * P, P)]);
        assert!(!s.try_extend(b, 3 * P, 2 * P), "not enough room");
        assert!(!s.try_extend(a, 2 * P, P), "a live run follows");
    }

    // SWMR-049, SWMR-059: an extent tagged at tick 10 with max_lag 3 is released at tick 14,
    // not before; the scan stops at the first extent too young.
    #[test]
    fn swmr_049_059_delayed_release() {
        let mut d = DelayedFrees::default();
        d.push(10, 0, P);
        for t in 11..=13 {
            assert!(d.due(t, 3).is_empty(), "tick {t}");
        }
        assert_eq!(d.due(14, 3), vec![(0, P)]);
        d.push(5, P, P);
        d.push(6, 2 * P, P);
        d.push(7, 3 * P, P);
        assert_eq!(d.due(5 + 3 + 1, 3), vec![(P, P)]);
        assert_eq!(d.len(), 2);
        assert_eq!(d.drain().len(), 2);
        assert!(d.is_empty());
    }
}
