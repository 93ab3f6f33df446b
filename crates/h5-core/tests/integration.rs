//! The integration tests of `h5-core` in one test binary: each former test file is a module here
//! (its tests are named `file::test`, e.g. `cargo test -p h5-core --test integration
//! create_header::`), so the workspace links one binary instead of one per file.
//!
//! Their own binaries (listed in `Cargo.toml`): `corrupt` (it bounds the process's resident memory,
//! which other tests running beside it would add to).

mod create_header;
mod fixture_datasets;
mod fixture_groups;
mod free_space;
mod layouts;
mod space;
mod vds;
