//! Requirements of the shared chunk cache's core flows (spec §2.1–§2.10, §2.13–§2.15) against the
//! recording mock layout, local mocks for single callbacks, and metered in-memory storage.

// The conversions under test deliberately go between big-endian file types and native memory.
#![allow(clippy::big_endian_bytes, clippy::host_endian_bytes)]

use crate::common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{Event, MockLayout};
use h5_chunkcache::selection::{
    CopyRun, Hyperslab, Points, Selection, gather_converted, scatter_converted,
};
use h5_chunkcache::{
    Bypass, Capabilities, Chunk, ChunkCache, ChunkCacheConfig, ChunkCacheError, ChunkCoord,
    ChunkLayout, Conversion, DatasetId, DiskLocation, Encoded, InsertRequest, KeyHashing,
    LayoutError, LayoutInfo, Lookup, ReadRequest, Udata, WriteRequest,
};
use h5_io::{MemoryStorage, Metrics, Storage};

type Store = Arc<Metrics<MemoryStorage>>;

fn store() -> Store {
    Arc::new(Metrics::new(MemoryStorage::new()))
}

/// The test configuration: no minimums, no bypass, no pre-encoding unless a test turns them on.
fn config(limit: usize) -> ChunkCacheConfig {
    ChunkCacheConfig {
        limit,
        default_dataset_min: 0,
        bypass_fraction: 1.0,
        preencode_high_water: None,
        ..ChunkCacheConfig::default()
    }
}

fn cache_with(s: &Store, config: ChunkCacheConfig) -> ChunkCache {
    let storage: Arc<dyn Storage> = s.clone();
    ChunkCache::new(storage, config).unwrap()
}

fn cache(s: &Store, limit: usize) -> ChunkCache {
    cache_with(s, config(limit))
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

fn count(events: &[Event], f: impl Fn(&Event) -> bool) -> usize {
    events.iter().filter(|e| f(e)).count()
}

// ---------------------------------------------------------------------------------------------
// Conversions used by the tests.
// ---------------------------------------------------------------------------------------------

/// Big-endian i32 (file) to native f64 (memory), counting calls.
#[derive(Debug, Default)]
struct BeI32ToF64 {
    calls: AtomicUsize,
}

impl Conversion for BeI32ToF64 {
    fn src_size(&self) -> usize {
        4
    }
    fn dst_size(&self) -> usize {
        8
    }
    fn convert(&self, src: &[u8], dst: &mut [u8], n: usize) -> Result<(), LayoutError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        for i in 0..n {
            let v = i32::from_be_bytes(src[i * 4..i * 4 + 4].try_into()?);
            dst[i * 8..i * 8 + 8].copy_from_slice(&f64::from(v).to_ne_bytes());
        }
        Ok(())
    }
}

/// Native f64 (memory) to big-endian i32 (file); fails on values that do not fit.
#[derive(Debug, Default)]
struct F64ToBeI32;

impl Conversion for F64ToBeI32 {
    fn src_size(&self) -> usize {
        8
    }
    fn dst_size(&self) -> usize {
        4
    }
    fn convert(&self, src: &[u8], dst: &mut [u8], n: usize) -> Result<(), LayoutError> {
        for i in 0..n {
            let v = f64::from_ne_bytes(src[i * 8..i * 8 + 8].try_into()?);
            if v.fract() != 0.0 || v < f64::from(i32::MIN) || v > f64::from(i32::MAX) {
                return Err(format!("{v} does not fit an i32").into());
            }
            dst[i * 4..i * 4 + 4].copy_from_slice(&(v as i32).to_be_bytes());
        }
        Ok(())
    }
}

fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn from_f64s(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// Toy codec of the mock: 4-byte little-endian length, then the bytes XOR 0x5A.
fn toy_decode(image: &[u8]) -> Vec<u8> {
    image[4..].iter().map(|b| b ^ 0x5A).collect()
}

// ---------------------------------------------------------------------------------------------
// §2.1 scope.
// ---------------------------------------------------------------------------------------------

/// SCC-002: one read/write/flush sequence over a contiguous layout (one chunk with the
/// dataset's dimensions), a chunked layout and a chunked layout with a codec gives the same
/// values; the contiguous dataset holds a single chunk at scaled (0, 0).
#[test]
fn scc_002_one_suite_over_layout_kinds() {
    let values: Vec<u8> = (0..120).map(|i| (i * 7 % 251) as u8).collect();
    let mut results = Vec::new();
    for (name, dims, codec) in [
        ("contiguous", [12u64, 10], false),
        ("chunked", [4, 5], false),
        ("chunked+codec", [4, 5], true),
    ] {
        let s = store();
        let mut m = MockLayout::new(1, &[12, 10], &dims, 1, &[3]);
        if codec {
            m = m.with_codec();
        }
        let m = Arc::new(m);
        let mut c = cache(&s, 1 << 20);
        c.register(DatasetId(1), m.clone()).unwrap();
        write(&mut c, 1, &Selection::All, &values);
        write(&mut c, 1, &slab(&[2, 3], &[3, 4]), &[0xEE; 12]);
        c.flush().unwrap();
        if name == "contiguous" {
            assert_eq!(c.dataset_entries(DatasetId(1)), 1);
            assert!(c.entry_stats(DatasetId(1), &[0, 0]).is_some());
        }
        c.destroy();
        let mut c = cache(&s, 1 << 20);
        c.register(DatasetId(1), m.clone()).unwrap();
        results.push((name, read(&mut c, 1, &Selection::All, 120)));
    }
    let mut expect = values.clone();
    for r in 2..5 {
        for col in 3..7 {
            expect[r * 10 + col] = 0xEE;
        }
    }
    for (name, got) in results {
        assert_eq!(got, expect, "{name}");
    }
}

/// SCC-003: the layout has no storage handle; every byte the storage saw was read or written by
/// the cache, and the cache's own byte counters account for all of it.
#[test]
fn scc_003_cache_issues_all_raw_io() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[64], &[8], 1, &[]).with_codec());
    let mut c = cache(&s, 24);
    c.register(DatasetId(1), m.clone()).unwrap();
    for i in 0..8u64 {
        write(&mut c, 1, &slab(&[i * 8], &[8]), &[i as u8; 8]);
    }
    c.flush().unwrap();
    let _ = read(&mut c, 1, &Selection::All, 64);
    let st = c.stats();
    let snap = s.snapshot();
    assert!(snap.bytes_written > 0 && snap.bytes_read > 0);
    assert_eq!(snap.bytes_written, st.bytes_written);
    assert_eq!(snap.bytes_read, st.bytes_read);
}

/// SCC-004: the cache core depends on nothing but the storage layer, the error derive, the
/// thread pool and concurrency primitives (the sharded lock): no filter, codec or format crate.
#[test]
fn scc_004_core_is_layout_agnostic() {
    let toml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let mut deps = Vec::new();
    let mut in_deps = false;
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && let Some((name, _)) = line.split_once(['=', '.']) {
            deps.push(name.trim().to_owned());
        }
    }
    deps.sort();
    assert_eq!(deps, ["crossbeam-utils", "h5-io", "rayon", "thiserror"]);
}

// ---------------------------------------------------------------------------------------------
// §2.2 data forms and per-entry state.
// ---------------------------------------------------------------------------------------------

/// SCC-005: a codec dataset of big-endian i32 is written from and read into native f64. Decode
/// runs once per chunk, conversion only while scattering (once per copy run), and the storage
/// holds the encoded big-endian integers.
#[test]
fn scc_005_conversion_only_between_memory_and_cache_form() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[4], 4, &[]).with_codec());
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let values = [1.0, -2.0, 300.0, 4.0, 70000.0, -6.0, 7.0, 8.0];
    let all = Selection::All;
    let to_file = F64ToBeI32;
    c.write(&[WriteRequest::new(DatasetId(1), &all, &f64s(&values)).converting(&to_file)])
        .unwrap();
    c.flush().unwrap();
    c.destroy();

    let loc = m.location(&[1]).unwrap();
    let mut image = vec![0u8; loc.size as usize];
    s.read_at(loc.addr, &mut image).unwrap();
    let expect_be: Vec<u8> = values[4..]
        .iter()
        .flat_map(|v| (*v as i32).to_be_bytes())
        .collect();
    assert_eq!(toy_decode(&image), expect_be);

    m.take_events();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let conv = BeI32ToF64::default();
    let mut buf = vec![0u8; 64];
    c.read(&mut [ReadRequest::new(DatasetId(1), &all, &mut buf).converting(&conv)])
        .unwrap();
    assert_eq!(from_f64s(&buf), values);
    let ev = m.take_events();
    assert_eq!(count(&ev, |e| matches!(e, Event::Decode(..))), 2);
    assert_eq!(conv.calls.load(Ordering::SeqCst), 2);
}

/// SCC-006: without a codec the bytes at a chunk's address are the cached bytes, and neither
/// decode nor encode is ever called.
#[test]
fn scc_006_unfiltered_chunks_are_written_as_cached() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1, 2, 3, 4, 5, 6, 7, 8]);
    c.flush().unwrap();
    let loc = m.location(&[1]).unwrap();
    let mut disk = [0u8; 4];
    s.read_at(loc.addr, &mut disk).unwrap();
    assert_eq!(disk, [5, 6, 7, 8]);
    c.destroy();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    assert_eq!(
        read(&mut c, 1, &Selection::All, 8),
        [1, 2, 3, 4, 5, 6, 7, 8]
    );
    let ev = m.take_events();
    assert_eq!(
        count(&ev, |e| matches!(
            e,
            Event::Decode(..) | Event::Encode(..) | Event::EncodeInPlace(..)
        )),
        0
    );
}

fn preencode_config(limit: usize, hw: f64) -> ChunkCacheConfig {
    ChunkCacheConfig {
        preencode_high_water: Some(hw),
        ..config(limit)
    }
}

/// SCC-007: a pre-encoded image is dropped when the chunk changes; the next flush encodes again
/// and the file holds the new value.
#[test]
fn scc_007_write_invalidates_preencoded_image() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[16], &[16], 1, &[]).with_codec());
    let mut c = cache_with(&s, preencode_config(100, 0.1));
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1; 16]);
    let e = c.entry_stats(DatasetId(1), &[0]).unwrap();
    assert_eq!(e.image_bytes.map(|b| b >= 20), Some(true));
    assert!(e.dirty);
    // Raise the mark so this write does not pre-encode again.
    c.destroy();
    let mut c = cache_with(&s, preencode_config(100, 0.1));
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1; 16]);
    assert!(
        c.entry_stats(DatasetId(1), &[0])
            .unwrap()
            .image_bytes
            .is_some()
    );
    c.set_limit(1 << 20).unwrap();
    m.take_events();
    write(&mut c, 1, &slab(&[3], &[1]), &[9]);
    assert_eq!(c.entry_stats(DatasetId(1), &[0]).unwrap().image_bytes, None);
    c.flush().unwrap();
    assert_eq!(
        count(&m.take_events(), |e| matches!(e, Event::Encode(..))),
        1
    );
    c.destroy();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let got = read(&mut c, 1, &Selection::All, 16);
    assert_eq!(got[3], 9);
    assert_eq!(got[2], 1);
}

