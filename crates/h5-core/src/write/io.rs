//! Raw-data operations beyond plain writes: several datasets in one chunk-cache call, direct
//! chunk reads and writes (stored images, filters bypassed), and the sticky failure state of a
//! writable file.

use std::sync::Arc;

use h5_chunkcache::selection::Selection;
use h5_chunkcache::{ChunkCacheError, ChunkCoord, WriteRequest};
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
    /// Refuses changes once a write to the storage has failed (the sticky failed state).
    pub(crate) fn check_usable(&self) -> Result<()> {
        match &self.state()?.failed {
            Some(why) => Err(Error::Failed(why.clone())),
            None => Ok(()),
        }
    }

    /// Records that a write to the storage failed with `e` (if it is such a failure) and
    /// returns `e`.
    pub(crate) fn note_failure(&self, e: Error) -> Error {
        if is_storage_failure(&e)
            && let Ok(mut w) = self.state()
            && w.failed.is_none()
        {
            w.failed = Some(e.to_string());
        }
        e
    }
}

/// Writes whole datasets of one file in one chunk-cache call: each request is a dataset and
/// its elements in the file type, in C order.
pub fn write_many(file: &Arc<FileShared>, reqs: &[(&DatasetInfo, &[u8])]) -> Result<()> {
    file.check_usable()?;
    let mut ids = Vec::with_capacity(reqs.len());
    for (info, buf) in reqs {
        let elements: u64 = info.dims().iter().product();
        if elements.checked_mul(info.elem_size() as u64) != Some(buf.len() as u64) {
            return Err(Error::Invalid(format!(
                "{} bytes for the {elements} elements of the dataset at {:#x}",
                buf.len(),
                info.address
            )));
        }
        file.allocate_pending(info.address)?;
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
    if offset.len() != chunk.len() || offset.iter().zip(&chunk).any(|(o, c)| o % c != 0) {
        return Err(Error::Invalid(format!(
            "{offset:?} is not the start of a chunk of {chunk:?}"
        )));
    }
    let scaled: Vec<u64> = offset.iter().zip(&chunk).map(|(o, c)| o / c).collect();
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
    // The reader's layouts keep the chunk's index record, the writable ones its last mask.
    let mask = found
        .udata
        .downcast_ref::<ChunkRecord>()
        .map(|r| r.filter_mask)
        .or_else(|| crate::write::chunks::udata_mask(&found.udata))
        .unwrap_or(0);
    let mut buf = vec![
        0u8;
        usize::try_from(location.size)
            .map_err(|_| Error::Unsupported("a chunk too large for memory".into()))?
    ];
    let n = chunks.direct_chunk_read(id, offset, &mut buf)?;
    buf.truncate(n);
    Ok(Some((mask, buf)))
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
    let coord = chunk_coord(info, offset)?;
    if !matches!(info.layout.class, LayoutClass::Chunked { .. }) {
        return Err(Error::Invalid(
            "direct chunk write on a dataset that is not chunked".into(),
        ));
    }
    file.allocate_pending(info.address)?;
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
