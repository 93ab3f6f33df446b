//! Updater files (the RFC's §3.5.2.2): for storage without POSIX semantics, the writer describes
//! each change of the metadata file in one file — header `VUDH` (48 bytes), change list `VUCL`
//! (52 + 20·n bytes), then page-aligned images, the metadata file index and header — and an
//! auxiliary process applies them in sequence order to a local metadata file. Layout:
//! docs/design.md §8.1.

use std::path::{Path, PathBuf};

use h5_format::checksum::lookup3;
use h5_io::Storage;

use crate::error::{Result, SwmrError};
use crate::format::HEADER_LEN;
use crate::writer::TickOutput;

/// `VUDH`.
pub const HEADER_SIGNATURE: [u8; 4] = *b"VUDH";
/// `VUCL`.
pub const CHANGE_LIST_SIGNATURE: [u8; 4] = *b"VUCL";
/// The only updater format version.
pub const VERSION: u16 = 0;
/// Flag: the file only tells the auxiliary process to create the metadata file (sequence 0).
pub const CREATE_METADATA_FILE_ONLY: u16 = 0x0001;
/// Flag: the writer is closing: apply, unlink the metadata file, exit.
pub const FINAL_UPDATE: u16 = 0x0002;
/// Bytes of the updater header.
pub const UD_HEADER_LEN: usize = 48;
const CL_FIXED: usize = 48;
/// Bytes of one change list entry.
pub const CL_ENTRY_LEN: usize = 20;

/// Bytes of a change list of `n` entries.
pub fn change_list_len(n: usize) -> u64 {
    (CL_FIXED + CL_ENTRY_LEN * n + 4) as u64
}

fn put32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn narrow(what: &'static str, v: u64) -> Result<u32> {
    u32::try_from(v).map_err(|_| SwmrError::FormatLimit { what, value: v })
}

/// The updater header's fields.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct UpdaterHeader {
    /// Flags ([`CREATE_METADATA_FILE_ONLY`], [`FINAL_UPDATE`]).
    pub flags: u16,
    /// Page size.
    pub page_size: u32,
    /// Sequence number (equal to the number in the file name).
    pub sequence: u64,
    /// The tick whose changes it carries.
    pub tick: u64,
    /// Offset of the change list (0 for create-only files).
    pub change_list_offset: u64,
    /// Length of the change list (0 for create-only files).
    pub change_list_len: u64,
}

impl UpdaterHeader {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(UD_HEADER_LEN);
        b.extend_from_slice(&HEADER_SIGNATURE);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&self.flags.to_le_bytes());
        put32(&mut b, self.page_size);
        put64(&mut b, self.sequence);
        put64(&mut b, self.tick);
        put64(&mut b, self.change_list_offset);
        put64(&mut b, self.change_list_len);
        let sum = lookup3(&b, 0);
        put32(&mut b, sum);
        b
    }
}

/// One change list entry.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ChangeEntry {
    /// Page of the image in the updater file.
    pub ud_page: u32,
    /// Page in the metadata file it goes to.
    pub md_page: u32,
    /// The HDF5 page it belongs to.
    pub hdf5_page: u32,
    /// Bytes.
    pub length: u32,
    /// Checksum of the image.
    pub checksum: u32,
}

/// A decoded updater file.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct UpdaterFile {
    /// The header.
    pub header: UpdaterHeader,
    /// Change entries (empty for create-only files).
    pub entries: Vec<ChangeEntry>,
    /// (updater page, length, checksum) of the metadata file header image.
    pub md_header: (u32, u32, u32),
    /// (updater page, metadata file offset, length, checksum) of the index image.
    pub md_index: (u32, u64, u32, u32),
}

/// The RFC's page allocation rule in an updater file: `floor(len / page) + 1` pages per item
/// (it wastes a page for exact multiples; kept for compatibility, OQ-13).
fn pages_for(len: u64, page: u64) -> u64 {
    len / page + 1
}

/// The bytes of a create-only updater file (sequence 0, SWMR-100).
pub fn create_only(page_size: u32) -> Vec<u8> {
    UpdaterHeader {
        flags: CREATE_METADATA_FILE_ONLY,
        page_size,
        sequence: 0,
        tick: 0,
        change_list_offset: 0,
        change_list_len: 0,
    }
    .encode()
}

