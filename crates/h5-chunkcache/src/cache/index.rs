//! The cache's index from chunk keys to entries. A [`ChunkKey`] holds room for every rank HDF5
//! allows (272 bytes); keys of rank [`INLINE_RANK`] or less, nearly all of them, are stored in a
//! compact form of 48 bytes instead, so that a lookup among thousands of entries touches one
//! cache line of the table rather than five.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use super::KeyHasherBuilder;
use crate::policy::EntryId;
use crate::{ChunkKey, DatasetId};

/// Largest rank kept in the compact form.
const INLINE_RANK: usize = 4;

/// A key of rank [`INLINE_RANK`] or less. Invariant: coordinates past the rank are zero.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct SmallKey {
    dataset: DatasetId,
    rank: u8,
    coords: [u64; INLINE_RANK],
}

impl SmallKey {
    /// The compact form of `key`, if its rank allows it.
    fn of(key: &ChunkKey) -> Option<Self> {
        let used = key.coord.as_slice();
        if used.len() > INLINE_RANK {
            return None;
        }
        let mut coords = [0u64; INLINE_RANK];
        coords[..used.len()].copy_from_slice(used);
        Some(Self {
            dataset: key.dataset,
            rank: used.len() as u8,
            coords,
        })
    }
}

impl Hash for SmallKey {
    // The same words a `ChunkKey` hashes (dataset, rank, used coordinates), one at a time.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.dataset.hash(state);
        state.write_u8(self.rank);
        for &c in &self.coords[..usize::from(self.rank)] {
            state.write_u64(c);
        }
    }
}

/// Chunk key → entry, for keys of any rank.
pub(super) struct KeyIndex {
    small: HashMap<SmallKey, EntryId, KeyHasherBuilder>,
    large: HashMap<ChunkKey, EntryId, KeyHasherBuilder>,
}

impl KeyIndex {
    /// An empty index hashing with `hasher`.
    pub(super) fn new(hasher: KeyHasherBuilder) -> Self {
        Self {
            small: HashMap::with_hasher(hasher),
            large: HashMap::with_hasher(hasher),
        }
    }

    /// The entry of `key`.
    pub(super) fn get(&self, key: &ChunkKey) -> Option<EntryId> {
        match SmallKey::of(key) {
            Some(k) => self.small.get(&k).copied(),
            None => self.large.get(key).copied(),
        }
    }

    /// Records `id` as the entry of `key` (replacing any other).
    pub(super) fn insert(&mut self, key: ChunkKey, id: EntryId) {
        match SmallKey::of(&key) {
            Some(k) => self.small.insert(k, id),
            None => self.large.insert(key, id),
        };
    }

    /// Forgets `key`.
    pub(super) fn remove(&mut self, key: &ChunkKey) {
        match SmallKey::of(key) {
            Some(k) => self.small.remove(&k),
            None => self.large.remove(key),
        };
    }

    /// Keys recorded.
    pub(super) fn len(&self) -> usize {
        self.small.len() + self.large.len()
    }

    /// Keys the index can hold without growing.
    pub(super) fn capacity(&self) -> usize {
        self.small.capacity() + self.large.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChunkCoord;
    use crate::cache::KeyHashing;

    fn key(ds: u64, c: &[u64]) -> ChunkKey {
        ChunkKey {
            dataset: DatasetId(ds),
            coord: ChunkCoord::new(c).unwrap(),
        }
    }

    #[test]
    fn keys_of_every_rank_are_found_and_kept_apart() {
        for hashing in [KeyHashing::Fast, KeyHashing::SingleBucket] {
            let mut ix = KeyIndex::new(KeyHasherBuilder(hashing));
            let keys = [
                key(1, &[]),
                key(1, &[0]),
                key(1, &[0, 0]),
                key(1, &[3, 4, 5, 6]),
                key(2, &[3, 4, 5, 6]),
                key(1, &[3, 4, 5, 6, 0]),
                key(1, &[1; 32]),
            ];
            for (i, k) in keys.iter().enumerate() {
                ix.insert(*k, EntryId(i as u32));
            }
            assert_eq!(ix.len(), keys.len());
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(ix.get(k), Some(EntryId(i as u32)), "{k:?}");
            }
            assert_eq!(ix.get(&key(1, &[3, 4, 5, 7])), None);
            assert_eq!(ix.get(&key(1, &[1; 31])), None);
            ix.remove(&keys[3]);
            ix.remove(&keys[6]);
            assert_eq!(ix.get(&keys[3]), None);
            assert_eq!(ix.get(&keys[6]), None);
            assert_eq!(ix.get(&keys[4]), Some(EntryId(4)));
            assert_eq!(ix.get(&keys[5]), Some(EntryId(5)));
            assert_eq!(ix.len(), keys.len() - 2);
            assert!(ix.capacity() >= ix.len());
        }
    }
}
