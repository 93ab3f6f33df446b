//! Stand-in for the C-API side when h5-bench is built without the `c-api` feature: every
//! workload answers "not available", and the driver leaves the C columns out.

use std::path::Path;

use h5::FormatBounds;

use super::RunOut;
use super::h5side::{AppendSizes, Field, FieldKind};
use crate::common::BenchResult;

/// Whether this build has the C side (it has not).
pub(crate) const AVAILABLE: bool = false;

fn not_built() -> BenchResult<RunOut> {
    Ok(RunOut::NotAvailable(
        "h5-bench was built without the c-api feature".to_owned(),
    ))
}

/// libhdf5's version: none in this build.
pub(crate) fn init() -> String {
    "not built (feature c-api)".to_owned()
}

/// See the C side's `field_write_read`.
pub(crate) fn field_write_read(
    _: &Path,
    _: FieldKind,
    _: &Field,
    _: usize,
    _: FormatBounds,
    _: bool,
) -> BenchResult<RunOut> {
    not_built()
}

/// See the C side's `slabs`.
pub(crate) fn slabs(
    _: &Path,
    _: &[String],
    _: &[(usize, usize, usize)],
    _: usize,
    _: Option<u64>,
    _: Option<u64>,
) -> BenchResult<RunOut> {
    not_built()
}

/// See the C side's `w4`.
pub(crate) fn w4(_: &Path, _: AppendSizes, _: FormatBounds, _: bool) -> BenchResult<RunOut> {
    not_built()
}

/// See the C side's `w5`.
pub(crate) fn w5(_: &Path, _: usize, _: &[usize], _: FormatBounds, _: bool) -> BenchResult<RunOut> {
    not_built()
}
