//! `ChunkCache::read_shared`: reads from several threads through one shared cache overlap
//! while their chunks are decoded (the exclusive lock is not held across storage reads and
//! decoding) and while hits are copied out (served under the shared lock), and give the same
//! data as serial reads, also while another thread writes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use h5_chunkcache::selection::CopyRun;
use h5_chunkcache::selection::{Hyperslab, Selection};
use h5_chunkcache::{
    Capabilities, Chunk, ChunkCache, ChunkCacheConfig, ChunkCoord, ChunkLayout, Conversion,
    DatasetId, DiskLocation, Encoded, InsertRequest, LayoutError, LayoutInfo, Lookup, ReadRequest,
    SharedChunkCache, Udata, WriteRequest,
};
use h5_io::testkit::{Hooks, Intercept};
use h5_io::{MemoryStorage, Storage};

/// Chunk locations of a mock layout with one dimension: found by the first coordinate,
/// allocated at increasing addresses.
#[derive(Debug, Default)]
struct MemIndex {
    index: Mutex<HashMap<u64, DiskLocation>>,
    alloc: AtomicU64,
    /// A chunk rewritten at its old size keeps its place (as unfiltered chunks of files do).
    in_place: AtomicBool,
}

impl MemIndex {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let index = self.index.lock().unwrap();
        Ok(coords
            .iter()
            .map(|c| Lookup::dense(index.get(&c.as_slice()[0]).copied(), 4, Box::new(())))
            .collect())
    }

    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        let mut index = self.index.lock().unwrap();
        Ok(reqs
            .iter()
            .map(|r| {
                let loc = match r.old {
                    Some(old) if old.size == r.new_size && self.in_place.load(Ordering::SeqCst) => {
                        old
                    }
                    _ => DiskLocation {
                        addr: self.alloc.fetch_add(r.new_size, Ordering::SeqCst),
                        size: r.new_size,
                    },
                };
                index.insert(r.coord.as_slice()[0], loc);
                loc
            })
            .collect())
    }

    fn delete(&self, c: &ChunkCoord) -> Result<(), LayoutError> {
        self.index.lock().unwrap().remove(&c.as_slice()[0]);
        Ok(())
    }
}

/// Makes each caller wait (up to 5 s) until two callers are inside at once, and records the
/// most that were inside together.
#[derive(Debug, Default)]
struct Meeting {
    /// (callers inside now, callers arrived so far)
    inside: Mutex<(usize, usize)>,
    wake: Condvar,
    max_inside: AtomicUsize,
}

impl Meeting {
    fn meet(&self) {
        let mut n = self.inside.lock().unwrap();
        n.0 += 1;
        n.1 += 1;
        self.max_inside.fetch_max(n.0, Ordering::SeqCst);
        self.wake.notify_all();
        let (mut n, _) = self
            .wake
            .wait_timeout_while(n, Duration::from_secs(5), |n| n.1 < 2)
            .unwrap();
        n.0 -= 1;
    }

    fn most_inside(&self) -> usize {
        self.max_inside.load(Ordering::SeqCst)
    }
}

/// Where a [`MeetingLayout`] makes its callers meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MeetAt {
    /// In `decode` (a codec layout).
    Decode,
    /// In `scatter` (the copy of a resident chunk into a reader's buffer), once armed.
    Scatter,
    /// Not with another call: `decode` (a codec layout), once armed, waits at the layout's
    /// [`Gate`] until it opens.
    Gate,
}

/// Holds the calls that reach it until it is opened, and tells how many arrived.
#[derive(Debug, Default)]
struct Gate {
    /// (calls arrived, open)
    state: Mutex<(usize, bool)>,
    wake: Condvar,
}

impl Gate {
    /// Waits (up to 5 s) until the gate is open.
    fn pass(&self) {
        let mut st = self.state.lock().unwrap();
        st.0 += 1;
        self.wake.notify_all();
        let _ = self
            .wake
            .wait_timeout_while(st, Duration::from_secs(5), |st| !st.1)
            .unwrap();
    }

