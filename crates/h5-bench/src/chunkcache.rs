//! `h5-bench chunkcache`: multi-chunk encode and decode throughput of the chunk cache with a real
//! codec (HDF5-style byte shuffle of 4-byte elements, then deflate level 1 in zlib format), on 1
//! and 2 codec threads.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flate2::Compression;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use h5_chunkcache::selection::Selection;
use h5_chunkcache::{
    Chunk, ChunkCache, ChunkCacheConfig, ChunkCoord, ChunkLayout, DatasetId, DiskLocation, Encoded,
    InsertRequest, LayoutError, LayoutInfo, Lookup, ReadRequest, Udata, WriteRequest,
};
use h5_io::{MemoryStorage, Storage};

use crate::median;

/// Bytes per element (float32).
const ELEM: usize = 4;

/// A 1-D float32 dataset stored as shuffled, deflated chunks, indexed in memory and allocated
/// with a bump allocator.
#[derive(Debug)]
struct DeflateLayout {
    chunk_elems: u64,
    chunks: u64,
    index: Mutex<HashMap<u64, DiskLocation>>,
    next: AtomicU64,
}

impl DeflateLayout {
    fn new(chunks: u64, chunk_elems: u64) -> Self {
        Self {
            chunk_elems,
            chunks,
            index: Mutex::new(HashMap::new()),
            next: AtomicU64::new(4096),
        }
    }

    fn chunk_bytes(&self) -> usize {
        self.chunk_elems as usize * ELEM
    }
}

/// HDF5's shuffle filter: byte `b` of every element goes to plane `b`.
fn shuffle(src: &[u8]) -> Vec<u8> {
    let n = src.len() / ELEM;
    let mut out = vec![0u8; src.len()];
    for (b, plane) in out.chunks_exact_mut(n).enumerate() {
        for (dst, elem) in plane.iter_mut().zip(src.chunks_exact(ELEM)) {
            *dst = elem[b];
        }
    }
    out
}

/// The inverse of [`shuffle`].
fn unshuffle(src: &[u8]) -> Vec<u8> {
    let n = src.len() / ELEM;
    let mut out = vec![0u8; src.len()];
    for (b, plane) in src.chunks_exact(n).enumerate() {
        for (elem, &v) in out.chunks_exact_mut(ELEM).zip(plane) {
            elem[b] = v;
        }
    }
    out
}

impl ChunkLayout for DeflateLayout {
    fn query(&self) -> LayoutInfo {
        LayoutInfo {
            needs_codec: true,
            ..LayoutInfo::dense(&[self.chunk_elems], ELEM, &[])
        }
    }

