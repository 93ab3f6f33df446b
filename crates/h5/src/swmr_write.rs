//! Legacy SWMR writing through the public API (docs/design.md §8.6): [`File::start_swmr_write`]
//! and [`FileAccess::swmr_write`], libhdf5's `H5Fstart_swmr_write` and `H5F_ACC_SWMR_WRITE`.
//! h5py readers follow such a writer with `File(path, "r", libver="latest", swmr=True)` and
//! `Dataset.refresh()`; h5 readers with [`FileAccess::swmr_read`] and [`crate::Dataset::refresh`].

pub use h5_core::legacy_swmr::SwmrWriteError;

use crate::{Error, File, FileAccess, Result};

impl File {
    /// Enters legacy SWMR-writing mode, as libhdf5's `H5Fstart_swmr_write` (h5py's
    /// `f.swmr_mode = True`): from now on every [`File::flush`] leaves a file that readers in
    /// other processes, opened with SWMR read access, read consistently while it grows.
    ///
    /// libhdf5's rules: the file is open for writing, its superblock is version 3 or newer and
    /// new objects use the 1.10 formats or newer (create it with
    /// [`crate::CreateOptions::with_bounds`]`(FormatBounds::V110, ..)` or newer; a file libhdf5
    /// wrote with `libver="latest"`); no page buffer, no VFD SWMR; not already in the mode.
    /// Otherwise [`SwmrWriteError`].
    ///
    /// In the mode: the superblock carries the write and SWMR-write status flags (cleared by
    /// [`File::close`]); the rollback journal is off and the file's lock shared; no freed
    /// space is reused before close; datasets are written and extended ([`Dataset::resize`]),
    /// but groups, datasets, links and attributes are neither created nor removed
    /// ([`SwmrWriteError::StructureChange`]). It is the weaker protocol: a reader sees each
    /// dataset as of the writer's last flush of it, with no file-wide snapshot and no bound on
    /// the delay (VFD SWMR, [`FileAccess::vfd_swmr`], has both).
    ///
    /// [`Dataset::resize`]: crate::Dataset::resize
    ///
    /// ```
    /// # fn main() -> h5::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use h5::{CreateOptions, FileAccess, FormatBounds};
    /// let options = CreateOptions::with_bounds(FormatBounds::V110, FormatBounds::LATEST);
    /// let file = h5::File::create_with(dir.path().join("s.h5"), &FileAccess::new(), &options)?;
    /// let d = file.new_dataset::<i64>().shape([0]).max_shape([None]).chunk([64]).create("d")?;
    /// file.start_swmr_write()?;
    /// for i in 0..3 {
    ///     d.resize([i + 1])?;
    ///     d.write_slice(&[i as i64], h5::ndarray::s![i..i + 1])?;
    ///     file.flush()?; // readers refreshing `d` now see i + 1 rows
    /// }
    /// assert!(file.is_swmr_writing());
    /// assert!(file.create_group("g").is_err());
    /// file.close()?;
    /// # Ok(()) }
    /// ```
    pub fn start_swmr_write(&self) -> Result<()> {
        crate::swmr::api(|| self.ctx(self.shared().start_swmr_write()))
    }

    /// Whether the file is in legacy SWMR-writing mode ([`File::start_swmr_write`]).
    pub fn is_swmr_writing(&self) -> bool {
        self.shared().is_legacy_swmr_writer()
    }
}

/// [`FileAccess::swmr_write`] applies to files opened with [`File::open_rw_with`]: a file
/// created in the mode could hold no objects.
pub(crate) fn refuse_at_create(access: &FileAccess) -> Result<()> {
    if access.is_swmr_write() {
        return Err(Error::Invalid(
            "FileAccess::swmr_write applies to File::open_rw_with: create the file and its \
             datasets, then call File::start_swmr_write"
                .into(),
        ));
    }
    Ok(())
}

/// Enters the mode right after [`File::open_rw_with`] opened `file`; the file is closed again
/// when it cannot.
pub(crate) fn enter_at_open(file: &File) -> Result<()> {
    if let Err(e) = file.start_swmr_write() {
        let _ = file.shared().close();
        return Err(e);
    }
    Ok(())
}