    /// Waits (up to 5 s) until `n` calls have arrived; returns how many did.
    fn wait_for(&self, n: usize) -> usize {
        let st = self.state.lock().unwrap();
        let (st, _) = self
            .wake
            .wait_timeout_while(st, Duration::from_secs(5), |st| st.0 < n)
            .unwrap();
        st.0
    }

    fn open(&self) {
        self.state.lock().unwrap().1 = true;
        self.wake.notify_all();
    }
}

/// A layout of 4-byte chunks over 8 elements whose callbacks at `at` meet another call.
#[derive(Debug)]
struct MeetingLayout {
    at: MeetAt,
    index: MemIndex,
    armed: AtomicBool,
    meeting: Meeting,
    gate: Gate,
}

impl MeetingLayout {
    fn new(at: MeetAt) -> Self {
        Self {
            at,
            index: MemIndex::default(),
            armed: AtomicBool::new(false),
            meeting: Meeting::default(),
            gate: Gate::default(),
        }
    }
}

impl ChunkLayout for MeetingLayout {
    fn query(&self) -> LayoutInfo {
        let dense = LayoutInfo::dense(&[4], 1, &[]);
        match self.at {
            MeetAt::Decode | MeetAt::Gate => LayoutInfo {
                needs_codec: true,
                ..dense
            },
            MeetAt::Scatter => LayoutInfo {
                capabilities: Capabilities::SCATTER,
                ..dense
            },
        }
    }
    fn extent(&self) -> Vec<u64> {
        vec![8]
    }
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        self.index.lookup(coords)
    }
    fn decode(
        &self,
        _: &ChunkCoord,
        image: Vec<u8>,
        _: bool,
        _: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        match self.at {
            MeetAt::Decode => self.meeting.meet(),
            MeetAt::Gate if self.armed.load(Ordering::SeqCst) => self.gate.pass(),
            _ => {}
        }
        Ok(Chunk::Dense(image))
    }
    fn scatter(
        &self,
        chunk: &Chunk,
        runs: &[CopyRun],
        buf: &mut [u8],
        _: Option<&dyn Conversion>,
    ) -> Result<(), LayoutError> {
        if self.armed.load(Ordering::SeqCst) {
            self.meeting.meet();
        }
        let data = chunk.as_dense().ok_or("dense")?;
        for r in runs {
            let (c, b, l) = (
                r.chunk_offset as usize,
                r.buf_offset as usize,
                r.len as usize,
            );
            buf[b..b + l].copy_from_slice(&data[c..c + l]);
        }
        Ok(())
    }
    fn new_chunk(&self, _: &ChunkCoord, _: bool) -> Result<(Chunk, Udata), LayoutError> {
        Ok((Chunk::Dense(vec![0; 4]), Box::new(())))
    }
    fn encode(
        &self,
        _: &ChunkCoord,
        c: &Chunk,
        _: bool,
        _: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        Ok(Encoded::Owned(c.as_dense().ok_or("dense")?.to_vec()))
    }
    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        self.index.insert(reqs)
    }
    fn delete_chunk(
        &self,
        c: &ChunkCoord,
        _: Option<DiskLocation>,
        _: &mut Udata,
    ) -> Result<(), LayoutError> {
        self.index.delete(c)
    }
}

#[test]
fn shared_reads_overlap_while_decoding() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let layout = Arc::new(MeetingLayout::new(MeetAt::Decode));
    {
        let mut c = ChunkCache::new(Arc::clone(&storage), ChunkCacheConfig::default()).unwrap();
        c.register(DatasetId(1), layout.clone()).unwrap();
        let all = Selection::All;
        c.write(&[WriteRequest::new(
            DatasetId(1),
            &all,
            &[1, 2, 3, 4, 5, 6, 7, 8],
        )])
        .unwrap();
        c.flush().unwrap();
    }
    let cache = SharedChunkCache::new(
        ChunkCache::new(
            Arc::clone(&storage),
            ChunkCacheConfig {
                threads: Some(1),
                ..ChunkCacheConfig::default()
            },
        )
        .unwrap(),
    );
    cache
        .lock()
        .unwrap()
        .register(DatasetId(1), layout.clone())
        .unwrap();
    assert_eq!(read_both(&cache), [vec![1, 2, 3, 4], vec![5, 6, 7, 8]]);
    // Both decodes ran at the same time: neither thread held the cache's lock while decoding.
    assert_eq!(layout.meeting.most_inside(), 2);
    let st = cache.lock().unwrap().stats();
    assert_eq!((st.misses, st.entries), (2, 2));
}

