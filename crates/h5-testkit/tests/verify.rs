//! The verification harness itself: on files written by h5py, correct expectations pass and each
//! kind of wrong expectation fails with a line naming the mismatch; h5dump runs, fails on a
//! non-HDF5 file, and its DATA blocks parse. These tests need the tools `scripts/setup-tools`
//! installs and fail (never skip) without them.

use std::path::{Path, PathBuf};

use h5_testkit::verify::{
    AttrExpect, DatasetExpect, Expectations, FilterExpect, LinkExpect, Values,
    check_files_with_h5py, check_with_h5py, digest_le, dtype, h5dump, h5dump_data_values,
    h5dump_version, run_python,
};
use serde_json::json;
use tempfile::TempDir;

/// Writes `sample.h5` with h5py into a fresh temporary directory. Format bounds v1.10 (superblock
/// 3): Debian 12's h5dump 1.10.8 cannot read the version 4 datatype messages that the v1.12+
/// bounds give compound and enum types (see `h5dump_1_10_cannot_read_v112_compound_types`).
const MAKE_SAMPLE: &str = r#"
import sys, h5py, numpy as np, hdf5plugin
with h5py.File(sys.argv[1], "w", libver="v110") as f:
    g = f.create_group("g")
    g.attrs["units"] = "K"
    g.attrs["scale"] = np.float32(0.5)
    a = g.create_dataset("a", data=np.arange(12, dtype="<f4").reshape(3, 4), chunks=(2, 2),
                         maxshape=(None, 4), compression="gzip", compression_opts=4, shuffle=True,
                         fillvalue=np.float32(-1))
    a[2, 3] = np.nan
    a.attrs["valid"] = np.array([0, 10], dtype="<i2")
    g.create_dataset("big", data=np.arange(1000, dtype="<i4") * 3 - 7)
    ct = np.dtype([("x", "<i4"), ("y", "<f8")])
    f.create_dataset("c", data=np.array([(1, 2.5), (3, -4.0)], dtype=ct))
    f.create_dataset("s", data=np.array([b"ab", b"cde"], dtype="S5"))
    f.create_dataset("vs", data=["x", "y\u00e9"], dtype=h5py.string_dtype())
    f.create_dataset("e", data=np.array([0, 1, 0], dtype=h5py.enum_dtype({"R": 0, "G": 1}, basetype="u1")))
    f.create_dataset("z", data=np.arange(100, dtype="<u2"), chunks=(50,), **hdf5plugin.Zstd(clevel=3))
    f["soft"] = h5py.SoftLink("/g/a")
    f["ext"] = h5py.ExternalLink("other.h5", "/x")
"#;

fn sample() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("sample.h5");
    run_python(MAKE_SAMPLE, &[&path]);
    (dir, path)
}

fn big_values() -> Vec<i32> {
    (0..1000).map(|i| i * 3 - 7).collect()
}

