//! Object references (class 7, `H5R_OBJECT1`): the referenced object's header address.
//!
//! Written as datatype version 1 with the file's address size (8 bytes), which every libhdf5
//! reads (h5py: `f[ref]`). A null reference is address 0, as libhdf5 writes it.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use h5_core::file::FileShared;
use h5_core::group::{LinkValue, links};
use h5_core::nav::ObjectKind as CoreKind;
use h5_core::object::ObjectHeader;
use h5_format::datatype::{Datatype, ReferenceKind, ReferenceType};

use super::{DecodeCtx, EncodeCtx, H5Type, not_a};
use crate::{Dataset, Error, File, Group, Result};

/// A reference to an object (group or dataset) of the same file: its object header address.
/// Get one with [`Group::reference`] or [`Dataset::reference`]; resolve it with
/// [`File::dereference`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct ObjectRef {
    address: u64,
}

impl ObjectRef {
    /// The reference to the object whose header is at `address` (relative to the superblock).
    pub fn from_address(address: u64) -> Self {
        ObjectRef { address }
    }

    /// The null reference (refers to nothing).
    pub fn null() -> Self {
        ObjectRef { address: 0 }
    }

    /// Whether this is the null reference.
    pub fn is_null(&self) -> bool {
        self.address == 0 || self.address == h5_format::UNDEFINED_ADDRESS
    }

    /// The referenced object header's address.
    pub fn address(&self) -> u64 {
        self.address
    }
}

impl H5Type for ObjectRef {
    fn h5_type() -> Datatype {
        Datatype::Reference(ReferenceType {
            size: 8,
            kind: ReferenceKind::Object,
            encoding_version: 0,
        })
    }
    fn h5_size() -> usize {
        8
    }
    fn h5_encode(&self, out: &mut [u8], _ctx: &mut EncodeCtx<'_>) -> Result<()> {
        let mut w = h5_format::Writer::with_capacity(8);
        w.u64(self.address);
        if out.len() != 8 {
            return Err(Error::Invalid(
                "an object reference field of another size".into(),
            ));
        }
        out.copy_from_slice(w.as_slice());
        Ok(())
    }
    fn h5_decode(dt: &Datatype, bytes: &[u8], ctx: &DecodeCtx<'_>) -> Result<Self> {
        match dt {
            Datatype::Reference(r) if r.kind == ReferenceKind::Object => {
                let mut rd = h5_format::Reader::new(bytes, "object reference", u64::MAX);
                let address = rd.offset(ctx.sizes())?;
                Ok(ObjectRef { address })
            }
            other => Err(not_a(other, "an object reference")),
        }
    }
}

/// An object a reference resolves to.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Object {
    /// A group.
    Group(Group),
    /// A dataset.
    Dataset(Box<Dataset>),
    /// A committed (named) datatype.
    Datatype(crate::NamedDatatype),
}

impl Object {
    /// The object's path (the first one found, breadth first, when it has several).
    pub fn path(&self) -> &str {
        match self {
            Object::Group(g) => g.path(),
            Object::Dataset(d) => d.path(),
            Object::Datatype(t) => t.path(),
        }
    }
}

/// Objects visited at most when looking for a referenced object's name.
const MAX_VISITS: usize = 1 << 20;

/// The path of the object at `target`: a breadth-first walk over the hard links from the root
/// (so the shortest path), visiting each group once.
fn path_of(file: &Arc<FileShared>, target: u64) -> Result<String> {
    let root = file.root_address();
    if target == root {
        return Ok("/".into());
    }
    let mut seen = HashSet::from([root]);
    let mut queue = VecDeque::from([(root, String::new())]);
    while let Some((addr, path)) = queue.pop_front() {
        let oh = ObjectHeader::load(file, addr)?;
        for l in links(file, &oh)? {
            let LinkValue::Hard(child) = l.value else {
                continue;
            };
            let p = format!("{path}/{}", l.name);
            if child == target {
                return Ok(p);
            }
            if seen.len() >= MAX_VISITS {
                return Err(Error::Unsupported(format!(
                    "looking for object {target:#x} in more than {MAX_VISITS} objects"
                )));
            }
            if seen.insert(child)
                && CoreKind::of(&*ObjectHeader::load(file, child)?) == CoreKind::Group
            {
                queue.push_back((child, p));
            }
        }
    }
    Err(Error::NotFound(format!(
        "object {target:#x} (no path leads to it)"
    )))
}

impl File {
    /// The object `r` refers to, opened at its (shortest) path.
    pub fn dereference(&self, r: &ObjectRef) -> Result<Object> {
        if r.is_null() {
            return Err(Error::NotFound("the null reference".into()));
        }
        let file = self.shared();
        let path = path_of(file, r.address)?;
        let oh = ObjectHeader::load(file, r.address)?;
        match CoreKind::of(&oh) {
            CoreKind::Group => Ok(Object::Group(self.group(&path)?)),
            CoreKind::Dataset => Ok(Object::Dataset(Box::new(self.dataset(&path)?))),
            CoreKind::Datatype => Ok(Object::Datatype(self.root()?.named_datatype(&path)?)),
            other => Err(Error::Unsupported(format!(
                "dereferencing a {} at {path}",
                other.name()
            ))),
        }
    }
}

impl Group {
    /// A reference to this group.
    pub fn reference(&self) -> ObjectRef {
        ObjectRef::from_address(self.address())
    }
}

impl Dataset {
    /// A reference to this dataset.
    pub fn reference(&self) -> ObjectRef {
        ObjectRef::from_address(self.address())
    }
}
