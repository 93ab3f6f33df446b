//! The group kind of version 1 B-tree and its leaves, symbol table nodes (`SNOD`): keys are
//! offsets of names in the group's local heap, key `i + 1` being the last name of child `i`
//! (the critical key is the right one); inserts always descend to an existing node (libhdf5's
//! `H5G_node` class: follow the minimum and maximum branches). A full symbol table node splits
//! in half when an entry is added (`H5G__node_insert`); a node whose last entry is removed is
//! freed and leaves the tree (`H5G__node_remove`).

use std::cmp::Ordering;
use std::sync::Arc;

use h5_format::btree1::Keys;
use h5_format::heap::local::LocalHeapHeader;
use h5_format::symbol_node::{ScratchPad, SymbolTableEntry, SymbolTableNode};
use h5_metacache::MetadataKind as K;

use super::{Class, Critical, Ins, NewNode};
use crate::access::CacheAccess;
use crate::error::{Error, Result};
use crate::lheap::{self, LocalHeap};
use crate::meta::{Decoded, Load};

/// The symbol table node K of the file (nodes hold `2K` entries).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Leaves {
    /// Group leaf node K.
    pub(crate) k: u16,
}

impl Leaves {
    /// Entries a node holds at most: `2K`.
    #[allow(clippy::arithmetic_side_effects, reason = "K is a u16")]
    fn capacity(self) -> usize {
        2 * usize::from(self.k)
    }

    fn len(self, c: &CacheAccess) -> usize {
        SymbolTableNode::node_len(c.sizes, self.k)
    }

    fn load(self, c: &CacheAccess, addr: u64) -> Load {
        let sizes = c.sizes;
        let k = self.k;
        Load::codec(
            self.len(c),
            move |b| SymbolTableNode::decode(b, sizes, addr),
            move |n: &SymbolTableNode| n.encode(sizes, k),
        )
    }

    /// The symbol table node at `addr`.
    pub(crate) fn read(self, c: &mut CacheAccess, addr: u64) -> Result<Arc<SymbolTableNode>> {
        if self.k == 0 {
            return Err(Error::Format(h5_format::FormatError::Corrupted {
                structure: "symbol table node",
                address: addr,
                reason: "group leaf node K of 0".into(),
            }));
        }
        let load = self.load(c, addr);
        let node: Arc<SymbolTableNode> = c.read(K::SymbolTableNode, addr, &load)?;
        if node.entries.len() > self.capacity() {
            return Err(Error::Format(h5_format::FormatError::Corrupted {
                structure: "symbol table node",
                address: addr,
                reason: format!(
                    "{} entries in a node of at most {}",
                    node.entries.len(),
                    self.capacity()
                ),
            }));
        }
        Ok(node)
    }

    fn write(self, c: &mut CacheAccess, addr: u64, node: SymbolTableNode) -> Result<()> {
        let sizes = c.sizes;
        let k = self.k;
        let entry = Decoded::writable(self.len(c), node, move |n: &SymbolTableNode| {
            n.encode(sizes, k)
        });
        c.put(K::SymbolTableNode, addr, entry)
    }

    /// A new, empty node (allocated and put into the cache).
    fn create(self, c: &mut CacheAccess) -> Result<u64> {
        let addr = c.allocate(self.len(c) as u64)?;
        self.write(c, addr, SymbolTableNode { entries: vec![] })?;
        Ok(addr)
    }

    /// Deletes the node at `addr` (out of the cache, its space freed).
    pub(crate) fn delete(self, c: &mut CacheAccess, addr: u64) -> Result<()> {
        let len = self.len(c) as u64;
        c.delete(K::SymbolTableNode, addr, len)
    }
}

/// A name sought in a group: what every group request compares keys and entries with.
struct Name<'a> {
    name: &'a [u8],
    heap: LocalHeapHeader,
}

impl Name<'_> {
    /// How the name sought compares with the name at heap offset `at`.
    fn cmp_at(&self, c: &mut CacheAccess, at: u64) -> Result<Ordering> {
        Ok(self.name.cmp(&lheap::string(c, &self.heap, at)?[..]))
    }

    /// libhdf5's `H5G__node_cmp3`: left of `lt` when not above it, right of `rt` when above.
    fn cmp3(&self, c: &mut CacheAccess, lt: u64, rt: u64) -> Result<Ordering> {
        if self.cmp_at(c, lt)? != Ordering::Greater {
            Ok(Ordering::Less)
        } else if self.cmp_at(c, rt)? == Ordering::Greater {
            Ok(Ordering::Greater)
        } else {
            Ok(Ordering::Equal)
        }
    }

    /// Binary search of a node's entries: the index where the name is, or where it would go.
    fn position(
        &self,
        c: &mut CacheAccess,
        node: &SymbolTableNode,
    ) -> Result<Result<usize, usize>> {
        let (mut lo, mut hi) = (0, node.entries.len());
        while let Some(entry) = node.entries.get(lo..hi).and_then(|e| e.get(e.len() / 2)) {
            let mid = lo.midpoint(hi);
            match self.cmp_at(c, entry.link_name_offset)? {
                Ordering::Equal => return Ok(Ok(mid)),
                Ordering::Less => hi = mid,
                // mid < hi: no overflow.
                Ordering::Greater => lo = mid.saturating_add(1),
            }
        }
        Ok(Err(lo))
    }
}

