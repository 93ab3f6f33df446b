//! Writing: creating files, groups, datasets and attributes (the earliest file format for now).

use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;

use h5_chunkcache::selection::Selection;
use h5_core::file::FileShared;
use h5_core::write::CreateOptions;
use h5_core::write::chunk_index::ChunkIndexKind;
use h5_core::write::dataset::{NewDataset, NewLayout};
use h5_format::datatype::{Charset, Datatype, StringPadding, StringType};
use h5_format::message::dataspace::UNLIMITED;
use h5_format::message::fill_value::{AllocTime, FillTime};
use h5_format::message::filter_pipeline::Filter;
use h5_io::{FileStorage, OpenMode};
use ndarray::SliceInfoElem;

use crate::{Dataset, Error, File, FileAccess, Group, H5Num, Result};

impl File {
    /// Creates (or truncates) the file at `path` for writing, with the default cache settings
    /// and the earliest file format (what libhdf5 and h5py write by default).
    pub fn create(path: impl AsRef<Path>) -> Result<File> {
        Self::create_with(path, &FileAccess::default(), &CreateOptions::default())
    }

    /// Creates (or truncates) the file at `path` with the given cache settings and options.
    pub fn create_with(
        path: impl AsRef<Path>,
        access: &FileAccess,
        options: &CreateOptions,
    ) -> Result<File> {
        let path = path.as_ref();
        let storage = FileStorage::open(path, OpenMode::Create)?;
        let dir = path.parent().map(Path::to_path_buf);
        let shared = FileShared::create(Arc::new(storage), access.settings(), options, dir)?;
        Ok(File::from_shared(shared, Some(path.to_path_buf())))
    }

    /// Writes everything to the file (raw data, then metadata, the superblock last) and syncs.
    pub fn flush(&self) -> Result<()> {
        self.shared().flush()
    }

    /// Flushes and closes this handle, reporting any error (dropping the last handle flushes
    /// too, but cannot report).
    pub fn close(self) -> Result<()> {
        self.shared().flush()
    }

    /// Creates the group at `path` (relative to the root), creating missing intermediate
    /// groups; an existing group at `path` is an error.
    pub fn create_group(&self, path: &str) -> Result<Group> {
        self.root()?.create_group(path)
    }
}

impl Group {
    /// Creates the group `path` below this one (intermediate groups are created when missing).
    pub fn create_group(&self, path: &str) -> Result<Group> {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let Some((last, parents)) = parts.split_last() else {
            return Err(Error::Invalid(format!("group path {path:?}")));
        };
        let mut g = self.clone();
        for p in parents {
            g = match g.group(p) {
                Ok(sub) => sub,
                Err(Error::NotFound(_)) => g.create_child_group(p)?,
                Err(e) => return Err(e),
            };
        }
        g.create_child_group(last)
    }

    fn create_child_group(&self, name: &str) -> Result<Group> {
        self.file_shared().create_group(self.address(), name)?;
        self.group(name)
    }

    /// Adds a soft link `name` → `target` (a path).
    pub fn link_soft(&self, name: &str, target: &str) -> Result<()> {
        self.file_shared().link_soft(self.address(), name, target)
    }

    /// Adds a hard link `name` to an existing object of this file (for example a dataset).
    pub fn link_hard(&self, name: &str, target: &Dataset) -> Result<()> {
        self.file_shared()
            .link_hard(self.address(), name, target.address())
    }

    /// Starts describing a new dataset of `T` elements.
    pub fn new_dataset<T: H5Num>(&self) -> DatasetBuilder<T> {
        DatasetBuilder {
            group: self.clone(),
            datatype: T::TYPE.datatype(),
            shape: Vec::new(),
            max_shape: None,
            chunk: None,
            filters: Vec::new(),
            fill: None,
            chunk_index: None,
            compact: false,
            alloc_time: None,
            fill_time: None,
            _t: PhantomData,
        }
    }

    /// Writes (or replaces) the attribute `name` holding `values` (a 1-D array).
    pub fn write_attr<T: H5Num>(&self, name: &str, values: &[T]) -> Result<()> {
        write_attr(self.file_shared(), self.address(), name, values)
    }

    /// Writes (or replaces) the scalar attribute `name`.
    pub fn write_attr_scalar<T: H5Num>(&self, name: &str, value: T) -> Result<()> {
        write_attr_scalar(self.file_shared(), self.address(), name, value)
    }

    /// Writes (or replaces) the attribute `name` holding a fixed-length UTF-8 string.
    pub fn write_attr_str(&self, name: &str, value: &str) -> Result<()> {
        write_attr_str(self.file_shared(), self.address(), name, value)
    }
}

