//! The virtual dataset mapping list: the global heap object a virtual layout message (layout
//! class 3) points at, and the serialized dataspace selections inside it.
//!
//! Mapping list (spec "Global Heap Block for Virtual Datasets"; encoding version 0, and
//! version 1 which HDF5 2.0 writes when it is shorter):
//!
//! | field                         | bytes                 |
//! |-------------------------------|-----------------------|
//! | version (0)                   | 1                     |
//! | number of entries             | `sizes.length`        |
//! | per entry: source file name   | null-terminated (`.`: the virtual dataset's own file) |
//! | per entry: source dataset     | null-terminated       |
//! | per entry: source selection   | serialized selection  |
//! | per entry: virtual selection  | serialized selection  |
//! | checksum                      | 4 (lookup3 of every byte before it) |
//!
//! Version 1 (libhdf5 2.0; layout observed in the files it writes) puts a flags byte before
//! each entry's names: [`SAME_FILE_FLAG`] leaves the file name out (the source is in the same
//! file), [`SHARED_FILE_NAME`] / [`SHARED_DATASET_NAME`] replace a name by the index
//! (`sizes.length` bytes) of an earlier entry holding the same name.
//!
//! A serialized selection starts with its type (4 bytes: 0 none, 1 points, 2 hyperslab, 3 all)
//! and a version (4 bytes), then:
//!
//! * none / all (version 1): 8 reserved bytes;
//! * points version 1: 4 reserved bytes, a 4-byte length, rank (4), count (4), then `rank`
//!   4-byte coordinates per point; version 2: the coordinate size (1 byte: 2, 4 or 8), rank (4),
//!   count and coordinates in that size;
//! * hyperslab version 1: 4 reserved bytes, a 4-byte length, rank (4), block count (4), then per
//!   block its start and its (inclusive) end corner, 4-byte values; version 2: flags (1), a
//!   4-byte length, rank (4), 8-byte values; version 3: flags (1), the value size (1 byte: 2, 4
//!   or 8), rank (4). Flag bit 0 marks a regular hyperslab, stored as start, stride, count and
//!   block per dimension; otherwise a block count and the block corners follow. A count or block
//!   of all ones (in the value size) is unlimited.

use crate::checksum::lookup3;
use crate::error::Result;
use crate::reader::{Reader, Sizes};

const STRUCTURE: &str = "virtual dataset mapping list";

/// An unlimited count or block of a hyperslab selection.
pub const UNLIMITED: u64 = u64::MAX;

/// The largest rank a dataspace can have.
pub const MAX_RANK: usize = 32;

/// The source file name that means "the virtual dataset's own file".
pub const SAME_FILE: &str = ".";

/// Mapping flag (encoding version 1): the source file name is an earlier entry's, named by its
/// index (a length-sized integer) instead of a string.
pub const SHARED_FILE_NAME: u8 = 0x01;
/// Mapping flag (encoding version 1): the source dataset name is an earlier entry's, named by its
/// index.
pub const SHARED_DATASET_NAME: u8 = 0x02;
/// Mapping flag (encoding version 1): the source is in the virtual dataset's own file
/// ([`SAME_FILE`]); no file name is stored.
pub const SAME_FILE_FLAG: u8 = 0x04;

/// The earlier entry a shared name refers to: its index, a length-sized integer, must name an
/// entry already decoded.
fn earlier<'e>(
    r: &mut Reader<'_>,
    sizes: Sizes,
    entries: &'e [VirtualMapping],
) -> Result<&'e VirtualMapping> {
    let i = r.length(sizes)?;
    usize::try_from(i)
        .ok()
        .and_then(|i| entries.get(i))
        .ok_or_else(|| r.corrupted(format!("shared name of entry {i}, before it is defined")))
}