/// Reads `[start, start + 4)` of dataset 1 through the shared cache.
fn read4(cache: &SharedChunkCache, start: u64) -> Vec<u8> {
    let sel = Selection::Hyperslab(Hyperslab::contiguous(&[start], &[4]).unwrap());
    let mut buf = vec![0u8; 4];
    ChunkCache::read_shared(cache, &mut [ReadRequest::new(DatasetId(1), &sel, &mut buf)]).unwrap();
    buf
}

/// A cache with room for one of dataset 1's 4-byte chunks (writes of one chunk evict the other).
fn one_chunk() -> ChunkCacheConfig {
    ChunkCacheConfig {
        limit: 6,
        bypass_fraction: 1.0,
        ..ChunkCacheConfig::default()
    }
}

/// A [`one_chunk`] shared cache over fresh memory storage, with dataset 1 registered on a
/// [`MeetingLayout`] meeting at `at`.
fn one_chunk_cache(at: MeetAt) -> (Arc<dyn Storage>, Arc<MeetingLayout>, SharedChunkCache) {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let layout = Arc::new(MeetingLayout::new(at));
    let cache = SharedChunkCache::new(ChunkCache::new(Arc::clone(&storage), one_chunk()).unwrap());
    cache
        .lock()
        .unwrap()
        .register(DatasetId(1), layout.clone())
        .unwrap();
    (storage, layout, cache)
}

/// Writes `v` into every element of chunk `chunk` of dataset 1.
fn write4(cache: &SharedChunkCache, chunk: u64, v: u8) {
    let sel = Selection::Hyperslab(Hyperslab::contiguous(&[4 * chunk], &[4]).unwrap());
    cache
        .lock()
        .unwrap()
        .write(&[WriteRequest::new(DatasetId(1), &sel, &[v; 4])])
        .unwrap();
}

/// Reads the two chunks of dataset 1 from two threads at once.
fn read_both(cache: &SharedChunkCache) -> Vec<Vec<u8>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = [0u64, 4]
            .into_iter()
            .map(|start| s.spawn(move || read4(cache, start)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn hits_are_copied_out_in_parallel() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let layout = Arc::new(MeetingLayout::new(MeetAt::Scatter));
    let cache = SharedChunkCache::new(
        ChunkCache::new(Arc::clone(&storage), ChunkCacheConfig::default()).unwrap(),
    );
    {
        let mut c = cache.lock().unwrap();
        c.register(DatasetId(1), layout.clone()).unwrap();
        let all = Selection::All;
        c.write(&[WriteRequest::new(
            DatasetId(1),
            &all,
            &[1, 2, 3, 4, 5, 6, 7, 8],
        )])
        .unwrap();
    }
    // Both chunks are resident (written, not yet flushed): the reads below are hits.
    layout.armed.store(true, Ordering::SeqCst);
    assert_eq!(read_both(&cache), [vec![1, 2, 3, 4], vec![5, 6, 7, 8]]);
    // Both copies ran at the same time: hits do not take the cache exclusively.
    assert_eq!(layout.meeting.most_inside(), 2);
    // The hits were recorded afterwards (counters and the replacement policy's accesses).
    let st = cache.lock().unwrap().stats();
    assert_eq!((st.hits, st.misses, st.entries), (2, 0, 2));
    let e = cache
        .read()
        .unwrap()
        .entry_stats(DatasetId(1), &[1])
        .expect("resident");
    assert_eq!(e.access_count, 2, "one write and one read");
}

#[test]
fn readers_see_whole_chunks_while_a_writer_changes_them() {
    // Eight readers of cached data and one writer overwriting every chunk with one value per
    // round: each chunk a reader sees holds a single round's value (never a mix), and the
    // values a reader sees never go back.
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let layout = Arc::new(MeetingLayout::new(MeetAt::Scatter));
    let cache = SharedChunkCache::new(
        ChunkCache::new(Arc::clone(&storage), ChunkCacheConfig::default()).unwrap(),
    );
    cache
        .lock()
        .unwrap()
        .register(DatasetId(1), layout.clone())
        .unwrap();
    let write = |v: u8| {
        let all = Selection::All;
        cache
            .lock()
            .unwrap()
            .write(&[WriteRequest::new(DatasetId(1), &all, &[v; 8])])
            .unwrap();
    };
    write(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                let mut last = [0u8; 2];
                for _ in 0..2000 {
                    for (k, start) in [0u64, 4].into_iter().enumerate() {
                        let b = read4(&cache, start);
                        assert!(b.iter().all(|&x| x == b[0]), "a torn chunk: {b:?}");
                        assert!(b[0] >= last[k], "went back from {} to {}", last[k], b[0]);
                        last[k] = b[0];
                    }
                }
            });
        }
        s.spawn(|| {
            for v in 1..=200u8 {
                write(v);
            }
        });
    });
    assert_eq!(read4(&cache, 0), [200; 4]);
    let st = cache.lock().unwrap().stats();
    assert_eq!(st.misses, 0, "every read was served from the cache");
    assert_eq!(
        st.hits,
        8 * 2000 * 2 + 1,
        "every read above, and the last one"
    );
}

