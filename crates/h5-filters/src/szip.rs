//! The HDF5 szip filter (id 4): CCSDS 121.0-B adaptive entropy coding ("Rice" coding),
//! laid out as libaec's szip compatibility layer (`SZ_BufftoBuff*`) stores it.
//!
//! Codec: implemented here. The pure-Rust crates on crates.io were tried first: `rust-aec`
//! decodes only the GRIB2 subset; `tensogram-szip` 0.24 decoded most libhdf5 chunks of the
//! test corpus, but pairs the samples of a second-extension block that opens a reference
//! sample interval under preprocessing differently from libaec, so 32- and 64-bit NN
//! chunks written by libhdf5 came back wrong.
//!
//! HDF5 / szlib framing:
//! - Stored chunk: a 4-byte little-endian size of the decoded chunk, then the stream.
//! - Client data (4 values): options mask, pixels per block, bits per pixel, pixels per
//!   scanline. Of the mask only `NN` (32: nearest-neighbour preprocessing) and `MSB`
//!   (16: samples stored most significant byte first) change the stream; `EC`, `LSB`,
//!   `RAW`, `CHIP` and `ALLOW_K13` do not.
//! - Block size = pixels per block; reference sample interval = blocks per scanline
//!   (rounded up).
//! - 32- and 64-bit pixels are coded as 8-bit samples after splitting the chunk into byte
//!   planes (byte 0 of every pixel, then byte 1, ...).
//! - Samples of 9–16 bits occupy 2 bytes, of 17–32 bits 4 bytes.
//! - When a scanline is not a whole number of blocks, each scanline is padded to one (with
//!   its last pixel under NN, else zeros), and the padding is dropped on decode.
//!
//! Stream (CCSDS 121.0-B-3): per block an option id of 3 bits (samples up to 8 bits), 4
//! (up to 16) or 5 (up to 32): 0 = low entropy, then one bit choosing zero-block run (a
//! fundamental-sequence count; 5 = to the end of the 64-block segment or interval, above 5
//! one less) or second extension (pairs coded as one fundamental sequence); all ones =
//! no compression; anything between = split sample with `k = id - 1` (fundamental
//! sequences of the high parts, then the `k` low bits of each). Under NN the first block of
//! each interval carries the reference sample (after the id, or as the first raw sample of
//! an uncompressed block) and the others are mapped prediction errors.
//!
//! The encoder uses split-sample and no-compression blocks only (every choice valid for any
//! CCSDS decoder), choosing the cheaper per block.

use crate::bits::{BitReader, BitWriter};
use crate::error::FilterError;
use crate::pipeline::Ctx;

const F: &str = "szip";

/// Options mask bit: samples are most significant byte first.
const MSB_OPTION: u32 = 16;
/// Options mask bit: nearest-neighbour preprocessing.
const NN_OPTION: u32 = 32;
/// The largest reference sample interval accepted (in blocks; libaec's limit).
const MAX_RSI: u32 = 4096;
/// Zero-block count meaning "to the end of the segment" (remainder of segment).
const ROS: u32 = 5;
/// Blocks of a segment, for the remainder-of-segment zero run.
const SEGMENT: usize = 64;

/// The coding parameters that the client data describe.
#[derive(Debug, Clone)]
struct Layout {
    /// Bits per coded sample (1..=31, or 8 for byte planes).
    bits: u32,
    /// Samples per block.
    block: usize,
    /// Blocks per reference sample interval.
    rsi: usize,
    /// Nearest-neighbour preprocessing.
    nn: bool,
    /// Samples stored most significant byte first.
    msb: bool,
    /// Pixels per scanline.
    pps: usize,
    /// Bytes of one pixel when the chunk is split into byte planes (32/64-bit pixels).
    plane_word: Option<usize>,
    /// Bytes one coded sample occupies in the decoded buffer (1, 2 or 4).
    sample_bytes: usize,
}

