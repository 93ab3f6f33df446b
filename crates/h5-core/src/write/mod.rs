//! Writing: file creation, groups, datasets and attributes (issue 5, in progress).
//!
//! Every structure written goes into the metadata cache as an entry whose value knows how to
//! encode itself ([`Decoded::writable`]); the cache writes them in address order on flush, the
//! superblock last. Raw data goes through the shared chunk cache with writable layouts
//! (`chunks.rs`). Structures that libhdf5 updates node by node (old-style group tables, v1 B-tree
//! chunk indexes) are kept as ordered tables here and laid out at flush; see `docs/design.md` §5.

pub mod alloc;
pub(crate) mod attrs;
pub(crate) mod chunks;
pub mod dataset;
pub(crate) mod dense;
pub mod links;
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
/// `H5Pset_libver_bounds`). Ordered oldest to newest. The default is [`FormatBounds::V18`],
/// HDF5 2.0's default low bound (HDF5 1.x and h5py default to [`FormatBounds::Earliest`]).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
#[non_exhaustive]
pub enum FormatBounds {
    /// The earliest formats every HDF5 library reads: superblock 0, version 1 object headers,
    /// symbol-table groups, version 1 B-tree chunk indexes (HDF5 1.x's and h5py's default).
    Earliest,
    /// HDF5 1.8 formats: superblock 2, version 2 object headers (no times stored), link
    /// messages with compact and dense (fractal heap + v2 B-tree) groups, compact and dense
    /// attributes, external links; chunk indexes stay v1 B-trees. HDF5 2.0's default low
    /// bound and h5's default.
    #[default]
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

    /// Whether new groups and objects use the HDF5 1.8 formats (v2 object headers, link
    /// messages, dense storage).
    pub fn new_style(self) -> bool {
        self >= FormatBounds::V18
    }

    /// Superblock version (libhdf5's `H5F_super_ver_bounds`).
    pub fn superblock_version(self) -> u8 {
        match self {
            FormatBounds::Earliest => 0,
            FormatBounds::V18 => 2,
            _ => 3,
        }
    }

    /// Object header version (`H5O_obj_ver_bounds`).
    pub fn object_header_version(self) -> u8 {
        if self.new_style() { 2 } else { 1 }
    }

    /// Dataspace message version (`H5O_sdspace_ver_bounds`).
    pub fn dataspace_version(self) -> u8 {
        if self.new_style() { 2 } else { 1 }
    }

    /// Fill value message version (`H5O_fill_ver_bounds`; the earliest bound writes version 2,
    /// the version libhdf5's dataset creation starts from).
    pub fn fill_value_version(self) -> u8 {
        if self.new_style() { 3 } else { 2 }
    }

    /// Attribute message version (`H5O_attr_ver_bounds`).
    pub fn attribute_version(self) -> u8 {
        if self.new_style() { 3 } else { 1 }
    }

    /// Filter pipeline message version (`H5O_pline_ver_bounds`).
    pub fn pipeline_version(self) -> u8 {
        if self.new_style() { 2 } else { 1 }
    }

    /// Datatype message version for `t`: the lowest that expresses it, raised to the bound's
    /// (`H5O_dtype_ver_bounds`: 3 from V18, 4 from V112). libhdf5 2.0 raises every type to
    /// version 5 under its latest bound, which HDF5 1.14 cannot read; h5 keeps 4 there for
    /// types that do not need 5.
    pub fn datatype_version(self, t: &h5_format::datatype::Datatype) -> u8 {
        let floor = match self {
            FormatBounds::Earliest => 1,
            FormatBounds::V18 | FormatBounds::V110 => 3,
            _ => 4,
        };
        t.min_version().max(floor)
    }
}

/// Options for a new file.
#[derive(Clone, Debug, Default)]
pub struct CreateOptions {
    /// Format versions of new objects.
    pub bounds: FormatBounds,
    /// Creation options of the root group (new-style groups only).
    pub root_group: links::GroupOptions,
}