/// One dataspace selection as stored.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum SelectionSpec {
    /// No element.
    None,
    /// Every element of the dataspace.
    All,
    /// A point list, in the stored order.
    Points {
        /// Rank of every point.
        rank: usize,
        /// Coordinates, `rank` per point.
        coords: Vec<u64>,
    },
    /// A regular hyperslab; `count` and `block` entries may be [`UNLIMITED`].
    Regular {
        /// First selected index per dimension.
        start: Vec<u64>,
        /// Distance between block starts per dimension.
        stride: Vec<u64>,
        /// Blocks per dimension.
        count: Vec<u64>,
        /// Block length per dimension.
        block: Vec<u64>,
    },
    /// An irregular hyperslab: a union of boxes.
    Blocks {
        /// Rank of every box.
        rank: usize,
        /// Per box: its start corner then its inclusive end corner (`2 * rank` values).
        corners: Vec<u64>,
    },
}

impl SelectionSpec {
    /// The rank the selection carries (`None` for "none" and "all", which fit any rank).
    pub fn rank(&self) -> Option<usize> {
        match self {
            SelectionSpec::None | SelectionSpec::All => None,
            SelectionSpec::Points { rank, .. } | SelectionSpec::Blocks { rank, .. } => Some(*rank),
            SelectionSpec::Regular { start, .. } => Some(start.len()),
        }
    }

    /// Whether a count or block is unlimited.
    pub fn is_unlimited(&self) -> bool {
        match self {
            SelectionSpec::Regular { count, block, .. } => {
                count.contains(&UNLIMITED) || block.contains(&UNLIMITED)
            }
            _ => false,
        }
    }

    /// The boxes of an irregular hyperslab, each as (start, inclusive end).
    pub fn boxes(&self) -> Vec<(&[u64], &[u64])> {
        match self {
            SelectionSpec::Blocks { rank, corners } if *rank > 0 => corners
                .chunks_exact(rank.saturating_mul(2))
                .map(|c| c.split_at(*rank))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Decodes one serialized selection from `r`.
    pub fn decode(r: &mut Reader<'_>) -> Result<SelectionSpec> {
        let kind = r.u32()?;
        let version = r.u32()?;
        match kind {
            0 | 3 => {
                if version != 1 {
                    return Err(r.unsupported(format!(
                        "{} selection version {version}",
                        if kind == 0 { "none" } else { "all" }
                    )));
                }
                r.skip(8)?;
                Ok(if kind == 0 {
                    SelectionSpec::None
                } else {
                    SelectionSpec::All
                })
            }
            1 => decode_points(r, version),
            2 => decode_hyperslab(r, version),
            k => Err(r.corrupted(format!("selection type {k}"))),
        }
    }
}

fn check_enc_size(r: &Reader<'_>, size: u8) -> Result<usize> {
    match size {
        2 | 4 | 8 => Ok(usize::from(size)),
        s => Err(r.corrupted(format!("selection value size {s}"))),
    }
}

fn decode_rank(r: &mut Reader<'_>) -> Result<usize> {
    let rank = r.u32()?;
    match usize::try_from(rank) {
        Ok(n) if (1..=MAX_RANK).contains(&n) => Ok(n),
        _ => Err(r.corrupted(format!("selection rank {rank}"))),
    }
}

/// Reads `count` groups of `per` values of `size` bytes, checking first that they are there.
fn values(r: &mut Reader<'_>, count: u64, per: usize, size: usize) -> Result<Vec<u64>> {
    let bytes = count
        .checked_mul(per as u64)
        .and_then(|n| n.checked_mul(size as u64))
        .unwrap_or(u64::MAX);
    let n = r.check_len(bytes)?;
    let values = n.checked_div(size).unwrap_or(0);
    let mut out = Vec::with_capacity(values);
    for _ in 0..values {
        out.push(r.uint(size)?);
    }
    Ok(out)
}

fn decode_points(r: &mut Reader<'_>, version: u32) -> Result<SelectionSpec> {
    let size = match version {
        1 => {
            r.skip(8)?;
            4
        }
        2 => {
            let s = r.u8()?;
            check_enc_size(r, s)?
        }
        v => return Err(r.unsupported(format!("point selection version {v}"))),
    };
    let rank = decode_rank(r)?;
    let count = r.uint(size)?;
    let coords = values(r, count, rank, size)?;
    Ok(SelectionSpec::Points { rank, coords })
}

fn decode_hyperslab(r: &mut Reader<'_>, version: u32) -> Result<SelectionSpec> {
    let (flags, size) = match version {
        1 => {
            r.skip(8)?;
            (0, 4)
        }
        2 => {
            let f = r.u8()?;
            r.skip(4)?;
            (f, 8)
        }
        3 => {
            let f = r.u8()?;
            let s = r.u8()?;
            (f, check_enc_size(r, s)?)
        }
        v => return Err(r.unsupported(format!("hyperslab selection version {v}"))),
    };
    if flags & !1 != 0 {
        return Err(r.corrupted(format!("hyperslab selection flags {flags:#x}")));
    }
    let rank = decode_rank(r)?;
    if flags & 1 != 0 {
        let all_ones = crate::reader::all_ones(size);
        let v = values(r, 1, rank.saturating_mul(4), size)?;
        let unlimited = |x: u64| if x == all_ones { UNLIMITED } else { x };
        let pick = |k: usize| -> Vec<u64> { v.iter().skip(k).step_by(4).copied().collect() };
        Ok(SelectionSpec::Regular {
            start: pick(0),
            stride: pick(1),
            count: pick(2).into_iter().map(unlimited).collect(),
            block: pick(3).into_iter().map(unlimited).collect(),
        })
    } else {
        let count = r.uint(size)?;
        let corners = values(r, count, rank.saturating_mul(2), size)?;
        // `decode_rank` refuses rank 0.
        for c in corners.chunks_exact(rank.saturating_mul(2).max(1)) {
            let (s, e) = c.split_at(rank);
            if s.iter().zip(e).any(|(a, b)| a > b) {
                return Err(r.corrupted("hyperslab block ends before it starts"));
            }
        }
        Ok(SelectionSpec::Blocks { rank, corners })
    }
}

/// One mapping: elements of a source dataset shown at elements of the virtual dataset.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct VirtualMapping {
    /// The source file's name as stored ([`SAME_FILE`]: the virtual dataset's own file; may hold
    /// `%b` / `%%` printf-style patterns).
    pub source_file: String,
    /// The source dataset's path in that file (may hold printf-style patterns too).
    pub source_dataset: String,
    /// The source dataset's elements, in the source's dataspace.
    pub source_selection: SelectionSpec,
    /// Where they go, in the virtual dataset's dataspace.
    pub virtual_selection: SelectionSpec,
}

/// The decoded mapping list of a virtual dataset.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct VirtualMappings {
    /// The mappings, in stored order.
    pub entries: Vec<VirtualMapping>,
}

