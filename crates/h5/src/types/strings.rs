//! String element types: variable-length (`String`, [`VarLenUnicode`], [`VarLenAscii`]) and
//! fixed-length ([`FixedAscii`], [`FixedUnicode`]).
//!
//! Variable-length strings are written as libhdf5 writes them: the bytes without a terminator in
//! a global heap object (an empty string is an empty object), padding "null-terminated". Fixed-
//! length strings are null-padded, like numpy's `S` type in h5py. Reading accepts either kind
//! of string type in the file.

use std::fmt;
use std::ops::Deref;

use h5_format::datatype::{Charset, Datatype, StringPadding, StringType, VarLenKind, VarLenType};

use super::{DecodeCtx, EncodeCtx, H5Type, VLEN_SIZE, not_a};
use crate::{Error, Result};

/// The variable-length string type of `charset` (16-byte elements in files h5 writes).
pub(crate) fn vlen_string_type(charset: Charset) -> Datatype {
    Datatype::VarLen(VarLenType {
        size: VLEN_SIZE as u32,
        kind: VarLenKind::String {
            padding: StringPadding::NullTerminate,
            charset,
        },
        base: Box::new(Datatype::FixedPoint(h5_format::datatype::FixedPoint {
            size: 1,
            order: h5_format::datatype::ByteOrder::LittleEndian,
            signed: false,
            lo_pad: false,
            hi_pad: false,
            bit_offset: 0,
            precision: 8,
        })),
    })
}

/// The fixed-length string type of `size` bytes.
fn fixed_string_type(size: usize, charset: Charset) -> Datatype {
    Datatype::String(StringType {
        size: size.max(1) as u32,
        padding: StringPadding::NullPad,
        charset,
    })
}

/// The bytes of one string element of type `dt` (fixed: padding removed; variable: from the
/// heap).
fn decode_bytes(dt: &Datatype, bytes: &[u8], ctx: &DecodeCtx<'_>) -> Result<Vec<u8>> {
    match dt {
        Datatype::String(s) => {
            let end = match s.padding {
                StringPadding::NullTerminate | StringPadding::NullPad => {
                    bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len())
                }
                StringPadding::SpacePad => {
                    bytes.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1)
                }
            };
            Ok(bytes.get(..end).unwrap_or(bytes).to_vec())
        }
        Datatype::VarLen(v) if matches!(v.kind, VarLenKind::String { .. }) => {
            Ok(match ctx.get_vlen(bytes)? {
                None => Vec::new(),
                Some((len, data)) => {
                    let mut data = data;
                    data.truncate(len as usize);
                    // A terminator may be stored.
                    if let Some(p) = data.iter().position(|&c| c == 0) {
                        data.truncate(p);
                    }
                    data
                }
            })
        }
        other => Err(not_a(other, "a string")),
    }
}

fn decode_string(dt: &Datatype, bytes: &[u8], ctx: &DecodeCtx<'_>) -> Result<String> {
    String::from_utf8(decode_bytes(dt, bytes, ctx)?)
        .map_err(|e| Error::Invalid(format!("a string that is not UTF-8: {e}")))
}

fn encode_vlen(s: &str, out: &mut [u8], ctx: &mut EncodeCtx<'_>) -> Result<()> {
    let len =
        u32::try_from(s.len()).map_err(|_| Error::Invalid("a string longer than 4 GiB".into()))?;
    ctx.put_vlen(out, len, s.as_bytes(), true)
}

/// A `String` is a variable-length UTF-8 string.
impl H5Type for String {
    fn h5_type() -> Datatype {
        vlen_string_type(Charset::Utf8)
    }
    fn h5_size() -> usize {
        VLEN_SIZE
    }
    fn h5_encode(&self, out: &mut [u8], ctx: &mut EncodeCtx<'_>) -> Result<()> {
        encode_vlen(self, out, ctx)
    }
    fn h5_decode(dt: &Datatype, bytes: &[u8], ctx: &DecodeCtx<'_>) -> Result<Self> {
        decode_string(dt, bytes, ctx)
    }
}

