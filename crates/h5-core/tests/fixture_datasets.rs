//! Every dataset of the fixture corpus (written by h5py / libhdf5 1.14.4) reads back the bytes
//! and values libhdf5 recorded, through the shared chunk cache: every layout (compact,
//! contiguous, chunked with each chunk index) and every filter the corpus uses.

use std::sync::Arc;

use h5_chunkcache::selection::Selection;
use h5_core::dataset::{DatasetInfo, read};
use h5_core::file::{CacheSettings, FileShared};
use h5_core::nav::resolve;
use h5_core::values::{numbers, strings};
use h5_io::{FileStorage, OpenMode};
use h5_testkit::values::{check_f64s, string_values};
use h5_testkit::{ObjectKind as MKind, manifest, sha256_hex};

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
    .unwrap()
}

fn raw(file: &Arc<FileShared>, info: &DatasetInfo) -> h5_core::Result<Vec<u8>> {
    let n: u64 = info.dims().iter().product();
    let mut buf = vec![0u8; n as usize * info.elem_size()];
    read(file, info, &Selection::All, None, None, &mut buf)?;
    Ok(buf)
}

/// Datasets this engine does not read yet, with the reason (each must fail with a clear
/// error, never wrong values). None today.
fn expected_unsupported(_file: &str, _path: &str) -> bool {
    false
}

#[test]
fn every_dataset_reads_back_what_libhdf5_wrote() {
    let m = manifest();
    let (mut checked, mut raw_checked, mut value_checked) = (0, 0, 0);
    let mut failures = Vec::new();
    for f in &m.files {
        let file = open(&f.name);
        for o in f.objects.iter().filter(|o| o.kind == MKind::Dataset) {
            let what = format!("{}:{}", f.name, o.path);
            let r = resolve(&file, file.root_address(), "/", &o.path).unwrap();
            let info = DatasetInfo::from_header(&r.file, &r.header)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            if let Some(shape) = &o.shape {
                assert_eq!(info.dims(), shape.as_slice(), "{what}: shape");
            }
            let bytes = match raw(&r.file, &info) {
                Ok(b) => b,
                Err(e) => {
                    if !expected_unsupported(&f.name, &o.path) {
                        failures.push(format!("{what}: {e}"));
                    }
                    continue;
                }
            };
            checked += 1;
            if let Some(want) = o.raw_bytes() {
                if bytes != want {
                    failures.push(format!("{what}: raw bytes differ"));
                }
                raw_checked += 1;
            }
            let little = !matches!(
                o.type_desc,
                Some(
                    h5_testkit::TypeDesc::Integer {
                        order: h5_testkit::ByteOrder::Be,
                        ..
                    } | h5_testkit::TypeDesc::Float {
                        order: h5_testkit::ByteOrder::Be,
                        ..
                    }
                )
            );
            if let Some(h) = &o.values_sha256
                && little
                && !info.datatype.has_indirection()
            {
                if &sha256_hex(&bytes) != h {
                    failures.push(format!("{what}: sha256 differs"));
                }
                raw_checked += 1;
            }
            if let Some(serde_json::Value::Array(items)) = &o.values
                && !items.is_empty()
                && items.iter().all(serde_json::Value::is_boolean)
            {
                // h5py's bool: an enum over int8 with FALSE = 0 and TRUE = 1.
                let got = numbers::<i8>(&info.datatype, &bytes, false)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let want: Vec<i8> = items
                    .iter()
                    .map(|b| i8::from(b.as_bool() == Some(true)))
                    .collect();
                if got != want {
                    failures.push(format!("{what}: booleans {got:?} != {want:?}"));
                }
                value_checked += 1;
            } else if o.values.is_some() {
                if let Ok(v) = numbers::<f64>(&info.datatype, &bytes, true) {
                    if let Err(e) = check_f64s(o, &v) {
                        failures.push(format!("{what}: {e}"));
                    }
                    value_checked += 1;
                } else if let Some(want) = string_values(o)
                    && let Ok(got) = strings(&r.file, &info.datatype, &bytes)
                {
                    if got != want {
                        failures.push(format!("{what}: strings {got:?} != {want:?}"));
                    }
                    value_checked += 1;
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        checked >= 100 && raw_checked >= 80 && value_checked >= 50,
        "checked {checked}, raw {raw_checked}, values {value_checked}"
    );
}
