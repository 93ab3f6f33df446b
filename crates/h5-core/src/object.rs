//! Object headers: the first chunk and every continuation block are metadata-cache entries; the
//! messages of all chunks, decoded, make an [`ObjectHeader`].

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use h5_format::FormatError;
use h5_format::message::{Message, decode_message, kind};
use h5_format::object_header::{
    self, ObjectHeaderPrefix, PREFIX_MAX_LEN, decode_continuation_block, decode_first_chunk,
};
use h5_metacache::MetadataKind;

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::meta::Load;

/// The last group header decoded on path walks and link inserts, with the chunk #0 image it
/// was decoded from (held, so that no other image can take its place in memory). The metadata
/// cache never changes a cached value another holder shares (`Decoded::value_mut` copies it,
/// and this memo is such a holder), so while the cache returns this very image for the
/// address, decoding it again would give this header, in a file being written as in a
/// read-only one: kept only for headers chunk #0 makes alone (no continuation block, no shared
/// message, whose own images could change apart from it).
#[derive(Debug, Default)]
pub(crate) struct HeaderMemo(Mutex<Option<(Arc<FirstChunkImage>, Arc<ObjectHeader>)>>);

impl HeaderMemo {
    fn lock(&self) -> MutexGuard<'_, Option<(Arc<FirstChunkImage>, Arc<ObjectHeader>)>> {
        // Every change replaces the whole value: a panic while it was held left it whole.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The header at `addr` decoded from `image`, if it is the one kept.
    fn get(&self, addr: u64, image: &Arc<FirstChunkImage>) -> Option<Arc<ObjectHeader>> {
        match &*self.lock() {
            Some((kept, h)) if h.address == addr && Arc::ptr_eq(kept, image) => Some(Arc::clone(h)),
            _ => None,
        }
    }

    fn set(&self, image: &Arc<FirstChunkImage>, header: &Arc<ObjectHeader>) {
        *self.lock() = Some((Arc::clone(image), Arc::clone(header)));
    }
}

/// One stored message, owned.
#[derive(Clone, Debug)]
pub(crate) struct StoredMessage {
    pub(crate) kind: u16,
    pub(crate) flags: u8,
    pub(crate) creation_order: Option<u16>,
    pub(crate) body: Vec<u8>,
}

/// A decoded chunk #0: the prefix and its messages.
#[derive(Clone, Debug)]
pub(crate) struct FirstChunkImage {
    pub(crate) prefix: ObjectHeaderPrefix,
    pub(crate) messages: Vec<StoredMessage>,
}

pub(crate) fn owned(raw: &[object_header::RawMessage<'_>]) -> Vec<StoredMessage> {
    raw.iter()
        .map(|m| StoredMessage {
            kind: m.kind,
            flags: m.flags,
            creation_order: m.creation_order,
            body: m.body.to_vec(),
        })
        .collect()
}

/// One decoded message of an object header.
#[derive(Clone, Debug)]
pub struct HeaderMessage {
    /// The message type.
    pub kind: u16,
    /// The message flags.
    pub flags: u8,
    /// The creation order, when the header tracks it.
    pub creation_order: Option<u16>,
    /// The decoded message.
    pub message: Message,
    /// For a message shared in another object header (a dataset's committed datatype): that
    /// header's relative address.
    pub shared_from: Option<u64>,
}

/// A decoded object header: every message of every chunk, in stored order (null messages and
/// continuation messages left out).
#[derive(Clone, Debug)]
pub struct ObjectHeader {
    /// Relative address of the header.
    pub address: u64,
    /// Header version (1 or 2).
    pub version: u8,
    /// The messages.
    pub messages: Vec<HeaderMessage>,
}

/// The walk of one object header's messages: the continuation blocks found so far (chunk #0
/// is not among them) and the messages decoded.
struct HeaderWalk<'a> {
    file: &'a FileShared,
    addr: u64,
    depth: usize,
    prefix: ObjectHeaderPrefix,
    blocks: Vec<Arc<Vec<StoredMessage>>>,
    visited: std::collections::HashSet<u64>,
    /// Whether a message was resolved from elsewhere (a shared message).
    shared: bool,
    out: &'a mut ObjectHeader,
}

