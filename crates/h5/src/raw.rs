//! Raw element access for tools that move data without knowing its Rust type (`h5 copy`,
//! `h5 repack`): datasets of any [`Datatype`], hyperslabs read and written as file-type bytes,
//! attributes from bytes, hard links to groups, committed datatypes.
//!
//! Bytes are the file representation in C order. Variable-length elements and references in
//! such bytes point into the file they were read from: they are only meaningful there (see
//! [`crate::copy`], which re-encodes them for another file).
//!
//! ```no_run
//! # fn main() -> h5::Result<()> {
//! let src = h5::File::open("in.h5")?;
//! let ds = src.dataset("x")?;
//! let dst = h5::File::create("out.h5")?;
//! let out = dst
//!     .root()?
//!     .new_dataset_raw(ds.dtype().clone())
//!     .shape(ds.shape())
//!     .create("x")?;
//! out.write_raw(&ds.read_raw()?)?;
//! # Ok(()) }
//! ```

use h5_chunkcache::selection::Selection;
use h5_core::write::dataset::{NewDataset, NewLayout};
use h5_format::message::dataspace::UNLIMITED;
use h5_format::message::filter_pipeline::Filter;
use ndarray::SliceInfoElem;

use std::sync::Arc;

use h5_core::file::FileShared;
use h5_core::nav::ObjectKind as CoreKind;
use h5_core::object::ObjectHeader;
use h5_format::message::Message;

use crate::{Attribute, Dataset, Datatype, Error, FilterInfo, Group, Result};

/// A committed (named) datatype: a datatype stored as an object of its own, which datasets and
/// attributes may share.
#[derive(Clone, Debug)]
pub struct NamedDatatype {
    file: Arc<FileShared>,
    header: Arc<ObjectHeader>,
    path: String,
}

impl NamedDatatype {
    /// The object header's address (relative to the superblock): the object's identity.
    pub fn address(&self) -> u64 {
        self.header.address
    }

    pub(crate) fn file_shared(&self) -> &Arc<FileShared> {
        &self.file
    }

    /// The path it was opened at.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The datatype.
    pub fn dtype(&self) -> Result<Datatype> {
        crate::swmr::api(|| {
            self.header
                .find(|m| match m {
                    Message::Datatype(t) => Some(t.clone()),
                    _ => None,
                })
                .ok_or_else(|| Error::NotFound(format!("{}: datatype message", self.path)))
        })
    }

    /// The attributes, sorted by name.
    pub fn attrs(&self) -> Result<Vec<Attribute>> {
        crate::swmr::api(|| {
            let owner =
                crate::Location::new(Arc::clone(&self.file), self.address(), self.path.clone());
            Attribute::all(&owner, &self.header)
        })
    }

    /// Writes (or replaces) an attribute from raw bytes, as [`Group::write_attr_raw`] does.
    pub fn write_attr_raw(
        &self,
        name: &str,
        datatype: &Datatype,
        shape: Option<&[usize]>,
        bytes: &[u8],
    ) -> Result<()> {
        crate::swmr::api(|| {
            write_attr_raw(&self.file, self.address(), name, datatype, shape, bytes)
        })
    }
}

/// A new dataset of an arbitrary datatype whose elements are written as raw bytes
/// ([`Group::new_dataset_raw`]).
#[derive(Debug)]
#[must_use]
pub struct RawDatasetBuilder {
    group: Group,
    datatype: Datatype,
    shape: Vec<u64>,
    max_shape: Option<Vec<u64>>,
    chunk: Option<Vec<u64>>,
    filters: Vec<Filter>,
    fill: Option<Vec<u8>>,
    unfiltered_edges: bool,
}

impl RawDatasetBuilder {
    /// Stores partial edge chunks without the filters (see
    /// [`DatasetBuilder::unfiltered_edge_chunks`](crate::DatasetBuilder::unfiltered_edge_chunks)).
    pub fn unfiltered_edge_chunks(mut self) -> Self {
        self.unfiltered_edges = true;
        self
    }

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

