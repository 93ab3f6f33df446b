//! Attributes changed in place. Version 1 headers keep every attribute as a header message;
//! version 2 headers keep them compact (attribute messages, each carrying its creation order
//! when the header tracks it) or dense (a fractal heap of attribute messages indexed by name
//! and, when indexed, by creation order; see [`crate::dense`]), the attribute info message
//! pointing at the dense storage. A change touches only what it changes: one header message,
//! or one heap object and one record per index.
//!
//! libhdf5's phase changes: the attribute that would make an object hold more than its
//! `max_compact` (8) compact attributes, or whose message does not fit a header message, moves
//! every attribute (in header order, with its creation order) to a new dense storage; a
//! removal that leaves fewer than `min_dense` (6) attributes moves them back to header messages
//! (when each fits one) and deletes the dense storage. A replaced attribute keeps its creation
//! order; a dense one is rewritten in place when its message keeps its length.

use h5_format::UNDEFINED_ADDRESS;
use h5_format::message::attribute_info::AttributeInfo;
use h5_format::message::{Message, kind};

use crate::access::{Reading, Session};
use crate::btree2::NamedIn;
use crate::dense::Dense;
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::object::{ObjectHeader, StoredMessage};
use crate::write::ohdr;

/// libhdf5's default largest number of attributes kept in the object header.
pub(crate) const MAX_COMPACT: usize = 8;
/// libhdf5's default smallest number of attributes kept dense.
pub(crate) const MIN_DENSE: usize = 6;

/// libhdf5's creation order of attributes whose object does not track it
/// (`H5O_MAX_CRT_ORDER_IDX`).
const UNTRACKED_ORDER: u64 = 65_535;

/// The largest message body a header message holds (its size field is 16 bits).
pub(crate) const MAX_MESSAGE: usize = 65_535;

/// The attribute info message of an object whose attributes are dense, or which tracks their
/// creation order; addresses undefined until laid out.
pub(crate) fn empty_info(tracked: bool, indexed: bool) -> AttributeInfo {
    AttributeInfo {
        creation_order_tracked: tracked,
        creation_order_indexed: tracked && indexed,
        max_creation_index: tracked.then_some(0),
        fractal_heap_address: UNDEFINED_ADDRESS,
        name_index_address: UNDEFINED_ADDRESS,
        creation_order_index_address: (tracked && indexed).then_some(UNDEFINED_ADDRESS),
    }
}

/// What a new version 2 header needs to track attribute creation order: its flags and the
/// attribute info message libhdf5 puts there from the start (`None`: not tracked).
pub(crate) fn header_parts(
    file: &FileShared,
    tracked: bool,
    indexed: bool,
) -> (u8, Option<crate::object::StoredMessage>) {
    use h5_format::object_header::header_flags;
    if !tracked {
        return (0, None);
    }
    let mut flags = header_flags::ATTR_CREATION_ORDER_TRACKED;
    if indexed {
        flags |= header_flags::ATTR_CREATION_ORDER_INDEXED;
    }
    let body = empty_info(tracked, indexed).encode(file.sizes);
    (flags, Some(ohdr::message(kind::ATTRIBUTE_INFO, 0, body)))
}

/// The attribute `m` holds if it is an attribute message named `name`.
pub(crate) fn attribute_named(
    m: &crate::object::StoredMessage,
    name: &str,
    sizes: h5_format::Sizes,
    obj: u64,
) -> Option<h5_format::message::attribute::AttributeMessage> {
    if m.kind != kind::ATTRIBUTE {
        return None;
    }
    match h5_format::message::decode_message(kind::ATTRIBUTE, 0, &m.body, sizes, obj) {
        Ok(Message::Attribute(a)) if a.name == name => Some(a),
        _ => None,
    }
}

/// The dense attribute storage an attribute info message points at.
pub(crate) fn dense_of(info: &AttributeInfo) -> Option<Dense> {
    Dense::at(
        NamedIn::Attributes,
        info.fractal_heap_address,
        info.name_index_address,
        info.creation_order_index_address,
    )
}

fn info_of(oh: &ObjectHeader) -> Option<AttributeInfo> {
    oh.find(|m| match m {
        Message::AttributeInfo(i) => Some(*i),
        _ => None,
    })
}

