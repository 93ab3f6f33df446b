//! VFD SWMR across processes (SWMR-147's harness): a writer and readers in separate processes.
//! Child processes are this test binary run again with only `child_process_role` selected and
//! the role in `H5_SWMR_ROLE` (that test does nothing in an ordinary run).

mod swmr_common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use swmr_common::*;

const ROLE: &str = "H5_SWMR_ROLE";
const ARG: &str = "H5_SWMR_ARG";

/// Starts `role` with `arg` in a child process.
fn spawn(role: &str, arg: &Value) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "child_process_role",
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env(ROLE, role)
        .env(ARG, arg.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a child and returns the JSON object it printed on its `RESULT` line.
fn result_of(child: Child) -> Value {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| {
            panic!(
                "child printed no result (status {}):\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(line).unwrap()
}

fn emit(v: Value) {
    let mut o = std::io::stdout().lock();
    writeln!(o, "RESULT {v}").unwrap();
    o.flush().unwrap();
}

#[test]
fn child_process_role() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let arg: Value = serde_json::from_str(&std::env::var(ARG).unwrap()).unwrap();
    match role.as_str() {
        "reader_check" => reader_check(&arg),
        "writer_rounds" => writer_rounds(&arg),
        "reader_open" => reader_open(&arg),
        "expired_end_tick" => expired_end_tick(&arg),
        other => panic!("unknown role {other}"),
    }
}

fn p(arg: &Value, k: &str) -> PathBuf {
    PathBuf::from(arg[k].as_str().unwrap())
}

fn u(arg: &Value, k: &str) -> u64 {
    arg[k].as_u64().unwrap()
}

/// The expected value of dataset `j` at `i`.
fn value(i: u64, j: u64) -> i64 {
    (i * 1000 + j) as i64
}

/// The writer's workload: `rounds` rounds; each appends one value to each of `n` datasets as
/// one atomic step (end of tick disabled around it), every 10th round creates a group with a
/// dataset; with manual ticks an end of tick follows each round and is announced on stdout.
fn write_rounds(path: &Path, cfg: h5::SwmrConfig, n: u64, rounds: u64, announce: bool) {
    let manual = cfg.tick_len == 0;
    let f = h5::File::create_with(path, &access(cfg, 64), &paged()).unwrap();
    let mut ds: Vec<h5::Dataset> = (0..n)
        .map(|j| {
            f.root()
                .unwrap()
                .new_dataset::<i64>()
                .shape([0])
                .max_shape([None])
                .chunk([32])
                .create(&format!("a{j}"))
                .unwrap()
        })
        .collect();
    for r in 0..rounds {
        f.disable_end_of_tick().unwrap();
        for (j, d) in ds.iter_mut().enumerate() {
            d.resize([r as usize + 1]).unwrap();
            d.write_slice(
                &[value(r, j as u64)],
                [ndarray::SliceInfoElem::Slice {
                    start: r as isize,
                    end: Some(r as isize + 1),
                    step: 1,
                }],
            )
            .unwrap();
        }
        if r % 10 == 9 {
            let g = f.create_group(&format!("grp{}", r / 10)).unwrap();
            g.new_dataset::<i64>()
                .shape([r as usize + 1])
                .create("x")
                .unwrap()
                .write(&vec![r as i64; r as usize + 1])
                .unwrap();
        }
        f.enable_end_of_tick().unwrap();
        if manual {
            f.end_tick().unwrap();
        } else {
            std::thread::sleep(Duration::from_millis(3));
        }
        if announce {
            println!("PUBLISHED {r}");
            std::io::stdout().flush().unwrap();
        }
    }
    f.create_group("done").unwrap();
    f.close().unwrap();
}

fn writer_rounds(arg: &Value) {
    let cfg = h5::SwmrConfig {
        tick_len: u(arg, "tick_len") as i32,
        ..writer_cfg(0)
    };
    write_rounds(&p(arg, "path"), cfg, u(arg, "n"), u(arg, "rounds"), true);
    emit(json!({"ok": true}));
}

/// Checks what a reader sees against the writer's workload; returns the errors found.
fn check_view(f: &h5::File, n: u64) -> Result<u64, String> {
    let names = f.member_names().map_err(|e| e.to_string())?;
    let mut len = None;
    for j in 0..n {
        let name = format!("a{j}");
        if !names.contains(&name) {
            continue;
        }
        let d = f.dataset(&name).map_err(|e| format!("{name}: {e}"))?;
        let v: Vec<i64> = d.read_1d().map_err(|e| format!("{name}: {e}"))?.to_vec();
        for (i, x) in v.iter().enumerate() {
            if *x != value(i as u64, j) {
                return Err(format!(
                    "{name}[{i}] = {x}, expected {}",
                    value(i as u64, j)
                ));
            }
        }
        match len {
            None => len = Some(v.len() as u64),
            Some(l) if l != v.len() as u64 => {
                return Err(format!(
                    "{name} has {} elements, a0 {l}: a torn round",
                    v.len()
                ));
            }
            _ => {}
        }
    }
    let l = len.unwrap_or(0);
    for g in names.iter().filter(|s| s.starts_with("grp")) {
        let k: u64 = g[3..].parse().map_err(|_| format!("group {g}"))?;
        let x: Vec<i64> = f
            .dataset(&format!("{g}/x"))
            .and_then(|d| d.read_1d::<i64>())
            .map_err(|e| format!("{g}/x: {e}"))?
            .to_vec();
        let r = 10 * k + 9;
        if x.len() as u64 != r + 1 || x.iter().any(|&v| v != r as i64) || l < r + 1 {
            return Err(format!(
                "{g}/x inconsistent ({} elements, rounds seen {l})",
                x.len()
            ));
        }
    }
    Ok(l)
}

/// A reader checking every view it gets until the writer's "done" group appears.
fn reader_check(arg: &Value) {
    let path = p(arg, "path");
    let n = u(arg, "n");
    let tick_len = u(arg, "tick_len") as i32;
    let f = h5::File::open_with(&path, &access(reader_cfg(tick_len), 64)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(u(arg, "seconds"));
    let mut errors = Vec::new();
    let (mut views, mut max_stale, mut last_len, mut ticks) = (0u64, 0u64, 0u64, Vec::new());
    loop {
        if tick_len == 0 {
            f.end_tick().unwrap();
        }
        // One view is one consistent snapshot: no end of tick between its calls.
        f.disable_end_of_tick().unwrap();
        let view = check_view(&f, n);
        f.enable_end_of_tick().unwrap();
        match view {
            Ok(l) => {
                if l < last_len {
                    errors.push(format!("went back from {last_len} to {l} rounds"));
                }
                last_len = l;
            }
            Err(e) => errors.push(e),
        }
        views += 1;
        let mine = f.vfd_swmr_status().unwrap().tick;
        if ticks.last() != Some(&mine) {
            ticks.push(mine);
        }
        if md_of(&path).exists()
            && let Ok(b) = std::fs::read(md_of(&path))
            && let Ok(h) = h5_swmr::format::MdHeader::decode(&b)
        {
            max_stale = max_stale.max(h.tick.saturating_sub(mine));
        }
        if f.member_names().unwrap().contains(&"done".to_string()) {
            // The writer is done: one last view of the final state.
            f.disable_end_of_tick().unwrap();
            match check_view(&f, n) {
                Ok(l) => last_len = l,
                Err(e) => errors.push(e),
            }
            f.enable_end_of_tick().unwrap();
            break;
        }
        if Instant::now() > deadline {
            break;
        }
        if errors.len() > 5 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let finished = f.member_names().unwrap().contains(&"done".to_string());
    emit(
        json!({"views": views, "errors": errors, "max_stale": max_stale, "rounds": last_len,
        "ticks_seen": ticks.len(), "finished": finished}),
    );
}

/// Alone in its process (the queue is process-wide): with the tick expired, one `end_tick` call
/// gives exactly one end of tick.
fn expired_end_tick(arg: &Value) {
    let path = p(arg, "path");
    let log = path.with_extension("log");
    let cfg = h5::SwmrConfig {
        log_file_path: log.clone(),
        ..writer_cfg(1)
    };
    let f = h5::File::create_with(&path, &access(cfg, 16), &paged()).unwrap();
    f.end_tick().unwrap();
    let t0 = published(&path).0.tick;
    std::thread::sleep(Duration::from_millis(300));
    let eots = || {
        std::fs::read_to_string(&log)
            .unwrap()
            .matches("END_OF_TICK")
            .count()
    };
    let before = eots();
    f.end_tick().unwrap();
    emit(json!({"ticks": published(&path).0.tick - t0, "eots": eots() - before}));
    f.close().unwrap();
}

/// A reader that opens (waiting as configured) and reports its tick and what it sees.
fn reader_open(arg: &Value) {
    let path = p(arg, "path");
    let cfg = h5::SwmrConfig {
        presume_posix_semantics: arg["posix"].as_bool().unwrap(),
        open_timeout: Some(Duration::from_millis(u(arg, "timeout_ms"))),
        md_file_path: arg["md_dir"]
            .as_str()
            .map(PathBuf::from)
            .unwrap_or_default(),
        md_file_name: arg["md_name"].as_str().map(str::to_owned),
        ..reader_cfg(u(arg, "tick_len") as i32)
    };
    let start = Instant::now();
    match h5::File::open_with(&path, &access(cfg, 64)) {
        Ok(f) => {
            let tick = f.vfd_swmr_status().unwrap().tick;
            let wait_for = arg["wait_for_member"].as_str().map(str::to_owned);
            let mut members = f.member_names().unwrap();
            if let Some(m) = &wait_for {
                let stop = Instant::now() + Duration::from_secs(20);
                while !members.contains(m) && Instant::now() < stop {
                    std::thread::sleep(Duration::from_millis(20));
                    members = f.member_names().unwrap();
                }
            }
            emit(json!({"ok": true, "tick": tick, "members": members,
                "waited_ms": start.elapsed().as_millis() as u64}));
        }
        Err(e) => emit(json!({"ok": false, "error": e.to_string(),
            "waited_ms": start.elapsed().as_millis() as u64})),
    }
}

// SWMR-133, SWMR-134, SWMR-147 (Done means): a writer appends to 100 datasets and creates
// groups with datasets while 4 reader processes check at every view that values, shapes and
// links are consistent and their index is at most 3 ticks behind the writer's.
#[test]
fn swmr_133_134_147_four_readers_follow_100_datasets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.h5");
    let arg = json!({"path": path.to_str().unwrap(), "n": 100, "tick_len": 1, "seconds": 600});
    let writer_cfg = h5::SwmrConfig {
        tick_len: 1,
        ..writer_cfg(1)
    };
    let writer = {
        let path = path.clone();
        std::thread::spawn(move || write_rounds(&path, writer_cfg, 100, 30, false))
    };
    // Readers start once the file is being written.
    std::thread::sleep(Duration::from_millis(200));
    let readers: Vec<Child> = (0..4).map(|_| spawn("reader_check", &arg)).collect();
    writer.join().unwrap();
    for r in readers {
        let res = result_of(r);
        assert_eq!(res["errors"], json!([]), "{res}");
        assert!(res["finished"].as_bool().unwrap(), "{res}");
        assert_eq!(res["rounds"], 30, "{res}");
        assert!(res["max_stale"].as_u64().unwrap() <= 3, "{res}");
        assert!(res["ticks_seen"].as_u64().unwrap() >= 3, "{res}");
    }
}

// SWMR-105, SWMR-015, SWMR-103, SWMR-104, E-18: open rules of readers.
#[test]
fn swmr_015_103_104_105_reader_open_rules() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.h5");
    // Neither file: a timeout whatever presume_posix_semantics says.
    for posix in [true, false] {
        let r = result_of(spawn(
            "reader_open",
            &json!({"path": path.to_str().unwrap(), "posix": posix, "timeout_ms": 300, "tick_len": 1}),
        ));
        assert_eq!(r["ok"], false);
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("neither the HDF5 file nor its metadata file appeared"),
            "{r}"
        );
    }
    // The HDF5 file alone: posix opens at tick 0 at once; otherwise the metadata file is
    // waited for.
    let f = h5::File::create_with(&path, &h5::FileAccess::default(), &paged()).unwrap();
    f.create_group("old").unwrap();
    f.close().unwrap();
    let r = result_of(spawn(
        "reader_open",
        &json!({"path": path.to_str().unwrap(), "posix": true, "timeout_ms": 5000, "tick_len": 1}),
    ));
    assert_eq!(
        (r["ok"].clone(), r["tick"].clone()),
        (json!(true), json!(0)),
        "{r}"
    );
    assert_eq!(r["members"], json!(["old"]));
    let r = result_of(spawn(
        "reader_open",
        &json!({"path": path.to_str().unwrap(), "posix": false, "timeout_ms": 400, "tick_len": 1}),
    ));
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("metadata file did not appear"),
        "{r}"
    );
    // A posix reader opened on the closed file, then a writer opens it and adds a group: the
    // reader sees it (the metadata file appears after the reader opened).
    let child = spawn(
        "reader_open",
        &json!({"path": path.to_str().unwrap(), "posix": true, "timeout_ms": 5000, "tick_len": 1,
            "wait_for_member": "new"}),
    );
    std::thread::sleep(Duration::from_millis(300));
    let w = h5::File::open_rw_with(&path, &access(writer_cfg(1), 64)).unwrap();
    w.create_group("new").unwrap();
    w.end_tick().unwrap();
    let r = result_of(child);
    w.close().unwrap();
    assert!(
        r["members"].as_array().unwrap().contains(&json!("new")),
        "{r}"
    );
}

