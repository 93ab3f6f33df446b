//! Trace files (spec §3.17, MDC-126, MDC-127): the v1 text format, its writer and its parser. A trace
//! has one line per cache call; [`crate::replay`] replays a parsed trace against synthetic clients.
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
//! (a [`TraceOp`]), then ` # ` and the result (an [`Outcome`]: `ok`, `hit`, `miss`, `absent` or
//! `err`).
//! A configuration with `close_trace_file` closes the file (that configuration is not recorded).
//! Queries are not recorded. The format is deterministic: the same calls give the same bytes
//! (MDC-127). Records are buffered; [`MetadataCache::flush_trace`] or closing the trace writes them
//! out.
//!
//! # Format, version 1
//!
//! A trace is UTF-8 text, one record per line. The writer produces exactly these lines (plus the
//! ` # RESULT` comment); the parser accepts them and a few conveniences for hand-written traces.
//!
//! ```text
//! # h5-metacache trace v1
//! set_config JSON
//! insert ADDR SIZE TYPE [pin] [flush_last] [mark]
//! protect ADDR SIZE TYPE [ro]
//! unprotect ADDR [dirtied] [deleted] [pin] [unpin] [mark] [free_space] [take_ownership]
//! resize ADDR NEW_SIZE
//! move OLD_ADDR NEW_ADDR [TYPE]
//! pin ADDR
//! unpin ADDR
//! mark_dirty ADDR
//! mark_clean ADDR
//! expunge ADDR [TYPE] [free_space]
//! flush_entry ADDR [clear_only] [invalidate] [free_space] [take_ownership]
//! flush_dep PARENT CHILD
//! flush_undep PARENT CHILD
//! flush
//! flush_marked
//! flush_invalidate
//! ```
//!
//! * `ADDR`, `SIZE`, `PARENT`, `CHILD` are decimal or `0x`-prefixed hexadecimal; `TYPE` is a class id
//!   (0 .. 255; the replay registers ids up to the largest one used, at most 32). The writer prints
//!   addresses in hex and sizes and types in decimal.
//! * Flag words follow the positional fields, separated by spaces, in any order; an unknown word is
//!   an error. The writer prints them in the order listed.
//! * Everything from `#` to the end of the line is a comment. The writer ends every record with
//!   ` # RESULT`, where `RESULT` is `ok`, `hit` or `miss` (protect), `absent` (a move of an address that
//!   is not cached) or `err` (the call failed). The parser keeps the first word of a comment (less
//!   trailing punctuation) as the record's expected [`Outcome`] when it is one of those five; any
//!   other comment is ignored. Blank and comment-only lines are ignored; a comment line
//!   `# h5-metacache trace vN` with `N` other than 1 is rejected.
//! * `set_config` is followed by one JSON object (a [`CacheConfig`]), then optionally a `#` comment.
//!   Missing fields take their default-serial values ([`CacheConfig::from_json`]), so a hand-written
//!   trace can say `set_config {"initial_size": 1048576}`. The writer records the configuration as
//!   applied, including `open_trace_file` and the trace file name.
//! * `protect` loads `SIZE` bytes when the address is not cached (the synthetic class's udata is the
//!   load size); the writer records the size of the entry after the call (0 if it failed and nothing
//!   is cached there). `insert` creates an entry of `SIZE` bytes.
//! * `pin ADDR` is `pin_protected`: the entry must be protected at that point. `unprotect ADDR` ends one
//!   of the protections taken by earlier `protect ADDR` records (read-only protections can be held
//!   several times). `move` and `expunge` name the class the call was made with; a line without it
//!   uses the class of the cached entry.
//!
//! The format is deterministic (the same calls give the same bytes, MDC-127) and versioned by its
//! header line. The writer prints every call with [`TraceOp`]'s `Display`, which the parser reads
//! back, so each line's spelling (the flag words included) is defined once, in this module.

use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};

use serde::Serialize;

use crate::cache::MetadataCache;
use crate::class::CacheTypes;
use crate::config::CacheConfig;
use crate::flags::{EntryFlushFlags, ExpungeFlags, InsertFlags, UnprotectFlags};

/// First line of every trace file.
pub const TRACE_HEADER: &str = "# h5-metacache trace v1";

// ----- records -----

