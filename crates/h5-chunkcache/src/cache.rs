//! The cache itself: one memory budget for the chunks of every registered dataset (spec
//! §2.4–§2.10).
//!
//! Entries live in a slab (`Vec<Option<Entry>>` plus a free list; the index is the policy's
//! [`EntryId`]), found through a `HashMap<ChunkKey, EntryId>`. The [`Budget`] and the boxed
//! [`ReplacementPolicy`] are told about every change of an entry's size, dirty or full state.
//! Sizes are accounted as the allocated capacity of each entry's vector (SCC-087).
//!
//! All storage I/O is issued here and merged: a read or write call does one batched `lookup` per
//! dataset and one `read_vectored` for every chunk it has to load (SCC-058); a flush does one
//! `insert` per dataset and one `write_vectored` for every dirty chunk (SCC-044, SCC-085).
//! Evictions write a dirty victim alone (`encode_in_place`, `insert`, `write_at`; SCC-076).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use h5_io::{ReadSegment, Storage, WriteSegment};
use rayon::prelude::*;

use crate::error::{ChunkCacheError, Result};
use crate::layout::{ChunkLayout, DiskLocation, Encoded, InsertRequest, LayoutInfo, Udata};
use crate::policy::{
    Budget, DEFAULT_DATASET_MIN, EntryId, EntryInfo, POLICY_NAMES, ReplacementPolicy,
    policy_by_name,
};
use crate::selection::{ChunkPiece, CopyRun, Selection, decompose, fill_runs, gather, scatter};
use crate::{ChunkCoord, ChunkKey, DatasetId};

/// Default memory limit: 64 MiB.
pub const DEFAULT_LIMIT: usize = 64 << 20;

/// Cache configuration.
///
/// A per-dataset minimum larger than the limit is accepted: the [`Budget`] scales the minimums of
/// resident datasets down so that they never add up to more than the limit (OQ-24).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ChunkCacheConfig {
    /// Memory limit in bytes (not zero). Default [`DEFAULT_LIMIT`].
    pub limit: usize,
    /// Minimum kept for each dataset while others are above theirs. Default 1 MiB.
    pub default_dataset_min: usize,
    /// Replacement policy name, one of [`POLICY_NAMES`]. Default `"lru"`.
    pub policy: String,
    /// Threads running the codec (`decode`/`encode`) calls of one read batch or one flush:
    /// `None` uses rayon's global pool, `Some(1)` runs them inline on the caller's thread and
    /// `Some(n)` a dedicated pool of `n` threads built by [`ChunkCache::new`]. Not zero.
    /// Default `None`.
    pub threads: Option<usize>,
}

impl Default for ChunkCacheConfig {
    fn default() -> Self {
        Self {
            limit: DEFAULT_LIMIT,
            default_dataset_min: DEFAULT_DATASET_MIN,
            policy: "lru".to_owned(),
            threads: None,
        }
    }
}

impl ChunkCacheConfig {
    /// Checks the configuration: the limit must not be zero and the policy must be known.
    pub fn validate(&self) -> Result<()> {
        if self.limit == 0 {
            return Err(ChunkCacheError::Config {
                field: "limit",
                reason: "must not be zero".to_owned(),
            });
        }
        if self.threads == Some(0) {
            return Err(ChunkCacheError::Config {
                field: "threads",
                reason: "must not be zero".to_owned(),
            });
        }
        if !POLICY_NAMES.contains(&self.policy.as_str()) {
            return Err(ChunkCacheError::Config {
                field: "policy",
                reason: format!(
                    "unknown policy {:?}, expected one of {POLICY_NAMES:?}",
                    self.policy
                ),
            });
        }
        Ok(())
    }
}

/// Counters and sizes of a cache at one moment.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct ChunkCacheStats {
    /// Allocated bytes of all resident chunks (sum of the entries' vector capacities).
    pub footprint: usize,
    /// Bytes of chunk data held (sum of the entries' lengths).
    pub used: usize,
    /// Resident chunks.
    pub entries: usize,
    /// Resident chunks not yet written to the file.
    pub dirty_entries: usize,
    /// Chunk pieces served from the cache.
    pub hits: u64,
    /// Chunk pieces that were not resident.
    pub misses: u64,
    /// Entries evicted to make room.
    pub evictions: u64,
    /// Times the footprint had to exceed the limit because nothing could be evicted.
    pub overshoots: u64,
    /// Bytes read from storage.
    pub bytes_read: u64,
    /// Bytes written to storage.
    pub bytes_written: u64,
    /// Footprint per dataset with resident chunks.
    pub per_dataset: HashMap<DatasetId, usize>,
}