#[test]
fn hits_from_more_threads_than_stripes_are_all_counted() {
    // Twenty readers (more than the cache's stripes of pending hits, so some share one) of two
    // resident chunks, enough hits each that readers record pending hits themselves: the
    // counters and every entry's access count are exact afterwards.
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let layout = Arc::new(MeetingLayout::new(MeetAt::Scatter));
    let cache = SharedChunkCache::new(
        ChunkCache::new(Arc::clone(&storage), ChunkCacheConfig::default()).unwrap(),
    );
    {
        let mut c = cache.lock().unwrap();
        c.register(DatasetId(1), layout.clone()).unwrap();
        let all = Selection::All;
        c.write(&[WriteRequest::new(
            DatasetId(1),
            &all,
            &[1, 2, 3, 4, 5, 6, 7, 8],
        )])
        .unwrap();
    }
    const THREADS: u64 = 20;
    const ROUNDS: u64 = 700;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let cache = &cache;
            s.spawn(move || {
                for i in 0..ROUNDS {
                    let start = 4 * ((t + i) % 2);
                    let want: Vec<u8> = (start as u8 + 1..start as u8 + 5).collect();
                    assert_eq!(read4(cache, start), want);
                }
            });
        }
    });
    let st = cache.lock().unwrap().stats();
    assert_eq!((st.hits, st.misses), (THREADS * ROUNDS, 0));
    for chunk in [0u64, 1] {
        let e = cache
            .read()
            .unwrap()
            .entry_stats(DatasetId(1), &[chunk])
            .expect("resident");
        assert_eq!(
            e.access_count,
            1 + THREADS * ROUNDS / 2,
            "chunk {chunk}: its write and half of the reads"
        );
    }
}

#[test]
fn no_dirty_chunk_is_lost_while_readers_hit_and_the_writer_evicts() {
    // A cache holding one 4-byte chunk: the writer's writes alternate between the two chunks,
    // each evicting the other one dirty, while eight readers hit and miss. Readers see whole
    // chunks whose values never go back; afterwards the file holds the last value written to
    // each chunk.
    let (storage, layout, cache) = one_chunk_cache(MeetAt::Scatter);
    let write_chunk = |chunk: u64, v: u8| write4(&cache, chunk, v);
    write_chunk(0, 0);
    write_chunk(1, 0);
    const LAST: u8 = 201;
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                let mut last = [0u8; 2];
                for _ in 0..300 {
                    for (k, start) in [0u64, 4].into_iter().enumerate() {
                        let b = read4(&cache, start);
                        assert!(b.iter().all(|&x| x == b[0]), "a torn chunk: {b:?}");
                        assert!(b[0] >= last[k], "went back from {} to {}", last[k], b[0]);
                        last[k] = b[0];
                    }
                }
            });
        }
        s.spawn(|| {
            for v in 1..=LAST {
                write_chunk(u64::from(v % 2), v);
            }
        });
    });
    let st = cache.lock().unwrap().stats();
    assert!(st.evictions_dirty > 0, "dirty chunks were evicted: {st:?}");
    assert_eq!(st.hits + st.misses, 8 * 300 * 2, "every read counted once");
    cache.lock().unwrap().flush().unwrap();
    let fresh = SharedChunkCache::new(ChunkCache::new(Arc::clone(&storage), one_chunk()).unwrap());
    fresh
        .lock()
        .unwrap()
        .register(DatasetId(1), layout.clone())
        .unwrap();
    assert_eq!(read4(&fresh, 0), [LAST - 1; 4]);
    assert_eq!(read4(&fresh, 4), [LAST; 4]);
}

