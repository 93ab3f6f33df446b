//! The public read API over the fixture corpus (files written by h5py / libhdf5 1.14.4).

use h5::{File, LinkKind, ObjectKind};
use ndarray::{SliceInfoElem, arr2};

fn open(name: &str) -> File {
    File::open(h5_testkit::fixture_path(name)).unwrap()
}

fn sl(start: isize, end: Option<isize>, step: isize) -> SliceInfoElem {
    SliceInfoElem::Slice { start, end, step }
}

#[test]
fn numbers_of_every_width_and_order_convert_losslessly() {
    for name in ["dtypes_latest.h5", "dtypes_earliest.h5"] {
        let f = open(name);
        for p in ["i2_be", "i2_le"] {
            let v = f.dataset(p).unwrap().read_1d::<i64>().unwrap();
            assert_eq!(v.to_vec(), [-32768, -1, 0, 1, 32767], "{name}:{p}");
        }
        let v = f.dataset("u8_be").unwrap().read_1d::<u64>().unwrap();
        assert_eq!(v.to_vec(), [0, 1, 0, 1, u64::MAX]);
        let v = f.dataset("f2_be").unwrap().read_1d::<f32>().unwrap();
        assert_eq!(&v.to_vec()[..5], &[0.0, -0.0, 1.0, -2.5, 65504.0]);
        // i4 -> i2 would lose data: refused unless asked.
        assert!(matches!(
            f.dataset("i4_le").unwrap().read::<i16>(),
            Err(h5::Error::Convert(_))
        ));
        let sat = f.dataset("i4_le").unwrap().read_lossy::<i16>().unwrap();
        assert_eq!(sat.as_slice().unwrap(), &[i16::MIN, -1, 0, 1, i16::MAX]);
        let cube = f.dataset("i4_3d").unwrap();
        assert_eq!(cube.shape(), [2, 3, 4]);
        let a = cube.read::<i32>().unwrap();
        assert_eq!(a[[1, 2, 3]], 23);
    }
}

#[test]
fn slices_and_points_select_like_numpy() {
    let f = open("dtypes_latest.h5");
    let d = f.dataset("ref_target").unwrap(); // 4x5, values 0..20
    let s = d
        .read_slice::<i32>([sl(1, Some(4), 2), sl(-3, None, 1)])
        .unwrap();
    assert_eq!(s.shape(), [2, 3]);
    assert_eq!(
        s.into_dimensionality::<ndarray::Ix2>().unwrap(),
        arr2(&[[7, 8, 9], [17, 18, 19]])
    );
    let row = d.read_slice::<i32>([SliceInfoElem::Index(2)]).unwrap();
    assert_eq!(row.as_slice().unwrap(), &[10, 11, 12, 13, 14]);
    let pts = d
        .read_points::<i32>(&[vec![3, 4], vec![0, 0], vec![3, 4]])
        .unwrap();
    assert_eq!(pts, [19, 0, 19]);
    assert!(d.read_slice::<i32>([sl(0, None, -1)]).is_err());
}

#[test]
fn strings_fixed_and_variable() {
    let f = open("dtypes_latest.h5");
    assert_eq!(
        f.dataset("str_vlen_utf8").unwrap().read_strings().unwrap(),
        ["grüß", "", "日本語", "😀"]
    );
    assert_eq!(
        f.dataset("str_fixed_spacepad_ascii")
            .unwrap()
            .read_strings()
            .unwrap(),
        ["abc", "", "hello", "fullsize"]
    );
    assert!(f.dataset("str_vlen_utf8").unwrap().read::<f64>().is_err());
}

#[test]
fn groups_links_and_attributes() {
    let f = open("groups_old.h5");
    let root = f.root().unwrap();
    let links = root.links().unwrap();
    let ext = links.iter().find(|l| l.name == "ext_link").unwrap();
    assert!(matches!(&ext.kind, LinkKind::External { file, .. } if file == "external_target.h5"));
    assert!(matches!(
        links
            .iter()
            .find(|l| l.name == "soft_to_leaf")
            .unwrap()
            .kind,
        LinkKind::Soft(_)
    ));
    assert_eq!(root.kind_of("many").unwrap(), ObjectKind::Group);
    assert_eq!(f.group("many").unwrap().member_names().unwrap().len(), 70);
    assert!(matches!(
        f.dataset("many"),
        Err(h5::Error::WrongKind { .. })
    ));
    assert!(matches!(f.group("nope"), Err(h5::Error::NotFound(_))));

    let f = open("attributes.h5");
    let g = f.group("compact_attrs").unwrap();
    assert_eq!(
        g.attr("a_first").unwrap().read_scalar::<f32>().unwrap(),
        1.0
    );
    assert_eq!(g.attr("c_str").unwrap().read_strings().unwrap(), ["x"]);
    let d = f.dataset("dset_dense_attrs").unwrap();
    let names = d.attr_names().unwrap();
    assert!(names.len() > 8, "{names:?}");
    assert_eq!(d.attr("attr03").unwrap().read_scalar::<i64>().unwrap(), 144);
    assert_eq!(
        d.attr("attr03").unwrap().read_scalar::<i64>().unwrap(),
        3 * 3 * 16
    );
    assert_eq!(
        f.dataset("dset_compact_attrs")
            .unwrap()
            .attr("units")
            .unwrap()
            .read_strings()
            .unwrap(),
        ["m/s"]
    );
}

