//! Call and byte counters, with an optional in-order log of operations.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::error::{IoOp, Result, len_u64};
use crate::storage::{CommitPoint, LockMode, ReadSegment, Storage, WriteSegment};

/// Counter values of a [`Metrics`] decorator at one moment.
///
/// Call counters count every call, successful or not; byte counters count only
/// the bytes of successful reads and writes, vectored ones included. A vectored
/// call counts once in `read_vectors` / `write_vectors` and once per segment in
/// `read_segments` / `write_segments`, never in `reads` / `writes`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MetricsSnapshot {
    /// Calls of `read_at`.
    pub reads: u64,
    /// Calls of `write_at`.
    pub writes: u64,
    /// Bytes returned by successful `read_at` and `read_vectored` calls.
    pub bytes_read: u64,
    /// Bytes stored by successful `write_at` and `write_vectored` calls.
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
    /// Calls of `read_vectored`.
    pub read_vectors: u64,
    /// Calls of `write_vectored`.
    pub write_vectors: u64,
    /// Segments passed to `read_vectored` calls.
    pub read_segments: u64,
    /// Segments passed to `write_vectored` calls.
    pub write_segments: u64,
    /// Calls of `commit`.
    pub commits: u64,
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
            read_vectors: self.read_vectors.saturating_sub(earlier.read_vectors),
            write_vectors: self.write_vectors.saturating_sub(earlier.write_vectors),
            read_segments: self.read_segments.saturating_sub(earlier.read_segments),
            write_segments: self.write_segments.saturating_sub(earlier.write_segments),
            commits: self.commits.saturating_sub(earlier.commits),
        }
    }
}

impl fmt::Display for MetricsSnapshot {
    /// One line, e.g.
    /// `reads=2 bytes_read=16 writes=1 bytes_written=8 syncs=0 set_lens=0 lens=1 locks=0 unlocks=0
    /// read_vectors=0 read_segments=0 write_vectors=0 write_segments=0 commits=0` (without the line
    /// break).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "reads={} bytes_read={} writes={} bytes_written={} syncs={} set_lens={} lens={} locks={} unlocks={} \
             read_vectors={} read_segments={} write_vectors={} write_segments={} commits={}",
            self.reads,
            self.bytes_read,
            self.writes,
            self.bytes_written,
            self.syncs,
            self.set_lens,
            self.lens,
            self.locks,
            self.unlocks,
            self.read_vectors,
            self.read_segments,
            self.write_vectors,
            self.write_segments,
            self.commits
        )
    }
}

/// One entry of the [`Metrics`] op log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpRecord {
    /// The operation called.
    pub op: IoOp,
    /// Byte offset for `read`/`write` and for one segment of
    /// `read_vectored`/`write_vectored`; 0 for the other operations.
    pub offset: u64,
    /// Byte count for `read`/`write` and for one segment of
    /// `read_vectored`/`write_vectored`, the requested length for `set_len`;
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
/// A vectored call is logged as one record per segment, in slice order, with
/// op [`IoOp::ReadVectored`] or [`IoOp::WriteVectored`] and the segment's
/// offset and length (a call with no segments leaves no record), so
/// [`ops_of(IoOp::Read)`](Self::ops_of) and `ops_of(IoOp::Write)` see only
/// single-range calls.
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
///
/// Vectored calls:
///
/// ```
/// use h5_io::{IoOp, MemoryStorage, Metrics, OpRecord, Storage, WriteSegment};
///
/// let m = Metrics::new(MemoryStorage::new());
/// m.record_ops(true);
/// m.write_vectored(&[WriteSegment::new(0x200, &[2; 8]), WriteSegment::new(0x100, &[1; 4])])?;
/// let snap = m.snapshot();
/// assert_eq!((snap.write_vectors, snap.write_segments, snap.writes), (1, 2, 0));
/// assert_eq!(snap.bytes_written, 12);
/// assert_eq!(
///     m.ops_of(IoOp::WriteVectored),
///     [OpRecord::new(IoOp::WriteVectored, 0x200, 8), OpRecord::new(IoOp::WriteVectored, 0x100, 4)]
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
    read_vectors: AtomicU64,
    write_vectors: AtomicU64,
    read_segments: AtomicU64,
    write_segments: AtomicU64,
    commits: AtomicU64,
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
            read_vectors: AtomicU64::new(0),
            write_vectors: AtomicU64::new(0),
            read_segments: AtomicU64::new(0),
            write_segments: AtomicU64::new(0),
            commits: AtomicU64::new(0),
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
            read_vectors: get(&self.read_vectors),
            write_vectors: get(&self.write_vectors),
            read_segments: get(&self.read_segments),
            write_segments: get(&self.write_segments),
            commits: get(&self.commits),
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
            &self.read_vectors,
            &self.write_vectors,
            &self.read_segments,
            &self.write_segments,
            &self.commits,
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

    /// Count one vectored call of `segments.len()` segments and log one record
    /// per segment if recording.
    fn enter_vectored(
        &self,
        calls: &AtomicU64,
        segment_count: &AtomicU64,
        op: IoOp,
        segments: impl ExactSizeIterator<Item = (u64, u64)>,
    ) {
        calls.fetch_add(1, Ordering::Relaxed);
        segment_count.fetch_add(len_u64(segments.len()), Ordering::Relaxed);
        if self.recording.load(Ordering::SeqCst) {
            self.log_guard()
                .extend(segments.map(|(offset, len)| OpRecord { op, offset, len }));
        }
    }
}

