//! Point writes, multi-dataset writes, direct chunk I/O and the sticky failure state, checked
//! with h5py (libhdf5 1.14.4). Needs `scripts/setup-tools` (run by the README test command);
//! fails without it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use h5_io::testkit::{Hooks, Intercept};
use h5_io::{IoOp, MemoryStorage, Storage};
use h5_testkit::verify::{DatasetExpect, Expectations, check_with_h5py, run_python};
use serde_json::json;

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    (dir, p)
}

fn check(path: &Path, exp: &Expectations) {
    if let Err(e) = check_with_h5py(path, exp) {
        panic!("h5py disagrees:\n{e}");
    }
}

/// Points written into contiguous and chunked datasets land where libhdf5 reads them.
#[test]
fn point_writes() {
    let (_d, path) = tmp("points.h5");
    let pts: Vec<Vec<u64>> = vec![vec![0, 0], vec![3, 4], vec![1, 2], vec![2, 4]];
    {
        let f = h5::File::create(&path).unwrap();
        let root = f.root().unwrap();
        let c = root.new_dataset::<i16>().shape([4, 5]).create("c").unwrap();
        c.write_points(&pts, &[1i16, 2, 3, 4]).unwrap();
        let k = root
            .new_dataset::<f64>()
            .shape([4, 5])
            .chunk([2, 2])
            .deflate(1)
            .create("k")
            .unwrap();
        k.write_points(&pts, &[1.5f64, 2.5, 3.5, 4.5]).unwrap();
        // A point outside the dataset: the chunk cache's selection error, naming the dataset.
        let e = k.write_points(&[vec![9, 9]], &[0.0f64]).unwrap_err();
        assert!(
            matches!(e.inner(), h5::Error::Chunks(_) | h5::Error::Invalid(_)),
            "{e:?}"
        );
        assert!(e.to_string().contains("/k"), "{e}");
        assert!(matches!(
            k.write_points(&pts, &[1.0f64]),
            Err(h5::Error::Invalid(_))
        ));
        f.close().unwrap();
    }
    let grid = |v: [f64; 4]| {
        let mut g = vec![vec![0.0; 5]; 4];
        for (p, x) in pts.iter().zip(v) {
            g[p[0] as usize][p[1] as usize] = x;
        }
        g
    };
    let ints: Vec<Vec<i64>> = grid([1.0, 2.0, 3.0, 4.0])
        .into_iter()
        .map(|r| r.into_iter().map(|x| x as i64).collect())
        .collect();
    check(
        &path,
        &Expectations::new()
            .dataset("/c", DatasetExpect::new("<i2", &[4, 5]).values(json!(ints)))
            .dataset(
                "/k",
                DatasetExpect::new("<f8", &[4, 5]).values(json!(grid([1.5, 2.5, 3.5, 4.5]))),
            ),
    );
}

/// Several datasets written in one call.
#[test]
fn multi_dataset_writes() {
    let (_d, path) = tmp("many.h5");
    {
        let f = h5::File::create(&path).unwrap();
        let root = f.root().unwrap();
        let a = root.new_dataset::<u8>().shape([6]).create("a").unwrap();
        let b = root
            .new_dataset::<i32>()
            .shape([3, 3])
            .chunk([2, 2])
            .shuffle()
            .deflate(3)
            .create("b")
            .unwrap();
        let c = root
            .new_dataset::<f32>()
            .shape([100])
            .chunk([7])
            .create("c")
            .unwrap();
        let av: Vec<u8> = (10..16).collect();
        let bv: Vec<u8> = (0..9i32).flat_map(|i| (i * -3).to_le_bytes()).collect();
        let cv: Vec<u8> = (0..100)
            .flat_map(|i| (i as f32 / 4.0).to_le_bytes())
            .collect();
        f.write_many_raw(&[(&a, &av), (&b, &bv), (&c, &cv)])
            .unwrap();
        assert!(matches!(
            f.write_many_raw(&[(&a, &av[..5])]),
            Err(h5::Error::Invalid(_))
        ));
        let back = f.read_many_raw(&[&a, &b, &c]).unwrap();
        assert_eq!(back, vec![av, bv, cv]);
        f.close().unwrap();
    }
    check(
        &path,
        &Expectations::new()
            .dataset(
                "/a",
                DatasetExpect::new("|u1", &[6]).values(json!([10, 11, 12, 13, 14, 15])),
            )
            .dataset(
                "/b",
                DatasetExpect::new("<i4", &[3, 3]).values(json!([
                    [0, -3, -6],
                    [-9, -12, -15],
                    [-18, -21, -24]
                ])),
            )
            .dataset(
                "/c",
                DatasetExpect::new("<f4", &[100])
                    .values(json!((0..100).map(|i| i as f64 / 4.0).collect::<Vec<_>>())),
            ),
    );
}

