//! Creating datasets and attributes, and writing raw data through the shared chunk cache.

use std::sync::{Arc, Mutex};

use h5_chunkcache::selection::{MemorySelection, Selection};
use h5_chunkcache::{
    Bypass, ChunkLayout, Conversion, DIRECT_WHOLE_MIN, DiskLocation, WriteRequest,
};
use h5_format::UNDEFINED_ADDRESS;
use h5_format::datatype::Datatype;
use h5_format::message::attribute::{AttributeMessage, MaybeShared};
use h5_format::message::dataspace::{Dataspace, DataspaceKind, UNLIMITED};
use h5_format::message::fill_value::{AllocTime, FillDefined, FillTime, FillValue};
use h5_format::message::filter_pipeline::Filter;
use h5_format::message::layout::{ChunkIndex, Layout, LayoutClass};
use h5_format::message::{Message, encode_message, kind};
use h5_format::object_header::msg_flags;

use crate::btree1::chunk::ChunkBtree;
use crate::dataset::{DatasetInfo, DatasetSlot};
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::object::{HeaderMessage, ObjectHeader};
use crate::write::FormatBounds;
use crate::write::alloc::SpaceKind;
use crate::write::alloc_time::{Pending, initialises};
use crate::write::chunk_index::ChunkIndexKind;
use crate::write::chunk_index::bounded::BoundedIndex;
use crate::write::chunk_index::btree1::BtreeV1Chunks;
use crate::write::chunk_index::create::{ChunkedSpec, rewrite_layout_message};
use crate::write::chunks::{AtFlush, ChunkedWriteLayout, ContiguousLayout, WritableChunkIndex};
use crate::write::{attrs, ohdr};

/// How a new dataset stores its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NewLayout {
    /// One block allocated at creation.
    Contiguous,
    /// The data inside the layout message (at most
    /// [`MAX_COMPACT_BYTES`](crate::write::compact::MAX_COMPACT_BYTES); fixed dimensions).
    Compact,
    /// Chunks of these dimensions, passed through `filters` in order.
    Chunked {
        /// Chunk dimensions (same rank as the dataset, none zero).
        chunk: Vec<u64>,
        /// The filter pipeline.
        filters: Vec<Filter>,
        /// Partial edge chunks (reaching past the extent) are stored without the filters
        /// (libhdf5's `H5Pset_chunk_opts` with `H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS`). As in
        /// libhdf5, the layout message is then of version 4 or later, so the chunk index is
        /// one of HDF5 1.10's whatever the format bounds (not a version 1 B-tree).
        unfiltered_edges: bool,
    },
}

/// Everything that describes a new dataset.
#[derive(Clone, Debug)]
pub struct NewDataset {
    /// The element type in the file.
    pub datatype: Datatype,
    /// Current dimensions (empty: a scalar).
    pub dims: Vec<u64>,
    /// Maximum dimensions ([`UNLIMITED`] allowed with chunked layouts); `None`: the current ones.
    pub max_dims: Option<Vec<u64>>,
    /// Storage.
    pub layout: NewLayout,
    /// A fill value (one element in the file type); `None`: zeros.
    pub fill: Option<Vec<u8>>,
    /// The chunk index of a chunked dataset; `None`: libhdf5's choice for the file's format
    /// bounds ([`crate::write::chunk_index::choose`]).
    pub chunk_index: Option<ChunkIndexKind>,
    /// When space is allocated; `None`: libhdf5's default for the layout (contiguous late,
    /// chunked incremental, compact early).
    pub alloc_time: Option<AllocTime>,
    /// When fill values are written into allocated space; `None`: "if set".
    pub fill_time: Option<FillTime>,
    /// The creator writes every element right after creating the dataset (a create with
    /// data): contiguous storage that would wait for its first write is allocated with the
    /// header instead (just after it, where that write would put it), so that the layout
    /// message is written once, with its address, and the write needs no fill. The fill value
    /// message still says "late", as libhdf5's does for `create_dataset(data=...)`.
    pub data_follows: bool,
}

/// A dataset just made by [`FileShared::create_dataset`].
#[derive(Clone, Debug)]
pub struct CreatedDataset {
    /// The relative address of its object header.
    pub address: u64,
    /// Its object header as a load from the file decodes it now.
    pub header: Arc<ObjectHeader>,
}

/// Whether a new dataset's `messages` decode from the file exactly as they were built, so that
/// the creator can hand over its header without reading it back: integer and floating-point
/// types encode every field; a fill value of no bytes is stored as "user-defined, size 0" and
/// decodes as the default; a filter's name is not stored in every pipeline version.
fn decodes_as_written(messages: &[Message]) -> bool {
    messages.iter().all(|m| match m {
        Message::Datatype(t) => matches!(t, Datatype::FixedPoint(_) | Datatype::Float(_)),
        Message::FillValue(f) => f.value.as_ref().is_none_or(|v| !v.is_empty()),
        Message::FilterPipeline(p) => p.filters.iter().all(|f| f.name.is_none()),
        _ => true,
    })
}

