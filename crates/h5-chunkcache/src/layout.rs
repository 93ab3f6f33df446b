//! The layout interface (spec §2.5, design note §4.1): how the cache asks a dataset's storage
//! layout to find, create, decode, encode and index its chunks.
//!
//! The cache form of a chunk is a [`Chunk`]: either dense elements in the file datatype
//! ([`Chunk::Dense`], which the cache can scatter, gather and fill itself) or a layout-specific
//! object ([`Chunk::Custom`], for example a sparse chunk holding a defined-element set and its
//! values), which only the layout can interpret.
//!
//! Required callbacks are the trait's required methods; optional ones have default bodies and are
//! announced in [`LayoutInfo::capabilities`], checked once at registration, so the cache never
//! probes at each call (design note §4.1). Selections handed to callbacks are [`CopyRun`]s: element
//! offsets inside the chunk (row-major over the full chunk dimensions) paired with element offsets
//! in the caller's buffer.

use std::any::Any;

use crate::ChunkCoord;
use crate::selection::CopyRun;

/// An error reported by a layout callback; the cache wraps it with the dataset and chunk.
pub type LayoutError = Box<dyn std::error::Error + Send + Sync>;

/// Per-chunk layout state, created by [`ChunkLayout::lookup`] or [`ChunkLayout::new_chunk`],
/// owned by the cache and dropped with the entry (OQ-12).
pub type Udata = Box<dyn Any + Send + Sync>;

/// Memory held by a cached chunk object (or an encoded image).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct MemUsage {
    /// Bytes holding data (what the chunk could shrink to).
    pub used: usize,
    /// Bytes allocated.
    pub allocated: usize,
}

/// A layout-specific cache form (for example a sparse chunk). Only its layout interprets it; the
/// cache sees its memory usage.
pub trait CustomChunk: Any + Send + Sync + std::fmt::Debug {
    /// Bytes used and allocated by everything the chunk owns.
    fn mem_usage(&self) -> MemUsage;
}

/// The cache form of one chunk (spec §1, "cache form").
#[derive(Debug)]
pub enum Chunk {
    /// Every element of the chunk in the file datatype, row-major over the full chunk dimensions.
    /// Accounted by the vector's length (used) and capacity (allocated).
    Dense(Vec<u8>),
    /// A layout-specific form; the layout must provide scatter, gather and fill for it.
    Custom(Box<dyn CustomChunk>),
}

impl Chunk {
    /// Bytes used and allocated.
    pub fn mem_usage(&self) -> MemUsage {
        match self {
            Chunk::Dense(v) => MemUsage {
                used: v.len(),
                allocated: v.capacity(),
            },
            Chunk::Custom(c) => c.mem_usage(),
        }
    }

    /// The dense bytes, if dense.
    pub fn as_dense(&self) -> Option<&[u8]> {
        match self {
            Chunk::Dense(v) => Some(v),
            Chunk::Custom(_) => None,
        }
    }

    /// The dense bytes, if dense.
    pub fn as_dense_mut(&mut self) -> Option<&mut Vec<u8>> {
        match self {
            Chunk::Dense(v) => Some(v),
            Chunk::Custom(_) => None,
        }
    }

    /// The custom object as `T`, if it is one.
    pub fn downcast_ref<T: CustomChunk>(&self) -> Option<&T> {
        match self {
            Chunk::Custom(c) => (&**c as &dyn Any).downcast_ref(),
            Chunk::Dense(_) => None,
        }
    }

    /// The custom object as `T`, if it is one.
    pub fn downcast_mut<T: CustomChunk>(&mut self) -> Option<&mut T> {
        match self {
            Chunk::Custom(c) => (&mut **c as &mut dyn Any).downcast_mut(),
            Chunk::Dense(_) => None,
        }
    }
}

/// Where a chunk's encoded image lives in the file.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct DiskLocation {
    /// Byte address in the file.
    pub addr: u64,
    /// Size of the encoded image in bytes.
    pub size: u64,
}

/// The optional callbacks a layout implements (SCC-029). Announced in [`LayoutInfo`], checked at
/// registration.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Capabilities(u32);

