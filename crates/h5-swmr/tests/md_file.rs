//! The metadata file end to end without the engine: a page buffer in writer mode takes metadata
//! writes, the writer publishes ticks into a metadata file, and a reader loads and serves them
//! (SWMR-144 and SWMR-145: creation and update, space management, relocation, image and index
//! writes; the reader driver's torn writes, tick mismatches, lookups and pass-throughs).

use std::sync::Arc;

use h5_format::checksum::lookup3;
use h5_io::testkit::{Hooks, Intercept};
use h5_io::{IoOp, MemoryStorage, Metrics, Storage, StorageExt};
use h5_pagebuf::{PageBuffer, PageBufferConfig};
use h5_swmr::format::{HEADER_LEN, MdHeader, MdIndex};
use h5_swmr::reader::{Loaded, MdReader, ReaderParams, ReaderStorage};
use h5_swmr::writer::{MdWriter, WriterParams};
use h5_swmr::{SwmrError, updater};
use proptest::prelude::*;

const PS: u64 = 512;
const MAX_LAG: u64 = 3;

/// Storage hooks flipping the last byte of each of the first `left` non-empty reads: what a
/// reader sees of a write in progress.
#[derive(Debug)]
struct CorruptReads {
    left: std::sync::atomic::AtomicU32,
}

impl Hooks for CorruptReads {
    fn read_at(&self, inner: &dyn Storage, offset: u64, buf: &mut [u8]) -> h5_io::Result<()> {
        inner.read_at(offset, buf)?;
        let left = self.left.load(std::sync::atomic::Ordering::SeqCst);
        if left > 0 && !buf.is_empty() {
            self.left
                .store(left - 1, std::sync::atomic::Ordering::SeqCst);
            let last = buf.len() - 1;
            buf[last] ^= 0x5A;
        }
        Ok(())
    }
}

struct Rig {
    hdf5: Arc<Metrics<MemoryStorage>>,
    md: Arc<Metrics<MemoryStorage>>,
    pb: Arc<PageBuffer>,
    w: MdWriter,
}

fn rig(reserved: u64, removal: bool) -> Rig {
    let hdf5 = Arc::new(Metrics::new(MemoryStorage::new()));
    let md = Arc::new(Metrics::new(MemoryStorage::new()));
    let pb = PageBuffer::new(
        hdf5.clone() as Arc<dyn Storage>,
        PageBufferConfig::new(8 * PS as usize, 0, 0).unwrap(),
    )
    .unwrap();
    pb.enable(PS).unwrap();
    pb.start_swmr_writer(MAX_LAG, 1).unwrap();
    let w = MdWriter::new(
        Some(md.clone() as Arc<dyn Storage>),
        WriterParams {
            page_size: PS,
            md_pages_reserved: reserved,
            max_lag: MAX_LAG,
            index_removal: removal,
        },
    );
    Rig { hdf5, md, pb, w }
}

fn published(md: &dyn Storage) -> (MdHeader, MdIndex) {
    let h = MdHeader::decode(&md.read_vec(0, HEADER_LEN).unwrap()).unwrap();
    let ib = md
        .read_vec(h.index_offset, h.index_length as usize)
        .unwrap();
    (h, MdIndex::decode(&ib, PS).unwrap())
}

fn reader_params(reserved: u64) -> ReaderParams {
    ReaderParams {
        md_pages_reserved: reserved,
        max_lag: MAX_LAG,
        tick: std::time::Duration::from_millis(100),
        retry_limit: std::time::Duration::from_millis(300),
        strict_lag: false,
    }
}