/// One read: the selected elements of `dataset` into `buf`, densely in selection order.
#[derive(Debug)]
pub struct ReadRequest<'a> {
    /// The dataset.
    pub dataset: DatasetId,
    /// The elements to read.
    pub selection: &'a Selection,
    /// Destination, exactly `elements × elem_size` bytes.
    pub buf: &'a mut [u8],
}

/// One write: `buf` (the selected elements densely in selection order) into `dataset`.
#[derive(Debug)]
pub struct WriteRequest<'a> {
    /// The dataset.
    pub dataset: DatasetId,
    /// The elements to write.
    pub selection: &'a Selection,
    /// Source, exactly `elements × elem_size` bytes.
    pub buf: &'a [u8],
}

struct Entry {
    coord: ChunkCoord,
    dataset: DatasetId,
    data: Vec<u8>,
    location: Option<DiskLocation>,
    udata: Udata,
    dirty: bool,
    full: bool,
    /// The chunk was last encoded as extending past the extent.
    partial_bound_on_disk: bool,
}

impl Entry {
    fn info(&self) -> EntryInfo {
        EntryInfo {
            dataset: self.dataset,
            bytes: self.data.capacity(),
            dirty: self.dirty,
            full: self.full,
        }
    }
}

struct DatasetState {
    layout: Arc<dyn ChunkLayout>,
    info: LayoutInfo,
    chunk_bytes: usize,
    members: BTreeSet<u32>,
}

impl DatasetState {
    fn fill_value(&self) -> Vec<u8> {
        if self.info.fill.is_empty() {
            vec![0; self.info.elem_size]
        } else {
            self.info.fill.clone()
        }
    }

    fn partial_bound(&self, coord: &ChunkCoord, extent: &[u64]) -> bool {
        partial_bound(&self.info.chunk_dims, coord, extent)
    }
}

/// Whether the chunk at `coord` extends past `extent`.
fn partial_bound(chunk_dims: &[u64], coord: &ChunkCoord, extent: &[u64]) -> bool {
    coord
        .as_slice()
        .iter()
        .zip(chunk_dims)
        .zip(extent)
        .any(|((c, d), e)| c.saturating_add(1).saturating_mul(*d) > *e)
}

/// A chunk loaded or created during a call, before admission.
struct Loaded {
    key: ChunkKey,
    data: Vec<u8>,
    udata: Udata,
    location: Option<DiskLocation>,
    full: bool,
}

/// Where the codec calls of one batch run.
enum Codec {
    /// On the caller's thread, one after the other.
    Inline,
    /// On rayon's global pool.
    Global,
    /// On the cache's own pool.
    Pool(rayon::ThreadPool),
}

impl Codec {
    /// Runs `f` on every item, in parallel unless inline or fewer than two items. `f` must only
    /// do pure codec work on its item: the cache's bookkeeping stays on the caller's thread.
    fn for_each<T: Send>(&self, items: &mut [T], f: impl Fn(&mut T) + Sync + Send) {
        if items.len() < 2 {
            items.iter_mut().for_each(f);
            return;
        }
        match self {
            Codec::Inline => items.iter_mut().for_each(f),
            Codec::Global => items.par_iter_mut().with_max_len(1).for_each(f),
            Codec::Pool(pool) => {
                pool.install(|| items.par_iter_mut().with_max_len(1).for_each(f));
            }
        }
    }
}

/// One decode of a read batch: inputs, then the result.
struct DecodeJob {
    loaded: Loaded,
    layout: Arc<dyn ChunkLayout>,
    partial_bound: bool,
    result: Option<std::result::Result<Vec<u8>, crate::layout::LayoutError>>,
}

/// One encode of a flush: the entry, then the result.
struct EncodeJob<'a> {
    id: u32,
    entry: &'a mut Entry,
    partial_bound: bool,
    result: Option<std::result::Result<Encoded, crate::layout::LayoutError>>,
}

/// The shared chunk cache of one file (single-threaded bookkeeping; the file wraps it in a lock).
/// The codec calls of one read batch or one flush run in parallel (see
/// [`ChunkCacheConfig::threads`]).
pub struct ChunkCache {
    storage: Arc<dyn Storage>,
    entries: Vec<Option<Entry>>,
    free: Vec<u32>,
    map: HashMap<ChunkKey, EntryId>,
    datasets: HashMap<DatasetId, DatasetState>,
    policy: Box<dyn ReplacementPolicy>,
    budget: Budget,
    stats: ChunkCacheStats,
    codec: Codec,
}

impl std::fmt::Debug for ChunkCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkCache")
            .field("entries", &self.map.len())
            .field("limit", &self.budget.limit())
            .field("footprint", &self.budget.total())
            .field("policy", &self.policy.name())
            .finish_non_exhaustive()
    }
}

