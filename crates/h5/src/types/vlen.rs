//! Variable-length sequences: `Vec<T>` is a sequence of `T` stored in the global heap.

use h5_format::datatype::{Datatype, VarLenKind, VarLenType};

use super::{DecodeCtx, EncodeCtx, H5Type, VLEN_SIZE, not_a};
use crate::{Error, Result};

/// A `Vec<T>` is a variable-length sequence of `T` (h5py's `vlen_dtype(T)`). An empty vector
/// is written as a null element, as libhdf5 does.
impl<T: H5Type> H5Type for Vec<T> {
    fn h5_type() -> Datatype {
        Datatype::VarLen(VarLenType {
            size: VLEN_SIZE as u32,
            kind: VarLenKind::Sequence,
            base: Box::new(T::h5_type()),
        })
    }
    fn h5_size() -> usize {
        VLEN_SIZE
    }
    fn h5_encode(&self, out: &mut [u8], ctx: &mut EncodeCtx<'_>) -> Result<()> {
        let n = u32::try_from(self.len())
            .map_err(|_| Error::Invalid("a sequence of more than 2^32 elements".into()))?;
        let data = T::h5_encode_slice(self, ctx)?;
        ctx.put_vlen(out, n, &data, false)
    }
    fn h5_decode(dt: &Datatype, bytes: &[u8], ctx: &DecodeCtx<'_>) -> Result<Self> {
        let Datatype::VarLen(v) = dt else {
            return Err(not_a(dt, "a variable-length sequence"));
        };
        if !matches!(v.kind, VarLenKind::Sequence) {
            return Err(not_a(dt, "a variable-length sequence"));
        }
        let Some((n, data)) = ctx.get_vlen(bytes)? else {
            return Ok(Vec::new());
        };
        let es = v.base.size() as usize;
        let need = (n as usize).saturating_mul(es);
        let data = data.get(..need).ok_or_else(|| {
            Error::Invalid("variable-length sequence longer than its heap object".into())
        })?;
        T::h5_decode_all(&v.base, data, ctx)
    }
}