/// The object's attribute phase change (its header's, else libhdf5's defaults).
fn phase_change(file: &FileShared, obj: u64) -> Result<(usize, usize)> {
    let first: std::sync::Arc<crate::object::FirstChunkImage> = file.load(
        h5_metacache::MetadataKind::ObjectHeader,
        obj,
        crate::object::first_chunk_load(obj),
    )?;
    Ok(match first.prefix.attribute_phase_change {
        Some(p) => (usize::from(p.max_compact), usize::from(p.min_dense)),
        None => (MAX_COMPACT, MIN_DENSE),
    })
}

fn decode_attribute(
    body: &[u8],
    sizes: h5_format::Sizes,
    obj: u64,
) -> Result<h5_format::message::attribute::AttributeMessage> {
    match h5_format::message::decode_message(kind::ATTRIBUTE, 0, body, sizes, obj)? {
        Message::Attribute(a) => Ok(a),
        _ => Err(Error::Unsupported(
            "a dense attribute record naming another kind of message".into(),
        )),
    }
}

/// Writes the attribute info message `info` into the header at `obj` (in place: its length
/// never changes), adding it if the header has none.
fn write_info(file: &FileShared, obj: u64, info: &AttributeInfo) -> Result<()> {
    let body = info.encode(file.sizes);
    if ohdr::replace_in_place(file, obj, kind::ATTRIBUTE_INFO, &body)? {
        return Ok(());
    }
    ohdr::update(file, obj, |msgs| {
        let mut found = false;
        for m in msgs.iter_mut().filter(|m| m.kind == kind::ATTRIBUTE_INFO) {
            m.body = body.clone();
            found = true;
        }
        if !found {
            msgs.push(ohdr::message(kind::ATTRIBUTE_INFO, 0, body));
        }
        Ok(())
    })
}

/// The next creation order of a tracking object (advancing the info's maximum).
fn next_order(info: &mut AttributeInfo) -> Result<u64> {
    let next = info.max_creation_index.unwrap_or(0);
    info.max_creation_index = Some(next.checked_add(1).ok_or_else(|| {
        Error::Unsupported("more than 65535 attributes created on one object".into())
    })?);
    Ok(u64::from(next))
}

