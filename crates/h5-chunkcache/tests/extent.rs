//! Integration tests of set-extent notification (spec §2.11, OQ-16, OQ-17, EC-08 .. EC-12)
//! against a local recording mock with the optional callbacks the flow uses (fill, erase-values,
//! direct-write planners), an edge-aware toy codec, early allocation and per-chunk heap objects.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use h5_chunkcache::selection::{CopyRun, Hyperslab, Selection};
use h5_chunkcache::{
    Capabilities, Chunk, ChunkCache, ChunkCacheConfig, ChunkCacheError, ChunkCoord, ChunkLayout,
    DatasetId, DirectPlan, DiskLocation, Encoded, Erased, InsertRequest, LayoutError, LayoutInfo,
    Lookup, MemUsage, ReadRequest, Segment, Udata, WriteRequest,
};
use h5_io::{IoOp, MemoryStorage, Metrics, Storage, StorageExt};

type Store = Arc<Metrics<MemoryStorage>>;

/// One layout callback, as recorded.
#[derive(Clone, PartialEq, Eq, Debug)]
enum Ev {
    /// Coordinates looked up, how many were found.
    Lookup(Vec<Vec<u64>>, usize),
    /// decode with its partial_bound flag.
    Decode(Vec<u64>, bool),
    /// new_chunk with its fill flag.
    NewChunk(Vec<u64>, bool),
    /// encode with its partial_bound flag.
    Encode(Vec<u64>, bool),
    /// encode_in_place with its partial_bound flag.
    EncodeInPlace(Vec<u64>, bool),
    /// One insert batch: coordinates and the heap object of each request's udata.
    Insert(Vec<(Vec<u64>, Option<u64>)>),
    /// delete_chunk with the location given.
    Delete(Vec<u64>, Option<DiskLocation>),
    /// fill with `(chunk_offset, len)` runs.
    Fill(Vec<u64>, Vec<(u64, u64)>),
    /// erase_values with `(chunk_offset, len)` runs.
    Erase(Vec<u64>, Vec<(u64, u64)>),
    /// plan_selection_write: coordinates, runs, partial_bound.
    PlanSel(Vec<u64>, Vec<(u64, u64)>, bool),
    /// plan_vector_write: coordinates, runs, partial_bound.
    PlanVec(Vec<u64>, Vec<(u64, u64)>, bool),
}

/// Per-chunk state: the external "heap object" a fill value refers to (new_chunk only).
#[derive(Debug)]
struct XUdata {
    heap: Option<u64>,
}

/// What the selection-write planner answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SelMode {
    /// `Selection(None)`: the input runs unchanged.
    Unchanged,
    /// `NotPossible`.
    NotPossible,
}

/// A dense mock layout; the toy codec writes a header with the length and the partial_bound
/// flag, and decode fails when given another flag than the one the image was written with.
#[derive(Debug)]
struct XMock {
    dims: Vec<u64>,
    extent: Mutex<Vec<u64>>,
    elem: usize,
    fill: Vec<u8>,
    codec: bool,
    edge_differ: bool,
    early: bool,
    fill_outside: bool,
    caps: Capabilities,
    sel_mode: SelMode,
    /// erase_values reports the chunk empty.
    erase_empty: bool,
    index: Mutex<HashMap<Vec<u64>, DiskLocation>>,
    alloc: AtomicU64,
    heap: AtomicU64,
    log: Mutex<Vec<Ev>>,
    /// `(callback, extent seen)` of every lookup and delete_chunk.
    seen: Mutex<Vec<(&'static str, Vec<u64>)>>,
}

impl XMock {
    fn new(extent: &[u64], dims: &[u64], fill: u8) -> Self {
        Self {
            dims: dims.to_vec(),
            extent: Mutex::new(extent.to_vec()),
            elem: 1,
            fill: vec![fill],
            codec: false,
            edge_differ: false,
            early: false,
            fill_outside: false,
            caps: Capabilities::NONE,
            sel_mode: SelMode::Unchanged,
            erase_empty: false,
            index: Mutex::new(HashMap::new()),
            alloc: AtomicU64::new(4096),
            heap: AtomicU64::new(100),
            log: Mutex::new(Vec::new()),
            seen: Mutex::new(Vec::new()),
        }
    }

    fn caps(mut self, c: Capabilities) -> Self {
        self.caps = self.caps | c;
        self
    }

    fn codec(mut self) -> Self {
        self.codec = true;
        self
    }

    fn edge(mut self) -> Self {
        self.edge_differ = true;
        self
    }

    fn set_extent(&self, e: &[u64]) {
        *self.extent.lock().unwrap() = e.to_vec();
    }

    fn location(&self, c: &[u64]) -> Option<DiskLocation> {
        self.index.lock().unwrap().get(c).copied()
    }

    fn events(&self) -> Vec<Ev> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    fn record(&self, e: Ev) {
        self.log.lock().unwrap().push(e);
    }

    fn chunk_bytes(&self) -> usize {
        self.dims.iter().product::<u64>() as usize * self.elem
    }

