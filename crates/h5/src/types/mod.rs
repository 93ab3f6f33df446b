//! Rust types as HDF5 element types: the [`H5Type`] trait, its implementations for numbers,
//! `bool`, strings, variable-length sequences, fixed arrays and object references, and the
//! support code of `#[derive(H5Type)]` (structs → compound types, fieldless enums → enumeration
//! types).
//!
//! Writing uses the type's own datatype ([`H5Type::h5_type`]). Reading converts from the file's
//! datatype as libhdf5 does: compound members are matched **by name** (a field missing from the
//! file is an error, extra file members are ignored), enumeration values by member name, numbers
//! by the lossless numeric conversions of [`crate::Dataset::read`]. No unsafe code: every value
//! is encoded and decoded field by field.
//!
//! ```
//! #[derive(h5::H5Type, Clone, Debug, PartialEq)]
//! #[repr(C)]
//! struct Point {
//!     x: f64,
//!     y: f64,
//!     tag: [u8; 3],
//! }
//!
//! use h5::H5Type;
//! let dt = Point::h5_type();
//! assert_eq!(dt.size() as usize, std::mem::size_of::<Point>());
//! ```

mod array;
mod io;
mod reference;
mod strings;
mod vlen;

use std::borrow::Cow;

use h5_core::convert::{NativeNum, NumConversion, NumType, num_type};
use h5_core::file::FileShared;
use h5_core::write::gheap::GlobalHeapWriter;
use h5_format::datatype::{CompoundMember, CompoundType, Datatype, EnumMember, EnumType};
use h5_format::heap::global::GlobalHeapId;

use crate::{Error, Result};

pub use reference::{Object, ObjectRef};
pub use strings::{FixedAscii, FixedUnicode, VarLenAscii, VarLenUnicode};

/// One element of a floating-point datatype as f64, for any layout of up to 16 bytes (IEEE
/// half, single, double and quad precision, x87 extended precision, ...); `None` for a layout
/// h5 does not convert.
pub use h5_core::convert::float_to_f64;

/// Size in bytes of a variable-length element in files h5 writes (a 4-byte length, an 8-byte
/// collection address, a 4-byte object index).
pub(crate) const VLEN_SIZE: usize = 16;

/// A Rust type whose values can be stored as HDF5 elements.
///
/// Implemented for the numeric types, `bool` (h5py's `FALSE`/`TRUE` enumeration of int8),
/// `String`/[`VarLenUnicode`]/[`VarLenAscii`] (variable-length strings), [`FixedAscii`] and
/// [`FixedUnicode`] (fixed-length strings), `Vec<T>` (variable-length sequences), `[T; N]`
/// (array types) and [`ObjectRef`]; derive it for `#[repr(C)]` structs with named fields
/// (compound types) and fieldless enums with an integer `repr` (enumeration types).
///
/// The derive checks its requirements at compile time. A struct without `#[repr(C)]` (whose
/// field offsets Rust may change) is refused:
///
/// ```compile_fail
/// #[derive(h5::H5Type)]
/// struct NoRepr {
///     a: i32,
/// }
/// ```
///
/// as is a packed one:
///
/// ```compile_fail
/// #[derive(h5::H5Type)]
/// #[repr(C, packed)]
/// struct Packed {
///     a: u8,
///     b: u32,
/// }
/// ```
///
/// so is an enum without an integer `repr`, or with fields:
///
/// ```compile_fail
/// #[derive(h5::H5Type)]
/// enum NoRepr {
///     A,
/// }
/// ```
///
/// ```compile_fail
/// #[derive(h5::H5Type)]
/// #[repr(u8)]
/// enum WithFields {
///     A(u8),
/// }
/// ```
///
/// and every field must be an `H5Type` itself:
///
/// ```compile_fail
/// #[derive(h5::H5Type)]
/// #[repr(C)]
/// struct Holds {
///     a: std::collections::HashMap<u8, u8>,
/// }
/// ```
///
/// ```
/// #[derive(h5::H5Type)]
/// #[repr(C)]
/// struct Fine {
///     a: i32,
///     #[h5(rename = "B")]
///     b: [u8; 2],
/// }
///
/// #[derive(h5::H5Type)]
/// #[repr(i16)]
/// enum Dir {
///     Up = -1,
///     Down = 1,
/// }
/// ```
pub trait H5Type: Sized {
    /// The datatype values of this type are written with.
    fn h5_type() -> Datatype;

