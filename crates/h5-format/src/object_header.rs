//! Object headers, versions 1 and 2: the prefix, the first chunk and continuation blocks, each
//! split into raw messages (decoded further by [`crate::message::decode_message`]).
//!
//! Layouts (spec §IV.A):
//!
//! * Version 1 prefix (16 bytes): version(1) = 1, reserved(1), total number of messages(2),
//!   object reference count(4), size of chunk #0's message data(4), reserved(4) so the data is
//!   8-byte aligned. Message header (8 bytes): type(2) size(2) flags(1) reserved(3); the size
//!   includes padding to a multiple of 8. Continuation blocks hold messages only.
//! * Version 2 prefix: `OHDR`, version(1) = 2, flags(1), [times: access, modification, change,
//!   birth (4 each) if flag bit 5], [max compact / min dense attributes (2 each) if bit 4],
//!   size of chunk #0 (1, 2, 4 or 8 bytes as flag bits 0–1 say). Then chunk #0's messages, a
//!   gap smaller than a message header, and a lookup3 checksum of everything before it. Message
//!   header: type(1) size(2) flags(1) [creation order(2) if header flag bit 2]. Continuation
//!   blocks: `OCHK`, messages, gap, checksum.
//!
//! The metadata cache loads [`PREFIX_MAX_LEN`] bytes (or fewer at the end of the file), asks
//! [`needed_len`] for chunk #0's full size, reloads, and calls [`decode_first_chunk`].
//! Continuation blocks have their length in the continuation message.
//!
//! Encoding is the inverse: [`encode_first_chunk`] lays out a prefix and a list of
//! [`MessageSpec`]s into chunk #0 of the size the prefix gives, filling the unused space with a
//! NIL message (or, in version 2, a gap smaller than a message header), and
//! [`encode_continuation_block`] does the same for a continuation block of a given length.
//! [`messages_len`] and [`ObjectHeaderPrefix::encoded_len`] give the sizes beforehand.

use crate::checksum::lookup3;
use crate::error::{FormatError, Result};
use crate::reader::{Reader, UNDEFINED_ADDRESS};
use crate::writer::Writer;

const NAME: &str = "object header";
const CONT_NAME: &str = "object header continuation block";

/// The most bytes any prefix takes (version 2 with times and phase-change values and an 8-byte
/// chunk size): enough for [`needed_len`].
pub const PREFIX_MAX_LEN: usize = 4 + 1 + 1 + 16 + 4 + 8;

/// Message flag bits (one byte in every message header).
pub mod msg_flags {
    /// The message is constant (never changes).
    pub const CONSTANT: u8 = 0x01;
    /// The message body is a shared-message reference, not the message itself.
    pub const SHARED: u8 = 0x02;
    /// The message must not be shared.
    pub const DONT_SHARE: u8 = 0x04;
    /// If the type is unknown, the object must not be opened for writing.
    pub const FAIL_IF_UNKNOWN_AND_WRITE: u8 = 0x08;
    /// If the type is unknown, set [`WAS_UNKNOWN`] when the object is modified.
    pub const MARK_IF_UNKNOWN: u8 = 0x10;
    /// An unknown message that a writer which did not understand it has modified.
    pub const WAS_UNKNOWN: u8 = 0x20;
    /// The message may be shared.
    pub const SHAREABLE: u8 = 0x40;
    /// If the type is unknown, the object must not be opened at all.
    pub const FAIL_IF_UNKNOWN_ALWAYS: u8 = 0x80;
}

/// Version 2 header flag bits.
pub mod header_flags {
    /// Bits 0–1: width of the chunk #0 size field (1 << value bytes).
    pub const CHUNK0_SIZE_MASK: u8 = 0x03;
    /// Attribute creation order is tracked (messages carry a creation-order field).
    pub const ATTR_CREATION_ORDER_TRACKED: u8 = 0x04;
    /// Attribute creation order is indexed.
    pub const ATTR_CREATION_ORDER_INDEXED: u8 = 0x08;
    /// Non-default attribute storage phase-change values are stored.
    pub const ATTR_PHASE_CHANGE_STORED: u8 = 0x10;
    /// Access, modification, change and birth times are stored.
    pub const TIMES_STORED: u8 = 0x20;
    /// All defined bits.
    pub const ALL: u8 = 0x3f;
}

/// The four times a version 2 header may store (seconds since the Unix epoch).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ObjectTimes {
    /// Last access.
    pub access: u32,
    /// Last modification of the data.
    pub modification: u32,
    /// Last change of the metadata.
    pub change: u32,
    /// Creation.
    pub birth: u32,
}

/// Attribute storage phase-change thresholds stored in a version 2 header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AttributePhaseChange {
    /// Most attributes kept in the header before switching to dense storage.
    pub max_compact: u16,
    /// Fewest attributes kept in dense storage before switching back.
    pub min_dense: u16,
}

/// A decoded object header prefix.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ObjectHeaderPrefix {
    /// Header version (1 or 2).
    pub version: u8,
    /// Version 2 header flags ([`header_flags`]); 0 for version 1.
    pub flags: u8,
    /// Version 1: total number of messages over all chunks.
    pub message_count: Option<u16>,
    /// Version 1: the object's reference count (version 2 keeps it in a message).
    pub reference_count: Option<u32>,
    /// Version 2: the stored times, if any.
    pub times: Option<ObjectTimes>,
    /// Version 2: the stored attribute phase-change values, if any.
    pub attribute_phase_change: Option<AttributePhaseChange>,
    /// Bytes of chunk #0's message data (messages and gap; no prefix, no checksum).
    pub chunk0_size: usize,
    /// Bytes before chunk #0's message data.
    pub prefix_len: usize,
}

