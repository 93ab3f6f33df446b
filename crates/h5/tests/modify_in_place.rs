//! Files written by h5py (libhdf5 1.14.4, its default earliest format, with and without a
//! userblock) opened read-write by h5 and changed: groups, datasets and attributes added,
//! deleted, renamed and moved; datasets written and extended. h5py and h5dump then read the
//! result. These tests need `scripts/setup-tools` (run by the README test command) and fail
//! loudly without it.

use std::path::{Path, PathBuf};

use h5_testkit::verify::{
    AttrExpect, DatasetExpect, Expectations, check_with_h5py, h5dump, run_python,
};
use ndarray::SliceInfoElem as S;
use serde_json::json;

/// Writes the source file with h5py: `userblock` bytes of userblock (0: none).
fn make_source(path: &Path, userblock: u32) {
    let code = r#"
import sys, h5py, numpy as np
path, ub = sys.argv[1], int(sys.argv[2])
kw = {"userblock_size": ub} if ub else {}
with h5py.File(path, "w", **kw) as f:
    f.attrs["title"] = np.int32(7)
    f.attrs["old"] = np.float64(2.5)
    g = f.create_group("grp")
    for i in range(12):
        g.create_dataset(f"d{i:02}", data=np.arange(i + 1, dtype="<i4"))
    f.create_dataset("cont", data=np.arange(100, dtype="<f8"))
    f.create_dataset("late", shape=(50,), dtype="<i2")
    c = f.create_dataset("ext", data=np.arange(1000, dtype="<i4").reshape(10, 100),
                         maxshape=(None, 100), chunks=(4, 25), compression="gzip",
                         shuffle=True)
    c.attrs["units"] = np.int16(3)
    f.create_dataset("big", data=np.ones(1 << 17, dtype="<f8"))
    f["soft"] = h5py.SoftLink("/grp/d03")
    f["grp/hard"] = f["cont"]
if ub:
    with open(path, "r+b") as fh:
        fh.write(b"USERBLOCK!")
"#;
    run_python(code, &[path.to_str().unwrap(), &userblock.to_string()]);
}

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    (dir, p)
}

fn check(path: &Path, exp: &Expectations) {
    if let Err(e) = check_with_h5py(path, exp) {
        panic!("h5py disagrees with what h5 changed:\n{e}");
    }
    // The whole file, data included.
    h5dump(&[], path).unwrap_or_else(|e| panic!("h5dump failed: {e}"));
}

