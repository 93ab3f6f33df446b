//! Legacy SWMR writing: what libhdf5 releases speak (`H5Fstart_swmr_write`, `H5F_ACC_SWMR_WRITE`,
//! h5py's `swmr_mode = True`), followed by readers in other processes that open the file with
//! `H5F_ACC_SWMR_READ` and refresh datasets one at a time (docs/design.md §8.6).
//!
//! While a file is in SWMR-writing mode:
//! * the superblock (version 3) carries the write and SWMR-write status flags, cleared at close;
//! * the rollback journal is off and the writer's lock is shared (the hook the opener left with
//!   [`FileShared::set_swmr_write_hook`]): no in-place marker ever hides the superblock;
//! * no file space is reused before close ([`crate::write::alloc::FileAlloc::hold_frees`]): a
//!   reader may still follow a structure the writer replaced;
//! * every v2 B-tree node changed for the first time in a flush epoch moves to new space first
//!   (shadowing, `crate::btree2`'s `shadow.rs`; the epoch advances at each flush) and a changed
//!   tree's header stays pinned until the flush: a reader that read a parent before the flush
//!   finds the old child intact;
//! * a dataset's object header whose dataspace changed stays pinned in the metadata cache (no
//!   eviction writes it early) until the next flush, where it becomes the flush-dependency
//!   parent of its chunk index's top structure: every flush writes raw data first (the chunk
//!   cache), then the chunk index children before parents, then the object header with the new
//!   extent, the superblock last. A reader that sees the new extent finds every chunk in it.
//! * groups, datasets, links and attributes are neither created nor removed (libhdf5's SWMR
//!   rules, which libhdf5 states but does not enforce): [`SwmrWriteError::StructureChange`].
//!
//! Invariant: `active` is set only between a successful [`FileShared::start_swmr_write`] and the
//! close that clears the flags; every object header in `pinned` is pinned by this module.

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use h5_format::message::layout::{ChunkIndex, LayoutClass};
use h5_format::superblock::Superblock;
use h5_metacache::{MetadataKind, ProtectFlags, UnprotectFlags};

use crate::error::{Error, Result};
use crate::file::{FileShared, STATUS_SWMR_WRITE, STATUS_WRITE_ACCESS, cache_error};
use crate::write::FormatBounds;

/// What the opener of a file by path runs when the file enters SWMR-writing mode: stop the
/// rollback journal and make the writer's lock a shared one.
pub type SwmrWriteHook = Box<dyn FnOnce() -> Result<()> + Send>;

/// Why a file cannot enter, or an operation is refused in, SWMR-writing mode.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SwmrWriteError {
    /// The file was opened read-only (libhdf5: "no write intent on file").
    #[error("SWMR writing needs a file opened for writing")]
    NotWritable,
    /// The superblock is older than version 3, which has the status flags readers check.
    #[error(
        "superblock version {version}: SWMR writing needs version 3 or newer (create the file \
         with the 1.10 formats or newer, h5py's libver=\"latest\")"
    )]
    SuperblockVersion {
        /// The file's superblock version.
        version: u8,
    },
    /// New objects would use formats older than 1.10 (libhdf5: "file format version does not
    /// support SWMR").
    #[error("format bounds {bounds:?}: SWMR writing needs the low bound V110 or newer")]
    Bounds {
        /// The low bound of new objects.
        bounds: FormatBounds,
    },
    /// [`FileShared::start_swmr_write`] was called twice.
    #[error("the file is already in SWMR-writing mode")]
    AlreadyWriting,
    /// A page buffer is configured (libhdf5 refuses page buffering with legacy SWMR).
    #[error("SWMR writing with a page buffer is not supported")]
    PageBuffer,
    /// The file is a VFD SWMR file, which has its own protocol.
    #[error("the file is opened with VFD SWMR; legacy SWMR writing does not apply")]
    VfdSwmr,
    /// A dataset whose chunk index is a version 1 B-tree, written in SWMR-writing mode. Its
    /// nodes change in place, which SWMR readers cannot follow; libhdf5 does not support it
    /// either: its v1 B-tree (`H5B.c`) has no shadowing (only the v2 B-tree moves changed
    /// nodes, `H5B2__shadow_internal`/`H5B2__shadow_leaf`), its SWMR tests refuse such a
    /// dataset ("Version 1 B-trees are not supported under SWMR", `test/use_common.c`), and
    /// it never creates one under the 1.10 formats SWMR writing needs. Version 2 B-tree
    /// indexes are written with shadowing (docs/design.md §8.6).
    #[error(
        "writing a dataset with a {index} chunk index in SWMR-writing mode is not supported \
         (SWMR readers cannot follow its nodes changed in place; libhdf5 does not support it \
         either); rewrite the dataset with the 1.10 formats (h5repack, or h5py libver=\"latest\")"
    )]
    BtreeIndex {
        /// `"version 1 B-tree"`.
        index: &'static str,
    },
    /// A change of the file's structure while in SWMR-writing mode.
    #[error(
        "{what} while in SWMR-writing mode: a SWMR writer only writes and extends existing \
         datasets (create objects before start_swmr_write)"
    )]
    StructureChange {
        /// What was refused.
        what: &'static str,
    },
}

