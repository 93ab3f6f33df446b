//! Spec §3.4 .. §3.8: protecting and loading, speculative and compressed loads, unprotect flags,
//! pinning, mark dirty/clean, resize, move and expunge (MDC-030 .. MDC-066), with the edge cases
//! E-15 .. E-33.
use crate::common;

use std::sync::{Arc, Mutex};

use common::*;
use h5_io::Storage;
use h5_metacache::*;

const KIB: usize = 1024;

fn st(h: &mut Harness, addr: u64) -> EntryStatus {
    h.cache
        .status(addr)
        .unwrap_or_else(|| panic!("{addr:#x} is not cached"))
}

fn class_stats(h: &Harness, class: usize) -> ClassStats {
    h.cache.stats().per_class[class]
}

fn protect(h: &mut Harness, class: u8, addr: u64, size: usize) -> ProtectHandle {
    h.cache
        .protect(class, addr, &size, ProtectFlags::NONE)
        .unwrap()
}

fn protect_ro(h: &mut Harness, class: u8, addr: u64, size: usize) -> ProtectHandle {
    h.cache
        .protect(class, addr, &size, ProtectFlags::READ_ONLY)
        .unwrap()
}

fn unprotect(h: &mut Harness, handle: ProtectHandle, flags: UnprotectFlags) {
    assert!(h.cache.unprotect(handle, flags).unwrap().is_none());
}

fn insert_flags(h: &mut Harness, class: u8, addr: u64, size: usize, flags: InsertFlags) {
    h.cache
        .insert(class, addr, MockEntry::new(size), flags)
        .unwrap();
}

/// Number of `free_icr` calls recorded by class `i`.
fn frees(h: &Harness, i: usize) -> usize {
    h.classes[i].count(|e| *e == Event::FreeIcr)
}

/// Number of `clear` calls recorded by class `i`.
fn clears(h: &Harness, i: usize) -> usize {
    h.classes[i].count(|e| matches!(e, Event::Clear { .. }))
}

/// Read operations as (offset, len).
fn reads(h: &Harness) -> Vec<(u64, u64)> {
    h.read_ops().iter().map(|r| (r.offset, r.len)).collect()
}

/// The cache error inside a failed call's error (`unprotect` wraps it with the returned handle).
trait AsCacheError {
    fn cache_error(&self) -> &CacheError;
}
impl AsCacheError for CacheError {
    fn cache_error(&self) -> &CacheError {
        self
    }
}
impl AsCacheError for UnprotectError {
    fn cache_error(&self) -> &CacheError {
        &self.error
    }
}

fn is_wrong_state<T, E: AsCacheError>(r: &Result<T, E>) -> bool {
    matches!(
        r.as_ref().map_err(|e| e.cache_error()),
        Err(CacheError::WrongState { .. })
    )
}

fn is_invalid_flags<T, E: AsCacheError>(r: &Result<T, E>) -> bool {
    matches!(
        r.as_ref().map_err(|e| e.cache_error()),
        Err(CacheError::InvalidFlags {
            call: "unprotect",
            ..
        })
    )
}

/// A configuration with only the flash increase on (multiple 1.0, threshold 0.25), starting at
/// 64 KiB with room to grow to 1 MiB.
fn flash_only() -> CacheConfig {
    CacheConfig {
        initial_size: 64 * KIB,
        min_size: 64 * KIB,
        max_size: 1024 * KIB,
        min_clean_fraction: 0.0,
        incr_mode: IncrMode::Off,
        decr_mode: DecrMode::Off,
        flash_incr_mode: FlashIncrMode::AddSpace,
        flash_multiple: 1.0,
        flash_threshold: 0.25,
        ..CacheConfig::default_serial()
    }
}

// ----- §3.4 protecting and loading -----

/// MDC-030: protecting an absent entry loads it with one read and puts it on the protected list; a
/// second protect after unprotecting does no read.
#[test]
fn mdc_030_protect_loads_once_and_moves_to_protected_list() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    let p = protect(&mut h, 0, 0x100, 64);
    assert_eq!(reads(&h), vec![(0x100, 64)]);
    let t = h.cache.totals();
    assert_eq!((t.pl_len, t.pl_size, t.lru_len, t.index_len), (1, 64, 0, 1));
    assert!(st(&mut h, 0x100).protected);
    assert_eq!(h.cache.icr(&p).unwrap().size, 64);
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert_eq!((h.cache.totals().pl_len, h.cache.totals().lru_len), (0, 1));

    let p = protect(&mut h, 0, 0x100, 64);
    assert_eq!(h.read_ops().len(), 1, "a hit must not read");
    assert_eq!(h.cache.totals().pl_len, 1);
    unprotect(&mut h, p, UnprotectFlags::NONE);
}

/// MDC-030: a mark-dirty made during an earlier protection does not leak into the next one: the
/// "dirtied while protected" flag is reset by protect.
#[test]
fn mdc_030_dirtied_flag_reset_by_protect() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.touch(0, 0x100, 64);
    let p = protect(&mut h, 0, 0x100, 64);
    h.cache.mark_dirty(0x100).unwrap();
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert!(st(&mut h, 0x100).dirty);
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert!(!st(&mut h, 0x100).dirty);
    // A new protection starts with the flag cleared: unprotecting without DIRTIED leaves X clean.
    let p = protect(&mut h, 0, 0x100, 64);
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert!(!st(&mut h, 0x100).dirty);
    assert_eq!(h.cache.totals().slist_len, 0);
}

/// MDC-031: every protect is an access, a resident entry is a hit: 3 accesses, 2 hits, 0.667.
#[test]
fn mdc_031_hit_and_access_counters() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    assert_eq!(h.cache.hit_rate(), 0.0);
    for _ in 0..3 {
        h.touch(0, 0x100, 64);
    }
    assert_eq!(h.cache.hit_rate_counters(), (3, 2));
    assert!((h.cache.hit_rate() - 2.0 / 3.0).abs() < 1e-9);
    let cs = class_stats(&h, 0);
    assert_eq!((cs.hits, cs.misses), (2, 1));
}

/// MDC-032: read-only protections share the entry; the entry is released with the last reader,
/// and the class's most simultaneous readers goes into the stats.
#[test]
fn mdc_032_read_only_protections_are_counted() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    let a = protect_ro(&mut h, 0, 0x100, 64);
    let b = protect_ro(&mut h, 0, 0x100, 64);
    let s = st(&mut h, 0x100);
    assert!(s.protected && s.read_only);
    assert_eq!(s.ro_refs, 2);
    assert!(a.is_read_only() && b.is_read_only());
    assert_eq!(h.cache.icr(&a).unwrap().size, 64);

    unprotect(&mut h, a, UnprotectFlags::NONE);
    let s = st(&mut h, 0x100);
    assert!(s.protected);
    assert_eq!(s.ro_refs, 1);
    assert_eq!((h.cache.totals().pl_len, h.cache.totals().lru_len), (1, 0));

    unprotect(&mut h, b, UnprotectFlags::NONE);
    let s = st(&mut h, 0x100);
    assert!(!s.protected && !s.read_only);
    assert_eq!(s.ro_refs, 0);
    assert_eq!((h.cache.totals().pl_len, h.cache.totals().lru_len), (0, 1));
    assert_eq!(h.cache.lru_addrs(), vec![0x100]);

    let hs: Vec<_> = (0..3).map(|_| protect_ro(&mut h, 0, 0x100, 64)).collect();
    let cs = class_stats(&h, 0);
    assert_eq!(cs.max_read_protects, 3);
    assert_eq!(cs.read_protects, 5);
    for p in hs {
        unprotect(&mut h, p, UnprotectFlags::NONE);
    }
    // No mutable access through a read-only protection.
    let p = protect_ro(&mut h, 0, 0x100, 64);
    assert!(is_wrong_state(&h.cache.icr_mut(&p).map(|_| ())));
    unprotect(&mut h, p, UnprotectFlags::NONE);
}

/// MDC-033 / E-15: read-write needs an unprotected entry, read-only needs an unprotected or
/// read-only protected entry. Failed protects change nothing.
#[test]
fn mdc_033_e15_protect_mode_conflicts() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    // read-write then read-write / read-only
    let p = protect(&mut h, 0, 0x100, 64);
    let rw = h.cache.protect(0, 0x100, &64, ProtectFlags::NONE);
    assert!(is_wrong_state(&rw));
    let ro = h.cache.protect(0, 0x100, &64, ProtectFlags::READ_ONLY);
    assert!(is_wrong_state(&ro));
    let s = st(&mut h, 0x100);
    assert!(s.protected && !s.read_only && s.ro_refs == 0);
    // The failed protects were not counted as accesses.
    assert_eq!(h.cache.hit_rate_counters(), (1, 0));
    unprotect(&mut h, p, UnprotectFlags::NONE);

    // read-only then read-write fails, read-only then read-only succeeds
    let a = protect_ro(&mut h, 0, 0x100, 64);
    let rw = h.cache.protect(0, 0x100, &64, ProtectFlags::NONE);
    assert!(is_wrong_state(&rw));
    assert_eq!(st(&mut h, 0x100).ro_refs, 1);
    let b = protect_ro(&mut h, 0, 0x100, 64);
    assert_eq!(st(&mut h, 0x100).ro_refs, 2);
    unprotect(&mut h, a, UnprotectFlags::NONE);
    unprotect(&mut h, b, UnprotectFlags::NONE);
    assert!(!st(&mut h, 0x100).protected);
    h.check();
}

/// E-16: protect with a class other than the cached entry's class is `ClassMismatch`.
#[test]
fn e16_protect_with_wrong_class() {
    let mut h = harness(2, fixed(64 * KIB, 0.0));
    h.touch(0, 0x100, 64);
    let r = h.cache.protect(1, 0x100, &64, ProtectFlags::NONE);
    assert!(matches!(
        r,
        Err(CacheError::ClassMismatch {
            addr: 0x100,
            cached: "mock-0",
            requested: "mock-1"
        })
    ));
    let s = st(&mut h, 0x100);
    assert!(!s.protected);
    assert_eq!(s.class, 0);
    assert_eq!(h.cache.hit_rate_counters(), (1, 0));
}

/// MDC-034: FLUSH_LAST (and FLUSH_COLLECTIVELY, recorded only, Q-30) on protect take effect only
/// when that protect loads the entry.
#[test]
fn mdc_034_flush_last_only_on_load() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    let p = h
        .cache
        .protect(
            0,
            0x100,
            &64,
            ProtectFlags::FLUSH_LAST | ProtectFlags::FLUSH_COLLECTIVELY,
        )
        .unwrap();
    unprotect(&mut h, p, UnprotectFlags::NONE);
    let s = st(&mut h, 0x100);
    assert!(s.flush_last && s.flush_collectively);
    assert_eq!(h.cache.totals().num_last_entries, 1);

    // Inserted normally, then protected with the flags: they are ignored.
    h.insert(0, 0x200, 64);
    let p = h
        .cache
        .protect(
            0,
            0x200,
            &64,
            ProtectFlags::FLUSH_LAST | ProtectFlags::FLUSH_COLLECTIVELY,
        )
        .unwrap();
    unprotect(&mut h, p, UnprotectFlags::NONE);
    let s = st(&mut h, 0x200);
    assert!(!s.flush_last && !s.flush_collectively);
    // Loaded entry already resident: protecting it again with the flags changes nothing either.
    h.touch(0, 0x300, 64);
    let p = h
        .cache
        .protect(0, 0x300, &64, ProtectFlags::FLUSH_LAST)
        .unwrap();
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert!(!st(&mut h, 0x300).flush_last);
    assert_eq!(h.cache.totals().num_last_entries, 1);
}

