//! Opening a file by path: the lock (libhdf5's: shared for readers, exclusive for writers,
//! taken before a create truncates), the rollback journal of a writer and the recovery of a
//! journal left by a writer that stopped (docs/design.md §6).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use h5_core::guard::OnClose;
use h5_core::legacy_swmr::SwmrWriteHook;
use h5_core::write::IN_PLACE_MARKER;
use h5_io::{
    Coalescing, FileOptions, FileStorage, JournalOptions, Journaled, LockMode, Locking, OpenMode,
    Storage, StorageExt,
};

use crate::{Error, FileAccess, Result, drivers};

/// How a path is opened.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    /// `File::open`: shared lock.
    Read,
    /// `File::open_rw`: exclusive lock, rollback journal.
    ReadWrite,
    /// `File::create`: exclusive lock, then truncation, rollback journal.
    Create,
    /// A VFD SWMR writer opening an existing file: shared lock (so that readers which opened
    /// the file first are not refused; other writers are), `crate::swmr` turns the journal
    /// off.
    SwmrReadWrite,
}

/// A file opened by path: the storage the engine gets, what closing it releases, and (for a
/// writer) what entering legacy SWMR-writing mode does to them.
pub(crate) struct Opened {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) on_close: OnClose,
    pub(crate) swmr_write: Option<SwmrWriteHook>,
}

impl Opened {
    /// Hands the close and SWMR-writing hooks to the engine's file.
    pub(crate) fn attach(self, shared: &h5_core::file::FileShared) {
        shared.storage().set_on_close(self.on_close);
        if let Some(hook) = self.swmr_write {
            shared.set_swmr_write_hook(hook);
        }
    }
}

/// The rollback journal kept beside the file at `path` while it is open for writing:
/// `<path>-journal` (SQLite's naming). Delete it only if you know its file is not to be rolled
/// back: the next opener of the file applies it when it is hot.
pub fn journal_path(path: impl AsRef<Path>) -> PathBuf {
    let path = path.as_ref();
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push("-journal");
    path.with_file_name(name)
}

/// Opens `path` in `mode` with `access`'s locking, journal and decorator.
pub(crate) fn open_path(path: &Path, mode: Mode, access: &FileAccess) -> Result<Opened> {
    let locking = access.locking().with_env_override();
    let locked = |lock| FileOptions {
        locking,
        lock: Some(lock),
    };
    match mode {
        Mode::Read => open_read(path, locking, access),
        Mode::ReadWrite => {
            let data =
                FileStorage::open_with(path, OpenMode::ReadWrite, locked(LockMode::Exclusive))?;
            drivers::refuse_members(path, &data)?;
            for_writing(path, Arc::new(data), access, false).map(|o| hold_small_writes(o, access))
        }
        Mode::SwmrReadWrite => {
            let data = FileStorage::open_with(path, OpenMode::ReadWrite, locked(LockMode::Shared))?;
            drivers::refuse_members(path, &data)?;
            for_writing(path, Arc::new(data), access, false)
        }
        Mode::Create => {
            let data = FileStorage::open_with(path, OpenMode::Create, locked(LockMode::Exclusive))?;
            for_writing(path, Arc::new(data), access, true).map(|o| hold_small_writes(o, access))
        }
    }
}

/// A plain writer's storage holds its small writes and sends them down merged with their
/// neighbours ([`Coalescing`]): one system call for many evicted metadata entries or tiny
/// datasets' data. Every flush sends everything down (its commit), so a flushed file is whole on
/// disk. Not for a page buffer (which already writes whole pages) nor for either SWMR writer:
/// VFD SWMR's readers read the HDF5 file at the end of a tick, and legacy SWMR's readers rely on
/// the order of the writes, so entering legacy SWMR-writing mode stops the holding first.
fn hold_small_writes(opened: Opened, access: &FileAccess) -> Opened {
    let settings = access.settings();
    if settings.page_buffer.is_some() || settings.swmr.is_some() || access.is_swmr_write() {
        return opened;
    }
    let coalescing = Arc::new(Coalescing::new(opened.storage));
    let swmr_write = opened.swmr_write.map(|enter| {
        let coalescing = Arc::clone(&coalescing);
        Box::new(move || {
            coalescing.stop_holding()?;
            enter()
        }) as SwmrWriteHook
    });
    Opened {
        storage: coalescing,
        on_close: opened.on_close,
        swmr_write,
    }
}

