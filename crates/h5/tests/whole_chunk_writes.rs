//! Whole chunks written straight from the caller's data, unfiltered or encoded (the chunk cache's
//! whole-chunk write path, issue 15): every chunk index, every allocation time and fill time,
//! edge chunks, chunks cached clean or dirty before the overwrite, another handle reading after
//! the write; values read back by h5 (before and after reopening) and by h5py, the edge chunks'
//! parts outside the extent read raw by h5py, and the chunk cache's statistics showing the
//! bytes that went around it (SCC-067, SCC-072).

use std::path::{Path, PathBuf};

use h5::{AllocTime, ChunkIndexKind, FillTime};
use h5_testkit::verify::{DatasetExpect, Expectations, check_with_h5py, digest_le, run_python};
use ndarray::SliceInfoElem as S;

/// 128 × 128 f32: 64 KiB, the smallest chunk written whole.
const CHUNK: [usize; 2] = [128, 128];
/// Three by two chunks; the last row and column of chunks are edge chunks.
const DIMS: [usize; 2] = [300, 200];
const FILL: f32 = -7.5;

fn all(n: usize) -> S {
    S::Slice {
        start: 0,
        end: Some(n as isize),
        step: 1,
    }
}

fn range(a: usize, b: usize) -> S {
    S::Slice {
        start: a as isize,
        end: Some(b as isize),
        step: 1,
    }
}

fn field(dims: [usize; 2], salt: f32) -> Vec<f32> {
    (0..dims[0] * dims[1])
        .map(|k| salt + (k % 9973) as f32 * 0.25)
        .collect()
}

struct Case {
    kind: ChunkIndexKind,
    dims: [usize; 2],
    max: [Option<usize>; 2],
    alloc: AllocTime,
    fill_time: FillTime,
}

fn cases() -> Vec<Case> {
    use ChunkIndexKind as K;
    let mut out = Vec::new();
    let fills = [FillTime::IfSet, FillTime::OnAlloc, FillTime::Never];
    let mut n = 0;
    for kind in [
        K::BtreeV1,
        K::SingleChunk,
        K::Implicit,
        K::FixedArray,
        K::ExtensibleArray,
        K::BtreeV2,
    ] {
        let (dims, max) = match kind {
            K::SingleChunk => (CHUNK, [Some(CHUNK[0]), Some(CHUNK[1])]),
            K::Implicit | K::FixedArray => (DIMS, [Some(DIMS[0]), Some(DIMS[1])]),
            K::ExtensibleArray => (DIMS, [None, Some(DIMS[1])]),
            _ => (DIMS, [None, None]),
        };
        let allocs: &[AllocTime] = if kind == K::Implicit {
            &[AllocTime::Early]
        } else {
            &[AllocTime::Early, AllocTime::Incremental, AllocTime::Late]
        };
        for &alloc in allocs {
            out.push(Case {
                kind,
                dims,
                max,
                alloc,
                fill_time: fills[n % fills.len()],
            });
            n += 1;
        }
    }
    out
}

/// Every value of dataset `name` of `f`.
fn read_values(f: &h5::File, name: &str) -> Vec<f32> {
    f.dataset(name)
        .unwrap()
        .read::<f32>()
        .unwrap()
        .into_iter()
        .collect()
}

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    (dir, p)
}

/// The raw image of the chunk at element `offset` as h5py reads it (`read_direct_chunk`), as
/// f32 values.
fn h5py_raw_chunk(path: &Path, dataset: &str, offset: [usize; 2]) -> Vec<f32> {
    let out = run_python(
        "import h5py, sys\n\
         with h5py.File(sys.argv[1], 'r') as f:\n    \
             mask, b = f[sys.argv[2]].id.read_direct_chunk((int(sys.argv[3]), int(sys.argv[4])))\n    \
             print(mask, b.hex())",
        &[
            path.to_str().expect("utf-8 path"),
            dataset,
            &offset[0].to_string(),
            &offset[1].to_string(),
        ],
    );
    let (mask, hex) = out.trim().split_once(' ').expect("mask and bytes");
    assert_eq!(
        mask, "0",
        "{dataset}: an unfiltered chunk has no filter mask"
    );
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect()
}

