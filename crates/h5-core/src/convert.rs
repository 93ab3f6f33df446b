//! Numeric conversion between a file datatype and a memory type (libhdf5's common "hard"
//! conversion paths): integers and floats of any size in either byte order, including IEEE
//! half precision.
//!
//! Widening and same-kind conversions that cannot lose information are always allowed. Narrowing
//! conversions (a smaller integer, float to integer, f64 to f32, a signed/unsigned mismatch that
//! may not fit) are refused with [`ConvertError::Lossy`] unless the caller asks for them; then
//! integers saturate at the destination's range, floats round to nearest, float to integer
//! truncates toward zero (NaN gives 0), as libhdf5 does by default.

use h5_chunkcache::{Conversion, LayoutError};

/// Byte order of a numeric type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Order {
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
    /// VAX floating-point order: 16-bit little-endian words, the most significant word first
    /// (libhdf5's `H5T_ORDER_VAX`; reversing the order of the words gives little-endian bytes).
    /// Only [`NumType::OtherFloat`] sources have it.
    Vax,
}

impl Order {
    /// The byte order of this machine.
    pub const NATIVE: Order = if cfg!(target_endian = "big") {
        Order::Big
    } else {
        Order::Little
    };
}

/// A numeric type: what a conversion needs to know.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum NumType {
    /// Two's complement or unsigned integer of 1, 2, 4 or 8 bytes.
    Int {
        /// Bytes.
        size: usize,
        /// Signed.
        signed: bool,
        /// Byte order.
        order: Order,
    },
    /// IEEE 754 binary16, binary32 or binary64 (2, 4 or 8 bytes).
    Float {
        /// Bytes.
        size: usize,
        /// Byte order.
        order: Order,
    },
    /// Another floating-point layout of up to 16 bytes (x87 80-bit extended precision in 12 or
    /// 16 bytes, IEEE binary128, ...): read as a source only, through f64 (so narrowing: a
    /// lossy conversion).
    OtherFloat {
        /// Bytes.
        size: usize,
        /// Byte order.
        order: Order,
        /// Where its fields are.
        layout: FloatLayout,
    },
}

/// The bit fields of a floating-point type ([`NumType::OtherFloat`]), positions counted from
/// the element's least significant bit.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FloatLayout {
    /// Position of the sign bit.
    pub sign_location: u8,
    /// Position of the exponent field.
    pub exponent_location: u8,
    /// Bits of the exponent field (1 to 31).
    pub exponent_size: u8,
    /// Position of the mantissa field.
    pub mantissa_location: u8,
    /// Bits of the mantissa field (1 to 120).
    pub mantissa_size: u8,
    /// Exponent bias.
    pub exponent_bias: u32,
    /// Whether the mantissa's leading 1 is implied (IEEE); else it is stored (x87).
    pub implied_msb: bool,
}

impl FloatLayout {
    /// Whether the fields fit an element of `size` bytes and this module's arithmetic.
    fn fits(&self, size: usize) -> bool {
        let bits = size.saturating_mul(8);
        let within = |at: u8, n: u8| usize::from(at).saturating_add(usize::from(n)) <= bits;
        (1..=16).contains(&size)
            && (1..=31).contains(&self.exponent_size)
            && (1..=120).contains(&self.mantissa_size)
            && within(self.exponent_location, self.exponent_size)
            && within(self.mantissa_location, self.mantissa_size)
            && within(self.sign_location, 1)
    }

