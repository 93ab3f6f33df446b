//! The write flow (spec §2.7): resident chunks are updated in place; a chunk the write covers
//! completely is created without fill (its old location looked up so that insert can reuse it,
//! SCC-063); any other chunk is read and decoded (SCC-064), or created with fill when it does not
//! exist (SCC-065). Loads of one call are batched (SCC-066), and a call is processed in batches
//! of chunks that fit the limit together. Written chunks become dirty; nothing
//! is written to storage until flush or eviction (SCC-062).

use std::collections::{HashMap, HashSet};

use super::{Bypass, ChunkCache, IoReport, LoadKind, Loaded, WriteRequest};
use crate::error::{ChunkCacheError, Result};
use crate::policy::EntryId;
use crate::selection::{ChunkPiece, CopyRun, Selection, outside_extent_runs};
use crate::{ChunkCoord, ChunkKey};

/// One piece of a write: request index, piece, whether it covers the chunk.
pub(super) struct WritePiece {
    pub(super) req: usize,
    pub(super) piece: ChunkPiece,
    pub(super) covers: bool,
}

impl ChunkCache {
    /// Writes every request, in order (a dataset named twice: the later request wins, EC-29).
    /// Skip-I/O requests are ignored and requests of layouts that do not use the cache are listed
    /// in the report (SCC-019).
    pub fn write(&mut self, reqs: &[WriteRequest<'_>]) -> Result<IoReport> {
        if let [r] = reqs
            && !r.skip_io
            && let Some(slabs) = self.row_slabs(
                r.dataset,
                r.selection,
                r.memory.is_some(),
                r.buf.len(),
                r.conversion.map(|c| c.src_size()),
            )?
        {
            // One request for a whole large dataset: a few rows of chunks at a time, so that the
            // pieces (a copy run per row of each chunk) never exist for the whole dataset at once.
            let mut report = IoReport::default();
            for (sel, bytes) in &slabs {
                let buf = r
                    .buf
                    .get(bytes.clone())
                    .ok_or_else(|| ChunkCacheError::Internal("a slab left the caller's buffer"))?;
                let sub = WriteRequest {
                    selection: sel,
                    buf,
                    ..*r
                };
                let rep = self.write_call(&[sub])?;
                super::read::merge_modes(&mut report, &rep);
            }
            return Ok(report);
        }
        self.write_call(reqs)
    }

    /// [`write`](Self::write) of the requests as given.
    fn write_call(&mut self, reqs: &[WriteRequest<'_>]) -> Result<IoReport> {
        if let [r] = reqs {
            if self.write_resident_run(r)? {
                return Ok(IoReport::default());
            }
            if let Some(report) = self.write_single_bypassed(r)? {
                self.maybe_preencode()?;
                return Ok(report);
            }
        }
        let mut report = IoReport::default();
        let mut all: Vec<WritePiece> = Vec::new();
        let mut bypass: Vec<WritePiece> = Vec::new();
        let mut whole: Vec<WritePiece> = Vec::new();
        // The entry of each piece of `all` when it holds the chunk's values.
        let mut resident_ids: Vec<Option<EntryId>> = Vec::new();
        for (i, r) in reqs.iter().enumerate() {
            if r.skip_io {
                continue;
            }
            if !self.state(r.dataset)?.info.uses_cache {
                report.not_cached.push(i);
                continue;
            }
            let pieces = self.pieces(
                r.dataset,
                r.selection,
                r.buf.len(),
                r.memory,
                r.conversion,
                true,
            )?;
            let skip = self.bypasses(r.dataset, r.bypass)?;
            let writes_whole = r.bypass == Bypass::Auto && self.writes_whole(r.dataset)?;
            let st = self.state(r.dataset)?;
            let extent = st.extent(r.dataset)?;
            // A conversion that keeps parts of the destination (a background, SCC-105) needs the
            // chunk's current values even when the write covers every element.
            let background = r.conversion.is_some_and(|c| c.needs_background());
            all.reserve(pieces.len());
            resident_ids.reserve(pieces.len());
            for p in pieces {
                let covers = !background && p.covers_chunk(&extent, &st.info.chunk_dims);
                let key = ChunkKey {
                    dataset: r.dataset,
                    coord: p.coord,
                };
                let id = self.lookup_id(&key);
                let entry = id.and_then(|id| self.entry(id));
                let resident = entry.is_some_and(|e| e.has_values);
                let dirty = entry.is_some_and(|e| e.dirty);
                let wp = WritePiece {
                    req: i,
                    piece: p,
                    covers,
                };
                if writes_whole
                    && covers
                    && !dirty
                    && self.whole_fits(r.dataset, &wp.piece, r.conversion, &extent)?
                {
                    whole.push(wp);
                } else if skip && !resident {
                    bypass.push(wp);
                } else {
                    all.push(wp);
                    resident_ids.push(id.filter(|_| resident));
                }
            }
        }
        if whole.is_empty() && bypass.is_empty() {
            // Every chunk already resident (an append into the last chunk, a rewrite of cached
            // data): written where it is, in request order; nothing is admitted, so no entry
            // moves or leaves between the pieces.
            if resident_ids.iter().all(Option::is_some) {
                for (w, id) in all.iter().zip(resident_ids.iter().flatten()) {
                    self.gather_into(*id, &w.piece, &reqs[w.req])?;
                }
                self.make_room(0)?;
                self.maybe_preencode()?;
                return Ok(report);
            }
        }
        if reqs.len() > 1 && !whole.is_empty() {
            // A chunk that several pieces of the call touch is written in request order
            // through the other flows (EC-29).
            let mut seen: HashMap<ChunkKey, usize> = HashMap::new();
            for w in all.iter().chain(&bypass).chain(&whole) {
                let key = ChunkKey {
                    dataset: reqs[w.req].dataset,
                    coord: w.piece.coord,
                };
                *seen.entry(key).or_default() += 1;
            }
            let (alone, shared): (Vec<WritePiece>, Vec<WritePiece>) =
                whole.into_iter().partition(|w| {
                    let key = ChunkKey {
                        dataset: reqs[w.req].dataset,
                        coord: w.piece.coord,
                    };
                    seen.get(&key) == Some(&1)
                });
            whole = alone;
            all.extend(shared);
            all.sort_by_key(|w| w.req);
        }
        if !whole.is_empty() {
            self.write_whole(reqs, &whole)?;
        }
        // In batches whose chunks fit the limit together (as reads load, SCC-092): each batch
        // ends by making room, which writes the dirty chunks of earlier batches out, so a write
        // larger than the cache holds about one limit's worth of chunks, not all it touches.
        let mut start = 0;
        while start < all.len() {
            let mut keys: HashSet<ChunkKey> = HashSet::new();
            let mut bytes = 0usize;
            let mut end = start;
            while end < all.len() {
                let key = ChunkKey {
                    dataset: reqs[all[end].req].dataset,
                    coord: all[end].piece.coord,
                };
                let b = if keys.contains(&key) {
                    0
                } else {
                    self.state(key.dataset)?.chunk_bytes
                };
                if end > start && bytes.saturating_add(b) > self.budget.limit() {
                    break;
                }
                keys.insert(key);
                bytes = bytes.saturating_add(b);
                end += 1;
            }
            self.write_cached(reqs, &all[start..end])?;
            start = end;
        }
        if !bypass.is_empty() {
            self.write_bypassed(reqs, &bypass, &mut report)?;
        }
        self.maybe_preencode()?;
        Ok(report)
    }

    /// The steady append (a run of consecutive elements of a one-dimensional dataset):
    /// gathered straight into the entries, with no decomposition built. A chunk it touches that
    /// is not in the cache (an append starting a chunk) is brought in as the general flow brings
    /// it ([`bring_in`](Self::bring_in): looked up, then read, or made filled or not as the
    /// write covers it). `false` (nothing done) for any other request, which takes the general
    /// flow: other ranks or selections, memory selections, conversions, a run past the extent or
    /// of another length than the buffer (the general flow reports the error), a resident chunk
    /// without its values, a clean resident chunk the run covers whole (it may be written whole,
    /// around the cache), or chunks not in the cache that the general flow would write around
    /// it or in several batches.
    fn write_resident_run(&mut self, r: &WriteRequest<'_>) -> Result<bool> {
        /// Chunks one run may touch on this path (an append into the last chunk and the next).
        const MAX_CHUNKS: usize = 4;
        let Selection::Hyperslab(h) = r.selection else {
            return Ok(false);
        };
        if r.skip_io || r.memory.is_some() || r.conversion.is_some() {
            return Ok(false);
        }
        let ([start], [stride], [count], [block]) =
            (&h.start[..], &h.stride[..], &h.count[..], &h.block[..])
        else {
            return Ok(false);
        };
        // One block, or blocks that follow each other: the elements [start, end).
        let Some(len) = count.checked_mul(*block) else {
            return Ok(false);
        };
        if len == 0 || (*count > 1 && stride != block) {
            return Ok(false);
        }
        let st = self.state(r.dataset)?;
        let extent = st.extent(r.dataset)?;
        let (&[cdim], &[ext]) = (&st.info.chunk_dims[..], &*extent) else {
            return Ok(false);
        };
        let start = *start;
        let Some(end) = start.checked_add(len) else {
            return Ok(false);
        };
        let elem = st.info.elem_size as u64;
        if !st.info.uses_cache
            || cdim == 0
            || end > ext
            || len.checked_mul(elem) != Some(r.buf.len() as u64)
        {
            return Ok(false);
        }
        let hint = st.last_run_entry;
        let (first, last) = (start / cdim, (end - 1) / cdim);
        if last - first >= MAX_CHUNKS as u64 {
            return Ok(false);
        }
        let none = CopyRun {
            chunk_offset: 0,
            buf_offset: 0,
            len: 0,
        };
        // Per chunk: its resident entry (`None`: not in the cache), the run, whether the run
        // covers every element of it inside the extent.
        let mut found = [(None, none, false); MAX_CHUNKS];
        let mut absent = 0usize;
        for (slot, c) in found.iter_mut().zip(first..=last) {
            let lo = start.max(c * cdim);
            let hi = end.min((c + 1).saturating_mul(cdim));
            // Elements of this chunk inside the extent: all written means a whole chunk.
            let inside = ext.min((c + 1).saturating_mul(cdim)) - c * cdim;
            let covers = hi - lo == inside;
            let run = CopyRun {
                chunk_offset: lo - c * cdim,
                buf_offset: lo - start,
                len: hi - lo,
            };
            let hinted = hint.filter(|&id| {
                self.entry(id)
                    .is_some_and(|e| e.dataset == r.dataset && e.coord.as_slice() == [c])
            });
            let id = match hinted {
                Some(id) => Some(id),
                None => {
                    let Some(coord) = ChunkCoord::new(&[c]) else {
                        return Ok(false);
                    };
                    self.lookup_id(&ChunkKey {
                        dataset: r.dataset,
                        coord,
                    })
                }
            };
            match id.and_then(|id| self.entry(id)) {
                Some(e) if !e.has_values || (covers && !e.dirty) => return Ok(false),
                Some(_) => *slot = (id, run, covers),
                None => {
                    absent += 1;
                    *slot = (None, run, covers);
                }
            }
        }
        let slots = &found[..=(last - first) as usize];
        let mut ended = None;
        if absent == 0 {
            ended = self.gather_slots(r, first, slots)?;
        } else {
            // New chunks (an append past the last chunk): brought in as the general flow does,
            // unless it would write them around the cache or in several batches.
            let bytes = self
                .state(r.dataset)?
                .chunk_bytes
                .saturating_mul(slots.len());
            let covers_absent = slots.iter().any(|(id, _, covers)| id.is_none() && *covers);
            if self.bypasses(r.dataset, r.bypass)?
                || (covers_absent && r.bypass == Bypass::Auto && self.writes_whole(r.dataset)?)
                || bytes > self.budget.limit()
            {
                return Ok(false);
            }
            let mut want = Vec::with_capacity(absent);
            let mut busy = Vec::with_capacity(slots.len() - absent);
            for (&(id, _, covers), c) in slots.iter().zip(first..) {
                match id {
                    Some(id) => busy.push(id),
                    None => {
                        let coord = ChunkCoord::new(&[c])
                            .ok_or_else(|| ChunkCacheError::Internal("rank 1"))?;
                        let kind = if covers {
                            LoadKind::Locate
                        } else {
                            LoadKind::Values
                        };
                        want.push((
                            ChunkKey {
                                dataset: r.dataset,
                                coord,
                            },
                            kind,
                        ));
                    }
                }
            }
            // At most four keys: a scan is the set.
            let new = self.bring_in(&want, |key| {
                want.iter()
                    .any(|(k, kind)| k == key && *kind == LoadKind::Locate)
            })?;
            self.admit_and_gather(new, &busy, |cache, _| {
                ended = cache.gather_slots(r, first, slots)?;
                Ok(())
            })?;
        }
        if let Some(st) = self.datasets.get_mut(&r.dataset) {
            st.last_run_entry = ended;
        }
        self.make_room(0)?;
        self.maybe_preencode()?;
        Ok(true)
    }

    /// Gathers the resident-run `slots` (chunk `first` onwards, their entries or `None` for
    /// one admitted since, found by key) into their chunks in order; returns the last entry.
    fn gather_slots(
        &mut self,
        r: &WriteRequest<'_>,
        first: u64,
        slots: &[(Option<EntryId>, CopyRun, bool)],
    ) -> Result<Option<EntryId>> {
        let mut ended = None;
        for ((id, run, _), c) in slots.iter().zip(first..) {
            let coord = ChunkCoord::new(&[c]).ok_or_else(|| ChunkCacheError::Internal("rank 1"))?;
            let id = match id {
                Some(id) => *id,
                None => self
                    .lookup_id(&ChunkKey {
                        dataset: r.dataset,
                        coord,
                    })
                    .ok_or_else(|| {
                        ChunkCacheError::Internal("a chunk being written left the cache")
                    })?,
            };
            self.gather_runs_into(id, &coord, std::slice::from_ref(run), r)?;
            ended = Some(id);
        }
        Ok(ended)
    }

    /// Writes pieces through the cache.
    pub(super) fn write_cached(
        &mut self,
        reqs: &[WriteRequest<'_>],
        all: &[WritePiece],
    ) -> Result<()> {
        // Chunks to bring in: covered ones are created without fill (their location looked up),
        // others read, or created with fill when absent.
        let mut seen: HashSet<ChunkKey> = HashSet::new();
        let mut covered: HashSet<ChunkKey> = HashSet::new();
        for w in all {
            if w.covers {
                covered.insert(ChunkKey {
                    dataset: reqs[w.req].dataset,
                    coord: w.piece.coord,
                });
            }
        }
        let mut want: Vec<(ChunkKey, LoadKind)> = Vec::new();
        for w in all {
            let key = ChunkKey {
                dataset: reqs[w.req].dataset,
                coord: w.piece.coord,
            };
            let resident = self
                .lookup_id(&key)
                .and_then(|id| self.entry(id))
                .is_some_and(|e| e.has_values);
            if resident || !seen.insert(key) {
                continue;
            }
            let kind = if covered.contains(&key) {
                LoadKind::Locate
            } else {
                LoadKind::Values
            };
            want.push((key, kind));
        }
        let new = if want.is_empty() {
            Vec::new()
        } else {
            self.bring_in(&want, |k| covered.contains(k))?
        };
        // Resident chunks this call writes must not be evicted to make room for the new ones.
        let mut busy = Vec::new();
        for w in all {
            let key = ChunkKey {
                dataset: reqs[w.req].dataset,
                coord: w.piece.coord,
            };
            if let Some(id) = self.lookup_id(&key)
                && self.entry(id).is_some_and(|e| e.has_values)
            {
                busy.push(id);
            }
        }
        self.admit_and_gather(new, &busy, |cache, _| cache.gather_all(reqs, all))?;
        self.make_room(0)
    }

    /// Reads or makes the chunks of `want` a write brings in (none resident): a chunk asked for
    /// with [`LoadKind::Locate`] is one the write covers, made without reading (its old
    /// location kept for insert, SCC-063, EC-35); a missing chunk is made, filled unless the
    /// write covers it inside the extent only (SCC-065, OQ-34).
    ///
    /// The load reports a missing chunk without its kind: `covered` says whether the write
    /// covers it (asked for with [`LoadKind::Locate`]).
    fn bring_in(
        &mut self,
        want: &[(ChunkKey, LoadKind)],
        covered: impl Fn(&ChunkKey) -> bool,
    ) -> Result<Vec<Loaded>> {
        let res = self.load(want)?;
        let mut new = res.loaded;
        for key in res.missing {
            let fill = !covered(&key) || self.covered_within_extent_only(&key)?;
            let l = self.new_chunk(key, fill)?;
            new.push(self.clear_outside(l, fill)?);
        }
        for (key, loc) in res.located {
            // A defined-only entry being fully overwritten keeps its location (EC-35).
            let mut l = self.new_chunk(key, false)?;
            l.location = Some(loc);
            new.push(self.clear_outside(l, false)?);
        }
        Ok(new)
    }

    /// Admits the chunks a write brought in, then runs `gather` (given the admitted entries) with
    /// them and the resident entries `busy` held against eviction. On an error, a chunk admitted
    /// here but never written (a new chunk without fill holds unspecified bytes) is removed, so
    /// that it does not stay behind looking like file contents.
    fn admit_and_gather(
        &mut self,
        new: Vec<Loaded>,
        busy: &[EntryId],
        gather: impl FnOnce(&mut Self, &[EntryId]) -> Result<()>,
    ) -> Result<()> {
        for &id in busy {
            self.policy.set_busy(id, true);
        }
        let mut result = Ok(());
        let mut admitted = Vec::with_capacity(new.len());
        for l in new {
            match self.admit(l, true) {
                Ok(id) => admitted.push(id),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if result.is_ok() {
            result = gather(self, &admitted);
        }
        for &id in busy.iter().chain(&admitted) {
            self.policy.set_busy(id, false);
        }
        if result.is_err() {
            for id in admitted {
                if self.entry(id).is_some_and(|e| !e.dirty) {
                    self.remove(id);
                }
            }
        }
        result
    }

    /// A chunk made without fill for a write covering every element inside the extent still has
    /// elements outside it (an edge chunk): they get the fill value, so that no unspecified
    /// bytes reach the file and growing the dataset later shows fill there (OQ-34).
    /// Whether a new dense chunk the write covers is made filled after all: it crosses the
    /// extent's edge (an append's last chunk), so the write covers only its part inside the
    /// extent and the rest, often most of it, must hold the fill value. Made filled, it is
    /// filled once by the layout (for h5's layouts, by the allocation itself); made unfilled,
    /// the rest would be filled again by [`clear_outside`](Self::clear_outside).
    fn covered_within_extent_only(&self, key: &ChunkKey) -> Result<bool> {
        let st = self.state(key.dataset)?;
        if !st.dense_chunks() {
            return Ok(false);
        }
        let extent = st.extent(key.dataset)?;
        Ok(st.partial_bound(&key.coord, &extent))
    }

    fn clear_outside(&self, mut l: Loaded, filled: bool) -> Result<Loaded> {
        if filled {
            return Ok(l);
        }
        let st = self.state(l.key.dataset)?;
        let extent = st.layout.extent();
        if !st.partial_bound(&l.key.coord, &extent) {
            return Ok(l);
        }
        let runs = outside_extent_runs(&l.key.coord, &extent, &st.info.chunk_dims)?;
        Self::fill_chunk(st, l.key.dataset, &l.key.coord, &mut l.chunk, &runs)?;
        Ok(l)
    }

    fn gather_all(&mut self, reqs: &[WriteRequest<'_>], all: &[WritePiece]) -> Result<()> {
        for w in all {
            let r = &reqs[w.req];
            let key = ChunkKey {
                dataset: r.dataset,
                coord: w.piece.coord,
            };
            let Some(id) = self.lookup_id(&key) else {
                return Err(ChunkCacheError::Internal(
                    "a chunk being written left the cache",
                ));
            };
            self.gather_into(id, &w.piece, r)?;
        }
        Ok(())
    }

    /// Gathers one piece into a resident entry, marking it dirty.
    pub(super) fn gather_into(
        &mut self,
        id: EntryId,
        p: &ChunkPiece,
        r: &WriteRequest<'_>,
    ) -> Result<()> {
        self.gather_runs_into(id, &p.coord, &p.runs, r)
    }

    /// Gathers the `runs` of chunk `coord` into its resident entry, marking it dirty.
    fn gather_runs_into(
        &mut self,
        id: EntryId,
        coord: &ChunkCoord,
        runs: &[CopyRun],
        r: &WriteRequest<'_>,
    ) -> Result<()> {
        self.invalidate_image(id);
        let Some(st) = self.datasets.get(&r.dataset) else {
            return Err(ChunkCacheError::UnknownDataset(r.dataset));
        };
        let Some(e) = self.entries.get_mut(id.0 as usize).and_then(Option::as_mut) else {
            return Err(ChunkCacheError::Internal(
                "a chunk being written left the cache",
            ));
        };
        Self::gather_chunk(
            st,
            r.dataset,
            coord,
            &mut e.chunk,
            runs,
            r.buf,
            r.conversion,
        )?;
        e.dirty = true;
        self.touch(id, runs);
        self.reaccount(id);
        Ok(())
    }
}
