//! Files h5 writes with every format bound (earliest, v1.8, v1.10, latest): superblock and
//! object header versions, compact and dense groups, soft and external links, creation-order
//! tracking, compact and dense attributes; checked by h5py (libhdf5 1.14.4 and 2.0.0), h5dump and h5's own
//! reader after reopening. These tests need `scripts/setup-tools` and fail loudly without it.

use std::path::{Path, PathBuf};

use h5::{CreateOptions, FormatBounds, GroupOptions};
use h5_testkit::verify::{
    AttrExpect, DatasetExpect, Expectations, check_with_readers, digest_le, h5dump,
};
use serde_json::json;

const BOUNDS: [FormatBounds; 4] = [
    FormatBounds::Earliest,
    FormatBounds::V18,
    FormatBounds::V110,
    FormatBounds::LATEST,
];

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    (dir, p)
}

fn create(path: &Path, bounds: FormatBounds) -> h5::File {
    let options = CreateOptions {
        bounds,
        ..CreateOptions::default()
    };
    h5::File::create_with(path, &h5::FileAccess::default(), &options).expect("create")
}

/// Checks `path` with h5py (on HDF5 1.14 and 2.0; only 2.0 for V200 files) and, for bounds h5dump 1.10.8 reads (its datatype messages stop at
/// version 3: V112 and newer write version 4), with h5dump.
fn check(path: &Path, bounds: FormatBounds, exp: &Expectations) {
    if let Err(e) = check_with_readers(path, exp, bounds == FormatBounds::V200) {
        let _ = std::fs::copy(path, std::env::temp_dir().join("write_bounds_failed.h5"));
        panic!("h5py disagrees with what h5 wrote ({bounds:?}):\n{e}");
    }
    if bounds >= FormatBounds::V112 {
        return;
    }
    if let Err(e) = h5dump(&["-H"], path) {
        let _ = std::fs::copy(path, std::env::temp_dir().join("write_bounds_failed.h5"));
        panic!("h5dump failed: {e}");
    }
}

fn sb_version(bounds: FormatBounds) -> u8 {
    match bounds {
        FormatBounds::Earliest => 0,
        FormatBounds::V18 => 2,
        _ => 3,
    }
}

/// The storage libhdf5 reports for a group of `n` links written with `bounds`.
fn storage(bounds: FormatBounds, n: usize) -> &'static str {
    if bounds == FormatBounds::Earliest {
        "symbol_table"
    } else if n > 8 {
        "dense"
    } else {
        "compact"
    }
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("m{i:05}")).collect()
}

/// The last member that is a dataset in a group of `n > 1` members (odd indexes).
fn last_dataset(n: usize) -> usize {
    if n.is_multiple_of(2) { n - 1 } else { n - 2 }
}

const LINK_COUNTS: [usize; 6] = [0, 1, 8, 9, 100, 2000];
const ATTR_COUNTS: [usize; 4] = [0, 8, 9, 50];

