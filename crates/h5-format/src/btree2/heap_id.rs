//! The fractal heap ID a link record (v2 B-tree types 5 and 6) carries, held inline.
//!
//! The format fixes the ID's length per tree: the record size is the hash or creation order
//! plus the group heap's ID length (7 bytes in every file libhdf5 writes: its group heaps
//! address 32 bits). Records are created, copied in node splits and redistributions and decoded
//! by the thousand, so the ID lives in the record, not in an allocation of its own.

use std::fmt;
use std::ops::Deref;

/// A fractal heap ID of at most [`InlineHeapId::CAPACITY`] bytes, stored inline.
///
/// Invariant: the bytes past `len` are zero, so the derived equality compares IDs.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct InlineHeapId {
    len: u8,
    bytes: [u8; InlineHeapId::CAPACITY],
}

impl InlineHeapId {
    /// The longest ID held: room for the 7-byte IDs of libhdf5's group heaps and for heaps
    /// with wider offsets and lengths (a heap ID is a flag byte, an offset and a length).
    pub const CAPACITY: usize = 16;

    /// The ID `id`, or `None` when it is longer than [`InlineHeapId::CAPACITY`].
    pub fn new(id: &[u8]) -> Option<Self> {
        let mut bytes = [0u8; Self::CAPACITY];
        bytes.get_mut(..id.len())?.copy_from_slice(id);
        Some(Self {
            // At most CAPACITY (16): fits.
            len: u8::try_from(id.len()).ok()?,
            bytes,
        })
    }

    /// The ID's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // `len` is at most CAPACITY (checked by `new`).
        self.bytes.get(..usize::from(self.len)).unwrap_or(&[])
    }
}

impl Deref for InlineHeapId {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for InlineHeapId {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl fmt::Debug for InlineHeapId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_up_to_capacity_and_compares_by_bytes() {
        let id = InlineHeapId::new(&[1, 2, 3, 4, 5, 6, 7]).expect("7 bytes fit");
        assert_eq!(id.as_slice(), &[1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(id.len(), 7);
        assert_eq!(InlineHeapId::new(&[1, 2, 3, 4, 5, 6, 7]), Some(id));
        assert_ne!(InlineHeapId::new(&[1, 2, 3, 4, 5, 6]), Some(id));
        assert_ne!(InlineHeapId::new(&[1, 2, 3, 4, 5, 6, 7, 0]), Some(id));
        assert_eq!(InlineHeapId::new(&[9; 16]).map(|i| i.len()), Some(16));
        assert_eq!(InlineHeapId::new(&[9; 17]), None);
        assert_eq!(InlineHeapId::new(&[]).map(|i| i.is_empty()), Some(true));
        assert_eq!(format!("{id:?}"), "[1, 2, 3, 4, 5, 6, 7]");
    }
}
