//! The layout interface (spec §2.5, design note §4.1): how the cache asks a dataset's storage
//! layout to find, create, decode, encode and index its chunks.
//!
//! Only dense chunks exist so far: the cache form of a chunk is its elements as bytes, row-major
//! over the full chunk dimensions (`Vec<u8>`). Sparse and defined-values layouts will add an
//! associated chunk type later; the methods here take and return `Vec<u8>` so that change can be
//! made by generalising these signatures without touching the flows' structure.

use crate::ChunkCoord;

/// An error reported by a layout callback; the cache wraps it with the dataset and chunk.
pub type LayoutError = Box<dyn std::error::Error + Send + Sync>;

/// Per-chunk layout state, created by [`ChunkLayout::lookup`] or [`ChunkLayout::new_chunk`],
/// owned by the cache and dropped with the entry (OQ-12, SCC-035).
pub type Udata = Box<dyn std::any::Any + Send>;

/// Memory used by a cached chunk object (for layouts whose chunks are not plain vectors).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct MemUsage {
    /// Bytes holding data.
    pub used: usize,
    /// Bytes allocated.
    pub allocated: usize,
}

/// Where a chunk's encoded image lives in the file.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct DiskLocation {
    /// Byte address in the file.
    pub addr: u64,
    /// Size of the encoded image in bytes.
    pub size: u64,
}

/// What a layout tells the cache once, at registration (SCC-030).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct LayoutInfo {
    /// Chunk dimensions (same rank as the dataset, none zero).
    pub chunk_dims: Vec<u64>,
    /// Bytes per element (not zero).
    pub elem_size: usize,
    /// The fill value, one element (`elem_size` bytes); empty means zeros.
    pub fill: Vec<u8>,
    /// Chunks pass through a codec (filters): encode and decode change the bytes.
    pub needs_codec: bool,
    /// Edge chunks are encoded differently from interior ones (so `partial_bound` matters).
    pub edge_chunks_differ: bool,
}

/// One result of [`ChunkLayout::lookup`].
pub struct Lookup {
    /// Where the chunk is stored; `None` if it has never been written (its udata is dropped at
    /// once, SCC-035, OQ-11).
    pub location: Option<DiskLocation>,
    /// Expected size of the decoded chunk, to size the read buffer (0 if unknown).
    pub size_hint: usize,
    /// The layout's per-chunk state.
    pub udata: Udata,
}

impl std::fmt::Debug for Lookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookup")
            .field("location", &self.location)
            .field("size_hint", &self.size_hint)
            .finish_non_exhaustive()
    }
}

/// The result of [`ChunkLayout::encode`] (OQ-8).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Encoded {
    /// The on-disk image is the cache form itself (no codec): the cache writes its own bytes.
    SameAsCache,
    /// A separate encoded image.
    Owned(Vec<u8>),
}

/// One chunk to allocate and index in [`ChunkLayout::insert`].
pub struct InsertRequest<'a> {
    /// The chunk.
    pub coord: ChunkCoord,
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

/// A dataset's chunked storage layout as the cache sees it (spec §2.5).
///
/// The cache owns all chunk I/O: a layout never reads or writes chunk bodies; it only finds,
/// allocates and indexes them, and converts between the cache form and the disk image.
pub trait ChunkLayout: Send + Sync + std::fmt::Debug {
    /// The layout's constants; called once at registration (SCC-030).
    fn query(&self) -> LayoutInfo;

    /// The dataset's current dimensions.
    fn extent(&self) -> Vec<u64>;

    /// Finds the given chunks, one result per coordinate in order (batched, SCC-032). Never reads
    /// chunk bodies.
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError>;

    /// Turns a disk image into the cache form; `partial_bound` says the chunk extends past the
    /// current extent. The default (no codec) returns the image unchanged.
    fn decode(
        &self,
        coord: &ChunkCoord,
        image: Vec<u8>,
        partial_bound: bool,
        udata: &mut Udata,
    ) -> Result<Vec<u8>, LayoutError> {
        let _ = (coord, partial_bound, udata);
        Ok(image)
    }

    /// A new chunk in cache form with its udata (SCC-039); filled with the fill value if `fill`,
    /// otherwise its contents are unspecified (the caller overwrites every element).
    fn new_chunk(&self, coord: &ChunkCoord, fill: bool) -> Result<(Vec<u8>, Udata), LayoutError>;

    /// The disk image of a chunk, leaving the cache form intact (SCC-041).
    fn encode(
        &self,
        coord: &ChunkCoord,
        chunk: &[u8],
        partial_bound: bool,
        udata: &mut Udata,
    ) -> Result<Encoded, LayoutError>;

    /// The disk image of a chunk, consuming the cache form (eviction, SCC-042). The default calls
    /// [`encode`](ChunkLayout::encode) and returns the chunk itself for
    /// [`Encoded::SameAsCache`].
    fn encode_in_place(
        &self,
        coord: &ChunkCoord,
        chunk: Vec<u8>,
        partial_bound: bool,
        udata: &mut Udata,
    ) -> Result<Vec<u8>, LayoutError> {
        match self.encode(coord, &chunk, partial_bound, udata)? {
            Encoded::SameAsCache => Ok(chunk),
            Encoded::Owned(image) => Ok(image),
        }
    }

    /// Allocates file space for each request's image and records it in the chunk index; returns
    /// one location per request in order. Writes no chunk data (SCC-044).
    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError>;
}