/// Chunks read directly come back as stored (compressed) with their mask; written directly
/// (compressed by someone else, or raw with the filter marked skipped) they read back in
/// libhdf5 as values. libhdf5's own direct read agrees with ours.
#[test]
fn direct_chunk_io() {
    let (_d, path) = tmp("direct.h5");
    let values: Vec<i32> = (0..64).map(|i| i * i).collect();
    {
        let f = h5::File::create(&path).unwrap();
        let root = f.root().unwrap();
        let d = root
            .new_dataset::<i32>()
            .shape([4, 32])
            .chunk([2, 16])
            .deflate(6)
            .create("d")
            .unwrap();
        d.write_slice(
            &values[..32],
            [
                ndarray::SliceInfoElem::Slice {
                    start: 0,
                    end: Some(2),
                    step: 1,
                },
                ndarray::SliceInfoElem::Slice {
                    start: 0,
                    end: Some(16),
                    step: 1,
                },
            ],
        )
        .unwrap();
        // Written through the cache, read back as stored: compressed, no filter skipped.
        let (mask, image) = d.read_chunk(&[0, 0]).unwrap().expect("chunk written");
        assert_eq!(mask, 0);
        assert!(image.len() < 32 * 4, "the stored image is compressed");
        assert_eq!(d.read_chunk(&[2, 0]).unwrap(), None);
        assert!(matches!(d.read_chunk(&[1, 0]), Err(h5::Error::Invalid(_))));
        // The same compressed image placed at another chunk, and raw bytes with deflate
        // marked skipped at a third.
        d.write_chunk(&[2, 16], 0, &image).unwrap();
        let raw: Vec<u8> = values[32..].iter().flat_map(|v| v.to_le_bytes()).collect();
        d.write_chunk(&[0, 16], 1, &raw).unwrap();
        assert_eq!(d.read_chunk(&[0, 16]).unwrap(), Some((1, raw.clone())));
        f.close().unwrap();
    }
    let mut want = vec![vec![0i32; 32]; 4];
    for r in 0..2 {
        for c in 0..16 {
            want[r][c] = values[r * 16 + c];
            want[r + 2][c + 16] = values[r * 16 + c];
            want[r][c + 16] = values[32 + r * 16 + c];
        }
    }
    check(
        &path,
        &Expectations::new().dataset(
            "/d",
            DatasetExpect::new("<i4", &[4, 32])
                .chunks(&[2, 16])
                .gzip(6)
                .values(json!(want)),
        ),
    );
    // libhdf5's H5Dread_chunk sees the same mask and bytes as h5's read_chunk.
    let out = run_python(
        "import sys, h5py\nd = h5py.File(sys.argv[1])['d']\nm, b = d.id.read_direct_chunk((0, 16))\nprint(m, b.hex())",
        &[path.to_str().unwrap()],
    );
    let f = h5::File::open(&path).unwrap();
    let (mask, bytes) = f
        .dataset("d")
        .unwrap()
        .read_chunk(&[0, 16])
        .unwrap()
        .unwrap();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(out.trim(), format!("{mask} {hex}"));
}

/// Storage hooks that fail every write, length change and sync while `broken` is set (reads
/// always work).
#[derive(Debug, Default)]
struct Flaky {
    broken: AtomicBool,
}

impl Flaky {
    fn fail(&self, op: IoOp, offset: u64) -> h5_io::Result<()> {
        if self.broken.load(Ordering::SeqCst) {
            return Err(h5_io::Error::Io {
                op,
                offset,
                source: std::io::Error::other("disk on fire"),
            });
        }
        Ok(())
    }
}

impl Hooks for Flaky {
    fn write_at(&self, inner: &dyn Storage, offset: u64, data: &[u8]) -> h5_io::Result<()> {
        self.fail(IoOp::Write, offset)?;
        inner.write_at(offset, data)
    }
    fn set_len(&self, inner: &dyn Storage, len: u64) -> h5_io::Result<()> {
        self.fail(IoOp::SetLen, len)?;
        inner.set_len(len)
    }
    fn sync(&self, inner: &dyn Storage) -> h5_io::Result<()> {
        self.fail(IoOp::Sync, 0)?;
        inner.sync()
    }
}

/// A flush whose writes fail reports the storage error, and from then on the handle refuses
/// every change with `Failed` (even once the storage works again) while reads still work.
#[test]
fn a_failed_flush_leaves_the_handle_failed() {
    let storage = Arc::new(Intercept::new(MemoryStorage::new(), Flaky::default()));
    let f = h5::File::create_in(
        storage.clone(),
        &h5::FileAccess::default(),
        &h5::CreateOptions::default(),
        None,
    )
    .unwrap();
    let root = f.root().unwrap();
    let d = root
        .new_dataset::<u32>()
        .create_with_data("d", &[1, 2, 3])
        .unwrap();
    f.flush().unwrap();
    d.write(&[4u32, 5, 6]).unwrap();
    storage.hooks().broken.store(true, Ordering::SeqCst);
    let e = f.flush().unwrap_err();
    assert!(
        matches!(
            e.inner(),
            h5::Error::Io(_) | h5::Error::Chunks(_) | h5::Error::Cache(_)
        ),
        "{e:?}"
    );
    storage.hooks().broken.store(false, Ordering::SeqCst);
    assert!(matches!(f.flush(), Err(h5::Error::Failed(_))));
    assert!(matches!(d.write(&[7u32, 8, 9]), Err(h5::Error::Failed(_))));
    assert!(matches!(root.create_group("g"), Err(h5::Error::Failed(_))));
    assert!(matches!(
        root.write_attr_scalar("a", 1u8),
        Err(h5::Error::Failed(_))
    ));
    // Reads still answer (from the caches).
    assert_eq!(d.read_1d::<u32>().unwrap().to_vec(), vec![4, 5, 6]);
}
