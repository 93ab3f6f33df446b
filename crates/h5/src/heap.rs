//! Variable-length data stored in a file's global heap, for readers that walk elements' bytes
//! themselves (such as `h5 dump`, which prints vlen data nested in compounds, arrays and other
//! sequences).

use std::sync::Arc;

use h5_core::file::FileShared;

use crate::Result;

/// Access to the global heap of the file a dataset or attribute belongs to
/// ([`crate::Dataset::global_heap`], [`crate::Attribute::global_heap`]).
#[derive(Clone)]
pub struct GlobalHeap {
    file: Arc<FileShared>,
}

impl std::fmt::Debug for GlobalHeap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GlobalHeap")
    }
}

impl GlobalHeap {
    pub(crate) fn new(file: &Arc<FileShared>) -> Self {
        Self {
            file: Arc::clone(file),
        }
    }

    /// What the variable-length element `element` (its stored bytes: a 4-byte length and a
    /// global heap ID) refers to: the length (elements of a sequence, bytes of a string) and
    /// the heap object's bytes; `None` for a null element. Corrupt IDs and missing objects are
    /// errors.
    pub fn element(&self, element: &[u8]) -> Result<Option<(u32, Vec<u8>)>> {
        h5_core::values::vlen_element(&self.file, element)
    }

    /// What the reference element `element` (its stored bytes, of reference type `rt`) refers
    /// to, reading its global heap object when it has one; `None` for a null reference.
    pub fn reference(
        &self,
        rt: &h5_format::datatype::ReferenceType,
        element: &[u8],
    ) -> Result<Option<crate::Reference>> {
        h5_core::references::decode(&self.file, rt, element)
    }
}