impl VirtualMappings {
    /// Decodes the global heap object `bytes` (which sits in the collection at `address`) and
    /// checks its checksum.
    pub fn decode(bytes: &[u8], sizes: Sizes, address: u64) -> Result<VirtualMappings> {
        let mut r = Reader::new(bytes, STRUCTURE, address);
        let version = r.u8()?;
        if version > 1 {
            return Err(r.unsupported(format!("mapping list encoding version {version}")));
        }
        let n = r.length(sizes)?;
        // Each entry takes at least two 16-byte selections (and a flags byte or two names).
        if n.saturating_mul(33) > r.remaining() as u64 {
            return Err(r.corrupted(format!("{n} entries do not fit in {} bytes", bytes.len())));
        }
        let mut entries: Vec<VirtualMapping> = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let flags = if version == 0 { 0 } else { r.u8()? };
            if flags & !(SHARED_FILE_NAME | SHARED_DATASET_NAME | SAME_FILE_FLAG) != 0 {
                return Err(r.corrupted(format!("unknown mapping flags {flags:#04x}")));
            }
            if flags & SAME_FILE_FLAG != 0 && flags & SHARED_FILE_NAME != 0 {
                return Err(r.corrupted("a mapping both in the same file and sharing a file name"));
            }
            let source_file = if flags & SAME_FILE_FLAG != 0 {
                SAME_FILE.to_owned()
            } else if flags & SHARED_FILE_NAME != 0 {
                earlier(&mut r, sizes, &entries)?.source_file.clone()
            } else {
                String::from_utf8_lossy(r.cstr()?).into_owned()
            };
            let source_dataset = if flags & SHARED_DATASET_NAME != 0 {
                earlier(&mut r, sizes, &entries)?.source_dataset.clone()
            } else {
                String::from_utf8_lossy(r.cstr()?).into_owned()
            };
            let source_selection = SelectionSpec::decode(&mut r)?;
            let virtual_selection = SelectionSpec::decode(&mut r)?;
            entries.push(VirtualMapping {
                source_file,
                source_dataset,
                source_selection,
                virtual_selection,
            });
        }
        let computed = lookup3(r.consumed(), 0);
        let stored = r.u32()?;
        if !crate::checksum::matches(stored, computed) {
            return Err(r.corrupted(format!(
                "checksum {stored:#010x} stored, {computed:#010x} computed"
            )));
        }
        Ok(VirtualMappings { entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FormatError;

    /// The mapping list h5py 3.12 / libhdf5 1.14.4 wrote for `/vds` of fixtures/files/vds.h5.
    const VDS_BLOB: &str = "0003000000000000007664735f7372635f612e68350064617461000300000001000000000000000000000002\
        0000000300000001020200000000000100010001000000010001000a007664735f7372635f622e6835006461\
        7461000200000003000000010201000000000002000500010002000000030000000102020000000100010001\
        00010000000100010005002e002f6c6f63616c00030000000100000000000000000000000200000003000000\
        01020200000002000100010001000000010001000a008179c1c6";

    fn hex(s: &str) -> Vec<u8> {
        let s: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        s.chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    fn row(r: u64, cols: u64) -> SelectionSpec {
        SelectionSpec::Regular {
            start: vec![r, 0],
            stride: vec![1, 1],
            count: vec![1, 1],
            block: vec![1, cols],
        }
    }

    /// The version 1 mapping list h5py 3.16 / libhdf5 2.0.0 wrote for five mappings: a long
    /// external file name shared by entries 1 and 2 (entry 2 also shares the dataset name),
    /// entries 3 and 4 in the same file (entry 4 shares entry 0's dataset name).
    const VDS_V1_BLOB: &str = "01050000000000000000615f7261746865725f6c6f6e675f736f757263655f66696c655f6e616d655f666f725f\
        74657374696e672e683500615f6c6f6e675f646174617365745f6e616d655f7800030000000100000000000000\
        00000000020000000300000001020200000000000100010001000000010001000a000100000000000000006f74\
        6865725f6e616d6500030000000100000000000000000000000200000003000000010202000000010001000100\
        01000000010001000a000300000000000000000000000000000000030000000100000000000000000000000200\
        00000300000001020200000002000100010001000000010001000a00046c6f6300030000000100000000000000\
        00000000020000000300000001020200000003000100010001000000010001000a000600000000000000000300\
        0000010000000000000000000000020000000300000001020200000004000100010001000000010001000a00c2\
        e1d4b6";

    #[test]
    fn decodes_a_version_1_list_with_shared_names_and_same_file_entries() {
        let b = hex(VDS_V1_BLOB);
        let m = VirtualMappings::decode(&b, Sizes::EIGHT, 0).unwrap();
        let long = "a_rather_long_source_file_name_for_testing.h5";
        let names: Vec<(&str, &str)> = m
            .entries
            .iter()
            .map(|e| (e.source_file.as_str(), e.source_dataset.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                (long, "a_long_dataset_name_x"),
                (long, "other_name"),
                (long, "a_long_dataset_name_x"),
                (SAME_FILE, "loc"),
                (SAME_FILE, "a_long_dataset_name_x"),
            ]
        );
        for (i, e) in m.entries.iter().enumerate() {
            assert_eq!(e.source_selection, SelectionSpec::All);
            assert_eq!(e.virtual_selection, row(i as u64, 10));
        }
        // A shared name pointing at the entry itself (or later) is corrupt: entry 1's file
        // index 0 becomes 1, and the checksum is recomputed.
        let mut bad = b.clone();
        let at = 1 + 8 + 1 + long.len() + 1 + "a_long_dataset_name_x".len() + 1 + 16 + 30 + 1;
        bad[at] = 1;
        let n = bad.len() - 4;
        let sum = lookup3(&bad[..n], 0).to_le_bytes();
        bad[n..].copy_from_slice(&sum);
        assert!(matches!(
            VirtualMappings::decode(&bad, Sizes::EIGHT, 0),
            Err(FormatError::Corrupted { .. })
        ));
        // Unknown flags are corrupt too.
        let mut bad = b.clone();
        bad[9] = 0x08;
        let sum = lookup3(&bad[..n], 0).to_le_bytes();
        bad[n..].copy_from_slice(&sum);
        assert!(matches!(
            VirtualMappings::decode(&bad, Sizes::EIGHT, 0),
            Err(FormatError::Corrupted { .. })
        ));
    }

    #[test]
    fn decodes_the_fixture_mapping_list() {
        let b = hex(VDS_BLOB);
        assert_eq!(b.len(), 202);
        let m = VirtualMappings::decode(&b, Sizes::EIGHT, 0x828).unwrap();
        assert_eq!(m.entries.len(), 3);
        let e = &m.entries;
        assert_eq!(e[0].source_file, "vds_src_a.h5");
        assert_eq!(e[0].source_dataset, "data");
        assert_eq!(e[0].source_selection, SelectionSpec::All);
        assert_eq!(e[0].virtual_selection, row(0, 10));
        assert_eq!(e[1].source_file, "vds_src_b.h5");
        assert_eq!(
            e[1].source_selection,
            SelectionSpec::Regular {
                start: vec![0],
                stride: vec![2],
                count: vec![5],
                block: vec![1],
            }
        );
        assert_eq!(e[1].virtual_selection, row(1, 5));
        assert_eq!(e[2].source_file, SAME_FILE);
        assert_eq!(e[2].source_dataset, "/local");
        assert_eq!(e[2].source_selection, SelectionSpec::All);
        assert_eq!(e[2].virtual_selection, row(2, 10));
        assert!(!e[1].source_selection.is_unlimited());
        assert_eq!(e[1].virtual_selection.rank(), Some(2));
    }

    #[test]
    fn a_damaged_blob_fails_its_checksum_and_truncation_is_reported() {
        let mut b = hex(VDS_BLOB);
        b[20] ^= 1;
        let e = VirtualMappings::decode(&b, Sizes::EIGHT, 0x828).unwrap_err();
        assert!(
            matches!(&e, FormatError::Corrupted { reason, address: 0x828, .. } if reason.contains("checksum")),
            "{e}"
        );
        let b = hex(VDS_BLOB);
        for cut in [0, 1, 9, 40, 100, 198, 201] {
            assert!(VirtualMappings::decode(&b[..cut], Sizes::EIGHT, 0).is_err());
        }
        // A huge entry count is refused before allocating.
        let mut b = vec![0u8];
        b.extend_from_slice(&u64::MAX.to_le_bytes());
        b.extend_from_slice(&[0; 40]);
        assert!(VirtualMappings::decode(&b, Sizes::EIGHT, 0).is_err());
        let mut b = hex(VDS_BLOB);
        b[0] = 2;
        assert!(matches!(
            VirtualMappings::decode(&b, Sizes::EIGHT, 0),
            Err(FormatError::Unsupported { .. })
        ));
    }

    fn le32(v: &[u32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn sel(bytes: &[u8]) -> Result<SelectionSpec> {
        let mut r = Reader::new(bytes, "t", 0);
        let s = SelectionSpec::decode(&mut r)?;
        assert!(r.is_empty(), "{} bytes left", r.remaining());
        Ok(s)
    }

    #[test]
    fn none_all_and_point_selections() {
        assert_eq!(sel(&le32(&[0, 1, 0, 0])).unwrap(), SelectionSpec::None);
        assert_eq!(sel(&le32(&[3, 1, 0, 0])).unwrap(), SelectionSpec::All);
        assert!(sel(&le32(&[3, 2, 0, 0])).is_err());
        assert!(sel(&le32(&[7, 1, 0, 0])).is_err());
        // Points version 1: pad, length, rank 2, 2 points.
        let p = sel(&le32(&[1, 1, 0, 24, 2, 2, 1, 2, 3, 4])).unwrap();
        assert_eq!(
            p,
            SelectionSpec::Points {
                rank: 2,
                coords: vec![1, 2, 3, 4]
            }
        );
        // Points version 2 with 2-byte values: rank 1, 3 points.
        let mut b = le32(&[1, 2]);
        b.push(2);
        b.extend_from_slice(&le32(&[1]));
        b.extend_from_slice(&[3, 0, 7, 0, 8, 0, 9, 0]);
        assert_eq!(
            sel(&b).unwrap(),
            SelectionSpec::Points {
                rank: 1,
                coords: vec![7, 8, 9]
            }
        );
        // Bad value size, and a point count larger than the bytes.
        let mut bad = b.clone();
        bad[8] = 3;
        assert!(sel(&bad).is_err());
        let mut big = b;
        big[13] = 0xFF;
        assert!(sel(&big).is_err());
    }

    #[test]
    fn hyperslab_versions_regular_irregular_and_unlimited() {
        // Version 1: irregular, rank 2, two blocks.
        let v1 = sel(&le32(&[2, 1, 0, 0, 2, 2, 0, 0, 1, 1, 3, 3, 3, 4])).unwrap();
        assert_eq!(
            v1,
            SelectionSpec::Blocks {
                rank: 2,
                corners: vec![0, 0, 1, 1, 3, 3, 3, 4]
            }
        );
        assert_eq!(
            v1.boxes(),
            vec![(&[0u64, 0][..], &[1u64, 1][..]), (&[3, 3][..], &[3, 4][..])]
        );
        // A block whose end precedes its start.
        assert!(sel(&le32(&[2, 1, 0, 0, 1, 1, 5, 4])).is_err());
        // Version 2: regular, 8-byte values, unlimited count.
        let mut b = le32(&[2, 2]);
        b.push(1);
        b.extend_from_slice(&le32(&[0, 1]));
        for v in [2u64, 4, u64::MAX, 3] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let v2 = sel(&b).unwrap();
        assert_eq!(
            v2,
            SelectionSpec::Regular {
                start: vec![2],
                stride: vec![4],
                count: vec![UNLIMITED],
                block: vec![3]
            }
        );
        assert!(v2.is_unlimited());
        // Version 3: regular with 4-byte values, block all ones = unlimited.
        let mut b = le32(&[2, 3]);
        b.extend_from_slice(&[1, 4]);
        b.extend_from_slice(&le32(&[1, 5, 1, 1, u32::MAX]));
        assert_eq!(
            sel(&b).unwrap(),
            SelectionSpec::Regular {
                start: vec![5],
                stride: vec![1],
                count: vec![1],
                block: vec![UNLIMITED]
            }
        );
        // Version 3: irregular with 8-byte values, rank 1, one block.
        let mut b = le32(&[2, 3]);
        b.extend_from_slice(&[0, 8]);
        b.extend_from_slice(&le32(&[1]));
        for v in [1u64, 2, 6] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(
            sel(&b).unwrap(),
            SelectionSpec::Blocks {
                rank: 1,
                corners: vec![2, 6]
            }
        );
        // Unknown flags, unknown version, rank 0 and rank 33.
        let mut b = le32(&[2, 3]);
        b.extend_from_slice(&[2, 4]);
        b.extend_from_slice(&le32(&[1, 0, 1, 1, 1]));
        assert!(sel(&b).is_err());
        assert!(sel(&le32(&[2, 4, 0, 0, 1, 0])).is_err());
        assert!(sel(&le32(&[2, 1, 0, 0, 0, 0])).is_err());
        assert!(sel(&le32(&[2, 1, 0, 0, 33, 0])).is_err());
    }
}
