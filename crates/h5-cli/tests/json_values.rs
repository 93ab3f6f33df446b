//! `h5 dump --json` against the fixture manifest, value by value, for the fixtures of the
//! real-world classes (issue 13): variable-length data in every position, committed datatypes,
//! never-written chunked datasets, Blosc2, and the files HDF5 2.0 wrote (layout and datatype
//! version 5, version 1 VDS mapping lists, complex numbers). Every dataset and attribute whose
//! values h5py recorded is compared structurally through its JSON dtype (enum names against
//! h5py's integers, compounds by member, arrays and sequences element by element, floats
//! exactly, references by what libhdf5 resolved them to).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn dump_json(rel: &str) -> Value {
    let o = Command::new(env!("CARGO_BIN_EXE_h5"))
        .current_dir(workspace())
        .args(["dump", "--json", rel])
        .output()
        .expect("run h5");
    assert!(
        o.status.success(),
        "h5 dump --json {rel}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON")
}

/// A manifest number or float string against the JSON's number (or "nan"/"inf" string).
fn same_scalar(ours: &Value, theirs: &Value) -> bool {
    match (ours, theirs) {
        (Value::String(a), Value::String(b)) => {
            a == b || (a == "nan" && b == "nan") || b.parse::<f64>().ok() == a.parse::<f64>().ok()
        }
        (Value::Number(a), Value::String(b)) => {
            a.as_f64().is_some() && b.parse::<f64>().ok() == a.as_f64()
        }
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => a.as_u64() == b.as_u64() && a.as_f64() == b.as_f64(),
        },
        (Value::Number(a), Value::Bool(b)) => a.as_i64() == Some(i64::from(*b)),
        _ => false,
    }
}

/// `ours` (the JSON element) equals `theirs` (h5py's value in the manifest) for elements of
/// `dtype` (the JSON's dtype description).
fn same(ours: &Value, theirs: &Value, dtype: &Value) -> Result<(), String> {
    let fail = || Err(format!("{ours} != {theirs} ({dtype})"));
    match dtype.get("kind").and_then(Value::as_str) {
        Some("enum") => {
            let v = ours
                .as_str()
                .and_then(|n| dtype["members"].get(n))
                .unwrap_or(ours);
            if same_scalar(v, theirs) {
                Ok(())
            } else {
                fail()
            }
        }
        Some("compound") => {
            let fields = dtype["fields"].as_array().cloned().unwrap_or_default();
            let complex = ours.get("real").is_some() && ours.get("imag").is_some();
            if complex {
                let t = theirs.as_array().ok_or("complex as a pair")?;
                if t.len() == 2
                    && same_scalar(&ours["real"], &t[0])
                    && same_scalar(&ours["imag"], &t[1])
                {
                    return Ok(());
                }
                return fail();
            }
            for f in fields {
                let name = f["name"].as_str().unwrap_or_default();
                same(&ours[name], &theirs[name], &f["dtype"])
                    .map_err(|e| format!("member {name}: {e}"))?;
            }
            Ok(())
        }
        Some("array") | Some("vlen") => {
            let base = &dtype["base"];
            let o = ours.as_array().ok_or("a list")?;
            // Array elements are flat in the JSON, nested (one level per array dimension) in
            // the manifest.
            let levels = if dtype["kind"] == "array" {
                dtype["shape"].as_array().map_or(1, Vec::len)
            } else {
                1
            };
            let t = unnest(theirs, levels);
            if o.len() != t.len() {
                return fail();
            }
            o.iter().zip(&t).try_for_each(|(a, b)| same(a, b, base))
        }
        Some("vlen_string") => {
            if ours == theirs {
                Ok(())
            } else {
                fail()
            }
        }
        Some("reference") => {
            same_reference(ours, theirs).map_err(|e| format!("{e}: {ours} != {theirs}"))
        }
        _ => {
            if ours == theirs || same_scalar(ours, theirs) {
                Ok(())
            } else if let (Value::String(s), Value::Array(b)) = (ours, theirs) {
                // Not UTF-8: the manifest lists the bytes.
                let bytes: Vec<u8> = b
                    .iter()
                    .filter_map(|x| x.as_u64())
                    .map(|x| x as u8)
                    .collect();
                if String::from_utf8_lossy(&bytes) == *s {
                    Ok(())
                } else {
                    fail()
                }
            } else if let (Value::Object(o), Value::Array(t)) = (ours, theirs) {
                // HDF5 2.0 complex numbers (class 11): {"real", "imag"} against [re, im].
                match (o.get("real"), o.get("imag"), t.as_slice()) {
                    (Some(r), Some(i), [a, b]) if same_scalar(r, a) && same_scalar(i, b) => Ok(()),
                    _ => fail(),
                }
            } else {
                fail()
            }
        }
    }
}

