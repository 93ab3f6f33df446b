//! The B-tree chunk indexes (v1 and v2) behind [`WritableChunkIndex`], for now as before: an
//! ordered table of every chunk record kept while the file is open and laid out below the fixed
//! root or header at the flush that follows a change. The in-place B-tree implementations
//! replace this adapter; nothing else depends on it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use h5_chunkcache::ChunkCoord;
use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree1::{BtreeV1Node, ChunkKey, Keys, NodeType, node_len};
use h5_metacache::MetadataKind as K;

use super::ArrayIndex;
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::layouts::ChunkRecord;
use crate::meta::Decoded;
use crate::write::alloc::SpaceKind;
use crate::write::chunks::{AtFlush, ChunkSpace, WritableChunkIndex};
use crate::write::put;

/// Which B-tree the table is laid out as.
#[derive(Debug)]
pub(crate) enum TableShape {
    /// A version 1 B-tree whose root is at this relative address (fixed: the layout message
    /// points at it).
    BtreeV1 {
        /// Relative root address.
        root: u64,
        /// Node K (the file's indexed storage K: children per node are twice this).
        k: u16,
    },
    /// A v2 B-tree under a fixed header.
    BtreeV2(ArrayIndex),
}

/// The chunks of one dataset by element offset (row-major order of their scaled
/// coordinates), laid out as a B-tree at flush.
#[derive(Debug)]
pub(crate) struct TableIndex {
    space: ChunkSpace,
    shape: TableShape,
    chunk_dims: Vec<u64>,
    records: Mutex<BTreeMap<Vec<u64>, ChunkRecord>>,
    /// Blocks of the last layout below the fixed root or header.
    placed: Mutex<Vec<super::Placed>>,
    /// Flush dependencies of the last layout.
    deps: Mutex<Vec<super::Dep>>,
    dirty: Mutex<bool>,
}

impl TableIndex {
    /// An empty table (laid out at the next flush).
    pub(crate) fn new(space: ChunkSpace, shape: TableShape, chunk_dims: Vec<u64>) -> Self {
        TableIndex {
            space,
            shape,
            chunk_dims,
            records: Mutex::new(BTreeMap::new()),
            placed: Mutex::new(Vec::new()),
            deps: Mutex::new(Vec::new()),
            dirty: Mutex::new(true),
        }
    }

    /// A table holding `records` (by scaled coordinates) that matches the file.
    pub(crate) fn with_records(
        space: ChunkSpace,
        shape: TableShape,
        chunk_dims: Vec<u64>,
        records: impl IntoIterator<Item = (Vec<u64>, ChunkRecord)>,
        placed: Vec<super::Placed>,
    ) -> Self {
        let records = records
            .into_iter()
            .map(|(scaled, r)| {
                let off = scaled.iter().zip(&chunk_dims).map(|(s, d)| s * d).collect();
                (off, r)
            })
            .collect();
        TableIndex {
            space,
            shape,
            chunk_dims,
            records: Mutex::new(records),
            placed: Mutex::new(placed),
            deps: Mutex::new(Vec::new()),
            dirty: Mutex::new(false),
        }
    }

    /// The table of an existing dataset's version 1 B-tree index (root node at relative
    /// `root`): its records, and the nodes a new layout replaces.
    pub(crate) fn load_btree(
        file: &FileShared,
        space: ChunkSpace,
        root: u64,
        chunk_dims: Vec<u64>,
    ) -> Result<Self> {
        let (map, nodes) =
            crate::indexes::read_chunk_btree(file, root, &chunk_dims).map_err(|e| {
                match e.downcast::<Error>() {
                    Ok(e) => *e,
                    Err(e) => Error::Unsupported(format!("reading the chunk index: {e}")),
                }
            })?;
        Ok(Self::with_records(
            space,
            TableShape::BtreeV1 {
                root,
                k: file.chunk_btree_k(),
            },
            chunk_dims,
            map,
            nodes
                .into_iter()
                .map(|(a, l)| (K::BTreeV1Node, a, l))
                .collect(),
        ))
    }

    fn offsets(&self, scaled: &[u64]) -> Vec<u64> {
        scaled
            .iter()
            .zip(&self.chunk_dims)
            .map(|(i, d)| i * d)
            .collect()
    }

    fn mark_dirty(&self) -> Result<()> {
        *self.dirty.lock().map_err(|_| Error::Poisoned)? = true;
        Ok(())
    }

    fn key(&self, offsets: &[u64], r: Option<&ChunkRecord>) -> Result<ChunkKey> {
        let mut o = offsets.to_vec();
        o.push(0);
        Ok(ChunkKey {
            chunk_size: match r {
                Some(r) => u32::try_from(r.size)
                    .map_err(|_| Error::Unsupported("a chunk of 4 GiB or more".into()))?,
                None => 0,
            },
            filter_mask: r.map_or(0, |r| r.filter_mask),
            offsets: o,
        })
    }

