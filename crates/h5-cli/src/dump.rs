//! `h5 dump`: h5dump's DDL (same layout, indentation and number formatting, so the two can be
//! diffed) and `h5 dump --json`, a machine-readable description with the data.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use h5::{Attribute, Dataset, Datatype, File, Group, LinkKind, ObjectKind};
use h5_format::datatype::{ByteOrder, Charset, ReferenceKind, StringPadding, VarLenKind};
use serde_json::{Map, Value, json};

use crate::values::{Val, decode_all, is_vlen_string, string_text};

mod refs;

/// Column limit of data lines: an element is appended to a line only while the line, with its
/// trailing comma, stays within this many characters (h5dump's default width of 80 minus the
/// separator and suffix it reserves).
const DATA_LIMIT: usize = 77;

const INDENT: usize = 3;

// ---------------------------------------------------------------------------------------------
// Number and string formatting

/// C's `%g` (precision `prec`), as h5dump prints floating-point values.
pub(crate) fn fmt_g(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan" } else { "nan" }.to_owned();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.to_owned();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let p = prec.max(1);
    let sci = format!("{:.*e}", p - 1, v);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let x: i64 = exp.parse().unwrap_or(0);
    if x < -4 || x >= p as i64 {
        let mant = strip_zeros(mant);
        let sign = if x < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", x.unsigned_abs())
    } else {
        let decimals = usize::try_from(p as i64 - 1 - x).unwrap_or(0);
        strip_zeros(&format!("{v:.decimals$}")).to_owned()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// A string value in h5dump's default quoting (without its `-e`): printable ASCII, quotes,
/// backslashes, tabs, backspaces and form feeds as they are; a line feed or carriage return as
/// it is followed by 11 spaces; other bytes as octal escapes (bytes above 0x7f as the
/// sign-extended value, as h5dump prints them).
fn quote(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() + 2);
    s.push('"');
    for &b in bytes {
        match b {
            b'\n' | b'\r' => {
                s.push(char::from(b));
                s.push_str("           ");
            }
            b'\t' | 0x08 | 0x0c | 0x20..=0x7e => s.push(char::from(b)),
            0x80..=0xff => {
                let _ = write!(s, "\\{:o}", i32::from(b as i8) as u32);
            }
            _ => {
                let _ = write!(s, "\\{b:03o}");
            }
        }
    }
    s.push('"');
    s
}

/// Bytes as h5dump prints a value it shows in hexadecimal (bitfields, opaque data, enumeration
/// values without a name): one byte as `0x2a`, more as `2a:00:01`.
fn hex_bytes(bytes: &[u8]) -> String {
    if let [b] = bytes {
        return format!("0x{b:02x}");
    }
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// `name` with C's escapes for quotes, backslashes, `?` and control characters, and other bytes
/// that are not printable ASCII as three octal digits: how h5dump prints an enumeration value's
/// name among data (the datatype block prints names as they are).
fn c_escaped(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        match b {
            b'\'' => out.push_str("\\'"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'?' => out.push_str("\\?"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x0b => out.push_str("\\v"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out
}

/// An enumeration value that names no member, as h5dump prints it: the bytes of the value at
/// the enumeration's size, in this machine's order (h5dump reads enumerations into the native
/// type).
fn unnamed_enum_value(dt: &Datatype, value: i128) -> String {
    let size = usize::try_from(dt.size()).unwrap_or(16).min(16);
    let le = value.to_le_bytes();
    let mut bytes = le.get(..size).unwrap_or(&le).to_vec();
    if cfg!(target_endian = "big") {
        bytes.reverse();
    }
    hex_bytes(&bytes)
}

/// The DDL text of one element (single line; compounds are printed by [`compound_lines`]).
fn ddl_value(dt: &Datatype, v: &Val) -> String {
    match v {
        Val::Int(i) => i.to_string(),
        Val::Float(f) => fmt_g(*f, 6),
        Val::Complex(r, i) => format!("{}{:+}i", fmt_g(*r, 6), fmt_g(*i, 6)),
        Val::Str(b) => match dt {
            Datatype::String(s) if s.padding == StringPadding::NullTerminate => {
                let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                quote(b.get(..end).unwrap_or(b))
            }
            _ => quote(b),
        },
        Val::NullStr => "NULL".to_owned(),
        Val::Enum(Ok(n)) => c_escaped(n),
        Val::Enum(Err(i)) => unnamed_enum_value(dt, *i),
        Val::Bytes(b) => hex_bytes(b),
        Val::Array(items) => {
            let base = match dt {
                Datatype::Array(a) => a.base.as_ref(),
                _ => dt,
            };
            let parts: Vec<String> = items.iter().map(|x| ddl_value(base, x)).collect();
            format!("[ {} ]", parts.join(", "))
        }
        Val::Compound(members) => {
            let parts: Vec<String> = members
                .iter()
                .map(|(name, x)| {
                    let mdt = match dt {
                        Datatype::Compound(c) => c
                            .members
                            .iter()
                            .find(|m| &m.name == name)
                            .map(|m| &m.datatype),
                        _ => None,
                    };
                    mdt.map_or_else(|| "?".to_owned(), |t| ddl_value(t, x))
                })
                .collect();
            format!("{{ {} }}", parts.join(", "))
        }
        Val::Seq(items) => {
            let base = match dt {
                Datatype::VarLen(v) => v.base.as_ref(),
                _ => dt,
            };
            let parts: Vec<String> = items.iter().map(|x| ddl_value(base, x)).collect();
            format!("({})", parts.join(", "))
        }
        Val::Ref(r) => refs::inline(
            match dt {
                Datatype::Reference(rt) => Some(rt),
                _ => None,
            },
            r,
        ),
        Val::Unsupported(what) => format!("<{what}: not printed>"),
    }
}

// ---------------------------------------------------------------------------------------------
// Datatypes

fn order_tag(order: ByteOrder) -> &'static str {
    match order {
        ByteOrder::BigEndian => "BE",
        _ => "LE",
    }
}

/// The byte order in h5dump's text of a type it has no name for: none for one byte.
fn order_words(size: u32, order: ByteOrder) -> &'static str {
    match (size, order) {
        (0 | 1, _) => "",
        (_, ByteOrder::LittleEndian) => " little-endian",
        (_, ByteOrder::BigEndian) => " big-endian",
        (_, ByteOrder::Vax) => " mixed-endian",
    }
}

fn pad(level: usize) -> String {
    " ".repeat(level * INDENT)
}

/// The datatype as h5dump writes it after `DATATYPE  ` (may span several lines, the following
/// ones indented for nesting `level`).
fn ddl_type(dt: &Datatype, level: usize) -> String {
    match dt {
        Datatype::FixedPoint(t) if t.bit_offset != 0 || u32::from(t.precision) != t.size * 8 => {
            format!(
                "{}-bit{}{} integer {}-bit precision",
                t.size * 8,
                order_words(t.size, t.order),
                if t.signed { "" } else { " unsigned" },
                t.precision
            )
        }
        Datatype::FixedPoint(t) => format!(
            "H5T_STD_{}{}{}",
            if t.signed { 'I' } else { 'U' },
            t.size * 8,
            order_tag(t.order)
        ),
        Datatype::Float(t) => match (t.order, t.ieee_name(), vax_name(t)) {
            (ByteOrder::Vax, _, Some(name)) => name.to_owned(),
            (ByteOrder::Vax, ..) => format!(
                "{}-bit{} floating-point {}-bit precision",
                t.size * 8,
                order_words(t.size, t.order),
                t.precision
            ),
            (_, Some("float32"), _) => format!("H5T_IEEE_F32{}", order_tag(t.order)),
            (_, Some("float64"), _) => format!("H5T_IEEE_F64{}", order_tag(t.order)),
            _ => format!(
                "{}-bit{} floating-point {}-bit precision",
                t.size * 8,
                order_words(t.size, t.order),
                t.precision
            ),
        },
        Datatype::Time(t) => format!("H5T_TIME {}-bit", t.size * 8),
        Datatype::Bitfield(t) => format!("H5T_STD_B{}{}", t.size * 8, order_tag(t.order)),
        Datatype::String(s) => string_block(&s.size.to_string(), s.padding, s.charset, level),
        Datatype::VarLen(v) => match v.kind {
            VarLenKind::String { padding, charset } => {
                string_block("H5T_VARIABLE", padding, charset, level)
            }
            VarLenKind::Sequence => format!("H5T_VLEN {{ {}}}", ddl_type(&v.base, level)),
        },
        Datatype::Opaque(o) => format!(
            "H5T_OPAQUE {{\n{}OPAQUE_TAG \"{}\";\n{}}}",
            pad(level + 1),
            o.tag,
            pad(level)
        ),
        Datatype::Reference(r) => match r.kind {
            ReferenceKind::Object => "H5T_REFERENCE { H5T_STD_REF_OBJECT }".to_owned(),
            ReferenceKind::DatasetRegion => "H5T_REFERENCE { H5T_STD_REF_DSETREG }".to_owned(),
            _ => "H5T_REFERENCE { H5T_STD_REF }".to_owned(),
        },
        Datatype::Compound(c) => {
            let mut s = "H5T_COMPOUND {\n".to_owned();
            for m in &c.members {
                let _ = writeln!(
                    s,
                    "{}{} \"{}\";",
                    pad(level + 1),
                    ddl_type(&m.datatype, level + 1),
                    m.name
                );
            }
            let _ = write!(s, "{}}}", pad(level));
            s
        }
        Datatype::Enum(e) => {
            let mut s = format!(
                "H5T_ENUM {{\n{}{};\n",
                pad(level + 1),
                ddl_type(&e.base, level + 1)
            );
            // In the type's order, as h5dump prints it (libhdf5's member order in the message).
            let members: Vec<_> = e
                .members
                .iter()
                .map(|m| {
                    let v = match decode_all(&e.base, &m.value, None, None).first() {
                        Some(Val::Int(i)) => i.to_string(),
                        _ => hex_bytes(&m.value),
                    };
                    (m.name.clone(), v)
                })
                .collect();
            for (name, v) in members {
                let q = format!("\"{name}\"");
                // h5dump pads the name to 16 characters, then one space.
                let _ = writeln!(s, "{}{q:<18} {v};", pad(level + 1));
            }
            let _ = write!(s, "{}}}", pad(level));
            s
        }
        Datatype::Array(a) => {
            let dims: String = a.dims.iter().map(|d| format!("[{d}]")).collect();
            format!("H5T_ARRAY {{ {dims} {} }}", ddl_type(&a.base, level))
        }
        Datatype::Complex(c) => format!("H5T_COMPLEX {{ {} }}", ddl_type(&c.base, level)),
    }
}

/// libhdf5's name of a VAX float type equal to one of its predefined ones (`H5T_VAX_F32`, the
/// VAX F format; `H5T_VAX_F64`, the G format), as h5dump prints it.
fn vax_name(t: &h5_format::datatype::FloatType) -> Option<&'static str> {
    use h5_format::datatype::Normalization;
    // (size, sign, exponent at, exponent bits, mantissa bits, bias)
    let fields = (
        t.size,
        t.sign_location,
        t.exponent_location,
        t.exponent_size,
        t.mantissa_size,
        t.exponent_bias,
    );
    let plain = t.bit_offset == 0
        && u32::from(t.precision) == t.size * 8
        && t.mantissa_location == 0
        && t.normalization == Normalization::Implied
        && !(t.lo_pad || t.hi_pad || t.internal_pad);
    match fields {
        (4, 31, 23, 8, 23, 129) if plain => Some("H5T_VAX_F32"),
        (8, 63, 52, 11, 52, 1025) if plain => Some("H5T_VAX_F64"),
        _ => None,
    }
}

fn string_block(size: &str, padding: StringPadding, charset: Charset, level: usize) -> String {
    let p = pad(level + 1);
    format!(
        "H5T_STRING {{\n{p}STRSIZE {size};\n{p}STRPAD {};\n{p}CSET {};\n{p}CTYPE H5T_C_S1;\n{}}}",
        match padding {
            StringPadding::NullTerminate => "H5T_STR_NULLTERM",
            StringPadding::NullPad => "H5T_STR_NULLPAD",
            StringPadding::SpacePad => "H5T_STR_SPACEPAD",
        },
        match charset {
            Charset::Ascii => "H5T_CSET_ASCII",
            Charset::Utf8 => "H5T_CSET_UTF8",
        },
        pad(level)
    )
}

// ---------------------------------------------------------------------------------------------
// The DDL printer

/// What to print for one dataset or attribute: its type, extent and elements.
struct Contents<'a> {
    dtype: &'a Datatype,
    /// The committed datatype the type is (its relative address), if any.
    committed: Option<u64>,
    /// `None`: a null dataspace.
    shape: Option<Vec<usize>>,
    maxshape: Option<Vec<Option<usize>>>,
    /// `None`: no DATA block (`-H`, or a dataset under `-A`).
    values: Option<Result<Vec<Val>, String>>,
}

/// What `h5 dump` prints (h5dump's options).
#[derive(Clone, Debug, Default)]
pub(crate) struct DumpOptions {
    /// `-H`: types and shapes, no data at all.
    pub(crate) header_only: bool,
    /// `-A`: attributes with their values, datasets without their data.
    pub(crate) attrs_only: bool,
    /// `-p`: each dataset's storage layout, filters and fill value.
    pub(crate) properties: bool,
    /// `-s`/`-S`/`-c`: the part of each dataset to print (h5dump's subsetting).
    pub(crate) subset: Option<Subset>,
}

/// A hyperslab of a dataset (h5dump's `-s START -S STRIDE -c COUNT`; blocks of one element).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Subset {
    /// First element per dimension (default 0).
    pub(crate) start: Vec<u64>,
    /// Step per dimension (default 1).
    pub(crate) stride: Vec<u64>,
    /// Elements per dimension (default: as many as fit).
    pub(crate) count: Vec<u64>,
}

/// A resolved subset: start, stride and count per dimension.
type Slab = (Vec<u64>, Vec<u64>, Vec<u64>);

impl Subset {
    /// The subset of a dataset of `dims`: missing values take the defaults; checked to fit.
    fn resolve(&self, dims: &[usize]) -> Result<Slab, String> {
        let rank = dims.len();
        if self.start.len() > rank || self.stride.len() > rank || self.count.len() > rank {
            return Err(format!(
                "a subset of more than the dataset's {rank} dimensions"
            ));
        }
        let mut start = vec![0u64; rank];
        let mut stride = vec![1u64; rank];
        let mut count = vec![0u64; rank];
        for d in 0..rank {
            start[d] = self.start.get(d).copied().unwrap_or(0);
            stride[d] = self.stride.get(d).copied().unwrap_or(1).max(1);
            let n = dims[d] as u64;
            let room = if start[d] < n {
                (n - start[d]).div_ceil(stride[d])
            } else {
                0
            };
            count[d] = self.count.get(d).copied().unwrap_or(room);
            if count[d] > room {
                return Err(format!(
                    "the subset's dimension {d} (start {}, stride {}, count {}) leaves the \
                     dataset's {n} elements",
                    start[d], stride[d], count[d]
                ));
            }
        }
        Ok((start, stride, count))
    }
}

/// Bytes of one dataset read at a time while printing it: large datasets stream through in
/// blocks of whole rows instead of being read whole.
const BLOCK_BYTES: usize = 4 << 20;

struct Ddl<'f> {
    out: String,
    /// Where `out` goes as it fills (`None`: kept in `out`).
    sink: Option<&'f mut dyn std::io::Write>,
    /// The first write error to the sink.
    sink_error: Option<std::io::Error>,
    options: DumpOptions,
    /// While a subset is printed: its start and stride, for the element indices.
    subset_at: Option<(Vec<u64>, Vec<u64>)>,
    file: &'f File,
    /// (file number, object address) → first path printed.
    seen: HashMap<(usize, u64), String>,
    /// The directory external links resolve against.
    dir: Option<std::path::PathBuf>,
    /// Files opened through external links, by name, with their numbers (from 1).
    external: HashMap<String, (usize, File)>,
    /// The number of the file being printed (0: the main file).
    current: usize,
    /// Committed datatypes of the main file: relative address → first path (depth first by
    /// name), as h5dump names them in `DATATYPE  "/path"`.
    named: HashMap<u64, String>,
    /// Committed datatypes of the main file that datasets use but no link names: (relative
    /// address, the type), printed at the root as `DATATYPE "#addr"` and named `"/#addr"` in
    /// `named`, as h5dump does.
    anonymous: Vec<(u64, Datatype)>,
    /// Every object's kind and first path, for naming references (built on first use).
    names: Option<refs::Names>,
    /// Datasets whose data is being printed as the target of an object reference.
    expanding: Vec<u64>,
    /// How many parts could not be read (each printed as `<... not read: ...>`).
    not_read: usize,
}

