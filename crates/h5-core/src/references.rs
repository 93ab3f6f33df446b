//! Reference elements read from a file, resolved to what they refer to: object references
//! (`H5R_OBJECT1`), dataset region references (`H5R_DATASET_REGION1`, their selection in the
//! global heap) and HDF5 1.12 revised references (`H5T_STD_REF`: object, region and attribute,
//! stored inline or in the global heap). Byte layouts: [`h5_format::reference`].

use h5_format::UNDEFINED_ADDRESS;
use h5_format::datatype::{ReferenceKind, ReferenceType};
use h5_format::heap::global::GlobalHeapId;
use h5_format::reference::{RegionObject, RevisedElement, RevisedRef, RevisedTarget};
use h5_format::selection::Selection;

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::walk;

/// What a reference refers to in its object.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RefTarget {
    /// The object itself.
    Object,
    /// Elements of a dataset.
    Region(Selection),
    /// An attribute of the object, by name.
    Attribute(String),
}

/// A (non-null) reference read from a file.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Reference {
    /// The referenced object's header address (relative to the superblock of `file`'s file).
    pub object: u64,
    /// The file the object is in, for a revised reference to another file (`None`: the file
    /// the reference was read from).
    pub file: Option<String>,
    /// What of the object it refers to.
    pub target: RefTarget,
}

impl Reference {
    /// A reference to the object at `object` in the same file.
    pub fn object(object: u64) -> Reference {
        Reference {
            object,
            file: None,
            target: RefTarget::Object,
        }
    }

    /// The selection of a region reference.
    pub fn selection(&self) -> Option<&Selection> {
        match &self.target {
            RefTarget::Region(s) => Some(s),
            _ => None,
        }
    }
}

/// Whether `a` is the address of no object (0 or undefined), as null references store it.
fn is_null_address(a: u64) -> bool {
    a == 0 || a == UNDEFINED_ADDRESS
}

/// Decodes one reference element of type `rt` (`raw`: the element's bytes in the file), reading
/// the global heap object it points at when it has one; `None` for a null reference.
pub fn decode(file: &FileShared, rt: &ReferenceType, raw: &[u8]) -> Result<Option<Reference>> {
    let sizes = file.sizes;
    match rt.kind {
        ReferenceKind::Object => {
            let mut r = h5_format::Reader::new(raw, "object reference", UNDEFINED_ADDRESS);
            let a = r.offset(sizes)?;
            Ok((!is_null_address(a)).then(|| Reference::object(a)))
        }
        ReferenceKind::DatasetRegion => {
            let id = GlobalHeapId::decode(raw, sizes, UNDEFINED_ADDRESS)?;
            if is_null_address(id.collection_address) {
                return Ok(None);
            }
            let bytes = walk::global_object(file, id)?;
            let region = RegionObject::decode(&bytes, sizes, id.collection_address)?;
            Ok(Some(Reference {
                object: region.object,
                file: None,
                target: RefTarget::Region(region.selection),
            }))
        }
        ReferenceKind::Object2 | ReferenceKind::DatasetRegion2 | ReferenceKind::Attribute => {
            let revised = match RevisedElement::decode(raw, sizes, UNDEFINED_ADDRESS)? {
                RevisedElement::Null => return Ok(None),
                RevisedElement::Inline(b) => RevisedRef::decode(&b, UNDEFINED_ADDRESS)?,
                RevisedElement::Heap { header, len, id } => {
                    if is_null_address(id.collection_address) {
                        return Ok(None);
                    }
                    let blob = walk::global_object(file, id)?;
                    let rest = usize::try_from(len)
                        .ok()
                        .and_then(|n| blob.get(..n))
                        .ok_or_else(|| {
                            Error::Format(h5_format::FormatError::Corrupted {
                                structure: "revised reference",
                                address: id.collection_address,
                                reason: format!(
                                    "{len} bytes named, the heap object holds {}",
                                    blob.len()
                                ),
                            })
                        })?;
                    let mut whole = header.to_vec();
                    whole.extend_from_slice(rest);
                    RevisedRef::decode(&whole, id.collection_address)?
                }
            };
            Ok(Some(from_revised(revised)))
        }
    }
}

/// The [`Reference`] a decoded revised reference is.
pub fn from_revised(r: RevisedRef) -> Reference {
    Reference {
        object: r.object,
        file: r.file,
        target: match r.target {
            RevisedTarget::Object => RefTarget::Object,
            RevisedTarget::Region { selection, .. } => RefTarget::Region(selection),
            RevisedTarget::Attribute(name) => RefTarget::Attribute(name),
        },
    }
}
