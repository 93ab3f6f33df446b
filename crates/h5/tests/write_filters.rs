//! Every filter with an encoder, chosen on the dataset builder, checked against the real thing:
//! the same datasets are written by h5py (libhdf5 1.14.4) with hdf5plugin, and the two files'
//! pipelines must be equal entry for entry (id, name, flags, every client data value, read by h5),
//! h5py must report the same `compression`/`compression_opts`/`shuffle`/`fletcher32`/
//! `scaleoffset` and `get_filter(i)` for both, and read back the values written here (exactly,
//! or within the documented tolerance for scale-offset on floats). h5 reads them back after
//! reopening, and h5dump (with hdf5plugin's plugins) decodes every dataset. These tests need
//! `scripts/setup-tools` and fail loudly without it.

use std::path::{Path, PathBuf};

use h5::{
    BitshuffleCompression as Bs, BloscCompressor as Bc, BloscShuffle as Bsh, DatasetBuilder,
    FilterSetupError, H5Num, H5Type, ScaleOffset, SzipCoding,
};
use h5_testkit::verify::{h5dump, run_python};
use serde_json::json;

/// The format h5py writes by default (libver earliest): version 1 pipelines with filter names,
/// which the comparisons with h5py's files expect.
fn earliest() -> h5::CreateOptions {
    h5::CreateOptions {
        bounds: h5::FormatBounds::Earliest,
        ..Default::default()
    }
}

fn create_earliest(path: &std::path::Path) -> h5::File {
    h5::File::create_with(path, &h5::FileAccess::default(), &earliest()).unwrap()
}

fn tmp() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ours = dir.path().join("ours.h5");
    let reference = dir.path().join("ref.h5");
    (dir, ours, reference)
}

/// A filter as asked for, both on the builder and (as Python keyword arguments) from h5py.
#[derive(Clone, Copy, Debug)]
enum F {
    Shuffle,
    Deflate(u8),
    Fletcher32,
    Szip(SzipCoding, u8),
    ScaleInt(u32),
    ScaleFloat(u32),
    Nbit,
    Lzf,
    Lz4(u32),
    Zstd(i32),
    Bzip2(u8),
    Blosc(Bc, u8, Bsh),
    Blosc2(Bc, u8, Bsh),
    Bitshuffle(Bs),
    BitshuffleBlocks(u32, Bs),
}

impl F {
    fn apply<T: H5Type>(self, b: DatasetBuilder<T>) -> DatasetBuilder<T> {
        match self {
            F::Shuffle => b.shuffle(),
            F::Deflate(l) => b.deflate(l),
            F::Fletcher32 => b.fletcher32(),
            F::Szip(c, p) => b.szip(c, p),
            F::ScaleInt(n) => b.scale_offset(ScaleOffset::Integer { min_bits: n }),
            F::ScaleFloat(d) => b.scale_offset(ScaleOffset::FloatDecimal { decimal_digits: d }),
            F::Nbit => b.nbit(),
            F::Lzf => b.lzf(),
            F::Lz4(n) => b.lz4(n),
            F::Zstd(l) => b.zstd(l),
            F::Bzip2(n) => b.bzip2(n),
            F::Blosc(c, l, s) => b.blosc(c, l, s),
            F::Blosc2(c, l, s) => b.blosc2(c, l, s),
            F::Bitshuffle(c) => b.bitshuffle(c),
            F::BitshuffleBlocks(n, c) => b.bitshuffle_blocks(n, c),
        }
    }

    /// h5py's keyword arguments (h5py orders scale-offset, shuffle, compression, fletcher32).
    fn python(self) -> String {
        match self {
            F::Shuffle => "shuffle=True".into(),
            F::Deflate(l) => format!("compression='gzip', compression_opts={l}"),
            F::Fletcher32 => "fletcher32=True".into(),
            F::Szip(c, p) => {
                let c = match c {
                    SzipCoding::NearestNeighbor => "nn",
                    SzipCoding::Entropy => "ec",
                };
                format!("compression='szip', compression_opts=('{c}', {p})")
            }
            F::ScaleInt(n) | F::ScaleFloat(n) => format!("scaleoffset={n}"),
            // h5py has no keyword for n-bit (and reads `compression=5` as gzip level 5): the
            // script puts it first in a creation property list.
            F::Nbit => "nbit=True".into(),
            F::Lzf => "compression='lzf'".into(),
            F::Lz4(n) => format!("**hdf5plugin.LZ4(nbytes={n})"),
            F::Zstd(l) => format!("**hdf5plugin.Zstd(clevel={l})"),
            F::Bzip2(n) => format!("**hdf5plugin.BZip2(blocksize={n})"),
            F::Blosc(c, l, s) => {
                let c = match c {
                    Bc::BloscLz => "blosclz",
                    Bc::Lz4 => "lz4",
                    Bc::Lz4Hc => "lz4hc",
                    Bc::Snappy => "snappy",
                    Bc::Zlib => "zlib",
                    Bc::Zstd => "zstd",
                };
                let s = match s {
                    Bsh::None => 0,
                    Bsh::Byte => 1,
                    Bsh::Bit => 2,
                };
                format!("**hdf5plugin.Blosc(cname='{c}', clevel={l}, shuffle={s})")
            }
            F::Blosc2(c, l, s) => {
                let c = match c {
                    Bc::BloscLz => "blosclz",
                    Bc::Lz4 => "lz4",
                    Bc::Lz4Hc => "lz4hc",
                    Bc::Snappy => "snappy",
                    Bc::Zlib => "zlib",
                    Bc::Zstd => "zstd",
                };
                let s = match s {
                    Bsh::None => "NOFILTER",
                    Bsh::Byte => "SHUFFLE",
                    Bsh::Bit => "BITSHUFFLE",
                };
                format!(
                    "**hdf5plugin.Blosc2(cname='{c}', clevel={l}, filters=hdf5plugin.Blosc2.{s})"
                )
            }
            F::Bitshuffle(c) => F::BitshuffleBlocks(0, c).python(),
            F::BitshuffleBlocks(n, c) => match c {
                Bs::None => format!("**hdf5plugin.Bitshuffle(nelems={n}, cname='none')"),
                Bs::Lz4 => format!("**hdf5plugin.Bitshuffle(nelems={n}, cname='lz4')"),
                Bs::Zstd(l) => {
                    format!("**hdf5plugin.Bitshuffle(nelems={n}, cname='zstd', clevel={l})")
                }
            },
        }
    }
}

