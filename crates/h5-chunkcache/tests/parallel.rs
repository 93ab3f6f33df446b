//! The codec calls of one read batch and of one flush run on several threads
//! (`ChunkCacheConfig::threads`), while results and errors stay in batch order.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use h5_chunkcache::{
    Chunk, ChunkCache, ChunkCacheConfig, ChunkCacheError, ChunkCoord, ChunkLayout, DatasetId,
    DiskLocation, Encoded, InsertRequest, LayoutError, LayoutInfo, Lookup, ReadRequest, Udata,
    WriteRequest, selection::Selection,
};
use h5_io::{MemoryStorage, Storage};

/// A 1-D layout of 8 chunks of 4 bytes without codec whose decode and encode record the thread
/// they run on and sleep 20 ms; decoding or encoding a chunk listed in `fail` fails.
#[derive(Debug, Default)]
struct ThreadLayout {
    index: Mutex<HashMap<u64, DiskLocation>>,
    alloc: AtomicU64,
    decode_threads: Mutex<Vec<ThreadId>>,
    encode_threads: Mutex<Vec<ThreadId>>,
    fail: Mutex<HashSet<u64>>,
}

const CHUNKS: u64 = 8;
const CHUNK: u64 = 4;

impl ChunkLayout for ThreadLayout {
    fn query(&self) -> LayoutInfo {
        LayoutInfo {
            needs_codec: true,
            ..LayoutInfo::dense(&[CHUNK], 1, &[])
        }
    }

    fn extent(&self) -> Vec<u64> {
        vec![CHUNKS * CHUNK]
    }

    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let index = self.index.lock().unwrap();
        Ok(coords
            .iter()
            .map(|c| {
                Lookup::dense(
                    index.get(&c.as_slice()[0]).copied(),
                    CHUNK as usize,
                    Box::new(()),
                )
            })
            .collect())
    }

    fn decode(
        &self,
        coord: &ChunkCoord,
        image: Vec<u8>,
        _partial_bound: bool,
        _udata: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        self.decode_threads
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        std::thread::sleep(Duration::from_millis(20));
        if self.fail.lock().unwrap().contains(&coord.as_slice()[0]) {
            return Err(format!("decode of chunk {:?} fails", coord.as_slice()).into());
        }
        Ok(Chunk::Dense(image))
    }

    fn new_chunk(&self, _coord: &ChunkCoord, _fill: bool) -> Result<(Chunk, Udata), LayoutError> {
        Ok((Chunk::Dense(vec![0; CHUNK as usize]), Box::new(())))
    }

    fn encode(
        &self,
        coord: &ChunkCoord,
        _chunk: &Chunk,
        _partial_bound: bool,
        _udata: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        self.encode_threads
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        std::thread::sleep(Duration::from_millis(20));
        if self.fail.lock().unwrap().contains(&coord.as_slice()[0]) {
            return Err(format!("encode of chunk {:?} fails", coord.as_slice()).into());
        }
        Ok(Encoded::SameAsCache)
    }

    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        let mut index = self.index.lock().unwrap();
        Ok(reqs
            .iter()
            .map(|r| {
                let loc = DiskLocation {
                    addr: self.alloc.fetch_add(r.new_size, Ordering::SeqCst),
                    size: r.new_size,
                };
                index.insert(r.coord.as_slice()[0], loc);
                loc
            })
            .collect())
    }

    fn delete_chunk(
        &self,
        coord: &ChunkCoord,
        _location: Option<DiskLocation>,
        _udata: &mut Udata,
    ) -> Result<(), LayoutError> {
        self.index.lock().unwrap().remove(&coord.as_slice()[0]);
        Ok(())
    }
}

fn data() -> Vec<u8> {
    (0..(CHUNKS * CHUNK) as u8).collect()
}

fn cache(storage: &Arc<dyn Storage>, threads: Option<usize>) -> ChunkCache {
    ChunkCache::new(
        Arc::clone(storage),
        ChunkCacheConfig {
            threads,
            ..ChunkCacheConfig::default()
        },
    )
    .unwrap()
}

/// Writes all 8 chunks with a cache of `threads` and flushes; returns the storage and layout.
fn written(threads: Option<usize>) -> (Arc<dyn Storage>, Arc<ThreadLayout>, ChunkCache) {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let layout = Arc::new(ThreadLayout::default());
    let mut c = cache(&storage, threads);
    c.register(DatasetId(1), layout.clone()).unwrap();
    c.write(&[WriteRequest::new(DatasetId(1), &Selection::All, &data())])
        .unwrap();
    (storage, layout, c)
}

