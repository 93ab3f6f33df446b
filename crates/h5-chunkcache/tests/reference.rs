//! Property test against in-memory reference arrays: random writes, reads, flushes,
//! flush-with-evict and limit changes over a few small datasets, under a limit so small that
//! chunks are evicted (clean and dirty) all the time.

use crate::common;

use std::sync::Arc;

use common::MockLayout;
use h5_chunkcache::selection::{Hyperslab, Selection};
use h5_chunkcache::{ChunkCache, ChunkCacheConfig, DatasetId, ReadRequest, WriteRequest};
use h5_io::{MemoryStorage, Metrics, Storage};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct DsSpec {
    extent: Vec<u64>,
    chunk: Vec<u64>,
    elem_size: usize,
    fill: u8,
    codec: bool,
}

#[derive(Clone, Debug)]
enum Op {
    Write(usize, [u64; 4], u8),
    Read(usize, [u64; 4]),
    ReadAll(usize),
    Flush,
    FlushDataset(usize, bool),
    SetLimit(usize),
}

fn ds_spec() -> impl Strategy<Value = DsSpec> {
    (1usize..=2)
        .prop_flat_map(|rank| {
            (
                proptest::collection::vec(1u64..=6, rank),
                proptest::collection::vec(1u64..=3, rank),
                1usize..=2,
                any::<u8>(),
                any::<bool>(),
            )
        })
        .prop_map(|(extent, chunk, elem_size, fill, codec)| DsSpec {
            extent,
            chunk,
            elem_size,
            fill,
            codec,
        })
}

fn op() -> impl Strategy<Value = Op> {
    let raw = any::<[u64; 4]>();
    prop_oneof![
        5 => (0usize..3, raw, any::<u8>()).prop_map(|(d, r, s)| Op::Write(d, r, s)),
        4 => (0usize..3, raw).prop_map(|(d, r)| Op::Read(d, r)),
        1 => (0usize..3).prop_map(Op::ReadAll),
        1 => Just(Op::Flush),
        1 => (0usize..3, any::<bool>()).prop_map(|(d, e)| Op::FlushDataset(d, e)),
        1 => (1usize..64).prop_map(Op::SetLimit),
    ]
}

/// Start and shape of a hyperslab inside `extent` from raw numbers.
fn slab(extent: &[u64], raw: &[u64; 4]) -> (Vec<u64>, Vec<u64>) {
    let mut start = Vec::new();
    let mut shape = Vec::new();
    for (d, &e) in extent.iter().enumerate() {
        let s = raw[2 * d] % e;
        start.push(s);
        shape.push(1 + raw[2 * d + 1] % (e - s));
    }
    (start, shape)
}

/// Row-major flat indices of the elements of a hyperslab, in selection order.
fn indices(extent: &[u64], start: &[u64], shape: &[u64]) -> Vec<usize> {
    let mut out = Vec::new();
    if extent.len() == 1 {
        for i in 0..shape[0] {
            out.push((start[0] + i) as usize);
        }
    } else {
        for i in 0..shape[0] {
            for j in 0..shape[1] {
                out.push(((start[0] + i) * extent[1] + start[1] + j) as usize);
            }
        }
    }
    out
}

fn new_cache(
    s: &Arc<Metrics<MemoryStorage>>,
    limit: usize,
    layouts: &[Arc<MockLayout>],
) -> ChunkCache {
    let storage: Arc<dyn Storage> = s.clone();
    let mut c = ChunkCache::new(
        storage,
        ChunkCacheConfig {
            limit,
            default_dataset_min: 4,
            ..ChunkCacheConfig::default()
        },
    )
    .unwrap();
    for (i, m) in layouts.iter().enumerate() {
        c.register(DatasetId(i as u64), m.clone()).unwrap();
    }
    c
}

