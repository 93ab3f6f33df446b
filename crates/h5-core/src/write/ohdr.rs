//! Writing object headers through the metadata cache: creation, and changes of the message list
//! that re-lay the header over its fixed chunk #0 and at most one continuation block.
//!
//! Invariants: chunk #0 never moves or changes size (links point at it); its message space is
//! at least one continuation message long, so a header can always grow by moving its tail
//! messages into a continuation block; a version 1 prefix counts every message of every chunk,
//! NIL and continuation messages included (libhdf5 checks the count).

use std::any::Any;

use h5_format::Sizes;
use h5_format::message::continuation::Continuation;
use h5_format::message::kind;
use h5_format::object_header::{
    MessageSpec, ObjectHeaderPrefix, encode_continuation_block, encode_first_chunk, message_len,
    messages_len,
};
use h5_metacache::{
    ExpungeFlags, InsertFlags, MetadataCache, MetadataKind, ProtectFlags, UnprotectFlags,
};

use crate::error::{Error, Result};
use crate::file::{FileShared, cache_error};
use crate::meta::{Decoded, Load, Meta};
use crate::object::{
    FirstChunkImage, StoredMessage, block_load, cached_first_chunk_load, first_chunk_load,
};
use crate::write::alloc::SpaceKind;

/// A message to store: type, flags and encoded body.
pub(crate) fn message(kind: u16, flags: u8, body: Vec<u8>) -> StoredMessage {
    StoredMessage {
        kind,
        flags,
        creation_order: None,
        body,
    }
}

fn specs(messages: &[StoredMessage]) -> Vec<MessageSpec<'_>> {
    messages
        .iter()
        .map(|m| MessageSpec {
            kind: m.kind,
            flags: m.flags,
            creation_order: m.creation_order,
            body: &m.body,
        })
        .collect()
}

fn used(prefix: &ObjectHeaderPrefix, messages: &[StoredMessage]) -> usize {
    messages_len(prefix, &specs(messages))
}

/// Bytes of a continuation message in a header like `prefix`.
#[allow(clippy::arithmetic_side_effects, reason = "1-byte sizes")]
fn continuation_len(prefix: &ObjectHeaderPrefix, sizes: Sizes) -> usize {
    message_len(
        prefix,
        2 * usize::from(sizes.offset).max(usize::from(sizes.length)),
    )
}

/// Bytes of chunk #0 on disk (prefix, message space, checksum).
#[allow(
    clippy::arithmetic_side_effects,
    reason = "chunk #0 is in memory (loaded, or built from messages in memory) and its prefix is at most a few dozen bytes: the sum fits in usize"
)]
fn first_chunk_total(prefix: &ObjectHeaderPrefix) -> usize {
    prefix.encoded_len() + prefix.chunk0_size + if prefix.version >= 2 { 4 } else { 0 }
}

fn first_chunk_entry(img: FirstChunkImage) -> Decoded {
    let len = first_chunk_total(&img.prefix);
    Decoded::writable(len, img, |img: &FirstChunkImage| {
        encode_first_chunk(&img.prefix, &specs(&img.messages))
    })
}

fn block_entry(prefix: ObjectHeaderPrefix, messages: Vec<StoredMessage>, len: usize) -> Decoded {
    Decoded::writable(len, messages, move |m: &Vec<StoredMessage>| {
        encode_continuation_block(&prefix, &specs(m), len)
    })
}

/// A new, empty prefix of `version` (`flags`: the attribute creation-order bits of a version 2
/// header).
fn new_prefix(version: u8, flags: u8, chunk0_size: usize) -> ObjectHeaderPrefix {
    if version == 1 {
        ObjectHeaderPrefix::v1(0, 1, chunk0_size)
    } else {
        ObjectHeaderPrefix::v2(flags, None, None, chunk0_size)
    }
}

/// Creates an object header of `version` (1 or 2) holding `messages`; returns its relative
/// address. Chunk #0 is sized to the messages (at least one continuation message).
pub(crate) fn create(file: &FileShared, version: u8, messages: Vec<StoredMessage>) -> Result<u64> {
    create_with_flags(file, version, 0, 0, messages)
}

/// Bytes of a message with a body of `body` bytes in a header like a new one of `version` with
/// `flags`.
pub(crate) fn message_bytes(version: u8, flags: u8, body: usize) -> usize {
    message_len(&new_prefix(version, flags, 0), body)
}

