//! Statistics (spec §3.18). Per-class, hash-table, high-water and make-space counters are kept only
//! with the `stats` feature (on by default); per-entry lifetime extremes only with `entry-stats`.
//! I/O totals and hit counts are always kept. Statistics accumulate until [`reset_stats`]
//! only the hit-rate counters reset every epoch.
//!
//! [`reset_stats`]: crate::MetadataCache::reset_stats

use std::fmt::Write as _;

use crate::cache::{EntryLifeStats, MetadataCache, Totals};
use crate::class::CacheTypes;

/// Counters for one class (MDC-129, MDC-133).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Protects that found the entry cached.
    pub hits: u64,
    /// Protects that loaded the entry.
    pub misses: u64,
    /// Read-write protects.
    pub write_protects: u64,
    /// Read-only protects.
    pub read_protects: u64,
    /// Most simultaneous read-only protections of one entry.
    pub max_read_protects: u64,
    /// Inserts.
    pub insertions: u64,
    /// Inserts with `PIN`.
    pub pinned_insertions: u64,
    /// Dirty entries marked clean without a write.
    pub clears: u64,
    /// Writes.
    pub flushes: u64,
    /// Evictions.
    pub evictions: u64,
    /// Moves by `move_entry`.
    pub moves: u64,
    /// Moves reported by pre-serialize (every write, seed 000 App. 1).
    pub entry_flush_moves: u64,
    /// Moves reported by pre-serialize inside a whole-cache flush.
    pub cache_flush_moves: u64,
    /// Client pins.
    pub pins: u64,
    /// Client unpins.
    pub unpins: u64,
    /// Pinned entries marked dirty.
    pub dirty_pins: u64,
    /// Writes of pinned entries.
    pub pinned_flushes: u64,
    /// Clears of pinned entries.
    pub pinned_clears: u64,
    /// Size increases.
    pub size_increases: u64,
    /// Size decreases.
    pub size_decreases: u64,
    /// Resizes reported by pre-serialize (every write, seed 000 App. 1).
    pub entry_flush_size_changes: u64,
    /// Resizes reported by pre-serialize inside a whole-cache flush.
    pub cache_flush_size_changes: u64,
    /// Most accesses of one entry over its life (`entry-stats`).
    pub max_accesses: u64,
    /// Fewest accesses of one entry over its life (`entry-stats`; `u64::MAX` until an entry leaves).
    pub min_accesses: u64,
    /// Most clears of one entry (`entry-stats`).
    pub max_clears: u64,
    /// Most writes of one entry (`entry-stats`).
    pub max_flushes: u64,
    /// Largest entry size seen leaving the cache (`entry-stats`).
    pub max_size: u64,
    /// Most pins of one entry (`entry-stats`).
    pub max_pins: u64,
}

/// Where newly dirty bytes came from, for the parallel debug counters (MDC-136).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DirtySource {
    Insert,
    Unprotect,
    Move,
    MarkDirty,
}

/// Dirty bytes created since the last sync point, by source (MDC-136).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirtyBytesCreated {
    /// Bytes dirtied by inserts.
    pub insert_bytes: u64,
    /// Inserts counted.
    pub insert_updates: u64,
    /// Bytes dirtied by unprotect with `DIRTIED`.
    pub unprotect_bytes: u64,
    /// Unprotects counted.
    pub unprotect_updates: u64,
    /// Bytes dirtied by moves of clean entries.
    pub move_bytes: u64,
    /// Moves counted.
    pub move_updates: u64,
    /// Bytes dirtied by mark-dirty of clean pinned entries.
    pub mark_dirty_bytes: u64,
    /// Mark-dirty calls counted.
    pub mark_dirty_updates: u64,
    /// Sync points (clean-list broadcasts) so far.
    pub broadcasts: u64,
}

impl DirtyBytesCreated {
    /// All dirty bytes created since the last sync point.
    pub fn total_bytes(&self) -> u64 {
        self.insert_bytes + self.unprotect_bytes + self.move_bytes + self.mark_dirty_bytes
    }
}

