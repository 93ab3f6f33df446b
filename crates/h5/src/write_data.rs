//! Writing datasets from `ndarray` arrays (any memory layout) or slices, with the numeric
//! conversions reads allow; resizing and appending.

use h5_chunkcache::Conversion;
use h5_chunkcache::selection::{Hyperslab, Selection};
use h5_core::dataset::DatasetInfo;
use h5_core::write::chunk_index::ChunkIndexKind;
use h5_format::message::dataspace::MAX_RANK;
use ndarray::{ArrayView, Axis, Dimension, IxDyn, SliceInfoElem};

use crate::convert::{WriteMode, check_shape, encode_view_for, write_conversion};
use crate::types::H5Type;
use crate::{Dataset, Error, Result};

impl Dataset {
    /// Writes the elements of `view` into the selection `sel` of shape `target`.
    fn write_selection<T: H5Type>(
        &self,
        info: &DatasetInfo,
        view: ArrayView<'_, T, IxDyn>,
        sel: &Selection,
        target: &[usize],
        mode: WriteMode,
    ) -> Result<()> {
        check_shape(view.shape(), target, self.path())?;
        let conv = write_conversion::<T>(self.dtype(), mode, self.path())?;
        if view.is_empty() {
            return Ok(());
        }
        let file = self.file_shared();
        // Storage waiting for its first write is allocated before variable-length data is
        // encoded into the global heap (so blocks land where libhdf5 puts them).
        let r = h5_core::write::dataset::prepare_write_in(file, self.live_slot(), info).and_then(
            |()| {
                encode_view_for(file, &view, |bytes, _| {
                    let c = conv.as_ref().map(|c| c as &dyn Conversion);
                    h5_core::write::dataset::write_in(
                        file,
                        self.live_slot(),
                        info,
                        sel,
                        None,
                        c,
                        bytes,
                    )
                })
            },
        );
        self.ctx(r)
    }

    fn write_all<T: H5Type>(&self, view: ArrayView<'_, T, IxDyn>, mode: WriteMode) -> Result<()> {
        let info = self.info();
        let target: Vec<usize> = info.dims().iter().map(|&d| d as usize).collect();
        self.write_selection(&info, view, &Selection::All, &target, mode)
    }

    /// Writes every element from `data`: an array of the dataset's shape in any memory layout
    /// (`&array`, `array.view()`, `array.t()`), or a slice or `Vec` holding every element in C
    /// order. Elements of another numeric type than the dataset's are converted when no value
    /// can change (`i16` into `f32`, `u8` into `i64`); narrowing (`f64` into `f32`) is an
    /// error unless asked for with [`Dataset::write_lossy`]. Other types must be the
    /// dataset's.
    ///
    /// ```
    /// # fn main() -> h5::Result<()> {
    /// use h5::ndarray::{Array2, ShapeBuilder};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let file = h5::File::create(dir.path().join("write.h5"))?;
    /// let ds = file.new_dataset::<f32>().shape([2, 3]).create("x")?;
    /// // A Fortran-order array is written in the dataset's C order.
    /// let a = Array2::from_shape_vec((2, 3).f(), vec![1i16, 4, 2, 5, 3, 6]).unwrap();
    /// ds.write(&a)?;
    /// assert_eq!(ds.read_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// assert!(ds.write(&[0.5f64; 6]).is_err()); // f64 into f32 may round
    /// ds.write_lossy(&[0.5f64; 6])?;
    /// # Ok(()) }
    /// ```
    pub fn write<'a, T: H5Type + 'a, D: Dimension>(
        &self,
        data: impl Into<ArrayView<'a, T, D>>,
    ) -> Result<()> {
        crate::swmr::api(|| self.write_all(data.into().into_dyn(), WriteMode::Lossless))
    }

    /// [`Dataset::write`] allowing narrowing numeric conversions (floats truncated toward
    /// zero, out-of-range values saturated, as libhdf5 converts).
    pub fn write_lossy<'a, T: H5Type + 'a, D: Dimension>(
        &self,
        data: impl Into<ArrayView<'a, T, D>>,
    ) -> Result<()> {
        crate::swmr::api(|| self.write_all(data.into().into_dyn(), WriteMode::Lossy))
    }

    /// Writes the only element of a scalar (or one-element) dataset.
    pub fn write_scalar<T: H5Type>(&self, value: &T) -> Result<()> {
        crate::swmr::api(|| {
            let view = ArrayView::from_shape(IxDyn(&[1]), std::slice::from_ref(value))
                .map_err(|e| Error::Invalid(e.to_string()))?;
            self.write_all(view, WriteMode::Lossless)
        })
    }

