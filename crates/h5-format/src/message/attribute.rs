//! The attribute message (type 0x000C), versions 1–3.
//!
//! Layout: version, flags (reserved in v1), name size (u16, including the NUL), datatype size
//! (u16), dataspace size (u16), [v3: name character set], name, datatype, dataspace, data.
//! In version 1 the name, datatype and dataspace fields are each padded to a multiple of 8
//! bytes. Flag bit 0 / bit 1 (v2+): the datatype / dataspace field is a shared message
//! reference, kept raw in [`SharedMessage`] for the engine to resolve.
//!
//! The data is `elements × datatype size` bytes when both parts are inline (checked against
//! the bytes left; trailing message padding is ignored). When either part is shared, the size
//! is unknown here and `data` holds every remaining byte of the message (possibly including
//! the object header's alignment padding); the engine trims it after resolving the reference.

use crate::datatype::{Charset, Datatype};
use crate::error::{FormatError, Result};
use crate::message::dataspace::Dataspace;
use crate::reader::{Reader, Sizes};
use crate::writer::Writer;

/// The raw body of a shared message reference (shared message encoding versions 1–3: a
/// committed datatype's object header address or a shared-message-heap ID).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct SharedMessage {
    /// The reference's bytes as stored in the attribute message.
    pub bytes: Vec<u8>,
}

/// A message part that is either stored in place or shared elsewhere.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum MaybeShared<T> {
    /// Stored in the attribute message.
    Inline(T),
    /// A reference to a shared message (resolved by the engine).
    Shared(SharedMessage),
}

impl<T> MaybeShared<T> {
    /// The inline value, if not shared.
    pub fn inline(&self) -> Option<&T> {
        match self {
            MaybeShared::Inline(t) => Some(t),
            MaybeShared::Shared(_) => None,
        }
    }
}

/// A decoded attribute message.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct AttributeMessage {
    /// Message version (1–3).
    pub version: u8,
    /// The attribute's name (invalid UTF-8 replaced by U+FFFD).
    pub name: String,
    /// Character set of the name (ASCII before version 3).
    pub name_charset: Charset,
    /// The attribute's datatype.
    pub datatype: MaybeShared<Datatype>,
    /// The attribute's dataspace.
    pub dataspace: MaybeShared<Dataspace>,
    /// The raw data in the file datatype (see the module documentation for its length).
    pub data: Vec<u8>,
}

/// Flag bits of versions 2 and 3.
const FLAG_SHARED_DATATYPE: u8 = 1;
const FLAG_SHARED_DATASPACE: u8 = 2;

/// Bytes to skip after a field of `len` bytes to reach a multiple of 8 (version 1 only).
fn pad8(len: usize) -> usize {
    crate::datatype::pad8(len)
}

impl AttributeMessage {
    /// Decodes an attribute message body from `r`.
    pub fn decode(r: &mut Reader<'_>, sizes: Sizes) -> Result<AttributeMessage> {
        let version = r.u8()?;
        if !(1..=3).contains(&version) {
            return Err(r.unsupported(format!("attribute message version {version}")));
        }
        let flags = r.u8()?; // reserved in version 1
        let flags = if version == 1 { 0 } else { flags };
        if flags & !(FLAG_SHARED_DATATYPE | FLAG_SHARED_DATASPACE) != 0 {
            return Err(r.corrupted(format!("unknown attribute flags {flags:#04x}")));
        }
        let name_len = usize::from(r.u16()?);
        let dt_len = usize::from(r.u16()?);
        let ds_len = usize::from(r.u16()?);
        let name_charset = if version >= 3 {
            Charset::from_bits(u32::from(r.u8()?), r)?
        } else {
            Charset::Ascii
        };
        let padded = version == 1;

        if name_len == 0 {
            return Err(r.corrupted("attribute name size 0"));
        }
        let raw_name = r.bytes(name_len)?;
        // The field ends with the NUL terminator; the name is what precedes the first NUL.
        if raw_name.last() != Some(&0) {
            return Err(r.corrupted("attribute name without terminating NUL"));
        }
        let end = raw_name.iter().position(|&b| b == 0).unwrap_or(0);
        let name = String::from_utf8_lossy(raw_name.get(..end).unwrap_or_default()).into_owned();
        if padded {
            r.skip(pad8(name_len))?;
        }

        let mut dt_r = r.sub(dt_len)?;
        let datatype = if flags & FLAG_SHARED_DATATYPE != 0 {
            MaybeShared::Shared(SharedMessage {
                bytes: dt_r.all().to_vec(),
            })
        } else {
            MaybeShared::Inline(Datatype::decode(&mut dt_r)?)
        };
        if padded {
            r.skip(pad8(dt_len))?;
        }

        let mut ds_r = r.sub(ds_len)?;
        let dataspace = if flags & FLAG_SHARED_DATASPACE != 0 {
            MaybeShared::Shared(SharedMessage {
                bytes: ds_r.all().to_vec(),
            })
        } else {
            MaybeShared::Inline(Dataspace::decode(&mut ds_r, sizes)?)
        };
        if padded {
            r.skip(pad8(ds_len))?;
        }

        let data_len = match (&datatype, &dataspace) {
            (MaybeShared::Inline(t), MaybeShared::Inline(s)) => {
                let n = s
                    .num_elements()
                    .and_then(|n| n.checked_mul(u64::from(t.size())))
                    .ok_or_else(|| r.corrupted("attribute data size overflows"))?;
                r.check_len(n)?
            }
            _ => r.remaining(),
        };
        let data = r.bytes(data_len)?.to_vec();
        Ok(AttributeMessage {
            version,
            name,
            name_charset,
            datatype,
            dataspace,
            data,
        })
    }