fn modify_and_check(userblock: u32) {
    let (_d, path) = tmp("src.h5");
    make_source(&path, userblock);
    let before = std::fs::metadata(&path).unwrap().len();
    {
        let f = h5::File::open_rw(&path).unwrap();
        let root = f.root().unwrap();
        // Groups: a new nested group, deletes, a rename and a move.
        let n = f.create_group("new/inner").unwrap();
        n.write_attr_scalar("depth", 2u8).unwrap();
        let grp = f.group("grp").unwrap();
        for i in [0, 5, 11] {
            grp.unlink(&format!("d{i:02}")).unwrap();
        }
        grp.move_link("d01", "renamed").unwrap();
        root.move_link("grp/d02", "new/inner/moved").unwrap();
        // The last link to "big" goes: its megabyte is free for the next dataset once a flush
        // has completed without it (delayed reuse, docs/design.md §6).
        root.unlink("big").unwrap();
        f.flush().unwrap();
        let again: Vec<f64> = (0..(1 << 17)).map(f64::from).collect();
        root.new_dataset::<f64>()
            .create_with_data("big2", &again)
            .unwrap();
        // "cont" is also linked as grp/hard: unlinking one link keeps the object.
        root.unlink("cont").unwrap();
        // Attributes: new, overwritten, deleted, renamed.
        root.write_attr_scalar("title", 8i32).unwrap();
        root.delete_attr("old").unwrap();
        root.rename_attr("title", "heading").unwrap();
        root.write_attr_str("note", "changed by h5").unwrap();
        // Datasets: overwrite part of a contiguous one, write a never-written one, extend a
        // chunked deflated one and fill the new rows.
        let late = root.dataset("late").unwrap();
        let v: Vec<i16> = (0..50).map(|i| i * 3).collect();
        late.write(&v).unwrap();
        let ext = root.dataset("ext").unwrap();
        ext.resize([13, 100]).unwrap();
        let rows: Vec<i32> = (0..300).map(|i| -i).collect();
        ext.write_slice(
            &rows,
            [
                S::Slice {
                    start: 10,
                    end: Some(13),
                    step: 1,
                },
                S::Slice {
                    start: 0,
                    end: None,
                    step: 1,
                },
            ],
        )
        .unwrap();
        ext.write_attr_scalar("rows", 13u32).unwrap();
        let hard = root.dataset("grp/hard").unwrap();
        hard.write_slice(
            &[-1.0f64, -2.0],
            [S::Slice {
                start: 10,
                end: Some(12),
                step: 1,
            }],
        )
        .unwrap();
        f.close().unwrap();
    }
    let after = std::fs::metadata(&path).unwrap().len();
    assert!(
        after < before + 64 * 1024,
        "the freed megabyte was not reused: {before} -> {after} bytes"
    );

    let mut ext: Vec<i64> = (0..1000).collect();
    ext.extend((0..300).map(|i| -i));
    let mut cont: Vec<f64> = (0..100).map(f64::from).collect();
    cont[10] = -1.0;
    cont[11] = -2.0;
    let mut exp = Expectations::new()
        .group("/", &["grp", "late", "ext", "soft", "new", "big2"])
        .group(
            "/grp",
            &[
                "renamed", "d03", "d04", "d06", "d07", "d08", "d09", "d10", "hard",
            ],
        )
        .group("/new/inner", &["moved"])
        .attr_names("/", &["heading", "note"])
        .attr("/", "heading", AttrExpect::new("<i4", json!(8)))
        .attr("/new/inner", "depth", AttrExpect::new("|u1", json!(2)))
        .attr("/ext", "units", AttrExpect::new("<i2", json!(3)))
        .attr("/ext", "rows", AttrExpect::new("<u4", json!(13)))
        .soft_link("/soft", "/grp/d03")
        .dataset(
            "/grp/renamed",
            DatasetExpect::new("<i4", &[2]).values(json!([0, 1])),
        )
        .dataset(
            "/new/inner/moved",
            DatasetExpect::new("<i4", &[3]).values(json!([0, 1, 2])),
        )
        .dataset(
            "/soft",
            DatasetExpect::new("<i4", &[4]).values(json!([0, 1, 2, 3])),
        )
        .dataset(
            "/late",
            DatasetExpect::new("<i2", &[50])
                .values(json!((0..50).map(|i| i * 3).collect::<Vec<i32>>())),
        )
        .dataset(
            "/ext",
            DatasetExpect::new("<i4", &[13, 100])
                .maxshape(&[None, Some(100)])
                .chunks(&[4, 25])
                .gzip(4)
                .shuffle(true)
                .values(json!(ext.chunks(100).collect::<Vec<_>>())),
        )
        .dataset(
            "/grp/hard",
            DatasetExpect::new("<f8", &[100]).values(json!(cont)),
        )
        .dataset(
            "/big2",
            DatasetExpect::new("<f8", &[1 << 17]).spot(&[77], json!(77.0)),
        );
    if userblock > 0 {
        exp = exp.userblock_size(u64::from(userblock));
    }
    check(&path, &exp);
    if userblock > 0 {
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..10], b"USERBLOCK!", "the userblock was overwritten");
    }

    // h5 reads its own changes back after reopening.
    let f = h5::File::open(&path).unwrap();
    let late: Vec<i16> = f.dataset("late").unwrap().read_1d().unwrap().to_vec();
    assert_eq!(late, (0..50).map(|i| i * 3).collect::<Vec<i16>>());
    assert!(f.dataset("big").is_err());
    assert_eq!(f.dataset("ext").unwrap().shape(), vec![13, 100]);
}

/// h5py's default format, no userblock.
#[test]
fn an_h5py_file_changed_in_place_reads_back_in_h5py_and_h5dump() {
    modify_and_check(0);
}

/// The same with a 512-byte userblock: addresses count from the superblock and the userblock's
/// bytes survive.
#[test]
fn a_file_with_a_userblock_changed_in_place_keeps_its_userblock() {
    modify_and_check(512);
}