fn read_all(c: &mut ChunkCache) -> Result<Vec<u8>, ChunkCacheError> {
    let mut buf = vec![0u8; (CHUNKS * CHUNK) as usize];
    c.read(&mut [ReadRequest::new(DatasetId(1), &Selection::All, &mut buf)])?;
    Ok(buf)
}

fn distinct(ids: &Mutex<Vec<ThreadId>>) -> (usize, usize) {
    let ids = ids.lock().unwrap();
    (ids.len(), ids.iter().collect::<HashSet<_>>().len())
}

#[test]
fn two_threads_decode_and_encode_on_several_threads() {
    let (storage, layout, mut c) = written(Some(2));
    c.flush().unwrap();
    let (calls, threads) = distinct(&layout.encode_threads);
    assert_eq!(calls, 8);
    assert!(threads >= 2, "encode ran on {threads} thread(s)");
    c.destroy();

    let mut c = cache(&storage, Some(2));
    c.register(DatasetId(1), layout.clone()).unwrap();
    assert_eq!(read_all(&mut c).unwrap(), data());
    let (calls, threads) = distinct(&layout.decode_threads);
    assert_eq!(calls, 8);
    assert!(threads >= 2, "decode ran on {threads} thread(s)");
    assert_eq!(c.stats().entries, 8);
}

#[test]
fn one_thread_runs_inline() {
    let (storage, layout, mut c) = written(Some(1));
    c.flush().unwrap();
    let me = std::thread::current().id();
    assert!(
        layout
            .encode_threads
            .lock()
            .unwrap()
            .iter()
            .all(|&t| t == me)
    );
    assert_eq!(distinct(&layout.encode_threads), (8, 1));
    c.destroy();

    let mut c = cache(&storage, Some(1));
    c.register(DatasetId(1), layout.clone()).unwrap();
    assert_eq!(read_all(&mut c).unwrap(), data());
    assert_eq!(distinct(&layout.decode_threads), (8, 1));
    assert!(
        layout
            .decode_threads
            .lock()
            .unwrap()
            .iter()
            .all(|&t| t == me)
    );
}

#[test]
fn zero_threads_is_rejected() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let bad = ChunkCacheConfig {
        threads: Some(0),
        ..ChunkCacheConfig::default()
    };
    assert!(matches!(
        ChunkCache::new(storage, bad),
        Err(ChunkCacheError::Config {
            field: "threads",
            ..
        })
    ));
}

/// The first failing chunk in batch order is reported and nothing of the batch is admitted.
#[test]
fn first_decode_error_in_order_and_nothing_admitted() {
    for threads in [None, Some(1), Some(2), Some(3)] {
        let (storage, layout, mut c) = written(threads);
        c.flush().unwrap();
        c.destroy();
        layout.fail.lock().unwrap().extend([5, 2, 6]);
        let mut c = cache(&storage, threads);
        c.register(DatasetId(1), layout.clone()).unwrap();
        match read_all(&mut c) {
            Err(ChunkCacheError::Layout {
                coord, callback, ..
            }) => assert_eq!((coord, callback), (vec![2], "decode")),
            other => panic!("expected a decode error, got {other:?}"),
        }
        assert_eq!(c.stats().entries, 0);
        layout.fail.lock().unwrap().clear();
        assert_eq!(read_all(&mut c).unwrap(), data());
    }
}

/// A failing encode is reported (first in order), nothing is inserted or written, and every
/// chunk stays dirty so that a later flush writes them.
#[test]
fn first_encode_error_in_order_and_all_stay_dirty() {
    for threads in [None, Some(1), Some(2)] {
        let (_storage, layout, mut c) = written(threads);
        layout.fail.lock().unwrap().extend([7, 3]);
        match c.flush() {
            Err(ChunkCacheError::Layout {
                coord, callback, ..
            }) => assert_eq!((coord, callback), (vec![3], "encode")),
            other => panic!("expected an encode error, got {other:?}"),
        }
        assert!(layout.index.lock().unwrap().is_empty());
        assert_eq!(c.stats().dirty_entries, 8);
        assert_eq!(c.stats().bytes_written, 0);
        layout.fail.lock().unwrap().clear();
        c.flush().unwrap();
        assert_eq!(c.stats().dirty_entries, 0);
        assert_eq!(layout.index.lock().unwrap().len(), 8);
    }
}
