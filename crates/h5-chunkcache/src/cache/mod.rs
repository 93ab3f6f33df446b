//! The cache itself: one memory budget for the chunks of every registered dataset (spec
//! §2.4–§2.12).
//!
//! Entries live in a slab (`Vec<Option<Entry>>` plus a free list; the index is the policy's
//! [`EntryId`]), found through a `HashMap<ChunkKey, EntryId>`. The [`Budget`] and the boxed
//! [`ReplacementPolicy`] are told about every change of an entry's size, dirty or full state.
//! An entry accounts for its chunk's allocated bytes plus its pre-encoded image's capacity; the
//! amount is kept in the entry so that removal subtracts exactly what was added (SCC-087).
//!
//! All storage I/O is issued here and merged: a read or write call does one batched `lookup` per
//! dataset and one `read_vectored` for every chunk it has to load; a flush does one `insert` per
//! dataset and one `write_vectored` for every dirty chunk. The flows live in submodules: `read`,
//! `write`, `flush` (with pre-encoding), `bypass` (direct transfers that skip the cache),
//! `direct` (direct chunk read/write), `defined` (defined elements and erase) and `extent`
//! (set-extent notification).

mod bypass;
mod defined;
mod direct;
mod extent;
mod flush;
mod index;
mod read;
mod spares;
mod whole;
mod write;

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use h5_io::{ReadSegment, Storage};
use rayon::prelude::*;

use crate::MAX_RANK;
use crate::error::{ChunkCacheError, Result};
use crate::key::CompactCoord;
use crate::layout::{
    Capabilities, Chunk, ChunkLayout, Conversion, DefinedInfo, DiskLocation, InsertRequest,
    LayoutError, LayoutInfo, MemUsage, Udata,
};
use crate::policy::{
    Budget, DEFAULT_DATASET_MIN, EntryId, EntryInfo, POLICY_NAMES, ReplacementPolicy,
    policy_by_name,
};
use crate::selection::{ChunkPiece, CopyRun, MemorySelection, Selection, decompose};
use crate::{ChunkCoord, ChunkKey, DatasetId};

pub use bypass::{Bypass, DIRECT_WHOLE_MIN};
pub use flush::CLOSE_BATCH_BYTES;
pub use read::SharedChunkCache;
pub use whole::WHOLE_WRITE_BATCH;

/// Chunks per slab of a read or write of every element of a large dataset (`row_slabs`): such a
/// call goes a few chunk rows at a time, so that its pieces (a copy run per row of each chunk)
/// never exist for the whole dataset at once.
const SLAB_CHUNKS: u64 = 256;

/// One slab of a large request: its selection and its bytes in the caller's buffer.
type Slab = (Selection, std::ops::Range<usize>);

/// Default memory limit: 64 MiB.
pub const DEFAULT_LIMIT: usize = 64 << 20;

/// Default size of the conversion buffer of one I/O call: 1 MiB, as libhdf5.
pub const DEFAULT_CONVERSION_BUFFER: usize = 1 << 20;

/// How keys are hashed.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum KeyHashing {
    /// A fast deterministic hash of the dataset and coordinates (OQ-41).
    #[default]
    Fast,
    /// Every key hashes to the same value. Only for tests proving that collisions never evict
    /// (SCC-012); lookups become linear in the number of entries.
    SingleBucket,
}

/// Cache configuration.
///
/// A per-dataset minimum larger than the limit is accepted: the [`Budget`] scales the minimums of
/// resident datasets down so that they never add up to more than the limit (OQ-24); the
/// statistics report the effective values.
#[derive(Clone, PartialEq, Debug)]
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
    /// Fraction of the limit above which dirty chunks of codec layouts are encoded ahead of
    /// eviction (OQ-27); `None` turns pre-encoding off. In (0, 1]. Default 0.9.
    pub preencode_high_water: Option<f64>,
    /// Under [`Bypass::Auto`], a chunk larger than this fraction of the limit skips the cache
    /// (OQ-33). In (0, 1]. Default 0.5.
    pub bypass_fraction: f64,
    /// Bytes of the conversion buffer a converting bypass transfer may use (SCC-071). Not zero.
    pub conversion_buffer: usize,
    /// A chunk counts as fully accessed when the bounding box of its read or written elements
    /// covers at least this fraction of its elements inside the extent (OQ-35). In (0, 1].
    /// Default 1.0.
    pub full_threshold: f64,
    /// How keys are hashed. Default [`KeyHashing::Fast`].
    pub key_hashing: KeyHashing,
}

impl Default for ChunkCacheConfig {
    fn default() -> Self {
        Self {
            limit: DEFAULT_LIMIT,
            default_dataset_min: DEFAULT_DATASET_MIN,
            policy: "lru".to_owned(),
            threads: None,
            preencode_high_water: Some(0.9),
            bypass_fraction: 0.5,
            conversion_buffer: DEFAULT_CONVERSION_BUFFER,
            full_threshold: 1.0,
            key_hashing: KeyHashing::Fast,
        }
    }
}

fn config_err(field: &'static str, reason: impl Into<String>) -> ChunkCacheError {
    ChunkCacheError::Config {
        field,
        reason: reason.into(),
    }
}

fn in_unit(v: f64) -> bool {
    v > 0.0 && v <= 1.0
}

impl ChunkCacheConfig {
    /// Checks the configuration (SCC-016): the limit and buffer sizes must not be zero, fractions
    /// must lie in (0, 1] and the policy must be known.
    pub fn validate(&self) -> Result<()> {
        if self.limit == 0 {
            return Err(config_err("limit", "must not be zero"));
        }
        if self.threads == Some(0) {
            return Err(config_err("threads", "must not be zero"));
        }
        if !POLICY_NAMES.contains(&self.policy.as_str()) {
            return Err(config_err(
                "policy",
                format!(
                    "unknown policy {:?}, expected one of {POLICY_NAMES:?}",
                    self.policy
                ),
            ));
        }
        if let Some(h) = self.preencode_high_water
            && !in_unit(h)
        {
            return Err(config_err("preencode_high_water", "must be in (0, 1]"));
        }
        if !in_unit(self.bypass_fraction) {
            return Err(config_err("bypass_fraction", "must be in (0, 1]"));
        }
        if self.conversion_buffer == 0 {
            return Err(config_err("conversion_buffer", "must not be zero"));
        }
        if !in_unit(self.full_threshold) {
            return Err(config_err("full_threshold", "must be in (0, 1]"));
        }
        Ok(())
    }
}

/// Which direct-transfer paths a read or write call used (SCC-107).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SelectionIoMode {
    /// Some chunk was transferred with selection I/O.
    pub selection: bool,
    /// Some chunk was transferred with vector I/O.
    pub vector: bool,
}

/// What a read or write call did.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct IoReport {
    /// Indices of the requests left to the caller because their dataset's layout does not use
    /// the cache (SCC-018, SCC-019).
    pub not_cached: Vec<usize>,
    /// The direct-transfer modes actually used.
    pub mode: SelectionIoMode,
}

/// Counters and sizes of a cache at one moment (SCC-015). Printable with `{}`.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct ChunkCacheStats {
    /// The memory limit.
    pub limit: usize,
    /// The replacement policy's name.
    pub policy: &'static str,
    /// The default per-dataset minimum.
    pub default_dataset_min: usize,
    /// The pre-encoding high-water fraction, if on.
    pub preencode_high_water: Option<f64>,
    /// The bypass fraction.
    pub bypass_fraction: f64,
    /// Allocated bytes of all resident chunks and pre-encoded images.
    pub footprint: usize,
    /// Highest footprint seen.
    pub peak_footprint: usize,
    /// Bytes of chunk data held (sum of the chunks' used sizes).
    pub used: usize,
    /// Resident chunks.
    pub entries: usize,
    /// Resident chunks not yet written to the file.
    pub dirty_entries: usize,
    /// Allocated bytes of the dirty chunks.
    pub dirty_bytes: usize,
    /// Chunk pieces served from the cache.
    pub hits: u64,
    /// Chunk pieces that were not resident.
    pub misses: u64,
    /// Entries evicted to make room (clean + dirty).
    pub evictions: u64,
    /// Clean entries evicted.
    pub evictions_clean: u64,
    /// Dirty entries evicted (each written first).
    pub evictions_dirty: u64,
    /// Entries whose values were dropped (keeping the defined set) to make room.
    pub values_dropped: u64,
    /// Entries condensed to make room.
    pub condensed: u64,
    /// Dirty chunks encoded ahead of eviction.
    pub preencoded: u64,
    /// Chunk pieces transferred around the cache (bypass and whole-chunk writes).
    pub bypassed: u64,
    /// Bytes transferred around the cache (bypass and whole-chunk writes).
    pub bypassed_bytes: u64,
    /// Chunks written whole straight from the caller's data, never admitted.
    pub whole_chunk_writes: u64,
    /// Chunks a read of more than the limit loaded, used and dropped without admitting them
    /// (such a read would only evict its own chunks and everything else cached).
    pub scan_loads: u64,
    /// Batches of a shared read loaded again with the cache held, because the cache changed a
    /// chunk index or chunk bytes while their first load ran unlocked ([`ChunkCache::read_shared`]).
    pub reloads: u64,
    /// Times the footprint had to exceed the limit because nothing could be evicted.
    pub overshoots: u64,
    /// Conversion buffers allocated.
    pub conversion_buffers: u64,
    /// Bytes read from storage.
    pub bytes_read: u64,
    /// Bytes written to storage.
    pub bytes_written: u64,
    /// Time spent in decode calls (summed over threads).
    pub decode_time: Duration,
    /// Time spent in encode calls (summed over threads).
    pub encode_time: Duration,
    /// Sum of the effective minimums of datasets with resident data (OQ-25).
    pub quiescent: usize,
    /// The rest of the limit.
    pub active: usize,
    /// Slots allocated by the key index (it grows with the entries, starting empty).
    pub index_capacity: usize,
    /// Footprint per dataset with resident chunks.
    pub per_dataset: HashMap<DatasetId, usize>,
}

