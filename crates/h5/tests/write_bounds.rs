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

#[test]
fn scratch() {
    for (i, b) in BOUNDS.iter().enumerate() {
        let p = format!("/tmp/s_{i}.h5");
        let f = create(Path::new(&p), *b);
        f.create_group("a").unwrap();
        f.close().unwrap();
    }
}
