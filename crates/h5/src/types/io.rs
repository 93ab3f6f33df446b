//! Reading datasets and attributes as [`H5Type`] values, and writing strings.

use h5_chunkcache::selection::Selection;
use h5_format::datatype::{Datatype, StringPadding, VarLenKind};
use ndarray::{ArrayD, IxDyn};

use super::strings::vlen_string_type;
use super::{DecodeCtx, H5Type, encode_for};
use crate::{Attribute, Dataset, Error, Group, Result};

fn one<T>(mut v: Vec<T>, what: &str) -> Result<T> {
    match (v.pop(), v.is_empty()) {
        (Some(x), true) => Ok(x),
        (x, _) => Err(Error::Invalid(format!(
            "{what} has {} elements, not one",
            v.len() + usize::from(x.is_some())
        ))),
    }
}

impl Dataset {
    /// Every element as a `T` (C order), converted from the file's type: compound members by
    /// name, enumeration values by name, numbers losslessly, strings of either kind.
    pub fn read_vec<T: H5Type>(&self) -> Result<Vec<T>> {
        if self.is_null() {
            return Ok(Vec::new());
        }
        let raw = self.read_raw()?;
        T::h5_decode_all(self.dtype(), &raw, &DecodeCtx::new(self.file_shared()))
    }

    /// Every element as a `T` in an array of the dataset's shape.
    pub fn read_array<T: H5Type>(&self) -> Result<ArrayD<T>> {
        let v = self.read_vec::<T>()?;
        ArrayD::from_shape_vec(IxDyn(&self.shape()), v).map_err(|e| Error::Invalid(e.to_string()))
    }

    /// The only element of a scalar (or one-element) dataset as a `T`.
    pub fn read_one<T: H5Type>(&self) -> Result<T> {
        one(self.read_vec()?, self.path())
    }

    /// Writes every element of a string dataset (variable or fixed length) from `data` (C
    /// order). A fixed-length string longer than the type is an error.
    pub fn write_strs<S: AsRef<str>>(&self, data: &[S]) -> Result<()> {
        if data.len() != self.size() {
            return Err(Error::Invalid(format!(
                "{} strings written to a dataset of {}",
                data.len(),
                self.size()
            )));
        }
        let file = self.file_shared();
        let bytes = match self.dtype() {
            Datatype::VarLen(v) if matches!(v.kind, VarLenKind::String { .. }) => {
                let mut ctx = super::EncodeCtx::new(file);
                let size = v.size as usize;
                let mut out = vec![0u8; data.len() * size];
                for (s, o) in data.iter().zip(out.chunks_exact_mut(size)) {
                    let s = s.as_ref();
                    let len = u32::try_from(s.len())
                        .map_err(|_| Error::Invalid("a string longer than 4 GiB".into()))?;
                    ctx.put_vlen(o, len, s.as_bytes(), true)?;
                }
                ctx.finish()?;
                out
            }
            Datatype::String(t) => {
                let size = t.size as usize;
                let pad = if t.padding == StringPadding::SpacePad {
                    b' '
                } else {
                    0
                };
                let mut out = vec![pad; data.len() * size];
                for (s, o) in data.iter().zip(out.chunks_exact_mut(size)) {
                    let b = s.as_ref().as_bytes();
                    let slot = o.get_mut(..b.len()).ok_or_else(|| {
                        Error::Invalid(format!(
                            "{:?} is longer than the {size}-byte strings of {}",
                            s.as_ref(),
                            self.path()
                        ))
                    })?;
                    slot.copy_from_slice(b);
                }
                out
            }
            other => {
                return Err(Error::Invalid(format!(
                    "writing strings to a dataset of {}",
                    other.describe()
                )));
            }
        };
        h5_core::write::dataset::write(file, &self.info(), &Selection::All, None, None, &bytes)
    }
}

impl Attribute {
    /// Every element as a `T` (C order), converted from the file's type as
    /// [`Dataset::read_vec`] does.
    pub fn read_vec<T: H5Type>(&self) -> Result<Vec<T>> {
        if self.is_null() {
            return Ok(Vec::new());
        }
        T::h5_decode_all(
            self.dtype(),
            self.read_raw(),
            &DecodeCtx::new(self.file_shared()),
        )
    }

    /// The only element of a scalar (or one-element) attribute as a `T`.
    pub fn read_one<T: H5Type>(&self) -> Result<T> {
        one(self.read_vec()?, self.name())
    }
}

/// Writes the scalar attribute `name` holding the variable-length UTF-8 string `value`.
fn write_vlen_str(
    file: &h5_core::file::FileShared,
    obj: u64,
    name: &str,
    value: &str,
) -> Result<()> {
    let s = value.to_owned();
    encode_for(file, std::slice::from_ref(&s), |b| {
        file.write_attribute(
            obj,
            name,
            &vlen_string_type(h5_format::datatype::Charset::Utf8),
            None,
            b,
        )
    })
}

impl Group {
    /// Writes (or replaces) the scalar attribute `name` holding a variable-length UTF-8
    /// string (what h5py writes for `attrs[name] = "..."`).
    pub fn write_attr_vlen_str(&self, name: &str, value: &str) -> Result<()> {
        write_vlen_str(self.file_shared(), self.address(), name, value)
    }
}

impl Dataset {
    /// Writes (or replaces) the scalar attribute `name` holding a variable-length UTF-8
    /// string.
    pub fn write_attr_vlen_str(&self, name: &str, value: &str) -> Result<()> {
        write_vlen_str(self.file_shared(), self.address(), name, value)
    }
}