    /// The value of the element whose bits (read in its byte order) are `raw`, rounded to
    /// f64: infinities and NaN kept, values beyond f64's range infinite, below it zero.
    /// Requires the fields to fit the element (as `NumType::valid` checks).
    #[allow(
        clippy::arithmetic_side_effects,
        reason = "fits(): field sizes below 128 bits, exponent below 2^31, mantissa below 121 bits"
    )]
    pub fn to_f64(&self, raw: u128) -> f64 {
        let field = |at: u8, n: u8| (raw >> at) & ((1u128 << n) - 1);
        let negative = field(self.sign_location, 1) == 1;
        let e = field(self.exponent_location, self.exponent_size) as i64;
        let m = field(self.mantissa_location, self.mantissa_size);
        let emax = (1i64 << self.exponent_size) - 1;
        let bias = i64::from(self.exponent_bias);
        // The mantissa as a number in [0, 1) (implied leading 1) or [0, 2) (stored one).
        let point = i64::from(self.mantissa_size) - i64::from(!self.implied_msb);
        let frac = scale(m as f64, -point);
        let v = if e == emax {
            // The stored leading bit does not count for telling infinity from NaN.
            let fraction_bits = if self.implied_msb {
                m
            } else {
                m & ((1u128 << (self.mantissa_size - 1)) - 1)
            };
            if fraction_bits == 0 {
                f64::INFINITY
            } else {
                f64::NAN
            }
        } else if e == 0 {
            scale(frac, 1 - bias)
        } else if self.implied_msb {
            scale(1.0 + frac, e - bias)
        } else {
            scale(frac, e - bias)
        };
        if negative { -v } else { v }
    }

    /// The value of the VAX float whose fields (in little-endian order, see [`Order::Vax`]) are
    /// `raw`: `1.m × 2^(e − bias)` with the leading 1 implied (VAX's `0.1m × 2^(e − bias + 1)`),
    /// every exponent a number (VAX has no infinities and no subnormals), exponent 0 zero, or
    /// with the sign set VAX's reserved operand, read as NaN. Requires the fields to fit the
    /// element (as `NumType::valid` checks).
    #[allow(
        clippy::arithmetic_side_effects,
        reason = "fits(): field sizes below 128 bits, exponent below 2^31, mantissa below 121 bits"
    )]
    pub fn vax_to_f64(&self, raw: u128) -> f64 {
        let field = |at: u8, n: u8| (raw >> at) & ((1u128 << n) - 1);
        let negative = field(self.sign_location, 1) == 1;
        let e = field(self.exponent_location, self.exponent_size) as i64;
        if e == 0 {
            return if negative { f64::NAN } else { 0.0 };
        }
        let m = field(self.mantissa_location, self.mantissa_size);
        let frac = scale(m as f64, -i64::from(self.mantissa_size));
        let v = scale(1.0 + frac, e - i64::from(self.exponent_bias));
        if negative { -v } else { v }
    }
}

/// `x * 2^k` for any `k`, in steps f64 can hold (the result rounds once it is subnormal).
#[allow(
    clippy::arithmetic_side_effects,
    reason = "k moves toward 0 by at most 1000 per step"
)]
fn scale(mut x: f64, mut k: i64) -> f64 {
    while k > 1000 && x != 0.0 && x.is_finite() {
        x *= 2f64.powi(1000);
        k -= 1000;
    }
    while k < -1000 && x != 0.0 && x.is_finite() {
        x *= 2f64.powi(-1000);
        k += 1000;
    }
    // |k| <= 1000 here (or x is 0 or infinite, which any factor keeps).
    x * 2f64.powi(k.clamp(-1000, 1000) as i32)
}

impl NumType {
    /// The HDF5 datatype describing this type (native order).
    pub fn datatype(self) -> h5_format::datatype::Datatype {
        use h5_format::datatype::{ByteOrder, Datatype, FixedPoint, FloatType, Normalization};
        let order = |o: Order| match o {
            Order::Little => ByteOrder::LittleEndian,
            Order::Big => ByteOrder::BigEndian,
            Order::Vax => ByteOrder::Vax,
        };
        match self {
            NumType::Int {
                size,
                signed,
                order: o,
            } => Datatype::FixedPoint(FixedPoint {
                size: size as u32,
                order: order(o),
                signed,
                lo_pad: false,
                hi_pad: false,
                bit_offset: 0,
                precision: self.precision(),
            }),
            NumType::Float { size, order: o } => {
                let (sign, exp_loc, exp_size, mant, bias) = match size {
                    2 => (15, 10, 5, 10, 15),
                    4 => (31, 23, 8, 23, 127),
                    _ => (63, 52, 11, 52, 1023),
                };
                Datatype::Float(FloatType {
                    size: size as u32,
                    order: order(o),
                    lo_pad: false,
                    hi_pad: false,
                    internal_pad: false,
                    normalization: Normalization::Implied,
                    sign_location: sign,
                    bit_offset: 0,
                    precision: self.precision(),
                    exponent_location: exp_loc,
                    exponent_size: exp_size,
                    mantissa_location: 0,
                    mantissa_size: mant,
                    exponent_bias: bias,
                })
            }
            NumType::OtherFloat {
                size,
                order: o,
                layout,
            } => Datatype::Float(FloatType {
                size: size as u32,
                order: order(o),
                lo_pad: false,
                hi_pad: false,
                internal_pad: false,
                normalization: if layout.implied_msb {
                    Normalization::Implied
                } else {
                    Normalization::MsbSet
                },
                sign_location: layout.sign_location,
                bit_offset: 0,
                precision: self.precision(),
                exponent_location: layout.exponent_location,
                exponent_size: layout.exponent_size,
                mantissa_location: layout.mantissa_location,
                mantissa_size: layout.mantissa_size,
                exponent_bias: layout.exponent_bias,
            }),
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            NumType::Int { size, .. }
            | NumType::Float { size, .. }
            | NumType::OtherFloat { size, .. } => size,
        }
    }