/// The result a trace records for a call (the first word of a record's comment).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The call succeeded.
    Ok,
    /// A protect found the entry cached.
    Hit,
    /// A protect loaded the entry.
    Miss,
    /// A move of an address that is not cached (nothing happened).
    Absent,
    /// The call failed.
    Err,
}

impl Outcome {
    /// The word the writer uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Hit => "hit",
            Outcome::Miss => "miss",
            Outcome::Absent => "absent",
            Outcome::Err => "err",
        }
    }

    fn from_word(w: &str) -> Option<Self> {
        Some(match w {
            "ok" => Outcome::Ok,
            "hit" => Outcome::Hit,
            "miss" => Outcome::Miss,
            "absent" => Outcome::Absent,
            "err" => Outcome::Err,
            _ => return None,
        })
    }

    /// Whether a replayed `actual` result agrees with this recorded one. `ok` accepts any success
    /// (so a hand-written `protect ... # ok` accepts a hit or a miss); the others must be equal.
    pub fn accepts(self, actual: Outcome) -> bool {
        match self {
            Outcome::Ok => actual != Outcome::Err,
            _ => self == actual,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One cache call of a trace. `Display` prints it exactly as the trace writer does (without the
/// result comment).
#[derive(Clone, PartialEq, Debug)]
pub enum TraceOp {
    /// `insert ADDR SIZE TYPE [pin] [flush_last] [mark]`.
    Insert {
        /// Address.
        addr: u64,
        /// Entry size.
        size: usize,
        /// Class id.
        class: u8,
        /// `PIN`, `FLUSH_LAST`, `SET_FLUSH_MARKER`.
        flags: InsertFlags,
    },
    /// `protect ADDR SIZE TYPE [ro]`.
    Protect {
        /// Address.
        addr: u64,
        /// Entry size (the load size when the entry is not cached).
        size: usize,
        /// Class id.
        class: u8,
        /// Read-only protection.
        read_only: bool,
    },
    /// `unprotect ADDR [flags]`.
    Unprotect {
        /// Address the protection was taken at.
        addr: u64,
        /// Unprotect flags.
        flags: UnprotectFlags,
    },
    /// `resize ADDR NEW_SIZE`.
    Resize {
        /// Address.
        addr: u64,
        /// New size.
        new_size: usize,
    },
    /// `move OLD_ADDR NEW_ADDR [TYPE]`.
    Move {
        /// Current address.
        old_addr: u64,
        /// New address.
        new_addr: u64,
        /// Class named by the call; `None`: the class of the cached entry.
        class: Option<u8>,
    },
    /// `pin ADDR` (`pin_protected`).
    Pin {
        /// Address.
        addr: u64,
    },
    /// `unpin ADDR`.
    Unpin {
        /// Address.
        addr: u64,
    },
    /// `mark_dirty ADDR`.
    MarkDirty {
        /// Address.
        addr: u64,
    },
    /// `mark_clean ADDR`.
    MarkClean {
        /// Address.
        addr: u64,
    },
    /// `expunge ADDR [TYPE] [free_space]`.
    Expunge {
        /// Address.
        addr: u64,
        /// Class named by the call; `None`: the class of the cached entry.
        class: Option<u8>,
        /// `FREE_FILE_SPACE`.
        flags: ExpungeFlags,
    },
    /// `flush_entry ADDR [clear_only] [invalidate] [free_space] [take_ownership]`.
    FlushEntry {
        /// Address.
        addr: u64,
        /// Single-entry flush flags.
        flags: EntryFlushFlags,
    },
    /// `flush_dep PARENT CHILD`.
    FlushDep {
        /// Parent address.
        parent: u64,
        /// Child address.
        child: u64,
    },
    /// `flush_undep PARENT CHILD`.
    FlushUndep {
        /// Parent address.
        parent: u64,
        /// Child address.
        child: u64,
    },
    /// `flush`.
    Flush,
    /// `flush_marked`.
    FlushMarked,
    /// `flush_invalidate`.
    FlushInvalidate,
    /// `set_config JSON`.
    SetConfig(Box<CacheConfig>),
}

const INSERT_WORDS: [(InsertFlags, &str); 3] = [
    (InsertFlags::PIN, "pin"),
    (InsertFlags::FLUSH_LAST, "flush_last"),
    (InsertFlags::SET_FLUSH_MARKER, "mark"),
];
const UNPROTECT_WORDS: [(UnprotectFlags, &str); 7] = [
    (UnprotectFlags::DIRTIED, "dirtied"),
    (UnprotectFlags::DELETED, "deleted"),
    (UnprotectFlags::PIN, "pin"),
    (UnprotectFlags::UNPIN, "unpin"),
    (UnprotectFlags::SET_FLUSH_MARKER, "mark"),
    (UnprotectFlags::FREE_FILE_SPACE, "free_space"),
    (UnprotectFlags::TAKE_OWNERSHIP, "take_ownership"),
];
const EXPUNGE_WORDS: [(ExpungeFlags, &str); 1] = [(ExpungeFlags::FREE_FILE_SPACE, "free_space")];
const FLUSH_ENTRY_WORDS: [(EntryFlushFlags, &str); 4] = [
    (EntryFlushFlags::CLEAR_ONLY, "clear_only"),
    (EntryFlushFlags::INVALIDATE, "invalidate"),
    (EntryFlushFlags::FREE_FILE_SPACE, "free_space"),
    (EntryFlushFlags::TAKE_OWNERSHIP, "take_ownership"),
];

/// Write ` word` for every flag of `words` that `has` reports set.
fn write_words<F: Copy>(
    f: &mut fmt::Formatter<'_>,
    words: &[(F, &str)],
    has: impl Fn(F) -> bool,
) -> fmt::Result {
    for &(flag, word) in words {
        if has(flag) {
            write!(f, " {word}")?;
        }
    }
    Ok(())
}

impl fmt::Display for TraceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceOp::Insert {
                addr,
                size,
                class,
                flags,
            } => {
                write!(f, "insert {addr:#x} {size} {class}")?;
                write_words(f, &INSERT_WORDS, |w| flags.contains(w))
            }
            TraceOp::Protect {
                addr,
                size,
                class,
                read_only,
            } => {
                write!(f, "protect {addr:#x} {size} {class}")?;
                if *read_only {
                    f.write_str(" ro")?;
                }
                Ok(())
            }
            TraceOp::Unprotect { addr, flags } => {
                write!(f, "unprotect {addr:#x}")?;
                write_words(f, &UNPROTECT_WORDS, |w| flags.contains(w))
            }
            TraceOp::Resize { addr, new_size } => write!(f, "resize {addr:#x} {new_size}"),
            TraceOp::Move {
                old_addr,
                new_addr,
                class,
            } => {
                write!(f, "move {old_addr:#x} {new_addr:#x}")?;
                if let Some(c) = class {
                    write!(f, " {c}")?;
                }
                Ok(())
            }
            TraceOp::Pin { addr } => write!(f, "pin {addr:#x}"),
            TraceOp::Unpin { addr } => write!(f, "unpin {addr:#x}"),
            TraceOp::MarkDirty { addr } => write!(f, "mark_dirty {addr:#x}"),
            TraceOp::MarkClean { addr } => write!(f, "mark_clean {addr:#x}"),
            TraceOp::Expunge { addr, class, flags } => {
                write!(f, "expunge {addr:#x}")?;
                if let Some(c) = class {
                    write!(f, " {c}")?;
                }
                write_words(f, &EXPUNGE_WORDS, |w| flags.contains(w))
            }
            TraceOp::FlushEntry { addr, flags } => {
                write!(f, "flush_entry {addr:#x}")?;
                write_words(f, &FLUSH_ENTRY_WORDS, |w| flags.contains(w))
            }
            TraceOp::FlushDep { parent, child } => write!(f, "flush_dep {parent:#x} {child:#x}"),
            TraceOp::FlushUndep { parent, child } => {
                write!(f, "flush_undep {parent:#x} {child:#x}")
            }
            TraceOp::Flush => f.write_str("flush"),
            TraceOp::FlushMarked => f.write_str("flush_marked"),
            TraceOp::FlushInvalidate => f.write_str("flush_invalidate"),
            TraceOp::SetConfig(c) => write!(f, "set_config {}", c.to_json()),
        }
    }
}

