//! Extensible arrays (chunk index type 4): the header (`EAHD`), index block (`EAIB`), super
//! blocks (`EASB`), data blocks (`EADB`) and data block pages, and the geometry that says which
//! block holds element `i`.
//!
//! Geometry (all from the header's creation parameters; `m` = minimum data block elements,
//! `k` = minimum data block pointers of a super block, both powers of two):
//!
//! * the first `index_block_elements` elements live in the index block itself;
//! * the rest are split over `1 + max_elements_bits - log2(m)` super blocks: super block `s`
//!   has `2^(s / 2)` data blocks of `m · 2^((s + 1) / 2)` elements (so `m · 2^s` elements in
//!   all), and starts where the previous ones end;
//! * element `j` (counted after the index block's) is in super block
//!   `floor(log2(j / m + 1))`;
//! * the data blocks of the first `2 · log2(k)` super blocks (`2 · (k - 1)` blocks) are pointed
//!   to by the index block directly; each later super block is a real `EASB` pointed to by the
//!   index block, which points to its data blocks;
//! * a data block of more than `2^page_bits` elements is paged: the `EADB` holds only its
//!   prefix, and `elements / 2^page_bits` pages follow it, each the page's elements plus a
//!   checksum; the owning super block keeps a bitmap of initialized pages per data block
//!   (most significant bit first).

use crate::btree2::verify_checksum;
use crate::error::Result;
use crate::fixed_array::{
    ArrayClient, ChunkEntry, ElementFormat, bit_set, decode_page_named, encode_error,
};
use crate::reader::{Reader, Sizes};
use crate::writer::Writer;

/// The creation parameters of an extensible array (libhdf5's for chunk indexes: 32 index
/// bits, 4 index block elements, data blocks of at least 16 elements, super blocks of at
/// least 4 data block pointers, 1024-element pages, i.e. page bits 10).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ExtensibleArrayParams {
    /// Element encoding.
    pub format: ElementFormat,
    /// Bits needed for the largest element index.
    pub max_elements_bits: u8,
    /// Elements stored in the index block.
    pub index_block_elements: u8,
    /// Elements of the smallest data blocks (a power of two).
    pub data_block_min_elements: u8,
    /// Data block pointers of the smallest real super blocks (a power of two).
    pub super_block_min_data_pointers: u8,
    /// Log2 of the elements in a data block page.
    pub page_bits: u8,
}

/// Statistics stored in the header.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct ExtensibleArrayStats {
    /// Super blocks created.
    pub super_blocks: u64,
    /// Bytes of super blocks created.
    pub super_blocks_size: u64,
    /// Data blocks created.
    pub data_blocks: u64,
    /// Bytes of data blocks created.
    pub data_blocks_size: u64,
    /// One more than the highest element index set (elements at or past it read as unset).
    pub max_index_set: u64,
    /// Elements realized (allocated in some block).
    pub elements_realized: u64,
}

/// Data blocks of one super block.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SuperBlockInfo {
    /// Data blocks in the super block.
    pub data_blocks: u64,
    /// Elements in each of its data blocks.
    pub data_block_elements: u64,
    /// Index of its first element (counted after the index block's elements).
    pub start_index: u64,
    /// Index of its first data block (over all super blocks).
    pub start_data_block: u64,
}

/// An extensible array header (`EAHD`, version 0) with its derived geometry.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ExtensibleArrayHeader {
    /// File address of the header.
    pub address: u64,
    /// Element encoding (client and element size).
    pub format: ElementFormat,
    /// Bits needed for the largest element index.
    pub max_elements_bits: u8,
    /// Elements stored in the index block.
    pub index_block_elements: u8,
    /// Elements of the smallest data blocks (`m`).
    pub data_block_min_elements: u8,
    /// Data block pointers of the smallest real super blocks (`k`).
    pub super_block_min_data_pointers: u8,
    /// Log2 of the elements in a data block page.
    pub page_bits: u8,
    /// Statistics.
    pub stats: ExtensibleArrayStats,
    /// Address of the index block ([`crate::UNDEFINED_ADDRESS`] while the array is empty).
    pub index_block_address: u64,
    /// Per super block geometry.
    pub super_blocks: Vec<SuperBlockInfo>,
    /// Super blocks whose data blocks the index block points to directly.
    pub index_block_super_blocks: usize,
    /// Data block addresses in the index block.
    pub index_block_data_blocks: usize,
    /// Super block addresses in the index block.
    pub index_block_super_block_addresses: usize,
    /// Width in bytes of the block offset fields.
    pub array_offset_size: usize,
}

/// Who points to a data block.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DataBlockParent {
    /// The index block, at this slot of [`ExtensibleArrayIndexBlock::data_block_addresses`].
    IndexBlock {
        /// Slot in the index block's data block addresses.
        slot: usize,
    },
    /// A super block pointed to by the index block.
    SuperBlock {
        /// Slot in the index block's super block addresses.
        slot: usize,
        /// Index of the data block within the super block.
        data_block: usize,
    },
}

/// A position within a paged data block.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PageSlot {
    /// Page number within the data block.
    pub page: u64,
    /// Index of the element within the page.
    pub element: usize,
    /// Bit of the owning super block's page bitmap (`None` for data blocks of the index
    /// block, which have no bitmap).
    pub bitmap_bit: Option<u64>,
}

