//! Symbol table entries and symbol table nodes (`SNOD`, version 1): the leaves of an old-style
//! group's B-tree.
//!
//! A symbol table entry (spec "Symbol Table Entry"):
//!
//! | field                          | bytes          |
//! |--------------------------------|----------------|
//! | link name offset (local heap)  | `sizes.offset` |
//! | object header address          | `sizes.offset` |
//! | cache type                     | 4              |
//! | reserved                       | 4              |
//! | scratch-pad space              | 16             |
//!
//! Cache type 0: nothing cached; 1: the scratch pad holds the group's v1 B-tree address and
//! local heap address; 2: the entry is a soft link and the scratch pad holds the (4-byte)
//! offset of its value in the local heap.
//!
//! A symbol table node: signature `SNOD`, version 1, reserved (1), number of symbols (2), then
//! `2 * group leaf node K` entries of which the first "number of symbols" are in use.

use crate::error::{FormatError, Result};
use crate::reader::{Reader, Sizes, UNDEFINED_ADDRESS};
use crate::writer::Writer;

// One definition of the entry serves the superblock's root entry and the nodes.
pub use crate::superblock::{ScratchPad, SymbolTableEntry};

/// A decoded symbol table node (only the entries in use).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SymbolTableNode {
    /// The entries in use, in name order.
    pub entries: Vec<SymbolTableEntry>,
}

const STRUCTURE: &str = "symbol table node";

impl SymbolTableNode {
    /// The fixed on-disk size of a node holding up to `2 * group_leaf_k` entries (the group
    /// leaf node K comes from the superblock; libhdf5's default is 4).
    #[allow(
        clippy::arithmetic_side_effects,
        reason = "at most 8 + 2 * 65535 * 534 bytes: no overflow on 32-bit or wider targets"
    )]
    pub fn node_len(sizes: Sizes, group_leaf_k: u16) -> usize {
        8 + 2 * usize::from(group_leaf_k) * SymbolTableEntry::encoded_len(sizes)
    }

    /// Decodes a node from `bytes` (the node's image, usually [`Self::node_len`] bytes).
    pub fn decode(bytes: &[u8], sizes: Sizes, address: u64) -> Result<Self> {
        let mut r = Reader::new(bytes, STRUCTURE, address);
        r.signature(b"SNOD")?;
        let version = r.u8()?;
        if version != 1 {
            return Err(r.unsupported(format!("symbol table node version {version}")));
        }
        r.skip(1)?;
        let count = r.u16()?;
        let need =
            (usize::from(count) as u64).saturating_mul(SymbolTableEntry::encoded_len(sizes) as u64);
        r.check_len(need)?;
        let mut entries = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            entries.push(SymbolTableEntry::decode(&mut r, sizes)?);
        }
        Ok(Self { entries })
    }
}

impl SymbolTableNode {
    /// Encodes the node padded to [`Self::node_len`] (`2 * group_leaf_k` entry slots, the
    /// unused ones zero, as libhdf5 writes them). Errors when the entries do not fit.
    pub fn encode(&self, sizes: Sizes, group_leaf_k: u16) -> Result<Vec<u8>> {
        let slots = 2 * usize::from(group_leaf_k);
        if self.entries.len() > slots {
            return Err(FormatError::Unsupported {
                structure: STRUCTURE,
                address: UNDEFINED_ADDRESS,
                what: format!(
                    "{} entries in a node of {slots} (group leaf node K {group_leaf_k})",
                    self.entries.len()
                ),
            });
        }
        let len = Self::node_len(sizes, group_leaf_k);
        let mut w = Writer::with_capacity(len);
        w.bytes(b"SNOD");
        w.u8(1);
        w.u8(0);
        // At most 2 * 65535 slots; a count above u16::MAX is an error too.
        let count = u16::try_from(self.entries.len()).map_err(|_| FormatError::Unsupported {
            structure: STRUCTURE,
            address: UNDEFINED_ADDRESS,
            what: format!("{} entries", self.entries.len()),
        })?;
        w.u16(count);
        for e in &self.entries {
            e.write(&mut w, sizes);
        }
        w.zeros(len.saturating_sub(w.len()));
        Ok(w.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FormatError, UNDEFINED_ADDRESS};

    fn entry(name: u64, oh: u64, ty: u32, pad: [u8; 16]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&name.to_le_bytes());
        b.extend_from_slice(&oh.to_le_bytes());
        b.extend_from_slice(&ty.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&pad);
        b
    }