    /// Bits per element (saturated for a size no conversion accepts, see [`Self::valid`]).
    fn bits(self) -> u32 {
        u32::try_from(self.size())
            .ok()
            .and_then(|size| size.checked_mul(8))
            .unwrap_or(u32::MAX)
    }

    /// The datatype's precision: every bit of the element.
    fn precision(self) -> u16 {
        u16::try_from(self.bits()).unwrap_or(u16::MAX)
    }

    fn order(self) -> Order {
        match self {
            NumType::Int { order, .. }
            | NumType::Float { order, .. }
            | NumType::OtherFloat { order, .. } => order,
        }
    }

    fn valid(self) -> bool {
        match self {
            NumType::Int { size, .. } => matches!(size, 1 | 2 | 4 | 8),
            NumType::Float { size, .. } => matches!(size, 2 | 4 | 8),
            NumType::OtherFloat { size, layout, .. } => layout.fits(size),
        }
    }

    /// Whether every value of `self` is exactly representable in `to`.
    pub fn fits_in(self, to: NumType) -> bool {
        use NumType::{Float, Int, OtherFloat};
        match (self, to) {
            (
                Int {
                    size: a,
                    signed: sa,
                    ..
                },
                Int {
                    size: b,
                    signed: sb,
                    ..
                },
            ) => match (sa, sb) {
                (false, false) | (true, true) => a <= b,
                (false, true) => a < b,
                (true, false) => false,
            },
            // Integers up to the float's mantissa width (11, 24, 53 bits) are exact.
            (Int { size, signed, .. }, Float { size: f, .. }) => {
                let bits = size.saturating_mul(8).saturating_sub(usize::from(signed));
                let mant = match f {
                    2 => 11,
                    4 => 24,
                    _ => 53,
                };
                bits <= mant
            }
            (Float { .. }, Int { .. }) => false,
            (Float { size: a, .. }, Float { size: b, .. }) => a <= b,
            // Read through f64: exact for none of the layouts it is for.
            (OtherFloat { .. }, _) | (_, OtherFloat { .. }) => self == to,
        }
    }
}

/// Why a conversion cannot be set up.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ConvertError {
    /// The conversion may lose information and was not asked for explicitly.
    #[error("converting {from:?} to {to:?} may lose data; ask for a lossy conversion explicitly")]
    Lossy {
        /// The source type.
        from: NumType,
        /// The destination type.
        to: NumType,
    },
    /// A size this module does not handle.
    #[error("unsupported numeric type {0:?}")]
    Unsupported(NumType),
}

/// A numeric conversion, usable by the chunk cache during scatter and gather.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct NumConversion {
    from: NumType,
    to: NumType,
}

impl NumConversion {
    /// A conversion from `from` to `to`; lossy ones only when `allow_lossy`.
    pub fn new(from: NumType, to: NumType, allow_lossy: bool) -> Result<Self, ConvertError> {
        for t in [from, to] {
            if !t.valid() {
                return Err(ConvertError::Unsupported(t));
            }
        }
        // Other float layouts are read, not written (except as themselves: a copy).
        if matches!(to, NumType::OtherFloat { .. }) && from != to {
            return Err(ConvertError::Unsupported(to));
        }
        if !allow_lossy && !from.fits_in(to) {
            return Err(ConvertError::Lossy { from, to });
        }
        Ok(Self { from, to })
    }

    /// Whether the conversion only copies bytes (same type).
    pub fn is_identity(&self) -> bool {
        self.from == self.to
    }

    /// The source type.
    pub fn from(&self) -> NumType {
        self.from
    }

    /// The destination type.
    pub fn to(&self) -> NumType {
        self.to
    }