    fn udata(&self) -> Udata {
        Box::new(XUdata { heap: None })
    }
}

fn runs_of(runs: &[CopyRun]) -> Vec<(u64, u64)> {
    runs.iter().map(|r| (r.chunk_offset, r.len)).collect()
}

fn fill_dense(chunk: &mut Chunk, runs: &[CopyRun], v: u8) -> Result<MemUsage, LayoutError> {
    let data = chunk.as_dense_mut().ok_or("not dense")?;
    for r in runs {
        for b in &mut data[r.chunk_offset as usize..(r.chunk_offset + r.len) as usize] {
            *b = v;
        }
    }
    Ok(chunk.mem_usage())
}

impl ChunkLayout for XMock {
    fn query(&self) -> LayoutInfo {
        LayoutInfo {
            needs_codec: self.codec,
            edge_chunks_differ: self.edge_differ,
            early_allocation: self.early,
            fill_refers_outside: self.fill_outside,
            capabilities: self.caps,
            ..LayoutInfo::dense(&self.dims, self.elem, &self.fill)
        }
    }

    fn extent(&self) -> Vec<u64> {
        self.extent.lock().unwrap().clone()
    }

    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Lookup>, LayoutError> {
        self.seen.lock().unwrap().push(("lookup", self.extent()));
        let index = self.index.lock().unwrap();
        let out: Vec<Lookup> = coords
            .iter()
            .map(|c| {
                Lookup::dense(
                    index.get(c.as_slice()).copied(),
                    self.chunk_bytes(),
                    self.udata(),
                )
            })
            .collect();
        let found = out.iter().filter(|l| l.location.is_some()).count();
        drop(index);
        self.record(Ev::Lookup(
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
        self.record(Ev::Decode(coord.as_slice().to_vec(), partial_bound));
        if !self.codec {
            return Ok(Chunk::Dense(image));
        }
        let n = u32::from_le_bytes(image[..4].try_into()?) as usize;
        if self.edge_differ && (image[4] == 1) != partial_bound {
            return Err("decoded with the wrong partial_bound flag".into());
        }
        let body = &image[5..];
        if n != body.len() {
            return Err("bad length header".into());
        }
        Ok(Chunk::Dense(body.iter().map(|b| b ^ 0x5A).collect()))
    }

    fn new_chunk(&self, coord: &ChunkCoord, fill: bool) -> Result<(Chunk, Udata), LayoutError> {
        self.record(Ev::NewChunk(coord.as_slice().to_vec(), fill));
        let n = self.chunk_bytes();
        let data = if fill {
            vec![self.fill[0]; n]
        } else {
            vec![0; n]
        };
        let heap = self.heap.fetch_add(1, Ordering::SeqCst);
        Ok((Chunk::Dense(data), Box::new(XUdata { heap: Some(heap) })))
    }

    fn encode(
        &self,
        coord: &ChunkCoord,
        chunk: &Chunk,
        partial_bound: bool,
        _udata: &mut Udata,
    ) -> Result<Encoded, LayoutError> {
        self.record(Ev::Encode(coord.as_slice().to_vec(), partial_bound));
        let chunk = chunk.as_dense().ok_or("not dense")?;
        Ok(if self.codec {
            Encoded::Owned(toy_encode(chunk, partial_bound))
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
        self.record(Ev::EncodeInPlace(coord.as_slice().to_vec(), partial_bound));
        let Chunk::Dense(chunk) = chunk else {
            return Err("not dense".into());
        };
        Ok(if self.codec {
            toy_encode(&chunk, partial_bound)
        } else {
            chunk
        })
    }

    fn insert(&self, reqs: &mut [InsertRequest<'_>]) -> Result<Vec<DiskLocation>, LayoutError> {
        self.record(Ev::Insert(
            reqs.iter()
                .map(|r| {
                    let heap = r.udata.downcast_ref::<XUdata>().and_then(|u| u.heap);
                    (r.coord.as_slice().to_vec(), heap)
                })
                .collect(),
        ));
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
        self.seen.lock().unwrap().push(("delete", self.extent()));
        self.record(Ev::Delete(coord.as_slice().to_vec(), location));
        self.index.lock().unwrap().remove(coord.as_slice());
        Ok(())
    }

    fn fill(&self, chunk: &mut Chunk, runs: &[CopyRun]) -> Result<MemUsage, LayoutError> {
        // The chunk has no coordinates here; record them as empty.
        self.record(Ev::Fill(Vec::new(), runs_of(runs)));
        fill_dense(chunk, runs, self.fill[0])
    }

    fn erase_values(&self, chunk: &mut Chunk, runs: &[CopyRun]) -> Result<Erased, LayoutError> {
        self.record(Ev::Erase(Vec::new(), runs_of(runs)));
        let usage = fill_dense(chunk, runs, self.fill[0])?;
        Ok(Erased {
            usage,
            changed: true,
            empty: self.erase_empty,
        })
    }

    fn plan_selection_write(
        &self,
        coord: &ChunkCoord,
        _chunk: Option<&Chunk>,
        _location: DiskLocation,
        runs: &[CopyRun],
        partial_bound: bool,
        _udata: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        self.record(Ev::PlanSel(
            coord.as_slice().to_vec(),
            runs_of(runs),
            partial_bound,
        ));
        Ok(match self.sel_mode {
            SelMode::Unchanged => DirectPlan::Selection(None),
            SelMode::NotPossible => DirectPlan::NotPossible,
        })
    }

    fn plan_vector_write(
        &self,
        coord: &ChunkCoord,
        _chunk: Option<&Chunk>,
        location: DiskLocation,
        runs: &[CopyRun],
        partial_bound: bool,
        _udata: &mut Udata,
    ) -> Result<DirectPlan, LayoutError> {
        self.record(Ev::PlanVec(
            coord.as_slice().to_vec(),
            runs_of(runs),
            partial_bound,
        ));
        Ok(DirectPlan::Segments(
            runs.iter()
                .map(|r| Segment {
                    offset: location.addr + r.chunk_offset * self.elem as u64,
                    len: r.len as usize * self.elem,
                })
                .collect(),
        ))
    }
}

fn toy_encode(chunk: &[u8], pb: bool) -> Vec<u8> {
    let mut v = (chunk.len() as u32).to_le_bytes().to_vec();
    v.push(u8::from(pb));
    v.extend(chunk.iter().map(|b| b ^ 0x5A));
    v
}

// ---------------------------------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------------------------------

fn store() -> Store {
    Arc::new(Metrics::new(MemoryStorage::new()))
}

fn cache(s: &Store, limit: usize) -> ChunkCache {
    let storage: Arc<dyn Storage> = s.clone();
    ChunkCache::new(
        storage,
        ChunkCacheConfig {
            limit,
            default_dataset_min: 0,
            bypass_fraction: 1.0,
            preencode_high_water: None,
            threads: Some(1),
            ..ChunkCacheConfig::default()
        },
    )
    .unwrap()
}

const DS: DatasetId = DatasetId(1);

fn setup(s: &Store, m: XMock, limit: usize) -> (ChunkCache, Arc<XMock>) {
    let m = Arc::new(m);
    let mut c = cache(s, limit);
    c.register(DS, m.clone()).unwrap();
    (c, m)
}

fn slab(start: &[u64], shape: &[u64]) -> Selection {
    Selection::Hyperslab(Hyperslab::contiguous(start, shape).unwrap())
}

fn read(c: &mut ChunkCache, sel: &Selection, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    c.read(&mut [ReadRequest::new(DS, sel, &mut buf)]).unwrap();
    buf
}

fn write(c: &mut ChunkCache, sel: &Selection, data: &[u8]) {
    c.write(&[WriteRequest::new(DS, sel, data)]).unwrap();
}

/// Resizes the mock, then notifies the cache with the old dims.
fn resize(c: &mut ChunkCache, m: &XMock, new: &[u64]) {
    let old = m.extent();
    m.set_extent(new);
    c.set_extent_notify(DS, &old).unwrap();
}

fn reads(s: &Store) -> u64 {
    let sn = s.snapshot();
    sn.reads + sn.read_vectors
}

fn writes(s: &Store) -> u64 {
    let sn = s.snapshot();
    sn.writes + sn.write_vectors
}

fn is_delete(e: &Ev) -> bool {
    matches!(e, Ev::Delete(..))
}

/// Fills 1-D `[0, n)` with 1..=n, flushes; `evict` empties the cache afterwards.
fn fill_1d(c: &mut ChunkCache, m: &XMock, n: u64, evict: bool) -> Vec<u8> {
    let data: Vec<u8> = (1..=n as u8).collect();
    write(c, &slab(&[0], &[n]), &data);
    c.flush_dataset(DS, evict).unwrap();
    m.events();
    data
}

// ---------------------------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------------------------

/// SCC-028: during the notify call the layout already reports the new dimensions (every lookup
/// and delete sees them), while the cache works from the old ones it received as the argument:
/// it finds and deletes the chunks between the new and the old extent, which it could not know
/// from the layout alone.
#[test]
fn scc_028_layout_reports_new_dims_cache_gets_old() {
    let s = store();
    let (mut c, m) = setup(&s, XMock::new(&[16], &[4], 9), 1 << 20);
    fill_1d(&mut c, &m, 16, true);
    m.seen.lock().unwrap().clear();
    resize(&mut c, &m, &[8]);
    let seen = m.seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|(_, e)| e == &[8]), "{seen:?}");
    assert_eq!(
        seen.iter().filter(|(w, _)| *w == "delete").count(),
        2,
        "chunks 2 and 3 (elements 8..16, known only from the old dims) deleted"
    );
    let ev = m.events();
    assert_eq!(ev[0], Ev::Lookup(vec![vec![2], vec![3]], 2));
    assert!(matches!(&ev[1], Ev::Delete(c, Some(_)) if c == &[2]));
    assert!(matches!(&ev[2], Ev::Delete(c, Some(_)) if c == &[3]));
    assert_eq!(ev.len(), 3);
}

/// Bad arguments give typed errors: old dims of another rank, an unknown dataset.
#[test]
fn notify_rejects_wrong_rank_and_unknown_dataset() {
    let s = store();
    let (mut c, m) = setup(&s, XMock::new(&[8, 8], &[4, 4], 0), 1 << 20);
    assert!(matches!(
        c.set_extent_notify(DS, &[8]),
        Err(ChunkCacheError::Selection(
            h5_chunkcache::selection::SelectionError::RankMismatch {
                expected: 2,
                got: 1
            }
        ))
    ));
    assert!(matches!(
        c.set_extent_notify(DatasetId(7), &[8, 8]),
        Err(ChunkCacheError::UnknownDataset(DatasetId(7)))
    ));
    assert!(m.events().is_empty());
}

/// SCC-093: growing the unlimited dimension of a 2-D dataset keeps resident chunks where they
/// are: a chunk cached before is a hit afterwards with no storage read and no callback, and its
/// values sit at the right coordinates.
#[test]
fn scc_093_resident_chunks_survive_growth() {
    let s = store();
    let (mut c, m) = setup(&s, XMock::new(&[4, 8], &[2, 4], 0), 1 << 20);
    let data: Vec<u8> = (0..32).collect();
    write(&mut c, &slab(&[0, 0], &[4, 8]), &data);
    c.flush().unwrap();
    m.events();
    let r0 = reads(&s);
    let hits = c.stats().hits;
    resize(&mut c, &m, &[10, 8]);
    assert!(m.events().is_empty(), "no callback on growth");
    assert_eq!(
        read(&mut c, &slab(&[2, 4], &[2, 4]), 8),
        [20, 21, 22, 23, 28, 29, 30, 31]
    );
    assert_eq!(reads(&s), r0, "no storage read");
    assert_eq!(c.stats().hits, hits + 1);
    assert!(m.events().is_empty());
    // The new rows read as fill (chunks that do not exist), the old ones unchanged.
    let all = read(&mut c, &slab(&[0, 0], &[10, 8]), 80);
    assert_eq!(&all[..32], &data[..]);
    assert!(all[32..].iter().all(|&b| b == 0));
}

/// SCC-093: growing a dataset whose last chunk is resident and only partly inside (the fast
/// path: nothing leaves the extent) changes nothing: no callback, no storage access; the
/// elements that come inside read as the fill value, then as written.
#[test]
fn scc_093_growing_a_partial_resident_chunk_is_free() {
    let s = store();
    let (mut c, m) = setup(&s, XMock::new(&[6], &[4], 9), 1 << 20);
    write(&mut c, &slab(&[0], &[6]), &[1, 2, 3, 4, 5, 6]);
    m.events();
    let (r0, w0) = (reads(&s), writes(&s));
    resize(&mut c, &m, &[7]);
    resize(&mut c, &m, &[11]);
    assert!(m.events().is_empty(), "no callback on growth");
    assert_eq!((reads(&s), writes(&s)), (r0, w0), "no storage access");
    assert_eq!(
        read(&mut c, &slab(&[0], &[11]), 11),
        [1, 2, 3, 4, 5, 6, 9, 9, 9, 9, 9]
    );
    write(&mut c, &slab(&[6], &[3]), &[7, 8, 10]);
    c.flush_dataset(DS, true).unwrap();
    assert_eq!(
        read(&mut c, &slab(&[0], &[11]), 11),
        [1, 2, 3, 4, 5, 6, 7, 8, 10, 9, 9]
    );
}

/// SCC-094: shrinking so a dirty resident chunk with a disk address falls fully outside calls
/// delete_chunk once with that address, writes nothing and drops the entry. A resident chunk that
/// was never written (no address) is dropped without a delete call (documented choice).
#[test]
fn scc_094_resident_chunk_outside_is_deleted_not_written() {
    let s = store();
    let (mut c, m) = setup(&s, XMock::new(&[16], &[4], 9), 1 << 20);
    write(&mut c, &slab(&[8], &[4]), &[1, 2, 3, 4]);
    c.flush().unwrap();
    let loc = m.location(&[2]).unwrap();
    write(&mut c, &slab(&[8], &[4]), &[5, 6, 7, 8]); // dirty again
    write(&mut c, &slab(&[12], &[4]), &[1, 1, 1, 1]); // dirty, never written
    assert!(c.entry_stats(DS, &[2]).unwrap().dirty);
    m.events();
    let w0 = writes(&s);
    resize(&mut c, &m, &[8]);
    assert_eq!(m.events(), [Ev::Delete(vec![2], Some(loc))]);
    assert_eq!(writes(&s), w0, "no write of the discarded chunks");
    assert!(c.entry_stats(DS, &[2]).is_none());
    assert!(c.entry_stats(DS, &[3]).is_none());
    assert_eq!(c.stats().dirty_entries, 0);
    assert_eq!(c.stats().footprint, 0);
    c.flush().unwrap();
    assert_eq!(writes(&s), w0);
}

/// SCC-095 / EC-10: shrink from 10 to 6 elements (chunk 4) with the chunk resident, then grow
/// back to 10: elements 6 and 7 read back as fill, not their old values; the chunk became dirty
/// at the shrink.
#[test]
fn scc_095_ec_10_resident_partial_chunk_filled() {
    let s = store();
    let (mut c, m) = setup(&s, XMock::new(&[10], &[4], 9), 1 << 20);
    fill_1d(&mut c, &m, 10, false);
    assert!(!c.entry_stats(DS, &[1]).unwrap().dirty);
    resize(&mut c, &m, &[6]);
    assert!(
        c.entry_stats(DS, &[1]).unwrap().dirty,
        "the chunk becomes dirty"
    );
    assert!(c.entry_stats(DS, &[2]).is_none());
    let ev = m.events();
    assert!(
        matches!(ev.as_slice(), [Ev::Delete(c, Some(_))] if c == &[2]),
        "{ev:?}"
    );
    resize(&mut c, &m, &[10]);
    assert_eq!(
        read(&mut c, &slab(&[0], &[10]), 10),
        [1, 2, 3, 4, 5, 6, 9, 9, 9, 9]
    );
    // Through the file as well.
    c.flush_dataset(DS, true).unwrap();
    assert_eq!(
        read(&mut c, &slab(&[0], &[10]), 10),
        [1, 2, 3, 4, 5, 6, 9, 9, 9, 9]
    );
}

/// EC-10, non-resident chunk and two dimensions: a shrink with nothing cached loads the partly
/// outside chunk, fills the elements that left, and after growing back they read as fill.
#[test]
fn ec_10_shrink_grow_back_non_resident_2d() {
    let s = store();
    let (mut c, m) = setup(&s, XMock::new(&[6, 6], &[4, 4], 7), 1 << 20);
    let data: Vec<u8> = (10..46).collect();
    write(&mut c, &slab(&[0, 0], &[6, 6]), &data);
    c.flush_dataset(DS, true).unwrap();
    resize(&mut c, &m, &[5, 3]);
    resize(&mut c, &m, &[6, 6]);
    c.flush_dataset(DS, true).unwrap();
    let got = read(&mut c, &slab(&[0, 0], &[6, 6]), 36);
    for r in 0..6 {
        for col in 0..6 {
            let want = if r < 5 && col < 3 {
                data[r * 6 + col]
            } else {
                7
            };
            assert_eq!(got[r * 6 + col], want, "element ({r},{col})");
        }
    }
}

/// SCC-051: without a fill callback the cache fills the elements that left with the fill value
/// itself (no fill callback recorded); with `Capabilities::FILL` the layout's fill is called
/// with exactly the runs that left (chunk-local offsets 2..4 of chunk 1 for a shrink 10 -> 6).
#[test]
fn scc_051_fill_callback_or_own_fill() {
    for with_fill in [false, true] {
        let s = store();
        let mut mock = XMock::new(&[10], &[4], 9);
        if with_fill {
            mock = mock.caps(Capabilities::FILL);
        }
        let (mut c, m) = setup(&s, mock, 1 << 20);
        fill_1d(&mut c, &m, 10, false);
        resize(&mut c, &m, &[6]);
        let fills: Vec<Ev> = m
            .events()
            .into_iter()
            .filter(|e| matches!(e, Ev::Fill(..)))
            .collect();
        if with_fill {
            assert_eq!(fills, [Ev::Fill(vec![], vec![(2, 2)])]);
        } else {
            assert!(fills.is_empty());
        }
        resize(&mut c, &m, &[8]);
        assert_eq!(read(&mut c, &slab(&[0], &[8]), 8), [1, 2, 3, 4, 5, 6, 9, 9]);
    }
}

/// SCC-051, 2-D runs: shrinking a resident 4×4 chunk from 4×4 to 3×2 fills exactly the
/// elements that left: columns 2..4 of rows 0..3 and all of row 3.
#[test]
fn scc_051_fill_runs_2d() {
    let s = store();
    let (mut c, m) = setup(
        &s,
        XMock::new(&[4, 4], &[4, 4], 9).caps(Capabilities::FILL),
        1 << 20,
    );
    write(&mut c, &slab(&[0, 0], &[4, 4]), &[1; 16]);
    m.events();
    resize(&mut c, &m, &[3, 2]);
    assert_eq!(
        m.events(),
        [Ev::Fill(vec![], vec![(2, 2), (6, 2), (10, 6)])]
    );
}

/// SCC-055: a randomized read/write/flush/evict run with no resize and no erase never calls
/// delete_chunk (and reads always match a model of the dataset).
#[test]
fn scc_055_no_delete_without_resize() {
    let s = store();
    let m = XMock::new(&[24, 24], &[4, 4], 5).codec();
    let (mut c, m) = setup(&s, m, 5 * 16);
    let mut model = vec![5u8; 24 * 24];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut deletes = 0;
    for step in 0..400 {
        let (r0, c0) = (rnd(24), rnd(24));
        let (h, w) = (1 + rnd(24 - r0), 1 + rnd(24 - c0));
        let sel = slab(&[r0, c0], &[h, w]);
        match rnd(6) {
            0 | 1 => {
                let data: Vec<u8> = (0..h * w).map(|i| (i as u8) ^ (step as u8)).collect();
                write(&mut c, &sel, &data);
                for i in 0..h {
                    for j in 0..w {
                        model[((r0 + i) * 24 + c0 + j) as usize] = data[(i * w + j) as usize];
                    }
                }
            }
            2 | 3 => {
                let got = read(&mut c, &sel, (h * w) as usize);
                for i in 0..h {
                    for j in 0..w {
                        assert_eq!(
                            got[(i * w + j) as usize],
                            model[((r0 + i) * 24 + c0 + j) as usize]
                        );
                    }
                }
            }
            4 => c.flush().unwrap(),
            _ => c.flush_dataset(DS, true).unwrap(),
        }
        deletes += m.events().iter().filter(|e| is_delete(e)).count();
    }
    assert_eq!(deletes, 0);
    assert!(c.stats().evictions > 0, "the run evicted");
}

/// SCC-096: with a tiny limit (one chunk) that forces evictions, 3 non-resident partly outside
/// chunks are each looked up, decoded, filled and written exactly once; with room for all of
/// them one lookup batch covers the 3.
#[test]
fn scc_096_two_passes_each_chunk_once() {
    for tiny in [true, false] {
        let s = store();
        // With a codec, so that every load shows as a decode.
        let (mut c, m) = setup(&s, XMock::new(&[12, 8], &[4, 4], 9).codec(), 1 << 20);
        let data: Vec<u8> = (0..96).collect();
        write(&mut c, &slab(&[0, 0], &[12, 8]), &data);
        c.flush_dataset(DS, true).unwrap();
        if tiny {
            c.set_limit(16).unwrap();
        }
        m.events();
        resize(&mut c, &m, &[12, 6]);
        c.flush().unwrap();
        let ev = m.events();
        let targets = [vec![0u64, 1], vec![1, 1], vec![2, 1]];
        for t in &targets {
            let decodes = ev
                .iter()
                .filter(|e| matches!(e, Ev::Decode(c, false) if c == t))
                .count();
            let inserts = ev
                .iter()
                .filter(|e| matches!(e, Ev::Insert(v) if v.iter().any(|(c, _)| c == t)))
                .count();
            let looked = ev
                .iter()
                .filter(|e| matches!(e, Ev::Lookup(v, _) if v.contains(t)))
                .count();
            assert_eq!((decodes, inserts, looked), (1, 1, 1), "chunk {t:?}: {ev:?}");
        }
        let lookups: Vec<&Ev> = ev.iter().filter(|e| matches!(e, Ev::Lookup(..))).collect();
        if tiny {
            assert_eq!(lookups.len(), 3);
            assert!(
                c.stats().evictions_dirty >= 2,
                "evictions during processing"
            );
        } else {
            assert_eq!(lookups, [&Ev::Lookup(targets.to_vec(), 3)]);
        }
        // No chunk of column 0 was touched.
        assert!(
            !ev.iter()
                .any(|e| matches!(e, Ev::Decode(c, _) if c[1] == 0))
        );
        c.set_limit(1 << 20).unwrap();
        resize(&mut c, &m, &[12, 8]);
        let got = read(&mut c, &slab(&[0, 0], &[12, 8]), 96);
        for (i, &v) in got.iter().enumerate() {
            let want = if i % 8 >= 6 { 9 } else { data[i] };
            assert_eq!(v, want, "element {i}");
        }
    }
}

/// SCC-096 with erase-values: even with a direct-write planner, partly outside non-resident
/// chunks are loaded and erase_values is called with the runs that left (no planner call); an
/// erase that empties the chunk deletes it.
#[test]
fn scc_096_erase_values_goes_through_cache() {
    for empty in [false, true] {
        let s = store();
        let mut mock = XMock::new(&[10], &[4], 9)
            .codec()
            .caps(Capabilities::ERASE_VALUES | Capabilities::SELECTION_WRITE);
        mock.erase_empty = empty;
        let (mut c, m) = setup(&s, mock, 1 << 20);
        fill_1d(&mut c, &m, 10, true);
        let loc1 = m.location(&[1]).unwrap();
        resize(&mut c, &m, &[5]);
        let ev = m.events();
        assert!(!ev.iter().any(|e| matches!(e, Ev::PlanSel(..))), "{ev:?}");
        assert!(ev.contains(&Ev::Erase(vec![], vec![(1, 3)])), "{ev:?}");
        assert!(ev.contains(&Ev::Decode(vec![1], false)));
        if empty {
            assert!(ev.contains(&Ev::Delete(vec![1], Some(loc1))));
            assert!(c.entry_stats(DS, &[1]).is_none());
        } else {
            assert!(c.entry_stats(DS, &[1]).unwrap().dirty);
            assert!(
                !ev.iter()
                    .any(|e| matches!(e, Ev::Delete(c, _) if c == &[1]))
            );
        }
    }
}

/// SCC-097: an unfiltered layout with a selection-write planner (or a vector-write one) and no
/// erase-values: a shrink writes fill values straight to the file for the elements that left
/// (one vectored write, no decode) and deletes the chunk that left entirely; when the planner
/// says NotPossible the chunk goes through the cache instead.
#[test]
fn scc_097_direct_fill_write() {
    for caps in [Capabilities::SELECTION_WRITE, Capabilities::VECTOR_WRITE] {
        let s = store();
        let (mut c, m) = setup(&s, XMock::new(&[10], &[4], 9).caps(caps), 1 << 20);
        fill_1d(&mut c, &m, 10, true);
        let loc1 = m.location(&[1]).unwrap();
        let loc2 = m.location(&[2]).unwrap();
        s.record_ops(true);
        s.clear_ops();
        resize(&mut c, &m, &[5]);
        let plan = if caps == Capabilities::SELECTION_WRITE {
            Ev::PlanSel(vec![1], vec![(1, 3)], false)
        } else {
            Ev::PlanVec(vec![1], vec![(1, 3)], false)
        };
        assert_eq!(
            m.events(),
            [
                Ev::Lookup(vec![vec![2]], 1),
                Ev::Delete(vec![2], Some(loc2)),
                Ev::Lookup(vec![vec![1]], 1),
                plan,
            ]
        );
        assert_eq!(
            s.ops(),
            [h5_io::OpRecord::new(IoOp::WriteVectored, loc1.addr + 1, 3)]
        );
        assert_eq!(s.read_vec(loc1.addr, 4).unwrap(), [5, 9, 9, 9]);
        assert_eq!(c.stats().entries, 0, "nothing loaded into the cache");
        resize(&mut c, &m, &[10]);
        assert_eq!(
            read(&mut c, &slab(&[0], &[10]), 10),
            [1, 2, 3, 4, 5, 9, 9, 9, 9, 9]
        );
    }
    // NotPossible: falls back to load, fill and dirty.
    let s = store();
    let mut mock = XMock::new(&[10], &[4], 9)
        .codec()
        .caps(Capabilities::SELECTION_WRITE);
    mock.sel_mode = SelMode::NotPossible;
    let (mut c, m) = setup(&s, mock, 1 << 20);
    fill_1d(&mut c, &m, 10, true);
    resize(&mut c, &m, &[5]);
    let ev = m.events();
    assert!(ev.contains(&Ev::PlanSel(vec![1], vec![(1, 3)], false)));
    assert!(ev.contains(&Ev::Decode(vec![1], false)));
    assert!(c.entry_stats(DS, &[1]).unwrap().dirty);
    resize(&mut c, &m, &[10]);
    assert_eq!(
        read(&mut c, &slab(&[0], &[10]), 10),
        [1, 2, 3, 4, 5, 9, 9, 9, 9, 9]
    );
}

/// SCC-098 / SCC-038 / EC-11: with edge chunks encoded differently, growing 6 -> 8 (chunk 4)
/// makes the old edge chunk 1 interior: it is read, decoded with the flag it was written with
/// (true), encoded with false and reinserted before the call returns; chunk 0 (interior before
/// and after) is left alone. A fresh cache then decodes it with false.
#[test]
fn scc_098_scc_038_ec_11_edge_to_interior_non_resident() {
    let s = store();
    let (mut c, m) = setup(&s, XMock::new(&[6], &[4], 9).codec().edge(), 1 << 20);
    // Two writes, so that edge chunk 1 is created filled (a write covering its inside part
    // would create it without fill, leaving elements 6 and 7 unspecified).
    write(&mut c, &slab(&[0], &[5]), &[1, 2, 3, 4, 5]);
    write(&mut c, &slab(&[5], &[1]), &[6]);
    c.flush_dataset(DS, true).unwrap();
    let ev = m.events();
    assert!(ev.contains(&Ev::Encode(vec![0], false)));
    assert!(ev.contains(&Ev::Encode(vec![1], true)));
    resize(&mut c, &m, &[8]);
    assert_eq!(
        m.events(),
        [
            Ev::Lookup(vec![vec![1]], 1),
            Ev::Decode(vec![1], true),
            Ev::Encode(vec![1], false),
            Ev::Insert(vec![(vec![1], None)]),
        ]
    );
    assert!(!c.entry_stats(DS, &[1]).unwrap().partial_bound_on_disk);
    c.flush_dataset(DS, true).unwrap();
    assert_eq!(read(&mut c, &slab(&[0], &[8]), 8), [1, 2, 3, 4, 5, 6, 9, 9]);
    assert!(m.events().contains(&Ev::Decode(vec![1], false)));
}

/// SCC-098 / EC-11, resident and shrinking: a clean resident edge chunk becoming interior is
/// re-encoded from memory (no read); shrinking 8 -> 6 makes interior chunk 1 an edge chunk: it
/// is loaded with its old flag (false), filled and re-encoded with true.
#[test]
fn scc_098_ec_11_resident_and_interior_to_edge() {
    let s = store();
    let (mut c, m) = setup(&s, XMock::new(&[6], &[4], 9).codec().edge(), 1 << 20);
    // Two writes, so that edge chunk 1 is created filled (a write covering its inside part
    // would create it without fill, leaving elements 6 and 7 unspecified).
    write(&mut c, &slab(&[0], &[5]), &[1, 2, 3, 4, 5]);
    write(&mut c, &slab(&[5], &[1]), &[6]);
    c.flush().unwrap();
    assert!(c.entry_stats(DS, &[1]).unwrap().partial_bound_on_disk);
    m.events();
    let r0 = reads(&s);
    resize(&mut c, &m, &[8]);
    let ev = m.events();
    assert!(
        matches!(ev.as_slice(), [Ev::Encode(c1, false), Ev::Insert(v)]
            if c1 == &[1] && v.len() == 1 && v[0].0 == [1]),
        "{ev:?}"
    );
    assert_eq!(reads(&s), r0);
    assert!(!c.entry_stats(DS, &[1]).unwrap().dirty);
    write(&mut c, &slab(&[6], &[2]), &[7, 8]);
    c.flush_dataset(DS, true).unwrap();
    m.events();
    resize(&mut c, &m, &[6]);
    assert_eq!(
        m.events(),
        [
            Ev::Lookup(vec![vec![1]], 1),
            Ev::Decode(vec![1], false),
            Ev::Encode(vec![1], true),
            Ev::Insert(vec![(vec![1], None)]),
        ]
    );
    c.flush_dataset(DS, true).unwrap();
    resize(&mut c, &m, &[8]);
    c.flush_dataset(DS, true).unwrap();
    assert_eq!(read(&mut c, &slab(&[0], &[8]), 8), [1, 2, 3, 4, 5, 6, 9, 9]);
}

/// EC-11 without different edge encoding: the same growth makes no callback at all.
#[test]
fn ec_11_no_edge_encoding_no_callbacks() {
    let s = store();
    let (mut c, m) = setup(&s, XMock::new(&[6], &[4], 9).codec(), 1 << 20);
    write(&mut c, &slab(&[0], &[6]), &[1, 2, 3, 4, 5, 6]);
    c.flush_dataset(DS, true).unwrap();
    m.events();
    resize(&mut c, &m, &[8]);
    assert!(m.events().is_empty());
}

/// SCC-099: growing by 3 chunks with early allocation gives one lookup of the 3, 1 new-chunk
/// call, 1 encode-in-place, one insert batch of 3 and 3 writes (one vectored call) of identical
/// bytes.
#[test]
fn scc_099_early_allocation_shared_image() {
    let s = store();
    let mut mock = XMock::new(&[4], &[4], 9).codec();
    mock.early = true;
    let (mut c, m) = setup(&s, mock, 1 << 20);
    s.record_ops(true);
    resize(&mut c, &m, &[16]);
    assert_eq!(
        m.events(),
        [
            Ev::Lookup(vec![vec![1], vec![2], vec![3]], 0),
            Ev::NewChunk(vec![1], true),
            Ev::EncodeInPlace(vec![1], false),
            Ev::Insert(vec![(vec![1], None), (vec![2], None), (vec![3], None)]),
        ]
    );
    let ops = s.ops();
    assert_eq!(s.snapshot().write_vectors, 1);
    assert_eq!(ops.len(), 3);
    let images: Vec<Vec<u8>> = (1..=3u64)
        .map(|i| {
            let loc = m.location(&[i]).unwrap();
            assert!(ops.contains(&h5_io::OpRecord::new(
                IoOp::WriteVectored,
                loc.addr,
                loc.size
            )));
            s.read_vec(loc.addr, loc.size as usize).unwrap()
        })
        .collect();
    assert_eq!(images[0], toy_encode(&[9; 4], false));
    assert!(images.iter().all(|i| *i == images[0]));
    assert_eq!(read(&mut c, &slab(&[4], &[12]), 12), [9; 12]);
}

/// SCC-100: with a fill value referring to data outside the chunk, growing by 2 chunks with
/// early allocation makes 2 new chunks and 2 encodes, and the two inserted chunks carry
/// different heap objects.
#[test]
fn scc_100_early_allocation_fresh_fill_per_chunk() {
    let s = store();
    let mut mock = XMock::new(&[2, 4], &[2, 4], 9);
    mock.early = true;
    mock.fill_outside = true;
    let (mut c, m) = setup(&s, mock, 1 << 20);
    resize(&mut c, &m, &[6, 4]);
    let ev = m.events();
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, Ev::NewChunk(_, true)))
            .count(),
        2
    );
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, Ev::EncodeInPlace(..)))
            .count(),
        2
    );
    let inserts: Vec<&Ev> = ev.iter().filter(|e| matches!(e, Ev::Insert(_))).collect();
    let [Ev::Insert(reqs)] = inserts.as_slice() else {
        panic!("one insert batch expected: {ev:?}");
    };
    assert_eq!(reqs.len(), 2);
    assert_eq!((&reqs[0].0, &reqs[1].0), (&vec![1, 0], &vec![2, 0]));
    let (h1, h2) = (reqs[0].1.unwrap(), reqs[1].1.unwrap());
    assert_ne!(h1, h2);
    assert_eq!(s.snapshot().write_segments, 2);
}

