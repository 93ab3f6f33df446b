//! SWMR-074: in a VFD SWMR writer, only fixed and extensible array data block pages may be
//! written across a page boundary without starting on one. The metadata cache refuses any other
//! entry written so (an internal error) and the page buffer splits and logs the writes it allows.

use crate::common;

use std::sync::Arc;

use common::*;
use h5_io::{MemoryStorage, Storage};
use h5_metacache::*;
use h5_pagebuf::{PageBuffer, PageBufferConfig};

const PAGE: u64 = 4096;

/// A cache with one mock class per metadata kind (ids as `MetadataKind`'s) writing through a
/// VFD SWMR writer page buffer that records its splits.
fn cache_over_swmr_page_buffer() -> (MetadataCache<Mock>, Arc<PageBuffer>) {
    let inner: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    inner.set_len(16 * PAGE).unwrap();
    let pb = PageBuffer::new(
        inner,
        PageBufferConfig::new(64 * PAGE as usize, 0, 0).unwrap(),
    )
    .unwrap();
    pb.enable(PAGE).unwrap();
    pb.start_swmr_writer(3, 1).unwrap();
    pb.record_splits(true);
    let table: Vec<Arc<dyn Class<Mock>>> = MetadataKind::ALL
        .iter()
        .map(|k| MockClass::new(k.id(), k.name(), ClassFlags::NONE) as Arc<dyn Class<Mock>>)
        .collect();
    let cache = CacheBuilder::new(
        pb.metadata(),
        table,
        MockFile {
            eoa: 16 * PAGE,
            frees: Vec::new(),
        },
    )
    .config(fixed(1 << 20, 0.0))
    .build()
    .unwrap();
    (cache, pb)
}

fn insert(c: &mut MetadataCache<Mock>, kind: MetadataKind, addr: u64, len: usize) {
    c.insert(
        kind.id(),
        addr,
        MockEntry::filled(len, 0x5a),
        InsertFlags::NONE,
    )
    .unwrap();
}

#[test]
fn swmr_074_only_array_data_block_pages_cross_pages_unaligned() {
    // Across the boundary at 2 × PAGE, starting inside the page before it.
    let (at, len) = (2 * PAGE - 100, 300usize);

    // An object header written so: refused, and not written.
    let (mut c, pb) = cache_over_swmr_page_buffer();
    c.set_page_check(Some(PAGE));
    insert(&mut c, MetadataKind::ObjectHeader, at, len);
    let err = c.flush(FlushFlags::NONE).unwrap_err();
    assert!(
        matches!(
            err,
            CacheError::MisalignedWrite {
                class: "object header",
                addr,
                len: 300,
                page_size: PAGE,
            } if addr == at
        ),
        "{err:?}"
    );
    assert!(
        pb.take_split_log().is_empty(),
        "nothing reached the page buffer"
    );
    let mut b = vec![0u8; len];
    pb.metadata().read_at(at, &mut b).unwrap();
    assert_eq!(b, vec![0u8; len]);

    // A fixed array data block page (and an extensible array one): written, split, logged.
    for kind in [
        MetadataKind::FixedArrayDataBlockPage,
        MetadataKind::ExtensibleArrayDataBlockPage,
    ] {
        let (mut c, pb) = cache_over_swmr_page_buffer();
        c.set_page_check(Some(PAGE));
        insert(&mut c, kind, at, len);
        c.flush(FlushFlags::NONE).unwrap();
        assert_eq!(pb.take_split_log(), vec![(at, len as u64)], "{kind:?}");
        pb.metadata().read_at(at, &mut b).unwrap();
        assert_eq!(b, vec![0x5a; len], "{kind:?}");
    }

    // Aligned or inside one page: any kind is written; without the check nothing is refused.
    let (mut c, _pb) = cache_over_swmr_page_buffer();
    c.set_page_check(Some(PAGE));
    insert(
        &mut c,
        MetadataKind::ObjectHeader,
        3 * PAGE,
        2 * PAGE as usize,
    );
    insert(&mut c, MetadataKind::ObjectHeader, 6 * PAGE + 8, 100);
    c.flush(FlushFlags::NONE).unwrap();
    let (mut c, _pb) = cache_over_swmr_page_buffer();
    insert(&mut c, MetadataKind::ObjectHeader, at, len);
    c.flush(FlushFlags::NONE).unwrap();
}