    /// `h5_type().size()`, without building the datatype.
    fn h5_size() -> usize {
        Self::h5_type().size() as usize
    }

    /// Encodes `self` into `out` (exactly [`H5Type::h5_size`] bytes, zeroed by the caller);
    /// variable-length data goes to the file's global heap through `ctx`.
    fn h5_encode(&self, out: &mut [u8], ctx: &mut EncodeCtx<'_>) -> Result<()>;

    /// Decodes one element of the file datatype `dt` from `bytes` (exactly `dt.size()` bytes),
    /// converting as libhdf5 would (see the module documentation).
    fn h5_decode(dt: &Datatype, bytes: &[u8], ctx: &DecodeCtx<'_>) -> Result<Self>;

    /// Encodes a slice of values (the default encodes them one by one; plain numbers are
    /// borrowed as they are).
    fn h5_encode_slice<'d>(data: &'d [Self], ctx: &mut EncodeCtx<'_>) -> Result<Cow<'d, [u8]>> {
        let size = Self::h5_size();
        let mut out = vec![0u8; data.len().saturating_mul(size)];
        if size > 0 {
            for (v, o) in data.iter().zip(out.chunks_exact_mut(size)) {
                v.h5_encode(o, ctx)?;
            }
        }
        Ok(Cow::Owned(out))
    }

    /// Reads `n` plain numbers straight into a new `Vec<Self>` (no intermediate buffer):
    /// `fill` gets the vector's bytes and the number type they hold. `None` for types that are
    /// not plain numbers, which are decoded element by element. Support code of the read
    /// path, not a stable interface.
    #[doc(hidden)]
    fn h5_read_numbers(
        _n: usize,
        _fill: &mut dyn FnMut(NumType, &mut [u8]) -> Result<()>,
    ) -> Option<Result<Vec<Self>>> {
        None
    }

    /// Decodes every element of `raw` (elements of `dt`).
    fn h5_decode_all(dt: &Datatype, raw: &[u8], ctx: &DecodeCtx<'_>) -> Result<Vec<Self>> {
        let size = dt.size() as usize;
        if size == 0 {
            return Ok(Vec::new());
        }
        raw.chunks_exact(size)
            .map(|e| Self::h5_decode(dt, e, ctx))
            .collect()
    }
}

/// A plain number type (`i8` … `u64`, `f32`, `f64`): what [`crate::Dataset::read`] converts to,
/// and an [`H5Type`] (generic code bounded by `H5Num` can also write).
pub trait H5Num: NativeNum + H5Type {}

impl<T: NativeNum + H5Type> H5Num for T {}

/// What encoders may need from the file being written: its global heap for variable-length
/// data.
#[derive(Debug)]
pub struct EncodeCtx<'a> {
    file: Option<&'a FileShared>,
    heap: Option<GlobalHeapWriter<'a>>,
}

impl<'a> EncodeCtx<'a> {
    /// Encoding for `file` (variable-length data goes to its global heap).
    pub(crate) fn new(file: &'a FileShared) -> Self {
        EncodeCtx {
            file: Some(file),
            heap: None,
        }
    }

    /// Encoding without a file (fill values): variable-length data is refused.
    pub(crate) fn detached() -> Self {
        EncodeCtx {
            file: None,
            heap: None,
        }
    }

    /// Stores `data` in the global heap and writes the variable-length element (`len`: bytes of
    /// a string or elements of a sequence) into `out`. An empty sequence is written as a null
    /// element (`len` 0, no heap object).
    pub fn put_vlen(&mut self, out: &mut [u8], len: u32, data: &[u8], string: bool) -> Result<()> {
        let id = if len == 0 && !string {
            GlobalHeapId {
                collection_address: 0,
                index: 0,
            }
        } else {
            self.heap_insert(data)?
        };
        let sizes = self
            .file
            .map_or(h5_format::Sizes::EIGHT, |f| f.superblock().sizes);
        let mut w = h5_format::Writer::with_capacity(VLEN_SIZE);
        w.u32(len);
        id.encode(sizes, &mut w);
        let b = w.into_bytes();
        if b.len() != out.len() {
            return Err(Error::Invalid(format!(
                "a variable-length element of {} bytes in a field of {}",
                b.len(),
                out.len()
            )));
        }
        out.copy_from_slice(&b);
        Ok(())
    }

