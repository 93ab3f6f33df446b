//! The superblock (versions 0–3) and the driver information block.
//!
//! The superblock starts with the 8-byte [`SIGNATURE`] at file offset 0 or at 512, 1024, 2048,
//! … (a user block precedes it otherwise); [`signature_offsets`] lists the candidates and
//! [`is_signature`] tests a prefix read at one. [`needed_len`] gives a superblock's full size
//! from its first [`MIN_PREFIX`] bytes (at most [`MAX_LEN`]), and [`Superblock::decode`] decodes
//! it, verifying the lookup3 checksum of versions 2 and 3.
//!
//! Layouts (spec §II.A; `O` = size of offsets):
//!
//! * v0/v1: signature(8) version(1) free-space version(1) root symbol-table-entry version(1)
//!   reserved(1) shared-header version(1) sizeof offsets(1) sizeof lengths(1) reserved(1)
//!   group leaf K(2) group internal K(2) consistency flags(4) [v1: indexed storage K(2)
//!   reserved(2)] base(O) free-space info(O) EOF(O) driver info(O) root symbol table entry
//!   (link name offset(L) object header(O) cache type(4) reserved(4) scratch-pad(16); `L` =
//!   size of lengths, as libhdf5 encodes it).
//! * v2/v3: signature(8) version(1) sizeof offsets(1) sizeof lengths(1) consistency flags(1)
//!   base(O) superblock extension(O) EOF(O) root object header(O) checksum(4).
//!
//! [`Superblock::encode`] is the inverse of [`Superblock::decode`] (all four versions; the
//! reserved bytes are zero and the scratch-pad is zero-padded to 16 bytes, as libhdf5 writes
//! them), and [`encoded_len`] gives a superblock's size before it is encoded.

use crate::checksum::lookup3;
use crate::error::{FormatError, Result};
use crate::reader::{Reader, Sizes, UNDEFINED_ADDRESS};
use crate::writer::Writer;

/// The format signature, `\x89HDF\r\n\x1a\n`.
pub const SIGNATURE: [u8; 8] = [0x89, b'H', b'D', b'F', b'\r', b'\n', 0x1a, b'\n'];

/// Bytes from the superblock start that always suffice for [`needed_len`] (version, sizes).
pub const MIN_PREFIX: usize = 16;

/// The largest superblock this crate decodes (version 1 with 8-byte offsets): reading this many
/// bytes (or up to the end of a shorter file) at the signature always suffices.
pub const MAX_LEN: usize = 100;

const NAME: &str = "superblock";

/// Candidate offsets of the superblock in a file of `file_len` bytes: 0, then 512 doubling,
/// while the 8-byte signature would still fit.
pub fn signature_offsets(file_len: u64) -> impl Iterator<Item = u64> {
    std::iter::successors(Some(0u64), |&at| {
        let next = if at == 0 { 512 } else { at.checked_mul(2)? };
        Some(next)
    })
    .take_while(move |&at| at.checked_add(8).is_some_and(|end| end <= file_len))
}

/// Whether `prefix` (bytes read at a candidate offset) starts with the signature.
pub fn is_signature(prefix: &[u8]) -> bool {
    prefix.starts_with(&SIGNATURE)
}

/// The first candidate offset whose bytes start with the signature; `read_at(offset)` returns
/// at least 8 bytes at `offset` (fewer means "end of file").
pub fn locate<E>(
    file_len: u64,
    mut read_at: impl FnMut(u64) -> std::result::Result<Vec<u8>, E>,
) -> std::result::Result<Option<u64>, E> {
    for at in signature_offsets(file_len) {
        if is_signature(&read_at(at)?) {
            return Ok(Some(at));
        }
    }
    Ok(None)
}

/// The full size in bytes of the superblock whose first bytes are `prefix` (at least
/// [`MIN_PREFIX`] bytes, or the whole superblock if shorter), at file `address`.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "sizes are checked to be at most 8 bytes: the sums are below 100"
)]
pub fn needed_len(prefix: &[u8], address: u64) -> Result<usize> {
    let mut r = Reader::new(prefix, NAME, address);
    signature8(&mut r)?;
    let version = r.u8()?;
    if version <= 1 {
        r.skip(4)?;
    } else if version > 3 {
        return Err(r.unsupported(format!("superblock version {version}")));
    }
    let s = Sizes::new(r.u8()?, r.u8()?, NAME, address)?;
    let o = usize::from(s.offset);
    // Fixed parts: see the module doc.
    Ok(match version {
        0 => 24 + 4 * o + SymbolTableEntry::encoded_len(s),
        1 => 28 + 4 * o + SymbolTableEntry::encoded_len(s),
        _ => 12 + 4 * o + 4,
    })
}

/// The encoded size in bytes of a superblock of `version` (0..=3) with `sizes`.
#[allow(clippy::arithmetic_side_effects, reason = "1-byte sizes and constants")]
pub fn encoded_len(version: u8, sizes: Sizes) -> Result<usize> {
    let o = usize::from(sizes.offset);
    match version {
        0 => Ok(24 + 4 * o + SymbolTableEntry::encoded_len(sizes)),
        1 => Ok(28 + 4 * o + SymbolTableEntry::encoded_len(sizes)),
        2 | 3 => Ok(12 + 4 * o + 4),
        v => Err(unencodable(format!("superblock version {v}"))),
    }
}

