//! Datasets: their description from the object header, their layout registered with the shared
//! chunk cache, and reads through it.

use std::sync::Arc;

use h5_chunkcache::selection::{MemorySelection, Selection};
use h5_chunkcache::{ChunkLayout, Conversion, DatasetId, DiskLocation, ReadRequest};
use h5_format::UNDEFINED_ADDRESS;
use h5_format::datatype::Datatype;
use h5_format::message::dataspace::{Dataspace, UNLIMITED};
use h5_format::message::filter_pipeline::FilterPipeline;
use h5_format::message::layout::{ChunkIndex as IndexKind, Layout, LayoutClass};
use h5_format::message::shared::SharedRef;
use h5_format::message::{Message, kind};

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::indexes::earray::ExtensibleArrayIndex;
use crate::indexes::farray::FixedArrayIndex;
use crate::indexes::{BtreeV1Index, BtreeV2Index, grid};
use crate::layouts::{
    ChunkDecoder, ChunkIndex, ChunkRecord, ChunkedLayout, ImplicitIndex, SingleBlockLayout,
    SingleChunkIndex, UnallocatedIndex,
};
use crate::object::ObjectHeader;

/// What a dataset is: shape, type, storage, filters and fill value.
#[derive(Clone, Debug)]
pub struct DatasetInfo {
    /// Relative address of the object header (the dataset's identity).
    pub address: u64,
    /// The dataspace.
    pub dataspace: Dataspace,
    /// The element type in the file.
    pub datatype: Datatype,
    /// The storage layout.
    pub layout: Layout,
    /// The filter pipeline, if any.
    pub pipeline: Option<FilterPipeline>,
    /// The fill value (one element in the file type), if defined.
    pub fill: Option<Vec<u8>>,
    /// External raw data files, if the data is stored outside the file.
    pub external: Option<h5_format::message::external_files::ExternalFiles>,
}

impl DatasetInfo {
    /// Reads the description from the dataset's object header.
    pub fn from_header(file: &FileShared, oh: &ObjectHeader) -> Result<DatasetInfo> {
        let missing = |what: &str| {
            Error::Format(h5_format::FormatError::Corrupted {
                structure: "dataset object header",
                address: oh.address,
                reason: format!("no {what} message"),
            })
        };
        let dataspace = oh
            .find(|m| match m {
                Message::Dataspace(d) => Some(d.clone()),
                _ => None,
            })
            .ok_or_else(|| missing("dataspace"))?;
        let datatype = match oh.find(|m| match m {
            Message::Datatype(t) => Some(t.clone()),
            _ => None,
        }) {
            Some(t) => t,
            None => shared_datatype(file, oh)?.ok_or_else(|| missing("datatype"))?,
        };
        let layout = oh
            .find(|m| match m {
                Message::Layout(l) => Some(l.clone()),
                _ => None,
            })
            .ok_or_else(|| missing("layout"))?;
        let pipeline = oh.find(|m| match m {
            Message::FilterPipeline(p) => Some(p.clone()),
            _ => None,
        });
        let fill = oh
            .find(|m| match m {
                Message::FillValue(f) => Some(f.value.clone()),
                _ => None,
            })
            .or_else(|| {
                oh.find(|m| match m {
                    Message::FillValueOld(f) => Some(f.value.clone()),
                    _ => None,
                })
            })
            .flatten()
            .filter(|v| v.len() == datatype.size() as usize);
        let external = oh.find(|m| match m {
            Message::ExternalFiles(e) => Some(e.clone()),
            _ => None,
        });
        let mut info = DatasetInfo {
            address: oh.address,
            dataspace,
            datatype,
            layout,
            pipeline,
            fill,
            external,
        };
        // A virtual dataset with unlimited mappings is as large as its sources make it now. A
        // mapping list that cannot be read leaves the stored extent: reading the data reports
        // what is wrong with it.
        if let Ok(Some(dims)) = crate::virtual_ds::current_dims(file, &info) {
            info.dataspace.dims = dims;
        }
        Ok(info)
    }

