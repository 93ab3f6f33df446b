//! The fill value messages: old (type 0x0004) and new (type 0x0005, versions 1–3).
//!
//! Old: size (u32) + value. New v1/v2: version, space allocation time, fill write time,
//! "defined" byte, then size (u32) + value — in v2 only when defined. New v3: version, a flags
//! byte (bits 0–1 allocation time, 2–3 write time, 4 undefined, 5 value present), then size +
//! value when bit 5 is set.
//!
//! The status follows libhdf5: no size stored → [`FillDefined::Undefined`]; size 0 →
//! [`FillDefined::Default`] (zeros); size > 0 → [`FillDefined::User`] with the bytes in `value`.

use crate::error::{FormatError, Result};
use crate::reader::Reader;
use crate::writer::Writer;

/// When the dataset's storage is allocated.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum AllocTime {
    /// Value 0: "not used" by the format; the layout's default applies.
    Default,
    /// Allocate everything at creation.
    Early,
    /// Allocate everything at the first write.
    Late,
    /// Allocate chunks as they are written.
    Incremental,
}

/// When the fill value is written into newly allocated storage.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum FillTime {
    /// Always, on allocation.
    OnAlloc,
    /// Never.
    Never,
    /// Only if the user set a fill value.
    IfSet,
}

/// Whether and how a fill value is defined.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum FillDefined {
    /// Explicitly undefined: unwritten elements have unspecified contents.
    Undefined,
    /// The library default: all zero bytes.
    Default,
    /// A user value, in [`FillValue::value`].
    User,
}

/// A decoded fill value message (old or new).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FillValue {
    /// Message version: 1–3 for the new message, 0 for the old message.
    pub version: u8,
    /// Allocation time (`None` for the old message, which does not store it).
    pub alloc_time: Option<AllocTime>,
    /// Fill write time (`None` for the old message).
    pub fill_time: Option<FillTime>,
    /// Definition status.
    pub defined: FillDefined,
    /// The fill value's bytes in the file datatype, present exactly when `defined` is
    /// [`FillDefined::User`].
    pub value: Option<Vec<u8>>,
}

fn alloc_time(v: u8, r: &Reader<'_>) -> Result<AllocTime> {
    match v {
        0 => Ok(AllocTime::Default),
        1 => Ok(AllocTime::Early),
        2 => Ok(AllocTime::Late),
        3 => Ok(AllocTime::Incremental),
        other => Err(r.corrupted(format!("space allocation time {other}"))),
    }
}

fn fill_time(v: u8, r: &Reader<'_>) -> Result<FillTime> {
    match v {
        0 => Ok(FillTime::OnAlloc),
        1 => Ok(FillTime::Never),
        2 => Ok(FillTime::IfSet),
        other => Err(r.corrupted(format!("fill value write time {other}"))),
    }
}

/// Reads size (u32) + value; size checked against the bytes left before copying.
fn sized_value(r: &mut Reader<'_>) -> Result<(FillDefined, Option<Vec<u8>>)> {
    let size = r.u32()?;
    let n = r.check_len(u64::from(size))?;
    if n == 0 {
        return Ok((FillDefined::Default, None));
    }
    Ok((FillDefined::User, Some(r.bytes(n)?.to_vec())))
}

impl FillValue {
    /// Decodes the new fill value message (type 0x0005).
    pub fn decode(r: &mut Reader<'_>) -> Result<FillValue> {
        let version = r.u8()?;
        match version {
            1 | 2 => {
                let alloc = alloc_time(r.u8()?, r)?;
                let fill = fill_time(r.u8()?, r)?;
                let defined_byte = r.u8()?;
                if defined_byte > 1 {
                    return Err(r.corrupted(format!("fill value defined flag {defined_byte}")));
                }
                let (defined, value) = if version == 1 || defined_byte == 1 {
                    sized_value(r)?
                } else {
                    (FillDefined::Undefined, None)
                };
                Ok(FillValue {
                    version,
                    alloc_time: Some(alloc),
                    fill_time: Some(fill),
                    defined,
                    value,
                })
            }
            3 => {
                let flags = r.u8()?;
                if flags & 0xC0 != 0 {
                    return Err(r.corrupted(format!("reserved fill value flags {flags:#04x}")));
                }
                let alloc = alloc_time(flags & 3, r)?;
                let fill = fill_time((flags >> 2) & 3, r)?;
                let (defined, value) = match (flags & 0x10 != 0, flags & 0x20 != 0) {
                    (true, true) => {
                        return Err(r.corrupted("fill value both undefined and present"));
                    }
                    (true, false) => (FillDefined::Undefined, None),
                    (false, true) => sized_value(r)?,
                    (false, false) => (FillDefined::Default, None),
                };
                Ok(FillValue {
                    version,
                    alloc_time: Some(alloc),
                    fill_time: Some(fill),
                    defined,
                    value,
                })
            }
            other => Err(r.unsupported(format!("fill value message version {other}"))),
        }
    }

