//! A recording sparse mock layout built on `h5_chunkcache::sparse::SparseChunk`.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use h5_chunkcache::selection::CopyRun;
use h5_chunkcache::sparse::{self, SparseChunk};
use h5_chunkcache::{
    Capabilities, Chunk, ChunkCoord, ChunkLayout, Conversion, CustomChunk, DefinedInfo,
    DiskLocation, Encoded, Erased, InsertRequest, LayoutError, LayoutInfo, Lookup, MemUsage, Udata,
};

/// One layout callback, as recorded.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) enum SEvent {
    /// A lookup batch: coordinates, how many were found.
    Lookup(Vec<Vec<u64>>, usize),
    /// Full decode of a chunk with the image length.
    Decode(Vec<u64>, usize),
    /// decode_defined of a chunk with the bytes given.
    DecodeDefined(Vec<u64>, usize),
    /// new_chunk with the fill flag.
    NewChunk(Vec<u64>, bool),
    /// encode.
    Encode(Vec<u64>),
    /// An insert batch: `(coord, old, new_size)` per request.
    Insert(Vec<(Vec<u64>, Option<DiskLocation>, u64)>),
    /// delete_chunk with the location given.
    Delete(Vec<u64>, Option<DiskLocation>),
    /// gather: coord, usage before, usage reported.
    Gather(Vec<u64>, MemUsage, MemUsage),
    /// fill.
    Fill(Vec<u64>),
    /// defined_values.
    DefinedValues(Vec<u64>),
    /// erase_values: coord and what was reported.
    Erase(Vec<u64>, Erased),
    /// drop_values: coord and usage before and after.
    DropValues(Vec<u64>, MemUsage, MemUsage),
    /// condense: coord and usage before and after.
    Condense(Vec<u64>, MemUsage, MemUsage),
}

/// Sizes of every live chunk object the mock created, as last reported by the mock.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    next: AtomicU64,
    live: Mutex<HashMap<u64, MemUsage>>,
}

impl Registry {
    /// Sum of the allocated and used bytes of every live chunk object.
    pub(crate) fn totals(&self) -> (usize, usize) {
        let live = self.live.lock().unwrap();
        live.values()
            .fold((0, 0), |(a, u), m| (a + m.allocated, u + m.used))
    }

    /// Live chunk objects.
    pub(crate) fn count(&self) -> usize {
        self.live.lock().unwrap().len()
    }
}

/// The mock's chunk object: a sparse chunk, its coordinates and its registry slot (removed on
/// drop).
#[derive(Debug)]
pub(crate) struct MockChunk {
    pub(crate) inner: SparseChunk,
    pub(crate) coord: Vec<u64>,
    id: u64,
    reg: Arc<Registry>,
}

impl MockChunk {
    fn report(&self) -> MemUsage {
        let u = self.inner.mem_usage();
        self.reg.live.lock().unwrap().insert(self.id, u);
        u
    }
}

impl CustomChunk for MockChunk {
    fn mem_usage(&self) -> MemUsage {
        self.inner.mem_usage()
    }
}

impl Drop for MockChunk {
    fn drop(&mut self) {
        self.reg.live.lock().unwrap().remove(&self.id);
    }
}

/// Per-chunk state whose drop is counted.
#[derive(Debug)]
struct SUdata {
    live: Arc<AtomicUsize>,
}

impl Drop for SUdata {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Where a stored chunk is, and the length of its defined section.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Stored {
    pub(crate) loc: DiskLocation,
    pub(crate) def_len: u64,
}

/// The full capability set of the sparse mock.
pub(crate) const SPARSE_CAPS: Capabilities = Capabilities::DEFINED_VALUES
    .union(Capabilities::ERASE_VALUES)
    .union(Capabilities::SCATTER)
    .union(Capabilities::GATHER)
    .union(Capabilities::FILL)
    .union(Capabilities::DECODE_DEFINED)
    .union(Capabilities::DROP_VALUES)
    .union(Capabilities::CONDENSE);

/// Sparse mock layout.
#[derive(Debug)]
pub(crate) struct SparseMock {
    pub(crate) dims: Vec<u64>,
    pub(crate) extent: Mutex<Vec<u64>>,
    pub(crate) elem_size: usize,
    pub(crate) fill: Vec<u8>,
    pub(crate) caps: Capabilities,
    pub(crate) index: Mutex<HashMap<Vec<u64>, Stored>>,
    /// Defined-section lengths of images encoded but not inserted yet.
    pending: Mutex<HashMap<Vec<u64>, u64>>,
    alloc: AtomicU64,
    pub(crate) log: Mutex<Vec<SEvent>>,
    live_udata: Arc<AtomicUsize>,
    pub(crate) reg: Arc<Registry>,
    /// Extra value capacity (bytes) given to chunks decoded at these coordinates.
    pub(crate) decode_slack: Mutex<HashMap<Vec<u64>, usize>>,
    /// Change capacities on every gather and erase.
    pub(crate) jitter: bool,
    jitter_n: AtomicU64,
}

impl SparseMock {
    /// A sparse mock over `extent` with chunk `dims`.
    pub(crate) fn new(extent: &[u64], dims: &[u64], elem_size: usize, fill: &[u8]) -> Self {
        Self {
            dims: dims.to_vec(),
            extent: Mutex::new(extent.to_vec()),
            elem_size,
            fill: fill.to_vec(),
            caps: SPARSE_CAPS,
            index: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            alloc: AtomicU64::new(4096),
            log: Mutex::new(Vec::new()),
            live_udata: Arc::new(AtomicUsize::new(0)),
            reg: Arc::new(Registry::default()),
            decode_slack: Mutex::new(HashMap::new()),
            jitter: false,
            jitter_n: AtomicU64::new(0),
        }
    }

