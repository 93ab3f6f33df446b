//! The high format bound: what a file created with bounds `(low, high)` refuses because it would
//! need a newer format than `high` allows (libhdf5's `H5Pset_libver_bounds`).

use h5_core::file::FileShared;
use h5_core::write::chunk_index::ChunkIndexKind;
use h5_format::datatype::Datatype;

use crate::{Error, FormatBounds, Result};

/// The newest datatype message version objects may use under the high bound `high`
/// (libhdf5's `H5O_dtype_ver_bounds`).
fn max_datatype_version(high: FormatBounds) -> u8 {
    match high {
        FormatBounds::Earliest => 1,
        FormatBounds::V18 | FormatBounds::V110 => 3,
        FormatBounds::V112 | FormatBounds::V114 => 4,
        _ => 5,
    }
}

/// Checks that `datatype` can be written under the file's high bound.
pub(crate) fn check_datatype(file: &FileShared, datatype: &Datatype) -> Result<()> {
    let high = file.high_bound();
    let needs = datatype.min_version();
    if needs > max_datatype_version(high) {
        return Err(Error::Unsupported(format!(
            "{} needs datatype message version {needs}, newer than the high format bound \
             {high:?} allows",
            datatype.describe()
        )));
    }
    Ok(())
}

/// Checks that a chunk index of `kind` can be written under the file's high bound (every index
/// but the version 1 B-tree needs the HDF5 1.10 formats).
pub(crate) fn check_chunk_index(file: &FileShared, kind: ChunkIndexKind) -> Result<()> {
    let high = file.high_bound();
    if kind != ChunkIndexKind::BtreeV1 && high < FormatBounds::V110 {
        return Err(Error::Unsupported(format!(
            "a {kind:?} chunk index needs the HDF5 1.10 formats; the high format bound is \
             {high:?}"
        )));
    }
    Ok(())
}
