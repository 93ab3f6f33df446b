//! VFD SWMR with the crash-safety machinery of issue 14 (docs/design.md §6 and §8.2): file
//! locking that refuses other writers but never SWMR readers, no rollback journal, the guard's
//! sticky failed state over the page buffer, and the strong close ending the SWMR session.

use crate::swmr_common;

use std::sync::{Arc, Mutex};

use h5_io::{FaultInjection, FaultPlan, IoOp, Storage};
use h5_testkit::verify::run_python;
use swmr_common::*;

/// `flock` on `path` from another process, as a libhdf5 reader (shared) or writer (exclusive)
/// takes it: "taken" or "refused".
fn flock_from_another_process(path: &std::path::Path, exclusive: bool) -> String {
    let script = "import sys, fcntl\n\
                  f = open(sys.argv[1], 'rb')\n\
                  mode = fcntl.LOCK_EX if sys.argv[2] == 'x' else fcntl.LOCK_SH\n\
                  try:\n    fcntl.flock(f, mode | fcntl.LOCK_NB)\n    print('taken')\n\
                  except OSError:\n    print('refused')";
    run_python(
        script,
        &[path.to_str().unwrap(), if exclusive { "x" } else { "s" }],
    )
    .trim()
    .to_owned()
}

fn chunked(f: &h5::File, name: &str) -> h5::Dataset {
    f.new_dataset::<i64>()
        .shape([0])
        .max_shape([None])
        .chunk([64])
        .create(name)
        .unwrap()
}

#[test]
fn the_writer_lock_refuses_other_writers_and_never_swmr_readers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locks.h5");
    let f = h5::File::create_with(&path, &access(writer_cfg(0), 16), &paged()).unwrap();
    chunked(&f, "d").append(&[1i64, 2, 3]).unwrap();
    f.end_tick().unwrap();
    // Readers lock shared: never refused by the writer. Writers lock exclusively: refused.
    assert_eq!(flock_from_another_process(&path, false), "taken");
    assert_eq!(flock_from_another_process(&path, true), "refused");
    // An h5py writer (libhdf5's own locking) is refused too.
    let out = run_python(
        "import sys, h5py\ntry:\n    h5py.File(sys.argv[1], 'r+')\n    print('opened')\nexcept OSError:\n    print('refused')",
        &[path.to_str().unwrap()],
    );
    assert_eq!(out.trim(), "refused");
    // In this process a plain writer is refused by the process-wide lock table.
    let e = h5::File::open_rw(&path).unwrap_err();
    assert!(
        matches!(e.inner(), h5::Error::Io(h5_io::Error::AlreadyOpen { .. })),
        "{e}"
    );
    f.close().unwrap();
    // The close released the lock.
    assert_eq!(flock_from_another_process(&path, true), "taken");
    let f = h5::File::open_rw(&path).unwrap();
    assert_eq!(
        f.dataset("d").unwrap().read_vec::<i64>().unwrap(),
        [1, 2, 3]
    );
}

#[test]
fn a_vfd_swmr_writer_keeps_no_rollback_journal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nojournal.h5");
    let journal = dir.path().join("nojournal.h5-journal");
    let f = h5::File::create_with(&path, &access(writer_cfg(0), 16), &paged()).unwrap();
    let d = chunked(&f, "d");
    for round in 0..4i64 {
        d.append(&[round; 100]).unwrap();
        f.end_tick().unwrap();
        assert!(!journal.exists(), "round {round}");
        // The journal's in-place marker never replaces the superblock's signature (the
        // superblock page itself reaches the HDF5 file only once no reader can need the old
        // bytes).
        let head = std::fs::read(&path).unwrap();
        assert_ne!(&head[..8], &h5_core::write::IN_PLACE_MARKER[..]);
    }
    f.close().unwrap();
    assert!(!journal.exists());
    assert_eq!(&std::fs::read(&path).unwrap()[..8], b"\x89HDF\r\n\x1a\n");
    // An ordinary writer of the same file keeps its journal as usual.
    let f = h5::File::open_rw(&path).unwrap();
    f.dataset("d").unwrap().append(&[9i64]).unwrap();
    f.flush().unwrap();
    assert!(journal.exists());
    f.close().unwrap();
    assert!(!journal.exists());
}

