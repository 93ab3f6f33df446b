//! Set-extent notification (spec §2.11, OQ-16, OQ-17).
//!
//! The caller changes the layout's extent first and then calls
//! [`ChunkCache::set_extent_notify`] with the old dimensions. Keys are scaled coordinates, so
//! resident chunks still inside the extent need no re-keying. The notification then:
//!
//! 1. walks the resident chunks of the dataset: those now entirely outside are dropped (dirty
//!    data discarded) and deleted on disk when they have a location; those that lost elements
//!    have them erased (`erase_values`) or filled (`fill`, or the cache's own dense fill) and
//!    become dirty; those whose edge state changed are marked for re-encoding;
//! 2. walks the chunks that held elements now outside the extent and are not resident: the
//!    ones now entirely outside are looked up in batches and deleted when they exist; the ones
//!    still partly inside are collected first and then either get fill values written straight
//!    to the file through the layout's direct-write planner (no erase-values, a planner present,
//!    the planner agreeing) or are loaded through the cache, erased or filled and left dirty;
//! 3. when edge chunks are encoded differently, loads the non-resident chunks that were edge
//!    chunks and are now interior (decoding them with the edge state they were written with);
//! 4. re-encodes and reinserts at once (one insert, one vectored write) every chunk whose edge
//!    state changed, so that the file never holds an image whose edge state differs from the
//!    geometric one once the call returns (the chunk index does not record it);
//! 5. with early allocation, allocates and fills every chunk newly inside the extent.
//!
//! Choices: `delete_chunk` is called only for chunks that have a location (a resident chunk
//! without one was never written, so the layout has nothing to free); a chunk resident only in
//! its defined-only form that loses elements or changes edge state is dropped (it is clean) and
//! handled like a non-resident one; chunk loads of step 2 and 3 are grouped so that a group's
//! chunks fit in the memory limit (one lookup batch per group, all of them in one group when
//! they fit), so each collected chunk is handled exactly once whatever the limit.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use h5_io::WriteSegment;

use super::{ChunkCache, LoadKind, check_usage, layout_err, partial_bound, to_usize};
use crate::error::{ChunkCacheError, Result};
use crate::layout::{Capabilities, ChunkLayout, DirectPlan, InsertRequest, Udata};
use crate::policy::EntryId;
use crate::selection::{CopyRun, SelectionError, outside_extent_runs};
use crate::{ChunkCoord, ChunkKey, DatasetId};

/// Chunks per lookup, insert or write batch when walking large regions.
const BATCH: usize = 4096;

/// The chunk grid with the old and new extents.
struct Geometry {
    dims: Vec<u64>,
    old: Vec<u64>,
    new: Vec<u64>,
}

impl Geometry {
    /// Whether no element of the chunk lies inside `extent`.
    fn outside(&self, c: &ChunkCoord, extent: &[u64]) -> bool {
        c.as_slice()
            .iter()
            .zip(&self.dims)
            .zip(extent)
            .any(|((c, d), e)| c.saturating_mul(*d) >= *e)
    }

    fn pb_old(&self, c: &ChunkCoord) -> bool {
        partial_bound(&self.dims, c, &self.old)
    }

    fn pb_new(&self, c: &ChunkCoord) -> bool {
        partial_bound(&self.dims, c, &self.new)
    }

    /// The elements of the chunk that were inside the old extent and are outside the new one,
    /// as runs in ascending chunk order (`buf_offset` counts the elements before each run).
    fn left_runs(&self, c: &ChunkCoord) -> Result<Vec<CopyRun>> {
        let now_out = outside_extent_runs(c, &self.new, &self.dims)?;
        if now_out.is_empty() {
            return Ok(now_out);
        }
        let was_out = outside_extent_runs(c, &self.old, &self.dims)?;
        Ok(subtract_runs(&now_out, &was_out))
    }

    /// Chunks intersecting each extent, per dimension.
    fn counts(&self, extent: &[u64]) -> Vec<u64> {
        extent
            .iter()
            .zip(&self.dims)
            .map(|(e, d)| e.div_ceil(*d))
            .collect()
    }
}