#[test]
fn whole_chunks_every_index_allocation_and_fill_time() {
    let (_d, path) = tmp("whole.h5");
    let mut written = Vec::new();
    {
        let f = h5::File::create(&path).unwrap();
        for (n, c) in cases().into_iter().enumerate() {
            let name = format!("d{n}");
            let ds = f
                .new_dataset::<f32>()
                .shape(c.dims)
                .max_shape(c.max)
                .chunk(CHUNK)
                .fill_value(FILL)
                .fill_time(c.fill_time)
                .alloc_time(c.alloc)
                .chunk_index(c.kind)
                .create(&name)
                .unwrap();
            assert_eq!(ds.chunk_index(), Some(c.kind), "{name}");
            // Another handle, reading before and after the writes.
            let other = f.dataset(&name).unwrap();
            let before: Vec<f32> = other.read::<f32>().unwrap().into_iter().collect();
            assert!(before.iter().all(|&v| v == FILL), "{name}: fill before");

            let first = field(c.dims, n as f32 * 1000.0);
            let s0 = f.chunk_cache_stats().unwrap();
            ds.write(&first).unwrap();
            let s1 = f.chunk_cache_stats().unwrap();
            let chunks = c.dims[0].div_ceil(CHUNK[0]) * c.dims[1].div_ceil(CHUNK[1]);
            let chunk_bytes = (CHUNK[0] * CHUNK[1] * 4) as u64;
            assert_eq!(
                s1.whole_chunk_writes - s0.whole_chunk_writes,
                chunks as u64,
                "{name} ({:?}, {:?}): every chunk written whole",
                c.kind,
                c.alloc
            );
            assert_eq!(
                s1.bypassed_bytes - s0.bypassed_bytes,
                chunks as u64 * chunk_bytes,
                "{name}: bypassed bytes"
            );
            assert_eq!(s1.footprint, s0.footprint, "{name}: nothing admitted");
            let got: Vec<f32> = other.read::<f32>().unwrap().into_iter().collect();
            assert_eq!(got, first, "{name}: the other handle sees the write");

            // Chunk (0, 0) cached clean (a partial read loads it), chunk (1, 0) dirty (a
            // partial write), then the whole field again.
            f.flush().unwrap();
            let part: Vec<f32> = ds
                .read_slice::<f32>([range(0, 3), range(0, 5)])
                .unwrap()
                .into_iter()
                .collect();
            assert_eq!(part[..5], first[..5], "{name}: partial read");
            let mut second = field(c.dims, -(n as f32) * 1000.0 - 1.0);
            let rows = c.dims[0].min(CHUNK[0] + 2);
            let dirty_rows = rows - 2..rows;
            let patch = vec![99.0f32; dirty_rows.len() * 4];
            let s2 = f.chunk_cache_stats().unwrap();
            let resident = s2.entries;
            assert!(
                resident >= 1,
                "{name}: the partial read left a chunk cached"
            );
            ds.write_slice(
                &patch,
                [range(dirty_rows.start, dirty_rows.end), range(0, 4)],
            )
            .unwrap();
            let s3 = f.chunk_cache_stats().unwrap();
            assert!(s3.dirty_entries >= 1, "{name}: the patch is cached dirty");
            ds.write(&second).unwrap();
            let s4 = f.chunk_cache_stats().unwrap();
            // The dirty chunk is updated in the cache; every other one is written whole and
            // its clean copy dropped.
            assert_eq!(
                s4.whole_chunk_writes - s3.whole_chunk_writes,
                chunks as u64 - 1,
                "{name}: whole writes of the second field"
            );
            // The clean copy of chunk (0, 0) is gone (for the single chunk, it is the dirty one).
            let dropped = usize::from(c.dims != CHUNK);
            assert_eq!(
                s4.entries,
                s3.entries - dropped,
                "{name}: clean copy dropped"
            );
            assert_eq!((s3.dirty_entries, s4.dirty_entries), (1, 1), "{name}");
            let got: Vec<f32> = other.read::<f32>().unwrap().into_iter().collect();
            assert_eq!(got, second, "{name}: reads after the overwrite");
            // A last partial write into a chunk written whole: read back merged.
            ds.write_slice(&[5.0f32, 6.0], [range(1, 2), range(1, 3)])
                .unwrap();
            second[c.dims[1] + 1] = 5.0;
            second[c.dims[1] + 2] = 6.0;
            let got: Vec<f32> = ds.read::<f32>().unwrap().into_iter().collect();
            assert_eq!(got, second, "{name}: partial write after a whole one");
            written.push((name, c, second));
        }
        f.close().unwrap();
    }
    let mut exp = Expectations::new();
    for (name, c, v) in &written {
        let shape = [c.dims[0] as u64, c.dims[1] as u64];
        let max: Vec<Option<u64>> = c.max.iter().map(|x| x.map(|v| v as u64)).collect();
        exp = exp.dataset(
            &format!("/{name}"),
            DatasetExpect::new("<f4", &shape)
                .chunks(&[CHUNK[0] as u64, CHUNK[1] as u64])
                .maxshape(&max)
                .no_compression()
                .shuffle(false)
                .digest(digest_le(v)),
        );
    }
    if let Err(e) = check_with_h5py(&path, &exp) {
        panic!("h5py disagrees with what h5 wrote:\n{e}");
    }
    let f = h5::File::open(&path).unwrap();
    for (name, c, v) in &written {
        assert_eq!(&read_values(&f, name), v, "{name}: after reopening");
        if c.dims == CHUNK {
            continue;
        }
        // The corner edge chunk: its part outside the extent holds the fill value (OQ-34).
        let at = [2 * CHUNK[0], CHUNK[1]];
        let raw = h5py_raw_chunk(&path, name, at);
        assert_eq!(raw.len(), CHUNK[0] * CHUNK[1], "{name}: chunk image size");
        for (k, &x) in raw.iter().enumerate() {
            let (i, j) = (at[0] + k / CHUNK[1], at[1] + k % CHUNK[1]);
            let want = if i < c.dims[0] && j < c.dims[1] {
                v[i * c.dims[1] + j]
            } else {
                FILL
            };
            assert_eq!(x, want, "{name}: element ({i}, {j}) of the edge chunk");
        }
    }
}

