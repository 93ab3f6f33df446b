//! A file's persisted free space, read: the superblock extension's file space info message
//! (strategy, threshold, page size) and, when free space is persisted, every free-space
//! manager it names — header (`FSHD`) and section list (`FSSE`), both loaded through the
//! metadata cache like every other structure.
//!
//! Manager slots follow libhdf5's `H5F_mem_page_t` order (see
//! [`h5_format::message::file_space_info`]); with libhdf5's default free-list map every
//! metadata type shares the "superblock" slot and raw data the "raw data" slot, and the paged
//! strategy adds the "large" slots. [`list_of_slot`] maps a slot to the allocator's
//! [`FreeList`].

use std::sync::Arc;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::free_space::{FreeSpaceHeader, FreeSpaceSections, SectionFormat};
use h5_format::message::Message;
use h5_format::message::file_space_info::{FileSpaceInfo, FileSpaceStrategy, MANAGER_SLOTS_V0};
use h5_metacache::MetadataKind;

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::meta::Load;
use crate::object::ObjectHeader;
use crate::space::{FreeList, FreeSection, PersistentSpace, SpaceStrategy};

/// One persisted free-space manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistedManager {
    /// Its slot in the file space info message (libhdf5's `H5F_mem_page_t` type − 1).
    pub slot: usize,
    /// The allocator's list it feeds.
    pub list: FreeList,
    /// Relative address of its header.
    pub address: u64,
    /// Relative address of its section list (undefined when it holds no section).
    pub sections_address: u64,
    /// Bytes allocated for the section list.
    pub sections_alloc_len: u64,
    /// Its free sections, by address.
    pub sections: Vec<FreeSection>,
}

/// A file's file-space settings and persisted free space (the file space info message and the
/// managers it names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistedSpace {
    /// The strategy.
    pub strategy: SpaceStrategy,
    /// Whether free space is persisted.
    pub persist: bool,
    /// Free sections smaller than this are not tracked.
    pub threshold: u64,
    /// Page size of the paged strategy (libhdf5 records its default, 4096, otherwise).
    pub page_size: u64,
    /// Paged strategy: the page-end metadata threshold.
    pub page_end_meta_threshold: u16,
    /// End of allocation before the managers' own structures were allocated (`None` when not
    /// recorded).
    pub eoa_pre_fsm_fsalloc: Option<u64>,
    /// The version of the message (0: HDF5 1.10.0; 1: later).
    pub message_version: u8,
    /// The managers, by slot (empty unless persisting).
    pub managers: Vec<PersistedManager>,
}

impl PersistedSpace {
    /// Every persisted section, by address.
    pub fn sections(&self) -> Vec<FreeSection> {
        let mut all: Vec<FreeSection> = self
            .managers
            .iter()
            .flat_map(|m| m.sections.iter().copied())
            .collect();
        all.sort_by_key(|s| s.addr);
        all
    }

    /// Free bytes in the persisted sections.
    pub fn free_bytes(&self) -> u64 {
        self.managers
            .iter()
            .flat_map(|m| &m.sections)
            .fold(0u64, |a, s| a.saturating_add(s.len))
    }

    /// The sections as the allocator takes them back ([`crate::space::SpaceManager::
    /// from_persistent`]) for a file whose end of allocation is `eoa`.
    pub fn to_persistent(&self, eoa: u64) -> PersistentSpace {
        PersistentSpace {
            eoa,
            sections: self.sections(),
        }
    }
}

/// The allocator's list a manager slot feeds under `strategy`: the paged strategy's large
/// slots (6 and up) feed the large list; raw data and global heap slots (2, 3) the raw-data
/// list; every other slot the metadata list.
pub fn list_of_slot(strategy: SpaceStrategy, slot: usize) -> FreeList {
    if strategy == SpaceStrategy::Page && slot >= MANAGER_SLOTS_V0 {
        FreeList::Large
    } else if matches!(slot % MANAGER_SLOTS_V0, 2 | 3) {
        FreeList::RawData
    } else {
        FreeList::Metadata
    }
}

fn strategy_of(s: FileSpaceStrategy) -> SpaceStrategy {
    match s {
        FileSpaceStrategy::FsmAggr => SpaceStrategy::FsmAggr,
        FileSpaceStrategy::Page => SpaceStrategy::Page,
        FileSpaceStrategy::Aggr => SpaceStrategy::Aggr,
        FileSpaceStrategy::None => SpaceStrategy::None,
    }
}

