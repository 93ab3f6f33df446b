//! Raw-data operations beyond plain writes: several datasets in one chunk-cache call, direct
//! chunk reads and writes (stored images, filters bypassed), and the checks of the sticky
//! failure state of a writable file (kept by [`crate::guard::GuardedStorage`]).

use std::sync::Arc;

use h5_chunkcache::selection::Selection;
use h5_chunkcache::{ChunkCacheError, ChunkCoord, Lookup, WriteRequest};
use h5_format::message::layout::LayoutClass;

use crate::dataset::DatasetInfo;
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::ChunkRecord;

/// Whether `e` means the file's storage failed (as opposed to a refused argument): such an
/// error leaves the file in the sticky failed state.
pub(crate) fn is_storage_failure(e: &Error) -> bool {
    matches!(
        e,
        Error::Io(_)
            | Error::Chunks(ChunkCacheError::Io(_))
            | Error::Cache(h5_metacache::CacheError::Io(_))
    )
}

impl FileShared {
    /// Refuses changes once a write to the storage has failed (the sticky failed state, kept
    /// by the storage guard, which every write goes through) or the file was closed.
    pub(crate) fn check_usable(&self) -> Result<()> {
        self.storage.check_writable()?;
        if self.write.is_none() {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }

    /// Records that a write to the storage failed with `e` (if it is such a failure) and
    /// returns `e`. The guard has already recorded any failure that reached the storage; this
    /// catches one reported by a layer above it.
    pub(crate) fn note_failure(&self, e: Error) -> Error {
        if is_storage_failure(&e) {
            self.storage.fail(|| e.to_string());
        }
        e
    }
}

/// Writes whole datasets of one file in one chunk-cache call: each request is a dataset and
/// its elements in the file type, in C order.
pub fn write_many(file: &Arc<FileShared>, reqs: &[(&DatasetInfo, &[u8])]) -> Result<()> {
    file.check_usable()?;
    for (info, buf) in reqs {
        file.check_swmr_index(info)?;
        let elements = crate::buffer::product(info.dims().iter().copied());
        let bytes = elements.and_then(|n| n.checked_mul(info.elem_size() as u64));
        if bytes != Some(buf.len() as u64) {
            return Err(Error::Invalid(format!(
                "{} bytes for the {} elements of the dataset at {:#x}",
                buf.len(),
                elements.map_or_else(|| "too many".into(), |n| n.to_string()),
                info.address
            )));
        }
    }
    let mut ids = Vec::with_capacity(reqs.len());
    for (info, _) in reqs {
        // Each buffer holds every element of its dataset (checked above); variable-length
        // elements are read back first (see `write`), so their storage is filled.
        let whole = !crate::write::vlen::has_vlen(&info.datatype);
        file.allocate_pending(info.address, whole)?;
        ids.push(crate::dataset::ensure_registered(file, info)?);
    }
    // The elements written over: their variable-length data is freed once the write is done.
    let all = Selection::All;
    let mut old = Vec::with_capacity(reqs.len());
    for (info, _) in reqs {
        old.push(crate::write::dataset::overwritten_vlen(
            file, info, &all, None,
        )?);
    }
    let requests: Vec<WriteRequest<'_>> = reqs
        .iter()
        .zip(&ids)
        .map(|((_, buf), id)| WriteRequest::new(*id, &all, buf))
        .collect();
    let r = file
        .chunks
        .lock()
        .map_err(|_| Error::Poisoned)?
        .write(&requests);
    r.map(|_| ()).map_err(|e| file.note_failure(e.into()))?;
    for ((info, buf), old) in reqs.iter().zip(old) {
        if let Some(old) = old {
            file.free_replaced_vlen(&info.datatype, &old, Some(&info.datatype), buf)?;
        }
    }
    Ok(())
}

/// The chunk coordinates of the chunk starting at element `offset`, checked against the
/// dataset's chunking.
fn chunk_coord(info: &DatasetInfo, offset: &[u64]) -> Result<ChunkCoord> {
    let chunk = info.chunk_dims().ok_or_else(|| {
        Error::Invalid("direct chunk I/O on a dataset that is not chunked".into())
    })?;
    let scaled: Option<Vec<u64>> = (offset.len() == chunk.len())
        .then(|| {
            offset
                .iter()
                .zip(&chunk)
                .map(|(o, &c)| o.checked_div(c).filter(|_| o.checked_rem(c) == Some(0)))
                .collect()
        })
        .flatten();
    let Some(scaled) = scaled else {
        return Err(Error::Invalid(format!(
            "{offset:?} is not the start of a chunk of {chunk:?}"
        )));
    };
    ChunkCoord::new(&scaled).ok_or_else(|| Error::Unsupported("rank too large".into()))
}

/// The stored image of the chunk starting at element `offset` and its filter mask (bit `i` set:
/// filter `i` was skipped), or `None` when the chunk was never written. A dirty cached copy is
/// written first.
pub fn read_chunk(
    file: &Arc<FileShared>,
    info: &DatasetInfo,
    offset: &[u64],
) -> Result<Option<(u32, Vec<u8>)>> {
    chunk_coord(info, offset)?;
    let id = crate::dataset::ensure_registered(file, info)?;
    let mut chunks = file.chunks.lock().map_err(|_| Error::Poisoned)?;
    let found = chunks.direct_chunk_lookup(id, offset)?;
    let Some(location) = found.location else {
        return Ok(None);
    };
    let mask = filter_mask_of(&found);
    let mut buf = vec![
        0u8;
        usize::try_from(location.size)
            .map_err(|_| Error::Unsupported("a chunk too large for memory".into()))?
    ];
    let n = chunks.direct_chunk_read(id, offset, &mut buf)?;
    buf.truncate(n);
    Ok(Some((mask, buf)))
}

/// The filter mask a chunk lookup found: the reader's layouts keep the chunk's index record,
/// the writable ones its last mask.
fn filter_mask_of(found: &Lookup) -> u32 {
    found
        .udata
        .downcast_ref::<ChunkRecord>()
        .map(|r| r.filter_mask)
        .or_else(|| crate::write::chunks::udata_mask(&found.udata))
        .unwrap_or(0)
}

/// One allocated chunk of a chunked dataset.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct StoredChunk {
    /// The chunk's first element.
    pub offset: Vec<u64>,
    /// Bytes stored (after the filters).
    pub size: u64,
    /// Bit `i` set: filter `i` was skipped.
    pub filter_mask: u32,
    /// Absolute file offset of the stored bytes.
    pub address: u64,
}

