//! Deterministic fault injection for testing error paths.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::error::{Error, IoOp, Result, len_u64};
use crate::storage::{CommitPoint, LockMode, ReadSegment, Storage, WriteSegment};

/// One rule of a [`FaultPlan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultRule {
    /// The `n`-th call (1-based) of `op` fails with [`Error::Injected`].
    FailNth {
        /// The operation to fail.
        op: IoOp,
        /// 1-based call number.
        n: u64,
    },
    /// The `n`-th call (1-based) of `op` and every later one fail with [`Error::Injected`].
    FailFrom {
        /// The operation to fail.
        op: IoOp,
        /// 1-based number of the first failing call.
        n: u64,
    },
    /// The `n`-th call (1-based) of `op` fails with [`Error::Io`] carrying an OS
    /// error of `kind` (`StorageFull` for ENOSPC, `Other` for EIO, ...), as the
    /// backend would report it.
    FailNthWith {
        /// The operation to fail.
        op: IoOp,
        /// 1-based call number.
        n: u64,
        /// The kind of the OS error.
        kind: io::ErrorKind,
    },
    /// The `n`-th `write_at` call stores only its first `keep_bytes` bytes, then
    /// fails with [`Error::TornWrite`]. Applies to `write_at` only, not to
    /// `write_vectored` (which has its own call counter, [`IoOp::WriteVectored`]).
    TornWriteNth {
        /// 1-based number of the write call.
        n: u64,
        /// Bytes of the prefix that reach storage (capped at the write's length).
        keep_bytes: u64,
    },
    /// The `n`-th `write_vectored` call stores its segments in slice order until
    /// `keep_bytes` bytes are written (the last one possibly in part), then fails
    /// with [`Error::TornWrite`] (its offset is the first segment's, its lengths
    /// the totals).
    TornVectorNth {
        /// 1-based number of the vector write call.
        n: u64,
        /// Bytes, over all segments in slice order, that reach storage.
        keep_bytes: u64,
    },
}

/// What action a rule takes on a given call.
enum Fault {
    Fail,
    FailWith(io::ErrorKind),
    Torn { keep_bytes: u64 },
}

impl FaultRule {
    fn fault_for(&self, op: IoOp, call: u64) -> Option<Fault> {
        match *self {
            FaultRule::FailNth { op: o, n } if o == op && n == call => Some(Fault::Fail),
            FaultRule::FailFrom { op: o, n } if o == op && call >= n => Some(Fault::Fail),
            FaultRule::FailNthWith { op: o, n, kind } if o == op && n == call => {
                Some(Fault::FailWith(kind))
            }
            FaultRule::TornWriteNth { n, keep_bytes } if op == IoOp::Write && n == call => {
                Some(Fault::Torn { keep_bytes })
            }
            FaultRule::TornVectorNth { n, keep_bytes }
                if op == IoOp::WriteVectored && n == call =>
            {
                Some(Fault::Torn { keep_bytes })
            }
            _ => None,
        }
    }
}

/// A list of [`FaultRule`]s, built builder-style.
///
/// When several rules match a call, the first one added wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultPlan {
    rules: Vec<FaultRule>,
}

