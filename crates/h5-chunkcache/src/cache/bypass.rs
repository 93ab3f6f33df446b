//! Transfers that skip the cache (spec §2.8, OQ-31, OQ-33).
//!
//! A piece bypasses when its request asks for it or, under [`Bypass::Auto`], when its chunk is
//! larger than `bypass_fraction` of the limit. A chunk whose values are resident is never
//! bypassed: it is served or updated in the cache by the read and write flows.
//!
//! The bypassed chunks of one call are looked up in one batch per dataset. Then, for each piece:
//!
//! * read: a chunk that does not exist gives fill values; otherwise the layout's selection-read
//!   planner is asked, then its vector-read planner; a chunk neither can transfer is loaded,
//!   scattered and dropped without being admitted, one chunk at a time;
//! * write: a chunk that does not exist, or a layout without direct-write planners, or a chunk
//!   with a piece no planner can transfer, goes through the cache and is flushed and evicted at
//!   once, chunk by chunk in order; otherwise selection write, then vector write.
//!
//! A planner may answer that it needs the chunk's defined-element information: the cache loads
//! the defined-only form (or the whole chunk when the layout keeps no separate defined section),
//! keeps it aside for this call and asks once more with it; a second such answer is an error.
//!
//! A write of every element of a dataset stored as one chunk, with nothing of it in the cache,
//! takes a shortcut of the same steps (one lookup, the same planners in the same order, one
//! vectored write) without the call-wide maps: a new small dataset's first write.
//!
//! Every direct transfer of the call (all chunks, all datasets) is issued at the end as one
//! vectored read or write. Without a conversion the caller's buffer goes straight to storage.
//! With one, the data passes through one conversion buffer allocated per call (at most
//! `conversion_buffer` bytes, counted in elements of the larger of the file and memory types;
//! a buffer smaller than one such element is grown to one element). When the converting pieces
//! do not fit in it at once, only the vector planners are used and the transfer runs in batches
//! no bigger than the buffer (the first batch shares the vectored call with the unconverted
//! transfers); a layout without a vector planner then goes through the cache. Conversions that
//! need a background go through the cache on writes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use h5_io::{ReadSegment, WriteSegment};

use super::read::Miss;
use super::write::WritePiece;
use super::{ChunkCache, IoReport, LoadKind, ReadRequest, WriteRequest, layout_err, to_usize};
use crate::error::{ChunkCacheError, Result};
use crate::layout::{
    Capabilities, Chunk, ChunkLayout, DirectPlan, DiskLocation, LayoutError, Lookup, Segment, Udata,
};
use crate::policy::EntryId;
use crate::selection::{CopyRun, Selection, SelectionError};
use crate::{ChunkCoord, ChunkKey, DatasetId, MAX_RANK};

/// Smallest chunk that a whole-chunk read of raw images sends straight to the caller's buffer:
/// smaller chunks are cached (re-reading them then costs no I/O), larger ones would be copied
/// twice for little gain.
pub const DIRECT_WHOLE_MIN: usize = 64 << 10;

/// Whether a request's chunks skip the cache (OQ-33).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Bypass {
    /// Skip the cache for chunks larger than `bypass_fraction` of the limit.
    #[default]
    Auto,
    /// Skip the cache for every chunk that is not resident.
    Always,
    /// Never skip the cache.
    Never,
}

/// The four direct-I/O planners.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Planner {
    SelectionRead,
    VectorRead,
    SelectionWrite,
    VectorWrite,
}

