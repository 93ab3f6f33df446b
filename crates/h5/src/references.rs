//! Dataset region references and HDF5 1.12 revised references: reading them as typed values,
//! resolving them to the object, selection or attribute they name, making new ones and reading
//! the elements a selection names.
//!
//! * [`RegionRef`] is a dataset region reference as HDF5 1.8 writes it (`H5T_STD_REF_DSETREG`,
//!   h5py's `regionref_dtype`): the dataset's address and a [`Selection`], stored in the
//!   file's global heap. Read them with `read_vec::<RegionRef>()`, make them with
//!   [`Dataset::region`] or [`Dataset::region_of_slice`], resolve them with
//!   [`File::dereference_region`] and read the elements with [`Dataset::read_selection`].
//! * [`Reference`] is any reference, and as an element type the revised reference of HDF5
//!   1.12 (`H5T_STD_REF`: object, region or attribute, [`RefTarget`]); reading it also accepts
//!   object and region references of the 1.8 kinds. [`File::resolve`] opens what it names.
//!
//! ```no_run
//! # fn main() -> h5::Result<()> {
//! use h5::{RegionRef, Selection};
//! let f = h5::File::create("refs.h5")?;
//! let data = f.root()?.new_dataset::<i32>().shape([6, 4]).create("data")?;
//! data.write(&(0..24).collect::<Vec<i32>>())?;
//! let square = data.region_of_slice(ndarray::s![1..3, 1..3])?; // rows 1-2, columns 1-2
//! let points = data.region(Selection::Points { rank: 2, coords: vec![0, 0, 5, 3] })?;
//! f.root()?.new_dataset::<RegionRef>().shape([2]).create("regions")?.write(&[square, points])?;
//! let back = f.dataset("regions")?.read_vec::<RegionRef>()?;
//! let (ds, selection) = f.dereference_region(&back[0])?;
//! assert_eq!(ds.read_selection::<i32>(&selection)?, [5, 6, 9, 10]);
//! # Ok(()) }
//! ```

use h5_chunkcache::selection::{Hyperslab, Points, Selection as CacheSelection};
use h5_core::object::ObjectHeader;
use h5_core::references::decode as decode_reference;
use h5_format::datatype::{Datatype, ReferenceKind, ReferenceType};
use h5_format::reference::{
    RegionObject, RevisedElement, RevisedRef, RevisedTarget, revised_element_size,
};
use h5_format::selection::SelectionVersions;
use ndarray::SliceInfoElem;

pub use h5_core::references::{RefTarget, Reference};
pub use h5_format::selection::Selection;

use crate::types::{DecodeCtx, EncodeCtx, H5Type, Object};
use crate::{Attribute, Dataset, Error, File, FormatBounds, Result};

/// Elements of an irregular selection (several blocks) enumerated at most when one is read:
/// its points are listed in C order, `rank` coordinates each (a typed error beyond).
const MAX_ENUMERATED: u64 = 1 << 24;

/// A dataset region reference (`H5R_DATASET_REGION1`): a dataset and a selection of its
/// elements. As an element type it is HDF5's `H5T_STD_REF_DSETREG` (12 bytes: a global heap
/// ID); writing stores the selection in the file's global heap as libhdf5 does for the file's
/// format bounds.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RegionRef {
    object: u64,
    selection: Selection,
}

impl RegionRef {
    /// The reference to `selection` of the dataset whose header is at `object` (unchecked).
    pub(crate) fn from_parts(object: u64, selection: Selection) -> Self {
        RegionRef { object, selection }
    }

    /// The null region reference (refers to nothing).
    pub fn null() -> Self {
        RegionRef {
            object: 0,
            selection: Selection::None,
        }
    }

    /// Whether this is the null reference.
    pub fn is_null(&self) -> bool {
        self.object == 0 || self.object == h5_format::UNDEFINED_ADDRESS
    }

    /// The referenced dataset's object header address.
    pub fn object_address(&self) -> u64 {
        self.object
    }

    /// The selected elements.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }
}

fn versions_for(bounds: FormatBounds) -> SelectionVersions {
    if bounds >= FormatBounds::V112 {
        SelectionVersions::Compact
    } else {
        SelectionVersions::Compatible
    }
}

