//! Old-style structures changed one cache entry at a time (issue 11): a flush after a small
//! change to a large old-style group or a large version 1 B-tree chunk index writes little,
//! counted with the `Metrics` storage decorator. The large files are written by h5py
//! (libhdf5 1.14.4, earliest format) in the test itself, so they are also files libhdf5 wrote
//! being changed in place. These tests need `scripts/setup-tools` and fail loudly without it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use h5::FileAccess;
use h5_io::{FileStorage, Metrics, OpenMode};
use h5_testkit::verify::run_python;
use ndarray::SliceInfoElem as S;

/// Most a flush after one small change may write.
const SMALL_FLUSH: u64 = 64 << 10;

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    (dir, p)
}

/// Opens `path` read-write through a counting decorator.
fn open_counted(path: &Path) -> (h5::File, Arc<Metrics<FileStorage>>) {
    let storage = Arc::new(Metrics::new(
        FileStorage::open(path, OpenMode::ReadWrite).expect("open"),
    ));
    let f = h5::File::open_rw_in(storage.clone(), &FileAccess::default(), None).expect("open rw");
    (f, storage)
}

#[test]
fn one_link_added_to_an_old_style_group_of_100k_links_writes_little() {
    let (_d, path) = tmp("links.h5");
    run_python(
        r#"
import sys, h5py, numpy as np
path, n = sys.argv[1], int(sys.argv[2])
with h5py.File(path, "w") as f:
    d = f.create_dataset("target", data=np.arange(4, dtype="<i4"))
    g = f.create_group("big")
    for i in range(n):
        g[f"link{i:06}"] = d
"#,
        &[path.to_str().unwrap(), "100000"],
    );
    let (f, storage) = open_counted(&path);
    let g = f.group("big").unwrap();
    let target = f.dataset("target").unwrap();
    let before = storage.snapshot();
    g.link_hard("link050000a", &target).unwrap();
    f.flush().unwrap();
    let written = storage.snapshot().since(&before).bytes_written;
    eprintln!("one link added to 100,000 and flushed: {written} bytes written");
    drop(g);
    drop(target);
    drop(f);
    let out = run_python(
        r#"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    g = f["big"]
    print(len(g), g["link050000a"][3], g["link099999"][2])
"#,
        &[path.to_str().unwrap()],
    );
    assert_eq!(out.trim(), "100001 3 2");
    assert!(
        written <= SMALL_FLUSH,
        "{written} bytes written for one link"
    );
}

#[test]
fn one_chunk_appended_to_a_v1_btree_index_of_100k_chunks_writes_little() {
    let (_d, path) = tmp("chunks.h5");
    run_python(
        r#"
import sys, h5py, numpy as np
path, n = sys.argv[1], int(sys.argv[2])
with h5py.File(path, "w") as f:
    f.create_dataset("d", data=np.arange(n, dtype="<i4"), maxshape=(None,), chunks=(1,))
"#,
        &[path.to_str().unwrap(), "100000"],
    );
    let (f, storage) = open_counted(&path);
    let mut d = f.dataset("d").unwrap();
    let before = storage.snapshot();
    d.resize([100_001]).unwrap();
    d.write_slice(
        &[-7i32],
        [S::Slice {
            start: 100_000,
            end: Some(100_001),
            step: 1,
        }],
    )
    .unwrap();
    f.flush().unwrap();
    let written = storage.snapshot().since(&before).bytes_written;
    eprintln!("one chunk appended to 100,000 and flushed: {written} bytes written");
    drop(d);
    drop(f);
    let out = run_python(
        r#"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    d = f["d"]
    print(d.shape[0], d[100000], d[99999], d[12345])
"#,
        &[path.to_str().unwrap()],
    );
    assert_eq!(out.trim(), "100001 -7 99999 12345");
    assert!(
        written <= SMALL_FLUSH,
        "{written} bytes written for one chunk"
    );
}
