//! Reads into the caller's memory: `read_into` and `read_slice_into` give the same values as
//! `read` and `read_slice` for every layout, convert like them, and refuse a destination of the
//! wrong length without touching it.

use h5::{Error, File};
use ndarray::SliceInfoElem;

fn range(start: usize, end: usize) -> SliceInfoElem {
    SliceInfoElem::Slice {
        start: start as isize,
        end: Some(end as isize),
        step: 1,
    }
}

/// A file with the same 40×30 int32 values stored contiguous, chunked, chunked with
/// shuffle + deflate, and compact.
fn sample(dir: &std::path::Path) -> (std::path::PathBuf, Vec<i32>) {
    let path = dir.join("into.h5");
    let values: Vec<i32> = (0..1200).map(|i| i * 7 - 3000).collect();
    let f = File::create(&path).expect("create");
    let root = f.root().expect("root");
    let b = || root.new_dataset::<i32>().shape([40, 30]);
    b().create("contiguous")
        .and_then(|d| d.write(&values))
        .expect("contiguous");
    b().chunk([16, 8])
        .create("chunked")
        .and_then(|d| d.write(&values))
        .expect("chunked");
    b().chunk([16, 8])
        .shuffle()
        .deflate(4)
        .create("deflated")
        .and_then(|d| d.write(&values))
        .expect("deflated");
    f.close().expect("close");
    (path, values)
}

const NAMES: [&str; 3] = ["contiguous", "chunked", "deflated"];

#[test]
fn read_into_matches_read_for_every_layout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, values) = sample(dir.path());
    let f = File::open(&path).expect("open");
    // One buffer reused for every dataset: it is overwritten completely each time.
    let mut buf = vec![i32::MIN; 1200];
    for name in NAMES {
        let ds = f.dataset(name).expect("dataset");
        buf.fill(i32::MIN);
        ds.read_into(&mut buf).expect("read_into");
        assert_eq!(buf, values, "{name}");
        let a: Vec<i32> = ds.read::<i32>().expect("read").into_iter().collect();
        assert_eq!(a, buf, "{name}");
    }
}

#[test]
fn read_into_converts_like_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, values) = sample(dir.path());
    let f = File::open(&path).expect("open");
    for name in NAMES {
        let ds = f.dataset(name).expect("dataset");
        let mut wide = vec![0f64; 1200];
        ds.read_into(&mut wide).expect("widening read");
        assert!(wide.iter().zip(&values).all(|(w, v)| *w == f64::from(*v)));
        // Narrowing is refused, as `read` refuses it.
        let mut narrow = vec![0i16; 1200];
        assert!(ds.read_into(&mut narrow).is_err(), "{name}");
        assert!(ds.read::<i16>().is_err(), "{name}");
    }
}

#[test]
fn read_slice_into_matches_read_slice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, values) = sample(dir.path());
    let f = File::open(&path).expect("open");
    for name in NAMES {
        let ds = f.dataset(name).expect("dataset");
        for (r0, r1, c0, c1) in [
            (0, 40, 0, 30),
            (3, 21, 5, 17),
            (39, 40, 29, 30),
            (16, 32, 8, 16),
        ] {
            let sel = [range(r0, r1), range(c0, c1)];
            let mut buf = vec![0i32; (r1 - r0) * (c1 - c0)];
            ds.read_slice_into(sel, &mut buf).expect("read_slice_into");
            let want: Vec<i32> = (r0..r1)
                .flat_map(|r| (c0..c1).map(move |c| (r, c)))
                .map(|(r, c)| values[r * 30 + c])
                .collect();
            assert_eq!(buf, want, "{name} [{r0}..{r1}, {c0}..{c1}]");
            let a: Vec<i32> = ds
                .read_slice::<i32>(sel)
                .expect("read_slice")
                .into_iter()
                .collect();
            assert_eq!(a, buf);
        }
    }
}

#[test]
fn a_destination_of_the_wrong_length_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = sample(dir.path());
    let f = File::open(&path).expect("open");
    let ds = f.dataset("deflated").expect("dataset");
    for len in [0, 1199, 1201] {
        let mut buf = vec![5i32; len];
        let e = ds.read_into(&mut buf).expect_err("wrong length");
        assert!(
            matches!(e, Error::Invalid(ref m) if m.contains("1200")),
            "{e}"
        );
        assert!(buf.iter().all(|&v| v == 5));
    }
    let mut buf = vec![5i32; 10];
    let e = ds
        .read_slice_into([range(0, 3), range(0, 3)], &mut buf)
        .expect_err("9 elements selected, 10 given");
    assert!(matches!(e, Error::Invalid(ref m) if m.contains('9')), "{e}");
    assert!(buf.iter().all(|&v| v == 5));
    // A selection outside the dataset is an error too.
    let mut buf = vec![0i32; 4];
    assert!(
        ds.read_slice_into([range(39, 41), range(0, 2)], &mut buf)
            .is_err()
    );
}

#[test]
fn large_reads_into_fresh_arrays_are_exact() {
    // 8 MiB: above the size from which fresh arrays get huge pages requested.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.h5");
    let n = 2 << 20;
    let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let f = File::create(&path).expect("create");
    f.root()
        .and_then(|g| {
            g.new_dataset::<f32>()
                .shape([n])
                .chunk([1 << 18])
                .create("d")
        })
        .and_then(|d| d.write(&values))
        .expect("write");
    f.close().expect("close");
    let ds = File::open(&path)
        .and_then(|f| f.dataset("d"))
        .expect("open");
    let a = ds.read::<f32>().expect("read");
    assert_eq!(a.as_slice().expect("standard layout"), values.as_slice());
    let raw = ds.read_raw().expect("read_raw");
    assert_eq!(raw.len(), n * 4);
    assert_eq!(raw[4..8], 0.5f32.to_le_bytes());
}
