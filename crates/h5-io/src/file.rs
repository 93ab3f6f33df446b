//! File backend: positional I/O on an OS file, with advisory locking.

use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::error::{Error, IoOp, Result, checked_end, len_u64};
use crate::storage::{CommitPoint, LockMode, ReadSegment, Storage, WriteSegment, check_segments};

/// How [`FileStorage::open`] opens its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpenMode {
    /// Existing file, read only: writes, `set_len` fail with a permission error.
    ReadOnly,
    /// Existing file, read and write.
    ReadWrite,
    /// Create the file, or truncate it to zero length if it exists.
    Create,
    /// Create the file; fail if it already exists.
    CreateNew,
}

impl OpenMode {
    /// Whether this mode allows writing.
    pub const fn is_writable(self) -> bool {
        !matches!(self, OpenMode::ReadOnly)
    }
}

impl fmt::Display for OpenMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpenMode::ReadOnly => "read-only",
            OpenMode::ReadWrite => "read-write",
            OpenMode::Create => "create",
            OpenMode::CreateNew => "create-new",
        })
    }
}

/// Whether [`FileStorage`] takes OS advisory locks.
///
/// Whatever the policy, [`Storage::lock`] also checks the handles of this process on the same
/// file (see [`FileStorage`]): OS locks may be per process or missing, the in-process check
/// never is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Locking {
    /// libhdf5's rule: the environment variable `HDF5_USE_FILE_LOCKING` decides when set to one
    /// of its values (see [`Locking::from_env_value`]); otherwise libhdf5's default,
    /// [`Locking::BestEffort`]. The variable is read when the file is opened.
    #[default]
    Auto,
    /// Always lock; a file system without locks is an error.
    Enabled,
    /// Never take OS locks: [`lock`](Storage::lock) and [`unlock`](Storage::unlock) only do
    /// the in-process check.
    Disabled,
    /// Lock, but treat "locking not supported by this file system" (`ENOSYS`) as success
    /// (libhdf5's `BEST_EFFORT`, and its default: "ignore file locks when they are disabled on
    /// the file system"). A conflicting holder is still [`Error::Locked`].
    BestEffort,
}

impl Locking {
    /// The policy a value of `HDF5_USE_FILE_LOCKING` names, as libhdf5 1.10.7+ reads it:
    /// `FALSE` or `0` disables locking, `TRUE` or `1` enables it, `BEST_EFFORT` enables it and
    /// ignores file systems without locks. `None` for an unset variable or any other value
    /// (libhdf5 then keeps the file access property list's setting). Case and surrounding
    /// blanks are ignored.
    pub fn from_env_value(value: Option<&str>) -> Option<Locking> {
        let v = value?.trim();
        if v.eq_ignore_ascii_case("false") || v == "0" {
            Some(Locking::Disabled)
        } else if v.eq_ignore_ascii_case("true") || v == "1" {
            Some(Locking::Enabled)
        } else if v.eq_ignore_ascii_case("best_effort") {
            Some(Locking::BestEffort)
        } else {
            None
        }
    }

    /// The policy set by the environment, if any ([`Locking::from_env_value`] of
    /// `HDF5_USE_FILE_LOCKING`).
    pub fn from_env() -> Option<Locking> {
        let value = std::env::var("HDF5_USE_FILE_LOCKING").ok();
        Self::from_env_value(value.as_deref())
    }

    /// libhdf5's precedence: the environment variable overrides `self` (a file access
    /// property list's setting). Never returns [`Locking::Auto`].
    pub fn with_env_override(self) -> Locking {
        Self::from_env().unwrap_or(self).resolve()
    }

    /// Replace [`Locking::Auto`] by the policy from the environment, or libhdf5's default.
    fn resolve(self) -> Locking {
        match self {
            Locking::Auto => Self::from_env().unwrap_or(Locking::BestEffort),
            other => other,
        }
    }
}

/// Options of [`FileStorage::open_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct FileOptions {
    /// Locking policy; the default, [`Locking::Auto`], honours `HDF5_USE_FILE_LOCKING`.
    pub locking: Locking,
    /// A lock to take as part of opening (`None`: none). With [`OpenMode::Create`] the lock is
    /// taken before the file is truncated, so a file open elsewhere is refused untouched.
    pub lock: Option<LockMode>,
}

/// A storage backed by an OS file, using positional reads and writes
/// (`pread`/`pwrite` on Unix, `seek_read`/`seek_write` on Windows), so one
/// handle can serve many threads without a shared cursor.
///
/// Locks are OS advisory locks taken with [`File::try_lock`] /
/// [`File::try_lock_shared`] (`flock` on Linux, the mechanism libhdf5 uses, so
/// h5 and libhdf5 programs exclude each other), plus a table of the locks this
/// process holds, keyed by the file's identity (device and inode on Unix): two
/// `FileStorage`s on one file conflict within a process whatever the OS and the
/// locking policy do ([`Error::AlreadyOpen`]). A lock is released when the
/// handle is dropped.
///
/// Vectored calls check every segment first (overflow, then bounds for reads,
/// with one length query), then transfer the segments in file order. Runs of
/// segments that are exactly adjacent in the file (each starting where the
/// previous one ends) are moved with one positional read or write through a
/// bounce buffer, up to 1 MiB per run; other segments get one system call
/// each. Write segments that overlap are written one by one in slice order
/// instead, so the last one wins.
///
/// Changing the mode of a held lock (shared to exclusive or back) is done as
/// unlock then lock, so it is not atomic, as with `flock`. If the new mode
/// conflicts the old mode is re-taken if possible, and [`Error::Locked`] is
/// returned.
pub struct FileStorage {
    file: File,
    path: PathBuf,
    mode: OpenMode,
    locking: Locking,
    /// The file's identity in the process-wide lock table.
    key: registry::FileKey,
    /// The lock this handle holds (in the process table, and as an OS lock unless disabled).
    held: Mutex<Option<LockMode>>,
}

