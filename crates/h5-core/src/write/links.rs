//! New-style groups being written (format bounds V18 and newer): the links live in a
//! `LinkTable` and are laid out at flush, either as link messages in the group's object
//! header (compact) or as a fractal heap of link messages indexed by v2 B-trees (dense), the
//! group's link info message pointing at them.
//!
//! Invariants: a table turns dense when it holds more than `max_compact` links and back to
//! compact when removals leave fewer than `min_dense` (libhdf5's phase change); creation
//! orders are handed out increasing from 0 and never reused; every dense structure of the
//! previous layout is freed before the next one is placed.

use std::collections::BTreeMap;

use h5_format::UNDEFINED_ADDRESS;
use h5_format::btree2::{Btree2Type, Record};
use h5_format::heap::fractal::FractalHeapParams;
use h5_format::message::group_info::GroupInfo;
use h5_format::message::kind;
use h5_format::message::link::{CharSet, Link, LinkTarget};
use h5_format::message::link_info::LinkInfo;

use crate::error::Result;
use crate::file::FileShared;
use crate::group::{LinkEntry, LinkValue};
use crate::object::StoredMessage;
use crate::write::dense::{Placed, build_btree2, build_heap, free_placed, name_hash};
use crate::write::ohdr;

/// libhdf5's default largest compact group (links stored as header messages).
pub const DEFAULT_MAX_COMPACT: u16 = 8;
/// libhdf5's default smallest dense group.
pub const DEFAULT_MIN_DENSE: u16 = 6;

/// Links a new group's object header has room for (libhdf5's default group info estimate).
pub(crate) const ESTIMATED_ENTRIES: u16 = 4;
/// Link name length that estimate assumes.
pub(crate) const ESTIMATED_NAME_LEN: u16 = 8;

/// Creation options of a new-style group (libhdf5's group creation property list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupOptions {
    /// Track the creation order of links (h5py's `track_order=True` sets this and `indexed`).
    pub track_order: bool,
    /// Index links by creation order too (a v2 B-tree of type 6 when dense); needs
    /// `track_order`.
    pub index_order: bool,
    /// Most links kept compact.
    pub max_compact: u16,
    /// Fewest links kept dense.
    pub min_dense: u16,
    /// Track the creation order of the group's attributes (h5py's `track_order=True` sets
    /// this and `attr_index_order`).
    pub attr_track_order: bool,
    /// Index attributes by creation order too (a v2 B-tree of type 9 when dense); needs
    /// `attr_track_order`.
    pub attr_index_order: bool,
}

impl Default for GroupOptions {
    fn default() -> Self {
        GroupOptions {
            track_order: false,
            index_order: false,
            max_compact: DEFAULT_MAX_COMPACT,
            min_dense: DEFAULT_MIN_DENSE,
            attr_track_order: false,
            attr_index_order: false,
        }
    }
}

impl GroupOptions {
    /// Creation order of links and attributes tracked and indexed (h5py's
    /// `track_order=True`).
    pub fn tracked() -> Self {
        GroupOptions {
            track_order: true,
            index_order: true,
            attr_track_order: true,
            attr_index_order: true,
            ..Self::default()
        }
    }

    /// The link info message of an empty group with these options.
    pub(crate) fn link_info(&self) -> LinkInfo {
        LinkInfo {
            creation_order_tracked: self.track_order,
            creation_order_indexed: self.track_order && self.index_order,
            max_creation_index: self.track_order.then_some(0),
            fractal_heap_address: UNDEFINED_ADDRESS,
            name_index_address: UNDEFINED_ADDRESS,
            creation_order_index_address: (self.track_order && self.index_order)
                .then_some(UNDEFINED_ADDRESS),
        }
    }

    /// The group info message (phase change stored only when not libhdf5's default).
    pub(crate) fn group_info(&self) -> GroupInfo {
        let default =
            self.max_compact == DEFAULT_MAX_COMPACT && self.min_dense == DEFAULT_MIN_DENSE;
        GroupInfo {
            link_phase_change: (!default).then_some((self.max_compact, self.min_dense)),
            estimates: None,
        }
    }
}

/// The links of one new-style group.
#[derive(Debug)]
pub(crate) struct LinkTable {
    /// Creation options.
    pub(crate) options: GroupOptions,
    /// The links by name.
    pub(crate) links: BTreeMap<Vec<u8>, Link>,
    /// The next creation order.
    next_order: i64,
    /// Stored densely (since the count passed `max_compact`).
    dense: bool,
    /// Dense structures of the last layout.
    placed: Vec<Placed>,
    /// Changed since the last layout.
    pub(crate) dirty: bool,
}

