//! Old-style groups being written: the links live in a [`GroupTable`] (ordered by name, as the
//! B-tree orders them) and are laid out as a local heap, symbol table nodes and a v1 B-tree when
//! the file is flushed.
//!
//! Invariants: the B-tree's root node and the heap's header never move (the group's symbol
//! table message points at them); every other node and the heap's data segment are freed and
//! allocated again at each layout, so a layout reflects the table exactly.

use std::collections::BTreeMap;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree1::{BtreeV1Node, Keys, NodeType, node_len};
use h5_format::heap::local::{LocalHeapHeader, pack_names};
use h5_format::symbol_node::{ScratchPad, SymbolTableEntry, SymbolTableNode};
use h5_metacache::MetadataKind as K;

use crate::error::Result;
use crate::file::FileShared;
use crate::group::{LinkEntry, LinkValue};
use crate::meta::Decoded;
use crate::write::alloc::SpaceKind;
use crate::write::{drop_entry, put};

/// Group leaf node K (entries per symbol table node: twice this) written in new files.
pub(crate) const GROUP_LEAF_K: u16 = 4;
/// Group internal node K (children per B-tree node: twice this) written in new files.
pub(crate) const GROUP_INTERNAL_K: u16 = 16;

/// Where one link of an old-style group points.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    /// An object header; `scratch` caches a child group's symbol table.
    Hard { addr: u64, scratch: ScratchPad },
    /// A soft link's path.
    Soft(Vec<u8>),
}

/// The links of one old-style group and where its structures are.
#[derive(Debug)]
pub(crate) struct GroupTable {
    /// Relative address of the B-tree root (fixed).
    pub(crate) btree: u64,
    /// Relative address of the local heap header (fixed).
    pub(crate) heap: u64,
    /// The links by name.
    pub(crate) links: BTreeMap<Vec<u8>, Target>,
    /// The heap's data segment and every non-root node of the last layout: `(addr, len, kind)`.
    placed: Vec<(u64, u64, K)>,
    /// Changed since the last layout.
    pub(crate) dirty: bool,
    /// Symbol table node K (the file's: entries per node are twice this).
    leaf_k: u16,
    /// B-tree node K (the file's: children per node are twice this).
    internal_k: u16,
}

impl GroupTable {
    /// A new, empty group of `file` whose root node and heap header are at `btree` and `heap`.
    pub(crate) fn new(file: &FileShared, btree: u64, heap: u64) -> Self {
        let (leaf_k, internal_k) = file.group_ks();
        GroupTable {
            btree,
            heap,
            links: BTreeMap::new(),
            placed: Vec::new(),
            dirty: true,
            leaf_k,
            internal_k,
        }
    }

    /// The table of an existing group of `file` (B-tree root at `btree`, heap at `heap`): its
    /// links, and the structures a new layout replaces.
    pub(crate) fn load(file: &FileShared, btree: u64, heap: u64) -> Result<Self> {
        let (entries, placed) = crate::walk::symbol_table_with_nodes(file, btree, heap)?;
        let mut table = GroupTable::new(file, btree, heap);
        for (name, e) in entries {
            let target = match e.scratch {
                ScratchPad::SoftLink { link_value_offset } => Target::Soft(
                    crate::walk::local_heap_string(file, heap, u64::from(link_value_offset))?,
                ),
                scratch => Target::Hard {
                    addr: e.object_header_address,
                    scratch,
                },
            };
            table.links.insert(name, target);
        }
        table.placed = placed;
        table.dirty = false;
        Ok(table)
    }

    /// The links as the reader reports them, in name order.
    pub(crate) fn entries(&self) -> Vec<LinkEntry> {
        self.links.iter().map(|(n, t)| entry(n, t)).collect()
    }

    /// One link by name.
    pub(crate) fn find(&self, name: &str) -> Option<LinkEntry> {
        self.links
            .get_key_value(name.as_bytes())
            .map(|(n, t)| entry(n, t))
    }

    /// Frees the heap's data segment and every node but the root (before a new layout, or
    /// when the group is deleted).
    pub(crate) fn free(&mut self, file: &FileShared) -> Result<()> {
        for (addr, len, kind) in std::mem::take(&mut self.placed) {
            drop_entry(file, kind, addr, len)?;
        }
        Ok(())
    }

