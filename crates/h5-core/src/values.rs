//! Element values that are not plain numbers: strings (fixed and variable length) and the
//! numeric conversion of raw element bytes.

use h5_format::datatype::{Datatype, StringPadding, VarLenKind};
use h5_format::heap::global::GlobalHeapId;

use crate::convert::{NativeNum, NumConversion, num_type};
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::walk;

/// Decodes `raw` (elements of `dt` in the file's representation) as strings: fixed-length
/// strings with their padding removed, or variable-length strings from the global heap.
pub fn strings(file: &FileShared, dt: &Datatype, raw: &[u8]) -> Result<Vec<String>> {
    match dt {
        Datatype::String(s) => {
            let size = s.size as usize;
            if size == 0 {
                return Ok(Vec::new());
            }
            Ok(raw
                .chunks_exact(size)
                .map(|b| {
                    let text = match s.padding {
                        StringPadding::NullTerminate | StringPadding::NullPad => before_null(b),
                        StringPadding::SpacePad => {
                            let mut t = b;
                            while let [rest @ .., b' '] = t {
                                t = rest;
                            }
                            t
                        }
                    };
                    String::from_utf8_lossy(text).into_owned()
                })
                .collect())
        }
        Datatype::VarLen(v) if matches!(v.kind, VarLenKind::String { .. }) => {
            let sizes = file.sizes;
            let size = v.size as usize;
            if size == 0 {
                return Ok(Vec::new());
            }
            raw.chunks_exact(size)
                .map(|b| {
                    let mut r = h5_format::Reader::new(b, "variable-length string", u64::MAX);
                    let len = r.u32()? as usize;
                    let id = GlobalHeapId::decode(r.bytes(r.remaining())?, sizes, u64::MAX)?;
                    if len == 0 || id.collection_address == h5_format::UNDEFINED_ADDRESS {
                        return Ok(String::new());
                    }
                    let bytes = walk::global_object(file, id)?;
                    let bytes = bytes.get(..len).unwrap_or(&bytes);
                    // A trailing null may be stored.
                    Ok(String::from_utf8_lossy(before_null(bytes)).into_owned())
                })
                .collect()
        }
        other => Err(Error::Invalid(format!(
            "{} is not a string type",
            other.describe()
        ))),
    }
}

/// The bytes of `b` before its first null (all of them when it has none).
fn before_null(b: &[u8]) -> &[u8] {
    b.split(|&c| c == 0).next().unwrap_or(b)
}

/// One variable-length element (a 4-byte length, then a global heap ID; `raw` in the file's
/// representation): the length (bytes of a string, elements of a sequence) and the heap
/// object's bytes, or `None` for a null or empty element.
pub fn vlen_element(file: &FileShared, raw: &[u8]) -> Result<Option<(u32, Vec<u8>)>> {
    let mut r = h5_format::Reader::new(raw, "variable-length element", u64::MAX);
    let len = r.u32()?;
    let id = GlobalHeapId::decode(r.bytes(r.remaining())?, file.sizes, u64::MAX)?;
    if len == 0 || id.collection_address == h5_format::UNDEFINED_ADDRESS {
        return Ok(None);
    }
    Ok(Some((len, walk::global_object(file, id)?)))
}

/// The global heap object a heap ID (`raw`: collection address then object index, in the
/// file's representation; a region reference's element) names, or `None` for a null ID.
pub fn global_heap_object(file: &FileShared, raw: &[u8]) -> Result<Option<Vec<u8>>> {
    let id = GlobalHeapId::decode(raw, file.sizes, u64::MAX)?;
    if id.collection_address == 0 || id.collection_address == h5_format::UNDEFINED_ADDRESS {
        return Ok(None);
    }
    Ok(Some(walk::global_object(file, id)?))
}

/// Converts raw elements of `dt` to `T` (lossless conversions only unless `lossy`).
pub fn numbers<T: NativeNum>(dt: &Datatype, raw: &[u8], lossy: bool) -> Result<Vec<T>> {
    let from = num_type(dt)
        .ok_or_else(|| Error::Invalid(format!("{} is not a numeric type", dt.describe())))?;
    let conv = NumConversion::new(from, T::TYPE, lossy)?;
    let n = raw.len().checked_div(from.size()).unwrap_or(0);
    let size = std::mem::size_of::<T>();
    let bytes = n.checked_mul(size).and_then(|b| u64::try_from(b).ok());
    let mut out = crate::buffer::zeroed(|| format!("{n} converted numbers"), bytes)?;
    conv.run(raw, &mut out, n)?;
    Ok(out.chunks_exact(size).map(T::from_ne).collect())
}

/// One element's value, for any datatype (what `h5 dump` prints and JSON output carries).
#[derive(Clone, PartialEq, Debug)]
pub enum Value {
    /// A signed integer (also enum values without a matching name).
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A floating-point number.
    Float(f64),
    /// A string (fixed or variable length, padding removed).
    String(String),
    /// Opaque, bitfield or other raw bytes.
    Bytes(Vec<u8>),
    /// An enum member's name.
    Enum(String),
    /// A compound's members in order.
    Compound(Vec<(String, Value)>),
    /// An array element or a variable-length sequence, flattened in C order.
    List(Vec<Value>),
    /// A complex number.
    Complex(f64, f64),
    /// An object reference (`H5R_OBJECT1`): the referenced object header address (`None`: the
    /// null reference).
    ObjectRef(Option<u64>),
    /// A dataset region reference (`H5R_DATASET_REGION1`) or an HDF5 1.12 revised reference
    /// (object, region or attribute; `None`: the null reference).
    Reference(Option<crate::references::Reference>),
}

