//! The machinery of the corrupt-file corpus: running one case (open + every operation) in its own
//! thread with a time limit and a panic catcher, a per-allocation ceiling, and the map of every
//! structure of a fixture file (found by walking it with the `h5-format` decoders).

use std::collections::{BTreeSet, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::{Arc, Once, OnceLock, mpsc};
use std::time::{Duration, Instant};

use h5_chunkcache::selection::{Points, Selection};
use h5_core::dataset::{DatasetInfo, read};
use h5_core::file::{CacheSettings, FileShared};
use h5_core::nav::{ObjectKind, resolve};
use h5_core::{Error, ErrorKind, attribute, group, values};
use h5_format::message::{Message, decode_message, kind};
use h5_format::object_header::{decode_continuation_block, decode_first_chunk};
use h5_format::superblock::{self, Superblock};
use h5_io::MemoryStorage;

// ---------------------------------------------------------------------------------------------
// Bounded memory: the workspace forbids `unsafe` (so no capping allocator); a case whose absurd
// count drove an allocation would abort the binary on a failed allocation, and the resident set
// is checked after each family.

/// The most resident memory the test process may reach.
pub(crate) const MAX_RSS: u64 = 1 << 30;

/// Resident set size of this process in bytes (Linux), 0 when unknown.
pub(crate) fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

// ---------------------------------------------------------------------------------------------
// Running one case.

/// The time one case may take before it counts as a hang.
pub(crate) const CASE_TIMEOUT: Duration = Duration::from_secs(10);

/// A dataset larger than this (or of more than 64 chunks) is read at three points (first, middle, last element) instead of
/// whole, and is also asked for whole with an empty buffer, which it must refuse.
const MAX_READ: u64 = 32 << 10;

/// What one case did.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Operations that succeeded.
    pub(crate) ok: usize,
    /// The typed errors operations returned, as text.
    pub(crate) errors: Vec<String>,
    /// The same errors: the operation (the path it was on) and the error's kind.
    pub(crate) kinds: Vec<(String, ErrorKind)>,
    /// Time taken.
    pub(crate) elapsed: Duration,
}

impl Outcome {
    fn note<T>(&mut self, what: &str, r: Result<T, Error>) -> Option<T> {
        match r {
            Ok(v) => {
                self.ok += 1;
                Some(v)
            }
            Err(e) => {
                // Display and Debug of every error must work too.
                let _ = format!("{e:?}");
                self.errors.push(format!("{what}: {e}"));
                self.kinds.push((what.to_owned(), e.kind()));
                None
            }
        }
    }
}

const CASE_THREAD: &str = "corrupt-case";

fn quiet_case_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() != Some(CASE_THREAD) {
                default(info);
            }
        }));
    });
}

/// Opens `bytes` and runs every operation on `paths` in a thread of its own: `Err` names the
/// panic or the hang.
pub(crate) fn run_case(
    bytes: Vec<u8>,
    paths: Arc<Vec<String>>,
    dir: Option<PathBuf>,
) -> Result<Outcome, String> {
    run_storage(
        move || Arc::new(MemoryStorage::with_data(bytes)) as Arc<dyn h5_io::Storage>,
        paths,
        dir,
    )
}

/// As [`run_case`] with lookup3 checksum verification off, as the fuzzers run (their findings
/// carry the checksums of the bytes before the mutation).
pub(crate) fn run_case_unverified(
    bytes: Vec<u8>,
    paths: Arc<Vec<String>>,
) -> Result<Outcome, String> {
    run_storage_with(
        move || Arc::new(MemoryStorage::with_data(bytes)) as Arc<dyn h5_io::Storage>,
        paths,
        None,
        false,
    )
}

/// As [`run_case`], with any storage.
pub(crate) fn run_storage(
    storage: impl FnOnce() -> Arc<dyn h5_io::Storage> + Send + 'static,
    paths: Arc<Vec<String>>,
    dir: Option<PathBuf>,
) -> Result<Outcome, String> {
    run_storage_with(storage, paths, dir, true)
}

