//! The state shared by every handle of one open file: storage, the metadata cache, the chunk
//! cache and the superblock's constants.

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use h5_chunkcache::{ChunkCache, ChunkCacheConfig};
use h5_format::Sizes;
use h5_format::superblock::{self, Root, Superblock};
use h5_io::{Storage, StorageExt};
use h5_metacache::{
    CacheBuilder, CacheConfig, MetadataCache, MetadataKind, ProtectFlags, UnprotectFlags,
};

use crate::access::{CacheAccess, CacheHandle, SharedCache};
use crate::error::{Error, Result};
use crate::guard::GuardedStorage;
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
    /// Open a file whose superblock (version 3) says a writer has it open — or died without
    /// closing it — instead of refusing it with [`Error::OpenForWriting`] (libhdf5's
    /// behaviour, which `h5clear -s` / `h5 clear` undoes). The data may be inconsistent if the
    /// writer is still running or crashed mid-flush.
    pub ignore_open_for_writing: bool,
    /// Make every flush durable (`fsync`, in the order the rollback journal needs to survive
    /// power loss). Off by default, as in libhdf5: a flush then guarantees that a killed
    /// process leaves the flushed state, not that a power cut does.
    pub sync: bool,
    /// Read a file that a legacy SWMR writer (libhdf5's `H5F_ACC_SWMR_WRITE`, h5py's
    /// `swmr_mode`) has open: a version 3 superblock with both the write and the SWMR-write
    /// status flags is accepted, as libhdf5's `H5F_ACC_SWMR_READ` does (one flag without the
    /// other is still refused). Follow the writer with `Dataset::refresh`.
    pub swmr_read: bool,
}

/// Superblock (version 3) status flag: a writer has the file open.
pub const STATUS_WRITE_ACCESS: u32 = 0x01;
/// Superblock (version 3) status flag: a SWMR writer has the file open.
pub const STATUS_SWMR_WRITE: u32 = 0x04;

/// One open file.
pub struct FileShared {
    /// The file's bytes: every read and write of the engine and its caches goes through this
    /// one guard (failed and closed states, `guard.rs`).
    pub(crate) storage: Arc<GuardedStorage>,
    /// Every metadata structure goes through this cache (shared with the chunk indexes of
    /// datasets being written, which must reach it while the file flushes as it is dropped).
    pub(crate) meta: SharedCache,
    /// All raw data goes through this cache (hits are served under its shared lock).
    pub(crate) chunks: h5_chunkcache::SharedChunkCache,
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
    /// Where the file was opened from, for error messages (unset: storage without a path).
    pub(crate) path: OnceLock<PathBuf>,
    /// The current description of every dataset opened, by object header address: what every
    /// handle of the dataset reads its shape from (see [`crate::dataset::Descriptions`]).
    pub(crate) descriptions: crate::dataset::Descriptions,
    /// The group header last decoded on a path walk (read-only files).
    pub(crate) group_header_memo: crate::object::HeaderMemo,
    /// The space allocator of a writable file (`None`: read-only).
    pub(crate) alloc: Option<Arc<Mutex<crate::write::alloc::FileAlloc>>>,
    /// What a writable file keeps besides the caches (`None`: read-only).
    pub(crate) write: Option<Mutex<crate::write::WriteState>>,
    /// The page buffer both caches reach the file through, if configured.
    pub(crate) pagebuf: Option<Arc<h5_pagebuf::PageBuffer>>,
    /// VFD SWMR state, set once right after opening.
    pub(crate) swmr: crate::swmr::SwmrSlot,
    /// Legacy SWMR-writing state (`crate::legacy_swmr`).
    pub(crate) legacy_swmr: crate::legacy_swmr::LegacySwmr,
    /// Flushes are made durable ([`CacheSettings::sync`]).
    pub(crate) sync: bool,
    /// Held while a dataset's layout is built and registered with the chunk cache: two threads
    /// registering one dataset build one layout (one writable index, one late allocation).
    pub(crate) registering: Mutex<()>,
    /// This file's own `Arc` (set by [`FileShared::shared`]), for structures that outlive a
    /// call (layouts reaching their index, work inside `&self` methods that registers layouts).
    pub(crate) this: std::sync::OnceLock<std::sync::Weak<FileShared>>,
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

/// The metadata cache of a file on `storage`: `settings`' configuration and checks; it writes
/// only while the file is not in the failed state (so that reads of a failed file evict clean
/// entries and grow rather than try to write dirty ones).
pub(crate) fn build_metadata_cache(
    storage: &Arc<GuardedStorage>,
    settings: &CacheSettings,
    ctx: FileSpace,
) -> Result<MetadataCache<Meta>> {
    let guard = Arc::clone(storage);
    let mut builder = CacheBuilder::new(Arc::clone(storage) as Arc<dyn Storage>, classes(), ctx)
        .check_write_permitted(move || !guard.is_failed());
    if let Some(c) = &settings.metadata {
        builder = builder.config(c.clone());
    }
    let mut meta = builder.build()?;
    meta.set_invariant_checks(settings.invariant_checks);
    Ok(meta)
}

impl FileShared {
    /// Opens the HDF5 file in `storage`: finds the superblock (after any userblock), loads it
    /// through the metadata cache and sets up both caches.
    pub fn open(
        storage: Arc<dyn Storage>,
        settings: &CacheSettings,
        dir: Option<std::path::PathBuf>,
    ) -> Result<Arc<FileShared>> {
        Ok(Self::open_unshared(storage, settings, dir)?.0.shared())
    }

