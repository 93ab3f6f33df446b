//! New-style groups (format bounds V18 and newer) changed in place: their links are link
//! messages in the group's object header (compact) or dense storage (a fractal heap of link
//! messages indexed by name and, when creation order is indexed, by creation order; see
//! `crate::dense`), the link info message pointing at it. A change touches only the
//! structures it changes: one heap object and one record per index, or one header message.
//!
//! libhdf5's phase changes: the link that would make a compact group hold more than
//! `max_compact` links (or whose message does not fit a header message) moves the group to
//! dense storage, the link messages in header order first; a removal that leaves a dense group
//! with fewer than `min_dense` links moves it back to link messages (in name order) and deletes
//! the dense storage, as does a removal of its last link. Creation orders count up from 0 and
//! start again at 0 when the group is emptied (libhdf5 resets the link info's maximum).

use h5_format::UNDEFINED_ADDRESS;
use h5_format::message::group_info::GroupInfo;
use h5_format::message::link::{CharSet, Link, LinkTarget};
use h5_format::message::link_info::LinkInfo;
use h5_format::message::{Message, decode_message, kind};

use crate::access::{MetaAccess, Session};
use crate::btree2::NamedIn;
use crate::dense::Dense;
use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::object::ObjectHeader;
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

/// The largest encoded message a header message holds (libhdf5's `H5O_MESG_MAX_SIZE`).
const MESSAGE_MAX: usize = 65_536;

/// How a new-style group stores its links, read from its object header.
pub(crate) struct Storage {
    info: LinkInfo,
    max_compact: u16,
    min_dense: u16,
    /// The link messages, in header order (compact storage).
    compact: Vec<Link>,
    /// The dense storage, if the group has one.
    dense: Option<Dense>,
    /// The group has an I/O filter pipeline for its dense heap.
    filtered: bool,
}

/// The dense link storage a link info message points at.
pub(crate) fn dense_of(info: &LinkInfo) -> Option<Dense> {
    Dense::at(
        NamedIn::Links,
        info.fractal_heap_address,
        info.name_index_address,
        info.creation_order_index_address,
    )
}

fn storage_of(oh: &ObjectHeader) -> Result<Storage> {
    let info = oh
        .find(|m| match m {
            Message::LinkInfo(i) => Some(*i),
            _ => None,
        })
        .ok_or_else(|| Error::Unsupported(format!("group {:#x} has no link info", oh.address)))?;
    let (max_compact, min_dense) = oh
        .find(|m| match m {
            Message::GroupInfo(g) => g.link_phase_change,
            _ => None,
        })
        .unwrap_or((DEFAULT_MAX_COMPACT, DEFAULT_MIN_DENSE));
    Ok(Storage {
        info,
        max_compact,
        min_dense,
        compact: oh.all(|m| match m {
            Message::Link(l) => Some(l.clone()),
            _ => None,
        }),
        dense: dense_of(&info),
        filtered: oh
            .find(|m| matches!(m, Message::FilterPipeline(_)).then_some(()))
            .is_some(),
    })
}

fn storage(file: &FileShared, group: u64) -> Result<Storage> {
    storage_of(&*ObjectHeader::load(file, group)?)
}

/// Whether the group whose header is `oh` is a new-style group (it has a link info message).
pub(crate) fn is_new_style(oh: &ObjectHeader) -> bool {
    oh.find(|m| matches!(m, Message::LinkInfo(_)).then_some(()))
        .is_some()
}

/// Whether the new-style group at `group` stores its links densely.
pub(crate) fn is_dense(file: &FileShared, group: u64) -> Result<bool> {
    Ok(storage(file, group)?.dense.is_some())
}

fn charset(name: &str) -> CharSet {
    if name.is_ascii() {
        CharSet::Ascii
    } else {
        CharSet::Utf8
    }
}

fn decode_link(a: &dyn MetaAccess, body: &[u8]) -> Result<Link> {
    match decode_message(kind::LINK, 0, body, a.file().sizes, UNDEFINED_ADDRESS)? {
        Message::Link(l) => Ok(l),
        _ => Err(Error::Unsupported(
            "a dense link record naming another kind of message".into(),
        )),
    }
}

/// The link `name` of a dense storage.
pub(crate) fn dense_find(a: &mut dyn MetaAccess, d: &Dense, name: &str) -> Result<Option<Link>> {
    match d.find(a, name.as_bytes())? {
        Some(st) => Ok(Some(decode_link(a, &st.body)?)),
        None => Ok(None),
    }
}

