//! Integration tests of the chunk cache's read, write, flush and eviction flows against a
//! recording mock layout and metered in-memory storage.

use crate::common;

use std::sync::Arc;

use common::{Event, MockLayout};
use h5_chunkcache::selection::{Hyperslab, Selection};
use h5_chunkcache::{
    CLOSE_BATCH_BYTES, ChunkCache, ChunkCacheConfig, ChunkCacheError, DatasetId, ReadRequest,
    SharedChunkCache, WriteRequest,
};
use h5_io::{MemoryStorage, Metrics, Storage};

type Store = Arc<Metrics<MemoryStorage>>;

fn store() -> Store {
    Arc::new(Metrics::new(MemoryStorage::new()))
}

fn cache(s: &Store, limit: usize) -> ChunkCache {
    let storage: Arc<dyn Storage> = s.clone();
    ChunkCache::new(
        storage,
        ChunkCacheConfig {
            limit,
            default_dataset_min: 0,
            bypass_fraction: 1.0,
            preencode_high_water: None,
            ..ChunkCacheConfig::default()
        },
    )
    .unwrap()
}

fn slab(start: &[u64], shape: &[u64]) -> Selection {
    Selection::Hyperslab(Hyperslab::contiguous(start, shape).unwrap())
}

fn read(c: &mut ChunkCache, ds: u64, sel: &Selection, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    c.read(&mut [ReadRequest::new(DatasetId(ds), sel, &mut buf)])
        .unwrap();
    buf
}

fn write(c: &mut ChunkCache, ds: u64, sel: &Selection, data: &[u8]) {
    c.write(&[WriteRequest::new(DatasetId(ds), sel, data)])
        .unwrap();
}

/// SCC-120: the V0 round trip. 1-D, 5 one-byte elements in one chunk, fill 7; writing positions
/// 1–3 traces lookup (not found), new chunk with fill; flush traces encode, insert and one storage
/// write; a fresh cache traces lookup (found), one storage read, decode; positions 0 and 4 read
/// the fill value.
#[test]
fn scc_120_v0_round_trip() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[5], &[5], 1, &[7]).with_codec());
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &slab(&[1], &[3]), &[1, 2, 3]);
    assert_eq!(
        m.take_events(),
        [
            Event::Lookup(1, vec![vec![0]], 0),
            Event::NewChunk(1, vec![0], true)
        ]
    );
    c.flush().unwrap();
    assert_eq!(
        m.take_events(),
        [Event::Encode(1, vec![0]), Event::Insert(1, 1)]
    );
    let snap = s.snapshot();
    assert_eq!(snap.writes + snap.write_vectors, 1);
    c.destroy();
    assert_eq!(m.live_udata(), 0);

    let before = s.snapshot();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let got = read(&mut c, 1, &Selection::All, 5);
    assert_eq!(got, [7, 1, 2, 3, 7]);
    assert_eq!(
        m.take_events(),
        [
            Event::Lookup(1, vec![vec![0]], 1),
            Event::Decode(1, vec![0])
        ]
    );
    let d = s.snapshot().since(&before);
    assert_eq!(d.reads + d.read_vectors, 1);
    assert_eq!(d.writes + d.write_vectors, 0);
}

/// SCC-058: a read touching 4 uncached chunks of 2 datasets does one lookup per dataset, one
/// vectored read of 4 segments and 4 decodes; repeating it reads nothing and hits 4 times.
#[test]
fn scc_058_batched_miss_path() {
    let s = store();
    let a = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[]).with_codec());
    let b = Arc::new(
        MockLayout::new(2, &[8], &[4], 1, &[])
            .with_codec()
            .sharing(&a),
    );
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), a.clone()).unwrap();
    c.register(DatasetId(2), b.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1, 2, 3, 4, 5, 6, 7, 8]);
    write(&mut c, 2, &Selection::All, &[9, 10, 11, 12, 13, 14, 15, 16]);
    c.flush().unwrap();
    c.destroy();
    a.take_events();

    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), a.clone()).unwrap();
    c.register(DatasetId(2), b.clone()).unwrap();
    let all = Selection::All;
    for round in 0..2 {
        let before = s.snapshot();
        let (mut x, mut y) = (vec![0u8; 8], vec![0u8; 8]);
        c.read(&mut [
            ReadRequest::new(DatasetId(1), &all, &mut x),
            ReadRequest::new(DatasetId(2), &all, &mut y),
        ])
        .unwrap();
        assert_eq!(x, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(y, [9, 10, 11, 12, 13, 14, 15, 16]);
        let d = s.snapshot().since(&before);
        let ev = a.take_events();
        if round == 0 {
            assert_eq!((d.read_vectors, d.read_segments, d.reads), (1, 4, 0));
            let lookups = ev.iter().filter(|e| matches!(e, Event::Lookup(..))).count();
            let decodes = ev.iter().filter(|e| matches!(e, Event::Decode(..))).count();
            assert_eq!((lookups, decodes), (2, 4));
        } else {
            assert_eq!((d.read_vectors, d.reads), (0, 0));
            assert!(ev.is_empty());
            assert_eq!(c.stats().hits, 4);
        }
    }
}