    /// The file written (`None` when encoding without one, as for fill values).
    pub(crate) fn file(&self) -> Option<&'a FileShared> {
        self.file
    }

    /// Sizes of addresses and lengths in the file written (8 and 8 without a file).
    pub(crate) fn sizes(&self) -> h5_format::Sizes {
        self.file
            .map_or(h5_format::Sizes::EIGHT, |f| f.superblock().sizes)
    }

    /// Stores `data` as a new object of the file's global heap.
    pub(crate) fn heap_insert(&mut self, data: &[u8]) -> Result<GlobalHeapId> {
        if self.heap.is_none() {
            let file = self
                .file
                .ok_or_else(|| Error::Unsupported("variable-length data in a fill value".into()))?;
            self.heap = Some(file.global_heap()?);
        }
        match &mut self.heap {
            Some(h) => h.insert(data),
            None => Err(Error::Unsupported("no global heap".into())),
        }
    }

    /// Writes the variable-length data inserted so far to the metadata cache.
    pub(crate) fn finish(self) -> Result<()> {
        match self.heap {
            Some(h) => h.finish(),
            None => Ok(()),
        }
    }
}

/// What decoders may need from the file being read: its global heap.
#[derive(Clone, Copy, Debug)]
pub struct DecodeCtx<'a> {
    file: &'a FileShared,
}

impl<'a> DecodeCtx<'a> {
    pub(crate) fn new(file: &'a FileShared) -> Self {
        DecodeCtx { file }
    }

    /// The variable-length element in `raw`: its length and its heap object's bytes (`None`
    /// for a null or empty element).
    pub fn get_vlen(&self, raw: &[u8]) -> Result<Option<(u32, Vec<u8>)>> {
        h5_core::values::vlen_element(self.file, raw)
    }

    /// Sizes of addresses and lengths in the file.
    pub fn sizes(&self) -> h5_format::Sizes {
        self.file.superblock().sizes
    }

    /// The file read.
    pub(crate) fn file(&self) -> &'a FileShared {
        self.file
    }
}

/// Encodes `data` for `file` and hands the bytes to `write` (the heap is finished first).
pub(crate) fn encode_for<T: H5Type, R>(
    file: &FileShared,
    data: &[T],
    write: impl FnOnce(&[u8]) -> Result<R>,
) -> Result<R> {
    let mut ctx = EncodeCtx::new(file);
    let bytes = T::h5_encode_slice(data, &mut ctx)?;
    ctx.finish()?;
    write(&bytes)
}

/// Whether two datatypes describe the same elements: equal encodings (so an array type without
/// a permutation equals one with the identity permutation, as the file stores it).
pub fn same_type(a: &Datatype, b: &Datatype) -> bool {
    if a == b {
        return true;
    }
    let v = a.min_version().max(b.min_version());
    matches!((a.encode(v), b.encode(v)), (Ok(x), Ok(y)) if x == y)
}

fn not_a(dt: &Datatype, what: &str) -> Error {
    Error::Invalid(format!("{} cannot be read as {what}", dt.describe()))
}

// ---------------------------------------------------------------------------------------------
// Numbers and bool.
// ---------------------------------------------------------------------------------------------

/// One number of file type `dt` (numbers or enumerations over them) as `T`, lossless only.
fn decode_number<T: NativeNum>(dt: &Datatype, bytes: &[u8]) -> Result<T> {
    let from = num_type(dt).ok_or_else(|| not_a(dt, std::any::type_name::<T>()))?;
    if from == T::TYPE {
        return bytes
            .get(..std::mem::size_of::<T>())
            .map(T::from_ne)
            .ok_or_else(|| Error::Invalid("element shorter than its type".into()));
    }
    let conv = NumConversion::new(from, T::TYPE, false)?;
    let mut out = [0u8; 8];
    let size = std::mem::size_of::<T>();
    conv.run(bytes, &mut out[..size], 1)?;
    Ok(T::from_ne(&out[..size]))
}

