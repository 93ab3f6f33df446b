//! Dense storage of links (new-style groups) and attributes (version 2 object headers): the
//! encoded messages in a fractal heap, indexed by name hash in a v2 B-tree (type 5 for links,
//! 8 for attributes) and, when creation order is indexed, by creation order (type 6, 9), with
//! libhdf5's heap and tree parameters. One module for both directions: readers find and list
//! messages through it, writers insert, rewrite and remove one message at a time (heap object
//! and index records together).
//!
//! Invariants: every message in the heap has exactly one record in each index; records of the
//! name index are ordered by (hash, name), those of the creation-order index by creation order.

use std::ops::ControlFlow;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree2::{Btree2Type, InlineHeapId, Record, RecordContext};
use h5_format::heap::fractal::FractalHeapParams;

use crate::access::{MetaAccess, Session};
use crate::btree2::{self, NameKey, NamedIn, OrderKey, Tree};
use crate::error::{Error, Result};
use crate::fheap::{self, HeapChange};

/// Where a dense storage is: its heap and indexes (relative addresses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dense {
    /// Link or attribute messages.
    pub(crate) of: NamedIn,
    /// The fractal heap.
    pub(crate) heap: u64,
    /// The name index.
    pub(crate) names: u64,
    /// The creation-order index, when indexed.
    pub(crate) orders: Option<u64>,
}

/// One stored message: its bytes, its creation order and its message flags (attributes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    /// The encoded message.
    pub(crate) body: Vec<u8>,
    /// Its creation order (0 when not tracked).
    pub(crate) order: u64,
    /// Message flags (attributes; 0 for links).
    pub(crate) flags: u8,
}

impl Dense {
    /// The storage at `heap`/`names`/`orders` (`orders` undefined or absent: not indexed), or
    /// `None` when the object has none (the heap address is undefined).
    pub(crate) fn at(of: NamedIn, heap: u64, names: u64, orders: Option<u64>) -> Option<Dense> {
        (heap != UNDEFINED_ADDRESS).then_some(Dense {
            of,
            heap,
            names,
            orders: orders.filter(|&a| a != UNDEFINED_ADDRESS),
        })
    }

    /// Creates an empty storage: the heap with libhdf5's dense-link or dense-attribute
    /// parameters, the name index and, when `indexed`, the creation-order index (headers
    /// only; blocks and nodes come with the first message).
    pub(crate) fn create(s: &mut Session<'_>, of: NamedIn, indexed: bool) -> Result<Dense> {
        let params = match of {
            NamedIn::Links => FractalHeapParams::dense_links(),
            NamedIn::Attributes => FractalHeapParams::dense_attributes(),
        };
        let heap = fheap::create(s, params)?;
        let ctx = RecordContext::new(s.file().sizes);
        let (name_type, order_type) = match of {
            NamedIn::Links => (Btree2Type::LinkName, Btree2Type::LinkCreationOrder),
            NamedIn::Attributes => (
                Btree2Type::AttributeName,
                Btree2Type::AttributeCreationOrder,
            ),
        };
        let names = btree2::create(s, btree2::params_for(name_type, &ctx)?)?;
        let orders = if indexed {
            Some(btree2::create(s, btree2::params_for(order_type, &ctx)?)?)
        } else {
            None
        };
        Ok(Dense {
            of,
            heap,
            names,
            orders,
        })
    }

    fn ctx(&self, a: &dyn MetaAccess) -> RecordContext {
        RecordContext::new(a.file().sizes)
    }

    fn names(&self, a: &dyn MetaAccess) -> Tree {
        Tree {
            addr: self.names,
            ctx: self.ctx(a),
        }
    }

    fn orders(&self, a: &dyn MetaAccess) -> Option<Tree> {
        self.orders.map(|addr| Tree {
            addr,
            ctx: self.ctx(a),
        })
    }

    /// Messages stored (the name index's count).
    pub(crate) fn count(&self, a: &mut dyn MetaAccess) -> Result<u64> {
        let t = self.names(a);
        btree2::count(a, &t)
    }