impl Ddl<'_> {
    fn line(&mut self, level: usize, text: &str) {
        let _ = writeln!(self.out, "{}{text}", pad(level));
    }

    /// A part that could not be read, printed in its place (`text`: `<... not read: ...>`)
    /// and counted: the dump then ends with an error status, as h5dump's does.
    fn not_read(&mut self, level: usize, text: &str) {
        self.not_read += 1;
        self.line(level, text);
    }

    /// Hands what was printed so far to the sink, if there is one.
    fn flush_out(&mut self) {
        if let Some(sink) = self.sink.as_mut() {
            if self.sink_error.is_none()
                && let Err(e) = sink.write_all(self.out.as_bytes())
            {
                self.sink_error = Some(e);
            }
            self.out.clear();
        }
    }

    fn contents(&mut self, level: usize, c: &Contents<'_>) {
        self.header(level, c);
        if let Some(values) = &c.values {
            self.line(level, "DATA {");
            match values {
                Err(e) => self.not_read(level, &format!("<data not read: {e}>")),
                Ok(values) => {
                    let dims = c.shape.clone().unwrap_or_default();
                    self.data(level, c.dtype, &dims, values, 0, values.len());
                }
            }
            self.line(level, "}");
        }
    }

    /// The DATATYPE and DATASPACE lines (a committed datatype shown by its path).
    fn header(&mut self, level: usize, c: &Contents<'_>) {
        let named = c
            .committed
            .filter(|_| self.current == 0)
            .and_then(|a| self.named.get(&a));
        let t = match named {
            Some(path) => format!("\"{path}\""),
            None => ddl_type(c.dtype, level),
        };
        self.line(level, &format!("DATATYPE  {t}"));
        let space = dataspace_text(c.shape.as_deref(), c.maxshape.as_deref());
        self.line(level, &format!("DATASPACE  {space}"));
    }

    /// The elements, h5dump style: a new line at each row of the fastest dimension and when
    /// the line would pass the width, each line starting with the index of its first element.
    /// `values` are elements `first..` of `total` (C order over `dims`): a block of whole rows
    /// of a dataset printed in several calls.
    fn data(
        &mut self,
        level: usize,
        dt: &Datatype,
        dims: &[usize],
        values: &[Val],
        first: usize,
        total: usize,
    ) {
        if let Datatype::Reference(rt) = dt {
            self.reference_data(level, rt, values, first);
            return;
        }
        if matches!(dt, Datatype::Compound(_)) || sequence_of_compounds(dt) || breaks_rows(dt) {
            self.multiline_data(level, dt, dims, values, first, total);
            return;
        }
        let row = dims.last().copied().unwrap_or(1).max(1);
        let indent = pad(level);
        let mut line = String::new();
        let n = values.len();
        for (k, v) in values.iter().enumerate() {
            let i = first + k;
            let text = ddl_value(dt, v);
            let starts_row = i.is_multiple_of(row);
            // The trailing comma of every element but the last counts against the width.
            let comma = usize::from(i + 1 < total);
            if !line.is_empty() && (starts_row || line.len() + 2 + text.len() + comma > DATA_LIMIT)
            {
                line.push(',');
                self.out.push_str(&line);
                self.out.push('\n');
                line.clear();
            }
            if line.is_empty() {
                line = format!("{indent}({}): {}", self.index_text(i, dims), text);
            } else {
                line.push_str(", ");
                line.push_str(&text);
            }
            if k + 1 == n {
                // A block ends at a row's end: the next block starts a new line.
                if i + 1 < total {
                    line.push(',');
                }
                self.out.push_str(&line);
                self.out.push('\n');
            }
        }
    }

    /// The index printed before element `i` of `dims`: in the dataset's coordinates when a
    /// subset is printed.
    fn index_text(&self, i: usize, dims: &[usize]) -> String {
        match &self.subset_at {
            Some((start, stride)) => index_in(i, dims, start, stride),
            None => index_of(i, dims),
        }
    }

    /// Elements h5dump prints over several lines, each starting a line of its own after its
    /// index: compounds (a member per line) and the array types of [`breaks_rows`] (rows, or
    /// compound elements, on lines two levels in).
    fn multiline_data(
        &mut self,
        level: usize,
        dt: &Datatype,
        dims: &[usize],
        values: &[Val],
        first: usize,
        total: usize,
    ) {
        let row = dims.last().copied().unwrap_or(1).max(1);
        // h5dump's column: every byte since the line began, the elements' own line breaks and
        // indentation included (so a short element can follow a multi-line one on its last line).
        let mut column = 0;
        for (k, v) in values.iter().enumerate() {
            let i = first + k;
            let text = if breaks_rows(dt) {
                array_rows(dt, v, level + 2)
            } else {
                multiline_value(level, dt, v)
            };
            let comma = usize::from(i + 1 < total);
            if k == 0 || i.is_multiple_of(row) || column + 2 + text.len() + comma > DATA_LIMIT {
                if k > 0 {
                    self.out.push('\n');
                }
                let prefix = format!("{}({}): ", pad(level), self.index_text(i, dims));
                self.out.push_str(&prefix);
                column = prefix.len() + text.len();
            } else {
                self.out.push(' ');
                column += 2 + text.len();
            }
            self.out.push_str(&text);
            if comma == 1 {
                self.out.push(',');
            }
        }
        if !values.is_empty() {
            self.out.push('\n');
        }
    }

    fn attributes(&mut self, level: usize, attrs: Result<Vec<Attribute>, h5::Error>) {
        match attrs {
            Err(e) => self.not_read(level, &format!("<attributes not read: {e}>")),
            Ok(attrs) => {
                for a in attrs {
                    self.line(level, &format!("ATTRIBUTE \"{}\" {{", a.name()));
                    self.attribute_contents(level + 1, &a);
                    self.line(level, "}");
                }
            }
        }
    }

    /// An attribute's type, dataspace and data.
    fn attribute_contents(&mut self, level: usize, a: &Attribute) {
        let null = a.is_null();
        let shape = (!null).then(|| a.shape());
        let vstr = if is_vlen_string(a.dtype()) {
            a.read_strings().map(Some).map_err(|e| e.to_string())
        } else {
            Ok(None)
        };
        let heap = a.global_heap();
        let mut values = vstr.map(|v| decode_all(a.dtype(), &a.read_raw(), v, Some(&heap)));
        if let Ok(v) = &mut values {
            self.name_refs(a.dtype(), v);
        }
        let c = Contents {
            dtype: a.dtype(),
            committed: a.committed_type_address(),
            shape,
            maxshape: None,
            values: (!self.options.header_only).then_some(values),
        };
        self.contents(level, &c);
    }

    fn dataset(&mut self, level: usize, name: &str, d: &Dataset) {
        self.line(level, &format!("DATASET \"{name}\" {{"));
        if let Some(first) = self.seen.get(&(self.current, d.address())) {
            let first = first.clone();
            self.line(level + 1, &format!("HARDLINK \"{first}\""));
            self.line(level, "}");
            return;
        }
        // h5dump prints a dataset's comment at the level of its DATASET line.
        self.comment(level, d);
        self.seen
            .insert((self.current, d.address()), d.path().to_owned());
        let null = is_null(d);
        let c = Contents {
            dtype: d.dtype(),
            committed: d.committed_type_address(),
            shape: (!null).then(|| d.shape()),
            maxshape: Some(d.maxshape()),
            values: None,
        };
        self.header(level + 1, &c);
        if self.options.properties {
            self.properties(level + 1, d);
        }
        if !self.options.header_only && !self.options.attrs_only {
            match self.options.subset.clone() {
                Some(sub) if !null => self.subset(level + 1, d, &sub),
                _ => {
                    self.line(level + 1, "DATA {");
                    self.dataset_data(level + 1, d, None);
                    self.line(level + 1, "}");
                }
            }
        }
        self.attributes(level + 1, d.attrs());
        self.line(level, "}");
        self.flush_out();
    }

    /// h5dump's SUBSET block: the selection, then its elements indexed by their coordinates in
    /// the dataset.
    fn subset(&mut self, level: usize, d: &Dataset, sub: &Subset) {
        let (start, stride, count) = match sub.resolve(&d.shape()) {
            Ok(r) => r,
            Err(e) => {
                self.line(level, &format!("<subset not printed: {e}>"));
                return;
            }
        };
        let list = |v: &[u64]| {
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        self.line(level, "SUBSET {");
        self.line(level + 1, &format!("START ( {} );", list(&start)));
        self.line(level + 1, &format!("STRIDE ( {} );", list(&stride)));
        self.line(level + 1, &format!("COUNT ( {} );", list(&count)));
        self.line(
            level + 1,
            &format!("BLOCK ( {} );", list(&vec![1; start.len()])),
        );
        self.line(level + 1, "DATA {");
        self.subset_at = Some((start.clone(), stride.clone()));
        self.dataset_data(level + 1, d, Some((start, stride, count)));
        self.subset_at = None;
        self.line(level + 1, "}");
        self.line(level, "}");
    }

    /// The elements of `d` (or of the hyperslab `sel`: start, stride, count), read and printed
    /// in blocks of whole rows of at most [`BLOCK_BYTES`], each handed to the sink before the
    /// next is read.
    fn dataset_data(&mut self, level: usize, d: &Dataset, sel: Option<Slab>) {
        if d.is_null() {
            return;
        }
        let Ok(mut blocks) = DataBlocks::new(d, sel, BLOCK_BYTES) else {
            self.not_read(level, "<data not read: more elements than can be counted>");
            return;
        };
        while let Some(block) = blocks.next_block() {
            match block {
                Ok((first, mut values)) => {
                    self.name_refs(d.dtype(), &mut values);
                    self.data(level, d.dtype(), &blocks.dims, &values, first, blocks.total);
                }
                Err(e) => {
                    self.not_read(level, &format!("<data not read: {e}>"));
                    return;
                }
            }
            self.flush_out();
        }
    }

    /// h5dump's `-p` blocks: storage layout, filters, fill value.
    fn properties(&mut self, level: usize, d: &Dataset) {
        self.line(level, "STORAGE_LAYOUT {");
        let stored: u64 = d.stored_sizes().map(|s| s.iter().sum()).unwrap_or(0);
        match d.chunk() {
            Some(c) => {
                let c: Vec<String> = c.iter().map(ToString::to_string).collect();
                self.line(level + 1, &format!("CHUNKED ( {} )", c.join(", ")));
            }
            None => self.line(level + 1, &d.layout_name().to_uppercase()),
        }
        let raw = (d.size() as u64).saturating_mul(d.element_size() as u64);
        if d.filters().is_empty() || stored == 0 {
            self.line(level + 1, &format!("SIZE {stored}"));
        } else {
            let ratio = raw as f64 / stored as f64;
            self.line(
                level + 1,
                &format!("SIZE {stored} ({ratio:.3}:1 COMPRESSION)"),
            );
        }
        self.line(level, "}");
        self.line(level, "FILTERS {");
        let filters = d.filters();
        if filters.is_empty() {
            self.line(level + 1, "NONE");
        }
        for f in filters {
            match (f.id, f.params.first()) {
                (1, Some(l)) => {
                    self.line(level + 1, &format!("COMPRESSION DEFLATE {{ LEVEL {l} }}"))
                }
                (2, _) => self.line(level + 1, "PREPROCESSING SHUFFLE"),
                (3, _) => self.line(level + 1, "CHECKSUM FLETCHER32"),
                _ => {
                    self.line(level + 1, "USER_DEFINED_FILTER {");
                    self.line(level + 2, &format!("FILTER_ID {}", f.id));
                    if let Some(n) = &f.name {
                        self.line(level + 2, &format!("COMMENT {n}"));
                    }
                    if !f.params.is_empty() {
                        let p: Vec<String> = f.params.iter().map(ToString::to_string).collect();
                        self.line(level + 2, &format!("PARAMS {{ {} }}", p.join(" ")));
                    }
                    self.line(level + 1, "}");
                }
            }
        }
        self.line(level, "}");
        self.line(level, "FILLVALUE {");
        match d.fill_value_raw() {
            Some(f) => self.line(level + 1, &format!("VALUE  0x{}", crate::dump_hex(f))),
            None => self.line(level + 1, "VALUE  H5D_FILL_VALUE_DEFAULT"),
        }
        self.line(level, "}");
    }

    fn group(&mut self, level: usize, name: &str, g: &Group) {
        self.line(level, &format!("GROUP \"{name}\" {{"));
        if name == "/" && self.current == 0 {
            self.anonymous_types(level + 1);
        }
        self.comment(level + 1, g);
        if let Some(first) = self.seen.get(&(self.current, g.address())) {
            let first = first.clone();
            self.line(level + 1, &format!("HARDLINK \"{first}\""));
            self.line(level, "}");
            return;
        }
        self.seen
            .insert((self.current, g.address()), g.path().to_owned());
        self.attributes(level + 1, g.attrs());
        self.members(level + 1, g);
        self.line(level, "}");
    }

    /// The object's `COMMENT` line, as h5dump prints it (the text as it is), if it has one.
    fn comment(&mut self, level: usize, object: &h5::Location) {
        match object.comment() {
            Ok(Some(c)) => self.line(level, &format!("COMMENT \"{c}\"")),
            Ok(None) => {}
            Err(e) => self.not_read(level, &format!("<comment not read: {e}>")),
        }
    }

    fn members(&mut self, level: usize, g: &Group) {
        let links = match g.links() {
            Ok(l) => l,
            Err(e) => {
                self.not_read(level, &format!("<links not read: {e}>"));
                return;
            }
        };
        for link in links {
            match &link.kind {
                LinkKind::Soft(target) => {
                    self.line(level, &format!("SOFTLINK \"{}\" {{", link.name));
                    self.line(level + 1, &format!("LINKTARGET \"{target}\""));
                    self.line(level, "}");
                }
                LinkKind::External { file, path } => {
                    self.line(level, &format!("EXTERNAL_LINK \"{}\" {{", link.name));
                    self.line(level + 1, &format!("TARGETFILE \"{file}\""));
                    self.line(level + 1, &format!("TARGETPATH \"{path}\""));
                    self.external_target(level + 2, file, path);
                    self.line(level, "}");
                }
                LinkKind::UserDefined(k) => {
                    self.line(level, &format!("USERDEFINED_LINK \"{}\" {{", link.name));
                    self.line(level + 1, &format!("LINKCLASS {k}"));
                    self.line(level, "}");
                }
                LinkKind::Hard => self.hard_member(level, g, &link.name),
            }
        }
    }

    fn hard_member(&mut self, level: usize, g: &Group, name: &str) {
        match g.kind_of(name) {
            Ok(ObjectKind::Group) => match g.group(name) {
                Ok(sub) => self.group(level, name, &sub),
                Err(e) => self.not_read(level, &format!("<group {name:?} not read: {e}>")),
            },
            Ok(ObjectKind::Dataset) => match g.dataset(name) {
                Ok(d) => self.dataset(level, name, &d),
                Err(e) => self.not_read(level, &format!("<dataset {name:?} not read: {e}>")),
            },
            Ok(ObjectKind::Datatype) => match g.named_datatype(name) {
                Ok(t) => self.named_datatype(level, name, &t),
                Err(e) => self.not_read(level, &format!("<datatype {name:?} not read: {e}>")),
            },
            Ok(ObjectKind::Unknown) => self.line(level, &format!("<{name:?}: unknown object>")),
            Err(e) => self.not_read(level, &format!("<{name:?} not read: {e}>")),
        }
    }

    fn file(&self) -> &File {
        self.file
    }

    /// A committed datatype as h5dump prints it: `DATATYPE "name" TYPE` (`;` after every type
    /// but a compound), then its attributes one level deeper.
    fn named_datatype(&mut self, level: usize, name: &str, t: &h5::NamedDatatype) {
        // A datatype met again through another hard link: one line, as h5dump prints it.
        let key = (self.current, t.address());
        if let Some(first) = self.seen.get(&key) {
            let line = format!("DATATYPE \"{name}\" HARDLINK \"{first}\"");
            self.line(level, &line);
            return;
        }
        self.seen.insert(key, t.path().to_owned());
        match t.dtype() {
            Ok(dt) => {
                let semi = if matches!(dt, Datatype::Compound(_)) {
                    ""
                } else {
                    ";"
                };
                self.line(
                    level,
                    &format!("DATATYPE \"{name}\" {}{semi}", ddl_type(&dt, level)),
                );
            }
            Err(e) => self.not_read(level, &format!("<datatype {name:?} not read: {e}>")),
        }
        self.attributes(level + 1, t.attrs());
    }

    /// The anonymous committed datatypes, as h5dump prints them first in the root group:
    /// `DATATYPE "#addr"` and the type.
    fn anonymous_types(&mut self, level: usize) {
        let lines: Vec<String> = self
            .anonymous
            .iter()
            .map(|(a, dt)| {
                let semi = if matches!(dt, Datatype::Compound(_)) {
                    ""
                } else {
                    ";"
                };
                format!("DATATYPE \"#{a}\" {}{semi}", ddl_type(dt, level))
            })
            .collect();
        for l in lines {
            self.line(level, &l);
        }
    }

    /// The object an external link leads to, printed under its path as h5dump does (nothing
    /// when the file or the object cannot be opened).
    fn external_target(&mut self, level: usize, name: &str, path: &str) {
        if !self.external.contains_key(name) {
            let full = match &self.dir {
                Some(d) => d.join(name),
                None => std::path::PathBuf::from(name),
            };
            let Ok(f) = File::open(&full) else {
                return;
            };
            let n = self.external.len() + 1;
            self.external.insert(name.to_owned(), (n, f));
        }
        let Some((n, f)) = self.external.get(name).map(|(n, f)| (*n, f.clone())) else {
            return;
        };
        let Ok(root) = f.root() else {
            return;
        };
        let saved = self.current;
        self.current = n;
        match root.kind_of(path) {
            Ok(ObjectKind::Group) => {
                if let Ok(g) = f.group(path) {
                    self.group(level, path, &g);
                }
            }
            Ok(ObjectKind::Dataset) => {
                if let Ok(d) = f.dataset(path) {
                    self.dataset(level, path, &d);
                }
            }
            _ => {}
        }
        self.current = saved;
    }
}

