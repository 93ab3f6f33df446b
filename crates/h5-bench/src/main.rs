//! `h5-bench`: benchmarks of h5.
//!
//! `h5-bench metacache` measures the metadata cache on its own: protect/unprotect pairs that hit
//! (read-only and read-write), and the replay of the built-in tour trace. Each figure is the median
//! of several timed repetitions after a warm-up; run it with `--release`.
//!
//! `h5-bench chunkcache` measures the chunk cache's parallel codec: a multi-chunk write + flush
//! (encode) and a full read into a fresh cache (decode) of float32 chunks through a real
//! shuffle + deflate layout, on 1 and 2 codec threads.
//!
//! `h5-bench` with no subcommand (or `h5-bench all`) runs the standard workloads W1–W7 on h5 and
//! on libhdf5 through h5py in the same run, alternating, and prints one table of medians with
//! the time and peak-memory ratios `h5/h5py` (see `docs/benchmarks.md`); `--quick` divides the
//! volumes by 16.
//!
//! `h5-bench threads` reads cached data from one thread and from several threads sharing one
//! file (the chunk cache serves hits under a shared lock).
//!
//! `h5-bench read` runs read workloads on h5 and on libhdf5 through h5py in the same run,
//! alternating, and reports medians and `h5/h5py` ratios (see `docs/benchmarks.md`).

mod all;
mod chunkcache;
mod common;
mod probe;
mod read;
mod swmr;
mod threads;

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use h5_io::{MemoryStorage, Storage};
use h5_metacache::replay::{
    ReplayOptions, SyntheticTypes, parse_trace, replay, synthetic_classes, tour_trace,
};
use h5_metacache::{
    CacheBuilder, CacheConfig, FlushFlags, InsertFlags, MetadataCache, ProtectFlags, UnboundedFile,
    UnprotectFlags,
};

#[derive(Parser)]
#[command(
    name = "h5-bench",
    about = "Benchmarks of h5 (no subcommand: the standard workloads, as `all`)",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    all: all::AllOptions,
}

