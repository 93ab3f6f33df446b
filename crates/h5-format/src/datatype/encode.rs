//! Encoding datatype messages: the inverse of [`Datatype::decode`].
//!
//! The decoded model does not remember each node's version, so the caller names the version of
//! the outermost type and nested types get the version libhdf5 gives them: compound, array and
//! enumeration members are raised to the parent's version (libhdf5's "upgrade"), a
//! variable-length type follows its base, and every other class keeps its lowest version
//! ([`Datatype::min_version`]). This reproduces libhdf5's bytes: e.g. a version-3 compound
//! (`libver='latest'`) holds version-3 nested compounds and arrays but version-1 integers.
//!
//! Version-dependent encodings:
//! - names of compound members and enumeration members are NUL-terminated and padded to a
//!   multiple of 8 bytes in versions 1 and 2, unpadded from version 3;
//! - compound member offsets are 4 bytes in versions 1 and 2, the fewest bytes that hold the
//!   compound's size from version 3;
//! - version-1 compound members carry an intrinsic array shape: an [`ArrayType`] member with
//!   a permutation and at most 4 dimensions is written that way (its base as the member type);
//! - array types store a permutation only in version 2 (the identity when
//!   [`ArrayType::permutation`] is `None`); from version 3 on it is not stored.

use super::{
    ArrayType, ByteOrder, Charset, ComplexForm, CompoundType, Datatype, EnumType, FloatType,
    Normalization, ReferenceKind, StringPadding, VarLenKind,
};
use crate::error::{FormatError, Result};
use crate::writer::Writer;

/// The error for a value the format cannot express.
fn unrepresentable(what: impl Into<String>) -> FormatError {
    FormatError::Unsupported {
        structure: "datatype (encoding)",
        address: u64::MAX,
        what: what.into(),
    }
}

fn padding_bits(p: StringPadding) -> u32 {
    match p {
        StringPadding::NullTerminate => 0,
        StringPadding::NullPad => 1,
        StringPadding::SpacePad => 2,
    }
}

fn charset_bits(c: Charset) -> u32 {
    match c {
        Charset::Ascii => 0,
        Charset::Utf8 => 1,
    }
}

/// Bit 0 of the class bit field: big-endian.
fn order_flag(o: ByteOrder) -> Result<u32> {
    match o {
        ByteOrder::LittleEndian => Ok(0),
        ByteOrder::BigEndian => Ok(1),
        ByteOrder::Vax => Err(unrepresentable(
            "VAX byte order outside a floating-point type",
        )),
    }
}

/// A name without interior NULs (the format's names are NUL-terminated).
fn check_name(name: &str) -> Result<()> {
    if name.as_bytes().contains(&0) {
        return Err(unrepresentable(format!(
            "name {name:?} contains a NUL byte"
        )));
    }
    Ok(())
}

/// A NUL-terminated name, padded with NULs to a multiple of 8 bytes when `padded`.
fn write_name(w: &mut Writer, name: &str, padded: bool) -> Result<()> {
    check_name(name)?;
    w.bytes(name.as_bytes());
    w.u8(0);
    if padded {
        w.zeros(super::pad8(name.len().saturating_add(1)));
    }
    Ok(())
}

/// A member count for the 16-bit count field of compound and enumeration types.
fn count16(n: usize, what: &str) -> Result<u32> {
    u16::try_from(n)
        .map(u32::from)
        .map_err(|_| unrepresentable(format!("{n} {what} (at most 65535)")))
}

