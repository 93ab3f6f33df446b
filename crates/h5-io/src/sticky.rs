//! Sticky write errors: after a failed write, refuse all further work.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::error::{Error, IoOp, Result};
use crate::storage::{CommitPoint, LockMode, ReadSegment, Storage, WriteSegment};

/// Decorator that poisons the handle after any failed `write_at`,
/// `write_vectored`, `set_len`, `sync` or `commit`: the failing call returns its own error, and every later call,
/// reads included, returns [`Error::PreviousIo`].
///
/// There is deliberately no way to clear the state. As with SQLite's pager
/// ERROR state, once a write, truncation or flush has failed the contents of
/// the storage are unknown (part of a write may have landed; after a failed
/// `fsync` the kernel may already have dropped the dirty pages, so retrying
/// "succeeds" without the data). Continuing would let higher layers build on
/// state that may not exist. The only way out is to reopen the storage and
/// re-read what is actually there ([`into_inner`](Self::into_inner) gives the
/// underlying handle back for that purpose).
///
/// Failures of `read_at`, `read_vectored`, `len`, `lock` and `unlock` are not sticky: they do
/// not change the stored bytes. Neither is [`Error::AddressOverflow`], which is
/// an argument check made before any I/O is attempted.
///
/// ```
/// use h5_io::{Error, FaultInjection, IoOp, MemoryStorage, Sticky, Storage};
///
/// let s = Sticky::new(FaultInjection::new(MemoryStorage::new()).fail_nth(IoOp::Sync, 1));
/// assert!(matches!(s.sync(), Err(Error::Injected { .. })));
/// assert!(matches!(s.len(), Err(Error::PreviousIo)));
/// ```
#[derive(Debug)]
pub struct Sticky<S> {
    inner: S,
    poisoned_by: Mutex<Option<IoOp>>,
}

impl<S> Sticky<S> {
    /// Wrap `inner`, not poisoned.
    pub fn new(inner: S) -> Self {
        Sticky {
            inner,
            poisoned_by: Mutex::new(None),
        }
    }

    /// Whether an earlier write, set_len or sync failed.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned_by().is_some()
    }

    /// The operation whose failure poisoned the handle, if any.
    pub fn poisoned_by(&self) -> Option<IoOp> {
        *self.state()
    }

    /// The wrapped storage.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Unwrap, discarding the poisoned state (for reopening).
    pub fn into_inner(self) -> S {
        self.inner
    }

    fn state(&self) -> MutexGuard<'_, Option<IoOp>> {
        self.poisoned_by
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn check(&self) -> Result<()> {
        if self.is_poisoned() {
            Err(Error::PreviousIo)
        } else {
            Ok(())
        }
    }

    /// Pass a mutating call's result through, poisoning on error.
    fn mutating<T>(&self, op: IoOp, r: Result<T>) -> Result<T> {
        match &r {
            // Argument validation done before any I/O: the storage is untouched.
            Err(Error::AddressOverflow { .. }) | Ok(_) => {}
            Err(_) => {
                self.state().get_or_insert(op);
            }
        }
        r
    }
}