macro_rules! numbers {
    ($($t:ty),*) => {$(
        impl H5Type for $t {
            fn h5_type() -> Datatype {
                <$t as NativeNum>::TYPE.datatype()
            }
            fn h5_size() -> usize {
                std::mem::size_of::<$t>()
            }
            fn h5_encode(&self, out: &mut [u8], _ctx: &mut EncodeCtx<'_>) -> Result<()> {
                out.copy_from_slice(bytemuck::bytes_of(self));
                Ok(())
            }
            fn h5_decode(dt: &Datatype, bytes: &[u8], _ctx: &DecodeCtx<'_>) -> Result<Self> {
                decode_number::<$t>(dt, bytes)
            }
            fn h5_encode_slice<'d>(
                data: &'d [Self],
                _ctx: &mut EncodeCtx<'_>,
            ) -> Result<Cow<'d, [u8]>> {
                Ok(Cow::Borrowed(bytemuck::cast_slice(data)))
            }
            fn h5_decode_all(dt: &Datatype, raw: &[u8], _ctx: &DecodeCtx<'_>) -> Result<Vec<Self>> {
                h5_core::values::numbers::<$t>(dt, raw, false)
            }
            fn h5_read_numbers(
                n: usize,
                fill: &mut dyn FnMut(NumType, &mut [u8]) -> Result<()>,
            ) -> Option<Result<Vec<Self>>> {
                // Allocated as numpy allocates arrays (zeroed pages, huge pages when large).
                let Some(mut out) = h5_io::buffer::try_zeroed_vec::<$t>(n) else {
                    return Some(Err(Error::too_large(
                        format!("{n} elements of {}", stringify!($t)),
                        (n as u64).checked_mul(std::mem::size_of::<$t>() as u64),
                    )));
                };
                Some(fill(<$t as NativeNum>::TYPE, bytemuck::cast_slice_mut(&mut out)).map(|()| out))
            }
        }
    )*};
}

numbers!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

/// h5py's boolean type: an enumeration of int8 with `FALSE = 0` and `TRUE = 1`.
pub(crate) fn bool_type() -> Datatype {
    enum_type(
        NumType::Int {
            size: 1,
            signed: true,
            order: h5_core::convert::Order::NATIVE,
        }
        .datatype(),
        vec![("FALSE", vec![0]), ("TRUE", vec![1])],
    )
}

impl H5Type for bool {
    fn h5_type() -> Datatype {
        bool_type()
    }
    fn h5_size() -> usize {
        1
    }
    fn h5_encode(&self, out: &mut [u8], _ctx: &mut EncodeCtx<'_>) -> Result<()> {
        out.fill(0);
        if let Some(b) = out.first_mut() {
            *b = u8::from(*self);
        }
        Ok(())
    }
    fn h5_decode(dt: &Datatype, bytes: &[u8], _ctx: &DecodeCtx<'_>) -> Result<Self> {
        let from = num_type(dt).ok_or_else(|| not_a(dt, "bool"))?;
        let conv = NumConversion::new(from, i64::TYPE, true)?;
        let mut out = [0u8; 8];
        conv.run(bytes, &mut out, 1)?;
        Ok(i64::from_ne(&out) != 0)
    }
}

/// An enumeration type over `base` with `(name, value bytes)` members.
fn enum_type(base: Datatype, members: Vec<(&str, Vec<u8>)>) -> Datatype {
    Datatype::Enum(EnumType {
        base: Box::new(base),
        members: members
            .into_iter()
            .map(|(name, value)| EnumMember {
                name: name.to_owned(),
                value,
            })
            .collect(),
    })
}

/// Support code for `#[derive(H5Type)]`; not a stable interface.
#[doc(hidden)]
pub mod __private {
    use super::*;

    pub use h5_format::datatype::Datatype;

