//! Trace replay: synthetic clients and a replay engine (MDC-128).
//!
//! HDF5 has no playback tool for its metadata cache traces; this module is the extension MDC-128 asks
//! for. A trace recorded from a live cache or written by hand (the v1 format is defined, written and
//! parsed in [`crate::trace`]) is parsed with [`parse_trace`] and replayed with [`replay`] against a
//! fresh [`MetadataCache`] whose clients are [`SyntheticTypes`]: plain byte vectors sized from the
//! trace. The replay reports the hit rate per epoch, the resize decisions and the I/O, so
//! configurations can be tuned offline.
//!
//! The format types ([`TraceOp`], [`Outcome`], [`TraceRecord`], [`TraceParseError`],
//! [`ParseErrorKind`]) and [`parse_trace`] live in [`crate::trace`] and are re-exported here.
//!
//! # Replay
//!
//! [`replay`] builds a cache over [`h5_io::Metrics`]`<`[`SparseStorage`]`>` as long as the largest
//! `ADDR + SIZE` of the trace, so every load succeeds wherever in a 64-bit file the trace was
//! recorded (unwritten bytes read as zero and take no memory), with [`synthetic_classes`] up to the
//! largest `TYPE`. It then runs every record and compares the result with the recorded one; see
//! [`ReplayOptions`] for how a given configuration interacts with the trace's `set_config` records.
//!
//! ```
//! use h5_metacache::replay::{parse_trace, replay, ReplayOptions};
//!
//! let trace = "\
//! set_config {\"initial_size\": 1048576, \"min_size\": 1048576}
//! insert 0x1000 512 0   # ok
//! protect 0x1000 512 0 ro # hit
//! unprotect 0x1000        # ok
//! protect 0x4000 4096 1  # miss
//! unprotect 0x4000 dirtied
//! flush                   # ok
//! ";
//! let records = parse_trace(trace)?;
//! let report = replay(&records, &ReplayOptions::default())?;
//! assert_eq!((report.summary.protects, report.summary.hits, report.summary.misses), (2, 1, 1));
//! assert_eq!(report.summary.loads, 1);           // the miss read 4096 bytes
//! assert_eq!(report.summary.flushes, 2);         // both dirty entries written by the flush
//! assert_eq!(report.summary.mismatches, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use h5_io::Metrics;
use serde::Serialize;

use crate::MetadataCache;
use crate::cache::{CacheBuilder, ProtectHandle};
use crate::class::{
    CacheTypes, Class, ClassFlags, ClassInfo, Deserialized, MemType, UnboundedFile,
};
use crate::config::{CACHE_CONFIG_VERSION, CacheConfig, ConfigError};
use crate::error::{CacheError, ClientError};
use crate::flags::{FlushFlags, ProtectFlags};
use crate::resize::{ResizeOutcome, ResizeReport};

mod sparse;
pub mod workloads;

pub use crate::trace::{
    Outcome, ParseErrorKind, TraceOp, TraceParseError, TraceRecord, parse_trace,
};
pub use sparse::SparseStorage;
pub use workloads::{TourParams, tour_trace, tour_trace_with};

// ----- synthetic clients -----

/// A client family of byte-vector entries, for replay, the tour and benchmarks.
///
/// A load of `n` bytes (the udata) decodes to those bytes, and serialize writes them back
/// (zero-padded after a resize).
#[derive(Debug)]
pub struct SyntheticTypes;

impl CacheTypes for SyntheticTypes {
    type Icr = Vec<u8>;
    type Udata = usize;
    type Ctx = UnboundedFile;
}

/// A synthetic class: loads `udata` bytes, serializes the entry's bytes.
#[derive(Debug)]
pub struct SyntheticClass {
    info: ClassInfo,
}

const SYNTHETIC_NAMES: [&str; 8] = [
    "synthetic-0",
    "synthetic-1",
    "synthetic-2",
    "synthetic-3",
    "synthetic-4",
    "synthetic-5",
    "synthetic-6",
    "synthetic-7",
];