/// What a writable file keeps besides the caches.
#[derive(Debug, Default)]
pub(crate) struct WriteState {
    /// Format versions of new objects.
    pub(crate) bounds: FormatBounds,
    /// Old-style groups created or changed, by object header address.
    pub(crate) groups: HashMap<u64, GroupTable>,
    /// New-style groups created or changed, by object header address.
    pub(crate) link_tables: HashMap<u64, links::LinkTable>,
    /// Dense attribute storage of objects written here, by object header address.
    pub(crate) attr_tables: HashMap<u64, attrs::AttrTable>,
    /// Chunked datasets written, whose chunk indexes are laid out at flush.
    pub(crate) indexes: Vec<Arc<chunks::BtreeChunkIndex>>,
    /// Chunked datasets created here, by object header address (for resizing).
    pub(crate) chunked: HashMap<u64, Arc<chunks::ChunkedWriteLayout>>,
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
        storage.set_len(0)?;
        let sizes = Sizes::EIGHT;
        let sb_version = options.bounds.superblock_version();
        let sb_len = encoded_len(sb_version, sizes)?;
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
        let old = sb_version < 2;
        let superblock = Superblock {
            version: sb_version,
            sizes,
            free_space_version: old.then_some(0),
            root_entry_version: old.then_some(0),
            shared_header_version: old.then_some(0),
            group_leaf_k: old.then_some(GROUP_LEAF_K),
            group_internal_k: old.then_some(GROUP_INTERNAL_K),
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
            write: Some(Mutex::new(WriteState {
                bounds: options.bounds,
                ..WriteState::default()
            })),
        };
        let (root, scratch) = create_group_object(&file, &options.root_group)?;
        file.root = root;
        file.superblock.root = if old {
            Root::SymbolTableEntry(SymbolTableEntry {
                link_name_offset: 0,
                object_header_address: root,
                scratch,
            })
        } else {
            Root::ObjectHeader(root)
        };
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

    /// The format bounds of new objects (`Earliest` for a read-only file).
    pub fn bounds(&self) -> FormatBounds {
        self.write
            .as_ref()
            .and_then(|w| w.lock().ok().map(|w| w.bounds))
            .unwrap_or(FormatBounds::Earliest)
    }

    /// The links of a group being written (`None`: not a group created here).
    pub(crate) fn written_links(&self, group: u64) -> Option<Vec<crate::group::LinkEntry>> {
        let w = self.write.as_ref()?.lock().ok()?;
        if let Some(t) = w.link_tables.get(&group) {
            return Some(t.entries());
        }
        w.groups.get(&group).map(GroupTable::entries)
    }

    /// The encoded attribute messages of an object whose attributes are dense and written
    /// here (`None`: ask the file), in name order.
    pub(crate) fn written_attributes(&self, obj: u64) -> Option<Vec<Vec<u8>>> {
        let w = self.write.as_ref()?.lock().ok()?;
        w.attr_tables.get(&obj).map(attrs::AttrTable::bodies)
    }

    /// Whether the object at `obj`, written here, stores its attributes densely (as of the
    /// next flush).
    pub fn attributes_are_dense(&self, obj: u64) -> bool {
        self.write
            .as_ref()
            .and_then(|w| w.lock().ok())
            .is_some_and(|w| w.attr_tables.contains_key(&obj))
    }

    /// Whether the new-style group at `group`, created here, stores its links densely (after
    /// the next flush); `None` for other groups.
    pub fn group_is_dense(&self, group: u64) -> Option<bool> {
        let w = self.write.as_ref()?.lock().ok()?;
        w.link_tables.get(&group).map(links::LinkTable::is_dense)
    }

    /// One link of a group being written (`None` outside: ask the file).
    pub(crate) fn written_link(
        &self,
        group: u64,
        name: &str,
    ) -> Option<Option<crate::group::LinkEntry>> {
        let w = self.write.as_ref()?.lock().ok()?;
        if let Some(t) = w.link_tables.get(&group) {
            return Some(t.find(name));
        }
        w.groups.get(&group).map(|g| g.find(name))
    }

    /// Creates a group named `name` in the group whose header is at `parent`; returns the new
    /// group's header address.
    pub fn create_group(&self, parent: u64, name: &str) -> Result<u64> {
        self.create_group_with(parent, name, &links::GroupOptions::default())
    }

