//! In-memory backend.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::error::{Error, IoOp, Result, checked_end, len_u64};
use crate::storage::{CommitPoint, LockMode, ReadSegment, Storage, WriteSegment, check_segments};

/// State shared by all clones of one [`MemoryStorage`].
struct Shared {
    data: RwLock<Vec<u8>>,
    /// Lock held by each handle, keyed by handle id.
    locks: Mutex<HashMap<u64, LockMode>>,
    next_handle: AtomicU64,
}

/// A storage backed by a `Vec<u8>` in memory.
///
/// Cloning opens a new *handle* on the same bytes: clones share the buffer and
/// a lock table, so two clones conflict on [`lock`](Storage::lock) exactly as
/// two handles opened on the same file would. A handle's lock is released when
/// it is dropped. (To share one handle, put it in an `Arc`.)
///
/// ```
/// use h5_io::{LockMode, MemoryStorage, Storage};
///
/// let a = MemoryStorage::new();
/// let b = a.clone();
/// a.write_at(0, b"abc")?;
/// assert_eq!(b.snapshot(), b"abc");
/// a.lock(LockMode::Exclusive)?;
/// assert!(matches!(b.lock(LockMode::Shared), Err(h5_io::Error::Locked)));
/// # Ok::<(), h5_io::Error>(())
/// ```
pub struct MemoryStorage {
    shared: Arc<Shared>,
    handle: u64,
}

impl MemoryStorage {
    /// An empty storage.
    pub fn new() -> Self {
        Self::with_data(Vec::new())
    }

    /// A storage whose initial contents are `data`.
    pub fn with_data(data: Vec<u8>) -> Self {
        MemoryStorage {
            shared: Arc::new(Shared {
                data: RwLock::new(data),
                locks: Mutex::new(HashMap::new()),
                next_handle: AtomicU64::new(1),
            }),
            handle: 0,
        }
    }

    /// A copy of the current contents.
    pub fn snapshot(&self) -> Vec<u8> {
        self.data_read().clone()
    }

    fn data_read(&self) -> std::sync::RwLockReadGuard<'_, Vec<u8>> {
        // A panic while holding the lock cannot leave the Vec itself invalid.
        self.shared
            .data
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn data_write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<u8>> {
        self.shared
            .data
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_table(&self) -> std::sync::MutexGuard<'_, HashMap<u64, LockMode>> {
        self.shared
            .locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Grow `data` to `new_len` zero bytes, reporting allocation failure as an error
/// instead of aborting.
fn grow(data: &mut Vec<u8>, new_len: u64, op: IoOp, offset: u64) -> Result<()> {
    let too_big = || Error::Io {
        op,
        offset,
        source: io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("in-memory storage cannot grow to {new_len} bytes"),
        ),
    };
    let new_len = usize::try_from(new_len).map_err(|_| too_big())?;
    if new_len > data.len() {
        data.try_reserve_exact(new_len - data.len())
            .map_err(|_| too_big())?;
        data.resize(new_len, 0);
    }
    Ok(())
}

/// A `u64` offset that is known to be `<=` some buffer length, as `usize`.
fn index(pos: u64) -> usize {
    usize::try_from(pos).unwrap_or(usize::MAX)
}

impl Default for MemoryStorage {
    fn default() -> Self {
        Self::new()
    }
}

impl Clone for MemoryStorage {
    /// A new handle on the same bytes and lock table, holding no lock.
    fn clone(&self) -> Self {
        MemoryStorage {
            shared: Arc::clone(&self.shared),
            handle: self.shared.next_handle.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl Drop for MemoryStorage {
    fn drop(&mut self) {
        let handle = self.handle;
        self.lock_table().remove(&handle);
    }
}

impl fmt::Debug for MemoryStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStorage")
            .field("handle", &self.handle)
            .field("len", &self.data_read().len())
            .finish()
    }
}

#[deny(clippy::missing_trait_methods)]
impl Storage for MemoryStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = len_u64(buf.len());
        let end = checked_end(offset, len)?;
        let data = self.data_read();
        let file_len = len_u64(data.len());
        if end > file_len {
            return Err(Error::OutOfBounds {
                offset,
                len,
                file_len,
            });
        }
        buf.copy_from_slice(&data[index(offset)..index(end)]);
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let end = checked_end(offset, len_u64(data.len()))?;
        if data.is_empty() {
            return Ok(());
        }
        let mut buf = self.data_write();
        grow(&mut buf, end, IoOp::Write, offset)?;
        buf[index(offset)..index(end)].copy_from_slice(data);
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        Ok(len_u64(self.data_read().len()))
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let mut buf = self.data_write();
        if len <= len_u64(buf.len()) {
            buf.truncate(index(len));
            Ok(())
        } else {
            grow(&mut buf, len, IoOp::SetLen, len)
        }
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn lock(&self, mode: LockMode) -> Result<()> {
        let mut table = self.lock_table();
        let conflict = table.iter().any(|(&holder, &held)| {
            holder != self.handle && (mode == LockMode::Exclusive || held == LockMode::Exclusive)
        });
        if conflict {
            return Err(Error::Locked);
        }
        table.insert(self.handle, mode);
        Ok(())
    }

