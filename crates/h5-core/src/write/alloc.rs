//! File-space allocation for a writable file: every new structure and chunk gets its address
//! here, and freed space comes back here. The work is done by the [`SpaceManager`] of
//! `crate::space` (libhdf5's strategies, aggregators and free lists); this is the write path's
//! view of it, with the two kinds of space the write path distinguishes.
//!
//! Invariant: the end of allocation bounds every live allocation; free space never overlaps live
//! space (the manager checks frees against both).
//!
//! **Delayed reuse** (crash safety, docs/design.md §6): space that the last flush's file uses is
//! not reused before the next flush has completed. A free of such *committed* space is
//! deferred ([`FileAlloc::free`]) and released by [`FileAlloc::release_deferred`] once the
//! flush that stopped referencing it is complete (VFD SWMR's rule for delayed free-space
//! release, here for every file). Space allocated since the last flush (*fresh*) is freed at
//! once: the file on disk never referenced it. So a writer killed between or during flushes
//! never leaves the last flushed state pointing at bytes that were given to something else.

use std::ops::Range;

use h5_io::RangeSet;

use crate::space::{
    CloseReport, FreeSection, PersistentSpace, SpaceConfig, SpaceError, SpaceManager, SpaceStats,
};

/// What a range of file space holds (the allocator keeps raw data and metadata apart).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SpaceKind {
    /// Metadata: headers, heaps, B-tree nodes, index blocks.
    Meta,
    /// Raw data: chunks, contiguous data, global heap collections.
    Raw,
}

impl SpaceKind {
    fn space_kind(self) -> crate::space::SpaceKind {
        match self {
            SpaceKind::Meta => crate::space::SpaceKind::Default,
            SpaceKind::Raw => crate::space::SpaceKind::RawData,
        }
    }
}

/// An allocation request the allocator cannot serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AllocError {
    /// The space manager refused the request (zero length, address space exhausted, a free of
    /// space that is not allocated).
    #[error(transparent)]
    Space(#[from] SpaceError),
}

/// The allocator of one writable file.
#[derive(Debug)]
pub struct FileAlloc {
    space: SpaceManager,
    /// Space handed out since the last commit: not referenced by the file on disk.
    fresh: RangeSet,
    /// Frees of committed space, released at the next commit, in the order they came.
    deferred: Vec<(SpaceKind, u64, u64)>,
    /// The ranges of `deferred`, to refuse a second free of the same space.
    deferred_set: RangeSet,
    /// Every free is reused at once ([`FileAlloc::reuse_at_once`]).
    at_once: bool,
    /// Every free waits and commits release nothing (legacy SWMR writing).
    hold: bool,
    /// Readers in other processes follow the file as it is written (VFD SWMR writing).
    readers_follow: bool,
}

impl FileAlloc {
    /// An allocator with libhdf5's default strategy (free lists and aggregators) whose first
    /// free byte is `eoa`, for a file whose addresses are `addr_bytes` wide.
    pub fn new(eoa: u64, addr_bytes: u8) -> Result<Self, AllocError> {
        Self::with_config(
            SpaceConfig {
                sizeof_addr: addr_bytes,
                ..SpaceConfig::default()
            },
            eoa,
        )
    }

    /// An allocator with the given settings whose first free byte is `eoa`.
    pub fn with_config(config: SpaceConfig, eoa: u64) -> Result<Self, AllocError> {
        Ok(Self::wrap(SpaceManager::new(config, eoa)?))
    }

    /// An allocator for a file whose persisted free space (sections and end of allocation)
    /// was read at open.
    pub fn from_persistent(
        config: SpaceConfig,
        persisted: &PersistentSpace,
    ) -> Result<Self, AllocError> {
        Ok(Self::wrap(SpaceManager::from_persistent(
            config, persisted,
        )?))
    }

    fn wrap(space: SpaceManager) -> Self {
        FileAlloc {
            space,
            fresh: RangeSet::new(),
            deferred: Vec::new(),
            deferred_set: RangeSet::new(),
            at_once: false,
            hold: false,
            readers_follow: false,
        }
    }

    /// The settings.
    pub fn config(&self) -> &SpaceConfig {
        self.space.config()
    }

    /// Every free section, in address order.
    pub fn free_sections(&self) -> Vec<FreeSection> {
        self.space.free_sections()
    }

    /// The end of allocated space.
    pub fn eoa(&self) -> u64 {
        self.space.eoa()
    }

    /// `len` bytes of `kind`; returns the address.
    pub fn allocate(&mut self, kind: SpaceKind, len: u64) -> Result<u64, AllocError> {
        let addr = self.space.allocate(kind.space_kind(), len)?;
        self.fresh.insert(addr..addr.saturating_add(len));
        Ok(addr)
    }