/// Element types of the cases, with the generator both sides use: `k(i) = (37 i mod 101) +
/// i / 13`, as is for `u8` (mod 256), `k - 50` for signed integers, `(k - 50) × 0.37` (computed
/// in f64) for floats.
trait Elem: H5Type + H5Num + Copy + PartialEq + std::fmt::Debug {
    const NP: &'static str;
    fn make(i: usize, smooth: bool) -> Self;
    fn to_f64(self) -> f64;
}

/// The generator's integer sequence: jumpy, or smooth (`i / 7`, which szip's nearest-neighbour
/// coding shrinks).
fn k(i: usize, smooth: bool) -> i64 {
    if smooth {
        (i / 7) as i64
    } else {
        ((i * 37) % 101 + i / 13) as i64
    }
}

macro_rules! int_elem {
    ($t:ty, $np:literal, $expr:expr) => {
        impl Elem for $t {
            const NP: &'static str = $np;
            fn make(i: usize, smooth: bool) -> Self {
                let f: fn(i64) -> $t = $expr;
                f(k(i, smooth))
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    };
}
int_elem!(u8, "u1", |k| (k % 256) as u8);
int_elem!(i16, "<i2", |k| (k - 50) as i16);
int_elem!(i32, "<i4", |k| (k - 50) as i32);
int_elem!(i64, "<i8", |k| k - 50);
impl Elem for f32 {
    const NP: &'static str = "<f4";
    fn make(i: usize, smooth: bool) -> Self {
        ((k(i, smooth) - 50) as f64 * 0.37) as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}
impl Elem for f64 {
    const NP: &'static str = "<f8";
    fn make(i: usize, smooth: bool) -> Self {
        (k(i, smooth) - 50) as f64 * 0.37
    }
    fn to_f64(self) -> f64 {
        self
    }
}

/// One dataset written both ways.
struct Case {
    name: String,
    np: &'static str,
    shape: Vec<usize>,
    chunk: Vec<usize>,
    filters: Vec<F>,
    /// The fill value, as a Python literal, when one is set.
    fill: Option<String>,
    /// Which data sequence (see [`k`]).
    smooth: bool,
    /// Largest difference allowed between written and read values (0: exact).
    tolerance: f64,
}

/// Writes or checks one case's dataset in a group.
type GroupFn = Box<dyn Fn(&h5::Group)>;

/// The cases written into one file. n-bit must come first in a pipeline (see [`F::python`]).
#[derive(Default)]
struct Suite {
    cases: Vec<Case>,
    writers: Vec<GroupFn>,
    readers: Vec<GroupFn>,
}

impl Suite {
    fn add<T: Elem>(&mut self, shape: &[usize], chunk: &[usize], filters: &[F], fill: Option<T>) {
        self.add_data(shape, chunk, filters, fill, false);
    }

    fn add_data<T: Elem>(
        &mut self,
        shape: &[usize],
        chunk: &[usize],
        filters: &[F],
        fill: Option<T>,
        smooth: bool,
    ) {
        let name = format!("d{}", self.cases.len());
        let tolerance = filters
            .iter()
            .map(|f| match f {
                F::ScaleFloat(d) => 0.5 * 10f64.powi(-(*d as i32)) * (1.0 + 1e-6) + 1e-5,
                _ => 0.0,
            })
            .fold(0.0, f64::max);
        self.cases.push(Case {
            name: name.clone(),
            np: T::NP,
            shape: shape.to_vec(),
            chunk: chunk.to_vec(),
            filters: filters.to_vec(),
            fill: fill.map(|v| format!("{}", v.to_f64())),
            smooth,
            tolerance,
        });
        let n: usize = shape.iter().product();
        let data: Vec<T> = (0..n).map(|i| T::make(i, smooth)).collect();
        let (shape, chunk, filters) = (shape.to_vec(), chunk.to_vec(), filters.to_vec());
        let wname = name.clone();
        let wdata = data.clone();
        self.writers.push(Box::new(move |g| {
            let mut b = g.new_dataset::<T>().shape(&shape).chunk(&chunk);
            for f in &filters {
                b = f.apply(b);
            }
            if let Some(v) = fill {
                b = b.fill_value(v);
            }
            let ds = b.create(&wname).unwrap_or_else(|e| panic!("{wname}: {e}"));
            ds.write(&wdata).unwrap_or_else(|e| panic!("{wname}: {e}"));
        }));
        self.readers.push(Box::new(move |g| {
            let ds = g.dataset(&name).unwrap();
            let got: Vec<T> = ds.read::<T>().unwrap().into_iter().collect();
            assert_eq!(got.len(), data.len(), "{name}");
            for (i, (a, b)) in got.iter().zip(&data).enumerate() {
                let d = (a.to_f64() - b.to_f64()).abs();
                assert!(
                    d <= tolerance,
                    "{name}[{i}]: read {a:?}, wrote {b:?} (tolerance {tolerance})"
                );
            }
        }));
    }

    fn json(&self) -> serde_json::Value {
        json!(
            self.cases
                .iter()
                .map(|c| json!({
                    "name": c.name,
                    "dtype": c.np,
                    "shape": c.shape,
                    "chunk": c.chunk,
                    "kwargs": c.filters.iter().map(|f| f.python()).collect::<Vec<_>>().join(", "),
                    "fill": c.fill,
                    "smooth": c.smooth,
                    "tolerance": c.tolerance,
                }))
                .collect::<Vec<_>>()
        )
    }

    /// Writes the suite with h5 into `ours` and with h5py into `reference`, then checks both.
    fn run(&self, ours: &Path, reference: &Path) {
        {
            // Chunks are encoded on a pool of codec threads.
            let access = h5::FileAccess::default().chunk_cache(h5::ChunkCacheConfig {
                threads: Some(3),
                ..Default::default()
            });
            let f = h5::File::create_with(ours, &access, &earliest()).unwrap();
            let root = f.root().unwrap();
            for w in &self.writers {
                w(&root);
            }
            f.flush().unwrap();
            assert!(f.chunk_cache_stats().unwrap().encode_time > std::time::Duration::ZERO);
            f.close().unwrap();
        }
        let spec = self.json().to_string();
        let out = run_python(
            COMPARE,
            &[reference.as_os_str(), ours.as_os_str(), spec.as_ref()],
        );
        assert!(out.trim_end().ends_with("ok"), "{out}");
        // Pipelines entry for entry, every client data value (h5py's get_filter truncates long
        // ones).
        let a = h5::File::open(ours).unwrap();
        let b = h5::File::open(reference).unwrap();
        for c in &self.cases {
            let ours = a.root().unwrap().dataset(&c.name).unwrap().filters();
            let theirs = b.root().unwrap().dataset(&c.name).unwrap().filters();
            assert_eq!(ours, theirs, "{} ({:?}, {})", c.name, c.filters, c.np);
        }
        let root = a.root().unwrap();
        for r in &self.readers {
            r(&root);
        }
        // h5dump 1.10.8 decodes what its plugins and build allow (not lzf, for one): ours must
        // dump wherever h5py's file does.
        for c in &self.cases {
            let path = format!("/{}", c.name);
            if h5dump(&["-d", &path], reference).is_ok() {
                h5dump(&["-d", &path], ours)
                    .unwrap_or_else(|e| panic!("{} ({:?}): {e}", c.name, c.filters));
            }
        }
    }
}

/// Writes the reference file with h5py, then compares what h5py reports of both files.
const COMPARE: &str = r#"
import json, sys
import numpy as np, h5py, hdf5plugin
ref, ours, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

def gen(c):
    n = int(np.prod(c['shape']))
    i = np.arange(n, dtype=np.int64)
    k = i // 7 if c['smooth'] else (i * 37) % 101 + i // 13
    dtype = c['dtype']
    dt = np.dtype(dtype)
    if dt.kind == 'u':
        return (k % 256).astype(dt).reshape(c['shape'])
    if dt.kind == 'i':
        return (k - 50).astype(dt).reshape(c['shape'])
    return ((k - 50).astype(np.float64) * 0.37).astype(dt).reshape(c['shape'])

with h5py.File(ref, 'w') as f:
    for c in spec:
        kw = eval('dict(' + c['kwargs'] + ')', {'hdf5plugin': hdf5plugin})
        if kw.pop('nbit', False):
            kw['dcpl'] = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            kw['dcpl'].set_filter(h5py.h5z.FILTER_NBIT, h5py.h5z.FLAG_OPTIONAL)
        if c['fill'] is not None:
            kw['fillvalue'] = np.array(float(c['fill'])).astype(c['dtype'])
        data = gen(c)
        f.create_dataset(c['name'], data=data, chunks=tuple(c['chunk']), **kw)

bad = []
with h5py.File(ref, 'r') as r, h5py.File(ours, 'r') as o:
    for c in spec:
        a, b = o[c['name']], r[c['name']]
        for attr in ['dtype', 'shape', 'chunks', 'compression', 'compression_opts', 'shuffle',
                     'fletcher32', 'scaleoffset']:
            if getattr(a, attr) != getattr(b, attr):
                bad.append(f"{c['name']}: {attr} {getattr(a, attr)!r} != {getattr(b, attr)!r}")
        pa, pb = a.id.get_create_plist(), b.id.get_create_plist()
        if pa.get_nfilters() != pb.get_nfilters():
            bad.append(f"{c['name']}: {pa.get_nfilters()} filters != {pb.get_nfilters()}")
        for i in range(min(pa.get_nfilters(), pb.get_nfilters())):
            fa, fb = pa.get_filter(i), pb.get_filter(i)
            # h5py reads at most a fixed number of client data values (garbage past what is
            # stored for scale-offset and n-bit): compare those in full from h5 instead.
            if fa[0] in (5, 6):
                fa, fb = (fa[0], fa[1], fa[3]), (fb[0], fb[1], fb[3])
            if fa != fb:
                bad.append(f"{c['name']}: filter {i} {fa} != {fb}")
        # Chunks an optional filter skipped (filter mask bits) must be those libhdf5 skipped:
        # the same chunks do not shrink.
        ma = [a.id.get_chunk_info(i).filter_mask for i in range(a.id.get_num_chunks())]
        mb = [b.id.get_chunk_info(i).filter_mask for i in range(b.id.get_num_chunks())]
        if ma != mb:
            bad.append(f"{c['name']}: chunk filter masks {ma} != {mb}")
        if c['smooth'] and all(ma):
            bad.append(f"{c['name']}: smooth data left unfiltered: masks {ma}")
        want = gen(c)
        got = a[()]
        if c['tolerance'] == 0:
            if not np.array_equal(got, want):
                bad.append(f"{c['name']}: values differ: {got.ravel()[:8]} vs {want.ravel()[:8]}")
        else:
            d = np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))
            if not d <= c['tolerance']:
                bad.append(f"{c['name']}: max difference {d} > {c['tolerance']}")
for line in bad:
    print(line)
print('mismatches' if bad else 'ok')
"#;

/// libhdf5's own filters: shuffle, deflate, fletcher32, szip (both codings, scanlines shorter
/// and longer than a block, whole-chunk scanlines), scale-offset (integers with computed and
/// given bit counts, floats with decimal scaling, fill values), n-bit, with partial edge chunks.
#[test]
fn builtin_filters_record_what_libhdf5_records() {
    let (_d, ours, reference) = tmp();
    let mut s = Suite::default();
    s.add::<f64>(
        &[33, 10],
        &[8, 4],
        &[F::Shuffle, F::Deflate(4), F::Fletcher32],
        None,
    );
    s.add::<i16>(&[50], &[16], &[F::Shuffle], None);
    s.add::<u8>(&[300], &[64], &[F::Deflate(9)], None);
    s.add::<i32>(&[33], &[7], &[F::Fletcher32], None);
    let nn = SzipCoding::NearestNeighbor;
    let ec = SzipCoding::Entropy;
    s.add::<i32>(&[100, 7], &[40, 7], &[F::Szip(nn, 16)], None);
    s.add::<i16>(&[1000], &[300], &[F::Szip(ec, 8)], None);
    s.add::<f64>(&[60, 50], &[20, 50], &[F::Szip(nn, 32)], None);
    s.add::<u8>(&[500], &[128], &[F::Szip(nn, 8)], None);
    s.add::<f32>(&[45, 9], &[20, 9], &[F::Szip(ec, 4)], None);
    // Data szip shrinks (the cases above mostly do not: their chunks are stored unfiltered).
    s.add_data::<i32>(&[100, 7], &[40, 7], &[F::Szip(nn, 16)], None, true);
    s.add_data::<i16>(&[1000], &[300], &[F::Szip(ec, 8)], None, true);
    s.add_data::<u8>(&[500], &[128], &[F::Szip(nn, 8)], None, true);
    s.add_data::<f64>(&[60, 50], &[20, 50], &[F::Szip(nn, 32)], None, true);
    s.add_data::<i64>(&[6000], &[5000], &[F::Szip(nn, 32)], None, true);
    s.add::<i32>(&[100], &[40], &[F::ScaleInt(0)], None);
    s.add::<i16>(&[100, 3], &[40, 2], &[F::ScaleInt(12)], None);
    s.add::<u8>(&[99], &[40], &[F::ScaleInt(0)], None);
    s.add::<i64>(&[99], &[40], &[F::ScaleInt(0)], None);
    s.add::<i32>(&[99], &[40], &[F::ScaleInt(0)], Some(7));
    s.add::<f32>(&[100, 3], &[40, 2], &[F::ScaleFloat(2)], None);
    s.add::<f64>(&[100, 3], &[40, 2], &[F::ScaleFloat(3)], Some(1.5));
    s.add::<i32>(&[100], &[30], &[F::ScaleInt(0), F::Shuffle, F::Lzf], None);
    s.add::<i32>(&[70], &[30], &[F::Nbit], None);
    s.add::<f64>(
        &[70, 3],
        &[30, 2],
        &[F::Nbit, F::Shuffle, F::Fletcher32],
        None,
    );
    s.run(&ours, &reference);
}

/// The registered plugins as hdf5plugin builds them: lzf, lz4, zstd, bzip2, blosc (every
/// compressor and shuffle mode), bitshuffle (alone, with LZ4, with Zstandard).
#[test]
fn plugin_filters_record_what_hdf5plugin_records() {
    let (_d, ours, reference) = tmp();
    let mut s = Suite::default();
    s.add::<f32>(&[100, 3], &[40, 2], &[F::Lzf], None);
    s.add::<i64>(&[100], &[64], &[F::Shuffle, F::Lzf], None);
    s.add::<i32>(&[100], &[40], &[F::Lz4(0)], None);
    s.add::<f64>(&[300], &[200], &[F::Lz4(1024)], None);
    s.add::<i16>(&[100, 3], &[40, 2], &[F::Zstd(3)], None);
    s.add::<f32>(&[100], &[33], &[F::Zstd(5)], None);
    s.add::<i32>(&[100], &[40], &[F::Bzip2(9)], None);
    s.add::<u8>(&[100], &[40], &[F::Bzip2(5)], None);
    s.add::<i32>(&[500], &[200], &[F::Blosc(Bc::Lz4, 5, Bsh::Byte)], None);
    s.add::<f64>(
        &[100, 3],
        &[40, 2],
        &[F::Blosc(Bc::Zstd, 7, Bsh::Bit)],
        None,
    );
    s.add::<i16>(
        &[300, 3],
        &[130, 2],
        &[F::Blosc(Bc::Zlib, 4, Bsh::None)],
        None,
    );
    s.add::<f32>(&[300], &[200], &[F::Blosc(Bc::BloscLz, 5, Bsh::Byte)], None);
    s.add::<u8>(&[300], &[200], &[F::Blosc(Bc::Lz4Hc, 9, Bsh::None)], None);
    s.add::<i32>(&[100], &[40], &[F::Bitshuffle(Bs::None)], None);
    s.add::<i16>(&[100, 3], &[40, 2], &[F::Bitshuffle(Bs::Lz4)], None);
    s.add::<f64>(&[100, 3], &[40, 2], &[F::Bitshuffle(Bs::Zstd(5))], None);
    s.add::<u8>(&[1000], &[333], &[F::Bitshuffle(Bs::Lz4)], None);
    s.add::<i32>(&[1000], &[300], &[F::BitshuffleBlocks(64, Bs::Lz4)], None);
    s.add::<f64>(
        &[1000],
        &[300],
        &[F::BitshuffleBlocks(16, Bs::Zstd(3))],
        None,
    );
    s.add::<i16>(&[1000], &[300], &[F::BitshuffleBlocks(80, Bs::None)], None);
    s.run(&ours, &reference);
}

/// Blosc2 (filter 32026) as hdf5plugin builds it: every compressor and shuffle, one and two
/// dimensions (the chunk shape in the client data and a `b2nd` frame), partial edge chunks.
#[test]
fn blosc2_records_what_hdf5plugin_records_and_reads_back() {
    let (_d, ours, reference) = tmp();
    let mut s = Suite::default();
    s.add::<i32>(&[500], &[200], &[F::Blosc2(Bc::Lz4, 5, Bsh::Byte)], None);
    s.add::<f64>(
        &[100, 3],
        &[40, 2],
        &[F::Blosc2(Bc::Zstd, 7, Bsh::Bit)],
        None,
    );
    s.add::<i16>(
        &[300, 3],
        &[130, 2],
        &[F::Blosc2(Bc::Zlib, 4, Bsh::None)],
        None,
    );
    s.add::<f32>(
        &[300],
        &[200],
        &[F::Blosc2(Bc::BloscLz, 5, Bsh::Byte)],
        None,
    );
    s.add::<u8>(&[300], &[200], &[F::Blosc2(Bc::Lz4Hc, 9, Bsh::None)], None);
    s.add::<i64>(
        &[30, 20, 10],
        &[7, 6, 5],
        &[F::Blosc2(Bc::Lz4, 3, Bsh::Byte)],
        None,
    );
    s.add::<f32>(
        &[64, 64],
        &[64, 64],
        &[F::Shuffle, F::Blosc2(Bc::Zstd, 1, Bsh::None)],
        None,
    );
    s.run(&ours, &reference);
}

/// A pseudo-random byte sequence no compressor shrinks.
fn noise(n: usize) -> Vec<i32> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as i32
        })
        .collect()
}