/// A class table of `n` synthetic classes (ids `0..n`, at most 32).
pub fn synthetic_classes(n: usize) -> Vec<Arc<dyn Class<SyntheticTypes>>> {
    (0..n.min(crate::MAX_CLASS_IDS))
        .map(|i| {
            Arc::new(SyntheticClass {
                info: ClassInfo {
                    id: i as u8,
                    name: SYNTHETIC_NAMES.get(i).copied().unwrap_or("synthetic"),
                    flags: ClassFlags::NONE,
                    mem_type: MemType::Other,
                },
            }) as Arc<dyn Class<SyntheticTypes>>
        })
        .collect()
}

impl Class<SyntheticTypes> for SyntheticClass {
    fn info(&self) -> &ClassInfo {
        &self.info
    }
    fn get_initial_load_size(&self, udata: &usize) -> Result<usize, ClientError> {
        Ok(*udata)
    }
    fn deserialize(
        &self,
        image: &[u8],
        _udata: &usize,
    ) -> Result<Deserialized<Vec<u8>>, ClientError> {
        Ok(Deserialized::clean(image.to_vec()))
    }
    fn image_len(&self, icr: &Vec<u8>) -> Result<usize, ClientError> {
        Ok(icr.len())
    }
    fn serialize(
        &self,
        _cache: &mut MetadataCache<SyntheticTypes>,
        icr: &mut Vec<u8>,
        image: &mut [u8],
    ) -> Result<(), ClientError> {
        let n = image.len().min(icr.len());
        image[..n].copy_from_slice(&icr[..n]);
        image[n..].fill(0);
        Ok(())
    }
}

// ----- replay -----

/// How many mismatching records a report lists by line (all are counted).
pub const MAX_LISTED_MISMATCHES: usize = 10;

/// Replay settings.
///
/// The cache starts with the default serial configuration. A trace recorded from a live cache starts
/// with the `set_config` record that opened the trace file; that record sets the configuration the
/// recording ran with. When `config` is given it **replaces the trace's first `set_config` record**
/// (the cache is built with it and that record is skipped); later `set_config` records still apply,
/// because they are changes the workload itself made. Every configuration the replay applies is
/// adjusted: trace-file opening and closing are dropped (a replay never writes a trace), resize
/// reports are switched on (they only add reporting), and `epoch_length_override` replaces the epoch
/// length.
#[derive(Clone, Debug, Default)]
pub struct ReplayOptions {
    /// Configuration that replaces the trace's first `set_config` record.
    pub config: Option<CacheConfig>,
    /// Epoch length (protects) for the per-epoch lines and for every configuration applied; `None`:
    /// the active configuration's `epoch_length`.
    pub epoch_length_override: Option<u64>,
}

/// Why a replay could not run at all (a record that fails is a mismatch, not an error).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The configuration given in [`ReplayOptions`] is invalid.
    #[error("invalid replay configuration: {0}")]
    Config(#[from] ConfigError),
    /// The cache could not be built.
    #[error("cannot build the replay cache: {0}")]
    Build(#[source] CacheError),
    /// The cache broke one of its invariants during the replay (a bug in the cache).
    #[error("the cache broke an invariant during the replay: {0}")]
    Invariant(#[source] CacheError),
}

/// One full epoch of the replay: `epoch_length` successful protects.
#[derive(Clone, Copy, PartialEq, Debug, Serialize)]
pub struct EpochLine {
    /// 1-based epoch number.
    pub epoch: u64,
    /// Hits / protects within this epoch.
    pub hit_rate: f64,
    /// Maximum cache size at the epoch's end (after the cache's own epoch-end resizing).
    pub max_size: usize,
    /// Bytes cached at the epoch's end.
    pub cur_size: usize,
}

/// A resize report delivered during the replay, with where it happened.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct ResizeEvent {
    /// Trace line of the call during which the cache resized.
    pub line: usize,
    /// Successful protects replayed up to and including that call.
    pub protects: u64,
    /// The cache's report.
    pub report: ResizeReport,
}

impl ResizeEvent {
    /// Whether the maximum size changed (increase, flash increase or decrease).
    pub fn changed_size(&self) -> bool {
        matches!(
            self.report.outcome,
            ResizeOutcome::Increase | ResizeOutcome::FlashIncrease | ResizeOutcome::Decrease
        )
    }
}

impl Serialize for ResizeEvent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json {
            line: usize,
            protects: u64,
            epoch: u64,
            outcome: String,
            hit_rate: f64,
            old_max_size: usize,
            new_max_size: usize,
            old_min_clean_size: usize,
            new_min_clean_size: usize,
            cur_size: usize,
        }
        let r = &self.report;
        Json {
            line: self.line,
            protects: self.protects,
            epoch: r.epoch,
            outcome: format!("{:?}", r.outcome),
            hit_rate: r.hit_rate,
            old_max_size: r.old_max_size,
            new_max_size: r.new_max_size,
            old_min_clean_size: r.old_min_clean_size,
            new_min_clean_size: r.new_min_clean_size,
            cur_size: r.cur_size,
        }
        .serialize(s)
    }
}

