//! Dev-only access to the HDF5 fixture corpus.
//!
//! `fixtures/files/` holds real HDF5 files written by libhdf5 (through pinned h5py, see
//! `fixtures/make_fixtures.py` and `fixtures/README.md`) and `manifest.json`, which records,
//! per file, every object h5py sees: links, groups, datasets with their type, shape, layout,
//! filters, fill value and values, attributes with their values. This crate mirrors that JSON in
//! typed structs ([`Manifest`]) and offers helpers to compare what the engine reads with what
//! the manifest expects ([`values`]). The other direction, files checked by the reference
//! implementation (h5py and h5dump), is [`verify`].
//!
//! Value encoding (the `values`, `value`, `fill_value` and `spot_values[].value` fields) is kept as
//! [`serde_json::Value`] because its shape follows the datatype:
//! - integers and enums: JSON integers; bool (h5py's enum) : JSON `true`/`false`;
//! - floats (any size): JSON strings holding Python's `repr` of the value widened to f64
//!   (`"1.5"`, `"-0.0"`, `"inf"`, `"-inf"`, `"nan"`, `"5e-324"`), exact; parse with
//!   [`values::parse_f64`];
//! - complex: `[re, im]`, each a float string;
//! - strings (fixed or variable): the JSON string as h5py returns it, i.e. with the padding of
//!   fixed-size strings removed (the on-disk bytes are in `raw_hex`); if not UTF-8, a list of
//!   byte values;
//! - opaque: list of byte values; compound: JSON object member -> value (member order kept);
//!   array-typed elements and vlen sequences: JSON lists;
//! - object reference: `{"object": "/path"}` (`null` for a null reference); region reference:
//!   `{"region_of", "selection", "npoints", "bounds_start", "bounds_end", "values"}`;
//! - N-dimensional datasets: nested lists in C order; scalar dataspace: the bare element;
//!   null dataspace: `null`.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

pub mod mutate;
mod sha256;
pub mod values;
pub mod verify;

pub use sha256::{sha256, sha256_hex};

/// Directory holding the fixture files and `manifest.json`.
///
/// `H5_FIXTURES_DIR` overrides the default `<workspace>/fixtures/files` (e.g. to test a
/// freshly regenerated corpus).
pub fn fixtures_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("H5_FIXTURES_DIR") {
        return PathBuf::from(dir);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
        .join("fixtures")
        .join("files")
}

/// Path of one fixture file by name (e.g. `"layouts_latest.h5"`).
pub fn fixture_path(name: &str) -> PathBuf {
    fixtures_dir().join(name)
}

/// Reads and parses `manifest.json`. Panics (test helper) if it is missing or malformed.
pub fn manifest() -> Manifest {
    let path = fixtures_dir().join("manifest.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad manifest {}: {e}", path.display()))
}

/// Lowercase hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Decodes lowercase or uppercase hex; `None` on odd length or a non-hex digit.
pub fn from_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    hex.as_bytes()
        .chunks_exact(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
        .collect()
}

/// The whole manifest (`manifest.json`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Version of this schema; bumped on incompatible changes.
    pub schema_version: u32,
    /// Versions of the tools that wrote the corpus.
    pub generator: Generator,
    /// Every HDF5 file of the corpus, sorted by name.
    pub files: Vec<FixtureFile>,
    /// Non-HDF5 files the corpus needs (external raw data files), sorted by name.
    pub aux_files: Vec<AuxFile>,
}

impl Manifest {
    /// The file entry named `name`.
    pub fn file(&self, name: &str) -> Option<&FixtureFile> {
        self.files.iter().find(|f| f.name == name)
    }
}

/// Who wrote the corpus.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generator {
    /// Generator script, relative to the workspace root.
    pub script: String,
    /// h5py version.
    pub h5py: String,
    /// libhdf5 version h5py was linked with.
    pub hdf5: String,
    /// numpy version.
    pub numpy: String,
    /// hdf5plugin version, if it was installed (plugin-filter fixtures exist only then).
    pub hdf5plugin: Option<String>,
    /// netCDF4 (netCDF4-python) version, if it was installed (the `*.nc` fixtures exist only then).
    #[serde(default)]
    pub netcdf4: Option<String>,
    /// PyTables version, if it was installed (`pytables.h5` exists only then).
    #[serde(default)]
    pub tables: Option<String>,
    /// The second pinned writer (`h5py 3.16.0 (HDF5 2.0.0)`) of the `hdf5_2_*` files, or null.
    #[serde(default)]
    pub hdf5_2_writer: Option<String>,
}

