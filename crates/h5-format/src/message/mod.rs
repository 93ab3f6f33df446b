//! Object header messages: [`decode_message`] turns one raw message (type, flags, body) into a
//! typed [`Message`].
//!
//! Each message type lives in its own module. Shared messages (flag bit 1) are not decoded here:
//! their body is a [`SharedRef`] to the real message (in another object header or in the shared
//! object header message heap), returned as [`Message::Shared`] for the engine to resolve.

pub mod attribute;
pub mod attribute_info;
pub mod btree_k;
pub mod comment;
pub mod continuation;
pub mod dataspace;
pub mod driver_info;
pub mod external_files;
pub mod file_space_info;
pub mod fill_value;
pub mod filter_pipeline;
pub mod group_info;
pub mod layout;
pub mod link;
pub mod link_info;
pub mod modification_time;
pub mod reference_count;
pub mod shared;
pub mod shared_table;
pub mod symbol_table;

use crate::datatype::Datatype;
use crate::error::Result;
use crate::object_header::msg_flags;
use crate::reader::{Reader, Sizes};

pub use attribute::AttributeMessage;
pub use attribute_info::AttributeInfo;
pub use btree_k::BtreeKValues;
pub use comment::Comment;
pub use continuation::Continuation;
pub use dataspace::Dataspace;
pub use driver_info::DriverInfo;
pub use external_files::{ExternalFileSlot, ExternalFiles};
pub use file_space_info::{FileSpaceInfo, FileSpaceStrategy};
pub use fill_value::FillValue;
pub use filter_pipeline::{Filter, FilterPipeline};
pub use group_info::GroupInfo;
pub use layout::{ChunkIndex, Layout, LayoutClass};
pub use link::{CharSet, Link, LinkTarget};
pub use link_info::LinkInfo;
pub use modification_time::{ModificationTime, ModificationTimeOld};
pub use reference_count::ReferenceCount;
pub use shared::SharedRef;
pub use shared_table::SharedMessageTable;
pub use symbol_table::SymbolTableMessage;

/// Message type numbers (the `kind` of a raw message).
pub mod kind {
    /// NIL: unused space.
    pub const NIL: u16 = 0x0000;
    /// Dataspace.
    pub const DATASPACE: u16 = 0x0001;
    /// Link info.
    pub const LINK_INFO: u16 = 0x0002;
    /// Datatype.
    pub const DATATYPE: u16 = 0x0003;
    /// Fill value (old).
    pub const FILL_VALUE_OLD: u16 = 0x0004;
    /// Fill value.
    pub const FILL_VALUE: u16 = 0x0005;
    /// Link.
    pub const LINK: u16 = 0x0006;
    /// External data files.
    pub const EXTERNAL_FILES: u16 = 0x0007;
    /// Data layout.
    pub const LAYOUT: u16 = 0x0008;
    /// Bogus (testing only).
    pub const BOGUS: u16 = 0x0009;
    /// Group info.
    pub const GROUP_INFO: u16 = 0x000A;
    /// Filter pipeline.
    pub const FILTER_PIPELINE: u16 = 0x000B;
    /// Attribute.
    pub const ATTRIBUTE: u16 = 0x000C;
    /// Object comment.
    pub const COMMENT: u16 = 0x000D;
    /// Object modification time (old).
    pub const MODIFICATION_TIME_OLD: u16 = 0x000E;
    /// Shared message table.
    pub const SHARED_MESSAGE_TABLE: u16 = 0x000F;
    /// Object header continuation.
    pub const CONTINUATION: u16 = 0x0010;
    /// Symbol table message.
    pub const SYMBOL_TABLE: u16 = 0x0011;
    /// Object modification time.
    pub const MODIFICATION_TIME: u16 = 0x0012;
    /// B-tree 'K' values.
    pub const BTREE_K: u16 = 0x0013;
    /// Driver info.
    pub const DRIVER_INFO: u16 = 0x0014;
    /// Attribute info.
    pub const ATTRIBUTE_INFO: u16 = 0x0015;
    /// Object reference count.
    pub const REFERENCE_COUNT: u16 = 0x0016;
    /// File space info (superblock extension).
    pub const FILE_SPACE_INFO: u16 = 0x0017;
}

