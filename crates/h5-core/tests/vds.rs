//! Virtual datasets: `/vds` of fixtures/files/vds.h5 (h5py 3.12 / libhdf5 1.14.4) maps
//! `vds_src_a.h5:/data` (all) to row 0, every second element of `vds_src_b.h5:/data` to row 1
//! columns 0..5, and the same file's `/local` to row 2; the rest is the fill value −1.

use std::sync::Arc;

use h5_chunkcache::selection::{Hyperslab, Points, Selection};
use h5_core::dataset::{DatasetInfo, read};
use h5_core::file::{CacheSettings, FileShared};
use h5_core::nav::resolve;
use h5_core::values::numbers;
use h5_io::{FileStorage, OpenMode};
use h5_testkit::values::i64_values;

fn open_at(path: &std::path::Path) -> Arc<FileShared> {
    let storage = FileStorage::open(path, OpenMode::ReadOnly).unwrap();
    FileShared::open(
        Arc::new(storage),
        &CacheSettings::default(),
        path.parent().map(|p| p.to_path_buf()),
    )
    .unwrap()
}

fn vds(file: &Arc<FileShared>) -> (Arc<FileShared>, DatasetInfo) {
    let r = resolve(file, file.root_address(), "/", "/vds").unwrap();
    let info = DatasetInfo::from_header(&r.file, &r.header).unwrap();
    (r.file, info)
}

fn read_i32(file: &Arc<FileShared>, info: &DatasetInfo, sel: &Selection, n: usize) -> Vec<i32> {
    let mut buf = vec![0u8; n * 4];
    read(file, info, sel, None, None, &mut buf).unwrap();
    numbers::<i32>(&info.datatype, &buf, false).unwrap()
}

fn expected() -> Vec<i64> {
    let m = h5_testkit::manifest();
    let obj = m.file("vds.h5").unwrap().object("/vds").unwrap();
    i64_values(obj).unwrap()
}

#[test]
fn the_whole_virtual_dataset_matches_libhdf5() {
    let file = open_at(&h5_testkit::fixture_path("vds.h5"));
    let (f, info) = vds(&file);
    assert_eq!(info.dims(), &[4, 10]);
    let got = read_i32(&f, &info, &Selection::All, 40);
    let want = expected();
    assert_eq!(want.len(), 40);
    assert_eq!(got.iter().map(|&v| i64::from(v)).collect::<Vec<_>>(), want);
    // Spot checks of each mapping and of the fill value.
    assert_eq!(&got[0..3], &[100, 101, 102]);
    assert_eq!(&got[10..16], &[200, 202, 204, 206, 208, -1]);
    assert_eq!(&got[20..23], &[0, -1, -2]);
    assert!(got[30..].iter().all(|&v| v == -1));
    // The raw bytes libhdf5 recorded.
    let m = h5_testkit::manifest();
    let raw = m
        .file("vds.h5")
        .unwrap()
        .object("/vds")
        .unwrap()
        .raw_bytes()
        .unwrap();
    let mut buf = vec![0u8; 160];
    read(&f, &info, &Selection::All, None, None, &mut buf).unwrap();
    assert_eq!(buf, raw);
}

#[test]
fn hyperslabs_and_points_of_the_virtual_dataset() {
    let file = open_at(&h5_testkit::fixture_path("vds.h5"));
    let (f, info) = vds(&file);
    let want = expected();
    // Rows 0..3, columns 3, 5, 7 (stride 2), then a 2x2 box straddling mapped and fill.
    let h = Hyperslab::new(&[0, 3], &[1, 2], &[3, 3], &[1, 1]).unwrap();
    let got = read_i32(&f, &info, &Selection::Hyperslab(h), 9);
    assert_eq!(got, vec![103, 105, 107, 206, -1, -1, -3, -5, -7]);
    let mut check = Vec::new();
    for r in 0..3 {
        for c in [3, 5, 7] {
            check.push(want[r * 10 + c] as i32);
        }
    }
    assert_eq!(got, check);
    let b = Hyperslab::contiguous(&[1, 4], &[2, 2]).unwrap();
    assert_eq!(
        read_i32(&f, &info, &Selection::Hyperslab(b), 4),
        vec![208, -1, -4, -5]
    );
    let p = Points::new(2, vec![3, 9, 0, 9, 1, 2]).unwrap();
    assert_eq!(
        read_i32(&f, &info, &Selection::Points(p), 3),
        vec![-1, 109, 204]
    );
}

#[test]
fn missing_source_files_read_as_the_fill_value() {
    let dir = std::env::temp_dir().join(format!("h5-vds-missing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("vds.h5");
    std::fs::copy(h5_testkit::fixture_path("vds.h5"), &path).unwrap();
    let file = open_at(&path);
    let (f, info) = vds(&file);
    let got = read_i32(&f, &info, &Selection::All, 40);
    std::fs::remove_dir_all(&dir).unwrap();
    // Rows 0 and 1 come from the missing files; row 2 from the virtual file itself.
    assert!(got[..20].iter().all(|&v| v == -1), "{got:?}");
    assert_eq!(&got[20..30], &[0, -1, -2, -3, -4, -5, -6, -7, -8, -9]);
    assert!(got[30..].iter().all(|&v| v == -1));
}
