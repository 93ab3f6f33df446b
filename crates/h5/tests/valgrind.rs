//! h5 runs under valgrind. A VFD SWMR writer reads the clock at every API call; rustix's own
//! vDSO parser (its default `linux_raw` backend) faults under valgrind, which maps the vDSO
//! differently (rustix issue #1559), so every program using h5 could not be run under memcheck
//! or callgrind. The workspace builds rustix with `use-libc` (libc's `clock_gettime`), and this
//! test runs a writer under memcheck: it fails if the process faults or memcheck reports an
//! error, and fails loudly when valgrind is missing (scripts/setup-tools installs it).

mod swmr_common;

use std::path::Path;
use std::process::Command;

use swmr_common::*;

/// Set in the child run under valgrind: the directory to write in.
const CHILD_DIR: &str = "H5_TEST_VALGRIND_CHILD_DIR";
const TEST_NAME: &str = "a_vfd_swmr_writer_runs_under_valgrind_memcheck";

/// The child's work: a VFD SWMR writer with clock-driven ticks (tick_len 1 = 0.1 s), so that
/// every API call reads the clock, writing and closing a small file.
fn write_under_valgrind(dir: &Path) {
    let path = dir.join("v.h5");
    let f = h5::File::create_with(&path, &access(writer_cfg(1), 16), &paged()).unwrap();
    let ds = f
        .root()
        .unwrap()
        .new_dataset::<i32>()
        .shape([0])
        .max_shape([None])
        .chunk([8])
        .create("d")
        .unwrap();
    for round in 0..4usize {
        ds.resize([8 * (round + 1)]).unwrap();
        let v: Vec<i32> = (0..8).map(|i| (round * 8 + i) as i32).collect();
        ds.write_slice(
            &v,
            [ndarray::SliceInfoElem::Slice {
                start: (8 * round) as isize,
                end: Some((8 * round + 8) as isize),
                step: 1,
            }],
        )
        .unwrap();
        f.end_tick().unwrap();
    }
    f.close().unwrap();
}

#[test]
fn a_vfd_swmr_writer_runs_under_valgrind_memcheck() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        write_under_valgrind(Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("valgrind")
        .args([
            "--tool=memcheck",
            "--error-exitcode=99",
            "--leak-check=no",
            "-q",
        ])
        .arg(&exe)
        .args(["--exact", TEST_NAME, "--test-threads=1", "--nocapture"])
        .env(CHILD_DIR, dir.path())
        .output()
        .expect("valgrind is missing (scripts/setup-tools installs it)");
    assert!(
        out.status.success(),
        "the writer under valgrind ended with {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the child test did not run: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    // What the child wrote, read back here.
    let f = h5::File::open(dir.path().join("v.h5")).unwrap();
    let got: Vec<i32> = f.dataset("d").unwrap().read_1d().unwrap().to_vec();
    assert_eq!(got, (0..32).collect::<Vec<i32>>());
}
