//! Free-space managers (spec III.H, "Free-space Index"): the header (`FSHD`) and the serialized
//! section list (`FSSE`), version 0 of both.
//!
//! A header records what its manager tracks (total bytes, section counts), its creation
//! parameters (section classes, shrink and expand percents, the address space and the largest
//! section) and where the section list is (address, used and allocated bytes). The section list
//! stores the sections in *sets* of one size: a count (as wide as the fewest bytes holding the
//! header's serialized-section count), the size (as wide as the fewest bytes holding the
//! maximum section size), then per section its offset (`ceil(address bits / 8)` bytes), its
//! type (1 byte) and type-specific data; a lookup3 checksum ends the list. libhdf5 writes the
//! sets by increasing size and the sections of a set by increasing offset
//! ([`FreeSpaceSections::from_sections`] builds that order).
//!
//! Two clients use managers: the file itself (persisted free space; section types 0 "simple",
//! 1 "small" and 2 "large" of the paged strategy, none with data) and fractal heaps (types 0
//! "single", 1 "first row", 2 "normal row", 3 "indirect"; rows and indirect sections carry the
//! indirect block's heap offset, start row, start column and block count). [`SectionFormat`]
//! says how long each type's data is.
//!
//! Compatible with libhdf5 1.8–2.x. Example: a file manager with two 64-byte sections.
//!
//! ```
//! use h5_format::free_space::{FreeSpaceHeader, FreeSpaceSections, SectionFormat};
//! use h5_format::Sizes;
//!
//! let s = Sizes::EIGHT;
//! let sections = FreeSpaceSections::from_sections(0x200, 0x100, [(0x800, 64, 0), (0x400, 64, 0)]);
//! let mut header = FreeSpaceHeader::file_manager(0x100, (1 << 63) - 1);
//! header.summarize(&sections, s, SectionFormat::File)?;
//! header.sections_address = 0x200;
//! header.sections_alloc_len = header.sections_len;
//! let image = sections.encode(&header, s, SectionFormat::File)?;
//! let back = FreeSpaceSections::decode(&image, &header, s, 0x200, SectionFormat::File)?;
//! assert_eq!(back.iter().collect::<Vec<_>>(), [(0x400, 64, 0), (0x800, 64, 0)]);
//! # Ok::<(), h5_format::FormatError>(())
//! ```

use crate::btree2::{limit_enc_size, verify_checksum};
use crate::error::{FormatError, Result};
use crate::fixed_array::encode_error;
use crate::reader::{Reader, Sizes, UNDEFINED_ADDRESS};
use crate::writer::Writer;

/// Signature of a free-space manager header.
pub const HEADER_SIGNATURE: &[u8; 4] = b"FSHD";
/// Signature of a free-space section list.
pub const SECTIONS_SIGNATURE: &[u8; 4] = b"FSSE";

/// Section classes of the file client (libhdf5's simple, small and large sections).
pub const FILE_SECTION_CLASSES: u16 = 3;
/// libhdf5's shrink percent for the file's managers.
pub const FILE_SHRINK_PERCENT: u16 = 80;
/// libhdf5's expand percent for the file's managers.
pub const FILE_EXPAND_PERCENT: u16 = 120;

/// File section types.
pub mod file_section {
    /// A section of a non-paged file.
    pub const SIMPLE: u8 = 0;
    /// Paged strategy: a section inside one page (the small managers).
    pub const SMALL: u8 = 1;
    /// Paged strategy: whole pages or a page's tail (the large manager).
    pub const LARGE: u8 = 2;
}

/// Who a free-space manager works for (the header's client ID).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum FreeSpaceClient {
    /// 0: free space inside a fractal heap.
    FractalHeap,
    /// 1: free space of the file.
    File,
}

impl FreeSpaceClient {
    /// The on-disk client ID.
    pub fn as_u8(self) -> u8 {
        match self {
            Self::FractalHeap => 0,
            Self::File => 1,
        }
    }
}

/// How long the type-specific data of each section type is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum SectionFormat {
    /// The file client: types 0, 1 and 2, none with data.
    File,
    /// The fractal heap client: "first row" (1) and "indirect" (3) sections carry the
    /// indirect block's offset in the heap (`heap_offset_len` bytes, the width of the heap's
    /// offsets) and three 2-byte fields; "single" (0) and "normal row" (2) carry nothing.
    FractalHeap {
        /// Bytes of a heap offset.
        heap_offset_len: u8,
    },
}

