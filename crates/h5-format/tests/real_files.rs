//! Real files written by HDF5 1.14.4 through h5py 3.12.1: `tests/data/make_fixtures.py`
//! generates `earliest.h5` (superblock v0, object header v1, layout v3, filter pipeline v1) and
//! `latest.h5` (superblock v3, object header v2, compact links, layout v4, pipeline v2) and
//! `sb_v2_userblock.h5` (superblock v2 after a 512-byte user block). Object addresses below were
//! printed by the script (h5py's `h5o.get_info(obj.id).addr`).

use h5_format::message::{
    ChunkIndex, Layout, LayoutClass, LinkTarget, Message, decode_message, kind,
};
use h5_format::object_header::{
    self, PREFIX_MAX_LEN, RawMessage, decode_continuation_block, decode_first_chunk,
};
use h5_format::superblock::{self, Root, ScratchPad, Superblock};
use h5_format::{Sizes, UNDEFINED_ADDRESS, checksum};

const EARLIEST: &[u8] = include_bytes!("data/earliest.h5");
const LATEST: &[u8] = include_bytes!("data/latest.h5");
const USERBLOCK_V2: &[u8] = include_bytes!("data/sb_v2_userblock.h5");

/// Finds and decodes the superblock the way the engine does: candidate offsets, a prefix read,
/// `needed_len`, then the full decode.
fn superblock_of(file: &[u8]) -> Superblock {
    let at = superblock::locate(file.len() as u64, |at| {
        Ok::<_, ()>(file[at as usize..].iter().take(8).copied().collect())
    })
    .unwrap()
    .expect("signature");
    let at = at as usize;
    let prefix = &file[at..at + superblock::MIN_PREFIX];
    let len = superblock::needed_len(prefix, at as u64).unwrap();
    Superblock::decode(&file[at..at + len], at as u64).unwrap()
}

/// Message types whose decoders belong to the datatype work (dataspace, datatype, fill values,
/// attribute): this test leaves them raw so it does not depend on that work.
const OTHERS: [u16; 5] = [
    kind::DATASPACE,
    kind::DATATYPE,
    kind::FILL_VALUE_OLD,
    kind::FILL_VALUE,
    kind::ATTRIBUTE,
];

/// All messages of the object header at `addr`, following continuation messages, decoded
/// (those of [`OTHERS`] as [`Message::Nil`]).
fn messages(file: &[u8], addr: u64, sizes: Sizes) -> Vec<(RawMessage<'_>, Message)> {
    let a = addr as usize;
    let end = (a + PREFIX_MAX_LEN).min(file.len());
    let len = object_header::needed_len(&file[a..end], addr).unwrap();
    let first = decode_first_chunk(&file[a..a + len], addr).unwrap();
    let mut pending: Vec<RawMessage<'_>> = first.messages.clone();
    let mut out = Vec::new();
    while !pending.is_empty() {
        let raw = pending.remove(0);
        let m = if OTHERS.contains(&raw.kind) {
            Message::Nil
        } else {
            decode_message(raw.kind, raw.flags, raw.body, sizes, 0).unwrap()
        };
        if let Message::Continuation(c) = &m {
            let (s, n) = (c.address as usize, c.length as usize);
            let more =
                decode_continuation_block(&file[s..s + n], &first.prefix, c.address).unwrap();
            pending.extend(more);
        }
        out.push((raw, m));
    }
    if let Some(n) = first.prefix.message_count {
        assert_eq!(out.len(), usize::from(n), "v1 message count");
    }
    out
}