impl Capabilities {
    /// None of the optional callbacks.
    pub const NONE: Self = Self(0);
    /// [`ChunkLayout::decode_defined`].
    pub const DECODE_DEFINED: Self = Self(1 << 0);
    /// [`ChunkLayout::condense`].
    pub const CONDENSE: Self = Self(1 << 1);
    /// [`ChunkLayout::plan_selection_read`].
    pub const SELECTION_READ: Self = Self(1 << 2);
    /// [`ChunkLayout::plan_selection_write`].
    pub const SELECTION_WRITE: Self = Self(1 << 3);
    /// [`ChunkLayout::plan_vector_read`].
    pub const VECTOR_READ: Self = Self(1 << 4);
    /// [`ChunkLayout::plan_vector_write`].
    pub const VECTOR_WRITE: Self = Self(1 << 5);
    /// [`ChunkLayout::scatter`].
    pub const SCATTER: Self = Self(1 << 6);
    /// [`ChunkLayout::gather`].
    pub const GATHER: Self = Self(1 << 7);
    /// [`ChunkLayout::fill`].
    pub const FILL: Self = Self(1 << 8);
    /// [`ChunkLayout::defined_values`].
    pub const DEFINED_VALUES: Self = Self(1 << 9);
    /// [`ChunkLayout::erase_values`].
    pub const ERASE_VALUES: Self = Self(1 << 10);
    /// [`ChunkLayout::drop_values`].
    pub const DROP_VALUES: Self = Self(1 << 11);
    /// The four direct-I/O planners.
    pub const DIRECT_IO: Self = Self(0b1111 << 2);

    /// Whether every capability in `other` is present.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets.
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// `self` without `other`.
    pub const fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }
}

impl std::ops::BitOr for Capabilities {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
}

/// What a layout tells the cache once, at registration (SCC-030).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct LayoutInfo {
    /// Chunk dimensions (same rank as the dataset, none zero). A contiguous dataset is one chunk
    /// with the dataset's dimensions.
    pub chunk_dims: Vec<u64>,
    /// Bytes per element in the file datatype (not zero).
    pub elem_size: usize,
    /// The fill value, one element (`elem_size` bytes); empty means zeros.
    pub fill: Vec<u8>,
    /// Chunks pass through a codec (filters): encode and decode change the bytes. When false
    /// (and edge chunks are not special, and the layout neither tracks defined elements nor
    /// keeps vlen data in chunks) the disk
    /// image *is* the dense cache form: the cache skips decode and encode and writes its own bytes
    /// (SCC-006).
    pub needs_codec: bool,
    /// Edge chunks are encoded differently from interior ones (so `partial_bound` matters).
    pub edge_chunks_differ: bool,
    /// The layout tracks which elements are defined (sparse); requires
    /// [`Capabilities::DEFINED_VALUES`] and [`Capabilities::ERASE_VALUES`] (OQ-15).
    pub tracks_defined: bool,
    /// Variable-length data and references live inside the chunk; requires scatter, gather and
    /// fill (SCC-031).
    pub vlen_in_chunk: bool,
    /// The fill value refers to objects outside the chunk (legacy vlen fill): early allocation
    /// encodes a fresh fill chunk for every chunk instead of sharing one image (SCC-100).
    pub fill_refers_outside: bool,
    /// Allocate and fill chunks newly inside the extent when the dataset grows (SCC-099).
    pub early_allocation: bool,
    /// The layout uses the cache. When false, read and write calls leave the dataset's requests
    /// to the caller's own path and make no callback (SCC-018).
    pub uses_cache: bool,
    /// The optional callbacks implemented.
    pub capabilities: Capabilities,
}

impl LayoutInfo {
    /// A dense layout with the given constants, no codec and no optional callbacks.
    pub fn dense(chunk_dims: &[u64], elem_size: usize, fill: &[u8]) -> Self {
        Self {
            chunk_dims: chunk_dims.to_vec(),
            elem_size,
            fill: fill.to_vec(),
            needs_codec: false,
            edge_chunks_differ: false,
            tracks_defined: false,
            vlen_in_chunk: false,
            fill_refers_outside: false,
            early_allocation: false,
            uses_cache: true,
            capabilities: Capabilities::NONE,
        }
    }
}

/// How much of a chunk's image holds its defined-element information (SCC-034, OQ-13).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum DefinedInfo {
    /// Every element is defined; the defined-only form needs no read.
    #[default]
    AllDefined,
    /// The first `len` bytes of the image hold the defined set; decoding them needs `hint` bytes.
    Bytes {
        /// Bytes to read.
        len: u64,
        /// Suggested allocation for the defined-only form.
        hint: usize,
    },
}

/// One result of [`ChunkLayout::lookup`].
pub struct Lookup {
    /// Where the chunk is stored; `None` if it has never been written (its udata is dropped at
    /// once, SCC-035, OQ-11).
    pub location: Option<DiskLocation>,
    /// Expected size of the decoded chunk: the read buffer is allocated with at least
    /// `max(disk size, size_hint)` bytes so decode can expand in place (SCC-033).
    pub size_hint: usize,
    /// Where the defined-element information is.
    pub defined: DefinedInfo,
    /// The layout's per-chunk state.
    pub udata: Udata,
}

