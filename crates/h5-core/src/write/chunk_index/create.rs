//! Creating the chunk index and writable layout of a new chunked dataset, and early
//! allocation of its chunks (at creation and when it grows).

use std::sync::{Arc, Mutex};

use h5_chunkcache::ChunkCoord;
use h5_chunkcache::cache::partial_bound;
use h5_format::message::dataspace::UNLIMITED;
use h5_format::message::fill_value::{AllocTime, FillTime};
use h5_format::message::filter_pipeline::{Filter, FilterPipeline};
use h5_format::message::layout::{
    ChunkIndex, DONT_FILTER_PARTIAL_EDGE_CHUNKS, Layout, LayoutClass, SINGLE_INDEX_WITH_FILTER,
};

use super::ChunkBtree as Btree2Index;
use super::bounded::BoundedIndex;
use super::btree1::BtreeV1Chunks;
use super::btree2::BtreeV2Chunks;
use super::lazy::LazyIndex;
use super::simple::{ImplicitChunks, SingleChunk};
use super::{BT2_MERGE_PERCENT, BT2_NODE_SIZE, BT2_SPLIT_PERCENT};
use super::{ChunkIndexKind, EA_PARAMS, FA_PAGE_BITS, header_len};
use crate::btree1::chunk::ChunkBtree;
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::indexes::earray::ExtensibleArrayIndex;
use crate::indexes::farray::FixedArrayIndex;
use crate::layouts::ChunkRecord;
use crate::write::FormatBounds;
use crate::write::alloc::SpaceKind;
use crate::write::chunks::{AtFlush, ChunkSpace, ChunkedWriteLayout, WritableChunkIndex};

/// What creating a chunked dataset produced: the layout message's storage, the filter
/// pipeline message, the writable layout, and an index that needs the dataset's header
/// address once it exists.
pub(crate) struct NewChunked {
    pub(crate) class: LayoutClass,
    pub(crate) pipeline: Option<FilterPipeline>,
    pub(crate) layout: Arc<ChunkedWriteLayout>,
    pub(crate) needs_header: Option<NewIndex>,
}

/// An index of a new dataset that rewrites the dataset's layout message, so needs its header
/// address once the header exists.
pub(crate) enum NewIndex {
    /// A single chunk (its address is in the layout message).
    Single(Arc<SingleChunk>),
    /// A structure made with the first chunk.
    Lazy(Arc<LazyIndex>),
}

impl NewIndex {
    /// Records the dataset's object header (relative).
    pub(crate) fn set_header(&self, at: u64) -> Result<()> {
        match self {
            NewIndex::Single(s) => {
                *s.header.lock().map_err(|_| Error::Poisoned)? = Some(at);
                Ok(())
            }
            NewIndex::Lazy(l) => l.set_header(at),
        }
    }
}

/// What making a chunk index structure (v1 B-tree, fixed array, extensible array, v2 B-tree
/// with libhdf5's default parameters) needs to know of its dataset.
pub(crate) struct Structure {
    /// The layout message's index before the structure exists (address undefined), with the
    /// structure's parameters.
    pub(crate) template: ChunkIndex,
    /// Chunk dimensions with the element size last (the v1 B-tree's key dimensions).
    pub(crate) cdims: Vec<u64>,
    /// Chunks per dimension of the maximum extent (`u64::MAX` where unlimited).
    pub(crate) counts: Vec<u64>,
    pub(crate) chunk_bytes: u64,
    pub(crate) chunk_size_len: usize,
    pub(crate) filtered: bool,
    /// The unlimited dimension (an extensible array's).
    pub(crate) unlimited: usize,
    pub(crate) space: ChunkSpace,
}

impl Structure {
    /// The index of `kind` with libhdf5's default parameters, its address undefined.
    fn default_template(kind: ChunkIndexKind) -> ChunkIndex {
        let address = h5_format::UNDEFINED_ADDRESS;
        match kind {
            ChunkIndexKind::FixedArray => ChunkIndex::FixedArray {
                address,
                page_bits: FA_PAGE_BITS,
            },
            ChunkIndexKind::ExtensibleArray => {
                let [
                    max_bits,
                    index_elements,
                    min_pointers,
                    min_elements,
                    page_bits,
                ] = EA_PARAMS;
                ChunkIndex::ExtensibleArray {
                    address,
                    max_bits,
                    index_elements,
                    min_pointers,
                    min_elements,
                    page_bits,
                }
            }
            ChunkIndexKind::BtreeV2 => ChunkIndex::BtreeV2 {
                address,
                node_size: BT2_NODE_SIZE,
                split_percent: BT2_SPLIT_PERCENT,
                merge_percent: BT2_MERGE_PERCENT,
            },
            _ => ChunkIndex::BtreeV1 { address },
        }
    }

