//! A reference sparse (structured) chunk form that tracking layouts can use: the set of defined
//! elements of one chunk and, when resident, their values (spec §2.12, §2.16).
//!
//! [`SparseChunk`] implements [`CustomChunk`]; a layout wraps it in [`Chunk::Custom`] and
//! forwards its scatter, gather, fill, defined-values, erase-values, drop-values and condense
//! callbacks to the methods here. Element offsets are chunk-local linear offsets (row-major over
//! the full chunk dimensions), as in [`CopyRun::chunk_offset`].
//!
//! # Image format
//!
//! [`encode`] writes two sections, all integers little-endian:
//!
//! ```text
//! defined section   magic "SPCK" (4) | elem_size u32 | chunk_elems u64 | count u64
//!                   | count × offset u64 (strictly ascending, < chunk_elems)
//!                   | FNV-1a 32 checksum (u32) of every preceding byte of the section
//! values section    count × elem_size bytes (values in ascending offset order)
//! ```
//!
//! The defined section comes first so that a layout can report its length
//! ([`DefinedInfo::Bytes`](crate::layout::DefinedInfo)) and the cache can read and decode only
//! that prefix ([`decode_defined`]). The checksum is verified before any offset is trusted;
//! every length and count is bounds-checked before anything is allocated or indexed, so corrupt
//! input gives a [`SparseError`], never a panic.
//!
//! # Variable-length data
//!
//! [`encode_vlen`], [`encode_vlen_of_vlen`] and their decoders show how variable-length values
//! live in a chunk's variable section: each vlen field of the fixed section is two `u64`
//! (byte offset into the variable section, byte length); a plain sequence of base elements is
//! stored as its elements, a sequence of sequences is stored flattened with every sequence
//! preceded by its 8-byte element count, so one top-level element parses in one pass.

use crate::layout::{Chunk, Conversion, CustomChunk, LayoutError, MemUsage};
use crate::selection::CopyRun;

/// Errors of the sparse chunk form and its image format.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum SparseError {
    /// The input ends before a field it must hold.
    #[error("truncated sparse image: {needed} bytes needed, {got} present")]
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// The defined section does not start with the magic bytes.
    #[error("not a sparse chunk image (bad magic)")]
    BadMagic,
    /// The checksum of the defined section does not match.
    #[error("defined-section checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// Stored checksum.
        stored: u32,
        /// Checksum of the bytes read.
        computed: u32,
    },
    /// Bytes follow the values section.
    #[error("{0} trailing bytes after the values section")]
    TrailingBytes(usize),
    /// The element size is zero.
    #[error("element size is zero")]
    ZeroElemSize,
    /// The defined offsets are not strictly ascending or lie outside the chunk.
    #[error("defined offsets are not strictly ascending below {chunk_elems}")]
    BadOffsets {
        /// Elements in the chunk.
        chunk_elems: u64,
    },
    /// The values do not hold one element per defined offset.
    #[error("values hold {got} bytes, {expected} expected")]
    ValuesLength {
        /// Bytes expected.
        expected: usize,
        /// Bytes present.
        got: usize,
    },
    /// A size does not fit in memory.
    #[error("size overflow")]
    Overflow,
    /// The operation needs the values, which are not resident.
    #[error("values are not resident (defined-only chunk)")]
    NoValues,
    /// A run names elements outside the chunk or the buffer.
    #[error("run out of range: {what} offset {offset} + {len} > {limit}")]
    RunOutOfRange {
        /// `"chunk"` or `"buffer"`.
        what: &'static str,
        /// First element.
        offset: u64,
        /// Elements.
        len: u64,
        /// Elements available.
        limit: u64,
    },
    /// A conversion's element sizes do not match the chunk's.
    #[error("conversion element size {got} does not match the chunk's {expected}")]
    ConversionSize {
        /// The chunk's element size.
        expected: usize,
        /// The conversion's size on the chunk side.
        got: usize,
    },
    /// The fill value is not one element.
    #[error("fill value has {got} bytes, one element is {expected}")]
    FillSize {
        /// Element size.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A conversion failed.
    #[error("conversion failed: {0}")]
    Conversion(#[source] LayoutError),
    /// A [`Chunk`] is not a [`SparseChunk`].
    #[error("chunk is not a sparse chunk")]
    NotSparse,
}

/// Result alias of this module.
pub type SparseResult<T> = std::result::Result<T, SparseError>;

/// What [`SparseChunk::erase`] did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct EraseOutcome {
    /// Defined elements made undefined.
    pub erased: usize,
    /// Some element was erased.
    pub changed: bool,
    /// Nothing is defined any more.
    pub empty: bool,
}

