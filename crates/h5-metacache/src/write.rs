//! Writing and evicting one entry (spec §3.9).

use crate::cache::{LogFlushEvent, MetadataCache, Place};
use crate::class::{CacheTypes, FileContext, NotifyAction};
use crate::error::{CacheError, Callback, Result};
use crate::flags::EntryFlushFlags;
use crate::trace::{Outcome, TraceOp};

/// Byte pattern the serialize buffer starts with, so that unwritten bytes are recognisable (MDC-070).
pub const SERIALIZE_POISON: u8 = 0xA5;

/// Unchanged bytes between two changed runs below which the runs are written as one
/// ([`crate::ClassFlags::DIFF_WRITES`]).
pub const DIFF_WRITE_GAP: usize = 64;

/// Bytes compared at once while skipping an equal stretch of two images.
const COMPARE_BLOCK: usize = 16;

/// How many leading bytes `a` and `b` share (compared a block at a time, then byte by byte).
fn equal_prefix(a: &[u8], b: &[u8]) -> usize {
    let blocks = a
        .chunks_exact(COMPARE_BLOCK)
        .zip(b.chunks_exact(COMPARE_BLOCK))
        .take_while(|(x, y)| x == y)
        .count();
    let at = blocks * COMPARE_BLOCK;
    let rest = a
        .get(at..)
        .unwrap_or_default()
        .iter()
        .zip(b.get(at..).unwrap_or_default())
        .take_while(|(x, y)| x == y)
        .count();
    at + rest
}

/// The byte ranges `[start, end)` where `new` differs from `old` (same length), runs closer
/// than [`DIFF_WRITE_GAP`] merged. Bytes of `new` past the end of `old` count as changed.
#[cfg(test)]
fn changed_runs(old: &[u8], new: &[u8]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    changed_runs_into(old, new, &mut runs);
    runs
}

/// [`changed_runs`] into `runs` (cleared first), whose allocation a flush reuses.
fn changed_runs_into(old: &[u8], new: &[u8], runs: &mut Vec<(usize, usize)>) {
    runs.clear();
    let mut i = 0;
    while i < new.len() {
        i += equal_prefix(
            old.get(i..).unwrap_or_default(),
            new.get(i..).unwrap_or_default(),
        );
        if i >= new.len() {
            break;
        }
        let start = i;
        while i < new.len() && old.get(i) != new.get(i) {
            i += 1;
        }
        match runs.last_mut() {
            Some(last) if start - last.1 < DIFF_WRITE_GAP => last.1 = i,
            _ => runs.push((start, i)),
        }
    }
}

/// Whether `[addr, addr + len)` crosses a boundary of `page_size`-byte pages without starting
/// on one.
fn crosses_page_unaligned(addr: u64, len: usize, page_size: u64) -> bool {
    let last = addr.saturating_add((len as u64).saturating_sub(1));
    len > 0 && !addr.is_multiple_of(page_size) && addr / page_size != last / page_size
}

/// Whether entries of `class` may be written across a page boundary without starting on one
/// (SWMR-074): fixed and extensible array data block pages only.
fn splits_allowed(class: u8) -> bool {
    use crate::class::MetadataKind as K;
    class == K::ExtensibleArrayDataBlockPage.id() || class == K::FixedArrayDataBlockPage.id()
}

/// What a write observed, for the flush loop's restart rule (MDC-076).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WriteOutcome {
    pub(crate) slist_changed: bool,
}

impl<T: CacheTypes> MetadataCache<T> {
    /// Write a dirty entry (MDC-068): pre-serialize, apply move/resize, serialize, write, log, mark
    /// clean (an LRU entry moves to the LRU head), notify `AfterFlush`.
    pub(crate) fn write_entry(&mut self, slot: u32, in_cache_flush: bool) -> Result<WriteOutcome> {
        let (class, addr0, len0) = {
            let e = self.slab.entry(slot);
            (e.class, e.addr, e.size)
        };
        if self.slab.entry(slot).busy() {
            return Err(CacheError::EntryBusy { addr: addr0 });
        }
        let info_flags = self.class(class)?.info().flags;
        let mem_type = self.class(class)?.info().mem_type;
        self.slab.entry_mut(slot).flush_in_progress = true;
        let result = self.write_entry_steps(slot, class, addr0, len0, in_cache_flush, info_flags);
        if let Some(e) = self.slab.nodes[slot as usize].entry.as_mut() {
            e.flush_in_progress = false;
        }
        let (outcome, addr, len) = result?;
        if let Some(log) = self.log_flush.as_mut() {
            log(LogFlushEvent {
                addr,
                len,
                class,
                mem_type,
            });
        }
        let pinned = self.slab.entry(slot).is_pinned();
        self.slab.entry_mut(slot).image_up_to_date = true;
        self.set_dirty(slot, false);
        self.slab.entry_mut(slot).life.flushes += 1;
        self.stats.flush(class, pinned);
        self.notify(slot, NotifyAction::AfterFlush)?;
        Ok(outcome)
    }

