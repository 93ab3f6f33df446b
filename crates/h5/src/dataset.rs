//! Datasets.

use std::sync::{Arc, RwLock};

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
///
/// On a VFD SWMR reader a handle follows the file: after an end of tick that brought a new
/// index its description (shape, storage, chunk index) is read again from the object header
/// the next time it is used, so open handles keep working and see the writer's changes. Clones
/// share that description.
#[derive(Clone, Debug)]
pub struct Dataset {
    file: Arc<FileShared>,
    live: Arc<RwLock<Live>>,
    /// The element type and fill value never change for a dataset.
    dtype: Datatype,
    fill: Option<Vec<u8>>,
    address: u64,
    path: String,
}

/// What may change under a VFD SWMR reader, with the generation it was read at.
#[derive(Debug)]
struct Live {
    generation: u64,
    header: Arc<ObjectHeader>,
    info: Arc<DatasetInfo>,
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
            dtype: info.datatype.clone(),
            fill: info.fill.clone(),
            address: r.header.address,
            live: Arc::new(RwLock::new(Live {
                generation: r.file.swmr_generation(),
                header: r.header,
                info: Arc::new(info),
            })),
            file: r.file,
            path: r.path,
        })
    }

    /// The current description and header: read again when a VFD SWMR reader's end of tick
    /// brought a new index since they were read (if that read fails, the last description
    /// stays and the next use tries again).
    fn current(&self) -> (Arc<ObjectHeader>, Arc<DatasetInfo>) {
        let generation = self.file.swmr_generation();
        if let Ok(l) = self.live.read()
            && l.generation == generation
        {
            return (Arc::clone(&l.header), Arc::clone(&l.info));
        }
        let fresh = ObjectHeader::load(&self.file, self.address).and_then(|oh| {
            let info = DatasetInfo::from_header(&self.file, &oh)?;
            Ok((oh, info))
        });
        match (fresh, self.live.write()) {
            (Ok((oh, info)), Ok(mut l)) => {
                l.generation = generation;
                l.header = Arc::clone(&oh);
                l.info = Arc::new(info);
                (oh, Arc::clone(&l.info))
            }
            (_, Ok(l)) => (Arc::clone(&l.header), Arc::clone(&l.info)),
            (_, Err(p)) => {
                let l = p.into_inner();
                (Arc::clone(&l.header), Arc::clone(&l.info))
            }
        }
    }

    pub(crate) fn info(&self) -> Arc<DatasetInfo> {
        self.current().1
    }

    fn header(&self) -> Arc<ObjectHeader> {
        self.current().0
    }

    pub(crate) fn set_info(&mut self, info: DatasetInfo) {
        let mut l = self.live.write().unwrap_or_else(|p| p.into_inner());
        l.info = Arc::new(info);
    }

    /// Reads the description again from the file now (h5py's `Dataset.refresh`, for files a
    /// libhdf5 writer changes in legacy SWMR mode): on a file opened read-only, cached metadata
    /// is dropped first and the dataset's cached chunks with it, so the object header, the
    /// chunk index and the data are read anew.
    pub fn refresh(&self) -> Result<()> {
        if !self.file.is_writable() && !self.file.is_swmr() {
            self.file.refresh_metadata(self.address)?;
        }
        let oh = ObjectHeader::load(&self.file, self.address)?;
        let info = DatasetInfo::from_header(&self.file, &oh)?;
        let mut l = self.live.write().unwrap_or_else(|p| p.into_inner());
        l.header = oh;
        l.info = Arc::new(info);
        Ok(())
    }

    pub(crate) fn file_shared(&self) -> &Arc<FileShared> {
        &self.file
    }

    /// The object header's address (relative to the superblock): the dataset's identity.
    pub fn address(&self) -> u64 {
        self.address
    }

    /// Stored (encoded) size in bytes of each allocated chunk, or of the contiguous block in
    /// the file; empty for compact, external, virtual and unallocated data.
    pub fn stored_sizes(&self) -> Result<Vec<u64>> {
        h5_core::dataset::stored_sizes(&self.file, &self.info())
    }

    /// The dataset's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The shape.
    pub fn shape(&self) -> Vec<usize> {
        self.info().dims().iter().map(|&d| d as usize).collect()
    }

    /// The maximum shape (`None` for unlimited dimensions).
    pub fn maxshape(&self) -> Vec<Option<usize>> {
        match &self.info().dataspace.max_dims {
            Some(m) => m
                .iter()
                .map(|&d| (d != UNLIMITED).then_some(d as usize))
                .collect(),
            None => self.shape().into_iter().map(Some).collect(),
        }
    }

    /// Whether the dataspace is null (no elements at all, unlike a scalar's one).
    pub fn is_null(&self) -> bool {
        self.info().dataspace.kind == h5_format::message::dataspace::DataspaceKind::Null
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.info().dims().len()
    }

    /// Number of elements.
    pub fn size(&self) -> usize {
        if self.is_null() {
            return 0;
        }
        self.info().dims().iter().product::<u64>() as usize
    }

    /// Bytes per element in the file.
    pub fn element_size(&self) -> usize {
        self.info().elem_size()
    }

    /// The element type in the file.
    pub fn dtype(&self) -> &Datatype {
        &self.dtype
    }

    /// The chunk shape, if chunked.
    pub fn chunk(&self) -> Option<Vec<usize>> {
        self.info()
            .chunk_dims()
            .map(|c| c.into_iter().map(|d| d as usize).collect())
    }

    /// The storage layout's name: "compact", "contiguous", "chunked" or "virtual".
    pub fn layout_name(&self) -> &'static str {
        use h5_format::message::layout::LayoutClass as L;
        match self.info().layout.class {
            L::Compact { .. } => "compact",
            L::Contiguous { .. } => "contiguous",
            L::Chunked { .. } => "chunked",
            L::Virtual { .. } => "virtual",
        }
    }

    /// The filter pipeline.
    pub fn filters(&self) -> Vec<FilterInfo> {
        self.info()
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
        self.fill.as_deref()
    }

    /// Reads `n` selected elements straight into a `Vec<T>`: the chunk cache converts (or
    /// copies) each element into its place, with no intermediate buffer.
    fn read_typed<T: H5Num>(&self, sel: &Selection, n: usize, lossy: bool) -> Result<Vec<T>> {
        crate::swmr::api(|| {
            if self.is_null() {
                return Ok(Vec::new());
            }
            let from = h5_core::convert::num_type(self.dtype()).ok_or_else(|| {
                Error::Invalid(format!("{} is not a numeric type", self.dtype().describe()))
            })?;
            let conv = h5_core::convert::NumConversion::new(from, T::TYPE, lossy)?;
            let mut out = vec![T::default(); n];
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
            let c: Option<&dyn h5_chunkcache::Conversion> = if conv.is_identity() {
                None
            } else {
                Some(&conv)
            };
            read(&self.file, &self.info(), sel, None, c, bytes)?;
            Ok(out)
        })
    }

    fn read_sel(&self, sel: &Selection, n: usize) -> Result<Vec<u8>> {
        crate::swmr::api(|| {
            let mut buf = vec![0u8; n * self.element_size()];
            read(&self.file, &self.info(), sel, None, None, &mut buf)?;
            Ok(buf)
        })
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
        let (slab, shape) = crate::slice::hyperslab(slice.as_ref(), self.info().dims())?;
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
        crate::swmr::api(|| Attribute::all(&self.file, &self.header()))
    }

    /// The attribute `name`.
    pub fn attr(&self, name: &str) -> Result<Attribute> {
        crate::swmr::api(|| Attribute::named(&self.file, &self.header(), name, &self.path))
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