/// One parsed trace line.
#[derive(Clone, PartialEq, Debug)]
pub struct TraceRecord {
    /// 1-based line number in the trace text.
    pub line: usize,
    /// The call.
    pub op: TraceOp,
    /// The recorded result, if the line has one.
    pub expected: Option<Outcome>,
}

impl fmt::Display for TraceRecord {
    /// The record as the writer prints it: the call, then ` # RESULT` when a result is known.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.expected {
            Some(o) => write!(f, "{} # {o}", self.op),
            None => write!(f, "{}", self.op),
        }
    }
}

// ----- parser -----

/// What is wrong with a trace line.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ParseErrorKind {
    /// The first word is not an operation of the format.
    #[error("unknown operation `{0}`")]
    UnknownOp(String),
    /// A required field is missing.
    #[error("`{op}` is missing its {field} field")]
    MissingField {
        /// The operation.
        op: &'static str,
        /// The field.
        field: &'static str,
    },
    /// A field is not a number of the right range.
    #[error("`{op}` {field} `{text}` is not a valid number ({expected})")]
    BadNumber {
        /// The operation.
        op: &'static str,
        /// The field.
        field: &'static str,
        /// The text found.
        text: String,
        /// What was expected.
        expected: &'static str,
    },
    /// A word after the positional fields is not a flag of the operation.
    #[error("`{op}` does not take the flag `{word}`")]
    UnknownFlag {
        /// The operation.
        op: &'static str,
        /// The word found.
        word: String,
    },
    /// An operation without flags has extra words.
    #[error("unexpected `{word}` after `{op}`'s fields")]
    Extra {
        /// The operation.
        op: &'static str,
        /// The first extra word.
        word: String,
    },
    /// The `set_config` JSON is malformed or is not a configuration.
    #[error("bad set_config JSON: {0}")]
    BadConfig(String),
    /// The header names a format version this parser does not read.
    #[error("unsupported trace format version `{0}` (this parser reads v1)")]
    UnsupportedVersion(String),
}

