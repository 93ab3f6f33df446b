//! References in `h5 dump`: the DDL h5dump 1.10 prints for object and dataset region
//! references, a DDL for HDF5 1.12 revised references in the same style (h5dump 1.10 cannot
//! read them; this follows h5dump 1.14 without its file-name prefix and region data), and their
//! JSON form.
//!
//! h5dump 1.10, for a dataset or attribute of references, prints each element on its own line
//! one level below `DATA {` (no index prefix):
//!
//! * object reference: `DATASET 800 "/data"` (`GROUP`, `DATATYPE`: the kind, the object header
//!   address and the path), then the object's data in a `DATA { }` block one level deeper (empty
//!   for groups and datatypes); `NULL` for the null reference;
//! * region reference: `DATASET "/data"` alone for an "all" or "none" selection, otherwise
//!   followed by `{`, the lines `REGION_TYPE BLOCK  (1,1)-(2,2), ...` (or `REGION_TYPE POINT
//!   (0,0), ...`), `DATATYPE  ...` and `DATASPACE  ...` of the dataset one level deeper, and `}`.
//!   The space before `{` is h5dump's: one for a block list, plus one for every element but the
//!   first (so a first point list has none). The block or point list wraps before a line would
//!   pass 76 columns, continuing one space deeper.
//!
//! Inside compounds, arrays and sequences an element prints on one line: `DATASET 800 "/data"`
//! for an object reference, `DATASET "/data"` for a region.

use std::collections::HashMap;

use h5::{Datatype, File, ObjectKind, RefTarget, Selection};
use h5_format::datatype::{ReferenceKind, ReferenceType};
use serde_json::{Value, json};

use super::{Ddl, dataset_values, ddl_type, pad};
use crate::values::{RefVal, Val};

/// Blocks of a hyperslab listed at most (more are summarised).
const MAX_BLOCKS: u64 = 1 << 20;

/// A region's block or point list wraps before a line passes this many columns.
const REGION_LIMIT: usize = 76;

/// Every object reachable from the root by hard links: header address → kind and first path
/// (depth first, links in name order, each group entered once), as references are named.
pub(super) struct Names(HashMap<u64, (ObjectKind, String)>);

impl Names {
    /// Walks `file`.
    pub(super) fn of(file: &File) -> Names {
        let mut out = HashMap::new();
        if let Ok(root) = file.root() {
            out.insert(root.address(), (ObjectKind::Group, "/".to_owned()));
        }
        super::walk_hard_links(file, &mut |path, met| {
            let found = match met {
                super::Met::Group(g) => Some((g.address(), ObjectKind::Group)),
                super::Met::Dataset { parent, name } => parent
                    .dataset(name)
                    .ok()
                    .map(|d| (d.address(), ObjectKind::Dataset)),
                super::Met::Datatype { parent, name } => parent
                    .named_datatype(name)
                    .ok()
                    .map(|t| (t.address(), ObjectKind::Datatype)),
            };
            if let Some((address, kind)) = found {
                out.entry(address).or_insert((kind, path.to_owned()));
            }
        });
        Names(out)
    }

    /// Fills in the target of every reference in `vals` (at any depth).
    pub(super) fn name_all(&self, vals: &mut [Val]) {
        for v in vals {
            match v {
                Val::Ref(r) => {
                    r.target = r
                        .reference
                        .as_ref()
                        .filter(|x| x.file.is_none())
                        .and_then(|x| self.0.get(&x.object).cloned());
                }
                Val::Compound(members) => {
                    for (_, m) in members.iter_mut() {
                        self.name_all(std::slice::from_mut(m));
                    }
                }
                Val::Array(items) | Val::Seq(items) => self.name_all(items),
                _ => {}
            }
        }
    }
}

/// Whether elements of `dt` hold references.
pub(super) fn has_refs(dt: &Datatype) -> bool {
    match dt {
        Datatype::Reference(_) => true,
        Datatype::Compound(c) => c.members.iter().any(|m| has_refs(&m.datatype)),
        Datatype::Array(a) => has_refs(&a.base),
        Datatype::VarLen(v) => has_refs(&v.base),
        _ => false,
    }
}

fn kind_word(k: ObjectKind) -> &'static str {
    match k {
        ObjectKind::Group => "GROUP",
        ObjectKind::Dataset => "DATASET",
        ObjectKind::Datatype => "DATATYPE",
        ObjectKind::Unknown => "UNKNOWN",
    }
}

/// The path a reference's object is printed with (its file first for a reference into another
/// file; the address when no path leads to it).
fn shown_path(r: &RefVal) -> String {
    match (&r.reference, &r.target) {
        (_, Some((_, p))) => p.clone(),
        (Some(x), None) => match &x.file {
            Some(f) => format!("{f}:{:#x}", x.object),
            None => format!("{:#x}", x.object),
        },
        (None, None) => String::new(),
    }
}

fn kind_of(r: &RefVal) -> ObjectKind {
    r.target.as_ref().map_or(ObjectKind::Unknown, |(k, _)| *k)
}

