//! The page buffer in VFD SWMR writer and reader modes: the tick list, the delayed-write list,
//! multi-page metadata entries, growth past the nominal size, the expansion threshold and the
//! reader's eviction (SWMR-143's tick-list, delayed-write and invalidation items).

use std::sync::Arc;

use h5_io::{MemoryStorage, Metrics, Storage, StorageExt};
use h5_pagebuf::{PageBuffer, PageBufferConfig, StatKind};
use proptest::prelude::*;

const PS: u64 = 64;
const MAX_LAG: u64 = 3;

fn writer(pages: usize, existing: u64) -> (Arc<Metrics<MemoryStorage>>, Arc<PageBuffer>) {
    let file = Arc::new(Metrics::new(MemoryStorage::new()));
    if existing > 0 {
        file.write_at(0, &vec![0xEE; existing as usize]).unwrap();
    }
    let pb = PageBuffer::new(
        file.clone() as Arc<dyn Storage>,
        PageBufferConfig::new(pages * PS as usize, 0, 0).unwrap(),
    )
    .unwrap();
    pb.enable(PS).unwrap();
    pb.start_swmr_writer(MAX_LAG, 1).unwrap();
    (file, pb)
}

/// One writer end of tick as far as the buffer is concerned: publish, release, next tick.
fn end_tick(pb: &PageBuffer, tick: &mut u64) -> Vec<u64> {
    let pages: Vec<u64> = pb.tick_images().unwrap().iter().map(|t| t.page).collect();
    pb.release_tick_list().unwrap();
    pb.release_delayed_writes().unwrap();
    *tick += 1;
    pb.set_tick(*tick).unwrap();
    pb.check_invariants().unwrap();
    pages
}

// SWMR-065 and SWMR-071: a tiny buffer with heavy modification in one tick keeps every modified
// page (none evicted, skips counted) and all of them are published.
#[test]
fn swmr_065_swmr_071_tick_list_pages_stay_until_the_end_of_tick() {
    let (_, pb) = writer(4, 0);
    let meta = pb.metadata();
    for p in 0..100u64 {
        meta.write_at(p * PS + 8, &[p as u8; 16]).unwrap();
    }
    let c = pb.counts();
    assert_eq!(c.tl_len, 100);
    assert_eq!(c.md_pages, 100, "grown past its 4 pages");
    assert!(pb.stats().lru_tl_skips > 0);
    let images = pb.tick_images().unwrap();
    assert_eq!(images.len(), 100);
    assert_eq!(images[42].image[8..24], [42; 16]);
    let mut tick = 1;
    end_tick(&pb, &mut tick);
    assert_eq!(pb.counts().tl_len, 0);
    // Next tick: the pages may go now.
    meta.write_at(200 * PS, &[1; 4]).unwrap();
    assert!(pb.counts().md_pages <= 5);
}

// SWMR-067: in a new file nothing is delayed.
#[test]
fn swmr_067_new_pages_are_never_delayed() {
    let (_, pb) = writer(8, 0);
    let meta = pb.metadata();
    let mut tick = 1;
    for t in 0..6u64 {
        for p in 0..5u64 {
            meta.write_at(p * PS, &[t as u8; 10]).unwrap();
        }
        pb.flush().unwrap();
        end_tick(&pb, &mut tick);
        pb.set_index_view((0..5).map(|p| (p, 1, 0))).unwrap();
        assert_eq!(pb.counts().dwl_len, 0);
    }
    assert_eq!(pb.stats().delayed_writes, 0);
}

// SWMR-066 and SWMR-070: a page the HDF5 file already holds, changed while not in the index,
// reaches the file no earlier than tick t + max_lag.
#[test]
fn swmr_066_swmr_070_existing_pages_wait_max_lag_ticks() {
    let (file, pb) = writer(8, 4 * PS);
    let meta = pb.metadata();
    let mut tick = 1;
    meta.write_at(PS + 4, &[7; 4]).unwrap();
    assert_eq!(pb.counts().dwl_len, 1);
    assert_eq!(pb.counts().max_delay, 1 + MAX_LAG);
    let s = pb.stats();
    assert_eq!((s.delayed_writes, s.total_delay), (1, MAX_LAG));
    for _ in 0..MAX_LAG - 1 {
        pb.flush().unwrap();
        assert_eq!(
            file.read_vec(PS + 4, 4).unwrap(),
            vec![0xEE; 4],
            "not written while delayed"
        );
        end_tick(&pb, &mut tick);
        pb.set_index_view([(1, 1, 1 + MAX_LAG)]).unwrap();
    }
    assert_eq!(tick, MAX_LAG);
    pb.flush().unwrap();
    assert_eq!(file.read_vec(PS + 4, 4).unwrap(), vec![0xEE; 4]);
    // The end of tick 1 + max_lag releases it to the LRU; then it may be written.
    end_tick(&pb, &mut tick);
    assert_eq!(
        pb.counts().dwl_len,
        1,
        "still delayed at the end of tick {tick}"
    );
    end_tick(&pb, &mut tick);
    assert_eq!(pb.counts().dwl_len, 0);
    pb.flush().unwrap();
    assert_eq!(file.read_vec(PS + 4, 4).unwrap(), vec![7; 4]);
    // A page indexed long enough is not delayed again.
    pb.set_index_view([(1, 1, 0)]).unwrap();
    meta.write_at(PS, &[8; 2]).unwrap();
    assert_eq!(pb.counts().dwl_len, 0);
    // A page indexed with a delay still ahead waits until then.
    pb.set_index_view([(2, 1, tick + 2)]).unwrap();
    meta.write_at(2 * PS, &[9; 2]).unwrap();
    assert_eq!(pb.counts().max_delay, tick + 2);
}