/// The matrix: for every bound, groups of 0, 1, 8, 9, 100 and 2000 members (groups and
/// datasets alternating) each with 0, 8, 9 and 50 attributes: members, link storage,
/// attribute storage, header version and superblock version as libhdf5 reports them; h5's
/// reader before closing and after reopening.
#[test]
fn groups_of_every_size_with_attributes_for_every_bound() {
    for bounds in BOUNDS {
        let (_d, path) = tmp("groups.h5");
        let mut top = Vec::new();
        {
            let f = create(&path, bounds);
            for n in LINK_COUNTS {
                for a in ATTR_COUNTS {
                    let gname = format!("g{n}_a{a}");
                    top.push(gname.clone());
                    let g = f.create_group(&gname).unwrap();
                    for (i, name) in names(n).iter().enumerate() {
                        if i % 2 == 0 {
                            g.create_group(name).unwrap();
                        } else {
                            g.new_dataset::<i32>()
                                .create_with_data(name, &[i as i32])
                                .unwrap();
                        }
                    }
                    for i in 0..a {
                        g.write_attr_scalar::<u32>(&attr_name(i), i as u32).unwrap();
                    }
                    if bounds != FormatBounds::Earliest {
                        assert_eq!(g.is_dense(), Some(n > 8), "{bounds:?} {n}");
                    }
                    // Before the flush the group answers from its table.
                    assert_eq!(g.member_names().unwrap(), names(n));
                }
            }
            f.close().unwrap();
        }
        let header = if bounds == FormatBounds::Earliest {
            1
        } else {
            2
        };
        let top_refs: Vec<&str> = top.iter().map(String::as_str).collect();
        let mut exp = Expectations::new()
            .superblock_version(sb_version(bounds))
            .group("/", &top_refs)
            .group_storage("/", storage(bounds, top.len()))
            .header_version("/", header);
        for n in LINK_COUNTS {
            let all = names(n);
            let all: Vec<&str> = all.iter().map(String::as_str).collect();
            for a in ATTR_COUNTS {
                let p = format!("/g{n}_a{a}");
                let attrs: Vec<String> = (0..a).map(attr_name).collect();
                let attrs: Vec<&str> = attrs.iter().map(String::as_str).collect();
                exp = exp
                    .group(&p, &all)
                    .group_storage(&p, storage(bounds, n))
                    .header_version(&p, header)
                    .attr_names(&p, &attrs)
                    .attr_storage(
                        &p,
                        if bounds != FormatBounds::Earliest && a > 8 {
                            "dense"
                        } else {
                            "compact"
                        },
                    );
                if a > 0 {
                    exp = exp.attr(&p, &attr_name(a - 1), AttrExpect::new("<u4", json!(a - 1)));
                }
                if n > 1 {
                    let k = last_dataset(n);
                    let v = k as i32;
                    exp = exp.dataset(
                        &format!("{p}/{}", all[k]),
                        DatasetExpect::new("<i4", &[1]).digest(digest_le(&[v])),
                    );
                }
            }
        }
        check(&path, bounds, &exp);
        let f = h5::File::open(&path).unwrap();
        for n in LINK_COUNTS {
            for a in ATTR_COUNTS {
                let g = f.group(&format!("g{n}_a{a}")).unwrap();
                assert_eq!(g.member_names().unwrap(), names(n), "{bounds:?} {n} {a}");
                let want: Vec<String> = (0..a).map(attr_name).collect();
                assert_eq!(g.attr_names().unwrap(), want);
                if n > 1 {
                    let k = last_dataset(n);
                    let ds = g.dataset(&names(n)[k]).unwrap();
                    let got: Vec<i32> = ds.read::<i32>().unwrap().into_iter().collect();
                    assert_eq!(got, vec![k as i32]);
                }
            }
        }
    }
}

