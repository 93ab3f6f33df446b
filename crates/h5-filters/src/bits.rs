//! Most-significant-bit-first bit streams (the packing of scale-offset and n-bit).

/// The `bits` low bits set (all 64 from 64 on).
pub(crate) fn low_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        u64::MAX
            .checked_shr(64u32.saturating_sub(bits))
            .unwrap_or(0)
    }
}

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
            // In the buffer: `end` was checked against its bits above.
            let byte = *self.buf.get(self.pos / 8)?;
            let used = (self.pos % 8) as u32;
            // 1..=8 bits left in this byte, `take` of them wanted (≤ 8).
            let avail = 8u32.saturating_sub(used);
            let take = avail.min(left);
            let bits = (u64::from(byte) >> avail.saturating_sub(take)) & low_mask(take);
            v = (v << take) | bits;
            left = left.saturating_sub(take);
            self.pos = self.pos.saturating_add(take as usize);
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
        let mut left = n.min(64);
        while left > 0 {
            if self.used == 0 {
                self.out.push(0);
            }
            // `used` < 8, so 1..=8 bits are free in the last byte; `take` ≤ 8 of them are used.
            let avail = 8u32.saturating_sub(self.used);
            let take = avail.min(left);
            let bits =
                (v.checked_shr(left.saturating_sub(take)).unwrap_or(0) & low_mask(take)) as u8;
            if let Some(last) = self.out.last_mut() {
                *last |= bits << avail.saturating_sub(take);
            }
            self.used = self.used.saturating_add(take) % 8;
            left = left.saturating_sub(take);
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
