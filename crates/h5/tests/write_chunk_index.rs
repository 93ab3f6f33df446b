//! Chunked datasets written with every chunk index (layout version 4: single chunk, implicit,
//! fixed array, extensible array, v2 B-tree; and the v1 B-tree), with and without filters, for
//! integers and floats, written in partial and strided hyperslabs and resized where the index
//! allows; then checked by h5py (values, shape, maxshape, chunks, filters, allocated chunk
//! count), h5dump, and h5 itself after reopening (including the index kind in the file).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use h5::{AllocTime, ChunkIndexKind};
use h5_testkit::verify::{
    DatasetExpect, Expectations, check_with_h5py, digest_le, h5dump, run_python,
};
use ndarray::SliceInfoElem as S;

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    (dir, p)
}

fn slice(start: usize, end: usize, step: usize) -> S {
    S::Slice {
        start: start as isize,
        end: Some(end as isize),
        step: step as isize,
    }
}

fn check(path: &Path, exp: &Expectations) {
    if let Err(e) = check_with_h5py(path, exp) {
        panic!("h5py disagrees with what h5 wrote:\n{e}");
    }
    h5dump(&["-H"], path).unwrap_or_else(|e| panic!("h5dump -H failed: {e}"));
    h5dump(&[], path).unwrap_or_else(|e| panic!("h5dump failed: {e}"));
}

/// Allocated chunks of `dataset` as libhdf5 counts them.
fn h5py_chunk_count(path: &Path, dataset: &str) -> usize {
    let out = run_python(
        "import h5py, sys\nwith h5py.File(sys.argv[1], 'r') as f:\n    print(f[sys.argv[2]].id.get_num_chunks())",
        &[path.to_str().expect("utf-8 path"), dataset],
    );
    out.trim().parse().expect("a chunk count")
}

/// A 2-D dataset's expected contents: row-major values, the fill value, and which chunks were
/// written (scaled coordinates).
struct Model {
    dims: [usize; 2],
    chunk: [usize; 2],
    fill: f64,
    v: Vec<f64>,
    touched: BTreeSet<[usize; 2]>,
}

impl Model {
    fn new(dims: [usize; 2], chunk: [usize; 2], fill: f64) -> Self {
        Model {
            dims,
            chunk,
            fill,
            v: vec![fill; dims[0] * dims[1]],
            touched: BTreeSet::new(),
        }
    }

    /// Writes `f(i, j)` at rows `r` and columns `c` (start, end, step); returns the values in
    /// selection order.
    fn write(
        &mut self,
        r: (usize, usize, usize),
        c: (usize, usize, usize),
        f: impl Fn(usize, usize) -> f64,
    ) -> Vec<f64> {
        let mut out = Vec::new();
        for i in (r.0..r.1).step_by(r.2) {
            for j in (c.0..c.1).step_by(c.2) {
                let x = f(i, j);
                self.v[i * self.dims[1] + j] = x;
                self.touched.insert([i / self.chunk[0], j / self.chunk[1]]);
                out.push(x);
            }
        }
        out
    }

    fn resize(&mut self, dims: [usize; 2]) {
        let mut v = vec![self.fill; dims[0] * dims[1]];
        for i in 0..dims[0].min(self.dims[0]) {
            for j in 0..dims[1].min(self.dims[1]) {
                v[i * dims[1] + j] = self.v[i * self.dims[1] + j];
            }
        }
        // Chunks wholly outside the new extent are deleted (libhdf5 does the same).
        let (ch, d) = (self.chunk, dims);
        self.touched
            .retain(|t| t[0] * ch[0] < d[0] && t[1] * ch[1] < d[1]);
        self.dims = dims;
        self.v = v;
    }

    fn chunks_in_extent(&self) -> usize {
        self.dims[0].div_ceil(self.chunk[0]) * self.dims[1].div_ceil(self.chunk[1])
    }
}

/// One dataset of the matrix: the index, its shapes and what happens to it.
struct Case {
    kind: ChunkIndexKind,
    dims: [usize; 2],
    max: [Option<usize>; 2],
    chunk: [usize; 2],
    /// Resizes done after the first writes (each followed by a write into the new area); a
    /// shrink followed by a growth shows fill values where the shrink cut.
    resizes: Vec<[usize; 2]>,
    early: bool,
}

