//! The `h5` command.
//!
//! * `h5 tour` — a guided tour: the built-in trace of a group whose name heap outgrows the initial
//!   metadata cache, replayed with the default adaptive configuration and with a fixed 2 MiB cache.
//! * `h5 metacache config [--default] [--json] [FILE]` — a metadata cache configuration (the
//!   default, or a file's), every field explained, ready to edit for `replay --config`.
//! * `h5 metacache replay [TRACE] [--config FILE.json] [--compare FILE.json] [--json]
//!   [--plot FILE.svg]` — replay a trace file (default: the tour's, with both of its
//!   configurations) and report the hit rate per epoch, the resize decisions and the I/O, or
//!   plot them.
//! * `h5 metacache trace-tour OUT` — write the tour's trace to a file, as an example trace.
//! * `h5 ls [-r] [-v] [-d [--limit N]] FILE [PATH]` — the tree with kinds, shapes, datatypes,
//!   chunks and filters, and values with `-d`.
//! * `h5 dump [--json] [-d PATH]... [-g PATH]... [-A] [-H] [-p] [-n] [-s L -S L -c L] FILE
//!   [PATH]` — h5dump's DDL (with h5dump's options; large datasets stream through in blocks),
//!   or a JSON description with the data.
//! * `h5 stat FILE` — object counts, metadata against raw bytes, file space (strategy, persisted
//!   free space), chunks, cache statistics.
//! * `h5 copy SRC DST` — copy every object into a new file as it is.
//! * `h5 repack SRC DST [--chunk 64x64|auto] [--contiguous] [--deflate N] [--shuffle]
//!   [--fletcher32] [--no-filters] [--bounds B]` — copy, changing how datasets are stored.
//! * `h5 swmr watch FILE [DATASET…]` — follow a file written with VFD SWMR: new objects and new
//!   rows as they become visible, with the delay since publication.
//! * `h5 swmr aux [options] MD_FILE UD_PATH` — apply a writer's updater files to a local
//!   metadata file (the RFC's auxiliary process).
//! * `h5 recover FILE` — rebuild a file whose VFD SWMR writer died, as of its last complete
//!   tick.

mod copy;
mod dump;
mod ls;
mod metacache;
mod plot;
mod stat;
mod swmr;
mod values;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use h5_metacache::CacheConfig;
use h5_metacache::replay::{
    ReplayOptions, ReplayReport, TraceOp, TraceRecord, parse_trace, replay, tour_trace,
};

