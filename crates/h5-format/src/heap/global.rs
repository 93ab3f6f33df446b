//! Global heap collection (`GCOL`, version 1): the store of variable-length data and region
//! references.
//!
//! Layout (spec "Global Heap"):
//!
//! | field                | bytes          |
//! |----------------------|----------------|
//! | signature `GCOL`     | 4              |
//! | version (1)          | 1              |
//! | reserved             | 3              |
//! | collection size      | `sizes.length` (includes this header) |
//! | objects...           |                |
//!
//! Each object: heap object index (2), reference count (2), reserved (4), object size
//! (`sizes.length`), then the data padded to a multiple of 8 bytes. Index 0 is the free space
//! at the end of the collection; its size field counts the whole free region (its own header
//! included) and no object follows it. If fewer bytes than an object header remain at the end,
//! they are free space too.

use crate::error::{FormatError, Result};
use crate::reader::{Reader, Sizes, UNDEFINED_ADDRESS};
use crate::writer::Writer;

/// The smallest collection libhdf5 creates (`H5HG_MINSIZE`): a new collection is this size
/// unless its first object needs more.
pub const MIN_COLLECTION_SIZE: u64 = 4096;

const STRUCTURE: &str = "global heap collection";

/// Size of the collection header (signature, version, reserved, collection size).
fn header_len(sizes: Sizes) -> usize {
    8 + usize::from(sizes.length)
}

/// Size of an object header (index, reference count, reserved, size).
fn object_header_len(sizes: Sizes) -> usize {
    8 + usize::from(sizes.length)
}

/// One object of a collection.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct GlobalHeapObject {
    /// The object's index (> 0) within the collection.
    pub index: u16,
    /// Reference count (0 for objects libhdf5 does not count).
    pub reference_count: u16,
    /// The object's bytes (without padding).
    pub data: Vec<u8>,
}

/// A decoded global heap collection.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct GlobalHeapCollection {
    /// Total size of the collection in bytes, header included.
    pub collection_size: u64,
    /// Objects in file order (indices are unique).
    pub objects: Vec<GlobalHeapObject>,
    /// Bytes of free space (object 0 plus any trailing bytes too small for an object).
    pub free_space: u64,
}

impl GlobalHeapCollection {
    /// The full size of the collection, from a prefix of at least its header (16 bytes with
    /// 8-byte lengths). The metadata cache loads that prefix, then the whole collection.
    pub fn needed_len(prefix: &[u8], sizes: Sizes, address: u64) -> Result<usize> {
        let mut r = Reader::new(prefix, STRUCTURE, address);
        let size = Self::decode_header(&mut r, sizes)?;
        usize::try_from(size).map_err(|_| r.unsupported(format!("collection size {size}")))
    }

    fn decode_header(r: &mut Reader<'_>, sizes: Sizes) -> Result<u64> {
        r.signature(b"GCOL")?;
        let version = r.u8()?;
        if version != 1 {
            return Err(r.unsupported(format!("global heap version {version}")));
        }
        r.skip(3)?;
        let size = r.length(sizes)?;
        if size < header_len(sizes) as u64 {
            return Err(r.corrupted(format!("collection size {size} smaller than its header")));
        }
        Ok(size)
    }

    /// Decodes a whole collection from `bytes` (at least [`Self::needed_len`] bytes; bytes
    /// beyond the collection size are ignored).
    pub fn decode(bytes: &[u8], sizes: Sizes, address: u64) -> Result<Self> {
        let mut head = Reader::new(bytes, STRUCTURE, address);
        let collection_size = Self::decode_header(&mut head, sizes)?;
        let total = head.check_len(collection_size.saturating_sub(head.pos() as u64))?;
        // `r` covers exactly the objects area of the collection.
        let mut r = head.sub(total)?;
        let mut objects: Vec<GlobalHeapObject> = Vec::new();
        let mut free_space = 0u64;
        // One bit per possible index, to reject duplicates in linear time.
        let mut seen = vec![0u64; 1024];
        let ohl = object_header_len(sizes);
        while !r.is_empty() {
            if r.remaining() < ohl {
                free_space = free_space.saturating_add(r.remaining() as u64);
                break;
            }
            let at = r.pos();
            let index = r.u16()?;
            let reference_count = r.u16()?;
            r.skip(4)?;
            let size = r.length(sizes)?;
            if index == 0 {
                // Free space: its size covers its own header and must reach the end.
                let left = (r.remaining() as u64).saturating_add(ohl as u64);
                if size > left || (size < ohl as u64 && size != left) {
                    return Err(r.corrupted(format!(
                        "free space object at {at} of size {size} with {left} bytes left"
                    )));
                }
                free_space = free_space.saturating_add(left);
                break;
            }
            let len = r.check_len(size)?;
            let data = r.bytes(len)?.to_vec();
            // Padding to a multiple of 8; the last object may end flush with the collection.
            let pad = crate::datatype::pad8(len);
            r.skip(pad.min(r.remaining()))?;
            let (word, bit) = (usize::from(index / 64), 1u64 << (index % 64));
            if let Some(w) = seen.get_mut(word) {
                if *w & bit != 0 {
                    return Err(r.corrupted(format!("duplicate heap object index {index}")));
                }
                *w |= bit;
            }
            objects.push(GlobalHeapObject {
                index,
                reference_count,
                data,
            });
        }
        Ok(Self {
            collection_size,
            objects,
            free_space,
        })
    }

