//! Handle lifetimes (issue 14): `File::close` with groups, datasets, attributes and other `File`
//! clones still alive invalidates them (libhdf5's strong close degree, as h5py's `close`): every
//! later call is `Error::Closed`, nothing reaches the file, and the lock is released. Dropping
//! the last handle flushes and closes.

use h5::{Error, File};

fn bytes(p: &std::path::Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[test]
fn close_invalidates_every_handle_and_releases_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.h5");
    let f = File::create(&path).unwrap();
    let g = f.create_group("g").unwrap();
    g.write_attr_scalar("a", 1u32).unwrap();
    let attr = f.group("g").unwrap().attr("a").unwrap();
    let ds = f
        .root()
        .unwrap()
        .new_dataset::<i32>()
        .shape([4])
        .max_shape([None])
        .chunk([4])
        .create_with_data("d", &[1, 2, 3, 4])
        .unwrap();
    let clone = f.clone();
    f.close().unwrap();
    let closed = bytes(&path);

    let is_closed = |r: Result<(), Error>, what: &str| {
        assert!(matches!(r, Err(Error::Closed)), "{what}: {r:?}");
    };
    is_closed(ds.write(&[9, 9, 9, 9]), "dataset write");
    is_closed(ds.resize([8]), "resize");
    is_closed(ds.read_1d::<i32>().map(drop), "dataset read");
    is_closed(ds.attr_names().map(drop), "dataset attributes");
    is_closed(g.create_group("x").map(drop), "create group");
    is_closed(g.write_attr_scalar("b", 2u8), "write attribute");
    is_closed(g.member_names().map(drop), "list group");
    is_closed(attr.read_scalar::<u32>().map(drop), "attribute read");
    is_closed(clone.root().map(drop), "clone's root");
    is_closed(clone.flush(), "clone's flush");
    // Closing again is a no-op.
    clone.clone().close().unwrap();
    assert_eq!(bytes(&path), closed, "nothing reached the file after close");

    // The lock went with close, although handles are alive.
    let again = File::open_rw(&path).unwrap();
    let v = again
        .dataset("d")
        .unwrap()
        .read_1d::<i32>()
        .unwrap()
        .to_vec();
    assert_eq!(v, [1, 2, 3, 4]);
    assert!(
        !h5::journal_path(&path).exists()
            || std::fs::metadata(h5::journal_path(&path)).unwrap().len() == 0
    );
    again.close().unwrap();
    assert!(
        !h5::journal_path(&path).exists(),
        "a clean close removes the journal"
    );
}

#[test]
fn dropping_the_last_handle_flushes_and_closes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drop.h5");
    let ds = {
        let f = File::create(&path).unwrap();
        f.root()
            .unwrap()
            .new_dataset::<u8>()
            .shape([3])
            .create("d")
            .unwrap()
    };
    // The dataset keeps the file open (and locked).
    assert!(matches!(
        File::open(&path),
        Err(Error::Io(h5_io::Error::AlreadyOpen { .. }))
    ));
    ds.write(&[7u8, 8, 9]).unwrap();
    drop(ds);
    let v = File::open(&path)
        .unwrap()
        .dataset("d")
        .unwrap()
        .read_1d::<u8>()
        .unwrap()
        .to_vec();
    assert_eq!(v, [7, 8, 9]);
}

#[test]
fn create_refuses_a_file_open_in_this_process_and_leaves_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("busy.h5");
    let f = File::create(&path).unwrap();
    f.root()
        .unwrap()
        .new_dataset::<i8>()
        .create_with_data("d", &[5; 10])
        .unwrap();
    f.flush().unwrap();
    let before = bytes(&path);
    let e = File::create(&path).unwrap_err();
    assert!(
        matches!(e, Error::Io(h5_io::Error::AlreadyOpen { .. })),
        "{e}"
    );
    assert_eq!(bytes(&path), before, "not truncated");
    // The first handle still works.
    f.create_group("still").unwrap();
    f.close().unwrap();
    assert!(File::open(&path).unwrap().group("still").is_ok());
}

#[test]
fn a_missing_journal_with_the_marker_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.h5");
    File::create(&path).unwrap().close().unwrap();
    let mut b = bytes(&path);
    b[..8].copy_from_slice(&h5_core::write::IN_PLACE_MARKER);
    std::fs::write(&path, &b).unwrap();
    let e = File::open(&path).unwrap_err();
    assert!(matches!(e, Error::NeedsRecovery(_)), "{e}");
    assert!(e.to_string().contains("journal"), "{e}");
}
