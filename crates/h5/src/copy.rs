//! Copying every object of one file into another (`h5 copy`), optionally changing how datasets
//! are stored on the way (`h5 repack`): layout, chunk shape, filters. The format versions are
//! those of the destination file ([`crate::CreateOptions`] when it was created).
//!
//! What is copied: groups (nested), their hard links (an object reached by several links is
//! copied once and linked several times: objects are tracked by their source address), soft
//! links, committed datatypes, datasets (datatype, shape, maximum shape, chunk shape, filter
//! pipeline, fill value, values), the attributes of groups, datasets and committed datatypes. A
//! dataset using a committed datatype gets a copy of the type in its own header. Raw data moves in bounded memory: blocks of
//! whole destination chunks of about [`CopyOptions::slab_bytes`] bytes, copied as file-type
//! bytes, except for datatypes holding variable-length data or object references, whose
//! elements are re-encoded (heap objects written again into the destination's global heap,
//! object and dataset region references pointing at the copies of their objects).
//!
//! Storage that the writer does not produce is converted, never lost: compact, virtual and
//! externally stored datasets become contiguous (a virtual dataset's values are materialised),
//! chunk indexes are chosen anew for the destination's format bounds. What cannot be copied
//! (user-defined links, external links into earliest-format groups, revised (1.12)
//! references, attributes over 64 KiB in the earliest format) is an error naming the object ([`CopyError`], mostly
//! [`Error::Unsupported`]), or, with [`CopyOptions::skip_unsupported`], listed in
//! [`CopyReport::skipped`]. Group creation order and object times are not kept.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use h5::copy::{ChunkShape, CopyOptions, FilterChoice, LayoutChoice};
//! let src = h5::File::open("in.h5")?;
//! let dst = h5::File::create("out.h5")?;
//! let mut options = CopyOptions::default();
//! options.changes.layout = Some(LayoutChoice::Chunked(ChunkShape::Auto));
//! options.changes.filters = Some(vec![FilterChoice::Shuffle, FilterChoice::Deflate(6)]);
//! let report = h5::copy::copy_file(&src, &dst, &options, &mut |_| {})?;
//! dst.close()?;
//! println!("{} datasets, {} bytes", report.datasets, report.bytes);
//! # Ok(()) }
//! ```

use std::collections::HashMap;

use h5_core::dataset::StoredData;
use h5_core::file::FileShared;
use h5_format::datatype::{Datatype, ReferenceKind, ReferenceType, VarLenKind};
use ndarray::SliceInfoElem;

use crate::types::{EncodeCtx, H5Type};
use crate::{Dataset, Error, File, FilterInfo, Group, LinkKind, NamedDatatype, ObjectKind, Result};

mod bounds;

pub use bounds::{BoundsReason, SourceFormat, source_bounds};

/// Default size of the blocks raw data is copied in.
pub const DEFAULT_SLAB_BYTES: usize = 16 << 20;

/// Size automatic chunk shapes aim at.
pub const AUTO_CHUNK_BYTES: usize = 1 << 20;

/// A dataset layout to write.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutChoice {
    /// One contiguous block (filters are dropped unless given explicitly, which is an error).
    Contiguous,
    /// Chunks of this shape.
    Chunked(ChunkShape),
    /// Data in the object header (not written yet: refused with [`Error::Unsupported`]).
    Compact,
}

/// The chunk shape of a chunked layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkShape {
    /// About [`AUTO_CHUNK_BYTES`] per chunk, whole along the last dimensions and cut along
    /// the first ones (see [`auto_chunk`]).
    Auto,
    /// These dimensions (same rank as the dataset; clamped to fixed maximum dimensions).
    Explicit(Vec<usize>),
}

/// One filter of a new pipeline.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterChoice {
    /// Deflate (gzip) at this level (0–9).
    Deflate(u8),
    /// Byte shuffle (by the element size).
    Shuffle,
    /// Fletcher-32 checksums.
    Fletcher32,
    /// Any filter by its registered id and client data.
    Raw {
        /// Registered filter id (for example 32015 for zstd).
        id: u16,
        /// Client data, as libhdf5 records it.
        client_data: Vec<u32>,
        /// Whether a failure of the filter stores the chunk unfiltered instead of failing.
        optional: bool,
    },
}

/// Changes of how datasets are stored; `None` keeps the source's choice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageChanges {
    /// The layout.
    pub layout: Option<LayoutChoice>,
    /// The filter pipeline, in order (`Some(vec![])`: no filters).
    pub filters: Option<Vec<FilterChoice>>,
}

/// How to copy.
#[derive(Clone, Debug)]
pub struct CopyOptions {
    /// Changes for every dataset.
    pub changes: StorageChanges,
    /// Changes for single datasets by path (`/group/name`; any of a hard-linked dataset's
    /// paths), replacing the matching fields of [`CopyOptions::changes`] (like h5repack's
    /// `-l PATH:...` and `-f PATH:...`). A path that is not a dataset of the source is an error.
    pub per_path: Vec<(String, StorageChanges)>,
    /// List objects that cannot be copied in [`CopyReport::skipped`] instead of failing.
    pub skip_unsupported: bool,
    /// Bytes of raw data held in memory at once, about (whole chunks are never split).
    pub slab_bytes: usize,
}