/// A write covering only the part of an edge chunk inside the extent is a whole-chunk write;
/// a later growth of the dataset shows the fill value in the rest of that chunk.
#[test]
fn edge_chunk_written_whole_then_grown() {
    let (_d, path) = tmp("edge.h5");
    let f = h5::File::create(&path).unwrap();
    let ds = f
        .new_dataset::<f32>()
        .shape([200, 130])
        .max_shape([None, None])
        .chunk(CHUNK)
        .fill_value(FILL)
        .create("e")
        .unwrap();
    // Rows 128..200, columns 0..128: the in-extent part of edge chunk (1, 0).
    let block: Vec<f32> = (0..72 * 128).map(|k| k as f32).collect();
    let s0 = f.chunk_cache_stats().unwrap();
    ds.write_slice(&block, [range(128, 200), all(128)]).unwrap();
    let s1 = f.chunk_cache_stats().unwrap();
    assert_eq!(s1.whole_chunk_writes - s0.whole_chunk_writes, 1);
    assert_eq!(s1.entries, 0);
    ds.resize([256, 130]).unwrap();
    let got: Vec<f32> = ds
        .read_slice::<f32>([range(128, 256), all(128)])
        .unwrap()
        .into_iter()
        .collect();
    for (k, &x) in got.iter().enumerate() {
        let want = if k < block.len() { block[k] } else { FILL };
        assert_eq!(x, want, "element {k} of the grown edge chunk");
    }
    f.close().unwrap();
    let v = run_python(
        "import h5py, sys\nwith h5py.File(sys.argv[1], 'r') as f:\n    d = f['e'][128:256, 0:128]\n    print(float(d[:72].sum()), float(d[72:].min()), float(d[72:].max()))",
        &[path.to_str().unwrap()],
    );
    let want_sum: f64 = block.iter().map(|&x| x as f64).sum();
    let parts: Vec<f64> = v.split_whitespace().map(|s| s.parse().unwrap()).collect();
    assert_eq!(parts, vec![want_sum, FILL as f64, FILL as f64]);
}