    /// [`FileShared::open`] before sharing; also returns the superblock's absolute address.
    pub(crate) fn open_unshared(
        storage: Arc<dyn Storage>,
        settings: &CacheSettings,
        dir: Option<std::path::PathBuf>,
    ) -> Result<(FileShared, u64)> {
        let (storage, meta_storage, pagebuf) = crate::pagebuf::faces(storage, settings)?;
        let len = storage.len()?;
        let at = superblock::locate(len, |off| {
            let mut sig = vec![0u8; superblock::SIGNATURE.len()];
            storage.read_at_zero_fill(off, &mut sig).map(|()| sig)
        })?
        .ok_or(Error::NotHdf5)?;
        let mut meta = build_metadata_cache(
            &meta_storage,
            settings,
            FileSpace {
                eoa: len,
                alloc: None,
                base: 0,
            },
        )?;
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
        // libhdf5 honours the status flags from superblock version 3 on (version 2 writers
        // set them too, and libhdf5 ignores them there).
        let status = sb.consistency_flags & (STATUS_WRITE_ACCESS | STATUS_SWMR_WRITE);
        // A SWMR reader (legacy or VFD) accepts a writer that marked both flags (libhdf5's
        // H5F_ACC_SWMR_READ check).
        let swmr_reader = settings.swmr_read || settings.swmr.as_ref().is_some_and(|c| !c.writer);
        let swmr_marked = status == STATUS_WRITE_ACCESS | STATUS_SWMR_WRITE;
        if sb.version >= 3
            && status != 0
            && !settings.ignore_open_for_writing
            && !(swmr_reader && swmr_marked)
        {
            return Err(Error::OpenForWriting {
                flags: sb.consistency_flags,
            });
        }
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
        let chunks = ChunkCache::new(
            Arc::clone(&storage) as Arc<dyn Storage>,
            settings.chunks.clone(),
        )?;
        let file = FileShared {
            storage,
            meta: Arc::new(Mutex::new(meta)),
            chunks: h5_chunkcache::SharedChunkCache::new(chunks),
            sizes: sb.sizes,
            base,
            superblock: sb,
            root,
            dir,
            sohm: Mutex::new(None),
            path: OnceLock::new(),
            descriptions: Default::default(),
            group_header_memo: Default::default(),
            alloc: None,
            write: None,
            pagebuf,
            swmr: Default::default(),
            legacy_swmr: Default::default(),
            sync: settings.sync,
            registering: Mutex::new(()),
            this: std::sync::OnceLock::new(),
        };
        file.enable_page_buffer_from_file()?;
        Ok((file, at))
    }

