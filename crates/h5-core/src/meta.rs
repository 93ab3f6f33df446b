//! The engine as a metadata-cache client (DESIGN.md, "the one rule").
//!
//! Every on-disk metadata structure is loaded through one [`MetadataCache`]: one class per
//! [`MetadataKind`], all with the same behaviour — the caller's [`Load`] says how many bytes to
//! read first, how to learn the real size from that prefix, and how to decode the bytes with
//! `h5-format`. The decoded value is kept behind an `Arc` so a reader can protect an entry, clone
//! the value out and unprotect at once (read-only access never holds the cache).

use std::any::Any;
use std::sync::{Arc, Mutex, MutexGuard};

use h5_format::{FormatError, Sizes};
use h5_metacache::{
    CacheTypes, Class, ClassFlags, ClassInfo, ClientError, Deserialized, ExpungeFlags, FileContext,
    InsertFlags, MemType, MetadataCache, MetadataKind, ProtectFlags, ProtectHandle, UnprotectFlags,
};

use crate::error::{Error, Result};
use crate::file::cache_error;
use crate::write::alloc::SpaceKind;

/// The engine's cache types.
#[derive(Debug)]
pub struct Meta;

impl CacheTypes for Meta {
    type Icr = Decoded;
    type Udata = Load;
    type Ctx = FileSpace;
}

/// Encodes a cached value (the `Decoded::value` it belongs to) into its on-disk image.
pub type EncodeFn =
    Arc<dyn Fn(&(dyn Any + Send + Sync)) -> Result<Vec<u8>, FormatError> + Send + Sync>;

/// A decoded structure: its on-disk length and the value.
#[derive(Clone)]
pub struct Decoded {
    /// Bytes the structure occupies in the file.
    pub len: usize,
    /// The decoded value (an `h5-format` type).
    pub value: Arc<dyn Any + Send + Sync>,
    /// How to write the value back (`None`: a structure loaded for reading, never written).
    pub encode: Option<EncodeFn>,
}

impl Decoded {
    /// A structure written by this process: `value` occupies `len` bytes and `encode` produces
    /// exactly that many (checked when the cache writes it).
    pub fn writable<T: Any + Send + Sync>(
        len: usize,
        value: T,
        encode: impl Fn(&T) -> Result<Vec<u8>, FormatError> + Send + Sync + 'static,
    ) -> Self {
        Decoded {
            len,
            value: Arc::new(value),
            encode: Some(encoder(encode)),
        }
    }
}

/// The type-erased encoder of values of type `T` (a value of another type is an error).
pub fn encoder<T: Any + Send + Sync>(
    encode: impl Fn(&T) -> Result<Vec<u8>, FormatError> + Send + Sync + 'static,
) -> EncodeFn {
    Arc::new(move |v: &(dyn Any + Send + Sync)| {
        let v = v.downcast_ref::<T>().ok_or(FormatError::Unsupported {
            structure: "metadata entry",
            address: u64::MAX,
            what: "a cached value of another type than its encoder".into(),
        })?;
        encode(v)
    })
}

impl std::fmt::Debug for Decoded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoded")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// A decoder: the image (possibly longer than the structure for speculative loads) to the
/// decoded value and the structure's length.
pub type DecodeFn = Box<dyn Fn(&[u8]) -> Result<Decoded, FormatError> + Send + Sync>;

/// The real length of a structure from a prefix of its image.
pub type FinalLenFn = Box<dyn Fn(&[u8]) -> Result<usize, FormatError> + Send + Sync>;

/// How to load one structure (the cache's udata).
pub struct Load {
    /// Bytes to read first (clipped at the end of the file).
    pub initial: usize,
    /// The real length from the prefix, when the initial read is only a guess.
    pub final_len: Option<FinalLenFn>,
    /// The decoder.
    pub decode: DecodeFn,
}

