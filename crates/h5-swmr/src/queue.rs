//! The process-wide end-of-tick queue (the RFC's §3.2.2, §3.3) and the API guard that checks it
//! on the outermost entry to and exit from the public API.
//!
//! Invariants: the queue holds one entry per open VFD SWMR file whose end of tick is enabled,
//! sorted by non-decreasing deadline (equal deadlines in arrival order); the cached head
//! (`HEAD_NANOS`, `HEAD_WRITER`, `LEN`) always equals the first entry's fields, so a check costs
//! one atomic load with no SWMR file open and one clock read with some (SWMR-039): a read of the
//! coarse clock while the head's deadline is surely ahead, else (within about a millisecond of
//! the deadline, or where no coarse clock exists) of the precise clock too. [`clock_reads`]
//! counts them.
//!
//! Threads: while any VFD SWMR file is open, API calls are serialized by one process-wide
//! re-entrant lock (OQ-11), so no end of tick can run in the middle of another thread's call.
//! Re-entrant calls (library → user callback → library) never check (SWMR-037).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::error::Result;

/// Why an end of tick runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Trigger {
    /// The outermost API entry found the tick expired.
    ApiEntry,
    /// The outermost API exit found the tick expired (writers only).
    ApiExit,
    /// An explicit `end_tick` call.
    Explicit,
    /// The page buffer grew past the expansion threshold.
    Early,
    /// Flush or close.
    Flush,
    /// `enable_end_of_tick` found the tick expired.
    Enable,
}

/// A file that ends ticks: implemented by the engine's open files.
pub trait TickTarget: Send + Sync {
    /// Runs this file's end of tick (writer or reader); the implementation re-queues itself
    /// with [`update`] when done.
    fn end_of_tick(&self, trigger: Trigger) -> Result<()>;

    /// Whether the file asks for an end of tick before its deadline (a writer whose page
    /// buffer grew past its expansion threshold, SWMR-072). Only asked while some file has
    /// registered with [`watch_early`].
    fn wants_early_tick(&self) -> bool {
        false
    }
}

/// A queue entry's identity.
pub type EntryId = u64;

struct Entry {
    id: EntryId,
    writer: bool,
    tick: u64,
    deadline: Instant,
    target: Weak<dyn TickTarget>,
}

#[derive(Default)]
struct Queue {
    entries: Vec<Entry>,
    next_id: EntryId,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue {
    entries: Vec::new(),
    next_id: 0,
});
static LEN: AtomicUsize = AtomicUsize::new(0);
static HEAD_NANOS: AtomicU64 = AtomicU64::new(u64::MAX);
static HEAD_WRITER: AtomicBool = AtomicBool::new(false);
static EARLY_WATCHERS: AtomicUsize = AtomicUsize::new(0);

/// Counts files with an expansion threshold: while any is open, every check also asks each
/// writer whether it wants an early end of tick.
pub fn watch_early(on: bool) {
    if on {
        EARLY_WATCHERS.fetch_add(1, Ordering::AcqRel);
    } else {
        let _ =
            EARLY_WATCHERS.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }
}

/// Runs the early end of tick of every writer that asks for one.
fn check_early() -> Result<()> {
    let writers: Vec<(EntryId, Weak<dyn TickTarget>)> = lock()
        .entries
        .iter()
        .filter(|e| e.writer)
        .map(|e| (e.id, e.target.clone()))
        .collect();
    for (id, w) in writers {
        if let Some(t) = w.upgrade()
            && t.wants_early_tick()
            && let Err(e) = t.end_of_tick(Trigger::Early)
        {
            remove(id);
            return Err(e);
        }
    }
    Ok(())
}

/// Reads of the coarse and of the precise clock by [`check`] since the process started.
static COARSE_READS: AtomicU64 = AtomicU64::new(0);
static PRECISE_READS: AtomicU64 = AtomicU64::new(0);