    /// The layout message's index once the structure is at `address`.
    fn at(&self, address: u64) -> ChunkIndex {
        let mut index = self.template;
        if let ChunkIndex::BtreeV1 { address: a }
        | ChunkIndex::FixedArray { address: a, .. }
        | ChunkIndex::ExtensibleArray { address: a, .. }
        | ChunkIndex::BtreeV2 { address: a, .. } = &mut index
        {
            *a = address;
        }
        index
    }

    /// Makes the structure in `file`: the layout message's index and the writable index.
    pub(crate) fn make(
        &self,
        file: &FileShared,
    ) -> Result<(ChunkIndex, Arc<dyn WritableChunkIndex>)> {
        let sizes = file.sizes;
        let kind = ChunkIndexKind::of(&self.template);
        let header = || file.allocate(SpaceKind::Meta, header_len(kind, sizes) as u64);
        let space = self.space.clone();
        let counts = self.counts.clone();
        let chunk_bytes = self.chunk_bytes;
        Ok(match self.template {
            ChunkIndex::FixedArray { page_bits, .. } => {
                let address = header()?;
                let meta = file.cache_handle();
                let n = counts
                    .iter()
                    .try_fold(1u64, |a, c| a.checked_mul(*c))
                    .ok_or_else(|| Error::Invalid("too many chunks".into()))?;
                let format =
                    crate::indexes::element_format(sizes, self.filtered, self.chunk_size_len)?;
                FixedArrayIndex::create(&meta, address, format, n, page_bits)?;
                (
                    self.at(address),
                    Arc::new(FixedArrayIndex {
                        meta,
                        header: address,
                        counts,
                        chunk_bytes,
                        space: Some(space),
                    }),
                )
            }
            ChunkIndex::ExtensibleArray {
                max_bits,
                index_elements,
                min_pointers,
                min_elements,
                page_bits,
                ..
            } => {
                let address = header()?;
                let meta = file.cache_handle();
                let format =
                    crate::indexes::element_format(sizes, self.filtered, self.chunk_size_len)?;
                let params = crate::indexes::earray::params(
                    format,
                    [
                        max_bits,
                        index_elements,
                        min_pointers,
                        min_elements,
                        page_bits,
                    ],
                );
                ExtensibleArrayIndex::create(&meta, address, params)?;
                (
                    self.at(address),
                    Arc::new(ExtensibleArrayIndex {
                        meta,
                        header: address,
                        counts,
                        unlimited: self.unlimited,
                        chunk_bytes,
                        space: Some(space),
                        encoders: Default::default(),
                        last_data_block: Default::default(),
                    }),
                )
            }
            ChunkIndex::BtreeV2 { .. } => {
                let address = header()?;
                let tree = Btree2Index {
                    header: address,
                    rank: self.cdims.len().saturating_sub(1),
                    chunk_bytes,
                    chunk_size_len: self.chunk_size_len,
                    filtered: self.filtered,
                };
                tree.create(file)?;
                let weak = file.this.get().cloned().unwrap_or_default();
                (
                    self.at(address),
                    Arc::new(BtreeV2Chunks::new(tree, weak, space)),
                )
            }
            _ => {
                let tree = ChunkBtree::create(
                    file.cache_handle(),
                    file.chunk_btree_k(),
                    self.cdims.clone(),
                )?;
                (
                    self.at(tree.root()),
                    Arc::new(BtreeV1Chunks { tree, space }),
                )
            }
        })
    }
}

/// The format bounds of new objects in `file` (those it was created with, or what its
/// superblock implies when opened for writing).
pub(crate) fn bounds_of(file: &FileShared) -> FormatBounds {
    file.bounds()
}

