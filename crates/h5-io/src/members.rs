//! One address space served by several member files, read-only: libhdf5's family driver
//! (the space cut into members of one size) and its multi driver (each member serving the
//! addresses from its start up to the next member's start; the split driver is a multi
//! layout of two members).
//!
//! Invariants: members are sorted by start and their ranges do not overlap; a member serves
//! `start .. start + limit`, where bytes past its file's length and below the limit read as
//! zeros (as libhdf5's drivers read the space between a member's end of file and its end of
//! address); the storage's length is the end of the last member's range.

use std::io;
use std::sync::Arc;

use crate::error::{checked_end, len_u64};
use crate::{Error, IoOp, LockMode, Result, Storage, StorageExt};

/// One member: the addresses `start .. start + limit` read from `storage` at `address - start`.
#[derive(Debug)]
pub struct Member {
    /// First address the member serves.
    pub start: u64,
    /// How many addresses it serves (bytes past the storage's length read as zeros).
    pub limit: u64,
    /// The member's bytes.
    pub storage: Arc<dyn Storage>,
}

/// A read-only address space made of [`Member`]s (see the module documentation).
#[derive(Debug)]
pub struct MemberFiles {
    members: Vec<Member>,
}

impl MemberFiles {
    /// The address space of `members`, sorted by start here. Overlapping ranges are an
    /// [`Error::OutOfBounds`] naming the first overlap (a member list decoded from a damaged
    /// file).
    pub fn new(mut members: Vec<Member>) -> Result<MemberFiles> {
        members.sort_by_key(|m| m.start);
        for pair in members.windows(2) {
            let end = checked_end(pair[0].start, pair[0].limit)?;
            if end > pair[1].start {
                return Err(Error::OutOfBounds {
                    offset: pair[0].start,
                    len: pair[0].limit,
                    file_len: pair[1].start,
                });
            }
        }
        Ok(MemberFiles { members })
    }

    /// A family: member `i` serves `i * member_size ..`; every member but the last serves
    /// `member_size` bytes, the last as many as its file holds.
    pub fn family(storages: Vec<Arc<dyn Storage>>, member_size: u64) -> Result<MemberFiles> {
        let count = storages.len();
        let mut members = Vec::with_capacity(count);
        for (i, storage) in storages.into_iter().enumerate() {
            let start = (i as u64)
                .checked_mul(member_size)
                .ok_or(Error::AddressOverflow {
                    offset: i as u64,
                    len: member_size,
                })?;
            let limit = if i + 1 == count {
                storage.len()?
            } else {
                member_size
            };
            members.push(Member {
                start,
                limit,
                storage,
            });
        }
        MemberFiles::new(members)
    }

    /// The members, by start.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The member serving `address`, if any.
    fn member_at(&self, address: u64) -> Option<&Member> {
        let i = self.members.partition_point(|m| m.start <= address);
        let m = self.members.get(i.checked_sub(1)?)?;
        (address - m.start < m.limit).then_some(m)
    }

    fn read_only(offset: u64) -> Error {
        Error::Io {
            op: IoOp::Write,
            offset,
            source: io::Error::new(
                io::ErrorKind::PermissionDenied,
                "a file of several members (family, multi or split driver) is read-only",
            ),
        }
    }
}

