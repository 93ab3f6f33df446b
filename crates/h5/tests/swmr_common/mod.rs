//! Helpers shared by the VFD SWMR test suites.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use h5::{
    CreateOptions, FileAccess, FileSpaceOptions, FormatBounds, PageBufferConfig, SpaceStrategy,
    SwmrConfig,
};
use h5_io::{FileStorage, OpenMode, Storage};
use h5_swmr::reader::{MdReader, ReaderParams, ReaderStorage};

pub const PAGE: u64 = 4096;

/// Paged creation options in the 1.10 formats.
pub fn paged() -> CreateOptions {
    CreateOptions {
        bounds: FormatBounds::V110,
        file_space: FileSpaceOptions::default()
            .with_strategy(SpaceStrategy::Page, false, 1)
            .with_page_size(PAGE),
        ..CreateOptions::default()
    }
}

/// A writer configuration (manual ticks unless `tick_len` is set).
pub fn writer_cfg(tick_len: i32) -> SwmrConfig {
    SwmrConfig {
        tick_len,
        max_lag: 3,
        md_pages_reserved: 2,
        flush_raw_data: true,
        ..SwmrConfig::writer()
    }
}

/// A reader configuration matching [`writer_cfg`].
pub fn reader_cfg(tick_len: i32) -> SwmrConfig {
    SwmrConfig {
        tick_len,
        max_lag: 3,
        md_pages_reserved: 2,
        presume_posix_semantics: true,
        open_timeout: Some(Duration::from_secs(20)),
        ..SwmrConfig::reader()
    }
}

/// Access options with a page buffer of `pages` pages and `cfg`.
pub fn access(cfg: SwmrConfig, pages: usize) -> FileAccess {
    FileAccess::default()
        .page_buffer(PageBufferConfig::new(pages * PAGE as usize, 0, 0).unwrap())
        .vfd_swmr(cfg)
}

/// The metadata file of `path` with the default name.
pub fn md_of(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.md", path.display()))
}

/// What a reader would see right now, without VFD SWMR bookkeeping: the HDF5 file through a
/// reader driver over the metadata file's current index (a snapshot, for checks in the
/// writer's own process).
pub fn snapshot(path: &Path) -> h5::File {
    let md: Arc<dyn Storage> =
        Arc::new(FileStorage::open(md_of(path), OpenMode::ReadOnly).unwrap());
    let mut r = MdReader::new(
        Some(md),
        md_of(path),
        ReaderParams {
            md_pages_reserved: 2,
            max_lag: 3,
            tick: Duration::from_millis(100),
            retry_limit: Duration::from_secs(2),
            strict_lag: false,
        },
        None,
    );
    r.load().unwrap();
    let hdf5: Arc<dyn Storage> = Arc::new(FileStorage::open(path, OpenMode::ReadOnly).unwrap());
    let drv: Arc<dyn Storage> = Arc::new(ReaderStorage::new(hdf5, r));
    // What the writer publishes carries its marks (write and SWMR-write status flags), which
    // VFD SWMR readers accept.
    h5::File::from_storage(
        drv,
        &FileAccess::default().ignore_open_for_writing(true),
        path.parent().map(Path::to_path_buf),
    )
    .unwrap()
}

/// The metadata file's header and index as published now.
pub fn published(path: &Path) -> (h5_swmr::format::MdHeader, h5_swmr::format::MdIndex) {
    let b = std::fs::read(md_of(path)).unwrap();
    let h = h5_swmr::format::MdHeader::decode(&b).unwrap();
    let ib = &b[h.index_offset as usize..(h.index_offset + h.index_length) as usize];
    (
        h,
        h5_swmr::format::MdIndex::decode(ib, u64::from(h.page_size)).unwrap(),
    )
}

/// Starts this test binary again in a child process running only the test
/// `child_process_role`, with `role` in the environment variable `role_var` and `arg` (JSON) in
/// `arg_var`; its output is piped for [`child_result`].
pub fn spawn_role(
    role_var: &str,
    arg_var: &str,
    role: &str,
    arg: &serde_json::Value,
) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "child_process_role",
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env(role_var, role)
        .env(arg_var, arg.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a child of [`spawn_role`] and returns the JSON object it printed on its `RESULT`
/// line (panics with its output when there is none).
pub fn child_result(child: std::process::Child) -> serde_json::Value {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| {
            panic!(
                "child printed no result (status {}):\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(line).unwrap()
}