// SWMR-069: at the end of the tick a multi-page entry that is not delayed is written to the
// HDF5 file and evicted; one that is delayed stays.
#[test]
fn swmr_069_multi_page_entries_leave_at_the_end_of_the_tick() {
    let (file, pb) = writer(4, 2 * PS);
    let meta = pb.metadata();
    let big: Vec<u8> = (0..150u8).collect();
    meta.write_at(4 * PS, &big).unwrap(); // new space
    meta.write_at(0, &[5; 100]).unwrap(); // over existing bytes: delayed
    let c = pb.counts();
    assert_eq!((c.mpmdes, c.tl_len, c.dwl_len), (2, 2, 1));
    assert_eq!(pb.stats().insertions.get(StatKind::Mpmde), 2);
    let mut b = vec![0u8; 150];
    meta.read_at(4 * PS, &mut b).unwrap();
    assert_eq!(b, big, "read back from the buffer");
    let mut tick = 1;
    let published = end_tick(&pb, &mut tick);
    assert_eq!(published, vec![0, 4]);
    let c = pb.counts();
    assert_eq!((c.mpmdes, c.tl_len, c.dwl_len), (1, 0, 1));
    assert_eq!(file.read_vec(4 * PS, 150).unwrap(), big);
    assert_eq!(file.read_vec(0, 4).unwrap(), vec![0xEE; 4]);
    for _ in 0..MAX_LAG {
        end_tick(&pb, &mut tick);
    }
    assert_eq!(pb.counts().mpmdes, 0);
    assert_eq!(file.read_vec(0, 100).unwrap(), vec![5; 100]);
}

// SWMR-075 (writer lists): the high-water marks of the tick list's and the delayed-write list's
// bytes follow the entries, a multi-page entry grown over its last page included (the counters
// are kept as entries come and go, never summed over the lists).
#[test]
fn swmr_075_list_byte_counters_follow_the_entries() {
    let (_, pb) = writer(4, 2 * PS);
    let meta = pb.metadata();
    meta.write_at(0, &[5; 100]).unwrap(); // a delayed multi-page entry over existing bytes
    meta.write_at(100, &[6; 20]).unwrap(); // grows it to 120 bytes
    meta.write_at(5 * PS, &[7; 8]).unwrap(); // a new page
    pb.check_invariants().unwrap();
    let s = pb.stats();
    assert_eq!((s.max_tl_len, s.max_tl_size), (2, 120 + PS));
    assert_eq!((s.max_dwl_len, s.max_dwl_size), (1, 120));
    let mut tick = 1;
    end_tick(&pb, &mut tick);
    meta.write_at(6 * PS, &[8; 8]).unwrap();
    let s = pb.stats();
    assert_eq!(s.max_tl_size, 120 + PS, "a smaller tick leaves the mark");
    assert_eq!(pb.counts().tl_len, 1);
    for _ in 0..=MAX_LAG {
        end_tick(&pb, &mut tick);
    }
    assert_eq!(pb.counts().dwl_len, 0);
}

// SWMR-072 (buffer side): growth past threshold × size is reported; a threshold of 0 never.
#[test]
fn swmr_072_expansion_threshold() {
    let (_, pb) = writer(2, 0);
    let meta = pb.metadata();
    for p in 0..4u64 {
        meta.write_at(p * PS, &[1; 4]).unwrap();
    }
    assert!(
        !pb.over_expansion_threshold(2),
        "4 pages = 2 × the size, not more"
    );
    meta.write_at(4 * PS, &[1; 4]).unwrap();
    assert!(pb.over_expansion_threshold(2));
    assert!(!pb.over_expansion_threshold(0));
}

