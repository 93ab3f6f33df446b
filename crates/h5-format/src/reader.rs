//! A bounds-checked little-endian reader over the bytes of one on-disk structure.
//!
//! Every read checks the remaining length first and reports [`FormatError::Truncated`] naming the
//! structure and its address; nothing here can panic or over-allocate on hostile input.

use crate::error::{FormatError, Result};

/// The "undefined address" value: all bits set, whatever the offset size.
pub const UNDEFINED_ADDRESS: u64 = u64::MAX;

/// Sizes of file addresses ("offsets") and lengths in bytes, from the superblock.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Sizes {
    /// Bytes of an address (1..=8).
    pub offset: u8,
    /// Bytes of a length (1..=8).
    pub length: u8,
}

impl Sizes {
    /// The common case: 8-byte addresses and lengths.
    pub const EIGHT: Sizes = Sizes {
        offset: 8,
        length: 8,
    };

    /// Checks the sizes (each 1..=8; larger sizes are valid HDF5 but unsupported here).
    pub fn new(offset: u8, length: u8, structure: &'static str, address: u64) -> Result<Self> {
        for (name, v) in [("offset", offset), ("length", length)] {
            if !(1..=8).contains(&v) {
                return Err(FormatError::Unsupported {
                    structure,
                    address,
                    what: format!("size of {name}s {v} (1..=8 supported)"),
                });
            }
        }
        Ok(Self { offset, length })
    }
}

/// Reads little-endian fields from `buf`, which starts at file address `address`.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    structure: &'static str,
    address: u64,
}

impl<'a> Reader<'a> {
    /// A reader over the bytes of `structure`, which starts at file `address` (use
    /// [`UNDEFINED_ADDRESS`] when unknown).
    pub fn new(buf: &'a [u8], structure: &'static str, address: u64) -> Self {
        Self {
            buf,
            pos: 0,
            structure,
            address,
        }
    }

    /// The structure's name (for errors).
    pub fn structure(&self) -> &'static str {
        self.structure
    }

    /// The structure's start address.
    pub fn address(&self) -> u64 {
        self.address
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        // `pos` never passes the end.
        self.buf.len().saturating_sub(self.pos)
    }

    /// Whether every byte was consumed.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// All bytes of the structure (consumed or not).
    pub fn all(&self) -> &'a [u8] {
        self.buf
    }

    /// The bytes consumed so far (for checksums over a prefix).
    pub fn consumed(&self) -> &'a [u8] {
        self.buf.get(..self.pos).unwrap_or_default()
    }

    /// A [`FormatError::Corrupted`] for this structure.
    pub fn corrupted(&self, reason: impl Into<String>) -> FormatError {
        FormatError::Corrupted {
            structure: self.structure,
            address: self.address,
            reason: reason.into(),
        }
    }

    /// A [`FormatError::Unsupported`] for this structure.
    pub fn unsupported(&self, what: impl Into<String>) -> FormatError {
        FormatError::Unsupported {
            structure: self.structure,
            address: self.address,
            what: what.into(),
        }
    }

    fn truncated(&self, n: usize) -> FormatError {
        FormatError::Truncated {
            structure: self.structure,
            address: self.address,
            needed: (self.pos as u64).saturating_add(n as u64),
            available: self.buf.len() as u64,
        }
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.truncated(n))?;
        let out = self
            .buf
            .get(self.pos..end)
            .ok_or_else(|| self.truncated(n))?;
        self.pos = end;
        Ok(out)
    }

    /// A reader over the next `n` bytes (same structure name, address advanced).
    pub fn sub(&mut self, n: usize) -> Result<Reader<'a>> {
        let at = self.address.saturating_add(self.pos as u64);
        let bytes = self.bytes(n)?;
        Ok(Reader::new(bytes, self.structure, at))
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<()> {
        self.bytes(n).map(|_| ())
    }

    /// Skips to the next multiple of `n` bytes from the structure's start (`n` > 0).
    pub fn align(&mut self, n: usize) -> Result<()> {
        let pad = match self.pos.checked_rem(n) {
            None | Some(0) => 0,
            // The remainder is below `n`.
            Some(r) => n.saturating_sub(r),
        };
        self.skip(pad)
    }

    /// Expects the 4-byte `signature`.
    pub fn signature(&mut self, sig: &[u8; 4]) -> Result<()> {
        let got = self.bytes(4)?;
        if got != sig {
            return Err(self.corrupted(format!(
                "signature {:?} expected, found {:?}",
                String::from_utf8_lossy(sig),
                String::from_utf8_lossy(got)
            )));
        }
        Ok(())
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8> {
        match self.bytes(1)? {
            [b] => Ok(*b),
            _ => Err(self.truncated(1)),
        }
    }

    /// A little-endian u16.
    pub fn u16(&mut self) -> Result<u16> {
        Ok(self.uint(2)? as u16)
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(self.uint(4)? as u32)
    }

    /// A little-endian u64.
    pub fn u64(&mut self) -> Result<u64> {
        self.uint(8)
    }

    /// A little-endian unsigned integer of `n` bytes (0..=8).
    pub fn uint(&mut self, n: usize) -> Result<u64> {
        if n > 8 {
            return Err(self.unsupported(format!("{n}-byte integer field")));
        }
        let b = self.bytes(n)?;
        Ok(b.iter()
            .rev()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
    }

    /// A file address of `sizes.offset` bytes; all bits set reads as [`UNDEFINED_ADDRESS`].
    pub fn offset(&mut self, sizes: Sizes) -> Result<u64> {
        let n = usize::from(sizes.offset);
        let v = self.uint(n)?;
        Ok(if v == all_ones(n) {
            UNDEFINED_ADDRESS
        } else {
            v
        })
    }

    /// A length of `sizes.length` bytes.
    pub fn length(&mut self, sizes: Sizes) -> Result<u64> {
        self.uint(usize::from(sizes.length))
    }

    /// A length that must fit in `usize` and in the bytes left (for counts of bytes that follow).
    pub fn length_within(&mut self, sizes: Sizes) -> Result<usize> {
        let v = self.length(sizes)?;
        self.check_len(v)
    }

    /// Checks that `v` bytes could follow (fits in usize and in the remaining bytes).
    pub fn check_len(&self, v: u64) -> Result<usize> {
        match usize::try_from(v) {
            Ok(n) if n <= self.remaining() => Ok(n),
            _ => Err(FormatError::Truncated {
                structure: self.structure,
                address: self.address,
                needed: (self.pos as u64).saturating_add(v),
                available: self.buf.len() as u64,
            }),
        }
    }

    /// A null-terminated string (the terminator consumed, not returned).
    pub fn cstr(&mut self) -> Result<&'a [u8]> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let Some(n) = rest.iter().position(|&b| b == 0) else {
            return Err(self.corrupted("string without terminating null"));
        };
        let s = self.bytes(n)?;
        self.skip(1)?;
        Ok(s)
    }
}

