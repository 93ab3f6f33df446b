//! The datatype message (type 0x0003): every datatype class of the format, message versions 1–5.
//!
//! The message starts with 8 bytes: class (low 4 bits of byte 0), version (high 4 bits of byte
//! 0), a 24-bit class bit field (bytes 1–3) and the element size in bytes (u32). Class-specific
//! properties follow; compound, enumeration, variable-length, array and complex types embed the
//! datatype messages of their members/base types recursively.
//!
//! The decoded model is [`Datatype`], one variant per class, each wrapping a struct that holds
//! every field the format stores (byte order, padding bits, bit offset and precision, float
//! layout, …), so any type — including custom floats such as bfloat16 — is described exactly.
//! Invariants checked at decode time (a violation is [`crate::FormatError::Corrupted`]):
//! - the element size is non-zero; bit offset + precision fit in the element;
//! - float exponent/mantissa/sign fields lie within the precision;
//! - compound members lie within the compound; enum base size equals the enum size;
//! - array size = product of dims × base size; complex size = 2 × base size;
//! - class-specific minimum versions (array ≥ 2, revised references ≥ 4, complex ≥ 5);
//! - nesting depth ≤ [`MAX_NESTING`] (bounded recursion on hostile input).

mod describe;
mod encode;
#[cfg(test)]
mod tests;

use crate::error::Result;
use crate::reader::Reader;

/// Deepest nesting of datatypes (compound in array in vlen …) accepted, bounding recursion.
pub const MAX_NESTING: usize = 32;

/// Largest array datatype rank (HDF5's maximum rank).
pub const MAX_ARRAY_RANK: usize = 32;

/// Byte order of an atomic type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ByteOrder {
    /// Little-endian.
    LittleEndian,
    /// Big-endian.
    BigEndian,
    /// VAX order (floating point only; bit field bits 0 and 6 both set).
    Vax,
}

/// Fixed-point (integer) type, class 0.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FixedPoint {
    /// Element size in bytes.
    pub size: u32,
    /// Byte order (never [`ByteOrder::Vax`]).
    pub order: ByteOrder,
    /// Two's complement signed (otherwise unsigned).
    pub signed: bool,
    /// Padding bits below the value are ones (otherwise zeros).
    pub lo_pad: bool,
    /// Padding bits above the value are ones (otherwise zeros).
    pub hi_pad: bool,
    /// Offset of the first significant bit.
    pub bit_offset: u16,
    /// Number of significant bits.
    pub precision: u16,
}

/// Mantissa normalization of a floating-point type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Normalization {
    /// No normalization.
    None,
    /// The most significant mantissa bit is always set.
    MsbSet,
    /// The most significant mantissa bit is implied (not stored), as in IEEE 754.
    Implied,
}

/// Floating-point type, class 1: the full bit layout.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FloatType {
    /// Element size in bytes.
    pub size: u32,
    /// Byte order (may be [`ByteOrder::Vax`]).
    pub order: ByteOrder,
    /// Low padding bits are ones.
    pub lo_pad: bool,
    /// High padding bits are ones.
    pub hi_pad: bool,
    /// Internal padding bits (unused bits between fields) are ones.
    pub internal_pad: bool,
    /// Mantissa normalization.
    pub normalization: Normalization,
    /// Bit position of the sign bit.
    pub sign_location: u8,
    /// Offset of the first significant bit.
    pub bit_offset: u16,
    /// Number of significant bits.
    pub precision: u16,
    /// Bit position of the exponent field.
    pub exponent_location: u8,
    /// Size of the exponent field in bits.
    pub exponent_size: u8,
    /// Bit position of the mantissa field.
    pub mantissa_location: u8,
    /// Size of the mantissa field in bits.
    pub mantissa_size: u8,
    /// Exponent bias.
    pub exponent_bias: u32,
}

/// Time type, class 2 (rarely used).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct TimeType {
    /// Element size in bytes.
    pub size: u32,
    /// Byte order.
    pub order: ByteOrder,
    /// Number of significant bits.
    pub precision: u16,
}

