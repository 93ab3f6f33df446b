//! The Fletcher-32 checksum filter (id 3) and HDF5's variant of the checksum.

use crate::error::FilterError;

/// HDF5's Fletcher-32: 16-bit words read big-endian (a trailing odd byte is the high half of
/// a last word), both sums start at 0 and are folded mod 65535 (ones' complement style);
/// the result is `sum2 << 16 | sum1`.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "both sums stay below 2^32: folded below 2^17 after every 360 words"
)]
pub fn fletcher32(data: &[u8]) -> u32 {
    let (mut s1, mut s2) = (0u32, 0u32);
    let mut words = data.chunks_exact(2);
    loop {
        let mut any = false;
        for w in words.by_ref().take(360) {
            any = true;
            let word = w.iter().fold(0u32, |acc, &b| acc << 8 | u32::from(b));
            s1 += word;
            s2 += s1;
        }
        if !any {
            break;
        }
        s1 = (s1 & 0xffff) + (s1 >> 16);
        s2 = (s2 & 0xffff) + (s2 >> 16);
    }
    if let [last] = words.remainder() {
        s1 += u32::from(*last) << 8;
        s2 += s1;
        s1 = (s1 & 0xffff) + (s1 >> 16);
        s2 = (s2 & 0xffff) + (s2 >> 16);
    }
    s1 = (s1 & 0xffff) + (s1 >> 16);
    s2 = (s2 & 0xffff) + (s2 >> 16);
    (s2 << 16) | s1
}

/// Verifies and strips the 4-byte little-endian checksum. The byte-swapped-halves checksum
/// written by libhdf5 before 1.6.3 on little-endian machines is accepted too.
pub(crate) fn decode(mut buf: Vec<u8>) -> Result<Vec<u8>, FilterError> {
    let Some(body_len) = buf.len().checked_sub(4) else {
        return Err(FilterError::corrupt(
            "fletcher32",
            "chunk shorter than its checksum",
        ));
    };
    let (body, sum) = buf.split_at(body_len);
    let stored = sum
        .iter()
        .rev()
        .fold(0u32, |acc, &b| acc << 8 | u32::from(b));
    let computed = fletcher32(body);
    let c = computed.to_le_bytes();
    let reversed = u32::from_le_bytes([c[1], c[0], c[3], c[2]]);
    if stored != computed && stored != reversed {
        return Err(FilterError::Checksum { stored, computed });
    }
    buf.truncate(body_len);
    Ok(buf)
}

/// Appends the checksum.
pub(crate) fn encode(buf: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(buf.len().saturating_add(4));
    out.extend_from_slice(buf);
    out.extend_from_slice(&fletcher32(buf).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // Two words 0x0102, 0x0304: s1 = 0x0406, s2 = 0x0102 + 0x0406 = 0x0508.
        assert_eq!(fletcher32(&[1, 2, 3, 4]), 0x0508_0406);
        // Odd byte: 0x0500 added as a word.
        assert_eq!(
            fletcher32(&[1, 2, 3, 4, 5]),
            ((0x0508 + 0x0906) << 16) | 0x0906
        );
        // Long input exercising the folding.
        let v = vec![0xffu8; 100_001];
        let _ = fletcher32(&v);
    }

    #[test]
    fn round_trip_and_corruption() {
        let data: Vec<u8> = (0..=255u8).collect();
        let enc = encode(&data);
        assert_eq!(decode(enc.clone()).unwrap(), data);
        let mut bad = enc.clone();
        bad[10] ^= 1;
        assert!(matches!(decode(bad), Err(FilterError::Checksum { .. })));
        for n in 0..4 {
            assert!(decode(enc[..n].to_vec()).is_err());
        }
    }
}
