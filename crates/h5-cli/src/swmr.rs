//! `h5 swmr watch`, `h5 swmr aux` and `h5 recover`: following a file written with VFD SWMR,
//! applying updater files, and rebuilding a file after its writer died.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use h5::{FileAccess, PageBufferConfig, SwmrConfig};

/// Options of `h5 swmr watch`.
#[derive(clap::Args, Debug)]
pub(crate) struct WatchArgs {
    /// The HDF5 file being written.
    pub(crate) file: PathBuf,
    /// Datasets whose new rows to print (default: every dataset).
    pub(crate) datasets: Vec<String>,
    /// Tick length in tenths of a second (as the writer's).
    #[arg(long, default_value_t = 4)]
    pub(crate) tick_len: i32,
    /// max_lag (as the writer's).
    #[arg(long, default_value_t = 7)]
    pub(crate) max_lag: i32,
    /// Pages reserved at the head of the metadata file (as the writer's).
    #[arg(long, default_value_t = 1)]
    pub(crate) md_pages_reserved: i32,
    /// The metadata file (default: FILE.md).
    #[arg(long)]
    pub(crate) md_file: Option<PathBuf>,
    /// Stop after this many seconds (default: when the writer closes the file).
    #[arg(long)]
    pub(crate) seconds: Option<f64>,
    /// Print at most this many values of a new row.
    #[arg(long, default_value_t = 8)]
    pub(crate) max_values: usize,
}

fn md_path(file: &Path, md: Option<&Path>) -> PathBuf {
    md.map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(format!("{}.md", file.display())))
}

