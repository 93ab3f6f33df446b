//! The two checksums of the format.
//!
//! * [`lookup3`]: Bob Jenkins' lookup3 `hashlittle` (2006), the checksum of every version-2
//!   metadata structure (superblock v2/v3, `OHDR`/`OCHK`, B-tree v2 nodes, heaps, arrays). It is
//!   computed over the bytes before the 4-byte checksum field, with `initval` 0, and the field
//!   stores the result little-endian.
//! * [`fletcher32`]: the Fletcher-32 variant of the fletcher32 I/O filter (filter id 3). Words are
//!   16-bit **big-endian** pairs of bytes, both sums start at 0, an odd trailing byte counts as the
//!   high byte of a final word. Where the filter stores the value is the filter's business (the
//!   `h5-filters` crate); this only computes it.
//!
//! Every decoder compares a stored lookup3 checksum with [`matches()`]. A fuzzer (which cannot forge
//! checksums) runs decoders inside [`without_verification`] so that its mutations reach the
//! fields behind them; nothing else turns verification off.

use std::cell::Cell;

thread_local! {
    /// Set while the calling thread runs inside [`without_verification`].
    static UNVERIFIED: Cell<bool> = const { Cell::new(false) };
}

/// Whether a structure whose checksum field holds `stored` and whose bytes sum to `computed`
/// is accepted: when they are equal (or inside [`without_verification`] on this thread).
#[inline]
pub fn matches(stored: u32, computed: u32) -> bool {
    stored == computed || UNVERIFIED.with(Cell::get)
}

/// Runs `f` with lookup3 checksum verification turned off on the calling thread (decoders then
/// accept any stored checksum). For fuzzing only: a fuzzer's mutations would otherwise stop at
/// the checksum of every version-2 structure. Verification is back on when `f` returns or
/// unwinds.
pub fn without_verification<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            UNVERIFIED.with(|u| u.set(self.0));
        }
    }
    let _restore = Restore(UNVERIFIED.with(|u| u.replace(true)));
    f()
}

/// Rotates `x` left by `k` bits (lookup3's `rot`).
#[inline]
fn rot(x: u32, k: u32) -> u32 {
    x.rotate_left(k)
}

