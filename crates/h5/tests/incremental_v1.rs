//! Old-style structures changed one cache entry at a time (issue 11): a flush after a small
//! change to a large old-style group or a large version 1 B-tree chunk index writes little,
//! counted with the `Metrics` storage decorator. The large files are written by h5py
//! (libhdf5 1.14.4, earliest format) in the test itself, so they are also files libhdf5 wrote
//! being changed in place. These tests need `scripts/setup-tools` and fail loudly without it.

use std::collections::btree_map::Entry;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use h5::FileAccess;
use h5_io::{FileStorage, Metrics, OpenMode};
use h5_testkit::verify::run_python;
use ndarray::SliceInfoElem as S;
use proptest::prelude::*;

/// Most a flush after one small change may write.
const SMALL_FLUSH: u64 = 64 << 10;

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    (dir, p)
}

/// Opens `path` read-write through a counting decorator.
fn open_counted(path: &Path) -> (h5::File, Arc<Metrics<FileStorage>>) {
    let storage = Arc::new(Metrics::new(
        FileStorage::open(path, OpenMode::ReadWrite).expect("open"),
    ));
    let f = h5::File::open_rw_in(storage.clone(), &FileAccess::default(), None).expect("open rw");
    (f, storage)
}

#[test]
fn one_link_added_to_an_old_style_group_of_100k_links_writes_little() {
    let (_d, path) = tmp("links.h5");
    run_python(
        r#"
import sys, h5py, numpy as np
path, n = sys.argv[1], int(sys.argv[2])
with h5py.File(path, "w") as f:
    d = f.create_dataset("target", data=np.arange(4, dtype="<i4"))
    g = f.create_group("big")
    for i in range(n):
        g[f"link{i:06}"] = d
"#,
        &[path.to_str().unwrap(), "100000"],
    );
    let (f, storage) = open_counted(&path);
    let g = f.group("big").unwrap();
    let target = f.dataset("target").unwrap();
    let before = storage.snapshot();
    g.link_hard("link050000a", &target).unwrap();
    f.flush().unwrap();
    let written = storage.snapshot().since(&before).bytes_written;
    eprintln!("one link added to 100,000 and flushed: {written} bytes written");
    drop(g);
    drop(target);
    drop(f);
    let out = run_python(
        r#"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    g = f["big"]
    print(len(g), g["link050000a"][3], g["link099999"][2])
"#,
        &[path.to_str().unwrap()],
    );
    assert_eq!(out.trim(), "100001 3 2");
    assert!(
        written <= SMALL_FLUSH,
        "{written} bytes written for one link"
    );
}

#[test]
fn one_chunk_appended_to_a_v1_btree_index_of_100k_chunks_writes_little() {
    let (_d, path) = tmp("chunks.h5");
    run_python(
        r#"
import sys, h5py, numpy as np
path, n = sys.argv[1], int(sys.argv[2])
with h5py.File(path, "w") as f:
    f.create_dataset("d", data=np.arange(n, dtype="<i4"), maxshape=(None,), chunks=(1,))
"#,
        &[path.to_str().unwrap(), "100000"],
    );
    let (f, storage) = open_counted(&path);
    let d = f.dataset("d").unwrap();
    let before = storage.snapshot();
    d.resize([100_001]).unwrap();
    d.write_slice(
        &[-7i32],
        [S::Slice {
            start: 100_000,
            end: Some(100_001),
            step: 1,
        }],
    )
    .unwrap();
    f.flush().unwrap();
    let written = storage.snapshot().since(&before).bytes_written;
    eprintln!("one chunk appended to 100,000 and flushed: {written} bytes written");
    drop(d);
    drop(f);
    let out = run_python(
        r#"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    d = f["d"]
    print(d.shape[0], d[100000], d[99999], d[12345])
"#,
        &[path.to_str().unwrap()],
    );
    assert_eq!(out.trim(), "100001 -7 99999 12345");
    assert!(
        written <= SMALL_FLUSH,
        "{written} bytes written for one chunk"
    );
}