    /// Appends a filter to the pipeline as another dataset reports it ([`Dataset::filters`]):
    /// id, client data, name and whether it is optional.
    pub fn filter(mut self, f: &FilterInfo) -> Self {
        self.filters.push(Filter {
            id: f.id,
            name: f
                .name
                .as_ref()
                .filter(|n| !n.is_empty())
                .map(|n| n.as_bytes().to_vec()),
            flags: u16::from(f.optional),
            client_data: f.params.clone(),
        });
        self
    }

    /// The fill value: one element in the file representation (without variable-length data
    /// or references of another file).
    pub fn fill_value_raw(mut self, element: Vec<u8>) -> Self {
        self.fill = Some(element);
        self
    }

    /// Creates the dataset `name` in the group with a null dataspace (no elements at all,
    /// h5py's `h5py.Empty`); shape, chunks, filters and fill value are not used.
    pub fn create_null(self, name: &str) -> Result<Dataset> {
        crate::swmr::api(|| {
            self.group.file_shared().create_dataset_null(
                self.group.address(),
                name,
                &self.datatype,
            )?;
            self.group.dataset(name)
        })
    }

    /// Creates the dataset `name` in the group.
    pub fn create(self, name: &str) -> Result<Dataset> {
        crate::swmr::api(|| {
            let layout = match self.chunk {
                Some(chunk) => NewLayout::Chunked {
                    chunk,
                    filters: self.filters,
                    unfiltered_edges: self.unfiltered_edges,
                },
                None if self.filters.is_empty()
                    && self.max_shape.as_ref().is_none_or(|m| *m == self.shape) =>
                {
                    NewLayout::Contiguous
                }
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
                chunk_index: None,
                alloc_time: None,
                fill_time: None,
                data_follows: false,
            };
            let file = self.group.file_shared();
            file.create_dataset(self.group.address(), name, &spec)?;
            self.group.dataset(name)
        })
    }
}

impl Group {
    /// Starts describing a new dataset whose elements have the datatype `datatype` and are
    /// written as raw bytes ([`Dataset::write_raw`], [`Dataset::write_raw_slice`]).
    pub fn new_dataset_raw(&self, datatype: Datatype) -> RawDatasetBuilder {
        RawDatasetBuilder {
            group: self.clone(),
            datatype,
            shape: Vec::new(),
            max_shape: None,
            chunk: None,
            filters: Vec::new(),
            fill: None,
            unfiltered_edges: false,
        }
    }

    /// Writes (or replaces) the attribute `name` of `datatype` and `shape` (`None`: a scalar)
    /// from `bytes`, its elements in the file representation. No shape and no bytes make an
    /// attribute with a null dataspace (no elements, like h5py's `h5py.Empty`).
    pub fn write_attr_raw(
        &self,
        name: &str,
        datatype: &Datatype,
        shape: Option<&[usize]>,
        bytes: &[u8],
    ) -> Result<()> {
        crate::swmr::api(|| {
            write_attr_raw(
                self.file_shared(),
                self.address(),
                name,
                datatype,
                shape,
                bytes,
            )
        })
    }

    /// The committed datatype at `name` (relative or absolute).
    pub fn named_datatype(&self, name: &str) -> Result<NamedDatatype> {
        crate::swmr::api(|| {
            let r = h5_core::nav::resolve(self.file_shared(), self.address(), self.path(), name)?;
            let kind = CoreKind::of(&r.header);
            if kind != CoreKind::Datatype {
                return Err(Error::WrongKind {
                    path: r.path,
                    expected: "datatype",
                    found: kind.name(),
                });
            }
            Ok(NamedDatatype {
                file: r.file,
                header: r.header,
                path: r.path,
            })
        })
    }

    /// Commits `datatype` as the named datatype `name` of this group.
    pub fn commit_datatype(&self, name: &str, datatype: &Datatype) -> Result<NamedDatatype> {
        crate::swmr::api(|| {
            self.file_shared()
                .commit_datatype(self.address(), name, datatype)?;
            self.named_datatype(name)
        })
    }

    /// Adds a hard link `name` to an existing committed datatype of this file.
    pub fn link_hard_datatype(&self, name: &str, target: &NamedDatatype) -> Result<()> {
        crate::swmr::api(|| {
            self.file_shared()
                .link_hard(self.address(), name, target.address())
        })
    }

