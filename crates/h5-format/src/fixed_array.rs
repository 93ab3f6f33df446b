//! Fixed arrays (chunk index type 3): the header (`FAHD`), the data block (`FADB`) and its
//! pages, plus the chunk-index element format shared with extensible arrays.
//!
//! A fixed array holds `n` elements in one data block. When `n` exceeds the page size
//! (`2^page_bits` elements) the data block is *paged*: the block itself holds only a bitmap of
//! initialized pages (bit `p` = bit `7 - p % 8` of byte `p / 8`, most significant first), and
//! the pages follow it on disk, each `page_elements · element_size` bytes of elements plus a
//! checksum (the last page holds the remainder). Page `p` starts at
//! `data block address + prefix + p · (page_elements · element_size + 4)`, where the prefix is
//! signature, version, client, header address, bitmap and checksum.

use crate::btree2::verify_checksum;
use crate::error::{FormatError, Result};
use crate::reader::{Reader, Sizes};
use crate::writer::Writer;

pub(crate) fn encode_error(structure: &'static str, what: String) -> FormatError {
    FormatError::Unsupported {
        structure,
        address: crate::UNDEFINED_ADDRESS,
        what,
    }
}

/// What the elements of a fixed or extensible array are (the "client ID").
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ArrayClient {
    /// 0: chunk addresses of a dataset without filters.
    Chunks,
    /// 1: chunk address, size and filter mask of a dataset with filters.
    FilteredChunks,
}

impl ArrayClient {
    /// The client for an on-disk client ID.
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Chunks),
            1 => Some(Self::FilteredChunks),
            _ => None,
        }
    }

    /// The on-disk client ID.
    pub fn as_u8(self) -> u8 {
        match self {
            Self::Chunks => 0,
            Self::FilteredChunks => 1,
        }
    }
}

/// One element of a chunk index array: where a chunk is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ChunkEntry {
    /// Address of the chunk ([`crate::UNDEFINED_ADDRESS`] when the chunk is not allocated).
    pub address: u64,
    /// Size on disk of a filtered chunk; `None` without filters (the full chunk size).
    pub size: Option<u64>,
    /// Filters skipped (bit i set: filter i not applied); 0 without filters.
    pub filter_mask: u32,
}

impl ChunkEntry {
    /// Whether the chunk has storage.
    pub fn is_allocated(&self) -> bool {
        self.address != crate::UNDEFINED_ADDRESS
    }
}

/// How array elements are encoded, from the client and element size of an array header.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ElementFormat {
    /// The client.
    pub client: ArrayClient,
    /// Bytes of one element.
    pub element_size: usize,
    /// Width of the chunk size field (filtered chunks; 0 otherwise).
    pub chunk_size_len: usize,
}

impl ElementFormat {
    /// Checks that `element_size` fits `client` (address only, or address + 1..=8-byte size +
    /// 4-byte filter mask).
    pub(crate) fn new(
        r: &Reader<'_>,
        client: ArrayClient,
        element_size: u8,
        sizes: Sizes,
    ) -> Result<Self> {
        let es = usize::from(element_size);
        let o = usize::from(sizes.offset);
        let chunk_size_len = match client {
            ArrayClient::Chunks if es == o => 0,
            // `o` is at most 255 and `es` a byte: no overflow, and `es - o - 4` in 1..=8.
            ArrayClient::FilteredChunks
                if (o.saturating_add(5)..=o.saturating_add(12)).contains(&es) =>
            {
                es.saturating_sub(o).saturating_sub(4)
            }
            _ => {
                return Err(r.corrupted(format!(
                    "element size {es} does not fit client {}",
                    client.as_u8()
                )));
            }
        };
        Ok(Self {
            client,
            element_size: es,
            chunk_size_len,
        })
    }

