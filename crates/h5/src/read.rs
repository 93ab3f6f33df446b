//! Reading datasets: one generic family for every [`H5Type`].
//!
//! [`Dataset::read`] is the entry point (the whole dataset as an `ndarray` array of any
//! `H5Type`); the others are conveniences around it: fixed ranks ([`Dataset::read_1d`],
//! [`Dataset::read_2d`]), a flat vector ([`Dataset::read_vec`], hdf5-metno's `read_raw`), one
//! element ([`Dataset::read_scalar`]), selections ([`Dataset::read_slice`],
//! [`Dataset::read_points`]), narrowing numbers ([`Dataset::read_lossy`]). Numbers are read
//! straight into the result through the chunk cache's conversion; other types are read as
//! file bytes and decoded element by element.

use h5_chunkcache::selection::{Points, Selection};
use h5_core::convert::{NumConversion, num_type};
use h5_core::dataset::{DatasetInfo, read};
use ndarray::{Array1, Array2, ArrayD, Ix1, Ix2, SliceInfoElem};

use crate::attribute::{into_dim, one};
use crate::convert::to_array;
use crate::types::{DecodeCtx, H5Num, H5Type};
use crate::{Dataset, Error, Result};

impl Dataset {
    /// The `n` elements `sel` selects as `T`s, in selection order.
    fn read_selected<T: H5Type>(
        &self,
        info: &DatasetInfo,
        sel: &Selection,
        n: usize,
        lossy: bool,
    ) -> Result<Vec<T>> {
        if self.is_null() || n == 0 {
            return Ok(Vec::new());
        }
        let file = self.file_shared();
        if let Some(from) = num_type(self.dtype()) {
            let mut fill = |to, bytes: &mut [u8]| -> Result<()> {
                let conv = NumConversion::new(from, to, lossy)?;
                let c: Option<&dyn h5_chunkcache::Conversion> =
                    (!conv.is_identity()).then_some(&conv);
                read(file, info, sel, None, c, bytes)
            };
            if let Some(v) = T::h5_read_numbers(n, &mut fill) {
                return self.ctx(v);
            }
        }
        let raw = self.read_bytes(info, sel, n)?;
        self.ctx(T::h5_decode_all(self.dtype(), &raw, &DecodeCtx::new(file)))
    }

    /// The `n` elements `sel` selects in the file representation.
    fn read_bytes(&self, info: &DatasetInfo, sel: &Selection, n: usize) -> Result<Vec<u8>> {
        let len = (n as u64).checked_mul(self.element_size() as u64);
        let mut buf = h5_core::buffer::zeroed(|| format!("reading {}", self.path()), len)?;
        if !buf.is_empty() {
            self.ctx(read(self.file_shared(), info, sel, None, None, &mut buf))?;
        }
        Ok(buf)
    }

    /// The whole dataset as `T`s, with its shape.
    fn read_all<T: H5Type>(&self, lossy: bool) -> Result<ArrayD<T>> {
        let info = self.info();
        let shape: Vec<usize> = if self.is_null() {
            vec![0]
        } else {
            info.dims().iter().map(|&d| d as usize).collect()
        };
        let n = element_count(&shape, self.path())?;
        let v = self.read_selected(&info, &Selection::All, n, lossy)?;
        to_array(v, &shape)
    }

    /// The whole dataset as an array of `T` (0-dimensional for a scalar dataset, empty for a
    /// null one), converted from the file's type as libhdf5 converts, losslessly: numbers of
    /// any width and byte order into a type that holds every value (narrowing is an error:
    /// see [`Dataset::read_lossy`]), compound members and enumeration values by name, strings
    /// of either kind, sequences, arrays and references. Works for every [`H5Type`].
    ///
    /// ```
    /// # fn main() -> h5::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let file = h5::File::create(dir.path().join("read.h5"))?;
    /// let ds = file.new_dataset::<i16>().shape([2, 2]).create("x")?;
    /// ds.write(&h5::ndarray::arr2(&[[1i16, 2], [3, 4]]))?;
    /// let a = ds.read::<f64>()?; // i16 fits in f64
    /// assert_eq!(a[[1, 0]], 3.0);
    /// assert!(ds.read::<u8>().is_err()); // would lose values
    /// # Ok(()) }
    /// ```
    pub fn read<T: H5Type>(&self) -> Result<ArrayD<T>> {
        crate::swmr::api(|| self.read_all(false))
    }