/// `a` minus `b`, both sorted and non-overlapping (only `chunk_offset` and `len` count).
fn subtract_runs(a: &[CopyRun], b: &[CopyRun]) -> Vec<CopyRun> {
    let mut out: Vec<CopyRun> = Vec::new();
    let mut total = 0u64;
    let mut push = |start: u64, len: u64, out: &mut Vec<CopyRun>| {
        out.push(CopyRun {
            chunk_offset: start,
            buf_offset: total,
            len,
        });
        total += len;
    };
    let mut j = 0;
    for r in a.iter().filter(|r| r.len > 0) {
        let mut s = r.chunk_offset;
        let end = r.chunk_offset.saturating_add(r.len);
        while j < b.len() && b[j].chunk_offset.saturating_add(b[j].len) <= s {
            j += 1;
        }
        let mut k = j;
        while s < end && k < b.len() && b[k].chunk_offset < end {
            let bs = b[k].chunk_offset;
            let be = bs.saturating_add(b[k].len);
            if bs > s {
                push(s, bs - s, &mut out);
            }
            s = s.max(be);
            k += 1;
        }
        if s < end {
            push(s, end - s, &mut out);
        }
    }
    out
}

/// The chunk coordinates in the box `[0, outer)` but not in the box `[0, inner)` (`inner` no
/// larger than `outer` in any dimension), as disjoint sub-boxes walked in row-major order.
struct BoxDiff {
    outer: Vec<u64>,
    inner: Vec<u64>,
    /// The sub-box being walked: dimension `k` runs over `[inner[k], outer[k])`.
    k: usize,
    lo: Vec<u64>,
    hi: Vec<u64>,
    cur: Option<Vec<u64>>,
}

impl BoxDiff {
    fn new(outer: Vec<u64>, inner: Vec<u64>) -> Self {
        let inner = inner
            .iter()
            .zip(&outer)
            .map(|(i, o)| (*i).min(*o))
            .collect();
        let mut b = Self {
            outer,
            inner,
            k: 0,
            lo: Vec::new(),
            hi: Vec::new(),
            cur: None,
        };
        b.setup();
        b
    }

    /// Prepares sub-box `k` (or the next non-empty one).
    fn setup(&mut self) {
        let rank = self.outer.len();
        while self.k < rank {
            let k = self.k;
            self.lo = (0..rank)
                .map(|j| if j == k { self.inner[j] } else { 0 })
                .collect();
            self.hi = (0..rank)
                .map(|j| if j < k { self.inner[j] } else { self.outer[j] })
                .collect();
            if self.lo.iter().zip(&self.hi).all(|(l, h)| l < h) {
                self.cur = Some(self.lo.clone());
                return;
            }
            self.k += 1;
        }
        self.cur = None;
    }
}

impl Iterator for BoxDiff {
    type Item = ChunkCoord;

    fn next(&mut self) -> Option<ChunkCoord> {
        let cur = self.cur.as_mut()?;
        let out = ChunkCoord::new(cur);
        // Advance the odometer, last dimension fastest.
        let mut d = cur.len();
        loop {
            if d == 0 {
                self.k += 1;
                self.setup();
                break;
            }
            d -= 1;
            cur[d] += 1;
            if cur[d] < self.hi[d] {
                break;
            }
            cur[d] = self.lo[d];
        }
        out
    }
}

