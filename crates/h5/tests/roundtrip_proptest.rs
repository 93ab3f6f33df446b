//! Round-trip property test of the write path: random sequences of changes (groups, datasets
//! contiguous and chunked with filters, appends, overwrites, attributes, soft links, unlinks,
//! moves, attribute deletes, flushes and reopenings for writing) are applied both to an in-memory
//! model and to a file written with tiny cache budgets, so that eviction and flush ordering are
//! exercised at every step. The file is then compared with the model by h5 (after reopening) and
//! by h5py. Needs `scripts/setup-tools` (run by the README test command); fails without it.

use std::collections::BTreeMap;
use std::path::Path;

use h5::{FileAccess, FormatBounds};
use h5_chunkcache::ChunkCacheConfig;
use h5_metacache::CacheConfig;
use h5_testkit::verify::{AttrExpect, DatasetExpect, Expectations, Reference, check_with};
use ndarray::SliceInfoElem;
use proptest::prelude::*;
use serde_json::json;

/// One object of the model.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    Group {
        members: BTreeMap<String, Node>,
        attrs: BTreeMap<String, Vec<i32>>,
    },
    Dataset {
        data: Vec<i32>,
        chunked: bool,
        growable: bool,
        attrs: BTreeMap<String, Vec<i32>>,
    },
    Soft(String),
}

fn empty_group() -> Node {
    Node::Group {
        members: BTreeMap::new(),
        attrs: BTreeMap::new(),
    }
}

/// A change; `*_sel` pick among what exists when it is applied (modulo their number).
#[derive(Clone, Debug)]
enum Op {
    AddGroup {
        parent: usize,
        name: u8,
    },
    AddDataset {
        parent: usize,
        name: u8,
        len: usize,
        chunk: Option<usize>,
        deflate: bool,
        shuffle: bool,
        seed: i32,
    },
    Append {
        ds: usize,
        n: usize,
        seed: i32,
    },
    Overwrite {
        ds: usize,
        at: usize,
        n: usize,
        seed: i32,
    },
    Attr {
        obj: usize,
        name: u8,
        len: usize,
        seed: i32,
    },
    DelAttr {
        obj: usize,
        attr: usize,
    },
    Soft {
        parent: usize,
        name: u8,
        target: usize,
    },
    Unlink {
        parent: usize,
        child: usize,
    },
    Move {
        parent: usize,
        child: usize,
        to: usize,
        name: u8,
    },
    Flush,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let sel = 0usize..64;
    prop_oneof![
        3 => (sel.clone(), 0u8..6).prop_map(|(parent, name)| Op::AddGroup { parent, name }),
        4 => (
            sel.clone(),
            0u8..6,
            0usize..400,
            prop::option::of(1usize..80),
            any::<bool>(),
            any::<bool>(),
            any::<i32>()
        )
            .prop_map(|(parent, name, len, chunk, deflate, shuffle, seed)| Op::AddDataset {
                parent,
                name,
                len,
                chunk,
                deflate,
                shuffle,
                seed,
            }),
        3 => (sel.clone(), 1usize..300, any::<i32>())
            .prop_map(|(ds, n, seed)| Op::Append { ds, n, seed }),
        2 => (sel.clone(), 0usize..400, 1usize..100, any::<i32>())
            .prop_map(|(ds, at, n, seed)| Op::Overwrite { ds, at, n, seed }),
        3 => (sel.clone(), 0u8..5, 0usize..12, any::<i32>())
            .prop_map(|(obj, name, len, seed)| Op::Attr { obj, name, len, seed }),
        1 => (sel.clone(), sel.clone()).prop_map(|(obj, attr)| Op::DelAttr { obj, attr }),
        1 => (sel.clone(), 0u8..6, sel.clone())
            .prop_map(|(parent, name, target)| Op::Soft { parent, name, target }),
        2 => (sel.clone(), sel.clone()).prop_map(|(parent, child)| Op::Unlink { parent, child }),
        2 => (sel.clone(), sel.clone(), sel.clone(), 0u8..6)
            .prop_map(|(parent, child, to, name)| Op::Move { parent, child, to, name }),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

fn values(seed: i32, n: usize) -> Vec<i32> {
    (0..n as i32)
        .map(|i| seed.wrapping_mul(31).wrapping_add(i.wrapping_mul(7919)))
        .collect()
}

fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// Every object path of the model, by kind: groups (the root first) and datasets.
fn paths(node: &Node, at: &str, groups: &mut Vec<String>, datasets: &mut Vec<String>) {
    match node {
        Node::Group { members, .. } => {
            groups.push(at.to_string());
            for (name, child) in members {
                paths(child, &join(at, name), groups, datasets);
            }
        }
        Node::Dataset { .. } => datasets.push(at.to_string()),
        Node::Soft(_) => {}
    }
}

fn node_mut<'a>(root: &'a mut Node, path: &str) -> &'a mut Node {
    let mut n = root;
    for part in path.split('/').filter(|p| !p.is_empty()) {
        n = match n {
            Node::Group { members, .. } => members.get_mut(part).expect("model path"),
            _ => panic!("model path through a non-group"),
        };
    }
    n
}