    fn write_entry_steps(
        &mut self,
        slot: u32,
        class: u8,
        addr0: u64,
        len0: usize,
        in_cache_flush: bool,
        info_flags: crate::class::ClassFlags,
    ) -> Result<(WriteOutcome, u64, usize)> {
        self.slist_changed = false;
        let pre = self.with_icr(slot, |c, cls, icr| cls.pre_serialize(c, icr, addr0, len0))?;
        let pre = pre.map_err(self.client_err(class, Callback::PreSerialize, addr0))?;
        let mut changed = self.slist_changed;
        if changed {
            self.stats.slist_change_in_pre_serialize += 1;
        }
        if pre.flags.moved && pre.new_addr != addr0 {
            if self.peek(pre.new_addr).is_some() {
                return Err(CacheError::AddressInUse { addr: pre.new_addr });
            }
            self.rekey(slot, pre.new_addr);
            self.stats.flush_move(class, in_cache_flush);
            changed = true;
        }
        if pre.flags.resized && pre.new_len != len0 {
            if pre.new_len == 0 {
                return Err(CacheError::InvalidSize {
                    addr: addr0,
                    size: 0,
                });
            }
            self.change_size(slot, pre.new_len);
            self.stats.flush_size_change(class, in_cache_flush);
            changed = true;
        }
        let (addr, len) = {
            let e = self.slab.entry(slot);
            (e.addr, e.size)
        };
        let old = std::mem::take(&mut self.slab.entry_mut(slot).image);
        // The image the file holds, when only the changed bytes are to be written.
        let diff = info_flags.diff_writes() && self.slab.entry(slot).image_on_disk;
        let (on_disk, mut buf) = if diff && old.len() == len {
            (Some(old), std::mem::take(&mut self.spare_image))
        } else {
            (None, old)
        };
        // The new image is made in a buffer whose allocation is reused (the entry's old
        // image, or the one a previous diff write left over): a flush allocates nothing per
        // entry once the buffers have grown.
        buf.clear();
        buf.resize(len, SERIALIZE_POISON);
        self.slist_changed = false;
        let ser = self.with_icr(slot, |c, cls, icr| cls.serialize(c, icr, &mut buf))?;
        if self.slist_changed {
            self.stats.slist_change_in_serialize += 1;
            changed = true;
        }
        if let Err(source) = ser {
            self.keep_unwritten(slot, on_disk, buf);
            return Err(CacheError::Client {
                class: self.class_name(class),
                callback: Callback::Serialize,
                addr,
                source,
            });
        }
        // Writes into temporary space (at or past the EOA) are refused (MDC-096, E-39).
        let eoa = self.ctx.end_of_allocation();
        if addr.checked_add(len as u64).is_none_or(|end| end > eoa) {
            self.keep_unwritten(slot, on_disk, buf);
            return Err(CacheError::PastEndOfAllocation {
                what: "write",
                addr,
                len,
                eoa,
            });
        }
        if let Some(ps) = self.page_check
            && crosses_page_unaligned(addr, len, ps)
            && !splits_allowed(class)
        {
            self.keep_unwritten(slot, on_disk, buf);
            return Err(CacheError::MisalignedWrite {
                class: self.class_name(class),
                addr,
                len,
                page_size: ps,
            });
        }
        if !(info_flags.skip_writes() || info_flags.no_io()) {
            let mut runs = std::mem::take(&mut self.spare_runs);
            match &on_disk {
                Some(old) => changed_runs_into(old, &buf, &mut runs),
                None => {
                    runs.clear();
                    runs.push((0, len));
                }
            }
            let written: usize = runs.iter().map(|&(start, end)| end - start).sum();
            // Counted before the write: a detached load racing it must not be installed.
            self.image_writes += 1;
            // One run (the common case) is written without a segment list.
            let r = match runs.as_slice() {
                [] => Ok(()),
                &[(start, end)] => match buf.get(start..end) {
                    Some(data) => self.storage.write_at(addr + start as u64, data),
                    None => Ok(()),
                },
                many => {
                    let segments: Vec<h5_io::WriteSegment<'_>> = many
                        .iter()
                        .filter_map(|&(start, end)| {
                            buf.get(start..end).map(|data| h5_io::WriteSegment {
                                offset: addr + start as u64,
                                data,
                            })
                        })
                        .collect();
                    self.storage.write_vectored(&segments)
                }
            };
            self.spare_runs = runs;
            if let Err(e) = r {
                let entry = self.slab.entry_mut(slot);
                entry.image = buf;
                entry.image_on_disk = false;
                return Err(e.into());
            }
            self.stats.bytes_written += written as u64;
            self.stats.writes += 1;
        }
        if let Some(old) = on_disk {
            self.spare_image = old;
        }
        let entry = self.slab.entry_mut(slot);
        entry.image = buf;
        entry.image_on_disk = true;
        Ok((
            WriteOutcome {
                slist_changed: changed,
            },
            addr,
            len,
        ))
    }

