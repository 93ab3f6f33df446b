//! h5: a pure-Rust HDF5 library.
//!
//! Open files written by libhdf5 1.8 – 2.x (and h5py, netCDF-4, MATLAB v7.3) and read groups,
//! links, attributes and datasets into [`ndarray`] arrays. Every metadata structure goes through
//! an adaptive metadata cache and all raw data through one shared chunk cache per file; both
//! are configured with [`FileAccess`] and report statistics.
//!
//! The API follows hdf5-metno where it makes sense so code ports with few changes:
//!
//! ```no_run
//! let file = h5::File::open("data.h5")?;
//! let ds = file.dataset("group/temperature")?;
//! let all: ndarray::ArrayD<f64> = ds.read()?;
//! let names = file.group("group")?.member_names()?;
//! # Ok::<(), h5::Error>(())
//! ```
//!
//! Reading is complete for the common format; writing is the next milestone.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

// The derive macro names `::h5::...`; this makes those paths work inside the crate too.
extern crate self as h5;

mod attribute;
pub mod copy;
mod dataset;
mod file;
mod group;
mod raw;
mod rawio;
pub mod slice;
mod swmr;
pub mod types;
mod write;

pub use attribute::Attribute;
pub use dataset::{Dataset, FilterInfo};
pub use file::{File, FileAccess};
pub use group::{Group, Link, LinkKind, ObjectKind};
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
pub use h5_core::{Error, Result};
pub use h5_derive::H5Type;
pub use h5_format::datatype::Datatype;
pub use h5_format::message::fill_value::{AllocTime, FillTime};
pub use h5_metacache::{CacheConfig as MetadataCacheConfig, Stats as MetadataCacheStats};
pub use h5_pagebuf::{
    PageBufferConfig, PageBufferError, PageBufferStats, StatKind as PageStatKind,
};
pub use h5_swmr::{SwmrConfig, SwmrError, log::Tag as SwmrLogTag};
pub use raw::{NamedDatatype, RawDatasetBuilder};
pub use swmr::SwmrStatus;
#[doc(hidden)]
pub use types::__private;
pub use types::{
    DecodeCtx, EncodeCtx, FixedAscii, FixedUnicode, H5Num, H5Type, Object, ObjectRef, VarLenAscii,
    VarLenUnicode,
};
pub use write::DatasetBuilder;
