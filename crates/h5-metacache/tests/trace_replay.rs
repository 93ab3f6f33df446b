//! Trace files and their replay (MDC-126 .. MDC-128): the writer, the parser, the replay engine and
//! the built-in tour workload.
use crate::common;
use common::*;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use h5_io::{MemoryStorage, Metrics, MetricsSnapshot};
use h5_metacache::replay::{
    Outcome, ParseErrorKind, ReplayError, ReplayOptions, SyntheticTypes, TourParams, TraceOp,
    TraceRecord, parse_trace, replay, synthetic_classes, tour_trace_with,
};
use h5_metacache::trace::TRACE_HEADER;
use h5_metacache::*;
use proptest::prelude::*;

// ----- helpers -----

/// xorshift64*, for deterministic workloads.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn tracing_config(base: CacheConfig, path: &Path) -> CacheConfig {
    CacheConfig {
        open_trace_file: true,
        trace_file_name: path.to_str().unwrap().to_string(),
        ..base
    }
}

fn closing_config(base: CacheConfig) -> CacheConfig {
    CacheConfig {
        close_trace_file: true,
        ..base
    }
}

// ----- MDC-126 -----

/// MDC-126: applying a config with `open_trace_file` opens the trace; insert, protect, unprotect and
/// flush each append one record, in order, after the header and the config record; after a config
/// with `close_trace_file` further calls add nothing. (The parallel rule "rank number appended to the
/// name" does not apply to this serial cache and is not tested.)
#[test]
fn mdc_126_trace_records_each_call_in_order_and_stops_on_close() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.trace");
    let mut h = harness(1, fixed(64 * 1024, 0.0));
    let cfg = tracing_config(fixed(64 * 1024, 0.0), &path);
    h.cache.set_config(&cfg).unwrap();
    assert!(h.cache.is_tracing());
    h.cache
        .insert(0, 0x100, MockEntry::new(64), InsertFlags::NONE)
        .unwrap();
    let ph = h.cache.protect(0, 0x100, &64, ProtectFlags::NONE).unwrap();
    h.cache.unprotect(ph, UnprotectFlags::DIRTIED).unwrap();
    h.cache.flush(FlushFlags::NONE).unwrap();
    h.cache.flush_trace().unwrap();
    let expected = vec![
        TRACE_HEADER.to_string(),
        format!("set_config {} # ok", cfg.to_json()),
        "insert 0x100 64 0 # ok".to_string(),
        "protect 0x100 64 0 # hit".to_string(),
        "unprotect 0x100 dirtied # ok".to_string(),
        "flush # ok".to_string(),
    ];
    assert_eq!(read_lines(&path), expected);

    h.cache
        .set_config(&closing_config(fixed(64 * 1024, 0.0)))
        .unwrap();
    assert!(!h.cache.is_tracing());
    h.touch(0, 0x100, 64);
    h.touch(0, 0x200, 64);
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(read_lines(&path), expected);
}

// ----- a live workload over synthetic clients (MDC-127, MDC-128) -----

const SLOT: u64 = 0x2000;
const NSLOTS: u64 = 300;
const SLOT_BASE: u64 = 0x1_0000;
const BIG_BASE: u64 = 0x40_0000;
const BIG_SLOT: u64 = 0x4_0000;
const NBIG: u64 = 4;
const STORAGE: usize = (BIG_BASE + NBIG * BIG_SLOT) as usize;
const BIG_CLASS: u8 = 3;

/// What a live run observed, to compare with its replay.
#[derive(Debug, PartialEq)]
struct Live {
    hits: u64,
    misses: u64,
    evictions: u64,
    max_size: usize,
    size: usize,
    io: MetricsSnapshot,
    reports: Vec<(ResizeOutcome, usize, usize)>,
    calls: usize,
    failed: usize,
}

fn base_config() -> CacheConfig {
    CacheConfig {
        rpt_fcn_enabled: true,
        initial_size: 128 * 1024,
        min_size: 64 * 1024,
        max_size: 4 * 1024 * 1024,
        epoch_length: 400,
        max_increment: 512 * 1024,
        max_decrement: 64 * 1024,
        ..CacheConfig::default_serial()
    }
}