    /// Converts `n` elements.
    pub fn run(&self, src: &[u8], dst: &mut [u8], n: usize) -> Result<(), ConvertError> {
        let (fs, ts) = (self.from.size(), self.to.size());
        let (Some(src_len), Some(dst_len)) = (n.checked_mul(fs), n.checked_mul(ts)) else {
            return Err(ConvertError::Unsupported(self.from));
        };
        let (Some(src), Some(dst)) = (src.get(..src_len), dst.get_mut(..dst_len)) else {
            return Err(ConvertError::Unsupported(self.from));
        };
        if self.is_identity() {
            dst.copy_from_slice(src);
            return Ok(());
        }
        // Same kind and size, other byte order: a swap.
        if same_kind_size(self.from, self.to) {
            for (s, d) in src.chunks_exact(fs).zip(dst.chunks_exact_mut(ts)) {
                for (b, x) in d.iter_mut().zip(s.iter().rev()) {
                    *b = *x;
                }
            }
            return Ok(());
        }
        for (s, d) in src.chunks_exact(fs).zip(dst.chunks_exact_mut(ts)) {
            let v = read(self.from, s);
            write(self.to, v, d);
        }
        Ok(())
    }
}

impl Conversion for NumConversion {
    fn src_size(&self) -> usize {
        self.from.size()
    }

    fn dst_size(&self) -> usize {
        self.to.size()
    }

    fn convert(&self, src: &[u8], dst: &mut [u8], n: usize) -> Result<(), LayoutError> {
        self.run(src, dst, n)
            .map_err(|e| Box::new(e) as LayoutError)
    }
}

fn same_kind_size(a: NumType, b: NumType) -> bool {
    match (a, b) {
        (
            NumType::Int {
                size: x, signed: s, ..
            },
            NumType::Int {
                size: y, signed: t, ..
            },
        ) => x == y && s == t,
        (NumType::Float { size: x, .. }, NumType::Float { size: y, .. }) => x == y,
        _ => false,
    }
}

/// An element's value on the way through.
#[derive(Clone, Copy, Debug)]
enum Value {
    Int(i128),
    Float(f64),
}

fn raw(order: Order, b: &[u8]) -> u64 {
    let mut v = 0u64;
    match order {
        Order::Little => {
            for &x in b.iter().rev() {
                v = (v << 8) | u64::from(x);
            }
        }
        Order::Big => {
            for &x in b {
                v = (v << 8) | u64::from(x);
            }
        }
        Order::Vax => v = raw128(Order::Vax, b) as u64,
    }
    v
}

/// Writes the low `d.len()` (at most 8) bytes of `v` in `order`.
fn put_raw(order: Order, v: u64, d: &mut [u8]) {
    let le = v.to_le_bytes();
    match order {
        Order::Little => d.iter_mut().zip(le).for_each(|(b, x)| *b = x),
        Order::Big => d.iter_mut().rev().zip(le).for_each(|(b, x)| *b = x),
        // Never a destination (VAX types are sources only): the little-endian words, most
        // significant first, as read.
        Order::Vax => d
            .chunks_mut(2)
            .rev()
            .zip(le.chunks(2))
            .for_each(|(w, x)| w.iter_mut().zip(x).for_each(|(b, x)| *b = *x)),
    }
}

fn read(t: NumType, b: &[u8]) -> Value {
    let bits = || raw(t.order(), b);
    match t {
        NumType::Int { signed, .. } => {
            let bits = bits();
            let width = t.bits();
            if signed && width < 64 {
                #[allow(clippy::arithmetic_side_effects, reason = "width < 64")]
                let shift = 64 - width;
                Value::Int(i128::from(((bits << shift) as i64) >> shift))
            } else if signed {
                Value::Int(i128::from(bits as i64))
            } else {
                Value::Int(i128::from(bits))
            }
        }
        NumType::Float { size, .. } => Value::Float(match size {
            2 => half_to_f64(bits() as u16),
            4 => f64::from(f32::from_bits(bits() as u32)),
            _ => f64::from_bits(bits()),
        }),
        NumType::OtherFloat {
            order: Order::Vax,
            layout,
            ..
        } => Value::Float(layout.vax_to_f64(raw128(Order::Vax, b))),
        NumType::OtherFloat { order, layout, .. } => Value::Float(layout.to_f64(raw128(order, b))),
    }
}

/// The element's bits (up to 16 bytes) in `order`.
fn raw128(order: Order, b: &[u8]) -> u128 {
    let mut v = 0u128;
    let mut push = |x: u8| v = (v << 8) | u128::from(x);
    match order {
        Order::Little => b.iter().rev().take(16).for_each(|&x| push(x)),
        Order::Big => b.iter().take(16).for_each(|&x| push(x)),
        // Reversing the 16-bit words gives little-endian bytes (libhdf5's conversion does so
        // before reading the fields): the most significant byte first is each word's high byte,
        // the words in stored order.
        Order::Vax => b
            .chunks(2)
            .flat_map(|w| w.iter().rev())
            .take(16)
            .for_each(|&x| push(x)),
    }
    v
}

