//! Virtual datasets as a chunk-cache layout.
//!
//! The whole virtual extent is one "chunk". Decoding it builds the dense chunk from the mapping
//! list (decoded by `h5_format::vds` from its global heap object): every element starts as the
//! fill value, then each mapping reads its source selection from its source dataset — through
//! the source file's own chunk cache — into the positions its virtual selection names. A source
//! file or dataset that cannot be opened leaves its elements at the fill value, as libhdf5's
//! default view does.
//!
//! Source files are opened relative to the virtual file's directory and kept open by the
//! layout. A mapping onto the virtual file itself (`.`) opens that storage a second time with its
//! own caches, since the virtual file's chunk cache is locked while a chunk is decoded. The
//! layout holds the virtual file only weakly (the file's cache holds the layout).
//!
//! Not supported (clear errors): unlimited selections and printf-style (`%b`) source names, and
//! source datasets whose datatype differs from the virtual dataset's.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use h5_chunkcache::selection::{Hyperslab, MemorySelection, Points, Selection};
use h5_chunkcache::{
    Chunk, ChunkCoord, ChunkLayout, DiskLocation, Encoded, LayoutError, LayoutInfo, Lookup, Udata,
};
use h5_format::datatype::Datatype;
use h5_format::heap::global::GlobalHeapId;
use h5_format::vds::{SAME_FILE, SelectionSpec, VirtualMapping, VirtualMappings};

use crate::dataset::{DatasetInfo, read};
use crate::error::{Error, Result};
use crate::file::{CacheSettings, FileShared};

/// Virtual datasets reading virtual datasets deeper than this are refused (a mapping cycle).
const MAX_NESTING: usize = 16;

thread_local! {
    static NESTING: Cell<usize> = const { Cell::new(0) };
}

/// One mapping with its names resolved (printf escapes removed).
#[derive(Debug)]
struct Mapping {
    file: String,
    dataset: String,
    source: SelectionSpec,
    target: SelectionSpec,
}

/// A virtual dataset's layout: the mapping list and the open source files.
#[derive(Debug)]
pub struct VirtualLayout {
    file: Weak<FileShared>,
    dims: Vec<u64>,
    datatype: Datatype,
    elem_size: usize,
    fill: Vec<u8>,
    mappings: Vec<Mapping>,
    /// Source files by name; `None`: the file could not be opened (its mappings read as fill).
    sources: Mutex<HashMap<String, Option<Arc<FileShared>>>>,
}

/// The layout of the virtual dataset `info`, whose mapping list is object `heap_index` of the
/// global heap collection at `heap_address`.
pub fn layout(
    file: &Arc<FileShared>,
    info: &DatasetInfo,
    heap_address: u64,
    heap_index: u32,
) -> Result<VirtualLayout> {
    let bytes = crate::walk::global_object(
        file,
        GlobalHeapId {
            collection_address: heap_address,
            index: heap_index,
        },
    )?;
    let list = VirtualMappings::decode(&bytes, file.sizes, heap_address)?;
    let rank = info.dims().len();
    let mut mappings = Vec::with_capacity(list.entries.len());
    for m in list.entries {
        mappings.push(check_mapping(m, rank)?);
    }
    Ok(VirtualLayout {
        file: Arc::downgrade(file),
        dims: info.dims().to_vec(),
        datatype: info.datatype.clone(),
        elem_size: info.elem_size(),
        fill: info.fill.clone().unwrap_or_default(),
        mappings,
        sources: Mutex::new(HashMap::new()),
    })
}

fn check_mapping(m: VirtualMapping, rank: usize) -> Result<Mapping> {
    if m.source_selection.is_unlimited() || m.virtual_selection.is_unlimited() {
        return Err(Error::Unsupported(format!(
            "virtual dataset mapping from {}:{} with an unlimited selection",
            m.source_file, m.source_dataset
        )));
    }
    if let Some(r) = m.virtual_selection.rank()
        && r != rank
    {
        return Err(Error::Invalid(format!(
            "virtual dataset mapping from {}:{}: selection of rank {r} in a dataspace of rank {rank}",
            m.source_file, m.source_dataset
        )));
    }
    Ok(Mapping {
        file: unescape(&m.source_file)?,
        dataset: unescape(&m.source_dataset)?,
        source: m.source_selection,
        target: m.virtual_selection,
    })
}

/// A source name without its printf escapes (`%%` is `%`); `%b` is refused.
fn unescape(name: &str) -> Result<String> {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some('b') => {
                return Err(Error::Unsupported(format!(
                    "printf-style virtual dataset source name {name:?}"
                )));
            }
            Some(o) => {
                out.push('%');
                out.push(o);
            }
            None => out.push('%'),
        }
    }
    Ok(out)
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

/// The chunk-cache selection of a stored selection over `extent`, if it has one.
fn simple_selection(spec: &SelectionSpec) -> Result<Option<Selection>, LayoutError> {
    Ok(Some(match spec {
        SelectionSpec::None => Selection::None,
        SelectionSpec::All => Selection::All,
        SelectionSpec::Regular {
            start,
            stride,
            count,
            block,
        } => Selection::Hyperslab(
            Hyperslab::new(start, stride, count, block)
                .map_err(|e| err(format!("virtual dataset hyperslab: {e}")))?,
        ),
        SelectionSpec::Points { .. } | SelectionSpec::Blocks { .. } => return Ok(None),
    }))
}

impl VirtualLayout {
    fn chunk_dims(&self) -> Vec<u64> {
        self.dims.iter().map(|&d| d.max(1)).collect()
    }

    fn chunk_bytes(&self) -> usize {
        self.chunk_dims()
            .iter()
            .fold(self.elem_size, |a, &d| a.saturating_mul(d as usize))
    }

