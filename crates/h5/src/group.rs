//! Groups and links.

use std::sync::Arc;

use h5_core::file::FileShared;
use h5_core::group::{LinkValue, links};
use h5_core::nav::{self, ObjectKind as CoreKind};
use h5_core::object::ObjectHeader;

use crate::{Attribute, Dataset, Error, Result};

/// What an object is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ObjectKind {
    /// A group.
    Group,
    /// A dataset.
    Dataset,
    /// A named datatype.
    Datatype,
    /// Something this library does not know.
    Unknown,
}

impl From<CoreKind> for ObjectKind {
    fn from(k: CoreKind) -> Self {
        match k {
            CoreKind::Group => ObjectKind::Group,
            CoreKind::Dataset => ObjectKind::Dataset,
            CoreKind::Datatype => ObjectKind::Datatype,
            CoreKind::Unknown => ObjectKind::Unknown,
        }
    }
}

/// Where a link points.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum LinkKind {
    /// An object of this file.
    Hard,
    /// A path in this file.
    Soft(String),
    /// An object of another file.
    External {
        /// The file.
        file: String,
        /// The path in it.
        path: String,
    },
    /// A user-defined link type.
    UserDefined(u8),
}

/// A link of a group.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Link {
    /// The link's name.
    pub name: String,
    /// Creation order, when the group tracks it.
    pub creation_order: Option<i64>,
    /// Its kind and target.
    pub kind: LinkKind,
}

/// A group.
#[derive(Clone, Debug)]
pub struct Group {
    file: Arc<FileShared>,
    header: Arc<ObjectHeader>,
    path: String,
}

impl Group {
    pub(crate) fn open(file: &Arc<FileShared>, path: &str) -> Result<Group> {
        let r = nav::resolve(file, file.root_address(), "/", path)?;
        let kind = CoreKind::of(&r.header);
        if kind != CoreKind::Group {
            return Err(Error::WrongKind {
                path: path.to_owned(),
                expected: "group",
                found: kind.name(),
            });
        }
        Ok(Group {
            file: r.file,
            header: r.header,
            path: r.path,
        })
    }

    pub(crate) fn file_shared(&self) -> &Arc<FileShared> {
        &self.file
    }

    /// The object header's address (relative to the superblock): the group's identity.
    pub fn address(&self) -> u64 {
        self.header.address
    }

    /// The group's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    fn join(&self, name: &str) -> String {
        if name.starts_with('/') {
            name.to_owned()
        } else if self.path.ends_with('/') {
            format!("{}{name}", self.path)
        } else {
            format!("{}/{name}", self.path)
        }
    }

    /// The links, sorted by name.
    pub fn links(&self) -> Result<Vec<Link>> {
        crate::swmr::api(|| {
            Ok(links(&self.file, &self.header)?
                .into_iter()
                .map(|l| Link {
                    name: l.name,
                    creation_order: l.creation_order,
                    kind: match l.value {
                        LinkValue::Hard(_) => LinkKind::Hard,
                        LinkValue::Soft(p) => LinkKind::Soft(p),
                        LinkValue::External { file, path } => LinkKind::External { file, path },
                        LinkValue::UserDefined(k) => LinkKind::UserDefined(k),
                    },
                })
                .collect())
        })
    }

    /// The members' names, sorted.
    pub fn member_names(&self) -> Result<Vec<String>> {
        crate::swmr::api(|| Ok(self.links()?.into_iter().map(|l| l.name).collect()))
    }

    /// The kind of the object `name` (relative to this group) leads to.
    pub fn kind_of(&self, name: &str) -> Result<ObjectKind> {
        crate::swmr::api(|| {
            let r = nav::resolve(&self.file, self.header.address, &self.path, name)?;
            Ok(CoreKind::of(&r.header).into())
        })
    }

    /// The group at `name` (relative or absolute).
    pub fn group(&self, name: &str) -> Result<Group> {
        crate::swmr::api(|| {
            let r = nav::resolve(&self.file, self.header.address, &self.path, name)?;
            let kind = CoreKind::of(&r.header);
            if kind != CoreKind::Group {
                return Err(Error::WrongKind {
                    path: self.join(name),
                    expected: "group",
                    found: kind.name(),
                });
            }
            Ok(Group {
                file: r.file,
                header: r.header,
                path: r.path,
            })
        })
    }

    /// The dataset at `name` (relative or absolute).
    pub fn dataset(&self, name: &str) -> Result<Dataset> {
        crate::swmr::api(|| {
            let r = nav::resolve(&self.file, self.header.address, &self.path, name)?;
            Dataset::from_resolved(r)
        })
    }

    /// The attributes, sorted by name.
    pub fn attrs(&self) -> Result<Vec<Attribute>> {
        crate::swmr::api(|| Attribute::all(&self.file, &self.header))
    }

    /// The attribute `name`.
    pub fn attr(&self, name: &str) -> Result<Attribute> {
        crate::swmr::api(|| Attribute::named(&self.file, &self.header, name, &self.path))
    }

    /// The attributes' names, sorted.
    pub fn attr_names(&self) -> Result<Vec<String>> {
        Ok(self
            .attrs()?
            .into_iter()
            .map(|a| a.name().to_owned())
            .collect())
    }
}