fn write(t: NumType, v: Value, d: &mut [u8]) {
    let bits = match t {
        NumType::Int { signed, .. } => {
            let (lo, hi) = int_range(t.bits(), signed);
            let x = match v {
                Value::Int(i) => i.clamp(lo, hi),
                Value::Float(f) if f.is_nan() => 0,
                Value::Float(f) => {
                    let t = f.trunc();
                    if t <= lo as f64 {
                        lo
                    } else if t >= hi as f64 {
                        hi
                    } else {
                        t as i128
                    }
                }
            };
            // Two's complement; put_raw keeps the low `size` bytes.
            x as u64
        }
        NumType::Float { size, .. } => {
            let f = match v {
                Value::Int(i) => i as f64,
                Value::Float(f) => f,
            };
            match size {
                2 => u64::from(f64_to_half(f)),
                4 => u64::from((f as f32).to_bits()),
                _ => f.to_bits(),
            }
        }
        // Never a destination (NumConversion::new refuses it).
        NumType::OtherFloat { .. } => return,
    };
    put_raw(t.order(), bits, d);
}

/// The range of an integer of `width` bits (8 to 64: the sizes [`NumType::valid`] accepts).
#[allow(
    clippy::arithmetic_side_effects,
    reason = "1 <= width <= 64: the shifts and differences stay inside i128"
)]
fn int_range(width: u32, signed: bool) -> (i128, i128) {
    let width = width.clamp(1, 64);
    if signed {
        (-(1i128 << (width - 1)), (1i128 << (width - 1)) - 1)
    } else {
        (0, (1i128 << width) - 1)
    }
}

/// IEEE binary16 to f64 (exact).
#[allow(
    clippy::arithmetic_side_effects,
    reason = "exp is a 5-bit field: e - 15 lies in -15..=16"
)]
fn half_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1F);
    let mant = f64::from(h & 0x3FF);
    match exp {
        0 => sign * mant * 2f64.powi(-24),
        31 if mant == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        e => sign * (1.0 + mant / 1024.0) * 2f64.powi(e - 15),
    }
}

/// f64 to IEEE binary16, rounding to nearest even; overflow gives infinity.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "2^-25 <= a < 65520 gives -25 <= e <= 15, so exp <= 31 and q <= 2048"
)]
fn f64_to_half(f: f64) -> u16 {
    if f.is_nan() {
        return 0x7E00;
    }
    let sign: u16 = if f.is_sign_negative() { 0x8000 } else { 0 };
    let a = f.abs();
    if a.is_infinite() || a >= 65520.0 {
        return sign | 0x7C00;
    }
    if a < 2f64.powi(-24) * 0.5 {
        return sign;
    }
    // Scale so that the value is an integer count of the smallest step at its binade.
    let e = a.log2().floor() as i32;
    let (exp, step) = if e < -14 {
        (0, 2f64.powi(-24))
    } else {
        (e + 15, 2f64.powi(e - 10))
    };
    let q = (a / step).round_ties_even() as u32;
    if exp == 0 {
        // Subnormal (q may round up into the first normal binade: the encoding still works).
        return sign | q as u16;
    }
    // q in [1024, 2048]; 2048 carries into the next exponent.
    let (exp, q) = if q >= 2048 {
        (exp + 1, q / 2)
    } else {
        (exp, q)
    };
    if exp >= 31 {
        return sign | 0x7C00;
    }
    sign | ((exp as u16) << 10) | (q as u16 & 0x3FF)
}

#[cfg(test)]
#[allow(clippy::big_endian_bytes)] // big-endian inputs are the point of these tests
mod tests {
    use super::*;

    const LE: Order = Order::Little;
    const BE: Order = Order::Big;

    fn int(size: usize, signed: bool, order: Order) -> NumType {
        NumType::Int {
            size,
            signed,
            order,
        }
    }

    fn float(size: usize, order: Order) -> NumType {
        NumType::Float { size, order }
    }

