//! Partial edge chunks stored without the filters (the layout flag libhdf5 sets for
//! `H5Pset_chunk_opts(dcpl, H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS)`): libhdf5 writes them raw and
//! decides by the chunk's place against the current extent, not by the filter mask, whether to
//! run the filters. h5 reads such datasets as libhdf5 does (before, the deflate edge chunks failed
//! as "bad zlib data", the fletcher32 one as a checksum mismatch, and the shuffle-only ones read
//! as wrong numbers without an error), and writes them as libhdf5 expects: an edge chunk raw, a
//! full one filtered, and a chunk that changes side when the extent changes re-encoded.
//! `scripts/edge_chunks.py` writes the file and reads it back, with libhdf5 1.14 and 2.0.

use h5_testkit::verify::{Reference, run_python_with};
use ndarray::SliceInfoElem;
use serde_json::Value;

const SCRIPT: &str = include_str!("scripts/edge_chunks.py");

/// Element size, chunk shape and filters of the script's datasets.
const LAYOUTS: [(&str, usize, &[u64], bool); 5] = [
    ("fixed_gzip", 4, &[5, 5], true),
    ("fixed_shuffle", 4, &[4, 4], false),
    ("fixed_fletcher", 8, &[3], false),
    ("earray", 8, &[4, 4], true),
    ("bt2", 2, &[8, 8], true),
];

