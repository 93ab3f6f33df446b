//! What every object handle has: its file, its object header's address and its path; the
//! object's attributes; the file and path that errors name.

use std::path::PathBuf;
use std::sync::Arc;

use h5_core::file::FileShared;
use h5_core::object::ObjectHeader;
use h5_format::datatype::{Charset, Datatype, StringPadding, StringType};

use crate::attribute::AttributeBuilder;
use crate::types::{H5Type, encode_for};
use crate::{Attribute, Error, Result};

/// An object of a file (a group, a dataset): the file, the object's identity (its object
/// header's address) and the path it was opened at, and the object's attributes.
///
/// [`Group`](crate::Group) and [`Dataset`](crate::Dataset) dereference to their `Location`
/// (and [`File`](crate::File) to its root group), so the attribute calls below work on all of
/// them, as in hdf5-metno:
///
/// ```
/// # fn main() -> h5::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let file = h5::File::create(dir.path().join("attrs.h5"))?;
/// let ds = file.new_dataset::<f64>().shape([3]).create("x")?;
/// let grid = h5::ndarray::arr2(&[[1u32, 2], [3, 4]]);
/// ds.new_attr::<u32>().shape([2, 2]).create("grid")?.write(&grid)?;
/// file.write_attr_str("title", "run 7")?;
/// assert_eq!(ds.attr("grid")?.read_2d::<u32>()?[[1, 0]], 3);
/// assert_eq!(file.attr_names()?, ["title"]);
/// # Ok(()) }
/// ```
///
/// Cheap to clone; `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Location {
    file: Arc<FileShared>,
    address: u64,
    path: String,
}

impl Location {
    pub(crate) fn new(file: Arc<FileShared>, address: u64, path: String) -> Location {
        Location {
            file,
            address,
            path,
        }
    }

    pub(crate) fn file_shared(&self) -> &Arc<FileShared> {
        &self.file
    }

    /// The object header's address (relative to the superblock): the object's identity.
    pub fn address(&self) -> u64 {
        self.address
    }

    /// The path the object was opened at.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The object's name: the last component of its path (`/` for the root group).
    pub fn name(&self) -> &str {
        match self.path.rsplit_once('/') {
            Some((_, "")) | None => &self.path,
            Some((_, last)) => last,
        }
    }

    /// The path of the file holding the object (`None` for a file in other storage, such as
    /// memory). Another file than the handle it was reached from after an external link.
    pub fn filename(&self) -> Option<PathBuf> {
        self.file.path().map(std::path::Path::to_path_buf)
    }

    /// The object header as the metadata cache holds it now (never a copy kept by the
    /// handle, so changes made through other handles are seen).
    pub(crate) fn header(&self) -> Result<Arc<ObjectHeader>> {
        ObjectHeader::load(&self.file, self.address).map_err(|e| self.wrap(e))
    }

    /// `e` naming this object and its file, when it comes from the layers below.
    pub(crate) fn wrap(&self, e: Error) -> Error {
        e.in_object(|| self.file.display_name(), &self.path)
    }

