//! A file whose free space libhdf5 persisted (`fixtures/fsm/fsm_persist.h5`), changed by h5:
//! h5 loads the persisted sections, frees libhdf5's managers, puts the new dataset into free
//! space and persists what is left with its own managers; libhdf5 must read the data and
//! exactly those free sections, and reopen the file read-write and close it (which settles its
//! managers) without error. What the file as opened uses (libhdf5's managers, the root
//! group's heap segment and header continuation) stays allocated until h5's flush completes
//! (delayed reuse, docs/design.md §6), so their replacements go elsewhere: the file grows by
//! those (about half a KiB), while the dataset's 400 bytes come from the free space.

use h5::File;
use h5_testkit::verify::run_python;

#[test]
fn h5_changes_keep_libhdf5s_persisted_free_space_valid() {
    let src =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/fsm/fsm_persist.h5");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.h5");
    std::fs::copy(&src, &path).unwrap();
    let before = File::open(&path)
        .unwrap()
        .persisted_free_space()
        .unwrap()
        .unwrap();
    let len_before = std::fs::metadata(&path).unwrap().len();
    {
        let f = File::open_rw(&path).unwrap();
        let ds = f
            .root()
            .unwrap()
            .new_dataset::<i32>()
            .shape([100])
            .create("added")
            .unwrap();
        ds.write(&(0..100).collect::<Vec<i32>>()).unwrap();
        f.close().unwrap();
    }
    let len_after = std::fs::metadata(&path).unwrap().len();
    assert!(
        len_after <= len_before + 1024,
        "{len_before} -> {len_after}"
    );
    // What h5 persisted: less free space than before (the dataset took some).
    let after = File::open(&path)
        .unwrap()
        .persisted_free_space()
        .unwrap()
        .unwrap();
    assert!(
        after.free_bytes() + 400 <= before.free_bytes(),
        "the dataset's 400 bytes came from free space"
    );
    let sections: Vec<String> = after
        .sections()
        .iter()
        .map(|s| format!("[{}, {}]", s.addr, s.len))
        .collect();
    let out = run_python(
        r#"
import ctypes, glob, os, sys, h5py, numpy as np
path, want = sys.argv[1], eval(sys.argv[2])
lib = ctypes.CDLL(glob.glob(os.path.join(os.path.dirname(h5py.__file__), "..", "h5py.libs", "libhdf5-*.so*"))[0])
class S(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_uint64), ("size", ctypes.c_uint64)]
with h5py.File(path, "r") as f:
    assert (f["added"][()] == np.arange(100)).all()
    assert (f["d0"][()] == np.arange(10)).all()
    n = lib.H5Fget_free_sections(ctypes.c_int64(f.id.id), 0, ctypes.c_size_t(0), None)
    buf = (S * n)()
    lib.H5Fget_free_sections(ctypes.c_int64(f.id.id), 0, ctypes.c_size_t(n), buf)
    got = sorted([s.addr, s.size] for s in buf)
    assert got == want, (got, want)
with h5py.File(path, "r+") as f:
    f["added"][0] = -1
with h5py.File(path, "r") as f:
    assert f["added"][0] == -1 and f["added"][1] == 1
print("ok")
"#,
        &[
            path.to_str().unwrap().to_string(),
            format!("[{}]", sections.join(", ")),
        ],
    );
    assert_eq!(out.trim(), "ok");
}
