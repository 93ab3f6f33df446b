//! Every group of every fixture file (written by h5py/libhdf5, see `fixtures/`) lists the links
//! the manifest records, and every hard-linked object resolves to the address libhdf5 reports:
//! old-style symbol tables, compact links and dense (fractal heap + v2 B-tree) storage, through
//! the metadata cache.

use std::sync::Arc;

use h5_core::file::{CacheSettings, FileShared};
use h5_core::group::links;
use h5_core::nav::{ObjectKind, resolve};
use h5_core::object::ObjectHeader;
use h5_io::{FileStorage, OpenMode};
use h5_testkit::{ObjectKind as MKind, manifest};

fn open(name: &str) -> Arc<FileShared> {
    let path = h5_testkit::fixture_path(name);
    let storage = FileStorage::open(&path, OpenMode::ReadOnly).unwrap();
    FileShared::open(
        Arc::new(storage),
        &CacheSettings {
            // Files a writer left open: read as libhdf5 reads them after h5clear.
            ignore_open_for_writing: name.starts_with("open_for_writing"),
            ..CacheSettings::default()
        },
        path.parent().map(|p| p.to_path_buf()),
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_group_lists_the_recorded_links() {
    let m = manifest();
    let mut groups = 0;
    let mut objects = 0;
    for f in &m.files {
        let file = open(&f.name);
        assert_eq!(
            file.superblock().version,
            f.superblock_version,
            "{}",
            f.name
        );
        for o in &f.objects {
            match o.kind {
                MKind::Group | MKind::Dataset | MKind::Datatype => {}
                _ => continue,
            }
            let r = resolve(&file, file.root_address(), "/", &o.path)
                .unwrap_or_else(|e| panic!("{}:{}: {e}", f.name, o.path));
            if let Some(addr) = o.addr {
                assert_eq!(r.header.address, addr, "{}:{} address", f.name, o.path);
            }
            objects += 1;
            let kind = ObjectKind::of(&r.header);
            match o.kind {
                MKind::Group => {
                    assert_eq!(kind, ObjectKind::Group, "{}:{}", f.name, o.path);
                    let names: Vec<String> = links(&r.file, &r.header)
                        .unwrap_or_else(|e| panic!("{}:{}: {e}", f.name, o.path))
                        .into_iter()
                        .map(|l| l.name)
                        .collect();
                    let mut want = o.links.clone().unwrap_or_default();
                    want.sort();
                    assert_eq!(names, want, "{}:{}", f.name, o.path);
                    groups += 1;
                }
                MKind::Dataset => assert_eq!(kind, ObjectKind::Dataset, "{}:{}", f.name, o.path),
                _ => {}
            }
        }
    }
    assert!(
        groups >= 40 && objects >= 300,
        "{groups} groups, {objects} objects"
    );
}

#[test]
fn soft_external_and_dangling_links() {
    let file = open("groups_old.h5");
    let root = ObjectHeader::load(&file, file.root_address()).unwrap();
    let l = links(&file, &root).unwrap();
    assert!(l.iter().any(|e| e.name == "dangling"));
    let m = manifest();
    let f = m.file("groups_old.h5").unwrap();
    for o in &f.objects {
        match o.kind {
            MKind::SoftLink if o.dangling == Some(true) => {
                let r = resolve(&file, file.root_address(), "/", &o.path);
                assert!(
                    matches!(r, Err(h5_core::Error::NotFound(_))),
                    "{}: {r:?}",
                    o.path
                );
            }
            MKind::SoftLink | MKind::ExternalLink if o.dangling != Some(true) => {
                let r = resolve(&file, file.root_address(), "/", &o.path)
                    .unwrap_or_else(|e| panic!("{}: {e}", o.path));
                assert_ne!(ObjectKind::of(&r.header), ObjectKind::Unknown, "{}", o.path);
            }
            _ => {}
        }
    }
}

/// A damaged checksummed structure reports `Corrupted` naming the structure and its address
/// (not a generic cache error).
#[test]
fn checksum_mismatch_is_a_corrupted_error_naming_the_structure() {
    use h5_io::{MemoryStorage, Storage};
    let path = h5_testkit::fixture_path("sb3_latest.h5");
    let mut bytes = std::fs::read(&path).unwrap();
    let m = manifest();
    let f = m.file("sb3_latest.h5").unwrap();
    let root = f.object("/").unwrap().addr.unwrap() as usize;
    // A byte inside the root object header (after its 4-byte signature) breaks its checksum.
    bytes[root + 6] ^= 0xFF;
    let storage = MemoryStorage::new();
    storage.write_at(0, &bytes).unwrap();
    let file = FileShared::open(Arc::new(storage), &CacheSettings::default(), None).unwrap();
    let err = ObjectHeader::load(&file, file.root_address()).unwrap_err();
    assert!(
        matches!(
            &err,
            h5_core::Error::Format(h5_format::FormatError::Corrupted { address, .. })
                if *address == root as u64
        ),
        "{err:?}"
    );
}

/// Finding a link by name through the group's index (v1 B-tree descent for old-style groups,
/// name-hash v2 B-tree for dense ones) gives the same entry as the full listing, for every link
/// of every group of the corpus; names that are not there are not found.
#[test]
fn indexed_lookup_agrees_with_the_listing() {
    use h5_core::nav::find_link;
    let m = manifest();
    let mut found = 0;
    for f in &m.files {
        let file = open(&f.name);
        for o in f.objects.iter().filter(|o| o.kind == MKind::Group) {
            let r = resolve(&file, file.root_address(), "/", &o.path).unwrap();
            for l in links(&r.file, &r.header).unwrap() {
                let got = find_link(&r.file, &r.header, &l.name).unwrap();
                assert_eq!(got.as_ref(), Some(&l), "{}:{} {}", f.name, o.path, l.name);
                found += 1;
            }
            assert_eq!(
                find_link(&r.file, &r.header, "no such link!").unwrap(),
                None
            );
            assert_eq!(find_link(&r.file, &r.header, "").unwrap(), None);
        }
    }
    assert!(found > 300, "{found}");
}