fn cases() -> Vec<Case> {
    use ChunkIndexKind as K;
    vec![
        Case {
            kind: K::BtreeV1,
            dims: [20, 15],
            max: [None, Some(40)],
            chunk: [4, 4],
            resizes: vec![[50, 30], [33, 22], [41, 35]],
            early: false,
        },
        Case {
            kind: K::SingleChunk,
            dims: [12, 10],
            max: [Some(12), Some(10)],
            chunk: [12, 10],
            resizes: vec![],
            early: false,
        },
        Case {
            kind: K::Implicit,
            dims: [20, 15],
            max: [Some(30), Some(15)],
            chunk: [4, 4],
            resizes: vec![[30, 15], [18, 13], [29, 15]],
            early: true,
        },
        Case {
            kind: K::FixedArray,
            dims: [20, 15],
            max: [Some(40), Some(15)],
            chunk: [4, 4],
            resizes: vec![[40, 15], [25, 9], [37, 14]],
            early: false,
        },
        Case {
            kind: K::ExtensibleArray,
            dims: [10, 7],
            max: [None, Some(7)],
            chunk: [3, 4],
            resizes: vec![[200, 7], [150, 5], [170, 7]],
            early: false,
        },
        Case {
            kind: K::BtreeV2,
            dims: [10, 7],
            max: [None, None],
            chunk: [3, 4],
            resizes: vec![[120, 90], [70, 40], [75, 47]],
            early: false,
        },
    ]
}

/// Writes every case with `T` elements into one file, checks it everywhere.
fn run<T>(dtype: &str, conv: fn(f64) -> T, filtered: bool)
where
    T: h5::H5Num + h5_testkit::verify::LeBytes + PartialEq + std::fmt::Debug + Copy,
{
    let (_d, path) = tmp("index.h5");
    let mut models = Vec::new();
    {
        let f = h5::File::create(&path).unwrap();
        let root = f.root().unwrap();
        for (n, c) in cases().into_iter().enumerate() {
            if filtered && c.kind == ChunkIndexKind::Implicit {
                // libhdf5 never gives filtered data an implicit index; neither may we.
                let b = root
                    .new_dataset::<T>()
                    .shape(c.dims)
                    .max_shape(c.max)
                    .chunk(c.chunk)
                    .shuffle()
                    .deflate(4)
                    .alloc_time(AllocTime::Early)
                    .chunk_index(c.kind);
                assert!(b.create("refused").is_err());
                continue;
            }
            let name = format!("d{n}");
            let mut b = root
                .new_dataset::<T>()
                .shape(c.dims)
                .max_shape(c.max)
                .chunk(c.chunk)
                .fill_value(conv(-7.0))
                .chunk_index(c.kind);
            if filtered {
                b = b.shuffle().deflate(4);
            }
            if c.early {
                b = b.alloc_time(AllocTime::Early);
            }
            let ds = b.create(&name).unwrap();
            assert_eq!(ds.chunk_index(), Some(c.kind));
            let mut m = Model::new(c.dims, c.chunk, -7.0);
            let k = n as f64 * 1000.0;
            // A partial block, then a strided one over it.
            let v = m.write((1, 9, 1), (2, 7, 1), |i, j| k + (i * 100 + j) as f64);
            ds.write_slice(
                &v.iter().map(|x| conv(*x)).collect::<Vec<T>>(),
                [slice(1, 9, 1), slice(2, 7, 1)],
            )
            .unwrap();
            let v = m.write((0, c.dims[0], 3), (1, c.dims[1], 2), |i, j| {
                -k - (i * 100 + j) as f64
            });
            ds.write_slice(
                &v.iter().map(|x| conv(*x)).collect::<Vec<T>>(),
                [slice(0, c.dims[0], 3), slice(1, c.dims[1], 2)],
            )
            .unwrap();
            for (r, dims) in c.resizes.iter().enumerate() {
                // Chunks reach the file (and the index is laid out) before each resize.
                f.flush().unwrap();
                ds.resize(dims).unwrap();
                m.resize(*dims);
                let (h, w) = (dims[0], dims[1]);
                let (r0, c0) = (h.saturating_sub(7), w.saturating_sub(5));
                let v = m.write((r0, h, 2), (c0, w, 1), |i, j| {
                    (r * 7) as f64 + (i * 1000 + j) as f64
                });
                ds.write_slice(
                    &v.iter().map(|x| conv(*x)).collect::<Vec<T>>(),
                    [slice(r0, h, 2), slice(c0, w, 1)],
                )
                .unwrap();
            }
            // Read back before closing.
            let got: Vec<T> = ds.read::<T>().unwrap().into_iter().collect();
            let want: Vec<T> = m.v.iter().map(|x| conv(*x)).collect();
            assert_eq!(got, want, "{name} ({:?}) before closing", c.kind);
            models.push((name, c, m));
        }
        f.close().unwrap();
    }
    let mut exp = Expectations::new();
    for (name, c, m) in &models {
        let want: Vec<T> = m.v.iter().map(|x| conv(*x)).collect();
        let shape = [m.dims[0] as u64, m.dims[1] as u64];
        let max: Vec<Option<u64>> = c.max.iter().map(|x| x.map(|v| v as u64)).collect();
        let mut e = DatasetExpect::new(dtype, &shape)
            .chunks(&[c.chunk[0] as u64, c.chunk[1] as u64])
            .maxshape(&max)
            .digest(digest_le(&want));
        e = if filtered {
            e.gzip(4).shuffle(true)
        } else {
            e.no_compression().shuffle(false)
        };
        exp = exp.dataset(&format!("/{name}"), e);
    }
    if let Ok(keep) = std::env::var("H5_KEEP_TEST_FILE") {
        std::fs::copy(&path, format!("{keep}-{dtype}-{filtered}.h5")).unwrap();
    }
    check(&path, &exp);
    let f = h5::File::open(&path).unwrap();
    for (name, c, m) in &models {
        let ds = f.dataset(name).unwrap();
        assert_eq!(ds.chunk_index(), Some(c.kind), "{name}");
        let got: Vec<T> = ds.read::<T>().unwrap().into_iter().collect();
        let want: Vec<T> = m.v.iter().map(|x| conv(*x)).collect();
        assert_eq!(got, want, "{name} ({:?}) after reopening", c.kind);
        let chunks = h5py_chunk_count(&path, name);
        let expected = if c.early {
            m.chunks_in_extent()
        } else {
            m.touched.len()
        };
        assert_eq!(chunks, expected, "{name} ({:?}): allocated chunks", c.kind);
    }
}

