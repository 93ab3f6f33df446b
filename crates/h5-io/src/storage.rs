//! The [`Storage`] trait and its blanket conveniences.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use crate::error::{Error, Result, checked_end, len_u64};

/// Advisory lock modes of [`Storage::lock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockMode {
    /// Any number of handles may hold a shared lock at once (readers).
    Shared,
    /// Only one handle may hold an exclusive lock, and no shared ones (a writer).
    Exclusive,
}

impl fmt::Display for LockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LockMode::Shared => "shared",
            LockMode::Exclusive => "exclusive",
        })
    }
}

/// One segment of a [`Storage::read_vectored`] call: read `buf.len()` bytes at
/// `offset` into `buf`.
#[derive(Debug)]
pub struct ReadSegment<'a> {
    /// Byte offset in the storage.
    pub offset: u64,
    /// Destination; its length is the number of bytes to read.
    pub buf: &'a mut [u8],
}

impl<'a> ReadSegment<'a> {
    /// A segment reading `buf.len()` bytes at `offset`.
    pub fn new(offset: u64, buf: &'a mut [u8]) -> Self {
        ReadSegment { offset, buf }
    }
}

/// One segment of a [`Storage::write_vectored`] call: write `data` at `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WriteSegment<'a> {
    /// Byte offset in the storage.
    pub offset: u64,
    /// The bytes to write.
    pub data: &'a [u8],
}

impl<'a> WriteSegment<'a> {
    /// A segment writing `data` at `offset`.
    pub fn new(offset: u64, data: &'a [u8]) -> Self {
        WriteSegment { offset, data }
    }
}

/// Bytes written over a committed state while it is being changed in place, so that readers
/// who do not know the rollback journal refuse the storage instead of reading a mix of two
/// states (see [`Journaled`](crate::Journaled)). At most [`Marker::MAX_LEN`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Marker {
    /// Where the marker goes (inside the committed state).
    pub offset: u64,
    /// The marker's bytes.
    pub bytes: Vec<u8>,
}

impl Marker {
    /// The longest marker a journal header records.
    pub const MAX_LEN: usize = 16;
}

/// What [`Storage::commit`] declares: the bytes now stored are a consistent state to come back
/// to after a crash.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitPoint {
    /// Ranges below the storage's length that the committed state does not use: their bytes
    /// may be overwritten without being kept.
    pub unused: Vec<Range<u64>>,
    /// Marker written over the committed state at the first in-place change after this commit
    /// and removed when the next state is complete (`None`: no marker).
    pub marker: Option<Marker>,
}

/// [`Error::AddressOverflow`] for the first `(offset, len)` whose end overflows
/// `u64`: the up-front check every vectored call makes before any I/O.
pub(crate) fn check_segments(segments: impl IntoIterator<Item = (u64, usize)>) -> Result<()> {
    for (offset, len) in segments {
        checked_end(offset, len_u64(len))?;
    }
    Ok(())
}