/// Every link of a dense storage, in name-index order.
pub(crate) fn dense_list(a: &mut dyn MetaAccess, d: &Dense) -> Result<Vec<Link>> {
    d.list(a)?
        .iter()
        .map(|st| decode_link(a, &st.body))
        .collect()
}

/// Writes the link info message `info` into the group's header (in place: its length never
/// changes).
fn write_info(file: &FileShared, group: u64, info: &LinkInfo) -> Result<()> {
    let body = info.encode(file.sizes);
    if ohdr::replace_in_place(file, group, kind::LINK_INFO, &body)? {
        return Ok(());
    }
    ohdr::update(file, group, |msgs| {
        for m in msgs.iter_mut().filter(|m| m.kind == kind::LINK_INFO) {
            m.body = body.clone();
        }
        Ok(())
    })
}

/// The link storage of the new-style group whose header is `oh`, with `name` checked absent
/// from it ([`Error::Exists`] otherwise): where [`insert_at`] puts a new link without reading
/// the header or looking the name up again.
pub(crate) fn place(file: &FileShared, oh: &ObjectHeader, name: &str) -> Result<Storage> {
    let st = storage_of(oh)?;
    let exists = match &st.dense {
        Some(d) => d
            .find(&mut crate::access::Reading(file), name.as_bytes())?
            .is_some(),
        None => st.compact.iter().any(|l| l.name == name.as_bytes()),
    };
    if exists {
        return Err(Error::Exists(name.into()));
    }
    Ok(st)
}

/// Adds the link `name` → `target` to the new-style group at `group` whose storage `st` was
/// read by [`place`] (nothing changed the group since). The dense name index still refuses an
/// equal name ([`Error::Exists`]).
pub(crate) fn insert_at(
    file: &FileShared,
    group: u64,
    mut st: Storage,
    name: &str,
    target: LinkTarget,
) -> Result<()> {
    let creation_order = if st.info.creation_order_tracked {
        let next = st.info.max_creation_index.unwrap_or(0);
        let after = next
            .checked_add(1)
            .ok_or_else(|| Error::Unsupported("creation order".into()))?;
        st.info.max_creation_index = Some(after);
        Some(i64::try_from(next).map_err(|_| Error::Unsupported("creation order".into()))?)
    } else {
        None
    };
    let link = Link {
        name: name.as_bytes().to_vec(),
        charset: charset(name),
        creation_order,
        target,
    };
    let body = link.encode(file.sizes)?;
    if st.dense.is_none()
        && st.compact.len() < usize::from(st.max_compact)
        && body.len() < MESSAGE_MAX
    {
        let info = st.info.encode(file.sizes);
        return ohdr::update(file, group, move |msgs| {
            for m in msgs.iter_mut().filter(|m| m.kind == kind::LINK_INFO) {
                m.body = info.clone();
            }
            msgs.push(ohdr::message(kind::LINK, 0, body));
            Ok(())
        });
    }
    if st.filtered {
        return Err(Error::Unsupported(
            "dense links of a group with an I/O filter pipeline".into(),
        ));
    }
    let dense = match st.dense {
        Some(d) => d,
        None => {
            // The group goes dense: every link message moves to a new dense storage.
            let indexed = st.info.creation_order_indexed;
            let d = {
                let mut s = Session::new(file)?;
                let d = Dense::create(&mut s, NamedIn::Links, indexed)?;
                for l in &st.compact {
                    let order = l.creation_order.map_or(0, |o| o as u64);
                    d.insert(&mut s, &l.name, order, 0, &l.encode(file.sizes)?)?;
                }
                d
            };
            st.info.fractal_heap_address = d.heap;
            st.info.name_index_address = d.names;
            if indexed {
                st.info.creation_order_index_address = d.orders;
            }
            let info = st.info.encode(file.sizes);
            ohdr::update(file, group, move |msgs| {
                msgs.retain(|m| m.kind != kind::LINK);
                for m in msgs.iter_mut().filter(|m| m.kind == kind::LINK_INFO) {
                    m.body = info.clone();
                }
                Ok(())
            })?;
            d
        }
    };
    {
        let mut s = Session::new(file)?;
        let order = creation_order.map_or(0, |o| o as u64);
        dense.insert(&mut s, name.as_bytes(), order, 0, &body)?;
    }
    if st.info.creation_order_tracked {
        write_info(file, group, &st.info)?;
    }
    Ok(())
}