/// A non-HDF5 file of the corpus.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuxFile {
    /// File name inside [`fixtures_dir`].
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the content, lowercase hex.
    pub sha256: String,
}

/// One HDF5 file and every object in it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureFile {
    /// File name inside [`fixtures_dir`].
    pub name: String,
    /// What the file covers, in words.
    pub theme: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the content, lowercase hex.
    pub sha256: String,
    /// libver bounds used to write it, `[low, high]` (`"earliest"`, `"v108"`, `"latest"`...).
    pub libver: Vec<String>,
    /// Bytes before the superblock (0 or a power of two >= 512).
    pub userblock_size: u64,
    /// Superblock version byte as written.
    pub superblock_version: u8,
    /// Library that wrote the file and the libhdf5 it bundled, e.g. `h5py 3.12.1 (HDF5 1.14.4)`
    /// or `netCDF4 1.7.2 (libnetcdf 4.9.4-development, HDF5 1.14.2)`.
    #[serde(default)]
    pub writer: Option<String>,
    /// Every object reached from the root by links, depth-first in link-name order; the root
    /// group `/` first. Objects reached a second time by another hard link are listed again
    /// with `hard_link_of` set and are not descended into.
    pub objects: Vec<Object>,
}

impl FixtureFile {
    /// Absolute path of the file.
    pub fn path(&self) -> PathBuf {
        fixture_path(&self.name)
    }

    /// The object at `path` (absolute, as listed).
    pub fn object(&self, path: &str) -> Option<&Object> {
        self.objects.iter().find(|o| o.path == path)
    }

    /// All dataset entries (first occurrences only, not `hard_link_of` repeats).
    pub fn datasets(&self) -> impl Iterator<Item = &Object> {
        self.objects
            .iter()
            .filter(|o| o.kind == ObjectKind::Dataset && o.hard_link_of.is_none())
    }
}

/// What a link leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    /// A group (hard link).
    Group,
    /// A dataset (hard link).
    Dataset,
    /// A committed (named) datatype (hard link).
    Datatype,
    /// A soft link; see `target`, `dangling`.
    SoftLink,
    /// An external link; see `file`, `target`.
    ExternalLink,
}

/// One entry of [`FixtureFile::objects`]. Fields are grouped by the kinds that carry them; a
/// field that does not apply is `None` (absent in the JSON).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Object {
    /// Absolute path of the link.
    pub path: String,
    /// Kind of the link target.
    pub kind: ObjectKind,

    // ---- hard-linked objects (group, dataset, datatype)
    /// Object header address (relative to the superblock, i.e. excluding the userblock).
    pub addr: Option<u64>,
    /// Object reference count (number of hard links).
    pub refcount: Option<u32>,
    /// Object header version (1 or 2).
    pub object_header_version: Option<u8>,
    /// Modification time libhdf5 reports (0: none stored).
    pub mtime: Option<i64>,
    /// Set when this object was already listed under another path (same address).
    pub hard_link_of: Option<String>,
    /// Attributes in name order.
    #[serde(default)]
    pub attributes: Vec<Attribute>,
    /// Attribute names in creation order, when creation order is tracked.
    pub attributes_creation_order: Option<Vec<String>>,

    // ---- groups
    /// Link creation order of the group: `"none"`, `"tracked"` or `"indexed"`.
    pub link_creation_order: Option<String>,
    /// Link names in name order (byte-wise, as libhdf5's name index).
    pub links: Option<Vec<String>>,
    /// Link names in creation order, when libhdf5 could iterate that way.
    pub links_creation_order: Option<Vec<String>>,

    // ---- soft and external links
    /// Link value: the target path.
    pub target: Option<String>,
    /// Soft links: whether the target does not exist.
    pub dangling: Option<bool>,
    /// External links: the file name as stored.
    pub file: Option<String>,

    // ---- datasets and committed datatypes
    /// numpy `str(dtype)` as h5py maps the type.
    pub dtype: Option<String>,
    /// The HDF5 datatype as libhdf5 reports it.
    #[serde(rename = "type")]
    pub type_desc: Option<TypeDesc>,

    // ---- datasets
    /// Dataspace class.
    pub dataspace: Option<DataspaceKind>,
    /// Current dimensions (`[]` for scalar, `None` for null).
    pub shape: Option<Vec<u64>>,
    /// Maximum dimensions, `None` entries are unlimited.
    pub maxshape: Option<Vec<Option<u64>>>,
    /// Storage layout.
    pub layout: Option<Layout>,
    /// Chunk dimensions (chunked layout only).
    pub chunks: Option<Vec<u64>>,
    /// h5py's summary of the compression filter (`"gzip"`, `"lzf"`, `"szip"`, or a number).
    pub compression: Option<Value>,
    /// h5py's summary of the compression options.
    pub compression_opts: Option<Value>,
    /// Whether the shuffle filter is present.
    pub shuffle: Option<bool>,
    /// Whether the Fletcher-32 filter is present.
    pub fletcher32: Option<bool>,
    /// Scale-offset parameter, if that filter is present.
    pub scaleoffset: Option<i64>,
    /// The filter pipeline in order.
    pub filters: Option<Vec<Filter>>,
    /// Space allocation time: `"early"`, `"late"`, `"incremental"`.
    pub alloc_time: Option<String>,
    /// Fill time: `"alloc"`, `"never"`, `"ifset"`.
    pub fill_time: Option<String>,
    /// Fill value status: `"undefined"`, `"default"`, `"user"`.
    pub fill_value_defined: Option<String>,
    /// Bytes of raw data allocated in the file.
    pub storage_size: Option<u64>,
    /// Fill value (value encoding), `None` for types without a fixed-size fill.
    pub fill_value: Option<Value>,
    /// Chunked: number of chunks allocated.
    pub num_chunks_allocated: Option<u64>,
    /// Chunked with at most 64 allocated chunks: each chunk as the index reports it.
    pub chunk_list: Option<Vec<ChunkInfo>>,
    /// Contiguous data stored in external raw files.
    pub external_files: Option<Vec<ExternalFile>>,
    /// Virtual datasets: source mappings.
    pub virtual_sources: Option<Vec<VirtualSource>>,
    /// Inline values (datasets with fewer than 1000 elements); value encoding, nested in C order.
    pub values: Option<Value>,
    /// Larger datasets: SHA-256 of the values as C-order little-endian bytes.
    pub values_sha256: Option<String>,
    /// Larger datasets: a few elements with their indices.
    pub spot_values: Option<Vec<SpotValue>>,
    /// Small fixed-size datasets (<= 2048 bytes): the bytes of all elements in the FILE datatype
    /// (file byte order, string padding as stored), lowercase hex.
    pub raw_hex: Option<String>,

    /// What the generator intended where h5py cannot report it.
    pub notes: Option<Notes>,
}

