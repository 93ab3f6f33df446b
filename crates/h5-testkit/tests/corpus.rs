//! The committed corpus matches its manifest: every listed file exists with the recorded size and
//! SHA-256 (so a regenerated or edited file is noticed), nothing unlisted lies around, and the
//! manifest is self-consistent and covers every theme the compatibility tests rely on.

use std::collections::BTreeSet;

use h5_testkit::{
    DataspaceKind, Layout, ObjectKind, TypeDesc, fixtures_dir, manifest, sha256_hex, values,
};

#[test]
fn every_file_matches_its_recorded_hash() {
    let m = manifest();
    let mut listed = BTreeSet::new();
    let entries = m
        .files
        .iter()
        .map(|f| (&f.name, f.size, &f.sha256))
        .chain(m.aux_files.iter().map(|f| (&f.name, f.size, &f.sha256)));
    for (name, size, sha) in entries {
        let path = fixtures_dir().join(name);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(bytes.len() as u64, size, "{name}: size changed");
        assert_eq!(
            &sha256_hex(&bytes),
            sha,
            "{name}: content changed (regenerated?)"
        );
        listed.insert(name.clone());
    }
    listed.insert("manifest.json".to_owned());
    for entry in std::fs::read_dir(fixtures_dir()).unwrap_or_else(|e| panic!("{e}")) {
        let name = entry
            .unwrap_or_else(|e| panic!("{e}"))
            .file_name()
            .to_string_lossy()
            .into_owned();
        assert!(
            listed.contains(&name),
            "{name} is in fixtures/files but not in the manifest"
        );
    }
}

#[test]
fn files_start_with_the_hdf5_signature_after_the_userblock() {
    for f in manifest().files {
        let bytes = std::fs::read(f.path()).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let at = usize::try_from(f.userblock_size).unwrap_or(usize::MAX);
        let sig = bytes
            .get(at..at + 9)
            .unwrap_or_else(|| panic!("{}: too short", f.name));
        assert_eq!(&sig[..8], b"\x89HDF\r\n\x1a\n", "{}", f.name);
        assert_eq!(sig[8], f.superblock_version, "{}", f.name);
    }
}

#[test]
fn manifest_is_self_consistent() {
    for f in manifest().files {
        assert_eq!(
            f.objects.first().map(|o| o.path.as_str()),
            Some("/"),
            "{}",
            f.name
        );
        let paths: BTreeSet<&str> = f.objects.iter().map(|o| o.path.as_str()).collect();
        for o in &f.objects {
            let ctx = format!("{}:{}", f.name, o.path);
            if o.kind == ObjectKind::Group && o.hard_link_of.is_none() {
                for l in o.links.iter().flatten() {
                    let child = format!("{}/{l}", o.path.trim_end_matches('/'));
                    assert!(paths.contains(child.as_str()), "{ctx}: link {l} not listed");
                }
            }
            if o.kind != ObjectKind::Dataset || o.hard_link_of.is_some() {
                continue;
            }
            assert!(o.type_desc.is_some() && o.layout.is_some(), "{ctx}");
            match o.dataspace {
                Some(DataspaceKind::Null) => assert!(o.values.is_none(), "{ctx}"),
                Some(_) => {
                    let shape = o.shape.clone().unwrap_or_default();
                    let n: u64 = shape.iter().product();
                    if let Some(h) = &o.values_sha256 {
                        assert_eq!(h.len(), 64, "{ctx}");
                        assert!(!o.spot_values.as_ref().is_none_or(Vec::is_empty), "{ctx}");
                    } else {
                        let elems = values::elements(o).unwrap_or_else(|| panic!("{ctx}"));
                        assert_eq!(
                            elems.len() as u64,
                            n.max(u64::from(shape.is_empty())),
                            "{ctx}"
                        );
                    }
                }
                None => panic!("{ctx}: no dataspace"),
            }
            if let Some(raw) = o.raw_bytes() {
                let n: u64 = o.shape.iter().flatten().product();
                let size = match &o.type_desc {
                    Some(TypeDesc::Integer { size, .. } | TypeDesc::Float { size, .. }) => *size,
                    Some(TypeDesc::Compound { size, .. } | TypeDesc::Array { size, .. }) => *size,
                    Some(TypeDesc::String {
                        size: Some(size), ..
                    }) => *size,
                    Some(TypeDesc::Enum { size, .. } | TypeDesc::Opaque { size, .. }) => *size,
                    Some(TypeDesc::Bitfield { size, .. } | TypeDesc::Complex { size, .. }) => *size,
                    other => panic!("{ctx}: raw_hex for {other:?}"),
                };
                assert_eq!(raw.len() as u64, n * size, "{ctx}");
            }
        }
    }
}

