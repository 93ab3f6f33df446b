//! The file space info message and the free-space managers of files libhdf5 1.14.4 wrote under
//! each file-space strategy (`fixtures/fsm/`, see `make_fsm_fixtures.py`) decode and re-encode
//! to libhdf5's bytes: the message body, every `FSHD` header and every `FSSE` section list.

use h5_format::free_space::{
    FreeSpaceClient, FreeSpaceHeader, FreeSpaceSections, SectionFormat, file_section,
};
use h5_format::message::file_space_info::{
    FileSpaceInfo, FileSpaceStrategy, SLOT_LARGE, SLOT_METADATA, SLOT_RAW_DATA,
};
use h5_format::message::{Message, decode_message, encode_message, kind};
use h5_format::object_header::{PREFIX_MAX_LEN, decode_continuation_block, decode_first_chunk};
use h5_format::superblock::{self, Superblock};
use h5_format::{Sizes, UNDEFINED_ADDRESS};

fn read(name: &str) -> Vec<u8> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/fsm");
    std::fs::read(dir.join(name)).unwrap()
}

fn superblock_of(file: &[u8]) -> Superblock {
    let len = superblock::needed_len(&file[..superblock::MIN_PREFIX], 0).unwrap();
    Superblock::decode(&file[..len], 0).unwrap()
}

/// The raw file space info message body of the superblock extension (following
/// continuations), if any.
fn fsinfo_body(file: &[u8], sb: &Superblock) -> Option<Vec<u8>> {
    let ext = sb.extension_address;
    if ext == UNDEFINED_ADDRESS {
        return None;
    }
    let at = ext as usize;
    let chunk = decode_first_chunk(
        &file[at..(at + PREFIX_MAX_LEN.max(4096)).min(file.len())],
        ext,
    )
    .unwrap();
    let mut messages: Vec<(u16, Vec<u8>)> = chunk
        .messages
        .iter()
        .map(|m| (m.kind, m.body.to_vec()))
        .collect();
    let mut i = 0;
    while i < messages.len() {
        if messages[i].0 == kind::CONTINUATION {
            let Message::Continuation(c) =
                decode_message(kind::CONTINUATION, 0, &messages[i].1, sb.sizes, 0).unwrap()
            else {
                unreachable!()
            };
            let block = &file[c.address as usize..(c.address + c.length) as usize];
            for m in decode_continuation_block(block, &chunk.prefix, c.address).unwrap() {
                messages.push((m.kind, m.body.to_vec()));
            }
        }
        i += 1;
    }
    messages
        .into_iter()
        .find(|(k, _)| *k == kind::FILE_SPACE_INFO)
        .map(|(_, b)| b)
}

struct Expect {
    name: &'static str,
    strategy: FileSpaceStrategy,
    persist: bool,
    threshold: u64,
    page_size: u64,
    /// Manager slots present (when persisting).
    slots: &'static [usize],
    /// Free bytes libhdf5 reports (`H5Fget_freespace`, in `fsm.json`).
    free: u64,
}