/// All cache statistics.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Per class, indexed by class id.
    pub per_class: Vec<ClassStats>,
    /// Hash-table insertions (MDC-130).
    pub ht_insertions: u64,
    /// Hash-table deletions.
    pub ht_deletions: u64,
    /// Successful searches.
    pub ht_successful_searches: u64,
    /// Total depth of successful searches.
    pub ht_total_successful_depth: u64,
    /// Failed searches.
    pub ht_failed_searches: u64,
    /// Total depth of failed searches.
    pub ht_total_failed_depth: u64,
    /// High-water marks (MDC-131).
    pub max: Totals,
    /// Make-space calls (MDC-132).
    pub make_space_calls: u64,
    /// Clean entries skipped while meeting the min-clean goal, in total.
    pub entries_skipped_in_make_space: u64,
    /// Most skipped in one call.
    pub max_entries_skipped_in_make_space: u64,
    /// Entries scanned, in total.
    pub entries_scanned_in_make_space: u64,
    /// Most scanned in one call.
    pub max_entries_scanned_in_make_space: u64,
    /// Entries scanned only to free space (evicted).
    pub entries_scanned_to_make_space: u64,
    /// Parallel debug counters (MDC-136).
    pub dirty_created: DirtyBytesCreated,
    /// Successful direct lookups (MDC-011).
    pub direct_lookups: u64,
    /// Flush scans restarted because callbacks changed the dirty set (MDC-076).
    pub flush_restarts: u64,
    /// Writes during which pre-serialize changed the dirty set.
    pub slist_change_in_pre_serialize: u64,
    /// Writes during which serialize changed the dirty set.
    pub slist_change_in_serialize: u64,
    /// Flash increases.
    pub flash_increases: u64,
    /// Entries evicted by age-out.
    pub aged_out: u64,
    /// Re-reads after a checksum mismatch.
    pub checksum_retries: u64,
    /// Second reads of speculative loads.
    pub speculative_retries: u64,
    /// Flush dependencies created.
    pub flush_deps_created: u64,
    /// Flush dependencies destroyed.
    pub flush_deps_destroyed: u64,
    /// Storage reads (always kept).
    pub reads: u64,
    /// Bytes read (always kept).
    pub bytes_read: u64,
    /// Storage writes (always kept).
    pub writes: u64,
    /// Bytes written (always kept).
    pub bytes_written: u64,
    /// Protect hits (always kept).
    pub total_hits: u64,
    /// Protect misses (always kept).
    pub total_misses: u64,
    /// Evictions (always kept).
    pub total_evictions: u64,
    /// Trace records that could not be written (the trace was closed).
    pub trace_write_failures: u64,
}

macro_rules! with_stats {
    ($($body:tt)*) => {
        #[cfg(feature = "stats")]
        { $($body)* }
    };
}

