//! Making space and flushing the whole cache (spec §3.2, §3.10).

use crate::cache::{MetadataCache, Place, Slab};
use crate::class::CacheTypes;
use crate::error::{CacheError, Result};
use crate::flags::{EntryFlushFlags, FlushFlags};
use crate::list::{Chain, NIL};
use crate::trace::{Outcome, TraceOp};

impl<T: CacheTypes> MetadataCache<T> {
    /// Free room for `needed` more bytes, and write dirty tail entries until the min-clean goal holds
    /// (MDC-016 .. MDC-025). Walks the LRU (or, when writing is not permitted, the clean LRU) from the
    /// tail; clean entries are evicted, dirty ones written and moved to the head (second pass). The
    /// scan restarts from the tail when a callback removed entries under it, and is bounded.
    pub(crate) fn make_space(&mut self, needed: usize, write_ok: bool) -> Result<()> {
        let needed = needed.min(self.max_cache_size);
        if self.index_size + needed > self.max_cache_size {
            self.cache_full = true;
        }
        let (chain, list_len) = if write_ok {
            (Chain::Main, self.lru.len + self.markers.active_count())
        } else {
            (Chain::Aux, self.clru.len)
        };
        let budget = 2 * list_len + 2;
        let mut scanned = 0usize;
        let mut skipped = 0usize;
        let mut scanned_for_space = 0usize;
        let mut cur = self.tail_of(chain);
        while cur != NIL {
            let need_room = self.index_size + needed > self.max_cache_size;
            let need_clean = write_ok && self.effective_clean_size() < self.min_clean_size;
            if !(need_room || need_clean) || scanned >= budget {
                break;
            }
            scanned += 1;
            let prev = self.slab.nodes[cur as usize].main_or_aux(chain).prev;
            let prev_gen = if prev == NIL {
                0
            } else {
                self.slab.nodes[prev as usize].generation
            };
            let removals = self.removals;
            if Slab::<T::Icr>::is_marker(cur) {
                cur = prev;
                continue;
            }
            let e = self.slab.entry(cur);
            let mut own_removals = 0;
            let mut wrote = false;
            if e.busy() {
                // being written by an outer call: leave it alone
            } else if e.dirty {
                if write_ok && e.ndirty_children == 0 {
                    self.write_entry(cur, false)?;
                    wrote = true;
                }
            } else if need_room {
                scanned_for_space += 1;
                self.flush_single(cur, EntryFlushFlags::INVALIDATE)?;
                own_removals = 1;
            } else {
                skipped += 1;
            }
            let prev_ok = prev == NIL
                || (Slab::<T::Icr>::is_marker(prev) && self.markers.is_active(prev))
                || (self.slab.live(prev, prev_gen) && self.slab.entry(prev).place == Place::Lru);
            // An entry written at the LRU head (nothing left before it) has moved to the head, which
            // may now also be the tail: rescan from the tail so that it gets its second pass (MDC-016,
            // MDC-021) instead of ending the walk with room still needed.
            let restart =
                self.removals != removals + own_removals || !prev_ok || (prev == NIL && wrote);
            cur = if restart { self.tail_of(chain) } else { prev };
        }
        self.stats.make_space(scanned, skipped, scanned_for_space);
        Ok(())
    }

    fn tail_of(&self, chain: Chain) -> u32 {
        match chain {
            Chain::Main => self.lru.tail,
            Chain::Aux => self.clru.tail,
        }
    }

    /// Flush the cache (MDC-074 .. MDC-081). Without flags: write every dirty entry (pinned ones too) in
    /// ascending address order, children before parents, flush-last entries at the end. With
    /// `MARKED_ENTRIES`: only entries whose flush marker is set. With `INVALIDATE`: then evict
    /// everything (file close).
    pub fn flush(&mut self, flags: FlushFlags) -> Result<()> {
        let r = if self.flush_in_progress {
            Err(CacheError::FlushInProgress)
        } else {
            self.flush_in_progress = true;
            let r = if flags.contains(FlushFlags::INVALIDATE) {
                self.flush_invalidate()
            } else {
                self.flush_dirty(flags.contains(FlushFlags::MARKED_ENTRIES))
            };
            self.flush_in_progress = false;
            r
        };
        self.trace_op(
            |_| {
                if flags.contains(FlushFlags::INVALIDATE) {
                    TraceOp::FlushInvalidate
                } else if flags.contains(FlushFlags::MARKED_ENTRIES) {
                    TraceOp::FlushMarked
                } else {
                    TraceOp::Flush
                }
            },
            r.is_ok().then_some(Outcome::Ok),
        );
        self.after_op();
        r
    }

    fn flush_dirty(&mut self, marked_only: bool) -> Result<()> {
        if !self.write_ok() {
            return Err(CacheError::WriteNotPermitted);
        }
        let mut sorted = self.sorted_slist();
        self.slist_joined = Some(Vec::new());
        let r = self.flush_phases(marked_only, &mut sorted);
        self.slist_joined = None;
        r?;
        let mut protected = 0;
        let mut stuck = 0;
        for &slot in &self.slist {
            let e = self.slab.entry(slot);
            if marked_only && !e.flush_marker {
                continue;
            }
            if e.place == Place::Protected {
                protected += 1;
            } else {
                stuck += 1;
            }
        }
        if protected > 0 {
            return Err(CacheError::ProtectedEntries { count: protected });
        }
        if stuck > 0 {
            return Err(CacheError::UnflushableEntries { count: stuck });
        }
        Ok(())
    }