impl Default for CopyOptions {
    fn default() -> Self {
        CopyOptions {
            changes: StorageChanges::default(),
            per_path: Vec::new(),
            skip_unsupported: false,
            slab_bytes: DEFAULT_SLAB_BYTES,
        }
    }
}

/// The changes for each dataset of `per_path` (by source object address, so that every
/// path of a hard-linked dataset gets them), merged over the global ones.
fn overrides(
    src: &File,
    options: &CopyOptions,
) -> std::result::Result<HashMap<u64, StorageChanges>, CopyError> {
    let mut out: HashMap<u64, StorageChanges> = HashMap::new();
    for (path, o) in &options.per_path {
        let addr = src
            .dataset(path)
            .map_err(|error| CopyError {
                path: path.clone(),
                error,
            })?
            .address();
        let c = out.entry(addr).or_insert_with(|| options.changes.clone());
        if o.layout.is_some() {
            c.layout.clone_from(&o.layout);
        }
        if o.filters.is_some() {
            c.filters.clone_from(&o.filters);
        } else if o.layout == Some(LayoutChoice::Contiguous) {
            // The global filters cannot apply to a dataset made contiguous.
            c.filters = Some(Vec::new());
        }
    }
    Ok(out)
}

/// Where a copy is, reported after each block of raw data and each object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of raw data (elements in the file type) copied so far.
    pub bytes_done: u64,
    /// Bytes of raw data to copy in all.
    pub bytes_total: u64,
    /// Objects (groups, datasets, committed datatypes) finished so far.
    pub objects_done: usize,
    /// Objects to copy in all.
    pub objects_total: usize,
    /// The object being copied.
    pub path: String,
}

/// An object or link left out with [`CopyOptions::skip_unsupported`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// Its path in the source (`path@attribute` for an attribute).
    pub path: String,
    /// Why.
    pub reason: String,
}

/// What a copy did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Groups copied (the root included).
    pub groups: usize,
    /// Datasets copied.
    pub datasets: usize,
    /// Committed (named) datatypes copied.
    pub datatypes: usize,
    /// Extra hard links to objects already copied.
    pub hard_links: usize,
    /// Soft links copied.
    pub soft_links: usize,
    /// External links copied (into new-style groups: format bounds V18 and newer).
    pub external_links: usize,
    /// Attributes copied.
    pub attributes: usize,
    /// Bytes of raw data copied (elements in the file type; elements the source never wrote,
    /// which the copy does not write either, are not counted).
    pub bytes: u64,
    /// What was left out (only with [`CopyOptions::skip_unsupported`]).
    pub skipped: Vec<Skipped>,
}

impl CopyReport {
    /// Objects copied (groups, datasets and committed datatypes).
    pub fn objects(&self) -> usize {
        self.groups + self.datasets + self.datatypes
    }
}

/// Creates (or truncates) `dst` with `create` options and copies every object of the file at
/// `src` into it, then closes it.
pub fn copy_path(
    src: impl AsRef<std::path::Path>,
    dst: impl AsRef<std::path::Path>,
    create: &crate::CreateOptions,
    options: &CopyOptions,
    progress: &mut dyn FnMut(&Progress),
) -> std::result::Result<CopyReport, CopyError> {
    let s = File::open(src)?;
    let d = File::create_with(dst, &crate::FileAccess::default(), create)?;
    let report = copy_file(&s, &d, options, progress)?;
    d.close()?;
    Ok(report)
}

/// Creates (or truncates) `dst` in the source's format bounds ([`source_bounds`]), copies
/// every object of the file at `src` into it and closes it: what `h5 copy` does by default.
pub fn copy_path_in_source_format(
    src: impl AsRef<std::path::Path>,
    dst: impl AsRef<std::path::Path>,
    options: &CopyOptions,
    progress: &mut dyn FnMut(&Progress),
) -> std::result::Result<CopyReport, CopyError> {
    let s = File::open(src)?;
    let create = crate::CreateOptions {
        bounds: source_bounds(&s)?.bounds,
        ..Default::default()
    };
    let d = File::create_with(dst, &crate::FileAccess::default(), &create)?;
    let report = copy_file(&s, &d, options, progress)?;
    d.close()?;
    Ok(report)
}

/// Copies every object of `src` below the root of `dst` (a new, empty writable file), with
/// the root group's attributes. `progress` is called after each block of raw data and each
/// object.
pub fn copy_file(
    src: &File,
    dst: &File,
    options: &CopyOptions,
    progress: &mut dyn FnMut(&Progress),
) -> std::result::Result<CopyReport, CopyError> {
    let overrides = overrides(src, options)?;
    let mut c = Copier {
        options,
        overrides,
        current: "/".into(),
        dst: std::sync::Arc::clone(dst.shared()),
        map: HashMap::new(),
        index: HashMap::new(),
        objects: Vec::new(),
        report: CopyReport::default(),
        unwritten: 0,
    };
    let (sroot, droot) = (src.root()?, dst.root()?);
    if !droot.links()?.is_empty() {
        return Err(Error::Exists("the destination file is not empty".into()).into());
    }
    c.add(sroot.address(), Pair::Group(sroot.clone(), droot.clone()));
    c.report.groups += 1;
    let r = c
        .structure(&sroot, &droot)
        .and_then(|()| c.contents(progress));
    match r {
        Ok(()) => Ok(c.report),
        Err(error) => Err(CopyError {
            path: c.current,
            error,
        }),
    }
}

