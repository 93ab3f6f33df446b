//! Checks files against the reference implementation: h5py (libhdf5) and `h5dump`.
//!
//! The files h5 writes are accepted only when the real library reads them back as intended:
//! [`check_with_h5py`] runs `tests/verify/h5py_check.py` (whose top comment documents the
//! expectation JSON that [`Expectations`] builds) and [`h5dump`] runs Debian's `h5dump`.
//! Both tools are installed by `scripts/setup-tools` (part of `scripts/test`). When one is
//! missing these helpers **panic** with a message naming that script: a compatibility test must
//! fail, never skip, on a machine without its reference.
//!
//! ```no_run
//! use h5_testkit::verify::{check_with_h5py, AttrExpect, DatasetExpect, Expectations};
//! use serde_json::json;
//!
//! let exp = Expectations::new()
//!     .superblock_version(3)
//!     .group("/g", &["temperature"])
//!     .dataset(
//!         "/g/temperature",
//!         DatasetExpect::new("<f4", &[2, 2]).chunks(&[1, 2]).gzip(4).values(json!([[1.5, 2], [3, "nan"]])),
//!     )
//!     .attr("/g", "units", AttrExpect::new("vlen-str-utf8", json!("K")));
//! check_with_h5py(std::path::Path::new("out.h5"), &exp).unwrap();
//! ```

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::sha256_hex;

/// Root of the Cargo workspace (where `.venv`, `scripts/` and `tests/verify/` live).
pub fn workspace_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
}

/// The checker script run by [`check_with_h5py`]: `<workspace>/tests/verify/h5py_check.py`.
pub fn check_script() -> PathBuf {
    workspace_dir()
        .join("tests")
        .join("verify")
        .join("h5py_check.py")
}

/// A pinned reference reader: one h5py release with the libhdf5 its wheel bundles, each in its
/// own virtual environment installed by `scripts/setup-tools`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Reference {
    /// h5py 3.12.1 with HDF5 1.14.4 (`tests/requirements.txt` in `<workspace>/.venv`; override
    /// with `$H5_PYTHON`). The default of every check.
    Hdf5v114,
    /// h5py 3.16.0 with HDF5 2.0.0 (`tests/requirements-hdf5-2.txt` in
    /// `<workspace>/.venv-hdf5-2`; override with `$H5_PYTHON_HDF5_2`).
    Hdf5v200,
}

impl Reference {
    /// Both references, oldest first.
    pub const ALL: [Reference; 2] = [Reference::Hdf5v114, Reference::Hdf5v200];

