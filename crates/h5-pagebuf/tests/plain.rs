//! The page buffer as an ordinary page buffer (no VFD SWMR): the storage contract, I/O
//! counted through a metrics decorator, replacement, reserves and statistics (SWMR-143's
//! "normal behaviour" item).

use std::sync::Arc;

use h5_io::{MemoryStorage, Metrics, Storage, StorageExt};
use h5_pagebuf::{PageBuffer, PageBufferConfig, StatKind};

const PS: u64 = 64;

fn buffer(pages: usize, meta: u32, raw: u32) -> (Arc<Metrics<MemoryStorage>>, Arc<PageBuffer>) {
    let file = Arc::new(Metrics::new(MemoryStorage::new()));
    let pb = PageBuffer::new(
        file.clone() as Arc<dyn Storage>,
        PageBufferConfig::new(pages * PS as usize, meta, raw).unwrap(),
    )
    .unwrap();
    pb.enable(PS).unwrap();
    (file, pb)
}

#[test]
fn both_faces_meet_the_storage_contract() {
    h5_io::testkit::run_conformance(&|| {
        let (_, pb) = buffer(3, 0, 0);
        Box::new(pb.metadata())
    });
    h5_io::testkit::run_conformance(&|| {
        let (_, pb) = buffer(2, 50, 50);
        Box::new(pb.raw())
    });
    // Passing through before `enable`.
    h5_io::testkit::run_conformance(&|| {
        let file: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        let pb = PageBuffer::new(file, PageBufferConfig::new(256, 0, 0).unwrap()).unwrap();
        Box::new(pb.metadata())
    });
}

// SWMR-076: outside VFD SWMR the buffer is an ordinary page buffer; SWMR-075: exact counts.
#[test]
fn swmr_076_small_writes_are_gathered_into_pages_until_sync() {
    let (file, pb) = buffer(4, 0, 0);
    let meta = pb.metadata();
    for i in 0..10u64 {
        meta.write_at(i * 4, &[i as u8; 4]).unwrap();
    }
    let before = file.snapshot();
    assert_eq!(
        before.writes + before.write_vectors,
        0,
        "nothing reached the file yet"
    );
    let mut b = [0u8; 40];
    for _ in 0..10 {
        meta.read_at(0, &mut b).unwrap();
    }
    assert_eq!(b[36..40], [9; 4]);
    let s = pb.stats();
    assert_eq!(s.accesses.get(StatKind::Metadata), 20);
    assert_eq!(s.insertions.get(StatKind::Metadata), 1, "one page created");
    assert_eq!(s.misses.get(StatKind::Metadata), 1);
    assert_eq!(s.hits.get(StatKind::Metadata), 19);
    assert_eq!(
        s.loads.get(StatKind::Metadata),
        1,
        "the first write loads page 0"
    );
    meta.sync().unwrap();
    let after = file.snapshot().since(&before);
    assert_eq!(after.write_vectors, 1);
    assert_eq!(after.bytes_written, 40, "clipped at the end of file");
    assert_eq!(file.len().unwrap(), 40);
    assert_eq!(pb.stats().flushes.get(StatKind::Metadata), 1);
    let c = pb.counts();
    assert_eq!((c.tl_len, c.dwl_len, c.max_delay, c.mpmdes), (0, 0, 0, 0));
    pb.check_invariants().unwrap();
}

#[test]
fn large_requests_go_around_and_stay_coherent() {
    let (file, pb) = buffer(4, 0, 0);
    let raw = pb.raw();
    raw.write_at(10, &[1; 20]).unwrap(); // cached, dirty
    raw.write_at(0, &[2; 200]).unwrap(); // bypass: written at once, cached page patched
    assert_eq!(file.len().unwrap(), 200);
    let mut b = vec![0u8; 30];
    raw.read_at(0, &mut b).unwrap();
    assert_eq!(b, vec![2; 30], "the cached page holds the bypassing write");
    raw.write_at(5, &[3; 3]).unwrap(); // dirty again in the cache only
    let mut big = vec![0u8; 200];
    raw.read_at(0, &mut big).unwrap();
    assert_eq!(
        &big[4..9],
        &[2, 3, 3, 3, 2],
        "a bypassing read sees the cached bytes"
    );
    assert_eq!(pb.stats().bypasses.get(StatKind::Raw), 2);
    raw.sync().unwrap();
    assert_eq!(file.read_vec(5, 3).unwrap(), vec![3; 3]);
}