impl ChunkCache {
    /// Tells the cache that `ds`'s extent changed (SCC-028): the layout already reports the new
    /// dimensions through [`ChunkLayout::extent`]; `old_dims` are the previous ones.
    ///
    /// Chunks now entirely outside the extent are dropped from the cache (dirty data is
    /// discarded, not written) and deleted on disk; elements that left the extent in chunks still
    /// partly inside are erased (layouts with erase-values) or set to the fill value, in the
    /// cache or, for non-resident chunks of layouts with a direct-write planner, straight in the
    /// file; when edge chunks are encoded differently, every chunk whose edge state changed is
    /// re-encoded and reinserted before the call returns; with early allocation, chunks newly
    /// inside the extent are allocated and written filled. A dataset whose layout does not use
    /// the cache is left alone. Errors: unknown dataset, dimensions of the wrong rank, layout and
    /// storage failures.
    pub fn set_extent_notify(&mut self, ds: DatasetId, old_dims: &[u64]) -> Result<()> {
        // Chunks outside the new extent leave the index; others may be rewritten or allocated
        // (`extent_allocate`): one count for the whole call.
        self.index_changes += 1;
        let st = self.state(ds)?;
        if !st.info.uses_cache {
            return Ok(());
        }
        let new_dims = st.extent(ds)?;
        let rank = st.info.chunk_dims.len();
        for got in [old_dims.len(), new_dims.len()] {
            if got != rank {
                return Err(SelectionError::RankMismatch {
                    expected: rank,
                    got,
                }
                .into());
            }
        }
        if old_dims == &*new_dims {
            return Ok(());
        }
        // Growing only (every dimension at least as large): no element leaves the extent, so
        // nothing is dropped, erased or filled; with edge chunks encoded like the others and
        // late allocation nothing else changes either. (W4's appends resize every time.)
        let grows = old_dims.iter().zip(new_dims.iter()).all(|(o, n)| n >= o);
        if grows && !st.info.edge_chunks_differ && !st.info.early_allocation {
            return Ok(());
        }
        let info = st.info.clone();
        let g = Geometry {
            dims: info.chunk_dims.clone(),
            old: old_dims.to_vec(),
            new: new_dims.to_vec(),
        };
        let mut handled: HashSet<ChunkCoord> = HashSet::new();
        let mut reencode: Vec<ChunkKey> = Vec::new();
        self.extent_resident(ds, &g, &mut handled, &mut reencode)?;
        self.extent_shrunk(ds, &g, &handled, &mut reencode)?;
        if info.edge_chunks_differ {
            self.extent_edges(ds, &g, &handled, &mut reencode)?;
        }
        // Re-encode and reinsert the chunks whose edge state changed (those evicted meanwhile
        // were written with the new state already).
        let mut ids: Vec<u32> = reencode
            .iter()
            .filter_map(|k| self.lookup_id(k))
            .filter(|&id| self.entry(id).is_some_and(|e| e.dirty && e.has_values))
            .map(|id| id.0)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        if !ids.is_empty() {
            self.flush_entries(ds, &ids)?;
        }
        if info.early_allocation {
            self.extent_allocate(ds, &g)?;
        }
        self.make_room(0)
    }

    /// Step 1: the resident chunks of `ds`. Adds every chunk it dealt with to `handled`.
    fn extent_resident(
        &mut self,
        ds: DatasetId,
        g: &Geometry,
        handled: &mut HashSet<ChunkCoord>,
        reencode: &mut Vec<ChunkKey>,
    ) -> Result<()> {
        let st = self.state(ds)?;
        let layout = Arc::clone(&st.layout);
        let erase = st.has(Capabilities::ERASE_VALUES);
        let edge_differ = st.info.edge_chunks_differ;
        let members: Vec<u32> = st.members.iter().copied().collect();
        for idx in members {
            let id = EntryId(idx);
            let Some(e) = self.entry(id) else { continue };
            let coord = e.coord.get();
            let key = e.key();
            if g.outside(&coord, &g.new) {
                handled.insert(coord);
                if let Some(mut e) = self.remove(id)
                    && let Some(loc) = e.location
                {
                    layout
                        .delete_chunk(&coord, Some(loc), &mut e.udata)
                        .map_err(layout_err(ds, Some(&coord), "delete_chunk"))?;
                }
                continue;
            }
            let left = g.left_runs(&coord)?;
            let pb_new = g.pb_new(&coord);
            let edge_changed =
                edge_differ && e.location.is_some() && e.partial_bound_on_disk != pb_new;
            if !e.has_values && (!left.is_empty() || edge_changed) {
                // A defined-only form cannot be filled or re-encoded: it is clean, drop it and
                // let the non-resident passes load the whole chunk.
                self.remove(id);
                continue;
            }
            handled.insert(coord);
            if edge_differ && e.image.as_ref().is_some_and(|(_, pb)| *pb != pb_new) {
                self.invalidate_image(id);
            }
            if !left.is_empty() {
                self.invalidate_image(id);
                let Some(st) = self.datasets.get(&ds) else {
                    return Err(ChunkCacheError::UnknownDataset(ds));
                };
                let Some(e) = self.entries.get_mut(idx as usize).and_then(Option::as_mut) else {
                    continue;
                };
                if erase {
                    let er = st
                        .layout
                        .erase_values(&mut e.chunk, &left)
                        .map_err(layout_err(ds, Some(&coord), "erase_values"))?;
                    check_usage(ds, "erase_values", er.usage)?;
                    if er.empty {
                        if let Some(mut e) = self.remove(id)
                            && let Some(loc) = e.location
                        {
                            layout
                                .delete_chunk(&coord, Some(loc), &mut e.udata)
                                .map_err(layout_err(ds, Some(&coord), "delete_chunk"))?;
                        }
                        continue;
                    }
                    e.dirty |= er.changed;
                } else {
                    Self::fill_chunk(st, ds, &coord, &mut e.chunk, &left)?;
                    e.dirty = true;
                }
            }
            if edge_changed {
                if let Some(e) = self.entry_mut(id) {
                    e.dirty = true;
                }
                reencode.push(key);
            }
            self.reaccount(id);
        }
        Ok(())
    }

