//! Spec §3.9 (writing and evicting one entry), §3.10 (flushing the cache), §3.11 (flush
//! dependencies), §3.12 (tagging) and §3.13 (client class interface): MDC-067 .. MDC-096, with edge
//! cases E-34 .. E-41.
use crate::common;
use common::*;

use std::sync::{Arc, Mutex};

use h5_io::{IoOp, MemoryStorage, Metrics, OpRecord, Storage};
use h5_metacache::*;
use proptest::prelude::*;

// ----- local helpers -----

/// A shared log that hooks (which must be `Send + 'static`) append to.
type Shared<T> = Arc<Mutex<Vec<T>>>;

fn shared<T>() -> Shared<T> {
    Arc::new(Mutex::new(Vec::new()))
}

fn taken<T: Clone>(s: &Shared<T>) -> Vec<T> {
    s.lock().unwrap().clone()
}

/// What the log-flush callback saw: the event, the number of storage writes done so far and the
/// number of class-0 events recorded so far.
type FlushLog = Shared<(LogFlushEvent, usize, usize)>;

const NAMES: [&str; 4] = ["mock-0", "mock-1", "mock-2", "mock-3"];

/// Like `common::harness`, but with a log-flush callback that records where it runs relative to the
/// storage writes and to class 0's callbacks (MDC-068).
fn harness_with_log(nclasses: usize, config: CacheConfig) -> (Harness, FlushLog) {
    let storage = Arc::new(Metrics::new(MemoryStorage::new()));
    storage.set_len(STORAGE_LEN).unwrap();
    storage.record_ops(true);
    let classes: Vec<Arc<MockClass>> = (0..nclasses)
        .map(|i| MockClass::new(i as u8, NAMES[i], ClassFlags::NONE))
        .collect();
    let table: Vec<Arc<dyn Class<Mock>>> = classes
        .iter()
        .map(|c| c.clone() as Arc<dyn Class<Mock>>)
        .collect();
    let log: FlushLog = shared();
    let (log2, storage2, class0) = (log.clone(), storage.clone(), classes[0].clone());
    let cache = CacheBuilder::new(
        storage.clone() as Arc<dyn Storage>,
        table,
        MockFile {
            eoa: STORAGE_LEN,
            frees: Vec::new(),
        },
    )
    .config(config)
    .log_flush(move |ev| {
        let writes = storage2.ops_of(IoOp::Write).len();
        let events = class0.events().len();
        log2.lock().unwrap().push((ev, writes, events));
    })
    .build()
    .unwrap();
    (
        Harness {
            cache,
            storage,
            classes,
        },
        log,
    )
}

/// A roomy fixed-size cache: nothing is evicted unless a test asks for it.
fn roomy() -> CacheConfig {
    fixed(1 << 20, 0.0)
}

fn insert_with(h: &mut Harness, class: u8, addr: u64, size: usize, flags: InsertFlags) {
    h.cache
        .insert(class, addr, MockEntry::new(size), flags)
        .unwrap();
}

fn dirty(h: &mut Harness, addr: u64) -> bool {
    h.cache.status(addr).unwrap().dirty
}

fn callback_of(e: &CacheError) -> Option<Callback> {
    match e {
        CacheError::Client { callback, .. } => Some(*callback),
        _ => None,
    }
}

fn is_notify(e: &Event) -> bool {
    matches!(e, Event::Notify { .. })
}

/// The entry-flush flag set with the given raw bits (CLEAR_ONLY 1, INVALIDATE 2, FREE_FILE_SPACE 4,
/// TAKE_OWNERSHIP 8).
fn entry_flags(bits: u16) -> EntryFlushFlags {
    let mut f = EntryFlushFlags::NONE;
    for flag in [
        EntryFlushFlags::CLEAR_ONLY,
        EntryFlushFlags::INVALIDATE,
        EntryFlushFlags::FREE_FILE_SPACE,
        EntryFlushFlags::TAKE_OWNERSHIP,
    ] {
        if bits & flag.bits() != 0 {
            f |= flag;
        }
    }
    assert_eq!(f.bits(), bits);
    f
}

// ----- §3.9 writing and evicting a single entry -----

/// Expected effect of one legal row of table 1 on a dirty entry.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Row {
    writes: usize,
    clear: Option<bool>,
    free_icr: usize,
    frees: usize,
    resident: bool,
    owned: bool,
}

fn table_1(bits: u16) -> Option<Row> {
    let row = |writes, clear, free_icr, frees, resident, owned| {
        Some(Row {
            writes,
            clear,
            free_icr,
            frees,
            resident,
            owned,
        })
    };
    match bits {
        0b0000 => row(1, None, 0, 0, true, false),        // none
        0b0001 => row(0, Some(false), 0, 0, true, false), // CLEAR_ONLY
        0b0010 => row(1, None, 1, 0, false, false),       // INVALIDATE
        0b0011 => row(0, Some(true), 1, 0, false, false), // CLEAR_ONLY | INVALIDATE
        0b0111 => row(0, Some(true), 1, 1, false, false), // ... | FREE_FILE_SPACE
        0b1010 => row(1, None, 0, 0, false, true),        // INVALIDATE | TAKE_OWNERSHIP
        0b1011 => row(0, None, 0, 0, false, true), // CLEAR_ONLY | INVALIDATE | TAKE_OWNERSHIP
        _ => None,
    }
}

/// MDC-067 / E-34: table-driven over all 16 flag combinations of a single-entry flush of a dirty
/// entry. The 7 combinations of table 1 write, clear, free, give file space back and keep or drop
/// the entry as listed; the other 9 are rejected with `InvalidFlags` and change nothing. Taking
/// ownership returns the object and skips `free_icr` (and, per MDC-073, `clear`).
#[test]
fn mdc_067_single_entry_flush_flag_table() {
    let mut legal = 0;
    for bits in 0u16..16 {
        let flags = entry_flags(bits);
        let mut h = harness(1, roomy());
        h.cache
            .insert(0, 0x100, MockEntry::filled(64, 0x42), InsertFlags::NONE)
            .unwrap();
        h.classes[0].clear_events();
        h.clear_io();
        let r = h.cache.flush_entry(0x100, flags);
        let c = &h.classes[0];
        match table_1(bits) {
            Some(row) => {
                legal += 1;
                let owned = r.unwrap_or_else(|e| panic!("{flags:?}: {e}"));
                assert_eq!(h.writes().len(), row.writes, "{flags:?}");
                if row.writes == 1 {
                    assert_eq!(h.write_ops(), vec![OpRecord::new(IoOp::Write, 0x100, 64)]);
                }
                let clears: Vec<Event> = c
                    .events()
                    .into_iter()
                    .filter(|e| matches!(e, Event::Clear { .. }))
                    .collect();
                let want_clears: Vec<Event> = row
                    .clear
                    .map(|about_to_destroy| Event::Clear { about_to_destroy })
                    .into_iter()
                    .collect();
                assert_eq!(clears, want_clears, "{flags:?}");
                assert_eq!(c.count(|e| *e == Event::FreeIcr), row.free_icr, "{flags:?}");
                let want_frees: Vec<(u64, u64)> = if row.frees == 1 {
                    vec![(0x100, 64)]
                } else {
                    vec![]
                };
                assert_eq!(h.cache.ctx().frees, want_frees, "{flags:?}");
                assert_eq!(h.cache.contains(0x100), row.resident, "{flags:?}");
                if row.resident {
                    assert!(!dirty(&mut h, 0x100), "{flags:?}: resident entry is clean");
                }
                assert_eq!(owned.is_some(), row.owned, "{flags:?}");
                if let Some(icr) = owned {
                    assert_eq!(icr, MockEntry::filled(64, 0x42));
                }
                let before_evict = h.classes[0].count(|e| {
                    matches!(
                        e,
                        Event::Notify {
                            action: NotifyAction::BeforeEvict,
                            ..
                        }
                    )
                });
                assert_eq!(before_evict, usize::from(!row.resident), "{flags:?}");
            }
            None => {
                let err = r.unwrap_err();
                assert!(
                    matches!(
                        err,
                        CacheError::InvalidFlags {
                            call: "flush_entry",
                            ..
                        }
                    ),
                    "{flags:?}: {err:?}"
                );
                assert!(h.writes().is_empty());
                assert!(c.events().is_empty(), "{flags:?}: {:?}", c.events());
                assert!(h.cache.contains(0x100));
                assert!(dirty(&mut h, 0x100));
            }
        }
        h.check();
    }
    assert_eq!(legal, 7);
}

/// MDC-067 / E-34 / Q-24: on a clean entry, a plain or `CLEAR_ONLY` flush is a precondition
/// violation (an `Err`, not a silent no-op); the evicting rows evict without writing or clearing.
#[test]
fn e_34_single_entry_flush_of_clean_entry() {
    for bits in [0b0000u16, 0b0001] {
        let mut h = harness(1, roomy());
        h.insert(0, 0x100, 64);
        h.cache.flush(FlushFlags::NONE).unwrap();
        h.clear_io();
        let err = h.cache.flush_entry(0x100, entry_flags(bits)).unwrap_err();
        assert!(
            matches!(err, CacheError::WrongState { addr: 0x100, .. }),
            "{err:?}"
        );
        assert!(h.writes().is_empty());
        assert!(h.cache.contains(0x100));
        h.check();
    }
    for bits in [0b0010u16, 0b0011, 0b0111, 0b1010, 0b1011] {
        let mut h = harness(1, roomy());
        h.insert(0, 0x100, 64);
        h.cache.flush(FlushFlags::NONE).unwrap();
        h.clear_io();
        h.classes[0].clear_events();
        let owned = h.cache.flush_entry(0x100, entry_flags(bits)).unwrap();
        assert!(h.writes().is_empty(), "{bits:#b}");
        assert_eq!(h.classes[0].count(|e| matches!(e, Event::Clear { .. })), 0);
        assert!(!h.cache.contains(0x100));
        assert_eq!(owned.is_some(), bits & 0b1000 != 0);
        h.check();
    }
}

