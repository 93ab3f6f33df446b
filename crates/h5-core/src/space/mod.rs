//! The file-space allocator: hands out and takes back address ranges of a file and tracks the
//! end of allocation (EOA). Pure logic, no I/O: the write path asks it where to put a structure
//! and tells it what it no longer uses; the EOA it reports is what the superblock records.
//!
//! It follows libhdf5's file-space management (`H5MF*.c`, `H5FS*.c`) so that files written
//! here lay out and reuse space as libhdf5's do, under the four strategies of
//! `H5Pset_file_space_strategy`:
//!
//! | strategy | free-space tracking | aggregators | paged |
//! |---|---|---|---|
//! | [`SpaceStrategy::FsmAggr`] (default) | yes | yes | no |
//! | [`SpaceStrategy::Page`] | yes | no | yes |
//! | [`SpaceStrategy::Aggr`] | no | yes | no |
//! | [`SpaceStrategy::None`] | no | no | no |
//!
//! * Every [`SpaceKind`] maps to one of two free lists, metadata or raw data (libhdf5's default
//!   "dichotomy" map: raw data and global heaps share the raw list); the paged strategy adds a
//!   third list of large sections (whole and partial pages) shared by both.
//! * Free space that touches the EOA is given back to it; free space that is not tracked (under
//!   the threshold, or a strategy without tracking) is lost to the file ("leaked", counted in
//!   [`SpaceStats::leaked_bytes`]) exactly as libhdf5 loses it.
//! * Aggregator rules: `aggregator.rs`; section merging and shrinking: `free.rs`; paged
//!   allocation and its invariants: `page.rs`; growing in place: `extend.rs`.
//!
//! Decisions where libhdf5's behaviour is not copied or not a rule:
//! * file alignment (`H5Pset_alignment`) and the paged "page end metadata threshold" are not
//!   supported; both stay at libhdf5's defaults (no alignment, threshold 0);
//! * a free must name a whole block as allocated or extended (libhdf5 accepts parts; in paged
//!   mode a part of a large block would be taken for a small block);
//! * caller blocks are checked: a free or extension of a range past the EOA or overlapping free
//!   space is refused (libhdf5 asserts or corrupts its lists);
//! * the 10 % rule of extension into an aggregator is integer (`rest / 10`; libhdf5 multiplies
//!   by a `float`, which differs only for rests over 2^24 bytes);
//! * paged mode: the tail of a large block's last page is a large free section, as in libhdf5;
//!   a new paged file's first page keeps the rest after the superblock as a metadata section.
//! * the EOA may not exceed `2^(8·sizeof_addr) − 2` (all-ones is the undefined address).
//!
//! ```
//! use h5_core::space::{SpaceConfig, SpaceKind, SpaceManager};
//!
//! let mut space = SpaceManager::new(SpaceConfig::default(), 96)?;
//! assert_eq!(space.allocate(SpaceKind::ObjectHeader, 100)?, 96);
//! assert_eq!(space.allocate(SpaceKind::BTree, 100)?, 196);
//! assert_eq!(space.eoa(), 96 + 2048); // one metadata block
//! space.free(SpaceKind::BTree, 196, 100)?;
//! assert_eq!(space.allocate(SpaceKind::LocalHeap, 100)?, 196);
//! let report = space.close()?;
//! assert_eq!(report.eoa, 296);
//! # Ok::<(), h5_core::space::SpaceError>(())
//! ```

mod aggregator;
mod alloc;
pub mod error;
mod extend;
mod free;
mod page;
mod persist;
mod sections;

use std::ops::{Index, IndexMut};

use aggregator::Aggregator;
pub use error::{Result, SpaceError};
pub use persist::PersistentSpace;
use sections::SectionList;