    /// Creates a group named `name` with creation `options` (used by new-style groups; the
    /// earliest format has no options) in the group at `parent`; returns its header address.
    pub fn create_group_with(
        &self,
        parent: u64,
        name: &str,
        options: &links::GroupOptions,
    ) -> Result<u64> {
        check_name(name)?;
        if self.written_link(parent, name).flatten().is_some() {
            return Err(Error::Exists(name.into()));
        }
        let (addr, scratch) = create_group_object(self, options)?;
        self.insert_link(parent, name, Target::Hard { addr, scratch })?;
        Ok(addr)
    }

    /// Adds an external link `name` → the object at `path` in the file `file_name` to the
    /// group at `parent` (new-style groups only: symbol tables cannot hold external links).
    pub fn link_external(
        &self,
        parent: u64,
        name: &str,
        file_name: &str,
        path: &str,
    ) -> Result<()> {
        check_name(name)?;
        if file_name.is_empty()
            || file_name.contains('\0')
            || path.is_empty()
            || path.contains('\0')
        {
            return Err(Error::Invalid(format!(
                "external link target {file_name:?}:{path:?}"
            )));
        }
        let mut w = self.state()?;
        let t = w.link_tables.get_mut(&parent).ok_or_else(|| {
            Error::Unsupported(format!(
                "external links in group {parent:#x}: only new-style groups created here (format \
                 bounds V18 and newer) hold them"
            ))
        })?;
        if t.links.contains_key(name.as_bytes()) {
            return Err(Error::Exists(name.into()));
        }
        t.insert(
            name,
            h5_format::message::link::LinkTarget::External {
                flags: 0,
                file: file_name.as_bytes().to_vec(),
                path: path.as_bytes().to_vec(),
            },
        );
        Ok(())
    }

    /// Adds a hard link `name` → the existing object at `target` to the group at `parent`,
    /// counting one more link in the object's header.
    pub fn link_hard(&self, parent: u64, name: &str, target: u64) -> Result<()> {
        check_name(name)?;
        self.insert_link(
            parent,
            name,
            Target::Hard {
                addr: target,
                scratch: ScratchPad::None,
            },
        )?;
        ohdr::add_reference(self, target)
    }

    /// Adds a soft link `name` → `path` to the group at `parent`.
    pub fn link_soft(&self, parent: u64, name: &str, path: &str) -> Result<()> {
        check_name(name)?;
        if path.is_empty() || path.contains('\0') {
            return Err(Error::Invalid(format!("soft link target {path:?}")));
        }
        self.insert_link(parent, name, Target::Soft(path.as_bytes().to_vec()))
    }

    /// Removes the link `name` from the group at `parent` (a new-style group created here).
    /// A hard link's object counts one link less; an object losing its last link stays in the
    /// file, unreachable (its space is not reclaimed yet). Old-style groups: not yet.
    pub fn unlink(&self, parent: u64, name: &str) -> Result<()> {
        let removed = {
            let mut w = self.state()?;
            let Some(t) = w.link_tables.get_mut(&parent) else {
                return Err(Error::Unsupported(format!(
                    "removing links from group {parent:#x}: only new-style groups created here \
                     so far"
                )));
            };
            t.remove(name)
                .ok_or_else(|| Error::NotFound(name.to_owned()))?
        };
        if let h5_format::message::link::LinkTarget::Hard(addr) = removed.target {
            ohdr::drop_reference(self, addr)?;
        }
        Ok(())
    }