impl FileStorage {
    /// Open `path` in `mode` with default options (locking per
    /// `HDF5_USE_FILE_LOCKING`). Opening takes no lock.
    pub fn open(path: impl AsRef<Path>, mode: OpenMode) -> Result<Self> {
        Self::open_with(path, mode, FileOptions::default())
    }

    /// Open `path` in `mode` with explicit options: the file is opened, the lock of
    /// `options.lock` (if any) taken, and only then a [`OpenMode::Create`] file truncated.
    pub fn open_with(path: impl AsRef<Path>, mode: OpenMode, options: FileOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if mode == OpenMode::Create
            && options.lock == Some(LockMode::Exclusive)
            && options.locking.resolve() != Locking::Disabled
            && let Some(made) = Self::create_locked(&path, options)?
        {
            return Ok(made);
        }
        let mut oo = OpenOptions::new();
        oo.read(true);
        match mode {
            OpenMode::ReadOnly => {}
            OpenMode::ReadWrite => {
                oo.write(true);
            }
            OpenMode::Create => {
                // Truncated below, once locked.
                oo.write(true).create(true).truncate(false);
            }
            OpenMode::CreateNew => {
                oo.write(true).create_new(true);
            }
        }
        let open_error = |source| Error::Open {
            path: path.clone(),
            mode,
            source,
        };
        let file = oo.open(&path).map_err(open_error)?;
        let key = registry::FileKey::of(&file, &path).map_err(open_error)?;
        let storage = FileStorage {
            file,
            path,
            mode,
            locking: options.locking.resolve(),
            key,
            held: Mutex::new(None),
        };
        if let Some(lock) = options.lock {
            storage.lock(lock)?;
        }
        if mode == OpenMode::Create {
            storage.set_len(0)?;
        }
        Ok(storage)
    }

