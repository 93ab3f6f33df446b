//! The paged strategy's allocation at the end of allocation (libhdf5's `H5MF__alloc_pagefs`).
//!
//! Invariants kept here (and relied upon by the page buffer and VFD SWMR):
//! * the end of allocation is always a multiple of the page size;
//! * a small request (under a page) is carved from a page that holds only small blocks of its
//!   free list (metadata or raw data): a fresh page is taken whole from the large list or the
//!   end of allocation, the request takes its front and the rest becomes a small section, and
//!   small sections never merge across a page boundary — so a small block never crosses one;
//! * a large request (a page or more) starts on a page boundary; at the end of allocation the
//!   file grows to the next page boundary past it and the tail of its last page becomes a
//!   *large* section (libhdf5 does this too). That tail can only be reached by extending the
//!   block itself or by merging when the block is freed: small requests take only whole
//!   aligned pages from the large list, large ones only page-aligned starts.

use super::sections::{add_below_eoa, misalign};
use super::{FreeList, SpaceKind, SpaceManager};
use crate::space::error::{Result, SpaceError};

impl SpaceManager {
    /// Serves a request in paged mode once no section could.
    pub(crate) fn alloc_pagefs(&mut self, kind: SpaceKind, len: u64) -> Result<u64> {
        let page = self.config.page_size;
        if len >= page {
            let end = self
                .eoa
                .checked_add(len)
                .ok_or(SpaceError::AddressOverflow {
                    eoa: self.eoa,
                    len,
                    max_eoa: self.max_eoa,
                })?;
            let tail = misalign(end, page);
            let grow = len.checked_add(tail).ok_or(SpaceError::AddressOverflow {
                eoa: self.eoa,
                len,
                max_eoa: self.max_eoa,
            })?;
            let addr = self.grow_eoa(grow)?;
            if tail > 0 {
                self.add_section(FreeList::Large, kind, add_below_eoa(addr, len), tail);
            }
            Ok(addr)
        } else {
            let start = self.alloc_inner(kind, page)?;
            let list = self.list_for(kind, len);
            #[allow(
                clippy::arithmetic_side_effects,
                reason = "len < page, inside the new page"
            )]
            self.add_section(list, kind, start + len, page - len);
            Ok(start)
        }
    }
}
