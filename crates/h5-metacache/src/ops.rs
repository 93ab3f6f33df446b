//! Entry operations: insert, protect (with load), unprotect, pin/unpin, mark dirty/clean, resize, move,
//! expunge (spec §3.3 .. §3.8).

use crate::cache::{Entry, MetadataCache, Place, ProtectHandle};
use crate::class::{CacheTypes, FileContext, NotifyAction};
use crate::error::{CacheError, Callback, Result, UnprotectError};
use crate::flags::{EntryFlushFlags, ExpungeFlags, InsertFlags, ProtectFlags, UnprotectFlags};
use crate::trace::{Outcome, TraceOp};

/// HDF5's undefined address.
pub const UNDEFINED_ADDR: u64 = u64::MAX;

impl<T: CacheTypes> MetadataCache<T> {
    pub(crate) fn client_err(
        &self,
        class: u8,
        callback: Callback,
        addr: u64,
    ) -> impl FnOnce(crate::error::ClientError) -> CacheError + use<T> {
        let class = self.class_name(class);
        move |source| CacheError::Client {
            class,
            callback,
            addr,
            source,
        }
    }

    /// Size of the entry cached at `addr`, 0 when nothing is (what insert and protect records show).
    fn cached_size(&self, addr: u64) -> usize {
        self.peek(addr)
            .map(|s| self.slab.entry(s).size)
            .unwrap_or(0)
    }

    fn check_tag(&self, addr: u64) -> Result<()> {
        if !self.ignore_tags && self.current_tag.is_none() {
            return Err(CacheError::MissingTag { addr });
        }
        Ok(())
    }

    /// Debug check that `[addr, addr+size)` overlaps no cached block (MDC-001): only the nearest
    /// cached blocks below and above `addr` can overlap it.
    fn check_overlap(&self, addr: u64, size: usize) -> Result<()> {
        #[cfg(debug_assertions)]
        {
            let end = addr.saturating_add(size as u64);
            let below = self.by_addr.range(..=addr).next_back();
            let above = self.by_addr.range(addr..).next();
            for (&other, &slot) in below.into_iter().chain(above) {
                let other_end = other.saturating_add(self.slab.entry(slot).size as u64);
                if other < end && addr < other_end {
                    return Err(CacheError::Overlap { addr, size, other });
                }
            }
        }
        #[cfg(not(debug_assertions))]
        let _ = (addr, size);
        Ok(())
    }

    /// Flash check then make-space, when evictions are on and the entry does not fit or the min-clean
    /// goal is unmet (MDC-028, MDC-040).
    fn make_room_for(&mut self, size: usize, write_ok: bool) -> Result<()> {
        if !self.config.evictions_enabled {
            return Ok(());
        }
        if self.index_size + size > self.max_cache_size
            || self.effective_clean_size() < self.min_clean_size
        {
            self.flash_check(size);
            self.make_space(size, write_ok)?;
        }
        Ok(())
    }

    // ----- insert (MDC-026 .. MDC-029) -----

    /// Insert an entry the client has just created (and allocated file space for). The entry is dirty.
    pub fn insert(&mut self, class: u8, addr: u64, icr: T::Icr, flags: InsertFlags) -> Result<()> {
        let r = self.insert_inner(class, addr, icr, flags);
        self.trace_op(
            |c| TraceOp::Insert {
                addr,
                size: c.cached_size(addr),
                class,
                flags,
            },
            r.is_ok().then_some(Outcome::Ok),
        );
        self.after_op();
        r
    }

    fn insert_inner(
        &mut self,
        class: u8,
        addr: u64,
        icr: T::Icr,
        flags: InsertFlags,
    ) -> Result<()> {
        let cls = self.class(class)?;
        if addr == UNDEFINED_ADDR {
            return Err(CacheError::InvalidArgument {
                what: "addr",
                reason: "undefined address",
            });
        }
        let size = cls
            .image_len(&icr)
            .map_err(self.client_err(class, Callback::ImageLen, addr))?;
        if size == 0 {
            return Err(CacheError::InvalidSize { addr, size });
        }
        if self.lookup(addr).is_some() {
            return Err(CacheError::AddressInUse { addr });
        }
        self.check_overlap(addr, size)?;
        self.check_tag(addr)?;
        let write_ok = self.write_ok();
        self.make_room_for(size, write_ok)?;
        let mut e = Entry::new(addr, size, class, icr, true);
        e.pinned_client = flags.contains(InsertFlags::PIN);
        e.flush_marker = flags.contains(InsertFlags::SET_FLUSH_MARKER);
        e.flush_last = flags.contains(InsertFlags::FLUSH_LAST);
        e.collective = flags.contains(InsertFlags::FLUSH_COLLECTIVELY);
        e.tag = self.current_tag;
        if e.pinned_client {
            e.life.pins += 1;
        }
        let slot = self.index_add(e);
        let place = self.resting_place(slot);
        self.link(slot, place);
        self.stats
            .insertion(class, flags.contains(InsertFlags::PIN));
        self.stats
            .parallel_dirty_created(crate::stats::DirtySource::Insert, size);
        if let Err(err) = self.notify(slot, NotifyAction::AfterInsert) {
            // The insert fails as a whole: the entry does not stay behind (like a failed load).
            self.undo_add(slot);
            return Err(err);
        }
        Ok(())
    }