#[test]
fn a_load_planned_before_a_chunk_was_written_back_is_not_admitted() {
    // A reader plans the load of chunk 0 (not resident: the index names the bytes of value 1)
    // and is held in its decode, without the lock. Meanwhile the writer writes chunk 0 (value 2,
    // resident and dirty: the index still names value 1's bytes) and then chunk 1, which evicts
    // chunk 0 and writes it back (the index now names value 2's bytes). The reader's load read
    // value 1: it must not admit it, or the cache would serve value 1 from then on over the 2
    // the file holds; it reads the chunk again with the cache held and returns 2.
    let (_storage, layout, cache) = one_chunk_cache(MeetAt::Gate);
    let write_chunk = |chunk: u64, v: u8| write4(&cache, chunk, v);
    write_chunk(0, 1);
    write_chunk(1, 1);
    cache.lock().unwrap().flush_and_evict_all().unwrap();
    layout.armed.store(true, Ordering::SeqCst);
    let seen = std::thread::scope(|s| {
        let reader = s.spawn(|| read4(&cache, 0));
        assert_eq!(layout.gate.wait_for(1), 1, "the reader reached its decode");
        write_chunk(0, 2);
        write_chunk(1, 3);
        layout.gate.open();
        reader.join().unwrap()
    });
    assert_eq!(seen, [2; 4], "the reader's batch read again");
    assert_eq!(cache.lock().unwrap().stats().reloads, 1);
    layout.armed.store(false, Ordering::SeqCst);
    assert_eq!(read4(&cache, 0), [2; 4], "chunk 0 after the reader's load");
    assert_eq!(read4(&cache, 4), [3; 4], "chunk 1");
}

/// Hooks of a memory storage whose reads, once armed, copy the first half of a read, wait (up to
/// 5 s) at a [`Gate`] and then copy the second half: a read torn by a write between the halves.
/// Arming tears the next read only.
#[derive(Debug, Default)]
struct Tearing {
    armed: AtomicBool,
    gate: Gate,
}

impl Hooks for Tearing {
    fn read_at(&self, inner: &dyn Storage, offset: u64, buf: &mut [u8]) -> h5_io::Result<()> {
        if !self.armed.swap(false, Ordering::SeqCst) {
            return inner.read_at(offset, buf);
        }
        let half = buf.len() / 2;
        let (first, second) = buf.split_at_mut(half);
        inner.read_at(offset, first)?;
        self.gate.pass();
        inner.read_at(offset + half as u64, second)
    }
}

#[test]
fn a_load_torn_by_an_in_place_rewrite_is_read_again() {
    // Chunks rewritten in place (as unfiltered chunks are). A reader's storage read of chunk 0
    // (value 1) stops halfway, without the cache's lock; the writer rewrites chunk 0 in place
    // (value 2) and flushes it; the reader's read then finishes with the new second half. The
    // reader must not return that torn chunk: its batch is read again with the cache held.
    let storage = Arc::new(Intercept::new(MemoryStorage::new(), Tearing::default()));
    let layout = Arc::new(MeetingLayout::new(MeetAt::Scatter));
    layout.index.in_place.store(true, Ordering::SeqCst);
    let dyn_storage: Arc<dyn Storage> = storage.clone();
    let cache = SharedChunkCache::new(ChunkCache::new(dyn_storage, one_chunk()).unwrap());
    cache
        .lock()
        .unwrap()
        .register(DatasetId(1), layout.clone())
        .unwrap();
    write4(&cache, 0, 1);
    cache.lock().unwrap().flush_and_evict_all().unwrap();
    let place = layout.index.index.lock().unwrap()[&0];
    storage.hooks().armed.store(true, Ordering::SeqCst);
    let seen = std::thread::scope(|s| {
        let reader = s.spawn(|| read4(&cache, 0));
        assert_eq!(
            storage.hooks().gate.wait_for(1),
            1,
            "the reader's read stopped halfway"
        );
        write4(&cache, 0, 2);
        cache.lock().unwrap().flush_and_evict_all().unwrap();
        storage.hooks().gate.open();
        reader.join().unwrap()
    });
    assert_eq!(
        layout.index.index.lock().unwrap()[&0],
        place,
        "rewritten in place"
    );
    assert_eq!(seen, [2; 4], "the chunk read again, whole");
    assert_eq!(cache.lock().unwrap().stats().reloads, 1);
    assert_eq!(read4(&cache, 0), [2; 4]);
}