/// Deleting a group deletes its members (their space is returned), unless another link keeps
/// one of them; reopening for writing twice in a row accumulates changes.
#[test]
fn deleting_a_group_releases_its_members_and_changes_accumulate() {
    let (_d, path) = tmp("g.h5");
    make_source(&path, 0);
    {
        let f = h5::File::open_rw(&path).unwrap();
        let root = f.root().unwrap();
        // grp/hard is the second link of /cont, which survives.
        root.unlink("grp").unwrap();
        assert!(matches!(root.group("grp"), Err(h5::Error::NotFound(_))));
        f.close().unwrap();
    }
    {
        let f = h5::File::open_rw(&path).unwrap();
        let g = f.create_group("grp").unwrap();
        g.new_dataset::<u8>()
            .create_with_data("x", &[1, 2, 3])
            .unwrap();
        f.close().unwrap();
    }
    let exp = Expectations::new()
        .group("/", &["grp", "cont", "late", "ext", "big", "soft"])
        .group("/grp", &["x"])
        .dataset(
            "/cont",
            DatasetExpect::new("<f8", &[100])
                .values(json!((0..100).map(f64::from).collect::<Vec<_>>())),
        )
        .dataset(
            "/grp/x",
            DatasetExpect::new("|u1", &[3]).values(json!([1, 2, 3])),
        );
    check(&path, &exp);
}