    fn insert_link(&self, parent: u64, name: &str, target: Target) -> Result<()> {
        let mut w = self.state()?;
        if let Some(t) = w.link_tables.get_mut(&parent) {
            if t.links.contains_key(name.as_bytes()) {
                return Err(Error::Exists(name.into()));
            }
            use h5_format::message::link::LinkTarget;
            t.insert(
                name,
                match target {
                    Target::Hard { addr, .. } => LinkTarget::Hard(addr),
                    Target::Soft(p) => LinkTarget::Soft(p),
                },
            );
            return Ok(());
        }
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
        self.lay_out_dirty(|w| &mut w.link_tables)?;
        self.lay_out_dirty(|w| &mut w.attr_tables)?;
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

/// A structure kept as a table while the file is open and laid out at flush.
trait LaidOutAtFlush {
    /// Changed since its last layout.
    fn is_dirty(&self) -> bool;
    /// Writes it for the object whose header is at `addr`.
    fn lay_out_for(&mut self, file: &FileShared, addr: u64) -> Result<()>;
}

impl LaidOutAtFlush for links::LinkTable {
    fn is_dirty(&self) -> bool {
        self.dirty
    }
    fn lay_out_for(&mut self, file: &FileShared, addr: u64) -> Result<()> {
        self.lay_out(file, addr)
    }
}

impl LaidOutAtFlush for attrs::AttrTable {
    fn is_dirty(&self) -> bool {
        self.dirty
    }
    fn lay_out_for(&mut self, file: &FileShared, addr: u64) -> Result<()> {
        self.lay_out(file, addr)
    }
}

impl FileShared {
    /// Lays out every dirty table of one kind, in address order, each outside the state lock
    /// (laying out allocates and uses the cache).
    fn lay_out_dirty<T: LaidOutAtFlush>(
        &self,
        pick: impl Fn(&mut WriteState) -> &mut HashMap<u64, T>,
    ) -> Result<()> {
        let mut dirty: Vec<u64> = {
            let mut w = self.state()?;
            pick(&mut w)
                .iter()
                .filter(|(_, t)| t.is_dirty())
                .map(|(a, _)| *a)
                .collect()
        };
        dirty.sort_unstable();
        for addr in dirty {
            let Some(mut t) = pick(&mut *self.state()?).remove(&addr) else {
                continue;
            };
            let r = t.lay_out_for(self, addr);
            pick(&mut *self.state()?).insert(addr, t);
            r?;
        }
        Ok(())
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.contains('/') || name.contains('\0') || name == "." {
        return Err(Error::Invalid(format!("link name {name:?}")));
    }
    Ok(())
}

/// Creates an empty group in the style of the file's format bounds; its links are laid out at
/// flush. An old-style group gets its heap header, B-tree root and object header (and the
/// scratch pad caching them); a new-style one a header with link info and group info messages.
fn create_group_object(
    file: &FileShared,
    options: &links::GroupOptions,
) -> Result<(u64, ScratchPad)> {
    let sizes = file.sizes;
    let bounds = file.state()?.bounds;
    if bounds.new_style() {
        if options.index_order && !options.track_order {
            return Err(Error::Invalid(
                "indexing link creation order needs tracking it".into(),
            ));
        }
        if options.min_dense > options.max_compact.saturating_add(1) {
            return Err(Error::Invalid(format!(
                "minimum dense links {} above maximum compact links {} + 1",
                options.min_dense, options.max_compact
            )));
        }
        if options.attr_index_order && !options.attr_track_order {
            return Err(Error::Invalid(
                "indexing attribute creation order needs tracking it".into(),
            ));
        }
        let mut messages = vec![
            ohdr::message(kind::LINK_INFO, 0, options.link_info().encode(sizes)),
            ohdr::message(
                kind::GROUP_INFO,
                h5_format::object_header::msg_flags::CONSTANT,
                options.group_info().encode(),
            ),
        ];
        let (flags, ainfo) =
            attrs::header_parts(file, options.attr_track_order, options.attr_index_order);
        messages.extend(ainfo);
        // Room for the group's first links, as libhdf5 sizes a new group from the group info
        // estimates (4 links of 8-byte names).
        let version = bounds.object_header_version();
        let estimate = h5_format::message::link::Link {
            name: vec![b'x'; usize::from(links::ESTIMATED_NAME_LEN)],
            charset: h5_format::message::link::CharSet::Ascii,
            creation_order: options.track_order.then_some(0),
            target: h5_format::message::link::LinkTarget::Hard(0),
        }
        .encoded_len(sizes);
        let reserve =
            usize::from(links::ESTIMATED_ENTRIES) * ohdr::message_bytes(version, flags, estimate);
        let addr = ohdr::create_with_flags(file, version, flags, reserve, messages)?;
        file.state()?
            .link_tables
            .insert(addr, links::LinkTable::new(*options));
        return Ok((addr, ScratchPad::None));
    }
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