    /// The compound type of a `#[repr(C)]` struct of `size` bytes with `(name, offset, type)`
    /// fields.
    pub fn compound(size: usize, fields: Vec<(&str, usize, Datatype)>) -> Datatype {
        Datatype::Compound(CompoundType {
            size: size as u32,
            members: fields
                .into_iter()
                .map(|(name, offset, datatype)| CompoundMember {
                    name: name.to_owned(),
                    offset: offset as u32,
                    datatype,
                })
                .collect(),
        })
    }

    /// Encodes field `f` at `offset` of `out`.
    pub fn encode_field<F: H5Type>(
        f: &F,
        out: &mut [u8],
        offset: usize,
        name: &str,
        ctx: &mut EncodeCtx<'_>,
    ) -> Result<()> {
        let size = F::h5_size();
        let slot = offset
            .checked_add(size)
            .and_then(|end| out.get_mut(offset..end))
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "field {name:?} ({size} bytes at {offset}) outside its element"
                ))
            })?;
        f.h5_encode(slot, ctx)
    }

    /// The compound type `dt`, for reading a `ty`.
    pub fn as_compound<'d>(dt: &'d Datatype, ty: &str) -> Result<&'d CompoundType> {
        match dt {
            Datatype::Compound(c) => Ok(c),
            other => Err(not_a(other, ty)),
        }
    }

    /// Decodes the member named `name` of the compound element `bytes` as `F`.
    pub fn decode_field<F: H5Type>(
        c: &CompoundType,
        bytes: &[u8],
        name: &str,
        ty: &str,
        ctx: &DecodeCtx<'_>,
    ) -> Result<F> {
        let m = c.members.iter().find(|m| m.name == name).ok_or_else(|| {
            Error::Invalid(format!(
                "reading {ty}: the file's compound type has no member {name:?}"
            ))
        })?;
        let start = m.offset as usize;
        let part = start
            .checked_add(m.datatype.size() as usize)
            .and_then(|end| bytes.get(start..end))
            .ok_or_else(|| Error::Invalid(format!("compound member {name:?} out of bounds")))?;
        F::h5_decode(&m.datatype, part, ctx)
            .map_err(|e| Error::Invalid(format!("reading {ty}.{name}: {e}")))
    }

    /// The enumeration type over `R` with `(name, value)` members.
    pub fn enumeration<R: NativeNum + H5Type>(members: &[(&str, R)]) -> Datatype {
        enum_type(
            R::h5_type(),
            members
                .iter()
                .map(|(n, v)| (*n, bytemuck::bytes_of(v).to_vec()))
                .collect(),
        )
    }

    /// Encodes an enumeration value.
    pub fn encode_enum<R: NativeNum>(v: R, out: &mut [u8]) -> Result<()> {
        let b = bytemuck::bytes_of(&v);
        if b.len() != out.len() {
            return Err(Error::Invalid("enumeration value of another size".into()));
        }
        out.copy_from_slice(b);
        Ok(())
    }

    /// Which of `members` (`(name, value)`, in declaration order) the element `bytes` of file
    /// type `dt` is: an enumeration is matched by member name, an integer by value.
    pub fn decode_enum<R: NativeNum + PartialEq + std::fmt::Debug>(
        dt: &Datatype,
        bytes: &[u8],
        members: &[(&str, R)],
        ty: &str,
    ) -> Result<usize> {
        match dt {
            Datatype::Enum(e) => {
                let m = e
                    .members
                    .iter()
                    .find(|m| m.value.as_slice() == bytes)
                    .ok_or_else(|| {
                        Error::Invalid(format!("reading {ty}: a value outside the enumeration"))
                    })?;
                members
                    .iter()
                    .position(|(n, _)| *n == m.name)
                    .ok_or_else(|| {
                        Error::Invalid(format!("reading {ty}: {} has no variant {:?}", ty, m.name))
                    })
            }
            other => {
                let v = decode_number::<R>(other, bytes)?;
                members.iter().position(|(_, x)| *x == v).ok_or_else(|| {
                    Error::Invalid(format!("reading {ty}: no variant has value {v:?}"))
                })
            }
        }
    }

    /// The error for an impossible variant index (never returned for indices `decode_enum`
    /// gives).
    pub fn bad_variant(ty: &str) -> Error {
        Error::Invalid(format!("reading {ty}: variant index out of range"))
    }
}
