//! VFD SWMR across processes: a writer and readers in separate processes.
//! Child processes are this test binary run again with only `child_process_role` selected and
//! the role in `H5_SWMR_ROLE` (that test does nothing in an ordinary run).

mod swmr_common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use swmr_common::*;

const ROLE: &str = "H5_SWMR_ROLE";
const ARG: &str = "H5_SWMR_ARG";

fn spawn(role: &str, arg: &Value) -> Child {
    spawn_role(ROLE, ARG, role, arg)
}

fn result_of(child: Child) -> Value {
    child_result(child)
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
        "writer_script" => writer_script(&arg),
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
fn write_rounds(
    path: &Path,
    cfg: h5::SwmrConfig,
    n: u64,
    rounds: u64,
    announce: bool,
    pause: Duration,
) {
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
        }
        std::thread::sleep(pause);
        if announce {
            println!("PUBLISHED {r}");
            std::io::stdout().flush().unwrap();
        }
    }
    f.create_group("done").unwrap();
    f.close().unwrap();
}

fn writer_rounds(arg: &Value) {
    let updater = arg["updater_base"].as_str().map(PathBuf::from);
    let cfg = h5::SwmrConfig {
        tick_len: u(arg, "tick_len") as i32,
        max_lag: arg["max_lag"].as_u64().unwrap_or(3) as i32,
        generate_updater_files: updater.is_some(),
        maintain_metadata_file: updater.is_none(),
        updater_file_path: updater.unwrap_or_default(),
        ..writer_cfg(0)
    };
    let pause = Duration::from_millis(arg["pause_ms"].as_u64().unwrap_or(3));
    write_rounds(
        &p(arg, "path"),
        cfg,
        u(arg, "n"),
        u(arg, "rounds"),
        true,
        pause,
    );
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
    let cfg = h5::SwmrConfig {
        max_lag: arg["max_lag"].as_u64().unwrap_or(3) as i32,
        ..reader_cfg(tick_len)
    };
    let f = match h5::File::open_with(&path, &access(cfg, 64)) {
        Ok(f) => f,
        Err(e) => {
            // The writer may have died before publishing a first tick.
            emit(json!({"views": 0, "errors": [], "open_error": e.to_string()}));
            return;
        }
    };
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
        if arg["stop_file"]
            .as_str()
            .is_some_and(|s| Path::new(s).exists())
        {
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

fn say(line: &str) {
    let mut o = std::io::stdout().lock();
    writeln!(o, "{line}").unwrap();
    o.flush().unwrap();
}

/// A scripted writer: publishes a dataset, idles, extends it twice, closes; each step
/// announced on stdout.
fn writer_script(arg: &Value) {
    let path = p(arg, "path");
    let f = h5::File::create_with(&path, &access(writer_cfg(0), 64), &paged()).unwrap();
    let d = f
        .root()
        .unwrap()
        .new_dataset::<i64>()
        .shape([0])
        .max_shape([None])
        .chunk([64])
        .create("d")
        .unwrap();
    f.end_tick().unwrap();
    say("READY");
    std::thread::sleep(Duration::from_millis(u(arg, "idle_ms")));
    for n in [10usize, 20] {
        d.resize([n]).unwrap();
        d.write(&(0..n as i64).collect::<Vec<_>>()).unwrap();
        f.end_tick().unwrap();
        say(&format!("EXT{n}"));
        std::thread::sleep(Duration::from_millis(300));
    }
    f.close().unwrap();
    say("CLOSED");
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

// SWMR-133, SWMR-134, SWMR-018 (Done means; raw values checked: flush_raw_data): a writer appends to 100 datasets and creates
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
        std::thread::spawn(move || {
            // Rounds spread over several ticks whatever the writer's speed: a reader's view of
            // 100 datasets takes about a tick in a debug build.
            write_rounds(&path, writer_cfg, 100, 30, false, Duration::from_millis(30))
        })
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

/// A small xorshift generator: the same kill points on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

// Done means: the writer killed with SIGKILL at 200 random points (seeded): a reader following
// it never sees torn or inconsistent metadata, and recovery from the metadata file then gives a
// file that h5 and libhdf5 (h5py) open with every value up to the last complete tick.
#[test]
fn kill_writer_at_200_points_then_recover() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let runs = 200;
    let n = 8u64;
    let mut expected = Vec::new();
    let mut reader_views = 0u64;
    for run in 0..runs {
        let path = dir.path().join(format!("k{run}.h5"));
        let stop = dir.path().join(format!("k{run}.stop"));
        let mut writer = spawn(
            "writer_rounds",
            &json!({"path": path.to_str().unwrap(), "n": n, "rounds": 100000, "tick_len": 0,
                "max_lag": 10, "pause_ms": 10}),
        );
        let stdout = writer.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if let Some(r) = line.strip_prefix("PUBLISHED ") {
                    let _ = tx.send(r.parse::<u64>().unwrap());
                }
            }
        });
        let reader = (run % 2 == 0).then(|| {
            spawn(
                "reader_check",
                &json!({"path": path.to_str().unwrap(), "n": n, "tick_len": 0, "seconds": 60,
                    "max_lag": 10, "stop_file": stop.to_str().unwrap()}),
            )
        });
        // Kill somewhere in the first ~40 published rounds.
        let first = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(r) => r,
            Err(e) => {
                let _ = writer.kill();
                let out = writer.wait_with_output().unwrap();
                panic!(
                    "run {run}: the writer published nothing ({e}); {}; stderr: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        };
        let wait = Duration::from_millis(rng.next() % 400);
        std::thread::sleep(wait);
        writer.kill().unwrap();
        writer.wait().unwrap();
        let mut last = first;
        while let Ok(r) = rx.try_recv() {
            last = r;
        }
        std::fs::write(&stop, b"").unwrap();
        if let Some(r) = reader {
            let res = result_of(r);
            assert_eq!(res["errors"], json!([]), "run {run}: {res}");
            reader_views += res["views"].as_u64().unwrap_or(0);
        }
        let rec = h5_swmr::recover::recover(&path, &md_of(&path)).unwrap();
        assert!(
            rec.tick > last,
            "run {run}: recovered tick {} before round {last}",
            rec.tick
        );
        std::fs::remove_file(md_of(&path)).unwrap();
        let f = h5::File::open(&path).unwrap();
        let rounds = check_view(&f, n).unwrap_or_else(|e| panic!("run {run}: {e}"));
        assert!(
            rounds > last,
            "run {run}: {rounds} rounds recovered, {} announced",
            last + 1
        );
        expected.push((path, rounds));
    }
    assert!(reader_views > 0);
    // libhdf5 opens every recovered file with every value of the rounds recovered.
    let script = "import sys, json, h5py\nok = []\nfor p, rounds, n in json.loads(sys.argv[1]):\n    f = h5py.File(p, 'r')\n    good = all(list(f[f'a{j}'][:]) == [i * 1000 + j for i in range(rounds)] for j in range(n))\n    ok.append(good)\nprint(json.dumps(ok))";
    let arg: Vec<Value> = expected
        .iter()
        .map(|(p, r)| json!([p.to_str().unwrap(), r, n]))
        .collect();
    let out = h5_testkit::verify::run_python(script, &[Value::Array(arg).to_string()]);
    let ok: Vec<bool> = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(ok.len(), runs);
    assert!(ok.iter().all(|&g| g), "{ok:?}");
}

/// Lines a child prints, as they come.
fn lines_of(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    rx
}

fn wait_line(rx: &std::sync::mpsc::Receiver<String>, want: &str) {
    loop {
        let l = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no {want}"));
        if l == want {
            return;
        }
    }
}

// The reader's side with a writer in another process: SWMR-079 (tick and page size known
// before the superblock), SWMR-090 and SWMR-091 (an idle writer: "no change" once per tick, not
// per call, nothing evicted), SWMR-034 (reader ends of tick at API entry, never at exit),
// SWMR-096 (an open dataset handle sees the new extent), SWMR-093 (page buffer evictions
// before metadata cache evictions), SWMR-109 (the final empty index; data still read right),
// SWMR-112 (a reader's flush does nothing; the metadata file stays while the writer runs).
#[test]
fn swmr_079_090_091_034_096_093_109_112_reader_side() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rs.h5");
    let log = dir.path().join("reader.log");
    let mut w = spawn(
        "writer_script",
        &json!({"path": path.to_str().unwrap(), "idle_ms": 1500}),
    );
    let rx = lines_of(&mut w);
    wait_line(&rx, "READY");
    let cfg = h5::SwmrConfig {
        log_file_path: log.clone(),
        ..reader_cfg(1)
    };
    let f = h5::File::open_with(&path, &access(cfg, 64)).unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let md_line = text
        .find("reader metadata file tick 1 page_size 4096")
        .expect("SWMR-079");
    let open_line = text.find("reader opened").unwrap();
    assert!(md_line < open_line);
    let d = f.dataset("d").unwrap();
    assert_eq!(d.shape(), vec![0]);
    // A second reader in this process: flush is a no-op, and closing it leaves the metadata file.
    let r2 = h5::File::open_with(&path, &access(reader_cfg(1), 16)).unwrap();
    r2.flush().unwrap();
    r2.close().unwrap();
    assert!(
        md_of(&path).exists(),
        "readers never remove the metadata file"
    );
    // The idle writer: calls for 1 s.
    let start = Instant::now();
    let mut calls = 0;
    while start.elapsed() < Duration::from_millis(1000) {
        let _ = f.member_names().unwrap();
        calls += 1;
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let no_change = text.matches(" NO_CHANGE ").count();
    assert!(no_change >= 3, "{text}");
    assert!(
        no_change * 20 < calls,
        "{no_change} header reads for {calls} calls"
    );
    assert!(
        !text.contains("EVICTIONS"),
        "nothing evicted while the writer is idle"
    );
    wait_line(&rx, "EXT10");
    let stop = Instant::now() + Duration::from_secs(20);
    while d.shape() != vec![10] && Instant::now() < stop {
        let _ = f.member_names().unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(d.shape(), vec![10], "the open handle follows");
    assert_eq!(
        d.read_1d::<i64>().unwrap().to_vec(),
        (0..10).collect::<Vec<_>>()
    );
    wait_line(&rx, "CLOSED");
    std::thread::sleep(Duration::from_millis(150));
    f.end_tick().unwrap();
    assert_eq!(
        f.vfd_swmr_status().unwrap().index_len,
        0,
        "the final index is empty"
    );
    assert_eq!(
        d.read_1d::<i64>().unwrap().to_vec(),
        (0..20).collect::<Vec<_>>()
    );
    f.close().unwrap();
    w.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut saw_pair = false;
    for (i, l) in lines.iter().enumerate() {
        if l.contains("EVICTIONS page buffer") {
            let next = lines[i + 1];
            assert!(next.contains("EVICTIONS metadata cache"), "{next}");
            saw_pair = true;
        }
        if l.contains("EVICTIONS metadata cache") {
            assert!(lines[i - 1].contains("EVICTIONS page buffer"));
        }
    }
    assert!(saw_pair);
    assert!(
        text.contains("reader tick") && text.contains("(ApiEntry)"),
        "{text}"
    );
    assert!(
        !text
            .lines()
            .any(|l| l.contains("END_OF_TICK reader") && l.contains("ApiExit"))
    );
}

// SWMR-017, SWMR-128: a writer that only writes updater files creates no metadata file; an
// auxiliary process applies them to a local metadata file, and a reader of that file sees the
// same consistent data as with a writer-maintained one.
#[test]
fn swmr_017_128_updater_files_and_the_auxiliary_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nfs.h5");
    let base = dir.path().join("ud");
    let local = dir.path().join("local.md");
    let aux = {
        let (local, base) = (local.clone(), base.clone());
        std::thread::spawn(move || {
            let opts = h5_swmr::auxiliary::AuxOptions {
                tick_len: 1,
                idle_timeout: Some(Duration::from_secs(60)),
                ..Default::default()
            };
            h5_swmr::auxiliary::run(&local, &base, &opts)
        })
    };
    let mut w = spawn(
        "writer_rounds",
        &json!({"path": path.to_str().unwrap(), "n": 4, "rounds": 30, "tick_len": 0,
            "pause_ms": 30, "max_lag": 10, "updater_base": base.to_str().unwrap()}),
    );
    let rx = lines_of(&mut w);
    wait_line(&rx, "PUBLISHED 3");
    let cfg = h5::SwmrConfig {
        md_file_path: dir.path().to_path_buf(),
        md_file_name: Some("local.md".into()),
        max_lag: 10,
        ..reader_cfg(0)
    };
    let f = h5::File::open_with(&path, &access(cfg, 64)).unwrap();
    let mut best = 0;
    let stop = Instant::now() + Duration::from_secs(60);
    while best < 10 && Instant::now() < stop {
        f.end_tick().unwrap();
        f.disable_end_of_tick().unwrap();
        best = check_view(&f, 4).unwrap();
        f.enable_end_of_tick().unwrap();
        assert!(!md_of(&path).exists(), "the writer keeps no metadata file");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        best >= 10,
        "the reader followed through the auxiliary process ({best} rounds)"
    );
    f.close().unwrap();
    assert!(w.wait().unwrap().success());
    wait_line(&rx, r#"RESULT {"ok":true}"#);
    let stats = aux.join().unwrap().unwrap();
    assert_eq!(stats.applied.first(), Some(&0));
    assert!(
        stats.applied.windows(2).all(|w| w[1] == w[0] + 1),
        "in sequence order"
    );
    assert!(!local.exists(), "removed after the final update");
}

// SWMR-091 with OQ-17's shorter retry delay (`reader_retry`): a reader with a 10 s tick and a
// 20 ms retry sees the writer's new tick on its first call more than 20 ms after it was
// published, while a reader without it, opened at the same time, still sees the old one; after
// finding a new tick the retrying reader waits about a tick again (not every call re-reads).
#[test]
fn swmr_091_a_reader_retry_delay_sees_a_new_tick_before_its_tick_ends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("retry.h5");
    let mut w = spawn(
        "writer_script",
        &json!({"path": path.to_str().unwrap(), "idle_ms": 800}),
    );
    let rx = lines_of(&mut w);
    wait_line(&rx, "READY");
    let retrying = h5::File::open_with(
        &path,
        &access(
            h5::SwmrConfig {
                reader_retry: Some(Duration::from_millis(20)),
                ..reader_cfg(100)
            },
            64,
        ),
    )
    .unwrap();
    let plain = h5::File::open_with(&path, &access(reader_cfg(100), 64)).unwrap();
    let (dr, dp) = (retrying.dataset("d").unwrap(), plain.dataset("d").unwrap());
    assert_eq!((dr.shape(), dp.shape()), (vec![0], vec![0]));
    wait_line(&rx, "EXT10");
    std::thread::sleep(Duration::from_millis(60));
    let _ = retrying.member_names().unwrap();
    let _ = plain.member_names().unwrap();
    assert_eq!(dr.shape(), vec![10], "the retrying reader looked again");
    assert_eq!(
        dp.shape(),
        vec![0],
        "a reader without retry waits its 10 s tick"
    );
    assert_eq!(
        dr.read_1d::<i64>().unwrap().to_vec(),
        (0..10).collect::<Vec<_>>()
    );
    wait_line(&rx, "EXT20");
    std::thread::sleep(Duration::from_millis(60));
    let _ = retrying.member_names().unwrap();
    assert_eq!(
        dr.shape(),
        vec![10],
        "after a new tick the next look is a tick minus the retry delay away"
    );
    retrying.end_tick().unwrap();
    plain.end_tick().unwrap();
    assert_eq!((dr.shape(), dp.shape()), (vec![20], vec![20]));
    retrying.close().unwrap();
    plain.close().unwrap();
    wait_line(&rx, "CLOSED");
    w.wait().unwrap();
}