/// Minimal object-safe storage trait: a growable array of bytes addressed by
/// 64-bit offsets.
///
/// All methods take `&self` (backends use interior mutability) so a storage can
/// be shared as `Arc<dyn Storage>` across threads. There is no cursor: every
/// read and write names its offset.
///
/// # Contract
///
/// Checked for every implementation by `testkit::run_conformance`:
///
/// * If `offset + len` overflows `u64`, `read_at` and `write_at` fail with
///   [`Error::AddressOverflow`] (checked before anything else).
/// * `read_at` reads exactly `buf.len()` bytes. If the range
///   `offset..offset + buf.len()` does not lie within `0..=len()` it fails with
///   [`Error::OutOfBounds`]; `buf` may then hold some of the bytes that exist
///   (a file read finds the end by a short read, with no length query first). A
///   zero-length read at any offset `<= len()` succeeds.
/// * `write_at` writes all of `data`, growing the storage if needed; a gap
///   between the old end and `offset` reads as zeros. A zero-length write is a
///   no-op at any offset (it does not grow the storage).
/// * `set_len` truncates or grows; grown bytes read as zeros.
/// * `read_vectored` and `write_vectored` take a slice of segments, which may
///   be in any order, need not be adjacent and may overlap. Each segment
///   behaves like the corresponding `read_at` / `write_at` call (bounds,
///   overflow, zero-length segments, zero-filled growth). An empty slice is a
///   no-op that succeeds.
/// * Every segment is checked for overflow before any I/O: if one overflows,
///   the call fails with [`Error::AddressOverflow`] for the first such segment
///   in slice order, and nothing is read or written.
/// * A vectored read that touches bytes past the end fails with
///   [`Error::OutOfBounds`] for the first such segment in slice order. After
///   any error the contents of all the buffers are unspecified (some may have
///   been filled); a read never changes the storage.
/// * A vectored write applies overlapping segments in slice order, so where
///   they overlap the last segment wins, and grows the storage to the largest
///   segment end. If it fails (other than with `AddressOverflow`), some of the
///   segments, possibly only in part, may have been written, as with a failed
///   `write_at`: the caller must treat every segment's range as unknown.
///   Segments that do not overlap may be written in any order.
/// * `lock` is advisory and never blocks: a conflicting lock held through
///   another handle gives [`Error::Locked`]. Locking again in the mode already
///   held succeeds; `unlock` without a lock is a no-op.
/// * `commit` never changes the stored bytes; backends treat it as a no-op.
#[allow(
    clippy::len_without_is_empty,
    reason = "is_empty is provided for every storage by StorageExt"
)]
pub trait Storage: Send + Sync + fmt::Debug {
    /// Read exactly `buf.len()` bytes at `offset`.
    ///
    /// Reading any byte at or past [`len`](Storage::len) is
    /// [`Error::OutOfBounds`] `{ offset, len, file_len }`; the contents of `buf`
    /// are then unspecified. See [`StorageExt::read_at_zero_fill`] for reads that
    /// treat the space past the end as zeros.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;

    /// Write all of `data` at `offset`, extending the storage (zero-filling any
    /// gap) if needed.
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()>;

    /// Current length of the storage in bytes.
    fn len(&self) -> Result<u64>;

    /// Truncate or extend the storage to `len` bytes; extension reads as zeros.
    fn set_len(&self, len: u64) -> Result<()>;

    /// Make all completed writes and length changes durable.
    fn sync(&self) -> Result<()>;

    /// Advisory, non-blocking lock: [`LockMode::Shared`] (readers) or
    /// [`LockMode::Exclusive`] (writer). A conflicting holder gives
    /// [`Error::Locked`].
    ///
    /// Locking in the mode already held is a no-op. Changing mode on a handle
    /// that holds a lock converts it; whether the conversion is atomic depends
    /// on the backend (see [`FileStorage`](crate::FileStorage)).
    fn lock(&self, mode: LockMode) -> Result<()>;

    /// Release the lock taken by [`lock`](Storage::lock); a no-op when no lock
    /// is held.
    fn unlock(&self) -> Result<()>;

    /// Read every segment: `segments[i].buf.len()` bytes at
    /// `segments[i].offset` into `segments[i].buf`.
    ///
    /// The default checks all segments for overflow, then calls
    /// [`read_at`](Storage::read_at) once per segment, in slice order.
    /// Backends override it to do better (one lock acquisition, merged
    /// system calls); decorators forward it so the inner storage's version is
    /// used. See the trait's `# Contract` for the semantics.
    fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> Result<()> {
        check_segments(segments.iter().map(|s| (s.offset, s.buf.len())))?;
        for seg in segments.iter_mut() {
            self.read_at(seg.offset, seg.buf)?;
        }
        Ok(())
    }

    /// Write every segment: `segments[i].data` at `segments[i].offset`, in
    /// slice order where segments overlap.
    ///
    /// The default checks all segments for overflow, then calls
    /// [`write_at`](Storage::write_at) once per segment, in slice order, and
    /// stops at the first error (earlier segments stay written). See the
    /// trait's `# Contract` for the semantics.
    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> Result<()> {
        check_segments(segments.iter().map(|s| (s.offset, s.data.len())))?;
        for seg in segments {
            self.write_at(seg.offset, seg.data)?;
        }
        Ok(())
    }

    /// Declares the bytes now stored a consistent state ([`CommitPoint`]): a crash after this
    /// call comes back to it (or to a later commit) when the storage keeps a rollback journal
    /// ([`Journaled`](crate::Journaled)). Backends and plain decorators do nothing (the
    /// default); decorators forward it. Durability is [`sync`](Storage::sync)'s business.
    fn commit(&self, point: &CommitPoint) -> Result<()> {
        let _ = point;
        Ok(())
    }

