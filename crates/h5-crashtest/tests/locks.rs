//! File locking against other processes — h5 and h5py (libhdf5 1.14) — for every pair of open
//! modes, with locking on and off, and within one process (issue 14).
//!
//! libhdf5's rule, which h5 follows: a reader takes a shared `flock`, a writer (open for
//! writing or create) an exclusive one, taken before a create truncates; a conflicting open is
//! refused. `HDF5_USE_FILE_LOCKING=FALSE` turns the OS locks off; within one process h5 refuses
//! a conflicting second open whatever the setting (`AlreadyOpen`).

#![cfg(unix)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use h5::{File, FileAccess};
use h5_crashtest::py_script;

/// h5's modes (the holder binary's names) and h5py's equivalents.
const MODES: [(&str, &str); 3] = [("r", "r"), ("rw", "r+"), ("create", "w")];

/// A process holding the file; its first line says whether it opened it.
struct Holder {
    child: Child,
    line: String,
}

impl Holder {
    fn start(mut cmd: Command) -> Holder {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("holder process");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Holder {
            child,
            line: line.trim().to_string(),
        }
    }

    fn h5(path: &Path, mode: &str, no_locking: bool) -> Holder {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_h5-crashtest"));
        cmd.args(["hold", path.to_str().unwrap(), mode]);
        if no_locking {
            cmd.arg("--no-locking");
        }
        Holder::start(cmd)
    }

    fn h5py(path: &Path, mode: &str, no_locking: bool) -> Holder {
        let mut cmd = Command::new(h5_testkit::verify::python());
        cmd.arg(py_script("hold.py")).arg(path).arg(mode);
        if no_locking {
            cmd.env("HDF5_USE_FILE_LOCKING", "FALSE");
        }
        Holder::start(cmd)
    }

    fn ready(&self) -> bool {
        self.line == "ready"
    }

    /// Closes its standard input and waits for it to close the file and exit.
    fn release(mut self) {
        drop(self.child.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "holder exited with {status}");
    }
}

/// A small h5 file with one dataset.
fn sample(path: &Path) {
    let f = File::create(path).unwrap();
    f.root()
        .unwrap()
        .new_dataset::<i32>()
        .create_with_data("d", &[1, 2, 3])
        .unwrap();
    f.close().unwrap();
}

fn intact(path: &Path) {
    let d: Vec<i32> = File::open(path)
        .unwrap()
        .dataset("d")
        .unwrap()
        .read_1d::<i32>()
        .unwrap()
        .to_vec();
    assert_eq!(d, [1, 2, 3], "the refused opener left the file alone");
}

fn no_locks() -> FileAccess {
    FileAccess::new().file_locking(false, false)
}

fn h5_open(path: &Path, mode: &str, access: &FileAccess) -> h5::Result<File> {
    match mode {
        "r" => File::open_with(path, access),
        "rw" => File::open_rw_with(path, access),
        _ => File::create_with(path, access, &h5::CreateOptions::default()),
    }
}

fn is_locked(e: &h5::Error) -> bool {
    matches!(e, h5::Error::Io(h5_io::Error::Locked))
}

#[test]
fn h5_against_h5_in_another_process() {
    let dir = tempfile::tempdir().unwrap();
    for (first, _) in MODES {
        for (second, _) in MODES {
            for no_locking in [false, true] {
                let path = dir.path().join(format!("{first}-{second}-{no_locking}.h5"));
                sample(&path);
                let a = Holder::h5(&path, first, no_locking);
                assert!(a.ready(), "{first}: {}", a.line);
                let b = Holder::h5(&path, second, no_locking);
                let both_read = first == "r" && second == "r";
                if both_read || no_locking {
                    assert!(
                        b.ready(),
                        "{first} then {second} ({no_locking}): {}",
                        b.line
                    );
                    b.release();
                } else {
                    assert!(
                        b.line.starts_with("refused") && b.line.contains("locked"),
                        "{first} then {second}: {}",
                        b.line
                    );
                    b.release();
                }
                a.release();
                if first != "create" && !no_locking {
                    // The refused opener (a create too) left the file alone.
                    intact(&path);
                }
                // Released: the second opener gets in now.
                let c = Holder::h5(&path, second, no_locking);
                assert!(c.ready(), "{second} after release: {}", c.line);
                c.release();
            }
        }
    }
}

