//! The two faces of a page buffer: storages tagging every request as metadata or raw data.

use std::sync::Arc;

use h5_io::{CommitPoint, LockMode, ReadSegment, Result, Storage, WriteSegment};

use crate::buffer::PageBuffer;
use crate::state::PageKind;

/// A [`Storage`] view of a [`PageBuffer`] whose requests are all of one kind.
#[derive(Debug)]
pub(crate) struct Face {
    pb: Arc<PageBuffer>,
    kind: PageKind,
}

impl Face {
    pub(crate) fn new(pb: Arc<PageBuffer>, kind: PageKind) -> Face {
        Face { pb, kind }
    }
}

#[deny(clippy::missing_trait_methods)]
impl Storage for Face {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.pb.read(self.kind, offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.pb.write(self.kind, offset, data)
    }

    fn len(&self) -> Result<u64> {
        self.pb.len()
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.pb.set_len(len)
    }

    fn sync(&self) -> Result<()> {
        self.pb.sync()
    }

    /// The buffered pages reach the storage below first, so the commit describes the bytes
    /// the file now holds.
    fn commit(&self, point: &CommitPoint) -> Result<()> {
        self.pb.commit(point)
    }

    /// The storage below decides (a journal under the page buffer sees every write-back).
    fn journals_overwrites(&self) -> bool {
        self.pb.inner().journals_overwrites()
    }

    fn lock(&self, mode: LockMode) -> Result<()> {
        self.pb.inner().lock(mode)
    }

    fn unlock(&self) -> Result<()> {
        self.pb.inner().unlock()
    }

    fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> Result<()> {
        if self.pb.page_size().is_none() {
            return self.pb.inner().read_vectored(segments);
        }
        for s in segments.iter() {
            s.offset
                .checked_add(s.buf.len() as u64)
                .ok_or(h5_io::Error::AddressOverflow {
                    offset: s.offset,
                    len: s.buf.len() as u64,
                })?;
        }
        for s in segments.iter_mut() {
            self.pb.read(self.kind, s.offset, s.buf)?;
        }
        Ok(())
    }

    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> Result<()> {
        if self.pb.page_size().is_none() {
            return self.pb.inner().write_vectored(segments);
        }
        for s in segments {
            s.offset
                .checked_add(s.data.len() as u64)
                .ok_or(h5_io::Error::AddressOverflow {
                    offset: s.offset,
                    len: s.data.len() as u64,
                })?;
        }
        for s in segments {
            self.pb.write(self.kind, s.offset, s.data)?;
        }
        Ok(())
    }
}
