//! Most-significant-bit-first bit streams (the packing of scale-offset and n-bit).

/// Reads bits MSB first from a byte slice.
pub(crate) struct BitReader<'a> {
    buf: &'a [u8],
    /// Position in bits; invariant: `pos <= 8 * buf.len()`.
    pos: usize,
}

impl<'a> BitReader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Reads `n <= 64` bits as an unsigned value, `None` past the end.
    pub(crate) fn read(&mut self, n: u32) -> Option<u64> {
        let end = self.pos.checked_add(n as usize)?;
        if end > self.buf.len().checked_mul(8)? || n > 64 {
            return None;
        }
        let mut v = 0u64;
        let mut left = n;
        while left > 0 {
            let byte = self.buf[self.pos / 8];
            let used = (self.pos % 8) as u32;
            let avail = 8 - used;
            let take = avail.min(left);
            let bits = (u64::from(byte) >> (avail - take)) & ((1u64 << take) - 1);
            v = if take == 64 { bits } else { (v << take) | bits };
            left -= take;
            self.pos += take as usize;
        }
        Some(v)
    }
}

/// Writes bits MSB first.
#[derive(Default)]
pub(crate) struct BitWriter {
    pub(crate) out: Vec<u8>,
    /// Bits used in the last byte of `out` (0 = start a new byte).
    used: u32,
}

impl BitWriter {
    /// Appends the low `n <= 64` bits of `v`.
    pub(crate) fn write(&mut self, v: u64, n: u32) {
        let mut left = n;
        while left > 0 {
            if self.used == 0 {
                self.out.push(0);
            }
            let avail = 8 - self.used;
            let take = avail.min(left);
            let bits = ((v >> (left - take)) & ((1u64 << take) - 1)) as u8;
            if let Some(last) = self.out.last_mut() {
                *last |= bits << (avail - take);
            }
            self.used = (self.used + take) % 8;
            left -= take;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut w = BitWriter::default();
        let vals = [
            (5u64, 3u32),
            (0x1ff, 9),
            (0, 1),
            (u64::MAX, 64),
            (0xabc, 12),
            (1, 1),
        ];
        for &(v, n) in &vals {
            w.write(v, n);
        }
        let mut r = BitReader::new(&w.out);
        for &(v, n) in &vals {
            assert_eq!(r.read(n), Some(v));
        }
        assert_eq!(w.out[0] >> 5, 5);
        assert!(r.read(8).is_none());
    }
}
