//! The bitshuffle filter (id 32008), optionally with LZ4 or Zstandard.
//!
//! Client data: [major, minor, element size, block size in elements (0: default),
//! compression (0 none, 2 lz4, 3 zstd), zstd level].
//!
//! Bit transposition of a block of `n` elements (`n` a multiple of 8) of `es` bytes:
//! output row `r = 8 * j + k` (byte `j` of the element, bit `k` of that byte) holds `n`
//! bits, bit `i` (least significant first within each output byte) being bit `k` of byte `j`
//! of element `i`. The data are cut into blocks of `block` elements; the last partial block
//! is transposed over its largest multiple of 8 elements and the remaining (< 8) elements,
//! and any bytes past the last whole element, are copied as they are.
//!
//! Compressed framing: 8-byte big-endian original size, 4-byte big-endian block size in
//! bytes, then per block a 4-byte big-endian compressed size and the LZ4 block (or zstd
//! frame) of the transposed block. The raw tail is stored after the last block.

use crate::error::FilterError;
use crate::lz4::{be_u32, be_u64, block_into, put_be_u32, put_be_u64};
use crate::other::zstd_decode_limited;
use crate::pipeline::Ctx;

const F: &str = "bitshuffle";
const TARGET_BLOCK_BYTES: usize = 8192;
const MIN_BLOCK: usize = 128;

#[allow(
    clippy::arithmetic_side_effects,
    reason = "divisions by constants and a non-zero element size"
)]
fn default_block(es: usize) -> usize {
    ((TARGET_BLOCK_BYTES / es.max(1)) / 8 * 8).max(MIN_BLOCK)
}

/// Transposes one block of `n` elements (n % 8 == 0) into `out` (appended).
#[allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    reason = "with n = len / es elements and row = n / 8, index (8j + k) * row + byte < 8 * es * row ≤ len for j < es, k < 8, byte < row"
)]
pub(crate) fn trans_block(src: &[u8], es: usize, out: &mut Vec<u8>) {
    let n = src.len() / es;
    let row = n / 8;
    let start = out.len();
    out.resize(start + src.len(), 0);
    let dst = &mut out[start..];
    for (i, e) in src.chunks_exact(es).enumerate() {
        let (byte, bit) = (i / 8, i % 8);
        for (j, &b) in e.iter().enumerate() {
            for k in 0..8 {
                dst[(8 * j + k) * row + byte] |= ((b >> k) & 1) << bit;
            }
        }
    }
}

/// Undoes [`trans_block`].
#[allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    reason = "with n = len / es elements and row = n / 8, index (8 byte + bit) * es + j < 8 * row * es ≤ len for byte < row, bit < 8, j < es"
)]
pub(crate) fn untrans_block(src: &[u8], es: usize, out: &mut Vec<u8>) {
    let n = src.len() / es;
    let row = n / 8;
    let start = out.len();
    out.resize(start + src.len(), 0);
    let dst = &mut out[start..];
    for (r, bits) in src.chunks_exact(row.max(1)).enumerate().take(8 * es) {
        let (j, k) = (r / 8, r % 8);
        for (byte, &v) in bits.iter().enumerate() {
            for bit in 0..8 {
                dst[(byte * 8 + bit) * es + j] |= ((v >> bit) & 1) << k;
            }
        }
    }
}

/// Splits `len` bytes into (full blocks, last partial block of a multiple of 8 elements,
/// raw tail) lengths in bytes.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "es ≥ 1 and block ≥ 8 (checked by params); every part is at most len"
)]
fn plan(len: usize, es: usize, block: usize) -> (usize, usize, usize, usize) {
    let n = len / es;
    let bb = block * es;
    let nfull = n / block;
    let rem = n % block;
    let last = (rem - rem % 8) * es;
    (nfull, bb, last, len - nfull * bb - last)
}

fn params(cd: &[u32], ctx: &Ctx) -> Result<(usize, usize, u32), FilterError> {
    let es = cd
        .get(2)
        .map(|&v| v as usize)
        .filter(|&v| v > 0)
        .unwrap_or(ctx.elem_size)
        .max(1);
    let block = match cd.get(3).copied().unwrap_or(0) {
        0 => default_block(es),
        b => b as usize,
    };
    if block.checked_mul(es).is_none_or(|b| b > u32::MAX as usize) {
        return Err(FilterError::params(
            F,
            format!("block of {block} elements too large"),
        ));
    }
    if !block.is_multiple_of(8) {
        return Err(FilterError::params(
            F,
            format!("block size {block} is not a multiple of 8"),
        ));
    }
    Ok((es, block, cd.get(4).copied().unwrap_or(0)))
}

