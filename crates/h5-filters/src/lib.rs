//! The HDF5 filter pipeline: pure functions over chunk buffers.
//!
//! A dataset's filter pipeline message lists filters in the order they were applied on
//! write. [`Pipeline::decode`] undoes them in reverse order, skipping each filter whose bit
//! is set in the chunk's filter mask (bit `i` = filter `i` of the pipeline was not applied);
//! [`Pipeline::encode`] applies them in order and reports the mask it produced (an optional
//! filter that fails is skipped and its bit set, as libhdf5 does).
//!
//! Everything here is `Send + Sync` and allocation-bounded: a decoder never produces more
//! than the chunk's expected size (plus a small slack for filters that add trailers), and
//! corrupt input yields a [`FilterError`], never a panic.
//!
//! Codec choices (pure Rust, except libdeflate by default):
//! - deflate: libdeflate through `libdeflater` (feature `libdeflate`, default: the fastest
//!   deflate measured, smaller output than zlib at level 1), else `flate2` on its `zlib-rs`
//!   backend (the fastest pure-Rust zlib); see the `deflate` module.
//! - zstd: `ruzstd` for decode and encode (pure Rust; the `zstd` crate binds C).
//! - lz4 (the HDF5 lz4 filter framing, bitshuffle+lz4, blosc's lz4): `lz4_flex` in safe mode.
//! - bzip2: the `bzip2` crate on its default `libbz2-rs-sys` backend (a Rust port of libbzip2).
//! - lzf, blosclz (decode), blosc1 framing, Blosc2 frames and chunks, shuffle, bitshuffle, fletcher32, scale-offset,
//!   n-bit, szip (CCSDS 121.0-B adaptive entropy coding in libaec's szip layout): implemented
//!   here.
//!
//! Tests decode real chunks written by libhdf5 (h5py, hdf5plugin) and, by hand, check that
//! libhdf5 decodes this crate's encodings (`tests/data/verify_encoded.py`).

// Chunk bytes never drive unchecked arithmetic or indexing: sizes are checked (`checked_*`,
// `saturating_*`, `get`), and the few places where a bound is proven say so in an `allow`.
#![cfg_attr(
    not(test),
    deny(clippy::arithmetic_side_effects, clippy::indexing_slicing)
)]

mod bits;
mod bitshuffle;
mod blosc;
mod blosc2;
mod deflate;
mod error;
mod fletcher32;
mod lz4;
mod lzf;
mod nbit;
mod other;
mod pipeline;
mod scaleoffset;
mod shuffle;
mod szip;

pub use error::FilterError;

/// An empty buffer with room for the `total` bytes `filter` is about to decode (a size the
/// chunk declares, checked against the chunk's size by the caller), allocated fallibly: a size no
/// memory can hold is [`FilterError::TooLarge`], not an aborted process.
pub(crate) fn output(filter: &'static str, total: usize) -> Result<Vec<u8>, FilterError> {
    let mut v = Vec::new();
    v.try_reserve_exact(total)
        .map_err(|_| FilterError::TooLarge {
            filter,
            bytes: total,
        })?;
    Ok(v)
}
pub use fletcher32::fletcher32;
pub use pipeline::{FilterId, FilterSpec, Pipeline};