/// The decoded form of a new header of `version` at `addr` whose messages are `messages`
/// (flags as [`msg`] writes them; a new header tracks no creation order).
fn new_header(addr: u64, version: u8, messages: Vec<Message>) -> ObjectHeader {
    let messages = messages
        .into_iter()
        .map(|message| HeaderMessage {
            kind: h5_format::message::message_kind(&message),
            flags: message_flags(&message),
            creation_order: None,
            message,
            shared_from: None,
        })
        .collect();
    ObjectHeader {
        address: addr,
        version,
        messages,
    }
}

/// The header flags a new dataset's message is written with: the datatype and the fill value
/// never change.
fn message_flags(m: &Message) -> u8 {
    if matches!(m, Message::Datatype(_) | Message::FillValue(_)) {
        msg_flags::CONSTANT
    } else {
        0
    }
}

fn msg(
    m: &Message,
    sizes: h5_format::Sizes,
    bounds: FormatBounds,
) -> Result<crate::object::StoredMessage> {
    let body = match m {
        Message::Datatype(t) => t.encode(bounds.datatype_version(t))?,
        _ => encode_message(m, sizes)?,
    };
    Ok(ohdr::message(
        h5_format::message::message_kind(m),
        message_flags(m),
        body,
    ))
}

impl FileShared {
    /// Creates a dataset named `name` in the group at `parent`; returns its header's address
    /// and decoded form.
    pub fn create_dataset(
        self: &Arc<Self>,
        parent: u64,
        name: &str,
        spec: &NewDataset,
    ) -> Result<CreatedDataset> {
        self.check_usable()?;
        self.check_structure_change("creating a dataset")?;
        // Taken by the link, made once the header has its address.
        let mut place = Some(self.new_link_place(parent, name)?);
        let sizes = self.sizes;
        let bounds = self.bounds();
        let elem = spec.datatype.size() as usize;
        if elem == 0 {
            return Err(Error::Invalid("a datatype of size 0".into()));
        }
        let rank = spec.dims.len();
        if let Some(m) = &spec.max_dims
            && (m.len() != rank
                || m.iter()
                    .zip(&spec.dims)
                    .any(|(m, d)| *m != UNLIMITED && m < d))
        {
            return Err(Error::Invalid(
                "maximum dimensions below the current ones".into(),
            ));
        }
        let elements = spec
            .dims
            .iter()
            .try_fold(1u64, |a, d| a.checked_mul(*d))
            .ok_or_else(|| Error::Invalid("too many elements".into()))?;
        let bytes = elements
            .checked_mul(elem as u64)
            .ok_or_else(|| Error::Invalid("dataset too large".into()))?;
        let fill = spec.fill.clone().unwrap_or_default();
        if !fill.is_empty() && fill.len() != elem {
            return Err(Error::Invalid(
                "fill value of another size than the datatype".into(),
            ));
        }
        let dataspace = Dataspace {
            version: bounds.dataspace_version(),
            kind: if rank == 0 {
                DataspaceKind::Scalar
            } else {
                DataspaceKind::Simple
            },
            dims: spec.dims.clone(),
            max_dims: spec.max_dims.clone().filter(|m| *m != spec.dims),
            permutation: None,
        };
        let mut created_chunked = None;
        let mut needs_header = None;
        let mut created_compact = None;
        let mut pending = None;
        // Contiguous storage allocated with the header (`data_follows`): its layout, bytes.
        let mut with_header: Option<(Arc<ContiguousLayout>, u64)> = None;
        let mut allocated = None;
        let fill_time = spec.fill_time.unwrap_or(FillTime::IfSet);
        let (layout_class, alloc_time, pipeline, layout): (_, _, _, Arc<dyn ChunkLayout>) =
            match &spec.layout {
                NewLayout::Contiguous => {
                    if spec.max_dims.as_ref().is_some_and(|m| *m != spec.dims) {
                        return Err(Error::Invalid(
                            "a contiguous dataset cannot grow: use chunks".into(),
                        ));
                    }
                    let alloc = spec.alloc_time.unwrap_or(AllocTime::Late);
                    let layout = Arc::new(ContiguousLayout {
                        dims: spec.dims.clone(),
                        elem_size: elem,
                        fill: fill.clone(),
                        location: std::sync::Mutex::new(None),
                    });
                    let address = if bytes == 0 {
                        *layout.location.lock().map_err(|_| Error::Poisoned)? =
                            Some(DiskLocation { addr: 0, size: 0 });
                        UNDEFINED_ADDRESS
                    } else if alloc == AllocTime::Early {
                        let address = self.allocate(SpaceKind::Raw, bytes)?;
                        if initialises(fill_time) {
                            self.initialise(address, bytes, &fill)?;
                        }
                        *layout.location.lock().map_err(|_| Error::Poisoned)? =
                            Some(DiskLocation {
                                addr: self.abs(address)?,
                                size: bytes,
                            });
                        address
                    } else if spec.data_follows {
                        with_header = Some((Arc::clone(&layout), bytes));
                        UNDEFINED_ADDRESS
                    } else {
                        pending = Some(Pending::Contiguous {
                            layout: Arc::clone(&layout),
                            bytes,
                            fill_time,
                        });
                        UNDEFINED_ADDRESS
                    };
                    (
                        LayoutClass::Contiguous {
                            address,
                            size: Some(bytes),
                        },
                        alloc,
                        None,
                        layout as Arc<dyn ChunkLayout>,
                    )
                }
                NewLayout::Compact => {
                    if spec.max_dims.as_ref().is_some_and(|m| *m != spec.dims) {
                        return Err(Error::Invalid("a compact dataset cannot grow".into()));
                    }
                    let (class, data, layout) = self.new_compact(&spec.dims, elem, &fill, bytes)?;
                    created_compact = Some(data);
                    (
                        class,
                        spec.alloc_time.unwrap_or(AllocTime::Early),
                        None,
                        layout,
                    )
                }
                NewLayout::Chunked {
                    chunk,
                    filters,
                    unfiltered_edges,
                } => {
                    if chunk.len() != rank || rank == 0 || chunk.contains(&0) {
                        return Err(Error::Invalid(format!(
                            "chunk dimensions {chunk:?} for a dataset of rank {rank}"
                        )));
                    }
                    let max = spec.max_dims.clone().unwrap_or_else(|| spec.dims.clone());
                    let alloc = spec.alloc_time.unwrap_or(AllocTime::Incremental);
                    let made = self.new_chunked(&ChunkedSpec {
                        dims: &spec.dims,
                        max: &max,
                        chunk,
                        filters,
                        elem,
                        fill: &fill,
                        alloc,
                        fill_time,
                        kind: spec.chunk_index,
                        unfiltered_edges: *unfiltered_edges,
                    })?;
                    let layout = made.layout;
                    needs_header = made.needs_header;
                    if alloc == AllocTime::Late {
                        pending = Some(Pending::Chunked(Arc::clone(&layout)));
                    }
                    created_chunked = Some(Arc::clone(&layout));
                    (
                        made.class,
                        alloc,
                        made.pipeline,
                        layout as Arc<dyn ChunkLayout>,
                    )
                }
            };
        let fill_msg = FillValue {
            version: bounds.fill_value_version(),
            alloc_time: Some(alloc_time),
            fill_time: Some(fill_time),
            defined: if spec.fill.is_some() {
                FillDefined::User
            } else {
                FillDefined::Default
            },
            value: spec.fill.clone(),
        };
        let pipeline_present = pipeline.is_some();
        let mut layout_msg = Layout {
            version: 3,
            class: layout_class,
        };
        layout_msg.version = crate::write::chunk_index::create::layout_version(
            self,
            &layout_msg.class,
            pipeline_present,
        );
        // Room for the pipeline and the layout: growing a vector of messages copies them.
        let mut decoded = Vec::with_capacity(5);
        decoded.extend([
            Message::Dataspace(dataspace),
            Message::Datatype(spec.datatype.clone()),
            Message::FillValue(fill_msg),
        ]);
        decoded.extend(pipeline.map(Message::FilterPipeline));
        decoded.push(Message::Layout(layout_msg));
        let messages = decoded
            .iter()
            .map(|m| msg(m, sizes, bounds))
            .collect::<Result<Vec<_>>>()?;
        let version = bounds.object_header_version();
        let addr = match &with_header {
            None => ohdr::create(self, version, messages)?,
            Some((layout, bytes)) => {
                let last = decoded.len().saturating_sub(1);
                ohdr::create_then(self, version, 0, 0, messages, |addr| {
                    // Linked first: the link's structures take their space before the data,
                    // as they do when the data is allocated at its first write.
                    if let Some(place) = place.take() {
                        self.link_new(place, parent, name, addr)?;
                    }
                    let Some(Message::Layout(l)) = decoded.last_mut() else {
                        return Err(Error::Invalid("a new dataset without its layout".into()));
                    };
                    let (p, body) = self.allocate_contiguous(layout, *bytes, fill_time, l)?;
                    allocated = Some(p);
                    Ok(Some((last, body)))
                })?
            }
        };
        if let Some(p) = allocated {
            self.state()?.pending.insert(addr, p);
        }
        if let Some(s) = &needs_header {
            s.set_header(addr)?;
        }
        if let Some(d) = &created_compact {
            *d.header.lock().map_err(|_| Error::Poisoned)? = Some(addr);
        }
        let id = h5_chunkcache::DatasetId(self.abs(addr)?);
        self.chunks
            .lock()
            .map_err(|_| Error::Poisoned)?
            .register(id, layout)?;
        if let Some(l) = created_chunked {
            self.state()?.chunked.insert(addr, l);
        }
        if let Some(p) = pending {
            self.state()?.pending.insert(addr, p);
        }
        if let Some(place) = place {
            self.link_new(place, parent, name, addr)?;
        }
        let header = if decodes_as_written(&decoded) {
            Arc::new(new_header(addr, version, decoded))
        } else {
            ObjectHeader::load(self, addr)?
        };
        Ok(CreatedDataset {
            address: addr,
            header,
        })
    }

