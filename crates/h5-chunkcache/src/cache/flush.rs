//! Flushing (SCC-020, SCC-021, SCC-085) and pre-encoding ahead of eviction (SCC-078).
//!
//! A flush encodes every dirty chunk of a dataset in parallel (reusing a pre-encoded image when
//! there is one), makes one `insert` call per dataset and one vectored write for everything.

use std::sync::Arc;
use std::time::{Duration, Instant};

use h5_io::WriteSegment;

use super::{ChunkCache, Entry, layout_err, partial_bound};
use crate::error::{ChunkCacheError, Result};
use crate::layout::DiskLocation;
use crate::layout::{Chunk, Encoded, InsertRequest, LayoutError, Udata};
use crate::policy::EntryId;
use crate::{ChunkCoord, DatasetId};

/// The bytes [`ChunkCache::flush_and_evict_all`] writes at least before it removes what it
/// wrote: 4 MiB, as a whole-chunk write's batch ([`crate::WHOLE_WRITE_BATCH`]). A close of
/// many datasets writes a few such batches instead of one vectored write.
pub const CLOSE_BATCH_BYTES: u64 = 4 << 20;

/// One encode of a flush or pre-encode batch: the entry, then the result.
struct EncodeJob<'a> {
    id: u32,
    entry: &'a mut Entry,
    partial_bound: bool,
    result: Option<(std::result::Result<Encoded, LayoutError>, Duration)>,
}

/// One chunk's image ready to be written.
struct Image {
    id: u32,
    /// `None`: write the dense cache form itself.
    bytes: Option<Vec<u8>>,
    len: u64,
    partial_bound: bool,
}

impl ChunkCache {
    /// Writes every dirty chunk of every dataset: one `insert` call per dataset and one vectored
    /// write in all. Entries stay resident and become clean; a flush is not a use (OQ-22). On an
    /// error the chunks not written stay dirty.
    pub fn flush(&mut self) -> Result<()> {
        let mut ds: Vec<DatasetId> = self.datasets.keys().copied().collect();
        ds.sort_unstable();
        self.flush_sets(&ds)
    }

    /// Writes every dirty chunk and removes every entry, for a file's close: datasets in the
    /// order [`ChunkCache::flush`] takes them (so the layouts see the same insert calls and
    /// place the chunks where a flush would), written a batch of at least
    /// [`CLOSE_BATCH_BYTES`] at a time, each batch's entries removed once written. The memory
    /// of a written batch then serves what the next batch's inserts build (chunk indexes
    /// created at close, for one), instead of all the chunks and all those structures being
    /// held at once. On an error the chunks not written stay resident and dirty.
    pub fn flush_and_evict_all(&mut self) -> Result<()> {
        let mut ds: Vec<DatasetId> = self.datasets.keys().copied().collect();
        ds.sort_unstable();
        self.flush_in_batches(&ds, CLOSE_BATCH_BYTES, true)
    }

    /// Replaces `ids` with the dirty entries of `ds`, ascending.
    fn dirty_members_into(&self, ds: DatasetId, ids: &mut Vec<u32>) -> Result<()> {
        let st = self.state(ds)?;
        ids.clear();
        ids.extend(
            st.members
                .iter()
                .copied()
                .filter(|&i| self.entry(EntryId(i)).is_some_and(|e| e.dirty)),
        );
        Ok(())
    }

    /// Removes every entry of `ds` (written or clean: the caller has flushed them).
    fn remove_members(&mut self, ds: DatasetId) {
        let ids: Vec<u32> = self
            .datasets
            .get(&ds)
            .map(|s| s.members.iter().copied().collect())
            .unwrap_or_default();
        for id in ids {
            self.remove(EntryId(id));
        }
    }

    /// Writes one dataset's dirty chunks, then, if `evict`, removes all its entries (dataset
    /// close uses the evicting form). Touches only that dataset's entries (SCC-013).
    pub fn flush_dataset(&mut self, ds: DatasetId, evict: bool) -> Result<()> {
        self.state(ds)?;
        self.flush_in_batches(&[ds], u64::MAX, evict)
    }

