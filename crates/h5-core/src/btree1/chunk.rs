//! The raw-data kind of version 1 B-tree: the chunk index of layout messages versions 1–3.
//! Keys are chunk keys (stored size, filter mask and the chunk's element offsets, with a last
//! offset for the element size); key `i` is chunk `i`'s own (the critical key is the left one);
//! an insert outside every key makes a new leaf child rather than descending (libhdf5's
//! `H5D_btree` class). The right key of the last chunk is one chunk past it in every dimension,
//! the element-size one included, as libhdf5 writes it.
//!
//! [`ChunkBtree`] serves both directions by scaled chunk coordinates: lookups descend from the
//! root through the metadata cache (a batch shares the nodes it has read), inserts and updates
//! and removals change the nodes in place.

use std::cmp::Ordering;
use std::sync::Arc;

use h5_format::btree1::{BtreeV1Node, ChunkKey, Keys, NodeType};

use super::{Class, Critical, Ins, NewNode, Tree};
use crate::access::{CacheAccess, CacheHandle};
use crate::error::{Error, Result};
use crate::layouts::ChunkRecord;

/// The key side of the chunk kind (shared by every chunk request, each holding the chunk it
/// concerns in `at`).
macro_rules! chunk_kind {
    () => {
        type Key = ChunkKey;
        const FOLLOW_MIN: bool = false;
        const FOLLOW_MAX: bool = false;
        const CRITICAL: Critical = Critical::Left;

        fn keys(keys: &Keys) -> Option<&Vec<ChunkKey>> {
            match keys {
                Keys::RawData(k) => Some(k),
                Keys::Group(_) => None,
            }
        }

        fn keys_mut(keys: &mut Keys) -> Option<&mut Vec<ChunkKey>> {
            match keys {
                Keys::RawData(k) => Some(k),
                Keys::Group(_) => None,
            }
        }

        fn wrap(keys: Vec<ChunkKey>) -> Keys {
            Keys::RawData(keys)
        }

        fn empty_key(&self) -> ChunkKey {
            self.at.empty_key()
        }

        fn cmp3(&mut self, _: &mut CacheAccess, lt: &ChunkKey, rt: &ChunkKey) -> Result<Ordering> {
            Ok(self.at.cmp3(lt, rt))
        }
    };
}

/// A chunk sought: its element offsets (the element-size offset 0) and the layout's chunk
/// dimensions (the element size last).
#[derive(Clone, Debug)]
struct At {
    offsets: Vec<u64>,
    dims: Arc<Vec<u64>>,
}

impl At {
    fn new(scaled: &[u64], dims: &Arc<Vec<u64>>) -> Result<At> {
        if scaled.len().checked_add(1) != Some(dims.len()) {
            return Err(Error::Invalid(format!(
                "chunk coordinates of rank {} for a layout of rank {}",
                scaled.len(),
                dims.len().saturating_sub(1)
            )));
        }
        let mut offsets = Vec::with_capacity(dims.len());
        for (s, d) in scaled.iter().zip(dims.iter()) {
            offsets.push(
                s.checked_mul(*d)
                    .ok_or_else(|| Error::Invalid("chunk offset overflows".into()))?,
            );
        }
        offsets.push(0);
        Ok(At {
            offsets,
            dims: Arc::clone(dims),
        })
    }

    fn empty_key(&self) -> ChunkKey {
        ChunkKey {
            chunk_size: 0,
            filter_mask: 0,
            offsets: vec![0; self.dims.len()],
        }
    }

    /// libhdf5's `H5D__btree_cmp3` (on element offsets, which order like scaled ones):
    /// right of the child when at or past `rt`, left of it when before `lt`.
    fn cmp3(&self, lt: &ChunkKey, rt: &ChunkKey) -> Ordering {
        let t = self.offsets.as_slice();
        let (l, r) = (lt.offsets.as_slice(), rt.offsets.as_slice());
        let right = match (t, r) {
            ([t0, t1], [r0, r1]) => t0 > r0 || (t0 == r0 && t1 >= r1),
            _ => t >= r,
        };
        let left = match (t, l) {
            ([t0, _], [l0, _]) => t0 < l0,
            _ => t < l,
        };
        if right {
            Ordering::Greater
        } else if left {
            Ordering::Less
        } else {
            Ordering::Equal
        }
    }

    fn is(&self, key: &ChunkKey) -> bool {
        key.offsets == self.offsets
    }

    /// libhdf5's `H5D__chunk_disjoint`: no dimension in which the two chunks overlap.
    fn disjoint(&self, key: &ChunkKey) -> bool {
        self.offsets
            .iter()
            .zip(&key.offsets)
            .zip(self.dims.iter())
            .any(|((a, b), d)| a.saturating_add(*d) <= *b || b.saturating_add(*d) <= *a)
    }

    /// The key of this chunk stored in `size` bytes with `mask`.
    fn key(&self, size: u32, mask: u32) -> ChunkKey {
        ChunkKey {
            chunk_size: size,
            filter_mask: mask,
            offsets: self.offsets.clone(),
        }
    }