#[test]
fn every_index_i32_unfiltered() {
    run::<i32>("<i4", |x| x as i32, false);
}

#[test]
fn every_index_i32_shuffle_deflate() {
    run::<i32>("<i4", |x| x as i32, true);
}

#[test]
fn every_index_f64_unfiltered() {
    run::<f64>("<f8", |x| x * 0.5, false);
}

#[test]
fn every_index_f64_shuffle_deflate() {
    run::<f64>("<f8", |x| x * 0.5, true);
}

/// Name, index, shape, maximum shape, chunk shape, filtered.
type LargeSpec = (
    &'static str,
    ChunkIndexKind,
    [usize; 2],
    [Option<usize>; 2],
    [usize; 2],
    bool,
);

/// Indexes large enough for their bigger structures: a paged fixed array (more than 1024
/// chunks), an extensible array with super blocks, v2 B-trees of depth 1 and 2.
#[test]
fn large_indexes_use_pages_super_blocks_and_deep_trees() {
    use ChunkIndexKind as K;
    let (_d, path) = tmp("large.h5");
    // (name, kind, shape, max, chunk, filtered)
    let specs: Vec<LargeSpec> = vec![
        (
            "fa",
            K::FixedArray,
            [80, 80],
            [Some(80), Some(80)],
            [2, 2],
            false,
        ),
        (
            "fa_z",
            K::FixedArray,
            [80, 80],
            [Some(80), Some(80)],
            [2, 2],
            true,
        ),
        (
            "ea",
            K::ExtensibleArray,
            [3000, 2],
            [None, Some(2)],
            [1, 2],
            false,
        ),
        (
            "ea_z",
            K::ExtensibleArray,
            [3000, 2],
            [None, Some(2)],
            [1, 2],
            true,
        ),
        ("bt", K::BtreeV2, [40, 45], [None, None], [1, 1], true),
        (
            "bt_deep",
            K::BtreeV2,
            [120, 100],
            [None, None],
            [1, 1],
            false,
        ),
    ];
    let mut exp = Expectations::new();
    let mut all = Vec::new();
    {
        let f = h5::File::create(&path).unwrap();
        let root = f.root().unwrap();
        for (name, kind, shape, max, chunk, filtered) in &specs {
            let mut b = root
                .new_dataset::<i32>()
                .shape(shape)
                .max_shape(max)
                .chunk(chunk)
                .chunk_index(*kind);
            if *filtered {
                b = b.shuffle().deflate(1);
            }
            let ds = b.create(name).unwrap();
            let n = shape[0] * shape[1];
            let v: Vec<i32> = (0..n as i32).map(|x| x * 3 - 5).collect();
            // In two halves, with a flush between: the index is laid out twice.
            let half = shape[0] / 2;
            ds.write_slice(
                &v[..half * shape[1]],
                [slice(0, half, 1), slice(0, shape[1], 1)],
            )
            .unwrap();
            f.flush().unwrap();
            ds.write_slice(
                &v[half * shape[1]..],
                [slice(half, shape[0], 1), slice(0, shape[1], 1)],
            )
            .unwrap();
            let max_u: Vec<Option<u64>> = max.iter().map(|x| x.map(|v| v as u64)).collect();
            exp = exp.dataset(
                &format!("/{name}"),
                DatasetExpect::new("<i4", &[shape[0] as u64, shape[1] as u64])
                    .chunks(&[chunk[0] as u64, chunk[1] as u64])
                    .maxshape(&max_u)
                    .digest(digest_le(&v)),
            );
            all.push((*name, *kind, v, n / (chunk[0] * chunk[1])));
        }
        f.close().unwrap();
    }
    check(&path, &exp);
    let f = h5::File::open(&path).unwrap();
    for (name, kind, v, chunks) in &all {
        let ds = f.dataset(name).unwrap();
        assert_eq!(ds.chunk_index(), Some(*kind));
        let got: Vec<i32> = ds.read::<i32>().unwrap().into_iter().collect();
        assert_eq!(&got, v, "{name}");
        assert_eq!(h5py_chunk_count(&path, name), *chunks, "{name}");
    }
}