const FILES: [Expect; 10] = [
    Expect {
        name: "page_large.h5",
        strategy: FileSpaceStrategy::Page,
        persist: true,
        threshold: 1,
        page_size: 4096,
        slots: &[SLOT_METADATA, SLOT_RAW_DATA, SLOT_LARGE],
        free: 39351,
    },
    Expect {
        name: "fsm_persist.h5",
        strategy: FileSpaceStrategy::FsmAggr,
        persist: true,
        threshold: 1,
        page_size: 4096,
        slots: &[SLOT_METADATA, SLOT_RAW_DATA],
        free: 2280,
    },
    Expect {
        name: "fsm_persist_latest.h5",
        strategy: FileSpaceStrategy::FsmAggr,
        persist: true,
        threshold: 1,
        page_size: 4096,
        slots: &[SLOT_METADATA, SLOT_RAW_DATA],
        free: 26018,
    },
    Expect {
        name: "fsm_threshold.h5",
        strategy: FileSpaceStrategy::FsmAggr,
        persist: true,
        threshold: 512,
        page_size: 4096,
        slots: &[SLOT_RAW_DATA],
        free: 21280,
    },
    Expect {
        name: "fsm_no_persist.h5",
        strategy: FileSpaceStrategy::FsmAggr,
        persist: false,
        threshold: 1,
        page_size: 4096,
        slots: &[],
        free: 0,
    },
    Expect {
        name: "page_persist.h5",
        strategy: FileSpaceStrategy::Page,
        persist: true,
        threshold: 1,
        page_size: 4096,
        slots: &[SLOT_METADATA, SLOT_RAW_DATA],
        free: 5374,
    },
    Expect {
        name: "page_persist_8k.h5",
        strategy: FileSpaceStrategy::Page,
        persist: true,
        threshold: 1,
        page_size: 8192,
        slots: &[SLOT_METADATA, SLOT_RAW_DATA],
        free: 12736,
    },
    Expect {
        name: "page_no_persist.h5",
        strategy: FileSpaceStrategy::Page,
        persist: false,
        threshold: 1,
        page_size: 4096,
        slots: &[],
        free: 0,
    },
    Expect {
        name: "aggr.h5",
        strategy: FileSpaceStrategy::Aggr,
        persist: false,
        threshold: 1,
        page_size: 4096,
        slots: &[],
        free: 0,
    },
    Expect {
        name: "none.h5",
        strategy: FileSpaceStrategy::None,
        persist: false,
        threshold: 1,
        page_size: 4096,
        slots: &[],
        free: 0,
    },
];

#[test]
fn file_space_info_messages_decode_and_encode_to_libhdf5_bytes() {
    for e in &FILES {
        let file = read(e.name);
        let sb = superblock_of(&file);
        let Some(body) = fsinfo_body(&file, &sb) else {
            // libhdf5 writes no message for the default settings (FSM_AGGR, no persist,
            // threshold 1): the file keeps superblock version 0.
            assert_eq!(e.name, "fsm_no_persist.h5");
            assert_eq!(sb.version, 0);
            continue;
        };
        assert!(sb.version >= 2, "{}", e.name);
        let m = decode_message(kind::FILE_SPACE_INFO, 0, &body, sb.sizes, 0).unwrap();
        let Message::FileSpaceInfo(info) = &m else {
            panic!("{}: {m:?}", e.name)
        };
        assert_eq!(
            (
                info.version,
                info.strategy,
                info.persist,
                info.threshold,
                info.page_size
            ),
            (1, e.strategy, e.persist, e.threshold, e.page_size),
            "{}",
            e.name
        );
        assert_eq!(info.page_end_meta_threshold, 0);
        let slots: Vec<usize> = info.defined_managers().map(|(s, _)| s).collect();
        assert_eq!(slots, e.slots, "{}", e.name);
        // Version 1 object headers pad messages to 8 bytes with zeros.
        let n = info.encoded_len(sb.sizes);
        assert!(body.len() - n < 8 && body[n..].iter().all(|&b| b == 0));
        let body = &body[..n];
        assert_eq!(info.encode(sb.sizes).unwrap(), body, "{}", e.name);
        assert_eq!(encode_message(&m, sb.sizes).unwrap(), body);
        if !e.persist {
            assert_eq!(info.eoa_pre_fsm_fsalloc, UNDEFINED_ADDRESS, "{}", e.name);
        }
    }
}

