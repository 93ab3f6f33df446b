//! Test helpers for [`Storage`] implementations and their users (cargo feature `testkit`).
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
//!
//! [`Intercept`] wraps a storage so that a test watches or changes only the calls it names in
//! its [`Hooks`] (a read that waits at a barrier, a write that fails on demand, a log of every
//! write) and every other call goes to the inner storage unchanged.

use std::fmt;
use std::panic::{self, AssertUnwindSafe};

use crate::storage::check_segments;
use crate::{CommitPoint, Error, LockMode, ReadSegment, Result, Storage, StorageExt, WriteSegment};

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
    ("vectored_empty_is_a_no_op", vectored_empty_is_a_no_op),
    ("vectored_read_any_order", vectored_read_any_order),
    (
        "vectored_write_adjacent_and_scattered",
        vectored_write_adjacent_and_scattered,
    ),
    (
        "vectored_write_extends_and_zero_fills",
        vectored_write_extends_and_zero_fills,
    ),
    ("vectored_read_out_of_bounds", vectored_read_out_of_bounds),
    (
        "vectored_overlapping_writes_last_wins",
        vectored_overlapping_writes_last_wins,
    ),
    ("vectored_address_overflow", vectored_address_overflow),
    (
        "vectored_many_adjacent_segments",
        vectored_many_adjacent_segments,
    ),
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

/// What an [`Intercept`] does with the calls a test may watch or change.
///
/// Each method is given the inner storage and by default hands the call to it unchanged, so an
/// implementation overrides only what its test needs. The calls not listed here
/// ([`len`](Storage::len), [`lock`](Storage::lock), [`unlock`](Storage::unlock),
/// [`commit`](Storage::commit), [`journals_overwrites`](Storage::journals_overwrites)) always
/// go straight to the inner storage.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use h5_io::testkit::{Hooks, Intercept};
/// use h5_io::{MemoryStorage, Storage};
///
/// /// Counts reads.
/// #[derive(Debug, Default)]
/// struct Reads(AtomicUsize);
///
/// impl Hooks for Reads {
///     fn read_at(&self, inner: &dyn Storage, offset: u64, buf: &mut [u8]) -> h5_io::Result<()> {
///         self.0.fetch_add(1, Ordering::SeqCst);
///         inner.read_at(offset, buf)
///     }
/// }
///
/// let s = Intercept::new(MemoryStorage::new(), Reads::default());
/// s.write_at(0, b"abc").unwrap();
/// let mut buf = [0; 3];
/// s.read_at(0, &mut buf).unwrap();
/// assert_eq!((&buf, s.hooks().0.load(Ordering::SeqCst)), (b"abc", 1));
/// ```
pub trait Hooks: Send + Sync + fmt::Debug {
    /// [`Storage::read_at`]; by default `inner.read_at(offset, buf)`.
    fn read_at(&self, inner: &dyn Storage, offset: u64, buf: &mut [u8]) -> Result<()> {
        inner.read_at(offset, buf)
    }

    /// [`Storage::write_at`]; by default `inner.write_at(offset, data)`.
    fn write_at(&self, inner: &dyn Storage, offset: u64, data: &[u8]) -> Result<()> {
        inner.write_at(offset, data)
    }

    /// [`Storage::set_len`]; by default `inner.set_len(len)`.
    fn set_len(&self, inner: &dyn Storage, len: u64) -> Result<()> {
        inner.set_len(len)
    }

    /// [`Storage::sync`]; by default `inner.sync()`.
    fn sync(&self, inner: &dyn Storage) -> Result<()> {
        inner.sync()
    }