impl fmt::Display for ResizeEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.report;
        let what = match r.outcome {
            ResizeOutcome::FlashIncrease => "flash increase",
            ResizeOutcome::Increase => "increase",
            ResizeOutcome::Decrease => "decrease",
            ResizeOutcome::InSpec => "in spec",
            ResizeOutcome::AtMaxSize => "at max size",
            ResizeOutcome::AtMinSize => "at min size",
            ResizeOutcome::NotFull => "not full",
            ResizeOutcome::IncreaseDisabled => "increase disabled",
            ResizeOutcome::DecreaseDisabled => "decrease disabled",
        };
        write!(
            f,
            "after {} protects (line {}): {what}, max {} -> {}, hit rate {:.4}",
            self.protects, self.line, r.old_max_size, r.new_max_size, r.hit_rate
        )
    }
}

/// A record whose replayed result differs from the recorded one.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
pub struct Mismatch {
    /// Trace line.
    pub line: usize,
    /// Recorded result.
    pub expected: Outcome,
    /// Replayed result.
    pub actual: Outcome,
}

/// Totals of a replay.
#[derive(Clone, PartialEq, Debug, Serialize)]
pub struct ReplaySummary {
    /// Records replayed.
    pub records: usize,
    /// Successful protects.
    pub protects: u64,
    /// Protects that found the entry cached.
    pub hits: u64,
    /// Protects that loaded the entry.
    pub misses: u64,
    /// `hits / protects` (0 without protects).
    pub hit_rate: f64,
    /// Storage reads.
    pub loads: u64,
    /// Storage writes.
    pub flushes: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Entries evicted (the cache's `total_evictions`).
    pub evictions: u64,
    /// Maximum cache size at the end.
    pub final_max_size: usize,
    /// Bytes cached at the end.
    pub final_size: usize,
    /// Every resize report, in order.
    pub resize_reports: Vec<ResizeEvent>,
    /// Records whose result differs from the recorded one (failed where the trace succeeded or the
    /// other way round, or a hit where the trace says miss and vice versa).
    pub mismatches: u64,
    /// The first [`MAX_LISTED_MISMATCHES`] mismatches.
    pub first_mismatches: Vec<Mismatch>,
}

/// What a replay observed: one line per full epoch and the totals.
#[derive(Clone, PartialEq, Debug, Serialize)]
pub struct ReplayReport {
    /// Epoch length used for [`epochs`](Self::epochs) (at the end of the replay).
    pub epoch_length: u64,
    /// One line per `epoch_length` successful protects; a final partial epoch has no line.
    pub epochs: Vec<EpochLine>,
    /// Totals.
    pub summary: ReplaySummary,
}

impl ReplayReport {
    /// Readable text: one line per epoch, the size changes, then the totals.
    ///
    /// ```text
    /// epoch 1  hit rate 0.9876  max 4194304  size 3145728
    /// ```
    pub fn to_text(&self) -> String {
        use fmt::Write as _;
        let mut t = String::new();
        for e in &self.epochs {
            let _ = writeln!(t, "{e}");
        }
        let s = &self.summary;
        for r in s.resize_reports.iter().filter(|r| r.changed_size()) {
            let _ = writeln!(t, "resize {r}");
        }
        let _ = writeln!(
            t,
            "protects {}  hits {}  misses {}  hit rate {:.4}",
            s.protects, s.hits, s.misses, s.hit_rate
        );
        let _ = writeln!(
            t,
            "loads {} ({} bytes)  flushes {} ({} bytes)  evictions {}",
            s.loads, s.bytes_read, s.flushes, s.bytes_written, s.evictions
        );
        let _ = writeln!(
            t,
            "final max size {}  final size {}",
            s.final_max_size, s.final_size
        );
        let lines: Vec<String> = s
            .first_mismatches
            .iter()
            .map(|m| m.line.to_string())
            .collect();
        if s.mismatches == 0 {
            let _ = writeln!(t, "records {}  mismatches 0", s.records);
        } else {
            let _ = writeln!(
                t,
                "records {}  mismatches {} (first at lines {})",
                s.records,
                s.mismatches,
                lines.join(", ")
            );
        }
        t
    }

    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".to_string())
    }
}

