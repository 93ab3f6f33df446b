//! The shared object header message table (`SMTB`): where messages shared among object headers
//! are kept. Each index names the message types it holds and the fractal heap storing them; a
//! shared message is found by its 8-byte heap ID in that heap.

use crate::error::Result;
use crate::reader::{Reader, Sizes};

const STRUCTURE: &str = "shared message table";

/// One index of the table.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SohmIndex {
    /// 0: a list (`SMLI`), 1: a v2 B-tree.
    pub index_type: u8,
    /// Bit `1 << t` set: messages of type `t` are shared here.
    pub message_types: u16,
    /// Messages smaller than this are not shared.
    pub min_size: u32,
    /// Above this many messages a list becomes a B-tree.
    pub list_cutoff: u16,
    /// Below this many messages a B-tree becomes a list.
    pub btree_cutoff: u16,
    /// Messages in the index.
    pub messages: u16,
    /// Address of the list or B-tree.
    pub index_address: u64,
    /// Address of the fractal heap holding the messages.
    pub heap_address: u64,
}

impl SohmIndex {
    /// Whether messages of type `kind` are shared in this index.
    pub fn holds(&self, kind: u16) -> bool {
        kind < 16 && self.message_types & (1 << kind) != 0
    }
}

/// A decoded table.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SohmTable {
    /// The indexes, in order.
    pub indexes: Vec<SohmIndex>,
}

impl SohmTable {
    /// Bytes of a table with `n` indexes.
    pub fn encoded_len(sizes: Sizes, n: usize) -> usize {
        // `n` comes from a file (a byte there): saturated all the same.
        n.saturating_mul(
            usize::from(sizes.offset)
                .saturating_mul(2)
                .saturating_add(14),
        )
        .saturating_add(8)
    }

    /// Decodes a table of `n` indexes (from the shared message table message) and verifies its
    /// checksum.
    pub fn decode(bytes: &[u8], sizes: Sizes, address: u64, n: usize) -> Result<SohmTable> {
        let len = Self::encoded_len(sizes, n);
        let mut r = Reader::new(bytes, STRUCTURE, address);
        let mut body = r.sub(len.saturating_sub(4))?;
        let stored = r.u32()?;
        let computed = crate::checksum::lookup3(body.all(), 0);
        if !crate::checksum::matches(stored, computed) {
            return Err(r.corrupted(format!(
                "checksum {stored:#010x}, computed {computed:#010x}"
            )));
        }
        body.signature(b"SMTB")?;
        let mut indexes = Vec::with_capacity(n.min(64));
        for _ in 0..n {
            let version = body.u8()?;
            if version != 0 {
                return Err(body.unsupported(format!("index version {version}")));
            }
            let index_type = body.u8()?;
            if index_type > 1 {
                return Err(body.corrupted(format!("index type {index_type}")));
            }
            indexes.push(SohmIndex {
                index_type,
                message_types: body.u16()?,
                min_size: body.u32()?,
                list_cutoff: body.u16()?,
                btree_cutoff: body.u16()?,
                messages: body.u16()?,
                index_address: body.offset(sizes)?,
                heap_address: body.offset(sizes)?,
            });
        }
        Ok(SohmTable { indexes })
    }

    /// The index holding messages of type `kind`.
    pub fn index_for(&self, kind: u16) -> Option<&SohmIndex> {
        self.indexes.iter().find(|i| i.holds(kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table libhdf5 1.14.4 wrote in `fixtures/sohm/sohm.h5` (one list index for
    /// dataspace, datatype, fill value, filter pipeline and attribute messages).
    const REAL: &str =
        "534d544200002a1808000000320028000b005504000000000000af070000000000002d7907c1";

    fn bytes() -> Vec<u8> {
        (0..REAL.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&REAL[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn decodes_the_real_table() {
        let t = SohmTable::decode(&bytes(), Sizes::EIGHT, 88, 1).unwrap();
        assert_eq!(
            t.indexes,
            [SohmIndex {
                index_type: 0,
                message_types: 0x182a,
                min_size: 8,
                list_cutoff: 50,
                btree_cutoff: 40,
                messages: 11,
                index_address: 0x455,
                heap_address: 0x7af,
            }]
        );
        for kind in [1, 3, 5, 11, 12] {
            assert!(t.index_for(kind).is_some(), "{kind}");
        }
        assert!(t.index_for(6).is_none());
        assert!(t.index_for(99).is_none());
    }

    #[test]
    fn damage_is_an_error() {
        let good = bytes();
        for cut in 0..good.len() {
            assert!(SohmTable::decode(&good[..cut], Sizes::EIGHT, 88, 1).is_err());
        }
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x40;
            assert!(
                SohmTable::decode(&b, Sizes::EIGHT, 88, 1).is_err(),
                "byte {i}"
            );
        }
    }
}
