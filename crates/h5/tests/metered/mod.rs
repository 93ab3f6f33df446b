//! Files in memory behind the `Metrics` storage decorator, for tests that count what a change
//! writes.

use std::sync::Arc;

use h5::{CreateOptions, FileAccess, FormatBounds};
use h5_io::{MemoryStorage, Metrics, Storage};

/// A new file in memory with `bounds`, and the decorator counting its storage calls.
pub(crate) fn in_memory(bounds: FormatBounds) -> (Arc<Metrics<MemoryStorage>>, h5::File) {
    let storage = Arc::new(Metrics::new(MemoryStorage::new()));
    let file = h5::File::create_in(
        Arc::clone(&storage) as Arc<dyn Storage>,
        &FileAccess::default(),
        &CreateOptions {
            bounds,
            ..CreateOptions::default()
        },
        None,
    )
    .unwrap();
    (storage, file)
}

/// Bytes written by `change` followed by a flush (the file flushed first).
pub(crate) fn bytes_of(
    storage: &Metrics<MemoryStorage>,
    file: &h5::File,
    change: impl FnOnce(),
) -> u64 {
    file.flush().unwrap();
    let before = storage.snapshot();
    change();
    file.flush().unwrap();
    storage.snapshot().since(&before).bytes_written
}
