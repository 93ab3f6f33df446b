//! The integration tests of `h5-format` in one test binary: each former test file is a module here
//! (its tests are named `file::test`, e.g. `cargo test -p h5-format --test integration
//! encode_headers::`), so the workspace links one binary instead of one per file.

mod encode_headers;
mod encode_real_files;
mod fractal_builder;
mod fractal_builder_vs_libhdf5;
mod fractal_encoders_real;
mod free_space_real;
mod heaps_fuzz;
mod heaps_real;
mod index_encoders_real;
mod index_structures;
mod no_panic;
mod real_files;
