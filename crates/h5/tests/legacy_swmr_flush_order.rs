//! Every flush of a legacy SWMR writer leaves a readable file at every instant: the writes of
//! each flush are recorded, and the file as it stands after every prefix of them (what a reader
//! in another process may find at that moment) is opened with SWMR read access and checked —
//! each dataset's extent never below the last flush's, every value in it the generator's. This
//! is the ordering rule of docs/design.md §8.6 (raw data, chunk index children before parents,
//! the object header with the new extent, the superblock last) checked write by write.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use h5::{CreateOptions, FileAccess, FormatBounds};
use h5_io::testkit::{Hooks, Intercept};
use h5_io::{MemoryStorage, Storage};

/// One change of the file's bytes.
#[derive(Clone, Debug)]
enum Op {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

/// Storage hooks that record every write and length change of the file, each just before it is
/// made (a vector write as its segments, in slice order).
#[derive(Debug)]
struct Recorder {
    ops: Arc<Mutex<Vec<Op>>>,
}

impl Hooks for Recorder {
    fn write_at(&self, inner: &dyn Storage, offset: u64, data: &[u8]) -> h5_io::Result<()> {
        self.ops
            .lock()
            .unwrap()
            .push(Op::Write(offset, data.to_vec()));
        inner.write_at(offset, data)
    }
    fn set_len(&self, inner: &dyn Storage, len: u64) -> h5_io::Result<()> {
        self.ops.lock().unwrap().push(Op::SetLen(len));
        inner.set_len(len)
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
        Arc::new(Intercept::new(
            inner,
            Recorder {
                ops: Arc::clone(&rec),
            },
        )) as Arc<dyn Storage>
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

/// The generator of the two-dimensional datasets (never the fill value 0).
fn v(i: u64, j: u64) -> i32 {
    (i * 1000 + j) as i32 + 1
}

/// The extent of the B-tree datasets after round `r`: both dimensions grow.
fn extent(r: u64) -> (u64, u64) {
    (3 + r * 3 / 2, 2 + r / 3)
}

/// Opens `image` with SWMR read access and checks the two-dimensional datasets `names`
/// against [`v`]; returns their extents (or `None` when a structure fails its checksum, when
/// `torn_ok`). Extents never below `floor`, values never wrong.
fn check_2d(
    image: &[u8],
    names: &[&str],
    floor: &[(u64, u64)],
    torn_ok: bool,
    at: &str,
) -> Option<Vec<(u64, u64)>> {
    let storage = Arc::new(MemoryStorage::with_data(image.to_vec()));
    let torn = |e: h5::Error| -> Option<Vec<(u64, u64)>> {
        assert!(torn_ok && e.kind() == h5::ErrorKind::Corrupted, "{at}: {e}");
        None
    };
    let f = match h5::File::from_storage(storage, &FileAccess::new().swmr_read(true), None) {
        Ok(f) => f,
        Err(e) => return torn(e),
    };
    let mut seen = Vec::new();
    for (k, name) in names.iter().enumerate() {
        let d = match f.dataset(name) {
            Ok(d) => d,
            Err(e) => return torn(e),
        };
        let shape = d.shape();
        let (rows, cols) = (shape[0] as u64, shape[1] as u64);
        assert!(
            rows >= floor[k].0 && cols >= floor[k].1,
            "{at}: {name} shrank to {rows}x{cols} from {:?}",
            floor[k]
        );
        let values: Vec<i32> = match d.read_vec() {
            Ok(v) => v,
            Err(e) => return torn(e),
        };
        for (n, got) in values.iter().enumerate() {
            let (i, j) = (n as u64 / cols, n as u64 % cols);
            assert_eq!(*got, v(i, j), "{at}: {name}[{i},{j}] of {rows}x{cols}");
        }
        seen.push((rows, cols));
    }
    Some(seen)
}

/// Byte ranges of the first chunk of the version 2 object header at `addr` (its dataspace
/// message: the extent) and of every v2 B-tree header (`BTHD`) in `image`.
fn headers_in(image: &[u8], oh: u64) -> Vec<Range<usize>> {
    let at = oh as usize;
    assert_eq!(&image[at..at + 4], b"OHDR");
    let flags = image[at + 5];
    let mut p = at + 6;
    if flags & 0x20 != 0 {
        p += 16;
    }
    if flags & 0x10 != 0 {
        p += 4;
    }
    let width = 1usize << (flags & 3);
    let mut size = [0u8; 8];
    size[..width].copy_from_slice(&image[p..p + width]);
    let end = p + width + u64::from_le_bytes(size) as usize + 4;
    let mut ranges = Vec::new();
    ranges.push(at..end);
    // Signature, version, type, node size, record size, depth, split and merge percents,
    // root address, root records, total records, checksum (8-byte addresses and lengths).
    const BTHD_LEN: usize = 4 + 1 + 1 + 4 + 2 + 2 + 1 + 1 + 8 + 2 + 8 + 4;
    let mut from = 0;
    while let Some(i) = image[from..].windows(4).position(|w| w == b"BTHD") {
        let start = from + i;
        ranges.push(start..start + BTHD_LEN);
        from = start + 4;
    }
    ranges
}

/// A dataset with two unlimited dimensions (a version 2 B-tree chunk index) grows in both over
/// 60 flushes, in 2×2 chunks (hundreds of records: leaves split, the root grows): every prefix
/// of every flush reads consistently, as for the arrays above. And a reader that read the
/// object header and the B-tree header at the last flush and follows them into the file as it
/// stands at any instant of the next (what an h5py reader between two `refresh()` calls does)
/// reads the last flush's extent and values without a single error: every node it reaches is
/// intact, as the writer moved each node it changed (shadowing). Without shadowing the leaves
/// change in place under that reader's stale record counts (docs/design.md §8.6).
#[test]
fn every_prefix_of_every_swmr_flush_reads_a_btree_dataset_consistently() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bt.h5");
    let ops = Arc::new(Mutex::new(Vec::new()));
    let rec = Arc::clone(&ops);
    let access = FileAccess::new().storage_decorator(move |inner| {
        Arc::new(Intercept::new(
            inner,
            Recorder {
                ops: Arc::clone(&rec),
            },
        )) as Arc<dyn Storage>
    });
    let options = CreateOptions::with_bounds(FormatBounds::V110, FormatBounds::LATEST);
    let f = h5::File::create_with(&path, &access, &options).unwrap();
    let new = |name: &str, deflate: bool| {
        let b = f
            .new_dataset::<i32>()
            .shape([0, 0])
            .max_shape([None, None])
            .chunk([2, 2]);
        let b = if deflate { b.deflate(4) } else { b };
        let d = b.create(name).unwrap();
        assert_eq!(d.chunk_index(), Some(h5::ChunkIndexKind::BtreeV2));
        d
    };
    let dc = new("c", false);
    let dz = new("z", true);
    let oh = dc.address();
    f.start_swmr_write().unwrap();
    let names = ["c", "z"];
    let mut image = std::fs::read(&path).unwrap();
    ops.lock().unwrap().clear();
    let mut floor = check_2d(&image, &names, &[(0, 0); 2], false, "start").unwrap();
    let (mut rows, mut cols) = (0u64, 0u64);
    let (mut prefixes, mut torn, mut stale_reads) = (0, 0, 0);
    for round in 0..60u64 {
        let (r2, c2) = extent(round);
        // The new rows, then the new columns of the old rows.
        let fill = |i0: u64, i1: u64, j0: u64, j1: u64| {
            h5::ndarray::Array2::from_shape_fn(
                ((i1 - i0) as usize, (j1 - j0) as usize),
                |(i, j)| v(i0 + i as u64, j0 + j as u64),
            )
        };
        for d in [&dc, &dz] {
            d.resize([r2 as usize, c2 as usize]).unwrap();
            d.write_slice(
                &fill(rows, r2, 0, c2),
                h5::ndarray::s![rows as usize..r2 as usize, 0..c2 as usize],
            )
            .unwrap();
            if c2 > cols && rows > 0 {
                d.write_slice(
                    &fill(0, rows, cols, c2),
                    h5::ndarray::s![0..rows as usize, cols as usize..c2 as usize],
                )
                .unwrap();
            }
        }
        (rows, cols) = (r2, c2);
        f.flush().unwrap();
        let flush: Vec<Op> = std::mem::take(&mut *ops.lock().unwrap());
        assert!(!flush.is_empty());
        // What a reader holds from the last flush: the object header of "c" and the B-tree
        // headers, and the extent of "c" they describe.
        let published = image.clone();
        let held = headers_in(&published, oh);
        let stale_floor = [floor[0]];
        for (i, op) in flush.iter().enumerate() {
            apply(&mut image, op);
            prefixes += 1;
            let at = format!("round {round}, after write {i}");
            match check_2d(&image, &names, &floor, true, &at) {
                Some(seen) => floor = seen,
                None => torn += 1,
            }
            let mut stale = image.clone();
            for r in &held {
                stale[r.clone()].copy_from_slice(&published[r.clone()]);
            }
            let seen = check_2d(&stale, &["c"], &stale_floor, false, &format!("stale {at}"));
            assert_eq!(seen, Some(stale_floor.to_vec()), "stale {at}");
            stale_reads += 1;
        }
        let last = check_2d(
            &image,
            &names,
            &floor,
            false,
            &format!("round {round}, flushed"),
        );
        assert_eq!(last, Some(vec![(rows, cols); 2]), "round {round}");
        assert_eq!(image, std::fs::read(&path).unwrap());
    }
    assert!(
        prefixes > 100 && torn < prefixes / 2 && stale_reads == prefixes,
        "{prefixes} states, {torn} torn"
    );
    assert!(
        (rows / 2) * (cols / 2) > 300,
        "hundreds of chunks: {rows}x{cols}"
    );
    f.close().unwrap();
    for op in std::mem::take(&mut *ops.lock().unwrap()).iter() {
        apply(&mut image, op);
    }
    assert_eq!(image, std::fs::read(&path).unwrap());
    let last = check_2d(&image, &names, &floor, false, "closed");
    assert_eq!(last, Some(vec![(rows, cols); 2]));
    // Both trees grew past one leaf: their headers' depth (bytes 12..14) is 1 or more.
    let trees = &headers_in(&image, oh)[1..];
    assert_eq!(trees.len(), 2);
    for t in trees {
        let depth = u16::from_le_bytes([image[t.start + 12], image[t.start + 13]]);
        assert!(depth >= 1, "B-tree depth {depth}");
    }
}
