//! Bypass of the cache with the direct-I/O planners (spec §2.5 SCC-045 .. SCC-048, SCC-056,
//! §2.8 SCC-067 .. SCC-072, SCC-061, SCC-104, SCC-107, EC-03, EC-25, EC-27, EC-32).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use h5_chunkcache::selection::{CopyRun, Hyperslab, Points, Selection};
use h5_chunkcache::{
    Bypass, Capabilities, Chunk, ChunkCache, ChunkCacheConfig, ChunkCacheError, ChunkCoord,
    ChunkLayout, Conversion, CustomChunk, DatasetId, DefinedInfo, DirectPlan, DiskLocation,
    Encoded, InsertRequest, LayoutError, LayoutInfo, Lookup, MemUsage, ReadRequest, Segment, Udata,
    WriteRequest,
};
use h5_io::testkit::{Hooks, Intercept};
use h5_io::{IoOp, MemoryStorage, Metrics, ReadSegment, Storage, WriteSegment};

// ------------------------------------------------------------------------------------------
// A dense mock layout with the four direct-I/O planners.
// ------------------------------------------------------------------------------------------

#[derive(Clone, PartialEq, Eq, Debug)]
enum Ev {
    Lookup(u64, Vec<Vec<u64>>, usize),
    Decode(u64, Vec<u64>),
    DecodeDefined(u64, Vec<u64>),
    NewChunk(u64, Vec<u64>, bool),
    Encode(u64, Vec<u64>),
    Insert(u64, usize),
    /// Planner name, chunk, form of the chunk given ("none", "dense", "defined"), answer.
    Plan(u64, &'static str, Vec<u64>, &'static str, &'static str),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum NeedsDefined {
    Never,
    /// Without a chunk the planners ask for the defined set.
    WithoutChunk,
    /// The planners always ask (a broken layout).
    Always,
}

#[derive(Debug)]
struct DefinedOnly(usize);

impl CustomChunk for DefinedOnly {
    fn mem_usage(&self) -> MemUsage {
        MemUsage {
            used: self.0,
            allocated: self.0,
        }
    }
}

struct LiveUdata(Arc<AtomicUsize>);

impl Drop for LiveUdata {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Debug)]
struct DMock {
    tag: u64,
    dims: Vec<u64>,
    extent: Vec<u64>,
    elem: usize,
    fill: Vec<u8>,
    codec: bool,
    caps: Capabilities,
    needs: NeedsDefined,
    index: Mutex<HashMap<Vec<u64>, DiskLocation>>,
    alloc: Arc<AtomicU64>,
    log: Arc<Mutex<Vec<Ev>>>,
    live: Arc<AtomicUsize>,
}

impl DMock {
    fn new(tag: u64, extent: &[u64], dims: &[u64], elem: usize, fill: &[u8]) -> Self {
        Self {
            tag,
            dims: dims.to_vec(),
            extent: extent.to_vec(),
            elem,
            fill: fill.to_vec(),
            codec: false,
            caps: Capabilities::DIRECT_IO,
            needs: NeedsDefined::Never,
            index: Mutex::new(HashMap::new()),
            alloc: Arc::new(AtomicU64::new(4096)),
            log: Arc::new(Mutex::new(Vec::new())),
            live: Arc::new(AtomicUsize::new(0)),
        }
    }
    fn codec(mut self) -> Self {
        self.codec = true;
        self
    }
    fn caps(mut self, caps: Capabilities) -> Self {
        self.caps = caps;
        self
    }
    fn needs(mut self, n: NeedsDefined) -> Self {
        self.needs = n;
        self.caps = self.caps | Capabilities::DECODE_DEFINED;
        self
    }
    fn sharing(mut self, other: &DMock) -> Self {
        self.log = Arc::clone(&other.log);
        self.alloc = Arc::clone(&other.alloc);
        self.live = Arc::clone(&other.live);
        self
    }
    /// A copy of this layout (same index) with other capabilities, for a fresh cache.
    fn with_caps(&self, caps: Capabilities) -> Self {
        let m = DMock {
            tag: self.tag,
            dims: self.dims.clone(),
            extent: self.extent.clone(),
            elem: self.elem,
            fill: self.fill.clone(),
            codec: self.codec,
            caps,
            needs: self.needs,
            index: Mutex::new(self.index.lock().unwrap().clone()),
            alloc: Arc::new(AtomicU64::new(0)),
            log: Arc::new(Mutex::new(Vec::new())),
            live: Arc::new(AtomicUsize::new(0)),
        };
        m.sharing(self)
    }
    fn chunk_bytes(&self) -> usize {
        self.dims.iter().product::<u64>() as usize * self.elem
    }
    fn location(&self, coord: &[u64]) -> Option<DiskLocation> {
        self.index.lock().unwrap().get(coord).copied()
    }
    fn events(&self) -> Vec<Ev> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }
    fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }
    fn record(&self, e: Ev) {
        self.log.lock().unwrap().push(e);
    }
    fn udata(&self) -> Udata {
        self.live.fetch_add(1, Ordering::SeqCst);
        Box::new(LiveUdata(Arc::clone(&self.live)))
    }
    #[allow(clippy::too_many_arguments)]
    fn plan(
        &self,
        name: &'static str,
        coord: &ChunkCoord,
        chunk: Option<&Chunk>,
        loc: DiskLocation,
        runs: &[CopyRun],
        vector: bool,
    ) -> Result<DirectPlan, LayoutError> {
        let form = match chunk {
            None => "none",
            Some(Chunk::Dense(_)) => "dense",
            Some(Chunk::Custom(_)) => "defined",
        };
        let answer = if self.codec {
            DirectPlan::NotPossible
        } else if self.needs == NeedsDefined::Always
            || (self.needs == NeedsDefined::WithoutChunk && chunk.is_none())
        {
            DirectPlan::NeedsDefinedValues
        } else if vector {
            let es = self.elem as u64;
            DirectPlan::Segments(
                runs.iter()
                    .map(|r| Segment {
                        offset: loc.addr + r.chunk_offset * es,
                        len: (r.len * es) as usize,
                    })
                    .collect(),
            )
        } else {
            DirectPlan::Selection(None)
        };
        let kind = match &answer {
            DirectPlan::NotPossible => "not-possible",
            DirectPlan::NeedsDefinedValues => "needs-defined",
            DirectPlan::Selection(_) => "selection",
            DirectPlan::Segments(_) => "segments",
        };
        self.record(Ev::Plan(
            self.tag,
            name,
            coord.as_slice().to_vec(),
            form,
            kind,
        ));
        Ok(answer)
    }
}

fn toy_encode(chunk: &[u8]) -> Vec<u8> {
    let mut v = (chunk.len() as u32).to_le_bytes().to_vec();
    v.extend(chunk.iter().map(|b| b ^ 0x5A));
    v
}