    /// The whole dataset as `T`, allowing narrowing numeric conversions (floats truncated
    /// toward zero, out-of-range values saturated, as libhdf5 converts).
    pub fn read_lossy<T: H5Type>(&self) -> Result<ArrayD<T>> {
        crate::swmr::api(|| self.read_all(true))
    }

    /// Every element as a `T`, C order (hdf5-metno's `read_raw`, h5py's `ds[()].ravel()`).
    pub fn read_vec<T: H5Type>(&self) -> Result<Vec<T>> {
        crate::swmr::api(|| {
            let info = self.info();
            self.read_selected(&info, &Selection::All, self.size(), false)
        })
    }

    /// A one-dimensional dataset.
    pub fn read_1d<T: H5Type>(&self) -> Result<Array1<T>> {
        crate::swmr::api(|| into_dim::<T, Ix1>(self.read()?))
    }

    /// A two-dimensional dataset.
    pub fn read_2d<T: H5Type>(&self) -> Result<Array2<T>> {
        crate::swmr::api(|| into_dim::<T, Ix2>(self.read()?))
    }

    /// The only element of a scalar (or one-element) dataset.
    pub fn read_scalar<T: H5Type>(&self) -> Result<T> {
        crate::swmr::api(|| one(self.read_vec()?, self.path()))
    }

    /// A hyperslab described like ndarray's `s![..]` (steps must be positive), with the shape
    /// the slice gives (indexed dimensions dropped).
    ///
    /// ```
    /// # fn main() -> h5::Result<()> {
    /// use h5::ndarray::s;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let file = h5::File::create(dir.path().join("slice.h5"))?;
    /// let ds = file.new_dataset::<u32>().shape([4, 5]).create("x")?;
    /// ds.write(&(0..20).collect::<Vec<u32>>())?;
    /// let a = ds.read_slice::<u32>(s![1..3, ..;2])?;
    /// assert_eq!(a.shape(), [2, 3]);
    /// assert_eq!(a[[1, 2]], 14);
    /// # Ok(()) }
    /// ```
    pub fn read_slice<T: H5Type>(&self, slice: impl AsRef<[SliceInfoElem]>) -> Result<ArrayD<T>> {
        crate::swmr::api(|| {
            let info = self.info();
            let (slab, shape) = crate::slice::hyperslab(slice.as_ref(), info.dims())?;
            let n = element_count(&shape, self.path())?;
            let v = self.read_selected(&info, &Selection::Hyperslab(slab), n, false)?;
            to_array(v, &shape)
        })
    }

    /// The elements at `points` (each a coordinate of the dataset's rank), in the given order.
    pub fn read_points<T: H5Type>(&self, points: &[Vec<u64>]) -> Result<Vec<T>> {
        crate::swmr::api(|| {
            let rank = self.ndim();
            if points.iter().any(|p| p.len() != rank) {
                return Err(Error::Invalid(format!(
                    "{}: points must have {rank} coordinates",
                    self.path()
                )));
            }
            let flat: Vec<u64> = points.iter().flatten().copied().collect();
            let sel = Selection::Points(
                Points::new(rank, flat).map_err(|e| Error::Invalid(e.to_string()))?,
            );
            let info = self.info();
            self.read_selected(&info, &sel, points.len(), false)
        })
    }

    /// Reads the whole dataset into `out`, C order, converting to `T` (lossless conversions
    /// only), without allocating the result: `out` must hold exactly [`Dataset::size`]
    /// elements. Reuse one buffer for many reads, or read into memory laid out as you need.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("r.h5");
    /// # let f = h5::File::create(&path)?;
    /// # f.new_dataset::<i32>().shape([2, 3]).create("d")?.write(&[1, 2, 3, 4, 5, 6])?;
    /// # f.close()?;
    /// let ds = h5::File::open(&path)?.dataset("d")?;
    /// let mut buf = vec![0i64; ds.size()];
    /// ds.read_into(&mut buf)?; // i32 in the file, widened to i64
    /// assert_eq!(buf, [1, 2, 3, 4, 5, 6]);
    /// # Ok::<(), h5::Error>(())
    /// ```
    pub fn read_into<T: H5Num>(&self, out: &mut [T]) -> Result<()> {
        crate::swmr::api(|| {
            let info = self.info();
            let n = if self.is_null() { 0 } else { self.size() };
            self.read_numbers_into(&info, &Selection::All, n, out)
        })
    }