#[test]
fn h5py_first_then_h5() {
    let dir = tempfile::tempdir().unwrap();
    for (py_first, py_mode) in MODES {
        for (h5_mode, _) in MODES {
            for no_locking in [false, true] {
                let path = dir
                    .path()
                    .join(format!("py-{py_first}-{h5_mode}-{no_locking}.h5"));
                sample(&path);
                let py = Holder::h5py(&path, py_mode, no_locking);
                assert!(py.ready(), "h5py {py_mode}: {}", py.line);
                let access = if no_locking {
                    no_locks()
                } else {
                    FileAccess::new()
                };
                let r = h5_open(&path, h5_mode, &access);
                if (py_first == "r" && h5_mode == "r") || no_locking {
                    let f = r.unwrap_or_else(|e| panic!("h5py {py_mode}, h5 {h5_mode}: {e}"));
                    drop(f);
                } else {
                    let e = r
                        .err()
                        .unwrap_or_else(|| panic!("h5py {py_mode}, h5 {h5_mode}"));
                    assert!(is_locked(&e), "h5py {py_mode}, h5 {h5_mode}: {e}");
                }
                py.release();
                if !no_locking && py_first != "create" && h5_mode == "create" {
                    intact(&path);
                }
            }
        }
    }
}

#[test]
fn h5_first_then_h5py() {
    let dir = tempfile::tempdir().unwrap();
    for (h5_first, _) in MODES {
        for (_, py_mode) in MODES {
            for no_locking in [false, true] {
                let path = dir
                    .path()
                    .join(format!("h5-{h5_first}-{py_mode}-{no_locking}.h5"));
                sample(&path);
                let access = if no_locking {
                    no_locks()
                } else {
                    FileAccess::new()
                };
                let f = h5_open(&path, h5_first, &access).unwrap();
                if h5_first == "create" {
                    // Give h5py a whole file to open when it gets in.
                    f.flush().unwrap();
                }
                let py = Holder::h5py(&path, py_mode, no_locking);
                if (h5_first == "r" && py_mode == "r") || no_locking {
                    assert!(py.ready(), "h5 {h5_first}, h5py {py_mode}: {}", py.line);
                } else {
                    assert!(
                        py.line.starts_with("refused") && py.line.contains("lock"),
                        "h5 {h5_first}, h5py {py_mode}: {}",
                        py.line
                    );
                }
                py.release();
                drop(f);
            }
        }
    }
}

#[test]
fn one_process_refuses_conflicting_opens_whatever_the_locking() {
    let dir = tempfile::tempdir().unwrap();
    for access in [FileAccess::new(), no_locks()] {
        for (first, _) in MODES {
            for (second, _) in MODES {
                let path = dir.path().join(format!("{first}-{second}.h5"));
                sample(&path);
                let a = h5_open(&path, first, &access).unwrap();
                let b = h5_open(&path, second, &access);
                if first == "r" && second == "r" {
                    b.unwrap();
                } else {
                    let e = b.err().unwrap_or_else(|| panic!("{first} then {second}"));
                    assert!(
                        matches!(e, h5::Error::Io(h5_io::Error::AlreadyOpen { .. })),
                        "{first} then {second}: {e}"
                    );
                }
                drop(a);
                if first != "create" {
                    intact(&path);
                }
                // The lock went with the handle.
                h5_open(&path, second, &access).unwrap();
            }
        }
    }
}

#[test]
fn the_environment_overrides_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("env.h5");
    sample(&path);
    let a = Holder::h5(&path, "rw", false);
    assert!(a.ready());
    for (value, gets_in) in [
        ("FALSE", true),
        ("0", true),
        ("TRUE", false),
        ("BEST_EFFORT", false),
    ] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_h5-crashtest"));
        cmd.args(["hold", path.to_str().unwrap(), "r", "--no-locking"])
            .env("HDF5_USE_FILE_LOCKING", value);
        // `--no-locking` asks for no locks; the variable decides, as in libhdf5.
        let b = Holder::start(cmd);
        assert_eq!(b.ready(), gets_in, "{value}: {}", b.line);
        b.release();
    }
    let mut stdin = a.child.stdin.as_ref().unwrap();
    stdin.write_all(b"\n").unwrap();
    a.release();
}