fn describe(reference: Reference, mode: &str, path: &std::path::Path) -> Value {
    let out = run_python_with(reference, SCRIPT, &[mode.as_ref(), path.as_os_str()]);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn shape(v: &Value) -> Vec<usize> {
    v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

fn numbers(v: &Value) -> Vec<f64> {
    v["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// h5's values of dataset `name`, as f64.
fn h5_values(f: &h5::File, name: &str) -> Vec<f64> {
    let d = f.dataset(name).unwrap();
    match name {
        "fixed_gzip" => d
            .read::<f32>()
            .unwrap()
            .iter()
            .map(|&x| f64::from(x))
            .collect(),
        "fixed_shuffle" => d
            .read::<i32>()
            .unwrap()
            .iter()
            .map(|&x| f64::from(x))
            .collect(),
        "fixed_fletcher" => d.read::<i64>().unwrap().iter().map(|&x| x as f64).collect(),
        "earray" => d.read::<f64>().unwrap().iter().copied().collect(),
        "bt2" => d
            .read::<i16>()
            .unwrap()
            .iter()
            .map(|&x| f64::from(x))
            .collect(),
        _ => unreachable!(),
    }
}

/// Checks libhdf5's list of stored chunks of every dataset against the rule: a partial edge
/// chunk is stored raw (the chunk's bytes, mask 0); a full chunk of a compressing dataset is
/// stored compressed (these values compress).
fn edges_raw_and_full_chunks_filtered(want: &Value, when: &str) {
    for (name, elem, chunk, compresses) in LAYOUTS {
        let dims = shape(&want[name]);
        let raw = chunk.iter().product::<u64>() * elem as u64;
        let chunks = want[name]["chunks"].as_array().unwrap();
        assert!(!chunks.is_empty(), "{when}: {name}");
        let mut edges = 0;
        for c in chunks {
            let scaled: Vec<u64> = c[0]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            let (mask, size) = (c[1].as_u64().unwrap(), c[2].as_u64().unwrap());
            let edge = scaled
                .iter()
                .zip(chunk)
                .zip(&dims)
                .any(|((s, c), d)| (s + 1) * c > *d as u64);
            if edge {
                edges += 1;
                assert_eq!(
                    (mask, size),
                    (0, raw),
                    "{when}: {name} edge chunk {scaled:?}"
                );
            } else if compresses {
                assert!(
                    size < raw,
                    "{when}: {name} full chunk {scaled:?} is {size} bytes"
                );
            } else if name == "fixed_fletcher" {
                // The checksum's four bytes follow the values.
                assert_eq!(size, raw + 4, "{when}: {name} full chunk {scaled:?}");
            }
        }
        assert!(edges > 0, "{when}: {name} has no edge chunk");
    }
}

fn slice(start: usize, end: usize) -> SliceInfoElem {
    SliceInfoElem::Slice {
        start: start as isize,
        end: Some(end as isize),
        step: 1,
    }
}

#[test]
fn unfiltered_edge_chunks_of_libhdf5_read_and_write_as_libhdf5_expects() {
    for reference in Reference::ALL {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("edges.h5");
        let want = describe(reference, "write", &path);
        edges_raw_and_full_chunks_filtered(&want, "as libhdf5 wrote it");

        // Reading: every value as libhdf5 reads it.
        let f = h5::File::open(&path).unwrap();
        for (name, ..) in LAYOUTS {
            let d = f.dataset(name).unwrap();
            assert_eq!(d.shape(), shape(&want[name]), "{reference:?} {name}");
            assert_eq!(
                h5_values(&f, name),
                numbers(&want[name]),
                "{reference:?} {name}"
            );
        }
        drop(f);

        // Writing: edge and full chunks rewritten, one chunk made full by a growth without a
        // write, one made an edge chunk by a shrink.
        let mut expect: std::collections::BTreeMap<&str, Vec<f64>> = LAYOUTS
            .iter()
            .map(|(name, ..)| (*name, numbers(&want[*name])))
            .collect();
        let f = h5::File::open_rw(&path).unwrap();
        // fixed_gzip (12 x 6, chunks 5 x 5): rows 3..12, columns 2..6 across full and edge
        // chunks.
        let block: Vec<f32> = (0..36).map(|i| -(i as f32) - 0.25).collect();
        f.dataset("fixed_gzip")
            .unwrap()
            .write_slice(&block, [slice(3, 12), slice(2, 6)])
            .unwrap();
        let e = expect.get_mut("fixed_gzip").unwrap();
        for (i, v) in block.iter().enumerate() {
            e[(3 + i / 4) * 6 + 2 + i % 4] = f64::from(*v);
        }
        // fixed_shuffle: every chunk rewritten.
        let all: Vec<i32> = (0..91).map(|i| i * -37 + 11).collect();
        f.dataset("fixed_shuffle")
            .unwrap()
            .write_slice(&all, [slice(0, 13), slice(0, 7)])
            .unwrap();
        *expect.get_mut("fixed_shuffle").unwrap() = all.iter().map(|&x| f64::from(x)).collect();
        // fixed_fletcher: the edge chunk and a full one.
        let ff = f.dataset("fixed_fletcher").unwrap();
        ff.write_slice(&[99i64], [slice(6, 7)]).unwrap();
        ff.write_slice(&[-5i64], [slice(0, 1)]).unwrap();
        let e = expect.get_mut("fixed_fletcher").unwrap();
        e[6] = 99.0;
        e[0] = -5.0;
        // earray (10 x 6, chunks 4 x 4): grows to 12 rows, which makes the chunks of rows
        // 8..12 full without writing them: they must be stored filtered now.
        f.dataset("earray").unwrap().resize([12, 6]).unwrap();
        expect.get_mut("earray").unwrap().extend([0.0; 12]);
        // bt2 (19 x 21, chunks 8 x 8): shrinks to 12 rows, which makes the chunks of rows
        // 8..16 edge chunks without writing them: they must be stored raw now.
        f.dataset("bt2").unwrap().resize([12, 21]).unwrap();
        expect.get_mut("bt2").unwrap().truncate(12 * 21);
        f.close().unwrap();

        let got = describe(reference, "read", &path);
        edges_raw_and_full_chunks_filtered(&got, "after h5's writes");
        assert_eq!(shape(&got["earray"]), [12, 6], "{reference:?}");
        assert_eq!(shape(&got["bt2"]), [12, 21], "{reference:?}");
        let f = h5::File::open(&path).unwrap();
        for (name, values) in &expect {
            assert_eq!(
                &numbers(&got[*name]),
                values,
                "{reference:?}: libhdf5 reads {name}"
            );
            assert_eq!(
                &h5_values(&f, name),
                values,
                "{reference:?}: h5 reads {name}"
            );
        }
    }
}
