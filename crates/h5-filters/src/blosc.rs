//! Blosc 1 (id 32001). Client data: [filter revision, blosc version, type size,
//! chunk bytes, level, shuffle, compressor]; the stored chunk is a self-describing blosc1
//! frame, so decoding needs none of them.
//!
//! Frame: 16-byte header (version, codec format version, flags, type size, then u32 LE
//! uncompressed bytes, block size, compressed bytes). Flags: 0x01 byte shuffle, 0x02 data
//! stored raw after the header, 0x04 bit shuffle, 0x10 blocks not split by byte, bits 5..7
//! the codec (0 blosclz, 1 lz4/lz4hc, 3 zlib, 4 zstd; snappy 2 is not supported). Then one
//! u32 LE start offset per block, and per block one stream (or `type size` streams when
//! split, except for the last partial block), each a u32 LE compressed size followed by the
//! data, stored raw when the size equals the stream's uncompressed size.
//!
//! Decoding covers blosclz, lz4 (and lz4hc), zlib and zstd. Encoding writes one block with
//! the shuffle of client data 5, using zlib or zstd when client data 6 asks for them and
//! lz4 otherwise (there is no blosclz or snappy encoder here; any blosc1 reader decodes the
//! result). Streams are split by byte exactly when every blosc1 version would split them
//! (type size <= 16 and >= 128 elements per block), and the don't-split flag is set
//! otherwise. A chunk that does not shrink is an encoding failure, as in the C filter.

use crate::error::FilterError;
use crate::pipeline::Ctx;

const F: &str = "blosc";

fn le_u32(buf: &[u8], at: usize) -> Result<usize, FilterError> {
    let b: [u8; 4] = buf
        .get(at..at.saturating_add(4))
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| FilterError::corrupt(F, "truncated frame"))?;
    Ok(u32::from_le_bytes(b) as usize)
}

/// Decodes a blosc1 frame.
pub(crate) fn decode(buf: &[u8], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    let head = buf
        .get(..16)
        .ok_or_else(|| FilterError::corrupt(F, "truncated header"))?;
    let byte = |i: usize| head.get(i).copied().unwrap_or(0);
    let (version, flags, ts) = (byte(0), byte(2), usize::from(byte(3)).max(1));
    if version > 2 {
        return Err(FilterError::unsupported(
            F,
            format!("format version {version} (blosc2 frames)"),
        ));
    }
    let nbytes = le_u32(buf, 4)?;
    let blocksize = le_u32(buf, 8)?;
    if nbytes > ctx.limit {
        return Err(FilterError::corrupt(
            F,
            format!("{nbytes} bytes exceed the chunk size"),
        ));
    }
    if flags & 0x02 != 0 {
        return buf
            .get(16..nbytes.saturating_add(16))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| FilterError::corrupt(F, "truncated raw data"));
    }
    if nbytes == 0 {
        return Ok(Vec::new());
    }
    if blocksize == 0 {
        return Err(FilterError::corrupt(F, "block size 0"));
    }
    let codec = flags >> 5;
    let nblocks = nbytes.div_ceil(blocksize);
    let mut out = crate::output(F, nbytes)?;
    // The block size is the chunk's word: bounded by the chunk's own size, not trusted.
    let mut tmp = Vec::with_capacity(blocksize.min(nbytes));
    for b in 0..nblocks {
        // Block b starts at b * blocksize < nbytes.
        let bsize = blocksize.min(nbytes.saturating_sub(b.saturating_mul(blocksize)));
        let leftover = bsize < blocksize;
        let mut at = le_u32(buf, b.saturating_mul(4).saturating_add(16))?;
        let split = flags & 0x10 == 0 && !leftover && ts > 1 && bsize.is_multiple_of(ts);
        let nstreams = if split { ts } else { 1 };
        let ssize = bsize.checked_div(nstreams).unwrap_or(0);
        tmp.clear();
        for _ in 0..nstreams {
            let csize = le_u32(buf, at)?;
            at = at.saturating_add(4);
            let src = buf
                .get(at..at.saturating_add(csize))
                .ok_or_else(|| FilterError::corrupt(F, "truncated stream"))?;
            at = at.saturating_add(csize);
            if csize == ssize {
                tmp.extend_from_slice(src);
                continue;
            }
            decompress_into(codec, src, ssize, &mut tmp, F)?;
        }
        if flags & 0x01 != 0 && ts > 1 {
            out.extend(crate::shuffle::unshuffle(&tmp, ts));
        } else if flags & 0x04 != 0 && ts > 0 {
            // Format version 2 (c-blosc 1): a block of a multiple of 8 elements is bit
            // shuffled whole, any other block is stored as it is.
            if bsize.checked_div(ts).is_some_and(|n| n.is_multiple_of(8))
                && bsize.is_multiple_of(ts)
            {
                crate::bitshuffle::untrans_block(&tmp, ts, &mut out);
            } else {
                out.extend_from_slice(&tmp);
            }
        } else {
            out.extend_from_slice(&tmp);
        }
    }
    Ok(out)
}