impl ObjectHeaderPrefix {
    /// Decodes the prefix at the start of `bytes` (at least the prefix; more is ignored) of the
    /// header at file `address`.
    pub fn decode(bytes: &[u8], address: u64) -> Result<ObjectHeaderPrefix> {
        let mut r = Reader::new(bytes, NAME, address);
        if bytes.starts_with(b"OHDR") {
            r.skip(4)?;
            let version = r.u8()?;
            if version != 2 {
                return Err(r.unsupported(format!("OHDR version {version}")));
            }
            let flags = r.u8()?;
            if flags & !header_flags::ALL != 0 {
                return Err(r.corrupted(format!("unknown header flags {flags:#04x}")));
            }
            let times = if flags & header_flags::TIMES_STORED != 0 {
                Some(ObjectTimes {
                    access: r.u32()?,
                    modification: r.u32()?,
                    change: r.u32()?,
                    birth: r.u32()?,
                })
            } else {
                None
            };
            let attribute_phase_change = if flags & header_flags::ATTR_PHASE_CHANGE_STORED != 0 {
                Some(AttributePhaseChange {
                    max_compact: r.u16()?,
                    min_dense: r.u16()?,
                })
            } else {
                None
            };
            let width = 1usize << (flags & header_flags::CHUNK0_SIZE_MASK);
            let size = r.uint(width)?;
            let chunk0_size =
                usize::try_from(size).map_err(|_| r.corrupted("chunk #0 size overflows"))?;
            // The first chunk must be able to hold the checksum after it without overflow.
            if chunk0_size > usize::MAX / 2 {
                return Err(r.corrupted("chunk #0 size overflows"));
            }
            Ok(ObjectHeaderPrefix {
                version,
                flags,
                message_count: None,
                reference_count: None,
                times,
                attribute_phase_change,
                chunk0_size,
                prefix_len: r.pos(),
            })
        } else {
            let version = r.u8()?;
            if version != 1 {
                return Err(r.corrupted(format!(
                    "object header version {version} (neither 1 nor OHDR)"
                )));
            }
            r.skip(1)?;
            let message_count = r.u16()?;
            let reference_count = r.u32()?;
            let size = r.u32()?;
            r.skip(4)?;
            let chunk0_size =
                usize::try_from(size).map_err(|_| r.corrupted("chunk #0 size overflows"))?;
            Ok(ObjectHeaderPrefix {
                version,
                flags: 0,
                message_count: Some(message_count),
                reference_count: Some(reference_count),
                times: None,
                attribute_phase_change: None,
                chunk0_size,
                prefix_len: r.pos(),
            })
        }
    }

    /// Whether message headers carry a creation-order field (version 2, flag bit 2).
    pub fn tracks_creation_order(&self) -> bool {
        self.flags & header_flags::ATTR_CREATION_ORDER_TRACKED != 0
    }

    /// Whether attribute creation order is indexed (version 2, flag bit 3).
    pub fn indexes_creation_order(&self) -> bool {
        self.flags & header_flags::ATTR_CREATION_ORDER_INDEXED != 0
    }

    /// Total bytes of the first chunk: prefix, message data and (version 2) checksum.
    pub fn first_chunk_len(&self) -> Result<usize> {
        let checksum = if self.version >= 2 { 4 } else { 0 };
        self.prefix_len
            .checked_add(self.chunk0_size)
            .and_then(|n| n.checked_add(checksum))
            .ok_or(FormatError::Corrupted {
                structure: NAME,
                address: crate::reader::UNDEFINED_ADDRESS,
                reason: "chunk #0 size overflows".into(),
            })
    }

    /// Bytes of a message header in this object header.
    pub fn message_header_len(&self) -> usize {
        match (self.version, self.tracks_creation_order()) {
            (1, _) => 8,
            (_, true) => 6,
            (_, false) => 4,
        }
    }
}

/// The error for a header that cannot be encoded as asked.
fn unencodable(structure: &'static str, what: String) -> FormatError {
    FormatError::Unsupported {
        structure,
        address: UNDEFINED_ADDRESS,
        what,
    }
}

/// The chunk #0 size field's width code (flag bits 0–1) for `size`: the narrowest of 1, 2, 4
/// and 8 bytes that holds it, as libhdf5 chooses.
pub fn chunk0_size_code(size: usize) -> u8 {
    match size as u64 {
        0..=0xff => 0,
        0x100..=0xffff => 1,
        0x1_0000..=0xffff_ffff => 2,
        _ => 3,
    }
}

impl ObjectHeaderPrefix {
    /// A version 1 prefix.
    pub fn v1(message_count: u16, reference_count: u32, chunk0_size: usize) -> Self {
        ObjectHeaderPrefix {
            version: 1,
            flags: 0,
            message_count: Some(message_count),
            reference_count: Some(reference_count),
            times: None,
            attribute_phase_change: None,
            chunk0_size,
            prefix_len: 16,
        }
    }

