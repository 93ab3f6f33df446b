//! Conformance suite for [`Storage`] implementations (cargo feature `testkit`).
//!
//! [`run_conformance`] runs every check in [`CHECKS`] on a fresh storage from
//! the factory and panics, naming the check, on the first violation of the
//! contract documented on [`Storage`].
//!
//! ```
//! use h5_io::{MemoryStorage, Metrics, Storage};
//!
//! h5_io::testkit::run_conformance(&|| Box::new(Metrics::new(MemoryStorage::new())) as Box<dyn Storage>);
//! ```

use std::panic::{self, AssertUnwindSafe};

use crate::{Error, LockMode, Storage, StorageExt};

/// A named contract check, run on a fresh, empty storage.
pub type Check = (&'static str, fn(&dyn Storage));

/// Every check run by [`run_conformance`], in order.
pub const CHECKS: &[Check] = &[
    ("empty_has_len_zero", empty_has_len_zero),
    ("write_read_round_trip", write_read_round_trip),
    (
        "write_past_end_zero_fills_gap",
        write_past_end_zero_fills_gap,
    ),
    (
        "read_past_end_is_out_of_bounds",
        read_past_end_is_out_of_bounds,
    ),
    (
        "read_crossing_end_is_out_of_bounds",
        read_crossing_end_is_out_of_bounds,
    ),
    ("zero_length_io", zero_length_io),
    ("set_len_shrinks_and_grows", set_len_shrinks_and_grows),
    ("sync_succeeds", sync_succeeds),
    ("address_overflow", address_overflow),
    ("overlapping_writes_last_wins", overlapping_writes_last_wins),
    ("large_write_read", large_write_read),
    ("lock_shared_unlock_exclusive", lock_shared_unlock_exclusive),
    ("read_at_zero_fill", read_at_zero_fill),
    ("read_vec_checks_length_first", read_vec_checks_length_first),
];

/// Run every check in [`CHECKS`], each on a new storage from `make`.
///
/// `make` must return an empty storage each time. Panics with
/// `storage conformance check `NAME` failed: ...` on the first failure.
pub fn run_conformance(make: &dyn Fn() -> Box<dyn Storage>) {
    for (name, check) in CHECKS {
        let storage = make();
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| check(&*storage)));
        if let Err(payload) = outcome {
            let msg = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("(non-string panic payload)");
            panic!("storage conformance check `{name}` failed: {msg}");
        }
    }
}

fn ok<T>(r: crate::Result<T>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: unexpected error: {e:?}"))
}

fn len(s: &dyn Storage) -> u64 {
    ok(s.len(), "len()")
}

fn read(s: &dyn Storage, offset: u64, n: usize) -> Vec<u8> {
    let mut buf = vec![0xA5; n];
    ok(
        s.read_at(offset, &mut buf),
        &format!("read_at({offset}, {n} bytes)"),
    );
    buf
}