    /// The normal phase's passes, then the last phase's, each repeated while it writes.
    fn flush_phases(&mut self, marked_only: bool, sorted: &mut Vec<(u64, u32)>) -> Result<()> {
        for last_phase in [false, true] {
            while self.flush_pass(marked_only, last_phase, sorted)? > 0 {}
        }
        Ok(())
    }

    /// One ascending pass over the slist; returns how many entries it wrote. The normal phase writes
    /// entries that are not flush-last; the last phase writes flush-last entries and any entry that
    /// had to wait for a flush-last descendant (dependency order outranks flush-last, MDC-078).
    fn flush_pass(
        &mut self,
        marked_only: bool,
        last_phase: bool,
        sorted: &mut Vec<(u64, u32)>,
    ) -> Result<usize> {
        let mut cursor = 0u64;
        let mut wrote = 0;
        // Entries written by earlier passes leave the sorted copy.
        sorted.retain(|&(addr, slot)| self.in_slist_at(slot, addr));
        loop {
            self.add_joined(sorted);
            let sorted = &*sorted;
            // `blocking`: only flush-last entries that some parent waits for.
            let find = |from: u64, want_last: bool, blocking: bool| {
                let start = sorted.partition_point(|&(a, _)| a < from);
                sorted.iter().skip(start).find_map(|&(addr, slot)| {
                    if !self.in_slist_at(slot, addr) {
                        return None;
                    }
                    let e = self.slab.entry(slot);
                    let eligible = e.place != Place::Protected
                        && !e.busy()
                        && e.ndirty_children == 0
                        && e.flush_last == want_last
                        && (!blocking || !e.parents.is_empty())
                        && (!marked_only || e.flush_marker);
                    eligible.then_some((addr, slot))
                })
            };
            // The last phase rescans from the lowest address each time (it holds few entries):
            // entries released by a flush-last child first, then flush-last entries that others
            // wait for, and independent flush-last entries (the superblock) at the very end.
            let next = if last_phase {
                find(0, false, false)
                    .or_else(|| find(0, true, true))
                    .or_else(|| find(0, true, false))
            } else {
                find(cursor, false, false)
            };
            let Some((addr, slot)) = next else {
                break;
            };
            let outcome = self.write_entry(slot, true)?;
            wrote += 1;
            cursor = if outcome.slist_changed {
                self.stats.flush_restarts += 1;
                0
            } else {
                addr.saturating_add(1)
            };
        }
        Ok(wrote)
    }

    /// Adds the entries that joined the slist since the last call to `sorted`, the flush's copy
    /// of the slist in ascending address order. With it, the copy holds every dirty entry
    /// (entries that left the slist are skipped as they come), so a search of the copy from an
    /// address finds what a search of the slist would.
    fn add_joined(&mut self, sorted: &mut Vec<(u64, u32)>) {
        let Some(joined) = self.slist_joined.as_mut().filter(|j| !j.is_empty()) else {
            return;
        };
        let joined = std::mem::take(joined);
        for &slot in &joined {
            let Some(e) = self
                .slab
                .nodes
                .get(slot as usize)
                .and_then(|n| n.entry.as_ref())
            else {
                continue;
            };
            if !e.dirty {
                continue;
            }
            let key = (e.addr, slot);
            if let Err(at) = sorted.binary_search(&key) {
                sorted.insert(at, key);
            }
        }
        if let Some(j) = self.slist_joined.as_mut() {
            *j = joined;
            j.clear();
        }
    }

    /// Whether the entry in `slot` is dirty at `addr` (an entry of a sorted copy of the slist
    /// that is still in the slist there).
    fn in_slist_at(&self, slot: u32, addr: u64) -> bool {
        self.slab
            .nodes
            .get(slot as usize)
            .and_then(|n| n.entry.as_ref())
            .is_some_and(|e| e.dirty && e.addr == addr)
    }

    /// Write everything, then evict everything, repeating while progress is made (MDC-080, Q-06).
    fn flush_invalidate(&mut self) -> Result<()> {
        if self.pl.len > 0 {
            return Err(CacheError::ProtectedEntries { count: self.pl.len });
        }
        loop {
            let before = (self.index_len, self.pel.len, self.slist.len());
            self.flush_dirty(false)?;
            let victims: Vec<(u32, u32)> = self
                .lru
                .iter(&self.slab, Chain::Main)
                .filter(|s| !Slab::<T::Icr>::is_marker(*s))
                .map(|s| (s, self.slab.nodes[s as usize].generation))
                .collect();
            for (slot, generation) in victims {
                if !self.slab.live(slot, generation) {
                    continue;
                }
                let e = self.slab.entry(slot);
                if e.place != Place::Lru || e.busy() || e.dirty {
                    continue;
                }
                self.flush_single(slot, EntryFlushFlags::INVALIDATE)?;
            }
            if self.index_len == 0 {
                return Ok(());
            }
            if (self.index_len, self.pel.len, self.slist.len()) == before {
                return Err(CacheError::PinnedEntriesRemain {
                    count: self.pel.len,
                });
            }
        }
    }

    /// Close: flush-invalidate, close the trace file, and return the statistics dump if
    /// [`set_dump_stats_on_close`](Self::set_dump_stats_on_close) asked for one (MDC-080, MDC-134).
    pub fn close(&mut self) -> Result<Option<String>> {
        self.flush(FlushFlags::INVALIDATE)?;
        self.tracer = None;
        Ok(self.dump_stats_on_close.then(|| self.stats_report()))
    }
}

impl<I> crate::cache::Node<I> {
    pub(crate) fn main_or_aux(&self, chain: Chain) -> crate::list::Links {
        match chain {
            Chain::Main => self.main,
            Chain::Aux => self.aux,
        }
    }
}
