//! Whole-chunk writes straight to storage (spec §2.8, SCC-067, SCC-069, SCC-072, OQ-31).
//!
//! A write piece that covers every element of its chunk inside the extent, of a layout whose
//! chunks are dense (the same shape at the edges, no defined-element tracking, no variable-length
//! data in the chunk), needs neither the chunk's old values nor a fill: the cache gathers it
//! from the caller's buffer into a batch buffer (or, when the disk image is the dense cache form
//! (no codec, SCC-006) and the piece is one run in the caller's buffer that needs no
//! conversion, takes the caller's bytes as they are), encodes it when the layout has a codec
//! (the batch's chunks in parallel, on the cache's codec threads, as a flush does), asks the
//! layout's `insert` for its place (allocating it now, the index entry changed as at flush)
//! and writes it, without admitting it. Nothing is zero-filled first and the cache's memory
//! does not grow: a call holds at most one batch ([`WHOLE_WRITE_BATCH`] bytes of values, plus
//! their images when encoded, or one chunk when a chunk is larger) besides its pieces. For a
//! filtered dataset written a whole chunk at a time (deflate, shuffle) this keeps the dirty
//! chunks out of the cache altogether: without it each chunk was admitted, held dirty until
//! eviction and encoded then.
//!
//! Which pieces qualify (decided by the write flow): the chunk is at least
//! [`DIRECT_WHOLE_MIN`](super::DIRECT_WHOLE_MIN) bytes (smaller chunks stay cached: many small
//! datasets are then written together at flush, and a re-read costs no I/O), the request's
//! bypass mode is
//! [`Bypass::Auto`](super::Bypass::Auto) (`Never` keeps every chunk in the cache, `Always` asks
//! for the bypass flows of SCC-069 as they are specified), whole-chunk writes are on
//! ([`ChunkCache::set_whole_chunk_writes`]), the dataset's chunks live in the cache's own
//! storage, no conversion needs a background, the chunk has no dirty resident copy (a dirty one
//! is updated in the cache, OQ-31), no other piece of the same call touches the chunk (request
//! order, EC-29), and the chunk fits one batch or the piece needs no gathering.
//!
//! Invariants: a clean resident copy (values or defined-only form) is dropped before the bytes
//! reach storage, so no later read can see the old values (SCC-072); elements of an edge chunk
//! outside the extent are written as the fill value, as the cached path does (OQ-34); a failure
//! to gather or convert leaves the index untouched (nothing is inserted before every piece of
//! the batch is ready). Adjacent chunks of a batch placed next to each other in the file are
//! written by one storage call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use h5_io::WriteSegment;

use super::write::WritePiece;
use super::{ChunkCache, WriteRequest, layout_err, to_usize};
use crate::ChunkKey;
use crate::error::{ChunkCacheError, Result};
use crate::layout::{
    Chunk, ChunkLayout, Conversion, DiskLocation, InsertRequest, LayoutError, Lookup, Udata,
};
use crate::selection::{ChunkPiece, CopyRun, outside_extent_runs};

/// Bytes of whole chunks gathered before they are written together: the memory a whole-chunk
/// write holds besides the caller's buffer (one chunk when a chunk is larger).
pub const WHOLE_WRITE_BATCH: usize = 4 << 20;

/// Where one piece's image comes from.
enum Source {
    /// Bytes `start..start + len` of the caller's buffer of request `req`.
    Caller { req: usize, start: usize },
    /// Bytes `start..start + chunk_bytes` of the batch buffer.
    Batch { start: usize },
    /// The image of the batch's encoded chunk `job`.
    Encoded { job: usize },
}

/// One chunk of a batch that the layout encodes: its values, then its image.
struct EncodeJob {
    key: ChunkKey,
    layout: Arc<dyn ChunkLayout>,
    /// The dense values, consumed by the encode.
    chunk: Option<Chunk>,
    partial_bound: bool,
    /// The chunk's udata from its lookup (the encode may change it: a filter mask), handed on
    /// to `insert`.
    udata: Udata,
    result: Option<(std::result::Result<Vec<u8>, LayoutError>, Duration)>,
}

