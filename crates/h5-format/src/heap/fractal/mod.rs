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
mod dtable;
mod header;
mod id;

pub use block::{ChildDirectBlock, FractalDirectBlock, FractalIndirectBlock};
pub use dtable::{BlockLocation, ChildKind, DoublingTable};
pub use header::{FilteredRoot, FractalHeapHeader, RootBlock};
pub use id::{HeapId, HugeId};

/// Bytes needed to encode a number of `bits` bits (rounded up).
fn bytes_for_bits(bits: u32) -> usize {
    bits.div_ceil(8) as usize
}

#[cfg(test)]
mod tests;