    pub(crate) fn notify(&mut self, slot: u32, action: NotifyAction) -> Result<()> {
        let (class, addr) = {
            let e = self.slab.entry(slot);
            (e.class, e.addr)
        };
        let r = self.with_icr(slot, |c, cls, icr| cls.notify(c, action, addr, icr))?;
        r.map_err(self.client_err(class, Callback::Notify, addr))
    }

    // ----- protect and load (MDC-030 .. MDC-046) -----

    /// Protect the entry at `addr`, loading it if absent (MDC-030). Read-only protections may be
    /// shared; a read-write protection is exclusive.
    pub fn protect(
        &mut self,
        class: u8,
        addr: u64,
        udata: &T::Udata,
        flags: ProtectFlags,
    ) -> Result<ProtectHandle> {
        let hits_before = self.stats.total_hits();
        let r = self.protect_inner(class, addr, udata, flags, None);
        self.trace_protect(class, addr, flags, hits_before, &r);
        self.after_op();
        r
    }

    /// Records a protect in the trace: a hit when the hit count grew.
    pub(crate) fn trace_protect(
        &mut self,
        class: u8,
        addr: u64,
        flags: ProtectFlags,
        hits_before: u64,
        r: &Result<ProtectHandle>,
    ) {
        let outcome = match r {
            Ok(_) if self.stats.total_hits() > hits_before => Some(Outcome::Hit),
            Ok(_) => Some(Outcome::Miss),
            Err(_) => None,
        };
        self.trace_op(
            |c| TraceOp::Protect {
                addr,
                size: c.cached_size(addr),
                class,
                read_only: flags.contains(ProtectFlags::READ_ONLY),
            },
            outcome,
        );
    }

