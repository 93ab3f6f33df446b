//! The integration tests of `h5-cli` in one test binary: each former test file is a module here
//! (its tests are named `file::test`, e.g. `cargo test -p h5-cli --test integration cli::`), so the
//! workspace links one binary instead of one per file.

mod cli;
mod copy_commands;
mod dump_h5dump_forms;
mod dump_options;
mod dump_references;
mod json_values;
mod mutate;
mod read_commands;
mod swmr_commands;