/// h5py writes a dataset of 1,000,000 one-byte chunks (a version 1 B-tree four levels deep,
/// about 38 MB of index). Reading one chunk reads a path of the tree, not the index; reading
/// all of them keeps the metadata cache within its configured maximum (the index does not fit).
#[test]
fn a_million_chunk_index_is_read_through_a_bounded_metadata_cache() {
    const N: usize = 1_000_000;
    const MAX: usize = 1 << 20;
    let (_d, path) = tmp("million.h5");
    run_python(
        r#"
import sys, h5py, numpy as np
path, n = sys.argv[1], int(sys.argv[2])
with h5py.File(path, "w") as f:
    f.create_dataset("d", data=(np.arange(n) % 251).astype("u1"), chunks=(1,))
"#,
        &[path.to_str().unwrap(), &N.to_string()],
    );
    let storage = Arc::new(Metrics::new(
        FileStorage::open(&path, OpenMode::ReadOnly).expect("open"),
    ));
    let access = FileAccess::new().metadata_cache(h5_metacache::CacheConfig::fixed_size(MAX));
    let f = h5::File::from_storage(storage.clone(), &access, None).unwrap();
    let d = f.dataset("d").unwrap();
    let one: Vec<u8> = d
        .read_slice::<u8>([S::Slice {
            start: 654_321,
            end: Some(654_322),
            step: 1,
        }])
        .unwrap()
        .into_raw_vec_and_offset()
        .0;
    assert_eq!(one, vec![(654_321 % 251) as u8]);
    let read = storage.snapshot().bytes_read;
    eprintln!("opening the file and reading one chunk of 1,000,000: {read} bytes read");
    assert!(read - 1 <= 256 << 10, "{read} bytes read for one chunk");
    // Every chunk, in slices of 100,000.
    for start in (0..N).step_by(100_000) {
        let v: Vec<u8> = d
            .read_slice::<u8>([S::Slice {
                start: start as isize,
                end: Some((start + 100_000) as isize),
                step: 1,
            }])
            .unwrap()
            .into_raw_vec_and_offset()
            .0;
        assert!(
            v.iter()
                .enumerate()
                .all(|(i, &x)| x == ((start + i) % 251) as u8),
            "values from {start}"
        );
    }
    let stats = f.metadata_cache_stats().unwrap();
    eprintln!(
        "reading all 1,000,000 chunks: metadata cache peak {} bytes in {} entries (maximum {MAX})",
        stats.max.index_size, stats.max.index_len
    );
    assert!(stats.max.index_size <= MAX, "{}", stats.max.index_size);
}

/// A small deterministic generator (xorshift64*), so h5 and h5py get the same changes.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) % n
    }
}

/// Where a link of the old-style group under test points: a dataset `t{k}` (hard) or a path
/// (soft).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Points {
    Hard(u64),
    Soft(String),
}