impl Datatype {
    /// The lowest datatype message version that expresses this type, as libhdf5 assigns it
    /// when the type is created: 1 for atomic types, enumerations and compounds of such
    /// types; 2 for arrays (and compounds or variable-length types holding one); 4 for revised
    /// references (`H5R_OBJECT2`, `H5R_DATASET_REGION2`, `H5R_ATTR`); 5 for complex numbers.
    /// Containers take at least the highest version of their members.
    pub fn min_version(&self) -> u8 {
        match self {
            Datatype::FixedPoint(_)
            | Datatype::Float(_)
            | Datatype::Time(_)
            | Datatype::String(_)
            | Datatype::Bitfield(_)
            | Datatype::Opaque(_) => 1,
            Datatype::Reference(r) => match r.kind {
                ReferenceKind::Object | ReferenceKind::DatasetRegion => 1,
                _ => 4,
            },
            Datatype::Compound(c) => c
                .members
                .iter()
                .map(|m| m.datatype.min_version())
                .fold(1, u8::max),
            Datatype::Enum(e) => e.base.min_version(),
            Datatype::VarLen(v) => v.base.min_version(),
            Datatype::Array(a) => a.base.min_version().max(2),
            Datatype::Complex(c) => c.base.min_version().max(5),
        }
    }

    /// The lowest version [`Datatype::encode`] accepts: [`Datatype::min_version`], except that
    /// a compound may be version 1 when its array members fit the version-1 member shape.
    fn floor_version(&self) -> u8 {
        match self {
            Datatype::Compound(c) => c
                .members
                .iter()
                .map(|m| match &m.datatype {
                    Datatype::Array(a) if a.permutation.is_some() && a.dims.len() <= 4 => {
                        a.base.floor_version()
                    }
                    t => t.floor_version(),
                })
                .fold(1, u8::max),
            _ => self.min_version(),
        }
    }

    /// The version libhdf5 gives this type when it must be at least `low` (a file's lower
    /// version bound, or a containing type's version): compounds, arrays and enumerations are
    /// raised to `low`, a variable-length type follows its (raised) base, other classes keep
    /// [`Datatype::min_version`].
    pub fn upgraded_version(&self, low: u8) -> u8 {
        let own = self.min_version();
        match self {
            Datatype::Compound(_) | Datatype::Array(_) | Datatype::Enum(_) => own.max(low),
            Datatype::VarLen(v) => own.max(v.base.upgraded_version(low)),
            _ => own,
        }
    }

    /// Encodes the datatype message with the outermost type at `version` (1..=5, at least
    /// [`Datatype::min_version`]) and nested types as described in the module documentation.
    /// Fails on values the format cannot hold (a count or tag too long, a name with a NUL, a
    /// version-1 compound member array of more than 4 dimensions, …).
    pub fn encode(&self, version: u8) -> Result<Vec<u8>> {
        // Room for every atomic type (a floating-point one is 20 bytes): one allocation.
        let mut w = Writer::with_capacity(24);
        self.encode_into(&mut w, version, 0)?;
        Ok(w.into_bytes())
    }

    /// Length of [`Datatype::encode`]'s output.
    pub fn encoded_len(&self, version: u8) -> Result<usize> {
        self.encode(version).map(|b| b.len())
    }