fn encoding_ctx<'c>(
    ctx: &'c EncodeCtx<'_>,
) -> Result<(&'c h5_core::file::FileShared, SelectionVersions)> {
    let file = ctx
        .file()
        .ok_or_else(|| Error::Unsupported("references in a fill value".into()))?;
    Ok((file, versions_for(file.bounds())))
}

impl H5Type for RegionRef {
    fn h5_type() -> Datatype {
        Datatype::Reference(ReferenceType {
            size: 12,
            kind: ReferenceKind::DatasetRegion,
            encoding_version: 0,
        })
    }
    fn h5_size() -> usize {
        12
    }
    fn h5_encode(&self, out: &mut [u8], ctx: &mut EncodeCtx<'_>) -> Result<()> {
        if self.is_null() {
            out.fill(0);
            return Ok(());
        }
        let (_, how) = encoding_ctx(ctx)?;
        let sizes = ctx.sizes();
        let blob = RegionObject {
            object: self.object,
            selection: self.selection.clone(),
        }
        .encode(sizes, how)?;
        let id = ctx.heap_insert(&blob)?;
        let mut w = h5_format::Writer::with_capacity(out.len());
        id.encode(sizes, &mut w);
        if w.len() != out.len() {
            return Err(Error::Invalid(format!(
                "a region reference field of {} bytes",
                out.len()
            )));
        }
        out.copy_from_slice(w.as_slice());
        Ok(())
    }
    fn h5_decode(dt: &Datatype, bytes: &[u8], ctx: &DecodeCtx<'_>) -> Result<Self> {
        let Datatype::Reference(rt) = dt else {
            return Err(Error::Invalid(format!(
                "{} cannot be read as a region reference",
                dt.describe()
            )));
        };
        match decode_reference(ctx.file(), rt, bytes)? {
            None => Ok(RegionRef::null()),
            Some(Reference {
                object,
                file: None,
                target: RefTarget::Region(selection),
            }) => Ok(RegionRef { object, selection }),
            Some(other) => Err(Error::Invalid(format!(
                "{other:?} is not a region reference to the same file"
            ))),
        }
    }
}

/// Revised references (`H5T_STD_REF`, datatype version 4) as elements: read from any
/// reference type (1.8 object and region references too), written as libhdf5 1.12+ writes
/// them (object references to the same file inline, the others in the global heap). `None` is
/// the null reference.
impl H5Type for Option<Reference> {
    fn h5_type() -> Datatype {
        Datatype::Reference(ReferenceType {
            size: revised_element_size(h5_format::Sizes::EIGHT) as u32,
            kind: ReferenceKind::Object2,
            encoding_version: 1,
        })
    }
    fn h5_size() -> usize {
        revised_element_size(h5_format::Sizes::EIGHT)
    }
    fn h5_encode(&self, out: &mut [u8], ctx: &mut EncodeCtx<'_>) -> Result<()> {
        let Some(r) = self else {
            out.fill(0);
            return Ok(());
        };
        let (file, how) = encoding_ctx(ctx)?;
        let sizes = file.superblock().sizes;
        let target = match &r.target {
            RefTarget::Object => RevisedTarget::Object,
            RefTarget::Attribute(n) => RevisedTarget::Attribute(n.clone()),
            RefTarget::Region(selection) => RevisedTarget::Region {
                rank: match selection.rank() {
                    Some(k) => k,
                    // "all" and "none" carry no rank: the dataset's.
                    None if r.file.is_none() => dataset_rank(file, r.object)?,
                    None => 0,
                },
                selection: selection.clone(),
            },
        };
        let revised = RevisedRef {
            object: r.object,
            file: r.file.clone(),
            target,
        };
        let encoded = revised.encode(sizes, how)?;
        let id = if revised.is_inline() {
            None
        } else {
            Some(ctx.heap_insert(encoded.get(2..).unwrap_or_default())?)
        };
        let bytes = RevisedElement::encode(&encoded, id, sizes, out.len())?;
        out.copy_from_slice(&bytes);
        Ok(())
    }
    fn h5_decode(dt: &Datatype, bytes: &[u8], ctx: &DecodeCtx<'_>) -> Result<Self> {
        match dt {
            Datatype::Reference(rt) => decode_reference(ctx.file(), rt, bytes),
            other => Err(Error::Invalid(format!(
                "{} cannot be read as a reference",
                other.describe()
            ))),
        }
    }
}