    /// A write failed before any byte reached the storage: the entry keeps the image the file
    /// holds when there is one (so that a later write compares against the file's bytes, not
    /// against a half-made image), else the new buffer, marked as not on disk.
    fn keep_unwritten(&mut self, slot: u32, on_disk: Option<Vec<u8>>, buf: Vec<u8>) {
        match on_disk {
            Some(old) => {
                self.slab.entry_mut(slot).image = old;
                self.spare_image = buf;
            }
            None => {
                let entry = self.slab.entry_mut(slot);
                entry.image = buf;
                entry.image_on_disk = false;
            }
        }
    }

    /// Evict an unprotected, unpinned entry (MDC-072): notify `BeforeEvict`, drop remaining
    /// dependency links, remove it, free its object (or hand it back).
    pub(crate) fn evict(&mut self, slot: u32, take_ownership: bool) -> Result<Option<T::Icr>> {
        let (class, addr) = {
            let e = self.slab.entry(slot);
            (e.class, e.addr)
        };
        self.slab.entry_mut(slot).destroy_in_progress = true;
        if let Err(err) = self.notify(slot, NotifyAction::BeforeEvict) {
            self.slab.entry_mut(slot).destroy_in_progress = false;
            return Err(err);
        }
        // A child whose client did not unlink it in BeforeEvict is unlinked here so that no parent
        // keeps a dangling child.
        let parents: Vec<u32> = self.slab.entry(slot).parents.clone();
        for p in parents {
            self.unlink_dependency(p, slot);
        }
        if !self.slab.entry(slot).children.is_empty() {
            self.slab.entry_mut(slot).destroy_in_progress = false;
            return Err(CacheError::WrongState {
                addr,
                reason: "evicting a flush-dependency parent",
            });
        }
        self.unlink(slot);
        let e = self.index_remove(slot);
        self.stats.eviction(class);
        let icr = e
            .icr
            .ok_or_else(|| CacheError::Invariant("evicted entry had no object"))?;
        if take_ownership {
            return Ok(Some(icr));
        }
        let cls = self.class(class)?;
        cls.free_icr(icr)
            .map_err(self.client_err(class, Callback::FreeIcr, addr))?;
        Ok(None)
    }