#[derive(Parser, Debug)]
#[command(
    name = "h5",
    version,
    about = "h5: a pure-Rust HDF5 engine (tools and tours)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Guided tour: the adaptive metadata cache against a fixed-size one on a growing group.
    Tour,
    /// List the objects of a file: kinds, shapes, datatypes, chunking and filters (h5ls).
    Ls {
        /// Descend into groups.
        #[arg(short, long)]
        recursive: bool,
        /// Also attributes and layout details.
        #[arg(short, long)]
        verbose: bool,
        /// Also print each dataset's values (the first --limit of them), as h5ls -d does.
        #[arg(short, long)]
        data: bool,
        /// Values printed per dataset with --data.
        #[arg(long, value_name = "N", default_value_t = 100)]
        limit: usize,
        #[command(flatten)]
        open: OpenFlags,
        /// The HDF5 file.
        file: PathBuf,
        /// A group or dataset in it (default: the root group).
        path: Option<String>,
    },
    /// Print a file (or some of its groups and datasets) as h5dump's DDL, or as JSON. Large
    /// datasets are read and printed block by block.
    Dump {
        /// Print JSON instead of DDL.
        #[arg(long)]
        json: bool,
        /// Only this dataset (repeatable), as h5dump -d.
        #[arg(short = 'd', long = "dataset", value_name = "PATH")]
        datasets: Vec<String>,
        /// Only this group (repeatable), as h5dump -g.
        #[arg(short = 'g', long = "group", value_name = "PATH")]
        groups: Vec<String>,
        /// Header and attributes with their values: no dataset data (h5dump -A).
        #[arg(short = 'A', long = "onlyattr")]
        attrs_only: bool,
        /// Header only: types and shapes, no data (h5dump -H).
        #[arg(short = 'H', long = "header")]
        header: bool,
        /// Each dataset's storage layout (with the compression ratio), filters and fill value
        /// (h5dump -p; fill and allocation times are not printed).
        #[arg(short = 'p', long = "properties")]
        properties: bool,
        /// The list of every object and link in the file (h5dump -n).
        #[arg(short = 'n', long = "contents")]
        contents: bool,
        /// With -d: the first element of the part printed, per dimension ("1,0").
        #[arg(short = 's', long = "start", value_name = "LIST", value_parser = parse_list)]
        start: Option<List>,
        /// With -d: the step per dimension.
        #[arg(short = 'S', long = "stride", value_name = "LIST", value_parser = parse_list)]
        stride: Option<List>,
        /// With -d: how many elements per dimension.
        #[arg(short = 'c', long = "count", value_name = "LIST", value_parser = parse_list)]
        count: Option<List>,
        #[command(flatten)]
        open: OpenFlags,
        /// The HDF5 file.
        file: PathBuf,
        /// A group or dataset in it (default: the root group).
        path: Option<String>,
    },
    /// Object counts, metadata against raw data, file space, chunk statistics and cache
    /// statistics.
    Stat {
        #[command(flatten)]
        open: OpenFlags,
        /// The HDF5 file.
        file: PathBuf,
    },
    /// Reset the status flags a writer that died left in the superblock (as `h5clear -s`
    /// does), so that libhdf5 and h5 open the file again. Only for files no process writes.
    Clear {
        /// The HDF5 file.
        file: PathBuf,
    },
    /// Copy every object of a file into a new file (groups, links, datasets with their
    /// storage, attributes), with a progress bar on a terminal and a summary line.
    Copy {
        /// The HDF5 file to copy.
        src: PathBuf,
        /// The new file (replaced if it exists).
        dst: PathBuf,
        #[command(flatten)]
        common: CopyFlags,
    },
    /// Copy a file changing how datasets are stored: layout, chunk shape, filters, format
    /// bounds. Any filter option replaces a dataset's whole pipeline.
    Repack {
        /// The HDF5 file to copy.
        src: PathBuf,
        /// The new file (replaced if it exists).
        dst: PathBuf,
        /// Chunk every dataset: dimensions like 64x64 (datasets of another rank get automatic
        /// chunks), or `auto` (about 1 MiB, whole along the last dimensions).
        #[arg(long, value_name = "64x64|auto", value_parser = copy::parse_chunk)]
        chunk: Option<h5::copy::ChunkShape>,
        /// Store datasets contiguously (drops their filters; growing datasets are an error).
        #[arg(long)]
        contiguous: bool,
        /// Store datasets in their object headers (not written yet: an error).
        #[arg(long)]
        compact: bool,
        /// Deflate (gzip) at this level, 0-9.
        #[arg(long, value_name = "N")]
        deflate: Option<u8>,
        /// Byte shuffle before compression.
        #[arg(long)]
        shuffle: bool,
        /// Fletcher-32 checksums.
        #[arg(long)]
        fletcher32: bool,
        /// Remove every filter.
        #[arg(long)]
        no_filters: bool,
        /// Another filter by registered id and client data, e.g. 32015:3 (zstd level 3);
        /// repeatable.
        #[arg(long, value_name = "ID[:V,V...]", value_parser = copy::parse_filter)]
        filter: Vec<h5::copy::FilterChoice>,
        /// Changes for one dataset, replacing the global ones it names: PATH:SPEC with SPEC a
        /// comma-separated list of chunk=64x64|auto, contiguous, deflate=N, shuffle,
        /// fletcher32, no-filters, filter=ID:V;V. Repeatable.
        #[arg(long = "dataset", value_name = "PATH:SPEC", value_parser = copy::parse_override)]
        datasets: Vec<(String, h5::copy::StorageChanges)>,
        /// Format versions of the new file: source (those the source was written with, raised
        /// to what its objects need), earliest, v18, v110, v112, v114, v200 or latest.
        #[arg(long, value_name = "BOUNDS", value_parser = copy::parse_bounds, default_value = "source")]
        bounds: copy::BoundsArg,
        #[command(flatten)]
        common: CopyFlags,
    },
    /// Metadata cache tools.
    Metacache {
        #[command(subcommand)]
        command: MetacacheCommand,
    },
    /// VFD SWMR tools.
    Swmr {
        #[command(subcommand)]
        command: SwmrCommand,
    },
    /// Rebuild a file whose VFD SWMR writer died, from the HDF5 file and the last complete tick
    /// in its metadata file.
    Recover(swmr::RecoverArgs),
}