impl ChunkCache {
    /// Turns whole-chunk writes on or off (default on). Off, a piece covering a chunk goes
    /// through the cache as any other (the VFD SWMR writer turns them off so that raw data
    /// reaches the file only at the end of a tick, with the index that points at it).
    pub fn set_whole_chunk_writes(&mut self, on: bool) {
        self.whole_chunk_writes = on;
    }

    /// Whether covering pieces of `ds` may be written as whole chunks (the dataset's part of
    /// the conditions in the module documentation).
    pub(super) fn writes_whole(&self, ds: crate::DatasetId) -> Result<bool> {
        let st = self.state(ds)?;
        Ok(self.whole_chunk_writes
            && st.chunk_bytes >= super::DIRECT_WHOLE_MIN
            && st.dense_chunks()
            && !st.has(crate::Capabilities::GATHER)
            && Arc::ptr_eq(&st.storage, &self.storage))
    }

    /// Whether a covering piece of `ds` can be written whole within one batch: its chunk fits
    /// one, or the piece is the caller's bytes as they are.
    pub(super) fn whole_fits(
        &self,
        ds: crate::DatasetId,
        p: &ChunkPiece,
        conv: Option<&dyn Conversion>,
        extent: &[u64],
    ) -> Result<bool> {
        let st = self.state(ds)?;
        Ok(st.chunk_bytes <= WHOLE_WRITE_BATCH || self.straight(ds, p, conv, extent)?.is_some())
    }

    /// The element offset in the caller's buffer when `p` is the whole chunk as one run of the
    /// caller's buffer, unconverted, the chunk lies inside the extent and its disk image is
    /// those bytes (no codec).
    fn straight(
        &self,
        ds: crate::DatasetId,
        p: &ChunkPiece,
        conv: Option<&dyn Conversion>,
        extent: &[u64],
    ) -> Result<Option<u64>> {
        let st = self.state(ds)?;
        let elems = (st.chunk_bytes / st.info.elem_size.max(1)) as u64;
        Ok(match p.runs.as_slice() {
            [
                CopyRun {
                    chunk_offset: 0,
                    buf_offset,
                    len,
                },
            ] if conv.is_none()
                && st.raw_images()
                && *len == elems
                && !st.partial_bound(&p.coord, extent) =>
            {
                Some(*buf_offset)
            }
            _ => None,
        })
    }