    /// Allocates the `bytes` of a new contiguous dataset's storage whose layout is `layout`,
    /// for the write its creator makes next: the address goes into `layout` and into
    /// `message`, returned encoded, and the dataset waits for that write as
    /// [`Pending::Allocated`].
    fn allocate_contiguous(
        &self,
        layout: &ContiguousLayout,
        bytes: u64,
        fill_time: FillTime,
        message: &mut Layout,
    ) -> Result<(Pending, Vec<u8>)> {
        let address = self.allocate(SpaceKind::Raw, bytes)?;
        *layout.location.lock().map_err(|_| Error::Poisoned)? = Some(DiskLocation {
            addr: self.abs(address)?,
            size: bytes,
        });
        message.class = LayoutClass::Contiguous {
            address,
            size: Some(bytes),
        };
        let pending = Pending::Allocated {
            address,
            bytes,
            fill_time,
            fill: layout.fill.clone(),
        };
        Ok((pending, message.encode(self.sizes)?))
    }

    /// Fills `bytes` of newly allocated raw data at relative `addr` with `fill` when the space
    /// may hold old bytes or the fill value is not zero (space past the end of the storage
    /// reads as zeros once the storage is extended over it).
    pub(crate) fn initialise(&self, addr: u64, bytes: u64, fill: &[u8]) -> Result<()> {
        let abs = self.abs(addr)?;
        let end = abs
            .checked_add(bytes)
            .ok_or_else(|| Error::Invalid("dataset too large".into()))?;
        let zero = fill.iter().all(|b| *b == 0);
        let len = self.storage.len()?;
        if zero && abs >= len {
            // Past the end: the storage is extended (it reads as zeros) so that reads of the
            // block before its first write succeed.
            self.storage.set_len(end)?;
            return Ok(());
        }
        const PIECE: u64 = 1 << 20;
        let unit = fill.len().max(1) as u64;
        #[allow(
            clippy::arithmetic_side_effects,
            reason = "unit >= 1, and the result is at most max(PIECE, unit): one fill value in memory"
        )]
        let piece = (PIECE / unit).max(1) * unit;
        let pattern: Vec<u8> = if zero {
            vec![0; piece as usize]
        } else {
            fill.iter().copied().cycle().take(piece as usize).collect()
        };
        let mut at = abs;
        while at < end {
            #[allow(clippy::arithmetic_side_effects, reason = "at < end (loop condition)")]
            let n = (end - at).min(piece);
            // n <= piece = pattern.len()
            let part = pattern.get(..n as usize).unwrap_or(&pattern);
            self.storage.write_at(at, part)?;
            #[allow(clippy::arithmetic_side_effects, reason = "at + n <= end")]
            {
                at += n;
            }
        }
        Ok(())
    }

    /// Adds (or replaces) the attribute `name` on the object at `obj`: `data` holds the
    /// elements in the file type.
    pub fn write_attribute(
        &self,
        obj: u64,
        name: &str,
        datatype: &Datatype,
        dims: Option<&[u64]>,
        data: &[u8],
    ) -> Result<()> {
        self.check_usable()?;
        self.check_structure_change("writing an attribute")?;
        if name.is_empty() || name.contains('\0') {
            return Err(Error::Invalid(format!("attribute name {name:?}")));
        }
        let elements = dims.map_or(Some(1), |d| crate::buffer::product(d.iter().copied()));
        let bytes = elements.and_then(|n| n.checked_mul(u64::from(datatype.size())));
        if bytes != Some(data.len() as u64) {
            return Err(Error::Invalid(format!(
                "attribute {name}: {} bytes for {} elements of {} bytes",
                data.len(),
                elements.map_or_else(|| "too many".into(), |n| n.to_string()),
                datatype.size()
            )));
        }
        let bounds = self.bounds();
        let m = AttributeMessage {
            version: bounds.attribute_version(),
            name: name.to_owned(),
            name_charset: if name.is_ascii() || !bounds.new_style() {
                h5_format::datatype::Charset::Ascii
            } else {
                h5_format::datatype::Charset::Utf8
            },
            datatype: MaybeShared::Inline(datatype.clone()),
            dataspace: MaybeShared::Inline(Dataspace {
                version: bounds.dataspace_version(),
                kind: if dims.is_some() {
                    DataspaceKind::Simple
                } else {
                    DataspaceKind::Scalar
                },
                dims: dims.map(<[u64]>::to_vec).unwrap_or_default(),
                max_dims: None,
                permutation: None,
            }),
            data: data.to_vec(),
        };
        let body = m.encode(self.sizes, bounds.datatype_version(datatype))?;
        let old = self.vlen_attribute(obj, name)?;
        attrs::store(self, obj, name, body)?;
        match old {
            Some((t, raw)) => self.free_replaced_vlen(&t, &raw, Some(datatype), data),
            None => Ok(()),
        }
    }
}