/// SCC-008: after a partial write to a brand-new chunk the entry is dirty, has no address, its
/// used and allocated sizes are what the layout's chunk reports, it is partially covered and it
/// has been accessed once.
#[test]
fn scc_008_entry_record_after_partial_write() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[8], 2, &[0, 0]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &slab(&[2], &[3]), &[7; 6]);
    let e = c.entry_stats(DatasetId(1), &[0]).unwrap();
    assert!(e.dirty);
    assert!(e.has_values);
    assert_eq!(e.location, None);
    assert_eq!(e.usage.used, 16);
    assert!(e.usage.allocated >= 16);
    assert_eq!(c.stats().footprint, e.usage.allocated);
    assert!(!e.full);
    assert_eq!(e.access_count, 1);
    assert_eq!(e.image_bytes, None);
}

// ---------------------------------------------------------------------------------------------
// §2.3 keys and index.
// ---------------------------------------------------------------------------------------------

/// SCC-012 + SCC-110: with every key hashed to one bucket, 1,000 resident chunks coexist:
/// re-reading all of them gives 1,000 hits and no storage read. The index starts empty and grows
/// with the entries rather than being oversized.
#[test]
fn scc_012_110_collisions_never_evict() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[4000], &[4], 1, &[]));
    let mut c = cache_with(
        &s,
        ChunkCacheConfig {
            key_hashing: KeyHashing::SingleBucket,
            ..config(1 << 20)
        },
    );
    assert_eq!(c.stats().index_capacity, 0);
    c.register(DatasetId(1), m.clone()).unwrap();
    let data: Vec<u8> = (0..4000).map(|i| (i % 256) as u8).collect();
    write(&mut c, 1, &Selection::All, &data);
    c.flush().unwrap();
    let st = c.stats();
    assert_eq!(st.entries, 1000);
    assert!(st.index_capacity >= 1000 && st.index_capacity < 4 * 1000);
    let before = s.snapshot();
    let hits = st.hits;
    assert_eq!(read(&mut c, 1, &Selection::All, 4000), data);
    assert_eq!(c.stats().hits - hits, 1000);
    let d = s.snapshot().since(&before);
    assert_eq!(d.reads + d.read_vectors, 0);
}

/// SCC-013: flushing dataset B (one dirty entry) next to dataset A (2,000 dirty entries) makes
/// callbacks for B's entry only and leaves A dirty.
#[test]
fn scc_013_per_dataset_flush_touches_only_that_dataset() {
    let s = store();
    let a = Arc::new(MockLayout::new(1, &[8000], &[4], 1, &[]).with_codec());
    let b = Arc::new(
        MockLayout::new(2, &[4], &[4], 1, &[])
            .with_codec()
            .sharing(&a),
    );
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), a.clone()).unwrap();
    c.register(DatasetId(2), b.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &vec![1; 8000]);
    write(&mut c, 2, &Selection::All, &[2; 4]);
    a.take_events();
    c.flush_dataset(DatasetId(2), false).unwrap();
    let ev = a.take_events();
    assert_eq!(ev, [Event::Encode(2, vec![0]), Event::Insert(2, 1)]);
    assert_eq!(c.stats().dirty_entries, 2000);
}

/// SCC-015: the statistics report the settings and start at zero; one miss and one hit move the
/// counters by one each.
#[test]
fn scc_015_settings_and_counters_in_stats() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[]));
    let mut c = cache_with(
        &s,
        ChunkCacheConfig {
            limit: 4 << 20,
            policy: "lfu".into(),
            ..ChunkCacheConfig::default()
        },
    );
    let st = c.stats();
    assert_eq!(st.limit, 4 << 20);
    assert_eq!(st.policy, "lfu");
    assert_eq!(st.default_dataset_min, 1 << 20);
    assert_eq!(st.preencode_high_water, Some(0.9));
    assert_eq!(st.bypass_fraction, 0.5);
    assert_eq!((st.footprint, st.entries, st.hits, st.misses), (0, 0, 0, 0));
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &slab(&[0], &[4]), &[1; 4]);
    c.flush().unwrap();
    c.flush_dataset(DatasetId(1), true).unwrap();
    let _ = read(&mut c, 1, &slab(&[0], &[4]), 4);
    let _ = read(&mut c, 1, &slab(&[0], &[4]), 4);
    let st = c.stats();
    assert_eq!((st.misses, st.hits), (1, 1));
    assert_eq!(st.entries, 1);
    assert_eq!(st.footprint, 4);
    let text = st.to_string();
    assert!(
        text.contains("lfu") && text.contains("hits 1 misses 1"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// §2.4 API.
// ---------------------------------------------------------------------------------------------

/// SCC-016 + EC-26: invalid settings are rejected with the field named; a per-dataset minimum
/// above the limit is accepted and visibly scaled down to the limit.
#[test]
fn scc_016_create_validates_or_clamps() {
    let s = store();
    let bad = |cfg: ChunkCacheConfig| {
        let storage: Arc<dyn Storage> = s.clone();
        match ChunkCache::new(storage, cfg) {
            Err(ChunkCacheError::Config { field, .. }) => field,
            other => panic!("expected a config error, got {other:?}"),
        }
    };
    let d = ChunkCacheConfig::default;
    assert_eq!(bad(ChunkCacheConfig { limit: 0, ..d() }), "limit");
    assert_eq!(
        bad(ChunkCacheConfig {
            policy: "mru?".into(),
            ..d()
        }),
        "policy"
    );
    assert_eq!(
        bad(ChunkCacheConfig {
            bypass_fraction: 0.0,
            ..d()
        }),
        "bypass_fraction"
    );
    assert_eq!(
        bad(ChunkCacheConfig {
            preencode_high_water: Some(1.5),
            ..d()
        }),
        "preencode_high_water"
    );
    assert_eq!(
        bad(ChunkCacheConfig {
            conversion_buffer: 0,
            ..d()
        }),
        "conversion_buffer"
    );
    assert_eq!(
        bad(ChunkCacheConfig {
            full_threshold: 0.0,
            ..d()
        }),
        "full_threshold"
    );
    let mut c = cache_with(
        &s,
        ChunkCacheConfig {
            limit: 8 << 20,
            default_dataset_min: 16 << 20,
            ..ChunkCacheConfig::default()
        },
    );
    let st = c.stats();
    assert_eq!((st.entries, st.footprint), (0, 0));
    let m = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[]));
    c.register(DatasetId(1), m).unwrap();
    write(&mut c, 1, &slab(&[0], &[4]), &[1; 4]);
    assert_eq!(c.effective_dataset_min(DatasetId(1)), 8 << 20);
    let st = c.stats();
    assert_eq!(st.quiescent + st.active, st.limit);
}

/// A layout wrapper whose `uses_cache` is false, recording whether any callback ran after
/// registration.
#[derive(Debug)]
struct Uncached {
    calls: AtomicUsize,
}

impl ChunkLayout for Uncached {
    fn query(&self) -> LayoutInfo {
        LayoutInfo {
            uses_cache: false,
            ..LayoutInfo::dense(&[4], 1, &[])
        }
    }
    fn extent(&self) -> Vec<u64> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        vec![8]
    }
    fn lookup(&self, _: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err("must not be called".into())
    }
    fn new_chunk(&self, _: &ChunkCoord, _: bool) -> Result<(Chunk, Udata), LayoutError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err("must not be called".into())
    }
    fn encode(
        &self,
        _: &ChunkCoord,
        _: &Chunk,
        _: bool,
        _: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err("must not be called".into())
    }
    fn insert(&self, _: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err("must not be called".into())
    }
    fn delete_chunk(
        &self,
        _: &ChunkCoord,
        _: Option<DiskLocation>,
        _: &mut Udata,
    ) -> Result<(), LayoutError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err("must not be called".into())
    }
}

/// SCC-018 + SCC-019: in a 3-dataset read and write, #2 (a layout that does not use the cache)
/// is left to the caller and #3 (skip-I/O) is ignored; neither sees a callback, only #1's buffer
/// is filled and only #1's data reaches the storage.
#[test]
fn scc_018_019_multi_dataset_calls_skip_and_defer() {
    let s = store();
    let m1 = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[]));
    let m3 = Arc::new(MockLayout::new(3, &[8], &[4], 1, &[]));
    let u = Arc::new(Uncached {
        calls: AtomicUsize::new(0),
    });
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m1.clone()).unwrap();
    c.register(DatasetId(2), u.clone()).unwrap();
    c.register(DatasetId(3), m3.clone()).unwrap();
    let all = Selection::All;
    let report = c
        .write(&[
            WriteRequest::new(DatasetId(1), &all, &[1; 8]),
            WriteRequest::new(DatasetId(2), &all, &[2; 8]),
            WriteRequest::new(DatasetId(3), &all, &[3; 8]).skip(),
        ])
        .unwrap();
    assert_eq!(report.not_cached, [1]);
    c.flush().unwrap();
    assert_eq!(s.snapshot().bytes_written, 8);
    assert!(m3.take_events().is_empty());
    let (mut x, mut y, mut z) = ([0xAAu8; 8], [0xBBu8; 8], [0xCCu8; 8]);
    let report = c
        .read(&mut [
            ReadRequest::new(DatasetId(1), &all, &mut x),
            ReadRequest::new(DatasetId(2), &all, &mut y),
            ReadRequest::new(DatasetId(3), &all, &mut z).skip(),
        ])
        .unwrap();
    assert_eq!(report.not_cached, [1]);
    assert_eq!((x, y, z), ([1; 8], [0xBB; 8], [0xCC; 8]));
    assert_eq!(u.calls.load(Ordering::SeqCst), 0);
    assert!(m3.take_events().is_empty());
}

// ---------------------------------------------------------------------------------------------
// §2.5 callback contracts.
// ---------------------------------------------------------------------------------------------

/// A dense layout implementing only the required callbacks (no decode, no optional callback):
/// images are the raw bytes, kept in its own index. Counts `query` calls and records decode-side
/// buffer sizes through `lookup` hints.
#[derive(Debug)]
struct MinimalLayout {
    dims: u64,
    extent: u64,
    index: Mutex<std::collections::HashMap<u64, DiskLocation>>,
    next: AtomicUsize,
    queries: AtomicUsize,
    info: LayoutInfo,
}