/// SCC-059: a chunk that does not exist reads as the fill value, creates no entry and its udata
/// is dropped at once.
#[test]
fn scc_059_missing_chunk_reads_fill() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[4], &[2], 2, &[0xAB, 0xCD]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let got = read(&mut c, 1, &slab(&[1], &[2]), 4);
    assert_eq!(got, [0xAB, 0xCD, 0xAB, 0xCD]);
    assert_eq!(c.stats().entries, 0);
    assert_eq!(m.live_udata(), 0);
    assert_eq!(s.snapshot().reads + s.snapshot().read_vectors, 0);
}

/// SCC-020: flush writes every dirty chunk and keeps them resident and clean.
#[test]
fn scc_020_flush_keeps_entries_clean() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[2], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1; 8]);
    assert_eq!(c.stats().dirty_entries, 4);
    c.flush().unwrap();
    let st = c.stats();
    assert_eq!((st.entries, st.dirty_entries), (4, 0));
    assert_eq!(read(&mut c, 1, &Selection::All, 8), [1; 8]);
}

/// SCC-021: flushing one dataset writes only its chunks; the evicting form also drops them.
#[test]
fn scc_021_flush_one_dataset_with_evict() {
    let s = store();
    let a = Arc::new(MockLayout::new(1, &[4], &[2], 1, &[]));
    let b = Arc::new(MockLayout::new(2, &[4], &[2], 1, &[]).sharing(&a));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), a.clone()).unwrap();
    c.register(DatasetId(2), b.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1; 4]);
    write(&mut c, 2, &Selection::All, &[2; 4]);
    c.flush_dataset(DatasetId(1), true).unwrap();
    let st = c.stats();
    assert_eq!((st.entries, st.dirty_entries), (2, 2));
    assert!(!st.per_dataset.contains_key(&DatasetId(1)));
    assert_eq!(s.snapshot().write_segments, 2);
    assert_eq!(a.index.lock().unwrap().len(), 2);
    assert_eq!(b.index.lock().unwrap().len(), 0);
    assert_eq!(read(&mut c, 1, &Selection::All, 4), [1; 4]);
}