fn write(s: &dyn Storage, offset: u64, data: &[u8]) {
    ok(
        s.write_at(offset, data),
        &format!("write_at({offset}, {} bytes)", data.len()),
    );
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Assert that reading `n` bytes at `offset` is `OutOfBounds` with the exact
/// fields and leaves the buffer untouched.
fn assert_out_of_bounds(s: &dyn Storage, offset: u64, n: usize) {
    let file_len = len(s);
    let mut buf = vec![0xA5; n];
    match s.read_at(offset, &mut buf) {
        Err(Error::OutOfBounds {
            offset: o,
            len: l,
            file_len: f,
        }) => {
            assert_eq!(
                (o, l, f),
                (offset, n as u64, file_len),
                "OutOfBounds fields for read of {n} bytes at {offset}"
            );
        }
        other => panic!(
            "read of {n} bytes at {offset} (len {file_len}): expected OutOfBounds, got {other:?}"
        ),
    }
    assert!(
        buf.iter().all(|&b| b == 0xA5),
        "failed read of {n} bytes at {offset} modified the buffer"
    );
}

/// A new storage has length 0.
pub fn empty_has_len_zero(s: &dyn Storage) {
    assert_eq!(len(s), 0, "new storage must be empty");
    assert!(ok(s.is_empty(), "is_empty()"), "is_empty() on new storage");
}

/// Written bytes read back unchanged, at the start and at an unaligned offset.
pub fn write_read_round_trip(s: &dyn Storage) {
    let a = pattern(100, 1);
    write(s, 0, &a);
    assert_eq!(len(s), 100);
    assert_eq!(read(s, 0, 100), a, "read back at 0");
    assert_eq!(read(s, 17, 20), a[17..37], "read back a sub-range");
    let b = pattern(33, 2);
    write(s, 101, &b);
    assert_eq!(len(s), 134);
    assert_eq!(read(s, 101, 33), b, "read back at 101");
    assert!(!ok(s.is_empty(), "is_empty()"));
}

/// A write past the end extends the storage and zero-fills the gap.
pub fn write_past_end_zero_fills_gap(s: &dyn Storage) {
    write(s, 0, &[1, 2, 3]);
    write(s, 1000, &[9; 24]);
    assert_eq!(
        len(s),
        1024,
        "write at 1000 of 24 bytes must extend to 1024"
    );
    let all = read(s, 0, 1024);
    assert_eq!(all[..3], [1, 2, 3], "bytes before the gap");
    assert!(
        all[3..1000].iter().all(|&b| b == 0),
        "gap must read as zeros"
    );
    assert_eq!(all[1000..], [9; 24], "written bytes after the gap");
    // A write inside the storage does not change its length.
    write(s, 10, &[5; 10]);
    assert_eq!(len(s), 1024, "write inside must not change len");
}

/// A read starting at or past the end fails with `OutOfBounds` and reads nothing.
pub fn read_past_end_is_out_of_bounds(s: &dyn Storage) {
    assert_out_of_bounds(s, 0, 1);
    write(s, 0, &[7; 64]);
    assert_out_of_bounds(s, 64, 1);
    assert_out_of_bounds(s, 65, 8);
    assert_out_of_bounds(s, 1 << 40, 4096);
}

/// A read that starts inside but crosses the end fails with `OutOfBounds` and reads nothing.
pub fn read_crossing_end_is_out_of_bounds(s: &dyn Storage) {
    write(s, 0, &[7; 64]);
    assert_out_of_bounds(s, 60, 5);
    assert_out_of_bounds(s, 0, 65);
    assert_eq!(
        read(s, 60, 4),
        [7; 4],
        "read ending exactly at len succeeds"
    );
}

/// Zero-length reads and writes at any offset `<= len` succeed and change nothing.
pub fn zero_length_io(s: &dyn Storage) {
    for offset in [0, 1, 5, 10] {
        ok(s.read_at(offset.min(len(s)), &mut []), "zero-length read");
    }
    ok(
        s.write_at(0, &[]),
        "zero-length write at 0 on empty storage",
    );
    assert_eq!(len(s), 0, "zero-length write must not grow the storage");
    write(s, 0, &pattern(10, 3));
    for offset in [0, 1, 5, 10] {
        ok(
            s.read_at(offset, &mut []),
            &format!("zero-length read at {offset}"),
        );
        ok(
            s.write_at(offset, &[]),
            &format!("zero-length write at {offset}"),
        );
    }
    assert_eq!(len(s), 10);
    assert_eq!(read(s, 0, 10), pattern(10, 3));
}

/// `set_len` truncates, then grows with zeros; earlier bytes are kept.
pub fn set_len_shrinks_and_grows(s: &dyn Storage) {
    write(s, 0, &[0xCC; 100]);
    ok(s.set_len(40), "set_len(40)");
    assert_eq!(len(s), 40, "after shrinking");
    assert_out_of_bounds(s, 40, 1);
    ok(s.set_len(200), "set_len(200)");
    assert_eq!(len(s), 200, "after growing");
    let all = read(s, 0, 200);
    assert_eq!(all[..40], [0xCC; 40], "bytes kept by truncation");
    assert!(
        all[40..].iter().all(|&b| b == 0),
        "growth after truncation must read as zeros"
    );
    ok(s.set_len(200), "set_len to the current length");
    ok(s.set_len(0), "set_len(0)");
    assert_eq!(len(s), 0);
}

/// `sync` succeeds on an empty and on a written storage.
pub fn sync_succeeds(s: &dyn Storage) {
    ok(s.sync(), "sync on empty storage");
    write(s, 0, &[1; 10]);
    ok(s.sync(), "sync after write");
    assert_eq!(read(s, 0, 10), [1; 10]);
}

/// `offset + len` overflowing `u64` is `AddressOverflow`, for reads, writes
/// and the `StorageExt` reads.
pub fn address_overflow(s: &dyn Storage) {
    write(s, 0, &[1; 8]);
    let cases: [(u64, usize); 3] = [(u64::MAX, 1), (u64::MAX - 3, 8), (1, usize::MAX)];
    for (offset, n) in cases {
        if n <= 8 {
            let mut buf = vec![0; n];
            let r = s.read_at(offset, &mut buf);
            assert!(
                matches!(r, Err(Error::AddressOverflow { offset: o, len: l }) if o == offset && l == n as u64),
                "read_at({offset}, {n} bytes): expected AddressOverflow, got {r:?}"
            );
            let r = s.write_at(offset, &buf);
            assert!(
                matches!(r, Err(Error::AddressOverflow { offset: o, len: l }) if o == offset && l == n as u64),
                "write_at({offset}, {n} bytes): expected AddressOverflow, got {r:?}"
            );
            let r = s.read_at_zero_fill(offset, &mut buf);
            assert!(
                matches!(r, Err(Error::AddressOverflow { .. })),
                "read_at_zero_fill({offset}, {n} bytes): expected AddressOverflow, got {r:?}"
            );
        }
        let r = s.read_vec(offset, n);
        assert!(
            matches!(r, Err(Error::AddressOverflow { .. })),
            "read_vec({offset}, {n}): expected AddressOverflow, got {r:?}"
        );
    }
    assert_eq!(len(s), 8, "failed writes must not change the storage");
    assert_eq!(read(s, 0, 8), [1; 8]);
}

/// Overlapping writes: the later write wins where they overlap.
pub fn overlapping_writes_last_wins(s: &dyn Storage) {
    write(s, 0, &[1; 16]);
    write(s, 4, &[2; 8]);
    write(s, 10, &[3; 10]);
    let mut expect = vec![1u8; 20];
    expect[4..12].fill(2);
    expect[10..20].fill(3);
    assert_eq!(len(s), 20);
    assert_eq!(read(s, 0, 20), expect);
}

/// A 4 MiB write at an unaligned offset reads back intact.
pub fn large_write_read(s: &dyn Storage) {
    const N: usize = 4 << 20;
    let data = pattern(N, 7);
    write(s, 3, &data);
    assert_eq!(len(s), N as u64 + 3);
    let back = read(s, 3, N);
    assert!(
        back == data,
        "4 MiB read back differs from what was written"
    );
    assert_eq!(read(s, 0, 3), [0; 3]);
}

/// On one handle: shared lock, unlock, exclusive lock, unlock; re-locking in
/// the held mode and unlocking without a lock succeed.
pub fn lock_shared_unlock_exclusive(s: &dyn Storage) {
    ok(s.unlock(), "unlock without a lock");
    ok(s.lock(LockMode::Shared), "lock(Shared)");
    ok(s.lock(LockMode::Shared), "lock(Shared) again");
    ok(s.unlock(), "unlock after Shared");
    ok(s.lock(LockMode::Exclusive), "lock(Exclusive) after unlock");
    ok(s.lock(LockMode::Exclusive), "lock(Exclusive) again");
    write(s, 0, &[1]);
    ok(s.unlock(), "unlock after Exclusive");
    ok(s.unlock(), "second unlock");
}

/// `read_at_zero_fill` returns stored bytes and zeros past the end.
pub fn read_at_zero_fill(s: &dyn Storage) {
    let mut buf = [0xA5u8; 8];
    ok(
        s.read_at_zero_fill(100, &mut buf),
        "zero-fill read on empty storage",
    );
    assert_eq!(buf, [0; 8]);
    write(s, 0, &[4; 10]);
    let mut buf = [0xA5u8; 8];
    ok(
        s.read_at_zero_fill(6, &mut buf),
        "zero-fill read crossing the end",
    );
    assert_eq!(buf, [4, 4, 4, 4, 0, 0, 0, 0]);
    let mut buf = [0xA5u8; 4];
    ok(s.read_at_zero_fill(2, &mut buf), "zero-fill read inside");
    assert_eq!(buf, [4; 4]);
    assert_eq!(len(s), 10, "zero-fill reads must not grow the storage");
}

/// `read_vec` checks the range against the length before allocating.
pub fn read_vec_checks_length_first(s: &dyn Storage) {
    write(s, 0, &pattern(50, 9));
    assert_eq!(
        ok(s.read_vec(10, 20), "read_vec(10, 20)"),
        pattern(50, 9)[10..30]
    );
    assert_eq!(ok(s.read_vec(50, 0), "read_vec(50, 0)"), Vec::<u8>::new());
    // A corrupt length must not be allocated.
    let huge = usize::MAX / 2;
    match s.read_vec(0, huge) {
        Err(Error::OutOfBounds {
            offset: 0,
            len,
            file_len: 50,
        }) if len == huge as u64 => {}
        other => panic!("read_vec(0, usize::MAX / 2): expected OutOfBounds, got {other:?}"),
    }
    assert!(matches!(s.read_vec(45, 6), Err(Error::OutOfBounds { .. })));
}
