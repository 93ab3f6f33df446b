//! The object reference count message (type 0x0016): version(1) = 0, count(4).

use crate::error::Result;
use crate::reader::Reader;

/// The number of hard links to an object (version 2 headers; default 1 when absent).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ReferenceCount {
    /// The reference count.
    pub count: u32,
}

impl ReferenceCount {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>) -> Result<ReferenceCount> {
        super::version(r, &[0])?;
        Ok(ReferenceCount { count: r.u32()? })
    }

    /// Encodes the message body (version 0).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8];
        out.extend_from_slice(&self.count.to_le_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes() {
        let b = [0, 3, 0, 0, 0];
        assert_eq!(
            ReferenceCount::decode(&mut Reader::new(&b, "t", 0)).unwrap(),
            ReferenceCount { count: 3 }
        );
        assert!(ReferenceCount::decode(&mut Reader::new(&[1, 3, 0, 0, 0], "t", 0)).is_err());
        assert_eq!(ReferenceCount { count: 3 }.encode(), b.to_vec());
        for n in 0..b.len() {
            assert!(ReferenceCount::decode(&mut Reader::new(&b[..n], "t", 0)).is_err());
        }
    }
}