fn layout_err(
    dataset: DatasetId,
    coord: Option<&ChunkCoord>,
    callback: &'static str,
) -> impl FnOnce(crate::layout::LayoutError) -> ChunkCacheError {
    let coord = coord.map(|c| c.as_slice().to_vec()).unwrap_or_default();
    move |source| ChunkCacheError::Layout {
        dataset,
        coord,
        callback,
        source,
    }
}

fn to_usize(v: u64) -> Result<usize> {
    usize::try_from(v).map_err(|_| crate::selection::SelectionError::Overflow.into())
}

impl ChunkCache {
    /// A cache over `storage` with `config` (validated).
    pub fn new(storage: Arc<dyn Storage>, config: ChunkCacheConfig) -> Result<Self> {
        config.validate()?;
        let policy = policy_by_name(&config.policy).ok_or_else(|| ChunkCacheError::Config {
            field: "policy",
            reason: "unknown policy".to_owned(),
        })?;
        let codec = match config.threads {
            None => Codec::Global,
            Some(1) => Codec::Inline,
            Some(n) => Codec::Pool(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .thread_name(|i| format!("h5-chunkcache-codec-{i}"))
                    .build()
                    .map_err(|e| ChunkCacheError::Config {
                        field: "threads",
                        reason: format!("cannot build a pool of {n} threads: {e}"),
                    })?,
            ),
        };
        Ok(Self {
            storage,
            entries: Vec::new(),
            free: Vec::new(),
            map: HashMap::new(),
            datasets: HashMap::new(),
            policy,
            budget: Budget::new(config.limit, config.default_dataset_min),
            stats: ChunkCacheStats::default(),
            codec,
        })
    }

    /// Registers a dataset and its layout; the layout is queried once here (SCC-030).
    pub fn register(&mut self, ds: DatasetId, layout: Arc<dyn ChunkLayout>) -> Result<()> {
        if self.datasets.contains_key(&ds) {
            return Err(ChunkCacheError::AlreadyRegistered(ds));
        }
        let info = layout.query();
        let bad = |reason: &str| ChunkCacheError::InvalidLayout {
            dataset: ds,
            reason: reason.to_owned(),
        };
        if info.elem_size == 0 {
            return Err(bad("element size is zero"));
        }
        if info.chunk_dims.contains(&0) {
            return Err(bad("a chunk dimension is zero"));
        }
        if !info.fill.is_empty() && info.fill.len() != info.elem_size {
            return Err(bad("fill value is not one element"));
        }
        let elems = info
            .chunk_dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .and_then(|n| usize::try_from(n).ok())
            .and_then(|n| n.checked_mul(info.elem_size))
            .ok_or_else(|| bad("chunk size overflows"))?;
        self.datasets.insert(
            ds,
            DatasetState {
                layout,
                info,
                chunk_bytes: elems,
                members: BTreeSet::new(),
            },
        );
        Ok(())
    }

    /// Current counters and sizes.
    pub fn stats(&self) -> ChunkCacheStats {
        let mut s = self.stats.clone();
        s.footprint = self.budget.total();
        s.entries = self.map.len();
        s.used = 0;
        s.dirty_entries = 0;
        s.per_dataset.clear();
        for e in self.entries.iter().flatten() {
            s.used += e.data.len();
            s.dirty_entries += usize::from(e.dirty);
            *s.per_dataset.entry(e.dataset).or_default() += e.data.capacity();
        }
        s
    }

    /// The memory limit.
    pub fn limit(&self) -> usize {
        self.budget.limit()
    }

    /// Changes the memory limit (not zero) and evicts until the footprint fits (spec §2.10).
    pub fn set_limit(&mut self, limit: usize) -> Result<()> {
        if limit == 0 {
            return Err(ChunkCacheError::Config {
                field: "limit",
                reason: "must not be zero".to_owned(),
            });
        }
        self.budget.set_limit(limit);
        self.make_room(0)
    }

    /// Drops every entry, dirty ones included, and writes nothing (SCC-017).
    pub fn destroy(self) {
        drop(self);
    }

    fn state(&self, ds: DatasetId) -> Result<&DatasetState> {
        self.datasets
            .get(&ds)
            .ok_or(ChunkCacheError::UnknownDataset(ds))
    }

    fn entry(&self, id: EntryId) -> Option<&Entry> {
        self.entries.get(id.0 as usize).and_then(Option::as_ref)
    }

    fn entry_mut(&mut self, id: EntryId) -> Option<&mut Entry> {
        self.entries.get_mut(id.0 as usize).and_then(Option::as_mut)
    }