/// A file's close (`flush_and_evict_all`) places and writes every chunk as `flush` does (the
/// same callbacks in the same order, the same locations and bytes), in batches of at least
/// `CLOSE_BATCH_BYTES`, and leaves no entry. A half-written dataset keeps its fill.
#[test]
fn flush_and_evict_all_writes_what_flush_writes_a_batch_at_a_time() {
    const CHUNK: u64 = 16 << 10;
    const PER_DATASET: u64 = 96 * CHUNK; // 1.5 MiB: three datasets pass one batch
    let run = |evict: bool| {
        let s = store();
        let first = Arc::new(MockLayout::new(1, &[PER_DATASET], &[CHUNK], 1, &[9]));
        let mut layouts = vec![Arc::clone(&first)];
        for tag in 2..=5 {
            layouts.push(Arc::new(
                MockLayout::new(tag, &[PER_DATASET], &[CHUNK], 1, &[9]).sharing(&first),
            ));
        }
        let mut c = cache(&s, 64 << 20);
        for (m, tag) in layouts.iter().zip(1u64..) {
            c.register(DatasetId(tag), m.clone()).unwrap();
            // Dataset 5 gets its first half only.
            let n = if tag == 5 {
                PER_DATASET / 2
            } else {
                PER_DATASET
            };
            let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8 ^ tag as u8).collect();
            write(&mut c, tag, &slab(&[0], &[n]), &data);
        }
        first.take_events();
        let before = s.snapshot();
        if evict {
            c.flush_and_evict_all().unwrap();
        } else {
            c.flush().unwrap();
        }
        let writes = s.snapshot().since(&before);
        let indexes: Vec<_> = layouts
            .iter()
            .map(|m| {
                let mut v: Vec<_> = m.index.lock().unwrap().clone().into_iter().collect();
                v.sort_by_key(|(k, _)| k.clone());
                v
            })
            .collect();
        let st = c.stats();
        (
            first.take_events(),
            indexes,
            s.inner().snapshot(),
            writes,
            (st.entries, st.dirty_entries),
        )
    };
    let (kept_events, kept_index, kept_bytes, kept_writes, kept_entries) = run(false);
    let (evicted_events, evicted_index, evicted_bytes, evicted_writes, evicted_entries) = run(true);
    assert_eq!(evicted_events, kept_events);
    assert_eq!(evicted_index, kept_index);
    assert_eq!(evicted_bytes, kept_bytes);
    let chunks = 4 * 96 + 48;
    assert_eq!(kept_index.iter().map(Vec::len).sum::<usize>(), chunks);
    assert_eq!(kept_writes.write_segments, chunks as u64);
    assert_eq!(evicted_writes.write_segments, chunks as u64);
    assert_eq!(kept_writes.bytes_written, 4 * PER_DATASET + PER_DATASET / 2);
    assert_eq!(evicted_writes.bytes_written, kept_writes.bytes_written);
    // 7 MiB in batches of at least 4 MiB: datasets 1-3, then 4-5; `flush` writes once.
    const { assert!(CLOSE_BATCH_BYTES <= 3 * PER_DATASET && CLOSE_BATCH_BYTES > 2 * PER_DATASET) };
    assert_eq!(kept_writes.write_vectors, 1);
    assert_eq!(evicted_writes.write_vectors, 2);
    assert_eq!(kept_entries, (chunks, 0));
    assert_eq!(evicted_entries, (0, 0));
}

/// SCC-017: destroy drops every entry, dirty ones included, and writes nothing.
#[test]
fn scc_017_destroy_writes_nothing() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[2], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[3; 8]);
    assert_eq!(m.live_udata(), 4);
    c.destroy();
    assert_eq!(m.live_udata(), 0);
    let snap = s.snapshot();
    assert_eq!(snap.writes + snap.write_vectors, 0);
    assert!(
        !m.take_events()
            .iter()
            .any(|e| matches!(e, Event::Insert(..)))
    );
}

/// SCC-044 + SCC-085: flushing 5 dirty chunks is one insert call with 5 requests and one vectored
/// write with 5 segments; a second flush writes nothing.
#[test]
fn scc_044_085_flush_is_batched() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[10], &[2], 1, &[]).with_codec());
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[5; 10]);
    m.take_events();
    c.flush().unwrap();
    let ev = m.take_events();
    let inserts: Vec<&Event> = ev
        .iter()
        .filter(|e| matches!(e, Event::Insert(..)))
        .collect();
    assert_eq!(inserts, [&Event::Insert(1, 5)]);
    let snap = s.snapshot();
    assert_eq!(
        (snap.write_vectors, snap.write_segments, snap.writes),
        (1, 5, 0)
    );
    c.flush().unwrap();
    assert!(m.take_events().is_empty());
    assert_eq!(s.snapshot(), snap);
}

/// SCC-077: evicting clean chunks writes nothing.
#[test]
fn scc_077_clean_eviction_writes_nothing() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[16], &[4], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[9; 16]);
    c.flush().unwrap();
    let before = s.snapshot();
    c.set_limit(4).unwrap();
    let st = c.stats();
    assert_eq!(st.entries, 1);
    assert_eq!(st.evictions, 3);
    let d = s.snapshot().since(&before);
    assert_eq!(d.writes + d.write_vectors, 0);
    assert_eq!(read(&mut c, 1, &Selection::All, 16), [9; 16]);
}

