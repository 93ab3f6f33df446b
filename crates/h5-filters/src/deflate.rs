//! The deflate filter (id 1): zlib format (RFC 1950), level in client data 0.
//! Backend: `flate2` with the pure-Rust `zlib-rs` implementation.

use std::io::{Read, Write};

use crate::error::FilterError;
use crate::pipeline::Ctx;

/// Inflates `buf`, failing when the output would exceed `ctx.limit`.
pub(crate) fn decode(buf: &[u8], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    let dec = flate2::read::ZlibDecoder::new(buf);
    read_limited(dec, ctx.limit, "deflate")
}

/// Deflates `buf` at the level of client data 0 (default 6, clamped to 0..=9).
pub(crate) fn encode(buf: &[u8], cd: &[u32]) -> Result<Vec<u8>, FilterError> {
    let level = cd.first().copied().unwrap_or(6).min(9);
    let mut enc = flate2::write::ZlibEncoder::new(
        Vec::with_capacity((buf.len() / 2).saturating_add(64)),
        flate2::Compression::new(level),
    );
    enc.write_all(buf)
        .map_err(|e| FilterError::encode("deflate", e.to_string()))?;
    enc.finish()
        .map_err(|e| FilterError::encode("deflate", e.to_string()))
}

/// Reads a decompressing stream to its end, refusing more than `limit` bytes.
pub(crate) fn read_limited(
    r: impl Read,
    limit: usize,
    filter: &'static str,
) -> Result<Vec<u8>, FilterError> {
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    r.take(cap)
        .read_to_end(&mut out)
        .map_err(|e| FilterError::corrupt(filter, e.to_string()))?;
    if out.len() > limit {
        return Err(FilterError::corrupt(
            filter,
            format!("decodes to more than {limit} bytes"),
        ));
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
            limit: n + 16,
        }
    }

    #[test]
    fn round_trip_levels() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        for level in [0, 1, 6, 9, 42] {
            let enc = encode(&data, &[level]).unwrap();
            assert_eq!(&enc[..1], &[0x78]);
            assert_eq!(decode(&enc, &ctx(data.len())).unwrap(), data);
        }
    }

    #[test]
    fn corrupt_and_oversized() {
        let data = vec![7u8; 10_000];
        let enc = encode(&data, &[6]).unwrap();
        for n in 0..enc.len() {
            assert!(
                decode(&enc[..n], &ctx(data.len())).is_err(),
                "truncated at {n}"
            );
        }
        assert!(decode(&enc, &ctx(100)).is_err());
        let mut bad = enc.clone();
        bad[0] ^= 0xff;
        assert!(decode(&bad, &ctx(data.len())).is_err());
    }
}