/// The error for a value the superblock cannot represent.
fn unencodable(what: String) -> FormatError {
    FormatError::Unsupported {
        structure: NAME,
        address: UNDEFINED_ADDRESS,
        what,
    }
}

/// Reads and checks the 8-byte format signature.
fn signature8(r: &mut Reader<'_>) -> Result<()> {
    let got = r.bytes(8)?;
    if got != SIGNATURE {
        return Err(r.corrupted("format signature not found"));
    }
    Ok(())
}

/// The scratch-pad of a symbol table entry (its cache type).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ScratchPad {
    /// Cache type 0: nothing cached.
    None,
    /// Cache type 1: the group's symbol table (v1 B-tree and local heap addresses).
    SymbolTable {
        /// Address of the group's v1 B-tree.
        btree_address: u64,
        /// Address of the group's local heap.
        heap_address: u64,
    },
    /// Cache type 2: the link value of a soft link, as an offset into the parent's local heap.
    SoftLink {
        /// Offset of the link value in the local heap.
        link_value_offset: u32,
    },
}

/// A symbol table entry (as in the superblock v0/v1 and in symbol table nodes).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SymbolTableEntry {
    /// Offset of the link name in the group's local heap (0 for the root entry).
    pub link_name_offset: u64,
    /// Address of the object's header.
    pub object_header_address: u64,
    /// The cached scratch-pad.
    pub scratch: ScratchPad,
}

impl SymbolTableEntry {
    /// Encoded size: a length (the name offset), an offset, cache type, reserved word and the
    /// 16-byte scratch-pad.
    #[allow(clippy::arithmetic_side_effects, reason = "1-byte sizes and constants")]
    pub fn encoded_len(sizes: Sizes) -> usize {
        usize::from(sizes.length) + usize::from(sizes.offset) + 24
    }

    /// Decodes one entry from `r`, consuming exactly [`Self::encoded_len`] bytes.
    pub fn decode(r: &mut Reader<'_>, sizes: Sizes) -> Result<SymbolTableEntry> {
        // libhdf5 encodes the name offset with the size of lengths (the spec's table says
        // offsets; the two agree in every file with equal sizes, and the library is the truth
        // for files where they differ).
        let link_name_offset = r.length(sizes)?;
        let object_header_address = r.offset(sizes)?;
        let cache_type = r.u32()?;
        r.skip(4)?;
        let mut pad = r.sub(16)?;
        let scratch = match cache_type {
            0 => ScratchPad::None,
            1 => ScratchPad::SymbolTable {
                btree_address: pad.offset(sizes)?,
                heap_address: pad.offset(sizes)?,
            },
            2 => ScratchPad::SoftLink {
                link_value_offset: pad.u32()?,
            },
            t => return Err(r.corrupted(format!("symbol table entry cache type {t}"))),
        };
        Ok(SymbolTableEntry {
            link_name_offset,
            object_header_address,
            scratch,
        })
    }

    /// Appends the entry ([`Self::encoded_len`] bytes; the reserved word and the unused part of
    /// the scratch-pad are zero) to `w`.
    pub fn write(&self, w: &mut Writer, sizes: Sizes) {
        w.length(sizes, self.link_name_offset);
        w.offset(sizes, self.object_header_address);
        let pad_start = match self.scratch {
            ScratchPad::None => {
                w.u32(0);
                w.u32(0);
                w.len()
            }
            ScratchPad::SymbolTable {
                btree_address,
                heap_address,
            } => {
                w.u32(1);
                w.u32(0);
                let at = w.len();
                w.offset(sizes, btree_address);
                w.offset(sizes, heap_address);
                at
            }
            ScratchPad::SoftLink { link_value_offset } => {
                w.u32(2);
                w.u32(0);
                let at = w.len();
                w.u32(link_value_offset);
                at
            }
        };
        // Offsets are at most 8 bytes, so the cached values never exceed the 16 bytes.
        w.zeros(pad_start.saturating_add(16).saturating_sub(w.len()));
    }

    /// The encoded entry ([`Self::encoded_len`] bytes).
    pub fn encode(&self, sizes: Sizes) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::encoded_len(sizes));
        self.write(&mut w, sizes);
        w.into_bytes()
    }
}

/// Where the root group is described.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Root {
    /// Versions 0 and 1: the root group's symbol table entry.
    SymbolTableEntry(SymbolTableEntry),
    /// Versions 2 and 3: the root group's object header address.
    ObjectHeader(u64),
}

