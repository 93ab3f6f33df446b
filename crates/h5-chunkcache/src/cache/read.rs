//! The read flow (spec §2.6): hits are scattered from the cache; misses are looked up per
//! dataset, read with one vectored read, decoded in parallel, admitted and scattered; chunks that
//! do not exist read as the fill value and are not cached (OQ-20). Pieces chosen for bypass go to
//! `bypass`.
//!
//! Hits need only shared access to the cache: [`ChunkCache::read_shared`] scatters them under the
//! shared lock of a [`SharedChunkCache`] (threads reading cached chunks copy in parallel) and
//! records their accesses (replacement policy, coverage, statistics) under the exclusive lock
//! afterwards.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LockResult, Mutex, PoisonError, TryLockError};

use crossbeam_utils::CachePadded;
use crossbeam_utils::sync::{ShardedLock, ShardedLockReadGuard, ShardedLockWriteGuard};

use super::{ChunkCache, IoReport, LoadKind, LoadResult, ReadRequest};
use crate::ChunkKey;
use crate::error::{ChunkCacheError, Result};
use crate::layout::Chunk;
use crate::policy::EntryId;
use crate::selection::{ChunkPiece, CopyRun, Selection};

/// One file's chunk cache shared by its threads: a reader-writer lock, so that reads served
/// from resident chunks run in parallel ([`ChunkCache::read_shared`]) while every change (and
/// every load) takes the cache exclusively.
///
/// The lock is sharded (a reader takes only its thread's shard, a writer takes them all), so
/// readers on different cores do not write to one shared lock word.
///
/// The accesses of hits (replacement policy, coverage, counters) need the cache exclusively;
/// readers leave them in `pending`, one list per thread stripe (a short critical section no
/// other reader usually shares), and whoever takes the cache exclusively next records every
/// stripe's first ([`SharedChunkCache::lock`]); a reader whose stripe holds
/// `PENDING_MAX` (256) of them records them all itself if the cache is free. So a hit never waits
/// for another reader, no hit goes uncounted, and the policy sees every access before its
/// next decision.
#[derive(Debug)]
pub struct SharedChunkCache {
    cache: ShardedLock<ChunkCache>,
    /// Hits served but not yet recorded, by stripe (see the type's documentation).
    pending: [CachePadded<Mutex<Vec<Hit>>>; PENDING_STRIPES],
    /// How many hits the stripes hold (changed only under a stripe's lock), so that an
    /// exclusive access with none pending — every write of a single-threaded writer — skips
    /// locking the stripes.
    pending_hits: AtomicUsize,
}

impl SharedChunkCache {
    /// Shares `cache`.
    pub fn new(cache: ChunkCache) -> Self {
        Self {
            cache: ShardedLock::new(cache),
            pending: std::array::from_fn(|_| CachePadded::new(Mutex::new(Vec::new()))),
            pending_hits: AtomicUsize::new(0),
        }
    }

    /// Exclusive access (writes, flushes, loads, configuration, statistics), after recording
    /// the hits other readers left pending.
    pub fn lock(&self) -> LockResult<ShardedLockWriteGuard<'_, ChunkCache>> {
        match self.cache.write() {
            Ok(mut c) => {
                self.record_pending(&mut c);
                Ok(c)
            }
            Err(e) => Err(e),
        }
    }

    /// Shared access (serving hits; queries that change nothing). Hits left pending are not
    /// counted yet in what it shows.
    pub fn read(&self) -> LockResult<ShardedLockReadGuard<'_, ChunkCache>> {
        self.cache.read()
    }

    /// Records the hits of every stripe (the caller holds the cache exclusively).
    fn record_pending(&self, c: &mut ChunkCache) {
        // A hit whose count is not visible yet was left after this pass began: the next
        // exclusive holder records it, as it would a hit left a moment later.
        if self.pending_hits.load(Ordering::Acquire) == 0 {
            return;
        }
        for stripe in self.pending.iter() {
            let hits = {
                let mut p = stripe.lock().unwrap_or_else(PoisonError::into_inner);
                self.pending_hits.fetch_sub(p.len(), Ordering::AcqRel);
                std::mem::take(&mut *p)
            };
            if !hits.is_empty() {
                c.record_hits(hits, 0);
            }
        }
    }

    /// Leaves `hits` in this thread's stripe for the next exclusive holder; records every
    /// pending hit now when the stripe holds `PENDING_MAX` of them and the cache is free.
    fn record_or_defer(&self, hits: Vec<Hit>) {
        let stripe = &self.pending[stripe_of_thread()];
        let waiting = {
            let mut p = stripe.lock().unwrap_or_else(PoisonError::into_inner);
            self.pending_hits.fetch_add(hits.len(), Ordering::AcqRel);
            p.extend(hits);
            p.len()
        };
        if waiting >= PENDING_MAX {
            match self.cache.try_write() {
                Ok(mut c) => self.record_pending(&mut c),
                // Busy: its holder records them, or a later reader does. Poisoned: the next
                // exclusive access reports it.
                Err(TryLockError::WouldBlock | TryLockError::Poisoned(_)) => {}
            }
        }
    }
}