impl Lookup {
    /// A result for a dense layout (everything defined).
    pub fn dense(location: Option<DiskLocation>, size_hint: usize, udata: Udata) -> Self {
        Self {
            location,
            size_hint,
            defined: DefinedInfo::AllDefined,
            udata,
        }
    }
}

impl std::fmt::Debug for Lookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookup")
            .field("location", &self.location)
            .field("size_hint", &self.size_hint)
            .field("defined", &self.defined)
            .finish_non_exhaustive()
    }
}

/// The result of [`ChunkLayout::encode`] (OQ-8).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Encoded {
    /// The on-disk image is the dense cache form itself (no codec): the cache writes its bytes.
    SameAsCache,
    /// A separate encoded image.
    Owned(Vec<u8>),
}

/// One chunk to allocate and index in [`ChunkLayout::insert`].
pub struct InsertRequest<'a> {
    /// The chunk (lent from the cache's entry: a flush copies no coordinates).
    pub coord: &'a ChunkCoord,
    /// Its previous location, if it had one (the layout may reuse or free it).
    pub old: Option<DiskLocation>,
    /// Size of the new encoded image in bytes.
    pub new_size: u64,
    /// The chunk's udata.
    pub udata: &'a mut Udata,
}

impl std::fmt::Debug for InsertRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InsertRequest")
            .field("coord", &self.coord)
            .field("old", &self.old)
            .field("new_size", &self.new_size)
            .finish_non_exhaustive()
    }
}

/// One byte range of the file for vector I/O.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Segment {
    /// Absolute file offset.
    pub offset: u64,
    /// Length in bytes.
    pub len: usize,
}

/// What a direct-I/O planner answers (OQ-7, OQ-32).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum DirectPlan {
    /// The transfer cannot go straight to the file (for example a compressed chunk).
    NotPossible,
    /// Called without a chunk, the planner needs at least its defined-element information: the
    /// cache loads it and asks again (SCC-047). A second such answer is an error.
    NeedsDefinedValues,
    /// Selection I/O: the runs to transfer with `chunk_offset` counted in elements from the start
    /// of the on-disk image and `buf_offset` as given; `None` means the input runs unchanged.
    Selection(Option<Vec<CopyRun>>),
    /// Vector I/O: absolute file segments whose bytes, concatenated, are the selected elements in
    /// the order of the input runs.
    Segments(Vec<Segment>),
}

/// The result of [`ChunkLayout::erase_values`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Erased {
    /// The chunk's memory after the erase.
    pub usage: MemUsage,
    /// Some element that was defined is not any more (false: nothing changed, EC-19).
    pub changed: bool,
    /// Nothing is defined any more: the cache deletes the chunk (SCC-053).
    pub empty: bool,
}

/// Converts elements between two datatypes during scatter and gather (SCC-005): file to memory
/// on read, memory to file on write. The cache never converts anything else.
pub trait Conversion: Send + Sync + std::fmt::Debug {
    /// Bytes per source element.
    fn src_size(&self) -> usize;
    /// Bytes per destination element.
    fn dst_size(&self) -> usize;
    /// Whether the destination's current bytes matter (a background buffer, SCC-105): the cache
    /// then converts in place over the destination's existing elements.
    fn needs_background(&self) -> bool {
        false
    }
    /// Converts `n` elements from `src` (`n × src_size` bytes) into `dst` (`n × dst_size` bytes).
    fn convert(&self, src: &[u8], dst: &mut [u8], n: usize) -> Result<(), LayoutError>;
}

fn unsupported(callback: &str) -> LayoutError {
    format!("layout does not implement `{callback}`").into()
}

/// A dataset's storage layout as the cache sees it (spec §2.5).
///
/// The cache owns all chunk I/O: a layout never reads or writes chunk bodies; it only finds,
/// allocates, indexes and deletes them, and converts between the cache form and the disk image.
/// Optional callbacks are called only when [`LayoutInfo::capabilities`] announces them.
pub trait ChunkLayout: Send + Sync + std::fmt::Debug {
    /// The layout's constants; called once at registration (SCC-030).
    fn query(&self) -> LayoutInfo;

    /// The dataset's current dimensions.
    fn extent(&self) -> Vec<u64>;

