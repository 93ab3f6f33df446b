//! End-to-end tests of `h5 copy` and `h5 repack`: exit codes, the summary line, `--quiet`,
//! skipped objects, error messages, and the copies checked by h5py.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use h5_testkit::verify::{DatasetExpect, Expectations, check_with_h5py, python, workspace_dir};

fn fixture(name: &str) -> String {
    workspace_dir()
        .join("fixtures")
        .join("files")
        .join(name)
        .display()
        .to_string()
}

fn h5(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_h5"))
        .args(args)
        .output()
        .expect("run h5")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn tmp(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

/// h5py finds no difference between `src` and `dst` (see `tests/verify/h5_compare.py`).
fn same_in_h5py(src: &str, dst: &Path, opts: &str) {
    let out = Command::new(python())
        .arg(workspace_dir().join("tests/verify/h5_compare.py"))
        .arg(src)
        .arg(dst)
        .arg(opts)
        .output()
        .expect("run h5_compare.py");
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn copy_prints_a_summary_and_the_copy_matches() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dst = tmp(&dir, "out.h5");
    let src = fixture("layouts_earliest.h5");
    let o = h5(&["copy", &src, dst.to_str().expect("utf-8")]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    let line = lines[0];
    assert!(
        line.starts_with("copied 7 objects (1 group, 6 datasets)"),
        "{line}"
    );
    assert!(line.contains("bytes of raw data"), "{line}");
    assert!(line.contains(&format!("{src} ")), "{line}");
    assert!(line.contains(&format!("-> {} ", dst.display())), "{line}");
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
    same_in_h5py(&src, &dst, "{}");
}

#[test]
fn quiet_prints_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dst = tmp(&dir, "q.h5");
    let o = h5(&[
        "copy",
        "--quiet",
        &fixture("sb0_earliest.h5"),
        dst.to_str().expect("utf-8"),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(o.stdout.is_empty() && o.stderr.is_empty());
    assert!(dst.exists());
    let o = h5(&[
        "repack",
        "-q",
        "--deflate",
        "1",
        &fixture("sb0_earliest.h5"),
        dst.to_str().expect("utf-8"),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(o.stdout.is_empty() && o.stderr.is_empty());
}

/// By default a copy keeps the source's format bounds, raised to what its objects need: an
/// earliest-format file whose root libhdf5 turned into link messages for an external link is
/// copied in the 1.8 formats, external link included.
#[test]
fn copy_keeps_the_source_format_and_external_links() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dst = tmp(&dir, "g.h5");
    let src = fixture("groups_old.h5");
    let o = h5(&["copy", &src, dst.to_str().expect("utf-8")]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
    same_in_h5py(&src, &dst, "{}");
    let bytes = std::fs::read(&dst).unwrap();
    assert_eq!(bytes[8], 2, "superblock version 2");
}

/// With `--bounds earliest`, what symbol-table groups cannot hold (an external link) fails the
/// copy, or is skipped and named.
#[test]
fn unsupported_objects_fail_unless_skipped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dst = tmp(&dir, "g.h5");
    let src = fixture("groups_old.h5");
    let o = h5(&[
        "repack",
        "--bounds",
        "earliest",
        &src,
        dst.to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.starts_with("h5: error: cannot copy "), "{err}");
    assert!(err.contains("/ext_link"), "{err}");
    assert!(o.stdout.is_empty());
    assert!(!dst.exists(), "a failed copy leaves no file");

    let o = h5(&[
        "repack",
        "--bounds",
        "earliest",
        "--skip-unsupported",
        &src,
        dst.to_str().expect("utf-8"),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.starts_with(
            "h5: skipped /ext_link: external link to external_target.h5:/target/values"
        ) && err.lines().count() == 1,
        "{err}"
    );
    assert!(
        text(&o.stdout).contains("1 shared hard link, 2 soft links"),
        "{}",
        text(&o.stdout)
    );
    assert!(
        text(&o.stdout).contains("1 object skipped"),
        "{}",
        text(&o.stdout)
    );
    same_in_h5py(&src, &dst, r#"{"skip": ["/ext_link"]}"#);
}

#[test]
fn repack_changes_storage() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dst = tmp(&dir, "r.h5");
    let src = fixture("layouts_earliest.h5");
    let o = h5(&[
        "repack",
        &src,
        dst.to_str().expect("utf-8"),
        "--chunk",
        "4x4",
        "--shuffle",
        "--deflate",
        "5",
        "--dataset",
        "/contiguous:contiguous",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let exp = Expectations::new()
        .dataset(
            "/chunked_btree1",
            DatasetExpect::new("<i4", &[60, 70])
                .chunks(&[4, 4])
                .shuffle(true)
                .gzip(5),
        )
        .dataset(
            "/chunked_btree1_gzip",
            DatasetExpect::new("<i8", &[500])
                .chunks(&[500])
                .shuffle(true)
                .gzip(5),
        )
        .dataset(
            "/contiguous",
            DatasetExpect::new("<f8", &[100]).contiguous(),
        );
    if let Err(e) = check_with_h5py(&dst, &exp) {
        panic!("{e}");
    }
    same_in_h5py(&src, &dst, r#"{"storage": false}"#);
}

#[test]
fn bad_options_and_files_are_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dst = tmp(&dir, "x.h5");
    let d = dst.to_str().expect("utf-8");
    let src = fixture("sb0_earliest.h5");
    // clap refuses a malformed value with its usage error (exit 2).
    let o = h5(&["repack", &src, d, "--chunk", "0x3"]);
    assert_eq!(o.status.code(), Some(2));
    for args in [
        vec!["repack", &src, d, "--chunk", "auto", "--contiguous"],
        vec!["repack", &src, d, "--no-filters", "--deflate", "3"],
        vec!["repack", &src, d, "--compact"],
        vec!["repack", &src, d, "--dataset", "/nothing:contiguous"],
        vec!["copy", "/does/not/exist.h5", d],
        vec!["copy", &src, &src],
    ] {
        let o = h5(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            text(&o.stderr).starts_with("h5: error: "),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
    // Bounds the writer cannot produce yet are the library's error, not worked around.
    let o = h5(&["repack", &src, d, "--bounds", "latest"]);
    if !o.status.success() {
        assert_eq!(o.status.code(), Some(1));
        assert!(
            text(&o.stderr).contains("format bounds"),
            "{}",
            text(&o.stderr)
        );
        assert!(!dst.exists());
    }
}