impl fmt::Display for EpochLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "epoch {}  hit rate {:.4}  max {}  size {}",
            self.epoch, self.hit_rate, self.max_size, self.cur_size
        )
    }
}

/// Largest `ADDR + SIZE` the records touch, and the largest class id.
fn trace_extent(records: &[TraceRecord]) -> (u64, u8) {
    let mut extent = 0u64;
    let mut max_class = 0u8;
    let mut size_of: HashMap<u64, u64> = HashMap::new();
    for r in records {
        let mut reach = |addr: u64, size: usize| {
            extent = extent.max(addr.saturating_add(size as u64));
        };
        match &r.op {
            TraceOp::Insert {
                addr, size, class, ..
            }
            | TraceOp::Protect {
                addr, size, class, ..
            } => {
                reach(*addr, *size);
                size_of.insert(*addr, *size as u64);
                max_class = max_class.max(*class);
            }
            TraceOp::Resize { addr, new_size } => {
                reach(*addr, *new_size);
                size_of.insert(*addr, *new_size as u64);
            }
            TraceOp::Move {
                old_addr,
                new_addr,
                class,
            } => {
                let size = size_of.get(old_addr).copied().unwrap_or(0);
                reach(*new_addr, size as usize);
                size_of.insert(*new_addr, size);
                if let Some(c) = class {
                    max_class = max_class.max(*c);
                }
            }
            TraceOp::Expunge { class: Some(c), .. } => max_class = max_class.max(*c),
            _ => {}
        }
    }
    (extent, max_class)
}

/// The configuration the replay applies in place of `c` (see [`ReplayOptions`]).
fn adjust(c: &CacheConfig, opts: &ReplayOptions) -> CacheConfig {
    let mut c = c.clone();
    c.open_trace_file = false;
    c.close_trace_file = false;
    c.trace_file_name = String::new();
    c.rpt_fcn_enabled = true;
    if let Some(n) = opts.epoch_length_override {
        c.epoch_length = n;
    }
    c
}

struct Engine {
    cache: MetadataCache<SyntheticTypes>,
    metrics: Arc<Metrics<SparseStorage>>,
    handles: HashMap<u64, Vec<ProtectHandle>>,
    epoch_length: u64,
    override_epoch: bool,
    epoch_protects: u64,
    epoch_hits: u64,
    epochs: Vec<EpochLine>,
    protects: u64,
    hits: u64,
    misses: u64,
    /// The first invariant violation seen at an epoch boundary.
    invariant_error: Option<CacheError>,
}

fn outcome<T>(r: &Result<T, CacheError>) -> Outcome {
    if r.is_ok() { Outcome::Ok } else { Outcome::Err }
}

impl Engine {
    /// The class an address-only call names: the cached entry's, else 0.
    fn class_at(&mut self, addr: u64) -> u8 {
        self.cache.status(addr).map(|s| s.class).unwrap_or(0)
    }

