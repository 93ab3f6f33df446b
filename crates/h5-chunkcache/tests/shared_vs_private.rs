//! The motivating scenario, scaled down: per-dataset private caches thrash where one
//! shared cache of the same total memory keeps every hot chunk.

use crate::common;

use std::sync::Arc;

use common::MockLayout;
use h5_chunkcache::selection::{Hyperslab, Selection};
use h5_chunkcache::{ChunkCache, ChunkCacheConfig, DatasetId, ReadRequest, WriteRequest};
use h5_io::{MemoryStorage, Metrics, Storage};

const DATASETS: u64 = 64;
const HOT: u64 = 4;
const CHUNK: u64 = 64 << 10;

fn config(limit: usize) -> ChunkCacheConfig {
    ChunkCacheConfig {
        limit,
        default_dataset_min: 0,
        ..ChunkCacheConfig::default()
    }
}

/// A fixed-seed xorshift sequence of (dataset, hot chunk) accesses, each pair at least once.
fn accesses() -> Vec<(u64, u64)> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out: Vec<(u64, u64)> = (0..DATASETS)
        .flat_map(|d| (0..HOT).map(move |h| (d, h)))
        .collect();
    for _ in 0..4096 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(((x >> 8) % DATASETS, (x >> 32) % HOT));
    }
    // Shuffle the guaranteed accesses into the stream too.
    for i in (1..out.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.swap(i, (x % (i as u64 + 1)) as usize);
    }
    out
}

/// Writes every dataset's hot chunks to `storage` (one flush), returning the layouts.
fn populate(storage: &Arc<Metrics<MemoryStorage>>) -> Vec<Arc<MockLayout>> {
    let dyn_storage: Arc<dyn Storage> = storage.clone();
    let mut c = ChunkCache::new(dyn_storage, config(1 << 30)).unwrap();
    let first = MockLayout::new(0, &[HOT * CHUNK], &[CHUNK], 1, &[]);
    let mut layouts = Vec::new();
    for d in 0..DATASETS {
        let m = Arc::new(MockLayout::new(d, &[HOT * CHUNK], &[CHUNK], 1, &[]).sharing(&first));
        c.register(DatasetId(d), m.clone()).unwrap();
        let data = vec![d as u8; (HOT * CHUNK) as usize];
        c.write(&[WriteRequest::new(DatasetId(d), &Selection::All, &data)])
            .unwrap();
        layouts.push(m);
    }
    c.flush().unwrap();
    layouts
}

fn read_chunk(c: &mut ChunkCache, d: u64, h: u64) {
    let sel = Selection::Hyperslab(Hyperslab::contiguous(&[h * CHUNK], &[CHUNK]).unwrap());
    let mut buf = vec![0u8; CHUNK as usize];
    c.read(&mut [ReadRequest::new(DatasetId(d), &sel, &mut buf)])
        .unwrap();
    assert!(buf.iter().all(|&b| b == d as u8));
}

/// The motivating test of the issue, scaled down (64 KiB chunks instead of 1 MiB, same shape):
/// 64 datasets, each with a hot set of 4 chunks, read in a fixed-seed random interleaving.
/// 64 private caches of 64 KiB each (HDF5's per-dataset model) read far more than the 256 hot
/// chunks; one shared 32 MiB cache (SCC-001) reads each hot chunk exactly once.
#[test]
fn scc_001_shared_cache_beats_private_caches() {
    let storage = Arc::new(Metrics::new(MemoryStorage::new()));
    let layouts = populate(&storage);
    let order = accesses();
    let hot_chunks = DATASETS * HOT;

    // Private caches.
    let before = storage.snapshot();
    let mut private: Vec<ChunkCache> = layouts
        .iter()
        .enumerate()
        .map(|(d, m)| {
            let s: Arc<dyn Storage> = storage.clone();
            let mut c = ChunkCache::new(s, config(CHUNK as usize)).unwrap();
            c.register(DatasetId(d as u64), m.clone()).unwrap();
            c
        })
        .collect();
    for &(d, h) in &order {
        read_chunk(&mut private[d as usize], d, h);
    }
    let private_reads = storage.snapshot().since(&before).read_segments;
    assert!(
        private_reads > 10 * hot_chunks,
        "private caches read {private_reads} chunks"
    );

    // One shared cache.
    let before = storage.snapshot();
    let s: Arc<dyn Storage> = storage.clone();
    let mut shared = ChunkCache::new(s, config(32 << 20)).unwrap();
    for (d, m) in layouts.iter().enumerate() {
        shared.register(DatasetId(d as u64), m.clone()).unwrap();
    }
    for &(d, h) in &order {
        read_chunk(&mut shared, d, h);
    }
    let d = storage.snapshot().since(&before);
    assert_eq!(d.read_segments, hot_chunks);
    assert_eq!(d.reads, 0);
    assert_eq!(shared.stats().evictions, 0);
}
