//! External raw data storage (the external data files message): a dataset's contiguous bytes
//! stored in other files, one segment after another. They are presented to the chunk cache as
//! one read-only [`Storage`] whose address space is the concatenation of the segments.

use std::sync::Arc;

use h5_io::{Error as IoError, IoOp, LockMode, Storage, StorageExt};

/// One segment: `size` bytes at `offset` of `file`.
#[derive(Clone, Debug)]
pub struct Segment {
    /// The external file.
    pub file: Arc<dyn Storage>,
    /// Where the data starts in it.
    pub offset: u64,
    /// Bytes of the dataset it holds.
    pub size: u64,
}

/// The segments of an external dataset as one address space starting at 0. Bytes a segment
/// declares but its file does not have read as zeros (libhdf5 does the same).
#[derive(Clone, Debug)]
pub struct ExternalStorage {
    segments: Vec<Segment>,
    len: u64,
}

impl ExternalStorage {
    /// The concatenation of `segments`.
    pub fn new(segments: Vec<Segment>) -> Self {
        let len = segments.iter().fold(0u64, |a, s| a.saturating_add(s.size));
        Self { segments, len }
    }
}

fn read_only(offset: u64) -> IoError {
    IoError::Io {
        op: IoOp::Write,
        offset,
        source: std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "external raw data is read-only",
        ),
    }
}

impl Storage for ExternalStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> h5_io::Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .ok_or(IoError::AddressOverflow {
                offset,
                len: buf.len() as u64,
            })?;
        if end > self.len {
            return Err(IoError::OutOfBounds {
                offset,
                len: buf.len() as u64,
                file_len: self.len,
            });
        }
        let mut start = 0u64;
        for s in &self.segments {
            // Saturates like `len`: bytes past u64::MAX are never asked for (end <= len).
            let seg_end = start.saturating_add(s.size);
            let lo = offset.max(start);
            let hi = end.min(seg_end);
            if lo < hi {
                #[allow(
                    clippy::arithmetic_side_effects,
                    clippy::indexing_slicing,
                    reason = "offset <= lo < hi <= end = offset + buf.len(): the range lies in buf"
                )]
                let dst = &mut buf[(lo - offset) as usize..(hi - offset) as usize];
                #[allow(clippy::arithmetic_side_effects, reason = "start <= lo")]
                let into_segment = lo - start;
                let at = s
                    .offset
                    .checked_add(into_segment)
                    .ok_or(IoError::AddressOverflow {
                        offset: s.offset,
                        len: into_segment,
                    })?;
                s.file.read_at_zero_fill(at, dst)?;
            }
            start = seg_end;
        }
        Ok(())
    }

    fn write_at(&self, offset: u64, _data: &[u8]) -> h5_io::Result<()> {
        Err(read_only(offset))
    }

    fn len(&self) -> h5_io::Result<u64> {
        Ok(self.len)
    }

    fn set_len(&self, _len: u64) -> h5_io::Result<()> {
        Err(read_only(0))
    }

    fn sync(&self) -> h5_io::Result<()> {
        Ok(())
    }

    fn lock(&self, _mode: LockMode) -> h5_io::Result<()> {
        Ok(())
    }

    fn unlock(&self) -> h5_io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use h5_io::MemoryStorage;

    #[test]
    fn segments_concatenate_and_short_files_read_as_zeros() {
        let a = Arc::new(MemoryStorage::new());
        a.write_at(0, &[9, 9, 1, 2, 3]).unwrap();
        let b = Arc::new(MemoryStorage::new());
        b.write_at(0, &[4, 5]).unwrap();
        let s = ExternalStorage::new(vec![
            Segment {
                file: a,
                offset: 2,
                size: 3,
            },
            Segment {
                file: b,
                offset: 0,
                size: 4,
            },
        ]);
        assert_eq!(s.len().unwrap(), 7);
        let mut buf = [0xFFu8; 7];
        s.read_at(0, &mut buf).unwrap();
        assert_eq!(buf, [1, 2, 3, 4, 5, 0, 0]);
        let mut two = [0u8; 2];
        s.read_at(2, &mut two).unwrap();
        assert_eq!(two, [3, 4]);
        assert!(s.read_at(6, &mut two).is_err());
        assert!(s.write_at(0, &[1]).is_err());
    }

    #[test]
    fn a_segment_offset_near_the_address_limit_is_an_error() {
        let s = ExternalStorage::new(vec![Segment {
            file: Arc::new(MemoryStorage::new()),
            offset: u64::MAX - 1,
            size: 8,
        }]);
        let mut buf = [0u8; 4];
        let e = s.read_at(4, &mut buf).unwrap_err();
        assert!(matches!(e, IoError::AddressOverflow { .. }), "{e:?}");
    }
}
