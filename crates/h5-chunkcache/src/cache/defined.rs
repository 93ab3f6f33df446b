//! Defined elements and erase (spec §2.12, OQ-13 .. OQ-15, OQ-37).
//!
//! `get_defined` answers which selected elements are defined: for layouts that do not track
//! defined elements every element inside the extent is (OQ-37) and no callback runs; for tracking
//! layouts resident entries answer (the cache is authoritative, unflushed changes included) and
//! other chunks are loaded in their defined-only form (one batched lookup, one vectored read of
//! the defined sections, `decode_defined`) and admitted without values. Chunks that do not exist
//! add nothing.
//!
//! `erase` makes elements undefined: each touched chunk that is resident or on disk is loaded with
//! its values, `erase_values` runs on its chunk-local runs, and the chunk becomes dirty, or is
//! removed and deleted from the file when nothing stays defined. Erasing elements that are not
//! defined changes nothing.

use std::sync::Arc;

use super::{ChunkCache, LoadKind, check_usage, layout_err};
use crate::error::{ChunkCacheError, Result};
use crate::layout::{Chunk, ChunkLayout};
use crate::policy::EntryId;
use crate::selection::{ChunkPiece, CopyRun, Points, Selection, decompose};
use crate::{ChunkCoord, ChunkKey, DatasetId};

impl ChunkCache {
    /// The elements of `sel` that are defined in `ds`, in the order of `sel` (selection order:
    /// row-major for hyperslabs and [`Selection::All`], list order for points, duplicates of a
    /// defined point kept). `sel` is not changed.
    ///
    /// For a layout that does not track defined elements the answer is `sel` itself (cloned):
    /// every element inside the extent is defined, and nothing is read. For a tracking layout the
    /// answer is always a [`Selection::Points`] (empty when nothing is defined), except for a
    /// rank-0 (scalar) dataset, which answers [`Selection::All`] or [`Selection::None`].
    ///
    /// Errors: unknown dataset, a layout that does not use the cache, a selection that does not
    /// fit the extent (nothing changes), and layout or storage failures.
    pub fn get_defined(&mut self, ds: DatasetId, sel: &Selection) -> Result<Selection> {
        let st = self.state(ds)?;
        if !st.info.uses_cache {
            return Err(ChunkCacheError::DefinedNotSupported {
                dataset: ds,
                reason: "the layout does not use the cache",
            });
        }
        let extent = st.layout.extent();
        sel.validate(&extent)?;
        if !st.info.tracks_defined {
            return Ok(sel.clone());
        }
        let layout = Arc::clone(&st.layout);
        let dims = st.info.chunk_dims.clone();
        let total = sel.num_elements(&extent)?;
        let pieces = decompose(sel, &extent, &dims)?;
        let mut found: Vec<(ChunkCoord, Vec<CopyRun>)> = Vec::new();
        let mut want: Vec<(ChunkKey, LoadKind)> = Vec::new();
        let mut pending: Vec<&ChunkPiece> = Vec::new();
        for p in &pieces {
            let key = ChunkKey {
                dataset: ds,
                coord: p.coord,
            };
            match self.lookup_id(&key).and_then(|id| self.entry(id)) {
                Some(e) => {
                    let runs = defined_runs(&*layout, ds, &p.coord, &e.chunk, &p.runs, total)?;
                    found.push((p.coord, runs));
                }
                None => {
                    want.push((key, LoadKind::Defined));
                    pending.push(p);
                }
            }
        }
        if !want.is_empty() {
            let res = self.load(&want)?;
            for (key, _) in &res.all_defined {
                if let Some(p) = pending.iter().find(|p| p.coord == key.coord) {
                    found.push((p.coord, p.runs.clone()));
                }
            }
            for l in res.loaded {
                let Some(p) = pending.iter().find(|p| p.coord == l.key.coord) else {
                    continue;
                };
                let runs = defined_runs(&*layout, ds, &p.coord, &l.chunk, &p.runs, total)?;
                found.push((p.coord, runs));
                if l.chunk.mem_usage().allocated <= self.budget.limit() {
                    self.admit(l, false)?;
                }
            }
        }
        points_in_order(&extent, &dims, &found)
    }

