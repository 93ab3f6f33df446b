//! Links of a group in its three storage forms: old-style symbol tables, compact link messages
//! and dense storage (a fractal heap of link messages indexed by a v2 B-tree).

use h5_format::btree2::{Record, RecordContext};
use h5_format::message::link::{Link, LinkTarget};
use h5_format::message::{Message, decode_message, kind};
use h5_format::symbol_node::ScratchPad;

use crate::error::Result;
use crate::file::FileShared;
use crate::object::ObjectHeader;
use crate::walk;

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

/// Where a symbol table entry of an old-style group points (soft-link values are in the group's
/// local heap).
fn entry_value(
    file: &FileShared,
    heap: u64,
    e: &h5_format::symbol_node::SymbolTableEntry,
) -> Result<LinkValue> {
    Ok(match e.scratch {
        ScratchPad::SoftLink { link_value_offset } => LinkValue::Soft(text(
            &walk::local_heap_string(file, heap, u64::from(link_value_offset))?,
        )),
        _ => LinkValue::Hard(e.object_header_address),
    })
}

/// Every link of the group whose header is `oh`, sorted by name.
pub fn links(file: &FileShared, oh: &ObjectHeader) -> Result<Vec<LinkEntry>> {
    file.check_open()?;
    if let Some(links) = file.written_links(oh.address) {
        return Ok(links);
    }
    let mut out: Vec<LinkEntry> = Vec::new();
    if let Some(st) = oh.find(|m| match m {
        Message::SymbolTable(s) => Some(*s),
        _ => None,
    }) {
        for (name, e) in walk::symbol_table(file, st.btree_address, st.heap_address)? {
            let value = entry_value(file, st.heap_address, &e)?;
            out.push(LinkEntry {
                name: text(&name),
                creation_order: None,
                value,
            });
        }
    }
    for l in oh.all(|m| match m {
        Message::Link(l) => Some(l.clone()),
        _ => None,
    }) {
        out.push(from_message(&l));
    }
    if let Some(info) = oh.find(|m| match m {
        Message::LinkInfo(i) => Some(*i),
        _ => None,
    }) && info.fractal_heap_address != h5_format::UNDEFINED_ADDRESS
    {
        for m in walk::dense_messages(
            file,
            info.fractal_heap_address,
            info.name_index_address,
            kind::LINK,
            |r| match r {
                Record::LinkName { heap_id, .. } => Some(heap_id.clone()),
                _ => None,
            },
        )? {
            if let Message::Link(l) = m {
                out.push(from_message(&l));
            }
        }
    }
    out.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    Ok(out)
}

/// The link `name` of the group whose header is `oh` (see [`crate::nav::find_link`]).
pub fn find(file: &FileShared, oh: &ObjectHeader, name: &str) -> Result<Option<LinkEntry>> {
    if let Some(link) = file.written_link(oh.address, name) {
        return Ok(link);
    }
    for l in oh.all(|m| match m {
        Message::Link(l) => Some(l.clone()),
        _ => None,
    }) {
        if l.name == name.as_bytes() {
            return Ok(Some(from_message(&l)));
        }
    }
    if let Some(st) = oh.find(|m| match m {
        Message::SymbolTable(s) => Some(*s),
        _ => None,
    }) && let Some(e) =
        walk::symbol_table_find(file, st.btree_address, st.heap_address, name.as_bytes())?
    {
        let value = entry_value(file, st.heap_address, &e)?;
        return Ok(Some(LinkEntry {
            name: name.to_owned(),
            creation_order: None,
            value,
        }));
    }
    if let Some(info) = oh.find(|m| match m {
        Message::LinkInfo(i) => Some(*i),
        _ => None,
    }) && info.fractal_heap_address != h5_format::UNDEFINED_ADDRESS
    {
        let hash = h5_format::checksum::lookup3(name.as_bytes(), 0);
        let cmp = move |r: &Record| match r {
            Record::LinkName { hash: h, .. } => h.cmp(&hash),
            _ => std::cmp::Ordering::Less,
        };
        let records = walk::btree2_find(
            file,
            info.name_index_address,
            RecordContext::new(file.sizes),
            &cmp,
        )?;
        if records.is_empty() {
            return Ok(None);
        }
        let heap = walk::fractal_header(file, info.fractal_heap_address)?;
        for r in records {
            if let Record::LinkName { heap_id, .. } = r {
                let bytes = walk::fractal_object(file, &heap, &heap_id)?;
                if let Message::Link(l) =
                    decode_message(kind::LINK, 0, &bytes, file.sizes, info.fractal_heap_address)?
                    && l.name == name.as_bytes()
                {
                    return Ok(Some(from_message(&l)));
                }
            }
        }
    }
    Ok(None)
}