    /// The environment variable that overrides the interpreter.
    fn env_var(self) -> &'static str {
        match self {
            Reference::Hdf5v114 => "H5_PYTHON",
            Reference::Hdf5v200 => "H5_PYTHON_HDF5_2",
        }
    }

    /// The virtual environment's directory name in the workspace.
    fn venv(self) -> &'static str {
        match self {
            Reference::Hdf5v114 => ".venv",
            Reference::Hdf5v200 => ".venv-hdf5-2",
        }
    }

    /// The libhdf5 version its h5py bundles (checked when the interpreter is first used).
    pub fn hdf5_version(self) -> &'static str {
        match self {
            Reference::Hdf5v114 => "1.14.4",
            Reference::Hdf5v200 => "2.0.0",
        }
    }

    /// The interpreter, before any check that it works.
    fn candidate(self) -> PathBuf {
        match std::env::var_os(self.env_var()) {
            Some(p) => PathBuf::from(p),
            None => workspace_dir().join(self.venv()).join("bin").join("python"),
        }
    }

    /// The Python interpreter of this reference (see [`python()`]): panics with a message
    /// naming `scripts/setup-tools` when it is missing, cannot import h5py, numpy and
    /// hdf5plugin, or bundles another libhdf5 (checked once per process).
    pub fn python(self) -> PathBuf {
        static FOUND: OnceLock<[Result<PathBuf, String>; 2]> = OnceLock::new();
        let found = FOUND.get_or_init(|| Reference::ALL.map(Reference::probe));
        match &found[self as usize] {
            Ok(p) => p.clone(),
            Err(e) => panic!(
                "the {self:?} reference is not installed ({e}); run `scripts/setup-tools` \
                 (or set {} to an interpreter with its pinned requirements)",
                self.env_var()
            ),
        }
    }

    fn probe(self) -> Result<PathBuf, String> {
        let py = self.candidate();
        let out = Command::new(&py)
            .args([
                "-c",
                "import h5py, numpy, hdf5plugin; print(h5py.version.hdf5_version)",
            ])
            .output();
        match out {
            Ok(o) if o.status.success() => {
                let got = String::from_utf8_lossy(&o.stdout).trim().to_owned();
                if got == self.hdf5_version() {
                    Ok(py)
                } else {
                    Err(format!(
                        "{} has h5py with HDF5 {got}, not {}",
                        py.display(),
                        self.hdf5_version()
                    ))
                }
            }
            Ok(o) => Err(format!(
                "{} cannot import h5py, numpy and hdf5plugin: {}",
                py.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Err(format!("cannot run {}: {e}", py.display())),
        }
    }
}

/// The interpreter the checks run with, before any check that it works.
fn python_candidate() -> PathBuf {
    Reference::Hdf5v114.candidate()
}

/// The Python interpreter with h5py, numpy and hdf5plugin of the default reference
/// ([`Reference::Hdf5v114`]): `$H5_PYTHON` if set, else `<workspace>/.venv/bin/python`.
///
/// Panics with a message naming `scripts/setup-tools` when it is missing or cannot import those
/// packages (checked once per process).
pub fn python() -> PathBuf {
    Reference::Hdf5v114.python()
}

/// Runs a Python snippet with [`python()`] (`python -c CODE ARGS...`) and returns its standard
/// output. Panics, showing the standard error, when it exits non-zero: meant for making test
/// files with h5py.
pub fn run_python<S: AsRef<OsStr>>(code: &str, args: &[S]) -> String {
    run_python_with(Reference::Hdf5v114, code, args)
}

/// Longest a Python snippet may run: `$H5_PYTHON_TIMEOUT` seconds, else 600. A reference
/// library caught in a loop on a file h5 wrote then fails the test instead of hanging the suite.
fn python_timeout() -> std::time::Duration {
    let secs = std::env::var("H5_PYTHON_TIMEOUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    std::time::Duration::from_secs(secs)
}

/// [`run_python`] with the interpreter of `reference`. Panics too when the snippet runs longer
/// than `$H5_PYTHON_TIMEOUT` seconds (600 by default; it is killed).
pub fn run_python_with<S: AsRef<OsStr>>(reference: Reference, code: &str, args: &[S]) -> String {
    use std::io::Read;
    let py = reference.python();
    let mut child = Command::new(&py)
        .arg("-c")
        .arg(code)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", py.display()));
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let limit = python_timeout();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for python") {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("python snippet still running after {limit:?} (killed)\n--- code ---\n{code}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let out = stdout.join().unwrap_or_default();
    let err = stderr.join().unwrap_or_default();
    assert!(
        status.success(),
        "python snippet failed ({status}):\n{}\n--- code ---\n{code}",
        String::from_utf8_lossy(&err)
    );
    String::from_utf8_lossy(&out).into_owned()
}

/// Hex SHA-256 of bytes, the way `h5py_check.py` digests a dataset: pass the elements'
/// little-endian bytes in C order (fixed-size strings padded with NULs to their size).
pub fn digest_le_bytes(bytes: &[u8]) -> String {
    sha256_hex(bytes)
}

/// Hex SHA-256 of typed elements as little-endian bytes in C order; equals the script's digest
/// with `"as"` the little-endian numpy type of `T` (`"<f4"` for `f32`, `"|u1"` for `u8`, ...).
pub fn digest_le<T: LeBytes>(elements: &[T]) -> String {
    let mut bytes = Vec::with_capacity(std::mem::size_of_val(elements));
    for e in elements {
        e.append_le(&mut bytes);
    }
    sha256_hex(&bytes)
}

/// Element types [`digest_le`] can hash, with their numpy type string.
pub trait LeBytes {
    /// numpy's little-endian type string of this type (`"<f4"`, `"|i1"`, `"|b1"`).
    const NUMPY: &'static str;
    /// Appends the little-endian bytes of `self`.
    fn append_le(&self, out: &mut Vec<u8>);
}

macro_rules! le_bytes {
    ($($t:ty => $np:literal),*) => {$(
        impl LeBytes for $t {
            const NUMPY: &'static str = $np;
            fn append_le(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
le_bytes!(u8 => "|u1", i8 => "|i1", u16 => "<u2", i16 => "<i2", u32 => "<u4", i32 => "<i4",
    u64 => "<u8", i64 => "<i8", f32 => "<f4", f64 => "<f8");

impl LeBytes for bool {
    const NUMPY: &'static str = "|b1";
    fn append_le(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
}

/// Builders of the structured DTYPE notations (see `h5py_check.py`); plain types are strings
/// such as `"<f4"`, `"|S10"`, `"vlen-str-utf8"`.
pub mod dtype {
    use serde_json::{Value, json};

    /// A compound type from `(name, DTYPE, offset)` fields; its size is not checked.
    pub fn compound(fields: &[(&str, Value, u64)]) -> Value {
        Value::Array(fields.iter().map(|(n, t, o)| json!([n, t, o])).collect())
    }

    /// A compound type whose total size is checked too.
    pub fn compound_sized(fields: &[(&str, Value, u64)], itemsize: u64) -> Value {
        json!({"compound": compound(fields), "itemsize": itemsize})
    }

    /// An enumeration over `base` (e.g. `"|u1"`) with its `name -> value` mapping.
    pub fn enumeration(base: &str, members: &[(&str, i64)]) -> Value {
        let mapping: serde_json::Map<String, Value> = members
            .iter()
            .map(|(n, v)| ((*n).to_owned(), json!(v)))
            .collect();
        json!({"enum": base, "mapping": mapping})
    }

    /// An array type of `base` elements with the given dimensions.
    pub fn array(base: impl Into<Value>, dims: &[u64]) -> Value {
        json!({"array": base.into(), "shape": dims})
    }

    /// A variable-length sequence of `base`.
    pub fn vlen(base: impl Into<Value>) -> Value {
        json!({"vlen": base.into()})
    }
}

/// What to check of a dataset's elements.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Values {
    /// Nothing.
    #[default]
    Unchecked,
    /// Every element: nested JSON lists of the dataset's shape (VALUE rules of the script).
    Exact(Value),
    /// The SHA-256 of the elements (see [`digest_le`]), optionally with a few single elements.
    Digest {
        /// Lowercase hex SHA-256.
        sha256: String,
        /// The type the elements are converted to before hashing; `None` uses the dataset's
        /// expected dtype.
        as_dtype: Option<Value>,
        /// `(index, VALUE)` spot checks.
        spots: Vec<(Vec<u64>, Value)>,
    },
    /// Only single elements, `(index, VALUE)`.
    Spots(Vec<(Vec<u64>, Value)>),
}

/// One filter of the pipeline as libhdf5 reports it (`get_filter(i)`): id, flags, client values
/// and, optionally, the stored name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterExpect {
    /// Filter id (1 deflate, 2 shuffle, 3 fletcher32, 6 scale-offset, 32015 zstd, ...).
    pub id: u32,
    /// Flags (bit 0: optional filter).
    pub flags: u32,
    /// Client data values.
    pub values: Vec<u32>,
    /// Name stored in the file, compared when `Some`.
    pub name: Option<String>,
}

impl FilterExpect {
    /// A filter expectation without a name check.
    pub fn new(id: u32, flags: u32, values: &[u32]) -> Self {
        FilterExpect {
            id,
            flags,
            values: values.to_vec(),
            name: None,
        }
    }

    fn to_json(&self) -> Value {
        match &self.name {
            Some(n) => json!([self.id, self.flags, self.values, n]),
            None => json!([self.id, self.flags, self.values]),
        }
    }
}

/// Expectations of one dataset; every `None` field is not checked. Build it with
/// [`DatasetExpect::new`] and the chained setters, or as a struct literal with
/// `..Default::default()`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DatasetExpect {
    /// DTYPE notation (`"<f4"`, `"|S10"`, `"vlen-str-utf8"`, or one of [`dtype`]'s builders).
    pub dtype: Option<Value>,
    /// Dimensions (`[]` for a scalar).
    pub shape: Option<Vec<u64>>,
    /// Maximum dimensions, `None` entries unlimited.
    pub maxshape: Option<Vec<Option<u64>>>,
    /// `Some(None)`: not chunked; `Some(Some(dims))`: chunked with that chunk shape.
    pub chunks: Option<Option<Vec<u64>>>,
    /// `compact`, `contiguous`, `chunked` or `virtual`.
    pub layout: Option<String>,
    /// h5py's `ds.compression` (`Some(None)` for none; plugin filters also give none).
    pub compression: Option<Option<String>>,
    /// h5py's `ds.compression_opts`.
    pub compression_opts: Option<Value>,
    /// h5py's `ds.shuffle`.
    pub shuffle: Option<bool>,
    /// h5py's `ds.fletcher32`.
    pub fletcher32: Option<bool>,
    /// h5py's `ds.scaleoffset` (`Some(None)`: no scale-offset filter).
    pub scaleoffset: Option<Option<i64>>,
    /// The whole pipeline in order.
    pub filters: Option<Vec<FilterExpect>>,
    /// The fill value, as a VALUE.
    pub fillvalue: Option<Value>,
    /// The elements.
    pub values: Values,
}

impl DatasetExpect {
    /// Expects this dtype and shape, nothing else yet.
    pub fn new(dtype: impl Into<Value>, shape: &[u64]) -> Self {
        DatasetExpect {
            dtype: Some(dtype.into()),
            shape: Some(shape.to_vec()),
            ..Default::default()
        }
    }

    /// Expects these maximum dimensions (`None` = unlimited).
    pub fn maxshape(mut self, maxshape: &[Option<u64>]) -> Self {
        self.maxshape = Some(maxshape.to_vec());
        self
    }

    /// Expects a chunked layout with this chunk shape.
    pub fn chunks(mut self, chunks: &[u64]) -> Self {
        self.chunks = Some(Some(chunks.to_vec()));
        self.layout = Some("chunked".into());
        self
    }

    /// Expects a contiguous layout (so no chunks and no filters).
    pub fn contiguous(mut self) -> Self {
        self.chunks = Some(None);
        self.layout = Some("contiguous".into());
        self
    }

    /// Expects a compact layout.
    pub fn compact(mut self) -> Self {
        self.chunks = Some(None);
        self.layout = Some("compact".into());
        self
    }

    /// Expects h5py to report `compression == "gzip"` at this level.
    pub fn gzip(mut self, level: u32) -> Self {
        self.compression = Some(Some("gzip".into()));
        self.compression_opts = Some(json!(level));
        self
    }

    /// Expects no gzip/lzf/szip compression (`ds.compression is None`).
    pub fn no_compression(mut self) -> Self {
        self.compression = Some(None);
        self
    }

    /// Expects `ds.shuffle`.
    pub fn shuffle(mut self, on: bool) -> Self {
        self.shuffle = Some(on);
        self
    }

    /// Expects `ds.fletcher32`.
    pub fn fletcher32(mut self, on: bool) -> Self {
        self.fletcher32 = Some(on);
        self
    }

    /// Expects `ds.scaleoffset`.
    pub fn scaleoffset(mut self, factor: Option<i64>) -> Self {
        self.scaleoffset = Some(factor);
        self
    }

    /// Expects exactly this pipeline.
    pub fn filters(mut self, filters: Vec<FilterExpect>) -> Self {
        self.filters = Some(filters);
        self
    }

    /// Expects this fill value.
    pub fn fillvalue(mut self, value: Value) -> Self {
        self.fillvalue = Some(value);
        self
    }

    /// Expects exactly these elements (nested lists).
    pub fn values(mut self, values: Value) -> Self {
        self.values = Values::Exact(values);
        self
    }

    /// Expects the elements' digest, hashed as the expected dtype (see [`digest_le`]).
    pub fn digest(mut self, sha256: impl Into<String>) -> Self {
        self.values = Values::Digest {
            sha256: sha256.into(),
            as_dtype: None,
            spots: Vec::new(),
        };
        self
    }

    /// Expects the elements' digest after converting them to `as_dtype` (e.g. `"<f8"`).
    pub fn digest_as(mut self, sha256: impl Into<String>, as_dtype: impl Into<Value>) -> Self {
        self.values = Values::Digest {
            sha256: sha256.into(),
            as_dtype: Some(as_dtype.into()),
            spots: Vec::new(),
        };
        self
    }

    /// Adds a single-element check (kept alongside a digest; replaces exact values).
    pub fn spot(mut self, index: &[u64], value: Value) -> Self {
        let spot = (index.to_vec(), value);
        match &mut self.values {
            Values::Digest { spots, .. } | Values::Spots(spots) => spots.push(spot),
            Values::Unchecked | Values::Exact(_) => self.values = Values::Spots(vec![spot]),
        }
        self
    }

    fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_owned(), v);
        };
        if let Some(v) = &self.dtype {
            put("dtype", v.clone());
        }
        if let Some(v) = &self.shape {
            put("shape", json!(v));
        }
        if let Some(v) = &self.maxshape {
            put("maxshape", json!(v));
        }
        if let Some(v) = &self.chunks {
            put("chunks", json!(v));
        }
        if let Some(v) = &self.layout {
            put("layout", json!(v));
        }
        if let Some(v) = &self.compression {
            put("compression", json!(v));
        }
        if let Some(v) = &self.compression_opts {
            put("compression_opts", v.clone());
        }
        if let Some(v) = self.shuffle {
            put("shuffle", json!(v));
        }
        if let Some(v) = self.fletcher32 {
            put("fletcher32", json!(v));
        }
        if let Some(v) = self.scaleoffset {
            put("scaleoffset", json!(v));
        }
        if let Some(v) = &self.filters {
            put(
                "filters",
                Value::Array(v.iter().map(FilterExpect::to_json).collect()),
            );
        }
        if let Some(v) = &self.fillvalue {
            put("fillvalue", v.clone());
        }
        let spots_json = |spots: &[(Vec<u64>, Value)]| {
            Value::Array(spots.iter().map(|(i, v)| json!([i, v])).collect())
        };
        match &self.values {
            Values::Unchecked => {}
            Values::Exact(v) => put("values", v.clone()),
            Values::Digest {
                sha256,
                as_dtype,
                spots,
            } => {
                let mut d = json!({ "sha256": sha256 });
                if let Some(t) = as_dtype {
                    d["as"] = t.clone();
                }
                put("digest", d);
                if !spots.is_empty() {
                    put("spot", spots_json(spots));
                }
            }
            Values::Spots(spots) => put("spot", spots_json(spots)),
        }
        Value::Object(m)
    }
}

/// Expectations of one attribute; `None` fields are not checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttrExpect {
    /// DTYPE notation.
    pub dtype: Option<Value>,
    /// Dimensions (`[]` for a scalar).
    pub shape: Option<Vec<u64>>,
    /// The value (VALUE rules; nested lists for a non-scalar attribute).
    pub value: Option<Value>,
}

impl AttrExpect {
    /// Expects this dtype and value.
    pub fn new(dtype: impl Into<Value>, value: Value) -> Self {
        AttrExpect {
            dtype: Some(dtype.into()),
            shape: None,
            value: Some(value),
        }
    }

    /// Expects these dimensions too.
    pub fn shape(mut self, shape: &[u64]) -> Self {
        self.shape = Some(shape.to_vec());
        self
    }

    fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        if let Some(v) = &self.dtype {
            m.insert("dtype".into(), v.clone());
        }
        if let Some(v) = &self.shape {
            m.insert("shape".into(), json!(v));
        }
        if let Some(v) = &self.value {
            m.insert("value".into(), v.clone());
        }
        Value::Object(m)
    }
}

