//! Attributes of an object: attribute messages in its header (compact storage) and, in dense
//! storage, attribute messages in a fractal heap indexed by name in a v2 B-tree.

use h5_format::datatype::Datatype;
use h5_format::message::attribute::AttributeMessage;
use h5_format::message::dataspace::Dataspace;
use h5_format::message::{Message, decode_message, kind};

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::object::ObjectHeader;

/// One attribute, resolved: name, type, shape and raw value bytes (file representation).
#[derive(Clone, Debug)]
pub struct Attribute {
    /// Name.
    pub name: String,
    /// Element type.
    pub datatype: Datatype,
    /// Shape.
    pub dataspace: Dataspace,
    /// Raw elements.
    pub data: Vec<u8>,
    /// The relative address of the committed datatype the attribute's type refers to, if any.
    pub committed_type: Option<u64>,
}

/// The attribute message `m` with shared datatype and dataspace resolved and its data cut to size.
pub(crate) fn resolve(file: &FileShared, m: AttributeMessage) -> Result<Attribute> {
    use h5_format::message::attribute::MaybeShared;
    let (datatype, committed_type) = match m.datatype {
        MaybeShared::Inline(t) => (t, None),
        MaybeShared::Shared(s) => match shared(file, kind::DATATYPE, &s.bytes)? {
            (Message::Datatype(t), at) => (t, at),
            _ => return Err(Error::Unsupported("shared datatype not found".into())),
        },
    };
    let dataspace = match m.dataspace {
        MaybeShared::Inline(d) => d,
        MaybeShared::Shared(s) => match shared(file, kind::DATASPACE, &s.bytes)? {
            (Message::Dataspace(d), _) => d,
            _ => return Err(Error::Unsupported("shared dataspace not found".into())),
        },
    };
    let n = dataspace.num_elements().unwrap_or(0);
    let len = usize::try_from(n.saturating_mul(u64::from(datatype.size())))
        .map_err(|_| Error::Unsupported("attribute too large".into()))?;
    let mut data = m.data;
    if data.len() < len {
        return Err(Error::Format(h5_format::FormatError::Corrupted {
            structure: "attribute message",
            address: u64::MAX,
            reason: format!("{} bytes of data, {len} needed", data.len()),
        }));
    }
    data.truncate(len);
    Ok(Attribute {
        name: m.name,
        datatype,
        dataspace,
        data,
        committed_type,
    })
}

/// The message of type `k` a shared-message reference (as stored inside an attribute message)
/// stands for: in another object header (whose address comes with it) or in the shared object
/// header message heap.
fn shared(file: &FileShared, k: u16, bytes: &[u8]) -> Result<(Message, Option<u64>)> {
    let msg = decode_message(
        k,
        h5_format::object_header::msg_flags::SHARED,
        bytes,
        file.sizes,
        u64::MAX,
    )?;
    match msg {
        Message::Shared { reference, .. } => Ok((
            crate::object::resolve_shared(file, k, reference, 0)?,
            crate::object::committed_address(reference),
        )),
        other => Ok((other, None)),
    }
}

/// Every attribute of the object with header `oh`, in name order.
pub fn attributes(file: &FileShared, oh: &ObjectHeader) -> Result<Vec<Attribute>> {
    file.check_open()?;
    let fresh = crate::group::reloaded(file, oh)?;
    let oh = fresh.as_deref().unwrap_or(oh);
    let mut out = Vec::new();
    for m in oh.all(|m| match m {
        Message::Attribute(a) => Some(a.clone()),
        _ => None,
    }) {
        out.push(resolve(file, m)?);
    }
    if let Some(info) = oh.find(|m| match m {
        Message::AttributeInfo(i) => Some(*i),
        _ => None,
    }) {
        for body in crate::write::attrs::dense_bodies(file, &info)? {
            if let Message::Attribute(a) =
                decode_message(kind::ATTRIBUTE, 0, &body, file.sizes, oh.address)?
            {
                out.push(resolve(file, a)?);
            }
        }
    }
    out.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    Ok(out)
}
