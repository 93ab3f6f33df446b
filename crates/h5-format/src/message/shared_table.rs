//! The shared message table message (type 0x000F, in the superblock extension): version(1) =
//! 0, shared object header message table address(O), number of indices(1).

use crate::error::Result;
use crate::reader::{Reader, Sizes};

/// Where the shared object header message (SOHM) master table is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SharedMessageTable {
    /// Address of the master table (`SMTB`).
    pub table_address: u64,
    /// Number of indices in the table.
    pub index_count: u8,
}

impl SharedMessageTable {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>, sizes: Sizes) -> Result<SharedMessageTable> {
        super::version(r, &[0])?;
        Ok(SharedMessageTable {
            table_address: r.offset(sizes)?,
            index_count: r.u8()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes() {
        let mut b = vec![0];
        b.extend_from_slice(&0x200u64.to_le_bytes());
        b.push(2);
        let t = SharedMessageTable::decode(&mut Reader::new(&b, "t", 0), Sizes::EIGHT).unwrap();
        assert_eq!((t.table_address, t.index_count), (0x200, 2));
        for n in 0..b.len() {
            let mut r = Reader::new(&b[..n], "t", 0);
            assert!(SharedMessageTable::decode(&mut r, Sizes::EIGHT).is_err());
        }
    }
}
