//! `h5 dump` against h5dump itself (not golden files), byte for byte, on forms libhdf5's own
//! test files showed h5 printing differently: enumerations (members in the order the type
//! stores them, not sorted; member names among the data with h5dump's C escapes; values that
//! name no member in hexadecimal), one-byte bitfield and opaque values (`0x2a`) and the line
//! breaks those widths give, object comments (`COMMENT`), array elements broken into rows
//! (multi-dimensional arrays) or members (arrays of compounds) at h5dump's indentations,
//! committed datatypes no link names (`DATATYPE "#addr"`), the text of types h5dump has no
//! name for, and strings with quotes, backslashes and control characters (printed as they are,
//! as h5dump does without `-e`). Fails (never skips) without h5py or h5dump.

use h5_testkit::verify::run_python;

use super::dump_references::{h5_dump, same_as_h5dump};

const MAKE: &str = r#"
import sys
import h5py, numpy as np

with h5py.File(sys.argv[1], "w") as f:
    # Members stored in insertion order (h5py's enum_dtype would store them sorted by name).
    colors = h5py.h5t.enum_create(h5py.h5t.STD_I32LE)
    for name, value in [("RED", 0), ("GREEN\ngreen", 1), ("BLUE blue", 2),
                        ("WHITE \"white\"", 3), ("BLACK 'black'", 4), ("what?", 7)]:
        colors.enum_insert(name.encode(), value)
    c = h5py.h5d.create(f.id, b"colors", colors, h5py.h5s.create_simple((10,)))
    c.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([0, 1, 2, 3, 4, 7, 9, 4, 1, 0], dtype="<i4"),
            mtype=colors)
    small = h5py.h5t.enum_create(h5py.h5t.STD_U8LE)
    for name, value in [("ZZ", 2), ("AA", 1), ("MM", 3)]:
        small.enum_insert(name.encode(), value)
    s = h5py.h5d.create(f.id, b"small", small, h5py.h5s.create_simple((5,)))
    s.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([1, 2, 3, 200, 1], dtype="u1"), mtype=small)
    f.attrs.create("flag", np.array([3, 5], dtype="u1"),
                   dtype=h5py.enum_dtype({"ZZ": 2, "AA": 1, "MM": 3}, basetype="u1"))
    # One-byte bitfields (the file type itself as the memory type: no conversion) and opaque.
    space = h5py.h5s.create_simple((40,))
    b = h5py.h5d.create(f.id, b"bits", h5py.h5t.STD_B8LE, space)
    b.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(255, 215, -1, dtype="u1"),
            mtype=h5py.h5t.STD_B8LE)
    f["opaque"] = np.frombuffer(bytes(range(0, 60, 3)), dtype="V1")
    f["opaque4"] = np.frombuffer(bytes(range(40)), dtype="V4")
"#;

#[test]
fn enums_bitfields_and_opaque_dump_as_h5dump_prints_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("enums.h5");
    run_python(MAKE, &[&path]);
    same_as_h5dump(&path);
    // The comparison above is not vacuous: each form is there.
    let ours = h5_dump(&path);
    for want in [
        "\"ZZ\"               2;\n         \"AA\"               1;",
        "RED, GREEN\\ngreen, BLUE blue, WHITE \\\"white\\\", BLACK \\'black\\'",
        "what\\?, 09:00:00:00",
        "AA, ZZ, MM, 0xc8, AA",
        "(0): 0xff, 0xfe, 0xfd",
        "(0): 0x00, 0x03, 0x06",
        "(0): 00:01:02:03, 04:05:06:07",
    ] {
        assert!(ours.contains(want), "{want:?} missing from:\n{ours}");
    }
}

/// Comments of the root group, a group, a dataset (printed at its DATASET line's level, as
/// h5dump does) and a committed datatype (which h5dump does not print), written by libhdf5 and
/// by h5.
#[test]
fn comments_dump_as_h5dump_prints_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("comments.h5");
    let make = r#"