#[test]
fn lru_evicts_the_oldest_and_writes_dirty_pages_first() {
    let (file, pb) = buffer(2, 0, 0);
    let meta = pb.metadata();
    meta.write_at(0, &[1; 8]).unwrap();
    meta.write_at(PS, &[2; 8]).unwrap();
    let before = file.snapshot();
    // Full: the first pass writes the two dirty pages, the second evicts page 0.
    meta.write_at(2 * PS, &[3; 8]).unwrap();
    assert_eq!(file.snapshot().since(&before).writes, 2);
    assert_eq!(pb.counts().md_pages, 2);
    assert_eq!(pb.stats().evictions.get(StatKind::Metadata), 1);
    meta.write_at(3 * PS, &[4; 8]).unwrap();
    meta.write_at(4 * PS, &[5; 8]).unwrap();
    let c = pb.counts();
    assert_eq!(c.md_pages, 2, "held to its size once clean pages can go");
    assert!(pb.stats().evictions.get(StatKind::Metadata) >= 2);
    // Evicted pages were written before they went: every byte is readable back.
    for i in 0..5u64 {
        let mut b = [0u8; 8];
        meta.read_at(i * PS, &mut b).unwrap();
        assert_eq!(b, [i as u8 + 1; 8]);
    }
    meta.sync().unwrap();
    assert_eq!(file.read_vec(4 * PS, 8).unwrap(), vec![5; 8]);
    pb.check_invariants().unwrap();
}

// The LRU order survives repeated touches of the head page and an eviction pass that starts in
// the middle of the list: the least recently used clean page goes, never a recently used one.
#[test]
fn lru_order_with_repeated_touches() {
    let (_, pb) = buffer(3, 0, 0);
    let meta = pb.metadata();
    for p in 0..3u64 {
        meta.write_at(p * PS, &[p as u8; 16]).unwrap();
    }
    meta.sync().unwrap();
    let mut b = [0u8; 4];
    // Page 0 becomes the most recently used (touched many times in a row), then page 2.
    for _ in 0..5 {
        meta.read_at(0, &mut b).unwrap();
    }
    meta.read_at(2 * PS, &mut b).unwrap();
    meta.read_at(2 * PS + 8, &mut b).unwrap();
    // Page 1 is the oldest: a new page evicts it and only it.
    meta.write_at(3 * PS, &[3; 16]).unwrap();
    let loads = pb.stats().loads.get(StatKind::Metadata);
    for p in [0u64, 2, 3] {
        meta.read_at(p * PS, &mut b).unwrap();
        assert_eq!(b, [p as u8; 4]);
    }
    assert_eq!(
        pb.stats().loads.get(StatKind::Metadata),
        loads,
        "0, 2, 3 stayed"
    );
    meta.read_at(PS, &mut b).unwrap();
    assert_eq!(b, [1; 4]);
    assert_eq!(
        pb.stats().loads.get(StatKind::Metadata),
        loads + 1,
        "1 was evicted"
    );
    pb.check_invariants().unwrap();
}

// SWMR-064: the metadata reserve is never evicted below its minimum; skips are counted.
#[test]
fn swmr_064_reserves_hold_their_pages() {
    let (_, pb) = buffer(4, 50, 0);
    let meta = pb.metadata();
    let raw = pb.raw();
    meta.write_at(0, &[1; 8]).unwrap();
    meta.write_at(PS, &[1; 8]).unwrap();
    for i in 2..20u64 {
        raw.write_at(i * PS, &[i as u8; 8]).unwrap();
        let c = pb.counts();
        assert!(c.md_pages >= 2, "metadata reserve kept (2 of 4 pages)");
        assert!(c.md_pages + c.rd_pages <= 4);
    }
    assert!(pb.stats().lru_md_skips > 0);
    let (_, pb) = buffer(4, 0, 50);
    for i in 0..2u64 {
        pb.raw().write_at(i * PS, &[1; 8]).unwrap();
    }
    for i in 2..10u64 {
        pb.metadata().write_at(i * PS, &[1; 8]).unwrap();
        assert!(pb.counts().rd_pages >= 2);
    }
    assert!(pb.stats().lru_rd_skips > 0);
}

