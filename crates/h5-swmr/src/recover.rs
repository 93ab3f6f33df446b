//! Crash recovery from the metadata file (what `h5 recover` runs).
//!
//! **Guarantee.** After a VFD SWMR writer died (killed, crashed) while its metadata file holds an
//! intact header and index, [`recover`] turns the HDF5 file into the file as of that last
//! published tick `T`: every image the index lists is checked against its checksum and written at
//! its HDF5 page, and the file is cut (or extended) to the end of file the tick-`T` superblock
//! records; the writer's marks in the superblock (its status flags) are cleared, so plain opens
//! accept the file. Why that is consistent:
//!
//! * a page listed in the index gets its tick-`T` image;
//! * a page not listed either never changed since the writer opened the file, or was written back
//!   and left the index unchanged, so the HDF5 file holds its tick-`T` bytes; a change after that
//!   would have been delayed `max_lag` ticks (never written before the crash) — or it is a page
//!   allocated after tick `T`, which nothing of tick `T` references;
//! * freed space was not reused within `max_lag` ticks, so nothing tick `T` references was
//!   overwritten.
//!
//! Metadata is exactly tick `T`'s. Raw data is as current as the HDF5 file: with
//! `flush_raw_data` every value written before the end of tick `T` is there; without it, values
//! of the last ticks may read as fill. What recovery cannot do: if the header or index itself is
//! damaged (torn by a machine crash: the metadata file is not fsynced), or an image fails its
//! checksum, it refuses and changes nothing.

use std::path::{Path, PathBuf};

use h5_format::checksum::lookup3;
use h5_format::superblock::Superblock;
use h5_io::{FileStorage, OpenMode, Storage, StorageExt};

use crate::error::{Result, SwmrError};
use crate::format::{MdHeader, MdIndex};

/// What [`recover`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    /// The tick the file now reflects.
    pub tick: u64,
    /// Images written back.
    pub pages: usize,
    /// Bytes written back.
    pub bytes: u64,
    /// The file's length now (the superblock's end of file).
    pub len: u64,
}

fn corrupt(path: &Path, reason: impl Into<String>) -> SwmrError {
    SwmrError::CorruptMdFile {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Reads the last published header and index of the metadata file at `md` and checks every
/// image; nothing is written.
pub fn last_tick(md: &Path) -> Result<(MdHeader, MdIndex, Vec<Vec<u8>>)> {
    let s = FileStorage::open(md, OpenMode::ReadOnly)?;
    let len = s.len()?;
    let hb = s.read_vec(0, crate::format::HEADER_LEN.min(len as usize))?;
    let h = MdHeader::decode(&hb).map_err(|f| corrupt(md, format!("header: {f}")))?;
    let end = h.index_offset.saturating_add(h.index_length);
    if end > len {
        return Err(corrupt(md, "index past the end of the metadata file"));
    }
    let ib = s.read_vec(h.index_offset, h.index_length as usize)?;
    let ps = u64::from(h.page_size);
    let ix = MdIndex::decode(&ib, ps).map_err(|f| corrupt(md, format!("index: {f}")))?;
    if ix.tick != h.tick {
        return Err(corrupt(
            md,
            format!("header tick {} but index tick {}", h.tick, ix.tick),
        ));
    }
    let mut images = Vec::with_capacity(ix.entries.len());
    for e in &ix.entries {
        let at = e.md_page.saturating_mul(ps);
        if at.saturating_add(u64::from(e.length)) > len {
            return Err(corrupt(
                md,
                format!("image of page {} past the end", e.hdf5_page),
            ));
        }
        let img = s.read_vec(at, e.length as usize)?;
        if lookup3(&img, 0) != e.checksum {
            return Err(SwmrError::EntryChecksum { page: e.hdf5_page });
        }
        images.push(img);
    }
    Ok((h, ix, images))
}

/// Rebuilds the HDF5 file at `hdf5` from the last complete tick in the metadata file at `md`
/// (see the module's guarantee). The metadata file is left in place.
pub fn recover(hdf5: &Path, md: &Path) -> Result<Recovered> {
    let (h, ix, images) = last_tick(md)?;
    let ps = u64::from(h.page_size);
    let file = FileStorage::open(hdf5, OpenMode::ReadWrite)?;
    let mut bytes = 0;
    for (e, img) in ix.entries.iter().zip(&images) {
        file.write_at(e.hdf5_page * ps, img)?;
        bytes += img.len() as u64;
    }
    let head = file.read_vec(0, 512.min(file.len()? as usize))?;
    let mut sb = Superblock::decode(&head, 0).map_err(|e| SwmrError::CorruptMdFile {
        path: PathBuf::from(hdf5),
        reason: format!("superblock after recovery: {e}"),
    })?;
    // The dead writer's marks (write and SWMR-write status flags) would make every plain open
    // refuse the recovered file.
    if sb.version >= 2 && sb.consistency_flags != 0 {
        sb.consistency_flags = 0;
        let image = sb.encode().map_err(|e| SwmrError::CorruptMdFile {
            path: PathBuf::from(hdf5),
            reason: format!("superblock after recovery: {e}"),
        })?;
        file.write_at(0, &image)?;
    }
    let len = sb.eof_address;
    file.set_len(len)?;
    file.sync()?;
    Ok(Recovered {
        tick: h.tick,
        pages: images.len(),
        bytes,
        len,
    })
}