    /// Encodes the message body at [`AttributeMessage::version`] (1–3), the inverse of
    /// [`AttributeMessage::decode`]: the name NUL-terminated, the inline datatype encoded at
    /// `datatype_version` (see [`Datatype::encode`]; libhdf5 uses the type's
    /// [`Datatype::upgraded_version`] for the file's lower version bound), the inline
    /// dataspace at its own version, shared parts as their stored bytes, then the data. In
    /// version 1 the name, datatype and dataspace fields are NUL-padded to multiples of 8
    /// (their size fields give the unpadded lengths, as libhdf5 writes them).
    ///
    /// Fails on a version other than 1–3, a shared part in version 1, a UTF-8 name before
    /// version 3, a name with a NUL byte, a field longer than 65535 bytes, inline parts whose
    /// element count × element size differs from the data length, and on what the datatype
    /// and dataspace encoders refuse.
    pub fn encode(&self, sizes: Sizes, datatype_version: u8) -> Result<Vec<u8>> {
        let v = self.version;
        if !(1..=3).contains(&v) {
            return Err(unrepresentable(format!("attribute message version {v}")));
        }
        if self.name.as_bytes().contains(&0) {
            return Err(unrepresentable(format!(
                "attribute name {:?} contains a NUL byte",
                self.name
            )));
        }
        if v < 3 && self.name_charset != Charset::Ascii {
            return Err(unrepresentable("a UTF-8 attribute name before version 3"));
        }
        let mut flags = 0;
        let dt = match &self.datatype {
            MaybeShared::Inline(t) => t.encode(datatype_version)?,
            MaybeShared::Shared(s) => {
                flags |= FLAG_SHARED_DATATYPE;
                s.bytes.clone()
            }
        };
        let ds = match &self.dataspace {
            MaybeShared::Inline(d) => d.encode(sizes)?,
            MaybeShared::Shared(s) => {
                flags |= FLAG_SHARED_DATASPACE;
                s.bytes.clone()
            }
        };
        if v == 1 && flags != 0 {
            return Err(unrepresentable(
                "a shared datatype or dataspace in version 1",
            ));
        }
        if let (MaybeShared::Inline(t), MaybeShared::Inline(d)) = (&self.datatype, &self.dataspace)
        {
            let want = d
                .num_elements()
                .and_then(|n| n.checked_mul(u64::from(t.size())));
            if want != Some(self.data.len() as u64) {
                return Err(unrepresentable(format!(
                    "{} data bytes for {want:?} expected",
                    self.data.len()
                )));
            }
        }
        let len16 = |n: usize, what: &str| {
            u16::try_from(n).map_err(|_| unrepresentable(format!("{what} of {n} bytes")))
        };
        let name_len = len16(self.name.len().saturating_add(1), "attribute name")?;
        let dt_len = len16(dt.len(), "attribute datatype")?;
        let ds_len = len16(ds.len(), "attribute dataspace")?;
        let padded = v == 1;
        let field = |w: &mut Writer, b: &[u8]| {
            w.bytes(b);
            if padded {
                w.zeros(pad8(b.len()));
            }
        };
        let mut w = Writer::new();
        w.u8(v);
        w.u8(flags);
        w.u16(name_len);
        w.u16(dt_len);
        w.u16(ds_len);
        if v >= 3 {
            w.u8(match self.name_charset {
                Charset::Ascii => 0,
                Charset::Utf8 => 1,
            });
        }
        let mut name = self.name.as_bytes().to_vec();
        name.push(0);
        field(&mut w, &name);
        field(&mut w, &dt);
        field(&mut w, &ds);
        w.bytes(&self.data);
        Ok(w.into_bytes())
    }