/// A failed copy: the error and the source object (`path@attribute` for an attribute) it
/// happened at.
#[derive(Debug)]
pub struct CopyError {
    /// The object being copied.
    pub path: String,
    /// What went wrong.
    pub error: Error,
}

impl std::fmt::Display for CopyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.error)
    }
}

impl std::error::Error for CopyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<Error> for CopyError {
    /// An error before any object was copied (opening or creating the files).
    fn from(error: Error) -> Self {
        CopyError {
            path: "/".into(),
            error,
        }
    }
}

/// A source object and its copy.
enum Pair {
    Group(Group, Group),
    Datatype(NamedDatatype, NamedDatatype),
    Dataset(Box<Dataset>, Box<Dataset>),
}

struct Copier<'o> {
    options: &'o CopyOptions,
    /// Per-dataset changes by source address.
    overrides: HashMap<u64, StorageChanges>,
    /// The source path (`path@attribute` for an attribute) being copied: errors name it.
    current: String,
    dst: std::sync::Arc<FileShared>,
    /// Source object header address → its copy's.
    map: HashMap<u64, u64>,
    /// Source object header address → its place in `objects`.
    index: HashMap<u64, usize>,
    /// Every object copied, in creation order.
    objects: Vec<Pair>,
    report: CopyReport,
    /// Bytes of raw data the source never wrote (counted as done for progress, not copied).
    unwritten: u64,
}

fn join(parent: &str, name: &str) -> String {
    if parent.ends_with('/') {
        format!("{parent}{name}")
    } else {
        format!("{parent}/{name}")
    }
}

