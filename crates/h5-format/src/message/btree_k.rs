//! The B-tree 'K' values message (type 0x0013, in the superblock extension): version(1) = 0,
//! indexed storage internal node K(2), group internal node K(2), group leaf node K(2).

use crate::error::Result;
use crate::reader::Reader;

/// B-tree K values of a file whose superblock (v2/v3) has no room for them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BtreeKValues {
    /// Indexed storage (chunk) B-tree internal node K.
    pub indexed_storage_internal_k: u16,
    /// Group B-tree internal node K.
    pub group_internal_k: u16,
    /// Group B-tree leaf node K.
    pub group_leaf_k: u16,
}

impl BtreeKValues {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>) -> Result<BtreeKValues> {
        super::version(r, &[0])?;
        let v = BtreeKValues {
            indexed_storage_internal_k: r.u16()?,
            group_internal_k: r.u16()?,
            group_leaf_k: r.u16()?,
        };
        if v.indexed_storage_internal_k == 0 || v.group_internal_k == 0 || v.group_leaf_k == 0 {
            return Err(r.corrupted("B-tree K of 0"));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes() {
        let b = [0, 32, 0, 16, 0, 4, 0];
        let v = BtreeKValues::decode(&mut Reader::new(&b, "t", 0)).unwrap();
        assert_eq!(
            (
                v.indexed_storage_internal_k,
                v.group_internal_k,
                v.group_leaf_k
            ),
            (32, 16, 4)
        );
        for n in 0..b.len() {
            assert!(BtreeKValues::decode(&mut Reader::new(&b[..n], "t", 0)).is_err());
        }
        assert!(BtreeKValues::decode(&mut Reader::new(&[0, 0, 0, 16, 0, 4, 0], "t", 0)).is_err());
    }
}