    /// Without these capabilities.
    pub(crate) fn without(mut self, c: Capabilities) -> Self {
        self.caps = self.caps.without(c);
        self
    }

    /// Capacities change on every gather and erase.
    pub(crate) fn with_jitter(mut self) -> Self {
        self.jitter = true;
        self
    }

    /// Elements per chunk.
    pub(crate) fn chunk_elems(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Takes the recorded events.
    pub(crate) fn take_events(&self) -> Vec<SEvent> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    /// Where a chunk is stored, if anywhere.
    pub(crate) fn stored(&self, coord: &[u64]) -> Option<Stored> {
        self.index.lock().unwrap().get(coord).copied()
    }

    /// Live udata objects.
    pub(crate) fn live_udata(&self) -> usize {
        self.live_udata.load(Ordering::SeqCst)
    }

    fn record(&self, e: SEvent) {
        self.log.lock().unwrap().push(e);
    }

    fn udata(&self) -> Udata {
        self.live_udata.fetch_add(1, Ordering::SeqCst);
        Box::new(SUdata {
            live: Arc::clone(&self.live_udata),
        })
    }

    fn wrap(&self, inner: SparseChunk, coord: &ChunkCoord) -> Chunk {
        let c = MockChunk {
            inner,
            coord: coord.as_slice().to_vec(),
            id: self.reg.next.fetch_add(1, Ordering::SeqCst),
            reg: Arc::clone(&self.reg),
        };
        c.report();
        Chunk::Custom(Box::new(c))
    }

    fn fill_value(&self) -> Vec<u8> {
        if self.fill.is_empty() {
            vec![0; self.elem_size]
        } else {
            self.fill.clone()
        }
    }

    fn jitter_step(&self) -> u64 {
        self.jitter_n.fetch_add(1, Ordering::SeqCst)
    }
}

fn mock(chunk: &Chunk) -> Result<&MockChunk, LayoutError> {
    chunk
        .downcast_ref()
        .ok_or_else(|| "not a mock chunk".into())
}

fn mock_mut(chunk: &mut Chunk) -> Result<&mut MockChunk, LayoutError> {
    chunk
        .downcast_mut()
        .ok_or_else(|| "not a mock chunk".into())
}

impl ChunkLayout for SparseMock {
    fn query(&self) -> LayoutInfo {
        LayoutInfo {
            needs_codec: true,
            tracks_defined: true,
            capabilities: self.caps,
            ..LayoutInfo::dense(&self.dims, self.elem_size, &self.fill)
        }
    }

    fn extent(&self) -> Vec<u64> {
        self.extent.lock().unwrap().clone()
    }

    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let index = self.index.lock().unwrap();
        let out: Vec<Lookup> = coords
            .iter()
            .map(|c| {
                let s = index.get(c.as_slice()).copied();
                Lookup {
                    location: s.map(|s| s.loc),
                    size_hint: 0,
                    defined: s.map_or(DefinedInfo::AllDefined, |s| DefinedInfo::Bytes {
                        len: s.def_len,
                        hint: s.def_len as usize,
                    }),
                    udata: self.udata(),
                }
            })
            .collect();
        let found = out.iter().filter(|l| l.location.is_some()).count();
        drop(index);
        self.record(SEvent::Lookup(
            coords.iter().map(|c| c.as_slice().to_vec()).collect(),
            found,
        ));
        Ok(out)
    }

    fn decode(
        &self,
        coord: &ChunkCoord,
        image: Vec<u8>,
        _partial_bound: bool,
        _udata: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        self.record(SEvent::Decode(coord.as_slice().to_vec(), image.len()));
        let mut inner = sparse::decode(&image)?;
        inner.condense();
        if let Some(&slack) = self.decode_slack.lock().unwrap().get(coord.as_slice()) {
            inner.reserve_value_bytes(slack);
        }
        Ok(self.wrap(inner, coord))
    }

    fn decode_defined(
        &self,
        coord: &ChunkCoord,
        bytes: Vec<u8>,
        _udata: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        self.record(SEvent::DecodeDefined(
            coord.as_slice().to_vec(),
            bytes.len(),
        ));
        let mut inner = sparse::decode_defined(&bytes)?;
        inner.condense();
        Ok(self.wrap(inner, coord))
    }

