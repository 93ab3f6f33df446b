//! Defined elements, erase and sparse chunks (spec §2.12, §2.16, the sparse parts of §2.5): the
//! reference `SparseChunk` form and its image format, and the cache's `get_defined` and `erase`
//! flows against a recording sparse mock layout.

use crate::common;
use crate::sparse_mock;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::MockLayout;
use h5_chunkcache::selection::{CopyRun, Hyperslab, Points, Selection, SelectionError};
use h5_chunkcache::sparse::{self, SparseChunk, SparseError};
use h5_chunkcache::{
    Capabilities, ChunkCache, ChunkCacheConfig, ChunkCacheError, Conversion, DatasetId,
    LayoutError, MemUsage, ReadRequest, WriteRequest,
};
use h5_io::{MemoryStorage, Metrics, Storage};
use sparse_mock::{SEvent, SparseMock};

type Store = Arc<Metrics<MemoryStorage>>;

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

fn slab(start: &[u64], shape: &[u64]) -> Selection {
    Selection::Hyperslab(Hyperslab::contiguous(start, shape).unwrap())
}

fn pts(p: &[u64]) -> Selection {
    Selection::Points(Points::new(1, p.to_vec()).unwrap())
}

fn read(c: &mut ChunkCache, ds: u64, sel: &Selection, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    c.read(&mut [ReadRequest::new(DatasetId(ds), sel, &mut buf)])
        .unwrap();
    buf
}

fn write(c: &mut ChunkCache, ds: u64, sel: &Selection, data: &[u8]) {
    c.write(&[WriteRequest::new(DatasetId(ds), sel, data)])
        .unwrap();
}

/// The flat coordinates of a `get_defined` answer (which must be a point list).
fn defined(c: &mut ChunkCache, ds: u64, sel: &Selection) -> Vec<u64> {
    match c.get_defined(DatasetId(ds), sel).unwrap() {
        Selection::Points(p) => p.as_flat().to_vec(),
        other => panic!("expected points, got {other:?}"),
    }
}