    /// Writes the table into the cache: heap, symbol table nodes, B-tree.
    pub(crate) fn lay_out(&mut self, file: &FileShared) -> Result<()> {
        let sizes = file.sizes;
        self.free(file)?;
        // Names, then soft-link values, in the heap.
        let mut strings: Vec<&[u8]> = self.links.keys().map(Vec::as_slice).collect();
        let soft: Vec<&[u8]> = self
            .links
            .values()
            .filter_map(|t| match t {
                Target::Soft(p) => Some(p.as_slice()),
                Target::Hard { .. } => None,
            })
            .collect();
        strings.extend(&soft);
        let (segment, offsets) = pack_names(&strings);
        let seg_len = segment.len() as u64;
        let seg_addr = file.allocate(SpaceKind::Meta, seg_len)?;
        self.placed.push((seg_addr, seg_len, K::LocalHeapDataBlock));
        put(
            file,
            K::LocalHeapDataBlock,
            seg_addr,
            Decoded::writable(segment.len(), segment, |s: &Vec<u8>| Ok(s.clone())),
        )?;
        let header = LocalHeapHeader {
            data_segment_size: seg_len,
            free_list_head: None,
            data_segment_address: seg_addr,
        };
        put(
            file,
            K::LocalHeapPrefix,
            self.heap,
            Decoded::writable(
                LocalHeapHeader::encoded_len(sizes),
                header,
                move |h: &LocalHeapHeader| Ok(h.encode(sizes)),
            ),
        )?;

        // Symbol table nodes of up to 2K entries, with the offset of each node's last name.
        let n = self.links.len();
        let mut soft_at = n;
        let mut entries = Vec::with_capacity(n);
        for (i, t) in self.links.values().enumerate() {
            let e = match t {
                Target::Hard { addr, scratch } => SymbolTableEntry {
                    link_name_offset: offsets[i],
                    object_header_address: *addr,
                    scratch: *scratch,
                },
                Target::Soft(_) => {
                    let off = offsets[soft_at];
                    soft_at += 1;
                    SymbolTableEntry {
                        link_name_offset: offsets[i],
                        object_header_address: UNDEFINED_ADDRESS,
                        scratch: ScratchPad::SoftLink {
                            link_value_offset: u32::try_from(off).map_err(|_| {
                                crate::Error::Unsupported("local heap over 4 GiB".into())
                            })?,
                        },
                    }
                }
            };
            entries.push(e);
        }
        let snod_len = SymbolTableNode::node_len(sizes, self.leaf_k) as u64;
        let mut level: Vec<(u64, u64)> = Vec::new(); // (child address, key after it)
        for chunk in entries.chunks(2 * usize::from(self.leaf_k)) {
            let addr = file.allocate(SpaceKind::Meta, snod_len)?;
            self.placed.push((addr, snod_len, K::SymbolTableNode));
            let last = chunk.last().map_or(0, |e| e.link_name_offset);
            let node = SymbolTableNode {
                entries: chunk.to_vec(),
            };
            let leaf_k = self.leaf_k;
            put(
                file,
                K::SymbolTableNode,
                addr,
                Decoded::writable(snod_len as usize, node, move |n: &SymbolTableNode| {
                    n.encode(sizes, leaf_k)
                }),
            )?;
            level.push((addr, last));
        }

        // B-tree levels up to a single root at the fixed address.
        let internal_k = self.internal_k;
        let fanout = 2 * usize::from(internal_k);
        let nlen = node_len(sizes, internal_k, NodeType::Group, 0)? as u64;
        let mut depth = 0u8;
        // `first_key` of the leftmost subtree is always the empty name at offset 0.
        loop {
            let groups: Vec<&[(u64, u64)]> = if level.is_empty() {
                vec![&[]]
            } else {
                level.chunks(fanout).collect()
            };
            let root = groups.len() == 1;
            let addrs: Vec<u64> = if root {
                vec![self.btree]
            } else {
                let mut v = Vec::with_capacity(groups.len());
                for _ in &groups {
                    let a = file.allocate(SpaceKind::Meta, nlen)?;
                    self.placed.push((a, nlen, K::BTreeV1Node));
                    v.push(a);
                }
                v
            };
            let mut next = Vec::with_capacity(groups.len());
            for (i, g) in groups.iter().enumerate() {
                let mut keys = vec![if i == 0 {
                    0
                } else {
                    groups[i - 1].last().map_or(0, |c| c.1)
                }];
                keys.extend(g.iter().map(|c| c.1));
                let node = BtreeV1Node {
                    node_type: NodeType::Group,
                    level: depth,
                    left_sibling: if i == 0 {
                        UNDEFINED_ADDRESS
                    } else {
                        addrs[i - 1]
                    },
                    right_sibling: addrs.get(i + 1).copied().unwrap_or(UNDEFINED_ADDRESS),
                    keys: Keys::Group(keys),
                    children: g.iter().map(|c| c.0).collect(),
                };
                let last = g.last().map_or(0, |c| c.1);
                put(
                    file,
                    K::BTreeV1Node,
                    addrs[i],
                    Decoded::writable(nlen as usize, node, move |n: &BtreeV1Node| {
                        n.encode(sizes, internal_k)
                    }),
                )?;
                next.push((addrs[i], last));
            }
            if root {
                break;
            }
            level = next;
            depth = depth.checked_add(1).ok_or_else(|| {
                crate::Error::Unsupported("group B-tree deeper than 255 levels".into())
            })?;
        }
        self.dirty = false;
        Ok(())
    }
}

fn entry(name: &[u8], t: &Target) -> LinkEntry {
    LinkEntry {
        name: String::from_utf8_lossy(name).into_owned(),
        creation_order: None,
        value: match t {
            Target::Hard { addr, .. } => LinkValue::Hard(*addr),
            Target::Soft(p) => LinkValue::Soft(String::from_utf8_lossy(p).into_owned()),
        },
    }
}
