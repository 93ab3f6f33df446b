//! Writing: file creation, groups, datasets and attributes (issue 5, in progress).
//!
//! Every structure written goes into the metadata cache as an entry whose value knows how to
//! encode itself ([`Decoded::writable`]); the cache writes them in address order on flush, the
//! superblock last. Raw data goes through the shared chunk cache with writable layouts
//! (`chunks.rs`). Structures that libhdf5 updates node by node (old-style group tables, v1 B-tree
//! chunk indexes) are kept as ordered tables here and laid out at flush; see `docs/design.md` §5.

pub mod alloc;
pub(crate) mod alloc_time;
pub mod chunk_index;
pub(crate) mod chunks;
pub mod compact;
pub mod dataset;
pub(crate) mod ohdr;
pub(crate) mod symtab;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use h5_format::Sizes;
use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree1::{NodeType, node_len};
use h5_format::heap::local::LocalHeapHeader;
use h5_format::message::kind;
use h5_format::message::symbol_table::SymbolTableMessage;
use h5_format::superblock::{Root, ScratchPad, Superblock, SymbolTableEntry, encoded_len};
use h5_metacache::{
    CacheBuilder, ExpungeFlags, FlushFlags, InsertFlags, MetadataKind, ProtectFlags, UnprotectFlags,
};

use crate::error::{Error, Result};
use crate::file::{CacheSettings, FileShared, cache_error};
use crate::meta::{Decoded, FileSpace, Load, classes};
use alloc::{FileAlloc, SpaceKind};
use symtab::{GROUP_INTERNAL_K, GROUP_LEAF_K, GroupTable, Target};

/// Which format versions new objects use (libhdf5's low library-version bound,
/// `H5Pset_libver_bounds`). Ordered oldest to newest.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
#[non_exhaustive]
pub enum FormatBounds {
    /// The earliest formats every HDF5 library reads: superblock 0, version 1 object headers,
    /// symbol-table groups, version 1 B-tree chunk indexes (HDF5 1.x's and h5py's default).
    #[default]
    Earliest,
    /// HDF5 1.8 formats: superblock 2, version 2 object headers, link messages with compact and
    /// dense (fractal heap + v2 B-tree) groups and attributes; chunk indexes stay v1 B-trees.
    /// HDF5 2.0's default low bound.
    V18,
    /// HDF5 1.10 formats: superblock 3 and layout version 4 with the new chunk indexes (single
    /// chunk, implicit, fixed array, extensible array, v2 B-tree).
    V110,
    /// HDF5 1.12 formats (revised references).
    V112,
    /// HDF5 1.14 formats (same object formats as 1.12).
    V114,
    /// HDF5 2.0 formats, libhdf5 2.0's `H5F_LIBVER_LATEST`.
    V200,
}

impl FormatBounds {
    /// The newest formats h5 knows (libhdf5's `latest`).
    pub const LATEST: FormatBounds = FormatBounds::V200;
}

/// Options for a new file.
#[derive(Clone, Debug, Default)]
pub struct CreateOptions {
    /// Format versions of new objects.
    pub bounds: FormatBounds,
}

/// What a writable file keeps besides the caches.
#[derive(Debug, Default)]
pub(crate) struct WriteState {
    /// Old-style groups created or changed, by object header address.
    pub(crate) groups: HashMap<u64, GroupTable>,
    /// Chunk tables (and compact data) of datasets written, laid out at flush.
    pub(crate) indexes: Vec<Arc<chunks::ChunkTable>>,
    /// Chunked datasets created here, by object header address (for resizing).
    pub(crate) chunked: HashMap<u64, Arc<chunks::ChunkedWriteLayout>>,
    /// Storage allocated at the first write (late allocation), by object header address.
    pub(crate) pending: HashMap<u64, alloc_time::Pending>,
}