    /// [`protect`](Self::protect), with the entry already loaded (`preloaded`, from a detached
    /// load) when it turns out to be absent; a preloaded entry not used is freed.
    pub(crate) fn protect_inner(
        &mut self,
        class: u8,
        addr: u64,
        udata: &T::Udata,
        flags: ProtectFlags,
        preloaded: Option<crate::load::Loaded<T::Icr>>,
    ) -> Result<ProtectHandle> {
        let preloaded = match preloaded {
            Some(unused) if self.peek(addr).is_some() => {
                // Another caller put the entry here meanwhile: the first one wins.
                if let Ok(cls) = self.class(class) {
                    let _ = cls.free_icr(unused.icr);
                }
                None
            }
            p => p,
        };
        self.check_class(class)?;
        let read_only = flags.contains(ProtectFlags::READ_ONLY);
        let write_ok = self.write_ok();
        let (slot, hit) = match self.lookup(addr) {
            Some(slot) => {
                let e = self.slab.entry(slot);
                if e.class != class {
                    return Err(CacheError::ClassMismatch {
                        addr,
                        cached: self.class_name(e.class),
                        requested: self.class_name(class),
                    });
                }
                if e.busy() {
                    return Err(CacheError::EntryBusy { addr });
                }
                if e.place == Place::Protected && !(read_only && e.read_only) {
                    return Err(CacheError::WrongState {
                        addr,
                        reason: if e.read_only {
                            "entry is protected read-only; a read-write protect must wait"
                        } else {
                            "entry is already protected read-write"
                        },
                    });
                }
                (slot, true)
            }
            None => {
                self.check_tag(addr)?;
                let loaded = match preloaded {
                    Some(l) => l,
                    None => {
                        let detached = self.detach_load(class, addr)?;
                        let mut counts = crate::load::LoadCounts::default();
                        let loaded = detached.load(udata, &mut counts);
                        self.count_load(&counts);
                        loaded?
                    }
                };
                self.check_overlap(addr, loaded.size)?;
                self.make_room_for(loaded.size, write_ok)?;
                let mut e = Entry::new(addr, loaded.size, class, loaded.icr, loaded.repaired);
                e.image = loaded.image;
                e.image_up_to_date = !loaded.repaired;
                e.image_on_disk = !loaded.repaired;
                e.flush_last = flags.contains(ProtectFlags::FLUSH_LAST);
                e.collective = flags.contains(ProtectFlags::FLUSH_COLLECTIVELY);
                e.tag = self.current_tag;
                let slot = self.index_add(e);
                self.link(slot, Place::Lru);
                (slot, false)
            }
        };
        // Take the entry onto the protected list.
        let already_protected = self.slab.entry(slot).place == Place::Protected;
        if !already_protected {
            self.unlink(slot);
            self.link(slot, Place::Protected);
            let e = self.slab.entry_mut(slot);
            e.dirtied = false;
            e.read_only = read_only;
        }
        let ro_refs = {
            let e = self.slab.entry_mut(slot);
            if read_only {
                e.ro_refs += 1;
            }
            e.life.accesses += 1;
            e.ro_refs
        };
        let generation = self.slab.nodes[slot as usize].generation;
        if !hit && let Err(err) = self.notify(slot, NotifyAction::AfterLoad) {
            // Undo the load so that a failed protect leaves nothing behind (MDC-038).
            self.undo_add(slot);
            return Err(err);
        }
        self.cache_accesses += 1;
        if hit {
            self.cache_hits += 1;
        }
        self.stats.protect(class, hit, read_only, ro_refs);
        if !hit {
            self.record_high_water();
        }
        if self.size_decreased && self.config.evictions_enabled {
            self.size_decreased = false;
            self.make_space(0, write_ok)?;
        }
        if self.derived.resize_enabled && self.cache_accesses >= self.config.epoch_length {
            self.end_of_epoch(write_ok)?;
        }
        Ok(ProtectHandle {
            cache: self.id,
            slot,
            generation,
            addr,
            read_only,
        })
    }

    /// Remove an entry that a failed insert or load has just added, as if it had never been added:
    /// drop any flush dependencies its notify created, take it off its list and the index, free its
    /// object.
    fn undo_add(&mut self, slot: u32) {
        let parents = self.slab.entry(slot).parents.clone();
        for p in parents {
            self.unlink_dependency(p, slot);
        }
        let children = self.slab.entry(slot).children.clone();
        for c in children {
            self.unlink_dependency(slot, c);
        }
        self.unlink(slot);
        let e = self.index_remove(slot);
        if let (Some(icr), Ok(cls)) = (e.icr, self.class(e.class)) {
            let _ = cls.free_icr(icr);
        }
    }

    // ----- access to protected objects -----

    fn check_handle(&self, h: &ProtectHandle) -> Result<()> {
        if h.cache != self.id || !self.slab.live(h.slot, h.generation) {
            return Err(CacheError::StaleHandle);
        }
        // Slot and generation name the entry; its address may have changed since (a move of a
        // read-write protected entry, Q-04), so the handle follows the entry, not the address.
        let e = self.slab.entry(h.slot);
        if e.place != Place::Protected {
            return Err(CacheError::StaleHandle);
        }
        Ok(())
    }

    /// The protected object.
    pub fn icr(&self, h: &ProtectHandle) -> Result<&T::Icr> {
        self.check_handle(h)?;
        self.slab
            .entry(h.slot)
            .icr
            .as_ref()
            .ok_or_else(|| CacheError::EntryBusy { addr: h.addr })
    }

    /// The protected object, mutably (read-write protections only). Report changes with `DIRTIED`.
    pub fn icr_mut(&mut self, h: &ProtectHandle) -> Result<&mut T::Icr> {
        self.check_handle(h)?;
        if h.read_only {
            return Err(CacheError::WrongState {
                addr: h.addr,
                reason: "read-only protection gives no mutable access",
            });
        }
        self.slab
            .entry_mut(h.slot)
            .icr
            .as_mut()
            .ok_or_else(|| CacheError::EntryBusy { addr: h.addr })
    }