fn layout_of(msgs: &[(RawMessage<'_>, Message)]) -> Layout {
    msgs.iter()
        .find_map(|(_, m)| match m {
            Message::Layout(l) => Some(l.clone()),
            _ => None,
        })
        .expect("layout message")
}

#[test]
fn earliest_superblock_and_root_group() {
    let sb = superblock_of(EARLIEST);
    assert_eq!(sb.version, 0);
    assert_eq!(sb.sizes, Sizes::EIGHT);
    assert_eq!(sb.base_address, 0);
    assert_eq!(sb.eof_address, EARLIEST.len() as u64);
    assert_eq!(sb.group_leaf_k, Some(4));
    assert_eq!(sb.group_internal_k, Some(16));
    assert_eq!(sb.free_space_address, UNDEFINED_ADDRESS);
    assert_eq!(sb.driver_info_address, UNDEFINED_ADDRESS);
    let Root::SymbolTableEntry(e) = sb.root else {
        panic!("v0 root is a symbol table entry")
    };
    assert_eq!(e.object_header_address, 0x60);
    let ScratchPad::SymbolTable {
        btree_address,
        heap_address,
    } = e.scratch
    else {
        panic!("root entry caches its symbol table")
    };

    let msgs = messages(EARLIEST, 0x60, sb.sizes);
    let st = msgs
        .iter()
        .find_map(|(_, m)| match m {
            Message::SymbolTable(s) => Some(*s),
            _ => None,
        })
        .expect("symbol table message");
    assert_eq!(
        (st.btree_address, st.heap_address),
        (btree_address, heap_address)
    );
}

#[test]
fn earliest_datasets() {
    let sizes = Sizes::EIGHT;
    let contig = messages(EARLIEST, 800, sizes);
    let l = layout_of(&contig);
    assert_eq!(l.version, 3);
    let LayoutClass::Contiguous { address, size } = l.class else {
        panic!("contiguous")
    };
    assert_eq!(size, Some(16));
    // The data is int32 0..4, little-endian.
    let a = address as usize;
    assert_eq!(
        &EARLIEST[a..a + 16],
        &[0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]
    );

    let chunked = messages(EARLIEST, 1400, sizes);
    let l = layout_of(&chunked);
    assert_eq!(l.version, 3);
    let LayoutClass::Chunked { dims, index, .. } = l.class else {
        panic!("chunked")
    };
    assert_eq!(dims, [4, 2]); // chunk of 4 int16 elements, element size 2
    assert!(
        matches!(index, ChunkIndex::BtreeV1 { address } if &EARLIEST[address as usize..address as usize + 4] == b"TREE")
    );
    let p = chunked
        .iter()
        .find_map(|(_, m)| match m {
            Message::FilterPipeline(p) => Some(p.clone()),
            _ => None,
        })
        .expect("filter pipeline");
    assert_eq!(p.version, 1);
    let ids: Vec<u16> = p.filters.iter().map(|f| f.id).collect();
    assert_eq!(ids, [2, 1]); // shuffle then deflate
    assert_eq!(p.filters[1].client_data, [4]); // gzip level 4 (h5py default)
}

#[test]
fn latest_superblock_and_root_links() {
    let sb = superblock_of(LATEST);
    assert_eq!(sb.version, 3);
    assert_eq!(sb.root, Root::ObjectHeader(0x30));
    assert_eq!(sb.extension_address, UNDEFINED_ADDRESS);
    assert_eq!(sb.eof_address, LATEST.len() as u64);
    assert_eq!(sb.consistency_flags, 0);
    // The stored checksum is lookup3 of the 44 bytes before it.
    let stored = u32::from_le_bytes(LATEST[44..48].try_into().unwrap());
    assert_eq!(checksum::lookup3(&LATEST[..44], 0), stored);

    let msgs = messages(LATEST, 0x30, sb.sizes);
    let mut links: Vec<(String, LinkTarget)> = msgs
        .iter()
        .filter_map(|(_, m)| match m {
            Message::Link(l) => {
                Some((String::from_utf8(l.name.clone()).unwrap(), l.target.clone()))
            }
            _ => None,
        })
        .collect();
    links.sort_by(|a, b| a.0.cmp(&b.0));
    let names: Vec<&str> = links.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["compact", "contig", "ea", "ext", "f32", "f8", "grp", "soft"]
    );
    let target = |n: &str| links.iter().find(|(k, _)| k == n).unwrap().1.clone();
    assert_eq!(target("contig"), LinkTarget::Hard(195));
    assert_eq!(target("grp"), LinkTarget::Hard(1584));
    assert_eq!(target("soft"), LinkTarget::Soft(b"/contig".to_vec()));
    assert_eq!(
        target("ext"),
        LinkTarget::External {
            flags: 0,
            file: b"other.h5".to_vec(),
            path: b"/x".to_vec()
        }
    );
    // A compact new-style group also has link info and group info messages.
    assert!(msgs.iter().any(|(r, m)| r.kind == kind::LINK_INFO
        && matches!(m, Message::LinkInfo(li) if li.fractal_heap_address == UNDEFINED_ADDRESS)));
    assert!(msgs.iter().any(|(r, _)| r.kind == kind::GROUP_INFO));
}

#[test]
fn latest_layouts_and_fletcher32_chunk() {
    let sizes = Sizes::EIGHT;
    let l = layout_of(&messages(LATEST, 195, sizes));
    assert_eq!(l.version, 4);
    assert!(matches!(
        l.class,
        LayoutClass::Contiguous { size: Some(16), .. }
    ));

    let l = layout_of(&messages(LATEST, 463, sizes));
    assert_eq!(
        l.class,
        LayoutClass::Compact {
            data: vec![0, 1, 2]
        }
    );

    // f32: one chunk of 10 int32 with fletcher32: single-chunk index with the filtered size.
    let msgs = messages(LATEST, 734, sizes);
    let LayoutClass::Chunked { dims, index, .. } = layout_of(&msgs).class else {
        panic!("chunked")
    };
    assert_eq!(dims, [10, 4]);
    let ChunkIndex::SingleChunk {
        address,
        filtered: Some((size, mask)),
    } = index
    else {
        panic!("filtered single chunk, got {index:?}")
    };
    assert_eq!((size, mask), (44, 0));
    let chunk = &LATEST[address as usize..(address + size) as usize];
    let stored = u32::from_le_bytes(chunk[40..].try_into().unwrap());
    assert_eq!(checksum::fletcher32(&chunk[..40]), stored);
    let p = msgs
        .iter()
        .find_map(|(_, m)| match m {
            Message::FilterPipeline(p) => Some(p.clone()),
            _ => None,
        })
        .expect("filter pipeline");
    assert_eq!(p.version, 2);
    assert_eq!(p.filters.len(), 1);
    assert_eq!((p.filters[0].id, p.filters[0].name.as_ref()), (3, None));

    // ea: unlimited dimension: extensible array index.
    let LayoutClass::Chunked { dims, index, .. } = layout_of(&messages(LATEST, 1270, sizes)).class
    else {
        panic!("chunked")
    };
    assert_eq!(dims, [2, 4]);
    assert!(
        matches!(index, ChunkIndex::ExtensibleArray { .. }),
        "{index:?}"
    );
}

/// Attributes added after creation overflowed the `contig` headers into continuation blocks
/// (v1: raw messages; v2: `OCHK` with checksum); all four attribute messages are found.
#[test]
fn continuation_blocks() {
    for (file, version) in [(EARLIEST, 1u8), (LATEST, 2)] {
        let sb = superblock_of(file);
        let addr = if version == 1 { 800 } else { 195 };
        let msgs = messages(file, addr, sb.sizes);
        let conts = msgs
            .iter()
            .filter(|(_, m)| matches!(m, Message::Continuation(_)))
            .count();
        assert!(conts >= 1, "v{version}: a continuation message");
        let attrs = msgs
            .iter()
            .filter(|(r, _)| r.kind == kind::ATTRIBUTE)
            .count();
        assert_eq!(attrs, 4, "v{version}");
    }
}

/// Superblock v2 (`libver=("v108", "v108")`) behind a 512-byte user block: found at 512; the
/// base address is 512 and object addresses are relative to it, while the stored end-of-file
/// address (as HDF5 1.14 writes it) equals the whole file's size.
#[test]
fn superblock_v2_after_user_block() {
    let sb = superblock_of(USERBLOCK_V2);
    assert_eq!(sb.version, 2);
    assert_eq!(sb.base_address, 512);
    assert_eq!(sb.eof_address, USERBLOCK_V2.len() as u64);
    let root = sb.base_address + sb.root_object_header_address();
    assert_eq!(root, 0x230);
    let msgs = messages(USERBLOCK_V2, root, sb.sizes);
    assert!(
        msgs.iter()
            .any(|(_, m)| matches!(m, Message::Link(l) if l.name == b"g"))
    );
}

/// Every truncation of each real header's first chunk errors without panicking.
#[test]
fn real_headers_truncated() {
    for (file, addr) in [
        (EARLIEST, 0x60usize),
        (EARLIEST, 1400),
        (LATEST, 0x30),
        (LATEST, 734),
    ] {
        let len =
            object_header::needed_len(&file[addr..addr + PREFIX_MAX_LEN], addr as u64).unwrap();
        for n in 0..len {
            assert!(decode_first_chunk(&file[addr..addr + n], addr as u64).is_err());
        }
        // Version 2: any flipped bit of the chunk is caught (prefix check or checksum).
        if file[addr..].starts_with(b"OHDR") {
            for i in 0..len {
                let mut c = file[addr..addr + len].to_vec();
                c[i] ^= 0x10;
                assert!(decode_first_chunk(&c, addr as u64).is_err(), "byte {i}");
            }
        }
    }
}