impl Object {
    /// `raw_hex` decoded.
    pub fn raw_bytes(&self) -> Option<Vec<u8>> {
        self.raw_hex.as_deref().and_then(from_hex)
    }

    /// The attribute named `name`.
    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| a.name == name)
    }
}

/// Dataspace class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataspaceKind {
    /// One element, no dimensions.
    Scalar,
    /// N-dimensional (possibly with zero-sized dimensions).
    Simple,
    /// No elements at all.
    Null,
}

/// Storage layout class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// Data inside the object header.
    Compact,
    /// One contiguous block (or external files).
    Contiguous,
    /// Chunked with an index.
    Chunked,
    /// Virtual dataset.
    Virtual,
}

/// One filter of a pipeline as libhdf5 reports it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// Filter id (1 deflate, 2 shuffle, 3 fletcher32, 4 szip, 5 nbit, 6 scaleoffset, 32000 lzf,
    /// 32001 blosc, 307 bzip2, 32004 lz4, 32008 bitshuffle, 32015 zstd, ...).
    pub id: u32,
    /// Name stored in (or registered for) the filter.
    pub name: String,
    /// Filter flags (bit 0: optional).
    pub flags: u32,
    /// Client data values as stored in the pipeline message.
    pub client_data: Vec<u64>,
}

/// One allocated chunk.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkInfo {
    /// Logical offset of the chunk (element coordinates).
    pub offset: Vec<u64>,
    /// Filter mask (bit i set: filter i was skipped).
    pub filter_mask: u32,
    /// Address of the stored chunk.
    pub address: u64,
    /// Stored (filtered) size in bytes.
    pub size: u64,
}

/// One external raw-data file segment.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalFile {
    /// File name as stored (relative to the fixtures directory).
    pub name: String,
    /// Byte offset in that file.
    pub offset: u64,
    /// Bytes of the dataset in that file.
    pub size: u64,
}

/// One virtual-dataset mapping source.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VirtualSource {
    /// Source file name (`"."`: the same file).
    pub file: String,
    /// Source dataset path.
    pub dataset: String,
}

/// One element of a large dataset or attribute.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpotValue {
    /// Element coordinates.
    pub index: Vec<u64>,
    /// Value (value encoding).
    pub value: Value,
}

