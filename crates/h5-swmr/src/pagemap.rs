//! The reader's page → metadata-cache entries map (the RFC's §3.6.1): which cached entries lie
//! in a page that changed. Every entry is registered under every page it overlaps, so an entry
//! that straddles a page boundary (fixed- and extensible-array data block pages) is found when
//! any of its pages changes, not only the page of its base address (SWMR-095, OQ-21).

use std::collections::HashMap;

/// A snapshot of cached entries by page.
#[derive(Clone, Debug, Default)]
pub struct PageMap<T> {
    page_size: u64,
    by_page: HashMap<u64, Vec<(u64, T)>>,
}

impl<T: Clone> PageMap<T> {
    /// Builds the map of `entries` (base address, length, payload) for `page_size`-byte pages.
    pub fn build(page_size: u64, entries: impl IntoIterator<Item = (u64, u64, T)>) -> PageMap<T> {
        let mut by_page: HashMap<u64, Vec<(u64, T)>> = HashMap::new();
        for (addr, len, payload) in entries {
            let (Some(first), Some(last)) = (
                addr.checked_div(page_size),
                (addr + len.max(1) - 1).checked_div(page_size),
            ) else {
                break;
            };
            for p in first..=last {
                by_page.entry(p).or_default().push((addr, payload.clone()));
            }
        }
        PageMap { page_size, by_page }
    }

    /// Entries (base address, payload) overlapping the `len` bytes from the start of page
    /// `page` (a page, or a multi-page entry's run of pages), each once, by address.
    pub fn in_range(&self, page: u64, len: u64) -> Vec<(u64, T)> {
        if self.page_size == 0 {
            return Vec::new();
        }
        let last = page + len.max(1).div_ceil(self.page_size) - 1;
        let mut out: Vec<(u64, T)> = Vec::new();
        for p in page..=last {
            if let Some(v) = self.by_page.get(&p) {
                out.extend(v.iter().cloned());
            }
        }
        out.sort_by_key(|(a, _)| *a);
        out.dedup_by_key(|(a, _)| *a);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // SWMR-094: querying page P gives exactly the entries in P; SWMR-095: an entry straddling
    // pages P and P + 1 is found from P + 1 alone.
    #[test]
    fn swmr_094_095_entries_by_page() {
        let entries = vec![
            (10u64, 100u64, 'a'),
            (4000, 200, 'b'), // straddles pages 0 and 1
            (4096, 10, 'c'),
            (9000, 50, 'd'),
            (12_288, 9000, 'e'), // pages 3, 4, 5
        ];
        let m = PageMap::build(4096, entries);
        let names = |v: Vec<(u64, char)>| v.into_iter().map(|(_, c)| c).collect::<String>();
        assert_eq!(names(m.in_range(0, 4096)), "ab");
        assert_eq!(names(m.in_range(1, 4096)), "bc");
        assert_eq!(names(m.in_range(2, 4096)), "d");
        assert_eq!(names(m.in_range(4, 4096)), "e");
        assert_eq!(names(m.in_range(0, 3 * 4096)), "abcd");
        assert!(m.in_range(7, 4096).is_empty());
    }
}
