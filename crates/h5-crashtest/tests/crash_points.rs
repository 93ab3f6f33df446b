//! A crash at every storage operation, in process: the workload runs over memory storages
//! (file and rollback journal) that record every write, vector segment and length change in
//! one global order. Then, for every prefix of that log — and the same prefix plus the next
//! write torn in half — the two storages are rebuilt as a crash at that instant would leave
//! them, recovered, opened by h5 and checked: every value up to the last completed flush is
//! there, and nothing present is wrong (docs/design.md §6).

use std::sync::{Arc, Mutex, PoisonError};

use h5::{FileAccess, FormatBounds};
use h5_crashtest::{Checkpoint, Writer, Wrong, verify};
use h5_io::{
    CommitPoint, JournalOptions, Journaled, LockMode, MemoryStorage, ReadSegment, Storage,
    WriteSegment,
};

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

/// A memory storage that logs its changes (a vector write as its segments, in slice order).
#[derive(Debug)]
struct Recorder {
    inner: MemoryStorage,
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

impl Storage for Recorder {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> h5_io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> h5_io::Result<()> {
        self.push(Change::Write {
            to: self.to,
            offset,
            data: data.to_vec(),
        });
        self.inner.write_at(offset, data)
    }
    fn len(&self) -> h5_io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> h5_io::Result<()> {
        self.push(Change::SetLen { to: self.to, len });
        self.inner.set_len(len)
    }
    fn sync(&self) -> h5_io::Result<()> {
        Ok(())
    }
    fn lock(&self, mode: LockMode) -> h5_io::Result<()> {
        self.inner.lock(mode)
    }
    fn unlock(&self) -> h5_io::Result<()> {
        self.inner.unlock()
    }
    fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> h5_io::Result<()> {
        self.inner.read_vectored(segments)
    }
    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> h5_io::Result<()> {
        for s in segments {
            self.push(Change::Write {
                to: self.to,
                offset: s.offset,
                data: s.data.to_vec(),
            });
        }
        self.inner.write_vectored(segments)
    }
    fn commit(&self, point: &CommitPoint) -> h5_io::Result<()> {
        self.inner.commit(point)
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
    let rec = |to| Recorder {
        inner: MemoryStorage::new(),
        to,
        log: Arc::clone(&log),
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
        if let Some(Change::Write { to, offset, data }) = log.get(n)
            && data.len() > 1
        {
            // The next write torn: only its first half reached the storage.
            let torn = [
                MemoryStorage::with_data(stores[0].snapshot()),
                MemoryStorage::with_data(stores[1].snapshot()),
            ];
            torn[*to]
                .write_at(*offset, &data[..data.len() / 2])
                .unwrap();
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