    /// A read-only protect of the cached entry at `addr` and its unprotect in one call: `read`
    /// sees the entry's object and its result is returned. The entry, the counters and the
    /// statistics end as after [`protect`](Self::protect) with `READ_ONLY` and
    /// [`unprotect`](Self::unprotect) without flags on a hit (one more access, a hit, the
    /// entry at the head of its list), without the handle and the second lookup.
    ///
    /// `Ok(None)`, with nothing changed, when the call cannot be a plain hit: the entry is not
    /// cached, is of another class, protected or busy, or a trace is being written (whose
    /// records are the protect and the unprotect). The caller then protects and unprotects,
    /// which loads the entry or reports what is wrong.
    pub fn read_hit<R>(
        &mut self,
        class: u8,
        addr: u64,
        read: impl FnOnce(&T::Icr) -> R,
    ) -> Result<Option<R>> {
        if self.tracer.is_some() {
            return Ok(None);
        }
        let Some(slot) = self.lookup(addr) else {
            return Ok(None);
        };
        {
            let e = self.slab.entry(slot);
            if e.class != class || e.busy() || e.place == Place::Protected || e.icr.is_none() {
                return Ok(None);
            }
        }
        {
            let e = self.slab.entry_mut(slot);
            e.dirtied = false;
            e.life.accesses += 1;
        }
        self.cache_accesses += 1;
        self.cache_hits += 1;
        self.stats.protect(class, true, true, 1);
        // A protect's own upkeep runs while the entry is protected (never its own victim).
        let shrink = self.size_decreased && self.config.evictions_enabled;
        let epoch = self.derived.resize_enabled && self.cache_accesses >= self.config.epoch_length;
        let mut upkeep = Ok(());
        if shrink || epoch {
            self.unlink(slot);
            self.link(slot, Place::Protected);
            {
                let e = self.slab.entry_mut(slot);
                e.read_only = true;
                e.ro_refs = 1;
            }
            let write_ok = self.write_ok();
            if shrink {
                self.size_decreased = false;
                upkeep = self.make_space(0, write_ok);
            }
            if upkeep.is_ok() && epoch {
                upkeep = self.end_of_epoch(write_ok);
            }
            let e = self.slab.entry_mut(slot);
            e.read_only = false;
            e.ro_refs = 0;
        }
        let out = self.slab.entry(slot).icr.as_ref().map(read);
        // The unprotect: back to the head of its list.
        self.unlink(slot);
        let place = self.resting_place(slot);
        self.link(slot, place);
        self.after_op();
        upkeep?;
        Ok(out)
    }

    // ----- unprotect (MDC-047 .. MDC-056) -----

    /// End a protection. Returns the object when `DELETED | TAKE_OWNERSHIP` hands it back.
    ///
    /// A call rejected before it changed anything (bad flags, wrong state) returns the handle in the
    /// error, so the protection can still be released; a call that fails later (a callback of a
    /// `DELETED` entry failing) has already released it.
    pub fn unprotect(
        &mut self,
        h: ProtectHandle,
        flags: UnprotectFlags,
    ) -> Result<Option<T::Icr>, UnprotectError> {
        let addr = if self.slab.live(h.slot, h.generation) {
            self.slab.entry(h.slot).addr
        } else {
            h.addr
        };
        let r = match self.check_unprotect(&h, flags) {
            Err(error) => Err(UnprotectError {
                error,
                handle: Some(h),
            }),
            Ok(()) => self.release(h, flags).map_err(|error| UnprotectError {
                error,
                handle: None,
            }),
        };
        self.trace_op(
            |_| TraceOp::Unprotect { addr, flags },
            r.is_ok().then_some(Outcome::Ok),
        );
        self.after_op();
        r
    }

