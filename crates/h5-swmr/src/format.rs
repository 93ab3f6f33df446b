//! The metadata file's header (`VHDR`, 36 bytes) and index (`VIDX`, 20 + 16·n bytes): the
//! reference format of the VFD SWMR RFC and its C implementation (`H5Fvfd_swmr.c`,
//! `H5FDvfd_swmr.c`, read for facts). Little-endian; every checksum is Jenkins lookup3 (the
//! HDF5 metadata checksum, initial value 0) over the bytes before it; entry checksums cover the
//! whole image. Layout: docs/design.md §8.1.
//!
//! ```
//! use h5_swmr::format::{IndexEntry, MdHeader, MdIndex};
//! let index = MdIndex { tick: 7, entries: vec![IndexEntry { hdf5_page: 3, md_page: 1, length: 4096, checksum: 9 }] };
//! let bytes = index.encode()?;
//! assert_eq!(bytes.len(), 36);
//! assert_eq!(MdIndex::decode(&bytes, 4096)?, index);
//! let h = MdHeader { page_size: 4096, tick: 7, index_offset: 36, index_length: 36 };
//! assert_eq!(MdHeader::decode(&h.encode())?, h);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use h5_format::checksum::lookup3;

use crate::error::SwmrError;

/// `VHDR`.
pub const HEADER_SIGNATURE: [u8; 4] = *b"VHDR";
/// `VIDX`.
pub const INDEX_SIGNATURE: [u8; 4] = *b"VIDX";

const H_SIG: usize = 0;
const H_PAGE_SIZE: usize = H_SIG + 4;
const H_TICK: usize = H_PAGE_SIZE + 4;
const H_INDEX_OFFSET: usize = H_TICK + 8;
const H_INDEX_LENGTH: usize = H_INDEX_OFFSET + 8;
const H_CHECKSUM: usize = H_INDEX_LENGTH + 8;
/// Bytes of the header.
pub const HEADER_LEN: usize = H_CHECKSUM + 4;

const I_SIG: usize = 0;
const I_TICK: usize = I_SIG + 4;
const I_COUNT: usize = I_TICK + 8;
const I_ENTRIES: usize = I_COUNT + 4;
/// Bytes of an index without entries (signature, tick, count, checksum).
pub const INDEX_OVERHEAD: usize = I_ENTRIES + 4;
/// Bytes of one index entry.
pub const ENTRY_LEN: usize = 16;

/// Bytes of an index of `entries` entries.
pub fn index_len(entries: usize) -> u64 {
    (INDEX_OVERHEAD + ENTRY_LEN * entries) as u64
}

/// Entries that fit in the reserved pages next to the header
/// (`(page_size × reserved − 36 − 20) / 16`).
pub fn reserved_capacity(page_size: u64, md_pages_reserved: u64) -> u64 {
    (page_size * md_pages_reserved).saturating_sub((HEADER_LEN + INDEX_OVERHEAD) as u64)
        / ENTRY_LEN as u64
}

/// Why bytes read from the metadata file were refused.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Fault {
    /// A signature or checksum mismatch, or a short read: possibly a write in progress, so the
    /// reader retries.
    Torn(String),
    /// Checked bytes that break the format's rules: corruption.
    Corrupt(String),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Torn(r) => write!(f, "torn or partial write: {r}"),
            Fault::Corrupt(r) => write!(f, "corrupt: {r}"),
        }
    }
}

impl std::error::Error for Fault {}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

fn narrow(what: &'static str, value: u64) -> Result<u32, SwmrError> {
    u32::try_from(value).map_err(|_| SwmrError::FormatLimit { what, value })
}

/// The metadata file header, at byte 0.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MdHeader {
    /// Page size of the HDF5 file and the metadata file.
    pub page_size: u32,
    /// The tick this header publishes.
    pub tick: u64,
    /// Byte offset of the index (36 when it follows the header, page-aligned once relocated).
    pub index_offset: u64,
    /// Byte length of the index.
    pub index_length: u64,
}