/// Optional filters that cannot shrink a chunk are skipped for it (its filter mask bit set), as
/// libhdf5 does: the data read back everywhere. A mandatory filter that fails makes the write
/// (or the flush that encodes the chunk) fail with the filter's typed error.
#[test]
fn failing_optional_filters_are_skipped_and_mandatory_ones_fail() {
    let (_d, path, _) = tmp();
    let data = noise(900);
    {
        let f = create_earliest(&path);
        let root = f.root().unwrap();
        for (name, b) in [
            ("lzf", root.new_dataset::<i32>().lzf()),
            (
                "szip",
                root.new_dataset::<i32>()
                    .szip(SzipCoding::NearestNeighbor, 8),
            ),
            (
                "chain",
                root.new_dataset::<i32>().shuffle().lzf().fletcher32(),
            ),
        ] {
            let ds = b.shape([900]).chunk([300]).create(name).unwrap();
            ds.write(&data).unwrap();
        }
        f.close().unwrap();
    }
    let out = run_python(
        r#"
import sys, json, numpy as np, h5py, hdf5plugin
want = np.array(json.loads(sys.argv[2]), dtype='<i4')
with h5py.File(sys.argv[1], 'r') as f:
    for name, bit in [('lzf', 1), ('szip', 1), ('chain', 2)]:
        d = f[name]
        masks = [d.id.get_chunk_info(i).filter_mask for i in range(d.id.get_num_chunks())]
        assert masks == [bit] * 3, (name, masks)
        assert np.array_equal(d[()], want), name
print('ok')
"#,
        &[
            path.as_os_str(),
            serde_json::to_string(&data).unwrap().as_ref(),
        ],
    );
    assert_eq!(out.trim(), "ok");
    let f = h5::File::open(&path).unwrap();
    for name in ["lzf", "szip", "chain"] {
        let got: Vec<i32> = f
            .dataset(name)
            .unwrap()
            .read::<i32>()
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(got, data, "{name}");
    }
    h5dump(&["-d", "/szip"], &path).unwrap();

    // The same LZF entry, mandatory (as `H5Pset_filter` with no flags).
    let (_d2, path2, _) = tmp();
    let f = create_earliest(&path2);
    let ds = f
        .root()
        .unwrap()
        .new_dataset::<i32>()
        .shape([900])
        .chunk([300])
        .filter_raw(32000, vec![4, 261, 1200])
        .create("lzf")
        .unwrap();
    let err = ds.write(&data).and_then(|()| f.flush()).unwrap_err();
    assert!(
        matches!(
            err.filter_failure(),
            Some(h5::FilterError::EncodeFailed { filter: "lzf", .. })
        ),
        "{err:?}"
    );
}