    /// Every check of an unprotect, before anything changes (MDC-047 .. MDC-055).
    fn check_unprotect(&self, h: &ProtectHandle, flags: UnprotectFlags) -> Result<()> {
        use UnprotectFlags as U;
        let bad = |reason| CacheError::InvalidFlags {
            call: "unprotect",
            reason,
        };
        if flags.contains(U::PIN | U::UNPIN) {
            return Err(bad("PIN and UNPIN together"));
        }
        if flags.intersects(U::FREE_FILE_SPACE | U::TAKE_OWNERSHIP) && !flags.contains(U::DELETED) {
            return Err(bad("FREE_FILE_SPACE and TAKE_OWNERSHIP need DELETED"));
        }
        if flags.contains(U::FREE_FILE_SPACE | U::TAKE_OWNERSHIP) {
            return Err(bad("FREE_FILE_SPACE and TAKE_OWNERSHIP together"));
        }
        // Rejected up front: pinning would happen before the delete fails, leaving a half-done call.
        if flags.contains(U::DELETED | U::PIN) {
            return Err(bad("DELETED and PIN together"));
        }
        self.check_handle(h)?;
        let e = self.slab.entry(h.slot);
        // The entry's current address: it may have moved while protected.
        let addr = e.addr;
        if e.busy() {
            return Err(CacheError::EntryBusy { addr });
        }
        if e.read_only != h.read_only {
            return Err(CacheError::StaleHandle);
        }
        if flags.contains(U::DIRTIED) && e.read_only {
            return Err(CacheError::WrongState {
                addr,
                reason: "DIRTIED on a read-only protection",
            });
        }
        if flags.contains(U::PIN) && e.pinned_client {
            return Err(CacheError::WrongState {
                addr,
                reason: "PIN on an entry already pinned by the client",
            });
        }
        if flags.contains(U::UNPIN) && !e.pinned_client {
            return Err(CacheError::WrongState {
                addr,
                reason: "UNPIN on an entry not pinned by the client",
            });
        }
        if flags.contains(U::DELETED) {
            if e.pinned_client && !flags.contains(U::UNPIN) {
                return Err(CacheError::WrongState {
                    addr,
                    reason: "deleting a pinned entry needs UNPIN",
                });
            }
            if !e.children.is_empty() {
                return Err(CacheError::WrongState {
                    addr,
                    reason: "deleting a flush-dependency parent that still has children",
                });
            }
            if !e.parents.is_empty() {
                return Err(CacheError::WrongState {
                    addr,
                    reason: "deleting a flush-dependency child that is still linked",
                });
            }
            if e.read_only && e.ro_refs > 1 {
                return Err(CacheError::WrongState {
                    addr,
                    reason: "deleting an entry other readers still hold",
                });
            }
            if flags.contains(U::FREE_FILE_SPACE) && self.ctx.is_temporary(addr) {
                return Err(CacheError::WrongState {
                    addr,
                    reason: "freeing file space of an entry in temporary space",
                });
            }
        }
        Ok(())
    }

    /// Apply a checked unprotect.
    fn release(&mut self, h: ProtectHandle, flags: UnprotectFlags) -> Result<Option<T::Icr>> {
        use UnprotectFlags as U;
        let slot = h.slot;
        let class = self.slab.entry(slot).class;
        // Read-only protections release the entry only with the last reader (MDC-032).
        let last_reader = {
            let e = self.slab.entry_mut(slot);
            if e.read_only {
                e.ro_refs -= 1;
            }
            e.ro_refs == 0
        };
        if flags.contains(U::PIN) {
            let e = self.slab.entry_mut(slot);
            e.pinned_client = true;
            e.life.pins += 1;
            self.stats.pin(class);
        }
        if flags.contains(U::UNPIN) {
            self.slab.entry_mut(slot).pinned_client = false;
            self.stats.unpin(class);
        }
        if flags.contains(U::SET_FLUSH_MARKER) {
            self.slab.entry_mut(slot).flush_marker = true;
        }
        if !last_reader {
            return Ok(None);
        }
        let (dirtied, clear_on_unprotect, was_dirty, size) = {
            let e = self.slab.entry_mut(slot);
            let d = e.dirtied || flags.contains(U::DIRTIED);
            let c = e.clear_on_unprotect;
            e.dirtied = false;
            e.clear_on_unprotect = false;
            e.read_only = false;
            (d, c, e.dirty, e.size)
        };
        if dirtied {
            if !was_dirty {
                self.stats
                    .parallel_dirty_created(crate::stats::DirtySource::Unprotect, size);
            }
            self.set_dirty(slot, true);
        }
        // Back to the pinned list or the LRU head (MDC-015, MDC-035).
        self.unlink(slot);
        let place = self.resting_place(slot);
        self.link(slot, place);
        if !dirtied && clear_on_unprotect && was_dirty {
            // Written by another rank at a sync point while protected here (MDC-056).
            self.clear_entry(slot, false)?;
        }
        if flags.contains(U::DELETED) {
            let mut f = EntryFlushFlags::CLEAR_ONLY | EntryFlushFlags::INVALIDATE;
            if flags.contains(U::FREE_FILE_SPACE) {
                f |= EntryFlushFlags::FREE_FILE_SPACE;
            }
            if flags.contains(U::TAKE_OWNERSHIP) {
                f |= EntryFlushFlags::TAKE_OWNERSHIP;
            }
            return self.flush_single(slot, f);
        }
        Ok(None)
    }

    // ----- pin / unpin (MDC-057 .. MDC-060) -----

