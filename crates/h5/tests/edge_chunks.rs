//! Partial edge chunks stored without the filters (the layout flag libhdf5 sets for
//! `H5Pset_chunk_opts(dcpl, H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS)`): libhdf5 writes them raw and
//! decides by the chunk's place against the current extent, not by the filter mask, whether to
//! run the filters. h5 reads such datasets as libhdf5 does (before, the deflate edge chunks failed
//! as "bad zlib data", the fletcher32 one as a checksum mismatch, and the shuffle-only ones read
//! as wrong numbers without an error), and writes them as libhdf5 expects: an edge chunk raw, a
//! full one filtered, and a chunk that changes side when the extent changes re-encoded.
//! h5 creates such datasets too (`DatasetBuilder::unfiltered_edge_chunks`), and its copy keeps
//! the option. `scripts/edge_chunks.py` writes the file and reads files back, with libhdf5 1.14
//! and 2.0.

use h5_testkit::verify::{Reference, run_python_with};
use ndarray::SliceInfoElem;
use serde_json::Value;

const SCRIPT: &str = include_str!("scripts/edge_chunks.py");

/// A dataset's name, element size, chunk shape and whether its filters compress.
type Layout = (&'static str, usize, &'static [u64], bool);

/// The script's datasets.
const LAYOUTS: [Layout; 5] = [
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

/// Checks libhdf5's list of stored chunks of every dataset of `layouts` against the rule: a
/// partial edge chunk is stored raw (the chunk's bytes, mask 0); a full chunk of a compressing
/// dataset is stored compressed (these values compress). libhdf5 reports the chunk option.
fn edges_raw_and_full_chunks_filtered(layouts: &[Layout], want: &Value, when: &str) {
    for &(name, elem, chunk, compresses) in layouts {
        assert_eq!(want[name]["chunk_opts"], 2, "{when}: {name}: chunk options");
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
        edges_raw_and_full_chunks_filtered(&LAYOUTS, &want, "as libhdf5 wrote it");

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
        edges_raw_and_full_chunks_filtered(&LAYOUTS, &got, "after h5's writes");
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
        drop(f);

        // h5's copy keeps the option (the chunks are written anew through it).
        let copy = dir.path().join("copy.h5");
        h5::copy::copy_path_in_source_format(&path, &copy, &Default::default(), &mut |_| {})
            .unwrap();
        let c = h5::File::open(&copy).unwrap();
        for (name, ..) in LAYOUTS {
            assert!(
                c.dataset(name).unwrap().unfiltered_edge_chunks(),
                "copy of {name}"
            );
        }
        drop(c);
        let copied = describe(reference, "read", &copy);
        edges_raw_and_full_chunks_filtered(&LAYOUTS, &copied, "in h5's copy");
        for (name, values) in &expect {
            assert_eq!(
                &numbers(&copied[*name]),
                values,
                "{reference:?}: copy of {name}"
            );
        }
    }
}

/// The datasets h5 creates with the option.
const CREATED: [Layout; 4] = [
    ("fixed", 4, &[5, 5], true),
    ("grow", 8, &[4, 4], true),
    ("two", 2, &[8, 8], true),
    ("early", 4, &[5, 5], true),
];

#[test]
fn datasets_h5_creates_with_unfiltered_edge_chunks_read_in_libhdf5() {
    for bounds in [
        h5::FormatBounds::default(),
        h5::FormatBounds::V114,
        h5::FormatBounds::LATEST,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("created.h5");
        let options = h5::CreateOptions {
            bounds,
            ..Default::default()
        };
        let f = h5::File::create_with(&path, &h5::FileAccess::default(), &options).unwrap();
        let fixed: Vec<f32> = (0..72).map(|i| i as f32 * 0.5).collect();
        let d = f
            .new_dataset::<f32>()
            .shape([12, 6])
            .chunk([5, 5])
            .deflate(6)
            .unfiltered_edge_chunks()
            .create("fixed")
            .unwrap();
        d.write_slice(&fixed, [slice(0, 12), slice(0, 6)]).unwrap();
        assert!(d.unfiltered_edge_chunks());
        // One unlimited dimension, grown and written past its old edge.
        let grow: Vec<f64> = (0..84).map(|i| f64::from(i) / 4.0).collect();
        let d = f
            .new_dataset::<f64>()
            .shape([10, 6])
            .max_shape([None, Some(6)])
            .chunk([4, 4])
            .shuffle()
            .deflate(6)
            .unfiltered_edge_chunks()
            .create("grow")
            .unwrap();
        d.write_slice(&grow[..60], [slice(0, 10), slice(0, 6)])
            .unwrap();
        d.resize([14, 6]).unwrap();
        d.write_slice(&grow[60..], [slice(10, 14), slice(0, 6)])
            .unwrap();
        // Two unlimited dimensions.
        let two: Vec<i16> = (0..399).map(|i| (i / 5) as i16).collect();
        f.new_dataset::<i16>()
            .shape([19, 21])
            .max_shape([None, None])
            .chunk([8, 8])
            .deflate(6)
            .unfiltered_edge_chunks()
            .create("two")
            .unwrap()
            .write_slice(&two, [slice(0, 19), slice(0, 21)])
            .unwrap();
        // Early allocation: chunks never written hold the fill value, raw at the edges.
        let d = f
            .new_dataset::<f32>()
            .shape([12, 6])
            .chunk([5, 5])
            .deflate(6)
            .fill_value(2.5)
            .alloc_time(h5::AllocTime::Early)
            .unfiltered_edge_chunks()
            .create("early")
            .unwrap();
        d.write_slice(&fixed[..30], [slice(0, 5), slice(0, 6)])
            .unwrap();
        f.close().unwrap();

        let mut early: Vec<f64> = fixed[..30].iter().map(|&x| f64::from(x)).collect();
        early.extend([2.5; 42]);
        let expect: [(&str, Vec<f64>); 4] = [
            ("fixed", fixed.iter().map(|&x| f64::from(x)).collect()),
            ("grow", grow.clone()),
            ("two", two.iter().map(|&x| f64::from(x)).collect()),
            ("early", early),
        ];
        // HDF5 2.0's layout message version 5 (filtered chunks under its bound) is read by
        // libhdf5 2.0 alone.
        let readers: &[Reference] = if bounds >= h5::FormatBounds::V200 {
            &[Reference::Hdf5v200]
        } else {
            &Reference::ALL
        };
        for &reference in readers {
            let got = describe(reference, "read", &path);
            edges_raw_and_full_chunks_filtered(&CREATED, &got, &format!("{bounds:?}"));
            for (name, values) in &expect {
                assert_eq!(
                    &numbers(&got[*name]),
                    values,
                    "{bounds:?} {reference:?}: {name}"
                );
            }
        }
        // A version 1 B-tree index cannot carry the option.
        let f = h5::File::open_rw(&path).unwrap();
        let refused = f
            .new_dataset::<f32>()
            .shape([4])
            .chunk([3])
            .deflate(1)
            .chunk_index(h5::ChunkIndexKind::BtreeV1)
            .unfiltered_edge_chunks()
            .create("refused");
        assert!(matches!(refused, Err(h5::Error::Invalid(_))), "{refused:?}");
    }
}
