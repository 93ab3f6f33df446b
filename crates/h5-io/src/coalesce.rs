//! Write coalescing: small writes are held in memory, merged with the held writes they touch or
//! overlap, and reach the storage below as a few large writes.
//!
//! Why: an HDF5 writer makes many small writes at scattered places — each evicted metadata entry
//! (an object header of 100–300 bytes), each tiny dataset's raw data (8 bytes in h5-bench's
//! W5) — and one system call each costs more than the work that produced the bytes. Most land
//! next to each other (the metadata and small-data aggregators hand out neighbouring addresses),
//! so holding them merges runs of neighbours. libhdf5 has the same idea for metadata (its
//! "metadata accumulator"); here it is one decorator for every write, below both caches.
//!
//! # Rules
//! * Held runs never overlap or touch each other: a write that touches or overlaps held runs
//!   merges with them (its own bytes win where they overlap).
//! * A write of at least [`CoalesceLimits::pass_through`] bytes goes straight down, after the
//!   held runs it overlaps (so that its bytes win).
//! * Everything held goes down, as one vectored write, when more than
//!   [`CoalesceLimits::max_held`] bytes or [`CoalesceLimits::max_runs`] runs are held, and
//!   before `set_len`, `sync` and `commit` (so a flushed file is complete on disk, and a
//!   rollback journal below sees every change before its commit point).
//! * A read first sends down the held runs it overlaps; if the storage below is then too short
//!   (the read reaches into the gap before a held run past its end) everything held goes down
//!   and the read is retried. [`len`](Storage::len) counts held runs.
//! * If sending held bytes down fails, that call returns the failure and every later change
//!   (write, `set_len`, `sync`, `commit`, lock) returns [`Error::PreviousIo`]: the held bytes are
//!   lost, so nothing may build on them. Reads still go to the storage below, which holds what
//!   it holds, as after any failed write (whose bytes on disk are unknown too).
//! * [`Coalescing::stop_holding`] sends everything down and passes every later write straight
//!   through: for a legacy SWMR writer, whose readers rely on the order of its writes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::error::{Error, Result, checked_end, len_u64};
use crate::storage::{CommitPoint, LockMode, ReadSegment, Storage, WriteSegment, check_segments};

/// When held writes go down (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoalesceLimits {
    /// Writes of at least this many bytes are not held.
    pub pass_through: usize,
    /// Most bytes held before everything goes down.
    pub max_held: usize,
    /// Most separate runs held before everything goes down.
    pub max_runs: usize,
}

impl Default for CoalesceLimits {
    /// Writes under 4 KiB are held, up to 1 MiB (libhdf5's metadata accumulator's limit) in at
    /// most 512 runs.
    fn default() -> Self {
        CoalesceLimits {
            pass_through: 4096,
            max_held: 1 << 20,
            max_runs: 512,
        }
    }
}

/// Decorator holding small writes and merging neighbours (see the module documentation).
///
/// ```
/// use h5_io::{Coalescing, MemoryStorage, Metrics, Storage, StorageExt};
///
/// let s = Coalescing::new(Metrics::new(MemoryStorage::new()));
/// s.write_at(0, b"ab")?;
/// s.write_at(2, b"cd")?; // touches the held run: merged
/// assert_eq!(s.inner().snapshot().writes, 0);
/// assert_eq!(s.read_vec(1, 2)?, b"bc"); // the read sends the run down first
/// let m = s.inner().snapshot();
/// assert_eq!((m.writes + m.write_vectors, m.bytes_written), (1, 4));
/// # Ok::<(), h5_io::Error>(())
/// ```
#[derive(Debug)]
pub struct Coalescing<S> {
    inner: S,
    limits: CoalesceLimits,
    held: Mutex<Held>,
    /// Bytes held; zero lets a read skip the lock.
    held_bytes: AtomicUsize,
    /// Sending held bytes down failed: they are lost, and every call is refused.
    failed: AtomicBool,
}

