//! The deflate filter (id 1): zlib format (RFC 1950), level in client data 0.
//!
//! Two backends write and read standard zlib streams (each reads the other's):
//!
//! - **libdeflate** (feature `libdeflate`, on by default), through `libdeflater`: whole-buffer
//!   compression and decompression. Measured on W2b's chunks (256×256 float32, shuffled; CPU
//!   time per core, docs/benchmarks.md "Deflate backends"): level 1 compresses at 270 MB/s into
//!   17.2 MiB where zlib's level 1 takes 112 MB/s for 18.6 MiB, and it inflates at 960 MB/s
//!   against zlib's 450 MB/s and zlib-rs's 630 MB/s.
//! - **zlib-rs** (pure Rust, through `flate2`), without the feature. zlib-rs implements level 1
//!   with zlib-ng's `deflate_quick`, whose output is about 14 % larger than zlib's level 1, so
//!   level 1 is asked of it as level 2 (zlib's level-1 algorithm, `deflate_fast`: 17.9 MiB).
//!
//! Either way a decoded chunk never exceeds `ctx.limit` bytes (the chunk's size plus a slack):
//! a stream that would is corrupt.

use std::io::Read;

use crate::error::FilterError;
use crate::pipeline::Ctx;

/// Inflates `buf`, failing when the output would exceed `ctx.limit`. Bytes after the end of
/// the zlib stream are ignored, as libhdf5's filter ignores them.
pub(crate) fn decode(buf: &[u8], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    backend::decode(buf, ctx.limit)
}

/// Inflates `buf` into `out`'s allocation when the stream decodes to exactly `out.len()`
/// bytes (`Ok(true)`); `Ok(false)`: it does not (or the backend cannot), and `out` holds
/// nothing of value. A corrupt stream is an error.
pub(crate) fn decode_into(buf: &[u8], out: &mut [u8]) -> Result<bool, FilterError> {
    backend::decode_into(buf, out)
}

/// Deflates `buf` at the level of client data 0 (default 6, clamped to 0..=9).
pub(crate) fn encode(buf: &[u8], cd: &[u32]) -> Result<Vec<u8>, FilterError> {
    let level = cd.first().copied().unwrap_or(6).min(9);
    backend::encode(buf, level)
}

#[cfg(feature = "libdeflate")]
mod backend {
    use libdeflater::{CompressionLvl, Compressor, DecompressionError, Decompressor};

    use crate::error::FilterError;

    /// Inflates `buf` into a buffer of `limit` bytes (allocated zeroed, so its untouched tail
    /// costs no page faults), truncated to the stream's length.
    pub(super) fn decode(buf: &[u8], limit: usize) -> Result<Vec<u8>, FilterError> {
        let mut out = vec![0u8; limit];
        let n = Decompressor::new()
            .zlib_decompress(buf, &mut out)
            .map_err(|e| {
                FilterError::corrupt(
                    "deflate",
                    match e {
                        DecompressionError::InsufficientSpace => {
                            format!("decodes to more than {limit} bytes")
                        }
                        DecompressionError::BadData => "bad zlib data".to_owned(),
                    },
                )
            })?;
        out.truncate(n);
        Ok(out)
    }

    /// Inflates `buf` into all of `out` (see [`super::decode_into`]).
    pub(super) fn decode_into(buf: &[u8], out: &mut [u8]) -> Result<bool, FilterError> {
        match Decompressor::new().zlib_decompress(buf, out) {
            Ok(n) => Ok(n == out.len()),
            Err(DecompressionError::InsufficientSpace) => Ok(false),
            Err(DecompressionError::BadData) => {
                Err(FilterError::corrupt("deflate", "bad zlib data".to_owned()))
            }
        }
    }

    /// Compresses `buf` at `level` (0..=9, libdeflate's levels of the same numbers).
    pub(super) fn encode(buf: &[u8], level: u32) -> Result<Vec<u8>, FilterError> {
        let lvl = CompressionLvl::new(level as i32)
            .map_err(|e| FilterError::encode("deflate", format!("level {level}: {e:?}")))?;
        let mut c = Compressor::new(lvl);
        let mut out = vec![0u8; c.zlib_compress_bound(buf.len())];
        let n = c
            .zlib_compress(buf, &mut out)
            .map_err(|e| FilterError::encode("deflate", format!("{e:?}")))?;
        out.truncate(n);
        Ok(out)
    }
}

