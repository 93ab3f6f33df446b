//! Adaptive resizing (spec §3.14), configuration (§3.15), the monitoring API (§3.16) and statistics,
//! debugging and sanity checks (§3.18): MDC-097 .. MDC-125, MDC-129 .. MDC-136 and the
//! construction / configuration edge cases E-02 .. E-11.
//!
//! Sizes are computed the way `resize.rs` does (`(bytes as f64 * factor) as usize`), so the expected
//! values are exact byte counts.

use crate::common;

use std::sync::{Arc, Mutex};

use common::*;
use h5_io::{MemoryStorage, Storage};
use h5_metacache::*;

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

/// The default serial configuration with the shortest epoch (100 protects) and resize reports on.
fn resize_cfg() -> CacheConfig {
    CacheConfig {
        epoch_length: 100,
        rpt_fcn_enabled: true,
        ..CacheConfig::default_serial()
    }
}

/// Manual size control: every resize mode off, bounds [1 MiB, 8 MiB], the max set to `initial`.
fn manual(initial: usize) -> CacheConfig {
    CacheConfig {
        initial_size: initial,
        min_size: MIB,
        max_size: 8 * MIB,
        incr_mode: IncrMode::Off,
        flash_incr_mode: FlashIncrMode::Off,
        decr_mode: DecrMode::Off,
        ..resize_cfg()
    }
}

/// `n` protect/unprotect pairs of the class-0 entry at `addr` (a load of `size` bytes if absent).
fn touch_n(h: &mut Harness, addr: u64, size: usize, n: usize) {
    for _ in 0..n {
        h.touch(0, addr, size);
    }
}

/// `misses + hits` protects: a miss at `base`, `hits` hits on that entry, then `misses - 1` more
/// misses at `base + i * size`. Every load brings in a clean entry of `size` bytes.
fn run_mix(h: &mut Harness, misses: u64, hits: usize, base: u64, size: usize) {
    h.touch(0, base, size);
    touch_n(h, base, size, hits);
    for i in 1..misses {
        h.touch(0, base + i * size as u64, size);
    }
}

/// Load `n` clean entries of `size` bytes at `base + i * size` (`n` misses).
fn load_n(h: &mut Harness, n: u64, base: u64, size: usize) {
    for i in 0..n {
        h.touch(0, base + i * size as u64, size);
    }
}

/// Insert `n` dirty entries of `size` bytes at `base + i * size` (no accesses, no I/O).
fn insert_n(h: &mut Harness, n: u64, base: u64, size: usize) {
    for i in 0..n {
        h.insert(0, base + i * size as u64, size);
    }
}

/// `bytes × factor` in integer bytes, exactly as the resize code computes it.
fn mul(bytes: usize, factor: f64) -> usize {
    (bytes as f64 * factor) as usize
}

/// The field a `CacheError::Config` names, or `None` for any other error.
fn config_field(err: &CacheError) -> Option<&'static str> {
    match err {
        CacheError::Config(e) => Some(e.field),
        _ => None,
    }
}

/// `cfg` is rejected naming `field`, by `validate` and by `set_config`, and the rejected set leaves
/// the cache's configuration and sizes as they were.
fn assert_rejected(h: &mut Harness, cfg: &CacheConfig, field: &str) {
    assert_eq!(cfg.validate().map_err(|e| e.field), Err(field));
    let before = h.cache.get_config(CACHE_CONFIG_VERSION).unwrap();
    let sizes = h.cache.size_info();
    let flags = h.cache.derived_flags();
    let err = h.cache.set_config(cfg).unwrap_err();
    assert_eq!(config_field(&err), Some(field), "{err:?}");
    assert_eq!(h.cache.get_config(CACHE_CONFIG_VERSION).unwrap(), before);
    assert_eq!(h.cache.size_info(), sizes);
    assert_eq!(h.cache.derived_flags(), flags);
}

/// `cfg` validates, applies, and reads back unchanged (it has no one-shot trace flags set).
fn assert_accepted(h: &mut Harness, cfg: &CacheConfig) {
    assert_eq!(cfg.validate(), Ok(()));
    h.cache.set_config(cfg).unwrap();
    assert_eq!(&h.cache.get_config(CACHE_CONFIG_VERSION).unwrap(), cfg);
}

/// A configuration in which every one of the 30 fields differs from the serial default (the trace
/// one-shots excepted, which the caller sets). Written as a full struct literal, so it stops
/// compiling if a field is added or removed (MDC-107).
fn all_fields_changed(trace_file_name: String) -> CacheConfig {
    CacheConfig {
        version: CACHE_CONFIG_VERSION,
        rpt_fcn_enabled: true,
        open_trace_file: false,
        close_trace_file: false,
        trace_file_name,
        evictions_enabled: true,
        set_initial_size: true,
        initial_size: 3 * MIB,
        min_clean_fraction: 0.2,
        max_size: 64 * MIB,
        min_size: 2 * MIB,
        epoch_length: 1000,
        incr_mode: IncrMode::Threshold,
        lower_hr_threshold: 0.8,
        increment: 1.5,
        apply_max_increment: false,
        max_increment: 8 * MIB,
        flash_incr_mode: FlashIncrMode::AddSpace,
        flash_multiple: 2.0,
        flash_threshold: 0.5,
        decr_mode: DecrMode::Threshold,
        upper_hr_threshold: 0.95,
        decrement: 0.8,
        apply_max_decrement: false,
        max_decrement: 2 * MIB,
        epochs_before_eviction: 5,
        apply_empty_reserve: false,
        empty_reserve: 0.2,
        dirty_bytes_threshold: MIB,
        metadata_write_strategy: MetadataWriteStrategy::Process0Only,
    }
}

/// Build a cache directly through the builder (one plain mock class over fresh memory storage).
fn build(config: Option<CacheConfig>) -> Result<MetadataCache<Mock>, CacheError> {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let classes: Vec<Arc<dyn Class<Mock>>> = vec![MockClass::new(0, "mock-0", ClassFlags::NONE)];
    let mut b = CacheBuilder::new(storage, classes, MockFile::default());
    if let Some(c) = config {
        b = b.config(c);
    }
    b.build()
}

fn marker_count(h: &Harness) -> usize {
    h.cache
        .lru_with_markers()
        .iter()
        .filter(|a| a.is_none())
        .count()
}

// ---------------------------------------------------------------------------------------------
// §3.14 adaptive cache resizing
// ---------------------------------------------------------------------------------------------

/// MDC-097: an epoch is `epoch_length` (100) protects. Right after the 100th protect the hit-rate
/// counters read 0, one report for epoch 1 carries that epoch's hit rate, and the age-out mode of
/// the default configuration has cycled one marker onto the LRU. The counters then count the next
/// epoch.
#[test]
fn mdc_097_epoch_end_resets_counters_reports_and_cycles_markers() {
    let mut h = harness(1, resize_cfg());
    load_n(&mut h, 10, 0x1000, 256);
    touch_n(&mut h, 0x1000, 256, 89);
    assert_eq!(h.cache.hit_rate_counters(), (99, 89));
    assert_eq!(h.cache.epochs_completed(), 0);
    assert_eq!(h.cache.totals().epoch_markers, 0);
    assert!(h.cache.take_resize_reports().is_empty());

    h.touch(0, 0x1000, 256); // the 100th protect (a hit) ends the epoch
    assert_eq!(h.cache.hit_rate_counters(), (0, 0));
    assert_eq!(h.cache.hit_rate(), 0.0);
    assert_eq!(h.cache.epochs_completed(), 1);
    let reports = h.cache.take_resize_reports();
    assert_eq!(reports.len(), 1);
    let r = reports[0];
    assert_eq!(r.epoch, 1);
    assert_eq!(r.outcome, ResizeOutcome::InSpec); // 0.9 is not below 0.9 nor above 0.999
    assert_eq!(r.hit_rate, 0.9);
    assert_eq!((r.old_max_size, r.new_max_size), (2 * MIB, 2 * MIB));
    assert_eq!(r.cur_size, 2560);
    assert_eq!(h.cache.totals().epoch_markers, 1);
    assert_eq!(marker_count(&h), 1);

    touch_n(&mut h, 0x1000, 256, 150);
    assert_eq!(h.cache.epochs_completed(), 2);
    assert_eq!(h.cache.hit_rate_counters(), (50, 50));
    assert_eq!(h.cache.totals().epoch_markers, 2);
    assert_eq!(h.cache.take_resize_reports().len(), 1);
}

/// MDC-097 step 2 / Q-09: the increase runs first and, when it changed the size, the decrease is
/// skipped for that epoch (AgeOut would otherwise shrink the cache to its contents at once); the
/// age-out marker is still cycled. In the next epoch (high hit rate) age-out does run.
#[test]
fn mdc_097_q09_increase_and_decrease_never_in_the_same_epoch() {
    let cfg = CacheConfig {
        initial_size: MIB,
        flash_incr_mode: FlashIncrMode::Off,
        decr_mode: DecrMode::AgeOut,
        epochs_before_eviction: 1,
        ..resize_cfg()
    };
    let mut h = harness(1, cfg);
    // Epoch 1: 20 loads of 64 KiB into a 1 MiB cache (make-space runs), hit rate 0.8.
    run_mix(&mut h, 20, 80, 0, 64 * KIB);
    let r = h.cache.take_resize_reports();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].outcome, ResizeOutcome::Increase);
    assert_eq!((r[0].old_max_size, r[0].new_max_size), (MIB, 2 * MIB));
    assert_eq!(h.cache.size_info().max_size, 2 * MIB);
    assert_eq!(h.cache.size_info().cur_num_entries, 16); // nothing aged out
    assert_eq!(h.cache.totals().epoch_markers, 1); // but the marker was cycled

    // Epoch 2: only the last entry (E19) is touched; everything behind the marker ages out.
    touch_n(&mut h, 19 * 64 * KIB as u64, 64 * KIB, 100);
    let r = h.cache.take_resize_reports();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].outcome, ResizeOutcome::Decrease);
    assert_eq!((r[0].old_max_size, r[0].new_max_size), (2 * MIB, MIB));
    assert_eq!(h.cache.cached_addrs(), vec![19 * 64 * KIB as u64]);
    assert_eq!(h.cache.stats().aged_out, 15);
}

