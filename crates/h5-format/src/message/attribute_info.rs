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
        super::version(r, &[0])?;
        let flags = r.u8()?;
        if flags & !0x03 != 0 {
            return Err(r.corrupted(format!("unknown attribute info flags {flags:#04x}")));
        }
        let tracked = flags & 0x01 != 0;
        let indexed = flags & 0x02 != 0;
        let max_creation_index = if tracked { Some(r.u16()?) } else { None };
        let fractal_heap_address = r.offset(sizes)?;
        let name_index_address = r.offset(sizes)?;
        let creation_order_index_address = if indexed {
            Some(r.offset(sizes)?)
        } else {
            None
        };
        Ok(AttributeInfo {
            creation_order_tracked: tracked,
            creation_order_indexed: indexed,
            max_creation_index,
            fractal_heap_address,
            name_index_address,
            creation_order_index_address,
        })
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
}