/// A sparse 1-D dataset (1-byte elements, fill 0xFF) with `elems` written (value = offset + 100),
/// flushed, in a cache that is then destroyed; returns the mock with its events cleared.
fn on_disk(s: &Store, extent: u64, chunk: u64, elems: &[u64]) -> Arc<SparseMock> {
    let m = Arc::new(SparseMock::new(&[extent], &[chunk], 1, &[0xFF]));
    let mut c = cache(s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    let vals: Vec<u8> = elems.iter().map(|&e| e as u8 + 100).collect();
    write(&mut c, 1, &pts(elems), &vals);
    c.flush().unwrap();
    c.destroy();
    m.take_events();
    m
}

fn fresh(s: &Store, m: &Arc<SparseMock>, limit: usize) -> ChunkCache {
    let mut c = cache(s, limit);
    c.register(DatasetId(1), m.clone()).unwrap();
    c
}

fn count(ev: &[SEvent], f: impl Fn(&SEvent) -> bool) -> usize {
    ev.iter().filter(|e| f(e)).count()
}

// -------------------------------------------------------------------------------------------
// SparseChunk unit tests.
// -------------------------------------------------------------------------------------------

fn run(chunk_offset: u64, buf_offset: u64, len: u64) -> CopyRun {
    CopyRun {
        chunk_offset,
        buf_offset,
        len,
    }
}

/// A chunk of 16 two-byte elements with elements `defs` defined, value = [offset, offset].
fn chunk_with(defs: &[u64]) -> SparseChunk {
    let vals: Vec<u8> = defs.iter().flat_map(|&d| [d as u8, d as u8]).collect();
    SparseChunk::from_parts(2, 16, defs.to_vec(), Some(vals)).unwrap()
}

/// Gather merges new elements into the sorted set, overwrites existing ones (the last of a
/// duplicate wins) and scatter reads undefined elements as the fill value.
#[test]
fn sparse_gather_merges_and_scatter_fills() {
    let mut c = chunk_with(&[3, 7]);
    let buf = [1, 1, 2, 2, 9, 9, 4, 4];
    // chunk 5 <- buf 0, chunk 7 <- buf 1, chunk 0 <- buf 2, chunk 5 <- buf 3 (duplicate wins).
    let u = c
        .gather(
            &[run(5, 0, 1), run(7, 1, 1), run(0, 2, 1), run(5, 3, 1)],
            &buf,
            None,
        )
        .unwrap();
    assert_eq!(c.defined(), [0, 3, 5, 7]);
    assert_eq!(c.values().unwrap(), [9, 9, 3, 3, 4, 4, 2, 2]);
    assert_eq!(u, c.mem_usage());
    assert_eq!(u.used, 4 * 8 + 4 * 2);
    let mut out = vec![0u8; 12];
    c.scatter(&[run(2, 0, 6)], &mut out, &[0xEE, 0xEE], None)
        .unwrap();
    assert_eq!(out, [0xEE, 0xEE, 3, 3, 0xEE, 0xEE, 4, 4, 0xEE, 0xEE, 2, 2]);
    // Out-of-range runs are errors and change nothing.
    let before = c.clone();
    assert!(matches!(
        c.gather(&[run(15, 0, 2)], &buf, None),
        Err(SparseError::RunOutOfRange { what: "chunk", .. })
    ));
    assert!(matches!(
        c.gather(&[run(0, 3, 2)], &buf, None),
        Err(SparseError::RunOutOfRange { what: "buffer", .. })
    ));
    assert_eq!(c, before);
    // A defined-only chunk has no values to scatter or gather into.
    c.drop_values();
    assert!(matches!(
        c.scatter(&[run(0, 0, 1)], &mut out, &[0, 0], None),
        Err(SparseError::NoValues)
    ));
    assert!(matches!(
        c.gather(&[run(0, 0, 1)], &buf, None),
        Err(SparseError::NoValues)
    ));
}

#[derive(Debug)]
struct Widen; // u8 -> u16 LE

impl Conversion for Widen {
    fn src_size(&self) -> usize {
        1
    }
    fn dst_size(&self) -> usize {
        2
    }
    fn convert(&self, src: &[u8], dst: &mut [u8], n: usize) -> Result<(), LayoutError> {
        for i in 0..n {
            dst[2 * i..2 * i + 2].copy_from_slice(&u16::from(src[i]).to_le_bytes());
        }
        Ok(())
    }
}

#[derive(Debug)]
struct Narrow; // u16 LE -> u8 (low byte)

impl Conversion for Narrow {
    fn src_size(&self) -> usize {
        2
    }
    fn dst_size(&self) -> usize {
        1
    }
    fn convert(&self, src: &[u8], dst: &mut [u8], n: usize) -> Result<(), LayoutError> {
        for i in 0..n {
            dst[i] = src[2 * i];
        }
        Ok(())
    }
}

/// Gather and scatter convert element by element; the fill value is converted too, and a
/// conversion whose chunk-side size is wrong is refused.
#[test]
fn sparse_conversion_on_gather_and_scatter() {
    let mut c = SparseChunk::new(2, 8).unwrap();
    c.gather(&[run(1, 0, 2)], &[5, 6], Some(&Widen)).unwrap();
    assert_eq!(c.values().unwrap(), [5, 0, 6, 0]);
    let mut out = [0u8; 3];
    c.scatter(&[run(0, 0, 3)], &mut out, &[7, 0], Some(&Narrow))
        .unwrap();
    assert_eq!(out, [7, 5, 6]);
    assert!(matches!(
        c.gather(&[run(0, 0, 1)], &[1, 2], Some(&Narrow)),
        Err(SparseError::ConversionSize {
            expected: 2,
            got: 1
        })
    ));
}

/// The defined subset of runs keeps the runs' order and splits them at undefined elements,
/// moving buffer offsets along.
#[test]
fn sparse_defined_runs_split_in_order() {
    let c = chunk_with(&[1, 2, 5, 9, 10, 11]);
    let got = c
        .defined_runs(&[run(8, 0, 4), run(0, 4, 7), run(3, 11, 2)])
        .unwrap();
    assert_eq!(
        got,
        [
            run(9, 1, 3), // 9..12 of the first run
            run(1, 5, 2), // 1, 2
            run(5, 9, 1), // 5
        ]
    );
    assert!(matches!(
        c.defined_runs(&[run(10, 0, 7)]),
        Err(SparseError::RunOutOfRange { .. })
    ));
}

/// SCC-119: a chunk with defined values at 1..8, after erasing 2, 5 and 6, holds the values of
/// 1, 3, 4, 7, 8 in that order with 5 × element size value bytes; used shrinks by the erased
/// count × (element + offset) and nothing is reallocated.
#[test]
fn scc_119_erase_compacts_values_in_order() {
    let mut c = chunk_with(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let before = c.mem_usage();
    let out = c.erase(&[run(2, 0, 1), run(5, 0, 2)]).unwrap();
    assert_eq!((out.erased, out.changed, out.empty), (3, true, false));
    assert_eq!(c.defined(), [1, 3, 4, 7, 8]);
    assert_eq!(c.values().unwrap(), [1, 1, 3, 3, 4, 4, 7, 7, 8, 8]);
    assert_eq!(c.values().unwrap().len(), 5 * c.elem_size());
    let after = c.mem_usage();
    assert_eq!(before.used - after.used, 3 * (2 + 8));
    assert_eq!(after.allocated, before.allocated);
    // Erasing undefined elements changes nothing.
    let again = c.erase(&[run(2, 0, 1), run(0, 0, 1)]).unwrap();
    assert_eq!(
        (again.erased, again.changed, again.empty),
        (0, false, false)
    );
    // Erasing the rest empties the chunk; condense then frees everything.
    let all = c.erase(&[run(0, 0, 16)]).unwrap();
    assert_eq!((all.erased, all.changed, all.empty), (5, true, true));
    assert_eq!(c.condense(), MemUsage::default());
}

/// Encode/decode round trip; the defined-only decode reads only the defined section; the
/// defined-section length comes from the header alone.
#[test]
fn sparse_image_round_trip() {
    let c = chunk_with(&[0, 4, 15]);
    let img = sparse::encode(&c);
    let def_len = sparse::defined_section_len(&img).unwrap();
    assert_eq!(def_len, sparse::HEADER_LEN + 3 * 8 + 4);
    assert_eq!(img.len(), def_len + 3 * 2);
    assert_eq!(
        sparse::defined_section_len(&img[..sparse::HEADER_LEN]).unwrap(),
        def_len
    );
    assert_eq!(sparse::decode(&img).unwrap(), c);
    let d = sparse::decode_defined(&img[..def_len]).unwrap();
    assert_eq!(d.defined(), [0, 4, 15]);
    assert!(!d.has_values());
    // The empty chunk.
    let e = SparseChunk::new(4, 10).unwrap();
    assert!(e.is_empty());
    assert_eq!(sparse::decode(&sparse::encode(&e)).unwrap(), e);
    // Trailing bytes and missing values are errors.
    let mut long = img.clone();
    long.push(0);
    assert!(matches!(
        sparse::decode(&long),
        Err(SparseError::TrailingBytes(1))
    ));
    assert!(matches!(
        sparse::decode(&img[..img.len() - 1]),
        Err(SparseError::ValuesLength {
            expected: 6,
            got: 5
        })
    ));
}

/// SCC-118: a corrupted byte anywhere in the defined section makes decode and decode_defined
/// fail with a checksum error (or a header error for the magic); every truncation and every
/// single-byte corruption of the image gives an error or a valid chunk, never a panic.
#[test]
fn scc_118_defined_section_checksum() {
    let c = chunk_with(&[1, 2, 3, 9]);
    let img = sparse::encode(&c);
    let def_len = sparse::defined_section_len(&img).unwrap();
    // An offset byte: the checksum catches it before the (now out-of-range) offset is used.
    let mut bad = img.clone();
    bad[sparse::HEADER_LEN + 8 + 7] = 0xFF;
    assert!(matches!(
        sparse::decode(&bad),
        Err(SparseError::Checksum { .. })
    ));
    assert!(matches!(
        sparse::decode_defined(&bad[..def_len]),
        Err(SparseError::Checksum { .. })
    ));
    // The stored checksum itself.
    let mut bad = img.clone();
    bad[def_len - 1] ^= 1;
    assert!(matches!(
        sparse::decode(&bad),
        Err(SparseError::Checksum { .. })
    ));
    // A huge count is rejected without allocating or reading out of bounds.
    let mut bad = img.clone();
    bad[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(sparse::decode(&bad).is_err());
    for cut in 0..img.len() {
        assert!(sparse::decode(&img[..cut]).is_err(), "cut at {cut}");
    }
    for i in 0..def_len {
        for flip in [0x01u8, 0x80, 0xFF] {
            let mut bad = img.clone();
            bad[i] ^= flip;
            assert!(sparse::decode(&bad).is_err(), "byte {i} flip {flip:#x}");
        }
    }
}

/// SCC-117: the vlen-of-vlen value [[1,2],[3]] encodes to exactly the hand-built bytes (field
/// (0, 36); variable section: count 2, then count 2 with 1 and 2, then count 1 with 3) and
/// decodes back; plain vlens use (offset, length) fields too; malformed input is an error.
#[test]
fn scc_117_vlen_encoding() {
    let value = vec![vec![vec![1u32, 2], vec![3]]];
    let (fixed, var) = sparse::encode_vlen_of_vlen(&value);
    let mut want_fixed = Vec::new();
    want_fixed.extend_from_slice(&0u64.to_le_bytes());
    want_fixed.extend_from_slice(&36u64.to_le_bytes());
    let mut want_var = Vec::new();
    want_var.extend_from_slice(&2u64.to_le_bytes());
    want_var.extend_from_slice(&2u64.to_le_bytes());
    want_var.extend_from_slice(&1u32.to_le_bytes());
    want_var.extend_from_slice(&2u32.to_le_bytes());
    want_var.extend_from_slice(&1u64.to_le_bytes());
    want_var.extend_from_slice(&3u32.to_le_bytes());
    assert_eq!(fixed, want_fixed);
    assert_eq!(var, want_var);
    assert_eq!(sparse::decode_vlen_of_vlen(&fixed, &var).unwrap(), value);

    // Two elements: the second field points after the first.
    let two = vec![vec![vec![7u32]], vec![]];
    let (f2, v2) = sparse::encode_vlen_of_vlen(&two);
    assert_eq!(&f2[16..24], &20u64.to_le_bytes());
    assert_eq!(&f2[24..32], &8u64.to_le_bytes());
    assert_eq!(sparse::decode_vlen_of_vlen(&f2, &v2).unwrap(), two);

    let flat = vec![vec![1u32, 2], vec![3]];
    let (ff, fv) = sparse::encode_vlen(&flat);
    assert_eq!(&ff[16..24], &8u64.to_le_bytes());
    assert_eq!(&ff[24..32], &4u64.to_le_bytes());
    assert_eq!(sparse::decode_vlen(&ff, &fv).unwrap(), flat);

    // A field past the variable section, an inflated count, a short variable section.
    let mut bad = fixed.clone();
    bad[8..16].copy_from_slice(&37u64.to_le_bytes());
    assert!(matches!(
        sparse::decode_vlen_of_vlen(&bad, &var),
        Err(SparseError::Truncated { .. })
    ));
    let mut bad = var.clone();
    bad[0..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(sparse::decode_vlen_of_vlen(&fixed, &bad).is_err());
    let mut bad = var.clone();
    bad[8..16].copy_from_slice(&1000u64.to_le_bytes());
    assert!(sparse::decode_vlen_of_vlen(&fixed, &bad).is_err());
    assert!(sparse::decode_vlen_of_vlen(&fixed, &var[..30]).is_err());
}

/// Fill marks elements defined with the fill value; drop_values keeps the defined set; condense
/// makes allocated equal used.
#[test]
fn sparse_fill_drop_condense() {
    let mut c = chunk_with(&[2]);
    c.fill(&[run(0, 0, 3)], &[0xAB, 0xCD]).unwrap();
    assert_eq!(c.defined(), [0, 1, 2]);
    assert_eq!(c.values().unwrap(), [0xAB, 0xCD, 0xAB, 0xCD, 0xAB, 0xCD]);
    c.reserve(100);
    let u = c.mem_usage();
    assert!(u.allocated >= u.used + 100 * 10);
    let u = c.condense();
    assert_eq!(u.allocated, u.used);
    let u = c.drop_values();
    assert_eq!(
        u,
        MemUsage {
            used: 24,
            allocated: 24
        }
    );
    assert_eq!(c.defined(), [0, 1, 2]);
}

// -------------------------------------------------------------------------------------------
// Cache flows.
// -------------------------------------------------------------------------------------------

/// SCC-009: get_defined on an uncached sparse chunk reads exactly its defined-section bytes and
/// leaves a values-absent entry; a later read reads the whole image, calls decode and returns
/// the right data (EC-34).
#[test]
fn scc_009_defined_only_entry_then_full_load() {
    let s = store();
    let m = on_disk(&s, 8, 8, &[1, 5]);
    let st = m.stored(&[0]).unwrap();
    assert_eq!(st.def_len, (sparse::HEADER_LEN + 2 * 8 + 4) as u64);
    let mut c = fresh(&s, &m, 1 << 20);
    let before = s.snapshot();
    assert_eq!(defined(&mut c, 1, &Selection::All), [1, 5]);
    assert_eq!(s.snapshot().since(&before).bytes_read, st.def_len);
    assert_eq!(
        m.take_events(),
        [
            SEvent::Lookup(vec![vec![0]], 1),
            SEvent::DecodeDefined(vec![0], st.def_len as usize),
            SEvent::DefinedValues(vec![0]),
        ]
    );
    let e = c.entry_stats(DatasetId(1), &[0]).unwrap();
    assert!(!e.has_values && !e.dirty);

    let before = s.snapshot();
    assert_eq!(
        read(&mut c, 1, &Selection::All, 8),
        [0xFF, 101, 0xFF, 0xFF, 0xFF, 105, 0xFF, 0xFF]
    );
    assert_eq!(s.snapshot().since(&before).bytes_read, st.loc.size);
    let ev = m.take_events();
    assert_eq!(
        count(&ev, |e| *e == SEvent::Decode(vec![0], st.loc.size as usize)),
        1
    );
    assert!(c.entry_stats(DatasetId(1), &[0]).unwrap().has_values);
    assert_eq!(c.stats().entries, 1);
}

/// EC-34: reading part of a chunk resident only as its defined set counts a miss, upgrades it
/// with a full decode and returns the stored values, not fill.
#[test]
fn ec_34_read_upgrades_defined_only_entry() {
    let s = store();
    let m = on_disk(&s, 8, 4, &[1, 2, 6]);
    let mut c = fresh(&s, &m, 1 << 20);
    assert_eq!(defined(&mut c, 1, &Selection::All), [1, 2, 6]);
    m.take_events();
    let misses = c.stats().misses;
    assert_eq!(read(&mut c, 1, &slab(&[1], &[2]), 2), [101, 102]);
    assert_eq!(c.stats().misses, misses + 1);
    let ev = m.take_events();
    assert_eq!(
        count(&ev, |e| matches!(e, SEvent::Decode(c, _) if c == &[0])),
        1
    );
    assert!(c.entry_stats(DatasetId(1), &[0]).unwrap().has_values);
    // The other chunk stays defined-only.
    assert!(!c.entry_stats(DatasetId(1), &[1]).unwrap().has_values);
}

/// SCC-025: with elements 1, 5, 9 defined, the points [9, 2, 5, 1] give [9, 5, 1] in that
/// order, and the input selection is unchanged.
#[test]
fn scc_025_get_defined_keeps_point_order() {
    let s = store();
    let m = Arc::new(SparseMock::new(&[16], &[4], 1, &[0]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &pts(&[1, 5, 9]), &[1, 5, 9]);
    let sel = pts(&[9, 2, 5, 1]);
    let copy = sel.clone();
    assert_eq!(defined(&mut c, 1, &sel), [9, 5, 1]);
    assert_eq!(sel, copy);
}

/// EC-17: duplicates and unsorted points are kept exactly (duplicates of defined elements kept,
/// never re-sorted).
#[test]
fn ec_17_get_defined_duplicates_and_order() {
    let s = store();
    let m = Arc::new(SparseMock::new(&[16], &[4], 1, &[0]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &pts(&[1, 5, 9]), &[1, 5, 9]);
    assert_eq!(
        defined(&mut c, 1, &pts(&[5, 5, 2, 9, 1, 5, 3])),
        [5, 5, 9, 1, 5]
    );
    // 2-D: points keep their order and coordinates.
    let m2 = Arc::new(SparseMock::new(&[4, 4], &[2, 2], 1, &[0]));
    c.register(DatasetId(2), m2.clone()).unwrap();
    let p = Selection::Points(Points::new(2, vec![3, 3, 0, 1, 2, 0]).unwrap());
    write(&mut c, 2, &p, &[1, 2, 3]);
    let q = Selection::Points(Points::new(2, vec![2, 0, 1, 1, 3, 3, 2, 0]).unwrap());
    match c.get_defined(DatasetId(2), &q).unwrap() {
        Selection::Points(r) => assert_eq!(r.as_flat(), [2, 0, 3, 3, 2, 0]),
        other => panic!("{other:?}"),
    }
}

/// SCC-102: get_defined over 4 on-disk sparse chunks reads the 4 defined sections (their summed
/// lengths, in one vectored read), calls only decode_defined, and points spanning the chunks in
/// interleaved order come back in the caller's order.
#[test]
fn scc_102_get_defined_loads_defined_sections_only() {
    let s = store();
    let m = on_disk(&s, 16, 4, &[1, 2, 5, 9, 13, 14]);
    let want: u64 = (0..4).map(|i| m.stored(&[i]).unwrap().def_len).sum();
    assert_eq!(want, 44 + 36 + 36 + 44);
    let mut c = fresh(&s, &m, 1 << 20);
    let before = s.snapshot();
    assert_eq!(
        defined(&mut c, 1, &pts(&[13, 1, 9, 6, 5, 2, 14, 0])),
        [13, 1, 9, 5, 2, 14]
    );
    let d = s.snapshot().since(&before);
    assert_eq!((d.bytes_read, d.read_vectors, d.reads), (want, 1, 0));
    let ev = m.take_events();
    assert_eq!(count(&ev, |e| matches!(e, SEvent::DecodeDefined(..))), 4);
    assert_eq!(count(&ev, |e| matches!(e, SEvent::Decode(..))), 0);
    assert_eq!(count(&ev, |e| matches!(e, SEvent::Lookup(..))), 1);
    // Asked again, resident entries answer with no I/O at all.
    let before = s.snapshot();
    assert_eq!(defined(&mut c, 1, &slab(&[4], &[12])), [5, 9, 13, 14]);
    assert_eq!(s.snapshot().since(&before).bytes_read, 0);
    // A missing chunk of a tracking layout contributes nothing.
    let m2 = Arc::new(SparseMock::new(&[8], &[4], 1, &[0]));
    c.register(DatasetId(2), m2.clone()).unwrap();
    assert_eq!(defined(&mut c, 2, &Selection::All), Vec::<u64>::new());
    assert_eq!(m2.live_udata(), 0);
    assert_eq!(c.dataset_entries(DatasetId(2)), 0);
}

/// SCC-026: get_defined reflects unflushed writes and erases.
#[test]
fn scc_026_get_defined_sees_unflushed_state() {
    let s = store();
    let m = on_disk(&s, 16, 4, &[5, 9]);
    let mut c = fresh(&s, &m, 1 << 20);
    let before = s.snapshot();
    write(&mut c, 1, &pts(&[7]), &[77]);
    assert_eq!(defined(&mut c, 1, &Selection::All), [5, 7, 9]);
    c.erase(DatasetId(1), &pts(&[5])).unwrap();
    assert_eq!(defined(&mut c, 1, &Selection::All), [7, 9]);
    assert_eq!(s.snapshot().since(&before).bytes_written, 0);
    // 5 and 7 share chunk 1, the only dirty one; chunk 2 (element 9) is a clean defined-only
    // entry.
    assert_eq!(c.stats().dirty_entries, 1);
    assert!(c.entry_stats(DatasetId(1), &[1]).unwrap().dirty);
    assert!(!c.entry_stats(DatasetId(1), &[2]).unwrap().has_values);
}

/// SCC-027: erase on a layout that does not track defined elements fails with
/// `DefinedNotSupported` and leaves file and cache unchanged; on a sparse dataset the erased
/// elements leave get_defined and read back as the fill value.
#[test]
fn scc_027_erase() {
    let s = store();
    let d = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[0]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), d.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1, 2, 3, 4, 5, 6, 7, 8]);
    c.flush().unwrap();
    d.take_events();
    let (before, stats) = (s.snapshot(), c.stats());
    let file = s.inner().snapshot();
    let err = c.erase(DatasetId(1), &pts(&[2])).unwrap_err();
    assert!(matches!(
        err,
        ChunkCacheError::DefinedNotSupported {
            dataset: DatasetId(1),
            ..
        }
    ));
    let after = s.snapshot().since(&before);
    assert_eq!((after.reads, after.read_vectors, after.writes), (0, 0, 0));
    assert_eq!(s.inner().snapshot(), file);
    assert_eq!(c.stats(), stats);
    assert!(d.take_events().is_empty());

    let m = on_disk(&s, 8, 4, &[1, 2, 3, 4, 5, 6]);
    let mut c = fresh(&s, &m, 1 << 20);
    c.erase(DatasetId(1), &pts(&[2, 4])).unwrap();
    assert_eq!(defined(&mut c, 1, &Selection::All), [1, 3, 5, 6]);
    assert_eq!(
        read(&mut c, 1, &Selection::All, 8),
        [0xFF, 101, 0xFF, 103, 0xFF, 105, 106, 0xFF]
    );
}

/// EC-01: erase on a legacy layout is an error and a dirty resident chunk stays as it was.
#[test]
fn ec_01_erase_without_tracking_changes_nothing() {
    let s = store();
    let d = Arc::new(MockLayout::new(1, &[4], &[4], 1, &[0]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), d.clone()).unwrap();
    write(&mut c, 1, &Selection::All, &[1, 2, 3, 4]);
    let stats = c.stats();
    assert!(matches!(
        c.erase(DatasetId(1), &Selection::All),
        Err(ChunkCacheError::DefinedNotSupported { .. })
    ));
    assert_eq!(c.stats(), stats);
    assert!(c.entry_stats(DatasetId(1), &[0]).unwrap().dirty);
    assert_eq!(read(&mut c, 1, &Selection::All, 4), [1, 2, 3, 4]);
    assert_eq!(s.snapshot().bytes_written, 0);
}

/// EC-02: get_defined and erase on an unknown dataset are errors.
#[test]
fn ec_02_unknown_dataset() {
    let s = store();
    let mut c = cache(&s, 1 << 20);
    assert!(matches!(
        c.get_defined(DatasetId(9), &Selection::All),
        Err(ChunkCacheError::UnknownDataset(DatasetId(9)))
    ));
    assert!(matches!(
        c.erase(DatasetId(9), &Selection::All),
        Err(ChunkCacheError::UnknownDataset(DatasetId(9)))
    ));
}

/// EC-02: get_defined and erase on a dataset whose layout does not use the cache are errors,
/// never silent no-ops, and make no callback.
#[test]
fn ec_02_layout_not_using_cache() {
    let s = store();
    let mut d = MockLayout::new(1, &[8], &[4], 1, &[0]);
    d.tweak = Some(|i| i.uses_cache = false);
    let d = Arc::new(d);
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), d.clone()).unwrap();
    assert!(matches!(
        c.get_defined(DatasetId(1), &Selection::All),
        Err(ChunkCacheError::DefinedNotSupported {
            dataset: DatasetId(1),
            ..
        })
    ));
    assert!(matches!(
        c.erase(DatasetId(1), &Selection::All),
        Err(ChunkCacheError::DefinedNotSupported {
            dataset: DatasetId(1),
            ..
        })
    ));
    assert!(d.take_events().is_empty());
}

/// SCC-034: get_defined on a legacy chunked dataset makes no callback and no chunk-body read,
/// and the result equals the input selection (every element in the extent is defined, OQ-37).
#[test]
fn scc_034_legacy_get_defined_reads_nothing() {
    let s = store();
    let d = Arc::new(MockLayout::new(1, &[8], &[4], 1, &[0]).with_codec());
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), d.clone()).unwrap();
    write(&mut c, 1, &slab(&[0], &[3]), &[1, 2, 3]);
    c.flush().unwrap();
    c.destroy();
    d.take_events();
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), d.clone()).unwrap();
    let before = s.snapshot();
    // Chunk 1 was never written: its elements are defined too.
    for sel in [slab(&[2], &[5]), pts(&[7, 0, 7]), Selection::All] {
        assert_eq!(c.get_defined(DatasetId(1), &sel).unwrap(), sel);
    }
    let d2 = s.snapshot().since(&before);
    assert_eq!((d2.reads, d2.read_vectors, d2.bytes_read), (0, 0, 0));
    assert!(d.take_events().is_empty());
    assert_eq!(c.stats().entries, 0);
}