fn run_storage_with(
    storage: impl FnOnce() -> Arc<dyn h5_io::Storage> + Send + 'static,
    paths: Arc<Vec<String>>,
    dir: Option<PathBuf>,
    verify_checksums: bool,
) -> Result<Outcome, String> {
    quiet_case_panics();
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    std::thread::Builder::new()
        .name(CASE_THREAD.into())
        .spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(|| {
                if verify_checksums {
                    exercise(storage(), &paths, dir)
                } else {
                    h5_format::checksum::without_verification(|| exercise(storage(), &paths, dir))
                }
            }));
            let _ = tx.send(r.map_err(|p| {
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "non-string panic".into())
            }));
        })
        .map_err(|e| format!("cannot spawn: {e}"))?;
    match rx.recv_timeout(CASE_TIMEOUT) {
        Ok(Ok(mut o)) => {
            o.elapsed = start.elapsed();
            Ok(o)
        }
        Ok(Err(msg)) => Err(format!("PANIC: {msg}")),
        Err(_) => Err(format!("HANG: no answer within {CASE_TIMEOUT:?}")),
    }
}

/// Every operation of the engine on the file: open, resolve each path, list its links and
/// attributes (with their vlen strings), describe and read each dataset.
fn exercise(storage: Arc<dyn h5_io::Storage>, paths: &[String], dir: Option<PathBuf>) -> Outcome {
    let mut o = Outcome::default();
    // Files a writer left open (and damaged status flags) are read anyway, so that the rest of
    // the file is exercised; refusing them is tested in crates/h5/tests/open_for_writing.rs.
    let settings = CacheSettings {
        ignore_open_for_writing: true,
        ..CacheSettings::default()
    };
    let Some(file) = o.note("open", FileShared::open(storage, &settings, dir)) else {
        return o;
    };
    let root = file.root_address();
    let mut all: Vec<&str> = vec!["/"];
    all.extend(paths.iter().map(String::as_str));
    let verbose = std::env::var_os("CORRUPT_VERBOSE").is_some();
    for p in all {
        let t = Instant::now();
        let _timing = Defer(move || {
            if verbose && t.elapsed() > Duration::from_millis(10) {
                eprintln!("  {p}: {:?}", t.elapsed());
            }
        });
        let Some(r) = o.note(p, resolve(&file, root, "/", p)) else {
            continue;
        };
        match ObjectKind::of(&r.header) {
            ObjectKind::Group => {
                let _ = o.note(p, group::links(&r.file, &r.header));
            }
            ObjectKind::Dataset => {
                if let Some(info) = o.note(p, DatasetInfo::from_header(&r.file, &r.header)) {
                    // What `h5 ls` and `h5 dump` print of the type.
                    let _ = info.datatype.describe();
                    read_all(&mut o, p, &r.file, &info);
                }
            }
            _ => {}
        }
        if let Some(attrs) = o.note(p, attribute::attributes(&r.file, &r.header)) {
            for a in attrs {
                let _ = a.datatype.describe();
                if a.datatype.has_indirection() {
                    // Not every such type is a string: only a panic would matter here.
                    let _ = values::strings(&r.file, &a.datatype, &a.data);
                }
            }
        }
    }
    o
}

/// Every path of the file in `bytes` reachable through hard links from the root (at most
/// 2000), for files that have no manifest (the fuzzers' findings).
pub(crate) fn all_paths(bytes: &[u8]) -> Vec<String> {
    h5_format::checksum::without_verification(|| all_paths_verified(bytes))
}

fn all_paths_verified(bytes: &[u8]) -> Vec<String> {
    let settings = CacheSettings {
        ignore_open_for_writing: true,
        ..CacheSettings::default()
    };
    let storage = Arc::new(MemoryStorage::with_data(bytes.to_vec()));
    let Ok(file) = FileShared::open(storage, &settings, None) else {
        return Vec::new();
    };
    let root = file.root_address();
    let mut out = Vec::new();
    let mut pending = vec!["/".to_owned()];
    let mut seen = HashSet::new();
    while let Some(p) = pending.pop() {
        let Ok(r) = resolve(&file, root, "/", &p) else {
            continue;
        };
        if !seen.insert(r.header.address) || out.len() >= 2000 {
            continue;
        }
        if ObjectKind::of(&r.header) == ObjectKind::Group {
            for l in group::links(&r.file, &r.header).unwrap_or_default() {
                let child = format!("{}/{}", p.trim_end_matches('/'), l.name);
                out.push(child.clone());
                pending.push(child);
            }
        }
    }
    out
}

/// Runs a closure when dropped.
struct Defer<F: FnMut()>(F);

