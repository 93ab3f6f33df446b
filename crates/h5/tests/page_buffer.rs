//! The page buffer through the public API (`FileAccess::page_buffer`): libhdf5's rules for when
//! one may be used, and transparency: a file written through a page buffer is byte-identical to
//! the same workload written without one, libhdf5 (h5py, with and without its own page buffer)
//! reads it, and h5 reads it back through a page buffer. Needs the h5py reference
//! (`scripts/setup-tools`) and fails loudly without it.

use std::path::{Path, PathBuf};

use h5::{
    CreateOptions, FileAccess, FileSpaceOptions, FormatBounds, PageBufferConfig, PageStatKind,
    SpaceStrategy,
};
use h5_testkit::verify::run_python;

/// The 1-d hyperslab `[start, end)`.
fn range(start: usize, end: usize) -> [ndarray::SliceInfoElem; 1] {
    [ndarray::SliceInfoElem::Slice {
        start: start as isize,
        end: Some(end as isize),
        step: 1,
    }]
}

fn tmp(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

fn paged(page: u64, bounds: FormatBounds) -> CreateOptions {
    CreateOptions {
        bounds,
        file_space: FileSpaceOptions::default()
            .with_strategy(SpaceStrategy::Page, false, 1)
            .with_page_size(page),
        ..CreateOptions::default()
    }
}

fn pb(pages: usize, page: u64) -> FileAccess {
    FileAccess::default().page_buffer(PageBufferConfig::new(pages * page as usize, 20, 20).unwrap())
}

/// Groups, attributes, contiguous and chunked datasets (every chunk index of the 1.10 formats:
/// fixed array, extensible array, v2 B-tree), resized and rewritten, with a flush in between.
fn workload(f: &h5::File) {
    let root = f.root().unwrap();
    for g in 0..6 {
        let grp = f.create_group(&format!("g{g}")).unwrap();
        grp.write_attr_scalar("n", g).unwrap();
        let v: Vec<f64> = (0..(300 * (g + 1))).map(|i| f64::from(i) * 0.5).collect();
        grp.new_dataset::<f64>()
            .shape([v.len()])
            .create("contig")
            .unwrap()
            .write(&v)
            .unwrap();
    }
    let fixed = root
        .new_dataset::<i32>()
        .shape([4000])
        .chunk([250])
        .create("fixed")
        .unwrap();
    fixed.write(&(0..4000).collect::<Vec<i32>>()).unwrap();
    let ext = root
        .new_dataset::<i64>()
        .shape([0])
        .max_shape([None])
        .chunk([64])
        .create("ext")
        .unwrap();
    f.flush().unwrap();
    for round in 0..20i64 {
        let n = ext.shape()[0];
        ext.resize([n + 37]).unwrap();
        let block: Vec<i64> = (0..37).map(|i| round * 1000 + i).collect();
        ext.write_slice(&block, range(n, n + 37)).unwrap();
    }
    let two = root
        .new_dataset::<u16>()
        .shape([10, 10])
        .max_shape([None, None])
        .chunk([8, 8])
        .create("bt2")
        .unwrap();
    two.resize([40, 30]).unwrap();
    two.write(&vec![7u16; 1200]).unwrap();
}

const READ_ALL: &str = r#"
import json, sys, h5py, numpy as np
out = {}
for kw in ({}, {"page_buf_size": int(sys.argv[2]) * 8}):
    with h5py.File(sys.argv[1], "r", **kw) as f:
        sums = {}
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                sums[name] = [float(np.asarray(obj[()], dtype="float64").sum()), list(obj.shape)]
        f.visititems(visit)
        sums["attrs"] = [int(f[f"g{g}"].attrs["n"]) for g in range(6)]
    out["pb" if kw else "plain"] = sums
print(json.dumps(out))
"#;

fn libhdf5_reads(path: &Path, page: u64) -> serde_json::Value {
    let out = run_python(READ_ALL, &[path.to_str().unwrap(), &page.to_string()]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(
        v["plain"], v["pb"],
        "libhdf5 reads the same with its page buffer"
    );
    v["plain"].clone()
}

#[test]
fn files_written_through_a_page_buffer_are_identical_and_readable() {
    let dir = tempfile::tempdir().unwrap();
    for (page, bounds, pages) in [
        (4096, FormatBounds::V110, 4),
        (512, FormatBounds::V110, 3),
        (1024, FormatBounds::V18, 64),
    ] {
        let with = tmp(&dir, &format!("with_{page}.h5"));
        let without = tmp(&dir, &format!("without_{page}.h5"));
        let f = h5::File::create_with(&with, &pb(pages, page), &paged(page, bounds)).unwrap();
        workload(&f);
        let stats = f.page_buffer_stats().expect("a page buffer");
        f.close().unwrap();
        assert!(
            stats.hits.total() > 0 && stats.flushes.total() > 0,
            "{stats:?}"
        );
        let f =
            h5::File::create_with(&without, &FileAccess::default(), &paged(page, bounds)).unwrap();
        assert!(f.page_buffer_stats().is_none());
        workload(&f);
        f.close().unwrap();
        assert_eq!(
            std::fs::read(&with).unwrap(),
            std::fs::read(&without).unwrap(),
            "page {page}: the page buffer changed the file"
        );
        let sums = libhdf5_reads(&with, page);
        assert_eq!(sums["fixed"][0], 4000.0 * 3999.0 / 2.0);
        assert_eq!(sums["ext"][1], serde_json::json!([740]));
        assert_eq!(sums["attrs"], serde_json::json!([0, 1, 2, 3, 4, 5]));
        // h5 reads it back through a small page buffer.
        let r = h5::File::open_with(&with, &pb(2, page)).unwrap();
        let fixed: Vec<i32> = r.dataset("fixed").unwrap().read_1d().unwrap().to_vec();
        assert_eq!(fixed, (0..4000).collect::<Vec<i32>>());
        let ext = r.dataset("ext").unwrap().read_1d::<i64>().unwrap();
        assert_eq!(ext[37 * 19 + 5], 19_005);
        let g5: Vec<f64> = r.dataset("g5/contig").unwrap().read_1d().unwrap().to_vec();
        assert_eq!(g5.len(), 1800);
        let s = r.page_buffer_stats().unwrap();
        assert!(s.accesses.get(PageStatKind::Metadata) > 0);
        assert!(s.evictions.total() > 0, "a 2-page buffer must evict");
    }
}

#[test]
fn read_write_open_through_a_page_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let path = tmp(&dir, "rw.h5");
    let f = h5::File::create_with(
        &path,
        &FileAccess::default(),
        &paged(4096, FormatBounds::V110),
    )
    .unwrap();
    workload(&f);
    f.close().unwrap();
    let f = h5::File::open_rw_with(&path, &pb(4, 4096)).unwrap();
    f.create_group("added").unwrap();
    let d = f.dataset("fixed").unwrap();
    d.write_slice(&[-1i32; 10], range(100, 110)).unwrap();
    f.close().unwrap();
    let sums = libhdf5_reads(&path, 4096);
    assert_eq!(
        sums["fixed"][0],
        4000.0 * 3999.0 / 2.0 - (100..110).sum::<i32>() as f64 - 10.0
    );
    let r = h5::File::open(&path).unwrap();
    assert!(r.member_names().unwrap().contains(&"added".to_string()));
}

/// libhdf5's rules: the paged strategy is required, and the buffer must hold a page.
#[test]
fn page_buffer_rules() {
    let dir = tempfile::tempdir().unwrap();
    let plain = tmp(&dir, "plain.h5");
    let err = h5::File::create_with(&plain, &pb(4, 4096), &CreateOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains("PAGE file space strategy"),
        "{err}"
    );
    h5::File::create(&plain).unwrap().close().unwrap();
    let err = h5::File::open_with(&plain, &pb(4, 4096)).unwrap_err();
    assert!(
        err.to_string().contains("PAGE file space strategy"),
        "{err}"
    );
    let p = tmp(&dir, "paged.h5");
    h5::File::create_with(&p, &FileAccess::default(), &paged(4096, FormatBounds::V110))
        .unwrap()
        .close()
        .unwrap();
    let small = FileAccess::default().page_buffer(PageBufferConfig::new(1000, 0, 0).unwrap());
    let err = h5::File::open_with(&p, &small).unwrap_err();
    assert!(
        err.to_string().contains("must be >= the page size"),
        "{err}"
    );
    assert!(PageBufferConfig::new(8192, 70, 40).is_err());
    // A size of 0 means no page buffer.
    let none = FileAccess::default().page_buffer(PageBufferConfig::new(0, 0, 0).unwrap());
    let f = h5::File::open_with(&plain, &none).unwrap();
    assert!(f.page_buffer_stats().is_none());
}
