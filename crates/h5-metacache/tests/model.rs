//! Model-based tests: random sequences of cache operations run against a simple reference model.
//!
//! The driver keeps a [`Model`] of every entry it expects to be cached (size, content version,
//! dirty, client pin, protections, flush marker, flush-last, flush-dependency edges) and a record of
//! what the file holds at each address. Every operation is first judged by the model: a legal one
//! must succeed and has its expected effect applied to the model; an illegal one must fail with an
//! error the model can explain and must change nothing.
//!
//! The cache may do two things on its own: write dirty entries (make-space, age-out, flushes) and
//! evict entries. Writes are observed through the `Metrics` op log: each write must be of an entry
//! the model holds as dirty and unprotected, with no dirty flush-dependency descendants, of the
//! entry's size, and the file must then hold the entry's current content version. Evictions are
//! observed as addresses that left the cache: they must be clean (written first, so no data is
//! lost), unprotected, unpinned by the client and free of resident flush-dependency children.
//!
//! After every step the cache must agree with the model entry by entry (status, object content)
//! and in every total (index, clean/dirty, slist, LRU, clean/dirty LRU, protected and pinned lists,
//! flush-last count), and `check_invariants` must pass. The tests are compiled with the
//! `extreme-checks` feature, so the cache also re-validates itself after every public call.
//!
//! Addresses are `0x800 * (k + 1)` for `k < 24` and sizes at most 2048, so entries never overlap.
//! The mock class writes its `fill` byte everywhere in the image, so the fill byte is the entry's
//! content version: the driver picks a fresh one whenever it changes an entry.
use crate::common;
use common::*;

use std::collections::{BTreeMap, BTreeSet};

use h5_io::Storage;
use h5_metacache::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};

/// Number of distinct addresses the operations use.
const NADDR: usize = 24;
/// Distance between addresses; also the largest entry size, so entries never overlap.
const SLOT: u64 = 0x800;
/// Most protections the driver holds at once.
const MAX_HANDLES: usize = 8;

fn addr_of(k: usize) -> u64 {
    SLOT * (k as u64 + 1)
}

fn all_addrs() -> impl Iterator<Item = u64> {
    (0..NADDR).map(addr_of)
}

/// Choose an address: usually one of `cands` (operations that are likely legal), one time in eight
/// any address at all (often an illegal operation).
fn pick(sel: u8, cands: &[u64]) -> u64 {
    let idx = (sel / 8) as usize;
    if !sel.is_multiple_of(8) && !cands.is_empty() {
        cands[idx % cands.len()]
    } else {
        addr_of(idx % NADDR)
    }
}

/// The configurations `SetConfig` switches between; the last index is an invalid one.
fn configs() -> Vec<CacheConfig> {
    let adaptive = |decr_mode: DecrMode, epochs_before_eviction: usize| CacheConfig {
        set_initial_size: true,
        initial_size: 8 * 1024,
        min_size: 4 * 1024,
        max_size: 32 * 1024,
        min_clean_fraction: 0.25,
        epoch_length: 100,
        incr_mode: IncrMode::Threshold,
        lower_hr_threshold: 0.6,
        increment: 2.0,
        apply_max_increment: true,
        max_increment: 8 * 1024,
        flash_incr_mode: FlashIncrMode::AddSpace,
        flash_multiple: 1.4,
        flash_threshold: 0.25,
        decr_mode,
        upper_hr_threshold: 0.8,
        decrement: 0.5,
        apply_max_decrement: true,
        max_decrement: 4 * 1024,
        epochs_before_eviction,
        apply_empty_reserve: true,
        empty_reserve: 0.1,
        ..CacheConfig::default_serial()
    };
    vec![
        fixed(4 * 1024, 0.0),
        fixed(8 * 1024, 0.3),
        fixed(16 * 1024, 0.5),
        fixed(6 * 1024, 1.0),
        fixed(12 * 1024, 0.1),
        adaptive(DecrMode::AgeOutWithThreshold, 2),
        adaptive(DecrMode::Threshold, 3),
        // Roomier than the working set (24 addresses of at most 2 KiB), so that age-out, not
        // make-space, is what evicts untouched entries.
        CacheConfig {
            initial_size: 48 * 1024,
            min_size: 32 * 1024,
            max_size: 64 * 1024,
            ..adaptive(DecrMode::AgeOut, 1)
        },
        CacheConfig {
            evictions_enabled: false,
            ..fixed(4 * 1024, 0.0)
        },
    ]
}

fn invalid_config() -> CacheConfig {
    CacheConfig {
        min_clean_fraction: 1.5,
        ..fixed(4 * 1024, 0.0)
    }
}

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------

/// One random operation. `sel` fields choose an address or handle (see [`pick`]).
#[derive(Clone, Debug)]
enum Op {
    Insert {
        sel: u8,
        size: usize,
        class: u8,
        pin: bool,
        last: bool,
        mark: bool,
    },
    Protect {
        sel: u8,
        ro: bool,
        wrong_class: bool,
        last: bool,
        size: usize,
        class: u8,
    },
    Unprotect {
        sel: u8,
        kind: u8,
    },
    PinProtected {
        sel: u8,
    },
    Unpin {
        sel: u8,
    },
    MarkDirty {
        sel: u8,
    },
    MarkClean {
        sel: u8,
    },
    Resize {
        sel: u8,
        size: usize,
    },
    Move {
        sel: u8,
        to: u8,
        wrong_class: bool,
    },
    Expunge {
        sel: u8,
        wrong_class: bool,
    },
    CreateDep {
        parent: u8,
        child: u8,
    },
    DestroyDep {
        sel: u8,
        child: u8,
    },
    Flush,
    FlushMarked,
    FlushEntry {
        sel: u8,
        mode: u8,
    },
    SetConfig {
        idx: u8,
    },
    SetWrite(bool),
}

/// Random operations. The `adaptive` profile is mostly protect/unprotect, so that epochs (100
/// protects each) end and age-out runs, and never changes the configuration.
fn op_strategy(adaptive: bool) -> impl Strategy<Value = Op> {
    use prop::bool::weighted;
    // insert, protect, unprotect, pin, unpin, mark dirty, mark clean, resize, move, expunge,
    // create dep, destroy dep, flush, flush marked, flush entry, set config, set write
    let w: [u32; 17] = if adaptive {
        [10, 40, 40, 2, 2, 3, 2, 2, 2, 2, 3, 2, 1, 1, 2, 1, 2]
    } else {
        [12, 16, 16, 3, 4, 5, 3, 4, 3, 3, 5, 3, 3, 2, 4, 2, 2]
    };
    // The adaptive profile protects a few hot addresses most of the time (small `sel / 8` picks
    // the first candidates), so that entries elsewhere age out.
    let protect_sel = if adaptive {
        prop_oneof![3 => 1u8..48, 1 => any::<u8>()].boxed()
    } else {
        any::<u8>().boxed()
    };
    prop_oneof![
        w[0] => (any::<u8>(), 16usize..=2048, 0u8..2, weighted(0.2), weighted(0.08), weighted(0.3))
            .prop_map(|(sel, size, class, pin, last, mark)| Op::Insert { sel, size, class, pin, last, mark }),
        w[1] => (protect_sel.clone(), weighted(0.35), weighted(0.04), weighted(0.05), 16usize..=2048, 0u8..2)
            .prop_map(|(sel, ro, wrong_class, last, size, class)| Op::Protect { sel, ro, wrong_class, last, size, class }),
        w[2] => (any::<u8>(), any::<u8>()).prop_map(|(sel, kind)| Op::Unprotect { sel, kind }),
        w[3] => any::<u8>().prop_map(|sel| Op::PinProtected { sel }),
        w[4] => any::<u8>().prop_map(|sel| Op::Unpin { sel }),
        w[5] => any::<u8>().prop_map(|sel| Op::MarkDirty { sel }),
        w[6] => any::<u8>().prop_map(|sel| Op::MarkClean { sel }),
        w[7] => (any::<u8>(), 16usize..=2048).prop_map(|(sel, size)| Op::Resize { sel, size }),
        w[8] => (any::<u8>(), any::<u8>(), weighted(0.05))
            .prop_map(|(sel, to, wrong_class)| Op::Move { sel, to, wrong_class }),
        w[9] => (any::<u8>(), weighted(0.05)).prop_map(|(sel, wrong_class)| Op::Expunge { sel, wrong_class }),
        w[10] => (any::<u8>(), any::<u8>()).prop_map(|(parent, child)| Op::CreateDep { parent, child }),
        w[11] => (any::<u8>(), any::<u8>()).prop_map(|(sel, child)| Op::DestroyDep { sel, child }),
        w[12] => Just(Op::Flush),
        w[13] => Just(Op::FlushMarked),
        w[14] => (any::<u8>(), 0u8..6).prop_map(|(sel, mode)| Op::FlushEntry { sel, mode }),
        // The adaptive profile keeps its configuration (a switch would restart the epoch and its
        // age-out markers): its slot re-enables writes instead.
        w[15] => any::<u8>().prop_map(move |idx| if adaptive { Op::SetWrite(true) } else { Op::SetConfig { idx } }),
        w[16] => weighted(if adaptive { 0.5 } else { 0.75 }).prop_map(Op::SetWrite),
    ]
}