    /// The message named `name`, if stored.
    pub(crate) fn find(&self, a: &mut dyn MetaAccess, name: &[u8]) -> Result<Option<Stored>> {
        let t = self.names(a);
        let key = NameKey::new(name, self.heap, self.of);
        match btree2::find(a, &t, &key)? {
            // The comparison that found the record read its message: no second heap read.
            Some(r) => match key.take_matched() {
                Some(body) => Self::stored_as(&r, body).map(Some),
                None => self.stored(a, &r).map(Some),
            },
            None => Ok(None),
        }
    }

    /// The stored message a name-index record names.
    fn stored(&self, a: &mut dyn MetaAccess, r: &Record) -> Result<Stored> {
        self.stored_with(&mut fheap::HeapReader::once(self.heap), a, r)
    }

    /// [`Dense::stored`] through `heap`, a reader of this storage's heap.
    fn stored_with(
        &self,
        heap: &mut fheap::HeapReader,
        a: &mut dyn MetaAccess,
        r: &Record,
    ) -> Result<Stored> {
        let (id, ..) = name_record(r)?;
        Self::stored_as(r, heap.read(a, id)?)
    }

    /// The stored message `body` that the name-index record `r` names.
    fn stored_as(r: &Record, body: Vec<u8>) -> Result<Stored> {
        let (_, order, flags) = name_record(r)?;
        Ok(Stored { body, order, flags })
    }

