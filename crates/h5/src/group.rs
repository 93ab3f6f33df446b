//! Groups and links: members, navigation, and walks over the tree.

use std::collections::{HashMap, HashSet};
use std::ops::{ControlFlow, Deref};
use std::sync::Arc;

use h5_core::file::FileShared;
use h5_core::group::{LinkEntry, LinkValue, links};
use h5_core::nav::{self, ObjectKind as CoreKind, Resolved};
use h5_core::object::ObjectHeader;

use crate::{Dataset, Error, Location, Result};

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

impl Link {
    fn from_entry(l: LinkEntry) -> (Link, Option<u64>) {
        let (kind, address) = match l.value {
            LinkValue::Hard(a) => (LinkKind::Hard, Some(a)),
            LinkValue::Soft(p) => (LinkKind::Soft(p), None),
            LinkValue::External { file, path } => (LinkKind::External { file, path }, None),
            LinkValue::UserDefined(k) => (LinkKind::UserDefined(k), None),
        };
        let link = Link {
            name: l.name,
            creation_order: l.creation_order,
            kind,
        };
        (link, address)
    }
}

/// One link met by [`Group::visit`] and [`Group::walk`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TreeEntry {
    /// The link's path relative to the group walked (`a/b/c`), as h5py's `visit` names it.
    pub path: String,
    /// The link itself: name, creation order, kind and target.
    pub link: Link,
    /// What a hard link leads to (`None` for soft, external and user-defined links, which the
    /// walk does not follow).
    pub object: Option<ObjectKind>,
    /// The object header address a hard link leads to.
    pub address: Option<u64>,
}

/// A group.
///
/// Dereferences to its [`Location`] (path, address, attributes). The handle keeps only the
/// group's address: members and attributes are read from the file's metadata cache at each
/// call, so changes made through other handles are seen. Cheap to clone; `Send + Sync`.
///
/// ```
/// # fn main() -> h5::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let file = h5::File::create(dir.path().join("groups.h5"))?;
/// let run = file.create_group("runs/7")?;
/// run.new_dataset::<f32>().shape([4]).create("t")?;
/// assert!(file.link_exists("runs/7/t")?);
/// assert_eq!(file.group("runs")?.len()?, 1);
/// let paths: Vec<String> = file.walk()?.into_iter().map(|e| e.path).collect();
/// assert_eq!(paths, ["runs", "runs/7", "runs/7/t"]);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Group {
    loc: Location,
}

impl Deref for Group {
    type Target = Location;

    fn deref(&self) -> &Location {
        &self.loc
    }
}

impl Group {
    /// The root group of `file` (no I/O).
    pub(crate) fn root(file: &Arc<FileShared>) -> Group {
        Group {
            loc: Location::new(Arc::clone(file), file.root_address(), "/".to_owned()),
        }
    }

    pub(crate) fn from_resolved(r: Resolved, asked: &str) -> Result<Group> {
        let kind = CoreKind::of(&r.header);
        if kind != CoreKind::Group {
            return Err(Error::WrongKind {
                path: asked.to_owned(),
                expected: "group",
                found: kind.name(),
            });
        }
        Ok(Group {
            loc: Location::new(r.file, r.header.address, r.path),
        })
    }

    /// Resolves `name` (relative to this group, or absolute) through hard, soft and external
    /// links.
    fn resolve(&self, name: &str) -> Result<Resolved> {
        let r = nav::resolve(self.file_shared(), self.address(), self.path(), name);
        self.ctx(r)
    }

    fn link_entries(&self) -> Result<Vec<LinkEntry>> {
        let oh = self.header()?;
        self.ctx(links(self.file_shared(), &oh))
    }

    /// The links, sorted by name.
    pub fn links(&self) -> Result<Vec<Link>> {
        crate::swmr::api(|| {
            Ok(self
                .link_entries()?
                .into_iter()
                .map(|l| Link::from_entry(l).0)
                .collect())
        })
    }

    /// The members' names, sorted.
    pub fn member_names(&self) -> Result<Vec<String>> {
        crate::swmr::api(|| Ok(self.link_entries()?.into_iter().map(|l| l.name).collect()))
    }

    /// The number of links in the group.
    pub fn len(&self) -> Result<usize> {
        crate::swmr::api(|| Ok(self.link_entries()?.len()))
    }

    /// Whether the group has no links.
    pub fn is_empty(&self) -> Result<bool> {
        crate::swmr::api(|| Ok(self.len()? == 0))
    }