fn members_mut<'a>(root: &'a mut Node, path: &str) -> &'a mut BTreeMap<String, Node> {
    match node_mut(root, path) {
        Node::Group { members, .. } => members,
        _ => panic!("not a group"),
    }
}

fn attrs_mut<'a>(root: &'a mut Node, path: &str) -> &'a mut BTreeMap<String, Vec<i32>> {
    match node_mut(root, path) {
        Node::Group { attrs, .. } | Node::Dataset { attrs, .. } => attrs,
        Node::Soft(_) => panic!("attributes of a soft link"),
    }
}

fn access() -> FileAccess {
    // Tiny budgets: the metadata cache at its minimum size, chunk cache of 16 KiB.
    FileAccess::new()
        .metadata_invariant_checks(true)
        .metadata_cache(CacheConfig::fixed_size(1024))
        .chunk_cache(ChunkCacheConfig {
            limit: 16 * 1024,
            ..ChunkCacheConfig::default()
        })
}

fn write_attr(file: &h5::File, path: &str, name: &str, v: &[i32]) -> h5::Result<()> {
    if file.group(path).is_ok() {
        let g = file.group(path)?;
        if v.is_empty() {
            g.write_attr_scalar(name, -1i32)
        } else {
            g.write_attr(name, v)
        }
    } else {
        let d = file.dataset(path)?;
        if v.is_empty() {
            d.write_attr_scalar(name, -1i32)
        } else {
            d.write_attr(name, v)
        }
    }
}

fn delete_attr(file: &h5::File, path: &str, name: &str) -> h5::Result<()> {
    match file.group(path) {
        Ok(g) => g.delete_attr(name),
        Err(_) => file.dataset(path)?.delete_attr(name),
    }
}

/// The elements an attribute of the model reads back as: an empty list stands for the scalar
/// -1 written with `write_attr_scalar`.
fn attr_elements(v: &[i32]) -> Vec<i32> {
    if v.is_empty() { vec![-1] } else { v.to_vec() }
}