/// MDC-035: protecting a pinned entry takes it from the pinned list to the protected list; unprotect
/// puts it back, still pinned.
#[test]
fn mdc_035_protect_pinned_entry() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    insert_flags(&mut h, 0, 0x100, 64, InsertFlags::PIN);
    let t = h.cache.totals();
    assert_eq!((t.pel_len, t.pl_len), (1, 0));
    let p = protect(&mut h, 0, 0x100, 64);
    let t = h.cache.totals();
    assert_eq!((t.pel_len, t.pl_len), (0, 1));
    unprotect(&mut h, p, UnprotectFlags::NONE);
    let t = h.cache.totals();
    assert_eq!((t.pel_len, t.pl_len, t.lru_len), (1, 0, 0));
    assert!(st(&mut h, 0x100).pinned_by_client);
}

/// MDC-036: a miss runs get_load_size → read(addr, len) → deserialize → make-space →
/// AfterLoad, and the entry's size is the loaded length. The entry starts clean with an
/// up-to-date image.
#[test]
fn mdc_036_load_sequence() {
    let mut h = harness(1, fixed(KIB, 0.0));
    h.storage.write_at(0x2000, &[0x5A; 512]).unwrap();
    h.touch(0, 0x0, 512);
    h.touch(0, 0x1000, 512);
    h.classes[0].clear_events();
    h.clear_io();

    let p = protect(&mut h, 0, 0x2000, 512);
    assert_eq!(reads(&h), vec![(0x2000, 512)]);
    assert_eq!(
        h.classes[0].events(),
        vec![
            Event::GetInitialLoadSize,
            Event::VerifyChecksum { len: 512 },
            Event::Deserialize { len: 512 },
            // make-space evicts the LRU tail before the new entry is announced
            Event::Notify {
                action: NotifyAction::BeforeEvict,
                addr: 0x0
            },
            Event::FreeIcr,
            Event::Notify {
                action: NotifyAction::AfterLoad,
                addr: 0x2000
            },
        ]
    );
    // Deserialize saw the bytes at addr.
    assert_eq!(h.cache.icr(&p).unwrap().tag, 0x5A);
    unprotect(&mut h, p, UnprotectFlags::NONE);
    let s = st(&mut h, 0x2000);
    assert_eq!((s.size, s.class, s.dirty), (512, 0, false));
    assert!(s.image_up_to_date);
    assert_eq!(h.cache.image(0x2000).unwrap(), &[0x5A; 512][..]);
    assert_eq!(h.cache.cached_addrs(), vec![0x1000, 0x2000]);
}

/// MDC-037: a repaired image makes the loaded entry dirty (slist, dirty LRU) even without
/// DIRTIED, and the next flush writes it.
#[test]
fn mdc_037_repaired_load_is_dirty() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.classes[0].knobs().repaired = true;
    h.touch(0, 0x100, 64);
    let s = st(&mut h, 0x100);
    assert!(s.dirty);
    assert!(!s.image_up_to_date);
    let t = h.cache.totals();
    assert_eq!(
        (t.slist_len, t.dirty_size, t.dlru_len, t.clru_len),
        (1, 64, 1, 0)
    );
    assert_eq!(h.cache.dirty_lru_addrs(), vec![0x100]);

    h.classes[0].knobs().repaired = false;
    h.touch(0, 0x200, 64);
    assert!(!st(&mut h, 0x200).dirty);

    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes(), vec![0x100]);
    assert!(!st(&mut h, 0x100).dirty);
}

/// MDC-038 / E-18: a failing deserialize fails the protect with `Client { Deserialize }` and
/// inserts nothing.
#[test]
fn mdc_038_e18_failed_deserialize_inserts_nothing() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.touch(0, 0x100, 64);
    let before = h.cache.totals();
    h.classes[0].knobs().fail.insert(Callback::Deserialize);
    let r = h.cache.protect(0, 0x200, &64, ProtectFlags::NONE);
    assert!(matches!(
        r,
        Err(CacheError::Client {
            callback: Callback::Deserialize,
            addr: 0x200,
            ..
        })
    ));
    assert_eq!(h.cache.totals(), before);
    assert_eq!(h.cache.totals().index_len, 1);
    assert!(!h.cache.contains(0x200));
    assert_eq!(
        h.classes[0].count(|e| matches!(
            e,
            Event::Notify {
                action: NotifyAction::AfterLoad,
                addr: 0x200
            }
        )),
        0
    );
    // Once deserialize works again the same protect succeeds.
    h.classes[0].knobs().fail.clear();
    h.touch(0, 0x200, 64);
    assert!(h.cache.contains(0x200));
    h.check();
}

/// MDC-038 / E-18: the other load failures: get_load_size failing or returning 0, a read past the
/// end of allocation (non-speculative), a failed read, image_len failing (speculative), and the
/// AfterLoad notify failing (the load is undone and the object freed).
#[test]
fn mdc_038_e18_other_load_failures_insert_nothing() {
    let mut h = harness_with_flags(
        &[ClassFlags::NONE, ClassFlags::SPECULATIVE_LOAD],
        fixed(64 * KIB, 0.0),
    );
    h.touch(0, 0x100, 64);
    let before = h.cache.totals();

    h.classes[0]
        .knobs()
        .fail
        .insert(Callback::GetInitialLoadSize);
    let r = h.cache.protect(0, 0x200, &64, ProtectFlags::NONE);
    assert!(matches!(
        r,
        Err(CacheError::Client {
            callback: Callback::GetInitialLoadSize,
            ..
        })
    ));
    h.classes[0].knobs().fail.clear();

    // The mock's load size is the udata: 0 is an error.
    let r = h.cache.protect(0, 0x200, &0, ProtectFlags::NONE);
    assert!(matches!(
        r,
        Err(CacheError::InvalidSize {
            addr: 0x200,
            size: 0
        })
    ));

    // A read past the end of allocated space.
    h.cache.ctx_mut().eoa = 0x1000;
    let r = h.cache.protect(0, 0xFF0, &64, ProtectFlags::NONE);
    assert!(matches!(
        r,
        Err(CacheError::PastEndOfAllocation {
            what: "read",
            addr: 0xFF0,
            len: 64,
            eoa: 0x1000
        })
    ));

    // (Space past the storage's end but inside the allocated space is not a failure: it reads
    // as zeros, see `allocated_space_past_the_storage_end_reads_as_zeros`.)

    // image_len failing in a speculative load: the decoded object is freed, not indexed.
    h.classes[1].knobs().fail.insert(Callback::ImageLen);
    let r = h.cache.protect(1, 0x400, &64, ProtectFlags::NONE);
    assert!(matches!(
        r,
        Err(CacheError::Client {
            callback: Callback::ImageLen,
            ..
        })
    ));
    assert_eq!(frees(&h, 1), 1);
    h.classes[1].knobs().fail.clear();

    // AfterLoad failing: the load is undone and the object freed.
    h.classes[0].clear_events();
    h.classes[0].knobs().fail.insert(Callback::Notify);
    let r = h.cache.protect(0, 0x500, &64, ProtectFlags::NONE);
    assert!(matches!(
        r,
        Err(CacheError::Client {
            callback: Callback::Notify,
            addr: 0x500,
            ..
        })
    ));
    assert_eq!(frees(&h, 0), 1);
    h.classes[0].knobs().fail.clear();

    assert_eq!(h.cache.totals(), before);
    assert_eq!(h.cache.cached_addrs(), vec![0x100]);
    assert_eq!(h.cache.hit_rate_counters(), (1, 0));
    h.check();
}

/// Allocated space past the storage's end (allocated, never written) reads as zeros, as
/// libhdf5's POSIX driver reads past the end of file: the load succeeds and the storage does not
/// grow; past the end of allocation the read is still refused.
#[test]
fn allocated_space_past_the_storage_end_reads_as_zeros() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.cache.ctx_mut().eoa = 2 * STORAGE_LEN;
    let handle = h
        .cache
        .protect(0, STORAGE_LEN + 0x100, &64, ProtectFlags::NONE)
        .expect("zeros past the storage's end");
    h.cache.unprotect(handle, UnprotectFlags::NONE).unwrap();
    assert_eq!(h.storage.len().unwrap(), STORAGE_LEN);
    let r = h
        .cache
        .protect(0, 2 * STORAGE_LEN - 0x10, &64, ProtectFlags::NONE);
    assert!(
        matches!(r, Err(CacheError::PastEndOfAllocation { .. })),
        "{r:?}"
    );
    h.check();
}

/// MDC-039: AfterLoad is delivered once per miss and never on a hit.
#[test]
fn mdc_039_after_load_once_per_miss() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    for _ in 0..3 {
        h.touch(0, 0x100, 64);
        h.touch(0, 0x200, 64);
    }
    let loads = |a: u64| {
        h.classes[0].count(|e| {
            *e == Event::Notify {
                action: NotifyAction::AfterLoad,
                addr: a,
            }
        })
    };
    assert_eq!((loads(0x100), loads(0x200)), (1, 1));
    // An insert is not a load.
    h.insert(0, 0x300, 64);
    h.touch(0, 0x300, 64);
    assert_eq!(
        h.classes[0].count(|e| matches!(
            e,
            Event::Notify {
                action: NotifyAction::AfterLoad,
                ..
            }
        )),
        2
    );
}

/// MDC-040: after the max size is lowered, the next protect, even a hit, evicts until the total
/// is within the new max.
#[test]
fn mdc_040_lowered_max_shrinks_on_next_protect_hit() {
    let mut h = harness(1, fixed(8 * KIB, 0.0));
    for i in 0..8u64 {
        h.touch(0, 0x1000 * (i + 1), KIB);
    }
    assert_eq!(h.cache.size_info().cur_size, 8 * KIB);
    h.cache.set_config(&fixed(4 * KIB, 0.0)).unwrap();
    // Setting the config itself evicts nothing.
    assert_eq!(h.cache.size_info().cur_size, 8 * KIB);
    assert_eq!(h.cache.size_info().max_size, 4 * KIB);
    let reads_before = h.read_ops().len();
    // A hit on the LRU head.
    let p = protect(&mut h, 0, 0x8000, KIB);
    assert_eq!(h.read_ops().len(), reads_before);
    let si = h.cache.size_info();
    assert!(si.cur_size <= 4 * KIB, "cur_size {}", si.cur_size);
    assert_eq!(si.cur_size, 4 * KIB);
    // The oldest entries went; the protected one stayed.
    assert_eq!(h.cache.cached_addrs(), vec![0x5000, 0x6000, 0x7000, 0x8000]);
    assert_eq!(frees(&h, 0), 4);
    unprotect(&mut h, p, UnprotectFlags::NONE);
    // The flag is consumed: a further protect evicts nothing.
    h.touch(0, 0x5000, KIB);
    assert_eq!(frees(&h, 0), 4);
}