import sys
import h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    d = f.create_dataset("d", data=np.arange(3))
    g = f.create_group("g/inner")
    f["t"] = np.dtype("<i4")
    h5py.h5o.set_comment(d.id, b'dataset "quoted" comment')
    h5py.h5o.set_comment(g.id, b"inner group")
    h5py.h5o.set_comment(f.id, b"root comment")
    h5py.h5o.set_comment(f["t"].id, b"type comment")
"#;
    run_python(make, &[&path]);
    same_as_h5dump(&path);
    let ours = h5_dump(&path);
    assert!(
        ours.contains("GROUP \"/\" {\n   COMMENT \"root comment\"\n"),
        "{ours}"
    );
    assert!(
        ours.contains("DATASET \"d\" {\n   COMMENT \"dataset \"quoted\" comment\"\n"),
        "{ours}"
    );
    assert!(ours.contains("      COMMENT \"inner group\"\n"), "{ours}");

    // Written by h5: the same lines.
    let f = h5::File::open_rw(&path).expect("open");
    f.group("g")
        .unwrap()
        .set_comment(Some("outer group"))
        .unwrap();
    f.dataset("d").unwrap().set_comment(None).unwrap();
    f.close().unwrap();
    same_as_h5dump(&path);
    let ours = h5_dump(&path);
    assert!(
        ours.contains("GROUP \"g\" {\n      COMMENT \"outer group\"\n"),
        "{ours}"
    );
    assert!(!ours.contains("quoted"), "{ours}");
}

/// Array-typed elements h5dump prints over several lines: two- and three-dimensional arrays of
/// numbers and strings (a line per row of the last dimension) at the root and two groups down,
/// arrays of compounds (a line per member, rows broken too), and such arrays as compound
/// members; a one-dimensional array of numbers stays on one line.
#[test]
fn array_elements_dump_as_h5dump_prints_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("arrays.h5");
    let make = r#"
import sys
import h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    rows = np.dtype(("<i4", (2, 3)))
    a = f.create_dataset("a", shape=(2,), dtype=rows)
    a[0] = np.arange(6).reshape(2, 3)
    a[1] = np.arange(6, 12).reshape(2, 3) * 100
    f.create_group("g/h").create_dataset("d", shape=(2,), dtype=rows)[0] = np.ones((2, 3))
    f.create_dataset("cube", data=np.zeros(1, dtype=np.dtype(("i1", (2, 2, 2)))))
    f.create_dataset("one", shape=(2,), dtype=np.dtype(("<i4", (4,))))
    f.create_dataset("strings", shape=(1,), dtype=np.dtype(("S3", (2, 2))))[0] = [[b"ab", b"c"], [b"de", b"fgh"]]
    point = [("x", "<i4"), ("y", "<f4")]
    c1 = f.create_dataset("compounds", shape=(2,), dtype=np.dtype((point, (3,))))
    c1[0] = [(1, 1.5), (2, 2.5), (3, 3.5)]
    f.create_dataset("compounds_2d", shape=(1,), dtype=np.dtype((point, (2, 2))))
    m = np.zeros(2, dtype=[("a", "<i4"), ("b", point, (2,)), ("c", "<i2", (2, 2))])
    m["a"] = [7, 8]
    m["c"][1] = [[1, 2], [3, 4]]
    f.create_dataset("members", data=m)
    grid = h5py.h5t.array_create(h5py.h5t.STD_I16LE, (3, 2))
    at = h5py.h5a.create(f.id, b"grid", grid, h5py.h5s.create_simple((1,)))
    at.write(np.arange(6, dtype="<i2").reshape(1, 3, 2), mtype=grid)
"#;
    run_python(make, &[&path]);
    same_as_h5dump(&path);
    let ours = h5_dump(&path);
    for want in [
        "(0): [ 0, 1, 2,\n            3, 4, 5 ],\n      (1): [ 600,",
        "(0): [ 1, 1, 1,\n                  1, 1, 1 ],",
        "(0): [ {\n               1,\n               1.5\n            }, {",
        "            [ 1, 2,\n               3, 4 ]",
        "(0): [ 0, 0, 0, 0 ], [ 0, 0, 0, 0 ]",
    ] {
        assert!(ours.contains(want), "{want:?} missing from:\n{ours}");
    }
}