    fn extent(&self) -> Vec<u64> {
        vec![self.chunks * self.chunk_elems]
    }

    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let index = self.index.lock().map_err(|_| "index lock poisoned")?;
        Ok(coords
            .iter()
            .map(|c| {
                Lookup::dense(
                    index.get(&c.as_slice()[0]).copied(),
                    self.chunk_bytes(),
                    Box::new(()),
                )
            })
            .collect())
    }

    fn decode(
        &self,
        _coord: &ChunkCoord,
        image: Vec<u8>,
        _partial_bound: bool,
        _udata: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        let mut shuffled = Vec::with_capacity(self.chunk_bytes());
        ZlibDecoder::new(image.as_slice()).read_to_end(&mut shuffled)?;
        if shuffled.len() != self.chunk_bytes() {
            return Err("inflated chunk has the wrong size".into());
        }
        Ok(Chunk::Dense(unshuffle(&shuffled)))
    }

    fn new_chunk(&self, _coord: &ChunkCoord, _fill: bool) -> Result<(Chunk, Udata), LayoutError> {
        Ok((Chunk::Dense(vec![0; self.chunk_bytes()]), Box::new(())))
    }

    fn encode(
        &self,
        _coord: &ChunkCoord,
        chunk: &Chunk,
        _partial_bound: bool,
        _udata: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        let chunk = chunk.as_dense().ok_or("not a dense chunk")?;
        let mut enc = ZlibEncoder::new(Vec::with_capacity(chunk.len() / 2), Compression::new(1));
        enc.write_all(&shuffle(chunk))?;
        Ok(Encoded::Owned(enc.finish()?))
    }

    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        let mut index = self.index.lock().map_err(|_| "index lock poisoned")?;
        Ok(reqs
            .iter()
            .map(|r| {
                let loc = DiskLocation {
                    addr: self.next.fetch_add(r.new_size, Ordering::Relaxed),
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
        let mut index = self.index.lock().map_err(|_| "index lock poisoned")?;
        index.remove(&coord.as_slice()[0]);
        Ok(())
    }
}

/// Deterministic float32 data: a smooth function plus noise in the low 8 mantissa bits (fixed
/// seed), compressible but not trivially.
fn make_data(elems: usize) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut out = Vec::with_capacity(elems * ELEM);
    for i in 0..elems {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let t = i as f64 * 1e-3;
        let v = (t.sin() * 100.0 + (t * 0.37).cos() * 40.0) as f32;
        let bits = v.to_bits() ^ (x as u32 & 0xFF);
        out.extend_from_slice(&bits.to_le_bytes());
    }
    out
}

fn new_cache(storage: &Arc<dyn Storage>, threads: usize, limit: usize) -> ChunkCache {
    ChunkCache::new(
        Arc::clone(storage),
        ChunkCacheConfig {
            limit,
            threads: Some(threads),
            ..ChunkCacheConfig::default()
        },
    )
    .expect("valid configuration")
}

/// One repetition: (write + flush time, read time, encoded bytes).
fn once(data: &[u8], chunks: u64, chunk_elems: u64, threads: usize) -> (Duration, Duration, u64) {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let layout = Arc::new(DeflateLayout::new(chunks, chunk_elems));
    let limit = data.len() * 2 + (64 << 20);
    let ds = DatasetId(1);

    let mut c = new_cache(&storage, threads, limit);
    c.register(ds, layout.clone()).expect("register");
    let start = Instant::now();
    c.write(&[WriteRequest::new(ds, &Selection::All, data)])
        .expect("write");
    c.flush().expect("flush");
    let write = start.elapsed();
    let encoded = c.stats().bytes_written;
    c.destroy();

    let mut c = new_cache(&storage, threads, limit);
    c.register(ds, layout).expect("register");
    let mut buf = vec![0u8; data.len()];
    let start = Instant::now();
    c.read(&mut [ReadRequest::new(ds, &Selection::All, &mut buf)])
        .expect("read");
    let read = start.elapsed();
    assert_eq!(c.stats().misses, chunks, "every chunk must be decoded");
    assert!(buf == data, "the values read differ from those written");
    (write, read, encoded)
}

/// Runs the benchmark and prints one line per thread count.
pub(crate) fn run(reps: usize, chunks: u64, chunk_kib: u64) {
    let chunk_elems = (chunk_kib * 1024 / ELEM as u64).max(1);
    let elems = usize::try_from(chunks * chunk_elems).expect("dataset fits in memory");
    let data = make_data(elems);
    let mb = data.len() as f64 / 1e6;
    println!(
        "h5-bench chunkcache: {chunks} chunks of {chunk_kib} KiB float32, shuffle + deflate level 1, \
         median of {reps} repetitions ({} cores available)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    for threads in [1, 2] {
        let _warm = once(&data, chunks, chunk_elems, threads);
        let mut writes = Vec::with_capacity(reps);
        let mut reads = Vec::with_capacity(reps);
        let mut encoded = 0;
        for _ in 0..reps {
            let (w, r, e) = once(&data, chunks, chunk_elems, threads);
            writes.push(w);
            reads.push(r);
            encoded = e;
        }
        let (w, r) = (median(writes), median(reads));
        println!(
            "  threads {threads}: write+flush (encode) {:>7.1} MB/s ({:>6.1} ms), \
             read (decode) {:>7.1} MB/s ({:>6.1} ms), ratio {:.2}",
            mb / w.as_secs_f64(),
            w.as_secs_f64() * 1e3,
            mb / r.as_secs_f64(),
            r.as_secs_f64() * 1e3,
            data.len() as f64 / encoded as f64
        );
    }
}