/// Whether `dt` is a variable-length sequence whose elements (through nested sequences) are
/// compounds: h5dump prints each element on its own line then, its compounds member by member.
fn sequence_of_compounds(dt: &Datatype) -> bool {
    match dt {
        Datatype::VarLen(v) if matches!(v.kind, VarLenKind::Sequence) => {
            matches!(*v.base, Datatype::Compound(_)) || sequence_of_compounds(&v.base)
        }
        _ => false,
    }
}

/// The DDL text of an element of a compound (member by member, each on its own line at
/// `level + 2`, the closing brace at `level + 1`) or of a sequence of compounds (`(` the
/// compounds one level deeper `)`); any other element on one line.
/// Whether h5dump prints an element of `dt` on several lines: an array type of two or more
/// dimensions (a line per row) or of compounds (a line per member).
fn breaks_rows(dt: &Datatype) -> bool {
    matches!(dt, Datatype::Array(a)
        if a.dims.len() >= 2 || matches!(*a.base, Datatype::Compound(_)))
}

/// An array element of `dt` as h5dump prints it over several lines: a line break and the
/// indentation of level `cont` after each row of its last dimension (h5dump's
/// `arr_linebreak`), compound elements closing at that level with their members one level in;
/// an element of another type as [`ddl_value`] prints it.
fn array_rows(dt: &Datatype, v: &Val, cont: usize) -> String {
    let (Datatype::Array(a), Val::Array(items)) = (dt, v) else {
        return ddl_value(dt, v);
    };
    let row = a
        .dims
        .last()
        .and_then(|&d| usize::try_from(d).ok())
        .unwrap_or(1)
        .max(1);
    let mut out = String::from("[ ");
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            if i.is_multiple_of(row) {
                out.push_str(",\n");
                out.push_str(&pad(cont));
            } else {
                out.push_str(", ");
            }
        }
        match *a.base {
            Datatype::Compound(_) => {
                out.push_str(&multiline_value(cont.saturating_sub(1), &a.base, x));
            }
            _ => out.push_str(&ddl_value(&a.base, x)),
        }
    }
    out.push_str(" ]");
    out
}