/// Decodes one manager of `file` at `at`, checks both structures re-encode to the file's
/// bytes, and returns its sections.
fn manager(file: &[u8], sizes: Sizes, at: u64) -> (FreeSpaceHeader, Vec<(u64, u64, u8)>) {
    let hlen = FreeSpaceHeader::encoded_len(sizes);
    let hbytes = &file[at as usize..at as usize + hlen];
    let h = FreeSpaceHeader::decode(hbytes, sizes, at).unwrap();
    assert_eq!(h.encode(sizes), hbytes);
    assert_eq!(h.client, FreeSpaceClient::File);
    // The header's creation parameters are libhdf5's for a file on the POSIX driver.
    let mut expect = FreeSpaceHeader::file_manager(at, (1 << 63) - 1);
    (
        expect.total_space,
        expect.total_sections,
        expect.serial_sections,
        expect.sections_address,
        expect.sections_len,
        expect.sections_alloc_len,
    ) = (
        h.total_space,
        h.total_sections,
        h.serial_sections,
        h.sections_address,
        h.sections_len,
        h.sections_alloc_len,
    );
    assert_eq!(h, expect);
    let s = h.sections_address as usize;
    let sbytes = &file[s..s + h.sections_len as usize];
    let list =
        FreeSpaceSections::decode(sbytes, &h, sizes, h.sections_address, SectionFormat::File)
            .unwrap();
    assert_eq!(list.encode(&h, sizes, SectionFormat::File).unwrap(), sbytes);
    // libhdf5's order is the order `from_sections` rebuilds, and the header it summarizes is
    // libhdf5's header.
    let rebuilt = FreeSpaceSections::from_sections(list.address, at, list.iter());
    assert_eq!(rebuilt, list);
    let mut summarized = FreeSpaceHeader::file_manager(at, (1 << 63) - 1);
    summarized
        .summarize(&rebuilt, sizes, SectionFormat::File)
        .unwrap();
    summarized.sections_address = h.sections_address;
    summarized.sections_alloc_len = h.sections_alloc_len;
    assert_eq!(summarized, h);
    (h, list.iter().collect())
}

#[test]
fn free_space_managers_decode_and_encode_to_libhdf5_bytes() {
    for e in FILES.iter().filter(|e| e.persist) {
        let file = read(e.name);
        let sb = superblock_of(&file);
        let body = fsinfo_body(&file, &sb).unwrap();
        let Message::FileSpaceInfo(info) =
            decode_message(kind::FILE_SPACE_INFO, 0, &body, sb.sizes, 0).unwrap()
        else {
            unreachable!()
        };
        let mut total = 0;
        for (slot, at) in info.defined_managers() {
            let (h, sections) = manager(&file, sb.sizes, at);
            total += h.total_space;
            for (addr, size, ty) in sections {
                let expect_ty = match (e.strategy, slot) {
                    (FileSpaceStrategy::Page, SLOT_LARGE) => file_section::LARGE,
                    (FileSpaceStrategy::Page, _) => file_section::SMALL,
                    _ => file_section::SIMPLE,
                };
                assert_eq!(ty, expect_ty, "{} slot {slot}", e.name);
                assert!(addr + size <= info.eoa_pre_fsm_fsalloc.max(file.len() as u64));
                if e.strategy == FileSpaceStrategy::Page && slot != SLOT_LARGE {
                    // A small section lies inside one page.
                    assert_eq!(addr / e.page_size, (addr + size - 1) / e.page_size);
                }
                assert!(size >= e.threshold);
            }
        }
        assert_eq!(total, e.free, "{}", e.name);
    }
}

#[test]
fn a_version_0_message_maps_to_the_same_info() {
    // libhdf5 1.10.0 wrote version 0; h5py cannot, so this one is built by hand.
    let s = Sizes::EIGHT;
    let mut b = vec![0u8, 1];
    b.extend_from_slice(&1u64.to_le_bytes());
    for a in [0x400u64, u64::MAX, 0x500, u64::MAX, u64::MAX, u64::MAX] {
        b.extend_from_slice(&a.to_le_bytes());
    }
    let Message::FileSpaceInfo(info) = decode_message(kind::FILE_SPACE_INFO, 0, &b, s, 0).unwrap()
    else {
        unreachable!()
    };
    assert_eq!(
        info.defined_managers().collect::<Vec<_>>(),
        [(SLOT_METADATA, 0x400), (SLOT_RAW_DATA, 0x500)]
    );
    assert_eq!(FileSpaceInfo::encode(&info, s).unwrap(), b);
}
