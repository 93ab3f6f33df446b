//! A sample of the mutation run (`scripts/mutate` runs the full one): fixture files damaged at
//! random (changed bytes, overwritten runs, stamped values, truncations) go through `h5 dump
//! --json`, `h5 ls -r -v` and `h5 stat` in child processes under a 4 GiB address-space limit;
//! every run must end with status 0 or a typed error (status 1), never a panic, an abort or a
//! hang.

use std::path::PathBuf;
use std::time::Duration;

use h5_testkit::mutate::{Config, run};

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