impl MdHeader {
    /// The 36-byte image.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[H_SIG..H_PAGE_SIZE].copy_from_slice(&HEADER_SIGNATURE);
        b[H_PAGE_SIZE..H_TICK].copy_from_slice(&self.page_size.to_le_bytes());
        b[H_TICK..H_INDEX_OFFSET].copy_from_slice(&self.tick.to_le_bytes());
        b[H_INDEX_OFFSET..H_INDEX_LENGTH].copy_from_slice(&self.index_offset.to_le_bytes());
        b[H_INDEX_LENGTH..H_CHECKSUM].copy_from_slice(&self.index_length.to_le_bytes());
        let sum = lookup3(&b[..H_CHECKSUM], 0);
        b[H_CHECKSUM..].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decodes the first 36 bytes of `b`.
    pub fn decode(b: &[u8]) -> Result<MdHeader, Fault> {
        let Some(b) = b.get(..HEADER_LEN) else {
            return Err(Fault::Torn(format!("header of {} bytes", b.len())));
        };
        if b[H_SIG..H_PAGE_SIZE] != HEADER_SIGNATURE {
            return Err(Fault::Torn("no VHDR signature".into()));
        }
        if lookup3(&b[..H_CHECKSUM], 0) != u32_at(b, H_CHECKSUM) {
            return Err(Fault::Torn("header checksum mismatch".into()));
        }
        let h = MdHeader {
            page_size: u32_at(b, H_PAGE_SIZE),
            tick: u64_at(b, H_TICK),
            index_offset: u64_at(b, H_INDEX_OFFSET),
            index_length: u64_at(b, H_INDEX_LENGTH),
        };
        if h.page_size == 0 {
            return Err(Fault::Corrupt("page size 0".into()));
        }
        let entries = h.index_length.checked_sub(INDEX_OVERHEAD as u64);
        if entries.is_none_or(|e| e % ENTRY_LEN as u64 != 0) {
            return Err(Fault::Corrupt(format!(
                "index length {} is not 20 + 16·n",
                h.index_length
            )));
        }
        if h.index_offset < HEADER_LEN as u64 {
            return Err(Fault::Corrupt(format!(
                "index offset {} overlaps the header",
                h.index_offset
            )));
        }
        Ok(h)
    }

    /// Whether the index lies inside the first `reserved_bytes` bytes (the reader's single-read
    /// fast path, OQ-5).
    pub fn index_in(&self, reserved_bytes: u64) -> bool {
        self.index_offset
            .checked_add(self.index_length)
            .is_some_and(|end| end <= reserved_bytes)
    }
}

/// One entry of the index (in memory with 64-bit page offsets, on disk 32-bit).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct IndexEntry {
    /// HDF5 file page of the page or multi-page entry.
    pub hdf5_page: u64,
    /// Metadata file page of its current image.
    pub md_page: u64,
    /// Bytes: the page size for a page, more for a multi-page entry.
    pub length: u32,
    /// Checksum of the image.
    pub checksum: u32,
}

impl IndexEntry {
    /// Pages of the HDF5 file it covers.
    pub fn pages(&self, page_size: u64) -> u64 {
        u64::from(self.length).div_ceil(page_size)
    }
}

/// The metadata file index.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct MdIndex {
    /// The tick it belongs to (equal to the header's once both are written).
    pub tick: u64,
    /// Entries by strictly increasing HDF5 page.
    pub entries: Vec<IndexEntry>,
}

impl MdIndex {
    /// Bytes of the encoded index.
    pub fn encoded_len(&self) -> u64 {
        index_len(self.entries.len())
    }

    /// The image. Page offsets of 2³² or more are refused, never truncated (SWMR-138).
    pub fn encode(&self) -> Result<Vec<u8>, SwmrError> {
        let n = narrow("index entry count", self.entries.len() as u64)?;
        let mut b = Vec::with_capacity(self.encoded_len() as usize);
        b.extend_from_slice(&INDEX_SIGNATURE);
        b.extend_from_slice(&self.tick.to_le_bytes());
        b.extend_from_slice(&n.to_le_bytes());
        for e in &self.entries {
            b.extend_from_slice(&narrow("HDF5 file page offset", e.hdf5_page)?.to_le_bytes());
            b.extend_from_slice(&narrow("metadata file page offset", e.md_page)?.to_le_bytes());
            b.extend_from_slice(&e.length.to_le_bytes());
            b.extend_from_slice(&e.checksum.to_le_bytes());
        }
        let sum = lookup3(&b, 0);
        b.extend_from_slice(&sum.to_le_bytes());
        Ok(b)
    }