    /// Element size in bytes.
    pub fn elem_size(&self) -> usize {
        self.datatype.size() as usize
    }

    /// Current dimensions.
    pub fn dims(&self) -> &[u64] {
        &self.dataspace.dims
    }

    /// Chunk dimensions, for chunked datasets.
    pub fn chunk_dims(&self) -> Option<Vec<u64>> {
        match &self.layout.class {
            LayoutClass::Chunked { dims, .. } => {
                let rank = self.dataspace.dims.len();
                Some(dims.iter().take(rank).copied().collect())
            }
            _ => None,
        }
    }
}

pub use crate::descriptions::{DatasetSlot, Descriptions};

/// The datatype of a header whose datatype message is shared (a committed datatype).
fn shared_datatype(file: &FileShared, oh: &ObjectHeader) -> Result<Option<Datatype>> {
    let Some(r) = oh.find(|m| match m {
        Message::Shared { kind: k, reference } if *k == kind::DATATYPE => Some(*reference),
        _ => None,
    }) else {
        return Ok(None);
    };
    match r {
        SharedRef::ObjectHeader(addr) => {
            let t = ObjectHeader::load(file, addr)?;
            Ok(t.find(|m| match m {
                Message::Datatype(t) => Some(t.clone()),
                _ => None,
            }))
        }
        SharedRef::SohmHeap(_) => Err(Error::Unsupported(
            "datatypes in the shared object header message heap".into(),
        )),
    }
}

/// Turns images into chunks: the filter pipeline.
#[derive(Debug)]
struct PipelineDecoder {
    pipeline: Option<h5_filters::Pipeline>,
    elem_size: usize,
    chunk_elems: usize,
}

impl ChunkDecoder for PipelineDecoder {
    fn is_identity(&self) -> bool {
        self.pipeline.is_none()
    }

    fn decode(&self, image: Vec<u8>, mask: u32) -> Result<Vec<u8>, h5_chunkcache::LayoutError> {
        match &self.pipeline {
            None => Ok(image),
            Some(p) => Ok(p.decode(image, mask, self.elem_size, self.chunk_elems)?),
        }
    }

    fn decode_reusing(
        &self,
        image: Vec<u8>,
        mask: u32,
        spare: Vec<u8>,
    ) -> Result<(Vec<u8>, Vec<u8>), h5_chunkcache::LayoutError> {
        match &self.pipeline {
            None => Ok((image, spare)),
            Some(p) => {
                Ok(p.decode_reusing(image, mask, self.elem_size, self.chunk_elems, spare)?)
            }
        }
    }
}

/// The runtime filter pipeline of a pipeline message (`None`: no filters).
pub(crate) fn pipeline_of(p: &Option<FilterPipeline>) -> Option<h5_filters::Pipeline> {
    let p = p.as_ref()?;
    if p.filters.is_empty() {
        return None;
    }
    Some(h5_filters::Pipeline {
        filters: p
            .filters
            .iter()
            .map(|f| h5_filters::FilterSpec {
                id: h5_filters::FilterId(f.id),
                optional: f.flags & 1 != 0,
                name: f
                    .name
                    .as_ref()
                    .map(|n| String::from_utf8_lossy(n).into_owned()),
                client_data: f.client_data.clone(),
            })
            .collect(),
    })
}