#[derive(Subcommand, Debug)]
enum SwmrCommand {
    /// Follow a file written with VFD SWMR: print new objects and new rows as they become
    /// visible, with the delay since the writer published them.
    Watch(swmr::WatchArgs),
    /// Apply a writer's updater files to a local metadata file (vfd_swmr_aux).
    Aux(swmr::AuxArgs),
}

/// How the reading commands open a file.
#[derive(clap::Args, Debug)]
struct OpenFlags {
    /// Read a file whose superblock says a writer has it open (a writer still running, or one
    /// that died without closing it), with a warning, instead of refusing it.
    #[arg(long)]
    ignore_open_for_writing: bool,
}

/// Options of both `copy` and `repack`.
#[derive(clap::Args, Debug)]
struct CopyFlags {
    /// No progress bar and no summary line.
    #[arg(short, long)]
    quiet: bool,
    /// Leave out what cannot be copied yet (external links, attributes over 64 KiB,
    /// ...), listing each on standard error, instead of failing.
    #[arg(long)]
    skip_unsupported: bool,
}

impl CopyFlags {
    fn options(&self) -> h5::copy::CopyOptions {
        h5::copy::CopyOptions {
            skip_unsupported: self.skip_unsupported,
            ..h5::copy::CopyOptions::default()
        }
    }
}

