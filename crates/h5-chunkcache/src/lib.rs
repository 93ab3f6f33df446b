//! The h5 shared chunk cache (issue 3).
//!
//! One cache per open file (or one for several files) holds the raw data of every dataset in one
//! memory budget, replacing HDF5's private fixed-size cache per open dataset (seeds 003/004, spec
//! `shared-chunk-cache.md`). The decisions taken where the spec leaves room are in
//! `docs/design.md` §3.
//!
//! * [`key`]: chunk keys (dataset identity + inline scaled coordinates, never linearised);
//! * [`selection`]: N-dimensional hyperslab and point selections, their decomposition into
//!   per-chunk copy runs, memory selections, and the in-memory copy helpers with and without
//!   type conversion;
//! * [`policy`]: replacement policies (global LRU with priority classes and bounded deferral, LFU,
//!   dataset-then-chunk LRU) and the per-dataset minimum budget;
//! * [`layout`]: the layout interface ([`ChunkLayout`]): required callbacks as trait methods,
//!   optional ones announced as [`Capabilities`] and checked at registration; chunks are dense
//!   bytes or layout-specific objects ([`Chunk`]);
//! * [`sparse`]: a reference sparse (defined-element tracking) chunk form with a checksummed
//!   image, and the in-chunk variable-length encoding helpers;
//! * [`cache`]: the [`ChunkCache`] — multi-dataset read and write (batched lookups, one vectored
//!   read per call, decode/encode on worker threads), type conversion at scatter/gather, memory
//!   selections, eviction through the policy with condense / drop-values / pre-encoding, batched
//!   flush, bypass with the layout's direct-I/O planners, direct chunk read/write, defined
//!   elements and erase, set-extent notification, statistics; errors in [`error`].
//!
//! Bookkeeping is single-threaded (`&mut self`; a file holds the cache behind a lock); codec work
//! of one call runs in parallel. Not built: background threads and a concurrent write-back queue,
//! collective (MPI) batches, chunks stored in external files, and conversions of variable-length
//! data stored inside chunks.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod cache;
pub mod error;
pub mod key;
pub mod layout;
pub mod policy;
pub mod selection;
pub mod sparse;

pub use cache::{
    Bypass, CLOSE_BATCH_BYTES, ChunkCache, ChunkCacheConfig, ChunkCacheStats, DIRECT_WHOLE_MIN,
    EntryStats, IoReport, KeyHashing, ReadRequest, SelectionIoMode, SharedChunkCache,
    WHOLE_WRITE_BATCH, WriteRequest,
};
pub use error::ChunkCacheError;
pub use key::{ChunkCoord, ChunkKey, DatasetId, MAX_RANK};
pub use layout::{
    Capabilities, Chunk, ChunkLayout, Conversion, CustomChunk, DefinedInfo, DirectPlan,
    DiskLocation, Encoded, Erased, InsertRequest, LayoutError, LayoutInfo, Lookup, MemUsage,
    Segment, Udata,
};
