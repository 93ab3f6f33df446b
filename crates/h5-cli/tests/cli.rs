//! End-to-end tests of the `h5` binary.

use std::path::Path;
use std::process::{Command, Output};

fn h5(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_h5"))
        .args(args)
        .output()
        .expect("run h5")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("utf-8 stderr")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout(o)).expect("JSON output")
}

/// `h5 tour` replays the built-in tour with the adaptive default and a fixed 2 MiB cache: a flash
/// increase and a threshold increase are shown, the adaptive cache ends above 0.95 and the fixed one
/// below 0.8, and the line closing the cache part gives both hit rates (the bundled sample file
/// follows; `read_commands.rs` tests that part).
#[test]
fn tour_shows_flash_increase_and_both_hit_rates() {
    let o = h5(&["tour"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() <= 100, "{} lines", lines.len());
    assert!(out.contains("flash increase"), "{out}");
    assert!(out.contains(" increase "), "{out}");
    // The last epoch row: "   10   0.9950  10.0 MiB   0.4982  2.0 MiB".
    let last_epoch = lines
        .iter()
        .rfind(|l| l.trim_start().starts_with("10 "))
        .expect("an epoch 10 row");
    let cols: Vec<&str> = last_epoch.split_whitespace().collect();
    let adaptive_last: f64 = cols[1].parse().unwrap();
    let fixed_last: f64 = cols[4].parse().unwrap();
    assert!(adaptive_last > 0.95, "{last_epoch}");
    assert!(fixed_last < 0.8, "{last_epoch}");
    // The line closing the cache part compares the two hit rates.
    let last = lines
        .iter()
        .find(|l| l.starts_with("hit rate: adaptive "))
        .unwrap();
    let rest = last
        .strip_prefix("hit rate: adaptive ")
        .expect("last line starts with the adaptive hit rate");
    let (a, f) = rest
        .split_once(", fixed 2 MiB ")
        .expect("then the fixed one");
    let (a, f): (f64, f64) = (a.parse().unwrap(), f.parse().unwrap());
    assert!(a > 0.9 && f < 0.8 && a > f, "{last}");
}

const SMALL_TRACE: &str = "\
# h5-metacache trace v1
insert 0x0 4096 0 pin      # ok
protect 0x0 4096 0 ro      # hit
unprotect 0x0              # ok
protect 0x10000 1024 1     # miss
unprotect 0x10000 dirtied  # ok
protect 0x10000 1024 1 ro  # hit
protect 0x10000 1024 1 ro  # hit
unprotect 0x10000
unprotect 0x10000
protect 0x20000 512 1      # miss
unprotect 0x20000
flush                      # ok
";

/// `h5 metacache replay TRACE --json` gives exact counts for a hand-written trace.
#[test]
fn replay_json_counts_a_small_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "small.trace", SMALL_TRACE);
    let o = h5(&["metacache", "replay", &trace, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j = json(&o);
    let s = &j["summary"];
    assert_eq!(s["records"], 12);
    assert_eq!(s["protects"], 5);
    assert_eq!(s["hits"], 3);
    assert_eq!(s["misses"], 2);
    assert_eq!(s["loads"], 2);
    assert_eq!(s["bytes_read"], 1024 + 512);
    assert_eq!(s["flushes"], 2);
    assert_eq!(s["bytes_written"], 4096 + 1024);
    assert_eq!(s["mismatches"], 0);
    assert_eq!(s["final_max_size"], 2 * 1024 * 1024);
    // Text output by default.
    let o = h5(&["metacache", "replay", &trace]);
    assert!(o.status.success());
    assert!(
        stdout(&o).contains("protects 5  hits 3  misses 2  hit rate 0.6000"),
        "{}",
        stdout(&o)
    );
}

/// A malformed trace exits non-zero with a message naming the line and the problem.
#[test]
fn replay_of_a_bad_trace_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(
        dir.path(),
        "bad.trace",
        "# h5-metacache trace v1\nprotect 0x0 64 0\nprotect 0x40 sixty-four 0\n",
    );
    let o = h5(&["metacache", "replay", &trace]);
    assert!(!o.status.success());
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("trace line 3"), "{err}");
    assert!(err.contains("sixty-four"), "{err}");
    assert!(stdout(&o).is_empty());

    let o = h5(&["metacache", "replay", "/no/such/file.trace"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot read trace"), "{}", stderr(&o));
}

/// `--config` replaces the configuration: the same trace of 40 entries of 32 KiB read twice hits on
/// the second pass in the default 2 MiB cache, and never in a fixed 1 MiB cache (a cyclic scan
/// larger than an LRU cache always misses).
#[test]
fn replay_config_option_changes_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for _pass in 0..2 {
        for i in 0..40u64 {
            let a = i * 0x8000;
            text.push_str(&format!("protect {a:#x} 32768 0 ro\nunprotect {a:#x}\n"));
        }
    }
    let trace = write(dir.path(), "scan.trace", &text);
    let o = h5(&["metacache", "replay", &trace, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = json(&o)["summary"].clone();
    assert_eq!(
        (s["protects"].as_u64(), s["hits"].as_u64()),
        (Some(80), Some(40))
    );
    assert_eq!(s["evictions"], 0);

    let config = write(
        dir.path(),
        "fixed.json",
        r#"{"initial_size": 1048576, "max_size": 1048576, "min_size": 1048576,
            "incr_mode": "Off", "flash_incr_mode": "Off", "decr_mode": "Off"}"#,
    );
    let o = h5(&["metacache", "replay", &trace, "--config", &config, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = json(&o)["summary"].clone();
    assert_eq!(
        (
            s["protects"].as_u64(),
            s["hits"].as_u64(),
            s["misses"].as_u64()
        ),
        (Some(80), Some(0), Some(80))
    );
    assert_eq!(s["final_max_size"], 1024 * 1024);
    assert!(s["evictions"].as_u64().unwrap() >= 48);

    // A configuration file that is not valid is an error.
    let bad = write(dir.path(), "bad.json", r#"{"initial_size": "big"}"#);
    let o = h5(&["metacache", "replay", &trace, "--config", &bad]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("bad.json"), "{}", stderr(&o));
    let bad = write(dir.path(), "bad2.json", r#"{"min_size": 67108864}"#);
    let o = h5(&["metacache", "replay", &trace, "--config", &bad]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("min_size"), "{}", stderr(&o));
}

/// `h5 metacache trace-tour OUT` writes the tour trace: the versioned header, then records.
#[test]
fn trace_tour_writes_the_example_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tour.trace");
    let o = h5(&["metacache", "trace-tour", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().next(), Some("# h5-metacache trace v1"));
    let protects = text.lines().filter(|l| l.starts_with("protect ")).count();
    assert!((300_000..=600_000).contains(&protects), "{protects}");
    assert_eq!(text, h5_metacache::replay::tour_trace());
    assert!(stdout(&o).contains(&format!("{protects} protects")));
    assert_eq!(text.lines().last(), Some("flush"));
}

/// `h5 metacache config` prints the default configuration with every field explained; edited,
/// it is what `replay --config` reads (comments and all), and `--json` is plain JSON.
#[test]
fn config_prints_an_editable_documented_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let o = h5(&["metacache", "config"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    // Every one of the 30 fields, each after its explanation.
    let fields = text
        .lines()
        .filter(|l| l.trim_start().starts_with('"'))
        .count();
    assert_eq!(fields, 30, "{text}");
    assert!(text.contains("// Protects per epoch"), "{text}");
    let plain = h5(&["metacache", "config", "--default", "--json"]);
    let v = json(&plain);
    assert_eq!(v["epoch_length"], 50_000);
    assert_eq!(v["max_size"], 32 * 1024 * 1024);
    // Edit the printed text: a fixed 1 MiB cache.
    let edited = text
        .replace("\"incr_mode\": \"Threshold\"", "\"incr_mode\": \"Off\"")
        .replace(
            "\"flash_incr_mode\": \"AddSpace\"",
            "\"flash_incr_mode\": \"Off\"",
        )
        .replace(
            "\"decr_mode\": \"AgeOutWithThreshold\"",
            "\"decr_mode\": \"Off\"",
        )
        .replace("\"initial_size\": 2097152", "\"initial_size\": 1048576");
    let cfg = write(dir.path(), "fixed.json", &edited);
    let shown = json(&h5(&["metacache", "config", "--json", &cfg]));
    assert_eq!(shown["initial_size"], 1_048_576);
    assert_eq!(shown["incr_mode"], "Off");
    let trace = dir.path().join("tour.trace");
    assert!(
        h5(&["metacache", "trace-tour", trace.to_str().unwrap()])
            .status
            .success()
    );
    let r = json(&h5(&[
        "metacache",
        "replay",
        trace.to_str().unwrap(),
        "--config",
        &cfg,
        "--json",
    ]));
    assert_eq!(r["summary"]["final_max_size"], 1_048_576);
    assert_eq!(r["summary"]["mismatches"], 0);
}

/// `h5 metacache replay --plot` draws both tour configurations (no trace given) into an SVG:
/// two lines in each panel, as many points as epochs.
#[test]
fn replay_plots_both_tour_configurations() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("tour.svg");
    let o = h5(&[
        "metacache",
        "replay",
        "--json",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let reports: Vec<serde_json::Value> = serde_json::Deserializer::from_slice(&o.stdout)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(reports.len(), 2);
    let epochs = reports[0]["epochs"].as_array().unwrap().len();
    assert!(epochs >= 5, "{epochs}");
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.starts_with("<svg"), "{}", &picture[..100]);
    assert!(picture.contains("adaptive (default)") && picture.contains("fixed 2 MiB"));
    // Per run (one colour each): the hit rate (width 2), the maximum size (width 3) and the
    // bytes cached (translucent), each a line through one point per epoch.
    for (colour, report) in ["#1F77B4", "#D62728"].iter().zip(&reports) {
        let n = report["epochs"].as_array().unwrap().len();
        for style in [
            "stroke-width=\"2\"",
            "stroke-width=\"3\"",
            "opacity=\"0.6\"",
        ] {
            let lines: Vec<&str> = picture
                .lines()
                .filter(|l| {
                    l.starts_with("<polyline")
                        && l.contains(&format!("stroke=\"{colour}\""))
                        && l.contains(style)
                })
                .collect();
            assert_eq!(lines.len(), 1, "{colour} {style}");
            let points = lines[0].split("points=\"").nth(1).unwrap();
            let points = points.split('"').next().unwrap();
            assert_eq!(points.split_whitespace().count(), n, "{colour} {style}");
        }
    }
    let bad = h5(&["metacache", "replay", "--plot", "x.png"]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("SVG"), "{}", stderr(&bad));
}