impl std::fmt::Display for ChunkCacheStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        let total = self.hits + self.misses;
        let rate = if total == 0 {
            0.0
        } else {
            self.hits as f64 / total as f64
        };
        writeln!(
            f,
            "chunk cache ({} policy): {:.1} MiB of {:.1} MiB (peak {:.1} MiB, used {:.1} MiB)",
            self.policy,
            mib(self.footprint),
            mib(self.limit),
            mib(self.peak_footprint),
            mib(self.used)
        )?;
        writeln!(
            f,
            "  entries {} ({} dirty, {:.1} MiB); hits {} misses {} (hit rate {:.3})",
            self.entries,
            self.dirty_entries,
            mib(self.dirty_bytes),
            self.hits,
            self.misses,
            rate
        )?;
        writeln!(
            f,
            "  evictions {} (clean {}, dirty {}); values dropped {}; condensed {}; pre-encoded {}; \
             bypassed {} ({:.1} MiB, {} whole-chunk writes); scan loads {}; overshoots {}",
            self.evictions,
            self.evictions_clean,
            self.evictions_dirty,
            self.values_dropped,
            self.condensed,
            self.preencoded,
            self.bypassed,
            self.bypassed_bytes as f64 / (1 << 20) as f64,
            self.whole_chunk_writes,
            self.scan_loads,
            self.overshoots
        )?;
        write!(
            f,
            "  read {:.1} MiB, written {:.1} MiB; decode {:.3} s, encode {:.3} s",
            self.bytes_read as f64 / (1 << 20) as f64,
            self.bytes_written as f64 / (1 << 20) as f64,
            self.decode_time.as_secs_f64(),
            self.encode_time.as_secs_f64()
        )
    }
}

/// The state of one resident chunk (SCC-008), from [`ChunkCache::entry_stats`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct EntryStats {
    /// The chunk holds data not yet written.
    pub dirty: bool,
    /// The values are resident (false: only the defined-element set).
    pub has_values: bool,
    /// Where its image is in the file, if it has one.
    pub location: Option<DiskLocation>,
    /// The chunk object's memory.
    pub usage: MemUsage,
    /// Capacity of the pre-encoded image, if there is one.
    pub image_bytes: Option<usize>,
    /// Reads and writes of this chunk since it was admitted.
    pub access_count: u64,
    /// Whether it counts as fully accessed.
    pub full: bool,
    /// Edge state of the image on disk (SCC-038).
    pub partial_bound_on_disk: bool,
}

/// The options shared by read and write requests.
macro_rules! request_options {
    ($t:ident, $dir:literal) => {
        impl<'a> $t<'a> {
            #[doc = concat!("Converts with `conv` (", $dir, ").")]
            pub fn converting(mut self, conv: &'a dyn Conversion) -> Self {
                self.conversion = Some(conv);
                self
            }

            /// Sets the bypass mode.
            pub fn with_bypass(mut self, bypass: Bypass) -> Self {
                self.bypass = bypass;
                self
            }

            /// Marks the request skip-I/O.
            pub fn skip(mut self) -> Self {
                self.skip_io = true;
                self
            }

            /// The buffer is an array: the elements go to (or come from) `memory`'s selected
            /// positions.
            pub fn in_memory(mut self, memory: &'a MemorySelection) -> Self {
                self.memory = Some(memory);
                self
            }
        }
    };
}

/// One read: the selected elements of `dataset` into `buf`, densely in selection order.
#[derive(Debug)]
pub struct ReadRequest<'a> {
    /// The dataset.
    pub dataset: DatasetId,
    /// The elements to read.
    pub selection: &'a Selection,
    /// Destination: the selected elements densely in selection order, exactly `elements ×
    /// element size` bytes (the memory type's size when converting); or, with `memory`, an
    /// array of the memory selection's extent of which only the selected positions change
    /// (SCC-060).
    pub buf: &'a mut [u8],
    /// Where the elements go in `buf`, if it is an array with its own selection.
    pub memory: Option<&'a MemorySelection>,
    /// File-to-memory conversion, if the memory type differs.
    pub conversion: Option<&'a dyn Conversion>,
    /// Whether to skip the cache.
    pub bypass: Bypass,
    /// Nothing to transfer (the dataset is marked skip-I/O): the request is ignored.
    pub skip_io: bool,
}

impl<'a> ReadRequest<'a> {
    /// A plain read without conversion.
    pub fn new(dataset: DatasetId, selection: &'a Selection, buf: &'a mut [u8]) -> Self {
        Self {
            dataset,
            selection,
            buf,
            memory: None,
            conversion: None,
            bypass: Bypass::Auto,
            skip_io: false,
        }
    }
}

request_options!(ReadRequest, "file to memory");

/// One write: `buf` (the selected elements densely in selection order) into `dataset`.
#[derive(Debug)]
pub struct WriteRequest<'a> {
    /// The dataset.
    pub dataset: DatasetId,
    /// The elements to write.
    pub selection: &'a Selection,
    /// Source: the selected elements densely in selection order (`elements × element size`
    /// bytes, the memory type's size when converting), or with `memory` an array of the memory
    /// selection's extent.
    pub buf: &'a [u8],
    /// Where the elements come from in `buf`, if it is an array with its own selection.
    pub memory: Option<&'a MemorySelection>,
    /// Memory-to-file conversion, if the memory type differs.
    pub conversion: Option<&'a dyn Conversion>,
    /// Whether to skip the cache.
    pub bypass: Bypass,
    /// Nothing to transfer (the dataset is marked skip-I/O): the request is ignored.
    pub skip_io: bool,
}

impl<'a> WriteRequest<'a> {
    /// A plain write without conversion.
    pub fn new(dataset: DatasetId, selection: &'a Selection, buf: &'a [u8]) -> Self {
        Self {
            dataset,
            selection,
            buf,
            memory: None,
            conversion: None,
            bypass: Bypass::Auto,
            skip_io: false,
        }
    }
}

request_options!(WriteRequest, "memory to file");

/// Bounding box of the elements read or written in a chunk (OQ-35), in chunk-local element
/// coordinates: `lo` then `hi` (exclusive) in one allocation of twice the rank, `None` while
/// nothing was accessed or once the chunk is full (a full chunk stays full, its box is not
/// needed: every resident chunk of a large write keeps one allocation fewer).
#[derive(Clone, Debug, Default)]
struct Coverage {
    bounds: Option<Box<[u64]>>,
}