    /// [`Storage::read_vectored`]. By default, as [`Storage`]'s own default: every segment is
    /// checked for overflow, then read by one [`read_at`](Hooks::read_at) of this hook each, in
    /// slice order, so a hook on `read_at` sees every byte read. Override it to hand the inner
    /// storage the vectored call itself (when a test counts vectored reads below the hook).
    fn read_vectored(&self, inner: &dyn Storage, segments: &mut [ReadSegment<'_>]) -> Result<()> {
        check_segments(segments.iter().map(|s| (s.offset, s.buf.len())))?;
        for seg in segments.iter_mut() {
            self.read_at(inner, seg.offset, seg.buf)?;
        }
        Ok(())
    }

    /// [`Storage::write_vectored`]. By default, as [`Storage`]'s own default: every segment is
    /// checked for overflow, then written by one [`write_at`](Hooks::write_at) of this hook
    /// each, in slice order, stopping at the first error, so a hook on `write_at` sees every
    /// byte written. Override it to hand the inner storage the vectored call itself.
    fn write_vectored(&self, inner: &dyn Storage, segments: &[WriteSegment<'_>]) -> Result<()> {
        check_segments(segments.iter().map(|s| (s.offset, s.data.len())))?;
        for seg in segments {
            self.write_at(inner, seg.offset, seg.data)?;
        }
        Ok(())
    }
}

/// A storage decorator for tests: the calls of [`Hooks`] go to `hooks` (which by default hands
/// them to `inner` unchanged), every other call straight to `inner`.
///
/// A test keeps its state (flags, counters, barriers) in its hooks type and reaches it through
/// [`hooks`](Intercept::hooks) while the wrapper is shared as a storage.
#[derive(Debug, Default)]
pub struct Intercept<S, H> {
    inner: S,
    hooks: H,
}

impl<S, H> Intercept<S, H> {
    /// `inner` with `hooks` in front of it.
    pub fn new(inner: S, hooks: H) -> Self {
        Intercept { inner, hooks }
    }

    /// The hooks (and so the test's state kept in them).
    pub fn hooks(&self) -> &H {
        &self.hooks
    }

    /// The inner storage, for looking at it past the hooks.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

/// Every method is written out (the lint below), so none falls back to a [`Storage`] default
/// that would skip the hooks or the inner storage's own version.
#[deny(clippy::missing_trait_methods)]
impl<S: Storage, H: Hooks> Storage for Intercept<S, H> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.hooks.read_at(&self.inner, offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.hooks.write_at(&self.inner, offset, data)
    }
    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> Result<()> {
        self.hooks.set_len(&self.inner, len)
    }
    fn sync(&self) -> Result<()> {
        self.hooks.sync(&self.inner)
    }
    fn lock(&self, mode: LockMode) -> Result<()> {
        self.inner.lock(mode)
    }
    fn unlock(&self) -> Result<()> {
        self.inner.unlock()
    }
    fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> Result<()> {
        self.hooks.read_vectored(&self.inner, segments)
    }
    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> Result<()> {
        self.hooks.write_vectored(&self.inner, segments)
    }
    fn commit(&self, point: &CommitPoint) -> Result<()> {
        self.inner.commit(point)
    }
    fn journals_overwrites(&self) -> bool {
        self.inner.journals_overwrites()
    }
}

fn ok<T>(r: Result<T>, what: &str) -> T {
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
/// fields (the buffer's contents are then unspecified).
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

/// A read starting at or past the end fails with `OutOfBounds`.
pub fn read_past_end_is_out_of_bounds(s: &dyn Storage) {
    assert_out_of_bounds(s, 0, 1);
    write(s, 0, &[7; 64]);
    assert_out_of_bounds(s, 64, 1);
    assert_out_of_bounds(s, 65, 8);
    assert_out_of_bounds(s, 1 << 40, 4096);
}

/// A read that starts inside but crosses the end fails with `OutOfBounds`.
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

/// A deterministic permutation of `0..n` (xorshift-driven Fisher-Yates), so
/// the checks need no random-number dependency.
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = seed | 1;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

/// Read `extents` (`(offset, len)`) with one `read_vectored` call, one buffer per extent.
fn read_vectored(s: &dyn Storage, extents: &[(u64, usize)]) -> Vec<Vec<u8>> {
    let mut bufs: Vec<Vec<u8>> = extents.iter().map(|&(_, n)| vec![0xA5; n]).collect();
    let mut segs: Vec<ReadSegment<'_>> = extents
        .iter()
        .zip(bufs.iter_mut())
        .map(|(&(offset, _), buf)| ReadSegment::new(offset, buf))
        .collect();
    ok(
        s.read_vectored(&mut segs),
        &format!("read_vectored({extents:?})"),
    );
    bufs
}

/// Write `(offset, data)` pairs with one `write_vectored` call.
fn write_vectored(s: &dyn Storage, parts: &[(u64, Vec<u8>)]) {
    let segs: Vec<WriteSegment<'_>> = parts
        .iter()
        .map(|(offset, data)| WriteSegment::new(*offset, data))
        .collect();
    let extents: Vec<(u64, usize)> = parts.iter().map(|(o, d)| (*o, d.len())).collect();
    ok(
        s.write_vectored(&segs),
        &format!("write_vectored({extents:?})"),
    );
}

/// Empty slices, and slices of zero-length segments, succeed and change nothing.
pub fn vectored_empty_is_a_no_op(s: &dyn Storage) {
    ok(
        s.read_vectored(&mut []),
        "read_vectored(&mut []) on empty storage",
    );
    ok(
        s.write_vectored(&[]),
        "write_vectored(&[]) on empty storage",
    );
    assert_eq!(len(s), 0, "an empty vector write must not grow the storage");
    write(s, 0, &pattern(10, 4));
    ok(s.read_vectored(&mut []), "read_vectored(&mut [])");
    ok(s.write_vectored(&[]), "write_vectored(&[])");
    // Zero-length segments behave like zero-length single calls.
    write_vectored(s, &[(0, vec![]), (5, vec![]), (1000, vec![])]);
    assert_eq!(
        len(s),
        10,
        "zero-length write segments must not grow the storage"
    );
    let bufs = read_vectored(s, &[(10, 0), (0, 0), (4, 0)]);
    assert!(bufs.iter().all(Vec::is_empty));
    assert_eq!(read(s, 0, 10), pattern(10, 4));
}

/// Vector reads return the right bytes for segments in any order: scattered,
/// adjacent, overlapping, repeated, unaligned.
pub fn vectored_read_any_order(s: &dyn Storage) {
    let data = pattern(4096, 5);
    write(s, 0, &data);
    let mut extents: Vec<(u64, usize)> = vec![
        (0, 16),
        (16, 16),   // adjacent to the previous one
        (32, 100),  // and to that one
        (1000, 1),  // scattered
        (4000, 96), // ends exactly at len
        (500, 300),
        (600, 50), // inside the previous one
        (600, 50), // repeated
        (4095, 1),
        (77, 0),
    ];
    // Eight adjacent 64-byte segments, to be read shuffled.
    extents.extend((0..8).map(|k| (2048 + 64 * k, 64)));
    for seed in [1, 2, 3] {
        let order = shuffled(extents.len(), seed);
        let req: Vec<(u64, usize)> = order.iter().map(|&i| extents[i]).collect();
        let bufs = read_vectored(s, &req);
        for (&(offset, n), buf) in req.iter().zip(&bufs) {
            let o = offset as usize;
            assert!(
                buf[..] == data[o..o + n],
                "read_vectored segment ({offset}, {n}) returned the wrong bytes (order {req:?})"
            );
        }
    }
    assert_eq!(len(s), 4096, "reads must not change the storage");
}

/// Vector writes of adjacent and scattered segments, in shuffled order, land
/// where single writes would.
pub fn vectored_write_adjacent_and_scattered(s: &dyn Storage) {
    let mut parts: Vec<(u64, Vec<u8>)> = Vec::new();
    // A run of adjacent segments of uneven sizes, 100..700.
    let mut at = 100;
    for (k, n) in [50usize, 1, 149, 200, 100, 100].into_iter().enumerate() {
        parts.push((at, pattern(n, 10 + k as u8)));
        at += n as u64;
    }
    // Scattered segments with gaps between them.
    parts.push((0, pattern(10, 20)));
    parts.push((750, pattern(25, 21)));
    parts.push((2000, pattern(48, 22)));
    let order = shuffled(parts.len(), 7);
    let shuffled_parts: Vec<(u64, Vec<u8>)> = order.iter().map(|&i| parts[i].clone()).collect();
    write_vectored(s, &shuffled_parts);

    let mut expect = vec![0u8; 2048];
    for (offset, data) in &parts {
        let o = *offset as usize;
        expect[o..o + data.len()].copy_from_slice(data);
    }
    assert_eq!(
        len(s),
        2048,
        "vector write must grow to the largest segment end"
    );
    assert!(
        read(s, 0, 2048) == expect,
        "vector write of shuffled segments {:?} stored the wrong bytes",
        shuffled_parts
            .iter()
            .map(|(o, d)| (*o, d.len()))
            .collect::<Vec<_>>()
    );
}

/// A vector write past the end grows the storage and zero-fills every gap;
/// segments inside the storage do not change its length.
pub fn vectored_write_extends_and_zero_fills(s: &dyn Storage) {
    write(s, 0, &[1, 2, 3]);
    write_vectored(s, &[(1000, vec![9; 24]), (500, vec![8; 4]), (1, vec![7])]);
    assert_eq!(len(s), 1024, "vector write must extend to 1024");
    let all = read(s, 0, 1024);
    assert_eq!(all[..3], [1, 7, 3], "bytes before the first gap");
    assert!(
        all[3..500].iter().all(|&b| b == 0),
        "first gap must read as zeros"
    );
    assert_eq!(all[500..504], [8; 4]);
    assert!(
        all[504..1000].iter().all(|&b| b == 0),
        "second gap must read as zeros"
    );
    assert_eq!(all[1000..], [9; 24]);
    write_vectored(s, &[(10, vec![5; 10]), (1020, vec![6; 4])]);
    assert_eq!(len(s), 1024, "vector write inside must not change len");
}

/// A vector read with a segment past the end fails with `OutOfBounds` for the
/// first such segment in slice order, and changes nothing.
pub fn vectored_read_out_of_bounds(s: &dyn Storage) {
    let expect_oob = |s: &dyn Storage, extents: &[(u64, usize)], bad: (u64, usize)| {
        let file_len = len(s);
        let mut bufs: Vec<Vec<u8>> = extents.iter().map(|&(_, n)| vec![0xA5; n]).collect();
        let mut segs: Vec<ReadSegment<'_>> = extents
            .iter()
            .zip(bufs.iter_mut())
            .map(|(&(offset, _), buf)| ReadSegment::new(offset, buf))
            .collect();
        match s.read_vectored(&mut segs) {
            Err(Error::OutOfBounds {
                offset,
                len,
                file_len: f,
            }) => assert_eq!(
                (offset, len, f),
                (bad.0, bad.1 as u64, file_len),
                "OutOfBounds fields for read_vectored({extents:?})"
            ),
            other => panic!(
                "read_vectored({extents:?}) (len {file_len}): expected OutOfBounds, got {other:?}"
            ),
        }
    };
    expect_oob(s, &[(0, 1)], (0, 1));
    write(s, 0, &[7; 64]);
    expect_oob(s, &[(0, 8), (60, 5), (64, 1)], (60, 5));
    expect_oob(s, &[(64, 1), (0, 8)], (64, 1));
    expect_oob(s, &[(10, 4), (20, 4), (1 << 40, 4096)], (1 << 40, 4096));
    expect_oob(s, &[(0, 65)], (0, 65));
    expect_oob(s, &[(65, 0)], (65, 0));
    assert_eq!(
        len(s),
        64,
        "failed vector reads must not change the storage"
    );
    assert_eq!(read(s, 0, 64), [7; 64]);
    let bufs = read_vectored(s, &[(60, 4), (64, 0)]);
    assert_eq!(bufs[0], [7; 4], "segment ending exactly at len succeeds");
}

/// Overlapping write segments are applied in slice order: the last one wins.
pub fn vectored_overlapping_writes_last_wins(s: &dyn Storage) {
    write_vectored(
        s,
        &[
            (0, vec![1; 16]),
            (4, vec![2; 8]),
            (10, vec![3; 10]),
            (2, vec![4; 2]), // lower offset, after the others
            (30, vec![5; 4]),
            (30, vec![6; 4]), // same range: the second wins
            (40, vec![7; 4]),
            (38, vec![8; 4]), // overlaps the start of the previous one
        ],
    );
    let mut expect = vec![0u8; 44];
    expect[..16].fill(1);
    expect[4..12].fill(2);
    expect[10..20].fill(3);
    expect[2..4].fill(4);
    expect[30..34].fill(6);
    expect[40..44].fill(7);
    expect[38..42].fill(8);
    assert_eq!(len(s), 44);
    assert_eq!(read(s, 0, 44), expect);
}

/// A segment whose end overflows `u64` fails the whole call with
/// `AddressOverflow` before any I/O: nothing is read or written.
pub fn vectored_address_overflow(s: &dyn Storage) {
    write(s, 0, &[1; 8]);
    let cases: [(u64, usize); 2] = [(u64::MAX, 1), (u64::MAX - 3, 8)];
    for (offset, n) in cases {
        let data = vec![2u8; n];
        let segs = [
            WriteSegment::new(0, &[9; 4]),
            WriteSegment::new(100, &[9; 4]),
            WriteSegment::new(offset, &data),
        ];
        let r = s.write_vectored(&segs);
        assert!(
            matches!(r, Err(Error::AddressOverflow { offset: o, len: l }) if o == offset && l == n as u64),
            "write_vectored with segment ({offset}, {n}): expected AddressOverflow, got {r:?}"
        );
        let (mut a, mut b) = (vec![0; 4], vec![0; n]);
        let r = s.read_vectored(&mut [
            ReadSegment::new(0, &mut a),
            ReadSegment::new(offset, &mut b),
        ]);
        assert!(
            matches!(r, Err(Error::AddressOverflow { offset: o, len: l }) if o == offset && l == n as u64),
            "read_vectored with segment ({offset}, {n}): expected AddressOverflow, got {r:?}"
        );
        // Overflow is checked before bounds.
        let mut c = vec![0; 4];
        let r = s.read_vectored(&mut [
            ReadSegment::new(1000, &mut c),
            ReadSegment::new(offset, &mut b),
        ]);
        assert!(
            matches!(r, Err(Error::AddressOverflow { .. })),
            "read_vectored with an out-of-bounds then an overflowing segment: expected AddressOverflow, got {r:?}"
        );
    }
    assert_eq!(
        len(s),
        8,
        "failed vector writes must not change the storage"
    );
    assert_eq!(read(s, 0, 8), [1; 8]);
}

/// Many adjacent segments (over 2 MiB in all, so backends that merge
/// neighbours must split the runs) round-trip in both directions, with the
/// reads segmented differently from the writes.
pub fn vectored_many_adjacent_segments(s: &dyn Storage) {
    let sizes: Vec<usize> = (0..48).map(|k| 40_000 + 1_237 * k).collect();
    let total: usize = sizes.iter().sum();
    let data = pattern(total, 11);
    let mut parts = Vec::new();
    let mut at = 0;
    for n in &sizes {
        parts.push((3 + at as u64, data[at..at + n].to_vec()));
        at += n;
    }
    let order = shuffled(parts.len(), 9);
    let shuffled_parts: Vec<(u64, Vec<u8>)> = order.iter().map(|&i| parts[i].clone()).collect();
    write_vectored(s, &shuffled_parts);
    assert_eq!(len(s), 3 + total as u64);
    assert!(
        read(s, 3, total) == data,
        "many adjacent vector-written segments read back wrong"
    );

    // Read back in 4 KiB adjacent pieces plus a tail, in shuffled order.
    let mut extents = Vec::new();
    let mut at = 0;
    while at < total {
        let n = (total - at).min(4096);
        extents.push((3 + at as u64, n));
        at += n;
    }
    let order = shuffled(extents.len(), 10);
    let req: Vec<(u64, usize)> = order.iter().map(|&i| extents[i]).collect();
    let bufs = read_vectored(s, &req);
    for (&(offset, n), buf) in req.iter().zip(&bufs) {
        let o = offset as usize - 3;
        assert!(
            buf[..] == data[o..o + n],
            "vector read of segment ({offset}, {n}) among adjacent ones returned the wrong bytes"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::MemoryStorage;

    /// Counts the reads and writes that reach the hooks.
    #[derive(Debug, Default)]
    struct Counting {
        reads: AtomicUsize,
        writes: AtomicUsize,
    }

    impl Hooks for Counting {
        fn read_at(&self, inner: &dyn Storage, offset: u64, buf: &mut [u8]) -> Result<()> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            inner.read_at(offset, buf)
        }
        fn write_at(&self, inner: &dyn Storage, offset: u64, data: &[u8]) -> Result<()> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            inner.write_at(offset, data)
        }
    }

    fn counts(s: &Intercept<MemoryStorage, Counting>) -> (usize, usize) {
        let h = s.hooks();
        (
            h.reads.load(Ordering::SeqCst),
            h.writes.load(Ordering::SeqCst),
        )
    }

    #[test]
    fn intercept_delegates_and_calls_the_hooks() {
        let s = Intercept::new(MemoryStorage::new(), Counting::default());
        s.write_at(2, b"hello").unwrap();
        assert_eq!(counts(&s), (0, 1));
        // A vectored write reaches the write hook once per segment.
        s.write_vectored(&[WriteSegment::new(8, b"xy"), WriteSegment::new(0, b"ab")])
            .unwrap();
        assert_eq!(counts(&s), (0, 3));
        // The bytes went to the inner storage; reading it directly passes no hook.
        assert_eq!(s.len().unwrap(), 10);
        // The gap at 7 reads as zero.
        assert_eq!(s.inner().read_vec(0, 10).unwrap(), b"abhello\0xy");
        assert_eq!(counts(&s), (0, 3));
        // Reads through the wrapper return the inner bytes and pass the read hook.
        let mut buf = [0; 5];
        s.read_at(2, &mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        assert_eq!(counts(&s), (1, 3));
        let (mut a, mut b) = ([0; 2], [0; 3]);
        s.read_vectored(&mut [ReadSegment::new(8, &mut a), ReadSegment::new(0, &mut b)])
            .unwrap();
        assert_eq!((&a, &b), (b"xy", b"abh"));
        assert_eq!(counts(&s), (3, 3));
        // Calls without a hook go to the inner storage.
        s.set_len(4).unwrap();
        assert_eq!(s.inner().len().unwrap(), 4);
        s.lock(LockMode::Exclusive).unwrap();
        s.unlock().unwrap();
        s.sync().unwrap();
        assert_eq!(counts(&s), (3, 3));
    }

    #[test]
    fn intercept_meets_the_storage_contract() {
        run_conformance(&|| Box::new(Intercept::new(MemoryStorage::new(), Counting::default())));
    }
}
