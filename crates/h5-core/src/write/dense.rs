//! Dense storage laid out at flush: a new fractal heap holding messages (links or attributes)
//! and v2 B-trees indexing them, every structure a metadata-cache entry.
//!
//! Invariants: every structure placed is recorded in the caller's `placed` list (address,
//! length, kind) so the next layout frees it first; B-tree nodes are filled evenly and every
//! leaf is at the same depth; records are handed in key order.

use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree2::{
    Btree2Header, Btree2Node, Btree2Params, Btree2Type, ChildPointer, Record, RecordContext,
};
use h5_format::heap::fractal::{
    FractalBlockKind, FractalHeapBuilder, FractalHeapHeader, FractalHeapParams, HeapId, HugeId,
};
use h5_metacache::MetadataKind as K;

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::meta::Decoded;
use crate::write::alloc::SpaceKind;
use crate::write::put;

/// A structure placed by a layout: `(relative address, length, cache kind)`.
pub(crate) type Placed = (u64, u64, K);

/// Node size of the v2 B-trees libhdf5 creates for links and attributes.
const NODE_SIZE: u32 = 512;

fn bytes_entry(bytes: Vec<u8>) -> Decoded {
    Decoded::writable(bytes.len(), bytes, |b: &Vec<u8>| Ok(b.clone()))
}

fn place(file: &FileShared, kind: K, bytes: Vec<u8>, placed: &mut Vec<Placed>) -> Result<u64> {
    let len = bytes.len() as u64;
    let addr = file.allocate(SpaceKind::Meta, len)?;
    placed.push((addr, len, kind));
    put(file, kind, addr, bytes_entry(bytes))?;
    Ok(addr)
}

/// Stores `objects` (in this order) in a new fractal heap with `params`; returns the heap's
/// address and each object's heap ID. Objects larger than the heap's managed maximum are
/// *huge* objects: each is a block of its own indexed by a v2 B-tree of type 1.
pub(crate) fn build_heap(
    file: &FileShared,
    params: FractalHeapParams,
    objects: &[&[u8]],
    placed: &mut Vec<Placed>,
) -> Result<(u64, Vec<Vec<u8>>)> {
    let sizes = file.sizes;
    let mut b = FractalHeapBuilder::new(params, sizes)?;
    let mut ids = Vec::with_capacity(objects.len());
    let mut huge: Vec<(usize, &[u8])> = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        if o.len() as u64 > u64::from(params.max_managed_object_size) {
            huge.push((i, o));
            ids.push(Vec::new());
        } else {
            ids.push(b.insert(o)?);
        }
    }
    let mut failed = None;
    let mut alloc = |kind: FractalBlockKind, len: u64| -> u64 {
        let k = match kind {
            FractalBlockKind::Header => K::FractalHeapHeader,
            FractalBlockKind::DirectBlock => K::FractalHeapDirectBlock,
            FractalBlockKind::IndirectBlock => K::FractalHeapIndirectBlock,
        };
        match file.allocate(SpaceKind::Meta, len) {
            Ok(a) => {
                placed.push((a, len, k));
                a
            }
            Err(e) => {
                failed.get_or_insert(e);
                UNDEFINED_ADDRESS
            }
        }
    };
    let heap = b.finish(&mut alloc)?;
    if let Some(e) = failed {
        return Err(e);
    }
    let mut header = heap.header.clone();
    // Huge objects: one block each, then the B-tree indexing them by their ID (1, 2, ...).
    if !huge.is_empty() {
        let mut records = Vec::with_capacity(huge.len());
        for (n, (i, o)) in huge.iter().enumerate() {
            let id = n as u64 + 1;
            let addr = place(file, K::FractalHeapDirectBlock, o.to_vec(), placed)?;
            records.push(Record::HugeIndirect {
                address: addr,
                length: o.len() as u64,
                id,
            });
            ids[*i] = huge_id(&header, id)?;
            header.huge_objects_size += o.len() as u64;
        }
        header.huge_object_count = huge.len() as u64;
        header.next_huge_id = huge.len() as u64;
        header.huge_btree_address = build_btree2(file, Btree2Type::HugeIndirect, records, placed)?;
    }
    for block in heap.blocks {
        let (kind, bytes) = match block.kind {
            FractalBlockKind::Header => (K::FractalHeapHeader, header.encode()?),
            FractalBlockKind::DirectBlock => (K::FractalHeapDirectBlock, block.bytes),
            FractalBlockKind::IndirectBlock => (K::FractalHeapIndirectBlock, block.bytes),
        };
        put(file, kind, block.address, bytes_entry(bytes))?;
    }
    Ok((header.address, ids))
}

