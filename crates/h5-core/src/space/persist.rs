//! Free space across file closes: the section lists a persistent free-space manager stores
//! (libhdf5 writes one `FSHD`/`FSSE` pair per non-empty list when `persist` is set) and the
//! manager rebuilt from them at open.
//!
//! Sections are taken back as stored, as libhdf5 deserializes them, except that adjacent
//! sections that would merge are merged (a well-formed file never holds such pairs). Nothing
//! is shrunk at load: [`SpaceManager::close`] gives back what ends at the EOA.

use super::sections::in_one_page;
use super::{FreeList, FreeSection, SpaceConfig, SpaceManager, SpaceStrategy};
use crate::space::error::{Result, SpaceError};

/// The free space of a file as persisted: the EOA and every free section with its list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PersistentSpace {
    /// End of allocation the sections belong to.
    pub eoa: u64,
    /// The sections, in address order.
    pub sections: Vec<FreeSection>,
}

impl SpaceManager {
    /// The free space to persist. Call [`SpaceManager::close`] first: aggregator rests are not
    /// sections and are not included.
    pub fn to_persistent(&self) -> PersistentSpace {
        PersistentSpace {
            eoa: self.eoa,
            sections: self.free_sections(),
        }
    }

    /// A manager for a file opened with persisted free space.
    pub fn from_persistent(config: SpaceConfig, persisted: &PersistentSpace) -> Result<Self> {
        let paged = config.strategy == SpaceStrategy::Page;
        if paged && !persisted.eoa.is_multiple_of(config.page_size) {
            return Err(SpaceError::InvalidConfig(
                "paged file with an EOA off a page boundary",
            ));
        }
        let mut space = Self::new(config, persisted.eoa)?;
        let mut sorted = persisted.sections.clone();
        sorted.sort_by_key(|s| s.addr);
        let mut prev_end = 0;
        for FreeSection { list, addr, len } in sorted {
            let refuse = |reason| SpaceError::InvalidSection { addr, len, reason };
            if len == 0 {
                return Err(refuse("empty"));
            }
            let end = addr
                .checked_add(len)
                .ok_or_else(|| refuse("past the end of allocation"))?;
            if end > space.eoa {
                return Err(refuse("past the end of allocation"));
            }
            if addr < prev_end {
                return Err(refuse("overlaps the previous section"));
            }
            if !config.strategy.tracks_free_space() {
                return Err(refuse("the strategy tracks no free space"));
            }
            if !paged && list == FreeList::Large {
                return Err(refuse("large sections exist only in paged files"));
            }
            let page = config.page_size;
            if paged && list != FreeList::Large && (len >= page || !in_one_page(addr, end, page)) {
                return Err(refuse("small section not inside one page"));
            }
            prev_end = end;
            let sections = &mut space.lists[list];
            sections.started = true;
            match sections.before(addr) {
                Some(p) if space.can_merge(list, p, (addr, len)) => {
                    let sections = &mut space.lists[list];
                    sections.remove(p.0);
                    #[allow(
                        clippy::arithmetic_side_effects,
                        reason = "p.0 < addr < end (p precedes the section)"
                    )]
                    sections.insert(p.0, end - p.0);
                }
                _ => space.lists[list].insert(addr, len),
            }
        }
        space.debug_check();
        Ok(space)
    }
}