// SWMR-043, SWMR-045, SWMR-028, SWMR-042: every entry's image matches its checksum; offsets
// strictly increase; untouched pages keep their images; ticks start at 1 and go up by 1; only the
// pages changed in the tick get new images.
#[test]
fn swmr_043_045_028_042_images_and_index() {
    let mut r = rig(1, true);
    let meta = r.pb.metadata();
    for p in [7u64, 2, 5] {
        meta.write_at(p * PS + 3, &[p as u8; 40]).unwrap();
    }
    let (_, rep) = r.w.end_of_tick(&r.pb).unwrap();
    assert_eq!((rep.tick, rep.added, rep.images), (1, 3, 3));
    let (h, ix) = published(&*r.md);
    assert_eq!((h.tick, ix.tick), (1, 1));
    let pages: Vec<u64> = ix.entries.iter().map(|e| e.hdf5_page).collect();
    assert_eq!(pages, vec![2, 5, 7]);
    for e in &ix.entries {
        let img = r.md.read_vec(e.md_page * PS, e.length as usize).unwrap();
        assert_eq!(lookup3(&img, 0), e.checksum);
        assert_eq!(img[3..43], [e.hdf5_page as u8; 40]);
    }
    let before = ix.clone();
    meta.write_at(5 * PS, &[9; 4]).unwrap();
    let (_, rep) = r.w.end_of_tick(&r.pb).unwrap();
    assert_eq!((rep.tick, rep.changed, rep.added, rep.images), (2, 1, 0, 1));
    let (h, ix) = published(&*r.md);
    assert_eq!(h.tick, 2);
    assert_eq!(ix.entries[0], before.entries[0], "page 2 untouched");
    assert_eq!(ix.entries[2], before.entries[2], "page 7 untouched");
    assert_ne!(ix.entries[1].md_page, before.entries[1].md_page);
    assert_eq!(
        r.pb.counts().tl_len,
        0,
        "SWMR-054: the tick list is released"
    );
}

// SWMR-044, SWMR-049, SWMR-060: a replaced image is not reused before tick t + max_lag + 1.
#[test]
fn swmr_044_superseded_images_wait_max_lag_ticks() {
    let mut r = rig(1, false);
    let meta = r.pb.metadata();
    meta.write_at(0, &[1; 8]).unwrap();
    r.w.end_of_tick(&r.pb).unwrap();
    let first = published(&*r.md).1.entries[0].md_page;
    meta.write_at(0, &[2; 8]).unwrap();
    r.w.end_of_tick(&r.pb).unwrap(); // tick 2 supersedes the tick-1 image
    let second = published(&*r.md).1.entries[0].md_page;
    assert_ne!(first, second);
    let mut seen = Vec::new();
    for t in 3..=8u64 {
        meta.write_at(0, &[t as u8; 8]).unwrap();
        r.w.end_of_tick(&r.pb).unwrap();
        seen.push((t, published(&*r.md).1.entries[0].md_page));
    }
    let reuse = seen.iter().find(|(_, p)| *p == first).map(|(t, _)| *t);
    assert!(
        reuse.is_some_and(|t| t > 2 + MAX_LAG),
        "first reused at {reuse:?}"
    );
    assert!(
        r.w.space().eoa() <= 16 * PS,
        "space is reused, the file stays small"
    );
}

// SWMR-047: images, then index, then header; header and index in one write while adjacent.
#[test]
fn swmr_047_write_order() {
    let mut r = rig(1, true);
    r.md.record_ops(true);
    let meta = r.pb.metadata();
    for p in 0..4u64 {
        meta.write_at(p * PS, &[1; 16]).unwrap();
    }
    r.w.end_of_tick(&r.pb).unwrap();
    let ops = r.md.ops();
    let writes: Vec<(u64, u64)> = ops
        .iter()
        .filter(|o| matches!(o.op, IoOp::Write | IoOp::WriteVectored))
        .map(|o| (o.offset, o.len))
        .collect();
    assert_eq!(writes.len(), 5);
    assert!(
        writes[..4].iter().all(|&(off, _)| off >= PS),
        "images first"
    );
    assert_eq!(writes[4].0, 0, "then header and index together at 0");
    assert_eq!(writes[4].1, 36 + 20 + 4 * 16);
}