/// Everything in the sample, correctly.
fn correct() -> Expectations {
    Expectations::new()
        .superblock_version(3)
        .userblock_size(0)
        .group("/", &["g", "c", "s", "vs", "e", "z", "soft", "ext"])
        .group("/g", &["a", "big"])
        .hard_link("/g/a")
        .soft_link("/soft", "/g/a")
        .external_link("/ext", "other.h5", "/x")
        .dataset(
            "/g/a",
            DatasetExpect::new("<f4", &[3, 4])
                .maxshape(&[None, Some(4)])
                .chunks(&[2, 2])
                .gzip(4)
                .shuffle(true)
                .fletcher32(false)
                .scaleoffset(None)
                .filters(vec![
                    FilterExpect::new(2, 1, &[4]),
                    FilterExpect {
                        name: Some("deflate".into()),
                        ..FilterExpect::new(1, 1, &[4])
                    },
                ])
                .fillvalue(json!(-1))
                .values(json!([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, "nan"]])),
        )
        .dataset(
            "/g/big",
            DatasetExpect::new("<i4", &[1000])
                .contiguous()
                .no_compression()
                .filters(vec![])
                .digest(digest_le(&big_values()))
                .spot(&[0], json!(-7))
                .spot(&[999], json!(2990)),
        )
        .dataset(
            "/c",
            DatasetExpect::new(
                dtype::compound(&[("x", "<i4".into(), 0), ("y", "<f8".into(), 4)]),
                &[2],
            )
            .values(json!([{"x": 1, "y": 2.5}, {"x": 3, "y": -4}])),
        )
        .dataset(
            "/s",
            DatasetExpect::new("|S5/ascii", &[2]).values(json!(["ab", "cde"])),
        )
        .dataset(
            "/vs",
            DatasetExpect::new("vlen-str-utf8", &[2]).values(json!(["x", {"hex": "79c3a9"}])),
        )
        .dataset(
            "/e",
            DatasetExpect::new(dtype::enumeration("|u1", &[("R", 0), ("G", 1)]), &[3])
                .values(json!([0, 1, 0])),
        )
        .dataset(
            "/z",
            DatasetExpect::new("<u2", &[100])
                .chunks(&[50])
                .no_compression()
                .filters(vec![FilterExpect::new(32015, 1, &[3])])
                .digest_as(
                    digest_le(&(0..100).map(f64::from).collect::<Vec<_>>()),
                    "<f8",
                ),
        )
        .attr_names("/g", &["scale", "units"])
        .attr(
            "/g",
            "units",
            AttrExpect::new("vlen-str-utf8", json!("K")).shape(&[]),
        )
        .attr("/g", "scale", AttrExpect::new("<f4", json!(0.5)))
        .attr(
            "/g/a",
            "valid",
            AttrExpect::new("<i2", json!([0, 10])).shape(&[2]),
        )
}

#[test]
fn correct_expectations_pass() {
    let (_dir, file) = sample();
    check_with_h5py(&file, &correct()).unwrap();
}

/// [`correct`] with the expectation of dataset `path` replaced by `f(dtype and shape only)`.
fn with_dataset(path: &str, f: impl FnOnce(DatasetExpect) -> DatasetExpect) -> Expectations {
    let base = match path {
        "/g/a" => DatasetExpect::new("<f4", &[3, 4]),
        "/g/big" => DatasetExpect::new("<i4", &[1000]),
        other => panic!("no base for {other}"),
    };
    correct().dataset(path, f(base))
}