/// MDC-068: a write runs pre_serialize → serialize → storage write → log_flush → mark clean →
/// notify(AfterFlush). The log-flush callback sees the write already done and exactly the
/// pre-serialize and serialize callbacks before it; the AfterFlush notify sees a clean entry. The
/// entry moves to the head of the LRU and onto the clean LRU, and `flushes` is counted.
#[test]
fn mdc_068_write_order_and_log_flush() {
    let (mut h, log) = harness_with_log(1, roomy());
    h.insert(0, 0x100, 64);
    h.insert(0, 0x200, 64);
    assert_eq!(h.cache.lru_addrs(), vec![0x200, 0x100]);
    h.classes[0].clear_events();
    h.clear_io();
    let seen = shared::<(&str, usize, bool)>();
    let (s1, s2) = (seen.clone(), seen.clone());
    let storage = h.storage.clone();
    let storage2 = h.storage.clone();
    h.classes[0].knobs().serialize = Some(Box::new(move |_c, _icr, _img| {
        s1.lock()
            .unwrap()
            .push(("serialize", storage.ops_of(IoOp::Write).len(), true));
        Ok(())
    }));
    h.classes[0].knobs().notify = Some(Box::new(move |c, action, addr, _icr| {
        if action == NotifyAction::AfterFlush {
            let d = c.status(addr).unwrap().dirty;
            s2.lock()
                .unwrap()
                .push(("after_flush", storage2.ops_of(IoOp::Write).len(), d));
        }
        Ok(())
    }));

    h.cache.flush_entry(0x100, EntryFlushFlags::NONE).unwrap();

    assert_eq!(
        h.classes[0].events(),
        vec![
            Event::PreSerialize {
                addr: 0x100,
                len: 64
            },
            Event::Serialize { len: 64 },
            Event::Notify {
                action: NotifyAction::AfterFlush,
                addr: 0x100
            },
        ]
    );
    // log_flush ran after the write (1 write done) and after the 2 encode callbacks, before notify.
    assert_eq!(
        taken(&log),
        vec![(
            LogFlushEvent {
                addr: 0x100,
                len: 64,
                class: 0,
                mem_type: MemType::Other
            },
            1,
            2
        )]
    );
    // serialize ran before the write; AfterFlush after it, with the entry already clean.
    assert_eq!(
        taken(&seen),
        vec![("serialize", 0, true), ("after_flush", 1, false)]
    );
    assert_eq!(h.write_ops(), vec![OpRecord::new(IoOp::Write, 0x100, 64)]);
    let st = h.cache.status(0x100).unwrap();
    assert!(!st.dirty && !st.flush_in_progress && st.image_up_to_date);
    assert_eq!(h.cache.lru_addrs(), vec![0x100, 0x200]);
    assert_eq!(h.cache.clean_lru_addrs(), vec![0x100]);
    assert_eq!(h.cache.dirty_lru_addrs(), vec![0x200]);
    assert_eq!(h.cache.dirty_addrs(), vec![0x200]);
    assert_eq!(h.cache.stats().per_class[0].flushes, 1);
    assert_eq!(h.cache.stats().writes, 1);
}

/// MDC-069: pre_serialize moves 0x100 → 0x2000 and resizes 64 → 128: one 128-byte write at 0x2000,
/// 0x100 is no longer cached, totals follow, and the move/size-change counters count it (the
/// `cache_flush_*` ones only inside a whole-cache flush). With no flags, a junk address and length
/// are ignored.
#[test]
fn mdc_069_pre_serialize_move_and_resize() {
    for whole_cache in [false, true] {
        let (mut h, log) = harness_with_log(1, roomy());
        h.insert(0, 0x100, 64);
        h.classes[0].knobs().pre_serialize = Some(Box::new(|_c, _icr, addr, _len| {
            Ok(if addr == 0x100 {
                PreSerialize {
                    flags: PreSerializeFlags {
                        moved: true,
                        resized: true,
                    },
                    new_addr: 0x2000,
                    new_len: 128,
                }
            } else {
                PreSerialize::default()
            })
        }));
        if whole_cache {
            h.cache.flush(FlushFlags::NONE).unwrap();
        } else {
            h.cache.flush_entry(0x100, EntryFlushFlags::NONE).unwrap();
        }
        assert_eq!(h.write_ops(), vec![OpRecord::new(IoOp::Write, 0x2000, 128)]);
        assert_eq!(
            h.classes[0].count(|e| *e == Event::Serialize { len: 128 }),
            1
        );
        assert!(!h.cache.contains(0x100));
        assert!(h.cache.status(0x100).is_none());
        let st = h.cache.status(0x2000).unwrap();
        assert_eq!((st.size, st.dirty), (128, false));
        let t = h.cache.totals();
        assert_eq!((t.index_len, t.index_size, t.clean_size), (1, 128, 128));
        assert_eq!(taken(&log)[0].0.addr, 0x2000);
        assert_eq!(taken(&log)[0].0.len, 128);
        let s = h.cache.stats().per_class[0];
        assert_eq!((s.entry_flush_moves, s.entry_flush_size_changes), (1, 1));
        let inside = u64::from(whole_cache);
        assert_eq!(
            (s.cache_flush_moves, s.cache_flush_size_changes),
            (inside, inside)
        );
    }

    // No flags: the returned address and length are ignored.
    let mut h = harness(1, roomy());
    h.insert(0, 0x100, 64);
    h.classes[0].knobs().pre_serialize = Some(Box::new(|_c, _icr, _addr, _len| {
        Ok(PreSerialize {
            flags: PreSerializeFlags::default(),
            new_addr: 0xdead_0000,
            new_len: 7,
        })
    }));
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.write_ops(), vec![OpRecord::new(IoOp::Write, 0x100, 64)]);
    assert_eq!(h.cache.status(0x100).unwrap().size, 64);
    assert!(!h.cache.contains(0xdead_0000));
    let s = h.cache.stats().per_class[0];
    assert_eq!((s.entry_flush_moves, s.entry_flush_size_changes), (0, 0));
}

/// E-38 (serial part): pre_serialize reporting a move onto an address in use, or a resize to 0, is
/// an error; nothing is written and the entry stays dirty where it was.
#[test]
fn e_38_pre_serialize_bad_move_or_zero_resize() {
    let mut h = harness(1, roomy());
    h.insert(0, 0x100, 64);
    h.insert(0, 0x2000, 64);
    h.classes[0].knobs().pre_serialize = Some(Box::new(|_c, _icr, addr, _len| {
        Ok(PreSerialize {
            flags: PreSerializeFlags {
                moved: addr == 0x100,
                resized: false,
            },
            new_addr: 0x2000,
            new_len: 0,
        })
    }));
    let err = h
        .cache
        .flush_entry(0x100, EntryFlushFlags::NONE)
        .unwrap_err();
    assert!(
        matches!(err, CacheError::AddressInUse { addr: 0x2000 }),
        "{err:?}"
    );
    assert!(h.writes().is_empty());
    assert_eq!(h.cache.dirty_addrs(), vec![0x100, 0x2000]);
    assert!(!h.cache.status(0x100).unwrap().flush_in_progress);
    h.check();

    h.classes[0].knobs().pre_serialize = Some(Box::new(|_c, _icr, _addr, _len| {
        Ok(PreSerialize {
            flags: PreSerializeFlags {
                moved: false,
                resized: true,
            },
            new_addr: 0,
            new_len: 0,
        })
    }));
    let err = h
        .cache
        .flush_entry(0x100, EntryFlushFlags::NONE)
        .unwrap_err();
    assert!(
        matches!(
            err,
            CacheError::InvalidSize {
                addr: 0x100,
                size: 0
            }
        ),
        "{err:?}"
    );
    assert!(h.writes().is_empty());
    assert_eq!(h.cache.status(0x100).unwrap().size, 64);
    assert!(dirty(&mut h, 0x100));
    h.check();
}

/// MDC-070: the serialize buffer starts out poisoned; bytes a client leaves unwritten show the
/// poison pattern in the written image (on storage and in the cached image).
#[test]
fn mdc_070_unwritten_serialize_bytes_show_poison() {
    let mut h = harness(1, roomy());
    h.classes[0].knobs().leave_unwritten = 8;
    h.cache
        .insert(0, 0x100, MockEntry::filled(64, 0x11), InsertFlags::NONE)
        .unwrap();
    h.cache.flush(FlushFlags::NONE).unwrap();
    let mut on_disk = vec![0u8; 64];
    h.storage.read_at(0x100, &mut on_disk).unwrap();
    let mut want = vec![0x11u8; 56];
    want.extend([SERIALIZE_POISON; 8]);
    assert_eq!(on_disk, want);
    assert_eq!(h.cache.image(0x100).unwrap(), &want[..]);
    assert_ne!(SERIALIZE_POISON, 0x11);
}