    /// Makes a new file at `path` that is exclusively locked the moment it appears there, or
    /// `None` when `path` exists (or the directory has no hard links) and the plain open
    /// path applies. Opening `path` with `O_CREAT` and locking it afterwards leaves a moment in
    /// which another process (a VFD SWMR reader polling for the file) can open the new, empty
    /// file and take a shared lock first, so that the creator's lock fails. Here the file is
    /// made and locked under a temporary name in the same directory and then linked to `path`
    /// (`link` never replaces an existing file); the temporary name is removed either way.
    #[cfg(unix)]
    fn create_locked(path: &Path, options: FileOptions) -> Result<Option<Self>> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static SEQ: AtomicU64 = AtomicU64::new(0);
        if path.exists() {
            return Ok(None);
        }
        let Some(name) = path.file_name() else {
            return Ok(None);
        };
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(
            ".{}.{}.creating",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let tmp = path.with_file_name(tmp_name);
        // Any failure here (no such directory, no permission) is reported by the plain path,
        // with the caller's path.
        let Ok(mut made) = Self::open_with(&tmp, OpenMode::CreateNew, options) else {
            return Ok(None);
        };
        let linked = std::fs::hard_link(&tmp, path);
        // Best effort: a leftover temporary name is harmless.
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {
                made.path = path.to_path_buf();
                made.mode = OpenMode::Create;
                Ok(Some(made))
            }
            // Created meanwhile by someone else, or no hard links on this file system: the
            // plain path (lock, then truncate) decides.
            Err(_) => Ok(None),
        }
    }

    #[cfg(not(unix))]
    fn create_locked(_path: &Path, _options: FileOptions) -> Result<Option<Self>> {
        Ok(None)
    }

    /// The path the file was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The mode the file was opened with.
    pub fn open_mode(&self) -> OpenMode {
        self.mode
    }

    /// The effective locking policy (never [`Locking::Auto`]).
    pub fn locking(&self) -> Locking {
        self.locking
    }

    fn file_len(&self, op: IoOp, offset: u64) -> Result<u64> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|source| Error::Io { op, offset, source })
    }

    fn check_writable(&self, op: IoOp, offset: u64) -> Result<()> {
        if self.mode.is_writable() {
            Ok(())
        } else {
            Err(Error::Io {
                op,
                offset,
                source: io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "storage was opened read-only",
                ),
            })
        }
    }

    /// `read_exact_at`, mapping a short read (the range reaches past the end) to
    /// [`Error::OutOfBounds`].
    fn read_exact(&self, op: IoOp, offset: u64, buf: &mut [u8]) -> Result<()> {
        pos::read_exact_at(&self.file, buf, offset)
            .map_err(|source| self.read_error(op, offset, buf.len(), source))
    }

    /// The error of a read of `len` bytes at `offset` that failed with `source`: past the end
    /// of the file, or the OS's error.
    fn read_error(&self, op: IoOp, offset: u64, len: usize, source: io::Error) -> Error {
        if source.kind() == io::ErrorKind::UnexpectedEof {
            let file_len = self.file_len(op, offset).unwrap_or(0);
            Error::OutOfBounds {
                offset,
                len: len_u64(len),
                file_len,
            }
        } else {
            Error::Io { op, offset, source }
        }
    }

    fn write_all(&self, op: IoOp, offset: u64, data: &[u8]) -> Result<()> {
        pos::write_all_at(&self.file, data, offset).map_err(|source| Error::Io {
            op,
            offset,
            source,
        })
    }

    /// Try to take `mode` on the OS file. `Ok(false)`: would block.
    fn try_os_lock(&self, mode: LockMode) -> Result<bool> {
        let r = match mode {
            LockMode::Shared => self.file.try_lock_shared(),
            LockMode::Exclusive => self.file.try_lock(),
        };
        match r {
            Ok(()) => Ok(true),
            Err(TryLockError::WouldBlock) => Ok(false),
            Err(TryLockError::Error(source)) => Err(Error::Io {
                op: IoOp::Lock,
                offset: 0,
                source,
            }),
        }
    }

    fn os_unlock(&self) -> Result<()> {
        self.file.unlock().map_err(|source| Error::Io {
            op: IoOp::Unlock,
            offset: 0,
            source,
        })
    }

    /// Changes the OS lock from `previous` to `mode` per the policy. On a conflict the
    /// previous mode is taken again if possible and [`Error::Locked`] returned.
    fn os_lock(&self, previous: Option<LockMode>, mode: LockMode) -> Result<()> {
        if self.locking == Locking::Disabled {
            return Ok(());
        }
        if previous.is_some() {
            // std leaves re-locking a locked handle unspecified: unlock first.
            self.os_unlock()?;
        }
        match self.try_os_lock(mode) {
            Ok(true) => Ok(()),
            Ok(false) => {
                if let Some(old) = previous {
                    let _ = self.try_os_lock(old);
                }
                Err(Error::Locked)
            }
            Err(Error::Io { source, .. })
                if self.locking == Locking::BestEffort
                    && source.kind() == io::ErrorKind::Unsupported =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

impl Drop for FileStorage {
    /// The OS lock goes with the descriptor; the process table's entry is released here.
    fn drop(&mut self) {
        let held = self
            .held
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mode) = held {
            registry::restore(&self.key, mode, None);
        }
    }
}

/// The locks this process holds, by file identity: the in-process half of [`Storage::lock`].
mod registry {
    use std::collections::HashMap;
    use std::fs::File;
    use std::io;
    use std::path::{Path, PathBuf};
    use std::sync::{Mutex, OnceLock, PoisonError};

    use crate::storage::LockMode;

    /// A file's identity: device and inode on Unix (so two paths to one file are one key),
    /// the canonical path elsewhere.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub(super) enum FileKey {
        /// Device and inode numbers.
        #[cfg(unix)]
        Inode(u64, u64),
        /// The canonical path.
        #[cfg_attr(unix, allow(dead_code))]
        Path(PathBuf),
    }

    impl FileKey {
        #[cfg(unix)]
        pub(super) fn of(file: &File, _path: &Path) -> io::Result<FileKey> {
            use std::os::unix::fs::MetadataExt;
            let m = file.metadata()?;
            Ok(FileKey::Inode(m.dev(), m.ino()))
        }

        #[cfg(not(unix))]
        pub(super) fn of(_file: &File, path: &Path) -> io::Result<FileKey> {
            Ok(FileKey::Path(path.canonicalize()?))
        }
    }

    /// Holders of one file: how many shared locks, whether one exclusive lock.
    #[derive(Debug, Default, Clone, Copy)]
    struct Holders {
        shared: usize,
        exclusive: bool,
    }

    fn table() -> std::sync::MutexGuard<'static, HashMap<FileKey, Holders>> {
        static TABLE: OnceLock<Mutex<HashMap<FileKey, Holders>>> = OnceLock::new();
        TABLE
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn remove(h: &mut Holders, mode: LockMode) {
        match mode {
            LockMode::Shared => h.shared = h.shared.saturating_sub(1),
            LockMode::Exclusive => h.exclusive = false,
        }
    }

    fn add(h: &mut Holders, mode: LockMode) {
        match mode {
            LockMode::Shared => h.shared += 1,
            LockMode::Exclusive => h.exclusive = true,
        }
    }

    /// Replaces this handle's `previous` hold by `mode`; `Err` (nothing changed) when another
    /// handle's hold conflicts.
    pub(super) fn acquire(
        key: &FileKey,
        previous: Option<LockMode>,
        mode: LockMode,
    ) -> Result<(), ()> {
        let mut t = table();
        let h = t.entry(key.clone()).or_default();
        let mut others = *h;
        if let Some(p) = previous {
            remove(&mut others, p);
        }
        let conflict = match mode {
            LockMode::Shared => others.exclusive,
            LockMode::Exclusive => others.exclusive || others.shared > 0,
        };
        if conflict {
            return Err(());
        }
        add(&mut others, mode);
        *h = others;
        Ok(())
    }

    /// Replaces this handle's hold `mode` by `previous` (`None`: releases it).
    pub(super) fn restore(key: &FileKey, mode: LockMode, previous: Option<LockMode>) {
        let mut t = table();
        if let Some(h) = t.get_mut(key) {
            remove(h, mode);
            if let Some(p) = previous {
                add(h, p);
            }
            if h.shared == 0 && !h.exclusive {
                t.remove(key);
            }
        }
    }
}

impl fmt::Debug for FileStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileStorage")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("locking", &self.locking)
            .finish_non_exhaustive()
    }
}

#[deny(clippy::missing_trait_methods)]
impl Storage for FileStorage {
    /// One `pread` loop, no length query first: a read that reaches past the end comes back
    /// short and is reported as [`Error::OutOfBounds`] then (`buf` may hold part of the bytes).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        checked_end(offset, len_u64(buf.len()))?;
        if buf.is_empty() {
            // Nothing to read finds no end: an empty read past it is checked by length.
            let file_len = self.file_len(IoOp::Read, offset)?;
            if offset > file_len {
                return Err(Error::OutOfBounds {
                    offset,
                    len: 0,
                    file_len,
                });
            }
            return Ok(());
        }
        self.read_exact(IoOp::Read, offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        checked_end(offset, len_u64(data.len()))?;
        self.check_writable(IoOp::Write, offset)?;
        if data.is_empty() {
            return Ok(());
        }
        self.write_all(IoOp::Write, offset, data)
    }

