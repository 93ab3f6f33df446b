//! Huge objects (larger than the heap's managed maximum): one block each in raw-data space (as
//! libhdf5 allocates them), tracked by the heap's v2 B-tree: type 1 keyed by the object's ID
//! (IDs count up from 1) when the heap ID is too short for an address and length, type 3 keyed
//! by address when the heap ID holds them (libhdf5's `H5HFhuge.c`). The tree is made with the
//! first huge object and deleted with the last. The huge objects of heaps with I/O filters
//! (types 2 and 4) are refused, reading and writing.

use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree2::{Btree2Type, Record, RecordContext};
use h5_format::heap::fractal::{FractalHeapHeader, HeapId, HugeId};
use h5_metacache::MetadataKind as K;

use super::{HeapChange, HugeObject, corrupt};
use crate::access::{MetaAccess, Session};
use crate::btree2::{self, HugeAddrKey, HugeIdKey, Key, Tree};
use crate::error::{Error, Result};
use crate::meta::{Decoded, Load};
use crate::write::alloc::SpaceKind;

fn tree(hdr: &FractalHeapHeader) -> Tree {
    Tree {
        addr: hdr.huge_btree_address,
        ctx: RecordContext::new(hdr.sizes),
    }
}

/// Whether the heap's IDs hold a huge object's address and length (directly accessed
/// objects) rather than a B-tree key.
#[allow(clippy::arithmetic_side_effects, reason = "1-byte sizes and constants")]
fn direct_ids(hdr: &FractalHeapHeader) -> bool {
    let room = usize::from(hdr.heap_id_len).saturating_sub(1);
    let (o, l) = (usize::from(hdr.sizes.offset), usize::from(hdr.sizes.length));
    if hdr.is_filtered() {
        room >= o + l + 4 + l
    } else {
        room >= o + l
    }
}

fn block_load(addr: u64, len: u64) -> Result<Load> {
    block_len(addr, len).map(loader)
}

/// A huge object's `len` as a length in memory.
fn block_len(addr: u64, len: u64) -> Result<usize> {
    usize::try_from(len).map_err(|_| corrupt(addr, "huge object too large"))
}

/// How to load a huge object of `n` bytes.
fn loader(n: usize) -> Load {
    Load::exact(n, |b| Ok(HugeObject(b.to_vec()))).writable_with(|h: &HugeObject| Ok(h.0.clone()))
}

fn block(a: &mut dyn MetaAccess, addr: u64, len: u64) -> Result<Vec<u8>> {
    let n = block_len(addr, len)?;
    let h: std::sync::Arc<HugeObject> =
        crate::access::get(a, K::FractalHeapDirectBlock, addr, || loader(n))?;
    Ok(h.0.clone())
}

/// Where a huge object is, from its ID: `(address, length)`.
fn locate(a: &mut dyn MetaAccess, hdr: &FractalHeapHeader, h: HugeId) -> Result<(u64, u64)> {
    match h {
        HugeId::Direct { address, len } => Ok((address, len)),
        HugeId::BtreeKey(key) => {
            if hdr.huge_btree_address == UNDEFINED_ADDRESS {
                return Err(corrupt(
                    hdr.address,
                    "huge object ID without a huge-object B-tree",
                ));
            }
            match btree2::find(a, &tree(hdr), &HugeIdKey(key))? {
                Some(Record::HugeIndirect {
                    address, length, ..
                }) => Ok((address, length)),
                Some(_) => Err(Error::Unsupported("filtered huge heap objects".into())),
                None => Err(corrupt(
                    hdr.address,
                    "huge object ID not found in its B-tree",
                )),
            }
        }
        HugeId::DirectFiltered { .. } => {
            Err(Error::Unsupported("filtered huge heap objects".into()))
        }
    }
}

/// The bytes of the huge object `h`.
pub(super) fn read(a: &mut dyn MetaAccess, hdr: &FractalHeapHeader, h: HugeId) -> Result<Vec<u8>> {
    let (address, len) = locate(a, hdr, h)?;
    block(a, address, len)
}