impl Storage for MemberFiles {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = len_u64(buf.len());
        let end = checked_end(offset, len)?;
        let out_of_bounds = || -> Result<Error> {
            Ok(Error::OutOfBounds {
                offset,
                len,
                file_len: self.len()?,
            })
        };
        let mut at = offset;
        let mut rest = &mut buf[..];
        while !rest.is_empty() {
            let Some(m) = self.member_at(at) else {
                return Err(out_of_bounds()?);
            };
            let inside = at - m.start;
            // The piece this member serves: up to its limit or the end of the request.
            let piece = (m.limit - inside).min(end - at);
            let (now, later) = rest.split_at_mut(usize::try_from(piece).unwrap_or(rest.len()));
            m.storage.read_at_zero_fill(inside, now)?;
            at += len_u64(now.len());
            rest = later;
        }
        Ok(())
    }

    fn write_at(&self, offset: u64, _data: &[u8]) -> Result<()> {
        Err(Self::read_only(offset))
    }

    fn len(&self) -> Result<u64> {
        Ok(self
            .members
            .last()
            .map_or(0, |m| m.start.saturating_add(m.limit)))
    }

    fn set_len(&self, len: u64) -> Result<()> {
        Err(Self::read_only(len))
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn lock(&self, mode: LockMode) -> Result<()> {
        for m in &self.members {
            m.storage.lock(mode)?;
        }
        Ok(())
    }

    fn unlock(&self) -> Result<()> {
        for m in &self.members {
            m.storage.unlock()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStorage;

    fn mem(bytes: &[u8]) -> Arc<dyn Storage> {
        let m = MemoryStorage::new();
        m.write_at(0, bytes).unwrap();
        Arc::new(m)
    }

    #[test]
    fn a_family_reads_across_members_and_zero_fills_short_ones() {
        // Members of 4 bytes; the middle one holds only 2 (its tail was never written).
        let f = MemberFiles::family(vec![mem(b"abcd"), mem(b"ef"), mem(b"ijk")], 4).unwrap();
        assert_eq!(f.len().unwrap(), 11);
        let mut buf = [0xffu8; 9];
        f.read_at(1, &mut buf).unwrap();
        assert_eq!(&buf, b"bcdef\0\0ij");
        let mut whole = [0u8; 11];
        f.read_at(0, &mut whole).unwrap();
        assert_eq!(&whole, b"abcdef\0\0ijk");
        let mut past = [0u8; 2];
        assert!(matches!(
            f.read_at(10, &mut past),
            Err(Error::OutOfBounds { file_len: 11, .. })
        ));
        assert!(f.read_at(11, &mut []).is_ok());
    }

    #[test]
    fn a_multi_layout_reads_each_range_from_its_member_and_refuses_the_gaps() {
        let m = MemberFiles::new(vec![
            Member {
                start: 1000,
                limit: 8,
                storage: mem(b"raw"),
            },
            Member {
                start: 0,
                limit: 6,
                storage: mem(b"super"),
            },
        ])
        .unwrap();
        let mut a = [0u8; 6];
        m.read_at(0, &mut a).unwrap();
        assert_eq!(&a, b"super\0");
        let mut b = [0u8; 5];
        m.read_at(1001, &mut b).unwrap();
        assert_eq!(&b, b"aw\0\0\0");
        // Between the members' ranges and past the last one: out of bounds, never zeros.
        assert!(matches!(
            m.read_at(4, &mut [0u8; 4]),
            Err(Error::OutOfBounds { offset: 4, .. })
        ));
        assert!(matches!(
            m.read_at(1007, &mut [0u8; 2]),
            Err(Error::OutOfBounds { file_len: 1008, .. })
        ));
        assert!(matches!(
            m.read_at(u64::MAX, &mut [0u8; 2]),
            Err(Error::AddressOverflow { .. })
        ));
    }

    #[test]
    fn overlapping_members_and_writes_are_refused() {
        let overlap = MemberFiles::new(vec![
            Member {
                start: 0,
                limit: 10,
                storage: mem(b"a"),
            },
            Member {
                start: 5,
                limit: 10,
                storage: mem(b"b"),
            },
        ]);
        assert!(matches!(overlap, Err(Error::OutOfBounds { .. })));
        let f = MemberFiles::family(vec![mem(b"abcd")], 4).unwrap();
        assert!(matches!(f.write_at(0, b"x"), Err(Error::Io { .. })));
        assert!(matches!(f.set_len(0), Err(Error::Io { .. })));
        let mut buf = [0u8; 4];
        f.read_at(0, &mut buf).unwrap();
        assert_eq!(&buf, b"abcd");
    }
}