    fn len(&self) -> Result<u64> {
        self.file_len(IoOp::Len, 0)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.check_writable(IoOp::SetLen, len)?;
        self.file.set_len(len).map_err(|source| Error::Io {
            op: IoOp::SetLen,
            offset: len,
            source,
        })
    }

    /// `fsync` (data and metadata). A no-op on a read-only handle, which has
    /// nothing to flush.
    fn sync(&self) -> Result<()> {
        if !self.mode.is_writable() {
            return Ok(());
        }
        self.file.sync_all().map_err(|source| Error::Io {
            op: IoOp::Sync,
            offset: 0,
            source,
        })
    }

    fn lock(&self, mode: LockMode) -> Result<()> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if *held == Some(mode) {
            return Ok(());
        }
        let previous = *held;
        // The process first: another handle here conflicts whatever the OS says.
        registry::acquire(&self.key, previous, mode).map_err(|()| Error::AlreadyOpen {
            path: self.path.clone(),
        })?;
        if let Err(e) = self.os_lock(previous, mode) {
            registry::restore(&self.key, mode, previous);
            return Err(e);
        }
        *held = Some(mode);
        Ok(())
    }

    fn unlock(&self) -> Result<()> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(mode) = held.take() {
            registry::restore(&self.key, mode, None);
            if self.locking != Locking::Disabled {
                self.os_unlock()?;
            }
        }
        Ok(())
    }

    fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> Result<()> {
        check_segments(segments.iter().map(|s| (s.offset, s.buf.len())))?;
        let Some(first) = segments.first() else {
            return Ok(());
        };
        let file_len = self.file_len(IoOp::ReadVectored, first.offset)?;
        for seg in segments.iter() {
            let len = len_u64(seg.buf.len());
            if checked_end(seg.offset, len)? > file_len {
                return Err(Error::OutOfBounds {
                    offset: seg.offset,
                    len,
                    file_len,
                });
            }
        }
        // In file order (segments at one offset read the same bytes, so their order is free).
        let mut sorted: Vec<&mut ReadSegment<'_>> =
            segments.iter_mut().filter(|s| !s.buf.is_empty()).collect();
        if !sorted.is_sorted_by_key(|s| s.offset) {
            sorted.sort_unstable_by_key(|s| s.offset);
        }
        let runs = adjacent_runs(sorted.len(), |k| (sorted[k].offset, sorted[k].buf.len()));
        for run in runs {
            let run = &mut sorted[run];
            let offset = run[0].offset;
            let total: usize = run.iter().map(|s| s.buf.len()).sum();
            if let [only] = run {
                self.read_exact(IoOp::ReadVectored, offset, only.buf)?;
            } else if straight_through(total, run.len()) {
                let mut bufs: Vec<io::IoSliceMut<'_>> =
                    run.iter_mut().map(|s| io::IoSliceMut::new(s.buf)).collect();
                pos::read_exact_vectored_at(&self.file, &mut bufs, offset)
                    .map_err(|source| self.read_error(IoOp::ReadVectored, offset, total, source))?;
            } else {
                let mut bounce = vec![0; total];
                self.read_exact(IoOp::ReadVectored, offset, &mut bounce)?;
                let mut rest = &bounce[..];
                for seg in run.iter_mut() {
                    let (part, tail) = rest.split_at(seg.buf.len());
                    seg.buf.copy_from_slice(part);
                    rest = tail;
                }
            }
        }
        Ok(())
    }

    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> Result<()> {
        check_segments(segments.iter().map(|s| (s.offset, s.data.len())))?;
        let Some(first) = segments.first() else {
            return Ok(());
        };
        self.check_writable(IoOp::WriteVectored, first.offset)?;
        let order = file_order(segments.iter().map(|s| (s.offset, s.data.len())));
        let end = |i: usize| segments[i].offset + len_u64(segments[i].data.len());
        // Sorted by start, two segments overlap only if two neighbours do.
        if order.windows(2).any(|w| end(w[0]) > segments[w[1]].offset) {
            // Slice order decides which bytes win: one segment at a time.
            for seg in segments.iter().filter(|s| !s.data.is_empty()) {
                self.write_all(IoOp::WriteVectored, seg.offset, seg.data)?;
            }
            return Ok(());
        }
        let extent = |i: usize| (segments[i].offset, segments[i].data.len());
        for run in adjacent_runs(order.len(), |k| extent(order[k])) {
            let run = &order[run];
            let offset = segments[run[0]].offset;
            if let [only] = run {
                self.write_all(IoOp::WriteVectored, offset, segments[*only].data)?;
                continue;
            }
            let total = run.iter().map(|&i| segments[i].data.len()).sum();
            if straight_through(total, run.len()) {
                let mut bufs: Vec<io::IoSlice<'_>> = run
                    .iter()
                    .map(|&i| io::IoSlice::new(segments[i].data))
                    .collect();
                pos::write_all_vectored_at(&self.file, &mut bufs, offset).map_err(|source| {
                    Error::Io {
                        op: IoOp::WriteVectored,
                        offset,
                        source,
                    }
                })?;
                continue;
            }
            let mut bounce = Vec::with_capacity(total);
            for &i in run {
                bounce.extend_from_slice(segments[i].data);
            }
            self.write_all(IoOp::WriteVectored, offset, &bounce)?;
        }
        Ok(())
    }

    /// Nothing to do: a plain file keeps no journal.
    fn commit(&self, _point: &CommitPoint) -> Result<()> {
        Ok(())
    }

    /// A backend keeps no journal.
    fn journals_overwrites(&self) -> bool {
        false
    }
}