impl MinimalLayout {
    fn new(extent: u64, dims: u64) -> Self {
        Self {
            dims,
            extent,
            index: Mutex::new(Default::default()),
            next: AtomicUsize::new(0),
            queries: AtomicUsize::new(0),
            info: LayoutInfo {
                needs_codec: true,
                ..LayoutInfo::dense(&[dims], 1, &[5])
            },
        }
    }
}

impl ChunkLayout for MinimalLayout {
    fn query(&self) -> LayoutInfo {
        self.queries.fetch_add(1, Ordering::SeqCst);
        self.info.clone()
    }
    fn extent(&self) -> Vec<u64> {
        vec![self.extent]
    }
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let index = self.index.lock().unwrap();
        Ok(coords
            .iter()
            .map(|c| Lookup::dense(index.get(&c.as_slice()[0]).copied(), 0, Box::new(())))
            .collect())
    }
    fn new_chunk(&self, _: &ChunkCoord, fill: bool) -> Result<(Chunk, Udata), LayoutError> {
        let v = if fill { 5 } else { 0 };
        Ok((Chunk::Dense(vec![v; self.dims as usize]), Box::new(())))
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
        let mut index = self.index.lock().unwrap();
        Ok(reqs
            .iter()
            .map(|r| {
                let addr = self.next.fetch_add(r.new_size as usize, Ordering::SeqCst) as u64;
                let loc = DiskLocation {
                    addr,
                    size: r.new_size,
                };
                index.insert(r.coord.as_slice()[0], loc);
                loc
            })
            .collect())
    }
    fn delete_chunk(
        &self,
        c: &ChunkCoord,
        _: Option<DiskLocation>,
        _: &mut Udata,
    ) -> Result<(), LayoutError> {
        self.index.lock().unwrap().remove(&c.as_slice()[0]);
        Ok(())
    }
}

/// SCC-029 + SCC-030: a layout with only the required callbacks passes a read/write/flush/evict
/// run (the documented fallbacks stand in for the optional ones), and it is queried once, at
/// registration, not per I/O call. Announcing defined-element tracking without the callbacks it
/// needs is refused at registration.
#[test]
fn scc_029_030_required_callbacks_suffice_and_query_once() {
    let s = store();
    let m = Arc::new(MinimalLayout::new(64, 8));
    let mut c = cache(&s, 24);
    c.register(DatasetId(1), m.clone()).unwrap();
    let data: Vec<u8> = (0..64).collect();
    write(&mut c, 1, &Selection::All, &data);
    write(&mut c, 1, &slab(&[60], &[2]), &[0, 0]);
    c.flush().unwrap();
    assert!(c.stats().evictions > 0);
    let mut expect = data.clone();
    expect[60] = 0;
    expect[61] = 0;
    assert_eq!(read(&mut c, 1, &Selection::All, 64), expect);
    assert_eq!(m.queries.load(Ordering::SeqCst), 1);

    let mut tracking = MinimalLayout::new(64, 8);
    tracking.info.tracks_defined = true;
    tracking.info.capabilities = Capabilities::DEFINED_VALUES;
    let err = c.register(DatasetId(2), Arc::new(tracking)).unwrap_err();
    assert!(
        matches!(&err, ChunkCacheError::InvalidLayout { reason, .. } if reason.contains("erase_values")),
        "{err}"
    );
}

/// SCC-031 + EC-38: a layout keeping vlen data inside its chunks must provide scatter, gather
/// and fill; registering one without gather fails naming the callback.
#[test]
fn scc_031_vlen_in_chunk_needs_gather() {
    let s = store();
    let mut c = cache(&s, 1 << 20);
    let mut m = MinimalLayout::new(8, 4);
    m.info.vlen_in_chunk = true;
    m.info.capabilities = Capabilities::SCATTER | Capabilities::FILL;
    let err = c.register(DatasetId(1), Arc::new(m)).unwrap_err();
    assert!(
        matches!(&err, ChunkCacheError::InvalidLayout { reason, .. } if reason.contains("`gather`")),
        "{err}"
    );
    assert_eq!(c.dataset_entries(DatasetId(1)), 0);
}

/// SCC-032: a read touching 8 uncached chunks of one dataset makes one lookup call with all 8,
/// then one vectored read of 8 segments.
#[test]
fn scc_032_lookup_is_batched() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[32], &[4], 1, &[]).with_codec());
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1; 32]);
    c.flush().unwrap();
    c.destroy();
    m.take_events();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let before = s.snapshot();
    let _ = read(&mut c, 1, &Selection::All, 32);
    let ev = m.take_events();
    let lookups: Vec<&Event> = ev
        .iter()
        .filter(|e| matches!(e, Event::Lookup(..)))
        .collect();
    assert_eq!(lookups.len(), 1);
    assert!(matches!(lookups[0], Event::Lookup(1, coords, 8) if coords.len() == 8));
    let d = s.snapshot().since(&before);
    assert_eq!((d.read_vectors, d.read_segments, d.reads), (1, 8, 0));
}

/// A layout whose chunks are stored as `disk` bytes but decode to `chunk` bytes with a size
/// hint; decode records the buffer it receives and returns a dense chunk of `chunk` bytes with
/// `cap` capacity.
#[derive(Debug)]
struct HintLayout {
    disk: u64,
    chunk: usize,
    hint: usize,
    cap: usize,
    seen: Mutex<Vec<(usize, usize)>>,
}

impl ChunkLayout for HintLayout {
    fn query(&self) -> LayoutInfo {
        LayoutInfo {
            needs_codec: true,
            ..LayoutInfo::dense(&[self.chunk as u64], 1, &[])
        }
    }
    fn extent(&self) -> Vec<u64> {
        vec![self.chunk as u64]
    }
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let loc = DiskLocation {
            addr: 0,
            size: self.disk,
        };
        Ok(coords
            .iter()
            .map(|_| Lookup::dense(Some(loc), self.hint, Box::new(())))
            .collect())
    }
    fn decode(
        &self,
        _: &ChunkCoord,
        image: Vec<u8>,
        _: bool,
        _: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        self.seen
            .lock()
            .unwrap()
            .push((image.len(), image.capacity()));
        let mut v = Vec::with_capacity(self.cap);
        v.resize(self.chunk, image[0]);
        Ok(Chunk::Dense(v))
    }
    fn new_chunk(&self, _: &ChunkCoord, _: bool) -> Result<(Chunk, Udata), LayoutError> {
        Ok((Chunk::Dense(vec![0; self.chunk]), Box::new(())))
    }
    fn encode(
        &self,
        _: &ChunkCoord,
        _: &Chunk,
        _: bool,
        _: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        Err("read-only".into())
    }
    fn insert(&self, _: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        Err("read-only".into())
    }
    fn delete_chunk(
        &self,
        _: &ChunkCoord,
        _: Option<DiskLocation>,
        _: &mut Udata,
    ) -> Result<(), LayoutError> {
        Err("read-only".into())
    }
}

/// SCC-033 + SCC-036: decode receives the 100 valid disk bytes in a buffer allocated for the
/// 4,000-byte hint; the decoded chunk reports 4,000 used and 4,096 allocated bytes, and the
/// footprint grows by exactly 4,096.
#[test]
fn scc_033_036_size_hint_and_decoded_sizes() {
    let s = store();
    s.write_at(0, &[42; 100]).unwrap();
    let m = Arc::new(HintLayout {
        disk: 100,
        chunk: 4000,
        hint: 4000,
        cap: 4096,
        seen: Mutex::new(Vec::new()),
    });
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let got = read(&mut c, 1, &slab(&[10], &[2]), 2);
    assert_eq!(got, [42, 42]);
    let seen = m.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, 100);
    assert!(seen[0].1 >= 4000);
    let e = c.entry_stats(DatasetId(1), &[0]).unwrap();
    assert_eq!(e.usage.used, 4000);
    assert_eq!(e.usage.allocated, 4096);
    assert_eq!(c.stats().footprint, 4096);
}

/// SCC-039: a new chunk made for a partial write is filled with the fill value in every element
/// not written, and the index is not touched (no insert) until flush.
#[test]
fn scc_039_new_chunk_with_fill() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[6], &[6], 2, &[7, 0]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &slab(&[2], &[1]), &[1, 1]);
    let ev = m.take_events();
    assert!(ev.contains(&Event::NewChunk(1, vec![0], true)));
    assert_eq!(count(&ev, |e| matches!(e, Event::Insert(..))), 0);
    assert_eq!(
        read(&mut c, 1, &Selection::All, 12),
        [7, 0, 7, 0, 1, 1, 7, 0, 7, 0, 7, 0]
    );
    c.flush().unwrap();
    assert_eq!(
        count(&m.take_events(), |e| matches!(e, Event::Insert(..))),
        1
    );
}

/// SCC-041 + SCC-087: a pre-encoded (copying encode) chunk is still read from the cache with no
/// decode, and its image's bytes are part of the footprint; an unfiltered layout gets no separate
/// image at all.
#[test]
fn scc_041_copying_encode_keeps_chunk_readable() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[16], &[16], 1, &[]).with_codec());
    let mut c = cache_with(&s, preencode_config(100, 0.1));
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[3; 16]);
    let e = c.entry_stats(DatasetId(1), &[0]).unwrap();
    let image = e.image_bytes.unwrap();
    assert_eq!(c.stats().footprint, e.usage.allocated + image);
    m.take_events();
    assert_eq!(read(&mut c, 1, &Selection::All, 16), [3; 16]);
    assert!(m.take_events().is_empty());

    let plain = Arc::new(MockLayout::new(2, &[16], &[16], 1, &[]));
    c.register(DatasetId(2), plain).unwrap();
    write(&mut c, 2, &Selection::All, &[4; 16]);
    assert_eq!(c.entry_stats(DatasetId(2), &[0]).unwrap().image_bytes, None);
}

/// SCC-042 + SCC-043: evicting a dirty chunk that was not pre-encoded calls encode-in-place
/// once and the copying encode never; its memory is released. Live layout state (udata) always
/// matches the resident entries and is zero after destroy.
#[test]
fn scc_042_043_encode_in_place_and_release() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[]).with_codec());
    let mut c = cache(&s, 4);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &slab(&[0], &[4]), &[1; 4]);
    m.take_events();
    write(&mut c, 1, &slab(&[4], &[4]), &[2; 4]);
    let ev = m.take_events();
    assert_eq!(count(&ev, |e| matches!(e, Event::EncodeInPlace(..))), 1);
    assert_eq!(count(&ev, |e| matches!(e, Event::Encode(..))), 0);
    assert_eq!(c.stats().footprint, 4);
    assert_eq!(m.live_udata(), c.stats().entries);
    let _ = read(&mut c, 1, &Selection::All, 8);
    assert_eq!(m.live_udata(), c.stats().entries);
    c.destroy();
    assert_eq!(m.live_udata(), 0);
}

/// A dense layout with a scatter callback that records what it is given.
#[derive(Debug)]
struct ScatterLayout {
    inner: MockLayout,
    /// Per call: the caller buffer's length and the runs.
    calls: Mutex<Vec<(usize, Vec<CopyRun>)>>,
}