// SWMR-048, SWMR-009: past 28 entries (512-byte pages, one reserved page) the index moves to a
// page-aligned extent outside the reserved page, and never comes back.
#[test]
fn swmr_048_009_index_relocation() {
    let mut r = rig(1, true);
    let meta = r.pb.metadata();
    for p in 0..10u64 {
        meta.write_at(p * PS, &[1; 4]).unwrap();
    }
    r.w.end_of_tick(&r.pb).unwrap();
    let (h, _) = published(&*r.md);
    assert_eq!(h.index_offset, 36);
    assert!(
        h.index_offset + h.index_length <= PS,
        "inside the reserved page"
    );
    for p in 10..40u64 {
        meta.write_at(p * PS, &[1; 4]).unwrap();
    }
    let (_, rep) = r.w.end_of_tick(&r.pb).unwrap();
    assert!(rep.relocated);
    let (h, ix) = published(&*r.md);
    assert_eq!(ix.entries.len(), 40);
    assert!(h.index_offset >= PS && h.index_offset % PS == 0);
    // A reader with the same reserved area reads it through the separate-index path.
    let mut rd = MdReader::new(Some(r.md.clone()), "md".into(), reader_params(1), None);
    assert!(matches!(rd.load().unwrap(), Loaded::Advanced { .. }));
    assert_eq!(rd.index().entries.len(), 40);
    // Fewer entries later (the writer's index is not shrunk here, but the rule is checked by
    // publishing an empty index): the offset stays outside.
    r.w.publish_empty().unwrap();
    let (h, ix) = published(&*r.md);
    assert!(ix.entries.is_empty());
    assert!(h.index_offset >= PS, "never back to 36");
}

// SWMR-019, E-20: a reader with fewer reserved pages than the writer reads a bigger adjacent
// index through the separate path.
#[test]
fn swmr_019_reserved_pages_mismatch() {
    let mut r = rig(8, true);
    let meta = r.pb.metadata();
    for p in 0..60u64 {
        meta.write_at(p * PS, &[p as u8; 4]).unwrap();
    }
    r.w.end_of_tick(&r.pb).unwrap();
    let (h, _) = published(&*r.md);
    assert_eq!(h.index_offset, 36);
    assert!(h.index_length > PS);
    let mut rd = MdReader::new(Some(r.md.clone()), "md".into(), reader_params(1), None);
    rd.load().unwrap();
    assert_eq!(rd.index().entries.len(), 60);
}

// SWMR-046: an entry flushed to the HDF5 file and left alone leaves the index about max_lag + 1
// ticks later; a reader still reads the same bytes for the page.
#[test]
fn swmr_046_written_back_entries_leave_the_index() {
    let mut r = rig(1, true);
    let meta = r.pb.metadata();
    meta.write_at(3 * PS, &[5; 20]).unwrap();
    r.w.end_of_tick(&r.pb).unwrap(); // tick 1
    r.pb.flush().unwrap(); // written during tick 2
    let mut left_at = None;
    for t in 2..=10u64 {
        r.w.end_of_tick(&r.pb).unwrap();
        if left_at.is_none() && published(&*r.md).1.entries.is_empty() {
            left_at = Some(t);
        }
    }
    assert_eq!(
        left_at,
        Some(2 + MAX_LAG + 2),
        "marked at 2+max_lag+1, removed one tick later"
    );
    assert_eq!(r.hdf5.read_vec(3 * PS, 20).unwrap(), vec![5; 20]);
    let hdf5: Arc<dyn Storage> = r.hdf5.clone();
    let mut rd = MdReader::new(Some(r.md.clone()), "md".into(), reader_params(1), None);
    rd.load().unwrap();
    let drv = ReaderStorage::new(hdf5, rd);
    assert_eq!(drv.read_vec(3 * PS, 20).unwrap(), vec![5; 20]);
}