    /// Step 2: the non-resident chunks that held elements now outside the extent.
    fn extent_shrunk(
        &mut self,
        ds: DatasetId,
        g: &Geometry,
        handled: &HashSet<ChunkCoord>,
        reencode: &mut Vec<ChunkKey>,
    ) -> Result<()> {
        // Chunks with an element inside the old extent and outside the new one: in the box of
        // chunks intersecting the old extent, outside the box of chunks whose old elements all
        // stay inside.
        let outer = g.counts(&g.old);
        let inner: Vec<u64> = (0..g.dims.len())
            .map(|j| {
                if g.new[j] >= g.old[j] {
                    outer[j]
                } else {
                    g.new[j] / g.dims[j]
                }
            })
            .collect();
        let mut gone: Vec<ChunkCoord> = Vec::new();
        let mut partly: Vec<ChunkCoord> = Vec::new();
        for c in BoxDiff::new(outer, inner) {
            let key = ChunkKey {
                dataset: ds,
                coord: c,
            };
            if handled.contains(&c) || self.lookup_id(&key).is_some() {
                continue;
            }
            if g.outside(&c, &g.new) {
                gone.push(c);
                if gone.len() >= BATCH {
                    self.delete_existing(ds, &gone)?;
                    gone.clear();
                }
            } else {
                partly.push(c);
            }
        }
        if !gone.is_empty() {
            self.delete_existing(ds, &gone)?;
        }
        if partly.is_empty() {
            return Ok(());
        }
        let st = self.state(ds)?;
        let direct = !st.has(Capabilities::ERASE_VALUES)
            && (st.has(Capabilities::SELECTION_WRITE) || st.has(Capabilities::VECTOR_WRITE));
        let load = if direct {
            self.fill_direct(ds, g, &partly)?
        } else {
            partly
        };
        self.load_and_update(ds, g, &load, reencode)
    }

    /// Looks up `coords` (one batch) and deletes the ones that exist.
    fn delete_existing(&mut self, ds: DatasetId, coords: &[ChunkCoord]) -> Result<()> {
        let layout = Arc::clone(&self.state(ds)?.layout);
        let found = lookup_checked(&*layout, ds, coords)?;
        for (c, r) in coords.iter().zip(found) {
            let (Some(loc), mut udata) = r else { continue };
            layout
                .delete_chunk(c, Some(loc), &mut udata)
                .map_err(layout_err(ds, Some(c), "delete_chunk"))?;
        }
        Ok(())
    }

