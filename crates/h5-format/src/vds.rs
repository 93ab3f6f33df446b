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
//! The selections inside are serialized as [`crate::selection`] describes.

use crate::checksum::lookup3;
use crate::error::Result;
use crate::reader::{Reader, Sizes};
pub use crate::selection::{MAX_RANK, Selection as SelectionSpec, UNLIMITED};

const STRUCTURE: &str = "virtual dataset mapping list";

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
}
