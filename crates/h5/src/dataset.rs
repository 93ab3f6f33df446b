//! Datasets.

use std::sync::Arc;

use h5_chunkcache::selection::{Points, Selection};
use h5_core::dataset::{DatasetInfo, read};
use h5_core::file::FileShared;
use h5_core::nav::{ObjectKind as CoreKind, Resolved};
use h5_core::object::ObjectHeader;
use h5_core::values::{numbers, strings};
use h5_format::message::dataspace::UNLIMITED;
use ndarray::{Array1, Array2, ArrayD, Ix1, Ix2, IxDyn, SliceInfoElem};

use crate::{Attribute, Datatype, Error, H5Num, Result};

/// One filter of a dataset's pipeline.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FilterInfo {
    /// Registered filter id (1 deflate, 2 shuffle, 3 fletcher32, …).
    pub id: u16,
    /// The name stored in the file, if any.
    pub name: Option<String>,
    /// Client data (parameters).
    pub params: Vec<u32>,
    /// Whether the filter is optional.
    pub optional: bool,
}

/// A dataset.
#[derive(Clone, Debug)]
pub struct Dataset {
    file: Arc<FileShared>,
    header: Arc<ObjectHeader>,
    info: DatasetInfo,
    path: String,
}

impl Dataset {
    pub(crate) fn open(file: &Arc<FileShared>, path: &str) -> Result<Dataset> {
        let r = h5_core::nav::resolve(file, file.root_address(), "/", path)?;
        Self::from_resolved(r)
    }

    pub(crate) fn from_resolved(r: Resolved) -> Result<Dataset> {
        let kind = CoreKind::of(&r.header);
        if kind != CoreKind::Dataset {
            return Err(Error::WrongKind {
                path: r.path,
                expected: "dataset",
                found: kind.name(),
            });
        }
        let info = DatasetInfo::from_header(&r.file, &r.header)?;
        Ok(Dataset {
            file: r.file,
            header: r.header,
            info,
            path: r.path,
        })
    }

    pub(crate) fn info(&self) -> &DatasetInfo {
        &self.info
    }

    pub(crate) fn set_info(&mut self, info: DatasetInfo) {
        self.info = info;
    }

    pub(crate) fn file_shared(&self) -> &Arc<FileShared> {
        &self.file
    }

    /// The object header's address (relative to the superblock): the dataset's identity.
    pub fn address(&self) -> u64 {
        self.header.address
    }

    /// Stored (encoded) size in bytes of each allocated chunk, or of the contiguous block in
    /// the file; empty for compact, external, virtual and unallocated data.
    pub fn stored_sizes(&self) -> Result<Vec<u64>> {
        h5_core::dataset::stored_sizes(&self.file, &self.info)
    }

    /// The dataset's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The shape.
    pub fn shape(&self) -> Vec<usize> {
        self.info.dims().iter().map(|&d| d as usize).collect()
    }

    /// The maximum shape (`None` for unlimited dimensions).
    pub fn maxshape(&self) -> Vec<Option<usize>> {
        match &self.info.dataspace.max_dims {
            Some(m) => m
                .iter()
                .map(|&d| (d != UNLIMITED).then_some(d as usize))
                .collect(),
            None => self.shape().into_iter().map(Some).collect(),
        }
    }

    /// Whether the dataspace is null (no elements at all, unlike a scalar's one).
    pub fn is_null(&self) -> bool {
        self.info.dataspace.kind == h5_format::message::dataspace::DataspaceKind::Null
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.info.dims().len()
    }

    /// Number of elements.
    pub fn size(&self) -> usize {
        if self.is_null() {
            return 0;
        }
        self.info.dims().iter().product::<u64>() as usize
    }

    /// Bytes per element in the file.
    pub fn element_size(&self) -> usize {
        self.info.elem_size()
    }

    /// The element type in the file.
    pub fn dtype(&self) -> &Datatype {
        &self.info.datatype
    }

    /// The chunk shape, if chunked.
    pub fn chunk(&self) -> Option<Vec<usize>> {
        self.info
            .chunk_dims()
            .map(|c| c.into_iter().map(|d| d as usize).collect())
    }