#[test]
fn a_failed_end_of_tick_fails_the_file_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("failed.h5");
    type Faulty = FaultInjection<Arc<dyn Storage>>;
    let slot: Arc<Mutex<Option<Arc<Faulty>>>> = Arc::default();
    let s = Arc::clone(&slot);
    let access = access(writer_cfg(0), 16).storage_decorator(move |inner| {
        let fi = Arc::new(FaultInjection::new(inner));
        *s.lock().unwrap() = Some(Arc::clone(&fi));
        fi as Arc<dyn Storage>
    });
    let f = h5::File::create_with(&path, &access, &paged()).unwrap();
    let d = chunked(&f, "d");
    d.append(&[1i64; 64]).unwrap();
    f.end_tick().unwrap();
    let fi = slot.lock().unwrap().clone().unwrap();
    fi.set_plan(
        FaultPlan::new()
            .fail_from(IoOp::Write, fi.calls(IoOp::Write) + 1)
            .fail_from(IoOp::WriteVectored, fi.calls(IoOp::WriteVectored) + 1),
    );
    // `flush_raw_data` writes the raw pages at the end of the tick: that write fails.
    d.append(&[2i64; 64]).unwrap();
    assert!(f.end_tick().is_err());
    // The failure is sticky even after the storage works again: no change reaches the file.
    fi.set_plan(FaultPlan::new());
    let e = d.append(&[3i64; 8]).unwrap_err();
    assert!(matches!(e.inner(), h5::Error::Failed(_)), "{e}");
    assert!(f.flush().is_err());
    let e = f.close().unwrap_err();
    assert!(matches!(e.inner(), h5::Error::Failed(_)), "{e}");
    // Like a crash: the metadata file stays for `h5 recover`.
    assert!(md_of(&path).exists());
}

#[test]
fn strong_close_ends_the_swmr_session_for_every_handle() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("close.h5");
    let cfg = h5::SwmrConfig {
        keep_md_file: true,
        ..writer_cfg(0)
    };
    let f = h5::File::create_with(&path, &access(cfg, 16), &paged()).unwrap();
    let d = chunked(&f, "d");
    d.append(&(0..500i64).collect::<Vec<_>>()).unwrap();
    f.end_tick().unwrap();
    let (before, ix) = published(&path);
    assert!(!ix.entries.is_empty());
    let other = f.clone();
    f.close().unwrap();
    // An empty index at a new tick: readers go to the HDF5 file, which holds everything.
    let (after, ix) = published(&path);
    assert!(after.tick > before.tick, "{} > {}", after.tick, before.tick);
    assert!(ix.entries.is_empty());
    // Every other handle is closed (strong close).
    assert!(matches!(
        d.read_vec::<i64>().unwrap_err().inner(),
        h5::Error::Closed
    ));
    assert!(matches!(
        other.end_tick().unwrap_err().inner(),
        h5::Error::Closed
    ));
    drop(other);
    let f = h5::File::open(&path).unwrap();
    assert_eq!(
        f.dataset("d").unwrap().read_vec::<i64>().unwrap(),
        (0..500).collect::<Vec<_>>()
    );
}

#[test]
fn dropping_the_last_handle_unlinks_the_metadata_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drop.h5");
    {
        let f = h5::File::create_with(&path, &access(writer_cfg(0), 16), &paged()).unwrap();
        let d = chunked(&f, "d");
        d.append(&[5i64; 10]).unwrap();
        f.end_tick().unwrap();
        assert!(md_of(&path).exists());
        drop(f);
        // The dataset handle still holds the file open.
        assert!(md_of(&path).exists());
    }
    assert!(!md_of(&path).exists());
    let f = h5::File::open(&path).unwrap();
    assert_eq!(f.dataset("d").unwrap().read_vec::<i64>().unwrap(), [5; 10]);
}