    /// Whether a link `path` exists (relative to this group or absolute; `a/b/c` when `a` and
    /// `a/b` lead to groups). The link's target need not exist (a dangling soft link exists).
    pub fn link_exists(&self, path: &str) -> Result<bool> {
        crate::swmr::api(|| {
            let path = path.trim_end_matches('/');
            let (parent, name) = match path.rsplit_once('/') {
                Some(("", name)) => (Group::root(self.file_shared()), name),
                Some((dir, name)) => match self.group(dir) {
                    Ok(g) => (g, name),
                    Err(Error::NotFound(_) | Error::WrongKind { .. }) => return Ok(false),
                    Err(e) => return Err(e),
                },
                None => (self.clone(), path),
            };
            if name.is_empty() || name == "." {
                return Ok(true);
            }
            let oh = parent.header()?;
            let found = nav::find_link(parent.file_shared(), &oh, name);
            Ok(parent.ctx(found)?.is_some())
        })
    }

    /// The kind of the object `name` (relative to this group) leads to.
    pub fn kind_of(&self, name: &str) -> Result<ObjectKind> {
        crate::swmr::api(|| Ok(CoreKind::of(&self.resolve(name)?.header).into()))
    }

    /// The group at `name` (relative or absolute).
    pub fn group(&self, name: &str) -> Result<Group> {
        crate::swmr::api(|| Group::from_resolved(self.resolve(name)?, &self.join(name)))
    }

    /// The dataset at `name` (relative or absolute).
    pub fn dataset(&self, name: &str) -> Result<Dataset> {
        crate::swmr::api(|| Dataset::from_resolved(self.resolve(name)?))
    }

    /// The members that are groups (through any kind of link; dangling links are skipped), in
    /// name order.
    pub fn groups(&self) -> Result<Vec<Group>> {
        crate::swmr::api(|| self.members_of(CoreKind::Group, |r| Group::from_resolved(r, "")))
    }

    /// The members that are datasets (through any kind of link; dangling links are skipped),
    /// in name order.
    pub fn datasets(&self) -> Result<Vec<Dataset>> {
        crate::swmr::api(|| self.members_of(CoreKind::Dataset, Dataset::from_resolved))
    }

    fn members_of<T>(
        &self,
        kind: CoreKind,
        open: impl Fn(Resolved) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        for name in self.member_names()? {
            let r = match self.resolve(&name) {
                Ok(r) => r,
                Err(Error::NotFound(_)) => continue,
                Err(e) => return Err(e),
            };
            if CoreKind::of(&r.header) == kind {
                out.push(open(r)?);
            }
        }
        Ok(out)
    }

    /// Calls `f` with every link below this group, depth first in name order (a group's
    /// links right after the link to it), until `f` returns [`ControlFlow::Break`]. Hard links
    /// to groups are followed, each group once (a group reached again through another hard
    /// link is reported but not entered again, so cycles end); soft and external links are
    /// reported, not followed.
    pub fn visit(&self, mut f: impl FnMut(&TreeEntry) -> ControlFlow<()>) -> Result<()> {
        crate::swmr::api(|| {
            let mut kinds: HashMap<u64, CoreKind> =
                HashMap::from([(self.address(), CoreKind::Group)]);
            let mut entered = HashSet::from([self.address()]);
            // Depth first on an explicit stack of entries still to report: a group's entries go
            // on top of it, reversed so that the first name comes out first.
            let mut pending = self.ctx(self.entries_below(self.address(), "", &mut kinds))?;
            pending.reverse();
            while let Some(entry) = pending.pop() {
                if f(&entry).is_break() {
                    return Ok(());
                }
                if let (Some(a), Some(ObjectKind::Group)) = (entry.address, entry.object)
                    && entered.insert(a)
                {
                    let prefix = format!("{}/", entry.path);
                    let below = self.ctx(self.entries_below(a, &prefix, &mut kinds))?;
                    pending.extend(below.into_iter().rev());
                }
            }
            Ok(())
        })
    }

    /// The links of the group at `addr` as walk entries named `prefix` + name; `kinds` caches
    /// what each object header address holds.
    fn entries_below(
        &self,
        addr: u64,
        prefix: &str,
        kinds: &mut HashMap<u64, CoreKind>,
    ) -> Result<Vec<TreeEntry>> {
        let file = self.file_shared();
        let oh = ObjectHeader::load(file, addr)?;
        let mut out = Vec::new();
        for l in links(file, &oh)? {
            let (link, address) = Link::from_entry(l);
            let object = match address {
                Some(a) => Some(match kinds.get(&a) {
                    Some(k) => *k,
                    None => {
                        let k = CoreKind::of(&*ObjectHeader::load(file, a)?);
                        kinds.insert(a, k);
                        k
                    }
                }),
                None => None,
            };
            out.push(TreeEntry {
                path: format!("{prefix}{}", link.name),
                link,
                object: object.map(ObjectKind::from),
                address,
            });
        }
        Ok(out)
    }

    /// Every link below this group, in the order [`Group::visit`] meets them.
    pub fn walk(&self) -> Result<Vec<TreeEntry>> {
        crate::swmr::api(|| {
            let mut out = Vec::new();
            self.visit(|e| {
                out.push(e.clone());
                ControlFlow::Continue(())
            })?;
            Ok(out)
        })
    }
}
