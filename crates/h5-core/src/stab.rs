//! Old-style groups (the earliest format: a symbol table message naming a version 1 B-tree of
//! symbol table nodes and a local heap of names), read and changed in place through the
//! metadata cache: lookup by name, listing in name order, inserting and removing links, and
//! deleting the whole group. libhdf5's `H5G_stab` rules: a new group's heap is sized for four
//! names of eight characters and first holds the empty name at offset 0; a link's name goes
//! into the heap before its soft-link value; a removed link's value and name leave the heap.

use h5_format::btree1::NodeType;
use h5_format::heap::local::LOCAL_HEAP_ALIGN;
use h5_format::symbol_node::{ScratchPad, SymbolTableEntry};
use h5_format::{Sizes, UNDEFINED_ADDRESS};

use crate::access::CacheAccess;
use crate::btree1::{self, Tree, group};
use crate::error::{Error, Result};
use crate::lheap::LocalHeap;

/// libhdf5's group-info estimates for a new group's heap: entries and name length.
const ESTIMATED_ENTRIES: u64 = 4;
const ESTIMATED_NAME_LEN: u64 = 8;

/// The K values of a file's group trees.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GroupKs {
    /// Symbol table node K (entries per node: twice this).
    pub(crate) leaf: u16,
    /// Group B-tree K (children per node: twice this).
    pub(crate) internal: u16,
}

/// Where one link of an old-style group points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// An object header; `scratch` caches a child group's symbol table.
    Hard {
        /// Relative object header address.
        addr: u64,
        /// The entry's scratch pad.
        scratch: ScratchPad,
    },
    /// A soft link's path.
    Soft(Vec<u8>),
}

/// One link of an old-style group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StabLink {
    /// The link's name.
    pub(crate) name: Vec<u8>,
    /// Its target.
    pub(crate) target: Target,
}

/// The structures of one old-style group (its symbol table message's addresses).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SymbolTable {
    /// Relative address of the B-tree's root node (never moves).
    pub(crate) btree: u64,
    /// Relative address of the local heap's prefix (never moves).
    pub(crate) heap: u64,
}

/// libhdf5's size hint for a new group's heap (`H5G__stab_create`): the empty name, the
/// estimated names (each padded to the alignment) and one free block.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "constants and a 1-byte size"
)]
fn heap_hint(sizes: Sizes) -> u64 {
    let align = LOCAL_HEAP_ALIGN as u64;
    align
        + ESTIMATED_ENTRIES * (ESTIMATED_NAME_LEN + 1).next_multiple_of(align)
        + 2 * u64::from(sizes.length)
}

fn with_nul(bytes: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(bytes.len().saturating_add(1));
    v.extend_from_slice(bytes);
    v.push(0);
    v
}

impl SymbolTable {
    /// The symbol table of the group whose header is `oh`, if it is an old-style group.
    pub(crate) fn of(oh: &crate::object::ObjectHeader) -> Option<SymbolTable> {
        oh.find(|m| match m {
            h5_format::message::Message::SymbolTable(s) => Some(SymbolTable {
                btree: s.btree_address,
                heap: s.heap_address,
            }),
            _ => None,
        })
    }

    fn tree(self, ks: GroupKs) -> Tree {
        Tree {
            root: self.btree,
            k: ks.internal,
            node_type: NodeType::Group,
            rank_plus_one: 0,
        }
    }

    fn local_heap(self) -> LocalHeap {
        LocalHeap { addr: self.heap }
    }

    fn leaves(ks: GroupKs) -> group::Leaves {
        group::Leaves { k: ks.leaf }
    }

    /// A new, empty group's structures: the B-tree root first, then the heap holding the empty
    /// name (the order libhdf5 allocates them in).
    pub(crate) fn create(c: &mut CacheAccess, ks: GroupKs) -> Result<SymbolTable> {
        let tree = btree1::create(c, &group::Walk, ks.internal, NodeType::Group, 0)?;
        let heap = LocalHeap::create(c, heap_hint(c.sizes))?;
        let empty = heap.insert(c, &[0])?;
        if empty != 0 {
            return Err(Error::Unsupported(
                "a new group heap must hold the empty name at offset 0".into(),
            ));
        }
        Ok(SymbolTable {
            btree: tree.root,
            heap: heap.addr,
        })
    }

