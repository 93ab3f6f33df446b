//! Level 0 of h5: where bytes live.
//!
//! This crate knows nothing about HDF5. It defines one small, object-safe
//! trait, [`Storage`]: a growable array of bytes addressed by 64-bit offsets,
//! with **positional I/O** (every read and write names its offset; there is no
//! cursor, so one handle can be shared as `Arc<dyn Storage>` by many threads),
//! plus length, sync and advisory locking, and vectored reads and writes
//! ([`Storage::read_vectored`], [`Storage::write_vectored`]) that move many
//! segments in one call. [`StorageExt`] adds conveniences
//! every storage gets for free (zero-filled reads, bounded `Vec` reads).
//!
//! **Backends**: [`MemoryStorage`] (a `Vec<u8>`, with clones acting as separate
//! handles) and [`FileStorage`] (an OS file with `pread`/`pwrite` and `flock`
//! style locking that honours `HDF5_USE_FILE_LOCKING`).
//!
//! **Decorators** wrap any storage and are storages themselves, so they
//! compose: [`Metrics`] counts calls and bytes and can log the exact op
//! sequence, [`FaultInjection`] fails chosen calls or tears writes,
//! [`Logging`] writes a text line per call, [`Sticky`] refuses all work
//! after a failed write, [`Coalescing`] holds small writes and sends them down
//! merged with their neighbours, and [`Journaled`] keeps a rollback journal so that a
//! crash at any instant comes back to the last [`Storage::commit`] ([`recover`]). `Arc<S>`, `Box<S>` and `&S` are storages too, so
//! `Metrics<Arc<dyn Storage>>` works.
//!
//! **Errors are typed**: every failure is an [`Error`] variant carrying the
//! operation and offsets involved ([`Error::OutOfBounds`],
//! [`Error::AddressOverflow`], [`Error::Locked`], ...), never a bare string.
//!
//! **Buffers** for large reads ([`buffer::zeroed_vec`]) are allocated as numpy allocates
//! arrays: zeroed pages from the kernel with transparent huge pages requested.
//!
//! The contract every implementation must meet is documented on [`Storage`]
//! and checked by `testkit::run_conformance` (cargo feature `testkit`).
//!
//! ```
//! use h5_io::{MemoryStorage, Metrics, Storage, StorageExt};
//!
//! let storage = Metrics::new(MemoryStorage::new());
//! storage.write_at(0, b"\x89HDF\r\n\x1a\n")?;
//! assert_eq!(storage.read_vec(0, 4)?, b"\x89HDF");
//!
//! let m = storage.snapshot();
//! assert_eq!((m.writes, m.bytes_written), (1, 8));
//! assert_eq!((m.reads, m.bytes_read, m.lens), (1, 4, 1)); // read_vec = len + read
//! assert_eq!(storage.into_inner().snapshot().len(), 8);
//! # Ok::<(), h5_io::Error>(())
//! ```

// Unsafe code is denied everywhere but in `buffer` (one `madvise` call, see there).
#![deny(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod buffer;
mod coalesce;
mod error;
mod fault;
#[cfg(any(unix, windows))]
mod file;
mod journal;
mod logging;
mod members;
mod memory;
mod metrics;
mod ranges;
mod sticky;
mod storage;

#[cfg(feature = "testkit")]
pub mod testkit;

pub use coalesce::{CoalesceLimits, Coalescing};
pub use error::{Error, IoOp, Result};
pub use fault::{FaultInjection, FaultPlan, FaultRule};
#[cfg(any(unix, windows))]
pub use file::{FileOptions, FileStorage, Locking, OpenMode};
pub use journal::{JournalOptions, Journaled, MAX_RECORD, Recovery, is_hot, recover};
pub use logging::Logging;
pub use members::{Member, MemberFiles};
pub use memory::MemoryStorage;
pub use metrics::{Metrics, MetricsSnapshot, OpRecord};
pub use ranges::RangeSet;
pub use sticky::Sticky;
pub use storage::{CommitPoint, LockMode, Marker, ReadSegment, Storage, StorageExt, WriteSegment};
