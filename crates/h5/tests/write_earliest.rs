//! Files h5 writes in the earliest format, checked by the real thing: h5py (libhdf5 1.14.4) and
//! h5dump, plus h5's own reader in the same process and after reopening. These tests need
//! `scripts/setup-tools` (run by the README test command) and fail loudly without it.

use std::path::{Path, PathBuf};

use h5_testkit::verify::{
    AttrExpect, DatasetExpect, Expectations, check_with_h5py, digest_le, h5dump, h5dump_data_values,
};
use ndarray::SliceInfoElem as S;
use serde_json::json;

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    (dir, p)
}

fn earliest() -> h5::CreateOptions {
    h5::CreateOptions {
        bounds: h5::FormatBounds::Earliest,
        ..h5::CreateOptions::default()
    }
}

fn create_earliest(path: &Path) -> h5::File {
    h5::File::create_with(path, &h5::FileAccess::default(), &earliest()).unwrap()
}

fn range(start: usize, end: usize) -> S {
    S::Slice {
        start: start as isize,
        end: Some(end as isize),
        step: 1,
    }
}

fn flat<T: h5::H5Num>(ds: &h5::Dataset) -> Vec<T> {
    ds.read::<T>().expect("read").into_iter().collect()
}

fn check(path: &Path, exp: &Expectations) {
    if let Err(e) = check_with_h5py(path, exp) {
        panic!("h5py disagrees with what h5 wrote:\n{e}");
    }
    h5dump(&["-H"], path).unwrap_or_else(|e| panic!("h5dump failed: {e}"));
}

/// Groups (nested, created on the way), contiguous and chunked datasets with filters, fill
/// values, attributes of numbers and strings, and a soft link.
#[test]
fn a_mixed_file_reads_back_in_h5py_and_h5dump() {
    let (_d, path) = tmp("mixed.h5");
    let x: Vec<f32> = (0..20).map(|i| i as f32 * 0.5).collect();
    let c: Vec<i32> = (0..3000).map(|i| i * 7 - 1000).collect();
    {
        let f = create_earliest(&path);
        let g = f.create_group("a/b").unwrap();
        g.write_attr_str("units", "m/s").unwrap();
        g.write_attr_scalar("count", 42u16).unwrap();
        let ds = g.new_dataset::<f32>().shape([4, 5]).create("x").unwrap();
        ds.write(&x).unwrap();
        let cd = f
            .root()
            .unwrap()
            .new_dataset::<i32>()
            .shape([100, 30])
            .chunk([16, 8])
            .shuffle()
            .deflate(4)
            .create("c")
            .unwrap();
        cd.write(&c).unwrap();
        cd.write_attr::<f64>("scale", &[1.5, -2.25]).unwrap();
        // Replacing an attribute keeps one of that name.
        cd.write_attr::<f64>("scale", &[1.5, 2.5]).unwrap();
        let fv = f
            .root()
            .unwrap()
            .new_dataset::<f64>()
            .shape([10, 10])
            .chunk([3, 3])
            .fletcher32()
            .fill_value(-1.0)
            .create("partial")
            .unwrap();
        fv.write_slice(&[1.0, 2.0, 3.0, 4.0], [range(2, 4), range(5, 7)])
            .unwrap();
        f.root().unwrap().link_soft("soft", "/a/b/x").unwrap();
        // Read back before closing: the writable layouts and group tables answer.
        assert_eq!(flat::<f32>(&f.dataset("a/b/x").unwrap()), x);
        assert_eq!(flat::<f32>(&f.dataset("soft").unwrap()), x);
        f.close().unwrap();
    }
    let mut partial = vec![-1.0f64; 100];
    for (k, (r, c)) in [(2, 5), (2, 6), (3, 5), (3, 6)].iter().enumerate() {
        partial[r * 10 + c] = (k + 1) as f64;
    }
    let exp = Expectations::new()
        .superblock_version(0)
        .group("/", &["a", "c", "partial", "soft"])
        .group("/a", &["b"])
        .group("/a/b", &["x"])
        .soft_link("/soft", "/a/b/x")
        .dataset(
            "/a/b/x",
            DatasetExpect::new("<f4", &[4, 5])
                .contiguous()
                .digest(digest_le(&x)),
        )
        .dataset(
            "/c",
            DatasetExpect::new("<i4", &[100, 30])
                .chunks(&[16, 8])
                .gzip(4)
                .shuffle(true)
                .fletcher32(false)
                .digest(digest_le(&c))
                .spot(&[99, 29], json!(2999 * 7 - 1000)),
        )
        .dataset(
            "/partial",
            DatasetExpect::new("<f8", &[10, 10])
                .chunks(&[3, 3])
                .fletcher32(true)
                .fillvalue(json!(-1.0))
                .digest(digest_le(&partial)),
        )
        .attr("/a/b", "count", AttrExpect::new("<u2", json!(42)))
        .attr_names("/c", &["scale"])
        .attr(
            "/c",
            "scale",
            AttrExpect::new("<f8", json!([1.5, 2.5])).shape(&[2]),
        );
    check(&path, &exp);
    let dump = h5dump(&["-d", "/a/b/x"], &path).unwrap();
    let values = h5dump_data_values(&dump, "/a/b/x");
    assert_eq!(values.len(), 20, "{dump}");
    assert_eq!(values[3], "1.5");
    // And h5 reads its own file back after reopening.
    let f = h5::File::open(&path).unwrap();
    assert_eq!(flat::<i32>(&f.dataset("c").unwrap()), c);
    assert_eq!(flat::<f64>(&f.dataset("partial").unwrap()), partial);
    assert_eq!(f.superblock_version(), 0);
}

