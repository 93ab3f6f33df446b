//! Every flush of a legacy SWMR writer leaves a readable file at every instant: the writes of
//! each flush are recorded, and the file as it stands after every prefix of them (what a reader
//! in another process may find at that moment) is opened with SWMR read access and checked —
//! each dataset's extent never below the last flush's, every value in it the generator's. This
//! is the ordering rule of docs/design.md §8.6 (raw data, chunk index children before parents,
//! the object header with the new extent, the superblock last) checked write by write.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use h5::{CreateOptions, FileAccess, FormatBounds};
use h5_io::{LockMode, MemoryStorage, ReadSegment, Storage, WriteSegment};

/// One change of the file's bytes.
#[derive(Clone, Debug)]
enum Op {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

/// Forwards to the file and records every write and length change.
#[derive(Debug)]
struct Recorder {
    inner: Arc<dyn Storage>,
    ops: Arc<Mutex<Vec<Op>>>,
}

impl Storage for Recorder {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> h5_io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> h5_io::Result<()> {
        self.ops
            .lock()
            .unwrap()
            .push(Op::Write(offset, data.to_vec()));
        self.inner.write_at(offset, data)
    }
    fn len(&self) -> h5_io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> h5_io::Result<()> {
        self.ops.lock().unwrap().push(Op::SetLen(len));
        self.inner.set_len(len)
    }
    fn sync(&self) -> h5_io::Result<()> {
        self.inner.sync()
    }
    fn lock(&self, mode: LockMode) -> h5_io::Result<()> {
        self.inner.lock(mode)
    }
    fn unlock(&self) -> h5_io::Result<()> {
        self.inner.unlock()
    }
    fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> h5_io::Result<()> {
        self.inner.read_vectored(segments)
    }
    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> h5_io::Result<()> {
        {
            let mut ops = self.ops.lock().unwrap();
            for s in segments {
                ops.push(Op::Write(s.offset, s.data.to_vec()));
            }
        }
        self.inner.write_vectored(segments)
    }
}

fn apply(image: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write(at, data) => {
            let r: Range<usize> = *at as usize..*at as usize + data.len();
            if image.len() < r.end {
                image.resize(r.end, 0);
            }
            image[r].copy_from_slice(data);
        }
        Op::SetLen(n) => image.resize(*n as usize, 0),
    }
}

fn a(i: u64) -> i64 {
    i as i64 * 7 + 1
}
fn c(i: u64, j: u64) -> i32 {
    i as i32 * 3 - j as i32
}
fn z(i: u64) -> i64 {
    (i * 2_654_435_761 % 1_000_003) as i64
}

/// Opens `image` as a SWMR reader would and checks every dataset against the generator;
/// returns the row counts, or `None` when a structure fails its checksum: a write of the flush
/// is under way in it (a structure may be written in several runs), which libhdf5's readers
/// retry until the flush has moved on. Values are never wrong and extents never shrink.
fn check(image: &[u8], floor: &[u64; 3], at: &str) -> Option<[u64; 3]> {
    let storage = Arc::new(MemoryStorage::with_data(image.to_vec()));
    let torn = |e: h5::Error| -> Option<[u64; 3]> {
        assert_eq!(e.kind(), h5::ErrorKind::Corrupted, "{at}: {e}");
        None
    };
    let f = match h5::File::from_storage(storage, &FileAccess::new().swmr_read(true), None) {
        Ok(f) => f,
        Err(e) => return torn(e),
    };
    let mut rows = [0u64; 3];
    for (k, name) in ["a", "c", "z"].into_iter().enumerate() {
        let values: Vec<i64> = match f.dataset(name).and_then(|d| d.read_vec()) {
            Ok(v) => v,
            Err(e) => return torn(e),
        };
        let width = if name == "c" { 2 } else { 1 };
        rows[k] = values.len() as u64 / width;
        assert!(
            rows[k] >= floor[k],
            "{at}: {name} shrank to {} rows from {}",
            rows[k],
            floor[k]
        );
        for (i, v) in values.iter().enumerate() {
            let (r, j) = (i as u64 / width, i as u64 % width);
            let want = match name {
                "a" => a(r),
                "c" => i64::from(c(r, j)),
                _ => z(r),
            };
            assert_eq!(*v, want, "{at}: {name}[{r},{j}] of {} rows", rows[k]);
        }
    }
    Some(rows)
}

