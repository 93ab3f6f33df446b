//! Walks of the structures read whole (the global heap's objects, the shared message table),
//! each block loaded through the metadata cache and decoded by `h5-format`. B-trees, heaps and
//! old-style groups are reached one entry at a time through their own modules (`btree1`,
//! `btree2`, `fheap`, `lheap`, `stab`).

use std::sync::Arc;

use h5_format::heap::global::{GlobalHeapCollection, GlobalHeapId};
use h5_format::{FormatError, UNDEFINED_ADDRESS};
use h5_metacache::MetadataKind as K;

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::meta::Load;

fn corrupt(structure: &'static str, address: u64, reason: &str) -> Error {
    Error::Format(FormatError::Corrupted {
        structure,
        address,
        reason: reason.into(),
    })
}

// ---------------------------------------------------------------------------------------------
// Global heap.
// ---------------------------------------------------------------------------------------------

/// The object `id` of a global heap collection (variable-length data).
pub(crate) fn global_object(file: &FileShared, id: GlobalHeapId) -> Result<Vec<u8>> {
    let sizes = file.sizes;
    let addr = id.collection_address;
    let col: Arc<GlobalHeapCollection> = file.load(
        K::GlobalHeapCollection,
        addr,
        crate::write::gheap::collection_load(sizes, addr),
    )?;
    col.get(id.index).map(<[u8]>::to_vec).ok_or_else(|| {
        corrupt(
            "global heap collection",
            addr,
            "variable-length data refers to a missing object",
        )
    })
}

/// The file's shared object header message table, if it has one (found through the superblock
/// extension's shared message table message; looked up once).
pub(crate) fn sohm_table(file: &FileShared) -> Result<Option<Arc<h5_format::sohm::SohmTable>>> {
    if let Some(t) = file.sohm.lock().map_err(|_| Error::Poisoned)?.as_ref() {
        return Ok(t.clone());
    }
    let ext = file.superblock.extension_address;
    let table = if ext == UNDEFINED_ADDRESS {
        None
    } else {
        let oh = crate::object::ObjectHeader::load(file, ext)?;
        match oh.find(|m| match m {
            h5_format::message::Message::SharedMessageTable(t) => Some(*t),
            _ => None,
        }) {
            None => None,
            Some(t) => {
                let sizes = file.sizes;
                let n = usize::from(t.index_count);
                let at = t.table_address;
                let table: Arc<h5_format::sohm::SohmTable> = file.load(
                    K::SharedMessageTable,
                    at,
                    Load::exact(
                        h5_format::sohm::SohmTable::encoded_len(sizes, n),
                        move |b| h5_format::sohm::SohmTable::decode(b, sizes, at, n),
                    ),
                )?;
                Some(table)
            }
        }
    };
    *file.sohm.lock().map_err(|_| Error::Poisoned)? = Some(table.clone());
    Ok(table)
}
