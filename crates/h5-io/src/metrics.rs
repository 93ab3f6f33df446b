//! Call and byte counters, with an optional in-order log of operations.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::error::{IoOp, Result, len_u64};
use crate::storage::{LockMode, Storage};

/// Counter values of a [`Metrics`] decorator at one moment.
///
/// Call counters count every call, successful or not; byte counters count only
/// the bytes of successful reads and writes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MetricsSnapshot {
    /// Calls of `read_at`.
    pub reads: u64,
    /// Calls of `write_at`.
    pub writes: u64,
    /// Bytes returned by successful `read_at` calls.
    pub bytes_read: u64,
    /// Bytes stored by successful `write_at` calls.
    pub bytes_written: u64,
    /// Calls of `sync`.
    pub syncs: u64,
    /// Calls of `set_len`.
    pub set_lens: u64,
    /// Calls of `len`.
    pub lens: u64,
    /// Calls of `lock`.
    pub locks: u64,
    /// Calls of `unlock`.
    pub unlocks: u64,
}

impl MetricsSnapshot {
    /// The counts accumulated since `earlier` (field-wise difference, saturating at 0).
    pub fn since(&self, earlier: &MetricsSnapshot) -> MetricsSnapshot {
        MetricsSnapshot {
            reads: self.reads.saturating_sub(earlier.reads),
            writes: self.writes.saturating_sub(earlier.writes),
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
            syncs: self.syncs.saturating_sub(earlier.syncs),
            set_lens: self.set_lens.saturating_sub(earlier.set_lens),
            lens: self.lens.saturating_sub(earlier.lens),
            locks: self.locks.saturating_sub(earlier.locks),
            unlocks: self.unlocks.saturating_sub(earlier.unlocks),
        }
    }
}

impl fmt::Display for MetricsSnapshot {
    /// One line, e.g.
    /// `reads=2 bytes_read=16 writes=1 bytes_written=8 syncs=0 set_lens=0 lens=1 locks=0 unlocks=0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "reads={} bytes_read={} writes={} bytes_written={} syncs={} set_lens={} lens={} locks={} unlocks={}",
            self.reads,
            self.bytes_read,
            self.writes,
            self.bytes_written,
            self.syncs,
            self.set_lens,
            self.lens,
            self.locks,
            self.unlocks
        )
    }
}

/// One entry of the [`Metrics`] op log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpRecord {
    /// The operation called.
    pub op: IoOp,
    /// Byte offset for `read`/`write`; 0 for the other operations.
    pub offset: u64,
    /// Byte count for `read`/`write`, the requested length for `set_len`;
    /// 0 for the other operations.
    pub len: u64,
}

impl OpRecord {
    /// A record of `op` at `offset` for `len` bytes.
    pub const fn new(op: IoOp, offset: u64, len: u64) -> Self {
        OpRecord { op, offset, len }
    }
}

/// Decorator counting calls and bytes per [`IoOp`], and optionally logging every
/// call in call order.
///
/// Counters are atomics; the op log is a `Mutex<Vec<OpRecord>>` appended when
/// a call starts (before it reaches the inner storage), so with one caller
/// thread the log is exactly the call sequence. Failed calls are logged and
/// counted too.
///
/// ```
/// use h5_io::{IoOp, MemoryStorage, Metrics, OpRecord, Storage};
///
/// let m = Metrics::new(MemoryStorage::new());
/// m.record_ops(true);
/// m.write_at(0x100, &[1; 8])?;
/// m.write_at(0x200, &[2; 8])?;
/// assert_eq!(m.snapshot().writes, 2);
/// assert_eq!(
///     m.ops(),
///     [OpRecord::new(IoOp::Write, 0x100, 8), OpRecord::new(IoOp::Write, 0x200, 8)]
/// );
/// # Ok::<(), h5_io::Error>(())
/// ```
#[derive(Debug)]
pub struct Metrics<S> {
    inner: S,
    reads: AtomicU64,
    writes: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    syncs: AtomicU64,
    set_lens: AtomicU64,
    lens: AtomicU64,
    locks: AtomicU64,
    unlocks: AtomicU64,
    recording: AtomicBool,
    log: Mutex<Vec<OpRecord>>,
}