/// MDC-071: the serialize callback of X (0x100) dirties pinned Y, resizes pinned Z and inserts W;
/// all of it shows in the totals. X itself is marked flush-in-progress meanwhile, and protecting,
/// moving, expunging, resizing or dirtying X from inside its own callback fails with `EntryBusy`.
#[test]
fn mdc_071_callbacks_reenter_cache_but_not_own_entry() {
    let mut h = harness(2, roomy());
    insert_with(&mut h, 0, 0x200, 64, InsertFlags::PIN); // Y
    insert_with(&mut h, 0, 0x300, 64, InsertFlags::PIN); // Z
    h.cache.flush(FlushFlags::NONE).unwrap();
    h.insert(1, 0x100, 64); // X
    h.clear_io();
    let seen = shared::<(&'static str, bool)>();
    let s = seen.clone();
    h.classes[1].knobs().serialize = Some(Box::new(move |c, _icr, _img| {
        let mut v = s.lock().unwrap();
        v.push(("in_progress", c.status(0x100).unwrap().flush_in_progress));
        let busy =
            |r: Result<(), CacheError>| matches!(r, Err(CacheError::EntryBusy { addr: 0x100 }));
        v.push(("expunge", busy(c.expunge(1, 0x100, ExpungeFlags::NONE))));
        v.push(("move", busy(c.move_entry(1, 0x100, 0x5000).map(|_| ()))));
        v.push((
            "protect",
            busy(c.protect(1, 0x100, &64, ProtectFlags::NONE).map(|_| ())),
        ));
        v.push(("resize", busy(c.resize(0x100, 32))));
        v.push(("mark_dirty", busy(c.mark_dirty(0x100))));
        v.push(("dirty_y", c.mark_dirty(0x200).is_ok()));
        v.push(("resize_z", c.resize(0x300, 96).is_ok()));
        v.push((
            "insert_w",
            c.insert(0, 0x400, MockEntry::new(64), InsertFlags::NONE)
                .is_ok(),
        ));
        Ok(())
    }));
    h.cache.flush_entry(0x100, EntryFlushFlags::NONE).unwrap();
    let v = taken(&seen);
    assert_eq!(v.len(), 9);
    for (what, ok) in &v {
        assert!(ok, "{what}");
    }
    assert_eq!(h.write_ops(), vec![OpRecord::new(IoOp::Write, 0x100, 64)]);
    let x = h.cache.status(0x100).unwrap();
    assert!(!x.dirty && !x.flush_in_progress && !x.destroy_in_progress);
    assert_eq!(h.cache.status(0x300).unwrap().size, 96);
    assert_eq!(h.cache.dirty_addrs(), vec![0x200, 0x300, 0x400]);
    let t = h.cache.totals();
    assert_eq!(t.index_len, 4);
    assert_eq!(t.index_size, 64 + 64 + 96 + 64);
    assert_eq!(t.dirty_size, 64 + 96 + 64);
    assert_eq!(t.slist_size, t.dirty_size);
    assert_eq!(t.clean_size, 64);
    h.check();
}

/// MDC-071: callbacks may expunge other entries, during a whole-cache flush and during
/// make-space; the flush does not write the expunged entry, make-space restarts its scan, and every
/// list and total stays consistent.
#[test]
fn mdc_071_callbacks_expunge_other_entries() {
    // Whole-cache flush: X's serialize expunges dirty V, which comes later in address order.
    let mut h = harness(2, roomy());
    h.insert(1, 0x100, 64); // X
    h.insert(0, 0x300, 64);
    h.insert(0, 0x500, 64); // V
    let ok = shared::<bool>();
    let o = ok.clone();
    h.classes[1].knobs().serialize = Some(Box::new(move |c, _icr, _img| {
        o.lock()
            .unwrap()
            .push(c.expunge(0, 0x500, ExpungeFlags::NONE).is_ok());
        Ok(())
    }));
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(taken(&ok), vec![true]);
    assert_eq!(h.writes(), vec![0x100, 0x300]);
    assert_eq!(h.cache.cached_addrs(), vec![0x100, 0x300]);
    assert_eq!(h.cache.totals().dirty_size, 0);
    h.check();

    // Make-space: writing the dirty LRU tail A expunges B, the next entry the scan would visit.
    let mut h = harness(2, fixed(1024, 0.0));
    h.insert(1, 0x100, 256); // A, dirty, LRU tail
    h.touch(0, 0x200, 256); // B
    h.touch(0, 0x300, 256); // C
    h.touch(0, 0x400, 256); // D
    assert_eq!(h.cache.lru_addrs(), vec![0x400, 0x300, 0x200, 0x100]);
    let ok = shared::<bool>();
    let o = ok.clone();
    h.classes[1].knobs().serialize = Some(Box::new(move |c, _icr, _img| {
        o.lock()
            .unwrap()
            .push(c.expunge(0, 0x200, ExpungeFlags::NONE).is_ok());
        Ok(())
    }));
    h.insert(0, 0x500, 256);
    assert_eq!(taken(&ok), vec![true]);
    assert_eq!(h.writes(), vec![0x100]);
    assert_eq!(h.cache.cached_addrs(), vec![0x100, 0x300, 0x400, 0x500]);
    let t = h.cache.totals();
    assert_eq!((t.index_len, t.index_size, t.dirty_size), (4, 1024, 256));
    h.check();
}

/// MDC-072: eviction sends BeforeEvict while the entry is still resident (it can be queried and is
/// marked destroy-in-progress), then frees the object, then counts the eviction.
#[test]
fn mdc_072_evict_order_and_query_in_before_evict() {
    let mut h = harness(1, roomy());
    h.insert(0, 0x100, 64);
    h.cache.flush(FlushFlags::NONE).unwrap();
    h.classes[0].clear_events();
    let seen = shared::<Option<EntryStatus>>();
    let s = seen.clone();
    h.classes[0].knobs().notify = Some(Box::new(move |c, action, addr, _icr| {
        if action == NotifyAction::BeforeEvict {
            s.lock().unwrap().push(c.status(addr));
        }
        Ok(())
    }));
    assert_eq!(
        h.cache
            .flush_entry(0x100, EntryFlushFlags::INVALIDATE)
            .unwrap(),
        None
    );
    let v = taken(&seen);
    assert_eq!(v.len(), 1);
    let st = v[0].clone().expect("entry is queryable inside BeforeEvict");
    assert!(st.destroy_in_progress);
    assert_eq!(st.size, 64);
    assert_eq!(
        h.classes[0].events(),
        vec![
            Event::Notify {
                action: NotifyAction::BeforeEvict,
                addr: 0x100
            },
            Event::FreeIcr
        ]
    );
    assert!(!h.cache.contains(0x100));
    assert_eq!(h.cache.stats().per_class[0].evictions, 1);
    assert_eq!(h.cache.stats().total_evictions, 1);
}

/// MDC-072: errors from free_icr reach the call that triggered the eviction (a single-entry flush,
/// or a protect whose make-space evicts); an error from BeforeEvict leaves the entry resident.
#[test]
fn mdc_072_evict_errors_reach_caller() {
    let mut h = harness(1, fixed(1024, 0.0));
    h.insert(0, 0x100, 64);
    h.cache.flush(FlushFlags::NONE).unwrap();
    h.classes[0].knobs().fail.insert(Callback::FreeIcr);
    let err = h
        .cache
        .flush_entry(0x100, EntryFlushFlags::INVALIDATE)
        .unwrap_err();
    assert!(
        matches!(
            err,
            CacheError::Client {
                callback: Callback::FreeIcr,
                addr: 0x100,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!h.cache.contains(0x100));
    h.check();

    // Eviction by make-space inside protect.
    h.touch(0, 0x1000, 512);
    h.touch(0, 0x2000, 512);
    let err = h
        .cache
        .protect(0, 0x3000, &512, ProtectFlags::NONE)
        .unwrap_err();
    assert_eq!(callback_of(&err), Some(Callback::FreeIcr), "{err:?}");
    assert!(!h.cache.contains(0x1000), "the LRU tail was evicted");
    h.check();

    // BeforeEvict failing: the entry stays.
    h.classes[0].knobs().fail.clear();
    h.classes[0].knobs().fail.insert(Callback::Notify);
    let err = h
        .cache
        .flush_entry(0x2000, EntryFlushFlags::INVALIDATE)
        .unwrap_err();
    assert_eq!(callback_of(&err), Some(Callback::Notify));
    assert!(h.cache.contains(0x2000));
    assert!(!h.cache.status(0x2000).unwrap().destroy_in_progress);
    h.check();
}

/// MDC-073 / Q-05: clear runs with `false` when a dirty entry is marked clean without a write, with
/// `true` when a dirty entry is discarded (delete at unprotect, expunge), and never for clean
/// entries, after a write, or when the caller takes ownership.
#[test]
fn mdc_073_clear_callback_paths() {
    let clears = |h: &Harness| -> Vec<Event> {
        h.classes[0]
            .events()
            .into_iter()
            .filter(|e| matches!(e, Event::Clear { .. }))
            .collect()
    };
    let f = Event::Clear {
        about_to_destroy: false,
    };
    let t = Event::Clear {
        about_to_destroy: true,
    };
    let mut h = harness(1, roomy());

    // mark_clean of a dirty pinned entry, and clear-only flush.
    insert_with(&mut h, 0, 0x100, 64, InsertFlags::PIN);
    h.cache.mark_clean(0x100).unwrap();
    h.insert(0, 0x200, 64);
    h.cache
        .flush_entry(0x200, EntryFlushFlags::CLEAR_ONLY)
        .unwrap();
    assert_eq!(clears(&h), vec![f.clone(), f.clone()]);
    assert_eq!(h.cache.stats().per_class[0].clears, 2);
    assert_eq!(h.cache.stats().per_class[0].pinned_clears, 1);
    // Marking a clean entry clean does nothing.
    h.cache.mark_clean(0x100).unwrap();
    assert_eq!(clears(&h).len(), 2);

    // The parallel mark-clean (a sync point's clean list), also for an entry protected at the time:
    // that one is cleared at unprotect.
    h.classes[0].clear_events();
    h.insert(0, 0x800, 64);
    h.insert(0, 0x900, 64);
    let p = h.cache.protect(0, 0x900, &64, ProtectFlags::NONE).unwrap();
    h.cache.apply_clean_list(&[0x800, 0x900]).unwrap();
    assert_eq!(clears(&h), vec![f.clone()]);
    assert!(!dirty(&mut h, 0x800));
    h.cache.unprotect(p, UnprotectFlags::NONE).unwrap();
    assert_eq!(clears(&h), vec![f.clone(), f.clone()]);
    assert!(!dirty(&mut h, 0x900));

    // Delete of a dirty entry at unprotect; delete of a clean entry.
    h.classes[0].clear_events();
    h.insert(0, 0x300, 64);
    let p = h.cache.protect(0, 0x300, &64, ProtectFlags::NONE).unwrap();
    h.cache.unprotect(p, UnprotectFlags::DELETED).unwrap();
    assert_eq!(clears(&h), vec![t.clone()]);
    h.touch(0, 0x400, 64);
    let p = h.cache.protect(0, 0x400, &64, ProtectFlags::NONE).unwrap();
    h.cache.unprotect(p, UnprotectFlags::DELETED).unwrap();
    assert_eq!(clears(&h), vec![t.clone()], "clean delete: no clear");

    // Expunge of a dirty entry.
    h.insert(0, 0x500, 64);
    h.cache.expunge(0, 0x500, ExpungeFlags::NONE).unwrap();
    assert_eq!(clears(&h), vec![t.clone(), t.clone()]);

    // A write never clears; neither does deleting with TAKE_OWNERSHIP.
    h.classes[0].clear_events();
    h.insert(0, 0x600, 64);
    h.cache.flush(FlushFlags::NONE).unwrap();
    h.insert(0, 0x700, 64);
    let p = h.cache.protect(0, 0x700, &64, ProtectFlags::NONE).unwrap();
    let owned = h
        .cache
        .unprotect(p, UnprotectFlags::DELETED | UnprotectFlags::TAKE_OWNERSHIP)
        .unwrap();
    assert_eq!(owned, Some(MockEntry::new(64)));
    assert!(clears(&h).is_empty());
    assert!(h.writes().contains(&0x600));
    h.check();
}

// ----- §3.10 flushing the cache -----

/// MDC-074: a flush writes every dirty entry, the pinned one too, in ascending address order; all
/// stay resident and become clean, and the pinned one stays pinned.
#[test]
fn mdc_074_flush_writes_in_address_order() {
    let mut h = harness(1, roomy());
    h.insert(0, 0x300, 64);
    insert_with(&mut h, 0, 0x100, 64, InsertFlags::PIN);
    h.insert(0, 0x200, 64);
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes(), vec![0x100, 0x200, 0x300]);
    for a in [0x100, 0x200, 0x300] {
        let st = h.cache.status(a).unwrap();
        assert!(!st.dirty, "{a:#x}");
    }
    assert!(h.cache.status(0x100).unwrap().pinned_by_client);
    let t = h.cache.totals();
    assert_eq!((t.slist_len, t.dirty_size, t.index_len), (0, 0, 3));
    assert_eq!((t.pel_len, t.lru_len), (1, 2));
    // Nothing dirty: a second flush writes nothing.
    h.clear_io();
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert!(h.writes().is_empty());
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u8, usize, bool),
    Touch(u8, usize, bool),
    FlushEntry(u8, u16),
    MarkClean(u8),
    MarkDirty(u8),
    Flush(bool),
    Unpin(u8),
    Resize(u8, usize),
    Expunge(u8),
    Move(u8, u8),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let slot = 0u8..8;
    let size = 64usize..=512;
    prop_oneof![
        (slot.clone(), size.clone(), any::<bool>()).prop_map(|(a, s, p)| Op::Insert(a, s, p)),
        (slot.clone(), size.clone(), any::<bool>()).prop_map(|(a, s, d)| Op::Touch(a, s, d)),
        (slot.clone(), 0u16..16).prop_map(|(a, f)| Op::FlushEntry(a, f)),
        slot.clone().prop_map(Op::MarkClean),
        slot.clone().prop_map(Op::MarkDirty),
        any::<bool>().prop_map(Op::Flush),
        slot.clone().prop_map(Op::Unpin),
        (slot.clone(), size).prop_map(|(a, s)| Op::Resize(a, s)),
        slot.clone().prop_map(Op::Expunge),
        (slot.clone(), slot).prop_map(|(a, b)| Op::Move(a, b)),
    ]
}

fn slot_addr(i: u8) -> u64 {
    0x1000 * (u64::from(i) + 1)
}

fn apply(h: &mut Harness, op: &Op) {
    let c = &mut h.cache;
    let _ = match *op {
        Op::Insert(a, s, pin) => c.insert(
            0,
            slot_addr(a),
            MockEntry::new(s),
            if pin {
                InsertFlags::PIN
            } else {
                InsertFlags::NONE
            },
        ),
        Op::Touch(a, s, d) => match c.protect(0, slot_addr(a), &s, ProtectFlags::NONE) {
            Ok(p) => {
                let f = if d {
                    UnprotectFlags::DIRTIED
                } else {
                    UnprotectFlags::NONE
                };
                c.unprotect(p, f).map(|_| ()).map_err(CacheError::from)
            }
            Err(e) => Err(e),
        },
        Op::FlushEntry(a, bits) => c.flush_entry(slot_addr(a), entry_flags(bits)).map(|_| ()),
        Op::MarkClean(a) => c.mark_clean(slot_addr(a)),
        Op::MarkDirty(a) => c.mark_dirty(slot_addr(a)),
        Op::Flush(marked) => c.flush(if marked {
            FlushFlags::MARKED_ENTRIES
        } else {
            FlushFlags::NONE
        }),
        Op::Unpin(a) => c.unpin(slot_addr(a)),
        Op::Resize(a, s) => c.resize(slot_addr(a), s),
        Op::Expunge(a) => c.expunge(0, slot_addr(a), ExpungeFlags::NONE),
        Op::Move(a, b) => c.move_entry(0, slot_addr(a), slot_addr(b)).map(|_| ()),
    };
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// MDC-075: after every operation of a random sequence, the slist holds exactly the dirty
    /// entries in ascending order, its length is the number of dirty entries and its byte total
    /// equals the index's dirty total.
    #[test]
    fn mdc_075_slist_tracks_dirty_entries(ops in proptest::collection::vec(op_strategy(), 1..60)) {
        let mut h = harness(1, fixed(2048, 0.25));
        for op in &ops {
            apply(&mut h, op);
            let mut dirty_addrs = Vec::new();
            let mut dirty_bytes = 0;
            for a in h.cache.cached_addrs() {
                let st = h.cache.status(a).unwrap();
                if st.dirty {
                    dirty_addrs.push(a);
                    dirty_bytes += st.size;
                }
            }
            let t = h.cache.totals();
            prop_assert_eq!(t.slist_len, dirty_addrs.len(), "after {:?}", op);
            prop_assert_eq!(t.slist_size, t.dirty_size);
            prop_assert_eq!(t.slist_size, dirty_bytes);
            prop_assert_eq!(h.cache.dirty_addrs(), dirty_addrs);
            prop_assert!(h.cache.check_invariants().is_ok());
        }
    }
}

/// MDC-076: the serialize callback of 0x100 dirties pinned 0x050; the same flush restarts its scan,
/// writes 0x050 too (before going on to 0x200), ends with an empty slist and writes nothing twice.
#[test]
fn mdc_076_flush_restarts_when_serialize_dirties() {
    let mut h = harness(2, roomy());
    insert_with(&mut h, 0, 0x050, 32, InsertFlags::PIN);
    h.cache.flush(FlushFlags::NONE).unwrap();
    h.insert(1, 0x100, 64);
    h.insert(0, 0x200, 64);
    h.clear_io();
    let restarts0 = h.cache.stats().flush_restarts;
    let ok = shared::<bool>();
    let o = ok.clone();
    h.classes[1].knobs().serialize = Some(Box::new(move |c, _icr, _img| {
        o.lock().unwrap().push(c.mark_dirty(0x050).is_ok());
        Ok(())
    }));
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(taken(&ok), vec![true]);
    assert_eq!(h.writes(), vec![0x100, 0x050, 0x200]);
    assert_eq!(h.cache.totals().slist_len, 0);
    assert!(h.cache.dirty_addrs().is_empty());
    assert_eq!(h.cache.stats().flush_restarts - restarts0, 1);
    assert_eq!(h.cache.stats().slist_change_in_serialize, 1);
}

/// MDC-077: flush-last entries are written after every other dirty entry; there can be several and
/// the cache counts them.
#[test]
fn mdc_077_flush_last_entries_go_last() {
    let mut h = harness(1, roomy());
    insert_with(&mut h, 0, 0x0, 32, InsertFlags::FLUSH_LAST);
    h.insert(0, 0x100, 64);
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes(), vec![0x100, 0x0]);
    assert!(h.cache.status(0x0).unwrap().flush_last);

    let mut h = harness(1, roomy());
    insert_with(&mut h, 0, 0x0, 32, InsertFlags::FLUSH_LAST);
    insert_with(&mut h, 0, 0x40, 32, InsertFlags::FLUSH_LAST);
    h.insert(0, 0x100, 64);
    h.insert(0, 0x800, 64);
    assert_eq!(h.cache.totals().num_last_entries, 2);
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes(), vec![0x100, 0x800, 0x0, 0x40]);
    h.cache
        .flush_entry(0x0, EntryFlushFlags::INVALIDATE)
        .unwrap();
    assert_eq!(h.cache.totals().num_last_entries, 1);
}

