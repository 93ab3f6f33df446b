//! The h5 shared chunk cache (issue 3; first milestone built, more to come).
//!
//! One cache per open file holds the raw data of every dataset in one memory budget, replacing
//! HDF5's private fixed-size cache per open dataset (seeds 003/004, spec `shared-chunk-cache.md`).
//! The plan and the decisions taken are in `docs/design.md` §3.
//!
//! Built so far, each tested:
//! * [`key`]: chunk keys and scaled coordinates (SCC-010, SCC-011);
//! * [`selection`]: N-dimensional hyperslab and point selections, their decomposition into
//!   per-chunk copy runs, and the in-memory scatter/gather helpers (SCC-011, SCC-049, SCC-057);
//! * [`policy`]: the replacement policies (global LRU with priority classes and bounded deferral,
//!   LFU, dataset-then-chunk LRU) and per-dataset minimums (SCC-014, SCC-074, SCC-079 .. SCC-084,
//!   SCC-089, SCC-090);
//! * [`layout`]: the layout interface for dense chunks ([`ChunkLayout`]: query, extent, batched
//!   lookup, decode, new chunk, encode, encode in place, batched insert; SCC-030 .. SCC-044);
//! * [`cache`]: the single-threaded [`ChunkCache`] with configuration, registration, batched
//!   read (SCC-058, SCC-059) and write (SCC-065) flows, eviction of clean and dirty chunks
//!   (SCC-074 .. SCC-077), flush and flush-one-dataset with evict in one insert call per dataset
//!   and one vectored write (SCC-020, SCC-021, SCC-044, SCC-085), destroy (SCC-017), runtime limit
//!   changes and exact accounting (SCC-087); the `decode` calls of one read batch and the
//!   `encode` calls of one flush run in parallel on rayon (`ChunkCacheConfig::threads`), the
//!   bookkeeping staying on the caller's thread; errors in [`error`].
//!
//! Not built yet: sparse/defined-values chunk types (an associated chunk type on the layout),
//! pre-encoding, cache bypass / direct I/O, set-extent notification, erase and defined values,
//! per-dataset minimum configuration through the cache, type conversion, concurrency.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod cache;
pub mod error;
pub mod key;
pub mod layout;
pub mod policy;
pub mod selection;
pub mod sparse;

pub use cache::{
    Bypass, ChunkCache, ChunkCacheConfig, ChunkCacheStats, EntryStats, IoReport, KeyHashing,
    ReadRequest, SelectionIoMode, WriteRequest,
};
pub use error::ChunkCacheError;
pub use key::{ChunkCoord, ChunkKey, DatasetId, MAX_RANK};
pub use layout::{
    Capabilities, Chunk, ChunkLayout, Conversion, CustomChunk, DefinedInfo, DirectPlan,
    DiskLocation, Encoded, Erased, InsertRequest, LayoutError, LayoutInfo, Lookup, MemUsage,
    Segment, Udata,
};
