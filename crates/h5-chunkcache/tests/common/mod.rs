//! A recording mock layout for the cache's integration tests.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use h5_chunkcache::{
    Chunk, ChunkCoord, ChunkLayout, DiskLocation, Encoded, InsertRequest, LayoutError, LayoutInfo,
    Lookup, Udata,
};

/// One layout callback, as recorded.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) enum Event {
    /// A lookup batch: dataset tag, coordinates, how many were found.
    Lookup(u64, Vec<Vec<u64>>, usize),
    /// decode of a chunk.
    Decode(u64, Vec<u64>),
    /// new_chunk with the fill flag.
    NewChunk(u64, Vec<u64>, bool),
    /// encode.
    Encode(u64, Vec<u64>),
    /// encode_in_place.
    EncodeInPlace(u64, Vec<u64>),
    /// An insert batch of this many chunks.
    Insert(u64, usize),
    /// delete_chunk of a chunk, with the location it had.
    Delete(u64, Vec<u64>, Option<DiskLocation>),
}

/// The event log shared by several mocks.
pub(crate) type Log = Arc<Mutex<Vec<Event>>>;

/// Per-chunk state whose drop is counted.
#[derive(Debug)]
pub(crate) struct MockUdata {
    live: Arc<AtomicUsize>,
}

impl MockUdata {
    fn boxed(live: &Arc<AtomicUsize>) -> Udata {
        live.fetch_add(1, Ordering::SeqCst);
        Box::new(MockUdata {
            live: Arc::clone(live),
        })
    }
}

