//! Fractal heap (`FRHP` header, `FHIB` indirect blocks, `FHDB` direct blocks, heap IDs): the
//! object store of new-style groups (link messages) and dense attribute storage.
//!
//! Managed objects live in direct blocks arranged by a *doubling table*: `width` columns; rows
//! 0 and 1 hold blocks of the starting block size, each next row doubles the block size. Rows
//! whose block size does not exceed the maximum direct block size hold direct blocks; larger
//! rows hold indirect blocks, themselves doubling tables with fewer rows. A managed object is
//! named by its offset in the heap's linear address space; [`DoublingTable::locate`] maps an
//! offset to the block that holds it, one indirect block at a time, so the engine can walk
//! root → indirect → direct blocks through the metadata cache.
//!
//! Tiny objects live inside their heap ID; huge objects live outside the managed space, found
//! through a v2 B-tree or directly from their heap ID.

mod block;
mod builder;
mod dtable;
mod header;
mod id;

pub use block::{ChildDirectBlock, FractalDirectBlock, FractalIndirectBlock};
pub use builder::{
    EncodedFractalBlock, EncodedFractalHeap, FractalBlockKind, FractalHeapBuilder,
    FractalHeapParams,
};
pub use dtable::{BlockLocation, ChildKind, DoublingTable};
pub use header::{FilteredRoot, FractalHeapHeader, RootBlock};
pub use id::{HeapId, HugeId};

use crate::error::{FormatError, Result};
use crate::reader::{Sizes, UNDEFINED_ADDRESS};
use crate::writer::Writer;

/// Bytes needed to encode a number of `bits` bits (rounded up).
fn bytes_for_bits(bits: u32) -> usize {
    bits.div_ceil(8) as usize
}

/// The error of an encoder asked to write a value its field cannot hold.
fn encode_error(structure: &'static str, what: String) -> FormatError {
    FormatError::Unsupported {
        structure,
        address: UNDEFINED_ADDRESS,
        what,
    }
}

/// Writes `v` in `n` bytes, or errors (naming `field`) if it does not fit.
fn put_uint(w: &mut Writer, structure: &'static str, field: &str, v: u64, n: usize) -> Result<()> {
    if v > crate::reader::all_ones(n) {
        return Err(encode_error(
            structure,
            format!("{field} {v} does not fit in {n} bytes"),
        ));
    }
    w.uint(v, n);
    Ok(())
}

/// Writes a length field of the file's length size, checking that it fits.
fn put_length(
    w: &mut Writer,
    structure: &'static str,
    field: &str,
    sizes: Sizes,
    v: u64,
) -> Result<()> {
    put_uint(w, structure, field, v, usize::from(sizes.length))
}

/// Writes an address field (the undefined address as all ones), checking that it fits.
fn put_offset(
    w: &mut Writer,
    structure: &'static str,
    field: &str,
    sizes: Sizes,
    v: u64,
) -> Result<()> {
    if v == UNDEFINED_ADDRESS {
        w.offset(sizes, v);
        Ok(())
    } else {
        put_uint(w, structure, field, v, usize::from(sizes.offset))
    }
}

#[cfg(test)]
mod tests;