    /// Decodes an index image of exactly its length, checking the entries' order and lengths
    /// against `page_size` (SWMR-053, SWMR-088).
    pub fn decode(b: &[u8], page_size: u64) -> Result<MdIndex, Fault> {
        if b.len() < INDEX_OVERHEAD {
            return Err(Fault::Torn(format!("index of {} bytes", b.len())));
        }
        if b[I_SIG..I_TICK] != INDEX_SIGNATURE {
            return Err(Fault::Torn("no VIDX signature".into()));
        }
        let body = b.len() - 4;
        if lookup3(&b[..body], 0) != u32_at(b, body) {
            return Err(Fault::Torn("index checksum mismatch".into()));
        }
        let tick = u64_at(b, I_TICK);
        let n = u32_at(b, I_COUNT) as usize;
        if index_len(n) != b.len() as u64 {
            return Err(Fault::Corrupt(format!(
                "{n} entries in an index of {} bytes",
                b.len()
            )));
        }
        let mut entries = Vec::with_capacity(n);
        for i in 0..n {
            let at = I_ENTRIES + i * ENTRY_LEN;
            let e = IndexEntry {
                hdf5_page: u64::from(u32_at(b, at)),
                md_page: u64::from(u32_at(b, at + 4)),
                length: u32_at(b, at + 8),
                checksum: u32_at(b, at + 12),
            };
            if let Some(prev) = entries.last().copied() {
                let prev: IndexEntry = prev;
                if e.hdf5_page <= prev.hdf5_page {
                    return Err(Fault::Corrupt(format!(
                        "entries not in increasing page order ({} after {})",
                        e.hdf5_page, prev.hdf5_page
                    )));
                }
                if prev.hdf5_page + prev.pages(page_size) > e.hdf5_page {
                    return Err(Fault::Corrupt(format!(
                        "entry at page {} overlaps the one at page {}",
                        e.hdf5_page, prev.hdf5_page
                    )));
                }
            }
            if u64::from(e.length) < page_size {
                return Err(Fault::Corrupt(format!(
                    "entry at page {} of {} bytes, under a page",
                    e.hdf5_page, e.length
                )));
            }
            if e.md_page == 0 {
                return Err(Fault::Corrupt(format!(
                    "entry at page {} points into the header page",
                    e.hdf5_page
                )));
            }
            entries.push(e);
        }
        Ok(MdIndex { tick, entries })
    }

    /// The entry holding HDF5 page `page` (a page entry, or a multi-page entry reaching into
    /// it), by binary search.
    pub fn lookup(&self, page: u64, page_size: u64) -> Option<&IndexEntry> {
        let i = self.entries.partition_point(|e| e.hdf5_page <= page);
        let e = self.entries.get(i.checked_sub(1)?)?;
        (e.hdf5_page + e.pages(page_size) > page).then_some(e)
    }
}

