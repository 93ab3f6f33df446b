//! Datasets: description, storage and stored chunks. Reads are in `read.rs`, writes in
//! `write.rs`.

use std::ops::Deref;
use std::sync::Arc;

use h5_core::dataset::{DatasetInfo, DatasetSlot};
use h5_core::nav::{ObjectKind as CoreKind, Resolved};
use h5_format::message::dataspace::{DataspaceKind, UNLIMITED};

use crate::{Datatype, Error, Location, Result};

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

/// One stored chunk of a chunked dataset ([`Dataset::iter_chunks`]; libhdf5's
/// `H5Dget_chunk_info`, h5py's `StoreInfo`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ChunkInfo {
    /// The chunk's first element: its offset in the dataset, per dimension.
    pub offset: Vec<u64>,
    /// Bytes stored in the file (after the filters).
    pub size: u64,
    /// Bit `i` set: filter `i` of the pipeline was skipped for this chunk.
    pub filter_mask: u32,
    /// Byte offset of the stored chunk in the file (from its first byte, userblock included).
    pub address: u64,
}

/// A dataset.
///
/// Dereferences to its [`Location`] (path, address, attributes). Its shape is read from what
/// the file shares between every handle of the dataset, so a resize through one handle is seen
/// by the others. Cheap to clone; `Send + Sync`: clones may read (and write) from several
/// threads at once.
///
/// ```
/// # fn main() -> h5::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let file = h5::File::create(dir.path().join("ds.h5"))?;
/// let ds = file
///     .new_dataset::<f32>()
///     .shape([0, 3])
///     .max_shape([None, Some(3)])
///     .chunk([64, 3])
///     .create("samples")?;
/// ds.append(&[1.0f32, 2.0, 3.0])?; // one row
/// let again = file.dataset("samples")?;
/// again.append(&h5::ndarray::arr2(&[[4.0f32, 5.0, 6.0], [7.0, 8.0, 9.0]]))?;
/// assert_eq!(ds.shape(), [3, 3]);
/// assert_eq!(ds.read_2d::<f64>()?[[2, 1]], 8.0);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Dataset {
    loc: Location,
    /// The description when the handle was opened: datatype, layout, filters and fill value
    /// never change; the shape is read from the file's shared descriptions instead.
    opened: Arc<DatasetInfo>,
    /// The dataset's slot in the file, shared by every handle of it: its current description
    /// and what writes need (registration, writable layout), reached without a lookup by
    /// address while the file has not forgotten it.
    slot: Arc<DatasetSlot>,
    /// `opened`'s datatype, kept in the handle: every read and write compares the memory type
    /// with it, and the shared description is cold memory when many datasets are used in turn.
    file_type: Datatype,
}

impl Deref for Dataset {
    type Target = Location;

    fn deref(&self) -> &Location {
        &self.loc
    }
}

impl Dataset {
    pub(crate) fn from_resolved(r: Resolved) -> Result<Dataset> {
        let kind = CoreKind::of(&r.header);
        if kind != CoreKind::Dataset {
            return Err(Error::WrongKind {
                path: r.path,
                expected: "dataset",
                found: kind.name(),
            });
        }
        let loc = Location::new(r.file, r.header.address, r.path);
        let info = loc.ctx(DatasetInfo::from_header(loc.file_shared(), &r.header))?;
        // The header was just loaded from the metadata cache: its description is the current
        // one for every handle.
        let slot = loc.file_shared().set_dataset_slot(info);
        let opened = slot.info();
        let file_type = opened.datatype.clone();
        Ok(Dataset {
            loc,
            opened,
            slot,
            file_type,
        })
    }

    /// The relative address of the committed (named) datatype this dataset's type is, if its
    /// datatype message refers to one (compare with [`crate::NamedDatatype::address`]).
    pub fn committed_type_address(&self) -> Option<u64> {
        self.header().ok().and_then(|h| h.committed_datatype())
    }

    /// The global heap of the file this dataset belongs to (for variable-length elements read as
    /// bytes).
    pub fn global_heap(&self) -> crate::GlobalHeap {
        crate::GlobalHeap::new(self.file_shared())
    }

    /// The dataset's current description (its shape as last resized through any handle).
    pub(crate) fn info(&self) -> Arc<DatasetInfo> {
        match self.live_slot() {
            Some(s) => s.info(),
            None => self
                .file_shared()
                .dataset_info(self.address())
                .unwrap_or_else(|| Arc::clone(&self.opened)),
        }
    }

    /// The handle's slot while the file has not forgotten it (`None`: the dataset is looked up
    /// by address at every call, as the file may hold a newer description).
    pub(crate) fn live_slot(&self) -> Option<&DatasetSlot> {
        Some(&*self.slot).filter(|s| !s.is_forgotten())
    }