    /// VAX F and G floats from their bit patterns (the VAX formats: 16-bit little-endian words,
    /// most significant first; value 0.1m × 2^(e − 128) for F, 2^(e − 1024) for G, which the
    /// type's bias of 129 or 1025 gives with an implied leading 1).
    #[test]
    fn vax_floats_decode_to_f64() {
        let g = FloatLayout {
            sign_location: 63,
            exponent_location: 52,
            exponent_size: 11,
            mantissa_location: 0,
            mantissa_size: 52,
            exponent_bias: 1025,
            implied_msb: true,
        };
        let g_type = NumType::OtherFloat {
            size: 8,
            order: Order::Vax,
            layout: g,
        };
        // π: exponent 1026, IEEE's 52 mantissa bits 0x921FB54442D18; as a 64-bit integer
        // 0x402921FB54442D18, whose words 0x4029, 0x21FB, 0x5444, 0x2D18 are stored in that
        // order, each little-endian.
        let pi = [0x29, 0x40, 0xFB, 0x21, 0x44, 0x54, 0x18, 0x2D];
        let c = NumConversion::new(g_type, float(8, LE), true).unwrap();
        let mut dst = [0u8; 8];
        c.run(&pi, &mut dst, 1).unwrap();
        assert_eq!(f64::from_le_bytes(dst), std::f64::consts::PI);
        assert_eq!(
            float_to_f64(
                &h5_format::datatype::FloatType {
                    size: 8,
                    order: h5_format::datatype::ByteOrder::Vax,
                    lo_pad: false,
                    hi_pad: false,
                    internal_pad: false,
                    normalization: h5_format::datatype::Normalization::Implied,
                    sign_location: 63,
                    bit_offset: 0,
                    precision: 64,
                    exponent_location: 52,
                    exponent_size: 11,
                    mantissa_location: 0,
                    mantissa_size: 52,
                    exponent_bias: 1025,
                },
                &pi
            ),
            Some(std::f64::consts::PI)
        );
        // Every exponent is a number (no infinity); exponent 0 is zero, or with the sign set
        // the reserved operand.
        assert_eq!(g.vax_to_f64(0x7FF0_0000_0000_0000), 2f64.powi(2047 - 1025));
        assert_eq!(g.vax_to_f64(0), 0.0);
        assert!(g.vax_to_f64(1 << 63).is_nan());
        // F: -2.5 is exponent 130, mantissa 0x200000 with the sign: 0xC1200000, stored as the
        // words 0xC120, 0x0000.
        let f = NumType::OtherFloat {
            size: 4,
            order: Order::Vax,
            layout: FloatLayout {
                sign_location: 31,
                exponent_location: 23,
                exponent_size: 8,
                mantissa_location: 0,
                mantissa_size: 23,
                exponent_bias: 129,
                implied_msb: true,
            },
        };
        let c = NumConversion::new(f, float(8, LE), true).unwrap();
        c.run(&[0x20, 0xC1, 0x00, 0x00], &mut dst, 1).unwrap();
        assert_eq!(f64::from_le_bytes(dst), -2.5);
    }

    /// x87 extended precision (80 bits, stored leading bit) from its bit patterns.
    #[test]
    fn x87_extended_precision_decodes_to_f64() {
        let x87 = FloatLayout {
            sign_location: 79,
            exponent_location: 64,
            exponent_size: 15,
            mantissa_location: 0,
            mantissa_size: 64,
            exponent_bias: 16383,
            implied_msb: false,
        };
        assert!(x87.fits(16) && x87.fits(10) && !x87.fits(8));
        let bits = |sign: u128, e: u128, m: u128| (sign << 79) | (e << 64) | m;
        let one = 1u128 << 63;
        assert_eq!(x87.to_f64(bits(0, 16383, one)), 1.0);
        assert_eq!(x87.to_f64(bits(1, 16384, one | (one >> 2))), -2.5);
        assert_eq!(x87.to_f64(bits(0, 0x7FFF, one)), f64::INFINITY);
        assert_eq!(x87.to_f64(bits(1, 0x7FFF, one)), f64::NEG_INFINITY);
        assert!(x87.to_f64(bits(0, 0x7FFF, one | (one >> 1))).is_nan());
        // Beyond f64's range either way; x87 denormals are far below it.
        assert_eq!(x87.to_f64(bits(0, 16383 + 2000, one)), f64::INFINITY);
        assert_eq!(x87.to_f64(bits(0, 16383 - 2000, one)), 0.0);
        assert_eq!(x87.to_f64(bits(1, 0, 1)).to_bits(), (-0.0f64).to_bits());
        // f64's smallest subnormal, exactly.
        assert_eq!(x87.to_f64(bits(0, 16383 - 1074, one)), f64::from_bits(1));
        // The 64-bit mantissa rounds to nearest: 1 + 2^-53 + 2^-63 rounds up.
        let m = one | (1 << 10) | 1;
        assert_eq!(x87.to_f64(bits(0, 16383, m)), 1.0 + f64::EPSILON);
        let t = NumType::OtherFloat {
            size: 16,
            order: Order::Little,
            layout: x87,
        };
        assert!(NumConversion::new(t, float(8, LE), false).is_err());
        assert!(NumConversion::new(float(8, LE), t, true).is_err());
        let c = NumConversion::new(t, float(4, LE), true).unwrap();
        let mut dst = [0u8; 4];
        c.run(&bits(0, 16384, one).to_le_bytes(), &mut dst, 1)
            .unwrap();
        assert_eq!(f32::from_le_bytes(dst), 2.0);
    }

