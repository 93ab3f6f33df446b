//! Typed errors of the storage layer.

use std::fmt;
use std::path::PathBuf;

/// Result type of this crate: `E` defaults to [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The operations of the [`Storage`](crate::Storage) trait, used to label errors,
/// metrics, op logs and injected faults.
///
/// `Display` prints the lowercase method name (`read`, `write`, `len`, `set_len`,
/// `sync`, `lock`, `unlock`, `read_vectored`, `write_vectored`, `commit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoOp {
    /// [`Storage::read_at`](crate::Storage::read_at).
    Read,
    /// [`Storage::write_at`](crate::Storage::write_at).
    Write,
    /// [`Storage::len`](crate::Storage::len).
    Len,
    /// [`Storage::set_len`](crate::Storage::set_len).
    SetLen,
    /// [`Storage::sync`](crate::Storage::sync).
    Sync,
    /// [`Storage::lock`](crate::Storage::lock).
    Lock,
    /// [`Storage::unlock`](crate::Storage::unlock).
    Unlock,
    /// [`Storage::read_vectored`](crate::Storage::read_vectored): one vector
    /// call, whatever its number of segments.
    ReadVectored,
    /// [`Storage::write_vectored`](crate::Storage::write_vectored): one vector
    /// call, whatever its number of segments.
    WriteVectored,
    /// [`Storage::commit`](crate::Storage::commit).
    Commit,
}

impl IoOp {
    /// Every operation, in declaration order.
    pub const ALL: [IoOp; 10] = [
        IoOp::Read,
        IoOp::Write,
        IoOp::Len,
        IoOp::SetLen,
        IoOp::Sync,
        IoOp::Lock,
        IoOp::Unlock,
        IoOp::ReadVectored,
        IoOp::WriteVectored,
        IoOp::Commit,
    ];

    /// The lowercase name printed by `Display`.
    pub const fn name(self) -> &'static str {
        match self {
            IoOp::Read => "read",
            IoOp::Write => "write",
            IoOp::Len => "len",
            IoOp::SetLen => "set_len",
            IoOp::Sync => "sync",
            IoOp::Lock => "lock",
            IoOp::Unlock => "unlock",
            IoOp::ReadVectored => "read_vectored",
            IoOp::WriteVectored => "write_vectored",
            IoOp::Commit => "commit",
        }
    }

    /// Position in [`IoOp::ALL`], for per-op counter arrays.
    pub(crate) const fn index(self) -> usize {
        match self {
            IoOp::Read => 0,
            IoOp::Write => 1,
            IoOp::Len => 2,
            IoOp::SetLen => 3,
            IoOp::Sync => 4,
            IoOp::Lock => 5,
            IoOp::Unlock => 6,
            IoOp::ReadVectored => 7,
            IoOp::WriteVectored => 8,
            IoOp::Commit => 9,
        }
    }
}