/// Filtered (shuffle + deflate) chunks a write covers are encoded in batches and written
/// straight too, never admitted: for every index kind, values written, rewritten with another
/// compressibility (so chunks change size and move) and read back by another handle, by h5
/// after reopening and by h5py (values, filters); the edge chunks' parts outside the extent
/// hold the fill value, seen by h5py after it grows the dataset.
#[test]
fn filtered_whole_chunks_are_encoded_and_written_around_the_cache() {
    use ChunkIndexKind as K;
    let (_d, path) = tmp("filtered.h5");
    let kinds = [
        (K::BtreeV1, [None, None]),
        (K::SingleChunk, [Some(CHUNK[0]), Some(CHUNK[1])]),
        (K::FixedArray, [Some(DIMS[0]), Some(DIMS[1])]),
        (K::ExtensibleArray, [None, Some(DIMS[1])]),
        (K::BtreeV2, [None, None]),
    ];
    let mut written = Vec::new();
    {
        let f = h5::File::create(&path).unwrap();
        for (n, (kind, max)) in kinds.into_iter().enumerate() {
            let name = format!("z{n}");
            let dims = if kind == K::SingleChunk { CHUNK } else { DIMS };
            let ds = f
                .new_dataset::<f32>()
                .shape(dims)
                .max_shape(max)
                .chunk(CHUNK)
                .fill_value(FILL)
                .chunk_index(kind)
                .shuffle()
                .deflate(1)
                .create(&name)
                .unwrap();
            assert_eq!(ds.chunk_index(), Some(kind), "{name}");
            let other = f.dataset(&name).unwrap();
            let chunks = dims[0].div_ceil(CHUNK[0]) * dims[1].div_ceil(CHUNK[1]);
            let mut values = field(dims, n as f32 * 100.0);
            for round in 0..3 {
                if round == 1 {
                    // Compresses to almost nothing: every chunk shrinks and moves.
                    values.iter_mut().for_each(|v| *v = 0.5);
                } else if round == 2 {
                    values = field(dims, -(n as f32) - 3.0);
                }
                let s0 = f.chunk_cache_stats().unwrap();
                ds.write(&values).unwrap();
                let s1 = f.chunk_cache_stats().unwrap();
                assert_eq!(
                    s1.whole_chunk_writes - s0.whole_chunk_writes,
                    chunks as u64,
                    "{name} round {round}: every chunk written whole"
                );
                // Nothing admitted (the clean copies the other handle's read left are dropped,
                // those of other datasets stay).
                assert!(
                    s1.footprint <= s0.footprint && s1.dirty_entries == 0,
                    "{name} round {round}: {} -> {} bytes cached, {} dirty",
                    s0.footprint,
                    s1.footprint,
                    s1.dirty_entries
                );
                if round > 0 {
                    assert_eq!(
                        s0.entries - s1.entries,
                        chunks,
                        "{name}: clean copies dropped"
                    );
                }
                let got: Vec<f32> = other.read::<f32>().unwrap().into_iter().collect();
                assert_eq!(got, values, "{name} round {round}: the other handle");
            }
            written.push((name, dims, max, values));
        }
        f.close().unwrap();
    }
    let f = h5::File::open(&path).unwrap();
    let mut exp = Expectations::new();
    for (name, dims, max, v) in &written {
        assert_eq!(&read_values(&f, name), v, "{name}: after reopening");
        let max: Vec<Option<u64>> = max.iter().map(|x| x.map(|v| v as u64)).collect();
        exp = exp.dataset(
            &format!("/{name}"),
            DatasetExpect::new("<f4", &[dims[0] as u64, dims[1] as u64])
                .chunks(&[CHUNK[0] as u64, CHUNK[1] as u64])
                .maxshape(&max)
                .gzip(1)
                .shuffle(true)
                .digest(digest_le(v)),
        );
    }
    drop(f);
    if let Err(e) = check_with_h5py(&path, &exp) {
        panic!("h5py disagrees with what h5 wrote:\n{e}");
    }
    // h5py grows the datasets with an unlimited first dimension by the rest of their edge
    // chunks: the new rows read as the fill value that the encoded edge chunks hold.
    let out = run_python(
        "import h5py, sys\n\
         with h5py.File(sys.argv[1], 'r+') as f:\n    \
             for name in ('z0', 'z3', 'z4'):\n        \
                 d = f[name]\n        \
                 n = d.shape[0]\n        \
                 d.resize(384, axis=0)\n        \
                 print(name, sorted(set(d[n:384, :].ravel().tolist())))",
        &[path.to_str().unwrap()],
    );
    let want: Vec<String> = ["z0", "z3", "z4"]
        .iter()
        .map(|n| format!("{n} [{FILL}]"))
        .collect();
    assert_eq!(out.trim().lines().collect::<Vec<_>>(), want, "{out}");
}
