//! References (datatype class 7) as stored in dataset and attribute elements and in the global
//! heap.
//!
//! * **Object reference** (`H5R_OBJECT1`, reference type 0): the referenced object header's
//!   address (`sizes.offset` bytes); 0 is the null reference.
//! * **Dataset region reference** (`H5R_DATASET_REGION1`, type 1): a global heap ID (collection
//!   address, object index; address 0 is the null reference) whose object holds the dataset's
//!   object header address followed by a serialized selection ([`crate::selection`]);
//!   [`RegionObject`].
//! * **Revised reference** (HDF5 1.12's `H5T_STD_REF`, datatype version 4, reference types 2
//!   object, 3 region, 4 attribute): the encoded reference ([`RevisedRef`]) starts with its
//!   type and flags bytes; an object reference to the same file is stored whole in the element
//!   (`type, flags, token size, token`, zero padded), every other one keeps its type and flags
//!   bytes in the element, then the length of the rest (4 bytes) and a global heap ID whose
//!   object holds the rest ([`RevisedElement`]). A type byte of 0 is the null reference.
//!
//! The rest of an encoded revised reference (facts from libhdf5's `H5R__encode` and the files
//! it writes): the object token (a size byte, then the token: the object header address,
//! little endian, in `sizes.offset` bytes for the native file format), then for an external
//! reference (flag [`EXTERNAL`]) the file name (2-byte length, bytes), then for a region the
//! selection's length (4 bytes), the dataspace rank (4 bytes) and the serialized selection, for
//! an attribute its name (2-byte length, bytes).

use crate::error::{FormatError, Result};
use crate::heap::global::GlobalHeapId;
use crate::reader::{Reader, Sizes};
use crate::selection::{MAX_RANK, Selection, SelectionVersions};
use crate::writer::Writer;

/// Flag of a revised reference: it names an object in another file, whose name is stored.
pub const EXTERNAL: u8 = 0x01;

/// Longest name (file or attribute) a revised reference holds (libhdf5's limit).
pub const MAX_NAME_LEN: usize = 1 << 16;

/// The global heap object of a dataset region reference (`H5R_DATASET_REGION1`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RegionObject {
    /// The dataset's object header address.
    pub object: u64,
    /// The selected elements.
    pub selection: Selection,
}

impl RegionObject {
    /// Decodes the heap object `bytes` (found in the collection at `address`).
    pub fn decode(bytes: &[u8], sizes: Sizes, address: u64) -> Result<RegionObject> {
        let mut r = Reader::new(bytes, "dataset region reference", address);
        let object = r.offset(sizes)?;
        let selection = Selection::decode(&mut r)?;
        Ok(RegionObject { object, selection })
    }

    /// The heap object, its selection in the versions `how` asks for.
    pub fn encode(&self, sizes: Sizes, how: SelectionVersions) -> Result<Vec<u8>> {
        let sel = self.selection.encode(how)?;
        let mut w = Writer::with_capacity(usize::from(sizes.offset).saturating_add(sel.len()));
        w.offset(sizes, self.object);
        w.bytes(&sel);
        Ok(w.into_bytes())
    }
}

/// What a revised reference refers to.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RevisedTarget {
    /// The object itself (`H5R_OBJECT2`).
    Object,
    /// Elements of a dataset (`H5R_DATASET_REGION2`).
    Region {
        /// The rank of the dataset's dataspace when the reference was made.
        rank: usize,
        /// The selected elements.
        selection: Selection,
    },
    /// An attribute of the object (`H5R_ATTR`), by name.
    Attribute(String),
}

/// One revised reference, decoded from its encoding.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RevisedRef {
    /// The referenced object's header address (its token).
    pub object: u64,
    /// The file the object is in, for an external reference (`None`: the reference's own file).
    pub file: Option<String>,
    /// What of the object it refers to.
    pub target: RevisedTarget,
}

/// Reference type numbers of revised references (`H5R_type_t`).
mod kind {
    pub(super) const OBJECT: u8 = 2;
    pub(super) const REGION: u8 = 3;
    pub(super) const ATTRIBUTE: u8 = 4;
}

fn read_name(r: &mut Reader<'_>, what: &str) -> Result<String> {
    let n = usize::from(r.u16()?);
    let b = r.bytes(n)?;
    String::from_utf8(b.to_vec()).map_err(|_| r.corrupted(format!("{what} is not UTF-8")))
}

fn write_name(w: &mut Writer, name: &str, what: &str) -> Result<()> {
    let n = u16::try_from(name.len()).map_err(|_| FormatError::Unsupported {
        structure: "revised reference",
        address: crate::UNDEFINED_ADDRESS,
        what: format!("a {what} of {} bytes", name.len()),
    })?;
    w.u16(n);
    w.bytes(name.as_bytes());
    Ok(())
}

