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

use crate::error::Result;
use crate::reader::{Reader, Sizes};

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
                free_space += r.remaining() as u64;
                break;
            }
            let at = r.pos();
            let index = r.u16()?;
            let reference_count = r.u16()?;
            r.skip(4)?;
            let size = r.length(sizes)?;
            if index == 0 {
                // Free space: its size covers its own header and must reach the end.
                let left = (r.remaining() + ohl) as u64;
                if size > left || (size < ohl as u64 && size != left) {
                    return Err(r.corrupted(format!(
                        "free space object at {at} of size {size} with {left} bytes left"
                    )));
                }
                free_space += left;
                break;
            }
            let len = r.check_len(size)?;
            let data = r.bytes(len)?.to_vec();
            // Padding to a multiple of 8; the last object may end flush with the collection.
            let pad = (8 - len % 8) % 8;
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
}