    /// Writes fill values straight to the file for the elements that left the extent in the
    /// existing chunks of `coords`, using the layout's direct-write planner (SCC-097). Returns
    /// the chunks that must go through the cache instead: the planner cannot do them, or their
    /// edge state changes (their image must be re-encoded).
    fn fill_direct(
        &mut self,
        ds: DatasetId,
        g: &Geometry,
        coords: &[ChunkCoord],
    ) -> Result<Vec<ChunkCoord>> {
        let st = self.state(ds)?;
        let layout = Arc::clone(&st.layout);
        let sel = st.has(Capabilities::SELECTION_WRITE);
        let vec = st.has(Capabilities::VECTOR_WRITE);
        let edge_differ = st.info.edge_chunks_differ;
        let elem = st.info.elem_size;
        let fill = st.fill_value();
        let mut fallback = Vec::new();
        for group in coords.chunks(BATCH) {
            let found = lookup_checked(&*layout, ds, group)?;
            // (file offset, phase in the fill pattern, length) of every segment to write.
            let mut segs: Vec<(u64, usize, usize)> = Vec::new();
            for (c, r) in group.iter().zip(found) {
                let (Some(loc), mut udata) = r else { continue };
                let pb = g.pb_old(c);
                if edge_differ && pb != g.pb_new(c) {
                    fallback.push(*c);
                    continue;
                }
                let runs = g.left_runs(c)?;
                if runs.is_empty() {
                    continue;
                }
                let total: u64 = runs.iter().map(|r| r.len).sum();
                let mut plan = DirectPlan::NotPossible;
                if sel {
                    plan = layout
                        .plan_selection_write(c, None, loc, &runs, pb, &mut udata)
                        .map_err(layout_err(ds, Some(c), "plan_selection_write"))?;
                }
                if vec && !matches!(plan, DirectPlan::Selection(_)) {
                    plan = layout
                        .plan_vector_write(c, None, loc, &runs, pb, &mut udata)
                        .map_err(layout_err(ds, Some(c), "plan_vector_write"))?;
                }
                match plan {
                    DirectPlan::Selection(planned) => {
                        let planned = planned.unwrap_or(runs);
                        for r in planned.iter().filter(|r| r.len > 0) {
                            if r.buf_offset.saturating_add(r.len) > total {
                                return Err(ChunkCacheError::InvalidLayoutSizes {
                                    dataset: ds,
                                    callback: "plan_selection_write",
                                    expected: to_usize(total)?,
                                    got: to_usize(r.buf_offset.saturating_add(r.len))?,
                                });
                            }
                            let off = r
                                .chunk_offset
                                .checked_mul(elem as u64)
                                .and_then(|o| o.checked_add(loc.addr))
                                .ok_or(SelectionError::Overflow)?;
                            let len = to_usize(r.len)?
                                .checked_mul(elem)
                                .ok_or(SelectionError::Overflow)?;
                            segs.push((off, 0, len));
                        }
                    }
                    DirectPlan::Segments(planned) => {
                        let want = to_usize(total)?
                            .checked_mul(elem)
                            .ok_or(SelectionError::Overflow)?;
                        let got: usize = planned.iter().map(|s| s.len).sum();
                        if got != want {
                            return Err(ChunkCacheError::InvalidLayoutSizes {
                                dataset: ds,
                                callback: "plan_vector_write",
                                expected: want,
                                got,
                            });
                        }
                        // The segments' bytes, concatenated, are the fill elements in order.
                        let mut at = 0usize;
                        for s in planned.iter().filter(|s| s.len > 0) {
                            segs.push((s.offset, at % elem, s.len));
                            at += s.len;
                        }
                    }
                    DirectPlan::NotPossible | DirectPlan::NeedsDefinedValues => {
                        fallback.push(*c);
                    }
                }
            }
            if segs.is_empty() {
                continue;
            }
            let longest = segs.iter().map(|&(_, p, l)| p + l).max().unwrap_or(0);
            let pattern: Vec<u8> = fill.iter().copied().cycle().take(longest).collect();
            let writes: Vec<WriteSegment<'_>> = segs
                .iter()
                .filter_map(|&(off, p, l)| Some(WriteSegment::new(off, pattern.get(p..p + l)?)))
                .collect();
            let bytes: u64 = writes.iter().map(|w| w.data.len() as u64).sum();
            let storage = Arc::clone(&self.state(ds)?.storage);
            storage.write_vectored(&writes)?;
            self.stats.bytes_written += bytes;
        }
        Ok(fallback)
    }

