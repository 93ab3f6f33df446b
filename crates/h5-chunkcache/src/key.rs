//! Chunk keys (SCC-010, OQ-26) and scaled coordinates (SCC-011).
//!
//! A key is the pair (dataset identity, scaled chunk coordinates). The coordinates are stored
//! inline, not linearised, so a key never depends on the dataset's current extent and never needs
//! re-hashing when the extent changes.

/// Largest dataset rank HDF5 allows.
pub const MAX_RANK: usize = 32;

/// Identity of a dataset within a file: its object-header address, unique among open datasets.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct DatasetId(pub u64);

/// Scaled chunk coordinates: element coordinates divided by the chunk dimensions.
///
/// Invariant: the coordinates past the rank are zero. [`Hash`] and equality look at the used
/// ones only (every lookup of the cache hashes and compares a key: going over all [`MAX_RANK`]
/// slots made hashing 10x slower for 2-D keys, and comparing 256 bytes was most of a hit).
#[derive(Clone, Copy, Eq, Debug)]
pub struct ChunkCoord {
    rank: u8,
    coords: [u64; MAX_RANK],
}

impl PartialEq for ChunkCoord {
    fn eq(&self, other: &Self) -> bool {
        self.rank == other.rank && self.as_slice() == other.as_slice()
    }
}

impl std::hash::Hash for ChunkCoord {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u8(self.rank);
        for &c in self.as_slice() {
            state.write_u64(c);
        }
    }
}

impl ChunkCoord {
    /// Coordinates from a slice of at most [`MAX_RANK`] values; `None` if the slice is longer.
    pub fn new(scaled: &[u64]) -> Option<Self> {
        if scaled.len() > MAX_RANK {
            return None;
        }
        let mut coords = [0u64; MAX_RANK];
        coords[..scaled.len()].copy_from_slice(scaled);
        Some(Self {
            rank: scaled.len() as u8,
            coords,
        })
    }

    /// The chunk holding element `element`, for chunk dimensions `chunk_dims` (same rank, no zero
    /// dimension); `None` if the ranks differ, a dimension is zero or the rank is too large.
    pub fn of_element(element: &[u64], chunk_dims: &[u64]) -> Option<Self> {
        if element.len() != chunk_dims.len() || chunk_dims.contains(&0) {
            return None;
        }
        let scaled: Vec<u64> = element.iter().zip(chunk_dims).map(|(e, c)| e / c).collect();
        Self::new(&scaled)
    }

    /// The scaled coordinates.
    pub fn as_slice(&self) -> &[u64] {
        &self.coords[..usize::from(self.rank)]
    }

    /// Rank.
    pub fn rank(&self) -> usize {
        usize::from(self.rank)
    }
}

/// Largest rank a [`CompactCoord`] keeps inline.
const COMPACT_RANK: usize = 4;

/// [`ChunkCoord`] in the room its rank needs, for what the cache keeps per entry: inline up to
/// rank 4 (nearly every dataset), boxed above. A `ChunkCoord` has room for rank 32 (264 bytes),
/// which was more than half of every cache entry (W4 keeps 10,000 entries of 4 KiB chunks).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) enum CompactCoord {
    /// Rank at most [`COMPACT_RANK`]. Invariant: coordinates past the rank are zero.
    Inline {
        /// Rank.
        rank: u8,
        /// The scaled coordinates, zero past the rank.
        coords: [u64; COMPACT_RANK],
    },
    /// A larger rank.
    Boxed(Box<ChunkCoord>),
}

impl From<&ChunkCoord> for CompactCoord {
    fn from(c: &ChunkCoord) -> Self {
        match c.coords.first_chunk::<COMPACT_RANK>() {
            Some(head) if c.rank() <= COMPACT_RANK => CompactCoord::Inline {
                rank: c.rank,
                coords: *head,
            },
            _ => CompactCoord::Boxed(Box::new(*c)),
        }
    }
}

impl CompactCoord {
    /// The full coordinates.
    pub(crate) fn get(&self) -> ChunkCoord {
        match self {
            CompactCoord::Inline { rank, coords } => {
                let mut full = [0u64; MAX_RANK];
                full[..COMPACT_RANK].copy_from_slice(coords);
                ChunkCoord {
                    rank: *rank,
                    coords: full,
                }
            }
            CompactCoord::Boxed(c) => **c,
        }
    }

    /// The scaled coordinates.
    pub(crate) fn as_slice(&self) -> &[u64] {
        match self {
            CompactCoord::Inline { rank, coords } => &coords[..usize::from(*rank)],
            CompactCoord::Boxed(c) => c.as_slice(),
        }
    }
}

/// The key of one cached chunk.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ChunkKey {
    /// The dataset.
    pub dataset: DatasetId,
    /// The chunk's scaled coordinates.
    pub coord: ChunkCoord,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// SCC-011: element (25,45) with chunk dims (10,20) is in chunk (2,2); a contiguous 100×100
    /// dataset (one chunk the size of the dataset) maps every element to (0,0).
    #[test]
    fn scc_011_scaled_coordinates() {
        let c = ChunkCoord::of_element(&[25, 45], &[10, 20]).unwrap();
        assert_eq!(c.as_slice(), &[2, 2]);
        assert_eq!(c.rank(), 2);
        for e in [[0u64, 0], [99, 99], [50, 7]] {
            let c = ChunkCoord::of_element(&e, &[100, 100]).unwrap();
            assert_eq!(c.as_slice(), &[0, 0]);
        }
        assert!(ChunkCoord::of_element(&[1, 2], &[1]).is_none());
        assert!(ChunkCoord::of_element(&[1], &[0]).is_none());
        assert!(ChunkCoord::new(&[0; MAX_RANK + 1]).is_none());
    }

    /// The compact form gives back the coordinates it was made from, at every rank, inline up
    /// to rank 4 and boxed above.
    #[test]
    fn compact_coordinates_round_trip() {
        for rank in 0..=MAX_RANK {
            let scaled: Vec<u64> = (0..rank as u64).map(|i| i * 7 + 1).collect();
            let c = ChunkCoord::new(&scaled).unwrap();
            let compact = CompactCoord::from(&c);
            assert_eq!(compact.get(), c, "rank {rank}");
            assert_eq!(compact.as_slice(), scaled.as_slice(), "rank {rank}");
            assert_eq!(
                matches!(compact, CompactCoord::Inline { .. }),
                rank <= COMPACT_RANK,
                "rank {rank}"
            );
        }
        assert!(std::mem::size_of::<CompactCoord>() <= 40);
    }

    proptest! {
        /// SCC-010: distinct (dataset, scaled coordinates) pairs never give equal keys.
        #[test]
        fn scc_010_keys_are_unique(
            a in (0u64..4, proptest::collection::vec(0u64..3, 1..4)),
            b in (0u64..4, proptest::collection::vec(0u64..3, 1..4)),
        ) {
            let ka = ChunkKey { dataset: DatasetId(a.0), coord: ChunkCoord::new(&a.1).unwrap() };
            let kb = ChunkKey { dataset: DatasetId(b.0), coord: ChunkCoord::new(&b.1).unwrap() };
            prop_assert_eq!(ka == kb, a == b);
        }
    }
}