/// Chunks of the scan-overlap layout (1 MiB each: with two codec threads, a scan's batch is
/// two of them).
const SCAN_CHUNK: u64 = 1 << 20;
const SCAN_CHUNKS: usize = 6;

/// A codec layout of [`SCAN_CHUNKS`] one-byte-element chunks, chunk `k` holding `k` in every
/// byte, that records whether a scan copies each batch out while it decodes the next: the
/// decode of chunk `k` waits (up to 5 s) until the copy of chunk `k - 2` (the batch before) has
/// started, and the copy of chunk `k` waits (up to 5 s) for the decode of chunk `k + 2` to start.
/// A scan that decodes a batch before copying the previous one out (or after) never has such a
/// decode start during such a copy.
#[derive(Debug, Default)]
struct OverlapLayout {
    index: MemIndex,
    /// (decodes started, copies started), by chunk.
    started: Mutex<(Vec<bool>, Vec<bool>)>,
    wake: Condvar,
    /// Copies during which the next batch's decode of the matching chunk started.
    overlapped: AtomicUsize,
}

impl OverlapLayout {
    /// Waits (up to 5 s) until `until` holds on the (decodes, copies) started; returns the
    /// guard.
    fn wait<'a>(
        &'a self,
        st: std::sync::MutexGuard<'a, (Vec<bool>, Vec<bool>)>,
        until: impl Fn(&(Vec<bool>, Vec<bool>)) -> bool,
    ) -> std::sync::MutexGuard<'a, (Vec<bool>, Vec<bool>)> {
        self.wake
            .wait_timeout_while(st, Duration::from_secs(5), |s| !until(s))
            .unwrap()
            .0
    }

    fn started(&self) -> std::sync::MutexGuard<'_, (Vec<bool>, Vec<bool>)> {
        let mut st = self.started.lock().unwrap();
        if st.0.is_empty() {
            *st = (vec![false; SCAN_CHUNKS], vec![false; SCAN_CHUNKS]);
        }
        st
    }

    /// The decode of chunk `k` starts once the copy of chunk `k - 2` has (or after 5 s).
    fn decode_starts(&self, k: usize) {
        let mut st = self.wait(self.started(), |s| k < 2 || s.1[k - 2]);
        st.0[k] = true;
        self.wake.notify_all();
    }

    /// The copy of chunk `k` starts, then waits (up to 5 s) for the decode of chunk `k + 2`;
    /// returns whether that decode started while it waited.
    fn copy_starts(&self, k: usize) -> bool {
        let mut st = self.started();
        st.1[k] = true;
        self.wake.notify_all();
        if k + 2 >= SCAN_CHUNKS || st.0[k + 2] {
            return false;
        }
        self.wait(st, |s| s.0[k + 2]).0[k + 2]
    }
}