impl RevisedRef {
    /// Decodes a whole encoded reference (type, flags, then the rest), as stored inline or put
    /// back together from an element and its heap object; `address` locates it for errors.
    /// Bytes after the reference (padding) are ignored.
    pub fn decode(bytes: &[u8], address: u64) -> Result<RevisedRef> {
        let mut r = Reader::new(bytes, "revised reference", address);
        let ty = r.u8()?;
        let flags = r.u8()?;
        if flags & !EXTERNAL != 0 {
            return Err(r.corrupted(format!("reference flags {flags:#04x}")));
        }
        let token_size = usize::from(r.u8()?);
        let token = r.bytes(token_size)?;
        if token.iter().skip(8).any(|&b| b != 0) {
            return Err(r.unsupported(format!("an object token of {token_size} bytes")));
        }
        let object = token
            .iter()
            .take(8)
            .rev()
            .fold(0u64, |a, &b| (a << 8) | u64::from(b));
        let file = if flags & EXTERNAL != 0 {
            Some(read_name(&mut r, "file name")?)
        } else {
            None
        };
        let target = match ty {
            kind::OBJECT => RevisedTarget::Object,
            kind::REGION => {
                let len = r.u32()?;
                let rank = r.u32()?;
                let rank = usize::try_from(rank)
                    .ok()
                    .filter(|n| *n <= MAX_RANK)
                    .ok_or_else(|| r.corrupted(format!("region rank {rank}")))?;
                let n = r.check_len(u64::from(len))?;
                let mut sel = r.sub(n)?;
                let selection = Selection::decode(&mut sel)?;
                if selection.rank().is_some_and(|k| k != rank) {
                    return Err(r.corrupted(format!(
                        "a selection of rank {:?} in a region of rank {rank}",
                        selection.rank()
                    )));
                }
                RevisedTarget::Region { rank, selection }
            }
            kind::ATTRIBUTE => RevisedTarget::Attribute(read_name(&mut r, "attribute name")?),
            t => return Err(r.corrupted(format!("revised reference type {t}"))),
        };
        Ok(RevisedRef {
            object,
            file,
            target,
        })
    }

    /// The reference type byte (2 object, 3 region, 4 attribute).
    pub fn type_byte(&self) -> u8 {
        match self.target {
            RevisedTarget::Object => kind::OBJECT,
            RevisedTarget::Region { .. } => kind::REGION,
            RevisedTarget::Attribute(_) => kind::ATTRIBUTE,
        }
    }

    /// The whole encoding (type, flags, token, ...); the token is the address in
    /// `sizes.offset` bytes, a region's selection in the versions `how` asks for.
    pub fn encode(&self, sizes: Sizes, how: SelectionVersions) -> Result<Vec<u8>> {
        let mut w = Writer::new();
        w.u8(self.type_byte());
        w.u8(if self.file.is_some() { EXTERNAL } else { 0 });
        w.u8(sizes.offset);
        w.offset(sizes, self.object);
        if let Some(f) = &self.file {
            write_name(&mut w, f, "file name")?;
        }
        match &self.target {
            RevisedTarget::Object => {}
            RevisedTarget::Region { rank, selection } => {
                let sel = selection.encode(how)?;
                let len = u32::try_from(sel.len()).map_err(|_| FormatError::Unsupported {
                    structure: "revised reference",
                    address: crate::UNDEFINED_ADDRESS,
                    what: "a selection over 4 GiB".into(),
                })?;
                w.u32(len);
                w.u32(*rank as u32);
                w.bytes(&sel);
            }
            RevisedTarget::Attribute(name) => write_name(&mut w, name, "attribute name")?,
        }
        Ok(w.into_bytes())
    }

    /// Whether this reference is stored whole in its element (an object reference to the
    /// element's own file) rather than in the global heap.
    pub fn is_inline(&self) -> bool {
        self.target == RevisedTarget::Object && self.file.is_none()
    }
}

/// Size of a revised reference element in a file of `sizes` (libhdf5: the larger of a heap
/// element — type, flags, length, heap ID — and an inline object reference).
pub fn revised_element_size(sizes: Sizes) -> usize {
    let heap = GlobalHeapId::encoded_len(sizes).saturating_add(2 + 4);
    let inline = usize::from(sizes.offset).saturating_add(3);
    heap.max(inline)
}

/// A revised reference element as stored in a dataset or attribute.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RevisedElement {
    /// The null reference.
    Null,
    /// The whole encoded reference is in the element (trailing padding included).
    Inline(Vec<u8>),
    /// The type and flags are in the element, the rest in the global heap.
    Heap {
        /// Type and flags bytes.
        header: [u8; 2],
        /// Bytes of the heap object that belong to the reference.
        len: u32,
        /// The heap object.
        id: GlobalHeapId,
    },
}

