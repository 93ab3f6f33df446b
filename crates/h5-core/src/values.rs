//! Element values that are not plain numbers: strings (fixed and variable length) and the
//! numeric conversion of raw element bytes.

use h5_format::datatype::{Datatype, StringPadding, VarLenKind};
use h5_format::heap::global::GlobalHeapId;

use crate::convert::{NativeNum, NumConversion, num_type};
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::walk;

/// Decodes `raw` (elements of `dt` in the file's representation) as strings: fixed-length
/// strings with their padding removed, or variable-length strings from the global heap.
pub fn strings(file: &FileShared, dt: &Datatype, raw: &[u8]) -> Result<Vec<String>> {
    match dt {
        Datatype::String(s) => {
            let size = s.size as usize;
            if size == 0 {
                return Ok(Vec::new());
            }
            Ok(raw
                .chunks_exact(size)
                .map(|b| {
                    let end = match s.padding {
                        StringPadding::NullTerminate | StringPadding::NullPad => {
                            b.iter().position(|&c| c == 0).unwrap_or(b.len())
                        }
                        StringPadding::SpacePad => {
                            b.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1)
                        }
                    };
                    String::from_utf8_lossy(&b[..end]).into_owned()
                })
                .collect())
        }
        Datatype::VarLen(v) if matches!(v.kind, VarLenKind::String { .. }) => {
            let sizes = file.sizes;
            let size = v.size as usize;
            if size == 0 {
                return Ok(Vec::new());
            }
            raw.chunks_exact(size)
                .map(|b| {
                    let mut r = h5_format::Reader::new(b, "variable-length string", u64::MAX);
                    let len = r.u32()? as usize;
                    let id = GlobalHeapId::decode(r.bytes(r.remaining())?, sizes, u64::MAX)?;
                    if len == 0 || id.collection_address == h5_format::UNDEFINED_ADDRESS {
                        return Ok(String::new());
                    }
                    let bytes = walk::global_object(file, id)?;
                    let bytes = bytes.get(..len).unwrap_or(&bytes);
                    // A trailing null may be stored.
                    let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
                    Ok(String::from_utf8_lossy(&bytes[..end]).into_owned())
                })
                .collect()
        }
        other => Err(Error::Invalid(format!(
            "{} is not a string type",
            other.describe()
        ))),
    }
}

/// Converts raw elements of `dt` to `T` (lossless conversions only unless `lossy`).
pub fn numbers<T: NativeNum>(dt: &Datatype, raw: &[u8], lossy: bool) -> Result<Vec<T>> {
    let from = num_type(dt)
        .ok_or_else(|| Error::Invalid(format!("{} is not a numeric type", dt.describe())))?;
    let conv = NumConversion::new(from, T::TYPE, lossy)?;
    let n = raw.len() / from.size().max(1);
    let size = std::mem::size_of::<T>();
    let mut out = vec![0u8; n * size];
    conv.run(raw, &mut out, n)?;
    Ok(out.chunks_exact(size).map(T::from_ne).collect())
}