impl HeaderWalk<'_> {
    /// Decodes `messages` (one chunk's) into the header, queueing the continuation blocks.
    fn take_all(&mut self, messages: &[StoredMessage]) -> Result<()> {
        messages.iter().try_for_each(|m| self.take(m))
    }

    fn take(&mut self, m: &StoredMessage) -> Result<()> {
        let (file, addr) = (self.file, self.addr);
        let message = decode_message(m.kind, m.flags, &m.body, file.sizes, addr)?;
        if let Message::Continuation(c) = &message {
            // Chunk #0 and the blocks so far, plus this one.
            if self.blocks.len().saturating_add(2) > MAX_CHUNKS {
                return Err(corrupt(addr, "too many continuation blocks (a loop?)"));
            }
            // A block reached twice (or chunk #0 reached again) is a loop.
            if c.address == addr || !self.visited.insert(c.address) {
                return Err(corrupt(addr, "continuation blocks form a loop"));
            }
            let len = usize::try_from(c.length)
                .map_err(|_| corrupt(addr, "continuation length does not fit"))?;
            let (at, prefix) = (c.address, self.prefix);
            let block: Arc<Vec<StoredMessage>> =
                file.load_with(MetadataKind::ObjectHeaderChunk, at, || {
                    block_load(prefix, at, len)
                })?;
            self.blocks.push(block);
            return Ok(());
        }
        if matches!(message, Message::Nil) || m.kind == kind::NIL {
            return Ok(());
        }
        let (message, shared_from) = match message {
            Message::Shared { kind: k, reference } => {
                self.shared = true;
                (
                    resolve_shared(file, k, reference, self.depth)?,
                    committed_address(reference),
                )
            }
            other => (other, None),
        };
        self.out.messages.push(HeaderMessage {
            kind: m.kind,
            flags: m.flags,
            creation_order: m.creation_order,
            message,
            shared_from,
        });
        Ok(())
    }
}

/// The object header a shared message lives in (a committed datatype), `None` for a message
/// in the shared-message heap.
pub(crate) fn committed_address(reference: h5_format::message::shared::SharedRef) -> Option<u64> {
    match reference {
        h5_format::message::shared::SharedRef::ObjectHeader(at) => Some(at),
        h5_format::message::shared::SharedRef::SohmHeap(_) => None,
    }
}

/// Shared messages are at most one level deep in practice (a committed datatype); more means a
/// loop.
const MAX_SHARED_DEPTH: usize = 8;

/// The message a shared-message reference stands for: in another object header (a committed
/// datatype), or in the shared object header message heap.
pub(crate) fn resolve_shared(
    file: &FileShared,
    k: u16,
    reference: h5_format::message::shared::SharedRef,
    depth: usize,
) -> Result<Message> {
    use h5_format::message::shared::SharedRef;
    match reference {
        SharedRef::ObjectHeader(at) => {
            // Past MAX_SHARED_DEPTH is refused: saturating keeps it past.
            let other = ObjectHeader::load_at(file, at, depth.saturating_add(1))?;
            // Keep the reference when the other header does not hold the message itself (it is
            // resolved by the caller, e.g. a committed datatype's own shared form).
            Ok(other
                .messages
                .iter()
                .find(|m| m.kind == k)
                .map(|m| m.message.clone())
                .unwrap_or(Message::Shared { kind: k, reference }))
        }
        SharedRef::SohmHeap(id) => {
            let table = crate::walk::sohm_table(file)?.ok_or_else(|| {
                corrupt(
                    u64::MAX,
                    "a message is shared in the SOHM heap but the file has no SOHM table",
                )
            })?;
            // libhdf5 keeps old-style fill value messages (type 4) in the index of the new
            // ones (type 5), still in their own encoding.
            let index_kind = if k == kind::FILL_VALUE_OLD && table.index_for(k).is_none() {
                kind::FILL_VALUE
            } else {
                k
            };
            let index = table.index_for(index_kind).ok_or_else(|| {
                corrupt(
                    u64::MAX,
                    &format!("no SOHM index holds message type {k:#x}"),
                )
            })?;
            let bytes =
                crate::fheap::read(&mut crate::access::Reading(file), index.heap_address, &id)?;
            Ok(decode_message(
                k,
                0,
                &bytes,
                file.sizes,
                index.heap_address,
            )?)
        }
    }
}