    /// A collection of libhdf5's size for `objects`: [`MIN_COLLECTION_SIZE`] bytes, or exactly
    /// what the objects need when that is more, the rest free space. Errors on index 0 or
    /// duplicate indices.
    pub fn with_objects(sizes: Sizes, objects: Vec<GlobalHeapObject>) -> Result<Self> {
        let used = Self::used_len(sizes, &objects)?;
        let collection_size = used.max(MIN_COLLECTION_SIZE);
        Ok(Self {
            collection_size,
            objects,
            free_space: collection_size.saturating_sub(used),
        })
    }

    /// Bytes of the header and the objects (padded), checking the indices.
    fn used_len(sizes: Sizes, objects: &[GlobalHeapObject]) -> Result<u64> {
        let mut seen = std::collections::HashSet::with_capacity(objects.len());
        let mut used = header_len(sizes) as u64;
        for o in objects {
            if o.index == 0 || !seen.insert(o.index) {
                return Err(encode_error(format!(
                    "object index {} (0 or repeated)",
                    o.index
                )));
            }
            let padded = (o.data.len() as u64).div_ceil(8).saturating_mul(8);
            used = used
                .saturating_add(object_header_len(sizes) as u64)
                .saturating_add(padded);
        }
        Ok(used)
    }

    /// Encodes the collection (`collection_size` bytes): the header, each object padded with
    /// zeros to a multiple of 8, then the free space as object 0 (zero-filled) when it can hold
    /// an object header, else as zero bytes. Errors unless `collection_size` is the header,
    /// objects and free space together, or on a bad index or a size its field cannot hold.
    pub fn encode(&self, sizes: Sizes) -> Result<Vec<u8>> {
        let used = Self::used_len(sizes, &self.objects)?;
        let total = used.checked_add(self.free_space);
        if total != Some(self.collection_size) {
            return Err(encode_error(format!(
                "collection size {} is not {used} bytes of objects plus {} free",
                self.collection_size, self.free_space
            )));
        }
        let max_len = max_length(sizes);
        if self.collection_size > max_len {
            return Err(encode_error(format!(
                "collection size {} does not fit {}-byte lengths",
                self.collection_size, sizes.length
            )));
        }
        let len = usize::try_from(self.collection_size)
            .map_err(|_| encode_error(format!("collection size {}", self.collection_size)))?;
        let mut w = Writer::with_capacity(len);
        w.bytes(b"GCOL");
        w.u8(1);
        w.zeros(3);
        w.length(sizes, self.collection_size);
        for o in &self.objects {
            w.u16(o.index);
            w.u16(o.reference_count);
            w.zeros(4);
            w.length(sizes, o.data.len() as u64);
            w.bytes(&o.data);
            w.zeros(crate::datatype::pad8(o.data.len()));
        }
        let ohl = object_header_len(sizes);
        // Fits in usize: the whole collection does.
        let free = self.free_space as usize;
        if free >= ohl {
            w.u16(0);
            w.u16(0);
            w.zeros(4);
            w.length(sizes, self.free_space);
            w.zeros(free.saturating_sub(ohl));
        } else {
            w.zeros(free);
        }
        Ok(w.into_bytes())
    }

    /// The data of the object with `index`, if present.
    pub fn get(&self, index: u32) -> Option<&[u8]> {
        self.objects
            .iter()
            .find(|o| u32::from(o.index) == index)
            .map(|o| o.data.as_slice())
    }
}