impl ChunkLayout for ScatterLayout {
    fn query(&self) -> LayoutInfo {
        LayoutInfo {
            capabilities: Capabilities::SCATTER,
            ..self.inner.query()
        }
    }
    fn extent(&self) -> Vec<u64> {
        self.inner.extent()
    }
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        self.inner.lookup(coords)
    }
    fn new_chunk(&self, c: &ChunkCoord, fill: bool) -> Result<(Chunk, Udata), LayoutError> {
        self.inner.new_chunk(c, fill)
    }
    fn encode(
        &self,
        c: &ChunkCoord,
        ch: &Chunk,
        pb: bool,
        u: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        self.inner.encode(c, ch, pb, u)
    }
    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        self.inner.insert(reqs)
    }
    fn delete_chunk(
        &self,
        c: &ChunkCoord,
        l: Option<DiskLocation>,
        u: &mut Udata,
    ) -> Result<(), LayoutError> {
        self.inner.delete_chunk(c, l, u)
    }
    fn scatter(
        &self,
        chunk: &Chunk,
        runs: &[CopyRun],
        buf: &mut [u8],
        conv: Option<&dyn Conversion>,
    ) -> Result<(), LayoutError> {
        assert!(conv.is_none());
        let data = chunk.as_dense().ok_or("dense")?;
        self.calls.lock().unwrap().push((buf.len(), runs.to_vec()));
        h5_chunkcache::selection::scatter(data, buf, runs, 1)?;
        Ok(())
    }
}

/// SCC-049: with a layout scatter, a read covering two chunks calls it once per chunk with runs
/// inside the chunk's own extent and the whole caller buffer, the runs' buffer ranges together
/// covering the selection exactly once.
#[test]
fn scc_049_layout_scatter_sees_chunk_and_buffer_extents() {
    let s = store();
    let m = Arc::new(ScatterLayout {
        inner: MockLayout::new(1, &[4, 8], &[4, 4], 1, &[]),
        calls: Mutex::new(Vec::new()),
    });
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let data: Vec<u8> = (0..32).collect();
    write(&mut c, 1, &Selection::All, &data);
    let got = read(&mut c, 1, &slab(&[1, 2], &[2, 4]), 8);
    assert_eq!(got, [10, 11, 12, 13, 18, 19, 20, 21]);
    let calls = m.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2);
    let mut covered = Vec::new();
    for (buf_len, runs) in &calls {
        assert_eq!(*buf_len, 8);
        for r in runs {
            assert!(r.chunk_offset + r.len <= 16);
            covered.extend(r.buf_offset..r.buf_offset + r.len);
        }
    }
    covered.sort_unstable();
    assert_eq!(covered, (0..8).collect::<Vec<u64>>());
}

/// SCC-057: the in-memory copy helpers with conversion agree with a naive element-by-element
/// reference, for hyperslab and point runs.
#[test]
fn scc_057_converting_copy_helpers_match_reference() {
    let chunk: Vec<u8> = (0..16i32).flat_map(|v| (v * 3 - 7).to_be_bytes()).collect();
    for runs in [
        vec![
            CopyRun {
                chunk_offset: 2,
                buf_offset: 0,
                len: 3,
            },
            CopyRun {
                chunk_offset: 9,
                buf_offset: 3,
                len: 4,
            },
        ],
        vec![
            CopyRun {
                chunk_offset: 15,
                buf_offset: 0,
                len: 1,
            },
            CopyRun {
                chunk_offset: 0,
                buf_offset: 1,
                len: 1,
            },
            CopyRun {
                chunk_offset: 15,
                buf_offset: 2,
                len: 1,
            },
        ],
    ] {
        let n: u64 = runs.iter().map(|r| r.len).sum();
        let mut buf = vec![0u8; n as usize * 8];
        scatter_converted(&chunk, &mut buf, &runs, &BeI32ToF64::default()).unwrap();
        let mut expect = Vec::new();
        for r in &runs {
            for k in 0..r.len {
                let i = (r.chunk_offset + k) as i32;
                expect.push(f64::from(i * 3 - 7));
            }
        }
        assert_eq!(from_f64s(&buf), expect);
        let mut back = vec![0u8; 64];
        gather_converted(&buf, &mut back, &runs, &F64ToBeI32).unwrap();
        for r in &runs {
            for k in 0..r.len {
                let o = ((r.chunk_offset + k) * 4) as usize;
                assert_eq!(back[o..o + 4], chunk[o..o + 4]);
            }
        }
    }
    let err = scatter_converted(
        &chunk,
        &mut [0u8; 8],
        &[CopyRun {
            chunk_offset: 0,
            buf_offset: 0,
            len: 2,
        }],
        &BeI32ToF64::default(),
    );
    assert!(err.is_err());
}

// ---------------------------------------------------------------------------------------------
// §2.7 write flow.
// ---------------------------------------------------------------------------------------------

/// SCC-062: 100 writes into resident chunks cause no storage write until flush.
#[test]
fn scc_062_resident_writes_wait_for_flush() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[40], &[8], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[0; 40]);
    for i in 0..100u64 {
        write(&mut c, 1, &slab(&[i % 40], &[1]), &[i as u8]);
    }
    let snap = s.snapshot();
    assert_eq!(snap.writes + snap.write_vectors, 0);
    c.flush().unwrap();
    let snap = s.snapshot();
    assert_eq!((snap.writes, snap.write_vectors), (0, 1));
}

/// Writes 16 bytes over two 8-byte chunks, flushes and drops the cache.
fn on_disk(s: &Store, m: &Arc<MockLayout>) {
    let mut c = cache(s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &(0..16).collect::<Vec<u8>>());
    c.flush().unwrap();
    c.destroy();
    m.take_events();
}

/// SCC-063: fully overwriting a chunk that exists on disk reads nothing and makes a new chunk
/// without fill; the flush's insert receives the old location (the mock then reuses it).
#[test]
fn scc_063_full_overwrite_reads_nothing() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[16], &[8], 1, &[]).with_codec());
    on_disk(&s, &m);
    let old = m.location(&[1]).unwrap();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let before = s.snapshot();
    write(&mut c, 1, &slab(&[8], &[8]), &[9; 8]);
    let d = s.snapshot().since(&before);
    assert_eq!(d.reads + d.read_vectors, 0);
    let ev = m.take_events();
    assert!(ev.contains(&Event::NewChunk(1, vec![1], false)));
    assert_eq!(count(&ev, |e| matches!(e, Event::Decode(..))), 0);
    assert_eq!(
        c.entry_stats(DatasetId(1), &[1]).unwrap().location,
        Some(old)
    );
    c.flush().unwrap();
    assert_eq!(m.location(&[1]), Some(old));
    c.destroy();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    assert_eq!(read(&mut c, 1, &slab(&[6], &[4]), 4), [6, 7, 9, 9]);
}

/// SCC-064: writing one element of an existing chunk reads it first; the others keep their
/// values after flush.
#[test]
fn scc_064_partial_write_reads_first() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[16], &[8], 1, &[]).with_codec());
    on_disk(&s, &m);
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let before = s.snapshot();
    write(&mut c, 1, &slab(&[3], &[1]), &[99]);
    let d = s.snapshot().since(&before);
    assert_eq!(d.reads + d.read_vectors, 1);
    c.flush().unwrap();
    c.destroy();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    assert_eq!(
        read(&mut c, 1, &slab(&[0], &[8]), 8),
        [0, 1, 2, 99, 4, 5, 6, 7]
    );
}

/// Grows the mock's extent to `new` and notifies the cache (an append's resize).
fn grow(c: &mut ChunkCache, m: &MockLayout, new: u64) {
    let old = m.extent();
    m.set_extent(&[new]);
    c.set_extent_notify(DatasetId(1), &old).unwrap();
}

/// Appends (a resize, then a run of consecutive elements ending at the extent) take the
/// resident-run path also when they start a chunk: the new chunk is looked up once and made as
/// the general flow makes it (SCC-065: filled, since the run covers only its part inside the
/// extent), a chunk the run covers whole is made without fill (SCC-063), and a partly written
/// chunk on disk is read first (SCC-064). Values checked after flush, in a fresh cache.
#[test]
fn appends_bring_in_chunks_as_the_general_flow() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[0], &[8], 1, &[7]).with_codec());
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let value = |i: u64| (i + 10) as u8;
    for k in 0..6u64 {
        grow(&mut c, &m, (k + 1) * 3);
        let run: Vec<u8> = (k * 3..(k + 1) * 3).map(value).collect();
        write(&mut c, 1, &slab(&[k * 3], &[3]), &run);
    }
    let ev = m.take_events();
    let new: Vec<&Event> = ev
        .iter()
        .filter(|e| matches!(e, Event::NewChunk(..)))
        .collect();
    assert_eq!(
        new,
        [
            &Event::NewChunk(1, vec![0], true),
            &Event::NewChunk(1, vec![1], true),
            &Event::NewChunk(1, vec![2], true),
        ]
    );
    assert_eq!(
        count(
            &ev,
            |e| matches!(e, Event::Lookup(1, coords, 0) if coords.len() == 1)
        ),
        3,
        "one lookup per new chunk, none for resident ones: {ev:?}"
    );
    // Elements 16 and 17 are written; the rest of chunk 2 holds the fill value once the
    // extent covers it.
    grow(&mut c, &m, 24);
    let mut want: Vec<u8> = (0..18).map(value).collect();
    want.extend([7; 6]);
    assert_eq!(read(&mut c, 1, &slab(&[0], &[24]), 24), want);
    // A run covering a whole absent chunk: made without fill.
    grow(&mut c, &m, 32);
    let run: Vec<u8> = (24..32).map(value).collect();
    write(&mut c, 1, &slab(&[24], &[8]), &run);
    assert!(
        m.take_events()
            .contains(&Event::NewChunk(1, vec![3], false))
    );
    want.extend(&run);
    c.flush().unwrap();
    c.destroy();

    // Chunks on disk, not in the cache, partly written by the next appends: read, then written.
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    grow(&mut c, &m, 35);
    m.take_events();
    let run: Vec<u8> = (32..35).map(value).collect();
    write(&mut c, 1, &slab(&[32], &[3]), &run);
    let ev = m.take_events();
    assert!(ev.contains(&Event::NewChunk(1, vec![4], true)), "{ev:?}");
    grow(&mut c, &m, 38);
    let before = s.snapshot();
    write(&mut c, 1, &slab(&[35], &[3]), &[1, 2, 3]);
    assert_eq!(
        s.snapshot().since(&before).read_vectors,
        0,
        "chunk 4 resident"
    );
    c.flush().unwrap();
    c.destroy();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    grow(&mut c, &m, 42);
    m.take_events();
    write(&mut c, 1, &slab(&[38], &[4]), &[4, 5, 6, 8]);
    // Chunk 4 read, chunk 5 (elements 40 and 41) made filled; both looked up in one batch.
    assert_eq!(
        m.take_events(),
        [
            Event::Lookup(1, vec![vec![4], vec![5]], 1),
            Event::Decode(1, vec![4]),
            Event::NewChunk(1, vec![5], true),
        ]
    );
    c.flush().unwrap();
    c.destroy();
    want.extend(&run);
    want.extend([1, 2, 3, 4, 5, 6, 8]);
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    assert_eq!(read(&mut c, 1, &slab(&[0], &[42]), 42), want);
}