    /// Pin an entry that is protected and not already pinned by the client (MDC-057).
    pub fn pin_protected(&mut self, addr: u64) -> Result<()> {
        let r = self.pin_protected_inner(addr);
        self.trace_op(|_| TraceOp::Pin { addr }, r.is_ok().then_some(Outcome::Ok));
        self.after_op();
        r
    }

    fn pin_protected_inner(&mut self, addr: u64) -> Result<()> {
        let slot = self
            .peek(addr)
            .ok_or_else(|| CacheError::NotCached { addr })?;
        let e = self.slab.entry_mut(slot);
        if e.place != Place::Protected {
            return Err(CacheError::WrongState {
                addr,
                reason: "only a protected entry can be pinned",
            });
        }
        if e.pinned_client {
            return Err(CacheError::WrongState {
                addr,
                reason: "entry is already pinned by the client",
            });
        }
        e.pinned_client = true;
        e.life.pins += 1;
        let class = e.class;
        self.stats.pin(class);
        Ok(())
    }

    /// Remove the client's pin (MDC-058). An unprotected entry that no dependency pins goes to the LRU
    /// head.
    pub fn unpin(&mut self, addr: u64) -> Result<()> {
        let r = self.unpin_inner(addr);
        self.trace_op(
            |_| TraceOp::Unpin { addr },
            r.is_ok().then_some(Outcome::Ok),
        );
        self.after_op();
        r
    }

    fn unpin_inner(&mut self, addr: u64) -> Result<()> {
        let slot = self
            .peek(addr)
            .ok_or_else(|| CacheError::NotCached { addr })?;
        let e = self.slab.entry_mut(slot);
        if !e.pinned_client {
            return Err(CacheError::WrongState {
                addr,
                reason: "entry is not pinned by the client",
            });
        }
        e.pinned_client = false;
        let class = e.class;
        self.stats.unpin(class);
        self.replace_if_pin_changed(slot);
        Ok(())
    }

    // ----- mark dirty / clean (MDC-061, MDC-062) -----

    /// Report a change to a protected or pinned entry (MDC-061).
    pub fn mark_dirty(&mut self, addr: u64) -> Result<()> {
        let r = self.mark_dirty_inner(addr);
        self.trace_op(
            |_| TraceOp::MarkDirty { addr },
            r.is_ok().then_some(Outcome::Ok),
        );
        self.after_op();
        r
    }

    fn mark_dirty_inner(&mut self, addr: u64) -> Result<()> {
        let slot = self
            .peek(addr)
            .ok_or_else(|| CacheError::NotCached { addr })?;
        let e = self.slab.entry_mut(slot);
        if e.busy() {
            return Err(CacheError::EntryBusy { addr });
        }
        match e.place {
            Place::Protected if e.read_only => Err(CacheError::WrongState {
                addr,
                reason: "mark-dirty of a read-only protected entry",
            }),
            Place::Protected => {
                e.dirtied = true;
                Ok(())
            }
            Place::Pinned => {
                let (was_dirty, size, class) = (e.dirty, e.size, e.class);
                if !was_dirty {
                    self.stats
                        .parallel_dirty_created(crate::stats::DirtySource::MarkDirty, size);
                }
                self.set_dirty(slot, true);
                self.stats.dirty_pin(class);
                Ok(())
            }
            Place::Lru => Err(CacheError::WrongState {
                addr,
                reason: "mark-dirty needs a pinned or protected entry",
            }),
        }
    }

    /// Mark a dirty, unprotected entry clean without writing it (MDC-062). Clean entries are left as
    /// they are.
    pub fn mark_clean(&mut self, addr: u64) -> Result<()> {
        let r = self.mark_clean_inner(addr);
        self.trace_op(
            |_| TraceOp::MarkClean { addr },
            r.is_ok().then_some(Outcome::Ok),
        );
        self.after_op();
        r
    }

    fn mark_clean_inner(&mut self, addr: u64) -> Result<()> {
        let slot = self
            .peek(addr)
            .ok_or_else(|| CacheError::NotCached { addr })?;
        let e = self.slab.entry(slot);
        if e.busy() {
            return Err(CacheError::EntryBusy { addr });
        }
        if e.place == Place::Protected {
            return Err(CacheError::WrongState {
                addr,
                reason: "a protected entry is marked clean at unprotect",
            });
        }
        if e.dirty {
            self.clear_entry(slot, false)?;
        }
        Ok(())
    }