/// The heap ID of the huge object with B-tree key `id`.
fn huge_id(header: &FractalHeapHeader, id: u64) -> Result<Vec<u8>> {
    Ok(HeapId::Huge(HugeId::BtreeKey(id)).encode(header)?)
}

/// Writes a v2 B-tree of `tree_type` holding `records` (already in key order); returns its
/// header's address.
pub(crate) fn build_btree2(
    file: &FileShared,
    tree_type: Btree2Type,
    records: Vec<Record>,
    placed: &mut Vec<Placed>,
) -> Result<u64> {
    let sizes = file.sizes;
    let ctx = RecordContext::new(sizes);
    let params = Btree2Params {
        tree_type,
        node_size: NODE_SIZE,
        record_size: u16::try_from(ctx.record_size(tree_type))
            .map_err(|_| Error::Unsupported("v2 B-tree record size".into()))?,
        split_percent: 100,
        merge_percent: 40,
    };
    let n = records.len() as u64;
    let empty = ChildPointer {
        address: UNDEFINED_ADDRESS,
        records: 0,
        total_records: 0,
    };
    let mut depth = 0u16;
    let probe = loop {
        let h = Btree2Header::new(sizes, UNDEFINED_ADDRESS, params, depth, empty)?;
        if h.limits_at(depth)
            .is_some_and(|l| l.cumulative_max_records >= n)
        {
            break h;
        }
        depth = depth
            .checked_add(1)
            .filter(|d| *d < 64)
            .ok_or_else(|| Error::Unsupported("v2 B-tree too deep".into()))?;
    };
    let root = if records.is_empty() {
        empty
    } else {
        build_node(file, &probe, &ctx, records, depth, placed)?
    };
    let addr = file.allocate(SpaceKind::Meta, Btree2Header::encoded_len(sizes) as u64)?;
    let len = Btree2Header::encoded_len(sizes) as u64;
    placed.push((addr, len, K::BTreeV2Header));
    let header = Btree2Header::new(sizes, addr, params, depth, root)?;
    put(
        file,
        K::BTreeV2Header,
        addr,
        Decoded::writable(len as usize, header, move |h: &Btree2Header| {
            h.encode(sizes)
        }),
    )?;
    Ok(addr)
}

/// Builds the subtree of `depth` holding `records`; returns the pointer to its root.
fn build_node(
    file: &FileShared,
    hdr: &Btree2Header,
    ctx: &RecordContext,
    mut records: Vec<Record>,
    depth: u16,
    placed: &mut Vec<Placed>,
) -> Result<ChildPointer> {
    let n = records.len() as u64;
    let (node, total) = if depth == 0 {
        (
            Btree2Node {
                address: UNDEFINED_ADDRESS,
                depth,
                records,
                children: Vec::new(),
            },
            n,
        )
    } else {
        let below = hdr
            .limits_at(depth - 1)
            .map(|l| l.cumulative_max_records)
            .ok_or_else(|| Error::Unsupported("v2 B-tree limits".into()))?;
        // The fewest children that hold the records, then the records spread evenly.
        let k = (n + 1).div_ceil(below + 1).max(1);
        let in_children = n - (k - 1);
        let base = in_children / k;
        let extra = in_children % k;
        let mut seps = Vec::with_capacity(k as usize - 1);
        let mut children = Vec::with_capacity(k as usize);
        let mut rest = std::mem::take(&mut records);
        for i in 0..k {
            let take = (base + u64::from(i < extra)) as usize;
            let tail = rest.split_off(take.min(rest.len()));
            children.push(build_node(file, hdr, ctx, rest, depth - 1, placed)?);
            rest = tail;
            if i + 1 < k {
                if rest.is_empty() {
                    return Err(Error::Unsupported(
                        "v2 B-tree layout ran out of records".into(),
                    ));
                }
                seps.push(rest.remove(0));
            }
        }
        (
            Btree2Node {
                address: UNDEFINED_ADDRESS,
                depth,
                records: seps,
                children,
            },
            n,
        )
    };
    let count = node.records.len() as u64;
    let kind = if depth == 0 {
        K::BTreeV2Leaf
    } else {
        K::BTreeV2Internal
    };
    let bytes = node.encode(hdr, ctx)?;
    let address = place(file, kind, bytes, placed)?;
    Ok(ChildPointer {
        address,
        records: count,
        total_records: total,
    })
}

