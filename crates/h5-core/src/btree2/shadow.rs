//! Shadowing of v2 B-tree nodes for legacy SWMR writing (libhdf5's `H5B2__shadow_internal` and
//! `H5B2__shadow_leaf`): a node that changes for the first time in a flush epoch moves to new
//! file space before it changes, so a reader that read its parent (or the header) before the
//! flush still finds the old node, intact, at its old address; the change of the node's address
//! changes its parent, which moves in turn, up to the root, whose new address the header
//! records. The header stays where it is and is written after every node below it (flush
//! dependencies), the object header after it and the superblock last (docs/design.md §8.6).
//!
//! Invariants: outside SWMR-writing mode nothing moves; in the mode a node moves at most once
//! per epoch (the epoch advances at each flush, `FileShared::swmr_unpin_headers`), and a node
//! created in the epoch never moves in it; the old space is freed into the allocator, which
//! holds it until close, so the old bytes stay as they are; the header of a changed tree stays
//! pinned in the cache until the flush.

use h5_format::btree2::{Btree2Header, Btree2Node, ChildPointer};

use crate::access::{Held, Session};
use crate::error::Result;
use crate::write::alloc::SpaceKind;

/// Moves held node `h` (pointed at by `ptr`) to new space when the file is in SWMR-writing
/// mode and the node was not placed in the current epoch; `h`, the node's own address and
/// `ptr` follow it. The caller writes `ptr` back into the parent, which changes it.
pub(super) fn shadow(
    s: &mut Session<'_>,
    geom: &Btree2Header,
    h: &mut Held,
    ptr: &mut ChildPointer,
) -> Result<()> {
    if !s.file().swmr_must_shadow(h.addr)? {
        return Ok(());
    }
    let len = u64::from(geom.node_size);
    let from = h.addr;
    let to = s.allocate(len)?;
    s.move_held(h, to)?;
    s.value_mut::<Btree2Node>(h)?.address = to;
    s.free(SpaceKind::Meta, from, len)?;
    s.file().swmr_placed(to)?;
    ptr.address = to;
    Ok(())
}

/// [`shadow`] for a held node that may not have changed: only a changed one moves.
pub(super) fn shadow_if_changed(
    s: &mut Session<'_>,
    geom: &Btree2Header,
    h: &mut Held,
    ptr: &mut ChildPointer,
) -> Result<()> {
    if s.is_dirtied(h)? {
        shadow(s, geom, h, ptr)?;
    }
    Ok(())
}

/// Records a node created at relative `addr` as placed in the current epoch (it changes in
/// place until the next flush).
pub(super) fn placed(s: &Session<'_>, addr: u64) -> Result<()> {
    s.file().swmr_placed(addr)
}

/// In SWMR-writing mode, pins the held header `hh` of a tree about to change until the next
/// flush: an eviction must not write it (with pointers to nodes that still change in place)
/// before the flush that ends the epoch.
pub(super) fn pin_header(s: &mut Session<'_>, hh: &Held) -> Result<()> {
    if s.file().swmr_must_pin_tree(hh.addr)? {
        s.pin_held(hh)?;
        s.file().swmr_tree_pinned(hh.addr)?;
    }
    Ok(())
}