    /// A version 2 prefix. `flags` is taken for its creation-order bits
    /// ([`header_flags::ATTR_CREATION_ORDER_TRACKED`], [`header_flags::ATTR_CREATION_ORDER_INDEXED`]);
    /// the times, phase-change and size-width bits follow from the other arguments.
    pub fn v2(
        flags: u8,
        times: Option<ObjectTimes>,
        attribute_phase_change: Option<AttributePhaseChange>,
        chunk0_size: usize,
    ) -> Self {
        let mut flags = flags
            & (header_flags::ATTR_CREATION_ORDER_TRACKED
                | header_flags::ATTR_CREATION_ORDER_INDEXED);
        if times.is_some() {
            flags |= header_flags::TIMES_STORED;
        }
        if attribute_phase_change.is_some() {
            flags |= header_flags::ATTR_PHASE_CHANGE_STORED;
        }
        flags |= chunk0_size_code(chunk0_size);
        let mut p = ObjectHeaderPrefix {
            version: 2,
            flags,
            message_count: None,
            reference_count: None,
            times,
            attribute_phase_change,
            chunk0_size,
            prefix_len: 0,
        };
        p.prefix_len = p.encoded_len();
        p
    }

    /// The flags byte as encoded: for version 2, the stored flags with the times and
    /// phase-change bits set from [`Self::times`] and [`Self::attribute_phase_change`] and the
    /// size-width bits wide enough for [`Self::chunk0_size`] ([`chunk0_size_code`], or the
    /// stored width if wider).
    fn encoded_flags(&self) -> u8 {
        let mut flags = self.flags
            & !(header_flags::CHUNK0_SIZE_MASK
                | header_flags::TIMES_STORED
                | header_flags::ATTR_PHASE_CHANGE_STORED);
        if self.times.is_some() {
            flags |= header_flags::TIMES_STORED;
        }
        if self.attribute_phase_change.is_some() {
            flags |= header_flags::ATTR_PHASE_CHANGE_STORED;
        }
        // A stored width wider than needed is kept (decode then encode is exact).
        let code =
            (self.flags & header_flags::CHUNK0_SIZE_MASK).max(chunk0_size_code(self.chunk0_size));
        flags | code
    }

    /// Bytes of the encoded prefix (what [`Self::prefix_len`] is after decoding): 16 for
    /// version 1; for version 2, 6 plus the times, phase-change values and size field.
    #[allow(
        clippy::arithmetic_side_effects,
        reason = "at most 6 + 2^3 + 16 + 4 bytes"
    )]
    pub fn encoded_len(&self) -> usize {
        if self.version == 1 {
            return 16;
        }
        let f = self.encoded_flags();
        let mut n = 6 + (1usize << (f & header_flags::CHUNK0_SIZE_MASK));
        if self.times.is_some() {
            n += 16;
        }
        if self.attribute_phase_change.is_some() {
            n += 4;
        }
        n
    }

    /// Encodes the prefix ([`Self::encoded_len`] bytes). Version 1 writes
    /// [`Self::message_count`] (0 if absent), the reference count (1 if absent), and the chunk
    /// size, which must fit 4 bytes. `prefix_len` is ignored.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut w = Writer::with_capacity(self.encoded_len());
        match self.version {
            1 => {
                let size = u32::try_from(self.chunk0_size).map_err(|_| {
                    unencodable(NAME, format!("v1 chunk #0 size {}", self.chunk0_size))
                })?;
                w.u8(1);
                w.u8(0);
                w.u16(self.message_count.unwrap_or(0));
                w.u32(self.reference_count.unwrap_or(1));
                w.u32(size);
                w.zeros(4);
            }
            2 => {
                let flags = self.encoded_flags();
                w.bytes(b"OHDR");
                w.u8(2);
                w.u8(flags);
                if let Some(t) = self.times {
                    for v in [t.access, t.modification, t.change, t.birth] {
                        w.u32(v);
                    }
                }
                if let Some(p) = self.attribute_phase_change {
                    w.u16(p.max_compact);
                    w.u16(p.min_dense);
                }
                w.uint(
                    self.chunk0_size as u64,
                    1 << (flags & header_flags::CHUNK0_SIZE_MASK),
                );
            }
            v => return Err(unencodable(NAME, format!("object header version {v}"))),
        }
        Ok(w.into_bytes())
    }
}

/// One message to encode into an object header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MessageSpec<'a> {
    /// Message type (must fit one byte in version 2 headers).
    pub kind: u16,
    /// Message flags ([`msg_flags`]).
    pub flags: u8,
    /// Creation order, written when the header tracks it (0 if absent).
    pub creation_order: Option<u16>,
    /// The message body (version 1 pads it with zeros to a multiple of 8).
    pub body: &'a [u8],
}

impl<'a> MessageSpec<'a> {
    /// A message without a creation order.
    pub fn new(kind: u16, flags: u8, body: &'a [u8]) -> Self {
        MessageSpec {
            kind,
            flags,
            creation_order: None,
            body,
        }
    }
}

impl<'a> From<&RawMessage<'a>> for MessageSpec<'a> {
    fn from(m: &RawMessage<'a>) -> Self {
        MessageSpec {
            kind: m.kind,
            flags: m.flags,
            creation_order: m.creation_order,
            body: m.body,
        }
    }
}

/// Bytes one message with a `body_len`-byte body takes in a header of `header`'s version and
/// creation-order tracking (message header plus body; version 1 rounds the body up to 8).
pub fn message_len(header: &ObjectHeaderPrefix, body_len: usize) -> usize {
    if header.version == 1 {
        body_len.div_ceil(8).saturating_mul(8).saturating_add(8)
    } else {
        header.message_header_len().saturating_add(body_len)
    }
}

