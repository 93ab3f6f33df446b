//! Trace files (spec §3.17, MDC-126, MDC-127): one line per cache call, in the v1 text format that
//! [`crate::replay`] documents, parses and replays.
//!
//! ```text
//! # h5-metacache trace v1
//! set_config {"version":1,...} # ok
//! insert 0x100 64 2 pin # ok
//! protect 0x100 64 2 ro # hit
//! unprotect 0x100 dirtied # ok
//! move 0x100 0x200 2 # ok
//! flush # ok
//! ```
//!
//! Applying a configuration with `open_trace_file` and `trace_file_name` opens (truncates) the file and
//! writes [`TRACE_HEADER`]; that configuration is the first record. From then on every public call
//! that changes the cache (insert, protect, unprotect, resize, move, pin, unpin, mark dirty or clean,
//! expunge, single-entry flush, flush dependencies, flushes, set_config) appends one record: the call
//! as the replay tool reads it, then ` # ` and the result (`ok`, `hit`, `miss`, `absent` or `err`).
//! A configuration with `close_trace_file` closes the file (that configuration is not recorded).
//! Queries are not recorded. The format is deterministic: the same calls give the same bytes
//! (MDC-127). Records are buffered; [`MetadataCache::flush_trace`] or closing the trace writes them
//! out.

use std::fs::File;
use std::io::{BufWriter, Write};

use crate::cache::MetadataCache;
use crate::class::CacheTypes;

/// First line of every trace file.
pub const TRACE_HEADER: &str = "# h5-metacache trace v1";

/// An open trace file.
pub(crate) struct Tracer {
    out: BufWriter<File>,
    name: String,
}

impl Tracer {
    pub(crate) fn create(name: &str) -> std::io::Result<Self> {
        let mut out = BufWriter::new(File::create(name)?);
        writeln!(out, "{TRACE_HEADER}")?;
        Ok(Self {
            out,
            name: name.to_string(),
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        let _ = self.out.flush();
    }
}

impl<T: CacheTypes> MetadataCache<T> {
    /// Append one record; `outcome` `None` means the call failed. A trace that cannot be written is
    /// closed (tracing must never make a cache call fail) and counted.
    pub(crate) fn trace_op(&mut self, op: std::fmt::Arguments<'_>, outcome: Option<&str>) {
        let Some(t) = self.tracer.as_mut() else {
            return;
        };
        let r = writeln!(t.out, "{op} # {}", outcome.unwrap_or("err"));
        if r.is_err() {
            self.tracer = None;
            self.stats.trace_write_failures += 1;
        }
    }

    /// Whether a trace file is open.
    pub fn is_tracing(&self) -> bool {
        self.tracer.is_some()
    }

    /// Flush buffered trace records to the file.
    pub fn flush_trace(&mut self) -> std::io::Result<()> {
        match self.tracer.as_mut() {
            Some(t) => t.out.flush(),
            None => Ok(()),
        }
    }
}