    /// Loads the existing chunks of `coords` through the cache (decoding them with the edge
    /// state of the old extent), erases or fills their elements that left the extent and admits
    /// them, dirty when they changed or their edge state did (those are added to `reencode`).
    /// Chunks are processed in groups that fit in the limit, each handled once.
    fn load_and_update(
        &mut self,
        ds: DatasetId,
        g: &Geometry,
        coords: &[ChunkCoord],
        reencode: &mut Vec<ChunkKey>,
    ) -> Result<()> {
        if coords.is_empty() {
            return Ok(());
        }
        let st = self.state(ds)?;
        let layout = Arc::clone(&st.layout);
        let erase = st.has(Capabilities::ERASE_VALUES);
        let edge_differ = st.info.edge_chunks_differ;
        let per_group = (self.budget.limit() / st.chunk_bytes.max(1)).clamp(1, BATCH);
        for group in coords.chunks(per_group) {
            let want: Vec<(ChunkKey, LoadKind)> = group
                .iter()
                .map(|&coord| (ChunkKey { dataset: ds, coord }, LoadKind::Values))
                .collect();
            let res = self.load_as(&want, Some((ds, &g.old)))?;
            for mut l in res.loaded {
                let coord = l.key.coord;
                let left = g.left_runs(&coord)?;
                let mut dirty = false;
                if !left.is_empty() {
                    let st = self.state(ds)?;
                    if erase {
                        let er = layout
                            .erase_values(&mut l.chunk, &left)
                            .map_err(layout_err(ds, Some(&coord), "erase_values"))?;
                        check_usage(ds, "erase_values", er.usage)?;
                        if er.empty {
                            layout
                                .delete_chunk(&coord, l.location, &mut l.udata)
                                .map_err(layout_err(ds, Some(&coord), "delete_chunk"))?;
                            continue;
                        }
                        dirty = er.changed;
                    } else {
                        Self::fill_chunk(st, ds, &coord, &mut l.chunk, &left)?;
                        dirty = true;
                    }
                }
                let edge_changed = edge_differ && l.partial_bound_on_disk != g.pb_new(&coord);
                let key = l.key;
                let id = self.admit(l, false)?;
                if dirty || edge_changed {
                    if let Some(e) = self.entry_mut(id) {
                        e.dirty = true;
                    }
                    self.reaccount(id);
                }
                if edge_changed {
                    reencode.push(key);
                }
            }
        }
        Ok(())
    }

    /// Step 3: non-resident chunks that were edge chunks and are now interior (edge chunks
    /// encoded differently): loaded with their old edge state, to be re-encoded.
    fn extent_edges(
        &mut self,
        ds: DatasetId,
        g: &Geometry,
        handled: &HashSet<ChunkCoord>,
        reencode: &mut Vec<ChunkKey>,
    ) -> Result<()> {
        let rank = g.dims.len();
        // Intersecting the old extent and wholly inside the new one...
        let outer: Vec<u64> = (0..rank)
            .map(|j| g.old[j].div_ceil(g.dims[j]).min(g.new[j] / g.dims[j]))
            .collect();
        // ...but not wholly inside the old one.
        let inner: Vec<u64> = (0..rank).map(|j| g.old[j] / g.dims[j]).collect();
        let mut coords = Vec::new();
        for c in BoxDiff::new(outer, inner) {
            let key = ChunkKey {
                dataset: ds,
                coord: c,
            };
            if handled.contains(&c) || self.lookup_id(&key).is_some() {
                continue;
            }
            coords.push(c);
        }
        self.load_and_update(ds, g, &coords, reencode)
    }