/// MDC-040: a miss runs the flash-increase check with x = the loaded size before making space.
#[test]
fn mdc_040_protect_miss_runs_flash_check() {
    let mut h = harness(1, flash_only());
    for i in 0..60u64 {
        h.touch(0, 0x1000 * (i + 1), KIB);
    }
    assert_eq!(h.cache.size_info().max_size, 64 * KIB);
    // 32 KiB > 0.25 * 64 KiB and only 4 KiB free: grow by (32 - 4) KiB * 1.0.
    h.touch(0, 0x30_0000, 32 * KIB);
    let si = h.cache.size_info();
    assert_eq!(si.max_size, 64 * KIB + 28 * KIB);
    assert_eq!(si.cur_size, 92 * KIB);
    assert_eq!(h.cache.stats().flash_increases, 1);
    assert_eq!(
        frees(&h, 0),
        0,
        "the flash increase made room, nothing evicted"
    );
}

/// MDC-041: with resizing on, protect ends an epoch every `epoch_length` accesses: 250 protects
/// with epoch length 100 give exactly 2 reports. With resizing off no epoch ends.
#[test]
fn mdc_041_epochs_end_in_protect() {
    let cfg = CacheConfig {
        epoch_length: 100,
        rpt_fcn_enabled: true,
        ..CacheConfig::default_serial()
    };
    let mut h = harness(1, cfg);
    for i in 0..250u64 {
        let p = protect(&mut h, 0, (i % 10) * 0x1000, 512);
        unprotect(&mut h, p, UnprotectFlags::NONE);
    }
    assert_eq!(h.cache.epochs_completed(), 2);
    let reports = h.cache.take_resize_reports();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0].epoch, 1);
    assert_eq!(reports[1].epoch, 2);
    // The hit-rate counters restarted at the last epoch end.
    assert_eq!(h.cache.hit_rate_counters(), (50, 50));

    let mut fixed_cfg = fixed(64 * KIB, 0.0);
    fixed_cfg.epoch_length = 100;
    fixed_cfg.rpt_fcn_enabled = true;
    let mut h = harness(1, fixed_cfg);
    for i in 0..250u64 {
        h.touch(0, (i % 10) * 0x1000, 512);
    }
    assert_eq!(h.cache.epochs_completed(), 0);
    assert!(h.cache.take_resize_reports().is_empty());
    assert_eq!(h.cache.hit_rate_counters(), (250, 240));
}

// ----- §3.5 speculative and compressed loads -----

/// MDC-042: speculative guess 64, real size 200: reads of 64 then 200 bytes, two deserialize
/// calls, one free_icr, entry size 200.
#[test]
fn mdc_042_speculative_guess_too_small_rereads() {
    let mut h = harness_with_flags(&[ClassFlags::SPECULATIVE_LOAD], fixed(64 * KIB, 0.0));
    h.classes[0].knobs().real_sizes = vec![200];
    h.touch(0, 0x100, 64);
    assert_eq!(reads(&h), vec![(0x100, 64), (0x100, 200)]);
    assert_eq!(
        h.classes[0].count(|e| matches!(e, Event::Deserialize { .. })),
        2
    );
    assert_eq!(
        h.classes[0].count(|e| *e == Event::Deserialize { len: 64 }),
        1
    );
    assert_eq!(
        h.classes[0].count(|e| *e == Event::Deserialize { len: 200 }),
        1
    );
    assert_eq!(frees(&h, 0), 1);
    let s = st(&mut h, 0x100);
    assert_eq!(s.size, 200);
    assert!(!s.dirty);
    assert_eq!(h.cache.image(0x100).unwrap().len(), 200);
    assert_eq!(h.cache.totals().index_size, 200);
    assert_eq!(h.cache.stats().speculative_retries, 1);
}

/// MDC-042: speculative guess 256, real size 100: one read, the entry takes the smaller size.
#[test]
fn mdc_042_speculative_guess_too_large_truncates() {
    let mut h = harness_with_flags(&[ClassFlags::SPECULATIVE_LOAD], fixed(64 * KIB, 0.0));
    h.classes[0].knobs().real_sizes = vec![100];
    h.touch(0, 0x100, 256);
    assert_eq!(reads(&h), vec![(0x100, 256)]);
    assert_eq!(
        h.classes[0].count(|e| matches!(e, Event::Deserialize { .. })),
        1
    );
    assert_eq!(frees(&h, 0), 0);
    assert_eq!(st(&mut h, 0x100).size, 100);
    assert_eq!(h.cache.image(0x100).unwrap().len(), 100);
    assert_eq!(h.cache.totals().index_size, 100);
}

/// MDC-042 with Q-35's get_final_load_size: the real size comes from the first image, the cache
/// re-reads once and deserializes once, without asking image_len.
#[test]
fn mdc_042_q35_final_load_size_path() {
    let mut h = harness_with_flags(&[ClassFlags::SPECULATIVE_LOAD], fixed(64 * KIB, 0.0));
    h.classes[0].knobs().final_load_size = Some(200);
    h.touch(0, 0x100, 64);
    assert_eq!(reads(&h), vec![(0x100, 64), (0x100, 200)]);
    let ev = h.classes[0].events();
    assert_eq!(
        ev[..4],
        [
            Event::GetInitialLoadSize,
            Event::GetFinalLoadSize { len: 64 },
            Event::VerifyChecksum { len: 200 },
            Event::Deserialize { len: 200 },
        ]
    );
    assert_eq!(h.classes[0].count(|e| *e == Event::ImageLen), 0);
    assert_eq!(frees(&h, 0), 0);
    assert_eq!(st(&mut h, 0x100).size, 200);

    // Non-speculative: a smaller final size truncates, a larger one is an error.
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.classes[0].knobs().final_load_size = Some(32);
    h.touch(0, 0x100, 64);
    assert_eq!(reads(&h), vec![(0x100, 64)]);
    assert_eq!(
        h.classes[0].count(|e| *e == Event::Deserialize { len: 32 }),
        1
    );
    assert_eq!(st(&mut h, 0x100).size, 32);
    h.classes[0].knobs().final_load_size = Some(100);
    let r = h.cache.protect(0, 0x200, &64, ProtectFlags::NONE);
    assert!(matches!(
        r,
        Err(CacheError::LoadSizeGrew {
            addr: 0x200,
            bound: 64,
            reported: 100
        })
    ));
    assert!(!h.cache.contains(0x200));
}

/// Q-35 checksums (with MDC-038's "nothing inserted"): one bad checksum is retried with a re-read;
/// with the default retry count of 1, two bad checksums fail with `Checksum` after two reads.
#[test]
fn q35_checksum_retry_then_failure() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.classes[0].knobs().bad_checksums = 1;
    h.touch(0, 0x100, 64);
    assert_eq!(reads(&h), vec![(0x100, 64), (0x100, 64)]);
    assert_eq!(
        h.classes[0].count(|e| matches!(e, Event::VerifyChecksum { .. })),
        2
    );
    assert_eq!(h.cache.stats().checksum_retries, 1);
    assert!(h.cache.contains(0x100));

    h.clear_io();
    h.classes[0].knobs().bad_checksums = 2;
    let r = h.cache.protect(0, 0x200, &64, ProtectFlags::NONE);
    assert!(matches!(
        r,
        Err(CacheError::Checksum {
            class: "mock-0",
            addr: 0x200,
            attempts: 2
        })
    ));
    assert_eq!(reads(&h), vec![(0x200, 64), (0x200, 64)]);
    assert_eq!(h.cache.totals().index_len, 1);
    assert_eq!(
        h.classes[0].count(|e| matches!(e, Event::Deserialize { .. })),
        1,
        "no deserialize after a failed checksum"
    );
}

/// MDC-043: a speculative read that would run past the end of allocation is shortened to end
/// there; the same layout with a non-speculative class is an error.
#[test]
fn mdc_043_speculative_read_clipped_at_eoa() {
    let mut h = harness_with_flags(
        &[ClassFlags::SPECULATIVE_LOAD, ClassFlags::NONE],
        fixed(64 * KIB, 0.0),
    );
    h.cache.ctx_mut().eoa = 1000;
    h.classes[0].knobs().real_sizes = vec![50];
    h.touch(0, 950, 100);
    assert_eq!(reads(&h), vec![(950, 50)]);
    assert_eq!(
        h.classes[0].count(|e| *e == Event::Deserialize { len: 50 }),
        1
    );
    assert_eq!(st(&mut h, 950).size, 50);
    h.cache.expunge(0, 950, ExpungeFlags::NONE).unwrap();

    h.clear_io();
    let r = h.cache.protect(1, 950, &100, ProtectFlags::NONE);
    assert!(matches!(
        r,
        Err(CacheError::PastEndOfAllocation {
            what: "read",
            addr: 950,
            len: 100,
            eoa: 1000
        })
    ));
    assert!(h.read_ops().is_empty());
    assert!(!h.cache.contains(950));

    // A speculative entry whose real size runs past the end is an error too (the second read is
    // not speculative).
    h.classes[0].knobs().real_sizes = vec![80];
    let r = h.cache.protect(0, 950, &100, ProtectFlags::NONE);
    assert!(matches!(
        r,
        Err(CacheError::PastEndOfAllocation {
            what: "read",
            len: 80,
            ..
        })
    ));
    assert_eq!(h.cache.totals().index_len, 0);
}

/// MDC-044 / E-19: a speculative client whose reported size keeps growing fails the protect after
/// exactly two reads; nothing is inserted and both objects are freed.
#[test]
fn mdc_044_e19_growing_speculative_size_fails_after_two_reads() {
    let mut h = harness_with_flags(&[ClassFlags::SPECULATIVE_LOAD], fixed(64 * KIB, 0.0));
    h.classes[0].knobs().real_sizes = vec![200, 400];
    let r = h.cache.protect(0, 0x100, &64, ProtectFlags::NONE);
    assert!(matches!(
        r,
        Err(CacheError::LoadSizeGrew {
            addr: 0x100,
            bound: 200,
            reported: 400
        })
    ));
    assert_eq!(reads(&h), vec![(0x100, 64), (0x100, 200)]);
    assert_eq!(
        h.classes[0].count(|e| matches!(e, Event::Deserialize { .. })),
        2
    );
    assert_eq!(frees(&h, 0), 2);
    assert_eq!(h.cache.totals().index_len, 0);
    assert_eq!(h.classes[0].count(|e| matches!(e, Event::Notify { .. })), 0);
}

/// MDC-045 / E-19: a compressed class reads the bound once and takes the actual size without a
/// re-read (bound 512, actual 300); an actual size above the bound is an error.
#[test]
fn mdc_045_e19_compressed_load() {
    let mut h = harness_with_flags(&[ClassFlags::COMPRESSED], fixed(64 * KIB, 0.0));
    h.classes[0].knobs().real_sizes = vec![300];
    h.touch(0, 0x1000, 512);
    assert_eq!(reads(&h), vec![(0x1000, 512)]);
    assert_eq!(
        h.classes[0].count(|e| matches!(e, Event::Deserialize { .. })),
        1
    );
    // Deserialize accepted the oversized buffer.
    assert_eq!(
        h.classes[0].count(|e| *e == Event::Deserialize { len: 512 }),
        1
    );
    assert_eq!(st(&mut h, 0x1000).size, 300);
    assert_eq!(h.cache.image(0x1000).unwrap().len(), 300);

    h.clear_io();
    h.classes[0].knobs().real_sizes = vec![600];
    let r = h.cache.protect(0, 0x2000, &512, ProtectFlags::NONE);
    assert!(matches!(
        r,
        Err(CacheError::LoadSizeGrew {
            addr: 0x2000,
            bound: 512,
            reported: 600
        })
    ));
    assert_eq!(
        reads(&h),
        vec![(0x2000, 512)],
        "no re-read for a compressed class"
    );
    assert_eq!(h.cache.totals().index_len, 1);
    assert_eq!(frees(&h, 0), 1);
}