/// Stores the encoded attribute message `body` of the attribute `name` on the object at `obj`,
/// replacing one of that name: in the object header (version 1 headers always; version 2 while
/// the object has at most its `max_compact` attributes that fit header messages), else in the
/// object's dense storage.
pub(crate) fn store(file: &FileShared, obj: u64, name: &str, body: Vec<u8>) -> Result<()> {
    let bounds = file.bounds();
    let sizes = file.sizes;
    let same = |m: &StoredMessage| attribute_named(m, name, sizes, obj).is_some();
    let oh = ObjectHeader::load(file, obj)?;
    if !bounds.new_style() || oh.version == 1 {
        if body.len() > 65_000 {
            return Err(Error::Unsupported(format!(
                "attribute {name} of {} bytes: the earliest format keeps attributes in the \
                     object header (use format bounds V18 or newer)",
                body.len()
            )));
        }
        return ohdr::update(file, obj, |msgs| {
            msgs.retain(|m| !same(m));
            msgs.push(ohdr::message(kind::ATTRIBUTE, 0, body));
            Ok(())
        });
    }
    let mut info = info_of(&oh);
    if let Some(d) = info.as_ref().and_then(dense_of) {
        let existing = d.find(&mut Reading(file), name.as_bytes())?;
        let mut s = Session::new(file)?;
        match existing {
            Some(st) if st.body.len() == body.len() => {
                d.rewrite(&mut s, name.as_bytes(), &body)?;
            }
            Some(st) => {
                d.remove(&mut s, name.as_bytes())?;
                d.insert(&mut s, name.as_bytes(), st.order, 0, &body)?;
            }
            None => {
                let tracked = info.is_some_and(|i| i.creation_order_tracked);
                let order = match info.as_mut() {
                    Some(i) if tracked => next_order(i)?,
                    _ => UNTRACKED_ORDER,
                };
                d.insert(&mut s, name.as_bytes(), order, 0, &body)?;
                drop(s);
                if let (true, Some(i)) = (tracked, info) {
                    write_info(file, obj, &i)?;
                }
            }
        }
        return Ok(());
    }
    // Compact while the object has fewer than max_compact attributes and the message fits a
    // header message; otherwise every attribute moves to dense storage. An object tracking
    // attribute creation order has an attribute info message from its creation: each new
    // attribute takes its next creation order, a replaced one keeps its own.
    let (max_compact, _) = phase_change(file, obj)?;
    let decode_info = |b: &[u8]| {
        AttributeInfo::decode(
            &mut h5_format::reader::Reader::new(b, "attribute info message", obj),
            sizes,
        )
    };
    let moved = ohdr::update(file, obj, |msgs| {
        let mut info = match msgs.iter().find(|m| m.kind == kind::ATTRIBUTE_INFO) {
            Some(m) => Some(decode_info(&m.body)?),
            None => None,
        };
        let tracked = info.is_some_and(|i| i.creation_order_tracked);
        let old_order = msgs.iter().find(|m| same(m)).and_then(|m| m.creation_order);
        let count = msgs
            .iter()
            .filter(|m| m.kind == kind::ATTRIBUTE && !same(m))
            .count();
        if count < max_compact && body.len() <= MAX_MESSAGE {
            msgs.retain(|m| !same(m));
            let mut m = ohdr::message(kind::ATTRIBUTE, 0, body.clone());
            if let (true, Some(i)) = (tracked, info.as_mut()) {
                m.creation_order = Some(match old_order {
                    Some(o) => o,
                    None => {
                        let o = u16::try_from(next_order(i)?).unwrap_or(u16::MAX);
                        let encoded = i.encode(sizes);
                        for im in msgs.iter_mut().filter(|m| m.kind == kind::ATTRIBUTE_INFO) {
                            im.body = encoded.clone();
                        }
                        o
                    }
                });
            }
            msgs.push(m);
            return Ok(None);
        }
        // Dense from now on: the messages leave the header (to the dense storage, below).
        let old: Vec<StoredMessage> = msgs
            .iter()
            .filter(|m| m.kind == kind::ATTRIBUTE)
            .cloned()
            .collect();
        if old
            .iter()
            .any(|m| m.flags & h5_format::object_header::msg_flags::SHARED != 0)
        {
            return Err(Error::Unsupported(format!(
                "moving the shared attributes of the object at {obj:#x} to dense storage"
            )));
        }
        msgs.retain(|m| m.kind != kind::ATTRIBUTE);
        let info = match info {
            Some(i) => i,
            None => {
                let i = empty_info(false, false);
                msgs.push(ohdr::message(kind::ATTRIBUTE_INFO, 0, i.encode(sizes)));
                i
            }
        };
        Ok(Some((info, old, old_order)))
    })?;
    let Some((mut info, old, old_order)) = moved else {
        return Ok(());
    };
    let tracked = info.creation_order_tracked;
    {
        let mut s = Session::new(file)?;
        let d = Dense::create(&mut s, NamedIn::Attributes, info.creation_order_indexed)?;
        for m in old.iter().filter(|m| !same(m)) {
            let a = decode_attribute(&m.body, sizes, obj)?;
            let order = match m.creation_order {
                Some(o) if tracked => u64::from(o),
                _ => UNTRACKED_ORDER,
            };
            d.insert(&mut s, a.name.as_bytes(), order, 0, &m.body)?;
        }
        let order = match old_order {
            Some(o) if tracked => u64::from(o),
            _ if tracked => next_order(&mut info)?,
            _ => UNTRACKED_ORDER,
        };
        d.insert(&mut s, name.as_bytes(), order, 0, &body)?;
        info.fractal_heap_address = d.heap;
        info.name_index_address = d.names;
        if info.creation_order_indexed {
            info.creation_order_index_address = d.orders;
        }
    }
    write_info(file, obj, &info)
}