    /// The format of `client` elements: an address, plus for filtered chunks a
    /// `chunk_size_len`-byte size (1..=8, see [`crate::btree2::chunk_size_len`]) and a 4-byte
    /// filter mask. `chunk_size_len` is ignored for unfiltered chunks.
    pub fn for_client(client: ArrayClient, sizes: Sizes, chunk_size_len: usize) -> Result<Self> {
        let o = usize::from(sizes.offset);
        let (element_size, chunk_size_len) = match client {
            ArrayClient::Chunks => (o, 0),
            ArrayClient::FilteredChunks if (1..=8).contains(&chunk_size_len) => (
                o.saturating_add(chunk_size_len).saturating_add(4),
                chunk_size_len,
            ),
            ArrayClient::FilteredChunks => {
                return Err(encode_error(
                    "array element",
                    format!("chunk size width {chunk_size_len}"),
                ));
            }
        };
        Ok(Self {
            client,
            element_size,
            chunk_size_len,
        })
    }

    /// Appends one element (`element_size` bytes). Errors when the entry does not fit the
    /// format: a size or filter mask for unfiltered chunks, no size for filtered ones, or a
    /// size wider than its field.
    pub fn encode(&self, w: &mut Writer, sizes: Sizes, e: &ChunkEntry) -> Result<()> {
        match (self.client, e.size) {
            (ArrayClient::Chunks, None) if e.filter_mask == 0 => w.offset(sizes, e.address),
            (ArrayClient::FilteredChunks, Some(size))
                if (1..=8).contains(&self.chunk_size_len)
                    && size <= crate::reader::all_ones(self.chunk_size_len) =>
            {
                w.offset(sizes, e.address);
                w.uint(size, self.chunk_size_len);
                w.u32(e.filter_mask);
            }
            _ => {
                return Err(encode_error(
                    "array element",
                    format!(
                        "{e:?} as a client {} element of {} bytes",
                        self.client.as_u8(),
                        self.element_size
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Appends `elements` in order.
    pub(crate) fn encode_many(
        &self,
        w: &mut Writer,
        sizes: Sizes,
        elements: &[ChunkEntry],
    ) -> Result<()> {
        if self.client == ArrayClient::Chunks
            && sizes.offset == 8
            && elements
                .iter()
                .all(|e| e.size.is_none() && e.filter_mask == 0)
        {
            // Unfiltered chunks with 8-byte addresses: each element is its address, written
            // as it is (the undefined address is all ones either way). What `encode` makes of
            // each, without its per-element dispatch.
            for e in elements {
                w.u64(e.address);
            }
            return Ok(());
        }
        elements.iter().try_for_each(|e| self.encode(w, sizes, e))
    }

    /// Decodes one element (exactly `element_size` bytes from `r`).
    pub(crate) fn decode(&self, r: &mut Reader<'_>, sizes: Sizes) -> Result<ChunkEntry> {
        let address = r.offset(sizes)?;
        Ok(match self.client {
            ArrayClient::Chunks => ChunkEntry {
                address,
                size: None,
                filter_mask: 0,
            },
            ArrayClient::FilteredChunks => ChunkEntry {
                address,
                size: Some(r.uint(self.chunk_size_len)?),
                filter_mask: r.u32()?,
            },
        })
    }

    /// Decodes `n` consecutive elements, after checking they fit in the bytes left.
    pub(crate) fn decode_many(
        &self,
        r: &mut Reader<'_>,
        sizes: Sizes,
        n: u64,
    ) -> Result<Vec<ChunkEntry>> {
        let total = n.saturating_mul(self.element_size as u64);
        let mut elems = r.sub(r.check_len(total)?)?;
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            out.push(self.decode(&mut elems, sizes)?);
        }
        Ok(out)
    }
}

/// Whether bit `i` of a most-significant-first bitmap is set (false past its end).
pub(crate) fn bit_set(bitmap: &[u8], i: u64) -> bool {
    usize::try_from(i / 8)
        .ok()
        .and_then(|b| bitmap.get(b))
        .is_some_and(|byte| byte & (0x80u8 >> (i % 8)) != 0)
}

/// A fixed array header (`FAHD`, version 0).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FixedArrayHeader {
    /// File address of the header.
    pub address: u64,
    /// Element encoding (client and element size).
    pub format: ElementFormat,
    /// Log2 of the most elements in a data block page.
    pub page_bits: u8,
    /// Number of elements.
    pub num_elements: u64,
    /// Address of the data block ([`crate::UNDEFINED_ADDRESS`] until one is allocated).
    pub data_block_address: u64,
}

/// Where element `i` of a fixed array is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FixedArraySlot {
    /// In the (unpaged) data block's elements, at this index.
    DataBlock {
        /// Index into [`FixedArrayDataBlock::elements`].
        element: usize,
    },
    /// In a page of a paged data block.
    Page {
        /// Page number (also the bit of the data block's bitmap).
        page: u64,
        /// Index within the page.
        element: usize,
        /// File address of the page.
        address: u64,
        /// Bytes of the page on disk (elements and checksum).
        len: usize,
        /// Elements in the page.
        elements: u64,
    },
}

impl FixedArrayHeader {
    /// The header's size on disk.
    #[allow(clippy::arithmetic_side_effects, reason = "constants and 1-byte sizes")]
    pub fn encoded_len(sizes: Sizes) -> usize {
        4 + 1 + 1 + 1 + 1 + usize::from(sizes.length) + usize::from(sizes.offset) + 4
    }

    /// Decodes and checks a header at file `address`.
    pub fn decode(bytes: &[u8], sizes: Sizes, address: u64) -> Result<Self> {
        let mut r = Reader::new(bytes, "fixed array header", address);
        r.signature(b"FAHD")?;
        let version = r.u8()?;
        if version != 0 {
            return Err(r.unsupported(format!("version {version}")));
        }
        let c = r.u8()?;
        let client = ArrayClient::from_u8(c).ok_or_else(|| r.unsupported(format!("client {c}")))?;
        let element_size = r.u8()?;
        let page_bits = r.u8()?;
        let num_elements = r.length(sizes)?;
        let data_block_address = r.offset(sizes)?;
        verify_checksum(&mut r)?;
        let format = ElementFormat::new(&r, client, element_size, sizes)?;
        if page_bits >= 32 {
            return Err(r.corrupted(format!("page size 2^{page_bits} elements")));
        }
        Ok(Self {
            address,
            format,
            page_bits,
            num_elements,
            data_block_address,
        })
    }

    /// Encodes the header ([`Self::encoded_len`] bytes, checksum included).
    pub fn encode(&self, sizes: Sizes) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::encoded_len(sizes));
        w.bytes(b"FAHD");
        w.u8(0);
        w.u8(self.format.client.as_u8());
        // Element sizes are at most 8 + 8 + 4 bytes (checked when the format was made).
        w.u8(self.format.element_size as u8);
        w.u8(self.page_bits);
        w.length(sizes, self.num_elements);
        w.offset(sizes, self.data_block_address);
        w.checksum_from(0);
        w.into_bytes()
    }

    /// Elements in a full page.
    pub fn page_elements(&self) -> u64 {
        1u64 << self.page_bits
    }

    /// Whether the data block is paged (more elements than one page holds).
    pub fn is_paged(&self) -> bool {
        self.num_elements > self.page_elements()
    }

    /// Number of pages (0 when not paged).
    pub fn page_count(&self) -> u64 {
        if self.is_paged() {
            self.num_elements.div_ceil(self.page_elements())
        } else {
            0
        }
    }

    /// Bytes of the page bitmap in the data block (0 when not paged).
    pub fn bitmap_len(&self) -> u64 {
        self.page_count().div_ceil(8)
    }

    /// Bytes of the data block before its pages: signature, version, client, header address,
    /// bitmap and checksum (the elements of an unpaged block not included).
    pub fn data_block_prefix_len(&self, sizes: Sizes) -> u64 {
        (4 + 1 + 1 + 4 + u64::from(sizes.offset)).saturating_add(self.bitmap_len())
    }

    /// Bytes to load for the data block structure: the prefix, plus the elements when unpaged.
    pub fn data_block_len(&self, sizes: Sizes) -> u64 {
        let prefix = self.data_block_prefix_len(sizes);
        if self.is_paged() {
            prefix
        } else {
            prefix.saturating_add(
                self.num_elements
                    .saturating_mul(self.format.element_size as u64),
            )
        }
    }

    /// Elements in page `page` (the last page holds the remainder).
    pub fn page_len_elements(&self, page: u64) -> u64 {
        let start = page.saturating_mul(self.page_elements());
        self.num_elements
            .saturating_sub(start)
            .min(self.page_elements())
    }

    /// Where element `i` is, or `None` past the end. Page addresses need the data block's
    /// address to be defined (they are computed from it, and saturate on nonsense).
    pub fn locate(&self, sizes: Sizes, i: u64) -> Option<FixedArraySlot> {
        if i >= self.num_elements {
            return None;
        }
        if !self.is_paged() {
            return Some(FixedArraySlot::DataBlock {
                element: usize::try_from(i).ok()?,
            });
        }
        let per = self.page_elements();
        let page = i.checked_div(per)?;
        let es = self.format.element_size as u64;
        let full_page = per.saturating_mul(es).saturating_add(4);
        let elements = self.page_len_elements(page);
        let address = self
            .data_block_address
            .saturating_add(self.data_block_prefix_len(sizes))
            .saturating_add(page.saturating_mul(full_page));
        Some(FixedArraySlot::Page {
            page,
            element: usize::try_from(i.checked_rem(per)?).ok()?,
            address,
            len: usize::try_from(elements.saturating_mul(es).saturating_add(4)).ok()?,
            elements,
        })
    }
}

/// A fixed array data block (`FADB`, version 0).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FixedArrayDataBlock {
    /// File address of the data block.
    pub address: u64,
    /// Address of the owning header.
    pub header_address: u64,
    /// Initialized-page bitmap (paged blocks; empty otherwise).
    pub page_bitmap: Vec<u8>,
    /// The elements (unpaged blocks; empty when paged).
    pub elements: Vec<ChunkEntry>,
}

