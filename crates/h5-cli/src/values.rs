//! Decoding elements of any (fixed-size) datatype from their file bytes, for `h5 dump` and
//! `h5 dump --json`.

use h5::{Datatype, GlobalHeap};
use h5_format::datatype::{ByteOrder, FixedPoint, FloatType, StringPadding, VarLenKind};

/// One decoded element.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Val {
    /// A signed or unsigned integer.
    Int(i128),
    /// A floating-point number.
    Float(f64),
    /// A complex number (real, imaginary).
    Complex(f64, f64),
    /// String bytes as stored (fixed-length: all bytes; the padding is the printer's business).
    Str(Vec<u8>),
    /// An enumeration value: its member name (or the number when no member matches).
    Enum(Result<String, i128>),
    /// Compound members in file order.
    Compound(Vec<(String, Val)>),
    /// Array elements in C order.
    Array(Vec<Val>),
    /// The elements of a variable-length sequence.
    Seq(Vec<Val>),
    /// Bitfield / opaque bytes.
    Bytes(Vec<u8>),
    /// A null variable-length string (its heap address is 0: libhdf5's null pointer, which
    /// h5dump prints as `NULL`; an empty string has a heap object of length 0).
    NullStr,
    /// A reference: what it refers to (`None`: the null reference) and the kind and path of
    /// the object, once named ([`crate::dump`] names them before printing).
    Ref(Box<RefVal>),
    /// Something this decoder does not handle (variable-length data without its heap, as in
    /// a fill value; a heap object that cannot be read).
    Unsupported(&'static str),
}

/// A reference element.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RefVal {
    /// What the reference refers to (`None`: the null reference).
    pub(crate) reference: Option<h5::Reference>,
    /// The referenced object's kind and (first, depth-first in name order) path, when known.
    pub(crate) target: Option<(h5::ObjectKind, String)>,
}

/// The unsigned value of `bytes` in the given byte order (at most 16 bytes).
fn raw_uint(bytes: &[u8], order: ByteOrder) -> Option<u128> {
    if bytes.len() > 16 {
        return None;
    }
    let mut raw = 0u128;
    match order {
        ByteOrder::BigEndian => bytes.iter().for_each(|b| raw = (raw << 8) | u128::from(*b)),
        _ => bytes
            .iter()
            .rev()
            .for_each(|b| raw = (raw << 8) | u128::from(*b)),
    }
    Some(raw)
}

fn bits(raw: u128, offset: u32, size: u32) -> u128 {
    let shifted = raw.checked_shr(offset).unwrap_or(0);
    if size >= 128 {
        shifted
    } else {
        shifted & ((1u128 << size) - 1)
    }
}

/// An integer value.
pub(crate) fn int_value(t: &FixedPoint, bytes: &[u8]) -> Option<i128> {
    if bytes.len() > 8 {
        return None;
    }
    let raw = raw_uint(bytes, t.order)?;
    let prec = u32::from(t.precision).min(64);
    let v = bits(raw, u32::from(t.bit_offset), prec);
    let v = i128::try_from(v).ok()?;
    if t.signed && prec > 0 && (v >> (prec - 1)) & 1 == 1 {
        Some(v - (1i128 << prec))
    } else {
        Some(v)
    }
}

/// A floating-point value of any layout of at most 16 bytes (IEEE or x87-like), as f64.
pub(crate) fn float_value(t: &FloatType, bytes: &[u8]) -> Option<f64> {
    h5::types::float_to_f64(t, bytes)
}

/// Decodes one element of `dt` from `bytes` (exactly `dt.size()` bytes); variable-length
/// strings and sequences at any depth are read from `heap`.
pub(crate) fn decode(dt: &Datatype, bytes: &[u8], heap: Option<&GlobalHeap>) -> Val {
    match dt {
        Datatype::FixedPoint(t) => {
            int_value(t, bytes).map_or(Val::Unsupported("integer"), Val::Int)
        }
        Datatype::Float(t) => float_value(t, bytes).map_or(Val::Unsupported("float"), Val::Float),
        Datatype::String(_) => Val::Str(bytes.to_vec()),
        Datatype::Bitfield(_) | Datatype::Opaque(_) => Val::Bytes(bytes.to_vec()),
        Datatype::Reference(rt) => reference(rt, bytes, heap),
        Datatype::Time(_) => Val::Bytes(bytes.to_vec()),
        Datatype::Enum(e) => {
            let name = e
                .members
                .iter()
                .find(|m| m.value == bytes)
                .map(|m| m.name.clone());
            match name {
                Some(n) => Val::Enum(Ok(n)),
                None => match decode(&e.base, bytes, heap) {
                    Val::Int(i) => Val::Enum(Err(i)),
                    _ => Val::Unsupported("enum"),
                },
            }
        }
        Datatype::Compound(c) => Val::Compound(
            c.members
                .iter()
                .map(|m| {
                    let start = m.offset as usize;
                    let end = start.saturating_add(m.datatype.size() as usize);
                    let v = bytes
                        .get(start..end)
                        .map_or(Val::Unsupported("member"), |b| decode(&m.datatype, b, heap));
                    (m.name.clone(), v)
                })
                .collect(),
        ),
        Datatype::Array(a) => {
            let n = a.base.size() as usize;
            if n == 0 {
                return Val::Unsupported("array");
            }
            Val::Array(
                bytes
                    .chunks_exact(n)
                    .map(|b| decode(&a.base, b, heap))
                    .collect(),
            )
        }
        Datatype::Complex(c) => {
            let n = c.base.size() as usize;
            match (bytes.get(..n), bytes.get(n..)) {
                (Some(re), Some(im)) => {
                    match (decode(&c.base, re, heap), decode(&c.base, im, heap)) {
                        (Val::Float(r), Val::Float(i)) => Val::Complex(r, i),
                        _ => Val::Unsupported("complex"),
                    }
                }
                _ => Val::Unsupported("complex"),
            }
        }
        Datatype::VarLen(v) => {
            let string = matches!(v.kind, VarLenKind::String { .. });
            let Some(heap) = heap else {
                return Val::Unsupported(if string {
                    "variable-length string"
                } else {
                    "variable-length sequence"
                });
            };
            if string && is_null_vlen(bytes) {
                return Val::NullStr;
            }
            match heap.element(bytes) {
                Err(_) => Val::Unsupported("variable-length data not in the heap"),
                Ok(None) if string => Val::Str(Vec::new()),
                Ok(None) => Val::Seq(Vec::new()),
                Ok(Some((n, data))) if string => {
                    let n = (n as usize).min(data.len());
                    Val::Str(data.get(..n).unwrap_or_default().to_vec())
                }
                Ok(Some((n, data))) => {
                    let es = v.base.size() as usize;
                    match n
                        .checked_mul(es as u32)
                        .and_then(|b| data.get(..b as usize))
                    {
                        Some(items) if es > 0 => Val::Seq(
                            items
                                .chunks_exact(es)
                                .map(|b| decode(&v.base, b, Some(heap)))
                                .collect(),
                        ),
                        _ => {
                            Val::Unsupported("variable-length sequence longer than its heap object")
                        }
                    }
                }
            }
        }
    }
}

