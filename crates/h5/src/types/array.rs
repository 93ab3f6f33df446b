//! Array types: `[T; N]` is an HDF5 array of `N` elements of `T`; nested Rust arrays
//! (`[[T; 3]; 2]`) become one multi-dimensional array type (dimensions `[2, 3]`), as numpy
//! describes sub-array shapes.

use h5_format::datatype::{ArrayType, Datatype};

use super::{DecodeCtx, EncodeCtx, H5Type, not_a};
use crate::{Error, Result};

impl<T: H5Type, const N: usize> H5Type for [T; N] {
    fn h5_type() -> Datatype {
        let (dims, base) = match T::h5_type() {
            Datatype::Array(a) => {
                let mut dims = vec![N as u32];
                dims.extend(a.dims);
                (dims, a.base)
            }
            other => (vec![N as u32], Box::new(other)),
        };
        // The identity permutation, as datatype version 2 (what h5 writes) stores it.
        let permutation = Some((0..dims.len() as u32).collect());
        Datatype::Array(ArrayType {
            size: (N * T::h5_size()) as u32,
            dims,
            permutation,
            base,
        })
    }
    fn h5_size() -> usize {
        N * T::h5_size()
    }
    fn h5_encode(&self, out: &mut [u8], ctx: &mut EncodeCtx<'_>) -> Result<()> {
        let es = T::h5_size();
        if es == 0 {
            return Ok(());
        }
        for (v, o) in self.iter().zip(out.chunks_exact_mut(es)) {
            v.h5_encode(o, ctx)?;
        }
        Ok(())
    }
    fn h5_decode(dt: &Datatype, bytes: &[u8], ctx: &DecodeCtx<'_>) -> Result<Self> {
        let Datatype::Array(a) = dt else {
            return Err(not_a(dt, &format!("an array of {N}")));
        };
        if a.dims.first().map(|d| *d as usize) != Some(N) {
            return Err(Error::Invalid(format!(
                "an array of dimensions {:?} read as an array of {N}",
                a.dims
            )));
        }
        // The element type: the base, or an array of the remaining dimensions.
        let sub = if a.dims.len() > 1 {
            let dims = a.dims[1..].to_vec();
            let count: u64 = dims.iter().map(|d| u64::from(*d)).product();
            Datatype::Array(ArrayType {
                size: (count * u64::from(a.base.size())) as u32,
                dims,
                permutation: None,
                base: a.base.clone(),
            })
        } else {
            (*a.base).clone()
        };
        let v = T::h5_decode_all(&sub, bytes, ctx)?;
        let got = v.len();
        v.try_into()
            .map_err(|_| Error::Invalid(format!("{got} array elements for {N}")))
    }
}
