//! The integration tests of `h5-metacache` in one test binary: each former test file is a module
//! here (its tests are named `file::test`, e.g. `cargo test -p h5-metacache --test integration
//! flush_deps_class::`), so the workspace links one binary instead of one per file.

mod common;

mod flush_deps_class;
mod index_lru_insert;
mod model;
mod page_check;
mod protect_unprotect;
mod resize_config_stats;
mod smoke;
mod trace_replay;