/// MDC-078: a dirty parent at 0x100 waits for its dirty child at 0x900 despite address order.
#[test]
fn mdc_078_children_written_before_parents() {
    let mut h = harness(1, roomy());
    insert_with(&mut h, 0, 0x100, 64, InsertFlags::PIN);
    h.insert(0, 0x900, 64);
    h.insert(0, 0x500, 64);
    h.cache.create_flush_dependency(0x100, 0x900).unwrap();
    h.cache.flush(FlushFlags::NONE).unwrap();
    let w = h.writes();
    assert_eq!(w.len(), 3);
    let pos = |a| w.iter().position(|&x| x == a).unwrap();
    assert!(pos(0x900) < pos(0x100), "{w:x?}");
    assert_eq!(w, vec![0x500, 0x900, 0x100]);
    assert!(h.cache.dirty_addrs().is_empty());
}

/// MDC-079: a marked flush writes only entries with the flush marker and clears their marker; other
/// entries stay dirty. A write by make-space (min-clean goal) also clears the marker.
#[test]
fn mdc_079_marked_flush() {
    let mut h = harness(1, roomy());
    insert_with(&mut h, 0, 0x200, 64, InsertFlags::SET_FLUSH_MARKER); // A
    h.insert(0, 0x100, 64); // B
    assert!(h.cache.status(0x200).unwrap().flush_marker);
    h.cache.flush(FlushFlags::MARKED_ENTRIES).unwrap();
    assert_eq!(h.writes(), vec![0x200]);
    let a = h.cache.status(0x200).unwrap();
    assert!(!a.dirty && !a.flush_marker);
    assert!(dirty(&mut h, 0x100));
    // Marker set at unprotect works the same way.
    let p = h.cache.protect(0, 0x100, &64, ProtectFlags::NONE).unwrap();
    h.cache
        .unprotect(p, UnprotectFlags::SET_FLUSH_MARKER)
        .unwrap();
    h.cache.flush(FlushFlags::MARKED_ENTRIES).unwrap();
    assert_eq!(h.writes(), vec![0x200, 0x100]);
    assert!(!h.cache.status(0x100).unwrap().flush_marker);

    // Make-space writes the marked LRU tail to meet the min-clean goal (1024 of 2048 bytes).
    let mut h = harness(1, fixed(2048, 0.5));
    insert_with(&mut h, 0, 0x100, 512, InsertFlags::SET_FLUSH_MARKER);
    h.insert(0, 0x1000, 512);
    h.insert(0, 0x2000, 512);
    assert!(h.writes().is_empty());
    h.insert(0, 0x3000, 64);
    assert_eq!(h.writes(), vec![0x100]);
    let a = h.cache.status(0x100).unwrap();
    assert!(!a.dirty && !a.flush_marker);
    assert_eq!(h.cache.dirty_addrs(), vec![0x1000, 0x2000, 0x3000]);
}

/// MDC-080: close with a parent pinned only through a dependency on a child whose BeforeEvict
/// destroys that dependency: everything is written, then evicted, and the cache ends up empty.
#[test]
fn mdc_080_close_tears_down_dependencies() {
    let mut h = harness(2, roomy());
    insert_with(&mut h, 0, 0x100, 64, InsertFlags::PIN); // parent
    h.insert(1, 0x900, 64); // child
    h.insert(0, 0x500, 64);
    h.cache.create_flush_dependency(0x100, 0x900).unwrap();
    h.cache.unpin(0x100).unwrap();
    assert!(h.cache.status(0x100).unwrap().pinned_by_cache);
    let ok = shared::<bool>();
    let o = ok.clone();
    h.classes[1].knobs().notify = Some(Box::new(move |c, action, addr, _icr| {
        if action == NotifyAction::BeforeEvict {
            o.lock()
                .unwrap()
                .push(c.destroy_flush_dependency(0x100, addr).is_ok());
        }
        Ok(())
    }));
    h.cache.set_dump_stats_on_close(true);
    let dump = h
        .cache
        .close()
        .unwrap()
        .expect("statistics dumped on close");
    assert!(dump.contains("3 evictions"), "{dump}");
    assert_eq!(taken(&ok), vec![true]);
    assert_eq!(h.writes(), vec![0x500, 0x900, 0x100]);
    let t = h.cache.totals();
    assert_eq!(
        (t.index_len, t.index_size, t.pel_len, t.lru_len),
        (0, 0, 0, 0)
    );
    assert_eq!(h.cache.stats().total_evictions, 3);
    assert_eq!(h.cache.stats().flush_deps_destroyed, 1);
}

/// MDC-080 / E-37: close with a client-pinned entry that nobody unpins fails with
/// `PinnedEntriesRemain` (after writing everything and evicting what it could); close with a
/// protected entry fails up front without writing or evicting anything.
#[test]
fn e_37_close_with_pinned_or_protected_entries() {
    let mut h = harness(1, roomy());
    insert_with(&mut h, 0, 0x100, 64, InsertFlags::PIN);
    h.insert(0, 0x200, 64);
    let err = h.cache.close().unwrap_err();
    assert!(
        matches!(err, CacheError::PinnedEntriesRemain { count: 1 }),
        "{err:?}"
    );
    assert_eq!(h.writes(), vec![0x100, 0x200]);
    assert!(h.cache.contains(0x100));
    assert!(!h.cache.contains(0x200));
    h.check();
    // Unpinned, close succeeds.
    h.cache.unpin(0x100).unwrap();
    h.cache.close().unwrap();
    assert_eq!(h.cache.totals().index_len, 0);

    let mut h = harness(1, roomy());
    h.insert(0, 0x100, 64);
    h.insert(0, 0x200, 64);
    let p = h.cache.protect(0, 0x200, &64, ProtectFlags::NONE).unwrap();
    let err = h.cache.flush(FlushFlags::INVALIDATE).unwrap_err();
    assert!(
        matches!(err, CacheError::ProtectedEntries { count: 1 }),
        "{err:?}"
    );
    assert!(h.writes().is_empty());
    assert_eq!(h.cache.cached_addrs(), vec![0x100, 0x200]);
    h.cache.unprotect(p, UnprotectFlags::NONE).unwrap();
    h.cache.close().unwrap();
    assert_eq!(h.cache.totals().index_len, 0);
}

