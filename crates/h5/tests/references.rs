//! Region references (HDF5 1.8) and revised references (HDF5 1.12): read from the fixtures
//! libhdf5 wrote and compared with what libhdf5 resolved them to (the manifest), written by h5
//! and resolved by libhdf5 (`tests/verify/refs.py`: h5py for the 1.8 kinds, libhdf5's C API
//! for revised references) under both pinned references.

use h5::{File, FormatBounds, RefTarget, Reference, Referenced, RegionRef, Selection, Value};
use h5_testkit::verify::{Reference as Pinned, h5dump, workspace_dir};
use serde_json::{Value as Json, json};

fn open(name: &str) -> File {
    File::open(h5_testkit::fixture_path(name)).unwrap()
}

fn kind(s: &Selection) -> &'static str {
    match s {
        Selection::None => "none",
        Selection::All => "all",
        Selection::Points { .. } => "points",
        Selection::Regular { .. } | Selection::Blocks { .. } => "hyperslab",
    }
}

/// A region as the manifest and `refs.py` describe it (`values` for 1.8 references only).
fn region(ds: &h5::Dataset, sel: &Selection, values: bool) -> Json {
    let dims: Vec<u64> = ds.shape().iter().map(|&d| d as u64).collect();
    let (lo, hi) = sel.bounds(&dims).unwrap_or_default();
    let mut d = json!({
        "region_of": ds.path(),
        "selection": kind(sel),
        "npoints": sel.num_elements(&dims).unwrap(),
        "bounds_start": lo,
        "bounds_end": hi,
    });
    if values {
        d["values"] = json!(ds.read_selection::<i64>(sel).unwrap());
    }
    d
}

/// What `r` refers to, resolved through the public API, in the manifest's form.
fn describe(f: &File, r: &Option<Reference>, values: bool) -> Json {
    let Some(r) = r else { return Json::Null };
    match f.resolve(r).unwrap() {
        Referenced::Object(o) => json!({ "object": o.path() }),
        Referenced::Region(ds, sel) => region(&ds, &sel, values),
        Referenced::Attribute(a) => {
            let RefTarget::Attribute(name) = &r.target else {
                panic!("{r:?}")
            };
            assert_eq!(a.name(), name);
            json!({ "attribute": name, "of": f.object_at(r.object).unwrap().path() })
        }
        other => panic!("{other:?}"),
    }
}

fn manifest_values(file: &str, path: &str) -> Json {
    let m = h5_testkit::manifest();
    let f = m.file(file).unwrap();
    match path.split_once('@') {
        Some((obj, attr)) => {
            let obj = if obj.is_empty() { "/" } else { obj };
            f.object(obj)
                .unwrap()
                .attribute(attr)
                .unwrap()
                .value
                .clone()
                .unwrap()
        }
        None => f.object(path).unwrap().values.clone().unwrap(),
    }
}

/// Every reference of both fixture files, read as typed values and resolved, equals what
/// libhdf5 resolved it to: objects by path, regions by dataset, selection kind, element count,
/// bounds and values (hyperslabs regular and irregular, points, all, none), attributes by
/// name.
#[test]
fn fixture_references_resolve_as_libhdf5_resolves_them() {
    for name in ["references_earliest.h5", "references_latest.h5"] {
        let f = open(name);
        let mut cases = vec!["/regions", "/objects", "@region_attr"];
        if name.contains("latest") {
            cases.extend(["/revised", "@revised_attr"]);
        }
        for path in cases {
            let (dt, refs): (_, Vec<Option<Reference>>) = match path.strip_prefix('@') {
                Some(a) => {
                    let a = f.root().unwrap().attr(a).unwrap();
                    (a.dtype().clone(), a.read_vec().unwrap())
                }
                None => {
                    let d = f.dataset(path).unwrap();
                    (d.dtype().clone(), d.read_vec().unwrap())
                }
            };
            let revised = path.contains("revised");
            let ours: Vec<Json> = refs.iter().map(|r| describe(&f, r, !revised)).collect();
            let key = if path.starts_with('@') {
                format!("/{path}")
            } else {
                path.to_owned()
            };
            assert_eq!(
                json!(ours),
                manifest_values(name, &key),
                "{name}:{path} ({})",
                dt.describe()
            );
        }
        // 1.8 region references also read as RegionRef, and resolve to the dataset.
        let regions = f
            .dataset("regions")
            .unwrap()
            .read_vec::<RegionRef>()
            .unwrap();
        assert_eq!(regions.len(), 6);
        let (ds, sel) = f.dereference_region(&regions[3]).unwrap();
        assert_eq!(ds.path(), "/data");
        assert_eq!(
            sel,
            Selection::Blocks {
                rank: 2,
                corners: vec![0, 0, 0, 1, 4, 2, 5, 3]
            }
        );
        assert_eq!(
            ds.read_selection::<i32>(&sel).unwrap(),
            [0, 1, 18, 19, 22, 23]
        );
        // Object references do not read as region references.
        assert!(
            f.dataset("objects")
                .unwrap()
                .read_vec::<RegionRef>()
                .is_err()
        );
    }
}

