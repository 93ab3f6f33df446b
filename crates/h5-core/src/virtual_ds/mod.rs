//! Virtual datasets as a chunk-cache layout.
//!
//! The virtual extent is cut into chunks of about 1 MiB (`chunk_shape`: single indices in the
//! leading dimensions, a run of the split dimension, the trailing dimensions whole), so a read
//! builds only the chunks it meets, however large the virtual dataset. Decoding a chunk builds
//! it from the mapping list (decoded by `h5_format::vds` from its global heap object): every
//! element starts as the fill value, then each mapping reads the part of its source selection
//! that lands in the chunk from its source dataset — through the source file's own chunk cache —
//! into the positions its virtual selection names. A mapping pairs its selections' elements in
//! row-major order, and a chunk holds a contiguous range of any selection's ranks, so the source
//! part is that range of ranks (`ranks.rs`: a few regular hyperslabs). Point lists and irregular
//! hyperslabs list their elements instead. A source file or dataset that cannot be opened leaves
//! its elements at the fill value, as libhdf5's default view does.
//!
//! Source files are opened relative to the virtual file's directory and kept open by the
//! layout. A mapping onto the virtual file itself (`.`) opens that storage a second time with its
//! own caches, since the virtual file's chunk cache is locked while a chunk is decoded. The
//! layout holds the virtual file only weakly (the file's cache holds the layout).
//!
//! Unlimited mappings (`unlimited.rs`) size the virtual dataset by its sources, as libhdf5's
//! default "last available" view does: a mapping whose selections are both unlimited reaches as
//! far as its source dataset's extent; a printf-style mapping (`%b` in the source file or dataset
//! name) maps block `j` of its virtual selection to the source named with `j`, for `j = 0, 1, ...`
//! up to the first source missing. [`current_dims`] computes that extent when a dataset is
//! opened (or refreshed); reads clip each mapping to it.
//!
//! A source of another numeric type than the virtual dataset's is converted as libhdf5 converts
//! it (integers saturate, floats to integers truncate toward zero); other differing types are
//! refused with a clear error.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use h5_chunkcache::selection::{Hyperslab, MemorySelection, Points, Selection, decompose, gather};
use h5_chunkcache::{
    Chunk, ChunkCoord, ChunkLayout, Conversion, DiskLocation, Encoded, LayoutError, LayoutInfo,
    Lookup, Udata,
};
use h5_format::datatype::Datatype;
use h5_format::heap::global::GlobalHeapId;
use h5_format::vds::{SAME_FILE, SelectionSpec, VirtualMapping, VirtualMappings};

use crate::convert::{NumConversion, num_type};
use crate::dataset::{DatasetInfo, read};
use crate::error::{Error, Result};
use crate::file::{CacheSettings, FileShared};

mod ranks;
mod unlimited;

use ranks::Regular;
use unlimited::{Unlimited, selection_ends};

/// Source datasets a printf-style mapping looks for at most (`%b` from 0 up to one less).
const MAX_PRINTF_SOURCES: u64 = 1 << 20;

/// Virtual datasets reading virtual datasets deeper than this are refused (a mapping cycle).
const MAX_NESTING: usize = 16;

thread_local! {
    static NESTING: Cell<usize> = const { Cell::new(0) };
}

/// One mapping: its source names as stored (printf escapes kept), its selections and how far
/// it reaches.
#[derive(Debug)]
struct Mapping {
    file: String,
    dataset: String,
    source: SelectionSpec,
    target: SelectionSpec,
    reach: Reach,
}

/// How far a mapping reaches in the virtual dataset.
#[derive(Clone, Copy, Debug)]
enum Reach {
    /// Its selections as stored.
    Fixed,
    /// Both selections are unlimited: as far as the source dataset's extent (in the source
    /// selection's unlimited dimension) offers slices.
    Source {
        target: Unlimited,
        source: Unlimited,
    },
    /// A printf-style mapping: block `j` of the (unlimited, blocked) target selection reads the
    /// source named with `%b` replaced by `j`, as far as such sources exist.
    Printf { target: Unlimited },
}

/// A virtual dataset's layout: the mapping list and the open source files.
#[derive(Debug)]
pub struct VirtualLayout {
    file: Weak<FileShared>,
    dims: Vec<u64>,
    datatype: Datatype,
    elem_size: usize,
    fill: Vec<u8>,
    /// The chunk grid: chunks of `chunk_dims`, single indices before dimension `split`,
    /// whole dimensions after it ([`chunk_shape`]).
    chunk_dims: Vec<u64>,
    split: usize,
    mappings: Vec<Mapping>,
    sources: Sources,
    /// Per fixed mapping with a point list or an irregular selection (by index): its element
    /// pairs, listed once ([`VirtualLayout::listing`]).
    listings: Mutex<HashMap<usize, Listing>>,
}

/// A mapping's element pairs `(virtual, source)` as linear indices in their extents, ascending
/// by the virtual one.
type Listing = Arc<Vec<(u64, u64)>>;

