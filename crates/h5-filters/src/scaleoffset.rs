//! The scale-offset filter (id 6), as libhdf5 encodes it.
//!
//! Client data (20 values): 0 scale type (0 float D-scale, 1 float E-scale, 2 integer),
//! 1 scale factor, 2 elements in the chunk, 3 class (0 integer, 1 float), 4 datatype size,
//! 5 sign (0 unsigned, 1 two's complement), 6 byte order (0 LE, 1 BE), 7 fill value defined
//! (0/1), 8.. the fill value's bytes, least significant first, four per value.
//!
//! Stored chunk: a 21-byte header (minbits: u32 LE; one byte = size of minval, 8; minval:
//! that many bytes LE; zero padding), then each element's low `minbits` bits packed MSB
//! first. Decoded integer = packed + minval (wrapping in the type), except that with a fill
//! value defined the all-ones code means "fill value". Float D-scale: the packed value is
//! read as a signed integer of the type's size `v`, decoded as `v / 10^D + min` in the
//! type's precision, where `min` is the float whose bits are minval's low bytes.
//! Special cases: integer scale factor = full width means no processing at all (no header);
//! minbits = full width means the data follow the header unpacked; minbits 0 means all
//! elements equal minval.

use crate::bits::{BitReader, BitWriter};
use crate::error::FilterError;
use crate::pipeline::Ctx;

const F: &str = "scaleoffset";
const HEADER: usize = 21;

struct Params {
    scale_type: u32,
    scale_factor: i32,
    nelmts: usize,
    float: bool,
    size: usize,
    signed: bool,
    big_endian: bool,
    fill: Option<u64>,
}

fn params(cd: &[u32]) -> Result<Params, FilterError> {
    let [
        scale_type,
        scale_factor,
        nelmts,
        class,
        size,
        signed,
        big_endian,
        fill,
        ..,
    ] = *cd
    else {
        return Err(FilterError::params(
            F,
            format!("{} client data values, need 20", cd.len()),
        ));
    };
    let size = size as usize;
    if !matches!(size, 1 | 2 | 4 | 8) {
        return Err(FilterError::unsupported(F, format!("datatype size {size}")));
    }
    let float = match class {
        0 => false,
        1 => true,
        c => return Err(FilterError::params(F, format!("datatype class {c}"))),
    };
    if float && size < 4 {
        return Err(FilterError::unsupported(F, format!("{size}-byte floats")));
    }
    let fill = (fill == 1).then(|| {
        let lo = u64::from(cd.get(8).copied().unwrap_or(0));
        let hi = u64::from(cd.get(9).copied().unwrap_or(0));
        lo | hi << 32
    });
    Ok(Params {
        scale_type,
        scale_factor: scale_factor as i32,
        nelmts: nelmts as usize,
        float,
        size,
        signed: signed == 1,
        big_endian: big_endian == 1,
        fill,
    })
}

impl Params {
    /// Bits of the type (its size is 1, 2, 4 or 8, checked by `params`).
    fn bits(&self) -> u32 {
        u32::try_from(self.size.saturating_mul(8)).unwrap_or(64)
    }

    fn mask(&self) -> u64 {
        crate::bits::low_mask(self.bits())
    }

    /// Sign-extends a value of the type's width.
    fn sext(&self, v: u64) -> i64 {
        let shift = 64u32.saturating_sub(self.bits());
        (v.checked_shl(shift).unwrap_or(0) as i64)
            .checked_shr(shift)
            .unwrap_or(0)
    }

    fn load(&self, b: &[u8]) -> u64 {
        let mut a = [0u8; 8];
        if self.big_endian {
            for (d, s) in a.iter_mut().zip(b.iter().rev()) {
                *d = *s;
            }
        } else {
            for (d, s) in a.iter_mut().zip(b) {
                *d = *s;
            }
        }
        u64::from_le_bytes(a)
    }

    fn store(&self, v: u64, out: &mut Vec<u8>) {
        let le = v.to_le_bytes();
        let bytes = le.get(..self.size).unwrap_or(&le);
        if self.big_endian {
            out.extend(bytes.iter().rev());
        } else {
            out.extend_from_slice(bytes);
        }
    }

    /// Whether the type/scale combination is the no-op integer case.
    fn passthrough(&self) -> Result<bool, FilterError> {
        if self.float {
            return match self.scale_type {
                0 => Ok(false),
                1 => Err(FilterError::unsupported(
                    F,
                    "E-scale floats (libhdf5 refuses them too)",
                )),
                t => Err(FilterError::params(
                    F,
                    format!("scale type {t} for a float type"),
                )),
            };
        }
        if self.scale_type != 2 {
            return Err(FilterError::params(
                F,
                format!("scale type {} for an integer type", self.scale_type),
            ));
        }
        let sf = self.scale_factor.max(0) as u32;
        if sf > self.bits() {
            return Err(FilterError::params(
                F,
                format!("minimum bits {sf} exceed the type"),
            ));
        }
        Ok(sf == self.bits())
    }
}

