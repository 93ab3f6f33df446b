//! The dataspace message (type 0x0001). (In progress: the datatype work replaces this file; the
//! decode signature is the contract.)

use crate::error::Result;
use crate::reader::{Reader, Sizes};

/// A decoded dataspace.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Dataspace {
    /// Current dimensions (empty for a scalar).
    pub dims: Vec<u64>,
}

impl Dataspace {
    /// Decodes a dataspace message body from `r`.
    pub fn decode(r: &mut Reader<'_>, sizes: Sizes) -> Result<Dataspace> {
        let _ = sizes;
        Err(r.unsupported("dataspace decoding is not built yet"))
    }
}