impl ChunkLayout for DMock {
    fn query(&self) -> LayoutInfo {
        LayoutInfo {
            needs_codec: self.codec,
            capabilities: self.caps,
            ..LayoutInfo::dense(&self.dims, self.elem, &self.fill)
        }
    }
    fn extent(&self) -> Vec<u64> {
        self.extent.clone()
    }
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let index = self.index.lock().unwrap();
        let out: Vec<Lookup> = coords
            .iter()
            .map(|c| Lookup {
                location: index.get(c.as_slice()).copied(),
                size_hint: self.chunk_bytes(),
                defined: if self.needs == NeedsDefined::Never {
                    DefinedInfo::AllDefined
                } else {
                    DefinedInfo::Bytes { len: 4, hint: 8 }
                },
                udata: self.udata(),
            })
            .collect();
        let found = out.iter().filter(|l| l.location.is_some()).count();
        drop(index);
        self.record(Ev::Lookup(
            self.tag,
            coords.iter().map(|c| c.as_slice().to_vec()).collect(),
            found,
        ));
        Ok(out)
    }
    fn decode(
        &self,
        coord: &ChunkCoord,
        image: Vec<u8>,
        _pb: bool,
        _u: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        self.record(Ev::Decode(self.tag, coord.as_slice().to_vec()));
        if !self.codec {
            return Ok(Chunk::Dense(image));
        }
        Ok(Chunk::Dense(image[4..].iter().map(|b| b ^ 0x5A).collect()))
    }
    fn decode_defined(
        &self,
        coord: &ChunkCoord,
        bytes: Vec<u8>,
        _u: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        self.record(Ev::DecodeDefined(self.tag, coord.as_slice().to_vec()));
        Ok(Chunk::Custom(Box::new(DefinedOnly(bytes.len()))))
    }
    fn new_chunk(&self, coord: &ChunkCoord, fill: bool) -> Result<(Chunk, Udata), LayoutError> {
        self.record(Ev::NewChunk(self.tag, coord.as_slice().to_vec(), fill));
        let n = self.chunk_bytes();
        let data = if fill && !self.fill.is_empty() {
            self.fill.iter().copied().cycle().take(n).collect()
        } else {
            vec![0; n]
        };
        Ok((Chunk::Dense(data), self.udata()))
    }
    fn encode(
        &self,
        coord: &ChunkCoord,
        chunk: &Chunk,
        _pb: bool,
        _u: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        self.record(Ev::Encode(self.tag, coord.as_slice().to_vec()));
        let chunk = chunk.as_dense().ok_or("not dense")?;
        Ok(if self.codec {
            Encoded::Owned(toy_encode(chunk))
        } else {
            Encoded::SameAsCache
        })
    }
    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        self.record(Ev::Insert(self.tag, reqs.len()));
        let mut index = self.index.lock().unwrap();
        Ok(reqs
            .iter()
            .map(|r| {
                let loc = match r.old {
                    Some(old) if old.size == r.new_size => old,
                    _ => DiskLocation {
                        addr: self.alloc.fetch_add(r.new_size.max(1), Ordering::SeqCst),
                        size: r.new_size,
                    },
                };
                index.insert(r.coord.as_slice().to_vec(), loc);
                loc
            })
            .collect())
    }
    fn delete_chunk(
        &self,
        coord: &ChunkCoord,
        _l: Option<DiskLocation>,
        _u: &mut Udata,
    ) -> Result<(), LayoutError> {
        self.index.lock().unwrap().remove(coord.as_slice());
        Ok(())
    }
    fn plan_selection_read(
        &self,
        coord: &ChunkCoord,
        chunk: Option<&Chunk>,
        loc: DiskLocation,
        runs: &[CopyRun],
        _pb: bool,
        _u: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        self.plan("sel-read", coord, chunk, loc, runs, false)
    }
    fn plan_vector_read(
        &self,
        coord: &ChunkCoord,
        chunk: Option<&Chunk>,
        loc: DiskLocation,
        runs: &[CopyRun],
        _pb: bool,
        _u: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        self.plan("vec-read", coord, chunk, loc, runs, true)
    }
    fn plan_selection_write(
        &self,
        coord: &ChunkCoord,
        chunk: Option<&Chunk>,
        loc: DiskLocation,
        runs: &[CopyRun],
        _pb: bool,
        _u: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        self.plan("sel-write", coord, chunk, loc, runs, false)
    }
    fn plan_vector_write(
        &self,
        coord: &ChunkCoord,
        chunk: Option<&Chunk>,
        loc: DiskLocation,
        runs: &[CopyRun],
        _pb: bool,
        _u: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        self.plan("vec-write", coord, chunk, loc, runs, true)
    }
}

// ------------------------------------------------------------------------------------------
// Conversions and storage helpers.
// ------------------------------------------------------------------------------------------