/// How the file's space is managed (libhdf5's `H5F_fspace_strategy_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SpaceStrategy {
    /// Free-space managers plus the metadata and small-data aggregators
    /// (`H5F_FSPACE_STRATEGY_FSM_AGGR`, libhdf5's default).
    #[default]
    FsmAggr,
    /// Paged aggregation with free-space managers (`H5F_FSPACE_STRATEGY_PAGE`).
    Page,
    /// Aggregators only: freed space is reused only when it touches the EOA or an aggregator
    /// (`H5F_FSPACE_STRATEGY_AGGR`).
    Aggr,
    /// Everything at the EOA; freed space is reused only when it touches the EOA
    /// (`H5F_FSPACE_STRATEGY_NONE`).
    None,
}

impl SpaceStrategy {
    /// Whether freed space is tracked in free lists.
    pub fn tracks_free_space(self) -> bool {
        matches!(self, Self::FsmAggr | Self::Page)
    }

    /// The on-disk code of the file space info message (0 FSM_AGGR, 1 PAGE, 2 AGGR, 3 NONE).
    pub fn code(self) -> u8 {
        match self {
            Self::FsmAggr => 0,
            Self::Page => 1,
            Self::Aggr => 2,
            Self::None => 3,
        }
    }
}

/// Settings of the allocator (libhdf5's file-creation `file_space_strategy` and
/// `file_space_page_size`, and file-access `meta_block_size` and `small_data_block_size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpaceConfig {
    /// The strategy.
    pub strategy: SpaceStrategy,
    /// Whether free space is meant to be persisted at close (recorded for the caller; the
    /// allocator reports the free sections at close either way).
    pub persist: bool,
    /// Freed blocks smaller than this are not tracked (lost to the file unless they touch the
    /// EOA, an aggregator, or a tracked section). Default 1: everything is tracked.
    pub threshold: u64,
    /// Page size of the paged strategy (512 B to 1 GiB; default 4096).
    pub page_size: u64,
    /// Block size of the metadata aggregator (default 2048; 0 disables it).
    pub meta_block_size: u64,
    /// Block size of the small raw-data aggregator (default 2048; 0 disables it).
    pub small_data_block_size: u64,
    /// Bytes of a file address ("size of offsets" in the superblock: 2, 4, 8, 16 or 32); bounds
    /// the EOA.
    pub sizeof_addr: u8,
}

impl Default for SpaceConfig {
    fn default() -> Self {
        Self {
            strategy: SpaceStrategy::FsmAggr,
            persist: false,
            threshold: 1,
            page_size: 4096,
            meta_block_size: 2048,
            small_data_block_size: 2048,
            sizeof_addr: 8,
        }
    }
}

/// Smallest page size libhdf5 accepts.
pub const MIN_PAGE_SIZE: u64 = 512;
/// Largest page size libhdf5 accepts.
pub const MAX_PAGE_SIZE: u64 = 1 << 30;

/// What a block of file space holds (libhdf5's `H5FD_mem_t`). Other structures use one of
/// these, as in libhdf5: see the associated constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpaceKind {
    /// Unspecified (metadata).
    Default,
    /// The superblock and its extension.
    Superblock,
    /// B-tree nodes (v1 and v2).
    BTree,
    /// Raw data: contiguous storage, chunks.
    RawData,
    /// Global heap collections (treated as raw data).
    GlobalHeap,
    /// Local heaps.
    LocalHeap,
    /// Object headers.
    ObjectHeader,
}

