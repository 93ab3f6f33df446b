//! The current description of every opened dataset, shared by its handles: one
//! [`DatasetSlot`] per dataset, found by object header address when a handle is opened and
//! then held by the handle, so that a call reaches the description (and what the write path
//! needs: the chunk-cache registration and the writable layout) without a lookup by address.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use h5_chunkcache::DatasetId;

use crate::dataset::DatasetInfo;
use crate::write::chunks::ChunkedWriteLayout;
use crate::write::vlen::has_vlen;

/// One opened dataset's state shared by all of its handles. Not aligned to a cache line: an
/// over-aligned type takes the allocator's aligned path (a slower allocation per opened
/// dataset, and the free pieces it splits off fragment the heap), which cost opens more than
/// the second cold line a call may touch here costs appends (measured: docs/benchmarks.md).
#[derive(Debug)]
pub struct DatasetSlot {
    state: Mutex<SlotState>,
    /// Set once the file forgets the slot (the dataset was deleted, or a VFD SWMR reader's new
    /// index may have changed every description): holders look the dataset up by address
    /// again. Never cleared.
    forgotten: AtomicBool,
    /// Whether the dataset's elements hold variable-length data (its datatype never changes;
    /// kept here so that a write need not reach the description's datatype, cold memory).
    vlen: AtomicBool,
}

#[derive(Debug)]
struct SlotState {
    /// The current description (its shape as last resized through any handle).
    info: Arc<DatasetInfo>,
    /// The chunk cache's registrations epoch when the last registration check was made (0:
    /// none; epochs start at 1), valid while the epoch is unchanged (see
    /// `h5_chunkcache::ChunkCache::registrations_epoch`), with what it found: `id` and `layout`.
    epoch: u64,
    /// The dataset's identity in the chunk cache.
    id: DatasetId,
    /// The writable chunked layout the write state holds for the dataset, if any (it is made
    /// together with the registration and replaced only after the dataset leaves the chunk
    /// cache, which changes the epoch).
    layout: Option<Arc<ChunkedWriteLayout>>,
}

/// A dataset found registered with the chunk cache.
#[derive(Debug, Clone)]
pub(crate) struct Registered {
    /// The chunk cache's registrations epoch when the check was made.
    pub(crate) epoch: u64,
    /// The dataset's identity in the chunk cache.
    pub(crate) id: DatasetId,
    /// The writable chunked layout the write state holds for the dataset, if any.
    pub(crate) layout: Option<Arc<ChunkedWriteLayout>>,
}

impl DatasetSlot {
    fn new(info: Arc<DatasetInfo>) -> Self {
        DatasetSlot {
            vlen: AtomicBool::new(has_vlen(&info.datatype)),
            state: Mutex::new(SlotState {
                info,
                epoch: NO_EPOCH,
                id: DatasetId(0),
                layout: None,
            }),
            forgotten: AtomicBool::new(false),
        }
    }

    fn state(&self) -> MutexGuard<'_, SlotState> {
        // The state is a plain value replaced whole: a panic while it was held left it whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current description.
    pub fn info(&self) -> Arc<DatasetInfo> {
        Arc::clone(&self.state().info)
    }

    /// Whether the file forgot this slot: its description may be out of date, and the dataset
    /// is to be looked up by address again ([`crate::file::FileShared::dataset_slot`]).
    pub fn is_forgotten(&self) -> bool {
        self.forgotten.load(Ordering::Acquire)
    }

    /// Whether the dataset's elements hold variable-length data.
    pub fn has_vlen(&self) -> bool {
        self.vlen.load(Ordering::Relaxed)
    }

    /// The registration remembered at chunk-cache epoch `epoch`, if any.
    pub(crate) fn registered_at(&self, epoch: u64) -> Option<Registered> {
        let s = self.state();
        (epoch != NO_EPOCH && s.epoch == epoch).then(|| Registered {
            epoch,
            id: s.id,
            layout: s.layout.clone(),
        })
    }

    /// The chunk-cache identity of the registration remembered at epoch `epoch`, if any.
    pub(crate) fn registered_id_at(&self, epoch: u64) -> Option<DatasetId> {
        let s = self.state();
        (epoch != NO_EPOCH && s.epoch == epoch).then_some(s.id)
    }