/// A file's legacy SWMR-writing state.
#[derive(Default)]
pub(crate) struct LegacySwmr {
    /// In SWMR-writing mode.
    active: AtomicBool,
    /// Relative addresses of the object headers pinned until the next flush.
    pinned: Mutex<BTreeSet<u64>>,
    /// Relative addresses of the v2 B-tree headers pinned until the next flush (a tree
    /// changed in this epoch: its header reaches the file only at the flush).
    pinned_trees: Mutex<BTreeSet<u64>>,
    /// Relative addresses of the v2 B-tree nodes placed in the current flush epoch (moved or
    /// created since the last flush): no reader can reach them yet, so they change in place;
    /// every other node moves before it changes ([`FileShared::swmr_must_shadow`]).
    fresh_nodes: Mutex<HashSet<u64>>,
    /// What entering the mode runs (set by the opener of a file by path).
    hook: Mutex<Option<SwmrWriteHook>>,
}

impl std::fmt::Debug for LegacySwmr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LegacySwmr")
            .field("active", &self.active.load(Ordering::Acquire))
            .finish_non_exhaustive()
    }
}

impl FileShared {
    /// Sets what [`FileShared::start_swmr_write`] runs once the file is flushed (the opener
    /// of a file by path: stop the rollback journal, share the lock).
    pub fn set_swmr_write_hook(&self, hook: SwmrWriteHook) {
        *self
            .legacy_swmr
            .hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(hook);
    }

    /// Enters legacy SWMR-writing mode (libhdf5's `H5Fstart_swmr_write`): checks libhdf5's
    /// rules (opened for writing, superblock version 3 or newer, low format bound V110 or
    /// newer, not yet in the mode; no page buffer, no VFD SWMR), flushes, runs the opener's
    /// hook, holds every later free until close, and marks the superblock with the write and
    /// SWMR-write status flags (written at once).
    pub fn start_swmr_write(&self) -> Result<()> {
        self.check_open()?;
        if !self.is_writable() {
            return Err(SwmrWriteError::NotWritable.into());
        }
        self.check_usable()?;
        if self.is_swmr() {
            return Err(SwmrWriteError::VfdSwmr.into());
        }
        if self.is_legacy_swmr_writer() {
            return Err(SwmrWriteError::AlreadyWriting.into());
        }
        if self.superblock.version < 3 {
            return Err(SwmrWriteError::SuperblockVersion {
                version: self.superblock.version,
            }
            .into());
        }
        let bounds = self.bounds();
        if bounds < FormatBounds::V110 {
            return Err(SwmrWriteError::Bounds { bounds }.into());
        }
        if self.pagebuf.is_some() {
            return Err(SwmrWriteError::PageBuffer.into());
        }
        self.flush()?;
        let hook = self
            .legacy_swmr
            .hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(hook) = hook {
            hook()?;
        }
        self.allocator_hold(true)?;
        self.legacy_swmr.active.store(true, Ordering::Release);
        self.set_status_flags(STATUS_WRITE_ACCESS | STATUS_SWMR_WRITE)?;
        self.flush()
    }

    /// Whether the file is in legacy SWMR-writing mode.
    pub fn is_legacy_swmr_writer(&self) -> bool {
        self.legacy_swmr.active.load(Ordering::Acquire)
    }

    /// Refuses `what` (a change of the file's structure) in SWMR-writing mode.
    pub(crate) fn check_structure_change(&self, what: &'static str) -> Result<()> {
        if self.is_legacy_swmr_writer() {
            return Err(SwmrWriteError::StructureChange { what }.into());
        }
        Ok(())
    }

