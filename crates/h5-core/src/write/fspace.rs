//! A written file's file-space settings and persistent free-space managers: the options of a
//! new file (libhdf5's `H5Pset_file_space_strategy` / `H5Pset_file_space_page_size`), the
//! superblock extension holding the file space info message, and, at every flush of a file
//! that persists its free space, the managers (`FSHD` header and `FSSE` section list per
//! non-empty free list) written through the metadata cache. The close order and the managers
//! per strategy are those of `docs/design.md` §5.3.
//!
//! Invariants: after `settle` returns, nothing allocates or frees until the cache has been
//! flushed, so the sections written are exactly the allocator's free sections and the EOA in
//! the message is the superblock's end of file; the file space info message never changes
//! size, so it is rewritten where it is stored.

use h5_format::UNDEFINED_ADDRESS;
use h5_format::free_space::{FreeSpaceHeader, FreeSpaceSections, SectionFormat};
use h5_format::message::file_space_info::{
    FileSpaceInfo, FileSpaceStrategy, SLOT_LARGE, SLOT_METADATA, SLOT_RAW_DATA,
};
use h5_format::message::kind;
use h5_metacache::MetadataKind;

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::meta::Decoded;
use crate::space::{
    FreeList, FreeSection, MAX_PAGE_SIZE, MIN_PAGE_SIZE, SpaceConfig, SpaceStrategy,
};
use crate::write::alloc::SpaceKind;
use crate::write::{drop_entry, ohdr, put};

/// Message flags of the file space info message as libhdf5 writes it: "mark if unknown"
/// (0x10) and "don't share" (0x04).
const MESSAGE_FLAGS: u8 = 0x14;

/// Largest section a file's manager tracks: the POSIX driver's maximum address, which libhdf5
/// records in every file manager header.
const MAX_SECTION: u64 = (1 << 63) - 1;

/// File-space settings of a new file. The defaults are libhdf5's: [`SpaceStrategy::FsmAggr`],
/// free space not persisted, threshold 1, page size 4096. Other settings are recorded in a
/// file space info message in the superblock extension, so the superblock is at least
/// version 2 (libhdf5 raises it the same way, whatever the low format bound).
///
/// ```
/// use h5_core::space::SpaceStrategy;
/// use h5_core::write::fspace::FileSpaceOptions;
///
/// let paged = FileSpaceOptions::default()
///     .with_strategy(SpaceStrategy::Page, true, 1)
///     .with_page_size(8192);
/// assert!(paged.validate().is_ok() && paged.persist());
/// // Strategies that track no free space persist nothing (libhdf5's rule).
/// let aggr = FileSpaceOptions::default().with_strategy(SpaceStrategy::Aggr, true, 64);
/// assert_eq!((aggr.persist(), aggr.threshold()), (false, 1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileSpaceOptions {
    strategy: SpaceStrategy,
    persist: bool,
    threshold: u64,
    page_size: u64,
}

impl Default for FileSpaceOptions {
    fn default() -> Self {
        Self {
            strategy: SpaceStrategy::FsmAggr,
            persist: false,
            threshold: 1,
            page_size: 4096,
        }
    }
}

impl FileSpaceOptions {
    /// The strategy, whether free space is persisted at close, and the size under which freed
    /// space is not tracked (`H5Pset_file_space_strategy`). As in libhdf5, `persist` and
    /// `threshold` are reset to `false` and 1 for [`SpaceStrategy::Aggr`] and
    /// [`SpaceStrategy::None`], which track no free space.
    pub fn with_strategy(mut self, strategy: SpaceStrategy, persist: bool, threshold: u64) -> Self {
        self.strategy = strategy;
        if strategy.tracks_free_space() {
            self.persist = persist;
            self.threshold = threshold;
        } else {
            self.persist = false;
            self.threshold = 1;
        }
        self
    }

    /// The page size of the paged strategy, 512 B to 1 GiB (`H5Pset_file_space_page_size`;
    /// recorded whatever the strategy, checked when the file is created).
    pub fn with_page_size(mut self, page_size: u64) -> Self {
        self.page_size = page_size;
        self
    }

    /// The strategy.
    pub fn strategy(&self) -> SpaceStrategy {
        self.strategy
    }

    /// Whether free space is persisted.
    pub fn persist(&self) -> bool {
        self.persist
    }