impl Coverage {
    /// Widens the box by the elements of `runs` (chunk-local linear offsets over `dims`).
    /// Allocation-free once the box exists (it runs for every hit): the runs' box is built on
    /// the stack first.
    fn add_runs(&mut self, runs: &[CopyRun], dims: &[u64]) {
        let rank = dims.len();
        if rank == 0 || rank > crate::MAX_RANK {
            return;
        }
        let mut lo = [u64::MAX; crate::MAX_RANK];
        let mut hi = [0u64; crate::MAX_RANK];
        let mut any = false;
        for r in runs.iter().filter(|r| r.len > 0) {
            let first = delinearize(r.chunk_offset, dims);
            let last = delinearize(r.chunk_offset + r.len - 1, dims);
            // Dimensions after the first one where `first` and `last` differ wrap around fully.
            let split = (0..rank).position(|d| first[d] != last[d]);
            for d in 0..rank {
                let (l, h) = match split {
                    Some(s) if d > s => (0, dims[d]),
                    _ => (first[d].min(last[d]), first[d].max(last[d]) + 1),
                };
                lo[d] = lo[d].min(l);
                hi[d] = hi[d].max(h);
            }
            any = true;
        }
        if !any {
            return;
        }
        match &mut self.bounds {
            Some(b) if b.len() == 2 * rank => {
                let (blo, bhi) = b.split_at_mut(rank);
                for d in 0..rank {
                    blo[d] = blo[d].min(lo[d]);
                    bhi[d] = bhi[d].max(hi[d]);
                }
            }
            _ => self.bounds = Some(lo[..rank].iter().chain(&hi[..rank]).copied().collect()),
        }
    }

    /// The fraction of the chunk's inside-extent box that the bounding box covers.
    fn fraction(&self, inside: &[u64]) -> f64 {
        let Some(b) = &self.bounds else {
            return 0.0;
        };
        let (lo, hi) = b.split_at(b.len() / 2);
        let mut covered = 1.0;
        let mut total = 1.0;
        for ((&n, &lo), &hi) in inside.iter().zip(lo).zip(hi) {
            covered *= hi.min(n).saturating_sub(lo) as f64;
            total *= n as f64;
        }
        if total == 0.0 { 0.0 } else { covered / total }
    }

    /// Forgets the box (the chunk became full).
    fn clear(&mut self) {
        self.bounds = None;
    }
}

/// The coordinates of linear offset `off` over `dims` (at most [`crate::MAX_RANK`] of them; the
/// rest of the array is zero).
fn delinearize(mut off: u64, dims: &[u64]) -> [u64; crate::MAX_RANK] {
    let mut out = [0; crate::MAX_RANK];
    for d in (0..dims.len().min(crate::MAX_RANK)).rev() {
        let n = dims[d].max(1);
        out[d] = off % n;
        off /= n;
    }
    out
}

struct Entry {
    coord: CompactCoord,
    dataset: DatasetId,
    chunk: Chunk,
    /// The values are resident (false: the chunk holds only its defined set, SCC-009).
    has_values: bool,
    location: Option<DiskLocation>,
    udata: Udata,
    dirty: bool,
    full: bool,
    coverage: Coverage,
    access_count: u64,
    /// Cache-wide access stamp of the last read or write (pre-encoding picks the oldest).
    stamp: u64,
    /// Image encoded ahead of eviction, with the edge state it was encoded with (SCC-007).
    image: Option<(Vec<u8>, bool)>,
    /// The chunk was last encoded as extending past the extent (SCC-038).
    partial_bound_on_disk: bool,
    /// Bytes this entry has added to the budget.
    accounted: usize,
}

impl Entry {
    fn footprint(&self) -> usize {
        self.chunk
            .mem_usage()
            .allocated
            .saturating_add(self.image.as_ref().map_or(0, |(v, _)| v.capacity()))
    }

    fn info(&self) -> EntryInfo {
        EntryInfo {
            dataset: self.dataset,
            bytes: self.accounted,
            dirty: self.dirty,
            full: self.full,
        }
    }

    fn key(&self) -> ChunkKey {
        ChunkKey {
            dataset: self.dataset,
            coord: self.coord.get(),
        }
    }
}

struct DatasetState {
    layout: Arc<dyn ChunkLayout>,
    /// Where the dataset's chunks are stored: the cache's own storage, or another file's when
    /// one cache is shared by several files.
    storage: Arc<dyn Storage>,
    info: LayoutInfo,
    /// Bytes of a dense chunk.
    chunk_bytes: usize,
    members: BTreeSet<u32>,
    /// The entry the last resident-run write ended in (a hint: checked against the entry's
    /// dataset and coordinates before use, since entries are reused), so that the next append
    /// into the same chunk skips the key index.
    last_run_entry: Option<EntryId>,
}

/// A dataset's current dimensions, copied on the stack (every write needs them).
struct Extent {
    dims: [u64; MAX_RANK],
    rank: usize,
}

impl std::ops::Deref for Extent {
    type Target = [u64];

    fn deref(&self) -> &[u64] {
        self.dims.get(..self.rank).unwrap_or(&[])
    }
}

impl DatasetState {
    /// The layout's current dimensions (`ds`: the dataset, for the error).
    fn extent(&self, ds: DatasetId) -> Result<Extent> {
        let mut dims = [0u64; MAX_RANK];
        let rank =
            self.layout
                .extent_into(&mut dims)
                .ok_or_else(|| ChunkCacheError::InvalidLayout {
                    dataset: ds,
                    reason: format!("an extent of rank above {MAX_RANK}"),
                })?;
        Ok(Extent { dims, rank })
    }

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

    fn has(&self, c: Capabilities) -> bool {
        self.info.capabilities.contains(c)
    }

    /// Every chunk is dense and of the full chunk shape, with nothing tracked beside its
    /// values: a chunk a write covers is made from the write's values alone (then encoded
    /// when [`raw_images`](Self::raw_images) is false).
    fn dense_chunks(&self) -> bool {
        !self.info.edge_chunks_differ && !self.info.tracks_defined && !self.info.vlen_in_chunk
    }

    /// The disk image is the dense cache form: no decode or encode is needed.
    fn raw_images(&self) -> bool {
        !self.info.needs_codec
            && !self.info.edge_chunks_differ
            && !self.info.tracks_defined
            && !self.info.vlen_in_chunk
    }

    /// Chunk dims clipped to the extent for the chunk at `coord`.
    fn inside_dims(&self, coord: &ChunkCoord, extent: &[u64]) -> Vec<u64> {
        coord
            .as_slice()
            .iter()
            .zip(&self.info.chunk_dims)
            .zip(extent)
            .map(|((c, d), e)| e.saturating_sub(c.saturating_mul(*d)).min(*d))
            .collect()
    }
}

/// Whether the chunk at `coord` (chunks of `chunk_dims`) extends past `extent`: a partial edge
/// chunk, the `partial_bound` the layout callbacks are given.
pub fn partial_bound(chunk_dims: &[u64], coord: &ChunkCoord, extent: &[u64]) -> bool {
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
    chunk: Chunk,
    has_values: bool,
    udata: Udata,
    location: Option<DiskLocation>,
    partial_bound_on_disk: bool,
}

/// What to load for a key.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum LoadKind {
    /// The whole chunk, decoded.
    Values,
    /// Only the defined-element set (falls back to the whole chunk without `decode_defined`).
    Defined,
    /// Only the location (a full overwrite keeps the old address for insert, SCC-063).
    Locate,
}

/// What [`ChunkCache::load`] found.
#[derive(Default)]
struct LoadResult {
    /// Chunks read and decoded.
    loaded: Vec<Loaded>,
    /// Keys not on disk (udata dropped).
    missing: Vec<ChunkKey>,
    /// Keys asked for [`LoadKind::Defined`] whose chunk is all defined (nothing read).
    all_defined: Vec<(ChunkKey, DiskLocation)>,
    /// Keys asked for [`LoadKind::Locate`] that exist.
    located: Vec<(ChunkKey, DiskLocation)>,
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
    /// How many codec calls run at once.
    fn parallelism(&self) -> usize {
        match self {
            Codec::Inline => 1,
            Codec::Global => rayon::current_num_threads(),
            Codec::Pool(pool) => pool.current_num_threads(),
        }
    }

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

    /// Runs `load` (a load's storage reads and decodes) on the codec's threads while `copy`
    /// runs on the caller's (one after the other when inline): a scan decodes one batch while
    /// the one before it is copied out (`read.rs`). The copy is not queued behind the decodes
    /// on the pool, so it starts at once.
    fn overlap<B>(
        &self,
        load: impl FnOnce() -> Result<()> + Send,
        copy: impl FnOnce() -> B,
    ) -> (Result<()>, B) {
        let mut loaded = Err(ChunkCacheError::Internal("an overlapped load did not run"));
        let copied = match self {
            Codec::Inline => {
                loaded = load();
                copy()
            }
            Codec::Global => rayon::in_place_scope(|s| {
                s.spawn(|_| loaded = load());
                copy()
            }),
            Codec::Pool(pool) => pool.in_place_scope(|s| {
                s.spawn(|_| loaded = load());
                copy()
            }),
        };
        (loaded, copied)
    }
}