/// SCC-052: for a legacy layout get_defined returns the input; for the sparse mock it returns
/// the mock's defined set intersected with the input, in selection order.
#[test]
fn scc_052_defined_values_query() {
    let s = store();
    let d = Arc::new(MockLayout::new(2, &[16], &[4], 1, &[0]));
    let m = on_disk(&s, 16, 4, &[1, 2, 5, 9, 13, 14]);
    let mut c = fresh(&s, &m, 1 << 20);
    c.register(DatasetId(2), d.clone()).unwrap();
    let sel = slab(&[2], &[10]);
    assert_eq!(c.get_defined(DatasetId(2), &sel).unwrap(), sel);
    assert_eq!(defined(&mut c, 1, &sel), [2, 5, 9]);
    let strided = Selection::Hyperslab(Hyperslab::new(&[1], &[4], &[4], &[1]).unwrap());
    assert_eq!(defined(&mut c, 1, &strided), [1, 5, 9, 13]);
    let ev = m.take_events();
    assert_eq!(
        count(&ev, |e| matches!(e, SEvent::DefinedValues(..))),
        3 + 4
    );
}

/// SCC-037: the sparse mock's get_defined reads exactly the defined section and calls only
/// decode_defined; without that capability the whole chunk is read and fully decoded.
#[test]
fn scc_037_decode_defined_or_full_decode() {
    let s = store();
    let m = on_disk(&s, 4, 4, &[0, 3]);
    let st = m.stored(&[0]).unwrap();
    let mut c = fresh(&s, &m, 1 << 20);
    let before = s.snapshot();
    assert_eq!(defined(&mut c, 1, &Selection::All), [0, 3]);
    assert_eq!(s.snapshot().since(&before).bytes_read, st.def_len);
    let ev = m.take_events();
    assert_eq!(count(&ev, |e| matches!(e, SEvent::Decode(..))), 0);
    assert_eq!(
        count(&ev, |e| *e
            == SEvent::DecodeDefined(vec![0], st.def_len as usize)),
        1
    );

    let s2 = store();
    let m2 =
        Arc::new(SparseMock::new(&[4], &[4], 1, &[0xFF]).without(Capabilities::DECODE_DEFINED));
    let mut c = cache(&s2, 1 << 20);
    c.register(DatasetId(1), m2.clone()).unwrap();
    write(&mut c, 1, &pts(&[0, 3]), &[1, 2]);
    c.flush().unwrap();
    c.destroy();
    m2.take_events();
    let st2 = m2.stored(&[0]).unwrap();
    let mut c = fresh(&s2, &m2, 1 << 20);
    let before = s2.snapshot();
    assert_eq!(defined(&mut c, 1, &Selection::All), [0, 3]);
    assert_eq!(s2.snapshot().since(&before).bytes_read, st2.loc.size);
    let ev = m2.take_events();
    assert_eq!(count(&ev, |e| matches!(e, SEvent::DecodeDefined(..))), 0);
    assert_eq!(count(&ev, |e| matches!(e, SEvent::Decode(..))), 1);
    assert!(c.entry_stats(DatasetId(1), &[0]).unwrap().has_values);
}