#[deny(clippy::missing_trait_methods)]
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

    fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> Result<()> {
        self.enter_vectored(
            &self.read_vectors,
            &self.read_segments,
            IoOp::ReadVectored,
            segments.iter().map(|s| (s.offset, len_u64(s.buf.len()))),
        );
        self.inner.read_vectored(segments)?;
        let bytes: u64 = segments.iter().map(|s| len_u64(s.buf.len())).sum();
        self.bytes_read.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }

    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> Result<()> {
        self.enter_vectored(
            &self.write_vectors,
            &self.write_segments,
            IoOp::WriteVectored,
            segments.iter().map(|s| (s.offset, len_u64(s.data.len()))),
        );
        self.inner.write_vectored(segments)?;
        let bytes: u64 = segments.iter().map(|s| len_u64(s.data.len())).sum();
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }

    fn commit(&self, point: &CommitPoint) -> Result<()> {
        self.enter(&self.commits, IoOp::Commit, 0, 0);
        self.inner.commit(point)
    }

    fn journals_overwrites(&self) -> bool {
        self.inner.journals_overwrites()
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
                ..Default::default()
            }
        );
        assert_eq!(
            m.snapshot().to_string(),
            "reads=3 bytes_read=7 writes=2 bytes_written=16 syncs=1 set_lens=1 lens=2 locks=1 unlocks=1 \
             read_vectors=0 read_segments=0 write_vectors=0 write_segments=0 commits=0"
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
    fn vector_calls_and_segments_counted_apart() {
        use crate::{ReadSegment, WriteSegment};
        let m = Metrics::new(MemoryStorage::new());
        m.write_at(0, &[1; 4]).unwrap(); // not recorded
        m.record_ops(true);
        m.write_vectored(&[
            WriteSegment::new(0x200, &[2; 32]),
            WriteSegment::new(0x100, &[1; 16]),
            WriteSegment::new(0x110, &[3; 16]),
        ])
        .unwrap();
        m.write_vectored(&[]).unwrap();
        let (mut a, mut b) = ([0; 8], [0; 4]);
        m.read_vectored(&mut [ReadSegment::new(0x100, &mut a), ReadSegment::new(0, &mut b)])
            .unwrap();
        assert_eq!((a, b), ([1; 8], [1; 4]));
        // Failed vector read: call and segments counted, no bytes.
        assert!(matches!(
            m.read_vectored(&mut [
                ReadSegment::new(0, &mut b),
                ReadSegment::new(0x1000, &mut a)
            ]),
            Err(Error::OutOfBounds { offset: 0x1000, .. })
        ));
        m.read_at(0, &mut b).unwrap();
        assert_eq!(
            m.snapshot(),
            MetricsSnapshot {
                reads: 1,
                writes: 1,
                bytes_read: 8 + 4 + 4,
                bytes_written: 4 + 64,
                read_vectors: 2,
                write_vectors: 2,
                read_segments: 4,
                write_segments: 3,
                ..Default::default()
            }
        );
        // One record per segment, in slice order; Read/Write filters see only
        // the single-range calls.
        assert_eq!(
            m.ops_of(IoOp::WriteVectored),
            [
                OpRecord::new(IoOp::WriteVectored, 0x200, 32),
                OpRecord::new(IoOp::WriteVectored, 0x100, 16),
                OpRecord::new(IoOp::WriteVectored, 0x110, 16),
            ]
        );
        assert_eq!(
            m.ops_of(IoOp::ReadVectored),
            [
                OpRecord::new(IoOp::ReadVectored, 0x100, 8),
                OpRecord::new(IoOp::ReadVectored, 0, 4),
                OpRecord::new(IoOp::ReadVectored, 0, 4),
                OpRecord::new(IoOp::ReadVectored, 0x1000, 8),
            ]
        );
        assert!(m.ops_of(IoOp::Write).is_empty());
        assert_eq!(m.ops_of(IoOp::Read), [OpRecord::new(IoOp::Read, 0, 4)]);
        assert_eq!(m.ops().len(), 8);
        let before = m.snapshot();
        m.write_vectored(&[WriteSegment::new(0, &[5; 2])]).unwrap();
        assert_eq!(
            m.snapshot().since(&before),
            MetricsSnapshot {
                write_vectors: 1,
                write_segments: 1,
                bytes_written: 2,
                ..Default::default()
            }
        );
        assert!(m.snapshot().to_string().ends_with(
            "read_vectors=2 read_segments=4 write_vectors=3 write_segments=4 commits=0"
        ));
        m.reset();
        assert_eq!(m.snapshot(), MetricsSnapshot::default());
    }

    #[test]
    fn vector_calls_reach_the_inner_vector_methods() {
        use crate::{ReadSegment, WriteSegment};
        // Metrics over Metrics: the outer one must forward vector calls as
        // vector calls, not fall back to per-segment read_at/write_at.
        let m = Metrics::new(Metrics::new(MemoryStorage::new()));
        m.write_vectored(&[WriteSegment::new(0, &[1]), WriteSegment::new(2, &[2])])
            .unwrap();
        let mut a = [0; 3];
        m.read_vectored(&mut [ReadSegment::new(0, &mut a)]).unwrap();
        let inner = m.inner().snapshot();
        assert_eq!(
            (inner.writes, inner.write_vectors, inner.write_segments),
            (0, 1, 2)
        );
        assert_eq!(
            (inner.reads, inner.read_vectors, inner.read_segments),
            (0, 1, 1)
        );
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
