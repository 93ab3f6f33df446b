//! The file space info message (type 0x0017), kept in the superblock extension: how the file's
//! space is managed and, when free space is persisted, where the free-space managers are.
//!
//! Version 1 (HDF5 1.10.1 and later): version(1) = 1, strategy(1), persist(1), threshold(L),
//! page size(L), page end metadata threshold(2), EOA before the free-space managers were
//! allocated(O), then, only when persist is set, 12 free-space manager addresses(O) — one per
//! libhdf5 `H5F_mem_page_t` type after the default: six small-section types (superblock, B-tree,
//! raw data, global heap, local heap, object header) and their six large counterparts.
//!
//! Version 0 (HDF5 1.10.0 only): version(1) = 0, an older strategy code(1) (1 all + persist,
//! 2 all, 3 aggregators and VFD, 4 VFD), threshold(L), then, for code 1 only, six manager
//! addresses(O). It decodes to the same [`FileSpaceInfo`] (the mapping libhdf5 applies:
//! 1 → FSM_AGGR persisted, 2 → FSM_AGGR, 3 → AGGR, 4 → NONE) and encodes back byte for byte.
//!
//! Compatible with libhdf5 1.10–2.x. Example: a non-persisting FSM_AGGR message.
//!
//! ```
//! use h5_format::message::file_space_info::{FileSpaceInfo, FileSpaceStrategy};
//! use h5_format::{Reader, Sizes};
//!
//! let info = FileSpaceInfo::new(FileSpaceStrategy::FsmAggr, false, 1, 4096);
//! let bytes = info.encode(Sizes::EIGHT)?;
//! assert_eq!(bytes.len(), 3 + 8 + 8 + 2 + 8);
//! let back = FileSpaceInfo::decode(&mut Reader::new(&bytes, "t", 0), Sizes::EIGHT)?;
//! assert_eq!(back, info);
//! # Ok::<(), h5_format::FormatError>(())
//! ```

use crate::error::Result;
use crate::reader::{Reader, Sizes, UNDEFINED_ADDRESS};
use crate::writer::Writer;

/// Free-space manager address slots of a version 1 message (`H5F_mem_page_t` types 1..=12).
pub const MANAGER_SLOTS: usize = 12;
/// Manager address slots of a version 0 message (`H5FD_mem_t` types 1..=6).
pub const MANAGER_SLOTS_V0: usize = 6;
/// Slot of the small metadata manager (type "superblock", where libhdf5's default free-list
/// map sends every metadata type).
pub const SLOT_METADATA: usize = 0;
/// Slot of the small raw-data manager (type "raw data", shared with global heaps).
pub const SLOT_RAW_DATA: usize = 2;
/// Slot of the large-section manager of the paged strategy (type "large superblock", where
/// libhdf5 sends every large request).
pub const SLOT_LARGE: usize = 6;

/// How the file's space is managed (libhdf5's `H5F_fspace_strategy_t`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum FileSpaceStrategy {
    /// 0: free-space managers plus aggregators (libhdf5's default).
    FsmAggr,
    /// 1: paged aggregation with free-space managers.
    Page,
    /// 2: aggregators only.
    Aggr,
    /// 3: everything at the end of allocation.
    None,
}

impl FileSpaceStrategy {
    /// The strategy of an on-disk (version 1) code.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::FsmAggr),
            1 => Some(Self::Page),
            2 => Some(Self::Aggr),
            3 => Some(Self::None),
            _ => None,
        }
    }

    /// The on-disk (version 1) code.
    pub fn code(self) -> u8 {
        match self {
            Self::FsmAggr => 0,
            Self::Page => 1,
            Self::Aggr => 2,
            Self::None => 3,
        }
    }

    /// A short name (libhdf5's, without the prefix).
    pub fn name(self) -> &'static str {
        match self {
            Self::FsmAggr => "FSM_AGGR",
            Self::Page => "PAGE",
            Self::Aggr => "AGGR",
            Self::None => "NONE",
        }
    }
}

/// A decoded file space info message.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FileSpaceInfo {
    /// Message version (0 or 1).
    pub version: u8,
    /// The strategy.
    pub strategy: FileSpaceStrategy,
    /// Whether free space is persisted at close (the manager addresses are present).
    pub persist: bool,
    /// Free sections smaller than this are not tracked.
    pub threshold: u64,
    /// Page size of the paged strategy (version 0: not stored, libhdf5's default 4096).
    pub page_size: u64,
    /// Paged strategy: a metadata page's tail smaller than this is not tracked (version 0: 0).
    pub page_end_meta_threshold: u16,
    /// End of allocation before the free-space managers' own structures were allocated
    /// (undefined when not persisting, and in version 0).
    pub eoa_pre_fsm_fsalloc: u64,
    /// Free-space manager header addresses by slot ([`SLOT_METADATA`], [`SLOT_RAW_DATA`],
    /// [`SLOT_LARGE`], …); undefined for managers that do not exist. Version 0 fills the first
    /// [`MANAGER_SLOTS_V0`].
    pub managers: [u64; MANAGER_SLOTS],
}

