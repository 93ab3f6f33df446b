//! The link message (type 0x0006): one link of a compact (or dense) new-style group.
//!
//! Layout: version(1) = 1, flags(1), [link type(1) if flag bit 3], [creation order(8) if bit
//! 2], [character set(1) if bit 4], length of the name (1, 2, 4 or 8 bytes as bits 0–1 say),
//! the name (no terminator), then the link information:
//! hard (type 0): object header address(O); soft (1): length(2) and path; external (64):
//! length(2), then a byte with version (high nibble, 0) and flags (low nibble), the file name and
//! the object path, each null-terminated; other user-defined types (65..=255): length(2) and
//! raw data.

use crate::error::{FormatError, Result};
use crate::reader::{Reader, Sizes, UNDEFINED_ADDRESS};
use crate::writer::Writer;

/// The character set of a link name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum CharSet {
    /// US ASCII (0, the default).
    Ascii,
    /// UTF-8 (1).
    Utf8,
}

/// What a link points to.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum LinkTarget {
    /// A hard link: the object header address.
    Hard(u64),
    /// A soft link: a path in this file.
    Soft(Vec<u8>),
    /// An external link: a file name and a path in that file.
    External {
        /// The flags nibble of the external link's version/flags byte (0 in current files).
        flags: u8,
        /// The file name.
        file: Vec<u8>,
        /// The object's path in that file.
        path: Vec<u8>,
    },
    /// A user-defined link type (65..=255) and its raw data.
    UserDefined {
        /// The link type.
        kind: u8,
        /// The link's data.
        data: Vec<u8>,
    },
}

/// A decoded link message.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Link {
    /// The link name's bytes (non-empty, no terminator).
    pub name: Vec<u8>,
    /// The name's character set.
    pub charset: CharSet,
    /// The creation order, when the group tracks it.
    pub creation_order: Option<i64>,
    /// What the link points to.
    pub target: LinkTarget,
}

impl Link {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>, sizes: Sizes) -> Result<Link> {
        super::version(r, &[1])?;
        let flags = r.u8()?;
        if flags & !0x1f != 0 {
            return Err(r.corrupted(format!("unknown link flags {flags:#04x}")));
        }
        let kind = if flags & 0x08 != 0 { r.u8()? } else { 0 };
        let creation_order = if flags & 0x04 != 0 {
            Some(r.u64()? as i64)
        } else {
            None
        };
        let charset = if flags & 0x10 != 0 {
            match r.u8()? {
                0 => CharSet::Ascii,
                1 => CharSet::Utf8,
                c => return Err(r.corrupted(format!("link name character set {c}"))),
            }
        } else {
            CharSet::Ascii
        };
        let width = 1usize << (flags & 0x03);
        let name_len = r.uint(width)?;
        let name_len = r.check_len(name_len)?;
        if name_len == 0 {
            return Err(r.corrupted("empty link name"));
        }
        let name = r.bytes(name_len)?.to_vec();
        let target = match kind {
            0 => LinkTarget::Hard(r.offset(sizes)?),
            1 => {
                let n = usize::from(r.u16()?);
                LinkTarget::Soft(r.bytes(n)?.to_vec())
            }
            64 => {
                let n = usize::from(r.u16()?);
                let mut d = r.sub(n)?;
                let vf = d.u8()?;
                if vf >> 4 != 0 {
                    return Err(d.unsupported(format!("external link version {}", vf >> 4)));
                }
                let file = d.cstr()?.to_vec();
                let path = d.cstr()?.to_vec();
                LinkTarget::External {
                    flags: vf & 0x0f,
                    file,
                    path,
                }
            }
            65..=255 => {
                let n = usize::from(r.u16()?);
                LinkTarget::UserDefined {
                    kind,
                    data: r.bytes(n)?.to_vec(),
                }
            }
            k => return Err(r.corrupted(format!("reserved link type {k}"))),
        };
        Ok(Link {
            name,
            charset,
            creation_order,
            target,
        })
    }

    /// The link information after the name (without its 2-byte length for soft, external
    /// and user-defined links), and the link type byte.
    fn info(&self) -> (u8, Vec<u8>) {
        match &self.target {
            LinkTarget::Hard(_) => (0, Vec::new()),
            LinkTarget::Soft(path) => (1, path.clone()),
            LinkTarget::External { flags, file, path } => {
                let mut d =
                    Vec::with_capacity(file.len().saturating_add(path.len()).saturating_add(3));
                d.push(flags & 0x0f);
                d.extend_from_slice(file);
                d.push(0);
                d.extend_from_slice(path);
                d.push(0);
                (64, d)
            }
            LinkTarget::UserDefined { kind, data } => (*kind, data.clone()),
        }
    }

    /// Bytes of the encoded body.
    #[allow(
        clippy::arithmetic_side_effects,
        reason = "the terms are constants, 1-byte sizes and lengths of buffers in memory: their sum fits in usize"
    )]
    pub fn encoded_len(&self, sizes: Sizes) -> usize {
        let (kind, info) = self.info();
        let width = 1usize << name_width_code(self.name.len());
        2 + usize::from(kind != 0)
            + if self.creation_order.is_some() { 8 } else { 0 }
            + usize::from(self.charset != CharSet::Ascii)
            + width
            + self.name.len()
            + match self.target {
                LinkTarget::Hard(_) => usize::from(sizes.offset),
                _ => 2 + info.len(),
            }
    }

    /// Encodes the message body as libhdf5 does: version 1; the type stored only for
    /// non-hard links, the creation order only when present, the character set only when not
    /// ASCII; the narrowest name length field (1, 2, 4 or 8 bytes). Errors (`Unsupported`) on an
    /// empty name, a link value longer than 65535 bytes, a user-defined type below 65, or an
    /// external link whose names contain a null byte or whose flags exceed 4 bits.
    pub fn encode(&self, sizes: Sizes) -> Result<Vec<u8>> {
        let err = |what: String| FormatError::Unsupported {
            structure: "link message",
            address: UNDEFINED_ADDRESS,
            what,
        };
        if self.name.is_empty() {
            return Err(err("empty link name".into()));
        }
        let (kind, info) = self.info();
        match &self.target {
            LinkTarget::UserDefined { kind, .. } if *kind < 65 => {
                return Err(err(format!("user-defined link type {kind}")));
            }
            LinkTarget::External { flags, file, path }
                if *flags > 0x0f || file.contains(&0) || path.contains(&0) =>
            {
                return Err(err("external link flags or names not representable".into()));
            }
            _ => {}
        }
        let code = name_width_code(self.name.len());
        let mut flags = code;
        if kind != 0 {
            flags |= 0x08;
        }
        if self.creation_order.is_some() {
            flags |= 0x04;
        }
        if self.charset != CharSet::Ascii {
            flags |= 0x10;
        }
        let mut w = Writer::with_capacity(self.encoded_len(sizes));
        w.u8(1);
        w.u8(flags);
        if kind != 0 {
            w.u8(kind);
        }
        if let Some(co) = self.creation_order {
            w.u64(co as u64);
        }
        if self.charset != CharSet::Ascii {
            w.u8(1);
        }
        w.uint(self.name.len() as u64, 1 << code);
        w.bytes(&self.name);
        match self.target {
            LinkTarget::Hard(addr) => w.offset(sizes, addr),
            _ => {
                let n = u16::try_from(info.len())
                    .map_err(|_| err(format!("link value of {} bytes", info.len())))?;
                w.u16(n);
                w.bytes(&info);
            }
        }
        Ok(w.into_bytes())
    }
}