/// A global heap ID: where one object lives (as stored in variable-length data and region
/// references).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct GlobalHeapId {
    /// File address of the collection.
    pub collection_address: u64,
    /// Index of the object within the collection.
    pub index: u32,
}

impl GlobalHeapId {
    /// Appends the ID ([`Self::encoded_len`] bytes).
    pub fn encode(&self, sizes: Sizes, w: &mut Writer) {
        w.offset(sizes, self.collection_address);
        w.u32(self.index);
    }

    /// Encoded size: an address plus a 4-byte index.
    pub fn encoded_len(sizes: Sizes) -> usize {
        usize::from(sizes.offset) + 4
    }

    /// Decodes an ID from the start of `bytes` (an address of `sizes.offset` bytes, then a
    /// 4-byte index). `address` locates the bytes for errors. An undefined collection address
    /// (a null vlen element) is returned as [`crate::UNDEFINED_ADDRESS`].
    pub fn decode(bytes: &[u8], sizes: Sizes, address: u64) -> Result<Self> {
        let mut r = Reader::new(bytes, "global heap ID", address);
        let collection_address = r.offset(sizes)?;
        let index = r.u32()?;
        Ok(Self {
            collection_address,
            index,
        })
    }
}

fn max_length(sizes: Sizes) -> u64 {
    crate::reader::all_ones(usize::from(sizes.length))
}