/// Padding of fixed-length strings (and of variable-length strings).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum StringPadding {
    /// Null-terminated (the terminator may be absent only when the string fills the element).
    NullTerminate,
    /// Padded with nulls, no terminator required.
    NullPad,
    /// Padded with spaces (Fortran).
    SpacePad,
}

/// Character set of a string or name.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Charset {
    /// ASCII.
    Ascii,
    /// UTF-8.
    Utf8,
}

impl Charset {
    /// Decodes a 4-bit character set value (0 ASCII, 1 UTF-8; others reserved).
    pub(crate) fn from_bits(v: u32, r: &Reader<'_>) -> Result<Self> {
        match v {
            0 => Ok(Charset::Ascii),
            1 => Ok(Charset::Utf8),
            other => Err(r.unsupported(format!("character set {other}"))),
        }
    }
}

/// Fixed-length string type, class 3.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct StringType {
    /// Length in bytes.
    pub size: u32,
    /// Padding.
    pub padding: StringPadding,
    /// Character set.
    pub charset: Charset,
}

/// Bitfield type, class 4.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct BitfieldType {
    /// Element size in bytes.
    pub size: u32,
    /// Byte order.
    pub order: ByteOrder,
    /// Low padding bits are ones.
    pub lo_pad: bool,
    /// High padding bits are ones.
    pub hi_pad: bool,
    /// Offset of the first significant bit.
    pub bit_offset: u16,
    /// Number of significant bits.
    pub precision: u16,
}

/// Opaque type, class 5.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct OpaqueType {
    /// Element size in bytes.
    pub size: u32,
    /// The ASCII tag (without its NUL padding; may be empty).
    pub tag: String,
}

/// One member of a compound type.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct CompoundMember {
    /// Member name.
    pub name: String,
    /// Byte offset of the member within the compound element.
    pub offset: u32,
    /// Member type (version-1 array members are represented as [`Datatype::Array`]).
    pub datatype: Datatype,
}

/// Compound type, class 6.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct CompoundType {
    /// Element size in bytes.
    pub size: u32,
    /// Members in file order (each lies within `size`).
    pub members: Vec<CompoundMember>,
}

/// Kind of a reference type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ReferenceKind {
    /// Object reference (`H5R_OBJECT1`): an object address.
    Object,
    /// Dataset region reference (`H5R_DATASET_REGION1`): a global heap ID.
    DatasetRegion,
    /// Revised object reference (`H5R_OBJECT2`, 1.12+, datatype version 4).
    Object2,
    /// Revised dataset region reference (`H5R_DATASET_REGION2`).
    DatasetRegion2,
    /// Attribute reference (`H5R_ATTR`).
    Attribute,
}

/// Reference type, class 7.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ReferenceType {
    /// Element size in bytes.
    pub size: u32,
    /// Reference kind.
    pub kind: ReferenceKind,
    /// Encoding version of revised references (bits 4–7; 1 today), 0 for the legacy kinds.
    pub encoding_version: u8,
}

/// One name/value pair of an enumeration.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct EnumMember {
    /// Name.
    pub name: String,
    /// Value: exactly `base.size()` bytes in the base type's representation.
    pub value: Vec<u8>,
}

/// Enumeration type, class 8.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct EnumType {
    /// Base (usually integer) type; its size is the enum's size.
    pub base: Box<Datatype>,
    /// Members in file order.
    pub members: Vec<EnumMember>,
}

/// What a variable-length type holds.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum VarLenKind {
    /// A sequence of base-type elements.
    Sequence,
    /// A string (the base type is its character type).
    String {
        /// Padding.
        padding: StringPadding,
        /// Character set.
        charset: Charset,
    },
}

/// Variable-length type, class 9. Elements in the file are (length u32, global heap ID).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct VarLenType {
    /// Element size in the file, in bytes (4 + offset size + 4 as written by the library).
    pub size: u32,
    /// Sequence or string.
    pub kind: VarLenKind,
    /// Base type.
    pub base: Box<Datatype>,
}