    /// Adds a hard link `name` to an existing group of this file; the group gains one
    /// reference (a group may be reached by several paths, as with [`Group::link_hard`]).
    pub fn link_hard_group(&self, name: &str, target: &Group) -> Result<()> {
        crate::swmr::api(|| {
            self.file_shared()
                .link_hard(self.address(), name, target.address())
        })
    }
}

fn write_attr_raw(
    file: &h5_core::file::FileShared,
    obj: u64,
    name: &str,
    datatype: &Datatype,
    shape: Option<&[usize]>,
    bytes: &[u8],
) -> Result<()> {
    if shape.is_none() && bytes.is_empty() && datatype.size() > 0 {
        return file.write_attribute_null(obj, name, datatype);
    }
    let dims: Option<Vec<u64>> = shape.map(|s| s.iter().map(|d| *d as u64).collect());
    file.write_attribute(obj, name, datatype, dims.as_deref(), bytes)
}

impl Dataset {
    /// The elements of the hyperslab `slice` (ndarray's `s![..]`) in the file representation,
    /// C order.
    pub fn read_raw_slice(&self, slice: impl AsRef<[SliceInfoElem]>) -> Result<Vec<u8>> {
        crate::swmr::api(|| {
            let info = self.info();
            let (slab, shape) = crate::slice::hyperslab(slice.as_ref(), info.dims())?;
            let n: usize = shape.iter().product();
            let len = (n as u64).checked_mul(self.element_size() as u64);
            let mut buf = h5_core::buffer::zeroed(|| format!("reading {}", self.path()), len)?;
            if !buf.is_empty() {
                h5_core::dataset::read(
                    self.file_shared(),
                    &info,
                    &Selection::Hyperslab(slab),
                    None,
                    None,
                    &mut buf,
                )?;
            }
            Ok(buf)
        })
    }

    /// Writes every element from `bytes`, already in the dataset's file datatype (C order, as
    /// [`Dataset::read_raw`] returns them): no conversion, so any datatype the filters accept
    /// can be written, for example reduced-precision integers for the n-bit filter.
    /// Variable-length elements must be global heap IDs of this file (as `h5::copy` writes
    /// them).
    pub fn write_raw(&self, bytes: &[u8]) -> Result<()> {
        crate::swmr::api(|| {
            self.check_raw_len(bytes, self.size())?;
            h5_core::write::dataset::write(
                self.file_shared(),
                &self.info(),
                &Selection::All,
                None,
                None,
                bytes,
            )
        })
    }

    /// Writes the elements in `bytes` (file representation, C order) into the hyperslab
    /// `slice`.
    pub fn write_raw_slice(&self, bytes: &[u8], slice: impl AsRef<[SliceInfoElem]>) -> Result<()> {
        crate::swmr::api(|| {
            let info = self.info();
            let (slab, shape) = crate::slice::hyperslab(slice.as_ref(), info.dims())?;
            self.check_raw_len(bytes, shape.iter().product())?;
            if bytes.is_empty() {
                return Ok(());
            }
            h5_core::write::dataset::write(
                self.file_shared(),
                &info,
                &Selection::Hyperslab(slab),
                None,
                None,
                bytes,
            )
        })
    }

    fn check_raw_len(&self, bytes: &[u8], elements: usize) -> Result<()> {
        if Some(bytes.len()) != elements.checked_mul(self.element_size()) {
            return Err(Error::Invalid(format!(
                "{} bytes for {elements} elements of {} bytes",
                bytes.len(),
                self.element_size()
            )));
        }
        Ok(())
    }

    /// Writes (or replaces) the attribute `name` from raw bytes, as
    /// [`Group::write_attr_raw`] does.
    pub fn write_attr_raw(
        &self,
        name: &str,
        datatype: &Datatype,
        shape: Option<&[usize]>,
        bytes: &[u8],
    ) -> Result<()> {
        crate::swmr::api(|| {
            write_attr_raw(
                self.file_shared(),
                self.address(),
                name,
                datatype,
                shape,
                bytes,
            )
        })
    }
}