/// lookup3's reversible mixing of three words.
#[inline]
fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= rot(*c, 4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= rot(*a, 6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= rot(*b, 8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= rot(*c, 16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= rot(*a, 19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= rot(*b, 4);
    *b = b.wrapping_add(*a);
}

/// lookup3's final mixing of three words into `c`.
#[inline]
fn final_mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(rot(*b, 14));
    *a ^= *c;
    *a = a.wrapping_sub(rot(*c, 11));
    *b ^= *a;
    *b = b.wrapping_sub(rot(*a, 25));
    *c ^= *b;
    *c = c.wrapping_sub(rot(*b, 16));
    *a ^= *c;
    *a = a.wrapping_sub(rot(*c, 4));
    *b ^= *a;
    *b = b.wrapping_sub(rot(*a, 14));
    *c ^= *b;
    *c = c.wrapping_sub(rot(*b, 24));
}

/// Up to four bytes as a little-endian word, missing high bytes zero.
#[inline]
fn le_word(bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .take(4)
        .rev()
        .fold(0u32, |acc, &x| (acc << 8) | u32::from(x))
}

/// Bob Jenkins' lookup3 `hashlittle` of `data` with seed `initval` (byte-wise definition, so the
/// result is the same on every platform). HDF5 metadata checksums use `initval` 0.
pub fn lookup3(data: &[u8], initval: u32) -> u32 {
    // The length enters the initial state modulo 2^32, exactly as the 32-bit reference does.
    let init = 0xdead_beef_u32
        .wrapping_add(data.len() as u32)
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut rest = data;
    // Every block of 12 except the last one (which may be full) is mixed.
    while rest.len() > 12 {
        let (block, tail) = rest.split_at(12);
        let (wa, wbc) = block.split_at(4);
        let (wb, wc) = wbc.split_at(4);
        a = a.wrapping_add(le_word(wa));
        b = b.wrapping_add(le_word(wb));
        c = c.wrapping_add(le_word(wc));
        mix(&mut a, &mut b, &mut c);
        rest = tail;
    }
    if rest.is_empty() {
        // Zero-length tail: the reference returns `c` without the final mix.
        return c;
    }
    // 1..=12 trailing bytes, zero-padded into the three words.
    let part = |from: usize| rest.get(from..).map_or(0, le_word);
    a = a.wrapping_add(part(0));
    b = b.wrapping_add(part(4));
    c = c.wrapping_add(part(8));
    final_mix(&mut a, &mut b, &mut c);
    c
}

/// The Fletcher-32 checksum HDF5's fletcher32 filter computes over a chunk's bytes.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "both sums stay below 2^32: folded below 2^17 after every 360 words"
)]
pub fn fletcher32(data: &[u8]) -> u32 {
    let mut sum1: u32 = 0;
    let mut sum2: u32 = 0;
    let mut words = data.chunks_exact(2);
    // 360 words is the most that can be summed before `sum2` could overflow 32 bits (the sums
    // are folded back below 2^17 after each block).
    loop {
        let mut n = 0;
        for w in words.by_ref().take(360) {
            let [hi, lo] = [w.first(), w.get(1)].map(|b| u32::from(b.copied().unwrap_or(0)));
            sum1 += (hi << 8) | lo;
            sum2 += sum1;
            n += 1;
        }
        if n == 0 {
            break;
        }
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    if let [last] = words.remainder() {
        sum1 += u32::from(*last) << 8;
        sum2 += sum1;
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    (sum2 << 16) | sum1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors published with lookup3.c (its `driver5` self-test).
    #[test]
    fn lookup3_known_vectors() {
        assert_eq!(lookup3(b"", 0), 0xdead_beef);
        assert_eq!(lookup3(b"", 0xdead_beef), 0xbd5b_7dde);
        assert_eq!(lookup3(b"Four score and seven years ago", 0), 0x1777_0551);
        assert_eq!(lookup3(b"Four score and seven years ago", 1), 0xcd62_8161);
    }

    /// Real checksums from a file written by HDF5 1.14.4 (h5py 3.12.1, `libver="latest"`): the
    /// 48-byte version-3 superblock of `tests/data/latest.h5` ends with lookup3 of its first 44
    /// bytes.
    #[test]
    fn lookup3_matches_a_real_superblock() {
        let file = include_bytes!("../tests/data/latest.h5");
        let sb = &file[..48];
        let stored = u32::from_le_bytes([sb[44], sb[45], sb[46], sb[47]]);
        assert_eq!(lookup3(&sb[..44], 0), stored);
    }

    /// Every tail length 0..=12 and block boundary is exercised without panicking, and lengths
    /// differing by a trailing zero hash differently (the length is part of the state).
    #[test]
    fn lookup3_all_tail_lengths() {
        let data: Vec<u8> = (0u8..40).collect();
        let mut seen = std::collections::HashSet::new();
        for n in 0..=data.len() {
            assert!(seen.insert(lookup3(&data[..n], 0)));
        }
        assert_ne!(lookup3(&[0], 0), lookup3(&[0, 0], 0));
    }

    #[test]
    fn fletcher32_small_vectors() {
        // One word 0x0102: sum1 = 0x0102, sum2 = 0x0102.
        assert_eq!(fletcher32(&[1, 2]), 0x0102_0102);
        // Odd byte is the high byte of a last word: words 0x0102, 0x0300.
        // sum1 = 0x0402, sum2 = 0x0102 + 0x0402 = 0x0504.
        assert_eq!(fletcher32(&[1, 2, 3]), 0x0504_0402);
        assert_eq!(fletcher32(&[]), 0);
        // All-ones words fold (0xffff + carry wraps to 0xffff, never 0).
        let ones = vec![0xffu8; 2 * 1000 + 1];
        let _ = fletcher32(&ones);
    }

    /// Real vector: `tests/data/make_fixtures.py` writes dataset `f32` (int32 0..9, chunks of 10,
    /// fletcher32=True); its one chunk is the 40 data bytes followed by the checksum. HDF5 1.14
    /// stores the checksum little-endian on a little-endian machine.
    #[test]
    fn fletcher32_matches_h5py() {
        let mut data = Vec::new();
        for i in 0i32..10 {
            data.extend_from_slice(&i.to_le_bytes());
        }
        assert_eq!(fletcher32(&data), FLETCHER_I32_0_TO_9);
        // An odd-length vector from the same script (dataset `f8`, uint8 0..=16, one chunk).
        let odd: Vec<u8> = (0u8..17).collect();
        assert_eq!(fletcher32(&odd), FLETCHER_U8_0_TO_16);
    }

    /// Checksums read from the chunks h5py wrote (`make_fixtures.py` prints them: the last four
    /// bytes of each chunk, little-endian).
    const FLETCHER_I32_0_TO_9: u32 = 0x4a01_2d00;
    const FLETCHER_U8_0_TO_16: u32 = 0xf10c_4840;
}
