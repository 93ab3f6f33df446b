//! What reads and writes share: the numeric conversion between a Rust type and a file's
//! datatype on the way in, shape checks, and arrays from vectors.

use h5_core::convert::{NumConversion, num_type};
use h5_core::file::FileShared;
use h5_format::datatype::Datatype;
use ndarray::{ArrayD, ArrayView, IxDyn};

use crate::types::{EncodeCtx, H5Type, encode_for, same_type};
use crate::{Error, Result};

/// Whether a write may change values (narrowing numeric conversions).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum WriteMode {
    /// Only conversions that keep every value (the default, as for reads).
    Lossless,
    /// Narrowing conversions too (truncating and saturating as libhdf5 does).
    Lossy,
}

/// The conversion `T`'s elements need to be stored as `file_type` elements: `None` when the
/// types are the same; a numeric conversion when both are plain numbers (lossless ones only
/// unless `mode` allows more); an error otherwise (`what` names the object).
pub(crate) fn write_conversion<T: H5Type>(
    file_type: &Datatype,
    mode: WriteMode,
    what: &str,
) -> Result<Option<NumConversion>> {
    let mem = T::h5_type();
    if same_type(file_type, &mem) {
        return Ok(None);
    }
    let plain = |t: &Datatype| matches!(t, Datatype::FixedPoint(_) | Datatype::Float(_));
    if plain(&mem)
        && plain(file_type)
        && let (Some(from), Some(to)) = (num_type(&mem), num_type(file_type))
    {
        return Ok(Some(NumConversion::new(
            from,
            to,
            mode == WriteMode::Lossy,
        )?));
    }
    Err(Error::Invalid(format!(
        "{what}: {} elements cannot be written as {}",
        std::any::type_name::<T>(),
        file_type.describe()
    )))
}

/// Checks that data of shape `data` fills a selection of shape `target`: the same shape, or a
/// flat sequence of as many elements (C order). `what` names the object.
pub(crate) fn check_shape(data: &[usize], target: &[usize], what: &str) -> Result<()> {
    let count = |s: &[usize]| s.iter().try_fold(1usize, |a, d| a.checked_mul(*d));
    let flat = data.len() <= 1 && count(data) == count(target);
    if data == target || flat {
        return Ok(());
    }
    Err(Error::Invalid(format!(
        "{what}: data of shape {data:?} for a selection of shape {target:?}"
    )))
}

/// Encodes the elements of `view` in C order for `file` (variable-length data into its global
/// heap) and hands the bytes and their count to `write`. A view in standard layout is encoded
/// as a slice (plain numbers are borrowed as they are); others element by element.
pub(crate) fn encode_view_for<T: H5Type, R>(
    file: &FileShared,
    view: &ArrayView<'_, T, IxDyn>,
    write: impl FnOnce(&[u8], usize) -> Result<R>,
) -> Result<R> {
    if let Some(values) = view.as_slice() {
        return encode_for(file, values, |bytes| write(bytes, values.len()));
    }
    let size = T::h5_size();
    if size == 0 {
        return Err(Error::Invalid("elements of 0 bytes".into()));
    }
    let n = view.len();
    let mut out = vec![0u8; n * size];
    let mut ctx = EncodeCtx::new(file);
    for (v, o) in view.iter().zip(out.chunks_exact_mut(size)) {
        v.h5_encode(o, &mut ctx)?;
    }
    ctx.finish()?;
    write(&out, n)
}

/// `v` as an array of `shape`.
pub(crate) fn to_array<T>(v: Vec<T>, shape: &[usize]) -> Result<ArrayD<T>> {
    ArrayD::from_shape_vec(IxDyn(shape), v).map_err(|e| Error::Invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_match_exactly_or_flat() {
        assert!(check_shape(&[2, 3], &[2, 3], "x").is_ok());
        assert!(check_shape(&[6], &[2, 3], "x").is_ok());
        assert!(check_shape(&[1], &[], "x").is_ok());
        assert!(check_shape(&[], &[1, 1], "x").is_ok());
        assert!(check_shape(&[3, 2], &[2, 3], "x").is_err());
        assert!(check_shape(&[5], &[2, 3], "x").is_err());
    }

    #[test]
    fn conversions_on_write_follow_the_read_rule() {
        let f32_type = f32::h5_type();
        assert!(matches!(
            write_conversion::<f32>(&f32_type, WriteMode::Lossless, "x"),
            Ok(None)
        ));
        assert!(matches!(
            write_conversion::<i16>(&f32_type, WriteMode::Lossless, "x"),
            Ok(Some(_))
        ));
        assert!(matches!(
            write_conversion::<f64>(&f32_type, WriteMode::Lossless, "x"),
            Err(Error::Convert(_))
        ));
        assert!(matches!(
            write_conversion::<f64>(&f32_type, WriteMode::Lossy, "x"),
            Ok(Some(_))
        ));
        assert!(matches!(
            write_conversion::<String>(&f32_type, WriteMode::Lossy, "x"),
            Err(Error::Invalid(_))
        ));
    }
}