fn corrupt(address: u64, reason: String) -> Error {
    Error::Format(h5_format::FormatError::Corrupted {
        structure: "free-space manager",
        address,
        reason,
    })
}

impl FileShared {
    /// The file space info message of the superblock extension, if the file has one (libhdf5
    /// writes none for its default settings: FSM_AGGR, nothing persisted, threshold 1).
    pub fn file_space_info(&self) -> Result<Option<FileSpaceInfo>> {
        let ext = self.superblock.extension_address;
        if ext == UNDEFINED_ADDRESS {
            return Ok(None);
        }
        let oh = ObjectHeader::load(self, ext)?;
        Ok(oh.find(|m| match m {
            Message::FileSpaceInfo(i) => Some(*i),
            _ => None,
        }))
    }

    /// The file's file-space settings and persisted free space: `None` for a file with the
    /// default settings (no file space info message); otherwise the settings and, when free
    /// space is persisted, every manager and its sections (loaded through the metadata cache,
    /// checked: sections inside the file's end of allocation, not overlapping, of the file
    /// client).
    pub fn persisted_free_space(&self) -> Result<Option<PersistedSpace>> {
        let Some(info) = self.file_space_info()? else {
            return Ok(None);
        };
        let strategy = strategy_of(info.strategy);
        let mut managers = Vec::new();
        if info.persist {
            for (slot, addr) in info.defined_managers() {
                managers.push(self.load_manager(strategy, slot, addr)?);
            }
        }
        let space = PersistedSpace {
            strategy,
            persist: info.persist,
            threshold: info.threshold,
            page_size: info.page_size,
            page_end_meta_threshold: info.page_end_meta_threshold,
            eoa_pre_fsm_fsalloc: (info.eoa_pre_fsm_fsalloc != UNDEFINED_ADDRESS)
                .then_some(info.eoa_pre_fsm_fsalloc),
            message_version: info.version,
            managers,
        };
        let mut prev_end = 0u64;
        let mut prev_addr = 0u64;
        for s in space.sections() {
            if s.addr < prev_end {
                return Err(corrupt(
                    s.addr,
                    format!("section overlaps the section at {prev_addr:#x}"),
                ));
            }
            prev_end = s.addr.saturating_add(s.len);
            prev_addr = s.addr;
        }
        Ok(Some(space))
    }

    /// Loads the manager of `slot` whose header is at relative address `addr`.
    fn load_manager(
        &self,
        strategy: SpaceStrategy,
        slot: usize,
        addr: u64,
    ) -> Result<PersistedManager> {
        let sizes = self.sizes;
        let header: Arc<FreeSpaceHeader> = self.load(
            MetadataKind::FreeSpaceHeader,
            addr,
            Load::exact(FreeSpaceHeader::encoded_len(sizes), move |b| {
                FreeSpaceHeader::decode(b, sizes, addr)
            }),
        )?;
        if header.client != h5_format::free_space::FreeSpaceClient::File {
            return Err(corrupt(
                addr,
                "the file space info message names a fractal heap's manager".into(),
            ));
        }
        let list = list_of_slot(strategy, slot);
        let mut sections = Vec::new();
        if header.serial_sections > 0 {
            let len = usize::try_from(header.sections_len)
                .map_err(|_| corrupt(addr, "section list larger than memory".into()))?;
            let at = header.sections_address;
            let h = (*header).clone();
            let list_bytes: Arc<FreeSpaceSections> = self.load(
                MetadataKind::FreeSpaceSections,
                at,
                Load::exact(len, move |b| {
                    FreeSpaceSections::decode(b, &h, sizes, at, SectionFormat::File)
                }),
            )?;
            let eoa = self.storage_eoa();
            for (offset, len, _) in list_bytes.iter() {
                if len == 0 || offset.checked_add(len).is_none_or(|end| end > eoa) {
                    return Err(corrupt(
                        addr,
                        format!(
                            "section of {len} bytes at {offset:#x} outside the file (end {eoa:#x})"
                        ),
                    ));
                }
                sections.push(FreeSection {
                    list,
                    addr: offset,
                    len,
                });
            }
            sections.sort_by_key(|s| s.addr);
        }
        Ok(PersistedManager {
            slot,
            list,
            address: addr,
            sections_address: header.sections_address,
            sections_alloc_len: header.sections_alloc_len,
            sections,
        })
    }

    /// The end of allocation as a relative address: the superblock's end-of-file address
    /// (which counts from the start of the file) less the base.
    fn storage_eoa(&self) -> u64 {
        self.superblock.eof_address.saturating_sub(self.base)
    }
}
