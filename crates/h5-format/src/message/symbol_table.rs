//! The symbol table message (type 0x0011) of an old-style group: v1 B-tree address(O) and
//! local heap address(O).

use crate::error::Result;
use crate::reader::{Reader, Sizes};
use crate::writer::Writer;

/// Where an old-style group's links are.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SymbolTableMessage {
    /// Address of the group's v1 B-tree (of symbol table nodes).
    pub btree_address: u64,
    /// Address of the group's local heap (link names).
    pub heap_address: u64,
}

impl SymbolTableMessage {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>, sizes: Sizes) -> Result<SymbolTableMessage> {
        Ok(SymbolTableMessage {
            btree_address: r.offset(sizes)?,
            heap_address: r.offset(sizes)?,
        })
    }

    /// Bytes of the encoded body: two addresses.
    pub fn encoded_len(sizes: Sizes) -> usize {
        2 * usize::from(sizes.offset)
    }

    /// Encodes the message body.
    pub fn encode(&self, sizes: Sizes) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::encoded_len(sizes));
        w.offset(sizes, self.btree_address);
        w.offset(sizes, self.heap_address);
        w.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_rejects_truncation() {
        let mut b = 0x88u64.to_le_bytes().to_vec();
        b.extend_from_slice(&0x2a8u64.to_le_bytes());
        let m = SymbolTableMessage::decode(&mut Reader::new(&b, "t", 0), Sizes::EIGHT).unwrap();
        assert_eq!((m.btree_address, m.heap_address), (0x88, 0x2a8));
        for n in 0..b.len() {
            let mut r = Reader::new(&b[..n], "t", 0);
            assert!(SymbolTableMessage::decode(&mut r, Sizes::EIGHT).is_err());
        }
    }

    #[test]
    fn encodes_byte_exact_and_round_trips() {
        let mut b = 0x88u64.to_le_bytes().to_vec();
        b.extend_from_slice(&0x2a8u64.to_le_bytes());
        let m = SymbolTableMessage::decode(&mut Reader::new(&b, "t", 0), Sizes::EIGHT).unwrap();
        assert_eq!(m.encode(Sizes::EIGHT), b);
        let s = Sizes::new(2, 4, "t", 0).unwrap();
        let m = SymbolTableMessage {
            btree_address: 0x1234,
            heap_address: crate::reader::UNDEFINED_ADDRESS,
        };
        let b = m.encode(s);
        assert_eq!(b, [0x34, 0x12, 0xff, 0xff]);
        assert_eq!(b.len(), SymbolTableMessage::encoded_len(s));
        assert_eq!(
            SymbolTableMessage::decode(&mut Reader::new(&b, "t", 0), s).unwrap(),
            m
        );
    }
}