/// SCC-066: a partial write touching 6 chunks on disk looks them up in one batch and reads them
/// with one vectored read of 6 segments.
#[test]
fn scc_066_partial_write_loads_are_merged() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[24], &[4], 1, &[]).with_codec());
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1; 24]);
    c.flush().unwrap();
    c.destroy();
    m.take_events();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let before = s.snapshot();
    let sel = Selection::Hyperslab(Hyperslab::new(&[1], &[4], &[6], &[2]).unwrap());
    write(&mut c, 1, &sel, &[5; 12]);
    let ev = m.take_events();
    let lookups: Vec<&Event> = ev
        .iter()
        .filter(|e| matches!(e, Event::Lookup(..)))
        .collect();
    assert_eq!(lookups.len(), 1);
    assert!(matches!(lookups[0], Event::Lookup(1, coords, 6) if coords.len() == 6));
    let d = s.snapshot().since(&before);
    assert_eq!((d.read_vectors, d.read_segments), (1, 6));
}

// ---------------------------------------------------------------------------------------------
// §2.8–§2.10 allocation, eviction and memory.
// ---------------------------------------------------------------------------------------------

/// SCC-073: registering a dataset (its creation, with early allocation done by the layout
/// itself) creates no entry and no new chunk.
#[test]
fn scc_073_registration_creates_nothing() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[64], &[8], 1, &[4]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    assert_eq!(c.stats().entries, 0);
    assert!(m.take_events().is_empty());
    assert_eq!(s.snapshot().writes + s.snapshot().write_vectors, 0);
}

/// SCC-075 + SCC-078: past the high-water mark the least recently written dirty chunk is
/// pre-encoded; evicting it later calls no encode at all: insert, then one storage write of the
/// image. The same workload without pre-encoding gives the same file contents.
#[test]
fn scc_075_078_preencoded_victims_only_write() {
    let run = |preencode: bool| {
        let s = store();
        let m = Arc::new(MockLayout::new(1, &[48], &[8], 1, &[]).with_codec());
        let cfg = if preencode {
            preencode_config(30, 0.75)
        } else {
            config(30)
        };
        let mut c = cache_with(&s, cfg);
        c.register(DatasetId(1), m.clone()).unwrap();
        write(&mut c, 1, &slab(&[0], &[8]), &[1; 8]);
        write(&mut c, 1, &slab(&[8], &[8]), &[2; 8]);
        write(&mut c, 1, &slab(&[16], &[8]), &[3; 8]);
        if preencode {
            // 24 bytes > 22.5: the oldest dirty chunk got an image (and the images pushed the
            // footprint over the limit, so that chunk was evicted by writing its image).
            let ev = m.take_events();
            assert!(ev.contains(&Event::Encode(1, vec![0])));
            assert_eq!(count(&ev, |e| matches!(e, Event::EncodeInPlace(..))), 0);
            assert!(c.stats().preencoded >= 1);
        }
        m.take_events();
        let before = s.snapshot();
        write(&mut c, 1, &slab(&[24], &[8]), &[4; 8]);
        write(&mut c, 1, &slab(&[32], &[8]), &[5; 8]);
        let ev = m.take_events();
        if preencode {
            assert_eq!(count(&ev, |e| matches!(e, Event::EncodeInPlace(..))), 0);
            let d = s.snapshot().since(&before);
            assert_eq!(
                d.writes as usize,
                count(&ev, |e| matches!(e, Event::Insert(..)))
            );
        }
        c.flush().unwrap();
        c.destroy();
        let mut c = cache(&s, 1 << 20);
        c.register(DatasetId(1), m.clone()).unwrap();
        read(&mut c, 1, &Selection::All, 48)
    };
    let with = run(true);
    assert_eq!(with, run(false));
    assert_eq!(&with[..8], &[1; 8]);
    assert_eq!(&with[32..40], &[5; 8]);
}

/// SCC-081: with the default 100% threshold, reading a chunk in two complementary halves marks
/// it fully accessed; reading 60% of another leaves it partial.
#[test]
fn scc_081_bounding_box_coverage() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[10, 20], &[10, 10], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1; 200]);
    c.flush().unwrap();
    c.flush_dataset(DatasetId(1), true).unwrap();
    let _ = read(&mut c, 1, &slab(&[0, 0], &[5, 10]), 50);
    assert!(!c.entry_stats(DatasetId(1), &[0, 0]).unwrap().full);
    let _ = read(&mut c, 1, &slab(&[5, 0], &[5, 10]), 50);
    assert!(c.entry_stats(DatasetId(1), &[0, 0]).unwrap().full);
    let _ = read(&mut c, 1, &slab(&[0, 10], &[6, 10]), 60);
    assert!(!c.entry_stats(DatasetId(1), &[0, 1]).unwrap().full);
}

/// SCC-086 + EC-05: closing a dataset writes its 3 dirty chunks and leaves no entry; with the
/// storage failing, close reports the error and the chunks stay resident and dirty.
#[test]
fn scc_086_dataset_close_flushes_and_evicts() {
    use h5_io::{FaultInjection, FaultPlan, IoOp};
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[12], &[4], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[7; 12]);
    c.close_dataset(DatasetId(1)).unwrap();
    assert_eq!(s.snapshot().write_segments, 3);
    assert_eq!(c.stats().entries, 0);
    assert!(matches!(
        c.write(&[WriteRequest::new(DatasetId(1), &Selection::All, &[1; 12])]),
        Err(ChunkCacheError::UnknownDataset(_))
    ));

    let f = Arc::new(FaultInjection::new(MemoryStorage::new()));
    f.set_plan(FaultPlan::new().fail_from(IoOp::WriteVectored, 1));
    let storage: Arc<dyn Storage> = f.clone();
    let mut c = ChunkCache::new(storage, config(1 << 20)).unwrap();
    let m = Arc::new(MockLayout::new(1, &[12], &[4], 1, &[]));
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[7; 12]);
    assert!(matches!(
        c.close_dataset(DatasetId(1)),
        Err(ChunkCacheError::Io(_))
    ));
    let st = c.stats();
    assert_eq!((st.entries, st.dirty_entries), (3, 3));
    assert_eq!(read(&mut c, 1, &Selection::All, 12), [7; 12]);
}

/// SCC-088 + SCC-087: after a seeded run of mixed reads, writes, flushes and evictions over three
/// datasets, the per-dataset bytes add up to the footprint, which equals the sum of the chunk
/// sizes of the resident entries.
#[test]
fn scc_088_per_dataset_bytes_sum_to_footprint() {
    let s = store();
    let a = Arc::new(MockLayout::new(1, &[64], &[8], 1, &[]).with_codec());
    let b = Arc::new(MockLayout::new(2, &[60], &[6], 2, &[]).sharing(&a));
    let d = Arc::new(MockLayout::new(3, &[30], &[10], 1, &[1]).sharing(&a));
    let mut c = cache(&s, 100);
    c.register(DatasetId(1), a.clone()).unwrap();
    c.register(DatasetId(2), b.clone()).unwrap();
    c.register(DatasetId(3), d.clone()).unwrap();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let sizes = [(1u64, 64u64, 1usize), (2, 60, 2), (3, 30, 1)];
    for step in 0..3000 {
        let (ds, len, es) = sizes[next(3) as usize];
        let start = next(len);
        let n = 1 + next(len - start);
        match next(10) {
            0..=3 => write(
                &mut c,
                ds,
                &slab(&[start], &[n]),
                &vec![step as u8; n as usize * es],
            ),
            4..=7 => {
                let _ = read(&mut c, ds, &slab(&[start], &[n]), n as usize * es);
            }
            8 => c.flush().unwrap(),
            _ => c.flush_dataset(DatasetId(ds), true).unwrap(),
        }
        let st = c.stats();
        assert_eq!(st.per_dataset.values().sum::<usize>(), st.footprint);
    }
    let st = c.stats();
    let mut sum = 0;
    for (ds, len, es) in sizes {
        let dims = match ds {
            1 => 8,
            2 => 6,
            _ => 10,
        };
        for k in 0..len.div_ceil(dims) {
            if let Some(e) = c.entry_stats(DatasetId(ds), &[k]) {
                assert_eq!(e.usage.used, dims as usize * es);
                sum += e.usage.allocated + e.image_bytes.unwrap_or(0);
            }
        }
    }
    assert_eq!(sum, st.footprint);
    assert!(st.footprint <= 100);
}

/// SCC-091: lowering the limit at run time evicts, writing the dirty chunks, until the new
/// limit holds; raising it again lets later loads stay resident.
#[test]
fn scc_091_runtime_limit_changes() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[64], &[8], 1, &[]));
    let mut c = cache(&s, 64);
    c.register(DatasetId(1), m.clone()).unwrap();
    let data: Vec<u8> = (0..64).collect();
    write(&mut c, 1, &Selection::All, &data);
    assert_eq!(c.stats().dirty_entries, 8);
    c.set_limit(16).unwrap();
    let st = c.stats();
    assert!(st.footprint <= 16);
    assert_eq!(st.evictions_dirty, 6);
    assert_eq!(s.snapshot().bytes_written, 48);
    c.set_limit(64).unwrap();
    assert_eq!(read(&mut c, 1, &Selection::All, 64), data);
    let ev = c.stats().evictions;
    assert_eq!(read(&mut c, 1, &Selection::All, 64), data);
    assert_eq!(c.stats().evictions, ev);
    assert_eq!(c.stats().entries, 8);
}