/// Unprotect flag sets: mostly legal combinations, a few illegal ones.
fn unprotect_flags(kind: u8) -> UnprotectFlags {
    use UnprotectFlags as U;
    let alt = kind & 0x10 != 0;
    match kind % 16 {
        0..=2 => U::NONE,
        3 | 4 => U::DIRTIED,
        5 => U::PIN,
        6 => U::UNPIN,
        7 => U::SET_FLUSH_MARKER,
        8 => U::DIRTIED | U::SET_FLUSH_MARKER,
        9 => U::DIRTIED | U::PIN,
        10 => U::DELETED,
        11 => U::DELETED | U::UNPIN,
        12 if alt => U::DELETED | U::TAKE_OWNERSHIP,
        12 => U::DELETED | U::DIRTIED,
        13 => U::DIRTIED | U::UNPIN,
        14 => U::DELETED | U::PIN,
        _ if alt => U::FREE_FILE_SPACE,
        _ => U::PIN | U::UNPIN,
    }
}

fn entry_flush_flags(mode: u8) -> EntryFlushFlags {
    use EntryFlushFlags as F;
    match mode % 6 {
        0 => F::NONE,
        1 => F::INVALIDATE,
        2 => F::CLEAR_ONLY,
        3 => F::CLEAR_ONLY | F::INVALIDATE,
        4 => F::INVALIDATE | F::TAKE_OWNERSHIP,
        _ => F::FREE_FILE_SPACE,
    }
}

// ---------------------------------------------------------------------------------------------
// Expected errors
// ---------------------------------------------------------------------------------------------

/// Error kinds the model can predict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ex {
    NotCached,
    WrongState,
    AddressInUse,
    ClassMismatch,
    InvalidFlags,
    FlushDep,
    WriteNotPermitted,
    Config,
}

fn is_kind(e: &CacheError, k: Ex) -> bool {
    match k {
        Ex::NotCached => matches!(e, CacheError::NotCached { .. }),
        Ex::WrongState => matches!(e, CacheError::WrongState { .. }),
        Ex::AddressInUse => matches!(e, CacheError::AddressInUse { .. }),
        Ex::ClassMismatch => matches!(e, CacheError::ClassMismatch { .. }),
        Ex::InvalidFlags => matches!(e, CacheError::InvalidFlags { .. }),
        Ex::FlushDep => matches!(e, CacheError::FlushDependency { .. }),
        Ex::WriteNotPermitted => matches!(e, CacheError::WriteNotPermitted),
        Ex::Config => matches!(e, CacheError::Config(_)),
    }
}

// ---------------------------------------------------------------------------------------------
// The reference model
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
struct ModelEntry {
    class: u8,
    size: usize,
    /// Content version: the byte the mock class serializes.
    fill: u8,
    dirty: bool,
    /// Known clean *and* the file holds exactly this content (false after a clear without write).
    disk_ok: bool,
    pinned: bool,
    ro: u32,
    rw: bool,
    /// Mark-dirty during a read-write protection: dirty at unprotect (MDC-048).
    dirtied: bool,
    marker: bool,
    last: bool,
    parents: BTreeSet<u64>,
    children: BTreeSet<u64>,
}

impl ModelEntry {
    fn new(class: u8, size: usize, fill: u8, dirty: bool) -> Self {
        Self {
            class,
            size,
            fill,
            dirty,
            disk_ok: !dirty,
            pinned: false,
            ro: 0,
            rw: false,
            dirtied: false,
            marker: false,
            last: false,
            parents: BTreeSet::new(),
            children: BTreeSet::new(),
        }
    }
    fn protected(&self) -> bool {
        self.rw || self.ro > 0
    }
    fn pinned_any(&self) -> bool {
        self.pinned || !self.children.is_empty()
    }
}

#[derive(Clone, Debug, Default)]
struct Model {
    e: BTreeMap<u64, ModelEntry>,
}

impl Model {
    fn has(&self, a: u64) -> bool {
        self.e.contains_key(&a)
    }
    fn get(&self, a: u64) -> &ModelEntry {
        &self.e[&a]
    }
    fn get_mut(&mut self, a: u64) -> &mut ModelEntry {
        self.e.get_mut(&a).expect("model entry")
    }
    fn addrs_where(&self, f: impl Fn(&ModelEntry) -> bool) -> Vec<u64> {
        self.e
            .iter()
            .filter(|(_, e)| f(e))
            .map(|(a, _)| *a)
            .collect()
    }
    fn subtree_dirty(&self, a: u64) -> bool {
        let e = self.get(a);
        e.dirty || e.children.iter().any(|&c| self.subtree_dirty(c))
    }
    fn dirty_children(&self, a: u64) -> usize {
        self.get(a)
            .children
            .iter()
            .filter(|&&c| self.subtree_dirty(c))
            .count()
    }
    fn descendants(&self, a: u64, out: &mut BTreeSet<u64>) {
        for &c in &self.get(a).children {
            if out.insert(c) {
                self.descendants(c, out);
            }
        }
    }
    fn height(&self, a: u64) -> usize {
        self.get(a)
            .children
            .iter()
            .map(|&c| 1 + self.height(c))
            .max()
            .unwrap_or(0)
    }
    fn depth(&self, a: u64) -> usize {
        self.get(a)
            .parents
            .iter()
            .map(|&p| 1 + self.depth(p))
            .max()
            .unwrap_or(0)
    }
    fn edges(&self) -> Vec<(u64, u64)> {
        self.e
            .iter()
            .flat_map(|(&p, e)| e.children.iter().map(move |&c| (p, c)))
            .collect()
    }
    /// Remove an entry and every dependency edge it takes part in.
    fn remove(&mut self, a: u64) -> ModelEntry {
        let e = self.e.remove(&a).expect("removing a model entry");
        for p in &e.parents {
            self.get_mut(*p).children.remove(&a);
        }
        for c in &e.children {
            self.get_mut(*c).parents.remove(&a);
        }
        e
    }
    /// Give an entry a new address, renaming it in its dependency edges.
    fn rename(&mut self, old: u64, new: u64) {
        let e = self.e.remove(&old).expect("renaming a model entry");
        for p in &e.parents {
            let ch = &mut self.get_mut(*p).children;
            ch.remove(&old);
            ch.insert(new);
        }
        for c in &e.children {
            let pa = &mut self.get_mut(*c).parents;
            pa.remove(&old);
            pa.insert(new);
        }
        self.e.insert(new, e);
    }
    /// The whole-cache flush as the spec describes it (MDC-074, MDC-077, MDC-078, MDC-079, Q-06):
    /// repeat until nothing changes: write any dirty, unprotected (marked) entry with no dirty
    /// descendants; flush-last entries only after every other entry. Returns the written set and
    /// the number of protected and of other dirty entries left over.
    fn simulate_flush(&self, marked_only: bool) -> (BTreeSet<u64>, usize, usize) {
        let mut m = self.clone();
        let mut written = BTreeSet::new();
        for last_phase in [false, true] {
            loop {
                let ready: Vec<u64> =
                    m.e.iter()
                        .filter(|(_, e)| {
                            e.dirty
                                && !e.protected()
                                && (last_phase || !e.last)
                                && (!marked_only || e.marker)
                        })
                        .map(|(a, _)| *a)
                        .filter(|&a| m.dirty_children(a) == 0)
                        .collect();
                if ready.is_empty() {
                    break;
                }
                for a in ready {
                    m.get_mut(a).dirty = false;
                    written.insert(a);
                }
            }
        }
        let left =
            m.e.values()
                .filter(|e| e.dirty && (!marked_only || e.marker));
        let (mut protected, mut stuck) = (0, 0);
        for e in left {
            if e.protected() {
                protected += 1;
            } else {
                stuck += 1;
            }
        }
        (written, protected, stuck)
    }
}