    fn encode_into(&self, w: &mut Writer, version: u8, depth: usize) -> Result<()> {
        if depth > super::MAX_NESTING {
            return Err(unrepresentable(format!(
                "datatypes nested deeper than {}",
                super::MAX_NESTING
            )));
        }
        if !(1..=5).contains(&version) {
            return Err(unrepresentable(format!(
                "datatype message version {version}"
            )));
        }
        let min = self.floor_version();
        if version < min {
            return Err(unrepresentable(format!(
                "datatype class {} needs version {min}, asked for {version}",
                self.class()
            )));
        }
        let size = self.size();
        if size == 0 {
            return Err(unrepresentable("datatype size 0"));
        }
        let head = |w: &mut Writer, flags: u32| {
            w.u32(u32::from(self.class()) | (u32::from(version) << 4) | ((flags & 0xFF_FFFF) << 8));
            w.u32(size);
        };
        match self {
            Datatype::FixedPoint(t) => {
                let flags = order_flag(t.order)?
                    | u32::from(t.lo_pad) << 1
                    | u32::from(t.hi_pad) << 2
                    | u32::from(t.signed) << 3;
                head(w, flags);
                w.u16(t.bit_offset);
                w.u16(t.precision);
            }
            Datatype::Float(t) => {
                head(w, float_flags(t));
                w.u16(t.bit_offset);
                w.u16(t.precision);
                w.u8(t.exponent_location);
                w.u8(t.exponent_size);
                w.u8(t.mantissa_location);
                w.u8(t.mantissa_size);
                w.u32(t.exponent_bias);
            }
            Datatype::Time(t) => {
                head(w, order_flag(t.order)?);
                w.u16(t.precision);
            }
            Datatype::String(t) => {
                head(w, padding_bits(t.padding) | charset_bits(t.charset) << 4);
            }
            Datatype::Bitfield(t) => {
                let flags =
                    order_flag(t.order)? | u32::from(t.lo_pad) << 1 | u32::from(t.hi_pad) << 2;
                head(w, flags);
                w.u16(t.bit_offset);
                w.u16(t.precision);
            }
            Datatype::Opaque(t) => {
                check_name(&t.tag)?;
                // The tag field is NUL-padded to a multiple of 8 (a tag of a multiple of 8
                // bytes has no terminator), its length in bits 0–7.
                let field = t.tag.len().div_ceil(8).saturating_mul(8);
                if field > 0xFF {
                    return Err(unrepresentable(format!(
                        "opaque tag of {} bytes (at most 248)",
                        t.tag.len()
                    )));
                }
                head(w, field as u32);
                w.bytes(t.tag.as_bytes());
                w.zeros(field.saturating_sub(t.tag.len()));
            }
            Datatype::Compound(c) => encode_compound(w, c, version, depth, head)?,
            Datatype::Reference(t) => {
                let kind = match t.kind {
                    ReferenceKind::Object => 0,
                    ReferenceKind::DatasetRegion => 1,
                    ReferenceKind::Object2 => 2,
                    ReferenceKind::DatasetRegion2 => 3,
                    ReferenceKind::Attribute => 4,
                };
                let flags = if kind >= 2 {
                    if t.encoding_version > 0x0F {
                        return Err(unrepresentable(format!(
                            "reference encoding version {}",
                            t.encoding_version
                        )));
                    }
                    kind | u32::from(t.encoding_version) << 4
                } else {
                    kind
                };
                head(w, flags);
            }
            Datatype::Enum(e) => encode_enum(w, e, version, depth, head)?,
            Datatype::VarLen(v) => {
                let flags = match v.kind {
                    VarLenKind::Sequence => 0,
                    VarLenKind::String { padding, charset } => {
                        1 | padding_bits(padding) << 4 | charset_bits(charset) << 8
                    }
                };
                head(w, flags);
                v.base
                    .encode_into(w, v.base.upgraded_version(version), depth.saturating_add(1))?;
            }
            Datatype::Array(a) => encode_array(w, a, version, depth, head)?,
            Datatype::Complex(c) => {
                let form = match c.form {
                    ComplexForm::Rectangular => 0,
                    ComplexForm::Polar => 1,
                    ComplexForm::Exponential => 2,
                };
                head(w, 1 | form << 1);
                c.base
                    .encode_into(w, c.base.upgraded_version(version), depth.saturating_add(1))?;
            }
        }
        Ok(())
    }
}

fn float_flags(t: &FloatType) -> u32 {
    let order = match t.order {
        ByteOrder::LittleEndian => 0,
        ByteOrder::BigEndian => 1,
        ByteOrder::Vax => 1 | 0x40,
    };
    let norm = match t.normalization {
        Normalization::None => 0,
        Normalization::MsbSet => 1,
        Normalization::Implied => 2,
    };
    order
        | u32::from(t.lo_pad) << 1
        | u32::from(t.hi_pad) << 2
        | u32::from(t.internal_pad) << 3
        | norm << 4
        | u32::from(t.sign_location) << 8
}