/// [`create`] with the attribute creation-order `flags` of a version 2 header
/// (`header_flags::ATTR_CREATION_ORDER_*`; every message then carries a creation order) and
/// room in chunk #0 for `reserve` more bytes of messages (a NIL message until used).
pub(crate) fn create_with_flags(
    file: &FileShared,
    version: u8,
    flags: u8,
    reserve: usize,
    messages: Vec<StoredMessage>,
) -> Result<u64> {
    create_then(file, version, flags, reserve, messages, |_| Ok(None))
}

/// [`create_with_flags`] calling `placed` with the header's relative address once its space is
/// allocated, before it enters the metadata cache: `placed` may allocate more space (after the
/// header's, as a later allocation would be) and return a new body for one message, `(index,
/// body)`, of the same length as the old one (chunk #0 is sized already).
pub(crate) fn create_then(
    file: &FileShared,
    version: u8,
    flags: u8,
    reserve: usize,
    mut messages: Vec<StoredMessage>,
    placed: impl FnOnce(u64) -> Result<Option<(usize, Vec<u8>)>>,
) -> Result<u64> {
    let probe = new_prefix(version, flags, 0);
    let body = used(&probe, &messages)
        .checked_add(reserve)
        .ok_or_else(|| Error::Invalid(format!("{reserve} bytes to reserve in an object header")))?
        .max(continuation_len(&probe, file.sizes));
    let mut prefix = new_prefix(version, flags, body);
    if version == 1 {
        prefix.message_count = Some(count_u16(messages.len())?);
    }
    let addr = file.allocate(SpaceKind::Meta, first_chunk_total(&prefix) as u64)?;
    if let Some((index, body)) = placed(addr)? {
        match messages.get_mut(index) {
            Some(m) if m.body.len() == body.len() => m.body = body,
            _ => {
                return Err(Error::Invalid(format!(
                    "message {index} of a new header replaced by one of another length"
                )));
            }
        }
    }
    let img = FirstChunkImage { prefix, messages };
    let entry = first_chunk_entry(img);
    let abs = file.abs(addr)?;
    let mut meta = file.meta.lock().map_err(|_| Error::Poisoned)?;
    meta.insert(
        MetadataKind::ObjectHeader.id(),
        abs,
        entry,
        InsertFlags::NONE,
    )
    .map_err(cache_error)?;
    Ok(addr)
}

fn count_u16(n: usize) -> Result<u16> {
    u16::try_from(n).map_err(|_| Error::Unsupported(format!("{n} messages in one object header")))
}

/// Protects `kind` at `abs` read-only just long enough to clone its value out.
fn peek<T: Any + Send + Sync + Clone>(
    meta: &mut MetadataCache<Meta>,
    kind: MetadataKind,
    abs: u64,
    load: &Load,
) -> Result<T> {
    let h = meta
        .protect(kind.id(), abs, load, ProtectFlags::READ_ONLY)
        .map_err(cache_error)?;
    let v = meta.icr(&h).map(|d| d.value.downcast_ref::<T>().cloned());
    meta.unprotect(h, UnprotectFlags::NONE)
        .map_err(|e| Error::Cache(e.error))?;
    v?.ok_or_else(|| Error::Unsupported(format!("{} cached as another type", kind.name())))
}

/// Changes the messages of the header at relative address `addr`: `change` receives every
/// message (NIL and continuation messages left out) in stored order and edits the list; the
/// header is then laid out again over chunk #0 and one new continuation block if needed (the
/// old blocks are freed).
pub(crate) fn update<R>(
    file: &FileShared,
    addr: u64,
    change: impl FnOnce(&mut Vec<StoredMessage>) -> Result<R>,
) -> Result<R> {
    update_with_prefix(file, addr, |_, msgs| change(msgs))
}

/// Changes the object's reference count (hard links to it) by `delta`; returns the new count.
/// A version 1 header keeps it in its prefix; a version 2 header in a reference count message,
/// present only while the count is above 1.
pub(crate) fn adjust_refcount(file: &FileShared, addr: u64, delta: i64) -> Result<u32> {
    update_with_prefix(file, addr, |prefix, msgs| {
        let current = match (
            prefix.reference_count,
            msgs.iter().find(|m| m.kind == kind::REFERENCE_COUNT),
        ) {
            (Some(n), _) => n,
            (None, Some(m)) => {
                h5_format::message::ReferenceCount::decode(&mut h5_format::reader::Reader::new(
                    &m.body,
                    "reference count message",
                    addr,
                ))?
                .count
            }
            (None, None) => 1,
        };
        let new = i64::from(current)
            .checked_add(delta)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "reference count {current} of the object at {addr:#x} changed by {delta}"
                ))
            })?;
        if prefix.reference_count.is_some() {
            prefix.reference_count = Some(new);
        } else {
            msgs.retain(|m| m.kind != kind::REFERENCE_COUNT);
            if new > 1 {
                msgs.push(message(
                    kind::REFERENCE_COUNT,
                    0,
                    h5_format::message::ReferenceCount { count: new }.encode(),
                ));
            }
        }
        Ok(new)
    })
}