    /// The storage layout's name: "compact", "contiguous", "chunked" or "virtual".
    pub fn layout_name(&self) -> &'static str {
        use h5_format::message::layout::LayoutClass as L;
        match self.info.layout.class {
            L::Compact { .. } => "compact",
            L::Contiguous { .. } => "contiguous",
            L::Chunked { .. } => "chunked",
            L::Virtual { .. } => "virtual",
        }
    }

    /// The filter pipeline.
    pub fn filters(&self) -> Vec<FilterInfo> {
        self.info
            .pipeline
            .as_ref()
            .map(|p| {
                p.filters
                    .iter()
                    .map(|f| FilterInfo {
                        id: f.id,
                        name: f
                            .name
                            .as_ref()
                            .map(|n| String::from_utf8_lossy(n).trim_end_matches('\0').to_owned()),
                        params: f.client_data.clone(),
                        optional: f.flags & 1 != 0,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The fill value's bytes (file representation), if defined.
    pub fn fill_value_raw(&self) -> Option<&[u8]> {
        self.info.fill.as_deref()
    }

    /// Reads `n` selected elements straight into a new `Vec<T>` (allocated as numpy allocates
    /// arrays: [`h5_io::buffer::zeroed_vec`]); the chunk cache converts (or copies) each
    /// element into its place, with no intermediate buffer.
    fn read_typed<T: H5Num>(&self, sel: &Selection, n: usize, lossy: bool) -> Result<Vec<T>> {
        if self.is_null() {
            return Ok(Vec::new());
        }
        let mut out = h5_io::buffer::zeroed_vec::<T>(n);
        self.read_typed_into(sel, &mut out, lossy)?;
        Ok(out)
    }

    /// Reads the selected elements (exactly `out.len()` of them) into `out`.
    fn read_typed_into<T: H5Num>(&self, sel: &Selection, out: &mut [T], lossy: bool) -> Result<()> {
        if self.is_null() {
            return if out.is_empty() {
                Ok(())
            } else {
                Err(self.wrong_length(0, out.len()))
            };
        }
        let from = h5_core::convert::num_type(self.dtype()).ok_or_else(|| {
            Error::Invalid(format!("{} is not a numeric type", self.dtype().describe()))
        })?;
        let conv = h5_core::convert::NumConversion::new(from, T::TYPE, lossy)?;
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        let c: Option<&dyn h5_chunkcache::Conversion> = if conv.is_identity() {
            None
        } else {
            Some(&conv)
        };
        read(&self.file, &self.info, sel, None, c, bytes)?;
        Ok(())
    }

    /// The error for a destination of `got` elements where the selection has `want`.
    fn wrong_length(&self, want: usize, got: usize) -> Error {
        Error::Invalid(format!(
            "{}: the destination holds {got} elements, the selection {want}",
            self.path
        ))
    }

    fn read_sel(&self, sel: &Selection, n: usize) -> Result<Vec<u8>> {
        let mut buf = h5_io::buffer::zeroed_vec::<u8>(n * self.element_size());
        read(&self.file, &self.info, sel, None, None, &mut buf)?;
        Ok(buf)
    }

    /// Every element in the file representation, C order.
    pub fn read_raw(&self) -> Result<Vec<u8>> {
        if self.is_null() {
            return Ok(Vec::new());
        }
        self.read_sel(&Selection::All, self.size())
    }

    /// The whole dataset as an array of `T` (lossless conversions only).
    pub fn read<T: H5Num>(&self) -> Result<ArrayD<T>> {
        let v = self.read_typed::<T>(&Selection::All, self.size(), false)?;
        ArrayD::from_shape_vec(IxDyn(&self.shape()), v).map_err(|e| Error::Invalid(e.to_string()))
    }

    /// Reads the whole dataset into `out`, C order, converting to `T` (lossless conversions
    /// only), without allocating the result: `out` must hold exactly [`Dataset::size`]
    /// elements. Reuse one buffer for many reads, or read into memory laid out as you need.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("r.h5");
    /// # let f = h5::File::create(&path)?;
    /// # f.root()?.new_dataset::<i32>().shape([2, 3]).create("d")?.write(&[1, 2, 3, 4, 5, 6])?;
    /// # f.close()?;
    /// let ds = h5::File::open(&path)?.dataset("d")?;
    /// let mut buf = vec![0i64; ds.size()];
    /// ds.read_into(&mut buf)?; // i32 in the file, widened to i64
    /// assert_eq!(buf, [1, 2, 3, 4, 5, 6]);
    /// # Ok::<(), h5::Error>(())
    /// ```
    pub fn read_into<T: H5Num>(&self, out: &mut [T]) -> Result<()> {
        let n = self.size();
        if out.len() != n {
            return Err(self.wrong_length(n, out.len()));
        }
        self.read_typed_into(&Selection::All, out, false)
    }

    /// Reads a hyperslab (described like ndarray's `s![..]`, positive steps) into `out`, C
    /// order of the hyperslab's shape, without allocating the result: `out` must hold exactly
    /// the hyperslab's number of elements.
    ///
    /// ```
    /// use ndarray::SliceInfoElem::Slice;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("s.h5");
    /// # let f = h5::File::create(&path)?;
    /// # f.root()?.new_dataset::<f32>().shape([3, 3]).create("d")?
    /// #     .write(&[0f32, 1., 2., 3., 4., 5., 6., 7., 8.])?;
    /// # f.close()?;
    /// let ds = h5::File::open(&path)?.dataset("d")?;
    /// let mut block = [0f32; 4];
    /// let rows_1_2 = Slice { start: 1, end: Some(3), step: 1 };
    /// let cols_0_1 = Slice { start: 0, end: Some(2), step: 1 };
    /// ds.read_slice_into([rows_1_2, cols_0_1], &mut block)?;
    /// assert_eq!(block, [3., 4., 6., 7.]);
    /// # Ok::<(), h5::Error>(())
    /// ```
    pub fn read_slice_into<T: H5Num>(
        &self,
        slice: impl AsRef<[SliceInfoElem]>,
        out: &mut [T],
    ) -> Result<()> {
        let (slab, shape) = crate::slice::hyperslab(slice.as_ref(), self.info.dims())?;
        let n: usize = shape.iter().product();
        if out.len() != n {
            return Err(self.wrong_length(n, out.len()));
        }
        self.read_typed_into(&Selection::Hyperslab(slab), out, false)
    }

    /// The whole dataset as `T`, allowing narrowing conversions (saturating, like libhdf5).
    pub fn read_lossy<T: H5Num>(&self) -> Result<ArrayD<T>> {
        let v = self.read_typed::<T>(&Selection::All, self.size(), true)?;
        ArrayD::from_shape_vec(IxDyn(&self.shape()), v).map_err(|e| Error::Invalid(e.to_string()))
    }

    /// A one-dimensional dataset.
    pub fn read_1d<T: H5Num>(&self) -> Result<Array1<T>> {
        self.read::<T>()?
            .into_dimensionality::<Ix1>()
            .map_err(|e| Error::Invalid(e.to_string()))
    }

    /// A two-dimensional dataset.
    pub fn read_2d<T: H5Num>(&self) -> Result<Array2<T>> {
        self.read::<T>()?
            .into_dimensionality::<Ix2>()
            .map_err(|e| Error::Invalid(e.to_string()))
    }

    /// A scalar (or one-element) dataset.
    pub fn read_scalar<T: H5Num>(&self) -> Result<T> {
        let v = numbers::<T>(self.dtype(), &self.read_raw()?, false)?;
        match v.as_slice() {
            [x] => Ok(*x),
            _ => Err(Error::Invalid(format!(
                "{} has {} elements, not one",
                self.path,
                v.len()
            ))),
        }
    }

    /// A hyperslab described like ndarray's `s![..]` (steps must be positive).
    pub fn read_slice<T: H5Num>(&self, slice: impl AsRef<[SliceInfoElem]>) -> Result<ArrayD<T>> {
        let (slab, shape) = crate::slice::hyperslab(slice.as_ref(), self.info.dims())?;
        let n: usize = shape.iter().product();
        let v = self.read_typed::<T>(&Selection::Hyperslab(slab), n, false)?;
        ArrayD::from_shape_vec(IxDyn(&shape), v).map_err(|e| Error::Invalid(e.to_string()))
    }

    /// The elements at `points` (each a coordinate of the dataset's rank), in the given order.
    pub fn read_points<T: H5Num>(&self, points: &[Vec<u64>]) -> Result<Vec<T>> {
        let rank = self.ndim();
        let flat: Vec<u64> = points.iter().flatten().copied().collect();
        if points.iter().any(|p| p.len() != rank) {
            return Err(Error::Invalid(format!(
                "points must have {rank} coordinates"
            )));
        }
        let sel =
            Selection::Points(Points::new(rank, flat).map_err(|e| Error::Invalid(e.to_string()))?);
        self.read_typed::<T>(&sel, points.len(), false)
    }

    /// The elements as strings (fixed or variable length).
    pub fn read_strings(&self) -> Result<Vec<String>> {
        strings(&self.file, self.dtype(), &self.read_raw()?)
    }

    /// Every element as a [`Value`](crate::Value), whatever the datatype (compound, enum,
    /// array, variable-length, reference, ...), in C order.
    pub fn read_values(&self) -> Result<Vec<crate::Value>> {
        h5_core::values::values(&self.file, self.dtype(), &self.read_raw()?)
    }

    /// The attributes, sorted by name.
    pub fn attrs(&self) -> Result<Vec<Attribute>> {
        Attribute::all(&self.file, &self.header)
    }

    /// The attribute `name`.
    pub fn attr(&self, name: &str) -> Result<Attribute> {
        Attribute::named(&self.file, &self.header, name, &self.path)
    }

    /// The attributes' names, sorted.
    pub fn attr_names(&self) -> Result<Vec<String>> {
        Ok(self
            .attrs()?
            .into_iter()
            .map(|a| a.name().to_owned())
            .collect())
    }
}