/// The layout message version libhdf5 writes for `class` (with a filter pipeline when
/// `filtered`) in `file`. Before the 1.10 bound: the lowest version that expresses it (3, or 4
/// for the new indexes). From 1.10 to 1.14 (libhdf5 1.14): 4 for every class but a version 1
/// B-tree index (3). From 2.0 (libhdf5 2.0): 3 for compact, contiguous and version 1 B-tree
/// storage, 4 for the new indexes, and 5 when they index filtered chunks (whose sizes version 5
/// stores in the length size).
pub(crate) fn layout_version(file: &FileShared, class: &LayoutClass, filtered: bool) -> u8 {
    match class {
        LayoutClass::Chunked { index, .. } => {
            chunked_layout_version(file, matches!(index, ChunkIndex::BtreeV1 { .. }), filtered)
        }
        // Virtual layouts exist from version 4 on.
        LayoutClass::Virtual { .. } => 4,
        LayoutClass::Compact { .. } | LayoutClass::Contiguous { .. } => {
            if (FormatBounds::V110..FormatBounds::V200).contains(&bounds_of(file)) {
                4
            } else {
                3
            }
        }
    }
}

/// [`layout_version`] of a chunked layout, from whether its index is a version 1 B-tree (which
/// only versions up to 3 express) and whether it has filters.
fn chunked_layout_version(file: &FileShared, btree_v1: bool, filtered: bool) -> u8 {
    if btree_v1 {
        3
    } else if filtered && bounds_of(file) >= FormatBounds::V200 {
        h5_format::message::layout::WIDE_CHUNK_SIZES_VERSION
    } else {
        4
    }
}

/// Replaces the layout message of the dataset whose header is at `at` with one holding `class`
/// (through the object-header update path).
/// Only for storage without filters (compact, contiguous): a chunked dataset keeps the
/// version it was created with ([`rewrite_layout_message`]).
pub(crate) fn rewrite_layout(file: &FileShared, at: u64, class: LayoutClass) -> Result<()> {
    let version = layout_version(file, &class, false);
    rewrite_layout_message(file, at, Layout { version, class })
}

/// Replaces the layout message of the dataset whose header is at `at` with `layout` (its
/// version as given: a file opened for writing keeps the version its datasets have).
pub(crate) fn rewrite_layout_message(file: &FileShared, at: u64, layout: Layout) -> Result<()> {
    let body = h5_format::message::encode_message(
        &h5_format::message::Message::Layout(layout),
        file.sizes,
    )?;
    // An address set or changed keeps the message's length: rewritten where it is stored.
    if crate::write::ohdr::replace_in_place(file, at, h5_format::message::kind::LAYOUT, &body)? {
        return Ok(());
    }
    crate::write::ohdr::update(file, at, |msgs| {
        for m in msgs
            .iter_mut()
            .filter(|m| m.kind == h5_format::message::kind::LAYOUT)
        {
            m.body = body.clone();
        }
        Ok(())
    })
}

/// Everything `chunked` needs about the dataset.
pub(crate) struct ChunkedSpec<'a> {
    pub(crate) dims: &'a [u64],
    pub(crate) max: &'a [u64],
    pub(crate) chunk: &'a [u64],
    pub(crate) filters: &'a [Filter],
    pub(crate) elem: usize,
    pub(crate) fill: &'a [u8],
    pub(crate) alloc: AllocTime,
    pub(crate) fill_time: FillTime,
    pub(crate) kind: Option<ChunkIndexKind>,
    /// Partial edge chunks stored without the filters (layout flag
    /// `DONT_FILTER_PARTIAL_EDGE_CHUNKS`).
    pub(crate) unfiltered_edges: bool,
}