/// 1,000 changes (adds of hard and soft links, removals, renames) to the old-style group of a
/// file h5py wrote, made by h5 on one copy and by h5py (libhdf5) on another: h5's file is no
/// larger than libhdf5's but for the group's structures as h5py wrote them (what delayed reuse,
/// docs/design.md §6.4, keeps allocated until h5's flush: libhdf5 reuses a freed heap segment
/// or node at once), and h5py and h5dump read every link and value of it.
#[test]
fn a_thousand_changes_to_an_h5py_group_leave_a_file_no_larger_than_libhdf5s() {
    let (dir, src) = tmp("src.h5");
    run_python(
        r#"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    for k in range(8):
        f.create_dataset(f"t{k}", data=np.arange(k + 3, dtype="<i4") * (k + 1))
    g = f.create_group("g")
    for i in range(300):
        g[f"init{i:04}"] = f[f"t{i % 8}"]
    for i in range(50):
        g[f"soft{i:03}"] = h5py.SoftLink(f"/t{i % 8}")
"#,
        &[src.to_str().unwrap()],
    );
    // The bytes of the group's B-tree and symbol table nodes and of its local heap, as libhdf5
    // reports them.
    let held: u64 = run_python(
        r#"
import sys, h5py, h5py.h5o as o
with h5py.File(sys.argv[1], "r") as f:
    m = o.get_info(f["g"].id).meta_size.obj
    print(m.index_size + m.heap_size)
"#,
        &[src.to_str().unwrap()],
    )
    .trim()
    .parse()
    .unwrap();
    let mut model: std::collections::BTreeMap<String, Points> = (0..300u64)
        .map(|i| (format!("init{i:04}"), Points::Hard(i % 8)))
        .chain((0..50u64).map(|i| (format!("soft{i:03}"), Points::Soft(format!("/t{}", i % 8)))))
        .collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut ops: Vec<serde_json::Value> = Vec::new();
    for n in 0..1000u64 {
        let names: Vec<&String> = model.keys().collect();
        let pick = |r: &mut Rng| names[r.below(names.len() as u64) as usize].clone();
        let fresh = format!("n{n:04}{}", "x".repeat(rng.below(20) as usize));
        match rng.below(8) {
            0..=2 => {
                let k = rng.below(8);
                ops.push(serde_json::json!(["hard", fresh, format!("t{k}")]));
                model.insert(fresh, Points::Hard(k));
            }
            3 => {
                let p = format!("/t{}", rng.below(8));
                ops.push(serde_json::json!(["soft", fresh, p]));
                model.insert(fresh, Points::Soft(p));
            }
            4 | 5 => {
                let old = pick(&mut rng);
                ops.push(serde_json::json!(["remove", old]));
                model.remove(&old);
            }
            _ => {
                let old = pick(&mut rng);
                ops.push(serde_json::json!(["rename", old, fresh]));
                let t = model.remove(&old).expect("model");
                model.insert(fresh, t);
            }
        }
    }
    let ours = dir.path().join("ours.h5");
    let theirs = dir.path().join("theirs.h5");
    std::fs::copy(&src, &ours).unwrap();
    std::fs::copy(&src, &theirs).unwrap();
    let ops_json = serde_json::Value::Array(ops.clone()).to_string();
    run_python(
        r#"
import sys, json, h5py
with h5py.File(sys.argv[1], "r+") as f:
    g = f["g"]
    for op in json.loads(sys.argv[2]):
        if op[0] == "hard":
            g[op[1]] = f[op[2]]
        elif op[0] == "soft":
            g[op[1]] = h5py.SoftLink(op[2])
        elif op[0] == "remove":
            del g[op[1]]
        else:
            g.move(op[1], op[2])
"#,
        &[theirs.to_str().unwrap(), &ops_json],
    );
    {
        let f = h5::File::open_rw(&ours).unwrap();
        let g = f.group("g").unwrap();
        let targets: Vec<h5::Dataset> = (0..8)
            .map(|k| f.dataset(&format!("t{k}")).unwrap())
            .collect();
        for op in &ops {
            let s = |i: usize| op[i].as_str().unwrap();
            match s(0) {
                "hard" => {
                    let k: usize = s(2)[1..].parse().unwrap();
                    g.link_hard(s(1), &targets[k]).unwrap();
                }
                "soft" => g.link_soft(s(1), s(2)).unwrap(),
                "remove" => g.unlink(s(1)).unwrap(),
                _ => g.move_link(s(1), s(2)).unwrap(),
            }
        }
        let links = g.links().unwrap();
        assert_eq!(links.len(), model.len());
        f.close().unwrap();
    }
    let (ours_len, theirs_len) = (
        std::fs::metadata(&ours).unwrap().len(),
        std::fs::metadata(&theirs).unwrap().len(),
    );
    eprintln!(
        "after 1,000 changes: h5 {ours_len} bytes, libhdf5 {theirs_len} bytes \
         (the group's structures as written: {held} bytes)"
    );
    assert!(
        ours_len <= theirs_len + held,
        "h5 left {ours_len} bytes, libhdf5 {theirs_len}, the group's structures were {held}"
    );
    // Every link, its kind and (through it) its value, as h5py reads them.
    let expected: serde_json::Map<String, serde_json::Value> = model
        .iter()
        .map(|(name, p)| {
            let v = match p {
                Points::Hard(k) => serde_json::json!(["hard", k]),
                Points::Soft(path) => serde_json::json!(["soft", path]),
            };
            (name.clone(), v)
        })
        .collect();
    let out = run_python(
        r#"
import sys, json, h5py, numpy as np
expected = json.loads(sys.argv[2])
with h5py.File(sys.argv[1], "r") as f:
    g = f["g"]
    assert sorted(g.keys()) == sorted(expected), "link names differ"
    for name, (kind, what) in expected.items():
        link = g.get(name, getlink=True)
        if kind == "hard":
            assert isinstance(link, h5py.HardLink), name
            k = what
            want = np.arange(k + 3, dtype="<i4") * (k + 1)
        else:
            assert isinstance(link, h5py.SoftLink) and link.path == what, name
            k = int(what[2:])
            want = np.arange(k + 3, dtype="<i4") * (k + 1)
        assert np.array_equal(g[name][...], want), name
print(len(expected))
"#,
        &[
            ours.to_str().unwrap(),
            &serde_json::Value::Object(expected).to_string(),
        ],
    );
    assert_eq!(out.trim(), model.len().to_string());
    h5_testkit::verify::h5dump(&[], &ours).unwrap_or_else(|e| panic!("h5dump: {e}"));
}