    /// The dataset's current dimensions copied into `out`, returning the rank (`None`: rank
    /// above [`crate::MAX_RANK`]). The cache calls it on every write; a layout whose extent can
    /// change overrides it to copy without allocating. The default copies
    /// [`ChunkLayout::extent`].
    fn extent_into(&self, out: &mut [u64; crate::MAX_RANK]) -> Option<usize> {
        let e = self.extent();
        out.get_mut(..e.len())?.copy_from_slice(&e);
        Some(e.len())
    }

    /// Finds the given chunks, one result per coordinate in order (batched, SCC-032). Never reads
    /// chunk bodies.
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError>;

    /// Turns a disk image into the cache form; `partial_bound` is the edge state the image was
    /// encoded with. `image.len()` is the valid bytes, `image.capacity()` the allocation (at least
    /// the size hint). The default (no codec) keeps the image as a dense chunk.
    fn decode(
        &self,
        coord: &ChunkCoord,
        image: Vec<u8>,
        partial_bound: bool,
        udata: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        let _ = (coord, partial_bound, udata);
        Ok(Chunk::Dense(image))
    }

    /// [`decode`](Self::decode), given a buffer the cache is done with (`spare`, with an
    /// allocation; its contents are garbage) whose allocation the layout may reuse for the
    /// chunk. Returns the chunk and a buffer the layout no longer needs (the image, or `spare`
    /// unused; may be empty), which the cache reuses in turn. A scan of a dataset larger than
    /// the cache recycles its buffers so (no new pages per chunk). The default decodes and
    /// gives `spare` back.
    fn decode_reusing(
        &self,
        coord: &ChunkCoord,
        image: Vec<u8>,
        partial_bound: bool,
        udata: &mut Udata,
        spare: Vec<u8>,
    ) -> Result<(Chunk, Vec<u8>), LayoutError> {
        Ok((self.decode(coord, image, partial_bound, udata)?, spare))
    }

    /// Optional ([`Capabilities::DECODE_DEFINED`]): decodes only the defined-element information
    /// from the first [`DefinedInfo::Bytes::len`] bytes of the image (SCC-037); the result holds
    /// no values.
    fn decode_defined(
        &self,
        coord: &ChunkCoord,
        bytes: Vec<u8>,
        udata: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        let _ = (coord, bytes, udata);
        Err(unsupported("decode_defined"))
    }

    /// A new chunk in cache form with its udata (SCC-039); filled with the fill value if `fill`
    /// (sparse chunks start empty), otherwise unspecified (the caller overwrites every element).
    fn new_chunk(&self, coord: &ChunkCoord, fill: bool) -> Result<(Chunk, Udata), LayoutError>;

    /// Optional ([`Capabilities::CONDENSE`]): shrinks the chunk so that allocated equals used
    /// (SCC-040).
    fn condense(&self, chunk: &mut Chunk) -> Result<MemUsage, LayoutError> {
        let _ = chunk;
        Err(unsupported("condense"))
    }

    /// The disk image of a chunk, leaving the cache form intact (SCC-041); `partial_bound` says
    /// the chunk extends past the current extent.
    fn encode(
        &self,
        coord: &ChunkCoord,
        chunk: &Chunk,
        partial_bound: bool,
        udata: &mut Udata,
    ) -> Result<Encoded, LayoutError>;

    /// The disk image of a chunk, consuming the cache form (eviction, SCC-042). The default calls
    /// [`encode`](ChunkLayout::encode) and returns the dense bytes for [`Encoded::SameAsCache`].
    fn encode_in_place(
        &self,
        coord: &ChunkCoord,
        chunk: Chunk,
        partial_bound: bool,
        udata: &mut Udata,
    ) -> Result<Vec<u8>, LayoutError> {
        match self.encode(coord, &chunk, partial_bound, udata)? {
            Encoded::Owned(image) => Ok(image),
            Encoded::SameAsCache => match chunk {
                Chunk::Dense(v) => Ok(v),
                Chunk::Custom(_) => Err("encode returned SameAsCache for a custom chunk".into()),
            },
        }
    }

    /// Allocates file space for each request's image and records it in the chunk index; returns
    /// one location per request in order. Writes no chunk data (SCC-044).
    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError>;

    /// Removes a chunk from the index and frees its file space (SCC-055); `location` is where it
    /// was, if it was ever written.
    fn delete_chunk(
        &self,
        coord: &ChunkCoord,
        location: Option<DiskLocation>,
        udata: &mut Udata,
    ) -> Result<(), LayoutError>;

