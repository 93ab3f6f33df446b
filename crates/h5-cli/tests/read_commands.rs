//! End-to-end tests of the reading commands: `h5 ls`, `h5 dump` (against h5dump's own output,
//! committed under tests/golden/), `h5 dump --json` (against the fixture manifest h5py wrote) and
//! `h5 stat`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Runs `h5` from the workspace root (so relative fixture paths print as h5dump printed them).
fn h5(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_h5"))
        .current_dir(workspace())
        .args(args)
        .output()
        .expect("run h5")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

fn ok(args: &[&str]) -> String {
    let o = h5(args);
    assert!(
        o.status.success(),
        "h5 {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(&o)
}

// ---------------------------------------------------------------------------------------------
// h5 dump: the DDL against h5dump

/// Every case of tests/golden/cases.txt: `h5 dump` prints exactly what h5dump printed.
#[test]
fn dump_reproduces_h5dump_golden_files() {
    let dir = workspace().join("crates/h5-cli/tests/golden");
    let cases = std::fs::read_to_string(dir.join("cases.txt")).unwrap();
    let mut checked = 0;
    for line in cases
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [file, opt, path] = parts[..] else {
            panic!("bad case line {line:?}");
        };
        let base = Path::new(file).file_stem().unwrap().to_str().unwrap();
        let (golden, out) = if opt == "-" {
            (dir.join(format!("{base}.ddl")), ok(&["dump", file]))
        } else {
            (
                dir.join(format!("{base}{}.ddl", path.replace('/', "_"))),
                ok(&["dump", file, path]),
            )
        };
        let want = std::fs::read_to_string(&golden).unwrap();
        if out != want {
            let first = out
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            panic!(
                "{line}: differs from {} at line {}:\n  ours:   {:?}\n  h5dump: {:?}",
                golden.display(),
                first + 1,
                out.lines().nth(first),
                want.lines().nth(first)
            );
        }
        checked += 1;
    }
    assert!(checked >= 70, "{checked} cases");
}

/// The smallest file, spelled out: layout, indentation and number formatting.
#[test]
fn dump_of_sb0_is_h5dump_ddl() {
    let out = ok(&["dump", "fixtures/files/sb0_earliest.h5", "/group/x"]);
    assert_eq!(
        out,
        "HDF5 \"fixtures/files/sb0_earliest.h5\" {\n\
         DATASET \"/group/x\" {\n   DATATYPE  H5T_IEEE_F64LE\n   \
         DATASPACE  SIMPLE { ( 5 ) / ( 5 ) }\n   DATA {\n   \
         (0): 0, 0.25, 0.5, 0.75, 1\n   }\n}\n}\n"
    );
}

/// A null dataspace prints as h5dump prints null attributes: NULL and an empty DATA block.
#[test]
fn dump_null_dataspace() {
    let out = ok(&["dump", "fixtures/files/empty_scalar.h5", "/null_dataspace"]);
    assert!(
        out.contains("   DATASPACE  NULL\n   DATA {\n   }\n"),
        "{out}"
    );
    let out = ok(&[
        "dump",
        "fixtures/files/empty_scalar.h5",
        "/empty_chunked_unlimited",
    ]);
    assert!(
        out.contains("DATASPACE  SIMPLE { ( 0 ) / ( H5S_UNLIMITED ) }"),
        "{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// h5 dump --json against the manifest

/// numpy's `dtype.str` for the `str(dtype)` spellings h5py recorded (simple types only).
fn numpy_str(manifest_dtype: &str) -> Option<String> {
    let native = |kind: char, size: usize| {
        if size == 1 {
            format!("|{kind}{size}")
        } else {
            format!("<{kind}{size}")
        }
    };
    let s = match manifest_dtype {
        "int8" => native('i', 1),
        "int16" => native('i', 2),
        "int32" => native('i', 4),
        "int64" => native('i', 8),
        "uint8" => native('u', 1),
        "uint16" => native('u', 2),
        "uint32" => native('u', 4),
        "uint64" => native('u', 8),
        "float16" => native('f', 2),
        "float32" => native('f', 4),
        "float64" => native('f', 8),
        "complex64" => native('c', 8),
        "complex128" => native('c', 16),
        s if s.starts_with(['<', '>', '|']) => s.to_owned(),
        _ => return None,
    };
    Some(s)
}

/// Manifest values (nested lists in C order) flattened.
fn flatten(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Array(items) => items.iter().for_each(|x| flatten(x, out)),
        other => out.push(other.clone()),
    }
}

fn same_number(ours: &Value, theirs: &Value) -> bool {
    match (ours, theirs) {
        (Value::String(a), Value::String(b)) => a == b,
        // The manifest writes floats as Python's repr, exact when parsed back.
        (Value::Number(a), Value::String(b)) => {
            b.parse::<f64>().ok() == a.as_f64() && a.as_f64().is_some()
        }
        (Value::Number(a), Value::Number(b)) => {
            if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
                x == y
            } else if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
                x == y
            } else {
                a.as_f64() == b.as_f64()
            }
        }
        _ => false,
    }
}