impl SectionFormat {
    /// Bytes of data after a section of `kind`, or `None` for a type the client does not
    /// define.
    pub fn data_len(self, kind: u8) -> Option<usize> {
        match (self, kind) {
            (Self::File, 0..=2) => Some(0),
            (Self::FractalHeap { .. }, 0 | 2) => Some(0),
            (Self::FractalHeap { heap_offset_len }, 1 | 3) => {
                Some(usize::from(heap_offset_len) + 6)
            }
            _ => None,
        }
    }
}

/// A free-space manager header (`FSHD`, version 0).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct FreeSpaceHeader {
    /// File address of the header.
    pub address: u64,
    /// The client.
    pub client: FreeSpaceClient,
    /// Bytes of free space tracked.
    pub total_space: u64,
    /// Sections tracked.
    pub total_sections: u64,
    /// Sections stored in the section list.
    pub serial_sections: u64,
    /// Sections not stored ("ghost" sections the client rebuilds).
    pub ghost_sections: u64,
    /// Section classes of the client.
    pub section_classes: u16,
    /// Percent of the list's size under which its allocation shrinks.
    pub shrink_percent: u16,
    /// Percent by which the list's allocation grows.
    pub expand_percent: u16,
    /// Bits of the address space the sections lie in (log2 of its size).
    pub address_bits: u16,
    /// Largest section tracked.
    pub max_section_size: u64,
    /// Address of the section list ([`UNDEFINED_ADDRESS`] when there is none).
    pub sections_address: u64,
    /// Bytes of the section list used.
    pub sections_len: u64,
    /// Bytes allocated for the section list (at least `sections_len`).
    pub sections_alloc_len: u64,
}

/// Bytes before the first set of a section list: signature, version, header address.
fn sections_prefix_len(sizes: Sizes) -> usize {
    4 + 1 + usize::from(sizes.offset)
}

impl FreeSpaceHeader {
    /// The header's size on disk.
    #[allow(clippy::arithmetic_side_effects, reason = "constants and 1-byte sizes")]
    pub fn encoded_len(sizes: Sizes) -> usize {
        let l = usize::from(sizes.length);
        4 + 1 + 1 + 4 * l + 2 * 4 + l + usize::from(sizes.offset) + 2 * l + 4
    }

    /// A header for a file manager at `address` with libhdf5's parameters: three section
    /// classes, shrink 80 %, expand 120 %, sections up to `max_addr` bytes in an address
    /// space of `floor(log2(max_addr)) + 1` bits. libhdf5 takes `max_addr` from its file
    /// driver (2^63 − 1 for the POSIX drivers). No sections and no list yet.
    pub fn file_manager(address: u64, max_addr: u64) -> Self {
        Self {
            address,
            client: FreeSpaceClient::File,
            total_space: 0,
            total_sections: 0,
            serial_sections: 0,
            ghost_sections: 0,
            section_classes: FILE_SECTION_CLASSES,
            shrink_percent: FILE_SHRINK_PERCENT,
            expand_percent: FILE_EXPAND_PERCENT,
            address_bits: 64u32.saturating_sub(max_addr.leading_zeros()) as u16,
            max_section_size: max_addr,
            sections_address: UNDEFINED_ADDRESS,
            sections_len: 0,
            sections_alloc_len: 0,
        }
    }