    /// Length of [`AttributeMessage::encode`]'s output.
    pub fn encoded_len(&self, sizes: Sizes, datatype_version: u8) -> Result<usize> {
        self.encode(sizes, datatype_version).map(|b| b.len())
    }
}

/// The error for a value the format cannot express.
fn unrepresentable(what: impl Into<String>) -> FormatError {
    FormatError::Unsupported {
        structure: "attribute (encoding)",
        address: u64::MAX,
        what: what.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::{FixedPoint, StringPadding, StringType, VarLenKind};
    use crate::message::dataspace::DataspaceKind;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    }
    fn dec(b: &[u8]) -> Result<AttributeMessage> {
        AttributeMessage::decode(&mut Reader::new(b, "attribute", 0), Sizes::EIGHT)
    }

    // Real attribute messages (h5py 3.12.1 / HDF5 1.14.4; object headers walked by a throwaway
    // script, see the dataspace tests):
    //   d.attrs['i'] = np.int32(-5); d.attrs['s'] = np.bytes_('hello');
    //   d.attrs['vs'] = 'héllo'; d.attrs['arr'] = np.array([1.5, 2.5], '<f8')
    // libver='earliest' gives version 1 (the object header pads each message to 8 bytes):
    const V1_INT: &str = "010002000c0008006900000000000000100800000400000000002000000000000100000000000000fbffffff00000000";
    const V1_STR: &str =
        "010002000800080073000000000000001301000005000000010000000000000068656c6c6f000000";
    // libver='latest' gives version 3:
    const V3_INT: &str = "030002000c00040000690010080000040000000000200002000000fbffffff";
    const V3_STR: &str = "030002000800040000730013010000050000000200000068656c6c6f";
    const V3_VLEN_ARR: &str = "03000300140004000076730019010100100000001000000001000000000008000200000006000000000800000000000001000000";

    // Group attributes (second throwaway script, same h5py; object header continuations
    // followed): g.attrs['arr'] = np.array([1.5, 2.5], '<f8'); g.attrs['e'] = np.array(True);
    // f['t'] = np.dtype('<i4'); g.attrs.create('c', 5, dtype=f['t'])  (committed datatype:
    // the datatype field is a shared message reference, flag bit 0).
    const V1_ARR: &str = "0100040014001800617272000000000011203f000800000000004000340b0034ff03000000000000010101000000000002000000000000000200000000000000000000000000f83f0000000000000440";
    const V1_BOOL: &str = "01000200260008006500000000000000180200000100000010080000010000000000080046414c534500000054525545000000000001000001000000000000000100000000000000";
    const V2_SHARED_DT: &str = "020102000a000800630002022003000000000000010000000000000005000000";
    const V3_ARR: &str = "0300040014001400006172720011203f000800000000004000340b0034ff0300000201010102000000000000000200000000000000000000000000f83f0000000000000440";
    const V3_BOOL: &str = "0300020021000400006500480200000100000010080000010000000000080046414c534500545255450000010200000001";
    const V3_SHARED_DT: &str = "030102000a0004000063000202c3000000000000000200000005000000";

    #[test]
    fn real_arrays_enums_and_shared_datatypes() {
        for h in [V1_ARR, V3_ARR] {
            let a = dec(&hex(h)).unwrap();
            assert_eq!(a.name, "arr");
            let s = a.dataspace.inline().unwrap();
            assert_eq!(s.dims, vec![2]);
            assert_eq!(s.max_dims, Some(vec![2]));
            let mut want = 1.5f64.to_le_bytes().to_vec();
            want.extend_from_slice(&2.5f64.to_le_bytes());
            assert_eq!(a.data, want);
            assert_eq!(a.datatype.inline().unwrap().describe(), "float64 LE");
        }
        for h in [V1_BOOL, V3_BOOL] {
            let a = dec(&hex(h)).unwrap();
            assert_eq!(
                a.datatype.inline().unwrap().describe(),
                "enum int8 {FALSE=0, TRUE=1}"
            );
            assert_eq!(a.data, vec![1]);
        }
        for (h, v) in [(V2_SHARED_DT, 2), (V3_SHARED_DT, 3)] {
            let a = dec(&hex(h)).unwrap();
            assert_eq!((a.version, a.name.as_str()), (v, "c"));
            let MaybeShared::Shared(sh) = &a.datatype else {
                panic!("{:?}", a.datatype)
            };
            assert_eq!(sh.bytes.len(), 10);
            assert_eq!(a.dataspace.inline().unwrap().num_elements(), Some(1));
            // Shared datatype: the data is every remaining byte.
            assert_eq!(a.data, 5i32.to_le_bytes());
        }
    }

    #[test]
    fn real_v1_messages() {
        let a = dec(&hex(V1_INT)).unwrap();
        assert_eq!(a.version, 1);
        assert_eq!(a.name, "i");
        assert_eq!(a.data, (-5i32).to_le_bytes());
        let Some(Datatype::FixedPoint(FixedPoint {
            size: 4,
            signed: true,
            ..
        })) = a.datatype.inline()
        else {
            panic!("{:?}", a.datatype)
        };
        assert_eq!(a.dataspace.inline().unwrap().kind, DataspaceKind::Scalar);

        let a = dec(&hex(V1_STR)).unwrap();
        assert_eq!(a.name, "s");
        assert_eq!(a.data, b"hello");
        assert_eq!(
            a.datatype.inline(),
            Some(&Datatype::String(StringType {
                size: 5,
                padding: StringPadding::NullPad,
                charset: Charset::Ascii
            }))
        );
    }

    #[test]
    fn real_v3_messages() {
        let a = dec(&hex(V3_INT)).unwrap();
        assert_eq!((a.version, a.name.as_str()), (3, "i"));
        assert_eq!(a.data, (-5i32).to_le_bytes());
        let a = dec(&hex(V3_STR)).unwrap();
        assert_eq!(a.data, b"hello");
        // 'vs': a scalar vlen utf-8 string; the data is the 16-byte (length, heap ID) element.
        let a = dec(&hex(V3_VLEN_ARR)).unwrap();
        assert_eq!(a.name, "vs");
        let Some(Datatype::VarLen(v)) = a.datatype.inline() else {
            panic!()
        };
        assert!(matches!(
            v.kind,
            VarLenKind::String {
                charset: Charset::Utf8,
                ..
            }
        ));
        assert_eq!(a.data.len(), 16);
        assert_eq!(&a.data[..4], &[6, 0, 0, 0]); // "héllo" is 6 bytes of UTF-8
    }

    #[test]
    fn v2_shared_parts_are_kept_raw() {
        // v2, flags 3 (both shared), name "ab\0" (3), dt field 10 bytes, ds field 10 bytes
        // (shared message v3 type 2 + an 8-byte address), then 4 data bytes.
        let mut b = vec![2, 3, 3, 0, 10, 0, 10, 0];
        b.extend_from_slice(b"ab\0");
        let shared = [3u8, 2, 0x20, 0, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&shared);
        b.extend_from_slice(&shared);
        b.extend_from_slice(&[9, 9, 9, 9]);
        let a = dec(&b).unwrap();
        assert_eq!(a.name, "ab");
        assert_eq!(
            a.datatype,
            MaybeShared::Shared(SharedMessage {
                bytes: shared.to_vec()
            })
        );
        assert!(a.dataspace.inline().is_none());
        assert_eq!(a.data, vec![9, 9, 9, 9]);
    }

    #[test]
    fn v3_utf8_name_and_simple_dataspace() {
        // v3, name "é" (c3 a9 00), datatype u8 (12 bytes, v1 class 0), dataspace v2 simple
        // rank 1 dims [3], 3 data bytes.
        let mut b = vec![3, 0, 3, 0, 12, 0, 12, 0, 1, 0xc3, 0xa9, 0];
        b.extend_from_slice(&hex("100000000100000000000800"));
        b.extend_from_slice(&hex("020100010300000000000000"));
        b.extend_from_slice(&[1, 2, 3, 0xee]); // trailing byte ignored
        let a = dec(&b).unwrap();
        assert_eq!(a.name, "é");
        assert_eq!(a.name_charset, Charset::Utf8);
        assert_eq!(a.data, vec![1, 2, 3]);
    }

    /// The version of the datatype field of an attribute message image (0 when shared).
    fn datatype_version(b: &[u8]) -> u8 {
        let name_len = usize::from(u16::from_le_bytes([b[2], b[3]]));
        let at = match b[0] {
            1 => 8 + name_len + pad8(name_len),
            2 => 8 + name_len,
            _ => 9 + name_len,
        };
        b[at] >> 4
    }

    #[test]
    fn encode_real_messages_byte_exact() {
        for h in [
            V1_INT,
            V1_STR,
            V3_INT,
            V3_STR,
            V3_VLEN_ARR,
            V1_ARR,
            V1_BOOL,
            V2_SHARED_DT,
            V3_ARR,
            V3_BOOL,
            V3_SHARED_DT,
        ] {
            let b = hex(h);
            let a = dec(&b).unwrap();
            let e = a.encode(Sizes::EIGHT, datatype_version(&b)).unwrap();
            // Version 1 messages carry the object header's padding to 8 bytes (zeros).
            assert_eq!(e, b[..e.len()], "{h}");
            assert!(
                b[e.len()..].iter().all(|&x| x == 0) && b.len() - e.len() < 8,
                "{h}"
            );
            assert_eq!(dec(&e).unwrap(), a);
        }
        // V3_BOOL's enum is version 4 (libver 'latest' raises it), its integer base version 1.
        let a = dec(&hex(V3_BOOL)).unwrap();
        let t = a.datatype.inline().unwrap();
        assert_eq!(t.upgraded_version(4), 4);
        assert_eq!(
            a.encode(Sizes::EIGHT, t.upgraded_version(4)).unwrap(),
            hex(V3_BOOL)
        );
    }

    #[test]
    fn encode_hand_built_byte_exact() {
        let mut b = vec![2, 3, 3, 0, 10, 0, 10, 0];
        b.extend_from_slice(b"ab\0");
        let shared = [3u8, 2, 0x20, 0, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&shared);
        b.extend_from_slice(&shared);
        b.extend_from_slice(&[9, 9, 9, 9]);
        assert_eq!(dec(&b).unwrap().encode(Sizes::EIGHT, 1).unwrap(), b);
        let mut b = vec![3, 0, 3, 0, 12, 0, 12, 0, 1, 0xc3, 0xa9, 0];
        b.extend_from_slice(&hex("100000000100000000000800"));
        b.extend_from_slice(&hex("020100010300000000000000"));
        b.extend_from_slice(&[1, 2, 3]);
        assert_eq!(dec(&b).unwrap().encode(Sizes::EIGHT, 1).unwrap(), b);
    }

    #[test]
    fn encode_errors() {
        let a = dec(&hex(V3_INT)).unwrap();
        let s = Sizes::EIGHT;
        let with = |f: &dyn Fn(&mut AttributeMessage)| {
            let mut x = a.clone();
            f(&mut x);
            x.encode(s, 1)
        };
        assert!(with(&|_| {}).is_ok());
        assert!(with(&|x| x.version = 4).is_err());
        assert!(with(&|x| x.name = "a\0".into()).is_err());
        assert!(
            with(&|x| {
                x.version = 2;
                x.name_charset = Charset::Utf8;
            })
            .is_err()
        );
        assert!(with(&|x| x.data.push(0)).is_err());
        assert!(with(&|x| x.name = "n".repeat(65535)).is_err());
        assert!(
            with(&|x| {
                x.version = 1;
                x.datatype = MaybeShared::Shared(SharedMessage { bytes: vec![1] });
            })
            .is_err()
        );
        assert!(a.encode(s, 0).is_err());
    }

    #[test]
    fn rejects_bad_values() {
        let good = hex(V3_INT);
        let mut b = good.clone();
        b[0] = 4; // version
        assert!(dec(&b).is_err());
        let mut b = good.clone();
        b[1] = 4; // unknown flag
        assert!(dec(&b).is_err());
        let mut b = good.clone();
        b[2] = 0; // name size 0
        assert!(dec(&b).is_err());
        let mut b = good.clone();
        b[8] = 2; // charset 2
        assert!(dec(&b).is_err());
        let mut b = good.clone();
        b[10] = b'x'; // name without NUL
        assert!(dec(&b).is_err());
        let mut b = good.clone();
        b[4] = 0xff; // datatype size beyond the message
        assert!(dec(&b).is_err());
        // Huge dataspace: dims [2^40] of int32 → data size far beyond the bytes left.
        let mut b = vec![3, 0, 2, 0, 12, 0, 12, 0, 0, b'x', 0];
        b.extend_from_slice(&hex("100800000400000000002000"));
        b.extend_from_slice(&hex("020100010000000000010000"));
        b.extend_from_slice(&[0; 16]);
        assert!(dec(&b).is_err());
    }

    #[test]
    fn every_truncation_is_an_error() {
        for h in [
            V1_INT,
            V1_STR,
            V3_INT,
            V3_STR,
            V3_VLEN_ARR,
            V1_ARR,
            V1_BOOL,
            V3_ARR,
            V3_BOOL,
        ] {
            let b = hex(h);
            // v1 messages carry trailing padding after the data; every prefix shorter than
            // the decoded part must fail.
            let mut r = Reader::new(&b, "attribute", 0);
            AttributeMessage::decode(&mut r, Sizes::EIGHT).unwrap();
            for n in 0..r.pos() {
                assert!(dec(&b[..n]).is_err(), "{h} truncated to {n}");
            }
        }
    }

    mod prop {
        use super::*;
        use crate::message::fill_value::FillValue;
        use proptest::prelude::*;

        proptest! {
            /// Arbitrary bytes never panic any of this module's decoders (attribute, dataspace,
            /// fill value new and old), with 8-byte and 4-byte lengths.
            #[test]
            fn arbitrary_bytes_never_panic(
                b in proptest::collection::vec(any::<u8>(), 0..200),
                len in 1u8..=8,
            ) {
                let sizes = Sizes::new(8, len, "t", 0).unwrap();
                let _ = AttributeMessage::decode(&mut Reader::new(&b, "a", 0), sizes);
                let _ = Dataspace::decode(&mut Reader::new(&b, "d", 0), sizes);
                let _ = FillValue::decode(&mut Reader::new(&b, "f", 0));
                let _ = FillValue::decode_old(&mut Reader::new(&b, "f", 0));
            }

            /// Encoding then decoding gives the attribute back, every version.
            #[test]
            fn encode_round_trip(
                version in 1u8..=3,
                name in "[a-zA-Z0-9_ ]{1,40}",
                dims in proptest::collection::vec(0u64..4, 0..3),
                seed in any::<u8>(),
            ) {
                use crate::datatype::{ByteOrder, FixedPoint};
                use crate::message::dataspace::DataspaceKind;
                let t = Datatype::FixedPoint(FixedPoint {
                    size: 2,
                    order: ByteOrder::BigEndian,
                    signed: true,
                    lo_pad: false,
                    hi_pad: false,
                    bit_offset: 0,
                    precision: 16,
                });
                let kind = if dims.is_empty() { DataspaceKind::Scalar } else { DataspaceKind::Simple };
                let d = Dataspace {
                    version: if version == 1 { 1 } else { 2 },
                    kind,
                    dims: dims.clone(),
                    max_dims: None,
                    permutation: None,
                };
                let n = 2 * d.num_elements().unwrap() as usize;
                let a = AttributeMessage {
                    version,
                    name,
                    name_charset: Charset::Ascii,
                    datatype: MaybeShared::Inline(t),
                    dataspace: MaybeShared::Inline(d),
                    data: (0..n).map(|i| seed.wrapping_add(i as u8)).collect(),
                };
                let b = a.encode(Sizes::EIGHT, 1).unwrap();
                prop_assert_eq!(AttributeMessage::decode(&mut Reader::new(&b, "a", 0), Sizes::EIGHT).unwrap(), a);
            }

            /// Valid attribute headers with arbitrary bodies never panic.
            #[test]
            fn arbitrary_bodies_never_panic(
                version in 1u8..=3,
                flags in 0u8..4,
                lens in proptest::array::uniform3(0u16..64),
                body in proptest::collection::vec(any::<u8>(), 0..160),
            ) {
                let mut b = vec![version, flags];
                for l in lens {
                    b.extend_from_slice(&l.to_le_bytes());
                }
                b.extend_from_slice(&body);
                let _ = AttributeMessage::decode(&mut Reader::new(&b, "a", 0), Sizes::EIGHT);
            }
        }
    }
}