impl SpaceKind {
    /// Every kind.
    pub const ALL: [Self; 7] = [
        Self::Default,
        Self::Superblock,
        Self::BTree,
        Self::RawData,
        Self::GlobalHeap,
        Self::LocalHeap,
        Self::ObjectHeader,
    ];
    /// Free-space manager headers (libhdf5: `H5FD_MEM_FSPACE_HDR` = object header).
    pub const FREE_SPACE_HEADER: Self = Self::ObjectHeader;
    /// Free-space section info (libhdf5: `H5FD_MEM_FSPACE_SINFO` = local heap).
    pub const FREE_SPACE_SECTIONS: Self = Self::LocalHeap;
    /// Fractal heap headers (libhdf5: object header).
    pub const FRACTAL_HEAP_HEADER: Self = Self::ObjectHeader;
    /// Fractal heap direct blocks (libhdf5: local heap).
    pub const FRACTAL_HEAP_DIRECT_BLOCK: Self = Self::LocalHeap;
    /// Fractal heap indirect blocks (libhdf5: object header).
    pub const FRACTAL_HEAP_INDIRECT_BLOCK: Self = Self::ObjectHeader;
    /// Fractal heap "huge" objects (libhdf5: raw data).
    pub const FRACTAL_HEAP_HUGE_OBJECT: Self = Self::RawData;
    /// Fixed/extensible array headers and blocks (libhdf5: object header).
    pub const CHUNK_INDEX_ARRAY: Self = Self::ObjectHeader;

    /// Whether the kind lives in the raw-data free list (raw data and global heaps).
    pub fn is_raw(self) -> bool {
        matches!(self, Self::RawData | Self::GlobalHeap)
    }

    /// libhdf5's `H5FD_mem_t` code (0 default … 6 object header).
    pub fn code(self) -> u8 {
        match self {
            Self::Default => 0,
            Self::Superblock => 1,
            Self::BTree => 2,
            Self::RawData => 3,
            Self::GlobalHeap => 4,
            Self::LocalHeap => 5,
            Self::ObjectHeader => 6,
        }
    }
}

/// A free list (one libhdf5 free-space manager).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FreeList {
    /// Metadata sections (paged strategy: small metadata sections, inside metadata pages).
    Metadata,
    /// Raw-data and global-heap sections (paged: small raw sections, inside raw pages).
    RawData,
    /// Paged strategy only: large sections (free pages, page tails), used by either kind.
    Large,
}

impl FreeList {
    /// Every list.
    pub const ALL: [Self; 3] = [Self::Metadata, Self::RawData, Self::Large];
}

/// The three free lists of a manager, one per [`FreeList`].
#[derive(Clone, Debug, Default)]
struct Lists {
    metadata: SectionList,
    raw_data: SectionList,
    large: SectionList,
}

impl Index<FreeList> for Lists {
    type Output = SectionList;
    fn index(&self, list: FreeList) -> &SectionList {
        match list {
            FreeList::Metadata => &self.metadata,
            FreeList::RawData => &self.raw_data,
            FreeList::Large => &self.large,
        }
    }
}

impl IndexMut<FreeList> for Lists {
    fn index_mut(&mut self, list: FreeList) -> &mut SectionList {
        match list {
            FreeList::Metadata => &mut self.metadata,
            FreeList::RawData => &mut self.raw_data,
            FreeList::Large => &mut self.large,
        }
    }
}

/// One free-space section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FreeSection {
    /// The list holding it.
    pub list: FreeList,
    /// First byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
}

/// The unallocated rest of an aggregator's block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AggregatorState {
    /// First unallocated byte (0: none).
    pub addr: u64,
    /// Unallocated bytes.
    pub size: u64,
}

/// Counters and current state, for tests and `h5 stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpaceStats {
    /// End of allocation.
    pub eoa: u64,
    /// Bytes in free sections, per list (metadata, raw data, large).
    pub free_bytes: [u64; 3],
    /// Number of free sections.
    pub sections: usize,
    /// The metadata aggregator's rest.
    pub meta_aggregator: AggregatorState,
    /// The small-data aggregator's rest.
    pub small_data_aggregator: AggregatorState,
    /// Successful allocations.
    pub allocations: u64,
    /// Successful frees.
    pub frees: u64,
    /// Successful in-place extensions.
    pub extensions: u64,
    /// Bytes freed but not tracked and not reclaimed: lost to the file.
    pub leaked_bytes: u64,
}

/// What [`SpaceManager::close`] leaves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CloseReport {
    /// The final end of allocation.
    pub eoa: u64,
    /// Free sections that remain (to persist, or lost to the file if not persisted).
    pub sections: Vec<FreeSection>,
    /// Bytes lost over the manager's life (freed, never reclaimed).
    pub leaked_bytes: u64,
}