impl Load {
    /// A structure of exactly `len` bytes decoded by `decode`, whose value is `T`.
    pub fn exact<T: Any + Send + Sync>(
        len: usize,
        decode: impl Fn(&[u8]) -> Result<T, FormatError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            initial: len,
            final_len: None,
            decode: Box::new(move |b| {
                let v = decode(b)?;
                Ok(Decoded {
                    len,
                    value: Arc::new(v),
                    encode: None,
                })
            }),
        }
    }

    /// A structure of exactly `len` bytes that can be changed and written back: decoded by
    /// `decode`, encoded by `encode` (which must produce `len` bytes, or the entry's new length
    /// after a resize).
    pub fn codec<T: Any + Send + Sync>(
        len: usize,
        decode: impl Fn(&[u8]) -> Result<T, FormatError> + Send + Sync + 'static,
        encode: impl Fn(&T) -> Result<Vec<u8>, FormatError> + Send + Sync + 'static,
    ) -> Self {
        let encode = Arc::new(encode);
        Self {
            initial: len,
            final_len: None,
            decode: Box::new(move |b| {
                let e = Arc::clone(&encode);
                Ok(Decoded::writable(len, decode(b)?, move |v: &T| e(v)))
            }),
        }
    }

    /// A structure whose length is learnt from a prefix of `guess` bytes by `final_len`; the
    /// decoder receives exactly the structure's bytes.
    pub fn sized<T: Any + Send + Sync>(
        guess: usize,
        final_len: impl Fn(&[u8]) -> Result<usize, FormatError> + Send + Sync + 'static,
        decode: impl Fn(&[u8]) -> Result<T, FormatError> + Send + Sync + 'static,
    ) -> Self {
        let final_len = Arc::new(final_len);
        let fl = Arc::clone(&final_len);
        Self {
            initial: guess,
            final_len: Some(Box::new(move |b| fl(b))),
            decode: Box::new(move |b| {
                let len = final_len(b)?;
                let image = b.get(..len).ok_or(FormatError::Truncated {
                    structure: "metadata image",
                    address: u64::MAX,
                    needed: len as u64,
                    available: b.len() as u64,
                })?;
                let v = decode(image)?;
                Ok(Decoded {
                    len,
                    value: Arc::new(v),
                    encode: None,
                })
            }),
        }
    }
}

/// The file context: for a file opened for reading the end of the file bounds every read and no
/// space is ever freed; a writable file's context is its space allocator.
#[derive(Clone, Debug)]
pub struct FileSpace {
    /// End of allocated space (the file's length for a read-only file).
    pub eoa: u64,
    /// The allocator of a writable file (relative addresses).
    pub alloc: Option<Arc<std::sync::Mutex<crate::write::alloc::FileAlloc>>>,
    /// The base address: the cache's addresses are absolute, the allocator's relative to it.
    pub base: u64,
}

impl FileContext for FileSpace {
    fn end_of_allocation(&self) -> u64 {
        match &self.alloc {
            Some(a) => a
                .lock()
                .map_or(self.eoa, |a| self.base.saturating_add(a.eoa())),
            None => self.eoa,
        }
    }

    fn free_file_space(&mut self, addr: u64, len: u64) -> Result<(), ClientError> {
        match &self.alloc {
            Some(a) => {
                let mut a = a.lock().map_err(|_| "the space allocator is poisoned")?;
                let rel = addr
                    .checked_sub(self.base)
                    .ok_or("freeing space below the base address")?;
                a.free(crate::write::alloc::SpaceKind::Meta, rel, len)
                    .map_err(|e| Box::new(e) as ClientError)
            }
            None => {
                Err(format!("file opened read-only: cannot free {len} bytes at {addr:#x}").into())
            }
        }
    }
}

/// One class per metadata kind; all behave the same (see the module doc).
struct FormatClass {
    info: ClassInfo,
}

impl Class<Meta> for FormatClass {
    fn info(&self) -> &ClassInfo {
        &self.info
    }

    fn get_initial_load_size(&self, udata: &Load) -> Result<usize, ClientError> {
        Ok(udata.initial)
    }