    #[test]
    fn widening_is_allowed_narrowing_is_refused() {
        assert!(NumConversion::new(int(2, true, BE), int(8, true, LE), false).is_ok());
        assert!(NumConversion::new(int(4, true, LE), float(8, LE), false).is_ok());
        assert!(NumConversion::new(int(8, true, LE), float(8, LE), false).is_err());
        assert!(matches!(
            NumConversion::new(float(8, LE), float(4, LE), false),
            Err(ConvertError::Lossy { .. })
        ));
        assert!(NumConversion::new(int(4, false, LE), int(4, true, LE), false).is_err());
        assert!(NumConversion::new(int(3, false, LE), int(4, true, LE), true).is_err());
    }

    #[test]
    fn converts_across_orders_sizes_and_kinds() {
        let c = NumConversion::new(int(2, true, BE), float(8, LE), false).unwrap();
        let src: Vec<u8> = [-3i16, 300].iter().flat_map(|v| v.to_be_bytes()).collect();
        let mut dst = vec![0u8; 16];
        c.run(&src, &mut dst, 2).unwrap();
        let got: Vec<f64> = dst
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(got, [-3.0, 300.0]);

        let c = NumConversion::new(float(8, LE), int(1, false, LE), true).unwrap();
        let src: Vec<u8> = [-5.5f64, 3.9, 1e9, f64::NAN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut dst = vec![0u8; 4];
        c.run(&src, &mut dst, 4).unwrap();
        assert_eq!(dst, [0, 3, 255, 0]);

        let c = NumConversion::new(int(4, true, LE), int(4, true, BE), false).unwrap();
        let mut dst = [0u8; 4];
        c.run(&7i32.to_le_bytes(), &mut dst, 1).unwrap();
        assert_eq!(dst, 7i32.to_be_bytes());
    }

    #[test]
    fn narrowing_clamps_and_writes_the_low_bytes_in_order() {
        let c = NumConversion::new(int(8, true, LE), int(2, true, BE), true).unwrap();
        let src: Vec<u8> = [-70000i64, -2, 40000]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut dst = [0u8; 6];
        c.run(&src, &mut dst, 3).unwrap();
        assert_eq!(dst, [0x80, 0x00, 0xFF, 0xFE, 0x7F, 0xFF]);
        let c = NumConversion::new(int(4, true, BE), int(1, false, LE), true).unwrap();
        let mut one = [9u8];
        c.run(&(-1i32).to_be_bytes(), &mut one, 1).unwrap();
        assert_eq!(one, [0], "negative to unsigned clamps at 0");
    }

    #[test]
    fn an_element_count_whose_bytes_overflow_is_an_error() {
        let c = NumConversion::new(int(4, true, LE), int(8, true, LE), false).unwrap();
        let mut dst = [0u8; 8];
        assert!(matches!(
            c.run(&[0; 4], &mut dst, usize::MAX / 2),
            Err(ConvertError::Unsupported(_))
        ));
    }

    #[test]
    fn half_precision_round_trips() {
        for (bits, v) in [
            (0x3C00u16, 1.0f64),
            (0xC000, -2.0),
            (0x7BFF, 65504.0),
            (0x0001, 2f64.powi(-24)),
            (0x3555, 0.333_251_953_125),
        ] {
            assert_eq!(half_to_f64(bits), v, "{bits:#x}");
            assert_eq!(f64_to_half(v), bits, "{v}");
        }
        assert_eq!(f64_to_half(1e6), 0x7C00);
        assert!(half_to_f64(0x7E00).is_nan());
        let c = NumConversion::new(float(2, LE), float(4, LE), false).unwrap();
        let mut dst = [0u8; 4];
        c.run(&0x3C00u16.to_le_bytes(), &mut dst, 1).unwrap();
        assert_eq!(f32::from_le_bytes(dst), 1.0);
    }
}

/// One element of the floating-point type `t` (its first `t.size` bytes) as f64, for every
/// layout [`num_type`] takes (rounded for the wider ones).
pub fn float_to_f64(t: &h5_format::datatype::FloatType, bytes: &[u8]) -> Option<f64> {
    let ty = num_type(&h5_format::datatype::Datatype::Float(*t))?;
    match read(ty, bytes.get(..ty.size())?) {
        Value::Float(f) => Some(f),
        Value::Int(_) => None,
    }
}

/// The numeric type of a file datatype, if it is one this module converts: integers of 1, 2, 4
/// or 8 bytes using all their bits, IEEE half/single/double floats, other float layouts of up to
/// 16 bytes (as sources, [`NumType::OtherFloat`]), and enums over such integers (their values).
pub fn num_type(dt: &h5_format::datatype::Datatype) -> Option<NumType> {
    use h5_format::datatype::{ByteOrder, Datatype, Normalization};
    let order = |o: ByteOrder| match o {
        ByteOrder::LittleEndian => Some(Order::Little),
        ByteOrder::BigEndian => Some(Order::Big),
        ByteOrder::Vax => None,
    };
    let float_order = |o: ByteOrder| match o {
        ByteOrder::Vax => Some(Order::Vax),
        o => order(o),
    };
    match dt {
        Datatype::FixedPoint(t) => {
            let size = t.size as usize;
            let full = t.bit_offset == 0 && Some(usize::from(t.precision)) == size.checked_mul(8);
            (matches!(size, 1 | 2 | 4 | 8) && full).then_some(())?;
            Some(NumType::Int {
                size,
                signed: t.signed,
                order: order(t.order)?,
            })
        }
        Datatype::Float(t) => {
            // VAX floats are never IEEE's, whatever their fields.
            let ieee = (t.order != ByteOrder::Vax).then(|| t.ieee_name()).flatten();
            let size = match ieee {
                Some("float16") => 2,
                Some("float32") => 4,
                Some("float64") => 8,
                _ => {
                    let other = NumType::OtherFloat {
                        size: usize::try_from(t.size).ok()?,
                        order: float_order(t.order)?,
                        layout: FloatLayout {
                            sign_location: t.sign_location,
                            exponent_location: t.exponent_location,
                            exponent_size: t.exponent_size,
                            mantissa_location: t.mantissa_location,
                            mantissa_size: t.mantissa_size,
                            exponent_bias: t.exponent_bias,
                            implied_msb: t.normalization == Normalization::Implied,
                        },
                    };
                    return other.valid().then_some(other);
                }
            };
            Some(NumType::Float {
                size,
                order: order(t.order)?,
            })
        }
        Datatype::Enum(e) => num_type(&e.base),
        _ => None,
    }
}

/// A Rust numeric type that datasets can be read into. `Pod`: reads land directly in a
/// `Vec<Self>` viewed as bytes.
pub trait NativeNum: bytemuck::Pod + Default + Send + Sync + 'static {
    /// Its description.
    const TYPE: NumType;
    /// The value from its native-order bytes (the first `size_of::<Self>()` of them; bytes
    /// missing from a shorter slice read as zero).
    fn from_ne(bytes: &[u8]) -> Self;
}