    /// `r` with [`Location::wrap`] applied to its error.
    pub(crate) fn ctx<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| self.wrap(e))
    }

    /// The path of `name` relative to this object (absolute names stay as they are).
    pub(crate) fn join(&self, name: &str) -> String {
        if name.starts_with('/') {
            name.to_owned()
        } else if self.path.ends_with('/') {
            format!("{}{name}", self.path)
        } else {
            format!("{}/{name}", self.path)
        }
    }

    /// The attributes, sorted by name.
    pub fn attrs(&self) -> Result<Vec<Attribute>> {
        crate::swmr::api(|| {
            let oh = self.header()?;
            self.ctx(Attribute::all(self, &oh))
        })
    }

    /// The attribute `name`.
    pub fn attr(&self, name: &str) -> Result<Attribute> {
        crate::swmr::api(|| {
            self.attrs()?
                .into_iter()
                .find(|a| a.name() == name)
                .ok_or_else(|| Error::NotFound(format!("{}: attribute {name:?}", self.path)))
        })
    }

    /// The attributes' names, sorted.
    pub fn attr_names(&self) -> Result<Vec<String>> {
        crate::swmr::api(|| {
            Ok(self
                .attrs()?
                .into_iter()
                .map(|a| a.name().to_owned())
                .collect())
        })
    }

    /// Whether the object has an attribute `name`.
    pub fn attr_exists(&self, name: &str) -> Result<bool> {
        crate::swmr::api(|| Ok(self.attrs()?.iter().any(|a| a.name() == name)))
    }

    /// Starts describing a new attribute of `T` elements (any [`H5Type`]): give its shape
    /// ([`AttributeBuilder::shape`]; a scalar without one), then
    /// [`create`](AttributeBuilder::create) it and [`write`](Attribute::write) its value.
    pub fn new_attr<T: H5Type>(&self) -> AttributeBuilder<T> {
        AttributeBuilder::new(self.clone())
    }

    /// Writes (or replaces) the attribute `name` holding `values` (a 1-D array); see
    /// [`Location::new_attr`] for other shapes.
    pub fn write_attr<T: H5Type>(&self, name: &str, values: &[T]) -> Result<()> {
        crate::swmr::api(|| {
            let dims = [values.len() as u64];
            let r = encode_for(&self.file, values, |b| {
                self.file
                    .write_attribute(self.address, name, &T::h5_type(), Some(&dims), b)
            });
            self.ctx(r)
        })
    }

    /// Writes (or replaces) the scalar attribute `name`.
    pub fn write_attr_scalar<T: H5Type>(&self, name: &str, value: T) -> Result<()> {
        crate::swmr::api(|| {
            let r = encode_for(&self.file, std::slice::from_ref(&value), |b| {
                self.file
                    .write_attribute(self.address, name, &T::h5_type(), None, b)
            });
            self.ctx(r)
        })
    }

    /// Writes (or replaces) the attribute `name` holding a fixed-length UTF-8 string (as long
    /// as `value`).
    pub fn write_attr_str(&self, name: &str, value: &str) -> Result<()> {
        crate::swmr::api(|| {
            let bytes = value.as_bytes();
            let t = Datatype::String(StringType {
                size: bytes.len().max(1) as u32,
                padding: StringPadding::NullTerminate,
                charset: Charset::Utf8,
            });
            let mut data = bytes.to_vec();
            if data.is_empty() {
                data.push(0);
            }
            self.ctx(
                self.file
                    .write_attribute(self.address, name, &t, None, &data),
            )
        })
    }

    /// Writes (or replaces) the scalar attribute `name` holding a variable-length UTF-8
    /// string (what h5py writes for `attrs[name] = "..."`).
    pub fn write_attr_vlen_str(&self, name: &str, value: &str) -> Result<()> {
        crate::swmr::api(|| self.write_attr_scalar(name, value.to_owned()))
    }

    /// The object's comment (libhdf5's `H5Oget_comment`, what h5dump prints as `COMMENT`), if it
    /// has one. Bytes that are not UTF-8 are replaced.
    pub fn comment(&self) -> Result<Option<String>> {
        crate::swmr::api(|| {
            Ok(self.header()?.find(|m| match m {
                h5_format::message::Message::Comment(c) => {
                    Some(String::from_utf8_lossy(&c.text).into_owned())
                }
                _ => None,
            }))
        })
    }

    /// Sets the object's comment (libhdf5's `H5Oset_comment`); `None` or an empty text removes
    /// it. A comment holds no null character.
    pub fn set_comment(&self, comment: Option<&str>) -> Result<()> {
        crate::swmr::api(|| self.ctx(self.file.set_comment(self.address, comment)))
    }

    /// Deletes the attribute `name`.
    pub fn delete_attr(&self, name: &str) -> Result<()> {
        crate::swmr::api(|| self.ctx(self.file.delete_attribute(self.address, name)))
    }

    /// Renames the attribute `name` to `new_name`.
    pub fn rename_attr(&self, name: &str, new_name: &str) -> Result<()> {
        crate::swmr::api(|| self.ctx(self.file.rename_attribute(self.address, name, new_name)))
    }
}
