//! Freeing the global heap objects of variable-length data that is overwritten or deleted:
//! elements of a dataset written over, an attribute replaced or deleted, a dataset deleted
//! (libhdf5 deletes the old heap object of a variable-length element it writes over, and the
//! collections it empties).
//!
//! The heap IDs of some elements are found by walking their datatype (compound members, array
//! elements, variable-length strings and sequences, and the elements of a sequence's heap
//! object when its base type holds variable-length data too). An ID that the new elements still
//! use is not freed (writing back the raw bytes read from the same elements frees nothing).

use std::collections::HashSet;

use h5_format::datatype::{Datatype, VarLenKind};
use h5_format::heap::global::GlobalHeapId;
use h5_format::message::{Message, decode_message, kind};

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::object::ObjectHeader;
use crate::walk;

/// Nesting deeper than this is refused (the datatype decoder bounds it already).
const MAX_DEPTH: usize = 40;

/// Whether elements of `dt` hold variable-length data (heap IDs).
pub(crate) fn has_vlen(dt: &Datatype) -> bool {
    match dt {
        Datatype::VarLen(_) => true,
        Datatype::Compound(c) => c.members.iter().any(|m| has_vlen(&m.datatype)),
        Datatype::Array(a) => has_vlen(&a.base),
        _ => false,
    }
}

/// Adds the heap IDs held by the elements `raw` of `dt` to `out` (nested ones too).
pub(crate) fn heap_ids(
    file: &FileShared,
    dt: &Datatype,
    raw: &[u8],
    out: &mut Vec<GlobalHeapId>,
) -> Result<()> {
    let size = dt.size() as usize;
    if size == 0 || !has_vlen(dt) {
        return Ok(());
    }
    for e in raw.chunks_exact(size) {
        element_ids(file, dt, e, out, 0)?;
    }
    Ok(())
}

fn element_ids(
    file: &FileShared,
    dt: &Datatype,
    b: &[u8],
    out: &mut Vec<GlobalHeapId>,
    depth: usize,
) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(Error::Unsupported("datatype nested too deeply".into()));
    }
    #[allow(
        clippy::arithmetic_side_effects,
        reason = "depth <= MAX_DEPTH (checked above)"
    )]
    let depth = depth + 1;
    match dt {
        Datatype::Compound(c) => {
            for m in &c.members {
                let start = m.offset as usize;
                let end = start.saturating_add(m.datatype.size() as usize);
                let part = b.get(start..end).ok_or_else(|| {
                    Error::Invalid(format!("compound member {:?} out of bounds", m.name))
                })?;
                element_ids(file, &m.datatype, part, out, depth)?;
            }
        }
        Datatype::Array(a) if has_vlen(&a.base) => {
            let es = a.base.size() as usize;
            if es > 0 {
                for e in b.chunks_exact(es) {
                    element_ids(file, &a.base, e, out, depth)?;
                }
            }
        }
        Datatype::VarLen(v) => {
            let mut r = h5_format::Reader::new(b, "variable-length element", u64::MAX);
            let n = r.u32()? as usize;
            let id = GlobalHeapId::decode(r.bytes(r.remaining())?, file.sizes, u64::MAX)?;
            if id.collection_address == h5_format::UNDEFINED_ADDRESS
                || (id.collection_address == 0 && id.index == 0)
            {
                return Ok(());
            }
            let nested = matches!(v.kind, VarLenKind::Sequence) && has_vlen(&v.base);
            if nested && n > 0 {
                let data = walk::global_object(file, id)?;
                let es = v.base.size() as usize;
                let need = n.saturating_mul(es);
                let data = data.get(..need).ok_or_else(|| {
                    Error::Invalid("variable-length sequence longer than its heap object".into())
                })?;
                if es > 0 {
                    for e in data.chunks_exact(es) {
                        element_ids(file, &v.base, e, out, depth)?;
                    }
                }
            }
            out.push(id);
        }
        _ => {}
    }
    Ok(())
}

/// Whether the dataset's storage was never allocated (reading it would allocate it; it holds
/// no heap IDs).
fn never_written(info: &crate::dataset::DatasetInfo) -> bool {
    use h5_format::message::layout::{ChunkIndex, LayoutClass};
    let undef = h5_format::UNDEFINED_ADDRESS;
    match &info.layout.class {
        LayoutClass::Contiguous { address, .. } => *address == undef,
        LayoutClass::Chunked { index, .. } => match *index {
            ChunkIndex::BtreeV1 { address }
            | ChunkIndex::SingleChunk { address, .. }
            | ChunkIndex::Implicit { address }
            | ChunkIndex::FixedArray { address, .. }
            | ChunkIndex::ExtensibleArray { address, .. }
            | ChunkIndex::BtreeV2 { address, .. } => address == undef,
        },
        _ => false,
    }
}

/// Elements read at once when a deleted dataset's variable-length data is freed.
const DELETE_SLAB: u64 = 1 << 16;