/// Frees every structure of a previous layout.
pub(crate) fn free_placed(file: &FileShared, placed: &mut Vec<Placed>) -> Result<()> {
    for (addr, len, kind) in std::mem::take(placed) {
        crate::write::drop_entry(file, kind, addr, len)?;
    }
    Ok(())
}

/// The lookup3 hash libhdf5 indexes names by.
pub(crate) fn name_hash(name: &[u8]) -> u32 {
    h5_format::checksum::lookup3(name, 0)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::file::CacheSettings;
    use crate::walk;
    use crate::write::CreateOptions;

    fn new_file() -> (Arc<dyn h5_io::Storage>, Arc<FileShared>) {
        let storage: Arc<dyn h5_io::Storage> = Arc::new(h5_io::MemoryStorage::new());
        let file = FileShared::create(
            Arc::clone(&storage),
            &CacheSettings::default(),
            &CreateOptions::default(),
            None,
        )
        .unwrap();
        (storage, file)
    }

    fn id7(i: u64) -> Vec<u8> {
        let mut v = i.to_le_bytes()[..7].to_vec();
        v[0] = 0x20;
        v
    }

    /// Trees of every depth hold exactly the records given, in order, and the reader's
    /// descent finds each one.
    #[test]
    fn bulk_built_btrees_read_back_at_every_depth() {
        for n in [1u64, 7, 40, 1_000, 30_000] {
            let (storage, file) = new_file();
            let records: Vec<Record> = (0..n)
                .map(|i| Record::LinkCreationOrder {
                    creation_order: i * 3,
                    heap_id: id7(i),
                })
                .collect();
            let mut placed = Vec::new();
            let addr = build_btree2(
                &file,
                Btree2Type::LinkCreationOrder,
                records.clone(),
                &mut placed,
            )
            .unwrap();
            file.flush().unwrap();
            drop(file);
            let file = FileShared::open(storage, &CacheSettings::default(), None).unwrap();
            let ctx = RecordContext::new(file.sizes);
            assert_eq!(
                walk::btree2_records(&file, addr, ctx).unwrap(),
                records,
                "{n}"
            );
            for probe in [0, n / 2, n - 1] {
                let want = probe * 3;
                let cmp = move |r: &Record| match r {
                    Record::LinkCreationOrder { creation_order, .. } => creation_order.cmp(&want),
                    _ => std::cmp::Ordering::Less,
                };
                let found = walk::btree2_find(&file, addr, ctx, &cmp).unwrap();
                assert_eq!(found, vec![records[probe as usize].clone()], "{n} {probe}");
            }
        }
    }

    /// Tiny, managed and huge objects come back from their heap IDs.
    #[test]
    fn heaps_with_huge_objects_read_back() {
        let (storage, file) = new_file();
        let objects: Vec<Vec<u8>> = [3usize, 100, 5_000, 4_000, 70_000, 9, 300_000]
            .iter()
            .enumerate()
            .map(|(k, n)| (0..*n).map(|i| (i * 7 + k) as u8).collect())
            .collect();
        let refs: Vec<&[u8]> = objects.iter().map(Vec::as_slice).collect();
        let mut placed = Vec::new();
        let (heap, ids) = build_heap(
            &file,
            FractalHeapParams::dense_attributes(),
            &refs,
            &mut placed,
        )
        .unwrap();
        file.flush().unwrap();
        drop(file);
        let file = FileShared::open(storage, &CacheSettings::default(), None).unwrap();
        let hdr = walk::fractal_header(&file, heap).unwrap();
        assert_eq!(hdr.huge_object_count, 3);
        for (o, id) in objects.iter().zip(&ids) {
            assert_eq!(&walk::fractal_object(&file, &hdr, id).unwrap(), o);
        }
    }
}