/// A deterministic workload of a few thousand mixed calls (every traced kind, some failing on
/// purpose) on a cache of [`SyntheticTypes`], traced to `path`.
fn run_live(path: &Path, seed: u64, iterations: usize) -> Live {
    let storage = Arc::new(Metrics::new(MemoryStorage::with_data(vec![0u8; STORAGE])));
    let mut c =
        CacheBuilder::<SyntheticTypes>::new(storage.clone(), synthetic_classes(4), UnboundedFile)
            .build()
            .unwrap();
    c.set_config(&tracing_config(base_config(), path)).unwrap();
    let mut rng = Rng(seed | 1);
    let mut class_of: HashMap<u64, u8> = HashMap::new();
    let mut size_of: HashMap<u64, usize> = HashMap::new();
    for s in 0..NSLOTS {
        let a = SLOT_BASE + s * SLOT;
        class_of.insert(a, (s % 3) as u8);
        size_of.insert(a, 256 + ((s * 97) % 16) as usize * 256);
    }
    for k in 0..NBIG {
        let a = BIG_BASE + k * BIG_SLOT;
        class_of.insert(a, BIG_CLASS);
        size_of.insert(a, 16 * 1024);
    }
    let mut held: Vec<(u64, ProtectHandle)> = Vec::new();
    let mut pinned: BTreeSet<u64> = BTreeSet::new();
    let mut deps: Vec<(u64, u64)> = Vec::new();
    let (mut calls, mut failed) = (0usize, 0usize);
    let mut count = |ok: bool| {
        calls += 1;
        if !ok {
            failed += 1;
        }
    };
    let slot = |rng: &mut Rng| {
        // Skewed: low slots are hot.
        let a = rng.below(NSLOTS);
        let b = rng.below(NSLOTS);
        SLOT_BASE + a.min(b) * SLOT
    };
    for i in 0..iterations {
        if i == iterations / 2 {
            // A configuration change made by the workload itself.
            let cfg = CacheConfig {
                set_initial_size: false,
                epoch_length: 300,
                lower_hr_threshold: 0.95,
                ..base_config()
            };
            count(c.set_config(&cfg).is_ok());
        }
        if i % 700 == 699 {
            count(c.flush(FlushFlags::NONE).is_ok());
        }
        let is_held = |held: &Vec<(u64, ProtectHandle)>, a: u64| held.iter().any(|(x, _)| *x == a);
        match rng.below(100) {
            0..=49 => {
                let a = slot(&mut rng);
                let (cls, size) = (class_of[&a], size_of[&a]);
                let ro = rng.below(10) < 6;
                if is_held(&held, a) {
                    if ro {
                        // A second read-only protection (it fails if the first is read-write).
                        match c.protect(cls, a, &size, ProtectFlags::READ_ONLY) {
                            Ok(h) => {
                                count(true);
                                held.push((a, h));
                            }
                            Err(_) => count(false),
                        }
                    } else {
                        // A read-write protect of a protected entry fails.
                        count(c.protect(cls, a, &size, ProtectFlags::NONE).is_ok());
                    }
                    continue;
                }
                let flags = if ro {
                    ProtectFlags::READ_ONLY
                } else {
                    ProtectFlags::NONE
                };
                let Ok(h) = c.protect(cls, a, &size, flags) else {
                    count(false);
                    continue;
                };
                count(true);
                if held.len() < 4 && rng.chance(5) {
                    held.push((a, h));
                    continue;
                }
                let mut uf = UnprotectFlags::NONE;
                if !ro && rng.chance(3) {
                    uf |= UnprotectFlags::DIRTIED;
                }
                if !pinned.contains(&a) && pinned.len() < 8 && rng.chance(25) {
                    uf |= UnprotectFlags::PIN;
                    pinned.insert(a);
                } else if pinned.contains(&a) && rng.chance(4) {
                    uf |= UnprotectFlags::UNPIN;
                    pinned.remove(&a);
                }
                count(c.unprotect(h, uf).is_ok());
            }
            50..=57 => {
                if !held.is_empty() {
                    let (a, h) = held.swap_remove(rng.below(held.len() as u64) as usize);
                    let f = if !h.is_read_only() && rng.chance(2) {
                        UnprotectFlags::DIRTIED
                    } else {
                        UnprotectFlags::NONE
                    };
                    let _ = a;
                    count(c.unprotect(h, f).is_ok());
                }
            }
            58..=65 => {
                let a = slot(&mut rng);
                if c.contains(a) {
                    // Insert at a cached address fails.
                    let r = c.insert(class_of[&a], a, vec![1u8; 64], InsertFlags::NONE);
                    count(r.is_ok());
                } else {
                    let mut f = InsertFlags::NONE;
                    if pinned.len() < 8 && rng.chance(8) {
                        f |= InsertFlags::PIN;
                        pinned.insert(a);
                    }
                    if rng.chance(6) {
                        f |= InsertFlags::SET_FLUSH_MARKER;
                    }
                    let r = c.insert(class_of[&a], a, vec![7u8; size_of[&a]], f);
                    count(r.is_ok());
                }
            }
            66..=69 => {
                // Resize a pinned entry, or a protected one.
                let new = 256 * (1 + rng.below(32) as usize);
                if let Some(&a) = pinned.iter().nth(rng.below(8) as usize) {
                    let r = c.resize(a, new);
                    if r.is_ok() {
                        size_of.insert(a, new);
                    }
                    count(r.is_ok());
                } else {
                    let a = slot(&mut rng);
                    // Not protected: fails (unless pinned).
                    count(c.resize(a, new).is_ok());
                }
            }
            70..=72 => {
                let a = slot(&mut rng);
                if is_held(&held, a) {
                    continue;
                }
                if pinned.contains(&a) {
                    let r = c.unpin(a);
                    if r.is_ok() {
                        pinned.remove(&a);
                    }
                    count(r.is_ok());
                } else if pinned.len() < 8 {
                    let (cls, size) = (class_of[&a], size_of[&a]);
                    let h = c.protect(cls, a, &size, ProtectFlags::NONE).unwrap();
                    count(true);
                    count(c.pin_protected(a).is_ok());
                    pinned.insert(a);
                    count(c.unprotect(h, UnprotectFlags::NONE).is_ok());
                } else {
                    // pin of an entry that is not protected fails.
                    count(c.pin_protected(a).is_ok());
                }
            }
            73..=75 => {
                let a = slot(&mut rng);
                if is_held(&held, a) {
                    continue;
                }
                if rng.chance(2) {
                    count(c.mark_dirty(a).is_ok());
                } else {
                    count(c.mark_clean(a).is_ok());
                }
            }
            76..=79 => {
                let (a, b) = (slot(&mut rng), slot(&mut rng));
                if a == b || is_held(&held, a) || is_held(&held, b) || pinned.contains(&a) {
                    continue;
                }
                let cls = class_of[&a];
                let r = c.move_entry(cls, a, b);
                if let Ok(true) = r {
                    class_of.insert(b, cls);
                    size_of.insert(b, size_of[&a]);
                    deps.retain(|&(p, ch)| p != a && ch != a);
                }
                count(r.is_ok());
            }
            80..=82 => {
                let a = slot(&mut rng);
                if is_held(&held, a) {
                    continue;
                }
                let f = if rng.chance(2) {
                    ExpungeFlags::FREE_FILE_SPACE
                } else {
                    ExpungeFlags::NONE
                };
                count(c.expunge(class_of[&a], a, f).is_ok());
            }
            83..=85 => {
                let a = slot(&mut rng);
                if is_held(&held, a) || !c.contains(a) {
                    continue;
                }
                let f = if rng.chance(2) {
                    EntryFlushFlags::INVALIDATE
                } else {
                    EntryFlushFlags::NONE
                };
                count(c.flush_entry(a, f).is_ok());
            }
            86..=89 => {
                if !deps.is_empty() && rng.chance(2) {
                    let (p, ch) = deps.swap_remove(rng.below(deps.len() as u64) as usize);
                    count(c.destroy_flush_dependency(p, ch).is_ok());
                } else if let Some(&p) = pinned.iter().nth(rng.below(8) as usize) {
                    let ch = slot(&mut rng);
                    let r = c.create_flush_dependency(p, ch);
                    if r.is_ok() {
                        deps.push((p, ch));
                    }
                    count(r.is_ok());
                }
            }
            90..=93 => {
                // A large entry grows: flash increases.
                let a = BIG_BASE + rng.below(NBIG) * BIG_SLOT;
                if is_held(&held, a) {
                    continue;
                }
                let h = c
                    .protect(BIG_CLASS, a, &size_of[&a], ProtectFlags::NONE)
                    .unwrap();
                count(true);
                let new = (size_of[&a] + 48 * 1024).min(BIG_SLOT as usize);
                let new = if new == BIG_SLOT as usize && rng.chance(2) {
                    16 * 1024
                } else {
                    new
                };
                let r = c.resize(a, new);
                if r.is_ok() {
                    size_of.insert(a, new);
                }
                count(r.is_ok());
                count(c.unprotect(h, UnprotectFlags::DIRTIED).is_ok());
            }
            94..=95 => {
                let f = if rng.chance(2) {
                    FlushFlags::MARKED_ENTRIES
                } else {
                    FlushFlags::NONE
                };
                // Fails while protections are held.
                count(c.flush(f).is_ok());
            }
            _ => {
                // Protect of an address of the wrong class fails if it is cached.
                let a = slot(&mut rng);
                if is_held(&held, a) {
                    continue;
                }
                let wrong = (class_of[&a] + 1) % 3;
                match c.protect(wrong, a, &size_of[&a], ProtectFlags::NONE) {
                    Ok(h) => {
                        count(true);
                        class_of.insert(a, wrong);
                        count(c.unprotect(h, UnprotectFlags::NONE).is_ok());
                    }
                    Err(_) => count(false),
                }
            }
        }
    }
    for (_, h) in held.drain(..) {
        count(c.unprotect(h, UnprotectFlags::NONE).is_ok());
    }
    count(c.flush(FlushFlags::NONE).is_ok());
    let s = c.stats();
    let live = Live {
        hits: s.total_hits,
        misses: s.total_misses,
        evictions: s.total_evictions,
        max_size: c.size_info().max_size,
        size: c.size_info().cur_size,
        io: storage.snapshot(),
        reports: c
            .take_resize_reports()
            .iter()
            .map(|r| (r.outcome, r.old_max_size, r.new_max_size))
            .collect(),
        calls,
        failed,
    };
    c.set_config(&closing_config(base_config())).unwrap();
    live
}

