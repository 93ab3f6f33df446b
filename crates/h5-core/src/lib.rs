//! Level 3 of h5: the engine.
//!
//! Files, object headers, groups, links, attributes and datasets. Every metadata structure is
//! decoded by `h5-format` and reaches the engine only as a metadata-cache client ([`meta`]); every
//! layout reads raw data through the shared chunk cache.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
// Bytes from a file never drive unchecked arithmetic or indexing: sizes, counts and offsets are
// checked (`checked_*`, `get`, typed errors), and the few places where a bound is proven say so
// in an `allow` with its reason (issue 13).
#![cfg_attr(
    not(test),
    deny(clippy::arithmetic_side_effects, clippy::indexing_slicing)
)]

pub(crate) mod access;
pub mod attribute;
pub(crate) mod btree1;
pub(crate) mod btree2;
pub mod buffer;
pub mod convert;
pub mod dataset;
pub(crate) mod dense;
pub mod descriptions;
pub mod error;
pub mod external;
pub(crate) mod fheap;
pub mod file;
pub mod filters;
pub mod free_space;
pub mod group;
pub mod guard;
pub mod indexes;
pub mod layouts;
pub mod legacy_swmr;
pub(crate) mod lheap;
pub mod meta;
pub mod nav;
pub mod object;
pub mod pagebuf;
pub mod references;
pub mod space;
pub(crate) mod stab;
pub mod status;
pub mod swmr;
#[cfg(test)]
pub(crate) mod testutil;
pub mod values;
pub mod virtual_ds;
pub(crate) mod walk;
pub mod write;

pub use error::{Error, ErrorKind, Result};