fn unlocked() -> FileOptions {
    FileOptions {
        locking: Locking::Disabled,
        lock: None,
    }
}

/// Opens a reader's storage; a hot journal beside the file is rolled back first (which needs
/// the exclusive lock and write access for a moment, as SQLite's readers do).
fn open_read(path: &Path, locking: Locking, access: &FileAccess) -> Result<Opened> {
    let shared = FileOptions {
        locking,
        lock: Some(LockMode::Shared),
    };
    // A family by its printf pattern, or a multi/split file by its base name (drivers.rs).
    if !path.exists() {
        if let Some(pattern) = drivers::Pattern::parse(path) {
            let members = drivers::open_family(&pattern, shared)?;
            return Ok(opened_locked(members, access));
        }
        if let Some(holder) = drivers::superblock_member(path) {
            let data = FileStorage::open_with(&holder, OpenMode::ReadOnly, shared)?;
            return match drivers::members_of(&holder, data, shared)? {
                Ok(members) => Ok(opened_locked(members, access)),
                Err(data) => Ok(opened_locked(Arc::new(data), access)),
            };
        }
    }
    let mut data = FileStorage::open_with(path, OpenMode::ReadOnly, shared)?;
    let jp = journal_path(path);
    if jp.exists() {
        let hot = match FileStorage::open_with(&jp, OpenMode::ReadOnly, unlocked()) {
            Ok(journal) => h5_io::is_hot(&data, &journal)?,
            Err(_) => false, // gone meanwhile
        };
        if hot {
            if locking == Locking::Disabled {
                // Without locks a writer may be alive: rolling back could destroy its work.
                return Err(Error::NeedsRecovery(format!(
                    "{}: an h5 writer was changing it in place (its journal {} is hot); with \
                     file locking disabled only a writer (File::open_rw) rolls it back",
                    path.display(),
                    jp.display()
                )));
            }
            drop(data);
            recover_path(path, locking, access.settings().sync)?;
            data = FileStorage::open_with(path, OpenMode::ReadOnly, shared)?;
        }
    }
    match drivers::members_of(path, data, shared)? {
        Ok(members) => Ok(opened_locked(members, access)),
        Err(data) => Ok(opened_locked(Arc::new(data), access)),
    }
}

/// A reader's storage `data` (one file or several members), which holds the locks that
/// closing it releases.
fn opened_locked<S: Storage + 'static>(data: Arc<S>, access: &FileAccess) -> Opened {
    let lock = Arc::clone(&data);
    Opened {
        storage: access.decorate(data),
        on_close: Box::new(move || {
            let _ = lock.unlock();
        }),
        swmr_write: None,
    }
}

/// Rolls the file at `path` back with its journal, under the exclusive lock, and deletes the
/// journal.
fn recover_path(path: &Path, locking: Locking, sync: bool) -> Result<()> {
    let options = FileOptions {
        locking,
        lock: Some(LockMode::Exclusive),
    };
    let jp = journal_path(path);
    let needs_write = |e: h5_io::Error| {
        Error::NeedsRecovery(format!(
            "{}: an h5 writer stopped while changing it in place; rolling back its journal \
             {} needs the file opened for writing: {e}",
            path.display(),
            jp.display()
        ))
    };
    let data = FileStorage::open_with(path, OpenMode::ReadWrite, options).map_err(needs_write)?;
    let journal =
        FileStorage::open_with(&jp, OpenMode::ReadWrite, unlocked()).map_err(needs_write)?;
    h5_io::recover(&data, &journal, sync)?;
    drop(journal);
    remove_journal(&jp, sync);
    Ok(())
}

/// Deletes the journal file at `jp` (best effort: a leftover empty journal is harmless).
fn remove_journal(jp: &Path, sync: bool) {
    if std::fs::remove_file(jp).is_ok() && sync {
        sync_dir(jp);
    }
}