/// How a link is stored in its parent group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkExpect {
    /// A hard link.
    Hard,
    /// A soft link to this path.
    Soft {
        /// The target path as stored.
        target: String,
    },
    /// An external link.
    External {
        /// The file name as stored.
        file: String,
        /// The object path in that file.
        path: String,
    },
}

/// Everything one file is expected to contain, as the JSON document `h5py_check.py` reads.
/// Paths are absolute; adding the same path twice replaces the earlier expectation (attributes:
/// the same path and name).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expectations {
    superblock_version: Option<u8>,
    userblock_size: Option<u64>,
    groups: BTreeMap<String, Option<Vec<String>>>,
    group_order: BTreeMap<String, Vec<String>>,
    group_storage: BTreeMap<String, String>,
    objects: BTreeMap<String, serde_json::Map<String, Value>>,
    links: BTreeMap<String, LinkExpect>,
    datasets: BTreeMap<String, DatasetExpect>,
    attr_names: BTreeMap<String, Vec<String>>,
    attr_order: BTreeMap<String, Vec<String>>,
    attrs: BTreeMap<String, BTreeMap<String, AttrExpect>>,
}

impl Expectations {
    /// Expects nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Expects this superblock version (0/1: earliest format bounds, 2: v1.8, 3: v1.10+).
    pub fn superblock_version(mut self, version: u8) -> Self {
        self.superblock_version = Some(version);
        self
    }

