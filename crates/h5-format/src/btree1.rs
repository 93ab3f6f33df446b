//! Version 1 B-tree nodes (`TREE`): the index of old-style groups (node type 0) and of chunked
//! datasets with a version 1–2 layout message (node type 1).
//!
//! Layout (spec "Version 1 B-trees"):
//!
//! | field                     | bytes          |
//! |---------------------------|----------------|
//! | signature `TREE`          | 4              |
//! | node type                 | 1              |
//! | node level (0 = leaf)     | 1              |
//! | entries used              | 2              |
//! | left sibling address      | `sizes.offset` |
//! | right sibling address     | `sizes.offset` |
//! | key 0, child 0, key 1, child 1, ..., key N | |
//!
//! A node has room for `2K` children and `2K + 1` keys whatever its use, so its on-disk size is
//! fixed ([`node_len`]). Group keys are local heap offsets (`sizes.length` bytes); the
//! children of a leaf are symbol table nodes. Chunk keys are the chunk's stored size (4), its
//! filter mask (4) and one 8-byte offset per dimension of the layout (the dataset's rank plus
//! one for the element size); the children of a leaf are the chunks.

use crate::error::{FormatError, Result};
use crate::reader::{Reader, Sizes};
use crate::writer::Writer;

const STRUCTURE: &str = "v1 B-tree node";

/// The largest dimensionality of a chunk key (32 dataset dimensions plus the element size).
pub const MAX_CHUNK_KEY_DIMS: usize = 33;

/// What a tree indexes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum NodeType {
    /// Type 0: the links of an old-style group.
    Group,
    /// Type 1: the chunks of a dataset.
    RawData,
}

/// The key of a chunk B-tree.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ChunkKey {
    /// Size of the stored (filtered) chunk in bytes.
    pub chunk_size: u32,
    /// Filters skipped for this chunk (bit `i` set: filter `i` of the pipeline not applied).
    pub filter_mask: u32,
    /// Offset of the chunk in dataset elements, one per layout dimension (the last one, for
    /// the element size, is 0).
    pub offsets: Vec<u64>,
}

/// The keys of one node (`entries_used + 1` of them).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Keys {
    /// Group keys: offsets of names in the group's local heap.
    Group(Vec<u64>),
    /// Chunk keys.
    RawData(Vec<ChunkKey>),
}

/// A decoded v1 B-tree node.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct BtreeV1Node {
    /// The node type.
    pub node_type: NodeType,
    /// Level: 0 for leaves (children are symbol table nodes or chunks), else children are
    /// nodes of level - 1.
    pub level: u8,
    /// Address of the left sibling ([`crate::UNDEFINED_ADDRESS`] if none).
    pub left_sibling: u64,
    /// Address of the right sibling ([`crate::UNDEFINED_ADDRESS`] if none).
    pub right_sibling: u64,
    /// The keys: child `i` lies between key `i` and key `i + 1`.
    pub keys: Keys,
    /// Child addresses (`entries_used` of them).
    pub children: Vec<u64>,
}

/// Bytes of one key.
fn key_len(sizes: Sizes, node_type: NodeType, dims: usize) -> Result<usize> {
    match node_type {
        NodeType::Group => Ok(usize::from(sizes.length)),
        NodeType::RawData => {
            if !(1..=MAX_CHUNK_KEY_DIMS).contains(&dims) {
                return Err(FormatError::Unsupported {
                    structure: STRUCTURE,
                    address: crate::UNDEFINED_ADDRESS,
                    what: format!("chunk key of {dims} dimensions"),
                });
            }
            // `dims` is at most MAX_CHUNK_KEY_DIMS.
            Ok(dims.saturating_mul(8).saturating_add(8))
        }
    }
}

/// The fixed on-disk size of a node with room for `2k` children (`k` is the group internal
/// node K or the indexed storage internal node K from the superblock, or for chunk trees the
/// layout's own K). `rank_plus_one` is the number of offsets in a chunk key (ignored for group
/// nodes).
#[allow(
    clippy::arithmetic_side_effects,
    reason = "at most 65535 * 2 * (8 + 8 * 33) bytes: no overflow on 32-bit or wider targets"
)]
pub fn node_len(sizes: Sizes, k: u16, node_type: NodeType, rank_plus_one: usize) -> Result<usize> {
    let key = key_len(sizes, node_type, rank_plus_one)?;
    let two_k = 2 * usize::from(k);
    Ok(8 + 2 * usize::from(sizes.offset) + two_k * usize::from(sizes.offset) + (two_k + 1) * key)
}