    fn get_final_load_size(
        &self,
        image: &[u8],
        udata: &Load,
    ) -> Result<Option<usize>, ClientError> {
        match &udata.final_len {
            Some(f) => Ok(Some(f(image)?)),
            None => Ok(None),
        }
    }

    fn deserialize(
        &self,
        image: &[u8],
        udata: &Load,
    ) -> Result<Deserialized<Decoded>, ClientError> {
        Ok(Deserialized::clean((udata.decode)(image)?))
    }

    fn image_len(&self, icr: &Decoded) -> Result<usize, ClientError> {
        Ok(icr.len)
    }

    fn serialize(
        &self,
        _cache: &mut MetadataCache<Meta>,
        icr: &mut Decoded,
        image: &mut [u8],
    ) -> Result<(), ClientError> {
        let Some(encode) = &icr.encode else {
            return Err(format!(
                "{} was loaded for reading and cannot be written",
                self.info.name
            )
            .into());
        };
        let bytes = encode(&*icr.value)?;
        if bytes.len() != image.len() {
            return Err(format!(
                "{} encodes to {} bytes but occupies {}",
                self.info.name,
                bytes.len(),
                image.len()
            )
            .into());
        }
        image.copy_from_slice(&bytes);
        Ok(())
    }
}

fn mem_type(k: MetadataKind) -> MemType {
    use MetadataKind as K;
    match k {
        K::Superblock | K::DriverInfo => MemType::Superblock,
        K::BTreeV1Node | K::BTreeV2Header | K::BTreeV2Internal | K::BTreeV2Leaf => MemType::BTree,
        K::LocalHeapPrefix
        | K::LocalHeapDataBlock
        | K::GlobalHeapCollection
        | K::FractalHeapHeader
        | K::FractalHeapDirectBlock
        | K::FractalHeapIndirectBlock => MemType::Heap,
        K::ObjectHeader | K::ObjectHeaderChunk => MemType::ObjectHeader,
        K::FreeSpaceHeader | K::FreeSpaceSections => MemType::FreeSpace,
        _ => MemType::Other,
    }
}

/// The class table: one class per [`MetadataKind`], in id order. Every class may be loaded
/// speculatively (its [`Load`] says whether the first read is exact).
pub fn classes() -> Vec<Arc<dyn Class<Meta>>> {
    MetadataKind::ALL
        .iter()
        .map(|k| {
            Arc::new(FormatClass {
                info: ClassInfo {
                    id: k.id(),
                    name: k.name(),
                    flags: ClassFlags::SPECULATIVE_LOAD,
                    mem_type: mem_type(*k),
                },
            }) as Arc<dyn Class<Meta>>
        })
        .collect()
}

/// A file's metadata cache, shared by the file and by the chunk-index layouts that change index
/// nodes while the chunk cache flushes (even as the file is dropped).
pub(crate) type SharedCache = Arc<Mutex<MetadataCache<Meta>>>;

/// What structure code needs to reach one file's metadata: the cache, the address and length
/// sizes, and the base address relative addresses count from. Cheap to clone.
#[derive(Clone)]
pub struct CacheHandle {
    /// The cache.
    pub(crate) cache: SharedCache,
    /// Sizes of addresses and lengths.
    pub(crate) sizes: Sizes,
    /// Absolute offset of relative address 0.
    pub(crate) base: u64,
}

impl std::fmt::Debug for CacheHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheHandle")
            .field("sizes", &self.sizes)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl CacheHandle {
    pub(crate) fn new(cache: SharedCache, sizes: Sizes, base: u64) -> Self {
        CacheHandle { cache, sizes, base }
    }

    /// Locks the cache for one operation.
    pub(crate) fn lock(&self) -> Result<CacheAccess<'_>> {
        CacheAccess::locked(&self.cache, self.sizes, self.base)
    }

    /// The absolute file offset of relative address `addr`.
    pub(crate) fn abs(&self, addr: u64) -> Result<u64> {
        crate::file::absolute(self.base, addr)
    }

    /// [`crate::file::FileShared::load`] through this handle (the lock is not held during the
    /// load's I/O).
    pub(crate) fn load<T: Any + Send + Sync>(
        &self,
        kind: MetadataKind,
        addr: u64,
        load: Load,
    ) -> Result<Arc<T>> {
        crate::file::load_from(&self.cache, self.abs(addr)?, kind, addr, load)
    }
}