/// The dataset's chunk-cache layout.
pub(crate) fn build_layout(
    file: &Arc<FileShared>,
    info: &DatasetInfo,
) -> Result<Arc<dyn ChunkLayout>> {
    let dims = info.dims().to_vec();
    let elem = info.elem_size();
    let fill = info.fill.clone().unwrap_or_default();
    let corrupt = |reason: &str| {
        Error::Format(h5_format::FormatError::Corrupted {
            structure: "layout message",
            address: info.address,
            reason: reason.into(),
        })
    };
    if elem == 0 {
        // libhdf5 refuses datatypes of 0 bytes.
        return Err(corrupt("the datatype has 0 bytes"));
    }
    let elements: u64 = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| corrupt("the number of elements overflows"))?;
    match &info.layout.class {
        LayoutClass::Compact { data } => {
            // The message holds exactly the dataset's bytes (libhdf5 refuses any other size).
            if elements.checked_mul(elem as u64) != Some(data.len() as u64) {
                return Err(corrupt(
                    "compact data size does not match the dataspace and datatype",
                ));
            }
            Ok(Arc::new(CompactLayout {
                dims,
                elem_size: elem,
                fill,
                data: data.clone(),
            }))
        }
        LayoutClass::Contiguous { address, size } => {
            let location = if *address == UNDEFINED_ADDRESS {
                None
            } else {
                // As libhdf5 checks: the storage holds at least every element, and lies in the
                // file (so reading it never allocates more than the file's size).
                let data_size = elements
                    .checked_mul(elem as u64)
                    .ok_or_else(|| corrupt("the dataset's size in bytes overflows"))?;
                let size = size.unwrap_or(data_size);
                if size < data_size {
                    return Err(corrupt(&format!(
                        "contiguous storage of {size} bytes is smaller than the dataset's \
                         {data_size} bytes (dimensions × element size)"
                    )));
                }
                let addr = file.abs(*address)?;
                within_file(file, addr, size).map_err(|reason| {
                    Error::Format(h5_format::FormatError::Corrupted {
                        structure: "layout message",
                        address: info.address,
                        reason,
                    })
                })?;
                Some(DiskLocation { addr, size })
            };
            Ok(Arc::new(SingleBlockLayout {
                dims,
                elem_size: elem,
                fill,
                location,
            }))
        }
        LayoutClass::Chunked {
            index,
            dims: layout_dims,
            ..
        } => {
            let chunk_dims = info.chunk_dims().unwrap_or_default();
            if chunk_dims.len() != dims.len() || chunk_dims.contains(&0) {
                return Err(Error::Format(h5_format::FormatError::Corrupted {
                    structure: "layout message",
                    address: info.address,
                    reason: "chunk dimensions do not match the dataspace".into(),
                }));
            }
            // libhdf5 refuses chunks of 4 GiB or more: no chunk of a valid file is bigger, so a
            // chunk buffer never exceeds that whatever the file says.
            let chunk_elems = crate::buffer::product(chunk_dims.iter().copied())
                .ok_or_else(|| corrupt("the number of elements of a chunk overflows"))?;
            let chunk_bytes = chunk_elems
                .checked_mul(elem as u64)
                .filter(|&b| b < MAX_CHUNK_BYTES)
                .ok_or_else(|| {
                    corrupt(&format!(
                        "chunks of {chunk_elems} elements of {elem} bytes reach the format's \
                         limit of 4 GiB"
                    ))
                })?;
            let max: Vec<u64> = match &info.dataspace.max_dims {
                Some(m) => m.clone(),
                None => dims.clone(),
            };
            let weak = Arc::downgrade(file);
            let index: Arc<dyn ChunkIndex> = match *index {
                // Never written: no index structure exists yet (the single-chunk and implicit
                // indexes say the same with their undefined addresses below).
                IndexKind::BtreeV1 { address }
                | IndexKind::FixedArray { address, .. }
                | IndexKind::ExtensibleArray { address, .. }
                | IndexKind::BtreeV2 { address, .. }
                    if address == UNDEFINED_ADDRESS =>
                {
                    Arc::new(UnallocatedIndex)
                }
                IndexKind::BtreeV1 { address } => {
                    Arc::new(BtreeV1Index::new(file, address, layout_dims.clone()))
                }
                IndexKind::SingleChunk { address, filtered } => {
                    Arc::new(SingleChunkIndex(if address == UNDEFINED_ADDRESS {
                        None
                    } else {
                        let (size, mask) = filtered.unwrap_or((chunk_bytes, 0));
                        Some(ChunkRecord {
                            addr: file.abs(address)?,
                            size,
                            filter_mask: mask,
                        })
                    }))
                }
                IndexKind::Implicit { address } => Arc::new(ImplicitIndex {
                    base: if address == UNDEFINED_ADDRESS {
                        None
                    } else {
                        Some(file.abs(address)?)
                    },
                    grid: grid(&max, &chunk_dims),
                    chunk_bytes,
                }),
                IndexKind::FixedArray { address, .. } => Arc::new(FixedArrayIndex {
                    meta: file.cache_handle(),
                    header: address,
                    counts: grid(&max, &chunk_dims),
                    chunk_bytes,
                    space: None,
                }),
                IndexKind::ExtensibleArray { address, .. } => {
                    let unlimited = max.iter().position(|&m| m == UNLIMITED).unwrap_or(0);
                    Arc::new(ExtensibleArrayIndex {
                        meta: file.cache_handle(),
                        header: address,
                        counts: grid(&max, &chunk_dims),
                        unlimited,
                        chunk_bytes,
                        space: None,
                        encoders: Default::default(),
                        last_data_block: Default::default(),
                    })
                }
                IndexKind::BtreeV2 { address, .. } => Arc::new(BtreeV2Index {
                    file: weak,
                    header: address,
                    rank: dims.len(),
                    chunk_bytes,
                    chunk_size_len: h5_format::btree2::filtered_chunk_size_len(
                        info.layout.version,
                        file.sizes,
                        chunk_bytes,
                    ),
                }),
            };
            let index = Arc::new(WithinFile {
                inner: index,
                eof: file.storage.len()?,
            });
            let decoder = PipelineDecoder {
                pipeline: pipeline_of(&info.pipeline),
                elem_size: elem,
                chunk_elems: usize::try_from(chunk_elems)
                    .map_err(|_| Error::Unsupported("chunk too large".into()))?,
            };
            let unfiltered_edges =
                info.layout.class.unfiltered_edge_chunks() && !decoder.is_identity();
            Ok(Arc::new(ChunkedLayout {
                dims,
                chunk_dims,
                elem_size: elem,
                fill,
                index,
                decoder: Arc::new(decoder),
                unfiltered_edges,
            }))
        }
        LayoutClass::Virtual {
            heap_address,
            heap_index,
        } => Ok(Arc::new(crate::virtual_ds::layout(
            file,
            info,
            *heap_address,
            *heap_index,
        )?)),
    }
}