/// For the numeric datasets of several fixture files: dtype string, shape, maxshape, chunks,
/// filter ids and every value match what h5py recorded.
#[test]
fn dump_json_matches_manifest() {
    let manifest = h5_testkit::manifest();
    let mut datasets = 0;
    let mut values = 0;
    for name in [
        "sb0_earliest.h5",
        "dtypes_earliest.h5",
        "dtypes_latest.h5",
        "layouts_latest.h5",
        "layouts_earliest.h5",
        "filters.h5",
        "filters_plugins.h5",
        "empty_scalar.h5",
    ] {
        let fixture = manifest.file(name).unwrap();
        let rel = format!("fixtures/files/{name}");
        let doc: Value = serde_json::from_str(&ok(&["dump", "--json", &rel])).unwrap();
        assert_eq!(doc["file"], rel.as_str());
        let objects = doc["objects"].as_array().unwrap();
        for obj in fixture.datasets() {
            let Some(ours) = objects.iter().find(|o| o["path"] == obj.path.as_str()) else {
                panic!("{name}{}: missing from the JSON", obj.path);
            };
            assert_eq!(ours["kind"], "dataset");
            let Some(want_dtype) = obj.dtype.as_deref().and_then(numpy_str) else {
                continue;
            };
            if ours.get("error").is_some() {
                // Data the engine cannot decode (szip) or lay out (virtual): skipped here.
                continue;
            }
            let what = format!("{name}{}", obj.path);
            // h5py reads enums as their base integers; the JSON names the members.
            let is_enum = ours["dtype"]["kind"] == "enum";
            let dtype = if is_enum {
                &ours["dtype"]["base"]
            } else {
                &ours["dtype"]
            };
            assert_eq!(dtype, want_dtype.as_str(), "{what} dtype");
            assert_eq!(
                ours["shape"],
                serde_json::to_value(&obj.shape).unwrap(),
                "{what} shape"
            );
            assert_eq!(
                ours["maxshape"],
                serde_json::to_value(&obj.maxshape).unwrap(),
                "{what} maxshape"
            );
            assert_eq!(
                ours["chunks"],
                serde_json::to_value(&obj.chunks).unwrap(),
                "{what} chunks"
            );
            let ids: Vec<u64> = ours["filters"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["id"].as_u64().unwrap())
                .collect();
            let want_ids: Vec<u64> = obj
                .filters
                .iter()
                .flatten()
                .map(|f| u64::from(f.id))
                .collect();
            assert_eq!(ids, want_ids, "{what} filters");
            let mut data = ours["data"].as_array().unwrap().clone();
            if is_enum {
                for x in &mut data {
                    *x = ours["dtype"]["members"][x.as_str().unwrap()].clone();
                }
            }
            if let Some(v) = &obj.values {
                let mut want = Vec::new();
                flatten(v, &mut want);
                if want_dtype.contains('c') || want_dtype.contains('S') {
                    continue;
                }
                let mut flat = Vec::new();
                data.iter().for_each(|x| flatten(x, &mut flat));
                let data = flat;
                assert_eq!(data.len(), want.len(), "{what} element count");
                for (i, (a, b)) in data.iter().zip(&want).enumerate() {
                    assert!(same_number(a, b), "{what}[{i}]: {a} != {b}");
                }
                values += want.len();
            } else if let Some(spots) = &obj.spot_values {
                let shape = obj.shape.clone().unwrap_or_default();
                for s in spots {
                    let flat = s
                        .index
                        .iter()
                        .zip(&shape)
                        .fold(0u64, |acc, (&i, &d)| acc * d + i);
                    let a = &data[flat as usize];
                    assert!(same_number(a, &s.value), "{what}{:?}: {a}", s.index);
                    values += 1;
                }
            }
            datasets += 1;
        }
    }
    assert!(datasets >= 60, "{datasets} datasets checked");
    assert!(values >= 3000, "{values} values checked");
}

