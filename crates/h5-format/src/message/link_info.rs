//! The link info message (type 0x0002) of a new-style group: version(1) = 0, flags(1) (bit 0
//! creation order tracked, bit 1 indexed), [maximum creation index(8) if bit 0], fractal heap
//! address(O), name index v2 B-tree address(O), [creation order index v2 B-tree address(O) if
//! bit 1].

use crate::error::Result;
use crate::reader::{Reader, Sizes};
use crate::writer::Writer;

/// Where a new-style group keeps its links when they are dense (heap and B-trees) — all
/// addresses undefined while the links are compact (link messages in the header).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LinkInfo {
    /// Link creation order is tracked.
    pub creation_order_tracked: bool,
    /// Link creation order is indexed.
    pub creation_order_indexed: bool,
    /// The largest creation index used so far (when tracked).
    pub max_creation_index: Option<u64>,
    /// Address of the fractal heap of link messages.
    pub fractal_heap_address: u64,
    /// Address of the v2 B-tree indexing links by name.
    pub name_index_address: u64,
    /// Address of the v2 B-tree indexing links by creation order (when indexed).
    pub creation_order_index_address: Option<u64>,
}

/// The fields link info and attribute info messages share, decoded once: creation order
/// flags, the maximum creation index (`index_bytes` wide), and the heap and B-tree addresses.
pub(crate) struct DenseInfo {
    pub(crate) tracked: bool,
    pub(crate) indexed: bool,
    pub(crate) max_creation_index: Option<u64>,
    pub(crate) fractal_heap_address: u64,
    pub(crate) name_index_address: u64,
    pub(crate) creation_order_index_address: Option<u64>,
}

impl DenseInfo {
    /// Bytes of the encoded fields.
    #[allow(
        clippy::arithmetic_side_effects,
        reason = "1-byte sizes and an index width of at most 8"
    )]
    pub(crate) fn encoded_len(&self, sizes: Sizes, index_bytes: usize) -> usize {
        let o = usize::from(sizes.offset);
        2 + if self.tracked { index_bytes } else { 0 } + 2 * o + if self.indexed { o } else { 0 }
    }

    /// Encodes the fields: version 0, flags, [maximum creation index (`index_bytes`) if
    /// tracked; 0 if absent], heap and name index addresses, [creation order index address if
    /// indexed; undefined if absent].
    pub(crate) fn encode(&self, sizes: Sizes, index_bytes: usize) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.encoded_len(sizes, index_bytes));
        w.u8(0);
        w.u8(u8::from(self.tracked) | u8::from(self.indexed) << 1);
        if self.tracked {
            w.uint(self.max_creation_index.unwrap_or(0), index_bytes);
        }
        w.offset(sizes, self.fractal_heap_address);
        w.offset(sizes, self.name_index_address);
        if self.indexed {
            w.offset(
                sizes,
                self.creation_order_index_address
                    .unwrap_or(crate::reader::UNDEFINED_ADDRESS),
            );
        }
        w.into_bytes()
    }

    pub(crate) fn decode(
        r: &mut Reader<'_>,
        sizes: Sizes,
        index_bytes: usize,
        what: &str,
    ) -> Result<DenseInfo> {
        super::version(r, &[0])?;
        let flags = r.u8()?;
        if flags & !0x03 != 0 {
            return Err(r.corrupted(format!("unknown {what} flags {flags:#04x}")));
        }
        let tracked = flags & 0x01 != 0;
        let indexed = flags & 0x02 != 0;
        let max_creation_index = if tracked {
            Some(r.uint(index_bytes)?)
        } else {
            None
        };
        let fractal_heap_address = r.offset(sizes)?;
        let name_index_address = r.offset(sizes)?;
        let creation_order_index_address = if indexed {
            Some(r.offset(sizes)?)
        } else {
            None
        };
        Ok(DenseInfo {
            tracked,
            indexed,
            max_creation_index,
            fractal_heap_address,
            name_index_address,
            creation_order_index_address,
        })
    }
}