#[derive(Clone, Debug)]
enum Op {
    Hard(u16),
    Soft(u16, u8),
    Remove(u16),
    Rename(u16, u16),
    Write { start: u16, len: u8, seed: i32 },
    Resize(u16),
    Flush,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u16..400).prop_map(Op::Hard),
        2 => (0u16..400, 1u8..30).prop_map(|(n, l)| Op::Soft(n, l)),
        4 => (0u16..400).prop_map(Op::Remove),
        2 => (0u16..400, 0u16..400).prop_map(|(a, b)| Op::Rename(a, b)),
        5 => (0u16..400, 1u8..40, any::<i32>()).prop_map(|(start, len, seed)| Op::Write { start, len, seed }),
        2 => (0u16..420).prop_map(Op::Resize),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

/// Link names of varied lengths.
fn link_name(n: u16) -> String {
    format!("l{n:03}{}", "q".repeat(usize::from(n % 17)))
}

fn tiny_access() -> FileAccess {
    FileAccess::new()
        .metadata_invariant_checks(true)
        .metadata_cache(h5_metacache::CacheConfig::fixed_size(1024))
        .chunk_cache(h5_chunkcache::ChunkCacheConfig {
            limit: 4 * 1024,
            ..h5_chunkcache::ChunkCacheConfig::default()
        })
}

/// What h5 reads back must be the model: the group's links and the dataset's values.
fn check_h5(f: &h5::File, links: &std::collections::BTreeMap<String, Points>, data: &[i32]) {
    let g = f.group("g").unwrap();
    let got: Vec<(String, Points)> = g
        .links()
        .unwrap()
        .into_iter()
        .map(|l| {
            let p = match l.kind {
                h5::LinkKind::Soft(p) => Points::Soft(p),
                _ => Points::Hard(0),
            };
            (l.name, p)
        })
        .collect();
    let want: Vec<(String, Points)> = links.iter().map(|(n, p)| (n.clone(), p.clone())).collect();
    assert_eq!(got, want);
    let d = f.dataset("d").unwrap();
    let v: Vec<i32> = d.read::<i32>().unwrap().into_raw_vec_and_offset().0;
    assert_eq!(v, data);
}