/// Strings, compounds, enums and special floats in the JSON.
#[test]
fn dump_json_structured_values() {
    let doc: Value = serde_json::from_str(&ok(&[
        "dump",
        "--json",
        "fixtures/files/dtypes_earliest.h5",
    ]))
    .unwrap();
    let obj = |p: &str| {
        doc["objects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["path"] == p)
            .unwrap()
            .clone()
    };
    let s = obj("/str_fixed_nullpad_ascii");
    assert_eq!(s["dtype"], "|S8");
    assert_eq!(
        s["data"],
        serde_json::json!(["abc", "", "hello", "fullsize"])
    );
    let v = obj("/str_vlen_ascii");
    assert_eq!(v["dtype"]["kind"], "vlen_string");
    assert_eq!(
        v["data"],
        serde_json::json!(["short", "", "a longer ascii string"])
    );
    let f = obj("/f4_be");
    assert_eq!(f["dtype"], ">f4");
    assert_eq!(f["data"][7], "inf");
    assert_eq!(f["data"][8], "-inf");
    assert_eq!(f["data"][9], "nan");
    let c = obj("/compound_aligned");
    assert_eq!(c["dtype"]["kind"], "compound");
    assert_eq!(c["dtype"]["fields"][1]["dtype"], "<f8");
    assert_eq!(c["dtype"]["fields"][1]["offset"], 8);
    assert_eq!(
        c["data"][1],
        serde_json::json!({"a": -3, "b": -0.25, "c": 255})
    );
    let e = obj("/enum_i2");
    assert_eq!(e["dtype"]["members"]["BLUE"], 42);
    assert_eq!(
        e["data"],
        serde_json::json!(["RED", "BLUE", "GREEN", "RED"])
    );
    let a = obj("/array_f4_2x2");
    assert_eq!(a["dtype"]["shape"], serde_json::json!([2, 2]));
    assert_eq!(a["data"][2], serde_json::json!([8.0, 9.0, 10.0, 11.0]));
}

/// Attributes, groups and links in the JSON.
#[test]
fn dump_json_groups_links_attributes() {
    let doc: Value =
        serde_json::from_str(&ok(&["dump", "--json", "fixtures/files/groups_old.h5"])).unwrap();
    let objects = doc["objects"].as_array().unwrap();
    let find = |p: &str| objects.iter().find(|o| o["path"] == p).unwrap();
    assert_eq!(find("/")["kind"], "group");
    assert_eq!(find("/dangling")["kind"], "soft_link");
    assert_eq!(find("/dangling")["target"], "/does/not/exist");
    assert_eq!(find("/ext_link")["kind"], "external_link");
    assert_eq!(find("/ext_link")["file"], "external_target.h5");
    let doc: Value =
        serde_json::from_str(&ok(&["dump", "--json", "fixtures/files/sb0_earliest.h5"])).unwrap();
    let root = &doc["objects"][0];
    assert_eq!(root["attributes"]["title"]["data"][0], "superblock fixture");
    assert_eq!(root["attributes"]["title"]["dtype"], "|S18");
    assert_eq!(root["attributes"]["title"]["shape"], serde_json::json!([]));
}

// ---------------------------------------------------------------------------------------------
// h5 ls

#[test]
fn ls_lists_the_tree() {
    let out = ok(&["ls", "fixtures/files/sb0_earliest.h5"]);
    assert_eq!(
        out,
        "/  group\n  data  dataset {3, 4} int32 LE\n  group/  group\n"
    );
    let out = ok(&["ls", "-r", "fixtures/files/sb0_earliest.h5"]);
    assert_eq!(
        out,
        "/  group\n  data  dataset {3, 4} int32 LE\n  group/  group\n    x  dataset {5} float64 LE\n"
    );
}

#[test]
fn ls_shows_chunks_filters_links_and_details() {
    let out = ok(&[
        "ls",
        "fixtures/files/filters.h5",
        "/shuffle_gzip_fletcher32",
    ]);
    assert!(
        out.contains("chunks {8, 8}, filters shuffle(2; 4) + deflate(1; 4) + fletcher32(3)"),
        "{out}"
    );
    let out = ok(&["ls", "-r", "fixtures/files/groups_old.h5"]);
    assert!(
        out.contains("dangling -> /does/not/exist  (soft link)"),
        "{out}"
    );
    assert!(
        out.contains("ext_link -> external_target.h5:/target/values  (external link)"),
        "{out}"
    );
    let out = ok(&[
        "ls",
        "-v",
        "fixtures/files/layouts_latest.h5",
        "/fixed_array",
    ]);
    assert!(out.contains("layout chunked"), "{out}");
    assert!(out.contains("chunks allocated"), "{out}");
    let out = ok(&["ls", "-v", "fixtures/files/sb0_earliest.h5"]);
    assert!(
        out.contains("@title scalar string(18, nullpad, ascii)"),
        "{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// h5 stat

#[test]
fn stat_counts_objects_and_bytes() {
    let out = ok(&["stat", "fixtures/files/sb0_earliest.h5"]);
    assert!(out.contains("  groups            2\n"), "{out}");
    assert!(out.contains("  datasets          2\n"), "{out}");
    assert!(out.contains("  attributes        1\n"), "{out}");
    assert!(out.contains("3 hard, 0 soft, 0 external"), "{out}");
    // 12 int32 + 5 float64 stored contiguously.
    assert!(out.contains("  raw data          88 bytes"), "{out}");
    assert!(out.contains("  file size         4904 bytes"), "{out}");
    assert!(out.contains("  metadata          4816 bytes"), "{out}");
    assert!(out.contains("metadata cache"), "{out}");
    assert!(out.contains("hit rate"), "{out}");
}

/// The file-space section shows the strategy and the free space libhdf5 persisted
/// (`fixtures/fsm/fsm.json`: what `H5Fget_freespace` and `H5Fget_free_sections` report).
#[test]
fn stat_shows_the_file_space_strategy_and_persisted_free_space() {
    let out = ok(&["stat", "fixtures/fsm/page_large.h5"]);
    assert!(out.contains("file space\n  strategy          PAGE, page size 4096 bytes\n  persist           yes\n  threshold         1 bytes\n"), "{out}");
    assert!(
        out.contains("  free space        39351 bytes in 8 sections\n"),
        "{out}"
    );
    assert!(
        out.contains("    large           32768 bytes in 2 sections\n"),
        "{out}"
    );
    // 45056 bytes = 376 raw + 39351 free + the rest.
    assert!(out.contains("  metadata          5329 bytes"), "{out}");
    let out = ok(&["stat", "fixtures/fsm/fsm_threshold.h5"]);
    assert!(out.contains("  strategy          FSM_AGGR\n  persist           yes\n  threshold         512 bytes\n  free space        21280 bytes in 2 sections\n"), "{out}");
    let out = ok(&["stat", "fixtures/fsm/none.h5"]);
    assert!(
        out.contains("  strategy          NONE\n  persist           no\n"),
        "{out}"
    );
    let out = ok(&["stat", "fixtures/files/sb0_earliest.h5"]);
    assert!(out.contains("  strategy          FSM_AGGR (libhdf5's default; the file records no settings)\n  persist           no\n"), "{out}");
}

/// Chunk statistics agree with the chunk sizes libhdf5 reported to the manifest.
#[test]
fn stat_chunk_statistics_match_manifest() {
    let manifest = h5_testkit::manifest();
    let fixture = manifest.file("filters.h5").unwrap();
    let mut sizes: Vec<u64> = Vec::new();
    let mut chunked_storage = 0u64;
    for d in fixture.datasets() {
        if d.chunks.is_some() {
            chunked_storage += d.storage_size.unwrap_or(0);
            sizes.extend(d.chunk_list.iter().flatten().map(|c| c.size));
        }
    }
    let out = ok(&["stat", "fixtures/files/filters.h5"]);
    assert!(
        out.contains(&format!("  allocated         {}\n", sizes.len())),
        "{out}"
    );
    let min = sizes.iter().min().unwrap();
    let max = sizes.iter().max().unwrap();
    assert!(
        out.contains(&format!("stored size       min {min}, mean")),
        "{out}"
    );
    assert!(out.contains(&format!(", max {max} bytes")), "{out}");
    assert!(
        out.contains(&format!("  raw data          {chunked_storage} bytes")),
        "{out}"
    );
    assert!(out.contains("chunk cache       "), "{out}");
}

// ---------------------------------------------------------------------------------------------
// Errors

#[test]
fn errors_exit_with_status_1_and_a_message() {
    for args in [
        &["ls", "does/not/exist.h5"][..],
        &["dump", "fixtures/files/manifest.json"],
        &["dump", "fixtures/files/sb0_earliest.h5", "/nope"],
        &["stat", "does/not/exist.h5"],
        &["ls", "fixtures/files/sb0_earliest.h5", "/data/x"],
    ] {
        let o = h5(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.starts_with("h5: error: "), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

// ---------------------------------------------------------------------------------------------
// The tour's sample file

/// A dataset whose chunk cannot be decoded (its deflate stream overwritten) is printed as
/// `<data not read: ...>` while the rest of the file is printed, and the dump ends with an
/// error status naming how many parts were not read (h5dump's status is 1 too).
#[test]
fn dump_prints_what_it_can_and_fails_when_a_part_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.h5");
    h5_testkit::verify::run_python(
        r#"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["good"] = np.arange(6, dtype="<i4")
    f.create_dataset("bad", data=np.arange(1000, dtype="<i4"), chunks=(1000,), compression="gzip")
    info = f["bad"].id.get_chunk_info(0)
with open(sys.argv[1], "r+b") as fh:
    fh.seek(info.byte_offset)
    fh.write(b"\xff" * info.size)
"#,
        &[&path],
    );
    let o = Command::new(env!("CARGO_BIN_EXE_h5"))
        .args(["dump", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("(0): 0, 1, 2, 3, 4, 5"), "{out}");
    assert_eq!(out.matches("<data not read:").count(), 1, "{out}");
    assert!(out.ends_with("}\n}\n"), "the dump is finished: {out}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("1 part(s) of the file could not be read"),
        "{err}"
    );
    // The undamaged dataset alone dumps with status 0.
    let o = Command::new(env!("CARGO_BIN_EXE_h5"))
        .args(["dump", "-d", "/good", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success());
}

/// libhdf5's own test files of its family, multi and split drivers, dumped by the names
/// `h5dump --filedriver=...` is given in libhdf5's tests: `h5 dump` prints libhdf5's expected
/// output (`<name>.ddl`, from the same source distribution) byte for byte.
#[test]
fn dump_of_family_multi_and_split_files_matches_libhdf5s_expected_output() {
    let dir = workspace().join("fixtures/libhdf5_drivers");
    for (name, ddl) in [
        ("tfamily%05d.h5", "tfamily.ddl"),
        ("tmulti", "tmulti.ddl"),
        ("tsplit_file", "tsplit_file.ddl"),
    ] {
        dump_prints(&dir, name, ddl);
    }
}

/// `h5 dump NAME`, run in `dir`, succeeds and prints the file `ddl` of `dir` byte for byte.
fn dump_prints(dir: &Path, name: &str, ddl: &str) {
    let o = Command::new(env!("CARGO_BIN_EXE_h5"))
        .current_dir(dir)
        .args(["dump", name])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let want = std::fs::read_to_string(dir.join(ddl)).unwrap();
    assert_eq!(stdout(&o), want, "{name}");
}

/// Other libhdf5 test files (`fixtures/libhdf5_misc`): VAX G floats, a dataset whose partial
/// edge chunks are stored unfiltered, a null variable-length string, object comments, a
/// three-dimensional array type. `h5 dump` prints the expected output byte for byte (libhdf5's
/// own `.ddl` files; h5dump 1.10.8's output for `h5fc_edge_v3`).
#[test]
fn dump_of_libhdf5_test_files_matches_h5dumps_expected_output() {
    let dir = workspace().join("fixtures/libhdf5_misc");
    for name in ["tvms", "h5fc_edge_v3", "tvlstr", "tgrp_comments", "tarray2"] {
        dump_prints(&dir, &format!("{name}.h5"), &format!("{name}.ddl"));
    }
}

/// `h5 tour`, run from a directory without fixtures, opens the embedded sample file from memory
/// and prints its tree and a slice of /fixed_array (element (i, j) = i * 17 + j).
#[test]
fn tour_opens_the_bundled_sample() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_h5"))
        .current_dir(dir.path())
        .arg("tour")
        .output()
        .unwrap();
    assert!(o.status.success());
    let out = stdout(&o);
    let sample = out.split_once("A real file:").expect("the sample part").1;
    assert!(
        sample.contains("superblock\nversion 3), opened from memory"),
        "{sample}"
    );
    assert!(
        sample.contains("  fixed_array  dataset {25, 17} int32 LE, chunks {10, 6}\n"),
        "{sample}"
    );
    assert!(
        sample.contains(
            "  btree_v2_gzip  dataset {40, 40} float64 LE, chunks {3, 3}, filters deflate(1; 4)\n"
        ),
        "{sample}"
    );
    assert!(sample.contains("\n     38   39   40   41   42   43\n     55   56   57   58   59   60\n     72   73   74   75   76   77\n"), "{sample}");
    assert!(
        sample.contains("(chunk cache: 2 misses, 0 hits;"),
        "{sample}"
    );
}

/// Committed datatypes: `ls -v` lists their type and attributes, `dump --json` gives them their
/// dtype and attributes and names them where datasets and attributes use them.
#[test]
fn committed_datatypes_in_ls_and_json() {
    for file in [
        "fixtures/files/named_types_earliest.h5",
        "fixtures/files/named_types_latest.h5",
    ] {
        let out = ok(&["ls", "-r", "-v", file]);
        assert!(
            out.contains(
                "  pair_t  named datatype compound{x: int32 LE, y: float64 LE}\n    \
                 @units scalar vlen string utf8\n    @version scalar int32 LE\n"
            ),
            "{out}"
        );
        let doc: Value = serde_json::from_str(&ok(&["dump", "--json", file])).unwrap();
        let obj = |p: &str| {
            doc["objects"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["path"] == p)
                .unwrap()
                .clone()
        };
        let t = obj("/pair_t");
        assert_eq!(t["kind"], "datatype");
        assert_eq!(t["dtype"]["kind"], "compound");
        assert_eq!(t["attributes"]["version"]["data"], serde_json::json!([3]));
        assert_eq!(t["attributes"]["units"]["data"], serde_json::json!(["m"]));
        assert_eq!(obj("/points")["named_dtype"], "/pair_t");
        assert_eq!(obj("/colors")["named_dtype"], "/color_t");
        assert_eq!(obj("/labels")["named_dtype"], "/label_t");
        assert_eq!(obj("/")["attributes"]["origin"]["named_dtype"], "/pair_t");
        assert_eq!(
            obj("/color_t")["attributes"]["default"]["named_dtype"],
            "/color_t"
        );
        assert!(obj("/points")["attributes"].as_object().unwrap().is_empty());
    }
}

/// A file whose writer died: refused with the remedy named, read with a warning when asked,
/// and `h5 clear` resets its flags.
#[test]
fn files_left_open_for_writing_and_h5_clear() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("left_open.h5");
    std::fs::copy(
        workspace().join("fixtures/files/open_for_writing_swmr.h5"),
        &copy,
    )
    .unwrap();
    let path = copy.to_str().unwrap();
    let o = h5(&["ls", path]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("open for writing") && err.contains("h5 clear"),
        "{err}"
    );
    let o = h5(&["dump", "--json", "--ignore-open-for-writing", path]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("warning"));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["objects"][1]["shape"], serde_json::json!([4, 4]));
    assert_eq!(
        ok(&["clear", path]),
        format!("{path}: status flags 0x05 cleared\n")
    );
    assert_eq!(
        ok(&["clear", path]),
        format!("{path}: no status flags set\n")
    );
    let o = h5(&["stat", path]);
    assert!(o.status.success() && o.stderr.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Virtual datasets over many files, with few file descriptors.

/// A printf-style virtual dataset over 150 source files (written by h5py with
/// crates/h5/tests/scripts/vds_unlimited.py) is sized and read whole by a process allowed 100
/// open files: h5 keeps at most 64 sources open, never enough of them to run out (a source that
/// failed to open would read as the fill value, 0, and end the printf mapping early).
#[test]
fn a_printf_virtual_dataset_over_more_files_than_descriptors_reads_every_source() {
    let dir = tempfile::tempdir().unwrap();
    let script = include_str!("../../h5/tests/scripts/vds_unlimited.py");
    h5_testkit::verify::run_python(script, &[dir.path().as_os_str(), "make".as_ref()]);
    let file = dir.path().join("vds_unlim.h5");
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 100 && exec \"$0\" dump -d /printf_many \"$1\"")
        .arg(env!("CARGO_BIN_EXE_h5"))
        .arg(&file)
        .output()
        .expect("run h5 under sh");
    assert!(
        o.status.success(),
        "h5 dump failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = stdout(&o);
    assert!(out.contains("( 150, 4 )"), "extent: {out}");
    for i in [0u32, 40, 63, 64, 100, 149] {
        let row = format!(
            "({i},0): {}, {}, {}, {}",
            10 * i,
            10 * i + 1,
            10 * i + 2,
            10 * i + 3
        );
        assert!(out.contains(&row), "row {i} ({row}) missing: {out}");
    }
}