/// The entries a reader must act on when its index goes from `old` to `new` (SWMR-092):
/// pages added, pages whose image changed (metadata file page, length or checksum), and pages
/// that left the index. The RFC says removed pages need nothing because their HDF5 file bytes
/// equal their last image — but only the *last* image: a reader that skipped ticks holds an
/// older one (a writer closing publishes an empty index right after its last changes), so they
/// are evicted too, as the C implementation does. Both indexes are sorted; one merge pass.
pub fn changed_entries(old: &[IndexEntry], new: &[IndexEntry]) -> Vec<IndexEntry> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) if o.hdf5_page == n.hdf5_page => {
                if o.md_page != n.md_page || o.length != n.length || o.checksum != n.checksum {
                    out.push(if n.length >= o.length { *n } else { *o });
                }
                i += 1;
                j += 1;
            }
            (Some(o), Some(n)) if o.hdf5_page < n.hdf5_page => {
                out.push(*o);
                i += 1;
            }
            (Some(o), None) => {
                out.push(*o);
                i += 1;
            }
            (_, Some(n)) => {
                out.push(*n);
                j += 1;
            }
            (None, None) => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(p: u64, m: u64, len: u32) -> IndexEntry {
        IndexEntry {
            hdf5_page: p,
            md_page: m,
            length: len,
            checksum: (p * 31 + m) as u32,
        }
    }

    #[test]
    fn header_layout_is_the_reference_layout() {
        let h = MdHeader {
            page_size: 4096,
            tick: 0x0102_0304_0506_0708,
            index_offset: 36,
            index_length: 20 + 32,
        };
        let b = h.encode();
        assert_eq!(b.len(), 36);
        assert_eq!(&b[..4], b"VHDR");
        assert_eq!(&b[4..8], &[0, 16, 0, 0]);
        assert_eq!(&b[8..16], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&b[16..24], &[36, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[24..32], &[52, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(u32_at(&b, 32), lookup3(&b[..32], 0));
        assert_eq!(MdHeader::decode(&b).unwrap(), h);
    }

    #[test]
    fn index_layout_is_the_reference_layout() {
        let ix = MdIndex {
            tick: 9,
            entries: vec![entry(2, 1, 4096), entry(3, 2, 9000), entry(9, 5, 4096)],
        };
        let b = ix.encode().unwrap();
        assert_eq!(b.len(), 20 + 3 * 16);
        assert_eq!(&b[..4], b"VIDX");
        assert_eq!(u64_at(&b, 4), 9);
        assert_eq!(u32_at(&b, 12), 3);
        // Second entry: hdf5 page 3, md page 2, 9000 bytes.
        assert_eq!(
            (u32_at(&b, 32), u32_at(&b, 36), u32_at(&b, 40)),
            (3, 2, 9000)
        );
        assert_eq!(u32_at(&b, 64), lookup3(&b[..64], 0));
        assert_eq!(MdIndex::decode(&b, 4096).unwrap(), ix);
        assert_eq!(
            ix.lookup(4, 4096).unwrap().hdf5_page,
            3,
            "inside the multi-page entry"
        );
        assert_eq!(ix.lookup(5, 4096).unwrap().hdf5_page, 3);
        assert!(ix.lookup(6, 4096).is_none());
        assert!(ix.lookup(1, 4096).is_none());
        assert_eq!(ix.lookup(9, 4096).unwrap().md_page, 5);
    }

    // SWMR-088 / E-26: duplicate or unordered pages, short entries and counts that disagree
    // with the length are corruption; signature and checksum faults are torn writes.
    #[test]
    fn swmr_088_bad_indexes_are_refused() {
        let good = MdIndex {
            tick: 1,
            entries: vec![entry(2, 1, 4096), entry(5, 2, 4096)],
        };
        let mut dup = good.clone();
        dup.entries[1].hdf5_page = 2;
        assert!(matches!(
            MdIndex::decode(&dup.encode().unwrap(), 4096),
            Err(Fault::Corrupt(_))
        ));
        let mut short = good.clone();
        short.entries[0].length = 100;
        assert!(matches!(
            MdIndex::decode(&short.encode().unwrap(), 4096),
            Err(Fault::Corrupt(_))
        ));
        let mut overlap = good.clone();
        overlap.entries[0].length = 3 * 4096 + 1;
        assert!(matches!(
            MdIndex::decode(&overlap.encode().unwrap(), 4096),
            Err(Fault::Corrupt(_))
        ));
        let mut b = good.encode().unwrap();
        b[12] = 3; // count 3 in a 2-entry image: the checksum is redone so only the count lies
        let n = b.len() - 4;
        let sum = lookup3(&b[..n], 0);
        b[n..].copy_from_slice(&sum.to_le_bytes());
        assert!(matches!(MdIndex::decode(&b, 4096), Err(Fault::Corrupt(_))));
        let mut b = good.encode().unwrap();
        b[20] ^= 1;
        assert!(matches!(MdIndex::decode(&b, 4096), Err(Fault::Torn(_))));
        let mut h = MdHeader {
            page_size: 4096,
            tick: 3,
            index_offset: 36,
            index_length: 52,
        }
        .encode();
        h[10] ^= 0x40;
        assert!(matches!(MdHeader::decode(&h), Err(Fault::Torn(_))));
        assert!(matches!(MdHeader::decode(&h[..20]), Err(Fault::Torn(_))));
        let bad_len = MdHeader {
            page_size: 4096,
            tick: 3,
            index_offset: 36,
            index_length: 50,
        }
        .encode();
        assert!(matches!(MdHeader::decode(&bad_len), Err(Fault::Corrupt(_))));
    }

    // SWMR-138 / E-29: page offsets that do not fit 32 bits are refused, never wrapped.
    #[test]
    fn swmr_138_format_limits() {
        for e in [entry(1 << 32, 1, 4096), entry(1, 1 << 32, 4096)] {
            let ix = MdIndex {
                tick: 1,
                entries: vec![e],
            };
            assert!(matches!(ix.encode(), Err(SwmrError::FormatLimit { .. })));
        }
        let ok = MdIndex {
            tick: 1,
            entries: vec![entry(u32::MAX as u64, 1, 4096)],
        };
        assert!(ok.encode().is_ok());
    }

    // SWMR-092: the diff of two indexes.
    #[test]
    fn swmr_092_diff_finds_added_and_changed_pages() {
        let old = vec![
            entry(1, 1, 4096),
            entry(2, 2, 4096),
            entry(4, 3, 4096),
            entry(7, 4, 4096),
        ];
        let mut changed = entry(2, 9, 4096);
        changed.checksum = old[1].checksum;
        let new = vec![old[0], changed, entry(3, 10, 4096), entry(7, 4, 8192)];
        let d = changed_entries(&old, &new);
        let pages: Vec<u64> = d.iter().map(|e| e.hdf5_page).collect();
        assert_eq!(
            pages,
            vec![2, 3, 4, 7],
            "changed md page, added, removed, changed length; 1 unchanged"
        );
        let mut sum_only = new.clone();
        sum_only[0].checksum ^= 1;
        assert_eq!(changed_entries(&new, &sum_only).len(), 1);
        assert!(changed_entries(&new, &new).is_empty());
    }

    #[test]
    fn reserved_capacity_matches_the_spec_example() {
        assert_eq!(reserved_capacity(4096, 1), 252);
        assert_eq!(reserved_capacity(512, 1), 28);
    }
}
