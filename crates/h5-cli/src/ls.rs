//! `h5 ls`: the tree of a file with kinds, shapes, datatypes, chunking and filters.

use std::fmt::Write as _;

use h5::{Attribute, Dataset, File, Group, LinkKind, ObjectKind};

use crate::dump::join;

/// Listing options.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LsOptions {
    /// Descend into groups.
    pub(crate) recursive: bool,
    /// Also attributes and layout details.
    pub(crate) verbose: bool,
    /// Also each dataset's values, at most this many (`h5 ls --data`).
    pub(crate) data: Option<usize>,
}

fn shape_text(shape: &[usize]) -> String {
    if shape.is_empty() {
        "scalar".to_owned()
    } else {
        format!(
            "{{{}}}",
            shape
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

fn filter_name(id: u16) -> &'static str {
    match id {
        1 => "deflate",
        2 => "shuffle",
        3 => "fletcher32",
        4 => "szip",
        5 => "nbit",
        6 => "scaleoffset",
        307 => "bzip2",
        32000 => "lzf",
        32001 => "blosc",
        32004 => "lz4",
        32008 => "bitshuffle",
        32015 => "zstd",
        _ => "filter",
    }
}

/// One line describing a dataset (after its name).
pub(crate) fn dataset_summary(d: &Dataset) -> String {
    let mut s = format!(
        "dataset {} {}",
        shape_text(&d.shape()),
        d.dtype().describe()
    );
    if let Some(c) = d.chunk() {
        let _ = write!(
            s,
            ", chunks {{{}}}",
            c.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let filters = d.filters();
    if !filters.is_empty() {
        let parts: Vec<String> = filters
            .iter()
            .map(|f| {
                let name = f
                    .name
                    .clone()
                    .unwrap_or_else(|| filter_name(f.id).to_owned());
                if f.params.is_empty() {
                    format!("{name}({})", f.id)
                } else {
                    let p: Vec<String> = f.params.iter().map(ToString::to_string).collect();
                    format!("{name}({}; {})", f.id, p.join(", "))
                }
            })
            .collect();
        let _ = write!(s, ", filters {}", parts.join(" + "));
    }
    s
}

fn attr_lines(out: &mut String, indent: &str, attrs: Result<Vec<Attribute>, h5::Error>) {
    match attrs {
        Err(e) => {
            let _ = writeln!(out, "{indent}  (attributes not read: {e})");
        }
        Ok(attrs) => {
            for a in attrs {
                let _ = writeln!(
                    out,
                    "{indent}  @{} {} {}",
                    a.name(),
                    shape_text(&a.shape()),
                    a.dtype().describe()
                );
            }
        }
    }
}

fn dataset_details(out: &mut String, indent: &str, d: &Dataset) {
    let max: Vec<String> = d
        .maxshape()
        .iter()
        .map(|m| m.map_or_else(|| "unlimited".to_owned(), |v| v.to_string()))
        .collect();
    let _ = writeln!(
        out,
        "{indent}  layout {}, maxshape {{{}}}, {} bytes per element",
        d.layout_name(),
        max.join(", "),
        d.element_size()
    );
    if let Ok(sizes) = d.stored_sizes() {
        let total = sizes.iter().fold(0u64, |a, &b| a.saturating_add(b));
        if d.layout_name() == "chunked" {
            let _ = writeln!(
                out,
                "{indent}  {} chunks allocated, {total} bytes stored",
                sizes.len()
            );
        } else {
            let _ = writeln!(out, "{indent}  {total} bytes stored in the file");
        }
    }
    if let Some(fill) = d.fill_value_raw() {
        let _ = writeln!(out, "{indent}  fill value bytes {}", crate::dump_hex(fill));
    }
}

/// The dataset's values under its line (`--data`).
fn data_lines(out: &mut String, file: &File, depth: usize, d: &Dataset, opts: LsOptions) {
    if let Some(limit) = opts.data {
        out.push_str(&crate::dump::data_preview(file, d, limit, depth + 1));
    }
}

fn list_group(
    out: &mut String,
    file: &File,
    g: &Group,
    depth: usize,
    opts: LsOptions,
    seen: &mut Vec<u64>,
) -> Result<(), String> {
    let links = g.links().map_err(|e| format!("{}: {e}", g.path()))?;
    let indent = "  ".repeat(depth);
    for link in links {
        let path = join(g.path(), &link.name);
        match &link.kind {
            LinkKind::Soft(t) => {
                let _ = writeln!(out, "{indent}{} -> {t}  (soft link)", link.name);
            }
            LinkKind::External { file, path } => {
                let _ = writeln!(
                    out,
                    "{indent}{} -> {file}:{path}  (external link)",
                    link.name
                );
            }
            LinkKind::UserDefined(k) => {
                let _ = writeln!(out, "{indent}{}  (user-defined link, class {k})", link.name);
            }
            LinkKind::Hard => match g.kind_of(&link.name) {
                Ok(ObjectKind::Group) => {
                    let sub = g.group(&link.name).map_err(|e| format!("{path}: {e}"))?;
                    let again = seen.contains(&sub.address());
                    let _ = writeln!(
                        out,
                        "{indent}{}/  group{}",
                        link.name,
                        if again { " (already listed)" } else { "" }
                    );
                    if opts.verbose {
                        attr_lines(out, &indent, sub.attrs());
                    }
                    if opts.recursive && !again {
                        seen.push(sub.address());
                        list_group(out, file, &sub, depth + 1, opts, seen)?;
                    }
                }
                Ok(ObjectKind::Dataset) => match g.dataset(&link.name) {
                    Ok(d) => {
                        let _ = writeln!(out, "{indent}{}  {}", link.name, dataset_summary(&d));
                        if opts.verbose {
                            dataset_details(out, &indent, &d);
                            attr_lines(out, &indent, d.attrs());
                        }
                        data_lines(out, file, depth, &d, opts);
                    }
                    Err(e) => {
                        let _ = writeln!(out, "{indent}{}  dataset (not read: {e})", link.name);
                    }
                },
                Ok(ObjectKind::Datatype) => match g.named_datatype(&link.name) {
                    Ok(t) => {
                        let _ = writeln!(out, "{indent}{}  {}", link.name, named_summary(&t));
                        if opts.verbose {
                            attr_lines(out, &indent, t.attrs());
                        }
                    }
                    Err(e) => {
                        let _ =
                            writeln!(out, "{indent}{}  named datatype (not read: {e})", link.name);
                    }
                },
                Ok(ObjectKind::Unknown) => {
                    let _ = writeln!(out, "{indent}{}  unknown object", link.name);
                }
                Err(e) => {
                    let _ = writeln!(out, "{indent}{}  (not resolved: {e})", link.name);
                }
            },
        }
    }
    Ok(())
}

/// `named datatype TYPE` for a committed datatype.
fn named_summary(t: &h5::NamedDatatype) -> String {
    match t.dtype() {
        Ok(dt) => format!("named datatype {}", dt.describe()),
        Err(e) => format!("named datatype (type not read: {e})"),
    }
}

/// The listing of `path` (the root group when `None`).
pub(crate) fn ls(file: &File, path: Option<&str>, opts: LsOptions) -> Result<String, String> {
    let path = path.unwrap_or("/");
    let root = file.root().map_err(|e| e.to_string())?;
    let mut out = String::new();
    match root.kind_of(path).map_err(|e| format!("{path}: {e}"))? {
        ObjectKind::Group => {
            let g = file.group(path).map_err(|e| format!("{path}: {e}"))?;
            let _ = writeln!(out, "{}  group", g.path());
            if opts.verbose {
                attr_lines(&mut out, "", g.attrs());
            }
            let mut seen = vec![g.address()];
            list_group(&mut out, file, &g, 1, opts, &mut seen)?;
        }
        ObjectKind::Dataset => {
            let d = file.dataset(path).map_err(|e| format!("{path}: {e}"))?;
            let _ = writeln!(out, "{}  {}", d.path(), dataset_summary(&d));
            if opts.verbose {
                dataset_details(&mut out, "", &d);
                attr_lines(&mut out, "", d.attrs());
            }
            data_lines(&mut out, file, 0, &d, opts);
        }
        ObjectKind::Datatype => {
            let t = file
                .root()
                .and_then(|r| r.named_datatype(path))
                .map_err(|e| format!("{path}: {e}"))?;
            let _ = writeln!(out, "{path}  {}", named_summary(&t));
            if opts.verbose {
                attr_lines(&mut out, "", t.attrs());
            }
        }
        ObjectKind::Unknown => {
            let _ = writeln!(out, "{path}  unknown object");
        }
    }
    Ok(out)
}