/// EC-08: a dimension of size 0: no chunks exist, an empty read succeeds, growing from 0
/// makes no callback, and the dataset then works normally; shrinking a dimension back to 0
/// deletes the chunks.
#[test]
fn ec_08_zero_size_dimension() {
    let s = store();
    let (mut c, m) = setup(&s, XMock::new(&[0, 8], &[4, 4], 3), 1 << 20);
    assert!(read(&mut c, &Selection::All, 0).is_empty());
    resize(&mut c, &m, &[4, 8]);
    assert!(m.events().is_empty());
    write(&mut c, &slab(&[0, 0], &[4, 8]), &[1; 32]);
    c.flush_dataset(DS, true).unwrap();
    assert_eq!(read(&mut c, &slab(&[0, 0], &[4, 8]), 32), [1; 32]);
    c.flush_dataset(DS, true).unwrap();
    m.events();
    resize(&mut c, &m, &[4, 0]);
    let ev = m.events();
    assert_eq!(ev.iter().filter(|e| is_delete(e)).count(), 2, "{ev:?}");
    assert!(m.index.lock().unwrap().is_empty());
}

/// EC-09: shrinking to 0 deletes every chunk on disk, resident (dirty included) or not, writes
/// nothing and leaves no entry.
#[test]
fn ec_09_shrink_to_zero() {
    let s = store();
    let (mut c, m) = setup(&s, XMock::new(&[16], &[4], 9), 1 << 20);
    fill_1d(&mut c, &m, 16, true);
    read(&mut c, &slab(&[0], &[4]), 4); // chunk 0 resident, clean
    write(&mut c, &slab(&[4], &[2]), &[0, 0]); // chunk 1 resident, dirty
    m.events();
    let w0 = writes(&s);
    resize(&mut c, &m, &[0]);
    let mut deleted: Vec<Vec<u64>> = m
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Ev::Delete(c, Some(_)) => Some(c),
            _ => None,
        })
        .collect();
    deleted.sort();
    assert_eq!(deleted, [vec![0], vec![1], vec![2], vec![3]]);
    assert_eq!(writes(&s), w0);
    assert_eq!(c.dataset_entries(DS), 0);
    assert!(m.index.lock().unwrap().is_empty());
}