#[test]
fn layouts_filters_and_cache_statistics() {
    let f = open("layouts_latest.h5");
    let fa = f.dataset("fixed_array_gzip").unwrap();
    assert_eq!(fa.layout_name(), "chunked");
    assert_eq!(fa.filters()[0].id, 1);
    assert!(fa.chunk().is_some());
    let all = fa.read::<f32>().unwrap();
    assert_eq!(all.len(), 1000);
    let ea = f.dataset("extensible_array").unwrap();
    assert_eq!(ea.maxshape(), [None]);
    let both = f.read_many_raw(&[&fa, &ea]).unwrap();
    assert_eq!(both[0].len(), 4000);
    assert_eq!(both[1], ea.read_raw().unwrap());
    let st = f.chunk_cache_stats().unwrap();
    assert!(st.hits > 0 && st.misses > 0, "{st}");
    let m = f.metadata_cache_stats().unwrap();
    let hits: u64 = m.per_class.iter().map(|c| c.hits).sum();
    assert!(hits > 0);
}

#[test]
fn files_are_shared_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<File>();
    send_sync::<h5::Dataset>();
    let f = open("layouts_latest.h5");
    let want = f.dataset("fixed_array_paged").unwrap().read_raw().unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            let f = f.clone();
            let want = &want;
            s.spawn(move || {
                let d = f.dataset("fixed_array_paged").unwrap();
                assert_eq!(&d.read_raw().unwrap(), want);
            });
        }
    });
}

#[test]
fn compound_enum_array_vlen_and_reference_values() {
    use h5::Value;
    let f = open("dtypes_latest.h5");
    let v = f.dataset("compound_packed").unwrap().read_values().unwrap();
    assert_eq!(
        v[1],
        Value::Compound(vec![
            ("x".into(), Value::UInt(4)),
            ("y".into(), Value::Int(5)),
            ("z".into(), Value::Float(-6.25)),
        ])
    );
    let v = f.dataset("compound_nested").unwrap().read_values().unwrap();
    let Value::Compound(m) = &v[0] else {
        panic!("{v:?}")
    };
    assert_eq!(m[0], ("id".into(), Value::UInt(0)));
    assert!(matches!(&m[2].1, Value::List(a) if a.len() == 6));
    assert_eq!(m[4], ("be".into(), m[4].1.clone()));
    let v = f
        .dataset("compound_vlen_members")
        .unwrap()
        .read_values()
        .unwrap();
    assert_eq!(
        v[0],
        Value::Compound(vec![
            ("n".into(), Value::Int(1)),
            ("s".into(), Value::String("one".into())),
            ("v".into(), Value::List(vec![Value::Int(1)])),
        ])
    );
    let v = f.dataset("vlen_i4").unwrap().read_values().unwrap();
    assert_eq!(v[1], Value::List(vec![]));
    assert_eq!(v[2], Value::List(vec![Value::Int(-5)]));
    let v = f.dataset("bool").unwrap().read_values().unwrap();
    assert_eq!(
        v,
        [
            Value::Enum("TRUE".into()),
            Value::Enum("FALSE".into()),
            Value::Enum("TRUE".into())
        ]
    );
    // h5py stores complex numbers as a compound {r, i} (HDF5 1.14 has no complex class).
    let v = f.dataset("c8_be").unwrap().read_values().unwrap();
    assert_eq!(
        v[1],
        Value::Compound(vec![
            ("r".into(), Value::Float(-0.5)),
            ("i".into(), Value::Float(-0.25)),
        ])
    );
    let refs = f.dataset("ref_object").unwrap().read_values().unwrap();
    let target = f.dataset("ref_target").unwrap();
    let m = h5_testkit::manifest();
    let addr = m
        .file("dtypes_latest.h5")
        .unwrap()
        .object("/ref_target")
        .unwrap()
        .addr;
    assert_eq!(refs[1], Value::ObjectRef(addr));
    assert_eq!(refs[2], Value::ObjectRef(None));
    assert_eq!(target.shape(), [4, 5]);
}

/// A null dataspace has no elements: size 0 and nothing read; a scalar has one.
#[test]
fn null_and_scalar_dataspaces() {
    let f = open("empty_scalar.h5");
    let m = h5_testkit::manifest();
    let fm = m.file("empty_scalar.h5").unwrap();
    let mut nulls = 0;
    for o in fm.datasets() {
        let d = f.dataset(&o.path).unwrap();
        match o.dataspace {
            Some(h5_testkit::DataspaceKind::Null) => {
                assert!(d.is_null());
                assert_eq!(d.size(), 0, "{}", o.path);
                assert!(d.read_raw().unwrap().is_empty());
                nulls += 1;
            }
            Some(h5_testkit::DataspaceKind::Scalar) => assert_eq!(d.size(), 1, "{}", o.path),
            _ => {}
        }
    }
    assert!(nulls >= 1);
}
