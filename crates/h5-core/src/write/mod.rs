//! Writing: file creation, groups, datasets and attributes (issue 5, in progress).
//!
//! Every structure written goes into the metadata cache as an entry whose value knows how to
//! encode itself ([`Decoded::writable`]); the cache writes them in address order on flush, the
//! superblock last. Raw data goes through the shared chunk cache with writable layouts
//! (`chunks.rs`). Every structure is changed in place, one entry at a time, through the cache:
//! old-style groups and version 1 B-tree chunk indexes node by node (`crate::stab`,
//! `crate::btree1`), new-style groups, attributes and v2 B-tree chunk indexes record by record
//! (`links.rs`, `attrs.rs`, `chunk_index/bt2.rs` over `crate::btree2` and `crate::fheap`), array
//! chunk indexes element by element (`crate::indexes`); see `docs/design.md` §5.

pub mod alloc;
pub(crate) mod alloc_time;
pub(crate) mod attrs;
pub mod chunk_index;
pub(crate) mod chunks;
pub mod compact;
pub mod dataset;

pub mod fspace;
pub mod gheap;
pub mod io;
pub mod links;
pub(crate) mod ohdr;
pub(crate) mod vlen;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use h5_format::Sizes;
use h5_format::UNDEFINED_ADDRESS;
use h5_format::message::kind;
use h5_format::message::link::LinkTarget;
use h5_format::message::symbol_table::SymbolTableMessage;
use h5_format::superblock::{Root, ScratchPad, Superblock, SymbolTableEntry, encoded_len};
use h5_io::{CommitPoint, Marker, Storage};
use h5_metacache::{
    ExpungeFlags, FlushFlags, InsertFlags, MetadataKind, ProtectFlags, UnprotectFlags,
};

use crate::error::{Error, Result};
use crate::file::{CacheSettings, FileShared, build_metadata_cache, cache_error};
use crate::meta::{Decoded, FileSpace, Load};
use crate::stab::{GroupKs, SymbolTable, Target};
use alloc::{FileAlloc, SpaceKind};

/// Group leaf node K (entries per symbol table node: twice this) written in new files.
const GROUP_LEAF_K: u16 = 4;
/// Group internal node K (children per B-tree node: twice this) written in new files.
const GROUP_INTERNAL_K: u16 = 16;

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

    /// Datatype message version for `t` (`H5O_dtype_ver_bounds`): the bound's version (3 from
    /// V18, 4 from V112, 5 from V200) for compound, array and enumeration types and the
    /// variable-length types holding them, the lowest that expresses it for every other type
    /// (as libhdf5's upgrade of a type to the file's bound does).
    pub fn datatype_version(self, t: &h5_format::datatype::Datatype) -> u8 {
        let floor = match self {
            FormatBounds::Earliest => 1,
            FormatBounds::V18 | FormatBounds::V110 => 3,
            FormatBounds::V112 | FormatBounds::V114 => 4,
            FormatBounds::V200 => 5,
        };
        t.upgraded_version(floor)
    }
}

/// Options for a new file.
#[derive(Clone, Debug)]
pub struct CreateOptions {
    /// The low format bound: the versions new objects are written in (see [`FormatBounds`]).
    pub bounds: FormatBounds,
    /// The high format bound: no object is written in a format newer than this one allows
    /// (libhdf5's `high` of `H5Pset_libver_bounds`); a feature that needs a newer format is an
    /// error. Default [`FormatBounds::LATEST`]; at least [`FormatBounds::V18`] and at least the
    /// low bound.
    pub high: FormatBounds,
    /// Creation options of the root group (new-style groups only).
    pub root_group: links::GroupOptions,
    /// File-space strategy, persistence, threshold and page size (libhdf5's defaults unless
    /// set; other settings raise the superblock to at least version 2).
    pub file_space: fspace::FileSpaceOptions,
}

impl Default for CreateOptions {
    /// HDF5 2.0's defaults: bounds ([`FormatBounds::V18`], [`FormatBounds::LATEST`]), libhdf5's
    /// root group and file-space settings.
    fn default() -> Self {
        CreateOptions {
            bounds: FormatBounds::default(),
            high: FormatBounds::LATEST,
            root_group: links::GroupOptions::default(),
            file_space: fspace::FileSpaceOptions::default(),
        }
    }
}

impl CreateOptions {
    /// The defaults with the format bounds `(low, high)`, as libhdf5's
    /// `H5Pset_libver_bounds(fapl, low, high)`; checked when the file is created.
    pub fn with_bounds(low: FormatBounds, high: FormatBounds) -> Self {
        CreateOptions {
            bounds: low,
            high,
            ..CreateOptions::default()
        }
    }

    /// Checks the bounds as libhdf5 does: `low <= high` and `high >= V18`.
    pub fn check_bounds(&self) -> Result<()> {
        if self.high < FormatBounds::V18 || self.bounds > self.high {
            return Err(Error::Invalid(format!(
                "format bounds ({:?}, {:?}): the high bound must be V18 or newer and not below \
                 the low bound",
                self.bounds, self.high
            )));
        }
        Ok(())
    }
}