    /// A node (8-byte sizes, K = 2 so 4 slots) with three entries: a plain object (type 0),
    /// a group (type 1: B-tree 0x88, heap 0x2a8) and a soft link (type 2: value at 0x30),
    /// followed by one zeroed unused slot.
    fn image() -> Vec<u8> {
        let mut b = b"SNOD\x01\0\x03\0".to_vec();
        b.extend(entry(8, 0x400, 0, [0; 16]));
        let mut pad = [0u8; 16];
        pad[..8].copy_from_slice(&0x88u64.to_le_bytes());
        pad[8..].copy_from_slice(&0x2a8u64.to_le_bytes());
        b.extend(entry(16, 0x500, 1, pad));
        let mut pad = [0u8; 16];
        pad[..4].copy_from_slice(&0x30u32.to_le_bytes());
        b.extend(entry(24, u64::MAX, 2, pad));
        b.extend([0u8; 40]);
        assert_eq!(b.len(), SymbolTableNode::node_len(Sizes::EIGHT, 2));
        b
    }

    #[test]
    fn decodes_node() {
        let n = SymbolTableNode::decode(&image(), Sizes::EIGHT, 0x600).unwrap();
        assert_eq!(
            n.entries,
            vec![
                SymbolTableEntry {
                    link_name_offset: 8,
                    object_header_address: 0x400,
                    scratch: ScratchPad::None
                },
                SymbolTableEntry {
                    link_name_offset: 16,
                    object_header_address: 0x500,
                    scratch: ScratchPad::SymbolTable {
                        btree_address: 0x88,
                        heap_address: 0x2a8
                    }
                },
                SymbolTableEntry {
                    link_name_offset: 24,
                    object_header_address: UNDEFINED_ADDRESS,
                    scratch: ScratchPad::SoftLink {
                        link_value_offset: 0x30
                    }
                },
            ]
        );
    }

    #[test]
    fn entry_with_small_offsets() {
        let s = Sizes::new(4, 4, "t", 0).unwrap();
        let mut b = vec![1, 0, 0, 0, 0x10, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
        b.extend([0x20, 0, 0, 0, 0x30, 0, 0, 0]);
        b.extend([0xAA; 8]); // rest of the scratch pad
        b.push(0x99); // the next field
        let mut r = Reader::new(&b, "t", 0);
        let e = SymbolTableEntry::decode(&mut r, s).unwrap();
        assert_eq!(r.pos(), SymbolTableEntry::encoded_len(s));
        assert_eq!(
            e.scratch,
            ScratchPad::SymbolTable {
                btree_address: 0x20,
                heap_address: 0x30
            }
        );
        assert_eq!(e.link_name_offset, 1);
    }

    #[test]
    fn corruption_is_an_error() {
        let b = image();
        // Only the three used entries are required.
        let used = 8 + 3 * 40;
        for n in 0..used {
            assert!(SymbolTableNode::decode(&b[..n], Sizes::EIGHT, 0).is_err());
        }
        assert!(SymbolTableNode::decode(&b[..used], Sizes::EIGHT, 0).is_ok());
        let mut x = b.clone();
        x[3] = b'E';
        assert!(SymbolTableNode::decode(&x, Sizes::EIGHT, 0).is_err());
        let mut x = b.clone();
        x[4] = 2;
        assert!(matches!(
            SymbolTableNode::decode(&x, Sizes::EIGHT, 0),
            Err(FormatError::Unsupported { .. })
        ));
        let mut x = b.clone();
        x[6] = 0xff;
        x[7] = 0xff;
        assert!(SymbolTableNode::decode(&x, Sizes::EIGHT, 0).is_err());
        let mut x = b.clone();
        x[8 + 16] = 3; // cache type 3
        assert!(matches!(
            SymbolTableNode::decode(&x, Sizes::EIGHT, 0),
            Err(FormatError::Corrupted { .. })
        ));
    }

    #[test]
    fn encodes_byte_exact_and_round_trips() {
        let b = image();
        let n = SymbolTableNode::decode(&b, Sizes::EIGHT, 0).unwrap();
        assert_eq!(n.encode(Sizes::EIGHT, 2).unwrap(), b);
        assert!(n.encode(Sizes::EIGHT, 1).is_err());
        let s = Sizes::new(4, 2, "t", 0).unwrap();
        let e = n.encode(s, 4).unwrap();
        assert_eq!(e.len(), SymbolTableNode::node_len(s, 4));
        let back = SymbolTableNode::decode(&e, s, 0).unwrap();
        assert_eq!(back, n);
        let empty = SymbolTableNode { entries: vec![] };
        assert_eq!(
            SymbolTableNode::decode(&empty.encode(s, 4).unwrap(), s, 0).unwrap(),
            empty
        );
    }
}