impl Layout {
    fn from_cd(cd: &[u32]) -> Result<Self, FilterError> {
        let [mask, ppb, bpp, pps] = match cd {
            [a, b, c, d, ..] => [*a, *b, *c, *d],
            _ => {
                return Err(FilterError::params(
                    F,
                    format!("{} client data values, need 4", cd.len()),
                ));
            }
        };
        if ppb == 0 || !ppb.is_multiple_of(2) || ppb > 64 {
            return Err(FilterError::params(
                F,
                format!("pixels per block {ppb} is not an even number up to 64"),
            ));
        }
        if pps == 0 {
            return Err(FilterError::params(F, "zero pixels per scanline"));
        }
        let rsi = pps.div_ceil(ppb);
        if rsi > MAX_RSI {
            return Err(FilterError::params(
                F,
                format!("{rsi} blocks per scanline (at most {MAX_RSI})"),
            ));
        }
        let (bits, plane_word) = match bpp {
            32 => (8, Some(4)),
            64 => (8, Some(8)),
            1..=31 => (bpp, None),
            _ => {
                return Err(FilterError::params(
                    F,
                    format!("bits per pixel {bpp} (1 to 32, or 64)"),
                ));
            }
        };
        let sample_bytes = match bits {
            0..=8 => 1,
            9..=16 => 2,
            _ => 4,
        };
        let too_big = |_| FilterError::params(F, "parameter too large");
        Ok(Self {
            bits,
            block: usize::try_from(ppb).map_err(too_big)?,
            rsi: usize::try_from(rsi).map_err(too_big)?,
            nn: mask & NN_OPTION != 0,
            msb: mask & MSB_OPTION != 0,
            pps: usize::try_from(pps).map_err(too_big)?,
            plane_word,
            sample_bytes,
        })
    }

    /// Whether scanlines are padded to a whole number of blocks.
    fn padded(&self) -> bool {
        !self.pps.is_multiple_of(self.block.max(1))
    }

    /// Samples of one padded scanline.
    fn padded_line(&self) -> usize {
        self.rsi.saturating_mul(self.block)
    }

    /// Bits of the option id.
    fn id_len(&self) -> u32 {
        match self.bits {
            0..=8 => 3,
            9..=16 => 4,
            _ => 5,
        }
    }

    /// The largest sample value.
    fn xmax(&self) -> u32 {
        u32::MAX >> 32u32.saturating_sub(self.bits).min(31)
    }
}

/// Reads the 4-byte little-endian decoded size in front of the stream.
fn header(buf: &[u8]) -> Result<(usize, &[u8]), FilterError> {
    match buf {
        [a, b, c, d, rest @ ..] => {
            let n = u32::from_le_bytes([*a, *b, *c, *d]);
            let n = usize::try_from(n).map_err(|_| FilterError::corrupt(F, "size too large"))?;
            Ok((n, rest))
        }
        _ => Err(FilterError::corrupt(F, "truncated size header")),
    }
}

/// Decodes a stored szip chunk.
pub(crate) fn decode(buf: &[u8], cd: &[u32], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    let layout = Layout::from_cd(cd)?;
    let (n, stream) = header(buf)?;
    if n > ctx.limit {
        return Err(FilterError::corrupt(
            F,
            format!("header claims {n} bytes, more than a chunk ({})", ctx.limit),
        ));
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    let unit = layout.plane_word.unwrap_or(layout.sample_bytes);
    if !n.is_multiple_of(unit) {
        return Err(FilterError::corrupt(
            F,
            format!("decoded size {n} is not a multiple of the {unit}-byte pixel"),
        ));
    }
    let samples = n.checked_div(layout.sample_bytes).unwrap_or(0);
    // Samples the stream holds: whole padded scanlines when lines are padded.
    let coded = if layout.padded() {
        samples
            .div_ceil(layout.pps)
            .checked_mul(layout.padded_line())
            .ok_or_else(|| FilterError::corrupt(F, "padded size overflows"))?
    } else {
        samples
    };
    let values = decode_stream(stream, &layout, coded)?;
    let mut out = to_bytes(&values, layout.sample_bytes, layout.msb);
    if layout.padded() {
        out = unpad(
            &out,
            layout.pps,
            layout.padded_line(),
            layout.sample_bytes,
            n,
        );
    }
    if out.len() != n {
        return Err(FilterError::corrupt(
            F,
            format!("{} bytes decoded, header says {n}", out.len()),
        ));
    }
    Ok(match layout.plane_word {
        Some(w) => from_planes(&out, w),
        None => out,
    })
}

/// Where decoded samples go: undoes the NN mapping on the fly.
struct Sink {
    out: Vec<u32>,
    nn: bool,
    last: u32,
    xmax: u32,
    med: u32,
}

impl Sink {
    /// A reference sample (starts a prediction run under NN).
    fn reference(&mut self, x: u32) {
        self.last = x;
        self.out.push(x);
    }

    /// A coded sample: a value, or under NN a mapped prediction error.
    fn push(&mut self, d: u32) {
        if !self.nn {
            self.out.push(d);
            return;
        }
        let prev = self.last;
        let mask = if prev & self.med != 0 { self.xmax } else { 0 };
        let theta = mask ^ prev;
        let half = (d >> 1).saturating_add(d & 1);
        let x = if half <= theta {
            if d & 1 == 0 {
                prev.wrapping_add(d >> 1)
            } else {
                prev.wrapping_sub(half)
            }
        } else {
            mask ^ d
        };
        self.last = x;
        self.out.push(x);
    }
}

/// An empty sample buffer with room for `total` samples and a zero run's overshoot (at most a
/// whole interval: 4096 blocks of 64 samples).
fn reserve_samples(total: usize) -> Result<Vec<u32>, FilterError> {
    let n = total.saturating_add((MAX_RSI as usize).saturating_mul(64));
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| FilterError::TooLarge {
        filter: F,
        bytes: n.saturating_mul(4),
    })?;
    Ok(v)
}

