//! Encoders against real files written by HDF5 1.14 (see `real_files.rs` and the fixture
//! scripts): superblocks, object header chunks and continuation blocks re-encode to the bytes
//! libhdf5 wrote, and the messages with encoders re-encode to their bodies.

use h5_format::Sizes;
use h5_format::message::{Message, decode_message, encode_message, kind};
use h5_format::object_header::{
    self, MessageSpec, PREFIX_MAX_LEN, decode_continuation_block, decode_first_chunk,
    encode_continuation_block, encode_first_chunk,
};
use h5_format::superblock::{self, Superblock};

const FILES: [(&str, &[u8]); 11] = [
    ("earliest", include_bytes!("data/earliest.h5")),
    (
        "earliest_chunked",
        include_bytes!("data/earliest_chunked.h5"),
    ),
    ("earliest_group", include_bytes!("data/earliest_group.h5")),
    ("earliest_vlen", include_bytes!("data/earliest_vlen.h5")),
    ("latest", include_bytes!("data/latest.h5")),
    (
        "latest_dense_attrs",
        include_bytes!("data/latest_dense_attrs.h5"),
    ),
    ("latest_links", include_bytes!("data/latest_links.h5")),
    ("sb_v2_userblock", include_bytes!("data/sb_v2_userblock.h5")),
    ("groups", include_bytes!("data/groups.h5")),
    ("btree2", include_bytes!("data/btree2.h5")),
    ("earray", include_bytes!("data/earray.h5")),
];

/// Types whose encoders live in this part of the crate.
const ENCODED: [u16; 9] = [
    kind::LINK_INFO,
    kind::LINK,
    kind::GROUP_INFO,
    kind::CONTINUATION,
    kind::SYMBOL_TABLE,
    kind::MODIFICATION_TIME,
    kind::MODIFICATION_TIME_OLD,
    kind::ATTRIBUTE_INFO,
    kind::NIL,
];

fn superblock_of(file: &[u8]) -> (usize, Superblock) {
    let at = superblock::locate(file.len() as u64, |at| {
        Ok::<_, ()>(file[at as usize..].iter().take(8).copied().collect())
    })
    .unwrap()
    .expect("signature") as usize;
    let len = superblock::needed_len(&file[at..at + superblock::MIN_PREFIX], at as u64).unwrap();
    (
        at,
        Superblock::decode(&file[at..at + len], at as u64).unwrap(),
    )
}

/// Object header addresses: the root, every `OHDR` signature, and known v1 headers.
fn header_addresses(name: &str, file: &[u8], sb: &Superblock) -> Vec<usize> {
    let mut v = vec![(sb.base_address + sb.root_object_header_address()) as usize];
    v.extend(
        file.windows(4)
            .enumerate()
            .filter(|(_, w)| *w == b"OHDR")
            .map(|(i, _)| i),
    );
    if name == "earliest" {
        v.extend([800, 1400]);
    }
    v.sort();
    v.dedup();
    v
}

/// Checks that a message of an encoded type re-encodes to `body` (v1 bodies carry zero
/// padding to a multiple of 8 after the encoding) and decodes back to itself.
fn check_message(kind_: u16, flags: u8, body: &[u8], sizes: Sizes, v1: bool, seen: &mut Vec<u16>) {
    if !ENCODED.contains(&kind_) || flags & object_header::msg_flags::SHARED != 0 {
        return;
    }
    let m = decode_message(kind_, flags, body, sizes, 0).unwrap();
    let enc = encode_message(&m, sizes).unwrap();
    if kind_ == kind::NIL {
        assert!(enc.is_empty());
        return;
    }
    seen.push(kind_);
    if v1 {
        assert_eq!(&body[..enc.len()], &enc[..], "type {kind_:#x}");
        assert!(
            body[enc.len()..].iter().all(|&b| b == 0),
            "type {kind_:#x} padding"
        );
        assert!(body.len() - enc.len() < 8);
    } else {
        assert_eq!(body, &enc[..], "type {kind_:#x}");
    }
    assert_eq!(decode_message(kind_, flags, &enc, sizes, 0).unwrap(), m);
}

#[test]
fn superblocks_are_byte_exact() {
    for (name, file) in FILES {
        let (at, sb) = superblock_of(file);
        let enc = sb.encode().unwrap();
        assert_eq!(enc.len(), sb.encoded_len, "{name}");
        assert_eq!(
            enc.len(),
            superblock::encoded_len(sb.version, sb.sizes).unwrap()
        );
        assert_eq!(&file[at..at + enc.len()], &enc[..], "{name}");
        assert_eq!(Superblock::decode(&enc, at as u64).unwrap(), sb);
    }
}

#[test]
fn object_headers_and_messages_are_byte_exact() {
    let (mut headers, mut blocks) = (0, 0);
    let mut msgs = Vec::new();
    let mut versions = [0usize; 3];
    for (name, file) in FILES {
        let (_, sb) = superblock_of(file);
        let sizes = sb.sizes;
        for addr in header_addresses(name, file, &sb) {
            let end = (addr + PREFIX_MAX_LEN).min(file.len());
            let Ok(len) = object_header::needed_len(&file[addr..end], addr as u64) else {
                continue; // an "OHDR" inside data
            };
            let Some(bytes) = file.get(addr..addr + len) else {
                continue;
            };
            let Ok(first) = decode_first_chunk(bytes, addr as u64) else {
                continue;
            };
            let p = first.prefix;
            versions[usize::from(p.version)] += 1;
            assert_eq!(p.encoded_len(), p.prefix_len, "{name} {addr:#x}");
            let specs: Vec<MessageSpec<'_>> = first.messages.iter().map(Into::into).collect();
            let enc = encode_first_chunk(&p, &specs).unwrap();
            assert_eq!(enc, bytes, "{name} header at {addr:#x}");
            headers += 1;
            let mut pending = first.messages.clone();
            while let Some(raw) = pending.pop() {
                check_message(
                    raw.kind,
                    raw.flags,
                    raw.body,
                    sizes,
                    p.version == 1,
                    &mut msgs,
                );
                if raw.kind != kind::CONTINUATION {
                    continue;
                }
                let Message::Continuation(c) =
                    decode_message(raw.kind, raw.flags, raw.body, sizes, 0).unwrap()
                else {
                    panic!("continuation")
                };
                let at = (sb.base_address + c.address) as usize;
                let block = &file[at..at + c.length as usize];
                let more = decode_continuation_block(block, &p, c.address).unwrap();
                let specs: Vec<MessageSpec<'_>> = more.iter().map(Into::into).collect();
                let enc = encode_continuation_block(&p, &specs, block.len()).unwrap();
                assert_eq!(enc, block, "{name} continuation at {at:#x}");
                blocks += 1;
                pending.extend(more);
            }
        }
    }
    msgs.sort();
    let total = msgs.len();
    msgs.dedup();
    eprintln!(
        "{headers} headers {versions:?}, {blocks} blocks, {total} messages of types {msgs:x?}"
    );
    assert!(versions[1] >= 5 && versions[2] >= 10, "{versions:?}");
    assert!(blocks >= 2, "{blocks} continuation blocks");
    assert!(total >= 20, "{total} messages");
    for k in [
        kind::LINK_INFO,
        kind::LINK,
        kind::GROUP_INFO,
        kind::CONTINUATION,
        kind::SYMBOL_TABLE,
    ] {
        assert!(msgs.contains(&k), "no message of type {k:#x} checked");
    }
}