    /// Lays out the v1 B-tree under the root at `root`: leaves of up to 2K chunks, then
    /// internal levels up to the root at its fixed address.
    fn lay_out_btree(&self, file: &FileShared, root_addr: u64, k: u16) -> Result<()> {
        let sizes = file.sizes;
        let rank1 = self.chunk_dims.len() + 1;
        let nlen = node_len(sizes, k, NodeType::RawData, rank1)? as u64;
        let records = self.records.lock().map_err(|_| Error::Poisoned)?.clone();
        // (child address, first key, right key) per child of the level being built.
        let mut level: Vec<(u64, ChunkKey, ChunkKey)> = Vec::with_capacity(records.len());
        for (off, r) in &records {
            let right: Vec<u64> = off
                .iter()
                .zip(&self.chunk_dims)
                .map(|(o, d)| o + d)
                .collect();
            let addr = r
                .addr
                .checked_sub(file.base)
                .ok_or(Error::Unsupported("a chunk below the base address".into()))?;
            level.push((addr, self.key(off, Some(r))?, self.key(&right, None)?));
        }
        let fanout = 2 * usize::from(k);
        let mut depth = 0u8;
        let mut placed = Vec::new();
        loop {
            let empty = [(
                0u64,
                self.key(&vec![0; rank1 - 1], None)?,
                self.key(&vec![0; rank1 - 1], None)?,
            )];
            let groups: Vec<&[(u64, ChunkKey, ChunkKey)]> = if level.is_empty() {
                vec![&empty[..0]]
            } else {
                level.chunks(fanout).collect()
            };
            let root = groups.len() == 1;
            let mut addrs = Vec::with_capacity(groups.len());
            if root {
                addrs.push(root_addr);
            } else {
                for _ in &groups {
                    let a = file.allocate(SpaceKind::Meta, nlen)?;
                    placed.push((K::BTreeV1Node, a, nlen));
                    addrs.push(a);
                }
            }
            let mut next = Vec::with_capacity(groups.len());
            for (i, g) in groups.iter().enumerate() {
                let mut keys: Vec<ChunkKey> = g.iter().map(|c| c.1.clone()).collect();
                let right = g.last().map_or_else(|| empty[0].2.clone(), |c| c.2.clone());
                keys.push(right.clone());
                let node = BtreeV1Node {
                    node_type: NodeType::RawData,
                    level: depth,
                    left_sibling: if i == 0 {
                        UNDEFINED_ADDRESS
                    } else {
                        addrs[i - 1]
                    },
                    right_sibling: addrs.get(i + 1).copied().unwrap_or(UNDEFINED_ADDRESS),
                    keys: Keys::RawData(keys.clone()),
                    children: g.iter().map(|c| c.0).collect(),
                };
                put(
                    file,
                    K::BTreeV1Node,
                    addrs[i],
                    Decoded::writable(nlen as usize, node, move |n: &BtreeV1Node| {
                        n.encode(sizes, k)
                    }),
                )?;
                let first = g
                    .first()
                    .map_or_else(|| empty[0].1.clone(), |c| c.1.clone());
                next.push((addrs[i], first, right));
            }
            if root {
                break;
            }
            level = next;
            depth = depth
                .checked_add(1)
                .ok_or_else(|| Error::Unsupported("chunk B-tree too deep".into()))?;
        }
        *self.placed.lock().map_err(|_| Error::Poisoned)? = placed;
        Ok(())
    }
}

impl AtFlush for TableIndex {
    /// Writes the index into the cache when the table changed since the last layout.
    fn flush(&self, file: &FileShared) -> Result<()> {
        {
            let mut d = self.dirty.lock().map_err(|_| Error::Poisoned)?;
            if !*d {
                return Ok(());
            }
            *d = false;
        }
        let old_deps = std::mem::take(&mut *self.deps.lock().map_err(|_| Error::Poisoned)?);
        super::undepend(file, &old_deps)?;
        let old = std::mem::take(&mut *self.placed.lock().map_err(|_| Error::Poisoned)?);
        super::remove(file, old)?;
        match &self.shape {
            TableShape::BtreeV1 { root, k } => self.lay_out_btree(file, *root, *k),
            TableShape::BtreeV2(ix) => {
                let records = self.records.lock().map_err(|_| Error::Poisoned)?.clone();
                let out = ix.lay_out(file, &records)?;
                *self.placed.lock().map_err(|_| Error::Poisoned)? = out.placed;
                *self.deps.lock().map_err(|_| Error::Poisoned)? = out.deps;
                Ok(())
            }
        }
    }
}

impl WritableChunkIndex for TableIndex {
    fn lookup(&self, coords: &[ChunkCoord]) -> Result<Vec<Option<ChunkRecord>>> {
        let records = self.records.lock().map_err(|_| Error::Poisoned)?;
        Ok(coords
            .iter()
            .map(|c| records.get(&self.offsets(c.as_slice())).copied())
            .collect())
    }

    fn insert(&self, scaled: &[u64], record: ChunkRecord) -> Result<()> {
        self.records
            .lock()
            .map_err(|_| Error::Poisoned)?
            .insert(self.offsets(scaled), record);
        self.mark_dirty()
    }

    fn remove(&self, scaled: &[u64]) -> Result<()> {
        self.records
            .lock()
            .map_err(|_| Error::Poisoned)?
            .remove(&self.offsets(scaled));
        self.mark_dirty()
    }

    /// Frees every chunk and every index block below the root or header, and a version 1
    /// B-tree's root (a v2 B-tree's header is left unused).
    fn free(&self, file: &FileShared) -> Result<()> {
        let records = std::mem::take(&mut *self.records.lock().map_err(|_| Error::Poisoned)?);
        for r in records.values() {
            self.space.raw_free(r.addr, r.size)?;
        }
        let deps = std::mem::take(&mut *self.deps.lock().map_err(|_| Error::Poisoned)?);
        super::undepend(file, &deps)?;
        let placed = std::mem::take(&mut *self.placed.lock().map_err(|_| Error::Poisoned)?);
        super::remove(file, placed)?;
        if let TableShape::BtreeV1 { root, k } = &self.shape {
            let rank1 = self.chunk_dims.len() + 1;
            let nlen = node_len(file.sizes, *k, NodeType::RawData, rank1)? as u64;
            crate::write::drop_entry(file, K::BTreeV1Node, *root, nlen)?;
        }
        *self.dirty.lock().map_err(|_| Error::Poisoned)? = false;
        Ok(())
    }
}