// ---------------------------------------------------------------------------------------------
// The driver
// ---------------------------------------------------------------------------------------------

/// What a step may do besides its own effect.
#[derive(Default)]
struct Outcome {
    /// The cache may write entries (make-space, age-out, flushes).
    may_write: bool,
    /// The cache may evict entries on its own (make-space, age-out).
    may_evict: bool,
    /// Entries the operation itself removes (after any write of them).
    remove: Vec<u64>,
    /// Entries that must have been written.
    must_write: Vec<u64>,
    /// A whole-cache flush to check: the model before it and the expected written set.
    flush: Option<(Model, BTreeSet<u64>)>,
    /// An insert to check make-space for: its size and the LRU (address, dirty) before it.
    make_space: Option<(usize, Vec<(u64, bool)>)>,
}

impl Outcome {
    fn quiet() -> Self {
        Self::default()
    }
    fn may_evict() -> Self {
        Self {
            may_write: true,
            may_evict: true,
            ..Self::default()
        }
    }
}

/// Counters that show what a run exercised.
#[derive(Debug, Default)]
struct Counts {
    steps: u64,
    accepted: u64,
    rejected: u64,
    skipped: u64,
    loads: u64,
    writes: u64,
    evictions: u64,
    flushes_checked: u64,
    flushes_with_deps: u64,
    max_edges: usize,
    epochs: u64,
    aged_out: u64,
}

struct Sim {
    h: Harness,
    m: Model,
    /// Last write at each address: (content version, length).
    disk: BTreeMap<u64, (u8, usize)>,
    write_ok: bool,
    handles: Vec<(u64, ProtectHandle)>,
    /// Illegal unprotects consume their handle and leave the entry protected for good; allow only a
    /// few per run.
    strand_budget: u32,
    stranded: u32,
    fill_counter: u8,
    configs: Vec<CacheConfig>,
    evictions_enabled: bool,
    ctx: String,
    n: Counts,
}

impl Sim {
    fn new(config_idx: usize, strand_budget: u32) -> Self {
        let configs = configs();
        let config = configs[config_idx % configs.len()].clone();
        let evictions_enabled = config.evictions_enabled;
        let h = harness(2, config);
        Self {
            evictions_enabled,
            h,
            m: Model::default(),
            disk: BTreeMap::new(),
            write_ok: true,
            handles: Vec::new(),
            strand_budget,
            stranded: 0,
            fill_counter: 0,
            configs,
            ctx: String::new(),
            n: Counts::default(),
        }
    }

    fn storage_bytes(&self, a: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        self.h.storage.inner().read_at(a, &mut buf).unwrap();
        buf
    }

    /// A fresh content version for an entry at `a`: differs from what the file holds there and
    /// from the serialize poison byte.
    fn new_fill(&mut self, a: u64) -> u8 {
        let on_disk = self.storage_bytes(a, 1)[0];
        loop {
            self.fill_counter = self.fill_counter % 254 + 1;
            if self.fill_counter != on_disk && self.fill_counter != SERIALIZE_POISON {
                return self.fill_counter;
            }
        }
    }

    fn handle_for(&self, a: u64, read_only: bool) -> Option<usize> {
        self.handles
            .iter()
            .position(|(ha, h)| *ha == a && h.is_read_only() == read_only)
    }

    fn expect_err<T: std::fmt::Debug>(&mut self, r: Result<T>, errs: &[Ex]) {
        match r {
            Ok(v) => panic!(
                "{}: illegal operation succeeded ({v:?}); expected one of {errs:?}",
                self.ctx
            ),
            Err(e) => assert!(
                errs.iter().any(|k| is_kind(&e, *k)),
                "{}: error {e:?} is none of the expected {errs:?}",
                self.ctx
            ),
        }
        self.n.rejected += 1;
    }

    fn step(&mut self, op: &Op) {
        self.n.steps += 1;
        self.ctx = format!("step {} {:?}", self.n.steps, op);
        self.h.clear_io();
        for c in &self.h.classes {
            c.clear_events();
        }
        let out = self.apply(op);
        let written = self.sync(&out);
        if let Some((before, expected)) = out.flush {
            self.check_flush(&before, &expected, &written);
        }
        if let Some((size, pre_lru)) = out.make_space {
            self.check_make_space(size, &pre_lru, &written);
        }
    }

