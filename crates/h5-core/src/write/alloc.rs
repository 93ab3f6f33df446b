//! File-space allocation for a writable file: every new structure and chunk gets its address
//! here, and freed space comes back here.
//!
//! Invariant: `eoa` is the end of allocated space; every live allocation lies below it, free
//! ranges never overlap live ones, and a free range that reaches `eoa` is given back to it at
//! once (the end of the file shrinks).

use std::collections::BTreeMap;

/// What a range of file space holds (the allocator keeps raw data and metadata apart).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SpaceKind {
    /// Metadata: headers, heaps, B-tree nodes, index blocks.
    Meta,
    /// Raw data: chunks, contiguous data, global heap collections.
    Raw,
}

/// An allocation request the allocator cannot serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AllocError {
    /// A request of zero bytes.
    #[error("a request for zero bytes of file space")]
    Empty,
    /// The address space of the file (its address size) is exhausted.
    #[error("the file's address space is exhausted ({len} bytes asked at {eoa:#x})")]
    Exhausted {
        /// End of allocation at the time.
        eoa: u64,
        /// Bytes asked.
        len: u64,
    },
    /// A free of space that is past the end of allocation or already free.
    #[error("freeing [{addr:#x}, +{len}) which is not allocated")]
    NotAllocated {
        /// Start of the range.
        addr: u64,
        /// Its length.
        len: u64,
    },
}

/// The allocator of one writable file: a first-fit free list over the space below the end of
/// allocation, which grows when nothing fits.
#[derive(Debug)]
pub struct FileAlloc {
    eoa: u64,
    max: u64,
    /// Free ranges by start address (merged: no two touch).
    free: BTreeMap<u64, u64>,
}

impl FileAlloc {
    /// An allocator whose first free byte is `eoa`, for a file whose addresses are
    /// `addr_bytes` wide.
    pub fn new(eoa: u64, addr_bytes: u8) -> Self {
        let max = if addr_bytes >= 8 {
            u64::MAX - 1
        } else {
            (1u64 << (8 * u32::from(addr_bytes))) - 2
        };
        FileAlloc {
            eoa,
            max,
            free: BTreeMap::new(),
        }
    }

    /// The end of allocated space.
    pub fn eoa(&self) -> u64 {
        self.eoa
    }

    /// `len` bytes of `kind`; returns the address.
    pub fn allocate(&mut self, _kind: SpaceKind, len: u64) -> Result<u64, AllocError> {
        if len == 0 {
            return Err(AllocError::Empty);
        }
        let fit = self
            .free
            .iter()
            .find(|(_, l)| **l >= len)
            .map(|(a, l)| (*a, *l));
        if let Some((addr, flen)) = fit {
            self.free.remove(&addr);
            if flen > len {
                self.free.insert(addr + len, flen - len);
            }
            return Ok(addr);
        }
        let end = self
            .eoa
            .checked_add(len)
            .filter(|e| *e <= self.max)
            .ok_or(AllocError::Exhausted { eoa: self.eoa, len })?;
        let addr = self.eoa;
        self.eoa = end;
        Ok(addr)
    }

    /// Gives `[addr, addr + len)` back.
    pub fn free(&mut self, _kind: SpaceKind, addr: u64, len: u64) -> Result<(), AllocError> {
        if len == 0 {
            return Ok(());
        }
        let end = addr
            .checked_add(len)
            .filter(|e| *e <= self.eoa)
            .ok_or(AllocError::NotAllocated { addr, len })?;
        // Overlap with a free range before or after is a double free.
        if let Some((a, l)) = self.free.range(..end).next_back()
            && a + l > addr
        {
            return Err(AllocError::NotAllocated { addr, len });
        }
        let mut start = addr;
        let mut stop = end;
        if let Some((&a, &l)) = self.free.range(..addr).next_back()
            && a + l == addr
        {
            self.free.remove(&a);
            start = a;
        }
        if let Some(l) = self.free.remove(&end) {
            stop = end + l;
        }
        if stop == self.eoa {
            self.eoa = start;
        } else {
            self.free.insert(start, stop - start);
        }
        Ok(())
    }

    /// Bytes free below the end of allocation.
    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_reuses_merges_and_shrinks() {
        let mut a = FileAlloc::new(96, 8);
        let x = a.allocate(SpaceKind::Meta, 100).unwrap();
        let y = a.allocate(SpaceKind::Meta, 50).unwrap();
        let z = a.allocate(SpaceKind::Raw, 10).unwrap();
        assert_eq!((x, y, z, a.eoa()), (96, 196, 246, 256));
        a.free(SpaceKind::Meta, x, 100).unwrap();
        assert_eq!(a.allocate(SpaceKind::Meta, 60).unwrap(), 96);
        assert!(a.free(SpaceKind::Meta, 96, 60).is_ok());
        assert!(matches!(
            a.free(SpaceKind::Meta, 100, 4),
            Err(AllocError::NotAllocated { .. })
        ));
        a.free(SpaceKind::Meta, y, 50).unwrap();
        assert_eq!(a.free_bytes(), 150);
        a.free(SpaceKind::Raw, z, 10).unwrap();
        assert_eq!((a.eoa(), a.free_bytes()), (96, 0));
        assert!(matches!(
            a.allocate(SpaceKind::Raw, 0),
            Err(AllocError::Empty)
        ));
        let mut small = FileAlloc::new(0, 2);
        assert!(small.allocate(SpaceKind::Raw, 70_000).is_err());
    }
}
