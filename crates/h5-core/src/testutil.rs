//! Helpers of the engine's unit tests.

use std::sync::Arc;

use h5_metacache::CacheConfig;

use crate::file::{CacheSettings, FileShared};
use crate::write::{CreateOptions, FormatBounds};

/// Cache settings of the tests: with `tiny`, a 1 KiB metadata cache re-validated after every
/// call.
pub(crate) fn settings(tiny: bool) -> CacheSettings {
    CacheSettings {
        metadata: tiny.then(|| CacheConfig::fixed_size(1024)),
        invariant_checks: tiny,
        ..CacheSettings::default()
    }
}

/// A new in-memory file (format bounds V110) and its storage.
pub(crate) fn new_file(tiny: bool) -> (Arc<dyn h5_io::Storage>, Arc<FileShared>) {
    let storage: Arc<dyn h5_io::Storage> = Arc::new(h5_io::MemoryStorage::new());
    let file = FileShared::create(
        Arc::clone(&storage),
        &settings(tiny),
        &CreateOptions {
            bounds: FormatBounds::V110,
            ..CreateOptions::default()
        },
        None,
    )
    .expect("a new in-memory file");
    (storage, file)
}