    /// Decomposes a request after checking the buffer size.
    fn pieces(&self, ds: DatasetId, sel: &Selection, buf_len: usize) -> Result<Vec<ChunkPiece>> {
        let st = self.state(ds)?;
        let extent = st.layout.extent();
        let n = to_usize(sel.num_elements(&extent)?)?;
        let needed = n
            .checked_mul(st.info.elem_size)
            .ok_or(crate::selection::SelectionError::Overflow)?;
        if needed != buf_len {
            return Err(ChunkCacheError::BufferSize {
                needed,
                got: buf_len,
            });
        }
        Ok(decompose(sel, &extent, &st.info.chunk_dims)?)
    }

    // ---------------------------------------------------------------------------------------
    // Admission and eviction.
    // ---------------------------------------------------------------------------------------

    /// Inserts an entry (busy if `busy`) after making room for it.
    fn admit(&mut self, loaded: Loaded, busy: bool) -> Result<EntryId> {
        self.make_room(loaded.data.capacity())?;
        let Loaded {
            key,
            data,
            udata,
            location,
            full,
        } = loaded;
        let entry = Entry {
            coord: key.coord,
            dataset: key.dataset,
            data,
            location,
            udata,
            dirty: false,
            full,
            partial_bound_on_disk: false,
        };
        let id = self.admit_raw(entry);
        if busy {
            self.policy.set_busy(id, true);
        }
        Ok(id)
    }

    /// Removes an entry without I/O, returning it.
    fn remove(&mut self, id: EntryId) -> Option<Entry> {
        let e = self.entries.get_mut(id.0 as usize)?.take()?;
        self.free.push(id.0);
        self.map.remove(&ChunkKey {
            dataset: e.dataset,
            coord: e.coord,
        });
        if let Some(st) = self.datasets.get_mut(&e.dataset) {
            st.members.remove(&id.0);
        }
        self.budget.sub(e.dataset, e.data.capacity());
        self.policy.removed(id);
        Some(e)
    }

    /// Evicts until `extra` more bytes fit under the limit; if nothing can be evicted the
    /// overshoot is allowed and counted.
    fn make_room(&mut self, extra: usize) -> Result<()> {
        while self.budget.total().saturating_add(extra) > self.budget.limit() {
            let Some(victim) = self.policy.victim(&self.budget) else {
                self.stats.overshoots += 1;
                return Ok(());
            };
            self.evict(victim)?;
        }
        Ok(())
    }

    /// Evicts one entry, writing it first if dirty (SCC-076, SCC-077). On a write failure the
    /// entry stays, dirty.
    fn evict(&mut self, id: EntryId) -> Result<()> {
        let Some(e) = self.entry(id) else {
            // Unknown to the cache: make sure the policy forgets it too.
            self.policy.removed(id);
            return Ok(());
        };
        if !e.dirty {
            self.remove(id);
            self.stats.evictions += 1;
            return Ok(());
        }
        let ds = e.dataset;
        let Some(mut e) = self.remove(id) else {
            return Ok(());
        };
        let st = self.state(ds)?;
        let layout = Arc::clone(&st.layout);
        let extent = layout.extent();
        let pb = st.partial_bound(&e.coord, &extent);
        let coord = e.coord;
        let data = std::mem::take(&mut e.data);
        let image = layout
            .encode_in_place(&coord, data, pb, &mut e.udata)
            .map_err(layout_err(ds, Some(&coord), "encode_in_place"))?;
        match self.write_one(&layout, ds, &mut e, &image) {
            Ok(()) => {
                self.stats.evictions += 1;
                Ok(())
            }
            Err(err) => {
                // Keep the data: decode the image back and re-admit the entry, still dirty.
                // If even that fails the chunk is lost; the write error is reported either way.
                if let Ok(data) = layout.decode(&coord, image, pb, &mut e.udata) {
                    e.data = data;
                    self.admit_raw(e);
                }
                Err(err)
            }
        }
    }

    /// Re-inserts an entry as it is (no eviction), keeping its dirty state.
    fn admit_raw(&mut self, e: Entry) -> EntryId {
        let key = ChunkKey {
            dataset: e.dataset,
            coord: e.coord,
        };
        let info = e.info();
        let idx = match self.free.pop() {
            Some(i) => {
                self.entries[i as usize] = Some(e);
                i
            }
            None => {
                self.entries.push(Some(e));
                u32::try_from(self.entries.len() - 1).unwrap_or(u32::MAX - 1)
            }
        };
        let id = EntryId(idx);
        self.map.insert(key, id);
        if let Some(st) = self.datasets.get_mut(&key.dataset) {
            st.members.insert(idx);
        }
        self.budget.add(key.dataset, info.bytes);
        self.policy.inserted(id, info);
        id
    }