/// E-20: any load of a NO_IO test class fails with `NoIoClass` before anything is read.
#[test]
fn e20_no_io_class_cannot_load() {
    let mut h = harness_with_flags(&[ClassFlags::NO_IO], fixed(64 * KIB, 0.0));
    let r = h.cache.protect(0, 0x100, &64, ProtectFlags::NONE);
    assert!(matches!(r, Err(CacheError::NoIoClass { class: "mock-0" })));
    assert!(h.read_ops().is_empty());
    assert!(h.classes[0].events().is_empty());
    assert_eq!(h.cache.totals().index_len, 0);
}

// ----- §3.6 unprotect and its flags -----

/// MDC-047: unprotect consumes the handle and puts the entry at the LRU head.
#[test]
fn mdc_047_unprotect_goes_to_lru_head() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.touch(0, 0x100, 64);
    h.touch(0, 0x200, 64);
    assert_eq!(h.cache.lru_addrs(), vec![0x200, 0x100]);
    let p = protect(&mut h, 0, 0x100, 64);
    assert_eq!(p.addr(), 0x100);
    assert!(h.cache.handle_is_live(&p));
    assert_eq!(h.cache.lru_addrs(), vec![0x200]);
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert_eq!(h.cache.lru_addrs(), vec![0x100, 0x200]);
    assert_eq!(h.cache.clean_lru_addrs(), vec![0x100, 0x200]);
}

/// MDC-047 / E-21: a handle that does not belong to a protection of this cache is rejected: here a
/// handle issued by another cache, aimed at an entry of this cache that is cached at the same slot
/// and address but not protected (unprotecting an unprotected entry). The entry is unchanged.
///
/// Unprotect takes no class argument (the handle carries the protection), and handles are neither
/// `Clone` nor constructible, so "a different class" and "the same handle twice" cannot be
/// expressed; this is the representable form of E-21.
#[test]
fn mdc_047_e21_unprotect_of_unprotected_entry() {
    let mut a = harness(1, fixed(64 * KIB, 0.0));
    let mut b = harness(1, fixed(64 * KIB, 0.0));
    let pa = protect(&mut a, 0, 0x100, 64);
    b.touch(0, 0x100, 64);
    let before = b.cache.totals();
    let r = b.cache.unprotect(pa, UnprotectFlags::DIRTIED);
    assert!(
        matches!(
            r.as_ref().map_err(|e| &e.error),
            Err(CacheError::StaleHandle)
        ),
        "{r:?}"
    );
    assert_eq!(b.cache.totals(), before);
    let s = st(&mut b, 0x100);
    assert!(!s.protected && !s.dirty);
    // The handle is gone but cache A's protection is untouched.
    assert!(st(&mut a, 0x100).protected);
    assert_eq!(a.cache.totals().pl_len, 1);
}

/// E-33: a stale handle whose slot has been reused by a new protected entry at the same address
/// is rejected by the generation check; the new protection is unaffected.
#[test]
fn e33_stale_handle_with_reused_slot() {
    let mut a = harness(1, fixed(64 * KIB, 0.0));
    let mut b = harness(1, fixed(64 * KIB, 0.0));
    let stale = protect(&mut a, 0, 0x100, 64);
    // In B the same slot is used, freed, and reused for a new protection at the same address.
    let first = protect(&mut b, 0, 0x100, 64);
    unprotect(&mut b, first, UnprotectFlags::DELETED);
    assert!(!b.cache.contains(0x100));
    let current = protect(&mut b, 0, 0x100, 64);
    assert!(!b.cache.handle_is_live(&stale));
    assert!(b.cache.handle_is_live(&current));
    assert!(matches!(b.cache.icr(&stale), Err(CacheError::StaleHandle)));
    let r = b.cache.unprotect(stale, UnprotectFlags::DELETED);
    assert!(
        matches!(
            r.as_ref().map_err(|e| &e.error),
            Err(CacheError::StaleHandle)
        ),
        "{r:?}"
    );
    let s = st(&mut b, 0x100);
    assert!(s.protected);
    assert_eq!(b.cache.totals().index_len, 1);
    unprotect(&mut b, current, UnprotectFlags::NONE);
    assert!(!st(&mut b, 0x100).protected);
}

/// MDC-048: DIRTIED dirties a clean entry: dirty bytes, slist, dirty LRU, stale image. A
/// mark-dirty during the protection has the same effect at unprotect.
#[test]
fn mdc_048_dirtied_and_mark_dirty_while_protected() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.touch(0, 0x100, 64);
    h.touch(0, 0x200, 64);
    let t0 = h.cache.totals();
    assert!(st(&mut h, 0x100).image_up_to_date);
    let p = protect(&mut h, 0, 0x100, 64);
    h.cache.icr_mut(&p).unwrap().fill = 0x77;
    unprotect(&mut h, p, UnprotectFlags::DIRTIED);
    let t = h.cache.totals();
    assert_eq!(t.dirty_size, t0.dirty_size + 64);
    assert_eq!(t.clean_size, t0.clean_size - 64);
    assert_eq!(t.slist_len, t0.slist_len + 1);
    assert_eq!(h.cache.dirty_lru_addrs(), vec![0x100]);
    assert_eq!(h.cache.clean_lru_addrs(), vec![0x200]);
    let s = st(&mut h, 0x100);
    assert!(s.dirty && !s.image_up_to_date);

    // mark_dirty while protected: nothing changes until unprotect.
    let p = protect(&mut h, 0, 0x200, 64);
    h.cache.mark_dirty(0x200).unwrap();
    assert!(!st(&mut h, 0x200).dirty);
    assert_eq!(h.cache.totals().slist_len, 1);
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert!(st(&mut h, 0x200).dirty);
    assert_eq!(h.cache.dirty_addrs(), vec![0x100, 0x200]);

    h.cache.flush(FlushFlags::NONE).unwrap();
    let w = h.write_ops();
    assert_eq!(w.len(), 2);
    let mut buf = [0u8; 64];
    h.storage.read_at(0x100, &mut buf).unwrap();
    assert_eq!(buf, [0x77; 64]);
}

/// MDC-048 / E-22: DIRTIED on a read-only protection is an error and dirties nothing.
#[test]
fn mdc_048_e22_dirtied_on_read_only_is_error() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    let p = protect_ro(&mut h, 0, 0x100, 64);
    let r = h.cache.unprotect(p, UnprotectFlags::DIRTIED);
    assert!(is_wrong_state(&r), "{r:?}");
    let s = st(&mut h, 0x100);
    assert!(!s.dirty);
    assert!(
        s.protected && s.ro_refs == 1,
        "the rejected unprotect changed nothing"
    );
    assert_eq!(h.cache.totals().slist_len, 0);
}

/// MDC-049 / E-23: PIN pins at unprotect; PIN on a client-pinned entry, UNPIN on an unpinned one
/// and PIN | UNPIN are errors. UNPIN unpins to the LRU head.
#[test]
fn mdc_049_e23_pin_and_unpin_at_unprotect() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.touch(0, 0x100, 64);
    h.touch(0, 0x200, 64);
    let p = protect(&mut h, 0, 0x100, 64);
    unprotect(&mut h, p, UnprotectFlags::PIN);
    let t = h.cache.totals();
    assert_eq!((t.pel_len, t.lru_len), (1, 1));
    assert!(st(&mut h, 0x100).pinned_by_client);
    assert_eq!(class_stats(&h, 0).pins, 1);

    let p = protect(&mut h, 0, 0x100, 64);
    let r = h.cache.unprotect(p, UnprotectFlags::PIN);
    assert!(is_wrong_state(&r), "{r:?}");
    assert!(st(&mut h, 0x100).protected);
    assert_eq!(class_stats(&h, 0).pins, 1);

    let p = protect(&mut h, 0, 0x200, 64);
    let r = h.cache.unprotect(p, UnprotectFlags::UNPIN);
    assert!(is_wrong_state(&r), "{r:?}");
    let s = st(&mut h, 0x200);
    assert!(s.protected && !s.pinned_by_client);

    h.touch(0, 0x300, 64);
    let p = protect(&mut h, 0, 0x300, 64);
    let r = h
        .cache
        .unprotect(p, UnprotectFlags::PIN | UnprotectFlags::UNPIN);
    assert!(is_invalid_flags(&r), "{r:?}");
    let s = st(&mut h, 0x300);
    assert!(s.protected && !s.pinned_by_client);

    // UNPIN on a pinned entry: unpinned and at the LRU head.
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.touch(0, 0x200, 64);
    insert_flags(&mut h, 0, 0x100, 64, InsertFlags::PIN);
    let p = protect(&mut h, 0, 0x100, 64);
    unprotect(&mut h, p, UnprotectFlags::UNPIN);
    assert!(!st(&mut h, 0x100).pinned_by_client);
    let t = h.cache.totals();
    assert_eq!((t.pel_len, t.lru_len), (0, 2));
    assert_eq!(h.cache.lru_addrs(), vec![0x100, 0x200]);
    assert_eq!(class_stats(&h, 0).unpins, 1);
}

/// E-23 / MDC-060: UNPIN (and `unpin`) on an entry pinned only by the cache, as a flush-dependency
/// parent, is an error.
#[test]
fn e23_e28_unpin_of_cache_only_pin_is_error() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.touch(0, 0x100, 64);
    h.touch(0, 0x200, 64);
    let p = protect(&mut h, 0, 0x100, 64);
    h.cache.create_flush_dependency(0x100, 0x200).unwrap();
    unprotect(&mut h, p, UnprotectFlags::NONE);
    let s = st(&mut h, 0x100);
    assert!(s.pinned_by_cache && !s.pinned_by_client);
    assert_eq!(h.cache.totals().pel_len, 1);

    assert!(is_wrong_state(&h.cache.unpin(0x100)));
    let p = protect(&mut h, 0, 0x100, 64);
    let r = h.cache.unprotect(p, UnprotectFlags::UNPIN);
    assert!(is_wrong_state(&r), "{r:?}");
    let s = st(&mut h, 0x100);
    assert!(s.pinned_by_cache && s.protected);
}

/// MDC-050: SET_FLUSH_MARKER marks the entry; a marked-only flush writes just that one.
#[test]
fn mdc_050_set_flush_marker() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.insert(0, 0x100, 64);
    h.insert(0, 0x200, 64);
    let p = protect(&mut h, 0, 0x200, 64);
    unprotect(&mut h, p, UnprotectFlags::SET_FLUSH_MARKER);
    let p = protect(&mut h, 0, 0x100, 64);
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert!(st(&mut h, 0x200).flush_marker);
    assert!(!st(&mut h, 0x100).flush_marker);
    h.cache.flush(FlushFlags::MARKED_ENTRIES).unwrap();
    assert_eq!(h.writes(), vec![0x200]);
    assert!(st(&mut h, 0x100).dirty);
    assert!(!st(&mut h, 0x200).dirty);
}

