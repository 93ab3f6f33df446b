//! h5: a pure-Rust HDF5 library.
//!
//! Read and write HDF5 files that libhdf5 1.8 – 2.x, h5py, h5dump, netCDF-4 and MATLAB v7.3
//! read and write: groups, links, attributes and datasets of every common datatype (numbers,
//! strings, compounds from `#[derive(H5Type)]`, enumerations, arrays, variable-length
//! sequences, references), in and out of [`ndarray`] arrays, with every common filter. Every
//! metadata structure goes through an adaptive metadata cache and all raw data through one
//! shared chunk cache per file; both are configured with [`FileAccess`] and report
//! statistics.
//!
//! The API follows hdf5-metno where its choice is sound, so code ports with few changes:
//!
//! ```
//! use h5::ndarray::{Array2, s};
//!
//! # fn main() -> h5::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("data.h5");
//! // Write.
//! let file = h5::File::create(&path)?;
//! let group = file.create_group("group")?;
//! let temperature = Array2::from_shape_fn((4, 5), |(i, j)| (10 * i + j) as f64);
//! let ds = group
//!     .new_dataset::<f64>()
//!     .shape([4, 5])
//!     .chunk([2, 5])
//!     .deflate(4)
//!     .create("temperature")?;
//! ds.write(&temperature)?;
//! ds.new_attr::<f64>().shape([2]).create("range")?.write(&[0.0, 100.0])?;
//! file.close()?;
//!
//! // Read.
//! let file = h5::File::open(&path)?;
//! let ds = file.dataset("group/temperature")?;
//! let all: h5::ndarray::ArrayD<f64> = ds.read()?;
//! let block = ds.read_slice::<f64>(s![1..3, ..2])?;
//! assert_eq!(block[[1, 1]], all[[2, 1]]);
//! assert!(ds.read::<f32>().is_err()); // narrowing: only with `read_lossy`
//! let range = ds.attr("range")?.read_1d::<f64>()?;
//! assert_eq!(range[1], 100.0);
//! # Ok(()) }
//! ```
//!
//! # Where things are
//!
//! * [`File`] opens and creates files; it dereferences to its root [`Group`].
//! * [`Group`] navigates (`group`, `dataset`, `groups`, `datasets`, `link_exists`, `walk`),
//!   creates groups and datasets ([`Group::new_dataset`] → [`DatasetBuilder`]) and links.
//! * [`Dataset`] reads ([`Dataset::read`] and its conveniences) and writes
//!   ([`Dataset::write`], [`Dataset::write_slice`], [`Dataset::append`]).
//! * [`Location`] (what groups and datasets dereference to) holds attributes:
//!   [`Location::new_attr`] → [`AttributeBuilder`] → [`Attribute`].
//! * [`H5Type`] maps Rust types to HDF5 datatypes; [`error`] lists every error type.
//!
//! # Format bounds
//!
//! New files are written in the formats HDF5 2.0 writes by default: format bounds
//! `(V18, LATEST)` (libhdf5's `H5Pset_libver_bounds(fapl, H5F_LIBVER_V18,
//! H5F_LIBVER_LATEST)`). Objects use the HDF5 1.8 formats (superblock 2, version 2 object
//! headers, link messages, compact and dense groups and attributes), which HDF5 1.8.0 and every
//! later library read, and which are smaller and faster than the earliest formats; the high
//! bound lets a feature that needs a newer format use it. HDF5 1.x and h5py default to
//! `(Earliest, LATEST)`: pass [`CreateOptions::with_bounds`] to [`File::create_with`] for files
//! that HDF5 1.6 must read, or a lower high bound to refuse anything newer than a given library
//! reads. See [`FormatBounds`].
//!
//! # Threads
//!
//! Every handle ([`File`], [`Group`], [`Dataset`], [`Attribute`], [`Location`]) is `Send +
//! Sync` and cheap to clone: move or share handles across threads freely. Reads of one file
//! from several threads run concurrently (the chunk cache's lock is released while chunks are
//! read and decoded); changes (writes, resizes, new objects, flushes) are serialised by the
//! file's locks, each one applied whole, so threads may write different datasets or different
//! parts of one dataset at once. A sequence of calls is not atomic: two threads appending to
//! one dataset, or writing the same elements, interleave in some order. Builders
//! ([`DatasetBuilder`], [`AttributeBuilder`]) are `Send`.
//!
//! # Errors
//!
//! One error type, [`Error`], whose variants a caller can act on; see [`error`] for how it
//! names the file and object, and for every type it exposes.

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