/// How to load chunk #0 of the header at relative address `addr`.
pub(crate) fn first_chunk_load(addr: u64) -> Load {
    Load::sized(
        PREFIX_MAX_LEN.max(256),
        move |b| object_header::needed_len(b, addr),
        move |b| {
            let c = decode_first_chunk(b, addr)?;
            Ok(FirstChunkImage {
                prefix: c.prefix,
                messages: owned(&c.messages),
            })
        },
    )
}

/// The load of a header's chunk #0 that never loads: for a protect of a header known to be
/// cached, so that the hit builds no loader (one shared value, no allocation per call).
pub(crate) fn cached_first_chunk_load() -> &'static Load {
    static LOAD: std::sync::LazyLock<Load> =
        std::sync::LazyLock::new(|| Load::cached_only("object header"));
    &LOAD
}

/// How to load the `len`-byte continuation block at relative address `at` of a header whose
/// prefix is `prefix`.
pub(crate) fn block_load(prefix: ObjectHeaderPrefix, at: u64, len: usize) -> Load {
    Load::exact(len, move |b| {
        Ok(owned(&decode_continuation_block(b, &prefix, at)?))
    })
}

/// Most continuation chains are short; a longer one means a loop in a damaged file.
const MAX_CHUNKS: usize = 4096;

impl ObjectHeader {
    /// Loads the object header at relative address `addr` through the metadata cache.
    pub fn load(file: &FileShared, addr: u64) -> Result<Arc<ObjectHeader>> {
        Self::load_at(file, addr, 0)
    }

    /// Loads a header, resolving shared messages; `depth` counts headers followed through
    /// shared-message references (a damaged file could make them loop).
    fn load_at(file: &FileShared, addr: u64, depth: usize) -> Result<Arc<ObjectHeader>> {
        if depth > MAX_SHARED_DEPTH {
            return Err(corrupt(
                addr,
                "shared messages refer to each other in a loop",
            ));
        }
        let first: Arc<FirstChunkImage> =
            file.load_with(MetadataKind::ObjectHeader, addr, || first_chunk_load(addr))?;
        Ok(Self::decode_from(file, addr, depth, &first)?.0)
    }

    /// [`load`](Self::load) of a group header being walked through by a path (every open by
    /// name reads its group's): a header decoded from the very image the metadata cache holds
    /// now is not decoded again (see [`HeaderMemo`]).
    pub(crate) fn load_group(file: &FileShared, addr: u64) -> Result<Arc<ObjectHeader>> {
        let first: Arc<FirstChunkImage> =
            file.load_with(MetadataKind::ObjectHeader, addr, || first_chunk_load(addr))?;
        if let Some(h) = file.group_header_memo.get(addr, &first) {
            return Ok(h);
        }
        let (h, standalone) = Self::decode_from(file, addr, 0, &first)?;
        if standalone {
            file.group_header_memo.set(&first, &h);
        }
        Ok(h)
    }

    /// Decodes the header whose chunk #0 is `first`, loading its continuation blocks and
    /// resolving its shared messages; also says whether `first` alone made it (no continuation
    /// block, no shared message).
    fn decode_from(
        file: &FileShared,
        addr: u64,
        depth: usize,
        first: &FirstChunkImage,
    ) -> Result<(Arc<ObjectHeader>, bool)> {
        let mut out = ObjectHeader {
            address: addr,
            version: first.prefix.version,
            // Room for chunk #0's messages: most headers have no continuation block.
            messages: Vec::with_capacity(first.messages.len()),
        };
        // The messages in header order: a continuation block's go after those already known
        // (chunk #0's, then each block's in the order the blocks were found). The messages are
        // decoded from the cached images in place, not copied.
        let mut walk = HeaderWalk {
            file,
            addr,
            depth,
            prefix: first.prefix,
            blocks: Vec::new(),
            visited: std::collections::HashSet::new(),
            shared: false,
            out: &mut out,
        };
        walk.take_all(&first.messages)?;
        let mut next = 0usize;
        while let Some(block) = walk.blocks.get(next).cloned() {
            walk.take_all(&block)?;
            next = next.saturating_add(1);
        }
        let standalone = walk.blocks.is_empty() && !walk.shared;
        Ok((Arc::new(out), standalone))
    }

