//! Writing global heap collections: where variable-length data (strings, sequences) lives.
//!
//! Every collection is a metadata-cache entry whose value is the [`GlobalHeapCollection`]
//! itself; inserting or freeing an object protects the collection read-write, changes it and
//! releases it dirtied (readers in this process find objects through the cache exactly as in a
//! file opened for reading, and the cache writes the collection at flush).
//!
//! Policy (libhdf5's, `H5HG.c`):
//! - a new object goes to the first collection with room for it on the file's list of
//!   collections with free space (at most `MAX_FREE_LIST`, libhdf5's CWFS list), which moves
//!   one place forward; else to a new collection of [`MIN_COLLECTION_SIZE`] (4096) bytes, or
//!   what the object needs when that is more, put at the front of the list (libhdf5 may also
//!   extend a listed collection in place; h5 does not);
//! - an object's index is one more than the collection's highest (the lowest free one once
//!   65535 is taken); reference counts are 0, as libhdf5 writes for variable-length data;
//! - freeing an object compacts its collection: the objects after it move down and the free
//!   space (object 0) grows at the end, as libhdf5 removes objects; a collection left empty is
//!   removed from the cache and its space given back to the allocator. A collection freed from
//!   joins the list (or moves one place forward on it).
//!
//! The list is a hint kept between calls: a listed collection's free space is checked under
//! its protection before an object goes in.

use std::collections::BTreeMap;

use h5_format::heap::global::{
    GlobalHeapCollection, GlobalHeapId, GlobalHeapObject, MIN_COLLECTION_SIZE,
};
use h5_metacache::MetadataKind as K;

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::meta::{Decoded, EncodeFn, Load, encoder};
use crate::write::alloc::SpaceKind;

/// Most collections on the free-space list (libhdf5's `H5HG_NCWFS`).
pub(crate) const MAX_FREE_LIST: usize = 16;

/// The per-file state kept between writes: collections with free space, most useful first
/// (relative address, free bytes when last seen).
#[derive(Debug, Default)]
pub(crate) struct HeapState {
    pub(crate) free_list: Vec<(u64, u64)>,
}

/// Bytes of a collection's header (signature, version, reserved, size).
fn collection_header_len(length_size: u8) -> u64 {
    8 + u64::from(length_size)
}

/// Bytes an object takes in a collection: its header and its data padded to 8 bytes.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "a 1-byte length size and the length of a buffer in memory (below 2^63): the sum fits in u64"
)]
fn object_len(length_size: u8, data: usize) -> u64 {
    8 + u64::from(length_size) + (data as u64).div_ceil(8) * 8
}

/// How the collection at relative `addr` is loaded (its size learnt from its header).
pub(crate) fn collection_load(sizes: h5_format::Sizes, addr: u64) -> Load {
    Load::sized(
        MIN_COLLECTION_SIZE as usize,
        move |b| GlobalHeapCollection::needed_len(b, sizes, addr),
        move |b| GlobalHeapCollection::decode(b, sizes, addr),
    )
}

fn collection_encoder(sizes: h5_format::Sizes) -> EncodeFn {
    encoder(move |c: &GlobalHeapCollection| c.encode(sizes))
}

/// The index a new object of `col` gets: one more than the highest, else the lowest free one.
fn next_index(col: &GlobalHeapCollection) -> Option<u16> {
    let highest = col.objects.iter().map(|o| o.index).max().unwrap_or(0);
    if let Some(next) = highest.checked_add(1) {
        return Some(next);
    }
    let used: std::collections::HashSet<u16> = col.objects.iter().map(|o| o.index).collect();
    (1..u16::MAX).find(|i| !used.contains(i))
}

/// Puts objects into global heap collections of one writable file. Get one with
/// [`FileShared::global_heap`], insert, then [`GlobalHeapWriter::finish`].
#[derive(Debug)]
pub struct GlobalHeapWriter<'a> {
    file: &'a FileShared,
}