/// Bytes `messages` take in a chunk of a header like `header` (no gap, prefix or checksum).
pub fn messages_len(header: &ObjectHeaderPrefix, messages: &[MessageSpec<'_>]) -> usize {
    messages
        .iter()
        .map(|m| message_len(header, m.body.len()))
        .fold(0, usize::saturating_add)
}

/// Appends `messages` and fills the `area` bytes of message space with a NIL message (or a
/// zero gap shorter than a message header, version 2 only).
fn write_messages(
    w: &mut Writer,
    header: &ObjectHeaderPrefix,
    messages: &[MessageSpec<'_>],
    area: usize,
    structure: &'static str,
) -> Result<()> {
    let used = messages_len(header, messages);
    let Some(free) = area.checked_sub(used) else {
        return Err(unencodable(
            structure,
            format!("messages of {used} bytes in {area} bytes"),
        ));
    };
    for m in messages {
        let size = if header.version == 1 {
            m.body.len().div_ceil(8).saturating_mul(8)
        } else {
            m.body.len()
        };
        let size = u16::try_from(size)
            .map_err(|_| unencodable(structure, format!("message body of {size} bytes")))?;
        write_message_header(
            w,
            header,
            m.kind,
            size,
            m.flags,
            m.creation_order,
            structure,
        )?;
        w.bytes(m.body);
        if header.version == 1 {
            w.align(8);
        }
    }
    let hdr = header.message_header_len();
    if free >= hdr {
        let size = u16::try_from(free.saturating_sub(hdr))
            .map_err(|_| unencodable(structure, format!("{free} free bytes")))?;
        if header.version == 1 && free % 8 != 0 {
            return Err(unencodable(
                structure,
                format!("{free} free bytes in a version 1 header (not a multiple of 8)"),
            ));
        }
        write_message_header(w, header, 0, size, 0, None, structure)?;
        w.zeros(usize::from(size));
    } else if free > 0 {
        if header.version == 1 {
            return Err(unencodable(
                structure,
                format!("{free} free bytes in a version 1 header (less than a message)"),
            ));
        }
        w.zeros(free);
    }
    Ok(())
}

/// Appends one message header.
fn write_message_header(
    w: &mut Writer,
    header: &ObjectHeaderPrefix,
    kind: u16,
    size: u16,
    flags: u8,
    creation_order: Option<u16>,
    structure: &'static str,
) -> Result<()> {
    if header.version == 1 {
        w.u16(kind);
        w.u16(size);
        w.u8(flags);
        w.zeros(3);
    } else {
        let kind = u8::try_from(kind).map_err(|_| {
            unencodable(
                structure,
                format!("message type {kind:#06x} in a v2 header"),
            )
        })?;
        w.u8(kind);
        w.u16(size);
        w.u8(flags);
        if header.tracks_creation_order() {
            w.u16(creation_order.unwrap_or(0));
        }
    }
    Ok(())
}

/// Encodes chunk #0: `prefix` (whose [`ObjectHeaderPrefix::chunk0_size`] is the message
/// space, at least [`messages_len`] of `messages`), the messages, then a NIL message over the
/// rest (a zero gap if the rest is shorter than a message header, version 2) and, for version
/// 2, the checksum. The result is [`ObjectHeaderPrefix::first_chunk_len`] bytes long.
///
/// Version 1 message space must be a multiple of 8 and the rest 0 or at least 8 bytes.
pub fn encode_first_chunk(
    prefix: &ObjectHeaderPrefix,
    messages: &[MessageSpec<'_>],
) -> Result<Vec<u8>> {
    // The capacity only saves regrowth; a damaged size cannot make it large.
    let mut w = Writer::with_capacity(prefix.first_chunk_len().unwrap_or(0).min(1 << 16));
    w.bytes(&prefix.encode()?);
    write_messages(&mut w, prefix, messages, prefix.chunk0_size, NAME)?;
    if prefix.version >= 2 {
        w.checksum_from(0);
    }
    Ok(w.into_bytes())
}

/// Encodes a continuation block of `block_len` bytes (the continuation message's length) of a
/// header whose prefix is `header`: for version 2 `OCHK`, the messages, a NIL message or gap,
/// and the checksum; for version 1 the messages and a NIL message.
pub fn encode_continuation_block(
    header: &ObjectHeaderPrefix,
    messages: &[MessageSpec<'_>],
    block_len: usize,
) -> Result<Vec<u8>> {
    let mut w = Writer::with_capacity(block_len);
    let area = if header.version >= 2 {
        w.bytes(b"OCHK");
        block_len.checked_sub(8)
    } else {
        Some(block_len)
    };
    let Some(area) = area else {
        return Err(unencodable(
            CONT_NAME,
            format!("continuation block of {block_len} bytes"),
        ));
    };
    write_messages(&mut w, header, messages, area, CONT_NAME)?;
    if header.version >= 2 {
        w.checksum_from(0);
    }
    Ok(w.into_bytes())
}

/// The full size of the first chunk of the header at `address`, from a prefix of its bytes
/// ([`PREFIX_MAX_LEN`] bytes always suffice).
pub fn needed_len(prefix: &[u8], address: u64) -> Result<usize> {
    ObjectHeaderPrefix::decode(prefix, address)?.first_chunk_len()
}

/// One message as stored, not yet decoded.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RawMessage<'a> {
    /// Message type (0x0000 null, 0x0001 dataspace, …).
    pub kind: u16,
    /// Message flags ([`msg_flags`]).
    pub flags: u8,
    /// Creation order (version 2 headers that track it).
    pub creation_order: Option<u16>,
    /// The message body.
    pub body: &'a [u8],
    /// Offset of the message's header from the start of the chunk's bytes (for chunk #0, from
    /// the object header address; for a continuation block, from the block address).
    pub offset_in_block: usize,
    /// Offset of the body from the start of the chunk's bytes.
    pub body_offset: usize,
}

impl RawMessage<'_> {
    /// The body is a shared-message reference (flag bit 1).
    pub fn is_shared(&self) -> bool {
        self.flags & msg_flags::SHARED != 0
    }

    /// The message is constant (flag bit 0).
    pub fn is_constant(&self) -> bool {
        self.flags & msg_flags::CONSTANT != 0
    }

    /// An unknown type forbids opening the object for writing (flag bit 3).
    pub fn must_understand_to_write(&self) -> bool {
        self.flags & msg_flags::FAIL_IF_UNKNOWN_AND_WRITE != 0
    }

    /// An unknown type forbids opening the object at all (flag bit 7).
    pub fn must_understand(&self) -> bool {
        self.flags & msg_flags::FAIL_IF_UNKNOWN_ALWAYS != 0
    }
}

/// Chunk #0 of an object header: its prefix and messages.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FirstChunk<'a> {
    /// The prefix.
    pub prefix: ObjectHeaderPrefix,
    /// The messages of chunk #0, null messages included, in stored order.
    pub messages: Vec<RawMessage<'a>>,
}

/// Decodes chunk #0 of the header at `address`: `bytes` starts at the header and holds at least
/// [`needed_len`] bytes. Verifies the version 2 checksum.
pub fn decode_first_chunk(bytes: &[u8], address: u64) -> Result<FirstChunk<'_>> {
    let prefix = ObjectHeaderPrefix::decode(bytes, address)?;
    let len = prefix.first_chunk_len()?;
    let Some(bytes) = bytes.get(..len) else {
        return Err(FormatError::Truncated {
            structure: NAME,
            address,
            needed: len as u64,
            available: bytes.len() as u64,
        });
    };
    let messages = split_messages(bytes, prefix.prefix_len, &prefix, NAME, address)?;
    Ok(FirstChunk { prefix, messages })
}

