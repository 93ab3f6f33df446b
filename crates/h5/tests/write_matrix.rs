//! The generated write matrix: every dataset kind (compact, contiguous, chunked with each chunk
//! index) × filter (none, shuffle + deflate, fletcher32) × element type (u8, i32, f64, a derived
//! compound, variable-length strings) × format bound (earliest, V18, V110, V114, V200), with a
//! grow-and-shrink resize sequence wherever the maximum shape allows it. Each bound's file is
//! checked by h5py on HDF5 1.14 and 2.0 (HDF5 2.0 only for V200, whose layout and compound
//! datatype messages are version 5; values, dtype, shape, maximum shape, chunks, filters), by h5dump where its
//! version reads the formats (1.10.8: not the datatype version 4 of V112 and newer), and by h5
//! after reopening. Needs `scripts/setup-tools`; fails without it.

use h5::{AllocTime, ChunkIndexKind, FormatBounds, H5Type};
use h5_testkit::verify::{DatasetExpect, Expectations, check_with_readers, dtype, h5dump};
use serde_json::{Value, json};

#[derive(H5Type, Clone, Debug, PartialEq)]
#[repr(C)]
struct Pair {
    a: i32,
    b: f64,
}

/// How a case stores its data.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Compact,
    Contiguous,
    Chunked(ChunkIndexKind),
}

/// Filters of a case.
#[derive(Clone, Copy, Debug)]
enum Filters {
    None,
    ShuffleDeflate,
    Fletcher,
}

/// The element types, with their values and how h5py describes them.
trait Elem: H5Type + Clone + PartialEq + std::fmt::Debug {
    const TAG: &'static str;
    fn make(i: usize) -> Self;
    fn json(&self) -> Value;
    fn dtype() -> Value;
}

impl Elem for u8 {
    const TAG: &'static str = "u8";
    fn make(i: usize) -> Self {
        (i * 7 % 251) as u8
    }
    fn json(&self) -> Value {
        json!(self)
    }
    fn dtype() -> Value {
        json!("|u1")
    }
}

impl Elem for i32 {
    const TAG: &'static str = "i32";
    fn make(i: usize) -> Self {
        i as i32 * 7 - 100
    }
    fn json(&self) -> Value {
        json!(self)
    }
    fn dtype() -> Value {
        json!("<i4")
    }
}

impl Elem for f64 {
    const TAG: &'static str = "f64";
    fn make(i: usize) -> Self {
        i as f64 * 0.25 - 3.0
    }
    fn json(&self) -> Value {
        json!(self)
    }
    fn dtype() -> Value {
        json!("<f8")
    }
}

impl Elem for Pair {
    const TAG: &'static str = "pair";
    fn make(i: usize) -> Self {
        Pair {
            a: i as i32 - 5,
            b: i as f64 * 0.5,
        }
    }
    fn json(&self) -> Value {
        json!({"a": self.a, "b": self.b})
    }
    fn dtype() -> Value {
        dtype::compound_sized(&[("a", json!("<i4"), 0), ("b", json!("<f8"), 8)], 16)
    }
}

impl Elem for String {
    const TAG: &'static str = "vstr";
    fn make(i: usize) -> Self {
        format!("s{i}-{}", "x".repeat(i % 5))
    }
    fn json(&self) -> Value {
        json!(self)
    }
    fn dtype() -> Value {
        json!("vlen-str-utf8")
    }
}

/// Shapes of a case: (created, maximum, chunk, resize steps); the last step is the final shape.
type Shapes = (
    Vec<usize>,
    Vec<Option<usize>>,
    Option<Vec<usize>>,
    Vec<Vec<usize>>,
);