/// A sparse chunk: its defined elements and, when resident, their values.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SparseChunk {
    elem_size: usize,
    chunk_elems: u64,
    /// Strictly ascending chunk-local offsets of the defined elements.
    defined: Vec<u64>,
    /// Values of the defined elements in ascending offset order (`defined.len() × elem_size`
    /// bytes); `None` when only the defined set is resident.
    values: Option<Vec<u8>>,
}

impl CustomChunk for SparseChunk {
    fn mem_usage(&self) -> MemUsage {
        SparseChunk::mem_usage(self)
    }
}

fn out_of_range(what: &'static str, offset: u64, len: u64, limit: u64) -> SparseError {
    SparseError::RunOutOfRange {
        what,
        offset,
        len,
        limit,
    }
}

/// The element size must be positive and fit the image header's `u32`.
fn check_elem_size(elem_size: usize) -> SparseResult<()> {
    if elem_size == 0 {
        return Err(SparseError::ZeroElemSize);
    }
    u32::try_from(elem_size).map_err(|_| SparseError::Overflow)?;
    Ok(())
}

fn to_usize(v: u64) -> SparseResult<usize> {
    usize::try_from(v).map_err(|_| SparseError::Overflow)
}

impl SparseChunk {
    /// An empty chunk (nothing defined, values resident) of `chunk_elems` elements of
    /// `elem_size` bytes.
    pub fn new(elem_size: usize, chunk_elems: u64) -> SparseResult<Self> {
        check_elem_size(elem_size)?;
        Ok(Self {
            elem_size,
            chunk_elems,
            defined: Vec::new(),
            values: Some(Vec::new()),
        })
    }

    /// A chunk from its parts, checked: offsets strictly ascending below `chunk_elems`, values
    /// (if given) exactly one element per offset.
    pub fn from_parts(
        elem_size: usize,
        chunk_elems: u64,
        defined: Vec<u64>,
        values: Option<Vec<u8>>,
    ) -> SparseResult<Self> {
        check_elem_size(elem_size)?;
        let ascending = defined.windows(2).all(|w| w[0] < w[1]);
        if !ascending || defined.last().is_some_and(|&l| l >= chunk_elems) {
            return Err(SparseError::BadOffsets { chunk_elems });
        }
        if let Some(v) = &values {
            let expected = defined
                .len()
                .checked_mul(elem_size)
                .ok_or(SparseError::Overflow)?;
            if v.len() != expected {
                return Err(SparseError::ValuesLength {
                    expected,
                    got: v.len(),
                });
            }
        }
        Ok(Self {
            elem_size,
            chunk_elems,
            defined,
            values,
        })
    }

    /// Bytes per element.
    pub fn elem_size(&self) -> usize {
        self.elem_size
    }

    /// Elements in the chunk.
    pub fn chunk_elems(&self) -> u64 {
        self.chunk_elems
    }

    /// The defined offsets, ascending.
    pub fn defined(&self) -> &[u64] {
        &self.defined
    }

    /// The values of the defined elements in ascending offset order, if resident.
    pub fn values(&self) -> Option<&[u8]> {
        self.values.as_deref()
    }

    /// Whether the values are resident.
    pub fn has_values(&self) -> bool {
        self.values.is_some()
    }

    /// Number of defined elements.
    pub fn len(&self) -> usize {
        self.defined.len()
    }

    /// Whether nothing is defined.
    pub fn is_empty(&self) -> bool {
        self.defined.is_empty()
    }

    /// Whether the element at `offset` is defined.
    pub fn is_defined(&self, offset: u64) -> bool {
        self.defined.binary_search(&offset).is_ok()
    }

    /// The value of the element at `offset`, if defined and resident.
    pub fn value(&self, offset: u64) -> Option<&[u8]> {
        let i = self.defined.binary_search(&offset).ok()?;
        let v = self.values.as_ref()?;
        v.get(i * self.elem_size..(i + 1) * self.elem_size)
    }

