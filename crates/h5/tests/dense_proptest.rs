//! Random changes of the new-style structures through the public API against a reference
//! model: dense links of a group tracking and indexing creation order (v2 B-trees of types 5
//! and 6, links in a fractal heap), dense attributes of all sizes (types 8 and 9; attributes
//! over 4 KiB are huge heap objects), and chunks of a dataset with two unlimited dimensions
//! (a v2 B-tree chunk index, type 10), with flushes and reopenings at random points, a 1 KiB
//! metadata cache and the cache's invariant checks after every call. h5 and h5py read the
//! result back.

use std::collections::BTreeMap;
use std::path::Path;

use h5::{CreateOptions, FileAccess, FormatBounds, GroupOptions};
use h5_metacache::CacheConfig;
use h5_testkit::verify::run_python;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    AddLink(u16),
    RemoveLink(usize),
    RenameLink(usize, u16),
    PutAttr(u16, usize, i32),
    DeleteAttr(usize),
    RenameAttr(usize, u16),
    WriteChunk(u8, u8, i16),
    Resize(u8, u8),
    Flush,
    Reopen,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let len = prop_oneof![4 => 0usize..8, 2 => 8usize..400, 1 => 1100usize..3000];
    prop::collection::vec(
        prop_oneof![
            6 => any::<u16>().prop_map(Op::AddLink),
            3 => any::<usize>().prop_map(Op::RemoveLink),
            2 => (any::<usize>(), any::<u16>()).prop_map(|(i, n)| Op::RenameLink(i, n)),
            5 => (any::<u16>(), len, any::<i32>()).prop_map(|(n, l, v)| Op::PutAttr(n, l, v)),
            2 => any::<usize>().prop_map(Op::DeleteAttr),
            1 => (any::<usize>(), any::<u16>()).prop_map(|(i, n)| Op::RenameAttr(i, n)),
            5 => (0u8..12, 0u8..12, any::<i16>()).prop_map(|(r, c, v)| Op::WriteChunk(r, c, v)),
            1 => (1u8..14, 1u8..14).prop_map(|(r, c)| Op::Resize(r, c)),
            1 => Just(Op::Flush),
            1 => Just(Op::Reopen),
        ],
        1..160,
    )
}

/// What the file should hold.
#[derive(Default)]
struct Model {
    /// Link names in creation order.
    links: Vec<String>,
    /// Attribute values by name, in creation order.
    attrs: Vec<(String, Vec<i32>)>,
    /// Dataset extent and the values written (others read as the fill value 0).
    dims: (u64, u64),
    values: BTreeMap<(u64, u64), i16>,
}

fn access() -> FileAccess {
    FileAccess::new()
        .metadata_invariant_checks(true)
        .metadata_cache(CacheConfig::fixed_size(1024))
}

fn attr_values(len: usize, v: i32) -> Vec<i32> {
    (0..len.max(1) as i32).map(|i| v.wrapping_add(i)).collect()
}

fn apply(m: &mut Model, file: h5::File, path: &Path, op: &Op) -> h5::File {
    let g = file.group("t").unwrap();
    match *op {
        Op::AddLink(n) => {
            let name = format!("l{n}");
            let r = g.link_soft(&name, "/d");
            if m.links.contains(&name) {
                assert!(r.is_err());
            } else {
                r.unwrap();
                m.links.push(name);
            }
        }
        Op::RemoveLink(i) if !m.links.is_empty() => {
            let name = m.links.remove(i % m.links.len());
            g.unlink(&name).unwrap();
        }
        Op::RenameLink(i, n) if !m.links.is_empty() => {
            let new = format!("r{n}");
            let k = i % m.links.len();
            let r = g.move_link(&m.links[k], &new);
            if m.links.contains(&new) {
                assert!(r.is_err());
            } else {
                r.unwrap();
                // A moved link is a new link: it takes the next creation order.
                m.links.remove(k);
                m.links.push(new);
            }
        }
        Op::PutAttr(n, len, v) => {
            let name = format!("a{n}");
            let values = attr_values(len, v);
            g.write_attr(&name, &values).unwrap();
            match m.attrs.iter_mut().find(|(k, _)| *k == name) {
                Some(e) => e.1 = values,
                None => m.attrs.push((name, values)),
            }
        }
        Op::DeleteAttr(i) if !m.attrs.is_empty() => {
            let (name, _) = m.attrs.remove(i % m.attrs.len());
            g.delete_attr(&name).unwrap();
        }
        Op::RenameAttr(i, n) if !m.attrs.is_empty() => {
            let new = format!("b{n}");
            let k = i % m.attrs.len();
            let r = g.rename_attr(&m.attrs[k].0, &new);
            if m.attrs.iter().any(|(a, _)| *a == new) {
                assert!(r.is_err());
            } else {
                r.unwrap();
                m.attrs[k].0 = new;
            }
        }
        Op::WriteChunk(r, c, v) => {
            let (r, c) = (u64::from(r), u64::from(c));
            let d = file.dataset("d").unwrap();
            if r < m.dims.0 && c < m.dims.1 {
                d.write_points(&[vec![r, c]], &[v]).unwrap();
                m.values.insert((r, c), v);
            }
        }
        Op::Resize(r, c) => {
            let (r, c) = (u64::from(r), u64::from(c));
            let d = file.dataset("d").unwrap();
            d.resize([r as usize, c as usize]).unwrap();
            m.dims = (r, c);
            m.values.retain(|&(i, j), _| i < r && j < c);
        }
        Op::Flush => file.flush().unwrap(),
        Op::Reopen => {
            file.close().unwrap();
            return h5::File::open_rw_with(path, &access()).unwrap();
        }
        _ => {}
    }
    file
}