/// The value of `n` bytes (0..=8) with every bit set: what an undefined address of that width
/// reads as.
pub fn all_ones(n: usize) -> u64 {
    low_mask(u32::try_from(n.saturating_mul(8)).unwrap_or(u32::MAX))
}

/// The `bits` low bits set (all 64 from `bits` = 64 on).
pub fn low_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        // 0 bits: a shift by 64, refused: none set.
        u64::MAX
            .checked_shr(64u32.saturating_sub(bits))
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_and_checks_bounds() {
        let b = [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 0xFF, 0xFF];
        let mut r = Reader::new(&b, "test", 0x100);
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.u16().unwrap(), 0x0302);
        assert_eq!(r.u32().unwrap(), 0x0706_0504);
        assert_eq!(r.uint(2).unwrap(), 0x0908);
        let s = Sizes::new(2, 2, "test", 0).unwrap();
        assert_eq!(r.offset(s).unwrap(), UNDEFINED_ADDRESS);
        assert!(r.is_empty());
        let e = r.u8().unwrap_err();
        assert!(matches!(
            e,
            FormatError::Truncated {
                structure: "test",
                address: 0x100,
                needed: 12,
                available: 11
            }
        ));
    }

    #[test]
    fn masks_of_any_width() {
        assert_eq!(all_ones(0), 0);
        assert_eq!(all_ones(2), 0xffff);
        assert_eq!(all_ones(8), u64::MAX);
        assert_eq!(all_ones(usize::MAX), u64::MAX);
        assert_eq!(low_mask(0), 0);
        assert_eq!(low_mask(1), 1);
        assert_eq!(low_mask(63), u64::MAX >> 1);
        assert_eq!(low_mask(200), u64::MAX);
    }

    #[test]
    fn lengths_are_checked_against_the_bytes_left() {
        let b = [200u8, 0, 0, 0, 0, 0, 0, 0, 1, 2];
        let mut r = Reader::new(&b, "t", 0);
        assert!(r.length_within(Sizes::EIGHT).is_err());
        let mut r = Reader::new(&b, "t", 0);
        assert!(r.clone().signature(b"HDF\0").is_err());
        r.skip(8).unwrap();
        r.align(4).unwrap();
        assert_eq!(r.pos(), 8);
        assert!(Sizes::new(16, 8, "t", 0).is_err());
        let mut r = Reader::new(b"ab\0c", "t", 0);
        assert_eq!(r.cstr().unwrap(), b"ab");
        assert!(r.cstr().is_err());
    }
}