/// Nested paths (intermediate groups created on the way), soft links, external links to
/// another file and a hard link to a dataset, resolved by h5py and by h5.
#[test]
fn nested_paths_and_links_for_every_bound() {
    for bounds in BOUNDS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("links.h5");
        let other = dir.path().join("other.h5");
        {
            let f = create(&other, bounds);
            f.create_group("x/y")
                .unwrap()
                .new_dataset::<i16>()
                .create_with_data("z", &[4, 5, 6])
                .unwrap();
            f.close().unwrap();
        }
        {
            let f = create(&path, bounds);
            let c = f.create_group("a/b/c").unwrap();
            let ds = c
                .new_dataset::<f64>()
                .create_with_data("v", &[1.0, 2.0])
                .unwrap();
            // An existing intermediate group is reused.
            let d = f.create_group("a/b/d").unwrap();
            if bounds != FormatBounds::Earliest {
                // UTF-8 link and attribute names (character set recorded as UTF-8).
                d.create_group("größe").unwrap();
                d.write_attr_scalar::<u8>("länge", 1).unwrap();
            }
            assert!(matches!(f.create_group("a/b/c"), Err(h5::Error::Exists(_))));
            let root = f.root().unwrap();
            root.link_soft("soft", "/a/b/c/v").unwrap();
            root.link_hard("hard", &ds).unwrap();
            let r = root.link_external("ext", "other.h5", "/x/y/z");
            if bounds == FormatBounds::Earliest {
                assert!(matches!(r, Err(h5::Error::Unsupported(_))), "{r:?}");
            } else {
                r.unwrap();
                let got: Vec<i16> = f
                    .dataset("ext")
                    .unwrap()
                    .read::<i16>()
                    .unwrap()
                    .into_iter()
                    .collect();
                assert_eq!(got, vec![4, 5, 6]);
            }
            f.close().unwrap();
        }
        let mut top = vec!["a", "hard", "soft"];
        let mut exp = Expectations::new()
            .group("/a", &["b"])
            .group("/a/b", &["c", "d"])
            .soft_link("/soft", "/a/b/c/v")
            .hard_link("/hard")
            .refcount("/hard", 2)
            .refcount("/a/b/d", 1)
            .dataset(
                "/soft",
                DatasetExpect::new("<f8", &[2]).digest(digest_le(&[1.0f64, 2.0])),
            )
            .dataset(
                "/hard",
                DatasetExpect::new("<f8", &[2]).digest(digest_le(&[1.0f64, 2.0])),
            );
        if bounds == FormatBounds::Earliest {
            exp = exp.group("/a/b/d", &[]);
        } else {
            exp = exp.group("/a/b/d", &["größe"]).attr(
                "/a/b/d",
                "länge",
                AttrExpect::new("|u1", json!(1)),
            );
        }
        if bounds != FormatBounds::Earliest {
            top.push("ext");
            exp = exp.external_link("/ext", "other.h5", "/x/y/z").dataset(
                "/ext",
                DatasetExpect::new("<i2", &[3]).digest(digest_le(&[4i16, 5, 6])),
            );
        }
        exp = exp.group("/", &top);
        check(&path, bounds, &exp);
        let f = h5::File::open(&path).unwrap();
        let got: Vec<f64> = f
            .dataset("soft")
            .unwrap()
            .read::<f64>()
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(got, vec![1.0, 2.0]);
        if bounds != FormatBounds::Earliest {
            let got: Vec<i16> = f
                .dataset("ext")
                .unwrap()
                .read::<i16>()
                .unwrap()
                .into_iter()
                .collect();
            assert_eq!(got, vec![4, 5, 6]);
        }
    }
}

/// Groups that track link creation order list their members in creation order in h5py,
/// compact (5 links) and dense (40 links, with the creation-order index; 1,500 links, whose
/// name and creation-order indexes split and redistribute their nodes).
#[test]
fn creation_order_tracked_groups_list_in_creation_order() {
    for bounds in [FormatBounds::V18, FormatBounds::V110, FormatBounds::LATEST] {
        let (_d, path) = tmp("order.h5");
        let order =
            |n: usize| -> Vec<String> { (0..n).map(|i| format!("k{:03}", (i * 37) % n)).collect() };
        {
            // The root group tracks creation order too (h5py's `File(track_order=True)`).
            let options = CreateOptions {
                bounds,
                root_group: GroupOptions::tracked(),
                ..CreateOptions::default()
            };
            let f = h5::File::create_with(&path, &h5::FileAccess::default(), &options).unwrap();
            for n in [40usize, 5, 1500] {
                let g = f
                    .create_group_with(&format!("t{n}"), &GroupOptions::tracked())
                    .unwrap();
                for name in order(n) {
                    g.create_group(&name).unwrap();
                }
            }
            f.close().unwrap();
        }
        let mut exp = Expectations::new().group_ordered("/", &["t40", "t5", "t1500"]);
        for n in [5usize, 40, 1500] {
            let o = order(n);
            let o: Vec<&str> = o.iter().map(String::as_str).collect();
            let p = format!("/t{n}");
            exp = exp
                .group(&p, &o)
                .group_ordered(&p, &o)
                .group_storage(&p, if n > 8 { "dense" } else { "compact" });
        }
        check(&path, bounds, &exp);
        let f = h5::File::open(&path).unwrap();
        for n in [40usize, 1500] {
            let mut sorted = order(n);
            sorted.sort();
            let g = f.group(&format!("t{n}")).unwrap();
            assert_eq!(g.member_names().unwrap(), sorted);
        }
    }
}

fn attr_name(i: usize) -> String {
    format!("attr{i:03}")
}