fn truncated() -> FilterError {
    FilterError::corrupt(F, "stream ends early")
}

fn read(r: &mut BitReader<'_>, n: u32) -> Result<u32, FilterError> {
    let v = r.read(n).ok_or_else(truncated)?;
    u32::try_from(v).map_err(|_| FilterError::corrupt(F, "sample too wide"))
}

/// Reads a fundamental sequence codeword: the number of 0 bits before a 1.
fn fs(r: &mut BitReader<'_>) -> Result<u32, FilterError> {
    let mut n = 0u32;
    loop {
        match r.read(1) {
            Some(1) => return Ok(n),
            Some(_) => n = n.checked_add(1).ok_or_else(truncated)?,
            None => return Err(truncated()),
        }
    }
}

/// Decodes `total` samples (in their coded widths) from an AEC stream.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "the layout bounds every count: block j in 2..=64 (even), rsi ≤ 4096, b < rsi, id ≥ 1 past the zero case, k < 32 and codes below 2^32, so no sum or shift overflows; indexes are not used"
)]
fn decode_stream(stream: &[u8], p: &Layout, total: usize) -> Result<Vec<u32>, FilterError> {
    let mut r = BitReader::new(stream);
    let xmax = p.xmax();
    let mut sink = Sink {
        // Every sample (and the overshoot of a last zero run) reserved fallibly up front: a
        // short stream can legitimately expand to the chunk's size, and the samples are wider
        // than their bytes.
        out: reserve_samples(total)?,
        nn: p.nn,
        last: 0,
        xmax,
        med: (xmax >> 1).wrapping_add(1),
    };
    let id_len = p.id_len();
    let uncompressed = (1u32 << id_len) - 1;
    let j = p.block;
    let value = |v: u64| -> Result<u32, FilterError> {
        u32::try_from(v)
            .ok()
            .filter(|&x| x <= xmax)
            .ok_or_else(|| FilterError::corrupt(F, "sample out of range"))
    };
    while sink.out.len() < total {
        // One reference sample interval.
        let mut b = 0usize;
        while b < p.rsi && sink.out.len() < total {
            let with_ref = b == 0 && p.nn;
            // Samples of this block after the reference.
            let rest = j - usize::from(with_ref);
            let id = read(&mut r, id_len)?;
            let mut blocks = 1usize;
            if id == 0 {
                let second_ext = read(&mut r, 1)? == 1;
                if with_ref {
                    let x = read(&mut r, p.bits)?;
                    sink.reference(value(x.into())?);
                }
                if second_ext {
                    let mut i = usize::from(with_ref);
                    while i < j {
                        let m = fs(&mut r)?;
                        let (sum, d1) = se_split(m)?;
                        if i % 2 == 0 {
                            sink.push(sum - d1);
                            i += 1;
                        }
                        sink.push(d1);
                        i += 1;
                    }
                } else {
                    let count = fs(&mut r)?.checked_add(1).ok_or_else(truncated)?;
                    let left = p.rsi - b;
                    blocks = match count {
                        ROS => left.min(SEGMENT - b % SEGMENT),
                        c if c > ROS => (c - 1) as usize,
                        c => c as usize,
                    };
                    if blocks > left {
                        return Err(FilterError::corrupt(
                            F,
                            format!("zero run of {blocks} blocks past the interval"),
                        ));
                    }
                    let zeros = blocks * j - usize::from(with_ref);
                    for _ in 0..zeros {
                        sink.push(0);
                    }
                }
            } else if id == uncompressed {
                for i in 0..j {
                    let x = value(r.read(p.bits).ok_or_else(truncated)?)?;
                    if i == 0 && with_ref {
                        sink.reference(x);
                    } else {
                        sink.push(x);
                    }
                }
            } else {
                let k = id - 1;
                if with_ref {
                    let x = read(&mut r, p.bits)?;
                    sink.reference(value(x.into())?);
                }
                let mut high = Vec::with_capacity(rest);
                for _ in 0..rest {
                    high.push(u64::from(fs(&mut r)?) << k);
                }
                for h in high {
                    let low = if k == 0 {
                        0
                    } else {
                        r.read(k).ok_or_else(truncated)?
                    };
                    sink.push(value(h | low)?);
                }
            }
            b += blocks;
        }
    }
    let mut out = sink.out;
    out.truncate(total);
    Ok(out)
}