    /// Shares the file, remembering its `Arc` (see [`FileShared::arc`]).
    pub(crate) fn shared(self) -> Arc<FileShared> {
        let arc = Arc::new(self);
        let _ = arc.this.set(Arc::downgrade(&arc));
        arc
    }

    /// The file's own `Arc` (`None` while it is being built or dropped).
    pub(crate) fn arc(&self) -> Option<Arc<FileShared>> {
        self.this.get().and_then(std::sync::Weak::upgrade)
    }

    /// The storage holding the file's bytes, behind the engine's guard.
    pub fn storage(&self) -> &Arc<GuardedStorage> {
        &self.storage
    }

    /// `Ok` until the file is closed ([`Error::Closed`] after).
    pub fn check_open(&self) -> Result<()> {
        self.storage.check_open()
    }

    /// Records the path the file was opened from (for error messages); only the first call
    /// counts.
    pub fn set_path(&self, path: &Path) {
        let _ = self.path.set(path.to_path_buf());
    }

    /// The path the file was opened from, if known.
    pub fn path(&self) -> Option<&Path> {
        self.path.get().map(PathBuf::as_path)
    }

    /// The file's name for messages: its path, or "(storage)" for storage without one.
    pub fn display_name(&self) -> String {
        self.path()
            .map_or_else(|| "(storage)".to_owned(), |p| p.display().to_string())
    }

    /// The current description of the dataset at `address`, as the last handle opened or
    /// resized it (`None`: no handle opened it yet).
    ///
    /// A VFD SWMR reader forgets every description at an end of tick that brought a new index
    /// (the writer may have resized or rewritten the dataset); the next call reads it again
    /// from the object header (`None` if that fails: the caller keeps what it had).
    pub fn dataset_info(&self, address: u64) -> Option<Arc<crate::dataset::DatasetInfo>> {
        self.dataset_slot(address).map(|s| s.info())
    }

    /// The slot (the current description, shared by every handle) of the dataset at
    /// `address`, as [`FileShared::dataset_info`] finds its description.
    pub fn dataset_slot(&self, address: u64) -> Option<Arc<crate::dataset::DatasetSlot>> {
        if let Some(s) = self.descriptions.slot(address) {
            return Some(s);
        }
        if self.is_swmr() && self.write.is_none() {
            let oh = crate::object::ObjectHeader::load(self, address).ok()?;
            let info = crate::dataset::DatasetInfo::from_header(self, &oh).ok()?;
            return Some(self.descriptions.put(info));
        }
        None
    }

    /// Records `info` as the current description of its dataset and returns it shared.
    pub fn set_dataset_info(
        &self,
        info: crate::dataset::DatasetInfo,
    ) -> Arc<crate::dataset::DatasetInfo> {
        self.descriptions.put(info).info()
    }

    /// Records `info` as the current description of its dataset (seen by every holder of the
    /// dataset's slot) and returns the slot, for a handle to hold.
    pub fn set_dataset_slot(
        &self,
        info: crate::dataset::DatasetInfo,
    ) -> Arc<crate::dataset::DatasetSlot> {
        self.descriptions.put(info)
    }

    /// Whether the superblock says a writer has the file open (status flags of a version 3
    /// superblock); such a file opens only with [`CacheSettings::ignore_open_for_writing`].
    pub fn marked_open_for_writing(&self) -> bool {
        self.superblock.version >= 3
            && self.superblock.consistency_flags & (STATUS_WRITE_ACCESS | STATUS_SWMR_WRITE) != 0
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
        self.load_with(kind, addr, || load)
    }

    /// [`FileShared::load`] with a loader built by `load` only on a miss (a hit allocates
    /// nothing for it).
    pub(crate) fn load_with<T: Any + Send + Sync>(
        &self,
        kind: MetadataKind,
        addr: u64,
        load: impl FnOnce() -> Load,
    ) -> Result<Arc<T>> {
        downcast(self.load_value(kind, addr, load)?, kind, addr)
    }

    /// The metadata cache locked for one operation on the file's structures.
    pub(crate) fn cache(&self) -> Result<CacheAccess<'_>> {
        self.check_open()?;
        CacheAccess::locked(&self.meta, self.sizes, self.base)
    }