/// Decodes a continuation block of a header whose prefix is `header`: `bytes` is exactly the
/// block (its length comes from the continuation message), at file `address`. Verifies the
/// `OCHK` signature and checksum for version 2.
pub fn decode_continuation_block<'a>(
    bytes: &'a [u8],
    header: &ObjectHeaderPrefix,
    address: u64,
) -> Result<Vec<RawMessage<'a>>> {
    let start = if header.version >= 2 {
        let mut r = Reader::new(bytes, CONT_NAME, address);
        r.signature(b"OCHK")?;
        4
    } else {
        0
    };
    split_messages(bytes, start, header, CONT_NAME, address)
}

/// Splits `block[start..]` into messages. For version 2, the last 4 bytes of `block` are the
/// checksum of everything before them.
fn split_messages<'a>(
    block: &'a [u8],
    start: usize,
    header: &ObjectHeaderPrefix,
    structure: &'static str,
    address: u64,
) -> Result<Vec<RawMessage<'a>>> {
    let whole = Reader::new(block, structure, address);
    let data_end = if header.version >= 2 {
        let end = block
            .len()
            .checked_sub(4)
            .filter(|&e| e >= start)
            .ok_or_else(|| whole.corrupted("block too small for its checksum"))?;
        let mut tail = Reader::new(block, structure, address);
        tail.skip(end)?;
        let stored = tail.u32()?;
        let computed = lookup3(block.get(..end).unwrap_or_default(), 0);
        if !crate::checksum::matches(stored, computed) {
            return Err(whole.corrupted(format!(
                "checksum {stored:#010x} stored, {computed:#010x} computed"
            )));
        }
        end
    } else {
        block.len()
    };
    let area = block
        .get(start..data_end)
        .ok_or_else(|| whole.corrupted("message area out of bounds"))?;
    let mut r = Reader::new(area, structure, address.saturating_add(start as u64));
    let hdr_len = header.message_header_len();
    let mut out = Vec::new();
    // Invariant: `r` is at a message header or in the final gap. A remainder smaller than a
    // message header is the gap (version 2) or padding (version 1).
    while r.remaining() >= hdr_len {
        // Both within the block: `r` covers part of it from `start`.
        let offset_in_block = start.saturating_add(r.pos());
        let (kind, size, flags, creation_order) = if header.version == 1 {
            let kind = r.u16()?;
            let size = r.u16()?;
            let flags = r.u8()?;
            r.skip(3)?;
            if size % 8 != 0 {
                return Err(r.corrupted(format!(
                    "message of type {kind:#06x} size {size} not a multiple of 8"
                )));
            }
            (kind, size, flags, None)
        } else {
            let kind = u16::from(r.u8()?);
            let size = r.u16()?;
            let flags = r.u8()?;
            let co = if header.tracks_creation_order() {
                Some(r.u16()?)
            } else {
                None
            };
            (kind, size, flags, co)
        };
        let body_offset = start.saturating_add(r.pos());
        let body = r.bytes(usize::from(size)).map_err(|_| {
            r.corrupted(format!(
                "message of type {kind:#06x} ({size} bytes) runs past the chunk"
            ))
        })?;
        out.push(RawMessage {
            kind,
            flags,
            creation_order,
            body,
            offset_in_block,
            body_offset,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Version 1 header: 16-byte prefix, then a null message (8 bytes of body) and a symbol
    /// table message (16 bytes of body).
    fn v1_image() -> Vec<u8> {
        let mut b = vec![1, 0]; // version 1, reserved
        b.extend_from_slice(&2u16.to_le_bytes()); // 2 messages
        b.extend_from_slice(&1u32.to_le_bytes()); // reference count 1
        b.extend_from_slice(&40u32.to_le_bytes()); // chunk #0: 8+8 + 8+16 bytes
        b.extend_from_slice(&[0; 4]); // alignment padding
        b.extend_from_slice(&[0, 0, 8, 0, 0, 0, 0, 0]); // null message, 8 bytes
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&[0x11, 0, 16, 0, 1, 0, 0, 0]); // symbol table, constant
        b.extend_from_slice(&0x88u64.to_le_bytes());
        b.extend_from_slice(&0x2a8u64.to_le_bytes());
        b
    }

    /// Version 2 header with times, phase change and creation order, 1-byte chunk size: one
    /// link-info message (type 2, 18 bytes, creation order 7) and a 3-byte gap.
    fn v2_image() -> Vec<u8> {
        let mut b = b"OHDR".to_vec();
        b.push(2);
        b.push(0x20 | 0x10 | 0x04); // times, phase change, creation order; size width 1
        for t in [1u32, 2, 3, 4] {
            b.extend_from_slice(&t.to_le_bytes());
        }
        b.extend_from_slice(&8u16.to_le_bytes()); // max compact
        b.extend_from_slice(&6u16.to_le_bytes()); // min dense
        b.push(6 + 18 + 3); // chunk #0 size
        b.extend_from_slice(&[2, 18, 0, 0x01, 7, 0]); // type 2, size 18, constant, order 7
        b.extend_from_slice(&[0, 0]); // link info: version 0, flags 0
        b.extend_from_slice(&u64::MAX.to_le_bytes()); // fractal heap: undefined
        b.extend_from_slice(&u64::MAX.to_le_bytes()); // name index: undefined
        b.extend_from_slice(&[0, 0, 0]); // gap
        let c = lookup3(&b, 0);
        b.extend_from_slice(&c.to_le_bytes());
        b
    }

    #[test]
    fn decodes_v1() {
        let b = v1_image();
        assert_eq!(needed_len(&b[..16], 0x60).unwrap(), 56);
        let c = decode_first_chunk(&b, 0x60).unwrap();
        assert_eq!(c.prefix.message_count, Some(2));
        assert_eq!(c.prefix.reference_count, Some(1));
        assert_eq!(c.messages.len(), 2);
        let m = c.messages[1];
        assert_eq!((m.kind, m.flags, m.body.len()), (0x11, 1, 16));
        assert_eq!((m.offset_in_block, m.body_offset), (32, 40));
        assert!(m.is_constant() && !m.is_shared());
        // The same messages as a continuation block.
        let cont = decode_continuation_block(&b[16..], &c.prefix, 0x1000).unwrap();
        assert_eq!(cont.len(), 2);
        assert_eq!(cont[1].body_offset, 24);
    }

    #[test]
    fn decodes_v2() {
        let b = v2_image();
        assert_eq!(
            needed_len(&b[..PREFIX_MAX_LEN.min(b.len())], 0).unwrap(),
            b.len()
        );
        let c = decode_first_chunk(&b, 0).unwrap();
        assert_eq!(
            c.prefix.times,
            Some(ObjectTimes {
                access: 1,
                modification: 2,
                change: 3,
                birth: 4
            })
        );
        assert_eq!(
            c.prefix.attribute_phase_change,
            Some(AttributePhaseChange {
                max_compact: 8,
                min_dense: 6
            })
        );
        assert!(c.prefix.tracks_creation_order());
        assert_eq!(c.messages.len(), 1);
        assert_eq!(c.messages[0].kind, 2);
        assert_eq!(c.messages[0].creation_order, Some(7));
        assert_eq!(c.messages[0].body.len(), 18);
    }

    #[test]
    fn decodes_v2_continuation() {
        let hdr = ObjectHeaderPrefix::decode(&v2_image(), 0).unwrap();
        let mut b = b"OCHK".to_vec();
        b.extend_from_slice(&[0x10, 16, 0, 0, 0, 0]); // continuation message, order 0
        b.extend_from_slice(&0x400u64.to_le_bytes());
        b.extend_from_slice(&0x20u64.to_le_bytes());
        let c = lookup3(&b, 0);
        b.extend_from_slice(&c.to_le_bytes());
        let msgs = decode_continuation_block(&b, &hdr, 0x300).unwrap();
        assert_eq!(msgs.len(), 1);
        assert_eq!((msgs[0].kind, msgs[0].offset_in_block), (0x10, 4));
        b[10] ^= 1;
        assert!(decode_continuation_block(&b, &hdr, 0x300).is_err());
        b[0] = b'X';
        assert!(decode_continuation_block(&b, &hdr, 0x300).is_err());
    }

    #[test]
    fn chunk_size_widths() {
        for (bits, width) in [(0u8, 1usize), (1, 2), (2, 4), (3, 8)] {
            let mut b = b"OHDR".to_vec();
            b.extend_from_slice(&[2, bits]);
            b.extend_from_slice(&4u64.to_le_bytes()[..width]);
            b.extend_from_slice(&[0, 0, 0, 0]); // a 4-byte gap-only chunk
            let c = lookup3(&b, 0);
            b.extend_from_slice(&c.to_le_bytes());
            let fc = decode_first_chunk(&b, 0).unwrap();
            assert_eq!(fc.prefix.prefix_len, 6 + width);
            // A null message with an empty body fills the 4 bytes.
            assert_eq!(fc.messages.len(), 1);
            assert_eq!(fc.messages[0].kind, 0);
        }
    }

    #[test]
    fn truncation_and_corruption_never_panic() {
        for img in [v1_image(), v2_image()] {
            for n in 0..img.len() {
                assert!(decode_first_chunk(&img[..n], 0).is_err(), "len {n}");
            }
            for i in 0..img.len() {
                for x in [0x01u8, 0x80, 0xff] {
                    let mut c = img.clone();
                    c[i] ^= x;
                    let _ = decode_first_chunk(&c, 0);
                    let _ = needed_len(&c, 0);
                    if let Ok(p) = ObjectHeaderPrefix::decode(&c, 0) {
                        let _ = decode_continuation_block(&c, &p, 0);
                    }
                }
            }
        }
        // Huge v2 chunk sizes are reported, not allocated.
        let mut b = b"OHDR".to_vec();
        b.extend_from_slice(&[2, 3]);
        b.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(needed_len(&b, 0).is_err());
        // Unknown header flags and a v1 message size not a multiple of 8.
        assert!(ObjectHeaderPrefix::decode(b"OHDR\x02\x40\x00", 0).is_err());
        let mut v1 = v1_image();
        v1[18] = 7;
        assert!(decode_first_chunk(&v1, 0).is_err());
    }

    /// Re-encodes a decoded chunk from its prefix and raw messages.
    fn reencode(b: &[u8]) -> Vec<u8> {
        let c = decode_first_chunk(b, 0).unwrap();
        let specs: Vec<MessageSpec<'_>> = c.messages.iter().map(Into::into).collect();
        assert_eq!(c.prefix.encoded_len(), c.prefix.prefix_len);
        encode_first_chunk(&c.prefix, &specs).unwrap()
    }

    #[test]
    fn encodes_the_vectors_byte_exact() {
        assert_eq!(reencode(&v1_image()), v1_image());
        assert_eq!(reencode(&v2_image()), v2_image());
        for bits in 0u8..4 {
            let mut b = b"OHDR".to_vec();
            b.extend_from_slice(&[2, bits]);
            b.extend_from_slice(&4u64.to_le_bytes()[..1 << bits]);
            b.extend_from_slice(&[0, 0, 0, 0]);
            let c = lookup3(&b, 0);
            b.extend_from_slice(&c.to_le_bytes());
            // A stored size field wider than needed is kept.
            assert_eq!(reencode(&b), b);
        }
        // v1 continuation block: the same messages without the prefix.
        let v1 = v1_image();
        let p = ObjectHeaderPrefix::decode(&v1, 0).unwrap();
        let msgs = decode_continuation_block(&v1[16..], &p, 0).unwrap();
        let specs: Vec<MessageSpec<'_>> = msgs.iter().map(Into::into).collect();
        assert_eq!(
            encode_continuation_block(&p, &specs, 40).unwrap(),
            &v1[16..]
        );
        // v2 continuation block.
        let hdr = ObjectHeaderPrefix::decode(&v2_image(), 0).unwrap();
        let mut b = b"OCHK".to_vec();
        b.extend_from_slice(&[0x10, 16, 0, 0, 0, 0]);
        b.extend_from_slice(&0x400u64.to_le_bytes());
        b.extend_from_slice(&0x20u64.to_le_bytes());
        let c = lookup3(&b, 0);
        b.extend_from_slice(&c.to_le_bytes());
        let msgs = decode_continuation_block(&b, &hdr, 0).unwrap();
        let specs: Vec<MessageSpec<'_>> = msgs.iter().map(Into::into).collect();
        assert_eq!(encode_continuation_block(&hdr, &specs, b.len()).unwrap(), b);
    }

    #[test]
    fn prefixes_and_size_widths() {
        for (size, width) in [(0usize, 1usize), (255, 1), (256, 2), (65535, 2), (65536, 4)] {
            let p = ObjectHeaderPrefix::v2(0xff, None, None, size);
            assert_eq!(
                p.flags & header_flags::CHUNK0_SIZE_MASK,
                chunk0_size_code(size)
            );
            assert_eq!(p.flags & !header_flags::CHUNK0_SIZE_MASK, 0x0c);
            assert_eq!(p.encoded_len(), 6 + width);
            let b = p.encode().unwrap();
            assert_eq!(ObjectHeaderPrefix::decode(&b, 0).unwrap(), p);
        }
        assert_eq!(chunk0_size_code(1 << 32), 3);
        let t = ObjectTimes {
            access: 1,
            modification: 2,
            change: 3,
            birth: 4,
        };
        let pc = AttributePhaseChange {
            max_compact: 8,
            min_dense: 6,
        };
        let p = ObjectHeaderPrefix::v2(0, Some(t), Some(pc), 300);
        assert_eq!(p.flags, 0x31);
        assert_eq!(p.encoded_len(), 6 + 16 + 4 + 2);
        assert_eq!(
            ObjectHeaderPrefix::decode(&p.encode().unwrap(), 0).unwrap(),
            p
        );
        let p = ObjectHeaderPrefix::v1(3, 2, 64);
        assert_eq!(
            ObjectHeaderPrefix::decode(&p.encode().unwrap(), 0).unwrap(),
            p
        );
        assert!(ObjectHeaderPrefix::v1(0, 1, usize::MAX).encode().is_err());
        let p3 = ObjectHeaderPrefix { version: 3, ..p };
        assert!(p3.encode().is_err());
    }

    #[test]
    fn lays_out_messages_with_a_nil_filler() {
        let body = [7u8; 5];
        let msgs = [
            MessageSpec::new(0x12, 0, &[1, 0, 0, 0, 9, 9, 9, 9]),
            MessageSpec {
                kind: 0x0c,
                flags: 1,
                creation_order: Some(3),
                body: &body,
            },
        ];
        // v2 with creation order: 6-byte message headers; spare room 0..=7 after 25 bytes.
        let p = ObjectHeaderPrefix::v2(header_flags::ATTR_CREATION_ORDER_TRACKED, None, None, 0);
        assert_eq!(messages_len(&p, &msgs), 6 + 8 + 6 + 5);
        for spare in 0..8 {
            let p = ObjectHeaderPrefix::v2(p.flags, None, None, 25 + spare);
            let b = encode_first_chunk(&p, &msgs).unwrap();
            assert_eq!(b.len(), p.first_chunk_len().unwrap());
            let c = decode_first_chunk(&b, 0).unwrap();
            let nil = usize::from(spare >= 6);
            assert_eq!(c.messages.len(), 2 + nil);
            assert_eq!(c.messages[1].creation_order, Some(3));
            assert_eq!(c.messages[1].body, body);
            if nil == 1 {
                assert_eq!(c.messages[2].kind, 0);
                assert_eq!(c.messages[2].body.len(), spare - 6);
            }
        }
        // v1: bodies padded to 8; the rest is a NIL message.
        let p = ObjectHeaderPrefix::v1(3, 1, 16 + 16 + 24);
        assert_eq!(messages_len(&p, &msgs), 32);
        let b = encode_first_chunk(&p, &msgs).unwrap();
        let c = decode_first_chunk(&b, 0).unwrap();
        assert_eq!(c.messages.len(), 3);
        assert_eq!(c.messages[1].body, [7, 7, 7, 7, 7, 0, 0, 0]);
        assert_eq!((c.messages[2].kind, c.messages[2].body.len()), (0, 16));
        // Too small, v1 spare room not a multiple of 8 or smaller than a message header, v2
        // type above 255, block smaller than OCHK and checksum.
        assert!(encode_first_chunk(&ObjectHeaderPrefix::v1(2, 1, 24), &msgs).is_err());
        assert!(encode_first_chunk(&ObjectHeaderPrefix::v1(2, 1, 36), &msgs).is_err());
        assert!(encode_first_chunk(&ObjectHeaderPrefix::v1(2, 1, 36), &msgs[..1]).is_err());
        let big = [MessageSpec::new(0x100, 0, &[])];
        assert!(encode_first_chunk(&ObjectHeaderPrefix::v2(0, None, None, 8), &big).is_err());
        assert!(encode_continuation_block(&p, &msgs, 8).is_err());
        let p2 = ObjectHeaderPrefix::v2(0, None, None, 0);
        assert!(encode_continuation_block(&p2, &[], 7).is_err());
        let b = encode_continuation_block(&p2, &[], 8).unwrap();
        assert!(decode_continuation_block(&b, &p2, 0).unwrap().is_empty());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn layout_round_trip(
                v1 in any::<bool>(),
                tracked in any::<bool>(),
                msgs in proptest::collection::vec(
                    (1u16..0x20, any::<u8>(), any::<u16>(), proptest::collection::vec(any::<u8>(), 0..40)),
                    0..6,
                ),
                spare in 0usize..40,
                cont in any::<bool>(),
            ) {
                let specs: Vec<MessageSpec<'_>> = msgs
                    .iter()
                    .map(|(k, f, co, b)| MessageSpec {
                        kind: *k,
                        flags: *f,
                        creation_order: Some(*co),
                        body: b,
                    })
                    .collect();
                let flags = if tracked { header_flags::ATTR_CREATION_ORDER_TRACKED } else { 0 };
                let mut p = if v1 {
                    ObjectHeaderPrefix::v1(7, 1, 0)
                } else {
                    ObjectHeaderPrefix::v2(flags, None, None, 0)
                };
                let spare = if v1 { (spare / 8) * 8 } else { spare };
                let area = messages_len(&p, &specs) + spare;
                let got = if cont {
                    let len = area + if v1 { 0 } else { 8 };
                    let b = encode_continuation_block(&p, &specs, len).unwrap();
                    prop_assert_eq!(b.len(), len);
                    decode_continuation_block(&b, &p, 0).unwrap()
                        .iter()
                        .map(|m| (m.kind, m.flags, m.creation_order, m.body.to_vec()))
                        .collect::<Vec<_>>()
                } else {
                    p = if v1 {
                        ObjectHeaderPrefix::v1(7, 1, area)
                    } else {
                        ObjectHeaderPrefix::v2(flags, None, None, area)
                    };
                    let b = encode_first_chunk(&p, &specs).unwrap();
                    let c = decode_first_chunk(&b, 0).unwrap();
                    prop_assert_eq!(c.prefix, p);
                    c.messages
                        .iter()
                        .map(|m| (m.kind, m.flags, m.creation_order, m.body.to_vec()))
                        .collect::<Vec<_>>()
                };
                let hdr = p.message_header_len();
                prop_assert_eq!(got.len(), specs.len() + usize::from(spare >= hdr));
                for (g, s) in got.iter().zip(&specs) {
                    prop_assert_eq!((g.0, g.1), (s.kind, s.flags));
                    prop_assert_eq!(g.2, (tracked && !v1).then_some(s.creation_order.unwrap_or(0)));
                    let mut body = s.body.to_vec();
                    if v1 {
                        body.resize(body.len().div_ceil(8) * 8, 0);
                    }
                    prop_assert_eq!(&g.3, &body);
                }
            }
        }
    }
}