/// The rank of the dataset whose header is at `address`.
fn dataset_rank(file: &h5_core::file::FileShared, address: u64) -> Result<usize> {
    let oh = ObjectHeader::load(file, address)?;
    let info = h5_core::dataset::DatasetInfo::from_header(file, &oh)?;
    Ok(info.dims().len())
}

/// What a [`Reference`] resolves to.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Referenced {
    /// An object (group, dataset or committed datatype).
    Object(Object),
    /// Elements of a dataset.
    Region(Box<Dataset>, Selection),
    /// An attribute.
    Attribute(Box<Attribute>),
}

impl File {
    /// The dataset a region reference names and its selection. Fails for the null reference
    /// and when the object is not a dataset; the selection is not checked against the
    /// dataset's current extent ([`Dataset::read_selection`] checks it).
    pub fn dereference_region(&self, r: &RegionRef) -> Result<(Dataset, Selection)> {
        crate::swmr::api(|| {
            if r.is_null() {
                return Err(Error::NotFound("the null region reference".into()));
            }
            match self.dereference(&crate::ObjectRef::from_address(r.object))? {
                Object::Dataset(d) => Ok((*d, r.selection.clone())),
                other => Err(Error::WrongKind {
                    path: other.path().to_owned(),
                    expected: "dataset",
                    found: "another kind of object",
                }),
            }
        })
    }

    /// Opens what `r` names: the object, the dataset and its selection, or the attribute. A
    /// reference into another file (a revised external reference) opens that file, relative
    /// to this file's folder.
    pub fn resolve(&self, r: &Reference) -> Result<Referenced> {
        crate::swmr::api(|| {
            if let Some(name) = &r.file {
                let path = match self.path().and_then(|p| p.parent()) {
                    Some(dir) => dir.join(name),
                    None => std::path::PathBuf::from(name),
                };
                let other = File::open(&path)?;
                let local = Reference {
                    file: None,
                    ..r.clone()
                };
                return other.resolve(&local);
            }
            let object = self.dereference(&crate::ObjectRef::from_address(r.object))?;
            match &r.target {
                RefTarget::Object => Ok(Referenced::Object(object)),
                RefTarget::Region(selection) => match object {
                    Object::Dataset(d) => Ok(Referenced::Region(d, selection.clone())),
                    other => Err(Error::WrongKind {
                        path: other.path().to_owned(),
                        expected: "dataset",
                        found: "another kind of object",
                    }),
                },
                RefTarget::Attribute(name) => {
                    let a = match &object {
                        Object::Group(g) => g.attr(name)?,
                        Object::Dataset(d) => d.attr(name)?,
                        Object::Datatype(t) => t
                            .attrs()?
                            .into_iter()
                            .find(|a| a.name() == name)
                            .ok_or_else(|| Error::NotFound(format!("{}@{name}", t.path())))?,
                    };
                    Ok(Referenced::Attribute(Box::new(a)))
                }
            }
        })
    }

    /// The kind of the object whose header is at `address` and its (shortest) path.
    pub fn object_at(&self, address: u64) -> Result<Object> {
        crate::swmr::api(|| self.dereference(&crate::ObjectRef::from_address(address)))
    }
}

impl Dataset {
    /// A region reference to the elements `selection` names (checked against the extent).
    pub fn region(&self, selection: Selection) -> Result<RegionRef> {
        crate::swmr::api(|| {
            let dims: Vec<u64> = self.shape().iter().map(|&d| d as u64).collect();
            selection
                .check_extent(&dims)
                .map_err(|e| Error::Invalid(format!("{}: {e}", self.path())))?;
            Ok(RegionRef {
                object: self.address(),
                selection,
            })
        })
    }

    /// A region reference to the hyperslab `slice` (ndarray's `s![..]`; steps positive).
    pub fn region_of_slice(&self, slice: impl AsRef<[SliceInfoElem]>) -> Result<RegionRef> {
        crate::swmr::api(|| {
            let dims: Vec<u64> = self.shape().iter().map(|&d| d as u64).collect();
            let (h, _) = crate::slice::hyperslab(slice.as_ref(), &dims)?;
            self.region(Selection::Regular {
                start: h.start,
                stride: h.stride,
                count: h.count,
                block: h.block,
            })
        })
    }