/// Largest number of bytes one merged run of adjacent segments moves through a
/// bounce buffer; bigger segments are transferred alone.
const MERGE_LIMIT: usize = 1 << 20;

/// Segments of at least this many bytes are transferred alone, never merged: one
/// system call per such segment costs less than copying it through a bounce buffer
/// (whole raw chunks of a few hundred KiB went through two copies before).
const ALONE_MIN: usize = 64 << 10;

/// A merged run of `count` segments whose average length is at least this many bytes moves
/// with one vectored system call straight between the file and the segments' own buffers; a
/// run of smaller segments goes through a bounce buffer, whose one copy costs less than the
/// kernel's work per segment. (A whole-dataset read of 256×256 chunks of `f32` is runs of 1 KiB
/// rows: straight through, every byte is copied once instead of twice.)
const STRAIGHT_MIN_AVERAGE: usize = 512;

/// Whether a run of `count` segments of `total` bytes moves straight through (see
/// [`STRAIGHT_MIN_AVERAGE`]).
fn straight_through(total: usize, count: usize) -> bool {
    pos::VECTORED && total >= STRAIGHT_MIN_AVERAGE.saturating_mul(count)
}

/// Indices of the non-empty segments (given as `(offset, len)`), sorted by
/// offset; segments with equal offsets keep their slice order.
fn file_order(extents: impl Iterator<Item = (u64, usize)>) -> Vec<usize> {
    let mut order: Vec<(u64, usize)> = extents
        .enumerate()
        .filter(|&(_, (_, len))| len > 0)
        .map(|(i, (offset, _))| (offset, i))
        .collect();
    order.sort_unstable();
    order.into_iter().map(|(_, i)| i).collect()
}

/// Split `count` segments in file order (`extent(k)` is the `k`-th one's
/// `(offset, len)`, sorted by offset, whose end does not overflow) into runs of
/// positions to transfer with one system call each: maximal runs where every
/// segment starts exactly where the previous one ends, cut so that a run of
/// several segments holds at most [`MERGE_LIMIT`] bytes; a segment of
/// [`ALONE_MIN`] bytes or more is a run of its own.
fn adjacent_runs(count: usize, extent: impl Fn(usize) -> (u64, usize)) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    while start < count {
        let (offset, len) = extent(start);
        let mut run_end = offset + len_u64(len);
        let mut total = len;
        let mut end = start + 1;
        while end < count {
            let (offset, next_len) = extent(end);
            if len >= ALONE_MIN
                || next_len >= ALONE_MIN
                || offset != run_end
                || total.saturating_add(next_len) > MERGE_LIMIT
            {
                break;
            }
            run_end += len_u64(next_len);
            total += next_len;
            end += 1;
        }
        runs.push(start..end);
        start = end;
    }
    runs
}

/// Positional I/O primitives.
#[cfg(unix)]
mod pos {
    use std::fs::File;
    use std::io;
    use std::os::unix::fs::FileExt;

