//! `h5 metacache`: the configuration (printed with every field explained), replays of traces
//! (text, JSON, or a plot of hit rate and cache size per epoch) and the tour's trace.

use std::path::{Path, PathBuf};

use h5_metacache::CacheConfig;
use h5_metacache::replay::{ReplayOptions, ReplayReport, parse_trace, replay, tour_trace};

/// Every field of [`CacheConfig`] in declaration order, with what it means for a user editing a
/// configuration file (units, ranges, which mode uses it).
pub(crate) const FIELD_DOCS: [(&str, &str); 30] = [
    ("version", "Configuration format version; must be 1."),
    (
        "rpt_fcn_enabled",
        "Report every resize decision (replays always do).",
    ),
    (
        "open_trace_file",
        "One-shot: start writing a trace to trace_file_name (ignored by replays).",
    ),
    (
        "close_trace_file",
        "One-shot: stop writing the trace (ignored by replays).",
    ),
    (
        "trace_file_name",
        "Where open_trace_file writes the trace (at most 1024 bytes).",
    ),
    (
        "evictions_enabled",
        "Whether the cache may evict entries to stay within max size (false needs every \
         resize mode off).",
    ),
    (
        "set_initial_size",
        "Set the maximum size to initial_size when the configuration is applied.",
    ),
    (
        "initial_size",
        "Bytes: the maximum size to start from (between min_size and max_size).",
    ),
    (
        "min_clean_fraction",
        "0..1: the fraction of the maximum size kept clean (or free) so that a miss need not \
         wait for a write.",
    ),
    (
        "max_size",
        "Bytes: the upper bound of adaptive resizing (1 KiB .. 128 MiB).",
    ),
    (
        "min_size",
        "Bytes: the lower bound of adaptive resizing (1 KiB .. max_size).",
    ),
    (
        "epoch_length",
        "Protects per epoch: how often the hit rate is measured and the size reconsidered \
         (100 .. 1000000).",
    ),
    (
        "incr_mode",
        "\"Threshold\": grow at an epoch's end when the hit rate is below lower_hr_threshold \
         and the cache is full; \"Off\": never.",
    ),
    (
        "lower_hr_threshold",
        "0..1: the hit rate below which the cache grows (Threshold increase mode).",
    ),
    (
        "increment",
        ">= 1: the factor the maximum size is multiplied by when it grows.",
    ),
    (
        "apply_max_increment",
        "Whether max_increment caps each increase.",
    ),
    ("max_increment", "Bytes: the largest increase in one epoch."),
    (
        "flash_incr_mode",
        "\"AddSpace\": grow at once when one entry is inserted or grows by more than \
         flash_threshold of the maximum size; \"Off\": never.",
    ),
    (
        "flash_multiple",
        "0.1 .. 10: the multiple of the entry's size added by a flash increase.",
    ),
    (
        "flash_threshold",
        "0.1 .. 1: an entry larger than this fraction of the maximum size triggers a flash \
         increase.",
    ),
    (
        "decr_mode",
        "\"Off\", \"Threshold\" (shrink by decrement when the hit rate is above \
         upper_hr_threshold), \"AgeOut\" (evict entries untouched for \
         epochs_before_eviction epochs and shrink to what remains) or \
         \"AgeOutWithThreshold\" (age-out only in epochs above upper_hr_threshold).",
    ),
    (
        "upper_hr_threshold",
        "0..1: the hit rate above which the cache may shrink.",
    ),
    (
        "decrement",
        "0..1: the factor the maximum size is multiplied by when it shrinks (Threshold \
         decrease mode).",
    ),
    (
        "apply_max_decrement",
        "Whether max_decrement caps each decrease.",
    ),
    ("max_decrement", "Bytes: the largest decrease in one epoch."),
    (
        "epochs_before_eviction",
        "1 .. 10: epochs an entry may stay untouched before age-out evicts it.",
    ),
    (
        "apply_empty_reserve",
        "Whether age-out leaves empty_reserve of the cache free.",
    ),
    (
        "empty_reserve",
        "0..1: the fraction of the cache age-out leaves empty.",
    ),
    (
        "dirty_bytes_threshold",
        "Bytes (parallel HDF5): dirty bytes between sync points (16 KiB .. 256 MiB).",
    ),
    (
        "metadata_write_strategy",
        "Parallel HDF5: \"Process0Only\" (rank 0 writes every entry) or \"Distributed\" \
         (the writes are spread over the ranks).",
    ),
];

