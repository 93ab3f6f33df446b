//! Direct chunk read and write (spec §2.4 SCC-022 .. SCC-024, EC-02, EC-13 .. EC-16).

use crate::common;

use std::sync::Arc;

use common::MockLayout;
use h5_chunkcache::selection::{Hyperslab, Selection};
use h5_chunkcache::{
    ChunkCache, ChunkCacheConfig, ChunkCacheError, DatasetId, LayoutInfo, ReadRequest, WriteRequest,
};
use h5_io::{IoOp, MemoryStorage, Metrics, Storage};

type Store = Arc<Metrics<MemoryStorage>>;

fn store() -> Store {
    Arc::new(Metrics::new(MemoryStorage::new()))
}

fn cache(s: &Store, config: ChunkCacheConfig) -> ChunkCache {
    let storage: Arc<dyn Storage> = s.clone();
    ChunkCache::new(storage, config).unwrap()
}

fn cfg() -> ChunkCacheConfig {
    ChunkCacheConfig {
        limit: 1 << 20,
        default_dataset_min: 0,
        bypass_fraction: 1.0,
        preencode_high_water: None,
        threads: Some(1),
        ..ChunkCacheConfig::default()
    }
}

fn slab(start: &[u64], shape: &[u64]) -> Selection {
    Selection::Hyperslab(Hyperslab::contiguous(start, shape).unwrap())
}

fn write(c: &mut ChunkCache, ds: u64, sel: &Selection, data: &[u8]) {
    c.write(&[WriteRequest::new(DatasetId(ds), sel, data)])
        .unwrap();
}

fn read(c: &mut ChunkCache, ds: u64, sel: &Selection, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    c.read(&mut [ReadRequest::new(DatasetId(ds), sel, &mut buf)])
        .unwrap();
    buf
}

/// The toy codec of the common mock: 4-byte length header, bytes XOR 0x5A.
fn toy_decode(image: &[u8]) -> Vec<u8> {
    let n = u32::from_le_bytes(image[..4].try_into().unwrap()) as usize;
    assert_eq!(n, image.len() - 4);
    image[4..].iter().map(|b| b ^ 0x5A).collect()
}

fn toy_encode(chunk: &[u8]) -> Vec<u8> {
    let mut v = (chunk.len() as u32).to_le_bytes().to_vec();
    v.extend(chunk.iter().map(|b| b ^ 0x5A));
    v
}

/// SCC-022: writing through the cache to a codec dataset without flushing, then direct-reading
/// the chunk: the bytes decode to the values just written, and storage shows exactly one chunk
/// write before the read (that chunk only: the other dirty chunk stays dirty).
#[test]
fn scc_022_direct_read_flushes_dirty_chunk() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[16], &[8], 1, &[]).with_codec());
    let mut c = cache(&s, cfg());
    c.register(DatasetId(1), m.clone()).unwrap();
    let vals: Vec<u8> = (1..=16).collect();
    write(&mut c, 1, &Selection::All, &vals);
    s.record_ops(true);
    let mut buf = vec![0u8; 64];
    let n = c.direct_chunk_read(DatasetId(1), &[8], &mut buf).unwrap();
    assert_eq!(n, 12);
    assert_eq!(toy_decode(&buf[..n]), &vals[8..]);
    let loc = m.location(&[1]).unwrap();
    let ops: Vec<(IoOp, u64, u64)> = s.ops().iter().map(|o| (o.op, o.offset, o.len)).collect();
    assert_eq!(
        ops,
        [
            (IoOp::WriteVectored, loc.addr, 12),
            (IoOp::Read, loc.addr, 12)
        ]
    );
    assert!(!c.entry_stats(DatasetId(1), &[1]).unwrap().dirty);
    assert!(c.entry_stats(DatasetId(1), &[0]).unwrap().dirty);
    assert_eq!(c.direct_chunk_size(DatasetId(1), &[8]).unwrap(), Some(12));
}

