//! The fill value messages (old type 0x0004 and new type 0x0005). (In progress: the datatype work
//! replaces this file; the decode signatures are the contract.)

use crate::error::Result;
use crate::reader::Reader;

/// A decoded fill value message.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FillValue {
    /// The fill value's bytes in the file datatype, if one is defined.
    pub value: Option<Vec<u8>>,
}

impl FillValue {
    /// Decodes the new fill value message (type 0x0005).
    pub fn decode(r: &mut Reader<'_>) -> Result<FillValue> {
        Err(r.unsupported("fill value decoding is not built yet"))
    }

    /// Decodes the old fill value message (type 0x0004).
    pub fn decode_old(r: &mut Reader<'_>) -> Result<FillValue> {
        Err(r.unsupported("fill value decoding is not built yet"))
    }
}