/// The lines of a `//` comment holding `text`, wrapped at about 90 columns.
fn comment(text: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + word.len() > 86 {
            out.push_str(&format!("{indent}// {line}\n"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&format!("{indent}// {line}\n"));
    }
    out
}

/// `config` as JSON with a `//` comment line explaining each field (what `h5 metacache config`
/// prints; `replay --config` reads it back, comments and all).
pub(crate) fn commented(config: &CacheConfig, title: &str) -> Result<String, String> {
    let value = serde_json::to_value(config).map_err(|e| format!("cannot encode: {e}"))?;
    let mut out = comment(title, "");
    out.push_str(&comment(
        "Edit and pass to `h5 metacache replay --config FILE`: fields left out take their \
         default value; lines starting with // are comments.",
        "",
    ));
    out.push_str("{\n");
    for (i, (name, doc)) in FIELD_DOCS.iter().enumerate() {
        let v = value
            .get(name)
            .ok_or_else(|| format!("the configuration has no field {name}"))?;
        out.push_str(&comment(doc, "  "));
        let comma = if i + 1 < FIELD_DOCS.len() { "," } else { "" };
        out.push_str(&format!("  \"{name}\": {v}{comma}\n"));
    }
    out.push_str("}\n");
    Ok(out)
}

/// `h5 metacache config`: the default configuration, or the one a configuration file or a
/// trace's first `set_config` record gives (completed with the defaults).
pub(crate) fn config_cmd(from: Option<&Path>, default: bool, json: bool) -> Result<(), String> {
    let (config, title) = match from {
        Some(p) if !default => (
            config_of(p)?,
            format!("The metadata cache configuration of {}.", p.display()),
        ),
        _ => (
            CacheConfig::default_serial(),
            "The default metadata cache configuration (libhdf5's serial default, which h5 \
             files start with)."
                .to_owned(),
        ),
    };
    if json {
        let text = serde_json::to_string_pretty(&config).map_err(|e| e.to_string())?;
        println!("{text}");
    } else {
        print!("{}", commented(&config, &title)?);
    }
    Ok(())
}

/// The configuration a file holds: a configuration file (JSON, comments allowed) or a trace
/// (its first `set_config` record; the defaults when it has none).
fn config_of(path: &Path) -> Result<CacheConfig, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if text.trim_start().starts_with('{') || text.trim_start().starts_with("//") {
        return read_config(path);
    }
    let records =
        parse_trace(&text).map_err(|e| format!("cannot parse {}: {e}", path.display()))?;
    Ok(records
        .iter()
        .find_map(|r| match &r.op {
            h5_metacache::replay::TraceOp::SetConfig(c) => Some((**c).clone()),
            _ => None,
        })
        .unwrap_or_else(CacheConfig::default_serial))
}

/// `text` without its `//` comment lines.
fn strip_comments(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads and checks a configuration file (JSON; lines starting with `//` are comments;
/// missing fields take the defaults).
pub(crate) fn read_config(path: &Path) -> Result<CacheConfig, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
    let text = strip_comments(&text);
    // serde_json first, for a message with line and column on malformed JSON.
    if let Err(e) = serde_json::from_str::<serde_json::Value>(&text) {
        return Err(format!("config {} is not valid JSON: {e}", path.display()));
    }
    let config =
        CacheConfig::from_json(&text).map_err(|e| format!("config {}: {e}", path.display()))?;
    config.validate().map_err(|e| {
        format!(
            "config {} is not a valid configuration: {e}",
            path.display()
        )
    })?;
    Ok(config)
}

/// What `h5 metacache replay` replays.
pub(crate) struct ReplayArgs<'a> {
    /// The trace file (`None`: the tour's built-in trace).
    pub(crate) trace: Option<&'a Path>,
    /// The configuration replacing the trace's first `set_config` record.
    pub(crate) config: Option<&'a Path>,
    /// A second configuration to replay the trace with, side by side.
    pub(crate) compare: Option<&'a Path>,
    /// Epoch length override.
    pub(crate) epoch_length: Option<u64>,
    /// JSON output.
    pub(crate) json: bool,
    /// Where to draw the plot (SVG).
    pub(crate) plot: Option<PathBuf>,
}