/// Random link changes in an old-style group and chunk writes, growths and shrinks of a
/// deflated dataset indexed by a version 1 B-tree, through a 1 KiB metadata cache with
/// per-call invariant checks and a 4 KiB chunk cache, flushed, closed and reopened at random
/// points; h5 re-reads the model at each reopen, h5py and h5dump at the end.
fn run(ops: &[Op]) {
    let (_d, path) = tmp("random.h5");
    let options = h5::CreateOptions {
        bounds: h5::FormatBounds::Earliest,
        ..h5::CreateOptions::default()
    };
    let mut f = h5::File::create_with(&path, &tiny_access(), &options).unwrap();
    let root = f.root().unwrap();
    root.create_group("g").unwrap();
    root.new_dataset::<i32>()
        .shape([0])
        .max_shape([None])
        .chunk([3])
        .deflate(4)
        .create("d")
        .unwrap();
    root.new_dataset::<i32>()
        .create_with_data("target", &[5, 6, 7])
        .unwrap();
    drop(root);
    let mut links: std::collections::BTreeMap<String, Points> = Default::default();
    let mut data: Vec<i32> = Vec::new();
    for op in ops {
        let g = f.group("g").unwrap();
        match *op {
            Op::Hard(n) => {
                let name = link_name(n);
                let r = g.link_hard(&name, &f.dataset("target").unwrap());
                match links.entry(name) {
                    Entry::Occupied(e) => assert!(r.is_err(), "{} linked twice", e.key()),
                    Entry::Vacant(e) => {
                        r.unwrap();
                        e.insert(Points::Hard(0));
                    }
                }
            }
            Op::Soft(n, l) => {
                let name = link_name(n);
                let target = format!("/{}", "s".repeat(usize::from(l)));
                let r = g.link_soft(&name, &target);
                match links.entry(name) {
                    Entry::Occupied(e) => assert!(r.is_err(), "{} linked twice", e.key()),
                    Entry::Vacant(e) => {
                        r.unwrap();
                        e.insert(Points::Soft(target));
                    }
                }
            }
            Op::Remove(n) => {
                let name = link_name(n);
                let r = g.unlink(&name);
                assert_eq!(r.is_ok(), links.remove(&name).is_some(), "{name}: {r:?}");
            }
            Op::Rename(a, b) => {
                let (from, to) = (link_name(a), link_name(b));
                let r = g.move_link(&from, &to);
                if links.contains_key(&from) && !links.contains_key(&to) {
                    r.unwrap();
                    let t = links.remove(&from).unwrap();
                    links.insert(to, t);
                } else {
                    assert!(r.is_err(), "{from} -> {to}");
                }
            }
            Op::Write { start, len, seed } => {
                let d = f.dataset("d").unwrap();
                let (start, len) = (usize::from(start), usize::from(len));
                if start + len > data.len() {
                    d.resize([start + len]).unwrap();
                    data.resize(start + len, 0);
                }
                let v: Vec<i32> = (0..len as i32).map(|i| seed.wrapping_add(i * 7)).collect();
                d.write_slice(
                    &v,
                    [S::Slice {
                        start: start as isize,
                        end: Some((start + len) as isize),
                        step: 1,
                    }],
                )
                .unwrap();
                data[start..start + len].copy_from_slice(&v);
            }
            Op::Resize(n) => {
                // Shrinks cut whole chunks (to a multiple of 3); growths add fill values.
                let n = usize::from(n);
                let n = if n < data.len() { n / 3 * 3 } else { n };
                f.dataset("d").unwrap().resize([n]).unwrap();
                data.resize(n, 0);
            }
            Op::Flush => f.flush().unwrap(),
            Op::Reopen => {
                drop(g);
                f.close().unwrap();
                f = h5::File::open_rw_with(&path, &tiny_access()).unwrap();
                check_h5(&f, &links, &data);
                continue;
            }
        }
    }
    check_h5(&f, &links, &data);
    f.close().unwrap();
    let expected: serde_json::Map<String, serde_json::Value> = links
        .iter()
        .map(|(n, p)| {
            let v = match p {
                Points::Hard(_) => serde_json::Value::Null,
                Points::Soft(s) => serde_json::Value::String(s.clone()),
            };
            (n.clone(), v)
        })
        .collect();
    run_python(
        r#"
import sys, json, h5py, numpy as np
links, data = json.loads(sys.argv[2]), json.loads(sys.argv[3])
with h5py.File(sys.argv[1], "r") as f:
    g = f["g"]
    assert sorted(g.keys()) == sorted(links), (sorted(g.keys()), sorted(links))
    for name, soft in links.items():
        link = g.get(name, getlink=True)
        if soft is None:
            assert isinstance(link, h5py.HardLink), name
            assert list(g[name][...]) == [5, 6, 7], name
        else:
            assert isinstance(link, h5py.SoftLink) and link.path == soft, name
    assert f["d"].shape == (len(data),), f["d"].shape
    assert np.array_equal(f["d"][...], np.array(data, dtype="<i4")), "values"
"#,
        &[
            path.to_str().unwrap(),
            &serde_json::Value::Object(expected).to_string(),
            &serde_json::to_string(&data).unwrap(),
        ],
    );
    h5_testkit::verify::h5dump(&[], &path).unwrap_or_else(|e| panic!("h5dump: {e}"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    #[test]
    fn random_changes_to_old_style_structures_read_back_in_h5_h5py_and_h5dump(
        ops in proptest::collection::vec(op(), 1..400)
    ) {
        run(&ops);
    }
}