impl FileShared {
    /// Frees the heap objects of every element of the dataset whose header is `oh` (it is
    /// being deleted), read in slabs of its first dimension.
    pub(crate) fn free_dataset_vlen(&self, oh: &ObjectHeader) -> Result<()> {
        let Ok(info) = crate::dataset::DatasetInfo::from_header(self, oh) else {
            return Ok(());
        };
        if !has_vlen(&info.datatype) || info.dims().contains(&0) || never_written(&info) {
            return Ok(());
        }
        let file = self
            .arc()
            .ok_or_else(|| Error::Unsupported("deleting from a file being dropped".into()))?;
        let dims = info.dims().to_vec();
        let Some((&dim0, inner)) = dims.split_first() else {
            // A scalar: one element.
            let mut raw = vec![0u8; info.elem_size()];
            let all = h5_chunkcache::selection::Selection::All;
            crate::dataset::read(&file, &info, &all, None, None, &mut raw)?;
            return self.free_replaced_vlen(&info.datatype, &raw, None, &[]);
        };
        let row = crate::buffer::product(inner.iter().copied().chain([info.elem_size() as u64]))
            .ok_or_else(|| Error::too_large("a row of the dataset", None))?;
        let rows = DELETE_SLAB.checked_div(row).unwrap_or(DELETE_SLAB).max(1);
        let mut start = 0;
        while let Some(left) = dim0.checked_sub(start).filter(|&left| left > 0) {
            let n = rows.min(left);
            let mut first = vec![0u64; dims.len()];
            let mut count = dims.clone();
            if let (Some(f), Some(c)) = (first.first_mut(), count.first_mut()) {
                (*f, *c) = (start, n);
            }
            let sel = h5_chunkcache::selection::Selection::Hyperslab(
                h5_chunkcache::selection::Hyperslab::contiguous(&first, &count)
                    .map_err(|e| Error::Invalid(e.to_string()))?,
            );
            let mut raw =
                crate::buffer::zeroed(|| format!("{n} rows of the dataset"), n.checked_mul(row))?;
            crate::dataset::read(&file, &info, &sel, None, None, &mut raw)?;
            self.free_replaced_vlen(&info.datatype, &raw, None, &[])?;
            #[allow(clippy::arithmetic_side_effects, reason = "n <= dim0 - start")]
            {
                start += n;
            }
        }
        Ok(())
    }

    /// Frees the heap objects the elements `old` (of `dt`) use and the elements `new` (of
    /// `new_dt`) do not.
    pub(crate) fn free_replaced_vlen(
        &self,
        dt: &Datatype,
        old: &[u8],
        new_dt: Option<&Datatype>,
        new: &[u8],
    ) -> Result<()> {
        let mut gone = Vec::new();
        heap_ids(self, dt, old, &mut gone)?;
        if gone.is_empty() {
            return Ok(());
        }
        let mut kept = Vec::new();
        if let Some(t) = new_dt {
            heap_ids(self, t, new, &mut kept)?;
        }
        let kept: HashSet<(u64, u32)> = kept
            .iter()
            .map(|i| (i.collection_address, i.index))
            .collect();
        gone.retain(|i| !kept.contains(&(i.collection_address, i.index)));
        self.free_heap_objects(&gone)
    }

    /// The datatype and raw value of the attribute `name` of the object at `obj`, when its
    /// elements hold variable-length data (`None`: no such attribute, or none to free). The
    /// header's messages are scanned; dense storage is searched through its name index.
    pub(crate) fn vlen_attribute(
        &self,
        obj: u64,
        name: &str,
    ) -> Result<Option<(Datatype, Vec<u8>)>> {
        let decode = |body: &[u8]| -> Result<Option<(Datatype, Vec<u8>)>> {
            let Message::Attribute(a) = decode_message(kind::ATTRIBUTE, 0, body, self.sizes, obj)?
            else {
                return Ok(None);
            };
            if a.name != name {
                return Ok(None);
            }
            let a = crate::attribute::resolve(self, a)?;
            Ok(has_vlen(&a.datatype).then_some((a.datatype, a.data)))
        };
        let oh = ObjectHeader::load(self, obj)?;
        if let Some(m) = oh.find(|m| match m {
            Message::Attribute(a) if a.name == name => Some(a.clone()),
            _ => None,
        }) {
            let a = crate::attribute::resolve(self, m)?;
            return Ok(has_vlen(&a.datatype).then_some((a.datatype, a.data)));
        }
        let Some(info) = oh.find(|m| match m {
            Message::AttributeInfo(i) => Some(*i),
            _ => None,
        }) else {
            return Ok(None);
        };
        let Some(dense) = crate::write::attrs::dense_of(&info) else {
            return Ok(None);
        };
        match dense.find(&mut crate::access::Reading(self), name.as_bytes())? {
            Some(stored) => decode(&stored.body),
            None => Ok(None),
        }
    }
}