/// Chunks are smaller than this (libhdf5: "chunk size must be < 4GB").
pub const MAX_CHUNK_BYTES: u64 = 1 << 32;

/// Checks that `size` bytes at absolute `addr` lie inside the file (a damaged size or address
/// must not drive an allocation or a read past the end).
fn within_file(file: &FileShared, addr: u64, size: u64) -> std::result::Result<(), String> {
    let eof = file.storage.len().map_err(|e| e.to_string())?;
    match addr.checked_add(size) {
        Some(end) if end <= eof => Ok(()),
        _ => Err(format!(
            "raw data at {addr:#x} of {size} bytes extends past the end of the file ({eof} bytes)"
        )),
    }
}

/// A chunk index whose records are checked to lie inside the file.
#[derive(Debug)]
struct WithinFile {
    inner: Arc<dyn ChunkIndex>,
    eof: u64,
}

impl ChunkIndex for WithinFile {
    fn lookup(
        &self,
        coords: &[h5_chunkcache::ChunkCoord],
    ) -> std::result::Result<Vec<Option<ChunkRecord>>, h5_chunkcache::LayoutError> {
        let records = self.inner.lookup(coords)?;
        for r in records.iter().flatten() {
            if r.addr.checked_add(r.size).is_none_or(|end| end > self.eof) {
                return Err(format!(
                    "chunk at {:#x} of {} bytes extends past the end of the file ({} bytes)",
                    r.addr, r.size, self.eof
                )
                .into());
            }
        }
        Ok(records)
    }
}