/// A decoded object header message.
#[derive(Clone, PartialEq, Debug)]
pub enum Message {
    /// 0x0000: unused space.
    Nil,
    /// 0x0001: the dataspace.
    Dataspace(Dataspace),
    /// 0x0002: where a new-style group keeps its links.
    LinkInfo(LinkInfo),
    /// 0x0003: the datatype.
    Datatype(Datatype),
    /// 0x0004: the old fill value message.
    FillValueOld(FillValue),
    /// 0x0005: the fill value message.
    FillValue(FillValue),
    /// 0x0006: a link of a compact group.
    Link(Link),
    /// 0x0007: external data files of a contiguous dataset.
    ExternalFiles(ExternalFiles),
    /// 0x0008: the data layout.
    Layout(Layout),
    /// 0x0009: the bogus test message.
    Bogus,
    /// 0x000A: group creation parameters.
    GroupInfo(GroupInfo),
    /// 0x000B: the filter pipeline.
    FilterPipeline(FilterPipeline),
    /// 0x000C: an attribute.
    Attribute(AttributeMessage),
    /// 0x000D: the object comment.
    Comment(Comment),
    /// 0x000E: the old modification time.
    ModificationTimeOld(ModificationTimeOld),
    /// 0x000F: the shared object header message table (superblock extension).
    SharedMessageTable(SharedMessageTable),
    /// 0x0010: where the header continues.
    Continuation(Continuation),
    /// 0x0011: an old-style group's B-tree and local heap.
    SymbolTable(SymbolTableMessage),
    /// 0x0012: the modification time.
    ModificationTime(ModificationTime),
    /// 0x0013: B-tree K values (superblock extension).
    BtreeKValues(BtreeKValues),
    /// 0x0014: file driver information (superblock extension).
    DriverInfo(DriverInfo),
    /// 0x0015: where an object keeps dense attributes.
    AttributeInfo(AttributeInfo),
    /// 0x0016: the object's reference count.
    ReferenceCount(ReferenceCount),
    /// 0x0017: the file-space strategy and persisted free-space managers (superblock
    /// extension).
    FileSpaceInfo(FileSpaceInfo),
    /// A shared message: the body references the real message of type `kind`.
    Shared {
        /// Type of the referenced message.
        kind: u16,
        /// Where the message is.
        reference: SharedRef,
    },
    /// A message type this crate does not know, without the "fail if unknown always" flag.
    Unknown {
        /// The message type.
        kind: u16,
        /// Whether the "fail if unknown and opened for write" flag (bit 3) is set: the engine
        /// must refuse to modify the object.
        must_understand: bool,
    },
}

/// The structure name of message `kind` (for errors).
pub fn name(kind: u16) -> &'static str {
    match kind {
        kind::NIL => "NIL message",
        kind::DATASPACE => "dataspace message",
        kind::LINK_INFO => "link info message",
        kind::DATATYPE => "datatype message",
        kind::FILL_VALUE_OLD => "old fill value message",
        kind::FILL_VALUE => "fill value message",
        kind::LINK => "link message",
        kind::EXTERNAL_FILES => "external data files message",
        kind::LAYOUT => "data layout message",
        kind::BOGUS => "bogus message",
        kind::GROUP_INFO => "group info message",
        kind::FILTER_PIPELINE => "filter pipeline message",
        kind::ATTRIBUTE => "attribute message",
        kind::COMMENT => "object comment message",
        kind::MODIFICATION_TIME_OLD => "old modification time message",
        kind::SHARED_MESSAGE_TABLE => "shared message table message",
        kind::CONTINUATION => "object header continuation message",
        kind::SYMBOL_TABLE => "symbol table message",
        kind::MODIFICATION_TIME => "modification time message",
        kind::BTREE_K => "B-tree K values message",
        kind::DRIVER_INFO => "driver info message",
        kind::ATTRIBUTE_INFO => "attribute info message",
        kind::REFERENCE_COUNT => "reference count message",
        kind::FILE_SPACE_INFO => "file space info message",
        _ => "unknown message",
    }
}