    /// The relative address of the committed datatype this object's datatype message refers to
    /// (a dataset of a named type), if any.
    pub fn committed_datatype(&self) -> Option<u64> {
        self.messages
            .iter()
            .find(|m| m.kind == kind::DATATYPE)
            .and_then(|m| m.shared_from)
    }

    /// The first message matching `f`.
    pub fn find<T>(&self, f: impl Fn(&Message) -> Option<T>) -> Option<T> {
        self.messages.iter().find_map(|m| f(&m.message))
    }

    /// Every message matching `f`.
    pub fn all<T>(&self, f: impl Fn(&Message) -> Option<T>) -> Vec<T> {
        self.messages.iter().filter_map(|m| f(&m.message)).collect()
    }

    /// Whether the header holds a message of `kind` that it does not understand but must to be
    /// read correctly.
    pub fn unknown_must_understand(&self) -> Option<u16> {
        self.messages.iter().find_map(|m| match m.message {
            Message::Unknown {
                kind,
                must_understand: true,
            } => Some(kind),
            _ => None,
        })
    }
}

fn corrupt(addr: u64, reason: &str) -> Error {
    Error::Format(FormatError::Corrupted {
        structure: "object header",
        address: addr,
        reason: reason.into(),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::ObjectHeader;
    use crate::file::FileShared;
    use crate::nav::resolve;
    use crate::testutil::{new_file, settings};

    /// A group header is decoded once while the metadata cache holds the same image, and again
    /// once the image is changed or replaced, in a file being written as in a read-only one.
    /// The members found through it are right either way.
    #[test]
    fn group_headers_are_decoded_once_per_cached_image() {
        let (storage, file) = new_file(false);
        let g = file.create_group(file.root_address(), "g").unwrap();
        let mut members: Vec<u64> = (0..2)
            .map(|i| file.create_group(g, &format!("m{i}")).unwrap())
            .collect();
        let a = ObjectHeader::load_group(&file, g).unwrap();
        let b = ObjectHeader::load_group(&file, g).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "writable, same image: kept");
        // A third link changes the group's header (links are kept in it while few): the image
        // the memo holds is copied before the change, so the next read decodes the new one.
        members.push(file.create_group(g, "m2").unwrap());
        let c = ObjectHeader::load_group(&file, g).unwrap();
        assert!(
            !Arc::ptr_eq(&a, &c),
            "writable, changed image: decoded again"
        );
        assert_eq!(c.messages.len(), a.messages.len() + 1);
        assert_eq!(
            c.messages.len(),
            ObjectHeader::load(&file, g).unwrap().messages.len()
        );
        for (i, &m) in members.iter().enumerate() {
            let r = resolve(&file, g, "/g", &format!("m{i}")).unwrap();
            assert_eq!(r.header.address, m);
        }
        file.close().unwrap();
        drop(file);

        let file = FileShared::open(storage, &settings(false), None).unwrap();
        let a = ObjectHeader::load_group(&file, g).unwrap();
        let b = ObjectHeader::load_group(&file, g).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "read-only, same image: kept");
        assert_eq!(
            a.messages.len(),
            ObjectHeader::load(&file, g).unwrap().messages.len()
        );
        for (i, &m) in members.iter().enumerate() {
            let r = resolve(&file, g, "/g", &format!("m{i}")).unwrap();
            assert_eq!(r.header.address, m);
        }
        // Another header walked through replaces the kept one; the group's is decoded again.
        let root = file.root_address();
        ObjectHeader::load_group(&file, root).unwrap();
        let c = ObjectHeader::load_group(&file, g).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(a.messages.len(), c.messages.len());
    }
}