#[derive(Subcommand, Debug)]
enum MetacacheCommand {
    /// Print a metadata cache configuration, every field explained: edit it and pass it to
    /// `replay --config`.
    Config {
        /// Print the default configuration (also what is printed without FILE).
        #[arg(long)]
        default: bool,
        /// Print plain JSON, without the explanations.
        #[arg(long)]
        json: bool,
        /// A configuration file, or a trace whose first set_config record to print.
        file: Option<PathBuf>,
    },
    /// Replay a trace file against a fresh cache of synthetic entries: hit rate per epoch,
    /// resize decisions, I/O. Without a trace: the tour's trace, with the tour's two
    /// configurations (adaptive default and a fixed 2 MiB cache).
    Replay {
        /// The trace file (format: `h5 metacache trace-tour` writes an example).
        trace: Option<PathBuf>,
        /// A configuration (JSON as `h5 metacache config` prints it; missing fields take the
        /// defaults) replacing the trace's first set_config record.
        #[arg(long, value_name = "FILE.json")]
        config: Option<PathBuf>,
        /// A second configuration: the trace is replayed with both, side by side.
        #[arg(long, value_name = "FILE.json")]
        compare: Option<PathBuf>,
        /// Epoch length (protects) for the per-epoch lines and every configuration applied.
        #[arg(long, value_name = "PROTECTS")]
        epoch_length: Option<u64>,
        /// Print the report as JSON (one document per configuration).
        #[arg(long)]
        json: bool,
        /// Also draw the hit rate and the cache size per epoch of every configuration
        /// replayed into this SVG file.
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
    },
    /// Write the built-in tour trace to a file.
    TraceTour {
        /// Output file.
        out: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Tour => tour(),
        Command::Ls {
            recursive,
            verbose,
            data,
            limit,
            open: flags,
            file,
            path,
        } => open(&file, &flags).and_then(|f| {
            let opts = ls::LsOptions {
                recursive,
                verbose,
                data: data.then_some(limit),
            };
            let text = ls::ls(&f, path.as_deref(), opts)?;
            print!("{text}");
            Ok(())
        }),
        Command::Dump {
            json,
            datasets,
            groups,
            attrs_only,
            header,
            properties,
            contents,
            start,
            stride,
            count,
            open: flags,
            file,
            path,
        } => open(&file, &flags).and_then(|f| {
            let shown = file.display().to_string();
            let mut wanted: Vec<dump::Wanted<'_>> = Vec::new();
            wanted.extend(path.as_deref().map(dump::Wanted::Any));
            wanted.extend(datasets.iter().map(|p| dump::Wanted::Dataset(p)));
            wanted.extend(groups.iter().map(|p| dump::Wanted::Group(p)));
            let subset =
                (start.is_some() || stride.is_some() || count.is_some()).then(|| dump::Subset {
                    start: start.map(|l| l.0).unwrap_or_default(),
                    stride: stride.map(|l| l.0).unwrap_or_default(),
                    count: count.map(|l| l.0).unwrap_or_default(),
                });
            if subset.is_some() && datasets.is_empty() {
                return Err("-s, -S and -c select part of the datasets named with -d".into());
            }
            if contents {
                print!("{}", dump::contents(&f, &shown)?);
            } else if json {
                let one = match wanted.as_slice() {
                    [] => None,
                    [dump::Wanted::Any(p) | dump::Wanted::Dataset(p) | dump::Wanted::Group(p)] => {
                        Some(*p)
                    }
                    _ => return Err("--json dumps one object (or the whole file)".into()),
                };
                let stdout = std::io::stdout();
                let mut out = std::io::BufWriter::new(stdout.lock());
                dump::json_write(&f, &shown, one, &mut out)?;
            } else {
                if wanted.is_empty() {
                    wanted.push(dump::Wanted::Any("/"));
                }
                let options = dump::DumpOptions {
                    header_only: header,
                    attrs_only,
                    properties,
                    subset,
                };
                let stdout = std::io::stdout();
                let mut lock = std::io::BufWriter::new(stdout.lock());
                dump::ddl_with(&f, &shown, &wanted, &options, Some(&mut lock))?;
                std::io::Write::flush(&mut lock).map_err(|e| e.to_string())?;
            }
            Ok(())
        }),
        Command::Clear { file } => h5::clear_status_flags(&file)
            .map(|flags| {
                if flags == 0 {
                    println!("{}: no status flags set", file.display());
                } else {
                    println!("{}: status flags {flags:#04x} cleared", file.display());
                }
            })
            .map_err(|e| format!("cannot clear {}: {e}", file.display())),
        Command::Stat { open: flags, file } => open(&file, &flags).and_then(|f| {
            let size = std::fs::metadata(&file)
                .map_err(|e| format!("{}: {e}", file.display()))?
                .len();
            print!("{}", stat::stat(&f, size)?);
            Ok(())
        }),
        Command::Copy { src, dst, common } => copy::run(copy::CopyArgs {
            src: &src,
            dst: &dst,
            bounds: None,
            options: common.options(),
            quiet: common.quiet,
        }),
        Command::Repack {
            src,
            dst,
            chunk,
            contiguous,
            compact,
            deflate,
            shuffle,
            fletcher32,
            no_filters,
            filter,
            datasets,
            bounds,
            common,
        } => copy::StorageFlags {
            chunk,
            contiguous,
            compact,
            deflate,
            shuffle,
            fletcher32,
            no_filters,
            filters: filter,
        }
        .changes()
        .and_then(|changes| {
            let mut options = common.options();
            options.changes = changes;
            options.per_path = datasets;
            copy::run(copy::CopyArgs {
                src: &src,
                dst: &dst,
                bounds: bounds.0,
                options,
                quiet: common.quiet,
            })
        }),
        Command::Swmr { command } => match command {
            SwmrCommand::Watch(a) => swmr::watch(&a).map_err(|e| e.to_string()),
            SwmrCommand::Aux(a) => swmr::aux(&a).map_err(|e| e.to_string()),
        },
        Command::Recover(a) => swmr::recover(&a).map_err(|e| e.to_string()),
        Command::Metacache { command } => match command {
            MetacacheCommand::Config {
                default,
                json,
                file,
            } => metacache::config_cmd(file.as_deref(), default, json),
            MetacacheCommand::Replay {
                trace,
                config,
                compare,
                epoch_length,
                json,
                plot,
            } => metacache::replay_cmd(&metacache::ReplayArgs {
                trace: trace.as_deref(),
                config: config.as_deref(),
                compare: compare.as_deref(),
                epoch_length,
                json,
                plot,
            }),
            MetacacheCommand::TraceTour { out } => metacache::trace_tour(&out),
        },
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("h5: error: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// A list of numbers per dimension (`-s`, `-S`, `-c`).
#[derive(Clone, Debug)]
struct List(Vec<u64>);

/// A list of numbers as h5dump takes them: `1,0`, `1;0`, `[1, 0]` or `(1,0)`.
fn parse_list(text: &str) -> Result<List, String> {
    text.trim_matches(|c: char| "[]() ".contains(c))
        .split([',', ';'])
        .map(|p| {
            p.trim()
                .parse::<u64>()
                .map_err(|e| format!("{p:?} in {text:?}: {e}"))
        })
        .collect::<Result<Vec<u64>, String>>()
        .map(List)
}

/// Opens an HDF5 file for the reading commands (warning on standard error when it is read
/// although a writer has it open).
fn open(path: &Path, flags: &OpenFlags) -> Result<h5::File, String> {
    let access = h5::FileAccess::default().ignore_open_for_writing(flags.ignore_open_for_writing);
    let f = h5::File::open_with(path, &access)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    if f.marked_open_for_writing() {
        eprintln!(
            "h5: warning: {} is marked open for writing (its writer is running or died without \
             closing it): values may be inconsistent",
            path.display()
        );
    }
    Ok(f)
}

/// Bytes as lowercase hex.
pub(crate) fn dump_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const MIB: f64 = 1024.0 * 1024.0;

fn mib(bytes: impl Into<u64>) -> String {
    format!("{:.1} MiB", bytes.into() as f64 / MIB)
}

fn mib_usize(bytes: usize) -> String {
    mib(bytes as u64)
}

/// Group digits in threes: 1234567 -> 1,234,567.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn tour() -> Result<(), String> {
    let t0 = Instant::now();
    let text = tour_trace();
    let records = parse_trace(&text).map_err(|e| format!("the built-in tour trace: {e}"))?;
    let protects = records
        .iter()
        .filter(|r| matches!(r.op, TraceOp::Protect { .. }))
        .count() as u64;
    let adaptive_cfg = CacheConfig::default_serial();
    let fixed_cfg = CacheConfig::fixed_size(2 * 1024 * 1024);
    let run = |config: CacheConfig, records: &[TraceRecord]| {
        let opts = ReplayOptions {
            config: Some(config),
            epoch_length_override: None,
        };
        replay(records, &opts).map_err(|e| format!("replay of the tour failed: {e}"))
    };
    let adaptive = run(adaptive_cfg.clone(), &records)?;
    let fixed = run(fixed_cfg, &records)?;
    let elapsed = t0.elapsed();

    println!("h5 tour: the metadata cache and a growing group");
    println!();
    println!("A group is being populated while its names are looked up. Its local name heap");
    println!("doubles from 64 KiB to 5 MiB and is pinned (it must stay in the cache); each");
    println!("lookup protects the heap, the B-tree root, a leaf and a symbol-table node. Hot");
    println!("leaves are looked up far more often than cold ones, and object headers stream");
    println!(
        "through once each: {} protects in all, {} per epoch.",
        thousands(protects),
        thousands(adaptive_cfg.epoch_length)
    );
    println!(
        "(`h5 metacache trace-tour FILE` writes this trace; `h5 metacache replay` replays it.)"
    );
    println!();
    println!("The trace is replayed twice:");
    println!("  adaptive  the default configuration: starts at 2 MiB; a flash increase makes");
    println!("            room at once when an entry grows by a large amount, and an epoch");
    println!(
        "            whose hit rate is below {} doubles the size (by at most {}).",
        adaptive_cfg.lower_hr_threshold,
        mib_usize(adaptive_cfg.max_increment)
    );
    println!("  fixed     a fixed 2 MiB cache, every resize mode off.");
    println!();
    println!(
        "{:>5}  {:>18} {:>10}    {:>18} {:>10}",
        "epoch", "adaptive hit rate", "max size", "fixed hit rate", "max size"
    );
    let n = adaptive.epochs.len().max(fixed.epochs.len());
    for i in 0..n {
        let cell = |r: &ReplayReport| match r.epochs.get(i) {
            Some(e) => format!("{:>18.4} {:>10}", e.hit_rate, mib_usize(e.max_size)),
            None => format!("{:>18} {:>10}", "-", "-"),
        };
        println!("{:>5}  {}    {}", i + 1, cell(&adaptive), cell(&fixed));
    }
    println!();
    println!("Resize events of the adaptive run:");
    let events: Vec<_> = adaptive
        .summary
        .resize_reports
        .iter()
        .filter(|r| r.changed_size())
        .collect();
    if events.is_empty() {
        println!("  (none)");
    }
    println!("  (a flash increase restarts the cache's epoch, so its epochs lag the table's)");
    for ev in events {
        let what = match ev.report.outcome {
            h5_metacache::ResizeOutcome::FlashIncrease => "flash increase",
            h5_metacache::ResizeOutcome::Increase => "increase",
            _ => "decrease",
        };
        println!(
            "  after {:>7} protects  {what:<14}  {:>8} -> {:>8}  (hit rate {:.4})",
            thousands(ev.protects),
            mib_usize(ev.report.old_max_size),
            mib_usize(ev.report.new_max_size),
            ev.report.hit_rate
        );
    }
    println!();
    let (a, f) = (&adaptive.summary, &fixed.summary);
    println!("{:<16} {:>14} {:>14}", "", "adaptive", "fixed 2 MiB");
    let row = |name: &str, x: String, y: String| println!("{name:<16} {x:>14} {y:>14}");
    row("loads", thousands(a.loads), thousands(f.loads));
    row("bytes read", mib(a.bytes_read), mib(f.bytes_read));
    row("writes", thousands(a.flushes), thousands(f.flushes));
    row("bytes written", mib(a.bytes_written), mib(f.bytes_written));
    row("evictions", thousands(a.evictions), thousands(f.evictions));
    row(
        "final max size",
        mib_usize(a.final_max_size),
        mib_usize(f.final_max_size),
    );
    println!(
        "(trace generated, parsed and replayed twice in {:.2} s)",
        elapsed.as_secs_f64()
    );
    println!();
    println!(
        "hit rate: adaptive {:.4}, fixed 2 MiB {:.4}",
        a.hit_rate, f.hit_rate
    );
    sample_tour()?;
    write_tour()
}

/// The third part of the tour: a file written, reopened and read back, with both caches'
/// statistics. The file goes to the system's temporary directory and is removed afterwards.
fn write_tour() -> Result<(), String> {
    let path = std::env::temp_dir().join(format!("h5-tour-{}.h5", std::process::id()));
    let result = write_and_read(&path);
    let _ = std::fs::remove_file(&path);
    result
}

fn write_and_read(path: &std::path::Path) -> Result<(), String> {
    let err = |e: h5::Error| format!("the written tour file: {e}");
    const SIDE: usize = 1024;
    const ROUNDS: usize = 50;
    const APPEND: usize = 1000;
    // A smooth field with low-bit noise compresses like measured data does.
    let field: Vec<f32> = (0..SIDE * SIDE)
        .map(|i| {
            let (r, c) = ((i / SIDE) as f32, (i % SIDE) as f32);
            (r * 0.01).sin() * (c * 0.02).cos() + ((i * 7919) % 13) as f32 * 1e-4
        })
        .collect();
    let t0 = Instant::now();
    {
        let file = h5::File::create(path).map_err(err)?;
        let run = file.create_group("runs/2026-11-23").map_err(err)?;
        run.write_attr_str("instrument", "h5 tour").map_err(err)?;
        run.write_attr_scalar("temperature_k", 293.15f64)
            .map_err(err)?;
        let ds = run
            .new_dataset::<f32>()
            .shape([SIDE, SIDE])
            .chunk([128, 128])
            .shuffle()
            .deflate(4)
            .create("field")
            .map_err(err)?;
        ds.write(&field).map_err(err)?;
        ds.write_attr_str("units", "V").map_err(err)?;
        let log = run
            .new_dataset::<i64>()
            .shape([0])
            .max_shape([None])
            .chunk([4096])
            .deflate(1)
            .create("log")
            .map_err(err)?;
        for round in 0..ROUNDS {
            let start = round * APPEND;
            let values: Vec<i64> = (start..start + APPEND).map(|i| (i * i) as i64).collect();
            log.append(&values).map_err(err)?;
        }
        file.close().map_err(err)?;
    }
    let written = t0.elapsed();
    let size = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    println!();
    println!("A file written by h5 (HDF5 2.0's default formats, which HDF5 1.8 and later read):");
    println!("  /runs/2026-11-23           a group made with its parent, two attributes");
    println!(
        "  /runs/2026-11-23/field     {SIDE} x {SIDE} float32, chunks 128 x 128, shuffle + deflate 4"
    );
    println!(
        "  /runs/2026-11-23/log       int64, unlimited, grown {ROUNDS} times by {APPEND} elements"
    );
    println!(
        "  {} bytes on disk for {} bytes of values, written in {:.3} s",
        thousands(size),
        thousands((SIDE * SIDE * 4 + ROUNDS * APPEND * 8) as u64),
        written.as_secs_f64()
    );
    let t1 = Instant::now();
    let file = h5::File::open(path).map_err(err)?;
    let back: Vec<f32> = file
        .dataset("runs/2026-11-23/field")
        .map_err(err)?
        .read::<f32>()
        .map_err(err)?
        .into_iter()
        .collect();
    let log: Vec<i64> = file
        .dataset("runs/2026-11-23/log")
        .map_err(err)?
        .read_1d::<i64>()
        .map_err(err)?
        .to_vec();
    let read = t1.elapsed();
    let log_ok =
        log.len() == ROUNDS * APPEND && log.iter().enumerate().all(|(i, v)| *v == (i * i) as i64);
    if back != field || !log_ok {
        return Err("the tour file read back different values".into());
    }
    println!(
        "Reopened and read back in {:.3} s: every value equal to what was written.",
        read.as_secs_f64()
    );
    let ms = file.metadata_cache_stats().map_err(err)?;
    let (hits, misses) = ms
        .per_class
        .iter()
        .fold((0, 0), |(h, m), c| (h + c.hits, m + c.misses));
    let cs = file.chunk_cache_stats().map_err(err)?;
    println!(
        "  metadata cache: {misses} loads, {hits} hits; chunk cache: {} misses, {} hits, {} read",
        cs.misses,
        cs.hits,
        mib(cs.bytes_read)
    );
    println!(
        "  (`h5 ls -r -v FILE` and `h5 stat FILE` show such a file; h5py and h5dump read it too)"
    );
    Ok(())
}

/// The bundled sample file: every storage layout and chunk index type libhdf5 writes (h5py,
/// libver latest), embedded so the tour works from any directory.
const SAMPLE: &[u8] = include_bytes!("../../../fixtures/files/layouts_latest.h5");

/// The second part of the tour: a real HDF5 file opened from memory, its tree and a slice.
fn sample_tour() -> Result<(), String> {
    use ndarray::SliceInfoElem;
    // ndarray's `s![2..5, 4..10]`, spelled out (the macro expands to unsafe code, forbidden here).
    let range = |start: isize, end: isize| SliceInfoElem::Slice {
        start,
        end: Some(end),
        step: 1,
    };
    let storage = std::sync::Arc::new(h5_io::MemoryStorage::with_data(SAMPLE.to_vec()));
    let file = h5::File::from_storage(storage, &h5::FileAccess::default(), None)
        .map_err(|e| format!("the bundled sample file: {e}"))?;
    println!();
    println!(
        "A real file: the bundled sample (fixtures/files/layouts_latest.h5, {} bytes, superblock",
        SAMPLE.len()
    );
    println!(
        "version {}), opened from memory. `h5 ls -r FILE` prints such a tree:",
        file.superblock_version()
    );
    println!();
    print!("{}", ls::ls(&file, None, ls::LsOptions::default())?);
    let d = file
        .dataset("/fixed_array")
        .map_err(|e| format!("the bundled sample file: {e}"))?;
    let slice = d
        .read_slice::<i32>([range(2, 5), range(4, 10)])
        .map_err(|e| format!("the bundled sample file: {e}"))?;
    println!();
    println!("Rows 2..5, columns 4..10 of /fixed_array (chunks of 10 x 6, a fixed-array index),");
    println!("read through the shared chunk cache:");
    for row in slice.rows() {
        let cells: Vec<String> = row.iter().map(|v| format!("{v:>5}")).collect();
        println!("  {}", cells.join(""));
    }
    let cs = file
        .chunk_cache_stats()
        .map_err(|e| format!("the bundled sample file: {e}"))?;
    println!(
        "(chunk cache: {} misses, {} hits; `h5 dump`, `h5 dump --json` and `h5 stat` show more)",
        cs.misses, cs.hits
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use h5_testkit::verify::{AttrExpect, DatasetExpect, Expectations, check_with_h5py, h5dump};
    use serde_json::json;

    /// The file the tour writes opens in h5py with the layout, filters and values the tour
    /// describes, and in h5dump.
    #[test]
    fn the_tour_file_reads_back_in_h5py_and_h5dump() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tour.h5");
        super::write_and_read(&path).unwrap();
        let exp = Expectations::new()
            .group("/runs/2026-11-23", &["field", "log"])
            .attr(
                "/runs/2026-11-23",
                "temperature_k",
                AttrExpect::new("<f8", json!(293.15)),
            )
            .dataset(
                "/runs/2026-11-23/field",
                DatasetExpect::new("<f4", &[1024, 1024])
                    .chunks(&[128, 128])
                    .shuffle(true)
                    .gzip(4),
            )
            .dataset(
                "/runs/2026-11-23/log",
                DatasetExpect::new("<i8", &[50_000])
                    .maxshape(&[None])
                    .chunks(&[4096])
                    .gzip(1)
                    .spot(&[49_999], json!(49_999i64 * 49_999)),
            );
        if let Err(e) = check_with_h5py(&path, &exp) {
            panic!("h5py disagrees with the tour file:\n{e}");
        }
        h5dump(&["-H"], &path).unwrap_or_else(|e| panic!("h5dump failed: {e}"));
    }
}