impl FileShared {
    /// A writer of global heap objects (variable-length data) for this writable file. Not
    /// under VFD SWMR, whose page buffer cannot publish global heaps (the seed's §1.3).
    pub fn global_heap(&self) -> Result<GlobalHeapWriter<'_>> {
        if self.is_swmr() {
            return Err(Error::Unsupported(
                "variable-length data unsupported under VFD SWMR".into(),
            ));
        }
        drop(self.state()?);
        Ok(GlobalHeapWriter { file: self })
    }
}

impl GlobalHeapWriter<'_> {
    /// Stores `data` as a new object and returns its heap ID (the collection's relative address
    /// and the object's index).
    pub fn insert(&mut self, data: &[u8]) -> Result<GlobalHeapId> {
        self.file.heap_insert(data)
    }

    /// Ends the writer (every object is in the metadata cache already).
    pub fn finish(self) -> Result<()> {
        Ok(())
    }
}

impl FileShared {
    /// Stores `data` as a new global heap object (see the module doc for where).
    pub(crate) fn heap_insert(&self, data: &[u8]) -> Result<GlobalHeapId> {
        let sizes = self.sizes;
        let need = object_len(sizes.length, data.len());
        let listed: Vec<u64> = self
            .state()?
            .heap
            .free_list
            .iter()
            .filter(|(_, free)| *free >= need)
            .map(|(a, _)| *a)
            .collect();
        for addr in listed {
            let mut txn = self.cache()?;
            let (slot, col) = txn.protect::<GlobalHeapCollection>(
                K::GlobalHeapCollection,
                addr,
                &collection_load(sizes, addr),
            )?;
            let index = next_index(&col).filter(|_| col.free_space >= need);
            let Some(index) = index else {
                txn.finish()?;
                self.note_free(addr, Some(col.free_space), false)?;
                continue;
            };
            let (free, _) = txn.change(
                slot,
                &collection_encoder(sizes),
                |c: &mut GlobalHeapCollection| {
                    c.objects.push(GlobalHeapObject {
                        index,
                        reference_count: 0,
                        data: data.to_vec(),
                    });
                    #[allow(
                        clippy::arithmetic_side_effects,
                        reason = "free_space >= need, checked on this protected collection above"
                    )]
                    {
                        c.free_space -= need;
                    }
                    c.free_space
                },
            )?;
            txn.finish()?;
            self.note_free(addr, Some(free), true)?;
            return Ok(GlobalHeapId {
                collection_address: addr,
                index: u32::from(index),
            });
        }
        // A new collection, at the front of the list.
        let used = collection_header_len(sizes.length)
            .checked_add(need)
            .ok_or_else(|| Error::Invalid("global heap collection too large".into()))?;
        let size = used.max(MIN_COLLECTION_SIZE);
        let len = usize::try_from(size)
            .map_err(|_| Error::Invalid("global heap collection too large".into()))?;
        let addr = self.allocate(SpaceKind::Raw, size)?;
        #[allow(clippy::arithmetic_side_effects, reason = "size >= used (max above)")]
        let free_space = size - used;
        let col = GlobalHeapCollection {
            collection_size: size,
            objects: vec![GlobalHeapObject {
                index: 1,
                reference_count: 0,
                data: data.to_vec(),
            }],
            free_space,
        };
        let free = col.free_space;
        let mut txn = self.cache()?;
        txn.put(
            K::GlobalHeapCollection,
            addr,
            Decoded {
                len,
                value: std::sync::Arc::new(col),
                encode: Some(collection_encoder(sizes)),
            },
        )?;
        txn.finish()?;
        {
            let mut w = self.state()?;
            let list = &mut w.heap.free_list;
            if free >= object_len(sizes.length, 0) {
                list.insert(0, (addr, free));
                list.truncate(MAX_FREE_LIST);
            }
        }
        Ok(GlobalHeapId {
            collection_address: addr,
            index: 1,
        })
    }

    /// Records that the collection at `addr` has `free` bytes (`None`: it is gone): listed,
    /// moved one place forward when `used` (an object went in or was freed), dropped when it
    /// is full or gone; a collection not listed joins at the end (replacing the last entry of
    /// a full list).
    fn note_free(&self, addr: u64, free: Option<u64>, used: bool) -> Result<()> {
        let min = object_len(self.sizes.length, 0);
        let mut w = self.state()?;
        let list = &mut w.heap.free_list;
        let at = list.iter().position(|(a, _)| *a == addr);
        match (at, free) {
            (Some(i), Some(f)) if f >= min => {
                if let Some(entry) = list.get_mut(i) {
                    entry.1 = f;
                }
                if used && let Some(before) = i.checked_sub(1) {
                    list.swap(i, before);
                }
            }
            (Some(i), _) => {
                list.remove(i);
            }
            (None, Some(f)) if f >= min && used => {
                if list.len() == MAX_FREE_LIST {
                    list.pop();
                }
                list.push((addr, f));
            }
            (None, _) => {}
        }
        Ok(())
    }

    /// Frees the global heap objects `ids` (null IDs and objects already gone are skipped):
    /// each collection is compacted, and one left empty is deleted and its space freed.
    pub(crate) fn free_heap_objects(&self, ids: &[GlobalHeapId]) -> Result<()> {
        let sizes = self.sizes;
        let mut by_collection: BTreeMap<u64, Vec<u16>> = BTreeMap::new();
        for id in ids {
            if is_null(id) {
                continue;
            }
            let index = u16::try_from(id.index)
                .map_err(|_| Error::Invalid(format!("global heap object index {}", id.index)))?;
            by_collection
                .entry(id.collection_address)
                .or_default()
                .push(index);
        }
        for (addr, indices) in by_collection {
            let mut txn = self.cache()?;
            let (slot, col) = txn.protect::<GlobalHeapCollection>(
                K::GlobalHeapCollection,
                addr,
                &collection_load(sizes, addr),
            )?;
            if !col.objects.iter().any(|o| indices.contains(&o.index)) {
                txn.finish()?;
                continue;
            }
            let ((empty, free, size), _) = txn.change(
                slot,
                &collection_encoder(sizes),
                |c: &mut GlobalHeapCollection| {
                    let mut freed = 0u64;
                    #[allow(
                        clippy::arithmetic_side_effects,
                        reason = "the objects and the free space lie in the collection, loaded in memory: their sum is at most its size"
                    )]
                    {
                        c.objects.retain(|o| {
                            let gone = indices.contains(&o.index);
                            if gone {
                                freed += object_len(sizes.length, o.data.len());
                            }
                            !gone
                        });
                        c.free_space += freed;
                    }
                    (c.objects.is_empty(), c.free_space, c.collection_size)
                },
            )?;
            if empty {
                txn.release(slot)?;
                txn.forget(K::GlobalHeapCollection, addr)?;
                txn.finish()?;
                self.free(SpaceKind::Raw, addr, size)?;
                self.note_free(addr, None, false)?;
            } else {
                txn.finish()?;
                self.note_free(addr, Some(free), true)?;
            }
        }
        Ok(())
    }
}