    fn link(self, c: &mut CacheAccess, name: Vec<u8>, e: &SymbolTableEntry) -> Result<StabLink> {
        let target = match e.scratch {
            ScratchPad::SoftLink { link_value_offset } => {
                Target::Soft(self.local_heap().string(c, u64::from(link_value_offset))?)
            }
            scratch => Target::Hard {
                addr: e.object_header_address,
                scratch,
            },
        };
        Ok(StabLink { name, target })
    }

    /// The link `name`, if the group has it: one descent of the B-tree.
    pub(crate) fn find(
        self,
        c: &mut CacheAccess,
        ks: GroupKs,
        name: &[u8],
    ) -> Result<Option<StabLink>> {
        let hdr = self.local_heap().header(c)?;
        let mut find = group::Find::new(name, hdr, Self::leaves(ks));
        btree1::find(c, &self.tree(ks), &mut find)?;
        match find.found {
            Some(e) => Ok(Some(self.link(c, name.to_vec(), &e)?)),
            None => Ok(None),
        }
    }

    /// Every link, in name order.
    pub(crate) fn links(self, c: &mut CacheAccess, ks: GroupKs) -> Result<Vec<StabLink>> {
        let leaves = Self::leaves(ks);
        let mut out = Vec::new();
        btree1::visit::<group::Walk>(c, &self.tree(ks), &mut |c, _, child, _| {
            let node = leaves.read(c, child)?;
            for e in &node.entries {
                let name = self.local_heap().string(c, e.link_name_offset)?;
                out.push(self.link(c, name, e)?);
            }
            Ok(true)
        })?;
        Ok(out)
    }

    /// Adds the link `name` → `target`; an existing name is an error (found before anything
    /// changes).
    pub(crate) fn insert(
        self,
        c: &mut CacheAccess,
        ks: GroupKs,
        name: &[u8],
        target: &Target,
    ) -> Result<()> {
        let heap = self.local_heap();
        let hdr = heap.header(c)?;
        let make = move |c: &mut CacheAccess| -> Result<SymbolTableEntry> {
            let name_at = heap.insert(c, &with_nul(name))?;
            Ok(match target {
                Target::Hard { addr, scratch } => SymbolTableEntry {
                    link_name_offset: name_at,
                    object_header_address: *addr,
                    scratch: *scratch,
                },
                Target::Soft(path) => {
                    let at = heap.insert(c, &with_nul(path))?;
                    SymbolTableEntry {
                        link_name_offset: name_at,
                        object_header_address: UNDEFINED_ADDRESS,
                        scratch: ScratchPad::SoftLink {
                            link_value_offset: u32::try_from(at).map_err(|_| {
                                Error::Unsupported("a soft link value past 4 GiB of heap".into())
                            })?,
                        },
                    }
                }
            })
        };
        let mut insert = group::Insert::new(name, hdr, Self::leaves(ks), Box::new(make));
        btree1::insert(c, &self.tree(ks), &mut insert)
    }

    /// Takes the link `name` out (its name and soft-link value leave the heap); returns it, or
    /// `None` when the group has no such link.
    pub(crate) fn remove(
        self,
        c: &mut CacheAccess,
        ks: GroupKs,
        name: &[u8],
    ) -> Result<Option<StabLink>> {
        let heap = self.local_heap();
        let hdr = heap.header(c)?;
        let mut rm = group::Remove::new(name, heap, hdr, Self::leaves(ks));
        btree1::remove(c, &self.tree(ks), &mut rm)?;
        Ok(rm.removed.map(|e| StabLink {
            name: name.to_vec(),
            target: match (e.scratch, rm.soft) {
                (ScratchPad::SoftLink { .. }, Some(p)) => Target::Soft(p),
                (scratch, _) => Target::Hard {
                    addr: e.object_header_address,
                    scratch,
                },
            },
        }))
    }

    /// Deletes the group's structures: every symbol table node and B-tree node, then the heap.
    /// Returns the links it held (their targets are the caller's to release).
    pub(crate) fn delete(self, c: &mut CacheAccess, ks: GroupKs) -> Result<Vec<StabLink>> {
        let leaves = Self::leaves(ks);
        let mut out = Vec::new();
        btree1::delete::<group::Walk>(c, &self.tree(ks), &mut |c, _, child, _| {
            let node = leaves.read(c, child)?;
            for e in &node.entries {
                let name = self.local_heap().string(c, e.link_name_offset)?;
                out.push(self.link(c, name, e)?);
            }
            leaves.delete(c, child)
        })?;
        self.local_heap().delete(c)?;
        Ok(out)
    }
}