/// One decode of a read batch: inputs, then the result and its duration.
struct DecodeJob {
    key: ChunkKey,
    image: Vec<u8>,
    udata: Udata,
    location: DiskLocation,
    kind: LoadKind,
    /// Bytes read (for the statistics).
    read_len: usize,
    /// Where to read it.
    storage: Arc<dyn Storage>,
    /// The image is the dense cache form: no decode call.
    raw: bool,
    layout: Arc<dyn ChunkLayout>,
    partial_bound: bool,
    /// A buffer the decode may reuse for the chunk (empty: none).
    spare: Vec<u8>,
    /// A buffer the decode no longer needed, to recycle (empty: none).
    leftover: Vec<u8>,
    result: Option<(std::result::Result<Chunk, LayoutError>, Duration)>,
}

/// Hashes keys as configured.
#[derive(Clone, Copy, Debug)]
struct KeyHasherBuilder(KeyHashing);

/// FxHash-style multiply-rotate hasher (fast and deterministic; keys are not attacker-chosen).
struct KeyHasher {
    state: u64,
    single: bool,
}

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        if self.single {
            0
        } else {
            // Final avalanche so that the low bits the table uses depend on every input bit.
            let mut x = self.state;
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            x ^ (x >> 31)
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.state = (self.state.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }

    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

impl BuildHasher for KeyHasherBuilder {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher {
            state: 0,
            single: self.0 == KeyHashing::SingleBucket,
        }
    }
}

/// The shared chunk cache of one file (single-threaded bookkeeping; the file wraps it in a lock).
/// The codec calls of one read batch or one flush run in parallel (see
/// [`ChunkCacheConfig::threads`]).
pub struct ChunkCache {
    storage: Arc<dyn Storage>,
    config: ChunkCacheConfig,
    entries: Vec<Option<Entry>>,
    free: Vec<u32>,
    map: index::KeyIndex,
    datasets: HashMap<DatasetId, DatasetState, KeyHasherBuilder>,
    policy: Box<dyn ReplacementPolicy>,
    budget: Budget,
    stats: ChunkCacheStats,
    codec: Arc<Codec>,
    clock: u64,
    /// Whole-chunk writes go straight to storage ([`ChunkCache::set_whole_chunk_writes`]).
    whole_chunk_writes: bool,
    /// Counts the changes the cache made to chunk indexes and to chunk bytes in storage (every
    /// `insert` and `delete_chunk` it calls: flushes, evictions of dirty chunks, whole chunks,
    /// direct transfers, extent changes, erasures that empty a chunk), each counted before the
    /// call. A load `read_shared` planned before such a change and read without the lock may
    /// hold old bytes, bytes of a place the index no longer names, or a torn chunk: it is read
    /// again with the cache held (`read.rs`, `load_batches`).
    index_changes: u64,
    /// See [`ChunkCache::registrations_epoch`].
    registrations: u64,
    /// Buffers of the scan in progress, for its next loads (`spares.rs`).
    spares: spares::Spares,
    /// Buffers of evicted clean chunks and of decoded images, for the next loads of reads that
    /// admit (`spares.rs`); see [`recycle_pool`] (outside the budget).
    recycled: spares::Spares,
}

/// The pool of buffers kept for reuse by admitting reads under the memory limit `limit`: at
/// most an eighth of it (memory the allocator would otherwise hold as free), each buffer handed
/// out for at least half its capacity (it becomes a cached chunk, counted by its capacity).
fn recycle_pool(limit: usize) -> spares::Spares {
    spares::Spares::bounded(limit / 8).fitting_within(2)
}

/// The source of registration epochs: every value is handed out once per process, so an epoch
/// seen on one cache is never seen again on it or on a cache that replaces it.
static NEXT_REGISTRATIONS_EPOCH: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(1);

/// A registration epoch never handed out before.
fn new_registrations_epoch() -> u64 {
    NEXT_REGISTRATIONS_EPOCH.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
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
) -> impl FnOnce(LayoutError) -> ChunkCacheError {
    let coord = coord.map(|c| c.as_slice().to_vec()).unwrap_or_default();
    move |source| ChunkCacheError::Layout {
        dataset,
        coord,
        callback,
        source,
    }
}

/// Checks a size a callback reported (EC-28).
fn check_usage(ds: DatasetId, callback: &'static str, u: MemUsage) -> Result<MemUsage> {
    if u.allocated < u.used {
        return Err(ChunkCacheError::InvalidLayoutSizes {
            dataset: ds,
            callback,
            expected: u.used,
            got: u.allocated,
        });
    }
    Ok(u)
}

fn to_usize(v: u64) -> Result<usize> {
    usize::try_from(v).map_err(|_| crate::selection::SelectionError::Overflow.into())
}

impl ChunkCache {
    /// A cache over `storage` with `config` (validated, SCC-016).
    pub fn new(storage: Arc<dyn Storage>, config: ChunkCacheConfig) -> Result<Self> {
        config.validate()?;
        let policy =
            policy_by_name(&config.policy).ok_or_else(|| config_err("policy", "unknown policy"))?;
        let codec = match config.threads {
            None => Codec::Global,
            Some(1) => Codec::Inline,
            Some(n) => Codec::Pool(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .thread_name(|i| format!("h5-chunkcache-codec-{i}"))
                    .build()
                    .map_err(|e| {
                        config_err(
                            "threads",
                            format!("cannot build a pool of {n} threads: {e}"),
                        )
                    })?,
            ),
        };
        let budget = Budget::new(config.limit, config.default_dataset_min);
        let recycled = recycle_pool(config.limit);
        Ok(Self {
            storage,
            map: index::KeyIndex::new(KeyHasherBuilder(config.key_hashing)),
            config,
            entries: Vec::new(),
            free: Vec::new(),
            datasets: HashMap::with_hasher(KeyHasherBuilder(KeyHashing::Fast)),
            policy,
            budget,
            stats: ChunkCacheStats::default(),
            codec: Arc::new(codec),
            clock: 0,
            whole_chunk_writes: true,
            index_changes: 0,
            registrations: new_registrations_epoch(),
            spares: spares::Spares::default(),
            recycled,
        })
    }

    /// Registers a dataset and its layout; the layout is queried once here (SCC-030) and its
    /// announced capabilities checked (SCC-029, SCC-031, OQ-15).
    pub fn register(&mut self, ds: DatasetId, layout: Arc<dyn ChunkLayout>) -> Result<()> {
        let storage = Arc::clone(&self.storage);
        self.register_in(ds, layout, storage)
    }

    /// Registers a dataset whose chunks live in `storage`, another file sharing this cache's
    /// memory budget (one pool for many open files). Dataset identities must be unique across
    /// all the files sharing the cache (the caller makes them so, for example by combining a file
    /// number with the object-header address).
    pub fn register_in(
        &mut self,
        ds: DatasetId,
        layout: Arc<dyn ChunkLayout>,
        storage: Arc<dyn Storage>,
    ) -> Result<()> {
        if self.datasets.contains_key(&ds) {
            return Err(ChunkCacheError::AlreadyRegistered(ds));
        }
        let info = layout.query();
        let bad = |reason: String| ChunkCacheError::InvalidLayout {
            dataset: ds,
            reason,
        };
        if info.elem_size == 0 {
            return Err(bad("element size is zero".into()));
        }
        if info.chunk_dims.contains(&0) {
            return Err(bad("a chunk dimension is zero".into()));
        }
        if info.chunk_dims.len() > crate::MAX_RANK {
            return Err(bad("rank above 32".into()));
        }
        if !info.fill.is_empty() && info.fill.len() != info.elem_size {
            return Err(bad("fill value is not one element".into()));
        }
        let caps = info.capabilities;
        let need = |what: &str, c: Capabilities, name: &str| {
            if caps.contains(c) {
                Ok(())
            } else {
                Err(bad(format!("{what} needs the `{name}` callback")))
            }
        };
        if info.vlen_in_chunk {
            need("vlen data inside chunks", Capabilities::SCATTER, "scatter")?;
            need("vlen data inside chunks", Capabilities::GATHER, "gather")?;
            need("vlen data inside chunks", Capabilities::FILL, "fill")?;
        }
        if info.tracks_defined {
            need(
                "tracking defined elements",
                Capabilities::DEFINED_VALUES,
                "defined_values",
            )?;
            need(
                "tracking defined elements",
                Capabilities::ERASE_VALUES,
                "erase_values",
            )?;
            need(
                "tracking defined elements",
                Capabilities::SCATTER,
                "scatter",
            )?;
            need("tracking defined elements", Capabilities::GATHER, "gather")?;
            need("tracking defined elements", Capabilities::FILL, "fill")?;
        }
        let elems = info
            .chunk_dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .and_then(|n| usize::try_from(n).ok())
            .and_then(|n| n.checked_mul(info.elem_size))
            .ok_or_else(|| bad("chunk size overflows".into()))?;
        self.datasets.insert(
            ds,
            DatasetState {
                layout,
                storage,
                info,
                chunk_bytes: elems,
                members: BTreeSet::new(),
                last_run_entry: None,
            },
        );
        Ok(())
    }