/// MDC-098: the derived flags are recomputed whenever a configuration is applied. With incr
/// Threshold but increment 1.0, decr Off and flash AddSpace, `resize_enabled` is false (so epochs
/// are not processed at all) and a flash increase still happens. The Q-10 conditions that make a
/// direction impossible are checked one by one, and an impossible direction is reported as such.
#[test]
fn mdc_098_derived_flags_follow_the_applied_config() {
    let mut h = harness(1, resize_cfg());
    let all = DerivedFlags {
        size_increase_possible: true,
        flash_size_increase_possible: true,
        size_decrease_possible: true,
        resize_enabled: true,
    };
    assert_eq!(h.cache.derived_flags(), all);

    let cfg = CacheConfig {
        increment: 1.0,
        decr_mode: DecrMode::Off,
        ..resize_cfg()
    };
    h.cache.set_config(&cfg).unwrap();
    assert_eq!(
        h.cache.derived_flags(),
        DerivedFlags {
            size_increase_possible: false,
            flash_size_increase_possible: true,
            size_decrease_possible: false,
            resize_enabled: false,
        }
    );
    // No epoch processing: the counters keep counting past epoch_length.
    load_n(&mut h, 1, 0, KIB);
    touch_n(&mut h, 0, KIB, 149);
    assert_eq!(h.cache.epochs_completed(), 0);
    assert_eq!(h.cache.hit_rate_counters(), (150, 149));
    assert!(h.cache.take_resize_reports().is_empty());
    // ... but the flash increase still works: 2.5 MiB entry, 2 MiB - 1 KiB free.
    h.insert(0, MIB as u64, 5 * MIB / 2);
    let space_needed = 5 * MIB / 2 - (2 * MIB - KIB);
    let expect = 2 * MIB + mul(space_needed, 1.4);
    assert_eq!(h.cache.size_info().max_size, expect);
    let r = h.cache.take_resize_reports();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].outcome, ResizeOutcome::FlashIncrease);

    // Each Q-10 condition on its own.
    let base = resize_cfg();
    let cases: Vec<(CacheConfig, DerivedFlags)> = vec![
        (
            CacheConfig {
                min_size: 2 * MIB,
                max_size: 2 * MIB,
                ..base.clone()
            },
            DerivedFlags::default(),
        ),
        (
            CacheConfig {
                decr_mode: DecrMode::Threshold,
                decrement: 1.0,
                ..base.clone()
            },
            DerivedFlags {
                size_decrease_possible: false,
                ..all
            },
        ),
        (
            CacheConfig {
                lower_hr_threshold: 0.0,
                ..base.clone()
            },
            DerivedFlags {
                size_increase_possible: false,
                ..all
            },
        ),
        (
            CacheConfig {
                max_increment: 0,
                ..base.clone()
            },
            DerivedFlags {
                size_increase_possible: false,
                ..all
            },
        ),
        (
            CacheConfig {
                max_decrement: 0,
                ..base.clone()
            },
            DerivedFlags {
                size_decrease_possible: false,
                ..all
            },
        ),
        (
            CacheConfig {
                decr_mode: DecrMode::AgeOut,
                empty_reserve: 1.0,
                ..base.clone()
            },
            DerivedFlags {
                size_decrease_possible: false,
                ..all
            },
        ),
        (
            CacheConfig {
                upper_hr_threshold: 1.0,
                ..base.clone()
            },
            DerivedFlags {
                size_decrease_possible: false,
                ..all
            },
        ),
        (
            CacheConfig {
                incr_mode: IncrMode::Off,
                decr_mode: DecrMode::Off,
                ..base.clone()
            },
            DerivedFlags {
                flash_size_increase_possible: true,
                ..DerivedFlags::default()
            },
        ),
    ];
    for (cfg, want) in cases {
        h.cache.set_config(&cfg).unwrap();
        assert_eq!(h.cache.derived_flags(), want, "{cfg:?}");
        assert_eq!(DerivedFlags::of(&cfg), want);
    }

    // An impossible direction is reported as disabled at the epoch end.
    let mut h = harness(
        1,
        CacheConfig {
            increment: 1.0,
            decr_mode: DecrMode::Threshold,
            ..resize_cfg()
        },
    );
    run_mix(&mut h, 50, 50, 0, KIB); // hit rate 0.5: wants to grow
    assert_eq!(
        h.cache.take_resize_reports()[0].outcome,
        ResizeOutcome::IncreaseDisabled
    );
    let mut h = harness(
        1,
        CacheConfig {
            decr_mode: DecrMode::Threshold,
            decrement: 1.0,
            ..resize_cfg()
        },
    );
    h.insert(0, 0, KIB);
    touch_n(&mut h, 0, KIB, 100); // hit rate 1.0: wants to shrink
    assert_eq!(
        h.cache.take_resize_reports()[0].outcome,
        ResizeOutcome::DecreaseDisabled
    );
    assert_eq!(h.cache.size_info().max_size, 2 * MIB);
}

/// MDC-098 (`flash_size_increase_threshold` = max × `flash_threshold`, recomputed when a config is
/// applied) and MDC-101 (the trigger is x > threshold, strictly): after lowering the max from 8 MiB
/// to 2 MiB the threshold is 512 KiB, so a 512 KiB entry that does not fit is handled by eviction
/// alone while a 512 KiB + 1 B entry causes a flash increase.
#[test]
fn mdc_098_mdc_101_flash_threshold_boundary_and_recompute() {
    let start = CacheConfig {
        initial_size: 8 * MIB,
        ..CacheConfig::default_serial()
    };
    let two_mib = CacheConfig {
        rpt_fcn_enabled: true,
        ..CacheConfig::default_serial()
    };

    // Exactly at the threshold: no flash increase, make-space evicts instead.
    let mut h = harness(1, start.clone());
    h.cache.set_config(&two_mib).unwrap();
    load_n(&mut h, 28, 0, 64 * KIB); // 1.75 MiB
    h.insert(0, 2 * MIB as u64, 512 * KIB);
    assert_eq!(h.cache.size_info().max_size, 2 * MIB);
    assert!(h.cache.take_resize_reports().is_empty());
    assert_eq!(h.cache.stats().flash_increases, 0);
    assert_eq!(h.cache.size_info().cur_size, 2 * MIB);
    assert_eq!(h.cache.stats().total_evictions, 4);

    // One byte above it: flash increase of (x - free) × 1.4.
    let mut h = harness(1, start);
    h.cache.set_config(&two_mib).unwrap();
    load_n(&mut h, 28, 0, 64 * KIB);
    h.insert(0, 2 * MIB as u64, 512 * KIB + 1);
    let space_needed = 512 * KIB + 1 - MIB / 4;
    assert_eq!(
        h.cache.size_info().max_size,
        2 * MIB + mul(space_needed, 1.4)
    );
    assert_eq!(h.cache.stats().flash_increases, 1);
    assert_eq!(h.cache.stats().total_evictions, 0);
}

/// MDC-099 / Q-11: `cache_full` is set only when make-space had to run because the cache reached its
/// max. A low hit rate with the cache far below its max gives `NotFull` and no change; once loads
/// overflow the max the flag is set and the epoch end grows the cache and clears it; the epoch after
/// that (low hit rate, not refilled) does not grow again.
#[test]
fn mdc_099_threshold_increase_needs_a_full_cache() {
    let cfg = CacheConfig {
        initial_size: MIB,
        flash_incr_mode: FlashIncrMode::Off,
        decr_mode: DecrMode::Off,
        ..resize_cfg()
    };
    let mut h = harness(1, cfg);
    assert!(!h.cache.is_full());
    run_mix(&mut h, 50, 50, 0x30_0000, KIB); // hit rate 0.5, 50 KiB held
    let r = h.cache.take_resize_reports();
    assert_eq!(r[0].outcome, ResizeOutcome::NotFull);
    assert_eq!(r[0].hit_rate, 0.5);
    assert_eq!(h.cache.size_info().max_size, MIB);
    assert!(!h.cache.is_full());

    // 99 protects with 20 loads of 64 KiB: make-space runs and the cache is full.
    run_mix(&mut h, 20, 79, 0, 64 * KIB);
    assert!(h.cache.is_full());
    assert_eq!(h.cache.epochs_completed(), 1);
    h.touch(0, 19 * 64 * KIB as u64, 64 * KIB); // 100th protect: hit rate 0.8
    let r = h.cache.take_resize_reports();
    assert_eq!(r[0].outcome, ResizeOutcome::Increase);
    assert_eq!((r[0].old_max_size, r[0].new_max_size), (MIB, 2 * MIB));
    assert!(!h.cache.is_full());

    run_mix(&mut h, 50, 50, 0x32_0000, KIB);
    let r = h.cache.take_resize_reports();
    assert_eq!(r[0].outcome, ResizeOutcome::NotFull);
    assert_eq!(h.cache.size_info().max_size, 2 * MIB);
}

/// MDC-100: threshold increase. Max 1 MiB, increment 2.0, `max_increment` 512 KiB, epoch hit rate
/// 0.5 with the cache full: the new max is 1.5 MiB (the min clean size follows). With `max_size`
/// 1.25 MiB it is 1.25 MiB, and the next such epoch reports `AtMaxSize`. Without
/// `apply_max_increment` it doubles to 2 MiB.
#[test]
fn mdc_100_threshold_increase_capped_by_max_increment_and_max_size() {
    let cfg = CacheConfig {
        initial_size: MIB,
        max_increment: 512 * KIB,
        flash_incr_mode: FlashIncrMode::Off,
        decr_mode: DecrMode::Off,
        ..resize_cfg()
    };
    let mut h = harness(1, cfg.clone());
    run_mix(&mut h, 50, 50, 0, 32 * KIB); // 1.6 MiB loaded into 1 MiB
    let r = h.cache.take_resize_reports();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].outcome, ResizeOutcome::Increase);
    assert_eq!(r[0].hit_rate, 0.5);
    assert_eq!((r[0].old_max_size, r[0].new_max_size), (MIB, 3 * MIB / 2));
    assert_eq!(r[0].old_min_clean_size, mul(MIB, 0.01));
    assert_eq!(r[0].new_min_clean_size, mul(3 * MIB / 2, 0.01));
    assert_eq!(
        h.cache.size_info(),
        SizeInfo {
            max_size: 3 * MIB / 2,
            min_clean_size: mul(3 * MIB / 2, 0.01),
            cur_size: 32 * 32 * KIB,
            cur_num_entries: 32,
        }
    );

    // Capped at max_size, then AtMaxSize.
    let mut h = harness(
        1,
        CacheConfig {
            max_size: 5 * MIB / 4,
            ..cfg.clone()
        },
    );
    run_mix(&mut h, 50, 50, 0, 32 * KIB);
    assert_eq!(h.cache.size_info().max_size, 5 * MIB / 4);
    run_mix(&mut h, 50, 50, 0x20_0000, 32 * KIB);
    let r = h.cache.take_resize_reports();
    assert_eq!(r[0].outcome, ResizeOutcome::Increase);
    assert_eq!(r[0].new_max_size, 5 * MIB / 4);
    assert_eq!(r[1].outcome, ResizeOutcome::AtMaxSize);
    assert_eq!(
        (r[1].old_max_size, r[1].new_max_size),
        (5 * MIB / 4, 5 * MIB / 4)
    );

    // No max_increment: the full factor.
    let mut h = harness(
        1,
        CacheConfig {
            apply_max_increment: false,
            ..cfg
        },
    );
    run_mix(&mut h, 50, 50, 0, 32 * KIB);
    assert_eq!(h.cache.size_info().max_size, 2 * MIB);
}

/// MDC-101: flash increase. Max 2 MiB holding 1.5 MiB, threshold 0.25, multiple 1.4: inserting a
/// 1 MiB entry sets the max to 2 MiB + 0.5 MiB × 1.4 at once (`max_increment`, here 1 KiB, is
/// ignored), reports it, resets the hit-rate counters (the epoch restarts), runs no other resize
/// algorithm and leaves the age-out markers exactly where they were.
#[test]
fn mdc_101_flash_increase_on_insert() {
    let cfg = CacheConfig {
        max_increment: KIB,
        ..resize_cfg()
    };
    let mut h = harness(1, cfg);
    insert_n(&mut h, 19, 0, 64 * KIB);
    // Epoch 1: 5 misses of 64 KiB (1.5 MiB held in all), 95 hits: in spec, one marker cycled.
    run_mix(&mut h, 5, 95, 0x20_0000, 64 * KIB);
    assert_eq!(
        h.cache.take_resize_reports()[0].outcome,
        ResizeOutcome::InSpec
    );
    assert_eq!(h.cache.size_info().cur_size, 3 * MIB / 2);
    touch_n(&mut h, 0x20_0000, 64 * KIB, 10);
    assert_eq!(h.cache.hit_rate_counters(), (10, 10));
    let markers_before = h.cache.totals().epoch_markers;
    assert_eq!(markers_before, 1);
    let lru_before = h.cache.lru_with_markers();

    h.insert(0, 0x28_0000, MIB);
    let new_max = 2 * MIB + mul(MIB / 2, 1.4);
    assert_eq!(new_max, 2_831_155);
    assert_eq!(h.cache.size_info().max_size, new_max);
    assert_eq!(h.cache.size_info().min_clean_size, mul(new_max, 0.01));
    assert_eq!(h.cache.hit_rate_counters(), (0, 0));
    assert_eq!(h.cache.epochs_completed(), 1);
    assert_eq!(h.cache.totals().epoch_markers, markers_before);
    let mut lru_expected = vec![Some(0x28_0000)];
    lru_expected.extend(lru_before);
    assert_eq!(h.cache.lru_with_markers(), lru_expected);
    assert_eq!(h.cache.stats().total_evictions, 0);
    assert_eq!(h.cache.stats().flash_increases, 1);
    let r = h.cache.take_resize_reports();
    assert_eq!(
        r,
        vec![ResizeReport {
            epoch: 2,
            outcome: ResizeOutcome::FlashIncrease,
            hit_rate: 1.0,
            old_max_size: 2 * MIB,
            new_max_size: new_max,
            old_min_clean_size: mul(2 * MIB, 0.01),
            new_min_clean_size: mul(new_max, 0.01),
            cur_size: 3 * MIB / 2,
        }]
    );
}