    /// Refuses a write or resize of the dataset `info` in SWMR-writing mode when its chunk
    /// index is a version 1 B-tree ([`SwmrWriteError::BtreeIndex`]); version 2 B-trees are
    /// shadowed (`btree2/shadow.rs`).
    pub(crate) fn check_swmr_index(&self, info: &crate::dataset::DatasetInfo) -> Result<()> {
        if !self.is_legacy_swmr_writer() {
            return Ok(());
        }
        match &info.layout.class {
            LayoutClass::Chunked {
                index: ChunkIndex::BtreeV1 { .. },
                ..
            } => Err(SwmrWriteError::BtreeIndex {
                index: "version 1 B-tree",
            }
            .into()),
            _ => Ok(()),
        }
    }

    /// Keeps the object header at relative `addr` in the cache, unwritten by evictions, until
    /// the next flush orders it after its chunk index (SWMR-writing mode only; call before the
    /// header changes).
    pub(crate) fn swmr_pin_header(&self, addr: u64) -> Result<()> {
        if !self.is_legacy_swmr_writer() {
            return Ok(());
        }
        let mut pinned = self
            .legacy_swmr
            .pinned
            .lock()
            .map_err(|_| Error::Poisoned)?;
        if pinned.contains(&addr) {
            return Ok(());
        }
        let abs = self.abs(addr)?;
        let mut meta = self.meta.lock().map_err(|_| Error::Poisoned)?;
        let h = meta
            .protect(
                MetadataKind::ObjectHeader.id(),
                abs,
                &crate::object::first_chunk_load(addr),
                ProtectFlags::NONE,
            )
            .map_err(cache_error)?;
        let pin = meta.pin_protected(abs).map_err(cache_error);
        meta.unprotect(h, UnprotectFlags::NONE)
            .map_err(|e| Error::Cache(e.error))?;
        pin?;
        pinned.insert(addr);
        Ok(())
    }

    /// Before the metadata cache flushes (raw data and chunk index records are in place): each
    /// pinned object header becomes the flush-dependency parent of its chunk index's top
    /// structure when that is cached (a dirty index always is: its dirty entries pin their
    /// parents up to the top), so the header is written after the whole index.
    pub(crate) fn swmr_order_headers(&self) -> Result<()> {
        if !self.is_legacy_swmr_writer() {
            return Ok(());
        }
        let pinned: Vec<u64> = self
            .legacy_swmr
            .pinned
            .lock()
            .map_err(|_| Error::Poisoned)?
            .iter()
            .copied()
            .collect();
        for oh in pinned {
            let Some(top) = self.chunk_index_top(oh)? else {
                continue;
            };
            let (parent, child) = (self.abs(oh)?, self.abs(top)?);
            let mut meta = self.meta.lock().map_err(|_| Error::Poisoned)?;
            if meta.has_flush_dependency(parent, child) == Some(false) {
                meta.create_flush_dependency(parent, child)
                    .map_err(cache_error)?;
            }
        }
        Ok(())
    }

    /// After the metadata cache flushed: the object headers and v2 B-tree headers pinned for
    /// the flush are let go, and a new flush epoch starts (every v2 B-tree node now in the
    /// file may be followed by a reader: it moves before it changes again).
    pub(crate) fn swmr_unpin_headers(&self) -> Result<()> {
        let take = |set: &Mutex<BTreeSet<u64>>| -> Result<BTreeSet<u64>> {
            Ok(std::mem::take(
                &mut *set.lock().map_err(|_| Error::Poisoned)?,
            ))
        };
        let pinned = take(&self.legacy_swmr.pinned)?;
        let trees = take(&self.legacy_swmr.pinned_trees)?;
        self.legacy_swmr
            .fresh_nodes
            .lock()
            .map_err(|_| Error::Poisoned)?
            .clear();
        let mut meta = self.meta.lock().map_err(|_| Error::Poisoned)?;
        for addr in pinned.into_iter().chain(trees) {
            meta.unpin(self.abs(addr)?).map_err(cache_error)?;
        }
        Ok(())
    }