/// Where element `i` of an extensible array is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ExtensibleArraySlot {
    /// In the index block's own elements.
    IndexBlock {
        /// Index into [`ExtensibleArrayIndexBlock::elements`].
        element: usize,
    },
    /// In a data block.
    DataBlock {
        /// Super block (geometry index) the data block belongs to.
        super_block: usize,
        /// Who points to the data block.
        parent: DataBlockParent,
        /// Elements in the data block.
        data_block_elements: u64,
        /// The block offset libhdf5 stores in the data block (see [`ExtensibleArrayHeader::locate`]:
        /// for data blocks of the index block it is not the first element's index).
        block_offset: u64,
        /// Index of the element within the data block.
        element: u64,
        /// For a paged data block, the page and position in it.
        page: Option<PageSlot>,
    },
}

impl ExtensibleArrayHeader {
    /// The header's size on disk.
    #[allow(clippy::arithmetic_side_effects, reason = "constants and 1-byte sizes")]
    pub fn encoded_len(sizes: Sizes) -> usize {
        4 + 1 + 1 + 6 + 6 * usize::from(sizes.length) + usize::from(sizes.offset) + 4
    }

    /// Decodes and checks a header at file `address`, and derives the geometry.
    pub fn decode(bytes: &[u8], sizes: Sizes, address: u64) -> Result<Self> {
        let mut r = Reader::new(bytes, "extensible array header", address);
        r.signature(b"EAHD")?;
        let version = r.u8()?;
        if version != 0 {
            return Err(r.unsupported(format!("version {version}")));
        }
        let c = r.u8()?;
        let client = ArrayClient::from_u8(c).ok_or_else(|| r.unsupported(format!("client {c}")))?;
        let element_size = r.u8()?;
        let max_elements_bits = r.u8()?;
        let index_block_elements = r.u8()?;
        let data_block_min_elements = r.u8()?;
        let super_block_min_data_pointers = r.u8()?;
        let page_bits = r.u8()?;
        let stats = ExtensibleArrayStats {
            super_blocks: r.length(sizes)?,
            super_blocks_size: r.length(sizes)?,
            data_blocks: r.length(sizes)?,
            data_blocks_size: r.length(sizes)?,
            max_index_set: r.length(sizes)?,
            elements_realized: r.length(sizes)?,
        };
        let index_block_address = r.offset(sizes)?;
        verify_checksum(&mut r)?;
        let format = ElementFormat::new(&r, client, element_size, sizes)?;

        if !(1..=64).contains(&max_elements_bits) {
            return Err(r.corrupted(format!("{max_elements_bits} element index bits")));
        }
        if !data_block_min_elements.is_power_of_two() {
            return Err(r.corrupted(format!(
                "minimum data block elements {data_block_min_elements} (a power of two expected)"
            )));
        }
        if !super_block_min_data_pointers.is_power_of_two() {
            return Err(r.corrupted(format!(
                "minimum super block pointers {super_block_min_data_pointers} (a power of two expected)"
            )));
        }
        if page_bits >= 64 {
            return Err(r.corrupted(format!("page size 2^{page_bits}")));
        }
        let min_log2 = data_block_min_elements.trailing_zeros() as u8;
        let nsblks = max_elements_bits
            .saturating_add(1)
            .checked_sub(min_log2)
            .ok_or_else(|| {
            r.corrupted(format!(
                "{max_elements_bits} index bits cannot hold data blocks of {data_block_min_elements}"
            ))
        })?;
        let mut super_blocks = Vec::with_capacity(usize::from(nsblks));
        let (mut start_index, mut start_data_block) = (0u64, 0u64);
        for s in 0..u32::from(nsblks) {
            let data_blocks = 1u64 << (s / 2);
            let data_block_elements = (1u64 << s.div_ceil(2))
                .checked_mul(u64::from(data_block_min_elements))
                .ok_or_else(|| r.corrupted("data block sizes overflow"))?;
            super_blocks.push(SuperBlockInfo {
                data_blocks,
                data_block_elements,
                start_index,
                start_data_block,
            });
            // Only the (unused) start after the last super block can overflow, for 64 bits.
            start_index =
                start_index.saturating_add(data_blocks.saturating_mul(data_block_elements));
            start_data_block = start_data_block.saturating_add(data_blocks);
        }
        let k = u32::from(super_block_min_data_pointers);
        // `k` is a u8: at most 14.
        let index_block_super_blocks = (k.trailing_zeros() as usize).saturating_mul(2);
        let index_block_super_block_addresses = super_blocks
            .len()
            .checked_sub(index_block_super_blocks)
            .ok_or_else(|| {
                r.corrupted(format!(
                    "{} super blocks, fewer than the index block's {index_block_super_blocks}",
                    super_blocks.len()
                ))
            })?;
        Ok(Self {
            address,
            format,
            max_elements_bits,
            index_block_elements,
            data_block_min_elements,
            super_block_min_data_pointers,
            page_bits,
            stats,
            index_block_address,
            super_blocks,
            index_block_super_blocks,
            index_block_data_blocks: (k as usize).saturating_sub(1).saturating_mul(2),
            index_block_super_block_addresses,
            array_offset_size: usize::from(max_elements_bits).div_ceil(8),
        })
    }

    /// A header at `address` with `params`, `stats` and the index block at
    /// `index_block_address`, its geometry derived. Errors as [`Self::decode`] does on
    /// impossible parameters.
    pub fn new(
        sizes: Sizes,
        address: u64,
        params: ExtensibleArrayParams,
        stats: ExtensibleArrayStats,
        index_block_address: u64,
    ) -> Result<Self> {
        let bytes = encode_header(sizes, &params, &stats, index_block_address);
        Self::decode(&bytes, sizes, address)
    }

    /// The creation parameters.
    pub fn params(&self) -> ExtensibleArrayParams {
        ExtensibleArrayParams {
            format: self.format,
            max_elements_bits: self.max_elements_bits,
            index_block_elements: self.index_block_elements,
            data_block_min_elements: self.data_block_min_elements,
            super_block_min_data_pointers: self.super_block_min_data_pointers,
            page_bits: self.page_bits,
        }
    }