/// EC-12: a dataset with nothing cached and nothing on disk: growing makes no callback;
/// shrinking only asks the layout (batched lookups, all not found) and calls nothing else;
/// with early allocation, growing makes only the early-allocation callbacks.
#[test]
fn ec_12_nothing_cached_nothing_on_disk() {
    let s = store();
    let (mut c, m) = setup(&s, XMock::new(&[8, 8], &[4, 4], 0), 1 << 20);
    resize(&mut c, &m, &[16, 16]);
    assert!(m.events().is_empty());
    resize(&mut c, &m, &[6, 6]);
    let ev = m.events();
    assert!(!ev.is_empty());
    assert!(ev.iter().all(|e| matches!(e, Ev::Lookup(_, 0))), "{ev:?}");
    assert_eq!(writes(&s) + reads(&s), 0);

    let mut mock = XMock::new(&[4], &[4], 0);
    mock.early = true;
    let (mut c, m) = setup(&s, mock, 1 << 20);
    resize(&mut c, &m, &[8]);
    let ev = m.events();
    assert_eq!(
        ev,
        [
            Ev::Lookup(vec![vec![1]], 0),
            Ev::NewChunk(vec![1], true),
            Ev::EncodeInPlace(vec![1], false),
            Ev::Insert(vec![(vec![1], None)]),
        ]
    );
}