    /// The tracking threshold.
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    /// The page size.
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// Whether these are libhdf5's defaults (then no file space info message is written).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Refuses a page size outside 512 B to 1 GiB (libhdf5's limits).
    pub fn validate(&self) -> Result<()> {
        if !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&self.page_size) {
            return Err(Error::Invalid(format!(
                "file space page size {} outside {MIN_PAGE_SIZE} B to {MAX_PAGE_SIZE} B",
                self.page_size
            )));
        }
        Ok(())
    }

    /// The allocator's settings for a file whose addresses are `sizeof_addr` bytes.
    pub(crate) fn space_config(&self, sizeof_addr: u8) -> SpaceConfig {
        let aggregate = self.strategy != SpaceStrategy::None;
        let block = if aggregate { 2048 } else { 0 };
        SpaceConfig {
            strategy: self.strategy,
            persist: self.persist,
            threshold: self.threshold,
            page_size: self.page_size,
            meta_block_size: block,
            small_data_block_size: block,
            sizeof_addr,
        }
    }

    /// The message of a new file with these settings (version 1, no managers yet).
    pub(crate) fn message(&self) -> FileSpaceInfo {
        FileSpaceInfo::new(
            format_strategy(self.strategy),
            self.persist,
            self.threshold,
            self.page_size,
        )
    }

    /// The options a file space info message records.
    pub(crate) fn of_message(info: &FileSpaceInfo) -> Self {
        Self {
            strategy: space_strategy(info.strategy),
            persist: info.persist,
            threshold: info.threshold,
            page_size: info.page_size,
        }
    }
}

fn format_strategy(s: SpaceStrategy) -> FileSpaceStrategy {
    match s {
        SpaceStrategy::FsmAggr => FileSpaceStrategy::FsmAggr,
        SpaceStrategy::Page => FileSpaceStrategy::Page,
        SpaceStrategy::Aggr => FileSpaceStrategy::Aggr,
        SpaceStrategy::None => FileSpaceStrategy::None,
    }
}

fn space_strategy(s: FileSpaceStrategy) -> SpaceStrategy {
    match s {
        FileSpaceStrategy::FsmAggr => SpaceStrategy::FsmAggr,
        FileSpaceStrategy::Page => SpaceStrategy::Page,
        FileSpaceStrategy::Aggr => SpaceStrategy::Aggr,
        FileSpaceStrategy::None => SpaceStrategy::None,
    }
}

/// The blocks of one manager written at the last flush (or found at open).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ManagerBlocks {
    /// Relative address of the header.
    pub(crate) header: u64,
    /// Relative address of the section list (undefined when none).
    pub(crate) list: u64,
    /// Bytes allocated for the section list.
    pub(crate) list_alloc: u64,
}

/// The file space info message of a writable file and where its managers are.
#[derive(Clone, Debug)]
pub(crate) struct SpaceInfoState {
    /// Relative address of the superblock extension's object header.
    pub(crate) extension: u64,
    /// The message as last written (or read).
    pub(crate) info: FileSpaceInfo,
    /// The managers' blocks, freed before the next ones are placed.
    pub(crate) managers: Vec<ManagerBlocks>,
}

/// Creates the superblock extension of a new file: an object header of `version` holding the
/// file space info message for `options` (its relative address is the state's `extension`).
pub(crate) fn create_extension(
    file: &FileShared,
    options: &FileSpaceOptions,
    version: u8,
) -> Result<SpaceInfoState> {
    let info = options.message();
    let body = info.encode(file.sizes)?;
    let extension = ohdr::create(
        file,
        version,
        vec![ohdr::message(kind::FILE_SPACE_INFO, MESSAGE_FLAGS, body)],
    )?;
    Ok(SpaceInfoState {
        extension,
        info,
        managers: Vec::new(),
    })
}

/// The manager slot of a free list and the section type its sections are stored with.
fn slot_of(strategy: SpaceStrategy, list: FreeList) -> (usize, u8) {
    let paged = strategy == SpaceStrategy::Page;
    match list {
        FreeList::Metadata => (SLOT_METADATA, u8::from(paged)),
        FreeList::RawData => (SLOT_RAW_DATA, u8::from(paged)),
        FreeList::Large => (SLOT_LARGE, 2),
    }
}