    /// Encodes the header ([`Self::encoded_len`] bytes, checksum included).
    pub fn encode(&self, sizes: Sizes) -> Vec<u8> {
        encode_header(sizes, &self.params(), &self.stats, self.index_block_address)
    }

    /// Elements in a data block page.
    pub fn page_elements(&self) -> u64 {
        1u64 << self.page_bits
    }

    /// Pages of a data block of `elements` elements (0 when it is not paged).
    pub fn pages_per_data_block(&self, elements: u64) -> u64 {
        if elements > self.page_elements() {
            elements.checked_div(self.page_elements()).unwrap_or(0)
        } else {
            0
        }
    }

    /// Bytes of one page on disk (elements and checksum).
    pub fn page_len(&self) -> u64 {
        self.page_elements()
            .saturating_mul(self.format.element_size as u64)
            .saturating_add(4)
    }

    /// Bytes of the index block.
    pub fn index_block_len(&self, sizes: Sizes) -> u64 {
        let o = u64::from(sizes.offset);
        let addrs = (self.index_block_data_blocks as u64)
            .saturating_add(self.index_block_super_block_addresses as u64);
        (4 + 1 + 1 + 4u64)
            .saturating_add(o)
            .saturating_add(
                u64::from(self.index_block_elements)
                    .saturating_mul(self.format.element_size as u64),
            )
            .saturating_add(addrs.saturating_mul(o))
    }

    /// Bytes of the page bitmap of one data block of super block `s`.
    fn bitmap_len_per_data_block(&self, info: &SuperBlockInfo) -> u64 {
        self.pages_per_data_block(info.data_block_elements)
            .div_ceil(8)
    }

    /// Bytes of super block `s` (a geometry index ≥ `index_block_super_blocks`), saturating
    /// for impossible geometries.
    pub fn super_block_len(&self, sizes: Sizes, s: usize) -> u64 {
        let Some(info) = self.super_blocks.get(s) else {
            return u64::MAX;
        };
        let per_dblock = self
            .bitmap_len_per_data_block(info)
            .saturating_add(u64::from(sizes.offset));
        // The same prefix as a data block's, then each data block's address and bitmap.
        self.data_block_prefix_len(sizes)
            .saturating_add(info.data_blocks.saturating_mul(per_dblock))
    }

    /// Bytes of a data block's prefix (signature, version, client, header address, block
    /// offset, checksum): where its first page starts when paged.
    pub fn data_block_prefix_len(&self, sizes: Sizes) -> u64 {
        (4 + 1 + 1 + 4u64)
            .saturating_add(u64::from(sizes.offset))
            .saturating_add(self.array_offset_size as u64)
    }

    /// Bytes to load for a data block of `elements` elements (its prefix only when paged).
    pub fn data_block_len(&self, sizes: Sizes, elements: u64) -> u64 {
        let prefix = self.data_block_prefix_len(sizes);
        if self.pages_per_data_block(elements) > 0 {
            prefix
        } else {
            prefix.saturating_add(elements.saturating_mul(self.format.element_size as u64))
        }
    }

    /// File address of page `page` of the (paged) data block at `data_block_address`.
    pub fn page_address(&self, sizes: Sizes, data_block_address: u64, page: u64) -> u64 {
        data_block_address
            .saturating_add(self.data_block_prefix_len(sizes))
            .saturating_add(page.saturating_mul(self.page_len()))
    }

    /// The super block (geometry index) holding element `j`, counted after the index block's
    /// elements: `floor(log2(j / m + 1))`.
    pub fn super_block_of(&self, j: u64) -> usize {
        let q = j
            .checked_div(u64::from(self.data_block_min_elements))
            .unwrap_or(0)
            .saturating_add(1);
        63u32.saturating_sub(q.leading_zeros()) as usize
    }

    /// Where element `i` is, or `None` beyond the array's largest possible index.
    ///
    /// The slot's `block_offset` is what libhdf5 writes into the data block: `start_index +
    /// n · data_block_elements` with `n` the block's slot in its parent, which for data blocks
    /// of the index block also counts those of earlier super blocks.
    pub fn locate(&self, i: u64) -> Option<ExtensibleArraySlot> {
        let ib = u64::from(self.index_block_elements);
        if i < ib {
            return Some(ExtensibleArraySlot::IndexBlock {
                element: usize::try_from(i).ok()?,
            });
        }
        let j = i.checked_sub(ib)?;
        let s = self.super_block_of(j);
        let info = self.super_blocks.get(s)?;
        let in_sblk = j.checked_sub(info.start_index)?;
        let dblk = in_sblk.checked_div(info.data_block_elements)?;
        if dblk >= info.data_blocks {
            return None;
        }
        let element = in_sblk.checked_rem(info.data_block_elements)?;
        // libhdf5 stores as block offset `start_index + n · data_block_elements`, where `n` is
        // the data block's slot in its parent: for the index block's data blocks that slot
        // counts the data blocks of earlier super blocks too, so the stored offset is not the
        // index of the block's first element there (the library never checks it).
        let (parent, has_bitmap, offset_slot) = if s < self.index_block_super_blocks {
            let global = info.start_data_block.checked_add(dblk)?;
            let slot = usize::try_from(global).ok()?;
            (DataBlockParent::IndexBlock { slot }, false, global)
        } else {
            let slot = s.checked_sub(self.index_block_super_blocks)?;
            let data_block = usize::try_from(dblk).ok()?;
            (DataBlockParent::SuperBlock { slot, data_block }, true, dblk)
        };
        let npages = self.pages_per_data_block(info.data_block_elements);
        let page = if npages > 0 {
            let page = element.checked_div(self.page_elements())?;
            let bitmap_bit = if has_bitmap {
                Some(dblk.checked_mul(npages)?.checked_add(page)?)
            } else {
                None
            };
            Some(PageSlot {
                page,
                element: usize::try_from(element.checked_rem(self.page_elements())?).ok()?,
                bitmap_bit,
            })
        } else {
            None
        };
        Some(ExtensibleArraySlot::DataBlock {
            super_block: s,
            parent,
            data_block_elements: info.data_block_elements,
            block_offset: offset_slot
                .checked_mul(info.data_block_elements)
                .and_then(|v| v.checked_add(info.start_index))?,
            element,
            page,
        })
    }
}