impl Planner {
    fn capability(self) -> Capabilities {
        match self {
            Planner::SelectionRead => Capabilities::SELECTION_READ,
            Planner::VectorRead => Capabilities::VECTOR_READ,
            Planner::SelectionWrite => Capabilities::SELECTION_WRITE,
            Planner::VectorWrite => Capabilities::VECTOR_WRITE,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Planner::SelectionRead => "plan_selection_read",
            Planner::VectorRead => "plan_vector_read",
            Planner::SelectionWrite => "plan_selection_write",
            Planner::VectorWrite => "plan_vector_write",
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn call(
        self,
        layout: &dyn ChunkLayout,
        coord: &ChunkCoord,
        chunk: Option<&Chunk>,
        location: DiskLocation,
        runs: &[CopyRun],
        partial_bound: bool,
        udata: &mut Udata,
    ) -> std::result::Result<DirectPlan, LayoutError> {
        match self {
            Planner::SelectionRead => {
                layout.plan_selection_read(coord, chunk, location, runs, partial_bound, udata)
            }
            Planner::VectorRead => {
                layout.plan_vector_read(coord, chunk, location, runs, partial_bound, udata)
            }
            Planner::SelectionWrite => {
                layout.plan_selection_write(coord, chunk, location, runs, partial_bound, udata)
            }
            Planner::VectorWrite => {
                layout.plan_vector_write(coord, chunk, location, runs, partial_bound, udata)
            }
        }
    }
}

/// One planned direct transfer: file segments whose concatenated bytes are, in order, the
/// elements of `dest` (element offset in the request's buffer, element count).
struct Transfer {
    req: usize,
    segs: Vec<Segment>,
    dest: Vec<(u64, u64)>,
    /// Bytes of a file element.
    file_es: usize,
    /// Bytes of a memory element (the file element's when not converting).
    mem_es: usize,
}

/// One batch of converting transfers: what to read or write where in the conversion buffer,
/// and the conversions between the buffer and the requests' buffers.
#[derive(Default)]
struct Batch {
    /// (file offset, conversion-buffer offset, bytes), ascending in the buffer.
    io: Vec<(u64, usize, usize)>,
    /// (conversion-buffer offset, request, buffer element offset, elements).
    ops: Vec<(usize, usize, u64, usize)>,
    /// Conversion-buffer bytes used.
    bytes: usize,
}

/// Whether a layout with `caps` has a direct-write planner.
fn writes_directly(caps: Capabilities) -> bool {
    caps.contains(Capabilities::SELECTION_WRITE) || caps.contains(Capabilities::VECTOR_WRITE)
}

fn overflow() -> ChunkCacheError {
    SelectionError::Overflow.into()
}

fn mul(a: u64, b: usize) -> Result<u64> {
    a.checked_mul(b as u64).ok_or_else(overflow)
}

/// Turns a planner's answer for `runs` of the chunk at `loc` into a transfer.
#[allow(clippy::too_many_arguments)]
fn transfer_from(
    answer: DirectPlan,
    planner: Planner,
    key: &ChunkKey,
    req: usize,
    loc: DiskLocation,
    runs: &[CopyRun],
    file_es: usize,
    mem_es: usize,
    buf_elems: u64,
) -> Result<Transfer> {
    let bad = |what: String| layout_err(key.dataset, Some(&key.coord), planner.name())(what.into());
    let (segs, dest) = match answer {
        DirectPlan::Selection(answer_runs) => {
            let runs = answer_runs.as_deref().unwrap_or(runs);
            let mut segs = Vec::with_capacity(runs.len());
            let mut dest = Vec::with_capacity(runs.len());
            for r in runs.iter().filter(|r| r.len > 0) {
                let end = mul(
                    r.chunk_offset.checked_add(r.len).ok_or_else(overflow)?,
                    file_es,
                )?;
                if end > loc.size {
                    return Err(bad(format!(
                        "run ends at byte {end} of an image of {} bytes",
                        loc.size
                    )));
                }
                segs.push(Segment {
                    offset: loc
                        .addr
                        .checked_add(mul(r.chunk_offset, file_es)?)
                        .ok_or_else(overflow)?,
                    len: to_usize(mul(r.len, file_es)?)?,
                });
                dest.push((r.buf_offset, r.len));
            }
            (segs, dest)
        }
        DirectPlan::Segments(segs) => {
            let dest: Vec<(u64, u64)> = runs
                .iter()
                .filter(|r| r.len > 0)
                .map(|r| (r.buf_offset, r.len))
                .collect();
            let want = dest.iter().map(|d| d.1).sum::<u64>();
            let want = to_usize(mul(want, file_es)?)?;
            let got = segs.iter().map(|s| s.len).sum::<usize>();
            if got != want {
                return Err(ChunkCacheError::InvalidLayoutSizes {
                    dataset: key.dataset,
                    callback: planner.name(),
                    expected: want,
                    got,
                });
            }
            (segs, dest)
        }
        DirectPlan::NotPossible | DirectPlan::NeedsDefinedValues => {
            return Err(ChunkCacheError::Internal(
                "a refused plan reached a transfer",
            ));
        }
    };
    for &(b, n) in &dest {
        if b.checked_add(n).is_none_or(|end| end > buf_elems) {
            return Err(bad(format!(
                "buffer run {b}+{n} is outside the buffer of {buf_elems} elements"
            )));
        }
    }
    Ok(Transfer {
        req,
        segs,
        dest,
        file_es,
        mem_es,
    })
}

/// The (file offset, buffer byte offset, bytes) pieces of an unconverted transfer.
fn plain_pairs(t: &Transfer) -> Result<Vec<(u64, usize, usize)>> {
    let es = t.file_es;
    let mut out = Vec::new();
    let mut si = 0usize;
    let mut used = 0usize;
    for &(b, n) in &t.dest {
        let mut pos = to_usize(mul(b, es)?)?;
        let mut left = to_usize(mul(n, es)?)?;
        while left > 0 {
            let seg = t
                .segs
                .get(si)
                .ok_or_else(|| ChunkCacheError::Internal("direct segments ran out"))?;
            let avail = seg.len.saturating_sub(used);
            if avail == 0 {
                si += 1;
                used = 0;
                continue;
            }
            let k = avail.min(left);
            out.push((seg.offset + used as u64, pos, k));
            used += k;
            pos += k;
            left -= k;
        }
    }
    Ok(out)
}

/// Splits converting transfers into batches of at most `cap` bytes, counting each element as
/// the larger of its file and memory sizes.
fn batches(conv: &[Transfer], cap: usize) -> Result<Vec<Batch>> {
    let mut out: Vec<Batch> = Vec::new();
    let mut cur = Batch::default();
    let mut wide_used = 0usize;
    for t in conv {
        let wide = t.file_es.max(t.mem_es);
        let mut si = 0usize;
        let mut used = 0usize;
        for &(b, n) in &t.dest {
            let mut b = b;
            let mut n = to_usize(n)?;
            while n > 0 {
                let room = cap.saturating_sub(wide_used) / wide;
                if room == 0 {
                    out.push(std::mem::take(&mut cur));
                    wide_used = 0;
                    continue;
                }
                let k = room.min(n);
                let start = cur.bytes;
                let mut left = k * t.file_es;
                while left > 0 {
                    let seg = t
                        .segs
                        .get(si)
                        .ok_or_else(|| ChunkCacheError::Internal("direct segments ran out"))?;
                    let avail = seg.len.saturating_sub(used);
                    if avail == 0 {
                        si += 1;
                        used = 0;
                        continue;
                    }
                    let m = avail.min(left);
                    cur.io.push((seg.offset + used as u64, cur.bytes, m));
                    cur.bytes += m;
                    used += m;
                    left -= m;
                }
                cur.ops.push((start, t.req, b, k));
                wide_used += k * wide;
                b += k as u64;
                n -= k;
            }
        }
    }
    if !cur.ops.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

/// Splits `buf` into the disjoint sub-slices named by `pairs` (sorted by buffer offset) and adds
/// one read segment per pair.
fn split_reads<'a>(
    buf: &'a mut [u8],
    pairs: &[(u64, usize, usize)],
    segs: &mut Vec<ReadSegment<'a>>,
) -> Result<()> {
    let mut rest = buf;
    let mut cursor = 0usize;
    for &(file, pos, len) in pairs {
        if pos < cursor {
            return Err(ChunkCacheError::Internal(
                "direct transfers overlap in a buffer",
            ));
        }
        let (_, tail) = rest
            .split_at_mut_checked(pos - cursor)
            .ok_or_else(|| ChunkCacheError::Internal("a direct transfer left its buffer"))?;
        let (mine, tail) = tail
            .split_at_mut_checked(len)
            .ok_or_else(|| ChunkCacheError::Internal("a direct transfer left its buffer"))?;
        segs.push(ReadSegment::new(file, mine));
        rest = tail;
        cursor = pos + len;
    }
    Ok(())
}

fn slice(buf: &[u8], start: usize, len: usize) -> Result<&[u8]> {
    buf.get(start..start.checked_add(len).ok_or_else(overflow)?)
        .ok_or_else(|| ChunkCacheError::Internal("a direct transfer left its buffer"))
}

fn slice_mut(buf: &mut [u8], start: usize, len: usize) -> Result<&mut [u8]> {
    buf.get_mut(start..start.checked_add(len).ok_or_else(overflow)?)
        .ok_or_else(|| ChunkCacheError::Internal("a direct transfer left its buffer"))
}

/// Distinct keys [`group`] finds by a scan of those seen before it builds a map of them.
const GROUP_SCAN_KEYS: usize = 8;

/// The keys in order of first appearance, each with the positions where it appears. A call of
/// a few chunks (a small write's one) is grouped without hashing or a map.
fn group(keys: impl Iterator<Item = ChunkKey>) -> Vec<(ChunkKey, Vec<usize>)> {
    let mut out: Vec<(ChunkKey, Vec<usize>)> = Vec::new();
    // Built once more than GROUP_SCAN_KEYS distinct keys are seen; then it indexes all of `out`.
    let mut at: Option<HashMap<ChunkKey, usize>> = None;
    for (i, k) in keys.enumerate() {
        let slot = match &mut at {
            Some(map) => *map.entry(k).or_insert_with(|| {
                out.push((k, Vec::new()));
                out.len() - 1
            }),
            None => match out.iter().position(|(o, _)| *o == k) {
                Some(p) => p,
                None => {
                    out.push((k, Vec::new()));
                    if out.len() > GROUP_SCAN_KEYS {
                        at = Some(out.iter().enumerate().map(|(j, (o, _))| (*o, j)).collect());
                    }
                    out.len() - 1
                }
            },
        };
        if let Some((_, v)) = out.get_mut(slot) {
            v.push(i);
        }
    }
    out
}

impl ChunkCache {
    /// Whether whole-chunk reads of `ds` may go straight to the caller's buffer: its images
    /// are its bytes, its chunks are large enough that copying them twice costs more than a
    /// later re-read ([`DIRECT_WHOLE_MIN`]), it lives in the cache's own storage and it has a
    /// read planner.
    pub(super) fn direct_whole_reads(&self, ds: DatasetId) -> Result<bool> {
        let st = self.state(ds)?;
        Ok(st.raw_images()
            && st.chunk_bytes >= DIRECT_WHOLE_MIN
            && Arc::ptr_eq(&st.storage, &self.storage)
            && (st.has(Capabilities::SELECTION_READ) || st.has(Capabilities::VECTOR_READ)))
    }

    /// Whether pieces of `ds` under `mode` skip the cache.
    ///
    /// Datasets of other files sharing this cache (`register_in`) never bypass: the merged
    /// direct transfers of a call go to the cache's own storage.
    pub(super) fn bypasses(&self, ds: DatasetId, mode: Bypass) -> Result<bool> {
        let st = self.state(ds)?;
        if !Arc::ptr_eq(&st.storage, &self.storage) {
            return Ok(false);
        }
        Ok(match mode {
            Bypass::Never => false,
            Bypass::Always => true,
            Bypass::Auto => {
                st.chunk_bytes as f64 > self.config.bypass_fraction * self.budget.limit() as f64
            }
        })
    }

    /// Looks up `keys`, one batch per dataset.
    pub(super) fn lookup_keys(&self, keys: &[ChunkKey]) -> Result<HashMap<ChunkKey, Lookup>> {
        let mut by_ds: Vec<(DatasetId, Vec<ChunkCoord>)> = Vec::new();
        for k in keys {
            match by_ds.iter_mut().find(|(d, _)| *d == k.dataset) {
                Some((_, v)) => v.push(k.coord),
                None => by_ds.push((k.dataset, vec![k.coord])),
            }
        }
        let mut out = HashMap::new();
        for (ds, coords) in by_ds {
            let layout = Arc::clone(&self.state(ds)?.layout);
            let found = layout
                .lookup(&coords)
                .map_err(layout_err(ds, None, "lookup"))?;
            if found.len() != coords.len() {
                return Err(ChunkCacheError::InvalidLayoutSizes {
                    dataset: ds,
                    callback: "lookup",
                    expected: coords.len(),
                    got: found.len(),
                });
            }
            for (coord, l) in coords.into_iter().zip(found) {
                out.insert(ChunkKey { dataset: ds, coord }, l);
            }
        }
        Ok(out)
    }

    /// Loads the defined-only form of `key` (the whole chunk when the layout keeps no separate
    /// defined section), for a planner that asked for it.
    fn load_defined_form(&mut self, key: ChunkKey) -> Result<Chunk> {
        let res = self.load(&[(key, LoadKind::Defined)])?;
        if let Some(l) = res.loaded.into_iter().next() {
            return Ok(l.chunk);
        }
        if !res.all_defined.is_empty() {
            let res = self.load(&[(key, LoadKind::Values)])?;
            if let Some(l) = res.loaded.into_iter().next() {
                return Ok(l.chunk);
            }
        }
        Err(ChunkCacheError::Internal(
            "a bypassed chunk left the index during the call",
        ))
    }

    /// Asks `planners` in order about `runs` of the existing chunk `key`; the first answer that
    /// is not "not possible" wins. `None`: no planner can transfer the piece.
    fn plan_piece(
        &mut self,
        key: ChunkKey,
        found: &mut Lookup,
        runs: &[CopyRun],
        planners: &[Planner],
        aside: &mut HashMap<ChunkKey, Chunk>,
    ) -> Result<Option<(DirectPlan, Planner)>> {
        let ds = key.dataset;
        let st = self.state(ds)?;
        let layout = Arc::clone(&st.layout);
        let caps = st.info.capabilities;
        let pb = st.partial_bound(&key.coord, &st.extent(ds)?);
        let loc = found
            .location
            .ok_or_else(|| ChunkCacheError::Internal("planning a chunk that does not exist"))?;
        for &p in planners.iter().filter(|p| caps.contains(p.capability())) {
            let (mut answer, had_chunk) = {
                let resident = self.lookup_id(&key).and_then(|id| self.entry(id));
                let chunk = resident.map(|e| &e.chunk).or_else(|| aside.get(&key));
                let a = p
                    .call(&*layout, &key.coord, chunk, loc, runs, pb, &mut found.udata)
                    .map_err(layout_err(ds, Some(&key.coord), p.name()))?;
                (a, chunk.is_some())
            };
            if answer == DirectPlan::NeedsDefinedValues {
                if had_chunk {
                    return Err(layout_err(ds, Some(&key.coord), p.name())(
                        "asked for the defined values although it was given the chunk".into(),
                    ));
                }
                let chunk = self.load_defined_form(key)?;
                let chunk = aside.entry(key).or_insert(chunk);
                answer = p
                    .call(
                        &*layout,
                        &key.coord,
                        Some(chunk),
                        loc,
                        runs,
                        pb,
                        &mut found.udata,
                    )
                    .map_err(layout_err(ds, Some(&key.coord), p.name()))?;
                if answer == DirectPlan::NeedsDefinedValues {
                    return Err(layout_err(ds, Some(&key.coord), p.name())(
                        "asked for the defined values a second time".into(),
                    ));
                }
            }
            if answer != DirectPlan::NotPossible {
                return Ok(Some((answer, p)));
            }
        }
        Ok(None)
    }

    /// Reads and decodes an existing chunk found by this call's lookup, without admitting it.
    fn load_found(&mut self, key: ChunkKey, found: Lookup) -> Result<Chunk> {
        let loc = found
            .location
            .ok_or_else(|| ChunkCacheError::Internal("loading a chunk that does not exist"))?;
        let st = self.state(key.dataset)?;
        let layout = Arc::clone(&st.layout);
        let pb = st.partial_bound(&key.coord, &layout.extent());
        let size = to_usize(loc.size)?;
        let mut image = Vec::with_capacity(size.max(found.size_hint));
        image.resize(size, 0);
        // Read like the cached path does (a vectored read, here of one segment).
        Arc::clone(&st.storage)
            .read_vectored(&mut [ReadSegment::new(loc.addr, image.as_mut_slice())])?;
        self.stats.bytes_read += loc.size;
        let mut udata = found.udata;
        let t = Instant::now();
        let chunk = layout
            .decode(&key.coord, image, pb, &mut udata)
            .map_err(layout_err(key.dataset, Some(&key.coord), "decode"))?;
        self.stats.decode_time += t.elapsed();
        self.check_chunk(key.dataset, "decode", &chunk)?;
        Ok(chunk)
    }

    /// The conversion-buffer footprint of the converting pieces whose chunks exist, counted in
    /// elements of the larger type.
    fn converting_bytes<'p>(
        &self,
        pieces: impl Iterator<Item = (DatasetId, u64, Option<usize>, &'p ChunkCoord)>,
        found: &HashMap<ChunkKey, Lookup>,
    ) -> Result<u64> {
        let mut total = 0u64;
        for (ds, elements, mem_es, coord) in pieces {
            let Some(mem_es) = mem_es else { continue };
            let key = ChunkKey {
                dataset: ds,
                coord: *coord,
            };
            if found.get(&key).is_some_and(|f| f.location.is_some()) {
                let wide = self.state(ds)?.info.elem_size.max(mem_es);
                total = total.saturating_add(elements.saturating_mul(wide as u64));
            }
        }
        Ok(total)
    }

    /// The capacity of this call's conversion buffer: the configured size, grown to one element
    /// of the widest converting transfer.
    fn conversion_capacity(&self, conv: &[Transfer]) -> usize {
        conv.iter()
            .map(|t| t.file_es.max(t.mem_es))
            .fold(self.config.conversion_buffer, usize::max)
    }

    /// Reads bypassed pieces (see the module documentation).
    pub(super) fn read_bypassed(
        &mut self,
        reqs: &mut [ReadRequest<'_>],
        pieces: &[Miss],
        report: &mut IoReport,
    ) -> Result<()> {
        self.stats.bypassed += pieces.len() as u64;
        let key_of = |reqs: &[ReadRequest<'_>], m: &Miss| ChunkKey {
            dataset: reqs[m.req].dataset,
            coord: m.piece.coord,
        };
        let keys: Vec<ChunkKey> = group(pieces.iter().map(|m| key_of(reqs, m)))
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let mut found = self.lookup_keys(&keys)?;
        let conv_total = self.converting_bytes(
            pieces.iter().map(|m| {
                let r = &reqs[m.req];
                (
                    r.dataset,
                    m.piece.elements,
                    r.conversion.map(|c| c.dst_size()),
                    &m.piece.coord,
                )
            }),
            &found,
        )?;
        let fits = conv_total <= self.config.conversion_buffer as u64;
        let mut plain: Vec<Transfer> = Vec::new();
        let mut conv: Vec<Transfer> = Vec::new();
        let mut fallback: Vec<usize> = Vec::new();
        let mut aside: HashMap<ChunkKey, Chunk> = HashMap::new();
        for (i, m) in pieces.iter().enumerate() {
            let key = key_of(reqs, m);
            let f = found
                .get_mut(&key)
                .ok_or_else(|| ChunkCacheError::Internal("a bypassed chunk was not looked up"))?;
            let r = &mut reqs[m.req];
            let Some(loc) = f.location else {
                let st = self.state(key.dataset)?;
                Self::fill_buffer(st, key.dataset, &m.piece.runs, r.buf, r.conversion)?;
                continue;
            };
            let file_es = self.state(key.dataset)?.info.elem_size;
            let mem_es = r.conversion.map_or(file_es, |c| c.dst_size());
            let planners: &[Planner] = match r.conversion {
                Some(_) if !fits => &[Planner::VectorRead],
                _ => &[Planner::SelectionRead, Planner::VectorRead],
            };
            let buf_elems = (r.buf.len() / mem_es) as u64;
            let converting = r.conversion.is_some();
            match self.plan_piece(key, f, &m.piece.runs, planners, &mut aside)? {
                None => fallback.push(i),
                Some((answer, p)) => {
                    let is_vector = matches!(answer, DirectPlan::Segments(_));
                    let t = transfer_from(
                        answer,
                        p,
                        &key,
                        m.req,
                        loc,
                        &m.piece.runs,
                        file_es,
                        mem_es,
                        buf_elems,
                    )?;
                    if is_vector {
                        report.mode.vector = true;
                    } else {
                        report.mode.selection = true;
                    }
                    if converting {
                        conv.push(t);
                    } else {
                        plain.push(t);
                    }
                }
            }
        }
        drop(aside);
        self.run_direct_reads(reqs, &plain, &conv)?;
        // The rest: load, scatter and drop, one chunk at a time (EC-03).
        for (key, at) in group(fallback.iter().map(|&i| key_of(reqs, &pieces[i]))) {
            let f = found
                .remove(&key)
                .ok_or_else(|| ChunkCacheError::Internal("a bypassed chunk was not looked up"))?;
            let chunk = self.load_found(key, f)?;
            for j in at {
                let m = &pieces[fallback[j]];
                let r = &mut reqs[m.req];
                let st = self.state(key.dataset)?;
                Self::scatter_chunk(
                    st,
                    key.dataset,
                    &key.coord,
                    &chunk,
                    &m.piece.runs,
                    r.buf,
                    r.conversion,
                )?;
            }
        }
        Ok(())
    }

    /// Issues the direct reads of one call: unconverted transfers straight into the callers'
    /// buffers and the first conversion batch in one vectored read, then the other batches.
    fn run_direct_reads(
        &mut self,
        reqs: &mut [ReadRequest<'_>],
        plain: &[Transfer],
        conv: &[Transfer],
    ) -> Result<()> {
        let mut per_req: Vec<Vec<(u64, usize, usize)>> = vec![Vec::new(); reqs.len()];
        for t in plain {
            let list = per_req
                .get_mut(t.req)
                .ok_or_else(|| ChunkCacheError::Internal("a transfer names no request"))?;
            list.extend(plain_pairs(t)?);
        }
        for list in &mut per_req {
            // Positions in one buffer are distinct (its transfers are disjoint): no order
            // among equals to keep.
            list.sort_unstable_by_key(|&(_, pos, _)| pos);
        }
        let batches = batches(conv, self.conversion_capacity(conv))?;
        let mut cbuf: Vec<u8> = Vec::new();
        if let Some(max) = batches.iter().map(|b| b.bytes).max() {
            cbuf = vec![0; max];
            self.stats.conversion_buffers += 1;
        }
        let rounds = batches
            .len()
            .max(usize::from(plain.iter().any(|t| !t.segs.is_empty())));
        for round in 0..rounds {
            let batch = batches.get(round);
            let mut bytes = 0u64;
            {
                let mut segs: Vec<ReadSegment<'_>> = Vec::new();
                if round == 0 {
                    for (r, list) in reqs.iter_mut().zip(&per_req) {
                        split_reads(&mut *r.buf, list, &mut segs)?;
                    }
                }
                if let Some(b) = batch {
                    split_reads(&mut cbuf, &b.io, &mut segs)?;
                }
                bytes += segs.iter().map(|s| s.buf.len() as u64).sum::<u64>();
                if !segs.is_empty() {
                    self.storage.read_vectored(&mut segs)?;
                }
            }
            self.stats.bytes_read += bytes;
            self.stats.bypassed_bytes += bytes;
            let Some(b) = batch else { continue };
            for &(off, req, at, n) in &b.ops {
                let r = reqs
                    .get_mut(req)
                    .ok_or_else(|| ChunkCacheError::Internal("a transfer names no request"))?;
                let c = r.conversion.ok_or_else(|| {
                    ChunkCacheError::Internal("a converting transfer lost its conversion")
                })?;
                let src = slice(&cbuf, off, n * c.src_size())?;
                let start = to_usize(mul(at, c.dst_size())?)?;
                let dst = slice_mut(r.buf, start, n * c.dst_size())?;
                c.convert(src, dst, n)
                    .map_err(layout_err(r.dataset, None, "conversion"))?;
            }
        }
        Ok(())
    }

    /// Writes bypassed pieces (see the module documentation).
    pub(super) fn write_bypassed(
        &mut self,
        reqs: &[WriteRequest<'_>],
        pieces: &[WritePiece],
        report: &mut IoReport,
    ) -> Result<()> {
        self.stats.bypassed += pieces.len() as u64;
        let key_of = |w: &WritePiece| ChunkKey {
            dataset: reqs[w.req].dataset,
            coord: w.piece.coord,
        };
        let keys = group(pieces.iter().map(key_of));
        let mut found = self.lookup_keys(&keys.iter().map(|(k, _)| *k).collect::<Vec<_>>())?;
        let conv_total = self.converting_bytes(
            pieces.iter().map(|w| {
                let r = &reqs[w.req];
                (
                    r.dataset,
                    w.piece.elements,
                    r.conversion.map(|c| c.src_size()),
                    &w.piece.coord,
                )
            }),
            &found,
        )?;
        let fits = conv_total <= self.config.conversion_buffer as u64;
        let mut plain: Vec<Transfer> = Vec::new();
        let mut conv: Vec<Transfer> = Vec::new();
        let mut direct_keys: Vec<ChunkKey> = Vec::new();
        let mut aside: HashMap<ChunkKey, Chunk> = HashMap::new();
        for (key, at) in keys {
            let group: Vec<&WritePiece> = at.iter().map(|&i| &pieces[i]).collect();
            let f = found
                .get_mut(&key)
                .ok_or_else(|| ChunkCacheError::Internal("a bypassed chunk was not looked up"))?;
            let caps = self.state(key.dataset)?.info.capabilities;
            let can_direct = writes_directly(caps);
            // An earlier request of this call may have brought the chunk in: then it is
            // updated in the cache (and written out below) so that request order holds.
            let resident = self
                .lookup_id(&key)
                .and_then(|id| self.entry(id))
                .is_some_and(|e| e.has_values);
            let mut planned: Vec<(Transfer, bool)> = Vec::new();
            let mut direct = false;
            if let (Some(loc), true, false) = (f.location, can_direct, resident) {
                direct = true;
                let file_es = self.state(key.dataset)?.info.elem_size;
                for w in &group {
                    let r = &reqs[w.req];
                    let mem_es = r.conversion.map_or(file_es, |c| c.src_size());
                    let planners: &[Planner] = match r.conversion {
                        Some(c) if c.needs_background() => &[],
                        Some(_) if !fits => &[Planner::VectorWrite],
                        _ => &[Planner::SelectionWrite, Planner::VectorWrite],
                    };
                    let Some((answer, p)) =
                        self.plan_piece(key, f, &w.piece.runs, planners, &mut aside)?
                    else {
                        direct = false;
                        break;
                    };
                    let is_vector = matches!(answer, DirectPlan::Segments(_));
                    let t = transfer_from(
                        answer,
                        p,
                        &key,
                        w.req,
                        loc,
                        &w.piece.runs,
                        file_es,
                        mem_es,
                        (r.buf.len() / mem_es) as u64,
                    )?;
                    planned.push((t, is_vector));
                }
            }
            if !direct {
                // Through the cache, then flushed and evicted before the next chunk.
                let group: Vec<WritePiece> = group
                    .iter()
                    .map(|w| WritePiece {
                        req: w.req,
                        piece: w.piece.clone(),
                        covers: w.covers,
                    })
                    .collect();
                self.write_cached(reqs, &group)?;
                if let Some(id) = self.lookup_id(&key) {
                    self.flush_entries(key.dataset, &[id.0])?;
                    self.remove(EntryId(id.0));
                }
                continue;
            }
            direct_keys.push(key);
            for (t, is_vector) in planned {
                if is_vector {
                    report.mode.vector = true;
                } else {
                    report.mode.selection = true;
                }
                if reqs[t.req].conversion.is_none() {
                    plain.push(t);
                } else {
                    conv.push(t);
                }
            }
        }
        drop(aside);
        self.run_direct_writes(reqs, &plain, &conv)?;
        for key in direct_keys {
            self.drop_defined_form(&key);
        }
        Ok(())
    }

    /// One request that asks to skip the cache and writes every element of a dataset stored as
    /// exactly one chunk (a contiguous or compact block, or one chunk as large as the extent),
    /// without conversion or memory selection: the chunk is looked up and planned as in
    /// [`write_bypassed`](Self::write_bypassed), without the call-wide key maps a general call
    /// needs (a new small dataset's first write, once per dataset). `Ok(None)`: not this case,
    /// or a case the general flow must decide (an entry of the chunk in the cache, a chunk not
    /// yet stored, no planner able to write it); nothing was written then.
    pub(super) fn write_single_bypassed(
        &mut self,
        r: &WriteRequest<'_>,
    ) -> Result<Option<IoReport>> {
        if r.skip_io
            || r.bypass != Bypass::Always
            || r.memory.is_some()
            || r.conversion.is_some()
            || !matches!(r.selection, Selection::All)
            || !self.bypasses(r.dataset, r.bypass)?
        {
            return Ok(None);
        }
        let st = self.state(r.dataset)?;
        let extent = st.extent(r.dataset)?;
        if !st.info.uses_cache || *extent != st.info.chunk_dims[..] {
            return Ok(None);
        }
        if !writes_directly(st.info.capabilities) {
            return Ok(None);
        }
        let es = st.info.elem_size;
        let layout = Arc::clone(&st.layout);
        let elems = r.selection.num_elements(&extent)?;
        if elems == 0 {
            return Ok(None);
        }
        let needed = to_usize(mul(elems, es)?)?;
        if needed != r.buf.len() {
            return Err(ChunkCacheError::BufferSize {
                needed,
                got: r.buf.len(),
            });
        }
        let origin = [0u64; MAX_RANK];
        let coord = origin.get(..extent.len()).and_then(ChunkCoord::new).ok_or(
            ChunkCacheError::Internal("an extent above the largest rank"),
        )?;
        let key = ChunkKey {
            dataset: r.dataset,
            coord,
        };
        if self.lookup_id(&key).is_some() {
            return Ok(None);
        }
        let mut found = layout
            .lookup(std::slice::from_ref(&key.coord))
            .map_err(layout_err(r.dataset, None, "lookup"))?;
        let got = found.len();
        let (Some(f), 1) = (found.first_mut(), got) else {
            return Err(ChunkCacheError::InvalidLayoutSizes {
                dataset: r.dataset,
                callback: "lookup",
                expected: 1,
                got,
            });
        };
        let Some(loc) = f.location else {
            return Ok(None);
        };
        let runs = [CopyRun {
            chunk_offset: 0,
            buf_offset: 0,
            len: elems,
        }];
        let mut aside = HashMap::new();
        let Some((answer, p)) = self.plan_piece(
            key,
            f,
            &runs,
            &[Planner::SelectionWrite, Planner::VectorWrite],
            &mut aside,
        )?
        else {
            return Ok(None);
        };
        drop(aside);
        let mut report = IoReport::default();
        if matches!(answer, DirectPlan::Segments(_)) {
            report.mode.vector = true;
        } else {
            report.mode.selection = true;
        }
        if answer == DirectPlan::Selection(None) {
            // The runs unchanged: the whole image, from its start, is the caller's buffer.
            self.stats.bypassed += 1;
            self.write_whole_image(&key, p, loc, r.buf)?;
        } else {
            let t = transfer_from(answer, p, &key, 0, loc, &runs, es, es, elems)?;
            self.stats.bypassed += 1;
            self.run_direct_writes(std::slice::from_ref(r), std::slice::from_ref(&t), &[])?;
        }
        self.drop_defined_form(&key);
        Ok(Some(report))
    }

    /// Writes `buf`, an unfiltered chunk's whole image, at its location `loc` in one write
    /// (what [`run_direct_writes`](Self::run_direct_writes) does for a transfer of one run
    /// covering the image, without building the transfer).
    fn write_whole_image(
        &mut self,
        key: &ChunkKey,
        planner: Planner,
        loc: DiskLocation,
        buf: &[u8],
    ) -> Result<()> {
        if buf.len() as u64 > loc.size {
            return Err(layout_err(key.dataset, Some(&key.coord), planner.name())(
                format!(
                    "run ends at byte {} of an image of {} bytes",
                    buf.len(),
                    loc.size
                )
                .into(),
            ));
        }
        self.storage
            .write_vectored(&[WriteSegment::new(loc.addr, buf)])?;
        self.index_changes += 1;
        let bytes = buf.len() as u64;
        self.stats.bytes_written += bytes;
        self.stats.bypassed_bytes += bytes;
        Ok(())
    }

    /// Drops the defined-only form of `key` cached by a planner's request, if any: a chunk
    /// written directly made it out of date.
    fn drop_defined_form(&mut self, key: &ChunkKey) {
        if let Some(id) = self.lookup_id(key)
            && self.entry(id).is_some_and(|e| !e.has_values && !e.dirty)
        {
            self.remove(id);
        }
    }

    /// Issues the direct writes of one call: unconverted transfers straight from the callers'
    /// buffers and the first conversion batch in one vectored write, then the other batches.
    fn run_direct_writes(
        &mut self,
        reqs: &[WriteRequest<'_>],
        plain: &[Transfer],
        conv: &[Transfer],
    ) -> Result<()> {
        let mut pairs: Vec<(u64, &[u8])> = Vec::new();
        for t in plain {
            let r = reqs
                .get(t.req)
                .ok_or_else(|| ChunkCacheError::Internal("a transfer names no request"))?;
            for (file, pos, len) in plain_pairs(t)? {
                pairs.push((file, slice(r.buf, pos, len)?));
            }
        }
        let batches = batches(conv, self.conversion_capacity(conv))?;
        let mut cbuf: Vec<u8> = Vec::new();
        if let Some(max) = batches.iter().map(|b| b.bytes).max() {
            cbuf = vec![0; max];
            self.stats.conversion_buffers += 1;
        }
        let rounds = batches.len().max(usize::from(!pairs.is_empty()));
        for round in 0..rounds {
            let batch = batches.get(round);
            if let Some(b) = batch {
                for &(off, req, at, n) in &b.ops {
                    let r = reqs
                        .get(req)
                        .ok_or_else(|| ChunkCacheError::Internal("a transfer names no request"))?;
                    let c = r.conversion.ok_or_else(|| {
                        ChunkCacheError::Internal("a converting transfer lost its conversion")
                    })?;
                    let start = to_usize(mul(at, c.src_size())?)?;
                    let src = slice(r.buf, start, n * c.src_size())?;
                    let dst = slice_mut(&mut cbuf, off, n * c.dst_size())?;
                    c.convert(src, dst, n)
                        .map_err(layout_err(r.dataset, None, "conversion"))?;
                }
            }
            let mut segs: Vec<WriteSegment<'_>> = Vec::new();
            if round == 0 {
                segs.extend(pairs.iter().map(|&(f, d)| WriteSegment::new(f, d)));
            }
            if let Some(b) = batch {
                for &(file, off, len) in &b.io {
                    segs.push(WriteSegment::new(file, slice(&cbuf, off, len)?));
                }
            }
            let bytes: u64 = segs.iter().map(|s| s.data.len() as u64).sum();
            if !segs.is_empty() {
                self.storage.write_vectored(&segs)?;
                self.index_changes += 1;
            }
            self.stats.bytes_written += bytes;
            self.stats.bypassed_bytes += bytes;
        }
        Ok(())
    }
}

#[cfg(test)]
mod group_tests {
    use super::*;

    fn key(d: u64, c: u64) -> ChunkKey {
        ChunkKey {
            dataset: DatasetId(d),
            coord: ChunkCoord::new(&[c]).expect("rank 1"),
        }
    }

    /// Grouping by scan (few keys) and by map (past GROUP_SCAN_KEYS distinct keys) gives the
    /// keys in order of first appearance with every position of each.
    #[test]
    fn groups_by_first_appearance_with_and_without_a_map() {
        let few = [key(1, 0), key(2, 0), key(1, 0), key(1, 1), key(2, 0)];
        assert_eq!(
            group(few.into_iter()),
            vec![
                (key(1, 0), vec![0, 2]),
                (key(2, 0), vec![1, 4]),
                (key(1, 1), vec![3]),
            ]
        );
        // 12 distinct keys, each twice, in the order 0..12 then 11..0.
        let n = (GROUP_SCAN_KEYS + 4) as u64;
        let many: Vec<ChunkKey> = (0..n).chain((0..n).rev()).map(|c| key(7, c)).collect();
        let got = group(many.into_iter());
        let last = 2 * n as usize - 1;
        let want: Vec<(ChunkKey, Vec<usize>)> = (0..n as usize)
            .map(|c| (key(7, c as u64), vec![c, last - c]))
            .collect();
        assert_eq!(got, want);
    }
}