impl FileShared {
    /// Creates the dataset `name` in the group at `parent` with a null dataspace (a datatype
    /// but no elements, h5py's `h5py.Empty`): contiguous storage that is never allocated, as
    /// libhdf5 writes it. Returns its header address.
    pub fn create_dataset_null(&self, parent: u64, name: &str, datatype: &Datatype) -> Result<u64> {
        self.check_usable()?;
        self.check_structure_change("creating a dataset")?;
        let place = self.new_link_place(parent, name)?;
        if datatype.size() == 0 {
            return Err(Error::Invalid("a datatype of size 0".into()));
        }
        let sizes = self.sizes;
        let bounds = self.bounds();
        let fill = FillValue {
            version: bounds.fill_value_version(),
            alloc_time: Some(AllocTime::Late),
            fill_time: Some(FillTime::IfSet),
            defined: FillDefined::Default,
            value: None,
        };
        let class = LayoutClass::Contiguous {
            address: UNDEFINED_ADDRESS,
            size: Some(0),
        };
        let layout = Layout {
            version: crate::write::chunk_index::create::layout_version(self, &class, false),
            class,
        };
        let messages = vec![
            // Null dataspaces exist from version 2 on.
            msg(
                &Message::Dataspace(Dataspace {
                    version: 2,
                    kind: DataspaceKind::Null,
                    dims: Vec::new(),
                    max_dims: None,
                    permutation: None,
                }),
                sizes,
                bounds,
            )?,
            msg(&Message::Datatype(datatype.clone()), sizes, bounds)?,
            msg(&Message::FillValue(fill), sizes, bounds)?,
            msg(&Message::Layout(layout), sizes, bounds)?,
        ];
        let addr = ohdr::create(self, bounds.object_header_version(), messages)?;
        self.link_new(place, parent, name, addr)?;
        Ok(addr)
    }