fn multiline_value(level: usize, dt: &Datatype, v: &Val) -> String {
    match (dt, v) {
        (Datatype::Compound(c), Val::Compound(members)) => {
            let mut out = "{\n".to_owned();
            let k = members.len();
            for (j, ((_, mv), m)) in members.iter().zip(&c.members).enumerate() {
                out.push_str(&pad(level + 2));
                if matches!(m.datatype, Datatype::Compound(_)) || sequence_of_compounds(&m.datatype)
                {
                    out.push_str(&multiline_value(level + 1, &m.datatype, mv));
                } else if breaks_rows(&m.datatype) {
                    out.push_str(&array_rows(&m.datatype, mv, level + 3));
                } else {
                    out.push_str(&ddl_value(&m.datatype, mv));
                }
                if j + 1 < k {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(&format!("{}}}", pad(level + 1)));
            out
        }
        (Datatype::VarLen(s), Val::Seq(items)) if sequence_of_compounds(dt) => {
            let parts: Vec<String> = items
                .iter()
                .map(|x| match *s.base {
                    Datatype::Compound(_) => multiline_value(level + 1, &s.base, x),
                    _ => multiline_value(level, &s.base, x),
                })
                .collect();
            format!("({})", parts.join(", "))
        }
        _ => ddl_value(dt, v),
    }
}

/// An object [`walk_hard_links`] meets. Datasets and committed datatypes are not opened by
/// the walk: a caller that needs one opens it (`parent.dataset(name)`).
pub(crate) enum Met<'a> {
    /// A group (entered after this call, unless it was entered through another link).
    Group(&'a Group),
    /// The dataset `name` of `parent`.
    Dataset {
        /// The group holding the link.
        parent: &'a Group,
        /// The link's name.
        name: &'a str,
    },
    /// The committed datatype `name` of `parent`.
    Datatype {
        /// The group holding the link.
        parent: &'a Group,
        /// The link's name.
        name: &'a str,
    },
}

/// Calls `f(path, object)` for every object reachable from the root of `file` by hard links,
/// depth first in link-name order (h5dump's order); a group met again through another link is
/// reported but not entered again. Groups that cannot be opened are skipped.
pub(crate) fn walk_hard_links(file: &File, f: &mut dyn FnMut(&str, Met<'_>)) {
    fn visit(g: &Group, f: &mut dyn FnMut(&str, Met<'_>), groups: &mut HashSet<u64>) {
        if !groups.insert(g.address()) {
            return;
        }
        let Ok(links) = g.links() else { return };
        for link in links {
            if !matches!(link.kind, LinkKind::Hard) {
                continue;
            }
            let path = join(g.path(), &link.name);
            let name = link.name.as_str();
            match g.kind_of(name) {
                Ok(ObjectKind::Group) => {
                    if let Ok(sub) = g.group(name) {
                        f(&path, Met::Group(&sub));
                        visit(&sub, f, groups);
                    }
                }
                Ok(ObjectKind::Dataset) => f(&path, Met::Dataset { parent: g, name }),
                Ok(ObjectKind::Datatype) => f(&path, Met::Datatype { parent: g, name }),
                _ => {}
            }
        }
    }
    if let Ok(root) = file.root() {
        visit(&root, f, &mut HashSet::new());
    }
}

/// Every committed datatype reachable from the root by hard links: relative address → first
/// path, depth first in link-name order.
pub(crate) fn named_types(file: &File) -> HashMap<u64, String> {
    let mut out = HashMap::new();
    walk_hard_links(file, &mut |path, met| {
        if let Met::Datatype { parent, name } = met
            && let Ok(t) = parent.named_datatype(name)
        {
            out.entry(t.address()).or_insert_with(|| path.to_owned());
        }
    });
    out
}

/// The committed datatypes of `file`, in one walk: those hard links name ([`named_types`]),
/// and those datasets use but no link names (h5dump's anonymous types: relative address and
/// the type, in the order h5dump meets their first dataset, depth first by link name).
pub(crate) fn committed_types(file: &File) -> (HashMap<u64, String>, Vec<(u64, Datatype)>) {
    let mut named = HashMap::new();
    let mut used: Vec<(u64, Datatype)> = Vec::new();
    walk_hard_links(file, &mut |path, met| match met {
        Met::Datatype { parent, name } => {
            if let Ok(t) = parent.named_datatype(name) {
                named.entry(t.address()).or_insert_with(|| path.to_owned());
            }
        }
        Met::Dataset { parent, name } => {
            if let Ok(d) = parent.dataset(name)
                && let Some(a) = d.committed_type_address()
                && !used.iter().any(|(b, _)| *b == a)
            {
                used.push((a, d.dtype().clone()));
            }
        }
        Met::Group(_) => {}
    });
    used.retain(|(a, _)| !named.contains_key(a));
    (named, used)
}

/// `SIMPLE { ( dims ) / ( max ) }`, `SCALAR` or `NULL` (`shape` `None`), as after `DATASPACE  `.
fn dataspace_text(shape: Option<&[usize]>, maxshape: Option<&[Option<usize>]>) -> String {
    match shape {
        None => "NULL".to_owned(),
        Some([]) => "SCALAR".to_owned(),
        Some(s) => {
            let dims: Vec<String> = s.iter().map(ToString::to_string).collect();
            let max: Vec<String> = match maxshape {
                Some(m) => m
                    .iter()
                    .map(|d| d.map_or_else(|| "H5S_UNLIMITED".to_owned(), |d| d.to_string()))
                    .collect(),
                None => dims.clone(),
            };
            format!(
                "SIMPLE {{ ( {} ) / ( {} ) }}",
                dims.join(", "),
                max.join(", ")
            )
        }
    }
}

fn is_null(d: &Dataset) -> bool {
    d.is_null()
}

fn index_of(mut i: usize, dims: &[usize]) -> String {
    if dims.is_empty() {
        return "0".to_owned();
    }
    let mut idx = vec![0usize; dims.len()];
    for (k, &d) in dims.iter().enumerate().rev() {
        let d = d.max(1);
        idx[k] = i % d;
        i /= d;
    }
    idx.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The number of elements of `dims`, `None` when it overflows.
fn element_count(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// Every element of the dataset (for the JSON document).
fn dataset_values(d: &Dataset) -> Result<Vec<Val>, String> {
    if d.is_null() {
        return Ok(Vec::new());
    }
    let vstr = if is_vlen_string(d.dtype()) {
        Some(d.read_strings().map_err(|e| e.to_string())?)
    } else {
        None
    };
    let raw = d.read_raw().map_err(|e| e.to_string())?;
    Ok(decode_all(d.dtype(), &raw, vstr, Some(&d.global_heap())))
}

/// Index `i` of `dims` (a subset) in the coordinates of the dataset it was taken from.
fn index_in(mut i: usize, dims: &[usize], start: &[u64], stride: &[u64]) -> String {
    let mut idx = vec![0u64; dims.len()];
    for (k, &d) in dims.iter().enumerate().rev() {
        let d = d.max(1);
        idx[k] = start[k] + (i % d) as u64 * stride[k];
        i /= d;
    }
    idx.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Rows `row..row + rows` (of the first dimension) of the dataset, or of the hyperslab `sel`
/// (start, stride, count) over it whose shape is `dims`.
fn block_values(
    d: &Dataset,
    dims: &[usize],
    sel: Option<&Slab>,
    row: usize,
    rows: usize,
) -> Result<Vec<Val>, String> {
    use ndarray::SliceInfoElem;
    let slices: Vec<SliceInfoElem> = (0..dims.len())
        .map(|k| {
            let (start, stride, count) = match sel {
                Some((s, t, c)) => (s[k] as usize, t[k] as usize, c[k] as usize),
                None => (0, 1, dims[k]),
            };
            let (first, n) = if k == 0 { (row, rows) } else { (0, count) };
            let a = start + first * stride;
            SliceInfoElem::Slice {
                start: a as isize,
                end: Some((a + (n.max(1) - 1) * stride + 1) as isize),
                step: stride as isize,
            }
        })
        .collect();
    if is_vlen_string(d.dtype()) {
        let strings = d
            .read_slice::<String>(&slices)
            .map_err(|e| e.to_string())?
            .into_raw_vec_and_offset()
            .0;
        // The stored elements tell the null strings (h5dump's NULL) from the empty ones.
        let raw = d.read_raw_slice(&slices).map_err(|e| e.to_string())?;
        return Ok(decode_all(d.dtype(), &raw, Some(strings), None));
    }
    let raw = d.read_raw_slice(&slices).map_err(|e| e.to_string())?;
    Ok(decode_all(d.dtype(), &raw, None, Some(&d.global_heap())))
}

/// What `h5 dump` prints: the whole file, or the objects named (`-d`/`-g`/PATH).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wanted<'a> {
    /// The object at this path, whatever it is.
    Any(&'a str),
    /// `-d PATH`: must be a dataset.
    Dataset(&'a str),
    /// `-g PATH`: must be a group.
    Group(&'a str),
}

/// The DDL of the `wanted` objects with `options`, as `h5dump FILE` / `h5dump -g PATH FILE` /
/// `h5dump -d PATH FILE` print them (`shown_name`: the file name as given on the command
/// line): written to `sink` block by block as it is made (large datasets are read in blocks),
/// or returned when there is no sink.
pub(crate) fn ddl_with<'f>(
    file: &'f File,
    shown_name: &str,
    wanted: &[Wanted<'_>],
    options: &DumpOptions,
    sink: Option<&'f mut dyn std::io::Write>,
) -> Result<String, String> {
    let mut p = Ddl {
        out: String::new(),
        sink,
        sink_error: None,
        options: options.clone(),
        subset_at: None,
        file,
        seen: HashMap::new(),
        dir: file
            .path()
            .and_then(|p| p.parent())
            .map(std::path::Path::to_path_buf),
        external: HashMap::new(),
        current: 0,
        named: HashMap::new(),
        anonymous: Vec::new(),
        names: None,
        expanding: Vec::new(),
        not_read: 0,
    };
    let (named, anonymous) = committed_types(file);
    p.named = named;
    p.anonymous = anonymous;
    for (a, _) in &p.anonymous {
        p.named.insert(*a, format!("/#{a}"));
    }
    p.out.push_str(&format!("HDF5 \"{shown_name}\" {{\n"));
    let root = p.file().root().map_err(|e| e.to_string())?;
    for w in wanted {
        let (path, need) = match *w {
            Wanted::Any(p) => (p, None),
            Wanted::Dataset(p) => (p, Some(ObjectKind::Dataset)),
            Wanted::Group(p) => (p, Some(ObjectKind::Group)),
        };
        let kind = root.kind_of(path).map_err(|e| format!("{path}: {e}"))?;
        if need.is_some_and(|n| n != kind) {
            return Err(format!(
                "{path}: a {kind:?}, not a {:?}",
                need.unwrap_or(kind)
            ));
        }
        match kind {
            ObjectKind::Group => {
                let g = file.group(path).map_err(|e| e.to_string())?;
                p.group(0, path, &g);
            }
            ObjectKind::Dataset => {
                let d = file.dataset(path).map_err(|e| e.to_string())?;
                p.dataset(0, path, &d);
            }
            other => return Err(format!("{path}: cannot dump a {other:?}")),
        }
    }
    p.out.push_str("}\n");
    p.flush_out();
    if let Some(e) = p.sink_error {
        return Err(format!("cannot write the dump: {e}"));
    }
    if p.not_read > 0 {
        return Err(format!(
            "{} part(s) of the file could not be read (marked `<... not read: ...>` above)",
            p.not_read
        ));
    }
    Ok(p.out)
}

/// The first `limit` elements of `d` in DDL data lines at `level` (for `h5 ls --data`), and
/// a line saying how many more there are.
pub(crate) fn data_preview(file: &File, d: &Dataset, limit: usize, level: usize) -> String {
    let mut p = Ddl {
        out: String::new(),
        sink: None,
        sink_error: None,
        options: DumpOptions::default(),
        subset_at: None,
        file,
        seen: HashMap::new(),
        dir: None,
        external: HashMap::new(),
        current: 0,
        named: HashMap::new(),
        anonymous: Vec::new(),
        names: None,
        expanding: Vec::new(),
        not_read: 0,
    };
    let dims = d.shape();
    let total = d.size();
    if d.is_null() || total == 0 {
        p.line(level, "(no elements)");
        return p.out;
    }
    let values = if dims.is_empty() {
        dataset_values(d)
    } else {
        let per_row = total / dims[0].max(1);
        let rows = limit.div_ceil(per_row.max(1)).clamp(1, dims[0]);
        block_values(d, &dims, None, 0, rows)
    };
    match values {
        Ok(mut values) => {
            values.truncate(limit);
            let n = values.len();
            p.data(level, d.dtype(), &dims, &values, 0, n);
            if total > n {
                p.line(level, &format!("... ({} more elements)", total - n));
            }
        }
        Err(e) => p.line(level, &format!("<data not read: {e}>")),
    }
    p.out
}

/// h5dump's `-n`: every object and link of the file, one per line.
pub(crate) fn contents(file: &File, shown_name: &str) -> Result<String, String> {
    let mut out = format!("HDF5 \"{shown_name}\" {{\nFILE_CONTENTS {{\n group      /\n");
    for e in file.walk().map_err(|e| e.to_string())? {
        let path = format!("/{}", e.path);
        let line = match (&e.link.kind, e.object) {
            (LinkKind::Soft(t), _) => format!(" link       {path} -> {t}"),
            (LinkKind::External { file, path: p }, _) => {
                format!(" ext link   {path} -> {file} {p}")
            }
            (LinkKind::UserDefined(k), _) => format!(" udlink     {path} (class {k})"),
            (LinkKind::Hard, Some(ObjectKind::Group)) => format!(" group      {path}"),
            (LinkKind::Hard, Some(ObjectKind::Dataset)) => format!(" dataset    {path}"),
            (LinkKind::Hard, Some(ObjectKind::Datatype)) => format!(" datatype   {path}"),
            (LinkKind::Hard, _) => format!(" unknown    {path}"),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(" }\n}\n");
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// JSON

/// numpy's type string (`<f4`, `>i2`, `|S8`, …) or a structural description for compound,
/// enum, array and variable-length types.
pub(crate) fn numpy_dtype(dt: &Datatype) -> Value {
    let endian = |size: u32, order: ByteOrder| match (size, order) {
        (1, _) => '|',
        (_, ByteOrder::BigEndian) => '>',
        _ => '<',
    };
    match dt {
        Datatype::FixedPoint(t) => json!(format!(
            "{}{}{}",
            endian(t.size, t.order),
            if t.signed { 'i' } else { 'u' },
            t.size
        )),
        Datatype::Float(t) => json!(format!("{}f{}", endian(t.size, t.order), t.size)),
        Datatype::Complex(c) => match c.base.as_ref() {
            Datatype::Float(f) => json!(format!("{}c{}", endian(f.size, f.order), c.size)),
            _ => json!({"kind": "complex", "base": numpy_dtype(&c.base)}),
        },
        Datatype::String(s) => json!(format!("|S{}", s.size)),
        Datatype::Bitfield(t) => json!(format!("{}u{}", endian(t.size, t.order), t.size)),
        Datatype::Opaque(o) => json!(format!("|V{}", o.size)),
        Datatype::Time(t) => json!(format!("|V{}", t.size)),
        Datatype::Reference(r) => json!({
            "kind": "reference",
            "reference": match r.kind {
                ReferenceKind::Object => "object",
                ReferenceKind::DatasetRegion => "region",
                _ => "revised",
            }
        }),
        Datatype::Compound(c) if complex_like(c).is_some() => {
            let f = complex_like(c).map_or((0, ByteOrder::LittleEndian), |f| (f.size, f.order));
            json!(format!("{}c{}", endian(f.0, f.1), c.size))
        }
        Datatype::Compound(c) => json!({
            "kind": "compound",
            "itemsize": c.size,
            "fields": c.members.iter().map(|m| json!({
                "name": m.name, "offset": m.offset, "dtype": numpy_dtype(&m.datatype)
            })).collect::<Vec<_>>(),
        }),
        Datatype::Enum(e) => json!({
            "kind": "enum",
            "base": numpy_dtype(&e.base),
            "members": e.members.iter().map(|m| {
                let v = match decode_all(&e.base, &m.value, None, None).first() {
                    Some(Val::Int(i)) => json_int(*i),
                    _ => Value::Null,
                };
                (m.name.clone(), v)
            }).collect::<Map<String, Value>>(),
        }),
        Datatype::Array(a) => json!({
            "kind": "array", "shape": a.dims, "base": numpy_dtype(&a.base)
        }),
        Datatype::VarLen(v) => match v.kind {
            VarLenKind::String { charset, .. } => json!({
                "kind": "vlen_string",
                "encoding": if charset == Charset::Utf8 { "utf-8" } else { "ascii" },
            }),
            VarLenKind::Sequence => json!({"kind": "vlen", "base": numpy_dtype(&v.base)}),
        },
    }
}

/// h5py's complex numbers: a compound of two members "r" and "i" of one float type.
fn complex_like(c: &h5_format::datatype::CompoundType) -> Option<&h5_format::datatype::FloatType> {
    match c.members.as_slice() {
        [r, i] if r.name == "r" && i.name == "i" && r.offset == 0 => {
            match (&r.datatype, &i.datatype) {
                (Datatype::Float(a), Datatype::Float(b)) if a == b && i.offset == a.size => Some(a),
                _ => None,
            }
        }
        _ => None,
    }
}

fn json_int(i: i128) -> Value {
    if let Ok(v) = i64::try_from(i) {
        json!(v)
    } else if let Ok(v) = u64::try_from(i) {
        json!(v)
    } else {
        json!(i.to_string())
    }
}

fn json_float(f: f64) -> Value {
    if f.is_nan() {
        json!("nan")
    } else if f.is_infinite() {
        json!(if f > 0.0 { "inf" } else { "-inf" })
    } else {
        json!(f)
    }
}

/// One element as JSON.
pub(crate) fn json_value(dt: &Datatype, v: &Val) -> Value {
    match v {
        Val::Int(i) => json_int(*i),
        Val::Float(f) => json_float(*f),
        Val::Complex(r, i) => json!({"real": json_float(*r), "imag": json_float(*i)}),
        Val::Str(b) => json!(string_text(dt, b)),
        Val::NullStr => Value::Null,
        Val::Enum(Ok(n)) => json!(n),
        Val::Enum(Err(i)) => json_int(*i),
        Val::Bytes(b) => match dt {
            // numpy reads bitfields as unsigned integers.
            Datatype::Bitfield(t) if b.len() <= 8 => {
                let mut v = 0u64;
                let mut push = |x: &u8| v = (v << 8) | u64::from(*x);
                if t.order == ByteOrder::BigEndian {
                    b.iter().for_each(&mut push);
                } else {
                    b.iter().rev().for_each(&mut push);
                }
                json!(v)
            }
            Datatype::Opaque(_) => json!(b),
            _ => json!(hex_bytes(b)),
        },
        Val::Array(items) => {
            let base = match dt {
                Datatype::Array(a) => a.base.as_ref(),
                _ => dt,
            };
            Value::Array(items.iter().map(|x| json_value(base, x)).collect())
        }
        Val::Compound(members) if matches!(dt, Datatype::Compound(c) if complex_like(c).is_some()) => {
            match members.as_slice() {
                [(_, Val::Float(r)), (_, Val::Float(i))] => {
                    json!({"real": json_float(*r), "imag": json_float(*i)})
                }
                _ => json!({"unsupported": "complex"}),
            }
        }
        Val::Compound(members) => {
            let mut m = Map::new();
            if let Datatype::Compound(c) = dt {
                for ((name, x), cm) in members.iter().zip(&c.members) {
                    m.insert(name.clone(), json_value(&cm.datatype, x));
                }
            }
            Value::Object(m)
        }
        Val::Seq(items) => {
            let base = match dt {
                Datatype::VarLen(v) => v.base.as_ref(),
                _ => dt,
            };
            Value::Array(items.iter().map(|x| json_value(base, x)).collect())
        }
        Val::Ref(r) => refs::json_ref(r),
        Val::Unsupported(what) => json!({"unsupported": what}),
    }
}

/// Committed datatypes by relative address → path (see [`named_types`]).
type Named = HashMap<u64, String>;

/// What the JSON printer needs besides an object: the committed datatypes' paths and every
/// object's name for references (the latter walked on first use).
struct JsonCtx<'f> {
    file: &'f File,
    named: Named,
    names: std::cell::OnceCell<refs::Names>,
}

impl JsonCtx<'_> {
    /// Names the references in `vals`.
    fn name_refs(&self, dt: &Datatype, vals: &mut [Val]) {
        if refs::has_refs(dt) {
            self.names
                .get_or_init(|| refs::Names::of(self.file))
                .name_all(vals);
        }
    }
}

/// `"named_dtype": path` for a type that is a committed datatype.
fn named_field(o: &mut Map<String, Value>, committed: Option<u64>, named: &Named) {
    if let Some(p) = committed.and_then(|a| named.get(&a)) {
        o.insert("named_dtype".into(), json!(p));
    }
}

fn json_attrs(attrs: Result<Vec<Attribute>, h5::Error>, ctx: &JsonCtx<'_>) -> Value {
    match attrs {
        Err(e) => json!({"error": e.to_string()}),
        Ok(attrs) => {
            let mut m = Map::new();
            for a in attrs {
                let vstr = if is_vlen_string(a.dtype()) {
                    a.read_strings().ok()
                } else {
                    None
                };
                let mut vals = decode_all(a.dtype(), &a.read_raw(), vstr, Some(&a.global_heap()));
                ctx.name_refs(a.dtype(), &mut vals);
                let data: Vec<Value> = vals.iter().map(|v| json_value(a.dtype(), v)).collect();
                let mut o = Map::new();
                o.insert("dtype".into(), numpy_dtype(a.dtype()));
                named_field(&mut o, a.committed_type_address(), &ctx.named);
                o.insert("shape".into(), json!(a.shape()));
                o.insert("data".into(), Value::Array(data));
                m.insert(a.name().to_owned(), Value::Object(o));
            }
            Value::Object(m)
        }
    }
}

/// A dataset's JSON description without its `data` (see [`JsonSink::dataset`]).
fn json_dataset_header(d: &Dataset, ctx: &JsonCtx<'_>) -> Map<String, Value> {
    let fill = d.fill_value_raw().map_or(Value::Null, |b| {
        decode_all(d.dtype(), b, None, None)
            .first()
            .map_or(Value::Null, |v| json_value(d.dtype(), v))
    });
    let mut o = Map::new();
    o.insert("path".into(), json!(d.path()));
    o.insert("kind".into(), json!("dataset"));
    o.insert("attributes".into(), json_attrs(d.attrs(), ctx));
    o.insert("dtype".into(), numpy_dtype(d.dtype()));
    named_field(&mut o, d.committed_type_address(), &ctx.named);
    let null = is_null(d);
    o.insert(
        "shape".into(),
        if null { Value::Null } else { json!(d.shape()) },
    );
    o.insert(
        "maxshape".into(),
        if null {
            Value::Null
        } else {
            json!(d.maxshape())
        },
    );
    o.insert("layout".into(), json!(d.layout_name()));
    o.insert("chunks".into(), json!(d.chunk()));
    o.insert(
        "filters".into(),
        Value::Array(
            d.filters()
                .iter()
                .map(|f| json!({"id": f.id, "name": f.name, "parameters": f.params}))
                .collect(),
        ),
    );
    o.insert("fillvalue".into(), fill);
    o
}

/// Bytes of a dataset read at a time by `dump --json`: smaller than [`BLOCK_BYTES`], since a
/// JSON element costs more to print than to read, so output comes steadily.
const JSON_BLOCK_BYTES: usize = 256 << 10;

/// A dataset's elements (or those of the hyperslab `sel` over it), in blocks of whole rows of
/// the first dimension of at most `block_bytes` (one row at least): how both dumps stream data.
struct DataBlocks<'d> {
    d: &'d Dataset,
    sel: Option<Slab>,
    /// The shape printed: the dataset's, or the hyperslab's counts.
    dims: Vec<usize>,
    /// Elements in all.
    total: usize,
    /// The next row to read (`rows` when done).
    row: usize,
    rows: usize,
    rows_per_block: usize,
}

impl<'d> DataBlocks<'d> {
    /// Fails when the element count overflows (a damaged extent).
    fn new(
        d: &'d Dataset,
        sel: Option<Slab>,
        block_bytes: usize,
    ) -> Result<DataBlocks<'d>, String> {
        let dims: Vec<usize> = match &sel {
            _ if d.is_null() => Vec::new(),
            Some((_, _, count)) => count.iter().map(|&c| c as usize).collect(),
            None => d.shape(),
        };
        let total = element_count(&dims)
            .ok_or_else(|| format!("{:?} elements: more than can be counted", dims))?;
        // A scalar is one block of one element; a null dataspace or a zero extent has none.
        let rows = match dims.first() {
            _ if d.is_null() || total == 0 => 0,
            None => 1,
            Some(&outer) => outer,
        };
        let row_bytes = (total / rows.max(1))
            .saturating_mul(d.element_size())
            .max(1);
        Ok(DataBlocks {
            d,
            sel,
            dims,
            total,
            row: 0,
            rows,
            rows_per_block: (block_bytes / row_bytes).max(1),
        })
    }

    /// The next block: the index of its first element and its elements; `None` after the last.
    fn next_block(&mut self) -> Option<Result<(usize, Vec<Val>), String>> {
        if self.row >= self.rows {
            return None;
        }
        if self.dims.is_empty() {
            self.row = self.rows;
            return Some(dataset_values(self.d).map(|v| (0, v)));
        }
        let n = self.rows_per_block.min(self.rows - self.row);
        let first = self.row;
        self.row += n;
        let per_row = self.total / self.rows;
        Some(
            block_values(self.d, &self.dims, self.sel.as_ref(), first, n)
                .map(|v| (first * per_row, v)),
        )
    }
}

/// Where `h5 dump --json` writes its document as it is made: each object once described, a
/// dataset's `data` block by block (see [`DataBlocks`]), so memory stays bounded by one block
/// whatever the file holds. The bytes are those `serde_json::to_string_pretty` gives for the
/// whole document (object keys sorted, two-space indents), except after a read error in the
/// middle of a dataset's data: the `data` array then ends with the elements read before it and
/// an `error` member follows it.
struct JsonSink<'w> {
    out: &'w mut dyn std::io::Write,
    /// Objects written so far.
    objects: usize,
}

/// `v` as pretty JSON whose lines after the first are indented by `indent` spaces (pretty
/// JSON strings hold no raw newline, so every newline is a line break).
fn pretty_at(v: &Value, indent: usize) -> String {
    if !matches!(v, Value::Array(_) | Value::Object(_)) {
        // A number, string, boolean or null prints on one line either way.
        return v.to_string();
    }
    let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| "null".to_owned());
    text.replace('\n', &format!("\n{}", " ".repeat(indent)))
}

impl JsonSink<'_> {
    /// The document's opening: `{"file": NAME, "objects": [` (objects follow).
    fn begin(&mut self, shown_name: &str) -> std::io::Result<()> {
        write!(
            self.out,
            "{{\n  \"file\": {},\n  \"objects\": [",
            json!(shown_name)
        )
    }

    /// Starts the next element of `objects` (its text follows at indent 4).
    fn next_object(&mut self) -> std::io::Result<()> {
        let sep = if self.objects == 0 { "\n" } else { ",\n" };
        self.objects += 1;
        write!(self.out, "{sep}    ")
    }

    /// One whole object.
    fn object(&mut self, v: &Value) -> std::io::Result<()> {
        self.next_object()?;
        self.out.write_all(pretty_at(v, 4).as_bytes())
    }

    /// A dataset: its description, then its elements read and written block by block. A read
    /// error before the first element gives `"data": null` and `"error"`, as for a dataset
    /// whose data cannot be read at all.
    fn dataset(&mut self, d: &Dataset, ctx: &JsonCtx<'_>) -> std::io::Result<()> {
        let mut o = json_dataset_header(d, ctx);
        // The first block is read before anything of the object is written.
        let start = DataBlocks::new(d, None, JSON_BLOCK_BYTES).and_then(|mut b| {
            let first = b.next_block().transpose()?.map(|(_, v)| v);
            Ok((b, first.unwrap_or_default()))
        });
        let (mut blocks, mut first) = match start {
            Ok(s) => s,
            Err(e) => {
                o.insert("data".into(), Value::Null);
                o.insert("error".into(), json!(e));
                return self.object(&Value::Object(o));
            }
        };
        ctx.name_refs(d.dtype(), &mut first);
        o.insert("data".into(), Value::Null); // its place among the sorted keys
        self.next_object()?;
        self.out.write_all(b"{")?;
        for (k, (key, v)) in o.iter().enumerate() {
            let sep = if k == 0 { "\n" } else { ",\n" };
            write!(self.out, "{sep}      {}: ", json!(key))?;
            if key != "data" {
                self.out.write_all(pretty_at(v, 6).as_bytes())?;
                continue;
            }
            let mut written = 0usize;
            let mut block = Some(Ok(first.clone()));
            let mut failed = None;
            self.out.write_all(b"[")?;
            while let Some(b) = block {
                match b {
                    Ok(vals) => {
                        for x in &vals {
                            let sep = if written == 0 { "\n" } else { ",\n" };
                            let text = pretty_at(&json_value(d.dtype(), x), 8);
                            write!(self.out, "{sep}        {text}")?;
                            written += 1;
                        }
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
                block = blocks.next_block().map(|b| {
                    b.map(|(_, mut vals)| {
                        ctx.name_refs(d.dtype(), &mut vals);
                        vals
                    })
                });
            }
            self.out
                .write_all(if written == 0 { b"]" } else { b"\n      ]" })?;
            if let Some(e) = failed {
                write!(self.out, ",\n      \"error\": {}", json!(e))?;
            }
        }
        self.out.write_all(b"\n    }")
    }

    /// The document's end.
    fn end(&mut self) -> std::io::Result<()> {
        let close = if self.objects == 0 { "]" } else { "\n  ]" };
        writeln!(self.out, "{close}\n}}")
    }
}

fn json_walk(
    g: &Group,
    out: &mut JsonSink<'_>,
    seen: &mut HashMap<u64, String>,
    ctx: &JsonCtx<'_>,
) -> std::io::Result<()> {
    if seen.insert(g.address(), g.path().to_owned()).is_some() {
        return Ok(());
    }
    out.object(
        &json!({"path": g.path(), "kind": "group", "attributes": json_attrs(g.attrs(), ctx)}),
    )?;
    let links = match g.links() {
        Ok(l) => l,
        Err(e) => return out.object(&json!({"path": g.path(), "error": e.to_string()})),
    };
    for link in links {
        let path = join(g.path(), &link.name);
        match &link.kind {
            LinkKind::Soft(t) => {
                out.object(&json!({"path": path, "kind": "soft_link", "target": t}))?
            }
            LinkKind::External { file, path: p } => out.object(
                &json!({"path": path, "kind": "external_link", "file": file, "target": p}),
            )?,
            LinkKind::UserDefined(k) => {
                out.object(&json!({"path": path, "kind": "user_defined_link", "class": k}))?;
            }
            LinkKind::Hard => match g.kind_of(&link.name) {
                Ok(ObjectKind::Group) => match g.group(&link.name) {
                    Ok(sub) => json_walk(&sub, out, seen, ctx)?,
                    Err(e) => out.object(&json!({"path": path, "error": e.to_string()}))?,
                },
                Ok(ObjectKind::Dataset) => match g.dataset(&link.name) {
                    Ok(d) => {
                        if seen.insert(d.address(), path.clone()).is_none() {
                            out.dataset(&d, ctx)?;
                        }
                    }
                    Err(e) => out.object(&json!({"path": path, "error": e.to_string()}))?,
                },
                Ok(ObjectKind::Datatype) => match g.named_datatype(&link.name) {
                    Ok(t) => {
                        if seen.insert(t.address(), path.clone()).is_none() {
                            out.object(&json!({
                                "path": path,
                                "kind": "datatype",
                                "dtype": t.dtype().map_or(Value::Null, |dt| numpy_dtype(&dt)),
                                "attributes": json_attrs(t.attrs(), ctx),
                            }))?;
                        }
                    }
                    Err(e) => out.object(&json!({"path": path, "error": e.to_string()}))?,
                },
                Ok(ObjectKind::Unknown) => out.object(&json!({"path": path, "kind": "unknown"}))?,
                Err(e) => out.object(&json!({"path": path, "error": e.to_string()}))?,
            },
        }
    }
    Ok(())
}

pub(crate) fn join(parent: &str, name: &str) -> String {
    if parent.ends_with('/') {
        format!("{parent}{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// Writes the JSON document of `h5 dump --json` to `out` as it is made (see [`JsonSink`]):
/// `{"file": NAME, "objects": [...]}` for the object at `path` (default the root group) and,
/// for a group, everything below it.
pub(crate) fn json_write(
    file: &File,
    shown_name: &str,
    path: Option<&str>,
    out: &mut dyn std::io::Write,
) -> Result<(), String> {
    let path = path.unwrap_or("/");
    let root = file.root().map_err(|e| e.to_string())?;
    let kind = root.kind_of(path).map_err(|e| format!("{path}: {e}"))?;
    let ctx = JsonCtx {
        file,
        named: named_types(file),
        names: std::cell::OnceCell::new(),
    };
    enum Top {
        Group(Group),
        Dataset(Dataset),
    }
    // Resolved before anything is written: a bad path prints nothing.
    let top = match kind {
        ObjectKind::Group => Top::Group(file.group(path).map_err(|e| e.to_string())?),
        ObjectKind::Dataset => Top::Dataset(file.dataset(path).map_err(|e| e.to_string())?),
        other => return Err(format!("{path}: cannot dump a {other:?}")),
    };
    let mut sink = JsonSink { out, objects: 0 };
    let written = sink.begin(shown_name).and_then(|()| match &top {
        Top::Group(g) => json_walk(g, &mut sink, &mut HashMap::new(), &ctx),
        Top::Dataset(d) => sink.dataset(d, &ctx),
    });
    written
        .and_then(|()| sink.end())
        .and_then(|()| sink.out.flush())
        .map_err(|e| format!("cannot write the JSON dump: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_g() {
        assert_eq!(fmt_g(0.25, 6), "0.25");
        assert_eq!(fmt_g(1.0, 6), "1");
        assert_eq!(fmt_g(1.0 / 7.0, 6), "0.142857");
        assert_eq!(fmt_g(f64::from(f32::MAX), 6), "3.40282e+38");
        assert_eq!(fmt_g(5e-324, 6), "4.94066e-324");
        assert_eq!(fmt_g(6.103515625e-05, 6), "6.10352e-05");
        assert_eq!(fmt_g(65504.0, 6), "65504");
        assert_eq!(fmt_g(1e6, 6), "1e+06");
        assert_eq!(fmt_g(0.0001, 6), "0.0001");
        assert_eq!(fmt_g(-0.0, 6), "-0");
        assert_eq!(fmt_g(f64::NEG_INFINITY, 6), "-inf");
    }

    /// `h5 dump --json` streams: a dataset of many blocks comes out block by block, and the
    /// document is byte for byte what `to_string_pretty` gives for it whole.
    #[test]
    fn json_streams_large_datasets_in_blocks_with_the_pretty_printers_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.h5");
        let (rows, cols) = (1200usize, 1000usize); // 9.6 MB of f64: 37 blocks of 256 KiB
        {
            let f = File::create(&path).unwrap();
            let data: Vec<f64> = (0..rows * cols).map(|i| i as f64 * 0.5).collect();
            f.new_dataset::<f64>()
                .shape([rows, cols])
                .create("big")
                .unwrap()
                .write(&data)
                .unwrap();
            let g = f.create_group("g").unwrap();
            g.new_dataset::<i32>()
                .shape([0usize, 3])
                .create("empty")
                .unwrap();
            g.new_dataset::<i32>()
                .shape([] as [usize; 0])
                .create("scalar")
                .unwrap()
                .write_scalar(&7i32)
                .unwrap();
            g.new_attr::<u8>()
                .shape([2])
                .create("a")
                .unwrap()
                .write(&[1u8, 2])
                .unwrap();
            f.close().unwrap();
        }
        let f = File::open(&path).unwrap();
        let big = f.dataset("big").unwrap();
        let mut blocks = DataBlocks::new(&big, None, JSON_BLOCK_BYTES).unwrap();
        let mut sizes = Vec::new();
        while let Some(b) = blocks.next_block() {
            sizes.push(b.unwrap().1.len());
        }
        let per_block = JSON_BLOCK_BYTES / (cols * 8) * cols;
        let whole = rows * cols / per_block;
        let mut expect = vec![per_block; whole];
        expect.push(rows * cols - whole * per_block);
        assert_eq!(sizes, expect);

        let mut out = Vec::new();
        json_write(&f, "big.h5", None, &mut out).unwrap();
        let doc: Value = serde_json::from_slice(&out).unwrap();
        let again = serde_json::to_string_pretty(&doc).unwrap() + "\n";
        assert!(again.as_bytes() == out.as_slice(), "streamed bytes differ");
        let objects = doc["objects"].as_array().unwrap();
        let find = |p: &str| objects.iter().find(|o| o["path"] == p).unwrap();
        let data = find("/big")["data"].as_array().unwrap();
        assert_eq!(data.len(), rows * cols);
        assert_eq!(data[rows * cols - 1], json!((rows * cols - 1) as f64 * 0.5));
        assert_eq!(find("/g/empty")["data"], json!([]));
        assert_eq!(find("/g/scalar")["data"], json!([7]));
        assert_eq!(find("/g")["attributes"]["a"]["data"], json!([1, 2]));

        // One dataset alone, and a path that names nothing prints nothing.
        let mut one = Vec::new();
        json_write(&f, "big.h5", Some("/g/scalar"), &mut one).unwrap();
        let doc: Value = serde_json::from_slice(&one).unwrap();
        assert_eq!(doc["objects"][0]["data"], json!([7]));
        let mut none = Vec::new();
        assert!(json_write(&f, "big.h5", Some("/nope"), &mut none).is_err());
        assert!(none.is_empty());
    }

    #[test]
    fn quoting() {
        assert_eq!(quote(b"ab\0"), "\"ab\\000\"");
        assert_eq!(quote(&[0xc3]), "\"\\37777777703\"");
    }
}