impl LinkTable {
    /// An empty group with `options`.
    pub(crate) fn new(options: GroupOptions) -> Self {
        LinkTable {
            options,
            links: BTreeMap::new(),
            next_order: 0,
            dense: false,
            placed: Vec::new(),
            dirty: false,
        }
    }

    /// The table of an existing new-style group (object header `oh`) written before this
    /// session: its links and settings. Dense structures of the old layout are not freed by
    /// the next layout (their extent is not tracked): that space is left unused.
    pub(crate) fn load(file: &FileShared, oh: &crate::object::ObjectHeader) -> Result<Self> {
        use h5_format::message::Message;
        let info = oh
            .find(|m| match m {
                Message::LinkInfo(i) => Some(*i),
                _ => None,
            })
            .ok_or_else(|| {
                crate::Error::Unsupported(format!("group {:#x} has no link info", oh.address))
            })?;
        let phase = oh.find(|m| match m {
            Message::GroupInfo(g) => g.link_phase_change,
            _ => None,
        });
        let (max_compact, min_dense) = phase.unwrap_or((DEFAULT_MAX_COMPACT, DEFAULT_MIN_DENSE));
        let options = GroupOptions {
            track_order: info.creation_order_tracked,
            index_order: info.creation_order_indexed,
            max_compact,
            min_dense,
            ..GroupOptions::default()
        };
        let mut table = LinkTable::new(options);
        for e in crate::group::links(file, oh)? {
            let target = match e.value {
                LinkValue::Hard(a) => LinkTarget::Hard(a),
                LinkValue::Soft(p) => LinkTarget::Soft(p.into_bytes()),
                LinkValue::External { file, path } => LinkTarget::External {
                    flags: 0,
                    file: file.into_bytes(),
                    path: path.into_bytes(),
                },
                LinkValue::UserDefined(k) => {
                    return Err(crate::Error::Unsupported(format!(
                        "changing a group holding a user-defined link (type {k})"
                    )));
                }
            };
            let charset = if e.name.is_ascii() {
                CharSet::Ascii
            } else {
                CharSet::Utf8
            };
            table.links.insert(
                e.name.as_bytes().to_vec(),
                Link {
                    name: e.name.into_bytes(),
                    charset,
                    creation_order: e.creation_order,
                    target,
                },
            );
        }
        table.next_order = info
            .max_creation_index
            .and_then(|m| i64::try_from(m).ok())
            .unwrap_or(0);
        table.dense = info.fractal_heap_address != UNDEFINED_ADDRESS;
        Ok(table)
    }

    /// Adds the link `name` → `target` (the caller checked the name is free).
    pub(crate) fn insert(&mut self, name: &str, target: LinkTarget) {
        let creation_order = self.options.track_order.then_some(self.next_order);
        self.next_order += 1;
        let charset = if name.is_ascii() {
            CharSet::Ascii
        } else {
            CharSet::Utf8
        };
        self.links.insert(
            name.as_bytes().to_vec(),
            Link {
                name: name.as_bytes().to_vec(),
                charset,
                creation_order,
                target,
            },
        );
        if self.links.len() > usize::from(self.options.max_compact) {
            self.dense = true;
        }
        self.dirty = true;
    }

    /// Removes the link `name`; a dense group with fewer than `min_dense` links left goes
    /// back to compact storage (libhdf5's phase change).
    pub(crate) fn remove(&mut self, name: &str) -> Option<Link> {
        let link = self.links.remove(name.as_bytes())?;
        if self.dense && self.links.len() < usize::from(self.options.min_dense) {
            self.dense = false;
        }
        self.dirty = true;
        Some(link)
    }

    /// Whether the links are (or will be at the next flush) stored densely.
    pub(crate) fn is_dense(&self) -> bool {
        self.dense
    }

    /// The links as the reader reports them, in name order.
    pub(crate) fn entries(&self) -> Vec<LinkEntry> {
        self.links.values().map(entry).collect()
    }

    /// One link by name.
    pub(crate) fn find(&self, name: &str) -> Option<LinkEntry> {
        self.links.get(name.as_bytes()).map(entry)
    }

    /// The links in creation order (name order when not tracked).
    fn in_creation_order(&self) -> Vec<Link> {
        let mut v: Vec<Link> = self.links.values().cloned().collect();
        v.sort_by_key(|l| l.creation_order);
        v
    }

