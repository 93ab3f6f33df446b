//! Hooks for the parallel sync-point protocol (spec §3.19, designed for now, driven later).
//!
//! At a sync point every rank marks the entries another rank wrote as clean without writing them.
//! [`MetadataCache::apply_clean_list`] does that: entries that are protected at the time are cleared
//! at unprotect instead (MDC-056). It also closes the dirty-bytes accounting period (MDC-136).

use crate::cache::{MetadataCache, Place};
use crate::class::CacheTypes;
use crate::error::{CacheError, Result};
use crate::stats::DirtyBytesCreated;

impl<T: CacheTypes> MetadataCache<T> {
    /// Mark every listed address clean without writing (a clear-only flush each). Addresses that are
    /// not dirty here are an error: coherency has been lost (E-43).
    pub fn apply_clean_list(&mut self, addrs: &[u64]) -> Result<()> {
        for &addr in addrs {
            let slot = self
                .peek(addr)
                .ok_or_else(|| CacheError::NotCached { addr })?;
            let e = self.slab.entry(slot);
            if !e.dirty {
                return Err(CacheError::WrongState {
                    addr,
                    reason: "clean list names an entry that is not dirty on this rank",
                });
            }
            if e.place == Place::Protected {
                self.slab.entry_mut(slot).clear_on_unprotect = true;
            } else {
                self.clear_entry(slot, false)?;
            }
        }
        let broadcasts = self.stats.dirty_created.broadcasts + 1;
        self.stats.dirty_created = DirtyBytesCreated {
            broadcasts,
            ..DirtyBytesCreated::default()
        };
        self.after_op();
        Ok(())
    }

    /// Dirty bytes created since the last sync point (MDC-136, MDC-139).
    pub fn dirty_bytes_created(&self) -> DirtyBytesCreated {
        self.stats.dirty_created
    }
}