// SWMR-084, SWMR-085, SWMR-086, SWMR-087: the reader driver.
#[test]
fn swmr_084_085_086_087_reader_driver() {
    let mut r = rig(1, false);
    r.hdf5.write_at(0, &vec![0xAA; (4 * PS) as usize]).unwrap();
    r.pb.start_swmr_writer(MAX_LAG, 1).unwrap();
    let meta = r.pb.metadata();
    meta.write_at(PS, &[1; 16]).unwrap();
    meta.write_at(6 * PS, &vec![2; (PS + 100) as usize])
        .unwrap(); // a multi-page entry
    r.w.end_of_tick(&r.pb).unwrap();
    let hdf5: Arc<dyn Storage> = r.hdf5.clone();
    let mut rd = MdReader::new(Some(r.md.clone()), "md".into(), reader_params(1), None);
    rd.load().unwrap();
    let drv = ReaderStorage::new(hdf5, rd);
    assert_eq!(
        drv.read_vec(PS, 16).unwrap(),
        vec![1; 16],
        "from the metadata file"
    );
    assert_eq!(
        r.hdf5.read_vec(PS, 16).unwrap(),
        vec![0xAA; 16],
        "the HDF5 file differs"
    );
    let before = r.hdf5.snapshot();
    assert_eq!(
        drv.read_vec(2 * PS, 8).unwrap(),
        vec![0xAA; 8],
        "not indexed: the HDF5 file"
    );
    assert_eq!(r.hdf5.snapshot().since(&before).reads, 1);
    let mut b = vec![0u8; (PS + 100) as usize];
    drv.read_at(6 * PS, &mut b).unwrap();
    assert_eq!(b, vec![2; (PS + 100) as usize]);
    let mut b = vec![9u8; 8];
    drv.read_at(7 * PS + 50, &mut b).unwrap();
    assert_eq!(b, vec![2; 8], "the second page of the multi-page entry");
    drv.read_at(7 * PS + 200, &mut b).unwrap();
    assert_eq!(
        b,
        vec![0; 8],
        "past the entry and the HDF5 file's end: zeros"
    );
    assert!(drv.len().unwrap() >= 7 * PS + 100);
    assert!(drv.write_at(0, b"x").is_err());
    assert!(drv.set_len(0).is_err());
    assert_eq!(r.hdf5.read_vec(0, 1).unwrap(), vec![0xAA]);
    // A flipped byte in the image: an unrecoverable read error.
    let e = published(&*r.md).1.entries[0];
    let mut img = r.md.read_vec(e.md_page * PS, 1).unwrap();
    img[0] ^= 0xFF;
    r.md.write_at(e.md_page * PS, &img).unwrap();
    let hdf5: Arc<dyn Storage> = r.hdf5.clone();
    let mut rd = MdReader::new(Some(r.md.clone()), "md".into(), reader_params(1), None);
    rd.load().unwrap();
    let drv = ReaderStorage::new(hdf5, rd);
    let err = drv.read_vec(PS, 4).unwrap_err();
    assert!(
        err.to_string().contains("checksum mismatch of HDF5 page 1"),
        "{err}"
    );
}

