//! The writer's in-memory index (the RFC's §3.2.3 entry with its writer-only fields) and how a
//! tick's changes are merged into it.

use crate::format::{IndexEntry, MdIndex};

/// One entry of the writer's index (spec §2.4).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct WriterEntry {
    /// HDF5 file page of the page or multi-page entry.
    pub hdf5_page: u64,
    /// Metadata file page of its current image.
    pub md_page: u64,
    /// Bytes.
    pub length: u32,
    /// Checksum of the image.
    pub checksum: u32,
    /// Last tick in which it changed.
    pub tick_of_last_change: u64,
    /// Tick of the last write to the HDF5 file (0: never).
    pub tick_of_last_flush: u64,
    /// Earliest tick at which a change to it may reach the HDF5 file (0: unconstrained). A
    /// mirror of the page buffer's delay (OQ-8).
    pub delayed_flush: u64,
    /// Marked for removal at the next end of tick (OQ-7).
    pub moved_to_hdf5_file: bool,
}

impl WriterEntry {
    /// The on-disk entry.
    pub fn disk(&self) -> IndexEntry {
        IndexEntry {
            hdf5_page: self.hdf5_page,
            md_page: self.md_page,
            length: self.length,
            checksum: self.checksum,
        }
    }

    /// Pages of the HDF5 file it covers.
    pub fn pages(&self, page_size: u64) -> u64 {
        u64::from(self.length).div_ceil(page_size)
    }
}

/// Whether an entry qualifies for removal at tick `tick` (OQ-7): clean, written to the HDF5
/// file more than `max_lag` ticks ago, and not changed since that write.
pub fn qualifies_for_removal(e: &WriterEntry, clean: bool, tick: u64, max_lag: u64) -> bool {
    clean
        && e.tick_of_last_flush != 0
        && e.tick_of_last_change <= e.tick_of_last_flush
        && tick > e.tick_of_last_flush + max_lag
}

/// The writer's index: entries by strictly increasing HDF5 page, never overlapping.
#[derive(Clone, Debug, Default)]
pub struct WriterIndex {
    entries: Vec<WriterEntry>,
}