    /// Adds (or replaces) the attribute `name` of the object at `obj` with a null dataspace
    /// (a datatype but no elements, h5py's `h5py.Empty`).
    pub fn write_attribute_null(&self, obj: u64, name: &str, datatype: &Datatype) -> Result<()> {
        self.check_usable()?;
        self.check_structure_change("writing an attribute")?;
        if name.is_empty() || name.contains('\0') {
            return Err(Error::Invalid(format!("attribute name {name:?}")));
        }
        let bounds = self.bounds();
        let m = AttributeMessage {
            version: bounds.attribute_version(),
            name: name.to_owned(),
            name_charset: if name.is_ascii() || !bounds.new_style() {
                h5_format::datatype::Charset::Ascii
            } else {
                h5_format::datatype::Charset::Utf8
            },
            datatype: MaybeShared::Inline(datatype.clone()),
            // Null dataspaces exist from version 2 on; libhdf5 writes them so in earliest
            // files too.
            dataspace: MaybeShared::Inline(Dataspace {
                version: 2,
                kind: DataspaceKind::Null,
                dims: Vec::new(),
                max_dims: None,
                permutation: None,
            }),
            data: Vec::new(),
        };
        let body = m.encode(self.sizes, bounds.datatype_version(datatype))?;
        let old = self.vlen_attribute(obj, name)?;
        attrs::store(self, obj, name, body)?;
        match old {
            Some((t, raw)) => self.free_replaced_vlen(&t, &raw, None, &[]),
            None => Ok(()),
        }
    }
}

impl FileShared {
    /// Creates the committed (named) datatype `name` in the group at `parent`: an object
    /// header holding only the datatype message. Returns its header address.
    pub fn commit_datatype(&self, parent: u64, name: &str, datatype: &Datatype) -> Result<u64> {
        self.check_usable()?;
        self.check_structure_change("committing a datatype")?;
        let place = self.new_link_place(parent, name)?;
        let bounds = self.bounds();
        let m = msg(&Message::Datatype(datatype.clone()), self.sizes, bounds)?;
        let addr = ohdr::create(self, bounds.object_header_version(), vec![m])?;
        self.link_new(place, parent, name, addr)?;
        Ok(addr)
    }
}