    /// Mark a dirty entry clean without writing: clear callback, totals, stats (MDC-062, MDC-073).
    pub(crate) fn clear_entry(&mut self, slot: u32, about_to_destroy: bool) -> Result<()> {
        let (class, addr, pinned) = {
            let e = self.slab.entry(slot);
            (e.class, e.addr, e.is_pinned())
        };
        let r = self.with_icr(slot, |_, cls, icr| cls.clear(icr, about_to_destroy))?;
        r.map_err(self.client_err(class, Callback::Clear, addr))?;
        self.set_dirty(slot, false);
        self.slab.entry_mut(slot).life.clears += 1;
        self.stats.clear(class, pinned);
        Ok(())
    }

    // ----- resize (MDC-063) -----

    /// Change the size of a pinned or protected entry. The entry becomes dirty; nothing is evicted now.
    pub fn resize(&mut self, addr: u64, new_size: usize) -> Result<()> {
        let r = self.resize_inner(addr, new_size);
        self.trace_op(
            |_| TraceOp::Resize { addr, new_size },
            r.is_ok().then_some(Outcome::Ok),
        );
        self.after_op();
        r
    }

    fn resize_inner(&mut self, addr: u64, new_size: usize) -> Result<()> {
        let slot = self
            .peek(addr)
            .ok_or_else(|| CacheError::NotCached { addr })?;
        let e = self.slab.entry(slot);
        if new_size == 0 {
            return Err(CacheError::InvalidSize { addr, size: 0 });
        }
        if e.busy() {
            return Err(CacheError::EntryBusy { addr });
        }
        if !(e.place == Place::Protected || e.place == Place::Pinned) {
            return Err(CacheError::WrongState {
                addr,
                reason: "resize needs a pinned or protected entry",
            });
        }
        if e.place == Place::Protected && e.read_only {
            return Err(CacheError::WrongState {
                addr,
                reason: "resize of a read-only protected entry",
            });
        }
        let old = e.size;
        if new_size > old {
            self.flash_check(new_size - old);
        }
        self.change_size(slot, new_size);
        self.set_dirty(slot, true);
        Ok(())
    }

    // ----- move (MDC-064) -----

    /// Give a cached entry a new address. Returns `Ok(false)` if `old_addr` is not cached.
    pub fn move_entry(&mut self, class: u8, old_addr: u64, new_addr: u64) -> Result<bool> {
        let r = self.move_inner(class, old_addr, new_addr);
        self.trace_op(
            |_| TraceOp::Move {
                old_addr,
                new_addr,
                class: Some(class),
            },
            r.as_ref()
                .ok()
                .map(|&moved| if moved { Outcome::Ok } else { Outcome::Absent }),
        );
        self.after_op();
        r
    }

    fn move_inner(&mut self, class: u8, old_addr: u64, new_addr: u64) -> Result<bool> {
        let Some(slot) = self.peek(old_addr) else {
            return Ok(false);
        };
        let e = self.slab.entry(slot);
        if e.class != class {
            return Err(CacheError::ClassMismatch {
                addr: old_addr,
                cached: self.class_name(e.class),
                requested: self.class_name(class),
            });
        }
        if e.busy() {
            return Err(CacheError::EntryBusy { addr: old_addr });
        }
        if e.place == Place::Protected && e.read_only {
            return Err(CacheError::WrongState {
                addr: old_addr,
                reason: "moving a read-only protected entry",
            });
        }
        if new_addr == old_addr {
            return Ok(true);
        }
        if new_addr == UNDEFINED_ADDR {
            return Err(CacheError::InvalidArgument {
                what: "new_addr",
                reason: "undefined address",
            });
        }
        if self.peek(new_addr).is_some() {
            return Err(CacheError::AddressInUse { addr: new_addr });
        }
        let (was_dirty, size) = (e.dirty, e.size);
        self.rekey(slot, new_addr);
        if !was_dirty {
            self.stats
                .parallel_dirty_created(crate::stats::DirtySource::Move, size);
        }
        self.set_dirty(slot, true);
        self.stats.moved(class);
        Ok(true)
    }

    // ----- expunge (MDC-065) -----

    /// Remove an entry without writing it. Not cached: nothing happens.
    pub fn expunge(&mut self, class: u8, addr: u64, flags: ExpungeFlags) -> Result<()> {
        let r = self.expunge_inner(class, addr, flags);
        self.trace_op(
            |_| TraceOp::Expunge {
                addr,
                class: Some(class),
                flags,
            },
            r.is_ok().then_some(Outcome::Ok),
        );
        self.after_op();
        r
    }

