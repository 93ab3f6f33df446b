//! Attributes: reading them as any [`H5Type`] into ndarray arrays, creating them with a
//! builder and writing them from arrays.

use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

use h5_core::object::ObjectHeader;
use h5_format::message::dataspace::{Dataspace, DataspaceKind};
use ndarray::{Array1, Array2, ArrayD, ArrayView, Dimension, Ix1, Ix2, IxDyn};

use crate::convert::{WriteMode, encode_view_for, to_array, write_conversion};
use crate::types::{DecodeCtx, H5Type};
use crate::{Datatype, Error, Location, Result};

/// An attribute of a group or dataset.
///
/// Its value is read when the handle is obtained ([`Location::attr`], [`Location::attrs`]):
/// attributes are small and stored with the object's metadata. [`Attribute::write`] changes the
/// file and this handle's value; a handle obtained earlier keeps the value it read (obtain it
/// again to see later writes).
///
/// Cheap to clone (clones share the value); `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Attribute {
    owner: Location,
    name: String,
    datatype: Datatype,
    dataspace: Dataspace,
    /// The committed datatype the attribute's type refers to, if any (relative address).
    committed_type: Option<u64>,
    /// The elements (file representation), as read or as last written through this handle.
    data: Arc<RwLock<Vec<u8>>>,
}

impl Attribute {
    /// Every attribute of the object at `owner` whose header is `oh`, in name order.
    pub(crate) fn all(owner: &Location, oh: &ObjectHeader) -> Result<Vec<Attribute>> {
        Ok(h5_core::attribute::attributes(owner.file_shared(), oh)?
            .into_iter()
            .map(|a| Attribute {
                owner: owner.clone(),
                name: a.name,
                datatype: a.datatype,
                dataspace: a.dataspace,
                committed_type: a.committed_type,
                data: Arc::new(RwLock::new(a.data)),
            })
            .collect())
    }

    pub(crate) fn file_shared(&self) -> &Arc<h5_core::file::FileShared> {
        self.owner.file_shared()
    }

    /// The object the attribute belongs to.
    pub fn owner(&self) -> &Location {
        &self.owner
    }

    /// The relative address of the committed (named) datatype this attribute's type is, if its
    /// datatype refers to one (compare with [`crate::NamedDatatype::address`]).
    pub fn committed_type_address(&self) -> Option<u64> {
        self.committed_type
    }

