//! Level 0 of h5: sans-I/O decoding of the HDF5 on-disk structures (the public HDF5 File Format
//! Specification, superblock versions 0–3, object headers 1–2, up to the HDF5 2.x format).
//!
//! Every decoder takes the bytes of one structure (as the metadata cache loads them) plus the
//! context it needs (address and length sizes, parameters from a parent structure) and returns a
//! typed value or a [`FormatError`] naming the structure and its address. Nothing here does I/O,
//! caches, or panics on bytes.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
// Bytes from a file never drive unchecked arithmetic or indexing: sizes are checked (`checked_*`,
// `saturating_*`, `get`), and the few places where a bound is proven say so in an `allow`.
#![cfg_attr(
    not(test),
    deny(clippy::arithmetic_side_effects, clippy::indexing_slicing)
)]

pub mod btree1;
pub mod btree2;
pub mod checksum;
pub mod datatype;
pub mod error;
pub mod extensible_array;
pub mod fixed_array;
pub mod free_space;
pub mod heap;
pub mod message;
pub mod object_header;
pub mod reader;
pub mod reference;
pub mod selection;
pub mod sohm;
pub mod superblock;
pub mod symbol_node;
pub mod vds;
pub mod writer;

pub use error::{FormatError, Result};
pub use reader::{Reader, Sizes, UNDEFINED_ADDRESS};
pub use writer::Writer;