/// SCC-023 / EC-13: a chunk of 1,000 bytes on disk read with a 999-byte buffer holding a
/// sentinel: `BufferTooSmall { needed: 1000 }`, the sentinel intact, no storage read, no state
/// change; a retry with 1,000 bytes succeeds.
#[test]
fn scc_023_ec_13_buffer_too_small() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[1000], &[1000], 1, &[]));
    let mut c = cache(&s, cfg());
    c.register(DatasetId(1), m.clone()).unwrap();
    let data: Vec<u8> = (0..1000).map(|i| (i % 251) as u8).collect();
    write(&mut c, 1, &Selection::All, &data);
    c.flush().unwrap();
    let entries = c.stats().entries;
    let before = s.snapshot();
    let mut small = vec![0xEE; 999];
    let err = c
        .direct_chunk_read(DatasetId(1), &[0], &mut small)
        .unwrap_err();
    assert!(matches!(
        err,
        ChunkCacheError::BufferTooSmall { needed: 1000 }
    ));
    assert!(small.iter().all(|&b| b == 0xEE));
    let d = s.snapshot().since(&before);
    assert_eq!(d.reads + d.read_vectors + d.writes + d.write_vectors, 0);
    assert_eq!(c.stats().entries, entries);
    let mut full = vec![0u8; 1000];
    assert_eq!(
        c.direct_chunk_read(DatasetId(1), &[0], &mut full).unwrap(),
        1000
    );
    assert_eq!(full, data);
}

/// SCC-024: a dirty cached chunk holding X, then a direct write of an image of Y: flushing and
/// reading back gives Y, and storage never receives X (the only write is the direct one).
#[test]
fn scc_024_direct_write_drops_cached_copy() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[8], &[8], 1, &[]).with_codec());
    let mut c = cache(&s, cfg());
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1; 8]);
    let before = s.snapshot();
    s.record_ops(true);
    let y = toy_encode(&[9; 8]);
    c.direct_chunk_write(DatasetId(1), &[0], &y).unwrap();
    assert!(c.entry_stats(DatasetId(1), &[0]).is_none());
    c.flush().unwrap();
    let d = s.snapshot().since(&before);
    assert_eq!((d.writes, d.write_vectors, d.bytes_written), (1, 0, 12));
    let loc = m.location(&[0]).unwrap();
    assert_eq!(loc.size, 12);
    assert_eq!(
        s.ops_of(IoOp::Write)
            .iter()
            .map(|o| (o.offset, o.len))
            .collect::<Vec<_>>(),
        [(loc.addr, 12)]
    );
    assert_eq!(read(&mut c, 1, &Selection::All, 8), [9; 8]);
    assert_eq!(m.live_udata(), c.stats().entries);
}

fn not_cached(info: &mut LayoutInfo) {
    info.uses_cache = false;
}

/// EC-02: direct chunk read, size and write on a dataset whose layout does not use the cache
/// are errors (`NotCached`), never silent no-ops; storage is untouched.
#[test]
fn ec_02_direct_ops_need_the_cache() {
    let s = store();
    let mut m = MockLayout::new(1, &[8], &[8], 1, &[]);
    m.tweak = Some(not_cached);
    let m = Arc::new(m);
    let mut c = cache(&s, cfg());
    c.register(DatasetId(1), m.clone()).unwrap();
    let mut buf = [0u8; 8];
    assert!(matches!(
        c.direct_chunk_read(DatasetId(1), &[0], &mut buf),
        Err(ChunkCacheError::NotCached(DatasetId(1)))
    ));
    assert!(matches!(
        c.direct_chunk_size(DatasetId(1), &[0]),
        Err(ChunkCacheError::NotCached(DatasetId(1)))
    ));
    assert!(matches!(
        c.direct_chunk_write(DatasetId(1), &[0], &[1; 8]),
        Err(ChunkCacheError::NotCached(DatasetId(1)))
    ));
    let snap = s.snapshot();
    assert_eq!(
        snap.writes + snap.write_vectors + snap.reads + snap.read_vectors,
        0
    );
    assert!(m.take_events().is_empty());
}