/// Splits a second-extension codeword `m = s(s+1)/2 + d1` into `(s, d1)`, `s = d0 + d1`.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "s ≤ 12 and base ≤ 91: m - base is taken only when m ≥ base"
)]
fn se_split(m: u32) -> Result<(u32, u32), FilterError> {
    let mut s = 0u32;
    let mut base = 0u32;
    // Pair sums up to 12 (codewords up to 90), as in the CCSDS second-extension table.
    while s <= 12 {
        let next = base + s + 1;
        if m < next {
            return Ok((s, m - base));
        }
        base = next;
        s += 1;
    }
    Err(FilterError::corrupt(
        F,
        format!("second-extension codeword {m} out of range"),
    ))
}

/// Samples to bytes, `width` bytes each (low bytes of the value).
fn to_bytes(values: &[u32], width: usize, msb: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len().saturating_mul(width));
    for &v in values {
        let le = v.to_le_bytes();
        let bytes = le.get(..width).unwrap_or(&le);
        if msb {
            out.extend(bytes.iter().rev());
        } else {
            out.extend_from_slice(bytes);
        }
    }
    out
}

/// Bytes to samples, `width` bytes each.
fn from_bytes(buf: &[u8], width: usize, msb: bool) -> Vec<u32> {
    buf.chunks_exact(width.max(1))
        .map(|s| {
            let it: Box<dyn Iterator<Item = &u8>> = if msb {
                Box::new(s.iter())
            } else {
                Box::new(s.iter().rev())
            };
            it.fold(0u32, |acc, &b| acc.wrapping_shl(8) | u32::from(b))
        })
        .collect()
}

/// Encodes a chunk as libhdf5 + libaec store it; fails (the filter is then skipped when
/// optional) when the stream would be larger than the chunk, as libhdf5's does.
pub(crate) fn encode(buf: &[u8], cd: &[u32]) -> Result<Vec<u8>, FilterError> {
    let layout = Layout::from_cd(cd)?;
    let n = u32::try_from(buf.len()).map_err(|_| FilterError::encode(F, "chunk over 4 GiB"))?;
    let unit = layout.plane_word.unwrap_or(layout.sample_bytes);
    if !buf.len().is_multiple_of(unit) {
        return Err(FilterError::encode(
            F,
            format!(
                "chunk of {} bytes is not whole {unit}-byte pixels",
                buf.len()
            ),
        ));
    }
    let mut data = match layout.plane_word {
        Some(w) => to_planes(buf, w),
        None => buf.to_vec(),
    };
    if layout.padded() {
        data = pad(
            &data,
            layout.pps,
            layout.padded_line(),
            layout.sample_bytes,
            layout.nn,
        );
    }
    let xmax = layout.xmax();
    let samples: Vec<u32> = from_bytes(&data, layout.sample_bytes, layout.msb)
        .into_iter()
        .map(|v| v & xmax)
        .collect();
    let stream = encode_stream(&samples, &layout);
    if stream.len() > buf.len() {
        return Err(FilterError::encode(F, "the chunk does not shrink"));
    }
    let mut out = Vec::with_capacity(stream.len().saturating_add(4));
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&stream);
    Ok(out)
}