    /// Writes `data` into the hyperslab `slice` (ndarray's `s![..]`): an array of the shape
    /// the slice selects (indexed dimensions dropped) in any memory layout, or a flat slice of
    /// as many elements in C order. Converts numbers as [`Dataset::write`] does.
    ///
    /// ```
    /// # fn main() -> h5::Result<()> {
    /// use h5::ndarray::{arr2, s};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let file = h5::File::create(dir.path().join("slab.h5"))?;
    /// let ds = file.new_dataset::<u8>().shape([3, 3]).create("x")?;
    /// let block = arr2(&[[1u8, 2], [3, 4]]);
    /// ds.write_slice(block.t(), s![1.., ..2])?;
    /// assert_eq!(ds.read_vec::<u8>()?, [0, 0, 0, 1, 3, 0, 2, 4, 0]);
    /// # Ok(()) }
    /// ```
    pub fn write_slice<'a, T: H5Type + 'a, D: Dimension>(
        &self,
        data: impl Into<ArrayView<'a, T, D>>,
        slice: impl AsRef<[SliceInfoElem]>,
    ) -> Result<()> {
        crate::swmr::api(|| {
            let info = self.info();
            let (slab, shape) = crate::slice::hyperslab_reusing(
                slice.as_ref(),
                info.dims(),
                crate::slice::take_kept(),
            )?;
            let sel = Selection::Hyperslab(slab);
            let r = self.write_selection(
                &info,
                data.into().into_dyn(),
                &sel,
                &shape,
                WriteMode::Lossless,
            );
            if let Selection::Hyperslab(slab) = sel {
                crate::slice::keep(slab, shape);
            }
            r
        })
    }

    /// Changes the dimensions of a chunked dataset (growing within the maximum shape, or
    /// shrinking). Every handle of the dataset sees the new shape.
    pub fn resize(&self, dims: impl AsRef<[usize]>) -> Result<()> {
        crate::swmr::api(|| {
            let dims = dims.as_ref();
            let mut wide = [0u64; MAX_RANK];
            let Some(slots) = wide.get_mut(..dims.len()) else {
                return Err(Error::Invalid(format!(
                    "{}: {} dimensions (at most {MAX_RANK})",
                    self.path(),
                    dims.len()
                )));
            };
            for (w, d) in slots.iter_mut().zip(dims) {
                *w = *d as u64;
            }
            let info = self.info();
            let r = h5_core::write::dataset::resize_in(
                self.file_shared(),
                self.live_slot(),
                info,
                slots,
            );
            self.ctx(r).map(|_| ())
        })
    }

    /// Appends `data` along the first dimension: the dataset grows by as many rows as `data`
    /// holds (its first dimension must be unlimited or have room) and they are written after
    /// the last row. `data` holds rows of the dataset's other dimensions: an array of the
    /// dataset's rank, or one row (one rank less; a single element for a one-dimensional
    /// dataset). Two handles appending at the same time may interleave their rows: append
    /// from one thread, or hold a lock around it.
    pub fn append<'a, T: H5Type + 'a, D: Dimension>(
        &self,
        data: impl Into<ArrayView<'a, T, D>>,
    ) -> Result<()> {
        crate::swmr::api(|| {
            let view = data.into().into_dyn();
            let info = self.info();
            let dims: Vec<usize> = info.dims().iter().map(|&d| d as usize).collect();
            let Some((&old, rest)) = dims.split_first() else {
                return Err(Error::Invalid(format!(
                    "{}: appending to a scalar dataset",
                    self.path()
                )));
            };
            let (rows, view) = if view.ndim() == dims.len() && view.shape().get(1..) == Some(rest) {
                (view.shape()[0], view)
            } else if view.shape() == rest {
                (1, view.insert_axis(Axis(0)))
            } else {
                return Err(Error::Invalid(format!(
                    "{}: appending data of shape {:?} to a dataset of shape {dims:?}",
                    self.path(),
                    view.shape()
                )));
            };
            if rows == 0 {
                return Ok(());
            }
            let mut grown = dims.clone();
            grown[0] = old
                .checked_add(rows)
                .ok_or_else(|| Error::Invalid(format!("{}: too many rows", self.path())))?;
            self.resize(&grown)?;
            let mut start = vec![0u64; dims.len()];
            start[0] = old as u64;
            let mut count: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
            count[0] = rows as u64;
            let ones = vec![1u64; dims.len()];
            let slab = Hyperslab::new(&start, &ones, &count, &ones)
                .map_err(|e| Error::Invalid(e.to_string()))?;
            let target: Vec<usize> = count.iter().map(|&c| c as usize).collect();
            let info = self.info();
            self.write_selection(
                &info,
                view,
                &Selection::Hyperslab(slab),
                &target,
                WriteMode::Lossless,
            )
        })
    }

    /// The chunk index of a chunked dataset (`None`: not chunked).
    pub fn chunk_index(&self) -> Option<ChunkIndexKind> {
        match &self.info().layout.class {
            h5_format::message::layout::LayoutClass::Chunked { index, .. } => {
                Some(ChunkIndexKind::of(index))
            }
            _ => None,
        }
    }

    /// The conversion `T`'s elements need to be written to this dataset (see
    /// [`Dataset::write`]).
    pub(crate) fn write_conversion<T: H5Type>(
        &self,
    ) -> Result<Option<h5_core::convert::NumConversion>> {
        write_conversion::<T>(self.dtype(), WriteMode::Lossless, self.path())
    }
}