    /// The global heap of the file this attribute belongs to (for variable-length elements read as
    /// bytes).
    pub fn global_heap(&self) -> crate::GlobalHeap {
        crate::GlobalHeap::new(self.file_shared())
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The element type.
    pub fn dtype(&self) -> &Datatype {
        &self.datatype
    }

    /// The shape (empty for a scalar).
    pub fn shape(&self) -> Vec<usize> {
        self.dataspace.dims.iter().map(|&d| d as usize).collect()
    }

    /// Number of dimensions (0 for a scalar).
    pub fn ndim(&self) -> usize {
        self.dataspace.dims.len()
    }

    /// Number of elements (1 for a scalar, 0 for a null dataspace).
    pub fn size(&self) -> usize {
        if self.is_null() {
            return 0;
        }
        // Checked by the engine when it read the value; saturating all the same.
        self.shape()
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .unwrap_or(usize::MAX)
    }

    /// Whether the dataspace is null (no elements at all, unlike a scalar's one).
    pub fn is_null(&self) -> bool {
        self.dataspace.kind == DataspaceKind::Null
    }

    /// The raw elements (file representation, C order).
    pub fn read_raw(&self) -> Vec<u8> {
        self.data.read().map(|d| d.clone()).unwrap_or_default()
    }

    /// Every element as a `T` in an array of the attribute's shape (0-dimensional for a
    /// scalar), converted from the file's type as [`Dataset::read`](crate::Dataset::read)
    /// converts: numbers losslessly, compound members and enumeration values by name, strings
    /// of either kind.
    pub fn read<T: H5Type>(&self) -> Result<ArrayD<T>> {
        crate::swmr::api(|| {
            let v = self.read_vec()?;
            let shape = if self.is_null() {
                vec![0]
            } else {
                self.shape()
            };
            to_array(v, &shape)
        })
    }

    /// Every element as a `T`, C order.
    pub fn read_vec<T: H5Type>(&self) -> Result<Vec<T>> {
        crate::swmr::api(|| {
            self.file_shared().check_open()?;
            if self.is_null() {
                return Ok(Vec::new());
            }
            let raw = self.read_raw();
            let r = T::h5_decode_all(&self.datatype, &raw, &DecodeCtx::new(self.file_shared()));
            self.owner.ctx(r)
        })
    }

    /// A one-dimensional attribute.
    pub fn read_1d<T: H5Type>(&self) -> Result<Array1<T>> {
        crate::swmr::api(|| into_dim::<T, Ix1>(self.read()?))
    }

    /// A two-dimensional attribute.
    pub fn read_2d<T: H5Type>(&self) -> Result<Array2<T>> {
        crate::swmr::api(|| into_dim::<T, Ix2>(self.read()?))
    }

    /// The only element of a scalar (or one-element) attribute.
    pub fn read_scalar<T: H5Type>(&self) -> Result<T> {
        crate::swmr::api(|| one(self.read_vec()?, &self.name))
    }

    /// The value as strings (fixed or variable length).
    pub fn read_strings(&self) -> Result<Vec<String>> {
        crate::swmr::api(|| {
            self.file_shared().check_open()?;
            h5_core::values::strings(self.file_shared(), &self.datatype, &self.read_raw())
        })
    }

    /// Every element as a [`Value`](crate::Value), whatever the datatype, in C order.
    pub fn read_values(&self) -> Result<Vec<crate::Value>> {
        crate::swmr::api(|| {
            self.file_shared().check_open()?;
            h5_core::values::values(self.file_shared(), &self.datatype, &self.read_raw())
        })
    }

    /// Writes every element from `data`: an array of the attribute's shape (any memory
    /// layout), or a flat slice in C order with as many elements. Numbers are converted to
    /// the attribute's type when no value can change (as reads do); other types must match
    /// it.
    pub fn write<'a, T: H5Type + 'a, D: Dimension>(
        &self,
        data: impl Into<ArrayView<'a, T, D>>,
    ) -> Result<()> {
        crate::swmr::api(|| self.write_view(data.into().into_dyn(), WriteMode::Lossless))
    }

    /// [`Attribute::write`] allowing narrowing numeric conversions (floats truncated toward
    /// zero, out-of-range values saturated, as libhdf5 converts).
    pub fn write_lossy<'a, T: H5Type + 'a, D: Dimension>(
        &self,
        data: impl Into<ArrayView<'a, T, D>>,
    ) -> Result<()> {
        crate::swmr::api(|| self.write_view(data.into().into_dyn(), WriteMode::Lossy))
    }

    /// Writes the value of a scalar (or one-element) attribute.
    pub fn write_scalar<T: H5Type>(&self, value: &T) -> Result<()> {
        crate::swmr::api(|| {
            self.write_view(
                ArrayView::from_shape(IxDyn(&[1]), std::slice::from_ref(value))
                    .map_err(|e| Error::Invalid(e.to_string()))?,
                WriteMode::Lossless,
            )
        })
    }

    fn write_view<T: H5Type>(&self, view: ArrayView<'_, T, IxDyn>, mode: WriteMode) -> Result<()> {
        self.file_shared().check_open()?;
        crate::convert::check_shape(view.shape(), &self.shape(), &self.name)?;
        let conv = write_conversion::<T>(&self.datatype, mode, &self.name)?;
        let file = self.file_shared();
        let bytes = encode_view_for(file, &view, |encoded, n| match conv {
            Some(c) => {
                let mut out = vec![0u8; n * self.datatype.size() as usize];
                c.run(encoded, &mut out, n)?;
                Ok(out)
            }
            None => Ok(encoded.to_vec()),
        })?;
        let dims = (self.dataspace.kind == DataspaceKind::Simple).then_some(&self.dataspace.dims);
        let r = file.write_attribute(
            self.owner.address(),
            &self.name,
            &self.datatype,
            dims.map(Vec::as_slice),
            &bytes,
        );
        self.owner.ctx(r)?;
        if let Ok(mut d) = self.data.write() {
            *d = bytes;
        }
        Ok(())
    }
}

/// `v`, which must hold exactly one element.
pub(crate) fn one<T>(mut v: Vec<T>, what: &str) -> Result<T> {
    match (v.pop(), v.is_empty()) {
        (Some(x), true) => Ok(x),
        (x, _) => Err(Error::Invalid(format!(
            "{what} has {} elements, not one",
            v.len() + usize::from(x.is_some())
        ))),
    }
}

/// An array of `D` dimensions.
pub(crate) fn into_dim<T, D: Dimension>(a: ArrayD<T>) -> Result<ndarray::Array<T, D>> {
    a.into_dimensionality::<D>()
        .map_err(|e| Error::Invalid(e.to_string()))
}

/// A new attribute's description (hdf5-metno style):
/// `ds.new_attr::<f32>().shape([2, 3]).create("calibration")?` then
/// [`Attribute::write`].
#[derive(Debug)]
#[must_use]
pub struct AttributeBuilder<T> {
    owner: Location,
    shape: Option<Vec<u64>>,
    _t: PhantomData<T>,
}

impl<T: H5Type> AttributeBuilder<T> {
    pub(crate) fn new(owner: Location) -> Self {
        AttributeBuilder {
            owner,
            shape: None,
            _t: PhantomData,
        }
    }

    /// The dimensions (none, or an empty shape: a scalar).
    pub fn shape(mut self, dims: impl AsRef<[usize]>) -> Self {
        let dims = dims.as_ref();
        self.shape = (!dims.is_empty()).then(|| dims.iter().map(|d| *d as u64).collect());
        self
    }

    /// Creates the attribute `name` (an error if the object has one of that name already),
    /// its elements zero (empty strings and sequences) until written.
    pub fn create(self, name: &str) -> Result<Attribute> {
        crate::swmr::api(|| {
            let owner = self.owner;
            if owner.attr_exists(name)? {
                return Err(Error::Exists(format!(
                    "{}: attribute {name:?}",
                    owner.path()
                )));
            }
            let datatype = T::h5_type();
            crate::bounds::check_datatype(owner.file_shared(), &datatype)?;
            let elements = self.shape.as_ref().map_or(Some(1u64), |s| {
                s.iter().try_fold(1u64, |a, d| a.checked_mul(*d))
            });
            let bytes = elements
                .and_then(|n| n.checked_mul(u64::from(datatype.size())))
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| Error::Invalid(format!("attribute {name:?} too large")))?;
            let zeros = vec![0u8; bytes];
            let file = owner.file_shared();
            let r = file.write_attribute(
                owner.address(),
                name,
                &datatype,
                self.shape.as_deref(),
                &zeros,
            );
            owner.ctx(r)?;
            owner.attr(name)
        })
    }
}
