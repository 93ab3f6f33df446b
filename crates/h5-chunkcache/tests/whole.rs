//! Whole-chunk writes (spec §2.8, SCC-067, SCC-069, SCC-072, OQ-31, OQ-34): covered dense chunks of
//! 64 KiB or more are written straight to storage in batches, never admitted; clean resident
//! copies are dropped, dirty ones updated in the cache; edge chunks get the fill value outside the
//! extent; a write of a whole large dataset goes a few chunk rows at a time.

use crate::common;

use std::sync::Arc;

use common::{Event, MockLayout};
use h5_chunkcache::selection::{Hyperslab, Selection};
use h5_chunkcache::{
    Bypass, ChunkCache, ChunkCacheConfig, Conversion, DatasetId, LayoutError, ReadRequest,
    WHOLE_WRITE_BATCH, WriteRequest,
};
use h5_io::{MemoryStorage, Metrics, Storage};

type Store = Arc<Metrics<MemoryStorage>>;

/// 128 × 128 two-byte elements: 32 KiB. 256 × 128: 64 KiB, the smallest chunk written whole.
const SMALL: [u64; 2] = [128, 128];
const BIG: [u64; 2] = [256, 128];

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
            preencode_high_water: None,
            ..ChunkCacheConfig::default()
        },
    )
    .unwrap()
}

fn slab(start: &[u64], shape: &[u64]) -> Selection {
    Selection::Hyperslab(Hyperslab::contiguous(start, shape).unwrap())
}

fn u16s(n: usize, salt: u16) -> Vec<u8> {
    (0..n)
        .flat_map(|i| (i as u16).wrapping_mul(7).wrapping_add(salt).to_le_bytes())
        .collect()
}

fn read(c: &mut ChunkCache, sel: &Selection, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    c.read(&mut [ReadRequest::new(DatasetId(1), sel, &mut buf).with_bypass(Bypass::Never)])
        .unwrap();
    buf
}