    /// Reads a hyperslab (described like ndarray's `s![..]`, positive steps) into `out`, C
    /// order of the hyperslab's shape, without allocating the result: `out` must hold exactly
    /// the hyperslab's number of elements.
    ///
    /// ```
    /// use h5::ndarray::s;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("s.h5");
    /// # let f = h5::File::create(&path)?;
    /// # f.new_dataset::<f32>().shape([3, 3]).create("d")?
    /// #     .write(&[0f32, 1., 2., 3., 4., 5., 6., 7., 8.])?;
    /// # f.close()?;
    /// let ds = h5::File::open(&path)?.dataset("d")?;
    /// let mut block = [0f32; 4];
    /// ds.read_slice_into(s![1..3, 0..2], &mut block)?;
    /// assert_eq!(block, [3., 4., 6., 7.]);
    /// # Ok::<(), h5::Error>(())
    /// ```
    pub fn read_slice_into<T: H5Num>(
        &self,
        slice: impl AsRef<[SliceInfoElem]>,
        out: &mut [T],
    ) -> Result<()> {
        crate::swmr::api(|| {
            let info = self.info();
            let (slab, shape) = crate::slice::hyperslab(slice.as_ref(), info.dims())?;
            let n = element_count(&shape, self.path())?;
            self.read_numbers_into(&info, &Selection::Hyperslab(slab), n, out)
        })
    }

    /// The `n` elements `sel` selects, converted to `T` straight into `out` (which must hold
    /// exactly `n`; refused untouched otherwise).
    fn read_numbers_into<T: H5Num>(
        &self,
        info: &DatasetInfo,
        sel: &Selection,
        n: usize,
        out: &mut [T],
    ) -> Result<()> {
        if out.len() != n {
            return Err(Error::Invalid(format!(
                "{}: the destination holds {} elements, the selection {n}",
                self.path(),
                out.len()
            )));
        }
        if n == 0 {
            return Ok(());
        }
        let from = num_type(self.dtype()).ok_or_else(|| {
            Error::Invalid(format!(
                "{}: {} is not a numeric type",
                self.path(),
                self.dtype().describe()
            ))
        })?;
        let conv = NumConversion::new(from, T::TYPE, false)?;
        let c: Option<&dyn h5_chunkcache::Conversion> = (!conv.is_identity()).then_some(&conv);
        let r = read(
            self.file_shared(),
            info,
            sel,
            None,
            c,
            bytemuck::cast_slice_mut(out),
        );
        self.ctx(r)
    }

    /// Every element in the file representation, C order.
    pub fn read_raw(&self) -> Result<Vec<u8>> {
        crate::swmr::api(|| {
            if self.is_null() {
                return Ok(Vec::new());
            }
            let info = self.info();
            self.read_bytes(&info, &Selection::All, self.size())
        })
    }

    /// The elements as strings (fixed or variable length): the same as
    /// `read_vec::<String>()`, kept as a convenience.
    pub fn read_strings(&self) -> Result<Vec<String>> {
        crate::swmr::api(|| {
            let raw = self.read_raw()?;
            self.ctx(h5_core::values::strings(
                self.file_shared(),
                self.dtype(),
                &raw,
            ))
        })
    }

    /// Every element as a [`Value`](crate::Value), whatever the datatype (compound, enum,
    /// array, variable-length, reference, ...), in C order: for code that does not know the
    /// type in advance.
    pub fn read_values(&self) -> Result<Vec<crate::Value>> {
        crate::swmr::api(|| {
            let raw = self.read_raw()?;
            self.ctx(h5_core::values::values(
                self.file_shared(),
                self.dtype(),
                &raw,
            ))
        })
    }
}

/// The number of elements of `shape`, or an error naming `path` when it overflows.
fn element_count(shape: &[usize], path: &str) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, d| a.checked_mul(*d))
        .ok_or_else(|| Error::too_large(format!("reading {path}"), None))
}