    fn unlock(&self) -> Result<()> {
        self.lock_table().remove(&self.handle);
        Ok(())
    }

    /// One read-lock acquisition for the whole call; every segment is checked
    /// (overflow, then bounds) before any byte is copied, so on error the
    /// buffers are unchanged.
    fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> Result<()> {
        check_segments(segments.iter().map(|s| (s.offset, s.buf.len())))?;
        let data = self.data_read();
        let file_len = len_u64(data.len());
        for seg in segments.iter() {
            let len = len_u64(seg.buf.len());
            // Cannot overflow: checked above.
            let end = checked_end(seg.offset, len)?;
            if end > file_len {
                return Err(Error::OutOfBounds {
                    offset: seg.offset,
                    len,
                    file_len,
                });
            }
        }
        for seg in segments.iter_mut() {
            let start = index(seg.offset);
            let end = start + seg.buf.len();
            seg.buf.copy_from_slice(&data[start..end]);
        }
        Ok(())
    }

    /// One write-lock acquisition for the whole call; the buffer is grown once,
    /// to the largest segment end, before any byte is copied, so a failed call
    /// (overflow or allocation failure) writes nothing.
    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> Result<()> {
        let mut new_end: Option<(u64, u64)> = None;
        for seg in segments {
            let end = checked_end(seg.offset, len_u64(seg.data.len()))?;
            if !seg.data.is_empty() && new_end.is_none_or(|(e, _)| end > e) {
                new_end = Some((end, seg.offset));
            }
        }
        let Some((max_end, at)) = new_end else {
            return Ok(()); // no segment has data
        };
        let mut buf = self.data_write();
        grow(&mut buf, max_end, IoOp::WriteVectored, at)?;
        for seg in segments.iter().filter(|s| !s.data.is_empty()) {
            let start = index(seg.offset);
            buf[start..start + seg.data.len()].copy_from_slice(seg.data);
        }
        Ok(())
    }

    /// Nothing to do: memory keeps no journal.
    fn commit(&self, _point: &CommitPoint) -> Result<()> {
        Ok(())
    }

    /// A backend keeps no journal.
    fn journals_overwrites(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_data_and_snapshot() {
        let s = MemoryStorage::with_data(vec![1, 2, 3]);
        assert_eq!(s.len().unwrap(), 3);
        s.write_at(5, &[9]).unwrap();
        assert_eq!(s.snapshot(), [1, 2, 3, 0, 0, 9]);
    }

    #[test]
    fn clones_share_bytes() {
        let a = MemoryStorage::new();
        let b = a.clone();
        a.write_at(0, b"hello").unwrap();
        assert_eq!(b.snapshot(), b"hello");
        b.set_len(2).unwrap();
        assert_eq!(a.snapshot(), b"he");
    }

    #[test]
    fn lock_conflicts_between_clones() {
        let a = MemoryStorage::new();
        let b = a.clone();
        let c = b.clone();
        a.lock(LockMode::Shared).unwrap();
        b.lock(LockMode::Shared).unwrap();
        assert!(matches!(c.lock(LockMode::Exclusive), Err(Error::Locked)));
        // Upgrade fails while another reader holds a shared lock ...
        assert!(matches!(a.lock(LockMode::Exclusive), Err(Error::Locked)));
        // ... and the failed upgrade keeps the shared lock.
        assert!(matches!(c.lock(LockMode::Exclusive), Err(Error::Locked)));
        b.unlock().unwrap();
        a.lock(LockMode::Exclusive).unwrap();
        assert!(matches!(b.lock(LockMode::Shared), Err(Error::Locked)));
        // Downgrade, then another reader may join.
        a.lock(LockMode::Shared).unwrap();
        b.lock(LockMode::Shared).unwrap();
    }

    #[test]
    fn drop_releases_lock() {
        let a = MemoryStorage::new();
        let b = a.clone();
        b.lock(LockMode::Exclusive).unwrap();
        assert!(matches!(a.lock(LockMode::Shared), Err(Error::Locked)));
        drop(b);
        a.lock(LockMode::Exclusive).unwrap();
    }

    #[test]
    fn arc_shares_one_handle() {
        let a = Arc::new(MemoryStorage::new());
        let b = Arc::clone(&a);
        a.lock(LockMode::Exclusive).unwrap();
        // Same handle: re-locking is not a conflict.
        b.lock(LockMode::Exclusive).unwrap();
    }

    #[test]
    fn huge_growth_is_an_error_not_an_abort() {
        let s = MemoryStorage::new();
        let err = s.write_at(u64::MAX / 2, &[1]).unwrap_err();
        assert!(
            matches!(err, Error::Io { op: IoOp::Write, ref source, .. } if source.kind() == io::ErrorKind::OutOfMemory),
            "{err:?}"
        );
        let err = s.set_len(u64::MAX).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Io {
                    op: IoOp::SetLen,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(s.len().unwrap(), 0);
    }
}
