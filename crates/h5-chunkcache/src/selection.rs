//! Dataspace selections, their decomposition into per-chunk copy runs, and the in-memory
//! scatter/gather helpers (SCC-011, SCC-049, SCC-057; plan in `docs/design.md` §3 step 4).
//!
//! Everything here is pure computation: no I/O, no panics on any input (errors are
//! [`SelectionError`]), and every product of dimensions is checked for `u64` overflow.
//!
//! A read or write names the elements it touches with a [`Selection`] in the dataset's coordinates.
//! The caller's buffer holds the selected elements densely, in selection order (row-major over the
//! selected elements for [`Selection::All`] and [`Selection::Hyperslab`], the given order for
//! [`Selection::Points`]). [`decompose`] splits a selection into one [`ChunkPiece`] per touched
//! chunk; each piece lists [`CopyRun`]s, contiguous stretches that are contiguous both in the chunk
//! buffer (row-major over the full chunk dimensions) and in the caller's buffer. Runs follow the
//! fastest-varying dimension, trailing dimensions that a piece covers completely (in the chunk and in
//! the selection) are folded into one run, and adjacent runs are merged: a chunk spanning whole
//! trailing dimensions of the selection (`All` over a dataset chunked by rows, say) is one run, and
//! otherwise a piece has one run per chunk row it touches. [`scatter`], [`gather`] and
//! [`fill_runs`] then move bytes run by run; type conversion is not done here (identity in the
//! first milestone, spec §2.2).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

use crate::layout::{Conversion, LayoutError};
use crate::{ChunkCoord, MAX_RANK};

/// Every way a selection computation can fail. Each variant names what the caller got wrong; none
/// carries a free-form message.
#[non_exhaustive]
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum SelectionError {
    /// Two things that must have the same rank do not (selection vs extent, chunk dimensions vs
    /// extent, chunk coordinates vs extent, or the four vectors of a hyperslab).
    #[error("rank mismatch: expected {expected}, got {got}")]
    RankMismatch {
        /// The rank required (the extent's, or the hyperslab's `start`).
        expected: usize,
        /// The rank found.
        got: usize,
    },
    /// The rank is larger than [`MAX_RANK`].
    #[error("rank {rank} is larger than the maximum {MAX_RANK}")]
    RankTooLarge {
        /// The rank found.
        rank: usize,
    },
    /// A selected index lies outside the extent.
    #[error("index {index} in dimension {dim} is outside the extent {extent}")]
    OutOfExtent {
        /// The dimension.
        dim: usize,
        /// The offending index (for a hyperslab, the last index it selects in `dim`).
        index: u64,
        /// The extent of `dim`.
        extent: u64,
    },
    /// A chunk dimension is zero.
    #[error("chunk dimension {dim} is zero")]
    ZeroDimension {
        /// The dimension.
        dim: usize,
    },
    /// A hyperslab with more than one block in a dimension has a stride smaller than its block
    /// (overlapping blocks) or a zero stride.
    #[error("hyperslab stride {stride} is smaller than its block {block} in dimension {dim}")]
    BadStride {
        /// The dimension.
        dim: usize,
        /// The stride given.
        stride: u64,
        /// The block given.
        block: u64,
    },
    /// A flat point list's length is not a multiple of the rank (or is not empty for rank 0).
    #[error("a point list of {len} coordinates does not divide into points of rank {rank}")]
    PointsLength {
        /// Number of coordinates given.
        len: usize,
        /// The rank.
        rank: usize,
    },
    /// A count of elements, an index or a byte offset does not fit in `u64` (or `usize`).
    #[error("arithmetic overflow: a size or offset does not fit in 64 bits")]
    Overflow,
    /// The caller's buffer is too small for the runs.
    #[error("buffer too small: {needed} bytes needed, {got} given")]
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// The chunk buffer is too small for the runs.
    #[error("chunk buffer too small: {needed} bytes needed, {got} given")]
    ChunkTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// The element size (or the fill value's length) is zero.
    #[error("element size is zero")]
    ZeroElementSize,
    /// A memory selection made of points is not supported (only `All` and hyperslabs).
    #[error("point selections in memory are not supported")]
    PointsInMemory,
    /// The file and memory selections select different numbers of elements.
    #[error("the file selection has {file} elements, the memory selection {memory}")]
    CountMismatch {
        /// Elements selected in the file.
        file: u64,
        /// Elements selected in memory.
        memory: u64,
    },
}

/// A regular hyperslab: per dimension start, stride, count, block (HDF5 semantics: selected indices
/// are `start + i*stride + j` for `i < count`, `j < block`; `stride >= block` unless `count <= 1`).
///
/// A zero `count` or `block` in any dimension selects nothing (as `H5Sselect_hyperslab` does). The
/// fields are public; every function that takes a hyperslab re-checks them, so a hand-built value is
/// as safe as one from [`Hyperslab::new`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Hyperslab {
    /// First selected index per dimension.
    pub start: Vec<u64>,
    /// Distance between the starts of consecutive blocks per dimension.
    pub stride: Vec<u64>,
    /// Number of blocks per dimension.
    pub count: Vec<u64>,
    /// Block length per dimension.
    pub block: Vec<u64>,
}

impl Hyperslab {
    /// A hyperslab from its four vectors, checked for equal ranks (at most [`MAX_RANK`]), strides
    /// (`stride >= block` and non-zero where `count > 1`) and overflow of the last selected index.
    /// The extent is checked later, by [`Selection::validate`].
    pub fn new(
        start: &[u64],
        stride: &[u64],
        count: &[u64],
        block: &[u64],
    ) -> Result<Self, SelectionError> {
        Self::from_vecs(
            start.to_vec(),
            stride.to_vec(),
            count.to_vec(),
            block.to_vec(),
        )
    }

    /// [`Hyperslab::new`] taking its lists by value (no copy).
    pub fn from_vecs(
        start: Vec<u64>,
        stride: Vec<u64>,
        count: Vec<u64>,
        block: Vec<u64>,
    ) -> Result<Self, SelectionError> {
        let h = Self {
            start,
            stride,
            count,
            block,
        };
        h.check()?;
        Ok(h)
    }

    /// The box of `shape` elements starting at `start` (one block per dimension: `count` 1,
    /// `stride` = `block` = `shape`). A zero in `shape` selects nothing.
    pub fn contiguous(start: &[u64], shape: &[u64]) -> Result<Self, SelectionError> {
        let ones = vec![1; start.len()];
        Self::new(start, shape, &ones, shape)
    }

    /// Rank (the length of `start`).
    pub fn rank(&self) -> usize {
        self.start.len()
    }

    /// Whether the hyperslab selects nothing (a zero `count` or `block` somewhere).
    pub fn is_empty(&self) -> bool {
        self.count.contains(&0) || self.block.contains(&0)
    }

    /// Structural checks, independent of any extent.
    fn check(&self) -> Result<(), SelectionError> {
        let rank = self.start.len();
        for v in [&self.stride, &self.count, &self.block] {
            if v.len() != rank {
                return Err(SelectionError::RankMismatch {
                    expected: rank,
                    got: v.len(),
                });
            }
        }
        if rank > MAX_RANK {
            return Err(SelectionError::RankTooLarge { rank });
        }
        for dim in 0..rank {
            self.last_index(dim)?;
        }
        Ok(())
    }

    /// The last index selected in `dim`, `None` when the dimension selects nothing. Assumes the
    /// vectors have equal length (checked by [`Hyperslab::check`] before any caller gets here).
    fn last_index(&self, dim: usize) -> Result<Option<u64>, SelectionError> {
        let get = |v: &[u64]| v.get(dim).copied().ok_or(SelectionError::Overflow);
        let (start, stride, count, block) = (
            get(&self.start)?,
            get(&self.stride)?,
            get(&self.count)?,
            get(&self.block)?,
        );
        if count == 0 || block == 0 {
            return Ok(None);
        }
        if count > 1 && stride < block {
            return Err(SelectionError::BadStride { dim, stride, block });
        }
        (count - 1)
            .checked_mul(stride)
            .and_then(|v| v.checked_add(block - 1))
            .and_then(|v| v.checked_add(start))
            .map(Some)
            .ok_or(SelectionError::Overflow)
    }
}

/// A point list, in the order given (point order is significant: it is the buffer order).
/// Duplicates are allowed: a read copies the element to every position, a write leaves the value of
/// the last occurrence.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Points {
    rank: usize,
    coords: Vec<u64>,
}

impl Points {
    /// Points of rank `rank` from `flat`, `rank` coordinates per point. The length must be a multiple
    /// of the rank; with rank 0 the list must be empty (a scalar dataspace is selected with
    /// [`Selection::All`] instead).
    pub fn new(rank: usize, flat: Vec<u64>) -> Result<Self, SelectionError> {
        if rank > MAX_RANK {
            return Err(SelectionError::RankTooLarge { rank });
        }
        // With rank 0 only the empty list is a multiple.
        if !flat.len().is_multiple_of(rank) {
            return Err(SelectionError::PointsLength {
                len: flat.len(),
                rank,
            });
        }
        Ok(Self { rank, coords: flat })
    }

    /// Rank of every point.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.coords.len().checked_div(self.rank).unwrap_or(0)
    }

    /// Whether the list has no points.
    pub fn is_empty(&self) -> bool {
        self.coords.is_empty()
    }

    /// The points in order, each a slice of `rank` coordinates.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u64]> {
        // With rank 0 the list is empty, so the chunk length 1 yields nothing.
        self.coords.chunks_exact(self.rank.max(1))
    }

    /// The coordinates, flat, `rank` per point.
    pub fn as_flat(&self) -> &[u64] {
        &self.coords
    }
}

/// What a read or write touches, in the dataset's coordinates.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Selection {
    /// Every element of the extent (row-major buffer order).
    All,
    /// No element.
    None,
    /// A regular hyperslab (row-major buffer order over the selected elements).
    Hyperslab(Hyperslab),
    /// A point list (buffer order is the list's order).
    Points(Points),
}

impl From<Hyperslab> for Selection {
    fn from(h: Hyperslab) -> Self {
        Self::Hyperslab(h)
    }
}

impl From<Points> for Selection {
    fn from(p: Points) -> Self {
        Self::Points(p)
    }
}

impl Selection {
    /// Number of selected elements (the length of the caller's buffer in elements), after
    /// [`Selection::validate`]; [`SelectionError::Overflow`] if it does not fit in `u64`.
    pub fn num_elements(&self, extent: &[u64]) -> Result<u64, SelectionError> {
        self.validate(extent)?;
        match self {
            Self::All => checked_product(extent.iter().map(|&e| Some(e))),
            Self::None => Ok(0),
            Self::Hyperslab(h) if h.is_empty() => Ok(0),
            Self::Hyperslab(h) => checked_product(
                h.count
                    .iter()
                    .zip(&h.block)
                    .map(|(&c, &b)| c.checked_mul(b)),
            ),
            Self::Points(p) => u64::try_from(p.len()).map_err(|_| SelectionError::Overflow),
        }
    }