/// The allocator of one file. See the [module documentation](self).
///
/// Invariants (checked in debug builds after every public call): aggregator rests, free
/// sections and the live blocks the caller holds never overlap and all lie below the EOA;
/// sections of one list that could merge are merged; in paged mode the EOA is a multiple of the
/// page size and no small section crosses a page boundary.
#[derive(Clone, Debug)]
pub struct SpaceManager {
    config: SpaceConfig,
    /// Largest EOA the address size can record (all-ones is the undefined address).
    max_eoa: u64,
    eoa: u64,
    lists: Lists,
    meta_aggr: Aggregator,
    sdata_aggr: Aggregator,
    allocations: u64,
    frees: u64,
    extensions: u64,
    leaked: u64,
}

impl SpaceManager {
    /// A manager for a file whose space ends at `eoa` (a new file: the end of the superblock).
    ///
    /// In paged mode the EOA is taken up to the next page boundary and the rest of the first
    /// page becomes a small metadata section, as libhdf5 allocates the superblock from a
    /// metadata page.
    pub fn new(config: SpaceConfig, eoa: u64) -> Result<Self> {
        let max_eoa = match config.sizeof_addr {
            // 2^(8·sizeof_addr) − 2: all-ones is the undefined address.
            2 => 0xFFFE,
            4 => 0xFFFF_FFFE,
            8 | 16 | 32 => u64::MAX - 1,
            _ => {
                return Err(SpaceError::InvalidConfig(
                    "sizeof_addr must be 2, 4, 8, 16 or 32",
                ));
            }
        };
        if config.strategy == SpaceStrategy::Page
            && !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&config.page_size)
        {
            return Err(SpaceError::InvalidConfig(
                "page_size must be 512 B to 1 GiB",
            ));
        }
        if eoa > max_eoa {
            return Err(SpaceError::EoaTooLarge { eoa, max_eoa });
        }
        let mut space = Self {
            config,
            max_eoa,
            eoa,
            lists: Default::default(),
            meta_aggr: Aggregator::new(config.meta_block_size),
            sdata_aggr: Aggregator::new(config.small_data_block_size),
            allocations: 0,
            frees: 0,
            extensions: 0,
            leaked: 0,
        };
        if config.strategy == SpaceStrategy::Page {
            let rest = sections::misalign(eoa, config.page_size);
            if rest > 0 {
                space.grow_eoa(rest)?;
                space.lists[FreeList::Metadata].started = true;
                space.lists[FreeList::Metadata].insert(eoa, rest);
            }
        }
        Ok(space)
    }

    /// Allocates `len` bytes for `kind`, returning the address.
    pub fn allocate(&mut self, kind: SpaceKind, len: u64) -> Result<u64> {
        if len == 0 {
            return Err(SpaceError::ZeroLength);
        }
        let addr = self.alloc_inner(kind, len)?;
        self.allocations = self.allocations.saturating_add(1);
        self.debug_check();
        Ok(addr)
    }

    /// Gives back the block `addr..addr + len` of `kind` (a whole block as allocated, or a
    /// whole block as extended). Refuses ranges past the EOA or overlapping free space, and in
    /// paged mode misaligned large blocks and small blocks crossing a page.
    pub fn free(&mut self, kind: SpaceKind, addr: u64, len: u64) -> Result<()> {
        self.check_block(addr, len)?;
        self.xfree(kind, addr, len);
        self.frees = self.frees.saturating_add(1);
        self.debug_check();
        Ok(())
    }

    /// Grows the live block `addr..addr + old_len` of `kind` by `extra` bytes in place, when
    /// the space after it is the EOA, an aggregator's rest or a large enough free section.
    /// Returns whether it grew; on `false` nothing changed.
    pub fn try_extend(
        &mut self,
        kind: SpaceKind,
        addr: u64,
        old_len: u64,
        extra: u64,
    ) -> Result<bool> {
        if extra == 0 {
            return Err(SpaceError::ZeroLength);
        }
        self.check_block(addr, old_len)?;
        let grew = self.extend_inner(kind, addr, old_len, extra)?;
        if grew {
            self.extensions = self.extensions.saturating_add(1);
        }
        self.debug_check();
        Ok(grew)
    }

    /// The end of allocation.
    pub fn eoa(&self) -> u64 {
        self.eoa
    }

    /// The configuration.
    pub fn config(&self) -> &SpaceConfig {
        &self.config
    }

    /// The largest EOA the address size allows.
    pub fn max_eoa(&self) -> u64 {
        self.max_eoa
    }

    /// Gives the aggregators' rests back and shrinks the EOA over all free space at its end
    /// (libhdf5's close sequence). The manager stays usable.
    pub fn close(&mut self) -> Result<CloseReport> {
        let paged = self.config.strategy == SpaceStrategy::Page;
        for _ in 0..2 {
            // Twice, as libhdf5 does: giving space back can restart a manager.
            if !paged {
                self.free_aggrs();
            }
            self.shrink_eoa_fully();
        }
        self.debug_check();
        Ok(CloseReport {
            eoa: self.eoa,
            sections: self.free_sections(),
            leaked_bytes: self.leaked,
        })
    }

    /// Every free section, in address order.
    pub fn free_sections(&self) -> Vec<FreeSection> {
        let mut all: Vec<FreeSection> = FreeList::ALL
            .iter()
            .flat_map(|&list| {
                self.lists[list]
                    .iter()
                    .map(move |(addr, len)| FreeSection { list, addr, len })
            })
            .collect();
        all.sort_by_key(|s| s.addr);
        all
    }

    /// Counters and current state.
    pub fn stats(&self) -> SpaceStats {
        let state = |a: &Aggregator| AggregatorState {
            addr: a.addr,
            size: a.size,
        };
        SpaceStats {
            eoa: self.eoa,
            free_bytes: FreeList::ALL.map(|l| self.lists[l].total()),
            sections: FreeList::ALL.iter().map(|&l| self.lists[l].len()).sum(),
            meta_aggregator: state(&self.meta_aggr),
            small_data_aggregator: state(&self.sdata_aggr),
            allocations: self.allocations,
            frees: self.frees,
            extensions: self.extensions,
            leaked_bytes: self.leaked,
        }
    }

    /// The free list a block of `kind` and `len` bytes belongs to.
    pub fn list_for(&self, kind: SpaceKind, len: u64) -> FreeList {
        if self.config.strategy == SpaceStrategy::Page && len >= self.config.page_size {
            FreeList::Large
        } else if kind.is_raw() {
            FreeList::RawData
        } else {
            FreeList::Metadata
        }
    }

    #[cfg(debug_assertions)]
    fn debug_check(&self) {
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for list in FreeList::ALL {
            self.lists[list].debug_check();
            let mut prev: Option<(u64, u64)> = None;
            for s in self.lists[list].iter() {
                if let Some(p) = prev {
                    debug_assert!(!self.can_merge(list, p, s), "unmerged sections {p:?} {s:?}");
                }
                prev = Some(s);
                ranges.push(s);
            }
        }
        for ag in [&self.meta_aggr, &self.sdata_aggr] {
            if ag.size > 0 {
                ranges.push((ag.addr, ag.size));
            }
        }
        ranges.sort_unstable();
        let mut end = 0;
        for (a, l) in ranges {
            let a_end = a.checked_add(l);
            debug_assert!(
                a >= end && a_end.is_some_and(|e| e <= self.eoa),
                "free range {a:#x}+{l} overlaps or passes EOA"
            );
            end = a_end.unwrap_or(u64::MAX);
        }
        if self.config.strategy == SpaceStrategy::Page {
            debug_assert!(self.eoa.is_multiple_of(self.config.page_size));
        }
    }

    #[cfg(not(debug_assertions))]
    fn debug_check(&self) {}
}