/// How many times [`check`] has read the coarse and the precise monotonic clock in this
/// process (the cost model of SWMR-039, for tests and benchmarks). The counts are updated only
/// while a VFD SWMR file is open, when API calls are serialized anyway.
pub fn clock_reads() -> (u64, u64) {
    (
        COARSE_READS.load(Ordering::Relaxed),
        PRECISE_READS.load(Ordering::Relaxed),
    )
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn nanos(t: Instant) -> u64 {
    t.saturating_duration_since(epoch())
        .as_nanos()
        .min(u128::from(u64::MAX - 1)) as u64
}

/// A cheap lower bound of `nanos(Instant::now())` and how far below it may be, or `None` where
/// no cheaper clock exists. Linux: the coarse monotonic clock, the monotonic clock (the one
/// `Instant` reads) as of the last timer interrupt, read without a hardware counter; its
/// resolution is that interval. Its origin is taken just after the epoch's, so the stamp never
/// exceeds the precise one.
#[cfg(target_os = "linux")]
fn coarse_nanos() -> Option<(u64, u64)> {
    use rustix::time::{ClockId, Timespec, clock_getres, clock_gettime};
    fn ns(t: Timespec) -> u64 {
        u64::try_from(t.tv_sec)
            .unwrap_or(0)
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::try_from(t.tv_nsec).unwrap_or(0))
    }
    // (origin on the monotonic clock, coarse resolution)
    static ORIGIN: OnceLock<(u64, u64)> = OnceLock::new();
    let (origin, res) = *ORIGIN.get_or_init(|| {
        epoch();
        (
            ns(clock_gettime(ClockId::Monotonic)),
            ns(clock_getres(ClockId::MonotonicCoarse)),
        )
    });
    COARSE_READS.fetch_add(1, Ordering::Relaxed);
    Some((
        ns(clock_gettime(ClockId::MonotonicCoarse)).saturating_sub(origin),
        res,
    ))
}

#[cfg(not(target_os = "linux"))]
fn coarse_nanos() -> Option<(u64, u64)> {
    None
}

/// Whether the head's deadline `head` (a [`nanos`] stamp) has certainly not come yet, known
/// from the coarse clock alone: its stamp plus its resolution (plus a millisecond of margin for
/// the two clocks' origins) is still before the deadline. Otherwise the caller reads the
/// precise clock, so an end of tick is never late because of this shortcut.
fn surely_before(head: u64) -> bool {
    const MARGIN_NS: u64 = 1_000_000;
    coarse_nanos()
        .is_some_and(|(now, res)| now.saturating_add(res).saturating_add(MARGIN_NS) < head)
}

fn lock() -> std::sync::MutexGuard<'static, Queue> {
    QUEUE.lock().unwrap_or_else(|p| p.into_inner())
}

fn refresh_head(q: &Queue) {
    LEN.store(q.entries.len(), Ordering::Release);
    match q.entries.first() {
        Some(h) => {
            HEAD_NANOS.store(nanos(h.deadline), Ordering::Release);
            HEAD_WRITER.store(h.writer, Ordering::Release);
        }
        None => {
            HEAD_NANOS.store(u64::MAX, Ordering::Release);
            HEAD_WRITER.store(false, Ordering::Release);
        }
    }
}

/// Sorted insertion from the tail: after the last entry whose deadline is ≤ the new one's
/// (SWMR-031).
fn insert_sorted(q: &mut Queue, e: Entry) {
    let at = q
        .entries
        .iter()
        .rposition(|x| x.deadline <= e.deadline)
        .map_or(0, |i| i + 1);
    q.entries.insert(at, e);
    refresh_head(q);
}

/// Adds a file to the queue; returns its entry id.
pub fn register(
    target: Weak<dyn TickTarget>,
    writer: bool,
    tick: u64,
    deadline: Instant,
) -> EntryId {
    let mut q = lock();
    q.next_id += 1;
    let id = q.next_id;
    insert_sorted(
        &mut q,
        Entry {
            id,
            writer,
            tick,
            deadline,
            target,
        },
    );
    id
}

/// Removes a file's entry (close, disable, failure). Unknown ids are ignored.
pub fn remove(id: EntryId) -> Option<(bool, u64)> {
    let mut q = lock();
    let at = q.entries.iter().position(|e| e.id == id)?;
    let e = q.entries.remove(at);
    refresh_head(&q);
    Some((e.writer, e.tick))
}

/// Re-queues a file after its end of tick with its new tick and deadline (SWMR-033); a file not
/// on the queue (disabled) is left off.
pub fn update(id: EntryId, tick: u64, deadline: Instant) {
    let mut q = lock();
    let Some(at) = q.entries.iter().position(|e| e.id == id) else {
        return;
    };
    let mut e = q.entries.remove(at);
    e.tick = tick;
    e.deadline = deadline;
    insert_sorted(&mut q, e);
}