/// MDC-051: DELETED on a dirty entry: never written, clear(about_to_destroy) once, BeforeEvict,
/// free_icr once, and the entry leaves the index and the slist.
#[test]
fn mdc_051_deleted_discards_without_writing() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.insert(0, 0x100, 64);
    h.insert(0, 0x200, 64);
    let t0 = h.cache.totals();
    h.classes[0].clear_events();
    let p = protect(&mut h, 0, 0x100, 64);
    unprotect(&mut h, p, UnprotectFlags::DELETED);
    assert!(h.writes().is_empty());
    assert_eq!(
        h.classes[0].count(|e| *e
            == Event::Clear {
                about_to_destroy: true
            }),
        1
    );
    assert_eq!(clears(&h, 0), 1);
    assert_eq!(frees(&h, 0), 1);
    assert_eq!(
        h.classes[0].count(|e| *e
            == Event::Notify {
                action: NotifyAction::BeforeEvict,
                addr: 0x100
            }),
        1
    );
    assert_eq!(
        h.classes[0].count(|e| matches!(e, Event::Serialize { .. })),
        0
    );
    let t = h.cache.totals();
    assert_eq!(t.index_len, t0.index_len - 1);
    assert_eq!(t.slist_len, t0.slist_len - 1);
    assert_eq!((t.dirty_size, t.lru_len, t.pl_len), (64, 1, 0));
    assert!(!h.cache.contains(0x100));
    assert_eq!(class_stats(&h, 0).evictions, 1);

    // A clean entry is deleted without a clear call.
    h.touch(0, 0x300, 64);
    h.classes[0].clear_events();
    let p = protect(&mut h, 0, 0x300, 64);
    unprotect(&mut h, p, UnprotectFlags::DELETED);
    assert_eq!((clears(&h, 0), frees(&h, 0)), (0, 1));
    assert!(!h.cache.contains(0x300));
    // Deleting with DIRTIED still never writes.
    let p = protect(&mut h, 0, 0x200, 64);
    unprotect(&mut h, p, UnprotectFlags::DELETED | UnprotectFlags::DIRTIED);
    assert!(h.writes().is_empty());
    assert_eq!(h.cache.totals().index_len, 0);
}

/// MDC-052: DELETED | FREE_FILE_SPACE frees [addr, size), or [addr, get_fsf_size) when the class
/// says so.
#[test]
fn mdc_052_deleted_frees_file_space() {
    let mut h = harness(2, fixed(64 * KIB, 0.0));
    h.insert(0, 0x100, 64);
    let p = protect(&mut h, 0, 0x100, 64);
    unprotect(
        &mut h,
        p,
        UnprotectFlags::DELETED | UnprotectFlags::FREE_FILE_SPACE,
    );
    assert_eq!(h.cache.ctx().frees, vec![(0x100, 64)]);
    assert!(!h.cache.contains(0x100));

    h.classes[1].knobs().fsf_size = Some(4096);
    h.touch(1, 0x100, 64);
    let p = protect(&mut h, 1, 0x100, 64);
    unprotect(
        &mut h,
        p,
        UnprotectFlags::DELETED | UnprotectFlags::FREE_FILE_SPACE,
    );
    assert_eq!(h.cache.ctx().frees, vec![(0x100, 64), (0x100, 4096)]);
    assert_eq!(h.classes[1].count(|e| *e == Event::GetFsfSize), 1);
    // DELETED alone frees nothing.
    h.insert(0, 0x200, 64);
    let p = protect(&mut h, 0, 0x200, 64);
    unprotect(&mut h, p, UnprotectFlags::DELETED);
    assert_eq!(h.cache.ctx().frees.len(), 2);
}

/// MDC-052 / E-26: freeing file space of an entry in temporary file space (at or past the end of
/// allocation) is an error, at unprotect and at expunge; the entry stays.
#[test]
fn mdc_052_e26_free_space_of_temporary_entry_is_error() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.insert(0, 0x3000, 64);
    h.insert(0, 0x3100, 64);
    h.cache.ctx_mut().eoa = 0x2000;
    let r = h.cache.expunge(0, 0x3100, ExpungeFlags::FREE_FILE_SPACE);
    assert!(is_wrong_state(&r), "{r:?}");
    assert!(h.cache.contains(0x3100));

    let p = protect(&mut h, 0, 0x3000, 64);
    let r = h
        .cache
        .unprotect(p, UnprotectFlags::DELETED | UnprotectFlags::FREE_FILE_SPACE);
    assert!(is_wrong_state(&r), "{r:?}");
    assert!(h.cache.contains(0x3000));
    assert!(h.cache.ctx().frees.is_empty());
    assert_eq!(frees(&h, 0), 0);
    assert_eq!(clears(&h, 0), 0);
    // Without FREE_FILE_SPACE a temporary entry may be discarded.
    h.cache.expunge(0, 0x3100, ExpungeFlags::NONE).unwrap();
    assert!(!h.cache.contains(0x3100));
    assert!(h.cache.ctx().frees.is_empty());
}

/// MDC-053: DELETED | TAKE_OWNERSHIP hands the object back: no clear, no free_icr, not cached.
#[test]
fn mdc_053_take_ownership() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.cache
        .insert(0, 0x100, MockEntry::filled(64, 0x42), InsertFlags::NONE)
        .unwrap();
    h.classes[0].clear_events();
    let p = protect(&mut h, 0, 0x100, 64);
    let icr = h
        .cache
        .unprotect(p, UnprotectFlags::DELETED | UnprotectFlags::TAKE_OWNERSHIP)
        .unwrap();
    assert_eq!(icr, Some(MockEntry::filled(64, 0x42)));
    assert_eq!((clears(&h, 0), frees(&h, 0)), (0, 0));
    assert!(!h.cache.contains(0x100));
    let t = h.cache.totals();
    assert_eq!((t.index_len, t.slist_len, t.dirty_size), (0, 0, 0));
    assert!(h.writes().is_empty());
}

/// MDC-054 / E-24: FREE_FILE_SPACE or TAKE_OWNERSHIP without DELETED, or both together, are
/// invalid flag combinations; the entry is neither changed nor removed.
#[test]
fn mdc_054_e24_flag_combinations() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    let combos = [
        UnprotectFlags::FREE_FILE_SPACE,
        UnprotectFlags::TAKE_OWNERSHIP,
        UnprotectFlags::DELETED | UnprotectFlags::FREE_FILE_SPACE | UnprotectFlags::TAKE_OWNERSHIP,
    ];
    for (i, flags) in combos.into_iter().enumerate() {
        let addr = 0x100 * (i as u64 + 1);
        h.insert(0, addr, 64);
        let p = protect(&mut h, 0, addr, 64);
        let r = h.cache.unprotect(p, flags);
        assert!(is_invalid_flags(&r), "{flags:?}: {r:?}");
        assert!(st(&mut h, addr).protected, "{flags:?}");
    }
    assert_eq!(h.cache.totals().index_len, 3);
    assert!(h.cache.ctx().frees.is_empty());
    assert_eq!(frees(&h, 0), 0);
}

/// MDC-055 / E-25: DELETED on a pinned entry needs UNPIN; deleting a flush-dependency parent
/// with children, or a linked child, is an error.
#[test]
fn mdc_055_e25_deleting_pinned_or_linked_entries() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    insert_flags(&mut h, 0, 0x100, 64, InsertFlags::PIN);
    let p = protect(&mut h, 0, 0x100, 64);
    let r = h.cache.unprotect(p, UnprotectFlags::DELETED);
    assert!(is_wrong_state(&r), "{r:?}");
    assert!(h.cache.contains(0x100));

    insert_flags(&mut h, 0, 0x200, 64, InsertFlags::PIN);
    let p = protect(&mut h, 0, 0x200, 64);
    unprotect(&mut h, p, UnprotectFlags::DELETED | UnprotectFlags::UNPIN);
    assert!(!h.cache.contains(0x200));
    assert_eq!(frees(&h, 0), 1);

    // Parent 0x300 (pinned) with child 0x400.
    insert_flags(&mut h, 0, 0x300, 64, InsertFlags::PIN);
    h.insert(0, 0x400, 64);
    h.cache.create_flush_dependency(0x300, 0x400).unwrap();
    let p = protect(&mut h, 0, 0x400, 64);
    let r = h.cache.unprotect(p, UnprotectFlags::DELETED);
    assert!(is_wrong_state(&r), "child: {r:?}");
    let p = protect(&mut h, 0, 0x300, 64);
    let r = h
        .cache
        .unprotect(p, UnprotectFlags::DELETED | UnprotectFlags::UNPIN);
    assert!(is_wrong_state(&r), "parent: {r:?}");
    assert!(h.cache.contains(0x300) && h.cache.contains(0x400));
    assert_eq!(h.cache.flush_dependency_parents(0x400), vec![0x300]);
    assert!(
        st(&mut h, 0x300).pinned_by_client,
        "the failed UNPIN did not unpin"
    );
    assert_eq!(frees(&h, 0), 1);
}

/// MDC-056: a clean-list notice for a protected entry is applied at unprotect: without DIRTIED the
/// entry is cleared without a write; with DIRTIED it stays dirty.
#[test]
fn mdc_056_clear_on_unprotect() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.insert(0, 0x100, 64);
    h.insert(0, 0x200, 64);
    let p = protect(&mut h, 0, 0x100, 64);
    h.cache.apply_clean_list(&[0x100]).unwrap();
    assert!(st(&mut h, 0x100).dirty, "still dirty while protected");
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert!(!st(&mut h, 0x100).dirty);
    assert_eq!(clears(&h, 0), 1);
    assert_eq!(class_stats(&h, 0).clears, 1);
    assert_eq!(h.cache.dirty_addrs(), vec![0x200]);

    let p = protect(&mut h, 0, 0x200, 64);
    h.cache.apply_clean_list(&[0x200]).unwrap();
    unprotect(&mut h, p, UnprotectFlags::DIRTIED);
    assert!(st(&mut h, 0x200).dirty);
    assert_eq!(clears(&h, 0), 1);
    // The notice does not outlive the protection.
    let p = protect(&mut h, 0, 0x200, 64);
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert!(st(&mut h, 0x200).dirty);
    assert!(h.writes().is_empty());
}

// ----- §3.7 pinning -----

/// MDC-057 / E-27: only a protected, not client-pinned entry can be pinned; it goes to the pinned
/// list at unprotect.
#[test]
fn mdc_057_e27_pin_protected() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.touch(0, 0x100, 64);
    assert!(is_wrong_state(&h.cache.pin_protected(0x100)));
    assert!(matches!(
        h.cache.pin_protected(0x900),
        Err(CacheError::NotCached { addr: 0x900 })
    ));
    assert!(!st(&mut h, 0x100).pinned_by_client);

    let p = protect(&mut h, 0, 0x100, 64);
    h.cache.pin_protected(0x100).unwrap();
    assert!(st(&mut h, 0x100).pinned_by_client);
    assert!(is_wrong_state(&h.cache.pin_protected(0x100)));
    assert_eq!(h.cache.totals().pel_len, 0, "still on the protected list");
    unprotect(&mut h, p, UnprotectFlags::NONE);
    let t = h.cache.totals();
    assert_eq!((t.pel_len, t.lru_len, t.pl_len), (1, 0, 0));
    assert_eq!(class_stats(&h, 0).pins, 1);
}