/// Filters that cannot apply to a dataset's datatype or chunks, or out-of-range parameters,
/// refuse to create it, as libhdf5 does (with the same reasons).
#[test]
fn filters_that_cannot_apply_refuse_the_dataset() {
    let (_d, path, _) = tmp();
    let f = create_earliest(&path);
    let root = f.root().unwrap();
    let nn = SzipCoding::NearestNeighbor;
    let e = root
        .new_dataset::<[i32; 3]>()
        .shape([10])
        .chunk([10])
        .szip(nn, 8)
        .create("a")
        .unwrap_err();
    assert!(
        matches!(
            e,
            h5::Error::FilterSetup(FilterSetupError::Datatype { filter: "szip", .. })
        ),
        "{e:?}"
    );
    let e = root
        .new_dataset::<i32>()
        .shape([10])
        .chunk([5])
        .szip(nn, 8)
        .create("b")
        .unwrap_err();
    assert!(
        matches!(
            e,
            h5::Error::FilterSetup(FilterSetupError::ChunkTooSmall { elements: 5, .. })
        ),
        "{e:?}"
    );
    let e = root
        .new_dataset::<i32>()
        .shape([10])
        .chunk([10])
        .szip(nn, 7)
        .create("c")
        .unwrap_err();
    assert!(
        matches!(
            e,
            h5::Error::FilterSetup(FilterSetupError::Parameter { .. })
        ),
        "{e:?}"
    );
    let e = root
        .new_dataset::<f64>()
        .shape([10])
        .chunk([10])
        .scale_offset(ScaleOffset::Integer { min_bits: 0 })
        .create("d")
        .unwrap_err();
    assert!(
        matches!(e, h5::Error::FilterSetup(FilterSetupError::Datatype { .. })),
        "{e:?}"
    );
    let e = root
        .new_dataset::<u8>()
        .shape([10])
        .chunk([10])
        .scale_offset(ScaleOffset::Integer { min_bits: 9 })
        .create("e")
        .unwrap_err();
    assert!(
        matches!(
            e,
            h5::Error::FilterSetup(FilterSetupError::Parameter { .. })
        ),
        "{e:?}"
    );
    let e = root
        .new_dataset::<i32>()
        .shape([10])
        .chunk([10])
        .deflate(10)
        .create("f")
        .unwrap_err();
    assert!(
        matches!(
            e,
            h5::Error::FilterSetup(FilterSetupError::Parameter { .. })
        ),
        "{e:?}"
    );
    for (name, b) in [
        (
            "g",
            root.new_dataset::<i32>().bitshuffle_blocks(7, Bs::None),
        ),
        ("h", root.new_dataset::<i32>().bzip2(0)),
        ("i", root.new_dataset::<i32>().blosc(Bc::Lz4, 10, Bsh::Byte)),
    ] {
        let e = b.shape([10]).chunk([10]).create(name).unwrap_err();
        assert!(
            matches!(
                e,
                h5::Error::FilterSetup(FilterSetupError::Parameter { .. })
            ),
            "{e:?}"
        );
    }
    // Nothing was linked.
    assert!(root.links().unwrap().is_empty());
}