/// Objects (a group and a dataset) with 0, 8, 9 and 50 attributes, one attribute replaced
/// after the phase change, and a 100 KiB attribute, for every bound: names, values, header
/// version and compact/dense storage as libhdf5 reports them, then h5's reader after reopening.
#[test]
fn attributes_compact_and_dense_for_every_bound() {
    let counts = [0usize, 8, 9, 50];
    let big: Vec<f64> = (0..12_800).map(|i| i as f64 * 0.25).collect();
    for bounds in BOUNDS {
        let (_d, path) = tmp("attrs.h5");
        {
            let f = create(&path, bounds);
            for n in counts {
                let g = f.create_group(&format!("g{n}")).unwrap();
                let ds = f
                    .root()
                    .unwrap()
                    .new_dataset::<u8>()
                    .create_with_data(&format!("d{n}"), &[1, 2, 3])
                    .unwrap();
                for i in 0..n {
                    g.write_attr::<i64>(&attr_name(i), &[i as i64, -(i as i64)])
                        .unwrap();
                    ds.write_attr_scalar::<f32>(&attr_name(i), i as f32 + 0.5)
                        .unwrap();
                }
                if n > 0 {
                    // Overwriting by name keeps one attribute of that name.
                    g.write_attr::<i64>(&attr_name(0), &[7, 7, 7]).unwrap();
                    ds.write_attr_str(&attr_name(n - 1), "replaced").unwrap();
                }
                // A fresh handle sees the attributes written so far.
                let fresh = f.group(&format!("g{n}")).unwrap();
                assert_eq!(fresh.attr_names().unwrap().len(), n);
            }
            let g = f.create_group("big").unwrap();
            g.write_attr_scalar::<u8>("small", 3).unwrap();
            let r = g.write_attr::<f64>("huge", &big);
            if bounds == FormatBounds::Earliest {
                assert!(matches!(r, Err(h5::Error::Unsupported(_))), "{r:?}");
            } else {
                r.unwrap();
                let got = f.group("big").unwrap().attr("huge").unwrap();
                let got = got.read::<f64>().unwrap();
                assert_eq!(got.into_iter().collect::<Vec<_>>(), big);
            }
            f.close().unwrap();
        }
        let header = if bounds == FormatBounds::Earliest {
            1
        } else {
            2
        };
        let dense = |n: usize| {
            if bounds != FormatBounds::Earliest && n > 8 {
                "dense"
            } else {
                "compact"
            }
        };
        let mut exp = Expectations::new().superblock_version(sb_version(bounds));
        for n in counts {
            let g = format!("/g{n}");
            let d = format!("/d{n}");
            let names: Vec<String> = (0..n).map(attr_name).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            exp = exp
                .attr_names(&g, &names)
                .attr_names(&d, &names)
                .header_version(&g, header)
                .header_version(&d, header)
                .attr_storage(&g, dense(n))
                .attr_storage(&d, dense(n));
            if n > 0 {
                exp = exp
                    .attr(&g, &attr_name(0), AttrExpect::new("<i8", json!([7, 7, 7])))
                    .attr(
                        &d,
                        &attr_name(n - 1),
                        AttrExpect::new("|S8/utf-8", json!("replaced")),
                    );
            }
            if n > 2 {
                exp = exp
                    .attr(
                        &g,
                        &attr_name(n - 2),
                        AttrExpect::new("<i8", json!([n - 2, 2 - n as i64])),
                    )
                    .attr(&d, &attr_name(1), AttrExpect::new("<f4", json!(1.5)));
            }
        }
        if bounds != FormatBounds::Earliest {
            exp = exp
                .attr_storage("/big", "dense")
                .attr_names("/big", &["huge", "small"])
                .attr(
                    "/big",
                    "huge",
                    AttrExpect::new("<f8", json!(big)).shape(&[big.len() as u64]),
                )
                .attr("/big", "small", AttrExpect::new("|u1", json!(3)));
        }
        check(&path, bounds, &exp);
        if bounds != FormatBounds::Earliest && bounds < FormatBounds::V112 {
            // h5dump prints attribute values read from dense storage, the huge one included.
            let out = h5dump(&["-a", "/big/huge"], &path).unwrap();
            assert!(out.contains("3199.75"), "{out}");
            let out = h5dump(&["-a", "/d50/attr049"], &path).unwrap();
            assert!(out.contains("\"replaced\""), "{out}");
        }
        let f = h5::File::open(&path).unwrap();
        for n in counts {
            let g = f.group(&format!("g{n}")).unwrap();
            let want: Vec<String> = (0..n).map(attr_name).collect();
            assert_eq!(g.attr_names().unwrap(), want, "{bounds:?} g{n}");
            let ds = f.dataset(&format!("d{n}")).unwrap();
            assert_eq!(ds.attr_names().unwrap(), want, "{bounds:?} d{n}");
            if n > 2 {
                let a = g.attr(&attr_name(1)).unwrap().read::<i64>().unwrap();
                assert_eq!(a.into_iter().collect::<Vec<_>>(), vec![1, -1]);
            }
        }
        if bounds != FormatBounds::Earliest {
            let got = f
                .group("big")
                .unwrap()
                .attr("huge")
                .unwrap()
                .read::<f64>()
                .unwrap();
            assert_eq!(got.into_iter().collect::<Vec<_>>(), big);
        }
    }
}

