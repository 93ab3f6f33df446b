//! Compact datasets (layout class 0): the data lives in the layout message. The chunk cache
//! sees one chunk of the dataset's dimensions stored "at" an empty location (as the reader's
//! compact layout does); encoding it hands the bytes to the layout, and at flush the layout
//! message is rewritten through the object-header update path.

use std::sync::{Arc, Mutex};

use h5_chunkcache::{
    Chunk, ChunkCoord, ChunkLayout, DiskLocation, Encoded, InsertRequest, LayoutError, LayoutInfo,
    Lookup, Udata,
};
use h5_format::message::layout::LayoutClass;

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::write::chunks::block_size;

/// Most bytes of compact data: a message body is at most 65,535 bytes, and a version 1 object
/// header pads messages to 8 bytes; the layout message adds 4 bytes of its own.
pub const MAX_COMPACT_BYTES: u64 = 65_520;

/// The current bytes of a compact dataset and whether the message is stale.
#[derive(Debug)]
pub(crate) struct CompactData {
    pub(crate) bytes: Mutex<Vec<u8>>,
    pub(crate) dirty: Mutex<bool>,
    /// The dataset's object header (relative), set once it exists.
    pub(crate) header: Mutex<Option<u64>>,
}

impl CompactData {
    pub(crate) fn new(bytes: Vec<u8>) -> Arc<Self> {
        Arc::new(CompactData {
            bytes: Mutex::new(bytes),
            dirty: Mutex::new(false),
            header: Mutex::new(None),
        })
    }

    /// Rewrites the layout message with the current bytes if they changed.
    pub(crate) fn lay_out(&self, file: &FileShared) -> Result<()> {
        {
            let mut d = self.dirty.lock().map_err(|_| Error::Poisoned)?;
            if !*d {
                return Ok(());
            }
            *d = false;
        }
        let Some(at) = *self.header.lock().map_err(|_| Error::Poisoned)? else {
            return Ok(());
        };
        let data = self.bytes.lock().map_err(|_| Error::Poisoned)?.clone();
        crate::write::chunk_index::create::rewrite_layout(file, at, LayoutClass::Compact { data })
    }
}

impl crate::write::chunks::AtFlush for CompactData {
    fn flush(&self, file: &FileShared) -> Result<()> {
        self.lay_out(file)
    }

    fn dataset_header(&self) -> Option<u64> {
        self.header.lock().ok().and_then(|h| *h)
    }
}

/// The chunk-cache layout of a compact dataset being written.
#[derive(Debug)]
pub(crate) struct CompactWriteLayout {
    pub(crate) dims: Vec<u64>,
    pub(crate) elem_size: usize,
    pub(crate) fill: Vec<u8>,
    pub(crate) data: Arc<CompactData>,
}

impl ChunkLayout for CompactWriteLayout {
    fn query(&self) -> LayoutInfo {
        let chunk: Vec<u64> = self.dims.iter().map(|&d| d.max(1)).collect();
        LayoutInfo {
            needs_codec: true,
            ..LayoutInfo::dense(&chunk, self.elem_size, &self.fill)
        }
    }

    fn extent(&self) -> Vec<u64> {
        self.dims.clone()
    }

    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let n = self.data.bytes.lock().map_err(|_| "lock poisoned")?.len();
        Ok(coords
            .iter()
            .map(|_| Lookup::dense(Some(DiskLocation { addr: 0, size: 0 }), n, Box::new(())))
            .collect())
    }

    fn decode(
        &self,
        _: &ChunkCoord,
        _: Vec<u8>,
        _: bool,
        _: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        let mut v = self.data.bytes.lock().map_err(|_| "lock poisoned")?.clone();
        let dims: Vec<u64> = self.dims.iter().map(|&d| d.max(1)).collect();
        let (_, n) = block_size("compact data", &dims, self.elem_size)?;
        v.resize(n, 0);
        Ok(Chunk::Dense(v))
    }

    fn new_chunk(&self, c: &ChunkCoord, _: bool) -> Result<(Chunk, Udata), LayoutError> {
        Ok((
            self.decode(c, Vec::new(), false, &mut (Box::new(()) as Udata))?,
            Box::new(()),
        ))
    }

    fn encode(
        &self,
        _: &ChunkCoord,
        chunk: &Chunk,
        _: bool,
        _: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        let bytes = chunk
            .as_dense()
            .ok_or("a custom chunk in a compact layout")?;
        let (_, n) = block_size("compact data", &self.dims, self.elem_size)?;
        let mut data = self.data.bytes.lock().map_err(|_| "lock poisoned")?;
        data.clear();
        data.extend_from_slice(bytes.get(..n).ok_or("compact chunk too short")?);
        *self.data.dirty.lock().map_err(|_| "lock poisoned")? = true;
        // Nothing reaches the raw data of the file: the message carries the bytes.
        Ok(Encoded::Owned(Vec::new()))
    }

    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        Ok(reqs
            .iter()
            .map(|_| DiskLocation { addr: 0, size: 0 })
            .collect())
    }

    fn delete_chunk(
        &self,
        _: &ChunkCoord,
        _: Option<DiskLocation>,
        _: &mut Udata,
    ) -> Result<(), LayoutError> {
        Err("compact data cannot be deleted".into())
    }
}

impl FileShared {
    /// Creates the storage of a compact dataset of `bytes` bytes (filled with `fill`): the
    /// layout message's class, the data handle (its header to be set once created) and the
    /// chunk-cache layout. The data handle is laid out at every flush.
    pub(crate) fn new_compact(
        &self,
        dims: &[u64],
        elem_size: usize,
        fill: &[u8],
        bytes: u64,
    ) -> Result<(LayoutClass, Arc<CompactData>, Arc<dyn ChunkLayout>)> {
        if bytes > MAX_COMPACT_BYTES {
            return Err(Error::Invalid(format!(
                "compact data of {bytes} bytes (at most {MAX_COMPACT_BYTES})"
            )));
        }
        let initial = crate::write::chunks::fill_chunk(bytes as usize, fill);
        let data = CompactData::new(initial.clone());
        self.state()?
            .indexes
            .push(Arc::clone(&data) as Arc<dyn crate::write::chunks::AtFlush>);
        let layout = Arc::new(CompactWriteLayout {
            dims: dims.to_vec(),
            elem_size,
            fill: fill.to_vec(),
            data: Arc::clone(&data),
        });
        Ok((LayoutClass::Compact { data: initial }, data, layout))
    }
}