impl FileShared {
    /// Creates the index (its header allocated) and the writable layout of a chunked dataset,
    /// allocating its chunks when allocation is early.
    pub(crate) fn new_chunked(&self, spec: &ChunkedSpec<'_>) -> Result<NewChunked> {
        let sizes = self.sizes;
        let filtered = !spec.filters.is_empty();
        let early = spec.alloc == AllocTime::Early;
        if filtered && spec.fill_time == FillTime::Never {
            return Err(Error::Invalid(
                "fill time \"never\" with filters (libhdf5 refuses it too)".into(),
            ));
        }
        // The flag needs layout version 4: libhdf5 then chooses the index as for 1.10's bound.
        let choice_bounds = if spec.unfiltered_edges {
            bounds_of(self).max(FormatBounds::V110)
        } else {
            bounds_of(self)
        };
        let kind = spec.kind.unwrap_or_else(|| {
            super::choose(
                choice_bounds,
                spec.dims,
                spec.max,
                spec.chunk,
                filtered,
                early,
            )
        });
        super::check(kind, spec.dims, spec.max, spec.chunk, filtered, early)
            .map_err(Error::Invalid)?;
        if spec.unfiltered_edges && kind == ChunkIndexKind::BtreeV1 {
            return Err(Error::Invalid(
                "unfiltered edge chunks need layout version 4, which has no version 1 B-tree \
                 index"
                    .into(),
            ));
        }
        let edge_flag = if spec.unfiltered_edges {
            DONT_FILTER_PARTIAL_EDGE_CHUNKS
        } else {
            0
        };
        let chunk_elems = spec
            .chunk
            .iter()
            .try_fold(1u64, |a, c| a.checked_mul(*c))
            .ok_or_else(|| Error::Invalid("chunk too large".into()))?;
        let chunk_bytes = chunk_elems
            .checked_mul(spec.elem as u64)
            .filter(|b| *b < 1 << 32)
            .ok_or_else(|| Error::Invalid("chunks of 4 GiB or more".into()))?;
        let counts: Vec<u64> = spec
            .max
            .iter()
            .zip(spec.chunk)
            .map(|(m, c)| {
                if *m == UNLIMITED {
                    u64::MAX
                } else {
                    m.div_ceil(*c)
                }
            })
            .collect();
        let space = ChunkSpace {
            alloc: Arc::clone(self.alloc.as_ref().ok_or(Error::ReadOnly)?),
            base: self.base,
        };
        let mut cdims = spec.chunk.to_vec();
        cdims.push(spec.elem as u64);
        // The version the layout message will have: it fixes the width of filtered chunk
        // sizes in the index (the class's index address does not change the version).
        let version = chunked_layout_version(self, kind == ChunkIndexKind::BtreeV1, filtered);
        let chunk_size_len =
            h5_format::btree2::filtered_chunk_size_len(version, sizes, chunk_bytes);
        let mut single = None;
        let structure = Structure {
            template: Structure::default_template(kind),
            cdims: cdims.clone(),
            counts: counts.clone(),
            chunk_bytes,
            chunk_size_len,
            filtered,
            unlimited: spec.max.iter().position(|m| *m == UNLIMITED).unwrap_or(0),
            space: space.clone(),
        };
        let (index, store, flags): (ChunkIndex, Arc<dyn WritableChunkIndex>, u8) = match kind {
            ChunkIndexKind::SingleChunk => {
                let index = ChunkIndex::SingleChunk {
                    address: h5_format::UNDEFINED_ADDRESS,
                    filtered: filtered.then_some((0, 0)),
                };
                let flags = edge_flag
                    | if filtered {
                        SINGLE_INDEX_WITH_FILTER
                    } else {
                        0
                    };
                let layout = Layout {
                    version,
                    class: LayoutClass::Chunked {
                        flags,
                        dims: cdims.clone(),
                        index,
                    },
                };
                let s = Arc::new(SingleChunk::new(layout, None, None, space.clone()));
                single = Some(NewIndex::Single(Arc::clone(&s)));
                (index, s, flags)
            }
            ChunkIndexKind::Implicit => {
                let total = counts
                    .iter()
                    .try_fold(chunk_bytes, |a, c| a.checked_mul(*c))
                    .ok_or_else(|| Error::Invalid("dataset too large".into()))?;
                let address = self.allocate(SpaceKind::Raw, total)?;
                if crate::write::alloc_time::initialises(spec.fill_time) {
                    self.initialise(address, total, spec.fill)?;
                }
                (
                    ChunkIndex::Implicit { address },
                    Arc::new(ImplicitChunks {
                        base: self.abs(address)?,
                        counts: counts.clone(),
                        chunk_bytes,
                        space: space.clone(),
                    }),
                    edge_flag,
                )
            }
            // Early allocation makes every chunk now: the structure too.
            _ if early => {
                let (index, store) = structure.make(self)?;
                (index, store, edge_flag)
            }
            // libhdf5 makes the structure with the first chunk.
            _ => {
                let index = structure.template;
                let template = Layout {
                    version,
                    class: LayoutClass::Chunked {
                        flags: edge_flag,
                        dims: cdims.clone(),
                        index,
                    },
                };
                let file = self.this.get().cloned().unwrap_or_default();
                let lazy = Arc::new(LazyIndex::new(
                    file,
                    None,
                    template,
                    Box::new(move |f: &FileShared| structure.make(f)),
                ));
                single = Some(NewIndex::Lazy(Arc::clone(&lazy)));
                (index, lazy, edge_flag)
            }
        };
        // A new index holds no chunk: lookups past the chunks it has been given are answered
        // without it (the single-chunk and implicit indexes answer at once anyway).
        let store: Arc<dyn WritableChunkIndex> = match kind {
            ChunkIndexKind::SingleChunk | ChunkIndexKind::Implicit => store,
            _ => Arc::new(BoundedIndex::empty(store, spec.chunk.len())),
        };
        self.state()?
            .indexes
            .push(Arc::clone(&store) as Arc<dyn AtFlush>);
        let pipeline = filtered.then(|| FilterPipeline {
            version: self.bounds().pipeline_version(),
            filters: spec.filters.to_vec(),
        });
        let layout = Arc::new(ChunkedWriteLayout {
            dims: Mutex::new(spec.dims.to_vec()),
            chunk_dims: spec.chunk.to_vec(),
            elem_size: spec.elem,
            fill: spec.fill.to_vec(),
            index: store,
            space,
            pipeline: crate::dataset::pipeline_of(&pipeline),
            unfiltered_edges: spec.unfiltered_edges && filtered,
            early: early && kind != ChunkIndexKind::Implicit,
            fill_time: spec.fill_time,
            cleared: Mutex::new(Vec::new()),
        });
        if layout.early {
            self.allocate_chunks(&layout, spec.dims)?;
        }
        Ok(NewChunked {
            class: LayoutClass::Chunked {
                flags,
                dims: cdims,
                index,
            },
            pipeline,
            layout,
            needs_header: single,
        })
    }

