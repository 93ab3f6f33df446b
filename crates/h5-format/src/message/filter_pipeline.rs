//! The filter pipeline message (type 0x000B).
//!
//! * Version 1: version(1) number of filters(1) reserved(6); per filter: id(2) name length(2)
//!   flags(2) number of client data values(2) name (name length bytes, null-padded to a
//!   multiple of 8) client data (4 each) and 4 bytes of padding when the count is odd.
//! * Version 2: version(1) number of filters(1); per filter: id(2) [name length(2) if id >=
//!   256] flags(2) number of client data values(2) [name if id >= 256] client data (4 each), no
//!   padding.

use crate::error::{FormatError, Result};
use crate::reader::Reader;
use crate::writer::Writer;

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
            r.check_len((n_values as u64).saturating_mul(4))?;
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

    /// Encodes the message body at [`FilterPipeline::version`] (1 or 2), the inverse of
    /// [`FilterPipeline::decode`], as libhdf5 writes it: a name is stored NUL-terminated; in
    /// version 1 every filter has a name field (length 0 without a name) padded with NULs to a
    /// multiple of 8 and an odd number of client data values is followed by 4 zero bytes; in
    /// version 2 only filters with an id ≥ 256 have a name field (unpadded). A name given to a
    /// version-2 filter with id < 256 is not stored. Fails on more than [`MAX_FILTERS`]
    /// filters, a name with a NUL byte or one too long for its 16-bit length, or more than
    /// 65535 client data values.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let err = |what: String| FormatError::Unsupported {
            structure: "filter pipeline (encoding)",
            address: u64::MAX,
            what,
        };
        if !(1..=2).contains(&self.version) {
            return Err(err(format!("filter pipeline version {}", self.version)));
        }
        let count = self.filters.len();
        if count > usize::from(MAX_FILTERS) {
            return Err(err(format!("{count} filters (at most {MAX_FILTERS})")));
        }
        let v1 = self.version == 1;
        let mut w = Writer::with_capacity(self.encoded_len());
        w.u8(self.version);
        w.u8(count as u8);
        if v1 {
            w.zeros(6);
        }
        for f in &self.filters {
            let has_name = v1 || f.id >= 256;
            let name = f.name.as_deref().filter(|_| has_name);
            if name.is_some_and(|n| n.contains(&0)) {
                return Err(err(format!("filter {} name contains a NUL byte", f.id)));
            }
            let field = name.map_or(0, |n| name_field(n.len(), v1));
            let field16 = u16::try_from(field)
                .map_err(|_| err(format!("filter {} name of {field} bytes", f.id)))?;
            let n_values = u16::try_from(f.client_data.len()).map_err(|_| {
                err(format!(
                    "filter {} with {} client data values",
                    f.id,
                    f.client_data.len()
                ))
            })?;
            w.u16(f.id);
            if has_name {
                w.u16(field16);
            }
            w.u16(f.flags);
            w.u16(n_values);
            if let Some(n) = name {
                w.bytes(n);
                w.zeros(field.saturating_sub(n.len()));
            }
            for &v in &f.client_data {
                w.u32(v);
            }
            if v1 && n_values % 2 == 1 {
                w.zeros(4);
            }
        }
        Ok(w.into_bytes())
    }

    /// Length of [`FilterPipeline::encode`]'s output.
    pub fn encoded_len(&self) -> usize {
        let v1 = self.version == 1;
        let filters: usize = self
            .filters
            .iter()
            .map(|f| {
                let has_name = v1 || f.id >= 256;
                let name = f.name.as_deref().filter(|_| has_name);
                let n = f.client_data.len();
                [
                    if has_name { 8 } else { 6 },
                    name.map_or(0, |n| name_field(n.len(), v1)),
                    n.saturating_mul(4),
                    if v1 && n % 2 == 1 { 4 } else { 0 },
                ]
                .iter()
                .fold(0usize, |a, &b| a.saturating_add(b))
            })
            .fold(0usize, usize::saturating_add);
        filters.saturating_add(if v1 { 8 } else { 2 })
    }
}

/// Bytes of a name field holding `len` bytes and the terminator (padded to 8 in version 1).
fn name_field(len: usize, padded: bool) -> usize {
    if padded {
        len.saturating_add(1).div_ceil(8).saturating_mul(8)
    } else {
        len.saturating_add(1)
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
    fn encode_byte_exact() {
        for img in [v1(), v2()] {
            let p = FilterPipeline::decode(&mut Reader::new(&img, "t", 0)).unwrap();
            assert_eq!(p.encode().unwrap(), img);
            assert_eq!(p.encoded_len(), img.len());
        }
        // Hand-built in the layout libhdf5 writes: shuffle + deflate(4) + fletcher32, version 1
        // with the names "shuffle", "deflate", "fletcher32" padded to 8, 8 and 16.
        let mut b = vec![1, 3, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&[2, 0, 8, 0, 1, 0, 1, 0]);
        b.extend_from_slice(b"shuffle\0");
        b.extend_from_slice(&[4, 0, 0, 0, 0, 0, 0, 0]);
        b.extend_from_slice(&[1, 0, 8, 0, 1, 0, 1, 0]);
        b.extend_from_slice(b"deflate\0");
        b.extend_from_slice(&[4, 0, 0, 0, 0, 0, 0, 0]);
        b.extend_from_slice(&[3, 0, 16, 0, 0, 0, 0, 0]);
        b.extend_from_slice(b"fletcher32\0\0\0\0\0\0");
        let p = FilterPipeline::decode(&mut Reader::new(&b, "t", 0)).unwrap();
        assert_eq!(p.filters[2].name.as_deref(), Some(&b"fletcher32"[..]));
        assert_eq!(p.encode().unwrap(), b);
    }

    #[test]
    fn encode_errors() {
        let f = |id, name: Option<&[u8]>, n| Filter {
            id,
            name: name.map(<[u8]>::to_vec),
            flags: 0,
            client_data: vec![0; n],
        };
        let p = |version, filters| FilterPipeline { version, filters };
        assert!(p(3, vec![]).encode().is_err());
        assert!(p(2, vec![f(1, None, 0); 33]).encode().is_err());
        assert!(p(2, vec![f(300, Some(b"a\0b"), 0)]).encode().is_err());
        assert!(p(1, vec![f(1, None, 65536)]).encode().is_err());
        assert!(
            p(2, vec![f(300, Some(&[b'x'; 65535]), 0)])
                .encode()
                .is_err()
        );
        // A name on a version-2 filter below 256 is not stored.
        let e = p(2, vec![f(1, Some(b"deflate"), 1)]).encode().unwrap();
        assert_eq!(e, [2, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0]);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn round_trip(
                v1 in any::<bool>(),
                fs in proptest::collection::vec(
                    (any::<u16>(), proptest::option::of("[a-z0-9]{0,20}"), any::<u16>(),
                     proptest::collection::vec(any::<u32>(), 0..5)),
                    0..6,
                ),
            ) {
                let version = if v1 { 1 } else { 2 };
                let filters = fs
                    .into_iter()
                    .map(|(id, name, flags, client_data)| Filter {
                        id,
                        // An empty name is not stored; version 2 stores names from id 256.
                        name: name
                            .filter(|n| !n.is_empty() && (v1 || id >= 256))
                            .map(String::into_bytes),
                        flags,
                        client_data,
                    })
                    .collect();
                let p = FilterPipeline { version, filters };
                let b = p.encode().unwrap();
                prop_assert_eq!(b.len(), p.encoded_len());
                prop_assert_eq!(FilterPipeline::decode(&mut Reader::new(&b, "t", 0)).unwrap(), p);
            }
        }
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
