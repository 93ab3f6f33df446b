//! The datatype message (type 0x0003): every datatype class of the format. (In progress: the
//! datatype work replaces this file; the decode signature is the contract.)

use crate::error::Result;
use crate::reader::Reader;

/// A decoded datatype.
#[derive(Clone, PartialEq, Debug)]
pub enum Datatype {
    /// Placeholder until the datatype decoder lands: the raw message bytes.
    Unparsed(Vec<u8>),
}

impl Datatype {
    /// Decodes a datatype description from `r` (consuming exactly its bytes).
    pub fn decode(r: &mut Reader<'_>) -> Result<Datatype> {
        Err(r.unsupported("datatype decoding is not built yet"))
    }
}
