//! The h5 shared chunk cache (issue 3; under construction).
//!
//! One cache per open file holds the raw data of every dataset in one memory budget, replacing
//! HDF5's private fixed-size cache per open dataset (seeds 003/004, spec `shared-chunk-cache.md`).
//! The plan and the decisions taken are in `docs/design.md` §3.
//!
//! Built so far, each standalone and tested:
//! * [`key`]: chunk keys and scaled coordinates (SCC-010, SCC-011);
//! * [`selection`]: N-dimensional hyperslab and point selections, their decomposition into
//!   per-chunk copy runs, and the in-memory scatter/gather helpers (SCC-011, SCC-049, SCC-057);
//! * [`policy`]: the replacement policies (global LRU with priority classes and bounded deferral,
//!   LFU, dataset-then-chunk LRU) and per-dataset minimums (SCC-014, SCC-074, SCC-079 .. SCC-084,
//!   SCC-089, SCC-090).
//!
//! Not built yet: the layout trait, the cache itself (read/write/flush flows, accounting,
//! pre-encoding, bypass, set-extent, defined values).

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod key;
pub mod policy;
pub mod selection;

pub use key::{ChunkCoord, ChunkKey, DatasetId, MAX_RANK};