/// Appends the `n` bytes the compressed stream `src` of internal codec `codec` (the flags'
/// enumeration shared by blosc1 and Blosc2 chunks: 0 blosclz, 1 lz4/lz4hc, 3 zlib, 4 zstd)
/// decodes to; errors are reported for `filter`.
pub(crate) fn decompress_into(
    codec: u8,
    src: &[u8],
    n: usize,
    out: &mut Vec<u8>,
    filter: &'static str,
) -> Result<(), FilterError> {
    let start = out.len();
    match codec {
        0 => out.extend(blosclz_decompress(src, n)?),
        1 => crate::lz4::block_into(src, n, out, filter)?,
        3 => out.extend(crate::deflate::read_limited(
            flate2::read::ZlibDecoder::new(src),
            n,
            filter,
        )?),
        4 => out.extend(crate::other::zstd_decode_limited(src, n, filter)?),
        c => {
            return Err(FilterError::unsupported(
                filter,
                format!("internal codec {c}"),
            ));
        }
    }
    if out.len().checked_sub(start) != Some(n) {
        return Err(FilterError::corrupt(
            filter,
            "stream decodes to the wrong size",
        ));
    }
    Ok(())
}

/// Compresses one stream with internal codec `format` (1 lz4, 3 zlib at `level`, 4 zstd).
pub(crate) fn compress_stream(
    format: u8,
    stream: &[u8],
    level: u32,
) -> Result<Vec<u8>, FilterError> {
    Ok(match format {
        3 => crate::deflate::encode(stream, &[level])?,
        4 => crate::other::zstd_encode(stream),
        _ => lz4_flex::block::compress(stream),
    })
}

