//! The attribute info message (type 0x0015): version(1) = 0, flags(1) (bit 0 creation order
//! tracked, bit 1 indexed), [maximum creation index(2) if bit 0], fractal heap address(O),
//! name index v2 B-tree address(O), [creation order index v2 B-tree address(O) if bit 1].

use crate::error::Result;
use crate::reader::{Reader, Sizes};

/// Where an object keeps its attributes when they are dense.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AttributeInfo {
    /// Attribute creation order is tracked.
    pub creation_order_tracked: bool,
    /// Attribute creation order is indexed.
    pub creation_order_indexed: bool,
    /// The largest creation index used so far (when tracked).
    pub max_creation_index: Option<u16>,
    /// Address of the fractal heap of attribute messages.
    pub fractal_heap_address: u64,
    /// Address of the v2 B-tree indexing attributes by name.
    pub name_index_address: u64,
    /// Address of the v2 B-tree indexing attributes by creation order (when indexed).
    pub creation_order_index_address: Option<u64>,
}

impl AttributeInfo {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>, sizes: Sizes) -> Result<AttributeInfo> {
        let d = super::link_info::DenseInfo::decode(r, sizes, 2, "attribute info")?;
        Ok(AttributeInfo {
            creation_order_tracked: d.tracked,
            creation_order_indexed: d.indexed,
            // Read from two bytes: always fits.
            max_creation_index: d.max_creation_index.map(|v| v as u16),
            fractal_heap_address: d.fractal_heap_address,
            name_index_address: d.name_index_address,
            creation_order_index_address: d.creation_order_index_address,
        })
    }

    /// The fields shared with the link info message.
    fn dense(&self) -> super::link_info::DenseInfo {
        super::link_info::DenseInfo {
            tracked: self.creation_order_tracked,
            indexed: self.creation_order_indexed,
            max_creation_index: self.max_creation_index.map(u64::from),
            fractal_heap_address: self.fractal_heap_address,
            name_index_address: self.name_index_address,
            creation_order_index_address: self.creation_order_index_address,
        }
    }

    /// Bytes of the encoded body.
    pub fn encoded_len(&self, sizes: Sizes) -> usize {
        self.dense().encoded_len(sizes, 2)
    }

    /// Encodes the message body: version 0, flags from the two booleans, the maximum creation
    /// index (2 bytes, 0 if absent) when tracked, the addresses, the creation order index
    /// address (undefined if absent) when indexed.
    pub fn encode(&self, sizes: Sizes) -> Vec<u8> {
        self.dense().encode(sizes, 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes() {
        let s = Sizes::EIGHT;
        let mut b = vec![0, 3, 9, 0];
        for a in [0x100u64, 0x200, 0x300] {
            b.extend_from_slice(&a.to_le_bytes());
        }
        let ai = AttributeInfo::decode(&mut Reader::new(&b, "t", 0), s).unwrap();
        assert_eq!(ai.max_creation_index, Some(9));
        assert_eq!(ai.creation_order_index_address, Some(0x300));
        for n in 0..b.len() {
            assert!(AttributeInfo::decode(&mut Reader::new(&b[..n], "t", 0), s).is_err());
        }
        let mut b = vec![0, 0];
        b.extend_from_slice(&[0xff; 16]);
        let ai = AttributeInfo::decode(&mut Reader::new(&b, "t", 0), s).unwrap();
        assert!(!ai.creation_order_tracked && ai.creation_order_index_address.is_none());
    }

    #[test]
    fn encodes_byte_exact_and_round_trips() {
        let s = Sizes::EIGHT;
        let mut b = vec![0, 3, 9, 0];
        for a in [0x100u64, 0x200, 0x300] {
            b.extend_from_slice(&a.to_le_bytes());
        }
        let ai = AttributeInfo::decode(&mut Reader::new(&b, "t", 0), s).unwrap();
        assert_eq!(ai.encode(s), b);
        assert_eq!(ai.encoded_len(s), b.len());
        let mut b = vec![0, 0];
        b.extend_from_slice(&[0xff; 16]);
        let ai = AttributeInfo::decode(&mut Reader::new(&b, "t", 0), s).unwrap();
        assert_eq!(ai.encode(s), b);
        let ai = AttributeInfo {
            creation_order_tracked: true,
            creation_order_indexed: false,
            max_creation_index: Some(u16::MAX),
            fractal_heap_address: 1,
            name_index_address: 2,
            creation_order_index_address: None,
        };
        let e = ai.encode(s);
        assert_eq!(
            AttributeInfo::decode(&mut Reader::new(&e, "t", 0), s).unwrap(),
            ai
        );
    }
}