    fn refresh_epoch_length(&mut self) {
        if !self.override_epoch
            && let Ok(c) = self.cache.get_config(CACHE_CONFIG_VERSION)
        {
            self.epoch_length = c.epoch_length.max(1);
        }
    }

    fn count_protect(&mut self, hit: bool) {
        self.protects += 1;
        self.epoch_protects += 1;
        if hit {
            self.hits += 1;
            self.epoch_hits += 1;
        } else {
            self.misses += 1;
        }
        if self.epoch_protects >= self.epoch_length {
            if self.invariant_error.is_none() {
                self.invariant_error = self.cache.check_invariants().err();
            }
            let info = self.cache.size_info();
            self.epochs.push(EpochLine {
                epoch: self.epochs.len() as u64 + 1,
                hit_rate: self.epoch_hits as f64 / self.epoch_protects as f64,
                max_size: info.max_size,
                cur_size: info.cur_size,
            });
            self.epoch_protects = 0;
            self.epoch_hits = 0;
        }
    }

    fn run(&mut self, op: &TraceOp, opts: &ReplayOptions) -> Outcome {
        let c = &mut self.cache;
        match op {
            TraceOp::Insert {
                addr,
                size,
                class,
                flags,
            } => outcome(&c.insert(*class, *addr, vec![0u8; *size], *flags)),
            TraceOp::Protect {
                addr,
                size,
                class,
                read_only,
            } => {
                let hits_before = c.stats().total_hits;
                let flags = if *read_only {
                    ProtectFlags::READ_ONLY
                } else {
                    ProtectFlags::NONE
                };
                match c.protect(*class, *addr, size, flags) {
                    Ok(h) => {
                        let hit = c.stats().total_hits > hits_before;
                        self.handles.entry(*addr).or_default().push(h);
                        self.count_protect(hit);
                        if hit { Outcome::Hit } else { Outcome::Miss }
                    }
                    Err(_) => Outcome::Err,
                }
            }
            TraceOp::Unprotect { addr, flags } => {
                let Some(held) = self.handles.get_mut(addr) else {
                    return Outcome::Err;
                };
                let h = held.pop();
                if held.is_empty() {
                    self.handles.remove(addr);
                }
                let Some(h) = h else {
                    return Outcome::Err;
                };
                match c.unprotect(h, *flags) {
                    Ok(_) => Outcome::Ok,
                    Err(e) => {
                        // A rejected unprotect leaves the protection held: keep its handle.
                        if let Some(h) = e.handle {
                            self.handles.entry(*addr).or_default().push(h);
                        }
                        Outcome::Err
                    }
                }
            }
            TraceOp::Resize { addr, new_size } => outcome(&c.resize(*addr, *new_size)),
            TraceOp::Move {
                old_addr,
                new_addr,
                class,
            } => {
                let class = match class {
                    Some(k) => *k,
                    None => self.class_at(*old_addr),
                };
                match self.cache.move_entry(class, *old_addr, *new_addr) {
                    Ok(true) => {
                        // Protections follow the entry to its new address.
                        if let Some(held) = self.handles.remove(old_addr) {
                            self.handles.entry(*new_addr).or_default().extend(held);
                        }
                        Outcome::Ok
                    }
                    Ok(false) => Outcome::Absent,
                    Err(_) => Outcome::Err,
                }
            }
            TraceOp::Pin { addr } => outcome(&c.pin_protected(*addr)),
            TraceOp::Unpin { addr } => outcome(&c.unpin(*addr)),
            TraceOp::MarkDirty { addr } => outcome(&c.mark_dirty(*addr)),
            TraceOp::MarkClean { addr } => outcome(&c.mark_clean(*addr)),
            TraceOp::Expunge { addr, class, flags } => {
                let class = match class {
                    Some(k) => *k,
                    None => self.class_at(*addr),
                };
                outcome(&self.cache.expunge(class, *addr, *flags))
            }
            TraceOp::FlushEntry { addr, flags } => outcome(&c.flush_entry(*addr, *flags)),
            TraceOp::FlushDep { parent, child } => {
                outcome(&c.create_flush_dependency(*parent, *child))
            }
            TraceOp::FlushUndep { parent, child } => {
                outcome(&c.destroy_flush_dependency(*parent, *child))
            }
            TraceOp::Flush => outcome(&c.flush(FlushFlags::NONE)),
            TraceOp::FlushMarked => outcome(&c.flush(FlushFlags::MARKED_ENTRIES)),
            TraceOp::FlushInvalidate => outcome(&c.flush(FlushFlags::INVALIDATE)),
            TraceOp::SetConfig(cfg) => {
                let r = c.set_config(&adjust(cfg, opts));
                self.refresh_epoch_length();
                outcome(&r)
            }
        }
    }
}