/// Layout class, allocation time, fill time, allocated chunks (chunked only) and storage size
/// of `dataset` as libhdf5 reports them.
fn h5py_storage(path: &Path, dataset: &str) -> serde_json::Value {
    let out = run_python(
        "import h5py, sys, json\n\
         with h5py.File(sys.argv[1], 'r') as f:\n\
         \x20   d = f[sys.argv[2]]\n\
         \x20   p = d.id.get_create_plist()\n\
         \x20   lay = {h5py.h5d.COMPACT: 'compact', h5py.h5d.CONTIGUOUS: 'contiguous', h5py.h5d.CHUNKED: 'chunked'}[p.get_layout()]\n\
         \x20   at = {h5py.h5d.ALLOC_TIME_EARLY: 'early', h5py.h5d.ALLOC_TIME_LATE: 'late', h5py.h5d.ALLOC_TIME_INCR: 'incr'}[p.get_alloc_time()]\n\
         \x20   ft = {h5py.h5d.FILL_TIME_ALLOC: 'alloc', h5py.h5d.FILL_TIME_NEVER: 'never', h5py.h5d.FILL_TIME_IFSET: 'ifset'}[p.get_fill_time()]\n\
         \x20   n = d.id.get_num_chunks() if lay == 'chunked' else None\n\
         \x20   print(json.dumps({'layout': lay, 'alloc': at, 'fill': ft, 'chunks': n, 'storage': d.id.get_storage_size()}))",
        &[path.to_str().expect("utf-8 path"), dataset],
    );
    serde_json::from_str(out.trim()).expect("json from h5py")
}

