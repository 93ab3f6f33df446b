//! Path resolution: from a group, follow the components of a path through hard, soft and
//! external links to an object.

use std::sync::Arc;

use h5_format::message::Message;
use h5_io::{FileStorage, OpenMode};

use crate::error::{Error, Result};
use crate::file::{CacheSettings, FileShared};
use crate::group::{LinkEntry, LinkValue};
use crate::object::ObjectHeader;

/// Soft and external links followed in one resolution before giving up (libhdf5's default
/// limit is 16 soft links; 40 covers nested externals too).
pub const MAX_LINK_TRAVERSALS: usize = 40;

/// What an object header describes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ObjectKind {
    /// A group.
    Group,
    /// A dataset.
    Dataset,
    /// A named (committed) datatype.
    Datatype,
    /// Something else.
    Unknown,
}

impl ObjectKind {
    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Group => "group",
            ObjectKind::Dataset => "dataset",
            ObjectKind::Datatype => "datatype",
            ObjectKind::Unknown => "unknown object",
        }
    }

    /// The kind of the object with header `oh`.
    pub fn of(oh: &ObjectHeader) -> ObjectKind {
        let has = |f: fn(&Message) -> bool| oh.messages.iter().any(|m| f(&m.message));
        if has(|m| matches!(m, Message::Layout(_))) {
            ObjectKind::Dataset
        } else if has(|m| {
            matches!(
                m,
                Message::SymbolTable(_)
                    | Message::LinkInfo(_)
                    | Message::Link(_)
                    | Message::GroupInfo(_)
            )
        }) {
            ObjectKind::Group
        } else if has(|m| matches!(m, Message::Datatype(_))) {
            ObjectKind::Datatype
        } else {
            ObjectKind::Unknown
        }
    }
}

/// A resolved object: its file and header.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The file holding it (another file after an external link).
    pub file: Arc<FileShared>,
    /// Its object header.
    pub header: Arc<ObjectHeader>,
    /// Its absolute path within `file` as resolved.
    pub path: String,
}

/// Resolves `path` (absolute, or relative to the group `start` at `start_path`) in `file`.
pub fn resolve(
    file: &Arc<FileShared>,
    start: u64,
    start_path: &str,
    path: &str,
) -> Result<Resolved> {
    file.check_open()?;
    let mut budget = MAX_LINK_TRAVERSALS;
    resolve_inner(file, start, start_path, path, &mut budget)
}

/// `name` appended to the group path `base`.
pub fn join(base: &str, name: &str) -> String {
    // One allocation of the final length (no formatting machinery: every open by name makes
    // one path).
    let sep = if base.ends_with('/') { "" } else { "/" };
    let len = base
        .len()
        .saturating_add(sep.len())
        .saturating_add(name.len());
    let mut out = String::with_capacity(len);
    out.push_str(base);
    out.push_str(sep);
    out.push_str(name);
    out
}

fn resolve_inner(
    file: &Arc<FileShared>,
    start: u64,
    start_path: &str,
    path: &str,
    budget: &mut usize,
) -> Result<Resolved> {
    let (mut addr, mut here) = if path.starts_with('/') {
        (file.root_address(), "/".to_owned())
    } else {
        (start, start_path.to_owned())
    };
    let mut file = Arc::clone(file);
    let parts = path.split('/').filter(|p| !p.is_empty() && *p != ".");
    for name in parts {
        let oh = ObjectHeader::load_group(&file, addr)?;
        if ObjectKind::of(&oh) != ObjectKind::Group {
            return Err(Error::WrongKind {
                path: here,
                expected: "group",
                found: ObjectKind::of(&oh).name(),
            });
        }
        let entry =
            find_link(&file, &oh, name)?.ok_or_else(|| Error::NotFound(join(&here, name)))?;
        let child = join(&here, name);
        // The group's path, kept for a soft link relative to it (a move, not a copy).
        let parent = std::mem::replace(&mut here, child);
        match entry.value {
            LinkValue::Hard(a) => addr = a,
            LinkValue::Soft(target) => {
                *budget = budget.checked_sub(1).ok_or_else(|| Error::TooManyLinks {
                    path: here.clone(),
                    kind: "soft",
                })?;
                let r = resolve_inner(&file, addr_of(&file, &parent)?, &parent, &target, budget)?;
                file = r.file;
                addr = r.header.address;
                here = r.path;
            }
            LinkValue::External { file: name, path } => {
                *budget = budget.checked_sub(1).ok_or_else(|| Error::TooManyLinks {
                    path: here.clone(),
                    kind: "external",
                })?;
                let other = open_external(&file, &name)?;
                let root = other.root_address();
                let r = resolve_inner(&other, root, "/", &path, budget)?;
                file = r.file;
                addr = r.header.address;
                here = r.path;
            }
            LinkValue::UserDefined(k) => {
                return Err(Error::Unsupported(format!(
                    "{here}: user-defined link type {k}"
                )));
            }
        }
    }
    let header = ObjectHeader::load(&file, addr)?;
    Ok(Resolved {
        file,
        header,
        path: here,
    })
}

/// The address of the group at absolute `path` (for soft links relative to a parent).
fn addr_of(file: &Arc<FileShared>, path: &str) -> Result<u64> {
    if path == "/" {
        return Ok(file.root_address());
    }
    let mut budget = MAX_LINK_TRAVERSALS;
    Ok(
        resolve_inner(file, file.root_address(), "/", path, &mut budget)?
            .header
            .address,
    )
}

/// The link `name` of the group `oh`, found through the group's index where it has one (the
/// v1 B-tree of an old-style group, the name-hash v2 B-tree of dense storage) so that opening
/// one member of a large group reads only the blocks on its path.
pub fn find_link(file: &FileShared, oh: &ObjectHeader, name: &str) -> Result<Option<LinkEntry>> {
    crate::group::find(file, oh, name)
}

/// Opens the file an external link names, relative to the linking file's directory.
fn open_external(from: &FileShared, name: &str) -> Result<Arc<FileShared>> {
    let path = match &from.dir {
        Some(d) if !std::path::Path::new(name).is_absolute() => d.join(name),
        _ => std::path::PathBuf::from(name),
    };
    let storage = FileStorage::open(&path, OpenMode::ReadOnly)?;
    let dir = path.parent().map(std::path::Path::to_path_buf);
    let file = FileShared::open(Arc::new(storage), &CacheSettings::default(), dir)?;
    file.set_path(&path);
    Ok(file)
}
