//! Quick end-to-end checks of the core paths (the per-requirement suites are in the other files).
use crate::common;
use common::*;
use h5_metacache::*;

#[test]
fn smoke_insert_flush_protect_evict() {
    let mut h = harness(2, fixed(1024 * 4, 0.0));
    for i in 0..3u64 {
        h.insert(0, 0x100 * (3 - i), 64);
    }
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes(), vec![0x100, 0x200, 0x300]);
    let t = h.cache.totals();
    assert_eq!((t.dirty_size, t.clean_size), (0, 192));
    // A miss loads, a second protect hits.
    h.touch(1, 0x1000, 100);
    h.touch(1, 0x1000, 100);
    assert_eq!(h.read_ops().len(), 1);
    let (acc, hits) = h.cache.hit_rate_counters();
    assert_eq!((acc, hits), (2, 1));
    // Fill past the max: evictions keep total <= max.
    for i in 0..100u64 {
        h.touch(1, 0x2000 + i * 0x100, 100);
    }
    assert!(h.cache.size_info().cur_size <= 4096);
    h.check();
    h.cache.close().unwrap();
    assert_eq!(h.cache.totals().index_len, 0);
}

#[test]
fn smoke_adaptive_epoch_and_reports() {
    let mut cfg = CacheConfig::default_serial();
    cfg.epoch_length = 100;
    cfg.rpt_fcn_enabled = true;
    let mut h = harness(1, cfg);
    for i in 0..250u64 {
        h.touch(0, (i % 10) * 0x1000, 512);
    }
    assert_eq!(h.cache.epochs_completed(), 2);
    assert_eq!(h.cache.take_resize_reports().len(), 2);
    h.check();
}