#[test]
fn truncation_drops_pages_past_the_end() {
    let (file, pb) = buffer(4, 0, 0);
    let meta = pb.metadata();
    meta.write_at(0, &[1; 100]).unwrap();
    meta.write_at(150, &[2; 10]).unwrap();
    meta.set_len(70).unwrap();
    assert_eq!(meta.len().unwrap(), 70);
    meta.set_len(200).unwrap();
    let mut b = [9u8; 10];
    meta.read_at(150, &mut b).unwrap();
    assert_eq!(b, [0; 10], "a truncated page does not come back");
    meta.sync().unwrap();
    assert_eq!(file.len().unwrap(), 200);
    assert_eq!(file.read_vec(60, 20).unwrap()[..10], [1; 10]);
    assert_eq!(file.read_vec(60, 20).unwrap()[10..], [0; 10]);
    pb.check_invariants().unwrap();
}

#[test]
fn split_requests_are_counted_and_logged() {
    let (_, pb) = buffer(4, 0, 0);
    pb.record_splits(true);
    pb.metadata().write_at(60, &[1; 8]).unwrap();
    assert_eq!(pb.stats().split_ios, 1);
    assert_eq!(pb.take_split_log(), vec![(60, 8)]);
}

mod model {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        // Any mix of small and large reads and writes through both faces, with syncs, reads
        // what a plain model of the file holds, and after a sync the file holds it too.
        #[test]
        fn reads_and_the_synced_file_match_a_model(
            ops in proptest::collection::vec((0..20 * PS, 1..3 * PS, any::<bool>(), 0..4u8), 1..60)
        ) {
            let (file, pb) = buffer(3, 30, 30);
            let mut model: Vec<u8> = Vec::new();
            for (i, (off, len, meta, what)) in ops.into_iter().enumerate() {
                let face = if meta { pb.metadata() } else { pb.raw() };
                match what {
                    0 | 1 => {
                        let data = vec![i as u8 + 1; len as usize];
                        face.write_at(off, &data).unwrap();
                        let end = (off + len) as usize;
                        if model.len() < end { model.resize(end, 0); }
                        model[off as usize..end].copy_from_slice(&data);
                    }
                    2 => {
                        let end = (off + len).min(model.len() as u64);
                        if end > off {
                            let mut b = vec![0u8; (end - off) as usize];
                            face.read_at(off, &mut b).unwrap();
                            prop_assert_eq!(&b[..], &model[off as usize..end as usize]);
                        }
                    }
                    _ => face.sync().unwrap(),
                }
                prop_assert!(pb.check_invariants().is_ok());
                prop_assert_eq!(face.len().unwrap(), model.len() as u64);
            }
            pb.metadata().sync().unwrap();
            prop_assert_eq!(file.read_vec(0, model.len()).unwrap(), model);
        }
    }
}

// SWMR-061: every page inserted is found again, and a full scan sees all of them.
#[test]
fn swmr_061_every_entry_is_found() {
    let (_, pb) = buffer(1000, 0, 0);
    let meta = pb.metadata();
    for p in 0..300u64 {
        meta.write_at(p * PS + 1, &[p as u8; 3]).unwrap();
    }
    let before = pb.stats();
    let mut b = [0u8; 3];
    for p in 0..300u64 {
        meta.read_at(p * PS + 1, &mut b).unwrap();
        assert_eq!(b, [p as u8; 3]);
    }
    let s = pb.stats();
    assert_eq!(
        s.hits.get(StatKind::Metadata) - before.hits.get(StatKind::Metadata),
        300
    );
    assert_eq!(
        s.misses.get(StatKind::Metadata),
        before.misses.get(StatKind::Metadata)
    );
    assert_eq!(pb.counts().index_len, 300);
    assert_eq!(pb.counts().lru_len, 300);
}
