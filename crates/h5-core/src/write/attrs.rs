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
use h5_format::message::kind;

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::write::dense::{Placed, build_btree2, build_heap, free_placed, name_hash};
use crate::write::ohdr;

/// libhdf5's default largest number of attributes kept in the object header.
pub(crate) const MAX_COMPACT: usize = 8;

/// The largest message body a header message holds (its size field is 16 bits).
pub(crate) const MAX_MESSAGE: usize = 65_535;

/// The attribute info message of an object without creation-order tracking whose attributes
/// are (or are about to be) dense; addresses undefined until laid out.
pub(crate) fn empty_info() -> AttributeInfo {
    AttributeInfo {
        creation_order_tracked: false,
        creation_order_indexed: false,
        max_creation_index: None,
        fractal_heap_address: UNDEFINED_ADDRESS,
        name_index_address: UNDEFINED_ADDRESS,
        creation_order_index_address: None,
    }
}

/// The dense attributes of one object.
#[derive(Debug, Default)]
pub(crate) struct AttrTable {
    /// Encoded attribute messages by name, with the order they were first written in.
    pub(crate) by_name: BTreeMap<String, (u64, Vec<u8>)>,
    /// The next creation order.
    next: u64,
    /// Structures of the last layout.
    placed: Vec<Placed>,
    /// Changed since the last layout.
    pub(crate) dirty: bool,
}

impl AttrTable {
    /// Adds or replaces the attribute `name` (its encoded message `body`); a replaced
    /// attribute keeps its place in creation order.
    pub(crate) fn put(&mut self, name: &str, body: Vec<u8>) {
        let order = match self.by_name.get(name) {
            Some((o, _)) => *o,
            None => {
                self.next += 1;
                self.next - 1
            }
        };
        self.by_name.insert(name.to_owned(), (order, body));
        self.dirty = true;
    }

    /// The encoded messages in name order.
    pub(crate) fn bodies(&self) -> Vec<Vec<u8>> {
        self.by_name.values().map(|(_, b)| b.clone()).collect()
    }

    /// Writes the heap and index and points the attribute info message of the header at
    /// `addr` at them.
    pub(crate) fn lay_out(&mut self, file: &FileShared, addr: u64) -> Result<()> {
        free_placed(file, &mut self.placed)?;
        let mut placed = Vec::new();
        let mut ordered: Vec<(&String, &(u64, Vec<u8>))> = self.by_name.iter().collect();
        ordered.sort_by_key(|(_, (o, _))| *o);
        let refs: Vec<&[u8]> = ordered.iter().map(|(_, (_, b))| b.as_slice()).collect();
        let (heap, ids) = build_heap(
            file,
            FractalHeapParams::dense_attributes(),
            &refs,
            &mut placed,
        )?;
        let mut records = Vec::with_capacity(ids.len());
        for ((name, _), id) in ordered.iter().zip(ids) {
            let heap_id: [u8; 8] = id.as_slice().try_into().map_err(|_| {
                Error::Unsupported(format!("attribute heap ID of {} bytes", id.len()))
            })?;
            records.push((
                name_hash(name.as_bytes()),
                name.as_str(),
                Record::AttributeName {
                    heap_id,
                    flags: 0,
                    creation_order: 0,
                    hash: name_hash(name.as_bytes()),
                },
            ));
        }
        records.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        let records = records.into_iter().map(|(_, _, r)| r).collect();
        let mut info = empty_info();
        info.fractal_heap_address = heap;
        info.name_index_address =
            build_btree2(file, Btree2Type::AttributeName, records, &mut placed)?;
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