fn write_attr<T: H5Num>(file: &FileShared, obj: u64, name: &str, values: &[T]) -> Result<()> {
    let dims = [values.len() as u64];
    file.write_attribute(
        obj,
        name,
        &T::TYPE.datatype(),
        Some(&dims),
        bytemuck::cast_slice(values),
    )
}

fn write_attr_scalar<T: H5Num>(file: &FileShared, obj: u64, name: &str, value: T) -> Result<()> {
    file.write_attribute(
        obj,
        name,
        &T::TYPE.datatype(),
        None,
        bytemuck::bytes_of(&value),
    )
}

fn write_attr_str(file: &FileShared, obj: u64, name: &str, value: &str) -> Result<()> {
    let bytes = value.as_bytes();
    let t = Datatype::String(StringType {
        size: bytes.len().max(1) as u32,
        padding: StringPadding::NullTerminate,
        charset: Charset::Utf8,
    });
    let mut data = bytes.to_vec();
    if data.is_empty() {
        data.push(0);
    }
    file.write_attribute(obj, name, &t, None, &data)
}

/// A new dataset's description (hdf5-metno style):
/// `group.new_dataset::<f32>().shape([100, 100]).chunk([10, 10]).deflate(4).create("x")`.
#[derive(Debug)]
#[must_use]
pub struct DatasetBuilder<T> {
    group: Group,
    datatype: Datatype,
    shape: Vec<u64>,
    max_shape: Option<Vec<u64>>,
    chunk: Option<Vec<u64>>,
    filters: Vec<Filter>,
    fill: Option<Vec<u8>>,
    chunk_index: Option<ChunkIndexKind>,
    compact: bool,
    alloc_time: Option<AllocTime>,
    fill_time: Option<FillTime>,
    _t: PhantomData<T>,
}

impl<T: H5Num> DatasetBuilder<T> {
    /// The dimensions (empty: a scalar).
    pub fn shape(mut self, dims: impl AsRef<[usize]>) -> Self {
        self.shape = dims.as_ref().iter().map(|d| *d as u64).collect();
        self
    }

    /// Maximum dimensions; `None` in a dimension makes it unlimited (needs chunks).
    pub fn max_shape(mut self, dims: impl AsRef<[Option<usize>]>) -> Self {
        self.max_shape = Some(
            dims.as_ref()
                .iter()
                .map(|d| d.map_or(UNLIMITED, |d| d as u64))
                .collect(),
        );
        self
    }

    /// Chunk dimensions (chunked layout).
    pub fn chunk(mut self, dims: impl AsRef<[usize]>) -> Self {
        self.chunk = Some(dims.as_ref().iter().map(|d| *d as u64).collect());
        self
    }

    fn filter(mut self, id: u16, client_data: Vec<u32>) -> Self {
        self.filters.push(Filter {
            id,
            name: None,
            flags: 0,
            client_data,
        });
        self
    }

    /// Adds the shuffle filter (put it before a compressor).
    pub fn shuffle(self) -> Self {
        let size = T::TYPE.size() as u32;
        self.filter(2, vec![size])
    }

    /// Adds deflate (gzip) compression at `level` (0–9).
    pub fn deflate(self, level: u8) -> Self {
        self.filter(1, vec![u32::from(level.min(9))])
    }

    /// Adds the Fletcher-32 checksum filter.
    pub fn fletcher32(self) -> Self {
        self.filter(3, Vec::new())
    }

    /// Adds a filter by its registered id with its client data, as libhdf5 records it (for
    /// example 32015 for zstd).
    pub fn filter_raw(self, id: u16, client_data: Vec<u32>) -> Self {
        self.filter(id, client_data)
    }

    /// The fill value of unwritten elements.
    pub fn fill_value(mut self, v: T) -> Self {
        self.fill = Some(bytemuck::bytes_of(&v).to_vec());
        self
    }

    /// The chunk index (overriding libhdf5's choice for the file's format bounds; layout
    /// version 4 indexes are read by HDF5 1.10 and later).
    pub fn chunk_index(mut self, kind: ChunkIndexKind) -> Self {
        self.chunk_index = Some(kind);
        self
    }

    /// Stores the data inside the object header (layout class compact; at most about 64 KiB,
    /// fixed dimensions, no filters).
    pub fn compact(mut self) -> Self {
        self.compact = true;
        self
    }

    /// When storage is allocated (libhdf5's `H5Pset_alloc_time`; default: contiguous late,
    /// chunked incremental, compact early).
    pub fn alloc_time(mut self, t: AllocTime) -> Self {
        self.alloc_time = Some(t);
        self
    }

