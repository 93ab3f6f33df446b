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
use crate::meta::{Decoded, FileSpace, Load, Meta, classes};

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
}

/// One open file.
pub struct FileShared {
    /// The file's bytes.
    pub(crate) storage: Arc<dyn h5_io::Storage>,
    /// Every metadata structure goes through this cache (shared with the chunk indexes of
    /// datasets being written, which must reach it while the file flushes as it is dropped).
    pub(crate) meta: Arc<Mutex<MetadataCache<Meta>>>,
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
    /// This file's own `Arc` (set by [`FileShared::shared`]), for work inside `&self` methods
    /// that registers layouts (which hold a `Weak` of the file).
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
        let len = storage.len()?;
        let at = superblock::locate(len, |off| {
            let mut sig = vec![0u8; superblock::SIGNATURE.len()];
            storage.read_at_zero_fill(off, &mut sig).map(|()| sig)
        })?
        .ok_or(Error::NotHdf5)?;
        let mut builder = CacheBuilder::new(
            Arc::clone(&storage),
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
            meta: Arc::new(Mutex::new(meta)),
            chunks: Mutex::new(chunks),
            sizes: sb.sizes,
            base,
            superblock: sb,
            root,
            dir,
            sohm: Mutex::new(None),
            alloc: None,
            write: None,
            this: std::sync::OnceLock::new(),
        };
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
        load_from(&self.meta, self.abs(addr)?, kind, addr, load)
    }

    /// The file's metadata cache with its address base and sizes, for structures that keep
    /// their own way to it (chunk indexes).
    pub(crate) fn meta_file(&self) -> MetaFile {
        MetaFile {
            cache: Arc::clone(&self.meta),
            sizes: self.sizes,
            base: self.base,
        }
    }

    /// The absolute file offset of relative address `addr`.
    pub(crate) fn abs(&self, addr: u64) -> Result<u64> {
        absolute(self.base, addr)
    }
}

/// Loads the structure of `kind` at absolute `abs` (relative `rel`, for messages) through
/// `cache` and returns its value as a `T` (see [`FileShared::load`]).
///
/// The cache's lock is not held during a load's I/O: on a miss the load is detached from the
/// cache under the lock, run without it, and its result protected under the lock again, so
/// loads of different structures by different threads overlap. The first copy of an entry to
/// reach the cache wins (a thread that loaded the same structure meanwhile uses the cached one);
/// hits and misses are counted as one protect each (`MetadataCache::protect_loaded`).
fn load_from<T: Any + Send + Sync>(
    cache: &Mutex<MetadataCache<Meta>>,
    abs: u64,
    kind: MetadataKind,
    rel: u64,
    load: Load,
) -> Result<Arc<T>> {
    let mut meta = cache.lock().map_err(|_| Error::Poisoned)?;
    let h = if meta.contains(abs) {
        meta.protect(kind.id(), abs, &load, ProtectFlags::READ_ONLY)
    } else {
        let detached = meta.detach_load(kind.id(), abs).map_err(cache_error)?;
        drop(meta);
        let loaded = detached.run(&load).map_err(cache_error)?;
        meta = cache.lock().map_err(|_| Error::Poisoned)?;
        meta.protect_loaded(loaded, &load, ProtectFlags::READ_ONLY)
    }
    .map_err(cache_error)?;
    let value = meta.icr(&h).map(|d| Arc::clone(&d.value));
    meta.unprotect(h, UnprotectFlags::NONE)
        .map_err(|e| Error::Cache(e.error))?;
    downcast(value?, kind, rel)
}