impl LinkInfo {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>, sizes: Sizes) -> Result<LinkInfo> {
        let d = DenseInfo::decode(r, sizes, 8, "link info")?;
        Ok(LinkInfo {
            creation_order_tracked: d.tracked,
            creation_order_indexed: d.indexed,
            max_creation_index: d.max_creation_index,
            fractal_heap_address: d.fractal_heap_address,
            name_index_address: d.name_index_address,
            creation_order_index_address: d.creation_order_index_address,
        })
    }

    /// The shared fields.
    fn dense(&self) -> DenseInfo {
        DenseInfo {
            tracked: self.creation_order_tracked,
            indexed: self.creation_order_indexed,
            max_creation_index: self.max_creation_index,
            fractal_heap_address: self.fractal_heap_address,
            name_index_address: self.name_index_address,
            creation_order_index_address: self.creation_order_index_address,
        }
    }

    /// Bytes of the encoded body.
    pub fn encoded_len(&self, sizes: Sizes) -> usize {
        self.dense().encoded_len(sizes, 8)
    }

    /// Encodes the message body: version 0, flags from the two booleans, the maximum creation
    /// index (8 bytes, 0 if absent) when tracked, the addresses, the creation order index
    /// address (undefined if absent) when indexed.
    pub fn encode(&self, sizes: Sizes) -> Vec<u8> {
        self.dense().encode(sizes, 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::UNDEFINED_ADDRESS;

    #[test]
    fn both_flag_variants() {
        let s = Sizes::EIGHT;
        let mut b = vec![0, 0];
        b.extend_from_slice(&[0xff; 16]);
        let li = LinkInfo::decode(&mut Reader::new(&b, "t", 0), s).unwrap();
        assert_eq!(li.fractal_heap_address, UNDEFINED_ADDRESS);
        assert_eq!(li.max_creation_index, None);

        let mut b = vec![0, 3];
        b.extend_from_slice(&5u64.to_le_bytes()); // max creation index
        for a in [0x100u64, 0x200, 0x300] {
            b.extend_from_slice(&a.to_le_bytes());
        }
        let li = LinkInfo::decode(&mut Reader::new(&b, "t", 0), s).unwrap();
        assert_eq!(li.max_creation_index, Some(5));
        assert_eq!(li.fractal_heap_address, 0x100);
        assert_eq!(li.name_index_address, 0x200);
        assert_eq!(li.creation_order_index_address, Some(0x300));
        for n in 0..b.len() {
            assert!(LinkInfo::decode(&mut Reader::new(&b[..n], "t", 0), s).is_err());
        }
        b[1] = 0x04;
        assert!(LinkInfo::decode(&mut Reader::new(&b, "t", 0), s).is_err());
    }

    #[test]
    fn encodes_byte_exact_and_round_trips() {
        let s = Sizes::EIGHT;
        let mut b = vec![0, 3];
        b.extend_from_slice(&5u64.to_le_bytes());
        for a in [0x100u64, 0x200, 0x300] {
            b.extend_from_slice(&a.to_le_bytes());
        }
        let li = LinkInfo::decode(&mut Reader::new(&b, "t", 0), s).unwrap();
        assert_eq!(li.encode(s), b);
        assert_eq!(li.encoded_len(s), b.len());
        let small = Sizes::new(4, 4, "t", 0).unwrap();
        for (tracked, indexed) in [(false, false), (true, false), (false, true), (true, true)] {
            let li = LinkInfo {
                creation_order_tracked: tracked,
                creation_order_indexed: indexed,
                max_creation_index: tracked.then_some(u64::MAX),
                fractal_heap_address: crate::reader::UNDEFINED_ADDRESS,
                name_index_address: 0x40,
                creation_order_index_address: indexed.then_some(0x80),
            };
            for sizes in [s, small] {
                let e = li.encode(sizes);
                assert_eq!(e.len(), li.encoded_len(sizes));
                let mut r = Reader::new(&e, "t", 0);
                assert_eq!(LinkInfo::decode(&mut r, sizes).unwrap(), li);
                assert!(r.is_empty());
            }
        }
    }
}