/// A pipeline read from a dataset h5py wrote is reproduced entry for entry by `filter_like`
/// (what a copy or repack needs), and h5 writes into filtered datasets of files h5py made.
#[test]
fn pipelines_copy_and_existing_filtered_datasets_take_writes() {
    let (_d, ours, reference) = tmp();
    run_python(
        r#"
import sys, numpy as np, h5py, hdf5plugin
with h5py.File(sys.argv[1], 'w') as f:
    kw = [dict(compression='szip', compression_opts=('nn', 8)), dict(scaleoffset=0),
          dict(shuffle=True, compression='lzf', fletcher32=True), dict(**hdf5plugin.Blosc()),
          dict(**hdf5plugin.Bitshuffle(cname='zstd')), dict(**hdf5plugin.BZip2()),
          dict(**hdf5plugin.LZ4()), dict(**hdf5plugin.Zstd())]
    for i, k in enumerate(kw):
        f.create_dataset(f'd{i}', data=np.zeros((50, 6), dtype='<i4'), chunks=(20, 4), **k)
"#,
        &[reference.as_os_str()],
    );
    let data: Vec<i32> = (0..300).map(|i| (i / 3) - 40).collect();
    let src = h5::File::open(&reference).unwrap();
    let names = src.member_names().unwrap();
    assert_eq!(names.len(), 8);
    {
        let f = create_earliest(&ours);
        for n in &names {
            let pipeline = src.dataset(n).unwrap().filters();
            let mut b = f
                .root()
                .unwrap()
                .new_dataset::<i32>()
                .shape([50, 6])
                .chunk([20, 4]);
            for p in &pipeline {
                b = b.filter_like(p);
            }
            let ds = b.create(n).unwrap();
            ds.write(&data).unwrap();
            assert_eq!(ds.filters(), pipeline, "{n}");
        }
        f.close().unwrap();
    }
    drop(src);
    {
        let f = h5::File::open_rw(&reference).unwrap();
        for n in &names {
            f.dataset(n).unwrap().write(&data).unwrap();
        }
        f.close().unwrap();
    }
    let out = run_python(
        r#"
import sys, numpy as np, h5py, hdf5plugin
want = (np.arange(300) // 3 - 40).astype('<i4').reshape(50, 6)
with h5py.File(sys.argv[1], 'r') as a, h5py.File(sys.argv[2], 'r') as b:
    for n in a:
        assert np.array_equal(a[n][()], want), n
        assert np.array_equal(b[n][()], want), n
        pa, pb = a[n].id.get_create_plist(), b[n].id.get_create_plist()
        assert [pa.get_filter(i)[:2] for i in range(pa.get_nfilters())] == \
               [pb.get_filter(i)[:2] for i in range(pb.get_nfilters())], n
print('ok')
"#,
        &[ours.as_os_str(), reference.as_os_str()],
    );
    assert_eq!(out.trim(), "ok");
}

/// Array elements: Blosc shuffles by the base type's size, shuffle and bitshuffle by the whole
/// element's, LZF counts whole elements, as the plugins' set-local steps do; n-bit describes the
/// array and scale-offset refuses it.
#[test]
fn array_elements_record_the_plugins_sizes() {
    let (_d, ours, reference) = tmp();
    run_python(
        r#"
import sys, numpy as np, h5py, hdf5plugin
at = h5py.h5t.array_create(h5py.h5t.STD_I16LE, (3,))
with h5py.File(sys.argv[1], 'w') as f:
    for name, fid, opts in [('blosc', 32001, hdf5plugin.Blosc().filter_options),
                            ('bitshuffle', 32008, hdf5plugin.Bitshuffle().filter_options),
                            ('shuffle', 2, ()), ('lzf', 32000, ()), ('nbit', 5, ())]:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((4,))
        dcpl.set_filter(fid, h5py.h5z.FLAG_OPTIONAL, opts)
        h5py.h5d.create(f.id, name.encode(), at, h5py.h5s.create_simple((10,)), dcpl=dcpl)
"#,
        &[reference.as_os_str()],
    );
    let data: Vec<[i16; 3]> = (0..10).map(|i| [i, -i, i * 100]).collect();
    {
        let f = create_earliest(&ours);
        let root = f.root().unwrap();
        let b = || root.new_dataset::<[i16; 3]>().shape([10]).chunk([4]);
        let builders = [
            ("blosc", b().blosc(Bc::Lz4, 5, Bsh::Byte)),
            ("bitshuffle", b().bitshuffle(Bs::Lz4)),
            ("shuffle", b().shuffle()),
            ("lzf", b().lzf()),
            ("nbit", b().nbit()),
        ];
        for (name, b) in builders {
            b.create(name).unwrap().write(&data).unwrap();
        }
        let e = b()
            .scale_offset(ScaleOffset::Integer { min_bits: 0 })
            .create("so")
            .unwrap_err();
        assert!(
            matches!(e, h5::Error::FilterSetup(FilterSetupError::Datatype { .. })),
            "{e:?}"
        );
        f.close().unwrap();
    }
    let a = h5::File::open(&ours).unwrap();
    let b = h5::File::open(&reference).unwrap();
    for name in ["blosc", "bitshuffle", "shuffle", "lzf", "nbit"] {
        let ds = a.dataset(name).unwrap();
        assert_eq!(ds.filters(), b.dataset(name).unwrap().filters(), "{name}");
        assert_eq!(ds.read_vec::<[i16; 3]>().unwrap(), data, "{name}");
    }
    let out = run_python(
        r#"
import sys, numpy as np, h5py, hdf5plugin
want = np.array([[i, -i, i * 100] for i in range(10)], dtype='<i2')
with h5py.File(sys.argv[1], 'r') as f:
    for n in f:
        assert np.array_equal(f[n][()], want), (n, f[n][()])
print('ok')
"#,
        &[ours.as_os_str()],
    );
    assert_eq!(out.trim(), "ok");
}

/// A compound element (Rust layout, as numpy's aligned layout): n-bit describes every member
/// at its offset, shuffle takes the whole size, szip refuses it, as libhdf5 does.
#[test]
fn compound_elements_record_libhdf5s_description() {
    #[derive(h5::H5Type, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct P {
        a: i32,
        b: f64,
        c: u8,
    }
    let (_d, ours, reference) = tmp();
    run_python(
        r#"
import sys, numpy as np, h5py
t = np.dtype([('a', '<i4'), ('b', '<f8'), ('c', 'u1')], align=True)
with h5py.File(sys.argv[1], 'w') as f:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_filter(h5py.h5z.FILTER_NBIT, h5py.h5z.FLAG_OPTIONAL)
    f.create_dataset('p', shape=(20,), dtype=t, chunks=(6,), dcpl=dcpl, shuffle=True,
                     compression='gzip', compression_opts=2)
"#,
        &[reference.as_os_str()],
    );
    let data: Vec<P> = (0..20)
        .map(|i| P {
            a: i * 3 - 7,
            b: f64::from(i) * 0.25,
            c: i as u8,
        })
        .collect();
    {
        let f = create_earliest(&ours);
        let root = f.root().unwrap();
        let b = || root.new_dataset::<P>().shape([20]).chunk([6]);
        b().nbit()
            .shuffle()
            .deflate(2)
            .create("p")
            .unwrap()
            .write(&data)
            .unwrap();
        let e = b().szip(SzipCoding::Entropy, 2).create("szip").unwrap_err();
        assert!(
            matches!(e, h5::Error::FilterSetup(FilterSetupError::Datatype { .. })),
            "{e:?}"
        );
        f.close().unwrap();
    }
    let a = h5::File::open(&ours).unwrap();
    let ds = a.dataset("p").unwrap();
    assert_eq!(
        ds.filters(),
        h5::File::open(&reference)
            .unwrap()
            .dataset("p")
            .unwrap()
            .filters()
    );
    assert_eq!(ds.read_vec::<P>().unwrap(), data);
    let out = run_python(
        r#"
import sys, numpy as np, h5py
with h5py.File(sys.argv[1], 'r') as f:
    d = f['p'][()]
    assert list(d['a']) == [i * 3 - 7 for i in range(20)], d
    assert list(d['b']) == [i * 0.25 for i in range(20)], d
    assert list(d['c']) == list(range(20)), d
print('ok')
"#,
        &[ours.as_os_str()],
    );
    assert_eq!(out.trim(), "ok");
    h5dump(&["-d", "/p"], &ours).unwrap();
}