/// Removes the link `name` from the new-style group at `group`; returns it (`None`: no such
/// link).
pub(crate) fn remove(file: &FileShared, group: u64, name: &str) -> Result<Option<Link>> {
    let mut st = storage(file, group)?;
    let Some(dense) = st.dense else {
        let Some(i) = st.compact.iter().position(|l| l.name == name.as_bytes()) else {
            return Ok(None);
        };
        let link = st.compact.remove(i);
        let empty = st.compact.is_empty() && st.info.creation_order_tracked;
        if empty {
            st.info.max_creation_index = Some(0);
        }
        let info = st.info.encode(file.sizes);
        let sizes = file.sizes;
        ohdr::update(file, group, move |msgs| {
            let at = msgs.iter().position(|m| {
                m.kind == kind::LINK
                    && matches!(
                        decode_message(kind::LINK, 0, &m.body, sizes, group),
                        Ok(Message::Link(l)) if l.name == name.as_bytes()
                    )
            });
            if let Some(at) = at {
                msgs.remove(at);
            }
            if empty {
                for m in msgs.iter_mut().filter(|m| m.kind == kind::LINK_INFO) {
                    m.body = info.clone();
                }
            }
            Ok(())
        })?;
        return Ok(Some(link));
    };
    let (removed, left, back) = {
        let mut s = Session::new(file)?;
        let Some(stored) = dense.remove(&mut s, name.as_bytes())? else {
            return Ok(None);
        };
        let removed = decode_link(&s, &stored.body)?;
        let left = dense.count(&mut s)?;
        // Back to link messages below the minimum, if every link fits one.
        let back = if left > 0 && left < u64::from(st.min_dense) {
            let links = dense_list(&mut s, &dense)?;
            let fits = links
                .iter()
                .all(|l| l.encode(file.sizes).is_ok_and(|b| b.len() < MESSAGE_MAX));
            fits.then_some(links)
        } else {
            None
        };
        if left == 0 || back.is_some() {
            dense.delete(&mut s)?;
        }
        (removed, left, back)
    };
    if left == 0 || back.is_some() {
        st.info.fractal_heap_address = UNDEFINED_ADDRESS;
        st.info.name_index_address = UNDEFINED_ADDRESS;
        if st.info.creation_order_indexed {
            st.info.creation_order_index_address = Some(UNDEFINED_ADDRESS);
        }
        if left == 0 && st.info.creation_order_tracked {
            st.info.max_creation_index = Some(0);
        }
        let info = st.info.encode(file.sizes);
        let mut messages = Vec::new();
        for l in back.unwrap_or_default() {
            messages.push(ohdr::message(kind::LINK, 0, l.encode(file.sizes)?));
        }
        ohdr::update(file, group, move |msgs| {
            for m in msgs.iter_mut().filter(|m| m.kind == kind::LINK_INFO) {
                m.body = info.clone();
            }
            msgs.extend(messages);
            Ok(())
        })?;
    }
    Ok(Some(removed))
}

/// Every link of the new-style group at `group`, its dense storage (if any) deleted: the group
/// itself is being deleted.
pub(crate) fn take_all(file: &FileShared, group: u64) -> Result<Vec<Link>> {
    let st = storage(file, group)?;
    let mut links = st.compact;
    if let Some(d) = st.dense {
        let mut s = Session::new(file)?;
        links.extend(dense_list(&mut s, &d)?);
        d.delete(&mut s)?;
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The group info message stores the phase change only when it is not libhdf5's default;
    /// a tracked and indexed group's link info has an (undefined) creation-order index.
    #[test]
    fn creation_messages_follow_libhdf5() {
        let opts = GroupOptions {
            max_compact: 2,
            min_dense: 1,
            ..GroupOptions::default()
        };
        assert_eq!(opts.group_info().link_phase_change, Some((2, 1)));
        assert_eq!(GroupOptions::default().group_info().link_phase_change, None);
        let info = GroupOptions::tracked().link_info();
        assert!(info.creation_order_tracked && info.creation_order_indexed);
        assert_eq!(info.creation_order_index_address, Some(UNDEFINED_ADDRESS));
        assert_eq!(info.max_creation_index, Some(0));
    }
}