/// Datasets of every writable layout for every bound: chunked with filters (pipeline message
/// version per bound), fill values (fill value message version per bound), unlimited
/// dimensions grown by resize (dataspace version per bound), a scalar, string attributes;
/// then a tiny metadata cache that evicts entries while writing.
#[test]
fn datasets_for_every_bound() {
    let c: Vec<i32> = (0..3000).map(|i| i * 7 - 1000).collect();
    for bounds in BOUNDS {
        for tiny in [false, true] {
            let (_d, path) = tmp("data.h5");
            {
                let mut access = h5::FileAccess::default();
                if tiny {
                    let cfg = h5::MetadataCacheConfig {
                        set_initial_size: true,
                        initial_size: 16 * 1024,
                        min_size: 16 * 1024,
                        max_size: 16 * 1024,
                        incr_mode: h5_metacache::IncrMode::Off,
                        decr_mode: h5_metacache::DecrMode::Off,
                        flash_incr_mode: h5_metacache::FlashIncrMode::Off,
                        ..Default::default()
                    };
                    access = access.metadata_cache(cfg);
                }
                let options = CreateOptions {
                    bounds,
                    ..CreateOptions::default()
                };
                let f = h5::File::create_with(&path, &access, &options).unwrap();
                let root = f.root().unwrap();
                let cd = root
                    .new_dataset::<i32>()
                    .shape([100, 30])
                    .chunk([16, 8])
                    .shuffle()
                    .deflate(4)
                    .create("c")
                    .unwrap();
                cd.write(&c).unwrap();
                root.new_dataset::<f64>()
                    .shape([10])
                    .chunk([3])
                    .fletcher32()
                    .fill_value(-1.0)
                    .create("fill")
                    .unwrap();
                let grow = root
                    .new_dataset::<u16>()
                    .shape([2])
                    .max_shape([None])
                    .chunk([4])
                    .create("grow")
                    .unwrap();
                grow.write(&[1u16, 2]).unwrap();
                grow.resize([5]).unwrap();
                let s = root.new_dataset::<i8>().create("scalar").unwrap();
                s.write(&[-5i8]).unwrap();
                s.write_attr_str("unit", "m/s").unwrap();
                for i in 0..20 {
                    let g = f.create_group(&format!("many/g{i}")).unwrap();
                    g.write_attr_scalar::<u32>("i", i).unwrap();
                }
                f.close().unwrap();
            }
            let exp = Expectations::new()
                .superblock_version(sb_version(bounds))
                .dataset(
                    "/c",
                    DatasetExpect::new("<i4", &[100, 30])
                        .chunks(&[16, 8])
                        .gzip(4)
                        .shuffle(true)
                        .digest(digest_le(&c)),
                )
                .dataset(
                    "/fill",
                    DatasetExpect::new("<f8", &[10])
                        .chunks(&[3])
                        .fletcher32(true)
                        .fillvalue(json!(-1.0))
                        .digest(digest_le(&[-1.0f64; 10])),
                )
                .dataset(
                    "/grow",
                    DatasetExpect::new("<u2", &[5])
                        .maxshape(&[None])
                        .digest(digest_le(&[1u16, 2, 0, 0, 0])),
                )
                .dataset("/scalar", DatasetExpect::new("|i1", &[]).values(json!(-5)))
                .attr(
                    "/scalar",
                    "unit",
                    AttrExpect::new("|S3/utf-8", json!("m/s")),
                )
                .attr("/many/g19", "i", AttrExpect::new("<u4", json!(19)))
                .group_storage("/many", storage(bounds, 20));
            check(&path, bounds, &exp);
            let f = h5::File::open(&path).unwrap();
            let got: Vec<i32> = f
                .dataset("c")
                .unwrap()
                .read::<i32>()
                .unwrap()
                .into_iter()
                .collect();
            assert_eq!(got, c);
        }
    }
}