/// The model as h5py prints it (`CHECK` below).
fn expected(m: &Model) -> serde_json::Value {
    let (rows, cols) = m.dims;
    let data: Vec<Vec<i64>> = (0..rows)
        .map(|i| {
            (0..cols)
                .map(|j| i64::from(*m.values.get(&(i, j)).unwrap_or(&0)))
                .collect()
        })
        .collect();
    serde_json::json!({
        "links": m.links,
        "attrs": m.attrs.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        "values": m.attrs.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
        "data": data,
    })
}

/// Links and attributes in creation order (the group tracks it), attribute values, the data.
const CHECK: &str = "import sys, json, h5py\n\
f = h5py.File(sys.argv[1], 'r')\n\
t = f['t']\n\
out = {'links': list(t.keys()), 'attrs': list(t.attrs.keys()),\n\
       'values': [[int(x) for x in t.attrs[k].reshape(-1)] for k in t.attrs.keys()],\n\
       'data': f['d'][...].astype(int).tolist()}\n\
print(json.dumps(out))";

fn run(ops: &[Op]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dense.h5");
    let mut file = h5::File::create_with(
        &path,
        &access(),
        &CreateOptions {
            bounds: FormatBounds::LATEST,
            ..CreateOptions::default()
        },
    )
    .unwrap();
    file.create_group_with("t", &GroupOptions::tracked())
        .unwrap();
    let mut m = Model {
        dims: (4, 4),
        ..Model::default()
    };
    file.root()
        .unwrap()
        .new_dataset::<i16>()
        .shape([4, 4])
        .max_shape([None, None])
        .chunk([1, 1])
        .create("d")
        .unwrap();
    for op in ops {
        file = apply(&mut m, file, &path, op);
    }
    // h5, before closing.
    let g = file.group("t").unwrap();
    let mut names = m.links.clone();
    names.sort();
    assert_eq!(g.member_names().unwrap(), names);
    // Each link found by name through the name index (every one a soft link to `/d`), and a
    // name never added not found.
    let d = file.root().unwrap().dataset("d").unwrap().address();
    for name in &m.links {
        assert_eq!(g.dataset(name).unwrap().address(), d, "{name}");
    }
    assert!(!g.link_exists("never added").unwrap());
    for (k, v) in &m.attrs {
        assert_eq!(
            g.attr(k)
                .unwrap()
                .read::<i32>()
                .unwrap()
                .into_raw_vec_and_offset()
                .0,
            *v
        );
    }
    file.close().unwrap();
    // h5py, after.
    let got: serde_json::Value =
        serde_json::from_str(run_python(CHECK, &[path.to_str().unwrap()]).trim()).unwrap();
    assert_eq!(got, expected(&m));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn dense_storage_and_btree_chunks_match_a_model(ops in ops()) {
        run(&ops);
    }
}

/// Enough links and attributes to go dense and back, and chunks deleted by a shrink.
#[test]
fn dense_and_back_with_deleted_chunks() {
    let mut ops: Vec<Op> = (0..40).map(Op::AddLink).collect();
    ops.extend((0..30).map(|n| Op::PutAttr(n, (n as usize) * 150, n as i32)));
    ops.push(Op::Reopen);
    ops.extend((0..12).flat_map(|r| (0..12).map(move |c| Op::WriteChunk(r, c, (r * c) as i16))));
    ops.push(Op::Resize(12, 12));
    ops.extend((0..12).flat_map(|r| (0..12).map(move |c| Op::WriteChunk(r, c, (r + c) as i16))));
    ops.push(Op::Flush);
    ops.push(Op::Resize(3, 5));
    ops.extend((0..36).map(|_| Op::RemoveLink(0)));
    ops.extend((0..27).map(|_| Op::DeleteAttr(1)));
    ops.push(Op::Reopen);
    ops.push(Op::Resize(6, 6));
    run(&ops);
}