    /// Decodes and checks a header at file `address`.
    pub fn decode(bytes: &[u8], sizes: Sizes, address: u64) -> Result<Self> {
        let mut r = Reader::new(bytes, "free-space manager header", address);
        r.signature(HEADER_SIGNATURE)?;
        let version = r.u8()?;
        if version != 0 {
            return Err(r.unsupported(format!("version {version}")));
        }
        let client = match r.u8()? {
            0 => FreeSpaceClient::FractalHeap,
            1 => FreeSpaceClient::File,
            c => return Err(r.corrupted(format!("client {c}"))),
        };
        let header = Self {
            address,
            client,
            total_space: r.length(sizes)?,
            total_sections: r.length(sizes)?,
            serial_sections: r.length(sizes)?,
            ghost_sections: r.length(sizes)?,
            section_classes: r.u16()?,
            shrink_percent: r.u16()?,
            expand_percent: r.u16()?,
            address_bits: r.u16()?,
            max_section_size: r.length(sizes)?,
            sections_address: r.offset(sizes)?,
            sections_len: r.length(sizes)?,
            sections_alloc_len: r.length(sizes)?,
        };
        verify_checksum(&mut r)?;
        if header.address_bits > 64 {
            return Err(r.unsupported(format!("{}-bit address space", header.address_bits)));
        }
        if header.serial_sections.checked_add(header.ghost_sections) != Some(header.total_sections)
        {
            return Err(r.corrupted(format!(
                "{} sections tracked but {} serialized and {} ghost",
                header.total_sections, header.serial_sections, header.ghost_sections
            )));
        }
        if header.sections_len > header.sections_alloc_len {
            return Err(r.corrupted(format!(
                "section list uses {} bytes of {} allocated",
                header.sections_len, header.sections_alloc_len
            )));
        }
        let min = (sections_prefix_len(sizes) as u64).saturating_add(4);
        if header.serial_sections > 0
            && (header.sections_address == UNDEFINED_ADDRESS || header.sections_len < min)
        {
            return Err(r.corrupted(format!(
                "{} serialized sections but a section list of {} bytes at {:#x}",
                header.serial_sections, header.sections_len, header.sections_address
            )));
        }
        Ok(header)
    }

    /// Encodes the header ([`Self::encoded_len`] bytes, checksum included).
    pub fn encode(&self, sizes: Sizes) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::encoded_len(sizes));
        w.bytes(HEADER_SIGNATURE);
        w.u8(0);
        w.u8(self.client.as_u8());
        w.length(sizes, self.total_space);
        w.length(sizes, self.total_sections);
        w.length(sizes, self.serial_sections);
        w.length(sizes, self.ghost_sections);
        w.u16(self.section_classes);
        w.u16(self.shrink_percent);
        w.u16(self.expand_percent);
        w.u16(self.address_bits);
        w.length(sizes, self.max_section_size);
        w.offset(sizes, self.sections_address);
        w.length(sizes, self.sections_len);
        w.length(sizes, self.sections_alloc_len);
        w.checksum_from(0);
        w.into_bytes()
    }

    /// Bytes of a set's section count in the list.
    pub fn count_len(&self) -> usize {
        usize::from(limit_enc_size(self.serial_sections))
    }

    /// Bytes of a set's section size in the list.
    pub fn size_len(&self) -> usize {
        usize::from(limit_enc_size(self.max_section_size))
    }

    /// Bytes of a section's offset in the list.
    pub fn offset_len(&self) -> usize {
        usize::from(self.address_bits).div_ceil(8)
    }

    /// Sets the counts, the total space and the section list's used length from `sections`
    /// (no ghost sections; the list's address and allocated length are the caller's).
    pub fn summarize(
        &mut self,
        sections: &FreeSpaceSections,
        sizes: Sizes,
        format: SectionFormat,
    ) -> Result<()> {
        let n = sections.iter().count() as u64;
        self.serial_sections = n;
        self.total_sections = n;
        self.ghost_sections = 0;
        self.total_space = sections
            .sets
            .iter()
            .map(|s| s.size.saturating_mul(s.records.len() as u64))
            .fold(0u64, u64::saturating_add);
        self.sections_len = sections.encoded_len(self, sizes, format)? as u64;
        Ok(())
    }
}

/// One section of a set.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct SectionRecord {
    /// Offset of the section in the client's address space (a file address for the file).
    pub offset: u64,
    /// Section type (see [`file_section`]).
    pub kind: u8,
    /// Type-specific data ([`SectionFormat::data_len`] bytes).
    pub data: Vec<u8>,
}

/// The sections of one size.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct SectionSet {
    /// Bytes of each section.
    pub size: u64,
    /// The sections.
    pub records: Vec<SectionRecord>,
}

/// A free-space section list (`FSSE`, version 0).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct FreeSpaceSections {
    /// File address of the list.
    pub address: u64,
    /// Address of the manager's header.
    pub header_address: u64,
    /// The sets, in stored order.
    pub sets: Vec<SectionSet>,
}