/// Makes the creation or deletion of the file at `p` durable (its directory is synced).
fn sync_dir(p: &Path) {
    #[cfg(unix)]
    {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    #[cfg(not(unix))]
    let _ = p;
}

/// A writer's storage: `data` (locked exclusively, truncated when `create`) behind the rollback
/// journal, which first rolls back what an earlier writer left.
fn for_writing(
    path: &Path,
    data: Arc<FileStorage>,
    access: &FileAccess,
    create: bool,
) -> Result<Opened> {
    let jp = journal_path(path);
    let sync = access.settings().sync;
    let decorated = access.decorate(Arc::clone(&data) as Arc<dyn Storage>);
    if create {
        // The truncated file's old journal is meaningless now.
        remove_journal(&jp, sync);
    }
    if !access.journal() {
        if jp.exists() {
            let journal = FileStorage::open_with(&jp, OpenMode::ReadWrite, unlocked())?;
            h5_io::recover(&*decorated, &journal, sync)?;
            drop(journal);
            remove_journal(&jp, sync);
        }
        let lock = Arc::clone(&data);
        let shared = Arc::clone(&data);
        return Ok(Opened {
            storage: decorated,
            on_close: Box::new(move || {
                let _ = lock.unlock();
            }),
            swmr_write: Some(Box::new(move || share_lock(&shared))),
        });
    }
    let journal = match FileStorage::open_with(&jp, OpenMode::CreateNew, unlocked()) {
        Ok(j) => {
            if sync {
                sync_dir(&jp);
            }
            j
        }
        Err(_) => FileStorage::open_with(&jp, OpenMode::ReadWrite, unlocked())?,
    };
    let journal = Arc::new(journal);
    let (journaled, _recovery) = Journaled::open(
        decorated,
        Arc::clone(&journal) as Arc<dyn Storage>,
        JournalOptions { sync },
    )?;
    let journaled = Arc::new(journaled);
    let swmr_write: SwmrWriteHook = {
        let journaled = Arc::clone(&journaled);
        let data = Arc::clone(&data);
        let jp = jp.clone();
        Box::new(move || {
            if !journaled.detach() {
                return Err(h5_core::Error::Unsupported(
                    "stopping the rollback journal in the middle of a change".into(),
                ));
            }
            remove_journal(&jp, sync);
            share_lock(&data)
        })
    };
    Ok(Opened {
        storage: journaled,
        swmr_write: Some(swmr_write),
        on_close: Box::new(move || {
            // Empty: the last flush completed. Otherwise it is kept for the next opener.
            if journal.len().is_ok_and(|n| n == 0) {
                remove_journal(&jp, sync);
            }
            let _ = data.unlock();
        }),
    })
}

/// A legacy SWMR writer's lock: shared, so that SWMR readers (libhdf5's take a shared lock while
/// they open) are not refused while other writers still are; libhdf5 drops a SWMR writer's lock
/// altogether, the superblock's status flags keeping other writers out.
fn share_lock(data: &FileStorage) -> h5_core::Result<()> {
    Ok(data.lock(h5_io::LockMode::Shared)?)
}

/// `e`, or a clearer error when the reason the file is not HDF5 is the in-place marker of a
/// writer that stopped and whose journal is gone.
pub(crate) fn explain(path: &Path, e: Error) -> Error {
    if !matches!(e, Error::NotHdf5) {
        return e;
    }
    let Ok(s) = FileStorage::open_with(path, OpenMode::ReadOnly, unlocked()) else {
        return e;
    };
    let len = s.len().unwrap_or(0);
    let mut at = 0u64;
    while at < len {
        let mut sig = [0u8; 8];
        if s.read_at_zero_fill(at, &mut sig).is_ok() && sig == IN_PLACE_MARKER {
            return Error::NeedsRecovery(format!(
                "{}: an h5 writer stopped while changing it in place and its rollback journal \
                 {} is missing: the file mixes two states and cannot be opened safely",
                path.display(),
                journal_path(path).display()
            ));
        }
        at = if at == 0 { 512 } else { at * 2 };
    }
    e
}
