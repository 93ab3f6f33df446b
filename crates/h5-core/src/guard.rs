//! The one path from the engine to a file's bytes: [`GuardedStorage`].
//!
//! Every reader and writer of an open file — the metadata cache, the chunk cache and the engine's
//! own direct writes — holds the same `Arc<GuardedStorage>`, so its two rules hold for all of
//! them without any caller remembering them:
//!
//! * **Failed**: the first storage failure of a change (`write_at`, `write_vectored`,
//!   `set_len`, `sync`, `commit`) puts the file in the failed state. Reads still work; every
//!   later change is refused ([`h5_io::Error::PreviousIo`] at this level, [`Error::Failed`] from
//!   [`GuardedStorage::check_writable`]). What a failed write left on disk is unknown, so the
//!   only way on is to drop the handles and reopen (the rollback journal then brings the file
//!   back to its last flush).
//! * **Closed**: after [`GuardedStorage::close`] every call is refused
//!   ([`h5_io::Error::Closed`]; [`Error::Closed`] from the checks), so handles that outlive
//!   `File::close` cannot reach the file; the owner's hook then releases what it holds (the
//!   lock, the rollback journal).
//!
//! The guard also has inherent `read_at`, `write_at`, `len`, `set_len` and `sync` (the
//! [`Storage`] methods, guarded), so engine code calls them without importing the trait.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use h5_io::{CommitPoint, IoOp, LockMode, ReadSegment, Storage, WriteSegment};

use crate::error::{Error, Result};

/// Where a guarded storage stands (an `AtomicU8`, so the checks on every call take no lock).
const OPEN: u8 = 0;
/// A change failed ([`GuardedStorage::fail`]); `why` says what.
const FAILED: u8 = 1;
const CLOSED: u8 = 2;

/// Runs when the storage is closed: the owner releases its lock and deletes a clean rollback
/// journal, for example.
pub type OnClose = Box<dyn FnOnce() + Send>;

/// The storage of one open file, shared by both caches and the engine (see the module
/// documentation).
pub struct GuardedStorage {
    inner: Arc<dyn Storage>,
    /// The state, shared by every view of one file ([`GuardedStorage::view`]).
    shared: Arc<Shared>,
}

/// What the views of one file's guard share.
struct Shared {
    /// [`OPEN`], [`FAILED`] or [`CLOSED`]; only ever moves forward.
    state: AtomicU8,
    /// What failed (set before the state becomes [`FAILED`]).
    why: Mutex<Option<String>>,
    on_close: Mutex<Option<OnClose>>,
}

impl GuardedStorage {
    /// Guards `inner`, open and not failed.
    pub fn new(inner: Arc<dyn Storage>) -> Arc<GuardedStorage> {
        Arc::new(GuardedStorage {
            inner,
            shared: Arc::new(Shared {
                state: AtomicU8::new(OPEN),
                why: Mutex::new(None),
                on_close: Mutex::new(None),
            }),
        })
    }

    /// Another path to the same file's bytes under this guard's state: a failure or the close
    /// through either is seen by both. A page buffer's metadata face, which the metadata cache
    /// uses while the engine and the chunk cache use its raw-data face, is guarded this way.
    pub fn view(&self, inner: Arc<dyn Storage>) -> Arc<GuardedStorage> {
        Arc::new(GuardedStorage {
            inner,
            shared: Arc::clone(&self.shared),
        })
    }

    fn state(&self) -> u8 {
        self.shared.state.load(Ordering::Acquire)
    }

    fn why(&self) -> String {
        self.shared
            .why
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_default()
    }

    /// Sets what runs at [`close`](Self::close) (replacing any earlier hook).
    pub fn set_on_close(&self, f: OnClose) {
        *self
            .shared
            .on_close
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(f);
    }

    /// `Ok` while the file is open (failed or not).
    pub fn check_open(&self) -> Result<()> {
        match self.state() {
            CLOSED => Err(Error::Closed),
            _ => Ok(()),
        }
    }

    /// `Ok` while changes are accepted: not failed, not closed.
    pub fn check_writable(&self) -> Result<()> {
        match self.state() {
            OPEN => Ok(()),
            FAILED => Err(Error::Failed(self.why())),
            _ => Err(Error::Closed),
        }
    }

    /// Whether a change failed.
    pub fn is_failed(&self) -> bool {
        self.state() == FAILED
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.state() == CLOSED
    }

    /// Puts the file in the failed state (if open and not failed yet), remembering `why`.
    pub fn fail(&self, why: impl FnOnce() -> String) {
        let mut w = self
            .shared
            .why
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.state() == OPEN {
            *w = Some(why());
            self.shared.state.store(FAILED, Ordering::Release);
        }
    }

    /// Closes: every later call is refused, then the hook of
    /// [`set_on_close`](Self::set_on_close) runs. Idempotent. The guard itself never unlocks
    /// the storage (another guard may share it, as a virtual dataset's view of its own file
    /// does): the owner's hook does.
    pub fn close(&self) {
        if self.shared.state.swap(CLOSED, Ordering::AcqRel) == CLOSED {
            return;
        }
        let hook = self
            .shared
            .on_close
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(f) = hook {
            f();
        }
    }