/// MDC-081 / E-35: a flush requested from a serialize callback during a flush fails with
/// `FlushInProgress`; the outer flush completes and a later flush works.
#[test]
fn e_35_flush_inside_flush_is_refused() {
    let mut h = harness(1, roomy());
    h.insert(0, 0x100, 64);
    h.insert(0, 0x200, 64);
    let seen = shared::<bool>();
    let s = seen.clone();
    h.classes[0].knobs().serialize = Some(Box::new(move |c, _icr, _img| {
        let r = c.flush(FlushFlags::NONE);
        s.lock()
            .unwrap()
            .push(matches!(r, Err(CacheError::FlushInProgress)));
        Ok(())
    }));
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(taken(&seen), vec![true, true]);
    assert_eq!(h.writes(), vec![0x100, 0x200]);
    h.classes[0].knobs().serialize = None;
    h.insert(0, 0x300, 64);
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes(), vec![0x100, 0x200, 0x300]);
}

/// MDC-081 / E-36 / Q-06: flush with one protected dirty entry writes the others, then fails with
/// `ProtectedEntries`; the protected entry stays dirty.
#[test]
fn e_36_flush_with_protected_entry() {
    let mut h = harness(1, roomy());
    h.insert(0, 0x100, 64);
    h.insert(0, 0x200, 64);
    h.insert(0, 0x300, 64);
    let p = h.cache.protect(0, 0x200, &64, ProtectFlags::NONE).unwrap();
    let err = h.cache.flush(FlushFlags::NONE).unwrap_err();
    assert!(
        matches!(err, CacheError::ProtectedEntries { count: 1 }),
        "{err:?}"
    );
    assert_eq!(h.writes(), vec![0x100, 0x300]);
    assert_eq!(h.cache.dirty_addrs(), vec![0x200]);
    h.cache.unprotect(p, UnprotectFlags::NONE).unwrap();
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes(), vec![0x100, 0x300, 0x200]);
}

// ----- §3.11 flush dependencies -----

/// MDC-082: linking P to C cache-pins P; P has height 1 and C height 0; linking C to G makes P's
/// height 2. A parent that is protected (not pinned) may also be linked; it rests on the pinned list
/// when unprotected.
#[test]
fn mdc_082_create_dependency_pins_parent_and_sets_heights() {
    let mut h = harness(1, roomy());
    insert_with(&mut h, 0, 0x100, 64, InsertFlags::PIN); // P
    insert_with(&mut h, 0, 0x200, 64, InsertFlags::PIN); // C
    h.insert(0, 0x300, 64); // G
    h.cache.create_flush_dependency(0x100, 0x200).unwrap();
    let p = h.cache.status(0x100).unwrap();
    assert!(p.pinned_by_cache && p.pinned_by_client);
    assert_eq!((p.children, p.parents, p.dirty_children), (1, 0, 1));
    assert_eq!(h.cache.status(0x200).unwrap().parents, 1);
    assert_eq!(h.cache.flush_dependency_height(0x100), Some(1));
    assert_eq!(h.cache.flush_dependency_height(0x200), Some(0));
    h.cache.create_flush_dependency(0x200, 0x300).unwrap();
    assert_eq!(h.cache.flush_dependency_height(0x100), Some(2));
    assert_eq!(h.cache.flush_dependency_height(0x200), Some(1));
    assert_eq!(h.cache.flush_dependency_height(0x300), Some(0));
    assert_eq!(h.cache.flush_dependency_parents(0x300), vec![0x200]);
    assert_eq!(h.cache.stats().flush_deps_created, 2);

    // A protected parent.
    h.insert(0, 0x400, 64);
    h.insert(0, 0x500, 64);
    let q = h.cache.protect(0, 0x400, &64, ProtectFlags::NONE).unwrap();
    h.cache.create_flush_dependency(0x400, 0x500).unwrap();
    h.cache.unprotect(q, UnprotectFlags::NONE).unwrap();
    let q = h.cache.status(0x400).unwrap();
    assert!(q.pinned_by_cache && !q.pinned_by_client);
    assert!(!h.cache.lru_addrs().contains(&0x400));
    assert_eq!(h.cache.totals().pel_len, 3);
    h.check();
}

/// MDC-082 / Q-07 / E-41: the implementation follows Q-07's generalisation, so a second parent is
/// *accepted* (not an error as in the single-parent source model), and both parents wait for the
/// child: neither can be written while the child is dirty.
#[test]
fn mdc_082_q07_second_parent_accepted_and_both_wait() {
    let mut h = harness(1, roomy());
    insert_with(&mut h, 0, 0x100, 64, InsertFlags::PIN); // P1
    insert_with(&mut h, 0, 0x500, 64, InsertFlags::PIN); // P2
    h.insert(0, 0x900, 64); // C
    h.cache.create_flush_dependency(0x100, 0x900).unwrap();
    h.cache.create_flush_dependency(0x500, 0x900).unwrap();
    assert_eq!(h.cache.status(0x900).unwrap().parents, 2);
    let mut parents = h.cache.flush_dependency_parents(0x900);
    parents.sort_unstable();
    assert_eq!(parents, vec![0x100, 0x500]);
    for p in [0x100, 0x500] {
        assert_eq!(h.cache.status(p).unwrap().dirty_children, 1);
        let err = h.cache.flush_entry(p, EntryFlushFlags::NONE).unwrap_err();
        assert!(
            matches!(err, CacheError::FlushDependency { parent, .. } if parent == p),
            "{err:?}"
        );
    }
    assert!(h.writes().is_empty());
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes(), vec![0x900, 0x100, 0x500]);
    assert_eq!(h.cache.status(0x100).unwrap().dirty_children, 0);
    h.check();
}

/// MDC-083: destroying links recomputes heights up the chain; a parent left without children loses
/// its cache pin and goes to the LRU head unless the client pins it.
#[test]
fn mdc_083_destroy_dependency_unpins_parent() {
    let mut h = harness(1, roomy());
    insert_with(&mut h, 0, 0x100, 64, InsertFlags::PIN); // P
    insert_with(&mut h, 0, 0x200, 64, InsertFlags::PIN); // C
    h.insert(0, 0x300, 64); // G
    h.cache.create_flush_dependency(0x100, 0x200).unwrap();
    h.cache.create_flush_dependency(0x200, 0x300).unwrap();
    h.cache.unpin(0x100).unwrap();
    assert!(!h.cache.lru_addrs().contains(&0x100));
    h.cache.destroy_flush_dependency(0x200, 0x300).unwrap();
    assert_eq!(h.cache.flush_dependency_height(0x100), Some(1));
    assert_eq!(h.cache.flush_dependency_height(0x200), Some(0));
    // C is still client-pinned: it stays on the pinned list.
    let c = h.cache.status(0x200).unwrap();
    assert!(!c.pinned_by_cache && c.pinned_by_client && c.children == 0);
    h.cache.destroy_flush_dependency(0x100, 0x200).unwrap();
    assert_eq!(h.cache.flush_dependency_height(0x100), Some(0));
    let p = h.cache.status(0x100).unwrap();
    assert!(!p.pinned_by_cache && !p.pinned_by_client);
    assert_eq!((p.children, p.dirty_children), (0, 0));
    assert_eq!(h.cache.lru_addrs()[0], 0x100);
    assert_eq!(h.cache.status(0x200).unwrap().parents, 0);
    assert_eq!(h.cache.stats().flush_deps_destroyed, 2);
    // P is now evictable (after a write).
    h.cache.flush(FlushFlags::NONE).unwrap();
    h.cache
        .flush_entry(0x100, EntryFlushFlags::INVALIDATE)
        .unwrap();
    assert!(!h.cache.contains(0x100));
    h.check();
}

/// MDC-084 / E-41: self-dependency, cycles, height overflow, a parent neither pinned nor
/// protected, non-resident parent or child, a duplicate link and destroying a link that does not
/// exist are all `FlushDependency` errors that change nothing. (A second parent is not an error
/// here: Q-07, see `mdc_082_q07_second_parent_accepted_and_both_wait`.)
#[test]
fn e_41_flush_dependency_validation() {
    let mut h = harness(1, roomy());
    for a in [0x100, 0x200, 0x300] {
        insert_with(&mut h, 0, a, 64, InsertFlags::PIN);
    }
    h.insert(0, 0x600, 64); // unpinned, unprotected
    h.cache.create_flush_dependency(0x100, 0x200).unwrap();
    h.cache.create_flush_dependency(0x200, 0x300).unwrap();
    let created = h.cache.stats().flush_deps_created;
    let dep_err = |r: Result<()>, p: u64, c: u64, word: &str| match r {
        Err(CacheError::FlushDependency {
            parent,
            child,
            reason,
        }) => {
            assert_eq!((parent, child), (p, c));
            assert!(reason.contains(word), "{reason:?} lacks {word:?}");
        }
        other => panic!("expected FlushDependency({word}), got {other:?}"),
    };
    dep_err(
        h.cache.create_flush_dependency(0x100, 0x100),
        0x100,
        0x100,
        "itself",
    );
    dep_err(
        h.cache.create_flush_dependency(0x200, 0x100),
        0x200,
        0x100,
        "cycle",
    );
    dep_err(
        h.cache.create_flush_dependency(0x300, 0x100),
        0x300,
        0x100,
        "cycle",
    );
    dep_err(
        h.cache.create_flush_dependency(0x600, 0x300),
        0x600,
        0x300,
        "pinned or protected",
    );
    dep_err(
        h.cache.create_flush_dependency(0x7000, 0x300),
        0x7000,
        0x300,
        "not resident",
    );
    dep_err(
        h.cache.create_flush_dependency(0x100, 0x7000),
        0x100,
        0x7000,
        "not resident",
    );
    dep_err(
        h.cache.create_flush_dependency(0x100, 0x200),
        0x100,
        0x200,
        "already exists",
    );
    dep_err(
        h.cache.destroy_flush_dependency(0x100, 0x300),
        0x100,
        0x300,
        "no such",
    );
    dep_err(
        h.cache.destroy_flush_dependency(0x100, 0x7000),
        0x100,
        0x7000,
        "not resident",
    );
    assert_eq!(h.cache.stats().flush_deps_created, created);
    assert_eq!(h.cache.status(0x100).unwrap().children, 1);
    assert_eq!(h.cache.status(0x300).unwrap().parents, 1);
    assert_eq!(h.cache.flush_dependency_height(0x100), Some(2));
    h.check();

    // Height overflow: a chain may reach height MAX_FLUSH_DEP_HEIGHT - 1, not more.
    let mut h = harness(1, roomy());
    let addr = |i: usize| 0x1000 * (i as u64 + 1);
    for i in 0..=MAX_FLUSH_DEP_HEIGHT {
        insert_with(&mut h, 0, addr(i), 64, InsertFlags::PIN);
    }
    for i in 0..MAX_FLUSH_DEP_HEIGHT - 1 {
        h.cache
            .create_flush_dependency(addr(i), addr(i + 1))
            .unwrap();
    }
    assert_eq!(
        h.cache.flush_dependency_height(addr(0)),
        Some(MAX_FLUSH_DEP_HEIGHT - 1)
    );
    let last = MAX_FLUSH_DEP_HEIGHT - 1;
    dep_err(
        h.cache.create_flush_dependency(addr(last), addr(last + 1)),
        addr(last),
        addr(last + 1),
        "maximum height",
    );
    assert_eq!(
        h.cache.flush_dependency_height(addr(0)),
        Some(MAX_FLUSH_DEP_HEIGHT - 1)
    );
    h.check();
}