/// MDC-101: the flash trigger also covers a load and the growth of an entry (x = the bytes
/// added). The increment is clamped so the max never passes `max_size`, and nothing happens when
/// the clamped increment is 0 (already at `max_size`).
#[test]
fn mdc_101_flash_increase_on_load_growth_and_clamped() {
    let expect = 2 * MIB + mul(MIB / 2, 1.4);

    // Load of a 1 MiB entry into a cache holding 1.5 MiB: the flash resets the counters, then the
    // protect itself counts as the first (missed) access of the restarted epoch.
    let mut h = harness(1, CacheConfig::default_serial());
    load_n(&mut h, 24, 0, 64 * KIB);
    h.touch(0, 0x20_0000, MIB);
    assert_eq!(h.cache.size_info().max_size, expect);
    assert_eq!(h.cache.hit_rate_counters(), (1, 0));
    assert_eq!(h.cache.stats().total_evictions, 0);

    // Growth of a pinned entry by 1 MiB.
    let mut h = harness(1, CacheConfig::default_serial());
    insert_n(&mut h, 23, 0, 64 * KIB);
    h.cache
        .insert(0, 0x20_0000, MockEntry::new(64 * KIB), InsertFlags::PIN)
        .unwrap();
    h.cache.resize(0x20_0000, 64 * KIB + MIB).unwrap();
    assert_eq!(h.cache.size_info().max_size, expect);
    assert_eq!(h.cache.size_info().cur_size, 5 * MIB / 2);

    // Clamped to max_size 2.5 MiB.
    let cfg = CacheConfig {
        max_size: 5 * MIB / 2,
        ..CacheConfig::default_serial()
    };
    let mut h = harness(1, cfg);
    load_n(&mut h, 24, 0, 64 * KIB);
    h.insert(0, 0x20_0000, MIB);
    assert_eq!(h.cache.size_info().max_size, 5 * MIB / 2);
    assert_eq!(h.cache.stats().flash_increases, 1);

    // Already at max_size: no increase, no report; make-space evicts instead.
    let cfg = CacheConfig {
        max_size: 2 * MIB,
        rpt_fcn_enabled: true,
        ..CacheConfig::default_serial()
    };
    let mut h = harness(1, cfg);
    assert!(h.cache.derived_flags().flash_size_increase_possible);
    load_n(&mut h, 24, 0, 64 * KIB);
    h.insert(0, 0x20_0000, MIB);
    assert_eq!(h.cache.size_info().max_size, 2 * MIB);
    assert!(h.cache.take_resize_reports().is_empty());
    assert_eq!(h.cache.stats().flash_increases, 0);
    assert_eq!(h.cache.stats().total_evictions, 8);
}

fn decr_cfg() -> CacheConfig {
    CacheConfig {
        initial_size: 4 * MIB,
        incr_mode: IncrMode::Off,
        flash_incr_mode: FlashIncrMode::Off,
        decr_mode: DecrMode::Threshold,
        upper_hr_threshold: 0.999,
        decrement: 0.5,
        apply_max_decrement: true,
        max_decrement: MIB,
        ..resize_cfg()
    }
}

/// MDC-102: threshold decrease. Max 4 MiB, decrement 0.5, `max_decrement` 1 MiB, epoch hit rate
/// 0.9999 (1 miss in 10 000) above 0.999: the new max is 3 MiB. Nothing is evicted at the epoch end
/// itself; `size_decreased` makes the next protect shrink the cache to the new max.
#[test]
fn mdc_102_threshold_decrease_then_next_protect_shrinks() {
    let mut h = harness(
        1,
        CacheConfig {
            epoch_length: 10_000,
            ..decr_cfg()
        },
    );
    load_n(&mut h, 56, 0, 64 * KIB); // 3.5 MiB
    h.cache.reset_hit_rate_stats(); // the epoch starts here
    let hot = 56 * 64 * KIB as u64;
    h.touch(0, hot, 64 * KIB); // the one miss
    touch_n(&mut h, hot, 64 * KIB, 9_998);
    assert!(h.cache.take_resize_reports().is_empty());
    h.touch(0, hot, 64 * KIB); // 10 000th protect
    let r = h.cache.take_resize_reports();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].outcome, ResizeOutcome::Decrease);
    assert_eq!(r[0].hit_rate, 9_999.0 / 10_000.0);
    assert_eq!((r[0].old_max_size, r[0].new_max_size), (4 * MIB, 3 * MIB));
    assert_eq!(r[0].new_min_clean_size, mul(3 * MIB, 0.01));
    assert_eq!(h.cache.size_info().cur_size, 57 * 64 * KIB); // not shrunk yet
    assert_eq!(h.cache.stats().total_evictions, 0);

    h.touch(0, hot, 64 * KIB); // the next protect shrinks the cache
    assert_eq!(h.cache.size_info().cur_size, 3 * MIB);
    assert_eq!(h.cache.size_info().cur_num_entries, 48);
    assert_eq!(h.cache.stats().total_evictions, 9);
    assert!(h.cache.contains(hot));

    // Without max_decrement: the full factor (4 MiB → 2 MiB).
    let mut h = harness(
        1,
        CacheConfig {
            apply_max_decrement: false,
            ..decr_cfg()
        },
    );
    h.insert(0, 0, 64 * KIB);
    touch_n(&mut h, 0, 64 * KIB, 100);
    assert_eq!(h.cache.size_info().max_size, 2 * MIB);

    // Floored at min_size.
    let mut h = harness(
        1,
        CacheConfig {
            apply_max_decrement: false,
            min_size: 7 * MIB / 2,
            ..decr_cfg()
        },
    );
    h.insert(0, 0, 64 * KIB);
    touch_n(&mut h, 0, 64 * KIB, 100);
    assert_eq!(h.cache.size_info().max_size, 7 * MIB / 2);

    // Already at min_size.
    let mut h = harness(
        1,
        CacheConfig {
            min_size: 4 * MIB,
            ..decr_cfg()
        },
    );
    h.insert(0, 0, 64 * KIB);
    touch_n(&mut h, 0, 64 * KIB, 100);
    let r = h.cache.take_resize_reports();
    assert_eq!(r[0].outcome, ResizeOutcome::AtMinSize);
    assert_eq!(h.cache.size_info().max_size, 4 * MIB);
}

fn ageout_cfg(n: usize) -> CacheConfig {
    CacheConfig {
        incr_mode: IncrMode::Off,
        flash_incr_mode: FlashIncrMode::Off,
        decr_mode: DecrMode::AgeOut,
        epochs_before_eviction: n,
        ..resize_cfg()
    }
}

/// MDC-103: age-out with n = 3. An entry last touched during epoch k is evicted at the end of epoch
/// k + 3 and not one protect earlier; an entry last touched in epoch k + 1 survives that epoch end
/// and goes one epoch later.
#[test]
fn mdc_103_entry_untouched_for_n_epochs_is_aged_out() {
    let mut h = harness(1, ageout_cfg(3));
    let (keep, x, y) = (0u64, 0x1000u64, 0x2000u64);
    // Epoch 1: x is touched (k = 1).
    h.touch(0, x, KIB);
    touch_n(&mut h, keep, KIB, 99);
    // Epoch 2: y is touched.
    h.touch(0, y, KIB);
    touch_n(&mut h, keep, KIB, 99);
    // Epochs 3 and 4 (all but the last protect): x and y are still cached.
    touch_n(&mut h, keep, KIB, 199);
    assert_eq!(h.cache.epochs_completed(), 3);
    assert!(h.cache.contains(x) && h.cache.contains(y));
    assert_eq!(h.cache.totals().epoch_markers, 3);
    h.touch(0, keep, KIB); // end of epoch 4 = k + 3
    assert!(!h.cache.contains(x));
    assert!(h.cache.contains(y));
    assert_eq!(h.cache.stats().aged_out, 1);
    touch_n(&mut h, keep, KIB, 100); // end of epoch 5
    assert!(!h.cache.contains(y));
    assert_eq!(h.cache.cached_addrs(), vec![keep]);
    assert_eq!(h.cache.totals().epoch_markers, 3);
}

/// MDC-103: the age-out size reduction. With `apply_max_decrement` off, a 10 MiB cache with 8 MiB
/// remaining and reserve 0.1 gets 8 MiB / 0.9 (8.89 MiB); with 9.5 MiB remaining there is no change;
/// with `max_decrement` 1 MiB the first case gives 9 MiB; a `min_size` of 9.5 MiB floors it.
#[test]
fn mdc_103_ageout_size_reduction() {
    let cfg = CacheConfig {
        initial_size: 10 * MIB,
        apply_max_decrement: false,
        ..ageout_cfg(3)
    };
    let run = |cfg: CacheConfig, held: u64| -> (usize, ResizeOutcome) {
        let mut h = harness(1, cfg);
        insert_n(&mut h, held, 0, 64 * KIB);
        touch_n(&mut h, 0, 64 * KIB, 100);
        let r = h.cache.take_resize_reports();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].new_max_size, h.cache.size_info().max_size);
        (h.cache.size_info().max_size, r[0].outcome)
    };

    let eight = 8 * MIB;
    let expect = (eight as f64 / (1.0 - 0.1)) as usize;
    assert_eq!(expect, 9_320_675);
    assert_eq!(run(cfg.clone(), 128), (expect, ResizeOutcome::Decrease));
    assert!(expect > 8 * MIB + 88 * MIB / 100 && expect < 8 * MIB + 90 * MIB / 100);
    assert_eq!(run(cfg.clone(), 152), (10 * MIB, ResizeOutcome::InSpec));
    let capped = CacheConfig {
        apply_max_decrement: true,
        max_decrement: MIB,
        ..cfg.clone()
    };
    assert_eq!(run(capped, 128), (9 * MIB, ResizeOutcome::Decrease));
    let floored = CacheConfig {
        min_size: 19 * MIB / 2,
        ..cfg.clone()
    };
    assert_eq!(run(floored, 128), (19 * MIB / 2, ResizeOutcome::Decrease));
    // Without the reserve the target is the remaining bytes themselves.
    let no_reserve = CacheConfig {
        apply_empty_reserve: false,
        ..cfg
    };
    assert_eq!(run(no_reserve, 128), (8 * MIB, ResizeOutcome::Decrease));
}

/// MDC-104: age-out with threshold (n = 1). At the end of an epoch whose hit rate is below
/// `upper_hr_threshold` no aged entry is evicted (the marker is still cycled); at the end of the
/// next epoch, with the hit rate above it, the aged entries go.
#[test]
fn mdc_104_ageout_with_threshold_only_in_good_epochs() {
    let cfg = CacheConfig {
        decr_mode: DecrMode::AgeOutWithThreshold,
        ..ageout_cfg(1)
    };
    let mut h = harness(1, cfg);
    let (keep, x, z) = (0u64, 0x1000u64, 0x2000u64);
    h.touch(0, x, KIB);
    h.touch(0, keep, KIB);
    touch_n(&mut h, keep, KIB, 98); // epoch 1: hit rate 0.98
    assert_eq!(h.cache.totals().epoch_markers, 1);
    h.touch(0, z, KIB);
    touch_n(&mut h, keep, KIB, 99); // epoch 2: hit rate 0.99, x untouched for a whole epoch
    assert!(h.cache.contains(x));
    assert_eq!(h.cache.totals().epoch_markers, 1);
    touch_n(&mut h, keep, KIB, 100); // epoch 3: hit rate 1.0
    assert!(!h.cache.contains(x));
    assert!(!h.cache.contains(z));
    assert_eq!(h.cache.cached_addrs(), vec![keep]);
    let r = h.cache.take_resize_reports();
    let outcomes: Vec<_> = r.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        vec![
            ResizeOutcome::InSpec,
            ResizeOutcome::InSpec,
            ResizeOutcome::Decrease
        ]
    );
    assert_eq!(r[1].hit_rate, 0.99);
    assert_eq!(r[2].hit_rate, 1.0);
}