    /// Flushes the given entries of one dataset only (used by direct chunk read and bypass).
    pub(super) fn flush_entries(&mut self, ds: DatasetId, ids: &[u32]) -> Result<()> {
        let plan = self.encode_and_insert(ds, ids)?;
        self.write_plan(plan)
    }

    fn flush_sets(&mut self, sets: &[DatasetId]) -> Result<()> {
        self.flush_in_batches(sets, u64::MAX, false)
    }

    /// Encodes and inserts the dirty chunks of `sets`, one dataset after another, and writes
    /// them once at least `batch_bytes` are planned (and after the last dataset); if `evict`,
    /// each written batch's datasets lose all their entries. `u64::MAX`: one write in all.
    fn flush_in_batches(
        &mut self,
        sets: &[DatasetId],
        batch_bytes: u64,
        evict: bool,
    ) -> Result<()> {
        let mut plan: Vec<(Image, DiskLocation)> = Vec::new();
        let mut planned = 0u64;
        let mut batch_from = 0usize;
        // One list of dirty ids for all the datasets (a flush of many datasets allocates it
        // once).
        let mut ids: Vec<u32> = Vec::new();
        for (i, &ds) in sets.iter().enumerate() {
            self.dirty_members_into(ds, &mut ids)?;
            if !ids.is_empty() {
                let part = self.encode_and_insert(ds, &ids)?;
                planned += part.iter().map(|(im, _)| im.len).sum::<u64>();
                plan.extend(part);
            }
            if planned >= batch_bytes || i + 1 == sets.len() {
                self.write_plan(std::mem::take(&mut plan))?;
                planned = 0;
                if evict {
                    for &done in sets.get(batch_from..=i).unwrap_or_default() {
                        self.remove_members(done);
                    }
                }
                batch_from = i + 1;
            }
        }
        Ok(())
    }

