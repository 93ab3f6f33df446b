//! Opening members by name in a group with dense links (a fractal heap of link messages
//! indexed by name hash in a v2 B-tree): every member found is its own, including two names
//! whose hashes are equal (the index compares the names stored in the heap on a tie), and a
//! name absent whose hash equals a stored one's is not found. h5py reads the same members.

use std::collections::HashMap;

use h5::{CreateOptions, FormatBounds};
use h5_testkit::verify::run_python;

/// Two different names with the same lookup3 hash (the dense name index's key), found by
/// search: `n{i}` names collide well within 2^20 tries (a birthday bound on 32 bits).
fn colliding_names() -> (String, String) {
    let mut seen: HashMap<u32, String> = HashMap::new();
    for i in 0u32.. {
        let name = format!("n{i}");
        let hash = h5_format::checksum::lookup3(name.as_bytes(), 0);
        if let Some(other) = seen.insert(hash, name.clone()) {
            return (other, name);
        }
    }
    unreachable!("a 32-bit hash collides among 2^32 + 1 names")
}

fn value(i: usize) -> i64 {
    i as i64 * 11 - 5
}

const CHECK: &str = r#"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    g = f["g"]
    print(" ".join(f"{k}={int(g[k][0])}" for k in sys.argv[2:]))
"#;

#[test]
fn members_of_a_dense_group_open_by_name_with_equal_hashes() {
    let (a, b) = colliding_names();
    assert_eq!(
        h5_format::checksum::lookup3(a.as_bytes(), 0),
        h5_format::checksum::lookup3(b.as_bytes(), 0)
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("by_name.h5");
    let file = h5::File::create_with(
        &path,
        &h5::FileAccess::default(),
        &CreateOptions {
            bounds: FormatBounds::LATEST,
            ..Default::default()
        },
    )
    .unwrap();
    let g = file.create_group("g").unwrap();
    // Past the compact limit (8 links), so the two colliding names go into dense storage.
    let mut names: Vec<String> = (0..40).map(|i| format!("m{i:02}")).collect();
    names.insert(17, a.clone());
    names.insert(29, b.clone());
    for (i, n) in names.iter().enumerate() {
        g.new_dataset::<i64>()
            .create_with_data(n, &[value(i)])
            .unwrap();
    }
    let read =
        |g: &h5::Group, n: &str| -> i64 { g.dataset(n).unwrap().read::<i64>().unwrap()[[0]] };
    // While writable, then after reopening read-only.
    for (i, n) in names.iter().enumerate() {
        assert_eq!(read(&g, n), value(i), "{n}");
    }
    drop(g);
    file.close().unwrap();
    let file = h5::File::open(&path).unwrap();
    let g = file.group("g").unwrap();
    for (i, n) in names.iter().enumerate().rev() {
        assert_eq!(read(&g, n), value(i), "{n}");
    }
    assert!(!g.link_exists("absent").unwrap());
    drop(g);
    drop(file);

    let mut args = vec![path.to_str().unwrap().to_owned()];
    args.extend(names.iter().cloned());
    let got = run_python(CHECK, &args);
    let want: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{n}={}", value(i)))
        .collect();
    assert_eq!(got.trim(), want.join(" "));
}

#[test]
fn a_name_absent_whose_hash_is_stored_is_not_found() {
    let (a, b) = colliding_names();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.h5");
    let file = h5::File::create_with(
        &path,
        &h5::FileAccess::default(),
        &CreateOptions {
            bounds: FormatBounds::LATEST,
            ..Default::default()
        },
    )
    .unwrap();
    let g = file.create_group("g").unwrap();
    for i in 0..20 {
        g.new_dataset::<i64>()
            .create_with_data(&format!("m{i:02}"), &[value(i)])
            .unwrap();
    }
    g.new_dataset::<i64>().create_with_data(&a, &[7]).unwrap();
    assert!(!g.link_exists(&b).unwrap());
    assert!(matches!(g.dataset(&b), Err(h5::Error::NotFound(_))));
    // Creating the other name of the pair is not refused as a duplicate.
    g.new_dataset::<i64>().create_with_data(&b, &[8]).unwrap();
    drop(g);
    file.close().unwrap();
    let file = h5::File::open(&path).unwrap();
    let g = file.group("g").unwrap();
    assert_eq!(g.dataset(&a).unwrap().read::<i64>().unwrap()[[0]], 7);
    assert_eq!(g.dataset(&b).unwrap().read::<i64>().unwrap()[[0]], 8);
}
