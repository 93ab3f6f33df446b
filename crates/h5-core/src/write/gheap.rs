//! Writing global heap collections: where variable-length data (strings, sequences) lives.
//!
//! Every collection written is a metadata-cache entry whose value is the
//! [`GlobalHeapCollection`] itself with its encoder ([`Decoded::writable`]), so readers in this
//! process find new objects through the cache exactly as they find objects of a file opened for
//! reading, and the cache writes the collection at flush.
//!
//! Policy (libhdf5's sizes, simpler placement):
//! - a new collection is [`MIN_COLLECTION_SIZE`] (4096) bytes, or exactly what its first
//!   object needs when that is more;
//! - objects are appended to the file's *open* collection while they fit; an object that does
//!   not fit closes it (it is never appended to again) and starts a new one;
//! - objects get increasing indices from 1 (zero-length objects too, as libhdf5 stores empty
//!   strings) with reference count 0, as libhdf5 writes for variable-length data.
//!
//! Freed or overwritten objects are **leaked**: rewriting a variable-length element or replacing
//! an attribute leaves its old object in its collection (readers never see it; the space is
//! not reused). Writers that run concurrently each get their own open collection (the one
//! handed back last stays open), so they never share a collection being filled.

use h5_format::heap::global::{
    GlobalHeapCollection, GlobalHeapId, GlobalHeapObject, MIN_COLLECTION_SIZE,
};
use h5_metacache::MetadataKind;

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::meta::Decoded;
use crate::write::alloc::SpaceKind;
use crate::write::put;

/// The collection being filled. Invariant: `col` is the value cached at `addr` once
/// `dirty` is false; `col.free_space` is what is left for new objects.
#[derive(Debug)]
pub(crate) struct OpenCollection {
    addr: u64,
    col: GlobalHeapCollection,
    next_index: u16,
    dirty: bool,
}

/// The per-file state kept between writes: the open collection, if any.
#[derive(Debug, Default)]
pub(crate) struct HeapState {
    pub(crate) open: Option<OpenCollection>,
}

/// Bytes of a collection's header (signature, version, reserved, size).
fn collection_header_len(length_size: u8) -> u64 {
    8 + u64::from(length_size)
}

/// Bytes an object takes in a collection: its header and its data padded to 8 bytes.
fn object_len(length_size: u8, data: usize) -> u64 {
    8 + u64::from(length_size) + (data as u64).div_ceil(8) * 8
}

/// Puts objects into global heap collections of one writable file. Get one with
/// [`FileShared::global_heap`], insert, then [`GlobalHeapWriter::finish`] (dropping it finishes
/// too but loses errors).
#[derive(Debug)]
pub struct GlobalHeapWriter<'a> {
    file: &'a FileShared,
    open: Option<OpenCollection>,
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
        let open = self.state()?.heap.open.take();
        Ok(GlobalHeapWriter { file: self, open })
    }
}

impl GlobalHeapWriter<'_> {
    /// Stores `data` as a new object and returns its heap ID (the collection's relative address
    /// and the object's index).
    pub fn insert(&mut self, data: &[u8]) -> Result<GlobalHeapId> {
        let length = self.file.sizes.length;
        let need = object_len(length, data.len());
        let fits = self
            .open
            .as_ref()
            .is_some_and(|o| o.col.free_space >= need && o.next_index < u16::MAX);
        if !fits {
            self.commit()?;
            let size = (collection_header_len(length) + need).max(MIN_COLLECTION_SIZE);
            let addr = self.file.allocate(SpaceKind::Raw, size)?;
            self.open = Some(OpenCollection {
                addr,
                col: GlobalHeapCollection {
                    collection_size: size,
                    objects: Vec::new(),
                    free_space: size - collection_header_len(length),
                },
                next_index: 1,
                dirty: true,
            });
        }
        let o = self
            .open
            .as_mut()
            .ok_or_else(|| Error::Unsupported("no open global heap collection".into()))?;
        let index = o.next_index;
        o.next_index += 1;
        o.col.objects.push(GlobalHeapObject {
            index,
            reference_count: 0,
            data: data.to_vec(),
        });
        o.col.free_space -= need;
        o.dirty = true;
        Ok(GlobalHeapId {
            collection_address: o.addr,
            index: u32::from(index),
        })
    }

    /// Puts the open collection's current value into the metadata cache (inserted or
    /// replaced, marked dirty).
    fn commit(&mut self) -> Result<()> {
        let Some(o) = self.open.as_mut() else {
            return Ok(());
        };
        if o.dirty {
            let sizes = self.file.sizes;
            let len = usize::try_from(o.col.collection_size)
                .map_err(|_| Error::Invalid("global heap collection too large".into()))?;
            let entry = Decoded::writable(len, o.col.clone(), move |c: &GlobalHeapCollection| {
                c.encode(sizes)
            });
            put(self.file, MetadataKind::GlobalHeapCollection, o.addr, entry)?;
            o.dirty = false;
        }
        // A full collection is closed for good.
        if o.col.free_space < object_len(self.file.sizes.length, 0) {
            self.open = None;
        }
        Ok(())
    }

    /// Writes what was inserted into the metadata cache and keeps the open collection for the
    /// next writer.
    pub fn finish(mut self) -> Result<()> {
        self.commit()?;
        if let Some(o) = self.open.take() {
            self.file.state()?.heap.open = Some(o);
        }
        Ok(())
    }
}

impl Drop for GlobalHeapWriter<'_> {
    fn drop(&mut self) {
        if self.open.is_some() {
            // Errors are lost here; `finish` reports them.
            let _ = self.commit();
            if let (Some(o), Ok(mut w)) = (self.open.take(), self.file.state()) {
                w.heap.open = Some(o);
            }
        }
    }
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
        // Later writers continue the open collection.
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
        let reopened = FileShared::open(
            std::sync::Arc::clone(&storage) as std::sync::Arc<dyn h5_io::Storage>,
            &crate::file::CacheSettings::default(),
            None,
        )
        .unwrap();
        check(&reopened);
        let c = crate::walk::global_object(&reopened, ids[300]).unwrap();
        assert_eq!(c.len(), 10_000);
    }

    #[test]
    fn read_only_files_have_no_heap_writer() {
        let storage = std::sync::Arc::new(h5_io::MemoryStorage::new());
        new_file(&storage).flush().unwrap();
        let f = FileShared::open(
            std::sync::Arc::clone(&storage) as std::sync::Arc<dyn h5_io::Storage>,
            &crate::file::CacheSettings::default(),
            None,
        )
        .unwrap();
        assert!(matches!(f.global_heap(), Err(Error::ReadOnly)));
    }
}
