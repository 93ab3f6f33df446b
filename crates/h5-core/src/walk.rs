//! Walks of the multi-block structures (B-trees, heaps), each block loaded through the metadata
//! cache and decoded by `h5-format`.

use std::sync::Arc;

use h5_format::btree2::{Btree2Header, Btree2Node, Record, RecordContext};
use h5_format::heap::fractal::{
    ChildKind, FractalDirectBlock, FractalHeapHeader, FractalIndirectBlock, HeapId, HugeId,
    RootBlock,
};
use h5_format::heap::global::{GlobalHeapCollection, GlobalHeapId};
use h5_format::{FormatError, UNDEFINED_ADDRESS};
use h5_metacache::MetadataKind as K;

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::meta::Load;

/// Deeper than any real tree: a damaged file with a cycle stops here.
const MAX_DEPTH: usize = 64;

fn corrupt(structure: &'static str, address: u64, reason: &str) -> Error {
    Error::Format(FormatError::Corrupted {
        structure,
        address,
        reason: reason.into(),
    })
}

// ---------------------------------------------------------------------------------------------
// Version 2 B-trees.
// ---------------------------------------------------------------------------------------------

/// The header of the v2 B-tree at `addr`.
pub(crate) fn btree2_header(file: &FileShared, addr: u64) -> Result<Arc<Btree2Header>> {
    let sizes = file.sizes;
    file.load(
        K::BTreeV2Header,
        addr,
        Load::exact(Btree2Header::encoded_len(sizes), move |b| {
            Btree2Header::decode(b, sizes, addr)
        }),
    )
}

/// Every record of the v2 B-tree at `addr`, in key order.
pub(crate) fn btree2_records(
    file: &FileShared,
    addr: u64,
    ctx: RecordContext,
) -> Result<Vec<Record>> {
    let hdr = btree2_header(file, addr)?;
    let mut out = Vec::new();
    if hdr.root.address == UNDEFINED_ADDRESS || hdr.root.records == 0 && hdr.depth == 0 {
        return Ok(out);
    }
    btree2_walk(file, &hdr, hdr.root, hdr.depth, ctx, &mut out, 0)?;
    Ok(out)
}

/// The node `ptr` points to, at `depth` (0: a leaf).
fn btree2_node(
    file: &FileShared,
    hdr: &Arc<Btree2Header>,
    ptr: h5_format::btree2::ChildPointer,
    depth: u16,
    ctx: RecordContext,
) -> Result<Arc<Btree2Node>> {
    let h = Arc::clone(hdr);
    let addr = ptr.address;
    let kind = if depth == 0 {
        K::BTreeV2Leaf
    } else {
        K::BTreeV2Internal
    };
    file.load(
        kind,
        addr,
        Load::exact(hdr.node_len(), move |b| {
            Btree2Node::decode(b, &h, depth, ptr.records, &ctx, addr)
        }),
    )
}

