//! The format bounds a copy keeps by default: those the source was written with, as far as
//! its superblock and the versions of its objects tell, raised to the lowest bounds that hold
//! every object h5 writes (as h5repack's copies do).
//!
//! | found in the source | bounds at least |
//! |---|---|
//! | superblock version 2 / 3 | V18 / V110 |
//! | version 2 object headers, link messages (new-style groups, also in version 1 headers), attribute info messages, attribute messages of version 3 | V18 |
//! | an attribute over 64 KiB (only dense attribute storage holds it) | V18 |
//! | layout message version 4 (the 1.10 chunk indexes, virtual datasets) | V110 |
//! | numbers with more unused than used bits (n-bit data; libhdf5 refuses them below superblock 3) | V110 |
//! | revised references (datatype version 4) | V112 |
//! | layout message version 5, complex numbers (datatype version 5) | V200 |

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use h5_core::file::FileShared;
use h5_core::group::{LinkValue, links};
use h5_core::object::ObjectHeader;
use h5_format::datatype::Datatype;
use h5_format::message::Message;

use crate::{File, FormatBounds, Result};

/// Objects visited at most (a file with more is given its superblock's bounds raised by the
/// objects seen so far).
const MAX_OBJECTS: usize = 1 << 22;

/// Largest attribute message a version 1 object header holds (its size field is 16 bits);
/// anything near it needs dense attribute storage.
const MAX_COMPACT_ATTRIBUTE: usize = 65_535;

/// Why a source needs at least some bounds: the bounds and the first object that needs them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundsReason {
    /// The bounds needed.
    pub bounds: FormatBounds,
    /// The object (path, or `path@attribute`) and what in it.
    pub what: String,
}

/// The bounds a copy of `src` keeps ([`source_bounds`]) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFormat {
    /// The bounds.
    pub bounds: FormatBounds,
    /// What raised them above the earliest: one entry per bound, the first object found that
    /// needs it, lowest bound first.
    pub reasons: Vec<BoundsReason>,
}

/// The bounds a copy of `src` keeps by default (module documentation): every object reachable
/// from the root by hard links is looked at once.
pub fn source_bounds(src: &File) -> Result<SourceFormat> {
    let mut f = SourceFormat {
        bounds: FormatBounds::Earliest,
        reasons: Vec::new(),
    };
    match src.superblock_version() {
        0 | 1 => {}
        2 => f.raise(FormatBounds::V18, "/", "superblock version 2"),
        _ => f.raise(FormatBounds::V110, "/", "superblock version 3"),
    }
    let file = src.shared();
    let sb = file.superblock().version;
    let root = file.root_address();
    let mut seen = HashSet::from([root]);
    let mut queue = VecDeque::from([(root, "/".to_owned())]);
    while let Some((addr, path)) = queue.pop_front() {
        let oh = ObjectHeader::load(file, addr)?;
        f.header(file, &oh, &path, sb)?;
        let Ok(entries) = links(file, &oh) else {
            continue;
        };
        for l in entries {
            let child = crate::copy::join(&path, &l.name);
            match l.value {
                LinkValue::Hard(a) => {
                    if seen.len() < MAX_OBJECTS && seen.insert(a) {
                        queue.push_back((a, child));
                    }
                }
                LinkValue::External { .. } => {
                    f.raise(FormatBounds::V18, &child, "an external link");
                }
                LinkValue::UserDefined(_) => {
                    f.raise(FormatBounds::V18, &child, "a user-defined link");
                }
                LinkValue::Soft(_) => {}
            }
        }
    }
    Ok(f)
}

impl SourceFormat {
    fn raise(&mut self, bounds: FormatBounds, path: &str, what: &str) {
        if !self.reasons.iter().any(|r| r.bounds == bounds) {
            self.reasons.push(BoundsReason {
                bounds,
                what: format!("{path}: {what}"),
            });
            self.reasons.sort_by_key(|r| r.bounds);
        }
        self.bounds = self.bounds.max(bounds);
    }

    /// What the datatype `dt` (of `path`) needs.
    fn datatype(&mut self, dt: &Datatype, path: &str, superblock: u8) {
        match dt.min_version() {
            5.. => self.raise(FormatBounds::V200, path, "a datatype of version 5"),
            4 => self.raise(FormatBounds::V112, path, "a revised reference type"),
            _ => {}
        }
        if crate::copy::check_unused_bits(dt, superblock.min(2)).is_err() {
            self.raise(
                FormatBounds::V110,
                path,
                "numbers with more unused than used bits",
            );
        }
    }

    fn header(
        &mut self,
        file: &Arc<FileShared>,
        oh: &ObjectHeader,
        path: &str,
        superblock: u8,
    ) -> Result<()> {
        if oh.version >= 2 {
            self.raise(FormatBounds::V18, path, "a version 2 object header");
        }
        for m in &oh.messages {
            match &m.message {
                Message::LinkInfo(_) | Message::Link(_) => {
                    self.raise(FormatBounds::V18, path, "link messages")
                }
                Message::AttributeInfo(_) => {
                    self.raise(FormatBounds::V18, path, "an attribute info message")
                }
                Message::Attribute(a) if a.version >= 3 => {
                    self.raise(FormatBounds::V18, path, "attribute messages of version 3")
                }
                Message::Layout(l) if l.version >= 5 => {
                    self.raise(FormatBounds::V200, path, "a layout message of version 5")
                }
                Message::Layout(l) if l.version == 4 => {
                    self.raise(FormatBounds::V110, path, "a layout message of version 4")
                }
                Message::Datatype(dt) => self.datatype(dt, path, superblock),
                _ => {}
            }
        }
        // Attributes, dense ones included, with their datatypes (shared ones resolved).
        for a in h5_core::attribute::attributes(file, oh)? {
            let at = format!("{path}@{}", a.name);
            self.datatype(&a.datatype, &at, superblock);
            let name = a.name.len() + 1;
            let dtype = a
                .datatype
                .encode(a.datatype.min_version())
                .map_or(0, |b| b.len());
            let size = 8
                + name.next_multiple_of(8)
                + dtype.next_multiple_of(8)
                + 8
                + 16 * a.dataspace.dims.len();
            if size.saturating_add(a.data.len()) > MAX_COMPACT_ATTRIBUTE {
                self.raise(FormatBounds::V18, &at, "an attribute over 64 KiB");
            }
        }
        Ok(())
    }
}