impl RevisedElement {
    /// Decodes one element (`bytes`: the element, `sizes` of its file).
    pub fn decode(bytes: &[u8], sizes: Sizes, address: u64) -> Result<RevisedElement> {
        let mut r = Reader::new(bytes, "revised reference element", address);
        let ty = r.u8()?;
        let flags = r.u8()?;
        if ty == 0 {
            return Ok(RevisedElement::Null);
        }
        if ty == kind::OBJECT && flags & EXTERNAL == 0 {
            return Ok(RevisedElement::Inline(bytes.to_vec()));
        }
        let len = r.u32()?;
        let id = GlobalHeapId::decode(r.bytes(GlobalHeapId::encoded_len(sizes))?, sizes, address)?;
        Ok(RevisedElement::Heap {
            header: [ty, flags],
            len,
            id,
        })
    }

    /// The element's bytes (`size` of them, zero padded): an inline reference, or a heap
    /// element for the encoded reference `encoded` whose rest (after type and flags) was
    /// stored as heap object `id`. Fails when the reference does not fit.
    pub fn encode(
        encoded: &[u8],
        id: Option<GlobalHeapId>,
        sizes: Sizes,
        size: usize,
    ) -> Result<Vec<u8>> {
        let too_big = || FormatError::Unsupported {
            structure: "revised reference element",
            address: crate::UNDEFINED_ADDRESS,
            what: format!("a reference that does not fit in {size} bytes"),
        };
        let mut w = Writer::with_capacity(size);
        match id {
            None => w.bytes(encoded),
            Some(id) => {
                w.bytes(encoded.get(..2).ok_or_else(too_big)?);
                let rest = u32::try_from(encoded.len().saturating_sub(2)).map_err(|_| too_big())?;
                w.u32(rest);
                id.encode(sizes, &mut w);
            }
        }
        let pad = size.checked_sub(w.len()).ok_or_else(too_big)?;
        w.zeros(pad);
        Ok(w.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// `/revised` of fixtures/files/references_latest.h5 (libhdf5 1.14.4 through its C API):
    /// the five elements and the heap objects of the three stored in the heap.
    const ELEMENTS: [&str; 5] = [
        "020008b30000000000000000000000000000",
        "020008bf010000000000000000001f000000",
        "030039000000600800000000000008000000",
        "030041000000600800000000000009000000",
        "04001000000060080000000000000a000000",
    ];
    const REGION_BLOCK: &str = "08b3000000000000001e00000002000000020000000300000001020200000001000100010002000100010001000200\
        00000000000000000000";
    const REGION_POINTS: &str = "08b3000000000000001b000000020000000100000002000000020200000003000000000005000300020001\
        00000000000000000000000000000000000000000000";
    const ATTRIBUTE: &str = "08b3000000000000000500756e697473";

    fn whole(element: &RevisedElement, heap: &str) -> Vec<u8> {
        match element {
            RevisedElement::Heap { header, len, .. } => {
                let mut b = header.to_vec();
                b.extend_from_slice(&hex(heap)[..*len as usize]);
                b
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn decodes_what_libhdf5_wrote() {
        let s = Sizes::EIGHT;
        assert_eq!(revised_element_size(s), 18);
        let e: Vec<RevisedElement> = ELEMENTS
            .iter()
            .map(|h| RevisedElement::decode(&hex(h), s, 0).unwrap())
            .collect();
        let RevisedElement::Inline(b) = &e[0] else {
            panic!("{:?}", e[0])
        };
        let r = RevisedRef::decode(b, 0).unwrap();
        assert_eq!(
            (r.object, &r.target, &r.file),
            (0xb3, &RevisedTarget::Object, &None)
        );
        let RevisedElement::Inline(b) = &e[1] else {
            panic!("{:?}", e[1])
        };
        assert_eq!(RevisedRef::decode(b, 0).unwrap().object, 0x1bf);
        assert!(matches!(
            e[2],
            RevisedElement::Heap {
                len: 57,
                id: GlobalHeapId {
                    collection_address: 0x860,
                    index: 8
                },
                ..
            }
        ));
        let r = RevisedRef::decode(&whole(&e[2], REGION_BLOCK), 0).unwrap();
        assert_eq!(r.object, 0xb3);
        assert_eq!(
            r.target,
            RevisedTarget::Region {
                rank: 2,
                selection: Selection::Regular {
                    start: vec![1, 1],
                    stride: vec![1, 1],
                    count: vec![1, 1],
                    block: vec![2, 2]
                }
            }
        );
        let r = RevisedRef::decode(&whole(&e[3], REGION_POINTS), 0).unwrap();
        assert_eq!(
            r.target,
            RevisedTarget::Region {
                rank: 2,
                selection: Selection::Points {
                    rank: 2,
                    coords: vec![0, 0, 5, 3, 2, 1]
                }
            }
        );
        let r = RevisedRef::decode(&whole(&e[4], ATTRIBUTE), 0).unwrap();
        assert_eq!(r.target, RevisedTarget::Attribute("units".into()));
        assert_eq!(
            RevisedElement::decode(&[0; 18], s, 0).unwrap(),
            RevisedElement::Null
        );
    }

    #[test]
    fn encodes_elements_libhdf5_reads() {
        let s = Sizes::EIGHT;
        let obj = RevisedRef {
            object: 0xb3,
            file: None,
            target: RevisedTarget::Object,
        };
        assert!(obj.is_inline());
        let enc = obj.encode(s, SelectionVersions::Compact).unwrap();
        assert_eq!(
            RevisedElement::encode(&enc, None, s, 18).unwrap(),
            hex(ELEMENTS[0])
        );
        let attr = RevisedRef {
            object: 0xb3,
            file: None,
            target: RevisedTarget::Attribute("units".into()),
        };
        let enc = attr.encode(s, SelectionVersions::Compact).unwrap();
        assert_eq!(&enc[2..], hex(ATTRIBUTE).as_slice());
        let id = GlobalHeapId {
            collection_address: 0x860,
            index: 10,
        };
        assert_eq!(
            RevisedElement::encode(&enc, Some(id), s, 18).unwrap(),
            hex(ELEMENTS[4])
        );
        // A region and an external reference survive a round trip.
        let region = RevisedRef {
            object: 0x1234,
            file: Some("other.h5".into()),
            target: RevisedTarget::Region {
                rank: 1,
                selection: Selection::Points {
                    rank: 1,
                    coords: vec![4, 2],
                },
            },
        };
        let enc = region.encode(s, SelectionVersions::Compatible).unwrap();
        assert_eq!(RevisedRef::decode(&enc, 0).unwrap(), region);
        assert!(
            RevisedElement::encode(&enc, None, s, 18).is_err(),
            "too long inline"
        );
    }

    #[test]
    fn damaged_references_are_errors() {
        let good = RevisedRef {
            object: 1,
            file: None,
            target: RevisedTarget::Attribute("a".into()),
        }
        .encode(Sizes::EIGHT, SelectionVersions::Compact)
        .unwrap();
        for cut in 0..good.len() {
            assert!(RevisedRef::decode(&good[..cut], 0).is_err(), "cut at {cut}");
        }
        let mut bad = good.clone();
        bad[0] = 9;
        assert!(RevisedRef::decode(&bad, 0).is_err());
        let mut bad = good.clone();
        bad[1] = 0x80;
        assert!(RevisedRef::decode(&bad, 0).is_err());
        // A 16-byte token with high bytes set.
        let mut bad = vec![2, 0, 16];
        bad.extend_from_slice(&[1; 16]);
        assert!(matches!(
            RevisedRef::decode(&bad, 0),
            Err(FormatError::Unsupported { .. })
        ));
        // A region whose selection length runs past the end.
        let mut bad = vec![3, 0, 8, 1, 0, 0, 0, 0, 0, 0, 0];
        bad.extend_from_slice(&1000u32.to_le_bytes());
        bad.extend_from_slice(&1u32.to_le_bytes());
        assert!(RevisedRef::decode(&bad, 0).is_err());
        assert!(RevisedElement::decode(&[3, 0, 1], Sizes::EIGHT, 0).is_err());
        let region = RegionObject {
            object: 0x320,
            selection: Selection::All,
        };
        let b = region
            .encode(Sizes::EIGHT, SelectionVersions::Compatible)
            .unwrap();
        assert_eq!(RegionObject::decode(&b, Sizes::EIGHT, 0).unwrap(), region);
        for cut in 0..b.len() {
            assert!(RegionObject::decode(&b[..cut], Sizes::EIGHT, 0).is_err());
        }
    }

    proptest::proptest! {
        /// Arbitrary bytes never panic the decoders of references and selections: they decode
        /// or are a typed error.
        #[test]
        fn arbitrary_bytes_are_decoded_or_refused(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..96)) {
            let _ = RevisedRef::decode(&bytes, 0);
            let _ = RevisedElement::decode(&bytes, Sizes::EIGHT, 0);
            let _ = RegionObject::decode(&bytes, Sizes::EIGHT, 0);
            let mut r = Reader::new(&bytes, "t", 0);
            if let Ok(sel) = Selection::decode(&mut r) {
                let dims = [7u64, 5];
                let _ = (sel.check_extent(&dims), sel.num_elements(&dims), sel.bounds(&dims));
                let _ = sel.block_list(1000);
            }
        }
    }
}