// SWMR-080, SWMR-082, SWMR-083, E-19, E-22, E-23, E-24: torn headers are retried; a tick one
// apart is a write in progress; other mismatches and a falling tick are errors; a permanently
// bad header gives up after the bound.
#[test]
fn swmr_080_082_083_torn_reads_and_ticks() {
    let mut r = rig(1, false);
    let meta = r.pb.metadata();
    meta.write_at(0, &[1; 8]).unwrap();
    r.w.end_of_tick(&r.pb).unwrap();
    // The first two reads of the header fail (bad checksum as if torn), then it reads fine.
    let faulty = Arc::new(Intercept::new(
        r.md.clone(),
        CorruptReads {
            left: std::sync::atomic::AtomicU32::new(2),
        },
    ));
    let mut rd = MdReader::new(Some(faulty.clone()), "md".into(), reader_params(1), None);
    assert!(matches!(rd.load().unwrap(), Loaded::Advanced { .. }));
    assert!(rd.retries >= 1);
    assert_eq!(rd.tick(), 1);
    assert_eq!(rd.load().unwrap(), Loaded::Unchanged);
    meta.write_at(0, &[2; 8]).unwrap();
    r.w.end_of_tick(&r.pb).unwrap();
    let Loaded::Advanced { previous } = rd.load().unwrap() else {
        panic!("tick 2 not seen");
    };
    assert_eq!(previous.tick, 1);
    assert_eq!(rd.tick(), 2);
    // A header from the past: the tick went down.
    let old = MdHeader {
        tick: 1,
        ..published(&*r.md).0
    };
    let mut bad = r.md.read_vec(0, PS as usize).unwrap();
    bad[..HEADER_LEN].copy_from_slice(&old.encode());
    let md2 = Arc::new(MemoryStorage::new());
    md2.write_at(0, &bad).unwrap();
    let mut rd2 = MdReader::new(Some(md2.clone()), "md".into(), reader_params(1), None);
    rd2.load().unwrap_err(); // header 1, index 2: torn and retried until the bound
    let mut rd3 = MdReader::new(Some(r.md.clone()), "md".into(), reader_params(1), None);
    rd3.load().unwrap();
    let md_back: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let (h, ix) = published(&*r.md);
    let mut img = MdHeader { tick: 1, ..h }.encode().to_vec();
    img.extend_from_slice(
        &MdIndex {
            tick: 1,
            ..ix.clone()
        }
        .encode()
        .unwrap(),
    );
    md_back.write_at(0, &img).unwrap();
    let mut rd4 = MdReader::new(Some(md_back.clone()), "md".into(), reader_params(1), None);
    rd4.load().unwrap();
    let fresh = r.md.read_vec(0, PS as usize).unwrap();
    md_back.write_at(0, &fresh).unwrap();
    rd4.load().unwrap();
    md_back.write_at(0, &img).unwrap();
    assert!(matches!(
        rd4.load(),
        Err(SwmrError::TickWentBackwards { old: 2, new: 1 })
    ));
    // Header 5 ticks ahead of its index: fatal at once.
    let mut img = MdHeader { tick: 7, ..h }.encode().to_vec();
    img.extend_from_slice(&MdIndex { tick: 2, ..ix }.encode().unwrap());
    let md5: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    md5.write_at(0, &img).unwrap();
    let mut rd5 = MdReader::new(Some(md5), "md".into(), reader_params(1), None);
    let err = rd5.load().unwrap_err();
    assert!(matches!(err, SwmrError::CorruptMdFile { .. }), "{err}");
    // A header that never checks out: gives up after the retry bound.
    let junk: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    junk.write_at(0, &[b'V'; 100]).unwrap();
    let mut rd6 = MdReader::new(Some(junk), "md".into(), reader_params(1), None);
    let err = rd6.load().unwrap_err();
    assert!(matches!(err, SwmrError::PersistentTorn { .. }), "{err}");
    assert!(rd6.retries > 3, "retried, then gave up");
}

// SWMR-081, E-21: a relocated index with a bad checksum is a fatal error naming max_lag.
#[test]
fn swmr_081_relocated_index_corruption_is_fatal() {
    let mut r = rig(1, false);
    let meta = r.pb.metadata();
    for p in 0..40u64 {
        meta.write_at(p * PS, &[1; 4]).unwrap();
    }
    r.w.end_of_tick(&r.pb).unwrap();
    let (h, _) = published(&*r.md);
    assert!(h.index_offset >= PS);
    let mut b = r.md.read_vec(h.index_offset + 30, 1).unwrap();
    b[0] ^= 1;
    r.md.write_at(h.index_offset + 30, &b).unwrap();
    let mut rd = MdReader::new(Some(r.md.clone()), "md".into(), reader_params(1), None);
    let err = rd.load().unwrap_err();
    assert!(
        err.to_string()
            .contains("index checksum mismatch (reader may have exceeded max_lag"),
        "{err}"
    );
}

