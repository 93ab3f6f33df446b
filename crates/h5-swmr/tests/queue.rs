//! The end-of-tick queue and the API guard (SWMR-146's queue item). The queue is process-wide,
//! so everything runs in one test, in order.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use h5_swmr::queue::{self, EntryId, TickTarget, Trigger};
use h5_swmr::{Result, SwmrError};

struct Fake {
    id: Mutex<EntryId>,
    tick: AtomicU64,
    len: Duration,
    calls: Mutex<Vec<Trigger>>,
    fail: bool,
}

impl TickTarget for Fake {
    fn end_of_tick(&self, trigger: Trigger) -> Result<()> {
        self.calls.lock().unwrap().push(trigger);
        if self.fail {
            return Err(SwmrError::Failed("injected".into()));
        }
        let t = self.tick.fetch_add(1, Ordering::SeqCst) + 1;
        queue::update(*self.id.lock().unwrap(), t, Instant::now() + self.len);
        Ok(())
    }
}

fn fake(len: Duration, fail: bool) -> Arc<Fake> {
    Arc::new(Fake {
        id: Mutex::new(0),
        tick: AtomicU64::new(1),
        len,
        calls: Mutex::new(Vec::new()),
        fail,
    })
}

fn add(f: &Arc<Fake>, writer: bool, deadline: Instant) -> EntryId {
    let weak: Weak<dyn TickTarget> = Arc::downgrade(&(f.clone() as Arc<dyn TickTarget>));
    let id = queue::register(weak, writer, 1, deadline);
    *f.id.lock().unwrap() = id;
    id
}

fn sorted() -> bool {
    let s = queue::snapshot();
    s.windows(2).all(|w| w[0].3 <= w[1].3)
}

fn head_matches() -> bool {
    match (queue::snapshot().first(), queue::head()) {
        (None, None) => true,
        (Some(h), Some((w, n))) => h.1 == w && queue::stamp(h.3) == n,
        _ => false,
    }
}