/// Several flushes: a group and an object's attributes pass from compact to dense between
/// flushes and grow again; a copy of the file after each flush reads back in h5py.
#[test]
fn layouts_change_between_flushes() {
    let (dir, path) = tmp("flushes.h5");
    let f = create(&path, FormatBounds::V18);
    let g = f.create_group("g").unwrap();
    let mut expected: Vec<String> = Vec::new();
    for (step, (links, attrs)) in [(5usize, 3usize), (12, 10), (150, 40)]
        .into_iter()
        .enumerate()
    {
        while expected.len() < links {
            let name = format!("n{:04}", expected.len());
            g.create_group(&name).unwrap();
            expected.push(name);
        }
        for i in 0..attrs {
            g.write_attr_scalar::<u64>(&attr_name(i), (step * 1000 + i) as u64)
                .unwrap();
        }
        f.flush().unwrap();
        let copy = dir.path().join(format!("copy{step}.h5"));
        std::fs::copy(&path, &copy).unwrap();
        let names: Vec<&str> = expected.iter().map(String::as_str).collect();
        let anames: Vec<String> = (0..attrs).map(attr_name).collect();
        let anames: Vec<&str> = anames.iter().map(String::as_str).collect();
        let exp = Expectations::new()
            .group("/g", &names)
            .group_storage("/g", if links > 8 { "dense" } else { "compact" })
            .attr_names("/g", &anames)
            .attr_storage("/g", if attrs > 8 { "dense" } else { "compact" })
            .attr(
                "/g",
                &attr_name(attrs - 1),
                AttrExpect::new("<u8", json!(step * 1000 + attrs - 1)),
            );
        check(&copy, FormatBounds::V18, &exp);
        let reopened = h5::File::open(&copy).unwrap();
        assert_eq!(
            reopened.group("g").unwrap().member_names().unwrap(),
            expected
        );
    }
    f.close().unwrap();
}

/// libhdf5 accepts the structures as its own: h5py opens the files read-write, adds links and
/// attributes to compact and dense groups (splitting our B-tree nodes, growing our heaps),
/// deletes some (merging nodes, dense back to compact), and everything reads back in h5py and
/// in h5.
#[test]
fn libhdf5_modifies_what_h5_wrote() {
    for bounds in [FormatBounds::V18, FormatBounds::V110, FormatBounds::LATEST] {
        let (_d, path) = tmp("modify.h5");
        {
            let f = create(&path, bounds);
            for n in [3usize, 9, 300] {
                let g = f.create_group(&format!("g{n}")).unwrap();
                for name in names(n) {
                    g.create_group(&name).unwrap();
                }
                for i in 0..n.min(60) {
                    g.write_attr_scalar::<i32>(&attr_name(i), i as i32).unwrap();
                }
            }
            let t = f
                .create_group_with("tracked", &GroupOptions::tracked())
                .unwrap();
            for i in 0..20 {
                t.create_group(&format!("t{}", 19 - i)).unwrap();
            }
            f.close().unwrap();
        }
        let out = h5_testkit::verify::run_python(
            r#"
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    for n in (3, 9, 300):
        g = f[f"g{n}"]
        for i in range(n, n + 40):
            g.create_group(f"m{i:05}")
        for i in range(0, n, 2):
            del g[f"m{i:05}"]
        for i in range(100, 120):
            g.attrs[f"x{i}"] = i
        for i in range(0, min(n, 60), 3):
            del g.attrs[f"attr{i:03}"]
    t = f["tracked"]
    t.create_group("zz_last")
with h5py.File(sys.argv[1], "r") as f:
    for n in (3, 9, 300):
        g = f[f"g{n}"]
        want = sorted([f"m{i:05}" for i in range(n + 40) if not (i < n and i % 2 == 0)])
        assert sorted(g.keys()) == want, (n, len(g.keys()), len(want))
        attrs = sorted([f"attr{i:03}" for i in range(min(n, 60)) if i % 3 != 0] + [f"x{i}" for i in range(100, 120)])
        assert sorted(g.attrs.keys()) == attrs, (n, sorted(g.attrs.keys()))
        for i in range(1, min(n, 60), 3):
            assert g.attrs[f"attr{i:03}"] == i
    t = f["tracked"]
    assert list(t.keys()) == [f"t{19 - i}" for i in range(20)] + ["zz_last"], list(t.keys())
print("ok")
"#,
            &[path.as_os_str()],
        );
        assert_eq!(out.trim(), "ok", "{bounds:?}");
        let f = h5::File::open(&path).unwrap();
        for n in [3usize, 9, 300] {
            let g = f.group(&format!("g{n}")).unwrap();
            let mut want: Vec<String> = (0..n + 40)
                .filter(|i| !(*i < n && i % 2 == 0))
                .map(|i| format!("m{i:05}"))
                .collect();
            want.sort();
            assert_eq!(g.member_names().unwrap(), want, "{bounds:?} g{n}");
        }
    }
}

