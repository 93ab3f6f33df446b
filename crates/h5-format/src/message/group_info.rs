//! The group info message (type 0x000A): version(1) = 0, flags(1), [maximum compact links(2)
//! and minimum dense links(2) if bit 0], [estimated number of entries(2) and estimated link
//! name length(2) if bit 1].

use crate::error::Result;
use crate::reader::Reader;
use crate::writer::Writer;

/// Creation parameters of a new-style group (absent values mean the library defaults: 8
/// compact, 6 dense, 4 entries, 8 bytes per name).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct GroupInfo {
    /// Link phase change: (maximum compact links, minimum dense links).
    pub link_phase_change: Option<(u16, u16)>,
    /// Estimates: (number of entries, link name length).
    pub estimates: Option<(u16, u16)>,
}

impl GroupInfo {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>) -> Result<GroupInfo> {
        super::version(r, &[0])?;
        let flags = r.u8()?;
        if flags & !0x03 != 0 {
            return Err(r.corrupted(format!("unknown group info flags {flags:#04x}")));
        }
        let link_phase_change = if flags & 0x01 != 0 {
            let max_compact = r.u16()?;
            let min_dense = r.u16()?;
            Some((max_compact, min_dense))
        } else {
            None
        };
        let estimates = if flags & 0x02 != 0 {
            let entries = r.u16()?;
            let name_len = r.u16()?;
            Some((entries, name_len))
        } else {
            None
        };
        Ok(GroupInfo {
            link_phase_change,
            estimates,
        })
    }

    /// Bytes of the encoded body.
    #[allow(clippy::arithmetic_side_effects, reason = "constants")]
    pub fn encoded_len(&self) -> usize {
        2 + 4 * usize::from(self.link_phase_change.is_some())
            + 4 * usize::from(self.estimates.is_some())
    }

    /// Encodes the message body: version 0, flags from which values are present, the values.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.encoded_len());
        w.u8(0);
        w.u8(u8::from(self.link_phase_change.is_some()) | u8::from(self.estimates.is_some()) << 1);
        for (a, b) in [self.link_phase_change, self.estimates]
            .into_iter()
            .flatten()
        {
            w.u16(a);
            w.u16(b);
        }
        w.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes() {
        let g = GroupInfo::decode(&mut Reader::new(&[0, 0], "t", 0)).unwrap();
        assert_eq!(g.link_phase_change, None);
        let b = [0, 3, 16, 0, 10, 0, 4, 0, 12, 0];
        let g = GroupInfo::decode(&mut Reader::new(&b, "t", 0)).unwrap();
        assert_eq!(g.link_phase_change, Some((16, 10)));
        assert_eq!(g.estimates, Some((4, 12)));
        for n in 0..b.len() {
            assert!(GroupInfo::decode(&mut Reader::new(&b[..n], "t", 0)).is_err());
        }
        assert!(GroupInfo::decode(&mut Reader::new(&[0, 4], "t", 0)).is_err());
    }

    #[test]
    fn encodes_byte_exact_and_round_trips() {
        for b in [vec![0u8, 0], vec![0, 3, 16, 0, 10, 0, 4, 0, 12, 0]] {
            let g = GroupInfo::decode(&mut Reader::new(&b, "t", 0)).unwrap();
            assert_eq!(g.encode(), b);
            assert_eq!(g.encoded_len(), b.len());
        }
        for g in [
            GroupInfo {
                link_phase_change: Some((1, 2)),
                estimates: None,
            },
            GroupInfo {
                link_phase_change: None,
                estimates: Some((u16::MAX, 0)),
            },
        ] {
            let b = g.encode();
            assert_eq!(b.len(), 6);
            assert_eq!(GroupInfo::decode(&mut Reader::new(&b, "t", 0)).unwrap(), g);
        }
    }
}