/// The bytes of the updater file carrying publication `out` as sequence `sequence`, laid out as
/// the RFC's §3.5.2.2.2.2 says (SWMR-115, SWMR-117 … SWMR-119).
pub fn build(
    out: &TickOutput,
    sequence: u64,
    page_size: u64,
    final_update: bool,
) -> Result<Vec<u8>> {
    let n = out.images.len();
    let cl_len = change_list_len(n);
    let mut p = pages_for(UD_HEADER_LEN as u64 + cl_len, page_size);
    let mut entries = Vec::with_capacity(n);
    for img in &out.images {
        entries.push(ChangeEntry {
            ud_page: narrow("updater file page", p)?,
            md_page: narrow("metadata file page", img.md_offset / page_size)?,
            hdf5_page: narrow("HDF5 file page", img.hdf5_page)?,
            length: narrow("entry length", img.bytes.len() as u64)?,
            checksum: img.checksum,
        });
        p += pages_for(img.bytes.len() as u64, page_size);
    }
    let index_page = p;
    p += pages_for(out.index.len() as u64, page_size);
    let header_page = p;
    let total = (header_page * page_size + HEADER_LEN as u64) as usize;
    let mut cl = Vec::with_capacity(cl_len as usize);
    cl.extend_from_slice(&CHANGE_LIST_SIGNATURE);
    put64(&mut cl, out.tick);
    put32(&mut cl, narrow("updater file page", header_page)?);
    put32(&mut cl, HEADER_LEN as u32);
    put32(&mut cl, lookup3(&out.header, 0));
    put32(&mut cl, narrow("updater file page", index_page)?);
    put64(&mut cl, out.index_offset);
    put32(
        &mut cl,
        narrow("metadata file index length", out.index.len() as u64)?,
    );
    put32(&mut cl, lookup3(&out.index, 0));
    put32(&mut cl, narrow("change list entries", n as u64)?);
    for e in &entries {
        for v in [e.ud_page, e.md_page, e.hdf5_page, e.length, e.checksum] {
            put32(&mut cl, v);
        }
    }
    let sum = lookup3(&cl, 0);
    put32(&mut cl, sum);
    let header = UpdaterHeader {
        flags: if final_update { FINAL_UPDATE } else { 0 },
        page_size: narrow("page size", page_size)?,
        sequence,
        tick: out.tick,
        change_list_offset: UD_HEADER_LEN as u64,
        change_list_len: cl_len,
    };
    let mut file = vec![0u8; total];
    file[..UD_HEADER_LEN].copy_from_slice(&header.encode());
    file[UD_HEADER_LEN..UD_HEADER_LEN + cl.len()].copy_from_slice(&cl);
    for (e, img) in entries.iter().zip(&out.images) {
        let at = (u64::from(e.ud_page) * page_size) as usize;
        file[at..at + img.bytes.len()].copy_from_slice(&img.bytes);
    }
    let at = (index_page * page_size) as usize;
    file[at..at + out.index.len()].copy_from_slice(&out.index);
    let at = (header_page * page_size) as usize;
    file[at..at + HEADER_LEN].copy_from_slice(&out.header);
    Ok(file)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

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

/// Why an updater file was refused: `retry` faults (signature, checksum) may be a file still
/// being written; the others never get better (SWMR-124, E-34, E-35).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Refused {
    /// Worth waiting and reading again.
    pub retry: bool,
    /// What is wrong.
    pub reason: String,
}

fn refuse(retry: bool, reason: impl Into<String>) -> Refused {
    Refused {
        retry,
        reason: reason.into(),
    }
}