    /// Used bytes (8 per defined offset plus the value bytes) and allocated bytes (the two
    /// vectors' capacities).
    pub fn mem_usage(&self) -> MemUsage {
        let off = std::mem::size_of::<u64>();
        let (vu, va) = self
            .values
            .as_ref()
            .map_or((0, 0), |v| (v.len(), v.capacity()));
        MemUsage {
            used: self.defined.len().saturating_mul(off).saturating_add(vu),
            allocated: self
                .defined
                .capacity()
                .saturating_mul(off)
                .saturating_add(va),
        }
    }

    /// Reserves room for `elems` more elements in both vectors (the values only if resident).
    pub fn reserve(&mut self, elems: usize) {
        self.defined.reserve_exact(elems);
        if let Some(v) = &mut self.values {
            v.reserve_exact(elems.saturating_mul(self.elem_size));
        }
    }

    /// Reserves `bytes` more bytes of value capacity (nothing if the values are not resident).
    pub fn reserve_value_bytes(&mut self, bytes: usize) {
        if let Some(v) = &mut self.values {
            v.reserve_exact(bytes);
        }
    }

    fn check_chunk_run(&self, r: &CopyRun) -> SparseResult<()> {
        match r.chunk_offset.checked_add(r.len) {
            Some(end) if end <= self.chunk_elems => Ok(()),
            _ => Err(out_of_range(
                "chunk",
                r.chunk_offset,
                r.len,
                self.chunk_elems,
            )),
        }
    }

    /// Copies the `runs` of `buf` (elements of `conv.src_size()` bytes, or the element size
    /// without conversion) into the chunk, inserting or overwriting values and marking them
    /// defined. A conversion needing a background gets the element's current value, or zeros
    /// for an undefined element. Everything is checked and converted before the chunk changes,
    /// so on error it is unchanged. An element named twice keeps the last value.
    pub fn gather(
        &mut self,
        runs: &[CopyRun],
        buf: &[u8],
        conv: Option<&dyn Conversion>,
    ) -> SparseResult<MemUsage> {
        if self.values.is_none() {
            return Err(SparseError::NoValues);
        }
        let es = self.elem_size;
        let src_size = match conv {
            Some(c) => {
                if c.dst_size() != es {
                    return Err(SparseError::ConversionSize {
                        expected: es,
                        got: c.dst_size(),
                    });
                }
                c.src_size()
            }
            None => es,
        };
        let buf_elems = (buf.len() / src_size.max(1)) as u64;
        let total: u64 = runs.iter().fold(0u64, |a, r| a.saturating_add(r.len));
        let total = to_usize(total)?;
        let mut offs: Vec<(u64, usize)> = Vec::with_capacity(total);
        let mut bytes: Vec<u8> = Vec::with_capacity(total.saturating_mul(es));
        for r in runs {
            self.check_chunk_run(r)?;
            match r.buf_offset.checked_add(r.len) {
                Some(end) if end <= buf_elems => {}
                _ => return Err(out_of_range("buffer", r.buf_offset, r.len, buf_elems)),
            }
            for i in 0..r.len {
                let off = r.chunk_offset + i;
                let b = to_usize(r.buf_offset + i)? * src_size;
                let src = &buf[b..b + src_size];
                let seq = offs.len();
                match conv {
                    None => bytes.extend_from_slice(src),
                    Some(c) => {
                        let mut dst = match self.value(off) {
                            Some(v) if c.needs_background() => v.to_vec(),
                            _ => vec![0; es],
                        };
                        c.convert(src, &mut dst, 1)
                            .map_err(SparseError::Conversion)?;
                        bytes.extend_from_slice(&dst);
                    }
                }
                offs.push((off, seq));
            }
        }
        // Sort by offset, later writes after earlier ones; keep the last of each offset.
        offs.sort_unstable();
        let mut upd: Vec<(u64, usize)> = Vec::with_capacity(offs.len());
        for (off, seq) in offs {
            match upd.last_mut() {
                Some(last) if last.0 == off => last.1 = seq,
                _ => upd.push((off, seq)),
            }
        }
        self.merge(&upd, &bytes);
        Ok(self.mem_usage())
    }