/// The cached `value` of the `kind` entry at relative `rel` as a `T`.
fn downcast<T: Any + Send + Sync>(
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

/// One file's metadata cache and how relative addresses reach it; cheap to clone. A chunk
/// index keeps one: its layout must reach the cache even while the file is dropped (and
/// flushed), when no handle to the file is left.
#[derive(Clone)]
pub(crate) struct MetaFile {
    /// The cache.
    pub(crate) cache: Arc<Mutex<MetadataCache<Meta>>>,
    /// Sizes of addresses and lengths.
    pub(crate) sizes: Sizes,
    /// Absolute offset of relative address 0.
    pub(crate) base: u64,
}

impl std::fmt::Debug for MetaFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaFile")
            .field("sizes", &self.sizes)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl MetaFile {
    /// The absolute file offset of relative address `addr`.
    pub(crate) fn abs(&self, addr: u64) -> Result<u64> {
        absolute(self.base, addr)
    }

    /// [`FileShared::load`] through this handle.
    pub(crate) fn load<T: Any + Send + Sync>(
        &self,
        kind: MetadataKind,
        addr: u64,
        load: Load,
    ) -> Result<Arc<T>> {
        load_from(&self.cache, self.abs(addr)?, kind, addr, load)
    }

    /// Locks the cache for a change of several entries.
    pub(crate) fn txn(&self) -> Result<MetaTxn<'_>> {
        Ok(MetaTxn {
            cache: self.cache.lock().map_err(|_| Error::Poisoned)?,
            base: self.base,
            held: Vec::new(),
        })
    }
}

fn absolute(base: u64, addr: u64) -> Result<u64> {
    base.checked_add(addr).ok_or_else(|| {
        Error::Format(h5_format::FormatError::Corrupted {
            structure: "address",
            address: addr,
            reason: "address overflows the file".into(),
        })
    })
}

/// A protection held by a [`MetaTxn`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot(usize);

struct Held {
    abs: u64,
    handle: Option<h5_metacache::ProtectHandle>,
    dirtied: bool,
}

/// A change of several entries of the locked metadata cache (protect → change →
/// unprotect(dirtied)). Invariants: an entry is protected read-write at most once (protecting
/// it again returns the same [`Slot`]); every protection is released when the transaction ends
/// ([`MetaTxn::finish`], or a drop, which loses errors), with `DIRTIED` exactly when its value
/// was changed.
pub(crate) struct MetaTxn<'a> {
    cache: std::sync::MutexGuard<'a, MetadataCache<Meta>>,
    base: u64,
    held: Vec<Held>,
}