/// One replay of the trace: a name for the legend and the report.
pub(crate) struct Run {
    pub(crate) name: String,
    pub(crate) report: ReplayReport,
}

/// The runs `args` asks for. Without a trace: the tour's trace with the tour's two
/// configurations (the adaptive default and a fixed 2 MiB cache) unless configurations are
/// given.
pub(crate) fn runs(args: &ReplayArgs<'_>) -> Result<Vec<Run>, String> {
    let (text, shown) = match args.trace {
        Some(t) => (
            std::fs::read_to_string(t)
                .map_err(|e| format!("cannot read trace {}: {e}", t.display()))?,
            t.display().to_string(),
        ),
        None => (tour_trace(), "the tour trace".to_owned()),
    };
    let records = parse_trace(&text).map_err(|e| format!("cannot parse {shown}: {e}"))?;
    let mut configs: Vec<(String, Option<CacheConfig>)> = Vec::new();
    match (args.config, args.compare) {
        (None, None) if args.trace.is_none() => {
            configs.push((
                "adaptive (default)".into(),
                Some(CacheConfig::default_serial()),
            ));
            configs.push((
                "fixed 2 MiB".into(),
                Some(CacheConfig::fixed_size(2 * 1024 * 1024)),
            ));
        }
        (config, compare) => {
            let name = |p: Option<&Path>| {
                p.map_or_else(
                    || "the trace's configuration".to_owned(),
                    |p| p.display().to_string(),
                )
            };
            configs.push((name(config), config.map(read_config).transpose()?));
            if let Some(c) = compare {
                configs.push((name(Some(c)), Some(read_config(c)?)));
            }
        }
    }
    configs
        .into_iter()
        .map(|(name, config)| {
            let opts = ReplayOptions {
                config,
                epoch_length_override: args.epoch_length,
            };
            let report = replay(&records, &opts).map_err(|e| format!("cannot replay: {e}"))?;
            Ok(Run { name, report })
        })
        .collect()
}

/// `h5 metacache replay`.
pub(crate) fn replay_cmd(args: &ReplayArgs<'_>) -> Result<(), String> {
    let runs = runs(args)?;
    if let Some(out) = &args.plot {
        crate::plot::replay_plot(&runs, out)?;
        eprintln!("wrote {}", out.display());
    }
    for (i, run) in runs.iter().enumerate() {
        if args.json {
            println!("{}", run.report.to_json());
        } else {
            if runs.len() > 1 {
                if i > 0 {
                    println!();
                }
                println!("== {}", run.name);
            }
            print!("{}", run.report.to_text());
        }
    }
    Ok(())
}

/// `h5 metacache trace-tour OUT`.
pub(crate) fn trace_tour(out: &Path) -> Result<(), String> {
    let text = tour_trace();
    std::fs::write(out, &text).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    let protects = text.lines().filter(|l| l.starts_with("protect ")).count();
    println!(
        "wrote the tour trace to {} ({} lines, {protects} protects)",
        out.display(),
        text.lines().count()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table explains exactly the configuration's fields, in its order.
    #[test]
    fn every_field_is_documented_once() {
        let value = serde_json::to_value(CacheConfig::default_serial()).unwrap();
        let mut fields: Vec<&String> = value.as_object().unwrap().keys().collect();
        fields.sort();
        let mut documented: Vec<&str> = FIELD_DOCS.iter().map(|(n, _)| *n).collect();
        documented.sort_unstable();
        assert_eq!(fields, documented);
    }

    /// What `config` prints reads back as the same configuration.
    #[test]
    fn the_commented_configuration_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        let mut c = CacheConfig::default_serial();
        c.epoch_length = 1234;
        c.decr_mode = h5_metacache::DecrMode::Threshold;
        let text = commented(&c, "A test.").unwrap();
        assert!(text.contains("// Protects per epoch"), "{text}");
        std::fs::write(&path, text).unwrap();
        assert_eq!(read_config(&path).unwrap(), c);
        assert_eq!(config_of(&path).unwrap(), c);
    }
}