    /// Step 5 (early allocation, SCC-099, SCC-100): allocates every chunk newly inside the extent
    /// that does not exist yet and writes the fill image there: one image shared by all of them
    /// (one per edge state when edge chunks are encoded differently), or a freshly made one per
    /// chunk when the fill value refers to data outside the chunk.
    fn extent_allocate(&mut self, ds: DatasetId, g: &Geometry) -> Result<()> {
        let st = self.state(ds)?;
        let layout = Arc::clone(&st.layout);
        let fresh = st.info.fill_refers_outside;
        let edge_differ = st.info.edge_chunks_differ;
        let outer = g.counts(&g.new);
        let inner = g.counts(&g.old);
        let mut shared: HashMap<bool, Vec<u8>> = HashMap::new();
        let mut all = BoxDiff::new(outer, inner).peekable();
        while all.peek().is_some() {
            let group: Vec<ChunkCoord> = all
                .by_ref()
                .filter(|c| {
                    self.lookup_id(&ChunkKey {
                        dataset: ds,
                        coord: *c,
                    })
                    .is_none()
                })
                .take(BATCH)
                .collect();
            if group.is_empty() {
                break;
            }
            let found = lookup_checked(&*layout, ds, &group)?;
            // (coordinates, udata for insert, index of the image in `images`).
            let mut todo: Vec<(ChunkCoord, Udata, usize)> = Vec::new();
            let mut images: Vec<Vec<u8>> = Vec::new();
            let mut shared_at: HashMap<bool, usize> = HashMap::new();
            for (c, r) in group.iter().zip(found) {
                let (None, udata) = r else { continue };
                let pb = edge_differ && g.pb_new(c);
                if fresh {
                    let (image, udata) = self.fill_image(ds, &*layout, c, pb)?;
                    images.push(image);
                    todo.push((*c, udata, images.len() - 1));
                    continue;
                }
                if let std::collections::hash_map::Entry::Vacant(v) = shared.entry(pb) {
                    let (image, _udata) = self.fill_image(ds, &*layout, c, pb)?;
                    v.insert(image);
                }
                let at = match shared_at.get(&pb) {
                    Some(&i) => i,
                    None => {
                        let image = shared
                            .get(&pb)
                            .cloned()
                            .ok_or_else(|| ChunkCacheError::Internal("fill image vanished"))?;
                        images.push(image);
                        shared_at.insert(pb, images.len() - 1);
                        images.len() - 1
                    }
                };
                todo.push((*c, udata, at));
            }
            if todo.is_empty() {
                continue;
            }
            let locs = {
                let mut reqs: Vec<InsertRequest<'_>> = todo
                    .iter_mut()
                    .map(|(coord, udata, at)| InsertRequest {
                        coord,
                        old: None,
                        new_size: images.get(*at).map_or(0, |v| v.len() as u64),
                        udata,
                    })
                    .collect();
                layout
                    .insert(&mut reqs)
                    .map_err(layout_err(ds, None, "insert"))?
            };
            if locs.len() != todo.len() {
                return Err(ChunkCacheError::InvalidLayoutSizes {
                    dataset: ds,
                    callback: "insert",
                    expected: todo.len(),
                    got: locs.len(),
                });
            }
            let writes: Vec<WriteSegment<'_>> = todo
                .iter()
                .zip(&locs)
                .filter_map(|((_, _, at), loc)| {
                    Some(WriteSegment::new(loc.addr, images.get(*at)?.as_slice()))
                })
                .collect();
            let bytes: u64 = writes.iter().map(|w| w.data.len() as u64).sum();
            let storage = Arc::clone(&self.state(ds)?.storage);
            storage.write_vectored(&writes)?;
            self.stats.bytes_written += bytes;
        }
        Ok(())
    }

    /// A new chunk filled with the fill value, encoded in place with edge state `pb`; returns
    /// the image and the chunk's udata.
    fn fill_image(
        &mut self,
        ds: DatasetId,
        layout: &dyn ChunkLayout,
        coord: &ChunkCoord,
        pb: bool,
    ) -> Result<(Vec<u8>, Udata)> {
        let mut l = self.new_chunk(
            ChunkKey {
                dataset: ds,
                coord: *coord,
            },
            true,
        )?;
        let image = layout
            .encode_in_place(coord, l.chunk, pb, &mut l.udata)
            .map_err(layout_err(ds, Some(coord), "encode_in_place"))?;
        Ok((image, l.udata))
    }
}

/// One batched lookup, checked for its length; returns location and udata per coordinate.
fn lookup_checked(
    layout: &dyn ChunkLayout,
    ds: DatasetId,
    coords: &[ChunkCoord],
) -> Result<Vec<(Option<crate::layout::DiskLocation>, Udata)>> {
    let found = layout
        .lookup(coords)
        .map_err(layout_err(ds, None, "lookup"))?;
    if found.len() != coords.len() {
        return Err(ChunkCacheError::InvalidLayoutSizes {
            dataset: ds,
            callback: "lookup",
            expected: coords.len(),
            got: found.len(),
        });
    }
    Ok(found.into_iter().map(|r| (r.location, r.udata)).collect())
}