    /// Run `op` against the cache and the model.
    fn apply(&mut self, op: &Op) -> Outcome {
        match *op {
            Op::Insert {
                sel,
                size,
                class,
                pin,
                last,
                mark,
            } => {
                let free: Vec<u64> = all_addrs().filter(|a| !self.m.has(*a)).collect();
                let a = pick(sel, &free);
                let mut f = InsertFlags::NONE;
                if pin {
                    f |= InsertFlags::PIN;
                }
                if last {
                    f |= InsertFlags::FLUSH_LAST;
                }
                if mark {
                    f |= InsertFlags::SET_FLUSH_MARKER;
                }
                if self.m.has(a) {
                    let r = self
                        .h
                        .cache
                        .insert(class, a, MockEntry::filled(size, 0x77), f);
                    self.expect_err(r, &[Ex::AddressInUse]);
                    return Outcome::quiet();
                }
                let fill = self.new_fill(a);
                let pre_lru: Vec<(u64, bool)> = self
                    .m
                    .e
                    .iter()
                    .filter(|(_, e)| !e.protected() && !e.pinned_any())
                    .map(|(a, e)| (*a, e.dirty))
                    .collect();
                let r = self
                    .h
                    .cache
                    .insert(class, a, MockEntry::filled(size, fill), f);
                assert!(r.is_ok(), "{}: {r:?}", self.ctx);
                let mut e = ModelEntry::new(class, size, fill, true);
                e.pinned = pin;
                e.last = last;
                e.marker = mark;
                self.m.e.insert(a, e);
                self.n.accepted += 1;
                Outcome {
                    make_space: self.evictions_enabled.then_some((size, pre_lru)),
                    ..Outcome::may_evict()
                }
            }
            Op::Protect {
                sel,
                ro,
                wrong_class,
                last,
                size,
                class,
            } => {
                if self.handles.len() >= MAX_HANDLES {
                    self.n.skipped += 1;
                    return Outcome::quiet();
                }
                let cands: Vec<u64> = all_addrs()
                    .filter(|a| match self.m.e.get(a) {
                        None => true,
                        Some(e) => !e.rw && (ro || e.ro == 0),
                    })
                    .collect();
                let a = pick(sel, &cands);
                let mut errs = Vec::new();
                let class = match self.m.e.get(&a) {
                    Some(e) => {
                        let c = if wrong_class { 1 - e.class } else { e.class };
                        if c != e.class {
                            errs.push(Ex::ClassMismatch);
                        }
                        if e.rw || (e.ro > 0 && !ro) {
                            errs.push(Ex::WrongState);
                        }
                        c
                    }
                    None => class,
                };
                let mut pf = if ro {
                    ProtectFlags::READ_ONLY
                } else {
                    ProtectFlags::NONE
                };
                if last {
                    pf |= ProtectFlags::FLUSH_LAST;
                }
                let load_size = self.disk.get(&a).map_or(size, |d| d.1);
                let r = self.h.cache.protect(class, a, &load_size, pf);
                if !errs.is_empty() {
                    self.expect_err(r, &errs);
                    return Outcome::quiet();
                }
                let h = match r {
                    Ok(h) => h,
                    Err(e) => panic!("{}: legal protect failed: {e:?}", self.ctx),
                };
                assert_eq!(h.addr(), a);
                assert_eq!(h.is_read_only(), ro);
                let fill = self.h.cache.icr(&h).unwrap().fill;
                if self.m.has(a) {
                    let e = self.m.get_mut(a);
                    assert_eq!(
                        fill, e.fill,
                        "{}: protect hit returned other content",
                        self.ctx
                    );
                    if ro {
                        e.ro += 1;
                    } else {
                        e.rw = true;
                        e.dirtied = false;
                    }
                } else {
                    // A load: the content must be the last version written at this address, so no
                    // write was ever lost.
                    let want = self.disk.get(&a).map_or(0, |d| d.0);
                    assert_eq!(fill, want, "{}: load returned stale data", self.ctx);
                    let mut e = ModelEntry::new(class, load_size, fill, false);
                    e.last = last;
                    if ro {
                        e.ro = 1;
                    } else {
                        e.rw = true;
                    }
                    self.m.e.insert(a, e);
                    self.n.loads += 1;
                }
                self.handles.push((a, h));
                self.n.accepted += 1;
                Outcome::may_evict()
            }
            Op::Unprotect { sel, kind } => self.unprotect(sel, kind),
            Op::PinProtected { sel } => {
                let cands = self.m.addrs_where(|e| e.protected() && !e.pinned);
                let a = pick(sel, &cands);
                let errs = match self.m.e.get(&a) {
                    None => vec![Ex::NotCached],
                    Some(e) if !e.protected() || e.pinned => vec![Ex::WrongState],
                    Some(_) => vec![],
                };
                let r = self.h.cache.pin_protected(a);
                if !errs.is_empty() {
                    self.expect_err(r, &errs);
                    return Outcome::quiet();
                }
                assert!(r.is_ok(), "{}: {r:?}", self.ctx);
                self.m.get_mut(a).pinned = true;
                self.n.accepted += 1;
                Outcome::quiet()
            }
            Op::Unpin { sel } => {
                let cands = self.m.addrs_where(|e| e.pinned);
                let a = pick(sel, &cands);
                let errs = match self.m.e.get(&a) {
                    None => vec![Ex::NotCached],
                    Some(e) if !e.pinned => vec![Ex::WrongState],
                    Some(_) => vec![],
                };
                let r = self.h.cache.unpin(a);
                if !errs.is_empty() {
                    self.expect_err(r, &errs);
                    return Outcome::quiet();
                }
                assert!(r.is_ok(), "{}: {r:?}", self.ctx);
                self.m.get_mut(a).pinned = false;
                self.n.accepted += 1;
                Outcome::quiet()
            }
            Op::MarkDirty { sel } => {
                let cands = self
                    .m
                    .addrs_where(|e| e.rw || (!e.protected() && e.pinned_any()));
                let a = pick(sel, &cands);
                let errs = match self.m.e.get(&a) {
                    None => vec![Ex::NotCached],
                    Some(e) if e.ro > 0 || (!e.rw && !e.pinned_any()) => vec![Ex::WrongState],
                    Some(_) => vec![],
                };
                if !errs.is_empty() {
                    let r = self.h.cache.mark_dirty(a);
                    self.expect_err(r, &errs);
                    return Outcome::quiet();
                }
                let fill = self.new_fill(a);
                let rw = self.m.get(a).rw;
                if rw {
                    // A stranded protection has no handle: the content stays as it is.
                    if let Some(i) = self.handle_for(a, false) {
                        let h = &self.handles[i].1;
                        self.h.cache.icr_mut(h).unwrap().fill = fill;
                        self.m.get_mut(a).fill = fill;
                    }
                } else {
                    self.h.cache.pinned_icr_mut(a).unwrap().fill = fill;
                    self.m.get_mut(a).fill = fill;
                }
                let r = self.h.cache.mark_dirty(a);
                assert!(r.is_ok(), "{}: {r:?}", self.ctx);
                let e = self.m.get_mut(a);
                e.disk_ok = false;
                if rw {
                    e.dirtied = true;
                } else {
                    e.dirty = true;
                }
                self.n.accepted += 1;
                Outcome::quiet()
            }
            Op::MarkClean { sel } => {
                let cands = self.m.addrs_where(|e| e.dirty && !e.protected());
                let a = pick(sel, &cands);
                let errs = match self.m.e.get(&a) {
                    None => vec![Ex::NotCached],
                    Some(e) if e.protected() => vec![Ex::WrongState],
                    Some(_) => vec![],
                };
                let r = self.h.cache.mark_clean(a);
                if !errs.is_empty() {
                    self.expect_err(r, &errs);
                    return Outcome::quiet();
                }
                assert!(r.is_ok(), "{}: {r:?}", self.ctx);
                let e = self.m.get_mut(a);
                if e.dirty {
                    // Cleared without a write: the file keeps older content.
                    e.dirty = false;
                    e.marker = false;
                    e.disk_ok = false;
                }
                self.n.accepted += 1;
                Outcome::quiet()
            }
            Op::Resize { sel, size } => {
                let cands = self
                    .m
                    .addrs_where(|e| e.rw || (!e.protected() && e.pinned_any()));
                let a = pick(sel, &cands);
                let errs = match self.m.e.get(&a) {
                    None => vec![Ex::NotCached],
                    Some(e) if e.ro > 0 || (!e.rw && !e.pinned_any()) => vec![Ex::WrongState],
                    Some(_) => vec![],
                };
                if !errs.is_empty() {
                    let r = self.h.cache.resize(a, size);
                    self.expect_err(r, &errs);
                    return Outcome::quiet();
                }
                let fill = self.new_fill(a);
                let icr = if self.m.get(a).rw {
                    self.handle_for(a, false)
                        .map(|i| self.h.cache.icr_mut(&self.handles[i].1).unwrap())
                } else {
                    Some(self.h.cache.pinned_icr_mut(a).unwrap())
                };
                let changed = icr.map(|icr| {
                    icr.fill = fill;
                    icr.size = size;
                });
                if changed.is_some() {
                    self.m.get_mut(a).fill = fill;
                }
                let r = self.h.cache.resize(a, size);
                assert!(r.is_ok(), "{}: {r:?}", self.ctx);
                let e = self.m.get_mut(a);
                e.size = size;
                e.dirty = true;
                e.disk_ok = false;
                self.n.accepted += 1;
                Outcome::quiet()
            }
            Op::Move {
                sel,
                to,
                wrong_class,
            } => {
                let cands = self.m.addrs_where(|e| e.ro == 0);
                let a = pick(sel, &cands);
                let to = addr_of(to as usize % NADDR);
                let Some(e) = self.m.e.get(&a) else {
                    let r = self.h.cache.move_entry(0, a, to);
                    assert!(
                        matches!(r, Ok(false)),
                        "{}: moving an uncached address: {r:?}",
                        self.ctx
                    );
                    self.n.accepted += 1;
                    return Outcome::quiet();
                };
                let class = if wrong_class { 1 - e.class } else { e.class };
                let mut errs = Vec::new();
                if class != e.class {
                    errs.push(Ex::ClassMismatch);
                }
                if e.ro > 0 {
                    errs.push(Ex::WrongState);
                }
                if to != a && self.m.has(to) {
                    errs.push(Ex::AddressInUse);
                }
                let r = self.h.cache.move_entry(class, a, to);
                if !errs.is_empty() {
                    self.expect_err(r, &errs);
                    return Outcome::quiet();
                }
                assert!(matches!(r, Ok(true)), "{}: {r:?}", self.ctx);
                if to != a {
                    self.m.rename(a, to);
                    let e = self.m.get_mut(to);
                    e.dirty = true;
                    e.disk_ok = false;
                    for (ha, _) in self.handles.iter_mut().filter(|(ha, _)| *ha == a) {
                        *ha = to;
                    }
                }
                self.n.accepted += 1;
                Outcome::quiet()
            }
            Op::Expunge { sel, wrong_class } => {
                let cands = self.m.addrs_where(|e| !e.protected() && !e.pinned_any());
                let a = pick(sel, &cands);
                let Some(e) = self.m.e.get(&a) else {
                    let r = self.h.cache.expunge(0, a, ExpungeFlags::NONE);
                    assert!(r.is_ok(), "{}: {r:?}", self.ctx);
                    self.n.accepted += 1;
                    return Outcome::quiet();
                };
                let class = if wrong_class { 1 - e.class } else { e.class };
                let mut errs = Vec::new();
                if class != e.class {
                    errs.push(Ex::ClassMismatch);
                }
                if e.protected() || e.pinned_any() {
                    errs.push(Ex::WrongState);
                }
                let r = self.h.cache.expunge(class, a, ExpungeFlags::NONE);
                if !errs.is_empty() {
                    self.expect_err(r, &errs);
                    return Outcome::quiet();
                }
                assert!(r.is_ok(), "{}: {r:?}", self.ctx);
                self.n.accepted += 1;
                Outcome {
                    remove: vec![a],
                    ..Outcome::quiet()
                }
            }
            Op::CreateDep { parent, child } => {
                let pc = self.m.addrs_where(|e| e.pinned_any() || e.protected());
                let p = pick(parent, &pc);
                let cc: Vec<u64> = if self.m.has(p) {
                    self.m
                        .e
                        .keys()
                        .copied()
                        .filter(|&c| {
                            c != p && !self.m.get(p).children.contains(&c) && {
                                let mut d = BTreeSet::new();
                                self.m.descendants(c, &mut d);
                                !d.contains(&p)
                            }
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let c = pick(child, &cc);
                let legal = p != c
                    && self.m.has(p)
                    && self.m.has(c)
                    && (self.m.get(p).pinned_any() || self.m.get(p).protected())
                    && !self.m.get(p).children.contains(&c)
                    && {
                        let mut d = BTreeSet::new();
                        self.m.descendants(c, &mut d);
                        !d.contains(&p)
                    }
                    && self.m.height(c) + 1 + self.m.depth(p) < MAX_FLUSH_DEP_HEIGHT;
                let r = self.h.cache.create_flush_dependency(p, c);
                if !legal {
                    self.expect_err(r, &[Ex::FlushDep]);
                    return Outcome::quiet();
                }
                assert!(r.is_ok(), "{}: {r:?}", self.ctx);
                self.m.get_mut(p).children.insert(c);
                self.m.get_mut(c).parents.insert(p);
                self.n.accepted += 1;
                self.n.max_edges = self.n.max_edges.max(self.m.edges().len());
                Outcome::quiet()
            }
            Op::DestroyDep { sel, child } => {
                let edges = self.m.edges();
                let (p, c) = if !sel.is_multiple_of(8) && !edges.is_empty() {
                    edges[(sel / 8) as usize % edges.len()]
                } else {
                    (pick(sel, &[]), pick(child, &[]))
                };
                let legal = self.m.has(p) && self.m.get(p).children.contains(&c);
                let r = self.h.cache.destroy_flush_dependency(p, c);
                if !legal {
                    self.expect_err(r, &[Ex::FlushDep]);
                    return Outcome::quiet();
                }
                assert!(r.is_ok(), "{}: {r:?}", self.ctx);
                self.m.get_mut(p).children.remove(&c);
                self.m.get_mut(c).parents.remove(&p);
                self.n.accepted += 1;
                Outcome::quiet()
            }
            Op::Flush | Op::FlushMarked => {
                let marked = matches!(op, Op::FlushMarked);
                let flags = if marked {
                    FlushFlags::MARKED_ENTRIES
                } else {
                    FlushFlags::NONE
                };
                if !self.write_ok {
                    let r = self.h.cache.flush(flags);
                    self.expect_err(r, &[Ex::WriteNotPermitted]);
                    return Outcome::quiet();
                }
                let (expected, protected, stuck) = self.m.simulate_flush(marked);
                let r = self.h.cache.flush(flags);
                // everything else is written, then protected entries are reported.
                if protected > 0 {
                    assert!(
                        matches!(r, Err(CacheError::ProtectedEntries { count }) if count == protected),
                        "{}: expected ProtectedEntries({protected}), got {r:?}",
                        self.ctx
                    );
                } else if stuck > 0 {
                    assert!(
                        matches!(r, Err(CacheError::UnflushableEntries { count }) if count == stuck),
                        "{}: expected UnflushableEntries({stuck}), got {r:?}",
                        self.ctx
                    );
                } else {
                    assert!(r.is_ok(), "{}: {r:?}", self.ctx);
                }
                self.n.accepted += 1;
                Outcome {
                    may_write: true,
                    flush: Some((self.m.clone(), expected)),
                    ..Outcome::quiet()
                }
            }
            Op::FlushEntry { sel, mode } => self.flush_entry(sel, mode),
            Op::SetConfig { idx } => {
                let i = idx as usize % (self.configs.len() + 1);
                if i == self.configs.len() {
                    let r = self.h.cache.set_config(&invalid_config());
                    self.expect_err(r, &[Ex::Config]);
                    return Outcome::quiet();
                }
                let cfg = self.configs[i].clone();
                self.evictions_enabled = cfg.evictions_enabled;
                let r = self.h.cache.set_config(&cfg);
                assert!(r.is_ok(), "{}: {r:?}", self.ctx);
                self.n.accepted += 1;
                Outcome::quiet()
            }
            Op::SetWrite(ok) => {
                self.h.cache.set_write_permitted(ok);
                self.write_ok = ok;
                self.n.accepted += 1;
                Outcome::quiet()
            }
        }
    }

    /// After an insert of `size` bytes: make-space stopped early only once its goal was met. If the
    /// cache is over its max without the new entry, the walk from the LRU tail must have evicted
    /// every entry that was clean on the LRU before the call and, when writes are permitted, written
    /// every dirty one (a written entry moves to the head and may stay; entries that join the LRU
    /// during the walk may stay too: the next make-space handles them) (MDC-016, MDC-018, MDC-020).
    /// If clean size (with free space) is below the min-clean size, every dirty LRU entry must have
    /// been written (MDC-017).
    fn check_make_space(&self, size: usize, pre_lru: &[(u64, bool)], written: &[u64]) {
        let s = self.h.cache.size_info();
        let t = self.h.cache.totals();
        let others = s.cur_size - size;
        let ctx = &self.ctx;
        if others + size.min(s.max_size) > s.max_size {
            for &(a, dirty) in pre_lru {
                if !dirty {
                    assert!(
                        !self.h.cache.contains(a),
                        "{ctx}: over the max, but clean LRU entry {a:#x} was not evicted: {s:?}"
                    );
                } else if self.write_ok {
                    assert!(
                        written.contains(&a),
                        "{ctx}: over the max, but dirty LRU entry {a:#x} was not written: {s:?}"
                    );
                }
            }
        }
        if self.write_ok && t.clean_size + s.max_size.saturating_sub(others) < s.min_clean_size {
            for &(a, dirty) in pre_lru {
                assert!(
                    !dirty || written.contains(&a),
                    "{ctx}: min-clean goal unmet, but dirty LRU entry {a:#x} was not written: {s:?}"
                );
            }
        }
    }

    /// What is wrong with unprotecting the entry at `a` with `flags` (empty: legal).
    fn unprotect_errs(&self, a: u64, ro: bool, flags: UnprotectFlags) -> Vec<Ex> {
        use UnprotectFlags as U;
        let e = self.m.get(a);
        let mut errs = Vec::new();
        if flags.contains(U::PIN | U::UNPIN)
            || (flags.intersects(U::FREE_FILE_SPACE | U::TAKE_OWNERSHIP)
                && !flags.contains(U::DELETED))
            || flags.contains(U::FREE_FILE_SPACE | U::TAKE_OWNERSHIP)
        {
            errs.push(Ex::InvalidFlags);
        }
        if (flags.contains(U::DIRTIED) && ro)
            || (flags.contains(U::PIN) && e.pinned)
            || (flags.contains(U::UNPIN) && !e.pinned)
        {
            errs.push(Ex::WrongState);
        }
        if flags.contains(U::DELETED) {
            if (e.pinned && !flags.contains(U::UNPIN))
                || !e.children.is_empty()
                || !e.parents.is_empty()
                || (ro && e.ro > 1)
            {
                errs.push(Ex::WrongState);
            }
            // Deleting and pinning at once is contradictory (MDC-049, MDC-055).
            if flags.contains(U::PIN) {
                errs.push(Ex::WrongState);
                errs.push(Ex::InvalidFlags);
            }
        }
        errs
    }

    fn unprotect(&mut self, sel: u8, kind: u8) -> Outcome {
        use UnprotectFlags as U;
        if self.handles.is_empty() {
            self.n.skipped += 1;
            return Outcome::quiet();
        }
        let idx = sel as usize % self.handles.len();
        let (a, ro) = (self.handles[idx].0, self.handles[idx].1.is_read_only());
        let mut flags = unprotect_flags(kind);
        let mut errs = self.unprotect_errs(a, ro, flags);
        if !errs.is_empty() && self.stranded >= self.strand_budget {
            // Out of budget for lost handles: use a legal subset instead.
            let e = self.m.get(a);
            if flags.contains(U::PIN) && (e.pinned || flags.contains(U::DELETED)) {
                flags = without(flags, U::PIN);
            }
            if flags.contains(U::UNPIN) && !e.pinned {
                flags = without(flags, U::UNPIN);
            }
            if ro {
                flags = without(flags, U::DIRTIED);
            }
            if !flags.contains(U::DELETED) {
                flags = without(flags, U::FREE_FILE_SPACE);
            }
            errs = self.unprotect_errs(a, ro, flags);
            if !errs.is_empty() {
                flags = U::NONE;
                errs = self.unprotect_errs(a, ro, flags);
            }
            assert!(errs.is_empty());
        }
        let (_, h) = self.handles.remove(idx);
        if !errs.is_empty() {
            match self.h.cache.unprotect(h, flags) {
                Ok(v) => panic!(
                    "{}: illegal unprotect {flags:?} succeeded ({v:?}); expected one of {errs:?}",
                    self.ctx
                ),
                Err(e) => {
                    // A rejected unprotect changes nothing and gives the protection back.
                    let Some(h) = e.handle else {
                        panic!("{}: rejected unprotect did not return its handle", self.ctx)
                    };
                    self.expect_err::<()>(Err(e.error), &errs);
                    self.handles.insert(idx, (a, h));
                }
            }
            return Outcome::quiet();
        }
        if flags.contains(U::DIRTIED) {
            let fill = self.new_fill(a);
            self.h.cache.icr_mut(&h).unwrap().fill = fill;
            self.m.get_mut(a).fill = fill;
        }
        let r = self.h.cache.unprotect(h, flags);
        let got = match r {
            Ok(got) => got,
            Err(e) => panic!("{}: legal unprotect {flags:?} failed: {e:?}", self.ctx),
        };
        let e = self.m.get_mut(a);
        if ro {
            e.ro -= 1;
        } else {
            e.rw = false;
        }
        if flags.contains(U::PIN) {
            e.pinned = true;
        }
        if flags.contains(U::UNPIN) {
            e.pinned = false;
        }
        if flags.contains(U::SET_FLUSH_MARKER) {
            e.marker = true;
        }
        if !e.protected() {
            if flags.contains(U::DIRTIED) || e.dirtied {
                e.dirty = true;
                e.disk_ok = false;
            }
            e.dirtied = false;
        }
        let fill = e.fill;
        self.n.accepted += 1;
        if flags.contains(U::DELETED) {
            if flags.contains(U::TAKE_OWNERSHIP) {
                let icr = got.expect("TAKE_OWNERSHIP hands the object back");
                assert_eq!(icr.fill, fill, "{}", self.ctx);
            } else {
                assert!(got.is_none(), "{}", self.ctx);
            }
            return Outcome {
                remove: vec![a],
                ..Outcome::quiet()
            };
        }
        assert!(got.is_none(), "{}", self.ctx);
        Outcome::quiet()
    }

    fn flush_entry(&mut self, sel: u8, mode: u8) -> Outcome {
        use EntryFlushFlags as F;
        let flags = entry_flush_flags(mode);
        let cands = self.m.addrs_where(|e| !e.protected());
        let a = pick(sel, &cands);
        let clear = flags.contains(F::CLEAR_ONLY);
        let inv = flags.contains(F::INVALIDATE);
        let take = flags.contains(F::TAKE_OWNERSHIP);
        let mut errs = Vec::new();
        let legal_combo = flags != F::FREE_FILE_SPACE;
        match self.m.e.get(&a) {
            None => errs.push(Ex::NotCached),
            Some(e) => {
                if !self.write_ok && !clear {
                    errs.push(Ex::WriteNotPermitted);
                }
                if !legal_combo {
                    errs.push(Ex::InvalidFlags);
                }
                if e.protected() || (!inv && !e.dirty) || (inv && e.pinned_any()) {
                    errs.push(Ex::WrongState);
                }
                if e.dirty && !clear && self.m.dirty_children(a) > 0 {
                    errs.push(Ex::FlushDep);
                }
            }
        }
        let r = self.h.cache.flush_entry(a, flags);
        if !errs.is_empty() {
            self.expect_err(r, &errs);
            return Outcome::quiet();
        }
        let got = match r {
            Ok(got) => got,
            Err(e) => panic!("{}: legal flush_entry failed: {e:?}", self.ctx),
        };
        self.n.accepted += 1;
        let e = self.m.get_mut(a);
        let mut out = Outcome::quiet();
        if e.dirty {
            if clear {
                e.dirty = false;
                e.marker = false;
                e.disk_ok = false;
            } else {
                out.may_write = true;
                out.must_write.push(a);
            }
        }
        if take {
            let icr = got.expect("TAKE_OWNERSHIP hands the object back");
            assert_eq!(icr.fill, e.fill, "{}", self.ctx);
        } else {
            assert!(got.is_none(), "{}", self.ctx);
        }
        if inv {
            out.remove.push(a);
        }
        out
    }

    /// Bring the model up to date with what the cache did on its own, and compare everything.
    fn sync(&mut self, out: &Outcome) -> Vec<u64> {
        let ops = self.h.write_ops();
        if !out.may_write || !self.write_ok {
            assert!(
                ops.is_empty(),
                "{}: unexpected writes {:?}",
                self.ctx,
                ops.iter().map(|r| r.offset).collect::<Vec<_>>()
            );
        }
        let mut written: Vec<u64> = Vec::new();
        for r in &ops {
            let a = r.offset;
            let len = r.len as usize;
            assert!(
                !written.contains(&a),
                "{}: {a:#x} written twice in one step",
                self.ctx
            );
            let Some(e) = self.m.e.get(&a) else {
                panic!("{}: write at {a:#x}, which holds no entry", self.ctx);
            };
            assert!(e.dirty, "{}: clean entry {a:#x} written", self.ctx);
            assert!(
                !e.protected(),
                "{}: protected entry {a:#x} written",
                self.ctx
            );
            assert_eq!(len, e.size, "{}: write length of {a:#x}", self.ctx);
            // MDC-078: a parent is written only after all of its dirty descendants.
            assert_eq!(
                self.m.dirty_children(a),
                0,
                "{}: {a:#x} written before its dirty flush-dependency children",
                self.ctx
            );
            let fill = e.fill;
            let bytes = self.storage_bytes(a, len);
            assert!(
                bytes.iter().all(|&b| b == fill),
                "{}: file content at {a:#x} is not version {fill:#x}",
                self.ctx
            );
            let e = self.m.get_mut(a);
            e.dirty = false;
            e.marker = false;
            e.disk_ok = true;
            self.disk.insert(a, (fill, len));
            written.push(a);
        }
        self.n.writes += written.len() as u64;
        for a in &out.must_write {
            assert!(written.contains(a), "{}: {a:#x} was not written", self.ctx);
        }
        for &a in &out.remove {
            assert!(
                !self.h.cache.contains(a),
                "{}: {a:#x} is still cached",
                self.ctx
            );
            self.m.remove(a);
        }
        // Entries that left the cache on their own were evicted: they must have been evictable.
        let gone: Vec<u64> = self
            .m
            .e
            .keys()
            .copied()
            .filter(|&a| !self.h.cache.contains(a))
            .collect();
        if !out.may_evict {
            assert!(gone.is_empty(), "{}: entries vanished: {gone:x?}", self.ctx);
        }
        for &a in &gone {
            let e = self.m.get(a);
            assert!(!e.protected(), "{}: protected {a:#x} evicted", self.ctx);
            assert!(!e.pinned, "{}: pinned {a:#x} evicted", self.ctx);
            assert!(
                e.children.iter().all(|c| gone.contains(c)),
                "{}: flush-dependency parent {a:#x} evicted while its child stays",
                self.ctx
            );
            assert!(
                !e.dirty,
                "{}: dirty {a:#x} evicted without being written (data lost)",
                self.ctx
            );
            if e.disk_ok {
                let bytes = self.storage_bytes(a, e.size);
                assert!(
                    bytes.iter().all(|&b| b == e.fill),
                    "{}: evicted {a:#x} but the file does not hold its content",
                    self.ctx
                );
            }
        }
        self.n.evictions += gone.len() as u64;
        for a in gone {
            self.m.remove(a);
        }
        self.compare();
        written
    }

    /// The cache and the model agree on every entry, list and total (MDC-013, MDC-014, MDC-075).
    fn compare(&mut self) {
        let ctx = &self.ctx;
        let cache = &mut self.h.cache;
        if let Err(e) = cache.check_invariants() {
            panic!("{ctx}: check_invariants: {e}");
        }
        let model_addrs: Vec<u64> = self.m.e.keys().copied().collect();
        assert_eq!(cache.cached_addrs(), model_addrs, "{ctx}: cached addresses");
        let mut want = Totals::default();
        let (mut lru, mut clru, mut dlru) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        for (&a, e) in &self.m.e {
            let s = cache.status(a).expect("cached");
            let got = (
                (s.class, s.size, s.dirty),
                s.protected,
                s.read_only,
                s.ro_refs,
                s.pinned_by_client,
                s.pinned_by_cache,
                s.flush_marker,
                s.flush_last,
                s.parents,
                s.children,
                s.dirty_children as usize,
            );
            let expect = (
                (e.class, e.size, e.dirty),
                e.protected(),
                e.ro > 0,
                e.ro,
                e.pinned,
                !e.children.is_empty(),
                e.marker,
                e.last,
                e.parents.len(),
                e.children.len(),
                self.m.dirty_children(a),
            );
            assert_eq!(got, expect, "{ctx}: status of {a:#x}");
            assert_eq!(
                cache.peek_icr(a).map(|i| i.fill),
                Some(e.fill),
                "{ctx}: content of {a:#x}"
            );
            want.index_len += 1;
            want.index_size += e.size;
            if e.dirty {
                want.dirty_size += e.size;
                want.slist_len += 1;
                want.slist_size += e.size;
            } else {
                want.clean_size += e.size;
            }
            if e.last {
                want.num_last_entries += 1;
            }
            if e.protected() {
                want.pl_len += 1;
                want.pl_size += e.size;
            } else if e.pinned_any() {
                want.pel_len += 1;
                want.pel_size += e.size;
            } else {
                want.lru_len += 1;
                want.lru_size += e.size;
                lru.insert(a);
                if e.dirty {
                    want.dlru_len += 1;
                    dlru.insert(a);
                } else {
                    want.clru_len += 1;
                    clru.insert(a);
                }
            }
        }
        let t = cache.totals();
        want.epoch_markers = t.epoch_markers;
        assert_eq!(t, want, "{ctx}: totals");
        let dirty: Vec<u64> = self.m.addrs_where(|e| e.dirty);
        assert_eq!(cache.dirty_addrs(), dirty, "{ctx}: slist contents");
        let set = |v: Vec<u64>| v.into_iter().collect::<BTreeSet<u64>>();
        assert_eq!(set(cache.lru_addrs()), lru, "{ctx}: LRU membership");
        assert_eq!(set(cache.clean_lru_addrs()), clru, "{ctx}: clean LRU");
        assert_eq!(set(cache.dirty_lru_addrs()), dlru, "{ctx}: dirty LRU");
    }

    /// Order of the writes of one whole-cache flush.
    fn check_flush(&mut self, before: &Model, expected: &BTreeSet<u64>, written: &[u64]) {
        let ctx = &self.ctx;
        let got: BTreeSet<u64> = written.iter().copied().collect();
        assert_eq!(&got, expected, "{ctx}: set of entries the flush wrote");
        let pos: BTreeMap<u64, usize> = written.iter().enumerate().map(|(i, a)| (*a, i)).collect();
        // MDC-078: every written descendant before its ancestor.
        for (i, &p) in written.iter().enumerate() {
            let mut d = BTreeSet::new();
            before.descendants(p, &mut d);
            for c in d {
                if let Some(&j) = pos.get(&c) {
                    assert!(j < i, "{ctx}: parent {p:#x} written before child {c:#x}");
                }
            }
        }
        // MDC-077: flush-last entries after every other entry, except entries that had to wait
        // for a flush-last descendant (dependency order outranks flush-last, MDC-078).
        let (last, other): (Vec<u64>, Vec<u64>) =
            written.iter().partition(|a| before.get(**a).last);
        let waits_for_last = |a: u64| {
            let mut d = BTreeSet::new();
            before.descendants(a, &mut d);
            d.iter().any(|c| last.contains(c))
        };
        let independent: Vec<u64> = other
            .iter()
            .copied()
            .filter(|&a| !waits_for_last(a))
            .collect();
        if let (Some(&l), Some(&o)) = (last.first(), independent.last()) {
            assert!(
                pos[&o] < pos[&l],
                "{ctx}: flush-last {l:#x} written before {o:#x}"
            );
        }
        // MDC-074 / Q-31: without dependencies, ascending address order (flush-last ones among
        // themselves too).
        if before.edges().is_empty() {
            assert!(
                other.windows(2).all(|w| w[0] < w[1]),
                "{ctx}: flush order {other:x?} not ascending"
            );
            assert!(
                last.windows(2).all(|w| w[0] < w[1]),
                "{ctx}: flush-last order {last:x?} not ascending"
            );
        } else if !written.is_empty() {
            self.n.flushes_with_deps += 1;
        }
        self.n.flushes_checked += 1;
    }

    /// Release everything the driver holds, then close: every dirty entry must be written and every
    /// entry evicted, and the file must hold the last version of every entry that was not
    /// deliberately discarded.
    fn teardown(&mut self) {
        self.n.epochs = self.h.cache.epochs_completed();
        self.n.aged_out = self.h.cache.stats().aged_out;
        while !self.handles.is_empty() {
            self.step_unprotect_none(self.handles.len() - 1);
        }
        for (p, c) in self.m.edges() {
            self.ctx = format!("teardown destroy {p:#x} -> {c:#x}");
            self.h.cache.destroy_flush_dependency(p, c).unwrap();
            self.m.get_mut(p).children.remove(&c);
            self.m.get_mut(c).parents.remove(&p);
        }
        for a in self.m.addrs_where(|e| e.pinned) {
            self.ctx = format!("teardown unpin {a:#x}");
            self.h.cache.unpin(a).unwrap();
            self.m.get_mut(a).pinned = false;
        }
        self.h.cache.set_write_permitted(true);
        self.write_ok = true;
        self.h.clear_io();
        self.sync(&Outcome::quiet());
        if self.stranded > 0 {
            // Stranded protections block the close (MDC-080, Q-06) but not a plain flush.
            let protected = self.m.addrs_where(|e| e.protected()).len();
            self.step(&Op::Flush);
            let r = self.h.cache.close();
            assert!(
                matches!(r, Err(CacheError::ProtectedEntries { count }) if count == protected),
                "close with stranded protections: {r:?}"
            );
            return;
        }
        self.ctx = "teardown close".into();
        let (expected, protected, stuck) = self.m.simulate_flush(false);
        assert_eq!((protected, stuck), (0, 0));
        self.h.clear_io();
        let before = self.m.clone();
        let r = self.h.cache.close();
        assert!(r.is_ok(), "close: {r:?}");
        let written = self.sync(&Outcome::may_evict());
        self.check_flush(&before, &expected, &written);
        assert!(self.m.e.is_empty());
        assert_eq!(self.h.cache.totals().index_len, 0);
        // No data lost: the file holds the last version written at every address.
        for (&a, &(fill, len)) in &self.disk {
            assert!(self.storage_bytes(a, len).iter().all(|&b| b == fill));
        }
    }

    fn step_unprotect_none(&mut self, idx: usize) {
        let (a, h) = self.handles.remove(idx);
        self.ctx = format!("teardown unprotect {a:#x}");
        let ro = h.is_read_only();
        let r = self.h.cache.unprotect(h, UnprotectFlags::NONE);
        assert!(r.is_ok(), "{}: {r:?}", self.ctx);
        let e = self.m.get_mut(a);
        if ro {
            e.ro -= 1;
        } else {
            e.rw = false;
        }
        if !e.protected() {
            if e.dirtied {
                e.dirty = true;
                e.disk_ok = false;
            }
            e.dirtied = false;
        }
    }
}

/// `flags` without `bit` (the flag type has no constructor from raw bits).
fn without(flags: UnprotectFlags, bit: UnprotectFlags) -> UnprotectFlags {
    use UnprotectFlags as U;
    [
        U::DIRTIED,
        U::DELETED,
        U::PIN,
        U::UNPIN,
        U::SET_FLUSH_MARKER,
        U::FREE_FILE_SPACE,
        U::TAKE_OWNERSHIP,
    ]
    .into_iter()
    .filter(|&f| flags.contains(f) && f != bit)
    .fold(U::NONE, |acc, f| acc | f)
}

/// Case count: `default`, or `PROPTEST_CASES` for longer soak runs.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run(ops: &[Op], config_idx: usize) -> Sim {
    let mut sim = Sim::new(config_idx, 1);
    sim.compare();
    for op in ops {
        sim.step(op);
    }
    sim.teardown();
    if std::env::var_os("MODEL_COUNTS").is_some() {
        eprintln!("{:?}", sim.n);
    }
    sim
}

// ---------------------------------------------------------------------------------------------
// Property tests
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(64),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// MDC-013, MDC-014, MDC-075: random sequences of insert, protect, unprotect (with every flag
    /// combination), pin, unpin, mark dirty/clean, resize, move, expunge, flush dependencies,
    /// flushes, single-entry flushes, configuration changes and write permission changes, in small
    /// caches (4–16 KiB fixed, or adaptive). After every call the three lists (LRU, protected,
    /// pinned) hold exactly the model's entries with matching lengths and byte totals that add up to
    /// the index's, the clean/dirty LRUs partition the LRU, and the slist holds exactly the dirty
    /// entries with `slist_len` = number of dirty entries and `slist_size == dirty_size`. No
    /// protected or pinned entry is ever evicted, no dirty entry leaves without being written, every
    /// flush writes exactly the entries the spec allows, children before parents (MDC-078),
    /// flush-last entries last (MDC-077) and otherwise in ascending address order (MDC-074), a
    /// marked flush writes only marked entries (MDC-079), a flush with dirty protected entries
    /// writes the rest and reports them, and illegal calls fail and change nothing. After
    /// each insert, make-space has evicted or written every LRU entry it had to (MDC-016, MDC-017,
    /// MDC-018, MDC-020). A read-write protected entry can be moved and still unprotected through
    /// its handle (MDC-064).
    #[test]
    fn mdc_013_014_075_random_ops_keep_model_invariants(
        ops in prop::collection::vec(op_strategy(false), 1..200),
        config_idx in 0usize..9,
    ) {
        run(&ops, config_idx);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(16),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// MDC-013, MDC-075 under adaptive resizing: protect-heavy sequences in adaptive caches with
    /// 100-access epochs, so that epochs end, the maximum grows and shrinks, and age-out evicts
    /// (writing dirty entries only when writes are permitted). The same model checks run after
    /// every call.
    #[test]
    fn mdc_013_075_adaptive_epochs_keep_model_invariants(
        ops in prop::collection::vec(op_strategy(true), 1500..2000),
        config_idx in 5usize..8,
    ) {
        run(&ops, config_idx);
    }
}

// ---------------------------------------------------------------------------------------------
// MDC-135: a long fuzz run with the extreme checks
// ---------------------------------------------------------------------------------------------

/// MDC-135: with the `extreme-checks` feature (on for these tests: every public call re-validates
/// all lists, totals and dependency counts and panics on a violation), 100,000 random operations
/// from a fixed seed run without a failed check. The model comparison, `check_invariants` included,
/// runs after every step (and `check_invariants` explicitly every 1,000). The counters show that the
/// run exercised loads, writes, evictions, age-out, epochs, flushes with dependencies and rejected
/// calls. Finally a total corrupted on purpose makes `check_invariants` fail.
#[test]
fn mdc_135_extreme_checks_survive_100k_random_ops() {
    const OPS: u64 = 100_000;
    // A fixed seed; `MODEL_SEED` picks another one for soak runs.
    let seed: u8 = std::env::var("MODEL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5e);
    let mut runner = TestRunner::new_with_rng(
        ProptestConfig::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]),
    );
    let mixed = op_strategy(false);
    let adaptive = op_strategy(true);
    let mut sim = Sim::new(0, 2);
    let start = std::time::Instant::now();
    for i in 0..OPS {
        // Blocks of 5,000 operations alternate between the mixed and the adaptive profile.
        let op = if (i / 5_000) % 2 == 0 {
            mixed.new_tree(&mut runner).unwrap().current()
        } else if i % 5_000 == 0 {
            Op::SetConfig {
                // Every other adaptive block uses the roomy age-out configuration.
                idx: [7, 5, 7, 6][(i / 10_000 % 4) as usize],
            }
        } else {
            adaptive.new_tree(&mut runner).unwrap().current()
        };
        sim.step(&op);
        if i % 1000 == 999 {
            sim.h.cache.check_invariants().unwrap();
        }
    }
    sim.teardown();
    let n = &sim.n;
    eprintln!("MDC-135 run: {n:?} in {:?}", start.elapsed());
    assert!(n.steps >= OPS);
    assert!(n.accepted > OPS / 2, "{n:?}");
    assert!(n.rejected > 1_000, "{n:?}");
    assert!(n.loads > 1_000, "{n:?}");
    assert!(n.writes > 1_000, "{n:?}");
    assert!(n.evictions > 1_000, "{n:?}");
    assert!(n.flushes_checked > 1_000, "{n:?}");
    assert!(n.flushes_with_deps > 100, "{n:?}");
    assert!(n.epochs > 50, "{n:?}");
    assert!(n.aged_out > 10, "{n:?}");
    // The checks do catch a broken total.
    let mut h = harness(1, fixed(4 * 1024, 0.0));
    h.insert(0, 0x800, 64);
    h.cache.check_invariants().unwrap();
    h.cache.debug_corrupt_totals_for_test();
    assert!(matches!(
        h.cache.check_invariants(),
        Err(CacheError::Invariant(_))
    ));
}

// ---------------------------------------------------------------------------------------------
// Regression tests for bugs the model found
// ---------------------------------------------------------------------------------------------

/// Found by the model: `unprotect(DELETED | PIN)` used to pin and unprotect the entry and only then
/// fail in the delete step ("a pinned entry cannot be evicted"), so the call returned an error after
/// changing the entry (MDC-049, MDC-055). The combination is now rejected before anything changes.
#[test]
fn regression_unprotect_deleted_pin_changes_nothing() {
    let ops = [
        Op::Protect {
            sel: 0,
            ro: false,
            wrong_class: false,
            last: false,
            size: 16,
            class: 0,
        },
        Op::Unprotect { sel: 0, kind: 14 },
    ];
    let sim = run(&ops, 0);
    // Rejected, and the protection is not stranded: the handle came back.
    assert_eq!((sim.n.rejected, sim.stranded), (1, 0));

    let mut h = harness(1, fixed(4 * 1024, 0.0));
    let hd = h.cache.protect(0, 0x800, &16, ProtectFlags::NONE).unwrap();
    let err = h
        .cache
        .unprotect(hd, UnprotectFlags::DELETED | UnprotectFlags::PIN)
        .unwrap_err();
    assert!(
        matches!(err.error, CacheError::InvalidFlags { .. }),
        "{err:?}"
    );
    assert!(
        err.handle.is_some(),
        "the rejected call gives the protection back"
    );
    let s = h.cache.status(0x800).unwrap();
    assert!(s.protected && !s.pinned_by_client);
    let t = h.cache.totals();
    assert_eq!((t.pl_len, t.pel_len, t.lru_len, t.index_len), (1, 0, 0, 1));
}

/// MDC-064: a read-write protected entry moved while protected is unprotected through its handle
/// (the handle follows the entry), is dirty at its new address, and is written there and only
/// there; the old address is no longer cached.
#[test]
fn mdc_064_moved_protected_entry_unprotects_through_its_handle() {
    let protect = Op::Protect {
        sel: 1, // the first candidate: 0x800
        ro: false,
        wrong_class: false,
        last: false,
        size: 100,
        class: 0,
    };
    let mut sim = Sim::new(2, 0);
    sim.step(&protect);
    sim.step(&Op::Move {
        sel: 1,
        to: 5, // 0x3000
        wrong_class: false,
    });
    assert!(!sim.h.cache.contains(0x800));
    assert!(sim.h.cache.status(0x3000).unwrap().protected);
    sim.step(&Op::Unprotect { sel: 0, kind: 3 }); // DIRTIED
    let s = sim.h.cache.status(0x3000).unwrap();
    assert!(s.dirty && !s.protected);
    sim.step(&Op::Flush);
    assert_eq!(sim.h.writes(), vec![0x3000]);
    assert_eq!((sim.n.accepted, sim.n.rejected), (4, 0));
    let fill = sim.m.get(0x3000).fill;
    sim.teardown();
    assert_eq!(sim.disk.get(&0x3000), Some(&(fill, 100)));
    assert_eq!(sim.disk.get(&0x800), None);
}
