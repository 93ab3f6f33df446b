//! The n-bit filter (id 5), as libhdf5 encodes it.
//!
//! Client data: 0 count of values, 1 "no compression needed" flag, 2 elements in the chunk,
//! then the datatype description starting at index 3:
//! - atomic (class 1): size, byte order (0 LE, 1 BE), precision, bit offset;
//! - array (class 2): total size, then the base type's description (class first);
//! - compound (class 3): size, member count, then per member its byte offset and the
//!   member's description (class first);
//! - no-op (class 4, copied whole): size.
//!
//! The packed stream holds, element after element in type order, each atomic value's
//! `precision` significant bits (starting at `offset`) MSB first, and no-op bytes whole.
//! Decoding puts the bits back in place; all other bits are zero.

use crate::bits::{BitReader, BitWriter};
use crate::error::FilterError;
use crate::pipeline::Ctx;

const F: &str = "nbit";
const MAX_DEPTH: usize = 32;

/// A parsed datatype description.
#[derive(Debug)]
enum Ty {
    Atomic {
        size: usize,
        be: bool,
        precision: u32,
        offset: u32,
    },
    Array {
        size: usize,
        base: Box<Ty>,
    },
    Compound {
        size: usize,
        members: Vec<(usize, Ty)>,
    },
    Noop {
        size: usize,
    },
}

impl Ty {
    fn size(&self) -> usize {
        match self {
            Ty::Atomic { size, .. }
            | Ty::Array { size, .. }
            | Ty::Compound { size, .. }
            | Ty::Noop { size } => *size,
        }
    }
}

struct Cursor<'a> {
    cd: &'a [u32],
    at: usize,
}

impl Cursor<'_> {
    fn next(&mut self) -> Result<u32, FilterError> {
        let v = self
            .cd
            .get(self.at)
            .copied()
            .ok_or_else(|| FilterError::params(F, "client data too short for the datatype"))?;
        self.at = self.at.saturating_add(1);
        Ok(v)
    }

    /// Parses a description whose class code is `class` (already read).
    fn ty(&mut self, class: u32, depth: usize) -> Result<Ty, FilterError> {
        if depth > MAX_DEPTH {
            return Err(FilterError::params(F, "datatype nesting too deep"));
        }
        Ok(match class {
            1 => {
                let size = self.next()? as usize;
                let be = self.next()? == 1;
                let precision = self.next()?;
                let offset = self.next()?;
                let bits = size
                    .checked_mul(8)
                    .ok_or_else(|| FilterError::params(F, "size"))?;
                if size == 0
                    || precision as usize > bits
                    || (precision as usize).saturating_add(offset as usize) > bits
                {
                    return Err(FilterError::params(F, "invalid precision/offset"));
                }
                Ty::Atomic {
                    size,
                    be,
                    precision,
                    offset,
                }
            }
            2 => {
                let size = self.next()? as usize;
                let c = self.next()?;
                let base = self.ty(c, depth.saturating_add(1))?;
                if base.size() == 0 || !size.is_multiple_of(base.size()) {
                    return Err(FilterError::params(
                        F,
                        "array size not a multiple of its base",
                    ));
                }
                Ty::Array {
                    size,
                    base: Box::new(base),
                }
            }
            3 => {
                let size = self.next()? as usize;
                let n = self.next()? as usize;
                if n > self.cd.len() {
                    return Err(FilterError::params(
                        F,
                        "member count exceeds the client data",
                    ));
                }
                let mut members = Vec::with_capacity(n);
                for _ in 0..n {
                    let off = self.next()? as usize;
                    let c = self.next()?;
                    let t = self.ty(c, depth.saturating_add(1))?;
                    if off.checked_add(t.size()).is_none_or(|e| e > size) {
                        return Err(FilterError::params(
                            F,
                            "compound member outside the compound",
                        ));
                    }
                    members.push((off, t));
                }
                Ty::Compound { size, members }
            }
            4 => Ty::Noop {
                size: self.next()? as usize,
            },
            c => return Err(FilterError::params(F, format!("datatype class code {c}"))),
        })
    }
}