/// A reference element: object references (an address) decode alone, the other kinds through
/// the global heap.
fn reference(
    rt: &h5_format::datatype::ReferenceType,
    bytes: &[u8],
    heap: Option<&GlobalHeap>,
) -> Val {
    let r = if rt.kind == h5_format::datatype::ReferenceKind::Object {
        match raw_uint(bytes, ByteOrder::LittleEndian).and_then(|a| u64::try_from(a).ok()) {
            Some(a) => {
                Ok((a != 0 && a != h5_format::UNDEFINED_ADDRESS).then(|| h5::Reference::object(a)))
            }
            None => return Val::Unsupported("object reference"),
        }
    } else {
        match heap {
            Some(h) => h.reference(rt, bytes),
            None => return Val::Unsupported("reference"),
        }
    };
    match r {
        Ok(reference) => Val::Ref(Box::new(RefVal {
            reference,
            target: None,
        })),
        Err(_) => Val::Unsupported("reference not readable"),
    }
}

/// Whether a stored variable-length element (length, heap address, object index) is null: its
/// heap address is 0 (libhdf5's `H5T__vlen_disk_isnull`).
fn is_null_vlen(element: &[u8]) -> bool {
    let n = element.len();
    n > 8
        && element
            .get(4..n - 4)
            .is_some_and(|a| a.iter().all(|b| *b == 0))
}

/// Whether `dt` is a variable-length string.
pub(crate) fn is_vlen_string(dt: &Datatype) -> bool {
    matches!(
        dt,
        Datatype::VarLen(v) if matches!(v.kind, VarLenKind::String { .. })
    )
}

/// Decodes every element of `raw` (C order). Variable-length strings come from `vstrings`;
/// variable-length data nested in other types from `heap`.
pub(crate) fn decode_all(
    dt: &Datatype,
    raw: &[u8],
    vstrings: Option<Vec<String>>,
    heap: Option<&GlobalHeap>,
) -> Vec<Val> {
    let n = dt.size() as usize;
    if let Some(s) = vstrings {
        // `raw` (when given) tells the null strings from the empty ones.
        let mut elements = raw.chunks_exact(n.max(1));
        return s
            .into_iter()
            .map(|s| match elements.next() {
                Some(e) if is_null_vlen(e) => Val::NullStr,
                _ => Val::Str(s.into_bytes()),
            })
            .collect();
    }
    if n == 0 {
        return Vec::new();
    }
    raw.chunks_exact(n).map(|b| decode(dt, b, heap)).collect()
}

/// The text of a fixed-length string as an application sees it (up to the terminator / with the
/// padding removed).
pub(crate) fn string_text(dt: &Datatype, bytes: &[u8]) -> String {
    let trimmed: &[u8] = match dt {
        Datatype::String(s) => match s.padding {
            StringPadding::NullTerminate | StringPadding::NullPad => {
                let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                bytes.get(..end).unwrap_or(bytes)
            }
            StringPadding::SpacePad => {
                let end = bytes.iter().rposition(|&b| b != b' ').map_or(0, |p| p + 1);
                bytes.get(..end).unwrap_or(bytes)
            }
        },
        _ => bytes,
    };
    String::from_utf8_lossy(trimmed).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16() -> FloatType {
        FloatType {
            size: 2,
            order: ByteOrder::LittleEndian,
            lo_pad: false,
            hi_pad: false,
            internal_pad: false,
            normalization: h5_format::datatype::Normalization::Implied,
            sign_location: 15,
            bit_offset: 0,
            precision: 16,
            exponent_location: 10,
            exponent_size: 5,
            mantissa_location: 0,
            mantissa_size: 10,
            exponent_bias: 15,
        }
    }

    #[test]
    fn half_floats() {
        let t = f16();
        assert_eq!(float_value(&t, &[0x00, 0x3c]), Some(1.0));
        assert_eq!(float_value(&t, &[0x00, 0xc1]), Some(-2.5));
        assert_eq!(float_value(&t, &[0xff, 0x7b]), Some(65504.0));
        assert_eq!(float_value(&t, &[0x01, 0x00]), Some(2f64.powi(-24)));
        assert_eq!(float_value(&t, &[0x00, 0x7c]), Some(f64::INFINITY));
        assert!(float_value(&t, &[0x01, 0x7e]).is_some_and(f64::is_nan));
    }
}