macro_rules! native {
    ($($t:ty => $k:expr),* $(,)?) => {$(
        impl NativeNum for $t {
            const TYPE: NumType = $k;
            // The conversion wrote these bytes in the host's order (`Order::NATIVE`).
            #[allow(clippy::host_endian_bytes)]
            fn from_ne(bytes: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.iter_mut().zip(bytes).for_each(|(d, s)| *d = *s);
                <$t>::from_ne_bytes(a)
            }
        }
    )*};
}

native! {
    i8 => NumType::Int { size: 1, signed: true, order: Order::NATIVE },
    i16 => NumType::Int { size: 2, signed: true, order: Order::NATIVE },
    i32 => NumType::Int { size: 4, signed: true, order: Order::NATIVE },
    i64 => NumType::Int { size: 8, signed: true, order: Order::NATIVE },
    u8 => NumType::Int { size: 1, signed: false, order: Order::NATIVE },
    u16 => NumType::Int { size: 2, signed: false, order: Order::NATIVE },
    u32 => NumType::Int { size: 4, signed: false, order: Order::NATIVE },
    u64 => NumType::Int { size: 8, signed: false, order: Order::NATIVE },
    f32 => NumType::Float { size: 4, order: Order::NATIVE },
    f64 => NumType::Float { size: 8, order: Order::NATIVE },
}