    /// Remembers a registration check's result.
    pub(crate) fn remember(&self, registered: Registered) {
        let mut s = self.state();
        s.epoch = registered.epoch;
        s.id = registered.id;
        s.layout = registered.layout;
    }

    /// Records `dims` as the current dimensions. The description is changed where it is when
    /// nothing else holds it (a resize then allocates nothing); otherwise a copy with the new
    /// dimensions replaces it, and holders keep the shape they read.
    fn set_dims(&self, dims: &[u64]) -> Arc<DatasetInfo> {
        let mut s = self.state();
        match Arc::get_mut(&mut s.info) {
            Some(d) => set_dims(d, dims),
            None => {
                let mut d = (*s.info).clone();
                set_dims(&mut d, dims);
                s.info = Arc::new(d);
            }
        }
        Arc::clone(&s.info)
    }

    /// Replaces the description (read again from the header); the registration is checked
    /// again at the next write.
    fn replace(&self, info: Arc<DatasetInfo>) {
        self.vlen.store(has_vlen(&info.datatype), Ordering::Relaxed);
        let mut s = self.state();
        s.info = info;
        s.epoch = NO_EPOCH;
        s.layout = None;
    }

    fn forget(&self) {
        self.forgotten.store(true, Ordering::Release);
    }
}

/// No registration check made (the chunk cache's epochs start at 1).
const NO_EPOCH: u64 = 0;

fn set_dims(d: &mut DatasetInfo, dims: &[u64]) {
    d.dataspace.dims.clear();
    d.dataspace.dims.extend_from_slice(dims);
}

/// The slot of every dataset of a file that a handle opened, by object header address. A
/// handle holds its slot, so a resize through one handle is seen by every other (the dataspace
/// message in the metadata cache is updated at the same time; opening a dataset decodes it
/// from there again).
///
/// Hashed with foldhash (randomly seeded, as SipHash's state is; a few instructions per
/// address instead of about a hundred), once or twice per opened handle.
#[derive(Debug, Default)]
pub struct Descriptions(Mutex<SlotMap>);

/// Slots by object header address.
type SlotMap = HashMap<u64, Arc<DatasetSlot>, foldhash::fast::RandomState>;

impl Descriptions {
    fn map(&self) -> MutexGuard<'_, SlotMap> {
        // Every change is one map operation: a panic while it was held left the map whole.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The description of the dataset at `address`, if recorded.
    pub fn get(&self, address: u64) -> Option<Arc<DatasetInfo>> {
        self.slot(address).map(|s| s.info())
    }

    /// The slot of the dataset at `address`, if recorded.
    pub fn slot(&self, address: u64) -> Option<Arc<DatasetSlot>> {
        self.map().get(&address).cloned()
    }

    /// Records `info` as the current description of its dataset (every holder of the
    /// dataset's slot sees it) and returns the slot.
    pub fn put(&self, info: DatasetInfo) -> Arc<DatasetSlot> {
        let info = Arc::new(info);
        let mut m = self.map();
        if let Some(s) = m.get(&info.address) {
            s.replace(info);
            return Arc::clone(s);
        }
        let s = Arc::new(DatasetSlot::new(info));
        m.insert(s.info().address, Arc::clone(&s));
        s
    }

    /// Records `dims` as the current dimensions of `info`'s dataset and returns its description.
    /// `slot` is the caller's slot of the dataset, used when the file has not forgotten it;
    /// otherwise the recorded slot is used, or one is recorded for `info`. The caller's `info`
    /// is dropped first so that it does not count as a holder of the description.
    pub fn resized(
        &self,
        slot: Option<&DatasetSlot>,
        info: Arc<DatasetInfo>,
        dims: &[u64],
    ) -> Arc<DatasetInfo> {
        if let Some(s) = slot.filter(|s| !s.is_forgotten()) {
            drop(info);
            return s.set_dims(dims);
        }
        let s = {
            let mut m = self.map();
            Arc::clone(
                m.entry(info.address)
                    .or_insert_with(|| Arc::new(DatasetSlot::new(Arc::clone(&info)))),
            )
        };
        drop(info);
        s.set_dims(dims)
    }

    /// Forgets every description (a VFD SWMR reader's new index may have changed any).
    pub fn clear(&self) {
        for (_, s) in self.map().drain() {
            s.forget();
        }
    }

