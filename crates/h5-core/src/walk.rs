//! Walks of the multi-block structures (B-trees, heaps), each block loaded through the metadata
//! cache and decoded by `h5-format`.

use std::sync::Arc;

use h5_format::btree1::{BtreeV1Node, NodeType, node_len};
use h5_format::heap::global::{GlobalHeapCollection, GlobalHeapId};
use h5_format::heap::local::LocalHeapHeader;
use h5_format::symbol_node::{SymbolTableEntry, SymbolTableNode};
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
// Old-style groups: v1 B-tree of symbol table nodes, names in a local heap.
// ---------------------------------------------------------------------------------------------

/// A local heap's data segment.
pub(crate) fn local_heap(file: &FileShared, addr: u64) -> Result<(LocalHeapHeader, Arc<Vec<u8>>)> {
    let sizes = file.sizes;
    let hdr: Arc<LocalHeapHeader> = file.load(
        K::LocalHeapPrefix,
        addr,
        Load::exact(LocalHeapHeader::encoded_len(sizes), move |b| {
            LocalHeapHeader::decode(b, sizes, addr)
        }),
    )?;
    let len = usize::try_from(hdr.data_segment_size)
        .map_err(|_| corrupt("local heap", addr, "data segment too large"))?;
    let seg: Arc<Vec<u8>> = file.load(
        K::LocalHeapDataBlock,
        hdr.data_segment_address,
        Load::exact(len, |b| Ok(b.to_vec())),
    )?;
    Ok((*hdr, seg))
}

/// Every entry of an old-style group (its v1 B-tree at `btree`), with its name, in name order.
pub(crate) fn symbol_table(
    file: &FileShared,
    btree: u64,
    heap: u64,
) -> Result<Vec<(Vec<u8>, SymbolTableEntry)>> {
    Ok(symbol_table_with_nodes(file, btree, heap)?.0)
}

/// A symbol table entry and its name.
pub(crate) type NamedEntry = (Vec<u8>, SymbolTableEntry);

/// Where one structure of an old-style group lies: relative address, length and kind.
pub(crate) type Placement = (u64, u64, K);

/// [`symbol_table`], plus the placement of the heap's data segment, of every symbol table node
/// and of every B-tree node but the root (what a rewrite of the group frees).
pub(crate) fn symbol_table_with_nodes(
    file: &FileShared,
    btree: u64,
    heap: u64,
) -> Result<(Vec<NamedEntry>, Vec<Placement>)> {
    let sizes = file.sizes;
    let (hdr, seg) = local_heap(file, heap)?;
    let internal_k = file.superblock.group_internal_k.unwrap_or(16);
    let leaf_k = file.superblock.group_leaf_k.unwrap_or(4);
    let nlen = node_len(sizes, internal_k, NodeType::Group, 0)?;
    let snod_len = SymbolTableNode::node_len(sizes, leaf_k);
    let mut out = Vec::new();
    let mut placed = vec![(
        hdr.data_segment_address,
        hdr.data_segment_size,
        K::LocalHeapDataBlock,
    )];
    let mut stack = vec![(btree, 0usize)];
    while let Some((addr, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(corrupt("v1 B-tree", addr, "tree too deep (a cycle?)"));
        }
        let node: Arc<BtreeV1Node> = file.load(
            K::BTreeV1Node,
            addr,
            Load::exact(nlen, move |b| BtreeV1Node::decode(b, sizes, addr, None)),
        )?;
        if addr != btree {
            placed.push((addr, nlen as u64, K::BTreeV1Node));
        }
        if node.level > 0 {
            // Children in reverse so they pop in order.
            for &c in node.children.iter().rev() {
                stack.push((c, depth + 1));
            }
            continue;
        }
        for &snod_addr in &node.children {
            placed.push((snod_addr, snod_len as u64, K::SymbolTableNode));
            let snod: Arc<SymbolTableNode> = file.load(
                K::SymbolTableNode,
                snod_addr,
                Load::exact(snod_len, move |b| {
                    SymbolTableNode::decode(b, sizes, snod_addr)
                }),
            )?;
            for e in &snod.entries {
                let name = hdr.name_at(&seg, e.link_name_offset)?.to_vec();
                out.push((name, *e));
            }
        }
    }
    Ok((out, placed))
}

/// A string in an old-style group's local heap (soft-link values).
pub(crate) fn local_heap_string(file: &FileShared, heap: u64, offset: u64) -> Result<Vec<u8>> {
    let (hdr, seg) = local_heap(file, heap)?;
    Ok(hdr.name_at(&seg, offset)?.to_vec())
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
        Load::sized(
            4096,
            move |b| GlobalHeapCollection::needed_len(b, sizes, addr),
            move |b| GlobalHeapCollection::decode(b, sizes, addr),
        ),
    )?;
    col.get(id.index).map(<[u8]>::to_vec).ok_or_else(|| {
        corrupt(
            "global heap collection",
            addr,
            "variable-length data refers to a missing object",
        )
    })
}

/// The entry named `name` of an old-style group: descends the v1 B-tree by name (child `i`
/// holds the names after key `i` up to key `i + 1`), then searches the symbol table node.
pub(crate) fn symbol_table_find(
    file: &FileShared,
    btree: u64,
    heap: u64,
    name: &[u8],
) -> Result<Option<SymbolTableEntry>> {
    let sizes = file.sizes;
    let (hdr, seg) = local_heap(file, heap)?;
    let internal_k = file.superblock.group_internal_k.unwrap_or(16);
    let leaf_k = file.superblock.group_leaf_k.unwrap_or(4);
    let nlen = node_len(sizes, internal_k, NodeType::Group, 0)?;
    let snod_len = SymbolTableNode::node_len(sizes, leaf_k);
    let mut addr = btree;
    for _ in 0..=MAX_DEPTH {
        let at = addr;
        let node: Arc<BtreeV1Node> = file.load(
            K::BTreeV1Node,
            at,
            Load::exact(nlen, move |b| BtreeV1Node::decode(b, sizes, at, None)),
        )?;
        let h5_format::btree1::Keys::Group(keys) = &node.keys else {
            return Err(corrupt("v1 B-tree", at, "chunk node in a group tree"));
        };
        // First child whose upper key is >= name.
        let mut child = None;
        for (i, &c) in node.children.iter().enumerate() {
            let Some(&upper) = keys.get(i + 1) else { break };
            if name <= hdr.name_at(&seg, upper)? {
                child = Some(c);
                break;
            }
        }
        let Some(c) = child else { return Ok(None) };
        if node.level > 0 {
            addr = c;
            continue;
        }
        let snod: Arc<SymbolTableNode> = file.load(
            K::SymbolTableNode,
            c,
            Load::exact(snod_len, move |b| SymbolTableNode::decode(b, sizes, c)),
        )?;
        for e in &snod.entries {
            if hdr.name_at(&seg, e.link_name_offset)? == name {
                return Ok(Some(*e));
            }
        }
        return Ok(None);
    }
    Err(corrupt("v1 B-tree", btree, "tree too deep (a cycle?)"))
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