// SWMR-055: without a metadata file the writer does the same bookkeeping, so the updater files
// built from its publications are identical to those of a writer that keeps the file.
#[test]
fn swmr_055_updater_files_without_a_metadata_file() {
    let mut with = rig(1, false);
    let mut without = rig(1, false);
    without.w = MdWriter::new(
        None,
        WriterParams {
            page_size: PS,
            md_pages_reserved: 1,
            max_lag: MAX_LAG,
            index_removal: false,
        },
    );
    for t in 0..8u64 {
        for r in [&with, &without] {
            let meta = r.pb.metadata();
            meta.write_at((t % 5) * PS, &[t as u8; 8]).unwrap();
            meta.write_at((t * 3) % 11 * PS + 100, &[1; 8]).unwrap();
        }
        let (a, _) = with.w.end_of_tick(&with.pb).unwrap();
        let (b, _) = without.w.end_of_tick(&without.pb).unwrap();
        assert_eq!(
            updater::build(&a, t + 1, PS, false).unwrap(),
            updater::build(&b, t + 1, PS, false).unwrap()
        );
    }
    assert_eq!(without.md.len().unwrap(), 0, "nothing written");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    // SWMR-060, SWMR-053: over random workloads, no write into the metadata file touches an
    // extent referenced by an index published in the last max_lag ticks; every index is sorted
    // with page-or-larger entries.
    #[test]
    fn swmr_060_no_early_reuse(ticks in proptest::collection::vec(proptest::collection::vec((0..30u64, any::<bool>()), 0..12), 1..25)) {
        let mut r = rig(1, true);
        let meta = r.pb.metadata();
        let mut recent: Vec<MdIndex> = Vec::new();
        r.md.record_ops(true);
        for (t, writes) in ticks.iter().enumerate() {
            for &(p, big) in writes {
                let len = if big { PS + 50 } else { 16 };
                meta.write_at(p * PS, &vec![t as u8; len as usize]).unwrap();
            }
            if t % 4 == 3 {
                r.pb.flush().unwrap();
            }
            r.w.end_of_tick(&r.pb).unwrap();
            let ops = r.md.ops();
            r.md.clear_ops();
            for o in ops.iter().filter(|o| matches!(o.op, IoOp::Write | IoOp::WriteVectored)) {
                if o.offset < PS { continue; }
                for ix in &recent {
                    for e in &ix.entries {
                        let a = e.md_page * PS;
                        let b = a + u64::from(e.length);
                        prop_assert!(o.offset + o.len <= a || o.offset >= b,
                            "write {}+{} over an image of tick {}", o.offset, o.len, ix.tick);
                    }
                }
            }
            let (_, ix) = published(&*r.md);
            for w in ix.entries.windows(2) {
                prop_assert!(w[0].hdf5_page < w[1].hdf5_page);
            }
            prop_assert!(ix.entries.iter().all(|e| u64::from(e.length) >= PS));
            recent.push(ix);
            if recent.len() > MAX_LAG as usize { recent.remove(0); }
            prop_assert!(r.pb.check_invariants().is_ok());
        }
    }
}

// SWMR-097: a reader following tick by tick keeps each new index as "previous": each diff holds
// exactly the pages that tick changed.
#[test]
fn swmr_097_diffs_hold_only_their_tick() {
    let mut r = rig(1, false);
    let meta = r.pb.metadata();
    let mut rd = MdReader::new(Some(r.md.clone()), "md".into(), reader_params(1), None);
    let hdf5: Arc<dyn Storage> = r.hdf5.clone();
    meta.write_at(0, &[1; 8]).unwrap();
    r.w.end_of_tick(&r.pb).unwrap();
    rd.load().unwrap();
    let drv = ReaderStorage::new(hdf5, rd);
    for (t, pages) in [vec![3u64], vec![5, 6], vec![3]].into_iter().enumerate() {
        for &p in &pages {
            meta.write_at(p * PS, &[t as u8 + 2; 8]).unwrap();
        }
        r.w.end_of_tick(&r.pb).unwrap();
        let changed = drv.refresh(|| None).unwrap().unwrap();
        let got: Vec<u64> = changed.iter().map(|e| e.hdf5_page).collect();
        assert_eq!(got, pages, "tick {}", t + 2);
    }
}