/// MDC-105: epoch markers come from a fixed pool of 10 and sit on the LRU. Lowering
/// `epochs_before_eviction` from 5 to 2 keeps only the 2 newest (headmost) markers; switching
/// `decr_mode` to Off removes every marker; with n = 10, twelve epochs still leave 10 markers.
#[test]
fn mdc_105_marker_bookkeeping() {
    let mut h = harness(1, ageout_cfg(5));
    for e in 0..6u64 {
        h.touch(0, 0x1000 * (e + 1), KIB);
        touch_n(&mut h, 0, KIB, 99);
    }
    assert_eq!(h.cache.epochs_completed(), 6);
    assert_eq!(h.cache.totals().epoch_markers, 5);
    assert_eq!(marker_count(&h), 5);
    let before = h.cache.lru_with_markers();

    let two = CacheConfig {
        set_initial_size: false,
        ..ageout_cfg(2)
    };
    h.cache.set_config(&two).unwrap();
    assert_eq!(h.cache.totals().epoch_markers, 2);
    let mut seen = 0;
    let expected: Vec<Option<u64>> = before
        .into_iter()
        .filter(|a| {
            if a.is_none() {
                seen += 1;
                seen <= 2
            } else {
                true
            }
        })
        .collect();
    assert_eq!(h.cache.lru_with_markers(), expected);

    let off = CacheConfig {
        decr_mode: DecrMode::Off,
        ..two
    };
    h.cache.set_config(&off).unwrap();
    assert_eq!(h.cache.totals().epoch_markers, 0);
    assert_eq!(marker_count(&h), 0);
    assert_eq!(h.cache.lru_with_markers().len(), h.cache.totals().lru_len);

    let ten = CacheConfig {
        set_initial_size: false,
        ..ageout_cfg(10)
    };
    h.cache.set_config(&ten).unwrap();
    touch_n(&mut h, 0, KIB, 1200);
    assert_eq!(h.cache.totals().epoch_markers, 10);
    assert_eq!(marker_count(&h), 10);
}

/// MDC-106: age-out respects write permission. Without it, an aged clean entry is evicted and an
/// aged dirty one survives, unwritten; pinned and protected entries are never aged out. Once writing
/// is allowed again the aged dirty entry is written and evicted.
#[test]
fn mdc_106_ageout_without_write_permission_keeps_dirty_entries() {
    let mut h = harness(1, ageout_cfg(1));
    let (keep, clean, dirty, pinned, prot) = (0u64, 0x1000u64, 0x2000u64, 0x3000u64, 0x4000u64);
    h.touch(0, clean, KIB);
    h.insert(0, dirty, KIB);
    h.cache
        .insert(0, pinned, MockEntry::new(KIB), InsertFlags::PIN)
        .unwrap();
    let held = h.cache.protect(0, prot, &KIB, ProtectFlags::NONE).unwrap();
    h.cache.set_write_permitted(false);
    touch_n(&mut h, keep, KIB, 98); // end of epoch 1: first marker
    touch_n(&mut h, keep, KIB, 100); // end of epoch 2: age-out
    assert!(!h.cache.contains(clean));
    assert!(h.cache.status(dirty).unwrap().dirty);
    assert!(h.cache.contains(pinned) && h.cache.contains(prot));
    assert!(h.writes().is_empty());

    h.cache.set_write_permitted(true);
    touch_n(&mut h, keep, KIB, 100); // end of epoch 3
    assert!(!h.cache.contains(dirty));
    assert_eq!(h.writes(), vec![dirty]);
    assert!(h.cache.contains(pinned) && h.cache.contains(prot));
    h.cache.unprotect(held, UnprotectFlags::NONE).unwrap();
}

// ---------------------------------------------------------------------------------------------
// §3.15 configuration
// ---------------------------------------------------------------------------------------------

/// MDC-107: the record has exactly the 30 named fields (the struct literal in `all_fields_changed`
/// and the JSON keys), and right after a set, get returns every value that was set except the
/// one-shot `open_trace_file`, which reads back false.
#[test]
fn mdc_107_thirty_fields_round_trip_through_set_and_get() {
    let dir = tempfile::tempdir().unwrap();
    let name = dir.path().join("t.trace").to_string_lossy().into_owned();
    let cfg = CacheConfig {
        open_trace_file: true,
        ..all_fields_changed(name.clone())
    };
    let json: serde_json::Value = serde_json::from_str(&cfg.to_json()).unwrap();
    let mut keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    let mut want = vec![
        "version",
        "rpt_fcn_enabled",
        "open_trace_file",
        "close_trace_file",
        "trace_file_name",
        "evictions_enabled",
        "set_initial_size",
        "initial_size",
        "min_clean_fraction",
        "max_size",
        "min_size",
        "epoch_length",
        "incr_mode",
        "lower_hr_threshold",
        "increment",
        "apply_max_increment",
        "max_increment",
        "flash_incr_mode",
        "flash_multiple",
        "flash_threshold",
        "decr_mode",
        "upper_hr_threshold",
        "decrement",
        "apply_max_decrement",
        "max_decrement",
        "epochs_before_eviction",
        "apply_empty_reserve",
        "empty_reserve",
        "dirty_bytes_threshold",
        "metadata_write_strategy",
    ];
    want.sort_unstable();
    assert_eq!(want.len(), 30);
    assert_eq!(keys, want);
    assert_eq!(CacheConfig::from_json(&cfg.to_json()), Ok(cfg.clone()));

    let mut h = harness(1, resize_cfg());
    h.cache.set_config(&cfg).unwrap();
    let got = h.cache.get_config(CACHE_CONFIG_VERSION).unwrap();
    assert_eq!(
        got,
        CacheConfig {
            open_trace_file: false,
            ..cfg
        }
    );
    assert_eq!(got.trace_file_name, name);
    assert!(h.cache.is_tracing());
    assert_eq!(h.cache.size_info().max_size, 3 * MIB);

    // close_trace_file reads back false too.
    let close = CacheConfig {
        close_trace_file: true,
        ..all_fields_changed(String::new())
    };
    h.cache.set_config(&close).unwrap();
    assert!(!h.cache.is_tracing());
    assert_eq!(
        h.cache.get_config(CACHE_CONFIG_VERSION).unwrap(),
        all_fields_changed(String::new())
    );
}

/// MDC-108 / E-03: the version must be the current one when setting (version 0 is rejected) and
/// when getting (a request carrying a wrong version is an error).
#[test]
fn mdc_108_e03_version_checked_on_set_and_get() {
    let mut h = harness(1, resize_cfg());
    let v0 = CacheConfig {
        version: 0,
        ..resize_cfg()
    };
    assert_rejected(&mut h, &v0, "version");
    assert_rejected(
        &mut h,
        &CacheConfig {
            version: CACHE_CONFIG_VERSION + 1,
            ..resize_cfg()
        },
        "version",
    );
    let err = h.cache.get_config(0).unwrap_err();
    assert_eq!(config_field(&err), Some("version"));
    let err = h.cache.get_config(CACHE_CONFIG_VERSION + 1).unwrap_err();
    assert_eq!(config_field(&err), Some("version"));
    assert_eq!(
        h.cache.get_config(CACHE_CONFIG_VERSION).unwrap(),
        resize_cfg()
    );
}

/// MDC-109 / E-04: `max_size` and `min_size` in [1 KiB, 128 MiB] with min ≤ max, and
/// `initial_size` in [min, max] when `set_initial_size` is true. An out-of-range `initial_size` is
/// ignored (accepted) when `set_initial_size` is false.
#[test]
fn mdc_109_e04_size_bounds() {
    let mut h = harness(1, resize_cfg());
    let base = resize_cfg();
    assert_rejected(
        &mut h,
        &CacheConfig {
            min_size: 2 * MIB,
            max_size: MIB,
            initial_size: MIB,
            ..base.clone()
        },
        "min_size",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            max_size: 256 * MIB,
            ..base.clone()
        },
        "max_size",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            min_size: 512,
            ..base.clone()
        },
        "min_size",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            min_size: 256 * MIB,
            ..base.clone()
        },
        "min_size",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            initial_size: 512 * KIB,
            ..base.clone()
        },
        "initial_size",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            initial_size: 33 * MIB,
            ..base.clone()
        },
        "initial_size",
    );
    // Edges of the range are fine.
    assert_accepted(
        &mut h,
        &CacheConfig {
            min_size: KIB,
            max_size: 128 * MIB,
            initial_size: KIB,
            ..base.clone()
        },
    );
    assert_accepted(
        &mut h,
        &CacheConfig {
            set_initial_size: false,
            initial_size: 512 * KIB,
            ..base
        },
    );
}

/// MDC-110 / E-05: `min_clean_fraction` in [0, 1]; `epoch_length` in [100, 1 000 000], checked even
/// with every resize mode off.
#[test]
fn mdc_110_e05_min_clean_fraction_and_epoch_length() {
    let mut h = harness(1, resize_cfg());
    let base = resize_cfg();
    for f in [1.5, -0.1, f64::NAN] {
        assert_rejected(
            &mut h,
            &CacheConfig {
                min_clean_fraction: f,
                ..base.clone()
            },
            "min_clean_fraction",
        );
    }
    for e in [99, 1_000_001, 0] {
        assert_rejected(
            &mut h,
            &CacheConfig {
                epoch_length: e,
                ..base.clone()
            },
            "epoch_length",
        );
    }
    let fixed99 = CacheConfig {
        epoch_length: 99,
        ..CacheConfig::fixed_size(MIB)
    };
    assert!(!DerivedFlags::of(&fixed99).resize_enabled);
    assert_rejected(&mut h, &fixed99, "epoch_length");
    for e in [100, 1_000_000] {
        assert_accepted(
            &mut h,
            &CacheConfig {
                epoch_length: e,
                ..base.clone()
            },
        );
    }
    for f in [0.0, 1.0] {
        assert_accepted(
            &mut h,
            &CacheConfig {
                min_clean_fraction: f,
                ..base.clone()
            },
        );
    }
}

/// MDC-111 / E-06: increase-side checks apply only to active modes (increment ≥ 1.0,
/// `lower_hr_threshold` in [0, 1], `flash_threshold` in [0.1, 1.0], `flash_multiple` in
/// [0.1, 10.0]), and an enum value outside its set is an error, whether it arrives as a raw
/// number (FFI) or through JSON.
#[test]
fn mdc_111_e06_increase_side_validation() {
    let mut h = harness(1, resize_cfg());
    let base = resize_cfg();
    assert_rejected(
        &mut h,
        &CacheConfig {
            increment: 0.9,
            ..base.clone()
        },
        "increment",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            lower_hr_threshold: -0.5,
            ..base.clone()
        },
        "lower_hr_threshold",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            lower_hr_threshold: 1.5,
            ..base.clone()
        },
        "lower_hr_threshold",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            flash_threshold: 0.05,
            ..base.clone()
        },
        "flash_threshold",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            flash_threshold: 1.5,
            ..base.clone()
        },
        "flash_threshold",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            flash_multiple: 11.0,
            ..base.clone()
        },
        "flash_multiple",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            flash_multiple: 0.05,
            ..base.clone()
        },
        "flash_multiple",
    );
    // Fields of a mode that is off are not checked.
    assert_accepted(
        &mut h,
        &CacheConfig {
            incr_mode: IncrMode::Off,
            increment: 0.5,
            lower_hr_threshold: 7.0,
            ..base.clone()
        },
    );
    assert_accepted(
        &mut h,
        &CacheConfig {
            flash_incr_mode: FlashIncrMode::Off,
            flash_threshold: 0.05,
            flash_multiple: 11.0,
            ..base.clone()
        },
    );
    // Range edges.
    assert_accepted(
        &mut h,
        &CacheConfig {
            increment: 1.0,
            flash_threshold: 0.1,
            flash_multiple: 10.0,
            ..base
        },
    );

    // Enum values outside their sets.
    assert_eq!(IncrMode::try_from(7).map_err(|e| e.field), Err("incr_mode"));
    assert_eq!(
        FlashIncrMode::try_from(2).map_err(|e| e.field),
        Err("flash_incr_mode")
    );
    assert_eq!(DecrMode::try_from(4).map_err(|e| e.field), Err("decr_mode"));
    assert_eq!(
        DecrMode::try_from(-1).map_err(|e| e.field),
        Err("decr_mode")
    );
    assert_eq!(IncrMode::try_from(1), Ok(IncrMode::Threshold));
    assert_eq!(FlashIncrMode::try_from(1), Ok(FlashIncrMode::AddSpace));
    assert_eq!(DecrMode::try_from(3), Ok(DecrMode::AgeOutWithThreshold));
    assert_eq!(
        CacheConfig::from_json(r#"{"incr_mode":"Sometimes"}"#).map_err(|e| e.field),
        Err("json")
    );
    assert_eq!(
        CacheConfig::from_json(r#"{"flash_incr_mode":7}"#).map_err(|e| e.field),
        Err("json")
    );
    assert_eq!(
        CacheConfig::from_json(r#"{"incr_mode":"Off"}"#),
        Ok(CacheConfig {
            incr_mode: IncrMode::Off,
            ..CacheConfig::default_serial()
        })
    );
}

/// MDC-112 / E-07: decrease-side checks apply only to the active mode: decrement and
/// `upper_hr_threshold` in [0, 1] for Threshold; `epochs_before_eviction` in [1, 10] and (when
/// applied) `empty_reserve` in [0, 1] for the age-out modes; `upper_hr_threshold` in [0, 1] for
/// AgeOutWithThreshold.
#[test]
fn mdc_112_e07_decrease_side_validation() {
    let mut h = harness(1, resize_cfg());
    let base = CacheConfig {
        incr_mode: IncrMode::Off,
        ..resize_cfg()
    };
    let ageout = CacheConfig {
        decr_mode: DecrMode::AgeOut,
        ..base.clone()
    };
    let threshold = CacheConfig {
        decr_mode: DecrMode::Threshold,
        ..base.clone()
    };
    for n in [0, 11] {
        assert_rejected(
            &mut h,
            &CacheConfig {
                epochs_before_eviction: n,
                ..ageout.clone()
            },
            "epochs_before_eviction",
        );
    }
    assert_rejected(
        &mut h,
        &CacheConfig {
            decrement: 1.1,
            ..threshold.clone()
        },
        "decrement",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            upper_hr_threshold: 1.5,
            ..threshold.clone()
        },
        "upper_hr_threshold",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            empty_reserve: 1.5,
            ..ageout.clone()
        },
        "empty_reserve",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            decr_mode: DecrMode::AgeOutWithThreshold,
            upper_hr_threshold: -0.1,
            ..base.clone()
        },
        "upper_hr_threshold",
    );
    // Unused fields are ignored.
    assert_accepted(
        &mut h,
        &CacheConfig {
            decr_mode: DecrMode::Off,
            decrement: 5.0,
            upper_hr_threshold: 3.0,
            epochs_before_eviction: 0,
            empty_reserve: 9.0,
            ..base.clone()
        },
    );
    assert_accepted(
        &mut h,
        &CacheConfig {
            epochs_before_eviction: 0,
            empty_reserve: 9.0,
            ..threshold
        },
    );
    assert_accepted(
        &mut h,
        &CacheConfig {
            decrement: 5.0,
            upper_hr_threshold: 3.0,
            apply_empty_reserve: false,
            empty_reserve: 9.0,
            ..ageout.clone()
        },
    );
    for n in [1, 10] {
        assert_accepted(
            &mut h,
            &CacheConfig {
                epochs_before_eviction: n,
                ..ageout.clone()
            },
        );
    }
}

