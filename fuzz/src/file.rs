//! The whole-file target: a file opened from memory (`h5::File::from_storage`) and walked as
//! `h5 dump --json`, `h5 ls -r -v` and `h5 stat` walk it: every link, every group, dataset and
//! committed datatype with its attributes (values decoded, variable-length ones through the
//! global heap), every dataset's description, stored chunk sizes and values, the persisted free
//! space.

use std::collections::HashSet;
use std::sync::Arc;

use h5::ndarray::SliceInfoElem;
use h5::{Attribute, Dataset, File, FileAccess, Group, LinkKind, ObjectKind};
use h5_io::MemoryStorage;

/// A dataset of at most this many bytes is read whole (as `Value` trees, raw bytes, strings);
/// bigger ones are sampled (their first rows), so that one input cannot take seconds of
/// legitimate work.
const MAX_WHOLE_READ: u64 = 1 << 20;

/// The most objects walked in one input (a damaged file can hold very many links).
const MAX_OBJECTS: usize = 2000;

/// `file`: the bytes of a whole HDF5 file.
pub fn file(data: &[u8]) {
    let storage = Arc::new(MemoryStorage::with_data(data.to_vec()));
    let access = FileAccess::default().ignore_open_for_writing(true);
    let Ok(file) = File::from_storage(storage, &access, None) else {
        return;
    };
    walk_file(&file);
}

/// Walks an opened file (also used by the corpus replay of the real files).
pub fn walk_file(file: &File) {
    let _ = file.persisted_free_space();
    let _ = file.marked_open_for_writing();
    if let Ok(root) = file.root() {
        let mut seen = HashSet::new();
        walk(&root, &mut seen);
    }
}

fn walk(g: &Group, seen: &mut HashSet<u64>) {
    if seen.len() >= MAX_OBJECTS || !seen.insert(g.address()) {
        return;
    }
    attributes(g.attrs());
    let Ok(links) = g.links() else {
        return;
    };
    for link in links {
        match &link.kind {
            LinkKind::Hard => {}
            // Soft and external links are resolved (an external file does not exist here).
            _ => {
                let _ = g.kind_of(&link.name);
                continue;
            }
        }
        match g.kind_of(&link.name) {
            Ok(ObjectKind::Group) => {
                if let Ok(sub) = g.group(&link.name) {
                    walk(&sub, seen);
                }
            }
            Ok(ObjectKind::Dataset) => {
                if let Ok(d) = g.dataset(&link.name)
                    && seen.insert(d.address())
                {
                    dataset(&d);
                }
            }
            Ok(ObjectKind::Datatype) => {
                if let Ok(t) = g.named_datatype(&link.name)
                    && seen.insert(t.address())
                {
                    if let Ok(dt) = t.dtype() {
                        let _ = dt.describe();
                    }
                    attributes(t.attrs());
                }
            }
            _ => {}
        }
    }
}

fn attributes(attrs: h5::Result<Vec<Attribute>>) {
    let Ok(attrs) = attrs else {
        return;
    };
    for a in attrs {
        let _ = a.dtype().describe();
        let _ = a.shape();
        let _ = a.read_raw();
        let _ = a.read_values();
        if a.dtype().has_indirection() {
            let _ = a.read_strings();
        }
    }
}

fn dataset(d: &Dataset) {
    let _ = d.dtype().describe();
    let _ = (d.shape(), d.maxshape(), d.chunk(), d.layout_name());
    let _ = d.filters();
    let _ = d.fill_value_raw();
    let _ = d.stored_sizes();
    attributes(d.attrs());
    if d.is_null() {
        return;
    }
    let bytes = (d.size() as u64).saturating_mul(d.element_size() as u64);
    if bytes <= MAX_WHOLE_READ {
        let _ = d.read_raw();
        let _ = d.read_values();
        if d.dtype().has_indirection() {
            let _ = d.read_strings();
        }
    } else {
        // The first rows (up to 4 along the first dimension, 1 along the others).
        let slice: Vec<SliceInfoElem> = d
            .shape()
            .iter()
            .enumerate()
            .map(|(i, &n)| SliceInfoElem::Slice {
                start: 0,
                end: Some(n.min(if i == 0 { 4 } else { 1 }) as isize),
                step: 1,
            })
            .collect();
        let _ = d.read_raw_slice(&slice);
        if bytes > 1 << 40 {
            // Absurdly large: must be refused, not allocated.
            let _ = d.read_raw();
        }
    }
}