/// SCC-092: with a 1 MiB limit, a read touching 64 uncached 256 KiB chunks never holds more
/// than the limit (peak footprint) and returns the right data.
#[test]
fn scc_092_read_batches_fit_the_limit() {
    let s = store();
    let chunk = 256 * 1024u64;
    let m = Arc::new(MockLayout::new(1, &[64 * chunk], &[chunk], 1, &[]));
    let mut c = cache(&s, 64 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let data: Vec<u8> = (0..64 * chunk).map(|i| (i / chunk) as u8).collect();
    write(&mut c, 1, &Selection::All, &data);
    c.flush().unwrap();
    c.destroy();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let got = read(&mut c, 1, &Selection::All, data.len());
    assert!(got == data);
    let st = c.stats();
    assert!(st.peak_footprint <= 1 << 20, "{}", st.peak_footprint);
    assert_eq!(st.overshoots, 0);
}

// ---------------------------------------------------------------------------------------------
// §2.13 conversion, §2.14 old deficiencies, §2.15 concurrency.
// ---------------------------------------------------------------------------------------------

/// SCC-103: in one read call a converting dataset is converted and a non-converting one is
/// copied without touching the conversion.
#[test]
fn scc_103_conversion_per_dataset_in_one_call() {
    let s = store();
    let a = Arc::new(MockLayout::new(1, &[4], &[4], 4, &[]));
    let b = Arc::new(MockLayout::new(2, &[4], &[4], 4, &[]).sharing(&a));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), a.clone()).unwrap();
    c.register(DatasetId(2), b.clone()).unwrap();
    let be: Vec<u8> = [5i32, -6, 7, 8]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    write(&mut c, 1, &Selection::All, &be);
    write(&mut c, 2, &Selection::All, &be);
    let conv = BeI32ToF64::default();
    let all = Selection::All;
    let (mut x, mut y) = (vec![0u8; 32], vec![0u8; 16]);
    c.read(&mut [
        ReadRequest::new(DatasetId(1), &all, &mut x).converting(&conv),
        ReadRequest::new(DatasetId(2), &all, &mut y),
    ])
    .unwrap();
    assert_eq!(from_f64s(&x), [5.0, -6.0, 7.0, 8.0]);
    assert_eq!(y, be);
    assert_eq!(conv.calls.load(Ordering::SeqCst), 1);
}

/// Writes field `b` (1 byte in memory) of a compound `{a: u8, b: u8}` (2 bytes in the file),
/// keeping `a` from the destination: a conversion that needs a background.
#[derive(Debug)]
struct FieldB;

impl Conversion for FieldB {
    fn src_size(&self) -> usize {
        1
    }
    fn dst_size(&self) -> usize {
        2
    }
    fn needs_background(&self) -> bool {
        true
    }
    fn convert(&self, src: &[u8], dst: &mut [u8], n: usize) -> Result<(), LayoutError> {
        for i in 0..n {
            dst[2 * i + 1] = src[i];
        }
        Ok(())
    }
}

/// SCC-105: writing only field `b` of a compound into an existing chunk keeps field `a`, after
/// flush and reopen, because the chunk's current values are the background.
#[test]
fn scc_105_background_keeps_unwritten_fields() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[4], &[4], 2, &[]).with_codec());
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1, 10, 2, 20, 3, 30, 4, 40]);
    c.flush().unwrap();
    c.destroy();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let all = Selection::All;
    c.write(&[WriteRequest::new(DatasetId(1), &all, &[91, 92, 93, 94]).converting(&FieldB)])
        .unwrap();
    c.flush().unwrap();
    c.destroy();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    assert_eq!(
        read(&mut c, 1, &Selection::All, 8),
        [1, 91, 2, 92, 3, 93, 4, 94]
    );
}

/// SCC-108: two datasets with a 1 MiB hot set each share a 2 MiB cache with no miss after
/// warm-up (two private 1 MiB caches with any overhead would thrash); a single 1.5 MiB chunk
/// under a 4 MiB limit stays resident and hits on the second read.
#[test]
fn scc_108_no_fixed_private_cache() {
    let s = store();
    let chunk = 256 * 1024u64;
    let a = Arc::new(MockLayout::new(1, &[4 * chunk], &[chunk], 1, &[]));
    let b = Arc::new(MockLayout::new(2, &[4 * chunk], &[chunk], 1, &[]).sharing(&a));
    let n = (4 * chunk) as usize;
    let mut c = cache(&s, 4 << 20);
    c.register(DatasetId(1), a.clone()).unwrap();
    c.register(DatasetId(2), b.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &vec![1; n]);
    write(&mut c, 2, &Selection::All, &vec![2; n]);
    c.flush().unwrap();
    c.destroy();
    let mut c = cache(&s, 2 << 20);
    c.register(DatasetId(1), a.clone()).unwrap();
    c.register(DatasetId(2), b.clone()).unwrap();
    for round in 0..5 {
        for ds in [1, 2] {
            for k in 0..4 {
                let _ = read(&mut c, ds, &slab(&[k * chunk + 7], &[10]), 10);
            }
        }
        if round == 0 {
            assert_eq!(c.stats().misses, 8);
        }
    }
    let st = c.stats();
    assert_eq!((st.misses, st.hits), (8, 32));
    assert_eq!(st.footprint, 2 * n);

    let big = (3 << 20) / 2;
    let m = Arc::new(MockLayout::new(3, &[big], &[big], 1, &[]));
    let mut c = cache(&s, 4 << 20);
    c.register(DatasetId(3), m.clone()).unwrap();
    write(&mut c, 3, &Selection::All, &vec![3; big as usize]);
    c.flush().unwrap();
    c.destroy();
    let mut c = cache_with(
        &s,
        ChunkCacheConfig {
            bypass_fraction: 0.5,
            ..config(4 << 20)
        },
    );
    c.register(DatasetId(3), m.clone()).unwrap();
    let _ = read(&mut c, 3, &slab(&[5], &[5]), 5);
    let _ = read(&mut c, 3, &slab(&[5], &[5]), 5);
    assert_eq!((c.stats().misses, c.stats().hits), (1, 1));
}

/// SCC-109: 10,000 registered datasets use no cache memory; reading one chunk of each keeps the
/// footprint within the limit.
#[test]
fn scc_109_open_datasets_cost_nothing() {
    let s = store();
    let mut c = cache(&s, 64 * 1024);
    let proto = MockLayout::new(0, &[64], &[64], 1, &[]);
    let mut mocks = Vec::new();
    for d in 0..10_000u64 {
        let m = Arc::new(MockLayout::new(d, &[64], &[64], 1, &[]).sharing(&proto));
        c.register(DatasetId(d), m.clone()).unwrap();
        mocks.push(m);
    }
    assert_eq!(c.stats().footprint, 0);
    for d in 0..10_000u64 {
        let _ = read(&mut c, d, &slab(&[0], &[8]), 8);
        assert!(c.stats().footprint <= 64 * 1024);
    }
    assert_eq!(c.stats().entries, 0); // missing chunks are not cached (fill values)
    for d in (0..10_000u64).step_by(10) {
        write(&mut c, d, &slab(&[0], &[8]), &[1; 8]);
        assert!(c.stats().footprint <= 64 * 1024);
    }
    assert_eq!(c.stats().entries, 1000);
}

fn shared_run(threads: usize, seed: u64) -> Vec<u8> {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[256], &[16], 1, &[]).with_codec());
    let c = Arc::new(Mutex::new(cache(&s, 64)));
    c.lock().unwrap().register(DatasetId(1), m.clone()).unwrap();
    std::thread::scope(|sc| {
        for t in 0..threads as u64 {
            let c = Arc::clone(&c);
            sc.spawn(move || {
                // Each thread owns chunks t, t+threads, ...; all threads also read chunk 0.
                for k in (t..16).step_by(threads) {
                    let v = (k * 7 + seed) as u8;
                    let mut g = c.lock().unwrap();
                    write(&mut g, 1, &slab(&[k * 16], &[16]), &[v; 16]);
                    let _ = read(&mut g, 1, &slab(&[0], &[16]), 16);
                }
            });
        }
    });
    let mut g = c.lock().unwrap();
    g.flush().unwrap();
    read(&mut g, 1, &Selection::All, 256)
}

/// SCC-111: the cache needs no global lock across callbacks: the file holds it behind one mutex
/// per call, and 4 threads writing disjoint chunks while reading a shared one end with exactly
/// the serial result.
#[test]
fn scc_111_threads_on_disjoint_chunks_match_serial() {
    assert_eq!(shared_run(4, 3), shared_run(1, 3));
}

/// SCC-112: two writers racing on overlapping selections always leave one of the two serial
/// results, never a mix of half-applied writes.
#[test]
fn scc_112_overlapping_writers_give_a_serial_result() {
    for _ in 0..20 {
        let s = store();
        let m = Arc::new(MockLayout::new(1, &[64], &[8], 1, &[]));
        let c = Arc::new(Mutex::new(cache(&s, 32)));
        c.lock().unwrap().register(DatasetId(1), m.clone()).unwrap();
        std::thread::scope(|sc| {
            for v in [1u8, 2] {
                let c = Arc::clone(&c);
                sc.spawn(move || {
                    let mut g = c.lock().unwrap();
                    write(&mut g, 1, &slab(&[4], &[56]), &[v; 56]);
                });
            }
        });
        let got = read(&mut c.lock().unwrap(), 1, &slab(&[4], &[56]), 56);
        assert!(got == [1; 56] || got == [2; 56], "{got:?}");
    }
}

/// SCC-113: background work (pre-encoding, codec threads) on or off gives byte-identical
/// storage contents and read results.
#[test]
fn scc_113_background_work_changes_nothing_visible() {
    let run = |preencode: Option<f64>, threads: usize| {
        let s = store();
        let m = Arc::new(MockLayout::new(1, &[128], &[8], 1, &[]).with_codec());
        let mut c = cache_with(
            &s,
            ChunkCacheConfig {
                preencode_high_water: preencode,
                threads: Some(threads),
                ..config(1 << 20)
            },
        );
        c.register(DatasetId(1), m.clone()).unwrap();
        let data: Vec<u8> = (0..128).map(|i| (i * 13 % 256) as u8).collect();
        write(&mut c, 1, &Selection::All, &data);
        write(&mut c, 1, &slab(&[20], &[30]), &[0xAB; 30]);
        c.flush().unwrap();
        let got = read(&mut c, 1, &Selection::All, 128);
        let len = s.len().unwrap();
        let mut bytes = vec![0u8; len as usize];
        s.read_at(0, &mut bytes).unwrap();
        (got, bytes)
    };
    let base = run(None, 1);
    assert_eq!(run(Some(0.001), 1), base);
    assert_eq!(run(Some(0.001), 2), base);
    assert_eq!(run(None, 2), base);
}

// ---------------------------------------------------------------------------------------------
// Edge cases (spec §3).
// ---------------------------------------------------------------------------------------------

/// EC-07: an empty selection (in one dataset or all of them) succeeds with no callback, no I/O,
/// no entry, and an empty buffer.
#[test]
fn ec_07_empty_selections_do_nothing() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let none = Selection::None;
    let empty = Selection::Points(Points::new(1, Vec::new()).unwrap());
    c.write(&[
        WriteRequest::new(DatasetId(1), &none, &[]),
        WriteRequest::new(DatasetId(1), &empty, &[]),
    ])
    .unwrap();
    let mut b: [u8; 0] = [];
    c.read(&mut [ReadRequest::new(DatasetId(1), &none, &mut b)])
        .unwrap();
    c.flush().unwrap();
    assert!(m.take_events().is_empty());
    assert_eq!(c.stats().entries, 0);
    let snap = s.snapshot();
    assert_eq!(
        snap.reads + snap.writes + snap.read_vectors + snap.write_vectors,
        0
    );
}

