//! Writes beyond whole arrays and hyperslabs: points, several datasets at once, and direct
//! chunk I/O (stored chunk images, the filters bypassed).

use std::sync::Arc;

use h5_chunkcache::selection::{Points, Selection};
use h5_core::file::FileShared;
use h5_core::write::CreateOptions;

use crate::types::{H5Type, encode_for};
use crate::{Dataset, Error, File, FileAccess, Result};

impl File {
    /// Creates a new, empty HDF5 file in `storage` (truncated first), for example in memory.
    /// External links and external raw data resolve against `dir` when given.
    pub fn create_in(
        storage: Arc<dyn h5_io::Storage>,
        access: &FileAccess,
        options: &CreateOptions,
        dir: Option<std::path::PathBuf>,
    ) -> Result<File> {
        crate::swmr::api(|| {
            crate::swmr::refuse_storage(access)?;
            let shared = FileShared::create(storage, access.settings(), options, dir)?;
            Ok(File::from_shared(shared, None))
        })
    }

    /// Opens the HDF5 file held by `storage` for reading and writing (any storage, for example
    /// one wrapped in a counting decorator). External links and external raw data resolve
    /// against `dir` when given.
    pub fn open_rw_in(
        storage: Arc<dyn h5_io::Storage>,
        access: &FileAccess,
        dir: Option<std::path::PathBuf>,
    ) -> Result<File> {
        crate::swmr::api(|| {
            crate::swmr::refuse_storage(access)?;
            let shared = FileShared::open_rw(storage, access.settings(), dir)?;
            Ok(File::from_shared(shared, None))
        })
    }

    /// Writes several whole datasets of this file in one chunk-cache call (their chunks are
    /// encoded together on the cache's worker threads): each pair is a dataset and all its
    /// elements in the file's representation, C order (what [`File::read_many_raw`] returns).
    pub fn write_many_raw(&self, datasets: &[(&Dataset, &[u8])]) -> Result<()> {
        crate::swmr::api(|| {
            let infos: Vec<_> = datasets.iter().map(|(d, _)| d.info()).collect();
            let reqs: Vec<(&h5_core::dataset::DatasetInfo, &[u8])> = infos
                .iter()
                .zip(datasets)
                .map(|(i, (_, b))| (&**i, *b))
                .collect();
            h5_core::write::io::write_many(self.shared(), &reqs).map_err(|e| self.wrap(e))
        })
    }
}

impl Dataset {
    /// Writes `values[i]` at the element `points[i]` (one coordinate per dimension).
    pub fn write_points<T: H5Type>(&self, points: &[Vec<u64>], values: &[T]) -> Result<()> {
        crate::swmr::api(|| {
            let rank = self.ndim();
            if points.iter().any(|p| p.len() != rank) {
                return Err(Error::Invalid(format!(
                    "points must have {rank} coordinates"
                )));
            }
            if points.len() != values.len() {
                return Err(Error::Invalid(format!(
                    "{} values for {} points",
                    values.len(),
                    points.len()
                )));
            }
            if points.is_empty() {
                return Ok(());
            }
            let conv = self.write_conversion::<T>()?;
            let flat: Vec<u64> = points.iter().flatten().copied().collect();
            let sel = Selection::Points(
                Points::new(rank, flat).map_err(|e| Error::Invalid(e.to_string()))?,
            );
            let info = self.info();
            let r =
                h5_core::write::dataset::prepare_write(self.file_shared(), &info).and_then(|()| {
                    encode_for(self.file_shared(), values, |b| {
                        let c = conv.as_ref().map(|c| c as &dyn h5_chunkcache::Conversion);
                        h5_core::write::dataset::write(self.file_shared(), &info, &sel, None, c, b)
                    })
                });
            self.ctx(r)
        })
    }

    /// The stored image of the chunk starting at element `offset` and its filter mask (bit `i`
    /// set: filter `i` of the pipeline was skipped), or `None` if the chunk was never written.
    /// The bytes are as on disk: compressed, checksummed.
    pub fn read_chunk(&self, offset: &[u64]) -> Result<Option<(u32, Vec<u8>)>> {
        crate::swmr::api(|| {
            let r = h5_core::write::io::read_chunk(self.file_shared(), &self.info(), offset);
            self.ctx(r)
        })
    }

    /// Writes `bytes` as the stored image of the chunk starting at element `offset`, bypassing
    /// the filters (the caller encoded it; `filter_mask` bit `i` set says filter `i` was
    /// skipped). libhdf5's `H5Dwrite_chunk`.
    pub fn write_chunk(&self, offset: &[u64], filter_mask: u32, bytes: &[u8]) -> Result<()> {
        crate::swmr::api(|| {
            let info = self.info();
            let r = h5_core::write::io::write_chunk(
                self.file_shared(),
                &info,
                offset,
                filter_mask,
                bytes,
            );
            self.ctx(r)
        })
    }
}