    /// The source file named `name`, opened once (`None`: it cannot be opened).
    fn source_file(&self, name: &str) -> Result<Option<Arc<FileShared>>, LayoutError> {
        let mut sources = self.sources.lock().map_err(|_| boxed(Error::Poisoned))?;
        if let Some(f) = sources.get(name) {
            return Ok(f.clone());
        }
        let file = self
            .file
            .upgrade()
            .ok_or_else(|| err("the virtual dataset's file is closed".into()))?;
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

    /// Reads one mapping's source elements into `chunk` (the dense virtual extent).
    fn apply(&self, m: &Mapping, chunk: &mut [u8]) -> Result<(), LayoutError> {
        let Some(src) = self.source_file(&m.file)? else {
            return Ok(());
        };
        let resolved = match crate::nav::resolve(&src, src.root_address(), "/", &m.dataset) {
            Ok(r) => r,
            Err(Error::NotFound(_)) => return Ok(()),
            Err(e) => return Err(boxed(e)),
        };
        let info = DatasetInfo::from_header(&resolved.file, &resolved.header).map_err(boxed)?;
        if info.datatype != self.datatype {
            return Err(boxed(Error::Unsupported(format!(
                "virtual dataset source {}:{} has another datatype than the virtual dataset",
                m.file, m.dataset
            ))));
        }
        let src_dims = info.dims().to_vec();
        let mapped = crate::buffer::product(self.dims.iter().copied())
            .ok_or_else(|| err(format!("virtual dataset block {:?} too large", self.dims)))?;
        // The source selection as a chunk-cache selection (irregular boxes become a point list
        // in row-major order).
        let src_sel = match simple_selection(&m.source)? {
            Some(s) => s,
            None => match &m.source {
                SelectionSpec::Points { rank, coords } => Selection::Points(
                    Points::new(*rank, coords.clone())
                        .map_err(|e| err(format!("virtual dataset source points: {e}")))?,
                ),
                spec => {
                    let lin = box_union(spec, &src_dims, mapped)?;
                    let mut flat = Vec::with_capacity(lin.len().saturating_mul(src_dims.len()));
                    for l in lin {
                        coords_of(l, &src_dims, &mut flat);
                    }
                    Selection::Points(
                        Points::new(src_dims.len(), flat)
                            .map_err(|e| err(format!("virtual dataset source blocks: {e}")))?,
                    )
                }
            },
        };
        let n = src_sel
            .num_elements(&src_dims)
            .map_err(|e| err(format!("virtual dataset source selection: {e}")))?;
        let file = &resolved.file;
        let elem = self.elem_size;
        match simple_selection(&m.target)? {
            Some(target) => {
                let mem = MemorySelection {
                    extent: self.dims.clone(),
                    selection: target,
                };
                read(file, &info, &src_sel, Some(&mem), None, chunk).map_err(boxed)
            }
            None => {
                // Points or boxes in the virtual extent: read densely, then place element by
                // element in the virtual selection's order.
                let places: Vec<u64> = match &m.target {
                    SelectionSpec::Points { coords, .. } => coords
                        .chunks_exact(self.dims.len().max(1))
                        .map(|c| {
                            linear(c, &self.dims).ok_or_else(|| {
                                err(format!(
                                    "virtual dataset point {c:?} lies outside {:?}",
                                    self.dims
                                ))
                            })
                        })
                        .collect::<Result<_, _>>()?,
                    spec => box_union(spec, &self.dims, mapped)?,
                };
                if places.len() as u64 != n {
                    return Err(err(format!(
                        "virtual dataset mapping from {}:{} selects {n} source and {} virtual \
                         elements",
                        m.file,
                        m.dataset,
                        places.len()
                    )));
                }
                let mut dense = vec![0u8; places.len().saturating_mul(elem)];
                read(file, &info, &src_sel, None, None, &mut dense).map_err(boxed)?;
                for (i, p) in places.into_iter().enumerate() {
                    let at = (p as usize).saturating_mul(elem);
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
        }
    }

    fn build(&self) -> Result<Vec<u8>, LayoutError> {
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
        let depth = NESTING.with(|n| n.get());
        if depth >= MAX_NESTING {
            return Err(err(
                "virtual datasets nested too deeply (a mapping cycle?)".into()
            ));
        }
        #[allow(
            clippy::arithmetic_side_effects,
            reason = "depth < MAX_NESTING (checked above)"
        )]
        NESTING.with(|n| n.set(depth + 1));
        let result = self
            .mappings
            .iter()
            .try_for_each(|m| self.apply(m, &mut chunk));
        NESTING.with(|n| n.set(depth));
        result.map(|()| chunk)
    }
}

impl ChunkLayout for VirtualLayout {
    crate::layouts::read_only_writes!();

    fn query(&self) -> LayoutInfo {
        LayoutInfo {
            needs_codec: true,
            ..LayoutInfo::dense(&self.chunk_dims(), self.elem_size, &self.fill)
        }
    }

    fn extent(&self) -> Vec<u64> {
        self.dims.clone()
    }

    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        // Nothing is read from the virtual file: decode builds the chunk from the sources.
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
        _: &ChunkCoord,
        _: Vec<u8>,
        _: bool,
        _: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        Ok(Chunk::Dense(self.build()?))
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
    fn printf_escapes() {
        assert_eq!(unescape("a%%b.h5").unwrap(), "a%b.h5");
        assert_eq!(unescape("plain").unwrap(), "plain");
        assert_eq!(unescape("x%").unwrap(), "x%");
        assert!(matches!(unescape("f%b.h5"), Err(Error::Unsupported(_))));
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