    /// Expects this user block size.
    pub fn userblock_size(mut self, size: u64) -> Self {
        self.userblock_size = Some(size);
        self
    }

    /// Expects a group at `path` with exactly these members (links of any kind), in any order.
    pub fn group(mut self, path: &str, members: &[&str]) -> Self {
        let members = members.iter().map(|s| (*s).to_owned()).collect();
        self.groups.insert(path.to_owned(), Some(members));
        self
    }

    /// Expects a group at `path`, whatever its members.
    pub fn group_exists(mut self, path: &str) -> Self {
        self.groups.insert(path.to_owned(), None);
        self
    }

    /// Expects the group at `path` to list exactly these members in this order (h5py's
    /// iteration order: creation order when the group tracks it, else name order).
    pub fn group_ordered(mut self, path: &str, members: &[&str]) -> Self {
        self.groups.entry(path.to_owned()).or_insert(None);
        let members = members.iter().map(|s| (*s).to_owned()).collect();
        self.group_order.insert(path.to_owned(), members);
        self
    }

    /// Expects the group at `path` to store its links as `storage` says (`"symbol_table"`,
    /// `"compact"` or `"dense"`, as libhdf5's `H5Gget_info` reports).
    pub fn group_storage(mut self, path: &str, storage: &str) -> Self {
        self.groups.entry(path.to_owned()).or_insert(None);
        self.group_storage
            .insert(path.to_owned(), storage.to_owned());
        self
    }