/// The free sections of each non-empty list, lists in the order their managers are placed:
/// raw data first (its manager does not change the raw list), then the self-referential
/// metadata and large lists.
fn by_list(sections: &[FreeSection]) -> Vec<(FreeList, Vec<FreeSection>)> {
    [FreeList::RawData, FreeList::Metadata, FreeList::Large]
        .into_iter()
        .filter_map(|list| {
            let s: Vec<FreeSection> = sections
                .iter()
                .filter(|s| s.list == list)
                .copied()
                .collect();
            (!s.is_empty()).then_some((list, s))
        })
        .collect()
}

/// Bytes of the section list of the manager whose header is at `header` holding `sections`
/// (`(offset, size, type)`).
fn list_len(file: &FileShared, header: u64, sections: &[(u64, u64, u8)]) -> Result<u64> {
    let secs = FreeSpaceSections::from_sections(0, header, sections.iter().copied());
    let mut h = FreeSpaceHeader::file_manager(header, MAX_SECTION);
    h.summarize(&secs, file.sizes, SectionFormat::File)?;
    Ok(h.sections_len)
}

/// One manager placed in an attempt of [`settle`].
struct Placed {
    list: FreeList,
    header: u64,
    list_addr: u64,
    list_alloc: u64,
}

fn lock_close(file: &FileShared) -> Result<u64> {
    let a = file.alloc.as_ref().ok_or(Error::ReadOnly)?;
    Ok(a.lock().map_err(|_| Error::Poisoned)?.close()?.eoa)
}

fn sections_now(file: &FileShared) -> Result<Vec<FreeSection>> {
    let a = file.alloc.as_ref().ok_or(Error::ReadOnly)?;
    Ok(a.lock().map_err(|_| Error::Poisoned)?.free_sections())
}