    /// Decodes the old fill value message (type 0x0004).
    pub fn decode_old(r: &mut Reader<'_>) -> Result<FillValue> {
        let (defined, value) = sized_value(r)?;
        Ok(FillValue {
            version: 0,
            alloc_time: None,
            fill_time: None,
            defined,
            value,
        })
    }

    /// Encodes the message body, the inverse of [`FillValue::decode`] (versions 1–3) and of
    /// [`FillValue::decode_old`] (version 0, the old message type 0x0004, which stores only
    /// size and value).
    ///
    /// As libhdf5 writes them: versions 1 and 2 store a "defined" byte (1 unless
    /// [`FillDefined::Undefined`]) and then size + value, version 2 only when defined (so
    /// version 1 cannot express [`FillDefined::Undefined`]); version 3 packs the times and
    /// the undefined/present bits in one flags byte, size + value only for
    /// [`FillDefined::User`]. The old message cannot express [`FillDefined::Undefined`].
    /// Fails on those cases, on a missing time in versions 1–3, on a value whose presence
    /// disagrees with `defined` (or empty, which reads back as the default), and on a value
    /// longer than `u32::MAX` bytes.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let value: &[u8] = match (self.defined, &self.value) {
            (FillDefined::User, Some(v)) if !v.is_empty() => v,
            (FillDefined::Undefined | FillDefined::Default, None) => &[],
            _ => {
                return Err(unrepresentable(format!(
                    "fill value {:?} with value {:?}",
                    self.defined, self.value
                )));
            }
        };
        let size = u32::try_from(value.len())
            .map_err(|_| unrepresentable(format!("fill value of {} bytes", value.len())))?;
        let mut w = Writer::with_capacity(self.encoded_len());
        let sized = |w: &mut Writer| {
            w.u32(size);
            w.bytes(value);
        };
        if self.version == 0 {
            if self.defined == FillDefined::Undefined {
                return Err(unrepresentable(
                    "an undefined fill value in the old message",
                ));
            }
            sized(&mut w);
            return Ok(w.into_bytes());
        }
        let (Some(alloc), Some(fill)) = (self.alloc_time, self.fill_time) else {
            return Err(unrepresentable(
                "fill value without allocation or write time",
            ));
        };
        let alloc = match alloc {
            AllocTime::Default => 0,
            AllocTime::Early => 1,
            AllocTime::Late => 2,
            AllocTime::Incremental => 3,
        };
        let fill = match fill {
            FillTime::OnAlloc => 0,
            FillTime::Never => 1,
            FillTime::IfSet => 2,
        };
        let defined = self.defined != FillDefined::Undefined;
        w.u8(self.version);
        match self.version {
            1 | 2 => {
                if self.version == 1 && !defined {
                    return Err(unrepresentable("an undefined fill value in version 1"));
                }
                w.u8(alloc);
                w.u8(fill);
                w.u8(u8::from(defined));
                if defined {
                    sized(&mut w);
                }
            }
            3 => {
                let flags = alloc
                    | fill << 2
                    | u8::from(!defined) << 4
                    | u8::from(self.defined == FillDefined::User) << 5;
                w.u8(flags);
                if self.defined == FillDefined::User {
                    sized(&mut w);
                }
            }
            v => return Err(unrepresentable(format!("fill value message version {v}"))),
        }
        Ok(w.into_bytes())
    }

    /// Length of [`FillValue::encode`]'s output (for a value it accepts).
    pub fn encoded_len(&self) -> usize {
        let sized = self.value.as_ref().map_or(0, Vec::len).saturating_add(4);
        match self.version {
            0 => sized,
            3 if self.defined == FillDefined::User => sized.saturating_add(2),
            3 => 2,
            _ if self.defined == FillDefined::Undefined => 4,
            _ => sized.saturating_add(4),
        }
    }
}

