//! Virtual datasets with unlimited mappings, sized by their sources as libhdf5's default view
//! sizes them, and virtual datasets larger than one of h5's virtual chunks:
//! `scripts/vds_unlimited.py` (h5py with libhdf5 1.14, then with libhdf5 2.0) writes the sources
//! and the virtual datasets, changes the sources between phases, and prints what libhdf5 reads of
//! each virtual dataset; h5 must read the same shapes and values after each change.

use std::path::Path;

use h5_testkit::verify::Reference;
use serde_json::Value;

const SCRIPT: &str = include_str!("scripts/vds_unlimited.py");
const NAMES: [&str; 6] = [
    "concat",
    "interleave",
    "strided_blocks",
    "printf",
    "printf_local",
    "printf_many",
];

/// Runs the script's `phase` in `dir` with `reference`'s libhdf5; its reading of every virtual
/// dataset.
fn libhdf5(reference: Reference, dir: &Path, phase: &str) -> Value {
    let out =
        h5_testkit::verify::run_python_with(reference, SCRIPT, &[dir.as_os_str(), phase.as_ref()]);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn shape_of(v: &Value) -> Vec<usize> {
    v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

fn values_of(v: &Value) -> Vec<i32> {
    v["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap() as i32)
        .collect()
}

/// Every virtual dataset of `dir`/vds_unlim.h5, opened anew, reads as libhdf5 read it.
fn same_as_libhdf5(dir: &Path, want: &Value) {
    let file = h5::File::open(dir.join("vds_unlim.h5")).unwrap();
    for name in NAMES {
        let d = file.dataset(name).unwrap();
        assert_eq!(d.shape(), shape_of(&want[name]), "shape of {name}");
        let got: Vec<i32> = d.read::<i32>().unwrap().iter().copied().collect();
        assert_eq!(got, values_of(&want[name]), "values of {name}");
    }
}

#[test]
fn unlimited_and_printf_mappings_are_sized_by_their_sources_as_libhdf5_sizes_them() {
    for reference in Reference::ALL {
        sized_by_sources(reference);
    }
}

fn sized_by_sources(reference: Reference) {
    let dir = tempfile::tempdir().unwrap();
    let made = libhdf5(reference, dir.path(), "make");
    // What libhdf5 makes of the sources (checked here so that a change of the script shows):
    // src0 has 3 rows, src1 5, src2 2; three printf sources of 2 rows; two local parts.
    assert_eq!(shape_of(&made["concat"]), [3, 4]);
    // Row 3k + i of the interleaving comes from src{i}: src1's 5th row lands at row 13.
    assert_eq!(shape_of(&made["interleave"]), [14, 4]);
    // Blocks of 2 rows at rows 1, 4, 7: src1's 5 rows end in the third block's first row.
    assert_eq!(shape_of(&made["strided_blocks"]), [8, 4]);
    assert_eq!(shape_of(&made["printf"]), [6, 4]);
    assert_eq!(shape_of(&made["printf_local"]), [2, 4]);
    // 150 sources: more than h5 keeps open at once.
    assert_eq!(shape_of(&made["printf_many"]), [150, 4]);
    same_as_libhdf5(dir.path(), &made);

    // A handle opened before the sources change sees them after `refresh`.
    let file = h5::File::open(dir.path().join("vds_unlim.h5")).unwrap();
    let concat = file.dataset("concat").unwrap();
    let grown = libhdf5(reference, dir.path(), "grow");
    assert_eq!(shape_of(&grown["concat"]), [5, 4]);
    assert_eq!(shape_of(&grown["printf"]), [8, 4]);
    assert_eq!(concat.shape(), [3, 4]);
    concat.refresh().unwrap();
    assert_eq!(concat.shape(), [5, 4]);
    let got: Vec<i32> = concat.read::<i32>().unwrap().iter().copied().collect();
    assert_eq!(got, values_of(&grown["concat"]));
    drop(concat);
    drop(file);
    same_as_libhdf5(dir.path(), &grown);

    // A missing printf source ends the printf mapping there (libhdf5's default gap of 0).
    let gap = libhdf5(reference, dir.path(), "gap");
    assert_eq!(shape_of(&gap["printf"]), [2, 4]);
    same_as_libhdf5(dir.path(), &gap);
}

fn le_bytes(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Reads virtual datasets larger than one of h5's virtual chunks (about 1 MiB: a 3000 x 700
/// grid of five mappings of several shapes, a 4 x 600 x 600 cube whose planes are split) and
/// one of 100000 x 100000 elements (40 GB if it were built whole), whole and in parts, as
/// libhdf5 reads them.
#[test]
fn virtual_datasets_are_read_chunk_by_chunk_as_libhdf5_reads_them() {
    for reference in Reference::ALL {
        read_by_chunk(reference);
    }
}

fn read_by_chunk(reference: Reference) {
    let dir = tempfile::tempdir().unwrap();
    let want = libhdf5(reference, dir.path(), "shapes");
    let file = h5::File::open(dir.path().join("vds_shapes.h5")).unwrap();
    // Sources of other numeric types, converted as libhdf5 converts them (widening exactly;
    // narrowing saturates, floats truncate toward zero, NaN gives 0).
    let as_f64 = |v: &Value| -> Vec<f64> {
        v["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let widened = file.dataset("widened").unwrap();
    let got: Vec<f64> = widened.read::<f64>().unwrap().iter().copied().collect();
    assert_eq!(got, as_f64(&want["widened"]), "widened");
    let narrowed = file.dataset("narrowed").unwrap();
    let got: Vec<f64> = narrowed
        .read::<i8>()
        .unwrap()
        .iter()
        .map(|&v| f64::from(v))
        .collect();
    assert_eq!(got, as_f64(&want["narrowed"]), "narrowed");
    for name in ["grid", "cube", "big"] {
        let w = &want[name];
        let d = file.dataset(name).unwrap();
        assert_eq!(d.shape(), shape_of(w), "shape of {name}");
        if let Some(sum) = w.get("sha256") {
            let all: Vec<i32> = d.read::<i32>().unwrap().iter().copied().collect();
            assert_eq!(
                h5_testkit::sha256_hex(&le_bytes(&all)),
                sum.as_str().unwrap(),
                "whole {name}"
            );
        }
        for part in w["slices"].as_array().unwrap() {
            let sel: Vec<ndarray::SliceInfoElem> = part["sel"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    let v: Vec<isize> = s
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_i64().unwrap() as isize)
                        .collect();
                    ndarray::SliceInfoElem::Slice {
                        start: v[0],
                        end: Some(v[1]),
                        step: v[2],
                    }
                })
                .collect();
            let got: Vec<i32> = d.read_slice::<i32>(&sel).unwrap().iter().copied().collect();
            assert_eq!(
                h5_testkit::sha256_hex(&le_bytes(&got)),
                part["sha256"].as_str().unwrap(),
                "{name}{:?}",
                part["sel"]
            );
        }
    }
}
