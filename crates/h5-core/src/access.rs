//! How the engine reaches the metadata cache for its structures. Reads load one entry at a
//! time ([`Reading`], [`crate::file::FileShared::load`]); a change locks the cache for its whole
//! duration ([`CacheAccess`], and [`Session`] for the structures that need the file as well: v2
//! B-trees, fractal heaps), so that the entries it touches are consistent with each other when
//! the lock is released, and goes through protect → change → unprotect(dirtied) on each entry
//! it changes: at once for one entry ([`CacheAccess::modify`]), or with the entry held in a
//! [`Slot`] while the change needs it ([`CacheAccess::hold`], [`CacheAccess::value_mut`] /
//! [`CacheAccess::change`], [`CacheAccess::release`]). Chunk indexes keep a [`CacheHandle`],
//! which reaches the cache even while the file is dropped.
//!
//! Invariants: no entry stays protected once a change ends (held entries are released when it
//! finishes or is dropped); an entry removed from the cache first loses its flush
//! dependencies; a flush dependency is made only between two resident entries and at most
//! once.

use std::any::Any;
use std::sync::{Arc, Mutex, MutexGuard};

use h5_format::{FormatError, Sizes};
use h5_metacache::{
    ExpungeFlags, InsertFlags, MetadataCache, MetadataKind, ProtectFlags, ProtectHandle,
    UnprotectFlags,
};

use crate::error::{Error, Result};
use crate::file::{FileShared, cache_error};
use crate::meta::{Decoded, EncodeFn, Load, Meta};
use crate::write::alloc::SpaceKind;

/// Loading structures through the metadata cache, for readers and writers alike.
pub(crate) trait MetaAccess {
    /// The file.
    fn file(&self) -> &FileShared;

    /// The value of the structure of `kind` at relative `addr` (loaded with the loader `load`
    /// builds, called only on a miss).
    fn load_value(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: &dyn Fn() -> Load,
    ) -> Result<Arc<dyn Any + Send + Sync>>;
}

/// The structure of `kind` at relative `addr` as a `T` (`load` builds its loader on a miss).
pub(crate) fn get<T: Any + Send + Sync>(
    a: &mut dyn MetaAccess,
    kind: MetadataKind,
    addr: u64,
    load: impl Fn() -> Load,
) -> Result<Arc<T>> {
    crate::file::downcast(a.load_value(kind, addr, &load)?, kind, addr)
}

/// Reads that take the cache's lock for one entry at a time (not during the load's I/O).
pub(crate) struct Reading<'a>(pub(crate) &'a FileShared);

impl MetaAccess for Reading<'_> {
    fn file(&self) -> &FileShared {
        self.0
    }

    fn load_value(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: &dyn Fn() -> Load,
    ) -> Result<Arc<dyn Any + Send + Sync>> {
        self.0.load_value(kind, addr, load)
    }
}

/// A file's metadata cache, shared by the file and by the chunk-index layouts that change index
/// nodes while the chunk cache flushes (even as the file is dropped).
pub(crate) type SharedCache = Arc<Mutex<MetadataCache<Meta>>>;

/// What structure code needs to reach one file's metadata: the cache, the address and length
/// sizes, and the base address relative addresses count from. Cheap to clone.
#[derive(Clone)]
pub(crate) struct CacheHandle {
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
        crate::file::load_from(&self.cache, self.abs(addr)?, kind, addr, || load)
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
    held: Vec<HeldEntry>,
}

/// An entry a [`CacheAccess`] holds protected read-write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot(usize);

struct HeldEntry {
    abs: u64,
    kind: MetadataKind,
    handle: Option<ProtectHandle>,
    dirtied: bool,
}

/// What an entry's value is while [`CacheAccess::change`] has it out: one shared unit value,
/// so that a change allocates nothing for it.
fn placeholder() -> Arc<dyn Any + Send + Sync> {
    static UNIT: std::sync::OnceLock<Arc<dyn Any + Send + Sync>> = std::sync::OnceLock::new();
    Arc::clone(UNIT.get_or_init(|| Arc::new(())))
}