/// Compact data: the bytes are in the layout message, already read through the metadata cache.
/// The cache "reads" zero bytes and decode hands out the message's data.
#[derive(Debug)]
struct CompactLayout {
    dims: Vec<u64>,
    elem_size: usize,
    fill: Vec<u8>,
    data: Vec<u8>,
}

impl ChunkLayout for CompactLayout {
    crate::layouts::read_only_writes!();

    fn query(&self) -> h5_chunkcache::LayoutInfo {
        let chunk: Vec<u64> = self.dims.iter().map(|&d| d.max(1)).collect();
        h5_chunkcache::LayoutInfo {
            needs_codec: true,
            ..h5_chunkcache::LayoutInfo::dense(&chunk, self.elem_size, &self.fill)
        }
    }
    fn extent(&self) -> Vec<u64> {
        self.dims.clone()
    }
    fn lookup(
        &self,
        coords: &[h5_chunkcache::ChunkCoord],
    ) -> Result<Vec<h5_chunkcache::Lookup>, h5_chunkcache::LayoutError> {
        Ok(coords
            .iter()
            .map(|_| {
                h5_chunkcache::Lookup::dense(
                    Some(DiskLocation { addr: 0, size: 0 }),
                    self.data.len(),
                    Box::new(()),
                )
            })
            .collect())
    }
    fn decode(
        &self,
        _: &h5_chunkcache::ChunkCoord,
        _: Vec<u8>,
        _: bool,
        _: &mut h5_chunkcache::Udata,
    ) -> Result<h5_chunkcache::Chunk, h5_chunkcache::LayoutError> {
        let dims: Vec<u64> = self.dims.iter().map(|&d| d.max(1)).collect();
        let (_, chunk) = crate::write::chunks::block_size("compact data", &dims, self.elem_size)?;
        let mut v = self.data.clone();
        v.try_reserve_exact(chunk.saturating_sub(v.len()))
            .map_err(|_| Error::too_large("compact data", u64::try_from(chunk).ok()))?;
        v.resize(chunk, 0);
        Ok(h5_chunkcache::Chunk::Dense(v))
    }
    fn encode(
        &self,
        _: &h5_chunkcache::ChunkCoord,
        _: &h5_chunkcache::Chunk,
        _: bool,
        _: &mut h5_chunkcache::Udata,
    ) -> Result<h5_chunkcache::Encoded, h5_chunkcache::LayoutError> {
        Err("compact datasets are read-only for now".into())
    }
}

/// The dataset's identity in the chunk cache: its absolute object header address.
fn dataset_id(file: &FileShared, info: &DatasetInfo) -> Result<DatasetId> {
    Ok(DatasetId(file.abs(info.address)?))
}

/// [`ensure_registered`] made once per chunk-cache registrations epoch for a dataset whose
/// handle holds `slot` (and made every time without one, or once the file forgot it): the
/// result, with the writable chunked layout the write state holds for the dataset, is
/// remembered in the slot.
pub(crate) fn registration(
    file: &Arc<FileShared>,
    slot: Option<&DatasetSlot>,
    info: &DatasetInfo,
) -> Result<crate::descriptions::Registered> {
    let slot = slot.filter(|s| !s.is_forgotten());
    let epoch = registrations_epoch(file)?;
    if let Some(r) = slot.and_then(|s| s.registered_at(epoch)) {
        return Ok(r);
    }
    check_registration(file, slot, info, epoch)
}

