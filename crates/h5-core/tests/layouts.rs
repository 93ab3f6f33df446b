//! The engine's layouts serve reads through the shared chunk cache: contiguous data in place, and
//! chunked data found through an index, on the cached path and the bypass path.

use std::sync::Arc;

use h5_chunkcache::selection::{Hyperslab, Selection};
use h5_chunkcache::{Bypass, ChunkCache, ChunkCacheConfig, DatasetId, DiskLocation, ReadRequest};
use h5_core::layouts::{
    ChunkDecoder, ChunkRecord, ChunkedLayout, ImplicitIndex, SingleBlockLayout, SingleChunkIndex,
};
use h5_io::{MemoryStorage, Metrics, Storage};

fn read(c: &mut ChunkCache, sel: &Selection, n: usize, bypass: Bypass) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    c.read(&mut [ReadRequest::new(DatasetId(1), sel, &mut buf).with_bypass(bypass)])
        .unwrap();
    buf
}

#[test]
fn contiguous_data_reads_in_place_or_through_the_cache() {
    let s = Arc::new(Metrics::new(MemoryStorage::new()));
    let data: Vec<u8> = (0..=255).collect();
    s.write_at(1000, &data).unwrap();
    let storage: Arc<dyn Storage> = s.clone();
    let mut c = ChunkCache::new(storage, ChunkCacheConfig::default()).unwrap();
    let layout = SingleBlockLayout {
        dims: vec![16, 16],
        elem_size: 1,
        fill: vec![],
        location: Some(DiskLocation {
            addr: 1000,
            size: 256,
        }),
    };
    c.register(DatasetId(1), Arc::new(layout)).unwrap();
    let sel = Selection::Hyperslab(Hyperslab::contiguous(&[2, 3], &[2, 2]).unwrap());
    let before = s.snapshot();
    assert_eq!(read(&mut c, &sel, 4, Bypass::Always), [35, 36, 51, 52]);
    assert_eq!(s.snapshot().since(&before).bytes_read, 4);
    assert_eq!(c.stats().entries, 0);
    assert_eq!(read(&mut c, &sel, 4, Bypass::Never), [35, 36, 51, 52]);
    assert_eq!(c.stats().entries, 1);
}

#[test]
fn unallocated_contiguous_data_reads_as_fill() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let mut c = ChunkCache::new(storage, ChunkCacheConfig::default()).unwrap();
    let layout = SingleBlockLayout {
        dims: vec![4],
        elem_size: 2,
        fill: vec![7, 0],
        location: None,
    };
    c.register(DatasetId(1), Arc::new(layout)).unwrap();
    assert_eq!(
        read(&mut c, &Selection::All, 8, Bypass::Auto),
        [7, 0, 7, 0, 7, 0, 7, 0]
    );
}

/// Adds 1 to every byte: a stand-in filter.
#[derive(Debug)]
struct PlusOne;

impl ChunkDecoder for PlusOne {
    fn is_identity(&self) -> bool {
        false
    }
    fn decode(&self, image: Vec<u8>, mask: u32) -> Result<Vec<u8>, h5_chunkcache::LayoutError> {
        Ok(if mask & 1 == 1 {
            image
        } else {
            image.iter().map(|b| b.wrapping_add(1)).collect()
        })
    }
}

#[derive(Debug)]
struct Identity;

impl ChunkDecoder for Identity {
    fn is_identity(&self) -> bool {
        true
    }
    fn decode(&self, image: Vec<u8>, _: u32) -> Result<Vec<u8>, h5_chunkcache::LayoutError> {
        Ok(image)
    }
}

#[test]
fn implicit_and_single_chunk_indexes() {
    let s = Arc::new(MemoryStorage::new());
    let data: Vec<u8> = (0..36).collect();
    s.write_at(64, &data).unwrap();
    let storage: Arc<dyn Storage> = s.clone();
    let mut c = ChunkCache::new(storage, ChunkCacheConfig::default()).unwrap();
    // A 6×6 dataset in 3×3 chunks stored row-major by chunk: chunk (r, c) at 64 + 9·(2r + c).
    let layout = ChunkedLayout {
        dims: vec![6, 6],
        chunk_dims: vec![3, 3],
        elem_size: 1,
        fill: vec![],
        index: Arc::new(ImplicitIndex {
            base: Some(64),
            grid: vec![2, 2],
            chunk_bytes: 9,
        }),
        decoder: Arc::new(Identity),
        unfiltered_edges: false,
    };
    c.register(DatasetId(1), Arc::new(layout)).unwrap();
    let sel = Selection::Hyperslab(Hyperslab::contiguous(&[2, 2], &[2, 2]).unwrap());
    // (2,2) is chunk (0,0) local (2,2) = byte 8; (2,3) chunk (0,1) local (2,0) = 9 + 6;
    // (3,2) chunk (1,0) local (0,2) = 18 + 2; (3,3) chunk (1,1) local (0,0) = 27.
    assert_eq!(read(&mut c, &sel, 4, Bypass::Never), [8, 15, 20, 27]);

    let layout = ChunkedLayout {
        dims: vec![4],
        chunk_dims: vec![4],
        elem_size: 1,
        fill: vec![],
        index: Arc::new(SingleChunkIndex(Some(ChunkRecord {
            addr: 64,
            size: 4,
            filter_mask: 0,
        }))),
        decoder: Arc::new(PlusOne),
        unfiltered_edges: false,
    };
    c.register(DatasetId(2), Arc::new(layout)).unwrap();
    let mut buf = vec![0u8; 4];
    c.read(&mut [ReadRequest::new(DatasetId(2), &Selection::All, &mut buf)])
        .unwrap();
    assert_eq!(buf, [1, 2, 3, 4]);
}

/// With the layout flag for unfiltered partial edge chunks, a chunk reaching past the extent is
/// read as stored and a full one through the decoder; without it, both are decoded.
#[test]
fn partial_edge_chunks_stored_unfiltered_skip_the_decoder() {
    let s = Arc::new(MemoryStorage::new());
    let data: Vec<u8> = (0..8).collect();
    s.write_at(64, &data).unwrap();
    let storage: Arc<dyn Storage> = s.clone();
    let mut c = ChunkCache::new(storage, ChunkCacheConfig::default()).unwrap();
    // Six elements in chunks of four: chunk 0 (full) at 64, chunk 1 (two past the extent) at 68.
    for (id, unfiltered_edges, want) in [
        (1, true, [1u8, 2, 3, 4, 4, 5]),
        (2, false, [1, 2, 3, 4, 5, 6]),
    ] {
        let layout = ChunkedLayout {
            dims: vec![6],
            chunk_dims: vec![4],
            elem_size: 1,
            fill: vec![],
            index: Arc::new(ImplicitIndex {
                base: Some(64),
                grid: vec![2],
                chunk_bytes: 4,
            }),
            decoder: Arc::new(PlusOne),
            unfiltered_edges,
        };
        c.register(DatasetId(id), Arc::new(layout)).unwrap();
        let mut buf = vec![0u8; 6];
        c.read(&mut [ReadRequest::new(DatasetId(id), &Selection::All, &mut buf)])
            .unwrap();
        assert_eq!(buf, want, "unfiltered_edges: {unfiltered_edges}");
    }
}