/// The held runs and the decorator's mode.
#[derive(Debug, Default)]
struct Held {
    /// Start offset → bytes. Runs neither overlap nor touch.
    runs: BTreeMap<u64, Vec<u8>>,
    /// Sum of the runs' lengths.
    bytes: usize,
    /// [`Coalescing::stop_holding`] was called.
    stopped: bool,
}

impl Held {
    /// The offsets of held runs that overlap or touch `start..end`, in ascending order.
    fn touching(&self, start: u64, end: u64) -> Vec<u64> {
        let mut keys: Vec<u64> = self
            .runs
            .range(..=end)
            .rev()
            .take_while(|(s, b)| s.saturating_add(len_u64(b.len())) >= start)
            .map(|(s, _)| *s)
            .collect();
        keys.reverse();
        keys
    }

    /// The offsets of held runs that share at least one byte with `start..end`.
    fn overlapping(&self, start: u64, end: u64) -> Vec<u64> {
        self.touching(start, end)
            .into_iter()
            .filter(|s| {
                let len = self.runs.get(s).map_or(0, Vec::len);
                *s < end && s.saturating_add(len_u64(len)) > start
            })
            .collect()
    }

    /// Holds `data` at `offset` (not empty, end checked), merged with the runs it touches.
    fn hold(&mut self, offset: u64, data: &[u8]) {
        let end = offset.saturating_add(len_u64(data.len()));
        if self.hold_in_place(offset, end, data) {
            return;
        }
        let keys = self.touching(offset, end);
        let start = keys.first().map_or(offset, |k| (*k).min(offset));
        let mut merged = Vec::new();
        let mut others = keys.as_slice();
        // Common case: it extends (or overwrites inside) the one run it touches, which starts
        // at or before it; that run is grown in place.
        if let [only] = others
            && *only <= offset
        {
            merged = self.runs.remove(only).unwrap_or_default();
            self.bytes -= merged.len();
            others = &[];
        }
        // Otherwise the write covers every gap between the runs it touches.
        for k in others {
            if let Some(run) = self.runs.remove(k) {
                self.bytes -= run.len();
                merged.resize(offset_in(start, *k), 0);
                merged.extend_from_slice(&run);
            }
        }
        let at = offset_in(start, offset);
        if merged.len() < at + data.len() {
            merged.resize(at + data.len(), 0);
        }
        merged[at..at + data.len()].copy_from_slice(data);
        self.bytes += merged.len();
        self.runs.insert(start, merged);
    }

    /// The common cases of [`Held::hold`] without taking runs out of the map: the write
    /// touches no held run (a new run), or only the run starting at or before it (grown in
    /// place). Returns whether it held `data`.
    fn hold_in_place(&mut self, offset: u64, end: u64, data: &[u8]) -> bool {
        let before = self
            .runs
            .range(..=offset)
            .next_back()
            .map(|(s, b)| (*s, s.saturating_add(len_u64(b.len()))));
        // A run starting after the one at or before `offset` (or after `offset` when there is
        // none) that the write reaches: the general path merges them.
        let after_from = before.map_or(offset, |(s, _)| s.saturating_add(1));
        if self.runs.range(after_from..=end).next().is_some() {
            return false;
        }
        match before {
            Some((start, run_end)) if run_end >= offset => {
                let Some(run) = self.runs.get_mut(&start) else {
                    return false;
                };
                let at = offset_in(start, offset);
                let old = run.len();
                if run.len() < at + data.len() {
                    run.resize(at + data.len(), 0);
                }
                run[at..at + data.len()].copy_from_slice(data);
                self.bytes += run.len() - old;
            }
            _ => {
                self.runs.insert(offset, data.to_vec());
                self.bytes += data.len();
            }
        }
        true
    }

    /// The end of the last held run.
    fn end(&self) -> Option<u64> {
        self.runs
            .last_key_value()
            .map(|(s, b)| s.saturating_add(len_u64(b.len())))
    }
}