/// Compact datasets: created, written in strided pieces across a flush, read by h5py (layout
/// compact, values), h5dump and h5 after reopening; too large or growable ones are refused.
#[test]
fn compact_datasets_keep_their_data_in_the_header() {
    let (_d, path) = tmp("compact.h5");
    let mut m = Model::new([10, 20], [10, 20], 0.0);
    let mut mf = Model::new([6, 5], [6, 5], 2.5);
    {
        let f = h5::File::create(&path).unwrap();
        let root = f.root().unwrap();
        let ds = root
            .new_dataset::<i32>()
            .shape([10, 20])
            .compact()
            .create("ci")
            .unwrap();
        let v = m.write((0, 10, 2), (3, 20, 3), |i, j| (i * 100 + j) as f64);
        ds.write_slice(
            &v.iter().map(|x| *x as i32).collect::<Vec<_>>(),
            [slice(0, 10, 2), slice(3, 20, 3)],
        )
        .unwrap();
        f.flush().unwrap();
        let v = m.write((5, 7, 1), (0, 20, 1), |i, j| -((i * 100 + j) as f64));
        ds.write_slice(
            &v.iter().map(|x| *x as i32).collect::<Vec<_>>(),
            [slice(5, 7, 1), slice(0, 20, 1)],
        )
        .unwrap();
        let fd = root
            .new_dataset::<f64>()
            .shape([6, 5])
            .fill_value(2.5)
            .compact()
            .create("cf")
            .unwrap();
        let v = mf.write((1, 6, 2), (0, 5, 2), |i, j| (i as f64) - j as f64 * 0.25);
        fd.write_slice(&v, [slice(1, 6, 2), slice(0, 5, 2)])
            .unwrap();
        assert_eq!(fd.layout_name(), "compact");
        // 64 KiB of data does not fit an object header message.
        let big = root
            .new_dataset::<f64>()
            .shape([9000])
            .compact()
            .create("big");
        assert!(big.is_err());
        let grow = root
            .new_dataset::<f64>()
            .shape([4])
            .max_shape([None])
            .compact()
            .create("grow");
        assert!(grow.is_err());
        f.close().unwrap();
    }
    let ci: Vec<i32> = m.v.iter().map(|x| *x as i32).collect();
    let exp = Expectations::new()
        .dataset(
            "/ci",
            DatasetExpect::new("<i4", &[10, 20])
                .compact()
                .digest(digest_le(&ci)),
        )
        .dataset(
            "/cf",
            DatasetExpect::new("<f8", &[6, 5])
                .compact()
                .fillvalue(serde_json::json!(2.5))
                .digest(digest_le(&mf.v)),
        );
    check(&path, &exp);
    let s = h5py_storage(&path, "ci");
    assert_eq!(s["layout"], "compact");
    assert_eq!(s["alloc"], "early");
    let f = h5::File::open(&path).unwrap();
    let got: Vec<i32> = f
        .dataset("ci")
        .unwrap()
        .read::<i32>()
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(got, ci);
    let got: Vec<f64> = f
        .dataset("cf")
        .unwrap()
        .read::<f64>()
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(got, mf.v);
}