/// MDC-058 / E-28: unpin of an unprotected pinned entry puts it at the LRU head; unpin of a
/// protected entry clears only the pin; unpin of an unpinned entry is an error.
#[test]
fn mdc_058_e28_unpin() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.touch(0, 0x200, 64);
    insert_flags(&mut h, 0, 0x100, 64, InsertFlags::PIN);
    let lru0 = h.cache.totals().lru_len;
    h.cache.unpin(0x100).unwrap();
    let t = h.cache.totals();
    assert_eq!((t.lru_len, t.pel_len), (lru0 + 1, 0));
    assert_eq!(h.cache.lru_addrs()[0], 0x100);
    assert!(is_wrong_state(&h.cache.unpin(0x100)));
    assert!(is_wrong_state(&h.cache.unpin(0x200)));

    // Unpinning a protected entry is not an error; it is released at unprotect.
    insert_flags(&mut h, 0, 0x300, 64, InsertFlags::PIN);
    let p = protect(&mut h, 0, 0x300, 64);
    h.cache.unpin(0x300).unwrap();
    let s = st(&mut h, 0x300);
    assert!(s.protected && !s.pinned_by_client);
    assert_eq!(h.cache.totals().pl_len, 1);
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert_eq!(h.cache.totals().pel_len, 0);
    assert_eq!(h.cache.lru_addrs()[0], 0x300);
}

/// MDC-059: the replacement policy never writes or evicts a pinned entry; only a cache flush
/// writes it (once), and it stays pinned and resident.
#[test]
fn mdc_059_pinned_entry_survives_eviction_pressure() {
    let mut h = harness(1, fixed(2 * KIB, 0.5));
    insert_flags(&mut h, 0, 0x10_0000, 256, InsertFlags::PIN);
    for i in 0..40u64 {
        h.insert(0, 0x1000 * (i + 1), 256);
        h.touch(0, 0x8_0000 + 0x1000 * i, 256);
    }
    let writes = h.writes();
    assert!(
        writes.len() > 10,
        "make-space had to write: {}",
        writes.len()
    );
    assert!(!writes.contains(&0x10_0000));
    assert!(h.cache.stats().total_evictions > 40);
    let s = st(&mut h, 0x10_0000);
    assert!(s.dirty && s.pinned_by_client);

    // The client may modify the pinned entry at any time and report it.
    h.cache.pinned_icr_mut(0x10_0000).unwrap().fill = 0x3C;
    h.cache.mark_dirty(0x10_0000).unwrap();

    h.clear_io();
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes().iter().filter(|&&a| a == 0x10_0000).count(), 1);
    let s = st(&mut h, 0x10_0000);
    assert!(!s.dirty && s.pinned_by_client);
    assert_eq!(h.cache.totals().pel_len, 1);
    assert_eq!(class_stats(&h, 0).pinned_flushes, 1);
    let mut buf = [0u8; 256];
    h.storage.read_at(0x10_0000, &mut buf).unwrap();
    assert_eq!(buf, [0x3C; 256]);
}

/// MDC-060: a client pin and a dependency (cache) pin are independent; the entry is pinned while
/// either holds.
#[test]
fn mdc_060_client_and_cache_pins() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    insert_flags(&mut h, 0, 0x100, 64, InsertFlags::PIN);
    h.insert(0, 0x200, 64);
    h.cache.create_flush_dependency(0x100, 0x200).unwrap();
    let s = st(&mut h, 0x100);
    assert!(s.pinned_by_client && s.pinned_by_cache);

    h.cache.unpin(0x100).unwrap();
    let s = st(&mut h, 0x100);
    assert!(!s.pinned_by_client && s.pinned_by_cache);
    assert_eq!(h.cache.totals().pel_len, 1);
    assert!(!h.cache.lru_addrs().contains(&0x100));
    // Still unevictable.
    assert!(is_wrong_state(&h.cache.expunge(
        0,
        0x100,
        ExpungeFlags::NONE
    )));

    h.cache.destroy_flush_dependency(0x100, 0x200).unwrap();
    let s = st(&mut h, 0x100);
    assert!(!s.pinned_by_client && !s.pinned_by_cache);
    assert_eq!(h.cache.totals().pel_len, 0);
    assert_eq!(h.cache.lru_addrs()[0], 0x100);
}

// ----- §3.8 mark dirty/clean, resize, move, expunge -----

/// MDC-061 / E-29 / E-22: mark-dirty of a pinned clean entry dirties it at once and counts a dirty
/// pin; on an entry that is neither pinned nor protected, or protected read-only, it is an error.
#[test]
fn mdc_061_e22_e29_mark_dirty() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.touch(0, 0x100, 64);
    let p = protect(&mut h, 0, 0x100, 64);
    unprotect(&mut h, p, UnprotectFlags::PIN);
    let t0 = h.cache.totals();
    h.cache.mark_dirty(0x100).unwrap();
    let t = h.cache.totals();
    assert_eq!(t.dirty_size, t0.dirty_size + 64);
    assert_eq!(t.slist_len, t0.slist_len + 1);
    assert!(st(&mut h, 0x100).dirty);
    assert_eq!(class_stats(&h, 0).dirty_pins, 1);

    h.touch(0, 0x200, 64);
    assert!(is_wrong_state(&h.cache.mark_dirty(0x200)));
    assert!(!st(&mut h, 0x200).dirty);
    assert!(matches!(
        h.cache.mark_dirty(0x900),
        Err(CacheError::NotCached { addr: 0x900 })
    ));

    let p = protect_ro(&mut h, 0, 0x200, 64);
    assert!(is_wrong_state(&h.cache.mark_dirty(0x200)));
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert!(!st(&mut h, 0x200).dirty);
    assert_eq!(class_stats(&h, 0).dirty_pins, 1);
}

/// MDC-062: mark-clean of a dirty entry: no write, one clear call, slist shrinks, the entry moves to
/// the clean LRU, the flush marker is reset, and `clears` (or `pinned_clears`) is counted.
#[test]
fn mdc_062_mark_clean() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    insert_flags(&mut h, 0, 0x100, 64, InsertFlags::SET_FLUSH_MARKER);
    h.insert(0, 0x200, 64);
    let t0 = h.cache.totals();
    h.cache.mark_clean(0x100).unwrap();
    assert!(h.writes().is_empty());
    assert_eq!(
        h.classes[0].count(|e| *e
            == Event::Clear {
                about_to_destroy: false
            }),
        1
    );
    let t = h.cache.totals();
    assert_eq!(t.slist_len, t0.slist_len - 1);
    assert_eq!(t.dirty_size, 64);
    assert_eq!(t.clean_size, 64);
    assert_eq!(h.cache.clean_lru_addrs(), vec![0x100]);
    assert_eq!(h.cache.dirty_lru_addrs(), vec![0x200]);
    let s = st(&mut h, 0x100);
    assert!(!s.dirty && !s.flush_marker);
    let cs = class_stats(&h, 0);
    assert_eq!((cs.clears, cs.pinned_clears), (1, 0));
    // A clean entry is left alone.
    h.cache.mark_clean(0x100).unwrap();
    assert_eq!(clears(&h, 0), 1);

    insert_flags(&mut h, 0, 0x300, 64, InsertFlags::PIN);
    h.cache.mark_clean(0x300).unwrap();
    let cs = class_stats(&h, 0);
    assert_eq!((cs.clears, cs.pinned_clears), (2, 1));
    assert!(!st(&mut h, 0x300).dirty);
    assert!(h.writes().is_empty());
}

/// MDC-063: growing a pinned entry in a full cache goes over the max by the growth and evicts
/// nothing; totals follow, the entry is dirty with a stale image, and size changes are counted.
#[test]
fn mdc_063_resize_pinned_entry_in_full_cache() {
    let mut h = harness(1, fixed(KIB, 0.0));
    insert_flags(&mut h, 0, 0x10_0000, 100, InsertFlags::PIN);
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert!(!st(&mut h, 0x10_0000).dirty);
    for i in 0..7u64 {
        h.touch(0, 0x1000 * (i + 1), 132);
    }
    assert_eq!(h.cache.size_info().cur_size, KIB);
    let frees0 = frees(&h, 0);

    h.cache.resize(0x10_0000, 300).unwrap();
    let si = h.cache.size_info();
    assert_eq!(si.cur_size, si.max_size + 200);
    assert_eq!(si.cur_num_entries, 8);
    assert_eq!(frees(&h, 0), frees0);
    let t = h.cache.totals();
    assert_eq!((t.pel_size, t.dirty_size, t.slist_size), (300, 300, 300));
    assert_eq!(t.clean_size, 7 * 132);
    let s = st(&mut h, 0x10_0000);
    assert_eq!(s.size, 300);
    assert!(s.dirty && !s.image_up_to_date);
    assert_eq!(class_stats(&h, 0).size_increases, 1);

    h.cache.resize(0x10_0000, 150).unwrap();
    assert_eq!(h.cache.totals().index_size, 7 * 132 + 150);
    assert_eq!(class_stats(&h, 0).size_decreases, 1);

    h.clear_io();
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(
        h.write_ops()
            .iter()
            .map(|r| (r.offset, r.len))
            .collect::<Vec<_>>(),
        vec![(0x10_0000, 150)]
    );
}

/// MDC-063 / E-30: resizing to 0, or an entry that is neither pinned nor protected (or protected
/// read-only), is an error and changes nothing. A read-write protected entry may be resized.
#[test]
fn mdc_063_e30_resize_errors_and_protected_resize() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.touch(0, 0x100, 64);
    insert_flags(&mut h, 0, 0x200, 64, InsertFlags::PIN);
    assert!(matches!(
        h.cache.resize(0x200, 0),
        Err(CacheError::InvalidSize {
            addr: 0x200,
            size: 0
        })
    ));
    assert!(is_wrong_state(&h.cache.resize(0x100, 128)));
    let p = protect_ro(&mut h, 0, 0x100, 64);
    assert!(is_wrong_state(&h.cache.resize(0x100, 128)));
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert_eq!(st(&mut h, 0x100).size, 64);
    assert_eq!(st(&mut h, 0x200).size, 64);

    let p = protect(&mut h, 0, 0x100, 64);
    h.cache.resize(0x100, 128).unwrap();
    assert_eq!(h.cache.totals().pl_size, 128);
    unprotect(&mut h, p, UnprotectFlags::NONE);
    let s = st(&mut h, 0x100);
    assert_eq!(s.size, 128);
    assert!(s.dirty);
    assert_eq!(h.cache.totals().index_size, 192);
}

/// MDC-063: growth runs the flash-increase check with x = the bytes added.
#[test]
fn mdc_063_growth_runs_flash_check() {
    let mut h = harness(1, flash_only());
    insert_flags(&mut h, 0, 0x100_0000, KIB, InsertFlags::PIN);
    for i in 0..63u64 {
        h.touch(0, 0x1000 * (i + 1), KIB);
    }
    assert_eq!(h.cache.size_info().cur_size, 64 * KIB);
    // Growth of 20 000 bytes > 16 KiB threshold, no free space: grow the max by 20 000.
    h.cache.resize(0x100_0000, KIB + 20_000).unwrap();
    let si = h.cache.size_info();
    assert_eq!(si.max_size, 64 * KIB + 20_000);
    assert_eq!(si.cur_size, 64 * KIB + 20_000);
    assert_eq!(h.cache.stats().flash_increases, 1);
    // A growth below the threshold does not flash.
    h.cache.resize(0x100_0000, KIB + 21_000).unwrap();
    assert_eq!(h.cache.stats().flash_increases, 1);
}

/// MDC-064: move of a clean entry: the old address is gone, the new one is dirty, a flush writes
/// only the new address, and `moves` is counted.
#[test]
fn mdc_064_move_clean_entry() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.insert(0, 0x100, 64);
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert!(!st(&mut h, 0x100).dirty);
    h.clear_io();

    assert!(h.cache.move_entry(0, 0x100, 0x900).unwrap());
    assert!(!h.cache.contains(0x100));
    assert!(h.cache.status(0x100).is_none());
    let s = st(&mut h, 0x900);
    assert!(s.dirty);
    assert_eq!(s.size, 64);
    assert_eq!(h.cache.dirty_addrs(), vec![0x900]);
    assert_eq!(class_stats(&h, 0).moves, 1);
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes(), vec![0x900]);
    // A protect at the new address is a hit.
    h.touch(0, 0x900, 64);
    assert!(h.read_ops().is_empty());
}