impl FreeSpaceSections {
    /// A list of `(offset, size, type)` sections without data, in libhdf5's order: sets by
    /// increasing size, sections of a set by increasing offset.
    pub fn from_sections(
        address: u64,
        header_address: u64,
        sections: impl IntoIterator<Item = (u64, u64, u8)>,
    ) -> Self {
        let mut all: Vec<(u64, u64, u8)> = sections.into_iter().collect();
        all.sort_by_key(|&(offset, size, _)| (size, offset));
        let mut sets: Vec<SectionSet> = Vec::new();
        for (offset, size, kind) in all {
            let record = SectionRecord {
                offset,
                kind,
                data: Vec::new(),
            };
            match sets.last_mut() {
                Some(set) if set.size == size => set.records.push(record),
                _ => sets.push(SectionSet {
                    size,
                    records: vec![record],
                }),
            }
        }
        Self {
            address,
            header_address,
            sets,
        }
    }

    /// Every section as `(offset, size, type)`, in stored order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, u8)> + '_ {
        self.sets
            .iter()
            .flat_map(|s| s.records.iter().map(move |r| (r.offset, s.size, r.kind)))
    }

    /// Decodes the section list of `header` at file `address` (`bytes`: at least
    /// `header.sections_len`, the structure's length).
    pub fn decode(
        bytes: &[u8],
        header: &FreeSpaceHeader,
        sizes: Sizes,
        address: u64,
        format: SectionFormat,
    ) -> Result<Self> {
        let structure = "free-space section list";
        let len = usize::try_from(header.sections_len)
            .ok()
            .filter(|&n| n <= bytes.len())
            .ok_or(FormatError::Truncated {
                structure,
                address,
                needed: header.sections_len,
                available: bytes.len() as u64,
            })?;
        let mut r = Reader::new(bytes.get(..len).unwrap_or_default(), structure, address);
        r.signature(SECTIONS_SIGNATURE)?;
        let version = r.u8()?;
        if version != 0 {
            return Err(r.unsupported(format!("version {version}")));
        }
        let header_address = r.offset(sizes)?;
        if header_address != header.address {
            return Err(r.corrupted(format!(
                "belongs to the header at {header_address:#x}, not {:#x}",
                header.address
            )));
        }
        let (count_len, size_len, offset_len) =
            (header.count_len(), header.size_len(), header.offset_len());
        let mut sets = Vec::new();
        let mut stored = 0u64;
        if header.serial_sections > 0 {
            // libhdf5 stops at the header's count: the used length may leave a gap before the
            // checksum (files libhdf5 changed after h5 wrote them have one).
            while stored < header.serial_sections && r.remaining() > 4 {
                let count = r.uint(count_len)?;
                let size = r.uint(size_len)?;
                if count == 0 {
                    return Err(r.corrupted(format!("empty set of {size}-byte sections")));
                }
                stored = stored.saturating_add(count);
                if stored > header.serial_sections {
                    return Err(r.corrupted(format!(
                        "more sections than the header's {}",
                        header.serial_sections
                    )));
                }
                // Each record takes at least its offset and type byte.
                r.check_len(count.saturating_mul((offset_len as u64).saturating_add(1)))?;
                let mut records = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    let offset = r.uint(offset_len)?;
                    let kind = r.u8()?;
                    let n = format
                        .data_len(kind)
                        .ok_or_else(|| r.corrupted(format!("section type {kind}")))?;
                    records.push(SectionRecord {
                        offset,
                        kind,
                        data: r.bytes(n)?.to_vec(),
                    });
                }
                sets.push(SectionSet { size, records });
            }
            if stored != header.serial_sections {
                return Err(r.corrupted(format!(
                    "{stored} sections stored but the header counts {}",
                    header.serial_sections
                )));
            }
        }
        // The gap (unused bytes, covered by the checksum).
        r.skip(r.remaining().saturating_sub(4))?;
        verify_checksum(&mut r)?;
        if !r.is_empty() {
            return Err(r.corrupted(format!("{} bytes after the checksum", r.remaining())));
        }
        Ok(Self {
            address,
            header_address,
            sets,
        })
    }

    /// Bytes of the encoded list with the field widths of `header`.
    pub fn encoded_len(
        &self,
        header: &FreeSpaceHeader,
        sizes: Sizes,
        format: SectionFormat,
    ) -> Result<usize> {
        let per_set = header.count_len().saturating_add(header.size_len());
        let mut n = sections_prefix_len(sizes).saturating_add(4);
        for set in &self.sets {
            n = n.saturating_add(per_set);
            for rec in &set.records {
                n = n
                    .saturating_add(header.offset_len())
                    .saturating_add(1)
                    .saturating_add(self.checked_data_len(rec, format)?);
            }
        }
        Ok(n)
    }

    fn checked_data_len(&self, rec: &SectionRecord, format: SectionFormat) -> Result<usize> {
        match format.data_len(rec.kind) {
            Some(n) if n == rec.data.len() => Ok(n),
            _ => Err(encode_error(
                "free-space section list",
                format!(
                    "a type {} section with {} bytes of data",
                    rec.kind,
                    rec.data.len()
                ),
            )),
        }
    }

    /// Encodes the list with the field widths of `header` (whose serialized-section count
    /// must match). The result is exactly `header.sections_len` bytes when the header was
    /// [`summarized`](FreeSpaceHeader::summarize) from this list.
    pub fn encode(
        &self,
        header: &FreeSpaceHeader,
        sizes: Sizes,
        format: SectionFormat,
    ) -> Result<Vec<u8>> {
        let count = self.iter().count() as u64;
        if count != header.serial_sections || self.header_address != header.address {
            return Err(encode_error(
                "free-space section list",
                format!(
                    "{count} sections of the header at {:#x} for a header at {:#x} counting {}",
                    self.header_address, header.address, header.serial_sections
                ),
            ));
        }
        let len = self.encoded_len(header, sizes, format)?;
        let mut w = Writer::with_capacity(len);
        w.bytes(SECTIONS_SIGNATURE);
        w.u8(0);
        w.offset(sizes, self.header_address);
        for set in &self.sets {
            w.uint(set.records.len() as u64, header.count_len());
            w.uint(set.size, header.size_len());
            for rec in &set.records {
                self.checked_data_len(rec, format)?;
                w.uint(rec.offset, header.offset_len());
                w.u8(rec.kind);
                w.bytes(&rec.data);
            }
        }
        w.checksum_from(0);
        Ok(w.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Sizes = Sizes::EIGHT;
    const MAX: u64 = (1 << 63) - 1;

    fn pair(sections: &[(u64, u64, u8)]) -> (FreeSpaceHeader, FreeSpaceSections) {
        let list = FreeSpaceSections::from_sections(0x2000, 0x1000, sections.iter().copied());
        let mut h = FreeSpaceHeader::file_manager(0x1000, MAX);
        h.summarize(&list, S, SectionFormat::File).unwrap();
        h.sections_address = 0x2000;
        h.sections_alloc_len = h.sections_len + 10;
        (h, list)
    }

    #[test]
    fn header_round_trips_and_rejects_damage() {
        let (h, _) = pair(&[(0x400, 64, 0), (0x800, 64, 0), (0x900, 16, 0)]);
        assert_eq!(
            (h.address_bits, h.total_space, h.total_sections),
            (63, 144, 3)
        );
        let b = h.encode(S);
        assert_eq!(b.len(), FreeSpaceHeader::encoded_len(S));
        assert_eq!(FreeSpaceHeader::decode(&b, S, 0x1000).unwrap(), h);
        for n in 0..b.len() {
            assert!(FreeSpaceHeader::decode(&b[..n], S, 0x1000).is_err());
        }
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x40;
            assert!(FreeSpaceHeader::decode(&c, S, 0x1000).is_err(), "byte {i}");
        }
        let mut bad = h.clone();
        bad.total_sections = 5;
        assert!(FreeSpaceHeader::decode(&bad.encode(S), S, 0x1000).is_err());
        let mut bad = h.clone();
        bad.sections_alloc_len = 1;
        assert!(FreeSpaceHeader::decode(&bad.encode(S), S, 0x1000).is_err());
        let mut bad = h;
        bad.address_bits = 65;
        assert!(matches!(
            FreeSpaceHeader::decode(&bad.encode(S), S, 0x1000),
            Err(FormatError::Unsupported { .. })
        ));
    }

    #[test]
    fn sections_are_grouped_by_size_and_round_trip() {
        let (h, list) = pair(&[(0x900, 64, 0), (0x400, 64, 0), (0x300, 16, 1)]);
        assert_eq!(list.sets.len(), 2);
        assert_eq!(list.sets[0].size, 16);
        assert_eq!(
            list.iter().collect::<Vec<_>>(),
            [(0x300, 16, 1), (0x400, 64, 0), (0x900, 64, 0)]
        );
        let b = list.encode(&h, S, SectionFormat::File).unwrap();
        assert_eq!(b.len() as u64, h.sections_len);
        // prefix 13, two sets of (1 + 8) + records of (8 + 1) each, checksum.
        assert_eq!(b.len(), 13 + 2 * 9 + 3 * 9 + 4);
        let back = FreeSpaceSections::decode(&b, &h, S, 0x2000, SectionFormat::File).unwrap();
        assert_eq!(back, list);
        for n in 0..b.len() {
            assert!(
                FreeSpaceSections::decode(&b[..n], &h, S, 0x2000, SectionFormat::File).is_err()
            );
        }
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x01;
            assert!(
                FreeSpaceSections::decode(&c, &h, S, 0x2000, SectionFormat::File).is_err(),
                "byte {i}"
            );
        }
    }

    #[test]
    fn counts_that_disagree_with_the_header_are_errors() {
        let (h, list) = pair(&[(0x400, 64, 0), (0x800, 64, 0)]);
        let mut other = h.clone();
        other.serial_sections = 3;
        other.total_sections = 3;
        assert!(list.encode(&other, S, SectionFormat::File).is_err());
        // A header claiming fewer sections than stored: re-sealed list, still refused.
        let b = list.encode(&h, S, SectionFormat::File).unwrap();
        let mut fewer = h.clone();
        fewer.serial_sections = 1;
        fewer.total_sections = 1;
        assert!(FreeSpaceSections::decode(&b, &fewer, S, 0x2000, SectionFormat::File).is_err());
        let mut wrong = h;
        wrong.address = 0x1008;
        assert!(FreeSpaceSections::decode(&b, &wrong, S, 0x2000, SectionFormat::File).is_err());
    }

    #[test]
    fn fractal_heap_sections_carry_their_data() {
        let format = SectionFormat::FractalHeap { heap_offset_len: 3 };
        let list = FreeSpaceSections {
            address: 0x2000,
            header_address: 0x1000,
            sets: vec![SectionSet {
                size: 512,
                records: vec![
                    SectionRecord {
                        offset: 0x40,
                        kind: 0,
                        data: vec![],
                    },
                    SectionRecord {
                        offset: 0x240,
                        kind: 3,
                        data: vec![1, 2, 3, 0, 0, 4, 0, 2, 0],
                    },
                ],
            }],
        };
        let mut h = FreeSpaceHeader::file_manager(0x1000, 0xffff);
        h.client = FreeSpaceClient::FractalHeap;
        h.section_classes = 4;
        h.summarize(&list, S, format).unwrap();
        h.sections_alloc_len = h.sections_len;
        h.sections_address = 0x2000;
        assert_eq!((h.address_bits, h.offset_len(), h.size_len()), (16, 2, 2));
        let b = list.encode(&h, S, format).unwrap();
        assert_eq!(b.len() as u64, h.sections_len);
        assert_eq!(
            FreeSpaceSections::decode(&b, &h, S, 0x2000, format).unwrap(),
            list
        );
        assert!(FreeSpaceSections::decode(&b, &h, S, 0x2000, SectionFormat::File).is_err());
        let mut bad = list;
        bad.sets[0].records[1].data.pop();
        assert!(bad.encode(&h, S, format).is_err());
    }

    #[test]
    fn a_gap_before_the_checksum_is_skipped() {
        let (mut h, list) = pair(&[(0x400, 64, 0), (0x800, 64, 0)]);
        let b = list.encode(&h, S, SectionFormat::File).unwrap();
        // Seven unused bytes before the checksum, as libhdf5 leaves when its list shrank.
        let mut g = b[..b.len() - 4].to_vec();
        g.extend([0u8; 7]);
        let sum = crate::checksum::lookup3(&g, 0);
        g.extend(sum.to_le_bytes());
        h.sections_len = g.len() as u64;
        h.sections_alloc_len = h.sections_len;
        let back = FreeSpaceSections::decode(&g, &h, S, 0x2000, SectionFormat::File).unwrap();
        assert_eq!(back.sets, list.sets);
        let mut bad = g.clone();
        bad[b.len() - 2] = 1;
        assert!(FreeSpaceSections::decode(&bad, &h, S, 0x2000, SectionFormat::File).is_err());
    }

    #[test]
    fn an_empty_manager_has_an_empty_list() {
        let (h, list) = pair(&[]);
        assert_eq!(h.serial_sections, 0);
        let b = list.encode(&h, S, SectionFormat::File).unwrap();
        assert_eq!(b.len(), 13 + 4);
        assert!(
            FreeSpaceSections::decode(&b, &h, S, 0x2000, SectionFormat::File)
                .unwrap()
                .sets
                .is_empty()
        );
    }
}