    /// Encodes the dirty entries `ids` (ascending) of `ds` in parallel and inserts them in one
    /// call; returns what to write where.
    fn encode_and_insert(
        &mut self,
        ds: DatasetId,
        ids: &[u32],
    ) -> Result<Vec<(Image, DiskLocation)>> {
        let st = self.state(ds)?;
        let layout = Arc::clone(&st.layout);
        let dims = st.info.chunk_dims.clone();
        let raw = st.raw_images();
        let extent = layout.extent();
        let mut images: Vec<Image> = Vec::with_capacity(ids.len());
        let mut jobs: Vec<EncodeJob<'_>> = Vec::with_capacity(ids.len());
        // `ids` ascend: each is found by splitting the rest of the slab at it, so the walk costs
        // the number of ids, not the slab's size (a flush of many one-chunk datasets would
        // otherwise scan the slab once per dataset).
        let mut rest = self.entries.as_mut_slice();
        let mut base = 0usize;
        for &next in ids {
            let Some(skip) = (next as usize).checked_sub(base) else {
                continue;
            };
            let Some((slot, tail)) = std::mem::take(&mut rest)
                .get_mut(skip..)
                .and_then(|s| s.split_first_mut())
            else {
                break;
            };
            rest = tail;
            base = next as usize + 1;
            let Some(e) = slot.as_mut() else { continue };
            if !e.dirty {
                continue;
            }
            if let Some((img, pb)) = e.image.take() {
                // Pre-encoded (SCC-078): write that image, no encode.
                images.push(Image {
                    id: next,
                    len: img.len() as u64,
                    bytes: Some(img),
                    partial_bound: pb,
                });
                continue;
            }
            let pb = partial_bound(&dims, &e.coord.get(), &extent);
            if raw && let Chunk::Dense(v) = &e.chunk {
                // The cache form is the image (SCC-006): no encode.
                images.push(Image {
                    id: next,
                    bytes: None,
                    len: v.len() as u64,
                    partial_bound: pb,
                });
                continue;
            }
            jobs.push(EncodeJob {
                id: next,
                entry: e,
                partial_bound: pb,
                result: None,
            });
        }
        self.codec.for_each(&mut jobs, |j| {
            let e = &mut *j.entry;
            let t = Instant::now();
            let r = layout.encode(&e.coord.get(), &e.chunk, j.partial_bound, &mut e.udata);
            j.result = Some((r, t.elapsed()));
        });
        let mut first_err = None;
        for j in jobs {
            let Some((r, took)) = j.result else {
                return Err(ChunkCacheError::Internal("an encode did not run"));
            };
            self.stats.encode_time += took;
            let enc = match r {
                Ok(enc) => enc,
                Err(err) => {
                    first_err.get_or_insert_with(|| {
                        layout_err(ds, Some(&j.entry.coord.get()), "encode")(err)
                    });
                    continue;
                }
            };
            let (bytes, len) = match enc {
                Encoded::SameAsCache => match &j.entry.chunk {
                    Chunk::Dense(v) => (None, v.len()),
                    Chunk::Custom(_) => {
                        first_err.get_or_insert(ChunkCacheError::InvalidLayoutSizes {
                            dataset: ds,
                            callback: "encode",
                            expected: 0,
                            got: 0,
                        });
                        continue;
                    }
                },
                Encoded::Owned(v) => {
                    let n = v.len();
                    (Some(v), n)
                }
            };
            images.push(Image {
                id: j.id,
                bytes,
                len: len as u64,
                partial_bound: j.partial_bound,
            });
        }
        // Images taken from entries changed their footprint.
        for im in &images {
            self.reaccount(EntryId(im.id));
        }
        if let Some(err) = first_err {
            return Err(err);
        }
        images.sort_by_key(|im| im.id);
        // Take the udata out to lend them all to one insert call, with each entry's coordinates
        // expanded once from their compact form.
        let mut taken: Vec<(u32, ChunkCoord, Option<DiskLocation>, Udata)> = images
            .iter()
            .filter_map(|im| {
                let e = self.entries.get_mut(im.id as usize)?.as_mut()?;
                let u = std::mem::replace(&mut e.udata, Box::new(()));
                Some((im.id, e.coord.get(), e.location, u))
            })
            .collect();
        self.index_changes += 1;
        let locs = {
            let mut reqs: Vec<InsertRequest<'_>> = taken
                .iter_mut()
                .zip(&images)
                .map(|((_, coord, old, u), im)| InsertRequest {
                    coord: &*coord,
                    old: *old,
                    new_size: im.len,
                    udata: u,
                })
                .collect();
            layout.insert(&mut reqs)
        };
        for (i, _, _, u) in taken {
            if let Some(e) = self.entries.get_mut(i as usize).and_then(Option::as_mut) {
                e.udata = u;
            }
        }
        let locs = locs.map_err(layout_err(ds, None, "insert"))?;
        if locs.len() != images.len() {
            return Err(ChunkCacheError::InvalidLayoutSizes {
                dataset: ds,
                callback: "insert",
                expected: images.len(),
                got: locs.len(),
            });
        }
        let mut plan = Vec::with_capacity(images.len());
        for (im, loc) in images.into_iter().zip(locs) {
            if let Some(e) = self
                .entries
                .get_mut(im.id as usize)
                .and_then(Option::as_mut)
            {
                // The index now points here; a failed write keeps the entry dirty (EC-24).
                e.location = Some(loc);
                e.partial_bound_on_disk = im.partial_bound;
            }
            plan.push((im, loc));
        }
        Ok(plan)
    }

