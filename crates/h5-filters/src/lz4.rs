//! The HDF5 LZ4 filter (id 32004) framing, codec `lz4_flex` (pure Rust, safe mode).
//!
//! Stored: 8-byte big-endian original size, 4-byte big-endian block size, then for each
//! block of `block size` bytes (the last may be shorter) a 4-byte big-endian compressed
//! size and the LZ4 block; a block whose compressed size equals its original size is
//! stored raw. Client data 0 = block size in bytes (0: the default, 1 GiB).

use crate::error::FilterError;
use crate::pipeline::Ctx;

const F: &str = "lz4";
const DEFAULT_BLOCK: usize = 1 << 30;

// The plugin framings (lz4, bitshuffle) store their sizes big-endian, hence the allowances.

/// Reads a big-endian u32 at `at`.
#[allow(clippy::big_endian_bytes)]
pub(crate) fn be_u32(buf: &[u8], at: usize, f: &'static str) -> Result<u32, FilterError> {
    let b: [u8; 4] = buf
        .get(at..at.saturating_add(4))
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| FilterError::corrupt(f, "truncated header"))?;
    Ok(u32::from_be_bytes(b))
}

/// Appends `v` big-endian.
#[allow(clippy::big_endian_bytes)]
pub(crate) fn put_be_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends `v` big-endian.
#[allow(clippy::big_endian_bytes)]
pub(crate) fn put_be_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Reads a big-endian u64 at `at`.
pub(crate) fn be_u64(buf: &[u8], at: usize, f: &'static str) -> Result<u64, FilterError> {
    let hi = be_u32(buf, at, f)?;
    let lo = be_u32(buf, at.saturating_add(4), f)?;
    Ok(u64::from(hi) << 32 | u64::from(lo))
}

/// Decodes one raw LZ4 block of exactly `n` bytes into `out`.
pub(crate) fn block_into(
    src: &[u8],
    n: usize,
    out: &mut Vec<u8>,
    f: &'static str,
) -> Result<(), FilterError> {
    let start = out.len();
    out.resize(start.saturating_add(n), 0);
    let got = lz4_flex::block::decompress_into(src, out.get_mut(start..).unwrap_or_default())
        .map_err(|e| FilterError::corrupt(f, e.to_string()))?;
    if got != n {
        return Err(FilterError::corrupt(
            f,
            format!("block decodes to {got} bytes, expected {n}"),
        ));
    }
    Ok(())
}

/// Decodes the framed chunk.
pub(crate) fn decode(buf: &[u8], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    let total = usize::try_from(be_u64(buf, 0, F)?).unwrap_or(usize::MAX);
    let block = be_u32(buf, 8, F)? as usize;
    if total > ctx.limit {
        return Err(FilterError::corrupt(
            F,
            format!("original size {total} exceeds the chunk size"),
        ));
    }
    if block == 0 && total > 0 {
        return Err(FilterError::corrupt(F, "block size 0"));
    }
    let mut out = crate::output(F, total)?;
    let mut at = 12usize;
    while out.len() < total {
        let n = block.min(total.saturating_sub(out.len()));
        let csize = be_u32(buf, at, F)? as usize;
        at = at.saturating_add(4);
        let src = buf
            .get(at..at.saturating_add(csize))
            .ok_or_else(|| FilterError::corrupt(F, "truncated block"))?;
        at = at.saturating_add(csize);
        if csize == n {
            out.extend_from_slice(src);
        } else {
            block_into(src, n, &mut out, F)?;
        }
    }
    Ok(out)
}

/// Encodes with the block size of client data 0.
pub(crate) fn encode(buf: &[u8], cd: &[u32]) -> Result<Vec<u8>, FilterError> {
    let block = match cd.first().copied().unwrap_or(0) {
        0 => DEFAULT_BLOCK,
        b => b as usize,
    };
    let block = block.min(buf.len().max(1));
    let mut out = Vec::with_capacity((buf.len() / 2).saturating_add(64));
    put_be_u64(&mut out, buf.len() as u64);
    let b32 = u32::try_from(block).map_err(|_| FilterError::encode(F, "block size too large"))?;
    put_be_u32(&mut out, b32);
    for part in buf.chunks(block) {
        let c = lz4_flex::block::compress(part);
        let (bytes, len) = if c.len() >= part.len() {
            (part, part.len())
        } else {
            (&c[..], c.len())
        };
        let l32 = u32::try_from(len).map_err(|_| FilterError::encode(F, "block too large"))?;
        put_be_u32(&mut out, l32);
        out.extend_from_slice(bytes);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(n: usize) -> Ctx {
        Ctx {
            elem_size: 1,
            chunk_elems: n,
            limit: n,
        }
    }

    #[test]
    fn round_trip_and_corruption() {
        let d: Vec<u8> = (0..10_000u32).map(|i| (i / 10) as u8).collect();
        for bs in [0u32, 1000, 4096, 3] {
            let e = encode(&d, &[bs]).unwrap();
            assert_eq!(decode(&e, &ctx(d.len())).unwrap(), d);
            for n in (0..e.len()).step_by(3) {
                assert!(decode(&e[..n], &ctx(d.len())).is_err());
            }
            assert!(decode(&e, &ctx(100)).is_err());
        }
        let e = encode(&d, &[0]).unwrap();
        let mut bad = e.clone();
        for b in bad.iter_mut().skip(16) {
            *b = b.wrapping_mul(31).wrapping_add(7);
        }
        let _ = decode(&bad, &ctx(d.len()));
        let empty = encode(&[], &[0]).unwrap();
        assert_eq!(decode(&empty, &ctx(0)).unwrap(), Vec::<u8>::new());
    }
}