/// What a writable file keeps besides the caches.
#[derive(Debug, Default)]
pub(crate) struct WriteState {
    /// Format versions of new objects.
    pub(crate) bounds: FormatBounds,
    /// The newest formats objects may be written in (`None`: the latest).
    pub(crate) high: Option<FormatBounds>,
    /// Storage of datasets written that has work to do at flush (chunk indexes, compact
    /// data).
    pub(crate) indexes: Vec<Arc<dyn chunks::AtFlush>>,
    /// Chunked datasets created or opened for writing here, by object header address (for
    /// resizing and deletion).
    pub(crate) chunked: HashMap<u64, Arc<chunks::ChunkedWriteLayout>>,
    /// Storage allocated at the first write (late allocation), by object header address.
    pub(crate) pending: HashMap<u64, alloc_time::Pending>,
    /// Absolute address of the superblock (after any userblock).
    pub(crate) superblock_at: u64,
    /// The global heap collection being filled with variable-length data.
    pub(crate) heap: gheap::HeapState,
    /// The file space info message and the persisted managers (files with non-default
    /// file-space settings).
    pub(crate) space_info: Option<fspace::SpaceInfoState>,
    /// The free space of the fractal heaps changed in this session, by header address (libhdf5
    /// keeps the same in each heap's free-space manager).
    pub(crate) heap_space: HashMap<u64, crate::fheap::HeapSpace>,
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

/// What a flush does with the chunk cache's entries once their chunks are written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ChunkFlush {
    /// They stay resident, clean (a flush while the file stays open).
    Keep,
    /// They are removed, a batch at a time ([`h5_chunkcache::ChunkCache::flush_and_evict_all`]):
    /// the file's closing flush.
    EvictAll,
}