// ----- MDC-127 -----

/// MDC-127: two runs of the same deterministic workload produce byte-identical traces (written to the
/// same path, since the set_config record names the file).
#[test]
fn mdc_127_same_workload_gives_byte_identical_traces() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.trace");
    let a = run_live(&path, 42, 1500);
    let first = std::fs::read(&path).unwrap();
    let b = run_live(&path, 42, 1500);
    let second = std::fs::read(&path).unwrap();
    assert_eq!(a, b);
    assert!(first.len() > 10_000, "trace has {} bytes", first.len());
    assert!(first == second, "the two traces differ");
    // A different workload gives a different trace.
    run_live(&path, 44, 1500);
    assert!(std::fs::read(&path).unwrap() != first);
}

/// MDC-127: the format is versioned and documented by its parser: every recorded line parses, and
/// printing the parsed record gives back exactly the recorded line (writer and parser agree), and
/// every call of the workload is one record with its result.
#[test]
fn mdc_127_every_recorded_line_round_trips_through_the_parser() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.trace");
    let live = run_live(&path, 7, 2000);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(TRACE_HEADER));
    let records = parse_trace(&text).unwrap();
    assert_eq!(records.len(), text.lines().count() - 1);
    for (rec, line) in records.iter().zip(text.lines().skip(1)) {
        assert_eq!(rec.to_string(), line, "line {}", rec.line);
        assert!(rec.expected.is_some(), "line {} has no result", rec.line);
    }
    // The first record is the configuration that opened the trace; then one record per call.
    assert!(matches!(records[0].op, TraceOp::SetConfig(ref c) if c.open_trace_file));
    assert_eq!(records.len(), 1 + live.calls);
    let errs = records
        .iter()
        .filter(|r| r.expected == Some(Outcome::Err))
        .count();
    assert_eq!(errs, live.failed);
    assert!(live.failed > 20, "the workload exercises failing calls");
    // Every kind of record the writer produces appears.
    let kinds: BTreeSet<&str> = records
        .iter()
        .map(|r| match r.op {
            TraceOp::Insert { .. } => "insert",
            TraceOp::Protect { .. } => "protect",
            TraceOp::Unprotect { .. } => "unprotect",
            TraceOp::Resize { .. } => "resize",
            TraceOp::Move { .. } => "move",
            TraceOp::Pin { .. } => "pin",
            TraceOp::Unpin { .. } => "unpin",
            TraceOp::MarkDirty { .. } => "mark_dirty",
            TraceOp::MarkClean { .. } => "mark_clean",
            TraceOp::Expunge { .. } => "expunge",
            TraceOp::FlushEntry { .. } => "flush_entry",
            TraceOp::FlushDep { .. } => "flush_dep",
            TraceOp::FlushUndep { .. } => "flush_undep",
            TraceOp::Flush => "flush",
            TraceOp::FlushMarked => "flush_marked",
            TraceOp::FlushInvalidate => "flush_invalidate",
            TraceOp::SetConfig(_) => "set_config",
        })
        .collect();
    for k in [
        "insert",
        "protect",
        "unprotect",
        "resize",
        "move",
        "pin",
        "unpin",
        "mark_dirty",
        "mark_clean",
        "expunge",
        "flush_entry",
        "flush_dep",
        "flush_undep",
        "flush",
        "flush_marked",
        "set_config",
    ] {
        assert!(kinds.contains(k), "no {k} record");
    }
}