    /// Allocates (insert, batch of one) and writes one image.
    fn write_one(
        &mut self,
        layout: &Arc<dyn ChunkLayout>,
        ds: DatasetId,
        e: &mut Entry,
        image: &[u8],
    ) -> Result<()> {
        let coord = e.coord;
        let mut reqs = [InsertRequest {
            coord,
            old: e.location,
            new_size: image.len() as u64,
            udata: &mut e.udata,
        }];
        let locs = layout
            .insert(&mut reqs)
            .map_err(layout_err(ds, Some(&coord), "insert"))?;
        let [loc] = locs[..] else {
            return Err(ChunkCacheError::InvalidLayoutSizes {
                dataset: ds,
                callback: "insert",
                expected: 1,
                got: locs.len(),
            });
        };
        e.location = Some(loc);
        self.storage.write_at(loc.addr, image)?;
        self.stats.bytes_written += image.len() as u64;
        Ok(())
    }

    // ---------------------------------------------------------------------------------------
    // Loading.
    // ---------------------------------------------------------------------------------------

    /// Looks up `keys` (one batch per dataset), reads every found chunk with one vectored read
    /// and decodes it. Returns the loaded chunks and the keys not found (their udata dropped).
    fn load(&mut self, keys: &[(ChunkKey, bool)]) -> Result<(Vec<Loaded>, Vec<ChunkKey>)> {
        let mut by_ds: Vec<(DatasetId, Vec<(ChunkCoord, bool)>)> = Vec::new();
        for &(k, full) in keys {
            match by_ds.iter_mut().find(|(d, _)| *d == k.dataset) {
                Some((_, v)) => v.push((k.coord, full)),
                None => by_ds.push((k.dataset, vec![(k.coord, full)])),
            }
        }
        let mut found: Vec<(Loaded, usize)> = Vec::new();
        let mut missing = Vec::new();
        for (ds, coords) in &by_ds {
            let st = self.state(*ds)?;
            let cs: Vec<ChunkCoord> = coords.iter().map(|c| c.0).collect();
            let results = st
                .layout
                .lookup(&cs)
                .map_err(layout_err(*ds, None, "lookup"))?;
            if results.len() != cs.len() {
                return Err(ChunkCacheError::InvalidLayoutSizes {
                    dataset: *ds,
                    callback: "lookup",
                    expected: cs.len(),
                    got: results.len(),
                });
            }
            for (r, &(coord, full)) in results.into_iter().zip(coords) {
                let key = ChunkKey {
                    dataset: *ds,
                    coord,
                };
                match r.location {
                    None => missing.push(key), // r.udata dropped here (SCC-035)
                    Some(loc) => {
                        let size = to_usize(loc.size)?;
                        let mut data = Vec::with_capacity(size.max(r.size_hint));
                        data.resize(size, 0);
                        found.push((
                            Loaded {
                                key,
                                data,
                                udata: r.udata,
                                location: Some(loc),
                                full,
                            },
                            0,
                        ));
                    }
                }
            }
        }
        if !found.is_empty() {
            let mut segs: Vec<ReadSegment<'_>> = found
                .iter_mut()
                .filter_map(|(l, _)| {
                    l.location
                        .map(|loc| ReadSegment::new(loc.addr, l.data.as_mut_slice()))
                })
                .collect();
            self.storage.read_vectored(&mut segs)?;
            drop(segs);
        }
        // Decode every image in parallel; everything else stays on this thread, in order.
        let mut jobs = Vec::with_capacity(found.len());
        for (l, _) in found {
            self.stats.bytes_read += l.data.len() as u64;
            let st = self.state(l.key.dataset)?;
            let extent = st.layout.extent();
            let pb = st.partial_bound(&l.key.coord, &extent);
            jobs.push(DecodeJob {
                layout: Arc::clone(&st.layout),
                loaded: l,
                partial_bound: pb,
                result: None,
            });
        }
        self.codec.for_each(&mut jobs, |j| {
            let l = &mut j.loaded;
            let image = std::mem::take(&mut l.data);
            j.result = Some(
                j.layout
                    .decode(&l.key.coord, image, j.partial_bound, &mut l.udata),
            );
        });
        let mut out = Vec::with_capacity(jobs.len());
        for j in jobs {
            let mut l = j.loaded;
            let data = j
                .result
                .ok_or(ChunkCacheError::Internal("a decode did not run"))?
                .map_err(layout_err(l.key.dataset, Some(&l.key.coord), "decode"))?;
            let chunk_bytes = self.state(l.key.dataset)?.chunk_bytes;
            if data.len() != chunk_bytes {
                return Err(ChunkCacheError::InvalidLayoutSizes {
                    dataset: l.key.dataset,
                    callback: "decode",
                    expected: chunk_bytes,
                    got: data.len(),
                });
            }
            l.data = data;
            out.push(l);
        }
        Ok((out, missing))
    }