/// Array type, class 10.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ArrayType {
    /// Element size in bytes (= product of `dims` × base size).
    pub size: u32,
    /// Dimensions, slowest-changing first (1..=[`MAX_ARRAY_RANK`] of them).
    pub dims: Vec<u32>,
    /// Permutation indices (datatype version 2 and version-1 compound members; never used by
    /// the library, normally the identity), `None` from version 3 on.
    pub permutation: Option<Vec<u32>>,
    /// Element type.
    pub base: Box<Datatype>,
}

/// Form of a complex number type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ComplexForm {
    /// Real part then imaginary part (the only form libhdf5 supports).
    Rectangular,
    /// Magnitude and angle.
    Polar,
    /// Exponential form.
    Exponential,
}

/// Complex number type, class 11 (HDF5 2.0, datatype version 5).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ComplexType {
    /// Element size in bytes (= 2 × base size).
    pub size: u32,
    /// Form.
    pub form: ComplexForm,
    /// Floating-point type of each part (homogeneous complex types only; the format reserves
    /// heterogeneous ones, which are reported as unsupported).
    pub base: Box<Datatype>,
}

/// A decoded datatype message.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Datatype {
    /// Class 0: integer.
    FixedPoint(FixedPoint),
    /// Class 1: floating point.
    Float(FloatType),
    /// Class 2: time.
    Time(TimeType),
    /// Class 3: fixed-length string.
    String(StringType),
    /// Class 4: bitfield.
    Bitfield(BitfieldType),
    /// Class 5: opaque.
    Opaque(OpaqueType),
    /// Class 6: compound.
    Compound(CompoundType),
    /// Class 7: reference.
    Reference(ReferenceType),
    /// Class 8: enumeration.
    Enum(EnumType),
    /// Class 9: variable length (sequence or string).
    VarLen(VarLenType),
    /// Class 10: array.
    Array(ArrayType),
    /// Class 11: complex number.
    Complex(ComplexType),
}

impl Datatype {
    /// Decodes a datatype description from `r` (consuming exactly its bytes).
    pub fn decode(r: &mut Reader<'_>) -> Result<Datatype> {
        decode_at(r, 0)
    }

    /// Element size in bytes.
    pub fn size(&self) -> u32 {
        match self {
            Datatype::FixedPoint(t) => t.size,
            Datatype::Float(t) => t.size,
            Datatype::Time(t) => t.size,
            Datatype::String(t) => t.size,
            Datatype::Bitfield(t) => t.size,
            Datatype::Opaque(t) => t.size,
            Datatype::Compound(t) => t.size,
            Datatype::Reference(t) => t.size,
            Datatype::Enum(t) => t.base.size(),
            Datatype::VarLen(t) => t.size,
            Datatype::Array(t) => t.size,
            Datatype::Complex(t) => t.size,
        }
    }

    /// The class number of the format (0–11).
    pub fn class(&self) -> u8 {
        match self {
            Datatype::FixedPoint(_) => 0,
            Datatype::Float(_) => 1,
            Datatype::Time(_) => 2,
            Datatype::String(_) => 3,
            Datatype::Bitfield(_) => 4,
            Datatype::Opaque(_) => 5,
            Datatype::Compound(_) => 6,
            Datatype::Reference(_) => 7,
            Datatype::Enum(_) => 8,
            Datatype::VarLen(_) => 9,
            Datatype::Array(_) => 10,
            Datatype::Complex(_) => 11,
        }
    }

    /// Whether this is an integer of 1, 2, 4 or 8 bytes in the host byte order using every bit
    /// (so file bytes can be used as a Rust integer without conversion).
    pub fn is_native_int(&self) -> bool {
        match self {
            Datatype::FixedPoint(t) => {
                matches!(t.size, 1 | 2 | 4 | 8)
                    && t.bit_offset == 0
                    && u64::from(t.precision) == u64::from(t.size).saturating_mul(8)
                    && (t.size == 1 || t.order == host_order())
            }
            _ => false,
        }
    }