/// Removes the object header at relative `addr` from the cache and frees all its chunks;
/// returns its messages (NIL and continuation messages left out) for the caller to free what
/// they point at.
pub(crate) fn delete(file: &FileShared, addr: u64) -> Result<Vec<StoredMessage>> {
    let abs = file.abs(addr)?;
    let mut meta = file.meta.lock().map_err(|_| Error::Poisoned)?;
    let first: FirstChunkImage = peek(
        &mut meta,
        MetadataKind::ObjectHeader,
        abs,
        &first_chunk_load(addr),
    )?;
    let (messages, blocks) = gather(file, &mut meta, &first, addr)?;
    for (a, l) in blocks {
        let a_abs = file.abs(a)?;
        if meta.contains(a_abs) {
            meta.expunge(
                MetadataKind::ObjectHeaderChunk.id(),
                a_abs,
                ExpungeFlags::NONE,
            )
            .map_err(cache_error)?;
        }
        file.free(SpaceKind::Meta, a, l)?;
    }
    if meta.contains(abs) {
        meta.expunge(MetadataKind::ObjectHeader.id(), abs, ExpungeFlags::NONE)
            .map_err(cache_error)?;
    }
    drop(meta);
    file.free(
        SpaceKind::Meta,
        addr,
        first_chunk_total(&first.prefix) as u64,
    )?;
    Ok(messages)
}

/// A continuation block: relative address and length.
type Block = (u64, u64);

/// Every message of the header whose chunk #0 is `first` (NIL and continuation messages left
/// out), in stored order, and the continuation blocks `(address, length)` they came from.
fn gather(
    file: &FileShared,
    meta: &mut MetadataCache<Meta>,
    first: &FirstChunkImage,
    addr: u64,
) -> Result<(Vec<StoredMessage>, Vec<Block>)> {
    let sizes = file.sizes;
    let mut all = Vec::new();
    let mut blocks: Vec<(u64, u64)> = Vec::new();
    // In order: chunk #0's messages, then each continuation block's as it is reached.
    let mut pending = std::collections::VecDeque::from(first.messages.clone());
    while let Some(m) = pending.pop_front() {
        match m.kind {
            kind::NIL => {}
            kind::CONTINUATION => {
                let c = Continuation::decode(
                    &mut h5_format::reader::Reader::new(&m.body, "continuation message", addr),
                    sizes,
                )?;
                if blocks.len() > 4096 || blocks.iter().any(|(a, _)| *a == c.address) {
                    return Err(Error::Unsupported("continuation blocks form a loop".into()));
                }
                let len = usize::try_from(c.length).map_err(|_| {
                    Error::Unsupported("continuation block length does not fit".into())
                })?;
                let block: Vec<StoredMessage> = peek(
                    meta,
                    MetadataKind::ObjectHeaderChunk,
                    file.abs(c.address)?,
                    &block_load(first.prefix, c.address, len),
                )?;
                blocks.push((c.address, c.length));
                pending.extend(block);
            }
            _ => all.push(m),
        }
    }
    Ok((all, blocks))
}

/// Puts `body` in place of the body of the first message of `kind` in `msgs`, padded with zeros
/// to the stored body's length (version 1 headers align bodies to 8 bytes): `None` when there
/// is no such message, `Some(false)` (nothing changed) when its stored body is shorter than
/// `body`.
fn replace_body(msgs: &mut [StoredMessage], kind: u16, body: &[u8]) -> Option<bool> {
    let m = msgs.iter_mut().find(|m| m.kind == kind)?;
    let Some((head, tail)) = m.body.split_at_mut_checked(body.len()) else {
        return Some(false);
    };
    head.copy_from_slice(body);
    tail.fill(0);
    Some(true)
}