/// MDC-113 / E-08: with incr Threshold and decr Threshold or AgeOutWithThreshold,
/// `lower_hr_threshold` must be strictly below `upper_hr_threshold`; otherwise the pair is free.
#[test]
fn mdc_113_e08_lower_threshold_below_upper() {
    let mut h = harness(1, resize_cfg());
    for decr in [DecrMode::Threshold, DecrMode::AgeOutWithThreshold] {
        assert_rejected(
            &mut h,
            &CacheConfig {
                decr_mode: decr,
                lower_hr_threshold: 0.9,
                upper_hr_threshold: 0.9,
                ..resize_cfg()
            },
            "lower_hr_threshold",
        );
        assert_rejected(
            &mut h,
            &CacheConfig {
                decr_mode: decr,
                lower_hr_threshold: 0.95,
                upper_hr_threshold: 0.9,
                ..resize_cfg()
            },
            "lower_hr_threshold",
        );
        assert_accepted(
            &mut h,
            &CacheConfig {
                decr_mode: decr,
                lower_hr_threshold: 0.9,
                upper_hr_threshold: 0.999,
                ..resize_cfg()
            },
        );
    }
    assert_accepted(
        &mut h,
        &CacheConfig {
            incr_mode: IncrMode::Off,
            decr_mode: DecrMode::Threshold,
            lower_hr_threshold: 0.99,
            upper_hr_threshold: 0.9,
            ..resize_cfg()
        },
    );
    assert_accepted(
        &mut h,
        &CacheConfig {
            decr_mode: DecrMode::AgeOut,
            lower_hr_threshold: 0.99,
            upper_hr_threshold: 0.9,
            ..resize_cfg()
        },
    );
}

/// MDC-114 / E-09: evictions may be disabled only when incr, flash and decr are all Off.
#[test]
fn mdc_114_e09_evictions_off_needs_every_mode_off() {
    let mut h = harness(1, resize_cfg());
    let all_off = CacheConfig {
        evictions_enabled: false,
        incr_mode: IncrMode::Off,
        flash_incr_mode: FlashIncrMode::Off,
        decr_mode: DecrMode::Off,
        ..resize_cfg()
    };
    assert_rejected(
        &mut h,
        &CacheConfig {
            flash_incr_mode: FlashIncrMode::AddSpace,
            ..all_off.clone()
        },
        "evictions_enabled",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            incr_mode: IncrMode::Threshold,
            ..all_off.clone()
        },
        "evictions_enabled",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            decr_mode: DecrMode::AgeOut,
            ..all_off.clone()
        },
        "evictions_enabled",
    );
    assert_accepted(&mut h, &all_off);
}

/// MDC-115 / E-10: the write strategy must be one of the two (raw value 7 is rejected, as is an
/// unknown name in JSON), `dirty_bytes_threshold` must be in [512 B, 32 MiB] (Q-13), and
/// `open_trace_file` needs a name of 1 to 1024 bytes. (E-10's "different across ranks" is a
/// parallel-mode check of spec §3.19, not implemented yet.)
#[test]
fn mdc_115_e10_parallel_and_trace_fields() {
    assert_eq!(
        MetadataWriteStrategy::try_from(7).map_err(|e| e.field),
        Err("metadata_write_strategy")
    );
    assert_eq!(
        MetadataWriteStrategy::try_from(0),
        Ok(MetadataWriteStrategy::Process0Only)
    );
    assert_eq!(
        MetadataWriteStrategy::try_from(1),
        Ok(MetadataWriteStrategy::Distributed)
    );
    assert_eq!(
        CacheConfig::from_json(r#"{"metadata_write_strategy":"Everyone"}"#).map_err(|e| e.field),
        Err("json")
    );

    let mut h = harness(1, resize_cfg());
    let base = resize_cfg();
    for t in [511, 32 * MIB + 1, 0] {
        assert_rejected(
            &mut h,
            &CacheConfig {
                dirty_bytes_threshold: t,
                ..base.clone()
            },
            "dirty_bytes_threshold",
        );
    }
    for t in [512, 32 * MIB] {
        assert_accepted(
            &mut h,
            &CacheConfig {
                dirty_bytes_threshold: t,
                ..base.clone()
            },
        );
    }
    assert_rejected(
        &mut h,
        &CacheConfig {
            open_trace_file: true,
            trace_file_name: String::new(),
            ..base.clone()
        },
        "trace_file_name",
    );
    assert_rejected(
        &mut h,
        &CacheConfig {
            open_trace_file: true,
            trace_file_name: "x".repeat(1025),
            ..base.clone()
        },
        "trace_file_name",
    );
    assert!(!h.cache.is_tracing());
    let longest = CacheConfig {
        open_trace_file: true,
        trace_file_name: "x".repeat(1024),
        ..base.clone()
    };
    assert_eq!(longest.validate(), Ok(()));
    // Without open_trace_file the name is not checked.
    assert_eq!(
        CacheConfig {
            trace_file_name: "x".repeat(5000),
            ..base
        }
        .validate(),
        Ok(())
    );
}

/// E-11: `open_trace_file` and `close_trace_file` together are ambiguous and rejected; no file is
/// created.
#[test]
fn e_11_open_and_close_trace_in_one_config_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("both.trace");
    let mut h = harness(1, resize_cfg());
    let cfg = CacheConfig {
        open_trace_file: true,
        close_trace_file: true,
        trace_file_name: path.to_string_lossy().into_owned(),
        ..resize_cfg()
    };
    assert_rejected(&mut h, &cfg, "open_trace_file");
    assert!(!path.exists());
    assert!(!h.cache.is_tracing());
}

/// MDC-116: a rejected configuration changes nothing: configuration, totals, sizes, hit-rate
/// counters, derived flags, markers and LRU order are identical afterwards, and a trace file named
/// by the rejected config is not created. A config whose trace file cannot be created is rejected
/// the same way.
#[test]
fn mdc_116_rejected_config_leaves_the_cache_unchanged() {
    let mut h = harness(1, resize_cfg());
    insert_n(&mut h, 4, 0x10_0000, KIB);
    run_mix(&mut h, 10, 100, 0, KIB); // one epoch and 10 accesses into the next
    assert_eq!(h.cache.totals().epoch_markers, 1);
    let snapshot = |h: &mut Harness| {
        (
            h.cache.get_config(CACHE_CONFIG_VERSION).unwrap(),
            h.cache.totals(),
            h.cache.size_info(),
            h.cache.hit_rate_counters(),
            h.cache.derived_flags(),
            h.cache.lru_with_markers(),
            h.cache.is_tracing(),
            h.cache.is_full(),
        )
    };
    let before = snapshot(&mut h);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("never.trace");
    let invalid = CacheConfig {
        initial_size: 5 * MIB,
        decr_mode: DecrMode::Off,
        open_trace_file: true,
        trace_file_name: path.to_string_lossy().into_owned(),
        epoch_length: 99,
        ..resize_cfg()
    };
    let err = h.cache.set_config(&invalid).unwrap_err();
    assert_eq!(config_field(&err), Some("epoch_length"));
    assert_eq!(snapshot(&mut h), before);
    assert!(!path.exists());

    let unopenable = CacheConfig {
        initial_size: 5 * MIB,
        decr_mode: DecrMode::Off,
        open_trace_file: true,
        trace_file_name: dir
            .path()
            .join("no/such/dir/t.trace")
            .to_string_lossy()
            .into_owned(),
        ..resize_cfg()
    };
    let err = h.cache.set_config(&unopenable).unwrap_err();
    assert!(matches!(err, CacheError::Trace(_)), "{err:?}");
    assert_eq!(snapshot(&mut h), before);
}

/// MDC-117 / Q-15: with `set_initial_size` false the current max (5 MiB) is kept, clamped into the
/// new [min, max]; with it true the max becomes `initial_size` (3 MiB) and the next protect shrinks
/// the cache. The min clean size follows `min_clean_fraction × max`. With every mode off the max
/// stays where it was set (manual control).
#[test]
fn mdc_117_initial_size_and_keeping_the_current_max() {
    let mut h = harness(1, manual(5 * MIB));
    load_n(&mut h, 64, 0, 64 * KIB); // 4 MiB
    assert_eq!(h.cache.size_info().max_size, 5 * MIB);

    let keep = CacheConfig {
        set_initial_size: false,
        initial_size: 7 * MIB,
        min_clean_fraction: 0.5,
        ..manual(5 * MIB)
    };
    h.cache.set_config(&keep).unwrap();
    assert_eq!(h.cache.size_info().max_size, 5 * MIB);
    assert_eq!(h.cache.size_info().min_clean_size, 5 * MIB / 2);

    // Clamped down into a smaller max_size, then up to a larger min_size.
    h.cache
        .set_config(&CacheConfig {
            max_size: 9 * MIB / 2,
            ..keep.clone()
        })
        .unwrap();
    assert_eq!(h.cache.size_info().max_size, 9 * MIB / 2);
    h.cache
        .set_config(&CacheConfig {
            min_size: 6 * MIB,
            ..keep
        })
        .unwrap();
    assert_eq!(h.cache.size_info().max_size, 6 * MIB);

    // set_initial_size: the max becomes 3 MiB; the cache shrinks at the next protect.
    h.cache.set_config(&manual(3 * MIB)).unwrap();
    assert_eq!(
        h.cache.size_info(),
        SizeInfo {
            max_size: 3 * MIB,
            min_clean_size: mul(3 * MIB, 0.01),
            cur_size: 4 * MIB,
            cur_num_entries: 64,
        }
    );
    h.touch(0, 63 * 64 * KIB as u64, 64 * KIB);
    assert_eq!(h.cache.size_info().cur_size, 3 * MIB);
    assert_eq!(h.cache.size_info().cur_num_entries, 48);

    // Manual control: many protects later the max is unchanged.
    touch_n(&mut h, 63 * 64 * KIB as u64, 64 * KIB, 300);
    assert_eq!(h.cache.size_info().max_size, 3 * MIB);
    assert_eq!(h.cache.epochs_completed(), 0);
}