/// n-bit packs what it should: into a dataset h5py made with a 20-bit integer type at bit
/// offset 4 (libhdf5 refuses types with 16 unused bits or more), h5 writes raw elements; each
/// chunk of 7 elements is stored in 18 bytes and h5py reads the values back.
#[test]
fn nbit_packs_reduced_precision_integers() {
    let (_d, path, _) = tmp();
    run_python(
        r#"
import sys, h5py, numpy as np
t = h5py.h5t.STD_I32LE.copy()
t.set_precision(20)
t.set_offset(4)
with h5py.File(sys.argv[1], 'w') as f:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((7,))
    dcpl.set_filter(h5py.h5z.FILTER_NBIT, h5py.h5z.FLAG_OPTIONAL)
    d = h5py.h5d.create(f.id, b'n', t, h5py.h5s.create_simple((30,)), dcpl=dcpl)
    # Written once: h5 cannot yet open a chunked dataset whose index was never allocated.
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.zeros(30, dtype='<i4'))
"#,
        &[path.as_os_str()],
    );
    let values: Vec<i32> = (0..30).map(|i| i * 30011 - 400_000).collect();
    let raw: Vec<u8> = values
        .iter()
        .flat_map(|v| (((*v as u32) & 0xf_ffff) << 4).to_le_bytes())
        .collect();
    {
        let f = h5::File::open_rw(&path).unwrap();
        let ds = f.dataset("n").unwrap();
        assert_eq!(ds.filters()[0].params, [8, 0, 7, 1, 4, 0, 20, 4]);
        assert!(matches!(
            ds.write_raw(&raw[1..]),
            Err(h5::Error::Invalid(_))
        ));
        ds.write_raw(&raw).unwrap();
        f.close().unwrap();
    }
    let f = h5::File::open(&path).unwrap();
    assert_eq!(f.dataset("n").unwrap().read_raw().unwrap(), raw);
    let out = run_python(
        r#"
import sys, h5py
with h5py.File(sys.argv[1], 'r') as f:
    d = f['n']
    print(d[()].tolist())
    print([d.id.get_chunk_info(i).size for i in range(d.id.get_num_chunks())])
    print([d.id.get_chunk_info(i).filter_mask for i in range(d.id.get_num_chunks())])
"#,
        &[path.as_os_str()],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], format!("{values:?}"));
    // 7 elements × 20 bits = 140 bits: 18 bytes per chunk (the last chunk too: it is padded
    // to a full chunk).
    assert_eq!(lines[1], "[18, 18, 18, 18, 18]");
    assert_eq!(lines[2], "[0, 0, 0, 0, 0]");
}