/// Removing links: a dense group goes back to compact below 6 links (libhdf5's default
/// minimum), a tracked group keeps the creation order of the links left, a doubly linked
/// dataset counts one link again, and the earliest format removes entries too.
#[test]
fn unlinking_goes_back_to_compact() {
    let (_d, path) = tmp("unlink.h5");
    {
        let f = create(&path, FormatBounds::V18);
        let g = f.create_group("g").unwrap();
        let t = f.create_group_with("t", &GroupOptions::tracked()).unwrap();
        for i in 0..20 {
            g.create_group(&format!("n{i:02}")).unwrap();
            t.create_group(&format!("n{:02}", 19 - i)).unwrap();
        }
        let ds = g.new_dataset::<u8>().create_with_data("ds", &[9]).unwrap();
        f.root().unwrap().link_hard("again", &ds).unwrap();
        f.flush().unwrap();
        for i in 0..17 {
            g.unlink(&format!("n{i:02}")).unwrap();
            if i % 2 == 0 {
                t.unlink(&format!("n{i:02}")).unwrap();
            }
        }
        assert_eq!(g.is_dense(), Some(false));
        assert_eq!(t.is_dense(), Some(true));
        g.unlink("ds").unwrap();
        assert!(matches!(g.unlink("ds"), Err(h5::Error::NotFound(_))));
        f.close().unwrap();
    }
    let t_left: Vec<String> = (0..20)
        .map(|i| 19 - i)
        .filter(|i| !(*i < 17 && i % 2 == 0))
        .map(|i| format!("n{i:02}"))
        .collect();
    let t_left: Vec<&str> = t_left.iter().map(String::as_str).collect();
    let exp = Expectations::new()
        .group("/g", &["n17", "n18", "n19"])
        .group_storage("/g", "compact")
        .group("/t", &t_left)
        .group_ordered("/t", &t_left)
        .group_storage("/t", "dense")
        .refcount("/again", 1)
        .dataset("/again", DatasetExpect::new("|u1", &[1]).values(json!([9])));
    check(&path, FormatBounds::V18, &exp);

    // The earliest format removes symbol table entries (the group, losing its last link, is
    // deleted).
    let (_d, path) = tmp("unlink0.h5");
    let f = create(&path, FormatBounds::Earliest);
    f.create_group("x").unwrap();
    f.create_group("y").unwrap();
    f.root().unwrap().unlink("x").unwrap();
    assert!(matches!(
        f.root().unwrap().unlink("x"),
        Err(h5::Error::NotFound(_))
    ));
    f.close().unwrap();
    check(
        &path,
        FormatBounds::Earliest,
        &Expectations::new().group("/", &["y"]),
    );
}

