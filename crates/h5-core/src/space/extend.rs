//! Growing a block in place (libhdf5's `H5MF_try_extend`), and the checks every caller-supplied
//! block goes through.
//!
//! A block grows, in this order of attempts: at the end of allocation when it ends there; into
//! the aggregator it adjoins (non-paged strategies with aggregators); into a free section that
//! starts where it ends and holds enough (strategies with free-space tracking). In paged mode a
//! small block never grows across its page boundary, and a large block growing at the end of
//! allocation takes the file to the next page boundary, the tail becoming a large section.

use super::sections::{add_below_eoa, in_one_page, misalign};
use super::{FreeList, SpaceKind, SpaceManager, SpaceStrategy};
use crate::space::error::{Result, SpaceError};

impl SpaceManager {
    /// Rejects a block that cannot be a live allocation: empty, past the end of allocation,
    /// overlapping free space, or (paged) breaking the page rules.
    pub(crate) fn check_block(&self, addr: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Err(SpaceError::ZeroLength);
        }
        let past_eoa = SpaceError::PastEoa {
            addr,
            len,
            eoa: self.eoa,
        };
        let end = addr.checked_add(len).ok_or(past_eoa.clone())?;
        if end > self.eoa {
            return Err(past_eoa);
        }
        for list in FreeList::ALL {
            if let Some((a, l)) = self.lists[list].overlapping(addr, end) {
                return Err(SpaceError::DoubleFree {
                    addr,
                    len,
                    free_addr: a,
                    free_len: l,
                });
            }
        }
        for ag in [&self.meta_aggr, &self.sdata_aggr] {
            if ag.size > 0 && ag.addr < end && addr < ag.end() {
                return Err(SpaceError::DoubleFree {
                    addr,
                    len,
                    free_addr: ag.addr,
                    free_len: ag.size,
                });
            }
        }
        if self.config.strategy == SpaceStrategy::Page {
            let page = self.config.page_size;
            if len >= page && !addr.is_multiple_of(page) {
                return Err(SpaceError::MisalignedLarge {
                    addr,
                    len,
                    page_size: page,
                });
            }
            if len < page && !in_one_page(addr, end, page) {
                return Err(SpaceError::CrossesPage {
                    addr,
                    len,
                    page_size: page,
                });
            }
        }
        Ok(())
    }

    /// Growth of a checked block; see [`SpaceManager::try_extend`].
    pub(crate) fn extend_inner(
        &mut self,
        kind: SpaceKind,
        addr: u64,
        len: u64,
        extra: u64,
    ) -> Result<bool> {
        let end = add_below_eoa(addr, len);
        let overflow = SpaceError::AddressOverflow {
            eoa: self.eoa,
            len: extra,
            max_eoa: self.max_eoa,
        };
        let new_end = end.checked_add(extra).ok_or(overflow.clone())?;
        if new_end > self.max_eoa {
            return Err(overflow);
        }
        let strategy = self.config.strategy;
        let page = self.config.page_size;
        let mut tail = 0;
        if strategy == SpaceStrategy::Page {
            if len < page {
                if !in_one_page(addr, new_end, page) {
                    return Ok(false);
                }
            } else {
                // Only used when the block ends at the (page-aligned) end of allocation.
                tail = misalign(new_end, page);
            }
        }
        if end == self.eoa {
            // new_end + tail is the next page boundary (paged) or new_end: at most max_eoa
            // rounded up to a page, checked again by grow_eoa.
            let grow = extra.checked_add(tail).ok_or(overflow)?;
            self.grow_eoa(grow)?;
            if tail > 0 {
                self.add_section(FreeList::Large, kind, new_end, tail);
            }
            return Ok(true);
        }
        if matches!(strategy, SpaceStrategy::FsmAggr | SpaceStrategy::Aggr)
            && self.aggr_try_extend(kind, end, extra)?
        {
            return Ok(true);
        }
        if strategy.tracks_free_space() {
            let list = self.list_for(kind, len);
            if let Some(size) = self.lists[list].at(end)
                && size >= extra
            {
                // The rest is linked back without merging, as libhdf5 does.
                self.lists[list].remove(end);
                if size > extra {
                    #[allow(
                        clippy::arithmetic_side_effects,
                        reason = "size > extra (just checked)"
                    )]
                    self.lists[list].insert(new_end, size - extra);
                }
                return Ok(true);
            }
        }
        Ok(false)
    }
}