    /// Checks that the selection's rank matches the extent's (at most [`MAX_RANK`]), that a
    /// hyperslab is well formed, and that every selected element lies inside `extent`. An empty
    /// hyperslab is never out of the extent.
    pub fn validate(&self, extent: &[u64]) -> Result<(), SelectionError> {
        let rank = extent.len();
        if rank > MAX_RANK {
            return Err(SelectionError::RankTooLarge { rank });
        }
        let mismatch = |got: usize| SelectionError::RankMismatch {
            expected: rank,
            got,
        };
        match self {
            Self::All | Self::None => Ok(()),
            Self::Hyperslab(h) => {
                h.check()?;
                if h.rank() != rank {
                    return Err(mismatch(h.rank()));
                }
                if h.is_empty() {
                    return Ok(());
                }
                for (dim, &ext) in extent.iter().enumerate() {
                    if let Some(index) = h.last_index(dim)?
                        && index >= ext
                    {
                        return Err(SelectionError::OutOfExtent {
                            dim,
                            index,
                            extent: ext,
                        });
                    }
                }
                Ok(())
            }
            Self::Points(p) => {
                if p.rank() != rank {
                    return Err(mismatch(p.rank()));
                }
                for point in p.iter() {
                    for (dim, (&index, &ext)) in point.iter().zip(extent).enumerate() {
                        if index >= ext {
                            return Err(SelectionError::OutOfExtent {
                                dim,
                                index,
                                extent: ext,
                            });
                        }
                    }
                }
                Ok(())
            }
        }
    }
}

/// One contiguous copy: `len` elements starting at element `chunk_offset` of the chunk buffer
/// (row-major over the full chunk dims) and at element `buf_offset` of the caller's buffer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct CopyRun {
    /// First element in the chunk buffer.
    pub chunk_offset: u64,
    /// First element in the caller's buffer (unused, 0, for chunk-only runs).
    pub buf_offset: u64,
    /// Number of elements.
    pub len: u64,
}

/// The part of a selection that falls in one chunk.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ChunkPiece {
    /// The chunk's scaled coordinates.
    pub coord: ChunkCoord,
    /// The copies, in buffer order (ascending `buf_offset`).
    pub runs: Vec<CopyRun>,
    /// Number of selected elements in this chunk (the sum of the runs' lengths; a point listed
    /// twice counts twice).
    pub elements: u64,
}

impl ChunkPiece {
    /// Whether the piece writes every element of its chunk that lies inside `extent` (a full
    /// overwrite: a new chunk then needs no fill, spec §2.7; per OQ-34, elements of an edge chunk
    /// outside the extent do not count).
    ///
    /// Exact for any runs (overlaps and duplicates are counted once, parts of runs outside the
    /// extent are ignored); costs O(runs × rank), plus a sort when the runs are not in chunk order
    /// (point pieces). Inconsistent arguments (rank mismatch, zero chunk dimension, a chunk with no
    /// element inside the extent, sizes overflowing `u64`) give `false`.
    pub fn covers_chunk(&self, extent: &[u64], chunk_dims: &[u64]) -> bool {
        let Ok(grid) = Grid::new(extent, chunk_dims) else {
            return false;
        };
        if self.coord.rank() != grid.rank {
            return false;
        }
        let inside = InsideBox::new(&grid, &self.coord, extent);
        let Some(inside_total) = inside.total else {
            return false;
        };
        if inside_total == 0 {
            return false;
        }
        // Quick reject: fewer selected elements than elements to cover.
        let listed = self
            .runs
            .iter()
            .fold(0u64, |acc, r| acc.saturating_add(r.len));
        if listed < inside_total {
            return false;
        }
        let clamp = |r: &CopyRun| {
            let a = r.chunk_offset.min(grid.chunk_size);
            let b = r.chunk_offset.saturating_add(r.len).min(grid.chunk_size);
            (a, b)
        };
        let sorted = self
            .runs
            .windows(2)
            .all(|w| matches!(w, [x, y] if x.chunk_offset <= y.chunk_offset));
        let covered = if sorted {
            union_inside(self.runs.iter().map(clamp), &inside)
        } else {
            let mut spans: Vec<(u64, u64)> = self.runs.iter().map(clamp).collect();
            spans.sort_unstable();
            union_inside(spans.into_iter(), &inside)
        };
        covered == inside_total
    }
}

/// Split `sel` (over a dataset of `extent`, chunked by `chunk_dims`) into pieces, one per touched
/// chunk, in ascending chunk (row-major scaled coordinate) order for hyperslabs and `All`; for
/// points, in order of first appearance. The caller's buffer holds the selected elements densely in
/// selection order: row-major over the selected elements for `All`/`Hyperslab`, the given order for
/// `Points`.
///
/// Within a piece, hyperslab runs are in ascending chunk and buffer order, never overlap, and no two
/// consecutive runs are adjacent in both buffers (they would have been merged); point runs are in
/// list order, consecutive points adjacent in both buffers merged. An empty selection gives no
/// pieces. Rank 0 (a scalar dataspace) is one element in one chunk.
///
/// Errors: rank mismatches or a rank above [`MAX_RANK`], a zero chunk dimension, an element count
/// or chunk size overflowing `u64`, a malformed hyperslab, and elements outside the extent.
pub fn decompose(
    sel: &Selection,
    extent: &[u64],
    chunk_dims: &[u64],
) -> Result<Vec<ChunkPiece>, SelectionError> {
    let grid = Grid::new(extent, chunk_dims)?;
    let total = sel.num_elements(extent)?;
    if total == 0 {
        return Ok(Vec::new());
    }
    match sel {
        Selection::None => Ok(Vec::new()),
        Selection::All => {
            let dims: Vec<DimSel> = extent
                .iter()
                .map(|&e| DimSel {
                    start: 0,
                    stride: e,
                    count: 1,
                    block: e,
                })
                .collect();
            hyperslab_pieces(&dims, &grid)
        }
        Selection::Hyperslab(h) => {
            let mut dims = [DimSel::EMPTY; MAX_RANK];
            for (d, slot) in dims.iter_mut().enumerate().take(grid.rank) {
                *slot = DimSel::normalised(h, d)?;
            }
            hyperslab_pieces(&dims[..grid.rank], &grid)
        }
        Selection::Points(p) => points_pieces(p, extent, &grid),
    }
}

/// Copy each run's elements from `chunk` to `buf` (scatter to memory); `elem_size` bytes per
/// element. All runs are bounds-checked before anything is copied, so on error `buf` is unchanged.
pub fn scatter(
    chunk: &[u8],
    buf: &mut [u8],
    runs: &[CopyRun],
    elem_size: usize,
) -> Result<(), SelectionError> {
    check_runs(runs, elem_size, chunk.len(), Some(buf.len()))?;
    copy_each(
        chunk,
        buf,
        runs,
        (elem_size, CHUNK),
        (elem_size, BUF),
        |a, b, _| {
            b.copy_from_slice(a);
            Ok(())
        },
    )
}

/// Copy each run's elements from `buf` into `chunk` (gather from memory); `elem_size` bytes per
/// element. All runs are bounds-checked before anything is copied, so on error `chunk` is
/// unchanged. Runs naming the same chunk element more than once leave the last one's value.
pub fn gather(
    buf: &[u8],
    chunk: &mut [u8],
    runs: &[CopyRun],
    elem_size: usize,
) -> Result<(), SelectionError> {
    check_runs(runs, elem_size, chunk.len(), Some(buf.len()))?;
    copy_each(
        buf,
        chunk,
        runs,
        (elem_size, BUF),
        (elem_size, CHUNK),
        |a, b, _| {
            b.copy_from_slice(a);
            Ok(())
        },
    )
}

/// Like [`scatter`], converting every element with `conv` (chunk elements are
/// `conv.src_size()` bytes, buffer elements `conv.dst_size()`). With a background-needing
/// conversion the buffer's current elements are the background. All runs are bounds-checked
/// first.
pub fn scatter_converted(
    chunk: &[u8],
    buf: &mut [u8],
    runs: &[CopyRun],
    conv: &dyn Conversion,
) -> Result<(), LayoutError> {
    let (cs, bs) = (conv.src_size(), conv.dst_size());
    check_runs_2(runs, cs, chunk.len(), bs, buf.len())?;
    copy_each(chunk, buf, runs, (cs, CHUNK), (bs, BUF), |a, b, n| {
        conv.convert(a, b, n)
    })
}

/// Like [`gather`], converting every element with `conv` (buffer elements are
/// `conv.src_size()` bytes, chunk elements `conv.dst_size()`). The chunk's current elements are
/// the background (SCC-105 describes why that matters). All runs are bounds-checked first.
pub fn gather_converted(
    buf: &[u8],
    chunk: &mut [u8],
    runs: &[CopyRun],
    conv: &dyn Conversion,
) -> Result<(), LayoutError> {
    let (bs, cs) = (conv.src_size(), conv.dst_size());
    check_runs_2(runs, cs, chunk.len(), bs, buf.len())?;
    copy_each(buf, chunk, runs, (bs, BUF), (cs, CHUNK), |a, b, n| {
        conv.convert(a, b, n)
    })
}

/// Which offset of a run addresses a side of a copy.
type Side = fn(&CopyRun) -> u64;
const CHUNK: Side = |r| r.chunk_offset;
const BUF: Side = |r| r.buf_offset;

/// Runs `copy(src elements, dst elements, count)` for every non-empty run; `(element size,
/// side)` say how each buffer is addressed. The caller has bounds-checked the runs.
fn copy_each<E: From<SelectionError>>(
    src: &[u8],
    dst: &mut [u8],
    runs: &[CopyRun],
    (src_elem, src_at): (usize, Side),
    (dst_elem, dst_at): (usize, Side),
    mut copy: impl FnMut(&[u8], &mut [u8], usize) -> Result<(), E>,
) -> Result<(), E> {
    for run in runs.iter().filter(|r| r.len > 0) {
        let s = byte_range(src_at(run), run.len, src_elem)?;
        let d = byte_range(dst_at(run), run.len, dst_elem)?;
        let (Some(a), Some(b)) = (src.get(s), dst.get_mut(d)) else {
            return Err(SelectionError::Overflow.into());
        };
        copy(a, b, run.len as usize)?;
    }
    Ok(())
}

/// Bounds check of runs whose chunk and buffer elements have different sizes.
fn check_runs_2(
    runs: &[CopyRun],
    chunk_elem: usize,
    chunk_len: usize,
    buf_elem: usize,
    buf_len: usize,
) -> Result<(), SelectionError> {
    if chunk_elem == 0 || buf_elem == 0 {
        return Err(SelectionError::ZeroElementSize);
    }
    for run in runs.iter().filter(|r| r.len > 0) {
        let c = byte_range(run.chunk_offset, run.len, chunk_elem)?;
        if c.end > chunk_len {
            return Err(SelectionError::ChunkTooSmall {
                needed: c.end,
                got: chunk_len,
            });
        }
        let b = byte_range(run.buf_offset, run.len, buf_elem)?;
        if b.end > buf_len {
            return Err(SelectionError::BufferTooSmall {
                needed: b.end,
                got: buf_len,
            });
        }
    }
    Ok(())
}

/// Where the selected elements sit in a caller's buffer that is itself an N-dimensional array
/// (HDF5's memory dataspace): `selection` over `extent`. The i-th selected element of the file
/// selection goes to the i-th element of this selection, in row-major order.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct MemorySelection {
    /// The buffer's dimensions (in elements).
    pub extent: Vec<u64>,
    /// The selected part of the buffer: `All`, `None` or a hyperslab (ascending order).
    pub selection: Selection,
}

impl MemorySelection {
    /// The buffer's element count.
    pub fn buffer_elements(&self) -> Result<u64, SelectionError> {
        checked_product(self.extent.iter().map(|&e| Some(e)))
    }

