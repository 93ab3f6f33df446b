//! Reading fixed-array and extensible-array indexes of more than a million chunks written by
//! h5py (libhdf5 1.14) through the metadata cache (issue 11): reading every chunk keeps the
//! cache within its configured maximum, and reading one chunk of a freshly opened file reads at
//! most 256 KiB (metadata and the chunk). Bytes are counted with the `Metrics` storage
//! decorator; the peaks are printed. Needs `scripts/setup-tools`; fails without it.

use std::path::Path;
use std::sync::Arc;

use h5::FileAccess;
use h5_io::{FileStorage, Metrics, OpenMode};
use h5_metacache::CacheConfig;
use h5_testkit::verify::run_python;
use ndarray::SliceInfoElem as S;

/// Chunks of each dataset (one element each).
const N: usize = 1 << 20;

/// The metadata cache's configured maximum (fixed size) for the reads.
const CACHE_MAX: usize = 256 * 1024;

/// Most bytes reading one chunk of a freshly opened file may read.
const ONE_CHUNK_BUDGET: u64 = 256 * 1024;

/// The value h5py writes at element `i`.
fn value(i: usize) -> u8 {
    (i * 7 % 251) as u8
}

/// Writes `/d` with h5py: `N` one-byte chunks, a fixed maximum (fixed array) or an unlimited
/// one (extensible array), libhdf5's latest formats.
fn make(path: &Path, unlimited: bool) {
    let code = r#"
import sys, h5py, numpy as np
path, n, unlimited = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
v = (np.arange(n) * 7 % 251).astype("u1")
with h5py.File(path, "w", libver="latest") as f:
    f.create_dataset("d", data=v, chunks=(1,), maxshape=(None if unlimited else n,))
"#;
    run_python(
        code,
        &[
            path.to_str().expect("utf-8 path"),
            &N.to_string(),
            if unlimited { "1" } else { "0" },
        ],
    );
}

fn access() -> FileAccess {
    FileAccess::new().metadata_cache(CacheConfig::fixed_size(CACHE_MAX))
}

fn open(path: &Path) -> (Arc<Metrics<FileStorage>>, h5::File) {
    let storage = Arc::new(Metrics::new(
        FileStorage::open(path, OpenMode::ReadOnly).unwrap(),
    ));
    let f = h5::File::from_storage(storage.clone(), &access(), None).unwrap();
    (storage, f)
}

fn check(unlimited: bool, kind: h5::ChunkIndexKind) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.h5");
    make(&path, unlimited);
    // One chunk of a freshly opened file: superblock, root group, dataset header, the index
    // blocks on the chunk's path and the chunk.
    let (storage, f) = open(&path);
    let ds = f.dataset("d").unwrap();
    assert_eq!(ds.chunk_index(), Some(kind));
    let at = N / 2 + 12_345;
    let got: Vec<u8> = ds
        .read_slice::<u8>([S::Slice {
            start: at as isize,
            end: Some(at as isize + 1),
            step: 1,
        }])
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(got, [value(at)]);
    let one = storage.snapshot().bytes_read;
    eprintln!("{kind:?}: opening the file and reading one chunk read {one} bytes");
    assert!(one <= ONE_CHUNK_BUDGET, "{one} bytes");
    drop(ds);
    drop(f);
    // Every chunk, in slices, through a cache of CACHE_MAX bytes.
    let (_storage, f) = open(&path);
    let ds = f.dataset("d").unwrap();
    let step = 1 << 16;
    for start in (0..N).step_by(step) {
        let end = (start + step).min(N);
        let got: Vec<u8> = ds
            .read_slice::<u8>([S::Slice {
                start: start as isize,
                end: Some(end as isize),
                step: 1,
            }])
            .unwrap()
            .into_iter()
            .collect();
        let want: Vec<u8> = (start..end).map(value).collect();
        assert!(got == want, "elements {start}..{end} differ");
    }
    let stats = f.metadata_cache_stats().unwrap();
    eprintln!(
        "{kind:?}: reading all {N} chunks: metadata cache peak {} bytes in {} entries (maximum \
         {CACHE_MAX}), {} misses, {} evictions",
        stats.max.index_size, stats.max.index_len, stats.total_misses, stats.total_evictions
    );
    assert!(
        stats.max.index_size <= CACHE_MAX,
        "the metadata cache grew to {} bytes",
        stats.max.index_size
    );
    assert!(
        stats.total_evictions > 0,
        "the index fit the cache: {stats:?}"
    );
}

#[test]
fn a_million_chunk_fixed_array_reads_within_the_cache() {
    check(false, h5::ChunkIndexKind::FixedArray);
}

#[test]
fn a_million_chunk_extensible_array_reads_within_the_cache() {
    check(true, h5::ChunkIndexKind::ExtensibleArray);
}