/// The NN mapping of `x` predicted by `prev` (the inverse of [`Sink::push`]).
fn map(x: u32, prev: u32, xmax: u32) -> u32 {
    // Samples wider than the coded bits (a value over `xmax`) saturate rather than wrap.
    let theta = prev.min(xmax.saturating_sub(prev));
    if x >= prev {
        let delta = x.saturating_sub(prev);
        if delta <= theta {
            delta.saturating_mul(2)
        } else {
            theta.saturating_add(delta)
        }
    } else {
        let delta = prev.saturating_sub(x);
        if delta <= theta {
            delta.saturating_mul(2).saturating_sub(1)
        } else {
            theta.saturating_add(delta)
        }
    }
}

/// Encodes samples (already in their coded widths) as an AEC stream.
#[allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    reason = "in-memory samples: id_len in 3..=5, k ≤ 30, j ≥ 2 blocks (so block[1..] and block[0] exist), per-block costs below 64 * 2^32"
)]
fn encode_stream(samples: &[u32], p: &Layout) -> Vec<u8> {
    let mut w = BitWriter::default();
    let id_len = p.id_len();
    let kmax = ((1u32 << id_len) - 3).min(p.bits.saturating_sub(1));
    let xmax = p.xmax();
    let j = p.block.max(1);
    let interval = p.rsi.saturating_mul(j).max(1);
    for rsi in samples.chunks(interval) {
        // The coded values of the interval: reference + mapped errors under NN.
        let mut coded = Vec::with_capacity(rsi.len());
        let mut prev = 0u32;
        for (i, &x) in rsi.iter().enumerate() {
            coded.push(if p.nn && i > 0 { map(x, prev, xmax) } else { x });
            prev = x;
        }
        for (bi, block) in coded.chunks(j).enumerate() {
            let mut block = block.to_vec();
            // A short last block: pad with zero errors (or the last value), dropped on decode.
            let fill = if p.nn {
                0
            } else {
                block.last().copied().unwrap_or(0)
            };
            block.resize(j, fill);
            let with_ref = bi == 0 && p.nn;
            let body = if with_ref { &block[1..] } else { &block[..] };
            let raw_cost = u64::from(p.bits) * j as u64;
            let best = (0..=kmax)
                .map(|k| {
                    let c: u64 = body
                        .iter()
                        .map(|&d| u64::from(d >> k) + 1 + u64::from(k))
                        .sum();
                    (c, k)
                })
                .min();
            match best {
                Some((c, k)) if c < raw_cost => {
                    w.write(u64::from(k + 1), id_len);
                    if with_ref {
                        w.write(u64::from(block[0]), p.bits);
                    }
                    for &d in body {
                        for _ in 0..(d >> k) {
                            w.write(0, 1);
                        }
                        w.write(1, 1);
                    }
                    if k > 0 {
                        for &d in body {
                            w.write(u64::from(d) & ((1u64 << k) - 1), k);
                        }
                    }
                }
                _ => {
                    w.write(u64::from((1u32 << id_len) - 1), id_len);
                    for &d in &block {
                        w.write(u64::from(d), p.bits);
                    }
                }
            }
        }
    }
    w.out
}

/// Drops the padding of each scanline: keeps `pps` of every `line` samples of `width`
/// bytes, at most `limit` bytes in all.
fn unpad(buf: &[u8], pps: usize, line: usize, width: usize, limit: usize) -> Vec<u8> {
    let keep = pps.saturating_mul(width);
    let stride = line.saturating_mul(width).max(1);
    let mut out = Vec::with_capacity(limit);
    for l in buf.chunks(stride) {
        let take = keep.min(l.len()).min(limit.saturating_sub(out.len()));
        out.extend_from_slice(l.get(..take).unwrap_or_default());
    }
    out
}