    /// The key one chunk past this one in every dimension (a new last chunk's right key).
    fn next_key(&self) -> ChunkKey {
        ChunkKey {
            chunk_size: 0,
            filter_mask: 0,
            offsets: self
                .offsets
                .iter()
                .zip(self.dims.iter())
                .map(|(o, d)| o.saturating_add(*d))
                .collect(),
        }
    }
}

/// The chunk kind without a request, for whole-tree walks and new trees.
struct Walk {
    at: At,
}

impl Class for Walk {
    chunk_kind!();
}

/// Looks one chunk up.
struct Find {
    at: At,
    found: Option<(u64, u32, u32)>,
}

impl Class for Find {
    chunk_kind!();

    fn found(&mut self, _: &mut CacheAccess, child: u64, lt: &ChunkKey) -> Result<bool> {
        if self.at.is(lt) && lt.chunk_size > 0 {
            self.found = Some((child, lt.chunk_size, lt.filter_mask));
            return Ok(true);
        }
        Ok(false)
    }
}

/// Inserts one chunk, or changes its record (libhdf5's `H5D__btree_insert`).
struct Insert {
    at: At,
    addr: u64,
    size: u32,
    mask: u32,
}

impl Class for Insert {
    chunk_kind!();

    fn new_node(
        &mut self,
        _: &mut CacheAccess,
        op: NewNode,
        lt: &mut ChunkKey,
        rt: &mut ChunkKey,
    ) -> Result<u64> {
        *lt = self.at.key(self.size, self.mask);
        if op != NewNode::Left {
            *rt = self.at.next_key();
        }
        Ok(self.addr)
    }

    fn insert(
        &mut self,
        _: &mut CacheAccess,
        child: u64,
        lt: &mut ChunkKey,
        lt_changed: &mut bool,
        md: &mut ChunkKey,
        rt: &mut ChunkKey,
        _rt_changed: &mut bool,
    ) -> Result<(Ins, u64)> {
        if self.at.cmp3(lt, rt) == Ordering::Less {
            return Err(super::corrupt(child, "a chunk left of its leaf"));
        }
        if self.at.is(lt) && lt.chunk_size > 0 {
            if lt.chunk_size == self.size && lt.filter_mask == self.mask && child == self.addr {
                return Ok((Ins::Noop, child));
            }
            lt.chunk_size = self.size;
            lt.filter_mask = self.mask;
            *lt_changed = true;
            return Ok((Ins::Change, self.addr));
        }
        if self.at.disjoint(lt) {
            *md = self.at.key(self.size, self.mask);
            return Ok((Ins::Right, self.addr));
        }
        Err(super::corrupt(child, "chunk keys overlap"))
    }
}

/// Removes one chunk from the index (its space is the caller's to free).
struct Remove {
    at: At,
    removed: Option<(u64, u32, u32)>,
}

impl Class for Remove {
    chunk_kind!();

    fn remove(
        &mut self,
        _: &mut CacheAccess,
        child: u64,
        lt: &mut ChunkKey,
        _lt_changed: &mut bool,
        _rt: &mut ChunkKey,
        _rt_changed: &mut bool,
    ) -> Result<Ins> {
        if !self.at.is(lt) {
            return Ok(Ins::Absent);
        }
        self.removed = Some((child, lt.chunk_size, lt.filter_mask));
        Ok(Ins::Remove)
    }
}

/// A version 1 B-tree chunk index, reached through the metadata cache (which a file being
/// dropped still has, so its chunk cache can still insert chunks while it flushes).
#[derive(Clone, Debug)]
pub(crate) struct ChunkBtree {
    cache: CacheHandle,
    tree: Tree,
    /// Chunk dimensions with the element size last (the layout message's).
    dims: Arc<Vec<u64>>,
}

impl ChunkBtree {
    /// The index whose root node is at relative `root`, of a layout with chunk dimensions
    /// `dims` (the element size last), in a file whose chunk B-tree K is `k`.
    pub(crate) fn open(cache: CacheHandle, root: u64, k: u16, dims: Vec<u64>) -> Self {
        let rank_plus_one = dims.len();
        ChunkBtree {
            cache,
            tree: Tree {
                root,
                k,
                node_type: NodeType::RawData,
                rank_plus_one,
            },
            dims: Arc::new(dims),
        }
    }

    /// A new, empty index (its root node allocated and put into the cache).
    pub(crate) fn create(cache: CacheHandle, k: u16, dims: Vec<u64>) -> Result<Self> {
        let dims = Arc::new(dims);
        let walk = Walk {
            at: At::new(&vec![0; dims.len().saturating_sub(1)], &dims)?,
        };
        let tree = {
            let mut c = cache.lock()?;
            super::create(&mut c, &walk, k, NodeType::RawData, dims.len())?
        };
        Ok(ChunkBtree { cache, tree, dims })
    }

    /// Relative address of the root node.
    pub(crate) fn root(&self) -> u64 {
        self.tree.root
    }

    fn rank(&self) -> usize {
        self.dims.len().saturating_sub(1)
    }