    /// Merges sorted unique updates `(offset, index into bytes in elements)` into the chunk:
    /// in place when nothing new is inserted, else into new vectors of the merged length (never
    /// below the old capacities), in one pass.
    fn merge(&mut self, upd: &[(u64, usize)], bytes: &[u8]) {
        let es = self.elem_size;
        let Some(values) = self.values.as_mut() else {
            return;
        };
        let new_count = upd
            .iter()
            .filter(|(o, _)| self.defined.binary_search(o).is_err())
            .count();
        if new_count == 0 {
            for &(off, seq) in upd {
                if let Ok(i) = self.defined.binary_search(&off) {
                    values[i * es..(i + 1) * es].copy_from_slice(&bytes[seq * es..(seq + 1) * es]);
                }
            }
            return;
        }
        let n = self.defined.len() + new_count;
        let mut defined: Vec<u64> = Vec::with_capacity(n.max(self.defined.capacity()));
        let mut vals: Vec<u8> = Vec::with_capacity((n * es).max(values.capacity()));
        let (mut i, mut j) = (0usize, 0usize);
        while i < self.defined.len() || j < upd.len() {
            let take_old = match (self.defined.get(i), upd.get(j)) {
                (Some(&a), Some(&(b, _))) => a < b,
                (Some(_), None) => true,
                _ => false,
            };
            if take_old {
                defined.push(self.defined[i]);
                vals.extend_from_slice(&values[i * es..(i + 1) * es]);
                i += 1;
            } else {
                let (off, seq) = upd[j];
                if self.defined.get(i) == Some(&off) {
                    i += 1; // overwritten
                }
                defined.push(off);
                vals.extend_from_slice(&bytes[seq * es..(seq + 1) * es]);
                j += 1;
            }
        }
        self.defined = defined;
        *values = vals;
    }

    /// Copies the `runs` of the chunk into `buf` (elements of `conv.dst_size()` bytes, or the
    /// element size), undefined elements as `fill` (one element in the chunk's type).
    /// Everything is checked before `buf` changes.
    pub fn scatter(
        &self,
        runs: &[CopyRun],
        buf: &mut [u8],
        fill: &[u8],
        conv: Option<&dyn Conversion>,
    ) -> SparseResult<()> {
        let es = self.elem_size;
        let values = self.values.as_ref().ok_or(SparseError::NoValues)?;
        if fill.len() != es {
            return Err(SparseError::FillSize {
                expected: es,
                got: fill.len(),
            });
        }
        let dst_size = match conv {
            Some(c) => {
                if c.src_size() != es {
                    return Err(SparseError::ConversionSize {
                        expected: es,
                        got: c.src_size(),
                    });
                }
                c.dst_size()
            }
            None => es,
        };
        let buf_elems = (buf.len() / dst_size.max(1)) as u64;
        for r in runs {
            self.check_chunk_run(r)?;
            match r.buf_offset.checked_add(r.len) {
                Some(end) if end <= buf_elems => {}
                _ => return Err(out_of_range("buffer", r.buf_offset, r.len, buf_elems)),
            }
        }
        for r in runs {
            let mut k = self.defined.partition_point(|&d| d < r.chunk_offset);
            for i in 0..r.len {
                let off = r.chunk_offset + i;
                while self.defined.get(k).is_some_and(|&d| d < off) {
                    k += 1;
                }
                let src = if self.defined.get(k) == Some(&off) {
                    &values[k * es..(k + 1) * es]
                } else {
                    fill
                };
                let b = to_usize(r.buf_offset + i)? * dst_size;
                let dst = &mut buf[b..b + dst_size];
                match conv {
                    None => dst.copy_from_slice(src),
                    Some(c) => c.convert(src, dst, 1).map_err(SparseError::Conversion)?,
                }
            }
        }
        Ok(())
    }

    /// Writes `fill` (one element) into the chunk elements of `runs`, marking them defined
    /// (only `chunk_offset` and `len` count).
    pub fn fill(&mut self, runs: &[CopyRun], fill: &[u8]) -> SparseResult<MemUsage> {
        if fill.len() != self.elem_size {
            return Err(SparseError::FillSize {
                expected: self.elem_size,
                got: fill.len(),
            });
        }
        if self.values.is_none() {
            return Err(SparseError::NoValues);
        }
        let mut upd = Vec::new();
        for r in runs {
            self.check_chunk_run(r)?;
            upd.extend((0..r.len).map(|i| (r.chunk_offset + i, 0usize)));
        }
        upd.sort_unstable();
        upd.dedup();
        self.merge(&upd, fill);
        Ok(self.mem_usage())
    }