/// Replaces, where it is stored, the body of the first message of `kind` in the header at
/// relative `addr` by `body` of the same length (or shorter, padded): nothing moves and no space is allocated or
/// freed (the file-space close sequence needs that). Returns `false`, changing nothing, when
/// the header has no such message or its body has another length.
pub(crate) fn replace_in_place(
    file: &FileShared,
    addr: u64,
    kind: u16,
    body: &[u8],
) -> Result<bool> {
    let sizes = file.sizes;
    let mut meta = file.meta.lock().map_err(|_| Error::Poisoned)?;
    let abs = file.abs(addr)?;
    // A cached header (every resize of a dataset in use) is protected without building a
    // loader for it.
    let load;
    let udata = if meta.contains(abs) {
        cached_first_chunk_load()
    } else {
        load = first_chunk_load(addr);
        &load
    };
    let h = meta
        .protect(
            MetadataKind::ObjectHeader.id(),
            abs,
            udata,
            ProtectFlags::NONE,
        )
        .map_err(cache_error)?;
    // Changed in place (copied first only while a reader holds the value): same length, so
    // the entry's size and encoder stay.
    let in_chunk0 =
        (|| -> Result<std::result::Result<bool, (ObjectHeaderPrefix, Vec<StoredMessage>)>> {
            let icr = meta.icr_mut(&h)?;
            let wrong = || Error::Unsupported("object header cached as another type".into());
            if icr.encode.is_none() {
                // Cached by a reader: it becomes writable (with its encoder) before it changes.
                let img = icr
                    .value
                    .downcast_ref::<FirstChunkImage>()
                    .ok_or_else(wrong)?;
                *icr = first_chunk_entry(img.clone());
            }
            let img = icr.value_mut::<FirstChunkImage>().ok_or_else(wrong)?;
            match replace_body(&mut img.messages, kind, body) {
                Some(replaced) => Ok(Ok(replaced)),
                None => Ok(Err((
                    img.prefix,
                    img.messages
                        .iter()
                        .filter(|m| m.kind == kind::CONTINUATION)
                        .cloned()
                        .collect(),
                ))),
            }
        })();
    let (prefix, conts) = match in_chunk0 {
        Ok(Ok(replaced)) => {
            let flags = if replaced {
                UnprotectFlags::DIRTIED
            } else {
                UnprotectFlags::NONE
            };
            meta.unprotect(h, flags)
                .map_err(|e| Error::Cache(e.error))?;
            return Ok(replaced);
        }
        Ok(Err(rest)) => rest,
        Err(e) => {
            let _ = meta.unprotect(h, UnprotectFlags::NONE);
            return Err(e);
        }
    };
    meta.unprotect(h, UnprotectFlags::NONE)
        .map_err(|e| Error::Cache(e.error))?;
    let continuations = |msgs: &[StoredMessage]| -> Result<Vec<Continuation>> {
        msgs.iter()
            .filter(|m| m.kind == kind::CONTINUATION)
            .map(|m| {
                Ok(Continuation::decode(
                    &mut h5_format::reader::Reader::new(&m.body, "continuation message", addr),
                    sizes,
                )?)
            })
            .collect()
    };
    let mut pending = continuations(&conts)?;
    let mut seen = 0usize;
    while let Some(c) = pending.pop() {
        seen = seen.saturating_add(1);
        if seen > 4096 {
            return Err(Error::Unsupported("continuation blocks form a loop".into()));
        }
        let len = usize::try_from(c.length)
            .map_err(|_| Error::Unsupported("continuation block length does not fit".into()))?;
        let h = meta
            .protect(
                MetadataKind::ObjectHeaderChunk.id(),
                file.abs(c.address)?,
                &block_load(prefix, c.address, len),
                ProtectFlags::NONE,
            )
            .map_err(cache_error)?;
        let msgs = match meta
            .icr(&h)
            .map(|d| d.value.downcast_ref::<Vec<StoredMessage>>().cloned())
        {
            Ok(Some(m)) => m,
            _ => {
                let _ = meta.unprotect(h, UnprotectFlags::NONE);
                return Err(Error::Unsupported(
                    "object header block cached as another type".into(),
                ));
            }
        };
        let mut msgs = msgs;
        match replace_body(&mut msgs, kind, body) {
            Some(true) => {
                let entry = block_entry(prefix, msgs, len);
                if let Ok(icr) = meta.icr_mut(&h) {
                    *icr = entry;
                }
                meta.unprotect(h, UnprotectFlags::DIRTIED)
                    .map_err(|e| Error::Cache(e.error))?;
                return Ok(true);
            }
            Some(false) => {
                let _ = meta.unprotect(h, UnprotectFlags::NONE);
                return Ok(false);
            }
            None => {}
        }
        meta.unprotect(h, UnprotectFlags::NONE)
            .map_err(|e| Error::Cache(e.error))?;
        pending.extend(continuations(&msgs)?);
    }
    Ok(false)
}