/// [`registration`]'s chunk-cache identity alone (a write needs no layout).
pub(crate) fn registered_id(
    file: &Arc<FileShared>,
    slot: Option<&DatasetSlot>,
    info: &DatasetInfo,
) -> Result<DatasetId> {
    let slot = slot.filter(|s| !s.is_forgotten());
    let epoch = registrations_epoch(file)?;
    if let Some(id) = slot.and_then(|s| s.registered_id_at(epoch)) {
        return Ok(id);
    }
    Ok(check_registration(file, slot, info, epoch)?.id)
}

/// The chunk cache's registrations epoch, read before a registration check: a dataset
/// forgotten after it changes the epoch, so what the check finds is never used then.
fn registrations_epoch(file: &FileShared) -> Result<u64> {
    Ok(file
        .chunks
        .read()
        .map_err(|_| Error::Poisoned)?
        .registrations_epoch())
}

/// The registration check of [`registration`] at `epoch`, remembered in `slot`.
fn check_registration(
    file: &Arc<FileShared>,
    slot: Option<&DatasetSlot>,
    info: &DatasetInfo,
    epoch: u64,
) -> Result<crate::descriptions::Registered> {
    let id = ensure_registered(file, info)?;
    let layout = if file.is_writable() {
        file.state()?.chunked.get(&info.address).cloned()
    } else {
        None
    };
    let r = crate::descriptions::Registered { epoch, id, layout };
    if let Some(s) = slot {
        s.remember(r.clone());
    }
    Ok(r)
}

/// Registers the dataset's layout with the chunk cache if it is not yet.
///
/// Building a layout has effects in a writable file (its writable index joins the file's
/// flush list, a late-allocated contiguous dataset gets its space), so it happens once per
/// dataset: under the file's registration lock, after a second look.
pub(crate) fn ensure_registered(file: &Arc<FileShared>, info: &DatasetInfo) -> Result<DatasetId> {
    let id = dataset_id(file, info)?;
    let registered = || -> Result<bool> {
        Ok(file
            .chunks
            .read()
            .map_err(|_| Error::Poisoned)?
            .is_registered(id))
    };
    if registered()? {
        return Ok(id);
    }
    let _building = file.registering.lock().map_err(|_| Error::Poisoned)?;
    if registered()? {
        return Ok(id);
    }
    if let Some(ext) = &info.external {
        let (layout, storage) = external_layout(file, info, ext)?;
        let mut chunks = file.chunks.lock().map_err(|_| Error::Poisoned)?;
        chunks.register_in(id, layout, storage)?;
        return Ok(id);
    }
    let layout = match crate::write::dataset::existing_layout(file, info)? {
        Some(l) => l,
        None => build_layout(file, info)?,
    };
    let mut chunks = file.chunks.lock().map_err(|_| Error::Poisoned)?;
    chunks.register(id, layout)?;
    Ok(id)
}

/// A dataset stored in external files: one contiguous block on the concatenation of the
/// files' segments. Relative file names resolve against the HDF5 file's directory.
fn external_layout(
    file: &Arc<FileShared>,
    info: &DatasetInfo,
    ext: &h5_format::message::external_files::ExternalFiles,
) -> Result<(Arc<dyn ChunkLayout>, Arc<dyn h5_io::Storage>)> {
    let mut segments = Vec::with_capacity(ext.slots.len());
    for slot in &ext.slots {
        let name = crate::lheap::LocalHeap {
            addr: ext.heap_address,
        }
        .string(&mut file.cache()?, slot.name_offset)?;
        let name = String::from_utf8_lossy(&name).into_owned();
        let path = match &file.dir {
            Some(d) if !std::path::Path::new(&name).is_absolute() => d.join(&name),
            _ => std::path::PathBuf::from(&name),
        };
        let storage = h5_io::FileStorage::open(&path, h5_io::OpenMode::ReadOnly)?;
        segments.push(crate::external::Segment {
            file: Arc::new(storage),
            offset: slot.file_offset,
            size: slot.size,
        });
    }
    let storage = crate::external::ExternalStorage::new(segments);
    let size = crate::buffer::product(info.dims().iter().copied())
        .and_then(|n| n.checked_mul(info.elem_size() as u64))
        .filter(|&size| size <= h5_io::Storage::len(&storage).unwrap_or(0))
        .ok_or_else(|| {
            Error::Format(h5_format::FormatError::Corrupted {
                structure: "external data files message",
                address: info.address,
                reason: "the external files hold fewer bytes than the dataset".into(),
            })
        })?;
    let layout = SingleBlockLayout {
        dims: info.dims().to_vec(),
        elem_size: info.elem_size(),
        fill: info.fill.clone().unwrap_or_default(),
        location: Some(DiskLocation { addr: 0, size }),
    };
    Ok((Arc::new(layout), Arc::new(storage)))
}