impl BtreeV1Node {
    /// Decodes a node. `rank_plus_one` must be `Some(dimensions of a chunk key)` when the
    /// caller walks a chunk tree and `None` for a group tree; a node of the other type is an
    /// error.
    pub fn decode(
        bytes: &[u8],
        sizes: Sizes,
        address: u64,
        rank_plus_one: Option<usize>,
    ) -> Result<Self> {
        let mut r = Reader::new(bytes, STRUCTURE, address);
        r.signature(b"TREE")?;
        let node_type = match (r.u8()?, rank_plus_one) {
            (0, None) => NodeType::Group,
            (1, Some(_)) => NodeType::RawData,
            (t @ (0 | 1), _) => {
                return Err(r.corrupted(format!(
                    "node type {t} where a {} tree was expected",
                    if rank_plus_one.is_some() {
                        "chunk"
                    } else {
                        "group"
                    }
                )));
            }
            (t, _) => return Err(r.corrupted(format!("node type {t}"))),
        };
        let level = r.u8()?;
        let entries = usize::from(r.u16()?);
        let left_sibling = r.offset(sizes)?;
        let right_sibling = r.offset(sizes)?;
        let dims = rank_plus_one.unwrap_or(0);
        let key = key_len(sizes, node_type, dims).map_err(|e| match e {
            FormatError::Unsupported { what, .. } => r.unsupported(what),
            other => other,
        })?;
        // Check the whole key/child area fits before allocating anything.
        // At most 65536 keys of at most 8 + 8 * 33 bytes, and 65535 children.
        let need = (entries as u64)
            .saturating_add(1)
            .saturating_mul(key as u64)
            .saturating_add((entries as u64).saturating_mul(u64::from(sizes.offset)));
        r.check_len(need)?;
        let mut children = Vec::with_capacity(entries);
        let keys = match node_type {
            NodeType::Group => {
                let mut keys = Vec::with_capacity(entries.saturating_add(1));
                for i in 0..=entries {
                    keys.push(r.length(sizes)?);
                    if i < entries {
                        children.push(r.offset(sizes)?);
                    }
                }
                Keys::Group(keys)
            }
            NodeType::RawData => {
                let mut keys = Vec::with_capacity(entries.saturating_add(1));
                for i in 0..=entries {
                    let chunk_size = r.u32()?;
                    let filter_mask = r.u32()?;
                    let mut offsets = Vec::with_capacity(dims);
                    for _ in 0..dims {
                        offsets.push(r.u64()?);
                    }
                    keys.push(ChunkKey {
                        chunk_size,
                        filter_mask,
                        offsets,
                    });
                    if i < entries {
                        children.push(r.offset(sizes)?);
                    }
                }
                Keys::RawData(keys)
            }
        };
        if children.contains(&crate::UNDEFINED_ADDRESS) {
            return Err(r.corrupted("undefined child address"));
        }
        Ok(Self {
            node_type,
            level,
            left_sibling,
            right_sibling,
            keys,
            children,
        })
    }

    /// The dimensions of this node's chunk keys (`None` for a group node); the argument
    /// [`Self::decode`] needs to read the node back.
    pub fn rank_plus_one(&self) -> Option<usize> {
        match &self.keys {
            Keys::Group(_) => None,
            Keys::RawData(k) => Some(k.first().map_or(0, |k| k.offsets.len())),
        }
    }

