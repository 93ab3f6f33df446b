//! Runs the storage conformance suite on every backend and decorator.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use h5_io::testkit::run_conformance;
use h5_io::{
    CoalesceLimits, Coalescing, FaultInjection, FileOptions, FileStorage, Locking, Logging,
    MemoryStorage, Metrics, OpenMode, Sticky, Storage, WriteSegment,
};

/// The seven required `Storage` methods, forwarded to field `.0`.
macro_rules! forward_required {
    () => {
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> h5_io::Result<()> {
            self.0.read_at(offset, buf)
        }
        fn write_at(&self, offset: u64, data: &[u8]) -> h5_io::Result<()> {
            self.0.write_at(offset, data)
        }
        fn len(&self) -> h5_io::Result<u64> {
            self.0.len()
        }
        fn set_len(&self, len: u64) -> h5_io::Result<()> {
            self.0.set_len(len)
        }
        fn sync(&self) -> h5_io::Result<()> {
            self.0.sync()
        }
        fn lock(&self, mode: h5_io::LockMode) -> h5_io::Result<()> {
            self.0.lock(mode)
        }
        fn unlock(&self) -> h5_io::Result<()> {
            self.0.unlock()
        }
    };
}

/// Implements only the required methods, so the trait's looping default
/// `read_vectored`/`write_vectored` are used; they must conform too.
#[derive(Debug, Default)]
struct RequiredOnly(MemoryStorage);

impl Storage for RequiredOnly {
    forward_required!();
}

#[test]
fn default_vectored_methods() {
    run_conformance(&|| Box::new(RequiredOnly::default()));
}

#[test]
fn decorators_over_default_vectored_methods() {
    run_conformance(&|| {
        Box::new(Sticky::new(Metrics::new(FaultInjection::new(
            Logging::to_vec(RequiredOnly::default()),
        ))))
    });
}

#[test]
#[should_panic(
    expected = "storage conformance check `vectored_overlapping_writes_last_wins` failed"
)]
fn suite_catches_vector_writes_out_of_slice_order() {
    /// Writes vector segments sorted by offset, ignoring slice order.
    #[derive(Debug, Default)]
    struct SortsWrites(RequiredOnly);
    impl Storage for SortsWrites {
        forward_required!();
        fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> h5_io::Result<()> {
            let mut sorted = segments.to_vec();
            sorted.sort_by_key(|s| s.offset);
            self.0.write_vectored(&sorted)
        }
    }
    run_conformance(&|| Box::new(SortsWrites::default()));
}

#[test]
fn memory() {
    run_conformance(&|| Box::new(MemoryStorage::new()));
}

#[test]
fn file() {
    let dir = tempfile::tempdir().unwrap();
    let n = AtomicU64::new(0);
    run_conformance(&|| {
        let path = dir
            .path()
            .join(format!("c{}.bin", n.fetch_add(1, Ordering::Relaxed)));
        Box::new(FileStorage::open(path, OpenMode::CreateNew).unwrap())
    });
}

#[test]
fn file_locking_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let n = AtomicU64::new(0);
    run_conformance(&|| {
        let path = dir
            .path()
            .join(format!("c{}.bin", n.fetch_add(1, Ordering::Relaxed)));
        let opts = FileOptions {
            locking: Locking::Enabled,
            lock: None,
        };
        Box::new(FileStorage::open_with(path, OpenMode::Create, opts).unwrap())
    });
}

#[test]
fn journaled() {
    run_conformance(&|| {
        let (s, _) = h5_io::Journaled::open(
            MemoryStorage::new(),
            MemoryStorage::new(),
            h5_io::JournalOptions::default(),
        )
        .unwrap();
        Box::new(s)
    });
}

#[test]
fn journaled_over_committed_bytes() {
    // Every byte below 4096 is committed, so every write and cut is journaled first.
    run_conformance(&|| {
        let (s, _) = h5_io::Journaled::open(
            MemoryStorage::with_data(vec![0x5A; 4096]),
            MemoryStorage::new(),
            h5_io::JournalOptions { sync: true },
        )
        .unwrap();
        s.set_len(0).unwrap();
        Box::new(s)
    });
}

#[test]
fn metrics() {
    run_conformance(&|| Box::new(Metrics::new(MemoryStorage::new())));
}

#[test]
fn logging() {
    run_conformance(&|| Box::new(Logging::to_vec(MemoryStorage::new())));
}

#[test]
fn logging_to_writer() {
    run_conformance(&|| {
        Box::new(Logging::new(
            MemoryStorage::new(),
            Box::new(std::io::sink()),
        ))
    });
}

#[test]
fn sticky() {
    run_conformance(&|| Box::new(Sticky::new(MemoryStorage::new())));
}

#[test]
fn fault_injection_empty_plan() {
    run_conformance(&|| Box::new(FaultInjection::new(MemoryStorage::new())));
}

#[test]
fn arc_dyn() {
    run_conformance(&|| {
        let s: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        Box::new(s)
    });
}

#[test]
fn stacked_decorators_over_arc_dyn_file() {
    let dir = tempfile::tempdir().unwrap();
    let n = AtomicU64::new(0);
    run_conformance(&|| {
        let path = dir
            .path()
            .join(format!("c{}.bin", n.fetch_add(1, Ordering::Relaxed)));
        let file: Arc<dyn Storage> = Arc::new(FileStorage::open(path, OpenMode::Create).unwrap());
        Box::new(Sticky::new(Metrics::new(FaultInjection::new(
            Logging::to_vec(file),
        ))))
    });
}

#[test]
#[should_panic(expected = "storage conformance check `write_past_end_zero_fills_gap` failed")]
fn suite_catches_a_broken_storage() {
    /// Grows without zero-filling the gap.
    #[derive(Debug, Default)]
    struct Broken(MemoryStorage);
    impl Storage for Broken {
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> h5_io::Result<()> {
            self.0.read_at(offset, buf)
        }
        fn write_at(&self, offset: u64, data: &[u8]) -> h5_io::Result<()> {
            let len = self.0.len()?;
            if offset > len {
                self.0.write_at(len, &vec![0xFF; (offset - len) as usize])?;
            }
            self.0.write_at(offset, data)
        }
        fn len(&self) -> h5_io::Result<u64> {
            self.0.len()
        }
        fn set_len(&self, len: u64) -> h5_io::Result<()> {
            self.0.set_len(len)
        }
        fn sync(&self) -> h5_io::Result<()> {
            self.0.sync()
        }
        fn lock(&self, mode: h5_io::LockMode) -> h5_io::Result<()> {
            self.0.lock(mode)
        }
        fn unlock(&self) -> h5_io::Result<()> {
            self.0.unlock()
        }
    }
    run_conformance(&|| Box::new(Broken::default()));
}

#[test]
fn coalescing() {
    run_conformance(&|| Box::new(Coalescing::new(MemoryStorage::new())));
    // Limits small enough that the suite's writes pass through and pass the limits too.
    let limits = CoalesceLimits {
        pass_through: 8,
        max_held: 16,
        max_runs: 2,
    };
    run_conformance(&|| Box::new(Coalescing::with_limits(MemoryStorage::new(), limits)));
    run_conformance(&|| Box::new(Coalescing::new(RequiredOnly::default())));
}