/// Replay `records` against a fresh cache of [`SyntheticTypes`] (MDC-128). See the module
/// documentation for the setup and [`ReplayOptions`] for the configuration rules.
pub fn replay(records: &[TraceRecord], opts: &ReplayOptions) -> Result<ReplayReport, ReplayError> {
    let (extent, max_class) = trace_extent(records);
    let start = adjust(
        opts.config
            .as_ref()
            .unwrap_or(&CacheConfig::default_serial()),
        opts,
    );
    start.validate()?;
    let metrics = Arc::new(Metrics::new(SparseStorage::with_len(extent)));
    let nclasses = (usize::from(max_class) + 1).min(crate::MAX_CLASS_IDS);
    let mut cache = CacheBuilder::<SyntheticTypes>::new(
        metrics.clone(),
        synthetic_classes(nclasses),
        UnboundedFile,
    )
    .config(start)
    .build()
    .map_err(ReplayError::Build)?;
    // A replay makes hundreds of thousands of calls: instead of the `extreme-checks` full check
    // after every call (quadratic), the engine checks every invariant once per epoch and at the end.
    cache.set_invariant_checks(false);
    metrics.reset();
    let mut e = Engine {
        cache,
        metrics,
        handles: HashMap::new(),
        epoch_length: 1,
        override_epoch: opts.epoch_length_override.is_some(),
        epoch_protects: 0,
        epoch_hits: 0,
        epochs: Vec::new(),
        protects: 0,
        hits: 0,
        misses: 0,
        invariant_error: None,
    };
    e.epoch_length = opts.epoch_length_override.unwrap_or(1).max(1);
    e.refresh_epoch_length();
    let mut skip_first_config = opts.config.is_some();
    let mut resize_reports = Vec::new();
    let mut mismatches = 0u64;
    let mut first_mismatches = Vec::new();
    for r in records {
        if skip_first_config && matches!(r.op, TraceOp::SetConfig(_)) {
            skip_first_config = false;
            continue;
        }
        let actual = e.run(&r.op, opts);
        if let Some(expected) = r.expected
            && !expected.accepts(actual)
        {
            mismatches += 1;
            if first_mismatches.len() < MAX_LISTED_MISMATCHES {
                first_mismatches.push(Mismatch {
                    line: r.line,
                    expected,
                    actual,
                });
            }
        }
        for report in e.cache.take_resize_reports() {
            resize_reports.push(ResizeEvent {
                line: r.line,
                protects: e.protects,
                report,
            });
        }
    }
    if let Some(err) = e.invariant_error.take() {
        return Err(ReplayError::Invariant(err));
    }
    e.cache.check_invariants().map_err(ReplayError::Invariant)?;
    let io = e.metrics.snapshot();
    let info = e.cache.size_info();
    let summary = ReplaySummary {
        records: records.len(),
        protects: e.protects,
        hits: e.hits,
        misses: e.misses,
        hit_rate: if e.protects == 0 {
            0.0
        } else {
            e.hits as f64 / e.protects as f64
        },
        loads: io.reads,
        flushes: io.writes,
        bytes_read: io.bytes_read,
        bytes_written: io.bytes_written,
        evictions: e.cache.stats().total_evictions,
        final_max_size: info.max_size,
        final_size: info.cur_size,
        resize_reports,
        mismatches,
        first_mismatches,
    };
    Ok(ReplayReport {
        epoch_length: e.epoch_length,
        epochs: e.epochs,
        summary,
    })
}
