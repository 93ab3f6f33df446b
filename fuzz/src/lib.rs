//! Fuzz targets of every h5 decoder entry point, run by AFL++ through `cargo afl` (see
//! `fuzz/README.md` and `scripts/fuzz`).
//!
//! A target is a function over the fuzzer's bytes ([`TARGETS`]): it decodes them and must
//! return, whatever they are; a panic, an abort (a failed allocation under the fuzzer's memory
//! limit), or a run over the time limit is a finding. Every target runs with lookup3 checksum
//! verification off ([`run`]), since a fuzzer cannot forge checksums and would otherwise never get
//! past them.
//!
//! * [`format`]: the `h5-format` decoders, one target per structure;
//! * [`filters`]: the filter pipeline, every filter's decoder;
//! * [`file`]: a whole file opened from memory and walked as `h5 dump --json` walks it.
//!
//! [`seeds`] writes each target's seed corpus from the fixture files; `tests/replay.rs` runs the
//! seeds and the findings kept as regressions (`fixtures/corrupt/fuzz/<target>/`) through the
//! targets as plain tests.

#![forbid(unsafe_code)]

pub mod file;
pub mod filters;
pub mod format;
pub mod input;
pub mod seeds;

/// Every target by name.
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("superblock", format::superblock),
    ("object_header", format::object_header),
    ("message", format::message),
    ("datatype", format::datatype),
    ("btree1", format::btree1),
    ("btree2", format::btree2),
    ("local_heap", format::local_heap),
    ("global_heap", format::global_heap),
    ("virtual_mappings", format::virtual_mappings),
    ("fractal_heap", format::fractal_heap),
    ("fixed_array", format::fixed_array),
    ("extensible_array", format::extensible_array),
    ("free_space", format::free_space),
    ("symbol_node", format::symbol_node),
    ("sohm_table", format::sohm_table),
    ("filters", filters::filters),
    ("file", file::file),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// Runs target `f` on `data` as the fuzzer runs it: checksum verification off.
pub fn run(f: fn(&[u8]), data: &[u8]) {
    h5_format::checksum::without_verification(|| f(data));
}