/// A decoded superblock (any version). Addresses are as stored: relative to `base_address`
/// (the engine adds it); [`UNDEFINED_ADDRESS`] where undefined.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Superblock {
    /// Superblock version (0..=3).
    pub version: u8,
    /// Sizes of offsets and lengths in the file.
    pub sizes: Sizes,
    /// v0/v1: version of the file free-space storage (0); `None` for v2/v3.
    pub free_space_version: Option<u8>,
    /// v0/v1: version of the root group symbol table entry (0); `None` for v2/v3.
    pub root_entry_version: Option<u8>,
    /// v0/v1: version of the shared header message format (0); `None` for v2/v3.
    pub shared_header_version: Option<u8>,
    /// v0/v1: group leaf node K (> 0); `None` for v2/v3 (see the B-tree K values message).
    pub group_leaf_k: Option<u16>,
    /// v0/v1: group internal node K (> 0); `None` for v2/v3.
    pub group_internal_k: Option<u16>,
    /// v1 only: indexed storage internal node K (> 0).
    pub indexed_storage_k: Option<u16>,
    /// File consistency flags (v0/v1: 4 bytes; v2/v3: 1 byte). v3: bit 0 opened for write,
    /// bit 2 opened for SWMR write.
    pub consistency_flags: u32,
    /// Base address of the file's addresses (normally the superblock's own offset).
    pub base_address: u64,
    /// v0/v1: address of the global free-space index (always undefined in practice).
    pub free_space_address: u64,
    /// v2/v3: address of the superblock extension object header.
    pub extension_address: u64,
    /// End-of-file address as stored. Observed with HDF5 1.14 and a 512-byte user block: it
    /// equals the whole file's size (see `tests/real_files.rs`).
    pub eof_address: u64,
    /// v0/v1: address of the driver information block.
    pub driver_info_address: u64,
    /// The root group.
    pub root: Root,
    /// Encoded size of this superblock in bytes.
    pub encoded_len: usize,
}

impl Superblock {
    /// Decodes the superblock in `bytes` (starting at its signature, which is at file
    /// `address`); `bytes` may extend past its end.
    pub fn decode(bytes: &[u8], address: u64) -> Result<Superblock> {
        let len = needed_len(bytes, address)?;
        let Some(bytes) = bytes.get(..len) else {
            return Err(FormatError::Truncated {
                structure: NAME,
                address,
                needed: len as u64,
                available: bytes.len() as u64,
            });
        };
        let mut r = Reader::new(bytes, NAME, address);
        signature8(&mut r)?;
        let version = r.u8()?;
        if version >= 2 {
            return decode_v2(r, version, len);
        }
        let free_space_version = r.u8()?;
        let root_entry_version = r.u8()?;
        r.skip(1)?;
        let shared_header_version = r.u8()?;
        let sizes = Sizes::new(r.u8()?, r.u8()?, NAME, address)?;
        r.skip(1)?;
        for (what, v) in [
            ("free-space storage", free_space_version),
            ("root symbol table entry", root_entry_version),
            ("shared header message format", shared_header_version),
        ] {
            if v != 0 {
                return Err(r.unsupported(format!("{what} version {v}")));
            }
        }
        let group_leaf_k = r.u16()?;
        let group_internal_k = r.u16()?;
        if group_leaf_k == 0 || group_internal_k == 0 {
            return Err(r.corrupted("group B-tree K of 0"));
        }
        let consistency_flags = r.u32()?;
        let indexed_storage_k = if version == 1 {
            let k = r.u16()?;
            r.skip(2)?;
            if k == 0 {
                return Err(r.corrupted("indexed storage K of 0"));
            }
            Some(k)
        } else {
            None
        };
        let base_address = r.offset(sizes)?;
        let free_space_address = r.offset(sizes)?;
        let eof_address = r.offset(sizes)?;
        let driver_info_address = r.offset(sizes)?;
        let root = SymbolTableEntry::decode(&mut r, sizes)?;
        Ok(Superblock {
            version,
            sizes,
            free_space_version: Some(free_space_version),
            root_entry_version: Some(root_entry_version),
            shared_header_version: Some(shared_header_version),
            group_leaf_k: Some(group_leaf_k),
            group_internal_k: Some(group_internal_k),
            indexed_storage_k,
            consistency_flags,
            base_address,
            free_space_address,
            extension_address: UNDEFINED_ADDRESS,
            eof_address,
            driver_info_address,
            root: Root::SymbolTableEntry(root),
            encoded_len: len,
        })
    }