/// Applies `op` to the model and the file; returns the file (reopened on `Reopen`).
fn apply(model: &mut Node, file: h5::File, path: &Path, op: &Op) -> h5::File {
    let (mut groups, mut datasets) = (Vec::new(), Vec::new());
    paths(model, "/", &mut groups, &mut datasets);
    let objects: Vec<String> = groups.iter().chain(&datasets).cloned().collect();
    let root = file.root().expect("root");
    match *op {
        Op::AddGroup { parent, name } => {
            let p = &groups[parent % groups.len()];
            let name = format!("g{name}");
            let exists = members_mut(model, p).contains_key(&name);
            let r = root.group(p).and_then(|g| g.create_group(&name));
            if exists {
                assert!(r.is_err(), "created {name} over an existing link in {p}");
            } else {
                r.unwrap_or_else(|e| panic!("create group {name} in {p}: {e}"));
                members_mut(model, p).insert(name, empty_group());
            }
        }
        Op::AddDataset {
            parent,
            name,
            len,
            chunk,
            deflate,
            shuffle,
            seed,
        } => {
            let p = &groups[parent % groups.len()];
            let name = format!("d{name}");
            let exists = members_mut(model, p).contains_key(&name);
            let len = if chunk.is_none() { len.max(1) } else { len };
            let data = values(seed, len);
            let g = root.group(p).expect("parent group");
            let mut b = g.new_dataset::<i32>().shape([len]);
            if let Some(c) = chunk {
                b = b.chunk([c]).max_shape([None]);
                if shuffle {
                    b = b.shuffle();
                }
                if deflate {
                    b = b.deflate(1);
                }
            }
            let r = b.create(&name);
            if exists {
                assert!(r.is_err(), "created {name} over an existing link in {p}");
            } else {
                let ds = r.unwrap_or_else(|e| panic!("create dataset {name} in {p}: {e}"));
                if len > 0 {
                    ds.write(&data).expect("write");
                }
                members_mut(model, p).insert(
                    name,
                    Node::Dataset {
                        data,
                        chunked: chunk.is_some(),
                        growable: chunk.is_some(),
                        attrs: BTreeMap::new(),
                    },
                );
            }
        }
        Op::Append { ds, n, seed } if !datasets.is_empty() => {
            let at = &datasets[ds % datasets.len()];
            if let Node::Dataset {
                data,
                growable: true,
                ..
            } = node_mut(model, at)
            {
                let old = data.len();
                let new = values(seed, n);
                let d = file.dataset(at).expect("dataset");
                d.resize([old + n]).expect("resize");
                d.write_slice(
                    &new,
                    [SliceInfoElem::Slice {
                        start: old as isize,
                        end: Some((old + n) as isize),
                        step: 1,
                    }],
                )
                .expect("append");
                data.extend(new);
            }
        }
        Op::Overwrite { ds, at, n, seed } if !datasets.is_empty() => {
            let p = &datasets[ds % datasets.len()];
            if let Node::Dataset { data, .. } = node_mut(model, p)
                && !data.is_empty()
            {
                let start = at % data.len();
                let n = n.min(data.len() - start);
                let new = values(seed, n);
                file.dataset(p)
                    .expect("dataset")
                    .write_slice(
                        &new,
                        [SliceInfoElem::Slice {
                            start: start as isize,
                            end: Some((start + n) as isize),
                            step: 1,
                        }],
                    )
                    .expect("overwrite");
                data[start..start + n].copy_from_slice(&new);
            }
        }
        Op::Attr {
            obj,
            name,
            len,
            seed,
        } => {
            let p = &objects[obj % objects.len()];
            let name = format!("a{name}");
            let v = values(seed, len);
            write_attr(&file, p, &name, &v)
                .unwrap_or_else(|e| panic!("attribute {name} of {p}: {e}"));
            attrs_mut(model, p).insert(name, v);
        }
        Op::DelAttr { obj, attr } => {
            let p = &objects[obj % objects.len()];
            let names: Vec<String> = attrs_mut(model, p).keys().cloned().collect();
            if !names.is_empty() {
                let name = &names[attr % names.len()];
                delete_attr(&file, p, name)
                    .unwrap_or_else(|e| panic!("delete attribute {name} of {p}: {e}"));
                attrs_mut(model, p).remove(name);
            }
        }
        Op::Soft {
            parent,
            name,
            target,
        } => {
            let p = &groups[parent % groups.len()];
            let name = format!("s{name}");
            let t = objects[target % objects.len()].clone();
            let exists = members_mut(model, p).contains_key(&name);
            let r = root.group(p).and_then(|g| g.link_soft(&name, &t));
            if exists {
                assert!(r.is_err(), "soft link {name} over an existing link in {p}");
            } else {
                r.unwrap_or_else(|e| panic!("soft link {name} in {p}: {e}"));
                members_mut(model, p).insert(name, Node::Soft(t));
            }
        }
        Op::Unlink { parent, child } => {
            let p = &groups[parent % groups.len()];
            let names: Vec<String> = members_mut(model, p).keys().cloned().collect();
            if !names.is_empty() {
                let name = &names[child % names.len()];
                root.group(p)
                    .and_then(|g| g.unlink(name))
                    .unwrap_or_else(|e| panic!("unlink {name} in {p}: {e}"));
                members_mut(model, p).remove(name);
            }
        }
        Op::Move {
            parent,
            child,
            to,
            name,
        } => {
            let p = &groups[parent % groups.len()];
            let names: Vec<String> = members_mut(model, p).keys().cloned().collect();
            let dst = &groups[to % groups.len()];
            if !names.is_empty() {
                let old = &names[child % names.len()];
                let src_path = join(p, old);
                let new = format!("m{name}");
                let into_itself = dst == &src_path || dst.starts_with(&format!("{src_path}/"));
                let taken = members_mut(model, dst).contains_key(&new);
                if !into_itself && !taken {
                    root.move_link(&src_path, &join(dst, &new))
                        .unwrap_or_else(|e| panic!("move {src_path} to {dst}/{new}: {e}"));
                    let node = members_mut(model, p).remove(old).expect("model");
                    members_mut(model, dst).insert(new, node);
                }
            }
        }
        Op::Flush => file.flush().expect("flush"),
        Op::Reopen => {
            drop(root);
            file.close().expect("close");
            return h5::File::open_rw_with(path, &access()).expect("reopen");
        }
        Op::Append { .. } | Op::Overwrite { .. } => {}
    }
    file
}