/// A reference in the JSON (`null`, `{"object"}`, `{"attribute", "of"}`, `{"region_of",
/// "selection", "points" | "blocks"}`) against libhdf5's description in the manifest (the
/// region's element count and bounds computed from its points or blocks).
fn same_reference(ours: &Value, theirs: &Value) -> Result<(), String> {
    if ours.get("region_of").is_none() {
        return if ours == theirs {
            Ok(())
        } else {
            Err("differs".into())
        };
    }
    for k in ["region_of", "selection"] {
        if ours[k] != theirs[k] {
            return Err(format!("{k} differs"));
        }
    }
    let corners: Vec<(Vec<u64>, Vec<u64>)> = match ours["selection"].as_str() {
        Some("points") => serde_json::from_value::<Vec<Vec<u64>>>(ours["points"].clone())
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|p| (p.clone(), p))
            .collect(),
        Some("hyperslab") => {
            serde_json::from_value(ours["blocks"].clone()).map_err(|e| e.to_string())?
        }
        // "all" and "none" carry nothing more.
        _ => return Ok(()),
    };
    let n: u64 = corners
        .iter()
        .map(|(s, e)| s.iter().zip(e).map(|(a, b)| b - a + 1).product::<u64>())
        .sum();
    let rank = corners.first().map_or(0, |c| c.0.len());
    let lo: Vec<u64> = (0..rank)
        .map(|d| corners.iter().map(|c| c.0[d]).min().unwrap_or(0))
        .collect();
    let hi: Vec<u64> = (0..rank)
        .map(|d| corners.iter().map(|c| c.1[d]).max().unwrap_or(0))
        .collect();
    if theirs["npoints"] != n
        || theirs["bounds_start"] != serde_json::json!(lo)
        || theirs["bounds_end"] != serde_json::json!(hi)
    {
        return Err(format!("{n} points in {lo:?}-{hi:?}"));
    }
    Ok(())
}

/// The elements `levels` list levels down (`[[a, b], [c]]` one level down: `[a, b], [c]`).
fn unnest(v: &Value, levels: usize) -> Vec<Value> {
    let mut flat = vec![v.clone()];
    for _ in 0..levels {
        flat = flat
            .into_iter()
            .flat_map(|v| v.as_array().cloned().unwrap_or_default())
            .collect();
    }
    flat
}

/// Compares every element of `data` (flat, C order) with the manifest's nested values.
fn compare_values(what: &str, data: &Value, want: &Value, dtype: &Value, shape: &[u64]) -> usize {
    let data = data
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no data ({data})"));
    // Unnest the manifest's dataspace dimensions only (element lists stay lists).
    let flat = unnest(want, shape.len());
    assert_eq!(data.len(), flat.len(), "{what}: element count");
    for (i, (a, b)) in data.iter().zip(&flat).enumerate() {
        if let Err(e) = same(a, b, dtype) {
            panic!("{what}[{i}]: {e}");
        }
    }
    data.len()
}

#[test]
fn real_world_fixtures_match_h5py_value_by_value() {
    let manifest = h5_testkit::manifest();
    let mut checked = 0;
    let mut values = 0;
    for f in manifest.files.iter().filter(|f| {
        [
            "vlen_",
            "named_types_",
            "unwritten_",
            "blosc2_",
            "hdf5_2_",
            "references_",
        ]
        .iter()
        .any(|p| f.name.starts_with(p))
    }) {
        let rel = format!("fixtures/files/{}", f.name);
        let doc = dump_json(&rel);
        let objects = doc["objects"].as_array().unwrap();
        for obj in f.objects.iter().filter(|o| o.hard_link_of.is_none()) {
            let Some(ours) = objects.iter().find(|o| o["path"] == obj.path.as_str()) else {
                continue;
            };
            for a in &obj.attributes {
                let what = format!("{}{}@{}", f.name, obj.path, a.name);
                let Some(oa) = ours["attributes"].get(&a.name) else {
                    panic!("{what}: attribute missing from the JSON");
                };
                if let Some(v) = &a.value {
                    let shape = a.shape.clone().unwrap_or_default();
                    values += compare_values(&what, &oa["data"], v, &oa["dtype"], &shape);
                    checked += 1;
                }
            }
            if ours["kind"] != "dataset" {
                continue;
            }
            let what = format!("{}{}", f.name, obj.path);
            assert!(ours.get("error").is_none(), "{what}: {}", ours["error"]);
            if let Some(v) = &obj.values {
                let shape = obj.shape.clone().unwrap_or_default();
                values += compare_values(&what, &ours["data"], v, &ours["dtype"], &shape);
                checked += 1;
            } else if let Some(spots) = &obj.spot_values {
                let shape = obj.shape.clone().unwrap_or_default();
                let data = ours["data"].as_array().unwrap();
                for s in spots {
                    let i = s
                        .index
                        .iter()
                        .zip(&shape)
                        .fold(0u64, |acc, (&i, &d)| acc * d + i);
                    if let Err(e) = same(&data[i as usize], &s.value, &ours["dtype"]) {
                        panic!("{what}{:?}: {e}", s.index);
                    }
                    values += 1;
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 250, "{checked} datasets and attributes checked");
    assert!(values >= 5000, "{values} values checked");
}