    /// The parts of `runs` whose elements are defined, in the order of `runs`, each run split
    /// into its maximal defined stretches (buffer offsets moved along).
    pub fn defined_runs(&self, runs: &[CopyRun]) -> SparseResult<Vec<CopyRun>> {
        let mut out = Vec::new();
        for r in runs {
            self.check_chunk_run(r)?;
            let end = r.chunk_offset + r.len;
            let mut k = self.defined.partition_point(|&d| d < r.chunk_offset);
            while let Some(&start) = self.defined.get(k) {
                if start >= end {
                    break;
                }
                let mut n = 1u64;
                while self
                    .defined
                    .get(k + n as usize)
                    .is_some_and(|&d| d == start + n && d < end)
                {
                    n += 1;
                }
                out.push(CopyRun {
                    chunk_offset: start,
                    buf_offset: r.buf_offset + (start - r.chunk_offset),
                    len: n,
                });
                k += n as usize;
            }
        }
        Ok(out)
    }

    /// Makes the elements of `runs` undefined. Surviving offsets and values slide down keeping
    /// their order, in place (capacities unchanged): used bytes shrink by `erased × (8 +
    /// elem_size)` with values resident, `erased × 8` without.
    pub fn erase(&mut self, runs: &[CopyRun]) -> SparseResult<EraseOutcome> {
        for r in runs {
            self.check_chunk_run(r)?;
        }
        let mut gone = vec![false; self.defined.len()];
        let mut erased = 0usize;
        for r in runs {
            let end = r.chunk_offset + r.len;
            let mut k = self.defined.partition_point(|&d| d < r.chunk_offset);
            while self.defined.get(k).is_some_and(|&d| d < end) {
                if !gone[k] {
                    gone[k] = true;
                    erased += 1;
                }
                k += 1;
            }
        }
        if erased > 0 {
            let es = self.elem_size;
            let mut w = 0usize;
            for (r, &g) in gone.iter().enumerate() {
                if g {
                    continue;
                }
                if w != r {
                    self.defined[w] = self.defined[r];
                    if let Some(v) = &mut self.values {
                        v.copy_within(r * es..(r + 1) * es, w * es);
                    }
                }
                w += 1;
            }
            self.defined.truncate(w);
            if let Some(v) = &mut self.values {
                v.truncate(w * es);
            }
        }
        Ok(EraseOutcome {
            erased,
            changed: erased > 0,
            empty: self.defined.is_empty(),
        })
    }

    /// Frees the values, keeping the defined set.
    pub fn drop_values(&mut self) -> MemUsage {
        self.values = None;
        self.mem_usage()
    }

    /// Shrinks both vectors so that allocated equals used.
    pub fn condense(&mut self) -> MemUsage {
        self.defined.shrink_to_fit();
        if let Some(v) = &mut self.values {
            v.shrink_to_fit();
        }
        self.mem_usage()
    }

    /// The [`SparseChunk`] inside a [`Chunk`].
    pub fn of(chunk: &Chunk) -> SparseResult<&SparseChunk> {
        chunk.downcast_ref().ok_or(SparseError::NotSparse)
    }

    /// The [`SparseChunk`] inside a [`Chunk`].
    pub fn of_mut(chunk: &mut Chunk) -> SparseResult<&mut SparseChunk> {
        chunk.downcast_mut().ok_or(SparseError::NotSparse)
    }
}

// -------------------------------------------------------------------------------------------
// Image format.
// -------------------------------------------------------------------------------------------

/// Magic bytes opening the defined section.
pub const MAGIC: [u8; 4] = *b"SPCK";

/// Bytes of the defined section's fixed header (magic, element size, chunk elements, count).
pub const HEADER_LEN: usize = 24;

/// FNV-1a, 32 bits.
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

fn take(bytes: &[u8], at: usize, n: usize) -> SparseResult<&[u8]> {
    let end = at.checked_add(n).ok_or(SparseError::Overflow)?;
    bytes.get(at..end).ok_or(SparseError::Truncated {
        needed: end,
        got: bytes.len(),
    })
}

fn read_u64(bytes: &[u8], at: usize) -> SparseResult<u64> {
    let mut a = [0u8; 8];
    a.copy_from_slice(take(bytes, at, 8)?);
    Ok(u64::from_le_bytes(a))
}

fn read_u32(bytes: &[u8], at: usize) -> SparseResult<u32> {
    let mut a = [0u8; 4];
    a.copy_from_slice(take(bytes, at, 4)?);
    Ok(u32::from_le_bytes(a))
}