/// The layout of the virtual dataset `info`, whose mapping list is object `heap_index` of the
/// global heap collection at `heap_address`. Its extent is `info`'s (see [`current_dims`]).
pub fn layout(
    file: &Arc<FileShared>,
    info: &DatasetInfo,
    heap_address: u64,
    heap_index: u32,
) -> Result<VirtualLayout> {
    let (chunk_dims, split) = chunk_shape(info.dims(), info.elem_size());
    Ok(VirtualLayout {
        file: Arc::downgrade(file),
        chunk_dims,
        split,
        dims: info.dims().to_vec(),
        datatype: info.datatype.clone(),
        elem_size: info.elem_size(),
        fill: info.fill.clone().unwrap_or_default(),
        mappings: mappings(file, info, heap_address, heap_index)?,
        sources: Sources::default(),
        listings: Mutex::new(HashMap::new()),
    })
}

/// The mapping list of virtual dataset `info`, checked against its rank.
fn mappings(
    file: &FileShared,
    info: &DatasetInfo,
    heap_address: u64,
    heap_index: u32,
) -> Result<Vec<Mapping>> {
    let bytes = crate::walk::global_object(
        file,
        GlobalHeapId {
            collection_address: heap_address,
            index: heap_index,
        },
    )?;
    let list = VirtualMappings::decode(&bytes, file.sizes, heap_address)?;
    let rank = info.dims().len();
    list.entries
        .into_iter()
        .map(|m| check_mapping(m, rank))
        .collect()
}

/// The extent of virtual dataset `info` as its unlimited mappings make it now (libhdf5's
/// "last available" view, `H5D__virtual_set_extent_unlim`): in each dimension some mapping is
/// unlimited in, the furthest any of them reaches (a source that cannot be opened reaches
/// nowhere), but never less than the limited selections need; the stored extent elsewhere.
/// `None` when `info` is not virtual or has no unlimited mapping.
pub fn current_dims(file: &FileShared, info: &DatasetInfo) -> Result<Option<Vec<u64>>> {
    let h5_format::message::LayoutClass::Virtual {
        heap_address,
        heap_index,
    } = &info.layout.class
    else {
        return Ok(None);
    };
    let mappings = mappings(file, info, *heap_address, *heap_index)?;
    if mappings.iter().all(|m| matches!(m.reach, Reach::Fixed)) {
        return Ok(None);
    }
    let _nested = Nesting::enter()?;
    let rank = info.dims().len();
    let sources = Sources::default();
    let mut reached: Vec<Option<u64>> = vec![None; rank];
    let mut least = vec![0u64; rank];
    for m in &mappings {
        let (unlimited, end) = match m.reach {
            Reach::Fixed => (None, 0),
            Reach::Source { target, source } => {
                let slices = match sources.dataset(
                    file,
                    &source_name(&m.file, None)?,
                    &source_name(&m.dataset, None)?,
                )? {
                    Some(src) => source.slices_in(src.1.dims()),
                    None => 0,
                };
                (Some(target.dim), target.extent_for(slices))
            }
            Reach::Printf { target } => {
                let mut found = 0u64;
                while found < MAX_PRINTF_SOURCES
                    && sources
                        .dataset(
                            file,
                            &source_name(&m.file, Some(found))?,
                            &source_name(&m.dataset, Some(found))?,
                        )?
                        .is_some()
                {
                    found = found.saturating_add(1);
                }
                let end = match found.checked_sub(1).and_then(|j| target.block(j)) {
                    Some((first, len)) => first.saturating_add(len),
                    None => 0,
                };
                (Some(target.dim), end)
            }
        };
        if let Some(d) = unlimited
            && let Some(r) = reached.get_mut(d)
        {
            *r = Some(r.map_or(end, |r| r.max(end)));
        }
        for (l, e) in least
            .iter_mut()
            .zip(selection_ends(&m.target, rank, unlimited))
        {
            *l = (*l).max(e);
        }
    }
    Ok(Some(
        info.dims()
            .iter()
            .zip(reached)
            .zip(least)
            .map(|((&stored, r), l)| r.map_or(stored, |r| r.max(l)))
            .collect(),
    ))
}

fn check_mapping(m: VirtualMapping, rank: usize) -> Result<Mapping> {
    let named = |what: &str| {
        Error::Invalid(format!(
            "virtual dataset mapping from {}:{}: {what}",
            m.source_file, m.source_dataset
        ))
    };
    if let Some(r) = m.virtual_selection.rank()
        && r != rank
    {
        return Err(named(&format!(
            "selection of rank {r} in a dataspace of rank {rank}"
        )));
    }
    let printf = has_block_number(&m.source_file) || has_block_number(&m.source_dataset);
    let reach = match (
        m.virtual_selection.is_unlimited(),
        m.source_selection.is_unlimited(),
        printf,
    ) {
        (false, false, false) => Reach::Fixed,
        (true, true, false) => match (
            Unlimited::of(&m.virtual_selection),
            Unlimited::of(&m.source_selection),
        ) {
            (Some(target), Some(source)) => Reach::Source { target, source },
            _ => {
                return Err(named(
                    "an unlimited selection of a kind libhdf5 does not make",
                ));
            }
        },
        (true, false, true) => match Unlimited::of(&m.virtual_selection) {
            Some(target) if target.block(0).is_some() => Reach::Printf { target },
            _ => {
                return Err(named(
                    "a printf-style mapping whose virtual selection is not unlimited blocks",
                ));
            }
        },
        (_, _, true) => {
            return Err(named(
                "printf-style names without an unlimited virtual and a limited source selection",
            ));
        }
        _ => return Err(named("one of its selections is unlimited, the other not")),
    };
    Ok(Mapping {
        file: m.source_file,
        dataset: m.source_dataset,
        source: m.source_selection,
        target: m.virtual_selection,
        reach,
    })
}