/// Closes the allocator for a flush (aggregators given back, the EOA shrunk over free space at
/// its end) and, when the file persists its free space, frees the managers of the last flush,
/// places new ones for the free sections left, writes them and the file space info message
/// into the cache (steps 2–11 of `docs/design.md` §5.3). Returns the final EOA.
pub(crate) fn settle(file: &FileShared) -> Result<u64> {
    let state = file.state()?.space_info.clone();
    let Some(mut state) = state.filter(|s| s.info.persist) else {
        return lock_close(file);
    };
    let sizes = file.sizes;
    let header_len = FreeSpaceHeader::encoded_len(sizes) as u64;
    // Step 3: the previous managers' space is free again.
    for m in std::mem::take(&mut state.managers) {
        drop_entry(file, MetadataKind::FreeSpaceHeader, m.header, header_len)?;
        if m.list != UNDEFINED_ADDRESS && m.list_alloc > 0 {
            drop_entry(file, MetadataKind::FreeSpaceSections, m.list, m.list_alloc)?;
        }
    }
    file.state()?.space_info = Some(state.clone());
    let strategy = file
        .alloc
        .as_ref()
        .ok_or(Error::ReadOnly)?
        .lock()
        .map_err(|_| Error::Poisoned)?
        .config()
        .strategy;
    // Steps 2 and 4.
    let mut eoa = lock_close(file)?;
    // Sections a list may gain while its manager is placed (each allocation or aggregator rest
    // can split or add one); counted as sets of their own, the worst case.
    let mut slack = 4usize;
    let mut placed: Vec<Placed> = Vec::new();
    let mut settled = None;
    for _ in 0..10 {
        let before = by_list(&sections_now(file)?);
        placed.clear();
        // Steps 6 and 9: a header, then a list with room for the sections and some slack.
        for (list, secs) in &before {
            let header = file.allocate(SpaceKind::Meta, header_len)?;
            let (_, t) = slot_of(strategy, *list);
            let mut guess: Vec<(u64, u64, u8)> = secs.iter().map(|s| (s.addr, s.len, t)).collect();
            for i in 0..slack {
                #[allow(clippy::arithmetic_side_effects, reason = "i < slack <= 4 * 2^10")]
                let far = u64::MAX / 4 + i as u64;
                guess.push((far, far, t));
            }
            let need = list_len(file, header, &guess)?;
            let list_addr = file.allocate(SpaceKind::Meta, need)?;
            placed.push(Placed {
                list: *list,
                header,
                list_addr,
                list_alloc: need,
            });
        }
        // Steps 8 and 10.
        eoa = lock_close(file)?;
        let after = by_list(&sections_now(file)?);
        let fits = after.iter().all(|(list, secs)| {
            placed.iter().any(|p| {
                p.list == *list && {
                    let (_, t) = slot_of(strategy, *list);
                    let s: Vec<_> = secs.iter().map(|s| (s.addr, s.len, t)).collect();
                    list_len(file, p.header, &s).is_ok_and(|n| n <= p.list_alloc)
                }
            })
        });
        if fits {
            settled = Some(after);
            break;
        }
        for p in placed.drain(..) {
            file.free(SpaceKind::Meta, p.header, header_len)?;
            file.free(SpaceKind::Meta, p.list_addr, p.list_alloc)?;
        }
        eoa = lock_close(file)?;
        slack = slack.saturating_mul(2);
    }
    let Some(after) = settled else {
        return Err(Error::Unsupported(
            "the free-space managers' own space did not settle".into(),
        ));
    };
    // Step 11: managers, then the message, all as cache entries.
    let mut info = state.info;
    info.managers = [UNDEFINED_ADDRESS; h5_format::message::file_space_info::MANAGER_SLOTS];
    for p in &placed {
        let (slot, t) = slot_of(strategy, p.list);
        let secs: Vec<(u64, u64, u8)> = after
            .iter()
            .find(|(l, _)| *l == p.list)
            .map(|(_, s)| s.iter().map(|s| (s.addr, s.len, t)).collect())
            .unwrap_or_default();
        let list = FreeSpaceSections::from_sections(p.list_addr, p.header, secs);
        let mut header = FreeSpaceHeader::file_manager(p.header, MAX_SECTION);
        header.summarize(&list, sizes, SectionFormat::File)?;
        header.sections_address = p.list_addr;
        header.sections_alloc_len = p.list_alloc;
        let used = usize::try_from(header.sections_len)
            .map_err(|_| Error::Unsupported("section list larger than memory".into()))?;
        let h = header.clone();
        put(
            file,
            MetadataKind::FreeSpaceSections,
            p.list_addr,
            Decoded::writable(used, list, move |l: &FreeSpaceSections| {
                l.encode(&h, sizes, SectionFormat::File)
            }),
        )?;
        put(
            file,
            MetadataKind::FreeSpaceHeader,
            p.header,
            Decoded::writable(header_len as usize, header, move |h: &FreeSpaceHeader| {
                Ok(h.encode(sizes))
            }),
        )?;
        if let Some(m) = info.managers.get_mut(slot) {
            *m = p.header;
        }
        state.managers.push(ManagerBlocks {
            header: p.header,
            list: p.list_addr,
            list_alloc: p.list_alloc,
        });
    }
    if info.version >= 1 {
        info.eoa_pre_fsm_fsalloc = eoa;
    }
    let body = info.encode(sizes)?;
    if !ohdr::replace_in_place(file, state.extension, kind::FILE_SPACE_INFO, &body)? {
        return Err(Error::Unsupported(
            "the superblock extension's file space info message cannot be rewritten in place"
                .into(),
        ));
    }
    state.info = info;
    file.state()?.space_info = Some(state);
    Ok(eoa)
}

/// The allocator of a file opened for writing whose end of allocation is `eoa`, with the
/// file's settings (libhdf5's defaults without a file space info message) and its persisted
/// free sections; and the message's state, listing the managers read (to be freed by
/// [`release_loaded`]).
pub(crate) fn open_alloc(
    file: &FileShared,
    eoa: u64,
) -> Result<(crate::write::alloc::FileAlloc, Option<SpaceInfoState>)> {
    use crate::write::alloc::FileAlloc;
    let Some(info) = file.file_space_info()? else {
        return Ok((FileAlloc::new(eoa, file.sizes.offset)?, None));
    };
    let options = FileSpaceOptions::of_message(&info);
    let config = options.space_config(file.sizes.offset);
    let mut state = SpaceInfoState {
        extension: file.superblock.extension_address,
        info,
        managers: Vec::new(),
    };
    if !(info.persist && config.strategy.tracks_free_space()) {
        return Ok((FileAlloc::with_config(config, eoa)?, Some(state)));
    }
    let persisted = file.persisted_free_space()?.ok_or_else(|| {
        Error::Unsupported("file space info message vanished while opening".into())
    })?;
    let eoa = if config.strategy == SpaceStrategy::Page {
        eoa.div_ceil(config.page_size)
            .checked_mul(config.page_size)
            .ok_or_else(|| Error::Unsupported("end of allocation overflows".into()))?
    } else {
        eoa
    };
    let alloc = FileAlloc::from_persistent(config, &persisted.to_persistent(eoa))?;
    state.managers = persisted
        .managers
        .iter()
        .map(|m| ManagerBlocks {
            header: m.address,
            list: m.sections_address,
            list_alloc: m.sections_alloc_len,
        })
        .collect();
    Ok((alloc, Some(state)))
}