/// MDC-118: the default serial configuration, field by field, and it validates.
#[test]
fn mdc_118_default_serial_config() {
    let c = CacheConfig::default_serial();
    assert_eq!(c.version, CACHE_CONFIG_VERSION);
    assert!(!c.rpt_fcn_enabled);
    assert!(!c.open_trace_file);
    assert!(!c.close_trace_file);
    assert_eq!(c.trace_file_name, "");
    assert!(c.evictions_enabled);
    assert!(c.set_initial_size);
    assert_eq!(c.initial_size, 2 * MIB);
    assert_eq!(c.min_clean_fraction, 0.01);
    assert_eq!(c.max_size, 32 * MIB);
    assert_eq!(c.min_size, MIB);
    assert_eq!(c.epoch_length, 50_000);
    assert_eq!(c.incr_mode, IncrMode::Threshold);
    assert_eq!(c.lower_hr_threshold, 0.9);
    assert_eq!(c.increment, 2.0);
    assert!(c.apply_max_increment);
    assert_eq!(c.max_increment, 4 * MIB);
    assert_eq!(c.flash_incr_mode, FlashIncrMode::AddSpace);
    assert_eq!(c.flash_multiple, 1.4);
    assert_eq!(c.flash_threshold, 0.25);
    assert_eq!(c.decr_mode, DecrMode::AgeOutWithThreshold);
    assert_eq!(c.upper_hr_threshold, 0.999);
    assert_eq!(c.decrement, 0.9);
    assert!(c.apply_max_decrement);
    assert_eq!(c.max_decrement, MIB);
    assert_eq!(c.epochs_before_eviction, 3);
    assert!(c.apply_empty_reserve);
    assert_eq!(c.empty_reserve, 0.1);
    assert_eq!(c.dirty_bytes_threshold, 256 * KIB);
    assert_eq!(
        c.metadata_write_strategy,
        MetadataWriteStrategy::Distributed
    );
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(CacheConfig::default(), c);
}

/// MDC-119 / Q-16: the default parallel configuration differs from the serial one in exactly
/// `min_clean_fraction` (0.3) and `flash_multiple` (1.0); the strategy is Distributed in both.
#[test]
fn mdc_119_default_parallel_config() {
    let s = CacheConfig::default_serial();
    let p = CacheConfig::default_parallel();
    assert_eq!(p.validate(), Ok(()));
    assert_eq!(
        p,
        CacheConfig {
            min_clean_fraction: 0.3,
            flash_multiple: 1.0,
            ..s.clone()
        }
    );
    assert_eq!(
        p.metadata_write_strategy,
        MetadataWriteStrategy::Distributed
    );
    let sj: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
    let pj: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
    let mut differing: Vec<&str> = sj
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, v)| pj[k.as_str()] != **v)
        .map(|(k, _)| k.as_str())
        .collect();
    differing.sort_unstable();
    assert_eq!(differing, vec!["flash_multiple", "min_clean_fraction"]);
}

/// MDC-120: the configuration given to the builder (the file-access settings) is validated when the
/// cache is created and is what get-config returns afterwards (one-shot trace flags aside); with
/// nothing given the serial default applies.
#[test]
fn mdc_120_config_at_open() {
    let cfg = all_fields_changed(String::new());
    let cache = build(Some(cfg.clone())).unwrap();
    assert_eq!(cache.get_config(CACHE_CONFIG_VERSION).unwrap(), cfg);
    assert_eq!(cache.size_info().max_size, 3 * MIB);
    assert_eq!(cache.size_info().min_clean_size, mul(3 * MIB, 0.2));
    assert_eq!(cache.derived_flags(), DerivedFlags::of(&cfg));

    let dir = tempfile::tempdir().unwrap();
    let name = dir.path().join("open.trace").to_string_lossy().into_owned();
    let traced = CacheConfig {
        open_trace_file: true,
        ..all_fields_changed(name.clone())
    };
    let cache = build(Some(traced)).unwrap();
    assert!(cache.is_tracing());
    assert_eq!(
        cache.get_config(CACHE_CONFIG_VERSION).unwrap(),
        all_fields_changed(name)
    );

    let cache = build(None).unwrap();
    assert_eq!(
        cache.get_config(CACHE_CONFIG_VERSION).unwrap(),
        CacheConfig::default_serial()
    );
    assert_eq!(cache.size_info().max_size, 2 * MIB);

    let err = build(Some(CacheConfig {
        epoch_length: 99,
        ..cfg
    }))
    .unwrap_err();
    assert_eq!(config_field(&err), Some("epoch_length"));
}

/// MDC-121: configuration at run time takes effect at once: switching `decr_mode` from AgeOut to Off
/// removes the markers; lowering the max makes the next protect evict; disabling evictions lets the
/// cache grow past its max and re-enabling them brings it back at the next load; derived flags
/// follow mode changes.
#[test]
fn mdc_121_config_changes_at_run_time() {
    let mut h = harness(1, ageout_cfg(3));
    touch_n(&mut h, 0, KIB, 200);
    assert_eq!(h.cache.totals().epoch_markers, 2);
    let off = CacheConfig {
        decr_mode: DecrMode::Off,
        ..ageout_cfg(3)
    };
    h.cache.set_config(&off).unwrap();
    assert_eq!(h.cache.totals().epoch_markers, 0);
    assert_eq!(marker_count(&h), 0);
    assert!(!h.cache.derived_flags().size_decrease_possible);
    assert!(!h.cache.derived_flags().resize_enabled);
    h.cache
        .set_config(&CacheConfig {
            incr_mode: IncrMode::Threshold,
            ..off
        })
        .unwrap();
    assert!(h.cache.derived_flags().size_increase_possible);

    // Lower the max.
    let mut h = harness(1, manual(2 * MIB));
    load_n(&mut h, 20, 0, 64 * KIB);
    h.cache.set_config(&manual(MIB)).unwrap();
    assert_eq!(h.cache.size_info().cur_size, 20 * 64 * KIB);
    h.touch(0, 19 * 64 * KIB as u64, 64 * KIB);
    assert_eq!(h.cache.size_info().cur_size, MIB);
    assert_eq!(h.cache.stats().total_evictions, 4);

    // Evictions off, then on again.
    let no_evict = CacheConfig {
        evictions_enabled: false,
        ..manual(MIB)
    };
    let mut h = harness(1, no_evict.clone());
    load_n(&mut h, 20, 0, 64 * KIB);
    assert_eq!(h.cache.size_info().cur_size, 20 * 64 * KIB);
    assert_eq!(h.cache.stats().total_evictions, 0);
    h.cache
        .set_config(&CacheConfig {
            evictions_enabled: true,
            set_initial_size: false,
            ..no_evict
        })
        .unwrap();
    h.touch(0, 20 * 64 * KIB as u64, 64 * KIB);
    assert_eq!(h.cache.size_info().cur_size, MIB);
    assert_eq!(h.cache.size_info().cur_num_entries, 16);
}

/// MDC-122 / Q-17: after a set with `open_trace_file` the trace is open but get-config reads
/// `open_trace_file` false (and names the open file); setting the returned config back neither
/// reopens nor truncates the trace. `close_trace_file` closes it, and then the name reads back "".
#[test]
fn mdc_122_one_shot_trace_flags_read_back_false() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.trace");
    let name = path.to_string_lossy().into_owned();
    let mut h = harness(1, resize_cfg());
    h.cache
        .set_config(&CacheConfig {
            open_trace_file: true,
            trace_file_name: name.clone(),
            ..resize_cfg()
        })
        .unwrap();
    assert!(h.cache.is_tracing());
    let got = h.cache.get_config(CACHE_CONFIG_VERSION).unwrap();
    assert!(!got.open_trace_file && !got.close_trace_file);
    assert_eq!(got.trace_file_name, name);

    h.insert(0, 0x1000, 64);
    h.cache.flush_trace().unwrap();
    let first = std::fs::read_to_string(&path).unwrap();
    assert!(first.starts_with(trace::TRACE_HEADER));
    assert!(first.contains("insert 0x1000 64 0"));

    h.cache.set_config(&got).unwrap();
    assert!(h.cache.is_tracing());
    h.cache.flush_trace().unwrap();
    let second = std::fs::read_to_string(&path).unwrap();
    assert!(second.starts_with(&first), "trace was truncated");
    assert!(second.len() > first.len());
    assert_eq!(second.matches(trace::TRACE_HEADER).count(), 1);

    h.cache
        .set_config(&CacheConfig {
            close_trace_file: true,
            ..got
        })
        .unwrap();
    assert!(!h.cache.is_tracing());
    let after = h.cache.get_config(CACHE_CONFIG_VERSION).unwrap();
    assert!(!after.close_trace_file);
    assert_eq!(after.trace_file_name, "");
}

// ---------------------------------------------------------------------------------------------
// §3.16 monitoring API
// ---------------------------------------------------------------------------------------------

/// MDC-123: the hit rate is hits / accesses since the last reset: 4 protects with 3 hits give 0.75;
/// after `reset_hit_rate_stats` it is 0.0 with both counters 0; a fresh cache reports 0.0.
#[test]
fn mdc_123_hit_rate_and_reset() {
    let mut h = harness(1, fixed(MIB, 0.0));
    assert_eq!(h.cache.hit_rate(), 0.0);
    assert_eq!(h.cache.hit_rate_counters(), (0, 0));
    touch_n(&mut h, 0x1000, 64, 4);
    assert_eq!(h.cache.hit_rate_counters(), (4, 3));
    assert_eq!(h.cache.hit_rate(), 0.75);
    h.cache.reset_hit_rate_stats();
    assert_eq!(h.cache.hit_rate_counters(), (0, 0));
    assert_eq!(h.cache.hit_rate(), 0.0);
    h.touch(0, 0x1000, 64);
    assert_eq!(h.cache.hit_rate(), 1.0);
    // Inserts are not accesses.
    h.insert(0, 0x2000, 64);
    assert_eq!(h.cache.hit_rate_counters(), (1, 1));
}

/// MDC-124: size info after 3 inserts totalling 300 B into a fresh default cache is
/// (2 MiB, 0.01 × 2 MiB, 300, 3).
#[test]
fn mdc_124_size_info() {
    let mut h = harness(1, CacheConfig::default_serial());
    h.insert(0, 0x1000, 100);
    h.insert(0, 0x2000, 150);
    h.insert(0, 0x3000, 50);
    assert_eq!(
        h.cache.size_info(),
        SizeInfo {
            max_size: 2 * MIB,
            min_clean_size: 20_971,
            cur_size: 300,
            cur_num_entries: 3,
        }
    );
    assert_eq!(h.cache.size_info().min_clean_size, mul(2 * MIB, 0.01));
}

/// MDC-125: with `rpt_fcn_enabled`, the hook gets one report per epoch end and one per flash
/// increase. Three epochs plus one flash increase give exactly 4 reports, each with the right
/// outcome, hit rate and old/new max and min clean sizes. Reports are queued when no hook is set,
/// none are made with the flag off, and `Display` gives a readable line.
#[test]
fn mdc_125_resize_reports() {
    let cfg = CacheConfig {
        decr_mode: DecrMode::Threshold,
        ..resize_cfg()
    };
    let mut h = harness(1, cfg.clone());
    let got = Arc::new(Mutex::new(Vec::<ResizeReport>::new()));
    let sink = got.clone();
    h.cache
        .set_resize_report_hook(move |r| sink.lock().unwrap().push(*r));

    run_mix(&mut h, 24, 76, 0, 64 * KIB); // epoch 1: 1.5 MiB held, hit rate 0.76, not full
    h.insert(0, 0x20_0000, MIB); // flash increase
    touch_n(&mut h, 0, 64 * KIB, 100); // epoch 2: hit rate 1.0 → decrease
    touch_n(&mut h, 0, 64 * KIB, 100); // epoch 3: the first protect shrinks, then decrease again
    assert!(h.cache.take_resize_reports().is_empty());

    let m0 = 2 * MIB;
    let m1 = m0 + mul(MIB / 2, 1.4);
    let m2 = mul(m1, 0.9);
    let m3 = mul(m2, 0.9);
    let r = got.lock().unwrap().clone();
    assert_eq!(r.len(), 4);
    let summary: Vec<(u64, ResizeOutcome, usize, usize)> = r
        .iter()
        .map(|r| (r.epoch, r.outcome, r.old_max_size, r.new_max_size))
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, ResizeOutcome::NotFull, m0, m0),
            (2, ResizeOutcome::FlashIncrease, m0, m1),
            (2, ResizeOutcome::Decrease, m1, m2),
            (3, ResizeOutcome::Decrease, m2, m3),
        ]
    );
    for rep in &r {
        assert_eq!(rep.old_min_clean_size, mul(rep.old_max_size, 0.01));
        assert_eq!(rep.new_min_clean_size, mul(rep.new_max_size, 0.01));
    }
    let rates: Vec<f64> = r.iter().map(|r| r.hit_rate).collect();
    assert_eq!(rates, vec![0.76, 0.0, 1.0, 1.0]);
    assert_eq!(h.cache.size_info().max_size, m3);
    assert_eq!(
        r[0].to_string(),
        format!(
            "epoch 1: NotFull, hit rate 0.7600, max size {m0} -> {m0}, min clean 20971 -> 20971, size 1572864"
        )
    );

    // Queued when no hook is set.
    let mut h = harness(1, cfg.clone());
    touch_n(&mut h, 0, KIB, 300);
    assert_eq!(h.cache.take_resize_reports().len(), 3);
    assert!(h.cache.take_resize_reports().is_empty());

    // Off: no reports at all.
    let mut h = harness(
        1,
        CacheConfig {
            rpt_fcn_enabled: false,
            ..cfg
        },
    );
    touch_n(&mut h, 0, KIB, 300);
    assert_eq!(h.cache.epochs_completed(), 3);
    assert!(h.cache.take_resize_reports().is_empty());
}