/// Encodes a chunk as one blosc1 block (see the module documentation).
pub(crate) fn encode(buf: &[u8], cd: &[u32], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    let ts = cd
        .get(2)
        .map(|&v| v as usize)
        .filter(|&v| v > 0)
        .unwrap_or(ctx.elem_size)
        .clamp(1, 255);
    let nbytes =
        u32::try_from(buf.len()).map_err(|_| FilterError::encode(F, "chunk over 4 GiB"))?;
    if buf.is_empty() {
        return Err(FilterError::encode(F, "empty chunk"));
    }
    let shuffle = cd.get(5).copied().unwrap_or(1);
    let (format, level) = match cd.get(6).copied().unwrap_or(1) {
        4 => (3u8, cd.get(4).copied().unwrap_or(5).min(9)),
        5 => (4u8, 0),
        _ => (1u8, 0),
    };
    let mut flags = format << 5;
    let shuffled = match shuffle {
        1 if ts > 1 => {
            flags |= 0x01;
            crate::shuffle::shuffle(buf, ts)
        }
        // c-blosc 1 bit shuffles only blocks of a multiple of 8 elements (others are
        // stored as they are whatever the flag says), so other blocks go unshuffled.
        2 if buf
            .len()
            .checked_div(ts)
            .is_some_and(|n| n.is_multiple_of(8))
            && buf.len().is_multiple_of(ts) =>
        {
            flags |= 0x04;
            let mut out = Vec::with_capacity(buf.len());
            crate::bitshuffle::trans_block(buf, ts, &mut out);
            out
        }
        _ => buf.to_vec(),
    };
    let split = ts > 1
        && ts <= 16
        && buf.len().checked_div(ts).is_some_and(|n| n >= 128)
        && buf.len().is_multiple_of(ts);
    if !split {
        flags |= 0x10;
    }
    let nstreams = if split { ts } else { 1 };
    let mut out = Vec::with_capacity((buf.len() / 2).saturating_add(32));
    out.extend_from_slice(&[2, 1, flags, ts as u8]);
    out.extend_from_slice(&nbytes.to_le_bytes());
    out.extend_from_slice(&nbytes.to_le_bytes()); // block size: one block
    out.extend_from_slice(&[0; 4]); // compressed size, patched below
    out.extend_from_slice(&20u32.to_le_bytes()); // the only block starts after its offset
    for stream in shuffled.chunks(shuffled.len().checked_div(nstreams).unwrap_or(0).max(1)) {
        let c = compress_stream(format, stream, level)?;
        let body: &[u8] = if c.len() >= stream.len() { stream } else { &c };
        let len =
            u32::try_from(body.len()).map_err(|_| FilterError::encode(F, "stream too large"))?;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(body);
    }
    if out.len() >= buf.len() {
        return Err(FilterError::encode(F, "data do not compress"));
    }
    let total = u32::try_from(out.len()).map_err(|_| FilterError::encode(F, "frame too large"))?;
    if let Some(field) = out.get_mut(12..16) {
        field.copy_from_slice(&total.to_le_bytes());
    }
    Ok(out)
}