// ----- MDC-128 -----

/// MDC-128: record a trace of a live workload of synthetic clients, replay it: the same hits, misses,
/// evictions, I/O, resize decisions and final max size, and no record whose result differs.
#[test]
fn mdc_128_replay_reproduces_the_live_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.trace");
    let live = run_live(&path, 2024, 4000);
    let records = parse_trace(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let report = replay(&records, &ReplayOptions::default()).unwrap();
    let s = &report.summary;
    assert_eq!(
        s.mismatches, 0,
        "first mismatches: {:?}",
        s.first_mismatches
    );
    assert_eq!((s.hits, s.misses), (live.hits, live.misses));
    assert_eq!(s.protects, live.hits + live.misses);
    assert_eq!(s.evictions, live.evictions);
    assert_eq!(s.final_max_size, live.max_size);
    assert_eq!(s.final_size, live.size);
    assert_eq!(
        (s.loads, s.bytes_read, s.flushes, s.bytes_written),
        (
            live.io.reads,
            live.io.bytes_read,
            live.io.writes,
            live.io.bytes_written
        )
    );
    let replayed: Vec<_> = s
        .resize_reports
        .iter()
        .map(|e| {
            (
                e.report.outcome,
                e.report.old_max_size,
                e.report.new_max_size,
            )
        })
        .collect();
    assert_eq!(replayed, live.reports);
    // The workload is rich enough for the comparison to mean something.
    assert!(live.misses > 500 && live.hits > 500, "{live:?}");
    assert!(live.evictions > 100, "{live:?}");
    assert!(
        live.reports
            .iter()
            .any(|r| r.0 == ResizeOutcome::FlashIncrease),
        "{:?}",
        live.reports
    );
    assert!(
        live.reports.iter().any(|r| r.0 == ResizeOutcome::Increase),
        "{:?}",
        live.reports
    );
    // Epoch lines: every `epoch_length` protects of the configuration in force.
    assert!(report.epochs.len() as u64 >= s.protects / 400);
    assert_eq!(report.epochs[0].epoch, 1);
}

