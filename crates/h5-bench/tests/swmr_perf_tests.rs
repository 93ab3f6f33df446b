//! `h5-bench swmr`'s report of the seed's two performance tests (SWMR-148, SWMR-149): with and
//! without VFD SWMR, and a traced SWMR run with a reader process watching the first dataset,
//! which gives the create and append phases, per-object times and the write-to-visible latency
//! of every write of that dataset.

use std::process::Command;

/// The report line starting with `what`.
fn line<'a>(report: &'a str, what: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.starts_with(what))
        .unwrap_or_else(|| panic!("no line {what:?} in\n{report}"))
}

/// The value of the line starting with `what`: what follows `after`'s last occurrence.
fn value<'a>(report: &'a str, what: &str, after: &str) -> &'a str {
    let l = line(report, what);
    l.rsplit_once(after)
        .unwrap_or_else(|| panic!("no {after:?} in {l:?}"))
        .1
        .trim()
}

/// Milliseconds from "12.34 ms".
fn ms(s: &str) -> f64 {
    s.trim().trim_end_matches(" ms").parse().unwrap()
}

/// Checks a perf test's traced lines: phases, per-object times, and `writes` latencies with
/// min <= mean <= max.
fn check_traced(report: &str, what: &str, writes: usize) {
    let phases = value(report, &format!("{what}: SWMR create / append phases"), ")");
    let secs: Vec<f64> = phases
        .split(" / ")
        .map(|x| x.trim_end_matches(" s").parse().unwrap())
        .collect();
    assert!(secs.len() == 2 && secs[1] > 0.0, "{phases}");
    let per = value(
        report,
        &format!("{what}: per-dataset create / per-write time"),
        " time ",
    );
    assert!(per.contains("µs / ") && per.ends_with("µs"), "{per}");
    let key = format!("{what}: write-to-visible latency min / mean / max ({writes} writes");
    let lat: Vec<f64> = value(report, &key, ")").split(" / ").map(ms).collect();
    assert_eq!(lat.len(), 3);
    assert!(
        lat[0] >= 0.0 && lat[0] <= lat[1] && lat[1] <= lat[2],
        "{lat:?}"
    );
}

// SWMR-148 (perf test 1: 100 datasets x 5 rounds with --quick) and SWMR-149 (perf test 2:
// 10 datasets x 2 planes of 200^2).
#[test]
fn swmr_148_149_perf_tests_report_phases_and_latencies() {
    let out = Command::new(env!("CARGO_BIN_EXE_h5-bench"))
        .args([
            "swmr",
            "--no-python",
            "--quick",
            "--only",
            "perf1,perf2",
            "--runs",
            "1",
        ])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}\n{report}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let p1 = "perf test 1 (100 datasets x 5 rounds)";
    assert!(value(&report, &format!("{p1}: SWMR throughput"), ")").ends_with('%'));
    check_traced(&report, p1, 5);
    let p2 = "perf test 2 (10 x 2 planes of 200^2 int32)";
    assert!(value(&report, &format!("{p2}: SWMR throughput"), ")").ends_with('%'));
    check_traced(&report, p2, 2);
}
