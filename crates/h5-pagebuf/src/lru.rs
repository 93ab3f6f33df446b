//! The page buffer's LRU order, kept as a queue of `(sequence, key)` positions in ascending
//! sequence order (the back is the most recently used, the seed's LRU head).
//!
//! Moving an entry to the head appends a new position and leaves the old one in place, stale:
//! a position is live exactly when its entry's `lru_seq` is its sequence, which the caller
//! knows. The queue keeps a count of live positions and drops the stale ones once they
//! outnumber the live ones, so a move costs an append instead of a search tree's remove and
//! insert, and the queue stays within about twice the number of entries on the LRU.

use std::collections::VecDeque;

/// Stale positions tolerated beyond the number of live ones before the queue is compacted.
const SLACK: usize = 1024;

/// `(sequence, key)` positions in ascending sequence order, some of them stale.
#[derive(Debug, Default)]
pub(crate) struct LruQueue {
    positions: VecDeque<(u64, u64)>,
    live: usize,
}

impl LruQueue {
    /// Entries on the LRU.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Appends the position `seq` (larger than any in the queue) of `key`; `moved` says that
    /// the entry was already on the LRU (its old position goes stale).
    pub(crate) fn push(&mut self, seq: u64, key: u64, moved: bool) {
        debug_assert!(self.positions.back().is_none_or(|&(s, _)| s < seq));
        self.positions.push_back((seq, key));
        if !moved {
            self.live += 1;
        }
    }

    /// An entry left the LRU (its position goes stale).
    pub(crate) fn left(&mut self) {
        self.live -= 1;
    }

    /// Whether enough positions are stale that [`LruQueue::compact`] is worth its pass.
    pub(crate) fn wants_compaction(&self) -> bool {
        self.positions.len() > 2 * self.live + SLACK
    }

    /// Drops every position `is_live` rejects.
    pub(crate) fn compact(&mut self, is_live: impl Fn(u64, u64) -> bool) {
        self.positions.retain(|&(s, k)| is_live(s, k));
    }

    /// Drops the stale positions at the LRU's tail (its oldest end), which a replacement scan
    /// would otherwise walk past each time.
    pub(crate) fn drop_stale_oldest(&mut self, is_live: impl Fn(u64, u64) -> bool) {
        while let Some(&(s, k)) = self.positions.front()
            && !is_live(s, k)
        {
            self.positions.pop_front();
        }
    }

    /// The key at position `seq`, stale or not.
    pub(crate) fn key_at(&self, seq: u64) -> Option<u64> {
        let i = self.positions.partition_point(|&(s, _)| s < seq);
        self.positions
            .get(i)
            .filter(|&&(s, _)| s == seq)
            .map(|&(_, k)| k)
    }

    /// Positions with a sequence in `from..end`, oldest first, stale ones included.
    pub(crate) fn range(&self, from: u64, end: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let i = self.positions.partition_point(|&(s, _)| s < from);
        self.positions
            .range(i..)
            .take_while(move |&&(s, _)| s < end)
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moved_positions_go_stale_and_compaction_drops_them() {
        let mut q = LruQueue::default();
        q.push(1, 10, false);
        q.push(2, 20, false);
        q.push(3, 10, true);
        assert_eq!(q.len(), 2);
        assert_eq!(q.key_at(1), Some(10));
        assert_eq!(q.key_at(4), None);
        let all: Vec<_> = q.range(0, 10).collect();
        assert_eq!(all, vec![(1, 10), (2, 20), (3, 10)]);
        assert_eq!(q.range(2, 3).collect::<Vec<_>>(), vec![(2, 20)]);
        q.compact(|s, k| !(s == 1 && k == 10));
        assert_eq!(q.range(0, 10).collect::<Vec<_>>(), vec![(2, 20), (3, 10)]);
        q.left();
        assert_eq!(q.len(), 1);
        q.drop_stale_oldest(|s, _| s == 3);
        assert_eq!(q.range(0, 10).collect::<Vec<_>>(), vec![(3, 10)]);
    }

    #[test]
    fn compaction_is_wanted_only_past_the_slack() {
        let mut q = LruQueue::default();
        q.push(1, 7, false);
        for s in 2..(SLACK as u64 + 3) {
            q.push(s, 7, true);
        }
        assert!(!q.wants_compaction());
        q.push(SLACK as u64 + 3, 7, true);
        assert!(q.wants_compaction());
    }
}
