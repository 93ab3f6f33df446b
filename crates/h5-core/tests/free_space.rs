//! Persisted free space read from files libhdf5 1.14.4 wrote under every file-space strategy
//! (`fixtures/fsm/`, see `make_fsm_fixtures.py`): the settings and the free sections h5 reads
//! are what libhdf5 reports for the same files (`fsm.json`: `H5Fget_freespace`,
//! `H5Fget_free_sections`), the managers come through the metadata cache, the allocator takes
//! the sections back, and damaged managers are typed errors.

use std::path::PathBuf;
use std::sync::Arc;

use h5_core::Error;
use h5_core::file::{CacheSettings, FileShared};
use h5_core::space::{FreeList, SpaceConfig, SpaceManager, SpaceStrategy};
use h5_format::FormatError;
use h5_io::{FileStorage, MemoryStorage, OpenMode, Storage};
use h5_metacache::MetadataKind;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/fsm")
}

fn open(name: &str) -> Arc<FileShared> {
    let storage = FileStorage::open(dir().join(name), OpenMode::ReadOnly).unwrap();
    FileShared::open(Arc::new(storage), &CacheSettings::default(), None).unwrap()
}

fn open_bytes(bytes: Vec<u8>) -> Arc<FileShared> {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::with_data(bytes));
    FileShared::open(storage, &CacheSettings::default(), None).unwrap()
}