    /// Reads the dataset's description (shape, storage, chunk index) again from the file now
    /// (h5py's `Dataset.refresh`, libhdf5's `H5Drefresh`), for files a libhdf5 writer changes in
    /// legacy SWMR mode (open them with [`crate::FileAccess::swmr_read`]): on a file opened
    /// read-only, cached metadata is dropped first and the dataset's cached chunks with it, so
    /// the object header, the chunk index and the data are read anew. Every handle of the
    /// dataset sees the new description.
    pub fn refresh(&self) -> Result<()> {
        crate::swmr::api(|| {
            let file = self.file_shared();
            if !file.is_writable() && !file.is_swmr() {
                self.ctx(file.refresh_metadata(self.address()))?;
            }
            let oh = self.header()?;
            let info = self.ctx(DatasetInfo::from_header(file, &oh))?;
            file.set_dataset_info(info);
            Ok(())
        })
    }

    /// Stored (encoded) size in bytes of each allocated chunk, or of the contiguous block in
    /// the file; empty for compact, external, virtual and unallocated data.
    pub fn stored_sizes(&self) -> Result<Vec<u64>> {
        crate::swmr::api(|| {
            self.ctx(h5_core::dataset::stored_sizes(
                self.file_shared(),
                &self.info(),
            ))
        })
    }

    /// Every stored chunk of a chunked dataset, in chunk-grid order: its offset, stored size,
    /// filter mask and file address (empty for other layouts). Chunks written through this
    /// file and still cached are written first, so what is reported is what the file holds.
    pub fn iter_chunks(&self) -> Result<impl Iterator<Item = ChunkInfo> + use<>> {
        crate::swmr::api(|| {
            let chunks = self.ctx(h5_core::write::io::stored_chunks(
                self.file_shared(),
                &self.info(),
            ))?;
            Ok(chunks.into_iter().map(|c| ChunkInfo {
                offset: c.offset,
                size: c.size,
                filter_mask: c.filter_mask,
                address: c.address,
            }))
        })
    }

    /// The number of stored chunks of a chunked dataset (0 for other layouts).
    pub fn num_chunks(&self) -> Result<usize> {
        crate::swmr::api(|| Ok(self.iter_chunks()?.count()))
    }

    /// The shape.
    pub fn shape(&self) -> Vec<usize> {
        self.info().dims().iter().map(|&d| d as usize).collect()
    }

    /// The maximum shape (`None` for unlimited dimensions).
    pub fn maxshape(&self) -> Vec<Option<usize>> {
        let info = self.info();
        match &info.dataspace.max_dims {
            Some(m) => m
                .iter()
                .map(|&d| (d != UNLIMITED).then_some(d as usize))
                .collect(),
            None => self.shape().into_iter().map(Some).collect(),
        }
    }

    /// Whether the dataspace is null (no elements at all, unlike a scalar's one).
    pub fn is_null(&self) -> bool {
        self.opened.dataspace.kind == DataspaceKind::Null
    }

    /// Whether the dataspace is scalar (one element, no dimensions).
    pub fn is_scalar(&self) -> bool {
        self.opened.dataspace.kind == DataspaceKind::Scalar
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.opened.dims().len()
    }

    /// Number of elements.
    pub fn size(&self) -> usize {
        if self.is_null() {
            return 0;
        }
        // Saturating: a damaged file's dimensions may overflow; reads then refuse to allocate.
        let n = self
            .info()
            .dims()
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d));
        n.and_then(|n| usize::try_from(n).ok())
            .unwrap_or(usize::MAX)
    }

    /// Bytes per element in the file.
    pub fn element_size(&self) -> usize {
        self.opened.elem_size()
    }

    /// The element type in the file.
    pub fn dtype(&self) -> &Datatype {
        &self.file_type
    }

    /// The chunk shape, if chunked.
    pub fn chunk(&self) -> Option<Vec<usize>> {
        self.opened
            .chunk_dims()
            .map(|c| c.into_iter().map(|d| d as usize).collect())
    }

    /// Whether partial edge chunks (those reaching past the extent) are stored without the
    /// filters (libhdf5's `H5Pget_chunk_opts` giving `H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS`;
    /// see [`DatasetBuilder::unfiltered_edge_chunks`](crate::DatasetBuilder::unfiltered_edge_chunks)).
    pub fn unfiltered_edge_chunks(&self) -> bool {
        self.opened.layout.class.unfiltered_edge_chunks()
    }

    /// Whether the dataset is chunked.
    pub fn is_chunked(&self) -> bool {
        self.opened.chunk_dims().is_some()
    }

    /// The storage layout's name: "compact", "contiguous", "chunked" or "virtual".
    pub fn layout_name(&self) -> &'static str {
        use h5_format::message::layout::LayoutClass as L;
        match self.opened.layout.class {
            L::Compact { .. } => "compact",
            L::Contiguous { .. } => "contiguous",
            L::Chunked { .. } => "chunked",
            L::Virtual { .. } => "virtual",
        }
    }

    /// The filter pipeline.
    pub fn filters(&self) -> Vec<FilterInfo> {
        self.opened
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
        self.opened.fill.as_deref()
    }
}