    /// Optional ([`Capabilities::SELECTION_READ`]): how to read `runs` of the chunk stored at
    /// `location` straight into the caller's buffer (SCC-045). `chunk` is the resident cache form
    /// if any (the defined-only form for sparse layouts). Never does I/O.
    fn plan_selection_read(
        &self,
        coord: &ChunkCoord,
        chunk: Option<&Chunk>,
        location: DiskLocation,
        runs: &[CopyRun],
        partial_bound: bool,
        udata: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        let _ = (coord, chunk, location, runs, partial_bound, udata);
        Err(unsupported("plan_selection_read"))
    }

    /// Optional ([`Capabilities::SELECTION_WRITE`]): like
    /// [`plan_selection_read`](ChunkLayout::plan_selection_read), for writing.
    fn plan_selection_write(
        &self,
        coord: &ChunkCoord,
        chunk: Option<&Chunk>,
        location: DiskLocation,
        runs: &[CopyRun],
        partial_bound: bool,
        udata: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        let _ = (coord, chunk, location, runs, partial_bound, udata);
        Err(unsupported("plan_selection_write"))
    }

    /// Optional ([`Capabilities::VECTOR_READ`]): the file segments holding `runs` of the chunk at
    /// `location` (SCC-046). Never does I/O.
    fn plan_vector_read(
        &self,
        coord: &ChunkCoord,
        chunk: Option<&Chunk>,
        location: DiskLocation,
        runs: &[CopyRun],
        partial_bound: bool,
        udata: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        let _ = (coord, chunk, location, runs, partial_bound, udata);
        Err(unsupported("plan_vector_read"))
    }

    /// Optional ([`Capabilities::VECTOR_WRITE`]): like
    /// [`plan_vector_read`](ChunkLayout::plan_vector_read), for writing.
    fn plan_vector_write(
        &self,
        coord: &ChunkCoord,
        chunk: Option<&Chunk>,
        location: DiskLocation,
        runs: &[CopyRun],
        partial_bound: bool,
        udata: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        let _ = (coord, chunk, location, runs, partial_bound, udata);
        Err(unsupported("plan_vector_write"))
    }

    /// Optional ([`Capabilities::SCATTER`], required for custom chunks): copies the `runs` of the
    /// chunk into `buf`, converting with `conv` if given (SCC-049).
    fn scatter(
        &self,
        chunk: &Chunk,
        runs: &[CopyRun],
        buf: &mut [u8],
        conv: Option<&dyn Conversion>,
    ) -> Result<(), LayoutError> {
        let _ = (chunk, runs, buf, conv);
        Err(unsupported("scatter"))
    }

    /// Optional ([`Capabilities::GATHER`], required for custom chunks): copies the `runs` of `buf`
    /// into the chunk, converting with `conv` if given, and marks them defined (SCC-050).
    fn gather(
        &self,
        chunk: &mut Chunk,
        runs: &[CopyRun],
        buf: &[u8],
        conv: Option<&dyn Conversion>,
    ) -> Result<MemUsage, LayoutError> {
        let _ = (chunk, runs, buf, conv);
        Err(unsupported("gather"))
    }

    /// Optional ([`Capabilities::FILL`], required for custom chunks): writes the fill value into
    /// the chunk elements of `runs` (only `chunk_offset` and `len` count) (SCC-051).
    fn fill(&self, chunk: &mut Chunk, runs: &[CopyRun]) -> Result<MemUsage, LayoutError> {
        let _ = (chunk, runs);
        Err(unsupported("fill"))
    }

    /// Optional ([`Capabilities::DEFINED_VALUES`]): the runs (a subset of `runs`, split where
    /// needed, in the same order) whose elements are defined (SCC-052).
    fn defined_values(&self, chunk: &Chunk, runs: &[CopyRun]) -> Result<Vec<CopyRun>, LayoutError> {
        let _ = (chunk, runs);
        Err(unsupported("defined_values"))
    }

    /// Optional ([`Capabilities::ERASE_VALUES`]): makes the elements of `runs` undefined
    /// (SCC-053).
    fn erase_values(&self, chunk: &mut Chunk, runs: &[CopyRun]) -> Result<Erased, LayoutError> {
        let _ = (chunk, runs);
        Err(unsupported("erase_values"))
    }

    /// Optional ([`Capabilities::DROP_VALUES`]): frees the values, keeping the defined set
    /// (SCC-054, OQ-4).
    fn drop_values(&self, chunk: &mut Chunk) -> Result<MemUsage, LayoutError> {
        let _ = chunk;
        Err(unsupported("drop_values"))
    }
}