/// `read_values` gives typed references (the 1.8 object kind as before).
#[test]
fn values_are_typed_references() {
    let f = open("references_latest.h5");
    let data = f.dataset("data").unwrap().address();
    let v = f.dataset("regions").unwrap().read_values().unwrap();
    assert_eq!(
        v[0],
        Value::Reference(Some(Reference {
            object: data,
            file: None,
            target: RefTarget::Region(Selection::Regular {
                start: vec![1, 1],
                stride: vec![1, 1],
                count: vec![1, 1],
                block: vec![2, 2]
            })
        }))
    );
    let v = f.dataset("revised").unwrap().read_values().unwrap();
    assert_eq!(v[0], Value::Reference(Some(Reference::object(data))));
    assert_eq!(
        v[4],
        Value::Reference(Some(Reference {
            object: data,
            file: None,
            target: RefTarget::Attribute("units".into())
        }))
    );
    let v = f.dataset("objects").unwrap().read_values().unwrap();
    assert_eq!(v[0], Value::ObjectRef(Some(data)));
    assert_eq!(v[2], Value::ObjectRef(None));
    // The revised reference type h5 writes is the one libhdf5 wrote.
    assert_eq!(
        f.dataset("revised").unwrap().dtype(),
        &<Option<Reference> as h5::H5Type>::h5_type()
    );
}

