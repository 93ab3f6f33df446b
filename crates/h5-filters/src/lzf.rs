//! LZF (id 32000, the filter built into h5py). Client data: [filter version, LZF version,
//! chunk bytes]; the stored chunk is a bare LZF stream. Codec implemented here (LZF is tiny
//! and the `lzf` crates either bind C or are unmaintained).
//!
//! Format: a control byte `c`; `c < 32` starts a literal run of `c + 1` bytes; otherwise
//! `len = c >> 5` (7 means "add the next byte"), the back distance is
//! `((c & 31) << 8 | next byte) + 1`, and `len + 2` bytes are copied from there.

use crate::error::FilterError;
use crate::pipeline::Ctx;

const F: &str = "lzf";

/// Decodes an LZF stream, refusing more than `limit` bytes of output.
pub(crate) fn decompress(buf: &[u8], limit: usize) -> Result<Vec<u8>, FilterError> {
    let mut out: Vec<u8> = Vec::with_capacity(limit.min(buf.len().saturating_mul(4)));
    let mut ip = 0usize;
    let trunc = || FilterError::corrupt(F, "truncated stream");
    // `ip` only moves past bytes read with `get`; lengths are below 2^9 and distances below
    // 2^13: the saturating arithmetic never saturates.
    while let Some(&ctrl) = buf.get(ip) {
        ip = ip.saturating_add(1);
        if ctrl < 32 {
            let n = usize::from(ctrl).saturating_add(1);
            let lit = buf.get(ip..ip.saturating_add(n)).ok_or_else(trunc)?;
            if out.len().saturating_add(n) > limit {
                return Err(FilterError::corrupt(F, "output exceeds the chunk size"));
            }
            out.extend_from_slice(lit);
            ip = ip.saturating_add(n);
        } else {
            let mut len = usize::from(ctrl >> 5);
            if len == 7 {
                len = len.saturating_add(usize::from(*buf.get(ip).ok_or_else(trunc)?));
                ip = ip.saturating_add(1);
            }
            let low = usize::from(*buf.get(ip).ok_or_else(trunc)?);
            ip = ip.saturating_add(1);
            let dist = ((usize::from(ctrl & 31) << 8) | low).saturating_add(1);
            let len = len.saturating_add(2);
            let start = out
                .len()
                .checked_sub(dist)
                .ok_or_else(|| FilterError::corrupt(F, "back reference before the start"))?;
            if out.len().saturating_add(len) > limit {
                return Err(FilterError::corrupt(F, "output exceeds the chunk size"));
            }
            // Byte by byte: the source may overlap the bytes being written.
            for k in start..start.saturating_add(len) {
                let b = *out
                    .get(k)
                    .ok_or_else(|| FilterError::corrupt(F, "back reference past the output"))?;
                out.push(b);
            }
        }
    }
    Ok(out)
}

/// Encodes with a greedy single-entry hash table. Any valid LZF stream decodes the same.
#[allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    reason = "in-memory data: i + 2 < len, cand < i and len ≤ len(data) - i keep every index in bounds, the hash is below 2^14"
)]
pub(crate) fn compress(data: &[u8]) -> Vec<u8> {
    const HBITS: u32 = 14;
    let mut table = vec![usize::MAX; 1 << HBITS];
    let mut out = Vec::with_capacity(data.len() + data.len() / 16 + 8);
    let mut lit_start = 0usize;
    let mut i = 0usize;
    let flush_lits = |out: &mut Vec<u8>, lits: &[u8]| {
        for run in lits.chunks(32) {
            out.push((run.len() - 1) as u8);
            out.extend_from_slice(run);
        }
    };
    while i + 2 < data.len() {
        let h = (u32::from(data[i]) << 16 | u32::from(data[i + 1]) << 8 | u32::from(data[i + 2]))
            .wrapping_mul(2_654_435_761)
            >> (32 - HBITS);
        let cand = table[h as usize];
        table[h as usize] = i;
        if cand != usize::MAX && i - cand <= 8192 && data[cand..cand + 3] == data[i..i + 3] {
            let max = (data.len() - i).min(264);
            let mut len = 3;
            while len < max && data[cand + len] == data[i + len] {
                len += 1;
            }
            flush_lits(&mut out, &data[lit_start..i]);
            let dist = i - cand - 1;
            let l = len - 2;
            if l < 7 {
                out.push(((l as u8) << 5) | (dist >> 8) as u8);
            } else {
                out.push((7 << 5) | (dist >> 8) as u8);
                out.push((l - 7) as u8);
            }
            out.push((dist & 0xff) as u8);
            i += len;
            lit_start = i;
        } else {
            i += 1;
        }
    }
    flush_lits(&mut out, &data[lit_start..]);
    out
}

/// The filter's decode: the output is at most the chunk size.
pub(crate) fn decode_filter(buf: &[u8], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    decompress(buf, ctx.limit)
}

/// The filter's encode: fails (so an optional LZF is skipped) when the data do not shrink.
pub(crate) fn encode_filter(buf: &[u8]) -> Result<Vec<u8>, FilterError> {
    let out = compress(buf);
    if out.len() >= buf.len() {
        return Err(FilterError::encode(F, "data do not compress"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let cases: Vec<Vec<u8>> = vec![
            vec![],
            vec![1],
            vec![0; 1000],
            (0..3000u32).map(|i| (i % 7) as u8).collect(),
            (0..3000u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                .collect(),
            b"abcabcabcabcabcabcxyzxyzabcabc".repeat(100),
        ];
        for d in cases {
            let c = compress(&d);
            assert_eq!(decompress(&c, d.len()).unwrap(), d);
        }
    }

    #[test]
    fn corrupt_inputs_are_errors() {
        let d: Vec<u8> = (0..3000u32).map(|i| (i % 7) as u8).collect();
        let c = compress(&d);
        for n in 0..c.len() {
            let _ = decompress(&c[..n], d.len());
        }
        assert!(decompress(&c, 10).is_err());
        assert!(decompress(&[0x20, 0x00], 100).is_err()); // reference before start
        assert!(decompress(&[0x05, 1, 2], 100).is_err()); // truncated literal
    }
}