    /// Rewrites the `buf_offset`s of `pieces` (positions in selection order) into element
    /// positions of the buffer, splitting runs where the memory selection is not contiguous.
    /// `selected` is the file selection's element count, which must equal the memory
    /// selection's.
    pub fn remap(&self, pieces: &mut [ChunkPiece], selected: u64) -> Result<(), SelectionError> {
        if matches!(self.selection, Selection::Points(_)) {
            return Err(SelectionError::PointsInMemory);
        }
        let n = self.selection.num_elements(&self.extent)?;
        if n != selected {
            return Err(SelectionError::CountMismatch {
                file: selected,
                memory: n,
            });
        }
        // The memory selection as one "chunk" spanning the buffer: chunk_offset = buffer
        // element, buf_offset = position in selection order (ascending).
        let mem: Vec<CopyRun> = decompose(&self.selection, &self.extent, &self.extent)?
            .into_iter()
            .flat_map(|p| p.runs)
            .collect();
        for p in pieces {
            let mut out = Vec::with_capacity(p.runs.len());
            for r in &p.runs {
                let (mut at, end) = (r.buf_offset, r.buf_offset + r.len);
                let mut chunk = r.chunk_offset;
                // First memory run containing `at`.
                let mut i = mem.partition_point(|m| m.buf_offset + m.len <= at);
                while at < end {
                    let Some(m) = mem.get(i) else {
                        return Err(SelectionError::Overflow);
                    };
                    let take = (m.buf_offset + m.len).min(end) - at;
                    push_run(
                        &mut out,
                        CopyRun {
                            chunk_offset: chunk,
                            buf_offset: m.chunk_offset + (at - m.buf_offset),
                            len: take,
                        },
                    );
                    at += take;
                    chunk += take;
                    i += 1;
                }
            }
            p.runs = out;
        }
        Ok(())
    }
}

/// Fill the selected elements of `chunk` with `fill` (one element's bytes; its length is the
/// element size) — used for fill values. Only `chunk_offset` and `len` of the runs are used. All
/// runs are bounds-checked first, so on error `chunk` is unchanged.
pub fn fill_runs(chunk: &mut [u8], runs: &[CopyRun], fill: &[u8]) -> Result<(), SelectionError> {
    let elem_size = fill.len();
    check_runs(runs, elem_size, chunk.len(), None)?;
    let zero = fill.iter().all(|&b| b == 0);
    for run in runs.iter().filter(|r| r.len > 0) {
        let c = byte_range(run.chunk_offset, run.len, elem_size)?;
        let Some(dst) = chunk.get_mut(c) else {
            return Err(SelectionError::Overflow);
        };
        match fill {
            [b] => dst.fill(*b),
            _ if zero => dst.fill(0),
            _ => {
                // One copy of the value, then double the filled prefix: O(log n) memcpy calls.
                let Some(head) = dst.get_mut(..elem_size) else {
                    continue; // unreachable: a run of len >= 1 spans at least one element
                };
                head.copy_from_slice(fill);
                let mut filled = elem_size;
                while filled < dst.len() {
                    let n = filled.min(dst.len() - filled);
                    dst.copy_within(0..n, filled);
                    filled += n;
                }
            }
        }
    }
    Ok(())
}