    /// Writes the links into the group's object header at `addr` (compact) or into a new
    /// heap and B-trees (dense), replacing the previous layout.
    pub(crate) fn lay_out(&mut self, file: &FileShared, addr: u64) -> Result<()> {
        let sizes = file.sizes;
        free_placed(file, &mut self.placed)?;
        let mut placed = Vec::new();
        let mut info = self.options.link_info();
        if self.options.track_order {
            info.max_creation_index = Some(u64::try_from(self.next_order).unwrap_or(0));
        }
        let ordered = self.in_creation_order();
        let mut messages: Vec<StoredMessage> = Vec::new();
        if self.dense {
            let bodies = ordered
                .iter()
                .map(|l| l.encode(sizes))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let refs: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
            let (heap, ids) =
                build_heap(file, FractalHeapParams::dense_links(), &refs, &mut placed)?;
            let mut by_name: Vec<(u32, &[u8], Vec<u8>)> = ordered
                .iter()
                .zip(&ids)
                .map(|(l, id)| (name_hash(&l.name), l.name.as_slice(), id.clone()))
                .collect();
            by_name.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
            let records = by_name
                .into_iter()
                .map(|(hash, _, heap_id)| Record::LinkName { hash, heap_id })
                .collect();
            info.fractal_heap_address = heap;
            info.name_index_address =
                build_btree2(file, Btree2Type::LinkName, records, &mut placed)?;
            if info.creation_order_indexed {
                let records = ordered
                    .iter()
                    .zip(&ids)
                    .map(|(l, id)| Record::LinkCreationOrder {
                        creation_order: l.creation_order.map_or(0, |o| o as u64),
                        heap_id: id.clone(),
                    })
                    .collect();
                info.creation_order_index_address = Some(build_btree2(
                    file,
                    Btree2Type::LinkCreationOrder,
                    records,
                    &mut placed,
                )?);
            }
        } else {
            for l in &ordered {
                messages.push(ohdr::message(kind::LINK, 0, l.encode(sizes)?));
            }
        }
        let info_body = info.encode(sizes);
        ohdr::update(file, addr, move |msgs| {
            msgs.retain(|m| m.kind != kind::LINK);
            for m in msgs.iter_mut().filter(|m| m.kind == kind::LINK_INFO) {
                m.body = info_body.clone();
            }
            msgs.extend(messages);
            Ok(())
        })?;
        self.placed = placed;
        self.dirty = false;
        Ok(())
    }
}

fn entry(l: &Link) -> LinkEntry {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    LinkEntry {
        name: text(&l.name),
        creation_order: l.creation_order,
        value: match &l.target {
            LinkTarget::Hard(a) => LinkValue::Hard(*a),
            LinkTarget::Soft(p) => LinkValue::Soft(text(p)),
            LinkTarget::External { file, path, .. } => LinkValue::External {
                file: text(file),
                path: text(path),
            },
            LinkTarget::UserDefined { kind, .. } => LinkValue::UserDefined(*kind),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hard(t: &mut LinkTable, name: &str) {
        t.insert(name, LinkTarget::Hard(8));
    }

    /// Dense past `max_compact`, compact again below `min_dense`, with custom thresholds too.
    #[test]
    fn phase_changes_follow_the_thresholds() {
        let mut t = LinkTable::new(GroupOptions::default());
        for i in 0..8 {
            hard(&mut t, &format!("l{i}"));
        }
        assert!(!t.is_dense());
        hard(&mut t, "l8");
        assert!(t.is_dense());
        for i in 0..3 {
            assert!(t.remove(&format!("l{i}")).is_some());
        }
        assert!(t.is_dense(), "6 links left: still dense");
        assert!(t.remove("l3").is_some());
        assert!(!t.is_dense(), "5 links left: compact");
        assert!(t.remove("missing").is_none());

        let opts = GroupOptions {
            max_compact: 2,
            min_dense: 1,
            ..GroupOptions::default()
        };
        let mut t = LinkTable::new(opts);
        for name in ["a", "b", "c"] {
            hard(&mut t, name);
        }
        assert!(t.is_dense());
        assert_eq!(t.options.group_info().link_phase_change, Some((2, 1)));
        assert_eq!(GroupOptions::default().group_info().link_phase_change, None);
    }

    /// Creation orders count up from 0 and are not reused after a removal.
    #[test]
    fn creation_orders_are_never_reused() {
        let mut t = LinkTable::new(GroupOptions::tracked());
        hard(&mut t, "b");
        hard(&mut t, "a");
        t.remove("b");
        hard(&mut t, "c");
        let orders: Vec<(String, Option<i64>)> = t
            .entries()
            .into_iter()
            .map(|e| (e.name, e.creation_order))
            .collect();
        assert_eq!(orders, vec![("a".into(), Some(1)), ("c".into(), Some(2))]);
        let info = GroupOptions::tracked().link_info();
        assert!(info.creation_order_tracked && info.creation_order_indexed);
        assert_eq!(info.creation_order_index_address, Some(UNDEFINED_ADDRESS));
    }
}
