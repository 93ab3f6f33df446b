//! Level 3 of h5: the engine (in progress, issue 4).
//!
//! Files, object headers, groups, links, attributes and datasets. Every metadata structure is
//! decoded by `h5-format` and reaches the engine only as a metadata-cache client ([`meta`]); every
//! layout reads raw data through the shared chunk cache.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod attribute;
pub mod buffer;
pub mod convert;
pub mod dataset;
pub mod error;
pub mod external;
pub mod file;
pub mod filters;
pub mod free_space;
pub mod group;
pub mod guard;
pub mod indexes;
pub mod layouts;
pub mod meta;
pub mod nav;
pub mod object;
pub mod pagebuf;
pub mod references;
pub mod space;
pub mod status;
pub mod swmr;
pub mod values;
pub mod virtual_ds;
pub(crate) mod walk;
pub mod write;

pub use error::{Error, ErrorKind, Result};
