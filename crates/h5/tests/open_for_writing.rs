//! Files whose writer died without closing them (`fixtures/files/open_for_writing_*.h5`: the
//! superblock's status flags still set). As libhdf5: a version 3 superblock with the flags set
//! is refused (a typed error naming the cause and the `h5 clear` remedy), version 2 flags are
//! ignored; `FileAccess::ignore_open_for_writing` reads it anyway; `clear_status_flags` (`h5
//! clear`) resets the flags so that h5py (HDF5 1.14 and 2.0) and h5 open it again.

use h5::{Error, File, FileAccess};
use h5_testkit::fixture_path;
use h5_testkit::verify::{DatasetExpect, Expectations, check_with_both};
use serde_json::json;

fn expected() -> Expectations {
    Expectations::new().dataset(
        "/data",
        DatasetExpect::new("<i4", &[3, 4]).values(json!([
            [0, 1, 2, 3],
            [4, 5, 6, 7],
            [8, 9, 10, 11]
        ])),
    )
}

#[test]
fn a_version_3_superblock_left_open_is_refused_by_default() {
    for (name, flags) in [
        ("open_for_writing_v3.h5", 0x01),
        ("open_for_writing_swmr.h5", 0x05),
    ] {
        let e = File::open(fixture_path(name)).expect_err("refused");
        assert!(
            matches!(e, Error::OpenForWriting { flags: f } if f == flags),
            "{name}: {e}"
        );
        let text = e.to_string();
        assert!(text.contains("h5 clear"), "{text}");
        assert_eq!(text.contains("SWMR"), flags & 0x04 != 0, "{text}");
        // Writing is refused the same way.
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join(name);
        std::fs::copy(fixture_path(name), &copy).unwrap();
        assert!(matches!(
            File::open_rw(&copy),
            Err(Error::OpenForWriting { .. })
        ));
    }
}

#[test]
fn version_2_flags_are_ignored_as_libhdf5_ignores_them() {
    let f = File::open(fixture_path("open_for_writing_v2.h5")).expect("opens");
    assert!(!f.marked_open_for_writing());
    assert_eq!(
        f.dataset("data").unwrap().read_2d::<i32>().unwrap()[[2, 3]],
        11
    );
}

#[test]
fn ignoring_the_flags_reads_the_data_and_says_so() {
    let access = FileAccess::default().ignore_open_for_writing(true);
    let f = File::open_with(fixture_path("open_for_writing_v3.h5"), &access).unwrap();
    assert!(f.marked_open_for_writing());
    let data = f.dataset("data").unwrap().read_2d::<i32>().unwrap();
    assert_eq!(
        data.iter().copied().collect::<Vec<_>>(),
        (0..12).collect::<Vec<_>>()
    );
    assert_eq!(
        f.root()
            .unwrap()
            .attr("note")
            .unwrap()
            .read_strings()
            .unwrap(),
        ["the writer died"]
    );
    // The SWMR writer had grown the dataset to 4 rows before dying.
    let f = File::open_with(fixture_path("open_for_writing_swmr.h5"), &access).unwrap();
    let d = f.dataset("data").unwrap();
    assert_eq!(d.shape(), [4, 4]);
    assert_eq!(d.read_2d::<i32>().unwrap()[[3, 0]], 9);
}

#[test]
fn clearing_the_flags_lets_libhdf5_and_h5_open_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("left_open.h5");
    std::fs::copy(fixture_path("open_for_writing_v3.h5"), &copy).unwrap();
    // h5py refuses the file before it is cleared.
    assert!(check_with_both(&copy, &expected()).is_err());
    assert_eq!(h5::clear_status_flags(&copy).unwrap(), 0x01);
    assert_eq!(
        h5::clear_status_flags(&copy).unwrap(),
        0,
        "nothing left to clear"
    );
    let f = File::open(&copy).expect("opens once cleared");
    assert!(!f.marked_open_for_writing());
    if let Err(e) = check_with_both(&copy, &expected()) {
        panic!("h5py after clearing: {e}");
    }
    // Only the flags byte and the superblock checksum changed.
    let before = std::fs::read(fixture_path("open_for_writing_v3.h5")).unwrap();
    let after = std::fs::read(&copy).unwrap();
    let changed: Vec<usize> = (0..before.len())
        .filter(|&i| before[i] != after[i])
        .collect();
    assert!(
        changed.iter().all(|&i| i == 11 || (44..48).contains(&i)),
        "{changed:?}"
    );
}
