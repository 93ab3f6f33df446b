//! Metadata loads of different objects by different threads overlap (issue 11): the metadata
//! cache's lock is not held during a load's I/O. A storage decorator makes every read, once
//! armed, wait until a read of the other thread has arrived too; if a load held the cache's lock
//! while reading, the other thread could never reach its read and the first would give up
//! waiting. The assertions are on what the decorator saw (how many reads were inside it at
//! once, whether any gave up), not on time; the wait's limit only keeps a broken build from
//! hanging.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use h5::FileAccess;
use h5_io::testkit::{Hooks, Intercept};
use h5_io::{MemoryStorage, Storage};

/// What the armed storage saw.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    /// Reads that entered while armed.
    arrived: usize,
    /// Reads inside `read_at` now.
    inside: usize,
    /// Most reads inside at once.
    most_inside: usize,
    /// Reads that stopped waiting for a partner.
    gave_up: usize,
}

/// Hooks of a memory storage whose reads, once armed, meet in pairs: a read waits until another
/// read is inside too (or the safety limit passes, counted as giving up).
#[derive(Debug, Default)]
struct Rendezvous {
    armed: AtomicBool,
    seen: Mutex<Seen>,
    changed: Condvar,
}

impl Rendezvous {
    fn meet(&self) {
        let mut s = self.seen.lock().unwrap();
        s.arrived += 1;
        s.inside += 1;
        s.most_inside = s.most_inside.max(s.inside);
        self.changed.notify_all();
        let (mut s, timeout) = self
            .changed
            .wait_timeout_while(s, Duration::from_secs(30), |s| s.most_inside < 2)
            .unwrap();
        if timeout.timed_out() {
            s.gave_up += 1;
        }
        s.inside -= 1;
    }
}

impl Hooks for Rendezvous {
    fn read_at(&self, inner: &dyn Storage, offset: u64, buf: &mut [u8]) -> h5_io::Result<()> {
        if self.armed.load(Ordering::SeqCst) {
            self.meet();
        }
        inner.read_at(offset, buf)
    }
}

#[test]
fn loads_of_different_objects_overlap() {
    let storage = Arc::new(Intercept::new(MemoryStorage::new(), Rendezvous::default()));
    {
        let f = h5::File::create_in(
            storage.clone(),
            &FileAccess::default(),
            &h5::CreateOptions::default(),
            None,
        )
        .unwrap();
        let root = f.root().unwrap();
        for name in ["a", "b"] {
            root.new_dataset::<i32>()
                .create_with_data(name, &[1, 2, 3])
                .unwrap();
        }
        f.close().unwrap();
    }
    let f = h5::File::from_storage(storage.clone(), &FileAccess::default(), None).unwrap();
    // The root group is loaded before arming: each thread's first read is its own dataset's
    // object header.
    assert_eq!(f.member_names().unwrap(), ["a", "b"]);
    storage.hooks().armed.store(true, Ordering::SeqCst);
    let shapes: Vec<Vec<usize>> = std::thread::scope(|s| {
        let threads: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|name| {
                let f = &f;
                s.spawn(move || f.dataset(name).unwrap().shape())
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    storage.hooks().armed.store(false, Ordering::SeqCst);
    assert_eq!(shapes, [vec![3], vec![3]]);
    let seen = *storage.hooks().seen.lock().unwrap();
    assert!(seen.arrived >= 2, "{seen:?}");
    assert_eq!(
        seen.most_inside, 2,
        "the two loads never read at once: {seen:?}"
    );
    assert_eq!(
        seen.gave_up, 0,
        "a load waited for the other in vain: {seen:?}"
    );
    // Both headers were one miss each, counted once.
    let stats = f.metadata_cache_stats().unwrap();
    assert!(stats.total_misses >= 2, "{stats:?}");
}
