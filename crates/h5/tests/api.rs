//! The API a Rust user reaches for on day one (issue 16): attributes built like datasets, any
//! `H5Type` read into ndarray arrays, writes from arrays of any memory layout with numeric
//! conversion, navigation (`File` as the root group, members, `link_exists`, walks with link
//! kinds, stored chunks, `append`), handles that see resizes made through other handles,
//! format bounds as a (low, high) pair, and errors naming the file and object. Files are read
//! back by h5py (which fails loudly when missing: run `scripts/setup-tools`).

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use h5::ndarray::{Array2, Array3, ShapeBuilder, arr1, arr2, s};
use h5::{FixedAscii, FormatBounds, H5Type, LinkKind, ObjectKind};
use h5_testkit::verify::run_python;

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    (dir, p)
}

/// What h5py prints for the Python expression `expr` over the open file `f` (JSON).
fn h5py(path: &Path, expr: &str) -> serde_json::Value {
    let code = format!(
        "import sys, json, h5py, numpy as np\n\
         def conv(v):\n\
         \x20   if isinstance(v, np.ndarray): return conv(v.tolist())\n\
         \x20   if isinstance(v, (list, tuple)): return [conv(x) for x in v]\n\
         \x20   if isinstance(v, bytes): return v.decode()\n\
         \x20   if isinstance(v, np.generic): return v.item()\n\
         \x20   return v\n\
         with h5py.File(sys.argv[1], 'r') as f:\n\
         \x20   print(json.dumps(conv({expr})))\n"
    );
    let out = run_python(&code, &[path]);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[derive(H5Type, Clone, Debug, PartialEq)]
#[repr(C)]
struct Sample {
    id: u32,
    value: f64,
    tag: FixedAscii<4>,
}

fn sample(i: u32) -> Sample {
    Sample {
        id: i,
        value: f64::from(i) / 2.0,
        tag: FixedAscii::new(&format!("s{i}")).unwrap(),
    }
}

#[test]
fn attributes_are_built_like_datasets_for_every_type() {
    let (_d, path) = tmp("attrs.h5");
    {
        let f = h5::File::create(&path).unwrap();
        let ds = f.new_dataset::<u8>().shape([1]).create("ds").unwrap();
        // n-dimensional numbers, written from a Fortran-order array.
        let grid = Array2::from_shape_vec((2, 3).f(), vec![1i32, 4, 2, 5, 3, 6]).unwrap();
        let a = ds.new_attr::<i32>().shape([2, 3]).create("grid").unwrap();
        assert_eq!(a.read_2d::<i32>().unwrap(), Array2::<i32>::zeros((2, 3)));
        a.write(&grid).unwrap();
        // The handle and a new one see the value.
        assert_eq!(
            a.read_2d::<i64>().unwrap(),
            arr2(&[[1i64, 2, 3], [4, 5, 6]])
        );
        assert_eq!(
            ds.attr("grid").unwrap().read::<i32>().unwrap().shape(),
            [2, 3]
        );
        // Strings, compounds, bools, sequences; a scalar without a shape.
        f.new_attr::<String>()
            .shape([2])
            .create("names")
            .unwrap()
            .write(&["α".to_owned(), "beta".to_owned()])
            .unwrap();
        let samples: Vec<Sample> = (0..4).map(sample).collect();
        f.new_attr::<Sample>()
            .shape([2, 2])
            .create("samples")
            .unwrap()
            .write(&samples)
            .unwrap();
        f.new_attr::<bool>()
            .create("flag")
            .unwrap()
            .write_scalar(&true)
            .unwrap();
        f.new_attr::<Vec<u16>>()
            .shape([2])
            .create("ragged")
            .unwrap()
            .write(&[vec![1u16], vec![2, 3]])
            .unwrap();
        // Conversion on write: i16 values into the f32 attribute; narrowing needs asking.
        let c = f.new_attr::<f32>().shape([2]).create("cal").unwrap();
        c.write(&[3i16, -4]).unwrap();
        assert!(matches!(
            c.write(&[0.1f64, 0.2]),
            Err(h5::Error::Convert(_))
        ));
        assert!(matches!(
            c.write(&[1.0f32, 2.0, 3.0]),
            Err(h5::Error::Invalid(_))
        ));
        // Creating an existing attribute is an error.
        assert!(matches!(
            f.new_attr::<u8>().create("flag"),
            Err(h5::Error::Exists(_))
        ));
        f.close().unwrap();
    }
    let f = h5::File::open(&path).unwrap();
    let names = f.attr("names").unwrap();
    assert_eq!(names.read_1d::<String>().unwrap().to_vec(), ["α", "beta"]);
    let s = f.attr("samples").unwrap().read_2d::<Sample>().unwrap();
    assert_eq!(s[[1, 0]], sample(2));
    assert!(f.attr("flag").unwrap().read_scalar::<bool>().unwrap());
    assert_eq!(
        f.attr("ragged").unwrap().read_vec::<Vec<u16>>().unwrap(),
        [vec![1], vec![2, 3]]
    );
    assert_eq!(
        f.attr("cal").unwrap().read_vec::<f32>().unwrap(),
        [3.0, -4.0]
    );
    assert_eq!(
        h5py(
            &path,
            "[f['ds'].attrs['grid'], list(f.attrs['names']), f.attrs['samples']['value'], \
             bool(f.attrs['flag']), [list(x) for x in f.attrs['ragged']], f.attrs['cal'], \
             str(f.attrs['cal'].dtype), f.attrs['samples'].shape]"
        ),
        serde_json::json!([
            [[1, 2, 3], [4, 5, 6]],
            ["α", "beta"],
            [[0.0, 0.5], [1.0, 1.5]],
            true,
            [[1], [2, 3]],
            [3.0, -4.0],
            "float32",
            [2, 2]
        ])
    );
}

#[test]
fn one_read_entry_point_for_every_type() {
    let (_d, path) = tmp("read.h5");
    let f = h5::File::create(&path).unwrap();
    let strings = f.new_dataset::<String>().shape([2, 2]).create("s").unwrap();
    strings
        .write(&arr2(&[
            ["a".to_owned(), "b".to_owned()],
            ["c".to_owned(), "d".to_owned()],
        ]))
        .unwrap();
    let a = strings.read::<String>().unwrap();
    assert_eq!(a.shape(), [2, 2]);
    assert_eq!(a[[1, 0]], "c");
    assert_eq!(
        strings
            .read_slice::<String>(s![.., 1])
            .unwrap()
            .into_raw_vec_and_offset()
            .0,
        ["b", "d"]
    );
    let samples: Vec<Sample> = (0..6).map(sample).collect();
    let c = f.new_dataset::<Sample>().shape([3, 2]).create("c").unwrap();
    c.write(&samples).unwrap();
    assert_eq!(c.read_2d::<Sample>().unwrap()[[2, 1]], sample(5));
    assert_eq!(
        c.read_points::<Sample>(&[vec![0, 1], vec![1, 0]]).unwrap(),
        [sample(1), sample(2)]
    );
    let scalar = f.new_dataset::<f64>().create("scalar").unwrap();
    scalar.write_scalar(&2.5).unwrap();
    assert_eq!(scalar.read::<f64>().unwrap().ndim(), 0);
    assert_eq!(scalar.read_scalar::<f64>().unwrap(), 2.5);
    // Numbers keep the fast path and the lossless rule.
    let n = f.new_dataset::<i32>().shape([3]).create("n").unwrap();
    n.write(&[1i32, -2, 3]).unwrap();
    assert_eq!(n.read_1d::<f64>().unwrap().to_vec(), [1.0, -2.0, 3.0]);
    assert!(matches!(n.read::<i16>(), Err(h5::Error::Convert(_))));
    assert_eq!(
        n.read_lossy::<i16>().unwrap().into_raw_vec_and_offset().0,
        [1, -2, 3]
    );
}

#[test]
fn writes_take_arrays_of_any_layout_and_convert_numbers() {
    let (_d, path) = tmp("write.h5");
    {
        let f = h5::File::create(&path).unwrap();
        let ds = f
            .new_dataset::<f32>()
            .shape([4, 6])
            .chunk([2, 4])
            .deflate(1)
            .create("x")
            .unwrap();
        let base = Array2::from_shape_fn((6, 4), |(i, j)| (10 * j + i) as i16);
        // A transposed view (not in C order) of i16 values, converted to f32.
        ds.write(base.t()).unwrap();
        // A strided view into a slice of the dataset.
        let big = Array3::from_shape_fn((4, 3, 2), |(i, j, k)| (100 + 6 * i + 2 * j + k) as u8);
        let strided = big.slice(s![..;2, .., 0]);
        assert!(!strided.is_standard_layout());
        ds.write_slice(strided, s![1..3, 3..]).unwrap();
        // A flat slice still fills a selection in C order.
        ds.write_slice(&[-1.0f32, -2.0], s![3, 4..]).unwrap();
        // f64 into f32: narrowing unless asked.
        assert!(matches!(
            ds.write_slice(&[0.5f64], s![0, 0..1]),
            Err(h5::Error::Convert(_))
        ));
        let wide = f.new_dataset::<f64>().shape([2]).create("wide").unwrap();
        wide.write(&[1u8, 200]).unwrap();
        let narrow = f.new_dataset::<u8>().shape([2]).create("narrow").unwrap();
        narrow.write_lossy(&[1.6f64, 300.0]).unwrap();
        // Shapes must match (or be a flat run of as many elements).
        assert!(matches!(
            ds.write(&Array2::<f32>::zeros((6, 4))),
            Err(h5::Error::Invalid(_))
        ));
        f.close().unwrap();
    }
    let mut want = Array2::from_shape_fn((4, 6), |(i, j)| (10 * i + j) as f32);
    want[[1, 3]] = 100.0;
    want[[1, 4]] = 102.0;
    want[[1, 5]] = 104.0;
    want[[2, 3]] = 112.0;
    want[[2, 4]] = 114.0;
    want[[2, 5]] = 116.0;
    want[[3, 4]] = -1.0;
    want[[3, 5]] = -2.0;
    let f = h5::File::open(&path).unwrap();
    assert_eq!(f.dataset("x").unwrap().read_2d::<f32>().unwrap(), want);
    let got = h5py(&path, "[f['x'][()], f['wide'][()], f['narrow'][()]]");
    let rows: Vec<Vec<f32>> = want.outer_iter().map(|r| r.to_vec()).collect();
    assert_eq!(got[0], serde_json::json!(rows));
    assert_eq!(got[1], serde_json::json!([1.0, 200.0]));
    // Floats into integers truncate toward zero and saturate, as libhdf5 converts.
    assert_eq!(got[2], serde_json::json!([1, 255]));
}

#[test]
fn navigation_walks_the_tree_with_link_kinds() {
    let (dir, path) = tmp("nav.h5");
    let other = dir.path().join("other.h5");
    h5::File::create(&other)
        .unwrap()
        .new_dataset::<u8>()
        .create_with_data("far", &[7u8])
        .unwrap();
    let f = h5::File::create(&path).unwrap();
    let a = f.create_group("a").unwrap();
    let b = a.create_group("b").unwrap();
    let d = a
        .new_dataset::<u16>()
        .create_with_data("d", &[1u16, 2])
        .unwrap();
    f.new_dataset::<u8>()
        .create_with_data("top", &[0u8])
        .unwrap();
    b.link_soft("to_d", "/a/d").unwrap();
    b.link_soft("dangling", "/nowhere").unwrap();
    b.link_external("ext", "other.h5", "/far").unwrap();
    b.link_hard("d_again", &d).unwrap();
    // A hard link back up makes a cycle the walk must not follow twice.
    b.link_hard_group("up", &a).unwrap();
    // `File` is the root group.
    assert_eq!(f.len().unwrap(), 2);
    assert!(!f.is_empty().unwrap());
    assert_eq!(f.member_names().unwrap(), ["a", "top"]);
    let groups: Vec<String> = f
        .groups()
        .unwrap()
        .iter()
        .map(|g| g.path().to_owned())
        .collect();
    assert_eq!(groups, ["/a"]);
    // Members reached through soft and external links are opened at their targets' paths.
    let sets: Vec<(String, bool)> = b
        .datasets()
        .unwrap()
        .iter()
        .map(|d| (d.path().to_owned(), d.filename() == Some(other.clone())))
        .collect();
    assert_eq!(
        sets,
        [
            ("/a/b/d_again".to_owned(), false),
            ("/far".to_owned(), true),
            ("/a/d".to_owned(), false)
        ]
    );
    assert!(f.link_exists("a/b/dangling").unwrap());
    assert!(f.link_exists("/a/d").unwrap());
    assert!(!f.link_exists("a/nope/x").unwrap());
    assert!(!f.link_exists("top/x").unwrap());
    assert!(!b.link_exists("x").unwrap());
    // A dataset path creates the groups on the way (as h5py does); require_group opens or makes.
    let deep = b.new_dataset::<u8>().shape([1]).create("p/q/r").unwrap();
    assert_eq!(deep.path(), "/a/b/p/q/r");
    assert_eq!(
        b.require_group("p/q").unwrap().address(),
        b.group("p/q").unwrap().address()
    );
    b.unlink("p").unwrap();
    let walk = f.walk().unwrap();
    let seen: Vec<(&str, Option<ObjectKind>)> =
        walk.iter().map(|e| (e.path.as_str(), e.object)).collect();
    assert_eq!(
        seen,
        [
            ("a", Some(ObjectKind::Group)),
            ("a/b", Some(ObjectKind::Group)),
            ("a/b/d_again", Some(ObjectKind::Dataset)),
            ("a/b/dangling", None),
            ("a/b/ext", None),
            ("a/b/to_d", None),
            ("a/b/up", Some(ObjectKind::Group)),
            ("a/d", Some(ObjectKind::Dataset)),
            ("top", Some(ObjectKind::Dataset)),
        ]
    );
    assert_eq!(walk[3].link.kind, LinkKind::Soft("/nowhere".into()));
    assert_eq!(
        walk[4].link.kind,
        LinkKind::External {
            file: "other.h5".into(),
            path: "/far".into()
        }
    );
    assert_eq!(walk[2].address, Some(d.address()));
    // Visiting stops when asked.
    let mut n = 0;
    f.visit(|_| {
        n += 1;
        if n == 2 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    assert_eq!(n, 2);
    // The walk of a subgroup names paths relative to it.
    let below: Vec<String> = a.walk().unwrap().into_iter().map(|e| e.path).collect();
    assert_eq!(below[0], "b");
    // h5py's `visit` names each object once, at the first path a depth-first walk in name
    // order meets: the walk's hard links, each address once.
    let mut seen_at = std::collections::HashSet::new();
    let first: Vec<&str> = walk
        .iter()
        .filter(|e| e.address.is_some_and(|a| seen_at.insert(a)))
        .map(|e| e.path.as_str())
        .collect();
    f.close().unwrap();
    let names = h5py(&path, "(lambda acc: (f.visit(acc.append), acc)[1])([])");
    assert_eq!(names, serde_json::json!(first));
}

#[test]
fn stored_chunks_are_listed_with_offset_size_mask_and_address() {
    let (_d, path) = tmp("chunks.h5");
    let f = h5::File::create(&path).unwrap();
    let ds = f
        .new_dataset::<u32>()
        .shape([5, 4])
        .chunk([2, 4])
        .deflate(6)
        .create("c")
        .unwrap();
    ds.write_slice(&[1u32; 8], s![0..2, ..]).unwrap();
    ds.write_slice(&[2u32; 4], s![4..5, ..]).unwrap();
    // A chunk stored with the compressor skipped (mask bit 0).
    // (u32 is stored in its native order: h5 writes the Rust type's own datatype.)
    ds.write_chunk(&[2, 0], 1, bytemuck::cast_slice(&[3u32; 8]))
        .unwrap();
    let chunks: Vec<h5::ChunkInfo> = ds.iter_chunks().unwrap().collect();
    let offsets: Vec<Vec<u64>> = chunks.iter().map(|c| c.offset.clone()).collect();
    assert_eq!(offsets, [vec![0, 0], vec![2, 0], vec![4, 0]]);
    assert_eq!(chunks[1].filter_mask, 1);
    assert_eq!(chunks[1].size, 32);
    assert_eq!(chunks[0].filter_mask, 0);
    assert_eq!(ds.num_chunks().unwrap(), 3);
    f.close().unwrap();
    // The addresses and sizes are where the stored images are.
    let f = h5::File::open(&path).unwrap();
    let ds = f.dataset("c").unwrap();
    let bytes = std::fs::read(&path).unwrap();
    for c in ds.iter_chunks().unwrap() {
        let (mask, image) = ds.read_chunk(&c.offset).unwrap().unwrap();
        assert_eq!(mask, c.filter_mask);
        let at = c.address as usize;
        assert_eq!(&bytes[at..at + c.size as usize], image.as_slice());
    }
    let info = h5py(
        &path,
        "[[list(i.chunk_offset), i.filter_mask, i.byte_offset, i.size] for i in \
         (f['c'].id.get_chunk_info(k) for k in range(f['c'].id.get_num_chunks()))]",
    );
    let ours: Vec<serde_json::Value> = ds
        .iter_chunks()
        .unwrap()
        .map(|c| serde_json::json!([c.offset, c.filter_mask, c.address, c.size]))
        .collect();
    assert_eq!(info, serde_json::json!(ours));
    // Other layouts have none.
    let (_d2, p2) = tmp("flat.h5");
    let g = h5::File::create(&p2).unwrap();
    let flat = g
        .new_dataset::<u8>()
        .create_with_data("flat", &[1u8])
        .unwrap();
    assert_eq!(flat.iter_chunks().unwrap().count(), 0);
}

#[test]
fn append_and_resize_are_seen_through_every_handle() {
    let (_d, path) = tmp("append.h5");
    {
        let f = h5::File::create(&path).unwrap();
        let series = f
            .new_dataset::<f64>()
            .shape([0, 2])
            .max_shape([None, Some(2)])
            .chunk([16, 2])
            .create("series")
            .unwrap();
        let other = f.dataset("series").unwrap();
        series.append(&[1.0, 2.0]).unwrap();
        assert_eq!(other.shape(), [1, 2]);
        other.append(&arr2(&[[3.0, 4.0], [5.0, 6.0]])).unwrap();
        assert_eq!(series.shape(), [3, 2]);
        // No `&mut` needed; the first handle sees the second one's resize.
        other.resize([4, 2]).unwrap();
        assert_eq!(series.shape(), [4, 2]);
        assert_eq!(series.size(), 8);
        assert_eq!(series.read_2d::<f64>().unwrap()[[2, 1]], 6.0);
        assert!(matches!(
            series.append(&arr1(&[1.0, 2.0, 3.0])),
            Err(h5::Error::Invalid(_))
        ));
        // A 1-D series grows by single values too.
        let log = f
            .new_dataset::<i64>()
            .shape([0])
            .max_shape([None])
            .chunk([8])
            .create("log")
            .unwrap();
        for i in 0..20i64 {
            log.append(&arr1(&[i])).unwrap();
        }
        log.append(&[20i64, 21]).unwrap();
        f.close().unwrap();
    }
    assert_eq!(
        h5py(
            &path,
            "[f['series'][()], f['series'].shape, int(f['log'][-1]), len(f['log'])]"
        ),
        serde_json::json!([
            [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [0.0, 0.0]],
            [4, 2],
            21,
            22
        ])
    );
}

#[test]
fn format_bounds_are_a_low_high_pair() {
    let (_d, path) = tmp("bounds.h5");
    // The default: HDF5 2.0's (V18, LATEST).
    let opts = h5::CreateOptions::default();
    assert_eq!(
        (opts.bounds, opts.high),
        (FormatBounds::V18, FormatBounds::LATEST)
    );
    let f = h5::File::create(&path).unwrap();
    assert_eq!(f.superblock_version(), 2);
    drop(f);
    // Low above high, or high below V18, is refused.
    for (low, high) in [
        (FormatBounds::V110, FormatBounds::V18),
        (FormatBounds::Earliest, FormatBounds::Earliest),
    ] {
        let r = h5::File::create_with(
            &path,
            &h5::FileAccess::default(),
            &h5::CreateOptions::with_bounds(low, high),
        );
        assert!(matches!(r, Err(h5::Error::Invalid(_))), "{low:?} {high:?}");
    }
    // (Earliest, V18): earliest formats, and nothing newer than HDF5 1.8 reads.
    let f = h5::File::create_with(
        &path,
        &h5::FileAccess::default(),
        &h5::CreateOptions::with_bounds(FormatBounds::Earliest, FormatBounds::V18),
    )
    .unwrap();
    assert_eq!(f.superblock_version(), 0);
    let fixed = f
        .new_dataset::<u8>()
        .shape([8])
        .chunk([4])
        .chunk_index(h5::ChunkIndexKind::FixedArray)
        .create("fa");
    assert!(matches!(fixed, Err(h5::Error::Unsupported(_))));
    f.new_dataset::<u8>()
        .shape([8])
        .chunk([4])
        .create("bt")
        .unwrap()
        .write(&[1u8; 8])
        .unwrap();
    f.close().unwrap();
    // The same explicit index is allowed when the high bound is 1.10 or later.
    let f = h5::File::create_with(
        &path,
        &h5::FileAccess::default(),
        &h5::CreateOptions::with_bounds(FormatBounds::Earliest, FormatBounds::V110),
    )
    .unwrap();
    f.new_dataset::<u8>()
        .shape([8])
        .chunk([4])
        .chunk_index(h5::ChunkIndexKind::FixedArray)
        .create("fa")
        .unwrap()
        .write(&[2u8; 8])
        .unwrap();
    f.close().unwrap();
    assert_eq!(h5py(&path, "f['fa'][()]"), serde_json::json!(vec![2; 8]));
}

#[test]
fn errors_name_the_file_and_object() {
    let (_d, path) = tmp("errors.h5");
    {
        let f = h5::File::create(&path).unwrap();
        f.new_dataset::<u32>()
            .shape([64])
            .chunk([64])
            .deflate(1)
            .create("z")
            .unwrap()
            .write(&vec![5u32; 64])
            .unwrap();
        f.close().unwrap();
    }
    // Damage the one compressed chunk: the read error names the file and the dataset.
    let f = h5::File::open(&path).unwrap();
    let c = f
        .dataset("z")
        .unwrap()
        .iter_chunks()
        .unwrap()
        .next()
        .unwrap();
    drop(f);
    let mut bytes = std::fs::read(&path).unwrap();
    for b in &mut bytes[c.address as usize..(c.address + c.size) as usize] {
        *b = 0xff;
    }
    std::fs::write(&path, &bytes).unwrap();
    let f = h5::File::open(&path).unwrap();
    let e = f.dataset("z").unwrap().read_vec::<u32>().unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, h5::Error::Context { .. }), "{e:?}");
    assert!(matches!(e.inner(), h5::Error::Chunks(_)), "{e:?}");
    assert!(msg.contains("errors.h5") && msg.contains("/z"), "{msg}");
    // Errors a caller acts on stay matchable and name the path.
    match f.group("nope/deeper") {
        Err(h5::Error::NotFound(p)) => assert_eq!(p, "/nope"),
        other => panic!("{other:?}"),
    }
    // Every type an error exposes is reachable from `h5`.
    let described = |e: &h5::Error| -> &'static str {
        match e.inner() {
            h5::Error::Format(h5::error::FormatError::Corrupted { .. }) => "corrupted",
            h5::Error::Chunks(h5::error::ChunkCacheError::Layout { .. }) => "layout",
            h5::Error::Io(h5::error::IoError::Open { .. }) => "open",
            h5::Error::Convert(h5::error::ConvertError::Lossy { .. }) => "lossy",
            _ => "other",
        }
    };
    assert_eq!(described(&e), "layout");
    let missing = h5::File::open(path.with_file_name("missing.h5")).unwrap_err();
    assert_eq!(described(&missing), "open");
    assert!(missing.to_string().contains("missing.h5"), "{missing}");
}