impl MetaTxn<'_> {
    /// The absolute offset of relative `addr`.
    fn abs(&self, addr: u64) -> Result<u64> {
        absolute(self.base, addr)
    }

    fn handle(&self, slot: Slot) -> Result<&h5_metacache::ProtectHandle> {
        self.held
            .get(slot.0)
            .and_then(|h| h.handle.as_ref())
            .ok_or_else(|| Error::Unsupported("a released metadata protection".into()))
    }

    /// Protects the `kind` entry at relative `addr` read-write (loaded with `load` on a miss)
    /// and returns its slot and current value.
    pub(crate) fn protect<T: Any + Send + Sync>(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: &Load,
    ) -> Result<(Slot, Arc<T>)> {
        let abs = self.abs(addr)?;
        let slot = match self.held.iter().position(|h| h.abs == abs) {
            Some(i) => Slot(i),
            None => {
                let h = self
                    .cache
                    .protect(kind.id(), abs, load, ProtectFlags::NONE)
                    .map_err(cache_error)?;
                self.held.push(Held {
                    abs,
                    handle: Some(h),
                    dirtied: false,
                });
                Slot(self.held.len() - 1)
            }
        };
        Ok((slot, self.value(slot, kind, addr)?))
    }

    /// The current value of a protected entry.
    fn value<T: Any + Send + Sync>(
        &self,
        slot: Slot,
        kind: MetadataKind,
        addr: u64,
    ) -> Result<Arc<T>> {
        let v = self
            .cache
            .icr(self.handle(slot)?)
            .map_err(cache_error)?
            .value
            .clone();
        downcast(v, kind, addr)
    }

    /// Changes the value of a protected entry with `f` (cloning it only when a reader still
    /// holds it), gives it `encode` (an entry loaded for reading has none) and marks it
    /// dirtied; returns what `f` returned and the new value.
    pub(crate) fn modify<T: Any + Send + Sync + Clone, R>(
        &mut self,
        slot: Slot,
        encode: &crate::meta::EncodeFn,
        f: impl FnOnce(&mut T) -> R,
    ) -> Result<(R, Arc<T>)> {
        let h = self
            .held
            .get(slot.0)
            .and_then(|h| h.handle.as_ref())
            .ok_or_else(|| Error::Unsupported("a released metadata protection".into()))?;
        let icr = self.cache.icr_mut(h).map_err(cache_error)?;
        let placeholder: Arc<dyn Any + Send + Sync> = Arc::new(());
        let value = std::mem::replace(&mut icr.value, placeholder);
        let mut typed = match value.downcast::<T>() {
            Ok(t) => t,
            Err(v) => {
                icr.value = v;
                return Err(Error::Unsupported(
                    "a metadata entry changed as another structure".into(),
                ));
            }
        };
        let r = f(Arc::make_mut(&mut typed));
        icr.value = typed.clone();
        icr.encode = Some(Arc::clone(encode));
        self.held[slot.0].dirtied = true;
        Ok((r, typed))
    }

    /// Inserts a new structure at relative `addr` (dirty; its space allocated by the caller).
    pub(crate) fn insert(&mut self, kind: MetadataKind, addr: u64, value: Decoded) -> Result<()> {
        let abs = self.abs(addr)?;
        self.cache
            .insert(kind.id(), abs, value, h5_metacache::InsertFlags::NONE)
            .map_err(cache_error)
    }

    /// Makes the protected `parent` a flush-dependency parent of the resident entry at
    /// relative `child` (written first), unless it already is.
    pub(crate) fn depend(&mut self, parent: Slot, child: u64) -> Result<()> {
        let p = self.held.get(parent.0).map(|h| h.abs).ok_or_else(|| {
            Error::Unsupported("a flush dependency on a released protection".into())
        })?;
        let c = self.abs(child)?;
        if !self.cache.contains(c) || self.cache.flush_dependency_parents(c).contains(&p) {
            return Ok(());
        }
        self.cache
            .create_flush_dependency(p, c)
            .map_err(cache_error)
    }

    /// Removes the `kind` entry at relative `addr` from the cache without writing it (if
    /// cached; its flush-dependency children must be gone).
    pub(crate) fn expunge(&mut self, kind: MetadataKind, addr: u64) -> Result<()> {
        let abs = self.abs(addr)?;
        if self.cache.contains(abs) {
            self.cache
                .expunge(kind.id(), abs, h5_metacache::ExpungeFlags::NONE)
                .map_err(cache_error)?;
        }
        Ok(())
    }

    /// Releases one protection now (so that the entry can be expunged or evicted).
    pub(crate) fn release(&mut self, slot: Slot) -> Result<()> {
        let Some(held) = self.held.get_mut(slot.0) else {
            return Ok(());
        };
        let flags = if held.dirtied {
            UnprotectFlags::DIRTIED
        } else {
            UnprotectFlags::NONE
        };
        held.abs = u64::MAX;
        match held.handle.take() {
            Some(h) => self
                .cache
                .unprotect(h, flags)
                .map(|_| ())
                .map_err(|e| Error::Cache(e.error)),
            None => Ok(()),
        }
    }

    /// Ends the transaction, releasing every protection; reports the first error.
    pub(crate) fn finish(mut self) -> Result<()> {
        let mut first = Ok(());
        for i in 0..self.held.len() {
            let r = self.release(Slot(i));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

impl Drop for MetaTxn<'_> {
    fn drop(&mut self) {
        for i in 0..self.held.len() {
            let _ = self.release(Slot(i));
        }
    }
}
