//! A crash at every storage operation, in process: the workload runs over memory storages
//! (file and rollback journal) that record every write, vector segment and length change in
//! one global order. Then, for every prefix of that log — and the same prefix plus the next
//! write torn in half — the two storages are rebuilt as a crash at that instant would leave
//! them, recovered, opened by h5 and checked: every value up to the last completed flush is
//! there, and nothing present is wrong (docs/design.md §6).

use std::sync::{Arc, Mutex, PoisonError};

use h5::{FileAccess, FormatBounds};
use h5_crashtest::{Checkpoint, Writer, Wrong, verify};
use h5_io::testkit::{Hooks, Intercept};
use h5_io::{JournalOptions, Journaled, MemoryStorage, Storage};

/// One change to one of the two storages.
#[derive(Clone, Debug)]
enum Change {
    Write {
        to: usize,
        offset: u64,
        data: Vec<u8>,
    },
    SetLen {
        to: usize,
        len: u64,
    },
}

type Log = Arc<Mutex<Vec<Change>>>;

/// Storage hooks that log a memory storage's changes, tagged `to`, each just before it is made
/// (a vector write as its segments, in slice order).
#[derive(Debug)]
struct Recorder {
    to: usize,
    log: Log,
}

impl Recorder {
    fn push(&self, c: Change) {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(c);
    }
}

impl Hooks for Recorder {
    fn write_at(&self, inner: &dyn Storage, offset: u64, data: &[u8]) -> h5_io::Result<()> {
        self.push(Change::Write {
            to: self.to,
            offset,
            data: data.to_vec(),
        });
        inner.write_at(offset, data)
    }
    fn set_len(&self, inner: &dyn Storage, len: u64) -> h5_io::Result<()> {
        self.push(Change::SetLen { to: self.to, len });
        inner.set_len(len)
    }
}

fn apply(stores: &[MemoryStorage; 2], c: &Change) {
    match c {
        Change::Write { to, offset, data } => stores[*to].write_at(*offset, data).unwrap(),
        Change::SetLen { to, len } => stores[*to].set_len(*len).unwrap(),
    }
}

/// Runs the workload for `ops` operations, flushing every `every`; returns the log and, for
/// every completed flush, the log length when it returned and what it had written.
fn record(
    bounds: FormatBounds,
    seed: u64,
    ops: u64,
    every: u64,
    journal: bool,
) -> (Vec<Change>, Vec<(usize, Checkpoint)>) {
    let log: Log = Arc::default();
    let rec = |to| {
        let log = Arc::clone(&log);
        Intercept::new(MemoryStorage::new(), Recorder { to, log })
    };
    let storage: Arc<dyn Storage> = if journal {
        Arc::new(
            Journaled::open(rec(0), rec(1), JournalOptions::default())
                .unwrap()
                .0,
        )
    } else {
        Arc::new(rec(0))
    };
    let mut w = Writer::create_in(storage, bounds, seed).unwrap();
    let len = |log: &Log| log.lock().unwrap().len();
    let mut commits = Vec::new();
    for op in 1..=ops {
        w.step().unwrap();
        if op.is_multiple_of(every) {
            let c = w.flush().unwrap();
            commits.push((len(&log), c));
        }
    }
    let c = w.state();
    w.close().unwrap();
    commits.push((len(&log), c));
    let changes = log.lock().unwrap().clone();
    (changes, commits)
}

/// The crash state `stores` with the next change `next` torn, when it is a write of more than
/// one byte: only its first half reached the storage.
fn torn_next(stores: &[MemoryStorage; 2], next: Option<&Change>) -> Option<[MemoryStorage; 2]> {
    let Some(Change::Write { to, offset, data }) = next else {
        return None;
    };
    if data.len() < 2 {
        return None;
    }
    let torn = [
        MemoryStorage::with_data(stores[0].snapshot()),
        MemoryStorage::with_data(stores[1].snapshot()),
    ];
    torn[*to]
        .write_at(*offset, &data[..data.len() / 2])
        .unwrap();
    Some(torn)
}

/// Checks the crash state `stores`: recovered and opened, it holds at least `flushed` (when a
/// flush had completed) and nothing wrong. Before the first flush completes there is no file
/// yet: an error is fine then, a wrong value never. Returns what is wrong.
fn check(stores: &[MemoryStorage; 2], flushed: Option<&Checkpoint>) -> Result<(), String> {
    let data = MemoryStorage::with_data(stores[0].snapshot());
    let journal = MemoryStorage::with_data(stores[1].snapshot());
    h5_io::recover(&data, &journal, false).map_err(|e| format!("recover: {e}"))?;
    let verified = match h5::File::from_storage(Arc::new(data), &FileAccess::default(), None) {
        Ok(f) => verify(&f, &flushed.copied().unwrap_or_default()),
        Err(e) => Err(Wrong::Unreadable(format!("open: {e}"))),
    };
    match verified {
        Ok(_) => Ok(()),
        Err(Wrong::Unreadable(_)) if flushed.is_none() => Ok(()),
        Err(w) => Err(w.to_string()),
    }
}

/// Checks every crash state of a recorded run; returns the failures and the states checked.
fn crash_states(bounds: FormatBounds, seed: u64, journal: bool) -> (Vec<String>, usize, usize) {
    let (log, commits) = record(bounds, seed, 48, 4, journal);
    assert!(commits.len() >= 12, "{commits:?}");
    let stores = [MemoryStorage::new(), MemoryStorage::new()];
    let mut failures = Vec::new();
    let mut checked = 0;
    for n in 0..=log.len() {
        // The last flush that had returned when the crash came after `n` changes.
        let flushed = commits
            .iter()
            .rev()
            .find(|(at, _)| *at <= n)
            .map(|(_, c)| c);
        if let Err(e) = check(&stores, flushed) {
            failures.push(format!("after {n} changes: {e}"));
        }
        checked += 1;
        if let Some(torn) = torn_next(&stores, log.get(n)) {
            if let Err(e) = check(&torn, flushed) {
                failures.push(format!("after {n} changes and half of the next: {e}"));
            }
            checked += 1;
        }
        if let Some(c) = log.get(n) {
            apply(&stores, c);
        }
    }
    (failures, checked, log.len())
}