/// Allocation and fill times: libhdf5's defaults per layout, and every explicit choice,
/// recorded in the fill value message and honoured (storage allocated when libhdf5 would,
/// fill values written unless "never").
#[test]
fn allocation_and_fill_times_follow_libhdf5() {
    use h5::FillTime;
    let (_d, path) = tmp("alloc.h5");
    {
        let f = h5::File::create(&path).unwrap();
        let r = f.root().unwrap();
        // Defaults: contiguous late, chunked incremental.
        r.new_dataset::<i32>()
            .shape([100])
            .create("contig_default")
            .unwrap();
        let w = r
            .new_dataset::<i32>()
            .shape([100])
            .fill_value(-3)
            .create("contig_late_written")
            .unwrap();
        w.write_slice(&[1, 2, 3], [slice(10, 13, 1)]).unwrap();
        r.new_dataset::<i32>()
            .shape([100])
            .fill_value(-3)
            .alloc_time(AllocTime::Early)
            .create("contig_early")
            .unwrap();
        r.new_dataset::<i32>()
            .shape([10, 10])
            .chunk([3, 3])
            .create("chunk_default")
            .unwrap();
        for (name, kind, filtered) in [
            ("early_fa", ChunkIndexKind::FixedArray, false),
            ("early_ea_z", ChunkIndexKind::ExtensibleArray, true),
            ("early_bt2", ChunkIndexKind::BtreeV2, false),
            ("early_v1", ChunkIndexKind::BtreeV1, true),
        ] {
            let max = if kind == ChunkIndexKind::FixedArray {
                [Some(12), Some(10)]
            } else if kind == ChunkIndexKind::BtreeV2 {
                [None, None]
            } else {
                [None, Some(10)]
            };
            let mut b = r
                .new_dataset::<f64>()
                .shape([10, 10])
                .max_shape(max)
                .chunk([3, 3])
                .fill_value(1.25)
                .alloc_time(AllocTime::Early)
                .chunk_index(kind);
            if filtered {
                b = b.shuffle().deflate(6);
            }
            let d = b.create(name).unwrap();
            // Growing allocates the new chunks too.
            d.resize([12, 10]).unwrap();
        }
        r.new_dataset::<f64>()
            .shape([10, 10])
            .chunk([3, 3])
            .alloc_time(AllocTime::Early)
            .fill_time(FillTime::Never)
            .create("early_never")
            .unwrap();
        r.new_dataset::<f64>()
            .shape([10, 10])
            .chunk([3, 3])
            .alloc_time(AllocTime::Early)
            .fill_time(FillTime::OnAlloc)
            .create("early_alloc")
            .unwrap();
        let late = r
            .new_dataset::<i32>()
            .shape([10, 10])
            .chunk([3, 3])
            .fill_value(9)
            .alloc_time(AllocTime::Late)
            .create("late")
            .unwrap();
        late.write_slice(&[5], [slice(4, 5, 1), slice(4, 5, 1)])
            .unwrap();
        r.new_dataset::<i32>()
            .shape([10, 10])
            .chunk([3, 3])
            .alloc_time(AllocTime::Late)
            .create("late_unwritten")
            .unwrap();
        // Filters cannot be combined with "never" (libhdf5 refuses too).
        assert!(
            r.new_dataset::<f64>()
                .shape([10])
                .chunk([5])
                .deflate(1)
                .fill_time(FillTime::Never)
                .create("bad")
                .is_err()
        );
        f.close().unwrap();
    }
    let s = |n| h5py_storage(&path, n);
    let v = s("contig_default");
    assert_eq!(
        (
            v["layout"].as_str(),
            v["alloc"].as_str(),
            v["fill"].as_str()
        ),
        (Some("contiguous"), Some("late"), Some("ifset"))
    );
    assert_eq!(v["storage"], 0);
    let v = s("contig_late_written");
    assert_eq!(
        (v["alloc"].as_str(), v["storage"].as_u64()),
        (Some("late"), Some(400))
    );
    let v = s("contig_early");
    assert_eq!(
        (v["alloc"].as_str(), v["storage"].as_u64()),
        (Some("early"), Some(400))
    );
    let v = s("chunk_default");
    assert_eq!(
        (v["alloc"].as_str(), v["chunks"].as_u64()),
        (Some("incr"), Some(0))
    );
    for n in ["early_fa", "early_ea_z", "early_bt2", "early_v1"] {
        let v = s(n);
        assert_eq!(
            (v["alloc"].as_str(), v["chunks"].as_u64()),
            (Some("early"), Some(16)),
            "{n}"
        );
    }
    let v = s("early_never");
    assert_eq!(
        (
            v["alloc"].as_str(),
            v["fill"].as_str(),
            v["chunks"].as_u64()
        ),
        (Some("early"), Some("never"), Some(16))
    );
    let v = s("early_alloc");
    assert_eq!(
        (v["fill"].as_str(), v["chunks"].as_u64()),
        (Some("alloc"), Some(16))
    );
    let v = s("late");
    assert_eq!(
        (v["alloc"].as_str(), v["chunks"].as_u64()),
        (Some("late"), Some(16))
    );
    let v = s("late_unwritten");
    assert_eq!(
        (v["alloc"].as_str(), v["chunks"].as_u64()),
        (Some("late"), Some(0))
    );
    // Values: fill where nothing was written, in allocated and unallocated storage alike.
    let mut late = vec![9i32; 100];
    late[44] = 5;
    let mut contig = vec![-3i32; 100];
    contig[10..13].copy_from_slice(&[1, 2, 3]);
    let exp = Expectations::new()
        .dataset(
            "/contig_default",
            DatasetExpect::new("<i4", &[100])
                .contiguous()
                .digest(digest_le(&[0i32; 100])),
        )
        .dataset(
            "/contig_late_written",
            DatasetExpect::new("<i4", &[100])
                .contiguous()
                .digest(digest_le(&contig)),
        )
        .dataset(
            "/contig_early",
            DatasetExpect::new("<i4", &[100])
                .contiguous()
                .digest(digest_le(&[-3i32; 100])),
        )
        .dataset(
            "/early_fa",
            DatasetExpect::new("<f8", &[12, 10]).digest(digest_le(&[1.25f64; 120])),
        )
        .dataset(
            "/early_ea_z",
            DatasetExpect::new("<f8", &[12, 10])
                .gzip(6)
                .digest(digest_le(&[1.25f64; 120])),
        )
        .dataset(
            "/early_bt2",
            DatasetExpect::new("<f8", &[12, 10]).digest(digest_le(&[1.25f64; 120])),
        )
        .dataset(
            "/early_v1",
            DatasetExpect::new("<f8", &[12, 10])
                .gzip(6)
                .digest(digest_le(&[1.25f64; 120])),
        )
        .dataset(
            "/early_alloc",
            DatasetExpect::new("<f8", &[10, 10]).digest(digest_le(&[0f64; 100])),
        )
        .dataset(
            "/late",
            DatasetExpect::new("<i4", &[10, 10]).digest(digest_le(&late)),
        );
    check(&path, &exp);
    let f = h5::File::open(&path).unwrap();
    let got: Vec<i32> = f
        .dataset("late")
        .unwrap()
        .read::<i32>()
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(got, late);
    let got: Vec<f64> = f
        .dataset("early_ea_z")
        .unwrap()
        .read::<f64>()
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(got, vec![1.25; 120]);
}

