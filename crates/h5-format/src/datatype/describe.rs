//! Short human-readable descriptions of datatypes (for listings such as `h5 ls`).

use std::fmt::Write as _;

use super::{
    ByteOrder, Charset, ComplexForm, Datatype, FixedPoint, ReferenceKind, StringPadding, VarLenKind,
};

/// Enum members shown before eliding the rest.
const ENUM_SHOWN: usize = 8;

fn order_suffix(size: u32, order: ByteOrder) -> &'static str {
    match (size, order) {
        (1, _) => "",
        (_, ByteOrder::LittleEndian) => " LE",
        (_, ByteOrder::BigEndian) => " BE",
        (_, ByteOrder::Vax) => " VAX",
    }
}

fn padding_name(p: StringPadding) -> &'static str {
    match p {
        StringPadding::NullTerminate => "nullterm",
        StringPadding::NullPad => "nullpad",
        StringPadding::SpacePad => "spacepad",
    }
}

fn charset_name(c: Charset) -> &'static str {
    match c {
        Charset::Ascii => "ascii",
        Charset::Utf8 => "utf8",
    }
}

/// The integer value of `bytes` in integer type `t`, if it fits in an i128 (sizes ≤ 8).
fn int_value(t: &FixedPoint, bytes: &[u8]) -> Option<i128> {
    if bytes.len() > 8 || bytes.is_empty() {
        return None;
    }
    let mut raw = 0u64;
    let mut push = |b: &u8| raw = (raw << 8) | u64::from(*b);
    match t.order {
        ByteOrder::BigEndian => bytes.iter().for_each(&mut push),
        _ => bytes.iter().rev().for_each(&mut push),
    }
    let bits = u32::from(t.precision).min(64);
    let shifted = raw.checked_shr(u32::from(t.bit_offset)).unwrap_or(0);
    let v = shifted & crate::reader::low_mask(bits);
    let sign_bit = bits
        .checked_sub(1)
        .and_then(|b| v.checked_shr(b))
        .unwrap_or(0)
        & 1;
    if t.signed && sign_bit == 1 {
        // `v` < 2^bits ≤ 2^64: the difference fits i128.
        1i128
            .checked_shl(bits)
            .and_then(|m| i128::from(v).checked_sub(m))
    } else {
        Some(i128::from(v))
    }
}

impl Datatype {
    /// A short description: "int32 LE", "float64 BE", "string(12, nullterm, ascii)",
    /// "vlen string utf8", "compound{a: int32 LE, b: float64 LE}", …
    pub fn describe(&self) -> String {
        match self {
            Datatype::FixedPoint(t) => {
                let mut s = format!(
                    "{}int{}{}",
                    if t.signed { "" } else { "u" },
                    u64::from(t.size) * 8,
                    order_suffix(t.size, t.order)
                );
                if t.bit_offset != 0 || u64::from(t.precision) != u64::from(t.size) * 8 {
                    let _ = write!(s, " ({} bits at {})", t.precision, t.bit_offset);
                }
                s
            }
            Datatype::Float(t) => {
                let suffix = order_suffix(t.size, t.order);
                match t.ieee_name() {
                    Some(name) => format!("{name}{suffix}"),
                    None => format!(
                        "float({} bytes, sign {}, exp {}+{} bias {}, mant {}+{}){suffix}",
                        t.size,
                        t.sign_location,
                        t.exponent_location,
                        t.exponent_size,
                        t.exponent_bias,
                        t.mantissa_location,
                        t.mantissa_size
                    ),
                }
            }
            Datatype::Time(t) => format!(
                "time{}{}",
                u64::from(t.size) * 8,
                order_suffix(t.size, t.order)
            ),
            Datatype::String(t) => format!(
                "string({}, {}, {})",
                t.size,
                padding_name(t.padding),
                charset_name(t.charset)
            ),
            Datatype::Bitfield(t) => {
                format!(
                    "bitfield{}{}",
                    u64::from(t.size) * 8,
                    order_suffix(t.size, t.order)
                )
            }
            Datatype::Opaque(t) if t.tag.is_empty() => format!("opaque({})", t.size),
            Datatype::Opaque(t) => format!("opaque({}, {:?})", t.size, t.tag),
            Datatype::Compound(t) => {
                let fields: Vec<String> = t
                    .members
                    .iter()
                    .map(|m| format!("{}: {}", m.name, m.datatype.describe()))
                    .collect();
                format!("compound{{{}}}", fields.join(", "))
            }
            Datatype::Reference(t) => match t.kind {
                ReferenceKind::Object => "object reference".into(),
                ReferenceKind::DatasetRegion => "region reference".into(),
                ReferenceKind::Object2 => "object reference (revised)".into(),
                ReferenceKind::DatasetRegion2 => "region reference (revised)".into(),
                ReferenceKind::Attribute => "attribute reference".into(),
            },
            Datatype::Enum(t) => {
                let mut s = format!("enum {} {{", t.base.describe());
                for (i, m) in t.members.iter().enumerate() {
                    if i == ENUM_SHOWN {
                        let more = t.members.len().saturating_sub(ENUM_SHOWN);
                        let _ = write!(s, ", … {more} more");
                        break;
                    }
                    if i > 0 {
                        s.push_str(", ");
                    }
                    let value = match t.base.as_ref() {
                        Datatype::FixedPoint(b) => int_value(b, &m.value),
                        _ => None,
                    };
                    match value {
                        Some(v) => {
                            let _ = write!(s, "{}={v}", m.name);
                        }
                        None => s.push_str(&m.name),
                    }
                }
                s.push('}');
                s
            }
            Datatype::VarLen(t) => match t.kind {
                VarLenKind::String { charset, .. } => {
                    format!("vlen string {}", charset_name(charset))
                }
                VarLenKind::Sequence => format!("vlen sequence of {}", t.base.describe()),
            },
            Datatype::Array(t) => {
                let dims: Vec<String> = t.dims.iter().map(u32::to_string).collect();
                format!("array[{}] of {}", dims.join("x"), t.base.describe())
            }
            Datatype::Complex(t) => {
                let form = match t.form {
                    ComplexForm::Rectangular => "",
                    ComplexForm::Polar => " polar",
                    ComplexForm::Exponential => " exponential",
                };
                format!("complex{form} of {}", t.base.describe())
            }
        }
    }
}
