//! `ChunkCache::read_shared`: reads from several threads through one cache behind a mutex
//! overlap while their chunks are decoded (the lock is not held across storage reads and
//! decoding), and give the same data as serial reads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use h5_chunkcache::selection::{Hyperslab, Selection};
use h5_chunkcache::{
    Chunk, ChunkCache, ChunkCacheConfig, ChunkCoord, ChunkLayout, DatasetId, DiskLocation, Encoded,
    InsertRequest, LayoutError, LayoutInfo, Lookup, ReadRequest, Udata, WriteRequest,
};
use h5_io::{MemoryStorage, Storage};

/// A codec layout whose decode waits (up to 5 s) until two decodes are running at once, and
/// records the most that ran together.
#[derive(Debug, Default)]
struct Rendezvous {
    index: Mutex<HashMap<u64, DiskLocation>>,
    alloc: AtomicU64,
    /// (decodes running now, decodes arrived so far)
    inside: Mutex<(usize, usize)>,
    wake: Condvar,
    max_inside: AtomicUsize,
}

impl ChunkLayout for Rendezvous {
    fn query(&self) -> LayoutInfo {
        LayoutInfo {
            needs_codec: true,
            ..LayoutInfo::dense(&[4], 1, &[])
        }
    }
    fn extent(&self) -> Vec<u64> {
        vec![8]
    }
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let index = self.index.lock().unwrap();
        Ok(coords
            .iter()
            .map(|c| Lookup::dense(index.get(&c.as_slice()[0]).copied(), 4, Box::new(())))
            .collect())
    }
    fn decode(
        &self,
        _: &ChunkCoord,
        image: Vec<u8>,
        _: bool,
        _: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        let mut n = self.inside.lock().unwrap();
        n.0 += 1;
        n.1 += 1;
        self.max_inside.fetch_max(n.0, Ordering::SeqCst);
        self.wake.notify_all();
        let (mut n, _) = self
            .wake
            .wait_timeout_while(n, Duration::from_secs(5), |n| n.1 < 2)
            .unwrap();
        n.0 -= 1;
        Ok(Chunk::Dense(image))
    }
    fn new_chunk(&self, _: &ChunkCoord, _: bool) -> Result<(Chunk, Udata), LayoutError> {
        Ok((Chunk::Dense(vec![0; 4]), Box::new(())))
    }
    fn encode(
        &self,
        _: &ChunkCoord,
        c: &Chunk,
        _: bool,
        _: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        Ok(Encoded::Owned(c.as_dense().ok_or("dense")?.to_vec()))
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
        c: &ChunkCoord,
        _: Option<DiskLocation>,
        _: &mut Udata,
    ) -> Result<(), LayoutError> {
        self.index.lock().unwrap().remove(&c.as_slice()[0]);
        Ok(())
    }
}

#[test]
fn shared_reads_overlap_while_decoding() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let layout = Arc::new(Rendezvous::default());
    {
        let mut c = ChunkCache::new(Arc::clone(&storage), ChunkCacheConfig::default()).unwrap();
        c.register(DatasetId(1), layout.clone()).unwrap();
        let all = Selection::All;
        c.write(&[WriteRequest::new(
            DatasetId(1),
            &all,
            &[1, 2, 3, 4, 5, 6, 7, 8],
        )])
        .unwrap();
        c.flush().unwrap();
    }
    let cache = Mutex::new(
        ChunkCache::new(
            Arc::clone(&storage),
            ChunkCacheConfig {
                threads: Some(1),
                ..ChunkCacheConfig::default()
            },
        )
        .unwrap(),
    );
    cache
        .lock()
        .unwrap()
        .register(DatasetId(1), layout.clone())
        .unwrap();
    let results: Vec<Vec<u8>> = std::thread::scope(|s| {
        let handles: Vec<_> = [0u64, 4]
            .into_iter()
            .map(|start| {
                let cache = &cache;
                s.spawn(move || {
                    let sel = Selection::Hyperslab(Hyperslab::contiguous(&[start], &[4]).unwrap());
                    let mut buf = vec![0u8; 4];
                    ChunkCache::read_shared(
                        cache,
                        &mut [ReadRequest::new(DatasetId(1), &sel, &mut buf)],
                    )
                    .unwrap();
                    buf
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results, [vec![1, 2, 3, 4], vec![5, 6, 7, 8]]);
    // Both decodes ran at the same time: neither thread held the cache's lock while decoding.
    assert_eq!(layout.max_inside.load(Ordering::SeqCst), 2);
    let st = cache.lock().unwrap().stats();
    assert_eq!((st.misses, st.entries), (2, 2));
}