/// A mock wrapper whose lookup or encode can be made to fail.
#[derive(Debug)]
struct Faulty {
    inner: MockLayout,
    fail_lookup: std::sync::atomic::AtomicBool,
    fail_encode: std::sync::atomic::AtomicBool,
}

impl Faulty {
    fn new(inner: MockLayout) -> Self {
        Self {
            inner,
            fail_lookup: Default::default(),
            fail_encode: Default::default(),
        }
    }
}

impl ChunkLayout for Faulty {
    fn query(&self) -> LayoutInfo {
        self.inner.query()
    }
    fn extent(&self) -> Vec<u64> {
        self.inner.extent()
    }
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        if self.fail_lookup.load(Ordering::SeqCst) {
            return Err("index read failed".into());
        }
        self.inner.lookup(coords)
    }
    fn decode(
        &self,
        c: &ChunkCoord,
        i: Vec<u8>,
        pb: bool,
        u: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        self.inner.decode(c, i, pb, u)
    }
    fn new_chunk(&self, c: &ChunkCoord, fill: bool) -> Result<(Chunk, Udata), LayoutError> {
        self.inner.new_chunk(c, fill)
    }
    fn encode(
        &self,
        c: &ChunkCoord,
        ch: &Chunk,
        pb: bool,
        u: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        if self.fail_encode.load(Ordering::SeqCst) {
            return Err("filter failed".into());
        }
        self.inner.encode(c, ch, pb, u)
    }
    fn encode_in_place(
        &self,
        c: &ChunkCoord,
        ch: Chunk,
        pb: bool,
        u: &mut Udata,
    ) -> Result<Vec<u8>, LayoutError> {
        if self.fail_encode.load(Ordering::SeqCst) {
            return Err("filter failed".into());
        }
        self.inner.encode_in_place(c, ch, pb, u)
    }
    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        self.inner.insert(reqs)
    }
    fn delete_chunk(
        &self,
        c: &ChunkCoord,
        l: Option<DiskLocation>,
        u: &mut Udata,
    ) -> Result<(), LayoutError> {
        self.inner.delete_chunk(c, l, u)
    }
}

/// EC-21: a lookup failing for the second dataset of a read returns the error; the first
/// dataset's batch leaves no half-built entry and no udata behind, and resident chunks stay
/// valid.
#[test]
fn ec_21_lookup_failure_frees_the_batch() {
    let s = store();
    let a = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[]));
    let b = Arc::new(Faulty::new(
        MockLayout::new(2, &[8], &[4], 1, &[]).sharing(&a),
    ));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), a.clone()).unwrap();
    c.register(DatasetId(2), b.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1; 8]);
    write(&mut c, 2, &Selection::All, &[2; 8]);
    c.flush().unwrap();
    c.flush_dataset(DatasetId(1), true).unwrap();
    c.flush_dataset(DatasetId(2), true).unwrap();
    let _ = read(&mut c, 1, &slab(&[0], &[4]), 4);
    assert_eq!(a.live_udata(), 1);
    b.fail_lookup.store(true, Ordering::SeqCst);
    let all = Selection::All;
    let (mut x, mut y) = (vec![0u8; 8], vec![0u8; 8]);
    let r = c.read(&mut [
        ReadRequest::new(DatasetId(1), &all, &mut x),
        ReadRequest::new(DatasetId(2), &all, &mut y),
    ]);
    assert!(
        matches!(&r, Err(ChunkCacheError::Layout { callback: "lookup", dataset, .. }) if *dataset == DatasetId(2)),
        "{r:?}"
    );
    assert_eq!(c.stats().entries, 1);
    assert_eq!(a.live_udata(), 1);
    assert_eq!(read(&mut c, 1, &Selection::All, 8), [1; 8]);
}

/// EC-22: a corrupt image fails decode with an error naming the dataset and the chunk; no entry
/// is created and its udata is freed.
#[test]
fn ec_22_decode_failure_names_the_chunk() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[]).with_codec());
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1; 8]);
    c.flush().unwrap();
    c.destroy();
    let loc = m.location(&[1]).unwrap();
    s.write_at(loc.addr, &[0xFF, 0, 0, 0]).unwrap(); // length header now wrong
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let mut buf = vec![0u8; 8];
    let r = c.read(&mut [ReadRequest::new(DatasetId(1), &Selection::All, &mut buf)]);
    assert!(
        matches!(&r, Err(ChunkCacheError::Layout { callback: "decode", coord, .. }) if coord == &[1]),
        "{r:?}"
    );
    assert_eq!(c.stats().entries, 0);
    assert_eq!(m.live_udata(), 0);
}

/// EC-23: an encode failing during flush is reported; the chunk stays resident and dirty, and a
/// later flush writes it.
#[test]
fn ec_23_encode_failure_keeps_the_chunk_dirty() {
    let s = store();
    let m = Arc::new(Faulty::new(
        MockLayout::new(1, &[8], &[4], 1, &[]).with_codec(),
    ));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[5; 8]);
    m.fail_encode.store(true, Ordering::SeqCst);
    assert!(matches!(
        c.flush(),
        Err(ChunkCacheError::Layout {
            callback: "encode",
            ..
        })
    ));
    assert_eq!(c.stats().dirty_entries, 2);
    assert_eq!(s.snapshot().bytes_written, 0);
    m.fail_encode.store(false, Ordering::SeqCst);
    c.flush().unwrap();
    assert_eq!(c.stats().dirty_entries, 0);
}

/// EC-24: when insert succeeded but the write failed, the next flush writes the chunk at the same
/// address.
#[test]
fn ec_24_failed_write_is_retried_at_the_same_address() {
    use h5_io::{FaultInjection, FaultPlan, IoOp};
    let f = Arc::new(FaultInjection::new(MemoryStorage::new()));
    f.set_plan(FaultPlan::new().fail_nth(IoOp::WriteVectored, 1));
    let storage: Arc<dyn Storage> = f.clone();
    let mut c = ChunkCache::new(storage, config(1 << 20)).unwrap();
    let m = Arc::new(MockLayout::new(1, &[4], &[4], 1, &[]));
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[6; 4]);
    assert!(c.flush().is_err());
    let e = c.entry_stats(DatasetId(1), &[0]).unwrap();
    assert!(e.dirty);
    let addr = e.location.unwrap().addr;
    c.flush().unwrap();
    assert_eq!(m.location(&[0]).unwrap().addr, addr);
    let mut disk = [0u8; 4];
    f.read_at(addr, &mut disk).unwrap();
    assert_eq!(disk, [6; 4]);
}

/// A custom chunk reporting more used than allocated bytes.
#[derive(Debug)]
struct Liar;

impl h5_chunkcache::CustomChunk for Liar {
    fn mem_usage(&self) -> h5_chunkcache::MemUsage {
        h5_chunkcache::MemUsage {
            used: 10,
            allocated: 5,
        }
    }
}

/// A layout whose new chunks are `Liar`s.
#[derive(Debug)]
struct LiarLayout(MockLayout);

impl ChunkLayout for LiarLayout {
    fn query(&self) -> LayoutInfo {
        LayoutInfo {
            capabilities: Capabilities::SCATTER | Capabilities::GATHER | Capabilities::FILL,
            ..self.0.query()
        }
    }
    fn extent(&self) -> Vec<u64> {
        self.0.extent()
    }
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        self.0.lookup(coords)
    }
    fn new_chunk(&self, _: &ChunkCoord, _: bool) -> Result<(Chunk, Udata), LayoutError> {
        Ok((Chunk::Custom(Box::new(Liar)), Box::new(())))
    }
    fn encode(
        &self,
        _: &ChunkCoord,
        _: &Chunk,
        _: bool,
        _: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        Ok(Encoded::Owned(Vec::new()))
    }
    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        self.0.insert(reqs)
    }
    fn delete_chunk(
        &self,
        c: &ChunkCoord,
        l: Option<DiskLocation>,
        u: &mut Udata,
    ) -> Result<(), LayoutError> {
        self.0.delete_chunk(c, l, u)
    }
}

/// EC-28: a layout reporting fewer allocated than used bytes is an error, and the counters do
/// not move.
#[test]
fn ec_28_invalid_sizes_are_rejected() {
    let s = store();
    let mut c = cache(&s, 1 << 20);
    c.register(
        DatasetId(1),
        Arc::new(LiarLayout(MockLayout::new(1, &[8], &[4], 1, &[]))),
    )
    .unwrap();
    let sel = slab(&[0], &[2]);
    let r = c.write(&[WriteRequest::new(DatasetId(1), &sel, &[1, 2])]);
    assert!(
        matches!(
            r,
            Err(ChunkCacheError::InvalidLayoutSizes {
                callback: "new_chunk",
                ..
            })
        ),
        "{r:?}"
    );
    let st = c.stats();
    assert_eq!((st.entries, st.footprint), (0, 0));
}

/// EC-29: the same dataset twice in one write with overlapping selections: the later request
/// wins.
#[test]
fn ec_29_later_request_wins() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let (a, b) = (slab(&[0], &[6]), slab(&[2], &[6]));
    c.write(&[
        WriteRequest::new(DatasetId(1), &a, &[1; 6]),
        WriteRequest::new(DatasetId(1), &b, &[2; 6]),
    ])
    .unwrap();
    assert_eq!(
        read(&mut c, 1, &Selection::All, 8),
        [1, 1, 2, 2, 2, 2, 2, 2]
    );
}

/// EC-30: a grid with more chunks than a 64-bit linear index can count keeps distinct keys for
/// chunks far apart (keys are the coordinates themselves).
#[test]
fn ec_30_huge_grids_never_merge_chunks() {
    let s = store();
    let big = u64::MAX - 1;
    let m = Arc::new(MockLayout::new(1, &[big, big], &[1, 1], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let far = Selection::Points(Points::new(2, vec![big - 1, big - 1]).unwrap());
    let near = Selection::Points(Points::new(2, vec![0, 1]).unwrap());
    write(&mut c, 1, &far, &[1]);
    write(&mut c, 1, &near, &[2]);
    assert_eq!(c.stats().entries, 2);
    assert_eq!(read(&mut c, 1, &far, 1), [1]);
    assert_eq!(read(&mut c, 1, &near, 1), [2]);
}

/// EC-31: a dataset closed and another registered under the same identity (a reused object
/// header address) never sees the old entries: it reads fill values.
#[test]
fn ec_31_reused_identity_sees_no_stale_entries() {
    let s = store();
    let old = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), old.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[9; 8]);
    c.close_dataset(DatasetId(1)).unwrap();
    let new = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[3]));
    c.register(DatasetId(1), new.clone()).unwrap();
    assert_eq!(read(&mut c, 1, &Selection::All, 8), [3; 8]);
}