    /// Expects the object at `path` to have an object header of `version` (1 or 2).
    pub fn header_version(mut self, path: &str, version: u8) -> Self {
        self.objects
            .entry(path.to_owned())
            .or_default()
            .insert("header_version".into(), json!(version));
        self
    }

    /// Expects the object at `path` to store its attributes `"compact"` (header messages) or
    /// `"dense"` (fractal heap and v2 B-tree).
    pub fn attr_storage(mut self, path: &str, storage: &str) -> Self {
        self.objects
            .entry(path.to_owned())
            .or_default()
            .insert("attr_storage".into(), json!(storage));
        self
    }

    /// Expects h5py to list the attributes of the object at `path` in exactly this order
    /// (creation order when the object tracks it, else name order).
    pub fn attr_order(mut self, path: &str, names: &[&str]) -> Self {
        let names = names.iter().map(|s| (*s).to_owned()).collect();
        self.attr_order.insert(path.to_owned(), names);
        self
    }

    /// Expects the object at `path` to count `count` hard links to it.
    pub fn refcount(mut self, path: &str, count: u32) -> Self {
        self.objects
            .entry(path.to_owned())
            .or_default()
            .insert("refcount".into(), json!(count));
        self
    }

    /// Expects the link named by `path` to be stored as `link`.
    pub fn link(mut self, path: &str, link: LinkExpect) -> Self {
        self.links.insert(path.to_owned(), link);
        self
    }

    /// Expects a hard link at `path`.
    pub fn hard_link(self, path: &str) -> Self {
        self.link(path, LinkExpect::Hard)
    }

    /// Expects a soft link at `path` to `target`.
    pub fn soft_link(self, path: &str, target: &str) -> Self {
        let target = target.to_owned();
        self.link(path, LinkExpect::Soft { target })
    }

    /// Expects an external link at `path` to `object` in `file`.
    pub fn external_link(self, path: &str, file: &str, object: &str) -> Self {
        let (file, path_in) = (file.to_owned(), object.to_owned());
        self.link(
            path,
            LinkExpect::External {
                file,
                path: path_in,
            },
        )
    }

    /// Expects a dataset at `path`.
    pub fn dataset(mut self, path: &str, ds: DatasetExpect) -> Self {
        self.datasets.insert(path.to_owned(), ds);
        self
    }

    /// Expects the object at `path` to have exactly these attributes, in any order.
    pub fn attr_names(mut self, path: &str, names: &[&str]) -> Self {
        let names = names.iter().map(|s| (*s).to_owned()).collect();
        self.attr_names.insert(path.to_owned(), names);
        self
    }

    /// Expects the object at `path` to have attribute `name`.
    pub fn attr(mut self, path: &str, name: &str, attr: AttrExpect) -> Self {
        self.attrs
            .entry(path.to_owned())
            .or_default()
            .insert(name.to_owned(), attr);
        self
    }

    /// The JSON document (format documented at the top of `tests/verify/h5py_check.py`).
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        if let Some(v) = self.superblock_version {
            m.insert("superblock_version".into(), json!(v));
        }
        if let Some(v) = self.userblock_size {
            m.insert("userblock_size".into(), json!(v));
        }
        if !self.groups.is_empty() {
            let groups: serde_json::Map<String, Value> = self
                .groups
                .iter()
                .map(|(p, members)| {
                    let mut g = serde_json::Map::new();
                    if let Some(names) = members {
                        g.insert("members".into(), json!(names));
                    }
                    if let Some(names) = self.group_order.get(p) {
                        g.insert("ordered_members".into(), json!(names));
                    }
                    if let Some(s) = self.group_storage.get(p) {
                        g.insert("storage".into(), json!(s));
                    }
                    (p.clone(), Value::Object(g))
                })
                .collect();
            m.insert("groups".into(), Value::Object(groups));
        }
        if !self.objects.is_empty() {
            let objects: serde_json::Map<String, Value> = self
                .objects
                .iter()
                .map(|(p, o)| (p.clone(), Value::Object(o.clone())))
                .collect();
            m.insert("objects".into(), Value::Object(objects));
        }
        if !self.links.is_empty() {
            let links: serde_json::Map<String, Value> = self
                .links
                .iter()
                .map(|(p, l)| {
                    let l = match l {
                        LinkExpect::Hard => json!({"kind": "hard"}),
                        LinkExpect::Soft { target } => json!({"kind": "soft", "target": target}),
                        LinkExpect::External { file, path } => {
                            json!({"kind": "external", "file": file, "path": path})
                        }
                    };
                    (p.clone(), l)
                })
                .collect();
            m.insert("links".into(), Value::Object(links));
        }
        if !self.datasets.is_empty() {
            let ds: serde_json::Map<String, Value> = self
                .datasets
                .iter()
                .map(|(p, d)| (p.clone(), d.to_json()))
                .collect();
            m.insert("datasets".into(), Value::Object(ds));
        }
        if !self.attr_order.is_empty() {
            m.insert("attr_order".into(), json!(self.attr_order));
        }
        if !self.attr_names.is_empty() {
            m.insert("attr_names".into(), json!(self.attr_names));
        }
        if !self.attrs.is_empty() {
            let attrs: serde_json::Map<String, Value> = self
                .attrs
                .iter()
                .map(|(p, a)| {
                    let a: serde_json::Map<String, Value> =
                        a.iter().map(|(n, e)| (n.clone(), e.to_json())).collect();
                    (p.clone(), Value::Object(a))
                })
                .collect();
            m.insert("attrs".into(), Value::Object(attrs));
        }
        Value::Object(m)
    }
}