/// The key side of the group kind (shared by every group request).
macro_rules! group_kind {
    () => {
        type Key = u64;
        const FOLLOW_MIN: bool = true;
        const FOLLOW_MAX: bool = true;
        const CRITICAL: Critical = Critical::Right;

        fn keys(keys: &Keys) -> Option<&Vec<u64>> {
            match keys {
                Keys::Group(k) => Some(k),
                Keys::RawData(_) => None,
            }
        }

        fn keys_mut(keys: &mut Keys) -> Option<&mut Vec<u64>> {
            match keys {
                Keys::Group(k) => Some(k),
                Keys::RawData(_) => None,
            }
        }

        fn wrap(keys: Vec<u64>) -> Keys {
            Keys::Group(keys)
        }

        /// The empty name, which every group heap holds at offset 0.
        fn empty_key(&self) -> u64 {
            0
        }
    };
}

/// The group kind without a request, for whole-tree walks and new trees.
pub(crate) struct Walk;

impl Class for Walk {
    group_kind!();

    fn cmp3(&mut self, _: &mut CacheAccess, _: &u64, _: &u64) -> Result<Ordering> {
        Err(Error::Unsupported("a search without a name".into()))
    }
}

/// Looks up one name (libhdf5's `H5G__node_found`).
pub(crate) struct Find<'a> {
    name: Name<'a>,
    leaves: Leaves,
    /// The entry found.
    pub(crate) found: Option<SymbolTableEntry>,
}

impl<'a> Find<'a> {
    /// A lookup of `name` in a group whose heap has header `heap`.
    pub(crate) fn new(name: &'a [u8], heap: LocalHeapHeader, leaves: Leaves) -> Self {
        Find {
            name: Name { name, heap },
            leaves,
            found: None,
        }
    }
}

impl Class for Find<'_> {
    group_kind!();

    fn cmp3(&mut self, c: &mut CacheAccess, lt: &u64, rt: &u64) -> Result<Ordering> {
        self.name.cmp3(c, *lt, *rt)
    }

    fn found(&mut self, c: &mut CacheAccess, child: u64, _: &u64) -> Result<bool> {
        let node = self.leaves.read(c, child)?;
        if let Ok(i) = self.name.position(c, &node)? {
            self.found = node.entries.get(i).copied();
            return Ok(self.found.is_some());
        }
        Ok(false)
    }
}

/// Makes the entry of a link being inserted, once its name is known to be new: puts its name
/// (and soft-link value) into the heap, as libhdf5's `H5G__ent_convert` does.
pub(crate) type MakeEntry<'a> = Box<dyn FnMut(&mut CacheAccess) -> Result<SymbolTableEntry> + 'a>;

/// Inserts one link (libhdf5's `H5G__node_insert`).
pub(crate) struct Insert<'a> {
    name: Name<'a>,
    leaves: Leaves,
    entry: MakeEntry<'a>,
}

impl<'a> Insert<'a> {
    /// An insert of the link `name` into a group whose heap has header `heap`; `entry` makes
    /// the link's entry when its place is found.
    pub(crate) fn new(
        name: &'a [u8],
        heap: LocalHeapHeader,
        leaves: Leaves,
        entry: MakeEntry<'a>,
    ) -> Self {
        Insert {
            name: Name { name, heap },
            leaves,
            entry,
        }
    }
}