#[test]
fn each_wrong_expectation_is_reported() {
    let (_dir, file) = sample();
    let big_f32: Vec<f32> = big_values().iter().map(|&v| v as f32).collect();
    let cases: Vec<(&str, Expectations, &str)> = vec![
        (
            "dtype",
            with_dataset("/g/a", |d| DatasetExpect {
                dtype: Some("<f8".into()),
                ..d
            }),
            r#"/g/a: dtype "<f4" != expected "<f8""#,
        ),
        (
            "shape",
            with_dataset("/g/a", |d| DatasetExpect {
                shape: Some(vec![4, 3]),
                ..d
            }),
            "/g/a: shape [3, 4] != expected [4, 3]",
        ),
        (
            "maxshape",
            with_dataset("/g/a", |d| d.maxshape(&[Some(3), Some(4)])),
            "/g/a: maxshape [null, 4] != expected [3, 4]",
        ),
        (
            "chunks",
            with_dataset("/g/a", |d| d.chunks(&[1, 4])),
            "/g/a: chunks [2, 2] != expected [1, 4]",
        ),
        (
            "layout",
            with_dataset("/g/a", |d| DatasetExpect {
                layout: Some("contiguous".into()),
                ..d
            }),
            r#"/g/a: layout "chunked" != expected "contiguous""#,
        ),
        (
            "value",
            with_dataset("/g/a", |d| {
                d.values(json!([[0, 1, 2, 3], [4, 5, 6.5, 7], [8, 9, 10, "nan"]]))
            }),
            "/g/a[1][2]: value 6.0 != expected 6.5",
        ),
        (
            "nan",
            with_dataset("/g/a", |d| {
                d.values(json!([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]))
            }),
            "/g/a[2][3]: value nan != expected 11",
        ),
        (
            "value shape",
            with_dataset("/g/a", |d| d.values(json!([[0, 1, 2, 3], [4, 5, 6, 7]]))),
            "/g/a: length 3 != expected 2",
        ),
        (
            "digest",
            with_dataset("/g/big", |d| d.digest(digest_le(&big_f32))),
            "/g/big: digest sha256",
        ),
        (
            "spot",
            with_dataset("/g/big", |d| {
                d.digest(digest_le(&big_values())).spot(&[1], json!(-3))
            }),
            "/g/big[1]: value -4 != expected -3",
        ),
        (
            "fill value",
            with_dataset("/g/a", |d| d.fillvalue(json!(0))),
            "/g/a fillvalue: value -1.0 != expected 0",
        ),
        (
            "filter",
            with_dataset("/g/a", |d| {
                d.filters(vec![
                    FilterExpect::new(1, 1, &[4]),
                    FilterExpect::new(2, 1, &[4]),
                ])
            }),
            "/g/a: filters [[2, 1, [4], \"shuffle\"], [1, 1, [4], \"deflate\"]] != expected",
        ),
        (
            "compression",
            with_dataset("/g/a", |d| d.gzip(9)),
            "/g/a: compression_opts 4 != expected 9",
        ),
        (
            "shuffle",
            with_dataset("/g/a", |d| d.shuffle(false)),
            "/g/a: shuffle true != expected false",
        ),
        (
            "missing member",
            correct().group("/g", &["a", "b", "big"]),
            r#"/g: members ["a", "big"] != expected ["a", "b", "big"]"#,
        ),
        (
            "missing dataset",
            correct().dataset("/g/b", DatasetExpect::new("<f4", &[1])),
            "/g/b: missing (expected a dataset)",
        ),
        (
            "group is a dataset",
            correct().group_exists("/g/a"),
            "/g/a: is a dataset, expected a group",
        ),
        (
            "attribute value",
            correct().attr("/g", "units", AttrExpect::new("vlen-str-utf8", json!("C"))),
            r#"/g @units: value b'K' != expected "C""#,
        ),
        (
            "attribute dtype",
            correct().attr("/g", "scale", AttrExpect::new("<f8", json!(0.5))),
            r#"/g @scale: dtype "<f4" != expected "<f8""#,
        ),
        (
            "attribute shape",
            correct().attr(
                "/g/a",
                "valid",
                AttrExpect::new("<i2", json!([0, 10])).shape(&[3]),
            ),
            "/g/a @valid: shape [2] != expected [3]",
        ),
        (
            "attribute missing",
            correct().attr(
                "/g/a",
                "units",
                AttrExpect::new("vlen-str-utf8", json!("K")),
            ),
            "/g/a @units: attribute missing",
        ),
        (
            "attribute names",
            correct().attr_names("/g/a", &[]),
            r#"/g/a: attribute names ["valid"] != expected []"#,
        ),
        (
            "soft link target",
            correct().soft_link("/soft", "/g/big"),
            r#"/soft: soft link target "/g/a" != expected "/g/big""#,
        ),
        (
            "link kind",
            correct().link("/soft", LinkExpect::Hard),
            "/soft: link kind soft != expected hard",
        ),
        (
            "external link",
            correct().external_link("/ext", "other.h5", "/y"),
            r#"/ext: external link path "/x" != expected "/y""#,
        ),
        (
            "superblock version",
            correct().superblock_version(2),
            "file: superblock version 3 != expected 2",
        ),
        (
            "compound",
            correct().dataset(
                "/c",
                DatasetExpect::new(
                    dtype::compound(&[("x", "<i4".into(), 0), ("y", "<f8".into(), 8)]),
                    &[2],
                ),
            ),
            r#"/c: dtype {"compound": [["x", "<i4", 0], ["y", "<f8", 4]], "itemsize": 12}"#,
        ),
        (
            "compound value",
            correct().dataset(
                "/c",
                DatasetExpect::default().values(json!([{"x": 1, "y": 2.5}, {"x": 3, "y": 4}])),
            ),
            "/c[1].y: value -4.0 != expected 4",
        ),
        (
            "string",
            correct().dataset(
                "/s",
                DatasetExpect::new("|S5", &[2]).values(json!(["ab", "cd"])),
            ),
            r#"/s[1]: value b'cde' != expected "cd""#,
        ),
        (
            "string charset",
            correct().dataset("/s", DatasetExpect::new("|S5/utf-8", &[2])),
            r#"/s: dtype "|S5/ascii" != expected "|S5/utf-8""#,
        ),
        (
            "enum mapping",
            correct().dataset(
                "/e",
                DatasetExpect::new(dtype::enumeration("|u1", &[("R", 0), ("G", 2)]), &[3]),
            ),
            r#"/e: dtype {"enum": "|u1", "mapping": {"#,
        ),
        (
            "plain type is not an enum",
            correct().dataset("/e", DatasetExpect::new("|u1", &[3])),
            r#"/e: dtype {"enum": "|u1""#,
        ),
        (
            "plugin filter",
            correct().dataset(
                "/z",
                DatasetExpect::default().filters(vec![FilterExpect::new(32001, 1, &[])]),
            ),
            "/z: filters [[32015, 1, [3], \"Zstandard compression",
        ),
    ];
    let mut failures = Vec::new();
    for (name, exp, needle) in &cases {
        match check_with_h5py(&file, exp) {
            Ok(()) => failures.push(format!("{name}: passed, expected a mismatch")),
            Err(e) if !e.contains(needle) => {
                failures.push(format!("{name}: error does not mention `{needle}`:\n{e}"));
            }
            Err(e) => {
                // Only the one wrong expectation is reported (plus the header line).
                let lines = e
                    .lines()
                    .filter(|l| l.starts_with('/') || l.starts_with("file:"));
                if lines.count() != 1 {
                    failures.push(format!("{name}: expected exactly one mismatch line:\n{e}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn several_mismatches_are_all_listed() {
    let (_dir, file) = sample();
    let exp = correct().superblock_version(0).group("/g", &["a"]).attr(
        "/g",
        "scale",
        AttrExpect::new("<f4", json!(1)),
    );
    let err = check_with_h5py(&file, &exp).unwrap_err();
    for needle in [
        "file: superblock version 3 != expected 0",
        "/g: members",
        "/g @scale: value 0.5 != expected 1",
    ] {
        assert!(err.contains(needle), "missing `{needle}` in:\n{err}");
    }
}

#[test]
fn many_value_mismatches_are_capped() {
    let (_dir, file) = sample();
    let exp = correct().dataset(
        "/g/big",
        DatasetExpect::default().values(json!(vec![0; 1000])),
    );
    let err = check_with_h5py(&file, &exp).unwrap_err();
    assert_eq!(
        err.lines().filter(|l| l.contains(": value ")).count(),
        10,
        "{err}"
    );
    assert!(
        err.contains("/g/big: ... and 990 more value mismatches"),
        "{err}"
    );
}

#[test]
fn several_files_are_checked_in_one_run_and_each_mismatch_names_its_file() {
    let (_dir, file) = sample();
    let (_dir2, other) = sample();
    assert_eq!(check_files_with_h5py(&[&file, &other], &correct()), Ok(()));
    // The second file differs: only its lines, prefixed with its name, are reported.
    run_python(
        "import sys, h5py\nwith h5py.File(sys.argv[1], 'a') as f:\n    f['g/big'][0] = 5\n",
        &[&other],
    );
    let err = check_files_with_h5py(&[&file, &other], &correct()).unwrap_err();
    let mismatches: Vec<&str> = err.lines().filter(|l| l.contains(": value ")).collect();
    assert_eq!(mismatches.len(), 1, "{err}");
    assert!(
        mismatches[0].starts_with(&format!("{}: /g/big", other.display())),
        "{err}"
    );
    assert!(!err.contains(&format!("{}: ", file.display())), "{err}");
    // A file h5py cannot open fails the run, whichever position it has.
    let (_dir3, bad) = not_hdf5();
    let err = check_files_with_h5py(&[&file, &bad], &correct()).unwrap_err();
    assert!(err.contains("h5py cannot open"), "{err}");
}

fn not_hdf5() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("not.h5");
    std::fs::write(&path, b"this is not an HDF5 file\n").expect("write");
    (dir, path)
}

#[test]
fn a_file_h5py_cannot_open_is_an_error() {
    let (_dir, file) = not_hdf5();
    let err = check_with_h5py(&file, &Expectations::new()).unwrap_err();
    assert!(err.contains("h5py cannot open"), "{err}");
    assert!(err.contains("file signature not found"), "{err}");
    let missing = Path::new("/nonexistent/dir/x.h5");
    assert!(check_with_h5py(missing, &Expectations::new()).is_err());
}

#[test]
#[should_panic(expected = "rejected the expectations")]
fn expectations_the_script_cannot_use_panic() {
    let (_dir, file) = sample();
    let exp = correct().dataset(
        "/vs",
        DatasetExpect::new("vlen-str-utf8", &[2]).digest("00"),
    );
    let _ = check_with_h5py(&file, &exp);
}

#[test]
fn h5dump_reads_the_sample_and_its_values_parse() {
    let (_dir, file) = sample();
    let whole = h5dump(&[], &file).unwrap();
    assert!(whole.contains(r#"DATASET "big""#), "{whole}");
    assert_eq!(
        h5dump_data_values(&whole, "/g/a"),
        [
            "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "nan"
        ]
    );
    assert_eq!(
        h5dump_data_values(&whole, "/c"),
        ["{ 1, 2.5 }", "{ 3, -4 }"]
    );
    // numpy's fixed-size strings are NUL-padded; h5dump shows the padding.
    assert_eq!(
        h5dump_data_values(&whole, "/s"),
        [r#""ab\000\000\000""#, r#""cde\000\000""#]
    );
    assert_eq!(h5dump_data_values(&whole, "/e"), ["R", "G", "R"]);

    let one = h5dump(&["-d", "/g/big"], &file).unwrap();
    let big: Vec<i32> = h5dump_data_values(&one, "/g/big")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(big, big_values());

    // zstd through hdf5plugin's plugin, found by HDF5_PLUGIN_PATH.
    let z = h5dump(&["-d", "/z"], &file).unwrap();
    assert_eq!(h5dump_data_values(&z, "/z").len(), 100);
    assert_eq!(h5dump_data_values(&z, "/z")[99], "99");
}

#[test]
fn h5dump_fails_on_a_file_it_cannot_open() {
    let (_dir, file) = not_hdf5();
    let err = h5dump(&[], &file).unwrap_err();
    assert!(err.contains("unable to open file"), "{err}");
    let (_dir2, good) = sample();
    let err = h5dump(&["-d", "/no/such"], &good).unwrap_err();
    assert!(err.contains("failed"), "{err}");
}

/// A known limit of the reference, pinned so it is noticed when it changes: h5dump 1.10.8 (Debian
/// 12's hdf5-tools) fails on compound and enum types written with format bounds v1.12 or later
/// (datatype message version 4), and then on every object of the file; h5py reads them. Files h5
/// writes for h5dump checks must use bounds up to v1.10 when they hold such types.
#[test]
fn h5dump_1_10_cannot_read_v112_compound_types() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("v112.h5");
    run_python(
        r#"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w", libver="v112") as f:
    f.create_dataset("c", data=np.zeros(2, dtype=[("x", "<i4"), ("y", "<f8")]))
    f.create_dataset("i", data=np.arange(3, dtype="<i4"))
"#,
        &[&file],
    );
    let c = dtype::compound(&[("x", "<i4".into(), 0), ("y", "<f8".into(), 4)]);
    let exp = Expectations::new().dataset(
        "/c",
        DatasetExpect::new(c, &[2]).values(json!([{"x": 0, "y": 0}, {"x": 0, "y": 0}])),
    );
    check_with_h5py(&file, &exp).unwrap();
    if h5dump_version().contains("Version 1.10.") {
        // Not even the plain integer dataset: h5dump fails on the whole file.
        let err = h5dump(&["-d", "/i"], &file).unwrap_err();
        assert!(err.contains("internal error"), "{err}");
    }
}

/// The other datatype classes and value forms of the notation: array, vlen sequence, object
/// reference, complex, opaque, bool, scalar, null dataspace, signed zero and infinities.
#[test]
fn other_types_and_value_forms() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("types.h5");
    run_python(
        r#"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    a = f.create_dataset("arr", shape=(2,), dtype=np.dtype(("<i2", (3,))))
    a[...] = np.array([[1, 2, 3], [4, 5, 6]], dtype="<i2")
    v = f.create_dataset("vl", shape=(2,), dtype=h5py.vlen_dtype(np.dtype("<i4")))
    v[0] = [1, 2]; v[1] = [3]
    f.create_dataset("ref", data=[f["arr"].ref, h5py.Reference()], dtype=h5py.ref_dtype)
    f.create_dataset("cx", data=np.array([1 + 2j, complex(0, -0.5)], dtype="<c8"))
    f.create_dataset("op", data=np.void(b"\x01\x02\x03\x04"))
    f.create_dataset("b", data=np.array([True, False]))
    f.create_dataset("sc", data=np.float64(-0.0))
    f.create_dataset("inf", data=np.array([np.inf, -np.inf], dtype=">f8"))
    f.create_dataset("null", dtype="<f4", data=h5py.Empty("<f4"))
"#,
        &[&file],
    );
    let good = Expectations::new()
        .superblock_version(0)
        .dataset(
            "/arr",
            DatasetExpect::new(dtype::array("<i2", &[3]), &[2])
                .values(json!([[1, 2, 3], [4, 5, 6]])),
        )
        .dataset(
            "/vl",
            DatasetExpect::new(dtype::vlen("<i4"), &[2]).values(json!([[1, 2], [3]])),
        )
        .dataset(
            "/ref",
            DatasetExpect::new("ref-object", &[2]).values(json!(["/arr", null])),
        )
        .dataset(
            "/cx",
            DatasetExpect::new("<c8", &[2]).values(json!([[1, 2], [0, -0.5]])),
        )
        .dataset(
            "/op",
            DatasetExpect::new("|V4", &[]).values(json!({"hex": "01020304"})),
        )
        .dataset(
            "/b",
            DatasetExpect::new("|b1", &[2]).values(json!([true, false])),
        )
        .dataset(
            "/sc",
            DatasetExpect::new("<f8", &[])
                .values(json!(-0.0))
                .spot(&[], json!(-0.0)),
        )
        .dataset(
            "/inf",
            DatasetExpect::new(">f8", &[2]).values(json!(["inf", "-inf"])),
        )
        // A null dataspace: no shape (the builder cannot say `null`), value `null`.
        .dataset(
            "/null",
            DatasetExpect {
                dtype: Some("<f4".into()),
                values: Values::Exact(json!(null)),
                ..Default::default()
            },
        );
    check_with_h5py(&file, &good).unwrap();

    let cases: Vec<(Expectations, &str)> = vec![
        (
            good.clone()
                .dataset("/sc", DatasetExpect::default().values(json!(0.0))),
            "/sc: value -0.0 != expected 0.0",
        ),
        (
            good.clone()
                .dataset("/b", DatasetExpect::default().values(json!([1, 0]))),
            "/b[0]: value true != expected 1",
        ),
        (
            good.clone().dataset(
                "/ref",
                DatasetExpect::default().values(json!(["/vl", null])),
            ),
            r#"/ref[0]: reference to "/arr" != expected "/vl""#,
        ),
        (
            good.clone()
                .dataset("/arr", DatasetExpect::new(dtype::array("<i2", &[2]), &[2])),
            r#"/arr: dtype {"array": "<i2", "shape": [3]}"#,
        ),
        (
            good.clone().dataset(
                "/vl",
                DatasetExpect::default().values(json!([[1, 2], [3, 4]])),
            ),
            "/vl[1]: length 1 != expected 2",
        ),
        (
            good.clone()
                .dataset("/inf", DatasetExpect::new("<f8", &[2])),
            r#"/inf: dtype ">f8" != expected "<f8""#,
        ),
        (
            good.clone()
                .dataset("/null", DatasetExpect::default().values(json!(0))),
            "/null: value is empty (null dataspace), expected 0",
        ),
    ];
    for (exp, needle) in cases {
        let err = check_with_h5py(&file, &exp).unwrap_err();
        assert!(err.contains(needle), "no `{needle}` in:\n{err}");
    }
}