/// Reads `file` with h5py and checks every expectation.
///
/// `Ok(())` when everything matches. `Err` carries the script's mismatch lines (one per
/// mismatch) and its standard error; also when h5py cannot open the file at all or the script
/// dies. Panics when the tools are missing (see [`python()`]) or when the script rejects the
/// expectations themselves (a bug in the test, not a finding about the file).
pub fn check_with_h5py(file: &Path, exp: &Expectations) -> Result<(), String> {
    check_with(Reference::Hdf5v114, file, exp)
}

/// [`check_with_h5py`] with both references (h5py on HDF5 1.14 and on HDF5 2.0): `Err` holds
/// every reference's mismatches.
pub fn check_with_both(file: &Path, exp: &Expectations) -> Result<(), String> {
    check_with_readers(file, exp, false)
}

/// The references that read a file written in HDF5 2.0's formats (`hdf5_2_formats`: layout
/// message or datatype version 5, which HDF5 1.14 refuses) — only [`Reference::Hdf5v200`] —
/// or in older ones (both).
pub fn readers(hdf5_2_formats: bool) -> &'static [Reference] {
    if hdf5_2_formats {
        &[Reference::Hdf5v200]
    } else {
        &Reference::ALL
    }
}

/// [`check_with_h5py`] with every reference of [`readers`]`(hdf5_2_formats)`; `Err` holds
/// every reference's mismatches.
pub fn check_with_readers(
    file: &Path,
    exp: &Expectations,
    hdf5_2_formats: bool,
) -> Result<(), String> {
    let errors: Vec<String> = readers(hdf5_2_formats)
        .iter()
        .filter_map(|&r| {
            check_with(r, file, exp)
                .err()
                .map(|e| format!("[{r:?}] {e}"))
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

/// [`check_with_h5py`] with the h5py of `reference`.
pub fn check_with(reference: Reference, file: &Path, exp: &Expectations) -> Result<(), String> {
    check_files_with(reference, &[file], exp)
}

/// [`check_with_h5py`] of several files against the same expectations, in one h5py process
/// (a test checking many files pays the interpreter's start once). `Err` names each file that
/// disagrees with its mismatches.
pub fn check_files_with_h5py(files: &[&Path], exp: &Expectations) -> Result<(), String> {
    check_files_with(Reference::Hdf5v114, files, exp)
}

/// [`check_files_with_h5py`] with the h5py of `reference`.
pub fn check_files_with(
    reference: Reference,
    files: &[&Path],
    exp: &Expectations,
) -> Result<(), String> {
    assert!(!files.is_empty(), "check_files_with: no file to check");
    let py = reference.python();
    let script = check_script();
    let mut child = Command::new(&py)
        .arg(&script)
        .args(files)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {} {}: {e}", py.display(), script.display()));
    let doc = exp.to_json().to_string();
    // A failed write (the script died before reading) shows in its exit status and stderr.
    let sent = match child.stdin.take() {
        Some(mut stdin) => stdin.write_all(doc.as_bytes()),
        None => Ok(()),
    };
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("h5py_check.py did not finish: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => Ok(()),
        Some(2) if stderr.contains("h5py_check: bad expectations:") => {
            panic!(
                "h5py_check.py rejected the expectations: {}\n{doc}",
                stderr.trim()
            )
        }
        code => {
            let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            let mut msg = format!(
                "h5py disagrees with {} (h5py_check.py {}):\n{stdout}",
                names.join(", "),
                code.map_or_else(|| out.status.to_string(), |c| format!("exit {c}"))
            );
            if !stderr.trim().is_empty() {
                msg.push_str(&stderr);
            }
            if let Err(e) = sent {
                msg.push_str(&format!("(sending the expectations failed: {e})\n"));
            }
            Err(msg)
        }
    }
}

/// The directory of hdf5plugin's filter plugins in the Python environment, if any, so that
/// `h5dump` can decode lz4/zstd/blosc/bitshuffle/bzip2 data too (lzf is h5py's own, not a
/// libhdf5 plugin: `h5dump` cannot read lzf-compressed data).
fn plugin_dir() -> Option<&'static PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = Command::new(python_candidate())
            .args(["-c", "import hdf5plugin; print(hdf5plugin.PLUGIN_PATH)"])
            .output()
            .ok()?;
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        (out.status.success() && dir.is_dir()).then_some(dir)
    })
    .as_ref()
}