/// Puts back an entry that [`remove`] took off (enable after disable).
pub fn reinsert(
    id: EntryId,
    target: Weak<dyn TickTarget>,
    writer: bool,
    tick: u64,
    deadline: Instant,
) {
    let mut q = lock();
    if q.entries.iter().any(|e| e.id == id) {
        return;
    }
    insert_sorted(
        &mut q,
        Entry {
            id,
            writer,
            tick,
            deadline,
            target,
        },
    );
}

/// A snapshot of the queue: (id, writer, tick, deadline), head first.
pub fn snapshot() -> Vec<(EntryId, bool, u64, Instant)> {
    lock()
        .entries
        .iter()
        .map(|e| (e.id, e.writer, e.tick, e.deadline))
        .collect()
}

/// The cached head: (writer flag, deadline) or `None` for an empty queue.
pub fn head() -> Option<(bool, u64)> {
    (LEN.load(Ordering::Acquire) > 0).then(|| {
        (
            HEAD_WRITER.load(Ordering::Acquire),
            HEAD_NANOS.load(Ordering::Acquire),
        )
    })
}

/// The nanosecond stamp [`head`] reports for an instant.
pub fn stamp(t: Instant) -> u64 {
    nanos(t)
}

/// Whether the queue is empty (no VFD SWMR file open with end of tick enabled).
pub fn is_empty() -> bool {
    LEN.load(Ordering::Acquire) == 0
}

/// Runs the end of tick of every expired file at the head of the queue (SWMR-034 … SWMR-036):
/// on exit, a reader at the head stops the check (an expired writer behind it waits for the
/// next entry — accepted, as in the RFC); the loop also stops at the first entry seen again.
pub fn check(exiting: bool) -> Result<()> {
    if LEN.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    if EARLY_WATCHERS.load(Ordering::Acquire) > 0 {
        check_early()?;
    }
    if exiting && !HEAD_WRITER.load(Ordering::Acquire) {
        // A reader at the head stops an exit check whether or not it expired (below): no
        // clock read needed.
        return Ok(());
    }
    let head = HEAD_NANOS.load(Ordering::Acquire);
    if surely_before(head) {
        return Ok(());
    }
    PRECISE_READS.fetch_add(1, Ordering::Relaxed);
    let now = nanos(Instant::now());
    if now < head {
        return Ok(());
    }
    let mut first_seen: Option<EntryId> = None;
    loop {
        let (id, target) = {
            let q = lock();
            let Some(h) = q.entries.first() else {
                return Ok(());
            };
            if nanos(h.deadline) > now {
                return Ok(());
            }
            if exiting && !h.writer {
                return Ok(());
            }
            if first_seen == Some(h.id) {
                return Ok(());
            }
            (h.id, h.target.clone())
        };
        first_seen.get_or_insert(id);
        match target.upgrade() {
            Some(t) => {
                let trigger = if exiting {
                    Trigger::ApiExit
                } else {
                    Trigger::ApiEntry
                };
                if let Err(e) = t.end_of_tick(trigger) {
                    // A failed file leaves the queue (it refuses work until closed, E-32).
                    remove(id);
                    return Err(e);
                }
            }
            None => {
                remove(id);
            }
        }
    }
}

// ----- the API guard -----

// The process-wide re-entrant API lock. Invariants: `OWNER` is 0 or the token of the one
// thread holding the lock, and that thread's `HELD` is its re-entry count (every other thread's
// `HELD` is 0); `WAITERS` counts threads between announcing a wait and leaving it. An
// uncontended acquire is one compare-and-swap and its release one store plus one load; a
// release that sees a waiter notifies under `WAIT`, which a waiter holds from its last try
// until it sleeps, so no wake-up is lost (the 50 ms timeout is a second guard).
static OWNER: AtomicU64 = AtomicU64::new(0);
static WAITERS: AtomicUsize = AtomicUsize::new(0);
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);
static WAIT: Mutex<()> = Mutex::new(());
static FREED: Condvar = Condvar::new();

thread_local! {
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    static HELD: Cell<usize> = const { Cell::new(0) };
    /// This thread's lock token (0: not assigned yet).
    static TOKEN: Cell<u64> = const { Cell::new(0) };
}

