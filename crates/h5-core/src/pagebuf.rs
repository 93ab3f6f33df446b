//! The page buffer between the caches and the file's storage (`h5-pagebuf`): the metadata
//! cache reads and writes through its metadata face, the chunk cache (and every direct raw-data
//! write) through its raw-data face. It starts passing everything through and buffers pages
//! once the file's page size is known: from the creation options, or from the superblock
//! extension's file space info message at open. As in libhdf5 (`H5PB_create`), a page buffer
//! needs the paged file-space strategy.
//!
//! The file's [`GuardedStorage`] sits above the page buffer: the engine and the chunk cache use
//! the guard over the raw-data face, the metadata cache a view of it over the metadata face,
//! both under one failed/closed state. A page buffer's own write-back failing is then reported
//! through the face call that caused it and fails the file, and a VFD SWMR end of tick that
//! fails fails it too (`swmr.rs`).

use std::sync::Arc;

use h5_format::message::file_space_info::FileSpaceStrategy;
use h5_io::Storage;
use h5_pagebuf::{PageBuffer, PageBufferError};

use crate::error::{Error, Result};
use crate::file::{CacheSettings, FileShared};
use crate::guard::GuardedStorage;

/// The storages of a file: (the guard the engine and the chunk cache use, its view the
/// metadata cache uses, the page buffer behind both if any).
pub(crate) type Faces = (
    Arc<GuardedStorage>,
    Arc<GuardedStorage>,
    Option<Arc<PageBuffer>>,
);

/// Puts a page buffer over `storage` when one is configured (passing through until enabled),
/// in VFD SWMR writer or reader mode when the settings ask for VFD SWMR, and the guard over
/// its faces (or over `storage` itself without a page buffer).
pub(crate) fn faces(storage: Arc<dyn Storage>, settings: &CacheSettings) -> Result<Faces> {
    match &settings.page_buffer {
        Some(c) if c.size() > 0 => {
            let pb = PageBuffer::new(storage, *c)?;
            match &settings.swmr {
                Some(s) if s.writer => pb.start_swmr_writer(s.max_lag_ticks(), 1)?,
                Some(_) => pb.start_swmr_reader()?,
                None => {}
            }
            let raw = GuardedStorage::new(pb.raw());
            let meta = raw.view(pb.metadata());
            Ok((raw, meta, Some(pb)))
        }
        _ => {
            let g = GuardedStorage::new(storage);
            Ok((Arc::clone(&g), g, None))
        }
    }
}

fn not_paged() -> Error {
    Error::PageBuffer(PageBufferError::RequiresPagedStrategy)
}

impl FileShared {
    /// The page buffer, when the file was opened with one.
    pub fn page_buffer(&self) -> Option<&Arc<PageBuffer>> {
        self.pagebuf.as_ref()
    }

    /// The page buffer's statistics, when the file has one.
    pub fn page_buffer_stats(&self) -> Option<h5_pagebuf::PageBufferStats> {
        self.pagebuf.as_ref().map(|p| p.stats())
    }

    /// Starts the page buffer of an opened file with the page size its file space info
    /// message records; a file without the paged strategy cannot have one.
    pub(crate) fn enable_page_buffer_from_file(&self) -> Result<()> {
        let Some(pb) = &self.pagebuf else {
            return Ok(());
        };
        match self.file_space_info()? {
            Some(info) if info.strategy == FileSpaceStrategy::Page => {
                pb.enable(info.page_size)?;
                self.check_pages_if_swmr_writer(pb, info.page_size)
            }
            _ => Err(not_paged()),
        }
    }

    /// Starts the page buffer of a new file with the page size of its creation options.
    pub(crate) fn enable_page_buffer_for_new(
        &self,
        options: &crate::write::fspace::FileSpaceOptions,
    ) -> Result<()> {
        let Some(pb) = &self.pagebuf else {
            return Ok(());
        };
        if options.strategy() != crate::space::SpaceStrategy::Page {
            return Err(not_paged());
        }
        pb.enable(options.page_size())?;
        self.check_pages_if_swmr_writer(pb, options.page_size())
    }

    /// A VFD SWMR writer's metadata cache refuses entries misaligned across pages, other than
    /// array data block pages (SWMR-074).
    fn check_pages_if_swmr_writer(&self, pb: &PageBuffer, page_size: u64) -> Result<()> {
        if pb.tick().is_some() {
            self.meta
                .lock()
                .map_err(|_| Error::Poisoned)?
                .set_page_check(Some(page_size));
        }
        Ok(())
    }
}