    /// Encodes the superblock (the inverse of [`Self::decode`]); `encoded_len` is ignored.
    ///
    /// Versions 0 and 1 need a [`Root::SymbolTableEntry`], versions 2 and 3 a
    /// [`Root::ObjectHeader`]. Absent v0/v1 fields take libhdf5's defaults: format versions 0,
    /// group K 4 (leaf) and 16 (internal), indexed storage K 32 (v1). v2/v3 store the consistency
    /// flags in one byte and end with the lookup3 checksum of the bytes before it. Errors
    /// (`Unsupported`) on another version, a mismatched root, flags above 255 for v2/v3, or a
    /// K value of 0.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let sizes = self.sizes;
        let mut w = Writer::with_capacity(encoded_len(self.version, sizes)?);
        w.bytes(&SIGNATURE);
        w.u8(self.version);
        match (self.version, self.root) {
            (0 | 1, Root::SymbolTableEntry(entry)) => {
                w.u8(self.free_space_version.unwrap_or(0));
                w.u8(self.root_entry_version.unwrap_or(0));
                w.u8(0);
                w.u8(self.shared_header_version.unwrap_or(0));
                w.u8(sizes.offset);
                w.u8(sizes.length);
                w.u8(0);
                let leaf = self.group_leaf_k.unwrap_or(4);
                let internal = self.group_internal_k.unwrap_or(16);
                if leaf == 0 || internal == 0 {
                    return Err(unencodable("group B-tree K of 0".into()));
                }
                w.u16(leaf);
                w.u16(internal);
                w.u32(self.consistency_flags);
                if self.version == 1 {
                    let k = self.indexed_storage_k.unwrap_or(32);
                    if k == 0 {
                        return Err(unencodable("indexed storage K of 0".into()));
                    }
                    w.u16(k);
                    w.u16(0);
                }
                w.offset(sizes, self.base_address);
                w.offset(sizes, self.free_space_address);
                w.offset(sizes, self.eof_address);
                w.offset(sizes, self.driver_info_address);
                entry.write(&mut w, sizes);
            }
            (2 | 3, Root::ObjectHeader(root)) => {
                let flags = u8::try_from(self.consistency_flags).map_err(|_| {
                    unencodable(format!(
                        "consistency flags {:#x} in a one-byte field",
                        self.consistency_flags
                    ))
                })?;
                w.u8(sizes.offset);
                w.u8(sizes.length);
                w.u8(flags);
                w.offset(sizes, self.base_address);
                w.offset(sizes, self.extension_address);
                w.offset(sizes, self.eof_address);
                w.offset(sizes, root);
                w.checksum_from(0);
            }
            (0..=3, _) => {
                return Err(unencodable(format!(
                    "superblock version {} with this kind of root",
                    self.version
                )));
            }
            (v, _) => return Err(unencodable(format!("superblock version {v}"))),
        }
        Ok(w.into_bytes())
    }

    /// The root group's object header address (whatever the version).
    pub fn root_object_header_address(&self) -> u64 {
        match self.root {
            Root::SymbolTableEntry(e) => e.object_header_address,
            Root::ObjectHeader(a) => a,
        }
    }
}

/// Versions 2 and 3, after the version byte; `r` spans exactly the superblock (`len` bytes).
fn decode_v2(mut r: Reader<'_>, version: u8, len: usize) -> Result<Superblock> {
    let sizes = Sizes::new(r.u8()?, r.u8()?, NAME, r.address())?;
    let consistency_flags = u32::from(r.u8()?);
    let base_address = r.offset(sizes)?;
    let extension_address = r.offset(sizes)?;
    let eof_address = r.offset(sizes)?;
    let root = r.offset(sizes)?;
    let body = r.consumed();
    let stored = r.u32()?;
    let computed = lookup3(body, 0);
    if !crate::checksum::matches(stored, computed) {
        return Err(r.corrupted(format!(
            "checksum {stored:#010x} stored, {computed:#010x} computed"
        )));
    }
    Ok(Superblock {
        version,
        sizes,
        free_space_version: None,
        root_entry_version: None,
        shared_header_version: None,
        group_leaf_k: None,
        group_internal_k: None,
        indexed_storage_k: None,
        consistency_flags,
        base_address,
        free_space_address: UNDEFINED_ADDRESS,
        extension_address,
        eof_address,
        driver_info_address: UNDEFINED_ADDRESS,
        root: Root::ObjectHeader(root),
        encoded_len: len,
    })
}

/// The driver information block (superblock v0/v1 only).
///
/// Layout: version(1) = 0, reserved(3), driver information size(4), driver identification(8,
/// ASCII, e.g. `NCSAmult`, `NCSAfami`), driver information (size bytes).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct DriverInfoBlock {
    /// The 8-byte driver identification.
    pub driver_id: [u8; 8],
    /// The driver-specific information, undecoded (see [`Self::family_member_size`]).
    pub info: Vec<u8>,
}

impl DriverInfoBlock {
    /// Bytes of the block's header (before the driver information).
    pub const HEADER_LEN: usize = 16;

    /// The block's full size from its first [`Self::HEADER_LEN`] bytes.
    pub fn needed_len(prefix: &[u8], address: u64) -> Result<usize> {
        let mut r = Reader::new(prefix, "driver info block", address);
        let version = r.u8()?;
        if version != 0 {
            return Err(r.unsupported(format!("driver info block version {version}")));
        }
        r.skip(3)?;
        let size = usize::try_from(r.u32()?)
            .map_err(|_| r.corrupted("driver information size overflows"))?;
        size.checked_add(Self::HEADER_LEN)
            .ok_or_else(|| r.corrupted("driver information size overflows"))
    }

    /// Decodes the block in `bytes` (which may extend past its end) at file `address`.
    pub fn decode(bytes: &[u8], address: u64) -> Result<DriverInfoBlock> {
        let len = Self::needed_len(bytes, address)?;
        let mut r = Reader::new(bytes, "driver info block", address);
        r.skip(8)?;
        let mut driver_id = [0u8; 8];
        driver_id.copy_from_slice(r.bytes(8)?);
        let info = r.bytes(len.saturating_sub(Self::HEADER_LEN))?.to_vec();
        Ok(DriverInfoBlock { driver_id, info })
    }

    /// For the family driver (`NCSAfami`): the size of each member file (the 8-byte
    /// information); `None` for other drivers or a malformed block.
    pub fn family_member_size(&self) -> Option<u64> {
        if &self.driver_id != b"NCSAfami" {
            return None;
        }
        let b: [u8; 8] = self.info.get(..8)?.try_into().ok()?;
        Some(u64::from_le_bytes(b))
    }