/// Puts `value` at relative `addr` into the cache: inserted if absent, replacing the cached
/// value (and marked dirty) if present.
pub(crate) fn put(file: &FileShared, kind: MetadataKind, addr: u64, value: Decoded) -> Result<()> {
    let abs = file.abs(addr)?;
    let mut meta = file.meta.lock().map_err(|_| Error::Poisoned)?;
    if !meta.contains(abs) {
        return meta
            .insert(kind.id(), abs, value, InsertFlags::NONE)
            .map_err(cache_error);
    }
    let len = value.len;
    let never = Load::exact(len, |_| -> Result<(), h5_format::FormatError> {
        Err(h5_format::FormatError::Unsupported {
            structure: "metadata entry",
            address: UNDEFINED_ADDRESS,
            what: "reloading an entry being replaced".into(),
        })
    });
    let h = meta
        .protect(kind.id(), abs, &never, ProtectFlags::NONE)
        .map_err(cache_error)?;
    let old_len = meta.icr(&h).map(|d| d.len);
    match (old_len, meta.icr_mut(&h)) {
        (Ok(old), Ok(icr)) if old == len => *icr = value,
        _ => {
            let _ = meta.unprotect(h, UnprotectFlags::NONE);
            return Err(Error::Unsupported(format!(
                "{} at {abs:#x} changed size",
                kind.name()
            )));
        }
    }
    meta.unprotect(h, UnprotectFlags::DIRTIED)
        .map_err(|e| Error::Cache(e.error))?;
    Ok(())
}

/// Removes the entry at relative `addr` from the cache (if cached) and frees its space.
pub(crate) fn drop_entry(file: &FileShared, kind: MetadataKind, addr: u64, len: u64) -> Result<()> {
    let abs = file.abs(addr)?;
    {
        let mut meta = file.meta.lock().map_err(|_| Error::Poisoned)?;
        if meta.contains(abs) {
            meta.expunge(kind.id(), abs, ExpungeFlags::NONE)
                .map_err(cache_error)?;
        }
    }
    file.free(SpaceKind::Meta, addr, len)
}

impl FileShared {
    /// Creates a new, empty HDF5 file in `storage` (which is truncated) with a root group.
    pub fn create(
        storage: Arc<dyn h5_io::Storage>,
        settings: &CacheSettings,
        options: &CreateOptions,
        dir: Option<std::path::PathBuf>,
    ) -> Result<Arc<FileShared>> {
        if options.bounds != FormatBounds::Earliest {
            return Err(Error::Unsupported(format!(
                "creating files with format bounds {:?} (only Earliest so far)",
                options.bounds
            )));
        }
        storage.set_len(0)?;
        let sizes = Sizes::EIGHT;
        let sb_len = encoded_len(0, sizes)?;
        let alloc = Arc::new(Mutex::new(FileAlloc::new(sb_len as u64, sizes.offset)));
        let ctx = FileSpace {
            eoa: 0,
            alloc: Some(Arc::clone(&alloc)),
        };
        let mut builder = CacheBuilder::new(Arc::clone(&storage), classes(), ctx);
        if let Some(c) = &settings.metadata {
            builder = builder.config(c.clone());
        }
        let meta = builder.build()?;
        let chunks = h5_chunkcache::ChunkCache::new(Arc::clone(&storage), settings.chunks.clone())?;
        let superblock = Superblock {
            version: 0,
            sizes,
            free_space_version: Some(0),
            root_entry_version: Some(0),
            shared_header_version: Some(0),
            group_leaf_k: Some(GROUP_LEAF_K),
            group_internal_k: Some(GROUP_INTERNAL_K),
            indexed_storage_k: None,
            consistency_flags: 0,
            base_address: 0,
            free_space_address: UNDEFINED_ADDRESS,
            extension_address: UNDEFINED_ADDRESS,
            eof_address: 0,
            driver_info_address: UNDEFINED_ADDRESS,
            root: Root::ObjectHeader(UNDEFINED_ADDRESS),
            encoded_len: sb_len,
        };
        let mut file = FileShared {
            storage,
            meta: Mutex::new(meta),
            chunks: Mutex::new(chunks),
            sizes,
            base: 0,
            superblock,
            root: UNDEFINED_ADDRESS,
            dir,
            sohm: Mutex::new(Some(None)),
            alloc: Some(alloc),
            write: Some(Mutex::new(WriteState::default())),
        };
        let (root, scratch) = create_group_object(&file)?;
        file.root = root;
        file.superblock.root = Root::SymbolTableEntry(SymbolTableEntry {
            link_name_offset: 0,
            object_header_address: root,
            scratch,
        });
        let sb = file.superblock;
        let alloc = file.alloc.clone();
        let entry = Decoded::writable(sb_len, sb, move |sb: &Superblock| {
            let mut sb = *sb;
            if let Some(a) = &alloc {
                sb.eof_address = a.lock().map_or(sb.eof_address, |a| a.eoa());
            }
            sb.encode()
        });
        file.meta
            .lock()
            .map_err(|_| Error::Poisoned)?
            .insert(
                MetadataKind::Superblock.id(),
                0,
                entry,
                // Pinned: it is never evicted early, and every flush re-dirties it so that its
                // end-of-file address is the final one.
                InsertFlags::FLUSH_LAST | InsertFlags::PIN,
            )
            .map_err(cache_error)?;
        Ok(Arc::new(file))
    }