impl FixedArrayDataBlock {
    /// Decodes the data block of `header` (bytes: at least `header.data_block_len(sizes)`).
    pub fn decode(
        bytes: &[u8],
        header: &FixedArrayHeader,
        sizes: Sizes,
        address: u64,
    ) -> Result<Self> {
        let mut r = Reader::new(bytes, "fixed array data block", address);
        r.signature(b"FADB")?;
        let version = r.u8()?;
        if version != 0 {
            return Err(r.unsupported(format!("version {version}")));
        }
        let c = r.u8()?;
        if c != header.format.client.as_u8() {
            return Err(r.corrupted(format!(
                "client {c}, the header says {}",
                header.format.client.as_u8()
            )));
        }
        let header_address = r.offset(sizes)?;
        if header_address != header.address {
            return Err(r.corrupted(format!(
                "owned by the header at {header_address:#x}, not {:#x}",
                header.address
            )));
        }
        let (page_bitmap, elements) = if header.is_paged() {
            let n = r.check_len(header.bitmap_len())?;
            (r.bytes(n)?.to_vec(), Vec::new())
        } else {
            let e = header
                .format
                .decode_many(&mut r, sizes, header.num_elements)?;
            (Vec::new(), e)
        };
        verify_checksum(&mut r)?;
        Ok(Self {
            address,
            header_address,
            page_bitmap,
            elements,
        })
    }