    /// Whether this is an IEEE 754 binary32 or binary64 in the host byte order.
    pub fn is_native_float(&self) -> bool {
        match self {
            Datatype::Float(t) => {
                matches!(t.ieee_name(), Some("float32" | "float64")) && t.order == host_order()
            }
            _ => false,
        }
    }

    /// Whether elements refer to data elsewhere in the file (variable-length data or
    /// references), at any nesting level: such data cannot be copied as plain bytes.
    pub fn has_indirection(&self) -> bool {
        match self {
            Datatype::VarLen(_) | Datatype::Reference(_) => true,
            Datatype::Compound(c) => c.members.iter().any(|m| m.datatype.has_indirection()),
            Datatype::Enum(e) => e.base.has_indirection(),
            Datatype::Array(a) => a.base.has_indirection(),
            Datatype::Complex(c) => c.base.has_indirection(),
            _ => false,
        }
    }
}

impl FloatType {
    /// "float16"/"float32"/"float64"/"float128"/"bfloat16" when the layout is the standard
    /// one of that name (sign, exponent, mantissa, bias, implied normalization, no offset).
    pub fn ieee_name(&self) -> Option<&'static str> {
        let layout = (
            self.size,
            self.sign_location,
            self.exponent_location,
            self.exponent_size,
            self.mantissa_size,
            self.exponent_bias,
        );
        let name = match layout {
            (2, 15, 10, 5, 10, 15) => "float16",
            (2, 15, 7, 8, 7, 127) => "bfloat16",
            (4, 31, 23, 8, 23, 127) => "float32",
            (8, 63, 52, 11, 52, 1023) => "float64",
            (16, 127, 112, 15, 112, 16383) => "float128",
            _ => return None,
        };
        let plain = self.bit_offset == 0
            && u64::from(self.precision) == u64::from(self.size).saturating_mul(8)
            && self.mantissa_location == 0
            && self.normalization == Normalization::Implied;
        plain.then_some(name)
    }
}

/// The host's byte order.
fn host_order() -> ByteOrder {
    if cfg!(target_endian = "big") {
        ByteOrder::BigEndian
    } else {
        ByteOrder::LittleEndian
    }
}

/// Bits 0 (and for floats 6) of the class bit field as a byte order.
fn order_bit(flags: u32) -> ByteOrder {
    if flags & 1 != 0 {
        ByteOrder::BigEndian
    } else {
        ByteOrder::LittleEndian
    }
}

fn string_padding(v: u32, r: &Reader<'_>) -> Result<StringPadding> {
    match v {
        0 => Ok(StringPadding::NullTerminate),
        1 => Ok(StringPadding::NullPad),
        2 => Ok(StringPadding::SpacePad),
        other => Err(r.unsupported(format!("string padding type {other}"))),
    }
}

/// Checks that `offset + precision` bits fit in `size` bytes and precision is non-zero.
fn check_bits(r: &Reader<'_>, size: u32, offset: u16, precision: u16) -> Result<()> {
    let bits = u64::from(size).saturating_mul(8);
    if precision == 0 || u64::from(offset).saturating_add(u64::from(precision)) > bits {
        return Err(r.corrupted(format!(
            "bit offset {offset} + precision {precision} do not fit in {size} bytes"
        )));
    }
    Ok(())
}

/// A NUL-terminated name; for `padded` names the field is NUL-padded to a multiple of 8 bytes
/// (counting the terminator).
pub(crate) fn read_name(r: &mut Reader<'_>, padded: bool) -> Result<String> {
    let s = r.cstr()?;
    if padded {
        // Consumed len + 1; the field occupies the next multiple of 8.
        r.skip(pad8(s.len().saturating_add(1)))?;
    }
    Ok(String::from_utf8_lossy(s).into_owned())
}

/// Zero bytes that pad `used` bytes to a multiple of 8.
pub(crate) fn pad8(used: usize) -> usize {
    // The remainder is below 8.
    used.checked_rem(8)
        .map_or(0, |r| 8usize.saturating_sub(r) % 8)
}

/// Bytes needed for a version-3 compound member offset: the minimum to encode `size`.
fn offset_width(size: u32) -> usize {
    match size {
        0..=0xFF => 1,
        0x100..=0xFFFF => 2,
        0x1_0000..=0xFF_FFFF => 3,
        _ => 4,
    }
}