    /// Whether this is the multi driver's block (`NCSAmult`, information kept raw).
    pub fn is_multi(&self) -> bool {
        &self.driver_id == b"NCSAmult"
    }

    /// For the multi driver (`NCSAmult`, which the split driver also writes): its members,
    /// decoded from the information at file `address` (the block's). `None` for other drivers.
    ///
    /// Layout: a map of 8 bytes (for each of the memory types 1 superblock, 2 B-tree, 3 raw
    /// data, 4 global heap, 5 local heap, 6 object header, the type whose member serves it, 0
    /// meaning itself; 2 reserved), then for each member (each type that serves itself, by
    /// type) its start address and end of address (8 bytes each, little-endian), then for each
    /// its name template (null-terminated, padded to a multiple of 8).
    pub fn multi_members(&self, address: u64) -> Option<Result<Vec<MultiMember>>> {
        self.is_multi()
            .then(|| decode_multi(&self.info, address.saturating_add(Self::HEADER_LEN as u64)))
    }
}

/// One member file of a multi-driver layout ([`DriverInfoBlock::multi_members`]).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct MultiMember {
    /// The member's number (the memory type libhdf5 names it by, 1–6).
    pub id: u8,
    /// The memory types whose addresses it holds (1 superblock, 2 B-tree, 3 raw data, 4
    /// global heap, 5 local heap, 6 object header).
    pub types: Vec<u8>,
    /// The first address the member serves (it serves up to the next member's start).
    pub start: u64,
    /// The member's end of address (relative to its start) when the file was written.
    pub end_of_address: u64,
    /// The member's file name as a template: `%s` stands for the file's base name (for
    /// example `%s-s.h5`).
    pub name_template: String,
}