/// SCC-039 (sparse half): a write into a missing sparse chunk creates it with new_chunk(fill)
/// holding an empty defined set, so only the written element is defined (not the whole chunk
/// filled); insert is not called before flush.
#[test]
fn scc_039_new_sparse_chunk_is_empty() {
    let s = store();
    let m = Arc::new(SparseMock::new(&[8], &[4], 1, &[0xFF]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &pts(&[3]), &[33]);
    let ev = m.take_events();
    assert_eq!(count(&ev, |e| *e == SEvent::NewChunk(vec![0], true)), 1);
    assert_eq!(defined(&mut c, 1, &slab(&[0], &[4])), [3]);
    assert_eq!(
        count(&m.take_events(), |e| matches!(e, SEvent::Insert(_))),
        0
    );
    c.flush().unwrap();
    assert_eq!(
        count(&m.take_events(), |e| matches!(e, SEvent::Insert(_))),
        1
    );
}

/// Writes and flushes a sparse dataset of 8-byte elements, chunk `[chunk]`, `per_chunk[i]`
/// defined elements (at the start) of chunk i; returns the mock.
fn wide(s: &Store, chunk: u64, per_chunk: &[u64], caps_off: Capabilities) -> Arc<SparseMock> {
    let n = per_chunk.len() as u64;
    let m = Arc::new(SparseMock::new(&[chunk * n], &[chunk], 8, &[0; 8]).without(caps_off));
    let mut c = cache(s, 1 << 24);
    c.register(DatasetId(1), m.clone()).unwrap();
    for (i, &k) in per_chunk.iter().enumerate() {
        let data = vec![i as u8 + 1; k as usize * 8];
        write(&mut c, 1, &slab(&[i as u64 * chunk], &[k]), &data);
    }
    c.flush().unwrap();
    c.destroy();
    m.take_events();
    m
}

/// SCC-040: under pressure an entry with 1 KiB used and 64 KiB allocated is condensed before any
/// eviction and the footprint drops by exactly 63 KiB; without condense (and without
/// drop_values) the entry is evicted instead.
#[test]
fn scc_040_condense_before_evict() {
    for condense in [true, false] {
        let s = store();
        let off = if condense {
            Capabilities::NONE
        } else {
            Capabilities::CONDENSE | Capabilities::DROP_VALUES
        };
        let m = wide(&s, 256, &[64, 128], off);
        m.decode_slack.lock().unwrap().insert(vec![0], 63 * 1024);
        let mut c = fresh(&s, &m, 67_000);
        read(&mut c, 1, &slab(&[0], &[256]), 256 * 8);
        let e0 = c.entry_stats(DatasetId(1), &[0]).unwrap();
        assert_eq!(
            e0.usage,
            MemUsage {
                used: 1024,
                allocated: 64 * 1024
            }
        );
        assert_eq!(c.stats().footprint, 64 * 1024);
        m.take_events();
        read(&mut c, 1, &slab(&[256], &[256]), 256 * 8);
        let st = c.stats();
        if condense {
            assert_eq!((st.condensed, st.evictions), (1, 0));
            assert_eq!(st.footprint, 1024 + 2048);
            let ev = m.take_events();
            assert!(ev.contains(&SEvent::Condense(
                vec![0],
                MemUsage {
                    used: 1024,
                    allocated: 65536
                },
                MemUsage {
                    used: 1024,
                    allocated: 1024
                }
            )));
            assert_eq!(
                c.entry_stats(DatasetId(1), &[0]).unwrap().usage.allocated,
                1024
            );
        } else {
            assert_eq!((st.condensed, st.evictions), (0, 1));
            assert!(c.entry_stats(DatasetId(1), &[0]).is_none());
            assert_eq!(st.footprint, 2048);
        }
    }
}

/// SCC-054: under pressure a clean sparse entry becomes defined-only, the footprint drops by the
/// value buffer's size, and get_defined on it then does no storage I/O.
#[test]
fn scc_054_drop_values_under_pressure() {
    let s = store();
    let m = wide(&s, 64, &[64, 64], Capabilities::NONE);
    let mut c = fresh(&s, &m, 1600);
    read(&mut c, 1, &slab(&[0], &[64]), 64 * 8);
    assert_eq!(c.stats().footprint, 1024);
    m.take_events();
    read(&mut c, 1, &slab(&[64], &[64]), 64 * 8);
    let st = c.stats();
    assert_eq!((st.values_dropped, st.evictions, st.condensed), (1, 0, 0));
    assert_eq!(st.footprint, 1024 + 512);
    let ev = m.take_events();
    assert!(ev.contains(&SEvent::DropValues(
        vec![0],
        MemUsage {
            used: 1024,
            allocated: 1024
        },
        MemUsage {
            used: 512,
            allocated: 512
        }
    )));
    assert!(!c.entry_stats(DatasetId(1), &[0]).unwrap().has_values);
    let before = s.snapshot();
    assert_eq!(
        defined(&mut c, 1, &slab(&[0], &[64])),
        (0..64).collect::<Vec<_>>()
    );
    let d = s.snapshot().since(&before);
    assert_eq!((d.reads, d.read_vectors, d.bytes_read), (0, 0, 0));
}

/// SCC-050: the sparse mock gathers 3 new elements and reports +N allocated bytes; the cache
/// footprint grows by exactly N.
#[test]
fn scc_050_gather_growth_accounted() {
    let s = store();
    let m = Arc::new(SparseMock::new(&[64], &[64], 4, &[0; 4]));
    let mut c = cache(&s, 1 << 20);
    c.register(DatasetId(1), m.clone()).unwrap();
    write(&mut c, 1, &pts(&[0, 1]), &[1; 8]);
    m.take_events();
    let before = c.stats().footprint;
    write(&mut c, 1, &pts(&[10, 20, 30]), &[2; 12]);
    let ev = m.take_events();
    let (b, a) = ev
        .iter()
        .find_map(|e| match e {
            SEvent::Gather(_, b, a) => Some((*b, *a)),
            _ => None,
        })
        .unwrap();
    let n = a.allocated - b.allocated;
    assert!(n > 0);
    assert_eq!(a.used - b.used, 3 * (4 + 8));
    assert_eq!(c.stats().footprint - before, n);
    assert_eq!(c.stats().used, a.used);
}

/// SCC-053 and EC-20: erasing every defined element of a sparse chunk that exists on disk calls
/// delete_chunk once with its address and size, leaves no entry, writes nothing, a later lookup
/// says not found and a read gives the fill value.
#[test]
fn scc_053_erase_to_empty_deletes() {
    let s = store();
    let m = on_disk(&s, 8, 4, &[1, 2, 6]);
    let loc = m.stored(&[0]).unwrap().loc;
    let mut c = fresh(&s, &m, 1 << 20);
    read(&mut c, 1, &Selection::All, 8);
    m.take_events();
    let before = s.snapshot();
    c.erase(DatasetId(1), &slab(&[0], &[4])).unwrap();
    let ev = m.take_events();
    assert_eq!(count(&ev, |e| matches!(e, SEvent::Delete(..))), 1);
    assert!(ev.contains(&SEvent::Delete(vec![0], Some(loc))));
    assert!(ev.iter().any(|e| matches!(e,
        SEvent::Erase(c, x) if c == &[0] && x.changed && x.empty)));
    assert!(c.entry_stats(DatasetId(1), &[0]).is_none());
    assert!(m.stored(&[0]).is_none());
    c.flush().unwrap();
    assert_eq!(s.snapshot().since(&before).bytes_written, 0);
    assert_eq!(
        read(&mut c, 1, &slab(&[0], &[4]), 4),
        [0xFF, 0xFF, 0xFF, 0xFF]
    );
    assert!(m.take_events().contains(&SEvent::Lookup(vec![vec![0]], 0)));
    assert_eq!(c.dataset_entries(DatasetId(1)), 1);
}

/// EC-20: erasing all of a chunk that is not resident loads it, deletes it from disk without
/// writing it, and it then reads as fill.
#[test]
fn ec_20_erase_empties_non_resident_chunk() {
    let s = store();
    let m = on_disk(&s, 4, 4, &[0, 3]);
    let loc = m.stored(&[0]).unwrap().loc;
    let mut c = fresh(&s, &m, 1 << 20);
    c.erase(DatasetId(1), &pts(&[3, 0])).unwrap();
    let ev = m.take_events();
    assert_eq!(count(&ev, |e| matches!(e, SEvent::Decode(..))), 1);
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, SEvent::Delete(..)))
            .collect::<Vec<_>>(),
        [&SEvent::Delete(vec![0], Some(loc))]
    );
    assert_eq!(c.stats().entries, 0);
    assert_eq!(read(&mut c, 1, &Selection::All, 4), [0xFF; 4]);
    assert_eq!(s.snapshot().bytes_written, loc.size);
    assert_eq!(m.live_udata(), 0);
}