fn shapes(kind: Kind) -> Shapes {
    match kind {
        Kind::Compact | Kind::Contiguous => (vec![20], vec![Some(20)], None, vec![]),
        Kind::Chunked(k) => match k {
            ChunkIndexKind::BtreeV1 | ChunkIndexKind::ExtensibleArray => (
                vec![20],
                vec![None],
                Some(vec![6]),
                vec![vec![30], vec![25]],
            ),
            ChunkIndexKind::SingleChunk => (vec![20], vec![Some(20)], Some(vec![20]), vec![]),
            ChunkIndexKind::Implicit | ChunkIndexKind::FixedArray => (
                vec![20],
                vec![Some(40)],
                Some(vec![6]),
                vec![vec![33], vec![27]],
            ),
            // The v2 B-tree (and any index added later): two unlimited dimensions.
            _ => (
                vec![4, 5],
                vec![None, None],
                Some(vec![2, 2]),
                vec![vec![6, 7], vec![5, 6]],
            ),
        },
    }
}

/// Creates one case's dataset, writes it, runs its resize sequence and returns its expectation.
fn case<T: Elem>(g: &h5::Group, kind: Kind, filters: Filters) -> Option<(String, DatasetExpect)> {
    let chunked_index = match kind {
        Kind::Chunked(k) => Some(k),
        _ => None,
    };
    let filtered = !matches!(filters, Filters::None);
    if filtered && chunked_index.is_none_or(|k| k == ChunkIndexKind::Implicit) {
        return None; // filters need chunks; the implicit index holds no filtered chunks
    }
    let name = format!("{kind:?}_{filters:?}_{}", T::TAG)
        .replace(['(', ')'], "")
        .replace("Chunked", "");
    let (dims, max, chunk, steps) = shapes(kind);
    let mut b = g.new_dataset::<T>().shape(&dims);
    match kind {
        Kind::Compact => b = b.compact(),
        Kind::Contiguous => {}
        Kind::Chunked(k) => {
            b = b
                .max_shape(&max)
                .chunk(chunk.clone().expect("chunked"))
                .chunk_index(k);
            if k == ChunkIndexKind::Implicit {
                b = b.alloc_time(AllocTime::Early);
            }
        }
    }
    b = match filters {
        Filters::None => b,
        Filters::ShuffleDeflate => b.shuffle().deflate(4),
        Filters::Fletcher => b.fletcher32(),
    };
    let ds = b
        .create(&name)
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
    let fill = |shape: &[usize]| -> Vec<T> { (0..shape.iter().product()).map(T::make).collect() };
    ds.write(&fill(&dims))
        .unwrap_or_else(|e| panic!("write {name}: {e}"));
    let mut last = dims.clone();
    for (i, s) in steps.iter().enumerate() {
        ds.resize(s)
            .unwrap_or_else(|e| panic!("resize {name}: {e}"));
        // Growing: every element written again (values depend on the position in the new
        // shape); shrinking keeps what is inside.
        if i == 0 {
            ds.write(&fill(s))
                .unwrap_or_else(|e| panic!("rewrite {name}: {e}"));
        }
        last = s.clone();
    }
    // The expected values: after a grow-and-shrink, the kept part of the grown array.
    let grown = steps.first().cloned().unwrap_or_else(|| dims.clone());
    let cols = *grown.last().expect("rank 1 or 2");
    let at = |r: usize, c: usize| T::make(r * cols + c).json();
    let values = if last.len() == 1 {
        Value::Array((0..last[0]).map(|c| at(0, c)).collect())
    } else {
        Value::Array(
            (0..last[0])
                .map(|r| Value::Array((0..last[1]).map(|c| at(r, c)).collect()))
                .collect(),
        )
    };
    let mut e = DatasetExpect::new(
        T::dtype(),
        &last.iter().map(|d| *d as u64).collect::<Vec<_>>(),
    )
    .values(values);
    e = match &chunk {
        Some(c) => e.chunks(&c.iter().map(|d| *d as u64).collect::<Vec<_>>()),
        None if matches!(kind, Kind::Compact) => e.compact(),
        None => e.contiguous(),
    };
    if chunk.is_some() {
        e = e.maxshape(&max.iter().map(|m| m.map(|m| m as u64)).collect::<Vec<_>>());
    }
    e = match filters {
        Filters::None => e,
        Filters::ShuffleDeflate => e.gzip(4).shuffle(true),
        Filters::Fletcher => e.fletcher32(true),
    };
    Some((name, e))
}