/// Whether `id` names no object (an empty sequence, or an undefined address).
fn is_null(id: &GlobalHeapId) -> bool {
    id.collection_address == h5_format::UNDEFINED_ADDRESS
        || (id.collection_address == 0 && id.index == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_sizes() {
        assert_eq!(object_len(8, 0), 16);
        assert_eq!(object_len(8, 1), 24);
        assert_eq!(object_len(8, 8), 24);
        assert_eq!(object_len(8, 9), 32);
        assert_eq!(collection_header_len(8), 16);
    }

    fn new_file(storage: &std::sync::Arc<h5_io::MemoryStorage>) -> std::sync::Arc<FileShared> {
        FileShared::create(
            std::sync::Arc::clone(storage) as std::sync::Arc<dyn h5_io::Storage>,
            &crate::file::CacheSettings::default(),
            &crate::write::CreateOptions::default(),
            None,
        )
        .unwrap()
    }

    fn reopen(storage: &std::sync::Arc<h5_io::MemoryStorage>) -> std::sync::Arc<FileShared> {
        FileShared::open(
            std::sync::Arc::clone(storage) as std::sync::Arc<dyn h5_io::Storage>,
            &crate::file::CacheSettings::default(),
            None,
        )
        .unwrap()
    }

    /// Objects fill a 4096-byte collection, then go to a new one; a large object gets a
    /// collection of its own size; all read back in process and after reopening.
    #[test]
    fn objects_fill_collections_and_read_back() {
        let storage = std::sync::Arc::new(h5_io::MemoryStorage::new());
        let file = new_file(&storage);
        let mut w = file.global_heap().unwrap();
        let objects: Vec<Vec<u8>> = (0..300u32)
            .map(|i| (0..(i % 40) as u8).map(|b| b ^ (i as u8)).collect())
            .collect();
        let mut ids: Vec<GlobalHeapId> = objects.iter().map(|o| w.insert(o).unwrap()).collect();
        let big = vec![7u8; 10_000];
        ids.push(w.insert(&big).unwrap());
        w.finish().unwrap();
        let mut w = file.global_heap().unwrap();
        let small = w.insert(b"later").unwrap();
        w.finish().unwrap();
        let mut collections: Vec<u64> = ids.iter().map(|i| i.collection_address).collect();
        collections.dedup();
        assert!(collections.len() >= 3, "{collections:?}");
        assert_eq!(ids[0].index, 1);
        assert_eq!(ids[1].index, 2);
        let check = |file: &FileShared| {
            for (id, o) in ids.iter().zip(objects.iter().chain([&big])) {
                assert_eq!(&crate::walk::global_object(file, *id).unwrap(), o);
            }
            assert_eq!(crate::walk::global_object(file, small).unwrap(), b"later");
        };
        check(&file);
        file.flush().unwrap();
        drop(file);
        let reopened = reopen(&storage);
        check(&reopened);
        let c = crate::walk::global_object(&reopened, ids[300]).unwrap();
        assert_eq!(c.len(), 10_000);
    }

    /// Freed space is reused: objects freed and inserted again, many times over, stay in the
    /// first collection; the others' objects are intact; a collection emptied is freed.
    #[test]
    fn freed_objects_make_room_for_new_ones() {
        let storage = std::sync::Arc::new(h5_io::MemoryStorage::new());
        let file = new_file(&storage);
        let keep = file.heap_insert(b"kept across all rounds").unwrap();
        let mut live: Vec<(GlobalHeapId, Vec<u8>)> = Vec::new();
        for round in 0..200u32 {
            let old: Vec<GlobalHeapId> = live.iter().map(|(id, _)| *id).collect();
            file.free_heap_objects(&old).unwrap();
            live = (0..5u32)
                .map(|j| {
                    let data = format!("round {round} object {j}").into_bytes();
                    (file.heap_insert(&data).unwrap(), data)
                })
                .collect();
            for (id, data) in &live {
                assert_eq!(
                    id.collection_address, keep.collection_address,
                    "round {round}"
                );
                assert_eq!(&crate::walk::global_object(&file, *id).unwrap(), data);
            }
        }
        assert_eq!(
            crate::walk::global_object(&file, keep).unwrap(),
            b"kept across all rounds"
        );
        // A big object gets its own collection; freeing it frees the collection.
        let big = file.heap_insert(&[3u8; 9000]).unwrap();
        assert_ne!(big.collection_address, keep.collection_address);
        // Space given back: free in the allocator, or cut off the end of allocation.
        let given_back = || {
            let a = file.alloc.as_ref().unwrap().lock().unwrap();
            a.free_bytes() as i64 - a.eoa() as i64
        };
        let before = given_back();
        file.free_heap_objects(&[big]).unwrap();
        let after = given_back();
        assert!(after - before >= 9000, "{before} → {after}");
        assert!(crate::walk::global_object(&file, big).is_err());
        file.flush().unwrap();
        drop(file);
        let reopened = reopen(&storage);
        for (id, data) in &live {
            assert_eq!(&crate::walk::global_object(&reopened, *id).unwrap(), data);
        }
    }

    #[test]
    fn read_only_files_have_no_heap_writer() {
        let storage = std::sync::Arc::new(h5_io::MemoryStorage::new());
        new_file(&storage).flush().unwrap();
        let f = reopen(&storage);
        assert!(matches!(f.global_heap(), Err(Error::ReadOnly)));
    }
}
