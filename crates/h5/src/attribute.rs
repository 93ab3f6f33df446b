//! Attributes.

use std::sync::Arc;

use h5_core::attribute::{Attribute as CoreAttribute, attributes};
use h5_core::file::FileShared;
use h5_core::object::ObjectHeader;
use h5_core::values::{numbers, strings};
use ndarray::{ArrayD, IxDyn};

use crate::{Datatype, Error, H5Num, Result};

/// An attribute, with its value already read (attributes are small and stored in metadata).
#[derive(Clone, Debug)]
pub struct Attribute {
    file: Arc<FileShared>,
    inner: CoreAttribute,
}

impl Attribute {
    pub(crate) fn all(file: &Arc<FileShared>, oh: &ObjectHeader) -> Result<Vec<Attribute>> {
        Ok(attributes(file, oh)?
            .into_iter()
            .map(|inner| Attribute {
                file: Arc::clone(file),
                inner,
            })
            .collect())
    }

    pub(crate) fn named(
        file: &Arc<FileShared>,
        oh: &ObjectHeader,
        name: &str,
        owner: &str,
    ) -> Result<Attribute> {
        Self::all(file, oh)?
            .into_iter()
            .find(|a| a.inner.name == name)
            .ok_or_else(|| Error::NotFound(format!("{owner}: attribute {name:?}")))
    }

    pub(crate) fn file_shared(&self) -> &Arc<FileShared> {
        &self.file
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The element type.
    pub fn dtype(&self) -> &Datatype {
        &self.inner.datatype
    }

    /// The shape (empty for a scalar).
    pub fn shape(&self) -> Vec<usize> {
        self.inner
            .dataspace
            .dims
            .iter()
            .map(|&d| d as usize)
            .collect()
    }

    /// Whether the dataspace is null (no elements at all, unlike a scalar's one).
    pub fn is_null(&self) -> bool {
        self.inner.dataspace.kind == h5_format::message::dataspace::DataspaceKind::Null
    }

    /// The raw elements (file representation).
    pub fn read_raw(&self) -> &[u8] {
        &self.inner.data
    }

    /// The value as an array of `T` (lossless conversions only).
    pub fn read<T: H5Num>(&self) -> Result<ArrayD<T>> {
        self.file.check_open()?;
        let v = numbers::<T>(&self.inner.datatype, &self.inner.data, false)?;
        ArrayD::from_shape_vec(IxDyn(&self.shape()), v).map_err(|e| Error::Invalid(e.to_string()))
    }

    /// A scalar (or one-element) value.
    pub fn read_scalar<T: H5Num>(&self) -> Result<T> {
        self.file.check_open()?;
        let v = numbers::<T>(&self.inner.datatype, &self.inner.data, false)?;
        match v.as_slice() {
            [x] => Ok(*x),
            _ => Err(Error::Invalid(format!(
                "attribute {:?} has {} elements, not one",
                self.inner.name,
                v.len()
            ))),
        }
    }

    /// Every element as a [`Value`](crate::Value), whatever the datatype, in C order.
    pub fn read_values(&self) -> Result<Vec<crate::Value>> {
        self.file.check_open()?;
        h5_core::values::values(&self.file, &self.inner.datatype, &self.inner.data)
    }

    /// The value as strings (fixed or variable length).
    pub fn read_strings(&self) -> Result<Vec<String>> {
        self.file.check_open()?;
        strings(&self.file, &self.inner.datatype, &self.inner.data)
    }
}
