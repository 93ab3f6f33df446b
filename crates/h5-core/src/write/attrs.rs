//! Dense attribute storage of objects written here (version 2 object headers): the attribute
//! messages live in an [`AttrTable`] and are laid out at flush as a fractal heap indexed by a
//! v2 B-tree of type 8 (by name hash), the object's attribute info message pointing at them.
//!
//! An object's attributes go dense when it would hold more than [`MAX_COMPACT`] of them or one
//! whose message does not fit a header message (libhdf5's phase change); they stay dense (no
//! removal yet). Invariants: one message per name; every structure of the previous layout is
//! freed before the next is placed.

use std::collections::BTreeMap;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree2::{Btree2Type, Record};
use h5_format::heap::fractal::FractalHeapParams;
use h5_format::message::attribute_info::AttributeInfo;
use h5_format::message::{Message, kind};

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::write::dense::{Placed, build_btree2, build_heap, free_placed, name_hash};
use crate::write::ohdr;

/// libhdf5's default largest number of attributes kept in the object header.
pub(crate) const MAX_COMPACT: usize = 8;

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

/// Stores the encoded attribute message `body` of the attribute `name` on the object at `obj`,
/// replacing one of that name: in the object header (version 1 headers always; version 2 while
/// the object has at most [`MAX_COMPACT`] attributes that fit header messages), else in the
/// object's dense storage, laid out at flush.
pub(crate) fn store(file: &FileShared, obj: u64, name: &str, body: Vec<u8>) -> Result<()> {
    let bounds = file.bounds();
    let sizes = file.sizes;
    let same = |m: &crate::object::StoredMessage| attribute_named(m, name, sizes, obj).is_some();
    if !bounds.new_style() {
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
    load_existing_dense(file, obj)?;
    {
        let mut w = file.state()?;
        if let Some(t) = w.attr_tables.get_mut(&obj) {
            return t.put(name, body);
        }
    }
    // Compact while at most MAX_COMPACT attributes fit as header messages; otherwise every
    // attribute moves to dense storage (laid out at flush). An object tracking attribute
    // creation order has an attribute info message from its creation: each new attribute
    // takes its next creation order, a replaced one keeps its own.
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
        msgs.retain(|m| !same(m));
        let count = msgs.iter().filter(|m| m.kind == kind::ATTRIBUTE).count();
        if count < MAX_COMPACT && body.len() <= MAX_MESSAGE {
            let mut m = ohdr::message(kind::ATTRIBUTE, 0, body.clone());
            if let (true, Some(i)) = (tracked, info.as_mut()) {
                let next = i.max_creation_index.unwrap_or(0);
                m.creation_order = Some(old_order.unwrap_or(next));
                if old_order.is_none() {
                    i.max_creation_index = Some(next.checked_add(1).ok_or_else(|| {
                        Error::Unsupported(
                            "more than 65535 attributes created on one object".into(),
                        )
                    })?);
                    let encoded = i.encode(sizes);
                    for im in msgs.iter_mut().filter(|m| m.kind == kind::ATTRIBUTE_INFO) {
                        im.body = encoded.clone();
                    }
                }
            }
            msgs.push(m);
            return Ok(None);
        }
        let old: Vec<(u16, Vec<u8>)> = msgs
            .iter()
            .filter(|m| m.kind == kind::ATTRIBUTE)
            .map(|m| (m.creation_order.unwrap_or(0), m.body.clone()))
            .collect();
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
    if let Some((info, old, old_order)) = moved {
        let mut table = AttrTable::new(&info);
        for (order, b) in old {
            if let Ok(Message::Attribute(a)) =
                h5_format::message::decode_message(kind::ATTRIBUTE, 0, &b, sizes, obj)
            {
                table.restore(&a.name, order, b);
            }
        }
        match old_order {
            Some(o) if info.creation_order_tracked => table.restore(name, o, body),
            _ => table.put(name, body)?,
        }
        file.state()?.attr_tables.insert(obj, table);
    }
    Ok(())
}

/// Loads the dense attribute storage of the object at `obj`, written before the file was
/// opened, into an [`AttrTable`] (once): later changes go through the table, laid out anew at
/// flush (the old heap and indexes are left unused: their extent is not tracked).
pub(crate) fn load_existing_dense(file: &FileShared, obj: u64) -> Result<()> {
    if file.state()?.attr_tables.contains_key(&obj) {
        return Ok(());
    }
    let oh = crate::object::ObjectHeader::load(file, obj)?;
    let Some(info) = oh.find(|m| match m {
        Message::AttributeInfo(i) => Some(*i),
        _ => None,
    }) else {
        return Ok(());
    };
    if info.fractal_heap_address == h5_format::UNDEFINED_ADDRESS {
        return Ok(());
    }
    let sizes = file.sizes;
    let heap = crate::walk::fractal_header(file, info.fractal_heap_address)?;
    let mut table = AttrTable::new(&info);
    let records = crate::walk::btree2_records(
        file,
        info.name_index_address,
        h5_format::btree2::RecordContext::new(sizes),
    )?;
    for r in records {
        let h5_format::btree2::Record::AttributeName {
            heap_id,
            flags,
            creation_order,
            ..
        } = r
        else {
            continue;
        };
        if flags & h5_format::object_header::msg_flags::SHARED != 0 {
            return Err(Error::Unsupported(format!(
                "changing the attributes of the object at {obj:#x}: one is a shared message"
            )));
        }
        let body = crate::walk::fractal_object(file, &heap, &heap_id)?;
        let Message::Attribute(a) =
            h5_format::message::decode_message(kind::ATTRIBUTE, 0, &body, sizes, obj)?
        else {
            return Err(Error::Unsupported(
                "a dense attribute record that holds no attribute".into(),
            ));
        };
        let order = u16::try_from(creation_order).unwrap_or(u16::MAX);
        table.restore(&a.name, order, body);
    }
    table.dirty = false;
    file.state()?.attr_tables.entry(obj).or_insert(table);
    Ok(())
}

/// The dense attributes of one object.
#[derive(Debug)]
pub(crate) struct AttrTable {
    /// Encoded attribute messages by name, with their creation order.
    pub(crate) by_name: BTreeMap<String, (u16, Vec<u8>)>,
    /// Creation order tracked (recorded in the index records and the info message).
    tracked: bool,
    /// Creation order indexed (a type-9 B-tree).
    indexed: bool,
    /// The next creation order.
    next: u16,
    /// Structures of the last layout.
    placed: Vec<Placed>,
    /// Changed since the last layout.
    pub(crate) dirty: bool,
}

impl AttrTable {
    /// An empty table continuing the creation order of `info`.
    pub(crate) fn new(info: &AttributeInfo) -> Self {
        AttrTable {
            by_name: BTreeMap::new(),
            tracked: info.creation_order_tracked,
            indexed: info.creation_order_indexed,
            next: info.max_creation_index.unwrap_or(0),
            placed: Vec::new(),
            dirty: true,
        }
    }

    /// Adds the attribute `name` as it was in the object header, with its creation order.
    pub(crate) fn restore(&mut self, name: &str, order: u16, body: Vec<u8>) {
        self.by_name.insert(name.to_owned(), (order, body));
        self.dirty = true;
    }

    /// Adds or replaces the attribute `name` (its encoded message `body`); a replaced
    /// attribute keeps its creation order.
    pub(crate) fn put(&mut self, name: &str, body: Vec<u8>) -> Result<()> {
        let order = match self.by_name.get(name) {
            Some((o, _)) => *o,
            None => {
                let o = self.next;
                self.next = self.next.checked_add(1).ok_or_else(|| {
                    Error::Unsupported("more than 65535 attributes created on one object".into())
                })?;
                o
            }
        };
        self.by_name.insert(name.to_owned(), (order, body));
        self.dirty = true;
        Ok(())
    }

    /// Deletes the attribute `name` (the table stays dense, which the format allows).
    pub(crate) fn remove(&mut self, name: &str) -> Result<()> {
        self.by_name
            .remove(name)
            .ok_or_else(|| Error::NotFound(format!("attribute {name}")))?;
        self.dirty = true;
        Ok(())
    }

    /// Renames the attribute `name` to `new_name` (free), keeping its creation order.
    pub(crate) fn rename(
        &mut self,
        name: &str,
        new_name: &str,
        sizes: h5_format::Sizes,
        obj: u64,
    ) -> Result<()> {
        if self.by_name.contains_key(new_name) {
            return Err(Error::Exists(format!("attribute {new_name}")));
        }
        let (order, body) = self
            .by_name
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("attribute {name}")))?;
        let Message::Attribute(mut a) =
            h5_format::message::decode_message(kind::ATTRIBUTE, 0, &body, sizes, obj)?
        else {
            return Err(Error::Unsupported(
                "a dense attribute that is not one".into(),
            ));
        };
        a.name = new_name.to_owned();
        let body = h5_format::message::encode_message(&Message::Attribute(a), sizes)?;
        self.by_name.remove(name);
        self.by_name.insert(new_name.to_owned(), (order, body));
        self.dirty = true;
        Ok(())
    }

    /// The encoded messages in name order.
    pub(crate) fn bodies(&self) -> Vec<Vec<u8>> {
        self.by_name.values().map(|(_, b)| b.clone()).collect()
    }

    /// Writes the heap and indexes and points the attribute info message of the header at
    /// `addr` at them.
    pub(crate) fn lay_out(&mut self, file: &FileShared, addr: u64) -> Result<()> {
        free_placed(file, &mut self.placed)?;
        let mut placed = Vec::new();
        let mut ordered: Vec<(&String, &(u16, Vec<u8>))> = self.by_name.iter().collect();
        ordered.sort_by_key(|(_, (o, _))| *o);
        let refs: Vec<&[u8]> = ordered.iter().map(|(_, (_, b))| b.as_slice()).collect();
        let (heap, ids) = build_heap(
            file,
            FractalHeapParams::dense_attributes(),
            &refs,
            &mut placed,
        )?;
        let mut by_name = Vec::with_capacity(ids.len());
        let mut by_order = Vec::with_capacity(ids.len());
        for ((name, (order, _)), id) in ordered.iter().zip(ids) {
            let heap_id: [u8; 8] = id.as_slice().try_into().map_err(|_| {
                Error::Unsupported(format!("attribute heap ID of {} bytes", id.len()))
            })?;
            let creation_order = if self.tracked { u32::from(*order) } else { 0 };
            let hash = name_hash(name.as_bytes());
            by_name.push((
                hash,
                name.as_str(),
                Record::AttributeName {
                    heap_id,
                    flags: 0,
                    creation_order,
                    hash,
                },
            ));
            by_order.push(Record::AttributeCreationOrder {
                heap_id,
                flags: 0,
                creation_order,
            });
        }
        by_name.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        let records = by_name.into_iter().map(|(_, _, r)| r).collect();
        let mut info = empty_info(self.tracked, self.indexed);
        info.fractal_heap_address = heap;
        info.name_index_address =
            build_btree2(file, Btree2Type::AttributeName, records, &mut placed)?;
        if self.tracked {
            info.max_creation_index = Some(self.next);
        }
        if info.creation_order_indexed {
            info.creation_order_index_address = Some(build_btree2(
                file,
                Btree2Type::AttributeCreationOrder,
                by_order,
                &mut placed,
            )?);
        }
        let body = info.encode(file.sizes);
        ohdr::update(file, addr, move |msgs| {
            msgs.retain(|m| m.kind != kind::ATTRIBUTE);
            let mut found = false;
            for m in msgs.iter_mut().filter(|m| m.kind == kind::ATTRIBUTE_INFO) {
                m.body = body.clone();
                found = true;
            }
            if !found {
                msgs.push(ohdr::message(kind::ATTRIBUTE_INFO, 0, body));
            }
            Ok(())
        })?;
        self.placed = placed;
        self.dirty = false;
        Ok(())
    }
}
