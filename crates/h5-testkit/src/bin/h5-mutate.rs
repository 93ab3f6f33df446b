//! `h5-mutate`: the mutation run of `h5_testkit::mutate` from the command line (`scripts/mutate`
//! builds and runs it). Exits 0 when no mutant made the `h5` command panic, abort or hang, 1
//! otherwise (the failing mutants are kept in `--work`), 2 on a usage or I/O error.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use h5_testkit::mutate::{Config, run};

/// Damages every HDF5 file of the corpus at random and runs `h5` on each mutant under an
/// address-space and a time limit.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The `h5` binary to run.
    #[arg(long)]
    h5: PathBuf,
    /// Directories of the corpus (searched recursively for HDF5 files).
    #[arg(long = "corpus", required = true)]
    corpus: Vec<PathBuf>,
    /// Number of mutants.
    #[arg(long, default_value_t = 20_000)]
    mutants: u64,
    /// Seed of the run (mutant i of a seed is always the same).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// First mutant index.
    #[arg(long, default_value_t = 0)]
    first: u64,
    /// Address-space limit of each run of h5, in MiB.
    #[arg(long, default_value_t = 4096)]
    limit_mib: u64,
    /// Time limit of each run of h5, in seconds.
    #[arg(long, default_value_t = 10)]
    timeout: u64,
    /// Runs at once.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Where mutants are written and failing ones kept.
    #[arg(long)]
    work: PathBuf,
    /// Print progress every so many mutants.
    #[arg(long, default_value_t = 1000)]
    progress: u64,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let config = Config {
        h5: a.h5,
        corpus: a.corpus,
        seed: a.seed,
        first: a.first,
        mutants: a.mutants,
        commands: Config::default_commands(),
        address_space: a.limit_mib << 20,
        timeout: Duration::from_secs(a.timeout),
        jobs: a.jobs,
        work: a.work,
        progress: a.progress,
    };
    match run(&config) {
        Ok(report) => {
            print!("{}", report.summary(&config));
            if report.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("h5-mutate: error: {e}");
            ExitCode::from(2)
        }
    }
}