    /// When fill values are written into allocated storage (libhdf5's `H5Pset_fill_time`;
    /// default "if set").
    pub fn fill_time(mut self, t: FillTime) -> Self {
        self.fill_time = Some(t);
        self
    }

    /// Creates the dataset `name` in the group.
    pub fn create(self, name: &str) -> Result<Dataset> {
        let layout = match self.chunk {
            _ if self.compact => {
                if self.chunk.is_some() || !self.filters.is_empty() {
                    return Err(Error::Invalid(
                        "a compact dataset has no chunks and no filters".into(),
                    ));
                }
                NewLayout::Compact
            }
            Some(chunk) => NewLayout::Chunked {
                chunk,
                filters: self.filters,
            },
            None if self.filters.is_empty() && self.max_shape.is_none() => NewLayout::Contiguous,
            None => {
                return Err(Error::Invalid(
                    "filters and unlimited dimensions need a chunk shape".into(),
                ));
            }
        };
        let spec = NewDataset {
            datatype: self.datatype,
            dims: self.shape,
            max_dims: self.max_shape,
            layout,
            fill: self.fill,
            chunk_index: self.chunk_index,
            alloc_time: self.alloc_time,
            fill_time: self.fill_time,
        };
        let file = self.group.file_shared();
        file.create_dataset(self.group.address(), name, &spec)?;
        self.group.dataset(name)
    }

    /// Creates the dataset `name` with the shape of `data` (1-D) and writes it.
    pub fn create_with_data(self, name: &str, data: &[T]) -> Result<Dataset> {
        let ds = self.shape([data.len()]).create(name)?;
        ds.write(data)?;
        Ok(ds)
    }
}

impl Dataset {
    /// Writes every element (`data` in C order, as many elements as the dataset holds).
    pub fn write<T: H5Num>(&self, data: &[T]) -> Result<()> {
        self.check_type::<T>()?;
        if data.len() != self.size() {
            return Err(Error::Invalid(format!(
                "{} elements written to a dataset of {}",
                data.len(),
                self.size()
            )));
        }
        h5_core::write::dataset::write(
            self.file_shared(),
            self.info(),
            &Selection::All,
            None,
            None,
            bytemuck::cast_slice(data),
        )
    }

    /// Writes `data` (C order) into the hyperslab `slice` (ndarray's `s![..]`).
    pub fn write_slice<T: H5Num>(
        &self,
        data: &[T],
        slice: impl AsRef<[SliceInfoElem]>,
    ) -> Result<()> {
        self.check_type::<T>()?;
        let (slab, shape) = crate::slice::hyperslab(slice.as_ref(), self.info().dims())?;
        let n: usize = shape.iter().product();
        let sel = Selection::Hyperslab(slab);
        if data.len() != n {
            return Err(Error::Invalid(format!(
                "{} elements for a selection of {n}",
                data.len()
            )));
        }
        h5_core::write::dataset::write(
            self.file_shared(),
            self.info(),
            &sel,
            None,
            None,
            bytemuck::cast_slice(data),
        )
    }

    /// Changes the dimensions of a chunked dataset created by this handle's file (growing within
    /// the maximum shape, or shrinking).
    pub fn resize(&mut self, dims: impl AsRef<[usize]>) -> Result<()> {
        let dims: Vec<u64> = dims.as_ref().iter().map(|d| *d as u64).collect();
        let info = h5_core::write::dataset::resize(self.file_shared(), self.info(), &dims)?;
        self.set_info(info);
        Ok(())
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

    fn check_type<T: H5Num>(&self) -> Result<()> {
        if *self.dtype() != T::TYPE.datatype() {
            return Err(Error::Invalid(format!(
                "writing {} elements to a dataset of {}",
                std::any::type_name::<T>(),
                self.dtype().describe()
            )));
        }
        Ok(())
    }

    /// Writes (or replaces) the attribute `name` holding `values` (a 1-D array).
    pub fn write_attr<T: H5Num>(&self, name: &str, values: &[T]) -> Result<()> {
        write_attr(self.file_shared(), self.address(), name, values)
    }

    /// Writes (or replaces) the scalar attribute `name`.
    pub fn write_attr_scalar<T: H5Num>(&self, name: &str, value: T) -> Result<()> {
        write_attr_scalar(self.file_shared(), self.address(), name, value)
    }

    /// Writes (or replaces) the attribute `name` holding a fixed-length UTF-8 string.
    pub fn write_attr_str(&self, name: &str, value: &str) -> Result<()> {
        write_attr_str(self.file_shared(), self.address(), name, value)
    }
}