/// [`update`] with access to the header's prefix too (reference count, flags).
pub(crate) fn update_with_prefix<R>(
    file: &FileShared,
    addr: u64,
    change: impl FnOnce(&mut ObjectHeaderPrefix, &mut Vec<StoredMessage>) -> Result<R>,
) -> Result<R> {
    let abs = file.abs(addr)?;
    let mut meta = file.meta.lock().map_err(|_| Error::Poisoned)?;
    let h = meta
        .protect(
            MetadataKind::ObjectHeader.id(),
            abs,
            &first_chunk_load(addr),
            ProtectFlags::NONE,
        )
        .map_err(cache_error)?;
    let gathered = (|| -> Result<_> {
        let first = meta
            .icr(&h)?
            .value
            .downcast_ref::<FirstChunkImage>()
            .cloned()
            .ok_or_else(|| Error::Unsupported("object header cached as another type".into()))?;
        let (all, blocks) = gather(file, &mut meta, &first, addr)?;
        Ok((first.prefix, all, blocks))
    })();
    let (mut prefix, mut all, old_blocks) = match gathered {
        Ok(g) => g,
        Err(e) => {
            let _ = meta.unprotect(h, UnprotectFlags::NONE);
            return Err(e);
        }
    };
    let result = (|| -> Result<(R, Decoded)> {
        let r = change(&mut prefix, &mut all)?;
        for (a, l) in &old_blocks {
            let a_abs = file.abs(*a)?;
            if meta.contains(a_abs) {
                meta.expunge(
                    MetadataKind::ObjectHeaderChunk.id(),
                    a_abs,
                    ExpungeFlags::NONE,
                )
                .map_err(cache_error)?;
            }
            file.free(SpaceKind::Meta, *a, *l)?;
        }
        let entry = lay_out(file, &mut meta, prefix, all)?;
        Ok((r, entry))
    })();
    match result {
        Ok((r, entry)) => {
            match meta.icr_mut(&h) {
                Ok(icr) => *icr = entry,
                Err(e) => {
                    let _ = meta.unprotect(h, UnprotectFlags::NONE);
                    return Err(e.into());
                }
            }
            meta.unprotect(h, UnprotectFlags::DIRTIED)
                .map_err(|e| Error::Cache(e.error))?;
            Ok(r)
        }
        Err(e) => {
            let _ = meta.unprotect(h, UnprotectFlags::NONE);
            Err(e)
        }
    }
}

/// Lays `all` over chunk #0 (capacity fixed by `prefix`) and, when they do not fit, one new
/// continuation block inserted into the cache; returns chunk #0's new cache value.
fn lay_out(
    file: &FileShared,
    meta: &mut MetadataCache<Meta>,
    mut prefix: ObjectHeaderPrefix,
    all: Vec<StoredMessage>,
) -> Result<Decoded> {
    let cap = prefix.chunk0_size;
    let mut first = all;
    let mut rest = Vec::new();
    if used(&prefix, &first) > cap {
        let cont = continuation_len(&prefix, file.sizes);
        // The longest head that leaves room for the continuation message.
        let fits = |head: &[StoredMessage]| used(&prefix, head).saturating_add(cont) <= cap;
        let Some(k) = (0..=first.len())
            .rev()
            .find(|&k| first.get(..k).is_some_and(fits))
        else {
            return Err(Error::Unsupported(format!(
                "object header at {:#x}: chunk #0 of {cap} bytes cannot hold a continuation message",
                file.abs(0).unwrap_or(0)
            )));
        };
        rest = first.split_off(k);
        let block_area = used(&prefix, &rest);
        #[allow(
            clippy::arithmetic_side_effects,
            reason = "messages in memory, plus the block signature and checksum"
        )]
        let block_len = block_area + if prefix.version >= 2 { 8 } else { 0 };
        let at = file.allocate(SpaceKind::Meta, block_len as u64)?;
        let body = Continuation {
            address: at,
            length: block_len as u64,
        }
        .encode(file.sizes);
        first.push(message(kind::CONTINUATION, 0, body));
        meta.insert(
            MetadataKind::ObjectHeaderChunk.id(),
            file.abs(at)?,
            block_entry(prefix, rest.clone(), block_len),
            InsertFlags::NONE,
        )
        .map_err(cache_error)?;
    }
    if prefix.version == 1 {
        let nil0 = usize::from(used(&prefix, &first) < cap);
        // The continuation block is sized to its messages exactly: it holds no NIL message.
        #[allow(
            clippy::arithmetic_side_effects,
            reason = "counts of messages in memory"
        )]
        let total = first.len() + nil0 + rest.len();
        prefix.message_count = Some(count_u16(total)?);
    }
    Ok(first_chunk_entry(FirstChunkImage {
        prefix,
        messages: first,
    }))
}