    /// Forgets the dataset at `address` (deleted: its address may be reused).
    pub fn remove(&self, address: u64) {
        if let Some(s) = self.map().remove(&address) {
            s.forget();
        }
    }
}

#[cfg(test)]
mod tests {
    use h5_format::datatype::Datatype;
    use h5_format::message::dataspace::{Dataspace, DataspaceKind, UNLIMITED};
    use h5_format::message::layout::{Layout, LayoutClass};

    use super::*;

    /// A one-dimensional extensible int32 dataset's description at `address`.
    fn info(address: u64, len: u64) -> DatasetInfo {
        // Fixed-point, version 1, signed, 4 bytes, offset 0, precision 32.
        let int32 = [0x10, 0x08, 0, 0, 4, 0, 0, 0, 0, 0, 32, 0];
        let datatype = Datatype::decode(&mut h5_format::reader::Reader::new(&int32, "test", 0))
            .expect("an int32 datatype");
        DatasetInfo {
            address,
            dataspace: Dataspace {
                version: 2,
                kind: DataspaceKind::Simple,
                dims: vec![len],
                max_dims: Some(vec![UNLIMITED]),
                permutation: None,
            },
            datatype,
            layout: Layout {
                version: 3,
                class: LayoutClass::Contiguous {
                    address: h5_format::UNDEFINED_ADDRESS,
                    size: None,
                },
            },
            pipeline: None,
            fill: None,
            external: None,
        }
    }

    fn registered(epoch: u64) -> Registered {
        Registered {
            epoch,
            id: DatasetId(7),
            layout: None,
        }
    }

    /// Not over-aligned (the allocator's plain path), and with the `Arc`'s two counts no
    /// larger than a cache line.
    #[test]
    fn a_slot_is_small_and_not_over_aligned() {
        assert!(std::mem::align_of::<DatasetSlot>() <= 16);
        assert!(std::mem::size_of::<DatasetSlot>() + 16 <= 64);
        assert!(!Descriptions::default().put(info(1, 0)).has_vlen());
    }

    #[test]
    fn a_resize_through_the_slot_is_seen_by_every_holder_and_by_address() {
        let d = Descriptions::default();
        let slot = d.put(info(100, 0));
        let other = d.slot(100).expect("recorded");
        assert!(Arc::ptr_eq(&slot, &other), "one slot per dataset");
        let held = slot.info();
        let now = d.resized(Some(&slot), held, &[300]);
        assert_eq!(now.dims(), [300]);
        assert_eq!(other.info().dims(), [300]);
        assert_eq!(d.get(100).expect("recorded").dims(), [300]);
    }

    #[test]
    fn a_registration_is_remembered_for_its_epoch_only() {
        let d = Descriptions::default();
        let slot = d.put(info(100, 0));
        assert!(slot.registered_at(5).is_none());
        slot.remember(registered(5));
        assert_eq!(slot.registered_id_at(5), Some(DatasetId(7)));
        assert!(
            slot.registered_at(6).is_none(),
            "another epoch: checked again"
        );
        assert!(slot.registered_id_at(4).is_none());
        // A description read again from the header drops what was remembered.
        d.put(info(100, 10));
        assert!(slot.registered_at(5).is_none());
        assert_eq!(
            slot.info().dims(),
            [10],
            "the holder sees the new description"
        );
    }

    #[test]
    fn a_forgotten_slot_is_detected_and_not_resized() {
        let d = Descriptions::default();
        let slot = d.put(info(100, 0));
        let kept = d.put(info(200, 0));
        d.remove(100);
        assert!(slot.is_forgotten());
        assert!(!kept.is_forgotten());
        assert!(d.get(100).is_none());
        // A resize through a forgotten slot records the caller's description anew.
        let now = d.resized(Some(&slot), Arc::new(info(100, 4)), &[8]);
        assert_eq!(now.dims(), [8]);
        assert_eq!(slot.info().dims(), [0], "the forgotten slot is left alone");
        let fresh = d.slot(100).expect("recorded again");
        assert!(!Arc::ptr_eq(&fresh, &slot));
        d.clear();
        assert!(kept.is_forgotten() && fresh.is_forgotten());
        assert!(d.get(200).is_none());
    }
}