/// Decodes a blosclz stream to exactly `n` bytes (FastLZ-style: control byte < 32 = literal
/// run of `c + 1` bytes; otherwise a match of `(c >> 5) + 2` bytes (7 extended by bytes
/// until one is not 255) at distance `(c & 31) << 8 | next byte` + 1, with the escape
/// `next byte == 255 && (c & 31) == 31` followed by a 16-bit big-endian distance
/// (+ 8191 + 1)).
fn blosclz_decompress(src: &[u8], n: usize) -> Result<Vec<u8>, FilterError> {
    let trunc = || FilterError::corrupt(F, "truncated blosclz stream");
    let mut out = crate::output(F, n)?;
    // `ip` only moves past bytes read with `get`, and the lengths below grow by at most 255
    // per byte read: saturating arithmetic never saturates on real streams.
    let mut ip = 0usize;
    let mut ctrl = usize::from(*src.first().ok_or_else(trunc)? & 31);
    ip = ip.saturating_add(1);
    loop {
        if ctrl >= 32 {
            let mut len = (ctrl >> 5).saturating_sub(1);
            let mut ofs = (ctrl & 31) << 8;
            if len == 6 {
                loop {
                    let c = *src.get(ip).ok_or_else(trunc)?;
                    ip = ip.saturating_add(1);
                    len = len.saturating_add(usize::from(c));
                    if c != 255 {
                        break;
                    }
                }
            }
            let code = usize::from(*src.get(ip).ok_or_else(trunc)?);
            ip = ip.saturating_add(1);
            len = len.saturating_add(3);
            let mut dist = ofs.saturating_add(code);
            if code == 255 && ofs == (31 << 8) {
                let hi = usize::from(*src.get(ip).ok_or_else(trunc)?);
                let lo = usize::from(*src.get(ip.saturating_add(1)).ok_or_else(trunc)?);
                ip = ip.saturating_add(2);
                ofs = (hi << 8) | lo;
                dist = ofs.saturating_add(8191);
            }
            let start = out
                .len()
                .checked_sub(dist.saturating_add(1))
                .ok_or_else(|| FilterError::corrupt(F, "blosclz reference before start"))?;
            if out.len().saturating_add(len) > n {
                return Err(FilterError::corrupt(F, "blosclz output too long"));
            }
            // Byte by byte: the match may overlap what it copies (`start` < the length).
            for k in start..start.saturating_add(len) {
                let b = *out
                    .get(k)
                    .ok_or_else(|| FilterError::corrupt(F, "blosclz reference past the output"))?;
                out.push(b);
            }
        } else {
            let run = ctrl.saturating_add(1);
            let lit = src.get(ip..ip.saturating_add(run)).ok_or_else(trunc)?;
            if out.len().saturating_add(run) > n {
                return Err(FilterError::corrupt(F, "blosclz output too long"));
            }
            out.extend_from_slice(lit);
            ip = ip.saturating_add(run);
        }
        match src.get(ip) {
            Some(&c) => {
                ctrl = usize::from(c);
                ip = ip.saturating_add(1);
            }
            None => break,
        }
    }
    if out.len() != n {
        return Err(FilterError::corrupt(
            F,
            "blosclz stream decodes to the wrong size",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_round_trips() {
        let data: Vec<u8> = (0..4000u32).flat_map(|i| (i / 7).to_le_bytes()).collect();
        for codec in [0u32, 1, 4, 5] {
            for shuffle in [0u32, 1, 2] {
                for ts in [1u32, 4, 3, 32] {
                    let cd = [2, 2, ts, 16000, 5, shuffle, codec];
                    let ctx = Ctx {
                        elem_size: 4,
                        chunk_elems: 4000,
                        limit: 16000,
                    };
                    let e = encode(&data, &cd, &ctx).unwrap();
                    assert_eq!(decode(&e, &ctx).unwrap(), data, "{codec} {shuffle} {ts}");
                    for n in (0..e.len()).step_by(11) {
                        assert!(decode(&e[..n], &ctx).is_err());
                    }
                }
            }
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..1000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect();
        let ctx = Ctx {
            elem_size: 1,
            chunk_elems: 1000,
            limit: 1000,
        };
        assert!(encode(&noise, &[2, 2, 1, 1000, 5, 0, 1], &ctx).is_err());
    }

    #[test]
    fn bitshuffle_only_whole_multiples_of_eight_elements() {
        // c-blosc 1 stores a block of 100 doubles unshuffled even when asked to bit shuffle
        // (h5py read back bit-shuffled bytes otherwise).
        let data: Vec<u8> = (0..100u64).flat_map(|i| (i * 3).to_le_bytes()).collect();
        let ctx = Ctx {
            elem_size: 8,
            chunk_elems: 100,
            limit: 800,
        };
        let e = encode(&data, &[2, 2, 8, 800, 5, 2, 5], &ctx).unwrap();
        assert_eq!(e[2] & 0x04, 0);
        assert_eq!(decode(&e, &ctx).unwrap(), data);
        let mut flagged = e.clone();
        flagged[2] |= 0x04;
        assert_eq!(decode(&flagged, &ctx).unwrap(), data);
    }

    #[test]
    fn raw_frame_and_garbage() {
        let ctx = Ctx {
            elem_size: 1,
            chunk_elems: 4,
            limit: 4,
        };
        let mut f = vec![2, 1, 0x02, 1];
        f.extend(4u32.to_le_bytes());
        f.extend(4u32.to_le_bytes());
        f.extend(20u32.to_le_bytes());
        f.extend([9, 8, 7, 6]);
        assert_eq!(decode(&f, &ctx).unwrap(), vec![9, 8, 7, 6]);
        for n in 0..f.len() {
            assert!(decode(&f[..n], &ctx).is_err());
        }
        assert!(blosclz_decompress(&[0x20, 5], 10).is_err());
        assert!(blosclz_decompress(&[], 10).is_err());
    }
}