fn encode_header(
    sizes: Sizes,
    p: &ExtensibleArrayParams,
    stats: &ExtensibleArrayStats,
    index_block_address: u64,
) -> Vec<u8> {
    let mut w = Writer::with_capacity(ExtensibleArrayHeader::encoded_len(sizes));
    w.bytes(b"EAHD");
    w.u8(0);
    w.u8(p.format.client.as_u8());
    // Element sizes are at most 8 + 8 + 4 bytes.
    w.u8(p.format.element_size as u8);
    w.u8(p.max_elements_bits);
    w.u8(p.index_block_elements);
    w.u8(p.data_block_min_elements);
    w.u8(p.super_block_min_data_pointers);
    w.u8(p.page_bits);
    for v in [
        stats.super_blocks,
        stats.super_blocks_size,
        stats.data_blocks,
        stats.data_blocks_size,
        stats.max_index_set,
        stats.elements_realized,
    ] {
        w.length(sizes, v);
    }
    w.offset(sizes, index_block_address);
    w.checksum_from(0);
    w.into_bytes()
}

/// Writes signature, version, client and the owning header's address.
fn encode_prefix(w: &mut Writer, sig: &[u8; 4], header: &ExtensibleArrayHeader, sizes: Sizes) {
    w.bytes(sig);
    w.u8(0);
    w.u8(header.format.client.as_u8());
    w.offset(sizes, header.address);
}

/// Writes a block offset of `header.array_offset_size` bytes, if it fits.
fn encode_block_offset(
    w: &mut Writer,
    header: &ExtensibleArrayHeader,
    v: u64,
    name: &'static str,
) -> Result<()> {
    let n = header.array_offset_size;
    if v > crate::reader::all_ones(n) {
        return Err(encode_error(name, format!("block offset {v} in {n} bytes")));
    }
    w.uint(v, n);
    Ok(())
}

fn count_error(name: &'static str, what: &str, got: usize, want: u64) -> crate::FormatError {
    encode_error(
        name,
        format!("{got} {what}, the header's geometry has {want}"),
    )
}

/// Reads signature, version, client and owning header address, checking them.
fn block_prefix(
    r: &mut Reader<'_>,
    sig: &[u8; 4],
    header: &ExtensibleArrayHeader,
    sizes: Sizes,
) -> Result<u64> {
    r.signature(sig)?;
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
    Ok(header_address)
}

fn addresses(r: &mut Reader<'_>, sizes: Sizes, n: u64) -> Result<Vec<u64>> {
    r.check_len(n.saturating_mul(u64::from(sizes.offset)))?;
    (0..n).map(|_| r.offset(sizes)).collect()
}

/// An extensible array index block (`EAIB`, version 0).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ExtensibleArrayIndexBlock {
    /// File address of the index block.
    pub address: u64,
    /// The elements stored in the index block.
    pub elements: Vec<ChunkEntry>,
    /// Addresses of the data blocks of the first super blocks (undefined: not allocated).
    pub data_block_addresses: Vec<u64>,
    /// Addresses of the real super blocks (undefined: not allocated).
    pub super_block_addresses: Vec<u64>,
}

impl ExtensibleArrayIndexBlock {
    /// Decodes the index block of `header` (bytes: at least `header.index_block_len(sizes)`).
    pub fn decode(
        bytes: &[u8],
        header: &ExtensibleArrayHeader,
        sizes: Sizes,
        address: u64,
    ) -> Result<Self> {
        let mut r = Reader::new(bytes, "extensible array index block", address);
        block_prefix(&mut r, b"EAIB", header, sizes)?;
        let elements =
            header
                .format
                .decode_many(&mut r, sizes, u64::from(header.index_block_elements))?;
        let data_block_addresses = addresses(&mut r, sizes, header.index_block_data_blocks as u64)?;
        let super_block_addresses = addresses(
            &mut r,
            sizes,
            header.index_block_super_block_addresses as u64,
        )?;
        verify_checksum(&mut r)?;
        Ok(Self {
            address,
            elements,
            data_block_addresses,
            super_block_addresses,
        })
    }
}

impl ExtensibleArrayIndexBlock {
    /// Encodes the index block of `header` (`header.index_block_len(sizes)` bytes). Errors
    /// when the element or address counts differ from the header's geometry.
    pub fn encode(&self, header: &ExtensibleArrayHeader, sizes: Sizes) -> Result<Vec<u8>> {
        let name = "extensible array index block";
        for (what, got, want) in [
            (
                "elements",
                self.elements.len(),
                u64::from(header.index_block_elements),
            ),
            (
                "data block addresses",
                self.data_block_addresses.len(),
                header.index_block_data_blocks as u64,
            ),
            (
                "super block addresses",
                self.super_block_addresses.len(),
                header.index_block_super_block_addresses as u64,
            ),
        ] {
            if got as u64 != want {
                return Err(count_error(name, what, got, want));
            }
        }
        let mut w =
            Writer::with_capacity(usize::try_from(header.index_block_len(sizes)).unwrap_or(0));
        encode_prefix(&mut w, b"EAIB", header, sizes);
        header.format.encode_many(&mut w, sizes, &self.elements)?;
        for &a in self
            .data_block_addresses
            .iter()
            .chain(&self.super_block_addresses)
        {
            w.offset(sizes, a);
        }
        w.checksum_from(0);
        Ok(w.into_bytes())
    }
}

