//! The h5 metadata cache.
//!
//! Every piece of HDF5 file metadata (superblock, object headers, B-tree nodes, heaps, ...) is read,
//! cached, written and evicted by one [`MetadataCache`] per file. On-disk structures are *clients*:
//! they implement [`Class`] (size, decode, encode, notifications) and never do I/O themselves; the
//! cache does all reads and writes through the [`h5_io::Storage`] trait.
//!
//! The model follows the HDF5 metadata cache design (seed 000, spec `metadata-cache.md`):
//!
//! * entries are variable-sized, keyed by file address in a chained hash index;
//! * clients **protect** an entry (shared read-only or exclusive read-write) to use it and
//!   **unprotect** it when done, saying whether they dirtied it; hot entries can be **pinned**;
//! * the replacement policy is a modified LRU: clean entries at the tail are evicted, dirty ones are
//!   written and get a second pass, and a minimum clean size avoids write storms; the maximum size is
//!   soft;
//! * flushes write dirty entries in ascending address order, flush-dependency children before their
//!   parents, flush-last entries (the superblock) at the end;
//! * once per epoch the maximum size adapts to the hit rate (threshold increase, flash increase for
//!   large entries, threshold decrease, age-out), all bounded by one [`CacheConfig`];
//! * statistics, resize reports and trace files make behaviour observable, and [`replay`] replays a
//!   trace against synthetic clients to tune configurations offline.
//!
//! ```
//! use std::sync::Arc;
//! use h5_io::MemoryStorage;
//! use h5_metacache::{replay::{SyntheticTypes, synthetic_classes}, CacheBuilder, InsertFlags,
//!     ProtectFlags, UnprotectFlags, FlushFlags, UnboundedFile};
//!
//! let storage = Arc::new(MemoryStorage::new());
//! let mut cache = CacheBuilder::<SyntheticTypes>::new(storage.clone(), synthetic_classes(1), UnboundedFile)
//!     .build()?;
//! cache.insert(0, 0x100, vec![7u8; 64], InsertFlags::NONE)?;     // a new, dirty entry
//! cache.flush(FlushFlags::NONE)?;                                // written at 0x100
//! let h = cache.protect(0, 0x100, &64, ProtectFlags::READ_ONLY)?; // a hit
//! assert_eq!(cache.icr(&h)?.len(), 64);
//! cache.unprotect(h, UnprotectFlags::NONE)?;
//! assert_eq!(cache.hit_rate(), 1.0);
//! # Ok::<(), h5_metacache::CacheError>(())
//! ```

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod cache;
mod check;
mod class;
pub mod config;
mod deps;
mod error;
mod flags;
mod flush;
mod list;
mod load;
mod ops;
pub mod replay;
mod resize;
mod stats;
mod sync;
pub mod trace;
mod write;

pub use cache::{
    CacheBuilder, DEFAULT_HASH_TABLE_LEN, EntryStatus, LogFlushEvent, MAX_CLASS_IDS, MetadataCache,
    ProtectHandle, SizeInfo, Totals,
};
pub use class::{
    CacheTypes, Class, ClassFlags, ClassInfo, Deserialized, FileContext, MemType, MetadataKind,
    NotifyAction, PreSerialize, PreSerializeFlags, UnboundedFile,
};
pub use config::{
    CACHE_CONFIG_VERSION, CacheConfig, ConfigError, DecrMode, DerivedFlags, FlashIncrMode,
    IncrMode, MetadataWriteStrategy,
};
pub use deps::MAX_FLUSH_DEP_HEIGHT;
pub use error::{CacheError, Callback, ClientError, Result, UnprotectError};
pub use flags::{
    EntryFlushFlags, ExpungeFlags, FlushFlags, InsertFlags, ProtectFlags, UnprotectFlags,
};
pub use load::{DetachedLoad, LoadedEntry};
pub use ops::UNDEFINED_ADDR;
pub use resize::{ResizeOutcome, ResizeReport};
pub use stats::{ClassStats, DirtyBytesCreated, Stats};
pub use write::{DIFF_WRITE_GAP, SERIALIZE_POISON};

#[cfg(test)]
mod tests {
    /// The file layer keeps the cache behind a lock and shares the file across threads, so a cache
    /// over `Send` client types must be `Send` (it is deliberately not `Sync`: one caller at a time).
    #[test]
    fn cache_is_send_for_send_clients() {
        fn assert_send<T: Send>() {}
        assert_send::<crate::MetadataCache<crate::replay::SyntheticTypes>>();
        assert_send::<crate::ProtectHandle>();
    }
}