/// SCC-076: a dirty victim is encoded in place, inserted alone and written with one write.
#[test]
fn scc_076_dirty_eviction() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[]).with_codec());
    let mut c = cache(&s, 4);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &slab(&[0], &[4]), &[1, 2, 3, 4]);
    m.take_events();
    write(&mut c, 1, &slab(&[4], &[4]), &[5, 6, 7, 8]);
    let ev = m.take_events();
    assert_eq!(
        ev,
        [
            Event::Lookup(1, vec![vec![1]], 0),
            Event::NewChunk(1, vec![1], false),
            Event::EncodeInPlace(1, vec![0]),
            Event::Insert(1, 1)
        ]
    );
    let snap = s.snapshot();
    assert_eq!((snap.writes, snap.bytes_written), (1, 8));
    assert_eq!(c.stats().entries, 1);
    assert_eq!(
        read(&mut c, 1, &Selection::All, 8),
        [1, 2, 3, 4, 5, 6, 7, 8]
    );
}

/// SCC-087: the footprint equals the sum of the chunk sizes computed independently, per dataset
/// and in total, and used equals it for exactly sized chunks.
#[test]
fn scc_087_exact_accounting() {
    let s = store();
    let a = Arc::new(MockLayout::new(1, &[10, 10], &[3, 4], 2, &[]));
    let b = Arc::new(MockLayout::new(2, &[7], &[5], 8, &[]).sharing(&a));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), a.clone()).unwrap();
    c.register(DatasetId(2), b.clone()).unwrap();
    write(&mut c, 1, &slab(&[2, 3], &[5, 6]), &[1; 60]);
    read(&mut c, 2, &Selection::All, 56);
    write(&mut c, 2, &slab(&[0], &[1]), &[1; 8]);
    // Dataset 1: rows 2..7 touch chunk rows 0..=2, cols 3..9 touch chunk cols 0..=2 → 9 chunks.
    let st = c.stats();
    assert_eq!(st.per_dataset[&DatasetId(1)], 9 * 24);
    assert_eq!(st.per_dataset[&DatasetId(2)], 40);
    assert_eq!(st.footprint, 9 * 24 + 40);
    assert_eq!(st.used, st.footprint);
    assert_eq!(st.entries, 10);
}

/// SCC-001: one cache serves 500 datasets, each reading one 64 KiB chunk, under an 8 MiB limit;
/// the footprint is never above the limit.
#[test]
fn scc_001_one_cache_many_datasets() {
    let s = store();
    let limit = 8 << 20;
    let first = Arc::new(MockLayout::new(0, &[65536], &[65536], 1, &[]));
    let mut c = cache(&s, limit);
    let mut layouts = Vec::new();
    for d in 0..500u64 {
        let m = Arc::new(MockLayout::new(d, &[65536], &[65536], 1, &[]).sharing(&first));
        c.register(DatasetId(d), m.clone()).unwrap();
        layouts.push(m);
    }
    let data = vec![0x11u8; 65536];
    for d in 0..500u64 {
        write(&mut c, d, &Selection::All, &data);
        assert!(c.stats().footprint <= limit);
    }
    c.flush().unwrap();
    for d in (0..500u64).rev() {
        assert_eq!(read(&mut c, d, &Selection::All, 65536), data);
        assert!(c.stats().footprint <= limit);
    }
    assert_eq!(c.stats().overshoots, 0);
}