// ---------------------------------------------------------------------------------------------
// §3.18 statistics, debugging and sanity checks
// ---------------------------------------------------------------------------------------------

/// MDC-129: per-class counters for a scripted workload (2 inserts, 1 pinned insert, 3 read-only and
/// 2 read-write protects, 1 move, 1 expunge) have exactly the expected values, the other class
/// stays at zero, and hits + misses = read protects + write protects.
#[test]
fn mdc_129_per_class_counters_for_a_scripted_workload() {
    let mut h = harness(2, fixed(MIB, 0.0));
    h.insert(0, 0x1000, 64);
    h.insert(0, 0x2000, 64);
    h.cache
        .insert(0, 0x3000, MockEntry::new(64), InsertFlags::PIN)
        .unwrap();
    let r1 = h
        .cache
        .protect(0, 0x1000, &64, ProtectFlags::READ_ONLY)
        .unwrap();
    let r2 = h
        .cache
        .protect(0, 0x1000, &64, ProtectFlags::READ_ONLY)
        .unwrap();
    let r3 = h
        .cache
        .protect(0, 0x4000, &64, ProtectFlags::READ_ONLY)
        .unwrap(); // the one miss
    let w1 = h.cache.protect(0, 0x2000, &64, ProtectFlags::NONE).unwrap();
    let w2 = h.cache.protect(0, 0x3000, &64, ProtectFlags::NONE).unwrap();
    for p in [r1, r2, r3, w1, w2] {
        h.cache.unprotect(p, UnprotectFlags::NONE).unwrap();
    }
    assert!(h.cache.move_entry(0, 0x1000, 0x5000).unwrap());
    h.cache.expunge(0, 0x2000, ExpungeFlags::NONE).unwrap();

    let s = h.cache.stats();
    assert_eq!(
        s.per_class[0],
        ClassStats {
            hits: 4,
            misses: 1,
            write_protects: 2,
            read_protects: 3,
            max_read_protects: 2,
            insertions: 3,
            pinned_insertions: 1,
            clears: 1,
            flushes: 0,
            evictions: 1,
            moves: 1,
            entry_flush_moves: 0,
            cache_flush_moves: 0,
            pins: 1,
            unpins: 0,
            dirty_pins: 0,
            pinned_flushes: 0,
            pinned_clears: 0,
            size_increases: 0,
            size_decreases: 0,
            entry_flush_size_changes: 0,
            cache_flush_size_changes: 0,
            // entry-stats: the expunged entry (one access, one clear, 64 B) folded in.
            max_accesses: 1,
            min_accesses: 1,
            max_clears: 1,
            max_flushes: 0,
            max_size: 64,
            max_pins: 0,
        }
    );
    assert_eq!(
        s.per_class[1],
        ClassStats {
            min_accesses: u64::MAX,
            ..ClassStats::default()
        }
    );
    for c in &s.per_class {
        assert_eq!(c.hits + c.misses, c.read_protects + c.write_protects);
    }
    assert_eq!((s.total_hits, s.total_misses, s.total_evictions), (4, 1, 1));
}

/// MDC-129 (pins, sizes, pinned writes and clears, pre-serialize size changes) and MDC-133 (the
/// entry's lifetime counts folded into the class extremes when it leaves). `entry_flush_size_changes`
/// counts every size change reported by pre-serialize and `cache_flush_size_changes` those during a
/// whole-cache flush (seed 000 App. 1).
#[test]
fn mdc_129_mdc_133_pin_size_and_flush_counters() {
    let mut h = harness(1, fixed(MIB, 0.0));
    h.classes[0].knobs().pre_serialize = Some(Box::new(|_, icr, _, len| {
        icr.size = len + 16;
        Ok(PreSerialize {
            flags: PreSerializeFlags {
                resized: true,
                moved: false,
            },
            new_addr: 0,
            new_len: len + 16,
        })
    }));
    let a = 0x1000;
    h.cache
        .insert(0, a, MockEntry::new(64), InsertFlags::PIN)
        .unwrap();
    h.cache.resize(a, 128).unwrap();
    h.cache.resize(a, 96).unwrap();
    h.cache.flush(FlushFlags::NONE).unwrap(); // 96 → 112 in a cache flush
    h.cache.mark_dirty(a).unwrap();
    h.cache.flush_entry(a, EntryFlushFlags::NONE).unwrap(); // 112 → 128, single entry
    h.cache.mark_dirty(a).unwrap();
    h.cache.mark_clean(a).unwrap();
    h.cache.unpin(a).unwrap();
    let p = h.cache.protect(0, a, &128, ProtectFlags::NONE).unwrap();
    h.cache.pin_protected(a).unwrap();
    h.cache.unprotect(p, UnprotectFlags::NONE).unwrap();
    h.cache.unpin(a).unwrap();
    assert_eq!(h.cache.status(a).unwrap().size, 128);

    let expect = ClassStats {
        hits: 1,
        misses: 0,
        write_protects: 1,
        insertions: 1,
        pinned_insertions: 1,
        clears: 1,
        flushes: 2,
        pins: 2,
        unpins: 2,
        dirty_pins: 2,
        pinned_flushes: 2,
        pinned_clears: 1,
        size_increases: 3,
        size_decreases: 1,
        entry_flush_size_changes: 2,
        cache_flush_size_changes: 1,
        min_accesses: u64::MAX,
        ..ClassStats::default()
    };
    assert_eq!(h.cache.stats().per_class[0], expect);

    // MDC-133: nothing is folded in until the entry leaves.
    h.cache.expunge(0, a, ExpungeFlags::NONE).unwrap();
    assert_eq!(
        h.cache.stats().per_class[0],
        ClassStats {
            evictions: 1,
            max_accesses: 1,
            min_accesses: 1,
            max_clears: 1,
            max_flushes: 2,
            max_size: 128,
            max_pins: 2,
            ..expect
        }
    );
}

/// MDC-130: hash-table statistics. Two entries in one bucket: looking up the one that is not at the
/// chain head records a successful search of depth 1 (and moves it to the head, so the next lookup
/// has depth 0); the failed search made by the second insert had depth 1. The report shows the
/// averages.
#[test]
fn mdc_130_hash_table_search_depths() {
    let mut h = harness(1, fixed(MIB, 0.0));
    let (x, y) = (0x100u64, 0x100u64 + ((DEFAULT_HASH_TABLE_LEN as u64) << 3));
    assert_eq!(h.cache.bucket_of(x), h.cache.bucket_of(y));
    h.insert(0, x, 64);
    h.insert(0, y, 64); // y is now the chain head
    let s = h.cache.stats();
    assert_eq!((s.ht_insertions, s.ht_deletions), (2, 0));
    assert_eq!((s.ht_failed_searches, s.ht_total_failed_depth), (2, 1));
    assert_eq!(
        (s.ht_successful_searches, s.ht_total_successful_depth),
        (0, 0)
    );

    h.touch(0, x, 64);
    let s = h.cache.stats();
    assert_eq!(
        (s.ht_successful_searches, s.ht_total_successful_depth),
        (1, 1)
    );
    h.touch(0, x, 64);
    let s = h.cache.stats();
    assert_eq!(
        (s.ht_successful_searches, s.ht_total_successful_depth),
        (2, 1)
    );
    assert_eq!(s.average_search_depths(), (0.5, 0.5));
    h.cache.expunge(0, y, ExpungeFlags::NONE).unwrap();
    assert_eq!(h.cache.stats().ht_deletions, 1);
    assert!(
        h.cache
            .stats_report()
            .contains("2 insertions, 1 deletions, avg depth 0.500 found / 0.500 not found")
    );
}

/// MDC-131: high-water marks. Three entries protected at once give `max.pl_len` 3 while `pl_len`
/// returns to 0 after their release; an entry pinned at unprotect and unpinned again leaves
/// `max.pel_len` 1; index, clean, dirty and slist marks keep their largest values.
#[test]
fn mdc_131_high_water_marks() {
    let mut h = harness(1, fixed(MIB, 0.0));
    let hs: Vec<_> = [0x1000u64, 0x2000, 0x3000]
        .iter()
        .map(|&a| h.cache.protect(0, a, &100, ProtectFlags::NONE).unwrap())
        .collect();
    assert_eq!(h.cache.totals().pl_len, 3);
    for p in hs {
        h.cache.unprotect(p, UnprotectFlags::NONE).unwrap();
    }
    let m = &h.cache.stats().max;
    assert_eq!((m.pl_len, m.pl_size), (3, 300));
    assert_eq!(h.cache.totals().pl_len, 0);

    // Pinned at unprotect, unpinned again.
    let p = h
        .cache
        .protect(0, 0x1000, &100, ProtectFlags::NONE)
        .unwrap();
    h.cache.unprotect(p, UnprotectFlags::PIN).unwrap();
    h.cache.unpin(0x1000).unwrap();
    assert_eq!(h.cache.totals().pel_len, 0);
    let m = &h.cache.stats().max;
    assert_eq!((m.pel_len, m.pel_size), (1, 100));

    // Dirty entries, then a flush and an eviction: the marks stay at their peaks.
    h.insert(0, 0x4000, 50);
    h.insert(0, 0x5000, 50);
    h.cache.flush(FlushFlags::NONE).unwrap();
    h.cache.expunge(0, 0x1000, ExpungeFlags::NONE).unwrap();
    let t = h.cache.totals();
    assert_eq!(
        (t.index_len, t.index_size, t.dirty_size, t.slist_len),
        (4, 300, 0, 0)
    );
    let m = &h.cache.stats().max;
    assert_eq!((m.index_len, m.index_size), (5, 400));
    assert_eq!((m.dirty_size, m.slist_len, m.slist_size), (100, 2, 100));
    assert_eq!(m.clean_size, 400);
}

