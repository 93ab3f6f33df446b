//! The integration tests of `h5` in one test binary: each former test file is a module here (its
//! tests are named `file::test`, e.g. `cargo test -p h5 --test integration api::`), so the
//! workspace links one binary instead of one per file and runs every file's tests side by side.
//!
//! Files that stay their own binary (listed in `Cargo.toml`): the `*_allocations` tests (each
//! installs `dhat` as the global allocator and counts the process's allocations), `valgrind` (runs
//! its own binary under valgrind by the test's exact name) and `swmr_procs` / `swmr_zoo` (start
//! their own binary again to run the test `child_process_role`). The tests that open VFD SWMR files
//! are in `vfd_swmr.rs`: while one is open, the process-wide API guard serializes every public
//! call, which tests here that need two calls in flight at once (`concurrent_loads`) must not meet.

mod metered;

mod api;
mod append_chunks;
mod append_runs_proptest;
mod array_index_proptest;
mod batch_index_insert;
mod comments;
mod concurrent_loads;
mod copy;
mod dataset_handle_slot;
mod dense_proptest;
mod drivers;
mod durability;
mod edge_chunks;
mod fixture_attributes;
mod free_space_rw;
mod global_heap_reuse;
mod handles;
mod incremental_index;
mod incremental_metadata;
mod incremental_v1;
mod large_index_reads;
mod lazy_chunk_index;
mod legacy_swmr;
mod legacy_swmr_flush_order;
mod legacy_swmr_procs;
mod legacy_swmr_procs_btree;
mod legacy_swmr_write;
mod modify_in_place;
mod new_members;
mod open_by_name;
mod open_for_writing;
mod other_floats;
mod page_buffer;
mod raw_api;
mod read_api;
mod read_into;
mod references;
mod roundtrip_proptest;
mod sohm;
mod threads;
mod vds_unlimited;
mod whole_chunk_writes;
mod whole_write;
mod write_bounds;
mod write_chunk_index;
mod write_earliest;
mod write_file_space;
mod write_filters;
mod write_io;
mod write_matrix;
mod write_types;