impl Stats {
    pub(crate) fn new(nclasses: usize) -> Self {
        let per_class = vec![
            ClassStats {
                min_accesses: u64::MAX,
                ..ClassStats::default()
            };
            nclasses
        ];
        Self {
            per_class,
            ..Self::default()
        }
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    fn class_mut(&mut self, class: u8) -> Option<&mut ClassStats> {
        self.per_class.get_mut(class as usize)
    }

    pub(crate) fn total_hits(&self) -> u64 {
        self.total_hits
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    pub(crate) fn ht_search(&mut self, found: bool, depth: u64) {
        with_stats! {
            if found {
                self.ht_successful_searches += 1;
                self.ht_total_successful_depth += depth;
            } else {
                self.ht_failed_searches += 1;
                self.ht_total_failed_depth += depth;
            }
        }
    }
    pub(crate) fn ht_insertion(&mut self) {
        with_stats! { self.ht_insertions += 1; }
    }
    pub(crate) fn ht_deletion(&mut self) {
        with_stats! { self.ht_deletions += 1; }
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    pub(crate) fn protect(&mut self, class: u8, hit: bool, read_only: bool, ro_refs: u32) {
        if hit {
            self.total_hits += 1;
        } else {
            self.total_misses += 1;
        }
        with_stats! {
            if let Some(c) = self.class_mut(class) {
                if hit { c.hits += 1 } else { c.misses += 1 }
                if read_only {
                    c.read_protects += 1;
                    c.max_read_protects = c.max_read_protects.max(u64::from(ro_refs));
                } else {
                    c.write_protects += 1;
                }
            }
        }
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    pub(crate) fn insertion(&mut self, class: u8, pinned: bool) {
        with_stats! {
            if let Some(c) = self.class_mut(class) {
                c.insertions += 1;
                if pinned { c.pinned_insertions += 1; c.pins += 1; }
            }
        }
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    pub(crate) fn clear(&mut self, class: u8, pinned: bool) {
        with_stats! {
            if let Some(c) = self.class_mut(class) {
                c.clears += 1;
                if pinned { c.pinned_clears += 1; }
            }
        }
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    pub(crate) fn flush(&mut self, class: u8, pinned: bool) {
        with_stats! {
            if let Some(c) = self.class_mut(class) {
                c.flushes += 1;
                if pinned { c.pinned_flushes += 1; }
            }
        }
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    pub(crate) fn eviction(&mut self, class: u8) {
        self.total_evictions += 1;
        with_stats! { if let Some(c) = self.class_mut(class) { c.evictions += 1; } }
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    pub(crate) fn moved(&mut self, class: u8) {
        with_stats! { if let Some(c) = self.class_mut(class) { c.moves += 1; } }
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    pub(crate) fn flush_move(&mut self, class: u8, in_cache_flush: bool) {
        with_stats! {
            if let Some(c) = self.class_mut(class) {
                c.entry_flush_moves += 1;
                if in_cache_flush { c.cache_flush_moves += 1; }
            }
        }
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    pub(crate) fn flush_size_change(&mut self, class: u8, in_cache_flush: bool) {
        with_stats! {
            if let Some(c) = self.class_mut(class) {
                c.entry_flush_size_changes += 1;
                if in_cache_flush { c.cache_flush_size_changes += 1; }
            }
        }
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    pub(crate) fn pin(&mut self, class: u8) {
        with_stats! { if let Some(c) = self.class_mut(class) { c.pins += 1; } }
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    pub(crate) fn unpin(&mut self, class: u8) {
        with_stats! { if let Some(c) = self.class_mut(class) { c.unpins += 1; } }
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    pub(crate) fn dirty_pin(&mut self, class: u8) {
        with_stats! { if let Some(c) = self.class_mut(class) { c.dirty_pins += 1; } }
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    pub(crate) fn size_change(&mut self, class: u8, increase: bool) {
        with_stats! {
            if let Some(c) = self.class_mut(class) {
                if increase { c.size_increases += 1 } else { c.size_decreases += 1 }
            }
        }
    }

    #[cfg_attr(not(feature = "stats"), allow(unused_variables))]
    pub(crate) fn make_space(&mut self, scanned: usize, skipped: usize, for_space: usize) {
        with_stats! {
            self.make_space_calls += 1;
            self.entries_scanned_in_make_space += scanned as u64;
            self.max_entries_scanned_in_make_space =
                self.max_entries_scanned_in_make_space.max(scanned as u64);
            self.entries_skipped_in_make_space += skipped as u64;
            self.max_entries_skipped_in_make_space =
                self.max_entries_skipped_in_make_space.max(skipped as u64);
            self.entries_scanned_to_make_space += for_space as u64;
        }
    }

    pub(crate) fn parallel_dirty_created(&mut self, source: DirtySource, size: usize) {
        let d = &mut self.dirty_created;
        let size = size as u64;
        match source {
            DirtySource::Insert => {
                d.insert_bytes += size;
                d.insert_updates += 1;
            }
            DirtySource::Unprotect => {
                d.unprotect_bytes += size;
                d.unprotect_updates += 1;
            }
            DirtySource::Move => {
                d.move_bytes += size;
                d.move_updates += 1;
            }
            DirtySource::MarkDirty => {
                d.mark_dirty_bytes += size;
                d.mark_dirty_updates += 1;
            }
        }
    }

    /// Counts what one load did: storage reads and their bytes, checksum and speculative
    /// retries.
    pub(crate) fn load(&mut self, reads: u64, bytes: u64, checksum: u64, speculative: u64) {
        self.reads += reads;
        self.bytes_read += bytes;
        self.checksum_retries += checksum;
        self.speculative_retries += speculative;
    }

    /// Fold an entry's lifetime counters into its class's extremes (MDC-133).
    #[cfg_attr(not(feature = "entry-stats"), allow(dead_code, unused_variables))]
    pub(crate) fn fold_entry(&mut self, class: u8, size: usize, life: &EntryLifeStats) {
        if let Some(c) = self.class_mut(class) {
            c.max_accesses = c.max_accesses.max(life.accesses);
            c.min_accesses = c.min_accesses.min(life.accesses);
            c.max_clears = c.max_clears.max(life.clears);
            c.max_flushes = c.max_flushes.max(life.flushes);
            c.max_size = c.max_size.max(size as u64);
            c.max_pins = c.max_pins.max(life.pins);
        }
    }

    /// Average depth of successful and failed searches (MDC-130).
    pub fn average_search_depths(&self) -> (f64, f64) {
        let avg = |total: u64, n: u64| if n == 0 { 0.0 } else { total as f64 / n as f64 };
        (
            avg(self.ht_total_successful_depth, self.ht_successful_searches),
            avg(self.ht_total_failed_depth, self.ht_failed_searches),
        )
    }
}

impl<T: CacheTypes> MetadataCache<T> {
    /// All statistics.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Reset every statistic (MDC-134). Hit-rate counters are separate
    /// ([`reset_hit_rate_stats`](Self::reset_hit_rate_stats)).
    pub fn reset_stats(&mut self) {
        let n = self.classes.len();
        let direct = self.stats.direct_lookups;
        self.stats = Stats::new(n);
        // The direct-lookup counter is a debugging aid for tests, kept across resets.
        self.stats.direct_lookups = direct;
    }

    /// Readable statistics dump, every line starting with the configured prefix (MDC-134).
    pub fn stats_report(&self) -> String {
        let p = &self.stats_prefix;
        let s = &self.stats;
        let mut out = String::new();
        let (ok_depth, fail_depth) = s.average_search_depths();
        let hit_total = s.total_hits + s.total_misses;
        let overall = if hit_total == 0 {
            0.0
        } else {
            s.total_hits as f64 / hit_total as f64
        };
        let _ = writeln!(
            out,
            "{p}metadata cache: {} entries, {} bytes (max {}), hit rate {:.4} ({} hits, {} misses)",
            self.index_len,
            self.index_size,
            self.max_cache_size,
            overall,
            s.total_hits,
            s.total_misses
        );
        let _ = writeln!(
            out,
            "{p}io: {} reads / {} bytes, {} writes / {} bytes, {} evictions",
            s.reads, s.bytes_read, s.writes, s.bytes_written, s.total_evictions
        );
        let _ = writeln!(
            out,
            "{p}hash table: {} insertions, {} deletions, avg depth {:.3} found / {:.3} not found",
            s.ht_insertions, s.ht_deletions, ok_depth, fail_depth
        );
        let _ = writeln!(
            out,
            "{p}high water: index {} / {} B, clean {} B, dirty {} B, slist {} / {} B, protected {} / {} B, pinned {} / {} B",
            s.max.index_len,
            s.max.index_size,
            s.max.clean_size,
            s.max.dirty_size,
            s.max.slist_len,
            s.max.slist_size,
            s.max.pl_len,
            s.max.pl_size,
            s.max.pel_len,
            s.max.pel_size
        );
        let _ = writeln!(
            out,
            "{p}make space: {} calls, {} scanned (max {}), {} skipped (max {}), {} scanned to make space",
            s.make_space_calls,
            s.entries_scanned_in_make_space,
            s.max_entries_scanned_in_make_space,
            s.entries_skipped_in_make_space,
            s.max_entries_skipped_in_make_space,
            s.entries_scanned_to_make_space
        );
        for (id, c) in s.per_class.iter().enumerate() {
            let name = self.class_name(id as u8);
            let _ = writeln!(
                out,
                "{p}class {id} {name}: hits {} misses {} rprot {} wprot {} max_rprot {} ins {} pins_ins {} clears {} flushes {} evictions {} moves {} pins {} unpins {} dirty_pins {} size+ {} size- {}",
                c.hits,
                c.misses,
                c.read_protects,
                c.write_protects,
                c.max_read_protects,
                c.insertions,
                c.pinned_insertions,
                c.clears,
                c.flushes,
                c.evictions,
                c.moves,
                c.pins,
                c.unpins,
                c.dirty_pins,
                c.size_increases,
                c.size_decreases
            );
        }
        out
    }
}
