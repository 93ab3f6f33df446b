//! Durability is a choice: `flush` and `close` sync the storage only when the file access asks
//! for it (`FileAccess::sync(true)`), as libhdf5's `H5Fflush`/`H5Fclose` never sync.

use std::sync::Arc;

use h5::{CreateOptions, File, FileAccess};
use h5_io::{MemoryStorage, Metrics, Storage};

/// Creates a file in counted memory with `access`, writes a dataset, flushes, writes again and
/// closes; returns the syncs counted after the flush and after the close, and the image.
fn syncs_with(access: &FileAccess) -> (u64, u64, Arc<Metrics<MemoryStorage>>) {
    let storage = Arc::new(Metrics::new(MemoryStorage::new()));
    let file = File::create_in(
        Arc::clone(&storage) as Arc<dyn Storage>,
        access,
        &CreateOptions::default(),
        None,
    )
    .expect("create");
    let ds = file
        .root()
        .and_then(|g| g.new_dataset::<i32>().shape([4]).create("d"))
        .expect("dataset");
    ds.write(&[1, 2, 3, 4]).expect("write");
    file.flush().expect("flush");
    let after_flush = storage.snapshot().syncs;
    ds.write(&[5, 6, 7, 8]).expect("write");
    drop(ds);
    file.close().expect("close");
    let after_close = storage.snapshot().syncs;
    (after_flush, after_close, storage)
}

/// The dataset `d` of a file image.
fn values(storage: &Arc<Metrics<MemoryStorage>>) -> Vec<i32> {
    let file = File::from_storage(
        Arc::clone(storage) as Arc<dyn Storage>,
        &FileAccess::new(),
        None,
    )
    .expect("open");
    file.dataset("d")
        .and_then(|d| d.read::<i32>())
        .expect("read")
        .into_iter()
        .collect()
}

#[test]
fn flush_and_close_do_not_sync_by_default() {
    let (after_flush, after_close, storage) = syncs_with(&FileAccess::new());
    assert_eq!((after_flush, after_close), (0, 0));
    // Everything was still written: the image holds the last values.
    assert_eq!(values(&storage), [5, 6, 7, 8]);
}

#[test]
fn sync_true_makes_flush_and_close_sync() {
    let (after_flush, after_close, storage) = syncs_with(&FileAccess::new().sync(true));
    assert_eq!(after_flush, 1, "the flush ends with one sync");
    // The close flushes (and syncs) again; dropping the last handle may flush once more.
    assert!(
        after_close > after_flush,
        "the close syncs too ({after_close})"
    );
    assert_eq!(values(&storage), [5, 6, 7, 8]);
}

#[test]
fn sync_applies_to_files_opened_for_writing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.h5");
    File::create(&path)
        .and_then(|f| {
            f.root()?
                .new_dataset::<i32>()
                .shape([2])
                .create("d")?
                .write(&[1, 2])?;
            f.close()
        })
        .expect("create");
    // The real file storage: a sync of a file opened read-write succeeds and the data stays.
    let f = File::open_rw_with(&path, &FileAccess::new().sync(true)).expect("open_rw");
    f.dataset("d")
        .and_then(|d| d.write(&[3, 4]))
        .expect("write");
    f.close().expect("close with sync");
    let back: Vec<i32> = File::open(&path)
        .and_then(|f| f.dataset("d")?.read::<i32>())
        .expect("read")
        .into_iter()
        .collect();
    assert_eq!(back, [3, 4]);
}