    /// Encodes the data block of `header` (`header.data_block_len(sizes)` bytes): the
    /// elements when unpaged, else the page bitmap (the pages are encoded apart, with
    /// [`encode_page`]). Errors when the elements or bitmap do not match the header.
    pub fn encode(&self, header: &FixedArrayHeader, sizes: Sizes) -> Result<Vec<u8>> {
        let name = "fixed array data block";
        let ok = if header.is_paged() {
            self.elements.is_empty() && self.page_bitmap.len() as u64 == header.bitmap_len()
        } else {
            self.page_bitmap.is_empty() && self.elements.len() as u64 == header.num_elements
        };
        if !ok {
            return Err(encode_error(
                name,
                format!(
                    "{} elements and a {}-byte bitmap for a header of {} elements",
                    self.elements.len(),
                    self.page_bitmap.len(),
                    header.num_elements
                ),
            ));
        }
        let mut w = Writer::new();
        w.bytes(b"FADB");
        w.u8(0);
        w.u8(header.format.client.as_u8());
        w.offset(sizes, self.header_address);
        w.bytes(&self.page_bitmap);
        header.format.encode_many(&mut w, sizes, &self.elements)?;
        w.checksum_from(0);
        Ok(w.into_bytes())
    }

    /// Whether page `page` was initialized (always false for unpaged blocks). An
    /// uninitialized page reads as all chunks unallocated.
    pub fn page_initialized(&self, page: u64) -> bool {
        bit_set(&self.page_bitmap, page)
    }
}