/// Pads each scanline of `pps` samples to `line` samples, repeating the line's last sample
/// when preprocessing (so the padding codes cheaply), else with zeros.
fn pad(buf: &[u8], pps: usize, line: usize, width: usize, nn: bool) -> Vec<u8> {
    let keep = pps.saturating_mul(width).max(1);
    let full = line.saturating_mul(width);
    let mut out = Vec::with_capacity(buf.len().div_ceil(keep).saturating_mul(full));
    for l in buf.chunks(keep) {
        out.extend_from_slice(l);
        let fill = if nn {
            l.get(l.len().saturating_sub(width)..).unwrap_or_default()
        } else {
            &[]
        };
        let zero = [0u8; 4];
        let pixel = if fill.len() == width {
            fill
        } else {
            zero.get(..width).unwrap_or_default()
        };
        while !out.len().is_multiple_of(full.max(1)) && !pixel.is_empty() {
            out.extend_from_slice(pixel);
        }
    }
    out
}

/// Rebuilds pixels of `w` bytes from `w` byte planes.
fn from_planes(buf: &[u8], w: usize) -> Vec<u8> {
    let m = buf.len().checked_div(w).unwrap_or(0);
    let planes: Vec<&[u8]> = buf.chunks_exact(m.max(1)).take(w).collect();
    let mut out = Vec::with_capacity(buf.len());
    for i in 0..m {
        for p in &planes {
            out.push(p.get(i).copied().unwrap_or(0));
        }
    }
    out
}

/// Splits pixels of `w` bytes into `w` byte planes.
fn to_planes(buf: &[u8], w: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(buf.len());
    for j in 0..w {
        out.extend(
            buf.chunks_exact(w.max(1))
                .map(|p| p.get(j).copied().unwrap_or(0)),
        );
    }
    out
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
    fn nn_mapping_inverts() {
        for bits in [1u32, 3, 8] {
            let xmax = (1u32 << bits) - 1;
            for prev in 0..=xmax {
                for x in 0..=xmax {
                    let d = map(x, prev, xmax);
                    assert!(d <= xmax);
                    let mut s = Sink {
                        out: vec![],
                        nn: true,
                        last: prev,
                        xmax,
                        med: (xmax >> 1) + 1,
                    };
                    s.push(d);
                    assert_eq!(s.out, [x], "bits {bits} prev {prev} x {x}");
                }
            }
        }
    }

    #[test]
    fn second_extension_pairs() {
        assert_eq!(se_split(0).unwrap(), (0, 0));
        assert_eq!(se_split(1).unwrap(), (1, 0));
        assert_eq!(se_split(2).unwrap(), (1, 1));
        assert_eq!(se_split(5).unwrap(), (2, 2));
        assert_eq!(se_split(90).unwrap(), (12, 12));
        assert!(se_split(91).is_err());
    }

    #[test]
    fn planes_round_trip() {
        let d: Vec<u8> = (0..24u8).collect();
        let p = to_planes(&d, 4);
        assert_eq!(&p[..6], &[0, 4, 8, 12, 16, 20]);
        assert_eq!(from_planes(&p, 4), d);
    }

    #[test]
    fn padding_round_trip() {
        let d: Vec<u8> = (1..=26u8).collect(); // 2 lines of 13 one-byte pixels
        let p = pad(&d, 13, 16, 1, true);
        assert_eq!(p.len(), 32);
        assert_eq!(&p[13..16], &[13, 13, 13]);
        assert_eq!(unpad(&p, 13, 16, 1, 26), d);
        let z = pad(&d, 13, 16, 1, false);
        assert_eq!(&z[13..16], &[0, 0, 0]);
    }

    #[test]
    fn bad_parameters() {
        for cd in [
            vec![],
            vec![32, 8, 16],
            vec![32, 7, 16, 64],
            vec![32, 0, 16, 64],
            vec![32, 8, 0, 64],
            vec![32, 8, 48, 64],
            vec![32, 8, 16, 0],
            vec![32, 2, 16, 100_000],
        ] {
            assert!(matches!(
                decode(&[8, 0, 0, 0, 1, 2], &cd, &ctx(8)),
                Err(FilterError::BadParameters { .. })
            ));
        }
    }

    #[test]
    fn header_checks() {
        let cd = [32 | 8, 8, 8, 64];
        assert!(decode(&[1, 0, 0], &cd, &ctx(8)).is_err());
        assert!(decode(&[100, 0, 0, 0, 0], &cd, &ctx(8)).is_err());
        assert_eq!(
            decode(&[0, 0, 0, 0], &cd, &ctx(8)).unwrap(),
            Vec::<u8>::new()
        );
        assert!(decode(&[3, 0, 0, 0, 0, 0], &[32 | 8, 8, 16, 64], &ctx(8)).is_err());
    }
}