/// The `h5dump` command with `HDF5_PLUGIN_PATH` pointed at hdf5plugin's plugins unless set.
fn h5dump_command() -> Command {
    let mut cmd = Command::new("h5dump");
    if std::env::var_os("HDF5_PLUGIN_PATH").is_none()
        && let Some(dir) = plugin_dir()
    {
        cmd.env("HDF5_PLUGIN_PATH", dir);
    }
    cmd
}

/// Runs a prepared `h5dump` command; panics if it is not installed.
fn run_h5dump(mut cmd: Command) -> std::process::Output {
    match cmd.output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "h5dump is not installed; run `scripts/setup-tools` (it installs Debian's hdf5-tools)"
        ),
        Err(e) => panic!("cannot run h5dump: {e}"),
    }
}

/// h5dump's version line (`"h5dump: Version 1.10.8"`). Panics when `h5dump` is not installed.
pub fn h5dump_version() -> String {
    let mut cmd = h5dump_command();
    cmd.arg("--version");
    let out = run_h5dump(cmd);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Runs `h5dump ARGS... FILE` and returns its standard output.
///
/// `Err` carries the exit status, standard error and output when h5dump exits non-zero (for
/// example a file it cannot open or data it cannot decode). Panics when `h5dump` is not installed
/// (run `scripts/setup-tools`). `HDF5_PLUGIN_PATH` is pointed at hdf5plugin's plugins unless it is
/// already set.
pub fn h5dump(args: &[&str], file: &Path) -> Result<String, String> {
    let mut cmd = h5dump_command();
    cmd.args(args).arg(file);
    let out = run_h5dump(cmd);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "h5dump {} {} failed ({}):\n{}{stdout}",
            args.join(" "),
            file.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The elements listed in the `DATA { ... }` block of dataset `dataset_path` in h5dump's DDL
/// output, in order, each as h5dump prints it: numbers as text (`1.5`), strings with their quotes
/// (`"ab"`), compound elements as `{ 1, 2.5 }` with whitespace collapsed. The `(i,j):` index
/// prefixes are dropped. Works on whole-file dumps (nested `GROUP` blocks) and on `-d PATH`
/// output. Panics (test helper) when the dataset or its `DATA` block is not in `output`.
pub fn h5dump_data_values(output: &str, dataset_path: &str) -> Vec<String> {
    let data = data_block(output, dataset_path).unwrap_or_else(|| {
        panic!("no DATA block of dataset {dataset_path} in h5dump output:\n{output}")
    });
    split_elements(data)
}

/// Raw text inside the `DATA { }` block of one dataset (not of its attributes).
fn data_block<'a>(output: &'a str, dataset_path: &str) -> Option<&'a str> {
    let want = normalize_path(dataset_path);
    // Open blocks: (first word of the header, absolute path for GROUP/DATASET), innermost last.
    let mut stack: Vec<(String, Option<String>)> = Vec::new();
    let mut line_start = 0;
    for line in output.split_inclusive('\n') {
        let here = line_start;
        line_start += line.len();
        let (opens, closes, header) = braces(line);
        for _ in 0..closes {
            stack.pop();
        }
        let Some(header) = header else { continue };
        let word = header.split_whitespace().next().unwrap_or("").to_owned();
        if word == "DATA"
            && matches!(stack.last(), Some((k, Some(p))) if k == "DATASET" && *p == want)
        {
            return Some(until_close(&output[here + header.len() + 1..]));
        }
        if opens == 0 {
            continue;
        }
        let path = match (word.as_str(), quoted_name(&header)) {
            ("GROUP" | "DATASET", Some(n)) => Some(join_path(&stack, &n)),
            _ => None,
        };
        stack.push((word, path));
        for _ in 1..opens {
            stack.push(("VALUE".into(), None));
        }
    }
    None
}

/// `text` up to the unquoted `}` that closes the block it starts inside (all of it if none).
fn until_close(text: &str) -> &str {
    let mut depth = 0usize;
    let mut in_quote = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_quote {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_quote = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_quote = true,
            '{' => depth += 1,
            '}' if depth == 0 => return &text[..i],
            '}' => depth -= 1,
            _ => {}
        }
    }
    text
}

/// Counts the unquoted `}` of a line that close earlier blocks and the unquoted `{` left open at
/// its end, and returns the text before its first unquoted `{` (`None` without one).
fn braces(line: &str) -> (usize, usize, Option<String>) {
    let mut depth: i64 = 0;
    let mut min: i64 = 0;
    let mut in_quote = false;
    let mut escaped = false;
    let mut header = None;
    for (i, c) in line.char_indices() {
        if in_quote {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_quote = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_quote = true,
            '{' => {
                header.get_or_insert_with(|| line[..i].to_owned());
                depth += 1;
            }
            '}' => {
                depth -= 1;
                min = min.min(depth);
            }
            _ => {}
        }
    }
    let closes = usize::try_from(-min).unwrap_or(0);
    let opens = usize::try_from(depth - min).unwrap_or(0);
    (opens, closes, header)
}

/// The first `"..."` of a block header, unescaped.
fn quoted_name(header: &str) -> Option<String> {
    let start = header.find('"')?;
    let mut name = String::new();
    let mut chars = header[start + 1..].chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => name.push(chars.next()?),
            '"' => return Some(name),
            _ => name.push(c),
        }
    }
    None
}

fn normalize_path(p: &str) -> String {
    let parts: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
    format!("/{}", parts.join("/"))
}