    /// Encodes the node padded to [`node_len`] for `k` (`2k` child slots, `2k + 1` key slots;
    /// the unused slots are zero, as libhdf5 writes them). Errors when the node does not fit,
    /// the keys are not one more than the children, the key type differs from the node type,
    /// or chunk keys differ in dimensions.
    pub fn encode(&self, sizes: Sizes, k: u16) -> Result<Vec<u8>> {
        let entries = self.children.len();
        let nkeys = match &self.keys {
            Keys::Group(v) => v.len(),
            Keys::RawData(v) => v.len(),
        };
        let type_ok = matches!(
            (&self.keys, self.node_type),
            (Keys::Group(_), NodeType::Group) | (Keys::RawData(_), NodeType::RawData)
        );
        if !type_ok
            || Some(nkeys) != entries.checked_add(1)
            || entries > 2usize.saturating_mul(usize::from(k))
        {
            return Err(encode_error(format!(
                "{entries} children and {nkeys} keys of {:?} in a {:?} node with K {k}",
                self.rank_plus_one(),
                self.node_type
            )));
        }
        let dims = self.rank_plus_one().unwrap_or(0);
        let len = node_len(sizes, k, self.node_type, dims)?;
        let count =
            u16::try_from(entries).map_err(|_| encode_error(format!("{entries} children")))?;
        let mut w = Writer::with_capacity(len);
        w.bytes(b"TREE");
        w.u8(match self.node_type {
            NodeType::Group => 0,
            NodeType::RawData => 1,
        });
        w.u8(self.level);
        w.u16(count);
        w.offset(sizes, self.left_sibling);
        w.offset(sizes, self.right_sibling);
        // `nkeys == entries + 1`, checked above.
        for i in 0..nkeys {
            match &self.keys {
                Keys::Group(keys) => w.length(sizes, keys.get(i).copied().unwrap_or(0)),
                Keys::RawData(keys) => {
                    let Some(key) = keys.get(i) else { break };
                    if key.offsets.len() != dims {
                        return Err(encode_error(format!(
                            "chunk key {i} has {} dimensions, key 0 has {dims}",
                            key.offsets.len()
                        )));
                    }
                    w.u32(key.chunk_size);
                    w.u32(key.filter_mask);
                    for &o in &key.offsets {
                        w.u64(o);
                    }
                }
            }
            if let Some(&c) = self.children.get(i) {
                w.offset(sizes, c);
            }
        }
        w.zeros(len.saturating_sub(w.len()));
        Ok(w.into_bytes())
    }

    /// Number of children in use.
    pub fn entries_used(&self) -> usize {
        self.children.len()
    }
}