#[test]
fn corpus_covers_the_themes() {
    let m = manifest();
    let sb: BTreeSet<u8> = m.files.iter().map(|f| f.superblock_version).collect();
    assert!(
        sb.is_superset(&BTreeSet::from([0, 2, 3])),
        "superblocks {sb:?}"
    );
    let all = || m.files.iter().flat_map(|f| f.objects.iter());
    let indexes: BTreeSet<&str> = all()
        .filter_map(|o| o.notes.as_ref()?.chunk_index.as_deref())
        .collect();
    for want in [
        "btree_v1",
        "single_chunk",
        "implicit",
        "fixed_array",
        "extensible_array",
        "btree_v2",
    ] {
        assert!(indexes.contains(want), "no {want} chunk index");
    }
    let layouts: BTreeSet<String> = all()
        .filter_map(|o| o.layout)
        .map(|l| format!("{l:?}"))
        .collect();
    for l in [
        Layout::Compact,
        Layout::Contiguous,
        Layout::Chunked,
        Layout::Virtual,
    ] {
        assert!(layouts.contains(&format!("{l:?}")), "no {l:?} layout");
    }
    let kinds: BTreeSet<String> = all().map(|o| format!("{:?}", o.kind)).collect();
    assert_eq!(kinds.len(), 5, "object kinds {kinds:?}");
    assert!(all().any(|o| o.dangling == Some(true)));
    assert!(all().any(|o| o.hard_link_of.is_some()));
    let filters: BTreeSet<u32> = all()
        .flat_map(|o| o.filters.iter().flatten())
        .map(|f| f.id)
        .collect();
    for id in [1, 2, 3, 5, 6, 32000] {
        assert!(filters.contains(&id), "no filter {id}");
    }
}

#[test]
fn spot_checks_of_known_values() {
    let m = manifest();
    let f = m
        .file("layouts_latest.h5")
        .unwrap_or_else(|| panic!("missing file"));
    let d = f
        .object("/fixed_array_sparse")
        .unwrap_or_else(|| panic!("missing dataset"));
    let v = values::i64_values(d).unwrap_or_else(|| panic!("no values"));
    assert_eq!(v.len(), 100);
    assert_eq!((v[0], v[20], v[29], v[95], v[99]), (-7, 0, 9, 5, -7));
    let d = f
        .object("/contiguous")
        .unwrap_or_else(|| panic!("missing dataset"));
    let expected: Vec<f64> = (0..100).map(f64::from).collect();
    values::check_f64s(d, &expected).unwrap_or_else(|e| panic!("{e}"));
    let le: Vec<u8> = expected.iter().flat_map(|x| x.to_le_bytes()).collect();
    let d = f
        .object("/extensible_array_big")
        .unwrap_or_else(|| panic!("missing dataset"));
    let bytes: Vec<u8> = (0u32..3000).map(|i| ((i * 7) % 256) as u8).collect();
    values::check_le_bytes(d, &bytes).unwrap_or_else(|e| panic!("{e}"));
    assert!(values::check_le_bytes(d, &le).is_err());
}

#[test]
fn files_written_by_netcdf4_and_pytables_are_listed() {
    let m = manifest();
    assert_eq!(m.generator.netcdf4.as_deref(), Some("1.7.2"));
    assert_eq!(m.generator.tables.as_deref(), Some("3.10.1"));
    let file = |name: &str| {
        m.file(name)
            .unwrap_or_else(|| panic!("{name} missing from the manifest"))
    };
    let attr = |o: &h5_testkit::Object, name: &str| {
        o.attribute(name)
            .and_then(|a| a.value.clone())
            .unwrap_or_else(|| panic!("{}: no attribute {name}", o.path))
    };

    let nc = file("netcdf4_lib.nc");
    assert_eq!(nc.superblock_version, 2);
    assert!(
        nc.writer
            .as_deref()
            .is_some_and(|w| w.starts_with("netCDF4 1.7.2 (libnetcdf 4.9."))
    );
    let root = nc.object("/").unwrap_or_else(|| panic!("no root"));
    assert!(
        attr(root, "_NCProperties")
            .as_str()
            .is_some_and(|s| s.starts_with("version=2,netcdf=4.9."))
    );
    let temp = nc.object("/temp").unwrap_or_else(|| panic!("no /temp"));
    assert_eq!(temp.maxshape, Some(vec![None, Some(4), Some(5)]));
    let v = values::f64_values(temp).unwrap_or_else(|| panic!("no values"));
    assert_eq!(v.len(), 60);
    assert_eq!((v[0], v[39], v[40], v[46]), (-5.0, 4.75, -999.0, 1.25));
    let names = nc.object("/names").unwrap_or_else(|| panic!("no /names"));
    assert_eq!(
        values::string_values(names),
        Some(["a", "bb", "", "grüß", "日本"].map(String::from).to_vec())
    );
    let lon = nc.object("/lon").unwrap_or_else(|| panic!("no /lon"));
    assert_eq!(attr(lon, "CLASS"), "DIMENSION_SCALE");
    for t in ["/cloud_t", "/complex_t", "/ragged_t"] {
        let o = nc.object(t).unwrap_or_else(|| panic!("no {t}"));
        assert_eq!((o.kind, o.mtime), (ObjectKind::Datatype, Some(0)), "{t}");
    }
    let classic = file("netcdf4_classic.nc");
    let root = classic.object("/").unwrap_or_else(|| panic!("no root"));
    assert!(root.attribute("_nc3_strict").is_some());

    let pt = file("pytables.h5");
    assert_eq!(pt.superblock_version, 0);
    let table = pt
        .object("/grp/table")
        .unwrap_or_else(|| panic!("no table"));
    assert_eq!(attr(table, "CLASS"), "TABLE");
    assert_eq!(attr(table, "NROWS"), 10);
    assert!(matches!(table.type_desc, Some(TypeDesc::Compound { .. })));
    let earray = pt.object("/earray").unwrap_or_else(|| panic!("no earray"));
    assert_eq!(earray.maxshape, Some(vec![None, Some(4)]));
    assert_eq!(earray.shape, Some(vec![5, 4]));
    let blosc: BTreeSet<&str> = pt
        .objects
        .iter()
        .filter(|o| o.filters.iter().flatten().any(|f| f.id == 32001))
        .map(|o| o.path.as_str())
        .collect();
    assert_eq!(blosc.len(), 3, "{blosc:?}");
}