/// MDC-128: a hand-written trace replays with exact counts; results that differ from the recorded
/// ones are mismatches (counted, listed by line), not errors.
#[test]
fn mdc_128_hand_written_trace_counts_and_mismatches() {
    let text = "\
# h5-metacache trace v1
set_config {\"initial_size\": 1048576, \"min_size\": 1048576}   # ok
insert 0x1000 512 0 pin     # ok
protect 0x1000 512 0 ro     # hit
protect 0x1000 512 0 ro     # hit
unprotect 0x1000            # ok
unprotect 0x1000            # ok
protect 4096 512 0          # miss
unprotect 0x1000
protect 0x8000 4096 1       # miss
unprotect 0x8000 dirtied    # ok
protect 0x8000 4096 1 ro    # miss
unprotect 0x8000
unprotect 0x9000            # ok
expunge 0x1000 0            # ok
flush                       # ok
";
    let records = parse_trace(text).unwrap();
    assert_eq!(records.len(), 15);
    let r = replay(&records, &ReplayOptions::default()).unwrap();
    let s = &r.summary;
    assert_eq!((s.protects, s.hits, s.misses), (5, 4, 1));
    assert_eq!((s.loads, s.bytes_read), (1, 4096));
    assert_eq!((s.flushes, s.bytes_written), (2, 512 + 4096));
    assert_eq!(s.final_max_size, 1024 * 1024);
    // line 8: a hit recorded as a miss; line 12: a hit recorded as a miss; line 14: no protection
    // is held at 0x9000; line 15: expunge of a pinned entry fails.
    assert_eq!(s.mismatches, 4);
    let lines: Vec<usize> = s.first_mismatches.iter().map(|m| m.line).collect();
    assert_eq!(lines, vec![8, 12, 14, 15]);
    assert_eq!(
        (s.first_mismatches[0].expected, s.first_mismatches[0].actual),
        (Outcome::Miss, Outcome::Hit)
    );
    assert_eq!(s.first_mismatches[2].actual, Outcome::Err);
    let text_report = r.to_text();
    assert!(text_report.contains("protects 5  hits 4  misses 1  hit rate 0.8000"));
    assert!(text_report.contains("mismatches 4 (first at lines 8, 12, 14, 15)"));
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(json["summary"]["protects"], 5);
    assert_eq!(json["summary"]["first_mismatches"][0]["expected"], "miss");
}

/// MDC-128: `ReplayOptions::config` replaces the trace's first set_config record; later set_config
/// records still apply. Epoch lines follow the epoch-length override even with resizing off.
#[test]
fn mdc_128_given_config_replaces_only_the_first_set_config() {
    let mut text = String::from("set_config {\"initial_size\": 1048576, \"min_size\": 1048576}\n");
    for i in 0..100u64 {
        text.push_str(&format!(
            "protect {:#x} 1024 0 ro\nunprotect {:#x}\n",
            i * 1024,
            i * 1024
        ));
    }
    text.push_str(
        "set_config {\"initial_size\": 3145728, \"min_size\": 1048576, \"incr_mode\": \"Off\", \
         \"flash_incr_mode\": \"Off\", \"decr_mode\": \"Off\"}\n",
    );
    for i in 0..100u64 {
        text.push_str(&format!(
            "protect {:#x} 1024 0 ro\nunprotect {:#x}\n",
            i * 1024,
            i * 1024
        ));
    }
    let records = parse_trace(&text).unwrap();
    let opts = |config: Option<CacheConfig>| ReplayOptions {
        config,
        epoch_length_override: Some(100),
    };
    let trace_only = replay(&records, &opts(None)).unwrap();
    let given = replay(
        &records,
        &opts(Some(CacheConfig::fixed_size(2 * 1024 * 1024))),
    )
    .unwrap();
    let maxes = |r: &h5_metacache::replay::ReplayReport| {
        r.epochs.iter().map(|e| e.max_size).collect::<Vec<_>>()
    };
    assert_eq!(maxes(&trace_only), vec![1024 * 1024, 3 * 1024 * 1024]);
    assert_eq!(maxes(&given), vec![2 * 1024 * 1024, 3 * 1024 * 1024]);
    assert_eq!(given.epoch_length, 100);
    assert_eq!(given.epochs[0].hit_rate, 0.0);
    assert_eq!(given.epochs[1].hit_rate, 1.0);
    assert_eq!(given.summary.final_max_size, 3 * 1024 * 1024);
}

/// MDC-128: traces recorded anywhere in a 64-bit file replay (addresses far past what fits in
/// memory: the replay's storage holds only what it writes).
#[test]
fn mdc_128_replays_traces_from_anywhere_in_a_64_bit_file() {
    let far = parse_trace(
        "protect 0x7fff00000000 64 0 # miss\n\
         unprotect 0x7fff00000000 dirtied\n\
         insert 0xffffffffffff0000 4096 1\n\
         protect 0x10 8 0 # miss\n\
         unprotect 0x10\n\
         protect 0x7fff00000000 64 0 # hit\n\
         unprotect 0x7fff00000000\n\
         flush\n",
    )
    .unwrap();
    let r = replay(&far, &ReplayOptions::default()).unwrap();
    let s = &r.summary;
    assert_eq!((s.protects, s.hits, s.misses, s.mismatches), (3, 1, 2, 0));
    assert_eq!((s.loads, s.bytes_read), (2, 72));
    assert_eq!((s.flushes, s.bytes_written), (2, 64 + 4096));
}

/// MDC-128: replays that cannot run report a typed error.
#[test]
fn mdc_128_replay_errors_are_typed() {
    let bad = ReplayOptions {
        config: Some(CacheConfig {
            min_size: 64 * 1024 * 1024,
            ..CacheConfig::default_serial()
        }),
        epoch_length_override: None,
    };
    let err = replay(&[], &bad).unwrap_err();
    assert!(matches!(
        err,
        ReplayError::Config(ConfigError {
            field: "min_size",
            ..
        })
    ));
    let err = replay(
        &[],
        &ReplayOptions {
            config: None,
            epoch_length_override: Some(5),
        },
    )
    .unwrap_err();
    assert!(matches!(
        err,
        ReplayError::Config(ConfigError {
            field: "epoch_length",
            ..
        })
    ));
}

// ----- the parser -----

/// MDC-127: malformed lines are rejected with the line number and what is wrong.
#[test]
fn mdc_127_parser_errors_name_the_line_and_the_problem() {
    type Check = fn(&ParseErrorKind) -> bool;
    let cases: Vec<(&str, usize, Check)> = vec![
        (
            "flush\nfrobnicate 0x10\n",
            2,
            |k| matches!(k, ParseErrorKind::UnknownOp(w) if w == "frobnicate"),
        ),
        (
            "\n\nprotect 0x10 12z 0\n",
            3,
            |k| matches!(k, ParseErrorKind::BadNumber { op: "protect", field: "SIZE", text, .. } if text == "12z"),
        ),
        ("insert 0x10 64\n", 1, |k| {
            matches!(
                k,
                ParseErrorKind::MissingField {
                    op: "insert",
                    field: "TYPE"
                }
            )
        }),
        (
            "insert 0x10 64 0 pinned\n",
            1,
            |k| matches!(k, ParseErrorKind::UnknownFlag { op: "insert", word } if word == "pinned"),
        ),
        (
            "unprotect 0x10 dirty # ok\n",
            1,
            |k| matches!(k, ParseErrorKind::UnknownFlag { op: "unprotect", word } if word == "dirty"),
        ),
        ("protect 0x10 64 256\n", 1, |k| {
            matches!(k, ParseErrorKind::BadNumber { field: "TYPE", .. })
        }),
        ("protect 0x 64 0\n", 1, |k| {
            matches!(k, ParseErrorKind::BadNumber { field: "ADDR", .. })
        }),
        ("protect 0x1ffffffffffffffff 64 0\n", 1, |k| {
            matches!(k, ParseErrorKind::BadNumber { field: "ADDR", .. })
        }),
        (
            "resize 0x10 64 99\n",
            1,
            |k| matches!(k, ParseErrorKind::Extra { op: "resize", word } if word == "99"),
        ),
        ("flush now\n", 1, |k| {
            matches!(k, ParseErrorKind::Extra { op: "flush", .. })
        }),
        ("set_config {\"initial_size\": \n", 1, |k| {
            matches!(k, ParseErrorKind::BadConfig(_))
        }),
        (
            "set_config {\"no_such_field\": 1}\n",
            1,
            |k| matches!(k, ParseErrorKind::BadConfig(m) if m.contains("no_such_field")),
        ),
        ("set_config {\"incr_mode\": \"Sometimes\"}\n", 1, |k| {
            matches!(k, ParseErrorKind::BadConfig(_))
        }),
        ("set_config [1, 2]\n", 1, |k| {
            matches!(k, ParseErrorKind::BadConfig(_))
        }),
        (
            "set_config {} trailing\n",
            1,
            |k| matches!(k, ParseErrorKind::Extra { op: "set_config", word } if word == "trailing"),
        ),
        ("set_config # ok\n", 1, |k| {
            matches!(
                k,
                ParseErrorKind::MissingField {
                    op: "set_config",
                    ..
                }
            )
        }),
        (
            "# h5-metacache trace v2\nflush\n",
            1,
            |k| matches!(k, ParseErrorKind::UnsupportedVersion(v) if v == "2"),
        ),
    ];
    for (text, line, check) in cases {
        let err = parse_trace(text).unwrap_err();
        assert_eq!(err.line, line, "{text:?}: {err}");
        assert!(check(&err.kind), "{text:?}: {:?}", err.kind);
        assert!(err.to_string().starts_with(&format!("trace line {line}: ")));
    }
}

/// MDC-127: the parser's conveniences for hand-written traces: decimal or hex numbers, comments,
/// blank lines, flags in any order, an optional TYPE on move and expunge, defaults in set_config.
#[test]
fn mdc_127_parser_accepts_hand_written_forms() {
    let text = "\
  # a comment
protect 4096 0x40 3 ro#hit

unprotect 4096 pin dirtied   # ok, with words after the result
move 0x10 0x20
move 0x10 0x20 2 # absent
expunge 0x30 free_space
set_config {\"initial_size\": 1048576} # ok
set_config {\"trace_file_name\": \"a # b\"}
";
    let r = parse_trace(text).unwrap();
    assert_eq!(r.len(), 7);
    assert_eq!(
        r[0],
        TraceRecord {
            line: 2,
            op: TraceOp::Protect {
                addr: 4096,
                size: 64,
                class: 3,
                read_only: true
            },
            expected: Some(Outcome::Hit)
        }
    );
    assert_eq!(
        r[1].op,
        TraceOp::Unprotect {
            addr: 4096,
            flags: UnprotectFlags::DIRTIED | UnprotectFlags::PIN
        }
    );
    assert_eq!(r[1].expected, Some(Outcome::Ok));
    assert_eq!(r[1].to_string(), "unprotect 0x1000 dirtied pin # ok");
    assert!(matches!(r[2].op, TraceOp::Move { class: None, .. }));
    assert_eq!(r[2].expected, None);
    assert!(matches!(
        r[3].op,
        TraceOp::Move {
            class: Some(2),
            new_addr: 0x20,
            ..
        }
    ));
    assert_eq!(r[3].expected, Some(Outcome::Absent));
    assert!(matches!(
        r[4].op,
        TraceOp::Expunge { addr: 0x30, class: None, flags } if flags == ExpungeFlags::FREE_FILE_SPACE
    ));
    match &r[5].op {
        TraceOp::SetConfig(c) => {
            assert_eq!(c.initial_size, 1024 * 1024);
            assert_eq!(c.max_size, CacheConfig::default_serial().max_size);
        }
        other => panic!("{other:?}"),
    }
    match &r[6].op {
        TraceOp::SetConfig(c) => assert_eq!(c.trace_file_name, "a # b"),
        other => panic!("{other:?}"),
    }
}

fn arb_op() -> impl Strategy<Value = TraceOp> {
    let addr = any::<u64>();
    let size = 0usize..1 << 20;
    prop_oneof![
        (addr, size.clone(), any::<u8>(), 0u16..8).prop_map(|(addr, size, class, f)| {
            let mut flags = InsertFlags::NONE;
            for (bit, fl) in [
                (1, InsertFlags::PIN),
                (2, InsertFlags::FLUSH_LAST),
                (4, InsertFlags::SET_FLUSH_MARKER),
            ] {
                if f & bit != 0 {
                    flags |= fl;
                }
            }
            TraceOp::Insert {
                addr,
                size,
                class,
                flags,
            }
        }),
        (addr, size.clone(), any::<u8>(), any::<bool>()).prop_map(
            |(addr, size, class, read_only)| TraceOp::Protect {
                addr,
                size,
                class,
                read_only
            }
        ),
        (addr, 0u16..128).prop_map(|(addr, f)| {
            let mut flags = UnprotectFlags::NONE;
            for (i, fl) in [
                UnprotectFlags::DIRTIED,
                UnprotectFlags::DELETED,
                UnprotectFlags::PIN,
                UnprotectFlags::UNPIN,
                UnprotectFlags::SET_FLUSH_MARKER,
                UnprotectFlags::FREE_FILE_SPACE,
                UnprotectFlags::TAKE_OWNERSHIP,
            ]
            .into_iter()
            .enumerate()
            {
                if f & (1 << i) != 0 {
                    flags |= fl;
                }
            }
            TraceOp::Unprotect { addr, flags }
        }),
        (addr, size).prop_map(|(addr, new_size)| TraceOp::Resize { addr, new_size }),
        (addr, addr, proptest::option::of(any::<u8>())).prop_map(|(old_addr, new_addr, class)| {
            TraceOp::Move {
                old_addr,
                new_addr,
                class,
            }
        }),
        addr.prop_map(|addr| TraceOp::Pin { addr }),
        addr.prop_map(|addr| TraceOp::MarkClean { addr }),
        (addr, proptest::option::of(any::<u8>()), any::<bool>()).prop_map(|(addr, class, fs)| {
            TraceOp::Expunge {
                addr,
                class,
                flags: if fs {
                    ExpungeFlags::FREE_FILE_SPACE
                } else {
                    ExpungeFlags::NONE
                },
            }
        }),
        (addr, any::<bool>()).prop_map(|(addr, inv)| TraceOp::FlushEntry {
            addr,
            flags: if inv {
                EntryFlushFlags::INVALIDATE
            } else {
                EntryFlushFlags::CLEAR_ONLY
            }
        }),
        (addr, addr).prop_map(|(parent, child)| TraceOp::FlushUndep { parent, child }),
        Just(TraceOp::FlushMarked),
        (1024usize..1 << 27, 0.0f64..1.0).prop_map(|(initial_size, f)| {
            TraceOp::SetConfig(Box::new(CacheConfig {
                initial_size,
                min_clean_fraction: f,
                ..CacheConfig::default_serial()
            }))
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// MDC-127: random text never panics the parser; an error names a line of the input.
    #[test]
    fn mdc_127_parser_never_panics_on_random_text(text in "\\PC{0,200}") {
        match parse_trace(&text) {
            Ok(records) => prop_assert!(records.len() <= text.lines().count()),
            Err(e) => prop_assert!(e.line >= 1 && e.line <= text.lines().count()),
        }
    }

    /// MDC-127: lines assembled from the format's own words and numbers in random order never panic
    /// the parser either (this reaches far deeper than arbitrary text).
    #[test]
    fn mdc_127_parser_never_panics_on_scrambled_records(
        words in proptest::collection::vec(
            prop_oneof![
                Just("insert"), Just("protect"), Just("unprotect"), Just("set_config"),
                Just("move"), Just("expunge"), Just("flush_entry"), Just("flush_dep"),
                Just("ro"), Just("pin"), Just("dirtied"), Just("#"), Just("# ok"), Just("hit"),
                Just("0x"), Just("0x10"), Just("18446744073709551616"), Just("255"), Just("256"),
                Just("{"), Just("}"), Just("{\"initial_size\": 1}"), Just("\"x\""), Just("\n"),
                Just("-1"), Just("é"), Just("\t"),
            ],
            0..40,
        )
    ) {
        let text = words.join(" ");
        match parse_trace(&text) {
            Ok(records) => prop_assert!(records.len() <= text.lines().count()),
            Err(e) => prop_assert!(e.line >= 1 && e.line <= text.lines().count()),
        }
    }

    /// MDC-127: every record the writer's format can express parses back to itself.
    #[test]
    fn mdc_127_records_round_trip(op in arb_op(), result in 0usize..6) {
        let expected = [
            None,
            Some(Outcome::Ok),
            Some(Outcome::Hit),
            Some(Outcome::Miss),
            Some(Outcome::Absent),
            Some(Outcome::Err),
        ][result];
        let rec = TraceRecord { line: 1, op, expected };
        let parsed = parse_trace(&rec.to_string()).unwrap();
        prop_assert_eq!(parsed, vec![rec]);
    }
}

// ----- the tour -----

/// The tour scaled down by `k` for a debug build that checks every invariant after every call: `k`
/// times fewer and `k` times larger nodes, `k` times fewer steps, and an epoch `k` times shorter than
/// the default 50,000 protects. That keeps the bytes, and the accesses per node and per epoch, of the
/// full tour, so the cache behaves alike (the full tour is what `h5 tour` replays; its CLI test checks
/// it too).
fn scaled_tour(k: usize) -> (Vec<TraceRecord>, u64) {
    let d = TourParams::default();
    let p = TourParams {
        steps: d.steps / k,
        leaves: d.leaves / k,
        growth_steps: d.growth_steps / k,
        size_scale: k,
        ..d
    };
    let epoch = CacheConfig::default_serial().epoch_length / k as u64;
    (parse_trace(&tour_trace_with(&p)).unwrap(), epoch)
}

/// MDC-128 (the replay tool's purpose, offline tuning): on the tour workload the default adaptive
/// configuration grows by flash increases (the heap doubling) then threshold increases and ends
/// above a 0.95 hit rate, while a fixed 2 MiB cache, which cannot hold the pinned heap, stays below
/// 0.8.
#[test]
fn mdc_128_tour_adaptive_default_beats_fixed_2mib() {
    let (records, epoch) = scaled_tour(40);
    let run = |config: CacheConfig| {
        replay(
            &records,
            &ReplayOptions {
                config: Some(config),
                epoch_length_override: Some(epoch),
            },
        )
        .unwrap()
    };
    let adaptive = run(CacheConfig::default_serial());
    let fixed = run(CacheConfig::fixed_size(2 * 1024 * 1024));
    for r in [&adaptive, &fixed] {
        assert_eq!(r.summary.mismatches, 0);
        assert!(r.epochs.len() >= 8, "{} epochs", r.epochs.len());
        assert_eq!(r.summary.protects, adaptive.summary.protects);
    }
    let last = |r: &h5_metacache::replay::ReplayReport| r.epochs.last().unwrap().hit_rate;
    assert!(last(&adaptive) > 0.95, "{}", adaptive.to_text());
    assert!(last(&fixed) < 0.8, "{}", fixed.to_text());
    let outcomes: Vec<ResizeOutcome> = adaptive
        .summary
        .resize_reports
        .iter()
        .map(|e| e.report.outcome)
        .collect();
    let first_flash = outcomes
        .iter()
        .position(|o| *o == ResizeOutcome::FlashIncrease)
        .expect("a flash increase");
    let first_increase = outcomes
        .iter()
        .position(|o| *o == ResizeOutcome::Increase)
        .expect("a threshold increase");
    assert!(first_flash < first_increase, "{outcomes:?}");
    // Within a few epochs the hit rate is above 0.95 for good.
    let settled = adaptive
        .epochs
        .iter()
        .rposition(|e| e.hit_rate <= 0.95)
        .map_or(0, |i| i + 1);
    assert!(settled <= 5, "{}", adaptive.to_text());
    // Meanwhile the fixed cache is below 0.8 from the second epoch on.
    assert!(
        fixed.epochs[1..].iter().all(|e| e.hit_rate < 0.8),
        "{}",
        fixed.to_text()
    );
    // The fixed cache never resizes, and reads far more.
    assert!(
        fixed
            .summary
            .resize_reports
            .iter()
            .all(|e| !e.changed_size())
    );
    assert_eq!(fixed.summary.final_max_size, 2 * 1024 * 1024);
    assert!(fixed.summary.loads > 4 * adaptive.summary.loads);
    assert!(adaptive.summary.final_max_size > 8 * 1024 * 1024);
}