/// Compares the file's object at `at` with the model, through h5.
fn compare(file: &h5::File, node: &Node, at: &str) {
    match node {
        Node::Group { members, attrs } => {
            let g = file.group(at).unwrap_or_else(|e| panic!("group {at}: {e}"));
            let mut names = g.member_names().expect("members");
            names.sort();
            let want: Vec<&String> = members.keys().collect();
            assert_eq!(names.iter().collect::<Vec<_>>(), want, "members of {at}");
            compare_attrs(g.attr_names().expect("attrs"), attrs, at, |n| {
                g.attr(n)
                    .and_then(|a| a.read::<i32>())
                    .map(|a| a.into_iter().collect())
            });
            for (name, child) in members {
                if !matches!(child, Node::Soft(_)) {
                    compare(file, child, &join(at, name));
                }
            }
        }
        Node::Dataset { data, attrs, .. } => {
            let d = file
                .dataset(at)
                .unwrap_or_else(|e| panic!("dataset {at}: {e}"));
            let got: Vec<i32> = d.read::<i32>().expect("read").into_iter().collect();
            assert_eq!(&got, data, "values of {at}");
            compare_attrs(d.attr_names().expect("attrs"), attrs, at, |n| {
                d.attr(n)
                    .and_then(|a| a.read::<i32>())
                    .map(|a| a.into_iter().collect())
            });
        }
        Node::Soft(_) => {}
    }
}

fn compare_attrs(
    mut names: Vec<String>,
    attrs: &BTreeMap<String, Vec<i32>>,
    at: &str,
    read: impl Fn(&str) -> h5::Result<Vec<i32>>,
) {
    names.sort();
    assert_eq!(
        names.iter().collect::<Vec<_>>(),
        attrs.keys().collect::<Vec<_>>(),
        "attributes of {at}"
    );
    for (n, v) in attrs {
        assert_eq!(
            read(n).expect("attribute"),
            attr_elements(v),
            "attribute {n} of {at}"
        );
    }
}

/// The same comparison written as h5py expectations.
fn expectations(node: &Node, at: &str, exp: Expectations) -> Expectations {
    let mut exp = exp;
    let attrs = match node {
        Node::Group { members, attrs } => {
            let names: Vec<&str> = members.keys().map(String::as_str).collect();
            exp = exp.group(at, &names);
            for (name, child) in members {
                let p = join(at, name);
                exp = match child {
                    Node::Soft(t) => exp.soft_link(&p, t),
                    _ => expectations(child, &p, exp),
                };
            }
            attrs
        }
        Node::Dataset {
            data,
            chunked,
            growable,
            attrs,
        } => {
            let mut d = DatasetExpect::new("<i4", &[data.len() as u64]).values(json!(data));
            if !chunked {
                d = d.contiguous();
            }
            if *growable {
                d = d.maxshape(&[None]);
            }
            exp = exp.dataset(at, d);
            attrs
        }
        Node::Soft(_) => return exp,
    };
    let names: Vec<&str> = attrs.keys().map(String::as_str).collect();
    exp = exp.attr_names(at, &names);
    for (n, v) in attrs {
        let a = if v.is_empty() {
            AttrExpect::new("<i4", json!(-1)).shape(&[])
        } else {
            AttrExpect::new("<i4", json!(v)).shape(&[v.len() as u64])
        };
        exp = exp.attr(at, n, a);
    }
    exp
}

fn run(ops: &[Op], bounds: FormatBounds) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rt.h5");
    let mut model = empty_group();
    let options = h5::CreateOptions {
        bounds,
        ..Default::default()
    };
    let mut file = h5::File::create_with(&path, &access(), &options).expect("create");
    for op in ops {
        file = apply(&mut model, file, &path, op);
    }
    file.close().expect("close");
    let back = h5::File::open(&path).expect("reopen");
    compare(&back, &model, "/");
    // HDF5 2.0's formats (V200) are read by h5py on HDF5 2.0 only.
    let reference = if bounds >= FormatBounds::V200 {
        Reference::Hdf5v200
    } else {
        Reference::Hdf5v114
    };
    let exp = expectations(&model, "/", Expectations::new());
    if let Err(e) = check_with(reference, &path, &exp) {
        panic!("h5py disagrees with the model after {ops:?}:\n{e}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random change sequences in the earliest format.
    #[test]
    fn random_changes_round_trip_earliest(ops in prop::collection::vec(op(), 1..40)) {
        run(&ops, FormatBounds::Earliest);
    }

    /// The same in the default format (V18: link-message groups, compact and dense).
    #[test]
    fn random_changes_round_trip_v18(ops in prop::collection::vec(op(), 1..40)) {
        run(&ops, FormatBounds::V18);
    }

    /// The same with the newest formats.
    #[test]
    fn random_changes_round_trip_latest(ops in prop::collection::vec(op(), 1..40)) {
        run(&ops, FormatBounds::LATEST);
    }
}
