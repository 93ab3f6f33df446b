//! `h5 dump` with the options h5dump users type (`-d`, `-g`, `-A`, `-H`, `-n`, `-s`/`-S`/`-c`,
//! `-p`) prints what h5dump 1.10 prints for the same file and options, including a dataset larger
//! than one read block (printed as it is read); `h5 ls --data` previews values.

use std::path::{Path, PathBuf};
use std::process::Command;

use h5_testkit::verify::h5dump;

/// A file with a 2-D dataset, a chunked compressed one with attributes in a group, a soft link
/// and a dataset of 4.4 MB (more than one block of `h5 dump`).
fn sample(dir: &Path) -> PathBuf {
    let path = dir.join("t.h5");
    let f = h5::File::create(&path).unwrap();
    f.new_dataset::<i32>()
        .shape([4, 5])
        .create("x")
        .unwrap()
        .write(&(0..20).collect::<Vec<i32>>())
        .unwrap();
    let g = f.create_group("g").unwrap();
    g.write_attr("a", &[0.0f64, 1.0, 2.0]).unwrap();
    let y = g
        .new_dataset::<u16>()
        .shape([6])
        .chunk([2])
        .deflate(4)
        .create("y")
        .unwrap();
    y.write(&[0u16, 1, 2, 3, 4, 5]).unwrap();
    y.write_attr_str("units", "K").unwrap();
    g.link_soft("soft", "/x").unwrap();
    f.new_dataset::<u32>()
        .shape([1100, 1000])
        .create("big")
        .unwrap()
        .write(&(0..1_100_000).collect::<Vec<u32>>())
        .unwrap();
    f.close().unwrap();
    path
}

fn h5(dir: &Path, args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_h5"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run h5");
    assert!(
        o.status.success(),
        "h5 {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Both tools are given the same path, which both print in the first line.
fn same_as_h5dump(dir: &Path, options: &[&str]) {
    let file = dir.join("t.h5");
    let want = h5dump(options, &file).unwrap_or_else(|e| panic!("{e}"));
    let mut args = vec!["dump"];
    args.extend_from_slice(options);
    args.push(file.to_str().unwrap());
    let ours = h5(dir, &args);
    if ours != want {
        let at = ours
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        panic!(
            "h5 dump {options:?} differs from h5dump at line {}:\n  ours:   {:?}\n  h5dump: {:?}",
            at + 1,
            ours.lines().nth(at),
            want.lines().nth(at)
        );
    }
}

#[test]
fn dump_options_print_what_h5dump_prints() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    for options in [
        &["-H"][..],
        &["-A"],
        &["-n"],
        &["-d", "/x"],
        &["-d", "/x", "-g", "/g"],
        &["-g", "/g", "-H"],
        &["-d", "/x", "-s", "1,1", "-c", "2,3"],
        &["-d", "/x", "-s", "0,0", "-S", "2,2", "-c", "2,2"],
        &["-d", "/g/y", "-s", "1", "-c", "3"],
        // Larger than one block: printed block by block, line for line as h5dump prints it.
        &["-d", "/big"],
    ] {
        same_as_h5dump(dir.path(), options);
    }
    // -p: the storage layout, filters and fill value blocks (h5dump adds fill and allocation
    // times, which h5 does not print).
    let p = h5(dir.path(), &["dump", "-p", "-d", "/g/y", "t.h5"]);
    for block in [
        "   STORAGE_LAYOUT {\n      CHUNKED ( 2 )\n",
        "      COMPRESSION DEFLATE { LEVEL 4 }\n",
        "   FILLVALUE {\n",
    ] {
        assert!(p.contains(block), "{block:?} not in\n{p}");
    }
    let h5dump_p = h5dump(&["-p", "-d", "/g/y"], &dir.path().join("t.h5")).unwrap();
    let size = |s: &str| {
        s.lines()
            .find(|l| l.trim_start().starts_with("SIZE"))
            .map(str::to_owned)
    };
    assert_eq!(size(&p), size(&h5dump_p));
}

#[test]
fn subsets_need_a_dataset_and_must_fit() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_h5"))
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&["dump", "-s", "1", "t.h5"]);
    assert!(!o.status.success());
    let o = run(&["dump", "-d", "/x", "-s", "3,0", "-c", "2,1", "t.h5"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("<subset not printed: "), "{out}");
    let o = run(&["dump", "-d", "/g", "t.h5"]);
    assert!(!o.status.success());
}

#[test]
fn ls_data_previews_values() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let out = h5(dir.path(), &["ls", "-r", "--data", "--limit", "7", "t.h5"]);
    assert!(
        out.contains("  x  dataset {4, 5} int32 LE\n      (0,0): 0, 1, 2, 3, 4,\n      (1,0): 5, 6\n      ... (13 more elements)\n"),
        "{out}"
    );
    assert!(out.contains("(0): 0, 1, 2, 3, 4, 5\n"), "{out}");
    assert!(out.contains("... (1099993 more elements)"), "{out}");
}