/// Deletes the attribute `name` of the object at `obj` (an error if it has none of that
/// name); a dense storage left with fewer than `min_dense` attributes goes back to header
/// messages.
pub(crate) fn delete(file: &FileShared, obj: u64, name: &str) -> Result<()> {
    let sizes = file.sizes;
    let oh = ObjectHeader::load(file, obj)?;
    let Some(mut info) = info_of(&oh).filter(|i| dense_of(i).is_some()) else {
        return ohdr::update(file, obj, |msgs| {
            let before = msgs.len();
            msgs.retain(|m| attribute_named(m, name, sizes, obj).is_none());
            if msgs.len() == before {
                return Err(Error::NotFound(format!("attribute {name}")));
            }
            Ok(())
        });
    };
    let Some(d) = dense_of(&info) else {
        return Err(Error::NotFound(format!("attribute {name}")));
    };
    let (_, min_dense) = phase_change(file, obj)?;
    let back = {
        let mut s = Session::new(file)?;
        if d.remove(&mut s, name.as_bytes())?.is_none() {
            return Err(Error::NotFound(format!("attribute {name}")));
        }
        let left = d.count(&mut s)?;
        if left < min_dense as u64 {
            let all = d.list(&mut s)?;
            if all.iter().all(|st| st.body.len() <= MAX_MESSAGE) {
                d.delete(&mut s)?;
                Some(all)
            } else {
                None
            }
        } else {
            None
        }
    };
    let Some(all) = back else {
        return Ok(());
    };
    info.fractal_heap_address = UNDEFINED_ADDRESS;
    info.name_index_address = UNDEFINED_ADDRESS;
    if info.creation_order_indexed {
        info.creation_order_index_address = Some(UNDEFINED_ADDRESS);
    }
    let tracked = info.creation_order_tracked;
    let body = info.encode(sizes);
    ohdr::update(file, obj, move |msgs| {
        for m in msgs.iter_mut().filter(|m| m.kind == kind::ATTRIBUTE_INFO) {
            m.body = body.clone();
        }
        for st in all {
            let mut m = ohdr::message(kind::ATTRIBUTE, st.flags, st.body);
            if tracked {
                m.creation_order = Some(u16::try_from(st.order).unwrap_or(u16::MAX));
            }
            msgs.push(m);
        }
        Ok(())
    })
}

/// Renames the attribute `name` of the object at `obj` to `new_name` (which must be free),
/// keeping its creation order.
pub(crate) fn rename(file: &FileShared, obj: u64, name: &str, new_name: &str) -> Result<()> {
    let sizes = file.sizes;
    let oh = ObjectHeader::load(file, obj)?;
    let rename_in = |body: &[u8]| -> Result<Vec<u8>> {
        let mut a = decode_attribute(body, sizes, obj)?;
        a.name = new_name.to_owned();
        Ok(h5_format::message::encode_message(
            &Message::Attribute(a),
            sizes,
        )?)
    };
    if let Some(d) = info_of(&oh).as_ref().and_then(dense_of) {
        if d.find(&mut Reading(file), new_name.as_bytes())?.is_some() {
            return Err(Error::Exists(format!("attribute {new_name}")));
        }
        let mut s = Session::new(file)?;
        let st = d
            .remove(&mut s, name.as_bytes())?
            .ok_or_else(|| Error::NotFound(format!("attribute {name}")))?;
        let body = rename_in(&st.body)?;
        return d.insert(&mut s, new_name.as_bytes(), st.order, st.flags, &body);
    }
    ohdr::update(file, obj, |msgs| {
        if msgs
            .iter()
            .any(|m| attribute_named(m, new_name, sizes, obj).is_some())
        {
            return Err(Error::Exists(format!("attribute {new_name}")));
        }
        let m = msgs
            .iter_mut()
            .find(|m| attribute_named(m, name, sizes, obj).is_some())
            .ok_or_else(|| Error::NotFound(format!("attribute {name}")))?;
        m.body = rename_in(&m.body)?;
        Ok(())
    })
}

/// Frees the dense attribute storage of the object whose header is `oh` (the object is being
/// deleted).
pub(crate) fn delete_dense(file: &FileShared, oh: &ObjectHeader) -> Result<()> {
    if let Some(d) = info_of(oh).as_ref().and_then(dense_of) {
        d.delete(&mut Session::new(file)?)?;
    }
    Ok(())
}

/// The attribute messages of a dense storage, in name-index order.
pub(crate) fn dense_bodies(file: &FileShared, info: &AttributeInfo) -> Result<Vec<Vec<u8>>> {
    match dense_of(info) {
        Some(d) => Ok(d
            .list(&mut Reading(file))?
            .into_iter()
            .map(|st| st.body)
            .collect()),
        None => Ok(Vec::new()),
    }
}