/// Whether a stored source name holds a `%b` (the block number of a printf-style mapping).
fn has_block_number(name: &str) -> bool {
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        if c == '%' && chars.next() == Some('b') {
            return true;
        }
    }
    false
}

/// A stored source name as a name: `%%` is `%`, `%b` is `block` in decimal (libhdf5 knows no
/// other conversion; any other `%` stays as it is). A `%b` without a block is an error.
fn source_name(name: &str, block: Option<u64>) -> Result<String> {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some('b') => match block {
                Some(j) => out.push_str(&j.to_string()),
                None => {
                    return Err(Error::Invalid(format!(
                        "printf-style virtual dataset source name {name:?} outside a printf mapping"
                    )));
                }
            },
            Some(o) => {
                out.push('%');
                out.push(o);
            }
            None => out.push('%'),
        }
    }
    Ok(out)
}

/// The depth of virtual datasets being read or sized on this thread, held while one is.
struct Nesting(usize);

impl Nesting {
    /// One level deeper; an error past [`MAX_NESTING`] (a mapping cycle).
    fn enter() -> Result<Nesting> {
        let depth = NESTING.with(|n| n.get());
        if depth >= MAX_NESTING {
            return Err(Error::Invalid(
                "virtual datasets nested too deeply (a mapping cycle?)".into(),
            ));
        }
        NESTING.with(|n| n.set(depth.saturating_add(1)));
        Ok(Nesting(depth))
    }
}

impl Drop for Nesting {
    fn drop(&mut self) {
        NESTING.with(|n| n.set(self.0));
    }
}

/// A source dataset: its file and its description.
type Source = Arc<(Arc<FileShared>, DatasetInfo)>;

/// Source files a layout (or an extent computation) keeps open at most. Past it, those it
/// holds are closed and opened again when needed, so a printf-style mapping over thousands of
/// files stays within the process's file descriptors (a source that could not be opened for
/// want of one would read as fill).
const MAX_OPEN_SOURCES: usize = 64;

/// Source files by name and source datasets by file and path, each opened once while at most
/// [`MAX_OPEN_SOURCES`] files are held; `None`: it could not be opened (its mappings read as
/// fill). A layout is built anew when its dataset's description changes (a refresh), so what
/// it opened stays what libhdf5 would hold open.
#[derive(Debug, Default)]
struct Sources {
    files: Mutex<HashMap<String, Option<Arc<FileShared>>>>,
    datasets: Mutex<HashMap<(String, String), Option<Source>>>,
}

impl Sources {
    /// The source file `name` of virtual file `file`, relative to its directory (`.`: the
    /// virtual file itself, opened again with its own caches).
    fn file(&self, file: &FileShared, name: &str) -> Result<Option<Arc<FileShared>>> {
        let mut sources = self.files.lock().map_err(|_| Error::Poisoned)?;
        if let Some(f) = sources.get(name) {
            return Ok(f.clone());
        }
        if sources.len() >= MAX_OPEN_SOURCES {
            // Lock order: files, then datasets (`dataset` holds neither while calling here).
            sources.clear();
            self.datasets.lock().map_err(|_| Error::Poisoned)?.clear();
        }
        let opened = if name == SAME_FILE {
            FileShared::open(
                Arc::clone(&file.storage) as Arc<dyn h5_io::Storage>,
                &CacheSettings::default(),
                file.dir.clone(),
            )
            .ok()
        } else {
            let path = match &file.dir {
                Some(d) if !std::path::Path::new(name).is_absolute() => d.join(name),
                _ => std::path::PathBuf::from(name),
            };
            h5_io::FileStorage::open(&path, h5_io::OpenMode::ReadOnly)
                .ok()
                .and_then(|s| {
                    let dir = path.parent().map(std::path::Path::to_path_buf);
                    FileShared::open(Arc::new(s), &CacheSettings::default(), dir).ok()
                })
        };
        sources.insert(name.to_owned(), opened.clone());
        Ok(opened)
    }

    /// Source dataset `dataset` of source file `name` with its description; `None` when the
    /// file cannot be opened or holds no such object.
    fn dataset(&self, file: &FileShared, name: &str, dataset: &str) -> Result<Option<Source>> {
        let key = (name.to_owned(), dataset.to_owned());
        if let Some(d) = self.datasets.lock().map_err(|_| Error::Poisoned)?.get(&key) {
            return Ok(d.clone());
        }
        let found = match self.file(file, name)? {
            None => None,
            Some(src) => match crate::nav::resolve(&src, src.root_address(), "/", dataset) {
                Ok(r) => {
                    let info = DatasetInfo::from_header(&r.file, &r.header)?;
                    Some(Arc::new((r.file, info)))
                }
                Err(Error::NotFound(_)) => None,
                Err(e) => return Err(e),
            },
        };
        self.datasets
            .lock()
            .map_err(|_| Error::Poisoned)?
            .insert(key, found.clone());
        Ok(found)
    }
}

fn boxed(e: Error) -> LayoutError {
    Box::new(e)
}

fn err(msg: String) -> LayoutError {
    boxed(Error::Invalid(msg))
}