#[derive(Subcommand)]
enum Command {
    /// The standard workloads W1–W7 on h5 and h5py (the default).
    All(all::AllOptions),
    /// Metadata cache micro-benchmarks.
    Metacache {
        /// Timed repetitions per figure (the median is reported).
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Protect/unprotect pairs per repetition.
        #[arg(long, default_value_t = 5_000_000)]
        pairs: u64,
    },
    /// Chunk cache encode/decode throughput with shuffle + deflate on 1 and 2 threads.
    Chunkcache {
        /// Timed repetitions per figure (the median is reported).
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Chunks written and read per repetition.
        #[arg(long, default_value_t = 64)]
        chunks: u64,
        /// Chunk size in KiB (a multiple of 4 bytes: float32 elements).
        #[arg(long, default_value_t = 1024)]
        chunk_kib: u64,
    },
    /// Read workloads on h5 and on libhdf5 through h5py, side by side (medians, h5/h5py ratios).
    Read(read::ReadOptions),
    /// W7 (VFD SWMR write-to-visibility latency against libhdf5's legacy SWMR, writer
    /// throughput) and the seed's SWMR performance tests.
    Swmr(swmr::SwmrOptions),
    /// The reader process of W7 (started by `swmr`).
    #[command(hide = true)]
    SwmrRead {
        /// The file.
        path: PathBuf,
        /// Values to wait for.
        n: usize,
        /// Tick length in tenths of a second (0: manual ticks).
        tick_len: i32,
        /// The reader's retry delay in milliseconds (`SwmrConfig::reader_retry`; 0: none).
        #[arg(default_value_t = 0)]
        retry_ms: u64,
    },
    /// The reader process of the perf tests' latency runs (started by `swmr`).
    #[command(hide = true)]
    SwmrWatchLen {
        /// The file.
        path: PathBuf,
        /// The dataset to watch.
        dataset: String,
        /// The first-dimension length to wait for.
        len: usize,
    },
    /// Reads of cached data from one thread and from several threads sharing the file.
    Threads {
        /// Random 64x64 block reads per repetition (split evenly between the threads).
        #[arg(long, default_value_t = 4000)]
        reads: usize,
        /// Threads of the parallel run.
        #[arg(long, default_value_t = 8)]
        threads: usize,
        /// Timed repetitions per configuration (the median is reported).
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Directory of the file written (default: under the system's temporary directory).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
}

fn main() {
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::All(cli.all)) {
        Command::All(opts) => {
            // No re-run with glibc's huge-page tunable: h5 and the C side ask for huge pages on
            // large arrays themselves, as numpy does, so every system allocates as users get.
            if opts.common.no_thp {
                h5::set_huge_pages(false);
            }
            exit_on("h5-bench", all::run(&opts));
        }
        Command::Metacache { reps, pairs } => metacache(reps.max(1), pairs.max(1)),
        Command::Chunkcache {
            reps,
            chunks,
            chunk_kib,
        } => chunkcache::run(reps.max(1), chunks.max(1), chunk_kib.max(1)),
        Command::Swmr(opts) => {
            let python = opts.python.clone().unwrap_or_else(|| {
                common::default_python(&std::env::current_dir().unwrap_or_default())
            });
            let py = (!opts.no_python).then_some(python.as_path());
            if let Err(e) = swmr::run(&opts, py) {
                eprintln!("h5-bench swmr: {e}");
                std::process::exit(2);
            }
        }
        Command::SwmrRead {
            path,
            n,
            tick_len,
            retry_ms,
        } => {
            if let Err(e) = swmr::w7_read(&path, n, tick_len, retry_ms) {
                eprintln!("h5-bench swmr-read: {e}");
                std::process::exit(2);
            }
        }
        Command::SwmrWatchLen { path, dataset, len } => {
            if let Err(e) = swmr::watch_len(&path, &dataset, len) {
                eprintln!("h5-bench swmr-watch-len: {e}");
                std::process::exit(2);
            }
        }
        Command::Threads {
            reads,
            threads,
            reps,
            dir,
        } => {
            let dir = dir.unwrap_or_else(|| std::env::temp_dir().join("h5-bench-threads"));
            exit_on(
                "h5-bench threads",
                threads::run(reads.max(1), threads.max(1), reps, &dir),
            );
        }
        Command::Read(opts) => {
            if let Some(code) = common::reexec_with_thp(opts.no_thp) {
                std::process::exit(code);
            }
            if opts.no_thp {
                h5::set_huge_pages(false);
            }
            exit_on("h5-bench read", read::run(&opts));
        }
    }
}

/// Ends the process as a side-by-side command's result says: status 1 when some values did
/// not match (the run printed MISMATCH), 2 on an error, 0 otherwise.
fn exit_on(name: &str, result: Result<bool, String>) {
    match result {
        Ok(true) => {}
        Ok(false) => {
            eprintln!("{name}: some values did not match (see MISMATCH above)");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::exit(2);
        }
    }
}

pub(crate) fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn build_cache(entries: u64, entry_size: usize) -> MetadataCache<SyntheticTypes> {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let mut cache =
        CacheBuilder::<SyntheticTypes>::new(storage, synthetic_classes(1), UnboundedFile)
            .config(CacheConfig::default_serial())
            .build()
            .expect("default configuration is valid");
    for i in 0..entries {
        cache
            .insert(
                0,
                0x1000 + i * entry_size as u64,
                vec![0u8; entry_size],
                InsertFlags::NONE,
            )
            .expect("insert");
    }
    cache.flush(FlushFlags::NONE).expect("flush");
    cache
}

/// Time `pairs` protect/unprotect hits over `entries` resident entries, visited in a fixed
/// pseudo-random order so that the hash chains and LRU moves are exercised, not one hot entry.
fn hit_pairs(entries: u64, pairs: u64, flags: ProtectFlags) -> Duration {
    let entry_size = 256usize;
    let mut cache = build_cache(entries, entry_size);
    let addrs: Vec<u64> = {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                0x1000 + (x % entries) * entry_size as u64
            })
            .collect()
    };
    let start = Instant::now();
    for i in 0..pairs {
        let addr = addrs[(i as usize) & 4095];
        let h = cache
            .protect(0, addr, &entry_size, flags)
            .expect("protect hit");
        black_box(cache.icr(&h).map(|v| v.len()).unwrap_or(0));
        cache.unprotect(h, UnprotectFlags::NONE).expect("unprotect");
    }
    let elapsed = start.elapsed();
    assert_eq!(cache.stats().total_misses, 0, "every protect must hit");
    elapsed
}