/// Elements of the chunk at `coord` that lie outside `extent`, as runs in ascending chunk order (for
/// clearing edge chunks after a shrink). Only `chunk_offset` and `len` are meaningful; `buf_offset`
/// is 0. An interior chunk gives no runs; a chunk wholly outside the extent gives one run covering
/// it.
///
/// Errors: rank mismatches, a zero chunk dimension, or a chunk size overflowing `u64` (reported
/// rather than silently giving no runs).
pub fn outside_extent_runs(
    coord: &ChunkCoord,
    extent: &[u64],
    chunk_dims: &[u64],
) -> Result<Vec<CopyRun>, SelectionError> {
    let grid = Grid::new(extent, chunk_dims)?;
    if coord.rank() != grid.rank {
        return Err(SelectionError::RankMismatch {
            expected: grid.rank,
            got: coord.rank(),
        });
    }
    let inside = InsideBox::new(&grid, coord, extent);
    let lens = &inside.lens[..grid.rank];
    let dims = &grid.chunk_dims[..grid.rank];
    let whole = |len| {
        vec![CopyRun {
            chunk_offset: 0,
            buf_offset: 0,
            len,
        }]
    };
    if lens.contains(&0) {
        return Ok(whole(grid.chunk_size));
    }
    // `j` is the fastest dimension the extent cuts; the dimensions after it are whole rows.
    let Some(j) = (0..grid.rank).rev().find(|&d| lens[d] < dims[d]) else {
        return Ok(Vec::new());
    };
    let cs = &grid.cstride;
    let mut runs = Vec::new();
    // Odometer over the inside part of dimensions 0..j; for each position, the tail of dimension
    // j outside the extent is one run, and when a dimension d < j wraps, its tail is one more run.
    // Offsets are below the chunk size, which fits in u64.
    let mut idx = [0u64; MAX_RANK];
    let mut base = 0u64;
    loop {
        push_chunk_run(
            &mut runs,
            CopyRun {
                chunk_offset: base + lens[j] * cs[j],
                buf_offset: 0,
                len: (dims[j] - lens[j]) * cs[j],
            },
        );
        let mut d = j;
        loop {
            if d == 0 {
                return Ok(runs);
            }
            d -= 1;
            idx[d] += 1;
            base += cs[d];
            if idx[d] < lens[d] {
                break;
            }
            // Dimension d is past its inside part: the rest of its range is outside.
            let tail_len = (dims[d] - lens[d]) * cs[d];
            if tail_len > 0 {
                push_chunk_run(
                    &mut runs,
                    CopyRun {
                        chunk_offset: base,
                        buf_offset: 0,
                        len: tail_len,
                    },
                );
            }
            base -= idx[d] * cs[d];
            idx[d] = 0;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Internals.
// ---------------------------------------------------------------------------------------------

/// Product of values, each of which may already have overflowed (`None`).
fn checked_product(mut values: impl Iterator<Item = Option<u64>>) -> Result<u64, SelectionError> {
    values
        .try_fold(1u64, |acc, v| v.and_then(|v| acc.checked_mul(v)))
        .ok_or(SelectionError::Overflow)
}

/// Chunk geometry shared by the decomposition and the edge-chunk helpers.
struct Grid {
    rank: usize,
    chunk_dims: [u64; MAX_RANK],
    /// Row-major element strides of the chunk buffer.
    cstride: [u64; MAX_RANK],
    /// Elements per chunk.
    chunk_size: u64,
}

impl Grid {
    fn new(extent: &[u64], chunk_dims: &[u64]) -> Result<Self, SelectionError> {
        let rank = extent.len();
        if rank > MAX_RANK {
            return Err(SelectionError::RankTooLarge { rank });
        }
        if chunk_dims.len() != rank {
            return Err(SelectionError::RankMismatch {
                expected: rank,
                got: chunk_dims.len(),
            });
        }
        if let Some(dim) = chunk_dims.iter().position(|&c| c == 0) {
            return Err(SelectionError::ZeroDimension { dim });
        }
        let mut grid = Self {
            rank,
            chunk_dims: [0; MAX_RANK],
            cstride: [0; MAX_RANK],
            chunk_size: 1,
        };
        grid.chunk_dims[..rank].copy_from_slice(chunk_dims);
        grid.chunk_size = strides(chunk_dims, &mut grid.cstride)?;
        Ok(grid)
    }
}

/// Row-major strides of `dims` into `out`; returns the total product.
fn strides(dims: &[u64], out: &mut [u64; MAX_RANK]) -> Result<u64, SelectionError> {
    let mut acc = 1u64;
    for (d, &n) in dims.iter().enumerate().rev() {
        if let Some(slot) = out.get_mut(d) {
            *slot = acc;
        }
        acc = acc.checked_mul(n).ok_or(SelectionError::Overflow)?;
    }
    Ok(acc)
}

/// The part of one chunk inside the extent: a box `[0, lens[d])` in chunk-local coordinates.
struct InsideBox {
    lens: [u64; MAX_RANK],
    /// Row-major strides of the box itself.
    strides: [u64; MAX_RANK],
    /// Elements in the box (`None` on overflow, which a valid grid rules out).
    total: Option<u64>,
    rank: usize,
    chunk_size: u64,
    cstride: [u64; MAX_RANK],
}

impl InsideBox {
    /// Ranks must already agree (`grid.rank == coord.rank() == extent.len()`).
    fn new(grid: &Grid, coord: &ChunkCoord, extent: &[u64]) -> Self {
        let mut lens = [0u64; MAX_RANK];
        for (d, ((&c, &e), len)) in coord
            .as_slice()
            .iter()
            .zip(extent)
            .zip(lens.iter_mut())
            .enumerate()
        {
            let dim = grid.chunk_dims[d];
            *len = match c.checked_mul(dim) {
                Some(first) => e.saturating_sub(first).min(dim),
                None => 0,
            };
        }
        let mut strides_out = [0u64; MAX_RANK];
        let total = strides(&lens[..grid.rank], &mut strides_out).ok();
        Self {
            lens,
            strides: strides_out,
            total,
            rank: grid.rank,
            chunk_size: grid.chunk_size,
            cstride: grid.cstride,
        }
    }

    /// Number of inside elements whose chunk offset is below `p`.
    fn count_below(&self, p: u64) -> u64 {
        let total = self.total.unwrap_or(0);
        if p >= self.chunk_size {
            return total;
        }
        // Row-major order is lexicographic order on the chunk-local index; count the inside
        // indices lexicographically smaller than p's, by the first position where they differ.
        let mut rem = p;
        let mut acc = 0u64;
        for d in 0..self.rank {
            let digit = rem / self.cstride[d];
            rem %= self.cstride[d];
            acc += digit.min(self.lens[d]) * self.strides[d];
            if digit >= self.lens[d] {
                break;
            }
        }
        acc
    }
}

/// Inside elements covered by the union of `spans` (half-open chunk-offset ranges sorted by start).
fn union_inside(spans: impl Iterator<Item = (u64, u64)>, inside: &InsideBox) -> u64 {
    let mut total = 0u64;
    let mut cur: Option<(u64, u64)> = None;
    for (a, b) in spans {
        if a >= b {
            continue;
        }
        cur = match cur {
            Some((ca, cb)) if a <= cb => Some((ca, cb.max(b))),
            Some((ca, cb)) => {
                total += inside.count_below(cb) - inside.count_below(ca);
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    if let Some((ca, cb)) = cur {
        total += inside.count_below(cb) - inside.count_below(ca);
    }
    total
}

/// Appends `run`, merging it into the previous run when both buffers continue contiguously.
#[inline]
fn push_run(runs: &mut Vec<CopyRun>, run: CopyRun) {
    if let Some(last) = runs.last_mut()
        && last.chunk_offset.checked_add(last.len) == Some(run.chunk_offset)
        && last.buf_offset.checked_add(last.len) == Some(run.buf_offset)
    {
        last.len += run.len;
        return;
    }
    runs.push(run);
}

/// Appends a chunk-only run (`buf_offset` 0), merging it into the previous one when adjacent.
fn push_chunk_run(runs: &mut Vec<CopyRun>, run: CopyRun) {
    if let Some(last) = runs.last_mut()
        && last.chunk_offset.checked_add(last.len) == Some(run.chunk_offset)
    {
        last.len += run.len;
        return;
    }
    runs.push(run);
}

/// One dimension of a hyperslab, normalised: when blocks touch (`stride == block`) they are one
/// block, and a single block has `stride == block`.
#[derive(Clone, Copy)]
struct DimSel {
    start: u64,
    stride: u64,
    count: u64,
    block: u64,
}

impl DimSel {
    /// A placeholder for unused dimensions.
    const EMPTY: Self = Self {
        start: 0,
        stride: 0,
        count: 0,
        block: 0,
    };

    /// Dimension `d` of a validated, non-empty hyperslab.
    fn normalised(h: &Hyperslab, d: usize) -> Result<Self, SelectionError> {
        let get = |v: &[u64]| v.get(d).copied().ok_or(SelectionError::Overflow);
        let (start, stride, count, block) = (
            get(&h.start)?,
            get(&h.stride)?,
            get(&h.count)?,
            get(&h.block)?,
        );
        if count == 1 || stride == block {
            let block = count.checked_mul(block).ok_or(SelectionError::Overflow)?;
            Ok(Self {
                start,
                stride: block,
                count: 1,
                block,
            })
        } else {
            Ok(Self {
                start,
                stride,
                count,
                block,
            })
        }
    }
}

/// A stretch of one dimension's selection inside one chunk.
#[derive(Clone, Copy)]
struct Seg {
    /// Chunk-local index of the first element.
    local: u64,
    /// Position of the first element among the dimension's selected indices.
    rank: u64,
    len: u64,
}

/// The chunks one dimension's selection touches, in ascending order.
struct DimChunk {
    /// Scaled coordinate along the dimension.
    index: u64,
    /// Range of this chunk's segments in [`DimPlan::segs`].
    first: usize,
    end: usize,
    /// Selected indices of the dimension inside this chunk.
    count: u64,
}

/// One dimension of a hyperslab cut at chunk boundaries.
struct DimPlan {
    chunks: Vec<DimChunk>,
    segs: Vec<Seg>,
    /// Number of selected indices along the dimension.
    sel_len: u64,
    /// The chunk dimension.
    chunk_dim: u64,
}

impl DimPlan {
    /// Cuts a validated dimension selection (inside the extent, so the last index + 1 fits in u64).
    fn new(s: DimSel, chunk_dim: u64) -> Result<Self, SelectionError> {
        let sel_len = s
            .count
            .checked_mul(s.block)
            .ok_or(SelectionError::Overflow)?;
        let mut plan = Self {
            chunks: Vec::new(),
            segs: Vec::new(),
            sel_len,
            chunk_dim,
        };
        let mut block_start = s.start;
        let mut rank = 0u64;
        for i in 0..s.count {
            let mut pos = block_start;
            let mut left = s.block;
            while left > 0 {
                let index = pos / chunk_dim;
                let local = pos % chunk_dim;
                let len = left.min(chunk_dim - local);
                plan.push(index, Seg { local, rank, len });
                pos = pos.checked_add(len).ok_or(SelectionError::Overflow)?;
                rank += len;
                left -= len;
            }
            if i + 1 < s.count {
                block_start = block_start
                    .checked_add(s.stride)
                    .ok_or(SelectionError::Overflow)?;
            }
        }
        Ok(plan)
    }

    fn push(&mut self, index: u64, seg: Seg) {
        let at = self.segs.len();
        self.segs.push(seg);
        match self.chunks.last_mut() {
            Some(c) if c.index == index => {
                c.end = at + 1;
                c.count += seg.len;
            }
            _ => self.chunks.push(DimChunk {
                index,
                first: at,
                end: at + 1,
                count: seg.len,
            }),
        }
    }

    fn segs_of(&self, chunk: &DimChunk) -> &[Seg] {
        self.segs.get(chunk.first..chunk.end).unwrap_or(&[])
    }
}

/// Pieces of a validated, non-empty regular selection (one [`DimSel`] per dimension).
fn hyperslab_pieces(dims: &[DimSel], grid: &Grid) -> Result<Vec<ChunkPiece>, SelectionError> {
    let rank = grid.rank;
    let plans: Vec<DimPlan> = dims
        .iter()
        .zip(&grid.chunk_dims)
        .map(|(&s, &c)| DimPlan::new(s, c))
        .collect::<Result<_, _>>()?;
    let mut sel_lens = [0u64; MAX_RANK];
    for (l, p) in sel_lens.iter_mut().zip(&plans) {
        *l = p.sel_len;
    }
    let mut bstride = [0u64; MAX_RANK];
    strides(&sel_lens[..rank], &mut bstride)?;

    let n_pieces = plans
        .iter()
        .fold(1usize, |acc, p| acc.saturating_mul(p.chunks.len()));
    let mut pieces = Vec::with_capacity(n_pieces.min(1 << 16));
    // Odometer over the touched chunks of every dimension, last dimension fastest: ascending
    // row-major scaled coordinates.
    let mut pick = [0usize; MAX_RANK];
    loop {
        pieces.push(hyperslab_piece(&plans, &pick[..rank], grid, &bstride)?);
        let mut d = rank;
        loop {
            if d == 0 {
                return Ok(pieces);
            }
            d -= 1;
            pick[d] += 1;
            if pick[d] < plans[d].chunks.len() {
                break;
            }
            pick[d] = 0;
        }
    }
}

/// The piece for the chunk picked by `pick` (an index into each dimension's touched chunks).
fn hyperslab_piece(
    plans: &[DimPlan],
    pick: &[usize],
    grid: &Grid,
    bstride: &[u64; MAX_RANK],
) -> Result<ChunkPiece, SelectionError> {
    let rank = grid.rank;
    let cstride = &grid.cstride;
    let mut scaled = [0u64; MAX_RANK];
    let mut segs: [&[Seg]; MAX_RANK] = [&[]; MAX_RANK];
    let mut counts = [0u64; MAX_RANK];
    let mut elements = 1u64;
    for (d, (plan, &i)) in plans.iter().zip(pick).enumerate() {
        let chunk = plan.chunks.get(i).ok_or(SelectionError::Overflow)?;
        scaled[d] = chunk.index;
        segs[d] = plan.segs_of(chunk);
        counts[d] = chunk.count;
        elements = elements
            .checked_mul(chunk.count)
            .ok_or(SelectionError::Overflow)?;
    }
    let coord = ChunkCoord::new(&scaled[..rank]).ok_or(SelectionError::RankTooLarge { rank })?;

    // Fold trailing dimensions the piece covers whole, in the chunk and in the selection: there,
    // consecutive rows are contiguous in both buffers. `k` dimensions remain.
    let mut k = rank;
    let mut inner = 1u64;
    while k > 0 {
        let d = k - 1;
        let full = matches!(segs[d], [s] if s.local == 0
            && s.len == plans[d].chunk_dim
            && s.len == plans[d].sel_len);
        if !full {
            break;
        }
        inner *= plans[d].chunk_dim; // divides the chunk size, which fits in u64
        k -= 1;
    }
    if k == 0 {
        let run = CopyRun {
            chunk_offset: 0,
            buf_offset: 0,
            len: inner,
        };
        return Ok(ChunkPiece {
            coord,
            runs: vec![run],
            elements,
        });
    }

    // Dimension r = k - 1 contributes one run per segment; dimensions 0..r are walked element by
    // element. All offsets are below the chunk size or the selection size, both of which fit.
    let r = k - 1;
    let rows = counts[..r]
        .iter()
        .fold(1u64, |acc, &c| acc.saturating_mul(c))
        .saturating_mul(segs[r].len() as u64);
    let mut runs = Vec::with_capacity(usize::try_from(rows).unwrap_or(usize::MAX).min(1 << 16));
    let mut seg_at = [0usize; MAX_RANK];
    let mut within = [0u64; MAX_RANK];
    // Partial offsets: cbase[d] / bbase[d] are the chunk / buffer offsets of dimensions 0..d.
    let mut cbase = [0u64; MAX_RANK + 1];
    let mut bbase = [0u64; MAX_RANK + 1];
    let mut refresh_from = 0usize;
    // The last walked dimension `q` (if any) is walked in a tight loop for each position of the
    // dimensions before it (an odometer, last fastest): the same rows in the same order as an
    // odometer over all of `0..r`, without its per-row bookkeeping.
    let Some(q) = r.checked_sub(1) else {
        for s in segs[r] {
            push_run(
                &mut runs,
                CopyRun {
                    chunk_offset: s.local * cstride[r],
                    buf_offset: s.rank * bstride[r],
                    len: s.len * inner,
                },
            );
        }
        return Ok(ChunkPiece {
            coord,
            runs,
            elements,
        });
    };
    loop {
        for e in refresh_from..q {
            let s = segs[e][seg_at[e]];
            cbase[e + 1] = cbase[e] + (s.local + within[e]) * cstride[e];
            bbase[e + 1] = bbase[e] + (s.rank + within[e]) * bstride[e];
        }
        for sq in segs[q] {
            for w in 0..sq.len {
                let c0 = cbase[q] + (sq.local + w) * cstride[q];
                let b0 = bbase[q] + (sq.rank + w) * bstride[q];
                for s in segs[r] {
                    push_run(
                        &mut runs,
                        CopyRun {
                            chunk_offset: c0 + s.local * cstride[r],
                            buf_offset: b0 + s.rank * bstride[r],
                            len: s.len * inner,
                        },
                    );
                }
            }
        }
        let mut d = q;
        loop {
            if d == 0 {
                return Ok(ChunkPiece {
                    coord,
                    runs,
                    elements,
                });
            }
            d -= 1;
            within[d] += 1;
            if within[d] < segs[d][seg_at[d]].len {
                break;
            }
            within[d] = 0;
            seg_at[d] += 1;
            if seg_at[d] < segs[d].len() {
                break;
            }
            seg_at[d] = 0;
        }
        refresh_from = d;
    }
}

/// A hasher for one `u64` key (a linear chunk index): the 64-bit mix finaliser of SplitMix64,
/// so strided keys (a column of chunks) still spread over the low bits the table uses.
#[derive(Default)]
struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        let mut x = self.0 ^ v;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        self.0 = x ^ (x >> 31);
    }
}

/// Pieces of a validated point list, in order of first appearance.
fn points_pieces(
    points: &Points,
    extent: &[u64],
    grid: &Grid,
) -> Result<Vec<ChunkPiece>, SelectionError> {
    let rank = grid.rank;
    let grid_dims: Vec<u64> = extent
        .iter()
        .zip(&grid.chunk_dims)
        .map(|(&e, &c)| e.div_ceil(c))
        .collect();
    // Which piece holds a chunk: keyed by the chunk's row-major index in the chunk grid when the
    // grid size fits in u64 (one cheap hash per lookup), else by its coordinates.
    let mut gstride = [0u64; MAX_RANK];
    let linear = strides(&grid_dims, &mut gstride).is_ok();
    let mut by_linear: HashMap<u64, usize, BuildHasherDefault<MixHasher>> = HashMap::default();
    let mut by_coord: HashMap<ChunkCoord, usize> = HashMap::new();
    let mut pieces: Vec<ChunkPiece> = Vec::new();
    let mut prev: Option<([u64; MAX_RANK], usize)> = None;
    for (i, point) in points.iter().enumerate() {
        let mut scaled = [0u64; MAX_RANK];
        let mut local = 0u64;
        for (d, &x) in point.iter().enumerate() {
            let c = grid.chunk_dims[d];
            scaled[d] = x / c;
            local += (x % c) * grid.cstride[d]; // below the chunk size
        }
        let at = match prev {
            Some((p, at)) if p[..rank] == scaled[..rank] => at,
            _ => {
                let coord = ChunkCoord::new(&scaled[..rank])
                    .ok_or(SelectionError::RankTooLarge { rank })?;
                let next = pieces.len();
                let at = if linear {
                    // Below the grid size, which fits (the point is inside the extent).
                    let key = scaled[..rank]
                        .iter()
                        .zip(&gstride)
                        .map(|(&s, &g)| s * g)
                        .sum();
                    *by_linear.entry(key).or_insert(next)
                } else {
                    *by_coord.entry(coord).or_insert(next)
                };
                if at == next {
                    pieces.push(ChunkPiece {
                        coord,
                        runs: Vec::new(),
                        elements: 0,
                    });
                }
                at
            }
        };
        prev = Some((scaled, at));
        let piece = pieces.get_mut(at).ok_or(SelectionError::Overflow)?;
        push_run(
            &mut piece.runs,
            CopyRun {
                chunk_offset: local,
                buf_offset: u64::try_from(i).map_err(|_| SelectionError::Overflow)?,
                len: 1,
            },
        );
        piece.elements += 1;
    }
    Ok(pieces)
}

/// Byte range of `len` elements of `elem_size` bytes starting at element `off`.
#[inline]
fn byte_range(off: u64, len: u64, elem_size: usize) -> Result<Range<usize>, SelectionError> {
    let es = elem_size as u64;
    let start = off.checked_mul(es).ok_or(SelectionError::Overflow)?;
    let bytes = len.checked_mul(es).ok_or(SelectionError::Overflow)?;
    let end = start.checked_add(bytes).ok_or(SelectionError::Overflow)?;
    let start = usize::try_from(start).map_err(|_| SelectionError::Overflow)?;
    let end = usize::try_from(end).map_err(|_| SelectionError::Overflow)?;
    Ok(start..end)
}

/// Checks every run against the chunk length and (when given) the buffer length, in bytes.
fn check_runs(
    runs: &[CopyRun],
    elem_size: usize,
    chunk_len: usize,
    buf_len: Option<usize>,
) -> Result<(), SelectionError> {
    if elem_size == 0 {
        return Err(SelectionError::ZeroElementSize);
    }
    let mut chunk_need = 0usize;
    let mut buf_need = 0usize;
    for run in runs.iter().filter(|r| r.len > 0) {
        let c = byte_range(run.chunk_offset, run.len, elem_size)?;
        chunk_need = chunk_need.max(c.end);
        if buf_len.is_some() {
            let b = byte_range(run.buf_offset, run.len, elem_size)?;
            buf_need = buf_need.max(b.end);
        }
    }
    if chunk_need > chunk_len {
        return Err(SelectionError::ChunkTooSmall {
            needed: chunk_need,
            got: chunk_len,
        });
    }
    if let Some(got) = buf_len
        && buf_need > got
    {
        return Err(SelectionError::BufferTooSmall {
            needed: buf_need,
            got,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    // ---- Naive references --------------------------------------------------------------------

    /// Row-major linear index of `coord` in `dims`.
    fn linear(coord: &[u64], dims: &[u64]) -> usize {
        coord
            .iter()
            .zip(dims)
            .fold(0u64, |acc, (&c, &d)| acc * d + c) as usize
    }

    /// Every index of a box, row-major (rank 0: one empty index; a zero dimension: none).
    fn all_coords(dims: &[u64]) -> Vec<Vec<u64>> {
        let mut out = vec![Vec::new()];
        for &d in dims {
            out = out
                .into_iter()
                .flat_map(|prefix| {
                    (0..d).map(move |i| {
                        let mut v = prefix.clone();
                        v.push(i);
                        v
                    })
                })
                .collect();
        }
        out
    }

    /// The selected coordinates in buffer order, element by element.
    fn naive_selected(sel: &Selection, extent: &[u64]) -> Vec<Vec<u64>> {
        match sel {
            Selection::All => all_coords(extent),
            Selection::None => Vec::new(),
            Selection::Points(p) => p.iter().map(<[u64]>::to_vec).collect(),
            Selection::Hyperslab(h) => {
                let per_dim: Vec<Vec<u64>> = (0..h.rank())
                    .map(|d| {
                        let mut v = Vec::new();
                        for i in 0..h.count[d] {
                            for j in 0..h.block[d] {
                                v.push(h.start[d] + i * h.stride[d] + j);
                            }
                        }
                        v
                    })
                    .collect();
                let lens: Vec<u64> = per_dim.iter().map(|v| v.len() as u64).collect();
                all_coords(&lens)
                    .into_iter()
                    .map(|ix| {
                        ix.iter()
                            .enumerate()
                            .map(|(d, &i)| per_dim[d][i as usize])
                            .collect()
                    })
                    .collect()
            }
        }
    }

    /// Distinct bytes for element `tag`.
    fn elem_bytes(tag: u64, es: usize) -> Vec<u8> {
        let b = (tag + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes();
        (0..es).map(|k| b[k % 8] ^ (k / 8) as u8).collect()
    }

    const SENTINEL: u8 = 0xEE;

    /// A dataset as a plain row-major array plus its chunked image.
    #[derive(Clone, PartialEq, Debug)]
    struct Chunked {
        chunks: HashMap<Vec<u64>, Vec<u8>>,
    }

    fn grid_dims(extent: &[u64], chunk: &[u64]) -> Vec<u64> {
        extent
            .iter()
            .zip(chunk)
            .map(|(&e, &c)| e.div_ceil(c))
            .collect()
    }

    /// Chunk images of `array` (one element's bytes per extent element, row-major); elements of
    /// edge chunks outside the extent hold the sentinel.
    fn chunk_up(array: &[Vec<u8>], extent: &[u64], chunk: &[u64], es: usize) -> Chunked {
        let mut chunks = HashMap::new();
        for scaled in all_coords(&grid_dims(extent, chunk)) {
            let mut img = Vec::new();
            for local in all_coords(chunk) {
                let global: Vec<u64> = (0..chunk.len())
                    .map(|d| scaled[d] * chunk[d] + local[d])
                    .collect();
                if global.iter().zip(extent).all(|(g, e)| g < e) {
                    img.extend_from_slice(&array[linear(&global, extent)]);
                } else {
                    img.extend(std::iter::repeat_n(SENTINEL, es));
                }
            }
            chunks.insert(scaled, img);
        }
        Chunked { chunks }
    }

    fn synthetic(extent: &[u64], es: usize) -> Vec<Vec<u8>> {
        let n: u64 = extent.iter().product();
        (0..n).map(|g| elem_bytes(g, es)).collect()
    }

    fn chunk_of(coord: &[u64], chunk: &[u64]) -> Vec<u64> {
        coord.iter().zip(chunk).map(|(&x, &c)| x / c).collect()
    }

    /// Elements of the chunk at `scaled` inside the extent, counted one by one.
    fn naive_inside(scaled: &[u64], extent: &[u64], chunk: &[u64]) -> usize {
        all_coords(chunk)
            .iter()
            .filter(|local| (0..chunk.len()).all(|d| scaled[d] * chunk[d] + local[d] < extent[d]))
            .count()
    }

    /// The read through `decompose` + `scatter` equals the naive read; plus the structural
    /// properties of the pieces. Returns the pieces.
    fn check_read_write(
        sel: &Selection,
        extent: &[u64],
        chunk: &[u64],
        es: usize,
    ) -> Result<(), TestCaseError> {
        let array = synthetic(extent, es);
        let image = chunk_up(&array, extent, chunk, es);
        let selected = naive_selected(sel, extent);
        let n = sel.num_elements(extent).unwrap();
        prop_assert_eq!(n as usize, selected.len());
        let pieces = decompose(sel, extent, chunk).unwrap();

        // Piece order and per-piece element counts.
        let coords: Vec<Vec<u64>> = pieces.iter().map(|p| p.coord.as_slice().to_vec()).collect();
        let mut first_seen: Vec<Vec<u64>> = Vec::new();
        for c in &selected {
            let s = chunk_of(c, chunk);
            if !first_seen.contains(&s) {
                first_seen.push(s);
            }
        }
        match sel {
            Selection::Points(_) => prop_assert_eq!(&coords, &first_seen),
            _ => {
                let mut sorted = first_seen.clone();
                sorted.sort();
                prop_assert_eq!(&coords, &sorted);
            }
        }
        prop_assert_eq!(pieces.iter().map(|p| p.elements).sum::<u64>(), n);
        for p in &pieces {
            let here: Vec<&Vec<u64>> = selected
                .iter()
                .filter(|c| chunk_of(c, chunk) == p.coord.as_slice())
                .collect();
            prop_assert_eq!(p.elements as usize, here.len());
            prop_assert_eq!(p.runs.iter().map(|r| r.len).sum::<u64>(), p.elements);
            prop_assert!(p.runs.iter().all(|r| r.len > 0));
            // covers_chunk against the naive check.
            let distinct: HashSet<&Vec<u64>> = here.iter().copied().collect();
            let inside = naive_inside(p.coord.as_slice(), extent, chunk);
            prop_assert_eq!(p.covers_chunk(extent, chunk), distinct.len() == inside);
            // No two consecutive runs are left unmerged.
            for w in p.runs.windows(2) {
                prop_assert!(
                    w[0].chunk_offset + w[0].len != w[1].chunk_offset
                        || w[0].buf_offset + w[0].len != w[1].buf_offset
                );
            }
        }

        // Every buffer element is written exactly once.
        let mut hits = vec![0u32; selected.len()];
        for r in pieces.iter().flat_map(|p| &p.runs) {
            for i in r.buf_offset..r.buf_offset + r.len {
                hits[i as usize] += 1;
            }
        }
        prop_assert!(hits.iter().all(|&h| h == 1));

        // Read.
        let expected: Vec<u8> = selected
            .iter()
            .flat_map(|c| array[linear(c, extent)].clone())
            .collect();
        let mut buf = vec![0u8; selected.len() * es];
        for p in &pieces {
            scatter(&image.chunks[p.coord.as_slice()], &mut buf, &p.runs, es).unwrap();
        }
        prop_assert_eq!(&buf, &expected);

        // Write: the chunk images equal the naive element-by-element write (last duplicate wins,
        // bytes outside the extent untouched), and reading back gives the naive read.
        let src: Vec<u8> = (0..selected.len() as u64)
            .flat_map(|i| elem_bytes(1_000_000 + i, es))
            .collect();
        let mut written = array.clone();
        for (i, c) in selected.iter().enumerate() {
            written[linear(c, extent)] = src[i * es..(i + 1) * es].to_vec();
        }
        let want = chunk_up(&written, extent, chunk, es);
        let mut got = image.clone();
        for p in &pieces {
            let img = got.chunks.get_mut(p.coord.as_slice()).unwrap();
            gather(&src, img, &p.runs, es).unwrap();
        }
        prop_assert_eq!(&got, &want);
        let mut back = vec![0u8; selected.len() * es];
        for p in &pieces {
            scatter(&got.chunks[p.coord.as_slice()], &mut back, &p.runs, es).unwrap();
        }
        let expected_back: Vec<u8> = selected
            .iter()
            .flat_map(|c| written[linear(c, extent)].clone())
            .collect();
        prop_assert_eq!(&back, &expected_back);
        Ok(())
    }

    /// A valid hyperslab inside `extent` (all dimensions non-zero) from raw random numbers.
    fn hyperslab_for(extent: &[u64], raw: &[(u64, u64, u64, u64)]) -> Hyperslab {
        let (mut start, mut stride, mut count, mut block) = (vec![], vec![], vec![], vec![]);
        for (&e, &(a, b, s, n)) in extent.iter().zip(raw) {
            let st = a % e;
            let room = e - st;
            let bl = 1 + b % room;
            let sd = bl + s % 3;
            let max_count = 1 + (room - bl) / sd;
            start.push(st);
            block.push(bl);
            stride.push(sd);
            count.push(1 + n % max_count);
        }
        Hyperslab::new(&start, &stride, &count, &block).unwrap()
    }

    fn pts(rank: usize, flat: &[u64]) -> Selection {
        Selection::Points(Points::new(rank, flat.to_vec()).unwrap())
    }

    fn run(chunk_offset: u64, buf_offset: u64, len: u64) -> CopyRun {
        CopyRun {
            chunk_offset,
            buf_offset,
            len,
        }
    }

    // ---- Requirement tests ---------------------------------------------------------------------

    /// SCC-011: with chunk dims (10,20), element (25,45) lands in chunk (2,2) at chunk-local
    /// (5,5), i.e. element 5*20+5 of the chunk buffer, whether selected as a point or as a
    /// one-element hyperslab; in a contiguous 100×100 dataset (one chunk the size of the dataset)
    /// every element maps to chunk (0,0) at its own linear index.
    #[test]
    fn scc_011_element_to_chunk_mapping_through_decompose() {
        let extent = [100, 100];
        for sel in [
            pts(2, &[25, 45]),
            Hyperslab::contiguous(&[25, 45], &[1, 1]).unwrap().into(),
        ] {
            let pieces = decompose(&sel, &extent, &[10, 20]).unwrap();
            assert_eq!(pieces.len(), 1);
            assert_eq!(pieces[0].coord.as_slice(), &[2, 2]);
            assert_eq!(pieces[0].runs, vec![run(5 * 20 + 5, 0, 1)]);
            assert_eq!(pieces[0].elements, 1);
        }
        let pieces = decompose(&pts(2, &[0, 0, 99, 99, 50, 7]), &extent, &extent).unwrap();
        assert_eq!(pieces.len(), 1);
        assert_eq!(pieces[0].coord.as_slice(), &[0, 0]);
        assert_eq!(
            pieces[0].runs,
            vec![run(0, 0, 1), run(9999, 1, 1), run(5007, 2, 1)]
        );
        let pieces = decompose(&Selection::All, &extent, &extent).unwrap();
        assert_eq!(pieces.len(), 1);
        assert_eq!(pieces[0].coord.as_slice(), &[0, 0]);
        assert_eq!(pieces[0].runs, vec![run(0, 0, 10_000)]);
    }

    /// SCC-049: a read spanning two chunks into a dense buffer. Each piece's chunk-side runs are
    /// in the chunk's own coordinates (extent = chunk dims) and its buffer-side runs in the whole
    /// buffer's; the union of the buffer ranges is the whole buffer, each element exactly once.
    #[test]
    fn scc_049_read_spanning_two_chunks_into_dense_buffer() {
        // 1-D: elements 5..15 of a 20-element dataset in chunks of 10.
        let sel = Hyperslab::contiguous(&[5], &[10]).unwrap().into();
        let pieces = decompose(&sel, &[20], &[10]).unwrap();
        let got: Vec<(Vec<u64>, Vec<CopyRun>)> = pieces
            .iter()
            .map(|p| (p.coord.as_slice().to_vec(), p.runs.clone()))
            .collect();
        assert_eq!(
            got,
            vec![(vec![0], vec![run(5, 0, 5)]), (vec![1], vec![run(0, 5, 5)])]
        );

        // 2-D: rows 1..3, columns 5..15 of a 4×20 dataset in 4×10 chunks; the buffer is 2×10.
        let sel = Hyperslab::contiguous(&[1, 5], &[2, 10]).unwrap().into();
        let pieces = decompose(&sel, &[4, 20], &[4, 10]).unwrap();
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces[0].coord.as_slice(), &[0, 0]);
        assert_eq!(pieces[0].runs, vec![run(15, 0, 5), run(25, 10, 5)]);
        assert_eq!(pieces[1].coord.as_slice(), &[0, 1]);
        assert_eq!(pieces[1].runs, vec![run(10, 5, 5), run(20, 15, 5)]);
        let mut hits = [0u8; 20];
        for r in pieces.iter().flat_map(|p| &p.runs) {
            assert!(r.chunk_offset + r.len <= 40, "chunk-local, inside 4×10");
            for i in r.buf_offset..r.buf_offset + r.len {
                hits[i as usize] += 1;
            }
        }
        assert_eq!(hits, [1; 20]);

        // And the bytes: chunk images of a dataset whose value is 100*row + column.
        let extent = [4u64, 20];
        let array: Vec<Vec<u8>> = all_coords(&extent)
            .iter()
            .map(|c| ((100 * c[0] + c[1]) as u16).to_le_bytes().to_vec())
            .collect();
        let image = chunk_up(&array, &extent, &[4, 10], 2);
        let mut buf = vec![0u8; 40];
        for p in &pieces {
            scatter(&image.chunks[p.coord.as_slice()], &mut buf, &p.runs, 2).unwrap();
        }
        let values: Vec<u16> = buf
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        let want: Vec<u16> = [1u16, 2]
            .iter()
            .flat_map(|r| (5..15).map(move |c| 100 * r + c))
            .collect();
        assert_eq!(values, want);
    }

    /// Copies selection `a` of memory buffer `src` (shape `sa`) to selection `b` of `dst` (shape
    /// `sb`) with the shared helpers: each memory buffer is one chunk the size of its extent.
    fn copy_by_selection(
        src: &[u8],
        sa: &[u64],
        a: &Selection,
        dst: &mut [u8],
        sb: &[u64],
        b: &Selection,
        es: usize,
    ) -> Result<(), SelectionError> {
        let n = a.num_elements(sa)?;
        assert_eq!(n, b.num_elements(sb)?);
        let mut dense = vec![0u8; n as usize * es];
        for p in decompose(a, sa, sa)? {
            scatter(src, &mut dense, &p.runs, es)?;
        }
        for p in decompose(b, sb, sb)? {
            gather(&dense, dst, &p.runs, es)?;
        }
        Ok(())
    }

    /// SCC-057: copying by hyperslab and by point selections between two memory buffers (no type
    /// conversion: identity) matches a naive element-by-element copy, in both directions.
    #[test]
    fn scc_057_memory_to_memory_copy_matches_naive() {
        let (sa, sb) = ([6u64, 7], [5u64, 9]);
        let es = 3;
        let src: Vec<u8> = (0..42).flat_map(|i| elem_bytes(i, es)).collect();
        let hyper: Selection = Hyperslab::new(&[1, 0], &[2, 3], &[3, 2], &[1, 2])
            .unwrap()
            .into(); // 12 elements
        let points = pts(
            2,
            &[
                4, 8, 0, 0, 0, 1, 2, 2, 3, 3, 1, 7, 4, 0, 4, 1, 2, 3, 0, 8, 3, 4, 1, 1,
            ],
        ); // 12 points in [5,9]
        for (a, shape_a, b, shape_b) in [
            (&hyper, &sa[..], &points, &sb[..]),
            (&points, &sb[..], &hyper, &sa[..]),
        ] {
            let src: Vec<u8> = src
                .iter()
                .cycle()
                .take(shape_a.iter().product::<u64>() as usize * es)
                .copied()
                .collect();
            let dst_len = shape_b.iter().product::<u64>() as usize * es;
            let mut dst = vec![0u8; dst_len];
            copy_by_selection(&src, shape_a, a, &mut dst, shape_b, b, es).unwrap();
            let mut naive = vec![0u8; dst_len];
            for (ca, cb) in naive_selected(a, shape_a)
                .iter()
                .zip(naive_selected(b, shape_b).iter())
            {
                let (ia, ib) = (linear(ca, shape_a) * es, linear(cb, shape_b) * es);
                naive[ib..ib + es].copy_from_slice(&src[ia..ia + es]);
            }
            assert_eq!(dst, naive);
        }
    }

    // ---- Behaviour tests -----------------------------------------------------------------------

    #[test]
    fn rank_zero_is_one_element_in_one_chunk() {
        for sel in [
            Selection::All,
            Hyperslab::new(&[], &[], &[], &[]).unwrap().into(),
        ] {
            assert_eq!(sel.num_elements(&[]), Ok(1));
            let pieces = decompose(&sel, &[], &[]).unwrap();
            assert_eq!(pieces.len(), 1);
            assert_eq!(pieces[0].coord.rank(), 0);
            assert_eq!(pieces[0].runs, vec![run(0, 0, 1)]);
            assert_eq!(pieces[0].elements, 1);
            assert!(pieces[0].covers_chunk(&[], &[]));
            let mut buf = [0u8; 4];
            scatter(&[1, 2, 3, 4], &mut buf, &pieces[0].runs, 4).unwrap();
            assert_eq!(buf, [1, 2, 3, 4]);
        }
        assert_eq!(
            outside_extent_runs(&ChunkCoord::new(&[]).unwrap(), &[], &[]),
            Ok(vec![])
        );
        let empty = pts(0, &[]);
        assert_eq!(empty.num_elements(&[]), Ok(0));
        assert_eq!(decompose(&empty, &[], &[]), Ok(vec![]));
    }

    #[test]
    fn runs_follow_the_fastest_dimension_and_merge() {
        // Whole interior chunks are one run each; edge chunks of a 10×10 dataset in 4×10 chunks
        // are one run too (the row is whole in the chunk and in the selection).
        let pieces = decompose(&Selection::All, &[10, 10], &[4, 10]).unwrap();
        let runs: Vec<Vec<CopyRun>> = pieces.iter().map(|p| p.runs.clone()).collect();
        assert_eq!(
            runs,
            vec![
                vec![run(0, 0, 40)],
                vec![run(0, 40, 40)],
                vec![run(0, 80, 20)]
            ]
        );
        // Chunks narrower than the rows: one run per row.
        let pieces = decompose(&Selection::All, &[4, 10], &[2, 5]).unwrap();
        assert_eq!(pieces.len(), 4);
        assert_eq!(pieces[1].coord.as_slice(), &[0, 1]);
        assert_eq!(pieces[1].runs, vec![run(0, 5, 5), run(5, 15, 5)]);
        // count = N, block = 1, stride = 1 (HDF5's usual way to say "N in a row") is one run.
        let sel = Hyperslab::new(&[2], &[1], &[50], &[1]).unwrap().into();
        let pieces = decompose(&sel, &[100], &[100]).unwrap();
        assert_eq!(pieces[0].runs, vec![run(2, 0, 50)]);
        // Rows whose selected columns end at the chunk edge and restart at 0 merge across rows.
        let sel = Hyperslab::new(&[0, 0], &[1, 8], &[4, 2], &[1, 2])
            .unwrap()
            .into();
        let pieces = decompose(&sel, &[4, 10], &[4, 10]).unwrap();
        assert_eq!(
            pieces[0].runs,
            vec![
                run(0, 0, 2),
                run(8, 2, 4),
                run(18, 6, 4),
                run(28, 10, 4),
                run(38, 14, 2)
            ]
        );
        // Consecutive points merge; a strided hyperslab skips untouched chunks.
        let pieces = decompose(&pts(1, &[3, 4, 5, 9, 1]), &[10], &[10]).unwrap();
        assert_eq!(
            pieces[0].runs,
            vec![run(3, 0, 3), run(9, 3, 1), run(1, 4, 1)]
        );
        let sel = Hyperslab::new(&[0], &[20], &[3], &[2]).unwrap().into();
        let pieces = decompose(&sel, &[60], &[5]).unwrap();
        let coords: Vec<u64> = pieces.iter().map(|p| p.coord.as_slice()[0]).collect();
        assert_eq!(coords, vec![0, 4, 8]);
    }

    #[test]
    fn empty_selections_give_no_pieces() {
        for sel in [
            Selection::None,
            Hyperslab::new(&[0, 0], &[1, 1], &[0, 3], &[1, 1])
                .unwrap()
                .into(),
            // An empty hyperslab is never out of the extent.
            Hyperslab::new(&[99, 0], &[1, 1], &[1, 3], &[0, 1])
                .unwrap()
                .into(),
            Hyperslab::contiguous(&[0, 0], &[2, 0]).unwrap().into(),
            pts(2, &[]),
        ] {
            assert_eq!(sel.num_elements(&[4, 4]), Ok(0));
            assert_eq!(decompose(&sel, &[4, 4], &[2, 2]), Ok(vec![]));
        }
        assert_eq!(decompose(&Selection::All, &[4, 0], &[2, 2]), Ok(vec![]));
    }

    /// The full-overwrite predicate counts only elements inside the extent for edge chunks, and
    /// counts duplicate points once.
    #[test]
    fn covers_chunk_examples() {
        let extent = [12u64];
        let covers = |sel: Selection, chunk: u64| {
            decompose(&sel, &extent, &[5])
                .unwrap()
                .iter()
                .filter(|p| p.coord.as_slice() == [chunk])
                .all(|p| p.covers_chunk(&extent, &[5]))
        };
        let slab = |s, n| Selection::from(Hyperslab::contiguous(&[s], &[n]).unwrap());
        assert!(
            covers(slab(10, 2), 2),
            "edge chunk: 10 and 11 are all that is inside"
        );
        assert!(!covers(slab(10, 1), 2));
        assert!(covers(slab(0, 5), 0));
        assert!(!covers(slab(0, 4), 0));
        assert!(covers(slab(3, 9), 1));
        assert!(
            !covers(pts(1, &[0, 0, 1, 2, 3]), 0),
            "5 elements, 4 distinct"
        );
        assert!(covers(pts(1, &[4, 3, 2, 1, 0, 2]), 0));
        // Inconsistent arguments are never a cover.
        let p = &decompose(&slab(0, 5), &extent, &[5]).unwrap()[0];
        assert!(!p.covers_chunk(&[12, 1], &[5]));
        assert!(!p.covers_chunk(&extent, &[0]));
        assert!(!p.covers_chunk(&[0], &[5]));
    }

    #[test]
    fn outside_extent_runs_examples() {
        let c = |s: &[u64]| ChunkCoord::new(s).unwrap();
        // Interior chunk: nothing outside.
        assert_eq!(
            outside_extent_runs(&c(&[0, 0]), &[10, 10], &[4, 4]),
            Ok(vec![])
        );
        // Edge chunk (2,2) of 10×10 in 4×4 chunks: rows 0..2 keep columns 0..2.
        assert_eq!(
            outside_extent_runs(&c(&[2, 2]), &[10, 10], &[4, 4]),
            Ok(vec![run(2, 0, 2), run(6, 0, 10)])
        );
        // Cut only in the slow dimension: one tail.
        assert_eq!(
            outside_extent_runs(&c(&[2, 0]), &[10, 8], &[4, 4]),
            Ok(vec![run(8, 0, 8)])
        );
        // Wholly outside (after a shrink): the whole chunk.
        assert_eq!(
            outside_extent_runs(&c(&[5, 0]), &[10, 8], &[4, 4]),
            Ok(vec![run(0, 0, 16)])
        );
        assert_eq!(
            outside_extent_runs(&c(&[0]), &[10, 8], &[4, 4]),
            Err(SelectionError::RankMismatch {
                expected: 2,
                got: 1
            })
        );
        assert_eq!(
            outside_extent_runs(&c(&[0, 0]), &[10, 8], &[4, 0]),
            Err(SelectionError::ZeroDimension { dim: 1 })
        );
        assert_eq!(
            outside_extent_runs(&c(&[0, 0]), &[1, 1], &[u64::MAX, 2]),
            Err(SelectionError::Overflow)
        );
        // Huge scaled coordinates are simply outside.
        assert_eq!(
            outside_extent_runs(&c(&[u64::MAX]), &[10], &[4]),
            Ok(vec![run(0, 0, 4)])
        );
    }

    #[test]
    fn fill_runs_writes_the_value_into_selected_elements_only() {
        let mut chunk = vec![0u8; 10 * 3];
        fill_runs(&mut chunk, &[run(1, 0, 2), run(6, 99, 3)], &[7, 8, 9]).unwrap();
        let want: Vec<u8> = (0..10)
            .flat_map(|i| {
                if matches!(i, 1 | 2 | 6 | 7 | 8) {
                    [7, 8, 9]
                } else {
                    [0, 0, 0]
                }
            })
            .collect();
        assert_eq!(chunk, want);
        let mut one = vec![1u8; 5];
        fill_runs(&mut one, &[run(1, 0, 3)], &[0]).unwrap();
        assert_eq!(one, [1, 0, 0, 0, 1]);
        let mut zero = vec![5u8; 8];
        fill_runs(&mut zero, &[run(0, 0, 2)], &[0, 0]).unwrap();
        assert_eq!(zero, [0, 0, 0, 0, 5, 5, 5, 5]);
        assert_eq!(
            fill_runs(&mut zero, &[run(0, 0, 2)], &[]),
            Err(SelectionError::ZeroElementSize)
        );
        let before = zero.clone();
        assert_eq!(
            fill_runs(&mut zero, &[run(0, 0, 1), run(3, 0, 2)], &[1, 1]),
            Err(SelectionError::ChunkTooSmall { needed: 10, got: 8 })
        );
        assert_eq!(zero, before, "nothing written on error");
    }

    #[test]
    fn scatter_and_gather_check_bounds_before_copying() {
        let chunk = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let mut buf = [0u8; 4];
        assert_eq!(
            scatter(&chunk, &mut buf, &[run(0, 0, 1), run(1, 1, 2)], 2),
            Err(SelectionError::BufferTooSmall { needed: 6, got: 4 })
        );
        assert_eq!(buf, [0; 4]);
        assert_eq!(
            scatter(&chunk, &mut buf, &[run(3, 0, 2)], 2),
            Err(SelectionError::ChunkTooSmall { needed: 10, got: 8 })
        );
        assert_eq!(
            scatter(&chunk, &mut buf, &[run(0, 0, 1)], 0),
            Err(SelectionError::ZeroElementSize)
        );
        assert_eq!(
            scatter(&chunk, &mut buf, &[run(u64::MAX, 0, 1)], 2),
            Err(SelectionError::Overflow)
        );
        // Zero-length runs are ignored wherever they point.
        scatter(
            &chunk,
            &mut buf,
            &[run(u64::MAX, u64::MAX, 0), run(2, 0, 2)],
            1,
        )
        .unwrap();
        assert_eq!(buf, [3, 4, 0, 0]);
        let mut out = [0u8; 8];
        assert_eq!(
            gather(&buf, &mut out, &[run(0, 0, 1), run(0, 3, 2)], 1),
            Err(SelectionError::BufferTooSmall { needed: 5, got: 4 })
        );
        assert_eq!(out, [0; 8]);
        gather(&buf, &mut out, &[run(6, 0, 2)], 1).unwrap();
        assert_eq!(out, [0, 0, 0, 0, 0, 0, 3, 4]);
    }

    #[test]
    fn errors_are_typed() {
        use SelectionError as E;
        assert_eq!(
            Hyperslab::new(&[0, 0], &[1], &[1, 1], &[1, 1]),
            Err(E::RankMismatch {
                expected: 2,
                got: 1
            })
        );
        assert_eq!(
            Hyperslab::new(&[0], &[2], &[3], &[3]),
            Err(E::BadStride {
                dim: 0,
                stride: 2,
                block: 3
            })
        );
        assert_eq!(
            Hyperslab::new(&[0], &[0], &[2], &[1]),
            Err(E::BadStride {
                dim: 0,
                stride: 0,
                block: 1
            })
        );
        assert!(
            Hyperslab::new(&[0], &[0], &[1], &[4]).is_ok(),
            "stride unused"
        );
        assert_eq!(
            Hyperslab::new(&[u64::MAX - 1], &[1], &[1], &[3]),
            Err(E::Overflow)
        );
        assert_eq!(
            Hyperslab::new(&[0], &[u64::MAX], &[3], &[1]),
            Err(E::Overflow)
        );
        let big = vec![0u64; MAX_RANK + 1];
        assert_eq!(
            Hyperslab::new(&big, &big, &big, &big),
            Err(E::RankTooLarge { rank: 33 })
        );
        assert_eq!(Points::new(33, vec![]), Err(E::RankTooLarge { rank: 33 }));
        assert_eq!(
            Points::new(2, vec![1, 2, 3]),
            Err(E::PointsLength { len: 3, rank: 2 })
        );
        assert_eq!(
            Points::new(0, vec![1]),
            Err(E::PointsLength { len: 1, rank: 0 })
        );

        let sel: Selection = Hyperslab::new(&[1, 2], &[4, 1], &[3, 1], &[2, 5])
            .unwrap()
            .into();
        assert_eq!(
            sel.validate(&[11, 6]),
            Err(E::OutOfExtent {
                dim: 1,
                index: 6,
                extent: 6
            })
        );
        assert_eq!(
            sel.validate(&[10, 7]),
            Err(E::OutOfExtent {
                dim: 0,
                index: 10,
                extent: 10
            })
        );
        assert_eq!(sel.validate(&[11, 7]), Ok(()));
        assert_eq!(
            sel.validate(&[11, 7, 1]),
            Err(E::RankMismatch {
                expected: 3,
                got: 2
            })
        );
        assert_eq!(
            pts(2, &[0, 0, 3, 9]).validate(&[4, 9]),
            Err(E::OutOfExtent {
                dim: 1,
                index: 9,
                extent: 9
            })
        );
        assert_eq!(
            Selection::All.validate(&big),
            Err(E::RankTooLarge { rank: 33 })
        );
        assert_eq!(
            decompose(&sel, &[11, 7], &[2, 0]),
            Err(E::ZeroDimension { dim: 1 })
        );
        assert_eq!(
            decompose(&sel, &[11, 7], &[2]),
            Err(E::RankMismatch {
                expected: 2,
                got: 1
            })
        );
        // Overflow: the chunk size, the extent's element count, a hyperslab's element count.
        assert_eq!(
            decompose(&sel, &[11, 7], &[1 << 32, 1 << 32]),
            Err(E::Overflow)
        );
        let huge = [u64::MAX, u64::MAX];
        assert_eq!(Selection::All.num_elements(&huge), Err(E::Overflow));
        assert_eq!(decompose(&Selection::All, &huge, &huge), Err(E::Overflow));
        let slab: Selection = Hyperslab::contiguous(&[0, 0], &[1 << 40, 1 << 40])
            .unwrap()
            .into();
        assert_eq!(slab.num_elements(&huge), Err(E::Overflow));
        // Huge but countable: one element at the far corner of a huge dataset.
        let corner: Selection = Hyperslab::contiguous(&[u64::MAX - 1, 5], &[1, 1])
            .unwrap()
            .into();
        let pieces = decompose(&corner, &[u64::MAX, 6], &[1 << 40, 4]).unwrap();
        assert_eq!(pieces.len(), 1);
        assert_eq!(pieces[0].coord.as_slice(), &[(u64::MAX - 1) >> 40, 1]);
        assert_eq!(
            pieces[0].runs,
            vec![run((((u64::MAX - 1) & ((1 << 40) - 1)) * 4) + 1, 0, 1)]
        );
        assert!(!pieces[0].covers_chunk(&[u64::MAX, 6], &[1 << 40, 4]));
    }

    /// Points in a dataset whose chunk grid has more than 2^64 chunks (the coordinate-keyed
    /// fallback of the piece index).
    #[test]
    fn points_in_a_huge_chunk_grid() {
        let m = u64::MAX;
        let sel = pts(2, &[5, 5, m - 1, 0, 5, 6, 5, 5]);
        let pieces = decompose(&sel, &[m, m], &[1, 2]).unwrap();
        let got: Vec<(Vec<u64>, Vec<CopyRun>)> = pieces
            .iter()
            .map(|p| (p.coord.as_slice().to_vec(), p.runs.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (vec![5, 2], vec![run(1, 0, 1), run(1, 3, 1)]),
                (vec![m - 1, 0], vec![run(0, 1, 1)]),
                (vec![5, 3], vec![run(0, 2, 1)]),
            ]
        );
    }

    #[test]
    fn points_accessors() {
        let p = Points::new(2, vec![1, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(p.rank(), 2);
        assert_eq!(p.len(), 3);
        assert!(!p.is_empty());
        assert_eq!(
            p.iter().collect::<Vec<_>>(),
            vec![&[1, 2][..], &[3, 4], &[5, 6]]
        );
        assert_eq!(p.as_flat(), &[1, 2, 3, 4, 5, 6]);
        let z = Points::new(0, vec![]).unwrap();
        assert_eq!((z.len(), z.iter().count(), z.is_empty()), (0, 0, true));
    }

    // ---- Properties ----------------------------------------------------------------------------

    /// Extent (rank 1–4, dims 1..=7), chunk dims (1..=4), element size.
    fn geometry() -> impl Strategy<Value = (Vec<u64>, Vec<u64>, usize)> {
        (1usize..=4).prop_flat_map(|r| {
            (
                proptest::collection::vec(1u64..=7, r),
                proptest::collection::vec(1u64..=4, r),
                1usize..=6,
            )
        })
    }

    /// Small values mostly, huge ones sometimes.
    fn wild() -> impl Strategy<Value = u64> {
        prop_oneof![
            4 => 0u64..8,
            1 => Just(u64::MAX),
            1 => (u64::MAX - 8)..=u64::MAX,
            1 => (1u64 << 31)..=(1u64 << 33),
            1 => any::<u64>(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// decompose + scatter equals the naive read for random hyperslabs, gather equals the
        /// naive write and reads back; counts, order, exact-once buffer coverage, covers_chunk.
        #[test]
        fn hyperslab_matches_naive(
            (extent, chunk, es, raw) in geometry().prop_flat_map(|(e, c, es)| {
                let r = e.len();
                (Just(e), Just(c), Just(es), proptest::collection::vec(
                    (any::<u64>(), any::<u64>(), 0u64..3, any::<u64>()), r))
            })
        ) {
            let sel = Selection::Hyperslab(hyperslab_for(&extent, &raw));
            check_read_write(&sel, &extent, &chunk, es)?;
        }

        /// The same for random point lists (duplicates included), and for the points of a
        /// hyperslab listed in its order, which must read exactly like the hyperslab.
        #[test]
        fn points_match_naive(
            (extent, chunk, es, raw, npts, slab) in geometry().prop_flat_map(|(e, c, es)| {
                let r = e.len();
                (Just(e), Just(c), Just(es),
                 proptest::collection::vec(any::<u64>(), r * 24), 0usize..=24,
                 proptest::collection::vec((any::<u64>(), any::<u64>(), 0u64..3, any::<u64>()), r))
            })
        ) {
            let r = extent.len();
            let flat: Vec<u64> = raw[..r * npts]
                .iter()
                .enumerate()
                .map(|(i, &v)| v % extent[i % r])
                .collect();
            check_read_write(&pts(r, &flat), &extent, &chunk, es)?;

            let h = Selection::Hyperslab(hyperslab_for(&extent, &slab));
            let listed: Vec<u64> = naive_selected(&h, &extent).concat();
            let as_points = pts(r, &listed);
            check_read_write(&as_points, &extent, &chunk, es)?;
            let image = chunk_up(&synthetic(&extent, es), &extent, &chunk, es);
            let read = |sel: &Selection| {
                let mut buf = vec![0u8; listed.len() / r * es];
                for p in decompose(sel, &extent, &chunk).unwrap() {
                    scatter(&image.chunks[p.coord.as_slice()], &mut buf, &p.runs, es).unwrap();
                }
                buf
            };
            prop_assert_eq!(read(&as_points), read(&h));
        }

        /// All over extents that may contain zeros.
        #[test]
        fn all_matches_naive(
            (extent, chunk, es) in (0usize..=4).prop_flat_map(|r| (
                proptest::collection::vec(0u64..=6, r),
                proptest::collection::vec(1u64..=4, r),
                1usize..=4,
            ))
        ) {
            check_read_write(&Selection::All, &extent, &chunk, es)?;
        }

        /// outside_extent_runs lists exactly the chunk elements outside the extent, ascending,
        /// disjoint and merged.
        #[test]
        fn outside_runs_match_naive(
            (extent, chunk, scaled) in (1usize..=4).prop_flat_map(|r| (
                proptest::collection::vec(0u64..=7, r),
                proptest::collection::vec(1u64..=4, r),
                proptest::collection::vec(0u64..=3, r),
            ))
        ) {
            let coord = ChunkCoord::new(&scaled).unwrap();
            let runs = outside_extent_runs(&coord, &extent, &chunk).unwrap();
            let want: Vec<u64> = all_coords(&chunk)
                .iter()
                .enumerate()
                .filter(|(_, l)| (0..chunk.len()).any(|d| scaled[d] * chunk[d] + l[d] >= extent[d]))
                .map(|(i, _)| i as u64)
                .collect();
            let got: Vec<u64> = runs.iter().flat_map(|r| r.chunk_offset..r.chunk_offset + r.len).collect();
            prop_assert_eq!(got, want);
            for w in runs.windows(2) {
                prop_assert!(w[0].chunk_offset + w[0].len < w[1].chunk_offset);
            }
            prop_assert!(runs.iter().all(|r| r.len > 0 && r.buf_offset == 0));
        }

        /// Arbitrary (often invalid, often huge) inputs never panic: decompose fails exactly when
        /// the geometry or the selection is invalid, with the same typed error.
        #[test]
        fn arbitrary_inputs_never_panic(
            extent in proptest::collection::vec(wild(), 0..=4),
            chunk in proptest::collection::vec(wild(), 0..=4),
            start in proptest::collection::vec(wild(), 0..=4),
            stride in proptest::collection::vec(wild(), 0..=4),
            count in proptest::collection::vec(0u64..=3, 0..=4),
            block in proptest::collection::vec(0u64..=3, 0..=4),
            prank in 0usize..=4,
            flat in proptest::collection::vec(wild(), 0..=12),
            which in 0u8..4,
        ) {
            let sel = match which {
                0 => Selection::All,
                1 => Selection::None,
                2 => match Hyperslab::new(&start, &stride, &count, &block) {
                    Ok(h) => h.into(),
                    Err(_) => Selection::Hyperslab(Hyperslab { start, stride, count, block }),
                },
                _ => match Points::new(prank, flat.clone()) {
                    Ok(p) => p.into(),
                    Err(_) => return Ok(()),
                },
            };
            let _ = sel.validate(&extent);
            let counted = sel.num_elements(&extent);
            // Guard against legitimately huge outputs (a valid selection of 2^40 elements).
            if matches!(counted, Ok(n) if n > 10_000) {
                return Ok(());
            }
            let expected = Grid::new(&extent, &chunk).and(counted);
            match decompose(&sel, &extent, &chunk) {
                Ok(pieces) => {
                    prop_assert!(expected.is_ok());
                    let n: u64 = pieces.iter().map(|p| p.elements).sum();
                    prop_assert_eq!(Ok(n), expected);
                    for p in &pieces {
                        let _ = p.covers_chunk(&extent, &chunk);
                        let _ = p.covers_chunk(&chunk, &extent);
                    }
                }
                Err(e) => prop_assert_eq!(Err(e), expected),
            }
            if let Some(coord) = ChunkCoord::new(&flat[..flat.len().min(4)]) {
                // Bounded output: only when the chunk is small.
                if Grid::new(&extent, &chunk).is_ok_and(|g| g.chunk_size <= 1 << 16) {
                    let _ = outside_extent_runs(&coord, &extent, &chunk);
                }
                let piece = ChunkPiece {
                    coord,
                    runs: flat.chunks_exact(3).map(|c| run(c[0], c[1], c[2])).collect(),
                    elements: 0,
                };
                let _ = piece.covers_chunk(&extent, &chunk);
            }
        }

        /// scatter / gather / fill_runs with arbitrary runs: Ok exactly when every non-empty run
        /// fits (checked in u128), the copy then matches a naive element-by-element copy, and on
        /// error nothing is written.
        #[test]
        fn copy_helpers_match_naive_and_never_panic(
            runs in proptest::collection::vec((wild(), wild(), wild()), 0..=5),
            es in 0usize..=3,
            chunk_len in 0usize..=40,
            buf_len in 0usize..=40,
        ) {
            let runs: Vec<CopyRun> = runs.into_iter().map(|(c, b, l)| run(c, b, l)).collect();
            let chunk: Vec<u8> = (0..chunk_len as u8).collect();
            let buf: Vec<u8> = (100..100 + buf_len as u8).collect();
            let fits = |off: u64, len: u64, total: usize| {
                (u128::from(off) + u128::from(len)) * es as u128 <= total as u128
            };
            let all_fit = runs.iter().filter(|r| r.len > 0).all(|r| {
                fits(r.chunk_offset, r.len, chunk_len) && fits(r.buf_offset, r.len, buf_len)
            });
            let chunk_fit = runs.iter().filter(|r| r.len > 0).all(|r| fits(r.chunk_offset, r.len, chunk_len));

            let mut out = buf.clone();
            let res = scatter(&chunk, &mut out, &runs, es);
            prop_assert_eq!(res.is_ok(), es > 0 && all_fit);
            let mut naive = buf.clone();
            if res.is_ok() {
                for r in &runs {
                    for k in 0..(r.len as usize * es) {
                        naive[r.buf_offset as usize * es + k] = chunk[r.chunk_offset as usize * es + k];
                    }
                }
            }
            prop_assert_eq!(&out, &naive);

            let mut out = chunk.clone();
            let res = gather(&buf, &mut out, &runs, es);
            prop_assert_eq!(res.is_ok(), es > 0 && all_fit);
            let mut naive = chunk.clone();
            if res.is_ok() {
                for r in &runs {
                    for k in 0..(r.len as usize * es) {
                        naive[r.chunk_offset as usize * es + k] = buf[r.buf_offset as usize * es + k];
                    }
                }
            }
            prop_assert_eq!(&out, &naive);

            let fill: Vec<u8> = (0..es as u8).map(|b| b + 7).collect();
            let mut out = chunk.clone();
            let res = fill_runs(&mut out, &runs, &fill);
            prop_assert_eq!(res.is_ok(), es > 0 && chunk_fit);
            let mut naive = chunk.clone();
            if res.is_ok() {
                for r in &runs {
                    for k in 0..(r.len as usize * es) {
                        naive[r.chunk_offset as usize * es + k] = fill[k % es];
                    }
                }
            }
            prop_assert_eq!(&out, &naive);
        }
    }
}