/// A group of thousands of links and a dataset of thousands of chunks need several B-tree
/// levels, which the layout at flush builds.
#[test]
fn wide_groups_and_many_chunks_need_deeper_btrees() {
    let (_d, path) = tmp("wide.h5");
    let names: Vec<String> = (0..3000).map(|i| format!("d{i:05}")).collect();
    let data: Vec<u16> = (0..120_000u32).map(|x| (x % 65_521) as u16).collect();
    {
        let f = create_earliest(&path);
        let g = f.create_group("wide").unwrap();
        for n in &names {
            g.new_dataset::<u8>().shape([1]).create(n).unwrap();
        }
        let c = f
            .root()
            .unwrap()
            .new_dataset::<u16>()
            .shape([300, 400])
            .chunk([7, 5])
            .create("c")
            .unwrap();
        c.write(&data).unwrap();
        f.close().unwrap();
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let exp = Expectations::new().group("/wide", &refs).dataset(
        "/c",
        DatasetExpect::new("<u2", &[300, 400])
            .chunks(&[7, 5])
            .digest(digest_le(&data)),
    );
    check(&path, &exp);
    let f = h5::File::open(&path).unwrap();
    assert_eq!(f.group("wide").unwrap().member_names().unwrap().len(), 3000);
}

/// Extensible datasets grown in a loop (the W4 pattern) and one shrunk.
#[test]
fn resized_datasets_hold_what_was_appended() {
    let (_d, path) = tmp("grow.h5");
    let mut expect = Expectations::new();
    {
        let f = create_earliest(&path);
        let root = f.root().unwrap();
        for k in 0..10i32 {
            let d = root
                .new_dataset::<i32>()
                .shape([0])
                .max_shape([None])
                .chunk([1024])
                .create(&format!("d{k}"))
                .unwrap();
            for r in 0..30usize {
                let n = d.shape()[0];
                d.resize([n + 100]).unwrap();
                let v: Vec<i32> = (0..100).map(|i| (r * 100 + i) as i32 + k).collect();
                d.write_slice(&v, [range(n, n + 100)]).unwrap();
            }
            let all: Vec<i32> = (0..3000).map(|i| i + k).collect();
            expect = expect.dataset(
                &format!("/d{k}"),
                DatasetExpect::new("<i4", &[3000])
                    .maxshape(&[None])
                    .chunks(&[1024])
                    .digest(digest_le(&all)),
            );
        }
        let s = root
            .new_dataset::<f32>()
            .shape([50, 50])
            .max_shape([Some(100), Some(100)])
            .chunk([8, 8])
            .create("shrunk")
            .unwrap();
        s.write(&vec![3.0f32; 2500]).unwrap();
        s.resize([20, 30]).unwrap();
        s.resize([40, 30]).unwrap();
        let mut want = vec![0.0f32; 40 * 30];
        for r in 0..20 {
            for c in 0..30 {
                want[r * 30 + c] = 3.0;
            }
        }
        assert_eq!(flat::<f32>(&s), want);
        expect = expect.dataset(
            "/shrunk",
            DatasetExpect::new("<f4", &[40, 30])
                .maxshape(&[Some(100), Some(100)])
                .digest(digest_le(&want)),
        );
        f.close().unwrap();
    }
    check(&path, &expect);
}

/// With a metadata cache far smaller than the metadata, entries are evicted (written) and
/// loaded again while the file is built; the result is still what was written.
#[test]
fn a_tiny_metadata_cache_still_writes_a_valid_file() {
    let (_d, path) = tmp("tiny.h5");
    let cfg = h5::MetadataCacheConfig {
        set_initial_size: true,
        initial_size: 16 * 1024,
        min_size: 16 * 1024,
        max_size: 16 * 1024,
        incr_mode: h5_metacache::IncrMode::Off,
        decr_mode: h5_metacache::DecrMode::Off,
        flash_incr_mode: h5_metacache::FlashIncrMode::Off,
        ..Default::default()
    };
    let access = h5::FileAccess::new().metadata_cache(cfg);
    let mut exp = Expectations::new();
    {
        let f = h5::File::create_with(&path, &access, &earliest()).unwrap();
        for i in 0..200 {
            let g = f
                .create_group(&format!("g{:03}/sub", i % 40 * 1000 + i))
                .unwrap();
            g.write_attr_scalar("i", i as i64).unwrap();
            let d = g.new_dataset::<i64>().shape([3]).create("v").unwrap();
            d.write(&[i as i64, 2, 3]).unwrap();
            exp = exp.dataset(
                &format!("/g{:03}/sub/v", i % 40 * 1000 + i),
                DatasetExpect::new("<i8", &[3]).values(json!([i, 2, 3])),
            );
        }
        let stats = f.metadata_cache_stats().unwrap();
        assert!(
            stats.total_evictions > 0,
            "the cache never evicted: {stats:?}"
        );
        f.close().unwrap();
    }
    check(&path, &exp);
}

#[test]
fn misuse_is_a_typed_error() {
    let (_d, path) = tmp("errors.h5");
    let f = create_earliest(&path);
    let root = f.root().unwrap();
    root.create_group("g").unwrap();
    assert!(matches!(root.create_group("g"), Err(h5::Error::Exists(_))));
    let ds = root.new_dataset::<f32>().shape([4]).create("x").unwrap();
    assert!(matches!(
        root.new_dataset::<f32>().shape([4]).create("x"),
        Err(h5::Error::Exists(_))
    ));
    // i32 into f32 may round: refused unless asked (as for reads); i16 converts losslessly.
    assert!(matches!(
        ds.write(&[1i32, 2, 3, 4]),
        Err(h5::Error::Convert(_))
    ));
    ds.write(&[1i16, 2, 3, 4]).unwrap();
    assert_eq!(ds.read_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    assert!(matches!(
        ds.write(&vec!["a".to_owned(); 4]),
        Err(h5::Error::Invalid(_))
    ));
    assert!(matches!(ds.write(&[1.0f32]), Err(h5::Error::Invalid(_))));
    assert!(matches!(ds.resize([8]), Err(h5::Error::Unsupported(_))));
    let c = root
        .new_dataset::<u8>()
        .shape([4])
        .max_shape([Some(6)])
        .chunk([2])
        .create("c")
        .unwrap();
    assert!(matches!(c.resize([7]), Err(h5::Error::Invalid(_))));
    assert!(matches!(
        root.create_group("a\0b"),
        Err(h5::Error::Invalid(_))
    ));
    assert!(matches!(
        root.new_dataset::<u8>()
            .shape([4])
            .deflate(1)
            .create("nochunk"),
        Err(h5::Error::Invalid(_))
    ));
    f.close().unwrap();
    // A file opened for reading refuses writes.
    let r = h5::File::open(&path).unwrap();
    assert!(matches!(r.create_group("z"), Err(h5::Error::ReadOnly)));
}
