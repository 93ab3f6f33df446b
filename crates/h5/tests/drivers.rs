//! Files of several members, written by libhdf5 with its family, split and multi drivers
//! (`scripts/drivers.py`, h5py with libhdf5 1.14, then with libhdf5 2.0): h5 opens each by the
//! names libhdf5 users give (the family's printf pattern, the multi or split base name) and by
//! the name of the member that holds the superblock, and reads what libhdf5 reads through the
//! same driver. Also the libhdf5 1.10 test files of the three drivers (`h5dump`'s
//! `tfamily%05d.h5`, `tmulti`, `tsplit_file`), kept in `fixtures/libhdf5_drivers/`. And a file
//! whose metadata libhdf5 saved in a metadata cache image, refused with a clear error.

use std::path::Path;

use h5_testkit::verify::Reference;
use serde_json::Value;

const SCRIPT: &str = include_str!("scripts/drivers.py");

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// The integer dataset `name` of `f`, widened to i64.
fn int_values(f: &h5::File, name: &str) -> Vec<i64> {
    let d = f.dataset(name).unwrap();
    d.read::<i64>().unwrap().iter().copied().collect()
}

/// The file at `path` (opened by h5) holds what libhdf5 read (`want`).
fn reads_as_libhdf5(path: &Path, want: &Value) {
    let what = path.display();
    let f = h5::File::open(path).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(int_values(&f, "ints"), ints(&want["ints"]), "{what}: ints");
    let chunked = f.dataset("chunked").unwrap();
    assert_eq!(chunked.shape(), [200, 50], "{what}");
    let got: Vec<f64> = chunked.read::<f64>().unwrap().iter().copied().collect();
    assert_eq!(got, floats(&want["chunked"]), "{what}: chunked");
    assert_eq!(
        int_values(&f, "g/h/big_endian"),
        ints(&want["big_endian"]),
        "{what}: big_endian"
    );
    let h = f.group("g/h").unwrap();
    assert_eq!(
        h.attr("note").unwrap().read_scalar::<String>().unwrap(),
        want["note"].as_str().unwrap()
    );
    assert_eq!(
        h.attr("scale").unwrap().read_vec::<f64>().unwrap(),
        floats(&want["scale"])
    );
}

#[test]
fn family_split_and_multi_files_of_libhdf5_read_as_libhdf5_reads_them() {
    for reference in Reference::ALL {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let out = h5_testkit::verify::run_python_with(reference, SCRIPT, &[d.as_os_str()]);
        let want: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
        for fam in ["fam_early", "fam_latest"] {
            // 4 KiB members: the data spans many of them.
            assert!(want[fam]["members"].as_u64().unwrap() > 10, "{fam}");
            reads_as_libhdf5(&d.join(format!("{fam}%d.h5")), &want[fam]);
            reads_as_libhdf5(&d.join(format!("{fam}0.h5")), &want[fam]);
        }
        reads_as_libhdf5(&d.join("spl"), &want["spl"]);
        reads_as_libhdf5(&d.join("spl-m.h5"), &want["spl"]);
        reads_as_libhdf5(&d.join("mul"), &want["mul"]);
        reads_as_libhdf5(&d.join("mul-s.h5"), &want["mul"]);

        // Metadata in a cache image is refused with a clear error (it may not be in place),
        // for reading and writing, until libhdf5 opens the file for writing once.
        let image = d.join("cache_image.h5");
        for e in [
            h5::File::open(&image).unwrap_err(),
            h5::File::open_rw(&image).unwrap_err(),
        ] {
            assert!(matches!(e.kind(), h5::error::ErrorKind::Unsupported), "{e}");
            assert!(e.to_string().contains("metadata cache image"), "{e}");
        }
        let out = h5_testkit::verify::run_python_with(
            reference,
            SCRIPT,
            &[d.as_os_str(), "reopen".as_ref()],
        );
        let reopened: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(reopened["cache_image"], want["cache_image"]);
        reads_as_libhdf5(&image, &reopened["cache_image"]);

        // A member file that holds no superblock is no HDF5 file on its own.
        let e = h5::File::open(d.join("mul-o.h5")).unwrap_err();
        assert!(matches!(e.kind(), h5::error::ErrorKind::NotHdf5), "{e}");
        // Such files are read-only: h5 refuses to write them instead of writing one member.
        for name in ["fam_early0.h5", "fam_latest0.h5", "spl-m.h5", "mul-s.h5"] {
            let before = std::fs::read(d.join(name)).unwrap();
            assert!(h5::File::open_rw(d.join(name)).is_err(), "{name}");
            assert_eq!(std::fs::read(d.join(name)).unwrap(), before, "{name}");
        }
    }
}

#[test]
fn a_family_with_a_member_missing_reads_what_its_first_members_hold_and_fails_past_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = h5_testkit::verify::run_python_with(Reference::Hdf5v114, SCRIPT, &[d.as_os_str()]);
    let want: Value = serde_json::from_str(out.trim()).unwrap();
    let members = want["fam_early"]["members"].as_u64().unwrap();
    // Without its last member, the family ends early: what lies there cannot be read.
    std::fs::remove_file(d.join(format!("fam_early{}.h5", members - 1))).unwrap();
    let f = h5::File::open(d.join("fam_early%d.h5")).unwrap();
    assert_eq!(int_values(&f, "ints"), ints(&want["fam_early"]["ints"]));
    let last = f.dataset("g/h/big_endian").and_then(|d| d.read::<i16>());
    assert!(last.is_err(), "data of the missing member read: {last:?}");
    // Without member 0 there is no file.
    std::fs::remove_file(d.join("fam_early0.h5")).unwrap();
    assert!(h5::File::open(d.join("fam_early%d.h5")).is_err());
}

/// The sum of a 10 x 15 dataset whose element (i, j) is i + j: h5dump's test files of the
/// three drivers all hold it as `dset1`.
fn dset1_is_i_plus_j(f: &h5::File) {
    let d = f.dataset("dset1").unwrap();
    assert_eq!(d.shape(), [10, 15]);
    let a = d.read_2d::<i32>().unwrap();
    for ((i, j), &v) in a.indexed_iter() {
        assert_eq!(v as usize, i + j, "({i}, {j})");
    }
}

#[test]
fn libhdf5_test_files_of_the_family_multi_and_split_drivers_are_read() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/libhdf5_drivers");
    for name in [
        "tfamily%05d.h5",
        "tfamily00000.h5",
        "tmulti",
        "tmulti-s.h5",
        "tsplit_file",
        "tsplit_file-m.h5",
    ] {
        let f = h5::File::open(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        dset1_is_i_plus_j(&f);
    }
    // The split file also has a string attribute on its root group.
    let f = h5::File::open(dir.join("tsplit_file")).unwrap();
    assert_eq!(
        f.attr("Metadata").unwrap().read_strings().unwrap(),
        ["this is some metadata on this file"]
    );
}