    fn expunge_inner(&mut self, class: u8, addr: u64, flags: ExpungeFlags) -> Result<()> {
        let Some(slot) = self.peek(addr) else {
            return Ok(());
        };
        let e = self.slab.entry(slot);
        if e.class != class {
            return Err(CacheError::ClassMismatch {
                addr,
                cached: self.class_name(e.class),
                requested: self.class_name(class),
            });
        }
        if e.busy() {
            return Err(CacheError::EntryBusy { addr });
        }
        if e.place == Place::Protected {
            return Err(CacheError::WrongState {
                addr,
                reason: "expunge of a protected entry",
            });
        }
        if e.is_pinned() {
            return Err(CacheError::WrongState {
                addr,
                reason: "expunge of a pinned entry",
            });
        }
        let mut f = EntryFlushFlags::CLEAR_ONLY | EntryFlushFlags::INVALIDATE;
        if flags.contains(ExpungeFlags::FREE_FILE_SPACE) {
            if self.ctx.is_temporary(addr) {
                return Err(CacheError::WrongState {
                    addr,
                    reason: "freeing file space of an entry in temporary space",
                });
            }
            f |= EntryFlushFlags::FREE_FILE_SPACE;
        }
        self.flush_single(slot, f)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use h5_io::MemoryStorage;

    use crate::replay::{SyntheticTypes, synthetic_classes};
    use crate::{CacheBuilder, CacheError, ExpungeFlags, InsertFlags, MetadataCache, ProtectFlags};
    use crate::{ProtectHandle, UnboundedFile, UnprotectFlags};

    fn cache() -> MetadataCache<SyntheticTypes> {
        CacheBuilder::new(
            Arc::new(MemoryStorage::new()),
            synthetic_classes(1),
            UnboundedFile,
        )
        .build()
        .unwrap()
    }

    /// MDC-012, E-33: a handle whose slot was freed and reused by a newer entry at the same address
    /// is rejected by the generation check and never aliases the new entry. Handles cannot outlive
    /// their entry through the public API, so the stale handle is forged here.
    #[test]
    fn mdc_012_reused_slot_generation_is_rejected() {
        let mut c = cache();
        c.insert(0, 0x100, vec![1; 64], InsertFlags::NONE).unwrap();
        let h = c.protect(0, 0x100, &64, ProtectFlags::READ_ONLY).unwrap();
        let stale = ProtectHandle {
            cache: h.cache,
            slot: h.slot,
            generation: h.generation,
            addr: h.addr,
            read_only: true,
        };
        c.unprotect(h, UnprotectFlags::NONE).unwrap();
        c.expunge(0, 0x100, ExpungeFlags::NONE).unwrap();
        c.insert(0, 0x100, vec![2; 64], InsertFlags::NONE).unwrap();
        let fresh = c.protect(0, 0x100, &64, ProtectFlags::READ_ONLY).unwrap();
        assert_eq!((fresh.slot, fresh.addr), (stale.slot, stale.addr));
        assert_ne!(fresh.generation, stale.generation);
        assert!(matches!(c.icr(&stale), Err(CacheError::StaleHandle)));
        let err = c.unprotect(stale, UnprotectFlags::NONE).unwrap_err();
        assert!(matches!(err.error, CacheError::StaleHandle));
        assert_eq!(
            c.status(0x100).unwrap().ro_refs,
            1,
            "the new entry is untouched"
        );
        assert_eq!(c.icr(&fresh).unwrap()[0], 2);
        c.unprotect(fresh, UnprotectFlags::NONE).unwrap();
    }

    /// MDC-047: a rejected unprotect changes nothing and hands the protection back, which then
    /// releases normally.
    #[test]
    fn mdc_047_rejected_unprotect_returns_the_handle() {
        let mut c = cache();
        c.insert(0, 0x100, vec![1; 64], InsertFlags::NONE).unwrap();
        let h = c.protect(0, 0x100, &64, ProtectFlags::READ_ONLY).unwrap();
        let err = c.unprotect(h, UnprotectFlags::DIRTIED).unwrap_err();
        assert!(matches!(err.error, CacheError::WrongState { .. }));
        let h = err.handle.expect("rejected before any change");
        assert!(c.status(0x100).unwrap().protected);
        c.unprotect(h, UnprotectFlags::NONE).unwrap();
        assert!(!c.status(0x100).unwrap().protected);
        c.close().unwrap();
    }
}