/// Row-major linear index of `coord` in `extent` (checked against the extent).
fn linear(coord: &[u64], extent: &[u64]) -> Option<u64> {
    if coord.len() != extent.len() {
        return None;
    }
    coord.iter().zip(extent).try_fold(0u64, |acc, (&c, &e)| {
        if c >= e {
            None
        } else {
            acc.checked_mul(e)?.checked_add(c)
        }
    })
}

#[allow(
    clippy::arithmetic_side_effects,
    reason = "divisions by e >= 1 (the max below)"
)]
fn coords_of(mut lin: u64, extent: &[u64], out: &mut Vec<u64>) {
    let at = out.len();
    out.extend(std::iter::repeat_n(0, extent.len()));
    for (slot, &e) in out.iter_mut().skip(at).zip(extent).rev() {
        let e = e.max(1);
        *slot = lin % e;
        lin /= e;
    }
}

/// The linear indices an irregular hyperslab selects in `extent`, ascending without duplicates
/// (libhdf5's order for a union of boxes); at most `limit` of them.
fn box_union(spec: &SelectionSpec, extent: &[u64], limit: u64) -> Result<Vec<u64>, LayoutError> {
    let mut total = 0u64;
    let boxes = spec.boxes();
    for (s, e) in &boxes {
        let n = s
            .iter()
            .zip(e.iter())
            .try_fold(1u64, |a, (&s, &e)| {
                a.checked_mul(e.checked_sub(s)?.checked_add(1)?)
            })
            .unwrap_or(u64::MAX);
        total = total.saturating_add(n);
    }
    if total > limit {
        return Err(err(format!(
            "a virtual dataset selection has {total} elements, more than the {limit} mapped"
        )));
    }
    let mut out = Vec::with_capacity(total as usize);
    for (s, e) in boxes {
        let mut c = s.to_vec();
        loop {
            out.push(linear(&c, extent).ok_or_else(|| {
                err(format!(
                    "a virtual dataset selection block {s:?}..={e:?} lies outside {extent:?}"
                ))
            })?);
            // Next coordinate in the box, row-major; done when every dimension wrapped.
            let mut done = true;
            for ((x, &lo), &hi) in c.iter_mut().zip(s.iter()).zip(e.iter()).rev() {
                if *x < hi {
                    #[allow(clippy::arithmetic_side_effects, reason = "x < hi")]
                    {
                        *x += 1;
                    }
                    done = false;
                    break;
                }
                *x = lo;
            }
            if done {
                break;
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Virtual chunks hold at most about this many bytes: the dimensions after the split one whole,
/// the split one cut to fit, those before it single indices (a row larger than this is split
/// further down).
const CHUNK_TARGET_BYTES: u64 = 1 << 20;

/// Elements a point or irregular mapping may select (read whole for each chunk it meets).
const MAX_IRREGULAR_ELEMENTS: u64 = 1 << 24;

/// The chunk shape of a virtual extent `dims` of `elem`-byte elements and its split dimension:
/// single indices before it, whole dimensions after it, at most [`CHUNK_TARGET_BYTES`] (or one
/// element).
fn chunk_shape(dims: &[u64], elem: usize) -> (Vec<u64>, usize) {
    let dims: Vec<u64> = dims.iter().map(|&d| d.max(1)).collect();
    let rank = dims.len();
    let mut after = (elem as u64).max(1);
    // From the last dimension back: the first (outermost) one whose rows still fit.
    let mut split = rank;
    for (d, &n) in dims.iter().enumerate().rev() {
        split = d;
        if after.saturating_mul(n) > CHUNK_TARGET_BYTES {
            break;
        }
        after = after.saturating_mul(n);
    }
    let shape = dims
        .iter()
        .enumerate()
        .map(|(d, &n)| match d.cmp(&split) {
            std::cmp::Ordering::Less => 1,
            std::cmp::Ordering::Equal => CHUNK_TARGET_BYTES
                .checked_div(after)
                .unwrap_or(1)
                .clamp(1, n),
            std::cmp::Ordering::Greater => n,
        })
        .collect();
    (shape, split.min(rank.saturating_sub(1)))
}

/// The part of the virtual extent one chunk covers: `fixed` single indices before dimension
/// `split`, `lo..hi` in it, whole dimensions after it; `origin` is its first element.
struct ChunkBox {
    origin: Vec<u64>,
    fixed: Vec<u64>,
    split: usize,
    lo: u64,
    hi: u64,
}

/// A source dataset's selection paired with a virtual selection, element by element in
/// row-major order.
struct Pairing<'a> {
    src: &'a Source,
    /// The source file and dataset names (for errors).
    names: (&'a str, &'a str),
    source: &'a SelectionSpec,
    target: &'a SelectionSpec,
    /// The pairing holds only the first that many elements of each (an unlimited mapping).
    limit: Option<u64>,
    /// The index of the fixed mapping it is (its listing, if it needs one, is kept).
    fixed: Option<usize>,
}

impl<'a> Pairing<'a> {
    fn new(
        src: &'a Source,
        names: (&'a str, &'a str),
        source: &'a SelectionSpec,
        target: &'a SelectionSpec,
    ) -> Self {
        Pairing {
            src,
            names,
            source,
            target,
            limit: None,
            fixed: None,
        }
    }
}

impl VirtualLayout {
    fn chunk_bytes(&self) -> usize {
        self.chunk_dims
            .iter()
            .fold(self.elem_size, |a, &d| a.saturating_mul(d as usize))
    }

    /// Reads one mapping's source elements that fall in chunk `b` into `chunk`, clipped to the
    /// virtual extent and, for an unlimited mapping, to what its source offers now.
    fn apply(
        &self,
        file: &FileShared,
        index: usize,
        m: &Mapping,
        b: &ChunkBox,
        chunk: &mut [u8],
    ) -> Result<(), LayoutError> {
        let name = |n: &str, block| source_name(n, block).map_err(boxed);
        match m.reach {
            Reach::Fixed => {
                let (f, d) = (name(&m.file, None)?, name(&m.dataset, None)?);
                match self.sources.dataset(file, &f, &d).map_err(boxed)? {
                    Some(src) => {
                        let pairing = Pairing {
                            fixed: Some(index),
                            ..Pairing::new(&src, (&f, &d), &m.source, &m.target)
                        };
                        self.read_mapped(&pairing, b, chunk)
                    }
                    None => Ok(()),
                }
            }
            Reach::Source { target, source } => {
                let (f, d) = (name(&m.file, None)?, name(&m.dataset, None)?);
                let Some(src) = self.sources.dataset(file, &f, &d).map_err(boxed)? else {
                    return Ok(());
                };
                // The slices the source has now, no more than the virtual extent holds.
                let n = source
                    .slices_in(src.1.dims())
                    .min(target.slices_in(&self.dims));
                if target.dim == 0 && source.dim == 0 {
                    // Unlimited in the slowest dimension: the first slices are a prefix of
                    // the ranks.
                    let per_slice = slice_elements(&m.target).unwrap_or(0);
                    let limit = n.saturating_mul(per_slice);
                    let pairing = Pairing {
                        limit: Some(limit),
                        ..Pairing::new(&src, (&f, &d), &m.source, &m.target)
                    };
                    return self.read_mapped(&pairing, b, chunk);
                }
                let src_sel = source
                    .clip(&m.source, source.extent_for(n))
                    .map_err(boxed)?;
                let dst_sel = target
                    .clip(&m.target, target.extent_for(n))
                    .map_err(boxed)?;
                self.read_mapped(&Pairing::new(&src, (&f, &d), &src_sel, &dst_sel), b, chunk)
            }
            Reach::Printf { target } => {
                let extent = self.dims.get(target.dim).copied().unwrap_or(0);
                for j in self.printf_blocks(target, b, extent) {
                    let (f, d) = (name(&m.file, Some(j))?, name(&m.dataset, Some(j))?);
                    if let Some(src) = self.sources.dataset(file, &f, &d).map_err(boxed)? {
                        let block = target.block_selection(&m.target, j).map_err(boxed)?;
                        let pairing = Pairing::new(&src, (&f, &d), &m.source, &block);
                        self.read_mapped(&pairing, b, chunk)?;
                    }
                }
                Ok(())
            }
        }
    }

    /// The blocks of a printf-style mapping that lie wholly inside the virtual extent (libhdf5
    /// sizes the extent by whole blocks) and may meet chunk `b`.
    fn printf_blocks(&self, target: Unlimited, b: &ChunkBox, extent: u64) -> std::ops::Range<u64> {
        let Some((start, len, stride)) = target.blocks() else {
            return 0..0;
        };
        let stride = stride.max(1);
        // Blocks wholly inside the extent: start + j * stride + len <= extent.
        let inside = extent
            .checked_sub(start.saturating_add(len))
            .map_or(0, |room| (room.div_euclid(stride)).saturating_add(1))
            .min(MAX_PRINTF_SOURCES);
        // Positions of the chunk in the mapping's dimension.
        let (lo, hi) = match target.dim.cmp(&b.split) {
            std::cmp::Ordering::Less => {
                let x = b.fixed.get(target.dim).copied().unwrap_or(0);
                (x, x.saturating_add(1))
            }
            std::cmp::Ordering::Equal => (b.lo, b.hi),
            std::cmp::Ordering::Greater => (0, extent),
        };
        // Block j meets lo..hi when start + j * stride < hi and start + j * stride + len > lo.
        let first = lo
            .saturating_add(1)
            .saturating_sub(start.saturating_add(len))
            .div_ceil(stride);
        let end = hi.saturating_sub(start).div_ceil(stride);
        first.min(inside)..end.min(inside)
    }

    /// Reads the elements of `p`'s source selection paired with those of its virtual selection
    /// that fall in chunk `b` into `chunk`.
    fn read_mapped(
        &self,
        p: &Pairing<'_>,
        b: &ChunkBox,
        chunk: &mut [u8],
    ) -> Result<(), LayoutError> {
        let (file, info) = &**p.src;
        let (source, target, limit) = (p.source, p.target, p.limit);
        let (source_file, source_dataset) = p.names;
        let conv = self.conversion(info, p.names)?;
        let (Some(to), Some(from)) = (
            Regular::of(target, &self.dims),
            Regular::of(source, info.dims()),
        ) else {
            return self.read_irregular(p, conv.as_ref(), b, chunk);
        };
        let (mut lo, mut hi) = to.ranks_in(&b.fixed, b.split, b.lo, b.hi);
        if let Some(n) = limit {
            (lo, hi) = (lo.min(n), hi.min(n));
        }
        if lo >= hi {
            return Ok(());
        }
        let elem = self.elem_size;
        let selection_err = |e: h5_chunkcache::selection::SelectionError| {
            err(format!(
                "virtual dataset mapping from {source_file}:{source_dataset}: {e}"
            ))
        };
        let slab = |[s, st, c, bl]: ranks::Slab| {
            Hyperslab::from_vecs(s, st, c, bl)
                .map(Selection::Hyperslab)
                .map_err(selection_err)
        };
        // The source's elements of these ranks and their places in the chunk, both in rank
        // order, each as a few hyperslabs with their element counts.
        let from_pieces = from
            .pieces(lo, hi)
            .into_iter()
            .map(|p| {
                let sel = slab(p)?;
                let n = sel.num_elements(info.dims()).map_err(selection_err)?;
                Ok((sel, n))
            })
            .collect::<Result<Vec<_>, LayoutError>>()?;
        let to_pieces = to
            .pieces(lo, hi)
            .into_iter()
            .map(|[s, st, c, bl]| {
                let local = s
                    .iter()
                    .zip(&b.origin)
                    .map(|(&x, &o)| x.saturating_sub(o))
                    .collect();
                let sel = slab([local, st, c, bl])?;
                let n = sel.num_elements(&self.chunk_dims).map_err(selection_err)?;
                Ok((sel, n))
            })
            .collect::<Result<Vec<_>, LayoutError>>()?;
        let total = |p: &[(Selection, u64)]| p.iter().fold(0u64, |a, (_, n)| a.saturating_add(*n));
        let count = hi.saturating_sub(lo);
        if total(&from_pieces) != count || total(&to_pieces) != count {
            return Err(err(format!(
                "virtual dataset mapping from {source_file}:{source_dataset} selects different \
                 numbers of source and virtual elements"
            )));
        }
        if from_pieces.len() == to_pieces.len()
            && from_pieces
                .iter()
                .zip(&to_pieces)
                .all(|((_, a), (_, b))| a == b)
        {
            // Piece for piece: read straight into the chunk.
            for ((src_sel, _), (dst_sel, _)) in from_pieces.into_iter().zip(to_pieces) {
                let mem = MemorySelection {
                    extent: self.chunk_dims.clone(),
                    selection: dst_sel,
                };
                let conv = conv.as_ref().map(|c| c as &dyn Conversion);
                read(file, info, &src_sel, Some(&mem), conv, chunk).map_err(boxed)?;
            }
            return Ok(());
        }
        // Otherwise through a buffer in rank order (of source elements).
        let src_elem = info.elem_size();
        let bytes = usize::try_from(count)
            .ok()
            .and_then(|n| n.checked_mul(src_elem))
            .ok_or_else(|| err("a virtual dataset chunk too large".into()))?;
        let mut dense = vec![0u8; bytes];
        let mut reqs = Vec::with_capacity(from_pieces.len());
        let mut rest: &mut [u8] = &mut dense;
        for (sel, n) in &from_pieces {
            let len = usize::try_from(*n)
                .ok()
                .and_then(|n| n.checked_mul(src_elem))
                .filter(|&n| n <= rest.len())
                .ok_or_else(|| err("virtual dataset source piece past its buffer".into()))?;
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(len);
            reqs.push((info, sel, head));
            rest = tail;
        }
        crate::dataset::read_many(file, &mut reqs).map_err(boxed)?;
        let dense = converted(dense, conv.as_ref(), elem)?;
        let mut at = 0usize;
        for (sel, n) in &to_pieces {
            let pieces =
                decompose(sel, &self.chunk_dims, &self.chunk_dims).map_err(selection_err)?;
            let from = dense.get(at..).unwrap_or_default();
            for p in pieces {
                gather(from, chunk, &p.runs, elem).map_err(selection_err)?;
            }
            at = at.saturating_add(
                usize::try_from(*n)
                    .unwrap_or(usize::MAX)
                    .saturating_mul(elem),
            );
        }
        Ok(())
    }

    /// Pairing `p`'s element pairs (point lists and irregular selections listed element by
    /// element, at most [`MAX_IRREGULAR_ELEMENTS`]), ascending by the virtual element.
    fn listing(&self, p: &Pairing<'_>) -> Result<Listing, LayoutError> {
        let info = &p.src.1;
        let (source, target) = (p.source, p.target);
        let (source_file, source_dataset) = p.names;
        let src_dims = info.dims();
        let listed = |spec: &SelectionSpec, dims: &[u64]| -> Result<Vec<u64>, LayoutError> {
            match spec {
                SelectionSpec::None => Ok(Vec::new()),
                SelectionSpec::Points { coords, .. } => coords
                    .chunks_exact(dims.len().max(1))
                    .map(|c| {
                        linear(c, dims).ok_or_else(|| {
                            err(format!("virtual dataset point {c:?} lies outside {dims:?}"))
                        })
                    })
                    .collect(),
                SelectionSpec::Blocks { .. } => box_union(spec, dims, MAX_IRREGULAR_ELEMENTS),
                SelectionSpec::All | SelectionSpec::Regular { .. } => {
                    let r = Regular::of(spec, dims)
                        .ok_or_else(|| err("an unlimited irregular virtual mapping".into()))?;
                    let n = r.ranks_in(&[], 0, 0, dims.first().copied().unwrap_or(1)).1;
                    if n > MAX_IRREGULAR_ELEMENTS {
                        return Err(err(format!(
                            "a virtual dataset selection of {n} elements paired with a point list"
                        )));
                    }
                    let mut out = Vec::new();
                    for [s, st, c, bl] in r.pieces(0, n) {
                        let h = SelectionSpec::Regular {
                            start: s,
                            stride: st,
                            count: c,
                            block: bl,
                        };
                        let boxes = h.block_list(MAX_IRREGULAR_ELEMENTS).ok_or_else(|| {
                            err("a virtual dataset selection of too many blocks".into())
                        })?;
                        let mut corners = Vec::new();
                        for (lo, hi) in boxes {
                            corners.extend(lo);
                            corners.extend(hi);
                        }
                        out.extend(box_union(
                            &SelectionSpec::Blocks {
                                rank: dims.len(),
                                corners,
                            },
                            dims,
                            MAX_IRREGULAR_ELEMENTS,
                        )?);
                    }
                    Ok(out)
                }
            }
        };
        let mut places = listed(target, &self.dims)?;
        let mut from = listed(source, src_dims)?;
        if let Some(n) = p.limit.and_then(|n| usize::try_from(n).ok()) {
            places.truncate(n);
            from.truncate(n);
        }
        if places.len() != from.len() {
            return Err(err(format!(
                "virtual dataset mapping from {source_file}:{source_dataset} selects {} source \
                 and {} virtual elements",
                from.len(),
                places.len()
            )));
        }
        let mut pairs: Vec<(u64, u64)> = places.into_iter().zip(from).collect();
        pairs.sort_by_key(|&(v, _)| v);
        Ok(Arc::new(pairs))
    }

    /// [`VirtualLayout::read_mapped`] for point lists and irregular hyperslabs: the mapping's
    /// element pairs are listed (once for a fixed mapping, kept by the layout) and those whose
    /// virtual element lies in chunk `b` (a range of them, found by binary search) are read
    /// and placed.
    fn read_irregular(
        &self,
        p: &Pairing<'_>,
        conv: Option<&NumConversion>,
        b: &ChunkBox,
        chunk: &mut [u8],
    ) -> Result<(), LayoutError> {
        let (file, info) = &**p.src;
        let src_dims = info.dims();
        let pairs = match p.fixed {
            Some(k) => {
                let known = self
                    .listings
                    .lock()
                    .map_err(|_| boxed(Error::Poisoned))?
                    .get(&k)
                    .cloned();
                match known {
                    Some(l) => l,
                    None => {
                        let l = self.listing(p)?;
                        self.listings
                            .lock()
                            .map_err(|_| boxed(Error::Poisoned))?
                            .insert(k, Arc::clone(&l));
                        l
                    }
                }
            }
            None => self.listing(p)?,
        };
        // The chunk is the linear range first..first + len of the virtual extent (its
        // dimensions after the split one are whole), in the same order as the chunk's buffer.
        let first = linear(&b.origin, &self.dims)
            .ok_or_else(|| err("a virtual dataset chunk outside its extent".into()))?;
        let inner = self
            .dims
            .iter()
            .skip(b.split.saturating_add(1))
            .fold(1u64, |a, &d| a.saturating_mul(d));
        let end = first.saturating_add(b.hi.saturating_sub(b.lo).saturating_mul(inner));
        let lo = pairs.partition_point(|&(v, _)| v < first);
        let hi = pairs.partition_point(|&(v, _)| v < end);
        let wanted: Vec<(u64, u64)> = pairs
            .get(lo..hi)
            .unwrap_or_default()
            .iter()
            .map(|&(v, s)| (v.saturating_sub(first), s))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let mut flat = Vec::with_capacity(wanted.len().saturating_mul(src_dims.len()));
        for &(_, s) in &wanted {
            coords_of(s, src_dims, &mut flat);
        }
        let sel = Selection::Points(
            Points::new(src_dims.len(), flat)
                .map_err(|e| err(format!("virtual dataset source points: {e}")))?,
        );
        let elem = self.elem_size;
        let mut dense = vec![0u8; wanted.len().saturating_mul(info.elem_size())];
        read(file, info, &sel, None, None, &mut dense).map_err(boxed)?;
        let dense = converted(dense, conv, elem)?;
        for (i, &(l, _)) in wanted.iter().enumerate() {
            let at = usize::try_from(l)
                .unwrap_or(usize::MAX)
                .saturating_mul(elem);
            let (Some(dst), Some(s)) = (
                chunk.get_mut(at..at.saturating_add(elem)),
                i.checked_mul(elem)
                    .and_then(|from| dense.get(from..))
                    .and_then(|rest| rest.get(..elem)),
            ) else {
                return Err(err("virtual dataset element outside the chunk".into()));
            };
            dst.copy_from_slice(s);
        }
        Ok(())
    }

    /// How source dataset `info`'s elements become the virtual dataset's: `None` when the
    /// types are the same, else a numeric conversion as libhdf5 makes it (integers saturate,
    /// floats to integers truncate); other differing types are not read.
    fn conversion(
        &self,
        info: &DatasetInfo,
        (source_file, source_dataset): (&str, &str),
    ) -> Result<Option<NumConversion>, LayoutError> {
        if info.datatype == self.datatype {
            return Ok(None);
        }
        let unsupported = || {
            boxed(Error::Unsupported(format!(
                "virtual dataset source {source_file}:{source_dataset} of type {} read as {}",
                info.datatype.describe(),
                self.datatype.describe()
            )))
        };
        let (Some(from), Some(to)) = (num_type(&info.datatype), num_type(&self.datatype)) else {
            return Err(unsupported());
        };
        NumConversion::new(from, to, true)
            .map(Some)
            .map_err(|_| unsupported())
    }

    /// Chunk `coord`: the fill value, then every mapping's elements that fall in it.
    fn build(&self, coord: &ChunkCoord) -> Result<Vec<u8>, LayoutError> {
        let bytes = self.chunk_bytes();
        let mut chunk = if self.fill.len() == self.elem_size {
            self.fill
                .repeat(bytes.checked_div(self.elem_size).unwrap_or(0))
        } else {
            vec![0u8; bytes]
        };
        if self.dims.contains(&0) {
            return Ok(chunk);
        }
        let origin: Vec<u64> = coord
            .as_slice()
            .iter()
            .zip(&self.chunk_dims)
            .map(|(&c, &d)| c.saturating_mul(d))
            .collect();
        let split = self.split;
        let lo = origin.get(split).copied().unwrap_or(0);
        let hi = lo
            .saturating_add(self.chunk_dims.get(split).copied().unwrap_or(1))
            .min(self.dims.get(split).copied().unwrap_or(1));
        let b = ChunkBox {
            fixed: origin.get(..split).unwrap_or_default().to_vec(),
            origin,
            split,
            lo,
            hi,
        };
        let file = self
            .file
            .upgrade()
            .ok_or_else(|| err("the virtual dataset's file is closed".into()))?;
        let _nested = Nesting::enter().map_err(boxed)?;
        self.mappings
            .iter()
            .enumerate()
            .try_for_each(|(i, m)| self.apply(&file, i, m, &b, &mut chunk))?;
        Ok(chunk)
    }
}

/// `dense` (source elements) as `elem`-byte virtual elements through `conv`, if any.
fn converted(
    dense: Vec<u8>,
    conv: Option<&NumConversion>,
    elem: usize,
) -> Result<Vec<u8>, LayoutError> {
    let Some(c) = conv else {
        return Ok(dense);
    };
    let n = dense
        .len()
        .checked_div(c.from().size())
        .ok_or_else(|| err("a virtual dataset source type of no size".into()))?;
    let mut out = vec![0u8; n.saturating_mul(elem)];
    c.run(&dense, &mut out, n)
        .map_err(|e| boxed(Error::Invalid(e.to_string())))?;
    Ok(out)
}

/// Elements of one slice of a regular selection unlimited in its first dimension (the product
/// of the other dimensions' counts and blocks).
fn slice_elements(spec: &SelectionSpec) -> Option<u64> {
    let SelectionSpec::Regular { count, block, .. } = spec else {
        return None;
    };
    count
        .iter()
        .zip(block)
        .skip(1)
        .try_fold(1u64, |a, (&c, &b)| a.checked_mul(c)?.checked_mul(b))
}

impl ChunkLayout for VirtualLayout {
    crate::layouts::read_only_writes!();

    fn query(&self) -> LayoutInfo {
        LayoutInfo {
            needs_codec: true,
            ..LayoutInfo::dense(&self.chunk_dims, self.elem_size, &self.fill)
        }
    }

    fn extent(&self) -> Vec<u64> {
        self.dims.clone()
    }

    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        // Nothing is read from the virtual file: decode builds each chunk from the sources.
        Ok(coords
            .iter()
            .map(|_| {
                Lookup::dense(
                    Some(DiskLocation { addr: 0, size: 0 }),
                    self.chunk_bytes(),
                    Box::new(()),
                )
            })
            .collect())
    }

    fn decode(
        &self,
        coord: &ChunkCoord,
        _: Vec<u8>,
        _: bool,
        _: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        Ok(Chunk::Dense(self.build(coord)?))
    }

    fn encode(
        &self,
        _: &ChunkCoord,
        _: &Chunk,
        _: bool,
        _: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        Err(crate::layouts::read_only("encode"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printf_names_take_the_block_number() {
        assert_eq!(source_name("a%%b.h5", None).unwrap(), "a%b.h5");
        assert_eq!(source_name("plain", None).unwrap(), "plain");
        assert_eq!(source_name("x%", None).unwrap(), "x%");
        assert_eq!(source_name("x%d", None).unwrap(), "x%d");
        assert!(matches!(
            source_name("f%b.h5", None),
            Err(Error::Invalid(_))
        ));
        assert_eq!(
            source_name("f-%b/%b_%%.h5", Some(12)).unwrap(),
            "f-12/12_%.h5"
        );
        assert!(has_block_number("f-%b.h5"));
        assert!(!has_block_number("f-%%b.h5"));
        assert!(!has_block_number("f-%d.h5"));
    }

    #[test]
    fn box_unions_are_row_major_without_duplicates() {
        let spec = SelectionSpec::Blocks {
            rank: 2,
            corners: vec![1, 1, 2, 2, 0, 2, 1, 3],
        };
        let got = box_union(&spec, &[3, 4], 100).unwrap();
        assert_eq!(got, vec![2, 3, 5, 6, 7, 9, 10]);
        assert!(box_union(&spec, &[3, 4], 5).is_err());
        assert!(box_union(&spec, &[2, 2], 100).is_err());
        let mut flat = Vec::new();
        coords_of(7, &[3, 4], &mut flat);
        assert_eq!(flat, vec![1, 3]);
        assert_eq!(linear(&[2, 3], &[3, 4]), Some(11));
        assert_eq!(linear(&[3, 0], &[3, 4]), None);
    }
}