    /// A revised reference to this dataset's elements `selection` (checked against the
    /// extent).
    pub fn region_reference(&self, selection: Selection) -> Result<Reference> {
        crate::swmr::api(|| {
            let r = self.region(selection)?;
            Ok(Reference {
                object: r.object,
                file: None,
                target: RefTarget::Region(r.selection),
            })
        })
    }

    /// The elements `selection` names, in the file representation, in libhdf5's order: a
    /// hyperslab's (or the union of its blocks') elements in C order, points in their stored
    /// order. Fails when the selection does not fit the dataset's extent.
    pub fn read_selection_raw(&self, selection: &Selection) -> Result<Vec<u8>> {
        crate::swmr::api(|| {
            let dims: Vec<u64> = self.shape().iter().map(|&d| d as u64).collect();
            selection
                .check_extent(&dims)
                .map_err(|e| Error::Invalid(format!("{}: {e}", self.path())))?;
            let (sel, n) = cache_selection(selection, &dims)?;
            let len = usize::try_from(n)
                .ok()
                .and_then(|n| n.checked_mul(self.element_size()))
                .ok_or_else(|| Error::Invalid(format!("a selection of {n} elements")))?;
            let mut buf = vec![0u8; len];
            if len > 0 {
                h5_core::dataset::read(
                    self.file_shared(),
                    &self.info(),
                    &sel,
                    None,
                    None,
                    &mut buf,
                )?;
            }
            Ok(buf)
        })
    }

    /// The elements `selection` names as `T`, in the order of [`Dataset::read_selection_raw`].
    pub fn read_selection<T: H5Type>(&self, selection: &Selection) -> Result<Vec<T>> {
        crate::swmr::api(|| {
            let raw = self.read_selection_raw(selection)?;
            T::h5_decode_all(self.dtype(), &raw, &DecodeCtx::new(self.file_shared()))
        })
    }
}

/// The chunk cache's form of a stored selection (checked against `dims` already) and its
/// element count: an irregular hyperslab of several blocks becomes the list of its points in C
/// order.
fn cache_selection(s: &Selection, dims: &[u64]) -> Result<(CacheSelection, u64)> {
    let invalid = |e: h5_chunkcache::selection::SelectionError| Error::Invalid(e.to_string());
    let n = s
        .num_elements(dims)
        .ok_or_else(|| Error::Invalid("a selection too large to count".into()))?;
    Ok(match s {
        Selection::None => (CacheSelection::None, 0),
        Selection::All => (CacheSelection::All, n),
        Selection::Points { rank, coords } => (
            CacheSelection::Points(Points::new(*rank, coords.clone()).map_err(invalid)?),
            n,
        ),
        Selection::Regular {
            start,
            stride,
            count,
            block,
        } => (
            CacheSelection::Hyperslab(
                Hyperslab::new(start, stride, count, block).map_err(invalid)?,
            ),
            n,
        ),
        Selection::Blocks { rank, .. } => {
            let boxes = s.boxes();
            if let [(start, end)] = boxes.as_slice() {
                let block: Vec<u64> = start.iter().zip(*end).map(|(a, b)| b - a + 1).collect();
                let ones = vec![1; *rank];
                let h = Hyperslab::new(start, &ones, &ones, &block).map_err(invalid)?;
                return Ok((CacheSelection::Hyperslab(h), n));
            }
            if n > MAX_ENUMERATED {
                return Err(Error::Unsupported(format!(
                    "reading an irregular selection of {n} elements"
                )));
            }
            let mut points: Vec<Vec<u64>> = Vec::with_capacity(n as usize);
            for (start, end) in boxes {
                let mut p = start.to_vec();
                'box_points: loop {
                    points.push(p.clone());
                    for d in (0..*rank).rev() {
                        if p[d] < end[d] {
                            p[d] += 1;
                            continue 'box_points;
                        }
                        p[d] = start[d];
                    }
                    break;
                }
            }
            points.sort_unstable();
            points.dedup();
            let count = points.len() as u64;
            let flat: Vec<u64> = points.into_iter().flatten().collect();
            (
                CacheSelection::Points(Points::new(*rank, flat).map_err(invalid)?),
                count,
            )
        }
    })
}