/// Frees the blocks of the managers read at open (step 3 of §5.3), so the session reuses
/// them; the next flush writes new managers.
pub(crate) fn release_loaded(file: &FileShared) -> Result<()> {
    let managers = match file.state()?.space_info.as_mut() {
        Some(s) => std::mem::take(&mut s.managers),
        None => return Ok(()),
    };
    let header_len = FreeSpaceHeader::encoded_len(file.sizes) as u64;
    for m in managers {
        drop_entry(file, MetadataKind::FreeSpaceHeader, m.header, header_len)?;
        if m.list != UNDEFINED_ADDRESS && m.list_alloc > 0 {
            drop_entry(file, MetadataKind::FreeSpaceSections, m.list, m.list_alloc)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip_through_the_message() {
        for strategy in [
            SpaceStrategy::FsmAggr,
            SpaceStrategy::Page,
            SpaceStrategy::Aggr,
            SpaceStrategy::None,
        ] {
            let o = FileSpaceOptions::default()
                .with_strategy(strategy, true, 9)
                .with_page_size(1024);
            let info = o.message();
            assert_eq!(info.version, 1);
            assert_eq!(info.eoa_pre_fsm_fsalloc, UNDEFINED_ADDRESS);
            assert_eq!(FileSpaceOptions::of_message(&info), o);
            assert_eq!(o.persist(), strategy.tracks_free_space());
            let c = o.space_config(8);
            assert_eq!(
                (c.strategy, c.page_size, c.persist),
                (strategy, 1024, o.persist())
            );
        }
        assert!(
            FileSpaceOptions::default()
                .with_page_size(256)
                .validate()
                .is_err()
        );
        assert!(
            FileSpaceOptions::default()
                .with_page_size(512)
                .validate()
                .is_ok()
        );
        assert!(
            FileSpaceOptions::default()
                .with_page_size(MAX_PAGE_SIZE + 1)
                .validate()
                .is_err()
        );
    }

    #[test]
    fn lists_map_to_libhdf5_slots_and_section_types() {
        use SpaceStrategy::{FsmAggr, Page};
        assert_eq!(slot_of(FsmAggr, FreeList::Metadata), (SLOT_METADATA, 0));
        assert_eq!(slot_of(FsmAggr, FreeList::RawData), (SLOT_RAW_DATA, 0));
        assert_eq!(slot_of(Page, FreeList::Metadata), (SLOT_METADATA, 1));
        assert_eq!(slot_of(Page, FreeList::RawData), (SLOT_RAW_DATA, 1));
        assert_eq!(slot_of(Page, FreeList::Large), (SLOT_LARGE, 2));
        // The reader maps the slots back to the same lists.
        for (s, list) in [
            (FsmAggr, FreeList::Metadata),
            (FsmAggr, FreeList::RawData),
            (Page, FreeList::Metadata),
            (Page, FreeList::RawData),
            (Page, FreeList::Large),
        ] {
            assert_eq!(crate::free_space::list_of_slot(s, slot_of(s, list).0), list);
        }
        let sections = [
            FreeSection {
                list: FreeList::Metadata,
                addr: 10,
                len: 5,
            },
            FreeSection {
                list: FreeList::RawData,
                addr: 20,
                len: 5,
            },
        ];
        let lists: Vec<FreeList> = by_list(&sections).iter().map(|(l, _)| *l).collect();
        assert_eq!(
            lists,
            [FreeList::RawData, FreeList::Metadata],
            "raw data's manager first"
        );
    }
}