fn btree2_walk(
    file: &FileShared,
    hdr: &Arc<Btree2Header>,
    ptr: h5_format::btree2::ChildPointer,
    depth: u16,
    ctx: RecordContext,
    out: &mut Vec<Record>,
    level: usize,
) -> Result<()> {
    if level > MAX_DEPTH {
        return Err(corrupt("v2 B-tree", ptr.address, "tree too deep"));
    }
    let node = btree2_node(file, hdr, ptr, depth, ctx)?;
    if depth == 0 {
        out.extend(node.records.iter().cloned());
        return Ok(());
    }
    // In-order: child 0, record 0, child 1, record 1, ..., child n.
    for (i, child) in node.children.iter().enumerate() {
        btree2_walk(file, hdr, *child, depth - 1, ctx, out, level + 1)?;
        if let Some(r) = node.records.get(i) {
            out.push(r.clone());
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Fractal heaps.
// ---------------------------------------------------------------------------------------------

/// The header of the fractal heap at `addr`.
pub(crate) fn fractal_header(file: &FileShared, addr: u64) -> Result<Arc<FractalHeapHeader>> {
    let sizes = file.sizes;
    file.load(
        K::FractalHeapHeader,
        addr,
        Load::sized(
            256,
            move |b| FractalHeapHeader::total_len(b, sizes, addr),
            move |b| FractalHeapHeader::decode(b, sizes, addr),
        ),
    )
}

/// The object with heap ID `id` in the heap `hdr`.
pub(crate) fn fractal_object(
    file: &FileShared,
    hdr: &Arc<FractalHeapHeader>,
    id: &[u8],
) -> Result<Vec<u8>> {
    match HeapId::decode(id, hdr)? {
        HeapId::Tiny(b) => Ok(b.to_vec()),
        HeapId::Managed { offset, len } => managed_object(file, hdr, offset, len),
        HeapId::Huge(HugeId::Direct { address, len }) => raw_block(file, address, len),
        HeapId::Huge(HugeId::BtreeKey(key)) => {
            let recs =
                btree2_records(file, hdr.huge_btree_address, RecordContext::new(file.sizes))?;
            for r in recs {
                match r {
                    Record::HugeIndirect {
                        address,
                        length,
                        id,
                    } if id == key => return raw_block(file, address, length),
                    Record::HugeIndirectFiltered { id, .. } if id == key => {
                        return Err(Error::Unsupported("filtered huge heap objects".into()));
                    }
                    _ => {}
                }
            }
            Err(corrupt(
                "fractal heap",
                hdr.address,
                "huge object id not found in its B-tree",
            ))
        }
        HeapId::Huge(HugeId::DirectFiltered { .. }) => {
            Err(Error::Unsupported("filtered huge heap objects".into()))
        }
    }
}

fn raw_block(file: &FileShared, address: u64, len: u64) -> Result<Vec<u8>> {
    let n = usize::try_from(len).map_err(|_| corrupt("heap object", address, "too large"))?;
    let v: Arc<Vec<u8>> = file.load(
        K::FractalHeapDirectBlock,
        address,
        Load::exact(n, |b| Ok(b.to_vec())),
    )?;
    Ok(v.as_ref().clone())
}

fn managed_object(
    file: &FileShared,
    hdr: &Arc<FractalHeapHeader>,
    offset: u64,
    len: u64,
) -> Result<Vec<u8>> {
    if hdr.is_filtered() {
        return Err(Error::Unsupported("fractal heaps with I/O filters".into()));
    }
    let (mut addr, mut block_size, mut direct) = match hdr.root() {
        RootBlock::Empty => {
            return Err(corrupt(
                "fractal heap",
                hdr.address,
                "object in an empty heap",
            ));
        }
        RootBlock::Direct { address, size, .. } => (address, size, true),
        RootBlock::Indirect { address, rows } => (address, u64::from(rows), false),
    };
    let mut iblock_offset = 0u64;
    for _ in 0..MAX_DEPTH {
        if direct {
            let h = Arc::clone(hdr);
            let size = usize::try_from(block_size)
                .map_err(|_| corrupt("fractal heap", addr, "block too large"))?;
            let at = addr;
            let block: Arc<FractalDirectBlock> = file.load(
                K::FractalHeapDirectBlock,
                addr,
                Load::exact(size, move |b| {
                    FractalDirectBlock::decode(b, &h, at, block_size)
                }),
            )?;
            return Ok(block.object(offset, len)?.to_vec());
        }
        let rows = u16::try_from(block_size)
            .map_err(|_| corrupt("fractal heap", addr, "too many rows"))?;
        let h = Arc::clone(hdr);
        let at = addr;
        let iblock: Arc<FractalIndirectBlock> = file.load(
            K::FractalHeapIndirectBlock,
            addr,
            Load::exact(hdr.indirect_block_len(rows), move |b| {
                FractalIndirectBlock::decode(b, &h, at, rows)
            }),
        )?;
        let loc = hdr.table.locate(iblock_offset, rows, offset)?;
        let child = iblock
            .child_address(loc.entry)
            .filter(|&a| a != UNDEFINED_ADDRESS)
            .ok_or_else(|| corrupt("fractal heap", addr, "object in an unallocated block"))?;
        addr = child;
        iblock_offset = loc.block_offset;
        match loc.kind {
            ChildKind::Direct => {
                block_size = loc.block_size;
                direct = true;
            }
            ChildKind::Indirect { rows } => {
                block_size = u64::from(rows);
                direct = false;
            }
        }
    }
    Err(corrupt("fractal heap", hdr.address, "heap too deep"))
}

// ---------------------------------------------------------------------------------------------
// Global heap.
// ---------------------------------------------------------------------------------------------

/// The object `id` of a global heap collection (variable-length data).
pub(crate) fn global_object(file: &FileShared, id: GlobalHeapId) -> Result<Vec<u8>> {
    let sizes = file.sizes;
    let addr = id.collection_address;
    let col: Arc<GlobalHeapCollection> = file.load(
        K::GlobalHeapCollection,
        addr,
        crate::write::gheap::collection_load(sizes, addr),
    )?;
    col.get(id.index).map(<[u8]>::to_vec).ok_or_else(|| {
        corrupt(
            "global heap collection",
            addr,
            "variable-length data refers to a missing object",
        )
    })
}

/// The records of the v2 B-tree at `addr` whose key compares `Equal` under `cmp` (records are
/// in ascending key order; `cmp(record)` says how the record's key compares to the one sought).
/// Visits only the nodes on the way to the matching range.
pub(crate) fn btree2_find(
    file: &FileShared,
    addr: u64,
    ctx: RecordContext,
    cmp: &dyn Fn(&Record) -> std::cmp::Ordering,
) -> Result<Vec<Record>> {
    let hdr = btree2_header(file, addr)?;
    let mut out = Vec::new();
    if hdr.root.address == UNDEFINED_ADDRESS || hdr.root.records == 0 && hdr.depth == 0 {
        return Ok(out);
    }
    btree2_search(file, &hdr, hdr.root, hdr.depth, ctx, cmp, &mut out, 0)?;
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn btree2_search(
    file: &FileShared,
    hdr: &Arc<Btree2Header>,
    ptr: h5_format::btree2::ChildPointer,
    depth: u16,
    ctx: RecordContext,
    cmp: &dyn Fn(&Record) -> std::cmp::Ordering,
    out: &mut Vec<Record>,
    level: usize,
) -> Result<()> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    if level > MAX_DEPTH {
        return Err(corrupt("v2 B-tree", ptr.address, "tree too deep"));
    }
    let node = btree2_node(file, hdr, ptr, depth, ctx)?;
    if depth == 0 {
        out.extend(node.records.iter().filter(|r| cmp(r) == Equal).cloned());
        return Ok(());
    }
    // Child i holds keys between record i-1 and record i.
    for (i, r) in node.records.iter().enumerate() {
        match cmp(r) {
            // The record's key is below the one sought: everything left of it is too.
            Less => continue,
            Equal => {
                if let Some(c) = node.children.get(i) {
                    btree2_search(file, hdr, *c, depth - 1, ctx, cmp, out, level + 1)?;
                }
                out.push(r.clone());
            }
            Greater => {
                if let Some(c) = node.children.get(i) {
                    btree2_search(file, hdr, *c, depth - 1, ctx, cmp, out, level + 1)?;
                }
                return Ok(());
            }
        }
    }
    if let Some(c) = node.children.get(node.records.len()) {
        btree2_search(file, hdr, *c, depth - 1, ctx, cmp, out, level + 1)?;
    }
    Ok(())
}

/// The messages of a dense storage (links or attributes): every record of the name-index v2
/// B-tree at `index` names, through its heap ID, a message of type `kind` in the fractal heap
/// at `heap`. `heap_id` picks the ID out of a record (other records are skipped).
pub(crate) fn dense_messages(
    file: &FileShared,
    heap: u64,
    index: u64,
    kind: u16,
    heap_id: impl Fn(&Record) -> Option<Vec<u8>>,
) -> Result<Vec<h5_format::message::Message>> {
    let hdr = fractal_header(file, heap)?;
    let mut out = Vec::new();
    for r in btree2_records(file, index, RecordContext::new(file.sizes))? {
        if let Some(id) = heap_id(&r) {
            let bytes = fractal_object(file, &hdr, &id)?;
            out.push(h5_format::message::decode_message(
                kind, 0, &bytes, file.sizes, heap,
            )?);
        }
    }
    Ok(out)
}

/// The file's shared object header message table, if it has one (found through the superblock
/// extension's shared message table message; looked up once).
pub(crate) fn sohm_table(file: &FileShared) -> Result<Option<Arc<h5_format::sohm::SohmTable>>> {
    if let Some(t) = file.sohm.lock().map_err(|_| Error::Poisoned)?.as_ref() {
        return Ok(t.clone());
    }
    let ext = file.superblock.extension_address;
    let table = if ext == UNDEFINED_ADDRESS {
        None
    } else {
        let oh = crate::object::ObjectHeader::load(file, ext)?;
        match oh.find(|m| match m {
            h5_format::message::Message::SharedMessageTable(t) => Some(*t),
            _ => None,
        }) {
            None => None,
            Some(t) => {
                let sizes = file.sizes;
                let n = usize::from(t.index_count);
                let at = t.table_address;
                let table: Arc<h5_format::sohm::SohmTable> = file.load(
                    K::SharedMessageTable,
                    at,
                    Load::exact(
                        h5_format::sohm::SohmTable::encoded_len(sizes, n),
                        move |b| h5_format::sohm::SohmTable::decode(b, sizes, at, n),
                    ),
                )?;
                Some(table)
            }
        }
    };
    *file.sohm.lock().map_err(|_| Error::Poisoned)? = Some(table.clone());
    Ok(table)
}