    // ---------------------------------------------------------------------------------------
    // Read.
    // ---------------------------------------------------------------------------------------

    /// Reads every request (SCC-058, SCC-059): hits are served from the cache, all misses are
    /// looked up per dataset and read with one vectored read, decoded, admitted and scattered.
    /// Chunks that do not exist read as the fill value and are not cached.
    pub fn read(&mut self, reqs: &mut [ReadRequest<'_>]) -> Result<()> {
        let mut all = Vec::with_capacity(reqs.len());
        for r in reqs.iter() {
            all.push(self.pieces(r.dataset, r.selection, r.buf.len())?);
        }
        // Hits, and the misses to load.
        let mut misses: Vec<(usize, ChunkPiece)> = Vec::new();
        let mut want: Vec<(ChunkKey, bool)> = Vec::new();
        for (i, pieces) in all.into_iter().enumerate() {
            let ds = reqs[i].dataset;
            let (elem_size, extent, dims) = {
                let st = self.state(ds)?;
                (
                    st.info.elem_size,
                    st.layout.extent(),
                    st.info.chunk_dims.clone(),
                )
            };
            for p in pieces {
                let key = ChunkKey {
                    dataset: ds,
                    coord: p.coord,
                };
                if let Some(&id) = self.map.get(&key)
                    && let Some(e) = self.entry(id)
                {
                    scatter(&e.data, reqs[i].buf, &p.runs, elem_size)?;
                    self.stats.hits += 1;
                    self.policy.touched(id);
                    continue;
                }
                self.stats.misses += 1;
                let full = p.covers_chunk(&extent, &dims);
                match want.iter_mut().find(|(k, _)| *k == key) {
                    Some(w) => w.1 |= full,
                    None => want.push((key, full)),
                }
                misses.push((i, p));
            }
        }
        if want.is_empty() {
            return Ok(());
        }
        let (loaded, missing) = self.load(&want)?;
        // Fill the pieces of missing chunks.
        for (i, p) in &misses {
            let key = ChunkKey {
                dataset: reqs[*i].dataset,
                coord: p.coord,
            };
            if missing.contains(&key) {
                let fill = self.state(key.dataset)?.fill_value();
                let runs: Vec<CopyRun> = p
                    .runs
                    .iter()
                    .map(|r| CopyRun {
                        chunk_offset: r.buf_offset,
                        buf_offset: 0,
                        len: r.len,
                    })
                    .collect();
                fill_runs(reqs[*i].buf, &runs, &fill)?;
            }
        }
        // Admit (busy while this call needs them) or keep aside when larger than the limit.
        let mut busy = Vec::new();
        let mut aside: HashMap<ChunkKey, Vec<u8>> = HashMap::new();
        let mut result = Ok(());
        for l in loaded {
            if l.data.capacity() > self.budget.limit() {
                aside.insert(l.key, l.data);
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
            result = self.scatter_misses(reqs, &misses, &aside, &missing);
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
        misses: &[(usize, ChunkPiece)],
        aside: &HashMap<ChunkKey, Vec<u8>>,
        missing: &[ChunkKey],
    ) -> Result<()> {
        for (i, p) in misses {
            let ds = reqs[*i].dataset;
            let key = ChunkKey {
                dataset: ds,
                coord: p.coord,
            };
            let elem_size = self.state(ds)?.info.elem_size;
            if let Some(data) = aside.get(&key) {
                scatter(data, reqs[*i].buf, &p.runs, elem_size)?;
            } else if let Some(e) = self.map.get(&key).and_then(|&id| self.entry(id)) {
                scatter(&e.data, reqs[*i].buf, &p.runs, elem_size)?;
            } else if !missing.contains(&key) {
                return Err(ChunkCacheError::Internal(
                    "a chunk being read left the cache",
                ));
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------------------------------
    // Write.
    // ---------------------------------------------------------------------------------------

    /// Writes every request (SCC-065): resident chunks are updated in place; a chunk the write
    /// covers completely is created without fill; any other chunk is looked up and read (or
    /// created with fill when it does not exist). Written chunks become dirty.
    pub fn write(&mut self, reqs: &[WriteRequest<'_>]) -> Result<()> {
        let mut all: Vec<(usize, ChunkPiece, bool)> = Vec::new();
        for (i, r) in reqs.iter().enumerate() {
            let pieces = self.pieces(r.dataset, r.selection, r.buf.len())?;
            let st = self.state(r.dataset)?;
            let extent = st.layout.extent();
            for p in pieces {
                let covers = p.covers_chunk(&extent, &st.info.chunk_dims);
                all.push((i, p, covers));
            }
        }
        // Chunks to bring in: covered ones are created without fill, others looked up.
        let mut create: Vec<ChunkKey> = Vec::new();
        let mut want: Vec<(ChunkKey, bool)> = Vec::new();
        for (i, p, covers) in &all {
            let key = ChunkKey {
                dataset: reqs[*i].dataset,
                coord: p.coord,
            };
            if self.map.contains_key(&key) || create.contains(&key) {
                continue;
            }
            if *covers {
                want.retain(|(k, _)| *k != key);
                create.push(key);
            } else if !want.iter().any(|(k, _)| *k == key) {
                want.push((key, false));
            }
        }
        let mut new: Vec<Loaded> = Vec::new();
        for key in create {
            let st = self.state(key.dataset)?;
            let (data, udata) = st.layout.new_chunk(&key.coord, false).map_err(layout_err(
                key.dataset,
                Some(&key.coord),
                "new_chunk",
            ))?;
            new.push(self.check_new(key, data, udata)?);
        }
        if !want.is_empty() {
            let (loaded, missing) = self.load(&want)?;
            new.extend(loaded);
            for key in missing {
                let st = self.state(key.dataset)?;
                let (data, udata) = st.layout.new_chunk(&key.coord, true).map_err(layout_err(
                    key.dataset,
                    Some(&key.coord),
                    "new_chunk",
                ))?;
                new.push(self.check_new(key, data, udata)?);
            }
        }
        // Resident chunks this call writes must not be evicted to make room for the new ones.
        let mut busy = Vec::new();
        for (i, p, _) in &all {
            let key = ChunkKey {
                dataset: reqs[*i].dataset,
                coord: p.coord,
            };
            if let Some(&id) = self.map.get(&key) {
                self.policy.set_busy(id, true);
                busy.push(id);
            }
        }
        let mut result = Ok(());
        let mut admitted = Vec::new();
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
            result = self.gather_all(reqs, &all);
        }
        for &id in busy.iter().chain(&admitted) {
            self.policy.set_busy(id, false);
        }
        if result.is_err() {
            // A chunk created for this call but never written (a new chunk without fill holds
            // unspecified bytes) must not stay behind looking like file contents.
            for id in admitted {
                if self.entry(id).is_some_and(|e| !e.dirty) {
                    self.remove(id);
                }
            }
        }
        result?;
        self.make_room(0)
    }

    fn check_new(&self, key: ChunkKey, data: Vec<u8>, udata: Udata) -> Result<Loaded> {
        let st = self.state(key.dataset)?;
        if data.len() != st.chunk_bytes {
            return Err(ChunkCacheError::InvalidLayoutSizes {
                dataset: key.dataset,
                callback: "new_chunk",
                expected: st.chunk_bytes,
                got: data.len(),
            });
        }
        Ok(Loaded {
            key,
            data,
            udata,
            location: None,
            full: false,
        })
    }

    fn gather_all(
        &mut self,
        reqs: &[WriteRequest<'_>],
        all: &[(usize, ChunkPiece, bool)],
    ) -> Result<()> {
        for (i, p, covers) in all {
            let ds = reqs[*i].dataset;
            let elem_size = self.state(ds)?.info.elem_size;
            let key = ChunkKey {
                dataset: ds,
                coord: p.coord,
            };
            let Some(e) = self
                .map
                .get(&key)
                .copied()
                .and_then(|id| self.entry_mut(id).map(|e| (id, e)))
            else {
                return Err(ChunkCacheError::Internal(
                    "a chunk being written left the cache",
                ));
            };
            let (id, e) = e;
            gather(reqs[*i].buf, &mut e.data, &p.runs, elem_size)?;
            e.dirty = true;
            e.full |= *covers;
            let info = e.info();
            self.policy.touched(id);
            self.policy.updated(id, info);
        }
        Ok(())
    }

    // ---------------------------------------------------------------------------------------
    // Flush.
    // ---------------------------------------------------------------------------------------

    /// Writes every dirty chunk of every dataset: one `insert` call per dataset and one vectored
    /// write in all (SCC-020, SCC-044, SCC-085). Entries stay resident and become clean; a flush
    /// is not a use. On an error the chunks not written stay dirty.
    pub fn flush(&mut self) -> Result<()> {
        let mut ds: Vec<DatasetId> = self.datasets.keys().copied().collect();
        ds.sort_unstable();
        self.flush_sets(&ds)
    }

    /// Writes one dataset's dirty chunks (SCC-021), then, if `evict`, removes all its entries.
    pub fn flush_dataset(&mut self, ds: DatasetId, evict: bool) -> Result<()> {
        self.state(ds)?;
        self.flush_sets(&[ds])?;
        if evict {
            let ids: Vec<u32> = self
                .datasets
                .get(&ds)
                .map(|s| s.members.iter().copied().collect())
                .unwrap_or_default();
            for id in ids {
                self.remove(EntryId(id));
            }
        }
        Ok(())
    }

    fn flush_sets(&mut self, sets: &[DatasetId]) -> Result<()> {
        // (entry id, owned image or None for the cache bytes, new location)
        let mut plan: Vec<(u32, Option<Vec<u8>>, DiskLocation)> = Vec::new();
        for &ds in sets {
            let st = self.state(ds)?;
            let layout = Arc::clone(&st.layout);
            let dims = st.info.chunk_dims.clone();
            let extent = layout.extent();
            let ids: Vec<u32> = st
                .members
                .iter()
                .copied()
                .filter(|&i| self.entry(EntryId(i)).is_some_and(|e| e.dirty))
                .collect();
            if ids.is_empty() {
                continue;
            }
            // Encode every dirty chunk in parallel (ids ascend, as the slab does), then take the
            // results in order; the first error in that order is reported.
            let mut jobs: Vec<EncodeJob<'_>> = Vec::with_capacity(ids.len());
            let mut want = ids.iter().copied().peekable();
            for (i, slot) in self.entries.iter_mut().enumerate() {
                let Some(&next) = want.peek() else { break };
                if i as u32 != next {
                    continue;
                }
                want.next();
                if let Some(e) = slot.as_mut() {
                    let pb = partial_bound(&dims, &e.coord, &extent);
                    jobs.push(EncodeJob {
                        id: next,
                        entry: e,
                        partial_bound: pb,
                        result: None,
                    });
                }
            }
            self.codec.for_each(&mut jobs, |j| {
                let e = &mut *j.entry;
                j.result = Some(layout.encode(&e.coord, &e.data, j.partial_bound, &mut e.udata));
            });
            let mut images: Vec<(u32, Option<Vec<u8>>, u64, bool)> = Vec::with_capacity(jobs.len());
            for j in jobs {
                let enc = j
                    .result
                    .ok_or(ChunkCacheError::Internal("an encode did not run"))?
                    .map_err(layout_err(ds, Some(&j.entry.coord), "encode"))?;
                let (img, len) = match enc {
                    Encoded::SameAsCache => (None, j.entry.data.len()),
                    Encoded::Owned(v) => {
                        let n = v.len();
                        (Some(v), n)
                    }
                };
                images.push((j.id, img, len as u64, j.partial_bound));
            }
            // Take the udata out to lend them all to one insert call.
            let mut taken: Vec<(u32, ChunkCoord, Option<DiskLocation>, Udata)> = images
                .iter()
                .filter_map(|(i, ..)| {
                    let e = self.entries.get_mut(*i as usize)?.as_mut()?;
                    let u = std::mem::replace(&mut e.udata, Box::new(()));
                    Some((*i, e.coord, e.location, u))
                })
                .collect();
            let locs = {
                let mut reqs: Vec<InsertRequest<'_>> = taken
                    .iter_mut()
                    .zip(&images)
                    .map(|((_, coord, old, u), img)| InsertRequest {
                        coord: *coord,
                        old: *old,
                        new_size: img.2,
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
            for ((i, img, _, pb), loc) in images.into_iter().zip(locs) {
                if let Some(e) = self.entries.get_mut(i as usize).and_then(Option::as_mut) {
                    // The index now points here; a failed write keeps the entry dirty.
                    e.location = Some(loc);
                    e.partial_bound_on_disk = pb;
                }
                plan.push((i, img, loc));
            }
        }
        if plan.is_empty() {
            return Ok(());
        }
        let segs: Vec<WriteSegment<'_>> = plan
            .iter()
            .filter_map(|(i, img, loc)| {
                let data = match img {
                    Some(v) => v.as_slice(),
                    None => self.entries.get(*i as usize)?.as_ref()?.data.as_slice(),
                };
                Some(WriteSegment::new(loc.addr, data))
            })
            .collect();
        let bytes: u64 = segs.iter().map(|s| s.data.len() as u64).sum();
        self.storage.write_vectored(&segs)?;
        drop(segs);
        self.stats.bytes_written += bytes;
        for (i, _, _) in plan {
            if let Some(e) = self.entries.get_mut(i as usize).and_then(Option::as_mut) {
                e.dirty = false;
                let info = e.info();
                self.policy.updated(EntryId(i), info);
            }
        }
        Ok(())
    }
}
