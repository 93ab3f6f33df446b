//! The keys records are ordered by, one per tree type (libhdf5's `compare` callbacks of
//! `H5HFbtree2.c`, `H5Gbtree2.c`, `H5Abtree2.c`, `H5SMbtree2.c`, `H5Dbtree2.c`).

use std::cmp::Ordering;

use h5_format::btree2::Record;
use h5_format::message::{Message, decode_message, kind};

use super::Key;
use crate::access::MetaAccess;
use crate::error::{Error, Result};

fn other(rec: &Record, want: &str) -> Error {
    Error::Unsupported(format!(
        "a type {} record in a tree of {want}",
        rec.tree_type().as_u8()
    ))
}

/// Chunk records (types 10 and 11) by scaled coordinates, compared from the first dimension.
pub(crate) struct ChunkKey<'a>(pub(crate) &'a [u64]);

impl Key for ChunkKey<'_> {
    fn cmp(&self, _: &mut dyn MetaAccess, rec: &Record) -> Result<Ordering> {
        match rec {
            Record::Chunk { scaled, .. } | Record::FilteredChunk { scaled, .. } => {
                Ok(self.0.cmp(scaled.as_slice()))
            }
            _ => Err(other(rec, "chunks")),
        }
    }
}

/// Creation-order records (types 6 and 9).
pub(crate) struct OrderKey(pub(crate) u64);

impl Key for OrderKey {
    fn cmp(&self, _: &mut dyn MetaAccess, rec: &Record) -> Result<Ordering> {
        match rec {
            Record::LinkCreationOrder { creation_order, .. } => Ok(self.0.cmp(creation_order)),
            Record::AttributeCreationOrder { creation_order, .. } => {
                Ok(self.0.cmp(&u64::from(*creation_order)))
            }
            _ => Err(other(rec, "creation orders")),
        }
    }
}

/// Huge objects looked up by their heap ID key (types 1 and 2).
pub(crate) struct HugeIdKey(pub(crate) u64);

impl Key for HugeIdKey {
    fn cmp(&self, _: &mut dyn MetaAccess, rec: &Record) -> Result<Ordering> {
        match rec {
            Record::HugeIndirect { id, .. } | Record::HugeIndirectFiltered { id, .. } => {
                Ok(self.0.cmp(id))
            }
            _ => Err(other(rec, "huge object IDs")),
        }
    }
}

/// Huge objects accessed directly, by address (types 3 and 4).
pub(crate) struct HugeAddrKey(pub(crate) u64);

impl Key for HugeAddrKey {
    fn cmp(&self, _: &mut dyn MetaAccess, rec: &Record) -> Result<Ordering> {
        match rec {
            Record::HugeDirect { address, .. } | Record::HugeDirectFiltered { address, .. } => {
                Ok(self.0.cmp(address))
            }
            _ => Err(other(rec, "huge object addresses")),
        }
    }
}

/// What the messages named by a name index are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NamedIn {
    /// Link messages (type 5 records).
    Links,
    /// Attribute messages (type 8 records).
    Attributes,
}

/// Links or attributes by name (types 5 and 8): the lookup3 hash of the name first, then, on a
/// tie, the name itself, read from the message in the fractal heap at `heap` (byte order, as
/// libhdf5's `strcmp`).
///
/// Invariant: after a comparison found the sought name equal to a record's, `matched` holds
/// that record's message as read from the heap (a lookup hands it over instead of reading the
/// heap a second time).
pub(crate) struct NameKey<'a> {
    /// The name sought.
    pub(crate) name: &'a [u8],
    /// Its hash.
    pub(crate) hash: u32,
    /// The fractal heap holding the messages.
    pub(crate) heap: u64,
    /// Link or attribute messages.
    pub(crate) of: NamedIn,
    /// The encoded message of the record last found equal (see the invariant).
    matched: std::cell::RefCell<Option<Vec<u8>>>,
}

impl<'a> NameKey<'a> {
    /// The key of `name` in the storage whose heap is at `heap`.
    pub(crate) fn new(name: &'a [u8], heap: u64, of: NamedIn) -> Self {
        NameKey {
            name,
            hash: h5_format::checksum::lookup3(name, 0),
            heap,
            of,
            matched: std::cell::RefCell::new(None),
        }
    }

    /// The encoded message of the record a comparison last found equal to this key, taken.
    pub(crate) fn take_matched(&self) -> Option<Vec<u8>> {
        self.matched.borrow_mut().take()
    }
}

impl Key for NameKey<'_> {
    fn cmp(&self, a: &mut dyn MetaAccess, rec: &Record) -> Result<Ordering> {
        let (hash, id, shared): (u32, &[u8], bool) = match (self.of, rec) {
            (NamedIn::Links, Record::LinkName { hash, heap_id }) => {
                (*hash, heap_id.as_slice(), false)
            }
            (
                NamedIn::Attributes,
                Record::AttributeName {
                    hash,
                    heap_id,
                    flags,
                    ..
                },
            ) => (
                *hash,
                heap_id,
                flags & h5_format::object_header::msg_flags::SHARED != 0,
            ),
            _ => return Err(other(rec, "names")),
        };
        match self.hash.cmp(&hash) {
            Ordering::Equal => {}
            o => return Ok(o),
        }
        if shared {
            return Err(Error::Unsupported(
                "comparing the name of a shared dense attribute".into(),
            ));
        }
        let bytes = crate::fheap::read(a, self.heap, id)?;
        let sizes = a.file().sizes;
        let stored = match (
            self.of,
            decode_message(self.of.message_kind(), 0, &bytes, sizes, self.heap)?,
        ) {
            (NamedIn::Links, Message::Link(l)) => l.name,
            (NamedIn::Attributes, Message::Attribute(m)) => m.name.into_bytes(),
            _ => {
                return Err(Error::Unsupported(
                    "a dense storage record naming another kind of message".into(),
                ));
            }
        };
        let order = self.name.cmp(stored.as_slice());
        if order == Ordering::Equal {
            *self.matched.borrow_mut() = Some(bytes);
        }
        Ok(order)
    }
}

impl NamedIn {
    /// The message type stored.
    pub(crate) fn message_kind(self) -> u16 {
        match self {
            NamedIn::Links => kind::LINK,
            NamedIn::Attributes => kind::ATTRIBUTE,
        }
    }
}