// SWMR-102, SWMR-106, SWMR-020: a reader started while the metadata file is still empty
// returns once the first tick is published; one started later reports that tick.
#[test]
fn swmr_102_106_020_reader_waits_for_the_first_tick() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.h5");
    let w = h5::File::create_with(&path, &access(writer_cfg(0), 64), &paged()).unwrap();
    let early = spawn(
        "reader_open",
        &json!({"path": path.to_str().unwrap(), "posix": false, "timeout_ms": 10000, "tick_len": 0}),
    );
    std::thread::sleep(Duration::from_millis(300));
    w.create_group("first").unwrap();
    w.end_tick().unwrap();
    let r = result_of(early);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["tick"], 1);
    assert_eq!(r["members"], json!(["first"]));
    for i in 0..5 {
        w.create_group(&format!("later{i}")).unwrap();
        w.end_tick().unwrap();
    }
    let r = result_of(spawn(
        "reader_open",
        &json!({"path": path.to_str().unwrap(), "posix": false, "timeout_ms": 10000, "tick_len": 0}),
    ));
    assert_eq!(r["tick"], 6);
    assert_eq!(r["members"].as_array().unwrap().len(), 6);
    w.close().unwrap();
}

// SWMR-023: with the tick already expired, end_tick gives exactly one end of tick.
#[test]
fn swmr_023_expired_end_tick_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.h5");
    let r = result_of(spawn(
        "expired_end_tick",
        &json!({"path": path.to_str().unwrap()}),
    ));
    assert_eq!(r, json!({"ticks": 1, "eots": 1}));
}

