//! `h5 copy SRC DST` and `h5 repack SRC DST [options]`: [`h5::copy`] with a progress bar
//! (on a terminal, for runs over a second) and a summary line.

use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

use h5::copy::{ChunkShape, CopyOptions, CopyReport, FilterChoice, LayoutChoice, StorageChanges};
use h5::{CreateOptions, FormatBounds};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// What the command line asked for.
pub(crate) struct CopyArgs<'a> {
    pub(crate) src: &'a Path,
    pub(crate) dst: &'a Path,
    /// The destination's format bounds (`None`: the source's, [`h5::copy::source_bounds`]).
    pub(crate) bounds: Option<FormatBounds>,
    pub(crate) options: CopyOptions,
    pub(crate) quiet: bool,
}

/// Runs a copy; the summary line goes to standard output, skipped objects to standard error.
pub(crate) fn run(args: CopyArgs<'_>) -> Result<(), String> {
    let CopyArgs {
        src,
        dst,
        bounds,
        options,
        quiet,
    } = args;
    if let (Ok(a), Ok(b)) = (src.canonicalize(), dst.canonicalize())
        && a == b
    {
        return Err(format!(
            "{} is both the source and the destination",
            src.display()
        ));
    }
    let source = h5::File::open(src).map_err(|e| format!("cannot open {}: {e}", src.display()))?;
    let bounds = match bounds {
        Some(b) => b,
        None => {
            h5::copy::source_bounds(&source)
                .map_err(|e| format!("cannot read {}: {e}", src.display()))?
                .bounds
        }
    };
    let create = CreateOptions {
        bounds,
        ..Default::default()
    };
    let dest = h5::File::create_with(dst, &h5::FileAccess::default(), &create).map_err(|e| {
        // A file truncated before the options were refused is not left behind empty.
        if std::fs::metadata(dst).is_ok_and(|m| m.is_file() && m.len() == 0) {
            let _ = std::fs::remove_file(dst);
        }
        format!("cannot create {}: {e}", dst.display())
    })?;
    let bar = Bar::new(!quiet && std::io::stdout().is_terminal());
    let r = h5::copy::copy_file(&source, &dest, &options, &mut |p| bar.update(p));
    bar.finish();
    let report = match r.map_err(|e| e.to_string()).and_then(|rep| {
        dest.close()
            .map(|()| rep)
            .map_err(|e| format!("cannot write {}: {e}", dst.display()))
    }) {
        Ok(rep) => rep,
        Err(e) => {
            // No half-written output is left behind.
            let _ = std::fs::remove_file(dst);
            return Err(format!("cannot copy {}: {e}", src.display()));
        }
    };
    for s in &report.skipped {
        eprintln!("h5: skipped {}: {}", s.path, s.reason);
    }
    if !quiet {
        println!("{}", summary(&report, src, dst));
    }
    Ok(())
}