/// Every element of `raw` (elements of `dt`, file representation) as a [`Value`].
pub fn values(file: &FileShared, dt: &Datatype, raw: &[u8]) -> Result<Vec<Value>> {
    let size = dt.size() as usize;
    if size == 0 {
        return Ok(Vec::new());
    }
    if matches!(dt, Datatype::String(_))
        || matches!(dt, Datatype::VarLen(v) if matches!(v.kind, VarLenKind::String { .. }))
    {
        return Ok(strings(file, dt, raw)?
            .into_iter()
            .map(Value::String)
            .collect());
    }
    raw.chunks_exact(size)
        .map(|e| value(file, dt, e, 0))
        .collect()
}

/// The one number element `b` holds (of numeric type `dt`), converted to `T`.
fn number<T: NativeNum>(dt: &Datatype, b: &[u8]) -> Result<T> {
    numbers::<T>(dt, b, true)?.first().copied().ok_or_else(|| {
        Error::Invalid(format!(
            "{} bytes are too few for an element of {}",
            b.len(),
            dt.describe()
        ))
    })
}

/// Nesting deeper than this is refused (the decoder already bounds it; this guards recursion).
const MAX_DEPTH: usize = 40;

fn value(file: &FileShared, dt: &Datatype, b: &[u8], depth: usize) -> Result<Value> {
    use h5_format::datatype::ReferenceKind;
    if depth > MAX_DEPTH {
        return Err(Error::Unsupported("datatype nested too deeply".into()));
    }
    #[allow(
        clippy::arithmetic_side_effects,
        reason = "depth <= MAX_DEPTH (checked above)"
    )]
    let depth = depth + 1;
    Ok(match dt {
        Datatype::FixedPoint(t) => match num_type(dt) {
            Some(_) if t.signed => Value::Int(number(dt, b)?),
            Some(_) => Value::UInt(number(dt, b)?),
            None => Value::Bytes(b.to_vec()),
        },
        Datatype::Float(_) => match num_type(dt) {
            Some(_) => Value::Float(number(dt, b)?),
            None => Value::Bytes(b.to_vec()),
        },
        Datatype::Enum(e) => match e.members.iter().find(|m| m.value.as_slice() == b) {
            Some(m) => Value::Enum(m.name.clone()),
            None => value(file, &e.base, b, depth)?,
        },
        Datatype::Compound(c) => {
            let mut out = Vec::with_capacity(c.members.len());
            for m in &c.members {
                let start = m.offset as usize;
                let end = start.saturating_add(m.datatype.size() as usize);
                let part = b.get(start..end).ok_or_else(|| {
                    Error::Invalid(format!("compound member {:?} out of bounds", m.name))
                })?;
                out.push((m.name.clone(), value(file, &m.datatype, part, depth)?));
            }
            Value::Compound(out)
        }
        Datatype::Array(a) => {
            let es = a.base.size() as usize;
            if es == 0 {
                Value::List(Vec::new())
            } else {
                Value::List(
                    b.chunks_exact(es)
                        .map(|e| value(file, &a.base, e, depth))
                        .collect::<Result<_>>()?,
                )
            }
        }
        Datatype::Complex(c) => {
            let es = c.base.size() as usize;
            let re = numbers::<f64>(&c.base, b.get(..es).unwrap_or(&[]), true)?;
            let im_bytes = b.get(es..).and_then(|rest| rest.get(..es)).unwrap_or(&[]);
            let im = numbers::<f64>(&c.base, im_bytes, true)?;
            match (re.first(), im.first()) {
                (Some(&r), Some(&i)) => Value::Complex(r, i),
                _ => Value::Bytes(b.to_vec()),
            }
        }
        Datatype::VarLen(v) if matches!(v.kind, VarLenKind::String { .. }) => {
            Value::String(strings(file, dt, b)?.into_iter().next().unwrap_or_default())
        }
        Datatype::VarLen(v) => {
            // Sequence: a 4-byte length, then a global heap ID.
            let mut r = h5_format::Reader::new(b, "variable-length sequence", u64::MAX);
            let n = r.u32()? as usize;
            let id = GlobalHeapId::decode(r.bytes(r.remaining())?, file.sizes, u64::MAX)?;
            if n == 0 || id.collection_address == h5_format::UNDEFINED_ADDRESS {
                return Ok(Value::List(Vec::new()));
            }
            let data = walk::global_object(file, id)?;
            let es = v.base.size() as usize;
            let need = n.saturating_mul(es);
            let data = data.get(..need).ok_or_else(|| {
                Error::Invalid("variable-length sequence longer than its heap object".into())
            })?;
            if es == 0 {
                Value::List(Vec::new())
            } else {
                Value::List(
                    data.chunks_exact(es)
                        .map(|e| value(file, &v.base, e, depth))
                        .collect::<Result<_>>()?,
                )
            }
        }
        Datatype::Reference(r) if matches!(r.kind, ReferenceKind::Object) => {
            let mut rd = h5_format::Reader::new(b, "object reference", u64::MAX);
            let a = rd.offset(file.sizes)?;
            Value::ObjectRef((a != 0 && a != h5_format::UNDEFINED_ADDRESS).then_some(a))
        }
        Datatype::Reference(r) => Value::Reference(crate::references::decode(file, r, b)?),
        Datatype::String(_) => {
            Value::String(strings(file, dt, b)?.into_iter().next().unwrap_or_default())
        }
        Datatype::Time(_) | Datatype::Bitfield(_) | Datatype::Opaque(_) => Value::Bytes(b.to_vec()),
    })
}