macro_rules! vlen_newtype {
    ($(#[$doc:meta])* $name:ident, $charset:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
        pub struct $name(String);

        impl $name {
            /// The string.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The owned string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl H5Type for $name {
            fn h5_type() -> Datatype {
                vlen_string_type($charset)
            }
            fn h5_size() -> usize {
                VLEN_SIZE
            }
            fn h5_encode(&self, out: &mut [u8], ctx: &mut EncodeCtx<'_>) -> Result<()> {
                encode_vlen(&self.0, out, ctx)
            }
            fn h5_decode(dt: &Datatype, bytes: &[u8], ctx: &DecodeCtx<'_>) -> Result<Self> {
                decode_string(dt, bytes, ctx).map($name)
            }
        }
    };
}

vlen_newtype!(
    /// A variable-length UTF-8 string (hdf5-metno's `VarLenUnicode`); `String` is the same
    /// type in the file.
    VarLenUnicode,
    Charset::Utf8
);

vlen_newtype!(
    /// A variable-length ASCII string (hdf5-metno's `VarLenAscii`): build it with
    /// [`VarLenAscii::from_ascii`].
    VarLenAscii,
    Charset::Ascii
);

impl From<&str> for VarLenUnicode {
    fn from(s: &str) -> Self {
        VarLenUnicode(s.to_owned())
    }
}

impl From<String> for VarLenUnicode {
    fn from(s: String) -> Self {
        VarLenUnicode(s)
    }
}

impl VarLenAscii {
    /// `s`, which must be ASCII.
    pub fn from_ascii(s: &str) -> Result<Self> {
        if !s.is_ascii() {
            return Err(Error::Invalid(format!("{s:?} is not ASCII")));
        }
        Ok(VarLenAscii(s.to_owned()))
    }
}

macro_rules! fixed {
    ($(#[$doc:meta])* $name:ident, $charset:expr, $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
        pub struct $name<const N: usize> {
            /// The bytes, null-padded.
            bytes: [u8; N],
        }

        impl<const N: usize> $name<N> {
            /// `s` padded with nulls; an error when it is longer than `N` bytes, holds a null
            /// byte, or (for ASCII) is not ASCII.
            pub fn new(s: &str) -> Result<Self> {
                let check: fn(&str) -> bool = $check;
                if s.len() > N || s.as_bytes().contains(&0) || !check(s) {
                    return Err(Error::Invalid(format!(
                        "{s:?} does not fit a {} of {N} bytes",
                        stringify!($name)
                    )));
                }
                let mut bytes = [0u8; N];
                bytes[..s.len()].copy_from_slice(s.as_bytes());
                Ok(Self { bytes })
            }

            /// The string without its padding.
            pub fn as_str(&self) -> &str {
                let end = self.bytes.iter().position(|&c| c == 0).unwrap_or(N);
                // Built from a `&str` cut at a null byte, or checked when decoded.
                std::str::from_utf8(&self.bytes[..end]).unwrap_or_default()
            }

            /// The raw bytes (null-padded).
            pub fn as_bytes(&self) -> &[u8; N] {
                &self.bytes
            }
        }

        impl<const N: usize> Default for $name<N> {
            fn default() -> Self {
                Self { bytes: [0; N] }
            }
        }

        impl<const N: usize> fmt::Display for $name<N> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl<const N: usize> H5Type for $name<N> {
            fn h5_type() -> Datatype {
                fixed_string_type(N, $charset)
            }
            fn h5_size() -> usize {
                N.max(1)
            }
            fn h5_encode(&self, out: &mut [u8], _ctx: &mut EncodeCtx<'_>) -> Result<()> {
                out.fill(0);
                let n = N.min(out.len());
                out[..n].copy_from_slice(&self.bytes[..n]);
                Ok(())
            }
            fn h5_decode(dt: &Datatype, bytes: &[u8], ctx: &DecodeCtx<'_>) -> Result<Self> {
                let s = decode_string(dt, bytes, ctx)?;
                Self::new(&s)
            }
        }
    };
}

fixed!(
    /// A fixed-length ASCII string of `N` bytes, null-padded (numpy's `S{N}` in h5py).
    FixedAscii,
    Charset::Ascii,
    |s| s.is_ascii()
);

fixed!(
    /// A fixed-length UTF-8 string of `N` bytes, null-padded.
    FixedUnicode,
    Charset::Utf8,
    |_| true
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_strings() {
        let a = FixedAscii::<4>::new("ab").unwrap();
        assert_eq!(a.as_str(), "ab");
        assert_eq!(a.as_bytes(), b"ab\0\0");
        assert!(FixedAscii::<2>::new("abc").is_err());
        assert!(FixedAscii::<4>::new("é").is_err());
        assert!(FixedUnicode::<4>::new("é").is_ok());
        assert!(FixedUnicode::<4>::new("a\0").is_err());
        assert_eq!(FixedAscii::<3>::h5_size(), 3);
        assert!(VarLenAscii::from_ascii("é").is_err());
        assert_eq!(VarLenUnicode::from("x").as_str(), "x");
    }
}
