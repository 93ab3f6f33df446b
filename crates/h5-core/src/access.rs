//! How the multi-entry structures (v2 B-trees, fractal heaps) reach the metadata cache: reads
//! load one entry at a time ([`Reading`]); a change holds the cache for its whole duration
//! ([`Session`]), so that the entries it touches are consistent with each other when the lock
//! is released, and goes through protect → change → unprotect(dirtied) on each entry it changes
//! ([`crate::meta::modify`]).
//!
//! Invariants of a session: no entry stays protected between two calls; an entry removed from
//! the cache first loses its flush dependencies; a flush dependency is made only between two
//! resident entries and at most once.

use std::any::Any;
use std::sync::{Arc, MutexGuard};

use h5_metacache::{
    ExpungeFlags, InsertFlags, MetadataCache, MetadataKind, ProtectFlags, ProtectHandle,
    UnprotectFlags,
};

use crate::error::{Error, Result};
use crate::file::{FileShared, cache_error};
use crate::meta::{Decoded, Load, Meta};
use crate::write::alloc::SpaceKind;

/// Loading structures through the metadata cache, for readers and writers alike.
pub(crate) trait MetaAccess {
    /// The file.
    fn file(&self) -> &FileShared;

    /// The value of the structure of `kind` at relative `addr` (loaded with `load` on a miss).
    fn load_value(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: Load,
    ) -> Result<Arc<dyn Any + Send + Sync>>;
}

/// The structure of `kind` at relative `addr` as a `T`.
pub(crate) fn get<T: Any + Send + Sync>(
    a: &mut dyn MetaAccess,
    kind: MetadataKind,
    addr: u64,
    load: Load,
) -> Result<Arc<T>> {
    a.load_value(kind, addr, load)?
        .downcast::<T>()
        .map_err(|_| {
            Error::Unsupported(format!(
                "{} at {addr:#x} was already cached as another structure",
                kind.name()
            ))
        })
}

/// Reads that take the cache's lock for one entry at a time.
pub(crate) struct Reading<'a>(pub(crate) &'a FileShared);

impl MetaAccess for Reading<'_> {
    fn file(&self) -> &FileShared {
        self.0
    }

    fn load_value(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: Load,
    ) -> Result<Arc<dyn Any + Send + Sync>> {
        self.0.load_value(kind, addr, load)
    }
}

/// A change made under one hold of the metadata cache's lock. Entries the change works on stay
/// protected read-write while it needs them ([`Session::protect`] → [`Held`]); whatever is still
/// held when the session ends (an error path) is released then, dirtied if it was changed.
pub(crate) struct Session<'a> {
    file: &'a FileShared,
    meta: MutexGuard<'a, MetadataCache<Meta>>,
    held: Vec<Option<HeldEntry>>,
}

/// An entry a session protected.
struct HeldEntry {
    handle: ProtectHandle,
    kind: MetadataKind,
    dirtied: bool,
}

/// A protected entry of a [`Session`] (released with [`Session::release`] or
/// [`Session::release_deleted`]).
#[derive(Debug)]
#[must_use]
pub(crate) struct Held {
    slot: usize,
    /// Relative address of the entry.
    pub(crate) addr: u64,
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        for e in self.held.drain(..).flatten() {
            let flags = if e.dirtied {
                UnprotectFlags::DIRTIED
            } else {
                UnprotectFlags::NONE
            };
            let _ = self.meta.unprotect(e.handle, flags);
        }
    }
}

impl MetaAccess for Session<'_> {
    fn file(&self) -> &FileShared {
        self.file
    }

    fn load_value(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: Load,
    ) -> Result<Arc<dyn Any + Send + Sync>> {
        let abs = self.file.abs(addr)?;
        crate::meta::read(&mut self.meta, kind, abs, &load)
    }
}

impl<'a> Session<'a> {
    /// Takes the cache's lock of `file` (which must be writable) until the session ends.
    pub(crate) fn new(file: &'a FileShared) -> Result<Self> {
        if !file.is_writable() {
            return Err(Error::ReadOnly);
        }
        let meta = file.meta.lock().map_err(|_| Error::Poisoned)?;
        Ok(Session {
            file,
            meta,
            held: Vec::new(),
        })
    }

