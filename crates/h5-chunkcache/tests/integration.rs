//! The integration tests of `h5-chunkcache` in one test binary: each former test file is a module
//! here (its tests are named `file::test`, e.g. `cargo test -p h5-chunkcache --test integration
//! bypass::`), so the workspace links one binary instead of one per file.
//!
//! Their own binaries (listed in `Cargo.toml`): `parallel` (it checks that one cache's codec calls
//! run on several threads at once).

mod common;
mod sparse_mock;

mod bypass;
mod cache;
mod defined;
mod direct;
mod extent;
mod flows;
mod reference;
mod shared;
mod shared_vs_private;
mod whole;