/// Configuration errors: zero limit, unknown policy; a registration twice; a wrong buffer size.
#[test]
fn config_and_argument_errors() {
    let s = store();
    let storage: Arc<dyn Storage> = s.clone();
    let bad = ChunkCacheConfig {
        limit: 0,
        ..ChunkCacheConfig::default()
    };
    assert!(matches!(
        ChunkCache::new(storage.clone(), bad),
        Err(ChunkCacheError::Config { field: "limit", .. })
    ));
    let bad = ChunkCacheConfig {
        policy: "mru".into(),
        ..ChunkCacheConfig::default()
    };
    assert!(matches!(
        ChunkCache::new(storage, bad),
        Err(ChunkCacheError::Config {
            field: "policy",
            ..
        })
    ));
    let m = Arc::new(MockLayout::new(1, &[4], &[2], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    assert!(matches!(
        c.register(DatasetId(1), m.clone()),
        Err(ChunkCacheError::AlreadyRegistered(_))
    ));
    let mut buf = [0u8; 3];
    let r = c.read(&mut [ReadRequest::new(DatasetId(1), &Selection::All, &mut buf)]);
    assert!(matches!(
        r,
        Err(ChunkCacheError::BufferSize { needed: 4, got: 3 })
    ));
    assert!(matches!(
        c.set_limit(0),
        Err(ChunkCacheError::Config { .. })
    ));
}

/// Write errors lose nothing: a failed flush write keeps the chunks dirty and a later flush
/// writes them; a failed eviction write keeps the victim resident and dirty.
#[test]
fn write_errors_keep_chunks_dirty() {
    use h5_io::{FaultInjection, IoOp};
    let s = Arc::new(FaultInjection::new(MemoryStorage::new()).fail_nth(IoOp::WriteVectored, 1));
    let storage: Arc<dyn Storage> = s.clone();
    let m = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[]).with_codec());
    let mut c = ChunkCache::new(
        storage.clone(),
        ChunkCacheConfig {
            limit: 1 << 20,
            default_dataset_min: 0,
            bypass_fraction: 1.0,
            preencode_high_water: None,
            ..ChunkCacheConfig::default()
        },
    )
    .unwrap();
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert!(matches!(c.flush(), Err(ChunkCacheError::Io(_))));
    assert_eq!(c.stats().dirty_entries, 2);
    c.flush().unwrap();
    assert_eq!(c.stats().dirty_entries, 0);
    c.destroy();
    let mut c = ChunkCache::new(storage.clone(), ChunkCacheConfig::default()).unwrap();
    c.register(DatasetId(1), m.clone()).unwrap();
    assert_eq!(
        read(&mut c, 1, &Selection::All, 8),
        [1, 2, 3, 4, 5, 6, 7, 8]
    );
    c.destroy();

    // Eviction: the first write_at fails.
    s.set_plan(h5_io::FaultPlan::new().fail_nth(IoOp::Write, s.calls(IoOp::Write) + 1));
    let mut c = ChunkCache::new(
        storage,
        ChunkCacheConfig {
            limit: 4,
            default_dataset_min: 0,
            bypass_fraction: 1.0,
            preencode_high_water: None,
            ..ChunkCacheConfig::default()
        },
    )
    .unwrap();
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &slab(&[0], &[4]), &[9; 4]);
    let sel = slab(&[4], &[4]);
    let r = c.write(&[WriteRequest::new(DatasetId(1), &sel, &[8; 4])]);
    assert!(matches!(r, Err(ChunkCacheError::Io(_))));
    assert_eq!(c.stats().dirty_entries, 1);
    c.flush().unwrap();
    assert_eq!(read(&mut c, 1, &slab(&[0], &[4]), 4), [9; 4]);
}

/// A write touching more chunks than fit is processed in batches that fit (as reads load,
/// SCC-092): no overshoot, the earlier batches written out.
#[test]
fn writes_larger_than_the_cache_are_batched() {
    // Sixteen 8-byte chunks written in one call under a 24-byte limit: processed three chunks
    // at a time, earlier batches written out, never more than the limit resident.
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[128], &[8], 1, &[]));
    let mut c = cache(&s, 24);
    c.register(DatasetId(1), m.clone()).unwrap();
    let data: Vec<u8> = (0..128).map(|i| (i * 7 % 251) as u8).collect();
    write(&mut c, 1, &Selection::All, &data);
    let st = c.stats();
    assert_eq!(st.overshoots, 0);
    assert!(st.peak_footprint <= 24, "peak {}", st.peak_footprint);
    assert!(st.evictions >= 13, "{} evictions", st.evictions);
    c.flush().unwrap();
    c.destroy();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    assert_eq!(read(&mut c, 1, &Selection::All, 128), data);
}