fn file_size(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// `copied 9 objects (3 groups, 6 datasets), 1 hard link, 2 soft links, 14 attributes,
/// 1,234 bytes of raw data; a.h5 4,096 bytes -> b.h5 2,048 bytes`.
fn summary(r: &CopyReport, src: &Path, dst: &Path) -> String {
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let datatypes = if r.datatypes > 0 {
        format!(
            ", {}",
            plural(r.datatypes, "committed datatype", "committed datatypes")
        )
    } else {
        String::new()
    };
    let mut s = format!(
        "copied {} ({}, {}{datatypes}), {}, {}, {}, {} bytes of raw data",
        plural(r.objects(), "object", "objects"),
        plural(r.groups, "group", "groups"),
        plural(r.datasets, "dataset", "datasets"),
        plural(r.hard_links, "shared hard link", "shared hard links"),
        plural(r.soft_links, "soft link", "soft links"),
        plural(r.attributes, "attribute", "attributes"),
        crate::thousands(r.bytes),
    );
    if !r.skipped.is_empty() {
        s.push_str(&format!(
            ", {} skipped",
            plural(r.skipped.len(), "object", "objects")
        ));
    }
    s.push_str(&format!(
        "; {} {} bytes -> {} {} bytes",
        src.display(),
        crate::thousands(file_size(src)),
        dst.display(),
        crate::thousands(file_size(dst)),
    ));
    s
}

/// The progress bar: hidden until the copy has run for a second, never shown off a terminal.
struct Bar {
    bar: Option<ProgressBar>,
    start: Instant,
}

impl Bar {
    fn new(enabled: bool) -> Bar {
        let bar = enabled.then(|| {
            let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
            if let Ok(style) = ProgressStyle::with_template(
                "{bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta} {wide_msg}",
            ) {
                b.set_style(style);
            }
            b
        });
        Bar {
            bar,
            start: Instant::now(),
        }
    }

    fn update(&self, p: &h5::copy::Progress) {
        let Some(b) = &self.bar else {
            return;
        };
        if b.is_hidden() && self.start.elapsed() > Duration::from_secs(1) {
            b.set_draw_target(ProgressDrawTarget::stderr());
        }
        b.set_length(p.bytes_total);
        b.set_position(p.bytes_done);
        b.set_message(p.path.clone());
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// A chunk shape: `64x64` or `auto`.
pub(crate) fn parse_chunk(s: &str) -> Result<ChunkShape, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(ChunkShape::Auto);
    }
    let dims: Result<Vec<usize>, _> = s.split(['x', 'X', ',']).map(str::parse).collect();
    match dims {
        Ok(d) if !d.is_empty() && !d.contains(&0) => Ok(ChunkShape::Explicit(d)),
        _ => Err(format!(
            "chunk shape {s:?}: expected dimensions like 64x64 (none zero) or auto"
        )),
    }
}

/// Format bounds by name.
/// `--bounds`: the source's bounds (`None`) or bounds by name.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BoundsArg(pub(crate) Option<FormatBounds>);

/// `--bounds`: `source` (the source's bounds) or a bound by name.
pub(crate) fn parse_bounds(s: &str) -> Result<BoundsArg, String> {
    Ok(BoundsArg(Some(match s.to_ascii_lowercase().as_str() {
        "source" => return Ok(BoundsArg(None)),
        "earliest" => FormatBounds::Earliest,
        "v18" | "v108" => FormatBounds::V18,
        "v110" => FormatBounds::V110,
        "v112" => FormatBounds::V112,
        "v114" => FormatBounds::V114,
        "v200" => FormatBounds::V200,
        "latest" => FormatBounds::LATEST,
        _ => {
            return Err(format!(
                "format bounds {s:?}: expected source, earliest, v18, v110, v112, v114, v200 or \
                 latest"
            ));
        }
    })))
}

/// A filter by registered id with client data: `32015` or `32015:3` or `307:9,1`.
pub(crate) fn parse_filter(s: &str) -> Result<FilterChoice, String> {
    let bad = || format!("filter {s:?}: expected ID or ID:VALUE,VALUE,...");
    let (id, data) = s.split_once(':').unwrap_or((s, ""));
    let id: u16 = id.trim().parse().map_err(|_| bad())?;
    let client_data = data
        .split(',')
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.trim().parse::<u32>().map_err(|_| bad()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(FilterChoice::Raw {
        id,
        client_data,
        optional: false,
    })
}

/// The storage flags of `h5 repack`, for every dataset or one (`--dataset PATH:...`).
#[derive(Default)]
pub(crate) struct StorageFlags {
    pub(crate) chunk: Option<ChunkShape>,
    pub(crate) contiguous: bool,
    pub(crate) compact: bool,
    pub(crate) deflate: Option<u8>,
    pub(crate) shuffle: bool,
    pub(crate) fletcher32: bool,
    pub(crate) no_filters: bool,
    pub(crate) filters: Vec<FilterChoice>,
}

impl StorageFlags {
    /// The changes these flags ask for: any filter flag replaces the whole pipeline (shuffle,
    /// deflate, raw filters, then Fletcher-32).
    pub(crate) fn changes(self) -> Result<StorageChanges, String> {
        let layouts = usize::from(self.chunk.is_some())
            + usize::from(self.contiguous)
            + usize::from(self.compact);
        if layouts > 1 {
            return Err("choose one of --chunk, --contiguous and --compact".into());
        }
        let layout = if let Some(c) = self.chunk {
            Some(LayoutChoice::Chunked(c))
        } else if self.contiguous {
            Some(LayoutChoice::Contiguous)
        } else if self.compact {
            Some(LayoutChoice::Compact)
        } else {
            None
        };
        let any =
            self.deflate.is_some() || self.shuffle || self.fletcher32 || !self.filters.is_empty();
        if any && self.no_filters {
            return Err("--no-filters cannot be combined with other filters".into());
        }
        let filters = if self.no_filters {
            Some(Vec::new())
        } else if any {
            let mut f = Vec::new();
            if self.shuffle {
                f.push(FilterChoice::Shuffle);
            }
            if let Some(l) = self.deflate {
                if l > 9 {
                    return Err(format!("deflate level {l}: expected 0 to 9"));
                }
                f.push(FilterChoice::Deflate(l));
            }
            f.extend(self.filters);
            if self.fletcher32 {
                f.push(FilterChoice::Fletcher32);
            }
            Some(f)
        } else {
            None
        };
        Ok(StorageChanges { layout, filters })
    }
}

/// One `--dataset PATH:SPEC` override: SPEC is a comma-separated list of `chunk=64x64`,
/// `chunk=auto`, `contiguous`, `compact`, `deflate=N`, `shuffle`, `fletcher32`, `no-filters`,
/// `filter=ID:V;V` (the path cannot contain ':').
pub(crate) fn parse_override(s: &str) -> Result<(String, StorageChanges), String> {
    // The first ':' ends the path (a raw filter's own ':' in `filter=32015:3` is the spec's).
    let (path, spec) = s
        .split_once(':')
        .filter(|(p, _)| !p.is_empty())
        .ok_or_else(|| {
            format!("--dataset {s:?}: expected PATH:SPEC, e.g. /x:chunk=64x64,deflate=4")
        })?;
    let mut f = StorageFlags::default();
    for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item.split_once('=').unwrap_or((item, ""));
        match k {
            "chunk" => f.chunk = Some(parse_chunk(v)?),
            "contiguous" => f.contiguous = true,
            "compact" => f.compact = true,
            "deflate" | "gzip" => {
                f.deflate = Some(
                    v.parse()
                        .map_err(|_| format!("--dataset {s:?}: deflate level {v:?}"))?,
                );
            }
            "shuffle" => f.shuffle = true,
            "fletcher32" => f.fletcher32 = true,
            "no-filters" => f.no_filters = true,
            "filter" => f.filters.push(parse_filter(&v.replace(';', ","))?),
            _ => return Err(format!("--dataset {s:?}: unknown setting {k:?}")),
        }
    }
    Ok((path.to_owned(), f.changes()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flags() {
        assert_eq!(
            parse_chunk("64x32").unwrap(),
            ChunkShape::Explicit(vec![64, 32])
        );
        assert_eq!(parse_chunk("auto").unwrap(), ChunkShape::Auto);
        assert!(parse_chunk("0x4").is_err());
        assert!(parse_chunk("ax4").is_err());
        assert_eq!(
            parse_bounds("latest").unwrap().0,
            Some(FormatBounds::LATEST)
        );
        assert_eq!(parse_bounds("Source").unwrap().0, None);
        assert!(parse_bounds("v1.8").is_err());
        assert_eq!(
            parse_filter("307:9").unwrap(),
            FilterChoice::Raw {
                id: 307,
                client_data: vec![9],
                optional: false
            }
        );
        let (p, c) = parse_override("/a/b:chunk=4x4,deflate=3,shuffle").unwrap();
        assert_eq!(p, "/a/b");
        assert_eq!(
            c.layout,
            Some(LayoutChoice::Chunked(ChunkShape::Explicit(vec![4, 4])))
        );
        assert_eq!(
            c.filters,
            Some(vec![FilterChoice::Shuffle, FilterChoice::Deflate(3)])
        );
        let (p, c) = parse_override("/z:contiguous,filter=32015:3").unwrap();
        assert_eq!(p, "/z");
        assert_eq!(c.layout, Some(LayoutChoice::Contiguous));
        assert_eq!(
            c.filters,
            Some(vec![FilterChoice::Raw {
                id: 32015,
                client_data: vec![3],
                optional: false
            }])
        );
        assert!(parse_override("/x:bogus").is_err());
        assert!(parse_override("nopath").is_err());
        let both = StorageFlags {
            contiguous: true,
            chunk: Some(ChunkShape::Auto),
            ..StorageFlags::default()
        };
        assert!(both.changes().is_err());
    }
}