/// Whole reads of filtered datasets larger than the chunk cache (scans, whose decodes reuse the
/// buffers of the chunks they are done with) give the values libhdf5 wrote: shuffle + deflate,
/// deflate alone (decoded straight into a reused buffer), with Fletcher-32 (no reuse) and the
/// same through a hyperslab larger than the cache; then again through h5's own files.
#[test]
fn scans_of_filtered_datasets_read_what_libhdf5_wrote() {
    let (_d, theirs, ours) = tmp();
    run_python(
        "import sys, h5py, numpy as np\n\
         v = (np.arange(96 * 1000, dtype=np.float32) * 0.37).reshape(96, 1000)\n\
         with h5py.File(sys.argv[1], 'w') as f:\n\
         \x20   f.create_dataset('sd', data=v, chunks=(16, 100), shuffle=True, compression='gzip', compression_opts=1)\n\
         \x20   f.create_dataset('d', data=v, chunks=(16, 100), compression='gzip')\n\
         \x20   f.create_dataset('sdf', data=v, chunks=(16, 100), shuffle=True, compression='gzip', fletcher32=True)\n",
        &[&theirs],
    );
    let want: Vec<f32> = (0..96 * 1000).map(|i| i as f32 * 0.37).collect();
    {
        let f = create_earliest(&ours);
        for (name, shuffle, fletcher) in [
            ("sd", true, false),
            ("d", false, false),
            ("sdf", true, true),
        ] {
            let mut b = f.new_dataset::<f32>().shape([96, 1000]).chunk([16, 100]);
            if shuffle {
                b = b.shuffle();
            }
            b = b.deflate(1);
            if fletcher {
                b = b.fletcher32();
            }
            let values = h5::ndarray::Array2::from_shape_vec((96, 1000), want.clone()).unwrap();
            b.create(name).unwrap().write(&values).unwrap();
        }
        f.close().unwrap();
    }
    // 64 KiB of cache: every whole read (375 KiB) is a scan in batches.
    let small = h5::FileAccess::default().chunk_cache(h5::ChunkCacheConfig {
        limit: 64 << 10,
        threads: Some(2),
        ..Default::default()
    });
    for path in [&theirs, &ours] {
        let f = h5::File::open_with(path, &small).unwrap();
        for name in ["sd", "d", "sdf"] {
            let ds = f.dataset(name).unwrap();
            for round in 0..2 {
                assert_eq!(ds.read_vec::<f32>().unwrap(), want, "{name} round {round}");
            }
            let part = ds
                .read_slice::<f32>(h5::ndarray::s![10..90, 50..950])
                .unwrap();
            assert_eq!(part.shape(), [80, 900]);
            for (ix, v) in part.indexed_iter() {
                let (i, j) = (ix[0] + 10, ix[1] + 50);
                assert_eq!(*v, (i * 1000 + j) as f32 * 0.37, "{name} ({i}, {j})");
            }
        }
        let st = f.chunk_cache_stats().unwrap();
        assert!(st.scan_loads >= 3 * 2 * 60, "{}", st.scan_loads);
        assert!(st.footprint <= 64 << 10);
    }
}