// SWMR-089: with the strict-lag option a reader whose index is more than max_lag ticks old
// fails its next read with a clear error; without it the read goes on.
#[test]
fn swmr_089_strict_lag() {
    let mut r = rig(1, false);
    let meta = r.pb.metadata();
    meta.write_at(0, &[1; 8]).unwrap();
    r.w.end_of_tick(&r.pb).unwrap();
    let mk = |strict: bool| {
        let mut rd = MdReader::new(
            Some(r.md.clone()),
            "md".into(),
            ReaderParams {
                strict_lag: strict,
                ..reader_params(1)
            },
            None,
        );
        rd.load().unwrap();
        ReaderStorage::new(r.hdf5.clone() as Arc<dyn Storage>, rd)
    };
    let strict = mk(true);
    let lax = mk(false);
    for t in 0..=MAX_LAG {
        meta.write_at(PS, &[t as u8; 8]).unwrap();
        r.w.end_of_tick(&r.pb).unwrap();
    }
    let err = strict.read_vec(0, 4).unwrap_err();
    assert!(
        err.to_string()
            .contains("reader fell behind by more than max_lag"),
        "{err}"
    );
    assert_eq!(lax.read_vec(0, 4).unwrap(), vec![1; 4]);
}

// SWMR-135: a reader that stalls (keeps the index it loaded while the writer goes on for many
// more than max_lag ticks, changing the page it indexes every tick) is not protected: once the
// metadata file space of its image is reused, its next read of the page fails with a clear
// checksum error that names the likely cause. It never returns another tick's bytes as that
// page, and nothing retries behind the caller's back.
#[test]
fn swmr_135_a_stalled_reader_fails_with_a_clear_error() {
    let mut r = rig(1, false);
    let meta = r.pb.metadata();
    meta.write_at(PS, &[1; 64]).unwrap();
    r.w.end_of_tick(&r.pb).unwrap();
    let mut rd = MdReader::new(Some(r.md.clone()), "md".into(), reader_params(1), None);
    rd.load().unwrap();
    let stalled = ReaderStorage::new(r.hdf5.clone() as Arc<dyn Storage>, rd);
    for t in 0..4 * MAX_LAG {
        meta.write_at(PS, &[t as u8 + 2; 64]).unwrap();
        r.w.end_of_tick(&r.pb).unwrap();
    }
    let reads_before = r.md.snapshot();
    let err = stalled.read_vec(PS, 4).unwrap_err().to_string();
    assert!(
        err.contains("checksum mismatch") && err.contains("fallen"),
        "{err}"
    );
    assert_eq!(
        r.md.snapshot().since(&reads_before).reads,
        1,
        "one read of the image, no retries"
    );
}

// SWMR-115: an updater file is built whole in memory, every offset decided and inside the
// image, before any file exists; publishing it is then one write and a rename.
#[test]
fn swmr_115_updater_files_are_built_before_they_exist() {
    let mut r = rig(1, false);
    let meta = r.pb.metadata();
    for p in 0..3u64 {
        meta.write_at(p * PS, &[p as u8; 20]).unwrap();
    }
    let (out, _) = r.w.end_of_tick(&r.pb).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("ud");
    let bytes = updater::build(&out, 1, PS, false).unwrap();
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "nothing created yet"
    );
    let u = updater::decode(&bytes).unwrap();
    for e in &u.entries {
        assert!((u64::from(e.ud_page) * PS + u64::from(e.length)) as usize <= bytes.len());
        assert_eq!(u64::from(e.ud_page) * PS % PS, 0);
    }
    let path = updater::publish(&base, 1, &bytes).unwrap();
    assert_eq!(std::fs::read(path).unwrap(), bytes);
}
