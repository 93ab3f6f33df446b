//! The integration tests of `h5` that open VFD SWMR files, in one test binary (each former test
//! file a module, its tests named `file::test`). Their own process, apart from `integration.rs`:
//! while a VFD SWMR file is open, the process-wide API guard serializes every public call of
//! every thread (OQ-11).

mod swmr_common;

mod earray_known_block;
mod swmr_safe;
mod swmr_writer;