// SWMR-030, SWMR-031, SWMR-032, SWMR-033, SWMR-035, SWMR-036, SWMR-037, SWMR-038, SWMR-039.
#[test]
fn swmr_030_to_039_queue_and_guard() {
    assert!(queue::is_empty());
    assert!(queue::head().is_none());
    // An empty queue: nothing to do, and no clock read (SWMR-039: an emptiness test only).
    let reads = queue::clock_reads();
    for _ in 0..10_000 {
        queue::check(false).unwrap();
        queue::api(|| Ok::<(), SwmrError>(())).unwrap();
    }
    assert_eq!(queue::clock_reads(), reads);
    // One file whose deadline is far ahead: one read of the cheap clock per check and none of
    // the precise one (where the platform has a coarse clock; elsewhere one precise read).
    let far = fake(Duration::from_secs(1000), false);
    let ifar = add(&far, true, Instant::now() + Duration::from_secs(100));
    let (coarse, precise) = queue::clock_reads();
    for _ in 0..1000 {
        queue::check(false).unwrap();
    }
    let (coarse2, precise2) = queue::clock_reads();
    if cfg!(target_os = "linux") {
        assert_eq!((coarse2 - coarse, precise2 - precise), (1000, 0));
    } else {
        assert_eq!(precise2 - precise, 1000);
    }
    assert!(far.calls.lock().unwrap().is_empty());
    queue::remove(ifar);
    assert!(queue::is_empty());

    // Sorted insertion from the tail; equal deadlines in arrival order (SWMR-031).
    let base = Instant::now() + Duration::from_secs(100);
    let a = fake(Duration::from_secs(1000), false);
    let b = fake(Duration::from_secs(1000), false);
    let c = fake(Duration::from_secs(1000), false);
    let ia = add(&a, true, base + Duration::from_secs(5));
    let ib = add(&b, true, base);
    let ic = add(&c, false, base + Duration::from_secs(5));
    assert_eq!(queue::snapshot().len(), 3, "SWMR-030: one entry per file");
    let order: Vec<EntryId> = queue::snapshot().iter().map(|e| e.0).collect();
    assert_eq!(order, vec![ib, ia, ic]);
    assert!(sorted() && head_matches());
    queue::remove(ib);
    assert!(
        head_matches(),
        "SWMR-032: head cache follows a head removal"
    );
    assert!(queue::head().unwrap().0);
    queue::remove(ia);
    queue::remove(ic);
    assert!(queue::is_empty() && head_matches());

    // Two expired writers: one check runs both, once each (SWMR-036); an EOT re-queues its
    // entry with a later deadline, still sorted (SWMR-033).
    let past = Instant::now() - Duration::from_millis(300);
    let w1 = fake(Duration::from_secs(60), false);
    let w2 = fake(Duration::from_secs(60), false);
    let i1 = add(&w1, true, past);
    let i2 = add(&w2, true, past + Duration::from_millis(1));
    queue::check(false).unwrap();
    assert_eq!(w1.calls.lock().unwrap().as_slice(), &[Trigger::ApiEntry]);
    assert_eq!(w2.calls.lock().unwrap().as_slice(), &[Trigger::ApiEntry]);
    assert!(sorted() && head_matches());
    let snap = queue::snapshot();
    assert!(
        snap.iter()
            .all(|e| e.3 > Instant::now() + Duration::from_secs(50))
    );
    assert_eq!(
        snap.iter().find(|e| e.0 == i1).unwrap().2,
        2,
        "new tick recorded"
    );
    queue::remove(i1);
    queue::remove(i2);

    // On exit a reader at the head stops the check, even with a writer behind it (SWMR-035).
    let r = fake(Duration::from_secs(60), false);
    let w = fake(Duration::from_secs(60), false);
    let ir = add(&r, false, past);
    let iw = add(&w, true, past + Duration::from_millis(1));
    queue::check(true).unwrap();
    assert!(r.calls.lock().unwrap().is_empty() && w.calls.lock().unwrap().is_empty());
    queue::check(false).unwrap();
    assert_eq!(r.calls.lock().unwrap().len(), 1);
    assert_eq!(w.calls.lock().unwrap().len(), 1);
    queue::remove(ir);
    queue::remove(iw);

    // The guard: only the outermost call checks (SWMR-037); the exit check runs writer EOTs.
    let g = fake(Duration::from_secs(60), false);
    let ig = add(&g, true, Instant::now() + Duration::from_millis(150));
    let outer = queue::enter().unwrap();
    assert_eq!(queue::depth(), 1);
    std::thread::sleep(Duration::from_millis(200)); // the deadline passes inside the call
    let inner = queue::enter().unwrap();
    assert_eq!(queue::depth(), 2);
    inner.exit().unwrap();
    assert!(g.calls.lock().unwrap().is_empty(), "no check at depth 2");
    outer.exit().unwrap();
    assert_eq!(g.calls.lock().unwrap().as_slice(), &[Trigger::ApiExit]);
    assert_eq!(queue::depth(), 0);
    queue::remove(ig);

    // A deadline 10.9 s after a reference, checked 11.1 s after it: expired (SWMR-038 — whole
    // instants are compared, not seconds and nanoseconds apart).
    let reference = Instant::now() - Duration::from_millis(11_100);
    let d = fake(Duration::from_secs(60), false);
    let id = add(&d, true, reference + Duration::from_millis(10_900));
    queue::check(false).unwrap();
    assert_eq!(d.calls.lock().unwrap().len(), 1);
    queue::remove(id);

    // A failing end of tick fails the call and leaves the queue (SWMR-040, E-32).
    let bad = fake(Duration::from_secs(60), true);
    add(&bad, true, past);
    let err = queue::api(|| Ok::<(), SwmrError>(())).unwrap_err();
    assert!(err.to_string().contains("injected"));
    assert!(queue::is_empty());
    assert_eq!(queue::depth(), 0, "the guard unwinds on error");

    // A dropped file's entry is cleaned up by the next check.
    let gone = fake(Duration::from_secs(60), false);
    add(&gone, true, past);
    drop(gone);
    queue::check(false).unwrap();
    assert!(queue::is_empty());
}