/// File i16 to memory i32 (reads), little-endian.
#[derive(Debug)]
struct I16ToI32;
impl Conversion for I16ToI32 {
    fn src_size(&self) -> usize {
        2
    }
    fn dst_size(&self) -> usize {
        4
    }
    fn convert(&self, src: &[u8], dst: &mut [u8], n: usize) -> Result<(), LayoutError> {
        for i in 0..n {
            let v = i16::from_le_bytes([src[2 * i], src[2 * i + 1]]) as i32;
            dst[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    }
}

/// Memory i32 to file i16 (writes), little-endian, truncating.
#[derive(Debug)]
struct I32ToI16;
impl Conversion for I32ToI16 {
    fn src_size(&self) -> usize {
        4
    }
    fn dst_size(&self) -> usize {
        2
    }
    fn convert(&self, src: &[u8], dst: &mut [u8], n: usize) -> Result<(), LayoutError> {
        for i in 0..n {
            let v = i32::from_le_bytes(src[4 * i..4 * i + 4].try_into()?) as i16;
            dst[2 * i..2 * i + 2].copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    }
}

/// File u32 to memory f64 (reads), little-endian.
#[derive(Debug)]
struct U32ToF64;
impl Conversion for U32ToF64 {
    fn src_size(&self) -> usize {
        4
    }
    fn dst_size(&self) -> usize {
        8
    }
    fn convert(&self, src: &[u8], dst: &mut [u8], n: usize) -> Result<(), LayoutError> {
        for i in 0..n {
            let v = u32::from_le_bytes(src[4 * i..4 * i + 4].try_into()?) as f64;
            dst[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    }
}

type Store = Arc<Metrics<MemoryStorage>>;

fn store() -> Store {
    Arc::new(Metrics::new(MemoryStorage::new()))
}

fn cfg(limit: usize) -> ChunkCacheConfig {
    ChunkCacheConfig {
        limit,
        default_dataset_min: 0,
        preencode_high_water: None,
        threads: Some(1),
        ..ChunkCacheConfig::default()
    }
}

fn cache_with(s: &Store, config: ChunkCacheConfig, layouts: &[(u64, Arc<DMock>)]) -> ChunkCache {
    let storage: Arc<dyn Storage> = s.clone();
    let mut c = ChunkCache::new(storage, config).unwrap();
    for (d, m) in layouts {
        c.register(DatasetId(*d), m.clone()).unwrap();
    }
    c
}

fn slab(start: &[u64], shape: &[u64]) -> Selection {
    Selection::Hyperslab(Hyperslab::contiguous(start, shape).unwrap())
}

fn points(rank: usize, flat: &[u64]) -> Selection {
    Selection::Points(Points::new(rank, flat.to_vec()).unwrap())
}

/// `n` u16 values `base + i`, little-endian.
fn u16s(n: usize, base: u16) -> Vec<u8> {
    (0..n)
        .flat_map(|i| (base.wrapping_add(i as u16)).to_le_bytes())
        .collect()
}

/// Writes `data` to the whole dataset through a cache that never bypasses, then flushes.
fn populate(s: &Store, d: u64, m: &Arc<DMock>, data: &[u8]) {
    let mut c = cache_with(s, cfg(1 << 30), &[(d, m.clone())]);
    c.write(&[WriteRequest::new(DatasetId(d), &Selection::All, data).with_bypass(Bypass::Never)])
        .unwrap();
    c.flush().unwrap();
    c.destroy();
}

/// Writes `data` to `sel` of dataset `d` through a never-bypassing cache, then flushes.
fn populate_sel(s: &Store, d: u64, m: &Arc<DMock>, sel: &Selection, data: &[u8]) {
    let mut c = cache_with(s, cfg(1 << 30), &[(d, m.clone())]);
    c.write(&[WriteRequest::new(DatasetId(d), sel, data).with_bypass(Bypass::Never)])
        .unwrap();
    c.flush().unwrap();
    c.destroy();
}

fn read_as(c: &mut ChunkCache, d: u64, sel: &Selection, n: usize, mode: Bypass) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    c.read(&mut [ReadRequest::new(DatasetId(d), sel, &mut buf).with_bypass(mode)])
        .unwrap();
    buf
}

fn plans(ev: &[Ev]) -> Vec<Ev> {
    ev.iter()
        .filter(|e| matches!(e, Ev::Plan(..)))
        .cloned()
        .collect()
}

fn plan(tag: u64, name: &'static str, c: &[u64], form: &'static str, a: &'static str) -> Ev {
    Ev::Plan(tag, name, c.to_vec(), form, a)
}

// ------------------------------------------------------------------------------------------
// Tests.
// ------------------------------------------------------------------------------------------

/// SCC-045: an uncached unfiltered chunk read in bypass mode for 10 scattered elements is one
/// selection plan and one vectored read of 10 segments, no decode; with a codec the planners
/// answer "not possible" and the fallback decodes; a resident dirty chunk is served from the
/// cache with no storage read and no planner call.
#[test]
fn scc_045_selection_read_and_fallbacks() {
    let s = store();
    let m = Arc::new(DMock::new(1, &[64], &[64], 2, &[]));
    let data = u16s(64, 100);
    populate(&s, 1, &m, &data);
    m.events();
    let idx: Vec<u64> = (0..10).map(|i| i * 6 + 1).collect();
    let sel = points(1, &idx);
    let expected: Vec<u8> = idx
        .iter()
        .flat_map(|&i| (100 + i as u16).to_le_bytes())
        .collect();

    let mut c = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
    let before = s.snapshot();
    let mut buf = vec![0u8; 20];
    let rep = c
        .read(&mut [ReadRequest::new(DatasetId(1), &sel, &mut buf).with_bypass(Bypass::Always)])
        .unwrap();
    assert_eq!(buf, expected);
    assert_eq!(
        m.events(),
        [
            Ev::Lookup(1, vec![vec![0]], 1),
            plan(1, "sel-read", &[0], "none", "selection")
        ]
    );
    let d = s.snapshot().since(&before);
    assert_eq!((d.reads, d.read_vectors, d.read_segments), (0, 1, 10));
    assert_eq!(d.bytes_read, 20);
    assert!(rep.mode.selection && !rep.mode.vector);
    assert_eq!(c.stats().entries, 0);

    // With a codec: both planners refuse, the chunk is decoded and dropped.
    let s2 = store();
    let z = Arc::new(DMock::new(2, &[64], &[64], 2, &[]).codec());
    populate(&s2, 2, &z, &data);
    z.events();
    let mut c2 = cache_with(&s2, cfg(1 << 20), &[(2, z.clone())]);
    assert_eq!(read_as(&mut c2, 2, &sel, 20, Bypass::Always), expected);
    assert_eq!(
        z.events(),
        [
            Ev::Lookup(2, vec![vec![0]], 1),
            plan(2, "sel-read", &[0], "none", "not-possible"),
            plan(2, "vec-read", &[0], "none", "not-possible"),
            Ev::Decode(2, vec![0]),
        ]
    );
    assert_eq!(c2.stats().entries, 0);

    // A resident dirty chunk: served from the cache.
    c.write(&[
        WriteRequest::new(DatasetId(1), &slab(&[1], &[1]), &[9, 9]).with_bypass(Bypass::Never)
    ])
    .unwrap();
    m.events();
    let before = s.snapshot();
    let got = read_as(&mut c, 1, &slab(&[0], &[3]), 6, Bypass::Always);
    assert_eq!(got, [100, 0, 9, 9, 102, 0]);
    let d = s.snapshot().since(&before);
    assert_eq!(d.reads + d.read_vectors, 0);
    assert!(plans(&m.events()).is_empty());
}

/// SCC-046: with only the vector planner, reading 3 elements in bypass mode gives segments
/// whose offsets all fall inside [address, address + disk size) of the chunk, in one
/// vectored read.
#[test]
fn scc_046_vector_read_segments_inside_chunk() {
    let s = store();
    let m = Arc::new(DMock::new(1, &[32], &[16], 2, &[]).caps(Capabilities::VECTOR_READ));
    populate(&s, 1, &m, &u16s(32, 0));
    m.events();
    let loc = m.location(&[1]).unwrap();
    let mut c = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
    s.record_ops(true);
    let got = read_as(&mut c, 1, &points(1, &[17, 20, 30]), 6, Bypass::Always);
    assert_eq!(got, [17, 0, 20, 0, 30, 0]);
    let ops = s.ops();
    assert_eq!(ops.len(), 3);
    for op in &ops {
        assert_eq!(op.op, IoOp::ReadVectored);
        assert!(op.offset >= loc.addr && op.offset + op.len <= loc.addr + loc.size);
    }
    assert_eq!(
        plans(&m.events()),
        [plan(1, "vec-read", &[1], "none", "segments")]
    );
}

/// SCC-047: a planner called without a chunk asks for the defined set; the cache reads the
/// defined section (4 bytes), decodes it with decode_defined and asks again with it, which
/// returns segments. A layout that asks a second time gets an error.
#[test]
fn scc_047_needs_defined_values_then_retry() {
    let s = store();
    let m = Arc::new(
        DMock::new(1, &[16], &[16], 2, &[])
            .caps(Capabilities::VECTOR_READ)
            .needs(NeedsDefined::WithoutChunk),
    );
    populate(&s, 1, &m, &u16s(16, 50));
    m.events();
    let mut c = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
    s.record_ops(true);
    let got = read_as(&mut c, 1, &slab(&[2], &[2]), 4, Bypass::Always);
    assert_eq!(got, [52, 0, 53, 0]);
    assert_eq!(
        m.events(),
        [
            Ev::Lookup(1, vec![vec![0]], 1),
            plan(1, "vec-read", &[0], "none", "needs-defined"),
            Ev::Lookup(1, vec![vec![0]], 1),
            Ev::DecodeDefined(1, vec![0]),
            plan(1, "vec-read", &[0], "defined", "segments"),
        ]
    );
    let loc = m.location(&[0]).unwrap();
    let lens: Vec<(u64, u64)> = s.ops().iter().map(|o| (o.offset, o.len)).collect();
    assert_eq!(lens, [(loc.addr, 4), (loc.addr + 4, 4)]);
    // The defined-only form was kept aside, not left in the cache.
    assert_eq!(c.stats().entries, 0);
    assert_eq!(m.live(), 0);

    // A broken layout asking twice.
    let s2 = store();
    let b = Arc::new(
        DMock::new(2, &[16], &[16], 2, &[])
            .caps(Capabilities::VECTOR_READ)
            .needs(NeedsDefined::Always),
    );
    populate(&s2, 2, &b, &u16s(16, 0));
    let mut c2 = cache_with(&s2, cfg(1 << 20), &[(2, b.clone())]);
    let mut buf = vec![0u8; 4];
    let err = c2
        .read(&mut [
            ReadRequest::new(DatasetId(2), &slab(&[2], &[2]), &mut buf).with_bypass(Bypass::Always)
        ])
        .unwrap_err();
    assert!(matches!(
        err,
        ChunkCacheError::Layout {
            callback: "plan_vector_read",
            ..
        }
    ));
}

/// Storage hooks that count the reads and writes handed a slice of a watched memory range. A
/// vectored call reaches the inner storage as one vectored call (its metrics count it so).
#[derive(Debug, Default)]
struct Spy {
    watch: Mutex<(usize, usize)>,
    hits: AtomicUsize,
}

impl Spy {
    fn check(&self, ptr: *const u8, len: usize) {
        let (lo, hi) = *self.watch.lock().unwrap();
        let p = ptr as usize;
        if len > 0 && p < hi && p + len > lo {
            self.hits.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn watch(&self, buf: &[u8]) {
        let p = buf.as_ptr() as usize;
        *self.watch.lock().unwrap() = (p, p + buf.len());
        self.hits.store(0, Ordering::SeqCst);
    }
}

impl Hooks for Spy {
    fn read_at(&self, inner: &dyn Storage, offset: u64, buf: &mut [u8]) -> h5_io::Result<()> {
        self.check(buf.as_ptr(), buf.len());
        inner.read_at(offset, buf)
    }
    fn write_at(&self, inner: &dyn Storage, offset: u64, data: &[u8]) -> h5_io::Result<()> {
        self.check(data.as_ptr(), data.len());
        inner.write_at(offset, data)
    }
    fn read_vectored(
        &self,
        inner: &dyn Storage,
        segments: &mut [ReadSegment<'_>],
    ) -> h5_io::Result<()> {
        for seg in segments.iter() {
            self.check(seg.buf.as_ptr(), seg.buf.len());
        }
        inner.read_vectored(segments)
    }
    fn write_vectored(
        &self,
        inner: &dyn Storage,
        segments: &[WriteSegment<'_>],
    ) -> h5_io::Result<()> {
        for seg in segments {
            self.check(seg.data.as_ptr(), seg.data.len());
        }
        inner.write_vectored(segments)
    }
}

/// SCC-048: a bypass read converting 32-bit unsigned integers to 64-bit floats never hands the
/// user buffer to storage (it goes through the conversion buffer) and converts correctly; the
/// same read without conversion reads straight into the user buffer.
#[test]
fn scc_048_user_buffer_to_storage_only_without_conversion() {
    let s = store();
    let m = Arc::new(DMock::new(1, &[32], &[16], 4, &[]));
    let data: Vec<u8> = (0..32u32).flat_map(|i| (i * 1000).to_le_bytes()).collect();
    populate(&s, 1, &m, &data);
    let spy = Arc::new(Intercept::new(s.clone(), Spy::default()));
    let storage: Arc<dyn Storage> = spy.clone();
    let mut c = ChunkCache::new(storage, cfg(1 << 20)).unwrap();
    c.register(DatasetId(1), m.clone()).unwrap();

    let mut out = vec![0u8; 32 * 8];
    spy.hooks().watch(&out);
    let before = s.snapshot();
    let rep = c
        .read(
            &mut [ReadRequest::new(DatasetId(1), &Selection::All, &mut out)
                .converting(&U32ToF64)
                .with_bypass(Bypass::Always)],
        )
        .unwrap();
    assert_eq!(spy.hooks().hits.load(Ordering::SeqCst), 0);
    let got: Vec<f64> = out
        .chunks(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let want: Vec<f64> = (0..32u32).map(|i| (i * 1000) as f64).collect();
    assert_eq!(got, want);
    assert!(rep.mode.selection);
    assert_eq!(c.stats().conversion_buffers, 1);
    assert_eq!(s.snapshot().since(&before).read_vectors, 1);

    let mut raw = vec![0u8; 32 * 4];
    spy.hooks().watch(&raw);
    c.read(&mut [
        ReadRequest::new(DatasetId(1), &Selection::All, &mut raw).with_bypass(Bypass::Always)
    ])
    .unwrap();
    assert_eq!(spy.hooks().hits.load(Ordering::SeqCst), 2);
    assert_eq!(raw, data);
    assert_eq!(c.stats().conversion_buffers, 1);
}

/// Runs a fixed scenario of reads and writes (bypassed and not, converting and not, several
/// datasets in one call) and returns every read result, the final file bytes and how many
/// planner calls agreed to a direct transfer.
fn scenario(caps: Capabilities, mode: Bypass) -> (Vec<Vec<u8>>, Vec<u8>, usize) {
    let s = store();
    let a = Arc::new(DMock::new(1, &[12, 10], &[4, 4], 2, &[0xFF, 0xFF]).caps(caps));
    let b = Arc::new(
        DMock::new(2, &[40], &[8], 1, &[3])
            .codec()
            .caps(caps)
            .sharing(&a),
    );
    let mut c = cache_with(&s, cfg(1 << 20), &[(1, a.clone()), (2, b.clone())]);
    let mut reads = Vec::new();
    let w = |c: &mut ChunkCache, d: u64, sel: &Selection, data: &[u8]| {
        c.write(&[WriteRequest::new(DatasetId(d), sel, data).with_bypass(mode)])
            .unwrap();
    };
    // Missing chunks, partially written.
    w(&mut c, 1, &slab(&[1, 2], &[6, 7]), &u16s(42, 1000));
    w(&mut c, 2, &slab(&[5], &[20]), &u16s(10, 7));
    c.flush().unwrap();
    // Existing and missing chunks mixed.
    w(&mut c, 1, &slab(&[0, 0], &[12, 5]), &u16s(60, 2000));
    w(
        &mut c,
        1,
        &points(2, &[11, 9, 0, 0, 5, 5, 2, 8]),
        &u16s(4, 3000),
    );
    reads.push(read_as(&mut c, 1, &Selection::All, 240, mode));
    reads.push(read_as(
        &mut c,
        1,
        &points(2, &[3, 3, 11, 9, 0, 1, 7, 7]),
        8,
        mode,
    ));
    reads.push(read_as(&mut c, 2, &slab(&[3], &[30]), 30, mode));
    // Conversions.
    let vals: Vec<u8> = (0..24i32)
        .flat_map(|i| (i * 300 - 2000).to_le_bytes())
        .collect();
    c.write(&[
        WriteRequest::new(DatasetId(1), &slab(&[4, 3], &[4, 6]), &vals)
            .converting(&I32ToI16)
            .with_bypass(mode),
    ])
    .unwrap();
    let mut conv = vec![0u8; 120 * 4];
    c.read(
        &mut [ReadRequest::new(DatasetId(1), &Selection::All, &mut conv)
            .converting(&I16ToI32)
            .with_bypass(mode)],
    )
    .unwrap();
    reads.push(conv);
    // Two datasets in one call.
    let da = u16s(8, 4000);
    let db = vec![42u8; 12];
    let sa = slab(&[8, 2], &[2, 4]);
    let sb = slab(&[0], &[12]);
    c.write(&[
        WriteRequest::new(DatasetId(1), &sa, &da).with_bypass(mode),
        WriteRequest::new(DatasetId(2), &sb, &db).with_bypass(mode),
    ])
    .unwrap();
    reads.push(read_as(&mut c, 1, &Selection::All, 240, mode));
    reads.push(read_as(&mut c, 2, &Selection::All, 40, mode));
    c.flush().unwrap();
    c.destroy();
    // Read everything back through a fresh, never-bypassing cache.
    let mut c = cache_with(&s, cfg(1 << 20), &[(1, a.clone()), (2, b.clone())]);
    reads.push(read_as(&mut c, 1, &Selection::All, 240, Bypass::Never));
    reads.push(read_as(&mut c, 2, &Selection::All, 40, Bypass::Never));
    let direct = a
        .events()
        .iter()
        .filter(|e| matches!(e, Ev::Plan(.., "selection" | "segments")))
        .count();
    (reads, s.inner().snapshot(), direct)
}

/// SCC-056: the scenario run with and without the four planners gives identical read results
/// and byte-identical files; the results also equal those of the never-bypassing cache.
#[test]
fn scc_056_planners_are_optimisations() {
    let (with, file_with, direct) = scenario(Capabilities::DIRECT_IO, Bypass::Always);
    let (without, file_without, none) = scenario(Capabilities::NONE, Bypass::Always);
    let (cached, _, _) = scenario(Capabilities::DIRECT_IO, Bypass::Never);
    assert!(direct >= 10, "the planners served {direct} pieces");
    assert_eq!(none, 0);
    assert_eq!(with, without);
    assert_eq!(file_with, file_without);
    assert_eq!(with, cached);
    // Spot check: fill where nothing was written, converted values where they were.
    assert_eq!(&with[0][..2], &3001u16.to_le_bytes());
    assert_eq!(&with[6][2 * 9..2 * 10], &[0xFF, 0xFF]);
}

/// SCC-061 / EC-03: a bypass read of a chunk larger than the limit leaves the footprint at or
/// below the limit, admits nothing, and leaves no udata alive beyond the resident entries —
/// with the planners and through the fallback.
#[test]
fn scc_061_ec_03_big_chunk_read_releases_everything() {
    for caps in [Capabilities::DIRECT_IO, Capabilities::NONE] {
        let s = store();
        let m = Arc::new(DMock::new(1, &[2048], &[1024], 2, &[]).caps(caps));
        populate(&s, 1, &m, &u16s(2048, 0));
        let mut c = cache_with(&s, cfg(1000), &[(1, m.clone())]);
        let got = read_as(&mut c, 1, &Selection::All, 4096, Bypass::Auto);
        assert_eq!(got, u16s(2048, 0));
        let st = c.stats();
        assert!(st.footprint <= 1000);
        assert_eq!(st.peak_footprint, 0);
        assert_eq!(st.entries, 0);
        assert_eq!(st.bypassed, 2);
        assert_eq!(m.live(), st.entries);
    }
}

/// SCC-067: with a 1 MiB limit, reading a 4 MiB chunk (a contiguous dataset as one chunk) goes
/// through bypass under `Auto`; the footprint never exceeds the limit and the data is correct.
#[test]
fn scc_067_too_big_chunk_bypasses() {
    let s = store();
    let n = 2 << 20; // u16 elements: 4 MiB
    let m = Arc::new(DMock::new(1, &[n], &[n], 2, &[]).caps(Capabilities::NONE));
    let data: Vec<u8> = (0..n).flat_map(|i| (i as u16).to_le_bytes()).collect();
    populate(&s, 1, &m, &data);
    let mut c = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
    let got = read_as(&mut c, 1, &Selection::All, data.len(), Bypass::Auto);
    assert!(got == data);
    let st = c.stats();
    assert_eq!(st.bypassed, 1);
    assert!(st.peak_footprint <= 1 << 20);
    assert_eq!(st.entries, 0);
    // A 0.4 MiB chunk (below half the limit) is cached under Auto.
    let small = Arc::new(
        DMock::new(2, &[200_000], &[200_000], 2, &[])
            .caps(Capabilities::NONE)
            .sharing(&m),
    );
    populate(&s, 2, &small, &u16s(200_000, 0));
    c.register(DatasetId(2), small.clone()).unwrap();
    read_as(&mut c, 2, &Selection::All, 400_000, Bypass::Auto);
    assert_eq!(c.stats().entries, 1);
    assert_eq!(c.stats().bypassed, 1);
    // The same chunk read whole from a layout that can plan direct reads (and whose images are
    // its bytes) goes straight to the caller's buffer under Auto: nothing to gain by caching.
    let planned = Arc::new(DMock::new(3, &[200_000], &[200_000], 2, &[]).sharing(&m));
    populate(&s, 3, &planned, &u16s(200_000, 3));
    c.register(DatasetId(3), planned.clone()).unwrap();
    let got = read_as(&mut c, 3, &Selection::All, 400_000, Bypass::Auto);
    assert!(got == u16s(200_000, 3));
    assert_eq!(c.stats().entries, 1);
    assert_eq!(c.stats().bypassed, 2);
    // A partial read of it is cached as before.
    read_as(&mut c, 3, &slab(&[10], &[5]), 10, Bypass::Auto);
    assert_eq!(c.stats().entries, 2);
}

/// The four planner configurations of SCC-068 and SCC-069.
fn configs() -> [(&'static str, Capabilities); 4] {
    [
        ("both", Capabilities::DIRECT_IO),
        (
            "selection",
            Capabilities::SELECTION_READ | Capabilities::SELECTION_WRITE,
        ),
        (
            "vector",
            Capabilities::VECTOR_READ | Capabilities::VECTOR_WRITE,
        ),
        ("neither", Capabilities::NONE),
    ]
}

/// SCC-068: bypass read order in four configurations over chunks 0..2 stored and chunk 3
/// missing: one batched lookup, then selection plans (both, selection only), vector plans
/// (vector only) or decodes (neither); the missing chunk reads as fill; identical data.
#[test]
fn scc_068_bypass_read_order_four_configs() {
    let mut results = Vec::new();
    for (name, caps) in configs() {
        let s = store();
        let m = Arc::new(DMock::new(1, &[32], &[8], 2, &[7, 0]).caps(caps));
        populate_sel(&s, 1, &m, &slab(&[0], &[24]), &u16s(24, 10));
        m.events();
        let mut c = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
        let before = s.snapshot();
        let mut buf = vec![0u8; 2 * 28];
        let rep = c
            .read(
                &mut [ReadRequest::new(DatasetId(1), &slab(&[2], &[28]), &mut buf)
                    .with_bypass(Bypass::Always)],
            )
            .unwrap();
        let lookup = Ev::Lookup(1, vec![vec![0], vec![1], vec![2], vec![3]], 3);
        let per = |f: &dyn Fn(u64) -> Ev| -> Vec<Ev> {
            std::iter::once(lookup.clone())
                .chain((0..3).map(f))
                .collect()
        };
        let (want, reads) = match name {
            "both" | "selection" => (per(&|i| plan(1, "sel-read", &[i], "none", "selection")), 1),
            "vector" => (per(&|i| plan(1, "vec-read", &[i], "none", "segments")), 1),
            _ => (per(&|i| Ev::Decode(1, vec![i])), 3),
        };
        assert_eq!(m.events(), want, "{name}");
        let d = s.snapshot().since(&before);
        assert_eq!(d.read_vectors, reads, "{name}");
        assert_eq!(d.reads, 0, "{name}");
        assert_eq!(rep.mode.selection, matches!(name, "both" | "selection"));
        assert_eq!(rep.mode.vector, name == "vector");
        assert_eq!(c.stats().entries, 0);
        results.push(buf);
    }
    let mut want = u16s(22, 12);
    want.extend([7, 0].repeat(6));
    for r in &results {
        assert_eq!(r, &want);
    }
}

/// SCC-069: bypass write order in four configurations, chunks 0 and 1 stored, 2 and 3 missing.
/// Stored chunks are planned (selection or vector write) and written by one vectored write at
/// the end; missing chunks (and all chunks without planners) go through the cache and are
/// written and evicted before the next chunk is processed. The files read back identical.
#[test]
fn scc_069_bypass_write_order_four_configs() {
    let mut files = Vec::new();
    for (name, caps) in configs() {
        let s = store();
        let m = Arc::new(DMock::new(1, &[32], &[8], 2, &[7, 0]).caps(caps));
        populate_sel(&s, 1, &m, &slab(&[0], &[16]), &u16s(16, 10));
        m.events();
        let mut c = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
        let before = s.snapshot();
        let rep = c
            .write(&[
                WriteRequest::new(DatasetId(1), &slab(&[2], &[28]), &u16s(28, 500))
                    .with_bypass(Bypass::Always),
            ])
            .unwrap();
        let lookup = Ev::Lookup(1, vec![vec![0], vec![1], vec![2], vec![3]], 2);
        // The mock has no codec: the cache reads and writes its images as they are, with no
        // decode or encode call (SCC-006).
        let through = |i: u64, found: usize, fill: bool| {
            let mut v = vec![Ev::Lookup(1, vec![vec![i]], found)];
            if !(found == 1 && fill) {
                v.push(Ev::NewChunk(1, vec![i], fill));
            }
            v.push(Ev::Insert(1, 1));
            v
        };
        let mut want = vec![lookup];
        let writes = match name {
            "both" | "selection" | "vector" => {
                let p = if name == "vector" {
                    ("vec-write", "segments")
                } else {
                    ("sel-write", "selection")
                };
                want.push(plan(1, p.0, &[0], "none", p.1));
                want.push(plan(1, p.0, &[1], "none", p.1));
                want.extend(through(2, 0, false));
                want.extend(through(3, 0, true));
                3
            }
            _ => {
                want.extend(through(0, 1, true));
                want.extend(through(1, 1, false));
                want.extend(through(2, 0, false));
                want.extend(through(3, 0, true));
                4
            }
        };
        assert_eq!(m.events(), want, "{name}");
        let d = s.snapshot().since(&before);
        assert_eq!((d.writes, d.write_vectors), (0, writes), "{name}");
        assert_eq!(rep.mode.selection, matches!(name, "both" | "selection"));
        assert_eq!(rep.mode.vector, name == "vector");
        assert_eq!(c.stats().entries, 0);
        assert_eq!(m.live(), 0);
        let mut fresh = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
        files.push(read_as(&mut fresh, 1, &Selection::All, 64, Bypass::Never));
    }
    let mut want = u16s(2, 10);
    want.extend(u16s(28, 500));
    want.extend([7, 0, 7, 0]);
    for f in &files {
        assert_eq!(f, &want);
    }
}

/// SCC-070: a bypass write to 3 unfiltered datasets × 4 stored chunks each is one vectored write
/// of 12 segments; reading them back in bypass mode is one vectored read.
#[test]
fn scc_070_merged_direct_io() {
    let s = store();
    let first = Arc::new(DMock::new(1, &[32], &[8], 2, &[]));
    let ms: Vec<Arc<DMock>> = (1..=3)
        .map(|d| {
            if d == 1 {
                first.clone()
            } else {
                Arc::new(DMock::new(d, &[32], &[8], 2, &[]).sharing(&first))
            }
        })
        .collect();
    for (i, m) in ms.iter().enumerate() {
        populate(&s, i as u64 + 1, m, &u16s(32, 0));
    }
    let layouts: Vec<(u64, Arc<DMock>)> = ms
        .iter()
        .enumerate()
        .map(|(i, m)| (i as u64 + 1, m.clone()))
        .collect();
    let mut c = cache_with(&s, cfg(1 << 20), &layouts);
    let data: Vec<Vec<u8>> = (0..3).map(|d| u16s(32, 100 * (d + 1))).collect();
    let before = s.snapshot();
    let reqs: Vec<WriteRequest<'_>> = (0..3)
        .map(|d| {
            WriteRequest::new(DatasetId(d as u64 + 1), &Selection::All, &data[d])
                .with_bypass(Bypass::Always)
        })
        .collect();
    c.write(&reqs).unwrap();
    let d = s.snapshot().since(&before);
    assert_eq!((d.writes, d.write_vectors, d.write_segments), (0, 1, 12));

    let before = s.snapshot();
    let mut bufs = vec![vec![0u8; 64]; 3];
    let mut rr: Vec<ReadRequest<'_>> = bufs
        .iter_mut()
        .enumerate()
        .map(|(d, b)| {
            ReadRequest::new(DatasetId(d as u64 + 1), &Selection::All, b)
                .with_bypass(Bypass::Always)
        })
        .collect();
    c.read(&mut rr).unwrap();
    drop(rr);
    let d = s.snapshot().since(&before);
    assert_eq!((d.reads, d.read_vectors, d.read_segments), (0, 1, 12));
    assert_eq!(bufs, data);
}

/// SCC-071: with a 1 KiB conversion buffer, a 10 KiB bypass read converting 16-bit to 32-bit
/// integers (2,560 elements, 4 bytes each counted) runs in 10 vectored reads of the vector
/// planner and gives correct values; a converting write runs in batches too. A layout offering
/// only selection read falls back to the cached path (decode, no planner call).
#[test]
fn scc_071_conversion_batches() {
    let s = store();
    let m = Arc::new(DMock::new(1, &[2560], &[512], 2, &[]));
    let vals: Vec<i16> = (0..2560).map(|i| (i as i16) * 7 - 9000).collect();
    let data: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    populate(&s, 1, &m, &data);
    m.events();
    let config = ChunkCacheConfig {
        conversion_buffer: 1024,
        ..cfg(1 << 20)
    };
    let mut c = cache_with(&s, config.clone(), &[(1, m.clone())]);
    let before = s.snapshot();
    let mut out = vec![0u8; 2560 * 4];
    let rep = c
        .read(
            &mut [ReadRequest::new(DatasetId(1), &Selection::All, &mut out)
                .converting(&I16ToI32)
                .with_bypass(Bypass::Always)],
        )
        .unwrap();
    let got: Vec<i32> = out
        .chunks(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, vals.iter().map(|&v| v as i32).collect::<Vec<_>>());
    let d = s.snapshot().since(&before);
    assert_eq!(d.read_vectors, 10);
    assert_eq!(d.bytes_read, 5120);
    assert!(rep.mode.vector && !rep.mode.selection);
    assert!(
        plans(&m.events())
            .iter()
            .all(|e| matches!(e, Ev::Plan(_, "vec-read", ..)))
    );
    assert_eq!(c.stats().conversion_buffers, 1);

    // Writing back converted values: batches as well.
    let back: Vec<u8> = (0..2560i32)
        .flat_map(|i| (i - 1000).to_le_bytes())
        .collect();
    let before = s.snapshot();
    c.write(&[WriteRequest::new(DatasetId(1), &Selection::All, &back)
        .converting(&I32ToI16)
        .with_bypass(Bypass::Always)])
        .unwrap();
    let d = s.snapshot().since(&before);
    assert_eq!(d.write_vectors, 10);
    let raw = read_as(&mut c, 1, &Selection::All, 5120, Bypass::Never);
    let want: Vec<u8> = (0..2560i32)
        .flat_map(|i| ((i - 1000) as i16).to_le_bytes())
        .collect();
    assert_eq!(raw, want);

    // Selection read only: too big for the buffer, so the cached path.
    let sel_only = Arc::new(m.with_caps(Capabilities::SELECTION_READ));
    let mut c = cache_with(&s, config, &[(1, sel_only.clone())]);
    sel_only.events();
    let mut out = vec![0u8; 2560 * 4];
    c.read(
        &mut [ReadRequest::new(DatasetId(1), &Selection::All, &mut out)
            .converting(&I16ToI32)
            .with_bypass(Bypass::Always)],
    )
    .unwrap();
    let ev = sel_only.events();
    assert!(plans(&ev).is_empty());
    assert_eq!(ev.iter().filter(|e| matches!(e, Ev::Decode(..))).count(), 5);
    let got: Vec<i32> = out
        .chunks(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, (0..2560i32).map(|i| i - 1000).collect::<Vec<_>>());
}

/// SCC-072: a dirty resident chunk bypass-read returns the dirty values; a bypass write of a
/// different value updates the resident copy (no storage write), and a cached read then
/// returns the new value.
#[test]
fn scc_072_bypass_consistent_with_resident_chunks() {
    let s = store();
    let m = Arc::new(DMock::new(1, &[16], &[8], 2, &[]));
    populate(&s, 1, &m, &u16s(16, 0));
    let mut c = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
    c.write(&[
        WriteRequest::new(DatasetId(1), &slab(&[3], &[2]), &[1, 1, 2, 2])
            .with_bypass(Bypass::Never),
    ])
    .unwrap();
    let before = s.snapshot();
    assert_eq!(
        read_as(&mut c, 1, &slab(&[2], &[4]), 8, Bypass::Always),
        [2, 0, 1, 1, 2, 2, 5, 0]
    );
    c.write(&[
        WriteRequest::new(DatasetId(1), &slab(&[4], &[1]), &[8, 8]).with_bypass(Bypass::Always)
    ])
    .unwrap();
    let d = s.snapshot().since(&before);
    assert_eq!(d.reads + d.read_vectors + d.writes + d.write_vectors, 0);
    assert_eq!(
        read_as(&mut c, 1, &slab(&[3], &[2]), 4, Bypass::Never),
        [1, 1, 8, 8]
    );
    assert!(c.entry_stats(DatasetId(1), &[0]).unwrap().dirty);
}

/// SCC-104: a converting bypass read of 3 datasets allocates the conversion buffer once and
/// reads all three correctly (one vectored read for the whole call).
#[test]
fn scc_104_one_conversion_buffer_per_call() {
    let s = store();
    let first = Arc::new(DMock::new(1, &[20], &[10], 2, &[]));
    let ms: Vec<Arc<DMock>> = vec![
        first.clone(),
        Arc::new(DMock::new(2, &[20], &[10], 2, &[]).sharing(&first)),
        Arc::new(DMock::new(3, &[20], &[10], 2, &[]).sharing(&first)),
    ];
    let vals: Vec<Vec<i16>> = (0..3)
        .map(|d| (0..20).map(|i| (i - 10) * (d + 1) as i16).collect())
        .collect();
    for (d, m) in ms.iter().enumerate() {
        let bytes: Vec<u8> = vals[d].iter().flat_map(|v| v.to_le_bytes()).collect();
        populate(&s, d as u64 + 1, m, &bytes);
    }
    let layouts: Vec<(u64, Arc<DMock>)> = ms
        .iter()
        .enumerate()
        .map(|(i, m)| (i as u64 + 1, m.clone()))
        .collect();
    let mut c = cache_with(&s, cfg(1 << 20), &layouts);
    let mut bufs = vec![vec![0u8; 80]; 3];
    let before = s.snapshot();
    let mut rr: Vec<ReadRequest<'_>> = bufs
        .iter_mut()
        .enumerate()
        .map(|(d, b)| {
            ReadRequest::new(DatasetId(d as u64 + 1), &Selection::All, b)
                .converting(&I16ToI32)
                .with_bypass(Bypass::Always)
        })
        .collect();
    c.read(&mut rr).unwrap();
    drop(rr);
    assert_eq!(c.stats().conversion_buffers, 1);
    assert_eq!(s.snapshot().since(&before).read_vectors, 1);
    for d in 0..3 {
        let got: Vec<i32> = bufs[d]
            .chunks(4)
            .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(got, vals[d].iter().map(|&v| v as i32).collect::<Vec<_>>());
    }
}

/// SCC-107: a bypass read served by the vector planner reports vector I/O; a bypass write
/// served by the selection planner reports selection I/O; a fully cached read reports neither.
#[test]
fn scc_107_mode_reporting() {
    let s = store();
    let m = Arc::new(
        DMock::new(1, &[16], &[8], 2, &[])
            .caps(Capabilities::VECTOR_READ | Capabilities::SELECTION_WRITE),
    );
    populate(&s, 1, &m, &u16s(16, 0));
    let mut c = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
    let mut buf = vec![0u8; 32];
    let rep = c
        .read(&mut [
            ReadRequest::new(DatasetId(1), &Selection::All, &mut buf).with_bypass(Bypass::Always)
        ])
        .unwrap();
    assert_eq!(
        (rep.mode.selection, rep.mode.vector, rep.not_cached.len()),
        (false, true, 0)
    );
    let rep = c
        .write(
            &[WriteRequest::new(DatasetId(1), &Selection::All, &buf).with_bypass(Bypass::Always)],
        )
        .unwrap();
    assert_eq!((rep.mode.selection, rep.mode.vector), (true, false));
    // Cached: load once, then a read served entirely from the cache.
    read_as(&mut c, 1, &Selection::All, 32, Bypass::Never);
    let rep = c
        .read(&mut [
            ReadRequest::new(DatasetId(1), &Selection::All, &mut buf).with_bypass(Bypass::Always)
        ])
        .unwrap();
    assert_eq!(rep.mode, Default::default());
    assert_eq!(buf, u16s(16, 0));
}

/// EC-03: a write of a chunk bigger than the limit never leaves it resident. Under `Auto` it
/// bypasses (written and evicted in the call); under `Never` the limit is overshot during the
/// call only, the overshoot is counted, and the chunk is written and evicted before return.
#[test]
fn ec_03_big_chunk_write() {
    for mode in [Bypass::Auto, Bypass::Never] {
        let s = store();
        let m = Arc::new(DMock::new(1, &[1024], &[1024], 2, &[]).caps(Capabilities::NONE));
        let mut c = cache_with(&s, cfg(1000), &[(1, m.clone())]);
        let data = u16s(1024, 3);
        c.write(&[WriteRequest::new(DatasetId(1), &Selection::All, &data).with_bypass(mode)])
            .unwrap();
        let st = c.stats();
        assert_eq!(st.entries, 0, "{mode:?}");
        assert!(st.footprint <= 1000);
        assert_eq!(m.live(), 0);
        if mode == Bypass::Never {
            assert!(st.overshoots >= 1);
            assert_eq!(st.evictions_dirty, 1);
        } else {
            assert_eq!(st.bypassed, 1);
            assert_eq!(st.peak_footprint, 2048);
        }
        assert!(m.location(&[0]).is_some());
        let mut fresh = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
        assert_eq!(
            read_as(&mut fresh, 1, &Selection::All, 2048, Bypass::Never),
            data
        );
    }
}

/// EC-25: a write needing more room than the limit while every entry is busy (all its chunks)
/// overshoots within the call and shrinks back after it (a read loads in batches that fit and
/// does not need to); the same read in bypass mode keeps nothing resident.
#[test]
fn ec_25_busy_entries_overshoot_or_bypass() {
    let s = store();
    let m = Arc::new(DMock::new(1, &[64], &[16], 2, &[]).caps(Capabilities::NONE));
    populate(&s, 1, &m, &u16s(64, 0));
    // A limit below one chunk (32 bytes): a write that may not bypass holds its chunk busy
    // beyond the limit (writes are batched by the limit, so only a chunk larger than the
    // limit overshoots).
    let mut c = cache_with(&s, cfg(16), &[(1, m.clone())]);
    c.write(&[
        WriteRequest::new(DatasetId(1), &Selection::All, &u16s(64, 0)).with_bypass(Bypass::Never),
    ])
    .unwrap();
    assert_eq!(
        read_as(&mut c, 1, &Selection::All, 128, Bypass::Never),
        u16s(64, 0)
    );
    let st = c.stats();
    assert!(st.overshoots >= 1);
    assert!(st.peak_footprint > 16);
    assert!(st.footprint <= 16);
    assert_eq!(m.live(), st.entries);

    let mut c = cache_with(&s, cfg(64), &[(1, m.clone())]);
    assert_eq!(
        read_as(&mut c, 1, &Selection::All, 128, Bypass::Always),
        u16s(64, 0)
    );
    let st = c.stats();
    assert_eq!((st.overshoots, st.peak_footprint, st.entries), (0, 0, 0));
}

/// EC-27: a zero limit is refused; with the smallest limit (1 byte) every access bypasses and
/// results stay correct, with nothing resident after any call (at most one chunk, 16 bytes,
/// during a write fallback) and no udata alive.
#[test]
fn ec_27_tiny_limit_turns_caching_off() {
    let s = store();
    let storage: Arc<dyn Storage> = s.clone();
    assert!(matches!(
        ChunkCache::new(storage, cfg(0)),
        Err(ChunkCacheError::Config { field: "limit", .. })
    ));
    for caps in [Capabilities::DIRECT_IO, Capabilities::NONE] {
        let m = Arc::new(DMock::new(1, &[40], &[8], 2, &[1, 0]).caps(caps));
        let mut c = cache_with(&s, cfg(1), &[(1, m.clone())]);
        assert!(matches!(
            c.set_limit(0),
            Err(ChunkCacheError::Config { field: "limit", .. })
        ));
        c.write(&[WriteRequest::new(
            DatasetId(1),
            &slab(&[3], &[30]),
            &u16s(30, 9),
        )])
        .unwrap();
        c.write(&[WriteRequest::new(
            DatasetId(1),
            &slab(&[0], &[5]),
            &u16s(5, 77),
        )])
        .unwrap();
        let got = read_as(&mut c, 1, &Selection::All, 80, Bypass::Auto);
        let mut want = u16s(5, 77);
        want.extend(u16s(28, 11));
        want.extend([1, 0].repeat(7));
        assert_eq!(got, want);
        // Only the write fallback holds a chunk, and only during its call.
        let st = c.stats();
        assert_eq!((st.entries, st.footprint), (0, 0));
        assert!(st.peak_footprint <= 16);
        assert_eq!(m.live(), 0);
    }
}

/// EC-32: a conversion buffer of 1 byte (smaller than one element) is grown to one element of
/// the larger type: the converting bypass read runs one element per batch and is correct.
#[test]
fn ec_32_conversion_buffer_smaller_than_an_element() {
    let s = store();
    let m = Arc::new(DMock::new(1, &[16], &[16], 2, &[]));
    populate(&s, 1, &m, &u16s(16, 1));
    let config = ChunkCacheConfig {
        conversion_buffer: 1,
        ..cfg(1 << 20)
    };
    let mut c = cache_with(&s, config, &[(1, m.clone())]);
    let before = s.snapshot();
    let mut out = vec![0u8; 64];
    c.read(
        &mut [ReadRequest::new(DatasetId(1), &Selection::All, &mut out)
            .converting(&I16ToI32)
            .with_bypass(Bypass::Always)],
    )
    .unwrap();
    let got: Vec<i32> = out
        .chunks(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, (1..=16).collect::<Vec<i32>>());
    assert_eq!(s.snapshot().since(&before).read_vectors, 16);
    assert_eq!(c.stats().conversion_buffers, 1);
}

/// SCC-072 (request order inside one call): a cached write and a later bypassed write of the
/// same stored chunk in one call; the bypassed one finds the chunk resident and updates it in
/// the cache, so the later request wins in the file.
#[test]
fn scc_072_cached_then_bypassed_write_in_one_call() {
    let s = store();
    let m = Arc::new(DMock::new(1, &[8], &[8], 2, &[]));
    populate(&s, 1, &m, &u16s(8, 0));
    let mut c = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
    let sel = slab(&[2], &[2]);
    c.write(&[
        WriteRequest::new(DatasetId(1), &sel, &[1, 1, 1, 1]).with_bypass(Bypass::Never),
        WriteRequest::new(DatasetId(1), &sel, &[2, 2, 2, 2]).with_bypass(Bypass::Always),
    ])
    .unwrap();
    assert!(plans(&m.events()).is_empty());
    c.flush().unwrap();
    c.destroy();
    let mut fresh = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
    assert_eq!(
        read_as(&mut fresh, 1, &slab(&[1], &[4]), 8, Bypass::Never),
        [1, 0, 2, 2, 2, 2, 4, 0]
    );
}

/// A whole write of a dataset stored as one chunk, asked to skip the cache (a new small
/// dataset's first write takes this shortcut of the bypass flow): the same lookup, the same
/// planner calls in the same order and the same single vectored write as the general bypass
/// flow gives a multi-chunk write (SCC-069 above), for each planner configuration; nothing is
/// admitted. A resident chunk is updated in the cache instead (SCC-072), and a chunk never
/// stored goes through the cache and is written at once (as in the general flow).
#[test]
fn scc_069_single_chunk_whole_write_bypasses_like_the_general_flow() {
    for (name, caps) in configs() {
        let s = store();
        let m = Arc::new(DMock::new(1, &[8], &[8], 2, &[7, 0]).caps(caps));
        populate(&s, 1, &m, &u16s(8, 10));
        m.events();
        let mut c = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
        let before = s.snapshot();
        let rep = c
            .write(&[
                WriteRequest::new(DatasetId(1), &Selection::All, &u16s(8, 300))
                    .with_bypass(Bypass::Always),
            ])
            .unwrap();
        let mut want = vec![Ev::Lookup(1, vec![vec![0]], 1)];
        match name {
            "both" | "selection" => want.push(plan(1, "sel-write", &[0], "none", "selection")),
            "vector" => want.push(plan(1, "vec-write", &[0], "none", "segments")),
            _ => want.extend([
                Ev::Lookup(1, vec![vec![0]], 1),
                Ev::NewChunk(1, vec![0], false),
                Ev::Insert(1, 1),
            ]),
        }
        assert_eq!(m.events(), want, "{name}");
        let d = s.snapshot().since(&before);
        assert_eq!((d.writes, d.write_vectors, d.reads), (0, 1, 0), "{name}");
        assert_eq!(rep.mode.selection, matches!(name, "both" | "selection"));
        assert_eq!(rep.mode.vector, name == "vector");
        assert_eq!(c.stats().entries, 0, "{name}");
        assert_eq!(m.live(), 0);
        let mut fresh = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
        assert_eq!(
            read_as(&mut fresh, 1, &Selection::All, 16, Bypass::Never),
            u16s(8, 300),
            "{name}"
        );
    }

    // A resident dirty chunk: the whole write lands in the cache, storage untouched.
    let s = store();
    let m = Arc::new(DMock::new(1, &[8], &[8], 2, &[]));
    populate(&s, 1, &m, &u16s(8, 10));
    let mut c = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
    c.write(&[
        WriteRequest::new(DatasetId(1), &slab(&[1], &[1]), &[9, 9]).with_bypass(Bypass::Never)
    ])
    .unwrap();
    let before = s.snapshot();
    c.write(&[
        WriteRequest::new(DatasetId(1), &Selection::All, &u16s(8, 40)).with_bypass(Bypass::Always),
    ])
    .unwrap();
    let d = s.snapshot().since(&before);
    assert_eq!(d.reads + d.read_vectors + d.writes + d.write_vectors, 0);
    assert!(c.entry_stats(DatasetId(1), &[0]).unwrap().dirty);
    assert_eq!(
        read_as(&mut c, 1, &Selection::All, 16, Bypass::Never),
        u16s(8, 40)
    );

    // A chunk never stored: through the cache, written and dropped within the call.
    let s = store();
    let m = Arc::new(DMock::new(1, &[8], &[8], 2, &[]));
    let mut c = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
    let before = s.snapshot();
    c.write(&[
        WriteRequest::new(DatasetId(1), &Selection::All, &u16s(8, 70)).with_bypass(Bypass::Always),
    ])
    .unwrap();
    assert!(s.snapshot().since(&before).write_vectors + s.snapshot().since(&before).writes > 0);
    assert_eq!(c.stats().entries, 0);
    let mut fresh = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
    assert_eq!(
        read_as(&mut fresh, 1, &Selection::All, 16, Bypass::Never),
        u16s(8, 70)
    );

    // A wrong buffer size is refused before anything is looked up or written.
    let s = store();
    let m = Arc::new(DMock::new(1, &[8], &[8], 2, &[]));
    populate(&s, 1, &m, &u16s(8, 10));
    m.events();
    let mut c = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
    let err = c
        .write(&[
            WriteRequest::new(DatasetId(1), &Selection::All, &u16s(7, 0))
                .with_bypass(Bypass::Always),
        ])
        .unwrap_err();
    assert!(
        matches!(
            err,
            ChunkCacheError::BufferSize {
                needed: 16,
                got: 14
            }
        ),
        "{err:?}"
    );
    assert!(m.events().is_empty());
}

/// A single request writing the whole of a one-chunk dataset whose chunk is stored, with
/// bypass forced (a new small dataset's first write): one planner call, one vectored write of
/// one segment from the caller's buffer, nothing admitted, whichever planner answers (the
/// selection planner's "runs unchanged" is written without building a transfer); the stored
/// bytes are the buffer's.
#[test]
fn a_whole_single_chunk_write_goes_straight_to_its_location() {
    for (name, caps) in configs().into_iter().take(3) {
        let s = store();
        let m = Arc::new(DMock::new(1, &[6], &[6], 2, &[0, 0]).caps(caps));
        populate(&s, 1, &m, &u16s(6, 100));
        m.events();
        let mut c = cache_with(&s, cfg(1 << 20), &[(1, m.clone())]);
        let before = s.snapshot();
        let data = u16s(6, 500);
        let rep = c
            .write(&[
                WriteRequest::new(DatasetId(1), &Selection::All, &data).with_bypass(Bypass::Always)
            ])
            .unwrap();
        let answer = if name == "vector" {
            plan(1, "vec-write", &[0], "none", "segments")
        } else {
            plan(1, "sel-write", &[0], "none", "selection")
        };
        assert_eq!(plans(&m.events()), [answer], "{name}");
        assert_eq!(rep.mode.vector, name == "vector", "{name}");
        let d = s.snapshot().since(&before);
        assert_eq!(
            (d.write_vectors, d.write_segments, d.writes),
            (1, 1, 0),
            "{name}"
        );
        assert_eq!(d.bytes_written, 12, "{name}");
        let st = c.stats();
        assert_eq!(
            (st.entries, st.bypassed, st.bypassed_bytes),
            (0, 1, 12),
            "{name}"
        );
        let loc = m.location(&[0]).expect("stored");
        let mut back = vec![0u8; 12];
        s.read_at(loc.addr, &mut back).unwrap();
        assert_eq!(back, data, "{name}");
        assert_eq!(
            read_as(&mut c, 1, &Selection::All, 12, Bypass::Never),
            data,
            "{name}"
        );
    }
}