    /// Whether every byte of the committed state is saved (journaled) before its first
    /// overwrite since the last [`commit`](Storage::commit), wherever it is, so that a crash
    /// comes back to the committed state whatever the writer overwrote: true for an attached
    /// [`Journaled`](crate::Journaled). Backends say false (the default); decorators forward.
    fn journals_overwrites(&self) -> bool {
        false
    }
}

/// Conveniences, blanket-implemented for every `T: Storage + ?Sized`.
///
/// Each method is built on the [`Storage`] methods, so decorators such as
/// [`Metrics`](crate::Metrics) see the underlying calls (for instance
/// [`read_vec`](StorageExt::read_vec) is one `len` then one `read`).
pub trait StorageExt: Storage {
    /// Like [`Storage::read_at`] but bytes past [`len`](Storage::len) read as
    /// zeros (HDF5 semantics for space that is allocated but never written).
    ///
    /// Calls `read_at` once when every byte exists (the common case); only when that read
    /// reaches past the end, `len` once and `read_at` again for the part that exists (if any).
    fn read_at_zero_fill(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = len_u64(buf.len());
        let end = checked_end(offset, len)?;
        match self.read_at(offset, buf) {
            Err(Error::OutOfBounds { .. }) => {}
            other => return other,
        }
        let file_len = self.len()?;
        if end <= file_len {
            return self.read_at(offset, buf);
        }
        let available = file_len.saturating_sub(offset).min(len);
        // `available <= buf.len()`, so it fits in usize.
        let split = usize::try_from(available).unwrap_or(buf.len());
        let (present, missing) = buf.split_at_mut(split);
        if !present.is_empty() {
            self.read_at(offset, present)?;
        }
        missing.fill(0);
        Ok(())
    }

    /// Read `len` bytes at `offset` into a new `Vec`.
    ///
    /// The range is checked against the storage length first (one `len` call),
    /// so a huge length read from a corrupt file gives
    /// [`Error::OutOfBounds`] instead of a huge allocation.
    fn read_vec(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let len64 = len_u64(len);
        let end = checked_end(offset, len64)?;
        let file_len = self.len()?;
        if end > file_len {
            return Err(Error::OutOfBounds {
                offset,
                len: len64,
                file_len,
            });
        }
        let mut buf = vec![0; len];
        self.read_at(offset, &mut buf)?;
        Ok(buf)
    }

    /// Whether [`len`](Storage::len) is zero.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
}

impl<T: Storage + ?Sized> StorageExt for T {}

macro_rules! forward_storage {
    () => {
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
            (**self).read_at(offset, buf)
        }
        fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
            (**self).write_at(offset, data)
        }
        fn len(&self) -> Result<u64> {
            (**self).len()
        }
        fn set_len(&self, len: u64) -> Result<()> {
            (**self).set_len(len)
        }
        fn sync(&self) -> Result<()> {
            (**self).sync()
        }
        fn lock(&self, mode: LockMode) -> Result<()> {
            (**self).lock(mode)
        }
        fn unlock(&self) -> Result<()> {
            (**self).unlock()
        }
        fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> Result<()> {
            (**self).read_vectored(segments)
        }
        fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> Result<()> {
            (**self).write_vectored(segments)
        }
        fn commit(&self, point: &CommitPoint) -> Result<()> {
            (**self).commit(point)
        }
        fn journals_overwrites(&self) -> bool {
            (**self).journals_overwrites()
        }
    };
}

/// Shared storage: `Arc<dyn Storage>` is itself a storage, so decorators can wrap it.
#[deny(clippy::missing_trait_methods)]
impl<T: Storage + ?Sized> Storage for Arc<T> {
    forward_storage!();
}

/// Boxed storage: `Box<dyn Storage>` is itself a storage.
#[deny(clippy::missing_trait_methods)]
impl<T: Storage + ?Sized> Storage for Box<T> {
    forward_storage!();
}

/// Borrowed storage: a decorator can wrap `&S` for a scoped measurement.
#[deny(clippy::missing_trait_methods)]
impl<T: Storage + ?Sized> Storage for &T {
    forward_storage!();
}
