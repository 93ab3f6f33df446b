//! The deterministic test data of the standard workloads, identical on both sides (the Python
//! helper's `field_rows` computes the same values with numpy; the run compares checksums).
//!
//! `v(r, c) = ((r + 2c + salt) mod 1024) / 4 + noise / 1024` where `noise` is bits 8..15 of
//! `h ^ (h >> 15)`, `h = ((r * side + c + salt * 0x01000193) * 0x9E3779B1) mod 2^32`. Every value
//! needs at most 18 significant bits, so the float32 arithmetic is exact in both languages. The
//! smooth ramp plus 8 bits of noise compresses like measured data with noisy low bits (about
//! half its size with shuffle + deflate).

/// The value at (`r`, `c`) of the `side`×`side` field of `salt`.
pub(crate) fn value(side: usize, salt: u64, r: usize, c: usize) -> f32 {
    let (r, c) = (r as u64, c as u64);
    let mut h =
        ((r * side as u64 + c + salt * 0x0100_0193).wrapping_mul(0x9E37_79B1)) & 0xFFFF_FFFF;
    h ^= h >> 15;
    let noise = ((h >> 8) & 0xFF) as f32;
    let base = ((r + 2 * c + salt) % 1024) as f32;
    base * 0.25 + noise * (1.0 / 1024.0)
}

/// The whole `side`×`side` field of `salt`, row-major.
pub(crate) fn make(side: usize, salt: u64) -> Vec<f32> {
    let mut out = Vec::with_capacity(side * side);
    for r in 0..side {
        out.extend((0..side).map(|c| value(side, salt, r, c)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_exact_and_fixed() {
        // Spot values computed by hand from the formula.
        assert_eq!(value(4, 0, 0, 0), {
            let h = 0u64;
            ((h ^ (h >> 15)) >> 8 & 0xFF) as f32 / 1024.0
        });
        let v = value(16384, 3, 100, 200);
        let h0 = ((100u64 * 16384 + 200 + 3 * 0x0100_0193) * 0x9E37_79B1) & 0xFFFF_FFFF;
        let h = h0 ^ (h0 >> 15);
        let want = 503.0 / 4.0 + ((h >> 8) & 0xFF) as f64 / 1024.0;
        assert_eq!(f64::from(v), want);
        let f = make(8, 1);
        assert_eq!(f.len(), 64);
        assert_eq!(f[8 * 3 + 5], value(8, 1, 3, 5));
    }
}