/// libhdf5's default page size (version 0 messages do not store one).
pub const DEFAULT_PAGE_SIZE: u64 = 4096;

/// Version 0 strategy codes (`H5F_file_space_type_t`).
const V0_ALL_PERSIST: u8 = 1;
const V0_ALL: u8 = 2;
const V0_AGGR_VFD: u8 = 3;
const V0_VFD: u8 = 4;

impl FileSpaceInfo {
    /// A version 1 message with no managers yet (addresses and the pre-FSM EOA undefined,
    /// page end threshold 0).
    pub fn new(strategy: FileSpaceStrategy, persist: bool, threshold: u64, page_size: u64) -> Self {
        Self {
            version: 1,
            strategy,
            persist,
            threshold,
            page_size,
            page_end_meta_threshold: 0,
            eoa_pre_fsm_fsalloc: UNDEFINED_ADDRESS,
            managers: [UNDEFINED_ADDRESS; MANAGER_SLOTS],
        }
    }

    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>, sizes: Sizes) -> Result<Self> {
        let version = super::version(r, &[0, 1])?;
        let mut info = Self::new(FileSpaceStrategy::FsmAggr, false, 1, DEFAULT_PAGE_SIZE);
        info.version = version;
        if version == 0 {
            let code = r.u8()?;
            info.threshold = r.length(sizes)?;
            (info.strategy, info.persist) = match code {
                V0_ALL_PERSIST => (FileSpaceStrategy::FsmAggr, true),
                V0_ALL => (FileSpaceStrategy::FsmAggr, false),
                V0_AGGR_VFD => (FileSpaceStrategy::Aggr, false),
                V0_VFD => (FileSpaceStrategy::None, false),
                _ => return Err(r.corrupted(format!("version 0 strategy {code}"))),
            };
            if info.persist {
                for slot in info.managers.iter_mut().take(MANAGER_SLOTS_V0) {
                    *slot = r.offset(sizes)?;
                }
            }
            return Ok(info);
        }
        let code = r.u8()?;
        info.strategy = FileSpaceStrategy::from_code(code)
            .ok_or_else(|| r.corrupted(format!("strategy {code}")))?;
        info.persist = match r.u8()? {
            0 => false,
            1 => true,
            p => return Err(r.corrupted(format!("persist flag {p}"))),
        };
        info.threshold = r.length(sizes)?;
        info.page_size = r.length(sizes)?;
        info.page_end_meta_threshold = r.u16()?;
        info.eoa_pre_fsm_fsalloc = r.offset(sizes)?;
        if info.persist {
            for slot in info.managers.iter_mut() {
                *slot = r.offset(sizes)?;
            }
        }
        Ok(info)
    }

    /// Bytes of the encoded body.
    #[allow(clippy::arithmetic_side_effects, reason = "1-byte sizes and constants")]
    pub fn encoded_len(&self, sizes: Sizes) -> usize {
        let o = usize::from(sizes.offset);
        let l = usize::from(sizes.length);
        if self.version == 0 {
            2 + l
                + if self.persist {
                    MANAGER_SLOTS_V0 * o
                } else {
                    0
                }
        } else {
            3 + 2 * l + 2 + o + if self.persist { MANAGER_SLOTS * o } else { 0 }
        }
    }

    /// Encodes the body in the message's version. Version 0 cannot express the paged
    /// strategy, a persisting strategy other than FSM_AGGR, or managers past its six slots.
    pub fn encode(&self, sizes: Sizes) -> Result<Vec<u8>> {
        let mut w = Writer::with_capacity(self.encoded_len(sizes));
        let refuse =
            |what: &str| crate::fixed_array::encode_error("file space info message", what.into());
        match self.version {
            0 => {
                let code = match (self.strategy, self.persist) {
                    (FileSpaceStrategy::FsmAggr, true) => V0_ALL_PERSIST,
                    (FileSpaceStrategy::FsmAggr, false) => V0_ALL,
                    (FileSpaceStrategy::Aggr, false) => V0_AGGR_VFD,
                    (FileSpaceStrategy::None, false) => V0_VFD,
                    _ => return Err(refuse("this strategy in version 0")),
                };
                if self
                    .managers
                    .iter()
                    .skip(MANAGER_SLOTS_V0)
                    .any(|&a| a != UNDEFINED_ADDRESS)
                {
                    return Err(refuse("large-section managers in version 0"));
                }
                w.u8(0);
                w.u8(code);
                w.length(sizes, self.threshold);
                if self.persist {
                    for &a in self.managers.iter().take(MANAGER_SLOTS_V0) {
                        w.offset(sizes, a);
                    }
                }
            }
            1 => {
                w.u8(1);
                w.u8(self.strategy.code());
                w.u8(u8::from(self.persist));
                w.length(sizes, self.threshold);
                w.length(sizes, self.page_size);
                w.u16(self.page_end_meta_threshold);
                w.offset(sizes, self.eoa_pre_fsm_fsalloc);
                if self.persist {
                    for &a in &self.managers {
                        w.offset(sizes, a);
                    }
                }
            }
            v => return Err(refuse(&format!("version {v}"))),
        }
        Ok(w.into_bytes())
    }

    /// The defined manager addresses with their slots, in slot order.
    pub fn defined_managers(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.managers
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, a)| a != UNDEFINED_ADDRESS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FormatError;

    const S: Sizes = Sizes::EIGHT;

    fn decode(b: &[u8]) -> Result<FileSpaceInfo> {
        let mut r = Reader::new(b, "t", 0);
        let v = FileSpaceInfo::decode(&mut r, S)?;
        assert!(r.is_empty());
        Ok(v)
    }

    #[test]
    fn version_1_round_trips_with_and_without_managers() {
        for persist in [false, true] {
            let mut info = FileSpaceInfo::new(FileSpaceStrategy::Page, persist, 7, 8192);
            info.page_end_meta_threshold = 64;
            if persist {
                info.eoa_pre_fsm_fsalloc = 0x4000;
                info.managers[SLOT_METADATA] = 0x100;
                info.managers[SLOT_RAW_DATA] = 0x200;
                info.managers[SLOT_LARGE] = 0x300;
            }
            let b = info.encode(S).unwrap();
            assert_eq!(b.len(), info.encoded_len(S));
            assert_eq!(b.len(), if persist { 29 + 96 } else { 29 });
            assert_eq!(decode(&b).unwrap(), info);
            let slots: Vec<_> = info.defined_managers().map(|(s, _)| s).collect();
            assert_eq!(slots, if persist { vec![0, 2, 6] } else { vec![] });
            for n in 0..b.len() {
                assert!(FileSpaceInfo::decode(&mut Reader::new(&b[..n], "t", 0), S).is_err());
            }
        }
    }

    #[test]
    fn version_0_maps_the_old_strategies_and_encodes_back() {
        let cases = [
            (1u8, FileSpaceStrategy::FsmAggr, true),
            (2, FileSpaceStrategy::FsmAggr, false),
            (3, FileSpaceStrategy::Aggr, false),
            (4, FileSpaceStrategy::None, false),
        ];
        for (code, strategy, persist) in cases {
            let mut b = vec![0, code];
            b.extend_from_slice(&10u64.to_le_bytes());
            if persist {
                for i in 0..6u64 {
                    let a = if i % 2 == 0 { 0x80 * (i + 1) } else { u64::MAX };
                    b.extend_from_slice(&a.to_le_bytes());
                }
            }
            let info = decode(&b).unwrap();
            assert_eq!(
                (info.version, info.strategy, info.persist),
                (0, strategy, persist)
            );
            assert_eq!(info.threshold, 10);
            assert_eq!(info.page_size, DEFAULT_PAGE_SIZE);
            assert_eq!(info.eoa_pre_fsm_fsalloc, UNDEFINED_ADDRESS);
            if persist {
                assert_eq!(info.managers[0], 0x80);
                assert_eq!(info.managers[1], UNDEFINED_ADDRESS);
                assert_eq!(info.managers[4], 0x280);
            }
            assert_eq!(info.encode(S).unwrap(), b);
            assert_eq!(info.encoded_len(S), b.len());
        }
        let mut paged = FileSpaceInfo::new(FileSpaceStrategy::Page, false, 1, 4096);
        paged.version = 0;
        assert!(matches!(
            paged.encode(S),
            Err(FormatError::Unsupported { .. })
        ));
    }

    #[test]
    fn bad_values_are_errors() {
        let good = FileSpaceInfo::new(FileSpaceStrategy::FsmAggr, false, 1, 4096)
            .encode(S)
            .unwrap();
        for (at, v) in [(0usize, 2u8), (1, 4), (2, 2)] {
            let mut b = good.clone();
            b[at] = v;
            assert!(decode(&b).is_err(), "byte {at} = {v}");
        }
        assert!(decode(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(decode(&[0, 5, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }
}
