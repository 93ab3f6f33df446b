//! The block aggregators of the non-paged strategies: one for metadata, one for small raw
//! data. Each is the unallocated rest `addr..addr + size` of a block obtained at the end of
//! allocation; small requests are carved from its front.
//!
//! Rules (libhdf5's `H5MFaggr.c`):
//! * a request that fits the rest is carved from it;
//! * a request of at least a block when the rest does not fit: if the aggregator sits at the end
//!   of allocation the file grows by the request and the request takes the aggregator's place
//!   (the rest moves up, nothing is wasted); otherwise it is served at the end of allocation;
//! * a smaller request when the rest does not fit: an aggregator at the end of allocation grows
//!   by one block; otherwise a new block is taken at the end of allocation and the old rest is
//!   freed like any block (free list, or lost under the `Aggr` strategy);
//! * before taking space at the end of allocation, the *other* aggregator is given back to the
//!   file when it sits at the end of allocation and has handed out at least one block's worth;
//! * a block ending where the aggregator starts can grow into it (see [`Aggregator::try_extend`]).

use super::sections::add_below_eoa;
use super::{SpaceKind, SpaceManager, SpaceStrategy};
use crate::space::error::Result;

/// Percentage (as a divisor) of an aggregator's rest that an extension at the end of
/// allocation may take without growing the aggregator (libhdf5: 10 %).
const EXTEND_DIVISOR: u64 = 10;

/// Which aggregator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AggrId {
    /// The metadata block aggregator (`meta_block_size`).
    Meta,
    /// The small raw-data aggregator (`small_data_block_size`).
    SmallData,
}

impl AggrId {
    /// The other aggregator.
    pub(crate) fn other(self) -> Self {
        match self {
            Self::Meta => Self::SmallData,
            Self::SmallData => Self::Meta,
        }
    }

    /// The kind its rest is freed as.
    pub(crate) fn kind(self) -> SpaceKind {
        match self {
            Self::Meta => SpaceKind::Default,
            Self::SmallData => SpaceKind::RawData,
        }
    }

    /// The aggregator serving a kind.
    pub(crate) fn for_kind(kind: SpaceKind) -> Self {
        if kind.is_raw() {
            Self::SmallData
        } else {
            Self::Meta
        }
    }
}

/// State of one aggregator.
///
/// Invariant: when `size > 0`, `addr..addr + size` is free space below the end of allocation
/// that no free list holds. `addr == 0` means "never started or given back" (address 0 is the
/// superblock's, never an aggregator's). With `size == 0` the address is only a marker: it may
/// even lie past the end of allocation after the file shrank, and then adjoins nothing useful.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Aggregator {
    /// First unallocated byte.
    pub(crate) addr: u64,
    /// Unallocated bytes.
    pub(crate) size: u64,
    /// Bytes the aggregator has taken from the file since it was started.
    pub(crate) tot_size: u64,
    /// Block size; 0 disables the aggregator (requests go to the end of allocation).
    pub(crate) block_size: u64,
}

impl Aggregator {
    pub(crate) fn new(block_size: u64) -> Self {
        Self {
            block_size,
            ..Self::default()
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.block_size > 0
    }

    /// End of the rest.
    pub(crate) fn end(&self) -> u64 {
        add_below_eoa(self.addr, self.size)
    }

    /// libhdf5's "can be extended at EOA": started and its rest ends at the end of allocation.
    pub(crate) fn at_eoa(&self, eoa: u64) -> bool {
        self.addr > 0 && self.end() == eoa
    }

    /// Whether a free block `addr..addr + len` touches either end of the rest.
    pub(crate) fn adjoins(&self, addr: u64, len: u64) -> bool {
        self.enabled()
            && self.addr > 0
            && (add_below_eoa(addr, len) == self.addr || self.end() == addr)
    }

    /// Carves `len` bytes (≤ `size`) from the front.
    #[allow(
        clippy::arithmetic_side_effects,
        reason = "len <= size (every caller checks it): the rest stays inside its block"
    )]
    pub(crate) fn take(&mut self, len: u64) -> u64 {
        debug_assert!(len <= self.size);
        let at = self.addr;
        self.addr += len;
        self.size -= len;
        at
    }

    /// Forgets the block, returning its rest `(addr, size)`.
    pub(crate) fn reset(&mut self) -> (u64, u64) {
        let rest = (self.addr, self.size);
        self.addr = 0;
        self.size = 0;
        self.tot_size = 0;
        rest
    }
}

impl SpaceManager {
    pub(crate) fn aggr(&self, id: AggrId) -> &Aggregator {
        match id {
            AggrId::Meta => &self.meta_aggr,
            AggrId::SmallData => &self.sdata_aggr,
        }
    }