/// One attribute.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attribute {
    /// Attribute name.
    pub name: String,
    /// numpy `str(dtype)`.
    pub dtype: String,
    /// The HDF5 datatype.
    #[serde(rename = "type")]
    pub type_desc: TypeDesc,
    /// Dataspace class.
    pub dataspace: DataspaceKind,
    /// Dimensions (`[]` scalar, `None` null).
    pub shape: Option<Vec<u64>>,
    /// Value (value encoding); `None` for a null dataspace or when hashed.
    pub value: Option<Value>,
    /// Large attributes: SHA-256 of the C-order little-endian bytes.
    pub values_sha256: Option<String>,
    /// Large attributes: a few elements.
    pub spot_values: Option<Vec<SpotValue>>,
}

/// Byte order of an atomic type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ByteOrder {
    /// Little-endian.
    Le,
    /// Big-endian.
    Be,
    /// Not applicable.
    None,
}

/// An HDF5 datatype as libhdf5 reports it (`"class"` is the tag).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "class", rename_all = "snake_case")]
pub enum TypeDesc {
    /// Fixed-point integer.
    Integer {
        /// Bytes.
        size: u64,
        /// Byte order.
        order: ByteOrder,
        /// Two's complement signed.
        signed: bool,
        /// Significant bits.
        precision: u32,
        /// Bit offset of the significant bits.
        bit_offset: u32,
    },
    /// IEEE floating point.
    Float {
        /// Bytes (2, 4 or 8).
        size: u64,
        /// Byte order.
        order: ByteOrder,
        /// Significant bits.
        precision: u32,
        /// Bit offset of the significant bits.
        bit_offset: u32,
    },
    /// Bitfield.
    Bitfield {
        /// Bytes.
        size: u64,
        /// Byte order.
        order: ByteOrder,
    },
    /// String.
    String {
        /// Variable-length string.
        variable: bool,
        /// Fixed size in bytes (`None` when variable).
        size: Option<u64>,
        /// `"ascii"` or `"utf8"`.
        charset: String,
        /// `"nullterm"`, `"nullpad"` or `"spacepad"`.
        padding: String,
    },
    /// Compound.
    Compound {
        /// Bytes per element.
        size: u64,
        /// Members in stored order.
        members: Vec<CompoundMember>,
    },
    /// Enumeration.
    Enum {
        /// Bytes.
        size: u64,
        /// Base integer type.
        base: Box<TypeDesc>,
        /// Members in stored order.
        members: Vec<EnumMember>,
    },
    /// Fixed-size array.
    Array {
        /// Bytes per element.
        size: u64,
        /// Array dimensions.
        dims: Vec<u64>,
        /// Element type.
        base: Box<TypeDesc>,
    },
    /// Variable-length sequence.
    VlenSequence {
        /// Element type.
        base: Box<TypeDesc>,
    },
    /// Opaque.
    Opaque {
        /// Bytes.
        size: u64,
        /// Tag string.
        tag: String,
    },
    /// Complex number (HDF5 2.0's class 11).
    Complex {
        /// Bytes (twice the base's).
        size: u64,
        /// Type of each part.
        base: Box<TypeDesc>,
    },
    /// Reference (old-style, as h5py writes them).
    Reference {
        /// Bytes per reference (8 object, 12 region with 8-byte offsets).
        size: u64,
        /// `"object"`, `"region"` or `"revised"` (HDF5 1.12's `H5T_STD_REF`).
        kind: String,
    },
}

/// A compound member.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompoundMember {
    /// Member name.
    pub name: String,
    /// Byte offset in the element.
    pub offset: u64,
    /// Member type.
    #[serde(rename = "type")]
    pub type_desc: TypeDesc,
}

/// An enumeration member.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnumMember {
    /// Member name.
    pub name: String,
    /// Member value.
    pub value: i64,
}

/// Generator intent that libhdf5 does not report through h5py.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Notes {
    /// Chunk index libhdf5 chooses for this dataset by its documented rules: `"btree_v1"`,
    /// `"single_chunk"`, `"implicit"`, `"fixed_array"`, `"extensible_array"`, `"btree_v2"`.
    pub chunk_index: Option<String>,
    /// Group storage: `"symbol_table"`, `"compact"`, `"dense"`.
    pub group_storage: Option<String>,
    /// Attribute storage: `"compact"`, `"dense"`.
    pub attribute_storage: Option<String>,
    /// Group creation order as requested: `"none"`, `"tracked"`, `"indexed"`.
    pub creation_order: Option<String>,
    /// Free-form remark.
    pub comment: Option<String>,
}
