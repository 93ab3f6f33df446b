//! The process the crash and lock tests run:
//!
//! * `h5-crashtest write FILE SEED FLUSH_EVERY [--sync] [--no-journal] [--latest] [--ops N]`
//!   runs the workload on FILE (continuing what it holds, or creating it), flushing every
//!   FLUSH_EVERY operations and appending the flushed [`Checkpoint`](h5_crashtest::Checkpoint)
//!   to `FILE.progress` after each flush returns; forever, or N operations then close. It
//!   prints `started` once the file is open.
//! * `h5-crashtest hold FILE r|rw|create [--no-locking]` opens FILE, prints `ready` (or
//!   `refused: <error>`), then holds it until its standard input closes.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::ExitCode;

use h5::{FileAccess, FormatBounds};
use h5_crashtest::{Writer, progress_path};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().any(|a| a == name);
    let r = match args.first().map(String::as_str) {
        Some("write") if args.len() >= 4 => write(&args, flag("--sync"), flag("--no-journal"), flag("--latest")),
        Some("hold") if args.len() >= 3 => hold(Path::new(&args[1]), &args[2], flag("--no-locking")),
        _ => Err("usage: h5-crashtest write FILE SEED FLUSH_EVERY [--sync] [--no-journal] [--latest] [--ops N] | hold FILE r|rw|create [--no-locking]".into()),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("h5-crashtest: {e}");
            ExitCode::FAILURE
        }
    }
}

fn write(args: &[String], sync: bool, no_journal: bool, latest: bool) -> Result<(), String> {
    let path = Path::new(&args[1]);
    let seed: u64 = args[2].parse().map_err(|e| format!("seed: {e}"))?;
    let every: u64 = args[3].parse().map_err(|e| format!("flush every: {e}"))?;
    let ops: Option<u64> = args
        .iter()
        .position(|a| a == "--ops")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok());
    let access = FileAccess::new().sync(sync).rollback_journal(!no_journal);
    let bounds = if latest {
        FormatBounds::LATEST
    } else {
        FormatBounds::default()
    };
    // Continue what the file holds; a file that never completed a flush is created anew.
    let mut w = match Writer::open(path, &access, seed) {
        Ok(w) => w,
        Err(h5::Error::NotHdf5) | Err(h5::Error::Io(h5_io::Error::Open { .. })) => {
            Writer::create(path, &access, bounds).map_err(|e| format!("create: {e}"))?
        }
        Err(e) => return Err(format!("open: {e}")),
    };
    println!("started");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let mut progress = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(progress_path(path))
        .map_err(|e| format!("progress: {e}"))?;
    let mut done = 0u64;
    loop {
        if ops.is_some_and(|n| done >= n) {
            break;
        }
        w.step().map_err(|e| format!("op {done}: {e}"))?;
        done += 1;
        if done.is_multiple_of(every) {
            let c = w.flush().map_err(|e| format!("flush: {e}"))?;
            writeln!(progress, "{}", c.to_line()).map_err(|e| format!("progress: {e}"))?;
        }
    }
    let c = w.state();
    w.close().map_err(|e| format!("close: {e}"))?;
    writeln!(progress, "{}", c.to_line()).map_err(|e| format!("progress: {e}"))
}

fn hold(path: &Path, mode: &str, no_locking: bool) -> Result<(), String> {
    let mut access = FileAccess::new();
    if no_locking {
        access = access.file_locking(false, false);
    }
    let opened = match mode {
        "r" => h5::File::open_with(path, &access),
        "rw" => h5::File::open_rw_with(path, &access),
        // Flushed at once, so that a reader let in (locking off) finds a whole file.
        "create" => h5::File::create_with(path, &access, &h5::CreateOptions::default())
            .and_then(|f| f.flush().map(|()| f)),
        _ => return Err(format!("mode {mode:?}")),
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let file = match opened {
        Ok(f) => {
            writeln!(out, "ready").map_err(|e| e.to_string())?;
            f
        }
        Err(e) => {
            writeln!(out, "refused: {e}").map_err(|e| e.to_string())?;
            return Ok(());
        }
    };
    out.flush().map_err(|e| e.to_string())?;
    // Hold until the parent closes our standard input.
    let mut line = String::new();
    while std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| e.to_string())?
        > 0
    {
        line.clear();
    }
    file.close().map_err(|e| e.to_string())
}