/// Decodes and checks an updater file: signatures, version, flags, header and change-list
/// checksums and every image checksum.
pub fn decode(b: &[u8]) -> std::result::Result<UpdaterFile, Refused> {
    if b.len() < UD_HEADER_LEN {
        return Err(refuse(
            true,
            format!("{} bytes, shorter than a header", b.len()),
        ));
    }
    if b[..4] != HEADER_SIGNATURE {
        return Err(refuse(true, "no VUDH signature"));
    }
    if lookup3(&b[..44], 0) != u32_at(b, 44) {
        return Err(refuse(true, "header checksum mismatch"));
    }
    let version = u16_at(b, 4);
    if version != VERSION {
        return Err(refuse(false, format!("unknown updater version {version}")));
    }
    let flags = u16_at(b, 6);
    if flags & !(CREATE_METADATA_FILE_ONLY | FINAL_UPDATE) != 0 {
        return Err(refuse(
            false,
            format!("reserved flag bits set ({flags:#x})"),
        ));
    }
    let header = UpdaterHeader {
        flags,
        page_size: u32_at(b, 8),
        sequence: u64_at(b, 12),
        tick: u64_at(b, 20),
        change_list_offset: u64_at(b, 28),
        change_list_len: u64_at(b, 36),
    };
    let empty = UpdaterFile {
        header,
        entries: Vec::new(),
        md_header: (0, 0, 0),
        md_index: (0, 0, 0, 0),
    };
    if flags & CREATE_METADATA_FILE_ONLY != 0 {
        if header.sequence != 0 {
            return Err(refuse(
                false,
                format!("create-only flag on sequence {}", header.sequence),
            ));
        }
        return Ok(empty);
    }
    let ps = u64::from(header.page_size);
    if ps == 0 {
        return Err(refuse(false, "page size 0"));
    }
    let cl_at = header.change_list_offset as usize;
    let cl_end = cl_at.saturating_add(header.change_list_len as usize);
    let Some(cl) = b.get(cl_at..cl_end) else {
        return Err(refuse(true, "change list past the end of the file"));
    };
    if cl.len() < CL_FIXED + 4 || cl[..4] != CHANGE_LIST_SIGNATURE {
        return Err(refuse(true, "no VUCL signature"));
    }
    let body = cl.len() - 4;
    if lookup3(&cl[..body], 0) != u32_at(cl, body) {
        return Err(refuse(true, "change list checksum mismatch"));
    }
    let n = u32_at(cl, 44) as usize;
    if change_list_len(n) != cl.len() as u64 {
        return Err(refuse(
            false,
            format!("{n} entries in a change list of {} bytes", cl.len()),
        ));
    }
    let image = |page: u32, len: u32, sum: u32, what: &str| -> std::result::Result<(), Refused> {
        let at = (u64::from(page) * ps) as usize;
        let img = b
            .get(at..at.saturating_add(len as usize))
            .ok_or_else(|| refuse(true, format!("{what} past the end of the file")))?;
        if lookup3(img, 0) != sum {
            return Err(refuse(true, format!("{what} checksum mismatch")));
        }
        Ok(())
    };
    let md_header = (u32_at(cl, 12), u32_at(cl, 16), u32_at(cl, 20));
    let md_index = (
        u32_at(cl, 24),
        u64_at(cl, 28),
        u32_at(cl, 36),
        u32_at(cl, 40),
    );
    image(
        md_header.0,
        md_header.1,
        md_header.2,
        "metadata file header",
    )?;
    image(md_index.0, md_index.2, md_index.3, "metadata file index")?;
    let mut entries = Vec::with_capacity(n);
    for i in 0..n {
        let at = CL_FIXED + i * CL_ENTRY_LEN;
        let e = ChangeEntry {
            ud_page: u32_at(cl, at),
            md_page: u32_at(cl, at + 4),
            hdf5_page: u32_at(cl, at + 8),
            length: u32_at(cl, at + 12),
            checksum: u32_at(cl, at + 16),
        };
        image(e.ud_page, e.length, e.checksum, "entry image")?;
        entries.push(e);
    }
    Ok(UpdaterFile {
        header,
        entries,
        md_header,
        md_index,
    })
}

/// Applies a decoded updater file (whose bytes are `b`) to a metadata file: every image, then
/// the index, then the header (SWMR-126).
pub fn apply(u: &UpdaterFile, b: &[u8], md: &dyn Storage) -> Result<()> {
    let ps = u64::from(u.header.page_size);
    let slice = |page: u32, len: u32| {
        let at = (u64::from(page) * ps) as usize;
        &b[at..at + len as usize]
    };
    for e in &u.entries {
        md.write_at(u64::from(e.md_page) * ps, slice(e.ud_page, e.length))?;
    }
    md.write_at(u.md_index.1, slice(u.md_index.0, u.md_index.2))?;
    md.write_at(0, slice(u.md_header.0, u.md_header.1))?;
    Ok(())
}

/// Writes an updater file under a temporary name in the same directory, then renames it to its
/// final name `<base>.<sequence>` so it appears whole (SWMR-116, OQ-12).
pub fn publish(base: &Path, sequence: u64, bytes: &[u8]) -> Result<PathBuf> {
    let fs = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| SwmrError::Fs { what, path, source }
    };
    let tmp = PathBuf::from(format!("{}.ud_tmp", base.display()));
    let done = file_name(base, sequence);
    std::fs::write(&tmp, bytes).map_err(fs("writing the updater file", &tmp))?;
    std::fs::rename(&tmp, &done).map_err(fs("renaming the updater file", &done))?;
    Ok(done)
}

