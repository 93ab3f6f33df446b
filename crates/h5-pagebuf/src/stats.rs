//! The page buffer's statistics (the seed's `H5PB_t` statistics section).

/// What an access or an entry is, for per-kind counters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum StatKind {
    /// A metadata page.
    Metadata,
    /// A raw-data page.
    Raw,
    /// A multi-page metadata entry (VFD SWMR writer only).
    Mpmde,
}

impl StatKind {
    pub(crate) fn index(self) -> usize {
        match self {
            StatKind::Metadata => 0,
            StatKind::Raw => 1,
            StatKind::Mpmde => 2,
        }
    }
}

/// Counters by kind: index with [`PerKind::get`].
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct PerKind(pub [u64; 3]);

impl PerKind {
    /// The counter for `kind`.
    pub fn get(&self, kind: StatKind) -> u64 {
        self.0[kind.index()]
    }

    /// The sum over the three kinds.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    pub(crate) fn bump(&mut self, kind: StatKind) {
        self.0[kind.index()] += 1;
    }
}

/// Statistics of one page buffer since it was created (or since [`reset`](crate::PageBuffer::reset_stats)).
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct PageBufferStats {
    /// Reads and writes that reached the buffer, by kind.
    pub accesses: PerKind,
    /// Accesses served by a cached entry.
    pub hits: PerKind,
    /// Accesses that needed a page not cached.
    pub misses: PerKind,
    /// Pages read from the file into the buffer.
    pub loads: PerKind,
    /// Entries created.
    pub insertions: PerKind,
    /// Entries written to the file.
    pub flushes: PerKind,
    /// Entries evicted (dropped after being clean, or removed on a reader's index change).
    pub evictions: PerKind,
    /// Entries dropped without being written (truncation).
    pub clears: PerKind,
    /// Accesses that went around the buffer (a page or larger, or raw data on a reader).
    pub bypasses: PerKind,
    /// Successful entry lookups.
    pub successful_searches: u64,
    /// Failed entry lookups.
    pub failed_searches: u64,
    /// Entry-map insertions.
    pub total_ht_insertions: u64,
    /// Entry-map deletions.
    pub total_ht_deletions: u64,
    /// Largest number of entries held at once.
    pub max_index_len: u64,
    /// Largest number of bytes held at once.
    pub max_index_size: u64,
    /// Largest number of clean entries.
    pub max_clean_index_len: u64,
    /// Largest number of dirty entries.
    pub max_dirty_index_len: u64,
    /// Largest number of metadata pages.
    pub max_md_pages: u64,
    /// Largest number of raw-data pages.
    pub max_rd_pages: u64,
    /// Largest LRU length.
    pub max_lru_len: u64,
    /// Metadata entries skipped by eviction because of the metadata reserve.
    pub lru_md_skips: u64,
    /// Raw-data entries skipped by eviction because of the raw-data reserve.
    pub lru_rd_skips: u64,
    /// Entries skipped by eviction because they are on the tick list.
    pub lru_tl_skips: u64,
    /// Largest number of multi-page metadata entries.
    pub max_mpmde_count: u64,
    /// Largest tick list.
    pub max_tl_len: u64,
    /// Largest tick list in bytes.
    pub max_tl_size: u64,
    /// Writes put on the delayed-write list.
    pub delayed_writes: u64,
    /// Sum over delayed writes of the ticks they were delayed by.
    pub total_delay: u64,
    /// Largest delayed-write list.
    pub max_dwl_len: u64,
    /// Largest delayed-write list in bytes.
    pub max_dwl_size: u64,
    /// Sum over insertions into the delayed-write list of the entries passed to find the
    /// position (the list is kept ordered by delay).
    pub total_dwl_ins_depth: u64,
    /// Requests split at page boundaries (§3.4.1.2).
    pub split_ios: u64,
}