fn encode_error(reason: String) -> FormatError {
    FormatError::Unsupported {
        structure: STRUCTURE,
        address: UNDEFINED_ADDRESS,
        what: reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FormatError;

    /// A 72-byte collection (8-byte sizes): object 1 "hello" (refcount 1, padded to 8),
    /// object 3 of 0 bytes, then 16 bytes of free space (object 0 of size 16).
    fn image() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"GCOL\x01\0\0\0");
        b.extend_from_slice(&72u64.to_le_bytes());
        b.extend_from_slice(&[1, 0, 1, 0, 0, 0, 0, 0]);
        b.extend_from_slice(&5u64.to_le_bytes());
        b.extend_from_slice(b"hello\0\0\0");
        b.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0]);
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        b.extend_from_slice(&16u64.to_le_bytes());
        assert_eq!(b.len(), 72);
        b
    }

    #[test]
    fn decodes_objects_and_free_space() {
        let b = image();
        assert_eq!(
            GlobalHeapCollection::needed_len(&b[..16], Sizes::EIGHT, 0).unwrap(),
            72
        );
        let c = GlobalHeapCollection::decode(&b, Sizes::EIGHT, 0x800).unwrap();
        assert_eq!(c.collection_size, 72);
        assert_eq!(c.objects.len(), 2);
        assert_eq!(c.get(1), Some(&b"hello"[..]));
        assert_eq!(c.objects[0].reference_count, 1);
        assert_eq!(c.get(3), Some(&b""[..]));
        assert_eq!(c.get(0), None);
        assert_eq!(c.get(2), None);
        assert_eq!(c.free_space, 16);
    }

    #[test]
    fn trailing_bytes_too_small_for_an_object_are_free() {
        let mut b = image();
        b.truncate(64);
        b[8] = 64;
        let c = GlobalHeapCollection::decode(&b, Sizes::EIGHT, 0).unwrap();
        assert_eq!(c.free_space, 8);
        assert_eq!(c.objects.len(), 2);
    }

    #[test]
    fn corruption_is_an_error() {
        let b = image();
        for n in 0..b.len() {
            assert!(
                GlobalHeapCollection::decode(&b[..n], Sizes::EIGHT, 0).is_err(),
                "length {n}"
            );
        }
        let mut x = b.clone();
        x[1] = b'X';
        assert!(GlobalHeapCollection::decode(&x, Sizes::EIGHT, 0).is_err());
        let mut x = b.clone();
        x[4] = 2;
        assert!(matches!(
            GlobalHeapCollection::decode(&x, Sizes::EIGHT, 0),
            Err(FormatError::Unsupported { .. })
        ));
        // Huge object size.
        let mut x = b.clone();
        x[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(GlobalHeapCollection::decode(&x, Sizes::EIGHT, 0).is_err());
        // Huge collection size.
        let mut x = b.clone();
        x[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(GlobalHeapCollection::decode(&x, Sizes::EIGHT, 0).is_err());
        // Collection size below the header.
        let mut x = b.clone();
        x[8..16].copy_from_slice(&4u64.to_le_bytes());
        assert!(GlobalHeapCollection::needed_len(&x, Sizes::EIGHT, 0).is_err());
        // Free space claiming more than is left.
        let mut x = b.clone();
        x[64..72].copy_from_slice(&17u64.to_le_bytes());
        assert!(GlobalHeapCollection::decode(&x, Sizes::EIGHT, 0).is_err());
        // Duplicate index.
        let mut x = b.clone();
        x[40] = 1;
        assert!(GlobalHeapCollection::decode(&x, Sizes::EIGHT, 0).is_err());
    }

    #[test]
    fn heap_ids() {
        let b = [0x00, 0x08, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0];
        let id = GlobalHeapId::decode(&b, Sizes::EIGHT, 0).unwrap();
        assert_eq!(
            id,
            GlobalHeapId {
                collection_address: 0x800,
                index: 7
            }
        );
        assert_eq!(GlobalHeapId::encoded_len(Sizes::EIGHT), 12);
        let s4 = Sizes::new(4, 8, "t", 0).unwrap();
        let id = GlobalHeapId::decode(&[0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0], s4, 0).unwrap();
        assert_eq!(id.collection_address, crate::UNDEFINED_ADDRESS);
        for n in 0..b.len() {
            assert!(GlobalHeapId::decode(&b[..n], Sizes::EIGHT, 0).is_err());
        }
    }

    #[test]
    fn encodes_byte_exact_and_round_trips() {
        let b = image();
        let c = GlobalHeapCollection::decode(&b, Sizes::EIGHT, 0).unwrap();
        assert_eq!(c.encode(Sizes::EIGHT).unwrap(), b);
        // Trailing bytes too small for an object header.
        let mut t = image();
        t.truncate(64);
        t[8] = 64;
        let c = GlobalHeapCollection::decode(&t, Sizes::EIGHT, 0).unwrap();
        assert_eq!(c.encode(Sizes::EIGHT).unwrap(), t);
        // libhdf5-sized collections, several sizes.
        for s in [Sizes::EIGHT, Sizes::new(4, 4, "t", 0).unwrap()] {
            let objs = vec![
                GlobalHeapObject {
                    index: 1,
                    reference_count: 0,
                    data: b"abc".to_vec(),
                },
                GlobalHeapObject {
                    index: 2,
                    reference_count: 3,
                    data: vec![7; 16],
                },
            ];
            let c = GlobalHeapCollection::with_objects(s, objs.clone()).unwrap();
            assert_eq!(c.collection_size, MIN_COLLECTION_SIZE);
            let e = c.encode(s).unwrap();
            assert_eq!(e.len(), 4096);
            assert_eq!(GlobalHeapCollection::decode(&e, s, 0).unwrap(), c);
            let big = vec![GlobalHeapObject {
                index: 1,
                reference_count: 1,
                data: vec![1; 5000],
            }];
            let c = GlobalHeapCollection::with_objects(s, big).unwrap();
            assert_eq!(c.free_space, 0);
            assert_eq!(
                GlobalHeapCollection::decode(&c.encode(s).unwrap(), s, 0).unwrap(),
                c
            );
            let mut dup = objs.clone();
            dup[1].index = 1;
            assert!(GlobalHeapCollection::with_objects(s, dup).is_err());
            let mut zero = objs.clone();
            zero[0].index = 0;
            assert!(GlobalHeapCollection::with_objects(s, zero).is_err());
            let mut wrong = GlobalHeapCollection::with_objects(s, objs).unwrap();
            wrong.free_space += 1;
            assert!(wrong.encode(s).is_err());
        }
        let s2 = Sizes::new(8, 2, "t", 0).unwrap();
        let huge = vec![GlobalHeapObject {
            index: 1,
            reference_count: 1,
            data: vec![0; 70000],
        }];
        let c = GlobalHeapCollection::with_objects(s2, huge).unwrap();
        assert!(matches!(c.encode(s2), Err(FormatError::Unsupported { .. })));
    }

    #[test]
    fn heap_id_round_trip() {
        for id in [
            GlobalHeapId {
                collection_address: 0x800,
                index: 7,
            },
            GlobalHeapId {
                collection_address: crate::UNDEFINED_ADDRESS,
                index: 0,
            },
        ] {
            let mut w = Writer::new();
            id.encode(Sizes::EIGHT, &mut w);
            assert_eq!(w.len(), GlobalHeapId::encoded_len(Sizes::EIGHT));
            assert_eq!(
                GlobalHeapId::decode(w.as_slice(), Sizes::EIGHT, 0).unwrap(),
                id
            );
        }
    }
}
