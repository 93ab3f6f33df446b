//! The API guard's process-wide lock (OQ-11): while a VFD SWMR file is open, public API calls of
//! different threads never overlap, a thread's nested calls do not wait for themselves, and a
//! thread waiting for the lock gets it once the holder leaves. Its own test binary: the queue is
//! process-wide.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use h5_swmr::Result;
use h5_swmr::queue::{self, TickTarget, Trigger};

/// A file whose end of tick is never due.
struct Idle;

impl TickTarget for Idle {
    fn end_of_tick(&self, _trigger: Trigger) -> Result<()> {
        Ok(())
    }
}

#[test]
fn api_calls_of_threads_never_overlap() {
    let file: Arc<dyn TickTarget> = Arc::new(Idle);
    let weak: Weak<dyn TickTarget> = Arc::downgrade(&file);
    let id = queue::register(weak, true, 1, Instant::now() + Duration::from_secs(3600));
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (inside, overlaps, calls) = (inside.clone(), overlaps.clone(), calls.clone());
            std::thread::spawn(move || {
                for i in 0..2000 {
                    let outer = queue::enter().unwrap();
                    if inside.swap(true, Ordering::SeqCst) {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    // A nested call of the same thread neither waits nor releases the lock.
                    let nested = queue::enter().unwrap();
                    nested.exit().unwrap();
                    if i % 64 == 0 {
                        // Hold the lock across a sleep so that others queue up as waiters.
                        std::thread::sleep(Duration::from_micros(200));
                    } else {
                        std::thread::yield_now();
                    }
                    assert!(
                        inside.load(Ordering::SeqCst),
                        "still held after the nested exit"
                    );
                    inside.store(false, Ordering::SeqCst);
                    calls.fetch_add(1, Ordering::SeqCst);
                    outer.exit().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    assert_eq!(calls.load(Ordering::SeqCst), 4 * 2000);
    assert_eq!(queue::depth(), 0);
    // Released: a new thread takes it (a leaked lock would leave it waiting forever).
    std::thread::spawn(|| queue::enter().unwrap().exit().unwrap())
        .join()
        .unwrap();
    queue::remove(id);
}

/// A wait inside a call (a reader polling for its files) lets the other threads' calls run,
/// and the waiting call holds the lock again afterwards, nested depth and all.
#[test]
fn a_wait_outside_the_api_lets_other_calls_run() {
    let file: Arc<dyn TickTarget> = Arc::new(Idle);
    let weak: Weak<dyn TickTarget> = Arc::downgrade(&file);
    let id = queue::register(weak, true, 1, Instant::now() + Duration::from_secs(3600));
    let outer = queue::enter().unwrap();
    let nested = queue::enter().unwrap();
    let other_ran = queue::wait_outside_api(|| {
        std::thread::spawn(|| queue::enter().unwrap().exit().unwrap())
            .join()
            .is_ok()
    });
    assert!(other_ran);
    // Held again: another thread's call waits until both levels have left.
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let g = queue::enter().unwrap();
        tx.send(()).unwrap();
        g.exit().unwrap();
    });
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    nested.exit().unwrap();
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    outer.exit().unwrap();
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    waiter.join().unwrap();
    queue::remove(id);
}