/// MDC-064: a dirty entry is re-keyed in the slist; flush marker and flush-last are kept;
/// pinned entries may be moved and stay pinned.
#[test]
fn mdc_064_q04_move_keeps_marks_and_pins() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    insert_flags(
        &mut h,
        0,
        0x100,
        64,
        InsertFlags::SET_FLUSH_MARKER | InsertFlags::FLUSH_LAST,
    );
    insert_flags(&mut h, 0, 0x200, 64, InsertFlags::PIN);
    h.insert(0, 0x300, 64);
    assert!(h.cache.move_entry(0, 0x100, 0x1000).unwrap());
    let s = st(&mut h, 0x1000);
    assert!(s.dirty && s.flush_marker && s.flush_last);
    assert_eq!(h.cache.totals().num_last_entries, 1);
    assert!(h.cache.move_entry(0, 0x200, 0x2000).unwrap());
    assert!(st(&mut h, 0x2000).pinned_by_client);
    assert_eq!(h.cache.totals().pel_len, 1);
    assert_eq!(h.cache.dirty_addrs(), vec![0x300, 0x1000, 0x2000]);
    h.cache.flush(FlushFlags::NONE).unwrap();
    // Flush-last entries are written after everything else.
    assert_eq!(h.writes(), vec![0x300, 0x2000, 0x1000]);
}

/// MDC-064: a read-write protected entry may be moved; its handle names the entry, not the
/// address, so it can still be used and unprotected (and DELETED | FREE_FILE_SPACE frees the new
/// address).
#[test]
fn mdc_064_move_protected_entry_then_unprotect() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.touch(0, 0x100, 64);
    let p = protect(&mut h, 0, 0x100, 64);
    assert!(h.cache.move_entry(0, 0x100, 0x900).unwrap());
    assert!(h.cache.handle_is_live(&p));
    assert_eq!(h.cache.icr(&p).unwrap().size, 64);
    h.cache.icr_mut(&p).unwrap().fill = 0x66;
    unprotect(&mut h, p, UnprotectFlags::NONE);
    let s = st(&mut h, 0x900);
    assert!(!s.protected && s.dirty);
    assert_eq!(h.cache.lru_addrs(), vec![0x900]);
    assert_eq!(h.cache.totals().pl_len, 0);
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes(), vec![0x900]);
    let mut buf = [0u8; 64];
    h.storage.read_at(0x900, &mut buf).unwrap();
    assert_eq!(buf, [0x66; 64]);

    // Deleting a moved entry through its handle removes the entry at its new address.
    let p = protect(&mut h, 0, 0x900, 64);
    assert!(h.cache.move_entry(0, 0x900, 0xA00).unwrap());
    unprotect(
        &mut h,
        p,
        UnprotectFlags::DELETED | UnprotectFlags::FREE_FILE_SPACE,
    );
    assert_eq!(h.cache.totals().index_len, 0);
    assert_eq!(h.cache.ctx().frees, vec![(0xA00, 64)]);
}

/// MDC-064 / E-31: moving onto an address in use, or an entry protected read-only, is an error;
/// moving an address that is not cached returns `Ok(false)`; a class mismatch is an error.
#[test]
fn mdc_064_e31_move_errors() {
    let mut h = harness(2, fixed(64 * KIB, 0.0));
    h.touch(0, 0x100, 64);
    h.touch(0, 0x200, 64);
    let before = h.cache.totals();
    assert!(matches!(
        h.cache.move_entry(0, 0x100, 0x200),
        Err(CacheError::AddressInUse { addr: 0x200 })
    ));
    let p = protect_ro(&mut h, 0, 0x100, 64);
    assert!(is_wrong_state(&h.cache.move_entry(0, 0x100, 0x900)));
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert!(matches!(
        h.cache.move_entry(1, 0x100, 0x900),
        Err(CacheError::ClassMismatch { addr: 0x100, .. })
    ));
    assert!(!h.cache.move_entry(0, 0x5000, 0x900).unwrap());
    assert_eq!(h.cache.totals(), before);
    assert_eq!(h.cache.cached_addrs(), vec![0x100, 0x200]);
    assert!(!st(&mut h, 0x100).dirty);
    assert_eq!(class_stats(&h, 0).moves, 0);
}

/// MDC-065: expunge of a dirty entry: no write, one clear, one free_icr, the entry is gone;
/// FREE_FILE_SPACE passes through to the file.
#[test]
fn mdc_065_expunge() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.insert(0, 0x100, 64);
    h.insert(0, 0x200, 64);
    h.classes[0].clear_events();
    h.cache.expunge(0, 0x100, ExpungeFlags::NONE).unwrap();
    assert!(h.writes().is_empty());
    assert_eq!(
        h.classes[0].count(|e| *e
            == Event::Clear {
                about_to_destroy: true
            }),
        1
    );
    assert_eq!(frees(&h, 0), 1);
    assert!(!h.cache.contains(0x100));
    let t = h.cache.totals();
    assert_eq!((t.index_len, t.slist_len), (1, 1));
    assert!(h.cache.ctx().frees.is_empty());

    h.cache
        .expunge(0, 0x200, ExpungeFlags::FREE_FILE_SPACE)
        .unwrap();
    assert_eq!(h.cache.ctx().frees, vec![(0x200, 64)]);
    assert_eq!(h.cache.totals().index_len, 0);
    assert!(h.writes().is_empty());
}

/// MDC-065 / E-32: expunging a protected or pinned entry is an error; an address that is not
/// cached is no error and changes nothing; a class mismatch is an error.
#[test]
fn mdc_065_e32_expunge_errors() {
    let mut h = harness(2, fixed(64 * KIB, 0.0));
    h.insert(0, 0x100, 64);
    insert_flags(&mut h, 0, 0x200, 64, InsertFlags::PIN);
    let p = protect(&mut h, 0, 0x100, 64);
    let before = h.cache.totals();
    assert!(is_wrong_state(&h.cache.expunge(
        0,
        0x100,
        ExpungeFlags::NONE
    )));
    assert!(is_wrong_state(&h.cache.expunge(
        0,
        0x200,
        ExpungeFlags::NONE
    )));
    h.cache.expunge(0, 0x5000, ExpungeFlags::NONE).unwrap();
    h.cache
        .expunge(0, 0x5000, ExpungeFlags::FREE_FILE_SPACE)
        .unwrap();
    assert_eq!(h.cache.totals(), before);
    assert!(h.cache.ctx().frees.is_empty());
    assert_eq!((clears(&h, 0), frees(&h, 0)), (0, 0));
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert!(matches!(
        h.cache.expunge(1, 0x100, ExpungeFlags::NONE),
        Err(CacheError::ClassMismatch { addr: 0x100, .. })
    ));
    assert!(h.cache.contains(0x100) && h.cache.contains(0x200));
}

/// MDC-066: freeing one contiguous allocation shared by a header (64 B, fsf 4096) and page
/// entries: expunge the pages without FREE_FILE_SPACE, then the header with it: exactly one free of
/// the whole block.
#[test]
fn mdc_066_free_shared_allocation_once() {
    let mut h = harness(2, fixed(64 * KIB, 0.0));
    h.classes[0].knobs().fsf_size = Some(4096);
    h.insert(0, 0x1000, 64);
    for i in 1..4u64 {
        h.insert(1, 0x1000 + 64 * i, 64);
    }
    for i in 1..4u64 {
        h.cache
            .expunge(1, 0x1000 + 64 * i, ExpungeFlags::NONE)
            .unwrap();
    }
    assert!(h.cache.ctx().frees.is_empty());
    h.cache
        .expunge(0, 0x1000, ExpungeFlags::FREE_FILE_SPACE)
        .unwrap();
    assert_eq!(h.cache.ctx().frees, vec![(0x1000, 4096)]);
    assert_eq!(h.classes[1].count(|e| *e == Event::GetFsfSize), 0);
    assert_eq!(h.cache.totals().index_len, 0);
    assert!(h.writes().is_empty());

    // The same with the header deleted at unprotect.
    h.cache.ctx_mut().frees.clear();
    h.insert(0, 0x2000, 64);
    h.insert(1, 0x2040, 64);
    h.cache.expunge(1, 0x2040, ExpungeFlags::NONE).unwrap();
    let p = protect(&mut h, 0, 0x2000, 64);
    unprotect(
        &mut h,
        p,
        UnprotectFlags::DELETED | UnprotectFlags::FREE_FILE_SPACE,
    );
    assert_eq!(h.cache.ctx().frees, vec![(0x2000, 4096)]);
}

type Outcomes = Arc<Mutex<Vec<(&'static str, bool)>>>;

/// Try protect, move, resize, expunge and mark-dirty on `addr` from inside one of its own
/// callbacks; record whether each failed with `EntryBusy { addr }`.
fn poke_own_entry(cache: &mut MetadataCache<Mock>, addr: u64, out: &Outcomes) {
    let busy = |r: Result<()>| matches!(r, Err(CacheError::EntryBusy { addr: a }) if a == addr);
    let protect = cache.protect(0, addr, &64, ProtectFlags::NONE).map(|_| ());
    let mv = cache.move_entry(0, addr, 0xF000).map(|_| ());
    let resize = cache.resize(addr, 128);
    let expunge = cache.expunge(0, addr, ExpungeFlags::NONE);
    let mark = cache.mark_dirty(addr);
    out.lock().unwrap().extend([
        ("protect", busy(protect)),
        ("move", busy(mv)),
        ("resize", busy(resize)),
        ("expunge", busy(expunge)),
        ("mark_dirty", busy(mark)),
    ]);
}

/// E-17: protect, move, resize, expunge (and mark-dirty) of an entry from inside its own
/// serialize (being written) or BeforeEvict notify (being destroyed) fail with `EntryBusy`, and
/// the outer operation completes normally.
#[test]
fn e17_operations_on_entry_in_its_own_callback_are_busy() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    let out: Outcomes = Arc::default();
    let o = out.clone();
    h.classes[0].knobs().serialize = Some(Box::new(move |cache, _icr, _img| {
        poke_own_entry(cache, 0x100, &o);
        Ok(())
    }));
    insert_flags(&mut h, 0, 0x100, 64, InsertFlags::PIN);
    h.cache.flush(FlushFlags::NONE).unwrap();
    let got = std::mem::take(&mut *out.lock().unwrap());
    assert_eq!(got.len(), 5);
    assert!(got.iter().all(|(_, busy)| *busy), "{got:?}");
    assert_eq!(h.writes(), vec![0x100]);
    let s = st(&mut h, 0x100);
    assert!(!s.dirty && !s.flush_in_progress && s.size == 64);
    assert!(h.cache.contains(0x100) && !h.cache.contains(0xF000));
    h.classes[0].knobs().serialize = None;

    let o = out.clone();
    h.classes[0].knobs().notify = Some(Box::new(move |cache, action, addr, _icr| {
        if action == NotifyAction::BeforeEvict {
            poke_own_entry(cache, addr, &o);
        }
        Ok(())
    }));
    h.cache.unpin(0x100).unwrap();
    h.cache.expunge(0, 0x100, ExpungeFlags::NONE).unwrap();
    let got = std::mem::take(&mut *out.lock().unwrap());
    assert_eq!(got.len(), 5);
    assert!(got.iter().all(|(_, busy)| *busy), "{got:?}");
    assert_eq!(h.cache.totals().index_len, 0);
    assert!(!h.cache.contains(0xF000));
    h.check();
}