impl<F: FnMut()> Drop for Defer<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// Points sampled from a big dataset of rank `rank` whose first dimension has `first` (at most
/// 64) elements: three spread points, then the first elements along that dimension.
fn flat_len(rank: usize, first: u64) -> usize {
    if rank == 0 {
        3
    } else {
        3 + first.saturating_sub(3) as usize
    }
}

fn read_all(o: &mut Outcome, p: &str, file: &Arc<FileShared>, info: &DatasetInfo) {
    let n = info
        .dims()
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .and_then(|n| n.checked_mul(info.elem_size() as u64));
    // Datasets of very many chunks are sampled too (thousands of chunk decodes per case would
    // make the corpus slow without finding more).
    let chunks = info.chunk_dims().map_or(1, |c| {
        info.dims().iter().zip(&c).fold(1u64, |acc, (&d, &c)| {
            acc.saturating_mul(d.div_ceil(c.max(1)))
        })
    });
    match n {
        Some(n) if n <= MAX_READ && chunks <= 64 => {
            let mut buf = vec![0u8; n as usize];
            if o.note(p, read(file, info, &Selection::All, None, None, &mut buf))
                .is_some()
                && info.datatype.has_indirection()
            {
                let _ = values::strings(file, &info.datatype, &buf);
            }
        }
        _ => {
            if n.is_none_or(|n| n > 1 << 40) {
                // Absurdly large: the engine must refuse the empty buffer, not allocate.
                let mut buf = [0u8; 0];
                let _ = o.note(p, read(file, info, &Selection::All, None, None, &mut buf));
            }
            let dims = info.dims();
            let mut flat: Vec<u64> = [0u64, 1, 2]
                .iter()
                .flat_map(|&k| dims.iter().map(move |&d| d.saturating_sub(1) * k / 2))
                .collect();
            // And the first 64 elements along the slowest dimension, so that the first blocks
            // of an index (an extensible array's first data blocks) are reached too.
            let first = dims.first().copied().unwrap_or(0).min(64);
            for i in 3..first {
                flat.push(i);
                flat.extend(std::iter::repeat_n(0, dims.len().saturating_sub(1)));
            }
            // The harness's own buffer stays small too.
            if let Ok(points) = Points::new(dims.len(), flat)
                && info.elem_size() <= 1 << 20
            {
                let mut buf = vec![0u8; flat_len(dims.len(), first) * info.elem_size()];
                let _ = o.note(
                    p,
                    read(file, info, &Selection::Points(points), None, None, &mut buf),
                );
            } else {
                // Still sets the layout up (and must refuse the empty buffer).
                let _ = o.note(p, read(file, info, &Selection::All, None, None, &mut []));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The fixtures and the map of their structures.

/// A structure (or part of one) of a fixture file.
#[derive(Clone, Debug)]
pub(crate) struct Region {
    /// What it is ("superblock", "object header prefix v2", "message dataspace", "BTHD", ...).
    pub(crate) kind: String,
    /// Absolute file offset.
    pub(crate) start: usize,
    /// Length in bytes.
    pub(crate) len: usize,
    /// For a checksummed structure whose extent is known exactly (for a message: its chunk's):
    /// the absolute offsets `(from, at)` of what the 4-byte lookup3 checksum at `at` covers.
    pub(crate) checksum: Option<(usize, usize)>,
    /// For a message: the absolute offset of its body.
    pub(crate) body: usize,
    /// Reached by every run (an object header of the manifest or the superblock), so damage
    /// caught by a checksum must surface as an error.
    pub(crate) reached: bool,
    /// For a message: its type, and the enclosing chunk's checksum (v2 headers).
    pub(crate) message: Option<u16>,
}

/// One fixture file with its manifest paths and structure map.
pub(crate) struct Fixture {
    /// File name.
    pub(crate) name: String,
    /// The bytes.
    pub(crate) bytes: Vec<u8>,
    /// Superblock offset (the base of relative addresses).
    pub(crate) base: usize,
    /// Size of offsets.
    pub(crate) offset_size: usize,
    /// Every path of the manifest.
    pub(crate) paths: Arc<Vec<String>>,
    /// Every structure found.
    pub(crate) regions: Vec<Region>,
}

impl Fixture {
    /// Runs a mutated copy.
    pub(crate) fn run(&self, bytes: Vec<u8>) -> Result<Outcome, String> {
        run_case(bytes, Arc::clone(&self.paths), None)
    }

    /// Regions of exactly `kind`.
    pub(crate) fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Region> + 'a {
        self.regions.iter().filter(move |r| r.kind == kind)
    }
}

/// Every fixture of the manifest, mapped (computed once).
pub(crate) fn fixtures() -> &'static [Fixture] {
    static ALL: OnceLock<Vec<Fixture>> = OnceLock::new();
    ALL.get_or_init(|| {
        let m = h5_testkit::manifest();
        m.files
            .iter()
            .map(|f| {
                let bytes = std::fs::read(f.path()).expect("fixture readable");
                let paths: Vec<String> = f.objects.iter().map(|o| o.path.clone()).collect();
                let addrs: BTreeSet<u64> = f.objects.iter().filter_map(|o| o.addr).collect();
                let chunks: Vec<(u64, u64)> = f
                    .objects
                    .iter()
                    .flat_map(|o| o.chunk_list.iter().flatten())
                    .map(|c| (c.address, c.size))
                    .collect();
                map(&f.name, bytes, paths, &addrs, &chunks)
            })
            .collect()
    })
}

/// Signatures of the structures found by scanning (besides object headers, which are walked).
const SIGNATURES: [&str; 16] = [
    "TREE", "HEAP", "SNOD", "GCOL", "FRHP", "FHDB", "FHIB", "BTHD", "BTIN", "BTLF", "FAHD", "FADB",
    "EAHD", "EAIB", "EASB", "EADB",
];

/// Structures with a lookup3 checksum at the end.
fn checksummed(sig: &str) -> bool {
    !matches!(sig, "TREE" | "HEAP" | "SNOD" | "GCOL")
}

fn le(bytes: &[u8], at: usize, n: usize) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(n)?)?;
    Some(
        b.iter()
            .rev()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x)),
    )
}

