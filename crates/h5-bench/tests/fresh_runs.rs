//! `h5-bench all --fresh`: every timed run of h5 happens in a child process of its own (this
//! program again, `--mem-child`), whose phase times, checksum and file size come back as JSON.

use std::process::Command;

#[test]
fn fresh_timed_runs_report_measured_rows_with_checked_values() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_h5-bench"))
        .args([
            "all",
            "--quick",
            "--only",
            "4",
            "--reps",
            "2",
            "--skip-h5py",
            "--fresh",
        ])
        .arg("--dir")
        .arg(dir.path())
        // The workspace's venv with h5py (scripts/setup-tools makes it), which checks h5's files.
        .arg("--python")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../.venv/bin/python"
        ))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "h5-bench failed ({:?})\nstdout:\n{text}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("timed runs: --fresh"), "{text}");
    // Both W4 phases measured for h5 (a time in seconds or milliseconds), values checked.
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("| W4 append"))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    for row in rows {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert!(
            cells[3].ends_with(" s") || cells[3].ends_with(" ms"),
            "h5's time cell: {row}"
        );
        assert_eq!(cells[cells.len() - 2], "ok", "{row}");
    }
}