/// Every object under `g` (path → is dataset), recursively.
fn objects(f: &h5::File) -> h5::Result<BTreeMap<String, bool>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![String::from("/")];
    while let Some(path) = stack.pop() {
        let g = f.group(&path)?;
        for name in g.member_names()? {
            let full = if path == "/" {
                format!("/{name}")
            } else {
                format!("{path}/{name}")
            };
            match g.kind_of(&name)? {
                h5::ObjectKind::Group => {
                    out.insert(full.clone(), false);
                    stack.push(full);
                }
                h5::ObjectKind::Dataset => {
                    out.insert(full, true);
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

fn row_text(values: &[f64], max: usize) -> String {
    let shown: Vec<String> = values.iter().take(max).map(|v| format!("{v}")).collect();
    let more = if values.len() > max { ", …" } else { "" };
    format!("[{}{more}]", shown.join(", "))
}

/// Follows the file: at every tick, prints objects that appeared and rows added to datasets,
/// each with how long after the writer published it this reader saw it.
pub(crate) fn watch(a: &WatchArgs) -> Result<(), Box<dyn std::error::Error>> {
    let md = md_path(&a.file, a.md_file.as_deref());
    if !md.exists() {
        return Err(format!(
            "{} is not being written with VFD SWMR: no metadata file {} (start the writer with \
             FileAccess::vfd_swmr, or pass --md-file)",
            a.file.display(),
            md.display()
        )
        .into());
    }
    let cfg = SwmrConfig {
        tick_len: 0,
        max_lag: a.max_lag,
        md_pages_reserved: a.md_pages_reserved,
        md_file_path: md.parent().map(Path::to_path_buf).unwrap_or_default(),
        md_file_name: md.file_name().map(|n| n.to_string_lossy().into_owned()),
        open_timeout: Some(Duration::from_secs(10)),
        ..SwmrConfig::reader()
    };
    let access = FileAccess::default()
        .page_buffer(PageBufferConfig::new(64 * 4096, 0, 0)?)
        .vfd_swmr(cfg);
    let f = h5::File::open_with(&a.file, &access)?;
    let tick = Duration::from_millis(100 * a.tick_len.max(1) as u64);
    let stop = a
        .seconds
        .map(|s| Instant::now() + Duration::from_secs_f64(s));
    let mut seen: BTreeMap<String, bool> = BTreeMap::new();
    let mut rows: BTreeMap<String, usize> = BTreeMap::new();
    let wanted: BTreeSet<String> = a
        .datasets
        .iter()
        .map(|d| {
            if d.starts_with('/') {
                d.clone()
            } else {
                format!("/{d}")
            }
        })
        .collect();
    let out = std::io::stdout();
    let mut last_tick = u64::MAX;
    loop {
        f.end_tick()?;
        let status = f.vfd_swmr_status()?;
        if status.tick != last_tick {
            last_tick = status.tick;
            let published = std::fs::metadata(&md).and_then(|m| m.modified()).ok();
            let delay = published
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .map_or_else(|| "?".to_owned(), |d| format!("{:.3} s", d.as_secs_f64()));
            let mut o = out.lock();
            let now = objects(&f)?;
            for (path, is_ds) in &now {
                if !seen.contains_key(path) {
                    writeln!(
                        o,
                        "tick {}: new {} {path} (seen {delay} after publication)",
                        status.tick,
                        if *is_ds { "dataset" } else { "group" }
                    )?;
                }
            }
            for (path, is_ds) in &now {
                if !is_ds || (!wanted.is_empty() && !wanted.contains(path)) {
                    continue;
                }
                let d = f.dataset(path)?;
                let shape = d.shape();
                let n = shape.first().copied().unwrap_or(0);
                let before = rows.get(path).copied().unwrap_or(0);
                if n > before && !shape.is_empty() {
                    let row_len: usize = shape[1..].iter().product();
                    let all: Vec<f64> = d
                        .read_lossy::<f64>()
                        .map(|x| x.iter().copied().collect())
                        .unwrap_or_default();
                    for r in before..n {
                        let row = all.get(r * row_len..(r + 1) * row_len).unwrap_or(&[]);
                        writeln!(
                            o,
                            "tick {}: {path}[{r}] = {} (seen {delay} after publication)",
                            status.tick,
                            row_text(row, a.max_values)
                        )?;
                    }
                }
                rows.insert(path.clone(), n);
            }
            o.flush()?;
            seen = now;
            if status.index_len == 0 && !md.exists() {
                writeln!(out.lock(), "the writer closed the file")?;
                break;
            }
        }
        if stop.is_some_and(|s| Instant::now() >= s) {
            break;
        }
        std::thread::sleep(tick / 4);
    }
    f.close()?;
    Ok(())
}

/// Options of `h5 swmr aux` (the RFC's `vfd_swmr_aux`).
#[derive(clap::Args, Debug)]
pub(crate) struct AuxArgs {
    /// Log file (default: none).
    #[arg(long = "log_file")]
    pub(crate) log_file: Option<PathBuf>,
    /// Polls for the next updater file per tick.
    #[arg(long = "polls_per_tick", default_value_t = 10)]
    pub(crate) polls_per_tick: u32,
    /// Print statistics on exit.
    #[arg(long)]
    pub(crate) stats: bool,
    /// Tick length in tenths of a second.
    #[arg(long = "tick_len", default_value_t = 4)]
    pub(crate) tick_len: u32,
    /// Log to standard output too.
    #[arg(long)]
    pub(crate) verbose: bool,
    /// The driver of the metadata file (only `sec2`, POSIX files, is supported).
    #[arg(long = "vfd_config", default_value = "sec2")]
    pub(crate) vfd_config: String,
    /// Give up when no updater file arrives for this many seconds (default: wait forever).
    #[arg(long = "idle_timeout")]
    pub(crate) idle_timeout: Option<f64>,
    /// The metadata file to maintain (need not exist; on a POSIX file system).
    pub(crate) md_file: PathBuf,
    /// The updater files' path and base name (files `<ud_path>.0`, `<ud_path>.1`, …).
    pub(crate) ud_path: PathBuf,
}

/// Applies updater files to a local metadata file until the writer's final one.
pub(crate) fn aux(a: &AuxArgs) -> Result<(), Box<dyn std::error::Error>> {
    if a.vfd_config != "sec2" {
        return Err(format!(
            "unsupported --vfd_config {:?}: only sec2 (POSIX files)",
            a.vfd_config
        )
        .into());
    }
    let log = match &a.log_file {
        Some(p) => Some(Arc::new(h5_swmr::log::SwmrLog::create(p, None)?)),
        None => None,
    };
    let opts = h5_swmr::auxiliary::AuxOptions {
        tick_len: a.tick_len,
        polls_per_tick: a.polls_per_tick,
        idle_timeout: a.idle_timeout.map(Duration::from_secs_f64),
        log,
        ..Default::default()
    };
    let stats = h5_swmr::auxiliary::run(&a.md_file, &a.ud_path, &opts)?;
    if a.verbose || a.stats {
        println!(
            "applied {} updater files ({} images), {} empty polls, {} retries",
            stats.applied.len(),
            stats.images,
            stats.empty_polls,
            stats.retries
        );
    }
    Ok(())
}

/// Options of `h5 recover`.
#[derive(clap::Args, Debug)]
pub(crate) struct RecoverArgs {
    /// The HDF5 file whose VFD SWMR writer died.
    pub(crate) file: PathBuf,
    /// Its metadata file (default: FILE.md).
    #[arg(long)]
    pub(crate) md_file: Option<PathBuf>,
    /// Keep the metadata file afterwards (default: remove it).
    #[arg(long)]
    pub(crate) keep_md: bool,
}

/// Rebuilds the file from its last complete tick (see `h5_swmr::recover` for the guarantee).
pub(crate) fn recover(a: &RecoverArgs) -> Result<(), Box<dyn std::error::Error>> {
    let md = md_path(&a.file, a.md_file.as_deref());
    if !md.exists() {
        return Err(format!(
            "no metadata file {}: nothing to recover (the writer closed the file, or it was not \
             written with VFD SWMR)",
            md.display()
        )
        .into());
    }
    let r = h5_swmr::recover::recover(&a.file, &md)?;
    if !a.keep_md {
        std::fs::remove_file(&md)?;
    }
    println!(
        "recovered {} as of tick {}: {} pages ({} bytes) written back, {} bytes long",
        a.file.display(),
        r.tick,
        r.pages,
        r.bytes,
        r.len
    );
    Ok(())
}