/// An extensible array super block (`EASB`, version 0).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ExtensibleArraySuperBlock {
    /// File address of the super block.
    pub address: u64,
    /// Geometry index of the super block.
    pub index: usize,
    /// Index of its first element (after the index block's), as stored.
    pub block_offset: u64,
    /// Initialized-page bitmaps of its data blocks, concatenated (empty when not paged).
    pub page_bitmap: Vec<u8>,
    /// Addresses of its data blocks (undefined: not allocated).
    pub data_block_addresses: Vec<u64>,
}

impl ExtensibleArraySuperBlock {
    /// Decodes super block `index` (a geometry index ≥ `header.index_block_super_blocks`;
    /// bytes: at least `header.super_block_len(sizes, index)`).
    pub fn decode(
        bytes: &[u8],
        header: &ExtensibleArrayHeader,
        sizes: Sizes,
        index: usize,
        address: u64,
    ) -> Result<Self> {
        let mut r = Reader::new(bytes, "extensible array super block", address);
        let info = header
            .super_blocks
            .get(index)
            .filter(|_| index >= header.index_block_super_blocks)
            .copied()
            .ok_or_else(|| r.corrupted(format!("no super block {index} in this geometry")))?;
        block_prefix(&mut r, b"EASB", header, sizes)?;
        // libhdf5 writes the super block's start index here but never checks it on reading;
        // neither do we.
        let block_offset = r.uint(header.array_offset_size)?;
        let bitmap_len = header
            .bitmap_len_per_data_block(&info)
            .saturating_mul(info.data_blocks);
        let n = r.check_len(bitmap_len)?;
        let page_bitmap = r.bytes(n)?.to_vec();
        let data_block_addresses = addresses(&mut r, sizes, info.data_blocks)?;
        verify_checksum(&mut r)?;
        Ok(Self {
            address,
            index,
            block_offset,
            page_bitmap,
            data_block_addresses,
        })
    }

    /// Encodes the super block (`header.super_block_len(sizes, self.index)` bytes). Errors
    /// when the index is not a real super block of the geometry, or the bitmap, addresses or
    /// block offset do not fit it.
    pub fn encode(&self, header: &ExtensibleArrayHeader, sizes: Sizes) -> Result<Vec<u8>> {
        let name = "extensible array super block";
        let info = header
            .super_blocks
            .get(self.index)
            .filter(|_| self.index >= header.index_block_super_blocks)
            .copied()
            .ok_or_else(|| encode_error(name, format!("no super block {}", self.index)))?;
        let bitmap = header
            .bitmap_len_per_data_block(&info)
            .saturating_mul(info.data_blocks);
        if self.page_bitmap.len() as u64 != bitmap {
            return Err(count_error(
                name,
                "bitmap bytes",
                self.page_bitmap.len(),
                bitmap,
            ));
        }
        if self.data_block_addresses.len() as u64 != info.data_blocks {
            return Err(count_error(
                name,
                "data block addresses",
                self.data_block_addresses.len(),
                info.data_blocks,
            ));
        }
        let mut w = Writer::new();
        encode_prefix(&mut w, b"EASB", header, sizes);
        encode_block_offset(&mut w, header, self.block_offset, name)?;
        w.bytes(&self.page_bitmap);
        for &a in &self.data_block_addresses {
            w.offset(sizes, a);
        }
        w.checksum_from(0);
        Ok(w.into_bytes())
    }

    /// Whether bit `bit` of the page bitmaps is set (see [`PageSlot::bitmap_bit`]).
    pub fn page_initialized(&self, bit: u64) -> bool {
        bit_set(&self.page_bitmap, bit)
    }
}

/// An extensible array data block (`EADB`, version 0).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ExtensibleArrayDataBlock {
    /// File address of the data block.
    pub address: u64,
    /// Index of its first element (after the index block's), as stored.
    pub block_offset: u64,
    /// Its elements (empty when paged: they are in the pages).
    pub elements: Vec<ChunkEntry>,
}

impl ExtensibleArrayDataBlock {
    /// Decodes a data block of `elements` elements (from the slot or the geometry; bytes: at
    /// least `header.data_block_len(sizes, elements)`).
    pub fn decode(
        bytes: &[u8],
        header: &ExtensibleArrayHeader,
        sizes: Sizes,
        elements: u64,
        address: u64,
    ) -> Result<Self> {
        let mut r = Reader::new(bytes, "extensible array data block", address);
        block_prefix(&mut r, b"EADB", header, sizes)?;
        let block_offset = r.uint(header.array_offset_size)?;
        let elems = if header.pages_per_data_block(elements) > 0 {
            Vec::new()
        } else {
            header.format.decode_many(&mut r, sizes, elements)?
        };
        verify_checksum(&mut r)?;
        Ok(Self {
            address,
            block_offset,
            elements: elems,
        })
    }
}

