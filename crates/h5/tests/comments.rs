//! Object comments (the object comment message, libhdf5's `H5Oset_comment` /
//! `H5Oget_comment`): h5 sets, replaces and removes them on the root group, groups and datasets
//! in files of the earliest and the default formats, and libhdf5 (h5py, HDF5 1.14 and 2.0) reads
//! what h5 wrote; h5 reads the comments libhdf5 wrote.

use h5_testkit::verify::{Reference, run_python_with};
use serde_json::Value;

/// Sets a comment with libhdf5 on `/py` and prints every object's comment as libhdf5's
/// `H5Oget_comment` gives it (through ctypes: h5py's `h5o.get_comment` returns stray bytes for
/// an object without a comment) as JSON.
const READ_AND_ADD: &str = r#"
import ctypes, glob, json, os, sys
import h5py

def libhdf5():
    libdir = os.path.join(os.path.dirname(os.path.dirname(h5py.__file__)), "h5py.libs")
    found = glob.glob(os.path.join(libdir, "libhdf5-*.so*"))
    return ctypes.CDLL(found[0]) if found else ctypes.CDLL(h5py.h5.__file__)

lib = libhdf5()
lib.H5Oget_comment.argtypes = [ctypes.c_int64, ctypes.c_char_p, ctypes.c_size_t]
lib.H5Oget_comment.restype = ctypes.c_ssize_t

def comment(obj):
    n = lib.H5Oget_comment(obj.id.id, None, 0)
    if n < 0:
        raise SystemExit("H5Oget_comment failed")
    if n == 0:
        return None
    buf = ctypes.create_string_buffer(n + 1)
    lib.H5Oget_comment(obj.id.id, buf, n + 1)
    return buf.value.decode()

with h5py.File(sys.argv[1], "r+") as f:
    p = f.require_group("py")
    h5py.h5o.set_comment(p.id, b"written by libhdf5")
    print(json.dumps({name: comment(f[name])
                      for name in ["/", "g", "g/deep", "d", "plain", "removed"]}))
"#;

#[test]
fn comments_written_by_h5_read_in_libhdf5_and_back() {
    for bounds in [h5::FormatBounds::Earliest, h5::FormatBounds::default()] {
        for reference in Reference::ALL {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("comments.h5");
            let options = h5::CreateOptions {
                bounds,
                ..Default::default()
            };
            let f = h5::File::create_with(&path, &h5::FileAccess::default(), &options).unwrap();
            let g = f.create_group("g/deep").unwrap();
            let d = f
                .new_dataset::<i32>()
                .create_with_data("d", &[1, 2, 3])
                .unwrap();
            f.new_dataset::<i32>()
                .create_with_data("plain", &[4])
                .unwrap();
            let removed = f
                .new_dataset::<i32>()
                .create_with_data("removed", &[5])
                .unwrap();
            f.set_comment(Some("the root group")).unwrap();
            g.set_comment(Some("short")).unwrap();
            // Replaced by a longer text: the header grows.
            g.set_comment(Some(&"a much longer comment, ".repeat(20)))
                .unwrap();
            f.group("g").unwrap().set_comment(Some("outer")).unwrap();
            d.set_comment(Some("dataset: calibrated 2026-11-29"))
                .unwrap();
            removed.set_comment(Some("goes away")).unwrap();
            removed.set_comment(None).unwrap();
            assert_eq!(
                d.comment().unwrap().as_deref(),
                Some("dataset: calibrated 2026-11-29")
            );
            assert_eq!(removed.comment().unwrap(), None);
            assert!(matches!(
                d.set_comment(Some("a\0b")),
                Err(h5::Error::Invalid(_))
            ));
            f.close().unwrap();

            let out = run_python_with(reference, READ_AND_ADD, &[path.as_os_str()]);
            let got: Value =
                serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
            let what = format!("{bounds:?} {reference:?}");
            assert_eq!(got["/"], "the root group", "{what}");
            assert_eq!(got["g"], "outer", "{what}");
            assert_eq!(
                got["g/deep"],
                "a much longer comment, ".repeat(20),
                "{what}"
            );
            assert_eq!(got["d"], "dataset: calibrated 2026-11-29", "{what}");
            assert_eq!(got["plain"], Value::Null, "{what}");
            assert_eq!(got["removed"], Value::Null, "{what}");

            let f = h5::File::open(&path).unwrap();
            assert_eq!(
                f.group("py").unwrap().comment().unwrap().as_deref(),
                Some("written by libhdf5"),
                "{what}"
            );
            assert_eq!(f.comment().unwrap().as_deref(), Some("the root group"));
            assert_eq!(f.dataset("plain").unwrap().comment().unwrap(), None);
        }
    }
}
