//! Chunk indexes changed one entry at a time (issue 11): the cost of a flush follows the
//! change, not the size of the index. Bytes are counted with the `Metrics` storage decorator;
//! the files are read back by h5py.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use h5::{AllocTime, ChunkIndexKind, FileAccess, FormatBounds};
use h5_io::{FileStorage, Metrics, OpenMode};
use h5_testkit::verify::{DatasetExpect, Expectations, check_with_h5py, digest_le, run_python};
use ndarray::SliceInfoElem as S;

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    (dir, p)
}

fn slice(start: usize, end: usize) -> S {
    S::Slice {
        start: start as isize,
        end: Some(end as isize),
        step: 1,
    }
}

/// Allocated chunks of `dataset` as libhdf5 counts them.
fn h5py_chunk_count(path: &Path, dataset: &str) -> usize {
    let out = run_python(
        "import h5py, sys\nwith h5py.File(sys.argv[1], 'r') as f:\n    print(f[sys.argv[2]].id.get_num_chunks())",
        &[path.to_str().expect("utf-8 path"), dataset],
    );
    out.trim().parse().expect("a chunk count")
}

/// Chunks in the dataset before the append.
const CHUNKS: usize = 100_000;

/// Most bytes a flush after appending one chunk may write.
const APPEND_BUDGET: u64 = 64 * 1024;

/// Writes `CHUNKS` one-element chunks with index `kind`, flushes, appends one more chunk (a
/// resize first when the dataset can grow) and flushes again; returns the bytes the second
/// flush wrote (the append itself reaches the storage only at flush).
fn append_cost(kind: ChunkIndexKind, filtered: bool) -> u64 {
    let (_d, path) = tmp("append.h5");
    let storage = Arc::new(Metrics::new(
        FileStorage::open(&path, OpenMode::Create).unwrap(),
    ));
    let options = h5::CreateOptions {
        bounds: FormatBounds::V110,
        ..Default::default()
    };
    let f = h5::File::create_in(storage.clone(), &FileAccess::default(), &options, None).unwrap();
    let grows = kind == ChunkIndexKind::ExtensibleArray;
    let mut b = f
        .root()
        .unwrap()
        .new_dataset::<i32>()
        .shape([if grows { CHUNKS } else { CHUNKS + 1 }])
        .max_shape([if grows { None } else { Some(CHUNKS + 1) }])
        .chunk([1])
        .chunk_index(kind);
    if kind == ChunkIndexKind::Implicit {
        b = b.alloc_time(AllocTime::Early);
    }
    if filtered {
        b = b.shuffle().deflate(1);
    }
    let ds = b.create("d").unwrap();
    let all: Vec<i32> = (0..=CHUNKS as i32).map(|x| x * 7 - 3).collect();
    ds.write_slice(&all[..CHUNKS], [slice(0, CHUNKS)]).unwrap();
    f.flush().unwrap();
    let before = storage.snapshot();
    if grows {
        ds.resize([CHUNKS + 1]).unwrap();
    }
    ds.write_slice(&all[CHUNKS..], [slice(CHUNKS, CHUNKS + 1)])
        .unwrap();
    f.flush().unwrap();
    let written = storage.snapshot().since(&before).bytes_written;
    f.close().unwrap();
    drop(storage);
    let exp = Expectations::new().dataset(
        "/d",
        DatasetExpect::new("<i4", &[CHUNKS as u64 + 1]).digest(digest_le(&all)),
    );
    if let Err(e) = check_with_h5py(&path, &exp) {
        panic!("h5py disagrees with what h5 wrote ({kind:?}):\n{e}");
    }
    assert_eq!(h5py_chunk_count(&path, "d"), CHUNKS + 1, "{kind:?}");
    let f = h5::File::open(&path).unwrap();
    let ds = f.dataset("d").unwrap();
    assert_eq!(ds.chunk_index(), Some(kind));
    let tail: Vec<i32> = ds
        .read_slice::<i32>([slice(CHUNKS - 2, CHUNKS + 1)])
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(tail, all[CHUNKS - 2..]);
    written
}

#[test]
fn appending_one_chunk_to_a_fixed_array_writes_little() {
    for filtered in [false, true] {
        let n = append_cost(ChunkIndexKind::FixedArray, filtered);
        eprintln!("fixed array (filtered: {filtered}): a flush after one append wrote {n} bytes");
        assert!(n <= APPEND_BUDGET, "{n} bytes");
    }
}

#[test]
fn appending_one_chunk_to_an_extensible_array_writes_little() {
    for filtered in [false, true] {
        let n = append_cost(ChunkIndexKind::ExtensibleArray, filtered);
        eprintln!(
            "extensible array (filtered: {filtered}): a flush after one append wrote {n} bytes"
        );
        assert!(n <= APPEND_BUDGET, "{n} bytes");
    }
}

#[test]
fn writing_one_implicit_chunk_writes_little() {
    let n = append_cost(ChunkIndexKind::Implicit, false);
    eprintln!("implicit: a flush after one chunk write wrote {n} bytes");
    assert!(n <= APPEND_BUDGET, "{n} bytes");
}