    /// Gives `[addr, addr + len)` back: at once when it was allocated since the last commit,
    /// otherwise at the next [`release_deferred`](Self::release_deferred).
    pub fn free(&mut self, kind: SpaceKind, addr: u64, len: u64) -> Result<(), AllocError> {
        let range = addr..addr.saturating_add(len);
        if !self.hold && (self.at_once || self.fresh.covers(range.clone())) {
            self.space.free(kind.space_kind(), addr, len)?;
            self.fresh.remove(range);
            return Ok(());
        }
        // Checked now (live, below the end of allocation), not when released.
        self.space.check_block(addr, len)?;
        if self.deferred_set.intersects(range.clone()) {
            // Freed already in this interval.
            return Err(AllocError::Space(SpaceError::DoubleFree {
                addr,
                len,
                free_addr: addr,
                free_len: len,
            }));
        }
        self.fresh.remove(range.clone());
        self.deferred_set.insert(range);
        self.deferred.push((kind, addr, len));
        Ok(())
    }

    /// Holds every free until this is turned off again (see the module's "held frees"); the
    /// next [`release_deferred`](Self::release_deferred) after that releases them all.
    pub fn hold_frees(&mut self, on: bool) {
        self.hold = on;
    }

    /// Whether frees are held.
    pub fn holds_frees(&self) -> bool {
        self.hold
    }

    /// Says that readers in other processes follow the file while it is written (VFD SWMR).
    pub fn set_readers_follow(&mut self, on: bool) {
        self.readers_follow = on;
    }

    /// Whether readers in other processes follow the file while it is written (SWMR writing,
    /// VFD or legacy): bytes they may be reading must not change in place where a new place
    /// costs little (an encoded chunk rewritten at its old size moves).
    pub fn readers_follow(&self) -> bool {
        self.readers_follow || self.hold
    }

    /// From now on every free is reused at once (the deferred ones too), committed space
    /// included: only for a storage that journals the committed bytes it overwrites.
    pub fn reuse_at_once(&mut self) -> Result<(), AllocError> {
        if self.hold {
            return Ok(());
        }
        self.at_once = true;
        self.deferred_set.clear();
        for (kind, addr, len) in std::mem::take(&mut self.deferred) {
            self.space.free(kind.space_kind(), addr, len)?;
        }
        Ok(())
    }

    /// Takes the frees waiting for the next commit without releasing them, for a caller that
    /// holds them longer (a VFD SWMR writer: `max_lag` ticks, through the file's own list, after
    /// which they come back through [`free`](Self::free)).
    pub fn take_deferred(&mut self) -> Vec<(SpaceKind, u64, u64)> {
        self.deferred_set.clear();
        std::mem::take(&mut self.deferred)
    }

    /// Bytes freed since the last commit and waiting for the next one.
    pub fn deferred_bytes(&self) -> u64 {
        self.deferred_set.len()
    }

    /// The ranges the current state does not use below the end of allocation: free sections and
    /// deferred frees. Meaningful after [`close`](Self::close), when no aggregator holds space.
    pub fn unused(&self) -> Vec<Range<u64>> {
        let mut set = self.deferred_set.clone();
        for s in self.space.free_sections() {
            set.insert(s.addr..s.addr.saturating_add(s.len));
        }
        set.ranges()
    }

    /// The last flush is complete: everything allocated so far is committed, and the deferred
    /// frees become free space. Returns whether any space was released.
    pub fn release_deferred(&mut self) -> Result<bool, AllocError> {
        self.fresh.clear();
        if self.hold {
            return Ok(false);
        }
        self.deferred_set.clear();
        let deferred = std::mem::take(&mut self.deferred);
        let released = !deferred.is_empty();
        for (kind, addr, len) in deferred {
            self.space.free(kind.space_kind(), addr, len)?;
        }
        Ok(released)
    }

    /// Grows the live block `addr..addr + len` of `kind` by `extra` bytes in place when the space
    /// after it is free (the end of allocation, an aggregator's rest or a free section); returns
    /// whether it grew (nothing changes otherwise).
    pub fn try_extend(
        &mut self,
        kind: SpaceKind,
        addr: u64,
        len: u64,
        extra: u64,
    ) -> Result<bool, AllocError> {
        Ok(self.space.try_extend(kind.space_kind(), addr, len, extra)?)
    }

    /// Bytes free below the end of allocation (in free lists, not in aggregators).
    pub fn free_bytes(&self) -> u64 {
        self.space.stats().free_bytes.iter().sum()
    }

    /// The manager's counters.
    pub fn stats(&self) -> SpaceStats {
        self.space.stats()
    }