    pub(crate) fn aggr_mut(&mut self, id: AggrId) -> &mut Aggregator {
        match id {
            AggrId::Meta => &mut self.meta_aggr,
            AggrId::SmallData => &mut self.sdata_aggr,
        }
    }

    /// Serves a request that no free list could: through the kind's aggregator, or at the end
    /// of allocation (strategy `None`, or aggregator disabled).
    pub(crate) fn aggr_alloc(&mut self, kind: SpaceKind, len: u64) -> Result<u64> {
        let id = AggrId::for_kind(kind);
        let ag = *self.aggr(id);
        if self.config.strategy == SpaceStrategy::None || !ag.enabled() {
            return self.grow_eoa(len);
        }
        if len <= ag.size {
            return Ok(self.aggr_mut(id).take(len));
        }
        let eoa = self.eoa;
        if len >= ag.block_size {
            if ag.at_eoa(eoa) {
                // The request takes the aggregator's place; the rest moves up past it.
                self.grow_eoa(len)?;
                let ag = self.aggr_mut(id);
                let at = ag.addr;
                // The rest ended at the old EOA, which just grew by len.
                ag.addr = add_below_eoa(ag.addr, len);
                ag.tot_size = ag.tot_size.saturating_add(len);
                return Ok(at);
            }
            self.release_idle(id.other(), eoa);
            return self.grow_eoa(len);
        }
        if ag.at_eoa(eoa) {
            self.grow_eoa(ag.block_size)?;
            let ag = self.aggr_mut(id);
            // The rest ended at the old EOA, which just grew by a block.
            ag.size = add_below_eoa(ag.size, ag.block_size);
            ag.tot_size = ag.tot_size.saturating_add(ag.block_size);
        } else {
            self.release_idle(id.other(), eoa);
            let block = ag.block_size;
            let new = self.grow_eoa(block)?;
            // The old rest is freed while the aggregator adjoins nothing, then the aggregator
            // moves to the new block (libhdf5 frees it before re-pointing the aggregator).
            let (old_addr, old_size) = self.aggr_mut(id).reset();
            if old_size > 0 {
                self.xfree(id.kind(), old_addr, old_size);
            }
            let ag = self.aggr_mut(id);
            ag.addr = new;
            ag.size = block;
            ag.tot_size = block;
        }
        Ok(self.aggr_mut(id).take(len))
    }

    /// Gives aggregator `id` back to the file when it sits at `eoa` and has handed out at least
    /// one block's worth (libhdf5 does this before growing the file for the other aggregator).
    fn release_idle(&mut self, id: AggrId, eoa: u64) {
        let ag = *self.aggr(id);
        if ag.size > 0
            && ag.end() == eoa
            && ag
                .tot_size
                .checked_sub(ag.size)
                .is_some_and(|taken| taken > 0 && taken >= ag.block_size)
        {
            self.eoa = ag.addr;
            self.aggr_mut(id).reset();
        }
    }

    /// Grows a block ending at `end` into the kind's aggregator when the aggregator starts there.
    pub(crate) fn aggr_try_extend(
        &mut self,
        kind: SpaceKind,
        end: u64,
        extra: u64,
    ) -> Result<bool> {
        let id = AggrId::for_kind(kind);
        let ag = *self.aggr(id);
        if !ag.enabled() || ag.addr == 0 || end != ag.addr {
            return Ok(false);
        }
        if ag.end() == self.eoa {
            if extra <= ag.size / EXTEND_DIVISOR {
                self.aggr_mut(id).take(extra);
            } else {
                // Grow the aggregator by a block (or the request) and take the request.
                let grow = extra.max(ag.block_size);
                self.grow_eoa(grow)?;
                let ag = self.aggr_mut(id);
                // The rest ended at the old EOA, which just grew by grow >= extra.
                ag.addr = add_below_eoa(ag.addr, extra);
                ag.tot_size = ag.tot_size.saturating_add(grow);
                #[allow(clippy::arithmetic_side_effects, reason = "grow >= extra (max above)")]
                let added = grow - extra;
                ag.size = add_below_eoa(ag.size, added);
            }
            Ok(true)
        } else if ag.size >= extra {
            self.aggr_mut(id).take(extra);
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Gives both aggregators' rests back (the later one in the file first, so the file can
    /// shrink over both).
    pub(crate) fn free_aggrs(&mut self) {
        let order = if self.meta_aggr.addr < self.sdata_aggr.addr {
            [AggrId::SmallData, AggrId::Meta]
        } else {
            [AggrId::Meta, AggrId::SmallData]
        };
        for id in order {
            let (addr, size) = self.aggr_mut(id).reset();
            if size > 0 {
                self.xfree(id.kind(), addr, size);
            }
        }
    }
}