impl FileShared {
    /// Deletes the attribute `name` of the object at `obj` (an error if it has none of that
    /// name).
    pub fn delete_attribute(&self, obj: u64, name: &str) -> Result<()> {
        self.check_usable()?;
        self.check_structure_change("deleting an attribute")?;
        let old = self.vlen_attribute(obj, name)?;
        attrs::delete(self, obj, name)?;
        match old {
            Some((t, raw)) => self.free_replaced_vlen(&t, &raw, None, &[]),
            None => Ok(()),
        }
    }

    /// Sets the comment of the object at `obj` (its object comment message, libhdf5's
    /// `H5Oset_comment`); `None` or an empty text removes it.
    pub fn set_comment(&self, obj: u64, text: Option<&str>) -> Result<()> {
        self.check_usable()?;
        self.check_structure_change("setting an object comment")?;
        let text = text.filter(|t| !t.is_empty());
        if text.is_some_and(|t| t.contains('\0')) {
            return Err(Error::Invalid("a comment with a null character".into()));
        }
        let body = text.map(|t| {
            h5_format::message::Comment {
                text: t.as_bytes().to_vec(),
            }
            .encode()
        });
        crate::write::ohdr::update(self, obj, |msgs| {
            let comment = h5_format::message::kind::COMMENT;
            match (msgs.iter_mut().find(|m| m.kind == comment), body) {
                (Some(m), Some(body)) => m.body = body,
                (None, Some(body)) => msgs.push(crate::write::ohdr::message(comment, 0, body)),
                (_, None) => msgs.retain(|m| m.kind != comment),
            }
            Ok(())
        })
    }

    /// Renames the attribute `name` of the object at `obj` to `new_name` (which must be free).
    pub fn rename_attribute(&self, obj: u64, name: &str, new_name: &str) -> Result<()> {
        self.check_usable()?;
        self.check_structure_change("renaming an attribute")?;
        if new_name.is_empty() || new_name.contains('\0') {
            return Err(Error::Invalid(format!("attribute name {new_name:?}")));
        }
        attrs::rename(self, obj, name, new_name)
    }
}

/// Begins a write of the dataset: allocates its storage if it waits for its first write and
/// its elements hold variable-length data. A caller that encodes variable-length data calls it
/// first, so that (as in libhdf5, which allocates before converting) the elements' storage is
/// placed before their heap objects. Other datasets are allocated by [`write()`] itself, which
/// knows whether the write overwrites every element (then no fill is written).
pub fn prepare_write(file: &Arc<FileShared>, info: &DatasetInfo) -> Result<()> {
    prepare_write_in(file, None, info)
}

/// [`prepare_write`] through a handle holding the dataset's `slot`.
pub fn prepare_write_in(
    file: &Arc<FileShared>,
    slot: Option<&DatasetSlot>,
    info: &DatasetInfo,
) -> Result<()> {
    if !file.is_writable() {
        return Err(Error::ReadOnly);
    }
    file.check_usable()?;
    if has_vlen(slot, info) {
        file.allocate_pending(info.address, false)?;
    }
    Ok(())
}

/// Writes the elements of `buf` (densely in selection order, or at the positions `memory`
/// selects; converted by `conv` when given) into the selection `sel` of the dataset.
pub fn write(
    file: &Arc<FileShared>,
    info: &DatasetInfo,
    sel: &Selection,
    memory: Option<&MemorySelection>,
    conv: Option<&dyn Conversion>,
    buf: &[u8],
) -> Result<()> {
    write_in(file, None, info, sel, memory, conv, buf)
}

/// [`write()`] through a handle holding the dataset's `slot`: the chunk-cache registration
/// is checked once per registrations epoch instead of per call.
pub fn write_in(
    file: &Arc<FileShared>,
    slot: Option<&DatasetSlot>,
    info: &DatasetInfo,
    sel: &Selection,
    memory: Option<&MemorySelection>,
    conv: Option<&dyn Conversion>,
    buf: &[u8],
) -> Result<()> {
    if !file.is_writable() {
        return Err(Error::ReadOnly);
    }
    file.check_usable()?;
    file.check_swmr_index(info)?;
    // A whole write needs no fill, unless variable-length elements are read back first (the
    // old values' heap objects are freed below: the new storage must read as empty ones).
    let vlen = has_vlen(slot, info);
    let whole = matches!(sel, Selection::All) && !vlen;
    let fresh = file.allocate_pending(info.address, whole)?;
    // The elements written over: their variable-length data is freed once the write is done.
    let old = if vlen {
        overwritten_vlen(file, info, sel, conv)?
    } else {
        None
    };
    let id = crate::dataset::registered_id(file, slot, info)?;
    let mut req = WriteRequest::new(id, sel, buf);
    if whole && fresh.is_some_and(|bytes| bytes < DIRECT_WHOLE_MIN as u64) {
        // The first write of a small contiguous block, covering it: nothing of it is cached
        // or needs reading, so it goes straight from `buf` to storage through the cache's
        // bypass flow (libhdf5 writes such data from its sieve buffer at the dataset's close)
        // rather than becoming a cache entry written at flush. Larger blocks take the cache's
        // whole-chunk path.
        req = req.with_bypass(Bypass::Always);
    }
    if let Some(m) = memory {
        req = req.in_memory(m);
    }
    if let Some(c) = conv {
        req = req.converting(c);
    }
    file.chunks
        .lock()
        .map_err(|_| Error::Poisoned)?
        .write(&[req])
        .map_err(|e| file.note_failure(e.into()))?;
    if let Some(old) = old {
        file.free_replaced_vlen(&info.datatype, &old, Some(&info.datatype), buf)?;
    }
    Ok(())
}

