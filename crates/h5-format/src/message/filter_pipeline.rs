//! The filter pipeline message (type 0x000B).
//!
//! * Version 1: version(1) number of filters(1) reserved(6); per filter: id(2) name length(2)
//!   flags(2) number of client data values(2) name (name length bytes, null-padded to a
//!   multiple of 8) client data (4 each) and 4 bytes of padding when the count is odd.
//! * Version 2: version(1) number of filters(1); per filter: id(2) [name length(2) if id >=
//!   256] flags(2) number of client data values(2) [name if id >= 256] client data (4 each), no
//!   padding.

use crate::error::Result;
use crate::reader::Reader;

/// The most filters a pipeline may hold.
pub const MAX_FILTERS: u8 = 32;

/// One filter of a pipeline.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Filter {
    /// Filter identification (1 deflate, 2 shuffle, 3 fletcher32, 4 szip, 5 nbit, 6
    /// scale-offset, >= 256 third-party).
    pub id: u16,
    /// The filter's name, if stored (without padding or terminator).
    pub name: Option<Vec<u8>>,
    /// Filter flags; bit 0: the filter is optional (may be skipped if it fails).
    pub flags: u16,
    /// The client data values.
    pub client_data: Vec<u32>,
}

impl Filter {
    /// Whether the filter is optional.
    pub fn is_optional(&self) -> bool {
        self.flags & 0x0001 != 0
    }
}

/// A decoded filter pipeline, in the order applied when writing.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FilterPipeline {
    /// The message version (1 or 2).
    pub version: u8,
    /// The filters.
    pub filters: Vec<Filter>,
}

impl FilterPipeline {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>) -> Result<FilterPipeline> {
        let version = super::version(r, &[1, 2])?;
        let count = r.u8()?;
        if count > MAX_FILTERS {
            return Err(r.corrupted(format!("{count} filters (at most {MAX_FILTERS})")));
        }
        if version == 1 {
            r.skip(6)?;
        }
        let mut filters = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            let id = r.u16()?;
            let has_name = version == 1 || id >= 256;
            let name_len = if has_name { usize::from(r.u16()?) } else { 0 };
            if version == 1 && name_len % 8 != 0 {
                return Err(
                    r.corrupted(format!("filter name length {name_len} not a multiple of 8"))
                );
            }
            let flags = r.u16()?;
            let n_values = usize::from(r.u16()?);
            let name = if has_name && name_len > 0 {
                // The stored name is null-terminated (then padded in version 1).
                let mut raw = r.sub(name_len)?;
                Some(raw.cstr()?.to_vec())
            } else {
                None
            };
            // Each value is 4 bytes: check they are there before allocating.
            r.check_len(4 * n_values as u64)?;
            let mut client_data = Vec::with_capacity(n_values);
            for _ in 0..n_values {
                client_data.push(r.u32()?);
            }
            if version == 1 && n_values % 2 == 1 {
                r.skip(4)?;
            }
            filters.push(Filter {
                id,
                name,
                flags,
                client_data,
            });
        }
        Ok(FilterPipeline { version, filters })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Version 1: deflate level 6 named "deflate" (8-byte padded name, 1 value + padding).
    fn v1() -> Vec<u8> {
        let mut b = vec![1, 1, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&[1, 0, 8, 0, 1, 0, 1, 0]); // id 1, name len 8, optional, 1 value
        b.extend_from_slice(b"deflate\0");
        b.extend_from_slice(&6u32.to_le_bytes());
        b.extend_from_slice(&[0; 4]); // padding (odd count)
        b
    }

    /// Version 2: shuffle (id 2, no name, 1 value) then a third-party filter 32001 named "x".
    fn v2() -> Vec<u8> {
        let mut b = vec![2, 2];
        b.extend_from_slice(&[2, 0, 0, 0, 1, 0]);
        b.extend_from_slice(&4u32.to_le_bytes());
        b.extend_from_slice(&32001u16.to_le_bytes());
        b.extend_from_slice(&[2, 0, 1, 0, 2, 0]); // name len 2, optional, 2 values
        b.extend_from_slice(b"x\0");
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&2u32.to_le_bytes());
        b
    }

    #[test]
    fn decodes_v1() {
        let p = FilterPipeline::decode(&mut Reader::new(&v1(), "t", 0)).unwrap();
        assert_eq!(p.version, 1);
        assert_eq!(
            p.filters,
            [Filter {
                id: 1,
                name: Some(b"deflate".to_vec()),
                flags: 1,
                client_data: vec![6]
            }]
        );
        assert!(p.filters[0].is_optional());
    }

    #[test]
    fn decodes_v2() {
        let p = FilterPipeline::decode(&mut Reader::new(&v2(), "t", 0)).unwrap();
        assert_eq!(p.filters.len(), 2);
        assert_eq!(p.filters[0].name, None);
        assert_eq!(p.filters[0].client_data, [4]);
        assert_eq!(p.filters[1].id, 32001);
        assert_eq!(p.filters[1].name.as_deref(), Some(&b"x"[..]));
        assert_eq!(p.filters[1].client_data, [1, 2]);
    }

    #[test]
    fn truncation_and_bad_counts() {
        for img in [v1(), v2()] {
            for n in 0..img.len() {
                assert!(FilterPipeline::decode(&mut Reader::new(&img[..n], "t", 0)).is_err());
            }
        }
        assert!(FilterPipeline::decode(&mut Reader::new(&[2, 33], "t", 0)).is_err());
        // Version 1 name length not a multiple of 8; a name without terminator.
        let mut b = v1();
        b[10] = 7;
        assert!(FilterPipeline::decode(&mut Reader::new(&b, "t", 0)).is_err());
        let mut b = v2();
        let at = b.len() - 9; // the name's terminator
        b[at] = b'y';
        assert!(FilterPipeline::decode(&mut Reader::new(&b, "t", 0)).is_err());
        assert!(FilterPipeline::decode(&mut Reader::new(&[3, 0], "t", 0)).is_err());
        // 65535 client values announced, none present.
        let b = [2, 1, 1, 0, 0, 0, 0xff, 0xff];
        assert!(FilterPipeline::decode(&mut Reader::new(&b, "t", 0)).is_err());
    }
}