    fn new_chunk(&self, coord: &ChunkCoord, fill: bool) -> Result<(Chunk, Udata), LayoutError> {
        self.record(SEvent::NewChunk(coord.as_slice().to_vec(), fill));
        let inner = SparseChunk::new(self.elem_size, self.chunk_elems())?;
        Ok((self.wrap(inner, coord), self.udata()))
    }

    fn condense(&self, chunk: &mut Chunk) -> Result<MemUsage, LayoutError> {
        let c = mock_mut(chunk)?;
        let before = c.inner.mem_usage();
        c.inner.condense();
        let after = c.report();
        self.record(SEvent::Condense(c.coord.clone(), before, after));
        Ok(after)
    }

    fn encode(
        &self,
        coord: &ChunkCoord,
        chunk: &Chunk,
        _partial_bound: bool,
        _udata: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        self.record(SEvent::Encode(coord.as_slice().to_vec()));
        let c = mock(chunk)?;
        if !c.inner.has_values() {
            return Err("encode of a defined-only chunk".into());
        }
        let image = sparse::encode(&c.inner);
        let def_len = sparse::defined_section_len(&image)? as u64;
        self.pending
            .lock()
            .unwrap()
            .insert(coord.as_slice().to_vec(), def_len);
        Ok(Encoded::Owned(image))
    }

    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        self.record(SEvent::Insert(
            reqs.iter()
                .map(|r| (r.coord.as_slice().to_vec(), r.old, r.new_size))
                .collect(),
        ));
        let mut index = self.index.lock().unwrap();
        let mut pending = self.pending.lock().unwrap();
        reqs.iter()
            .map(|r| {
                let loc = match r.old {
                    Some(old) if old.size == r.new_size => old,
                    _ => DiskLocation {
                        addr: self.alloc.fetch_add(r.new_size.max(1), Ordering::SeqCst),
                        size: r.new_size,
                    },
                };
                let def_len = pending
                    .remove(r.coord.as_slice())
                    .ok_or("insert without encode")?;
                index.insert(r.coord.as_slice().to_vec(), Stored { loc, def_len });
                Ok(loc)
            })
            .collect()
    }

    fn delete_chunk(
        &self,
        coord: &ChunkCoord,
        location: Option<DiskLocation>,
        _udata: &mut Udata,
    ) -> Result<(), LayoutError> {
        self.record(SEvent::Delete(coord.as_slice().to_vec(), location));
        self.index.lock().unwrap().remove(coord.as_slice());
        Ok(())
    }

    fn scatter(
        &self,
        chunk: &Chunk,
        runs: &[CopyRun],
        buf: &mut [u8],
        conv: Option<&dyn Conversion>,
    ) -> Result<(), LayoutError> {
        let c = mock(chunk)?;
        c.inner.scatter(runs, buf, &self.fill_value(), conv)?;
        Ok(())
    }

    fn gather(
        &self,
        chunk: &mut Chunk,
        runs: &[CopyRun],
        buf: &[u8],
        conv: Option<&dyn Conversion>,
    ) -> Result<MemUsage, LayoutError> {
        let c = mock_mut(chunk)?;
        let before = c.inner.mem_usage();
        c.inner.gather(runs, buf, conv)?;
        if self.jitter {
            let k = (self.jitter_step() % 5) as usize;
            c.inner.reserve(k);
        }
        let after = c.report();
        self.record(SEvent::Gather(c.coord.clone(), before, after));
        Ok(after)
    }

    fn fill(&self, chunk: &mut Chunk, runs: &[CopyRun]) -> Result<MemUsage, LayoutError> {
        let c = mock_mut(chunk)?;
        c.inner.fill(runs, &self.fill_value())?;
        self.record(SEvent::Fill(c.coord.clone()));
        Ok(c.report())
    }

    fn defined_values(&self, chunk: &Chunk, runs: &[CopyRun]) -> Result<Vec<CopyRun>, LayoutError> {
        let c = mock(chunk)?;
        self.record(SEvent::DefinedValues(c.coord.clone()));
        Ok(c.inner.defined_runs(runs)?)
    }

    fn erase_values(&self, chunk: &mut Chunk, runs: &[CopyRun]) -> Result<Erased, LayoutError> {
        let c = mock_mut(chunk)?;
        let out = c.inner.erase(runs)?;
        if self.jitter && self.jitter_step().is_multiple_of(3) {
            c.inner.condense();
        }
        let e = Erased {
            usage: c.report(),
            changed: out.changed,
            empty: out.empty,
        };
        self.record(SEvent::Erase(c.coord.clone(), e));
        Ok(e)
    }

    fn drop_values(&self, chunk: &mut Chunk) -> Result<MemUsage, LayoutError> {
        let c = mock_mut(chunk)?;
        let before = c.inner.mem_usage();
        c.inner.drop_values();
        let after = c.report();
        self.record(SEvent::DropValues(c.coord.clone(), before, after));
        Ok(after)
    }
}