/// A trace line that could not be parsed.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("trace line {line}: {kind}")]
pub struct TraceParseError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub kind: ParseErrorKind,
}

/// Parse a whole trace. Blank and comment lines are skipped; the first bad line is an error.
pub fn parse_trace(text: &str) -> Result<Vec<TraceRecord>, TraceParseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if let Some(rec) = parse_line(raw).map_err(|kind| TraceParseError { line, kind })? {
            out.push(TraceRecord {
                line,
                op: rec.0,
                expected: rec.1,
            });
        }
    }
    Ok(out)
}

/// The outcome named by a comment (the text after `#`).
fn comment_outcome(comment: &str) -> Option<Outcome> {
    comment
        .split_whitespace()
        .next()
        .map(|w| w.trim_end_matches(|c: char| c.is_ascii_punctuation()))
        .and_then(Outcome::from_word)
}

const HEADER_PREFIX: &str = "h5-metacache trace v";

/// Parse one line: `None` for blank and comment lines.
fn parse_line(raw: &str) -> Result<Option<(TraceOp, Option<Outcome>)>, ParseErrorKind> {
    let line = raw.trim_ascii();
    if line.is_empty() {
        return Ok(None);
    }
    if let Some(comment) = line.strip_prefix('#') {
        if let Some(v) = comment.trim().strip_prefix(HEADER_PREFIX) {
            let v = v.split_whitespace().next().unwrap_or("");
            if v != "1" {
                return Err(ParseErrorKind::UnsupportedVersion(v.to_string()));
            }
        }
        return Ok(None);
    }
    let word_end = line
        .bytes()
        .position(|b| b.is_ascii_whitespace() || b == b'#')
        .unwrap_or(line.len());
    let (word, rest) = line.split_at(word_end);
    if word == "set_config" {
        return parse_set_config(rest).map(Some);
    }
    let (body, comment) = match rest.bytes().position(|b| b == b'#') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let expected = comment.and_then(comment_outcome);
    let mut f = Fields {
        op: "",
        it: body.split_ascii_whitespace(),
    };
    let op = match word {
        "insert" => {
            f.op = "insert";
            let addr = f.addr("ADDR")?;
            let size = f.size("SIZE")?;
            let class = f.class()?;
            let flags = f.flags(&INSERT_WORDS, InsertFlags::NONE)?;
            TraceOp::Insert {
                addr,
                size,
                class,
                flags,
            }
        }
        "protect" => {
            f.op = "protect";
            let addr = f.addr("ADDR")?;
            let size = f.size("SIZE")?;
            let class = f.class()?;
            let ro = f.flags(&[(true, "ro")], false)?;
            TraceOp::Protect {
                addr,
                size,
                class,
                read_only: ro,
            }
        }
        "unprotect" => {
            f.op = "unprotect";
            let addr = f.addr("ADDR")?;
            let flags = f.flags(&UNPROTECT_WORDS, UnprotectFlags::NONE)?;
            TraceOp::Unprotect { addr, flags }
        }
        "resize" => {
            f.op = "resize";
            let addr = f.addr("ADDR")?;
            let new_size = f.size("NEW_SIZE")?;
            f.end()?;
            TraceOp::Resize { addr, new_size }
        }
        "move" => {
            f.op = "move";
            let old_addr = f.addr("OLD_ADDR")?;
            let new_addr = f.addr("NEW_ADDR")?;
            let class = f.opt_class()?;
            f.end()?;
            TraceOp::Move {
                old_addr,
                new_addr,
                class,
            }
        }
        "expunge" => {
            f.op = "expunge";
            let addr = f.addr("ADDR")?;
            let class = f.opt_class()?;
            let flags = f.flags(&EXPUNGE_WORDS, ExpungeFlags::NONE)?;
            TraceOp::Expunge { addr, class, flags }
        }
        "flush_entry" => {
            f.op = "flush_entry";
            let addr = f.addr("ADDR")?;
            let flags = f.flags(&FLUSH_ENTRY_WORDS, EntryFlushFlags::NONE)?;
            TraceOp::FlushEntry { addr, flags }
        }
        "pin" | "unpin" | "mark_dirty" | "mark_clean" => {
            f.op = match word {
                "pin" => "pin",
                "unpin" => "unpin",
                "mark_dirty" => "mark_dirty",
                _ => "mark_clean",
            };
            let addr = f.addr("ADDR")?;
            f.end()?;
            match word {
                "pin" => TraceOp::Pin { addr },
                "unpin" => TraceOp::Unpin { addr },
                "mark_dirty" => TraceOp::MarkDirty { addr },
                _ => TraceOp::MarkClean { addr },
            }
        }
        "flush_dep" | "flush_undep" => {
            f.op = if word == "flush_dep" {
                "flush_dep"
            } else {
                "flush_undep"
            };
            let parent = f.addr("PARENT")?;
            let child = f.addr("CHILD")?;
            f.end()?;
            if word == "flush_dep" {
                TraceOp::FlushDep { parent, child }
            } else {
                TraceOp::FlushUndep { parent, child }
            }
        }
        "flush" | "flush_marked" | "flush_invalidate" => {
            f.op = match word {
                "flush" => "flush",
                "flush_marked" => "flush_marked",
                _ => "flush_invalidate",
            };
            f.end()?;
            match word {
                "flush" => TraceOp::Flush,
                "flush_marked" => TraceOp::FlushMarked,
                _ => TraceOp::FlushInvalidate,
            }
        }
        other => return Err(ParseErrorKind::UnknownOp(other.to_string())),
    };
    Ok(Some((op, expected)))
}