// SWMR-052 (buffer side): writes to the HDF5 file are reported so the index can mark its
// entries clean with the flush tick.
#[test]
fn flushed_pages_are_reported() {
    let (_, pb) = writer(4, 0);
    pb.metadata().write_at(3 * PS, &[1; 4]).unwrap();
    assert!(pb.is_dirty(3));
    pb.flush().unwrap();
    assert!(!pb.is_dirty(3));
    assert_eq!(pb.take_flushed().unwrap(), vec![3]);
    assert!(pb.take_flushed().unwrap().is_empty());
}

// SWMR-077: on a reader, an evicted page is read again (new bytes) on its next access.
#[test]
fn swmr_077_reader_evicts_changed_pages() {
    let file = Arc::new(Metrics::new(MemoryStorage::new()));
    file.write_at(0, &[1; 256]).unwrap();
    let pb = PageBuffer::new(
        file.clone() as Arc<dyn Storage>,
        PageBufferConfig::new(4 * PS as usize, 0, 0).unwrap(),
    )
    .unwrap();
    pb.enable(PS).unwrap();
    pb.start_swmr_reader().unwrap();
    let meta = pb.metadata();
    let mut b = [0u8; 8];
    meta.read_at(PS, &mut b).unwrap();
    file.write_at(PS, &[2; 8]).unwrap(); // the writer's change
    meta.read_at(PS, &mut b).unwrap();
    assert_eq!(b, [1; 8], "served from the buffer until told");
    assert_eq!(pb.evict_range(1, PS), 1);
    let reads = file.snapshot().reads;
    meta.read_at(PS, &mut b).unwrap();
    assert_eq!(b, [2; 8]);
    assert_eq!(file.snapshot().reads, reads + 1, "a miss");
    assert_eq!(pb.stats().misses.get(StatKind::Metadata), 2);
    assert!(meta.write_at(0, &[0]).is_err(), "read-only");
    // Raw data goes around the reader's buffer.
    pb.raw().read_at(0, &mut b).unwrap();
    assert_eq!(pb.stats().bypasses.get(StatKind::Raw), 1);
}

#[derive(Clone, Debug)]
enum Op {
    Write {
        page: u64,
        at: u64,
        len: u64,
        meta: bool,
    },
    Big {
        page: u64,
        pages: u64,
        extra: u64,
    },
    Read {
        page: u64,
        len: u64,
    },
    Flush,
    EndTick,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..30u64, 0..PS, 1..PS, any::<bool>()).prop_map(|(page, at, len, meta)| Op::Write { page, at, len, meta }),
        1 => (0..30u64, 1..3u64, 1..PS).prop_map(|(page, pages, extra)| Op::Big { page, pages, extra }),
        3 => (0..30u64, 1..3 * PS).prop_map(|(page, len)| Op::Read { page, len }),
        1 => Just(Op::Flush),
        2 => Just(Op::EndTick),
    ]
}

proptest! {
    // SWMR-062, SWMR-063, SWMR-068: random operations keep the list and counter invariants
    // (checked after every step), and what is read always equals a plain model of the file.
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn swmr_062_063_068_invariants_hold(ops in proptest::collection::vec(op(), 1..80)) {
        let (_, pb) = writer(4, 10 * PS);
        let mut model = vec![0xEEu8; (10 * PS) as usize];
        let mut tick = 1;
        for op in ops {
            match op {
                Op::Write { page, at, len, meta } => {
                    let off = page * PS + at;
                    let data = vec![(off % 251) as u8; len as usize];
                    let face = if meta { pb.metadata() } else { pb.raw() };
                    face.write_at(off, &data).unwrap();
                    let end = (off + len) as usize;
                    if model.len() < end { model.resize(end, 0); }
                    model[off as usize..end].copy_from_slice(&data);
                }
                Op::Big { page, pages, extra } => {
                    let off = page * PS;
                    let len = pages * PS + extra;
                    let data = vec![(page % 200) as u8 + 1; len as usize];
                    pb.metadata().write_at(off, &data).unwrap();
                    let end = (off + len) as usize;
                    if model.len() < end { model.resize(end, 0); }
                    model[off as usize..end].copy_from_slice(&data);
                }
                Op::Read { page, len } => {
                    let off = page * PS;
                    let end = (off + len).min(model.len() as u64);
                    if end > off {
                        let mut b = vec![0u8; (end - off) as usize];
                        pb.metadata().read_at(off, &mut b).unwrap();
                        prop_assert_eq!(&b[..], &model[off as usize..end as usize]);
                    }
                }
                Op::Flush => pb.flush().unwrap(),
                Op::EndTick => { end_tick(&pb, &mut tick); }
            }
            if let Err(e) = pb.check_invariants() {
                prop_assert!(false, "invariant broken: {}", e);
            }
            let c = pb.counts();
            prop_assert!(c.max_delay == 0 || c.max_delay <= tick + MAX_LAG);
            prop_assert_eq!(c.index_len, c.md_pages + c.rd_pages + c.mpmdes);
        }
    }
}