/// The metadata cache locked for one operation on a file's structures. A change is protect →
/// change → unprotect(dirtied) on each entry it touches: at once for one entry
/// ([`CacheAccess::modify`]), or with the entry held in a [`Slot`] while the operation needs it
/// ([`CacheAccess::protect`], [`CacheAccess::change`], [`CacheAccess::release`]). The lock is
/// held for the whole operation, so other threads see it whole. Addresses are relative (as
/// stored in the file).
///
/// Invariants: an entry is held read-write at most once (protecting it again returns the same
/// slot); every held entry is released when the operation ends ([`CacheAccess::finish`], or a
/// drop, which loses errors), dirtied exactly when its value was changed. Code holding a
/// `CacheAccess` must not call anything that locks the cache again.
pub(crate) struct CacheAccess<'a> {
    meta: MutexGuard<'a, MetadataCache<Meta>>,
    /// Sizes of addresses and lengths.
    pub(crate) sizes: Sizes,
    base: u64,
    held: Vec<Held>,
}

/// An entry a [`CacheAccess`] holds protected read-write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot(usize);

struct Held {
    abs: u64,
    handle: Option<ProtectHandle>,
    dirtied: bool,
}

fn wrong_type(kind: MetadataKind, addr: u64) -> Error {
    Error::Unsupported(format!(
        "{} at {addr:#x} was already cached as another structure",
        kind.name()
    ))
}

impl<'a> CacheAccess<'a> {
    pub(crate) fn locked(cache: &'a SharedCache, sizes: Sizes, base: u64) -> Result<Self> {
        Ok(CacheAccess {
            meta: cache.lock().map_err(|_| Error::Poisoned)?,
            sizes,
            base,
            held: Vec::new(),
        })
    }

    /// The absolute file offset of relative address `addr`.
    pub(crate) fn abs(&self, addr: u64) -> Result<u64> {
        crate::file::absolute(self.base, addr)
    }

    /// The relative address of absolute file offset `abs`.
    pub(crate) fn rel(&self, abs: u64) -> Result<u64> {
        abs.checked_sub(self.base)
            .ok_or_else(|| Error::Unsupported(format!("{abs:#x} lies below the base address")))
    }

    /// The value of the structure of `kind` at `addr` (loaded with `load` when not cached),
    /// which must be a `T`; protected read-only only while the value is cloned out.
    pub(crate) fn read<T: Any + Send + Sync>(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: &Load,
    ) -> Result<Arc<T>> {
        let abs = self.abs(addr)?;
        let meta = &mut *self.meta;
        let h = meta
            .protect(kind.id(), abs, load, ProtectFlags::READ_ONLY)
            .map_err(cache_error)?;
        let value = meta.icr(&h).map(|d| Arc::clone(&d.value));
        meta.unprotect(h, UnprotectFlags::NONE)
            .map_err(|e| Error::Cache(e.error))?;
        value?.downcast::<T>().map_err(|_| wrong_type(kind, addr))
    }

    /// Protects the structure at `addr` for writing, lets `change` change its value (a `T`)
    /// and unprotects it dirtied. The change works on a copy, so an error leaves the entry
    /// unchanged and clean.
    pub(crate) fn modify<T: Any + Send + Sync + Clone, R>(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: &Load,
        change: impl FnOnce(&mut T) -> Result<R>,
    ) -> Result<R> {
        self.modify_sized(kind, addr, load, |v: &mut T, _| change(v))
    }