    /// [`Storage::read_at`], guarded.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> h5_io::Result<()> {
        Storage::read_at(self, offset, buf)
    }

    /// [`Storage::write_at`], guarded.
    pub fn write_at(&self, offset: u64, data: &[u8]) -> h5_io::Result<()> {
        Storage::write_at(self, offset, data)
    }

    /// [`Storage::len`], guarded.
    pub fn len(&self) -> h5_io::Result<u64> {
        Storage::len(self)
    }

    /// Whether the storage is empty.
    pub fn is_empty(&self) -> h5_io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// [`Storage::set_len`], guarded.
    pub fn set_len(&self, len: u64) -> h5_io::Result<()> {
        Storage::set_len(self, len)
    }

    /// [`Storage::sync`], guarded.
    pub fn sync(&self) -> h5_io::Result<()> {
        Storage::sync(self)
    }

    /// Refuses any call once closed.
    fn open_only(&self) -> h5_io::Result<()> {
        match self.state() {
            CLOSED => Err(h5_io::Error::Closed),
            _ => Ok(()),
        }
    }

    /// Refuses a change once failed or closed.
    fn writable_only(&self) -> h5_io::Result<()> {
        match self.state() {
            OPEN => Ok(()),
            FAILED => Err(h5_io::Error::PreviousIo),
            _ => Err(h5_io::Error::Closed),
        }
    }

    /// Passes a change's result through, failing the file on a storage error (not on an
    /// argument refused before any I/O).
    fn change<T>(&self, op: IoOp, r: h5_io::Result<T>) -> h5_io::Result<T> {
        if let Err(e) = &r
            && !matches!(e, h5_io::Error::AddressOverflow { .. })
        {
            self.fail(|| format!("{op}: {e}"));
        }
        r
    }
}

impl fmt::Debug for GuardedStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedStorage")
            .field("inner", &self.inner)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

#[deny(clippy::missing_trait_methods)]
impl Storage for GuardedStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> h5_io::Result<()> {
        self.open_only()?;
        self.inner.read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> h5_io::Result<()> {
        self.writable_only()?;
        self.change(IoOp::Write, self.inner.write_at(offset, data))
    }

    fn len(&self) -> h5_io::Result<u64> {
        self.open_only()?;
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> h5_io::Result<()> {
        self.writable_only()?;
        self.change(IoOp::SetLen, self.inner.set_len(len))
    }

    fn sync(&self) -> h5_io::Result<()> {
        self.writable_only()?;
        self.change(IoOp::Sync, self.inner.sync())
    }

    fn lock(&self, mode: LockMode) -> h5_io::Result<()> {
        self.open_only()?;
        self.inner.lock(mode)
    }

    fn unlock(&self) -> h5_io::Result<()> {
        self.inner.unlock()
    }

    fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> h5_io::Result<()> {
        self.open_only()?;
        self.inner.read_vectored(segments)
    }

    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> h5_io::Result<()> {
        self.writable_only()?;
        self.change(IoOp::WriteVectored, self.inner.write_vectored(segments))
    }

    fn commit(&self, point: &CommitPoint) -> h5_io::Result<()> {
        self.writable_only()?;
        self.change(IoOp::Commit, self.inner.commit(point))
    }

    fn journals_overwrites(&self) -> bool {
        self.inner.journals_overwrites()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use h5_io::{FaultInjection, MemoryStorage};

    #[test]
    fn a_failed_change_refuses_changes_not_reads() {
        let g = GuardedStorage::new(Arc::new(
            FaultInjection::new(MemoryStorage::with_data(vec![7; 8])).fail_nth(IoOp::Write, 3),
        ));
        g.write_at(0, &[1]).unwrap();
        assert!(g.write_at(u64::MAX, &[1]).is_err(), "an argument error");
        g.check_writable().unwrap();
        assert!(g.write_at(1, &[1]).is_err());
        assert!(g.is_failed());
        assert!(matches!(g.check_writable(), Err(Error::Failed(why)) if why.contains("write")));
        assert!(matches!(g.write_at(2, &[1]), Err(h5_io::Error::PreviousIo)));
        assert!(matches!(g.sync(), Err(h5_io::Error::PreviousIo)));
        let mut b = [0; 2];
        g.read_at(0, &mut b).unwrap();
        assert_eq!(b, [1, 7]);
        g.check_open().unwrap();
    }

    #[test]
    fn close_refuses_everything_and_runs_the_hook_once() {
        let mem = MemoryStorage::new();
        let inner = Arc::new(mem.clone());
        let g = GuardedStorage::new(Arc::clone(&inner) as Arc<dyn Storage>);
        let ran = Arc::new(Mutex::new(0));
        let r = Arc::clone(&ran);
        g.set_on_close(Box::new(move || {
            *r.lock().unwrap() += 1;
            inner.unlock().unwrap();
        }));
        g.lock(LockMode::Exclusive).unwrap();
        g.close();
        g.close();
        assert_eq!(*ran.lock().unwrap(), 1);
        assert!(matches!(g.len(), Err(h5_io::Error::Closed)));
        assert!(matches!(g.write_at(0, &[1]), Err(h5_io::Error::Closed)));
        assert!(matches!(g.check_open(), Err(Error::Closed)));
        assert!(matches!(g.check_writable(), Err(Error::Closed)));
        // The hook released the lock: another handle of the same memory can take it.
        mem.lock(LockMode::Exclusive).unwrap();
    }
}