/// A D-scaled float's bits from its code `iv`: `iv / 10^scale + min` in the type's precision.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "floating-point arithmetic: no panic, infinities and NaNs are values"
)]
fn descale(iv: i64, size: usize, minval: u64, scale_factor: i32, d_scale: f64) -> u64 {
    if size == 4 {
        let min = f32::from_bits(minval as u32);
        let d = 10f32.powi(scale_factor);
        u64::from((iv as i32 as f32 / d + min).to_bits())
    } else {
        let min = f64::from_bits(minval);
        (iv as f64 / d_scale + min).to_bits()
    }
}

/// Decodes a scale-offset chunk.
pub(crate) fn decode(buf: &[u8], cd: &[u32], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    let p = params(cd)?;
    if p.passthrough()? {
        return Ok(buf.to_vec());
    }
    let out_len = p
        .nelmts
        .checked_mul(p.size)
        .filter(|&n| n <= ctx.limit)
        .ok_or_else(|| {
            FilterError::params(F, format!("{} elements exceed the chunk size", p.nelmts))
        })?;
    let head = buf
        .get(..HEADER)
        .ok_or_else(|| FilterError::corrupt(F, "truncated header"))?;
    let (minbits, rest) = head.split_at(4);
    let minbits = minbits
        .iter()
        .rev()
        .fold(0u32, |acc, &b| acc << 8 | u32::from(b));
    let (mvsize, stored_min) = rest.split_first().unwrap_or((&0, &[]));
    let minval = stored_min
        .iter()
        .take(usize::from(*mvsize).min(8))
        .rev()
        .fold(0u64, |acc, &b| acc << 8 | u64::from(b));
    if minbits > p.bits() {
        return Err(FilterError::corrupt(
            F,
            format!("minbits {minbits} exceed the type"),
        ));
    }
    let body = buf.get(HEADER..).unwrap_or_default();
    if minbits == p.bits() {
        return body
            .get(..out_len)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| FilterError::corrupt(F, "truncated unpacked data"));
    }
    let mut r = BitReader::new(body);
    let all_ones = crate::bits::low_mask(minbits);
    let mut out = crate::output(F, out_len)?;
    let d_scale = if p.float {
        10f64.powi(p.scale_factor)
    } else {
        1.0
    };
    for _ in 0..p.nelmts {
        let v = if minbits == 0 {
            0
        } else {
            r.read(minbits)
                .ok_or_else(|| FilterError::corrupt(F, "truncated packed data"))?
        };
        let is_fill = p.fill.is_some() && v == all_ones;
        let val = match (p.float, is_fill) {
            (_, true) => p.fill.unwrap_or(0) & p.mask(),
            (false, false) => v.wrapping_add(minval) & p.mask(),
            (true, false) => descale(p.sext(v), p.size, minval, p.scale_factor, d_scale),
        };
        p.store(val, &mut out);
    }
    Ok(out)
}