/// libhdf5's description of every reference in `path` (tests/verify/refs.py) with `python`.
fn libhdf5_sees(python: &std::path::Path, path: &std::path::Path) -> Json {
    let out = std::process::Command::new(python)
        .arg(workspace_dir().join("tests/verify/refs.py"))
        .arg(path)
        .output()
        .expect("run refs.py");
    assert!(
        out.status.success(),
        "refs.py failed on {}:\n{}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn selections() -> Vec<Selection> {
    vec![
        Selection::Regular {
            start: vec![1, 1],
            stride: vec![1, 1],
            count: vec![1, 1],
            block: vec![2, 2],
        },
        Selection::Regular {
            start: vec![0, 3],
            stride: vec![2, 1],
            count: vec![3, 1],
            block: vec![1, 1],
        },
        Selection::Blocks {
            rank: 2,
            corners: vec![0, 0, 0, 1, 4, 2, 5, 3],
        },
        Selection::Points {
            rank: 2,
            coords: vec![0, 0, 5, 3, 2, 1],
        },
        Selection::All,
        Selection::None,
    ]
}

/// Region references written by h5 in every format bound (version 1 selections below the
/// 1.12 bound, versions 3 and 2 from it) resolve in libhdf5 (h5py, both pinned versions) to
/// the datasets, selections and values written, in datasets and attributes, null ones too;
/// h5dump 1.10 reads the earliest-format file.
#[test]
fn written_region_references_resolve_in_libhdf5() {
    let dir = tempfile::tempdir().unwrap();
    for bounds in [
        FormatBounds::Earliest,
        FormatBounds::V18,
        FormatBounds::V112,
    ] {
        let path = dir.path().join(format!("regions_{bounds:?}.h5"));
        let f = File::create_with(
            &path,
            &h5::FileAccess::default(),
            &h5::CreateOptions {
                bounds,
                ..Default::default()
            },
        )
        .unwrap();
        let root = f.root().unwrap();
        let data = root
            .new_dataset::<i32>()
            .shape([6, 4])
            .create("data")
            .unwrap();
        data.write(&(0..24).collect::<Vec<i32>>()).unwrap();
        let g = root.create_group("g").unwrap();
        let line = g
            .new_dataset::<i64>()
            .shape([10])
            .chunk([4])
            .create("line")
            .unwrap();
        line.write(&(100..110).collect::<Vec<i64>>()).unwrap();
        let mut refs: Vec<RegionRef> = selections()
            .into_iter()
            .map(|s| data.region(s).unwrap())
            .collect();
        refs.push(
            line.region_of_slice([ndarray::SliceInfoElem::Slice {
                start: 2,
                end: Some(9),
                step: 3,
            }])
            .unwrap(),
        );
        refs.push(RegionRef::null());
        assert!(
            data.region(Selection::Points {
                rank: 2,
                coords: vec![6, 0]
            })
            .is_err()
        );
        root.new_dataset::<RegionRef>()
            .shape([refs.len()])
            .create("regions")
            .unwrap()
            .write(&refs)
            .unwrap();
        g.write_attr("picked", &refs[..2]).unwrap();
        f.close().unwrap();

        let f = File::open(&path).unwrap();
        let mut ours = serde_json::Map::new();
        for (key, refs) in [
            (
                "/regions",
                f.dataset("regions")
                    .unwrap()
                    .read_vec::<Option<Reference>>()
                    .unwrap(),
            ),
            (
                "/g@picked",
                f.group("g")
                    .unwrap()
                    .attr("picked")
                    .unwrap()
                    .read_vec()
                    .unwrap(),
            ),
        ] {
            let d: Vec<Json> = refs.iter().map(|r| describe(&f, r, true)).collect();
            ours.insert(key.into(), json!(d));
        }
        let expected = Json::Object(ours);
        assert_eq!(expected["/regions"][6]["values"], json!([102, 105, 108]));
        assert_eq!(
            expected["/regions"][2]["values"],
            json!([0, 1, 18, 19, 22, 23])
        );
        for reference in Pinned::ALL {
            assert_eq!(
                libhdf5_sees(&reference.python(), &path),
                expected,
                "{bounds:?}, read by {reference:?}"
            );
        }
        if bounds == FormatBounds::Earliest {
            let ddl = h5dump(&[], &path).unwrap_or_else(|e| panic!("h5dump: {e}"));
            assert!(
                ddl.contains("REGION_TYPE POINT  (0,0), (5,3), (2,1)"),
                "{ddl}"
            );
        }
    }
}

/// Revised references written by h5 (object inline, region and attribute in the global heap,
/// null) resolve in libhdf5's C API to what was written, under both pinned references.
#[test]
fn written_revised_references_resolve_in_libhdf5() {
    let dir = tempfile::tempdir().unwrap();
    for bounds in [FormatBounds::V18, FormatBounds::V112, FormatBounds::V200] {
        let path = dir.path().join(format!("revised_{bounds:?}.h5"));
        let f = File::create_with(
            &path,
            &h5::FileAccess::default(),
            &h5::CreateOptions {
                bounds,
                ..Default::default()
            },
        )
        .unwrap();
        let root = f.root().unwrap();
        let data = root
            .new_dataset::<i32>()
            .shape([6, 4])
            .create("data")
            .unwrap();
        data.write(&(0..24).collect::<Vec<i32>>()).unwrap();
        data.write_attr("units", &[7i32]).unwrap();
        let g = root.create_group("g").unwrap();
        let mut refs: Vec<Option<Reference>> = vec![
            Some(Reference::object(data.address())),
            Some(Reference::object(g.address())),
            Some(Reference {
                object: data.address(),
                file: None,
                target: RefTarget::Attribute("units".into()),
            }),
            None,
        ];
        refs.extend(
            selections()
                .into_iter()
                .map(|s| Some(data.region_reference(s).unwrap())),
        );
        root.new_dataset::<Option<Reference>>()
            .shape([refs.len()])
            .create("revised")
            .unwrap()
            .write(&refs)
            .unwrap();
        g.write_attr("back", &refs[..3]).unwrap();
        f.close().unwrap();

        let f = File::open(&path).unwrap();
        let back = f
            .dataset("revised")
            .unwrap()
            .read_vec::<Option<Reference>>()
            .unwrap();
        // Below the 1.12 bound hyperslabs are stored as block lists (as libhdf5 stores them).
        if bounds >= FormatBounds::V112 {
            assert_eq!(back, refs, "{bounds:?}");
        }
        let mut expected = serde_json::Map::new();
        for (key, refs) in [
            ("/revised", back),
            (
                "/g@back",
                f.group("g")
                    .unwrap()
                    .attr("back")
                    .unwrap()
                    .read_vec()
                    .unwrap(),
            ),
        ] {
            let d: Vec<Json> = refs.iter().map(|r| describe(&f, r, false)).collect();
            expected.insert(key.into(), json!(d));
        }
        let expected = Json::Object(expected);
        assert_eq!(
            expected["/revised"][2],
            json!({"attribute": "units", "of": "/data"})
        );
        for reference in Pinned::ALL {
            assert_eq!(
                libhdf5_sees(&reference.python(), &path),
                expected,
                "{bounds:?}, read by {reference:?}"
            );
        }
    }
}