/// Absolute path of a block named `name` under the innermost enclosing GROUP.
fn join_path(stack: &[(String, Option<String>)], name: &str) -> String {
    if name.starts_with('/') {
        return normalize_path(name);
    }
    let parent = stack
        .iter()
        .rev()
        .find_map(|(k, p)| (k == "GROUP").then_some(p.as_deref()).flatten())
        .unwrap_or("/");
    normalize_path(&format!("{parent}/{name}"))
}

/// Splits DATA text into elements: top-level commas separate them, `(i,j):` prefixes go.
fn split_elements(data: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    let mut in_quote = false;
    let mut escaped = false;
    let mut chars = data.chars().peekable();
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        let t = cur.split_whitespace().collect::<Vec<_>>().join(" ");
        if !t.is_empty() {
            out.push(t);
        }
        cur.clear();
    };
    while let Some(c) = chars.next() {
        if in_quote {
            cur.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_quote = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_quote = true;
                cur.push(c);
            }
            '(' if depth == 0 && cur.trim().is_empty() => {
                // An index prefix `(0,1):`; drop it.
                for d in chars.by_ref() {
                    if d == ')' {
                        break;
                    }
                }
                if chars.peek() == Some(&':') {
                    chars.next();
                }
            }
            '{' => {
                depth += 1;
                cur.push(c);
            }
            '}' => {
                depth = depth.saturating_sub(1);
                cur.push(c);
            }
            ',' if depth == 0 => flush(&mut cur, &mut out),
            _ => cur.push(c),
        }
    }
    flush(&mut cur, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str = r#"HDF5 "f.h5" {
GROUP "/" {
   ATTRIBUTE "a" {
      DATATYPE  H5T_STD_I32LE
      DATASPACE  SIMPLE { ( 2 ) / ( 2 ) }
      DATA {
      (0): 7, 8
      }
   }
   GROUP "g" {
      DATASET "c" {
         DATATYPE  H5T_COMPOUND {
            H5T_STD_I32LE "x";
            H5T_IEEE_F64LE "y";
         }
         DATASPACE  SIMPLE { ( 2 ) / ( 2 ) }
         DATA {
         (0): {
               1,
               2.5
            },
         (1): {
               3,
               -4
            }
         }
      }
      DATASET "s" {
         DATATYPE  H5T_STRING {
            STRSIZE 5;
         }
         DATASPACE  SIMPLE { ( 3 ) / ( 3 ) }
         DATA {
         (0): "a,b", "q\"}", ""
         }
         ATTRIBUTE "x" {
            DATATYPE  H5T_STD_I32LE
            DATASPACE  SCALAR
            DATA {
            (0): 99
            }
         }
      }
   }
   DATASET "m" {
      DATATYPE  H5T_STD_I32LE
      DATASPACE  SIMPLE { ( 2, 3 ) / ( 2, 3 ) }
      DATA {
      (0,0): 1, 2, 3,
      (1,0): 4, 5, 6
      }
   }
}
}
"#;

    #[test]
    fn parses_nested_compound_string_and_2d_blocks() {
        assert_eq!(
            h5dump_data_values(DUMP, "/m"),
            ["1", "2", "3", "4", "5", "6"]
        );
        assert_eq!(
            h5dump_data_values(DUMP, "/g/c"),
            ["{ 1, 2.5 }", "{ 3, -4 }"]
        );
        assert_eq!(
            h5dump_data_values(DUMP, "g/s"),
            [r#""a,b""#, r#""q\"}""#, r#""""#]
        );
    }

    #[test]
    #[should_panic(expected = "no DATA block of dataset /a")]
    fn an_attribute_is_not_a_dataset() {
        let _ = h5dump_data_values(DUMP, "/a");
    }

    #[test]
    fn one_line_data_and_dash_d_output() {
        let out = "HDF5 \"f\" {\nDATASET \"/g/x\" {\n   DATATYPE  H5T_STD_I8LE\n   DATASPACE  SCALAR\n   DATA { (0): -3 }\n}\n}\n";
        assert_eq!(h5dump_data_values(out, "/g/x"), ["-3"]);
    }

    #[test]
    fn expectations_serialize_to_the_documented_json() {
        let exp = Expectations::new()
            .superblock_version(2)
            .group("/", &["d"])
            .soft_link("/s", "/d")
            .dataset(
                "/d",
                DatasetExpect::new("<i4", &[2])
                    .contiguous()
                    .filters(vec![FilterExpect::new(1, 1, &[4])])
                    .digest("ab")
                    .spot(&[1], json!(5)),
            )
            .attr("/d", "u", AttrExpect::new("|S1", json!("m")).shape(&[]));
        assert_eq!(
            exp.to_json(),
            json!({
                "superblock_version": 2,
                "groups": {"/": {"members": ["d"]}},
                "links": {"/s": {"kind": "soft", "target": "/d"}},
                "datasets": {"/d": {"dtype": "<i4", "shape": [2], "chunks": null,
                    "layout": "contiguous", "filters": [[1, 1, [4]]],
                    "digest": {"sha256": "ab"}, "spot": [[[1], 5]]}},
                "attrs": {"/d": {"u": {"dtype": "|S1", "shape": [], "value": "m"}}}
            })
        );
    }

    #[test]
    fn digests_are_little_endian_sha256() {
        assert_eq!(digest_le(&[1u16, 2]), digest_le_bytes(&[1, 0, 2, 0]));
        assert_eq!(digest_le(&[true, false]), digest_le_bytes(&[1, 0]));
        assert_eq!(<f32 as LeBytes>::NUMPY, "<f4");
    }
}