fn metacache(reps: usize, pairs: u64) {
    println!("h5-bench metacache: median of {reps} repetitions (release build recommended)");
    for (label, entries, flags) in [
        (
            "read-only hits, 1000 entries",
            1000,
            ProtectFlags::READ_ONLY,
        ),
        ("read-write hits, 1000 entries", 1000, ProtectFlags::NONE),
        (
            "read-only hits, 6000 entries",
            6000,
            ProtectFlags::READ_ONLY,
        ),
    ] {
        let _warm = hit_pairs(entries, pairs / 10, flags);
        let runs: Vec<Duration> = (0..reps)
            .map(|_| hit_pairs(entries, pairs, flags))
            .collect();
        let m = median(runs);
        let per_sec = pairs as f64 / m.as_secs_f64();
        println!(
            "  protect/unprotect {label:<32} {:>7.1} M pairs/s  ({:.1} ns/pair)",
            per_sec / 1e6,
            m.as_nanos() as f64 / pairs as f64
        );
    }
    replay_tour(reps);
}

/// Replay the built-in tour trace (parsing excluded from the timing) with the default adaptive
/// configuration: every call goes through the trace engine, the cache and in-memory storage.
fn replay_tour(reps: usize) {
    let records = parse_trace(&tour_trace()).expect("the built-in trace parses");
    let opts = ReplayOptions::default();
    let mut protects = 0;
    let runs: Vec<Duration> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            let report = replay(&records, &opts).expect("the built-in trace replays");
            let elapsed = start.elapsed();
            assert_eq!(
                report.summary.mismatches, 0,
                "replay must reproduce the trace"
            );
            protects = report.summary.protects;
            elapsed
        })
        .collect();
    let m = median(runs);
    println!(
        "  replay of the tour trace ({} records, {protects} protects)  {:>6.1} M records/s  ({:.0} ms)",
        records.len(),
        records.len() as f64 / m.as_secs_f64() / 1e6,
        m.as_secs_f64() * 1e3
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_subcommand_runs_all() {
        let cli = Cli::try_parse_from(["h5-bench", "--quick", "--only", "1,4"]).expect("parses");
        assert!(cli.command.is_none());
        assert!(cli.all.common.quick);
        assert_eq!(cli.all.common.only, ["1", "4"]);
        assert_eq!(cli.all.common.reps, 5);
        let cli = Cli::try_parse_from(["h5-bench", "all", "--reps", "3"]).expect("parses");
        match cli.command {
            Some(Command::All(a)) => {
                assert_eq!(a.common.reps, 3);
                assert!(!a.common.quick);
            }
            _ => panic!("not the all command"),
        }
        let cli = Cli::try_parse_from(["h5-bench", "read", "--quick"]).expect("parses");
        assert!(matches!(
            cli.command,
            Some(Command::Read(common::SideBySide { quick: true, .. }))
        ));
    }

    #[test]
    fn read_arguments_parse() {
        let cli = Cli::try_parse_from(["h5-bench", "read", "--quick", "--python", "/x/py"])
            .expect("parses");
        match cli.command.expect("a subcommand") {
            Command::Read(common::SideBySide {
                quick,
                python,
                reps,
                dir,
                no_thp,
                only,
            }) => {
                assert!(quick);
                assert!(only.is_empty());
                assert_eq!(python, Some(std::path::PathBuf::from("/x/py")));
                assert_eq!(reps, 5);
                assert_eq!(dir, None);
                assert!(!no_thp);
            }
            _ => panic!("not the read command"),
        }
        let cli = Cli::try_parse_from([
            "h5-bench", "read", "--reps", "3", "--no-thp", "--only", "1,3b",
        ])
        .expect("parses");
        match cli.command.expect("a subcommand") {
            Command::Read(common::SideBySide {
                quick,
                reps,
                no_thp,
                only,
                ..
            }) => {
                assert!(!quick);
                assert_eq!(only, ["1", "3b"]);
                assert_eq!(reps, 3);
                assert!(no_thp);
            }
            _ => panic!("not the read command"),
        }
        assert!(Cli::try_parse_from(["h5-bench", "read", "--reps", "x"]).is_err());
    }
}