/// MDC-085: under eviction pressure, the cache-pinned parent P is never a victim; its child C is
/// evicted first (C's BeforeEvict removes the link), after which P is on the LRU and is evicted on
/// a later pass.
#[test]
fn mdc_085_child_evicted_first_then_parent() {
    let mut h = harness(3, fixed(1024, 0.0));
    insert_with(&mut h, 0, 0x100, 256, InsertFlags::PIN); // P
    h.insert(1, 0x200, 256); // C
    h.cache.create_flush_dependency(0x100, 0x200).unwrap();
    h.cache.unpin(0x100).unwrap();
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes(), vec![0x200, 0x100]);
    let ok = shared::<bool>();
    let o = ok.clone();
    h.classes[1].knobs().notify = Some(Box::new(move |c, action, addr, _icr| {
        if action == NotifyAction::BeforeEvict {
            o.lock()
                .unwrap()
                .push(c.destroy_flush_dependency(0x100, addr).is_ok());
        }
        Ok(())
    }));
    h.touch(2, 0x1000, 512);
    assert_eq!(h.cache.cached_addrs(), vec![0x100, 0x200, 0x1000]);
    h.touch(2, 0x2000, 512);
    assert_eq!(taken(&ok), vec![true]);
    assert!(!h.cache.contains(0x200), "the child went first");
    let p = h.cache.status(0x100).unwrap();
    assert!(!p.pinned_by_cache);
    assert!(h.cache.lru_addrs().contains(&0x100));
    assert_eq!(
        h.classes[0].count(|e| matches!(
            e,
            Event::Notify {
                action: NotifyAction::BeforeEvict,
                ..
            }
        )),
        0
    );
    h.touch(2, 0x3000, 512);
    assert!(!h.cache.contains(0x100), "the parent is evictable now");
    assert_eq!(
        h.classes[0].events().last(),
        Some(&Event::FreeIcr),
        "P was freed"
    );
    h.check();
}

/// MDC-086: a client that creates dependencies from AfterInsert / AfterLoad and removes them from
/// BeforeEvict runs a full insert, load, flush and evict cycle without errors.
#[test]
fn mdc_086_dependencies_from_notify() {
    let mut h = harness(2, roomy());
    insert_with(&mut h, 0, 0x100, 64, InsertFlags::PIN); // header / parent
    let results = shared::<(NotifyAction, bool)>();
    let r = results.clone();
    h.classes[1].knobs().notify = Some(Box::new(move |c, action, addr, _icr| {
        let res = match action {
            NotifyAction::AfterInsert | NotifyAction::AfterLoad => {
                Some(c.create_flush_dependency(0x100, addr))
            }
            NotifyAction::BeforeEvict => Some(c.destroy_flush_dependency(0x100, addr)),
            NotifyAction::AfterFlush => None,
        };
        if let Some(res) = res {
            r.lock().unwrap().push((action, res.is_ok()));
        }
        Ok(())
    }));
    h.insert(1, 0x200, 64);
    h.touch(1, 0x300, 64);
    let p = h.cache.status(0x100).unwrap();
    assert_eq!((p.children, p.dirty_children), (2, 1));
    h.check();
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes(), vec![0x200, 0x100]);
    h.cache
        .flush_entry(0x200, EntryFlushFlags::INVALIDATE)
        .unwrap();
    h.cache
        .flush_entry(0x300, EntryFlushFlags::INVALIDATE)
        .unwrap();
    assert_eq!(
        taken(&results),
        vec![
            (NotifyAction::AfterInsert, true),
            (NotifyAction::AfterLoad, true),
            (NotifyAction::BeforeEvict, true),
            (NotifyAction::BeforeEvict, true),
        ]
    );
    assert_eq!(h.cache.status(0x100).unwrap().children, 0);
    assert_eq!(h.cache.stats().flush_deps_created, 2);
    assert_eq!(h.cache.stats().flush_deps_destroyed, 2);
    h.check();
    h.cache.unpin(0x100).unwrap();
    h.cache.close().unwrap();
    assert_eq!(h.cache.totals().index_len, 0);
}

/// MDC-087: a marked flush with only the parent marked and its child dirty never writes the parent
/// first: the parent is left dirty (the flush reports it as unflushable); a single-entry flush of
/// the parent is refused likewise. A full flush then writes child, then parent.
#[test]
fn mdc_087_no_path_writes_parent_early() {
    let mut h = harness(1, roomy());
    insert_with(
        &mut h,
        0,
        0x100,
        64,
        InsertFlags::PIN | InsertFlags::SET_FLUSH_MARKER,
    );
    h.insert(0, 0x900, 64);
    h.cache.create_flush_dependency(0x100, 0x900).unwrap();
    let err = h.cache.flush(FlushFlags::MARKED_ENTRIES).unwrap_err();
    assert!(
        matches!(err, CacheError::UnflushableEntries { count: 1 }),
        "{err:?}"
    );
    assert!(h.writes().is_empty());
    let p = h.cache.status(0x100).unwrap();
    assert!(p.dirty && p.flush_marker);
    let err = h
        .cache
        .flush_entry(0x100, EntryFlushFlags::INVALIDATE)
        .unwrap_err();
    assert!(matches!(err, CacheError::WrongState { .. }), "{err:?}");
    let err = h
        .cache
        .flush_entry(0x100, EntryFlushFlags::NONE)
        .unwrap_err();
    assert!(
        matches!(err, CacheError::FlushDependency { parent: 0x100, .. }),
        "{err:?}"
    );
    assert!(h.writes().is_empty());
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes(), vec![0x900, 0x100]);
    h.check();
}

// ----- §3.12 tagging -----

/// MDC-088: entries record the current tag (inserted and loaded ones alike). With ignore_tags on
/// (the default) an entry without a current tag is accepted; with it off, inserts and loads
/// without a tag fail with `MissingTag`.
#[test]
fn mdc_088_tags() {
    let mut h = harness(1, roomy());
    h.cache.set_tag(Some(0xabc0));
    h.insert(0, 0x100, 64);
    h.touch(0, 0x200, 64);
    assert_eq!(h.cache.status(0x100).unwrap().tag, Some(0xabc0));
    assert_eq!(h.cache.status(0x200).unwrap().tag, Some(0xabc0));
    h.cache.set_tag(None);
    h.insert(0, 0x300, 64);
    assert_eq!(h.cache.status(0x300).unwrap().tag, None);

    h.cache.set_ignore_tags(false);
    let err = h
        .cache
        .insert(0, 0x400, MockEntry::new(64), InsertFlags::NONE)
        .unwrap_err();
    assert!(
        matches!(err, CacheError::MissingTag { addr: 0x400 }),
        "{err:?}"
    );
    let err = h
        .cache
        .protect(0, 0x500, &64, ProtectFlags::NONE)
        .unwrap_err();
    assert!(
        matches!(err, CacheError::MissingTag { addr: 0x500 }),
        "{err:?}"
    );
    assert!(!h.cache.contains(0x400) && !h.cache.contains(0x500));
    // A hit on an already cached untagged entry needs no tag.
    h.touch(0, 0x300, 64);
    h.cache.set_tag(Some(0x77));
    h.insert(0, 0x400, 64);
    assert_eq!(h.cache.status(0x400).unwrap().tag, Some(0x77));
    h.check();
}

// ----- §3.13 client class interface -----

/// A client family for a class that provides only the required callbacks.
struct Bytes;
impl CacheTypes for Bytes {
    type Icr = Vec<u8>;
    type Udata = usize;
    type Ctx = UnboundedFile;
}

struct Minimal(ClassInfo);

impl Class<Bytes> for Minimal {
    fn info(&self) -> &ClassInfo {
        &self.0
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
        _cache: &mut MetadataCache<Bytes>,
        icr: &mut Vec<u8>,
        image: &mut [u8],
    ) -> Result<(), ClientError> {
        image.copy_from_slice(icr);
        Ok(())
    }
}

fn minimal(id: u8, name: &'static str) -> Arc<dyn Class<Bytes>> {
    Arc::new(Minimal(ClassInfo {
        id,
        name,
        flags: ClassFlags::NONE,
        mem_type: MemType::BTree,
    }))
}

/// MDC-089: a class is an id, a name, a memory-type hint, flags and callbacks. `serialize`,
/// `deserialize`, the load size and `image_len` are required trait methods (a class without one does
/// not compile; see the `compile_fail` doctest on `Class`, which leaves out `image_len`). Every
/// optional callback has a working default: a class providing only the required ones goes through
/// insert, write, clear, evict (with file-space free) and load. A malformed class table is rejected
/// at registration.
#[test]
fn mdc_089_required_callbacks_and_defaults() {
    let storage = Arc::new(MemoryStorage::new());
    let mut cache =
        CacheBuilder::<Bytes>::new(storage.clone(), vec![minimal(0, "minimal")], UnboundedFile)
            .config(roomy())
            .build()
            .unwrap();
    let info = cache.class_info(0).unwrap().clone();
    assert_eq!(
        (info.id, info.name, info.flags, info.mem_type),
        (0, "minimal", ClassFlags::NONE, MemType::BTree)
    );
    cache
        .insert(0, 0x100, vec![9u8; 32], InsertFlags::NONE)
        .unwrap();
    cache.flush(FlushFlags::NONE).unwrap();
    let mut buf = [0u8; 32];
    storage.read_at(0x100, &mut buf).unwrap();
    assert_eq!(buf, [9u8; 32]);
    cache
        .flush_entry(0x100, EntryFlushFlags::INVALIDATE)
        .unwrap();
    assert!(!cache.contains(0x100));
    let p = cache.protect(0, 0x100, &32, ProtectFlags::NONE).unwrap();
    assert_eq!(cache.icr(&p).unwrap(), &vec![9u8; 32]);
    cache.unprotect(p, UnprotectFlags::DIRTIED).unwrap();
    cache
        .flush_entry(0x100, EntryFlushFlags::CLEAR_ONLY)
        .unwrap();
    assert!(!cache.status(0x100).unwrap().dirty);
    cache
        .flush_entry(
            0x100,
            EntryFlushFlags::CLEAR_ONLY
                | EntryFlushFlags::INVALIDATE
                | EntryFlushFlags::FREE_FILE_SPACE,
        )
        .unwrap();
    assert_eq!(cache.totals().index_len, 0);
    cache.check_invariants().unwrap();

    // Registration checks.
    let bad = |classes: Vec<Arc<dyn Class<Bytes>>>| {
        CacheBuilder::<Bytes>::new(Arc::new(MemoryStorage::new()), classes, UnboundedFile)
            .build()
            .unwrap_err()
    };
    assert!(matches!(
        bad(vec![minimal(0, "")]),
        CacheError::BadClass { id: 0, .. }
    ));
    assert!(matches!(
        bad(vec![minimal(0, "a"), minimal(2, "b")]),
        CacheError::BadClass { id: 1, .. }
    ));
    assert!(matches!(bad(vec![]), CacheError::BadClass { .. }));
}