fn encode_error(what: String) -> FormatError {
    FormatError::Unsupported {
        structure: STRUCTURE,
        address: crate::UNDEFINED_ADDRESS,
        what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UNDEFINED_ADDRESS;

    /// A group leaf node, 8-byte sizes, K = 2 (4 children, 5 keys): two entries, keys
    /// 0, 8, 24 (heap offsets), children SNODs at 0x300 and 0x400, no siblings; unused slots
    /// zero.
    fn group_image() -> Vec<u8> {
        let mut b = b"TREE\x00\x00\x02\x00".to_vec();
        b.extend([0xff; 16]);
        for (k, c) in [(0u64, 0x300u64), (8, 0x400)] {
            b.extend(k.to_le_bytes());
            b.extend(c.to_le_bytes());
        }
        b.extend(24u64.to_le_bytes());
        b.resize(node_len(Sizes::EIGHT, 2, NodeType::Group, 0).unwrap(), 0);
        b
    }

    /// A chunk node at level 1 (rank 1, so 2 key dims), 8-byte sizes, one entry: key
    /// (size 64, mask 0, offsets [0, 0]), child 0x1000, key (size 0, mask 1, [16, 0]); left
    /// sibling 0x10, right sibling undefined.
    fn chunk_image() -> Vec<u8> {
        let mut b = b"TREE\x01\x01\x01\x00".to_vec();
        b.extend(0x10u64.to_le_bytes());
        b.extend([0xff; 8]);
        b.extend(64u32.to_le_bytes());
        b.extend(0u32.to_le_bytes());
        b.extend([0u8; 16]);
        b.extend(0x1000u64.to_le_bytes());
        b.extend(0u32.to_le_bytes());
        b.extend(1u32.to_le_bytes());
        b.extend(16u64.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b
    }

    #[test]
    fn decodes_group_node() {
        let b = group_image();
        assert_eq!(b.len(), 8 + 16 + 4 * 8 + 5 * 8);
        let n = BtreeV1Node::decode(&b, Sizes::EIGHT, 0x88, None).unwrap();
        assert_eq!(n.node_type, NodeType::Group);
        assert_eq!(n.level, 0);
        assert_eq!(n.left_sibling, UNDEFINED_ADDRESS);
        assert_eq!(n.right_sibling, UNDEFINED_ADDRESS);
        assert_eq!(n.keys, Keys::Group(vec![0, 8, 24]));
        assert_eq!(n.children, vec![0x300, 0x400]);
        assert_eq!(n.entries_used(), 2);
        // The wrong expectation is an error.
        assert!(BtreeV1Node::decode(&b, Sizes::EIGHT, 0, Some(2)).is_err());
    }

    #[test]
    fn decodes_chunk_node() {
        let b = chunk_image();
        let n = BtreeV1Node::decode(&b, Sizes::EIGHT, 0, Some(2)).unwrap();
        assert_eq!(n.node_type, NodeType::RawData);
        assert_eq!(n.level, 1);
        assert_eq!(n.left_sibling, 0x10);
        assert_eq!(
            n.keys,
            Keys::RawData(vec![
                ChunkKey {
                    chunk_size: 64,
                    filter_mask: 0,
                    offsets: vec![0, 0]
                },
                ChunkKey {
                    chunk_size: 0,
                    filter_mask: 1,
                    offsets: vec![16, 0]
                }
            ])
        );
        assert_eq!(n.children, vec![0x1000]);
        assert!(BtreeV1Node::decode(&b, Sizes::EIGHT, 0, None).is_err());
        assert!(BtreeV1Node::decode(&b, Sizes::EIGHT, 0, Some(0)).is_err());
        assert!(BtreeV1Node::decode(&b, Sizes::EIGHT, 0, Some(34)).is_err());
        // K = 32, rank 2 (3 dims): the libhdf5 default chunk node size.
        assert_eq!(
            node_len(Sizes::EIGHT, 32, NodeType::RawData, 3).unwrap(),
            8 + 16 + 64 * 8 + 65 * 32
        );
        assert!(node_len(Sizes::EIGHT, 32, NodeType::RawData, 0).is_err());
    }

    #[test]
    fn corruption_is_an_error() {
        for (b, dims) in [(group_image(), None), (chunk_image(), Some(2))] {
            let used = if dims.is_some() {
                b.len()
            } else {
                8 + 16 + 16 + 16 + 8
            };
            for n in 0..used {
                assert!(BtreeV1Node::decode(&b[..n], Sizes::EIGHT, 0, dims).is_err());
            }
            let mut x = b.clone();
            x[0] = b'X';
            assert!(BtreeV1Node::decode(&x, Sizes::EIGHT, 0, dims).is_err());
            let mut x = b.clone();
            x[4] = 7;
            assert!(BtreeV1Node::decode(&x, Sizes::EIGHT, 0, dims).is_err());
            let mut x = b.clone();
            x[6] = 0xff;
            x[7] = 0xff;
            assert!(BtreeV1Node::decode(&x, Sizes::EIGHT, 0, dims).is_err());
        }
        // An undefined child.
        let mut x = group_image();
        x[32..40].copy_from_slice(&[0xff; 8]);
        assert!(BtreeV1Node::decode(&x, Sizes::EIGHT, 0, None).is_err());
    }

    #[test]
    fn encodes_byte_exact_and_round_trips() {
        let b = group_image();
        let n = BtreeV1Node::decode(&b, Sizes::EIGHT, 0, None).unwrap();
        assert_eq!(n.encode(Sizes::EIGHT, 2).unwrap(), b);
        assert!(n.encode(Sizes::EIGHT, 0).is_err());
        let c = BtreeV1Node::decode(&chunk_image(), Sizes::EIGHT, 0, Some(2)).unwrap();
        assert_eq!(c.rank_plus_one(), Some(2));
        // K = 1: the used slots as in chunk_image, then one zero child and key slot.
        let e = c.encode(Sizes::EIGHT, 1).unwrap();
        assert_eq!(e[..chunk_image().len()], chunk_image());
        assert!(e[chunk_image().len()..].iter().all(|&x| x == 0));
        let s = Sizes::new(4, 2, "t", 0).unwrap();
        for (node, dims) in [(n, None), (c, Some(2))] {
            let e = node.encode(s, 16).unwrap();
            assert_eq!(
                e.len(),
                node_len(s, 16, node.node_type, dims.unwrap_or(0)).unwrap()
            );
            assert_eq!(BtreeV1Node::decode(&e, s, 0, dims).unwrap(), node);
            // Inconsistent nodes are errors.
            let mut bad = node.clone();
            bad.children.push(0x10);
            assert!(bad.encode(s, 16).is_err());
            let mut bad = node.clone();
            bad.node_type = match node.node_type {
                NodeType::Group => NodeType::RawData,
                NodeType::RawData => NodeType::Group,
            };
            assert!(bad.encode(s, 16).is_err());
        }
        let mut c = BtreeV1Node::decode(&chunk_image(), Sizes::EIGHT, 0, Some(2)).unwrap();
        if let Keys::RawData(k) = &mut c.keys {
            k[1].offsets.push(0);
        }
        assert!(c.encode(Sizes::EIGHT, 1).is_err());
    }
}