/// Decodes a bitshuffled (and maybe compressed) chunk.
pub(crate) fn decode(buf: &[u8], cd: &[u32], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    let (es, mut block, comp) = params(cd, ctx)?;
    if comp == 0 {
        let (nfull, bb, last, _tail) = plan(buf.len(), es, block);
        let mut out = Vec::with_capacity(buf.len());
        // The plan cuts `buf` itself: nfull blocks of bb bytes, then last bytes, then the tail.
        let mut rest = buf;
        for n in std::iter::repeat_n(bb, nfull).chain([last]) {
            let (block, after) = rest.split_at(n.min(rest.len()));
            untrans_block(block, es, &mut out);
            rest = after;
        }
        out.extend_from_slice(rest);
        return Ok(out);
    }
    let total = usize::try_from(be_u64(buf, 0, F)?).unwrap_or(usize::MAX);
    if total > ctx.limit {
        return Err(FilterError::corrupt(
            F,
            format!("original size {total} exceeds the chunk size"),
        ));
    }
    let bbytes = be_u32(buf, 8, F)? as usize;
    // `es` ≥ 1 (params).
    block = bbytes.checked_div(es).unwrap_or(0);
    if !bbytes.is_multiple_of(es) || !block.is_multiple_of(8) || bbytes == 0 {
        return Err(FilterError::corrupt(F, format!("bad block size {bbytes}")));
    }
    let (nfull, bb, last, tail) = plan(total, es, block);
    let mut out = crate::output(F, total)?;
    // The block size is the chunk's word: bounded by the chunk's own size, not trusted.
    let mut tmp = Vec::with_capacity(bb.min(total));
    let mut at = 12usize;
    let sizes = std::iter::repeat_n(bb, nfull).chain((last > 0).then_some(last));
    for n in sizes {
        let csize = be_u32(buf, at, F)? as usize;
        at = at.saturating_add(4);
        let src = buf
            .get(at..at.saturating_add(csize))
            .ok_or_else(|| FilterError::corrupt(F, "truncated block"))?;
        at = at.saturating_add(csize);
        tmp.clear();
        match comp {
            2 => block_into(src, n, &mut tmp, F)?,
            3 => {
                tmp = zstd_decode_limited(src, n, F)?;
                if tmp.len() != n {
                    return Err(FilterError::corrupt(F, "zstd block has the wrong size"));
                }
            }
            c => return Err(FilterError::unsupported(F, format!("compression code {c}"))),
        }
        untrans_block(&tmp, es, &mut out);
    }
    let raw = buf
        .get(at..at.saturating_add(tail))
        .ok_or_else(|| FilterError::corrupt(F, "truncated tail"))?;
    out.extend_from_slice(raw);
    Ok(out)
}

/// Encodes (bitshuffle, then the compression of client data 4).
pub(crate) fn encode(buf: &[u8], cd: &[u32], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    let (es, block, comp) = params(cd, ctx)?;
    let (nfull, bb, last, tail) = plan(buf.len(), es, block);
    // The plan cuts `buf` itself: nfull blocks of bb bytes, then last bytes, then the tail.
    let (body, raw_tail) = buf.split_at(buf.len().saturating_sub(tail));
    let blocks = body
        .chunks(bb.max(1))
        .take(nfull)
        .chain((last > 0).then(|| {
            body.get(body.len().saturating_sub(last)..)
                .unwrap_or_default()
        }));
    if comp == 0 {
        let mut out = Vec::with_capacity(buf.len());
        for b in blocks {
            trans_block(b, es, &mut out);
        }
        out.extend_from_slice(raw_tail);
        return Ok(out);
    }
    let mut out = Vec::with_capacity((buf.len() / 2).saturating_add(64));
    put_be_u64(&mut out, buf.len() as u64);
    let b32 = u32::try_from(bb).map_err(|_| FilterError::encode(F, "block too large"))?;
    put_be_u32(&mut out, b32);
    let mut tmp = Vec::with_capacity(bb);
    for b in blocks {
        tmp.clear();
        trans_block(b, es, &mut tmp);
        let c = match comp {
            2 => lz4_flex::block::compress(&tmp),
            3 => crate::other::zstd_encode(&tmp),
            c => return Err(FilterError::unsupported(F, format!("compression code {c}"))),
        };
        let l32 = u32::try_from(c.len()).map_err(|_| FilterError::encode(F, "block too large"))?;
        put_be_u32(&mut out, l32);
        out.extend_from_slice(&c);
    }
    out.extend_from_slice(raw_tail);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_round_trip() {
        for es in [1usize, 2, 3, 4, 8] {
            let src: Vec<u8> = (0..(es * 64) as u32)
                .map(|i| (i * 37 % 251) as u8)
                .collect();
            let mut t = Vec::new();
            trans_block(&src, es, &mut t);
            let mut u = Vec::new();
            untrans_block(&t, es, &mut u);
            assert_eq!(u, src);
        }
        // Element 0 = 0x01 only: row 0 (byte 0, bit 0) has bit 0 set.
        let mut src = vec![0u8; 8];
        src[0] = 1;
        let mut t = Vec::new();
        trans_block(&src, 1, &mut t);
        assert_eq!(t, vec![1, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn filter_round_trips_and_corruption() {
        let ctx = Ctx {
            elem_size: 2,
            chunk_elems: 1003,
            limit: 2006 + 4096,
        };
        let d: Vec<u8> = (0..2007u32).map(|i| (i / 3) as u8).collect();
        for comp in [0u32, 2, 3] {
            for block in [0u32, 8, 64] {
                let cd = [0, 4, 2, block, comp, 3];
                let e = encode(&d, &cd, &ctx).unwrap();
                assert_eq!(
                    decode(&e, &cd, &ctx).unwrap(),
                    d,
                    "comp {comp} block {block}"
                );
                if comp != 0 {
                    for n in (0..e.len()).step_by(5) {
                        assert!(decode(&e[..n], &cd, &ctx).is_err());
                    }
                }
            }
        }
    }
}