    /// Writes covering pieces as whole chunks, in batches (see the module documentation).
    pub(super) fn write_whole(
        &mut self,
        reqs: &[WriteRequest<'_>],
        pieces: &[WritePiece],
    ) -> Result<()> {
        let mut batch_buf: Vec<u8> = Vec::new();
        let mut start = 0;
        while start < pieces.len() {
            let mut end = start;
            let mut bytes = 0usize;
            while end < pieces.len() {
                let w = &pieces[end];
                let r = &reqs[w.req];
                let extent = self.state(r.dataset)?.layout.extent();
                let need = match self.straight(r.dataset, &w.piece, r.conversion, &extent)? {
                    Some(_) => 0,
                    None => self.state(r.dataset)?.chunk_bytes,
                };
                if end > start && bytes.saturating_add(need) > WHOLE_WRITE_BATCH {
                    break;
                }
                bytes = bytes.saturating_add(need);
                end += 1;
            }
            self.write_whole_batch(reqs, &pieces[start..end], bytes, &mut batch_buf)?;
            start = end;
        }
        Ok(())
    }

    /// One batch: drop clean copies, look up, gather, insert, write.
    fn write_whole_batch(
        &mut self,
        reqs: &[WriteRequest<'_>],
        batch: &[WritePiece],
        bytes: usize,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        let keys: Vec<ChunkKey> = batch
            .iter()
            .map(|w| ChunkKey {
                dataset: reqs[w.req].dataset,
                coord: w.piece.coord,
            })
            .collect();
        // The old values must not outlive the write (SCC-072); a dirty copy never gets here.
        for key in &keys {
            if let Some(id) = self.lookup_id(key) {
                self.remove(id);
            }
        }
        let mut found = self.lookup_keys(&keys)?;
        // Room for the batch; only the raw chunks' part is zeroed and used (an encoded chunk is
        // gathered into its own buffer, which its encode consumes).
        buf.reserve(bytes.saturating_sub(buf.len()));
        let mut sources = Vec::with_capacity(batch.len());
        let mut jobs: Vec<EncodeJob> = Vec::new();
        let mut at = 0usize;
        for (w, key) in batch.iter().zip(&keys) {
            let r = &reqs[w.req];
            let st = self.state(key.dataset)?;
            let extent = st.layout.extent();
            if let Some(b) = self.straight(key.dataset, &w.piece, r.conversion, &extent)? {
                let start = to_usize(b)?
                    .checked_mul(st.info.elem_size)
                    .ok_or_else(|| ChunkCacheError::Internal("a chunk's bytes overflow"))?;
                sources.push(Source::Caller { req: w.req, start });
                continue;
            }
            let coded = !st.raw_images();
            let mut values = if coded {
                vec![0u8; st.chunk_bytes]
            } else {
                Vec::new()
            };
            let slot = if coded {
                values.as_mut_slice()
            } else {
                if buf.len() < at + st.chunk_bytes {
                    buf.resize(at + st.chunk_bytes, 0);
                }
                buf.get_mut(at..at + st.chunk_bytes)
                    .ok_or_else(|| ChunkCacheError::Internal("a whole chunk outgrew its batch"))?
            };
            let partial_bound = st.partial_bound(&key.coord, &extent);
            if partial_bound {
                let outside = outside_extent_runs(&key.coord, &extent, &st.info.chunk_dims)?;
                crate::selection::fill_runs(slot, &outside, &st.fill_value())?;
            }
            match r.conversion {
                None => crate::selection::gather(r.buf, slot, &w.piece.runs, st.info.elem_size)?,
                Some(c) => crate::selection::gather_converted(r.buf, slot, &w.piece.runs, c)
                    .map_err(layout_err(key.dataset, Some(&key.coord), "conversion"))?,
            }
            if coded {
                let udata = found
                    .get_mut(key)
                    .map(|l| std::mem::replace(&mut l.udata, Box::new(())))
                    .ok_or_else(|| ChunkCacheError::Internal("a whole chunk was not looked up"))?;
                sources.push(Source::Encoded { job: jobs.len() });
                jobs.push(EncodeJob {
                    key: *key,
                    layout: Arc::clone(&st.layout),
                    chunk: Some(Chunk::Dense(values)),
                    partial_bound,
                    udata,
                    result: None,
                });
                continue;
            }
            sources.push(Source::Batch { start: at });
            at += st.chunk_bytes;
        }
        let images = self.encode_whole(&mut jobs, &mut found)?;
        let sizes: Vec<u64> = sources
            .iter()
            .zip(&keys)
            .map(|(src, key)| match *src {
                Source::Encoded { job } => Ok(images[job].len() as u64),
                _ => Ok(self.state(key.dataset)?.chunk_bytes as u64),
            })
            .collect::<Result<_>>()?;
        let locations = self.insert_whole(&keys, &mut found, &sizes)?;
        // Segments in batch order; neighbours in both the file and the batch buffer merge.
        let mut segs: Vec<(u64, &[u8])> = Vec::with_capacity(batch.len());
        let mut merged: Option<(u64, usize, usize)> = None; // file address, batch start, len
        let mut total = 0u64;
        for ((src, len), loc) in sources.iter().zip(&sizes).zip(&locations) {
            let len = to_usize(*len)?;
            total += len as u64;
            match *src {
                Source::Encoded { job } => segs.push((loc.addr, &images[job])),
                Source::Caller { req, start } => {
                    let data = reqs[req].buf.get(start..start + len).ok_or_else(|| {
                        ChunkCacheError::Internal("a whole chunk left the buffer")
                    })?;
                    segs.push((loc.addr, data));
                }
                Source::Batch { start } => {
                    merged = match merged {
                        Some((addr, s, n)) if addr + n as u64 == loc.addr && s + n == start => {
                            Some((addr, s, n + len))
                        }
                        other => {
                            if let Some((addr, s, n)) = other {
                                segs.push((addr, &buf[s..s + n]));
                            }
                            Some((loc.addr, start, len))
                        }
                    };
                }
            }
        }
        if let Some((addr, s, n)) = merged {
            segs.push((addr, &buf[s..s + n]));
        }
        let segs: Vec<WriteSegment<'_>> = segs
            .into_iter()
            .map(|(a, d)| WriteSegment::new(a, d))
            .collect();
        self.storage.write_vectored(&segs)?;
        self.stats.bytes_written += total;
        self.stats.bypassed += batch.len() as u64;
        self.stats.bypassed_bytes += total;
        self.stats.whole_chunk_writes += batch.len() as u64;
        Ok(())
    }

    /// Encodes the batch's coded chunks, in parallel on the codec threads, and hands each
    /// chunk's udata back to its lookup; returns the images in job order. The first failure is
    /// returned before anything is inserted, so the index stays as it was.
    fn encode_whole(
        &mut self,
        jobs: &mut [EncodeJob],
        found: &mut std::collections::HashMap<ChunkKey, Lookup>,
    ) -> Result<Vec<Vec<u8>>> {
        self.codec.for_each(jobs, |j| {
            let t = Instant::now();
            let r = match j.chunk.take() {
                Some(c) => j
                    .layout
                    .encode_in_place(&j.key.coord, c, j.partial_bound, &mut j.udata),
                None => Err("a whole chunk was encoded twice".into()),
            };
            j.result = Some((r, t.elapsed()));
        });
        let mut images = Vec::with_capacity(jobs.len());
        for j in jobs.iter_mut() {
            let (r, took) = j
                .result
                .take()
                .ok_or_else(|| ChunkCacheError::Internal("an encode did not run"))?;
            self.stats.encode_time += took;
            images.push(r.map_err(layout_err(j.key.dataset, Some(&j.key.coord), "encode"))?);
            let l = found
                .get_mut(&j.key)
                .ok_or_else(|| ChunkCacheError::Internal("a whole chunk was not looked up"))?;
            l.udata = std::mem::replace(&mut j.udata, Box::new(()));
        }
        Ok(images)
    }

    /// Allocates and indexes the batch's chunks, of `sizes` bytes on disk: one `insert` call
    /// per dataset, each chunk handed its old location (reused when it fits, SCC-063). Returns
    /// the locations in the order of `keys`.
    fn insert_whole(
        &mut self,
        keys: &[ChunkKey],
        found: &mut std::collections::HashMap<ChunkKey, Lookup>,
        sizes: &[u64],
    ) -> Result<Vec<DiskLocation>> {
        let mut out: Vec<Option<DiskLocation>> = vec![None; keys.len()];
        let mut datasets: Vec<crate::DatasetId> = keys.iter().map(|k| k.dataset).collect();
        datasets.sort_unstable();
        datasets.dedup();
        for ds in datasets {
            let layout = Arc::clone(&self.state(ds)?.layout);
            let mut mine: Vec<(usize, ChunkKey, Lookup)> = Vec::new();
            for (i, k) in keys.iter().enumerate().filter(|(_, k)| k.dataset == ds) {
                let l = found
                    .remove(k)
                    .ok_or_else(|| ChunkCacheError::Internal("a whole chunk was not looked up"))?;
                mine.push((i, *k, l));
            }
            self.index_changes += 1;
            let locs = {
                let mut reqs: Vec<InsertRequest<'_>> = mine
                    .iter_mut()
                    .map(|(i, k, l)| InsertRequest {
                        coord: &k.coord,
                        old: l.location,
                        new_size: sizes[*i],
                        udata: &mut l.udata,
                    })
                    .collect();
                layout
                    .insert(&mut reqs)
                    .map_err(layout_err(ds, None, "insert"))?
            };
            if locs.len() != mine.len() {
                return Err(ChunkCacheError::InvalidLayoutSizes {
                    dataset: ds,
                    callback: "insert",
                    expected: mine.len(),
                    got: locs.len(),
                });
            }
            for ((i, _, _), loc) in mine.iter().zip(locs) {
                out[*i] = Some(loc);
            }
        }
        out.into_iter()
            .map(|l| l.ok_or_else(|| ChunkCacheError::Internal("a whole chunk was not placed")))
            .collect()
    }
}
