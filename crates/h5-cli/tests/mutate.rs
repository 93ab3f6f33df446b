//! A sample of the mutation run (`scripts/mutate` runs the full one): fixture files damaged at
//! random (changed bytes, overwritten runs, stamped values, truncations) go through `h5 dump
//! --json`, `h5 ls -r -v` and `h5 stat` in child processes under a 4 GiB address-space limit;
//! every run must end with status 0 or a typed error (status 1), never a panic, an abort or a
//! hang.

use std::path::PathBuf;
use std::time::Duration;

use h5_testkit::mutate::{Config, Verdict, run, run_one};

#[test]
fn a_sample_of_mutants_never_crashes_the_h5_command() {
    let work = tempfile::tempdir().unwrap();
    let seed = std::env::var("H5_MUTATE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(13);
    let config = Config {
        h5: PathBuf::from(env!("CARGO_BIN_EXE_h5")),
        corpus: vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")],
        seed,
        first: 0,
        mutants: 300,
        commands: Config::default_commands(),
        address_space: 4 << 30,
        // The test binary of this suite is a debug build (about ten times slower than the
        // release build `scripts/mutate` runs with its 10 s limit), on a machine busy with the
        // other tests.
        timeout: Duration::from_secs(30),
        jobs: 2,
        work: work.path().to_path_buf(),
        progress: 0,
    };
    let report = run(&config).unwrap();
    eprint!("{}", report.summary(&config));
    assert_eq!(report.mutants, 300);
    assert_eq!(report.executions, 900);
    // Damage is noticed: a good share of the runs end with a typed error.
    assert!(
        report.errors > 90,
        "{} runs ended with an error",
        report.errors
    );
    assert!(report.failures.is_empty(), "{}", report.summary(&config));
}

/// The mutation run's findings, kept in `tests/mutants/` (scripts/mutate, seed 1; outside
/// `fixtures/`, so that the run does not take them as seeds):
/// an extent whose element count overflows is a typed error inside the JSON document (it was
/// an overflow panic), and an extent of 2^55 rows of fill values is printed for as long as the
/// limit lets it (the run still writes at the limit: not a hang).
#[test]
fn the_mutation_runs_findings_stay_fixed() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mutants");
    let config = Config {
        h5: PathBuf::from(env!("CARGO_BIN_EXE_h5")),
        corpus: Vec::new(),
        seed: 1,
        first: 0,
        mutants: 0,
        commands: Config::default_commands(),
        address_space: 4 << 30,
        // Long enough for a debug build on a busy machine to print several blocks.
        timeout: Duration::from_secs(12),
        jobs: 1,
        work: std::env::temp_dir(),
        progress: 0,
    };
    let json = vec!["dump".to_owned(), "--json".to_owned()];
    let overflow = dir.join("extent-overflows-element-count.h5");
    let (verdict, _) = run_one(&config, &json, &overflow).unwrap();
    assert_eq!(verdict, Verdict::Clean);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_h5"))
        .args(["dump", "--json"])
        .arg(&overflow)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors: Vec<&str> = doc["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["error"].as_str())
        .collect();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("more than can be counted")),
        "{errors:?}"
    );

    let huge = dir.join("extent-of-a-petabyte-of-fill.h5");
    let (verdict, _) = run_one(&config, &json, &huge).unwrap();
    assert!(
        matches!(verdict, Verdict::StillWriting(n) if n > 1 << 16),
        "{verdict:?}"
    );
    for cmd in [vec!["ls", "-r", "-v"], vec!["stat"]] {
        let args: Vec<String> = cmd.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(run_one(&config, &args, &huge).unwrap().0, Verdict::Clean);
    }
}
