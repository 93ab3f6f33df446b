//! Storage for replays: a file of any length up to 2^64 bytes, in memory, whose bytes read as
//! zero until written. Only written pages take memory, so a trace recorded from a large file
//! (addresses far past what fits in memory) replays with memory proportional to what the
//! replay writes.

use std::collections::HashMap;
use std::sync::Mutex;

use h5_io::{Error, LockMode, Result, Storage};

/// Bytes per page allocated on the first write into it.
const PAGE: u64 = 4096;

/// In-memory storage of a given length, zero until written (see the module documentation).
#[derive(Debug, Default)]
pub struct SparseStorage {
    inner: Mutex<Sparse>,
}

#[derive(Debug, Default)]
struct Sparse {
    len: u64,
    /// Page number → the page's bytes (`PAGE` of them).
    pages: HashMap<u64, Box<[u8]>>,
}

impl SparseStorage {
    /// A storage of `len` zero bytes.
    pub fn with_len(len: u64) -> Self {
        SparseStorage {
            inner: Mutex::new(Sparse {
                len,
                pages: HashMap::new(),
            }),
        }
    }

    /// Bytes of pages allocated so far (what the storage holds in memory).
    pub fn allocated(&self) -> u64 {
        self.lock().map_or(0, |s| s.pages.len() as u64 * PAGE)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Sparse>> {
        self.inner.lock().map_err(|_| Error::PreviousIo)
    }
}

/// `offset + len`, or the overflow error.
fn end_of(offset: u64, len: usize) -> Result<u64> {
    offset
        .checked_add(len as u64)
        .ok_or(Error::AddressOverflow {
            offset,
            len: len as u64,
        })
}

/// Calls `f(page, start within page, range of the buffer)` for every page `[offset, offset +
/// len)` touches.
fn for_pages(offset: u64, len: usize, mut f: impl FnMut(u64, usize, std::ops::Range<usize>)) {
    let mut done = 0usize;
    while done < len {
        let at = offset + done as u64;
        let page = at / PAGE;
        let start = (at % PAGE) as usize;
        let n = (PAGE as usize - start).min(len - done);
        f(page, start, done..done + n);
        done += n;
    }
}

#[deny(clippy::missing_trait_methods)]
impl Storage for SparseStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = end_of(offset, buf.len())?;
        let s = self.lock()?;
        if end > s.len {
            return Err(Error::OutOfBounds {
                offset,
                len: buf.len() as u64,
                file_len: s.len,
            });
        }
        for_pages(offset, buf.len(), |page, start, range| {
            let out = &mut buf[range.clone()];
            match s.pages.get(&page) {
                Some(p) => out.copy_from_slice(&p[start..start + range.len()]),
                None => out.fill(0),
            }
        });
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let end = end_of(offset, data.len())?;
        let mut s = self.lock()?;
        for_pages(offset, data.len(), |page, start, range| {
            let p = s
                .pages
                .entry(page)
                .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice());
            p[start..start + range.len()].copy_from_slice(&data[range]);
        });
        s.len = s.len.max(end);
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        Ok(self.lock()?.len)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let mut s = self.lock()?;
        if len < s.len {
            // Bytes past the new end read as zero if the storage grows again.
            s.pages.retain(|&p, _| p * PAGE < len);
            if let Some(p) = s.pages.get_mut(&(len / PAGE)) {
                p[(len % PAGE) as usize..].fill(0);
            }
        }
        s.len = len;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn lock(&self, _mode: LockMode) -> Result<()> {
        Ok(())
    }

    fn unlock(&self) -> Result<()> {
        Ok(())
    }

    fn read_vectored(&self, segments: &mut [h5_io::ReadSegment<'_>]) -> Result<()> {
        for seg in segments.iter_mut() {
            self.read_at(seg.offset, seg.buf)?;
        }
        Ok(())
    }

    fn write_vectored(&self, segments: &[h5_io::WriteSegment<'_>]) -> Result<()> {
        for seg in segments {
            self.write_at(seg.offset, seg.data)?;
        }
        Ok(())
    }

    /// A replay's scratch storage keeps no journal: a commit point has nothing to record.
    fn commit(&self, _point: &h5_io::CommitPoint) -> Result<()> {
        Ok(())
    }

    /// A replay image keeps no journal.
    fn journals_overwrites(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn far_addresses_read_zero_until_written_and_take_only_their_pages() {
        let s = SparseStorage::with_len(u64::MAX);
        let far = u64::MAX - 10_000;
        let mut buf = [7u8; 64];
        s.read_at(far, &mut buf).unwrap();
        assert_eq!(buf, [0u8; 64]);
        // A write across a page boundary.
        let at = 3 * PAGE - 5;
        s.write_at(at, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        s.write_at(far, &[9; 3]).unwrap();
        let mut back = [0u8; 10];
        s.read_at(at - 1, &mut back).unwrap();
        assert_eq!(back, [0, 1, 2, 3, 4, 5, 6, 7, 8, 0]);
        s.read_at(far, &mut buf[..4]).unwrap();
        assert_eq!(&buf[..4], &[9, 9, 9, 0]);
        assert_eq!(s.allocated(), 3 * PAGE);
        assert!(matches!(
            s.read_at(u64::MAX - 1, &mut [0u8; 4]),
            Err(Error::AddressOverflow { .. })
        ));
    }

    #[test]
    fn reads_past_the_length_are_errors_and_truncation_zeroes() {
        let s = SparseStorage::with_len(100);
        assert!(matches!(
            s.read_at(96, &mut [0u8; 8]),
            Err(Error::OutOfBounds { file_len: 100, .. })
        ));
        s.write_at(90, &[5; 20]).unwrap();
        assert_eq!(s.len().unwrap(), 110);
        s.set_len(95).unwrap();
        s.set_len(200).unwrap();
        let mut b = [1u8; 10];
        s.read_at(90, &mut b).unwrap();
        assert_eq!(b, [5, 5, 5, 5, 5, 0, 0, 0, 0, 0]);
    }
}