/// Stores `obj` as a huge object; returns its heap ID.
pub(super) fn insert(c: &mut HeapChange<'_, '_>, obj: &[u8]) -> Result<Vec<u8>> {
    if c.hdr.is_filtered() {
        return Err(Error::Unsupported(
            "huge objects in a fractal heap with I/O filters".into(),
        ));
    }
    let len = obj.len() as u64;
    // The counters are checked before anything changes.
    let count = c.add(c.hdr.huge_object_count, 1)?;
    let total = c.add(c.hdr.huge_objects_size, len)?;
    let address = c.s.file().allocate(SpaceKind::Raw, len)?;
    c.s.insert(
        K::FractalHeapDirectBlock,
        address,
        Decoded::writable(obj.len(), HugeObject(obj.to_vec()), |h: &HugeObject| {
            Ok(h.0.clone())
        }),
    )?;
    let direct = direct_ids(&c.hdr);
    if c.hdr.huge_btree_address == UNDEFINED_ADDRESS {
        let t = if direct {
            Btree2Type::HugeDirect
        } else {
            Btree2Type::HugeIndirect
        };
        let params = btree2::params_for(t, &RecordContext::new(c.hdr.sizes))?;
        c.hdr.huge_btree_address = btree2::create(c.s, params)?;
    }
    let (id, rec, key): (HugeId, Record, Box<dyn Key>) = if direct {
        (
            HugeId::Direct { address, len },
            Record::HugeDirect {
                address,
                length: len,
            },
            Box::new(HugeAddrKey(address)),
        )
    } else {
        let room = usize::from(c.hdr.heap_id_len).saturating_sub(1).min(8);
        let max = if room >= 8 {
            u64::MAX
        } else {
            #[allow(
                clippy::arithmetic_side_effects,
                reason = "room < 8: the shift is below 64 and its result at least 1"
            )]
            let max = (1u64 << (8 * room)) - 1;
            max
        };
        if c.hdr.huge_ids_wrapped || c.hdr.next_huge_id >= max {
            return Err(Error::Unsupported(
                "a fractal heap whose huge object IDs wrapped around".into(),
            ));
        }
        let n = c.add(c.hdr.next_huge_id, 1)?;
        c.hdr.next_huge_id = n;
        (
            HugeId::BtreeKey(n),
            Record::HugeIndirect {
                address,
                length: len,
                id: n,
            },
            Box::new(HugeIdKey(n)),
        )
    };
    btree2::insert(c.s, &tree(&c.hdr), key.as_ref(), rec)?;
    c.hdr.huge_object_count = count;
    c.hdr.huge_objects_size = total;
    Ok(HeapId::Huge(id).encode(&c.hdr)?)
}

/// The key of `h` in the heap's huge-object tree.
fn key_of(h: HugeId) -> Result<Box<dyn Key>> {
    match h {
        HugeId::BtreeKey(k) => Ok(Box::new(HugeIdKey(k))),
        HugeId::Direct { address, .. } => Ok(Box::new(HugeAddrKey(address))),
        HugeId::DirectFiltered { .. } => {
            Err(Error::Unsupported("filtered huge heap objects".into()))
        }
    }
}

/// Removes the huge object `h` (its block freed); the tree goes with the last object.
pub(super) fn remove(c: &mut HeapChange<'_, '_>, h: HugeId) -> Result<()> {
    if c.hdr.huge_btree_address == UNDEFINED_ADDRESS {
        return Err(corrupt(
            c.hdr.address,
            "huge object without a huge-object B-tree",
        ));
    }
    let t = tree(&c.hdr);
    let (address, length) = match btree2::remove(c.s, &t, key_of(h)?.as_ref())? {
        Some(Record::HugeIndirect {
            address, length, ..
        })
        | Some(Record::HugeDirect { address, length }) => (address, length),
        Some(_) => return Err(Error::Unsupported("filtered huge heap objects".into())),
        None => return Err(corrupt(c.hdr.address, "huge object not in its B-tree")),
    };
    c.s.forget(K::FractalHeapDirectBlock, address)?;
    c.s.free(SpaceKind::Raw, address, length)?;
    c.hdr.huge_object_count = c.hdr.huge_object_count.saturating_sub(1);
    c.hdr.huge_objects_size = c.hdr.huge_objects_size.saturating_sub(length);
    if c.hdr.huge_object_count == 0 {
        btree2::delete(c.s, &t, &mut |_, _| Ok(()))?;
        c.hdr.huge_btree_address = UNDEFINED_ADDRESS;
        c.hdr.next_huge_id = 0;
        c.hdr.huge_ids_wrapped = false;
    }
    Ok(())
}

/// Rewrites the huge object `h` with `obj` of the same length, in place.
pub(super) fn write(c: &mut HeapChange<'_, '_>, h: HugeId, obj: &[u8]) -> Result<()> {
    let (address, len) = locate(c.s, &c.hdr, h)?;
    if len != obj.len() as u64 {
        return Err(Error::Invalid(
            "rewriting a huge heap object with another length".into(),
        ));
    }
    c.s.modify(
        K::FractalHeapDirectBlock,
        address,
        block_load(address, len)?,
        |b: &mut HugeObject| {
            b.0.copy_from_slice(obj);
            Ok(())
        },
    )
}

/// Frees every huge object of the heap and its tree (the heap is being deleted).
pub(super) fn delete_all(s: &mut Session<'_>, hdr: &FractalHeapHeader) -> Result<()> {
    if hdr.huge_btree_address == UNDEFINED_ADDRESS {
        return Ok(());
    }
    btree2::delete(s, &tree(hdr), &mut |s, r| {
        let (address, length) = match r {
            Record::HugeIndirect {
                address, length, ..
            }
            | Record::HugeDirect { address, length }
            | Record::HugeIndirectFiltered {
                address, length, ..
            }
            | Record::HugeDirectFiltered {
                address, length, ..
            } => (*address, *length),
            _ => {
                return Err(corrupt(
                    hdr.address,
                    "a non-huge record in the huge-object tree",
                ));
            }
        };
        s.forget(K::FractalHeapDirectBlock, address)?;
        s.free(SpaceKind::Raw, address, length)
    })
}