impl FaultPlan {
    /// A plan with no rules: every call passes through.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a rule.
    pub fn rule(mut self, rule: FaultRule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Fail the `n`-th call (1-based) of `op` with [`Error::Injected`]; it does
    /// not reach storage.
    pub fn fail_nth(self, op: IoOp, n: u64) -> Self {
        self.rule(FaultRule::FailNth { op, n })
    }

    /// Fail the `n`-th call (1-based) of `op` and every later one.
    pub fn fail_from(self, op: IoOp, n: u64) -> Self {
        self.rule(FaultRule::FailFrom { op, n })
    }

    /// Fail the `n`-th call of `op` with an OS error of `kind` ([`FaultRule::FailNthWith`]).
    pub fn fail_nth_with(self, op: IoOp, n: u64, kind: io::ErrorKind) -> Self {
        self.rule(FaultRule::FailNthWith { op, n, kind })
    }

    /// The `n`-th write stores only its first `keep_bytes` bytes, then returns
    /// [`Error::TornWrite`].
    pub fn torn_write_nth(self, n: u64, keep_bytes: u64) -> Self {
        self.rule(FaultRule::TornWriteNth { n, keep_bytes })
    }

    /// The `n`-th vector write stores its first `keep_bytes` bytes, then returns
    /// [`Error::TornWrite`] ([`FaultRule::TornVectorNth`]).
    pub fn torn_vector_nth(self, n: u64, keep_bytes: u64) -> Self {
        self.rule(FaultRule::TornVectorNth { n, keep_bytes })
    }

    /// Same as [`torn_write_nth`](Self::torn_write_nth).
    ///
    /// [`Storage::write_at`] is all-or-error, so a short write can only surface
    /// as an error reporting how much was written: a torn write.
    pub fn short_write_nth(self, n: u64, keep_bytes: u64) -> Self {
        self.torn_write_nth(n, keep_bytes)
    }

    /// The rules, in the order they were added.
    pub fn rules(&self) -> &[FaultRule] {
        &self.rules
    }

    fn fault_for(&self, op: IoOp, call: u64) -> Option<Fault> {
        self.rules.iter().find_map(|r| r.fault_for(op, call))
    }
}

/// Decorator that fails chosen calls, per a [`FaultPlan`].
///
/// Calls are counted per [`IoOp`], 1-based, including the ones that are failed.
/// A failed call does not reach the inner storage (except the stored prefix of
/// a torn write); calls not failed pass through unchanged.
///
/// A vectored call counts as **one** call of its own kind,
/// [`IoOp::ReadVectored`] or [`IoOp::WriteVectored`], whatever its number of
/// segments; it is not counted as a `Read` or `Write`, so rules on
/// `IoOp::Read`/`IoOp::Write` never fire on vectored calls and vice versa.
/// A failed vectored call reaches no segment. Torn-write rules apply to
/// `write_at` only.
///
/// ```
/// use h5_io::{Error, FaultInjection, IoOp, MemoryStorage, Storage, WriteSegment};
///
/// let s = FaultInjection::new(MemoryStorage::new()).fail_nth(IoOp::WriteVectored, 1);
/// let segs = [WriteSegment::new(0, b"ab"), WriteSegment::new(8, b"cd")];
/// assert!(matches!(
///     s.write_vectored(&segs),
///     Err(Error::Injected { op: IoOp::WriteVectored, call: 1 })
/// ));
/// assert_eq!(s.inner().len()?, 0);
/// s.write_vectored(&segs)?;
/// assert_eq!((s.calls(IoOp::WriteVectored), s.calls(IoOp::Write)), (2, 0));
/// # Ok::<(), h5_io::Error>(())
/// ```
///
/// ```
/// use h5_io::{Error, FaultInjection, IoOp, MemoryStorage, Storage};
///
/// let s = FaultInjection::new(MemoryStorage::new()).fail_nth(IoOp::Sync, 2);
/// s.sync()?;
/// assert!(matches!(s.sync(), Err(Error::Injected { op: IoOp::Sync, call: 2 })));
/// s.sync()?;
/// # Ok::<(), h5_io::Error>(())
/// ```
#[derive(Debug)]
pub struct FaultInjection<S> {
    inner: S,
    plan: Mutex<FaultPlan>,
    calls: [AtomicU64; IoOp::ALL.len()],
}

impl<S> FaultInjection<S> {
    /// Wrap `inner` with an empty plan.
    pub fn new(inner: S) -> Self {
        Self::with_plan(inner, FaultPlan::new())
    }

    /// Wrap `inner` with `plan`.
    pub fn with_plan(inner: S, plan: FaultPlan) -> Self {
        FaultInjection {
            inner,
            plan: Mutex::new(plan),
            calls: Default::default(),
        }
    }