impl fmt::Display for IoOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Errors of the storage layer.
///
/// Every variant carries enough context (operation, offset, lengths) to be
/// reported without the caller having to add any.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An OS-level error, with the operation and offset.
    ///
    /// For operations without an offset (`len`, `sync`, `lock`, `unlock`, `commit`)
    /// the offset is 0; for `set_len` it is the requested new length.
    #[error("I/O error during {op} at offset {offset}: {source}")]
    Io {
        /// The storage operation that failed.
        op: IoOp,
        /// Byte offset of the operation (see the variant's documentation).
        offset: u64,
        /// The underlying OS error.
        #[source]
        source: std::io::Error,
    },

    /// Opening a file failed (not found, permission denied, already exists, ...).
    #[cfg(any(unix, windows))]
    #[error("cannot open {} ({mode}): {source}", path.display())]
    Open {
        /// The path given to [`FileStorage::open`](crate::FileStorage::open).
        path: PathBuf,
        /// The requested open mode.
        mode: crate::OpenMode,
        /// The underlying OS error.
        #[source]
        source: std::io::Error,
    },

    /// A read touched bytes at or past the end of the storage.
    ///
    /// The read failed: the caller's buffer may hold part of the bytes that exist.
    #[error("read of {len} bytes at offset {offset} past end of storage ({file_len} bytes)")]
    OutOfBounds {
        /// Offset of the read.
        offset: u64,
        /// Length of the read.
        len: u64,
        /// Length of the storage when the read was attempted.
        file_len: u64,
    },

    /// `offset + len` overflows `u64`.
    #[error("address overflow: offset {offset} + length {len} does not fit in 64 bits")]
    AddressOverflow {
        /// Offset of the operation.
        offset: u64,
        /// Length of the operation.
        len: u64,
    },

    /// Another handle holds a conflicting lock (an HDF5 file opened for writing elsewhere).
    #[error(
        "storage is locked by another handle (is the file open for writing elsewhere? \
         HDF5_USE_FILE_LOCKING=FALSE disables locking)"
    )]
    Locked,

    /// The file is already open through another handle of this process in a mode that
    /// conflicts (a second writer, a reader while it is open for writing, or a writer while it
    /// is open for reading). Checked whatever the OS locking policy, as libhdf5 refuses to
    /// open a file twice in one process in conflicting modes.
    #[cfg(any(unix, windows))]
    #[error(
        "{} is already open in this process (a file open for writing cannot be opened again, \
         one open for reading cannot be opened for writing)",
        path.display()
    )]
    AlreadyOpen {
        /// The path whose lock was asked for.
        path: PathBuf,
    },

    /// The storage was closed by its owner: no further calls are served.
    #[error("the storage was closed")]
    Closed,

    /// An earlier write/sync/set_len failed; this handle refuses work until
    /// reopened (see [`Sticky`](crate::Sticky)).
    #[error("an earlier write, set_len or sync failed; the storage must be reopened")]
    PreviousIo,

    /// Failure injected by [`FaultInjection`](crate::FaultInjection) (op and 1-based call number).
    #[error("injected failure of {op} call #{call}")]
    Injected {
        /// The operation that was failed.
        op: IoOp,
        /// 1-based number of the call of that operation.
        call: u64,
    },

    /// Torn write injected: only `written` of `len` bytes reached storage.
    #[error("torn write at offset {offset}: only {written} of {len} bytes written")]
    TornWrite {
        /// Offset of the write.
        offset: u64,
        /// Bytes that reached storage (a prefix of the data).
        written: u64,
        /// Bytes the caller asked to write.
        len: u64,
    },
}

/// `offset + len`, or [`Error::AddressOverflow`].
pub(crate) fn checked_end(offset: u64, len: u64) -> Result<u64> {
    offset
        .checked_add(len)
        .ok_or(Error::AddressOverflow { offset, len })
}

/// A buffer length as `u64` (lossless on every supported target).
pub(crate) fn len_u64(len: usize) -> u64 {
    // usize is at most 64 bits on every target Rust supports.
    u64::try_from(len).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names() {
        let names: Vec<String> = IoOp::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            [
                "read",
                "write",
                "len",
                "set_len",
                "sync",
                "lock",
                "unlock",
                "read_vectored",
                "write_vectored",
                "commit"
            ]
        );
        for (i, op) in IoOp::ALL.iter().enumerate() {
            assert_eq!(op.index(), i);
        }
    }

    #[test]
    fn messages() {
        let e = Error::OutOfBounds {
            offset: 10,
            len: 4,
            file_len: 12,
        };
        assert_eq!(
            e.to_string(),
            "read of 4 bytes at offset 10 past end of storage (12 bytes)"
        );
        let e = Error::Io {
            op: IoOp::SetLen,
            offset: 5,
            source: std::io::Error::other("boom"),
        };
        assert_eq!(e.to_string(), "I/O error during set_len at offset 5: boom");
        assert!(std::error::Error::source(&e).is_some());
        let e = Error::Injected {
            op: IoOp::Sync,
            call: 2,
        };
        assert_eq!(e.to_string(), "injected failure of sync call #2");
    }

    #[test]
    fn end_overflow() {
        assert_eq!(checked_end(1, 2).ok(), Some(3));
        assert!(matches!(
            checked_end(u64::MAX, 1),
            Err(Error::AddressOverflow {
                offset: u64::MAX,
                len: 1
            })
        ));
    }
}