fn expected() -> serde_json::Map<String, serde_json::Value> {
    let text = std::fs::read_to_string(dir().join("fsm.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn strategy(code: u64) -> SpaceStrategy {
    match code {
        0 => SpaceStrategy::FsmAggr,
        1 => SpaceStrategy::Page,
        2 => SpaceStrategy::Aggr,
        _ => SpaceStrategy::None,
    }
}

#[test]
fn persisted_sections_are_what_libhdf5_reports() {
    let all = expected();
    assert_eq!(all.len(), 10);
    for (name, e) in &all {
        let file = open(name);
        let got = file.persisted_free_space().unwrap();
        let want_sections: Vec<(u64, u64)> = e["sections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s[0].as_u64().unwrap(), s[1].as_u64().unwrap()))
            .collect();
        let Some(space) = got else {
            // Default settings: no message at all, and nothing persisted.
            assert_eq!(name, "fsm_no_persist.h5");
            assert_eq!(e["strategy"], 0);
            assert_eq!(e["persist"], false);
            assert!(want_sections.is_empty());
            continue;
        };
        assert_eq!(
            space.strategy,
            strategy(e["strategy"].as_u64().unwrap()),
            "{name}"
        );
        assert_eq!(space.persist, e["persist"].as_bool().unwrap(), "{name}");
        assert_eq!(space.threshold, e["threshold"].as_u64().unwrap(), "{name}");
        assert_eq!(space.page_size, e["page_size"].as_u64().unwrap(), "{name}");
        assert_eq!(space.message_version, 1);
        let got_sections: Vec<(u64, u64)> =
            space.sections().iter().map(|s| (s.addr, s.len)).collect();
        assert_eq!(got_sections, want_sections, "{name}");
        assert_eq!(
            space.free_bytes(),
            e["freespace"].as_u64().unwrap(),
            "{name}"
        );
        if space.persist {
            // libhdf5 records the EOA before it placed the managers; the file ends there or
            // after (the managers' own space is allocated from the end only when no free
            // section fits).
            let pre = space.eoa_pre_fsm_fsalloc.unwrap();
            assert!(pre <= e["file_size"].as_u64().unwrap(), "{name}");
            for m in &space.managers {
                assert!(m.sections.iter().all(|s| s.list == m.list));
            }
        } else {
            assert!(space.managers.is_empty());
        }
    }
}

#[test]
fn manager_slots_map_to_the_allocator_lists() {
    let space = open("page_large.h5")
        .persisted_free_space()
        .unwrap()
        .unwrap();
    let lists: Vec<(usize, FreeList)> = space.managers.iter().map(|m| (m.slot, m.list)).collect();
    assert_eq!(
        lists,
        [
            (0, FreeList::Metadata),
            (2, FreeList::RawData),
            (6, FreeList::Large)
        ]
    );
    // Whole free pages are large sections; small ones stay inside a page.
    let large: Vec<(u64, u64)> = space.managers[2]
        .sections
        .iter()
        .map(|s| (s.addr, s.len))
        .collect();
    assert_eq!(large, [(4096, 12288), (20480, 20480)]);
    for m in &space.managers[..2] {
        for s in &m.sections {
            assert_eq!(s.addr / 4096, (s.addr + s.len - 1) / 4096);
        }
    }
    let space = open("fsm_persist.h5")
        .persisted_free_space()
        .unwrap()
        .unwrap();
    let lists: Vec<(usize, FreeList)> = space.managers.iter().map(|m| (m.slot, m.list)).collect();
    assert_eq!(lists, [(0, FreeList::Metadata), (2, FreeList::RawData)]);
}

#[test]
fn managers_are_loaded_through_the_metadata_cache() {
    let file = open("page_large.h5");
    let before = file.metadata_cache_stats().unwrap();
    let misses = |s: &h5_metacache::Stats, k: MetadataKind| {
        s.per_class.get(k.id() as usize).map_or(0, |c| c.misses)
    };
    assert_eq!(misses(&before, MetadataKind::FreeSpaceHeader), 0);
    file.persisted_free_space().unwrap();
    let after = file.metadata_cache_stats().unwrap();
    assert_eq!(misses(&after, MetadataKind::FreeSpaceHeader), 3);
    assert_eq!(misses(&after, MetadataKind::FreeSpaceSections), 3);
    // A second look is served by the cache.
    file.persisted_free_space().unwrap();
    let again = file.metadata_cache_stats().unwrap();
    assert_eq!(misses(&again, MetadataKind::FreeSpaceHeader), 3);
    assert_eq!(misses(&again, MetadataKind::FreeSpaceSections), 3);
}

#[test]
fn the_allocator_takes_the_persisted_sections_back() {
    for name in [
        "fsm_persist.h5",
        "fsm_persist_latest.h5",
        "fsm_threshold.h5",
        "page_persist.h5",
        "page_persist_8k.h5",
        "page_large.h5",
    ] {
        let file = open(name);
        let space = file.persisted_free_space().unwrap().unwrap();
        let eoa = std::fs::metadata(dir().join(name)).unwrap().len();
        let config = SpaceConfig {
            strategy: space.strategy,
            persist: space.persist,
            threshold: space.threshold,
            page_size: space.page_size,
            ..SpaceConfig::default()
        };
        let manager = SpaceManager::from_persistent(config, &space.to_persistent(eoa))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(manager.free_sections(), space.sections(), "{name}");
    }
}

/// The offset of the first occurrence of `sig` in `bytes`.
fn find(bytes: &[u8], sig: &[u8]) -> usize {
    bytes.windows(sig.len()).position(|w| w == sig).unwrap()
}

#[test]
fn damaged_managers_are_typed_errors() {
    let original = std::fs::read(dir().join("fsm_persist.h5")).unwrap();
    // A flipped byte in a section list's records: its checksum fails.
    let mut bytes = original.clone();
    let at = find(&bytes, b"FSSE") + 14;
    bytes[at] ^= 0x10;
    let e = open_bytes(bytes).persisted_free_space().unwrap_err();
    assert!(
        matches!(
            e,
            Error::Format(FormatError::Corrupted {
                structure: "free-space section list",
                ..
            })
        ),
        "{e:?}"
    );
    // A damaged header signature.
    let mut bytes = original.clone();
    let at = find(&bytes, b"FSHD");
    bytes[at] = b'X';
    let e = open_bytes(bytes).persisted_free_space().unwrap_err();
    assert!(
        matches!(
            e,
            Error::Format(FormatError::Corrupted {
                structure: "free-space manager header",
                ..
            })
        ),
        "{e:?}"
    );
    // A manager address past the end of the file: the read is refused, not attempted.
    let mut bytes = original;
    let msg = find(&bytes, &[0x17, 0x00]) + 8; // the message body in the v1 extension header
    let slot0 = msg + 3 + 8 + 8 + 2 + 8;
    bytes[slot0..slot0 + 8].copy_from_slice(&0x10_0000u64.to_le_bytes());
    assert!(open_bytes(bytes).persisted_free_space().is_err());
}