impl Class for Insert<'_> {
    group_kind!();

    fn cmp3(&mut self, c: &mut CacheAccess, lt: &u64, rt: &u64) -> Result<Ordering> {
        self.name.cmp3(c, *lt, *rt)
    }

    /// A new, empty symbol table node for the first entry (its keys the empty name).
    fn new_node(
        &mut self,
        c: &mut CacheAccess,
        _: NewNode,
        lt: &mut u64,
        rt: &mut u64,
    ) -> Result<u64> {
        *lt = 0;
        *rt = 0;
        self.leaves.create(c)
    }

    fn insert(
        &mut self,
        c: &mut CacheAccess,
        child: u64,
        _lt: &mut u64,
        _lt_changed: &mut bool,
        md: &mut u64,
        rt: &mut u64,
        rt_changed: &mut bool,
    ) -> Result<(Ins, u64)> {
        let mut node = (*self.leaves.read(c, child)?).clone();
        let idx = match self.name.position(c, &node)? {
            Ok(_) => {
                return Err(Error::Exists(
                    String::from_utf8_lossy(self.name.name).into_owned(),
                ));
            }
            Err(i) => i,
        };
        let entry = (self.entry)(c)?;
        let k = usize::from(self.leaves.k);
        let name_at = entry.link_name_offset;
        if node.entries.len() >= self.leaves.capacity() {
            // Full: the upper half moves to a new node to the right.
            let right_addr = self.leaves.create(c)?;
            let mut right = SymbolTableNode {
                entries: node.entries.split_off(k),
            };
            // The left half's last name (K >= 1, checked on read).
            if let Some(last) = node.entries.last() {
                *md = last.link_name_offset;
            }
            match idx.checked_sub(k).filter(|&at| at > 0) {
                None => {
                    if idx == k {
                        *md = name_at;
                    }
                    node.entries.insert(idx, entry);
                }
                Some(at) => {
                    if at == k {
                        *rt = name_at;
                        *rt_changed = true;
                    }
                    right.entries.insert(at, entry);
                }
            }
            self.leaves.write(c, right_addr, right)?;
            self.leaves.write(c, child, node)?;
            return Ok((Ins::Right, right_addr));
        }
        if idx == node.entries.len() {
            *rt = name_at;
            *rt_changed = true;
        }
        node.entries.insert(idx, entry);
        self.leaves.write(c, child, node)?;
        Ok((Ins::Noop, child))
    }
}

/// Removes one entry, its name and any soft-link value leaving the heap (libhdf5's
/// `H5G__node_remove`).
pub(crate) struct Remove<'a> {
    name: Name<'a>,
    leaves: Leaves,
    heap: LocalHeap,
    /// The entry removed.
    pub(crate) removed: Option<SymbolTableEntry>,
    /// The value of the soft link removed.
    pub(crate) soft: Option<Vec<u8>>,
}

impl<'a> Remove<'a> {
    /// A removal of `name` from a group whose heap is `heap` (header `hdr`).
    pub(crate) fn new(
        name: &'a [u8],
        heap: LocalHeap,
        hdr: LocalHeapHeader,
        leaves: Leaves,
    ) -> Self {
        Remove {
            name: Name { name, heap: hdr },
            leaves,
            heap,
            removed: None,
            soft: None,
        }
    }
}

impl Class for Remove<'_> {
    group_kind!();

    fn cmp3(&mut self, c: &mut CacheAccess, lt: &u64, rt: &u64) -> Result<Ordering> {
        self.name.cmp3(c, *lt, *rt)
    }

    fn remove(
        &mut self,
        c: &mut CacheAccess,
        child: u64,
        _lt: &mut u64,
        _lt_changed: &mut bool,
        rt: &mut u64,
        rt_changed: &mut bool,
    ) -> Result<Ins> {
        let mut node = (*self.leaves.read(c, child)?).clone();
        let Ok(idx) = self.name.position(c, &node)? else {
            return Ok(Ins::Absent);
        };
        let Some(&e) = node.entries.get(idx) else {
            return Ok(Ins::Absent);
        };
        if let ScratchPad::SoftLink { link_value_offset } = e.scratch {
            let at = u64::from(link_value_offset);
            let value = self.heap.string(c, at)?;
            self.heap.remove(c, at, stored_len(&value))?;
            self.soft = Some(value);
        }
        self.heap
            .remove(c, e.link_name_offset, stored_len(self.name.name))?;
        self.removed = Some(e);
        let n = node.entries.len();
        if n == 1 {
            self.leaves.delete(c, child)?;
            return Ok(Ins::Remove);
        }
        node.entries.remove(idx);
        if Some(idx) == n.checked_sub(1)
            && let Some(last) = node.entries.last()
        {
            *rt = last.link_name_offset;
            *rt_changed = true;
        }
        self.leaves.write(c, child, node)?;
        Ok(Ins::Noop)
    }
}

/// Bytes a string takes in the heap: its own and its terminator's.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "the length of a slice in memory is below u64::MAX"
)]
fn stored_len(s: &[u8]) -> u64 {
    s.len() as u64 + 1
}
