//! The raw element API (`h5/src/raw.rs`): datasets of any datatype written and read as
//! file-type bytes by hyperslab, attributes from bytes, hard links to groups, committed datatypes;
//! checked by h5 and h5py.

use h5_testkit::verify::{AttrExpect, DatasetExpect, Expectations, check_with_h5py, run_python};
use ndarray::SliceInfoElem as S;
use serde_json::json;

fn rows(a: usize, b: usize) -> [S; 1] {
    [S::Slice {
        start: a as isize,
        end: Some(b as isize),
        step: 1,
    }]
}

#[test]
fn raw_datasets_attributes_and_group_links() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("raw.h5");
    let values: Vec<i32> = (0..40).map(|i| i * 3 - 7).collect();
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    {
        let f = h5::File::create(&path).expect("create");
        let root = f.root().expect("root");
        let dt = <i32 as h5::H5Type>::h5_type();
        let ds = root
            .new_dataset_raw(dt.clone())
            .shape([4, 10])
            .max_shape([None, Some(10)])
            .chunk([3, 4])
            .filter(&h5::FilterInfo {
                id: 1,
                name: None,
                params: vec![6],
                optional: false,
            })
            .fill_value_raw((-1i32).to_le_bytes().to_vec())
            .create("x")
            .expect("dataset");
        // Two row blocks, the second first.
        ds.write_raw_slice(&bytes[80..], rows(2, 4))
            .expect("rows 2..4");
        ds.write_raw_slice(&bytes[..80], rows(0, 2))
            .expect("rows 0..2");
        assert!(ds.write_raw_slice(&bytes[..4], rows(0, 2)).is_err());
        assert!(ds.write_raw(&bytes[..8]).is_err());
        assert_eq!(ds.read_raw_slice(rows(1, 3)).expect("read"), bytes[40..120]);
        assert_eq!(
            ds.read_raw_slice(rows(2, 2)).expect("empty"),
            Vec::<u8>::new()
        );
        let c = root
            .new_dataset_raw(dt.clone())
            .shape([2])
            .create("c")
            .expect("contiguous");
        c.write_raw(&bytes[..8]).expect("write");
        assert!(
            root.new_dataset_raw(dt.clone())
                .shape([2])
                .max_shape([None])
                .create("bad")
                .is_err()
        );
        root.write_attr_raw("a", &dt, Some(&[2]), &bytes[..8])
            .expect("attr");
        ds.write_attr_raw("s", &dt, None, &bytes[4..8])
            .expect("scalar attr");
        assert!(
            root.write_attr_raw("bad", &dt, Some(&[3]), &bytes[..8])
                .is_err()
        );
        let g = f.create_group("g").expect("group");
        root.link_hard_group("g2", &g)
            .expect("hard link to a group");
        let t = g.commit_datatype("t", &dt).expect("commit");
        assert_eq!(t.dtype().expect("dtype"), dt);
        root.link_hard_datatype("t2", &t)
            .expect("hard link to a datatype");
        t.write_attr_raw("on_type", &dt, None, &bytes[..4])
            .expect("attr");
        assert!(root.named_datatype("x").is_err());
        let e = root
            .new_dataset_raw(dt.clone())
            .create_null("empty")
            .expect("null dataset");
        assert!(e.is_null() && e.read_raw().expect("read").is_empty());
        root.write_attr_raw("none", &dt, None, &[])
            .expect("null attribute");
        f.close().expect("close");
    }
    let f = h5::File::open(&path).expect("open");
    assert_eq!(f.dataset("x").expect("x").read_raw().expect("raw"), bytes);
    assert_eq!(
        f.group("g").expect("g").address(),
        f.group("g2").expect("g2").address()
    );
    let exp = Expectations::new()
        .dataset(
            "/x",
            DatasetExpect::new("<i4", &[4, 10])
                .maxshape(&[None, Some(10)])
                .chunks(&[3, 4])
                .gzip(6)
                .fillvalue(json!(-1))
                .values(json!(values.chunks(10).collect::<Vec<_>>())),
        )
        .dataset(
            "/c",
            DatasetExpect::new("<i4", &[2])
                .contiguous()
                .values(json!([-7, -4])),
        )
        .attr(
            "/",
            "a",
            AttrExpect::new("<i4", json!([-7, -4])).shape(&[2]),
        )
        .attr("/x", "s", AttrExpect::new("<i4", json!(-4)).shape(&[]));
    if let Err(e) = check_with_h5py(&path, &exp) {
        panic!("{e}");
    }
    let out = run_python(
        "import sys, h5py\nf = h5py.File(sys.argv[1])\n\
         print(h5py.h5o.get_info(f['g'].id).addr == h5py.h5o.get_info(f['g2'].id).addr)\n\
         t = f['g/t']\n\
         print(isinstance(t, h5py.Datatype), t.dtype == 'i4', t.attrs['on_type'] == -7)\n\
         print(h5py.h5o.get_info(t.id).addr == h5py.h5o.get_info(f['t2'].id).addr)\n\
         print(f['empty'].shape is None and f['empty'].dtype == 'i4', f.attrs['none'].shape is None)",
        &[path.as_os_str()],
    );
    assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["True"; 7]);
}