impl WriterIndex {
    /// The entries.
    pub fn entries(&self) -> &[WriterEntry] {
        &self.entries
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The on-disk index for `tick`.
    pub fn to_disk(&self, tick: u64) -> MdIndex {
        MdIndex {
            tick,
            entries: self.entries.iter().map(WriterEntry::disk).collect(),
        }
    }

    /// The entry for HDF5 page `page` exactly.
    pub fn get_mut(&mut self, page: u64) -> Option<&mut WriterEntry> {
        let i = self
            .entries
            .binary_search_by_key(&page, |e| e.hdf5_page)
            .ok()?;
        self.entries.get_mut(i)
    }

    /// Puts `entry` in, removing every other entry whose pages overlap it; returns the entry
    /// it replaced at the same page (if any) and the overlapped ones.
    pub fn upsert(
        &mut self,
        entry: WriterEntry,
        page_size: u64,
    ) -> (Option<WriterEntry>, Vec<WriterEntry>) {
        let first = entry.hdf5_page;
        let last = first + entry.pages(page_size);
        // Entries are sorted and never overlap, so those the new one meets are one run: at most
        // one starting before `first` (reaching into it), then every one starting below `last`
        // (or at `first`). Found by binary search: an upsert costs the log of the index, not
        // its length (a tick upserts every page it changed).
        let mut lo = self.entries.partition_point(|e| e.hdf5_page < first);
        while let Some(prev) = lo.checked_sub(1).and_then(|i| self.entries.get(i))
            && prev.hdf5_page + prev.pages(page_size) > first
        {
            lo -= 1;
        }
        let bound = last.max(first + 1);
        let hi = lo
            + self
                .entries
                .get(lo..)
                .unwrap_or_default()
                .partition_point(|e| e.hdf5_page < bound);
        let mut overlapped = Vec::new();
        let mut replaced = None;
        for e in self.entries.drain(lo..hi) {
            if e.hdf5_page == first {
                replaced = Some(e);
            } else {
                overlapped.push(e);
            }
        }
        self.entries.insert(lo, entry);
        (replaced, overlapped)
    }

    /// Removes the entries `remove` selects; returns them.
    pub fn remove_where(
        &mut self,
        mut remove: impl FnMut(&mut WriterEntry) -> bool,
    ) -> Vec<WriterEntry> {
        let mut gone = Vec::new();
        self.entries.retain_mut(|e| {
            if remove(e) {
                gone.push(*e);
                false
            } else {
                true
            }
        });
        gone
    }

    /// (first HDF5 page, page count, delayed-flush tick) of every entry: what the page buffer
    /// needs.
    pub fn view(&self, page_size: u64) -> Vec<(u64, u64, u64)> {
        self.entries
            .iter()
            .map(|e| (e.hdf5_page, e.pages(page_size), e.delayed_flush))
            .collect()
    }

    /// Debug check: strictly increasing, non-overlapping, page or larger (SWMR-053).
    pub fn check(&self, page_size: u64) -> Result<(), String> {
        for w in self.entries.windows(2) {
            if w[0].hdf5_page + w[0].pages(page_size) > w[1].hdf5_page {
                return Err(format!(
                    "entries at {} and {} overlap or are unordered",
                    w[0].hdf5_page, w[1].hdf5_page
                ));
            }
        }
        for e in &self.entries {
            if u64::from(e.length) < page_size {
                return Err(format!("entry at {} of {} bytes", e.hdf5_page, e.length));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(page: u64, len: u32) -> WriterEntry {
        WriterEntry {
            hdf5_page: page,
            md_page: page + 100,
            length: len,
            checksum: 0,
            tick_of_last_change: 1,
            tick_of_last_flush: 0,
            delayed_flush: 0,
            moved_to_hdf5_file: false,
        }
    }

    /// The scan over the whole index `upsert` replaced: the definition its binary search must
    /// agree with.
    fn upsert_by_scan(
        entries: &mut Vec<WriterEntry>,
        entry: WriterEntry,
        page_size: u64,
    ) -> (Option<WriterEntry>, Vec<WriterEntry>) {
        let first = entry.hdf5_page;
        let last = first + entry.pages(page_size);
        let mut overlapped = Vec::new();
        let mut replaced = None;
        entries.retain(|e| {
            let (a, b) = (e.hdf5_page, e.hdf5_page + e.pages(page_size));
            if a == first {
                replaced = Some(*e);
                false
            } else if a < last && b > first {
                overlapped.push(*e);
                false
            } else {
                true
            }
        });
        let at = entries.partition_point(|e| e.hdf5_page < first);
        entries.insert(at, entry);
        (replaced, overlapped)
    }

    proptest::proptest! {
        /// Any sequence of upserts (pages and multi-page entries, overlapping anywhere) gives
        /// the same index and the same replaced and overlapped entries as the full scan, and
        /// the index stays ordered and non-overlapping.
        #[test]
        fn upsert_equals_the_full_scan(
            ops in proptest::collection::vec((0u64..60, 1u32..5), 1..80),
        ) {
            let ps = 4096u64;
            let mut ix = WriterIndex::default();
            let mut model: Vec<WriterEntry> = Vec::new();
            for (page, pages) in ops {
                let new = e(page, pages * ps as u32);
                let got = ix.upsert(new, ps);
                let want = upsert_by_scan(&mut model, new, ps);
                proptest::prop_assert_eq!(got, want);
                proptest::prop_assert_eq!(ix.entries(), model.as_slice());
                proptest::prop_assert!(ix.check(ps).is_ok());
            }
        }
    }

    #[test]
    fn upsert_keeps_order_and_drops_overlaps() {
        let mut ix = WriterIndex::default();
        for p in [5, 1, 3, 9] {
            ix.upsert(e(p, 4096), 4096);
        }
        let pages: Vec<u64> = ix.entries().iter().map(|x| x.hdf5_page).collect();
        assert_eq!(pages, vec![1, 3, 5, 9]);
        let (replaced, over) = ix.upsert(e(3, 3 * 4096), 4096);
        assert_eq!(replaced.map(|r| r.length), Some(4096));
        assert_eq!(
            over.iter().map(|x| x.hdf5_page).collect::<Vec<_>>(),
            vec![5]
        );
        let (replaced, over) = ix.upsert(e(4, 4096), 4096);
        assert!(replaced.is_none());
        assert_eq!(
            over[0].hdf5_page, 3,
            "a page inside a multi-page entry replaces it"
        );
        ix.check(4096).unwrap();
    }

    // OQ-7 rule behind SWMR-046.
    #[test]
    fn removal_rule() {
        let mut x = e(1, 4096);
        x.tick_of_last_change = 5;
        x.tick_of_last_flush = 6;
        assert!(
            !qualifies_for_removal(&x, true, 9, 3),
            "flushed only 3 ticks ago"
        );
        assert!(qualifies_for_removal(&x, true, 10, 3));
        assert!(!qualifies_for_removal(&x, false, 10, 3), "dirty");
        x.tick_of_last_change = 7;
        assert!(
            !qualifies_for_removal(&x, true, 20, 3),
            "changed after its last write"
        );
        x.tick_of_last_flush = 0;
        x.tick_of_last_change = 0;
        assert!(!qualifies_for_removal(&x, true, 20, 3), "never written");
    }
}
