//! Dataset storage layouts as chunk-cache layouts (DESIGN.md: every layout reads raw data through
//! the shared chunk cache).
//!
//! * Contiguous and compact data are one chunk with the dataset's dimensions; the cache reads
//!   small selections of them straight from the file through the selection planner.
//! * Chunked data finds its chunks through a [`ChunkIndex`] (one implementation per index type)
//!   and decodes them through the filter pipeline.
//!
//! These layouts serve reads; writing is issue 5, so `insert` and `delete_chunk` refuse.

use std::sync::Arc;

use h5_chunkcache::selection::CopyRun;
use h5_chunkcache::{
    Capabilities, Chunk, ChunkCoord, ChunkLayout, DirectPlan, DiskLocation, Encoded, LayoutError,
    LayoutInfo, Lookup, Udata,
};

/// A chunk's place in the file and the filters skipped when it was written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ChunkRecord {
    /// Absolute file offset.
    pub addr: u64,
    /// Bytes stored (after filters).
    pub size: u64,
    /// Bit `i` set: filter `i` of the pipeline was not applied.
    pub filter_mask: u32,
}

/// Finds chunks in a chunked dataset's index.
pub trait ChunkIndex: Send + Sync + std::fmt::Debug {
    /// The record of each chunk (`None`: never written), in order.
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>, LayoutError>;
}

/// Chunk dimensions that are never zero (a zero-sized dataset still has a one-element "chunk").
fn nonzero(dims: &[u64]) -> Vec<u64> {
    dims.iter().map(|&d| d.max(1)).collect()
}

pub(crate) fn read_only(what: &str) -> LayoutError {
    format!("{what}: writing is not supported yet (files are opened read-only)").into()
}

/// The writing callbacks of a read-only layout (new chunk, insert, delete), each refusing.
macro_rules! read_only_writes {
    () => {
        fn new_chunk(
            &self,
            _: &h5_chunkcache::ChunkCoord,
            _: bool,
        ) -> Result<(h5_chunkcache::Chunk, h5_chunkcache::Udata), h5_chunkcache::LayoutError> {
            Err($crate::layouts::read_only("new chunk"))
        }

        fn insert(
            &self,
            _: &mut [h5_chunkcache::InsertRequest<'_>],
        ) -> Result<Vec<h5_chunkcache::DiskLocation>, h5_chunkcache::LayoutError> {
            Err($crate::layouts::read_only("insert"))
        }

        fn delete_chunk(
            &self,
            _: &h5_chunkcache::ChunkCoord,
            _: Option<h5_chunkcache::DiskLocation>,
            _: &mut h5_chunkcache::Udata,
        ) -> Result<(), h5_chunkcache::LayoutError> {
            Err($crate::layouts::read_only("delete"))
        }
    };
}
pub(crate) use read_only_writes;

/// Contiguous (or compact) data: one chunk of the dataset's dimensions at a fixed address.
#[derive(Debug)]
pub struct SingleBlockLayout {
    /// Dataset dimensions.
    pub dims: Vec<u64>,
    /// Bytes per element.
    pub elem_size: usize,
    /// Fill value (empty: zeros).
    pub fill: Vec<u8>,
    /// Where the data is (absolute), or `None` when storage was never allocated.
    pub location: Option<DiskLocation>,
}

impl ChunkLayout for SingleBlockLayout {
    read_only_writes!();

    fn query(&self) -> LayoutInfo {
        LayoutInfo {
            capabilities: Capabilities::SELECTION_READ,
            ..LayoutInfo::dense(&nonzero(&self.dims), self.elem_size, &self.fill)
        }
    }

    fn extent(&self) -> Vec<u64> {
        self.dims.clone()
    }

    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        Ok(coords
            .iter()
            .map(|_| Lookup::dense(self.location, 0, Box::new(())))
            .collect())
    }

    fn encode(
        &self,
        _: &ChunkCoord,
        _: &Chunk,
        _: bool,
        _: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        Ok(Encoded::SameAsCache)
    }

    fn plan_selection_read(
        &self,
        _: &ChunkCoord,
        _: Option<&Chunk>,
        _: DiskLocation,
        _: &[CopyRun],
        _: bool,
        _: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        // The image is the elements themselves: the input runs address it directly.
        Ok(DirectPlan::Selection(None))
    }
}

/// Decodes a stored chunk: the filter pipeline in reverse, honouring the chunk's mask.
pub trait ChunkDecoder: Send + Sync + std::fmt::Debug {
    /// Whether any filter is present (otherwise images are the chunk's bytes).
    fn is_identity(&self) -> bool;
    /// The chunk's bytes from its image.
    fn decode(&self, image: Vec<u8>, filter_mask: u32) -> Result<Vec<u8>, LayoutError>;
    /// [`decode`](Self::decode) reusing `spare`'s allocation where it can; returns the bytes
    /// and a buffer no longer needed (see [`ChunkLayout::decode_reusing`]). The default
    /// decodes and gives `spare` back.
    fn decode_reusing(
        &self,
        image: Vec<u8>,
        filter_mask: u32,
        spare: Vec<u8>,
    ) -> Result<(Vec<u8>, Vec<u8>), LayoutError> {
        Ok((self.decode(image, filter_mask)?, spare))
    }
}

/// Chunked data: an index and a filter pipeline.
#[derive(Debug)]
pub struct ChunkedLayout {
    /// Dataset dimensions.
    pub dims: Vec<u64>,
    /// Chunk dimensions (without the element-size dimension of old layouts).
    pub chunk_dims: Vec<u64>,
    /// Bytes per element.
    pub elem_size: usize,
    /// Fill value (empty: zeros).
    pub fill: Vec<u8>,
    /// The chunk index.
    pub index: Arc<dyn ChunkIndex>,
    /// The filters.
    pub decoder: Arc<dyn ChunkDecoder>,
    /// Partial edge chunks (those reaching past the dataset's extent) are stored without the
    /// filters (layout flag `DONT_FILTER_PARTIAL_EDGE_CHUNKS`, libhdf5's
    /// `H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS`); only set when there are filters.
    pub unfiltered_edges: bool,
}