/// Whether the dataset's elements hold variable-length data, from its handle's slot when
/// there is one (the description's datatype is cold memory when many datasets are used in
/// turn).
fn has_vlen(slot: Option<&DatasetSlot>, info: &DatasetInfo) -> bool {
    slot.map_or_else(
        || crate::write::vlen::has_vlen(&info.datatype),
        DatasetSlot::has_vlen,
    )
}

/// The current elements of the selection `sel` of a dataset whose elements hold
/// variable-length data, about to be written over (`None`: its elements hold none, or a
/// conversion is asked for).
pub(crate) fn overwritten_vlen(
    file: &Arc<FileShared>,
    info: &DatasetInfo,
    sel: &Selection,
    conv: Option<&dyn Conversion>,
) -> Result<Option<Vec<u8>>> {
    if conv.is_some() || !crate::write::vlen::has_vlen(&info.datatype) {
        return Ok(None);
    }
    let n = sel
        .num_elements(info.dims())
        .map_err(|e| Error::Invalid(e.to_string()))?;
    let len = n
        .checked_mul(info.elem_size() as u64)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| Error::Invalid("selection too large".into()))?;
    let mut old = vec![0u8; len];
    crate::dataset::read(file, info, sel, None, None, &mut old)?;
    Ok(Some(old))
}

/// Changes the dimensions of a chunked dataset (version 1 B-tree index) to `dims` (within its
/// maximum dimensions): the dataspace message is rewritten and the chunk cache drops or fills
/// what left the extent. Returns the dataset's new description.
pub fn resize(
    file: &Arc<FileShared>,
    info: Arc<DatasetInfo>,
    dims: &[u64],
) -> Result<Arc<DatasetInfo>> {
    resize_in(file, None, info, dims)
}

/// [`resize`] through a handle holding the dataset's `slot`: the registration and the
/// writable layout are found once per chunk-cache registrations epoch, and the new dimensions
/// are recorded in the slot, instead of looked up by address per call.
pub fn resize_in(
    file: &Arc<FileShared>,
    slot: Option<&DatasetSlot>,
    info: Arc<DatasetInfo>,
    dims: &[u64],
) -> Result<Arc<DatasetInfo>> {
    if !file.is_writable() {
        return Err(Error::ReadOnly);
    }
    file.check_usable()?;
    file.check_swmr_index(&info)?;
    let registered = crate::dataset::registration(file, slot, &info)?;
    let id = registered.id;
    let layout = registered.layout.ok_or_else(|| {
        Error::Unsupported(
            "resizing a dataset whose storage is not chunked with a version 1 B-tree".into(),
        )
    })?;
    let old = info.dims();
    let max = info.dataspace.max_dims.as_deref().unwrap_or(old);
    if dims.len() != old.len() || dims.iter().zip(max).any(|(d, m)| *m != UNLIMITED && d > m) {
        return Err(Error::Invalid(format!(
            "new dimensions {dims:?} outside the maximum {max:?}"
        )));
    }
    let body = info.dataspace.encode_with_dims(dims, file.sizes)?;
    file.swmr_pin_header(info.address)?;
    // New dimensions of the same rank keep the message's length: changed where it is stored
    // (as libhdf5 rewrites the message), the header laid out again only otherwise.
    if !ohdr::replace_in_place(file, info.address, kind::DATASPACE, &body)? {
        ohdr::update(file, info.address, |msgs| {
            for m in msgs.iter_mut().filter(|m| m.kind == kind::DATASPACE) {
                m.body = body.clone();
            }
            Ok(())
        })?;
    }
    {
        let mut extent = layout.dims.lock().map_err(|_| Error::Poisoned)?;
        extent.clear();
        extent.extend_from_slice(dims);
    }
    if layout.early {
        file.allocate_chunks(&layout, dims)?;
    }
    file.chunks
        .lock()
        .map_err(|_| Error::Poisoned)?
        .set_extent_notify(id, old)?;
    layout.refill_cleared(file)?;
    Ok(file.descriptions.resized(slot, info, dims))
}