fn decode_multi(info: &[u8], address: u64) -> Result<Vec<MultiMember>> {
    const TYPES: u8 = 6;
    let mut r = Reader::new(info, "multi driver information", address);
    let map = r.bytes(usize::from(TYPES))?.to_vec();
    r.skip(2)?;
    // Members in the order of their first use walking the types 1..=6 (the encoding's order).
    let mut members: Vec<MultiMember> = Vec::new();
    for (ty, &mapped) in (1..=TYPES).zip(&map) {
        let id = match mapped {
            0 => ty,
            o if o <= TYPES => o,
            o => return Err(r.corrupted(format!("memory type {ty} mapped to {o}"))),
        };
        match members.iter_mut().find(|m| m.id == id) {
            Some(m) => m.types.push(ty),
            None => members.push(MultiMember {
                id,
                types: vec![ty],
                start: 0,
                end_of_address: 0,
                name_template: String::new(),
            }),
        }
    }
    for m in &mut members {
        m.start = r.u64()?;
        m.end_of_address = r.u64()?;
    }
    for m in &mut members {
        let name = r.cstr()?;
        m.name_template = String::from_utf8(name.to_vec())
            .map_err(|_| r.corrupted("member name template is not UTF-8"))?;
        // Padded to 8 bytes (`name` and its null: `len + 1`); a last name whose padding is cut
        // short is still whole.
        let used = name.len().saturating_add(1);
        r.skip(
            used.next_multiple_of(8)
                .saturating_sub(used)
                .min(r.remaining()),
        )?;
    }
    Ok(members)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The split driver's information as libhdf5 writes it: every type but raw data (3) in the
    /// superblock member (1), raw data from `HADDR_MAX / 2`; names padded to 8 bytes.
    #[test]
    fn multi_driver_information_decodes_members_in_encoding_order() {
        let mut info = vec![1, 1, 3, 1, 1, 1, 0, 0];
        for v in [0u64, 0x30, (u64::MAX - 1) / 2, 0x100] {
            info.extend_from_slice(&v.to_le_bytes());
        }
        info.extend_from_slice(b"%s-m.h5\0%s-raw.h5\0\0\0\0\0\0\0");
        let block = DriverInfoBlock {
            driver_id: *b"NCSAmult",
            info: info.clone(),
        };
        let members = block.multi_members(0x60).unwrap().unwrap();
        assert_eq!(members.len(), 2);
        assert_eq!(
            (members[0].id, members[0].types.as_slice()),
            (1, &[1, 2, 4, 5, 6][..])
        );
        assert_eq!((members[0].start, members[0].end_of_address), (0, 0x30));
        assert_eq!(members[0].name_template, "%s-m.h5");
        assert_eq!((members[1].id, members[1].types.as_slice()), (3, &[3][..]));
        assert_eq!(members[1].start, (u64::MAX - 1) / 2);
        assert_eq!(members[1].name_template, "%s-raw.h5");
        // Cut anywhere before the last name ends: a typed error, never a panic.
        for n in 0..info.len() - 7 {
            let cut = DriverInfoBlock {
                driver_id: *b"NCSAmult",
                info: info[..n].to_vec(),
            };
            assert!(cut.multi_members(0x60).unwrap().is_err(), "cut at {n}");
        }
        // A type mapped past the six types is corrupt; another driver has no members.
        let mut bad = info.clone();
        bad[2] = 9;
        let block = DriverInfoBlock {
            driver_id: *b"NCSAmult",
            info: bad,
        };
        assert!(block.multi_members(0).unwrap().is_err());
        let family = DriverInfoBlock {
            driver_id: *b"NCSAfami",
            info,
        };
        assert!(family.multi_members(0).is_none());
    }

    /// A v0 superblock with 8-byte sizes (96 bytes), every byte documented.
    fn v0_image() -> Vec<u8> {
        let mut b = SIGNATURE.to_vec();
        b.extend_from_slice(&[0, 0, 0, 0, 0, 8, 8, 0]); // versions 0,0,(res),0; sizes 8/8; res
        b.extend_from_slice(&4u16.to_le_bytes()); // group leaf K
        b.extend_from_slice(&16u16.to_le_bytes()); // group internal K
        b.extend_from_slice(&0u32.to_le_bytes()); // consistency flags
        b.extend_from_slice(&0u64.to_le_bytes()); // base address
        b.extend_from_slice(&u64::MAX.to_le_bytes()); // free-space info: undefined
        b.extend_from_slice(&0x1234u64.to_le_bytes()); // EOF
        b.extend_from_slice(&u64::MAX.to_le_bytes()); // driver info: undefined
        b.extend_from_slice(&0u64.to_le_bytes()); // root: link name offset
        b.extend_from_slice(&0x60u64.to_le_bytes()); // root: object header
        b.extend_from_slice(&1u32.to_le_bytes()); // root: cache type 1
        b.extend_from_slice(&0u32.to_le_bytes()); // root: reserved
        b.extend_from_slice(&0x88u64.to_le_bytes()); // scratch: B-tree
        b.extend_from_slice(&0x2a8u64.to_le_bytes()); // scratch: local heap
        b
    }

    /// A v1 superblock: v0 plus indexed storage K (32) and 2 reserved bytes after the flags.
    fn v1_image() -> Vec<u8> {
        let mut b = v0_image();
        b[8] = 1;
        b.splice(24..24, [32, 0, 0, 0]);
        b
    }

    /// A v2/v3 superblock with 8-byte sizes (48 bytes).
    fn v2_image(version: u8) -> Vec<u8> {
        let mut b = SIGNATURE.to_vec();
        b.extend_from_slice(&[version, 8, 8, 0]); // version, sizes, flags
        b.extend_from_slice(&0u64.to_le_bytes()); // base
        b.extend_from_slice(&u64::MAX.to_le_bytes()); // extension: undefined
        b.extend_from_slice(&0x851u64.to_le_bytes()); // EOF
        b.extend_from_slice(&0x30u64.to_le_bytes()); // root object header
        let c = lookup3(&b, 0);
        b.extend_from_slice(&c.to_le_bytes());
        b
    }

    #[test]
    fn decodes_v0() {
        let b = v0_image();
        assert_eq!(needed_len(&b[..MIN_PREFIX], 0).unwrap(), 96);
        let sb = Superblock::decode(&b, 0).unwrap();
        assert_eq!(sb.version, 0);
        assert_eq!(sb.sizes, Sizes::EIGHT);
        assert_eq!(sb.group_leaf_k, Some(4));
        assert_eq!(sb.group_internal_k, Some(16));
        assert_eq!(sb.indexed_storage_k, None);
        assert_eq!(sb.eof_address, 0x1234);
        assert_eq!(sb.free_space_address, UNDEFINED_ADDRESS);
        assert_eq!(sb.driver_info_address, UNDEFINED_ADDRESS);
        assert_eq!(sb.root_object_header_address(), 0x60);
        assert_eq!(
            sb.root,
            Root::SymbolTableEntry(SymbolTableEntry {
                link_name_offset: 0,
                object_header_address: 0x60,
                scratch: ScratchPad::SymbolTable {
                    btree_address: 0x88,
                    heap_address: 0x2a8
                }
            })
        );
    }

    #[test]
    fn decodes_v1() {
        let b = v1_image();
        assert_eq!(needed_len(&b, 0).unwrap(), 100);
        let sb = Superblock::decode(&b, 0).unwrap();
        assert_eq!(sb.indexed_storage_k, Some(32));
        assert_eq!(sb.root_object_header_address(), 0x60);
    }

    #[test]
    fn decodes_v2_v3_and_checks_the_checksum() {
        for v in [2, 3] {
            let mut b = v2_image(v);
            assert_eq!(needed_len(&b, 0).unwrap(), 48);
            let sb = Superblock::decode(&b, 0).unwrap();
            assert_eq!(sb.version, v);
            assert_eq!(sb.root, Root::ObjectHeader(0x30));
            assert_eq!(sb.extension_address, UNDEFINED_ADDRESS);
            assert_eq!(sb.eof_address, 0x851);
            b[20] ^= 1;
            assert!(matches!(
                Superblock::decode(&b, 0),
                Err(FormatError::Corrupted { .. })
            ));
        }
    }

    /// v0 with 4-byte offsets and 8-byte lengths: the root entry's name offset is
    /// length-sized, so the superblock is 24 + 4·4 + (8 + 4 + 24) = 76 bytes.
    #[test]
    fn mixed_sizes_v0() {
        let mut b = SIGNATURE.to_vec();
        b.extend_from_slice(&[0, 0, 0, 0, 0, 4, 8, 0]);
        b.extend_from_slice(&[4, 0, 16, 0, 0, 0, 0, 0]); // K values, flags
        for a in [0u32, u32::MAX, 0x500, u32::MAX] {
            b.extend_from_slice(&a.to_le_bytes()); // base, free space, EOF, driver info
        }
        b.extend_from_slice(&0u64.to_le_bytes()); // name offset (8 bytes: a length)
        b.extend_from_slice(&0x44u32.to_le_bytes()); // object header (4 bytes)
        b.extend_from_slice(&1u32.to_le_bytes()); // cache type 1
        b.extend_from_slice(&[0; 4]); // reserved
        b.extend_from_slice(&0x70u32.to_le_bytes()); // scratch: B-tree
        b.extend_from_slice(&0x90u32.to_le_bytes()); // scratch: heap
        b.extend_from_slice(&[0; 8]); // rest of the 16-byte scratch-pad
        assert_eq!(b.len(), 76);
        assert_eq!(needed_len(&b, 0).unwrap(), 76);
        let sb = Superblock::decode(&b, 0).unwrap();
        assert_eq!(sb.eof_address, 0x500);
        assert_eq!(sb.free_space_address, UNDEFINED_ADDRESS);
        assert_eq!(sb.root_object_header_address(), 0x44);
        let Root::SymbolTableEntry(e) = sb.root else {
            panic!("entry")
        };
        assert_eq!(
            e.scratch,
            ScratchPad::SymbolTable {
                btree_address: 0x70,
                heap_address: 0x90
            }
        );
    }

    #[test]
    fn small_sizes() {
        // v2 with 4-byte offsets: 12 + 16 + 4 = 32 bytes.
        let mut b = SIGNATURE.to_vec();
        b.extend_from_slice(&[2, 4, 4, 0]);
        for a in [0u32, u32::MAX, 0x400, 0x30] {
            b.extend_from_slice(&a.to_le_bytes());
        }
        let c = lookup3(&b, 0);
        b.extend_from_slice(&c.to_le_bytes());
        let sb = Superblock::decode(&b, 0).unwrap();
        assert_eq!(sb.encoded_len, 32);
        assert_eq!(sb.extension_address, UNDEFINED_ADDRESS);
        assert_eq!(sb.root_object_header_address(), 0x30);
    }

    #[test]
    fn truncation_and_corruption_never_panic() {
        for img in [v0_image(), v1_image(), v2_image(2), v2_image(3)] {
            for n in 0..img.len() {
                assert!(Superblock::decode(&img[..n], 0).is_err(), "len {n}");
            }
            for i in 0..img.len() {
                for x in [0x01u8, 0x80, 0xff] {
                    let mut c = img.clone();
                    c[i] ^= x;
                    let _ = Superblock::decode(&c, 0);
                    let _ = needed_len(&c, 0);
                }
            }
        }
        let mut bad = v0_image();
        bad[8] = 4;
        assert!(matches!(
            Superblock::decode(&bad, 0),
            Err(FormatError::Unsupported { .. })
        ));
        let mut bad = v0_image();
        bad[0] = 0;
        assert!(matches!(
            Superblock::decode(&bad, 0),
            Err(FormatError::Corrupted { .. })
        ));
    }

    #[test]
    fn candidate_offsets() {
        let v: Vec<u64> = signature_offsets(5000).collect();
        assert_eq!(v, [0, 512, 1024, 2048, 4096]);
        assert_eq!(signature_offsets(4).count(), 0);
        assert_eq!(signature_offsets(u64::MAX).count(), 56);
        let mut file = vec![0u8; 1100];
        file[1024..1032].copy_from_slice(&SIGNATURE);
        let found = locate(file.len() as u64, |at| {
            Ok::<_, ()>(file[at as usize..].iter().take(8).copied().collect())
        });
        assert_eq!(found, Ok(Some(1024)));
    }

    #[test]
    fn driver_info_block() {
        let mut b = vec![0, 0, 0, 0];
        b.extend_from_slice(&8u32.to_le_bytes());
        b.extend_from_slice(b"NCSAfami");
        b.extend_from_slice(&(1u64 << 30).to_le_bytes());
        assert_eq!(DriverInfoBlock::needed_len(&b, 0).unwrap(), 24);
        let d = DriverInfoBlock::decode(&b, 0).unwrap();
        assert_eq!(d.family_member_size(), Some(1 << 30));
        assert!(!d.is_multi());
        for n in 0..b.len() {
            assert!(DriverInfoBlock::decode(&b[..n], 0).is_err());
        }
        b[4] = 0xff;
        assert!(DriverInfoBlock::decode(&b, 0).is_err());
    }

    #[test]
    fn encodes_the_vectors_byte_exact() {
        let mut mixed = SIGNATURE.to_vec();
        mixed.extend_from_slice(&[0, 0, 0, 0, 0, 4, 8, 0, 4, 0, 16, 0, 0, 0, 0, 0]);
        for a in [0u32, u32::MAX, 0x500, u32::MAX] {
            mixed.extend_from_slice(&a.to_le_bytes());
        }
        mixed.extend_from_slice(&0u64.to_le_bytes());
        mixed.extend_from_slice(&0x44u32.to_le_bytes());
        mixed.extend_from_slice(&1u32.to_le_bytes());
        mixed.extend_from_slice(&[0; 4]);
        mixed.extend_from_slice(&0x70u32.to_le_bytes());
        mixed.extend_from_slice(&0x90u32.to_le_bytes());
        mixed.extend_from_slice(&[0; 8]);
        for img in [v0_image(), v1_image(), v2_image(2), v2_image(3), mixed] {
            let sb = Superblock::decode(&img, 0).unwrap();
            assert_eq!(encoded_len(sb.version, sb.sizes).unwrap(), img.len());
            assert_eq!(sb.encode().unwrap(), img);
        }
    }

    #[test]
    fn symbol_table_entries_round_trip() {
        for sizes in [Sizes::EIGHT, Sizes::new(4, 8, "t", 0).unwrap()] {
            for scratch in [
                ScratchPad::None,
                ScratchPad::SymbolTable {
                    btree_address: 0x88,
                    heap_address: UNDEFINED_ADDRESS,
                },
                ScratchPad::SoftLink {
                    link_value_offset: 24,
                },
            ] {
                let e = SymbolTableEntry {
                    link_name_offset: 8,
                    object_header_address: 0x320,
                    scratch,
                };
                let b = e.encode(sizes);
                assert_eq!(b.len(), SymbolTableEntry::encoded_len(sizes));
                let mut r = Reader::new(&b, "t", 0);
                assert_eq!(SymbolTableEntry::decode(&mut r, sizes).unwrap(), e);
                assert!(r.is_empty());
            }
        }
    }

    #[test]
    fn unrepresentable_superblocks_are_errors() {
        let v0 = Superblock::decode(&v0_image(), 0).unwrap();
        let v2 = Superblock::decode(&v2_image(2), 0).unwrap();
        let bad = [
            Superblock { version: 4, ..v2 },
            Superblock { version: 2, ..v0 },
            Superblock { version: 0, ..v2 },
            Superblock {
                consistency_flags: 0x100,
                ..v2
            },
            Superblock {
                group_leaf_k: Some(0),
                ..v0
            },
            Superblock {
                version: 1,
                indexed_storage_k: Some(0),
                ..v0
            },
        ];
        for sb in bad {
            assert!(matches!(sb.encode(), Err(FormatError::Unsupported { .. })));
        }
        // Absent v0/v1 values take libhdf5's defaults.
        let sb = Superblock {
            version: 1,
            group_leaf_k: None,
            indexed_storage_k: None,
            ..v0
        };
        let d = Superblock::decode(&sb.encode().unwrap(), 0).unwrap();
        assert_eq!((d.group_leaf_k, d.indexed_storage_k), (Some(4), Some(32)));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn sizes() -> impl Strategy<Value = Sizes> {
            (
                prop::sample::select(vec![2u8, 4, 8]),
                prop::sample::select(vec![2u8, 4, 8]),
            )
                .prop_map(|(o, l)| Sizes::new(o, l, "t", 0).unwrap())
        }

        /// An address that fits `sizes.offset` bytes (or undefined).
        fn addr(sizes: Sizes, raw: u64) -> u64 {
            let bits = 8 * u32::from(sizes.offset);
            let max = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            if raw.is_multiple_of(7) {
                UNDEFINED_ADDRESS
            } else {
                raw & max.wrapping_sub(1)
            }
        }

        proptest! {
            #[test]
            fn round_trip(
                version in 0u8..4,
                sizes in sizes(),
                a in prop::array::uniform6(any::<u64>()),
                ks in prop::array::uniform3(1u16..),
                flags in any::<u8>(),
                cache in 0u8..3,
            ) {
                let root = if version < 2 {
                    let len_max = if sizes.length == 8 { u64::MAX } else { (1u64 << (8 * sizes.length)) - 1 };
                    Root::SymbolTableEntry(SymbolTableEntry {
                        link_name_offset: a[5] & len_max,
                        object_header_address: addr(sizes, a[4]),
                        scratch: match cache {
                            0 => ScratchPad::None,
                            1 => ScratchPad::SymbolTable {
                                btree_address: addr(sizes, a[3]),
                                heap_address: addr(sizes, a[2]),
                            },
                            _ => ScratchPad::SoftLink { link_value_offset: a[1] as u32 },
                        },
                    })
                } else {
                    Root::ObjectHeader(addr(sizes, a[4]))
                };
                let old = version < 2;
                let sb = Superblock {
                    version,
                    sizes,
                    free_space_version: old.then_some(0),
                    root_entry_version: old.then_some(0),
                    shared_header_version: old.then_some(0),
                    group_leaf_k: old.then_some(ks[0]),
                    group_internal_k: old.then_some(ks[1]),
                    indexed_storage_k: (version == 1).then_some(ks[2]),
                    consistency_flags: u32::from(flags),
                    base_address: addr(sizes, a[0]),
                    free_space_address: if old { addr(sizes, a[1]) } else { UNDEFINED_ADDRESS },
                    extension_address: if old { UNDEFINED_ADDRESS } else { addr(sizes, a[2]) },
                    eof_address: addr(sizes, a[3]),
                    driver_info_address: if old { addr(sizes, a[5]) } else { UNDEFINED_ADDRESS },
                    root,
                    encoded_len: encoded_len(version, sizes).unwrap(),
                };
                let b = sb.encode().unwrap();
                prop_assert_eq!(b.len(), sb.encoded_len);
                prop_assert_eq!(Superblock::decode(&b, 0).unwrap(), sb);
            }
        }
    }
}
