//! Files h5 writes with every format bound (earliest, v1.8, v1.10, latest): superblock and
//! object header versions, compact and dense groups, soft and external links, creation-order
//! tracking, compact and dense attributes; checked by h5py (libhdf5 1.14.4), h5dump and h5's own
//! reader after reopening. These tests need `scripts/setup-tools` and fail loudly without it.

use std::path::{Path, PathBuf};

use h5::{CreateOptions, FormatBounds, GroupOptions};
use h5_testkit::verify::{
    AttrExpect, DatasetExpect, Expectations, check_with_h5py, digest_le, h5dump,
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

/// Checks `path` with h5py and, for bounds h5dump 1.10.8 reads (its datatype messages stop at
/// version 3: V112 and newer write version 4), with h5dump.
fn check(path: &Path, bounds: FormatBounds, exp: &Expectations) {
    if let Err(e) = check_with_h5py(path, exp) {
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
    if n % 2 == 0 { n - 1 } else { n - 2 }
}

/// Groups of 0, 1, 8, 9, 100 and 2000 members (groups and datasets alternating), for every
/// bound: members, storage type, superblock version, reopened by h5.
#[test]
fn groups_of_every_size_for_every_bound() {
    for bounds in BOUNDS {
        let (_d, path) = tmp("groups.h5");
        let counts = [0usize, 1, 8, 9, 100, 2000];
        {
            let f = create(&path, bounds);
            for n in counts {
                let g = f.create_group(&format!("g{n}")).unwrap();
                for (i, name) in names(n).iter().enumerate() {
                    if i % 2 == 0 {
                        g.create_group(name).unwrap();
                    } else {
                        g.new_dataset::<i32>()
                            .create_with_data(name, &[i as i32])
                            .unwrap();
                    }
                }
                if bounds != FormatBounds::Earliest {
                    assert_eq!(g.is_dense(), Some(n > 8), "{bounds:?} {n}");
                }
                // Before the flush the group answers from its table.
                assert_eq!(g.member_names().unwrap().len(), n);
            }
            f.close().unwrap();
        }
        let mut exp = Expectations::new().superblock_version(sb_version(bounds));
        let top: Vec<String> = counts.iter().map(|n| format!("g{n}")).collect();
        let top: Vec<&str> = top.iter().map(String::as_str).collect();
        exp = exp
            .group("/", &top)
            .group_storage("/", storage(bounds, top.len()));
        for n in counts {
            let all = names(n);
            let all: Vec<&str> = all.iter().map(String::as_str).collect();
            let p = format!("/g{n}");
            exp = exp.group(&p, &all).group_storage(&p, storage(bounds, n));
            if n > 1 {
                let k = last_dataset(n);
                let last = format!("{p}/{}", all[k]);
                let v = k as i32;
                exp = exp.dataset(
                    &last,
                    DatasetExpect::new("<i4", &[1]).digest(digest_le(&[v])),
                );
            }
        }
        check(&path, bounds, &exp);
        let f = h5::File::open(&path).unwrap();
        for n in counts {
            let g = f.group(&format!("g{n}")).unwrap();
            let got = g.member_names().unwrap();
            assert_eq!(got, names(n), "{bounds:?} g{n}");
            if n > 1 {
                let k = last_dataset(n);
                let ds = g.dataset(&names(n)[k]).unwrap();
                assert_eq!(
                    ds.read::<i32>().unwrap().into_iter().collect::<Vec<_>>(),
                    vec![k as i32]
                );
            }
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