impl ChunkLayout for OverlapLayout {
    fn query(&self) -> LayoutInfo {
        LayoutInfo {
            needs_codec: true,
            capabilities: Capabilities::SCATTER,
            ..LayoutInfo::dense(&[SCAN_CHUNK], 1, &[])
        }
    }
    fn extent(&self) -> Vec<u64> {
        vec![SCAN_CHUNK * SCAN_CHUNKS as u64]
    }
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        self.index.lookup(coords)
    }
    fn decode(
        &self,
        c: &ChunkCoord,
        image: Vec<u8>,
        _: bool,
        _: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        self.decode_starts(c.as_slice()[0] as usize);
        Ok(Chunk::Dense(image))
    }
    fn scatter(
        &self,
        chunk: &Chunk,
        runs: &[CopyRun],
        buf: &mut [u8],
        _: Option<&dyn Conversion>,
    ) -> Result<(), LayoutError> {
        let data = chunk.as_dense().ok_or("dense")?;
        if self.copy_starts(usize::from(data[0])) {
            self.overlapped.fetch_add(1, Ordering::SeqCst);
        }
        for r in runs {
            let (c, b, l) = (
                r.chunk_offset as usize,
                r.buf_offset as usize,
                r.len as usize,
            );
            buf[b..b + l].copy_from_slice(&data[c..c + l]);
        }
        Ok(())
    }
    fn new_chunk(&self, _: &ChunkCoord, _: bool) -> Result<(Chunk, Udata), LayoutError> {
        Ok((Chunk::Dense(vec![0; SCAN_CHUNK as usize]), Box::new(())))
    }
    fn encode(
        &self,
        _: &ChunkCoord,
        c: &Chunk,
        _: bool,
        _: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        Ok(Encoded::Owned(c.as_dense().ok_or("dense")?.to_vec()))
    }
    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        self.index.insert(reqs)
    }
    fn delete_chunk(
        &self,
        c: &ChunkCoord,
        _: Option<DiskLocation>,
        _: &mut Udata,
    ) -> Result<(), LayoutError> {
        self.index.delete(c)
    }
}

/// A scan (a read of more than the limit) decodes each batch of chunks while the batch before
/// it is copied into the caller's buffer, through the shared and the private cache; the values
/// are the stored ones.
#[test]
fn a_scan_decodes_the_next_batch_while_it_copies_one_out() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let data: Vec<u8> = (0..SCAN_CHUNKS)
        .flat_map(|k| std::iter::repeat_n(k as u8, SCAN_CHUNK as usize))
        .collect();
    let all = Selection::All;
    let written = Arc::new(OverlapLayout::default());
    {
        let mut c = ChunkCache::new(Arc::clone(&storage), ChunkCacheConfig::default()).unwrap();
        c.register(DatasetId(1), written.clone()).unwrap();
        c.write(&[WriteRequest::new(DatasetId(1), &all, &data)])
            .unwrap();
        c.flush().unwrap();
    }
    // A layout that finds the chunks where the writer put them.
    let reader = || {
        let l = OverlapLayout::default();
        l.index
            .index
            .lock()
            .unwrap()
            .clone_from(&written.index.index.lock().unwrap());
        Arc::new(l)
    };
    let scanning = || {
        ChunkCache::new(
            Arc::clone(&storage),
            ChunkCacheConfig {
                limit: 2 * SCAN_CHUNK as usize,
                threads: Some(2),
                ..ChunkCacheConfig::default()
            },
        )
        .unwrap()
    };
    // Through the shared cache.
    let layout = reader();
    let shared = SharedChunkCache::new(scanning());
    shared
        .lock()
        .unwrap()
        .register(DatasetId(1), layout.clone())
        .unwrap();
    let mut buf = vec![0u8; data.len()];
    ChunkCache::read_shared(
        &shared,
        &mut [ReadRequest::new(DatasetId(1), &all, &mut buf)],
    )
    .unwrap();
    assert!(buf == data);
    assert_eq!(layout.overlapped.load(Ordering::SeqCst), SCAN_CHUNKS - 2);
    assert_eq!(
        shared.lock().unwrap().stats().scan_loads,
        SCAN_CHUNKS as u64
    );
    // Through the private cache.
    let layout = reader();
    let mut c = scanning();
    c.register(DatasetId(1), layout.clone()).unwrap();
    let mut buf = vec![0u8; data.len()];
    c.read(&mut [ReadRequest::new(DatasetId(1), &all, &mut buf)])
        .unwrap();
    assert!(buf == data);
    assert_eq!(layout.overlapped.load(Ordering::SeqCst), SCAN_CHUNKS - 2);
}
