//! Attributes of an object: attribute messages in its header (compact storage) and, in dense
//! storage, attribute messages in a fractal heap indexed by name in a v2 B-tree.

use h5_format::btree2::Record;
use h5_format::datatype::Datatype;
use h5_format::message::attribute::AttributeMessage;
use h5_format::message::dataspace::Dataspace;
use h5_format::message::shared::SharedRef;
use h5_format::message::{Message, decode_message, kind};

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::object::ObjectHeader;
use crate::walk;

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
}

fn resolve(file: &FileShared, m: AttributeMessage) -> Result<Attribute> {
    let datatype = match m.datatype {
        h5_format::message::attribute::MaybeShared::Inline(t) => t,
        h5_format::message::attribute::MaybeShared::Shared(s) => shared_datatype(file, &s.bytes)?,
    };
    let dataspace = match m.dataspace {
        h5_format::message::attribute::MaybeShared::Inline(d) => d,
        h5_format::message::attribute::MaybeShared::Shared(_) => {
            return Err(Error::Unsupported(format!(
                "attribute {:?}: shared dataspace",
                m.name
            )));
        }
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
    })
}

/// The datatype a shared-message reference (as stored in an attribute) points to.
fn shared_datatype(file: &FileShared, bytes: &[u8]) -> Result<Datatype> {
    let msg = decode_message(
        kind::DATATYPE,
        h5_format::object_header::msg_flags::SHARED,
        bytes,
        file.sizes,
        u64::MAX,
    )?;
    match msg {
        Message::Shared {
            reference: SharedRef::ObjectHeader(addr),
            ..
        } => {
            let oh = ObjectHeader::load(file, addr)?;
            oh.find(|m| match m {
                Message::Datatype(t) => Some(t.clone()),
                _ => None,
            })
            .ok_or_else(|| Error::Unsupported("shared datatype without a datatype".into()))
        }
        _ => Err(Error::Unsupported(
            "datatypes in the shared object header message heap".into(),
        )),
    }
}

/// Every attribute of the object with header `oh`, in name order.
pub fn attributes(file: &FileShared, oh: &ObjectHeader) -> Result<Vec<Attribute>> {
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
    }) && info.fractal_heap_address != h5_format::UNDEFINED_ADDRESS
    {
        for m in walk::dense_messages(
            file,
            info.fractal_heap_address,
            info.name_index_address,
            kind::ATTRIBUTE,
            |r| match r {
                Record::AttributeName { heap_id, .. } => Some(heap_id.to_vec()),
                _ => None,
            },
        )? {
            if let Message::Attribute(a) = m {
                out.push(resolve(file, a)?);
            }
        }
    }
    out.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    Ok(out)
}