/// Committed datatypes whose links were deleted while datasets still use them (h5dump prints
/// them first in the root group as `DATATYPE "#<address>"` and the datasets' types as
/// `"/#<address>"`), a one-byte integer of 4 bits of precision (no byte order in its text) and
/// enumeration member names longer than h5dump's 16-character column.
#[test]
fn anonymous_committed_types_and_unnamed_type_texts_dump_as_h5dump_prints_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("anonymous.h5");
    let make = r#"
import sys
import h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["pair"] = np.dtype([("a", "<i4"), ("b", "<f4")])
    f.create_dataset("z_uses_pair", shape=(2,), dtype=f["pair"])
    f["short"] = np.dtype("<i2")
    f.create_dataset("g/uses_short", data=np.arange(3, dtype="<i2"), dtype=f["short"])
    f["kept"] = np.dtype("<u8")
    f.create_dataset("uses_kept", data=np.arange(2, dtype="<u8"), dtype=f["kept"])
    del f["pair"]
    del f["short"]
    nibble = h5py.h5t.STD_U8LE.copy()
    nibble.set_precision(4)
    n = h5py.h5d.create(f.id, b"nibble", nibble, h5py.h5s.create_simple((3,)))
    n.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([1, 2, 15], dtype="u1"), mtype=nibble)
    long_names = h5py.h5t.enum_create(h5py.h5t.STD_U8LE)
    for name, value in [(b"a_name_longer_than_sixteen", 0), (b"sixteen_chars_ab", 1), (b"s", 2)]:
        long_names.enum_insert(name, value)
    e = h5py.h5d.create(f.id, b"long_names", long_names, h5py.h5s.create_simple((3,)))
    e.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([0, 1, 2], dtype="u1"), mtype=long_names)
"#;
    run_python(make, &[&path]);
    same_as_h5dump(&path);
    let ours = h5_dump(&path);
    for want in [
        "GROUP \"/\" {\n   DATATYPE \"#",
        "DATATYPE  \"/#",
        "DATATYPE  \"/kept\"",
        "DATATYPE  8-bit unsigned integer 4-bit precision",
        "\"a_name_longer_than_sixteen\" 0;",
        "\"sixteen_chars_ab\" 1;",
    ] {
        assert!(ours.contains(want), "{want:?} missing from:\n{ours}");
    }
    // Two anonymous types, in the order h5dump meets their datasets (depth first by name:
    // /g/uses_short before /z_uses_pair).
    let anonymous: Vec<&str> = ours
        .lines()
        .filter(|l| l.starts_with("   DATATYPE \"#"))
        .collect();
    assert_eq!(anonymous.len(), 2, "{ours}");
    assert!(anonymous[0].ends_with("H5T_STD_I16LE;"), "{anonymous:?}");
    assert!(anonymous[1].ends_with("H5T_COMPOUND {"), "{anonymous:?}");
}

/// Strings holding quotes, backslashes, tabs, line feeds, carriage returns, backspaces and form
/// feeds, fixed-length and variable-length, in datasets and an attribute: h5dump (without `-e`)
/// prints them as they are, a line feed or carriage return followed by 11 spaces.
#[test]
fn strings_with_quotes_and_control_characters_dump_as_h5dump_prints_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("strings.h5");
    let make = r#"
import sys
import h5py, numpy as np
texts = ['say "hi"', "back\\slash", "tab\there", "two\nlines and more", "cr\rend",
         "bs\bff\f", "plain"]
with h5py.File(sys.argv[1], "w") as f:
    f["fixed"] = np.array([t.encode() for t in texts], dtype="S24")
    f.create_dataset("vlen", data=texts, dtype=h5py.string_dtype())
    f.attrs["note"] = 'an "attribute"\nwith two lines'
"#;
    run_python(make, &[&path]);
    same_as_h5dump(&path);
    let ours = h5_dump(&path);
    for want in [
        "\"say \"hi\"\"",
        "\"back\\slash\"",
        "\"two\n           lines and more\"",
        "\"tab\there\"",
    ] {
        assert!(ours.contains(want), "{want:?} missing from:\n{ours}");
    }
}