impl FileShared {
    /// Creates a new, empty HDF5 file in `storage` (which is truncated) with a root group.
    pub fn create(
        storage: Arc<dyn h5_io::Storage>,
        settings: &CacheSettings,
        options: &CreateOptions,
        dir: Option<std::path::PathBuf>,
    ) -> Result<Arc<FileShared>> {
        options.file_space.validate()?;
        options.check_bounds()?;
        storage.set_len(0)?;
        let (storage, meta_storage, pagebuf) = crate::pagebuf::faces(storage, settings)?;
        // The committed state is the empty file: nothing to journal until the first flush.
        storage.commit(&commit_point(Vec::new(), 0))?;
        let sizes = Sizes::EIGHT;
        // Non-default file-space settings live in the superblock extension (version 2 and
        // up), whatever the low bound: libhdf5 raises the superblock the same way.
        let custom_space = !options.file_space.is_default();
        let mut sb_version = options.bounds.superblock_version();
        if custom_space {
            sb_version = sb_version.max(2);
        }
        let sb_len = encoded_len(sb_version, sizes)?;
        // The superblock is the first metadata allocation (in the metadata aggregator's first
        // block, as libhdf5 allocates it), at address 0.
        let mut first = FileAlloc::with_config(options.file_space.space_config(sizes.offset), 0)?;
        let sb_at = first.allocate(SpaceKind::Meta, sb_len as u64)?;
        if sb_at != 0 {
            return Err(Error::Unsupported(format!(
                "the superblock was placed at {sb_at:#x}"
            )));
        }
        let alloc = Arc::new(Mutex::new(first));
        let ctx = FileSpace {
            eoa: 0,
            alloc: Some(Arc::clone(&alloc)),
            base: 0,
        };
        let meta = build_metadata_cache(&meta_storage, settings, ctx)?;
        let chunks = h5_chunkcache::ChunkCache::new(
            Arc::clone(&storage) as Arc<dyn Storage>,
            settings.chunks.clone(),
        )?;
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
            meta: Arc::new(Mutex::new(meta)),
            chunks: h5_chunkcache::SharedChunkCache::new(chunks),
            sizes,
            base: 0,
            superblock,
            root: UNDEFINED_ADDRESS,
            dir,
            sohm: Mutex::new(Some(None)),
            path: std::sync::OnceLock::new(),
            descriptions: Default::default(),
            group_header_memo: Default::default(),
            this: std::sync::OnceLock::new(),
            alloc: Some(alloc),
            write: Some(Mutex::new(WriteState {
                bounds: options.bounds,
                high: Some(options.high),
                ..WriteState::default()
            })),
            pagebuf,
            swmr: Default::default(),
            legacy_swmr: Default::default(),
            sync: settings.sync,
            registering: Mutex::new(()),
        };
        file.enable_page_buffer_for_new(&options.file_space)?;
        let (root, scratch) = create_group_object(&file, &options.root_group)?;
        file.root = root;
        if custom_space {
            let ext = fspace::create_extension(
                &file,
                &options.file_space,
                options.bounds.object_header_version(),
            )?;
            file.superblock.extension_address = ext.extension;
            file.state()?.space_info = Some(ext);
        }
        file.superblock.root = if old {
            Root::SymbolTableEntry(SymbolTableEntry {
                link_name_offset: 0,
                object_header_address: root,
                scratch,
            })
        } else {
            Root::ObjectHeader(root)
        };
        file.insert_superblock(0)?;
        Ok(file.shared())
    }

    /// Opens the HDF5 file in `storage` for reading and writing. New space is allocated from
    /// the end of the file (the free space of files written before is not tracked).
    pub fn open_rw(
        storage: Arc<dyn h5_io::Storage>,
        settings: &CacheSettings,
        dir: Option<std::path::PathBuf>,
    ) -> Result<Arc<FileShared>> {
        let (mut file, at) = FileShared::open_unshared(storage, settings, dir)?;
        let sb = file.superblock;
        if sb.driver_info_address != UNDEFINED_ADDRESS {
            return Err(Error::Unsupported(
                "writing a file with a driver information block (family or multi driver)".into(),
            ));
        }
        if sb.version >= 3 && sb.consistency_flags & 0b101 != 0 {
            return Err(Error::Unsupported(
                "the superblock says another process has the file open for writing (or did \
                 not close it): clear the flags with h5clear first"
                    .into(),
            ));
        }
        // Nothing is overwritten: new space starts after both the recorded end of the file
        // and its actual length.
        // The superblock's end-of-file address counts from the start of the file, userblock
        // included (what libhdf5 writes and checks), unlike every other address.
        let end = file.storage.len()?.saturating_sub(file.base);
        let eoa = sb.eof_address.saturating_sub(file.base).max(end);
        // The file's own file-space settings and persisted free space, if any.
        let (alloc, space_info) = fspace::open_alloc(&file, eoa)?;
        // The file as found is the committed state, except its free space: what libhdf5
        // persisted, and anything past the recorded end of the file.
        {
            let mut unused: Vec<std::ops::Range<u64>> = alloc
                .free_sections()
                .iter()
                .map(|s| absolute_range(file.base, s.addr, s.addr.saturating_add(s.len)))
                .collect::<Result<_>>()?;
            unused.push(sb.eof_address.max(at)..file.storage.len()?);
            file.storage.commit(&commit_point(unused, at))?;
        }
        let alloc = Arc::new(Mutex::new(alloc));
        {
            let mut meta = file.meta.lock().map_err(|_| Error::Poisoned)?;
            let ctx = meta.ctx_mut();
            ctx.alloc = Some(Arc::clone(&alloc));
            ctx.base = file.base;
        }
        file.alloc = Some(alloc);
        // New objects use the formats the superblock's version implies (libhdf5 raises its low
        // bound the same way when it opens a newer file).
        // A superblock 2 file whose root group has a version 1 header was written in the
        // earliest formats (its superblock was raised for file-space settings only).
        let bounds = match sb.version {
            0 | 1 => FormatBounds::Earliest,
            2 if crate::object::ObjectHeader::load(&file, file.root)?.version == 1 => {
                FormatBounds::Earliest
            }
            2 => FormatBounds::V18,
            _ => FormatBounds::V110,
        };
        file.write = Some(Mutex::new(WriteState {
            superblock_at: at,
            bounds,
            space_info,
            ..WriteState::default()
        }));
        fspace::release_loaded(&file)?;
        {
            let mut meta = file.meta.lock().map_err(|_| Error::Poisoned)?;
            if meta.contains(at) {
                meta.expunge(MetadataKind::Superblock.id(), at, ExpungeFlags::NONE)
                    .map_err(cache_error)?;
            }
        }
        file.insert_superblock(at)?;
        Ok(file.shared())
    }

    /// Puts the superblock into the cache at absolute `at` as a pinned entry flushed last, whose
    /// end-of-file address is the allocator's at each write.
    fn insert_superblock(&self, at: u64) -> Result<()> {
        let sb = self.superblock;
        let alloc = self.alloc.clone();
        let base = self.base;
        let entry = Decoded::writable(sb.encoded_len, sb, move |sb: &Superblock| {
            let mut sb = *sb;
            if let Some(a) = &alloc {
                // Absolute, like libhdf5's (see `open_rw`).
                if let Ok(a) = a.lock() {
                    sb.eof_address = base.checked_add(a.eoa()).ok_or_else(|| {
                        h5_format::FormatError::Corrupted {
                            structure: "superblock",
                            address: base,
                            reason: "the end of allocation overflows the file".into(),
                        }
                    })?;
                }
            }
            sb.encode()
        });
        self.meta
            .lock()
            .map_err(|_| Error::Poisoned)?
            .insert(
                MetadataKind::Superblock.id(),
                at,
                entry,
                // Pinned: it is never evicted early, and every flush re-dirties it so that its
                // end-of-file address is the final one.
                InsertFlags::FLUSH_LAST | InsertFlags::PIN,
            )
            .map_err(cache_error)?;
        Ok(())
    }

    /// Whether the file was opened for writing.
    pub fn is_writable(&self) -> bool {
        self.write.is_some()
    }

    /// The file's group K values (symbol table nodes, group B-trees).
    pub(crate) fn group_ks(&self) -> GroupKs {
        GroupKs {
            leaf: self.superblock.group_leaf_k.unwrap_or(GROUP_LEAF_K),
            internal: self.superblock.group_internal_k.unwrap_or(GROUP_INTERNAL_K),
        }
    }

    /// The file's chunk B-tree K.
    pub(crate) fn chunk_btree_k(&self) -> u16 {
        self.superblock
            .indexed_storage_k
            .unwrap_or(chunks::CHUNK_BTREE_K)
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

    /// Frees `len` bytes of file space at relative `addr` (a VFD SWMR writer reuses it only
    /// max_lag ticks later).
    pub(crate) fn free(&self, kind: SpaceKind, addr: u64, len: u64) -> Result<()> {
        if self.defer_free(kind, addr, len)? {
            return Ok(());
        }
        self.free_now(kind, addr, len)
    }

    /// Gives `len` bytes of file space at relative `addr` back to the allocator now.
    pub(crate) fn free_now(&self, kind: SpaceKind, addr: u64, len: u64) -> Result<()> {
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

    /// The high format bound of new objects (the latest for a file opened for writing, which
    /// records none).
    pub fn high_bound(&self) -> FormatBounds {
        self.write
            .as_ref()
            .and_then(|w| w.lock().ok().and_then(|w| w.high))
            .unwrap_or(FormatBounds::LATEST)
    }

    /// Whether the object at `obj` stores its attributes densely.
    pub fn attributes_are_dense(&self, obj: u64) -> Result<bool> {
        let oh = crate::object::ObjectHeader::load(self, obj)?;
        Ok(oh
            .find(|m| match m {
                h5_format::message::Message::AttributeInfo(i) => Some(*i),
                _ => None,
            })
            .is_some_and(|i| i.fractal_heap_address != UNDEFINED_ADDRESS))
    }

    /// Whether the new-style group at `group` stores its links densely (`None`: an old-style
    /// group).
    pub fn group_is_dense(&self, group: u64) -> Option<bool> {
        let oh = crate::object::ObjectHeader::load(self, group).ok()?;
        if !links::is_new_style(&oh) {
            return None;
        }
        links::is_dense(self, group).ok()
    }

    /// Whether the group at `group` has a link `name`.
    pub(crate) fn has_link(&self, group: u64, name: &str) -> Result<bool> {
        let oh = crate::object::ObjectHeader::load(self, group)?;
        Ok(crate::group::find(self, &oh, name)?.is_some())
    }

    /// The symbol table of the group at `group`, when it is an old-style group.
    fn symbol_table(&self, group: u64) -> Result<Option<SymbolTable>> {
        let oh = crate::object::ObjectHeader::load(self, group)?;
        Ok(SymbolTable::of(&oh))
    }

    /// Where a new link `name` of the group at `parent` goes: the name checked (its form, and
    /// absent from the group: [`Error::Exists`]) with one read of the group's header and one
    /// lookup, before anything changes. [`FileShared::insert_link_at`] then adds the link
    /// without reading the header or looking the name up again.
    pub(crate) fn new_link_place(&self, parent: u64, name: &str) -> Result<LinkPlace> {
        check_name(name)?;
        let oh = crate::object::ObjectHeader::load_group(self, parent)?;
        if let Some(st) = SymbolTable::of(&oh) {
            if st
                .find(&mut self.cache()?, self.group_ks(), name.as_bytes())?
                .is_some()
            {
                return Err(Error::Exists(name.into()));
            }
            return Ok(LinkPlace::Symbols(st));
        }
        Ok(LinkPlace::Links(links::place(self, &oh, name)?))
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
        self.check_usable()?;
        self.check_structure_change("creating a group")?;
        let place = self.new_link_place(parent, name)?;
        let (addr, scratch) = create_group_object(self, options)?;
        self.insert_link_at(place, parent, name, LinkTarget::Hard(addr), scratch)?;
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
        self.check_usable()?;
        self.check_structure_change("adding a link")?;
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
        self.insert_link(
            parent,
            name,
            LinkTarget::External {
                flags: 0,
                file: file_name.as_bytes().to_vec(),
                path: path.as_bytes().to_vec(),
            },
            ScratchPad::None,
        )
    }

    /// Adds a hard link `name` → the existing object at `target` to the group at `parent`; the
    /// object gains one reference.
    pub fn link_hard(&self, parent: u64, name: &str, target: u64) -> Result<()> {
        self.check_usable()?;
        self.check_structure_change("adding a link")?;
        let place = self.new_link_place(parent, name)?;
        ohdr::adjust_refcount(self, target, 1)?;
        self.link_new(place, parent, name, target)
    }

    /// Adds a hard link `name` → the object just created at `target` (whose reference count
    /// of one stands for this link) to the group at `parent`, at `place`
    /// ([`FileShared::new_link_place`] of the same group and name).
    pub(crate) fn link_new(
        &self,
        place: LinkPlace,
        parent: u64,
        name: &str,
        target: u64,
    ) -> Result<()> {
        self.insert_link_at(
            place,
            parent,
            name,
            LinkTarget::Hard(target),
            ScratchPad::None,
        )
    }

    /// Adds a soft link `name` → `path` to the group at `parent`.
    pub fn link_soft(&self, parent: u64, name: &str, path: &str) -> Result<()> {
        self.check_usable()?;
        self.check_structure_change("adding a link")?;
        check_name(name)?;
        if path.is_empty() || path.contains('\0') {
            return Err(Error::Invalid(format!("soft link target {path:?}")));
        }
        self.insert_link(
            parent,
            name,
            LinkTarget::Soft(path.as_bytes().to_vec()),
            ScratchPad::None,
        )
    }

    /// Adds `target` as `name` to the group at `parent`: a link message in a new-style group,
    /// a symbol table entry (hard with `scratch`, or soft) in an old-style one.
    fn insert_link(
        &self,
        parent: u64,
        name: &str,
        target: LinkTarget,
        scratch: ScratchPad,
    ) -> Result<()> {
        let place = self.new_link_place(parent, name)?;
        self.insert_link_at(place, parent, name, target, scratch)
    }

    /// [`FileShared::insert_link`] at `place`, found by [`FileShared::new_link_place`] for the
    /// same group and name with nothing changed in the group since.
    fn insert_link_at(
        &self,
        place: LinkPlace,
        parent: u64,
        name: &str,
        target: LinkTarget,
        scratch: ScratchPad,
    ) -> Result<()> {
        match place {
            LinkPlace::Symbols(st) => {
                let t = match target {
                    LinkTarget::Hard(addr) => Target::Hard { addr, scratch },
                    LinkTarget::Soft(p) => Target::Soft(p),
                    _ => {
                        return Err(Error::Unsupported(format!(
                            "{name}: old-style (symbol table) groups hold only hard and soft links"
                        )));
                    }
                };
                st.insert(&mut self.cache()?, self.group_ks(), name.as_bytes(), &t)
            }
            LinkPlace::Links(st) => links::insert_at(self, parent, st, name, target),
        }
    }

    /// Takes the link `name` out of the group at `parent` (no reference count changes):
    /// its target and, from an old-style group, the entry's scratch pad.
    fn take_link(&self, parent: u64, name: &str) -> Result<(LinkTarget, ScratchPad)> {
        if let Some(st) = self.symbol_table(parent)? {
            let link = st
                .remove(&mut self.cache()?, self.group_ks(), name.as_bytes())?
                .ok_or_else(|| Error::NotFound(name.into()))?;
            return Ok(match link.target {
                Target::Hard { addr, scratch } => (LinkTarget::Hard(addr), scratch),
                Target::Soft(p) => (LinkTarget::Soft(p), ScratchPad::None),
            });
        }
        let link =
            links::remove(self, parent, name)?.ok_or_else(|| Error::NotFound(name.into()))?;
        Ok((link.target, ScratchPad::None))
    }

    /// Removes the link `name` from the group at `parent`. A hard link's object loses one
    /// reference; at zero the object is deleted and its space freed (a group's links are then
    /// removed in turn).
    pub fn unlink(&self, parent: u64, name: &str) -> Result<()> {
        self.check_usable()?;
        self.check_structure_change("removing a link")?;
        match self.take_link(parent, name)?.0 {
            LinkTarget::Hard(addr) => self.release(addr),
            _ => Ok(()),
        }
    }

    /// Moves the link `name` of the group at `parent` to `new_name` in the group at
    /// `new_parent` (a rename when the groups are the same). The object is unchanged.
    pub fn move_link(
        &self,
        parent: u64,
        name: &str,
        new_parent: u64,
        new_name: &str,
    ) -> Result<()> {
        self.check_usable()?;
        self.check_structure_change("moving a link")?;
        check_name(new_name)?;
        if self.has_link(new_parent, new_name)? {
            return Err(Error::Exists(new_name.into()));
        }
        let (t, scratch) = self.take_link(parent, name)?;
        if let Err(e) = self.insert_link(new_parent, new_name, t.clone(), scratch) {
            // Put it back where it was.
            self.insert_link(parent, name, t, scratch)?;
            return Err(e);
        }
        Ok(())
    }

    /// Drops one reference to the object at `addr`, deleting it at zero.
    fn release(&self, addr: u64) -> Result<()> {
        if ohdr::adjust_refcount(self, addr, -1)? > 0 {
            return Ok(());
        }
        self.delete_object(addr)
    }

    /// Deletes the object at `addr` (no links left): its header, its raw data and chunk index,
    /// or a group's table (releasing every member).
    fn delete_object(&self, addr: u64) -> Result<()> {
        use h5_format::message::Message;
        self.descriptions.remove(addr);
        // Members, dense storage and raw data first, while the header still describes them.
        let oh = crate::object::ObjectHeader::load(self, addr)?;
        if links::is_new_style(&oh) {
            for link in links::take_all(self, addr)? {
                if let LinkTarget::Hard(child) = link.target {
                    self.release(child)?;
                }
            }
        }
        attrs::delete_dense(self, &oh)?;
        if let Some(st) = SymbolTable::of(&oh) {
            // Its nodes and heap go first (libhdf5's `H5G__stab_delete`), then its members
            // lose a reference each.
            let members = st.delete(&mut self.cache()?, self.group_ks())?;
            for m in members {
                if let Target::Hard { addr: child, .. } = m.target {
                    self.release(child)?;
                }
            }
        }
        if let Some(layout) = oh.find(|m| match m {
            Message::Layout(l) => Some(l.clone()),
            _ => None,
        }) {
            self.free_dataset_vlen(&oh)?;
            self.delete_raw_data(addr, &layout)?;
        }
        ohdr::delete(self, addr)?;
        Ok(())
    }

    /// Frees a deleted dataset's raw data: a contiguous block, or the chunks and nodes of a
    /// B-tree index (v1 or v2) never opened for writing here (array indexes' space is left
    /// unused).
    fn delete_raw_data(
        &self,
        addr: u64,
        layout: &h5_format::message::layout::Layout,
    ) -> Result<()> {
        use h5_format::message::layout::{ChunkIndex, LayoutClass};
        let id = h5_chunkcache::DatasetId(self.abs(addr)?);
        {
            let mut c = self.chunks.lock().map_err(|_| Error::Poisoned)?;
            // Its dirty chunks are written first (into space freed just below): simple, and
            // the index then lists every chunk to free.
            if c.is_registered(id) {
                c.close_dataset(id)?;
            }
        }
        let written = {
            let mut w = self.state()?;
            let l = w.chunked.remove(&addr);
            w.pending.remove(&addr);
            // Nothing may be laid out into the freed header or index at the next flush.
            w.indexes.retain(|ix| {
                let ours = l
                    .as_ref()
                    .is_some_and(|l| std::ptr::addr_eq(Arc::as_ptr(ix), Arc::as_ptr(&l.index)));
                !ours && ix.dataset_header() != Some(addr)
            });
            l
        };
        if let Some(l) = &written {
            l.index.free(self)?;
            return Ok(());
        }
        match &layout.class {
            LayoutClass::Contiguous {
                address,
                size: Some(size),
            } if *address != UNDEFINED_ADDRESS => {
                self.free(SpaceKind::Raw, *address, *size)?;
            }
            LayoutClass::Chunked {
                index: ChunkIndex::BtreeV1 { address },
                dims,
                ..
            } if *address != UNDEFINED_ADDRESS => {
                let index = chunk_index::btree1::BtreeV1Chunks {
                    tree: crate::btree1::chunk::ChunkBtree::open(
                        self.cache_handle(),
                        *address,
                        self.chunk_btree_k(),
                        dims.clone(),
                    ),
                    space: chunks::ChunkSpace {
                        alloc: Arc::clone(self.alloc.as_ref().ok_or(Error::ReadOnly)?),
                        base: self.base,
                    },
                };
                use chunks::WritableChunkIndex;
                index.free(self)?;
            }
            LayoutClass::Chunked {
                index: ChunkIndex::BtreeV2 { address, .. },
                dims,
                ..
            } if *address != UNDEFINED_ADDRESS => {
                // A v2 B-tree index never opened for writing: its chunks and nodes are freed
                // through the tree.
                let rank = dims.len().saturating_sub(1);
                let chunk_bytes = dims
                    .iter()
                    .try_fold(1u64, |a, d| a.checked_mul(*d))
                    .unwrap_or(u64::MAX);
                let filtered = oh_filtered(self, addr)?;
                let bt = chunk_index::ChunkBtree {
                    header: *address,
                    rank,
                    chunk_bytes,
                    chunk_size_len: h5_format::btree2::filtered_chunk_size_len(
                        layout.version,
                        self.sizes,
                        chunk_bytes,
                    ),
                    filtered,
                };
                bt.delete(self, &mut |s, r| {
                    if r.size > 0 {
                        s.free(SpaceKind::Raw, r.addr, r.size)?;
                    }
                    Ok(())
                })?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Writes every change to the file: raw data, chunk indexes, group tables, then all
    /// metadata (the superblock last), syncs the storage when the file was opened with
    /// [`CacheSettings::sync`], and commits (docs/design.md §6): once this returns, a crash
    /// comes back to this state or a later one.
    pub fn flush(&self) -> Result<()> {
        if self.write.is_none() {
            return self.check_open();
        }
        self.check_usable()?;
        if self.is_swmr_writer() {
            return self.swmr_flush(false).map_err(|e| self.note_failure(e));
        }
        self.flush_all().map(drop).map_err(|e| self.note_failure(e))
    }

    /// Flushes (twice when space freed before the flush was released by it, so that the file
    /// records it as free or ends before it) and closes: every handle of the file refuses
    /// later calls ([`Error::Closed`]) and the storage's lock is released (libhdf5's strong
    /// close degree, as h5py's `File.close`). A file in the failed state is closed too, and
    /// its failure reported. Closing again is a no-op.
    ///
    /// A VFD SWMR file ends its SWMR session first ([`FileShared::close_swmr`]): a writer
    /// flushes (waiting out its delayed writes), publishes an empty index at a new tick and
    /// removes the metadata file; a reader leaves the end-of-tick queue.
    pub fn close(&self) -> Result<()> {
        if self.storage.is_closed() {
            return Ok(());
        }
        let r = if self.is_swmr() {
            // A writer whose end of tick failed skipped its last flush: report the failure.
            self.close_swmr().and_then(|()| match self.write {
                Some(_) => self.storage.check_writable(),
                None => Ok(()),
            })
        } else {
            match self.write {
                None => Ok(()),
                Some(_) => self.check_usable().and_then(|()| {
                    // Legacy SWMR writing ends: a last ordered flush for the readers still
                    // following, then the flags are cleared and the held frees released.
                    if self.is_legacy_swmr_writer() {
                        self.flush_all()?;
                    }
                    self.end_swmr_write()?;
                    self.reuse_at_once_if_journaled()?;
                    // The closing flush also empties the chunk cache as it goes: no chunk is
                    // read again, and the memory of written chunks serves the structures the
                    // flush builds after them.
                    let released = self.flush_all_with(ChunkFlush::EvictAll)?;
                    if released {
                        self.flush_all()?;
                    }
                    Ok(())
                }),
            }
        };
        let r = r.map_err(|e| self.note_failure(e));
        self.storage.close();
        r
    }

    /// At close, with a rollback journal: space the committed state uses and this session
    /// freed is reused at once, as libhdf5 reuses it, instead of after the closing flush (so
    /// the blocks the closing flush writes anew, such as free-space section lists, can take
    /// their old copies' space). Crash safety holds: such space is not in the last commit's
    /// unused ranges, so the journal saves its old bytes before the first overwrite (§6.4).
    /// Without a journal (custom storage, journal off, or detached for legacy SWMR writing)
    /// delayed reuse stays.
    fn reuse_at_once_if_journaled(&self) -> Result<()> {
        if self.storage.journals_overwrites()
            && let Some(alloc) = &self.alloc
        {
            alloc.lock().map_err(|_| Error::Poisoned)?.reuse_at_once()?;
        }
        Ok(())
    }

    /// The flush itself; returns whether committed space freed before it was released.
    fn flush_all(&self) -> Result<bool> {
        self.flush_all_with(ChunkFlush::Keep)
    }

    /// [`FileShared::flush_all`] with the chunk cache's entries kept or removed.
    fn flush_all_with(&self, chunks: ChunkFlush) -> Result<bool> {
        let eoa = self.flush_into_storage_with(chunks)?;
        self.finish_flush(eoa)
    }

    /// Writes every change into the storage (a page buffer, for VFD SWMR): raw data, chunk
    /// indexes, group tables, then all metadata, the superblock last. Returns the end of
    /// allocation. The file's final length, durability and the commit are
    /// [`FileShared::finish_flush`]'s.
    pub(crate) fn flush_into_storage(&self) -> Result<u64> {
        self.flush_into_storage_with(ChunkFlush::Keep)
    }

    /// [`FileShared::flush_into_storage`] with the chunk cache's entries kept or removed.
    fn flush_into_storage_with(&self, chunks: ChunkFlush) -> Result<u64> {
        {
            let mut cache = self.chunks.lock().map_err(|_| Error::Poisoned)?;
            match chunks {
                ChunkFlush::Keep => cache.flush()?,
                ChunkFlush::EvictAll => cache.flush_and_evict_all()?,
            }
        }
        let indexes = self.state()?.indexes.clone();
        for ix in indexes {
            ix.flush(self)?;
        }
        crate::fheap::persist_all(self)?;
        // Everything is placed: the aggregators give their unused space back and the end of
        // allocation shrinks over free space at the end, before the superblock records it;
        // persisted free space gets its managers (§5.3).
        let eoa = fspace::settle(self)?;
        let at = self.state()?.superblock_at;
        // The file ends at the end of allocation: grown first if the last blocks were never
        // written (all fill), so the superblock never describes bytes the file lacks. A VFD
        // SWMR writer's end of tick leaves the HDF5 file's length alone (readers take the
        // published end of file; `finish_flush` grows it at the flush).
        let end = self.abs(eoa)?;
        if !self.is_swmr_writer() && self.storage.len()? < end {
            self.storage.set_len(end)?;
        }
        // Legacy SWMR writing: object headers whose extent changed go after their indexes.
        self.swmr_order_headers()?;
        {
            let mut meta = self.meta.lock().map_err(|_| Error::Poisoned)?;
            meta.mark_dirty(at).map_err(cache_error)?;
            meta.flush(FlushFlags::NONE).map_err(cache_error)?;
        }
        self.swmr_unpin_headers()?;
        Ok(eoa)
    }

    /// Ends a flush whose end of allocation is `eoa`: the file is cut over space given back
    /// (free in this state: delayed reuse kept the last flush's space allocated) or grown to
    /// it (a VFD SWMR writer's flush), synced when asked, and committed. Returns whether committed space freed before it was released.
    pub(crate) fn finish_flush(&self, eoa: u64) -> Result<bool> {
        let end = self.abs(eoa)?;
        let at = self.state()?.superblock_at;
        if self.storage.len()? != end {
            self.storage.set_len(end)?;
        }
        if self.sync {
            self.storage.sync()?;
        }
        let alloc = self.alloc.as_ref().ok_or(Error::ReadOnly)?;
        let unused: Vec<std::ops::Range<u64>> = alloc
            .lock()
            .map_err(|_| Error::Poisoned)?
            .unused()
            .into_iter()
            .map(|r| absolute_range(self.base, r.start, r.end))
            .collect::<Result<_>>()?;
        self.storage.commit(&commit_point(unused, at))?;
        // The state that stopped using the deferred frees is complete: they can be reused.
        Ok(alloc
            .lock()
            .map_err(|_| Error::Poisoned)?
            .release_deferred()?)
    }
}

/// The bytes written over the superblock signature while a flushed file is being changed in
/// place (`\x89HDF\r\n\x1a\n` with its last byte spoiled): libhdf5 and h5 then find no HDF5
/// file there until the change is complete or rolled back (docs/design.md §6). One byte
/// differs, so writing the signature back, the commit point, is a one-byte change.
pub const IN_PLACE_MARKER: [u8; 8] = *b"\x89HDF\r\n\x1aJ";

/// The absolute range of the relative range `start..end` of a file whose base address is
/// `base`.
fn absolute_range(base: u64, start: u64, end: u64) -> Result<std::ops::Range<u64>> {
    Ok(crate::file::absolute(base, start)?..crate::file::absolute(base, end)?)
}

/// A commit of the storage's current bytes minus `unused` (absolute ranges), with the
/// signature of the superblock at absolute `superblock_at` as the in-place marker.
fn commit_point(unused: Vec<std::ops::Range<u64>>, superblock_at: u64) -> CommitPoint {
    CommitPoint {
        unused,
        marker: Some(Marker {
            offset: superblock_at,
            bytes: IN_PLACE_MARKER.to_vec(),
        }),
    }
}

/// Whether the object at `addr` has a filter pipeline.
fn oh_filtered(file: &FileShared, addr: u64) -> Result<bool> {
    let oh = crate::object::ObjectHeader::load(file, addr)?;
    Ok(oh
        .find(|m| match m {
            h5_format::message::Message::FilterPipeline(p) => Some(!p.filters.is_empty()),
            _ => None,
        })
        .unwrap_or(false))
}

/// Where a new link of a group goes, read once from the group's header with the link's name
/// checked absent ([`FileShared::new_link_place`]).
pub(crate) enum LinkPlace {
    /// An old-style group: its symbol table (whose insert refuses an existing name too).
    Symbols(SymbolTable),
    /// A new-style group: its link storage.
    Links(links::Storage),
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
        #[allow(
            clippy::arithmetic_side_effects,
            reason = "a small constant count times the size of a link message with a short name"
        )]
        let reserve =
            usize::from(links::ESTIMATED_ENTRIES) * ohdr::message_bytes(version, flags, estimate);
        let addr = ohdr::create_with_flags(file, version, flags, reserve, messages)?;
        return Ok((addr, ScratchPad::None));
    }
    let st = SymbolTable::create(&mut file.cache()?, file.group_ks())?;
    let body = SymbolTableMessage {
        btree_address: st.btree,
        heap_address: st.heap,
    }
    .encode(sizes);
    let addr = ohdr::create(file, 1, vec![ohdr::message(kind::SYMBOL_TABLE, 0, body)])?;
    Ok((
        addr,
        ScratchPad::SymbolTable {
            btree_address: st.btree,
            heap_address: st.heap,
        },
    ))
}

impl Drop for FileShared {
    /// A writable file is flushed and closed when its last handle goes; errors are lost here,
    /// which is why `File::close` exists.
    fn drop(&mut self) {
        let _ = self.close();
    }
}