    /// Whether the file was opened for writing.
    pub fn is_writable(&self) -> bool {
        self.write.is_some()
    }

    pub(crate) fn state(&self) -> Result<std::sync::MutexGuard<'_, WriteState>> {
        self.write
            .as_ref()
            .ok_or(Error::ReadOnly)?
            .lock()
            .map_err(|_| Error::Poisoned)
    }

    /// Allocates `len` bytes of file space (relative address).
    pub(crate) fn allocate(&self, kind: SpaceKind, len: u64) -> Result<u64> {
        let a = self.alloc.as_ref().ok_or(Error::ReadOnly)?;
        Ok(a.lock().map_err(|_| Error::Poisoned)?.allocate(kind, len)?)
    }

    /// Frees `len` bytes of file space at relative `addr`.
    pub(crate) fn free(&self, kind: SpaceKind, addr: u64, len: u64) -> Result<()> {
        let a = self.alloc.as_ref().ok_or(Error::ReadOnly)?;
        Ok(a.lock()
            .map_err(|_| Error::Poisoned)?
            .free(kind, addr, len)?)
    }

    /// The links of a group being written (`None`: not an old-style group changed here).
    pub(crate) fn written_links(&self, group: u64) -> Option<Vec<crate::group::LinkEntry>> {
        let w = self.write.as_ref()?.lock().ok()?;
        w.groups.get(&group).map(GroupTable::entries)
    }

    /// One link of a group being written (`None` outside: ask the file).
    pub(crate) fn written_link(
        &self,
        group: u64,
        name: &str,
    ) -> Option<Option<crate::group::LinkEntry>> {
        let w = self.write.as_ref()?.lock().ok()?;
        w.groups.get(&group).map(|g| g.find(name))
    }

    /// Creates a group named `name` in the group whose header is at `parent`; returns the new
    /// group's header address.
    pub fn create_group(&self, parent: u64, name: &str) -> Result<u64> {
        check_name(name)?;
        if self.written_link(parent, name).flatten().is_some() {
            return Err(Error::Exists(name.into()));
        }
        let (addr, scratch) = create_group_object(self)?;
        self.insert_link(parent, name, Target::Hard { addr, scratch })?;
        Ok(addr)
    }

    /// Adds a hard link `name` → the object at `target` to the group at `parent`.
    pub fn link_hard(&self, parent: u64, name: &str, target: u64) -> Result<()> {
        check_name(name)?;
        self.insert_link(
            parent,
            name,
            Target::Hard {
                addr: target,
                scratch: ScratchPad::None,
            },
        )
    }

    /// Adds a soft link `name` → `path` to the group at `parent`.
    pub fn link_soft(&self, parent: u64, name: &str, path: &str) -> Result<()> {
        check_name(name)?;
        if path.is_empty() || path.contains('\0') {
            return Err(Error::Invalid(format!("soft link target {path:?}")));
        }
        self.insert_link(parent, name, Target::Soft(path.as_bytes().to_vec()))
    }

    fn insert_link(&self, parent: u64, name: &str, target: Target) -> Result<()> {
        let mut w = self.state()?;
        let g = w.groups.get_mut(&parent).ok_or_else(|| {
            Error::Unsupported(format!(
                "adding links to group {parent:#x}, which this process did not create"
            ))
        })?;
        if g.links.contains_key(name.as_bytes()) {
            return Err(Error::Exists(name.into()));
        }
        g.links.insert(name.as_bytes().to_vec(), target);
        g.dirty = true;
        Ok(())
    }

    /// Writes every change to the file: raw data, chunk indexes, group tables, then all
    /// metadata (the superblock last), and syncs the storage.
    pub fn flush(&self) -> Result<()> {
        if self.write.is_none() {
            return Ok(());
        }
        self.chunks.lock().map_err(|_| Error::Poisoned)?.flush()?;
        let indexes = self.state()?.indexes.clone();
        for ix in indexes {
            ix.lay_out(self)?;
        }
        let mut tables: Vec<u64> = {
            let w = self.state()?;
            w.groups
                .iter()
                .filter(|(_, g)| g.dirty)
                .map(|(a, _)| *a)
                .collect()
        };
        tables.sort_unstable();
        for addr in tables {
            // Lay out outside the state lock (laying out allocates and uses the cache).
            let mut g = {
                let mut w = self.state()?;
                match w.groups.remove(&addr) {
                    Some(g) => g,
                    None => continue,
                }
            };
            let r = g.lay_out(self);
            self.state()?.groups.insert(addr, g);
            r?;
        }
        {
            let mut meta = self.meta.lock().map_err(|_| Error::Poisoned)?;
            meta.mark_dirty(self.abs(0)?).map_err(cache_error)?;
            meta.flush(FlushFlags::NONE).map_err(cache_error)?;
        }
        let eoa = self
            .alloc
            .as_ref()
            .map_or(0, |a| a.lock().map_or(0, |a| a.eoa()));
        if self.storage.len()? < eoa {
            self.storage.set_len(eoa)?;
        }
        self.storage.sync()?;
        Ok(())
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.contains('/') || name.contains('\0') || name == "." {
        return Err(Error::Invalid(format!("link name {name:?}")));
    }
    Ok(())
}

/// Creates an empty old-style group: its heap header, B-tree root and object header. The table
/// is laid out at flush.
fn create_group_object(file: &FileShared) -> Result<(u64, ScratchPad)> {
    let sizes = file.sizes;
    let heap = file.allocate(SpaceKind::Meta, LocalHeapHeader::encoded_len(sizes) as u64)?;
    let btree = file.allocate(
        SpaceKind::Meta,
        node_len(sizes, GROUP_INTERNAL_K, NodeType::Group, 0)? as u64,
    )?;
    let body = SymbolTableMessage {
        btree_address: btree,
        heap_address: heap,
    }
    .encode(sizes);
    let addr = ohdr::create(file, 1, vec![ohdr::message(kind::SYMBOL_TABLE, 0, body)])?;
    file.state()?
        .groups
        .insert(addr, GroupTable::new(btree, heap));
    Ok((
        addr,
        ScratchPad::SymbolTable {
            btree_address: btree,
            heap_address: heap,
        },
    ))
}

impl Drop for FileShared {
    /// A writable file is flushed when its last handle goes; errors are lost here, which is why
    /// `File::close` exists.
    fn drop(&mut self) {
        if self.write.is_some() {
            let _ = self.flush();
        }
    }
}