/// SCC-101: an erase covering a missing chunk, a partly defined chunk and a chunk whose elements
/// are all erased makes 0, 1 and 1 erase_values calls and one delete_chunk; after flush and a
/// fresh cache, get_defined matches.
#[test]
fn scc_101_erase_flow() {
    let s = store();
    let m = on_disk(&s, 12, 4, &[4, 5, 6, 8, 9]);
    let loc2 = m.stored(&[2]).unwrap().loc;
    let mut c = fresh(&s, &m, 1 << 20);
    c.erase(DatasetId(1), &pts(&[1, 5, 8, 9])).unwrap();
    let ev = m.take_events();
    assert!(ev.contains(&SEvent::Lookup(vec![vec![0], vec![1], vec![2]], 2)));
    let erases = |k: u64| count(&ev, |e| matches!(e, SEvent::Erase(c, _) if c == &[k]));
    assert_eq!((erases(0), erases(1), erases(2)), (0, 1, 1));
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, SEvent::Delete(..)))
            .collect::<Vec<_>>(),
        [&SEvent::Delete(vec![2], Some(loc2))]
    );
    let e1 = c.entry_stats(DatasetId(1), &[1]).unwrap();
    assert!(e1.dirty && e1.has_values);
    assert_eq!(m.live_udata(), 1);
    c.flush().unwrap();
    c.destroy();
    let mut c = fresh(&s, &m, 1 << 20);
    assert_eq!(defined(&mut c, 1, &Selection::All), [4, 6]);
    assert_eq!(read(&mut c, 1, &slab(&[4], &[3]), 3), [104, 0xFF, 106]);
}