impl<S> Metrics<S> {
    /// Wrap `inner` with all counters at zero and op recording off.
    pub fn new(inner: S) -> Self {
        Metrics {
            inner,
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            set_lens: AtomicU64::new(0),
            lens: AtomicU64::new(0),
            locks: AtomicU64::new(0),
            unlocks: AtomicU64::new(0),
            recording: AtomicBool::new(false),
            log: Mutex::new(Vec::new()),
        }
    }

    /// The wrapped storage.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Unwrap, discarding the counters.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The current counter values.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MetricsSnapshot {
            reads: get(&self.reads),
            writes: get(&self.writes),
            bytes_read: get(&self.bytes_read),
            bytes_written: get(&self.bytes_written),
            syncs: get(&self.syncs),
            set_lens: get(&self.set_lens),
            lens: get(&self.lens),
            locks: get(&self.locks),
            unlocks: get(&self.unlocks),
        }
    }

    /// Set every counter to zero. The op log is left alone (see [`clear_ops`](Self::clear_ops)).
    pub fn reset(&self) {
        for c in [
            &self.reads,
            &self.writes,
            &self.bytes_read,
            &self.bytes_written,
            &self.syncs,
            &self.set_lens,
            &self.lens,
            &self.locks,
            &self.unlocks,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// Turn the op log on or off. Turning it off keeps what was recorded.
    pub fn record_ops(&self, enabled: bool) {
        self.recording.store(enabled, Ordering::SeqCst);
    }

    /// The recorded operations, in call order.
    pub fn ops(&self) -> Vec<OpRecord> {
        self.log_guard().clone()
    }

    /// The recorded operations of kind `op`, in call order.
    pub fn ops_of(&self, op: IoOp) -> Vec<OpRecord> {
        self.log_guard()
            .iter()
            .filter(|r| r.op == op)
            .copied()
            .collect()
    }

    /// Empty the op log.
    pub fn clear_ops(&self) {
        self.log_guard().clear();
    }

    fn log_guard(&self) -> MutexGuard<'_, Vec<OpRecord>> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Count one call and log it if recording.
    fn enter(&self, counter: &AtomicU64, op: IoOp, offset: u64, len: u64) {
        counter.fetch_add(1, Ordering::Relaxed);
        if self.recording.load(Ordering::SeqCst) {
            self.log_guard().push(OpRecord { op, offset, len });
        }
    }
}

impl<S: Storage> Storage for Metrics<S> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = len_u64(buf.len());
        self.enter(&self.reads, IoOp::Read, offset, len);
        self.inner.read_at(offset, buf)?;
        self.bytes_read.fetch_add(len, Ordering::Relaxed);
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let len = len_u64(data.len());
        self.enter(&self.writes, IoOp::Write, offset, len);
        self.inner.write_at(offset, data)?;
        self.bytes_written.fetch_add(len, Ordering::Relaxed);
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        self.enter(&self.lens, IoOp::Len, 0, 0);
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.enter(&self.set_lens, IoOp::SetLen, 0, len);
        self.inner.set_len(len)
    }

    fn sync(&self) -> Result<()> {
        self.enter(&self.syncs, IoOp::Sync, 0, 0);
        self.inner.sync()
    }

    fn lock(&self, mode: LockMode) -> Result<()> {
        self.enter(&self.locks, IoOp::Lock, 0, 0);
        self.inner.lock(mode)
    }

    fn unlock(&self) -> Result<()> {
        self.enter(&self.unlocks, IoOp::Unlock, 0, 0);
        self.inner.unlock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Error, MemoryStorage, StorageExt};

    #[test]
    fn exact_counts_after_script() {
        let m = Metrics::new(MemoryStorage::new());
        m.write_at(0, &[1; 10]).unwrap();
        m.write_at(10, &[2; 6]).unwrap();
        let mut buf = [0; 4];
        m.read_at(2, &mut buf).unwrap();
        // Failed read: counted as a call, no bytes.
        assert!(matches!(
            m.read_at(100, &mut buf),
            Err(Error::OutOfBounds { .. })
        ));
        m.sync().unwrap();
        m.set_len(8).unwrap();
        assert_eq!(m.len().unwrap(), 8);
        m.lock(LockMode::Shared).unwrap();
        m.unlock().unwrap();
        // read_vec = len + read.
        assert_eq!(m.read_vec(0, 3).unwrap(), [1, 1, 1]);
        assert_eq!(
            m.snapshot(),
            MetricsSnapshot {
                reads: 3,
                writes: 2,
                bytes_read: 7,
                bytes_written: 16,
                syncs: 1,
                set_lens: 1,
                lens: 2,
                locks: 1,
                unlocks: 1,
            }
        );
        assert_eq!(
            m.snapshot().to_string(),
            "reads=3 bytes_read=7 writes=2 bytes_written=16 syncs=1 set_lens=1 lens=2 locks=1 unlocks=1"
        );
        let before = m.snapshot();
        m.write_at(0, &[0; 3]).unwrap();
        let delta = m.snapshot().since(&before);
        assert_eq!(
            delta,
            MetricsSnapshot {
                writes: 1,
                bytes_written: 3,
                ..Default::default()
            }
        );
        m.reset();
        assert_eq!(m.snapshot(), MetricsSnapshot::default());
        assert_eq!(m.into_inner().snapshot(), [0, 0, 0, 1, 1, 1, 1, 1]);
    }

    #[test]
    fn op_log_in_call_order() {
        let m = Metrics::new(MemoryStorage::new());
        m.write_at(0, &[1; 4]).unwrap(); // not recorded
        m.record_ops(true);
        m.write_at(0x100, &[1; 16]).unwrap();
        m.write_at(0x200, &[2; 32]).unwrap();
        let mut buf = [0; 8];
        m.read_at(0x100, &mut buf).unwrap();
        let _ = m.read_at(0x1000, &mut buf);
        m.set_len(0x300).unwrap();
        m.sync().unwrap();
        m.len().unwrap();
        m.lock(LockMode::Exclusive).unwrap();
        m.unlock().unwrap();
        m.record_ops(false);
        m.sync().unwrap(); // not recorded
        assert_eq!(
            m.ops(),
            [
                OpRecord::new(IoOp::Write, 0x100, 16),
                OpRecord::new(IoOp::Write, 0x200, 32),
                OpRecord::new(IoOp::Read, 0x100, 8),
                OpRecord::new(IoOp::Read, 0x1000, 8),
                OpRecord::new(IoOp::SetLen, 0, 0x300),
                OpRecord::new(IoOp::Sync, 0, 0),
                OpRecord::new(IoOp::Len, 0, 0),
                OpRecord::new(IoOp::Lock, 0, 0),
                OpRecord::new(IoOp::Unlock, 0, 0),
            ]
        );
        assert_eq!(
            m.ops_of(IoOp::Write)
                .iter()
                .map(|r| r.offset)
                .collect::<Vec<_>>(),
            [0x100, 0x200]
        );
        m.clear_ops();
        assert!(m.ops().is_empty());
    }

    #[test]
    fn works_over_arc_dyn() {
        let inner: std::sync::Arc<dyn Storage> = std::sync::Arc::new(MemoryStorage::new());
        let m = Metrics::new(std::sync::Arc::clone(&inner));
        m.write_at(3, b"xyz").unwrap();
        assert_eq!(inner.len().unwrap(), 6);
        assert_eq!(m.snapshot().bytes_written, 3);
    }
}