/// The name length field's width code (flag bits 0–1): the narrowest of 1, 2, 4, 8 bytes.
fn name_width_code(len: usize) -> u8 {
    match len as u64 {
        0..=0xff => 0,
        0x100..=0xffff => 1,
        0x1_0000..=0xffff_ffff => 2,
        _ => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Sizes = Sizes::EIGHT;

    fn dec(b: &[u8]) -> Result<Link> {
        Link::decode(&mut Reader::new(b, "t", 0), S)
    }

    #[test]
    fn hard_link_minimal() {
        // version 1, flags 0 (1-byte name length), name "a", address 0x123.
        let mut b = vec![1, 0, 1, b'a'];
        b.extend_from_slice(&0x123u64.to_le_bytes());
        let l = dec(&b).unwrap();
        assert_eq!(l.name, b"a");
        assert_eq!(l.target, LinkTarget::Hard(0x123));
        assert_eq!(l.charset, CharSet::Ascii);
        for n in 0..b.len() {
            assert!(dec(&b[..n]).is_err());
        }
    }

    #[test]
    fn soft_with_everything() {
        // flags: 2-byte name length (1), creation order (4), type (8), charset (0x10).
        let mut b = vec![1, 0x1d, 1];
        b.extend_from_slice(&7u64.to_le_bytes());
        b.push(1); // UTF-8
        b.extend_from_slice(&4u16.to_le_bytes());
        b.extend_from_slice(b"soft");
        b.extend_from_slice(&7u16.to_le_bytes());
        b.extend_from_slice(b"/contig");
        let l = dec(&b).unwrap();
        assert_eq!(l.creation_order, Some(7));
        assert_eq!(l.charset, CharSet::Utf8);
        assert_eq!(l.target, LinkTarget::Soft(b"/contig".to_vec()));
        for n in 0..b.len() {
            assert!(dec(&b[..n]).is_err());
        }
    }

    #[test]
    fn external_and_user_defined() {
        let mut b = vec![1, 0x08, 64, 3];
        b.extend_from_slice(b"ext");
        let data = b"\0other.h5\0/x\0";
        b.extend_from_slice(&(data.len() as u16).to_le_bytes());
        b.extend_from_slice(data);
        let l = dec(&b).unwrap();
        assert_eq!(
            l.target,
            LinkTarget::External {
                flags: 0,
                file: b"other.h5".to_vec(),
                path: b"/x".to_vec()
            }
        );
        let b = [1, 0x08, 200, 1, b'u', 2, 0, 9, 9];
        assert_eq!(
            dec(&b).unwrap().target,
            LinkTarget::UserDefined {
                kind: 200,
                data: vec![9, 9]
            }
        );
        assert!(dec(&[1, 0x08, 5, 1, b'u', 0, 0]).is_err()); // reserved type
        assert!(dec(&[1, 0, 0]).is_err()); // empty name
        assert!(dec(&[1, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err()); // huge
    }

    fn enc(l: &Link) -> Vec<u8> {
        let b = l.encode(S).unwrap();
        assert_eq!(b.len(), l.encoded_len(S));
        assert_eq!(&dec(&b).unwrap(), l);
        b
    }

    #[test]
    fn encodes_the_vectors_byte_exact() {
        let mut hard = vec![1, 0, 1, b'a'];
        hard.extend_from_slice(&0x123u64.to_le_bytes());
        let mut ext = vec![1, 0x08, 64, 3];
        ext.extend_from_slice(b"ext");
        let data = b"\0other.h5\0/x\0";
        ext.extend_from_slice(&(data.len() as u16).to_le_bytes());
        ext.extend_from_slice(data);
        let user = vec![1, 0x08, 200, 1, b'u', 2, 0, 9, 9];
        for b in [hard, ext, user] {
            assert_eq!(enc(&dec(&b).unwrap()), b);
        }
        // The soft-link vector stores a 2-byte name length libhdf5 would write in 1 byte: it
        // round-trips as a value, and re-encodes with the narrow field.
        let mut soft = vec![1, 0x1d, 1];
        soft.extend_from_slice(&7u64.to_le_bytes());
        soft.push(1);
        soft.extend_from_slice(&4u16.to_le_bytes());
        soft.extend_from_slice(b"soft");
        soft.extend_from_slice(&7u16.to_le_bytes());
        soft.extend_from_slice(b"/contig");
        let l = dec(&soft).unwrap();
        let b = enc(&l);
        assert_eq!(b[1], 0x1c);
        assert_eq!(b.len(), soft.len() - 1);
    }

    #[test]
    fn name_widths_and_errors() {
        for (n, code) in [(255usize, 0u8), (256, 1), (70_000, 2)] {
            let l = Link {
                name: vec![b'n'; n],
                charset: CharSet::Utf8,
                creation_order: Some(-1),
                target: LinkTarget::Hard(UNDEFINED_ADDRESS),
            };
            assert_eq!(enc(&l)[1] & 0x03, code);
        }
        let ok = Link {
            name: b"x".to_vec(),
            charset: CharSet::Ascii,
            creation_order: None,
            target: LinkTarget::Soft(vec![b'/'; 65535]),
        };
        enc(&ok);
        let bad = [
            Link {
                name: Vec::new(),
                ..ok.clone()
            },
            Link {
                target: LinkTarget::Soft(vec![b'/'; 65536]),
                ..ok.clone()
            },
            Link {
                target: LinkTarget::UserDefined {
                    kind: 64,
                    data: vec![],
                },
                ..ok.clone()
            },
            Link {
                target: LinkTarget::External {
                    flags: 0,
                    file: b"a\0b".to_vec(),
                    path: b"/".to_vec(),
                },
                ..ok.clone()
            },
            Link {
                target: LinkTarget::External {
                    flags: 0x10,
                    file: b"a".to_vec(),
                    path: b"/".to_vec(),
                },
                ..ok.clone()
            },
        ];
        for l in bad {
            assert!(l.encode(S).is_err());
        }
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn target() -> impl Strategy<Value = LinkTarget> {
            let bytes = || proptest::collection::vec(any::<u8>(), 0..50);
            let cstr = || proptest::collection::vec(1u8.., 0..20);
            prop_oneof![
                any::<u64>().prop_map(LinkTarget::Hard),
                bytes().prop_map(LinkTarget::Soft),
                (0u8..16, cstr(), cstr())
                    .prop_map(|(flags, file, path)| { LinkTarget::External { flags, file, path } }),
                (65u8.., bytes()).prop_map(|(kind, data)| LinkTarget::UserDefined { kind, data }),
            ]
        }

        proptest! {
            #[test]
            fn round_trip(
                name in proptest::collection::vec(any::<u8>(), 1..300),
                utf8 in any::<bool>(),
                creation_order in proptest::option::of(any::<i64>()),
                target in target(),
            ) {
                let l = Link {
                    name,
                    charset: if utf8 { CharSet::Utf8 } else { CharSet::Ascii },
                    creation_order,
                    target,
                };
                let b = l.encode(S).unwrap();
                prop_assert_eq!(b.len(), l.encoded_len(S));
                prop_assert_eq!(dec(&b).unwrap(), l);
            }
        }
    }
}