    /// [`CacheAccess::modify`] where `change` may also change the entry's length in the file
    /// (the cache entry is resized; the encoder must produce the new length).
    pub(crate) fn modify_sized<T: Any + Send + Sync + Clone, R>(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: &Load,
        change: impl FnOnce(&mut T, &mut usize) -> Result<R>,
    ) -> Result<R> {
        let abs = self.abs(addr)?;
        let meta = &mut *self.meta;
        let h = meta
            .protect(kind.id(), abs, load, ProtectFlags::NONE)
            .map_err(cache_error)?;
        let changed = (|| -> Result<(R, Arc<T>, usize, usize)> {
            let icr = meta.icr(&h)?;
            let current = Arc::clone(&icr.value)
                .downcast::<T>()
                .map_err(|_| wrong_type(kind, addr))?;
            let mut value = T::clone(&current);
            let mut len = icr.len;
            let old_len = len;
            let r = change(&mut value, &mut len)?;
            if len == 0 {
                return Err(Error::Unsupported(format!(
                    "{} at {addr:#x} changed to zero bytes",
                    kind.name()
                )));
            }
            Ok((r, Arc::new(value), old_len, len))
        })();
        let (r, value, old_len, len) = match changed {
            Ok(c) => c,
            Err(e) => {
                let _ = meta.unprotect(h, UnprotectFlags::NONE);
                return Err(e);
            }
        };
        let stored = (|| -> Result<()> {
            if len != old_len {
                meta.resize(abs, len).map_err(cache_error)?;
            }
            let icr = meta.icr_mut(&h)?;
            icr.value = value;
            icr.len = len;
            Ok(())
        })();
        match stored {
            Ok(()) => {
                meta.unprotect(h, UnprotectFlags::DIRTIED)
                    .map_err(|e| Error::Cache(e.error))?;
                Ok(r)
            }
            Err(e) => {
                let _ = meta.unprotect(h, UnprotectFlags::NONE);
                Err(e)
            }
        }
    }

    /// Replaces the value of the structure at `addr` by `value` (same length), or inserts it
    /// when not cached: a new structure, or a whole new value for one whose old value need not
    /// be read.
    pub(crate) fn put(&mut self, kind: MetadataKind, addr: u64, value: Decoded) -> Result<()> {
        let abs = self.abs(addr)?;
        let meta = &mut *self.meta;
        if !meta.contains(abs) {
            return meta
                .insert(kind.id(), abs, value, InsertFlags::NONE)
                .map_err(cache_error);
        }
        let never = Load::exact(value.len, move |_| -> Result<(), FormatError> {
            Err(FormatError::Unsupported {
                structure: "metadata entry",
                address: abs,
                what: "reloading an entry being replaced".into(),
            })
        });
        let h = meta
            .protect(kind.id(), abs, &never, ProtectFlags::NONE)
            .map_err(cache_error)?;
        let replaced = match meta.icr_mut(&h) {
            Ok(icr) if icr.len == value.len => {
                *icr = value;
                Ok(())
            }
            Ok(icr) => Err(Error::Unsupported(format!(
                "{} at {abs:#x} changed size from {} to {}",
                kind.name(),
                icr.len,
                value.len
            ))),
            Err(e) => Err(e.into()),
        };
        match replaced {
            Ok(()) => meta
                .unprotect(h, UnprotectFlags::DIRTIED)
                .map(|_| ())
                .map_err(|e| Error::Cache(e.error)),
            Err(e) => {
                let _ = meta.unprotect(h, UnprotectFlags::NONE);
                Err(e)
            }
        }
    }

    /// Removes the structure at `addr` from the cache without writing it (nothing happens
    /// when it is not cached); its file space is not freed.
    pub(crate) fn forget(&mut self, kind: MetadataKind, addr: u64) -> Result<()> {
        let abs = self.abs(addr)?;
        let meta = &mut *self.meta;
        if meta.contains(abs) {
            meta.expunge(kind.id(), abs, ExpungeFlags::NONE)
                .map_err(cache_error)?;
        }
        Ok(())
    }