    /// Builder: add [`FaultPlan::fail_nth`].
    pub fn fail_nth(self, op: IoOp, n: u64) -> Self {
        self.add(FaultRule::FailNth { op, n })
    }

    /// Builder: add [`FaultPlan::fail_from`].
    pub fn fail_from(self, op: IoOp, n: u64) -> Self {
        self.add(FaultRule::FailFrom { op, n })
    }

    /// Builder: add [`FaultPlan::fail_nth_with`].
    pub fn fail_nth_with(self, op: IoOp, n: u64, kind: io::ErrorKind) -> Self {
        self.add(FaultRule::FailNthWith { op, n, kind })
    }

    /// Builder: add [`FaultPlan::torn_write_nth`].
    pub fn torn_write_nth(self, n: u64, keep_bytes: u64) -> Self {
        self.add(FaultRule::TornWriteNth { n, keep_bytes })
    }

    /// Builder: add [`FaultPlan::torn_vector_nth`].
    pub fn torn_vector_nth(self, n: u64, keep_bytes: u64) -> Self {
        self.add(FaultRule::TornVectorNth { n, keep_bytes })
    }

    /// Builder: add [`FaultPlan::short_write_nth`] (a torn write).
    pub fn short_write_nth(self, n: u64, keep_bytes: u64) -> Self {
        self.torn_write_nth(n, keep_bytes)
    }

    fn add(self, rule: FaultRule) -> Self {
        self.plan_guard().rules.push(rule);
        self
    }

    /// Replace the plan at run time. Call counters are kept, so `n` in the new
    /// rules counts from the first call ever made; use
    /// [`calls`](Self::calls) to aim at "the next call", or
    /// [`reset_calls`](Self::reset_calls) first.
    pub fn set_plan(&self, plan: FaultPlan) {
        *self.plan_guard() = plan;
    }

    /// A copy of the current plan.
    pub fn plan(&self) -> FaultPlan {
        self.plan_guard().clone()
    }

    /// How many calls of `op` were made so far (failed ones included).
    pub fn calls(&self, op: IoOp) -> u64 {
        self.calls[op.index()].load(Ordering::SeqCst)
    }

    /// Set every call counter back to zero.
    pub fn reset_calls(&self) {
        for c in &self.calls {
            c.store(0, Ordering::SeqCst);
        }
    }

    /// The wrapped storage.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Unwrap, discarding the plan.
    pub fn into_inner(self) -> S {
        self.inner
    }

    fn plan_guard(&self) -> MutexGuard<'_, FaultPlan> {
        self.plan.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Count a call of `op`; the fault to inject, if any, with the call number.
    fn enter(&self, op: IoOp) -> (u64, Option<Fault>) {
        let call = self.calls[op.index()].fetch_add(1, Ordering::SeqCst) + 1;
        (call, self.plan_guard().fault_for(op, call))
    }