/// Where `offset` falls in a held run starting at `start` (`offset >= start`; held runs are in
/// memory, so the distance fits a `usize`).
fn offset_in(start: u64, offset: u64) -> usize {
    usize::try_from(offset.saturating_sub(start)).unwrap_or(usize::MAX)
}

impl<S: Storage> Coalescing<S> {
    /// Wraps `inner` with the default limits.
    pub fn new(inner: S) -> Self {
        Self::with_limits(inner, CoalesceLimits::default())
    }

    /// Wraps `inner` with `limits`.
    pub fn with_limits(inner: S, limits: CoalesceLimits) -> Self {
        Coalescing {
            inner,
            limits,
            held: Mutex::new(Held::default()),
            held_bytes: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
        }
    }

    /// The wrapped storage (it lacks the bytes still held).
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Bytes held, not yet written below.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes.load(Ordering::Acquire)
    }

    /// Sends everything held down and passes every later write straight through.
    pub fn stop_holding(&self) -> Result<()> {
        let mut held = self.lock()?;
        held.stopped = true;
        self.send_all(&mut held)
    }

    /// Sends everything held down.
    pub fn send_held(&self) -> Result<()> {
        let mut held = self.lock()?;
        self.send_all(&mut held)
    }

    /// The held state, or [`Error::PreviousIo`] once held bytes were lost (for changes).
    fn lock(&self) -> Result<MutexGuard<'_, Held>> {
        self.check()?;
        Ok(self.lock_for_read())
    }

    /// The held state for a read, which works after a failure too (nothing is held then).
    fn lock_for_read(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// [`Error::PreviousIo`] once held bytes were lost.
    fn check(&self) -> Result<()> {
        if self.failed.load(Ordering::Acquire) {
            Err(Error::PreviousIo)
        } else {
            Ok(())
        }
    }

    /// Writes the runs at `keys` below (one vectored write) and forgets them; a failure loses
    /// them and fails the decorator.
    fn send(&self, held: &mut Held, keys: &[u64]) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let runs: Vec<(u64, Vec<u8>)> = keys
            .iter()
            .filter_map(|k| held.runs.remove(k).map(|b| (*k, b)))
            .collect();
        held.bytes -= runs.iter().map(|(_, b)| b.len()).sum::<usize>();
        self.held_bytes.store(held.bytes, Ordering::Release);
        let segments: Vec<WriteSegment<'_>> =
            runs.iter().map(|(k, b)| WriteSegment::new(*k, b)).collect();
        let r = match segments.as_slice() {
            [one] => self.inner.write_at(one.offset, one.data),
            _ => self.inner.write_vectored(&segments),
        };
        if r.is_err() {
            self.failed.store(true, Ordering::Release);
            held.runs.clear();
            held.bytes = 0;
            self.held_bytes.store(0, Ordering::Release);
        }
        r
    }

    /// Writes every held run below.
    fn send_all(&self, held: &mut Held) -> Result<()> {
        let keys: Vec<u64> = held.runs.keys().copied().collect();
        self.send(held, &keys)
    }

    /// Holds a small write, then sends everything down if the limits are passed.
    fn hold(&self, held: &mut Held, offset: u64, data: &[u8]) -> Result<()> {
        held.hold(offset, data);
        self.held_bytes.store(held.bytes, Ordering::Release);
        if held.bytes > self.limits.max_held || held.runs.len() > self.limits.max_runs {
            self.send_all(held)?;
        }
        Ok(())
    }

    /// Whether a write of `len` bytes is held rather than passed through.
    fn holds(&self, held: &Held, len: usize) -> bool {
        !held.stopped && len < self.limits.pass_through
    }

    /// Sends down the held runs overlapping any of `ranges`.
    fn send_overlapping(
        &self,
        held: &mut Held,
        ranges: impl IntoIterator<Item = (u64, u64)>,
    ) -> Result<()> {
        let mut keys: Vec<u64> = ranges
            .into_iter()
            .flat_map(|(s, e)| held.overlapping(s, e))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        self.send(held, &keys)
    }

    /// Prepares a read of `ranges`: sends the held runs they overlap down.
    fn before_read(&self, ranges: impl IntoIterator<Item = (u64, u64)>) -> Result<()> {
        if self.held_bytes() == 0 {
            return Ok(());
        }
        let mut held = self.lock_for_read();
        self.send_overlapping(&mut held, ranges)
    }

    /// Runs a read; when it finds the storage below too short while runs are still held
    /// (a read into the gap before a held run past the end), sends everything down and retries.
    fn read_with_retry(&self, mut read: impl FnMut() -> Result<()>) -> Result<()> {
        match read() {
            Err(Error::OutOfBounds { .. }) if self.held_bytes() > 0 => {
                let mut held = self.lock_for_read();
                self.send_all(&mut held)?;
                drop(held);
                read()
            }
            r => r,
        }
    }
}