// SWMR-139: the metadata file on another file system (tmpfs) than the HDF5 file.
#[test]
fn swmr_139_md_file_on_tmpfs() {
    let shm = Path::new("/dev/shm");
    assert!(shm.is_dir(), "the test needs /dev/shm");
    let dir = tempfile::tempdir().unwrap();
    let md_dir = tempfile::tempdir_in(shm).unwrap();
    let path = dir.path().join("t.h5");
    let cfg = h5::SwmrConfig {
        md_file_path: md_dir.path().to_path_buf(),
        md_file_name: Some("t.md".into()),
        ..writer_cfg(0)
    };
    let w = h5::File::create_with(&path, &access(cfg, 64), &paged()).unwrap();
    w.create_group("on_tmpfs").unwrap();
    w.end_tick().unwrap();
    assert!(md_dir.path().join("t.md").exists(), "SWMR-010: D/x.md");
    let r = result_of(spawn(
        "reader_open",
        &json!({"path": path.to_str().unwrap(), "posix": false, "timeout_ms": 5000, "tick_len": 0,
            "md_dir": md_dir.path().to_str().unwrap(), "md_name": "t.md"}),
    ));
    assert_eq!(r["members"], json!(["on_tmpfs"]), "{r}");
    w.close().unwrap();
    assert!(!md_dir.path().join("t.md").exists());
}
