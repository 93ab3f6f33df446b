//! Level 2 of h5: VFD SWMR (single writer, multiple readers at the file-driver level; the
//! seed's RFC, requirements SWMR-001 … SWMR-150 in `spec/vfd-swmr.md`).
//!
//! At each end of tick the writer copies every metadata page changed in the tick (the page
//! buffer's tick list) into a separate metadata file and publishes an index mapping HDF5 file
//! pages to their images there; readers read indexed pages from the metadata file and
//! everything else from the HDF5 file, so they always see the metadata of one complete tick.
//!
//! * [`format`](mod@format): the metadata file's header (`VHDR`, 36 bytes) and index (`VIDX`), byte-for-byte
//!   the reference format; [`updater`]: updater files (`VUDH`/`VUCL`) for storage without POSIX
//!   semantics.
//! * [`writer`]: the writer's end of tick ([`writer::MdWriter`]), [`mdspace`]: space in the
//!   metadata file and its delayed release, [`index`]: the writer's index.
//! * [`reader`]: loading header and index with bounded retries, and the reader's storage driver.
//! * [`config`]: [`SwmrConfig`] with the RFC's validation; [`queue`]: the process-wide
//!   end-of-tick queue and the API-depth guard; [`log`]: the SWMR log.

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod auxiliary;
pub mod config;
pub mod error;
pub mod format;
pub mod index;
pub mod log;
pub mod mdspace;
pub mod pagemap;
pub mod queue;
pub mod reader;
pub mod recover;
pub mod updater;
pub mod writer;

pub use config::SwmrConfig;
pub use error::{Result, SwmrError};