/// One reference element on one line (inside compounds, arrays and sequences).
pub(super) fn inline(rt: Option<&ReferenceType>, r: &RefVal) -> String {
    let Some(x) = &r.reference else {
        return "NULL".to_owned();
    };
    let path = shown_path(r);
    match &x.target {
        RefTarget::Attribute(name) => format!("ATTRIBUTE \"{}\"", super::join(&path, name)),
        RefTarget::Region(_) => format!("DATASET \"{path}\""),
        RefTarget::Object if rt.is_some_and(|t| t.kind == ReferenceKind::Object) => {
            format!("{} {} \"{path}\"", kind_word(kind_of(r)), x.object)
        }
        RefTarget::Object => format!("{} \"{path}\"", kind_word(kind_of(r))),
    }
}

/// The `REGION_TYPE` text of a selection, split in sections where h5dump may break the line
/// (each but the last ending with its comma); `None` for "all" and "none".
fn region_sections(sel: &Selection) -> Option<Vec<String>> {
    let coords = |c: &[u64]| {
        let parts: Vec<String> = c.iter().map(ToString::to_string).collect();
        format!("({})", parts.join(","))
    };
    let (head, items): (&str, Vec<String>) = match sel {
        Selection::All | Selection::None => return None,
        Selection::Points { .. } => (
            "REGION_TYPE POINT  ",
            sel.points().into_iter().map(coords).collect(),
        ),
        Selection::Regular { .. } | Selection::Blocks { .. } => (
            "REGION_TYPE BLOCK  ",
            match sel.block_list(MAX_BLOCKS) {
                Some(b) => b
                    .iter()
                    .map(|(s, e)| format!("{}-{}", coords(s), coords(e)))
                    .collect(),
                None => vec!["(too many blocks to list)".to_owned()],
            },
        ),
    };
    let n = items.len();
    Some(
        items
            .into_iter()
            .enumerate()
            .map(|(i, it)| {
                let comma = if i + 1 < n { "," } else { "" };
                if i == 0 {
                    format!("{head}{it}{comma}")
                } else {
                    format!(" {it}{comma}")
                }
            })
            .collect(),
    )
}

/// Sections laid out on lines starting with `indent`, a new line begun before one would pass
/// [`REGION_LIMIT`] columns.
fn wrap(indent: &str, sections: &[String]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = indent.to_owned();
    for (i, s) in sections.iter().enumerate() {
        if i > 0 && line.len() + s.len() > REGION_LIMIT {
            lines.push(std::mem::replace(&mut line, indent.to_owned()));
        }
        line.push_str(s);
    }
    lines.push(line);
    lines
}

/// The JSON form of a selection's members: `"selection"` (`"all"`, `"none"`, `"points"`,
/// `"hyperslab"`) and `"points"` (coordinates) or `"blocks"` (start and end corners).
fn json_selection(sel: &Selection, out: &mut serde_json::Map<String, Value>) {
    match sel {
        Selection::All => {
            out.insert("selection".into(), json!("all"));
        }
        Selection::None => {
            out.insert("selection".into(), json!("none"));
        }
        Selection::Points { .. } => {
            out.insert("selection".into(), json!("points"));
            out.insert("points".into(), json!(sel.points()));
        }
        Selection::Regular {
            start,
            stride,
            count,
            block,
        } => {
            out.insert("selection".into(), json!("hyperslab"));
            match sel.block_list(MAX_BLOCKS) {
                Some(b) => {
                    out.insert("blocks".into(), json!(b));
                }
                None => {
                    let un = |v: &[u64]| -> Vec<Value> {
                        v.iter()
                            .map(|&x| {
                                if x == u64::MAX {
                                    json!("unlimited")
                                } else {
                                    json!(x)
                                }
                            })
                            .collect()
                    };
                    out.insert(
                        "regular".into(),
                        json!({"start": start, "stride": stride, "count": un(count), "block": un(block)}),
                    );
                }
            }
        }
        Selection::Blocks { .. } => {
            out.insert("selection".into(), json!("hyperslab"));
            let b: Vec<(Vec<u64>, Vec<u64>)> = sel
                .boxes()
                .into_iter()
                .map(|(s, e)| (s.to_vec(), e.to_vec()))
                .collect();
            out.insert("blocks".into(), json!(b));
        }
    }
}

/// A reference element as JSON (see the README's table): `null`, `{"object": path}`,
/// `{"region_of": path, "selection", "points" | "blocks"}` or `{"attribute": name, "of":
/// path}`, with `"file"` for a reference into another file.
pub(super) fn json_ref(r: &RefVal) -> Value {
    let Some(x) = &r.reference else {
        return Value::Null;
    };
    let mut o = serde_json::Map::new();
    let path = shown_path(r);
    match &x.target {
        RefTarget::Object => {
            o.insert("object".into(), json!(path));
        }
        RefTarget::Region(sel) => {
            o.insert("region_of".into(), json!(path));
            json_selection(sel, &mut o);
        }
        RefTarget::Attribute(name) => {
            o.insert("attribute".into(), json!(name));
            o.insert("of".into(), json!(path));
        }
    }
    if let Some(f) = &x.file {
        o.insert("file".into(), json!(f));
    }
    Value::Object(o)
}