    /// Early allocation: gives every chunk of the extent `dims` that has none its space,
    /// holding the (encoded) fill value unless the fill time says not to write it.
    pub(crate) fn allocate_chunks(&self, layout: &ChunkedWriteLayout, dims: &[u64]) -> Result<()> {
        let counts: Vec<u64> = dims
            .iter()
            .zip(&layout.chunk_dims)
            .map(|(d, c)| d.div_ceil(*c))
            .collect();
        if counts.contains(&0) {
            return Ok(());
        }
        let (elems, bytes) =
            crate::write::chunks::block_size("a chunk", &layout.chunk_dims, layout.elem_size)?;
        let raw = crate::write::chunks::fill_chunk(bytes, &layout.fill);
        // Partial edge chunks of a layout that stores them unfiltered get the raw fill chunk.
        let edge = layout.unfiltered_edges.then(|| raw.clone());
        let (image, mask) = match &layout.pipeline {
            Some(p) => p
                .encode(raw, layout.elem_size, elems)
                .map_err(|e| Error::Invalid(format!("encoding the fill chunk: {e}")))?,
            None => (raw, 0),
        };
        // Filtered chunks always hold the encoded fill chunk; unfiltered ones are initialised
        // unless the fill time is "never" (zeros past the storage's end read as zeros already).
        let write =
            layout.pipeline.is_some() || crate::write::alloc_time::initialises(layout.fill_time);
        let zeros = layout.pipeline.is_none() && image.iter().all(|b| *b == 0);
        let end = self.storage.len()?;
        let index = &layout.index;
        // The extent's chunks in row-major order, looked up and recorded in batches.
        let mut scaled = vec![0u64; counts.len()];
        let mut batch: Vec<ChunkCoord> = Vec::new();
        loop {
            batch.push(
                ChunkCoord::new(&scaled)
                    .ok_or_else(|| Error::Unsupported("a dataset of that rank".into()))?,
            );
            let last = !crate::indexes::next_coords(&mut scaled, &counts);
            if batch.len() == ALLOCATION_BATCH || last {
                let found = index.lookup(&batch)?;
                for (c, r) in batch.drain(..).zip(found) {
                    if r.is_some() {
                        continue;
                    }
                    let (image, mask) = match &edge {
                        Some(raw) if partial_bound(&layout.chunk_dims, &c, dims) => (raw, 0),
                        _ => (&image, mask),
                    };
                    let rel = self.allocate(SpaceKind::Raw, image.len() as u64)?;
                    let addr = self.abs(rel)?;
                    if write && !(zeros && addr >= end) {
                        self.storage.write_at(addr, image)?;
                    }
                    index.insert(
                        c.as_slice(),
                        ChunkRecord {
                            addr,
                            size: image.len() as u64,
                            filter_mask: mask,
                        },
                    )?;
                }
            }
            if last {
                return Ok(());
            }
        }
    }
}

/// Chunks looked up at once by early allocation.
const ALLOCATION_BATCH: usize = 4096;
