//! VFD SWMR through the public API: [`FileAccess::vfd_swmr`], the end-of-tick calls on
//! [`File`], and the guard every public call that reaches a file goes through (OQ-11): on the
//! outermost entry any expired end of tick runs (writer or reader), on the outermost exit any
//! expired writer end of tick.

use h5_swmr::SwmrConfig;

use crate::{File, FileAccess, Result};

pub use h5_core::swmr::SwmrStatus;

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