fn read_back(c: &mut ChunkCache, d: usize, sel: &Selection, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    c.read(&mut [ReadRequest::new(DatasetId(d as u64), sel, &mut buf)])
        .unwrap();
    buf
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// SCC-065, SCC-074..077, SCC-020, SCC-021: the cache always reads what the reference arrays
    /// hold, through constant eviction, flushes and limit changes, and a fresh cache reads the
    /// same after the final flush.
    #[test]
    fn matches_reference_arrays(
        specs in proptest::collection::vec(ds_spec(), 2..=3),
        ops in proptest::collection::vec(op(), 1..60),
        limit in 1usize..40,
    ) {
        let s = Arc::new(Metrics::new(MemoryStorage::new()));
        let first = MockLayout::new(0, &[1], &[1], 1, &[]);
        let layouts: Vec<Arc<MockLayout>> = specs
            .iter()
            .enumerate()
            .map(|(i, sp)| {
                let fill = vec![sp.fill; sp.elem_size];
                let mut m = MockLayout::new(i as u64, &sp.extent, &sp.chunk, sp.elem_size, &fill)
                    .sharing(&first);
                m.codec = sp.codec;
                Arc::new(m)
            })
            .collect();
        let mut refs: Vec<Vec<u8>> = specs
            .iter()
            .map(|sp| {
                let n: u64 = sp.extent.iter().product();
                vec![sp.fill; n as usize * sp.elem_size]
            })
            .collect();
        let mut c = new_cache(&s, limit, &layouts);
        for op in &ops {
            match op {
                Op::Write(d, raw, seed) => {
                    let d = d % specs.len();
                    let sp = &specs[d];
                    let (start, shape) = slab(&sp.extent, raw);
                    let idx = indices(&sp.extent, &start, &shape);
                    let data: Vec<u8> = (0..idx.len() * sp.elem_size)
                        .map(|k| seed.wrapping_add(k as u8))
                        .collect();
                    let sel = Selection::Hyperslab(Hyperslab::contiguous(&start, &shape).unwrap());
                    c.write(&[WriteRequest::new(DatasetId(d as u64), &sel, &data)])
                        .unwrap();
                    for (k, &i) in idx.iter().enumerate() {
                        let es = sp.elem_size;
                        refs[d][i * es..(i + 1) * es].copy_from_slice(&data[k * es..(k + 1) * es]);
                    }
                }
                Op::Read(d, raw) => {
                    let d = d % specs.len();
                    let sp = &specs[d];
                    let (start, shape) = slab(&sp.extent, raw);
                    let idx = indices(&sp.extent, &start, &shape);
                    let sel = Selection::Hyperslab(Hyperslab::contiguous(&start, &shape).unwrap());
                    let got = read_back(&mut c, d, &sel, idx.len() * sp.elem_size);
                    let es = sp.elem_size;
                    let want: Vec<u8> = idx
                        .iter()
                        .flat_map(|&i| refs[d][i * es..(i + 1) * es].to_vec())
                        .collect();
                    prop_assert_eq!(got, want);
                }
                Op::ReadAll(d) => {
                    let d = d % specs.len();
                    let got = read_back(&mut c, d, &Selection::All, refs[d].len());
                    prop_assert_eq!(&got, &refs[d]);
                }
                Op::Flush => c.flush().unwrap(),
                Op::FlushDataset(d, evict) => {
                    c.flush_dataset(DatasetId((d % specs.len()) as u64), *evict).unwrap();
                }
                Op::SetLimit(l) => c.set_limit(*l).unwrap(),
            }
            let st = c.stats();
            prop_assert_eq!(st.footprint, st.per_dataset.values().sum::<usize>());
            prop_assert!(st.used <= st.footprint);
        }
        c.flush().unwrap();
        prop_assert_eq!(c.stats().dirty_entries, 0);
        c.destroy();
        prop_assert_eq!(layouts[0].live_udata(), 0);
        let mut fresh = new_cache(&s, limit, &layouts);
        for (d, want) in refs.iter().enumerate() {
            let got = read_back(&mut fresh, d, &Selection::All, want.len());
            prop_assert_eq!(&got, want);
        }
    }
}
