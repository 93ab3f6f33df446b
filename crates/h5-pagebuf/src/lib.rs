//! Level 1 of h5: the page buffer.
//!
//! A page-granular cache of a paged-allocation HDF5 file (file-space strategy PAGE), built as a
//! decorator of the [`h5_io::Storage`] trait. A [`PageBuffer`] wraps the file's storage and
//! offers two faces, [`PageBuffer::metadata`] and [`PageBuffer::raw`], which are storages
//! themselves: the metadata cache reads and writes through the first, the chunk cache through
//! the second, so the buffer knows what each page holds.
//!
//! * Requests smaller than a page are served from (and gathered into) whole cached pages; a
//!   request crossing a page boundary is split (at most three pieces, [`split_at_pages`]).
//!   Requests of a page or more go around the buffer, which keeps its pages equal to what was
//!   written and lays them over what is read.
//! * Replacement is LRU with a second pass for dirty pages; a share of the pages can be
//!   reserved for metadata and for raw data ([`PageBufferConfig`], libhdf5's
//!   `H5Pset_page_buffer_size` rules); statistics in [`PageBufferStats`].
//! * VFD SWMR writer mode ([`PageBuffer::start_swmr_writer`]): every metadata page or
//!   multi-page metadata entry changed in the current tick is on the tick list (and never
//!   evicted before the end of the tick); a change to a page the HDF5 file already holds waits
//!   on the delayed-write list until the published index has covered it for `max_lag` ticks;
//!   page-aligned metadata writes longer than a page are held whole (multi-page entries).
//! * VFD SWMR reader mode ([`PageBuffer::start_swmr_reader`]): pages are evicted when the
//!   metadata file index says they changed ([`PageBuffer::evict_range`]).
//!
//! ```
//! use std::sync::Arc;
//! use h5_io::{MemoryStorage, Storage};
//! use h5_pagebuf::{PageBuffer, PageBufferConfig};
//!
//! let file: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
//! let pb = PageBuffer::new(file.clone(), PageBufferConfig::new(4 * 512, 0, 0)?)?;
//! pb.enable(512)?;
//! let meta = pb.metadata();
//! meta.write_at(100, b"OHDR")?;            // held in page 0, not yet in the file
//! assert_eq!(file.len()?, 0);
//! meta.sync()?;                            // written back
//! let mut sig = [0u8; 4];
//! file.read_at(100, &mut sig)?;
//! assert_eq!(&sig, b"OHDR");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod buffer;
mod config;
mod error;
mod face;
mod lru;
mod split;
mod state;
mod stats;

pub use buffer::{Counts, PageBuffer, TickImage};
pub use config::{Geometry, PageBufferConfig};
pub use error::PageBufferError;
pub use split::{Piece, per_page, split_at_pages};
pub use state::PageKind;
pub use stats::{PageBufferStats, PerKind, StatKind};