/// A chunk larger than the whole limit is read without being admitted; a read needing more
/// chunks than fit loads them in batches that fit; every dropped entry drops its udata (SCC-035).
#[test]
fn oversized_and_overshooting_reads() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[16], &[8], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let data: Vec<u8> = (0..16).collect();
    write(&mut c, 1, &Selection::All, &data);
    c.flush().unwrap();
    c.destroy();

    let mut c = cache(&s, 4);
    c.register(DatasetId(1), m.clone()).unwrap();
    assert_eq!(read(&mut c, 1, &slab(&[2], &[3]), 3), [2, 3, 4]);
    assert_eq!(c.stats().entries, 0);
    assert_eq!(m.live_udata(), 0);

    c.set_limit(12).unwrap();
    assert_eq!(read(&mut c, 1, &Selection::All, 16), data);
    // Two 8-byte chunks under a 12-byte limit are loaded in two batches (SCC-092); the read
    // needs more than the limit, so it is a scan: used and dropped, nothing admitted, nothing
    // evicted, nothing overshoots.
    let st = c.stats();
    assert_eq!(st.overshoots, 0);
    assert_eq!((st.evictions, st.entries, st.scan_loads), (0, 0, 2));
    assert!(st.peak_footprint <= 12);
    assert_eq!(m.live_udata(), st.entries);
    c.destroy();
    assert_eq!(m.live_udata(), 0);
}

/// A read whose uncached chunks need more than the limit (a scan) uses and drops them: what the
/// cache held stays (a hot chunk of another dataset is still a hit), the scan's own chunks are
/// not admitted, and it never holds more than the limit. The same through the shared cache,
/// and for a whole-dataset read split into row slabs (more than 256 chunks). A read that fits
/// is admitted as before.
#[test]
fn reads_larger_than_the_limit_do_not_evict_what_is_cached() {
    let s = store();
    let chunk = 1024u64;
    let big = Arc::new(MockLayout::new(1, &[300 * chunk], &[chunk], 1, &[]));
    let hot = Arc::new(MockLayout::new(2, &[chunk], &[chunk], 1, &[]).sharing(&big));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), big.clone()).unwrap();
    c.register(DatasetId(2), hot.clone()).unwrap();
    let data: Vec<u8> = (0..300 * chunk).map(|i| (i * 13 % 251) as u8).collect();
    let warm: Vec<u8> = (0..chunk).map(|i| (i % 7) as u8).collect();
    write(&mut c, 1, &Selection::All, &data);
    write(&mut c, 2, &Selection::All, &warm);
    c.flush().unwrap();
    c.destroy();

    let limit = 64 * chunk as usize;
    let mut c = cache(&s, limit);
    c.register(DatasetId(1), big.clone()).unwrap();
    c.register(DatasetId(2), hot.clone()).unwrap();
    assert_eq!(read(&mut c, 2, &Selection::All, chunk as usize), warm);
    // A hyperslab of 100 chunks (no row slabs) and the whole dataset (row slabs).
    let part = read(
        &mut c,
        1,
        &slab(&[10 * chunk], &[100 * chunk]),
        100 * chunk as usize,
    );
    assert!(part[..] == data[10 * chunk as usize..110 * chunk as usize]);
    let all = read(&mut c, 1, &Selection::All, data.len());
    assert!(all == data);
    let st = c.stats();
    assert_eq!(st.scan_loads, 400);
    assert_eq!((st.entries, st.evictions, st.overshoots), (1, 0, 0));
    assert!(st.peak_footprint <= limit, "{}", st.peak_footprint);
    let hits = st.hits;
    assert_eq!(read(&mut c, 2, &Selection::All, chunk as usize), warm);
    assert_eq!(c.stats().hits, hits + 1, "the hot chunk stayed");
    // A read that fits the limit is admitted.
    let fits = read(&mut c, 1, &slab(&[0], &[8 * chunk]), 8 * chunk as usize);
    assert!(fits[..] == data[..8 * chunk as usize]);
    assert_eq!(c.stats().entries, 9);

    // Through the shared cache.
    let shared = SharedChunkCache::new(c);
    let mut buf = vec![0u8; data.len()];
    let sel = Selection::All;
    ChunkCache::read_shared(
        &shared,
        &mut [ReadRequest::new(DatasetId(1), &sel, &mut buf)],
    )
    .unwrap();
    assert!(buf == data);
    let st = shared.lock().unwrap().stats();
    assert_eq!(st.scan_loads, 400 + 292, "the 8 resident chunks were hits");
    assert_eq!((st.entries, st.evictions), (9, 0));
    assert!(st.peak_footprint <= limit);
}

/// Bytes of each chunk in the buffer-recycling tests.
const RECYCLED_CHUNK: u64 = 4096;