impl ExtensibleArrayDataBlock {
    /// Encodes a data block of `elements` elements (`header.data_block_len(sizes,
    /// elements)` bytes): its elements, or none when it is paged (the pages are encoded apart
    /// with [`encode_page`]). Errors when the elements or block offset do not fit.
    pub fn encode(
        &self,
        header: &ExtensibleArrayHeader,
        sizes: Sizes,
        elements: u64,
    ) -> Result<Vec<u8>> {
        let name = "extensible array data block";
        let want = if header.pages_per_data_block(elements) > 0 {
            0
        } else {
            elements
        };
        if self.elements.len() as u64 != want {
            return Err(count_error(name, "elements", self.elements.len(), want));
        }
        let mut w =
            Writer::with_capacity(usize::try_from(header.data_block_len(sizes, want)).unwrap_or(0));
        encode_prefix(&mut w, b"EADB", header, sizes);
        encode_block_offset(&mut w, header, self.block_offset, name)?;
        header.format.encode_many(&mut w, sizes, &self.elements)?;
        w.checksum_from(0);
        Ok(w.into_bytes())
    }
}

/// Encodes one data block page (`header.page_elements()` elements and a checksum).
pub fn encode_page(
    header: &ExtensibleArrayHeader,
    sizes: Sizes,
    elements: &[ChunkEntry],
) -> Result<Vec<u8>> {
    if elements.len() as u64 != header.page_elements() {
        return Err(count_error(
            "extensible array data block page",
            "elements",
            elements.len(),
            header.page_elements(),
        ));
    }
    crate::fixed_array::encode_page(&header.format, sizes, elements)
}