/// A read-only handle refuses every change with `ReadOnly`, and the file is untouched.
#[test]
fn read_only_handles_refuse_changes() {
    let (_d, path) = tmp("ro.h5");
    make_source(&path, 0);
    let before = std::fs::read(&path).unwrap();
    {
        let f = h5::File::open(&path).unwrap();
        let root = f.root().unwrap();
        assert!(matches!(root.unlink("big"), Err(h5::Error::ReadOnly)));
        assert!(matches!(
            root.delete_attr("title"),
            Err(h5::Error::ReadOnly)
        ));
        assert!(matches!(
            f.dataset("late").unwrap().write(&[1i16; 50]),
            Err(h5::Error::ReadOnly)
        ));
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// A second hard link raises the object's reference count (what libhdf5 relies on when it
/// deletes); removing one link lowers it and keeps the object.
#[test]
fn hard_links_count_references() {
    let (_d, path) = tmp("rc.h5");
    {
        let f = h5::File::create(&path).unwrap();
        let root = f.root().unwrap();
        let ds = root
            .new_dataset::<i32>()
            .create_with_data("a", &[5, 6, 7])
            .unwrap();
        root.link_hard("b", &ds).unwrap();
        f.close().unwrap();
    }
    let rc = |p: &Path, name: &str| -> String {
        run_python(
            "import sys, h5py\nf = h5py.File(sys.argv[1])\nprint(h5py.h5o.get_info(f[sys.argv[2]].id).rc)",
            &[p.to_str().unwrap(), name],
        )
        .trim()
        .to_string()
    };
    assert_eq!(rc(&path, "a"), "2");
    {
        let f = h5::File::open_rw(&path).unwrap();
        f.root().unwrap().unlink("a").unwrap();
        f.close().unwrap();
    }
    assert_eq!(rc(&path, "b"), "1");
    let exp = Expectations::new().group("/", &["b"]).dataset(
        "/b",
        DatasetExpect::new("<i4", &[3]).values(json!([5, 6, 7])),
    );
    check(&path, &exp);
}

/// Space given back at the end of the file is truncated away at close, and the file stays valid.
#[test]
fn space_freed_at_the_end_is_truncated() {
    let (_d, path) = tmp("trunc.h5");
    {
        let f = h5::File::create(&path).unwrap();
        let root = f.root().unwrap();
        root.new_dataset::<u8>()
            .create_with_data("small", &[1, 2, 3])
            .unwrap();
        f.flush().unwrap();
        root.new_dataset::<f64>()
            .create_with_data("big", &vec![1.5; 1 << 17])
            .unwrap();
        f.close().unwrap();
    }
    let with_big = std::fs::metadata(&path).unwrap().len();
    assert!(with_big > 1 << 20);
    {
        let f = h5::File::open_rw(&path).unwrap();
        f.root().unwrap().unlink("big").unwrap();
        f.close().unwrap();
    }
    let after = std::fs::metadata(&path).unwrap().len();
    assert!(
        after + (1 << 20) <= with_big,
        "the freed megabyte at the end was not truncated: {with_big} -> {after} bytes"
    );
    let exp = Expectations::new().group("/", &["small"]).dataset(
        "/small",
        DatasetExpect::new("|u1", &[3]).values(json!([1, 2, 3])),
    );
    check(&path, &exp);
}

/// A file h5py wrote with `libver="latest"` (superblock 3, link-message groups, one of them
/// dense, a tracked one): links added, removed and moved, new datasets and attributes.
#[test]
fn a_latest_format_h5py_file_changed_in_place() {
    let (_d, path) = tmp("latest.h5");
    let code = r#"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w", libver="latest") as f:
    d = f.create_group("dense")
    for i in range(20):
        d.create_dataset(f"m{i:02}", data=np.arange(i + 1, dtype="<i4"))
    c = f.create_group("compact")
    c["x"] = np.int16(5)
    t = f.create_group("tracked", track_order=True)
    for n in ["c", "a", "b"]:
        t.create_group(n)
    f.attrs["keep"] = np.int32(1)
"#;
    run_python(code, &[path.to_str().unwrap()]);
    {
        let f = h5::File::open_rw(&path).unwrap();
        let root = f.root().unwrap();
        let dense = f.group("dense").unwrap();
        for i in 0..15 {
            dense.unlink(&format!("m{i:02}")).unwrap();
        }
        dense
            .new_dataset::<f64>()
            .create_with_data("new", &[0.5, 1.5])
            .unwrap();
        root.move_link("dense/m19", "compact/moved").unwrap();
        f.group("tracked").unwrap().create_group("d").unwrap();
        root.write_attr_scalar("added", 2u8).unwrap();
        f.close().unwrap();
    }
    let exp = Expectations::new()
        .superblock_version(3)
        .group("/", &["dense", "compact", "tracked"])
        .group("/dense", &["m15", "m16", "m17", "m18", "new"])
        .group("/compact", &["x", "moved"])
        .group("/tracked", &["c", "a", "b", "d"])
        .attr_names("/", &["keep", "added"])
        .dataset(
            "/compact/moved",
            DatasetExpect::new("<i4", &[20]).values(json!((0..20).collect::<Vec<i32>>())),
        )
        .dataset(
            "/dense/new",
            DatasetExpect::new("<f8", &[2]).values(json!([0.5, 1.5])),
        );
    check(&path, &exp);
    // libhdf5 lists the tracked group in creation order, the new link last.
    let order = run_python(
        "import sys, h5py\nprint(','.join(h5py.File(sys.argv[1])['tracked']))",
        &[path.to_str().unwrap()],
    );
    assert_eq!(order.trim(), "c,a,b,d");
}

/// Datasets libhdf5 created but never wrote (no chunk index yet, no contiguous block yet) take
/// writes after reopening.
#[test]
fn never_written_datasets_take_writes() {
    let (_d, path) = tmp("empty.h5");
    run_python(
        "import sys, h5py\nwith h5py.File(sys.argv[1], 'w') as f:\n    f.create_dataset('k', shape=(10,), chunks=(4,), dtype='<i4', compression='gzip')\n    f.create_dataset('c', shape=(6,), dtype='<u2')",
        &[path.to_str().unwrap()],
    );
    {
        let f = h5::File::open_rw(&path).unwrap();
        let k: Vec<i32> = (0..10).map(|i| i * 11).collect();
        f.dataset("k").unwrap().write(&k).unwrap();
        f.dataset("c")
            .unwrap()
            .write(&[1u16, 2, 3, 4, 5, 6])
            .unwrap();
        f.close().unwrap();
    }
    let exp = Expectations::new()
        .dataset(
            "/k",
            DatasetExpect::new("<i4", &[10])
                .chunks(&[4])
                .values(json!((0..10).map(|i| i * 11).collect::<Vec<i32>>())),
        )
        .dataset(
            "/c",
            DatasetExpect::new("<u2", &[6]).values(json!([1, 2, 3, 4, 5, 6])),
        );
    check(&path, &exp);
}

/// Datasets h5py wrote with the newer chunk indexes (libver latest: extensible array, fixed
/// array, v2 B-tree, single chunk) are written and resized by h5 after reopening.
#[test]
fn new_chunk_indexes_of_an_h5py_file_take_writes() {
    let (_d, path) = tmp("indexes.h5");
    let code = r#"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w", libver="latest") as f:
    f.create_dataset("ea", data=np.arange(10, dtype="<i4"), maxshape=(None,), chunks=(4,))
    f.create_dataset("fa", data=np.arange(24, dtype="<f8").reshape(4, 6), chunks=(2, 3),
                     compression="gzip")
    f.create_dataset("bt2", data=np.arange(12, dtype="<i2").reshape(3, 4),
                     maxshape=(None, None), chunks=(2, 2))
    f.create_dataset("single", data=np.arange(5, dtype="<u1"), chunks=(5,))
"#;
    run_python(code, &[path.to_str().unwrap()]);
    {
        let f = h5::File::open_rw(&path).unwrap();
        let ea = f.dataset("ea").unwrap();
        assert_eq!(ea.chunk_index(), Some(h5::ChunkIndexKind::ExtensibleArray));
        ea.resize([14]).unwrap();
        ea.write_slice(
            &[10i32, 11, 12, 13],
            [S::Slice {
                start: 10,
                end: Some(14),
                step: 1,
            }],
        )
        .unwrap();
        let fa = f.dataset("fa").unwrap();
        fa.write_points(&[vec![3, 5], vec![0, 0]], &[-1.0f64, -2.0])
            .unwrap();
        let bt2 = f.dataset("bt2").unwrap();
        bt2.resize([4, 5]).unwrap();
        bt2.write_points(&[vec![3, 4]], &[99i16]).unwrap();
        f.dataset("single")
            .unwrap()
            .write(&[9u8, 8, 7, 6, 5])
            .unwrap();
        f.close().unwrap();
    }
    let mut fa: Vec<Vec<f64>> = (0..4)
        .map(|r| (0..6).map(|c| (r * 6 + c) as f64).collect())
        .collect();
    fa[3][5] = -1.0;
    fa[0][0] = -2.0;
    let mut bt2: Vec<Vec<i64>> = (0..4)
        .map(|r| {
            (0..5)
                .map(|c| if r < 3 && c < 4 { r * 4 + c } else { 0 })
                .collect()
        })
        .collect();
    bt2[3][4] = 99;
    let exp = Expectations::new()
        .dataset(
            "/ea",
            DatasetExpect::new("<i4", &[14]).values(json!((0..14).collect::<Vec<i32>>())),
        )
        .dataset(
            "/fa",
            DatasetExpect::new("<f8", &[4, 6]).gzip(4).values(json!(fa)),
        )
        .dataset(
            "/bt2",
            DatasetExpect::new("<i2", &[4, 5]).values(json!(bt2)),
        )
        .dataset(
            "/single",
            DatasetExpect::new("|u1", &[5]).values(json!([9, 8, 7, 6, 5])),
        );
    check(&path, &exp);
}

/// Attributes libhdf5 stored densely (more than 8; one object tracking creation order) are
/// deleted, renamed, overwritten and added to by h5.
#[test]
fn dense_attributes_of_an_h5py_file_change_in_place() {
    let (_d, path) = tmp("dense_attrs.h5");
    let code = r#"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w", libver="latest") as f:
    g = f.create_group("g")
    for i in range(20):
        g.attrs[f"a{i:02}"] = np.int32(i)
    t = f.create_group("t", track_order=True)
    for i in range(12):
        t.attrs[f"z{11 - i:02}"] = np.float64(i)
"#;
    run_python(code, &[path.to_str().unwrap()]);
    {
        let f = h5::File::open_rw(&path).unwrap();
        let g = f.group("g").unwrap();
        g.delete_attr("a03").unwrap();
        g.rename_attr("a04", "renamed").unwrap();
        g.write_attr_scalar("a05", -5i32).unwrap();
        g.write_attr_scalar("new", 99i32).unwrap();
        assert!(matches!(g.delete_attr("a03"), Err(h5::Error::NotFound(_))));
        let t = f.group("t").unwrap();
        t.delete_attr("z05").unwrap();
        t.write_attr_scalar("last", 1.5f64).unwrap();
        f.close().unwrap();
    }
    let mut g_names: Vec<String> = (0..20)
        .filter(|i| *i != 3 && *i != 4)
        .map(|i| format!("a{i:02}"))
        .collect();
    g_names.push("renamed".into());
    g_names.push("new".into());
    let g_names: Vec<&str> = g_names.iter().map(String::as_str).collect();
    let exp = Expectations::new()
        .attr_names("/g", &g_names)
        .attr("/g", "renamed", AttrExpect::new("<i4", json!(4)))
        .attr("/g", "a05", AttrExpect::new("<i4", json!(-5)))
        .attr("/g", "new", AttrExpect::new("<i4", json!(99)))
        .attr("/g", "a19", AttrExpect::new("<i4", json!(19)))
        .attr("/t", "last", AttrExpect::new("<f8", json!(1.5)));
    check(&path, &exp);
    // The tracked object lists its attributes in creation order, the new one last.
    let order = run_python(
        "import sys, h5py\nprint(','.join(h5py.File(sys.argv[1])['t'].attrs))",
        &[path.to_str().unwrap()],
    );
    let mut want: Vec<String> = (0..12)
        .map(|i| format!("z{:02}", 11 - i))
        .filter(|n| n != "z05")
        .collect();
    want.push("last".into());
    assert_eq!(order.trim(), want.join(","));
}
