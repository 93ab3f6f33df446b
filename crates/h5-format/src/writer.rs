//! A little-endian writer for encoding on-disk structures (the mirror of [`crate::reader`]).

use crate::reader::{Sizes, UNDEFINED_ADDRESS};

/// Appends little-endian fields to a byte vector.
#[derive(Clone, Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer with room for `n` bytes.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            buf: Vec::with_capacity(n),
        }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The bytes written so far.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }

    /// The bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// Raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// `n` zero bytes.
    pub fn zeros(&mut self, n: usize) {
        self.buf.resize(self.buf.len().saturating_add(n), 0);
    }

    /// Zero bytes up to the next multiple of `n` (`n` > 0) from the start.
    pub fn align(&mut self, n: usize) {
        let pad = match self.buf.len().checked_rem(n) {
            None | Some(0) => 0,
            // The remainder is below `n`.
            Some(r) => n.saturating_sub(r),
        };
        self.zeros(pad);
    }

    /// One byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// A little-endian u16.
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A little-endian u32.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A little-endian u64.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// The low `n` bytes (0..=8) of `v`, little-endian.
    pub fn uint(&mut self, v: u64, n: usize) {
        // The common widths as fixed-size copies (a store, not a call to memcpy).
        match n {
            8 => self.u64(v),
            4 => self.u32(v as u32),
            2 => self.u16(v as u16),
            _ => self
                .buf
                .extend_from_slice(v.to_le_bytes().get(..n.min(8)).unwrap_or_default()),
        }
    }

    /// A file address of `sizes.offset` bytes; [`UNDEFINED_ADDRESS`] is written as all ones.
    pub fn offset(&mut self, sizes: Sizes, addr: u64) {
        let n = usize::from(sizes.offset);
        if addr == UNDEFINED_ADDRESS {
            self.buf
                .extend_from_slice([0xff; 8].get(..n.min(8)).unwrap_or_default());
        } else {
            self.uint(addr, n);
        }
    }

    /// A length of `sizes.length` bytes.
    pub fn length(&mut self, sizes: Sizes, v: u64) {
        self.uint(v, usize::from(sizes.length));
    }

    /// Appends the Jenkins lookup3 checksum (initial value 0) of everything written since
    /// byte `from`.
    pub fn checksum_from(&mut self, from: usize) {
        let sum = crate::checksum::lookup3(self.buf.get(from..).unwrap_or(&[]), 0);
        self.u32(sum);
    }

    /// Overwrites the bytes at `at` with `b` (for sizes known only after the body is written).
    /// Bytes past the end are appended.
    pub fn patch(&mut self, at: usize, b: &[u8]) {
        let mut slots = self.buf.iter_mut().skip(at);
        let mut rest = b.iter();
        for (slot, &x) in slots.by_ref().zip(rest.by_ref()) {
            *slot = x;
        }
        self.buf.extend(rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::Reader;

    #[test]
    fn writes_what_the_reader_reads() {
        let s = Sizes::new(4, 2, "t", 0).unwrap();
        let mut w = Writer::new();
        w.u8(1);
        w.u16(0x0302);
        w.u32(0x0706_0504);
        w.u64(u64::MAX - 1);
        w.offset(s, UNDEFINED_ADDRESS);
        w.offset(s, 0x1234);
        w.length(s, 7);
        w.align(8);
        let at = w.len();
        w.checksum_from(0);
        let b = w.into_bytes();
        let mut r = Reader::new(&b, "t", 0);
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.u16().unwrap(), 0x0302);
        assert_eq!(r.u32().unwrap(), 0x0706_0504);
        assert_eq!(r.u64().unwrap(), u64::MAX - 1);
        assert_eq!(r.offset(s).unwrap(), UNDEFINED_ADDRESS);
        assert_eq!(r.offset(s).unwrap(), 0x1234);
        assert_eq!(r.length(s).unwrap(), 7);
        assert_eq!(at % 8, 0);
        r.align(8).unwrap();
        assert_eq!(r.u32().unwrap(), crate::checksum::lookup3(&b[..at], 0));
        let mut w = Writer::new();
        w.zeros(4);
        w.patch(2, &[9, 9, 9]);
        assert_eq!(w.as_slice(), [0, 0, 9, 9, 9]);
    }
}