impl Copier<'_> {
    /// Records (or refuses) something that cannot be copied.
    fn unsupported(&mut self, path: &str, reason: String) -> Result<()> {
        if self.options.skip_unsupported {
            self.report.skipped.push(Skipped {
                path: path.to_owned(),
                reason,
            });
            Ok(())
        } else {
            Err(Error::Unsupported(reason))
        }
    }

    /// Skips `r`'s `Unsupported` error when allowed.
    fn tolerate<T>(&mut self, path: &str, r: Result<T>) -> Result<Option<T>> {
        match r {
            Ok(v) => Ok(Some(v)),
            Err(Error::Unsupported(m)) if self.options.skip_unsupported => {
                self.report.skipped.push(Skipped {
                    path: path.to_owned(),
                    reason: m,
                });
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Pass 1: every group, dataset (empty) and link below `src`, depth first.
    fn structure(&mut self, src: &Group, dst: &Group) -> Result<()> {
        for link in src.links()? {
            let path = join(src.path(), &link.name);
            self.current.clone_from(&path);
            let name = link.name.as_str();
            match link.kind {
                LinkKind::Hard => self.hard_link(src, dst, name, &path)?,
                LinkKind::Soft(target) => {
                    dst.link_soft(name, &target)?;
                    self.report.soft_links += 1;
                }
                LinkKind::External { file, path: p } => {
                    match dst.link_external(name, &file, &p) {
                        Ok(()) => self.report.external_links += 1,
                        // Old-style (earliest format) groups cannot hold external links.
                        Err(Error::Unsupported(why)) => {
                            self.unsupported(&path, format!("external link to {file}:{p}: {why}"))?;
                        }
                        Err(e) => return Err(e),
                    }
                }
                LinkKind::UserDefined(k) => {
                    self.unsupported(&path, format!("user-defined link of type {k}"))?;
                }
            }
        }
        Ok(())
    }

    fn hard_link(&mut self, src: &Group, dst: &Group, name: &str, path: &str) -> Result<()> {
        match src.kind_of(name)? {
            ObjectKind::Group => {
                let g = src.group(name)?;
                if let Some(Pair::Group(_, target)) = self.copy_of(g.address()) {
                    let target = target.clone();
                    dst.link_hard_group(name, &target)?;
                    self.report.hard_links += 1;
                    return Ok(());
                }
                let d = dst.create_group(name)?;
                self.add(g.address(), Pair::Group(g.clone(), d.clone()));
                self.report.groups += 1;
                self.structure(&g, &d)
            }
            ObjectKind::Dataset => {
                let s = src.dataset(name)?;
                if let Some(Pair::Dataset(_, target)) = self.copy_of(s.address()) {
                    let target = (**target).clone();
                    dst.link_hard(name, &target)?;
                    self.report.hard_links += 1;
                    return Ok(());
                }
                let r = self.create_dataset(&s, dst, name);
                if let Some(d) = self.tolerate(path, r)? {
                    self.add(s.address(), Pair::Dataset(Box::new(s), Box::new(d)));
                    self.report.datasets += 1;
                }
                Ok(())
            }
            ObjectKind::Datatype => {
                let t = src.named_datatype(name)?;
                if let Some(Pair::Datatype(_, target)) = self.copy_of(t.address()) {
                    let target = target.clone();
                    dst.link_hard_datatype(name, &target)?;
                    self.report.hard_links += 1;
                    return Ok(());
                }
                let r = t.dtype().and_then(|dt| {
                    check_datatype(&dt)?;
                    check_unused_bits(&dt, self.dst.superblock().version)?;
                    dst.commit_datatype(name, &dt)
                });
                if let Some(d) = self.tolerate(path, r)? {
                    self.add(t.address(), Pair::Datatype(t, d));
                    self.report.datatypes += 1;
                }
                Ok(())
            }
            ObjectKind::Unknown => self.unsupported(path, "an object of unknown kind".into()),
        }
    }

    /// Records a new copy of the source object at `addr`.
    fn add(&mut self, addr: u64, pair: Pair) {
        let to = match &pair {
            Pair::Group(_, d) => d.address(),
            Pair::Datatype(_, d) => d.address(),
            Pair::Dataset(_, d) => d.address(),
        };
        self.map.insert(addr, to);
        self.index.insert(addr, self.objects.len());
        self.objects.push(pair);
    }

    /// The source object at `addr` and its copy, if copied already.
    fn copy_of(&self, addr: u64) -> Option<&Pair> {
        self.index.get(&addr).and_then(|i| self.objects.get(*i))
    }

    fn create_dataset(&mut self, s: &Dataset, dst: &Group, name: &str) -> Result<Dataset> {
        let dt = s.dtype().clone();
        check_datatype(&dt)?;
        check_unused_bits(&dt, self.dst.superblock().version)?;
        if s.is_null() {
            return dst.new_dataset_raw(dt).create_null(name);
        }
        let (changes, explicit) = match self.overrides.get(&s.address()) {
            Some(c) => (c.clone(), true),
            None => (self.options.changes.clone(), false),
        };
        let plan = plan_storage(s, &changes, explicit)?;
        let mut b = dst
            .new_dataset_raw(dt.clone())
            .shape(s.shape())
            .max_shape(s.maxshape());
        if let Some(c) = &plan.chunk {
            b = b.chunk(c);
            // The chunk option is the dataset's own, kept as libhdf5's object copy keeps it,
            // unless the destination's bounds are older than the layout version it needs.
            if s.unfiltered_edge_chunks() && dst.file_shared().bounds() >= crate::FormatBounds::V110
            {
                b = b.unfiltered_edge_chunks();
            }
        }
        for f in &plan.filters {
            b = b.filter(f);
        }
        if let Some(fill) = s.fill_value_raw() {
            let fill = if needs_recode(&dt) && fill.iter().any(|b| *b != 0) {
                let mut ctx = EncodeCtx::new(dst.file_shared());
                let mut out = vec![0u8; fill.len()];
                let mut r = Recoder {
                    src: s.file_shared(),
                    map: &self.map,
                    ctx: &mut ctx,
                };
                r.element(&dt, fill, &mut out)?;
                ctx.finish()?;
                out
            } else {
                fill.to_vec()
            };
            b = b.fill_value_raw(fill);
        }
        b.create(name)
    }

    /// Pass 2: attributes of every object and the values of every dataset.
    fn contents(&mut self, progress: &mut dyn FnMut(&Progress)) -> Result<()> {
        let objects = std::mem::take(&mut self.objects);
        let mut p = Progress {
            bytes_done: 0,
            bytes_total: objects
                .iter()
                .map(|o| match o {
                    Pair::Dataset(s, _) => {
                        (s.size() as u64).saturating_mul(s.element_size() as u64)
                    }
                    Pair::Group(..) | Pair::Datatype(..) => 0,
                })
                .sum(),
            objects_done: 0,
            objects_total: objects.len(),
            path: String::new(),
        };
        for o in &objects {
            match o {
                Pair::Group(s, d) => {
                    p.path = s.path().to_owned();
                    self.current = s.path().to_owned();
                    let attrs = s.attrs()?;
                    self.attributes(s.file_shared(), s.path(), attrs, |n, t, sh, b| {
                        d.write_attr_raw(n, t, sh, b)
                    })?;
                }
                Pair::Datatype(s, d) => {
                    p.path = s.path().to_owned();
                    self.current = s.path().to_owned();
                    let attrs = s.attrs()?;
                    self.attributes(s.file_shared(), s.path(), attrs, |n, t, sh, b| {
                        d.write_attr_raw(n, t, sh, b)
                    })?;
                }
                Pair::Dataset(s, d) => {
                    p.path = s.path().to_owned();
                    self.current = s.path().to_owned();
                    let attrs = s.attrs()?;
                    self.attributes(s.file_shared(), s.path(), attrs, |n, t, sh, b| {
                        d.write_attr_raw(n, t, sh, b)
                    })?;
                    self.current = s.path().to_owned();
                    self.values(s, d, &mut p, progress)?;
                }
            }
            p.objects_done += 1;
            progress(&p);
        }
        self.report.bytes = p.bytes_done - self.unwritten;
        self.objects = objects;
        Ok(())
    }

    fn attributes(
        &mut self,
        src: &FileShared,
        owner: &str,
        attrs: Vec<crate::Attribute>,
        mut write: impl FnMut(&str, &Datatype, Option<&[usize]>, &[u8]) -> Result<()>,
    ) -> Result<()> {
        for a in attrs {
            let path = format!("{owner}@{}", a.name());
            self.current.clone_from(&path);
            let r = self.attribute(src, &a, &mut write);
            if self.tolerate(&path, r)?.is_some() {
                self.report.attributes += 1;
            }
        }
        Ok(())
    }

    fn attribute(
        &self,
        src: &FileShared,
        a: &crate::Attribute,
        write: &mut impl FnMut(&str, &Datatype, Option<&[usize]>, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let dt = a.dtype();
        check_datatype(dt)?;
        check_unused_bits(dt, self.dst.superblock().version)?;
        if a.is_null() {
            return write(a.name(), dt, None, &[]);
        }
        let shape = a.shape();
        let shape = (!shape.is_empty()).then_some(shape.as_slice());
        if !needs_recode(dt) {
            return write(a.name(), dt, shape, &a.read_raw());
        }
        let mut ctx = EncodeCtx::new(&self.dst);
        let out = Recoder {
            src,
            map: &self.map,
            ctx: &mut ctx,
        }
        .all(dt, &a.read_raw())?;
        ctx.finish()?;
        write(a.name(), dt, shape, &out)
    }

    /// Copies the values of `s` into `d` block by block.
    fn values(
        &mut self,
        s: &Dataset,
        d: &Dataset,
        p: &mut Progress,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<()> {
        let elem = s.element_size();
        if s.size() == 0 || elem == 0 {
            return Ok(());
        }
        let dt = s.dtype().clone();
        let recode = needs_recode(&dt);
        let dims = s.shape();
        // Only what the source stores is written: a never-written dataset stays unallocated,
        // a sparse one is copied chunk by chunk, skipping the chunks it does not store.
        let sparse = match h5_core::dataset::stored_data(s.file_shared(), &s.info())? {
            StoredData::Nothing => {
                let n = (s.size() as u64).saturating_mul(elem as u64);
                p.bytes_done += n;
                self.unwritten += n;
                progress(p);
                return Ok(());
            }
            StoredData::Everything => None,
            StoredData::Chunks { chunk, allocated } => Some((chunk, allocated)),
        };
        let align = d
            .chunk()
            .or_else(|| {
                sparse
                    .as_ref()
                    .map(|(c, _)| c.iter().map(|&x| x as usize).collect())
            })
            .unwrap_or_else(|| vec![1; dims.len()]);
        let block = if sparse.is_some() {
            align
        } else {
            block_shape(&dims, &align, elem, self.options.slab_bytes)
        };
        for slab in Blocks::new(&dims, &block) {
            if let Some((chunk, allocated)) = &sparse
                && !stores_any(&slab, chunk, allocated)
            {
                let n = slab_bytes(&slab, elem);
                p.bytes_done += n;
                self.unwritten += n;
                continue;
            }
            let raw = if dims.is_empty() {
                s.read_raw()?
            } else {
                s.read_raw_slice(&slab)?
            };
            let bytes = if recode {
                let mut ctx = EncodeCtx::new(d.file_shared());
                let out = Recoder {
                    src: s.file_shared(),
                    map: &self.map,
                    ctx: &mut ctx,
                }
                .all(&dt, &raw)?;
                ctx.finish()?;
                out
            } else {
                raw
            };
            if dims.is_empty() {
                d.write_raw(&bytes)?;
            } else {
                d.write_raw_slice(&bytes, &slab)?;
            }
            p.bytes_done += bytes.len() as u64;
            progress(p);
        }
        Ok(())
    }
}

/// The elements of `slab` (a block of [`Blocks`]) in bytes.
fn slab_bytes(slab: &[SliceInfoElem], elem: usize) -> u64 {
    slab.iter()
        .map(|e| match e {
            SliceInfoElem::Slice { start, end, .. } => {
                end.map_or(0, |e| e.saturating_sub(*start)) as u64
            }
            _ => 1,
        })
        .fold(elem as u64, u64::saturating_mul)
}

/// Whether any allocated source chunk (scaled coordinates in `allocated`, chunks of `chunk`)
/// overlaps `slab` (a block of [`Blocks`]).
fn stores_any(
    slab: &[SliceInfoElem],
    chunk: &[u64],
    allocated: &std::collections::HashSet<Vec<u64>>,
) -> bool {
    let ranges: Vec<(u64, u64)> = slab
        .iter()
        .zip(chunk)
        .map(|(e, &c)| match e {
            SliceInfoElem::Slice {
                start,
                end: Some(end),
                ..
            } if *end > *start && c > 0 => (*start as u64 / c, (*end as u64 - 1) / c),
            _ => (0, 0),
        })
        .collect();
    if ranges.len() != chunk.len() {
        return true;
    }
    let mut at: Vec<u64> = ranges.iter().map(|r| r.0).collect();
    loop {
        if allocated.contains(&at) {
            return true;
        }
        let mut d = at.len();
        loop {
            if d == 0 {
                return false;
            }
            d -= 1;
            if at[d] < ranges[d].1 {
                at[d] += 1;
                break;
            }
            at[d] = ranges[d].0;
        }
    }
}

/// The layout and filters a copy of `s` gets.
struct StoragePlan {
    chunk: Option<Vec<usize>>,
    filters: Vec<FilterInfo>,
}

fn plan_storage(s: &Dataset, changes: &StorageChanges, explicit: bool) -> Result<StoragePlan> {
    let shape = s.shape();
    let max = s.maxshape();
    let grows = max
        .iter()
        .zip(&shape)
        .any(|(m, d)| m.is_none_or(|m| m != *d));
    let filters = match &changes.filters {
        None => s.filters(),
        Some(list) => list
            .iter()
            .map(|f| filter_info(f, s.element_size()))
            .collect(),
    };
    if shape.is_empty() {
        // A scalar has no chunks: it keeps one contiguous element, unfiltered.
        if changes.filters.as_ref().is_some_and(|f| !f.is_empty()) && explicit {
            return Err(Error::Invalid("a scalar dataset cannot be filtered".into()));
        }
        return Ok(StoragePlan {
            chunk: None,
            filters: Vec::new(),
        });
    }
    let auto = || auto_chunk(&shape, &max, s.element_size());
    let chunk = match &changes.layout {
        None => match s.chunk() {
            Some(c) => Some(c),
            None if grows || !filters.is_empty() => Some(auto()),
            None => None,
        },
        Some(LayoutChoice::Contiguous) => {
            if grows {
                return Err(Error::Invalid(format!(
                    "a dataset of maximum shape {max:?} cannot be contiguous"
                )));
            }
            if changes.filters.as_ref().is_some_and(|f| !f.is_empty()) {
                return Err(Error::Invalid(
                    "a contiguous dataset cannot be filtered".into(),
                ));
            }
            return Ok(StoragePlan {
                chunk: None,
                filters: Vec::new(),
            });
        }
        Some(LayoutChoice::Chunked(ChunkShape::Auto)) => Some(auto()),
        Some(LayoutChoice::Chunked(ChunkShape::Explicit(c))) => {
            if c.len() != shape.len() || c.contains(&0) {
                if explicit {
                    return Err(Error::Invalid(format!(
                        "chunk shape {c:?} for a dataset of shape {shape:?}"
                    )));
                }
                Some(auto())
            } else {
                Some(
                    c.iter()
                        .zip(&max)
                        .map(|(c, m)| m.map_or(*c, |m| (*c).min(m.max(1))))
                        .collect(),
                )
            }
        }
        Some(LayoutChoice::Compact) => {
            return Err(Error::Unsupported(
                "the compact layout is not written yet".into(),
            ));
        }
    };
    Ok(StoragePlan { chunk, filters })
}

fn filter_info(f: &FilterChoice, elem: usize) -> FilterInfo {
    let (id, params, optional) = match f {
        FilterChoice::Deflate(l) => (1, vec![u32::from((*l).min(9))], false),
        FilterChoice::Shuffle => (2, vec![elem as u32], false),
        FilterChoice::Fletcher32 => (3, Vec::new(), false),
        FilterChoice::Raw {
            id,
            client_data,
            optional,
        } => (*id, client_data.clone(), *optional),
    };
    FilterInfo {
        id,
        name: None,
        params,
        optional,
    }
}

/// A chunk shape of about [`AUTO_CHUNK_BYTES`] for a dataset of `shape` (maximum `max`) and
/// `elem`-byte elements: whole along the last dimensions, the first ones cut so that the
/// chunk fits (never below one). Empty dimensions count as 1, or 1024 when unlimited.
pub fn auto_chunk(shape: &[usize], max: &[Option<usize>], elem: usize) -> Vec<usize> {
    let mut chunk: Vec<usize> = shape
        .iter()
        .zip(max.iter().chain(std::iter::repeat(&None)))
        .map(|(d, m)| match (*d, m) {
            (0, None) => 1024,
            (d, _) => d.max(1),
        })
        .collect();
    for i in 0..chunk.len() {
        let rest: usize = chunk[i + 1..]
            .iter()
            .fold(elem.max(1), |a, c| a.saturating_mul(*c));
        if chunk[i].saturating_mul(rest) <= AUTO_CHUNK_BYTES {
            break;
        }
        chunk[i] = (AUTO_CHUNK_BYTES / rest).clamp(1, chunk[i]);
    }
    chunk
}

/// The shape of the blocks a dataset of `dims` is copied in: multiples of `align` (the
/// destination's chunk shape, or ones) of at most about `budget` bytes, cut along the first
/// dimensions first.
fn block_shape(dims: &[usize], align: &[usize], elem: usize, budget: usize) -> Vec<usize> {
    let mut b: Vec<usize> = dims.iter().map(|d| (*d).max(1)).collect();
    let bytes = |b: &[usize]| b.iter().fold(elem, |a, x| a.saturating_mul(*x));
    for i in 0..b.len() {
        if bytes(&b) <= budget {
            break;
        }
        let a = align.get(i).copied().unwrap_or(1).max(1);
        let others = bytes(&b) / b[i];
        let fit = (budget / others.max(1)) / a * a;
        b[i] = fit.max(a).min(b[i]);
    }
    b
}

/// The hyperslabs of `block`-shaped pieces covering a dataset of `dims`, in C order.
struct Blocks {
    dims: Vec<usize>,
    block: Vec<usize>,
    next: Option<Vec<usize>>,
}

impl Blocks {
    fn new(dims: &[usize], block: &[usize]) -> Self {
        Blocks {
            dims: dims.to_vec(),
            block: block.to_vec(),
            next: (!dims.contains(&0)).then(|| vec![0; dims.len()]),
        }
    }
}

impl Iterator for Blocks {
    type Item = Vec<SliceInfoElem>;

    fn next(&mut self) -> Option<Self::Item> {
        let start = self.next.take()?;
        let slab = start
            .iter()
            .zip(&self.block)
            .zip(&self.dims)
            .map(|((s, b), d)| SliceInfoElem::Slice {
                start: *s as isize,
                end: Some((*s + *b).min(*d) as isize),
                step: 1,
            })
            .collect();
        let mut n = start;
        let mut i = n.len();
        self.next = loop {
            if i == 0 {
                break None;
            }
            i -= 1;
            n[i] += self.block[i];
            if n[i] < self.dims[i] {
                break Some(n);
            }
            n[i] = 0;
        };
        Some(slab)
    }
}

/// Whether elements of `dt` hold variable-length data or references (which point into their
/// file).
fn needs_recode(dt: &Datatype) -> bool {
    match dt {
        Datatype::VarLen(_) | Datatype::Reference(_) => true,
        Datatype::Compound(c) => c.members.iter().any(|m| needs_recode(&m.datatype)),
        Datatype::Array(a) => needs_recode(&a.base),
        _ => false,
    }
}

/// Refuses what cannot be re-encoded: references of another size than the destination's
/// (its addresses are 8 bytes).
fn check_datatype(dt: &Datatype) -> Result<()> {
    match dt {
        Datatype::Reference(r) => {
            let want = match r.kind {
                ReferenceKind::Object => 8,
                ReferenceKind::DatasetRegion => 12,
                _ => h5_format::reference::revised_element_size(h5_format::Sizes::EIGHT) as u32,
            };
            if r.size == want {
                Ok(())
            } else {
                Err(Error::Unsupported(format!(
                    "{} of {} bytes",
                    dt.describe(),
                    r.size
                )))
            }
        }
        Datatype::Compound(c) => c
            .members
            .iter()
            .try_for_each(|m| check_datatype(&m.datatype)),
        Datatype::Array(a) => check_datatype(&a.base),
        Datatype::VarLen(v) => check_datatype(&v.base),
        _ => Ok(()),
    }
}

/// Refuses a dataset of numbers with more unused than used bits in a file with a superblock
/// older than version 3: libhdf5 neither creates nor opens such datasets there (unless its
/// file integrity checks are relaxed), although newer files may hold them (n-bit data).
fn check_unused_bits(dt: &Datatype, superblock: u8) -> Result<()> {
    let (size, precision) = match dt {
        Datatype::FixedPoint(t) => (t.size, t.precision),
        Datatype::Float(t) => (t.size, t.precision),
        _ => return Ok(()),
    };
    if superblock < 3 && size > 1 && size * 8 > 2 * u32::from(precision) {
        return Err(Error::Unsupported(format!(
            "{precision}-bit numbers in {size} bytes: libhdf5 refuses them in files of superblock \
             version {superblock} (choose newer format bounds)"
        )));
    }
    Ok(())
}

/// Re-encodes elements read from `src` for the file `ctx` writes to.
struct Recoder<'a, 'c> {
    src: &'a FileShared,
    map: &'a HashMap<u64, u64>,
    ctx: &'a mut EncodeCtx<'c>,
}

impl Recoder<'_, '_> {
    /// The copy's address of the source object at `addr`.
    fn target(&self, addr: u64) -> Result<u64> {
        self.map.get(&addr).copied().ok_or_else(|| {
            Error::Unsupported(format!(
                "a reference to the object at {addr:#x}, which is not copied"
            ))
        })
    }

    /// A reference of any kind, pointing at the copy of its object (a revised reference into
    /// another file is kept as it is): object references as an address, region references with
    /// their selection written again into the destination's global heap (in the versions of
    /// the destination's bounds), revised references inline or in the heap.
    fn reference(&mut self, rt: &ReferenceType, input: &[u8], out: &mut [u8]) -> Result<()> {
        let mut r = h5_core::references::decode(self.src, rt, input)?;
        if let Some(x) = &mut r
            && x.file.is_none()
        {
            x.object = self.target(x.object)?;
        }
        match rt.kind {
            ReferenceKind::Object => {
                let mut w = h5_format::Writer::with_capacity(8);
                w.u64(r.map_or(0, |x| x.object));
                out.copy_from_slice(w.as_slice());
                Ok(())
            }
            ReferenceKind::DatasetRegion => {
                let region = match r {
                    None => crate::RegionRef::null(),
                    Some(x) => match x.target {
                        crate::RefTarget::Region(sel) => {
                            crate::RegionRef::from_parts(x.object, sel)
                        }
                        other => {
                            return Err(Error::Invalid(format!(
                                "a region reference holding {other:?}"
                            )));
                        }
                    },
                };
                region.h5_encode(out, self.ctx)
            }
            _ => r.h5_encode(out, self.ctx),
        }
    }

    /// Every element of `raw`.
    fn all(&mut self, dt: &Datatype, raw: &[u8]) -> Result<Vec<u8>> {
        let size = dt.size() as usize;
        let mut out = vec![0u8; raw.len()];
        if size > 0 {
            for (i, o) in raw.chunks_exact(size).zip(out.chunks_exact_mut(size)) {
                self.element(dt, i, o)?;
            }
        }
        Ok(out)
    }

    /// One element (`input` and `out` are `dt.size()` bytes).
    fn element(&mut self, dt: &Datatype, input: &[u8], out: &mut [u8]) -> Result<()> {
        match dt {
            Datatype::VarLen(v) => {
                let Some((n, data)) = h5_core::values::vlen_element(self.src, input)? else {
                    out.fill(0);
                    return Ok(());
                };
                let string = matches!(v.kind, VarLenKind::String { .. });
                let base = v.base.size() as usize;
                let len = if string {
                    n as usize
                } else {
                    (n as usize).saturating_mul(base)
                };
                let data = data.get(..len).ok_or_else(|| {
                    Error::Invalid("a variable-length element longer than its heap object".into())
                })?;
                if !string && needs_recode(&v.base) {
                    let inner = self.all(&v.base, data)?;
                    self.ctx.put_vlen(out, n, &inner, false)
                } else {
                    self.ctx.put_vlen(out, n, data, string)
                }
            }
            Datatype::Reference(rt) => self.reference(rt, input, out),
            Datatype::Compound(c) => {
                out.copy_from_slice(input);
                for m in c.members.iter().filter(|m| needs_recode(&m.datatype)) {
                    let (a, b) = (
                        m.offset as usize,
                        m.offset as usize + m.datatype.size() as usize,
                    );
                    let (Some(i), Some(o)) = (input.get(a..b), out.get_mut(a..b)) else {
                        return Err(Error::Invalid(format!(
                            "compound member {:?} outside its element",
                            m.name
                        )));
                    };
                    self.element(&m.datatype, i, o)?;
                }
                Ok(())
            }
            Datatype::Array(a) => {
                let inner = self.all(&a.base, input)?;
                out.copy_from_slice(&inner);
                Ok(())
            }
            _ => {
                out.copy_from_slice(input);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_chunks_are_whole_along_the_last_dimensions() {
        assert_eq!(auto_chunk(&[10, 20], &[Some(10), Some(20)], 8), [10, 20]);
        assert_eq!(
            auto_chunk(&[4096, 1024], &[Some(4096), None], 4),
            [256, 1024]
        );
        assert_eq!(
            auto_chunk(&[3, 1 << 20], &[Some(3), Some(1 << 20)], 8),
            [1, 131_072]
        );
        assert_eq!(auto_chunk(&[0], &[None], 8), [1024]);
        assert_eq!(auto_chunk(&[0, 5], &[Some(0), Some(5)], 8), [1, 5]);
    }

    #[test]
    fn blocks_are_chunk_aligned_and_cover_everything() {
        let b = block_shape(&[1000, 300], &[64, 64], 8, 1 << 20);
        assert_eq!(b, [384, 300]);
        let b = block_shape(&[1000, 300], &[64, 64], 8, 1000);
        assert_eq!(b, [64, 64]);
        let b = block_shape(&[5, 7], &[1, 1], 4, 1 << 20);
        assert_eq!(b, [5, 7]);
        let mut seen = [0u8; 10 * 7];
        for s in Blocks::new(&[10, 7], &[4, 3]) {
            let r: Vec<(usize, usize)> = s
                .iter()
                .map(|e| match e {
                    SliceInfoElem::Slice { start, end, .. } => {
                        (*start as usize, end.unwrap_or(0) as usize)
                    }
                    _ => (0, 0),
                })
                .collect();
            for i in r[0].0..r[0].1 {
                for j in r[1].0..r[1].1 {
                    seen[i * 7 + j] += 1;
                }
            }
        }
        assert!(seen.iter().all(|c| *c == 1));
        assert_eq!(Blocks::new(&[0, 3], &[1, 1]).count(), 0);
        assert_eq!(Blocks::new(&[], &[]).count(), 1);
    }
}