fn decode_at(r: &mut Reader<'_>, depth: usize) -> Result<Datatype> {
    if depth > MAX_NESTING {
        return Err(r.unsupported(format!("datatypes nested deeper than {MAX_NESTING}")));
    }
    let head = r.u32()?;
    let class = head & 0x0F;
    let version = (head >> 4) & 0x0F;
    let flags = head >> 8; // 24-bit class bit field
    let size = r.u32()?;
    if !(1..=5).contains(&version) {
        return Err(r.corrupted(format!("datatype message version {version}")));
    }
    if size == 0 {
        return Err(r.corrupted("datatype size 0"));
    }
    let need = |min: u32, what: &str| -> Result<()> {
        if version < min {
            Err(r.corrupted(format!(
                "{what} needs datatype version {min}, found {version}"
            )))
        } else {
            Ok(())
        }
    };
    Ok(match class {
        0 => {
            let bit_offset = r.u16()?;
            let precision = r.u16()?;
            check_bits(r, size, bit_offset, precision)?;
            Datatype::FixedPoint(FixedPoint {
                size,
                order: order_bit(flags),
                lo_pad: flags & 2 != 0,
                hi_pad: flags & 4 != 0,
                signed: flags & 8 != 0,
                bit_offset,
                precision,
            })
        }
        1 => Datatype::Float(decode_float(r, flags, size)?),
        2 => {
            let precision = r.u16()?;
            check_bits(r, size, 0, precision)?;
            Datatype::Time(TimeType {
                size,
                order: order_bit(flags),
                precision,
            })
        }
        3 => Datatype::String(StringType {
            size,
            padding: string_padding(flags & 0x0F, r)?,
            charset: Charset::from_bits((flags >> 4) & 0x0F, r)?,
        }),
        4 => {
            let bit_offset = r.u16()?;
            let precision = r.u16()?;
            check_bits(r, size, bit_offset, precision)?;
            Datatype::Bitfield(BitfieldType {
                size,
                order: order_bit(flags),
                lo_pad: flags & 2 != 0,
                hi_pad: flags & 4 != 0,
                bit_offset,
                precision,
            })
        }
        5 => {
            // Bits 0-7: length of the NUL-padded tag field (a multiple of 8 when written by
            // the library; not enforced).
            let len = (flags & 0xFF) as usize;
            let raw = r.bytes(len)?;
            let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            let tag = String::from_utf8_lossy(raw.get(..end).unwrap_or_default()).into_owned();
            Datatype::Opaque(OpaqueType { size, tag })
        }
        6 => Datatype::Compound(decode_compound(r, version, flags, size, depth)?),
        7 => {
            let kind = match flags & 0x0F {
                0 => ReferenceKind::Object,
                1 => ReferenceKind::DatasetRegion,
                2 => ReferenceKind::Object2,
                3 => ReferenceKind::DatasetRegion2,
                4 => ReferenceKind::Attribute,
                other => return Err(r.unsupported(format!("reference type {other}"))),
            };
            let revised = !matches!(kind, ReferenceKind::Object | ReferenceKind::DatasetRegion);
            let encoding_version = if revised {
                need(4, "a revised reference type")?;
                let v = ((flags >> 4) & 0x0F) as u8;
                if v != 1 {
                    return Err(r.unsupported(format!("revised reference encoding version {v}")));
                }
                v
            } else {
                0
            };
            Datatype::Reference(ReferenceType {
                size,
                kind,
                encoding_version,
            })
        }
        8 => Datatype::Enum(decode_enum(r, version, flags, size, depth)?),
        9 => {
            let kind = match flags & 0x0F {
                0 => VarLenKind::Sequence,
                1 => VarLenKind::String {
                    padding: string_padding((flags >> 4) & 0x0F, r)?,
                    charset: Charset::from_bits((flags >> 8) & 0x0F, r)?,
                },
                other => return Err(r.unsupported(format!("variable-length type {other}"))),
            };
            let base = Box::new(decode_at(r, depth.saturating_add(1))?);
            Datatype::VarLen(VarLenType { size, kind, base })
        }
        10 => {
            need(2, "an array type")?;
            Datatype::Array(decode_array(r, version, size, depth)?)
        }
        11 => {
            need(5, "a complex number type")?;
            if flags & 1 == 0 {
                return Err(r.unsupported("heterogeneous complex number type"));
            }
            let form = match (flags >> 1) & 3 {
                0 => ComplexForm::Rectangular,
                1 => ComplexForm::Polar,
                2 => ComplexForm::Exponential,
                _ => return Err(r.corrupted("reserved complex number form 3")),
            };
            let base = decode_at(r, depth.saturating_add(1))?;
            if !matches!(base, Datatype::Float(_)) {
                return Err(r.corrupted("complex number base type is not floating point"));
            }
            if u64::from(base.size()) * 2 != u64::from(size) {
                return Err(r.corrupted(format!(
                    "complex size {size} is not twice the base size {}",
                    base.size()
                )));
            }
            Datatype::Complex(ComplexType {
                size,
                form,
                base: Box::new(base),
            })
        }
        other => return Err(r.unsupported(format!("datatype class {other}"))),
    })
}