fn setup(extent: &[u64], dims: [u64; 2]) -> (Store, Arc<MockLayout>, ChunkCache) {
    let s = store();
    let m = Arc::new(MockLayout::new(1, extent, &dims, 2, &[0xAB, 0xCD]));
    let mut c = cache(&s, 64 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    (s, m, c)
}

/// A covered chunk of 64 KiB: looked up, inserted and written in one vectored write, never
/// admitted, no new chunk made; the statistics count it. Read back from a fresh cache.
#[test]
fn scc_067_whole_chunks_skip_the_cache() {
    let (s, m, mut c) = setup(&[512, 256], BIG);
    let data = u16s(512 * 256, 3);
    let before = s.snapshot();
    c.write(&[WriteRequest::new(DatasetId(1), &Selection::All, &data)])
        .unwrap();
    let d = s.snapshot().since(&before);
    let st = c.stats();
    assert_eq!((st.entries, st.peak_footprint), (0, 0));
    assert_eq!((st.whole_chunk_writes, st.bypassed), (4, 4));
    assert_eq!(st.bypassed_bytes, 4 * 65536);
    assert_eq!(st.bytes_written, 4 * 65536);
    // Four chunks of one batch placed one after the other: one storage call, one segment.
    assert_eq!((d.write_vectors, d.write_segments, d.writes), (1, 1, 0));
    let ev = m.take_events();
    assert_eq!(
        ev,
        [
            Event::Lookup(1, vec![vec![0, 0], vec![0, 1], vec![1, 0], vec![1, 1]], 0),
            Event::Insert(1, 4)
        ]
    );
    let mut fresh = cache(&s, 64 << 20);
    fresh.register(DatasetId(1), m.clone()).unwrap();
    assert_eq!(read(&mut fresh, &Selection::All, data.len()), data);
}

/// Chunks smaller than 64 KiB and requests under `Never` or `Always` keep their flows.
#[test]
fn small_chunks_and_explicit_modes_are_cached_or_bypassed_as_before() {
    let (_s, _m, mut c) = setup(&[256, 256], SMALL);
    c.write(&[WriteRequest::new(
        DatasetId(1),
        &Selection::All,
        &u16s(65536, 1),
    )])
    .unwrap();
    assert_eq!((c.stats().whole_chunk_writes, c.stats().entries), (0, 4));
    for mode in [Bypass::Never, Bypass::Always] {
        let (_s, _m, mut c) = setup(&[256, 128], BIG);
        c.write(&[
            WriteRequest::new(DatasetId(1), &Selection::All, &u16s(32768, 1)).with_bypass(mode),
        ])
        .unwrap();
        assert_eq!(c.stats().whole_chunk_writes, 0, "{mode:?}");
    }
}

/// SCC-072, OQ-31: a chunk cached clean is dropped before it is written whole (a later read
/// sees the new values); a chunk cached dirty is updated in the cache instead.
#[test]
fn scc_072_clean_copy_dropped_dirty_copy_updated() {
    let (s, m, mut c) = setup(&[512, 128], BIG);
    let first = u16s(512 * 128, 1);
    c.write(&[WriteRequest::new(DatasetId(1), &Selection::All, &first)])
        .unwrap();
    // Chunk 0 cached clean by a partial read, chunk 1 dirty by a partial write.
    assert_eq!(read(&mut c, &slab(&[0, 0], &[1, 4]), 8), first[..8]);
    c.write(&[
        WriteRequest::new(DatasetId(1), &slab(&[300, 0], &[1, 2]), &[9, 9, 9, 9])
            .with_bypass(Bypass::Never),
    ])
    .unwrap();
    assert_eq!((c.stats().entries, c.stats().dirty_entries), (2, 1));
    let second = u16s(512 * 128, 500);
    c.write(&[WriteRequest::new(DatasetId(1), &Selection::All, &second)])
        .unwrap();
    let st = c.stats();
    assert_eq!(
        st.whole_chunk_writes,
        2 + 1,
        "first field 2, then chunk 0 only"
    );
    assert_eq!(
        (st.entries, st.dirty_entries),
        (1, 1),
        "chunk 1 stays dirty"
    );
    assert_eq!(
        c.entry_stats(DatasetId(1), &[0, 0]),
        None,
        "clean copy dropped"
    );
    assert_eq!(read(&mut c, &Selection::All, second.len()), second);
    c.flush().unwrap();
    let mut fresh = cache(&s, 64 << 20);
    fresh.register(DatasetId(1), m.clone()).unwrap();
    assert_eq!(read(&mut fresh, &Selection::All, second.len()), second);
}

/// OQ-34: an edge chunk covered inside the extent is written whole with the fill value in the
/// rest of its image.
#[test]
fn edge_chunk_gets_the_fill_value_outside_the_extent() {
    let (s, m, mut c) = setup(&[300, 100], BIG);
    let data = u16s(300 * 100, 5);
    c.write(&[WriteRequest::new(DatasetId(1), &Selection::All, &data)])
        .unwrap();
    assert_eq!(c.stats().whole_chunk_writes, 2);
    for (coord, rows) in [([0u64, 0u64], 0..256u64), ([1, 0], 256..300)] {
        let loc = m.location(&coord).expect("chunk placed");
        let mut image = vec![0u8; 65536];
        s.read_at(loc.addr, &mut image).unwrap();
        for r in 0..256u64 {
            for col in 0..128u64 {
                let at = ((r * 128 + col) * 2) as usize;
                let got = &image[at..at + 2];
                let row = rows.start + r;
                if row < rows.end && col < 100 {
                    let k = (row * 100 + col) as usize * 2;
                    assert_eq!(got, &data[k..k + 2], "{coord:?} ({r}, {col})");
                } else {
                    assert_eq!(got, [0xAB, 0xCD], "{coord:?} ({r}, {col}): fill");
                }
            }
        }
    }
}

#[derive(Debug)]
struct U8ToU16;

impl Conversion for U8ToU16 {
    fn src_size(&self) -> usize {
        1
    }
    fn dst_size(&self) -> usize {
        2
    }
    fn convert(&self, src: &[u8], dst: &mut [u8], n: usize) -> Result<(), LayoutError> {
        for i in 0..n {
            dst[2 * i..2 * i + 2].copy_from_slice(&u16::from(src[i]).to_le_bytes());
        }
        Ok(())
    }
}

/// A converting write is gathered (converted) into the batch; a chunk of more than one batch
/// that is one run of the caller's buffer is written from that buffer.
#[test]
fn converted_and_straight_whole_chunks() {
    let (_s, _m, mut c) = setup(&[512, 128], BIG);
    let small: Vec<u8> = (0..512 * 128).map(|i| (i % 251) as u8).collect();
    c.write(&[WriteRequest::new(DatasetId(1), &Selection::All, &small).converting(&U8ToU16)])
        .unwrap();
    assert_eq!(c.stats().whole_chunk_writes, 2);
    let want: Vec<u8> = small
        .iter()
        .flat_map(|&b| u16::from(b).to_le_bytes())
        .collect();
    assert_eq!(read(&mut c, &Selection::All, want.len()), want);

    // One 1-D chunk of 8 MiB (more than a batch), written whole from the caller's buffer.
    let s = store();
    let n = (WHOLE_WRITE_BATCH as u64 / 2) * 2;
    let m = Arc::new(MockLayout::new(1, &[n], &[n], 2, &[]));
    let mut c = cache(&s, 64 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let data = u16s(n as usize, 9);
    let before = s.snapshot();
    c.write(&[WriteRequest::new(DatasetId(1), &Selection::All, &data)])
        .unwrap();
    let d = s.snapshot().since(&before);
    assert_eq!(
        (c.stats().whole_chunk_writes, c.stats().peak_footprint),
        (1, 0)
    );
    assert_eq!((d.write_vectors, d.bytes_written), (1, data.len() as u64));
    assert_eq!(read(&mut c, &Selection::All, data.len()), data);
}

/// EC-29: two requests of one call on the same chunk keep request order (the later wins), so
/// that chunk does not take the whole-chunk path.
#[test]
fn two_requests_on_one_chunk_keep_their_order() {
    let (_s, _m, mut c) = setup(&[256, 256], BIG);
    let a = u16s(256 * 256, 1);
    let b = u16s(256 * 128, 77);
    c.write(&[
        WriteRequest::new(DatasetId(1), &Selection::All, &a),
        WriteRequest::new(DatasetId(1), &slab(&[0, 128], &[256, 128]), &b),
    ])
    .unwrap();
    assert_eq!(c.stats().whole_chunk_writes, 1, "chunk (0, 0) only");
    let got = read(&mut c, &Selection::All, a.len());
    for r in 0..256usize {
        let row = &got[r * 512..r * 512 + 512];
        assert_eq!(row[..256], a[r * 512..r * 512 + 256], "row {r} left half");
        assert_eq!(row[256..], b[r * 256..r * 256 + 256], "row {r} right half");
    }
}

/// A write of every element of a dataset with many chunks goes a few chunk rows at a time: the
/// values are the same as written in one piece, and each slab's batch is one storage call.
#[test]
fn large_whole_dataset_write_in_slabs() {
    // 40 × 20 chunks of 64 KiB (800 chunks, 50 MiB): slabs of 12 chunk rows.
    let (s, m, mut c) = setup(&[40 * 256, 20 * 128], BIG);
    let data = u16s(40 * 256 * 20 * 128, 11);
    let before = s.snapshot();
    c.write(&[WriteRequest::new(DatasetId(1), &Selection::All, &data)])
        .unwrap();
    let d = s.snapshot().since(&before);
    assert_eq!(c.stats().whole_chunk_writes, 800);
    assert_eq!(d.bytes_written, data.len() as u64);
    // 64 chunks per 4 MiB batch; slabs of 240 chunks: 4 batches each, the last slab 80 chunks.
    assert_eq!(d.write_vectors, 3 * 4 + 2);
    let inserts = m
        .take_events()
        .iter()
        .filter(|e| matches!(e, Event::Insert(..)))
        .count();
    assert_eq!(inserts, 14);
    let mut fresh = cache(&s, 64 << 20);
    fresh.register(DatasetId(1), m.clone()).unwrap();
    assert_eq!(read(&mut fresh, &Selection::All, data.len()), data);
}

/// A layout with a codec: covered chunks are gathered, encoded in one batch (`encode_in_place`,
/// each with its edge state), placed with their encoded sizes and written, never admitted; the
/// images on storage are the encodings of the values, the edge chunk's with the fill value
/// outside the extent; a fresh cache decodes them back. A failing encode fails the write before
/// anything is placed: the index keeps the earlier images.
#[test]
fn coded_whole_chunks_are_encoded_in_batches_and_never_admitted() {
    let s = store();
    let m = Arc::new(MockLayout::new(1, &[600, 128], &BIG, 2, &[0xAB, 0xCD]).with_codec());
    let mut c = cache(&s, 64 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let data = u16s(600 * 128, 11);
    c.write(&[WriteRequest::new(DatasetId(1), &Selection::All, &data)])
        .unwrap();
    let st = c.stats();
    assert_eq!((st.entries, st.peak_footprint), (0, 0));
    assert_eq!(st.whole_chunk_writes, 3);
    let mut ev = m.take_events();
    ev.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        ev,
        [
            Event::EncodeInPlace(1, vec![0, 0]),
            Event::EncodeInPlace(1, vec![1, 0]),
            Event::EncodeInPlace(1, vec![2, 0]),
            Event::Insert(1, 3),
            Event::Lookup(1, vec![vec![0, 0], vec![1, 0], vec![2, 0]], 0),
        ]
    );
    let mut edge_states: Vec<(Vec<u64>, bool)> = m
        .pb_log
        .lock()
        .unwrap()
        .iter()
        .map(|(_, c, pb)| (c.clone(), *pb))
        .collect();
    edge_states.sort();
    assert_eq!(
        edge_states,
        [(vec![0, 0], false), (vec![1, 0], false), (vec![2, 0], true)]
    );
    for row in 0..3u64 {
        let loc = m.location(&[row, 0]).expect("chunk placed");
        assert_eq!(loc.size, 4 + 65536, "chunk {row}: the encoded size");
        let mut image = vec![0u8; loc.size as usize];
        s.read_at(loc.addr, &mut image).unwrap();
        assert_eq!(image[..4], 65536u32.to_le_bytes());
        let values: Vec<u8> = image[4..].iter().map(|b| b ^ 0x5A).collect();
        for r in 0..256u64 {
            let at = (r * 128 * 2) as usize;
            let got = &values[at..at + 256];
            let global = row * 256 + r;
            if global < 600 {
                let k = (global * 128 * 2) as usize;
                assert_eq!(got, &data[k..k + 256], "chunk {row} row {r}");
            } else {
                assert!(
                    got.chunks(2).all(|p| p == [0xAB, 0xCD]),
                    "chunk {row} row {r}: fill"
                );
            }
        }
    }
    let mut fresh = cache(&s, 64 << 20);
    fresh.register(DatasetId(1), m.clone()).unwrap();
    assert_eq!(read(&mut fresh, &Selection::All, data.len()), data);

    let before: Vec<_> = (0..3u64).map(|r| m.location(&[r, 0])).collect();
    m.fail_encode
        .store(true, std::sync::atomic::Ordering::SeqCst);
    m.take_events();
    let other = u16s(600 * 128, 12);
    assert!(
        c.write(&[WriteRequest::new(DatasetId(1), &Selection::All, &other)])
            .is_err()
    );
    assert!(
        !m.take_events()
            .iter()
            .any(|e| matches!(e, Event::Insert(..))),
        "nothing placed"
    );
    let after: Vec<_> = (0..3u64).map(|r| m.location(&[r, 0])).collect();
    assert_eq!(after, before);
    m.fail_encode
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let mut fresh = cache(&s, 64 << 20);
    fresh.register(DatasetId(1), m.clone()).unwrap();
    assert_eq!(read(&mut fresh, &Selection::All, data.len()), data);
}