    /// Whether `ds` is registered.
    pub fn is_registered(&self, ds: DatasetId) -> bool {
        self.datasets.contains_key(&ds)
    }

    /// A value that changes whenever a dataset is forgotten, never taking a value it (or any
    /// other cache of this process) had before, and never 0. Invariant: a dataset found
    /// registered (with the layout it was registered with) while the epoch was `e` is still
    /// registered with that layout while the epoch is `e`, so a caller can remember the
    /// check instead of repeating it (a dataset handle does, once per epoch).
    pub fn registrations_epoch(&self) -> u64 {
        self.registrations
    }

    /// Forgets a dataset after flushing and evicting its chunks (dataset close, SCC-086). On a
    /// write error the dataset stays registered and its unwritten chunks stay dirty (EC-05).
    pub fn close_dataset(&mut self, ds: DatasetId) -> Result<()> {
        self.flush_dataset(ds, true)?;
        self.datasets.remove(&ds);
        self.registrations = new_registrations_epoch();
        self.budget.clear_min(ds);
        Ok(())
    }

    /// Sets `ds`'s minimum (SCC-089); it may exceed the limit, the effective minimums are scaled.
    pub fn set_dataset_min(&mut self, ds: DatasetId, min: usize) -> Result<()> {
        self.state(ds)?;
        self.budget.set_min(ds, min);
        Ok(())
    }

    /// `ds`'s effective minimum now (0 when it has nothing resident).
    pub fn effective_dataset_min(&self, ds: DatasetId) -> usize {
        self.budget.effective_min(ds)
    }

    /// Current counters, sizes and settings.
    pub fn stats(&self) -> ChunkCacheStats {
        let mut s = self.stats.clone();
        s.limit = self.budget.limit();
        s.policy = self.policy.name();
        s.default_dataset_min = self.config.default_dataset_min;
        s.preencode_high_water = self.config.preencode_high_water;
        s.bypass_fraction = self.config.bypass_fraction;
        s.footprint = self.budget.total();
        s.entries = self.map.len();
        s.index_capacity = self.map.capacity();
        s.quiescent = self.budget.quiescent();
        s.active = self.budget.active();
        s.used = 0;
        s.dirty_entries = 0;
        s.dirty_bytes = 0;
        s.per_dataset.clear();
        for e in self.entries.iter().flatten() {
            s.used += e.chunk.mem_usage().used;
            if e.dirty {
                s.dirty_entries += 1;
                s.dirty_bytes += e.accounted;
            }
            *s.per_dataset.entry(e.dataset).or_default() += e.accounted;
        }
        s
    }

    /// The state of the resident chunk at `coord` of `ds`, if any (SCC-008).
    pub fn entry_stats(&self, ds: DatasetId, coord: &[u64]) -> Option<EntryStats> {
        let key = ChunkKey {
            dataset: ds,
            coord: ChunkCoord::new(coord)?,
        };
        let e = self.entry(self.map.get(&key)?)?;
        Some(EntryStats {
            dirty: e.dirty,
            has_values: e.has_values,
            location: e.location,
            usage: e.chunk.mem_usage(),
            image_bytes: e.image.as_ref().map(|(v, _)| v.capacity()),
            access_count: e.access_count,
            full: e.full,
            partial_bound_on_disk: e.partial_bound_on_disk,
        })
    }

    /// Number of resident chunks of `ds`.
    pub fn dataset_entries(&self, ds: DatasetId) -> usize {
        self.datasets.get(&ds).map_or(0, |s| s.members.len())
    }

    /// The memory limit.
    pub fn limit(&self) -> usize {
        self.budget.limit()
    }

    /// Changes the memory limit (not zero) and evicts, writing dirty chunks, until the footprint
    /// fits (SCC-091).
    pub fn set_limit(&mut self, limit: usize) -> Result<()> {
        if limit == 0 {
            return Err(config_err("limit", "must not be zero"));
        }
        self.budget.set_limit(limit);
        self.config.limit = limit;
        self.recycled = recycle_pool(limit);
        self.make_room(0)
    }

    /// Drops every entry, dirty ones included, and writes nothing (SCC-017, EC-06): file close
    /// calls [`flush`](ChunkCache::flush) first. Returns the dirty bytes dropped.
    pub fn destroy(self) -> usize {
        self.entries
            .iter()
            .flatten()
            .filter(|e| e.dirty)
            .map(|e| e.accounted)
            .sum()
    }

    fn state(&self, ds: DatasetId) -> Result<&DatasetState> {
        self.datasets
            .get(&ds)
            .ok_or_else(|| ChunkCacheError::UnknownDataset(ds))
    }

    fn entry(&self, id: EntryId) -> Option<&Entry> {
        self.entries.get(id.0 as usize).and_then(Option::as_ref)
    }

    fn entry_mut(&mut self, id: EntryId) -> Option<&mut Entry> {
        self.entries.get_mut(id.0 as usize).and_then(Option::as_mut)
    }

    fn lookup_id(&self, key: &ChunkKey) -> Option<EntryId> {
        self.map.get(key)
    }

    /// The slabs of whole rows of chunks (dimension 0), about [`SLAB_CHUNKS`] chunks each, that a
    /// read or write of every element of a dataset of more chunks is split into (`mem_elem`: the
    /// memory type's element size when converting): each slab's
    /// selection and its bytes in the caller's buffer (rows of the extent are contiguous there).
    /// No chunk is in two slabs. `None`: the request is served as it is (another selection, a
    /// memory selection, a small dataset, or a buffer of the wrong size, which the normal path
    /// reports).
    pub(super) fn row_slabs(
        &self,
        ds: DatasetId,
        selection: &Selection,
        in_memory: bool,
        buf_len: usize,
        mem_elem: Option<usize>,
    ) -> Result<Option<Vec<Slab>>> {
        if in_memory || !matches!(selection, Selection::All) {
            return Ok(None);
        }
        let st = self.state(ds)?;
        if !st.info.uses_cache {
            return Ok(None);
        }
        let extent = st.layout.extent();
        let dims = &st.info.chunk_dims;
        let (Some(&rows), Some(&c0)) = (extent.first(), dims.first()) else {
            return Ok(None);
        };
        if extent.len() != dims.len() || dims.contains(&0) || rows <= c0 {
            return Ok(None);
        }
        let per_row = extent[1..]
            .iter()
            .zip(&dims[1..])
            .try_fold(1u64, |a, (e, d)| a.checked_mul(e.div_ceil(*d)));
        let Some(per_row) = per_row.filter(|&n| n > 0) else {
            return Ok(None);
        };
        if per_row.saturating_mul(rows.div_ceil(c0)) <= SLAB_CHUNKS {
            return Ok(None);
        }
        let step = c0.saturating_mul((SLAB_CHUNKS / per_row).max(1));
        let elem = mem_elem.unwrap_or(st.info.elem_size);
        let row_bytes = extent[1..]
            .iter()
            .try_fold(elem as u64, |a, &e| a.checked_mul(e))
            .and_then(|b| usize::try_from(b).ok());
        let Some(row_bytes) = row_bytes else {
            return Ok(None);
        };
        if usize::try_from(rows)
            .ok()
            .and_then(|n| n.checked_mul(row_bytes))
            != Some(buf_len)
        {
            return Ok(None);
        }
        let ones = vec![1u64; extent.len()];
        let mut slabs = Vec::new();
        let mut start = 0u64;
        while start < rows {
            let end = start.saturating_add(step).min(rows);
            let mut at = vec![0u64; extent.len()];
            at[0] = start;
            let mut count = extent.clone();
            count[0] = end - start;
            let h = crate::selection::Hyperslab::new(&at, &ones, &count, &ones)?;
            // Both ends fit: `rows * row_bytes` is the buffer's length.
            let bytes = start as usize * row_bytes..end as usize * row_bytes;
            slabs.push((Selection::Hyperslab(h), bytes));
            start = end;
        }
        Ok(Some(slabs))
    }