    /// Gives the aggregators' unused space back and shrinks the end of allocation over free
    /// space at its end (done at every flush, before the superblock records the end of file).
    /// The allocator stays usable.
    pub fn close(&mut self) -> Result<CloseReport, AllocError> {
        Ok(self.space.close()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_frees_wait_for_the_end_of_the_hold_fresh_space_too() {
        let mut a = FileAlloc::new(96, 8).unwrap();
        let x = a.allocate(SpaceKind::Raw, 4000).unwrap();
        a.close().unwrap();
        a.release_deferred().unwrap();
        a.hold_frees(true);
        a.free(SpaceKind::Raw, x, 4000).unwrap();
        let fresh = a.allocate(SpaceKind::Raw, 100).unwrap();
        assert!(fresh >= x + 4000, "held space is not handed out again");
        a.free(SpaceKind::Raw, fresh, 100).unwrap();
        assert_eq!(a.deferred_bytes(), 4100, "fresh space waits as well");
        assert!(!a.release_deferred().unwrap(), "commits release nothing");
        assert_ne!(a.allocate(SpaceKind::Raw, 4000).unwrap(), x);
        a.hold_frees(false);
        assert!(a.release_deferred().unwrap());
        assert_eq!(a.deferred_bytes(), 0);
        assert_eq!(a.allocate(SpaceKind::Raw, 4000).unwrap(), x);
    }

    #[test]
    fn reuse_at_once_releases_deferred_and_later_frees_of_committed_space() {
        let mut a = FileAlloc::new(96, 8).unwrap();
        let x = a.allocate(SpaceKind::Raw, 4000).unwrap();
        let z = a.allocate(SpaceKind::Raw, 2000).unwrap();
        a.close().unwrap();
        a.release_deferred().unwrap();
        a.free(SpaceKind::Raw, x, 4000).unwrap();
        assert_eq!(a.deferred_bytes(), 4000, "committed space waits");
        a.reuse_at_once().unwrap();
        assert_eq!(a.deferred_bytes(), 0);
        assert_eq!(
            a.allocate(SpaceKind::Raw, 4000).unwrap(),
            x,
            "released at once"
        );
        // Committed space freed later is reused at once too.
        a.free(SpaceKind::Raw, z, 2000).unwrap();
        assert_eq!(a.deferred_bytes(), 0);
        assert_eq!(a.allocate(SpaceKind::Raw, 2000).unwrap(), z);
    }

    #[test]
    fn reuse_at_once_leaves_held_frees_held() {
        let mut a = FileAlloc::new(96, 8).unwrap();
        let x = a.allocate(SpaceKind::Raw, 4000).unwrap();
        a.close().unwrap();
        a.release_deferred().unwrap();
        a.hold_frees(true);
        a.free(SpaceKind::Raw, x, 4000).unwrap();
        a.reuse_at_once().unwrap();
        assert_eq!(a.deferred_bytes(), 4000);
        assert_ne!(a.allocate(SpaceKind::Raw, 4000).unwrap(), x);
    }

    #[test]
    fn committed_space_is_reused_only_after_the_next_commit() {
        let mut a = FileAlloc::new(96, 8).unwrap();
        let x = a.allocate(SpaceKind::Raw, 4000).unwrap();
        a.close().unwrap();
        assert!(!a.release_deferred().unwrap(), "nothing was deferred");
        // x is committed now: its free waits.
        a.free(SpaceKind::Raw, x, 4000).unwrap();
        assert_eq!(a.deferred_bytes(), 4000);
        assert!(
            a.free(SpaceKind::Raw, x + 100, 10).is_err(),
            "a second free of deferred space"
        );
        let y = a.allocate(SpaceKind::Raw, 4000).unwrap();
        assert_ne!(y, x, "not reused before the commit");
        // Fresh space is reused at once.
        a.free(SpaceKind::Raw, y, 4000).unwrap();
        assert_eq!(a.allocate(SpaceKind::Raw, 4000).unwrap(), y);
        a.close().unwrap();
        assert!(a.unused().contains(&(x..x + 4000)));
        assert!(a.release_deferred().unwrap());
        assert_eq!(a.deferred_bytes(), 0);
        assert_eq!(
            a.allocate(SpaceKind::Raw, 4000).unwrap(),
            x,
            "reused after it"
        );
    }

    #[test]
    fn grows_reuses_and_shrinks_at_close() {
        let mut a = FileAlloc::new(96, 8).unwrap();
        // Large blocks come from the end of allocation; small metadata from the aggregator.
        let x = a.allocate(SpaceKind::Meta, 4000).unwrap();
        let y = a.allocate(SpaceKind::Raw, 5000).unwrap();
        assert_eq!((x, y), (96, 4096));
        let small = a.allocate(SpaceKind::Meta, 40).unwrap();
        assert!(small >= 9096, "aggregated after the raw block");
        a.free(SpaceKind::Meta, x, 4000).unwrap();
        assert_eq!(a.free_bytes(), 4000);
        // Metadata space is reused for metadata, not for raw data.
        assert_eq!(a.allocate(SpaceKind::Meta, 3000).unwrap(), 96);
        assert!(matches!(
            a.free(SpaceKind::Meta, 3100, 4),
            Err(AllocError::Space(_))
        ));
        a.free(SpaceKind::Meta, small, 40).unwrap();
        a.free(SpaceKind::Raw, y, 5000).unwrap();
        let report = a.close().unwrap();
        assert_eq!(
            report.eoa, 3096,
            "everything after the live block given back"
        );
        assert!(matches!(
            a.allocate(SpaceKind::Raw, 0),
            Err(AllocError::Space(SpaceError::ZeroLength))
        ));
        let mut tiny = FileAlloc::new(0, 2).unwrap();
        assert!(tiny.allocate(SpaceKind::Raw, 70_000).is_err());
    }
}
