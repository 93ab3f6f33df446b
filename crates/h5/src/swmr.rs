//! VFD SWMR through the public API: [`FileAccess::vfd_swmr`], the end-of-tick calls on
//! [`File`], and the guard every public call that reaches a file goes through (OQ-11): on the
//! outermost entry any expired end of tick runs (writer or reader), on the outermost exit any
//! expired writer end of tick.

use std::path::Path;
use std::sync::Arc;

use h5_core::file::FileShared;
use h5_core::guard::OnClose;
use h5_io::Storage;
use h5_swmr::SwmrConfig;

use crate::open::{Mode, open_path};
use crate::{CreateOptions, File, FileAccess, Result};

pub use h5_core::swmr::SwmrStatus;

/// Opens the HDF5 file of a VFD SWMR file by path with `access`'s locking (a writer creating
/// the file exclusive, shared once it is set up; a writer opening an existing file and readers
/// shared; all until close) and without
/// the rollback journal: a writer changes the HDF5 file only with writes delayed until every
/// reader has the pages from the metadata file, and a crash is recovered from the metadata
/// file (`h5 recover`, docs/design.md §8.5). A hot journal left by an earlier plain writer is
/// rolled back first all the same.
fn opener(
    path: &Path,
    mode: Mode,
    access: &FileAccess,
) -> impl Fn() -> Result<(Arc<dyn Storage>, OnClose)> {
    let access = access.clone().rollback_journal(false);
    let path = path.to_path_buf();
    move || {
        let opened = open_path(&path, mode, &access)?;
        Ok((opened.storage, opened.on_close))
    }
}

/// Creates the file at `path` as the VFD SWMR writer.
pub(crate) fn create(
    path: &Path,
    access: &FileAccess,
    options: &CreateOptions,
) -> Result<Arc<FileShared>> {
    let open = opener(path, Mode::Create, access);
    FileShared::create_swmr(path, access.settings(), options, &open)
}

/// Opens the file at `path` as the VFD SWMR writer (`writable`) or a reader.
pub(crate) fn open(path: &Path, access: &FileAccess, writable: bool) -> Result<Arc<FileShared>> {
    let mode = if writable {
        Mode::SwmrReadWrite
    } else {
        Mode::Read
    };
    let open = opener(path, mode, access);
    FileShared::open_swmr(path, access.settings(), writable, &open)
}

/// VFD SWMR runs only on files opened by path on a POSIX file system (the RFC's sec2 driver,
/// SWMR-078): any other storage is refused.
pub(crate) fn refuse_storage(access: &FileAccess) -> Result<()> {
    if access.settings().swmr.is_some() {
        return Err(crate::Error::Unsupported(
            "VFD SWMR needs a POSIX file opened by path (File::create_with, open_with, \
             open_rw_with), not another storage"
                .into(),
        ));
    }
    Ok(())
}

/// Runs `f` as one public API call (entry check, call, exit check).
pub(crate) fn api<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    h5_swmr::queue::api(f)
}

impl FileAccess {
    /// Opens (or creates) files with VFD SWMR (the seed's RFC): `config.writer` for
    /// [`File::create_with`] and [`File::open_rw_with`], a reader's config for
    /// [`File::open_with`]. Needs a page buffer ([`FileAccess::page_buffer`]) and the paged
    /// file-space strategy; a writer also needs the 1.10 formats or newer. See [`SwmrConfig`]
    /// for the user's duties (one writer; the same tick length, max_lag, reserved pages and
    /// metadata file location everywhere).
    pub fn vfd_swmr(mut self, config: SwmrConfig) -> Self {
        self.settings_mut().swmr = Some(config);
        self
    }

    /// The VFD SWMR configuration set, if any.
    pub fn vfd_swmr_config(&self) -> Option<&SwmrConfig> {
        self.settings().swmr.as_ref()
    }
}

impl File {
    /// Whether the file was opened with VFD SWMR.
    pub fn is_vfd_swmr(&self) -> bool {
        self.shared().is_swmr()
    }

    /// The VFD SWMR configuration the file was opened with (its own copy, SWMR-001).
    pub fn vfd_swmr_config(&self) -> Option<&SwmrConfig> {
        self.shared().swmr_config()
    }

    /// Runs end-of-tick processing now (a writer publishes, a reader takes the newest index):
    /// for manual ticks (`tick_len` 0), or to publish before a pause. An error when the file
    /// is not opened with VFD SWMR or end of tick is disabled.
    pub fn end_tick(&self) -> Result<()> {
        let g = h5_swmr::queue::enter_quiet();
        let out = self.shared().end_tick();
        let exit = g.exit();
        out?;
        Ok(exit?)
    }

    /// Suspends end of tick for this file until [`File::enable_end_of_tick`] (keep such
    /// periods short against the tick length). Disabling twice is an error.
    pub fn disable_end_of_tick(&self) -> Result<()> {
        api(|| self.shared().disable_end_of_tick())
    }

    /// Resumes end of tick, running it at once if the tick has expired. Enabling a file that
    /// is not disabled is an error.
    pub fn enable_end_of_tick(&self) -> Result<()> {
        api(|| self.shared().enable_end_of_tick())
    }

    /// The file's VFD SWMR state: role, tick, deadline, index size.
    pub fn vfd_swmr_status(&self) -> Result<SwmrStatus> {
        self.shared().swmr_status()
    }

    /// The metadata file index in use: the writer's last published one, or the reader's.
    pub fn vfd_swmr_index(&self) -> Result<Vec<h5_swmr::format::IndexEntry>> {
        self.shared().swmr_index()
    }
}