    /// Decomposes a request after checking the buffer size (`elem_size` per element: the
    /// memory type's when converting).
    fn pieces(
        &self,
        ds: DatasetId,
        sel: &Selection,
        buf_len: usize,
        memory: Option<&MemorySelection>,
        conv: Option<&dyn Conversion>,
        to_file: bool,
    ) -> Result<Vec<ChunkPiece>> {
        let st = self.state(ds)?;
        let extent = st.extent(ds)?;
        let elem = match conv {
            Some(c) => {
                let (file, mem) = if to_file {
                    (c.dst_size(), c.src_size())
                } else {
                    (c.src_size(), c.dst_size())
                };
                if file != st.info.elem_size || mem == 0 {
                    return Err(ChunkCacheError::InvalidLayout {
                        dataset: ds,
                        reason: format!(
                            "conversion file element size {file} does not match the layout's {}",
                            st.info.elem_size
                        ),
                    });
                }
                mem
            }
            None => st.info.elem_size,
        };
        let selected = sel.num_elements(&extent)?;
        let buf_elems = match memory {
            Some(m) => m.buffer_elements()?,
            None => selected,
        };
        let needed = to_usize(buf_elems)?
            .checked_mul(elem)
            .ok_or(crate::selection::SelectionError::Overflow)?;
        if needed != buf_len {
            return Err(ChunkCacheError::BufferSize {
                needed,
                got: buf_len,
            });
        }
        let mut pieces = decompose(sel, &extent, &st.info.chunk_dims)?;
        if let Some(m) = memory {
            m.remap(&mut pieces, selected)?;
        }
        Ok(pieces)
    }

    // ---------------------------------------------------------------------------------------
    // Accounting.
    // ---------------------------------------------------------------------------------------

    /// Brings the budget and the policy up to date after an entry's chunk or image changed.
    fn reaccount(&mut self, id: EntryId) {
        let Some(e) = self.entry_mut(id) else { return };
        let now = e.footprint();
        let before = std::mem::replace(&mut e.accounted, now);
        let ds = e.dataset;
        let info = e.info();
        // Most changes (a write into a resident chunk) keep the size: the budget's ordered set
        // is then left alone.
        if now > before {
            self.budget.add(ds, now - before);
            self.note_peak();
        } else if now < before {
            self.budget.sub(ds, before - now);
        }
        self.policy.updated(id, info);
    }

    fn note_peak(&mut self) {
        self.stats.peak_footprint = self.stats.peak_footprint.max(self.budget.total());
    }