#[deny(clippy::missing_trait_methods)]
impl<S: Storage> Storage for Sticky<S> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.check()?;
        self.inner.read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.check()?;
        self.mutating(IoOp::Write, self.inner.write_at(offset, data))
    }

    fn len(&self) -> Result<u64> {
        self.check()?;
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.check()?;
        self.mutating(IoOp::SetLen, self.inner.set_len(len))
    }

    fn sync(&self) -> Result<()> {
        self.check()?;
        self.mutating(IoOp::Sync, self.inner.sync())
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
        self.check()?;
        self.inner.read_vectored(segments)
    }

    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> Result<()> {
        self.check()?;
        self.mutating(IoOp::WriteVectored, self.inner.write_vectored(segments))
    }

    fn commit(&self, point: &CommitPoint) -> Result<()> {
        self.check()?;
        self.mutating(IoOp::Commit, self.inner.commit(point))
    }

    fn journals_overwrites(&self) -> bool {
        self.inner.journals_overwrites()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FaultInjection, MemoryStorage, Metrics};

    fn refuses_everything<S: Storage>(s: &Sticky<S>) {
        let mut b = [0; 1];
        assert!(matches!(s.read_at(0, &mut b), Err(Error::PreviousIo)));
        assert!(matches!(s.write_at(0, &b), Err(Error::PreviousIo)));
        assert!(matches!(s.len(), Err(Error::PreviousIo)));
        assert!(matches!(s.set_len(0), Err(Error::PreviousIo)));
        assert!(matches!(s.sync(), Err(Error::PreviousIo)));
        assert!(matches!(s.lock(LockMode::Shared), Err(Error::PreviousIo)));
        assert!(matches!(s.unlock(), Err(Error::PreviousIo)));
        assert!(matches!(
            s.read_vectored(&mut [ReadSegment::new(0, &mut b)]),
            Err(Error::PreviousIo)
        ));
        assert!(matches!(
            s.write_vectored(&[WriteSegment::new(0, &[1])]),
            Err(Error::PreviousIo)
        ));
        assert!(matches!(s.write_vectored(&[]), Err(Error::PreviousIo)));
    }

    #[test]
    fn failed_sync_poisons() {
        let s = Sticky::new(Metrics::new(
            FaultInjection::new(MemoryStorage::new()).fail_nth(IoOp::Sync, 1),
        ));
        s.write_at(0, &[1, 2]).unwrap();
        assert!(!s.is_poisoned());
        assert!(matches!(
            s.sync(),
            Err(Error::Injected {
                op: IoOp::Sync,
                call: 1
            })
        ));
        assert!(s.is_poisoned());
        assert_eq!(s.poisoned_by(), Some(IoOp::Sync));
        let before = s.inner().snapshot();
        refuses_everything(&s);
        // Refused calls never reached the inner storage.
        assert_eq!(s.inner().snapshot(), before);
        // "Reopening" gives back a working handle.
        let reopened = Sticky::new(s.into_inner());
        assert_eq!(reopened.len().unwrap(), 2);
    }

    #[test]
    fn failed_write_and_set_len_poison() {
        let s = Sticky::new(FaultInjection::new(MemoryStorage::new()).torn_write_nth(1, 1));
        assert!(matches!(
            s.write_at(0, &[1, 2]),
            Err(Error::TornWrite { .. })
        ));
        assert_eq!(s.poisoned_by(), Some(IoOp::Write));
        refuses_everything(&s);

        let s = Sticky::new(FaultInjection::new(MemoryStorage::new()).fail_nth(IoOp::SetLen, 1));
        // An address overflow is rejected before any I/O: not sticky.
        assert!(matches!(
            s.write_at(u64::MAX, &[1]),
            Err(Error::AddressOverflow { .. })
        ));
        assert!(!s.is_poisoned());
        assert!(s.set_len(5).is_err());
        assert_eq!(s.poisoned_by(), Some(IoOp::SetLen));
        refuses_everything(&s);
    }

    #[test]
    fn failed_vector_write_poisons() {
        let s = Sticky::new(Metrics::new(
            FaultInjection::new(MemoryStorage::new()).fail_nth(IoOp::WriteVectored, 3),
        ));
        let segs = [WriteSegment::new(0, &[1, 2]), WriteSegment::new(4, &[3])];
        s.write_vectored(&segs).unwrap();
        // An overflowing segment is rejected before any I/O: not sticky.
        let bad = [
            WriteSegment::new(8, &[1]),
            WriteSegment::new(u64::MAX, &[1]),
        ];
        assert!(matches!(
            s.write_vectored(&bad),
            Err(Error::AddressOverflow { .. })
        ));
        assert!(!s.is_poisoned());
        assert_eq!(
            s.len().unwrap(),
            5,
            "nothing of the overflowing call was written"
        );
        assert!(matches!(
            s.write_vectored(&segs),
            Err(Error::Injected {
                op: IoOp::WriteVectored,
                ..
            })
        ));
        assert_eq!(s.poisoned_by(), Some(IoOp::WriteVectored));
        let before = s.inner().snapshot();
        refuses_everything(&s);
        assert_eq!(s.inner().snapshot(), before);
    }

    #[test]
    fn read_failures_are_not_sticky() {
        let s = Sticky::new(
            FaultInjection::new(MemoryStorage::with_data(vec![7; 4]))
                .fail_nth(IoOp::Read, 1)
                .fail_nth(IoOp::Len, 1)
                .fail_nth(IoOp::Lock, 1)
                .fail_nth(IoOp::ReadVectored, 1),
        );
        let mut b = [0; 2];
        assert!(matches!(
            s.read_vectored(&mut [ReadSegment::new(0, &mut b)]),
            Err(Error::Injected { .. })
        ));
        assert!(matches!(
            s.read_vectored(&mut [ReadSegment::new(3, &mut b)]),
            Err(Error::OutOfBounds { .. })
        ));
        assert!(matches!(s.read_at(0, &mut b), Err(Error::Injected { .. })));
        // Out-of-bounds reads are not sticky either.
        assert!(matches!(
            s.read_at(10, &mut b),
            Err(Error::OutOfBounds { .. })
        ));
        assert!(s.len().is_err());
        assert!(s.lock(LockMode::Shared).is_err());
        assert!(!s.is_poisoned());
        s.read_at(0, &mut b).unwrap();
        assert_eq!(b, [7, 7]);
        s.write_at(0, &[1]).unwrap();
        s.sync().unwrap();
        assert_eq!(s.len().unwrap(), 4);
    }
}