    /// The file (for as long as the session's borrow of it).
    pub(crate) fn file(&self) -> &'a FileShared {
        self.file
    }

    /// Protects the entry of `kind` at relative `addr` read-write (loading it with `load` on a
    /// miss) until it is released.
    pub(crate) fn protect(&mut self, kind: MetadataKind, addr: u64, load: Load) -> Result<Held> {
        let abs = self.file.abs(addr)?;
        let handle = self
            .meta
            .protect(kind.id(), abs, &load, ProtectFlags::NONE)
            .map_err(cache_error)?;
        let slot = match self.held.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.held.push(None);
                self.held.len() - 1
            }
        };
        self.held[slot] = Some(HeldEntry {
            handle,
            kind,
            dirtied: false,
        });
        Ok(Held { slot, addr })
    }

    fn held_entry(&self, h: &Held) -> Result<&HeldEntry> {
        self.held
            .get(h.slot)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::Unsupported("a released entry used again".into()))
    }

    /// The value (a `T`) of a held entry.
    pub(crate) fn value<T: Any + Send + Sync>(&self, h: &Held) -> Result<&T> {
        let e = self.held_entry(h)?;
        self.meta
            .icr(&e.handle)?
            .value
            .downcast_ref::<T>()
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "{} at {:#x} is cached as another structure",
                    e.kind.name(),
                    h.addr
                ))
            })
    }

    /// The value (a `T`) of a held entry, shared: drop it before changing the entry (a value
    /// still shared is copied by [`Session::value_mut`]).
    pub(crate) fn value_arc<T: Any + Send + Sync>(&self, h: &Held) -> Result<Arc<T>> {
        let e = self.held_entry(h)?;
        Arc::clone(&self.meta.icr(&e.handle)?.value)
            .downcast::<T>()
            .map_err(|_| {
                Error::Unsupported(format!(
                    "{} at {:#x} is cached as another structure",
                    e.kind.name(),
                    h.addr
                ))
            })
    }

    /// The value (a `T`) of a held entry, to change: the entry is released dirtied.
    pub(crate) fn value_mut<T: Any + Send + Sync + Clone>(&mut self, h: &Held) -> Result<&mut T> {
        let e = self
            .held
            .get_mut(h.slot)
            .and_then(Option::as_mut)
            .ok_or_else(|| Error::Unsupported("a released entry used again".into()))?;
        e.dirtied = true;
        let (kind, handle) = (e.kind, &e.handle);
        let icr = self.meta.icr_mut(handle)?;
        if icr.encode.is_none() {
            return Err(Error::Unsupported(format!(
                "{} at {:#x} was loaded for reading only",
                kind.name(),
                h.addr
            )));
        }
        icr.value_mut::<T>().ok_or_else(|| {
            Error::Unsupported(format!(
                "{} at {:#x} is cached as another structure",
                kind.name(),
                h.addr
            ))
        })
    }

    /// Releases a held entry (dirtied if it was changed).
    pub(crate) fn release(&mut self, h: Held) -> Result<()> {
        let e = self
            .held
            .get_mut(h.slot)
            .and_then(Option::take)
            .ok_or_else(|| Error::Unsupported("a released entry used again".into()))?;
        let flags = if e.dirtied {
            UnprotectFlags::DIRTIED
        } else {
            UnprotectFlags::NONE
        };
        self.meta
            .unprotect(e.handle, flags)
            .map_err(|e| Error::Cache(e.error))?;
        Ok(())
    }

    /// Releases a held entry and deletes it: its flush dependencies go first, the entry leaves
    /// the cache unwritten and its `len` bytes of metadata space are freed.
    pub(crate) fn release_deleted(&mut self, h: Held, len: u64) -> Result<()> {
        let abs = self.file.abs(h.addr)?;
        self.drop_dependencies(abs)?;
        let e = self
            .held
            .get_mut(h.slot)
            .and_then(Option::take)
            .ok_or_else(|| Error::Unsupported("a released entry used again".into()))?;
        self.meta
            .unprotect(e.handle, UnprotectFlags::DELETED)
            .map_err(|e| Error::Cache(e.error))?;
        self.file.free(SpaceKind::Meta, h.addr, len)
    }

    /// Puts a new structure (dirty) at relative `addr` and holds it.
    pub(crate) fn insert_held(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        value: Decoded,
    ) -> Result<Held> {
        self.insert(kind, addr, value)?;
        self.protect(kind, addr, Load::cached_only(kind.name()))
    }

    /// Makes held `parent` a flush-dependency parent of the entry at relative `child` (written
    /// first), when the child is cached and the dependency does not exist yet.
    pub(crate) fn depend_held(&mut self, parent: &Held, child: u64) -> Result<()> {
        let (p, c) = (self.file.abs(parent.addr)?, self.file.abs(child)?);
        if !self.meta.contains(c) || self.meta.flush_dependency_parents(c).contains(&p) {
            return Ok(());
        }
        self.meta.create_flush_dependency(p, c).map_err(cache_error)
    }

    /// Moves the flush dependency of the entry at relative `child` from `from` to held `to`
    /// (a child handed to another parent); nothing when the child is not cached.
    pub(crate) fn move_dependency(&mut self, from: u64, to: &Held, child: u64) -> Result<()> {
        self.undepend(from, child)?;
        self.depend_held(to, child)
    }

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

    /// Changes the value (a `T`) of the entry of `kind` at relative `addr`, loading it with
    /// `load` on a miss; see [`crate::meta::modify`].
    pub(crate) fn modify<T: Any + Send + Sync + Clone, R>(
        &mut self,
        kind: MetadataKind,
        addr: u64,
        load: Load,
        change: impl FnOnce(&mut T) -> Result<R>,
    ) -> Result<R> {
        let abs = self.file.abs(addr)?;
        crate::meta::modify(&mut self.meta, kind, abs, &load, change)
    }

    /// Puts a new structure (dirty) at relative `addr`.
    pub(crate) fn insert(&mut self, kind: MetadataKind, addr: u64, value: Decoded) -> Result<()> {
        let abs = self.file.abs(addr)?;
        self.meta
            .insert(kind.id(), abs, value, InsertFlags::NONE)
            .map_err(cache_error)
    }

    /// Allocates `len` bytes of metadata space.
    pub(crate) fn allocate(&mut self, len: u64) -> Result<u64> {
        self.file.allocate(SpaceKind::Meta, len)
    }

    /// Frees `len` bytes of file space at relative `addr`.
    pub(crate) fn free(&mut self, kind: SpaceKind, addr: u64, len: u64) -> Result<()> {
        self.file.free(kind, addr, len)
    }

    /// Removes the structure at relative `addr` (if cached; its flush dependencies first) and
    /// frees its `len` bytes of metadata space.
    pub(crate) fn remove(&mut self, kind: MetadataKind, addr: u64, len: u64) -> Result<()> {
        self.forget(kind, addr)?;
        self.file.free(SpaceKind::Meta, addr, len)
    }

    /// Drops the structure at relative `addr` from the cache without writing it (its flush
    /// dependencies first); its space stays allocated.
    pub(crate) fn forget(&mut self, kind: MetadataKind, addr: u64) -> Result<()> {
        let abs = self.file.abs(addr)?;
        if !self.meta.contains(abs) {
            return Ok(());
        }
        self.drop_dependencies(abs)?;
        self.meta
            .expunge(kind.id(), abs, ExpungeFlags::NONE)
            .map_err(cache_error)
    }

    /// Makes the entry of `parent_kind` at relative `parent` a flush-dependency parent of the
    /// entry at relative `child` (the cache writes the child first), when both are cached and
    /// the dependency does not exist yet. The parent is protected while the dependency is made
    /// (the cache needs a pinned or protected parent; having a child then keeps it pinned).
    pub(crate) fn depend(
        &mut self,
        parent_kind: MetadataKind,
        parent: u64,
        child: u64,
    ) -> Result<()> {
        let (p, c) = (self.file.abs(parent)?, self.file.abs(child)?);
        if !self.meta.contains(p)
            || !self.meta.contains(c)
            || self.meta.flush_dependency_parents(c).contains(&p)
        {
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
        let (p, c) = (self.file.abs(parent)?, self.file.abs(child)?);
        if self.meta.contains(c) && self.meta.flush_dependency_parents(c).contains(&p) {
            self.meta
                .destroy_flush_dependency(p, c)
                .map_err(cache_error)?;
        }
        Ok(())
    }
}