/// EC-18: get_defined and erase with a selection outside the extent fail with
/// `OutOfExtent` before any callback or I/O.
#[test]
fn ec_18_selection_outside_extent() {
    let s = store();
    let m = on_disk(&s, 8, 4, &[1]);
    let mut c = fresh(&s, &m, 1 << 20);
    let before = s.snapshot();
    for sel in [pts(&[1, 8]), slab(&[6], &[3])] {
        assert!(matches!(
            c.get_defined(DatasetId(1), &sel),
            Err(ChunkCacheError::Selection(
                SelectionError::OutOfExtent { .. }
            ))
        ));
        assert!(matches!(
            c.erase(DatasetId(1), &sel),
            Err(ChunkCacheError::Selection(
                SelectionError::OutOfExtent { .. }
            ))
        ));
    }
    assert!(m.take_events().is_empty());
    let d = s.snapshot().since(&before);
    assert_eq!(
        (d.reads, d.read_vectors, d.writes, d.write_vectors),
        (0, 0, 0, 0)
    );
    assert_eq!(c.stats().entries, 0);
    assert!(m.stored(&[0]).is_some());
}

/// EC-19: erasing elements that are already undefined succeeds and changes nothing: a resident
/// clean chunk is not even passed to erase_values and stays clean; a non-resident one is loaded,
/// erase_values reports no change and it stays clean; flush writes nothing.
#[test]
fn ec_19_erase_undefined_changes_nothing() {
    let s = store();
    let m = on_disk(&s, 8, 4, &[1, 2, 5]);
    let mut c = fresh(&s, &m, 1 << 20);
    read(&mut c, 1, &slab(&[0], &[4]), 4);
    m.take_events();
    let before = s.snapshot();
    c.erase(DatasetId(1), &pts(&[0, 3, 6])).unwrap();
    let ev = m.take_events();
    assert_eq!(
        count(&ev, |e| matches!(e, SEvent::Erase(c, _) if c == &[0])),
        0
    );
    assert!(ev.iter().any(|e| matches!(e,
        SEvent::Erase(c, x) if c == &[1] && !x.changed && !x.empty)));
    assert_eq!(count(&ev, |e| matches!(e, SEvent::Delete(..))), 0);
    assert_eq!(c.stats().dirty_entries, 0);
    c.flush().unwrap();
    assert_eq!(s.snapshot().since(&before).bytes_written, 0);
    assert_eq!(defined(&mut c, 1, &Selection::All), [1, 2, 5]);
}