/// Decodes one page of a paged data block: `elements` elements and a checksum (the numbers
/// come from [`FixedArraySlot::Page`]).
pub fn decode_page(
    bytes: &[u8],
    format: &ElementFormat,
    sizes: Sizes,
    elements: u64,
    address: u64,
) -> Result<Vec<ChunkEntry>> {
    decode_page_named(
        bytes,
        format,
        sizes,
        elements,
        address,
        "fixed array data block page",
    )
}

/// Encodes one page of a paged data block (also an extensible array data block page): the
/// elements, then their checksum.
pub fn encode_page(
    format: &ElementFormat,
    sizes: Sizes,
    elements: &[ChunkEntry],
) -> Result<Vec<u8>> {
    let mut w = Writer::with_capacity(
        elements
            .len()
            .saturating_mul(format.element_size)
            .saturating_add(4),
    );
    format.encode_many(&mut w, sizes, elements)?;
    w.checksum_from(0);
    Ok(w.into_bytes())
}

/// [`decode_page`] under another structure name (extensible array pages share the layout).
pub(crate) fn decode_page_named(
    bytes: &[u8],
    format: &ElementFormat,
    sizes: Sizes,
    elements: u64,
    address: u64,
    name: &'static str,
) -> Result<Vec<ChunkEntry>> {
    let mut r = Reader::new(bytes, name, address);
    let out = format.decode_many(&mut r, sizes, elements)?;
    verify_checksum(&mut r)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree2::testutil::{le, seal, sweep};

    const S4: Sizes = Sizes {
        offset: 4,
        length: 4,
    };

    fn header_image(client: u8, esize: u8, bits: u8, n: u64, db: u64) -> Vec<u8> {
        let mut b = b"FAHD".to_vec();
        b.extend([0, client, esize, bits]);
        b.extend(le(n, 4));
        b.extend(le(db, 4));
        seal(&mut b);
        b
    }

    #[test]
    fn unpaged_filtered_block() {
        // Filtered chunks, 4-byte addresses, 3-byte sizes: 11-byte elements; 3 elements.
        let hb = header_image(1, 11, 10, 3, 0x200);
        assert_eq!(hb.len(), FixedArrayHeader::encoded_len(S4));
        sweep(&hb, hb.len(), |b| FixedArrayHeader::decode(b, S4, 0x100));
        let h = FixedArrayHeader::decode(&hb, S4, 0x100).unwrap();
        assert_eq!(h.format.chunk_size_len, 3);
        assert!(!h.is_paged());
        assert_eq!(h.page_count(), 0);

        let mut db = b"FADB".to_vec();
        db.extend([0, 1]);
        db.extend(le(0x100, 4));
        for (a, s, m) in [
            (0x1000u64, 0x30u64, 0u32),
            (0xffff_ffff, 0, 0),
            (0x2000, 0x1_0000, 1),
        ] {
            db.extend(le(a, 4));
            db.extend(le(s, 3));
            db.extend(m.to_le_bytes());
        }
        seal(&mut db);
        assert_eq!(db.len() as u64, h.data_block_len(S4));
        sweep(&db, db.len(), |b| {
            FixedArrayDataBlock::decode(b, &h, S4, 0x200)
        });
        let d = FixedArrayDataBlock::decode(&db, &h, S4, 0x200).unwrap();
        assert_eq!(h.encode(S4), hb);
        assert_eq!(d.encode(&h, S4).unwrap(), db);
        assert_eq!(
            ElementFormat::for_client(ArrayClient::FilteredChunks, S4, 3).unwrap(),
            h.format
        );
        assert_eq!(
            h.locate(S4, 2),
            Some(FixedArraySlot::DataBlock { element: 2 })
        );
        assert_eq!(
            d.elements[2],
            ChunkEntry {
                address: 0x2000,
                size: Some(0x1_0000),
                filter_mask: 1
            }
        );
        assert!(!d.elements[1].is_allocated());
        assert_eq!(h.locate(S4, 3), None);
        // A block owned by another header, or of another client, is corrupt.
        let other = FixedArrayHeader::decode(&hb, S4, 0x180).unwrap();
        assert!(FixedArrayDataBlock::decode(&db, &other, S4, 0x200).is_err());
        let plain = FixedArrayHeader::decode(&header_image(0, 4, 10, 3, 0x200), S4, 0x100).unwrap();
        assert!(FixedArrayDataBlock::decode(&db, &plain, S4, 0x200).is_err());
    }

    #[test]
    fn paged_block_math_and_pages() {
        // 3000 elements of 8 bytes, 1024 a page: 3 pages (the last 952), 1 bitmap byte.
        let s = Sizes::EIGHT;
        let mut hb = b"FAHD".to_vec();
        hb.extend([0, 0, 8, 10]);
        hb.extend(3000u64.to_le_bytes());
        hb.extend(0x1000u64.to_le_bytes());
        seal(&mut hb);
        let h = FixedArrayHeader::decode(&hb, s, 0x800).unwrap();
        assert!(h.is_paged());
        assert_eq!((h.page_count(), h.bitmap_len()), (3, 1));
        // Prefix: signature 4, version 1, client 1, header address 8, bitmap 1, checksum 4.
        assert_eq!(h.data_block_prefix_len(s), 19);
        assert_eq!(h.data_block_len(s), 19);
        assert_eq!(h.page_len_elements(2), 952);
        assert_eq!(
            h.locate(s, 2050),
            Some(FixedArraySlot::Page {
                page: 2,
                element: 2,
                address: 0x1000 + 19 + 2 * (1024 * 8 + 4),
                len: 952 * 8 + 4,
                elements: 952,
            })
        );
        assert!(matches!(
            h.locate(s, 1023),
            Some(FixedArraySlot::Page {
                page: 0,
                element: 1023,
                ..
            })
        ));

        let mut db = b"FADB".to_vec();
        db.extend([0, 0]);
        db.extend(0x800u64.to_le_bytes());
        db.push(0b1010_0000); // pages 0 and 2 initialized
        seal(&mut db);
        sweep(&db, db.len(), |b| {
            FixedArrayDataBlock::decode(b, &h, s, 0x1000)
        });
        let d = FixedArrayDataBlock::decode(&db, &h, s, 0x1000).unwrap();
        assert_eq!(h.encode(s), hb);
        assert_eq!(d.encode(&h, s).unwrap(), db);
        assert!(d.page_initialized(0) && !d.page_initialized(1) && d.page_initialized(2));
        assert!(!d.page_initialized(3) && !d.page_initialized(u64::MAX));

        let mut page: Vec<u8> = (0..952u64)
            .flat_map(|i| (0x10_0000 + i).to_le_bytes())
            .collect();
        seal(&mut page);
        let p = decode_page(&page, &h.format, s, 952, 0x5000).unwrap();
        assert_eq!(encode_page(&h.format, s, &p).unwrap(), page);
        assert_eq!(p[2].address, 0x10_0002);
        assert_eq!(p[2].size, None);
        // The corruption sweep on a short page (the layout does not depend on its length).
        let mut page: Vec<u8> = (0..5u64)
            .flat_map(|i| (0x10_0000 + i).to_le_bytes())
            .collect();
        seal(&mut page);
        sweep(&page, page.len(), |b| {
            decode_page(b, &h.format, s, 5, 0x5000)
        });
    }

    #[test]
    fn impossible_headers_are_errors() {
        for hb in [
            header_image(0, 5, 10, 3, 0),  // element size is not an address
            header_image(1, 8, 10, 3, 0),  // no room for size and mask
            header_image(1, 17, 10, 3, 0), // 9-byte chunk size
            header_image(2, 4, 10, 3, 0),  // unknown client
            header_image(0, 4, 40, 3, 0),  // absurd page size
        ] {
            assert!(FixedArrayHeader::decode(&hb, S4, 0).is_err());
        }
        // A huge element count in an unpaged... cannot be: huge counts page; the bitmap length
        // is then checked against the bytes.
        let h =
            FixedArrayHeader::decode(&header_image(0, 4, 0, u32::MAX.into(), 0), S4, 0).unwrap();
        let mut db = b"FADB".to_vec();
        db.extend([0, 0]);
        db.extend(le(0, 4));
        seal(&mut db);
        assert!(FixedArrayDataBlock::decode(&db, &h, S4, 0).is_err());
        assert!(decode_page(&db, &h.format, S4, u64::MAX, 0).is_err());
    }

    #[test]
    fn unfiltered_8_byte_elements_encode_as_each_alone_and_still_refuse_a_size() {
        let s8 = Sizes {
            offset: 8,
            length: 8,
        };
        let f = ElementFormat::for_client(ArrayClient::Chunks, s8, 0).unwrap();
        let entry = |address| ChunkEntry {
            address,
            size: None,
            filter_mask: 0,
        };
        let elements = [
            entry(0x1234_5678_9abc),
            entry(crate::UNDEFINED_ADDRESS),
            entry(0),
        ];
        let mut many = Writer::new();
        f.encode_many(&mut many, s8, &elements).unwrap();
        let mut one_by_one = Writer::new();
        for e in &elements {
            f.encode(&mut one_by_one, s8, e).unwrap();
        }
        assert_eq!(many.as_slice(), one_by_one.as_slice());
        let mut expected = 0x1234_5678_9abcu64.to_le_bytes().to_vec();
        expected.extend([0xff; 8]);
        expected.extend([0; 8]);
        assert_eq!(many.as_slice(), expected.as_slice());
        let sized = [
            entry(1),
            ChunkEntry {
                address: 2,
                size: Some(256),
                filter_mask: 0,
            },
        ];
        assert!(f.encode_many(&mut Writer::new(), s8, &sized).is_err());
    }

    #[test]
    fn encoders_reject_what_does_not_fit() {
        let f = ElementFormat::for_client(ArrayClient::FilteredChunks, S4, 1).unwrap();
        assert_eq!(f.element_size, 9);
        assert!(ElementFormat::for_client(ArrayClient::FilteredChunks, S4, 9).is_err());
        assert!(ElementFormat::for_client(ArrayClient::FilteredChunks, S4, 0).is_err());
        let plain = ElementFormat::for_client(ArrayClient::Chunks, S4, 5).unwrap();
        assert_eq!((plain.element_size, plain.chunk_size_len), (4, 0));
        let mut w = Writer::new();
        let big = ChunkEntry {
            address: 1,
            size: Some(256),
            filter_mask: 0,
        };
        assert!(f.encode(&mut w, S4, &big).is_err());
        assert!(plain.encode(&mut w, S4, &big).is_err());
        let none = ChunkEntry {
            address: 1,
            size: None,
            filter_mask: 0,
        };
        assert!(f.encode(&mut w, S4, &none).is_err());
        let h = FixedArrayHeader {
            address: 0x100,
            format: plain,
            page_bits: 2,
            num_elements: 3,
            data_block_address: 0x200,
        };
        assert_eq!(
            FixedArrayHeader::decode(&h.encode(S4), S4, 0x100).unwrap(),
            h
        );
        let mut d = FixedArrayDataBlock {
            address: 0x200,
            header_address: 0x100,
            page_bitmap: vec![],
            elements: vec![none; 3],
        };
        let b = d.encode(&h, S4).unwrap();
        assert_eq!(b.len() as u64, h.data_block_len(S4));
        assert_eq!(FixedArrayDataBlock::decode(&b, &h, S4, 0x200).unwrap(), d);
        d.elements.pop();
        assert!(d.encode(&h, S4).is_err());
    }
}
