//! h5: a pure-Rust HDF5 library (in progress, issue 4).
//!
//! The API follows hdf5-metno where it makes sense so code ports with few changes.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod slice;

pub use h5_core::{Error, Result};
