//! The state shared by every handle of one open file: storage, the metadata cache, the chunk
//! cache and the superblock's constants.

use std::any::Any;
use std::sync::{Arc, Mutex};

use h5_chunkcache::{ChunkCache, ChunkCacheConfig};
use h5_format::Sizes;
use h5_format::superblock::{self, Root, Superblock};
use h5_io::{Storage, StorageExt};
use h5_metacache::{
    CacheBuilder, CacheConfig, MetadataCache, MetadataKind, ProtectFlags, UnprotectFlags,
};

use crate::error::{Error, Result};
use crate::meta::{FileSpace, Load, Meta, classes};

/// Cache settings of an open file.
#[derive(Clone, Debug, Default)]
pub struct CacheSettings {
    /// The metadata cache's configuration (`None`: the serial default).
    pub metadata: Option<CacheConfig>,
    /// The chunk cache's configuration.
    pub chunks: ChunkCacheConfig,
    /// Re-validate the whole metadata cache after every call (only where `h5-metacache` is
    /// built with its `extreme-checks` feature, as in the workspace's test builds). Off by
    /// default: the check is O(entries) per call; small-cache tests switch it on.
    pub invariant_checks: bool,
    /// The page buffer between both caches and the file (`None`: no page buffer). Needs the
    /// paged file-space strategy.
    pub page_buffer: Option<h5_pagebuf::PageBufferConfig>,
    /// VFD SWMR (`None`: off). Opening with it goes through [`FileShared::create_swmr`] and
    /// [`FileShared::open_swmr`].
    pub swmr: Option<h5_swmr::SwmrConfig>,
}

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
    /// The superblock.
    pub(crate) superblock: Superblock,
    /// Relative address of the root group's object header.
    pub(crate) root: u64,
    /// Directory of the file, for external links and external raw data (`None`: in memory).
    pub(crate) dir: Option<std::path::PathBuf>,
    /// The shared object header message table, once looked up (`Some(None)`: the file has
    /// none).
    pub(crate) sohm: Mutex<Option<Option<Arc<h5_format::sohm::SohmTable>>>>,
    /// The space allocator of a writable file (`None`: read-only).
    pub(crate) alloc: Option<Arc<Mutex<crate::write::alloc::FileAlloc>>>,
    /// What a writable file keeps besides the caches (`None`: read-only).
    pub(crate) write: Option<Mutex<crate::write::WriteState>>,
    /// The page buffer both caches reach the file through, if configured.
    pub(crate) pagebuf: Option<Arc<h5_pagebuf::PageBuffer>>,
    /// VFD SWMR state, set once right after opening.
    pub(crate) swmr: crate::swmr::SwmrSlot,
}

impl std::fmt::Debug for FileShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileShared")
            .field("sizes", &self.sizes)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// A cache error whose cause is a decoding error of the structure becomes that error (so a
/// damaged structure reports `Corrupted { structure, address }` directly).
pub(crate) fn cache_error(e: h5_metacache::CacheError) -> Error {
    match e {
        h5_metacache::CacheError::Client {
            class,
            callback,
            addr,
            source,
        } => match source.downcast::<h5_format::FormatError>() {
            Ok(f) => Error::Format(*f),
            Err(source) => Error::Cache(h5_metacache::CacheError::Client {
                class,
                callback,
                addr,
                source,
            }),
        },
        other => Error::Cache(other),
    }
}

impl FileShared {
    /// Opens the HDF5 file in `storage`: finds the superblock (after any userblock), loads it
    /// through the metadata cache and sets up both caches.
    pub fn open(
        storage: Arc<dyn Storage>,
        settings: &CacheSettings,
        dir: Option<std::path::PathBuf>,
    ) -> Result<Arc<FileShared>> {
        Ok(Arc::new(Self::open_unshared(storage, settings, dir)?.0))
    }

    /// [`FileShared::open`] before sharing; also returns the superblock's absolute address.
    pub(crate) fn open_unshared(
        storage: Arc<dyn Storage>,
        settings: &CacheSettings,
        dir: Option<std::path::PathBuf>,
    ) -> Result<(FileShared, u64)> {
        let (meta_storage, storage, pagebuf) = crate::pagebuf::faces(storage, settings)?;
        let len = storage.len()?;
        let at = superblock::locate(len, |off| {
            let mut sig = vec![0u8; superblock::SIGNATURE.len()];
            storage.read_at_zero_fill(off, &mut sig).map(|()| sig)
        })?
        .ok_or(Error::NotHdf5)?;
        let mut builder = CacheBuilder::new(
            meta_storage,
            classes(),
            FileSpace {
                eoa: len,
                alloc: None,
                base: 0,
            },
        );
        if let Some(c) = &settings.metadata {
            builder = builder.config(c.clone());
        }
        let mut meta = builder.build()?;
        meta.set_invariant_checks(settings.invariant_checks);
        let load = Load::sized(
            superblock::MAX_LEN,
            move |b| superblock::needed_len(b, at),
            move |b| Superblock::decode(b, at),
        );
        let h = meta.protect(
            MetadataKind::Superblock.id(),
            at,
            &load,
            ProtectFlags::READ_ONLY,
        )?;
        let value = meta.icr(&h).map(|d| Arc::clone(&d.value));
        meta.unprotect(h, UnprotectFlags::NONE)
            .map_err(|e| Error::Cache(e.error))?;
        let sb = *value?
            .downcast::<Superblock>()
            .map_err(|_| Error::Unsupported("superblock cached as another structure".into()))?;
        // Addresses count from the base address; a file whose base field is 0 while its
        // superblock follows a userblock counts from the superblock (as libhdf5 does).
        let base = if sb.base_address == 0 {
            at
        } else {
            sb.base_address
        };
        let root = match sb.root {
            Root::SymbolTableEntry(e) => e.object_header_address,
            Root::ObjectHeader(a) => a,
        };
        let chunks = ChunkCache::new(Arc::clone(&storage), settings.chunks.clone())?;
        let file = FileShared {
            storage,
            meta: Mutex::new(meta),
            chunks: Mutex::new(chunks),
            sizes: sb.sizes,
            base,
            superblock: sb,
            root,
            dir,
            sohm: Mutex::new(None),
            alloc: None,
            write: None,
            pagebuf,
            swmr: Default::default(),
        };
        file.enable_page_buffer_from_file()?;
        Ok((file, at))
    }

    /// The storage holding the file's bytes.
    pub fn storage(&self) -> &Arc<dyn h5_io::Storage> {
        &self.storage
    }

    /// The superblock.
    pub fn superblock(&self) -> &Superblock {
        &self.superblock
    }

    /// Relative address of the root group's object header.
    pub fn root_address(&self) -> u64 {
        self.root
    }

    /// The metadata cache's statistics.
    pub fn metadata_cache_stats(&self) -> Result<h5_metacache::Stats> {
        let meta = self.meta.lock().map_err(|_| Error::Poisoned)?;
        Ok(meta.stats().clone())
    }

    /// The chunk cache's statistics.
    pub fn chunk_cache_stats(&self) -> Result<h5_chunkcache::ChunkCacheStats> {
        let c = self.chunks.lock().map_err(|_| Error::Poisoned)?;
        Ok(c.stats())
    }

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
        let h = meta
            .protect(kind.id(), abs, &load, ProtectFlags::READ_ONLY)
            .map_err(cache_error)?;
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