    fn record(c: &CacheAccess, (child, size, mask): (u64, u32, u32)) -> Result<ChunkRecord> {
        Ok(ChunkRecord {
            addr: c.abs(child)?,
            size: u64::from(size),
            filter_mask: mask,
        })
    }

    /// The record of the chunk at each of `coords` (scaled coordinates), absolute addresses.
    /// Consecutive lookups share the nodes of the path they have in common (the batch keeps
    /// the last node read at each depth, nothing more).
    pub(crate) fn lookup(&self, coords: &[&[u64]]) -> Result<Vec<Option<ChunkRecord>>> {
        let mut c = self.cache.lock()?;
        let mut path: Vec<(u64, Arc<BtreeV1Node>)> = Vec::new();
        let mut out = Vec::with_capacity(coords.len());
        for scaled in coords {
            if scaled.len() != self.rank() {
                out.push(None);
                continue;
            }
            let mut find = Find {
                at: At::new(scaled, &self.dims)?,
                found: None,
            };
            self.descend(&mut c, &mut path, &mut find)?;
            out.push(match find.found {
                Some(f) => Some(Self::record(&c, f)?),
                None => None,
            });
        }
        Ok(out)
    }

    /// One lookup, reusing the nodes of `path` (the previous lookup's path, by depth) where
    /// this one passes through them, and leaving its own path there.
    fn descend(
        &self,
        c: &mut CacheAccess,
        path: &mut Vec<(u64, Arc<BtreeV1Node>)>,
        find: &mut Find,
    ) -> Result<()> {
        let t = &self.tree;
        let mut addr = t.root;
        let mut level = None;
        for depth in 0.. {
            let node = match path.get(depth) {
                Some((a, n)) if *a == addr => Arc::clone(n),
                _ => {
                    let n = t.read_at(c, addr, level)?;
                    path.truncate(depth);
                    path.push((addr, Arc::clone(&n)));
                    n
                }
            };
            let keys = super::keys_of::<Find>(&node, addr)?;
            let n = node.children.len();
            let (idx, cmp) = super::search(c, find, keys, n, Ordering::Greater, addr)?;
            if cmp != Ordering::Equal {
                return Ok(());
            }
            if node.level == 0 {
                find.found(
                    c,
                    super::child(&node, idx, addr)?,
                    super::key(keys, idx, addr)?,
                )?;
                return Ok(());
            }
            level = Some(super::below(&node, addr)?);
            addr = super::child(&node, idx, addr)?;
        }
        Ok(())
    }

    /// Inserts the chunk at `scaled`, or changes its record, to `record` (absolute address).
    pub(crate) fn insert(&self, scaled: &[u64], record: ChunkRecord) -> Result<()> {
        let size = u32::try_from(record.size)
            .map_err(|_| Error::Unsupported("a chunk of 4 GiB or more".into()))?;
        let mut c = self.cache.lock()?;
        let mut ins = Insert {
            at: At::new(scaled, &self.dims)?,
            addr: c.rel(record.addr)?,
            size,
            mask: record.filter_mask,
        };
        super::insert(&mut c, &self.tree, &mut ins)
    }

    /// Takes the chunk at `scaled` out of the index; returns its record (`None`: not indexed).
    pub(crate) fn remove(&self, scaled: &[u64]) -> Result<Option<ChunkRecord>> {
        let mut c = self.cache.lock()?;
        let mut rm = Remove {
            at: At::new(scaled, &self.dims)?,
            removed: None,
        };
        super::remove(&mut c, &self.tree, &mut rm)?;
        rm.removed.map(|r| Self::record(&c, r)).transpose()
    }

    /// Every chunk's scaled coordinates and record, in key order.
    #[cfg(test)]
    pub(crate) fn records(&self) -> Result<Vec<(Vec<u64>, ChunkRecord)>> {
        let mut c = self.cache.lock()?;
        let mut out = Vec::new();
        super::visit::<Walk>(&mut c, &self.tree, &mut |c, lt, child, _| {
            out.push(self.entry(c, lt, child)?);
            Ok(true)
        })?;
        Ok(out)
    }

    /// Deletes the index: every node, the root included, freed. Returns the records of the
    /// chunks it held (their space is the caller's to free).
    pub(crate) fn delete(&self) -> Result<Vec<ChunkRecord>> {
        let mut c = self.cache.lock()?;
        let mut out = Vec::new();
        super::delete::<Walk>(&mut c, &self.tree, &mut |c, lt, child, _| {
            out.push(self.entry(c, lt, child)?.1);
            Ok(())
        })?;
        Ok(out)
    }

    fn entry(
        &self,
        c: &CacheAccess,
        key: &ChunkKey,
        child: u64,
    ) -> Result<(Vec<u64>, ChunkRecord)> {
        let scaled = key
            .offsets
            .iter()
            .zip(self.dims.iter())
            .take(self.rank())
            .map(|(&o, &d)| std::num::NonZeroU64::new(d).map_or(o, |d| o / d))
            .collect();
        Ok((
            scaled,
            Self::record(c, (child, key.chunk_size, key.filter_mask))?,
        ))
    }
}