/// A store holding `n` chunks of `chunk` bytes of one dataset with the toy codec, written and
/// flushed by a cache since destroyed; the layout and the values.
fn stored_coded_chunks(n: u64, chunk: u64) -> (Store, Arc<MockLayout>, Vec<u8>) {
    let s = store();
    let layout = Arc::new(MockLayout::new(1, &[n * chunk], &[chunk], 1, &[]).with_codec());
    let mut c = cache(&s, 1 << 30);
    c.register(DatasetId(1), layout.clone()).unwrap();
    let data: Vec<u8> = (0..n * chunk).map(|i| (i * 7 % 253) as u8).collect();
    write(&mut c, 1, &Selection::All, &data);
    c.flush().unwrap();
    c.destroy();
    (s, layout, data)
}

/// The layout's counts of spares given to its decodes and of spares whose allocation a decode
/// kept.
fn seen(l: &MockLayout) -> (usize, usize) {
    use std::sync::atomic::Ordering::SeqCst;
    (l.spares.0.load(SeqCst), l.spares.1.load(SeqCst))
}

/// A scan hands the buffers of the chunks it is done with to the decodes of its next loads
/// (`decode_reusing`), in the private and the shared cache; a read that fits the limit (and is
/// admitted) does not. The values are the written ones either way.
#[test]
fn scans_recycle_their_chunk_buffers_into_the_next_decodes() {
    let (s, layout, data) = stored_coded_chunks(400, RECYCLED_CHUNK);
    let chunk = RECYCLED_CHUNK;
    // Fits the limit: admitted, nothing recycled.
    let mut c = cache(&s, 1 << 30);
    c.register(DatasetId(1), layout.clone()).unwrap();
    assert!(read(&mut c, 1, &Selection::All, data.len()) == data);
    assert_eq!(seen(&layout), (0, 0));
    c.destroy();
    // A scan: 400 chunks through a 16-chunk limit.
    let mut c = cache(&s, 16 * chunk as usize);
    c.register(DatasetId(1), layout.clone()).unwrap();
    assert!(read(&mut c, 1, &Selection::All, data.len()) == data);
    let (given, reused) = seen(&layout);
    assert!(given >= 300 && reused == given, "{given} {reused}");
    assert_eq!(c.stats().scan_loads, 400);
    // Through the shared cache.
    let shared = SharedChunkCache::new(c);
    let mut buf = vec![0u8; data.len()];
    let sel = Selection::All;
    ChunkCache::read_shared(
        &shared,
        &mut [ReadRequest::new(DatasetId(1), &sel, &mut buf)],
    )
    .unwrap();
    assert!(buf == data);
    let (again, reused) = seen(&layout);
    assert!(again >= given + 300 && reused == again, "{again} {reused}");
}

/// Reads that admit what they load, with the cache at its limit: the buffers of the clean
/// chunks evicted to make room and the images the decodes are done with serve the next loads
/// (the layout decodes into an evicted chunk's allocation), rather than being freed while the
/// next decode allocates.
#[test]
fn admitting_reads_at_the_limit_recycle_evicted_buffers_into_the_next_decodes() {
    let (s, layout, data) = stored_coded_chunks(400, RECYCLED_CHUNK);
    let chunk = RECYCLED_CHUNK;
    let mut c = cache(&s, 32 * chunk as usize);
    c.register(DatasetId(1), layout.clone()).unwrap();
    for k in 0..400u64 {
        let got = read(&mut c, 1, &slab(&[k * chunk], &[chunk]), chunk as usize);
        let at = (k * chunk) as usize;
        assert!(got == data[at..at + chunk as usize], "chunk {k}");
        if k < 32 {
            assert_eq!(
                seen(&layout),
                (0, 0),
                "nothing evicted yet: nothing to reuse"
            );
        }
    }
    let st = c.stats();
    assert_eq!((st.scan_loads, st.misses), (0, 400), "every chunk admitted");
    assert_eq!(st.evictions, 400 - 32);
    let (given, reused) = seen(&layout);
    assert!(given >= 360 && reused == given, "{given} {reused}");
}

/// The cache can move to another thread (the file holds it behind a lock).
#[test]
fn cache_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<ChunkCache>();
}