/// Decodes the message of type `kind` with `flags` and `body`, whose body starts at file
/// `address`. Trailing bytes after a message's fields (padding) are ignored.
///
/// A shared message (flag bit 1) decodes to [`Message::Shared`]. An unknown type is
/// `Unsupported` when flag bit 7 ("fail if unknown always") is set, else [`Message::Unknown`].
pub fn decode_message(
    kind: u16,
    flags: u8,
    body: &[u8],
    sizes: Sizes,
    address: u64,
) -> Result<Message> {
    let mut r = Reader::new(body, name(kind), address);
    if flags & msg_flags::SHARED != 0 && kind != kind::NIL {
        return Ok(Message::Shared {
            kind,
            reference: SharedRef::decode(&mut r, sizes)?,
        });
    }
    let r = &mut r;
    Ok(match kind {
        kind::NIL => Message::Nil,
        kind::DATASPACE => Message::Dataspace(Dataspace::decode(r, sizes)?),
        kind::LINK_INFO => Message::LinkInfo(LinkInfo::decode(r, sizes)?),
        kind::DATATYPE => Message::Datatype(Datatype::decode(r)?),
        kind::FILL_VALUE_OLD => Message::FillValueOld(FillValue::decode_old(r)?),
        kind::FILL_VALUE => Message::FillValue(FillValue::decode(r)?),
        kind::LINK => Message::Link(Link::decode(r, sizes)?),
        kind::EXTERNAL_FILES => Message::ExternalFiles(ExternalFiles::decode(r, sizes)?),
        kind::LAYOUT => Message::Layout(Layout::decode(r, sizes)?),
        kind::BOGUS => Message::Bogus,
        kind::GROUP_INFO => Message::GroupInfo(GroupInfo::decode(r)?),
        kind::FILTER_PIPELINE => Message::FilterPipeline(FilterPipeline::decode(r)?),
        kind::ATTRIBUTE => Message::Attribute(AttributeMessage::decode(r, sizes)?),
        kind::COMMENT => Message::Comment(Comment::decode(r)?),
        kind::MODIFICATION_TIME_OLD => {
            Message::ModificationTimeOld(ModificationTimeOld::decode(r)?)
        }
        kind::SHARED_MESSAGE_TABLE => {
            Message::SharedMessageTable(SharedMessageTable::decode(r, sizes)?)
        }
        kind::CONTINUATION => Message::Continuation(Continuation::decode(r, sizes)?),
        kind::SYMBOL_TABLE => Message::SymbolTable(SymbolTableMessage::decode(r, sizes)?),
        kind::MODIFICATION_TIME => Message::ModificationTime(ModificationTime::decode(r)?),
        kind::BTREE_K => Message::BtreeKValues(BtreeKValues::decode(r)?),
        kind::DRIVER_INFO => Message::DriverInfo(DriverInfo::decode(r)?),
        kind::ATTRIBUTE_INFO => Message::AttributeInfo(AttributeInfo::decode(r, sizes)?),
        kind::REFERENCE_COUNT => Message::ReferenceCount(ReferenceCount::decode(r)?),
        kind::FILE_SPACE_INFO => Message::FileSpaceInfo(FileSpaceInfo::decode(r, sizes)?),
        _ if flags & msg_flags::FAIL_IF_UNKNOWN_ALWAYS != 0 => {
            return Err(r.unsupported(format!(
                "message type {kind:#06x} marked \"fail if unknown\""
            )));
        }
        _ => Message::Unknown {
            kind,
            must_understand: flags & msg_flags::FAIL_IF_UNKNOWN_AND_WRITE != 0,
        },
    })
}