/// MDC-132: make-space statistics for the MDC-017 scenario (scaled to the 1 KiB minimum max size:
/// max 10 KiB, min clean 0.5, LRU from the tail: 2 clean then 7 dirty 1 KiB entries). Inserting a
/// 1 KiB entry runs make-space once: it skips the 2 clean entries, writes 2 dirty ones and stops,
/// so 4 entries are scanned, 2 skipped and none scanned to free space.
#[test]
fn mdc_132_make_space_counters() {
    let mut h = harness(1, fixed(10 * KIB, 0.0));
    h.touch(0, 0x0, KIB);
    h.touch(0, 0x1000, KIB);
    let dirty: Vec<u64> = (0..7u64).map(|i| 0x10000 + i * 0x1000).collect();
    for &a in &dirty {
        h.insert(0, a, KIB);
    }
    // Raise the min-clean goal to half the cache, then start counting.
    let half = CacheConfig {
        set_initial_size: false,
        ..fixed(10 * KIB, 0.5)
    };
    h.cache.set_config(&half).unwrap();
    h.cache.reset_stats();
    h.clear_io();
    assert_eq!(h.cache.stats().make_space_calls, 0);

    h.insert(0, 0x20000, KIB);
    let s = h.cache.stats();
    assert_eq!(s.make_space_calls, 1);
    assert_eq!(
        (
            s.entries_scanned_in_make_space,
            s.max_entries_scanned_in_make_space
        ),
        (4, 4)
    );
    assert_eq!(
        (
            s.entries_skipped_in_make_space,
            s.max_entries_skipped_in_make_space
        ),
        (2, 2)
    );
    assert_eq!(s.entries_scanned_to_make_space, 0);
    assert_eq!(s.total_evictions, 0);
    assert_eq!(h.writes(), vec![dirty[0], dirty[1]]);
    assert!(h.cache.contains(0x20000));

    // A second call that must free room: the evicted entries count as scanned to make space.
    let s0 = h.cache.stats().clone();
    h.cache
        .set_config(&CacheConfig {
            set_initial_size: false,
            ..fixed(10 * KIB, 0.0)
        })
        .unwrap();
    h.insert(0, 0x30000, 2 * KIB); // 10 KiB held: 2 KiB must go
    let s = h.cache.stats();
    assert_eq!(s.make_space_calls, s0.make_space_calls + 1);
    assert_eq!(s.entries_scanned_to_make_space, 2);
    assert_eq!(s.total_evictions, 2);
    assert!(!h.cache.contains(0x0) && !h.cache.contains(0x1000));
}

/// MDC-133: an entry protected 5 times and then evicted folds its access count into the class:
/// max accesses 5 and min accesses 5 (nothing is folded while it is cached); a second entry with 2
/// accesses lowers the minimum to 2.
#[test]
fn mdc_133_per_entry_access_extremes_folded_on_eviction() {
    let mut h = harness(1, fixed(MIB, 0.0));
    touch_n(&mut h, 0x1000, 64, 5);
    let c = h.cache.stats().per_class[0];
    assert_eq!((c.max_accesses, c.min_accesses), (0, u64::MAX));
    h.cache
        .flush_entry(0x1000, EntryFlushFlags::INVALIDATE)
        .unwrap();
    let c = h.cache.stats().per_class[0];
    assert_eq!((c.max_accesses, c.min_accesses, c.max_size), (5, 5, 64));
    assert!(c.max_accesses >= 5 && c.min_accesses <= 5);

    touch_n(&mut h, 0x2000, 200, 2);
    h.cache.expunge(0, 0x2000, ExpungeFlags::NONE).unwrap();
    let c = h.cache.stats().per_class[0];
    assert_eq!((c.max_accesses, c.min_accesses, c.max_size), (5, 2, 200));
}

/// MDC-134 / Q-18: the readable dump starts every line with the configured prefix and has one line
/// per class; statistics accumulate across epochs (only the hit-rate counters reset) until
/// `reset_stats`, after which every counter is zero (`min_accesses` back at its "none yet"
/// sentinel; the MDC-011 direct-lookup counter is a test aid kept across resets by design). The
/// dump is returned at close when asked for.
#[test]
fn mdc_134_stats_dump_prefix_reset_and_dump_on_close() {
    let mut h = harness(3, resize_cfg());
    h.cache.set_stats_prefix("rank3: ");
    load_n(&mut h, 2, 0x1000, 64);
    touch_n(&mut h, 0x1000, 64, 248); // 250 protects: two epochs and 50 accesses
    h.touch(2, 0x9000, 64);
    assert_eq!(h.cache.epochs_completed(), 2);
    assert_eq!(h.cache.hit_rate_counters(), (51, 50));
    let c0 = h.cache.stats().per_class[0];
    assert_eq!((c0.hits, c0.misses), (248, 2)); // not reset by the epochs

    let report = h.cache.stats_report();
    assert!(report.lines().count() >= 3);
    assert!(report.lines().all(|l| l.starts_with("rank3: ")), "{report}");
    let class_lines: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("rank3: class "))
        .collect();
    assert_eq!(class_lines.len(), 3);
    assert!(class_lines[0].starts_with("rank3: class 0 mock-0: hits 248 misses 2 "));
    assert!(class_lines[1].starts_with("rank3: class 1 mock-1: hits 0 misses 0 "));
    assert!(class_lines[2].starts_with("rank3: class 2 mock-2: hits 0 misses 1 "));

    h.cache.reset_stats();
    let s = h.cache.stats();
    let zero = ClassStats {
        min_accesses: u64::MAX,
        ..ClassStats::default()
    };
    assert!(s.per_class.iter().all(|c| *c == zero));
    assert_eq!(s.per_class.len(), 3);
    assert_eq!(s.max, Totals::default());
    assert_eq!(
        (
            s.ht_insertions,
            s.ht_deletions,
            s.ht_successful_searches,
            s.ht_failed_searches
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(
        (s.make_space_calls, s.total_hits, s.total_misses),
        (0, 0, 0)
    );
    assert_eq!((s.reads, s.writes, s.flash_increases), (0, 0, 0));
    assert_eq!(s.dirty_created, DirtyBytesCreated::default());
    assert!(
        h.cache
            .stats_report()
            .lines()
            .filter(|l| l.starts_with("rank3: class "))
            .all(|l| l.contains(": hits 0 misses 0 rprot 0 wprot 0 "))
    );

    h.touch(0, 0x1000, 64);
    h.cache.set_dump_stats_on_close(true);
    let dump = h.cache.close().unwrap().expect("dump requested");
    assert!(dump.lines().all(|l| l.starts_with("rank3: ")));
    assert!(dump.contains("rank3: class 0 mock-0: hits 1 misses 0 "));
    assert_eq!(h.cache.totals().index_len, 0);

    let mut h = harness(1, resize_cfg());
    h.touch(0, 0x1000, 64);
    assert_eq!(h.cache.close().unwrap(), None);
}

/// MDC-135: the full invariant check passes after a normal mixed workload; corrupting a total on
/// purpose makes `check_invariants` report `CacheError::Invariant`, and because the extreme-checks
/// feature re-validates after every public call, the next public call trips it. (The 100 000-step
/// random-operation fuzz lives in the property-test suite.)
#[test]
fn mdc_135_invariant_checks_catch_a_corrupted_total() {
    let mut h = harness(2, fixed(16 * KIB, 0.3));
    for i in 0..40u64 {
        if i % 3 == 0 {
            h.insert(1, 0x10_0000 + i * 0x1000, 512);
        } else {
            h.touch(0, i * 0x1000, 700);
        }
        if i % 10 == 9 {
            h.cache.flush(FlushFlags::NONE).unwrap();
        }
    }
    h.cache
        .insert(0, 0x80_0000, MockEntry::new(256), InsertFlags::PIN)
        .unwrap();
    let held = h
        .cache
        .protect(0, 39 * 0x1000, &700, ProtectFlags::READ_ONLY)
        .unwrap();
    assert!(h.cache.stats().total_evictions > 0);
    assert_eq!(h.cache.check_invariants().ok(), Some(()));
    h.cache.unprotect(held, UnprotectFlags::NONE).unwrap();
    assert_eq!(h.cache.check_invariants().ok(), Some(()));

    h.cache.debug_corrupt_totals_for_test();
    let err = h.cache.check_invariants().unwrap_err();
    assert!(
        matches!(err, CacheError::Invariant(what) if what.contains("clean and dirty")),
        "{err:?}"
    );
    let tripped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = h.cache.flush(FlushFlags::NONE);
    }));
    let payload = tripped.expect_err("the extreme check must fire after a public call");
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(msg.contains("invariant violated"), "{msg}");
}

/// MDC-136: the parallel debug counters. Three inserts totalling 300 B count 300 insert bytes in 3
/// updates (an unprotect that dirties a clean entry, a move of a clean entry and a mark-dirty of a
/// clean pinned entry count separately); applying a clean list (the simulated sync point) zeroes
/// them, marks the listed entries clean without writing, and counts one broadcast.
#[test]
fn mdc_136_dirty_bytes_created_since_last_sync_point() {
    let mut h = harness(1, fixed(MIB, 0.0));
    h.insert(0, 0x1000, 100);
    h.insert(0, 0x2000, 150);
    h.insert(0, 0x3000, 50);
    let d = h.cache.dirty_bytes_created();
    assert_eq!((d.insert_bytes, d.insert_updates), (300, 3));
    assert_eq!((d.total_bytes(), d.broadcasts), (300, 0));

    h.cache.apply_clean_list(&[0x1000, 0x2000, 0x3000]).unwrap();
    assert_eq!(
        h.cache.dirty_bytes_created(),
        DirtyBytesCreated {
            broadcasts: 1,
            ..DirtyBytesCreated::default()
        }
    );
    assert_eq!(h.cache.totals().dirty_size, 0);
    assert!(h.writes().is_empty());
    assert_eq!(h.classes[0].count(|e| matches!(e, Event::Clear { .. })), 3);

    // Other sources, each counted once per clean → dirty transition.
    let p = h
        .cache
        .protect(0, 0x1000, &100, ProtectFlags::NONE)
        .unwrap();
    h.cache.unprotect(p, UnprotectFlags::DIRTIED).unwrap();
    assert!(h.cache.move_entry(0, 0x2000, 0x6000).unwrap());
    let p = h.cache.protect(0, 0x3000, &50, ProtectFlags::NONE).unwrap();
    h.cache.unprotect(p, UnprotectFlags::PIN).unwrap();
    h.cache.mark_dirty(0x3000).unwrap();
    h.cache.mark_dirty(0x3000).unwrap(); // already dirty: not counted again
    let d = h.cache.dirty_bytes_created();
    assert_eq!((d.unprotect_bytes, d.unprotect_updates), (100, 1));
    assert_eq!((d.move_bytes, d.move_updates), (150, 1));
    assert_eq!((d.mark_dirty_bytes, d.mark_dirty_updates), (50, 1));
    assert_eq!((d.insert_bytes, d.total_bytes(), d.broadcasts), (0, 300, 1));

    h.cache.apply_clean_list(&[0x1000, 0x3000, 0x6000]).unwrap();
    let d = h.cache.dirty_bytes_created();
    assert_eq!((d.total_bytes(), d.broadcasts), (0, 2));
}

/// E-02 (MDC-046): a speculative or compressed class registered without `image_len` cannot exist:
/// `image_len` is a required method of `Class`, so such a class does not compile (see the
/// `compile_fail` doctest on `Class` in `src/class.rs`). What remains checkable at run time is the
/// class table itself (a gap in the ids or an empty name is `BadClass`), and that a speculative
/// load really asks `image_len` for the actual size after decoding.
#[test]
fn e_02_class_table_checks_and_speculative_image_len() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let gap: Vec<Arc<dyn Class<Mock>>> = vec![
        MockClass::new(0, "a", ClassFlags::NONE),
        MockClass::new(2, "c", ClassFlags::SPECULATIVE_LOAD),
    ];
    let err = CacheBuilder::new(storage.clone(), gap, MockFile::default())
        .build()
        .unwrap_err();
    assert!(matches!(err, CacheError::BadClass { id: 1, .. }), "{err:?}");
    let unnamed: Vec<Arc<dyn Class<Mock>>> = vec![
        MockClass::new(0, "a", ClassFlags::NONE),
        MockClass::new(1, "", ClassFlags::COMPRESSED),
    ];
    let err = CacheBuilder::new(storage.clone(), unnamed, MockFile::default())
        .build()
        .unwrap_err();
    assert!(matches!(err, CacheError::BadClass { id: 1, .. }), "{err:?}");
    let empty: Vec<Arc<dyn Class<Mock>>> = Vec::new();
    let err = CacheBuilder::new(storage, empty, MockFile::default())
        .build()
        .unwrap_err();
    assert!(matches!(err, CacheError::BadClass { .. }), "{err:?}");

    let mut h = harness_with_flags(&[ClassFlags::SPECULATIVE_LOAD], fixed(MIB, 0.0));
    h.classes[0].knobs().real_sizes = vec![48];
    h.touch(0, 0x1000, 64);
    assert_eq!(h.cache.status(0x1000).unwrap().size, 48);
    let ev = h.classes[0].events();
    let deser = ev
        .iter()
        .position(|e| matches!(e, Event::Deserialize { len: 64 }))
        .unwrap();
    let len = ev.iter().position(|e| *e == Event::ImageLen).unwrap();
    assert!(deser < len, "{ev:?}");
}