/// The loader passed for an entry known to be cached, where a protect hits and never loads
/// (the cache is locked between the check and the protect).
fn unused_load() -> &'static Load {
    static UNUSED: std::sync::OnceLock<Load> = std::sync::OnceLock::new();
    UNUSED.get_or_init(|| {
        Load::exact(0, |_| -> std::result::Result<(), FormatError> {
            Err(FormatError::Unsupported {
                structure: "metadata entry",
                address: u64::MAX,
                what: "a load of an entry that was cached when protected".into(),
            })
        })
    })
}

/// The error for a slot whose protection was released.
fn released() -> Error {
    Error::Unsupported("a released metadata protection".into())
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
        crate::file::downcast(self.read_value(kind, addr, load)?, kind, addr)
    }

    /// [`CacheAccess::read`] with the value left type-erased.
    pub(crate) fn read_value(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: &Load,
    ) -> Result<Arc<dyn Any + Send + Sync>> {
        let abs = self.abs(addr)?;
        let meta = &mut *self.meta;
        if let Some(value) = meta
            .read_hit(kind.id(), abs, |d| Arc::clone(&d.value))
            .map_err(cache_error)?
        {
            return Ok(value);
        }
        let h = meta
            .protect(kind.id(), abs, load, ProtectFlags::READ_ONLY)
            .map_err(cache_error)?;
        let value = meta.icr(&h).map(|d| Arc::clone(&d.value));
        meta.unprotect(h, UnprotectFlags::NONE)
            .map_err(|e| Error::Cache(e.error))?;
        Ok(value?)
    }

    /// Protects the structure at `addr` for writing, lets `change` change its value (a `T`)
    /// and unprotects it dirtied: the engine's one-entry change, protect → change →
    /// unprotect(dirtied). The change works on a copy, so an error leaves the entry unchanged
    /// and clean. An entry loaded without an encoder (for reading only) cannot be changed.
    pub(crate) fn modify<T: Any + Send + Sync + Clone, R>(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: &Load,
        change: impl FnOnce(&mut T) -> Result<R>,
    ) -> Result<R> {
        self.modify_sized(kind, addr, load, |v: &mut T, _| change(v))
    }

    /// [`CacheAccess::modify`] without the copy: `change` works on the cached value itself
    /// (copied first only while a reader holds it), so a large structure changed a little (a
    /// fractal heap direct block receiving an object) costs the change, not a copy of the
    /// block. `change` must leave the value as it was when it returns an error (check, then
    /// change); the entry is then unprotected clean. The length stays.
    pub(crate) fn modify_in_place<T: Any + Send + Sync + Clone, R>(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: &Load,
        change: impl FnOnce(&mut T) -> Result<R>,
    ) -> Result<R> {
        let abs = self.abs(addr)?;
        let meta = &mut *self.meta;
        let h = meta
            .protect(kind.id(), abs, load, ProtectFlags::NONE)
            .map_err(cache_error)?;
        let changed = (|| -> Result<R> {
            let icr = meta.icr_mut(&h)?;
            if icr.encode.is_none() {
                return Err(Error::Unsupported(format!(
                    "{} at {addr:#x} was loaded for reading only",
                    kind.name()
                )));
            }
            let value = icr.value_mut::<T>().ok_or_else(|| wrong_type(kind, addr))?;
            change(value)
        })();
        let flags = if changed.is_ok() {
            UnprotectFlags::DIRTIED
        } else {
            UnprotectFlags::NONE
        };
        meta.unprotect(h, flags)
            .map_err(|e| Error::Cache(e.error))?;
        changed
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
            if icr.encode.is_none() {
                return Err(Error::Unsupported(format!(
                    "{} at {addr:#x} was loaded for reading only",
                    kind.name()
                )));
            }
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

    /// Removes the structure at `addr` from the cache without writing it (its flush
    /// dependencies first; nothing happens when it is not cached); its file space is not freed.
    pub(crate) fn forget(&mut self, kind: MetadataKind, addr: u64) -> Result<()> {
        let abs = self.abs(addr)?;
        if !self.meta.contains(abs) {
            return Ok(());
        }
        self.drop_dependencies(abs)?;
        self.meta
            .expunge(kind.id(), abs, ExpungeFlags::NONE)
            .map_err(cache_error)
    }

    /// Destroys every flush dependency of the entry at absolute `abs`.
    fn drop_dependencies(&mut self, abs: u64) -> Result<()> {
        for p in self.meta.flush_dependency_parents(abs) {
            self.meta
                .destroy_flush_dependency(p, abs)
                .map_err(cache_error)?;
        }
        for c in self.meta.flush_dependency_children(abs) {
            self.meta
                .destroy_flush_dependency(abs, c)
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
    /// miss) until it is released; an entry already held keeps its slot.
    pub(crate) fn hold(&mut self, kind: MetadataKind, addr: u64, load: &Load) -> Result<Slot> {
        let abs = self.abs(addr)?;
        if let Some(i) = self.held.iter().position(|h| h.abs == abs) {
            return Ok(Slot(i));
        }
        let handle = self
            .meta
            .protect(kind.id(), abs, load, ProtectFlags::NONE)
            .map_err(cache_error)?;
        let held = HeldEntry {
            abs,
            kind,
            handle: Some(handle),
            dirtied: false,
        };
        match self
            .held
            .iter_mut()
            .enumerate()
            .find(|(_, h)| h.handle.is_none())
        {
            Some((i, free)) => {
                *free = held;
                Ok(Slot(i))
            }
            None => {
                let i = self.held.len();
                self.held.push(held);
                Ok(Slot(i))
            }
        }
    }

    /// [`CacheAccess::hold`], also returning the entry's current value (a `T`).
    pub(crate) fn protect<T: Any + Send + Sync>(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: &Load,
    ) -> Result<(Slot, Arc<T>)> {
        let slot = self.hold(kind, addr, load)?;
        Ok((slot, self.value_arc(slot)?))
    }

    /// [`CacheAccess::protect`] with the loader made by `load` only when the entry is not
    /// cached (a hit never loads, and making a loader allocates).
    pub(crate) fn protect_lazy<T: Any + Send + Sync>(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: impl FnOnce() -> Result<Load>,
    ) -> Result<(Slot, Arc<T>)> {
        let slot = self.hold_lazy(kind, addr, load)?;
        Ok((slot, self.value_arc(slot)?))
    }

    /// [`CacheAccess::hold`] with the loader made by `load` only when the entry is not cached.
    pub(crate) fn hold_lazy(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: impl FnOnce() -> Result<Load>,
    ) -> Result<Slot> {
        let abs = self.abs(addr)?;
        if self.meta.contains(abs) {
            self.hold(kind, addr, unused_load())
        } else {
            self.hold(kind, addr, &load()?)
        }
    }

    fn held(&self, slot: Slot) -> Result<&HeldEntry> {
        self.held
            .get(slot.0)
            .filter(|h| h.handle.is_some())
            .ok_or_else(released)
    }

    fn held_mut(&mut self, slot: Slot) -> Result<&mut HeldEntry> {
        self.held
            .get_mut(slot.0)
            .filter(|h| h.handle.is_some())
            .ok_or_else(released)
    }

    fn wrong_held_type(h: &HeldEntry) -> Error {
        Error::Unsupported(format!(
            "{} at {:#x} is cached as another structure",
            h.kind.name(),
            h.abs
        ))
    }

    /// The value (a `T`) of a held entry.
    pub(crate) fn value<T: Any + Send + Sync>(&self, slot: Slot) -> Result<&T> {
        let h = self.held(slot)?;
        self.meta
            .icr(self.handle(slot)?)?
            .value
            .downcast_ref::<T>()
            .ok_or_else(|| Self::wrong_held_type(h))
    }

    /// The value (a `T`) of a held entry, shared: drop it before changing the entry in place (a
    /// value still shared is copied by [`CacheAccess::value_mut`]).
    pub(crate) fn value_arc<T: Any + Send + Sync>(&self, slot: Slot) -> Result<Arc<T>> {
        let h = self.held(slot)?;
        Arc::clone(&self.meta.icr(self.handle(slot)?)?.value)
            .downcast::<T>()
            .map_err(|_| Self::wrong_held_type(h))
    }

    /// The value (a `T`) of a held entry, to change in place: the entry is released dirtied.
    /// It must have been loaded with an encoder (a writable load).
    pub(crate) fn value_mut<T: Any + Send + Sync + Clone>(&mut self, slot: Slot) -> Result<&mut T> {
        let h = self
            .held
            .get_mut(slot.0)
            .filter(|h| h.handle.is_some())
            .ok_or_else(|| Error::Unsupported("a released metadata protection".into()))?;
        h.dirtied = true;
        let (kind, abs) = (h.kind, h.abs);
        let handle = h
            .handle
            .as_ref()
            .ok_or_else(|| Error::Unsupported("a released metadata protection".into()))?;
        let icr = self.meta.icr_mut(handle)?;
        if icr.encode.is_none() {
            return Err(Error::Unsupported(format!(
                "{} at {abs:#x} was loaded for reading only",
                kind.name()
            )));
        }
        icr.value_mut::<T>().ok_or_else(|| {
            Error::Unsupported(format!(
                "{} at {abs:#x} is cached as another structure",
                kind.name()
            ))
        })
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
        let value = std::mem::replace(&mut icr.value, placeholder());
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
        self.held_mut(slot)?.dirtied = true;
        Ok((r, typed))
    }

    /// Gives a held entry the new relative address `to` (libhdf5's `H5AC_move_entry`): its
    /// value, protection and flush dependencies go with it, nothing stays cached at its old
    /// address, and it is dirty (written at `to` by the next flush; the bytes at its old
    /// address are left as they are). `to` must be free in the cache.
    pub(crate) fn move_held(&mut self, slot: Slot, to: u64) -> Result<()> {
        let (kind, from) = {
            let h = self.held(slot)?;
            (h.kind, h.abs)
        };
        let abs = self.abs(to)?;
        if !self
            .meta
            .move_entry(kind.id(), from, abs)
            .map_err(cache_error)?
        {
            return Err(Error::Unsupported(format!(
                "moving {} at {from:#x}: not cached",
                kind.name()
            )));
        }
        let h = self.held_mut(slot)?;
        h.abs = abs;
        h.dirtied = true;
        Ok(())
    }

    /// Whether a held entry was changed while held (it is released dirtied).
    pub(crate) fn is_dirtied(&self, slot: Slot) -> Result<bool> {
        Ok(self.held(slot)?.dirtied)
    }

    /// Pins a held entry in the cache (no eviction writes or drops it) until
    /// `MetadataCache::unpin`; the caller keeps track of what it pinned.
    pub(crate) fn pin_held(&mut self, slot: Slot) -> Result<()> {
        let abs = self.held(slot)?.abs;
        self.meta.pin_protected(abs).map_err(cache_error)
    }

    /// Makes the held `parent` a flush-dependency parent of the resident entry at relative
    /// `child` (written first), unless it already is.
    pub(crate) fn depend(&mut self, parent: Slot, child: u64) -> Result<()> {
        let p = self.held.get(parent.0).map(|h| h.abs).ok_or_else(|| {
            Error::Unsupported("a flush dependency on a released protection".into())
        })?;
        let c = self.abs(child)?;
        match self.meta.has_flush_dependency(p, c) {
            // Not cached, or already a child of `p`.
            None | Some(true) => Ok(()),
            Some(false) => self.meta.create_flush_dependency(p, c).map_err(cache_error),
        }
    }

    /// Whether the entry at relative `child` is cached as a flush-dependency child of the entry
    /// at relative `parent`.
    pub(crate) fn depends(&self, parent: u64, child: u64) -> Result<bool> {
        let (p, c) = (self.abs(parent)?, self.abs(child)?);
        Ok(self.meta.has_flush_dependency(p, c) == Some(true))
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

    /// Releases a held entry and deletes it: its flush dependencies go first and the entry
    /// leaves the cache unwritten (its file space is the caller's to free).
    pub(crate) fn release_deleted(&mut self, slot: Slot) -> Result<()> {
        let abs = self.held(slot)?.abs;
        self.drop_dependencies(abs)?;
        let held = self.held_mut(slot)?;
        held.abs = u64::MAX;
        match held.handle.take() {
            Some(h) => self
                .meta
                .unprotect(h, UnprotectFlags::DELETED)
                .map(|_| ())
                .map_err(|e| Error::Cache(e.error)),
            None => Ok(()),
        }
    }

    /// Makes the entry of `parent_kind` at relative `parent` a flush-dependency parent of the
    /// entry at relative `child` (the cache writes the child first), when both are cached and
    /// the dependency does not exist yet. The parent is protected while the dependency is made
    /// (the cache needs a pinned or protected parent; having a child then keeps it pinned).
    pub(crate) fn depend_at(
        &mut self,
        parent_kind: MetadataKind,
        parent: u64,
        child: u64,
    ) -> Result<()> {
        let (p, c) = (self.abs(parent)?, self.abs(child)?);
        if !self.meta.contains(p) || self.meta.has_flush_dependency(p, c) != Some(false) {
            return Ok(());
        }
        let h = self
            .meta
            .protect(
                parent_kind.id(),
                p,
                &Load::cached_only("flush dependency parent"),
                ProtectFlags::NONE,
            )
            .map_err(cache_error)?;
        let r = self.meta.create_flush_dependency(p, c).map_err(cache_error);
        self.meta
            .unprotect(h, UnprotectFlags::NONE)
            .map_err(|e| Error::Cache(e.error))?;
        r
    }

    /// Removes the flush dependency of `child` on `parent` (relative addresses), if it exists.
    pub(crate) fn undepend(&mut self, parent: u64, child: u64) -> Result<()> {
        let (p, c) = (self.abs(parent)?, self.abs(child)?);
        if self.meta.has_flush_dependency(p, c) == Some(true) {
            self.meta
                .destroy_flush_dependency(p, c)
                .map_err(cache_error)?;
        }
        Ok(())
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

/// A change of a writable file's structures made under one hold of the metadata cache's lock
/// (a [`CacheAccess`] that also knows its file). Entries the change works on stay protected
/// read-write while it needs them ([`Session::protect`] → [`Held`]); whatever is still held
/// when the session ends (an error path) is released then, dirtied if it was changed.
pub(crate) struct Session<'a> {
    file: &'a FileShared,
    c: CacheAccess<'a>,
}

/// A protected entry of a [`Session`] (released with [`Session::release`] or
/// [`Session::release_deleted`]).
#[derive(Debug)]
#[must_use]
pub(crate) struct Held {
    slot: Slot,
    /// Relative address of the entry.
    pub(crate) addr: u64,
}

impl MetaAccess for Session<'_> {
    fn file(&self) -> &FileShared {
        self.file
    }

    fn load_value(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: &dyn Fn() -> Load,
    ) -> Result<Arc<dyn Any + Send + Sync>> {
        let cached = self.c.meta.contains(self.c.abs(addr)?);
        if cached {
            self.c.read_value(kind, addr, Load::for_hit())
        } else {
            self.c.read_value(kind, addr, &load())
        }
    }
}

impl<'a> Session<'a> {
    /// Takes the cache's lock of `file` (which must be writable) until the session ends.
    pub(crate) fn new(file: &'a FileShared) -> Result<Self> {
        if !file.is_writable() {
            return Err(Error::ReadOnly);
        }
        Ok(Session {
            file,
            c: file.cache()?,
        })
    }

    /// The file (for as long as the session's borrow of it).
    pub(crate) fn file(&self) -> &'a FileShared {
        self.file
    }

    /// Protects the entry of `kind` at relative `addr` read-write (loading it with `load` on a
    /// miss) until it is released.
    pub(crate) fn protect(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: impl FnOnce() -> Load,
    ) -> Result<Held> {
        let slot = self.c.hold_lazy(kind, addr, || Ok(load()))?;
        Ok(Held { slot, addr })
    }

    /// The value (a `T`) of a held entry.
    pub(crate) fn value<T: Any + Send + Sync>(&self, h: &Held) -> Result<&T> {
        self.c.value(h.slot)
    }

    /// The value (a `T`) of a held entry, shared: drop it before changing the entry (a value
    /// still shared is copied by [`Session::value_mut`]).
    pub(crate) fn value_arc<T: Any + Send + Sync>(&self, h: &Held) -> Result<Arc<T>> {
        self.c.value_arc(h.slot)
    }

    /// The value (a `T`) of a held entry, to change: the entry is released dirtied.
    pub(crate) fn value_mut<T: Any + Send + Sync + Clone>(&mut self, h: &Held) -> Result<&mut T> {
        self.c.value_mut(h.slot)
    }

    /// Releases a held entry (dirtied if it was changed).
    pub(crate) fn release(&mut self, h: Held) -> Result<()> {
        self.c.release(h.slot)
    }

    /// Releases a held entry and deletes it: its flush dependencies go first, the entry leaves
    /// the cache unwritten and its `len` bytes of metadata space are freed.
    pub(crate) fn release_deleted(&mut self, h: Held, len: u64) -> Result<()> {
        self.c.release_deleted(h.slot)?;
        self.c.free(SpaceKind::Meta, h.addr, len)
    }

    /// Puts a new structure (dirty) at relative `addr` and holds it.
    pub(crate) fn insert_held(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        value: Decoded,
    ) -> Result<Held> {
        self.insert(kind, addr, value)?;
        self.protect(kind, addr, || Load::cached_only(kind.name()))
    }

    /// Moves held entry `h` to relative address `to` in the cache (see
    /// [`CacheAccess::move_held`]); `h.addr` becomes `to`.
    pub(crate) fn move_held(&mut self, h: &mut Held, to: u64) -> Result<()> {
        self.c.move_held(h.slot, to)?;
        h.addr = to;
        Ok(())
    }

    /// Whether held entry `h` was changed while held.
    pub(crate) fn is_dirtied(&self, h: &Held) -> Result<bool> {
        self.c.is_dirtied(h.slot)
    }

    /// Pins held entry `h` in the cache until it is unpinned (see [`CacheAccess::pin_held`]).
    pub(crate) fn pin_held(&mut self, h: &Held) -> Result<()> {
        self.c.pin_held(h.slot)
    }

    /// Makes held `parent` a flush-dependency parent of the entry at relative `child` (written
    /// first), when the child is cached and the dependency does not exist yet.
    pub(crate) fn depend_held(&mut self, parent: &Held, child: u64) -> Result<()> {
        self.c.depend(parent.slot, child)
    }

    /// Moves the flush dependency of the entry at relative `child` from `from` to held `to`
    /// (a child handed to another parent); nothing when the child is not cached.
    pub(crate) fn move_dependency(&mut self, from: u64, to: &Held, child: u64) -> Result<()> {
        self.c.undepend(from, child)?;
        self.c.depend(to.slot, child)
    }

    /// Changes the value (a `T`) of the entry of `kind` at relative `addr`, loading it with
    /// `load` on a miss; see [`CacheAccess::modify`].
    pub(crate) fn modify<T: Any + Send + Sync + Clone, R>(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: Load,
        change: impl FnOnce(&mut T) -> Result<R>,
    ) -> Result<R> {
        self.c.modify(kind, addr, &load, change)
    }

    /// Changes the value (a `T`) of the entry of `kind` at relative `addr` in the cache itself,
    /// loading it with `load` on a miss; see [`CacheAccess::modify_in_place`] (`change` checks
    /// before it changes).
    pub(crate) fn modify_in_place<T: Any + Send + Sync + Clone, R>(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: Load,
        change: impl FnOnce(&mut T) -> Result<R>,
    ) -> Result<R> {
        self.c.modify_in_place(kind, addr, &load, change)
    }

    /// Puts a new structure (dirty) at relative `addr`.
    pub(crate) fn insert(&mut self, kind: MetadataKind, addr: u64, value: Decoded) -> Result<()> {
        self.c.put(kind, addr, value)
    }

    /// Allocates `len` bytes of metadata space.
    pub(crate) fn allocate(&mut self, len: u64) -> Result<u64> {
        self.c.allocate(len)
    }

    /// Frees `len` bytes of file space at relative `addr`.
    pub(crate) fn free(&mut self, kind: SpaceKind, addr: u64, len: u64) -> Result<()> {
        self.c.free(kind, addr, len)
    }

    /// Removes the structure at relative `addr` (if cached; its flush dependencies first) and
    /// frees its `len` bytes of metadata space.
    pub(crate) fn remove(&mut self, kind: MetadataKind, addr: u64, len: u64) -> Result<()> {
        self.c.delete(kind, addr, len)
    }

    /// Drops the structure at relative `addr` from the cache without writing it (its flush
    /// dependencies first); its space stays allocated.
    pub(crate) fn forget(&mut self, kind: MetadataKind, addr: u64) -> Result<()> {
        self.c.forget(kind, addr)
    }

    /// See [`CacheAccess::depend_at`].
    pub(crate) fn depend(
        &mut self,
        parent_kind: MetadataKind,
        parent: u64,
        child: u64,
    ) -> Result<()> {
        self.c.depend_at(parent_kind, parent, child)
    }

    /// Removes the flush dependency of `child` on `parent` (relative addresses), if it exists.
    pub(crate) fn undepend(&mut self, parent: u64, child: u64) -> Result<()> {
        self.c.undepend(parent, child)
    }
}

#[cfg(test)]
mod tests {
    use h5_format::btree2::{Btree2Type, RecordContext};

    use super::*;
    use crate::testutil::new_file;

    fn bytes_at(storage: &dyn h5_io::Storage, file: &FileShared, addr: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        storage.read_at(file.abs(addr).unwrap(), &mut b).unwrap();
        b
    }

    /// A held entry moved to new space keeps its value and protection, leaves nothing cached
    /// at its old address, is written at the new one by the next flush, and the bytes at the
    /// old address stay as they were; moving onto a cached address is refused (MDC-064, through
    /// the engine's `Session::move_held`).
    #[test]
    fn a_held_entry_moves_to_new_space() {
        let (storage, file) = new_file(false);
        let ctx = RecordContext::new(file.sizes);
        let params = crate::btree2::params_for(Btree2Type::LinkCreationOrder, &ctx).unwrap();
        let len = h5_format::btree2::Btree2Header::encoded_len(file.sizes);
        let from = crate::btree2::create(&mut Session::new(&file).unwrap(), params).unwrap();
        file.flush().unwrap();
        let old = bytes_at(&*storage, &file, from, len);
        assert_eq!(&old[..4], b"BTHD");
        let mut s = Session::new(&file).unwrap();
        let kind = MetadataKind::BTreeV2Header;
        let mut h = s
            .protect(kind, from, || Load::cached_only(kind.name()))
            .unwrap();
        assert!(!s.is_dirtied(&h).unwrap());
        let sb = s.file().state().unwrap().superblock_at;
        let refused = s.move_held(&mut h, sb).unwrap_err();
        assert!(refused.to_string().contains("already cached"), "{refused}");
        assert_eq!(h.addr, from);
        let to = s.allocate(len as u64).unwrap();
        s.move_held(&mut h, to).unwrap();
        assert_eq!(h.addr, to);
        assert!(s.is_dirtied(&h).unwrap());
        let moved = s
            .value::<h5_format::btree2::Btree2Header>(&h)
            .unwrap()
            .clone();
        assert_eq!(moved.node_size, params.node_size);
        s.release(h).unwrap();
        drop(s);
        {
            let meta = file.meta.lock().unwrap();
            assert!(!meta.contains(file.abs(from).unwrap()));
            assert!(meta.contains(file.abs(to).unwrap()));
        }
        file.flush().unwrap();
        assert_eq!(
            bytes_at(&*storage, &file, from, len),
            old,
            "old bytes untouched"
        );
        assert_eq!(
            bytes_at(&*storage, &file, to, len),
            old,
            "written at the new address"
        );
    }
}