/// (no-compress flag, element count, element type)
fn parse(cd: &[u32]) -> Result<(bool, usize, Ty), FilterError> {
    let mut c = Cursor { cd, at: 0 };
    let _count = c.next()?;
    let noop = c.next()? != 0;
    let n = c.next()? as usize;
    if noop {
        return Ok((true, n, Ty::Noop { size: 0 }));
    }
    let class = c.next()?;
    let t = c.ty(class, 0)?;
    if t.size() == 0 {
        return Err(FilterError::params(F, "datatype size 0"));
    }
    Ok((false, n, t))
}

/// The byte of an element of `size` bytes holding bit `bit` (counted from the least
/// significant), in big- or little-endian order.
fn byte_of(bit: usize, size: usize, be: bool) -> usize {
    if be {
        size.saturating_sub(1).saturating_sub(bit / 8)
    } else {
        bit / 8
    }
}

fn unpack(t: &Ty, r: &mut BitReader<'_>, dst: &mut [u8]) -> Result<(), FilterError> {
    let trunc = || FilterError::corrupt(F, "truncated packed data");
    match t {
        Ty::Atomic {
            size,
            be,
            precision,
            offset,
        } => {
            // Significance order, most significant first, up to 64 bits at a time. `parse`
            // checked offset + precision ≤ 8 * size, so every bit is in the element.
            let mut hi = offset.saturating_add(*precision);
            while hi > *offset {
                let take = hi.saturating_sub(*offset).min(64);
                let v = r.read(take).ok_or_else(trunc)?;
                let lo = hi.saturating_sub(take);
                for b in 0..take {
                    if (v >> b) & 1 == 1 {
                        let bit = lo.saturating_add(b) as usize;
                        let byte = byte_of(bit, *size, *be);
                        let slot = dst.get_mut(byte).ok_or_else(trunc)?;
                        *slot |= 1 << (bit % 8);
                    }
                }
                hi = lo;
            }
        }
        Ty::Array { base, .. } => {
            for d in dst.chunks_exact_mut(base.size()) {
                unpack(base, r, d)?;
            }
        }
        Ty::Compound { members, .. } => {
            for (off, m) in members {
                let d = dst
                    .get_mut(*off..off.saturating_add(m.size()))
                    .ok_or_else(trunc)?;
                unpack(m, r, d)?;
            }
        }
        Ty::Noop { size } => {
            for d in dst.iter_mut().take(*size) {
                *d = r.read(8).ok_or_else(trunc)? as u8;
            }
        }
    }
    Ok(())
}

fn pack(t: &Ty, src: &[u8], w: &mut BitWriter) {
    match t {
        Ty::Atomic {
            size,
            be,
            precision,
            offset,
        } => {
            let mut hi = offset.saturating_add(*precision);
            while hi > *offset {
                let take = hi.saturating_sub(*offset).min(64);
                let lo = hi.saturating_sub(take);
                let mut v = 0u64;
                for b in (0..take).rev() {
                    let bit = lo.saturating_add(b) as usize;
                    let byte = src.get(byte_of(bit, *size, *be)).copied().unwrap_or(0);
                    v = (v << 1) | u64::from((byte >> (bit % 8)) & 1);
                }
                w.write(v, take);
                hi = lo;
            }
        }
        Ty::Array { base, .. } => {
            for s in src.chunks_exact(base.size()) {
                pack(base, s, w);
            }
        }
        Ty::Compound { members, .. } => {
            for (off, m) in members {
                let s = src
                    .get(*off..off.saturating_add(m.size()))
                    .unwrap_or_default();
                pack(m, s, w);
            }
        }
        Ty::Noop { size } => {
            for &b in src.iter().take(*size) {
                w.write(u64::from(b), 8);
            }
        }
    }
}