/// A group tracking attribute creation order (h5py's `track_order=True`) lists its attributes
/// in creation order in h5py, compact (5) and dense (20, with the creation-order index); a
/// replaced attribute keeps its place.
#[test]
fn attribute_creation_order_is_tracked() {
    for bounds in [FormatBounds::V18, FormatBounds::LATEST] {
        let (_d, path) = tmp("attr_order.h5");
        let order =
            |n: usize| -> Vec<String> { (0..n).map(|i| format!("a{:02}", (i * 7) % n)).collect() };
        {
            let f = create(&path, bounds);
            for n in [5usize, 20] {
                let g = f
                    .create_group_with(&format!("t{n}"), &GroupOptions::tracked())
                    .unwrap();
                for (i, name) in order(n).iter().enumerate() {
                    g.write_attr_scalar::<i32>(name, i as i32).unwrap();
                }
                // Replaced before and after the phase change: the order stays.
                g.write_attr_scalar::<i32>(&order(n)[1], -1).unwrap();
            }
            f.close().unwrap();
        }
        let mut exp = Expectations::new();
        for n in [5usize, 20] {
            let o = order(n);
            let o: Vec<&str> = o.iter().map(String::as_str).collect();
            let p = format!("/t{n}");
            exp = exp
                .attr_order(&p, &o)
                .attr_storage(&p, if n > 8 { "dense" } else { "compact" })
                .attr(&p, o[1], AttrExpect::new("<i4", json!(-1)))
                .attr(&p, o[n - 1], AttrExpect::new("<i4", json!(n - 1)));
        }
        check(&path, bounds, &exp);
    }
}

/// A link message longer than the dense-link heap's 4 KiB managed objects (a soft link to a
/// long path) is stored as a huge object of the heap and still resolves by name.
#[test]
fn long_links_in_dense_groups_are_huge_heap_objects() {
    let (_d, path) = tmp("long.h5");
    let long = format!("/{}", "x".repeat(5000));
    {
        let f = create(&path, FormatBounds::V18);
        let g = f.create_group("g").unwrap();
        for i in 0..12 {
            g.create_group(&format!("n{i:02}")).unwrap();
        }
        g.link_soft("long", &long).unwrap();
        f.close().unwrap();
    }
    let mut names: Vec<String> = (0..12).map(|i| format!("n{i:02}")).collect();
    names.push("long".into());
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let exp = Expectations::new()
        .group("/g", &refs)
        .group_storage("/g", "dense")
        .soft_link("/g/long", &long);
    check(&path, FormatBounds::V18, &exp);
    let f = h5::File::open(&path).unwrap();
    let links = f.group("g").unwrap().links().unwrap();
    assert_eq!(links.len(), 13);
}

/// Misuse is a typed error and leaves the file valid.
#[test]
fn misuse_of_new_style_groups_is_a_typed_error() {
    let (_d, path) = tmp("misuse.h5");
    {
        let f = create(&path, FormatBounds::V18);
        let bad = GroupOptions {
            index_order: true,
            ..GroupOptions::default()
        };
        assert!(matches!(
            f.create_group_with("x", &bad),
            Err(h5::Error::Invalid(_))
        ));
        let bad = GroupOptions {
            max_compact: 4,
            min_dense: 9,
            ..GroupOptions::default()
        };
        assert!(matches!(
            f.create_group_with("x", &bad),
            Err(h5::Error::Invalid(_))
        ));
        let root = f.root().unwrap();
        assert!(matches!(
            root.link_external("e", "", "/p"),
            Err(h5::Error::Invalid(_))
        ));
        assert!(matches!(
            root.link_external("a/b", "f.h5", "/p"),
            Err(h5::Error::Invalid(_))
        ));
        root.link_external("e", "f.h5", "/p").unwrap();
        assert!(matches!(
            root.link_external("e", "f.h5", "/p"),
            Err(h5::Error::Exists(_))
        ));
        assert!(matches!(
            root.link_soft("e", "/q"),
            Err(h5::Error::Exists(_))
        ));
        assert!(matches!(
            root.unlink("nothing"),
            Err(h5::Error::NotFound(_))
        ));
        f.close().unwrap();
    }
    let exp = Expectations::new()
        .group("/", &["e"])
        .external_link("/e", "f.h5", "/p");
    check(&path, FormatBounds::V18, &exp);
}