fn every_crash_point(bounds: FormatBounds, seed: u64) {
    let (failures, checked, changes) = crash_states(bounds, seed, true);
    assert!(
        failures.is_empty(),
        "{} of {checked} crash states wrong ({changes} changes logged):\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    eprintln!("{bounds:?}: {checked} crash states checked ({changes} changes)");
}

/// The same run without the rollback journal (delayed reuse alone, and no marker): flushes
/// change flushed structures in place, so some crash states mix two flushes. This is what the
/// journal is for, and shows that the checks above can fail.
#[test]
fn without_the_journal_some_crash_points_are_wrong() {
    let (failures, checked, _) = crash_states(FormatBounds::V18, 1, false);
    eprintln!(
        "without the journal: {} of {checked} crash states wrong",
        failures.len()
    );
    assert!(!failures.is_empty());
}

#[test]
fn every_crash_point_recovers_the_last_flush_v18() {
    every_crash_point(FormatBounds::V18, 1);
}

#[test]
fn every_crash_point_recovers_the_last_flush_earliest() {
    every_crash_point(FormatBounds::Earliest, 2);
}

#[test]
fn every_crash_point_recovers_the_last_flush_latest() {
    every_crash_point(FormatBounds::LATEST, 3);
}

/// `/g`'s member names and its attributes with their values.
type DenseState = (Vec<String>, Vec<(String, i32)>);

/// `/g`'s [`DenseState`] in the crash state `stores`, recovered; `None` when the file does not
/// open.
fn dense_state(stores: &[MemoryStorage; 2]) -> Option<DenseState> {
    let data = MemoryStorage::with_data(stores[0].snapshot());
    let journal = MemoryStorage::with_data(stores[1].snapshot());
    h5_io::recover(&data, &journal, false).ok()?;
    let f = h5::File::from_storage(Arc::new(data), &FileAccess::default(), None).ok()?;
    let g = f.group("g").ok()?;
    let names = g.member_names().ok()?;
    let mut attrs = Vec::new();
    for a in g.attr_names().ok()? {
        let v = g.attr(&a).ok()?.read_scalar::<i32>().ok()?;
        attrs.push((a, v));
    }
    Some((names, attrs))
}

/// A close reuses committed space at once when the storage journals overwrites (docs/design.md
/// §6.4): the last changes remove and add dense links and attributes (freeing heap blocks and
/// B-tree nodes the flushed state uses), and a crash at every storage operation of the closing
/// flush, or in the middle of its next write, recovers either the last flush or the closed
/// state, never a mix.
#[test]
fn every_crash_point_of_a_close_that_reuses_committed_space_recovers() {
    let log: Log = Arc::default();
    let rec = |to| {
        let log = Arc::clone(&log);
        Intercept::new(MemoryStorage::new(), Recorder { to, log })
    };
    let storage = Arc::new(
        Journaled::open(rec(0), rec(1), JournalOptions::default())
            .unwrap()
            .0,
    );
    let file = h5::File::create_in(
        Arc::clone(&storage) as Arc<dyn Storage>,
        &FileAccess::default(),
        &h5::CreateOptions {
            bounds: FormatBounds::V114,
            ..h5::CreateOptions::default()
        },
        None,
    )
    .unwrap();
    let g = file.create_group("g").unwrap();
    for i in 0..40 {
        g.create_group(&format!("m{i:03}")).unwrap();
        g.write_attr_scalar(&format!("a{i:03}"), i).unwrap();
    }
    file.flush().unwrap();
    let state = |g: &h5::Group| {
        let attrs = g
            .attr_names()
            .unwrap()
            .into_iter()
            .map(|a| {
                let v = g.attr(&a).unwrap().read_scalar::<i32>().unwrap();
                (a, v)
            })
            .collect::<Vec<_>>();
        (g.member_names().unwrap(), attrs)
    };
    let flushed = state(&g);
    let from = log.lock().unwrap().len();
    for i in (0..40).step_by(2) {
        g.unlink(&format!("m{i:03}")).unwrap();
        g.delete_attr(&format!("a{i:03}")).unwrap();
    }
    for i in 0..10 {
        g.create_group(&format!("n{i:03}")).unwrap();
        g.write_attr_scalar(&format!("b{i:03}"), 100 + i).unwrap();
    }
    let closed = state(&g);
    drop(g);
    file.close().unwrap();
    assert_eq!(storage.journal_len(), 0, "the close committed");
    let log = log.lock().unwrap().clone();
    assert!(log.len() > from, "the close wrote");
    let stores = [MemoryStorage::new(), MemoryStorage::new()];
    for c in &log[..from] {
        apply(&stores, c);
    }
    let ok =
        |s: &[MemoryStorage; 2]| dense_state(s).is_some_and(|st| st == flushed || st == closed);
    let mut checked = 0;
    for n in from..=log.len() {
        assert!(ok(&stores), "after {n} of {} changes", log.len());
        checked += 1;
        if let Some(torn) = torn_next(&stores, log.get(n)) {
            assert!(ok(&torn), "after {n} changes and half of the next");
            checked += 1;
        }
        if let Some(c) = log.get(n) {
            apply(&stores, c);
        }
    }
    assert_eq!(dense_state(&stores), Some(closed));
    eprintln!("{checked} crash states of the close checked");
}