struct Header {
    elem_size: usize,
    chunk_elems: u64,
    count: usize,
    section_len: usize,
}

fn header(bytes: &[u8]) -> SparseResult<Header> {
    if take(bytes, 0, 4)? != MAGIC {
        return Err(SparseError::BadMagic);
    }
    let elem_size = to_usize(u64::from(read_u32(bytes, 4)?))?;
    if elem_size == 0 {
        return Err(SparseError::ZeroElemSize);
    }
    let chunk_elems = read_u64(bytes, 8)?;
    let count = to_usize(read_u64(bytes, 16)?)?;
    let section_len = count
        .checked_mul(8)
        .and_then(|n| n.checked_add(HEADER_LEN + 4))
        .ok_or(SparseError::Overflow)?;
    Ok(Header {
        elem_size,
        chunk_elems,
        count,
        section_len,
    })
}

/// The serialized image of a chunk (its values must be resident for the values section; a
/// defined-only chunk encodes an empty values section, which [`decode`] rejects unless nothing
/// is defined).
pub fn encode(chunk: &SparseChunk) -> Vec<u8> {
    let n = chunk.defined.len();
    let vals = chunk.values.as_deref().unwrap_or(&[]);
    let mut out = Vec::with_capacity(HEADER_LEN + 8 * n + 4 + vals.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(
        &u32::try_from(chunk.elem_size)
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    out.extend_from_slice(&chunk.chunk_elems.to_le_bytes());
    out.extend_from_slice(&(n as u64).to_le_bytes());
    for &o in &chunk.defined {
        out.extend_from_slice(&o.to_le_bytes());
    }
    let sum = fnv1a32(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(vals);
    out
}

/// Length in bytes of the defined section of `image`, from its header alone (the first
/// [`HEADER_LEN`] bytes are enough).
pub fn defined_section_len(image: &[u8]) -> SparseResult<usize> {
    Ok(header(image)?.section_len)
}

/// Decodes only the defined section at the start of `bytes` (which may be longer), verifying
/// its checksum before trusting any offset. The result holds no values.
pub fn decode_defined(bytes: &[u8]) -> SparseResult<SparseChunk> {
    let h = header(bytes)?;
    let body_len = h.section_len - 4;
    let body = take(bytes, 0, body_len)?;
    let stored = read_u32(bytes, body_len)?;
    let computed = fnv1a32(body);
    if stored != computed {
        return Err(SparseError::Checksum { stored, computed });
    }
    if u64::try_from(h.count).map_or(true, |c| c > h.chunk_elems) {
        return Err(SparseError::BadOffsets {
            chunk_elems: h.chunk_elems,
        });
    }
    let defined: Vec<u64> = body[HEADER_LEN..]
        .chunks_exact(8)
        .map(|c| {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            u64::from_le_bytes(a)
        })
        .collect();
    SparseChunk::from_parts(h.elem_size, h.chunk_elems, defined, None)
}

/// Decodes a whole image: the defined section (checksum verified) and exactly one value per
/// defined element after it.
pub fn decode(image: &[u8]) -> SparseResult<SparseChunk> {
    let mut chunk = decode_defined(image)?;
    let start = defined_section_len(image)?;
    let n = chunk
        .defined
        .len()
        .checked_mul(chunk.elem_size)
        .ok_or(SparseError::Overflow)?;
    let rest = image.len().saturating_sub(start);
    if rest < n {
        return Err(SparseError::ValuesLength {
            expected: n,
            got: rest,
        });
    }
    if rest > n {
        return Err(SparseError::TrailingBytes(rest - n));
    }
    chunk.values = Some(take(image, start, n)?.to_vec());
    Ok(chunk)
}

// -------------------------------------------------------------------------------------------
// Variable-length values in a chunk's variable section.
// -------------------------------------------------------------------------------------------

/// Encodes one vlen field per element of `values` (sequences of `u32`): the fixed section gets
/// `(offset, byte length)` as two `u64` LE per element, the variable section the elements as
/// `u32` LE, one sequence after the other.
pub fn encode_vlen(values: &[Vec<u32>]) -> (Vec<u8>, Vec<u8>) {
    let mut fixed = Vec::with_capacity(values.len() * 16);
    let mut var = Vec::new();
    for seq in values {
        let start = var.len() as u64;
        for x in seq {
            var.extend_from_slice(&x.to_le_bytes());
        }
        fixed.extend_from_slice(&start.to_le_bytes());
        fixed.extend_from_slice(&(var.len() as u64 - start).to_le_bytes());
    }
    (fixed, var)
}

/// The `(offset, length)` fields of a fixed section, each range checked against `var_len`.
fn vlen_fields(fixed: &[u8], var_len: usize) -> SparseResult<Vec<(usize, usize)>> {
    if !fixed.len().is_multiple_of(16) {
        return Err(SparseError::TrailingBytes(fixed.len() % 16));
    }
    let mut out = Vec::with_capacity(fixed.len() / 16);
    for at in (0..fixed.len()).step_by(16) {
        let off = to_usize(read_u64(fixed, at)?)?;
        let len = to_usize(read_u64(fixed, at + 8)?)?;
        let end = off.checked_add(len).ok_or(SparseError::Overflow)?;
        if end > var_len {
            return Err(SparseError::Truncated {
                needed: end,
                got: var_len,
            });
        }
        out.push((off, len));
    }
    Ok(out)
}

fn u32s(bytes: &[u8]) -> SparseResult<Vec<u32>> {
    if !bytes.len().is_multiple_of(4) {
        return Err(SparseError::TrailingBytes(bytes.len() % 4));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| {
            let mut a = [0u8; 4];
            a.copy_from_slice(c);
            u32::from_le_bytes(a)
        })
        .collect())
}

/// Decodes what [`encode_vlen`] wrote; every offset and length is bounds-checked.
pub fn decode_vlen(fixed: &[u8], var: &[u8]) -> SparseResult<Vec<Vec<u32>>> {
    vlen_fields(fixed, var.len())?
        .into_iter()
        .map(|(off, len)| u32s(&var[off..off + len]))
        .collect()
}

/// Encodes one vlen-of-vlen field per element of `values`: the fixed section gets
/// `(offset, byte length)` per element; the variable section holds, for each element, its
/// 8-byte count of inner sequences, then every inner sequence as its 8-byte element count
/// followed by its `u32` LE elements. `[[1, 2], [3]]` is therefore
/// `2u64 | 2u64 1u32 2u32 | 1u64 3u32` (36 bytes) with the field `(0, 36)`.
pub fn encode_vlen_of_vlen(values: &[Vec<Vec<u32>>]) -> (Vec<u8>, Vec<u8>) {
    let mut fixed = Vec::with_capacity(values.len() * 16);
    let mut var = Vec::new();
    for outer in values {
        let start = var.len() as u64;
        var.extend_from_slice(&(outer.len() as u64).to_le_bytes());
        for inner in outer {
            var.extend_from_slice(&(inner.len() as u64).to_le_bytes());
            for x in inner {
                var.extend_from_slice(&x.to_le_bytes());
            }
        }
        fixed.extend_from_slice(&start.to_le_bytes());
        fixed.extend_from_slice(&(var.len() as u64 - start).to_le_bytes());
    }
    (fixed, var)
}

/// Decodes what [`encode_vlen_of_vlen`] wrote in one pass per element; counts are checked
/// against the bytes left before anything is allocated, and each element must use exactly its
/// byte length.
pub fn decode_vlen_of_vlen(fixed: &[u8], var: &[u8]) -> SparseResult<Vec<Vec<Vec<u32>>>> {
    let mut out = Vec::new();
    for (off, len) in vlen_fields(fixed, var.len())? {
        let field = &var[off..off + len];
        let n = to_usize(read_u64(field, 0)?)?;
        let mut at = 8usize;
        // Each inner sequence needs at least its 8-byte count.
        if n > (field.len() - at) / 8 {
            return Err(SparseError::Truncated {
                needed: n.saturating_mul(8).saturating_add(at),
                got: field.len(),
            });
        }
        let mut outer = Vec::with_capacity(n);
        for _ in 0..n {
            let m = to_usize(read_u64(field, at)?)?;
            at += 8;
            let bytes = m.checked_mul(4).ok_or(SparseError::Overflow)?;
            outer.push(u32s(take(field, at, bytes)?)?);
            at += bytes;
        }
        if at != field.len() {
            return Err(SparseError::TrailingBytes(field.len() - at));
        }
        out.push(outer);
    }
    Ok(out)
}