#[test]
fn every_prefix_of_every_swmr_flush_reads_consistently() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("order.h5");
    let ops = Arc::new(Mutex::new(Vec::new()));
    let rec = Arc::clone(&ops);
    let access = FileAccess::new().storage_decorator(move |inner| {
        Arc::new(Recorder {
            inner,
            ops: Arc::clone(&rec),
        }) as Arc<dyn Storage>
    });
    let options = CreateOptions::with_bounds(FormatBounds::V110, FormatBounds::LATEST);
    let f = h5::File::create_with(&path, &access, &options).unwrap();
    // Extensible arrays: one and two dimensional, deflated.
    let da = f
        .new_dataset::<i64>()
        .shape([0])
        .max_shape([None])
        .chunk([4])
        .create("a")
        .unwrap();
    let dc = f
        .new_dataset::<i32>()
        .shape([0, 2])
        .max_shape([None, Some(2)])
        .chunk([2, 2])
        .create("c")
        .unwrap();
    let dz = f
        .new_dataset::<i64>()
        .shape([0])
        .max_shape([None])
        .chunk([8])
        .deflate(4)
        .create("z")
        .unwrap();
    f.start_swmr_write().unwrap();
    let mut image = std::fs::read(&path).unwrap();
    ops.lock().unwrap().clear();
    let mut floor = check(&image, &[0; 3], "start").expect("a complete file");
    let mut n = 0u64;
    let (mut prefixes, mut torn) = (0, 0);
    for round in 0..60u64 {
        let k = 1 + round % 3;
        let rows = n..n + k;
        da.append(&rows.clone().map(a).collect::<Vec<_>>()).unwrap();
        let cc: Vec<i32> = rows
            .clone()
            .flat_map(|i| (0..2).map(move |j| c(i, j)))
            .collect();
        dc.append(&h5::ndarray::Array2::from_shape_vec((k as usize, 2), cc).unwrap())
            .unwrap();
        dz.append(&rows.clone().map(z).collect::<Vec<_>>()).unwrap();
        n += k;
        f.flush().unwrap();
        let flush: Vec<Op> = std::mem::take(&mut *ops.lock().unwrap());
        assert!(!flush.is_empty());
        for (i, op) in flush.iter().enumerate() {
            apply(&mut image, op);
            prefixes += 1;
            // Within a flush the extent only grows; the next flush starts from here.
            match check(&image, &floor, &format!("round {round}, after write {i}")) {
                Some(seen) => floor = seen,
                None => torn += 1,
            }
        }
        let last = check(&image, &floor, &format!("round {round}, flushed"));
        assert_eq!(
            last,
            Some([n, n, n]),
            "round {round}: the flush published every row"
        );
        assert_eq!(image, std::fs::read(&path).unwrap());
    }
    assert!(
        prefixes > 100 && torn < prefixes / 2,
        "{prefixes} states, {torn} torn"
    );
    // Rows appended and not flushed: close publishes them in the same order, then clears the
    // marks.
    da.append(&[a(n)]).unwrap();
    dc.append(&h5::ndarray::arr2(&[[c(n, 0), c(n, 1)]]))
        .unwrap();
    dz.append(&[z(n)]).unwrap();
    n += 1;
    f.close().unwrap();
    for (i, op) in std::mem::take(&mut *ops.lock().unwrap()).iter().enumerate() {
        apply(&mut image, op);
        if let Some(seen) = check(&image, &floor, &format!("close, after write {i}")) {
            floor = seen;
        }
    }
    assert_eq!(floor, [n, n, n]);
    assert_eq!(image, std::fs::read(&path).unwrap());
    assert_eq!(image[11], 0, "status flags cleared");
}