const KINDS: [Kind; 8] = [
    Kind::Compact,
    Kind::Contiguous,
    Kind::Chunked(ChunkIndexKind::BtreeV1),
    Kind::Chunked(ChunkIndexKind::SingleChunk),
    Kind::Chunked(ChunkIndexKind::Implicit),
    Kind::Chunked(ChunkIndexKind::FixedArray),
    Kind::Chunked(ChunkIndexKind::ExtensibleArray),
    Kind::Chunked(ChunkIndexKind::BtreeV2),
];
const FILTERS: [Filters; 3] = [Filters::None, Filters::ShuffleDeflate, Filters::Fletcher];

fn all_cases(g: &h5::Group) -> Vec<(String, DatasetExpect)> {
    let mut out = Vec::new();
    for kind in KINDS {
        for filters in FILTERS {
            out.extend(case::<u8>(g, kind, filters));
            out.extend(case::<i32>(g, kind, filters));
            out.extend(case::<f64>(g, kind, filters));
            out.extend(case::<Pair>(g, kind, filters));
            out.extend(case::<String>(g, kind, filters));
        }
    }
    out
}

/// h5 reads back what it wrote, after reopening (one dataset per element type and kind).
fn read_back(path: &std::path::Path) {
    let f = h5::File::open(path).unwrap();
    let g = f.group("m").unwrap();
    let ints: Vec<i32> = g
        .dataset("Contiguous_None_i32")
        .unwrap()
        .read_vec()
        .unwrap();
    assert_eq!(ints, (0..20).map(i32::make).collect::<Vec<_>>());
    let pairs: Vec<Pair> = g
        .dataset("ExtensibleArray_ShuffleDeflate_pair")
        .unwrap()
        .read_vec()
        .unwrap();
    assert_eq!(pairs, (0..25).map(Pair::make).collect::<Vec<_>>());
    let strs: Vec<String> = g
        .dataset("BtreeV1_Fletcher_vstr")
        .unwrap()
        .read_vec()
        .unwrap();
    assert_eq!(strs, (0..25).map(String::make).collect::<Vec<_>>());
    let ds = g.dataset("BtreeV2_None_f64").unwrap();
    assert_eq!(ds.shape(), vec![5, 6]);
    assert_eq!(ds.chunk_index(), Some(ChunkIndexKind::BtreeV2));
}

#[test]
fn every_kind_filter_type_and_bound_reads_back_in_h5py_and_h5dump() {
    for bounds in [
        FormatBounds::Earliest,
        FormatBounds::V18,
        FormatBounds::V110,
        FormatBounds::V114,
        FormatBounds::V200,
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("matrix.h5");
        let options = h5::CreateOptions {
            bounds,
            ..Default::default()
        };
        let cases = {
            let f = h5::File::create_with(&path, &h5::FileAccess::default(), &options).unwrap();
            let g = f.create_group("m").unwrap();
            let cases = all_cases(&g);
            f.close().unwrap();
            cases
        };
        // Per element type: compact, contiguous and implicit unfiltered; five indexes × 3 filters.
        assert_eq!(cases.len(), 5 * (3 + 5 * 3), "{bounds:?}");
        let mut exp = Expectations::new().superblock_version(match bounds {
            FormatBounds::Earliest => 0,
            FormatBounds::V18 => 2,
            _ => 3,
        });
        let names: Vec<&str> = cases.iter().map(|(n, _)| n.as_str()).collect();
        exp = exp.group("/m", &names);
        for (name, e) in &cases {
            exp = exp.dataset(&format!("/m/{name}"), e.clone());
        }
        // h5py on HDF5 1.14 and on HDF5 2.0; V200's filtered chunk indexes (layout version 5)
        // and compound datatypes (version 5) are for HDF5 2.0 only.
        if let Err(e) = check_with_readers(&path, &exp, bounds == FormatBounds::V200) {
            panic!("h5py disagrees with the {bounds:?} matrix:\n{e}");
        }
        if bounds < FormatBounds::V112 {
            h5dump(&[], &path).unwrap_or_else(|e| panic!("h5dump ({bounds:?}): {e}"));
        }
        read_back(&path);
    }
}