/// An index laid out again at every flush puts its blocks under flush dependencies and frees
/// the space of its previous blocks: a file flushed after every append is hardly larger than
/// one flushed once.
#[test]
fn relaid_indexes_free_their_old_blocks() {
    let sizes: Vec<u64> = [false, true]
        .iter()
        .map(|&every| {
            let (_d, path) = tmp("relaid.h5");
            {
                let f = h5::File::create(&path).unwrap();
                let root = f.root().unwrap();
                let mut ea = root
                    .new_dataset::<i32>()
                    .shape([0, 4])
                    .max_shape([None, Some(4)])
                    .chunk([2, 4])
                    .chunk_index(ChunkIndexKind::ExtensibleArray)
                    .create("ea")
                    .unwrap();
                let mut bt = root
                    .new_dataset::<i32>()
                    .shape([0, 4])
                    .max_shape([None, None])
                    .chunk([1, 4])
                    .chunk_index(ChunkIndexKind::BtreeV2)
                    .create("bt")
                    .unwrap();
                for r in 0..300usize {
                    let row: Vec<i32> = (0..4).map(|j| (r * 4 + j) as i32).collect();
                    for d in [&mut ea, &mut bt] {
                        d.resize([r + 1, 4]).unwrap();
                        d.write_slice(&row, [slice(r, r + 1, 1), slice(0, 4, 1)])
                            .unwrap();
                    }
                    if every {
                        f.flush().unwrap();
                    }
                }
                if every {
                    assert!(f.metadata_cache_stats().unwrap().flush_deps_created > 300);
                }
                f.close().unwrap();
            }
            let all: Vec<i32> = (0..1200).collect();
            let exp = Expectations::new()
                .dataset(
                    "/ea",
                    DatasetExpect::new("<i4", &[300, 4]).digest(digest_le(&all)),
                )
                .dataset(
                    "/bt",
                    DatasetExpect::new("<i4", &[300, 4]).digest(digest_le(&all)),
                );
            check(&path, &exp);
            std::fs::metadata(&path).unwrap().len()
        })
        .collect();
    eprintln!(
        "file sizes: flushed once {}, after every append {}",
        sizes[0], sizes[1]
    );
    // Delayed reuse (docs/design.md §6): the blocks an index had at one flush are reused only
    // after the next one, so flushing at every append keeps up to two layouts' worth.
    assert!(
        sizes[1] < sizes[0] + sizes[0] * 3 / 4,
        "flushing after every append grew the file from {} to {} bytes",
        sizes[0],
        sizes[1]
    );
}