/// The extent of a checksummed structure at `start`: the smallest length whose last four bytes
/// are the lookup3 of the others.
fn checksum_extent(bytes: &[u8], start: usize, max: usize) -> Option<usize> {
    (12..=max).find(|&len| {
        let Some(s) = bytes.get(start..start + len) else {
            return false;
        };
        let (body, sum) = s.split_at(len - 4);
        le(sum, 0, 4) == Some(u64::from(h5_format::checksum::lookup3(body, 0)))
    })
}

/// Rewrites the checksum of `r` (if it has one) after its bytes changed.
pub(crate) fn fix_checksum(bytes: &mut [u8], r: &Region) {
    if let Some((from, at)) = r.checksum {
        let sum = h5_format::checksum::lookup3(&bytes[from..at], 0);
        bytes[at..at + 4].copy_from_slice(&sum.to_le_bytes());
    }
}

/// A block of header messages to walk: its offset, its checksum span, and each message's type,
/// flags, header offset, body offset and body length.
type Block = (
    usize,
    Option<(usize, usize)>,
    Vec<(u16, u8, usize, usize, usize)>,
);

fn map(
    name: &str,
    bytes: Vec<u8>,
    paths: Vec<String>,
    addrs: &BTreeSet<u64>,
    chunks: &[(u64, u64)],
) -> Fixture {
    let len = bytes.len();
    let base = superblock::signature_offsets(len as u64)
        .find(|&at| superblock::is_signature(&bytes[at as usize..]))
        .expect("superblock") as usize;
    let sb_len = superblock::needed_len(&bytes[base..], base as u64).expect("superblock length");
    let sb = Superblock::decode(&bytes[base..base + sb_len], base as u64).expect("superblock");
    let sizes = sb.sizes;
    let mut regions = vec![Region {
        kind: "superblock".into(),
        start: base,
        len: sb_len,
        checksum: (sb.version >= 2).then_some((base, base + sb_len - 4)),
        body: 0,
        reached: true,
        message: None,
    }];
    // Object headers: chunk #0 and every continuation block, message by message.
    let mut seen = HashSet::new();
    for &addr in addrs {
        let abs = base + addr as usize;
        let Ok(first) = decode_first_chunk(&bytes[abs..], addr) else {
            continue;
        };
        let v = first.prefix.version;
        let chunk_len = first.prefix.first_chunk_len().expect("chunk length");
        let sum = (v >= 2).then_some((abs, abs + chunk_len - 4));
        regions.push(Region {
            kind: format!("object header v{v} prefix"),
            start: abs,
            len: first.prefix.prefix_len,
            checksum: sum,
            body: 0,
            reached: true,
            message: None,
        });
        let mut pending: Vec<Block> = vec![(
            abs,
            sum,
            first
                .messages
                .iter()
                .map(|m| {
                    (
                        m.kind,
                        m.flags,
                        m.offset_in_block,
                        m.body_offset,
                        m.body.len(),
                    )
                })
                .collect(),
        )];
        while let Some((block, sum, msgs)) = pending.pop() {
            for (k, flags, off, body_off, body_len) in msgs {
                regions.push(Region {
                    kind: format!(
                        "message {}",
                        h5_format::message::name(k).trim_end_matches(" message")
                    ),
                    start: block + off,
                    len: body_off - off + body_len,
                    checksum: sum,
                    body: block + body_off,
                    reached: true,
                    message: Some(k),
                });
                if k != kind::CONTINUATION {
                    continue;
                }
                let body = &bytes[block + body_off..block + body_off + body_len];
                let Ok(Message::Continuation(c)) = decode_message(k, flags, body, sizes, addr)
                else {
                    continue;
                };
                if !seen.insert(c.address) {
                    continue;
                }
                let cabs = base + c.address as usize;
                let clen = c.length as usize;
                let Ok(cm) =
                    decode_continuation_block(&bytes[cabs..cabs + clen], &first.prefix, c.address)
                else {
                    continue;
                };
                let csum = (v >= 2).then_some((cabs, cabs + clen - 4));
                regions.push(Region {
                    kind: format!("continuation block v{v}"),
                    start: cabs,
                    len: clen,
                    checksum: csum,
                    body: 0,
                    reached: true,
                    message: None,
                });
                pending.push((
                    cabs,
                    csum,
                    cm.iter()
                        .map(|m| {
                            (
                                m.kind,
                                m.flags,
                                m.offset_in_block,
                                m.body_offset,
                                m.body.len(),
                            )
                        })
                        .collect(),
                ));
            }
        }
    }
    // Everything else by signature, with its extent from its checksum or its fields.
    let mut starts: Vec<(usize, &str)> = Vec::new();
    for i in 0..len.saturating_sub(4) {
        if let Some(sig) = SIGNATURES.iter().find(|s| &bytes[i..i + 4] == s.as_bytes()) {
            starts.push((i, sig));
        }
    }
    let l = sizes.length as usize;
    let o = sizes.offset as usize;
    for (n, &(start, sig)) in starts.iter().enumerate() {
        let next = starts.get(n + 1).map_or(len, |s| s.0);
        let room = (next - start).min(len - start);
        let (extent, checksum) = if checksummed(sig) {
            match checksum_extent(&bytes, start, room.min(1024)) {
                Some(e) => (e, Some((start, start + e - 4))),
                None => (room.min(512), None),
            }
        } else {
            let e = match sig {
                "GCOL" => le(&bytes, start + 8, l).map_or(room, |s| s as usize),
                "HEAP" => 8 + 2 * l + o,
                _ => room,
            };
            (e.min(room).min(4096), None)
        };
        regions.push(Region {
            kind: sig.into(),
            start,
            len: extent,
            checksum,
            body: 0,
            reached: false,
            message: None,
        });
        if sig == "HEAP" {
            // The local heap's data segment.
            if let (Some(size), Some(at)) =
                (le(&bytes, start + 8, l), le(&bytes, start + 8 + 2 * l, o))
            {
                let at = base + at as usize;
                if at < len && size > 0 {
                    regions.push(Region {
                        kind: "local heap data".into(),
                        start: at,
                        len: (size as usize).min(len - at),
                        checksum: None,
                        body: 0,
                        reached: false,
                        message: None,
                    });
                }
            }
        }
    }
    for &(addr, size) in chunks {
        let at = base + addr as usize;
        if at < len && size > 0 {
            regions.push(Region {
                kind: "chunk data".into(),
                start: at,
                len: (size as usize).min(len - at),
                checksum: None,
                body: 0,
                reached: false,
                message: None,
            });
        }
    }
    Fixture {
        name: name.into(),
        bytes,
        base,
        offset_size: o,
        paths: Arc::new(paths),
        regions,
    }
}