/// EC-33: a partial write to a missing chunk with no fill value leaves zeros in the unwritten
/// elements, never uninitialised memory.
#[test]
fn ec_33_no_fill_value_means_zeros() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[8], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &slab(&[3], &[2]), &[5, 5]);
    c.flush().unwrap();
    let mut disk = [0xFFu8; 8];
    s.read_at(m.location(&[0]).unwrap().addr, &mut disk)
        .unwrap();
    assert_eq!(disk, [0, 0, 0, 5, 5, 0, 0, 0]);
}

/// EC-36: a storage failure in the middle of a multi-chunk read returns the error; the cache
/// stays consistent (no udata leaked, footprint matches entries) and a retry succeeds.
#[test]
fn ec_36_failed_read_leaves_cache_consistent() {
    use h5_io::{FaultInjection, FaultPlan, IoOp};
    let f = Arc::new(FaultInjection::new(MemoryStorage::new()));
    let storage: Arc<dyn Storage> = f.clone();
    let m = Arc::new(MockLayout::new(1, &[16], &[4], 1, &[]));
    let mut c = ChunkCache::new(storage.clone(), config(1 << 20)).unwrap();
    c.register(DatasetId(1), m.clone()).unwrap();
    let data: Vec<u8> = (0..16).collect();
    write(&mut c, 1, &Selection::All, &data);
    c.flush().unwrap();
    c.flush_dataset(DatasetId(1), true).unwrap();
    let _ = read(&mut c, 1, &slab(&[0], &[4]), 4);
    f.set_plan(FaultPlan::new().fail_nth(IoOp::ReadVectored, f.calls(IoOp::ReadVectored) + 1));
    let mut buf = vec![0u8; 16];
    let r = c.read(&mut [ReadRequest::new(DatasetId(1), &Selection::All, &mut buf)]);
    assert!(matches!(r, Err(ChunkCacheError::Io(_))));
    let st = c.stats();
    assert_eq!(st.entries, 1);
    assert_eq!(m.live_udata(), 1);
    assert_eq!(st.footprint, 4);
    assert_eq!(read(&mut c, 1, &Selection::All, 16), data);
}

/// EC-37: flushing an empty cache, or a dataset without entries, succeeds with no I/O.
#[test]
fn ec_37_empty_flushes_do_nothing() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[]));
    let mut c = cache(&s, 1 << 20);
    c.flush().unwrap();
    c.register(DatasetId(1), m.clone()).unwrap();
    c.flush_dataset(DatasetId(1), false).unwrap();
    c.flush_dataset(DatasetId(1), true).unwrap();
    c.flush().unwrap();
    let snap = s.snapshot();
    assert_eq!(
        snap.writes + snap.write_vectors + snap.reads + snap.read_vectors,
        0
    );
    assert!(m.take_events().is_empty());
}

/// Bypass is off in these tests unless asked; `Bypass::Never` keeps even a chunk larger than the
/// bypass fraction in the cache (checked here so the configuration used above means what it
/// says).
#[test]
fn bypass_never_keeps_large_chunks_cached() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[8], 1, &[]));
    let mut c = cache_with(
        &s,
        ChunkCacheConfig {
            bypass_fraction: 0.5,
            ..config(10)
        },
    );
    c.register(DatasetId(1), m.clone()).unwrap();
    let all = Selection::All;
    c.write(&[WriteRequest::new(DatasetId(1), &all, &[1; 8]).with_bypass(Bypass::Never)])
        .unwrap();
    assert_eq!(c.stats().entries, 1);
    let _ = HashSet::<u8>::new();
}

/// SCC-060: reading into a buffer that is an array with its own (strided) selection changes only
/// the selected positions, across 3 chunks and 2 datasets in one call, including positions filled
/// from a chunk that does not exist; writing from such a buffer takes only the selected
/// positions. Selections of different sizes are refused.
#[test]
fn scc_060_unselected_memory_is_untouched() {
    use h5_chunkcache::selection::MemorySelection;
    let s = store();
    let a = Arc::new(MockLayout::new(1, &[12], &[4], 1, &[]));
    let b = Arc::new(MockLayout::new(2, &[12], &[4], 1, &[77]).sharing(&a));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), a.clone()).unwrap();
    c.register(DatasetId(2), b.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &(0..12).collect::<Vec<u8>>());
    write(&mut c, 2, &slab(&[0], &[4]), &[50, 51, 52, 53]);
    // File: elements 1, 3, 5, 7, 9, 11 (three chunks); memory: a 4×4 array, rows 1..=2 and
    // columns 1..=3 -> positions 5, 6, 7, 9, 10, 11.
    let file = Selection::Hyperslab(Hyperslab::new(&[1], &[2], &[6], &[1]).unwrap());
    let mem = MemorySelection {
        extent: vec![4, 4],
        selection: Selection::Hyperslab(Hyperslab::contiguous(&[1, 1], &[2, 3]).unwrap()),
    };
    let (mut x, mut y) = (vec![0xEEu8; 16], vec![0xDDu8; 16]);
    c.read(&mut [
        ReadRequest::new(DatasetId(1), &file, &mut x).in_memory(&mem),
        ReadRequest::new(DatasetId(2), &file, &mut y).in_memory(&mem),
    ])
    .unwrap();
    let sel_pos = [5usize, 6, 7, 9, 10, 11];
    let expect_x = [1u8, 3, 5, 7, 9, 11];
    let expect_y = [51u8, 53, 77, 77, 77, 77];
    let mut k = 0;
    for (i, (&vx, &vy)) in x.iter().zip(&y).enumerate() {
        if sel_pos.contains(&i) && k < 6 {
            assert_eq!((vx, vy), (expect_x[k], expect_y[k]), "position {i}");
            k += 1;
        } else {
            assert_eq!((vx, vy), (0xEE, 0xDD), "position {i} must be untouched");
        }
    }
    assert_eq!(k, 6);

    let src: Vec<u8> = (100..116).collect();
    c.write(&[WriteRequest::new(DatasetId(1), &file, &src).in_memory(&mem)])
        .unwrap();
    let got = read(&mut c, 1, &Selection::All, 12);
    assert_eq!(got, [0, 105, 2, 106, 4, 107, 6, 109, 8, 110, 10, 111]);

    let short = Selection::Hyperslab(Hyperslab::contiguous(&[0], &[5]).unwrap());
    let mut z = vec![0u8; 16];
    let r = c.read(&mut [ReadRequest::new(DatasetId(1), &short, &mut z).in_memory(&mem)]);
    assert!(matches!(r, Err(ChunkCacheError::Selection(_))), "{r:?}");
    assert_eq!(z, [0; 16]);
}

/// One cache shared by two files (one memory pool for many open files): each dataset's chunks
/// are read from and written to its own file, by flush and by eviction, under one budget.
#[test]
fn one_cache_shared_by_two_files() {
    let (f1, f2) = (store(), store());
    let a = Arc::new(MockLayout::new(1, &[16], &[4], 1, &[]));
    let b = Arc::new(MockLayout::new(2, &[16], &[4], 1, &[]));
    let mut c = cache(&f1, 24);
    c.register(DatasetId(1), a.clone()).unwrap();
    let other: Arc<dyn Storage> = f2.clone();
    c.register_in(DatasetId(2), b.clone(), other).unwrap();
    write(&mut c, 1, &Selection::All, &[1; 16]);
    write(&mut c, 2, &Selection::All, &[2; 16]);
    assert!(c.stats().footprint <= 24);
    c.flush().unwrap();
    assert_eq!(f1.snapshot().bytes_written, 16);
    assert_eq!(f2.snapshot().bytes_written, 16);
    let mut disk = [0u8; 4];
    f2.read_at(b.location(&[3]).unwrap().addr, &mut disk)
        .unwrap();
    assert_eq!(disk, [2; 4]);
    c.flush_dataset(DatasetId(1), true).unwrap();
    c.flush_dataset(DatasetId(2), true).unwrap();
    let all = Selection::All;
    let (mut x, mut y) = (vec![0u8; 16], vec![0u8; 16]);
    c.read(&mut [
        ReadRequest::new(DatasetId(1), &all, &mut x),
        ReadRequest::new(DatasetId(2), &all, &mut y),
    ])
    .unwrap();
    assert_eq!((x, y), (vec![1; 16], vec![2; 16]));
    assert!(f1.snapshot().read_vectors >= 1 && f2.snapshot().read_vectors >= 1);
}

/// OQ-34: writing every element of an edge chunk that lies inside the extent is a full
/// overwrite (no read), and the elements outside the extent hold the fill value, so the bytes
/// written are deterministic and growing the dataset shows fill. A new dense chunk is made
/// filled (the part outside the extent filled once, by the layout, not again by the cache).
#[test]
fn full_overwrite_of_an_edge_chunk_fills_outside() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[6], &[4], 1, &[9]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &slab(&[4], &[2]), &[5, 6]);
    let events = m.take_events();
    assert!(
        events.contains(&Event::NewChunk(1, vec![1], true)),
        "{events:?}"
    );
    assert!(
        !events.iter().any(|e| matches!(e, Event::Decode(..))),
        "nothing read: {events:?}"
    );
    c.flush().unwrap();
    let mut disk = [0u8; 4];
    s.read_at(m.location(&[1]).unwrap().addr, &mut disk)
        .unwrap();
    assert_eq!(disk, [5, 6, 9, 9]);
}

/// The registrations epoch: unchanged by a registration (a dataset found registered stays so),
/// changed by every close (SCC-086), and never shared by two caches (one replacing another).
#[test]
fn the_registrations_epoch_changes_when_a_dataset_leaves_and_only_then() {
    let s = store();
    let mut c = cache(&s, 1 << 20);
    let fresh = c.registrations_epoch();
    c.register(
        DatasetId(1),
        Arc::new(MockLayout::new(1, &[12], &[4], 1, &[])),
    )
    .unwrap();
    c.register(
        DatasetId(2),
        Arc::new(MockLayout::new(1, &[12], &[4], 1, &[])),
    )
    .unwrap();
    assert_eq!(
        c.registrations_epoch(),
        fresh,
        "registering keeps the epoch"
    );
    write(&mut c, 1, &Selection::All, &[7; 12]);
    assert_eq!(c.registrations_epoch(), fresh);
    c.close_dataset(DatasetId(2)).unwrap();
    let after = c.registrations_epoch();
    assert_ne!(after, fresh, "a close changes the epoch");
    assert!(c.is_registered(DatasetId(1)) && !c.is_registered(DatasetId(2)));
    let other = cache(&s, 1 << 20);
    assert!(
        ![fresh, after].contains(&other.registrations_epoch()),
        "a new cache never takes an epoch seen before"
    );
}