/// Decodes one data block page (`header.page_elements()` elements and a checksum).
pub fn decode_page(
    bytes: &[u8],
    header: &ExtensibleArrayHeader,
    sizes: Sizes,
    address: u64,
) -> Result<Vec<ChunkEntry>> {
    decode_page_named(
        bytes,
        &header.format,
        sizes,
        header.page_elements(),
        address,
        "extensible array data block page",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UNDEFINED_ADDRESS;
    use crate::btree2::testutil::{le, seal, sweep};

    const S4: Sizes = Sizes {
        offset: 4,
        length: 4,
    };

    /// A header image with the given creation parameters (4-byte sizes).
    fn header_image(client: u8, esize: u8, params: [u8; 5], max_set: u64, ib: u64) -> Vec<u8> {
        let mut b = b"EAHD".to_vec();
        b.extend([0, client, esize]);
        b.extend(params);
        for v in [1, 2, 3, 4, max_set, 6] {
            b.extend(le(v, 4));
        }
        b.extend(le(ib, 4));
        seal(&mut b);
        b
    }

    /// libhdf5's dataset parameters: 32 index bits, 4 elements in the index block, data
    /// blocks of at least 16, super blocks of at least 4 pointers, 1024-element pages.
    const LIB: [u8; 5] = [32, 4, 16, 4, 10];

    #[test]
    fn geometry_of_the_library_parameters() {
        let hb = header_image(0, 4, LIB, 100, 0x400);
        assert_eq!(hb.len(), ExtensibleArrayHeader::encoded_len(S4));
        sweep(&hb, hb.len(), |b| {
            ExtensibleArrayHeader::decode(b, S4, 0x100)
        });
        let h = ExtensibleArrayHeader::decode(&hb, S4, 0x100).unwrap();
        assert_eq!(h.stats.max_index_set, 100);
        assert_eq!(h.super_blocks.len(), 1 + 32 - 4);
        let first: Vec<(u64, u64, u64, u64)> = h.super_blocks[..6]
            .iter()
            .map(|s| {
                (
                    s.data_blocks,
                    s.data_block_elements,
                    s.start_index,
                    s.start_data_block,
                )
            })
            .collect();
        assert_eq!(
            first,
            vec![
                (1, 16, 0, 0),
                (1, 32, 16, 1),
                (2, 32, 48, 2),
                (2, 64, 112, 4),
                (4, 64, 240, 6),
                (4, 128, 496, 10)
            ]
        );
        // Super block s holds m·2^s elements, so s starts at m·(2^s - 1).
        for (s, info) in h.super_blocks.iter().enumerate() {
            assert_eq!(info.start_index, 16 * ((1u64 << s) - 1));
            assert_eq!(info.data_blocks * info.data_block_elements, 16 << s);
            assert_eq!(h.super_block_of(info.start_index), s);
            assert_eq!(h.super_block_of(info.start_index + (16 << s) - 1), s);
        }
        assert_eq!(h.index_block_super_blocks, 4);
        assert_eq!(h.index_block_data_blocks, 6);
        assert_eq!(h.index_block_super_block_addresses, 25);
        assert_eq!(h.array_offset_size, 4);
        // 4+1+1 + addr 4 + 4 elements·4 + 31 addresses·4 + checksum 4.
        assert_eq!(h.index_block_len(S4), 10 + 4 + 16 + 124);
        // Super block 13: 64 data blocks of 2048 (2 pages each, 1 bitmap byte each).
        assert_eq!(h.pages_per_data_block(2048), 2);
        assert_eq!(h.pages_per_data_block(1024), 0);
        assert_eq!(h.super_block_len(S4, 13), 10 + 4 + 4 + 64 * (1 + 4));
        assert_eq!(h.data_block_prefix_len(S4), 18);
        assert_eq!(h.data_block_len(S4, 2048), 18);
        assert_eq!(h.data_block_len(S4, 64), 18 + 64 * 4);
        assert_eq!(h.page_len(), 1024 * 4 + 4);
        assert_eq!(h.page_address(S4, 0x9000, 1), 0x9000 + 18 + 4100);
    }

    #[test]
    fn locating_elements() {
        let h = ExtensibleArrayHeader::decode(&header_image(0, 4, LIB, 0, 0), S4, 0).unwrap();
        assert_eq!(
            h.locate(3),
            Some(ExtensibleArraySlot::IndexBlock { element: 3 })
        );
        let slot = |i| match h.locate(i) {
            Some(ExtensibleArraySlot::DataBlock {
                super_block,
                parent,
                block_offset,
                element,
                page,
                ..
            }) => (super_block, parent, block_offset, element, page),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            slot(4),
            (0, DataBlockParent::IndexBlock { slot: 0 }, 0, 0, None)
        );
        // Element 20 is the 16th after the index block: super block 1, the index block's
        // second data block, whose stored offset is 16 + 1·32 (libhdf5 counts the slot).
        assert_eq!(
            slot(20),
            (1, DataBlockParent::IndexBlock { slot: 1 }, 48, 0, None)
        );
        // Index 4+48+40: super block 2, its second data block (slot 3), element 8.
        assert_eq!(
            slot(4 + 48 + 40),
            (
                2,
                DataBlockParent::IndexBlock { slot: 3 },
                48 + 3 * 32,
                8,
                None
            )
        );
        // Super block 4 is the first real one.
        assert_eq!(
            slot(4 + 240 + 64 + 1),
            (
                4,
                DataBlockParent::SuperBlock {
                    slot: 0,
                    data_block: 1
                },
                240 + 64,
                1,
                None
            )
        );
        // Super block 13 (start 16·(2^13-1) = 131056): paged data blocks of 2048.
        let (s, parent, off, element, page) = slot(4 + 131_056 + 2048 + 1500);
        assert_eq!(s, 13);
        assert_eq!(
            parent,
            DataBlockParent::SuperBlock {
                slot: 9,
                data_block: 1
            }
        );
        assert_eq!((off, element), (131_056 + 2048, 1500));
        assert_eq!(
            page,
            Some(PageSlot {
                page: 1,
                element: 476,
                bitmap_bit: Some(3)
            })
        );
        // The last element of a 32-bit array, and one past it.
        assert!(h.locate(4 + (16u64 << 29) - 16 - 1).is_some());
        assert_eq!(h.locate(4 + (16u64 << 29) - 16), None);
        assert_eq!(h.locate(u64::MAX), None);
    }

    fn prefix(sig: &[u8; 4], client: u8, hdr: u64) -> Vec<u8> {
        let mut b = sig.to_vec();
        b.extend([0, client]);
        b.extend(le(hdr, 4));
        b
    }

    #[test]
    fn blocks_decode_and_reject_corruption() {
        // Small parameters: 8 index bits, 2 index block elements, data blocks of 2+, super
        // blocks of 2+ pointers, 4-element pages. Filtered, 2-byte sizes: 10-byte elements.
        let hb = header_image(1, 10, [8, 2, 2, 2, 2], 10, 0x400);
        let h = ExtensibleArrayHeader::decode(&hb, S4, 0x100).unwrap();
        assert_eq!(h.super_blocks.len(), 8);
        assert_eq!(h.encode(S4), hb);
        assert_eq!(
            ExtensibleArrayHeader::new(S4, 0x100, h.params(), h.stats, 0x400).unwrap(),
            h
        );
        assert_eq!(
            (
                h.index_block_data_blocks,
                h.index_block_super_block_addresses
            ),
            (2, 6)
        );
        let elem = |a: u64, size: u64, mask: u32| {
            [le(a, 4), le(size, 2), mask.to_le_bytes().to_vec()].concat()
        };

        let mut ib = prefix(b"EAIB", 1, 0x100);
        ib.extend(elem(0x1000, 7, 0));
        ib.extend(elem(0xffff_ffff, 0, 0));
        for a in [
            0x500u64,
            0xffff_ffff,
            0x600,
            0xffff_ffff,
            0xffff_ffff,
            0xffff_ffff,
            0xffff_ffff,
            0xffff_ffff,
        ] {
            ib.extend(le(a, 4));
        }
        seal(&mut ib);
        assert_eq!(ib.len() as u64, h.index_block_len(S4));
        sweep(&ib, ib.len(), |b| {
            ExtensibleArrayIndexBlock::decode(b, &h, S4, 0x400)
        });
        let i = ExtensibleArrayIndexBlock::decode(&ib, &h, S4, 0x400).unwrap();
        assert_eq!(i.encode(&h, S4).unwrap(), ib);
        let mut bad = i.clone();
        bad.super_block_addresses.pop();
        assert!(bad.encode(&h, S4).is_err());
        assert_eq!(i.elements[0].size, Some(7));
        assert_eq!(i.data_block_addresses, vec![0x500, UNDEFINED_ADDRESS]);
        assert_eq!(i.super_block_addresses[0], 0x600);

        // Super block 3: 2 data blocks of 8 elements, 2 pages each: 1 bitmap byte each.
        let info = h.super_blocks[3];
        assert_eq!(
            (info.data_blocks, info.data_block_elements, info.start_index),
            (2, 8, 14)
        );
        let mut sb = prefix(b"EASB", 1, 0x100);
        sb.push(14); // block offset, 1 byte for 8 index bits
        sb.extend([0b1000_0000, 0b0100_0000]);
        sb.extend(le(0x700, 4));
        sb.extend(le(0xffff_ffff, 4));
        seal(&mut sb);
        assert_eq!(sb.len() as u64, h.super_block_len(S4, 3));
        sweep(&sb, sb.len(), |b| {
            ExtensibleArraySuperBlock::decode(b, &h, S4, 3, 0x600)
        });
        let s = ExtensibleArraySuperBlock::decode(&sb, &h, S4, 3, 0x600).unwrap();
        assert_eq!(s.encode(&h, S4).unwrap(), sb);
        let mut bad = s.clone();
        bad.block_offset = 256; // 1-byte field
        assert!(bad.encode(&h, S4).is_err());
        let mut bad = s.clone();
        bad.index = 1;
        assert!(bad.encode(&h, S4).is_err());
        let mut bad = s.clone();
        bad.page_bitmap.pop();
        assert!(bad.encode(&h, S4).is_err());
        assert!(s.page_initialized(0) && !s.page_initialized(1));
        assert!(!s.page_initialized(8) && s.page_initialized(9));
        assert_eq!(s.data_block_addresses, vec![0x700, UNDEFINED_ADDRESS]);
        // Super blocks the index block stands in for do not exist on disk.
        assert!(ExtensibleArraySuperBlock::decode(&sb, &h, S4, 1, 0x600).is_err());
        assert!(ExtensibleArraySuperBlock::decode(&sb, &h, S4, 99, 0x600).is_err());

        // A paged data block of super block 3 is just its prefix.
        let mut db = prefix(b"EADB", 1, 0x100);
        db.push(14);
        seal(&mut db);
        assert_eq!(db.len() as u64, h.data_block_len(S4, 8));
        sweep(&db, db.len(), |b| {
            ExtensibleArrayDataBlock::decode(b, &h, S4, 8, 0x700)
        });
        let paged = ExtensibleArrayDataBlock::decode(&db, &h, S4, 8, 0x700).unwrap();
        assert!(paged.elements.is_empty());
        assert_eq!(paged.encode(&h, S4, 8).unwrap(), db);
        // An unpaged one (2 elements) holds its elements.
        let mut db = prefix(b"EADB", 1, 0x100);
        db.push(0);
        db.extend(elem(0x2000, 9, 1));
        db.extend(elem(0x3000, 10, 0));
        seal(&mut db);
        sweep(&db, db.len(), |b| {
            ExtensibleArrayDataBlock::decode(b, &h, S4, 2, 0x500)
        });
        let d = ExtensibleArrayDataBlock::decode(&db, &h, S4, 2, 0x500).unwrap();
        assert_eq!(d.encode(&h, S4, 2).unwrap(), db);
        assert!(d.encode(&h, S4, 8).is_err());
        assert_eq!(
            d.elements[1],
            ChunkEntry {
                address: 0x3000,
                size: Some(10),
                filter_mask: 0
            }
        );
        // A page: 4 elements and a checksum.
        let mut page: Vec<u8> = (0..4).flat_map(|k| elem(0x4000 + k, 3, 0)).collect();
        seal(&mut page);
        sweep(&page, page.len(), |b| decode_page(b, &h, S4, 0x712));
        let p = decode_page(&page, &h, S4, 0x712).unwrap();
        assert_eq!(p[3].address, 0x4003);
        assert_eq!(encode_page(&h, S4, &p).unwrap(), page);
        assert!(encode_page(&h, S4, &p[..3]).is_err());
        // Blocks of another header or client are corrupt.
        let other = ExtensibleArrayHeader::decode(&hb, S4, 0x180).unwrap();
        assert!(ExtensibleArrayIndexBlock::decode(&ib, &other, S4, 0x400).is_err());
        let plain =
            ExtensibleArrayHeader::decode(&header_image(0, 4, [8, 2, 2, 2, 2], 0, 0), S4, 0x100)
                .unwrap();
        assert!(ExtensibleArrayIndexBlock::decode(&ib, &plain, S4, 0x400).is_err());
    }

    #[test]
    fn impossible_headers_are_errors() {
        for params in [
            [0, 4, 16, 4, 10],   // no index bits
            [65, 4, 16, 4, 10],  // more than 64
            [32, 4, 0, 4, 10],   // data blocks of 0
            [32, 4, 12, 4, 10],  // not a power of two
            [32, 4, 16, 3, 10],  // not a power of two
            [32, 4, 16, 0, 10],  // no pointers
            [3, 4, 16, 4, 10],   // index bits cannot reach one data block
            [4, 4, 16, 128, 10], // fewer super blocks than the index block covers
            [32, 4, 16, 4, 64],  // absurd pages
        ] {
            let hb = header_image(0, 4, params, 0, 0);
            assert!(
                ExtensibleArrayHeader::decode(&hb, S4, 0).is_err(),
                "{params:?}"
            );
        }
        // 64 index bits and the largest data blocks are fine (no overflow).
        let h = ExtensibleArrayHeader::decode(
            &header_image(0, 4, [64, 255, 128, 128, 63], 0, 0),
            S4,
            0,
        )
        .unwrap();
        assert!(h.locate(u64::MAX).is_some());
        assert_eq!(h.super_block_len(S4, 999), u64::MAX);
        let _ = h.super_block_len(S4, h.super_blocks.len() - 1);
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300),
                                           params in proptest::array::uniform5(any::<u8>()),
                                           i in any::<u64>(), s in 0usize..70, n in any::<u64>()) {
                let _ = ExtensibleArrayHeader::decode(&bytes, S4, 0);
                if let Ok(h) = ExtensibleArrayHeader::decode(&header_image(0, 4, params, 0, 0), S4, 0) {
                    let _ = h.locate(i);
                    let _ = h.super_block_len(S4, s);
                    let _ = h.data_block_len(S4, n);
                    let _ = ExtensibleArrayIndexBlock::decode(&bytes, &h, S4, 0);
                    let _ = ExtensibleArraySuperBlock::decode(&bytes, &h, S4, s, 0);
                    let _ = ExtensibleArrayDataBlock::decode(&bytes, &h, S4, n, 0);
                    let _ = decode_page(&bytes, &h, S4, 0);
                }
            }
        }
    }
}
