//! The attribute message (type 0x000C). (In progress: the datatype work replaces this file; the
//! decode signature is the contract.)

use crate::error::Result;
use crate::reader::{Reader, Sizes};

/// A decoded attribute message.
#[derive(Clone, PartialEq, Debug)]
pub struct AttributeMessage {
    /// The attribute's name.
    pub name: String,
}

impl AttributeMessage {
    /// Decodes an attribute message body from `r`.
    pub fn decode(r: &mut Reader<'_>, sizes: Sizes) -> Result<AttributeMessage> {
        let _ = sizes;
        Err(r.unsupported("attribute decoding is not built yet"))
    }
}
