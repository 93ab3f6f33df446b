//! Handing out space: a fitting free section first, then the aggregators (non-paged) or pages
//! (paged), and finally the end of allocation.

use super::free::Class;
use super::{FreeList, SpaceKind, SpaceManager, SpaceStrategy};
use crate::space::error::{Result, SpaceError};

impl SpaceManager {
    /// Allocation without argument checks (libhdf5's `H5MF_alloc`).
    pub(crate) fn alloc_inner(&mut self, kind: SpaceKind, len: u64) -> Result<u64> {
        let list = self.list_for(kind, len);
        if let Some(addr) = self.take_section(list, kind, len) {
            return Ok(addr);
        }
        match self.config.strategy {
            SpaceStrategy::Page => self.alloc_pagefs(kind, len),
            _ => self.aggr_alloc(kind, len),
        }
    }

    /// Takes `len` bytes from the best-fitting section of `list`, if the list's manager is
    /// started and has one. The large list of the paged strategy only hands out page-aligned
    /// starts: the fragment before the boundary stays a section of its own.
    fn take_section(&mut self, list: FreeList, kind: SpaceKind, len: u64) -> Option<u64> {
        if !self.lists[list].started {
            return None;
        }
        let (addr, size, frag) = if list == FreeList::Large {
            self.lists[list].best_fit_aligned(len, self.config.page_size)?
        } else {
            let (a, l) = self.lists[list].best_fit(len)?;
            (a, l, 0)
        };
        self.lists[list].remove(addr);
        if frag > 0 {
            // Linked without merging, as libhdf5 splits it off.
            self.lists[list].insert(addr, frag);
        }
        // best_fit_aligned: frag <= size - len.
        #[allow(clippy::arithmetic_side_effects, reason = "frag <= size - len")]
        let (addr, size) = (addr + frag, size - frag);
        if size > len {
            #[allow(
                clippy::arithmetic_side_effects,
                reason = "len < size, inside the section"
            )]
            self.link_rest(list, kind, addr + len, size - len);
        }
        Some(addr)
    }

    /// Links the rest `addr..addr + len` of a section whose front was just taken. A small
    /// section's rest is linked as it is: it cannot merge with the section before it (the
    /// block just taken lies between them), it merges with the one after it only if the whole
    /// section did (both lie in the same page, and the list keeps no two mergeable sections
    /// apart), and small sections never shrink the container. Other classes go through
    /// [`SpaceManager::add_section`]'s merging and shrinking.
    fn link_rest(&mut self, list: FreeList, kind: SpaceKind, addr: u64, len: u64) {
        if self.class(list) == Class::Small {
            self.lists[list].insert(addr, len);
        } else {
            self.add_section(list, kind, addr, len);
        }
    }

    /// Grows the end of allocation by `len`, returning where the new space starts.
    pub(crate) fn grow_eoa(&mut self, len: u64) -> Result<u64> {
        match self.eoa.checked_add(len) {
            Some(end) if end <= self.max_eoa => {
                let start = self.eoa;
                self.eoa = end;
                Ok(start)
            }
            _ => Err(SpaceError::AddressOverflow {
                eoa: self.eoa,
                len,
                max_eoa: self.max_eoa,
            }),
        }
    }
}
