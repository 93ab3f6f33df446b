//! Filters whose codec is wholly a dependency: bzip2 (id 307), zstd (id 32015).

use crate::deflate::read_limited;
use crate::error::FilterError;
use crate::pipeline::Ctx;

/// Decompresses a bzip2 stream.
pub(crate) fn bzip2_decode(buf: &[u8], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    read_limited(bzip2::read::BzDecoder::new(buf), ctx.limit, "bzip2")
}

/// Compresses with bzip2 at the block size (1..=9) of client data 0 (default 9).
pub(crate) fn bzip2_encode(buf: &[u8], cd: &[u32]) -> Result<Vec<u8>, FilterError> {
    use std::io::Write;
    let level = cd.first().copied().unwrap_or(9).clamp(1, 9);
    let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(level));
    enc.write_all(buf)
        .map_err(|e| FilterError::encode("bzip2", e.to_string()))?;
    enc.finish()
        .map_err(|e| FilterError::encode("bzip2", e.to_string()))
}

/// Decompresses one Zstandard frame (as the HDF5 zstd filter writes).
pub(crate) fn zstd_decode(buf: &[u8], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    zstd_decode_limited(buf, ctx.limit, "zstd")
}

/// Decompresses Zstandard data to at most `limit` bytes.
pub(crate) fn zstd_decode_limited(
    buf: &[u8],
    limit: usize,
    filter: &'static str,
) -> Result<Vec<u8>, FilterError> {
    let dec = ruzstd::decoding::StreamingDecoder::new(buf)
        .map_err(|e| FilterError::corrupt(filter, e.to_string()))?;
    read_limited(dec, limit, filter)
}

/// Compresses with Zstandard. `ruzstd` offers only its fastest level; the client data level
/// is ignored (any level decodes the same). The frame records its content size (readers
/// such as the HDF5 zstd plugin size their output buffer from it).
pub(crate) fn zstd_encode(buf: &[u8]) -> Vec<u8> {
    let frame = ruzstd::encoding::compress_to_vec(buf, ruzstd::encoding::CompressionLevel::Fastest);
    with_content_size(frame, buf.len() as u64)
}

/// Adds an 8-byte Frame_Content_Size field to a Zstandard frame header that has none
/// (RFC 8878 §3.1.1.1: descriptor bits 7-6 = 3 selects 8 bytes, stored after the window
/// descriptor and dictionary id). Frames that already have one are returned unchanged.
fn with_content_size(mut frame: Vec<u8>, size: u64) -> Vec<u8> {
    let Some(&fhd) = frame.get(4) else {
        return frame;
    };
    let single_segment = fhd & 0x20 != 0;
    if fhd >> 6 != 0 || single_segment {
        return frame;
    }
    let dict_len: usize = match fhd & 3 {
        0 => 0,
        1 => 1,
        2 => 2,
        _ => 4,
    };
    // Magic, descriptor, window descriptor, dictionary id.
    let at = dict_len.saturating_add(6usize);
    if frame.len() < at {
        return frame;
    }
    if let Some(d) = frame.get_mut(4) {
        *d = fhd | 0xc0;
    }
    frame.splice(at..at, size.to_le_bytes());
    frame
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

    fn data() -> Vec<u8> {
        (0..20_000u32)
            .map(|i| ((i * 7) % 13 + i / 1000) as u8)
            .collect()
    }

    #[test]
    fn bzip2_round_trip_and_corruption() {
        let d = data();
        let enc = bzip2_encode(&d, &[9]).unwrap();
        assert_eq!(bzip2_decode(&enc, &ctx(d.len())).unwrap(), d);
        assert!(bzip2_decode(&enc, &ctx(10)).is_err());
        for n in (0..enc.len()).step_by(7) {
            assert!(
                bzip2_decode(&enc[..n], &ctx(d.len()))
                    .map(|v| v != d)
                    .unwrap_or(true)
            );
        }
        let mut bad = enc.clone();
        bad[enc.len() / 2] ^= 0x55;
        assert!(
            bzip2_decode(&bad, &ctx(d.len()))
                .map(|v| v != d)
                .unwrap_or(true)
        );
    }

    #[test]
    fn zstd_round_trip_and_corruption() {
        let d = data();
        let enc = zstd_encode(&d);
        assert_eq!(zstd_decode(&enc, &ctx(d.len())).unwrap(), d);
        assert!(zstd_decode(&enc, &ctx(10)).is_err());
        for n in 0..enc.len() {
            assert!(
                zstd_decode(&enc[..n], &ctx(d.len()))
                    .map(|v| v != d)
                    .unwrap_or(true)
            );
        }
        let mut bad = enc.clone();
        bad[enc.len() / 2] ^= 0x55;
        let _ = zstd_decode(&bad, &ctx(d.len()));
    }

    #[test]
    fn zstd_frame_has_content_size() {
        let d = data();
        let enc = zstd_encode(&d);
        assert_eq!(enc[4] >> 6, 3);
        let fcs = u64::from_le_bytes(enc[6..14].try_into().unwrap());
        assert_eq!(fcs, d.len() as u64);
    }
}