/// `<base>.<sequence>`.
pub fn file_name(base: &Path, sequence: u64) -> PathBuf {
    PathBuf::from(format!("{}.{sequence}", base.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{MdHeader, MdIndex};
    use crate::writer::ImageWrite;
    use h5_io::{MemoryStorage, StorageExt};

    fn output() -> TickOutput {
        let img = |page: u64, md: u64, fill: u8, len: usize| {
            let bytes = vec![fill; len];
            ImageWrite {
                md_offset: md * 512,
                hdf5_page: page,
                checksum: lookup3(&bytes, 0),
                bytes,
            }
        };
        let images = vec![img(3, 1, 7, 512), img(9, 2, 8, 1500)];
        let index = MdIndex {
            tick: 5,
            entries: images
                .iter()
                .map(|i| crate::format::IndexEntry {
                    hdf5_page: i.hdf5_page,
                    md_page: i.md_offset / 512,
                    length: i.bytes.len() as u32,
                    checksum: i.checksum,
                })
                .collect(),
        }
        .encode()
        .unwrap();
        let header = MdHeader {
            page_size: 512,
            tick: 5,
            index_offset: 36,
            index_length: index.len() as u64,
        }
        .encode();
        TickOutput {
            tick: 5,
            images,
            index_offset: 36,
            index,
            header,
            entries: 2,
        }
    }

    // SWMR-117, SWMR-119: header fields and layout (pages in order, page-aligned, inside the
    // file, not overlapping), decoded back; SWMR-126: applying writes what the writer would.
    #[test]
    fn swmr_117_119_126_layout_and_apply() {
        let out = output();
        let b = build(&out, 4, 512, false).unwrap();
        let u = decode(&b).unwrap();
        assert_eq!(u.header.sequence, 4);
        assert_eq!(u.header.tick, 5);
        assert_eq!(u.header.flags, 0);
        assert_eq!(u.header.change_list_offset, 48);
        assert_eq!(u.header.change_list_len, 52 + 2 * 20);
        // floor((48 + 92) / 512) + 1 = 1; 512-byte image: 2 pages (the RFC's formula); 1500: 3.
        let pages: Vec<u32> = u.entries.iter().map(|e| e.ud_page).collect();
        assert_eq!(pages, vec![1, 3]);
        assert_eq!(u.md_index.0, 6);
        assert_eq!(u.md_header.0, 7);
        assert_eq!(b.len(), 7 * 512 + 36);
        assert_eq!(u.entries[1].hdf5_page, 9);
        assert_eq!(u.entries[1].md_page, 2);
        let md = MemoryStorage::new();
        apply(&u, &b, &md).unwrap();
        let direct = MemoryStorage::new();
        crate::writer::apply(&direct, &out).unwrap();
        assert_eq!(
            md.read_vec(0, direct.len().unwrap() as usize).unwrap(),
            direct.read_vec(0, direct.len().unwrap() as usize).unwrap()
        );
    }

    // SWMR-100, E-34: create-only files; SWMR-124, E-35: refused files.
    #[test]
    fn swmr_100_124_create_only_and_refusals() {
        let c = create_only(4096);
        assert_eq!(c.len(), 48);
        let u = decode(&c).unwrap();
        assert_eq!(u.header.flags, CREATE_METADATA_FILE_ONLY);
        assert_eq!(
            (u.header.change_list_offset, u.header.change_list_len),
            (0, 0)
        );
        let mut bad_seq = UpdaterHeader {
            sequence: 3,
            ..u.header
        }
        .encode();
        assert!(!decode(&bad_seq).unwrap_err().retry);
        bad_seq[0] = b'X';
        assert!(decode(&bad_seq).unwrap_err().retry);
        let mut b = build(&output(), 1, 512, true).unwrap();
        assert_eq!(decode(&b).unwrap().header.flags, FINAL_UPDATE);
        b[512 + 10] ^= 1; // first image
        let r = decode(&b).unwrap_err();
        assert!(r.retry && r.reason.contains("entry image"), "{r:?}");
        let mut v = build(&output(), 1, 512, false).unwrap();
        v[4] = 1; // version 1
        let sum = lookup3(&v[..44], 0);
        v[44..48].copy_from_slice(&sum.to_le_bytes());
        let r = decode(&v).unwrap_err();
        assert!(!r.retry && r.reason.contains("version 1"));
    }

    #[test]
    fn publish_renames_into_place() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("ud");
        let p = publish(&base, 7, b"xyz").unwrap();
        assert_eq!(p, dir.path().join("ud.7"));
        assert!(!dir.path().join("ud.ud_tmp").exists());
        assert_eq!(std::fs::read(p).unwrap(), b"xyz");
    }
}