    /// Records an application access of `runs` of the entry (SCC-081): access count, stamp,
    /// coverage and the full flag; the policy sees a use.
    ///
    /// Runs for every hit, so it allocates nothing once the entry's coverage box exists, and
    /// stops tracking coverage once the entry is full (it cannot become less full).
    fn touch(&mut self, id: EntryId, runs: &[CopyRun]) {
        self.clock += 1;
        let clock = self.clock;
        let threshold = self.config.full_threshold;
        let Some(e) = self.entries.get_mut(id.0 as usize).and_then(Option::as_mut) else {
            return;
        };
        let Some(st) = self.datasets.get(&e.dataset) else {
            return;
        };
        e.access_count += 1;
        e.stamp = clock;
        let was_full = e.full;
        if !was_full {
            e.coverage.add_runs(runs, &st.info.chunk_dims);
            let inside = st.inside_dims(&e.coord.get(), &st.layout.extent());
            e.full = e.coverage.fraction(&inside) >= threshold;
            if e.full {
                e.coverage.clear();
            }
        }
        let info = e.info();
        self.policy.touched(id);
        if e_full_changed(was_full, info.full) {
            self.policy.updated(id, info);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Admission and eviction.
    // ---------------------------------------------------------------------------------------

    /// Inserts an entry (busy if `busy`) after making room for it, replacing any resident entry
    /// of the same key (a defined-only form being upgraded; it is never dirty).
    fn admit(&mut self, loaded: Loaded, busy: bool) -> Result<EntryId> {
        if let Some(old) = self.lookup_id(&loaded.key) {
            self.remove(old);
        }
        let size = loaded.chunk.mem_usage().allocated;
        self.make_room(size)?;
        let Loaded {
            key,
            chunk,
            has_values,
            udata,
            location,
            partial_bound_on_disk,
        } = loaded;
        let entry = Entry {
            coord: CompactCoord::from(&key.coord),
            dataset: key.dataset,
            chunk,
            has_values,
            location,
            udata,
            dirty: false,
            full: false,
            coverage: Coverage::default(),
            access_count: 0,
            stamp: self.clock,
            image: None,
            partial_bound_on_disk,
            accounted: 0,
        };
        let id = self.admit_raw(entry);
        if busy {
            self.policy.set_busy(id, true);
        }
        Ok(id)
    }

    /// Removes an entry without I/O, returning it (its udata and chunk drop with it).
    fn remove(&mut self, id: EntryId) -> Option<Entry> {
        let e = self.entries.get_mut(id.0 as usize)?.take()?;
        self.free.push(id.0);
        self.map.remove(&e.key());
        if let Some(st) = self.datasets.get_mut(&e.dataset) {
            st.members.remove(&id.0);
        }
        self.budget.sub(e.dataset, e.accounted);
        self.policy.removed(id);
        Some(e)
    }

    /// Evicts until `extra` more bytes fit under the limit; if nothing can be evicted the
    /// overshoot is allowed and counted (EC-03, EC-25).
    fn make_room(&mut self, extra: usize) -> Result<()> {
        let mut guard = 0usize;
        while self.budget.total().saturating_add(extra) > self.budget.limit() {
            let Some(victim) = self.policy.victim(&self.budget) else {
                self.stats.overshoots += 1;
                return Ok(());
            };
            guard += 1;
            if guard > 4 * self.entries.len() + 16 {
                // Every step removes or shrinks an entry; this is a broken policy, not a loop.
                return Err(ChunkCacheError::Internal("eviction made no progress"));
            }
            self.shrink_or_evict(victim)?;
        }
        Ok(())
    }

    /// Frees memory held by `id`: condenses it if that frees space (SCC-040), drops its values
    /// if clean and the layout keeps the defined set (SCC-054), else evicts it.
    fn shrink_or_evict(&mut self, id: EntryId) -> Result<()> {
        let Some(e) = self.entry(id) else {
            self.policy.removed(id);
            return Ok(());
        };
        let ds = e.dataset;
        let usage = e.chunk.mem_usage();
        let (caps, layout) = {
            let st = self.state(ds)?;
            (st.info.capabilities, Arc::clone(&st.layout))
        };
        if caps.contains(Capabilities::CONDENSE) && usage.allocated > usage.used {
            let before = e.accounted;
            if let Some(e) = self.entry_mut(id) {
                let u = layout.condense(&mut e.chunk).map_err(layout_err(
                    ds,
                    Some(&e.coord.get()),
                    "condense",
                ))?;
                check_usage(ds, "condense", u)?;
            }
            self.reaccount(id);
            self.stats.condensed += 1;
            if self.entry(id).is_some_and(|e| e.accounted < before) {
                return Ok(());
            }
        }
        let Some(e) = self.entry(id) else {
            return Ok(());
        };
        if caps.contains(Capabilities::DROP_VALUES)
            && !e.dirty
            && e.has_values
            && e.location.is_some()
        {
            let before = e.accounted;
            if let Some(e) = self.entry_mut(id) {
                let u = layout.drop_values(&mut e.chunk).map_err(layout_err(
                    ds,
                    Some(&e.coord.get()),
                    "drop_values",
                ))?;
                check_usage(ds, "drop_values", u)?;
                e.has_values = false;
            }
            self.reaccount(id);
            self.stats.values_dropped += 1;
            if self.entry(id).is_some_and(|e| e.accounted < before) {
                return Ok(());
            }
        }
        self.evict(id)
    }

    /// Evicts one entry, writing it first if dirty: a pre-encoded image is written as it is
    /// (SCC-075), otherwise the chunk is encoded in place (SCC-076); a clean entry is just
    /// dropped (SCC-077). On a write failure the entry stays, dirty (EC-23).
    fn evict(&mut self, id: EntryId) -> Result<()> {
        let Some(e) = self.entry(id) else {
            self.policy.removed(id);
            return Ok(());
        };
        if !e.dirty {
            if let Some(Entry {
                chunk: Chunk::Dense(buf),
                ..
            }) = self.remove(id)
            {
                self.recycled.put(buf);
            }
            self.stats.evictions += 1;
            self.stats.evictions_clean += 1;
            return Ok(());
        }
        let ds = e.dataset;
        let Some(mut e) = self.remove(id) else {
            return Ok(());
        };
        let st = self.state(ds)?;
        let layout = Arc::clone(&st.layout);
        let extent = layout.extent();
        let pb = st.partial_bound(&e.coord.get(), &extent);
        let coord = e.coord.get();
        let raw = st.raw_images() && matches!(e.chunk, Chunk::Dense(_));
        let (image, pb) = match e.image.take() {
            Some((image, image_pb)) => {
                // The cache form goes first; only the image is written.
                e.chunk = Chunk::Dense(Vec::new());
                (image, image_pb)
            }
            None if raw => match std::mem::replace(&mut e.chunk, Chunk::Dense(Vec::new())) {
                Chunk::Dense(v) => (v, pb),
                Chunk::Custom(_) => return Err(ChunkCacheError::Internal("raw custom chunk")),
            },
            None => {
                let chunk = std::mem::replace(&mut e.chunk, Chunk::Dense(Vec::new()));
                let t = Instant::now();
                let image = layout
                    .encode_in_place(&coord, chunk, pb, &mut e.udata)
                    .map_err(layout_err(ds, Some(&coord), "encode_in_place"))?;
                self.stats.encode_time += t.elapsed();
                (image, pb)
            }
        };
        match self.write_one(&layout, ds, &mut e, &image) {
            Ok(()) => {
                e.partial_bound_on_disk = pb;
                self.stats.evictions += 1;
                self.stats.evictions_dirty += 1;
                self.recycled.put(image);
                Ok(())
            }
            Err(err) => {
                // Keep the data: decode the image back and re-admit the entry, still dirty.
                // If even that fails the chunk is lost; the write error is reported either way.
                if let Ok(chunk) = layout.decode(&coord, image, pb, &mut e.udata) {
                    e.chunk = chunk;
                    e.accounted = 0;
                    self.admit_raw(e);
                }
                Err(err)
            }
        }
    }

    /// Inserts an entry as it is (no eviction), keeping its dirty state.
    fn admit_raw(&mut self, mut e: Entry) -> EntryId {
        let key = e.key();
        e.accounted = e.footprint();
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
        self.note_peak();
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
        let coord = e.coord.get();
        let mut reqs = [InsertRequest {
            coord: &coord,
            old: e.location,
            new_size: image.len() as u64,
            udata: &mut e.udata,
        }];
        self.index_changes += 1;
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
        let storage = Arc::clone(&self.state(ds)?.storage);
        storage.write_at(loc.addr, image)?;
        self.stats.bytes_written += image.len() as u64;
        Ok(())
    }

    /// Drops the pre-encoded image of an entry about to change (SCC-007).
    fn invalidate_image(&mut self, id: EntryId) {
        if self.entry_mut(id).and_then(|e| e.image.take()).is_some() {
            self.reaccount(id);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Loading.
    // ---------------------------------------------------------------------------------------

    /// Looks up `keys` (one batch per dataset, SCC-032), reads every found chunk with one
    /// vectored read (the defined-section bytes only for [`LoadKind::Defined`] when the layout
    /// can decode them alone) and decodes them in parallel. Returns the loaded chunks and the
    /// keys not found (their udata dropped, SCC-035). Keys of chunks whose defined set is all
    /// of them (`DefinedInfo::AllDefined`) under [`LoadKind::Defined`] are returned in the third
    /// list without any read (SCC-034).
    fn load(&mut self, keys: &[(ChunkKey, LoadKind)]) -> Result<LoadResult> {
        self.load_as(keys, None)
    }

    /// [`load`](Self::load), with the edge state passed to decode computed against
    /// `pb_extent.1` instead of the current extent for the chunks of dataset `pb_extent.0`
    /// (set-extent notification decodes images written under the old extent, SCC-038).
    fn load_as(
        &mut self,
        keys: &[(ChunkKey, LoadKind)],
        pb_extent: Option<(DatasetId, &[u64])>,
    ) -> Result<LoadResult> {
        let mut plan = self.load_plan(keys, pb_extent)?;
        plan.execute()?;
        self.load_finish(plan)
    }

    fn load_plan_inner(
        &mut self,
        keys: &[(ChunkKey, LoadKind)],
        pb_extent: Option<(DatasetId, &[u64])>,
    ) -> Result<LoadPlan> {
        let mut by_ds: Vec<(DatasetId, Vec<(ChunkCoord, LoadKind)>)> = Vec::new();
        for &(k, kind) in keys {
            match by_ds.iter_mut().find(|(d, _)| *d == k.dataset) {
                Some((_, v)) => v.push((k.coord, kind)),
                None => by_ds.push((k.dataset, vec![(k.coord, kind)])),
            }
        }
        let mut jobs: Vec<DecodeJob> = Vec::new();
        let mut res = LoadResult::default();
        // Taken out while the datasets' states are borrowed; put back below. A scan's own
        // spares serve first, else what admitting reads recycled.
        let mut spares = std::mem::take(&mut self.spares);
        let mut recycled = std::mem::take(&mut self.recycled);
        for (ds, coords) in &by_ds {
            let st = self.state(*ds)?;
            let layout = Arc::clone(&st.layout);
            let can_decode_defined = st.has(Capabilities::DECODE_DEFINED);
            let raw = st.raw_images();
            let extent = match pb_extent {
                Some((d, e)) if d == *ds => e.to_vec(),
                _ => layout.extent(),
            };
            let cs: Vec<ChunkCoord> = coords.iter().map(|c| c.0).collect();
            let results = layout
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
            for (r, &(coord, kind)) in results.into_iter().zip(coords) {
                let key = ChunkKey {
                    dataset: *ds,
                    coord,
                };
                let Some(loc) = r.location else {
                    res.missing.push(key); // r.udata dropped here (SCC-035)
                    continue;
                };
                let (kind, len, hint) = match (kind, r.defined) {
                    (LoadKind::Locate, _) => {
                        res.located.push((key, loc));
                        continue;
                    }
                    (LoadKind::Defined, DefinedInfo::AllDefined) => {
                        res.all_defined.push((key, loc));
                        continue;
                    }
                    (LoadKind::Defined, DefinedInfo::Bytes { len, hint }) if can_decode_defined => {
                        (LoadKind::Defined, len.min(loc.size), hint)
                    }
                    _ => (LoadKind::Values, loc.size, r.size_hint),
                };
                let size = to_usize(len)?;
                let mut image = Vec::new();
                let mut spare = Vec::new();
                let pool = if spares.is_empty() {
                    &mut recycled
                } else {
                    &mut spares
                };
                if !pool.is_empty() {
                    image = pool.take(size.max(hint));
                    // Only the growth is zeroed: the read overwrites all of it.
                    image.truncate(size);
                    if kind == LoadKind::Values && !raw {
                        spare = pool.take(st.chunk_bytes);
                    }
                }
                if image.capacity() < size.max(hint) {
                    image = Vec::with_capacity(size.max(hint));
                }
                image.resize(size, 0);
                jobs.push(DecodeJob {
                    key,
                    image,
                    udata: r.udata,
                    location: loc,
                    kind,
                    read_len: 0,
                    storage: Arc::clone(&st.storage),
                    raw,
                    partial_bound: st.partial_bound(&coord, &extent),
                    layout: Arc::clone(&layout),
                    spare,
                    leftover: Vec::new(),
                    result: None,
                });
            }
        }
        self.spares = spares;
        self.recycled = recycled;
        Ok(LoadPlan {
            jobs,
            res,
            codec: Arc::clone(&self.codec),
            index_changes: self.index_changes,
            recycle: false,
        })
    }

    /// The lookups of a load (under the caller's lock): what to read and decode.
    fn load_plan(
        &mut self,
        keys: &[(ChunkKey, LoadKind)],
        pb_extent: Option<(DatasetId, &[u64])>,
    ) -> Result<LoadPlan> {
        self.load_plan_inner(keys, pb_extent)
    }

    /// Books a load's statistics and checks its decoded chunks.
    fn load_finish(&mut self, plan: LoadPlan) -> Result<LoadResult> {
        let LoadPlan {
            jobs,
            mut res,
            recycle,
            ..
        } = plan;
        for j in &jobs {
            self.stats.bytes_read += j.read_len as u64;
        }
        for mut j in jobs {
            let pool = if recycle {
                &mut self.spares
            } else {
                &mut self.recycled
            };
            pool.put(std::mem::take(&mut j.leftover));
            pool.put(std::mem::take(&mut j.spare));
            let (r, took) = j
                .result
                .ok_or_else(|| ChunkCacheError::Internal("a decode did not run"))?;
            self.stats.decode_time += took;
            let name = match j.kind {
                LoadKind::Values => "decode",
                LoadKind::Defined | LoadKind::Locate => "decode_defined",
            };
            let chunk = r.map_err(layout_err(j.key.dataset, Some(&j.key.coord), name))?;
            self.check_chunk(j.key.dataset, name, &chunk)?;
            res.loaded.push(Loaded {
                key: j.key,
                chunk,
                has_values: j.kind == LoadKind::Values,
                udata: j.udata,
                location: Some(j.location),
                partial_bound_on_disk: j.partial_bound,
            });
        }
        Ok(res)
    }
}

/// A load planned under the cache's lock whose reading and decoding need no access to the cache
/// (so a shared cache can be unlocked meanwhile, [`ChunkCache::read_shared`]).
struct LoadPlan {
    jobs: Vec<DecodeJob>,
    res: LoadResult,
    codec: Arc<Codec>,
    /// The cache's count of index changes when the plan was made (see `ChunkCache::index_changes`).
    index_changes: u64,
    /// The buffers the decodes leave are kept for the next load of a scan (`spares.rs`).
    recycle: bool,
}

impl LoadPlan {
    /// Reads every image (one vectored read per storage) and decodes them in parallel.
    fn execute(&mut self) -> Result<()> {
        let jobs = &mut self.jobs;
        // One vectored read per storage (one in all unless files share the cache).
        let mut storages: Vec<Arc<dyn Storage>> = Vec::new();
        for j in jobs.iter() {
            if !storages.iter().any(|s| Arc::ptr_eq(s, &j.storage)) {
                storages.push(Arc::clone(&j.storage));
            }
        }
        for storage in storages {
            let mut segs: Vec<ReadSegment<'_>> = jobs
                .iter_mut()
                .filter(|j| Arc::ptr_eq(&j.storage, &storage))
                .map(|j| ReadSegment::new(j.location.addr, j.image.as_mut_slice()))
                .collect();
            storage.read_vectored(&mut segs)?;
        }
        for j in jobs.iter_mut() {
            j.read_len = j.image.len();
        }
        // Decode every image in parallel; everything else stays on this thread, in order.
        // The edge state passed is the one the image was written with, which the index does not
        // record; the cache assumes it equals the current one unless the entry remembers
        // otherwise (set-extent notification re-encodes chunks whose state changes, SCC-098).
        let decode = |j: &mut DecodeJob| {
            let image = std::mem::take(&mut j.image);
            let t = Instant::now();
            let r = match j.kind {
                LoadKind::Values if j.raw => Ok(Chunk::Dense(image)),
                LoadKind::Values if j.spare.capacity() > 0 => j
                    .layout
                    .decode_reusing(
                        &j.key.coord,
                        image,
                        j.partial_bound,
                        &mut j.udata,
                        std::mem::take(&mut j.spare),
                    )
                    .map(|(chunk, leftover)| {
                        j.leftover = leftover;
                        chunk
                    }),
                LoadKind::Values => {
                    j.layout
                        .decode(&j.key.coord, image, j.partial_bound, &mut j.udata)
                }
                LoadKind::Defined | LoadKind::Locate => {
                    j.layout.decode_defined(&j.key.coord, image, &mut j.udata)
                }
            };
            j.result = Some((r, t.elapsed()));
        };
        // Images that are their chunks need no codec: waking its threads for them only cost
        // their spinning (a fifth of the CPU of reading back W4's 1000 unfiltered datasets).
        if jobs.iter().all(|j| j.raw && j.kind == LoadKind::Values) {
            jobs.iter_mut().for_each(decode);
        } else {
            self.codec.for_each(jobs, decode);
        }
        Ok(())
    }
}

impl ChunkCache {
    /// Checks a chunk a callback produced: dense chunks have exactly the chunk's size, and no
    /// chunk reports more used than allocated bytes.
    fn check_chunk(&self, ds: DatasetId, callback: &'static str, chunk: &Chunk) -> Result<()> {
        let st = self.state(ds)?;
        if let Chunk::Dense(v) = chunk
            && v.len() != st.chunk_bytes
        {
            return Err(ChunkCacheError::InvalidLayoutSizes {
                dataset: ds,
                callback,
                expected: st.chunk_bytes,
                got: v.len(),
            });
        }
        check_usage(ds, callback, chunk.mem_usage())?;
        Ok(())
    }

    /// A new chunk from the layout, checked.
    fn new_chunk(&self, key: ChunkKey, fill: bool) -> Result<Loaded> {
        let st = self.state(key.dataset)?;
        let (chunk, udata) = st.layout.new_chunk(&key.coord, fill).map_err(layout_err(
            key.dataset,
            Some(&key.coord),
            "new_chunk",
        ))?;
        self.check_chunk(key.dataset, "new_chunk", &chunk)?;
        Ok(Loaded {
            key,
            chunk,
            has_values: true,
            udata,
            location: None,
            partial_bound_on_disk: false,
        })
    }

    // ---------------------------------------------------------------------------------------
    // Scatter, gather and fill on cache forms.
    // ---------------------------------------------------------------------------------------

    /// Copies `runs` of a chunk into `buf` (converting with `conv`): the layout's scatter when it
    /// has one, else the cache's own copy of a dense chunk.
    fn scatter_chunk(
        st: &DatasetState,
        ds: DatasetId,
        coord: &ChunkCoord,
        chunk: &Chunk,
        runs: &[CopyRun],
        buf: &mut [u8],
        conv: Option<&dyn Conversion>,
    ) -> Result<()> {
        if st.has(Capabilities::SCATTER) {
            return st
                .layout
                .scatter(chunk, runs, buf, conv)
                .map_err(layout_err(ds, Some(coord), "scatter"));
        }
        let Chunk::Dense(data) = chunk else {
            return Err(ChunkCacheError::Internal("custom chunk without scatter"));
        };
        match conv {
            None => crate::selection::scatter(data, buf, runs, st.info.elem_size)?,
            Some(c) => crate::selection::scatter_converted(data, buf, runs, c)
                .map_err(layout_err(ds, Some(coord), "conversion"))?,
        }
        Ok(())
    }

    /// Copies `runs` of `buf` into a chunk (converting with `conv`).
    fn gather_chunk(
        st: &DatasetState,
        ds: DatasetId,
        coord: &ChunkCoord,
        chunk: &mut Chunk,
        runs: &[CopyRun],
        buf: &[u8],
        conv: Option<&dyn Conversion>,
    ) -> Result<()> {
        if st.has(Capabilities::GATHER) {
            let u = st
                .layout
                .gather(chunk, runs, buf, conv)
                .map_err(layout_err(ds, Some(coord), "gather"))?;
            check_usage(ds, "gather", u)?;
            return Ok(());
        }
        let Chunk::Dense(data) = chunk else {
            return Err(ChunkCacheError::Internal("custom chunk without gather"));
        };
        match conv {
            None => crate::selection::gather(buf, data, runs, st.info.elem_size)?,
            Some(c) => crate::selection::gather_converted(buf, data, runs, c)
                .map_err(layout_err(ds, Some(coord), "conversion"))?,
        }
        Ok(())
    }

    /// Writes the fill value into `runs` of a chunk (SCC-051, OQ-16).
    fn fill_chunk(
        st: &DatasetState,
        ds: DatasetId,
        coord: &ChunkCoord,
        chunk: &mut Chunk,
        runs: &[CopyRun],
    ) -> Result<()> {
        if st.has(Capabilities::FILL) {
            let u = st
                .layout
                .fill(chunk, runs)
                .map_err(layout_err(ds, Some(coord), "fill"))?;
            check_usage(ds, "fill", u)?;
            return Ok(());
        }
        let Chunk::Dense(data) = chunk else {
            return Err(ChunkCacheError::Internal("custom chunk without fill"));
        };
        crate::selection::fill_runs(data, runs, &st.fill_value())?;
        Ok(())
    }

    /// Fills the buffer positions of `runs` with the fill value converted to the memory type
    /// (a chunk that does not exist, SCC-059).
    fn fill_buffer(
        st: &DatasetState,
        ds: DatasetId,
        runs: &[CopyRun],
        buf: &mut [u8],
        conv: Option<&dyn Conversion>,
    ) -> Result<()> {
        let fill = st.fill_value();
        let value = match conv {
            None => fill,
            Some(c) => {
                let mut v = vec![0; c.dst_size()];
                c.convert(&fill, &mut v, 1)
                    .map_err(layout_err(ds, None, "conversion"))?;
                v
            }
        };
        let as_chunk: Vec<CopyRun> = runs
            .iter()
            .map(|r| CopyRun {
                chunk_offset: r.buf_offset,
                buf_offset: 0,
                len: r.len,
            })
            .collect();
        crate::selection::fill_runs(buf, &as_chunk, &value)?;
        Ok(())
    }
}

fn e_full_changed(was: bool, now: bool) -> bool {
    was != now
}