impl Drop for MockUdata {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Dense mock layout with an optional toy codec (4-byte length header, bytes XOR 0x5A).
#[derive(Debug)]
pub(crate) struct MockLayout {
    pub(crate) tag: u64,
    pub(crate) dims: Vec<u64>,
    pub(crate) extent: Mutex<Vec<u64>>,
    pub(crate) elem_size: usize,
    pub(crate) fill: Vec<u8>,
    pub(crate) codec: bool,
    pub(crate) index: Mutex<HashMap<Vec<u64>, DiskLocation>>,
    pub(crate) alloc: Arc<AtomicU64>,
    pub(crate) log: Log,
    pub(crate) live: Arc<AtomicUsize>,
    /// `(callback, coord, partial_bound)` of every decode, encode and encode_in_place.
    pub(crate) pb_log: Mutex<Vec<(&'static str, Vec<u64>, bool)>>,
    /// Whether edge chunks are encoded differently.
    pub(crate) edge_differ: bool,
    /// Extra layout constants (capabilities, early allocation...) applied by `query`.
    pub(crate) tweak: Option<fn(&mut LayoutInfo)>,
    /// Every encode fails while set.
    pub(crate) fail_encode: std::sync::atomic::AtomicBool,
    /// Decodes given a spare buffer (`decode_reusing`), and those whose result reused it.
    pub(crate) spares: (AtomicUsize, AtomicUsize),
}

impl MockLayout {
    /// A mock with its own log, allocator and udata counter.
    pub(crate) fn new(
        tag: u64,
        extent: &[u64],
        dims: &[u64],
        elem_size: usize,
        fill: &[u8],
    ) -> Self {
        Self {
            tag,
            dims: dims.to_vec(),
            extent: Mutex::new(extent.to_vec()),
            elem_size,
            fill: fill.to_vec(),
            codec: false,
            index: Mutex::new(HashMap::new()),
            alloc: Arc::new(AtomicU64::new(4096)),
            log: Arc::new(Mutex::new(Vec::new())),
            live: Arc::new(AtomicUsize::new(0)),
            pb_log: Mutex::new(Vec::new()),
            spares: Default::default(),
            edge_differ: false,
            tweak: None,
            fail_encode: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Declares edge chunks encoded differently.
    pub(crate) fn with_edge_differ(mut self) -> Self {
        self.edge_differ = true;
        self
    }

    /// Sets the current extent (the caller of set-extent notification does this first).
    pub(crate) fn set_extent(&self, extent: &[u64]) {
        *self.extent.lock().unwrap() = extent.to_vec();
    }

    /// The stored location of a chunk, if any.
    pub(crate) fn location(&self, coord: &[u64]) -> Option<DiskLocation> {
        self.index.lock().unwrap().get(coord).copied()
    }

    /// Shares the log, allocator and udata counter of `other`.
    pub(crate) fn sharing(mut self, other: &MockLayout) -> Self {
        self.log = Arc::clone(&other.log);
        self.alloc = Arc::clone(&other.alloc);
        self.live = Arc::clone(&other.live);
        self
    }

    /// Turns the toy codec on.
    pub(crate) fn with_codec(mut self) -> Self {
        self.codec = true;
        self
    }

    /// Same layout state (index) for a fresh cache: a new mock sharing index, log and allocator.
    pub(crate) fn chunk_bytes(&self) -> usize {
        self.dims.iter().product::<u64>() as usize * self.elem_size
    }

    /// Takes the recorded events.
    pub(crate) fn take_events(&self) -> Vec<Event> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    /// Live udata count.
    pub(crate) fn live_udata(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    fn record(&self, e: Event) {
        self.log.lock().unwrap().push(e);
    }
}

impl ChunkLayout for MockLayout {
    fn query(&self) -> LayoutInfo {
        let mut info = LayoutInfo {
            needs_codec: self.codec,
            edge_chunks_differ: self.edge_differ,
            ..LayoutInfo::dense(&self.dims, self.elem_size, &self.fill)
        };
        if let Some(t) = self.tweak {
            t(&mut info);
        }
        info
    }

    fn extent(&self) -> Vec<u64> {
        self.extent.lock().unwrap().clone()
    }

    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        let index = self.index.lock().unwrap();
        let out: Vec<Lookup> = coords
            .iter()
            .map(|c| {
                Lookup::dense(
                    index.get(c.as_slice()).copied(),
                    self.chunk_bytes(),
                    MockUdata::boxed(&self.live),
                )
            })
            .collect();
        let found = out.iter().filter(|l| l.location.is_some()).count();
        drop(index);
        self.record(Event::Lookup(
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
        partial_bound: bool,
        _udata: &mut Udata,
    ) -> Result<Chunk, LayoutError> {
        self.record(Event::Decode(self.tag, coord.as_slice().to_vec()));
        self.pb_log
            .lock()
            .unwrap()
            .push(("decode", coord.as_slice().to_vec(), partial_bound));
        if !self.codec {
            return Ok(Chunk::Dense(image));
        }
        let (head, body) = image.split_at(4);
        let n = u32::from_le_bytes(head.try_into()?) as usize;
        if n != body.len() {
            return Err("bad length header".into());
        }
        Ok(Chunk::Dense(body.iter().map(|b| b ^ 0x5A).collect()))
    }

    fn decode_reusing(
        &self,
        coord: &ChunkCoord,
        image: Vec<u8>,
        partial_bound: bool,
        udata: &mut Udata,
        mut spare: Vec<u8>,
    ) -> Result<(Chunk, Vec<u8>), LayoutError> {
        self.spares.0.fetch_add(1, Ordering::SeqCst);
        if !self.codec || image.len() < 4 {
            return Ok((self.decode(coord, image, partial_bound, udata)?, spare));
        }
        let (chunk, leftover) = {
            let cap = spare.as_ptr();
            spare.clear();
            // The toy codec's decode, into the spare's allocation.
            let Chunk::Dense(decoded) = self.decode(coord, image.clone(), partial_bound, udata)?
            else {
                return Err("not dense".into());
            };
            spare.extend_from_slice(&decoded);
            if spare.as_ptr() == cap {
                self.spares.1.fetch_add(1, Ordering::SeqCst);
            }
            (Chunk::Dense(spare), image)
        };
        Ok((chunk, leftover))
    }

    fn new_chunk(&self, coord: &ChunkCoord, fill: bool) -> Result<(Chunk, Udata), LayoutError> {
        self.record(Event::NewChunk(self.tag, coord.as_slice().to_vec(), fill));
        let n = self.chunk_bytes();
        let data = if fill && !self.fill.is_empty() {
            self.fill.iter().copied().cycle().take(n).collect()
        } else {
            vec![0; n]
        };
        Ok((Chunk::Dense(data), MockUdata::boxed(&self.live)))
    }

    fn encode(
        &self,
        coord: &ChunkCoord,
        chunk: &Chunk,
        partial_bound: bool,
        _udata: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        self.record(Event::Encode(self.tag, coord.as_slice().to_vec()));
        self.pb_log
            .lock()
            .unwrap()
            .push(("encode", coord.as_slice().to_vec(), partial_bound));
        if self.fail_encode.load(Ordering::SeqCst) {
            return Err("encode failed".into());
        }
        let chunk = chunk.as_dense().ok_or("not dense")?;
        Ok(if self.codec {
            Encoded::Owned(toy_encode(chunk))
        } else {
            Encoded::SameAsCache
        })
    }

    fn encode_in_place(
        &self,
        coord: &ChunkCoord,
        chunk: Chunk,
        partial_bound: bool,
        _udata: &mut Udata,
    ) -> Result<Vec<u8>, LayoutError> {
        self.record(Event::EncodeInPlace(self.tag, coord.as_slice().to_vec()));
        self.pb_log.lock().unwrap().push((
            "encode_in_place",
            coord.as_slice().to_vec(),
            partial_bound,
        ));
        if self.fail_encode.load(Ordering::SeqCst) {
            return Err("encode failed".into());
        }
        let Chunk::Dense(chunk) = chunk else {
            return Err("not dense".into());
        };
        Ok(if self.codec {
            toy_encode(&chunk)
        } else {
            chunk
        })
    }

    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        self.record(Event::Insert(self.tag, reqs.len()));
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
        location: Option<DiskLocation>,
        _udata: &mut Udata,
    ) -> Result<(), LayoutError> {
        self.record(Event::Delete(self.tag, coord.as_slice().to_vec(), location));
        self.index.lock().unwrap().remove(coord.as_slice());
        Ok(())
    }
}

fn toy_encode(chunk: &[u8]) -> Vec<u8> {
    let mut v = (chunk.len() as u32).to_le_bytes().to_vec();
    v.extend(chunk.iter().map(|b| b ^ 0x5A));
    v
}