impl Ddl<'_> {
    /// Names the references in `vals` (walking the file once, on the first use).
    pub(super) fn name_refs(&mut self, dt: &Datatype, vals: &mut [Val]) {
        if !has_refs(dt) {
            return;
        }
        let file = self.file;
        self.names
            .get_or_insert_with(|| Names::of(file))
            .name_all(vals);
    }

    /// The elements of a dataset or attribute of references, h5dump style (module docs).
    /// `values` are elements `first..` of the dataset or attribute (blocks of a dataset are
    /// printed in several calls).
    pub(super) fn reference_data(
        &mut self,
        level: usize,
        rt: &ReferenceType,
        values: &[Val],
        first: usize,
    ) {
        for (k, v) in values.iter().enumerate() {
            let i = first + k;
            let Val::Ref(r) = v else {
                self.line(level + 1, &super::ddl_value(&Datatype::Reference(*rt), v));
                continue;
            };
            let Some(x) = &r.reference else {
                self.line(level + 1, "NULL");
                continue;
            };
            match &x.target {
                RefTarget::Object => {
                    let old = rt.kind == ReferenceKind::Object;
                    self.line(level + 1, &inline(Some(rt), r));
                    // h5dump 1.10 shows the data of every object an old-style reference names
                    // (an empty block for groups and datatypes); revised ones name datasets
                    // with their data, as h5dump 1.14 does.
                    if old || kind_of(r) == ObjectKind::Dataset {
                        self.line(level + 2, "DATA {");
                        if kind_of(r) == ObjectKind::Dataset {
                            self.target_data(level + 2, x.object, &shown_path(r));
                        }
                        self.line(level + 2, "}");
                    }
                }
                RefTarget::Region(sel) => {
                    let path = shown_path(r);
                    let Some(sections) = region_sections(sel) else {
                        self.line(level + 1, &format!("DATASET \"{path}\""));
                        continue;
                    };
                    let spaces = if rt.kind == ReferenceKind::DatasetRegion {
                        usize::from(i > 0) + usize::from(!matches!(sel, Selection::Points { .. }))
                    } else {
                        1
                    };
                    self.line(
                        level + 1,
                        &format!("DATASET \"{path}\"{}{{", " ".repeat(spaces)),
                    );
                    for l in wrap(&pad(level + 2), &sections) {
                        self.out.push_str(&l);
                        self.out.push('\n');
                    }
                    if let Ok(d) = self.file.dataset(&path) {
                        self.line(
                            level + 2,
                            &format!("DATATYPE  {}", ddl_type(d.dtype(), level + 2)),
                        );
                        let shape = (!d.is_null()).then(|| d.shape());
                        let space = super::dataspace_text(shape.as_deref(), Some(&d.maxshape()));
                        self.line(level + 2, &format!("DATASPACE  {space}"));
                    }
                    self.line(level + 1, "}");
                }
                RefTarget::Attribute(name) => {
                    let path = shown_path(r);
                    self.line(
                        level + 1,
                        &format!("ATTRIBUTE \"{}\" {{", super::join(&path, name)),
                    );
                    match self.file.object_at(x.object) {
                        Ok(o) => {
                            let attrs = match &o {
                                h5::types::Object::Group(g) => g.attrs(),
                                h5::types::Object::Dataset(d) => d.attrs(),
                                h5::types::Object::Datatype(t) => t.attrs(),
                                _ => Ok(Vec::new()),
                            };
                            let a = attrs
                                .ok()
                                .and_then(|v| v.into_iter().find(|a| a.name() == name));
                            match a {
                                Some(a) => self.attribute_contents(level + 2, &a),
                                None => self.line(level + 2, "NULL"),
                            }
                        }
                        Err(e) => self.line(level + 2, &format!("<not read: {e}>")),
                    }
                    self.line(level + 1, "}");
                }
            }
        }
    }

    /// The data lines of the dataset at `address` (named `path`), as under `DATA {`; nothing
    /// for a dataset whose data is being printed already (a reference cycle).
    fn target_data(&mut self, level: usize, address: u64, path: &str) {
        if self.expanding.contains(&address) {
            return;
        }
        let Ok(d) = self.file.dataset(path) else {
            return;
        };
        self.expanding.push(address);
        match dataset_values(&d) {
            Ok(mut vals) => {
                self.name_refs(d.dtype(), &mut vals);
                let dims = if d.is_null() { Vec::new() } else { d.shape() };
                self.data(level, d.dtype(), &dims, &vals, 0, vals.len());
            }
            Err(e) => self.line(level, &format!("<data not read: {e}>")),
        }
        self.expanding.pop();
    }
}