    pub(super) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
        file.read_exact_at(buf, offset)
    }

    pub(super) fn write_all_at(file: &File, data: &[u8], offset: u64) -> io::Result<()> {
        file.write_all_at(data, offset)
    }

    /// Vectored positional transfers are one system call (`preadv`/`pwritev`).
    pub(super) const VECTORED: bool = true;

    /// The most buffers one `preadv`/`pwritev` takes (`IOV_MAX` of Linux, macOS and the BSDs).
    const IOV_MAX: usize = 1024;

    /// Fills `bufs` in order from the file's bytes at `offset`, looping over short reads.
    pub(super) fn read_exact_vectored_at(
        file: &File,
        mut bufs: &mut [io::IoSliceMut<'_>],
        mut offset: u64,
    ) -> io::Result<()> {
        io::IoSliceMut::advance_slices(&mut bufs, 0);
        while !bufs.is_empty() {
            let batch = bufs.len().min(IOV_MAX);
            match rustix::io::preadv(file, &mut bufs[..batch], offset) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    offset += n as u64;
                    io::IoSliceMut::advance_slices(&mut bufs, n);
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Writes `bufs` in order to the file at `offset`, looping over short writes.
    pub(super) fn write_all_vectored_at(
        file: &File,
        mut bufs: &mut [io::IoSlice<'_>],
        mut offset: u64,
    ) -> io::Result<()> {
        io::IoSlice::advance_slices(&mut bufs, 0);
        while !bufs.is_empty() {
            let batch = bufs.len().min(IOV_MAX);
            match rustix::io::pwritev(file, &bufs[..batch], offset) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    offset += n as u64;
                    io::IoSlice::advance_slices(&mut bufs, n);
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// Positional I/O primitives. `seek_read`/`seek_write` may transfer fewer bytes
/// than asked, so loop.
#[cfg(windows)]
mod pos {
    use std::fs::File;
    use std::io;
    use std::os::windows::fs::FileExt;

    pub(super) fn read_exact_at(
        file: &File,
        mut buf: &mut [u8],
        mut offset: u64,
    ) -> io::Result<()> {
        while !buf.is_empty() {
            match file.seek_read(buf, offset) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub(super) fn write_all_at(file: &File, mut data: &[u8], mut offset: u64) -> io::Result<()> {
        while !data.is_empty() {
            match file.seek_write(data, offset) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    data = &data[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Vectored transfers are one call per buffer here: runs go through a bounce buffer.
    pub(super) const VECTORED: bool = false;

    /// Fills `bufs` in order from the file's bytes at `offset`.
    pub(super) fn read_exact_vectored_at(
        file: &File,
        bufs: &mut [io::IoSliceMut<'_>],
        mut offset: u64,
    ) -> io::Result<()> {
        for buf in bufs.iter_mut() {
            read_exact_at(file, buf, offset)?;
            offset += buf.len() as u64;
        }
        Ok(())
    }

    /// Writes `bufs` in order to the file at `offset`.
    pub(super) fn write_all_vectored_at(
        file: &File,
        bufs: &mut [io::IoSlice<'_>],
        mut offset: u64,
    ) -> io::Result<()> {
        for buf in bufs.iter() {
            write_all_at(file, buf, offset)?;
            offset += buf.len() as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(locking: Locking) -> FileOptions {
        FileOptions {
            locking,
            lock: None,
        }
    }

    /// Whether another open file description of `p` can take an OS lock of `mode` now
    /// (`flock` locks of different descriptions conflict even within one process).
    fn os_lockable(p: &Path, mode: LockMode) -> bool {
        let f = File::open(p).unwrap();
        let r = match mode {
            LockMode::Shared => f.try_lock_shared(),
            LockMode::Exclusive => f.try_lock(),
        };
        match r {
            Ok(()) => true,
            Err(TryLockError::WouldBlock) => false,
            Err(TryLockError::Error(e)) => panic!("{e}"),
        }
    }

    #[test]
    fn env_value_parsing() {
        let parse = Locking::from_env_value;
        assert_eq!(parse(None), None);
        assert_eq!(parse(Some("FALSE")), Some(Locking::Disabled));
        assert_eq!(parse(Some("false")), Some(Locking::Disabled));
        assert_eq!(parse(Some(" False ")), Some(Locking::Disabled));
        assert_eq!(parse(Some("0")), Some(Locking::Disabled));
        assert_eq!(parse(Some("TRUE")), Some(Locking::Enabled));
        assert_eq!(parse(Some("1")), Some(Locking::Enabled));
        assert_eq!(parse(Some("")), None, "other values keep the setting");
        assert_eq!(parse(Some("yes")), None);
        assert_eq!(parse(Some("best_effort")), Some(Locking::BestEffort));
        assert_eq!(parse(Some("BEST_EFFORT")), Some(Locking::BestEffort));
        assert_ne!(Locking::Auto.resolve(), Locking::Auto);
        assert_eq!(Locking::Disabled.resolve(), Locking::Disabled);
        assert_ne!(Locking::Auto.with_env_override(), Locking::Auto);
    }

    #[test]
    fn open_modes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.bin");
        let e = FileStorage::open(&p, OpenMode::ReadOnly).unwrap_err();
        assert!(
            matches!(&e, Error::Open { mode: OpenMode::ReadOnly, source, .. } if source.kind() == io::ErrorKind::NotFound),
            "{e:?}"
        );
        assert!(e.to_string().contains("f.bin"), "{e}");
        {
            let f = FileStorage::open(&p, OpenMode::CreateNew).unwrap();
            assert_eq!(f.path(), p);
            assert_eq!(f.open_mode(), OpenMode::CreateNew);
            f.write_at(0, b"hello").unwrap();
        }
        let e = FileStorage::open(&p, OpenMode::CreateNew).unwrap_err();
        assert!(
            matches!(&e, Error::Open { source, .. } if source.kind() == io::ErrorKind::AlreadyExists)
        );
        {
            let f = FileStorage::open(&p, OpenMode::ReadWrite).unwrap();
            assert_eq!(f.len().unwrap(), 5);
            f.write_at(5, b"!").unwrap();
        }
        {
            let f = FileStorage::open(&p, OpenMode::ReadOnly).unwrap();
            let mut buf = [0; 6];
            f.read_at(0, &mut buf).unwrap();
            assert_eq!(&buf, b"hello!");
            let e = f.write_at(0, b"x").unwrap_err();
            assert!(
                matches!(&e, Error::Io { op: IoOp::Write, source, .. } if source.kind() == io::ErrorKind::PermissionDenied)
            );
            assert!(matches!(
                f.set_len(0),
                Err(Error::Io {
                    op: IoOp::SetLen,
                    ..
                })
            ));
            f.sync().unwrap();
        }
        let f = FileStorage::open(&p, OpenMode::Create).unwrap();
        assert_eq!(f.len().unwrap(), 0);
    }

    fn already_open<T: fmt::Debug>(r: Result<T>) -> bool {
        matches!(r, Err(Error::AlreadyOpen { .. }))
    }

    #[test]
    fn exclusive_conflicts_between_handles() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lock.bin");
        let a = FileStorage::open_with(&p, OpenMode::Create, opts(Locking::Enabled)).unwrap();
        let b = FileStorage::open_with(&p, OpenMode::ReadWrite, opts(Locking::Enabled)).unwrap();
        a.lock(LockMode::Exclusive).unwrap();
        assert!(!os_lockable(&p, LockMode::Shared), "the OS lock is taken");
        assert!(already_open(b.lock(LockMode::Exclusive)));
        let e = b.lock(LockMode::Shared).unwrap_err();
        assert!(e.to_string().contains("lock.bin"), "{e}");
        // Re-locking in the held mode is a no-op.
        a.lock(LockMode::Exclusive).unwrap();
        a.unlock().unwrap();
        assert!(
            os_lockable(&p, LockMode::Exclusive),
            "the OS lock is released"
        );
        b.lock(LockMode::Exclusive).unwrap();
        assert!(already_open(a.lock(LockMode::Shared)));
        drop(b);
        a.lock(LockMode::Exclusive).unwrap();
    }

    #[test]
    fn shared_locks_coexist() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lock.bin");
        let a = FileStorage::open_with(&p, OpenMode::Create, opts(Locking::Enabled)).unwrap();
        let b = FileStorage::open_with(&p, OpenMode::ReadOnly, opts(Locking::Enabled)).unwrap();
        let c = FileStorage::open_with(&p, OpenMode::ReadWrite, opts(Locking::Enabled)).unwrap();
        a.lock(LockMode::Shared).unwrap();
        b.lock(LockMode::Shared).unwrap();
        assert!(os_lockable(&p, LockMode::Shared));
        assert!(!os_lockable(&p, LockMode::Exclusive));
        assert!(already_open(c.lock(LockMode::Exclusive)));
        // A failed upgrade keeps the shared lock.
        assert!(already_open(a.lock(LockMode::Exclusive)));
        assert!(already_open(c.lock(LockMode::Exclusive)));
        b.unlock().unwrap();
        a.lock(LockMode::Exclusive).unwrap();
        assert!(already_open(c.lock(LockMode::Shared)));
        a.lock(LockMode::Shared).unwrap();
        c.lock(LockMode::Shared).unwrap();
    }

    #[test]
    fn os_conflict_is_locked() {
        // A lock held by another open file description (as another process would hold it).
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lock.bin");
        let a = FileStorage::open_with(&p, OpenMode::Create, opts(Locking::Enabled)).unwrap();
        let other = File::open(&p).unwrap();
        other.try_lock_shared().unwrap();
        assert!(matches!(a.lock(LockMode::Exclusive), Err(Error::Locked)));
        // Nothing is left behind in the process table by the refused lock.
        let b = FileStorage::open_with(&p, OpenMode::ReadOnly, opts(Locking::Enabled)).unwrap();
        b.lock(LockMode::Shared).unwrap();
        a.lock(LockMode::Shared).unwrap();
        drop(other);
        drop((a, b));
        let c = FileStorage::open_with(&p, OpenMode::ReadWrite, opts(Locking::Enabled)).unwrap();
        c.lock(LockMode::Exclusive).unwrap();
    }

    /// A file created with an exclusive lock is locked from the moment its name appears: a
    /// thread that polls for the name (as a VFD SWMR reader polls for the file its writer is
    /// about to create) and takes a shared lock on whatever it finds never gets one while the
    /// creator's handle is alive. No temporary name is left in the directory.
    #[test]
    fn a_created_file_is_locked_when_its_name_appears() {
        let dir = tempfile::tempdir().unwrap();
        let locked = FileOptions {
            locking: Locking::Enabled,
            lock: Some(LockMode::Exclusive),
        };
        for round in 0..200 {
            let p = dir.path().join(format!("r{round}.h5"));
            let poller = {
                let p = p.clone();
                // Whatever it finds is the creator's file, alive until the join below; a shared
                // lock taken before the creator's would make the creator fail instead.
                std::thread::spawn(move || {
                    loop {
                        if let Ok(f) = File::open(&p) {
                            return f.try_lock_shared().is_ok();
                        }
                        std::thread::yield_now();
                    }
                })
            };
            let f = FileStorage::open_with(&p, OpenMode::Create, locked).unwrap();
            assert_eq!(f.path(), p);
            assert_eq!(f.open_mode(), OpenMode::Create);
            assert_eq!(f.len().unwrap(), 0);
            let got_lock = poller.join().unwrap();
            assert!(
                !got_lock,
                "round {round}: a shared lock on a file being created"
            );
            assert!(!os_lockable(&p, LockMode::Shared));
            f.write_at(0, b"x").unwrap();
            drop(f);
            assert!(os_lockable(&p, LockMode::Exclusive));
        }
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 200, "{names:?}");
        assert!(names.iter().all(|n| n.ends_with(".h5")), "{names:?}");
        // An existing file is opened, locked and only then truncated, as before.
        let p = dir.path().join("r0.h5");
        let f = FileStorage::open_with(&p, OpenMode::Create, locked).unwrap();
        assert_eq!(f.len().unwrap(), 0);
    }

    #[test]
    fn disabled_locking_skips_os_locks_only() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lock.bin");
        let b = FileStorage::open_with(&p, OpenMode::Create, opts(Locking::Disabled)).unwrap();
        assert_eq!(b.locking(), Locking::Disabled);
        b.lock(LockMode::Exclusive).unwrap();
        assert!(os_lockable(&p, LockMode::Exclusive), "no OS lock");
        // Another handle of this process is still refused.
        let c = FileStorage::open_with(&p, OpenMode::ReadOnly, opts(Locking::Disabled)).unwrap();
        assert!(already_open(c.lock(LockMode::Shared)));
        b.unlock().unwrap();
        c.lock(LockMode::Shared).unwrap();
    }

    #[test]
    fn create_locks_before_truncating() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lock.bin");
        let locked = |lock| FileOptions {
            locking: Locking::Enabled,
            lock: Some(lock),
        };
        let a = FileStorage::open_with(&p, OpenMode::Create, locked(LockMode::Exclusive)).unwrap();
        a.write_at(0, b"keep").unwrap();
        // Open elsewhere in this process: refused, and the file is untouched.
        let e = FileStorage::open_with(&p, OpenMode::Create, locked(LockMode::Exclusive));
        assert!(already_open(e));
        assert_eq!(a.len().unwrap(), 4);
        drop(a);
        // Locked by another description (another process): refused, untouched.
        let other = File::open(&p).unwrap();
        other.try_lock_shared().unwrap();
        let e = FileStorage::open_with(&p, OpenMode::Create, locked(LockMode::Exclusive));
        assert!(matches!(e, Err(Error::Locked)), "{e:?}");
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 4);
        drop(other);
        let b = FileStorage::open_with(&p, OpenMode::Create, locked(LockMode::Exclusive)).unwrap();
        assert_eq!(b.len().unwrap(), 0, "truncated once locked");
        // Shared at open for readers.
        drop(b);
        let r = FileStorage::open_with(&p, OpenMode::ReadOnly, locked(LockMode::Shared)).unwrap();
        assert!(os_lockable(&p, LockMode::Shared) && !os_lockable(&p, LockMode::Exclusive));
        drop(r);
    }

    #[test]
    fn runs_merge_only_exact_small_neighbours() {
        let extents = [
            (100, 10),                   // 0
            (0, 50),                     // 1
            (50, 50),                    // 2: 1, 2, 0 are adjacent in file order
            (200, 0),                    // 3: empty, dropped
            (111, 5),                    // 4: gap of one byte after 0
            (116, ALONE_MIN),            // 5: adjacent to 4, but large: alone
            (116 + ALONE_MIN as u64, 1), // 6: adjacent to 5, which stays alone
            (117 + ALONE_MIN as u64, 7), // 7: merges with 6
            (1 << 40, 8),                // 8
        ];
        let order = file_order(extents.iter().copied());
        assert_eq!(order, [1, 2, 0, 4, 5, 6, 7, 8]);
        let runs: Vec<Vec<usize>> = adjacent_runs(order.len(), |k| extents[order[k]])
            .into_iter()
            .map(|r| order[r].to_vec())
            .collect();
        assert_eq!(runs, [vec![1, 2, 0], vec![4], vec![5], vec![6, 7], vec![8]]);
    }

    #[test]
    fn runs_of_small_segments_stop_at_the_limit() {
        // 17 adjacent segments just below the size that travels alone: the first 16 fill
        // the limit, the 17th starts a new run.
        let small = ALONE_MIN - 1;
        let extents: Vec<(u64, usize)> = (0..17u64).map(|i| (i * small as u64, small)).collect();
        assert!(16 * small <= MERGE_LIMIT && 17 * small > MERGE_LIMIT);
        let order = file_order(extents.iter().copied());
        let runs: Vec<usize> = adjacent_runs(order.len(), |k| extents[order[k]])
            .into_iter()
            .map(|r| r.len())
            .collect();
        assert_eq!(runs, [16, 1]);
    }

    #[test]
    fn vectored_on_read_only_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ro.bin");
        FileStorage::open(&p, OpenMode::Create)
            .unwrap()
            .write_at(0, b"abcdef")
            .unwrap();
        let f = FileStorage::open(&p, OpenMode::ReadOnly).unwrap();
        let (mut a, mut b) = ([0; 2], [0; 3]);
        f.read_vectored(&mut [ReadSegment::new(3, &mut b), ReadSegment::new(0, &mut a)])
            .unwrap();
        assert_eq!((&a, &b), (b"ab", b"def"));
        let e = f.write_vectored(&[WriteSegment::new(0, b"x")]).unwrap_err();
        assert!(
            matches!(&e, Error::Io { op: IoOp::WriteVectored, source, .. } if source.kind() == io::ErrorKind::PermissionDenied),
            "{e:?}"
        );
        f.write_vectored(&[]).unwrap();
    }

    /// Runs of many mid-sized adjacent segments (more than one `preadv`/`pwritev` takes) move
    /// straight between the file and the segments, in any slice order; runs of tiny segments
    /// still go through the bounce buffer. Both give the bytes one-at-a-time I/O gives.
    #[test]
    fn straight_through_and_bounced_runs_move_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let f = FileStorage::open(dir.path().join("v.bin"), OpenMode::Create).unwrap();
        for (len, count) in [(600usize, 3000usize), (1024, 2048), (7, 5000), (300_000, 3)] {
            assert_eq!(straight_through(len * 2, 2), len >= STRAIGHT_MIN_AVERAGE);
            let total = len * count;
            let bytes: Vec<u8> = (0..total).map(|i| (i * 31 % 251) as u8).collect();
            // Written as segments in a shuffled slice order (odd indices first, descending).
            let mut order: Vec<usize> = (0..count).filter(|i| i % 2 == 1).rev().collect();
            order.extend((0..count).filter(|i| i % 2 == 0));
            let writes: Vec<WriteSegment<'_>> = order
                .iter()
                .map(|&i| WriteSegment::new((i * len) as u64, &bytes[i * len..(i + 1) * len]))
                .collect();
            f.write_vectored(&writes).unwrap();
            let mut back = vec![0u8; total];
            f.read_at(0, &mut back).unwrap();
            assert_eq!(back, bytes, "segments of {len}");
            let mut out = vec![0u8; total];
            let mut pieces: Vec<(usize, &mut [u8])> = out.chunks_mut(len).enumerate().collect();
            pieces.reverse();
            let mut reads: Vec<ReadSegment<'_>> = pieces
                .into_iter()
                .map(|(i, buf)| ReadSegment::new((i * len) as u64, buf))
                .collect();
            f.read_vectored(&mut reads).unwrap();
            drop(reads);
            assert_eq!(out, bytes, "segments of {len}");
        }
        // A straight-through run that reaches past the end is refused before any read.
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        let len = f.len().unwrap();
        let e = f
            .read_vectored(&mut [
                ReadSegment::new(len - 4096, &mut a),
                ReadSegment::new(len, &mut b),
            ])
            .unwrap_err();
        assert!(matches!(e, Error::OutOfBounds { .. }), "{e:?}");
    }

    #[test]
    fn sparse_growth_reads_zero() {
        let dir = tempfile::tempdir().unwrap();
        let f = FileStorage::open(dir.path().join("s.bin"), OpenMode::Create).unwrap();
        f.write_at(1 << 20, &[7]).unwrap();
        assert_eq!(f.len().unwrap(), (1 << 20) + 1);
        let mut buf = [1u8; 16];
        f.read_at(1000, &mut buf).unwrap();
        assert_eq!(buf, [0; 16]);
    }
}
