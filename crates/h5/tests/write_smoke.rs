//! Temporary smoke test (replaced by write_h5py.rs).
#[test]
fn smoke() {
    let path = std::path::Path::new("/tmp/w/smoke.h5");
    let f = h5::File::create(path).unwrap();
    let g = f.create_group("a/b").unwrap();
    g.write_attr_str("units", "m/s").unwrap();
    let ds = g.new_dataset::<f32>().shape([4, 5]).create("x").unwrap();
    let v: Vec<f32> = (0..20).map(|i| i as f32).collect();
    ds.write(&v).unwrap();
    let c = f
        .root()
        .unwrap()
        .new_dataset::<i32>()
        .shape([100, 30])
        .chunk([16, 8])
        .shuffle()
        .deflate(4)
        .create("c")
        .unwrap();
    let w: Vec<i32> = (0..3000).collect();
    c.write(&w).unwrap();
    c.write_attr::<f64>("scale", &[1.5, 2.5]).unwrap();
    for i in 0..50 {
        f.create_group(&format!("many/g{i:03}")).unwrap();
    }
    f.root().unwrap().link_soft("soft", "/a/b/x").unwrap();
    f.close().unwrap();
    let f = h5::File::open(path).unwrap();
    let r: Vec<f32> = f
        .dataset("a/b/x")
        .unwrap()
        .read_raw()
        .unwrap()
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(r, v);
}

#[test]
fn big() {
    let path = std::path::Path::new("/tmp/w/big.h5");
    let f = h5::File::create(path).unwrap();
    let root = f.root().unwrap();
    let g = f.create_group("wide").unwrap();
    for i in 0..3000 {
        g.new_dataset::<u8>()
            .shape([1])
            .create(&format!("d{i:05}"))
            .unwrap();
    }
    let c = root
        .new_dataset::<u16>()
        .shape([300, 400])
        .chunk([7, 5])
        .create("c")
        .unwrap();
    let w: Vec<u16> = (0..120000u32).map(|x| (x % 65521) as u16).collect();
    c.write(&w).unwrap();
    let e = root
        .new_dataset::<f64>()
        .shape([10, 10])
        .chunk([3, 3])
        .fill_value(-1.0)
        .create("partial")
        .unwrap();
    use ndarray::SliceInfoElem as S;
    e.write_slice(
        &[1.0, 2.0, 3.0, 4.0],
        [
            S::Slice {
                start: 2,
                end: Some(4),
                step: 1,
            },
            S::Slice {
                start: 5,
                end: Some(7),
                step: 1,
            },
        ],
    )
    .unwrap();
    f.close().unwrap();
}

#[test]
fn grow() {
    let path = std::path::Path::new("/tmp/w/grow.h5");
    let f = h5::File::create(path).unwrap();
    let root = f.root().unwrap();
    let mut all = Vec::new();
    for k in 0..20 {
        let mut d = root
            .new_dataset::<i32>()
            .shape([0])
            .max_shape([None])
            .chunk([1024])
            .create(&format!("d{k}"))
            .unwrap();
        for r in 0..30 {
            let n = d.shape()[0];
            d.resize([n + 100]).unwrap();
            let v: Vec<i32> = (0..100).map(|i| (r * 100 + i + k) as i32).collect();
            use ndarray::SliceInfoElem as S;
            d.write_slice(
                &v,
                [S::Slice {
                    start: n as isize,
                    end: Some((n + 100) as isize),
                    step: 1,
                }],
            )
            .unwrap();
        }
        all.push(d);
    }
    f.close().unwrap();
}