/// MDC-090: class flags carry the source's values (SPECULATIVE_LOAD 0x1, COMPRESSED 0x2, and the
/// test-only NO_IO 0x4, SKIP_READS 0x8, SKIP_WRITES 0x10, which exist only with `cfg(test)` or the
/// `test-classes` feature this suite is built with, so production code using them does not
/// compile). Behaviour of SPECULATIVE_LOAD: a load reaching past the end of allocation is clipped
/// instead of failing as it does for a plain class.
#[test]
fn mdc_090_class_flag_values_and_speculative_behaviour() {
    assert_eq!(ClassFlags::NONE.bits(), 0);
    assert_eq!(ClassFlags::SPECULATIVE_LOAD.bits(), 0x1);
    assert_eq!(ClassFlags::COMPRESSED.bits(), 0x2);
    assert_eq!(ClassFlags::NO_IO.bits(), 0x4);
    assert_eq!(ClassFlags::SKIP_READS.bits(), 0x8);
    assert_eq!(ClassFlags::SKIP_WRITES.bits(), 0x10);
    let both = ClassFlags::SPECULATIVE_LOAD | ClassFlags::COMPRESSED;
    assert_eq!(both.bits(), 0x3);
    assert!(both.contains(ClassFlags::SPECULATIVE_LOAD) && both.contains(ClassFlags::COMPRESSED));
    assert!(!ClassFlags::SPECULATIVE_LOAD.contains(ClassFlags::COMPRESSED));

    let mut h = harness_with_flags(&[ClassFlags::SPECULATIVE_LOAD, ClassFlags::NONE], roomy());
    h.cache.ctx_mut().eoa = 0x1020;
    let err = h
        .cache
        .protect(1, 0x1000, &64, ProtectFlags::NONE)
        .unwrap_err();
    assert!(
        matches!(
            err,
            CacheError::PastEndOfAllocation {
                what: "read",
                addr: 0x1000,
                len: 64,
                eoa: 0x1020
            }
        ),
        "{err:?}"
    );
    assert!(h.read_ops().is_empty());
    h.touch(0, 0x1000, 64);
    assert_eq!(h.read_ops(), vec![OpRecord::new(IoOp::Read, 0x1000, 32)]);
    assert_eq!(h.cache.status(0x1000).unwrap().size, 32);
}

/// One MDC-091 scenario: set up, make `callback` fail, trigger the operation and check what must
/// (not) have happened afterwards.
struct FailCase {
    callback: Callback,
    setup: fn(&mut Harness),
    trigger: fn(&mut Harness) -> Result<()>,
    after: fn(&mut Harness),
}

/// MDC-091 / E-40: for every class callback, a failing mock makes the cache operation that calls it
/// return `CacheError::Client` naming the callback, class and address (with the client's error as
/// source); the failed callback's outputs are not used and every invariant still holds.
#[test]
fn e_40_every_callback_failure_is_reported() {
    fn load(h: &mut Harness) -> Result<()> {
        h.cache
            .protect(0, 0x100, &64, ProtectFlags::NONE)
            .map(|_| ())
    }
    fn not_cached(h: &mut Harness) {
        assert!(!h.cache.contains(0x100));
        assert_eq!(h.cache.totals().index_len, 0);
    }
    fn inserted(h: &mut Harness) {
        h.insert(0, 0x100, 64);
    }
    fn written_clean(h: &mut Harness) {
        h.insert(0, 0x100, 64);
        h.cache.flush(FlushFlags::NONE).unwrap();
        h.clear_io();
    }
    fn still_dirty_unwritten(h: &mut Harness) {
        assert!(h.writes().is_empty());
        assert!(dirty(h, 0x100));
        assert!(!h.cache.status(0x100).unwrap().flush_in_progress);
    }
    let cases = [
        FailCase {
            callback: Callback::GetInitialLoadSize,
            setup: |_| {},
            trigger: load,
            after: not_cached,
        },
        FailCase {
            callback: Callback::GetFinalLoadSize,
            setup: |h| h.classes[0].knobs().final_load_size = Some(64),
            trigger: load,
            after: not_cached,
        },
        FailCase {
            callback: Callback::VerifyChecksum,
            setup: |_| {},
            trigger: load,
            after: not_cached,
        },
        FailCase {
            callback: Callback::Deserialize,
            setup: |_| {},
            trigger: load,
            after: not_cached,
        },
        FailCase {
            callback: Callback::Notify, // AfterLoad: the load is undone
            setup: |_| {},
            trigger: load,
            after: |h| {
                not_cached(h);
                assert_eq!(h.classes[0].count(|e| *e == Event::FreeIcr), 1);
            },
        },
        FailCase {
            callback: Callback::ImageLen,
            setup: |_| {},
            trigger: |h| {
                h.cache
                    .insert(0, 0x100, MockEntry::new(64), InsertFlags::NONE)
            },
            after: not_cached,
        },
        FailCase {
            callback: Callback::PreSerialize,
            setup: inserted,
            trigger: |h| h.cache.flush(FlushFlags::NONE),
            after: still_dirty_unwritten,
        },
        FailCase {
            callback: Callback::Serialize,
            setup: inserted,
            trigger: |h| h.cache.flush(FlushFlags::NONE),
            after: still_dirty_unwritten,
        },
        FailCase {
            callback: Callback::Clear,
            setup: inserted,
            trigger: |h| {
                h.cache
                    .flush_entry(0x100, EntryFlushFlags::CLEAR_ONLY)
                    .map(|_| ())
            },
            after: still_dirty_unwritten,
        },
        FailCase {
            callback: Callback::FreeIcr,
            setup: written_clean,
            trigger: |h| {
                h.cache
                    .flush_entry(0x100, EntryFlushFlags::INVALIDATE)
                    .map(|_| ())
            },
            after: not_cached,
        },
    ];
    for case in &cases {
        let mut h = harness(1, roomy());
        (case.setup)(&mut h);
        h.classes[0].knobs().fail.insert(case.callback);
        let err = (case.trigger)(&mut h).unwrap_err();
        match &err {
            CacheError::Client {
                class,
                callback,
                addr,
                source,
            } => {
                assert_eq!(*callback, case.callback);
                assert_eq!((*class, *addr), ("mock-0", 0x100));
                let inner = source
                    .downcast_ref::<MockFailure>()
                    .expect("the client's error is the source");
                assert_eq!(inner.0, case.callback);
            }
            other => panic!("{:?}: expected Client, got {other:?}", case.callback),
        }
        h.cache
            .check_invariants()
            .unwrap_or_else(|e| panic!("{:?}: {e}", case.callback));
        (case.after)(&mut h);
        // With the failure gone, the same cache works normally.
        h.classes[0].knobs().fail.clear();
        h.cache.flush(FlushFlags::NONE).unwrap();
        h.check();
    }
    assert_eq!(cases.len(), 10);
}

/// MDC-092: notify sees insert → AfterInsert, write → AfterFlush, evict → BeforeEvict and a protect
/// miss → AfterLoad (a hit sends nothing).
#[test]
fn mdc_092_notify_lifecycle() {
    let mut h = harness(1, roomy());
    h.insert(0, 0x100, 64);
    h.cache.flush(FlushFlags::NONE).unwrap();
    h.cache
        .flush_entry(0x100, EntryFlushFlags::INVALIDATE)
        .unwrap();
    h.touch(0, 0x100, 64);
    h.touch(0, 0x100, 64);
    let notes: Vec<Event> = h.classes[0]
        .events()
        .into_iter()
        .filter(is_notify)
        .collect();
    let n = |action| Event::Notify {
        action,
        addr: 0x100,
    };
    assert_eq!(
        notes,
        vec![
            n(NotifyAction::AfterInsert),
            n(NotifyAction::AfterFlush),
            n(NotifyAction::BeforeEvict),
            n(NotifyAction::AfterLoad),
        ]
    );
}

/// MDC-093: free_icr runs once per eviction, per delete and per discarded speculative first
/// attempt, and not when the caller takes ownership.
#[test]
fn mdc_093_free_icr_count() {
    let mut h = harness_with_flags(&[ClassFlags::SPECULATIVE_LOAD, ClassFlags::NONE], roomy());
    h.classes[0].knobs().real_sizes = vec![128];
    h.touch(0, 0x1000, 64); // guess 64, real 128: first object discarded
    assert_eq!(h.cache.stats().speculative_retries, 1);
    assert_eq!(h.classes[0].count(|e| *e == Event::FreeIcr), 1);
    assert_eq!(h.cache.status(0x1000).unwrap().size, 128);

    for a in [0x100, 0x200, 0x300] {
        h.insert(1, a, 64);
    }
    h.cache.flush(FlushFlags::NONE).unwrap();
    h.cache
        .flush_entry(0x100, EntryFlushFlags::INVALIDATE)
        .unwrap(); // eviction
    let p = h.cache.protect(1, 0x200, &64, ProtectFlags::NONE).unwrap();
    h.cache.unprotect(p, UnprotectFlags::DELETED).unwrap(); // delete
    let owned = h
        .cache
        .flush_entry(
            0x300,
            EntryFlushFlags::INVALIDATE | EntryFlushFlags::TAKE_OWNERSHIP,
        )
        .unwrap();
    assert_eq!(owned, Some(MockEntry::new(64)));
    let frees: usize = h
        .classes
        .iter()
        .map(|c| c.count(|e| *e == Event::FreeIcr))
        .sum();
    let s = h.cache.stats();
    assert_eq!(s.total_evictions, 3);
    let taken_over = 1;
    assert_eq!(
        frees as u64,
        s.total_evictions - taken_over + s.speculative_retries
    );
    assert_eq!(frees, 3);
}