/// Reads the elements `sel` selects into `buf`: densely in selection order, or at the positions
/// `memory` selects; converted by `conv` when given (else `buf` holds file-type elements).
pub fn read(
    file: &Arc<FileShared>,
    info: &DatasetInfo,
    sel: &Selection,
    memory: Option<&MemorySelection>,
    conv: Option<&dyn Conversion>,
    buf: &mut [u8],
) -> Result<()> {
    file.check_open()?;
    let id = ensure_registered(file, info)?;
    let mut req = ReadRequest::new(id, sel, buf);
    if let Some(m) = memory {
        req = req.in_memory(m);
    }
    if let Some(c) = conv {
        req = req.converting(c);
    }
    // The chunk cache's lock is released while chunks are read and decoded: concurrent reads
    // of one file overlap.
    h5_chunkcache::ChunkCache::read_shared(&file.chunks, &mut [req])?;
    Ok(())
}

/// Reads several datasets of one file in one chunk-cache call (their misses are looked up per
/// dataset and read with one vectored read, decoded in parallel): each request is a dataset,
/// a selection and a buffer of file-type elements.
pub fn read_many(
    file: &Arc<FileShared>,
    reqs: &mut [(&DatasetInfo, &Selection, &mut [u8])],
) -> Result<()> {
    file.check_open()?;
    let mut ids = Vec::with_capacity(reqs.len());
    for (info, _, _) in reqs.iter() {
        ids.push(ensure_registered(file, info)?);
    }
    let mut requests: Vec<ReadRequest<'_>> = reqs
        .iter_mut()
        .zip(&ids)
        .map(|((_, sel, buf), id)| ReadRequest::new(*id, sel, buf))
        .collect();
    h5_chunkcache::ChunkCache::read_shared(&file.chunks, &mut requests)?;
    Ok(())
}

/// Looks every chunk of the grid `counts` up in `layout`, in row-major order (in batches of
/// 4096), and hands each coordinate with its lookup to `visit`. Grids of more than 2^24 chunks
/// are refused ("too many chunks to `what`").
pub(crate) fn visit_chunks(
    layout: &dyn ChunkLayout,
    counts: &[u64],
    what: &str,
    mut visit: impl FnMut(&h5_chunkcache::ChunkCoord, h5_chunkcache::Lookup) -> Result<()>,
) -> Result<()> {
    let total = counts.iter().try_fold(1u64, |a, &c| a.checked_mul(c));
    let Some(total) = total.filter(|&t| t <= 1 << 24) else {
        return Err(Error::Unsupported(format!("too many chunks to {what}")));
    };
    let mut lookup = |batch: &mut Vec<h5_chunkcache::ChunkCoord>| -> Result<()> {
        let found = layout
            .lookup(batch)
            .map_err(|e| Error::from_layout(e, "chunk index"))?;
        for (c, l) in batch.iter().zip(found) {
            visit(c, l)?;
        }
        batch.clear();
        Ok(())
    };
    let mut coord = vec![0u64; counts.len()];
    let mut batch = Vec::new();
    for _ in 0..total {
        batch.push(
            h5_chunkcache::ChunkCoord::new(&coord)
                .ok_or_else(|| Error::Unsupported("rank too large".into()))?,
        );
        crate::indexes::next_coords(&mut coord, counts);
        if batch.len() == 4096 {
            lookup(&mut batch)?;
        }
    }
    lookup(&mut batch)
}