/// EC-14: a chunk not allocated and not dirty: `NotAllocated`, the buffer untouched. A chunk
/// that is dirty in the cache but never written is flushed first, so it reads fine.
#[test]
fn ec_14_not_allocated() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[16], &[8], 1, &[]));
    let mut c = cache(&s, cfg());
    c.register(DatasetId(1), m.clone()).unwrap();
    let mut buf = [0xAB; 8];
    assert!(matches!(
        c.direct_chunk_read(DatasetId(1), &[8], &mut buf),
        Err(ChunkCacheError::NotAllocated { offset }) if offset == [8]
    ));
    assert_eq!(buf, [0xAB; 8]);
    assert_eq!(c.direct_chunk_size(DatasetId(1), &[8]).unwrap(), None);

    write(&mut c, 1, &slab(&[9], &[2]), &[5, 6]);
    assert!(m.location(&[1]).is_none());
    assert_eq!(
        c.direct_chunk_read(DatasetId(1), &[8], &mut buf).unwrap(),
        8
    );
    assert_eq!(buf, [0, 5, 6, 0, 0, 0, 0, 0]);
    assert!(m.location(&[1]).is_some());
}

/// EC-15: offsets off a chunk boundary or outside the extent are refused with no change, for
/// read, size and write; a wrong rank is a selection error.
#[test]
fn ec_15_misaligned_or_out_of_range() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[10, 10], &[4, 5], 1, &[]));
    let mut c = cache(&s, cfg());
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[3; 100]);
    let mut buf = [0u8; 20];
    assert!(matches!(
        c.direct_chunk_read(DatasetId(1), &[4, 3], &mut buf),
        Err(ChunkCacheError::Misaligned { offset, .. }) if offset == [4, 3]
    ));
    assert!(matches!(
        c.direct_chunk_write(DatasetId(1), &[2, 0], &[0; 20]),
        Err(ChunkCacheError::Misaligned { .. })
    ));
    assert!(matches!(
        c.direct_chunk_read(DatasetId(1), &[12, 0], &mut buf),
        Err(ChunkCacheError::OutOfExtent { offset, extent }) if offset == [12, 0] && extent == [10, 10]
    ));
    assert!(matches!(
        c.direct_chunk_write(DatasetId(1), &[0, 10], &[0; 20]),
        Err(ChunkCacheError::OutOfExtent { .. })
    ));
    assert!(matches!(
        c.direct_chunk_size(DatasetId(1), &[0]),
        Err(ChunkCacheError::Selection(_))
    ));
    assert!(matches!(
        c.direct_chunk_read(DatasetId(99), &[0, 0], &mut buf),
        Err(ChunkCacheError::UnknownDataset(DatasetId(99)))
    ));
    assert_eq!(buf, [0; 20]);
    let snap = s.snapshot();
    assert_eq!(
        snap.writes + snap.write_vectors + snap.reads + snap.read_vectors,
        0
    );
    assert_eq!(c.stats().dirty_entries, 6);
    // An edge chunk's start inside the extent is fine.
    assert_eq!(
        c.direct_chunk_read(DatasetId(1), &[8, 5], &mut buf)
            .unwrap(),
        20
    );
}

/// EC-16: a chunk whose cached copy is pre-encoded (and dirty) is dropped without writing
/// either the image or the chunk when a direct write replaces it; the direct bytes are the
/// only result.
#[test]
fn ec_16_direct_write_over_preencoded_chunk() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[64], &[64], 1, &[]).with_codec());
    let mut c = cache(
        &s,
        ChunkCacheConfig {
            limit: 200,
            preencode_high_water: Some(0.1),
            ..cfg()
        },
    );
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1; 64]);
    let e = c.entry_stats(DatasetId(1), &[0]).unwrap();
    assert!(e.dirty && e.image_bytes.is_some());
    let before = s.snapshot();
    let y = toy_encode(&[2; 64]);
    c.direct_chunk_write(DatasetId(1), &[0], &y).unwrap();
    c.flush().unwrap();
    let st = c.stats();
    assert_eq!((st.entries, st.footprint, st.dirty_entries), (0, 0, 0));
    let d = s.snapshot().since(&before);
    assert_eq!((d.writes, d.write_vectors, d.bytes_written), (1, 0, 68));
    assert_eq!(read(&mut c, 1, &Selection::All, 64), [2; 64]);
    let mut raw = vec![0u8; 68];
    assert_eq!(
        c.direct_chunk_read(DatasetId(1), &[0], &mut raw).unwrap(),
        68
    );
    assert_eq!(raw, y);
}