/// `set_config`: one JSON object, then an optional comment.
fn parse_set_config(rest: &str) -> Result<(TraceOp, Option<Outcome>), ParseErrorKind> {
    let text = rest.trim_start();
    if text.is_empty() || text.starts_with('#') {
        return Err(ParseErrorKind::MissingField {
            op: "set_config",
            field: "JSON",
        });
    }
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>();
    let value = match stream.next() {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(ParseErrorKind::BadConfig(e.to_string())),
        None => {
            return Err(ParseErrorKind::MissingField {
                op: "set_config",
                field: "JSON",
            });
        }
    };
    let json_end = stream.byte_offset();
    let (json, after) = text.split_at(json_end);
    let after = after.trim_start();
    let expected = match after.strip_prefix('#') {
        Some(comment) => comment_outcome(comment),
        None if after.is_empty() => None,
        None => {
            let word = after.split_whitespace().next().unwrap_or(after).to_string();
            return Err(ParseErrorKind::Extra {
                op: "set_config",
                word,
            });
        }
    };
    if !value.is_object() {
        return Err(ParseErrorKind::BadConfig(
            "a configuration must be a JSON object".to_string(),
        ));
    }
    let config = CacheConfig::from_json(json).map_err(|e| {
        // Name the offending field when serde can tell.
        let detail = serde_json::from_value::<CacheConfig>(with_defaults(value))
            .err()
            .map(|se| se.to_string())
            .unwrap_or_else(|| e.to_string());
        ParseErrorKind::BadConfig(detail)
    })?;
    Ok((TraceOp::SetConfig(Box::new(config)), expected))
}