/// Stored (encoded) size in bytes of every allocated chunk of a chunked dataset, in chunk-grid
/// order, or of the single block of contiguous data in the file (external, compact and virtual
/// data occupy no raw bytes of the file: empty). For statistics such as `h5 stat`.
pub fn stored_sizes(file: &Arc<FileShared>, info: &DatasetInfo) -> Result<Vec<u64>> {
    match &info.layout.class {
        LayoutClass::Contiguous { address, size } => {
            if info.external.is_some() || *address == UNDEFINED_ADDRESS {
                return Ok(Vec::new());
            }
            let data_size = crate::buffer::product(info.dims().iter().copied())
                .and_then(|n| n.checked_mul(info.elem_size() as u64))
                .unwrap_or(u64::MAX);
            Ok(vec![size.unwrap_or(data_size)])
        }
        LayoutClass::Chunked { .. } => {
            let layout = build_layout(file, info)?;
            let chunk_dims = info.chunk_dims().unwrap_or_default();
            let counts = grid(info.dims(), &chunk_dims);
            let mut sizes = Vec::new();
            visit_chunks(layout.as_ref(), &counts, "list", |_, l| {
                sizes.extend(l.location.map(|d| d.size));
                Ok(())
            })?;
            Ok(sizes)
        }
        _ => Ok(Vec::new()),
    }
}

/// Which elements of a dataset have storage in the file (the others read as the fill value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredData {
    /// None: the dataset was never written (no chunk, or contiguous storage never allocated).
    Nothing,
    /// The chunks of a chunked dataset that are allocated, some but not all of its grid.
    Chunks {
        /// Chunk dimensions.
        chunk: Vec<u64>,
        /// Scaled coordinates (element offset / chunk dimension) of every allocated chunk.
        allocated: std::collections::HashSet<Vec<u64>>,
    },
    /// Every element (or the dataset's storage cannot be listed chunk by chunk).
    Everything,
}

/// Which elements of the dataset `info` describes have storage (for copying only what was
/// written). Compact, virtual and external data count as everything; a chunk grid too large
/// to list ([`stored_sizes`]' limit) too.
pub fn stored_data(file: &Arc<FileShared>, info: &DatasetInfo) -> Result<StoredData> {
    match &info.layout.class {
        LayoutClass::Contiguous { address, .. } => Ok(
            if info.external.is_none() && *address == UNDEFINED_ADDRESS {
                StoredData::Nothing
            } else {
                StoredData::Everything
            },
        ),
        LayoutClass::Chunked { .. } => {
            let layout = build_layout(file, info)?;
            let chunk = info.chunk_dims().unwrap_or_default();
            let counts = grid(info.dims(), &chunk);
            let total = counts.iter().try_fold(1u64, |a, &c| a.checked_mul(c));
            let mut allocated = std::collections::HashSet::new();
            let listed = visit_chunks(layout.as_ref(), &counts, "list", |c, l| {
                if l.location.is_some() {
                    allocated.insert(c.as_slice().to_vec());
                }
                Ok(())
            });
            Ok(match listed {
                Err(Error::Unsupported(_)) => StoredData::Everything,
                Err(e) => return Err(e),
                Ok(()) if allocated.is_empty() => StoredData::Nothing,
                Ok(()) if Some(allocated.len() as u64) == total => StoredData::Everything,
                Ok(()) => StoredData::Chunks { chunk, allocated },
            })
        }
        _ => Ok(StoredData::Everything),
    }
}