    /// Every stored message, in name-index order.
    pub(crate) fn list(&self, a: &mut dyn MetaAccess) -> Result<Vec<Stored>> {
        let t = self.names(a);
        let mut out = Vec::new();
        let me = *self;
        let mut heap = fheap::HeapReader::new(self.heap);
        btree2::iterate(a, &t, &mut |a, r| {
            out.push(me.stored_with(&mut heap, a, r)?);
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(out)
    }

    /// Stores `body`, the message named `name` (which must not be stored yet), with creation
    /// order `order` and message `flags`.
    pub(crate) fn insert(
        &self,
        s: &mut Session<'_>,
        name: &[u8],
        order: u64,
        flags: u8,
        body: &[u8],
    ) -> Result<()> {
        let id = {
            let mut c = HeapChange::begin(s, self.heap)?;
            let id = c.insert(body);
            c.finish()?;
            id?
        };
        let hash = h5_format::checksum::lookup3(name, 0);
        let (name_rec, order_rec) = match self.of {
            NamedIn::Links => {
                let heap_id = InlineHeapId::new(&id).ok_or_else(|| {
                    Error::Unsupported(format!("link heap ID of {} bytes", id.len()))
                })?;
                (
                    Record::LinkName { hash, heap_id },
                    Record::LinkCreationOrder {
                        creation_order: order,
                        heap_id,
                    },
                )
            }
            NamedIn::Attributes => {
                let heap_id: [u8; 8] = id.as_slice().try_into().map_err(|_| {
                    Error::Unsupported(format!("attribute heap ID of {} bytes", id.len()))
                })?;
                let creation_order = u32::try_from(order)
                    .map_err(|_| Error::Unsupported(format!("attribute creation order {order}")))?;
                (
                    Record::AttributeName {
                        heap_id,
                        flags,
                        creation_order,
                        hash,
                    },
                    Record::AttributeCreationOrder {
                        heap_id,
                        flags,
                        creation_order,
                    },
                )
            }
        };
        let t = self.names(s);
        btree2::insert(s, &t, &NameKey::new(name, self.heap, self.of), name_rec)?;
        if let Some(t) = self.orders(s) {
            btree2::insert(s, &t, &OrderKey(order), order_rec)?;
        }
        Ok(())
    }

    /// Removes the message named `name`; returns it (`None`: not stored).
    pub(crate) fn remove(&self, s: &mut Session<'_>, name: &[u8]) -> Result<Option<Stored>> {
        let t = self.names(s);
        let Some(rec) = btree2::remove(s, &t, &NameKey::new(name, self.heap, self.of))? else {
            return Ok(None);
        };
        let stored = self.stored(s, &rec)?;
        let order = match (&rec, self.of) {
            (_, NamedIn::Attributes) => stored.order,
            (Record::LinkName { .. }, NamedIn::Links) => link_order(s, &stored.body)?,
            _ => 0,
        };
        if let Some(t) = self.orders(s) {
            btree2::remove(s, &t, &OrderKey(order))?;
        }
        let id = match &rec {
            Record::LinkName { heap_id, .. } => heap_id.to_vec(),
            Record::AttributeName { heap_id, .. } => heap_id.to_vec(),
            _ => Vec::new(),
        };
        let mut c = HeapChange::begin(s, self.heap)?;
        let r = c.remove(&id);
        c.finish()?;
        r?;
        Ok(Some(stored))
    }

    /// Replaces the message named `name` by `body` of the same length, in place in the heap
    /// (libhdf5's `H5A__dense_write`); returns whether it was stored.
    pub(crate) fn rewrite(&self, s: &mut Session<'_>, name: &[u8], body: &[u8]) -> Result<bool> {
        let t = self.names(s);
        let Some(rec) = btree2::find(s, &t, &NameKey::new(name, self.heap, self.of))? else {
            return Ok(false);
        };
        let id = match &rec {
            Record::LinkName { heap_id, .. } => heap_id.to_vec(),
            Record::AttributeName { heap_id, .. } => heap_id.to_vec(),
            _ => return Ok(false),
        };
        let mut c = HeapChange::begin(s, self.heap)?;
        let r = c.write(&id, body);
        c.finish()?;
        let new_id = r?;
        if new_id.len() != id.len() {
            // The records hold IDs of the heap's one length: `set_id` could not store it.
            return Err(Error::Unsupported(format!(
                "a heap ID of {} bytes replacing one of {}",
                new_id.len(),
                id.len()
            )));
        }
        if new_id != id {
            // A tiny object is its ID: the records name the new one.
            let key = NameKey::new(name, self.heap, self.of);
            let nid = new_id.clone();
            btree2::update(s, &t, &key, &mut |r| set_id(r, &nid))?;
            if let Some(o) = self.orders(s) {
                let order = self.stored(s, &rec)?.order;
                let order = match self.of {
                    NamedIn::Links => link_order(s, body)?,
                    NamedIn::Attributes => order,
                };
                btree2::update(s, &o, &OrderKey(order), &mut |r| set_id(r, &new_id))?;
            }
        }
        Ok(true)
    }

    /// Deletes the storage: heap (every object) and indexes.
    pub(crate) fn delete(&self, s: &mut Session<'_>) -> Result<()> {
        let t = self.names(s);
        btree2::delete(s, &t, &mut |_, _| Ok(()))?;
        if let Some(t) = self.orders(s) {
            btree2::delete(s, &t, &mut |_, _| Ok(()))?;
        }
        fheap::delete(s, self.heap)
    }
}

/// A name-index record's heap ID, creation order and message flags (0 for links).
fn name_record(r: &Record) -> Result<(&[u8], u64, u8)> {
    match r {
        Record::LinkName { heap_id, .. } => Ok((heap_id, 0, 0)),
        Record::AttributeName {
            heap_id,
            flags,
            creation_order,
            ..
        } => Ok((heap_id, u64::from(*creation_order), *flags)),
        _ => Err(Error::Unsupported(format!(
            "a type {} record in a name index",
            r.tree_type().as_u8()
        ))),
    }
}

/// The creation order a link message carries (0 when not tracked).
fn link_order(a: &dyn MetaAccess, body: &[u8]) -> Result<u64> {
    match h5_format::message::decode_message(
        h5_format::message::kind::LINK,
        0,
        body,
        a.file().sizes,
        UNDEFINED_ADDRESS,
    )? {
        h5_format::message::Message::Link(l) => Ok(l
            .creation_order
            .map_or(0, |o| u64::try_from(o).unwrap_or(0))),
        _ => Ok(0),
    }
}

fn set_id(r: &mut Record, id: &[u8]) {
    match r {
        Record::LinkName { heap_id, .. } | Record::LinkCreationOrder { heap_id, .. } => {
            if let Some(new) = InlineHeapId::new(id) {
                *heap_id = new;
            }
        }
        Record::AttributeName { heap_id, .. } | Record::AttributeCreationOrder { heap_id, .. } => {
            if let Ok(a) = id.try_into() {
                *heap_id = a;
            }
        }
        _ => {}
    }
}