/// Stripes of pending hits: threads share one only beyond this many.
const PENDING_STRIPES: usize = 8;

/// Hits left pending in one stripe from which a reader records them itself (when the cache is
/// free).
const PENDING_MAX: usize = 256;

/// The next stripe handed to a thread (round robin).
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's stripe of pending hits, chosen at its first hit.
    static STRIPE: Cell<Option<usize>> = const { Cell::new(None) };
}

/// This thread's stripe, below [`PENDING_STRIPES`].
fn stripe_of_thread() -> usize {
    STRIPE.with(|s| {
        s.get().unwrap_or_else(|| {
            let i = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % PENDING_STRIPES;
            s.set(Some(i));
            i
        })
    })
}

/// A piece served from a resident entry under shared access, whose access is recorded later
/// (if the entry is still the same chunk by then).
#[derive(Debug)]
struct Hit {
    id: EntryId,
    key: ChunkKey,
    /// The runs copied, for the entry's coverage; empty when the entry was full (see
    /// [`ChunkCache::touch`]: a full entry stays full).
    runs: Vec<CopyRun>,
}

/// One load of a read: the keys to load and the indices (into the misses) of the pieces they
/// serve.
type Batch = (Vec<(ChunkKey, LoadKind)>, Vec<usize>);

/// What a read has left after serving its hits.
struct ReadPlan {
    report: IoReport,
    /// The hits served, their accesses not yet recorded.
    hits: Vec<Hit>,
    /// Pieces that were not resident (misses and bypassed pieces).
    missed: u64,
    misses: Vec<Miss>,
    /// The loads, each fitting the limit.
    batches: Vec<Batch>,
    bypass: Vec<Miss>,
    /// Whether loaded chunks are admitted: not for a scan, a read whose misses need more than
    /// the limit (see [`SCAN_BATCH_BYTES`]).
    admit: bool,
}

/// The most bytes of chunks one load of a scan holds at once (more when the codec's threads
/// need more chunks to keep busy: one per thread). A scan is a read whose uncached chunks need
/// more than the limit: admitting them would only evict its own earlier chunks and everything
/// else cached, so it loads, uses and drops them in batches of about this size, and the cache
/// keeps what it held (scan resistance; libhdf5 does not cache a chunk larger than its cache).
/// Two batches are in flight (one decoded while the one before it is copied out), each half
/// what one batch was when they went one after the other, so a scan holds what it held then
/// beyond its result (the decoded chunks and their stored images, recycled): about 2 MiB for
/// W2b's whole read, where 8 MiB batches put it 12–16 MiB above.
pub(super) const SCAN_BATCH_BYTES: usize = 1 << 19;

/// A piece of request `req` that was not resident.
pub(super) struct Miss {
    pub(super) req: usize,
    pub(super) piece: ChunkPiece,
}

