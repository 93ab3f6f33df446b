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