/// Encodes the body of `message` for the types that have encoders: NIL (an empty body), link
/// info, link, group info, continuation, symbol table, both modification times, attribute info,
/// file space info and shared references (in the version libhdf5 writes, [`SharedRef::libhdf5_version`]; the
/// caller sets [`msg_flags::SHARED`] in the message header). Other types are `Unsupported` for
/// now.
pub fn encode_message(message: &Message, sizes: Sizes) -> Result<Vec<u8>> {
    Ok(match message {
        Message::Nil => Vec::new(),
        Message::LinkInfo(m) => m.encode(sizes),
        Message::Link(m) => m.encode(sizes)?,
        Message::GroupInfo(m) => m.encode(),
        Message::Continuation(m) => m.encode(sizes),
        Message::SymbolTable(m) => m.encode(sizes),
        Message::ModificationTime(m) => m.encode(),
        Message::ModificationTimeOld(m) => m.encode()?,
        Message::AttributeInfo(m) => m.encode(sizes),
        Message::Dataspace(m) => m.encode(sizes)?,
        // The lowest version that expresses the type (libhdf5's default format bounds).
        Message::Datatype(m) => m.encode(m.min_version())?,
        Message::FillValue(m) | Message::FillValueOld(m) => m.encode()?,
        Message::Layout(m) => m.encode(sizes)?,
        Message::FilterPipeline(m) => m.encode()?,
        Message::Attribute(m) => {
            let version = m.datatype.inline().map_or(1, Datatype::min_version);
            m.encode(sizes, version)?
        }
        Message::Shared { reference, .. } => {
            reference.encode(sizes, reference.libhdf5_version())?
        }
        Message::FileSpaceInfo(m) => m.encode(sizes)?,
        other => {
            return Err(crate::error::FormatError::Unsupported {
                structure: "object header message",
                address: crate::reader::UNDEFINED_ADDRESS,
                what: format!("encoding {}", name(message_kind(other))),
            });
        }
    })
}

/// The type number of `message` (for a shared or unknown message, the type it stands for).
pub fn message_kind(message: &Message) -> u16 {
    match message {
        Message::Nil => kind::NIL,
        Message::Dataspace(_) => kind::DATASPACE,
        Message::LinkInfo(_) => kind::LINK_INFO,
        Message::Datatype(_) => kind::DATATYPE,
        Message::FillValueOld(_) => kind::FILL_VALUE_OLD,
        Message::FillValue(_) => kind::FILL_VALUE,
        Message::Link(_) => kind::LINK,
        Message::ExternalFiles(_) => kind::EXTERNAL_FILES,
        Message::Layout(_) => kind::LAYOUT,
        Message::Bogus => kind::BOGUS,
        Message::GroupInfo(_) => kind::GROUP_INFO,
        Message::FilterPipeline(_) => kind::FILTER_PIPELINE,
        Message::Attribute(_) => kind::ATTRIBUTE,
        Message::Comment(_) => kind::COMMENT,
        Message::ModificationTimeOld(_) => kind::MODIFICATION_TIME_OLD,
        Message::SharedMessageTable(_) => kind::SHARED_MESSAGE_TABLE,
        Message::Continuation(_) => kind::CONTINUATION,
        Message::SymbolTable(_) => kind::SYMBOL_TABLE,
        Message::ModificationTime(_) => kind::MODIFICATION_TIME,
        Message::BtreeKValues(_) => kind::BTREE_K,
        Message::DriverInfo(_) => kind::DRIVER_INFO,
        Message::AttributeInfo(_) => kind::ATTRIBUTE_INFO,
        Message::ReferenceCount(_) => kind::REFERENCE_COUNT,
        Message::FileSpaceInfo(_) => kind::FILE_SPACE_INFO,
        Message::Shared { kind, .. } | Message::Unknown { kind, .. } => *kind,
    }
}