impl ChunkedLayout {
    /// A decoded chunk, if it has the chunk's size.
    fn checked(&self, out: Vec<u8>) -> Result<Chunk, LayoutError> {
        if out.len() != self.chunk_bytes() {
            return Err(format!(
                "a decoded chunk has {} bytes, {} expected",
                out.len(),
                self.chunk_bytes()
            )
            .into());
        }
        Ok(Chunk::Dense(out))
    }

    fn chunk_bytes(&self) -> usize {
        self.chunk_dims
            .iter()
            .fold(self.elem_size, |a, &d| a.saturating_mul(d as usize))
    }
}

impl ChunkLayout for ChunkedLayout {
    read_only_writes!();

    fn query(&self) -> LayoutInfo {
        let raw = self.decoder.is_identity();
        LayoutInfo {
            needs_codec: !raw,
            edge_chunks_differ: self.unfiltered_edges,
            capabilities: if raw {
                Capabilities::SELECTION_READ
            } else {
                Capabilities::NONE
            },
            ..LayoutInfo::dense(&self.chunk_dims, self.elem_size, &self.fill)
        }
    }

    fn extent(&self) -> Vec<u64> {
        self.dims.clone()
    }

    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let records = self.index.lookup(coords)?;
        if records.len() != coords.len() {
            return Err("chunk index returned the wrong number of records".into());
        }
        let hint = self.chunk_bytes();
        Ok(records
            .into_iter()
            .map(|r| match r {
                Some(r) => Lookup::dense(
                    Some(DiskLocation {
                        addr: r.addr,
                        size: r.size,
                    }),
                    hint,
                    Box::new(r),
                ),
                None => Lookup::dense(None, 0, Box::new(())),
            })
            .collect())
    }

    fn decode(
        &self,
        coord: &ChunkCoord,
        image: Vec<u8>,
        partial_bound: bool,
        udata: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        // Without a spare, the decoder's plain decode.
        self.decode_reusing(coord, image, partial_bound, udata, Vec::new())
            .map(|(chunk, _)| chunk)
    }

    fn decode_reusing(
        &self,
        _: &ChunkCoord,
        image: Vec<u8>,
        partial_bound: bool,
        udata: &mut Udata,
        spare: Vec<u8>,
    ) -> Result<(Chunk, Vec<u8>), LayoutError> {
        if self.unfiltered_edges && partial_bound {
            return Ok((self.checked(image)?, spare));
        }
        let mask = udata
            .downcast_ref::<ChunkRecord>()
            .map_or(0, |r| r.filter_mask);
        let (out, leftover) = self.decoder.decode_reusing(image, mask, spare)?;
        Ok((self.checked(out)?, leftover))
    }

    fn encode(
        &self,
        _: &ChunkCoord,
        _: &Chunk,
        _: bool,
        _: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        Err(read_only("encode"))
    }

    fn plan_selection_read(
        &self,
        _: &ChunkCoord,
        _: Option<&Chunk>,
        _: DiskLocation,
        _: &[CopyRun],
        _: bool,
        _: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        Ok(if self.decoder.is_identity() {
            DirectPlan::Selection(None)
        } else {
            DirectPlan::NotPossible
        })
    }
}

/// The single-chunk index (layout v4, index type 1): one record in the layout message.
#[derive(Debug)]
pub struct SingleChunkIndex(pub Option<ChunkRecord>);

impl ChunkIndex for SingleChunkIndex {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>, LayoutError> {
        Ok(coords
            .iter()
            .map(|c| {
                if c.as_slice().iter().all(|&x| x == 0) {
                    self.0
                } else {
                    None
                }
            })
            .collect())
    }
}

/// The index of a chunked dataset whose chunks were never written: its address in the layout
/// message is undefined (late or incremental allocation, no write yet), so every chunk reads as
/// the fill value, as libhdf5 reads it.
#[derive(Debug)]
pub struct UnallocatedIndex;

impl ChunkIndex for UnallocatedIndex {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>, LayoutError> {
        Ok(vec![None; coords.len()])
    }
}

/// The implicit index (layout v4, index type 2): unfiltered chunks allocated together, in
/// row-major order of their scaled coordinates over the chunk grid of the maximum dimensions.
#[derive(Debug)]
pub struct ImplicitIndex {
    /// Absolute address of the first chunk (`None`: not allocated).
    pub base: Option<u64>,
    /// Chunks per dimension.
    pub grid: Vec<u64>,
    /// Bytes per chunk.
    pub chunk_bytes: u64,
}

impl ChunkIndex for ImplicitIndex {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>, LayoutError> {
        let Some(base) = self.base else {
            return Ok(vec![None; coords.len()]);
        };
        coords
            .iter()
            .map(|c| {
                let mut lin = 0u64;
                for (&x, &n) in c.as_slice().iter().zip(&self.grid) {
                    if x >= n {
                        return Ok(None);
                    }
                    lin = lin
                        .checked_mul(n)
                        .and_then(|l| l.checked_add(x))
                        .ok_or("implicit chunk index overflows")?;
                }
                let addr = lin
                    .checked_mul(self.chunk_bytes)
                    .and_then(|o| o.checked_add(base))
                    .ok_or("implicit chunk address overflows")?;
                Ok(Some(ChunkRecord {
                    addr,
                    size: self.chunk_bytes,
                    filter_mask: 0,
                }))
            })
            .collect()
    }
}
