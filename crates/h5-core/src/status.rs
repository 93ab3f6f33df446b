//! The superblock's status flags (version 3 "file consistency flags"): libhdf5 sets them while
//! a writer has the file open and clears them at close, so a writer that dies leaves them set
//! and libhdf5 (and h5, by default) then refuses to open the file. [`clear_status_flags`] resets
//! them as `h5clear -s` does.

use h5_format::superblock::{self, Superblock};
use h5_io::{Storage, StorageExt};

use crate::error::{Error, Result};

/// Resets the status flags of the superblock in `storage` (versions 2 and 3; earlier versions
/// have none that libhdf5 sets) and syncs; returns the flags found. Nothing is written when
/// they are already clear.
pub fn clear_status_flags(storage: &dyn Storage) -> Result<u32> {
    write_status_flags(storage, 0)
}

/// Sets the status flags of the superblock in `storage` to `flags` (versions 2 and 3; earlier
/// versions have none) and syncs; returns the flags found. Nothing is written when they
/// already are `flags`.
pub fn write_status_flags(storage: &dyn Storage, flags: u32) -> Result<u32> {
    let len = storage.len()?;
    let at = superblock::locate(len, |off| {
        let mut sig = vec![0u8; superblock::SIGNATURE.len()];
        storage.read_at_zero_fill(off, &mut sig).map(|()| sig)
    })?
    .ok_or(Error::NotHdf5)?;
    let avail = usize::try_from(len.saturating_sub(at)).unwrap_or(usize::MAX);
    let mut bytes = vec![0u8; superblock::MAX_LEN.min(avail)];
    storage.read_at(at, &mut bytes)?;
    let need = superblock::needed_len(&bytes, at)?;
    let image = bytes
        .get(..need)
        .ok_or(Error::Format(h5_format::FormatError::Truncated {
            structure: "superblock",
            address: at,
            needed: need as u64,
            available: bytes.len() as u64,
        }))?;
    let mut sb = Superblock::decode(image, at)?;
    let found = sb.consistency_flags;
    if sb.version >= 2 && found != flags {
        sb.consistency_flags = flags;
        storage.write_at(at, &sb.encode()?)?;
        storage.sync()?;
    }
    Ok(found)
}