/// Reads a version byte and checks it is one of `accepted`.
pub(crate) fn version(r: &mut Reader<'_>, accepted: &[u8]) -> Result<u8> {
    let v = r.u8()?;
    if accepted.contains(&v) {
        Ok(v)
    } else {
        Err(r.unsupported(format!("version {v}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FormatError;

    const S: Sizes = Sizes::EIGHT;

    #[test]
    fn shared_unknown_and_nil() {
        // Shared v2 datatype: version 2, type 0, object header address 0x400.
        let mut b = vec![2, 0];
        b.extend_from_slice(&0x400u64.to_le_bytes());
        assert_eq!(
            decode_message(kind::DATATYPE, msg_flags::SHARED, &b, S, 0).unwrap(),
            Message::Shared {
                kind: kind::DATATYPE,
                reference: SharedRef::ObjectHeader(0x400)
            }
        );
        assert_eq!(
            decode_message(0x99, 0, &[1, 2], S, 0).unwrap(),
            Message::Unknown {
                kind: 0x99,
                must_understand: false
            }
        );
        assert_eq!(
            decode_message(0x99, msg_flags::FAIL_IF_UNKNOWN_AND_WRITE, &[], S, 0).unwrap(),
            Message::Unknown {
                kind: 0x99,
                must_understand: true
            }
        );
        assert!(matches!(
            decode_message(0x99, msg_flags::FAIL_IF_UNKNOWN_ALWAYS, &[], S, 0),
            Err(FormatError::Unsupported { .. })
        ));
        assert_eq!(
            decode_message(kind::NIL, 0, &[0; 8], S, 0).unwrap(),
            Message::Nil
        );
        assert_eq!(
            decode_message(kind::BOGUS, 0, &0xdeadbeefu32.to_le_bytes(), S, 0).unwrap(),
            Message::Bogus
        );
    }

    /// Every known type fed every truncation of garbage bodies errors or decodes, never panics.
    #[test]
    fn garbage_never_panics() {
        let mut seed = 0x1234_5678u32;
        let mut junk = [0u8; 96];
        for round in 0..64 {
            for b in junk.iter_mut() {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                *b = (seed >> 24) as u8;
            }
            // Valid-looking version bytes so the decoders get past the first field.
            junk[0] = (round % 5) as u8;
            for kind in 0u16..=0x18 {
                for flags in [0u8, msg_flags::SHARED] {
                    for n in 0..junk.len() {
                        let _ = decode_message(kind, flags, &junk[..n], S, 0);
                    }
                }
            }
        }
    }

    #[test]
    fn encode_message_dispatches() {
        let msgs = [
            Message::Nil,
            Message::LinkInfo(LinkInfo {
                creation_order_tracked: true,
                creation_order_indexed: true,
                max_creation_index: Some(3),
                fractal_heap_address: 1,
                name_index_address: 2,
                creation_order_index_address: Some(3),
            }),
            Message::Link(Link {
                name: b"a".to_vec(),
                charset: CharSet::Ascii,
                creation_order: None,
                target: LinkTarget::Hard(0x60),
            }),
            Message::GroupInfo(GroupInfo {
                link_phase_change: Some((8, 6)),
                estimates: None,
            }),
            Message::Continuation(Continuation {
                address: 0x400,
                length: 0x80,
            }),
            Message::SymbolTable(SymbolTableMessage {
                btree_address: 0x88,
                heap_address: 0x2a8,
            }),
            Message::ModificationTime(ModificationTime { seconds: 7 }),
            Message::ModificationTimeOld(ModificationTimeOld {
                year: 2001,
                month: 2,
                day: 3,
                hour: 4,
                minute: 5,
                second: 6,
            }),
            Message::AttributeInfo(AttributeInfo {
                creation_order_tracked: false,
                creation_order_indexed: false,
                max_creation_index: None,
                fractal_heap_address: 0x10,
                name_index_address: 0x20,
                creation_order_index_address: None,
            }),
            Message::FileSpaceInfo(FileSpaceInfo::new(FileSpaceStrategy::Page, true, 1, 4096)),
        ];
        for m in msgs {
            let k = message_kind(&m);
            let b = encode_message(&m, S).unwrap();
            assert_eq!(decode_message(k, 0, &b, S, 0).unwrap(), m, "{}", name(k));
        }
        let shared = Message::Shared {
            kind: kind::DATATYPE,
            reference: SharedRef::ObjectHeader(0x400),
        };
        let b = encode_message(&shared, S).unwrap();
        assert_eq!(&b[..2], [2, 2]);
        assert_eq!(
            decode_message(kind::DATATYPE, msg_flags::SHARED, &b, S, 0).unwrap(),
            shared
        );
        for m in [
            Message::Bogus,
            Message::Unknown {
                kind: 0x99,
                must_understand: false,
            },
            Message::ReferenceCount(ReferenceCount { count: 1 }),
        ] {
            assert!(matches!(
                encode_message(&m, S),
                Err(FormatError::Unsupported { .. })
            ));
        }
        assert_eq!(message_kind(&Message::Bogus), kind::BOGUS);
    }
}