/// Decodes an n-bit chunk.
pub(crate) fn decode(buf: &[u8], cd: &[u32], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    let (noop, n, t) = parse(cd)?;
    if noop {
        return Ok(buf.to_vec());
    }
    let len = n
        .checked_mul(t.size())
        .filter(|&l| l <= ctx.limit)
        .ok_or_else(|| FilterError::params(F, format!("{n} elements exceed the chunk size")))?;
    let mut out = crate::output(F, len)?;
    out.resize(len, 0);
    let mut r = BitReader::new(buf);
    for d in out.chunks_exact_mut(t.size()) {
        unpack(&t, &mut r, d)?;
    }
    Ok(out)
}

/// Encodes an n-bit chunk.
pub(crate) fn encode(buf: &[u8], cd: &[u32]) -> Result<Vec<u8>, FilterError> {
    let (noop, n, t) = parse(cd)?;
    if noop {
        return Ok(buf.to_vec());
    }
    if Some(buf.len()) != n.checked_mul(t.size()) {
        return Err(FilterError::encode(
            F,
            "chunk size does not match the element count",
        ));
    }
    let mut w = BitWriter::default();
    for s in buf.chunks_exact(t.size()) {
        pack(&t, s, &mut w);
    }
    Ok(w.out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Ctx {
        Ctx {
            elem_size: 1,
            chunk_elems: 1 << 16,
            limit: 1 << 20,
        }
    }

    #[test]
    #[allow(clippy::big_endian_bytes)] // builds big-endian input on purpose
    fn atomic_round_trip_odd_bits() {
        // 12-bit values at bit offset 2 in LE and BE 4-byte words.
        for be in [0u32, 1] {
            let cd = [8, 0, 50, 1, 4, be, 12, 2];
            let mut buf = Vec::new();
            for i in 0..50u32 {
                let v = ((i * 77) & 0xfff) << 2;
                buf.extend(if be == 1 {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                });
            }
            let e = encode(&buf, &cd).unwrap();
            assert_eq!(e.len(), (50 * 12usize).div_ceil(8));
            assert_eq!(decode(&e, &cd, &ctx()).unwrap(), buf);
            assert!(decode(&e[..e.len() - 1], &cd, &ctx()).is_err());
        }
        // The first value's bits come first, MSB first.
        let cd = [8, 0, 2, 1, 1, 0, 4, 0];
        assert_eq!(encode(&[0x0a, 0x05], &cd).unwrap(), vec![0xa5]);
    }

    #[test]
    fn nested_round_trip() {
        // compound{ a: array[2] of 10-bit in u16 at 0, b: noop 3 bytes at 4, c: 64-bit at 8 }
        let cd = [
            0, 0, 3, 3, 16, 3, 0, 2, 4, 1, 2, 0, 10, 0, 4, 4, 3, 8, 1, 8, 0, 64, 0,
        ];
        let mut buf = Vec::new();
        for i in 0..3u16 {
            buf.extend(((i * 100) & 0x3ff).to_le_bytes());
            buf.extend(((i * 300) & 0x3ff).to_le_bytes());
            buf.extend([1, 2, 3, 0]);
            buf.extend((u64::from(i) * 0x0123_4567_89ab_cdef).to_le_bytes());
        }
        let e = encode(&buf, &cd).unwrap();
        assert_eq!(decode(&e, &cd, &ctx()).unwrap(), buf);
    }

    #[test]
    fn bad_parameters() {
        assert!(decode(&[0; 8], &[8, 0, 2, 1, 4, 0, 40, 0], &ctx()).is_err());
        assert!(decode(&[0; 8], &[8, 0, 2], &ctx()).is_err());
        assert!(decode(&[0; 8], &[8, 0, 2, 9, 4], &ctx()).is_err());
        // Deep nesting of arrays.
        let mut cd = vec![0, 0, 1, 2];
        for _ in 0..100 {
            cd.extend([4, 2]);
        }
        assert!(decode(&[0; 8], &cd, &ctx()).is_err());
        assert!(decode(&[0; 8], &[8, 0, 1 << 30, 1, 4, 0, 8, 0], &ctx()).is_err());
    }
}