fn decode_float(r: &mut Reader<'_>, flags: u32, size: u32) -> Result<FloatType> {
    // Byte order: bit 0 and bit 6 — (0,0) LE, (1,0) BE, (1,1) VAX, (0,1) reserved.
    let order = match (flags & 1 != 0, flags & 0x40 != 0) {
        (false, false) => ByteOrder::LittleEndian,
        (true, false) => ByteOrder::BigEndian,
        (true, true) => ByteOrder::Vax,
        (false, true) => return Err(r.corrupted("reserved floating-point byte order")),
    };
    let normalization = match (flags >> 4) & 3 {
        0 => Normalization::None,
        1 => Normalization::MsbSet,
        2 => Normalization::Implied,
        _ => return Err(r.corrupted("reserved mantissa normalization 3")),
    };
    let t = FloatType {
        size,
        order,
        lo_pad: flags & 2 != 0,
        hi_pad: flags & 4 != 0,
        internal_pad: flags & 8 != 0,
        normalization,
        sign_location: ((flags >> 8) & 0xFF) as u8,
        bit_offset: r.u16()?,
        precision: r.u16()?,
        exponent_location: r.u8()?,
        exponent_size: r.u8()?,
        mantissa_location: r.u8()?,
        mantissa_size: r.u8()?,
        exponent_bias: r.u32()?,
    };
    check_bits(r, size, t.bit_offset, t.precision)?;
    // Field positions count from the element's first bit, so the significant bits end at
    // offset + precision (libhdf5's H5Tset_fields rule; an n-bit float has offset 7,
    // precision 20, sign at 26).
    let p = u32::from(t.bit_offset).saturating_add(u32::from(t.precision));
    let fits = |pos: u8, len: u8| len > 0 && u32::from(pos).saturating_add(u32::from(len)) <= p;
    if !fits(t.exponent_location, t.exponent_size)
        || !fits(t.mantissa_location, t.mantissa_size)
        || u32::from(t.sign_location) >= p
    {
        return Err(r.corrupted(format!(
            "floating-point fields outside the significant bits (offset {} + precision {}): \
             sign {}, exponent {}+{}, mantissa {}+{}",
            t.bit_offset,
            t.precision,
            t.sign_location,
            t.exponent_location,
            t.exponent_size,
            t.mantissa_location,
            t.mantissa_size
        )));
    }
    Ok(t)
}

