//! The object header continuation message (type 0x0010): offset(O) and length(L) of the next
//! chunk of the header.

use crate::error::Result;
use crate::reader::{Reader, Sizes, UNDEFINED_ADDRESS};
use crate::writer::Writer;

/// Where an object header continues.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Continuation {
    /// Address of the continuation block (defined, never [`UNDEFINED_ADDRESS`]).
    pub address: u64,
    /// Its length in bytes (non-zero).
    pub length: u64,
}

impl Continuation {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>, sizes: Sizes) -> Result<Continuation> {
        let address = r.offset(sizes)?;
        let length = r.length(sizes)?;
        if address == UNDEFINED_ADDRESS || length == 0 {
            return Err(r.corrupted("continuation to an undefined address or of length 0"));
        }
        Ok(Continuation { address, length })
    }

    /// Bytes of the encoded body: an address and a length.
    #[allow(clippy::arithmetic_side_effects, reason = "1-byte sizes")]
    pub fn encoded_len(sizes: Sizes) -> usize {
        usize::from(sizes.offset) + usize::from(sizes.length)
    }

    /// Encodes the message body (the values are written as they are; the decoder rejects an
    /// undefined address or a zero length).
    pub fn encode(&self, sizes: Sizes) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::encoded_len(sizes));
        w.offset(sizes, self.address);
        w.length(sizes, self.length);
        w.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_rejects_bad_values() {
        let s = Sizes::EIGHT;
        let mut b = 0x400u64.to_le_bytes().to_vec();
        b.extend_from_slice(&0x100u64.to_le_bytes());
        let c = Continuation::decode(&mut Reader::new(&b, "t", 0), s).unwrap();
        assert_eq!((c.address, c.length), (0x400, 0x100));
        for n in 0..b.len() {
            assert!(Continuation::decode(&mut Reader::new(&b[..n], "t", 0), s).is_err());
        }
        b[8..].fill(0);
        assert!(Continuation::decode(&mut Reader::new(&b, "t", 0), s).is_err());
        b[..8].fill(0xff);
        assert!(Continuation::decode(&mut Reader::new(&b, "t", 0), s).is_err());
    }

    #[test]
    fn encodes_byte_exact_and_round_trips() {
        let s = Sizes::EIGHT;
        let mut b = 0x400u64.to_le_bytes().to_vec();
        b.extend_from_slice(&0x100u64.to_le_bytes());
        let c = Continuation::decode(&mut Reader::new(&b, "t", 0), s).unwrap();
        assert_eq!(c.encode(s), b);
        let s = Sizes::new(4, 2, "t", 0).unwrap();
        let c = Continuation {
            address: 0xdead_beef,
            length: 0xffff,
        };
        let b = c.encode(s);
        assert_eq!(b.len(), Continuation::encoded_len(s));
        assert_eq!(
            Continuation::decode(&mut Reader::new(&b, "t", 0), s).unwrap(),
            c
        );
    }
}