    /// The file's metadata cache with its address base and sizes, for structures that keep
    /// their own way to it (chunk indexes, which must reach it while the file is dropped).
    pub(crate) fn cache_handle(&self) -> CacheHandle {
        CacheHandle::new(Arc::clone(&self.meta), self.sizes, self.base)
    }

    /// [`FileShared::load`] with the value left type-erased.
    pub(crate) fn load_value(
        &self,
        kind: MetadataKind,
        addr: u64,
        load: impl FnOnce() -> Load,
    ) -> Result<Arc<dyn Any + Send + Sync>> {
        self.check_open()?;
        load_value_from(&self.meta, self.abs(addr)?, kind, load)
    }

    /// The absolute file offset of relative address `addr`.
    pub(crate) fn abs(&self, addr: u64) -> Result<u64> {
        absolute(self.base, addr)
    }
}

/// Loads the structure of `kind` at absolute `abs` (relative `rel`, for messages) through
/// `cache` and returns its value as a `T` (see [`FileShared::load`]).
pub(crate) fn load_from<T: Any + Send + Sync>(
    cache: &Mutex<MetadataCache<Meta>>,
    abs: u64,
    kind: MetadataKind,
    rel: u64,
    load: impl FnOnce() -> Load,
) -> Result<Arc<T>> {
    downcast(load_value_from(cache, abs, kind, load)?, kind, rel)
}

/// Loads the structure of `kind` at absolute `abs` through `cache` and returns its value
/// type-erased.
///
/// The cache's lock is not held during a load's I/O: on a miss the load is detached from the
/// cache under the lock, run without it, and its result protected under the lock again, so
/// loads of different structures by different threads overlap. The first copy of an entry to
/// reach the cache wins (a thread that loaded the same structure meanwhile uses the cached one);
/// hits and misses are counted as one protect each (`MetadataCache::protect_loaded`).
///
/// `load` builds the loader only on a miss: a hit (most reads) passes [`Load::for_hit`].
fn load_value_from(
    cache: &Mutex<MetadataCache<Meta>>,
    abs: u64,
    kind: MetadataKind,
    load: impl FnOnce() -> Load,
) -> Result<Arc<dyn Any + Send + Sync>> {
    let mut meta = cache.lock().map_err(|_| Error::Poisoned)?;
    // A cached entry (most reads): protect and unprotect in one step.
    if let Some(value) = meta
        .read_hit(kind.id(), abs, |d| Arc::clone(&d.value))
        .map_err(cache_error)?
    {
        return Ok(value);
    }
    let h = if meta.contains(abs) {
        meta.protect(kind.id(), abs, Load::for_hit(), ProtectFlags::READ_ONLY)
    } else {
        let detached = meta.detach_load(kind.id(), abs).map_err(cache_error)?;
        drop(meta);
        let load = load();
        let loaded = detached.run(&load).map_err(cache_error)?;
        meta = cache.lock().map_err(|_| Error::Poisoned)?;
        meta.protect_loaded(loaded, &load, ProtectFlags::READ_ONLY)
    }
    .map_err(cache_error)?;
    let value = meta.icr(&h).map(|d| Arc::clone(&d.value));
    meta.unprotect(h, UnprotectFlags::NONE)
        .map_err(|e| Error::Cache(e.error))?;
    Ok(value?)
}

/// The cached `value` of the `kind` entry at relative `rel` as a `T`.
pub(crate) fn downcast<T: Any + Send + Sync>(
    value: Arc<dyn Any + Send + Sync>,
    kind: MetadataKind,
    rel: u64,
) -> Result<Arc<T>> {
    value.downcast::<T>().map_err(|_| {
        Error::Unsupported(format!(
            "{} at {rel:#x} was already cached as another structure",
            kind.name()
        ))
    })
}

pub(crate) fn absolute(base: u64, addr: u64) -> Result<u64> {
    base.checked_add(addr).ok_or_else(|| {
        Error::Format(h5_format::FormatError::Corrupted {
            structure: "address",
            address: addr,
            reason: "address overflows the file".into(),
        })
    })
}