/// EC-35: a full overwrite of a chunk resident only as its defined set replaces it with a new
/// chunk without fill, reads nothing more, and keeps the old address and size for insert.
#[test]
fn ec_35_full_overwrite_of_defined_only_entry() {
    let s = store();
    let m = on_disk(&s, 4, 4, &[0, 1, 2, 3]);
    let st = m.stored(&[0]).unwrap();
    let mut c = fresh(&s, &m, 1 << 20);
    assert_eq!(defined(&mut c, 1, &Selection::All), [0, 1, 2, 3]);
    m.take_events();
    let before = s.snapshot();
    write(&mut c, 1, &Selection::All, &[9, 8, 7, 6]);
    assert_eq!(s.snapshot().since(&before).bytes_read, 0);
    let ev = m.take_events();
    assert_eq!(count(&ev, |e| *e == SEvent::NewChunk(vec![0], false)), 1);
    assert_eq!(
        count(&ev, |e| matches!(
            e,
            SEvent::Decode(..) | SEvent::DecodeDefined(..)
        )),
        0
    );
    let e = c.entry_stats(DatasetId(1), &[0]).unwrap();
    assert!(e.has_values && e.dirty);
    assert_eq!(e.location, Some(st.loc));
    c.flush().unwrap();
    assert!(
        m.take_events()
            .contains(&SEvent::Insert(vec![(vec![0], Some(st.loc), st.loc.size)]))
    );
    assert_eq!(m.stored(&[0]).unwrap().loc, st.loc);
    assert_eq!(read(&mut c, 1, &Selection::All, 4), [9, 8, 7, 6]);
}

