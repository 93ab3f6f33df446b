//! Links of a group in its three storage forms: old-style symbol tables, compact link messages
//! and dense storage (a fractal heap of link messages indexed by a v2 B-tree).

use h5_format::message::Message;
use h5_format::message::link::{Link, LinkTarget};

use crate::access::Reading;
use crate::error::Result;
use crate::file::FileShared;
use crate::object::ObjectHeader;
use crate::stab::{StabLink, SymbolTable, Target};

/// Where a link points.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum LinkValue {
    /// An object in this file (relative object header address).
    Hard(u64),
    /// A path in this file.
    Soft(String),
    /// An object in another file.
    External {
        /// The other file's name.
        file: String,
        /// The object's path in it.
        path: String,
    },
    /// A user-defined link type this library does not follow.
    UserDefined(u8),
}

/// One link of a group.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct LinkEntry {
    /// The link's name.
    pub name: String,
    /// Creation order, when tracked.
    pub creation_order: Option<i64>,
    /// Its target.
    pub value: LinkValue,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn from_message(l: &Link) -> LinkEntry {
    LinkEntry {
        name: text(&l.name),
        creation_order: l.creation_order,
        value: match &l.target {
            LinkTarget::Hard(a) => LinkValue::Hard(*a),
            LinkTarget::Soft(p) => LinkValue::Soft(text(p)),
            LinkTarget::External { file, path, .. } => LinkValue::External {
                file: text(file),
                path: text(path),
            },
            LinkTarget::UserDefined { kind, .. } => LinkValue::UserDefined(*kind),
        },
    }
}

/// An old-style group's link as the reader reports it.
fn from_stab(l: StabLink) -> LinkEntry {
    LinkEntry {
        name: text(&l.name),
        creation_order: None,
        value: match l.target {
            Target::Soft(p) => LinkValue::Soft(text(&p)),
            Target::Hard { addr, .. } => LinkValue::Hard(addr),
        },
    }
}

/// The header `oh` read again when the file is writable (its headers change after a handle
/// read them); `None`: `oh` is current.
pub(crate) fn reloaded(
    file: &FileShared,
    oh: &ObjectHeader,
) -> Result<Option<std::sync::Arc<ObjectHeader>>> {
    if file.is_writable() {
        ObjectHeader::load(file, oh.address).map(Some)
    } else {
        Ok(None)
    }
}

/// Every link of the group whose header is `oh`, sorted by name.
pub fn links(file: &FileShared, oh: &ObjectHeader) -> Result<Vec<LinkEntry>> {
    file.check_open()?;
    let fresh = reloaded(file, oh)?;
    let oh = fresh.as_deref().unwrap_or(oh);
    let mut out: Vec<LinkEntry> = Vec::new();
    if let Some(st) = SymbolTable::of(oh) {
        let links = st.links(&mut file.cache()?, file.group_ks())?;
        out.extend(links.into_iter().map(from_stab));
    }
    for l in oh.all(|m| match m {
        Message::Link(l) => Some(l.clone()),
        _ => None,
    }) {
        out.push(from_message(&l));
    }
    if let Some(d) = oh
        .find(|m| match m {
            Message::LinkInfo(i) => Some(*i),
            _ => None,
        })
        .and_then(|i| crate::write::links::dense_of(&i))
    {
        for l in crate::write::links::dense_list(&mut Reading(file), &d)? {
            out.push(from_message(&l));
        }
    }
    // Names are unique in a group: an unstable sort gives the same order, faster.
    out.sort_unstable_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    Ok(out)
}

/// The link `name` of the group whose header is `oh` (see [`crate::nav::find_link`]).
pub fn find(file: &FileShared, oh: &ObjectHeader, name: &str) -> Result<Option<LinkEntry>> {
    let fresh = reloaded(file, oh)?;
    let oh = fresh.as_deref().unwrap_or(oh);
    for l in oh.all(|m| match m {
        Message::Link(l) => Some(l.clone()),
        _ => None,
    }) {
        if l.name == name.as_bytes() {
            return Ok(Some(from_message(&l)));
        }
    }
    if let Some(st) = SymbolTable::of(oh) {
        let found = st.find(&mut file.cache()?, file.group_ks(), name.as_bytes())?;
        return Ok(found.map(from_stab));
    }
    if let Some(d) = oh
        .find(|m| match m {
            Message::LinkInfo(i) => Some(*i),
            _ => None,
        })
        .and_then(|i| crate::write::links::dense_of(&i))
        && let Some(l) = crate::write::links::dense_find(&mut Reading(file), &d, name)?
    {
        return Ok(Some(from_message(&l)));
    }
    Ok(None)
}