    /// Single-entry flush with the flag combinations of MDC-067 table 1.
    pub(crate) fn flush_single(
        &mut self,
        slot: u32,
        flags: EntryFlushFlags,
    ) -> Result<Option<T::Icr>> {
        use EntryFlushFlags as F;
        let clear_only = flags.contains(F::CLEAR_ONLY);
        let invalidate = flags.contains(F::INVALIDATE);
        let free_space = flags.contains(F::FREE_FILE_SPACE);
        let take = flags.contains(F::TAKE_OWNERSHIP);
        let legal = matches!(
            (clear_only, invalidate, free_space, take),
            (false, false, false, false)
                | (true, false, false, false)
                | (false, true, false, false)
                | (true, true, false, false)
                | (true, true, true, false)
                | (false, true, false, true)
                | (true, true, false, true)
        );
        if !legal {
            return Err(CacheError::InvalidFlags {
                call: "flush_entry",
                reason: "combination not in table 1",
            });
        }
        let (addr, dirty, place, pinned, ndirty_children) = {
            let e = self.slab.entry(slot);
            (e.addr, e.dirty, e.place, e.is_pinned(), e.ndirty_children)
        };
        if self.slab.entry(slot).busy() {
            return Err(CacheError::EntryBusy { addr });
        }
        if place == Place::Protected {
            return Err(CacheError::WrongState {
                addr,
                reason: "a protected entry cannot be flushed",
            });
        }
        if !invalidate && !dirty {
            // public paths choose only dirty entries for these.
            return Err(CacheError::WrongState {
                addr,
                reason: "plain or clear-only flush of a clean entry",
            });
        }
        if invalidate && pinned {
            return Err(CacheError::WrongState {
                addr,
                reason: "a pinned entry cannot be evicted",
            });
        }
        if dirty && !clear_only && ndirty_children > 0 {
            return Err(CacheError::FlushDependency {
                parent: addr,
                child: addr,
                reason: "the entry has dirty flush-dependency children",
            });
        }
        if free_space && self.ctx.is_temporary(addr) {
            return Err(CacheError::WrongState {
                addr,
                reason: "freeing file space of an entry in temporary space",
            });
        }
        // The size of file space to free is asked first, so that a failure leaves the entry as it was.
        let (class, size) = {
            let e = self.slab.entry(slot);
            (e.class, e.size)
        };
        let fsf = if free_space {
            let cls = self.class(class)?;
            let e = self.slab.entry(slot);
            let icr = e
                .icr
                .as_ref()
                .ok_or_else(|| CacheError::EntryBusy { addr })?;
            let fsf = cls.get_fsf_size(icr).map_err(self.client_err(
                class,
                Callback::GetFsfSize,
                addr,
            ))?;
            Some(fsf.unwrap_or(size as u64))
        } else {
            None
        };
        if dirty {
            if clear_only {
                if !take {
                    self.clear_entry(slot, invalidate)?;
                } else {
                    self.set_dirty(slot, false);
                }
            } else {
                self.write_entry(slot, false)?;
            }
        }
        if !invalidate {
            return Ok(None);
        }
        let icr = self.evict(slot, take)?;
        if let Some(len) = fsf {
            self.ctx
                .free_file_space(addr, len)
                .map_err(self.client_err(class, Callback::FreeFileSpace, addr))?;
        }
        Ok(icr)
    }

    /// Flush one entry with explicit flags (MDC-067). Returns the object for `TAKE_OWNERSHIP`.
    pub fn flush_entry(&mut self, addr: u64, flags: EntryFlushFlags) -> Result<Option<T::Icr>> {
        let r = self.flush_entry_inner(addr, flags);
        self.trace_op(
            |_| TraceOp::FlushEntry { addr, flags },
            r.is_ok().then_some(Outcome::Ok),
        );
        self.after_op();
        r
    }

    fn flush_entry_inner(&mut self, addr: u64, flags: EntryFlushFlags) -> Result<Option<T::Icr>> {
        let slot = self
            .peek(addr)
            .ok_or_else(|| CacheError::NotCached { addr })?;
        if !self.write_ok() && !flags.contains(EntryFlushFlags::CLEAR_ONLY) {
            return Err(CacheError::WriteNotPermitted);
        }
        self.flush_single(slot, flags)
    }
}

#[cfg(test)]
mod diff_tests {
    use super::*;

    /// Changed bytes come out as runs; runs closer than the gap merge; equal images none.
    #[test]
    fn changed_runs_merge_close_changes() {
        let old = vec![0u8; 1000];
        assert!(changed_runs(&old, &old).is_empty());
        let mut new = old.clone();
        new[10] = 1;
        new[12] = 1;
        new[500] = 2;
        new[999] = 3;
        assert_eq!(
            changed_runs(&old, &new),
            vec![(10, 13), (500, 501), (999, 1000)]
        );
        new[10 + DIFF_WRITE_GAP] = 4;
        assert_eq!(changed_runs(&old, &new)[0], (10, 11 + DIFF_WRITE_GAP));
    }

    /// The byte-at-a-time definition the block-wise scan must agree with.
    fn changed_runs_bytewise(old: &[u8], new: &[u8]) -> Vec<(usize, usize)> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for i in (0..new.len()).filter(|&i| old.get(i) != new.get(i)) {
            match runs.last_mut() {
                Some(last) if last.1 == i || i - last.1 < DIFF_WRITE_GAP => last.1 = i + 1,
                _ => runs.push((i, i + 1)),
            }
        }
        runs
    }

    proptest::proptest! {
        /// The block-wise scan finds exactly the runs of the byte-wise definition, for images
        /// with sparse changes anywhere (block boundaries included) and of any length.
        #[test]
        fn changed_runs_equal_the_bytewise_runs(
            old in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            changes in proptest::collection::vec((0usize..300, 1u8..=255), 0..12),
        ) {
            let mut new = old.clone();
            for (at, x) in changes {
                if let Some(b) = new.get_mut(at) {
                    *b ^= x;
                }
            }
            proptest::prop_assert_eq!(changed_runs(&old, &new), changed_runs_bytewise(&old, &new));
        }
    }
}