    /// Deletes the structure of `len` bytes at `addr`: out of the cache, its space freed.
    pub(crate) fn delete(&mut self, kind: MetadataKind, addr: u64, len: u64) -> Result<()> {
        self.forget(kind, addr)?;
        self.free(SpaceKind::Meta, addr, len)
    }

    fn alloc(&self) -> Result<Arc<Mutex<crate::write::alloc::FileAlloc>>> {
        self.meta.ctx().alloc.clone().ok_or(Error::ReadOnly)
    }

    /// `len` bytes of new metadata space (relative address).
    pub(crate) fn allocate(&mut self, len: u64) -> Result<u64> {
        let a = self.alloc()?;
        let mut a = a.lock().map_err(|_| Error::Poisoned)?;
        Ok(a.allocate(SpaceKind::Meta, len)?)
    }

    /// Gives `len` bytes of file space at `addr` back.
    pub(crate) fn free(&mut self, kind: SpaceKind, addr: u64, len: u64) -> Result<()> {
        let a = self.alloc()?;
        let mut a = a.lock().map_err(|_| Error::Poisoned)?;
        Ok(a.free(kind, addr, len)?)
    }

    /// Grows the metadata block `addr..addr + len` by `extra` bytes in place when the space
    /// after it is free; `false` when it cannot grow there.
    pub(crate) fn try_extend(&mut self, addr: u64, len: u64, extra: u64) -> Result<bool> {
        let a = self.alloc()?;
        let mut a = a.lock().map_err(|_| Error::Poisoned)?;
        Ok(a.try_extend(SpaceKind::Meta, addr, len, extra)?)
    }

    fn handle(&self, slot: Slot) -> Result<&ProtectHandle> {
        self.held
            .get(slot.0)
            .and_then(|h| h.handle.as_ref())
            .ok_or_else(|| Error::Unsupported("a released metadata protection".into()))
    }

    /// Holds the `kind` entry at relative `addr` protected read-write (loaded with `load` on a
    /// miss) and returns its slot and current value.
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
                    .meta
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
        let v = Arc::clone(&self.meta.icr(self.handle(slot)?)?.value);
        v.downcast::<T>()
            .map_err(|_| wrong_type(kind, addr))
            .map(|v| (slot, v))
    }

    /// Changes the value of a held entry with `f` (cloning it only when a reader still holds
    /// it), gives it `encode` (an entry loaded for reading has none) and marks it dirtied;
    /// returns what `f` returned and the new value.
    pub(crate) fn change<T: Any + Send + Sync + Clone, R>(
        &mut self,
        slot: Slot,
        encode: &EncodeFn,
        f: impl FnOnce(&mut T) -> R,
    ) -> Result<(R, Arc<T>)> {
        let h = self
            .held
            .get(slot.0)
            .and_then(|h| h.handle.as_ref())
            .ok_or_else(|| Error::Unsupported("a released metadata protection".into()))?;
        let icr = self.meta.icr_mut(h)?;
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

    /// Makes the held `parent` a flush-dependency parent of the resident entry at relative
    /// `child` (written first), unless it already is.
    pub(crate) fn depend(&mut self, parent: Slot, child: u64) -> Result<()> {
        let p = self.held.get(parent.0).map(|h| h.abs).ok_or_else(|| {
            Error::Unsupported("a flush dependency on a released protection".into())
        })?;
        let c = self.abs(child)?;
        if !self.meta.contains(c) || self.meta.flush_dependency_parents(c).contains(&p) {
            return Ok(());
        }
        self.meta.create_flush_dependency(p, c).map_err(cache_error)
    }

    /// Releases one held entry now (so that it can be expunged or evicted), dirtied if it was
    /// changed.
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
                .meta
                .unprotect(h, flags)
                .map(|_| ())
                .map_err(|e| Error::Cache(e.error)),
            None => Ok(()),
        }
    }

    /// Ends the operation, releasing every held entry; reports the first error.
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

impl Drop for CacheAccess<'_> {
    fn drop(&mut self) {
        for i in 0..self.held.len() {
            let _ = self.release(Slot(i));
        }
    }
}