    /// Makes the elements of `sel` undefined in `ds`.
    ///
    /// The layout must track defined elements ([`LayoutInfo::tracks_defined`]), otherwise the
    /// call fails with [`ChunkCacheError::DefinedNotSupported`] and changes nothing; a selection
    /// outside the extent also fails before any change. For each touched chunk: a chunk neither
    /// resident nor on disk is skipped; a resident chunk none of whose selected elements is
    /// defined is left alone (not dirtied); any other is loaded with its values (a defined-only
    /// entry is upgraded), and `erase_values` runs on its chunk-local runs. A chunk that changed
    /// becomes dirty (its pre-encoded image dropped); a chunk with nothing defined left is removed
    /// from the cache and, if it was ever written, deleted from the file with `delete_chunk` (it
    /// is never written).
    ///
    /// [`LayoutInfo::tracks_defined`]: crate::layout::LayoutInfo::tracks_defined
    pub fn erase(&mut self, ds: DatasetId, sel: &Selection) -> Result<()> {
        let st = self.state(ds)?;
        if !st.info.uses_cache {
            return Err(ChunkCacheError::DefinedNotSupported {
                dataset: ds,
                reason: "the layout does not use the cache",
            });
        }
        if !st.info.tracks_defined {
            return Err(ChunkCacheError::DefinedNotSupported {
                dataset: ds,
                reason: "the layout does not track defined elements",
            });
        }
        let extent = st.layout.extent();
        let layout = Arc::clone(&st.layout);
        let total = sel.num_elements(&extent)?;
        let pieces = decompose(sel, &extent, &st.info.chunk_dims)?;
        let mut want: Vec<(ChunkKey, LoadKind)> = Vec::new();
        let mut todo: Vec<ChunkPiece> = Vec::new();
        let mut busy: Vec<EntryId> = Vec::new();
        for p in pieces {
            let key = ChunkKey {
                dataset: ds,
                coord: p.coord,
            };
            match self.lookup_id(&key) {
                Some(id) => {
                    let Some(e) = self.entry(id) else {
                        return Err(ChunkCacheError::Internal("resident entry vanished"));
                    };
                    let def = defined_runs(&*layout, ds, &p.coord, &e.chunk, &p.runs, total)?;
                    if def.is_empty() {
                        continue; // nothing defined to erase: no change (EC-19)
                    }
                    if e.has_values {
                        self.policy.set_busy(id, true);
                        busy.push(id);
                    } else {
                        want.push((key, LoadKind::Values));
                    }
                    todo.push(p);
                }
                None => {
                    want.push((key, LoadKind::Values));
                    todo.push(p);
                }
            }
        }
        let mut result = Ok(());
        if !want.is_empty() {
            match self.load(&want) {
                Ok(res) => {
                    for l in res.loaded {
                        match self.admit(l, true) {
                            Ok(id) => busy.push(id),
                            Err(e) => {
                                result = Err(e);
                                break;
                            }
                        }
                    }
                }
                Err(e) => result = Err(e),
            }
        }
        if result.is_ok() {
            for p in &todo {
                let key = ChunkKey {
                    dataset: ds,
                    coord: p.coord,
                };
                // Not resident now: the chunk does not exist (skipped).
                let Some(id) = self.lookup_id(&key) else {
                    continue;
                };
                if let Err(e) = self.erase_in(id, &*layout, ds, &p.runs) {
                    result = Err(e);
                    break;
                }
            }
        }
        for id in busy {
            if self.entry(id).is_some() {
                self.policy.set_busy(id, false);
            }
        }
        result?;
        self.make_room(0)
    }