// The derive macro names `::h5::...`; this makes those paths work inside the crate too.
extern crate self as h5;

pub use ndarray;

mod attribute;
mod bounds;
mod convert;
pub mod copy;
mod dataset;
mod drivers;
pub mod error;
mod file;
mod group;
mod heap;
mod location;
mod open;
mod raw;
mod rawio;
mod read;
pub mod references;
pub mod slice;
mod swmr;
mod swmr_write;
pub mod types;
mod write;
mod write_data;

pub use attribute::{Attribute, AttributeBuilder};
pub use dataset::{ChunkInfo, Dataset, FilterInfo};
pub use error::{Error, ErrorKind, Result};
pub use file::{File, FileAccess, StorageDecorator};
pub use group::{Group, Link, LinkKind, ObjectKind, TreeEntry};
pub use h5_chunkcache::ChunkCacheConfig;
pub use h5_chunkcache::ChunkCacheStats;
pub use h5_core::filters::FilterError;
pub use h5_core::filters::{
    BitshuffleCompression, BloscCompressor, BloscShuffle, FilterSetupError, ScaleOffset, SzipCoding,
};
pub use h5_core::free_space::{PersistedManager, PersistedSpace};
pub use h5_core::space::{FreeList, FreeSection, SpaceStrategy};
pub use h5_core::values::Value;
pub use h5_core::write::chunk_index::ChunkIndexKind;
pub use h5_core::write::fspace::FileSpaceOptions;
pub use h5_core::write::links::GroupOptions;
pub use h5_core::write::{CreateOptions, FormatBounds};
pub use h5_derive::H5Type;
pub use h5_format::datatype::Datatype;
pub use h5_format::message::fill_value::{AllocTime, FillTime};
/// Huge pages for the large arrays reads return: [`set_huge_pages`] turns the requests off or on
/// for the whole process (on by default, as numpy's arrays), [`huge_pages`] tells the setting.
pub use h5_io::buffer::{huge_pages, set_huge_pages};
pub use h5_metacache::{CacheConfig as MetadataCacheConfig, Stats as MetadataCacheStats};
pub use h5_pagebuf::{
    PageBufferConfig, PageBufferError, PageBufferStats, StatKind as PageStatKind,
};
pub use h5_swmr::{SwmrConfig, SwmrError, log::Tag as SwmrLogTag};
pub use heap::GlobalHeap;
pub use swmr::SwmrStatus;
pub use swmr_write::SwmrWriteError;

/// Resets the status flags of the file at `path` (superblock versions 2 and 3), as `h5clear -s`
/// does, so that a file whose writer died without closing it opens again; returns the flags
/// found (0: nothing to do, nothing written). Only for files no process is writing.
pub fn clear_status_flags(path: impl AsRef<std::path::Path>) -> Result<u32> {
    let storage = h5_io::FileStorage::open(path.as_ref(), h5_io::OpenMode::ReadWrite)?;
    h5_core::status::clear_status_flags(&storage)
}
pub use location::Location;
pub use open::journal_path;
pub use raw::{NamedDatatype, RawDatasetBuilder};
pub use references::{RefTarget, Reference, Referenced, RegionRef, Selection};
#[doc(hidden)]
pub use types::__private;
pub use types::{
    DecodeCtx, EncodeCtx, FixedAscii, FixedUnicode, H5Num, H5Type, Object, ObjectRef, VarLenAscii,
    VarLenUnicode,
};
pub use write::DatasetBuilder;

#[cfg(test)]
mod tests {
    /// Every handle and builder may cross threads (stated in the crate documentation).
    #[test]
    fn handles_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<crate::File>();
        send_sync::<crate::Group>();
        send_sync::<crate::Dataset>();
        send_sync::<crate::Attribute>();
        send_sync::<crate::Location>();
        send_sync::<crate::NamedDatatype>();
        send_sync::<crate::Error>();
        send::<crate::DatasetBuilder<f64>>();
        send::<crate::AttributeBuilder<String>>();
        send::<crate::RawDatasetBuilder>();
    }
}