/// `given` with every missing configuration field filled from the default serial configuration.
fn with_defaults(given: serde_json::Value) -> serde_json::Value {
    let mut merged = match serde_json::to_value(CacheConfig::default_serial()) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    if let serde_json::Value::Object(g) = given {
        merged.extend(g);
    }
    serde_json::Value::Object(merged)
}

/// The positional fields and flag words of one record.
struct Fields<'a> {
    op: &'static str,
    it: std::str::SplitAsciiWhitespace<'a>,
}

impl<'a> Fields<'a> {
    fn next(&mut self, field: &'static str) -> Result<&'a str, ParseErrorKind> {
        self.it
            .next()
            .ok_or(ParseErrorKind::MissingField { op: self.op, field })
    }

    fn bad(&self, field: &'static str, text: &str, expected: &'static str) -> ParseErrorKind {
        ParseErrorKind::BadNumber {
            op: self.op,
            field,
            text: text.to_string(),
            expected,
        }
    }

    fn addr(&mut self, field: &'static str) -> Result<u64, ParseErrorKind> {
        let t = self.next(field)?;
        parse_u64(t).ok_or_else(|| self.bad(field, t, "decimal or 0x-hex, at most 2^64-1"))
    }

    fn size(&mut self, field: &'static str) -> Result<usize, ParseErrorKind> {
        let t = self.next(field)?;
        parse_u64(t)
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| self.bad(field, t, "decimal or 0x-hex byte count"))
    }

    fn class(&mut self) -> Result<u8, ParseErrorKind> {
        let t = self.next("TYPE")?;
        parse_class(t).ok_or_else(|| self.bad("TYPE", t, "a class id 0..255"))
    }

    /// An optional TYPE: the next word if it starts with a digit.
    fn opt_class(&mut self) -> Result<Option<u8>, ParseErrorKind> {
        let mut peek = self.it.clone();
        match peek.next() {
            Some(t) if t.starts_with(|c: char| c.is_ascii_digit()) => {
                self.it = peek;
                parse_class(t)
                    .map(Some)
                    .ok_or_else(|| self.bad("TYPE", t, "a class id 0..255"))
            }
            _ => Ok(None),
        }
    }

    fn flags<F: Copy + std::ops::BitOrAssign>(
        &mut self,
        words: &[(F, &str)],
        mut acc: F,
    ) -> Result<F, ParseErrorKind> {
        for w in self.it.by_ref() {
            match words.iter().find(|(_, name)| *name == w) {
                Some((flag, _)) => acc |= *flag,
                None => {
                    return Err(ParseErrorKind::UnknownFlag {
                        op: self.op,
                        word: w.to_string(),
                    });
                }
            }
        }
        Ok(acc)
    }

    fn end(&mut self) -> Result<(), ParseErrorKind> {
        match self.it.next() {
            None => Ok(()),
            Some(w) => Err(ParseErrorKind::Extra {
                op: self.op,
                word: w.to_string(),
            }),
        }
    }
}

fn parse_u64(t: &str) -> Option<u64> {
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u64::from_str_radix(hex, 16).ok()
    } else {
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    }
}

fn parse_class(t: &str) -> Option<u8> {
    parse_u64(t).and_then(|v| u8::try_from(v).ok())
}

// ----- writer -----

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
    /// Append one record: the call `op` builds, then its result; `outcome` `None` means the call
    /// failed (`# err`). `op` is only called when a trace file is open, so an untraced call builds and
    /// formats nothing; it sees the cache as the call left it. A trace that cannot be written is
    /// closed (tracing must never make a cache call fail) and counted.
    pub(crate) fn trace_op(&mut self, op: impl FnOnce(&Self) -> TraceOp, outcome: Option<Outcome>) {
        if self.tracer.is_none() {
            return;
        }
        let op = op(self);
        let Some(t) = self.tracer.as_mut() else {
            return;
        };
        let outcome = outcome.unwrap_or(Outcome::Err);
        let r = writeln!(t.out, "{op} # {outcome}");
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