/// Grids of more chunks than this are not listed (as [`crate::dataset::stored_sizes`]).
const MAX_LISTED_CHUNKS: u64 = 1 << 24;

/// Every allocated chunk of a chunked dataset in chunk-grid (row-major) order, each looked up
/// through the chunk cache (a dirty cached copy is written first, so the answer is what the
/// file holds); empty for other layouts.
pub fn stored_chunks(file: &Arc<FileShared>, info: &DatasetInfo) -> Result<Vec<StoredChunk>> {
    let Some(chunk) = info.chunk_dims() else {
        return Ok(Vec::new());
    };
    let counts = crate::indexes::grid(info.dims(), &chunk);
    let total = counts.iter().try_fold(1u64, |a, &c| a.checked_mul(c));
    let Some(total) = total.filter(|&t| t <= MAX_LISTED_CHUNKS) else {
        return Err(Error::Unsupported("too many chunks to list".into()));
    };
    let id = crate::dataset::ensure_registered(file, info)?;
    let mut chunks = file.chunks.lock().map_err(|_| Error::Poisoned)?;
    let mut out = Vec::new();
    let mut coord = vec![0u64; counts.len()];
    for _ in 0..total {
        #[allow(
            clippy::arithmetic_side_effects,
            reason = "i < ceil(dim / c) (the grid), so i * c < dim"
        )]
        let offset: Vec<u64> = coord.iter().zip(&chunk).map(|(i, c)| i * c).collect();
        let found = chunks.direct_chunk_lookup(id, &offset)?;
        if let Some(location) = found.location {
            out.push(StoredChunk {
                filter_mask: filter_mask_of(&found),
                offset,
                size: location.size,
                address: location.addr,
            });
        }
        crate::indexes::next_coords(&mut coord, &counts);
    }
    Ok(out)
}

/// Writes `bytes` as the stored image of the chunk starting at element `offset` (already
/// encoded by the caller's filters; `filter_mask` bit `i` set: filter `i` was skipped). Any
/// cached copy of the chunk is dropped.
pub fn write_chunk(
    file: &Arc<FileShared>,
    info: &DatasetInfo,
    offset: &[u64],
    filter_mask: u32,
    bytes: &[u8],
) -> Result<()> {
    file.check_usable()?;
    file.check_swmr_index(info)?;
    let coord = chunk_coord(info, offset)?;
    if !matches!(info.layout.class, LayoutClass::Chunked { .. }) {
        return Err(Error::Invalid(
            "direct chunk write on a dataset that is not chunked".into(),
        ));
    }
    file.allocate_pending(info.address, false)?;
    let id = crate::dataset::ensure_registered(file, info)?;
    let layout = file.state()?.chunked.get(&info.address).cloned();
    let Some(layout) = layout else {
        return Err(Error::Unsupported(
            "direct chunk writes to this chunk index (only version 1 B-tree indexes so far)".into(),
        ));
    };
    file.chunks
        .lock()
        .map_err(|_| Error::Poisoned)?
        .direct_chunk_write(id, offset, bytes)
        .map_err(|e| file.note_failure(e.into()))?;
    layout.set_filter_mask(&coord, filter_mask)
}
