//! A chunk index made with the dataset's first chunk, as libhdf5 makes it: a chunked dataset
//! with incremental or late allocation is created with its layout message's index address
//! undefined and no index structure, so creating many datasets writes and caches only their
//! object headers (and a dataset never written costs no index at all).
//!
//! Invariants: until the first insert, the dataset has no chunk (every lookup finds none, a
//! remove or free has nothing to do). The first insert makes the structure, records its
//! address in the layout message (same length: rewritten where it is stored), then inserts;
//! from then on every call goes to the structure. The structure is made once.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use h5_chunkcache::ChunkCoord;
use h5_format::message::layout::{ChunkIndex, Layout, LayoutClass};

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::ChunkRecord;
use crate::write::chunks::{AtFlush, WritableChunkIndex};

/// Makes a dataset's index structure: the layout message's index (with its address) and the
/// writable index over it.
pub(crate) type MakeIndex =
    Box<dyn Fn(&FileShared) -> Result<(ChunkIndex, Arc<dyn WritableChunkIndex>)> + Send + Sync>;

/// A dataset's chunk index, made on its first insert.
pub(crate) struct LazyIndex {
    file: Weak<FileShared>,
    /// The dataset's object header (relative), set once it exists.
    header: Mutex<Option<u64>>,
    /// The layout message as written at creation (index address undefined).
    template: Layout,
    make: MakeIndex,
    made: OnceLock<Arc<dyn WritableChunkIndex>>,
    /// Held while the structure is made (two first inserts make it once).
    making: Mutex<()>,
}

impl std::fmt::Debug for LazyIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyIndex")
            .field("header", &self.header)
            .field("made", &self.made.get().is_some())
            .finish_non_exhaustive()
    }
}

impl LazyIndex {
    /// An index of the dataset whose layout message is `template` (header address set later
    /// with [`LazyIndex::set_header`], or known now), made by `make` on the first insert.
    pub(crate) fn new(
        file: Weak<FileShared>,
        header: Option<u64>,
        template: Layout,
        make: MakeIndex,
    ) -> LazyIndex {
        LazyIndex {
            file,
            header: Mutex::new(header),
            template,
            make,
            made: OnceLock::new(),
            making: Mutex::new(()),
        }
    }

    /// Records the dataset's object header (relative) once it exists.
    pub(crate) fn set_header(&self, at: u64) -> Result<()> {
        *self.header.lock().map_err(|_| Error::Poisoned)? = Some(at);
        Ok(())
    }

    /// The structure, made now (and recorded in the layout message) if it does not exist.
    fn made(&self) -> Result<&Arc<dyn WritableChunkIndex>> {
        if let Some(i) = self.made.get() {
            return Ok(i);
        }
        let _making = self.making.lock().map_err(|_| Error::Poisoned)?;
        if let Some(i) = self.made.get() {
            return Ok(i);
        }
        let file = self
            .file
            .upgrade()
            .ok_or_else(|| Error::Invalid("the file is closed".into()))?;
        let header = self
            .header
            .lock()
            .map_err(|_| Error::Poisoned)?
            .ok_or_else(|| Error::Invalid("a chunk written before its dataset exists".into()))?;
        // In SWMR-writing mode the header, which will name the new index, is written after it.
        file.swmr_pin_header(header)?;
        let (index, store) = (self.make)(&file)?;
        let mut layout = self.template.clone();
        if let LayoutClass::Chunked { index: i, .. } = &mut layout.class {
            *i = index;
        }
        super::create::rewrite_layout_message(&file, header, layout)?;
        Ok(self.made.get_or_init(|| store))
    }
}

impl AtFlush for LazyIndex {
    fn flush(&self, file: &FileShared) -> Result<()> {
        match self.made.get() {
            Some(i) => i.flush(file),
            None => Ok(()),
        }
    }

    fn dataset_header(&self) -> Option<u64> {
        self.made.get().and_then(|i| i.dataset_header())
    }
}

impl WritableChunkIndex for LazyIndex {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>> {
        match self.made.get() {
            Some(i) => i.lookup(coords),
            None => Ok(vec![None; coords.len()]),
        }
    }

    fn insert(&self, scaled: &[u64], record: ChunkRecord) -> Result<()> {
        self.made()?.insert(scaled, record)
    }

    fn insert_many(&self, records: &[(ChunkCoord, ChunkRecord)]) -> Result<()> {
        self.made()?.insert_many(records)
    }

    fn remove(&self, scaled: &[u64]) -> Result<()> {
        match self.made.get() {
            Some(i) => i.remove(scaled),
            None => Ok(()),
        }
    }

    fn free(&self, file: &FileShared) -> Result<()> {
        match self.made.get() {
            Some(i) => i.free(file),
            None => Ok(()),
        }
    }
}