/// Q-35, MDC-042: on the speculative path where only decoding tells the size, the checksum is
/// verified on the image of the real size (after the re-read), not on the guessed prefix; a bad
/// checksum there re-reads the whole entry and discards the decoded object.
#[test]
fn q35_speculative_checksum_covers_the_final_image() {
    let mut h = harness_with_flags(&[ClassFlags::SPECULATIVE_LOAD], fixed(64 * KIB, 0.0));
    h.classes[0].knobs().real_sizes = vec![200];
    h.touch(0, 0x100, 64);
    assert_eq!(reads(&h), vec![(0x100, 64), (0x100, 200)]);
    let checked: Vec<usize> = h.classes[0]
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::VerifyChecksum { len } => Some(*len),
            _ => None,
        })
        .collect();
    assert_eq!(
        checked,
        vec![200],
        "one verification, of the full 200-byte image"
    );
    assert_eq!(st(&mut h, 0x100).size, 200);

    // A bad checksum on the final image: the whole load repeats once, then succeeds.
    h.classes[0].clear_events();
    h.clear_io();
    h.classes[0].knobs().bad_checksums = 1;
    h.touch(0, 0x1000, 64);
    assert_eq!(
        reads(&h),
        vec![(0x1000, 64), (0x1000, 200), (0x1000, 64), (0x1000, 200)]
    );
    let frees = h.classes[0].count(|e| *e == Event::FreeIcr);
    assert_eq!(
        frees, 3,
        "two discarded guesses and the object of the bad image"
    );
    assert_eq!(h.cache.stats().checksum_retries, 1);
    h.check();
}

/// A detached load (run without the cache, as a caller that locks the cache runs it outside its
/// lock) protected with `protect_loaded` counts and reads exactly as `protect` on a miss
/// (MDC-030, MDC-031, MDC-036): one miss, one read of the entry, the entry clean and resident.
#[test]
fn mdc_036_detached_load_counts_as_a_miss() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    h.storage.write_at(0x100, &[0x42; 64]).unwrap();
    let d = h.cache.detach_load(0, 0x100).unwrap();
    assert_eq!(d.addr(), 0x100);
    assert!(!h.cache.contains(0x100), "detaching loads nothing");
    let loaded = d.run(&64).unwrap();
    assert_eq!(reads(&h), vec![(0x100, 64)]);
    let p = h
        .cache
        .protect_loaded(loaded, &64, ProtectFlags::READ_ONLY)
        .unwrap();
    assert_eq!(h.cache.icr(&p).unwrap().size, 64);
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert_eq!(reads(&h).len(), 1, "installing the copy reads nothing");
    let cs = class_stats(&h, 0);
    assert_eq!((cs.hits, cs.misses), (0, 1));
    assert_eq!(h.cache.hit_rate_counters(), (1, 0));
    assert_eq!((h.cache.stats().reads, h.cache.stats().bytes_read), (1, 64));
    let s = st(&mut h, 0x100);
    assert!(!s.dirty && !s.protected);
    h.check();
}

/// First writer wins: an entry that reached the cache while a detached load of it ran is the
/// one protected (a hit, MDC-031); the detached copy is dropped.
#[test]
fn mdc_031_detached_copy_loses_to_a_cached_entry() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    let loaded = h.cache.detach_load(0, 0x100).unwrap().run(&64).unwrap();
    // Meanwhile the entry is created by another caller.
    h.cache
        .insert(0, 0x100, MockEntry::filled(64, 0x77), InsertFlags::NONE)
        .unwrap();
    let p = h
        .cache
        .protect_loaded(loaded, &64, ProtectFlags::NONE)
        .unwrap();
    assert_eq!(h.cache.icr(&p).unwrap().fill, 0x77, "the inserted entry");
    unprotect(&mut h, p, UnprotectFlags::NONE);
    let cs = class_stats(&h, 0);
    assert_eq!((cs.hits, cs.misses), (1, 0));
    assert!(st(&mut h, 0x100).dirty, "still the inserted, dirty entry");
    h.check();
}

/// A detached copy older than an image the cache wrote since may be stale: it is not installed,
/// the entry is loaded again under the caller's hold on the cache (still one miss).
#[test]
fn mdc_036_detached_copy_older_than_a_write_is_loaded_again() {
    let mut h = harness(1, fixed(64 * KIB, 0.0));
    let d = h.cache.detach_load(0, 0x100).unwrap();
    let loaded = d.run(&64).unwrap();
    // Another entry is written meanwhile.
    h.insert(0, 0x400, 32);
    h.cache.flush(FlushFlags::NONE).unwrap();
    h.clear_io();
    let p = h
        .cache
        .protect_loaded(loaded, &64, ProtectFlags::NONE)
        .unwrap();
    unprotect(&mut h, p, UnprotectFlags::NONE);
    assert_eq!(reads(&h), vec![(0x100, 64)], "loaded again");
    let cs = class_stats(&h, 0);
    assert_eq!(cs.misses, 1);
    assert_eq!(h.cache.stats().reads, 2, "both reads are counted");
    h.check();
}

/// A copy loaded for one cache is refused by another.
#[test]
fn detached_copies_belong_to_their_cache() {
    let mut a = harness(1, fixed(64 * KIB, 0.0));
    let b = harness(1, fixed(64 * KIB, 0.0));
    let loaded = b.cache.detach_load(0, 0x100).unwrap().run(&64).unwrap();
    let r = a.cache.protect_loaded(loaded, &64, ProtectFlags::NONE);
    assert!(
        matches!(r, Err(CacheError::InvalidArgument { .. })),
        "{r:?}"
    );
    assert!(!a.cache.contains(0x100));
}

/// Two caches with the same entries (0x1000..=0x6000 of class 0, the third pinned when `pin`,
/// 0x9000 of class 1), 0x3000 read in the first by a read-only protect and its unprotect, in
/// the second by `read_hit`: both reads see the same object.
fn hit_both_ways(config: CacheConfig, pin: bool) -> (Harness, Harness) {
    let build = || {
        let mut h = harness(2, config.clone());
        for i in 0..6u64 {
            let flags = if pin && i == 2 {
                InsertFlags::PIN
            } else {
                InsertFlags::NONE
            };
            insert_flags(&mut h, 0, 0x1000 * (i + 1), 64, flags);
        }
        h.insert(1, 0x9000, 64);
        h
    };
    let (mut a, mut b) = (build(), build());
    let handle = protect_ro(&mut a, 0, 0x3000, 64);
    let via_protect = a.cache.icr(&handle).unwrap().clone();
    unprotect(&mut a, handle, UnprotectFlags::NONE);
    let via_hit = b
        .cache
        .read_hit(0, 0x3000, |e: &MockEntry| e.clone())
        .unwrap()
        .expect("a cached, unprotected entry is a plain hit");
    assert_eq!(via_hit, via_protect);
    (a, b)
}

/// MDC-030, MDC-031, MDC-032: `read_hit` on a cached entry leaves the cache as a read-only
/// protect and its unprotect do: the LRU order, the entry's status, the hit and access
/// counters and the class statistics (also for a pinned entry, which stays on its list).
#[test]
fn read_hit_is_a_read_only_protect_and_unprotect() {
    for pin in [false, true] {
        let (mut a, mut b) = hit_both_ways(fixed(64 * KIB, 0.0), pin);
        assert_eq!(a.cache.lru_addrs(), b.cache.lru_addrs(), "pin {pin}");
        if !pin {
            assert_eq!(b.cache.lru_addrs().first(), Some(&0x3000));
        }
        assert_eq!(st(&mut a, 0x3000), st(&mut b, 0x3000));
        assert!(!st(&mut b, 0x3000).protected);
        assert_eq!(a.cache.hit_rate_counters(), b.cache.hit_rate_counters());
        assert_eq!(b.cache.hit_rate_counters(), (1, 1));
        assert_eq!(class_stats(&a, 0), class_stats(&b, 0));
        assert_eq!(class_stats(&b, 0).hits, 1);
        assert_eq!(class_stats(&b, 0).read_protects, 1);
        a.check();
        b.check();
    }
}

/// `read_hit` is not a hit, and changes nothing, for an entry absent (no load), of another
/// class, or protected; the protect then made reports the class mismatch.
#[test]
fn read_hit_leaves_what_is_not_a_plain_hit_unchanged() {
    let mut h = harness(2, fixed(64 * KIB, 0.0));
    h.insert(0, 0x1000, 64);
    h.insert(1, 0x2000, 64);
    h.clear_io();
    let before = (h.cache.hit_rate_counters(), h.cache.lru_addrs());
    assert!(h.cache.read_hit(0, 0x5000, |_| ()).unwrap().is_none());
    assert!(reads(&h).is_empty());
    assert!(h.cache.read_hit(0, 0x2000, |_| ()).unwrap().is_none());
    assert!(
        h.cache
            .protect(0, 0x2000, &64, ProtectFlags::READ_ONLY)
            .is_err()
    );
    let held = protect(&mut h, 0, 0x1000, 64);
    let counters = h.cache.hit_rate_counters();
    assert!(h.cache.read_hit(0, 0x1000, |_| ()).unwrap().is_none());
    assert_eq!(h.cache.hit_rate_counters(), counters);
    assert!(st(&mut h, 0x1000).protected);
    unprotect(&mut h, held, UnprotectFlags::NONE);
    assert_eq!(before.1, vec![0x2000, 0x1000]);
    h.check();
}

/// MDC-097 through `read_hit`: an access that ends an epoch (100 accesses) runs the epoch's
/// upkeep as a protect does: the same counters, markers and resize reports as protects and
/// unprotects of the same entries.
#[test]
fn read_hit_ends_epochs_as_protects_do() {
    let config = CacheConfig {
        epoch_length: 100,
        rpt_fcn_enabled: true,
        ..CacheConfig::default_serial()
    };
    let build = || {
        let mut h = harness(1, config.clone());
        for i in 0..10u64 {
            h.insert(0, 0x1000 * (i + 1), 256);
        }
        h
    };
    let (mut a, mut b) = (build(), build());
    for n in 0..250u64 {
        let addr = 0x1000 * (n % 10 + 1);
        h_touch_ro(&mut a, addr);
        assert!(b.cache.read_hit(0, addr, |_| ()).unwrap().is_some());
    }
    assert_eq!(b.cache.epochs_completed(), 2);
    assert_eq!(a.cache.epochs_completed(), b.cache.epochs_completed());
    assert_eq!(a.cache.hit_rate_counters(), b.cache.hit_rate_counters());
    assert_eq!(a.cache.take_resize_reports(), b.cache.take_resize_reports());
    assert_eq!(a.cache.totals(), b.cache.totals());
    assert_eq!(a.cache.lru_addrs(), b.cache.lru_addrs());
    a.check();
    b.check();
}

/// A read-only protect and its unprotect of the class-0 entry at `addr`.
fn h_touch_ro(h: &mut Harness, addr: u64) {
    let handle = protect_ro(h, 0, addr, 256);
    unprotect(h, handle, UnprotectFlags::NONE);
}