#[deny(clippy::missing_trait_methods)]
impl<S: Storage> Storage for Coalescing<S> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = checked_end(offset, len_u64(buf.len()))?;
        self.before_read([(offset, end)])?;
        self.read_with_retry(|| self.inner.read_at(offset, buf))
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let end = checked_end(offset, len_u64(data.len()))?;
        if data.is_empty() {
            return self.check();
        }
        let mut held = self.lock()?;
        if self.holds(&held, data.len()) {
            return self.hold(&mut held, offset, data);
        }
        self.send_overlapping(&mut held, [(offset, end)])?;
        self.inner.write_at(offset, data)
    }

    fn len(&self) -> Result<u64> {
        let held_end = self.lock_for_read().end();
        let len = self.inner.len()?;
        Ok(held_end.map_or(len, |e| e.max(len)))
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let mut held = self.lock()?;
        self.send_all(&mut held)?;
        self.inner.set_len(len)
    }

    fn sync(&self) -> Result<()> {
        let mut held = self.lock()?;
        self.send_all(&mut held)?;
        self.inner.sync()
    }

    fn lock(&self, mode: LockMode) -> Result<()> {
        self.check()?;
        self.inner.lock(mode)
    }

    fn unlock(&self) -> Result<()> {
        self.check()?;
        self.inner.unlock()
    }

    fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> Result<()> {
        check_segments(segments.iter().map(|s| (s.offset, s.buf.len())))?;
        self.before_read(
            segments
                .iter()
                .map(|s| (s.offset, s.offset.saturating_add(len_u64(s.buf.len())))),
        )?;
        self.read_with_retry(|| self.inner.read_vectored(segments))
    }

    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> Result<()> {
        check_segments(segments.iter().map(|s| (s.offset, s.data.len())))?;
        let extent = |s: &WriteSegment<'_>| (s.offset, s.offset + len_u64(s.data.len()));
        let mut sorted: Vec<(u64, u64)> = segments
            .iter()
            .filter(|s| !s.data.is_empty())
            .map(extent)
            .collect();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0].1 > w[1].0) {
            // Overlapping segments: slice order decides which bytes win, so one at a time.
            for s in segments {
                self.write_at(s.offset, s.data)?;
            }
            return Ok(());
        }
        let mut held = self.lock()?;
        let (small, large): (Vec<&WriteSegment<'_>>, Vec<&WriteSegment<'_>>) = segments
            .iter()
            .filter(|s| !s.data.is_empty())
            .partition(|s| self.holds(&held, s.data.len()));
        if !large.is_empty() {
            self.send_overlapping(&mut held, large.iter().map(|s| extent(s)))?;
            let large: Vec<WriteSegment<'_>> = large
                .iter()
                .map(|s| WriteSegment::new(s.offset, s.data))
                .collect();
            self.inner.write_vectored(&large)?;
        }
        for s in small {
            self.hold(&mut held, s.offset, s.data)?;
        }
        Ok(())
    }

    fn commit(&self, point: &CommitPoint) -> Result<()> {
        let mut held = self.lock()?;
        self.send_all(&mut held)?;
        self.inner.commit(point)
    }

    fn journals_overwrites(&self) -> bool {
        self.inner.journals_overwrites()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FaultInjection, IoOp, MemoryStorage, Metrics, StorageExt};

    fn coalescing() -> Coalescing<Metrics<MemoryStorage>> {
        Coalescing::new(Metrics::new(MemoryStorage::new()))
    }

    /// Write calls that reached the storage below, and the bytes they carried.
    fn writes_below(s: &Coalescing<Metrics<MemoryStorage>>) -> (u64, u64) {
        let m = s.inner().snapshot();
        (m.writes + m.write_vectors, m.bytes_written)
    }

    #[test]
    fn neighbours_merge_into_one_run_and_go_down_at_sync() {
        let s = coalescing();
        s.write_at(10, &[1; 5]).unwrap();
        s.write_at(15, &[2; 5]).unwrap(); // touches the end
        s.write_at(5, &[3; 5]).unwrap(); // touches the start
        s.write_at(12, &[4; 2]).unwrap(); // inside
        s.write_at(40, &[5; 3]).unwrap(); // a second run
        assert_eq!(writes_below(&s), (0, 0));
        assert_eq!(s.held_bytes(), 18);
        assert_eq!(s.len().unwrap(), 43);
        s.sync().unwrap();
        assert_eq!(s.held_bytes(), 0);
        // One vectored write of the two runs, then the sync.
        assert_eq!(writes_below(&s), (1, 18));
        assert_eq!(s.inner().snapshot().syncs, 1);
        let mut want = vec![0; 43];
        want[5..10].fill(3);
        want[10..15].fill(1);
        want[15..20].fill(2);
        want[12..14].fill(4);
        want[40..43].fill(5);
        assert_eq!(s.inner().inner().snapshot(), want);
    }

    #[test]
    fn a_write_bridging_runs_merges_them_and_fills_the_gaps() {
        let s = coalescing();
        s.write_at(0, &[1; 4]).unwrap();
        s.write_at(10, &[2; 4]).unwrap();
        s.write_at(20, &[3; 4]).unwrap();
        s.write_at(2, &[9; 20]).unwrap();
        let held = s.held.lock().unwrap();
        assert_eq!(held.runs.len(), 1);
        let mut want = vec![1, 1];
        want.extend([9; 20]);
        want.extend([3, 3]);
        assert_eq!(held.runs.get(&0), Some(&want));
        assert_eq!(held.bytes, 24);
    }

    #[test]
    fn a_run_grown_up_to_its_neighbour_merges_with_it() {
        let s = coalescing();
        s.write_at(0, &[1; 4]).unwrap();
        s.write_at(12, &[2; 4]).unwrap();
        s.write_at(4, &[3; 4]).unwrap(); // grows the first run, short of the second
        {
            let held = s.held.lock().unwrap();
            let runs: Vec<(u64, usize)> = held.runs.iter().map(|(k, b)| (*k, b.len())).collect();
            assert_eq!(runs, [(0, 8), (12, 4)]);
            assert_eq!(held.bytes, 12);
        }
        s.write_at(8, &[4; 4]).unwrap(); // ends where the second starts: one run
        let held = s.held.lock().unwrap();
        let mut want = vec![1; 4];
        want.extend([3; 4]);
        want.extend([4; 4]);
        want.extend([2; 4]);
        assert_eq!(held.runs.len(), 1);
        assert_eq!(held.runs.get(&0), Some(&want));
        assert_eq!(held.bytes, 16);
    }

    #[test]
    fn a_read_sends_down_only_the_runs_it_overlaps() {
        let s = coalescing();
        s.write_at(0, &[1; 8]).unwrap();
        s.write_at(100, &[2; 8]).unwrap();
        assert_eq!(s.read_vec(4, 2).unwrap(), [1, 1]);
        assert_eq!(writes_below(&s), (1, 8));
        assert_eq!(s.held_bytes(), 8);
        // Into the gap before the run past the end below: everything goes down, then the read.
        assert_eq!(s.read_vec(50, 4).unwrap(), [0; 4]);
        assert_eq!(writes_below(&s), (2, 16));
        assert_eq!(s.held_bytes(), 0);
    }

    #[test]
    fn a_large_write_goes_straight_down_after_the_runs_it_overlaps() {
        let s = coalescing();
        s.write_at(0, &[1; 8]).unwrap();
        s.write_at(5000, &[2; 8]).unwrap();
        s.write_at(4, &[7; 4096]).unwrap();
        // The overlapped run went down first, then the large write; the other run is held.
        assert_eq!(writes_below(&s), (2, 8 + 4096));
        assert_eq!(s.held_bytes(), 8);
        assert_eq!(s.read_vec(0, 6).unwrap(), [1, 1, 1, 1, 7, 7]);
    }

    #[test]
    fn limits_send_everything_down() {
        let limits = CoalesceLimits {
            pass_through: 100,
            max_held: 30,
            max_runs: 2,
        };
        let s = Coalescing::with_limits(Metrics::new(MemoryStorage::new()), limits);
        s.write_at(0, &[1; 4]).unwrap();
        s.write_at(10, &[1; 4]).unwrap();
        assert_eq!(writes_below(&s), (0, 0));
        s.write_at(20, &[1; 4]).unwrap(); // a third run
        assert_eq!(writes_below(&s), (1, 12));
        s.write_at(0, &[1; 31]).unwrap(); // more than max_held
        assert_eq!(writes_below(&s), (2, 43));
        assert_eq!(s.held_bytes(), 0);
    }

    #[test]
    fn vectored_writes_hold_small_segments_and_pass_large_ones() {
        let s = coalescing();
        s.write_at(8000, &[1; 4]).unwrap();
        s.write_vectored(&[
            WriteSegment::new(0, &[2; 10]),
            WriteSegment::new(7999, &[3; 5000]),
            WriteSegment::new(20, &[4; 10]),
        ])
        .unwrap();
        // The run under the large segment went down before it; the small segments are held.
        assert_eq!(writes_below(&s), (2, 4 + 5000));
        assert_eq!(s.held_bytes(), 20);
        assert_eq!(s.read_vec(8000, 2).unwrap(), [3, 3]);
    }

    #[test]
    fn commit_and_set_len_send_everything_down_first() {
        let s = coalescing();
        s.write_at(0, &[1; 4]).unwrap();
        s.commit(&CommitPoint::default()).unwrap();
        assert_eq!(writes_below(&s), (1, 4));
        s.write_at(10, &[1; 4]).unwrap();
        s.set_len(12).unwrap();
        assert_eq!(
            s.inner().inner().snapshot(),
            [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1]
        );
    }

    #[test]
    fn after_stop_holding_writes_pass_through() {
        let s = coalescing();
        s.write_at(0, &[1; 4]).unwrap();
        s.stop_holding().unwrap();
        assert_eq!(writes_below(&s), (1, 4));
        s.write_at(4, &[2; 4]).unwrap();
        assert_eq!(writes_below(&s), (2, 8));
        assert_eq!(s.held_bytes(), 0);
    }

    #[test]
    fn losing_held_bytes_refuses_every_later_change_but_not_reads() {
        let s = Coalescing::new(FaultInjection::new(MemoryStorage::new()).fail_nth(IoOp::Write, 1));
        s.write_at(0, &[1; 4]).unwrap();
        // The read sends the run down, which fails: the read reports it.
        assert!(matches!(
            s.read_vec(0, 4),
            Err(Error::Injected {
                op: IoOp::Write,
                call: 1
            })
        ));
        assert!(matches!(s.write_at(0, &[1]), Err(Error::PreviousIo)));
        assert!(matches!(s.sync(), Err(Error::PreviousIo)));
        assert!(matches!(
            s.commit(&CommitPoint::default()),
            Err(Error::PreviousIo)
        ));
        // Reads go on to the storage below (which never got the lost bytes).
        assert_eq!(s.len().unwrap(), 0);
        assert!(matches!(s.read_vec(0, 1), Err(Error::OutOfBounds { .. })));
    }
}