fn decode_compound(
    r: &mut Reader<'_>,
    version: u32,
    flags: u32,
    size: u32,
    depth: usize,
) -> Result<CompoundType> {
    let count = flags & 0xFFFF;
    if count == 0 {
        return Err(r.corrupted("compound type without members"));
    }
    // No preallocation from the count: members are pushed as they decode (each needs bytes).
    let mut members = Vec::new();
    for _ in 0..count {
        let name = read_name(r, version < 3)?;
        let offset = if version >= 3 {
            r.uint(offset_width(size))? as u32
        } else {
            r.u32()?
        };
        // Version 1 members may carry an intrinsic array shape (up to 4 dims).
        let mut shape = None;
        if version == 1 {
            let rank = usize::from(r.u8()?);
            r.skip(3)?;
            let perm = r.u32()?;
            r.skip(4)?;
            let mut dims = [0u32; 4];
            for d in &mut dims {
                *d = r.u32()?;
            }
            if rank > 4 {
                return Err(r.corrupted(format!("compound member rank {rank} (at most 4)")));
            }
            if rank > 0 {
                let dims = dims.get(..rank).unwrap_or_default().to_vec();
                let perm = perm
                    .to_le_bytes()
                    .iter()
                    .take(rank)
                    .map(|&b| u32::from(b))
                    .collect();
                shape = Some((dims, perm));
            }
        }
        let mut datatype = decode_at(r, depth.saturating_add(1))?;
        if let Some((dims, perm)) = shape {
            let total = array_size(r, &dims, datatype.size())?;
            datatype = Datatype::Array(ArrayType {
                size: total,
                dims,
                permutation: Some(perm),
                base: Box::new(datatype),
            });
        }
        let end = u64::from(offset).saturating_add(u64::from(datatype.size()));
        if end > u64::from(size) {
            return Err(r.corrupted(format!(
                "compound member {name:?} ends at byte {end}, beyond the compound size {size}"
            )));
        }
        members.push(CompoundMember {
            name,
            offset,
            datatype,
        });
    }
    Ok(CompoundType { size, members })
}

fn decode_enum(
    r: &mut Reader<'_>,
    version: u32,
    flags: u32,
    size: u32,
    depth: usize,
) -> Result<EnumType> {
    let count = (flags & 0xFFFF) as usize;
    let base = decode_at(r, depth.saturating_add(1))?;
    if base.size() != size {
        return Err(r.corrupted(format!(
            "enum size {size} differs from its base size {}",
            base.size()
        )));
    }
    let mut names = Vec::new();
    for _ in 0..count {
        names.push(read_name(r, version < 3)?);
    }
    let width = base.size() as usize;
    let total = count
        .checked_mul(width)
        .ok_or_else(|| r.corrupted("enum values overflow"))?;
    let values = r.bytes(total)?;
    let members = names
        .into_iter()
        .zip(values.chunks_exact(width))
        .map(|(name, v)| EnumMember {
            name,
            value: v.to_vec(),
        })
        .collect();
    Ok(EnumType {
        base: Box::new(base),
        members,
    })
}

/// Product of `dims` × `base` bytes, checked to fit the format's u32 size.
fn array_size(r: &Reader<'_>, dims: &[u32], base: u32) -> Result<u32> {
    dims.iter()
        .try_fold(u64::from(base), |acc, &d| acc.checked_mul(u64::from(d)))
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| r.corrupted(format!("array {dims:?} of {base}-byte elements too large")))
}

fn decode_array(r: &mut Reader<'_>, version: u32, size: u32, depth: usize) -> Result<ArrayType> {
    let rank = usize::from(r.u8()?);
    if rank == 0 || rank > MAX_ARRAY_RANK {
        return Err(r.corrupted(format!("array rank {rank}")));
    }
    if version == 2 {
        r.skip(3)?;
    }
    let mut dims = Vec::with_capacity(rank);
    for _ in 0..rank {
        dims.push(r.u32()?);
    }
    let permutation = if version == 2 {
        let mut p = Vec::with_capacity(rank);
        for _ in 0..rank {
            p.push(r.u32()?);
        }
        Some(p)
    } else {
        None
    };
    let base = decode_at(r, depth.saturating_add(1))?;
    let total = array_size(r, &dims, base.size())?;
    if total != size {
        return Err(r.corrupted(format!(
            "array size {size} differs from dims {dims:?} x base size {}",
            base.size()
        )));
    }
    Ok(ArrayType {
        size,
        dims,
        permutation,
        base: Box::new(base),
    })
}