/// MDC-094: test-only flags. `NO_IO`: protecting an absent entry fails with `NoIoClass` and a flush
/// writes nothing (the entry is still serialized and marked clean). `SKIP_WRITES`: one serialize, no
/// write. `SKIP_READS`: no read; deserialize gets a zeroed buffer of the right length even though the
/// storage holds other bytes.
#[test]
fn mdc_094_test_only_class_flags() {
    let mut h = harness_with_flags(
        &[
            ClassFlags::NO_IO,
            ClassFlags::SKIP_WRITES,
            ClassFlags::SKIP_READS,
        ],
        roomy(),
    );
    let err = h
        .cache
        .protect(0, 0x100, &64, ProtectFlags::NONE)
        .unwrap_err();
    assert!(
        matches!(err, CacheError::NoIoClass { class: "mock-0" }),
        "{err:?}"
    );
    assert!(h.read_ops().is_empty());
    h.insert(0, 0x100, 64);
    h.insert(1, 0x200, 64);
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert!(h.writes().is_empty());
    for (class, addr) in [(0usize, 0x100u64), (1, 0x200)] {
        assert_eq!(
            h.classes[class].count(|e| matches!(e, Event::Serialize { .. })),
            1
        );
        assert!(!dirty(&mut h, addr));
    }
    assert_eq!(h.cache.stats().writes, 0);

    h.storage.write_at(0x300, &[0x77; 64]).unwrap();
    h.clear_io();
    h.touch(2, 0x300, 64);
    assert!(h.read_ops().is_empty());
    assert_eq!(
        h.classes[2].count(|e| *e == Event::Deserialize { len: 64 }),
        1
    );
    assert_eq!(h.cache.peek_icr(0x300).unwrap().fill, 0);
    assert_eq!(h.cache.status(0x300).unwrap().size, 64);
}

/// The source order of the canonical kinds, written as an exhaustive `match` without a wildcard arm:
/// this only compiles while the enumeration is closed and complete (MDC-095).
fn source_id(k: MetadataKind) -> u8 {
    use MetadataKind as K;
    match k {
        K::BTreeV1Node => 0,
        K::SymbolTableNode => 1,
        K::LocalHeapPrefix => 2,
        K::LocalHeapDataBlock => 3,
        K::GlobalHeapCollection => 4,
        K::ObjectHeader => 5,
        K::ObjectHeaderChunk => 6,
        K::BTreeV2Header => 7,
        K::BTreeV2Internal => 8,
        K::BTreeV2Leaf => 9,
        K::FractalHeapHeader => 10,
        K::FractalHeapDirectBlock => 11,
        K::FractalHeapIndirectBlock => 12,
        K::FreeSpaceHeader => 13,
        K::FreeSpaceSections => 14,
        K::SharedMessageTable => 15,
        K::SharedMessageList => 16,
        K::ExtensibleArrayHeader => 17,
        K::ExtensibleArrayIndexBlock => 18,
        K::ExtensibleArraySuperBlock => 19,
        K::ExtensibleArrayDataBlock => 20,
        K::ExtensibleArrayDataBlockPage => 21,
        K::FixedArrayHeader => 22,
        K::FixedArrayDataBlock => 23,
        K::FixedArrayDataBlockPage => 24,
        K::Superblock => 25,
        K::DriverInfo => 26,
        K::Test => 27,
    }
}

/// MDC-095: one canonical enumeration of client kinds: `ALL` lists each once in id order, ids run
/// without gaps, names are distinct, and a class table built from it registers, with the names shown
/// in the statistics report.
#[test]
fn mdc_095_canonical_kind_enumeration() {
    assert_eq!(MetadataKind::ALL.len(), 28);
    let mut names = std::collections::HashSet::new();
    for (i, k) in MetadataKind::ALL.iter().enumerate() {
        assert_eq!(k.id() as usize, i);
        assert_eq!(source_id(*k), k.id());
        assert!(!k.name().is_empty());
        assert!(names.insert(k.name()), "duplicate name {}", k.name());
    }
    assert!(MetadataKind::ALL.len() <= MAX_CLASS_IDS);
    assert_eq!(MetadataKind::Superblock.name(), "superblock");

    let classes: Vec<Arc<MockClass>> = MetadataKind::ALL
        .iter()
        .map(|k| MockClass::new(k.id(), k.name(), ClassFlags::NONE))
        .collect();
    let table: Vec<Arc<dyn Class<Mock>>> = classes
        .iter()
        .map(|c| c.clone() as Arc<dyn Class<Mock>>)
        .collect();
    let mut cache = CacheBuilder::new(
        Arc::new(MemoryStorage::new()),
        table,
        MockFile {
            eoa: STORAGE_LEN,
            frees: Vec::new(),
        },
    )
    .config(roomy())
    .build()
    .unwrap();
    let oh = MetadataKind::ObjectHeader.id();
    cache
        .insert(oh, 0x100, MockEntry::new(64), InsertFlags::NONE)
        .unwrap();
    assert_eq!(cache.class_info(oh).unwrap().name, "object header");
    let report = cache.stats_report();
    for k in MetadataKind::ALL {
        assert!(
            report.contains(&format!("class {} {}:", k.id(), k.name())),
            "{}",
            k.name()
        );
    }
    assert_eq!(cache.stats().per_class[oh as usize].insertions, 1);
}

/// MDC-096 / E-39: a client leaves an entry in temporary space (past the end of allocation) and never
/// moves it: the flush fails with `PastEndOfAllocation { what: "write" }` and writes nothing, also
/// for an entry that only straddles the end. When pre_serialize relocates it (the client's duty),
/// the write goes to the real address.
#[test]
fn e_39_write_to_temporary_space_is_refused() {
    let mut h = harness(1, roomy());
    h.cache.ctx_mut().eoa = 0x1000;
    h.insert(0, 0x2000, 64);
    let err = h.cache.flush(FlushFlags::NONE).unwrap_err();
    assert!(
        matches!(
            err,
            CacheError::PastEndOfAllocation {
                what: "write",
                addr: 0x2000,
                len: 64,
                eoa: 0x1000
            }
        ),
        "{err:?}"
    );
    assert!(h.writes().is_empty());
    assert!(dirty(&mut h, 0x2000));
    h.check();
    h.cache
        .flush_entry(
            0x2000,
            EntryFlushFlags::CLEAR_ONLY | EntryFlushFlags::INVALIDATE,
        )
        .unwrap();

    h.insert(0, 0xfe0, 64);
    let err = h
        .cache
        .flush_entry(0xfe0, EntryFlushFlags::NONE)
        .unwrap_err();
    assert!(
        matches!(
            err,
            CacheError::PastEndOfAllocation {
                what: "write",
                addr: 0xfe0,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(h.writes().is_empty());

    // A client that moves temporary entries in pre_serialize.
    h.classes[0].knobs().pre_serialize = Some(Box::new(|c, _icr, addr, len| {
        let eoa = c.ctx().eoa;
        Ok(if addr + len as u64 > eoa {
            PreSerialize {
                flags: PreSerializeFlags {
                    moved: true,
                    resized: false,
                },
                new_addr: 0x800,
                new_len: 0,
            }
        } else {
            PreSerialize::default()
        })
    }));
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.write_ops(), vec![OpRecord::new(IoOp::Write, 0x800, 64)]);
    assert!(!h.cache.contains(0xfe0));
    assert!(!dirty(&mut h, 0x800));
    h.check();
}

/// MDC-091: `get_fsf_size` can fail like every other callback; the failure is reported and leaves
/// the entry exactly as it was (asked before the entry is cleared or evicted).
#[test]
fn mdc_091_get_fsf_size_failure_leaves_the_entry() {
    let mut h = harness(1, fixed(64 * 1024, 0.0));
    h.insert(0, 0x100, 64);
    h.classes[0].knobs().fail.insert(Callback::GetFsfSize);
    let err = h
        .cache
        .expunge(0, 0x100, ExpungeFlags::FREE_FILE_SPACE)
        .unwrap_err();
    assert!(matches!(
        err,
        CacheError::Client {
            callback: Callback::GetFsfSize,
            ..
        }
    ));
    let s = h.cache.status(0x100).unwrap();
    assert!(s.dirty, "still dirty: nothing was cleared");
    assert_eq!(h.classes[0].count(|e| matches!(e, Event::Clear { .. })), 0);
    assert!(h.cache.ctx().frees.is_empty());
    h.classes[0].knobs().fail.clear();
    h.cache
        .expunge(0, 0x100, ExpungeFlags::FREE_FILE_SPACE)
        .unwrap();
    assert_eq!(h.cache.ctx().frees, vec![(0x100, 64)]);
    h.check();
}

/// MDC-077, MDC-078: a flush-last child under an ordinary parent. Dependency order outranks
/// flush-last: the parent waits for its child and is written in the final phase right after it,
/// and an independent flush-last entry (the superblock at 0x0) still goes last of all.
#[test]
fn mdc_077_078_flush_last_child_under_ordinary_parent() {
    let mut h = harness(1, fixed(64 * 1024, 0.0));
    h.cache
        .insert(0, 0x0, MockEntry::new(64), InsertFlags::FLUSH_LAST)
        .unwrap();
    h.cache
        .insert(0, 0x100, MockEntry::new(64), InsertFlags::PIN)
        .unwrap();
    h.insert(0, 0x500, 64);
    h.cache
        .insert(0, 0x900, MockEntry::new(64), InsertFlags::FLUSH_LAST)
        .unwrap();
    h.cache.create_flush_dependency(0x100, 0x900).unwrap();
    h.clear_io();
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert_eq!(h.writes(), vec![0x500, 0x900, 0x100, 0x0]);
    assert!(h.cache.dirty_addrs().is_empty());
    h.check();
}

/// A diff-writes entry whose serialize failed compares its next image against the bytes the
/// file holds, not against the half-made buffer of the failed attempt: here the next image
/// equals that buffer (all poison), so a comparison against it would write nothing and leave
/// the file's old bytes behind.
#[test]
fn failed_serialize_keeps_the_image_the_file_holds_for_diff_writes() {
    let mut h = harness_with_flags(&[ClassFlags::DIFF_WRITES], roomy());
    let addr = 0x1000;
    h.cache
        .insert(0, addr, MockEntry::filled(64, 0x11), InsertFlags::NONE)
        .unwrap();
    h.cache.flush(FlushFlags::NONE).unwrap();
    let mut disk = [0u8; 64];
    h.storage.read_at(addr, &mut disk).unwrap();
    assert_eq!(disk, [0x11; 64]);
    let dirty = |h: &mut Harness| {
        let p = h.cache.protect(0, addr, &64, ProtectFlags::NONE).unwrap();
        h.cache.unprotect(p, UnprotectFlags::DIRTIED).unwrap();
    };
    dirty(&mut h);
    h.classes[0].knobs().fail.insert(Callback::Serialize);
    assert!(h.cache.flush(FlushFlags::NONE).is_err());
    h.classes[0].knobs().fail.clear();
    h.classes[0].knobs().serialize = Some(Box::new(|_, _, image: &mut [u8]| {
        image.fill(SERIALIZE_POISON);
        Ok(())
    }));
    h.clear_io();
    h.cache.flush(FlushFlags::NONE).unwrap();
    h.storage.read_at(addr, &mut disk).unwrap();
    assert_eq!(disk, [SERIALIZE_POISON; 64]);
    assert_eq!(h.write_ops().len(), 1);
    // Unchanged since: the next flush of the entry, dirtied again, writes nothing.
    dirty(&mut h);
    h.clear_io();
    h.cache.flush(FlushFlags::NONE).unwrap();
    assert!(h.write_ops().is_empty());
    h.check();
}