fn encode_compound(
    w: &mut Writer,
    c: &CompoundType,
    version: u8,
    depth: usize,
    head: impl Fn(&mut Writer, u32),
) -> Result<()> {
    if c.members.is_empty() {
        return Err(unrepresentable("compound type without members"));
    }
    head(w, count16(c.members.len(), "compound members")?);
    let width = super::offset_width(c.size);
    for m in &c.members {
        write_name(w, &m.name, version < 3)?;
        if version >= 3 {
            w.uint(u64::from(m.offset), width);
        } else {
            w.u32(m.offset);
        }
        let mut member = &m.datatype;
        if version == 1 {
            // Dimensionality (1), reserved (3), permutation (4), reserved (4), dims (4 × 4).
            let mut rank = 0u8;
            let mut perm = 0u32;
            let mut dims = [0u32; 4];
            if let Datatype::Array(a) = member {
                let p = a.permutation.as_ref().ok_or_else(|| {
                    unrepresentable("a version-1 compound member array needs a permutation")
                })?;
                if a.dims.len() > 4 || p.len() != a.dims.len() {
                    return Err(unrepresentable(format!(
                        "version-1 compound member array of rank {} (at most 4)",
                        a.dims.len()
                    )));
                }
                // At most 4 dimensions (checked above): 4 permutation bytes.
                let mut perm_bytes = [0u8; 4];
                for ((slot, byte), (&d, &q)) in dims
                    .iter_mut()
                    .zip(&mut perm_bytes)
                    .zip(a.dims.iter().zip(p))
                {
                    *byte = u8::try_from(q)
                        .map_err(|_| unrepresentable(format!("permutation index {q}")))?;
                    *slot = d;
                }
                perm = u32::from_le_bytes(perm_bytes);
                rank = a.dims.len() as u8;
                member = &a.base;
            }
            w.u8(rank);
            w.zeros(3);
            w.u32(perm);
            w.zeros(4);
            for d in dims {
                w.u32(d);
            }
        }
        member.encode_into(w, member.upgraded_version(version), depth.saturating_add(1))?;
    }
    Ok(())
}

fn encode_enum(
    w: &mut Writer,
    e: &EnumType,
    version: u8,
    depth: usize,
    head: impl Fn(&mut Writer, u32),
) -> Result<()> {
    head(w, count16(e.members.len(), "enumeration members")?);
    e.base
        .encode_into(w, e.base.upgraded_version(version), depth.saturating_add(1))?;
    for m in &e.members {
        write_name(w, &m.name, version < 3)?;
    }
    let width = e.base.size() as usize;
    for m in &e.members {
        if m.value.len() != width {
            return Err(unrepresentable(format!(
                "enumeration value of {} bytes for a {width}-byte base",
                m.value.len()
            )));
        }
        w.bytes(&m.value);
    }
    Ok(())
}

fn encode_array(
    w: &mut Writer,
    a: &ArrayType,
    version: u8,
    depth: usize,
    head: impl Fn(&mut Writer, u32),
) -> Result<()> {
    let rank = a.dims.len();
    if rank == 0 || rank > super::MAX_ARRAY_RANK {
        return Err(unrepresentable(format!("array rank {rank}")));
    }
    head(w, 0);
    w.u8(rank as u8);
    if version == 2 {
        w.zeros(3);
    }
    for &d in &a.dims {
        w.u32(d);
    }
    if version == 2 {
        match &a.permutation {
            Some(p) if p.len() == rank => p.iter().for_each(|&q| w.u32(q)),
            Some(p) => {
                return Err(unrepresentable(format!(
                    "array permutation of {} indices for rank {rank}",
                    p.len()
                )));
            }
            None => (0..rank as u32).for_each(|q| w.u32(q)),
        }
    }
    a.base
        .encode_into(w, a.base.upgraded_version(version), depth.saturating_add(1))
}
