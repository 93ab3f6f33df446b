//! The state shared by every handle of one open file: storage, the metadata cache, the chunk
//! cache and the superblock's constants.

use std::any::Any;
use std::sync::{Arc, Mutex};

use h5_chunkcache::ChunkCache;
use h5_format::Sizes;
use h5_metacache::{MetadataCache, MetadataKind, ProtectFlags, UnprotectFlags};

use crate::error::{Error, Result};
use crate::meta::{Load, Meta};

/// One open file.
pub struct FileShared {
    /// The file's bytes.
    pub(crate) storage: Arc<dyn h5_io::Storage>,
    /// Every metadata structure goes through this cache.
    pub(crate) meta: Mutex<MetadataCache<Meta>>,
    /// All raw data goes through this cache.
    pub(crate) chunks: Mutex<ChunkCache>,
    /// Sizes of addresses and lengths.
    pub(crate) sizes: Sizes,
    /// Absolute file offset that relative addresses count from (the superblock's base address).
    pub(crate) base: u64,
}

impl std::fmt::Debug for FileShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileShared")
            .field("sizes", &self.sizes)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl FileShared {
    /// Loads (or finds in the cache) the structure of `kind` at relative address `addr` and
    /// returns its decoded value, which must be a `T`. The entry is protected read-only only for
    /// the time it takes to clone the value out.
    pub(crate) fn load<T: Any + Send + Sync>(
        &self,
        kind: MetadataKind,
        addr: u64,
        load: Load,
    ) -> Result<Arc<T>> {
        let abs = self.abs(addr)?;
        let mut meta = self.meta.lock().map_err(|_| Error::Poisoned)?;
        let h = meta.protect(kind.id(), abs, &load, ProtectFlags::READ_ONLY)?;
        let value = meta.icr(&h).map(|d| Arc::clone(&d.value));
        meta.unprotect(h, UnprotectFlags::NONE)
            .map_err(|e| Error::Cache(e.error))?;
        let value = value?;
        value.downcast::<T>().map_err(|_| {
            Error::Unsupported(format!(
                "{} at {addr:#x} was already cached as another structure",
                kind.name()
            ))
        })
    }

    /// The absolute file offset of relative address `addr`.
    pub(crate) fn abs(&self, addr: u64) -> Result<u64> {
        self.base.checked_add(addr).ok_or_else(|| {
            Error::Format(h5_format::FormatError::Corrupted {
                structure: "address",
                address: addr,
                reason: "address overflows the file".into(),
            })
        })
    }
}