/// The writable chunk-cache layout of a dataset that existed before the file was opened for
/// writing: contiguous data (space allocated now if it never was) and chunked data with a
/// version 1 B-tree index. `None` for other storage, which stays read-only (the reader's layout
/// refuses writes with an error).
pub(crate) fn existing_layout(
    file: &Arc<FileShared>,
    info: &DatasetInfo,
) -> Result<Option<Arc<dyn ChunkLayout>>> {
    if info.external.is_some() || !file.is_writable() {
        return Ok(None);
    }
    let elem = info.elem_size();
    let dims = info.dims().to_vec();
    let fill = info.fill.clone().unwrap_or_default();
    let elements = dims
        .iter()
        .try_fold(1u64, |a, d| a.checked_mul(*d))
        .ok_or_else(|| Error::Invalid("too many elements".into()))?;
    let bytes = elements
        .checked_mul(elem as u64)
        .ok_or_else(|| Error::Invalid("dataset too large".into()))?;
    match &info.layout.class {
        LayoutClass::Contiguous { address, size } => {
            if bytes == 0 || info.layout.version < 3 {
                return Ok(None);
            }
            let address = if *address == UNDEFINED_ADDRESS {
                // Late allocation: the space comes with the first write, as in libhdf5.
                let a = file.allocate(SpaceKind::Raw, bytes)?;
                file.initialise(a, bytes, &fill)?;
                rewrite_layout_message(
                    file,
                    info.address,
                    Layout {
                        version: info.layout.version,
                        class: LayoutClass::Contiguous {
                            address: a,
                            size: Some(bytes),
                        },
                    },
                )?;
                a
            } else {
                *address
            };
            Ok(Some(Arc::new(ContiguousLayout {
                dims,
                elem_size: elem,
                fill,
                location: Mutex::new(Some(DiskLocation {
                    addr: file.abs(address)?,
                    size: size.unwrap_or(bytes),
                })),
            })))
        }
        LayoutClass::Chunked {
            dims: cdims, index, ..
        } => {
            // The last dimension is the element size.
            let chunk = cdims
                .split_last()
                .map(|(_, chunk)| chunk.to_vec())
                .unwrap_or_default();
            if chunk.len() != dims.len() || chunk.contains(&0) {
                return Ok(None);
            }
            let space = crate::write::chunks::ChunkSpace {
                alloc: Arc::clone(file.alloc.as_ref().ok_or(Error::ReadOnly)?),
                base: file.base,
            };
            let index: Arc<dyn WritableChunkIndex> = if !matches!(index, ChunkIndex::BtreeV1 { .. })
            {
                match crate::write::chunk_index::existing::load(file, info, &chunk, space.clone())?
                {
                    Some(t) => t,
                    None => return Ok(None),
                }
            } else if let ChunkIndex::BtreeV1 { address } = index
                && *address != UNDEFINED_ADDRESS
            {
                let tree = ChunkBtree::open(
                    file.cache_handle(),
                    *address,
                    file.chunk_btree_k(),
                    cdims.clone(),
                );
                Arc::new(BtreeV1Chunks {
                    tree,
                    space: space.clone(),
                })
            } else {
                // Never written (libhdf5 makes the index with the first chunk): so does h5.
                let structure = crate::write::chunk_index::create::Structure {
                    template: *index,
                    cdims: cdims.clone(),
                    counts: Vec::new(),
                    chunk_bytes: 0,
                    chunk_size_len: 0,
                    filtered: false,
                    unlimited: 0,
                    space: space.clone(),
                };
                let lazy = Arc::new(crate::write::chunk_index::lazy::LazyIndex::new(
                    Arc::downgrade(file),
                    Some(info.address),
                    info.layout.clone(),
                    Box::new(move |f: &FileShared| structure.make(f)),
                ));
                Arc::new(BoundedIndex::empty(lazy, chunk.len()))
            };
            // Chunks the existing dataset gains are allocated as they are written (an early-
            // allocated dataset already has all of its chunks).
            let (early, fill_time) = (false, FillTime::IfSet);
            let pipeline = crate::dataset::pipeline_of(&info.pipeline);
            let layout = Arc::new(ChunkedWriteLayout {
                dims: Mutex::new(dims),
                chunk_dims: chunk,
                elem_size: elem,
                fill,
                index: Arc::clone(&index),
                space,
                unfiltered_edges: info.layout.class.unfiltered_edge_chunks() && pipeline.is_some(),
                pipeline,
                early,
                fill_time,
                cleared: Mutex::new(Vec::new()),
            });
            let mut w = file.state()?;
            w.indexes.push(index as Arc<dyn AtFlush>);
            w.chunked.insert(info.address, Arc::clone(&layout));
            Ok(Some(layout))
        }
        _ => Ok(None),
    }
}