    /// Erases `runs` of the resident entry `id` (which holds values) and applies the outcome.
    fn erase_in(
        &mut self,
        id: EntryId,
        layout: &dyn ChunkLayout,
        ds: DatasetId,
        runs: &[CopyRun],
    ) -> Result<()> {
        // The entry straight from `entries`, so that `index_changes` can be counted while it is
        // borrowed.
        let Some(e) = self.entries.get_mut(id.0 as usize).and_then(Option::as_mut) else {
            return Err(ChunkCacheError::Internal(
                "a chunk being erased left the cache",
            ));
        };
        if !e.has_values {
            return Err(ChunkCacheError::Internal("erase on a defined-only entry"));
        }
        let coord = e.coord.get();
        let erased = layout.erase_values(&mut e.chunk, runs).map_err(layout_err(
            ds,
            Some(&coord),
            "erase_values",
        ));
        let erased = match erased {
            Ok(x) => x,
            Err(err) => {
                // The chunk may have changed partly: keep it as the authoritative version.
                e.dirty = true;
                self.invalidate_image(id);
                self.reaccount(id);
                return Err(err);
            }
        };
        if !erased.changed {
            self.reaccount(id);
            return check_usage(ds, "erase_values", erased.usage).map(|_| ());
        }
        e.dirty = true;
        if erased.empty {
            if let Some(loc) = e.location {
                // The chunk leaves the index (see `ChunkCache::index_changes`).
                self.index_changes += 1;
                if let Err(err) = layout.delete_chunk(&coord, Some(loc), &mut e.udata) {
                    // The erase stands (dirty); the chunk stays resident so nothing is lost.
                    self.invalidate_image(id);
                    self.reaccount(id);
                    return Err(layout_err(ds, Some(&coord), "delete_chunk")(err));
                }
            }
            self.remove(id);
            return Ok(());
        }
        self.invalidate_image(id);
        self.reaccount(id);
        check_usage(ds, "erase_values", erased.usage)?;
        Ok(())
    }
}

/// The defined part of `runs` of `chunk` from the layout, checked: every returned run must lie
/// inside one of the input runs (the layout answers a subset).
fn defined_runs(
    layout: &dyn ChunkLayout,
    ds: DatasetId,
    coord: &ChunkCoord,
    chunk: &Chunk,
    runs: &[CopyRun],
    total: u64,
) -> Result<Vec<CopyRun>> {
    let out = layout.defined_values(chunk, runs).map_err(layout_err(
        ds,
        Some(coord),
        "defined_values",
    ))?;
    let inside = |d: &CopyRun| {
        runs.iter().any(|r| {
            d.chunk_offset >= r.chunk_offset
                && d.chunk_offset.checked_add(d.len) <= r.chunk_offset.checked_add(r.len)
                && d.buf_offset.checked_sub(r.buf_offset) == Some(d.chunk_offset - r.chunk_offset)
                && d.buf_offset.checked_add(d.len).is_some_and(|e| e <= total)
        })
    };
    if !out.iter().all(inside) {
        return Err(ChunkCacheError::InvalidLayoutSizes {
            dataset: ds,
            callback: "defined_values",
            expected: runs.len(),
            got: out.len(),
        });
    }
    Ok(out)
}

/// The dataset coordinates of the elements of `found`, ordered by buffer position (the caller's
/// selection order), as a point selection.
fn points_in_order(
    extent: &[u64],
    dims: &[u64],
    found: &[(ChunkCoord, Vec<CopyRun>)],
) -> Result<Selection> {
    let rank = extent.len();
    let n: u64 = found
        .iter()
        .flat_map(|(_, runs)| runs)
        .fold(0u64, |a, r| a.saturating_add(r.len));
    if rank == 0 {
        return Ok(if n > 0 {
            Selection::All
        } else {
            Selection::None
        });
    }
    let n = usize::try_from(n).map_err(|_| crate::selection::SelectionError::Overflow)?;
    let mut order: Vec<(u64, usize)> = Vec::with_capacity(n);
    let mut flat: Vec<u64> = Vec::with_capacity(n.saturating_mul(rank));
    for (coord, runs) in found {
        let base: Vec<u64> = coord
            .as_slice()
            .iter()
            .zip(dims)
            .map(|(c, d)| c.saturating_mul(*d))
            .collect();
        for r in runs {
            for i in 0..r.len {
                let local = super::delinearize(r.chunk_offset + i, dims);
                order.push((r.buf_offset + i, order.len()));
                flat.extend(base.iter().zip(&local).map(|(b, l)| b + l));
            }
        }
    }
    order.sort_unstable();
    let mut sorted = Vec::with_capacity(flat.len());
    for (_, i) in order {
        sorted.extend_from_slice(&flat[i * rank..(i + 1) * rank]);
    }
    Ok(Selection::Points(Points::new(rank, sorted)?))
}