impl ChunkCache {
    /// Reads every request (SCC-058 .. SCC-061): several datasets in one call, skip-I/O requests
    /// ignored, requests of layouts that do not use the cache listed in the report (SCC-018).
    /// On an error, elements already copied into the buffers may be present (EC-36).
    pub fn read(&mut self, reqs: &mut [ReadRequest<'_>]) -> Result<IoReport> {
        if let [r] = reqs
            && let Some((slabs, scan)) = self.read_slabs(r)?
        {
            let report = read_by_slabs(r, &slabs, |req| self.read_call(req, scan));
            self.spares.clear();
            return report;
        }
        let report = self.read_call(reqs, false);
        self.spares.clear();
        report
    }

    /// The slabs a single request for every element of a large dataset is read in (see
    /// `row_slabs`), and whether they are one scan (the dataset is larger than the limit).
    fn read_slabs(&self, r: &ReadRequest<'_>) -> Result<Option<(Vec<super::Slab>, bool)>> {
        if r.skip_io {
            return Ok(None);
        }
        let slabs = self.row_slabs(
            r.dataset,
            r.selection,
            r.memory.is_some(),
            r.buf.len(),
            r.conversion.map(|c| c.dst_size()),
        )?;
        Ok(slabs.map(|s| (s, r.buf.len() > self.budget.limit())))
    }

    /// [`read`](Self::read) of the requests as given; `scan`: they are part of a scan (see
    /// [`SCAN_BATCH_BYTES`]) whatever their own size.
    fn read_call(&mut self, reqs: &mut [ReadRequest<'_>], scan: bool) -> Result<IoReport> {
        let ReadPlan {
            mut report,
            hits,
            missed,
            misses,
            batches,
            bypass,
            admit,
        } = self.read_start(reqs, scan)?;
        self.record_hits(hits, missed);
        load_batches(&mut Own(self), reqs, &misses, &batches, admit)?;
        if !bypass.is_empty() {
            self.read_bypassed(reqs, &bypass, &mut report)?;
        }
        Ok(report)
    }

    /// [`read`](ChunkCache::read) on a cache shared by threads (one per file): hits are
    /// scattered under the shared lock (readers of cached data copy in parallel); the exclusive
    /// lock is held to record them, look chunks up, admit and scatter, and released while the
    /// missing chunks are read from storage and decoded, so reads from several threads overlap.
    pub fn read_shared(cache: &SharedChunkCache, reqs: &mut [ReadRequest<'_>]) -> Result<IoReport> {
        let poisoned = || ChunkCacheError::Internal("chunk cache lock poisoned");
        if let [r] = reqs {
            let slabs = cache.read().map_err(|_| poisoned())?.read_slabs(r)?;
            if let Some((slabs, scan)) = slabs {
                let report =
                    read_by_slabs(r, &slabs, |req| Self::read_shared_call(cache, req, scan));
                if scan {
                    // The spares are the scan's (another thread's scan loses only their reuse).
                    cache.lock().map_err(|_| poisoned())?.spares.clear();
                }
                return report;
            }
        }
        Self::read_shared_call(cache, reqs, false)
    }

    /// [`read_shared`](Self::read_shared) of the requests as given.
    fn read_shared_call(
        cache: &SharedChunkCache,
        reqs: &mut [ReadRequest<'_>],
        scan: bool,
    ) -> Result<IoReport> {
        let poisoned = || ChunkCacheError::Internal("chunk cache lock poisoned");
        let lock = || cache.lock().map_err(|_| poisoned());
        let ReadPlan {
            mut report,
            hits,
            missed,
            misses,
            batches,
            bypass,
            admit,
        } = cache
            .read()
            .map_err(|_| poisoned())?
            .read_start(reqs, scan)?;
        if missed > 0 {
            lock()?.record_hits(hits, missed);
        } else if !hits.is_empty() {
            cache.record_or_defer(hits);
        }
        load_batches(&mut Locked(cache), reqs, &misses, &batches, admit)?;
        if !bypass.is_empty() {
            lock()?.read_bypassed(reqs, &bypass, &mut report)?;
        }
        if !admit && !scan {
            // A scan of its own (a slab's spares are cleared when the last slab is read).
            lock()?.spares.clear();
        }
        Ok(report)
    }

    /// Records the accesses of hits served under shared access (policy, coverage, counters) and
    /// counts `missed` pieces. A hit whose entry left the cache meanwhile is only counted.
    fn record_hits(&mut self, hits: Vec<Hit>, missed: u64) {
        self.stats.hits += hits.len() as u64;
        self.stats.misses += missed;
        for h in hits {
            if self.lookup_id(&h.key) == Some(h.id) {
                self.touch(h.id, &h.runs);
            }
        }
    }

    /// Serves the hits of a read (needing only shared access: their accesses are returned, to
    /// be recorded with [`record_hits`](Self::record_hits)) and plans the rest: the misses, in
    /// batches whose chunks fit the limit together, and the pieces that bypass the cache.
    fn read_start(&self, reqs: &mut [ReadRequest<'_>], scan: bool) -> Result<ReadPlan> {
        let mut report = IoReport::default();
        let mut hits: Vec<Hit> = Vec::new();
        let mut missed = 0u64;
        let mut misses: Vec<Miss> = Vec::new();
        let mut bypass: Vec<Miss> = Vec::new();
        let mut want: Vec<(ChunkKey, LoadKind)> = Vec::new();
        // The keys in `want` (a linear search per piece made many-chunk reads quadratic).
        let mut wanted: std::collections::HashSet<ChunkKey> = std::collections::HashSet::new();
        for (i, req) in reqs.iter_mut().enumerate() {
            let ds = req.dataset;
            if req.skip_io {
                continue;
            }
            if !self.state(ds)?.info.uses_cache {
                report.not_cached.push(i);
                continue;
            }
            let pieces = self.pieces(
                ds,
                req.selection,
                req.buf.len(),
                req.memory,
                req.conversion,
                false,
            )?;
            let skip = self.bypasses(ds, req.bypass)?;
            // A chunk read whole whose image is its bytes gains nothing from a trip through
            // the cache: under `Auto` it goes straight into the caller's buffer (when the
            // layout can plan that), as libhdf5 does for contiguous data.
            let direct_whole = req.bypass == crate::Bypass::Auto && self.direct_whole_reads(ds)?;
            let (extent, chunk_dims) = if direct_whole {
                let st = self.state(ds)?;
                (st.layout.extent(), st.info.chunk_dims.clone())
            } else {
                (Vec::new(), Vec::new())
            };
            for p in pieces {
                let key = ChunkKey {
                    dataset: ds,
                    coord: p.coord,
                };
                if let Some(id) = self.lookup_id(&key)
                    && let Some(e) = self.entry(id).filter(|e| e.has_values)
                {
                    let full = e.full;
                    self.scatter_entry(id, &p, req)?;
                    // A full entry's coverage is no longer tracked: its runs are freed here,
                    // by the thread that made them.
                    let runs = if full { Vec::new() } else { p.runs };
                    hits.push(Hit { id, key, runs });
                    continue;
                }
                missed += 1;
                if skip || direct_whole && p.covers_chunk(&extent, &chunk_dims) {
                    bypass.push(Miss { req: i, piece: p });
                    continue;
                }
                if wanted.insert(key) {
                    want.push((key, LoadKind::Values));
                }
                misses.push(Miss { req: i, piece: p });
            }
        }
        // Load in batches whose chunks fit the limit together (SCC-092), so a read touching more
        // than fits never holds more than about one limit's worth of chunks in flight; a scan
        // in smaller batches, not admitted.
        let sizes = want
            .iter()
            .map(|(k, _)| Ok(self.state(k.dataset)?.chunk_bytes))
            .collect::<Result<Vec<usize>>>()?;
        let wanted_bytes = sizes.iter().fold(0usize, |a, &b| a.saturating_add(b));
        let scan = scan || wanted_bytes > self.budget.limit();
        let batch_limit = if scan {
            let mut b = SCAN_BATCH_BYTES;
            if let Some((k, _)) = want.first() {
                let per_thread = self.state(k.dataset)?.chunk_bytes;
                b = b.max(per_thread.saturating_mul(self.codec.parallelism()));
            }
            b.min(self.budget.limit())
        } else {
            self.budget.limit()
        };
        let mut batches = Vec::new();
        let mut batch_of: std::collections::HashMap<ChunkKey, usize> =
            std::collections::HashMap::with_capacity(want.len());
        let mut start = 0;
        while start < want.len() {
            let mut bytes = 0usize;
            let mut end = start;
            while end < want.len() {
                let b = sizes[end];
                if end > start && bytes.saturating_add(b) > batch_limit {
                    break;
                }
                bytes = bytes.saturating_add(b);
                end += 1;
            }
            for (k, _) in &want[start..end] {
                batch_of.insert(*k, batches.len());
            }
            batches.push((want[start..end].to_vec(), Vec::new()));
            start = end;
        }
        // Each miss goes to the batch that loads its chunk (in miss order).
        for (i, m) in misses.iter().enumerate() {
            let key = ChunkKey {
                dataset: reqs[m.req].dataset,
                coord: m.piece.coord,
            };
            if let Some(&b) = batch_of.get(&key) {
                batches[b].1.push(i);
            }
        }
        Ok(ReadPlan {
            report,
            hits,
            missed,
            misses,
            batches,
            bypass,
            admit: !scan,
        })
    }

    /// Scatters a piece from a resident entry and records the access.
    fn scatter_resident(
        &mut self,
        id: EntryId,
        p: &ChunkPiece,
        req: &mut ReadRequest<'_>,
    ) -> Result<()> {
        self.scatter_entry(id, p, req)?;
        self.touch(id, &p.runs);
        Ok(())
    }

    /// Scatters a piece from a resident entry (shared access: the access is not recorded).
    fn scatter_entry(&self, id: EntryId, p: &ChunkPiece, req: &mut ReadRequest<'_>) -> Result<()> {
        let st = self.state(req.dataset)?;
        let e = self
            .entry(id)
            .ok_or_else(|| ChunkCacheError::Internal("resident entry vanished"))?;
        Self::scatter_chunk(
            st,
            req.dataset,
            &p.coord,
            &e.chunk,
            &p.runs,
            req.buf,
            req.conversion,
        )
    }

    /// With the loaded chunks: fills pieces of chunks that do not exist, admits the others busy
    /// (so that this call's chunks are not evicted before they are scattered, SCC-084) and
    /// scatters. A chunk larger than the limit is used and dropped without admission (EC-03).
    /// A chunk another reader admitted meanwhile (a shared cache) is used as it is. Without
    /// `admit`, loaded chunks are used and dropped like chunks larger than the limit.
    fn apply_loaded(
        &mut self,
        reqs: &mut [ReadRequest<'_>],
        misses: &[&Miss],
        res: LoadResult,
        admit: bool,
    ) -> Result<()> {
        // A set: `contains` on the list made reads of many absent chunks quadratic.
        let missing: std::collections::HashSet<ChunkKey> = res.missing.iter().copied().collect();
        for m in misses {
            let r = &mut reqs[m.req];
            let key = ChunkKey {
                dataset: r.dataset,
                coord: m.piece.coord,
            };
            if missing.contains(&key) {
                let st = self.state(key.dataset)?;
                Self::fill_buffer(st, key.dataset, &m.piece.runs, r.buf, r.conversion)?;
            }
        }
        let mut busy = Vec::new();
        let mut aside: HashMap<ChunkKey, Chunk> = HashMap::new();
        let mut result = Ok(());
        for l in res.loaded {
            if let Some(id) = self.lookup_id(&l.key)
                && self.entry(id).is_some_and(|e| e.has_values)
            {
                self.policy.set_busy(id, true);
                busy.push(id);
                continue;
            }
            if !admit || l.chunk.mem_usage().allocated > self.budget.limit() {
                aside.insert(l.key, l.chunk);
                continue;
            }
            match self.admit(l, true) {
                Ok(id) => busy.push(id),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if result.is_ok() {
            result = self.scatter_misses(reqs, misses, &aside, &missing);
        }
        if !admit {
            // A scan's chunks are done with: their buffers serve its next loads.
            for (_, chunk) in aside {
                if let Chunk::Dense(buf) = chunk {
                    self.spares.put(buf);
                }
            }
        }
        for id in busy {
            self.policy.set_busy(id, false);
        }
        result?;
        // A call needing more than the limit overshot while its chunks were busy: shrink back.
        self.make_room(0)
    }

    fn scatter_misses(
        &mut self,
        reqs: &mut [ReadRequest<'_>],
        misses: &[&Miss],
        aside: &HashMap<ChunkKey, Chunk>,
        missing: &std::collections::HashSet<ChunkKey>,
    ) -> Result<()> {
        for m in misses {
            let r = &mut reqs[m.req];
            let key = ChunkKey {
                dataset: r.dataset,
                coord: m.piece.coord,
            };
            if let Some(chunk) = aside.get(&key) {
                let st = self.state(key.dataset)?;
                Self::scatter_chunk(
                    st,
                    key.dataset,
                    &key.coord,
                    chunk,
                    &m.piece.runs,
                    r.buf,
                    r.conversion,
                )?;
            } else if let Some(id) = self.lookup_id(&key) {
                self.scatter_resident(id, &m.piece, r)?;
            } else if !missing.contains(&key) {
                return Err(ChunkCacheError::Internal(
                    "a chunk being read left the cache",
                ));
            }
        }
        Ok(())
    }
}

/// Exclusive access to a cache for the steps of a read that need it: the cache itself
/// ([`ChunkCache::read`]) or a shared cache's lock, taken for each step and released between
/// them, so that storage reads and decodes run unlocked ([`ChunkCache::read_shared`]).
trait Exclusive {
    /// Runs `f` with the cache exclusively.
    fn with<R>(&mut self, f: impl FnOnce(&mut ChunkCache) -> Result<R>) -> Result<R>;
}

/// A cache owned by the caller for the whole read.
struct Own<'a>(&'a mut ChunkCache);

impl Exclusive for Own<'_> {
    fn with<R>(&mut self, f: impl FnOnce(&mut ChunkCache) -> Result<R>) -> Result<R> {
        f(self.0)
    }
}

/// A shared cache, locked for each step.
struct Locked<'a>(&'a SharedChunkCache);

impl Exclusive for Locked<'_> {
    fn with<R>(&mut self, f: impl FnOnce(&mut ChunkCache) -> Result<R>) -> Result<R> {
        let mut c = self
            .0
            .lock()
            .map_err(|_| ChunkCacheError::Internal("chunk cache lock poisoned"))?;
        f(&mut c)
    }
}

/// Loads a read's `batches` and scatters them into `reqs`: each batch planned with the cache
/// (`load_plan`), read and decoded without it (`execute`), then finished, admitted (when
/// `admit`) and scattered with it.
///
/// A scan's batches overlap: one is read and decoded on the codec threads while the one before
/// it is copied into the caller's buffers on this thread (its chunks are not admitted, so
/// nothing depends on the order). A read that admits applies each batch before the next.
///
/// Invariant: what a read returns and admits was read while nothing changed the chunks it
/// covers. A load read unlocked is used only if the cache changed no index and wrote no chunk
/// bytes between its plan and its finish (`index_changes`); otherwise its batch is read again
/// with the cache held (counted in `ChunkCacheStats::reloads`). With [`Own`] nothing can change
/// meanwhile.
fn load_batches(
    x: &mut impl Exclusive,
    reqs: &mut [ReadRequest<'_>],
    misses: &[Miss],
    batches: &[Batch],
    admit: bool,
) -> Result<()> {
    let mut decoded: Option<(Vec<&Miss>, LoadResult)> = None;
    for (want, idx) in batches {
        let mine: Vec<&Miss> = idx.iter().filter_map(|&i| misses.get(i)).collect();
        let mut load = x.with(|c| c.load_plan(want, None))?;
        load.recycle = !admit;
        let codec = Arc::clone(&load.codec);
        let previous = decoded.take();
        let (executed, applied) = codec.overlap(
            || load.execute(),
            || match previous {
                Some((m, res)) => x.with(|c| c.apply_loaded(reqs, &m, res, false)),
                None => Ok(()),
            },
        );
        applied?;
        executed?;
        decoded = x.with(|c| {
            let res = if load.index_changes == c.index_changes {
                c.load_finish(load)?
            } else {
                // The cache changed an index or chunk bytes while the load ran unlocked: what it
                // read may be older than what the cache or the file holds now, or torn (a chunk
                // rewritten in place during the read; an encoded one would not even decode).
                // It is dropped unchecked and the batch read again, this time holding the cache.
                drop(load);
                c.stats.reloads += 1;
                let mut again = c.load_plan(want, None)?;
                again.recycle = !admit;
                again.execute()?;
                c.load_finish(again)?
            };
            if admit {
                c.apply_loaded(reqs, &mine, res, true)?;
                Ok(None)
            } else {
                c.stats.scan_loads += res.loaded.len() as u64;
                Ok(Some((mine, res)))
            }
        })?;
    }
    if let Some((m, res)) = decoded {
        x.with(|c| c.apply_loaded(reqs, &m, res, false))?;
    }
    Ok(())
}

/// The part of request `r` that reads the slab `sel` into bytes `bytes` of its buffer.
/// Reads the request `r` slab by slab, each slab a request of its own given to `call`; merges
/// their reports and stops at the first error.
fn read_by_slabs(
    r: &mut ReadRequest<'_>,
    slabs: &[super::Slab],
    mut call: impl FnMut(&mut [ReadRequest<'_>]) -> Result<IoReport>,
) -> Result<IoReport> {
    let mut report = IoReport::default();
    for (sel, bytes) in slabs {
        let rep = call(&mut [slab_request(r, sel, bytes.clone())?])?;
        merge_modes(&mut report, &rep);
    }
    Ok(report)
}

fn slab_request<'a>(
    r: &'a mut ReadRequest<'_>,
    sel: &'a Selection,
    bytes: std::ops::Range<usize>,
) -> Result<ReadRequest<'a>> {
    let buf = r
        .buf
        .get_mut(bytes)
        .ok_or_else(|| ChunkCacheError::Internal("a slab left the caller's buffer"))?;
    Ok(ReadRequest {
        dataset: r.dataset,
        selection: sel,
        buf,
        memory: None,
        conversion: r.conversion,
        bypass: r.bypass,
        skip_io: false,
    })
}

/// Adds the transfer modes of one slab's report to the call's.
pub(super) fn merge_modes(report: &mut IoReport, slab: &IoReport) {
    report.mode.selection |= slab.mode.selection;
    report.mode.vector |= slab.mode.vector;
}