    /// For operations without a torn variant: fail or pass through.
    fn check(&self, op: IoOp) -> Result<()> {
        let (call, fault) = self.enter(op);
        match fault {
            None => Ok(()),
            Some(f) => Err(injected(op, call, 0, &f)),
        }
    }
}

/// The error a failing fault reports (a torn fault on an operation without a torn
/// variant fails the call whole).
fn injected(op: IoOp, call: u64, offset: u64, fault: &Fault) -> Error {
    match fault {
        Fault::FailWith(kind) => Error::Io {
            op,
            offset,
            source: io::Error::new(*kind, "injected"),
        },
        Fault::Fail | Fault::Torn { .. } => Error::Injected { op, call },
    }
}

#[deny(clippy::missing_trait_methods)]
impl<S: Storage> Storage for FaultInjection<S> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.check(IoOp::Read)?;
        self.inner.read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        match self.enter(IoOp::Write) {
            (_, None) => self.inner.write_at(offset, data),
            (call, Some(f @ (Fault::Fail | Fault::FailWith(_)))) => {
                Err(injected(IoOp::Write, call, offset, &f))
            }
            (_, Some(Fault::Torn { keep_bytes })) => {
                let len = len_u64(data.len());
                let written = keep_bytes.min(len);
                let keep = usize::try_from(written).unwrap_or(data.len());
                if keep > 0 {
                    self.inner.write_at(offset, &data[..keep])?;
                }
                Err(Error::TornWrite {
                    offset,
                    written,
                    len,
                })
            }
        }
    }

    fn len(&self) -> Result<u64> {
        self.check(IoOp::Len)?;
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.check(IoOp::SetLen)?;
        self.inner.set_len(len)
    }

    fn sync(&self) -> Result<()> {
        self.check(IoOp::Sync)?;
        self.inner.sync()
    }

    fn lock(&self, mode: LockMode) -> Result<()> {
        self.check(IoOp::Lock)?;
        self.inner.lock(mode)
    }

    fn unlock(&self) -> Result<()> {
        self.check(IoOp::Unlock)?;
        self.inner.unlock()
    }

    fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> Result<()> {
        self.check(IoOp::ReadVectored)?;
        self.inner.read_vectored(segments)
    }

    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> Result<()> {
        let first = segments.first().map_or(0, |s| s.offset);
        match self.enter(IoOp::WriteVectored) {
            (_, None) => self.inner.write_vectored(segments),
            (call, Some(f @ (Fault::Fail | Fault::FailWith(_)))) => {
                Err(injected(IoOp::WriteVectored, call, first, &f))
            }
            (_, Some(Fault::Torn { keep_bytes })) => {
                crate::storage::check_segments(segments.iter().map(|s| (s.offset, s.data.len())))?;
                let len: u64 = segments.iter().map(|s| len_u64(s.data.len())).sum();
                let mut left = keep_bytes.min(len);
                let written = left;
                for seg in segments {
                    let n = usize::try_from(left)
                        .unwrap_or(usize::MAX)
                        .min(seg.data.len());
                    if n > 0 {
                        self.inner.write_at(seg.offset, &seg.data[..n])?;
                    }
                    left -= len_u64(n);
                }
                Err(Error::TornWrite {
                    offset: first,
                    written,
                    len,
                })
            }
        }
    }

    fn commit(&self, point: &CommitPoint) -> Result<()> {
        self.check(IoOp::Commit)?;
        self.inner.commit(point)
    }

    fn journals_overwrites(&self) -> bool {
        self.inner.journals_overwrites()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MemoryStorage, Metrics};

    #[test]
    fn fail_nth_fails_exactly_that_call() {
        let s = FaultInjection::new(Metrics::new(MemoryStorage::new())).fail_nth(IoOp::Write, 2);
        s.write_at(0, &[1]).unwrap();
        let e = s.write_at(1, &[2]).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Injected {
                    op: IoOp::Write,
                    call: 2
                }
            ),
            "{e:?}"
        );
        s.write_at(2, &[3]).unwrap();
        s.write_at(3, &[4]).unwrap();
        // The failed call never reached the inner storage.
        assert_eq!(s.inner().snapshot().writes, 3);
        assert_eq!(s.inner().inner().snapshot(), [1, 0, 3, 4]);
        assert_eq!(s.calls(IoOp::Write), 4);
        // Counters are per op: reads are unaffected.
        let mut b = [0; 1];
        s.read_at(0, &mut b).unwrap();
        s.read_at(0, &mut b).unwrap();
        assert_eq!(s.calls(IoOp::Read), 2);
    }

    #[test]
    fn fail_from_persists() {
        let s = FaultInjection::new(MemoryStorage::new()).fail_from(IoOp::Read, 3);
        s.write_at(0, &[9; 4]).unwrap();
        let mut b = [0; 2];
        s.read_at(0, &mut b).unwrap();
        s.read_at(0, &mut b).unwrap();
        for call in 3..10 {
            match s.read_at(0, &mut b) {
                Err(Error::Injected {
                    op: IoOp::Read,
                    call: c,
                }) => assert_eq!(c, call),
                other => panic!("call {call}: {other:?}"),
            }
        }
        s.write_at(0, &[1]).unwrap();
    }

    #[test]
    fn every_op_can_fail() {
        for op in IoOp::ALL {
            let s = FaultInjection::new(MemoryStorage::with_data(vec![0; 4])).fail_nth(op, 1);
            let mut b = [0; 1];
            let r = match op {
                IoOp::Read => s.read_at(0, &mut b),
                IoOp::Write => s.write_at(0, &b),
                IoOp::Len => s.len().map(drop),
                IoOp::SetLen => s.set_len(1),
                IoOp::Sync => s.sync(),
                IoOp::Lock => s.lock(LockMode::Shared),
                IoOp::Unlock => s.unlock(),
                IoOp::ReadVectored => s.read_vectored(&mut [ReadSegment::new(0, &mut b)]),
                IoOp::WriteVectored => s.write_vectored(&[WriteSegment::new(0, &[1])]),
                IoOp::Commit => s.commit(&CommitPoint::default()),
            };
            assert!(
                matches!(r, Err(Error::Injected { op: o, call: 1 }) if o == op),
                "{op}: {r:?}"
            );
        }
    }

    #[test]
    fn os_error_kinds() {
        let s = FaultInjection::new(MemoryStorage::new())
            .fail_nth_with(IoOp::Write, 1, io::ErrorKind::StorageFull)
            .fail_nth_with(IoOp::Sync, 1, io::ErrorKind::Other);
        let e = s.write_at(7, &[1]).unwrap_err();
        assert!(
            matches!(&e, Error::Io { op: IoOp::Write, offset: 7, source } if source.kind() == io::ErrorKind::StorageFull),
            "{e:?}"
        );
        assert!(matches!(s.sync(), Err(Error::Io { op: IoOp::Sync, .. })));
        assert_eq!(s.inner().len().unwrap(), 0, "nothing reached storage");
        s.write_at(0, &[1]).unwrap();
    }

    #[test]
    fn torn_vector_keeps_a_prefix_in_slice_order() {
        let s = FaultInjection::new(MemoryStorage::with_data(vec![0; 12])).torn_vector_nth(1, 5);
        let segs = [
            WriteSegment::new(8, &[1, 2, 3]),
            WriteSegment::new(0, &[4, 5, 6]),
            WriteSegment::new(4, &[7]),
        ];
        let e = s.write_vectored(&segs).unwrap_err();
        assert!(
            matches!(
                e,
                Error::TornWrite {
                    offset: 8,
                    written: 5,
                    len: 7
                }
            ),
            "{e:?}"
        );
        assert_eq!(s.inner().snapshot(), [4, 5, 0, 0, 0, 0, 0, 0, 1, 2, 3, 0]);
    }

    #[test]
    fn torn_write_keeps_exactly_prefix() {
        let s = FaultInjection::new(MemoryStorage::with_data(vec![0xEE; 4])).torn_write_nth(2, 3);
        s.write_at(0, &[1, 1]).unwrap();
        let e = s.write_at(8, &[5, 6, 7, 8, 9]).unwrap_err();
        assert!(
            matches!(
                e,
                Error::TornWrite {
                    offset: 8,
                    written: 3,
                    len: 5
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            s.inner().snapshot(),
            [1, 1, 0xEE, 0xEE, 0, 0, 0, 0, 5, 6, 7]
        );
        s.write_at(11, &[1]).unwrap();
    }

    #[test]
    fn torn_write_keep_zero_and_keep_more_than_len() {
        let s = FaultInjection::new(MemoryStorage::new())
            .torn_write_nth(1, 0)
            .short_write_nth(2, 100);
        assert!(matches!(
            s.write_at(0, &[1, 2]),
            Err(Error::TornWrite {
                written: 0,
                len: 2,
                ..
            })
        ));
        assert_eq!(s.inner().len().unwrap(), 0);
        assert!(matches!(
            s.write_at(0, &[1, 2]),
            Err(Error::TornWrite {
                written: 2,
                len: 2,
                ..
            })
        ));
        assert_eq!(s.inner().snapshot(), [1, 2]);
    }

    #[test]
    fn set_plan_at_run_time() {
        let s = FaultInjection::new(MemoryStorage::new());
        s.sync().unwrap();
        s.sync().unwrap();
        let next = s.calls(IoOp::Sync) + 1;
        s.set_plan(FaultPlan::new().fail_nth(IoOp::Sync, next));
        assert_eq!(
            s.plan().rules(),
            [FaultRule::FailNth {
                op: IoOp::Sync,
                n: 3
            }]
        );
        assert!(matches!(s.sync(), Err(Error::Injected { call: 3, .. })));
        s.sync().unwrap();
        s.reset_calls();
        s.set_plan(FaultPlan::new().fail_nth(IoOp::Sync, 1));
        assert!(matches!(s.sync(), Err(Error::Injected { call: 1, .. })));
        s.set_plan(FaultPlan::new());
        s.sync().unwrap();
    }

    #[test]
    fn vector_calls_have_their_own_counters() {
        let s = FaultInjection::new(Metrics::new(MemoryStorage::with_data(vec![0; 16])))
            .fail_nth(IoOp::WriteVectored, 2)
            .fail_nth(IoOp::ReadVectored, 1)
            .fail_nth(IoOp::Write, 1)
            .torn_write_nth(2, 1);
        let segs = [
            WriteSegment::new(8, &[8, 8]),
            WriteSegment::new(0, &[1]),
            WriteSegment::new(20, &[2; 3]),
        ];
        // Call 1 passes, with all its segments.
        s.write_vectored(&segs).unwrap();
        // Call 2 fails as a whole: no segment reaches storage.
        let before = s.inner().inner().snapshot();
        let e = s
            .write_vectored(&[WriteSegment::new(0, &[9; 30])])
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::Injected {
                    op: IoOp::WriteVectored,
                    call: 2
                }
            ),
            "{e:?}"
        );
        assert_eq!(s.inner().inner().snapshot(), before);
        s.write_vectored(&segs).unwrap();
        assert_eq!(s.calls(IoOp::WriteVectored), 3);
        // Vector calls did not consume the Write rules: the first write_at
        // still fails, the second is still torn.
        assert_eq!(s.calls(IoOp::Write), 0);
        assert!(matches!(
            s.write_at(0, &[7]),
            Err(Error::Injected {
                op: IoOp::Write,
                call: 1
            })
        ));
        assert!(matches!(
            s.write_at(0, &[7, 7]),
            Err(Error::TornWrite { written: 1, .. })
        ));
        // Reads: the vector call fails, a plain read (counted apart) passes.
        let (mut a, mut b) = ([0; 2], [0; 1]);
        let e = s
            .read_vectored(&mut [ReadSegment::new(8, &mut a), ReadSegment::new(0, &mut b)])
            .unwrap_err();
        assert!(matches!(
            e,
            Error::Injected {
                op: IoOp::ReadVectored,
                call: 1
            }
        ));
        s.read_at(0, &mut b).unwrap();
        s.read_vectored(&mut [ReadSegment::new(8, &mut a), ReadSegment::new(0, &mut b)])
            .unwrap();
        assert_eq!((a, b), ([8, 8], [7]));
        assert_eq!((s.calls(IoOp::ReadVectored), s.calls(IoOp::Read)), (2, 1));
        // Only the calls that were let through reached the inner storage.
        let m = s.inner().snapshot();
        assert_eq!((m.write_vectors, m.write_segments), (2, 6));
        assert_eq!((m.read_vectors, m.read_segments), (1, 2));
    }

    #[test]
    fn first_matching_rule_wins() {
        let s = FaultInjection::with_plan(
            MemoryStorage::new(),
            FaultPlan::new()
                .torn_write_nth(1, 1)
                .fail_nth(IoOp::Write, 1),
        );
        assert!(matches!(
            s.write_at(0, &[1, 2]),
            Err(Error::TornWrite { .. })
        ));
    }
}