fn token() -> u64 {
    TOKEN.with(|t| {
        if t.get() == 0 {
            t.set(NEXT_TOKEN.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    })
}

/// Held for the duration of one public API call; see [`enter`].
#[derive(Debug)]
#[must_use = "call exit() so the exit check runs and its errors are reported"]
pub struct ApiGuard {
    outer: bool,
    locked: bool,
    done: bool,
}

/// The current API depth of this thread.
pub fn depth() -> usize {
    DEPTH.with(Cell::get)
}

/// Enters a public API call. On the outermost entry (depth 0 → 1) with a VFD SWMR file open,
/// takes the process-wide API lock and runs the entry check (any expired end of tick).
pub fn enter() -> Result<ApiGuard> {
    let d = DEPTH.with(|d| {
        let v = d.get() + 1;
        d.set(v);
        v
    });
    let outer = d == 1;
    let mut guard = ApiGuard {
        outer,
        locked: false,
        done: false,
    };
    if outer && !is_empty() {
        acquire();
        guard.locked = true;
        check(false)?;
    }
    Ok(guard)
}

/// Enters a public API call like [`enter`] but without the entry check: for the explicit
/// end-of-tick call, whose own end of tick must be the only one for an expired tick
/// (SWMR-023). The exit check still runs.
pub fn enter_quiet() -> ApiGuard {
    let d = DEPTH.with(|d| {
        let v = d.get() + 1;
        d.set(v);
        v
    });
    let outer = d == 1;
    let mut guard = ApiGuard {
        outer,
        locked: false,
        done: false,
    };
    if outer && !is_empty() {
        acquire();
        guard.locked = true;
    }
    guard
}

fn acquire() {
    if HELD.with(Cell::get) > 0 {
        HELD.with(|h| h.set(h.get() + 1));
        return;
    }
    let me = token();
    let take = || {
        OWNER
            .compare_exchange(0, me, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    };
    loop {
        if take() {
            break;
        }
        WAITERS.fetch_add(1, Ordering::SeqCst);
        let g = WAIT.lock().unwrap_or_else(|p| p.into_inner());
        let got = take();
        if !got {
            let _ = FREED
                .wait_timeout(g, Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner());
        }
        WAITERS.fetch_sub(1, Ordering::SeqCst);
        if got {
            break;
        }
    }
    HELD.with(|h| h.set(1));
}

fn release() {
    let held = HELD.with(Cell::get);
    if held > 1 {
        HELD.with(|h| h.set(held - 1));
        return;
    }
    if held == 0 {
        return;
    }
    HELD.with(|h| h.set(0));
    OWNER.store(0, Ordering::SeqCst);
    // Waking costs a system call: only when someone waits.
    if WAITERS.load(Ordering::SeqCst) > 0 {
        let _g = WAIT.lock().unwrap_or_else(|p| p.into_inner());
        FREED.notify_one();
    }
}

/// Runs `f`, a wait that touches no file's state (a reader polling for its files to appear),
/// with this thread's hold of the API lock let go, so that the other threads' calls (the writer
/// the reader waits for, in the same process) go on meanwhile; the hold is taken again after.
pub fn wait_outside_api<T>(f: impl FnOnce() -> T) -> T {
    let held = HELD.with(Cell::get);
    if held == 0 {
        return f();
    }
    HELD.with(|h| h.set(1));
    release();
    let out = f();
    acquire();
    HELD.with(|h| h.set(held));
    out
}

impl ApiGuard {
    /// Leaves the call: on the outermost exit runs the exit check (writers only), reporting
    /// its error (it runs here rather than in `Drop` so errors reach the caller).
    pub fn exit(mut self) -> Result<()> {
        self.done = true;
        let r = if self.outer && !is_empty() {
            check(true)
        } else {
            Ok(())
        };
        self.leave();
        r
    }

    fn leave(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        if self.locked {
            self.locked = false;
            release();
        }
    }
}

impl Drop for ApiGuard {
    fn drop(&mut self) {
        if !self.done {
            self.done = true;
            self.leave();
        }
    }
}

/// Runs `f` as one public API call: entry check, `f`, exit check (OQ-11). The call's own error
/// wins over an exit-check error.
pub fn api<T, E: From<crate::SwmrError>>(
    f: impl FnOnce() -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    let g = enter()?;
    let out = f();
    let exit = g.exit();
    let v = out?;
    exit?;
    Ok(v)
}