/// The error for a value the format cannot express.
fn unrepresentable(what: impl Into<String>) -> FormatError {
    FormatError::Unsupported {
        structure: "fill value (encoding)",
        address: u64::MAX,
        what: what.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(b: &[u8]) -> Result<FillValue> {
        FillValue::decode(&mut Reader::new(b, "fill value", 0))
    }
    fn old(b: &[u8]) -> Result<FillValue> {
        FillValue::decode_old(&mut Reader::new(b, "fill value (old)", 0))
    }

    // Real messages (h5py 3.12.1 / HDF5 1.14.4; see the dataspace tests for the script):
    // 'earliest' chunked dataset with fillvalue=7 ('>i2'): old message 02000000 0007;
    // 'earliest' datasets without fill: new v2 "02 02 02 01 00000000" (late, ifset, defined,
    // size 0); 'latest' with fillvalue=7: v3 "03 2b 02000000 0007" (incremental, ifset,
    // value present); 'latest' default: v3 "03 0a" (late, ifset); vlen: v3 "03 02" (late,
    // on-alloc).
    #[test]
    fn real_messages() {
        let f = old(&[2, 0, 0, 0, 0, 7, 0, 0]).unwrap();
        assert_eq!(f.defined, FillDefined::User);
        assert_eq!(f.value, Some(vec![0, 7]));
        assert_eq!(f.alloc_time, None);

        let f = new(&[2, 2, 2, 1, 0, 0, 0, 0]).unwrap();
        assert_eq!(f.alloc_time, Some(AllocTime::Late));
        assert_eq!(f.fill_time, Some(FillTime::IfSet));
        assert_eq!(f.defined, FillDefined::Default);
        assert_eq!(f.value, None);

        let f = new(&[3, 0x2b, 2, 0, 0, 0, 0, 7]).unwrap();
        assert_eq!(f.alloc_time, Some(AllocTime::Incremental));
        assert_eq!(f.fill_time, Some(FillTime::IfSet));
        assert_eq!(f.defined, FillDefined::User);
        assert_eq!(f.value, Some(vec![0, 7]));

        let f = new(&[3, 0x0a]).unwrap();
        assert_eq!(
            (f.alloc_time, f.fill_time, f.defined),
            (
                Some(AllocTime::Late),
                Some(FillTime::IfSet),
                FillDefined::Default
            )
        );
        let f = new(&[3, 0x02]).unwrap();
        assert_eq!(f.fill_time, Some(FillTime::OnAlloc));
    }

    #[test]
    fn hand_built_variants() {
        // v1: early, never, defined 0, size 4, value 1 2 3 4 (v1 always stores the size).
        let f = new(&[1, 1, 1, 0, 4, 0, 0, 0, 1, 2, 3, 4]).unwrap();
        assert_eq!(f.alloc_time, Some(AllocTime::Early));
        assert_eq!(f.fill_time, Some(FillTime::Never));
        assert_eq!(f.value, Some(vec![1, 2, 3, 4]));
        // v2 not defined: no size field.
        let f = new(&[2, 3, 0, 0]).unwrap();
        assert_eq!(f.defined, FillDefined::Undefined);
        // v3 undefined bit.
        let f = new(&[3, 0x10 | 0x01]).unwrap();
        assert_eq!(f.defined, FillDefined::Undefined);
        assert_eq!(f.alloc_time, Some(AllocTime::Early));
        // Old with size 0.
        assert_eq!(old(&[0, 0, 0, 0]).unwrap().defined, FillDefined::Default);
    }

    /// Every real and hand-built image above, new (true) or old (false).
    /// (The hand-built version 1 image with "defined" 0 and a value is not canonical: the
    /// decoder ignores that byte in version 1 and the encoder writes 1; see
    /// `encode_byte_exact`.)
    const IMAGES: [(&[u8], bool); 7] = [
        (&[2, 0, 0, 0, 0, 7], false),
        (&[2, 2, 2, 1, 0, 0, 0, 0], true),
        (&[3, 0x2b, 2, 0, 0, 0, 0, 7], true),
        (&[3, 0x0a], true),
        (&[3, 0x02], true),
        (&[2, 3, 0, 0], true),
        (&[3, 0x11], true),
    ];

    #[test]
    fn encode_byte_exact() {
        for (b, is_new) in IMAGES {
            let f = if is_new { new(b) } else { old(b) }.unwrap();
            assert_eq!(f.encode().unwrap(), b, "{f:?}");
            assert_eq!(f.encoded_len(), b.len());
        }
        // The real old message carries 2 bytes of object-header padding.
        let f = old(&[2, 0, 0, 0, 0, 7, 0, 0]).unwrap();
        assert_eq!(f.encode().unwrap(), [2, 0, 0, 0, 0, 7]);
        assert_eq!(old(&[0, 0, 0, 0]).unwrap().encode().unwrap(), [0, 0, 0, 0]);
        let f = new(&[1, 1, 1, 0, 4, 0, 0, 0, 1, 2, 3, 4]).unwrap();
        let e = f.encode().unwrap();
        assert_eq!(e, [1, 1, 1, 1, 4, 0, 0, 0, 1, 2, 3, 4]);
        assert_eq!(new(&e).unwrap(), f);
    }

    #[test]
    fn encode_errors() {
        let f = |version, defined, value: Option<Vec<u8>>| FillValue {
            version,
            alloc_time: (version > 0).then_some(AllocTime::Late),
            fill_time: (version > 0).then_some(FillTime::IfSet),
            defined,
            value,
        };
        assert!(f(0, FillDefined::Undefined, None).encode().is_err());
        assert!(f(1, FillDefined::Undefined, None).encode().is_err());
        assert!(f(4, FillDefined::Default, None).encode().is_err());
        assert!(f(3, FillDefined::User, None).encode().is_err());
        assert!(f(3, FillDefined::User, Some(vec![])).encode().is_err());
        assert!(f(3, FillDefined::Default, Some(vec![1])).encode().is_err());
        let mut g = f(2, FillDefined::Default, None);
        g.alloc_time = None;
        assert!(g.encode().is_err());
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn round_trip(
                version in 0u8..4,
                a in 0usize..4,
                t in 0usize..3,
                d in 0usize..3,
                v in proptest::collection::vec(any::<u8>(), 1..20),
            ) {
                let defined = [FillDefined::Undefined, FillDefined::Default, FillDefined::User][d];
                let defined = if version < 2 && defined == FillDefined::Undefined {
                    FillDefined::Default
                } else {
                    defined
                };
                let (alloc_time, fill_time) = if version == 0 {
                    (None, None)
                } else {
                    (
                        Some([AllocTime::Default, AllocTime::Early, AllocTime::Late, AllocTime::Incremental][a]),
                        Some([FillTime::OnAlloc, FillTime::Never, FillTime::IfSet][t]),
                    )
                };
                let value = (defined == FillDefined::User).then_some(v);
                let f = FillValue { version, alloc_time, fill_time, defined, value };
                let b = f.encode().unwrap();
                prop_assert_eq!(b.len(), f.encoded_len());
                let back = if version == 0 { old(&b) } else { new(&b) }.unwrap();
                prop_assert_eq!(back, f);
            }
        }
    }

    #[test]
    fn rejects_bad_values() {
        assert!(new(&[0]).is_err()); // version 0
        assert!(new(&[4, 0]).is_err()); // version 4
        assert!(new(&[2, 4, 0, 0]).is_err()); // alloc time 4
        assert!(new(&[2, 1, 3, 0]).is_err()); // fill time 3
        assert!(new(&[2, 1, 0, 2]).is_err()); // defined 2
        assert!(new(&[3, 0x30]).is_err()); // undefined and present
        assert!(new(&[3, 0x40]).is_err()); // reserved bit
        assert!(new(&[3, 0x0c]).is_err()); // fill time 3
        // Huge size.
        assert!(new(&[3, 0x20, 0xff, 0xff, 0xff, 0xff, 1]).is_err());
        assert!(old(&[0xff, 0xff, 0xff, 0x7f]).is_err());
    }

    #[test]
    fn every_truncation_is_an_error() {
        let cases: [(&[u8], bool); 4] = [
            (&[3, 0x2b, 2, 0, 0, 0, 0, 7], true),
            (&[2, 2, 2, 1, 0, 0, 0, 0], true),
            (&[1, 1, 1, 0, 4, 0, 0, 0, 1, 2, 3, 4], true),
            (&[2, 0, 0, 0, 0, 7], false),
        ];
        for (b, is_new) in cases {
            for n in 0..b.len() {
                let r = if is_new { new(&b[..n]) } else { old(&b[..n]) };
                assert!(r.is_err(), "{b:?} truncated to {n}");
            }
        }
    }
}