#[cfg(not(feature = "libdeflate"))]
mod backend {
    use std::io::Write;

    use crate::error::FilterError;

    pub(super) fn decode(buf: &[u8], limit: usize) -> Result<Vec<u8>, FilterError> {
        super::read_limited(flate2::read::ZlibDecoder::new(buf), limit, "deflate")
    }

    /// Not offered by this backend: the caller decodes into a new buffer.
    pub(super) fn decode_into(_buf: &[u8], _out: &mut [u8]) -> Result<bool, FilterError> {
        Ok(false)
    }

    pub(super) fn encode(buf: &[u8], level: u32) -> Result<Vec<u8>, FilterError> {
        // zlib-rs's level 1 is `deflate_quick` (larger output); its level 2 is zlib's level 1.
        let level = if level == 1 { 2 } else { level };
        let mut enc = flate2::write::ZlibEncoder::new(
            Vec::with_capacity(buf.len() / 2 + 64),
            flate2::Compression::new(level),
        );
        enc.write_all(buf)
            .map_err(|e| FilterError::encode("deflate", e.to_string()))?;
        enc.finish()
            .map_err(|e| FilterError::encode("deflate", e.to_string()))
    }
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
    use std::io::Write;

    use super::*;

    fn ctx(n: usize) -> Ctx {
        Ctx {
            elem_size: 1,
            chunk_elems: n,
            limit: n + 16,
        }
    }

    fn sample() -> Vec<u8> {
        (0..50_000u32)
            .map(|i| (i % 251) as u8 ^ (i / 977) as u8)
            .collect()
    }

    #[test]
    fn round_trip_levels() {
        let data = sample();
        for level in [0, 1, 2, 6, 9, 42] {
            let enc = encode(&data, &[level]).unwrap();
            assert_eq!(&enc[..1], &[0x78]);
            assert_eq!(decode(&enc, &ctx(data.len())).unwrap(), data);
        }
        assert_eq!(decode(&encode(&[], &[1]).unwrap(), &ctx(0)).unwrap(), b"");
    }

    #[test]
    fn reads_streams_of_the_other_zlib_implementation() {
        // flate2's zlib-rs streams (what the build without libdeflate writes, and a stand-in
        // for zlib's own) decode here, and this backend's streams decode with flate2.
        let data = sample();
        for level in [1, 6] {
            let mut e =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
            e.write_all(&data).unwrap();
            let theirs = e.finish().unwrap();
            assert_eq!(decode(&theirs, &ctx(data.len())).unwrap(), data);
            let ours = encode(&data, &[level]).unwrap();
            let mut back = Vec::new();
            flate2::read::ZlibDecoder::new(ours.as_slice())
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, data);
        }
    }

    #[test]
    fn level_one_is_no_larger_than_zlib_level_one() {
        // zlib's level 1 (`deflate_fast`) is what flate2 writes at level 2 on zlib-rs; the
        // backend's level 1 must not be larger (zlib-rs's own level 1 is ~14 % larger).
        let data: Vec<u8> = (0..200_000u32)
            .map(|i| ((i / 7) % 200) as u8 ^ ((i.wrapping_mul(2_654_435_761) >> 29) as u8))
            .collect();
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(2));
        e.write_all(&data).unwrap();
        let zlib_l1 = e.finish().unwrap().len();
        let ours = encode(&data, &[1]).unwrap().len();
        assert!(ours <= zlib_l1 + zlib_l1 / 50, "{ours} vs {zlib_l1}");
    }

    #[test]
    fn trailing_bytes_after_the_stream_are_ignored() {
        let data = sample();
        let mut enc = encode(&data, &[6]).unwrap();
        enc.extend_from_slice(&[0xAB; 37]);
        assert_eq!(decode(&enc, &ctx(data.len())).unwrap(), data);
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
        // A wrong checksum is refused.
        let mut bad = enc.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(decode(&bad, &ctx(data.len())).is_err());
    }
}