    /// Whether the v2 B-tree node at relative `addr`, about to change, must first move to new
    /// space (libhdf5's shadowing, `H5B2__shadow_internal` and `H5B2__shadow_leaf`): in
    /// SWMR-writing mode, unless it was placed in the current flush epoch. A reader that read
    /// its parent before the flush still finds it intact at its old address (frees are held).
    pub(crate) fn swmr_must_shadow(&self, addr: u64) -> Result<bool> {
        if !self.is_legacy_swmr_writer() {
            return Ok(false);
        }
        let fresh = self
            .legacy_swmr
            .fresh_nodes
            .lock()
            .map_err(|_| Error::Poisoned)?;
        Ok(!fresh.contains(&addr))
    }

    /// Records that a v2 B-tree node was placed at relative `addr` in the current flush epoch
    /// (moved there or created): it changes in place until the next flush (SWMR-writing mode
    /// only).
    pub(crate) fn swmr_placed(&self, addr: u64) -> Result<()> {
        if self.is_legacy_swmr_writer() {
            self.legacy_swmr
                .fresh_nodes
                .lock()
                .map_err(|_| Error::Poisoned)?
                .insert(addr);
        }
        Ok(())
    }

    /// Whether the v2 B-tree header at relative `addr`, about to change, must be pinned until
    /// the next flush (SWMR-writing mode, not pinned yet; the caller pins it and records it
    /// with [`FileShared::swmr_tree_pinned`]): no eviction may write it before the flush,
    /// since nodes placed in this epoch change in place.
    pub(crate) fn swmr_must_pin_tree(&self, addr: u64) -> Result<bool> {
        if !self.is_legacy_swmr_writer() {
            return Ok(false);
        }
        Ok(!self
            .legacy_swmr
            .pinned_trees
            .lock()
            .map_err(|_| Error::Poisoned)?
            .contains(&addr))
    }

    /// Records the v2 B-tree header at relative `addr` as pinned until the next flush.
    pub(crate) fn swmr_tree_pinned(&self, addr: u64) -> Result<()> {
        self.legacy_swmr
            .pinned_trees
            .lock()
            .map_err(|_| Error::Poisoned)?
            .insert(addr);
        Ok(())
    }

    /// Leaves SWMR-writing mode at close, before the last flush: the superblock's status flags
    /// are cleared and the held frees are released by that flush.
    pub(crate) fn end_swmr_write(&self) -> Result<()> {
        if !self.legacy_swmr.active.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        self.allocator_hold(false)?;
        self.set_status_flags(0)
    }

    /// Turns the allocator's held frees on or off.
    fn allocator_hold(&self, on: bool) -> Result<()> {
        let alloc = self.alloc.as_ref().ok_or(Error::ReadOnly)?;
        alloc.lock().map_err(|_| Error::Poisoned)?.hold_frees(on);
        Ok(())
    }

    /// Relative address of the structure at the top of the chunk index of the dataset whose
    /// header is at relative `oh` (`None`: not chunked, or an index without a structure).
    fn chunk_index_top(&self, oh: u64) -> Result<Option<u64>> {
        let header = crate::object::ObjectHeader::load(self, oh)?;
        let layout = header.find(|m| match m {
            h5_format::message::Message::Layout(l) => Some(l.clone()),
            _ => None,
        });
        let index = match layout.map(|l| l.class) {
            Some(LayoutClass::Chunked { index, .. }) => index,
            _ => return Ok(None),
        };
        Ok(match index {
            ChunkIndex::BtreeV1 { address }
            | ChunkIndex::FixedArray { address, .. }
            | ChunkIndex::ExtensibleArray { address, .. }
            | ChunkIndex::BtreeV2 { address, .. } => {
                Some(address).filter(|a| *a != h5_format::UNDEFINED_ADDRESS)
            }
            _ => None,
        })
    }

    /// Sets the superblock's status flags (version 3) in its cache entry, written at the next
    /// flush (for a VFD SWMR writer, published at the next end of tick).
    pub(crate) fn set_status_flags(&self, flags: u32) -> Result<()> {
        let at = self.state()?.superblock_at;
        let mut meta = self.meta.lock().map_err(|_| Error::Poisoned)?;
        let icr = meta.pinned_icr_mut(at).map_err(cache_error)?;
        let sb = icr
            .value_mut::<Superblock>()
            .ok_or_else(|| Error::Unsupported("the superblock entry holds another type".into()))?;
        sb.consistency_flags = flags;
        meta.mark_dirty(at).map_err(cache_error)
    }
}