/// A sparse extensible array: chunks far apart put data blocks in high super blocks, where data
/// blocks hold more than 1024 elements and are paged (with the super block's page bitmap).
#[test]
fn sparse_extensible_arrays_page_their_big_data_blocks() {
    let (_d, path) = tmp("sparse.h5");
    let rows = 300_001usize;
    let written = [0usize, 5, 1000, 70_000, 299_999, 300_000];
    let mut all = vec![-1i32; rows * 3];
    {
        let f = h5::File::create(&path).unwrap();
        let ds = f
            .root()
            .unwrap()
            .new_dataset::<i32>()
            .shape([rows, 3])
            .max_shape([None, Some(3)])
            .chunk([1, 3])
            .fill_value(-1)
            .chunk_index(ChunkIndexKind::ExtensibleArray)
            .create("ea")
            .unwrap();
        for &r in &written {
            let v = [r as i32, -(r as i32), 7];
            ds.write_slice(&v, [slice(r, r + 1, 1), slice(0, 3, 1)])
                .unwrap();
            all[r * 3..r * 3 + 3].copy_from_slice(&v);
        }
        f.close().unwrap();
    }
    let exp = Expectations::new().dataset(
        "/ea",
        DatasetExpect::new("<i4", &[rows as u64, 3])
            .maxshape(&[None, Some(3)])
            .digest(digest_le(&all))
            .spot(&[300_000, 1], serde_json::json!(-300_000)),
    );
    if let Err(e) = check_with_h5py(&path, &exp) {
        panic!("h5py disagrees with what h5 wrote:\n{e}");
    }
    h5dump(&["-H"], &path).unwrap_or_else(|e| panic!("h5dump failed: {e}"));
    h5dump(&["-d", "/ea", "-s", "299999,0", "-c", "2,3"], &path)
        .unwrap_or_else(|e| panic!("h5dump failed: {e}"));
    assert_eq!(h5py_chunk_count(&path, "ea"), written.len());
    // h5 reads the written rows and their neighbours back (reading all 300,001 chunks one by
    // one is slow in a debug build).
    let f = h5::File::open(&path).unwrap();
    let ds = f.dataset("ea").unwrap();
    for &r in &written {
        let (a, b) = (r.saturating_sub(1), (r + 2).min(rows));
        let got: Vec<i32> = ds
            .read_slice::<i32>([slice(a, b, 1), slice(0, 3, 1)])
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(got, all[a * 3..b * 3], "rows {a}..{b}");
    }
}

/// A metadata cache far smaller than the indexes: blocks are evicted between flushes (taking
/// their flush dependencies with them) and re-laid indexes still come out whole.
#[test]
fn a_tiny_metadata_cache_still_writes_whole_indexes() {
    use ChunkIndexKind as K;
    let (_d, path) = tmp("tiny_index.h5");
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
    let kinds = [
        (K::FixedArray, [Some(1200), Some(4)]),
        (K::ExtensibleArray, [None, Some(4)]),
        (K::BtreeV2, [None, None]),
    ];
    let mut exp = Expectations::new();
    {
        let f = h5::File::create_with(&path, &access, &h5::CreateOptions::default()).unwrap();
        let root = f.root().unwrap();
        let mut sets: Vec<h5::Dataset> = kinds
            .iter()
            .map(|(k, max)| {
                root.new_dataset::<i32>()
                    .shape([0, 4])
                    .max_shape(max)
                    .chunk([1, 4])
                    .chunk_index(*k)
                    .create(&format!("{k:?}"))
                    .unwrap()
            })
            .collect();
        for step in 0..6usize {
            for d in &mut sets {
                let n = d.shape()[0];
                d.resize([n + 200, 4]).unwrap();
                let v: Vec<i32> = (n * 4..(n + 200) * 4).map(|x| x as i32).collect();
                d.write_slice(&v, [slice(n, n + 200, 1), slice(0, 4, 1)])
                    .unwrap();
            }
            // A few groups between flushes, so that other metadata competes for the cache.
            f.create_group(&format!("g{step}")).unwrap();
            f.flush().unwrap();
        }
        let stats = f.metadata_cache_stats().unwrap();
        assert!(
            stats.total_evictions > 0,
            "the cache never evicted: {stats:?}"
        );
        f.close().unwrap();
    }
    let all: Vec<i32> = (0..1200 * 4).collect();
    for (k, max) in &kinds {
        let max: Vec<Option<u64>> = max.iter().map(|m| m.map(|v| v as u64)).collect();
        exp = exp.dataset(
            &format!("/{k:?}"),
            DatasetExpect::new("<i4", &[1200, 4])
                .maxshape(&max)
                .digest(digest_le(&all)),
        );
    }
    check(&path, &exp);
    let f = h5::File::open(&path).unwrap();
    for (k, _) in &kinds {
        let ds = f.dataset(&format!("{k:?}")).unwrap();
        assert_eq!(ds.chunk_index(), Some(*k));
        let got: Vec<i32> = ds.read::<i32>().unwrap().into_iter().collect();
        assert_eq!(got, all, "{k:?}");
    }
}