/// Encodes integer chunks (minimum bits computed from the data unless the scale factor
/// fixes them) and float D-scale chunks.
pub(crate) fn encode(buf: &[u8], cd: &[u32]) -> Result<Vec<u8>, FilterError> {
    let p = params(cd)?;
    if p.passthrough()? {
        return Ok(buf.to_vec());
    }
    if buf.len() != p.nelmts.saturating_mul(p.size) {
        return Err(FilterError::encode(
            F,
            "chunk size does not match the element count",
        ));
    }
    let raw: Vec<u64> = buf.chunks_exact(p.size).map(|b| p.load(b)).collect();
    let is_fill = |v: u64| p.fill.is_some_and(|f| f & p.mask() == v);
    // Codes (offsets from min) for non-fill values, and min as stored in the header.
    let (codes, minval): (Vec<Option<u64>>, u64) = if p.float {
        let d = 10f64.powi(p.scale_factor);
        let vals: Vec<f64> = raw
            .iter()
            .map(|&v| {
                if p.size == 4 {
                    f64::from(f32::from_bits(v as u32))
                } else {
                    f64::from_bits(v)
                }
            })
            .collect();
        let min = vals
            .iter()
            .zip(&raw)
            .filter(|&(_, &r)| !is_fill(r))
            .map(|(&v, _)| v)
            .fold(f64::INFINITY, f64::min);
        let min = if min.is_finite() { min } else { 0.0 };
        let (min, minval) = if p.size == 4 {
            let m = min as f32;
            (f64::from(m), u64::from(m.to_bits()))
        } else {
            (min, min.to_bits())
        };
        let mut codes = Vec::with_capacity(vals.len());
        for (&v, &r) in vals.iter().zip(&raw) {
            if is_fill(r) {
                codes.push(None);
                continue;
            }
            let c = ((v - min) * d).round();
            if !(0.0..9.0e15).contains(&c) {
                return Err(FilterError::encode(
                    F,
                    "value range too large for D-scaling",
                ));
            }
            codes.push(Some(c as u64));
        }
        (codes, minval)
    } else {
        let key = |v: u64| {
            if p.signed {
                p.sext(v) as i128
            } else {
                i128::from(v)
            }
        };
        let min = raw
            .iter()
            .copied()
            .filter(|&v| !is_fill(v))
            .min_by_key(|&v| key(v))
            .unwrap_or(0);
        let codes = raw
            .iter()
            .map(|&v| (!is_fill(v)).then(|| v.wrapping_sub(min) & p.mask()))
            .collect();
        let minval = if p.signed { p.sext(min) as u64 } else { min };
        (codes, minval)
    };
    let max = codes.iter().flatten().copied().max().unwrap_or(0);
    let need = |x: u64| 64u32.saturating_sub(x.leading_zeros());
    let mut minbits = if p.fill.is_some() {
        need(max.saturating_add(1))
    } else {
        need(max)
    };
    let sf = p.scale_factor.max(0) as u32;
    if !p.float && sf > 0 {
        if need(max) > sf || (p.fill.is_some() && need(max.saturating_add(1)) > sf) {
            return Err(FilterError::encode(
                F,
                "values do not fit the fixed minimum bits",
            ));
        }
        minbits = sf;
    }
    let mut out = Vec::with_capacity(buf.len().saturating_add(HEADER));
    if minbits >= p.bits() {
        if p.float {
            return Err(FilterError::encode(
                F,
                "value range too large for D-scaling",
            ));
        }
        out.extend_from_slice(&p.bits().to_le_bytes());
        out.push(8);
        out.extend_from_slice(&minval.to_le_bytes());
        out.resize(HEADER, 0);
        out.extend_from_slice(buf);
        return Ok(out);
    }
    out.extend_from_slice(&minbits.to_le_bytes());
    out.push(8);
    out.extend_from_slice(&minval.to_le_bytes());
    out.resize(HEADER, 0);
    let all_ones = crate::bits::low_mask(minbits);
    let mut w = BitWriter::default();
    for c in &codes {
        w.write(c.unwrap_or(all_ones), minbits);
    }
    out.extend_from_slice(&w.out);
    out.push(0); // libhdf5 sizes the buffer one byte larger
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cd(
        float: bool,
        size: u32,
        signed: bool,
        be: bool,
        fill: Option<u32>,
        n: u32,
        sf: u32,
    ) -> Vec<u32> {
        let mut v = vec![
            if float { 0 } else { 2 },
            sf,
            n,
            u32::from(float),
            size,
            u32::from(signed),
            u32::from(be),
        ];
        v.push(u32::from(fill.is_some()));
        v.push(fill.unwrap_or(0));
        v.resize(20, 0);
        v
    }

    fn ctx(n: usize) -> Ctx {
        Ctx {
            elem_size: 8,
            chunk_elems: n,
            limit: n * 8,
        }
    }

    #[test]
    fn integer_round_trips() {
        let vals: Vec<i32> = (0..100).map(|i| 1000 - i * 7 + (i % 3)).collect();
        for be in [false, true] {
            for fill in [None, Some(-5i32 as u32)] {
                let c = cd(false, 4, true, be, fill, 100, 0);
                let buf: Vec<u8> = vals
                    .iter()
                    .flat_map(|v| if be { v.to_be_bytes() } else { v.to_le_bytes() })
                    .collect();
                let e = encode(&buf, &c).unwrap();
                assert!(e.len() < buf.len());
                assert_eq!(decode(&e, &c, &ctx(100)).unwrap(), buf);
                for n in 0..e.len() - 1 {
                    let _ = decode(&e[..n], &c, &ctx(100));
                }
            }
        }
        // Constant data: minbits 0.
        let c = cd(false, 2, false, false, None, 10, 0);
        let buf: Vec<u8> = std::iter::repeat_n(500u16.to_le_bytes(), 10)
            .flatten()
            .collect();
        let e = encode(&buf, &c).unwrap();
        assert_eq!(e[0], 0);
        assert_eq!(decode(&e, &c, &ctx(10)).unwrap(), buf);
    }

    #[test]
    fn float_round_trip() {
        let vals: Vec<f64> = (0..50).map(|i| f64::from(i) * 0.125 - 3.0).collect();
        let c = cd(true, 8, false, false, None, 50, 3);
        let buf: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let e = encode(&buf, &c).unwrap();
        let d = decode(&e, &c, &ctx(50)).unwrap();
        for (a, b) in d.chunks_exact(8).zip(&vals) {
            let a = f64::from_le_bytes(a.try_into().unwrap());
            assert!((a - b).abs() < 1e-3);
        }
    }

    #[test]
    fn bad_parameters() {
        let c = cd(false, 3, true, false, None, 10, 0);
        assert!(decode(&[0; 40], &c, &ctx(10)).is_err());
        let c = cd(false, 4, true, false, None, 1_000_000, 0);
        assert!(decode(&[0; 40], &c, &ctx(10)).is_err());
        assert!(decode(&[0; 40], &[1, 2], &ctx(10)).is_err());
        let mut e = cd(false, 4, true, false, None, 10, 0);
        e[0] = 0;
        assert!(decode(&[0; 40], &e, &ctx(10)).is_err());
    }
}