/// Tiny deterministic generator for the randomized test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// SCC-087 and SCC-118: with a sparse mock whose chunk sizes change on every gather and erase
/// (random extra capacity, random condensing), a small limit forcing condense, drop-values and
/// eviction, and a randomized sequence of writes, erases, reads, get_defined and flushes, the
/// footprint always equals the sum of the allocation sizes the mock last reported for its live
/// chunk objects, used bytes likewise, and the data and defined set match a model.
#[test]
fn scc_087_scc_118_accounting_with_changing_sparse_sizes() {
    const N: u64 = 64;
    let s = store();
    let m = Arc::new(SparseMock::new(&[N], &[8], 2, &[0xEE, 0xEE]).with_jitter());
    let mut c = cache(&s, 700);
    c.register(DatasetId(1), m.clone()).unwrap();
    let mut model: BTreeMap<u64, [u8; 2]> = BTreeMap::new();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for step in 0..3000u32 {
        match rng.below(10) {
            0..=2 => {
                let k = 1 + rng.below(6) as usize;
                let p: Vec<u64> = (0..k).map(|_| rng.below(N)).collect();
                let data: Vec<u8> = (0..2 * k).map(|_| rng.below(256) as u8).collect();
                write(&mut c, 1, &pts(&p), &data);
                for (i, &x) in p.iter().enumerate() {
                    model.insert(x, [data[2 * i], data[2 * i + 1]]);
                }
            }
            3 => {
                let start = rng.below(N);
                let len = 1 + rng.below(N - start);
                let data: Vec<u8> = (0..2 * len).map(|_| rng.below(256) as u8).collect();
                write(&mut c, 1, &slab(&[start], &[len]), &data);
                for i in 0..len {
                    let j = 2 * i as usize;
                    model.insert(start + i, [data[j], data[j + 1]]);
                }
            }
            4 | 5 => {
                if rng.below(2) == 0 {
                    let start = rng.below(N);
                    let len = 1 + rng.below((N - start).min(12));
                    c.erase(DatasetId(1), &slab(&[start], &[len])).unwrap();
                    for i in start..start + len {
                        model.remove(&i);
                    }
                } else {
                    let p: Vec<u64> = (0..1 + rng.below(5)).map(|_| rng.below(N)).collect();
                    c.erase(DatasetId(1), &pts(&p)).unwrap();
                    for x in p {
                        model.remove(&x);
                    }
                }
            }
            6 | 7 => {
                let got = read(&mut c, 1, &Selection::All, 2 * N as usize);
                for i in 0..N {
                    let want = model.get(&i).copied().unwrap_or([0xEE, 0xEE]);
                    let j = 2 * i as usize;
                    assert_eq!([got[j], got[j + 1]], want, "step {step} element {i}");
                }
            }
            8 => {
                let got = defined(&mut c, 1, &Selection::All);
                assert_eq!(
                    got,
                    model.keys().copied().collect::<Vec<_>>(),
                    "step {step}"
                );
            }
            _ => c.flush().unwrap(),
        }
        let st = c.stats();
        let (alloc, used) = m.reg.totals();
        assert_eq!(st.footprint, alloc, "footprint at step {step}");
        assert_eq!(st.used, used, "used at step {step}");
        assert_eq!(st.per_dataset.values().sum::<usize>(), st.footprint);
        assert_eq!(m.reg.count(), st.entries, "live chunks at step {step}");
    }
    let st = c.stats();
    assert!(
        st.evictions > 0 && st.values_dropped > 0 && st.condensed > 0,
        "{st:?}"
    );
}