    /// Writes a plan with one vectored write and marks its entries clean.
    fn write_plan(&mut self, plan: Vec<(Image, DiskLocation)>) -> Result<()> {
        if plan.is_empty() {
            return Ok(());
        }
        // One vectored write per storage (one in all unless files share the cache).
        let mut groups: Vec<(Arc<dyn h5_io::Storage>, Vec<WriteSegment<'_>>)> = Vec::new();
        for (im, loc) in &plan {
            let Some(e) = self.entries.get(im.id as usize).and_then(Option::as_ref) else {
                continue;
            };
            let Some(st) = self.datasets.get(&e.dataset) else {
                continue;
            };
            let data = match &im.bytes {
                Some(v) => v.as_slice(),
                None => match e.chunk.as_dense() {
                    Some(d) => d,
                    None => continue,
                },
            };
            let seg = WriteSegment::new(loc.addr, data);
            match groups.iter_mut().find(|(s, _)| Arc::ptr_eq(s, &st.storage)) {
                Some((_, segs)) => segs.push(seg),
                None => groups.push((Arc::clone(&st.storage), vec![seg])),
            }
        }
        let mut bytes = 0u64;
        for (storage, segs) in &groups {
            storage.write_vectored(segs)?;
            bytes += segs.iter().map(|s| s.data.len() as u64).sum::<u64>();
        }
        drop(groups);
        self.stats.bytes_written += bytes;
        for (im, _) in plan {
            if let Some(e) = self
                .entries
                .get_mut(im.id as usize)
                .and_then(Option::as_mut)
            {
                e.dirty = false;
                let info = e.info();
                self.policy.updated(EntryId(im.id), info);
            }
        }
        Ok(())
    }

    /// Pre-encodes dirty chunks of codec layouts once the footprint passes the high-water mark
    /// (SCC-078, OQ-27): the least recently used dirty chunks without an image, enough of them
    /// (by cache bytes) to cover the excess over the mark, encoded in parallel. The images count
    /// in the footprint; eviction then only writes them (SCC-075).
    pub(super) fn maybe_preencode(&mut self) -> Result<()> {
        let Some(hw) = self.config.preencode_high_water else {
            return Ok(());
        };
        let mark = (self.budget.limit() as f64 * hw) as usize;
        let total = self.budget.total();
        if total <= mark {
            return Ok(());
        }
        let excess = total - mark;
        let mut cands: Vec<(u64, u32)> = self
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| {
                let e = e.as_ref()?;
                let codec = self.datasets.get(&e.dataset)?.info.needs_codec;
                (e.dirty && e.image.is_none() && e.has_values && codec)
                    .then_some((e.stamp, i as u32))
            })
            .collect();
        if cands.is_empty() {
            return Ok(());
        }
        cands.sort_unstable();
        let mut chosen: Vec<u32> = Vec::new();
        let mut covered = 0usize;
        for (_, i) in cands {
            if covered >= excess {
                break;
            }
            covered += self.entries[i as usize].as_ref().map_or(0, |e| e.accounted);
            chosen.push(i);
        }
        chosen.sort_unstable();
        let mut jobs: Vec<(EncodeJob<'_>, Arc<dyn crate::ChunkLayout>)> = Vec::new();
        let mut want = chosen.iter().copied().peekable();
        for (i, slot) in self.entries.iter_mut().enumerate() {
            let Some(&next) = want.peek() else { break };
            if i as u32 != next {
                continue;
            }
            want.next();
            let Some(e) = slot.as_mut() else { continue };
            let Some(st) = self.datasets.get(&e.dataset) else {
                continue;
            };
            let pb = st.partial_bound(&e.coord.get(), &st.layout.extent());
            let layout = Arc::clone(&st.layout);
            jobs.push((
                EncodeJob {
                    id: next,
                    entry: e,
                    partial_bound: pb,
                    result: None,
                },
                layout,
            ));
        }
        self.codec.for_each(&mut jobs, |(j, layout)| {
            let e = &mut *j.entry;
            let t = Instant::now();
            let r = layout.encode(&e.coord.get(), &e.chunk, j.partial_bound, &mut e.udata);
            j.result = Some((r, t.elapsed()));
        });
        let mut done = Vec::new();
        let mut first_err = None;
        for (j, _) in jobs {
            let Some((r, took)) = j.result else { continue };
            self.stats.encode_time += took;
            match r {
                Ok(Encoded::Owned(img)) => {
                    j.entry.image = Some((img, j.partial_bound));
                    done.push(j.id);
                }
                // No separate image: nothing to prepare.
                Ok(Encoded::SameAsCache) => {}
                Err(err) => {
                    first_err.get_or_insert_with(|| {
                        layout_err(j.entry.dataset, Some(&j.entry.coord.get()), "encode")(err)
                    });
                }
            }
        }
        self.stats.preencoded += done.len() as u64;
        for id in done {
            self.reaccount(EntryId(id));
        }
        if let Some(err) = first_err {
            return Err(err);
        }
        self.make_room(0)
    }
}
