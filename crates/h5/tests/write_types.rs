//! Non-numeric element types written by h5 (variable-length strings and sequences, compound
//! types from `#[derive(H5Type)]`, enumerations, arrays, object references), each in a
//! contiguous dataset, a chunked + deflate dataset and attributes, checked by h5py (values and
//! dtypes), h5dump (exits 0 dumping the data) and h5 itself in process and after reopening.
//! Plus compound and enumeration data written by h5py read into derived types (members matched
//! by name).
//!
//! These tests need `scripts/setup-tools` (h5py in `.venv`, h5dump) and fail loudly without it.

use std::fmt::Debug;
use std::path::{Path, PathBuf};

use h5::{FixedAscii, H5Type, ObjectRef, VarLenAscii, VarLenUnicode};
use h5_testkit::verify::{
    AttrExpect, DatasetExpect, Expectations, check_with_h5py, dtype, h5dump, run_python,
};
use serde_json::{Value, json};

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    (dir, p)
}

/// h5py must agree with the expectations and h5dump must dump the whole file (data included).
fn check(path: &Path, exp: &Expectations) {
    if let Err(e) = check_with_h5py(path, exp) {
        panic!("h5py disagrees with what h5 wrote:\n{e}");
    }
    h5dump(&[], path).unwrap_or_else(|e| panic!("h5dump failed: {e}"));
}

/// In group `name`: a contiguous dataset, a chunked + deflate dataset (chunks of `chunk`) and a
/// 1-D attribute `attr` of `values`, and a scalar attribute `scalar` of `values[0]`.
fn write_all_layouts<T: H5Type + Clone>(f: &h5::File, name: &str, values: &[T], chunk: usize) {
    let g = f.create_group(name).unwrap();
    g.new_dataset::<T>()
        .create_with_data("contiguous", values)
        .unwrap();
    let c = g
        .new_dataset::<T>()
        .shape([values.len()])
        .chunk([chunk])
        .deflate(4)
        .create("chunked")
        .unwrap();
    c.write(values).unwrap();
    g.write_attr::<T>("attr", values).unwrap();
    g.write_attr_scalar::<T>("scalar", values[0].clone())
        .unwrap();
}

/// What h5py must see in group `name` written by [`write_all_layouts`].
fn expect_all_layouts(
    exp: Expectations,
    name: &str,
    dt: &Value,
    values: &Value,
    n: u64,
    chunk: u64,
) -> Expectations {
    exp.dataset(
        &format!("/{name}/contiguous"),
        DatasetExpect::new(dt.clone(), &[n])
            .contiguous()
            .values(values.clone()),
    )
    .dataset(
        &format!("/{name}/chunked"),
        DatasetExpect::new(dt.clone(), &[n])
            .chunks(&[chunk])
            .gzip(4)
            .values(values.clone()),
    )
    .attr(
        &format!("/{name}"),
        "attr",
        AttrExpect::new(dt.clone(), values.clone()).shape(&[n]),
    )
    .attr(
        &format!("/{name}"),
        "scalar",
        AttrExpect::new(dt.clone(), values[0].clone()).shape(&[]),
    )
}

/// h5 reads back what [`write_all_layouts`] wrote.
fn read_all_layouts<T: H5Type + PartialEq + Debug>(f: &h5::File, name: &str, values: &[T]) {
    let g = f.group(name).unwrap();
    for ds in ["contiguous", "chunked"] {
        let d = g.dataset(ds).unwrap();
        assert_eq!(d.dtype().describe(), T::h5_type().describe(), "{name}/{ds}");
        assert_eq!(d.read_vec::<T>().unwrap(), values, "{name}/{ds}");
    }
    assert_eq!(g.attr("attr").unwrap().read_vec::<T>().unwrap(), values);
    assert_eq!(
        &g.attr("scalar").unwrap().read_scalar::<T>().unwrap(),
        &values[0]
    );
}

// ---------------------------------------------------------------------------------------------
// Variable-length strings and sequences.
// ---------------------------------------------------------------------------------------------

fn strings() -> Vec<String> {
    let mut v: Vec<String> = vec![
        "alpha".into(),
        String::new(),
        "βeta ünïcode".into(),
        "x".repeat(5000),
    ];
    v.extend((0..400).map(|i| format!("s{i}-{}", "z".repeat(i % 37))));
    v
}

#[test]
fn variable_length_strings() {
    let (_d, path) = tmp("vlen_str.h5");
    let s = strings();
    let ascii: Vec<VarLenAscii> = ["a", "", "bc d"]
        .iter()
        .map(|x| VarLenAscii::from_ascii(x).unwrap())
        .collect();
    let refs: Vec<&str> = vec!["one", "two", "", "three"];
    {
        let f = h5::File::create(&path).unwrap();
        write_all_layouts(&f, "utf8", &s, 64);
        write_all_layouts(&f, "ascii", &ascii, 2);
        let root = f.root().unwrap();
        root.write_attr_vlen_str("title", "héllo wörld").unwrap();
        // &str slices into a variable-length string dataset, and into a fixed-length one.
        let d = root
            .new_dataset::<String>()
            .shape([4])
            .chunk([3])
            .deflate(1)
            .create("from_strs")
            .unwrap();
        d.write_strs(&refs).unwrap();
        let fixed = root
            .new_dataset::<FixedAscii<5>>()
            .shape([4])
            .create("fixed")
            .unwrap();
        fixed.write_strs(&refs).unwrap();
        assert!(fixed.write_strs(&["toolong"; 4]).is_err());
        // Read back in process (the heap collections are in the metadata cache).
        assert_eq!(d.read_strings().unwrap(), refs);
        read_all_layouts(&f, "utf8", &s);
        f.close().unwrap();
    }
    let utf8 = json!(s);
    let ascii_json = json!(["a", "", "bc d"]);
    let mut exp = expect_all_layouts(
        Expectations::new(),
        "utf8",
        &json!("vlen-str-utf8"),
        &utf8,
        s.len() as u64,
        64,
    );
    exp = expect_all_layouts(exp, "ascii", &json!("vlen-str-ascii"), &ascii_json, 3, 2)
        .attr(
            "/",
            "title",
            AttrExpect::new("vlen-str-utf8", json!("héllo wörld")).shape(&[]),
        )
        .dataset(
            "/from_strs",
            DatasetExpect::new("vlen-str-utf8", &[4])
                .chunks(&[3])
                .gzip(1)
                .values(json!(refs)),
        )
        .dataset(
            "/fixed",
            DatasetExpect::new("|S5/ascii", &[4])
                .contiguous()
                .values(json!(refs)),
        );
    check(&path, &exp);
    let f = h5::File::open(&path).unwrap();
    read_all_layouts(&f, "utf8", &s);
    read_all_layouts(&f, "ascii", &ascii);
    let root = f.root().unwrap();
    assert_eq!(
        root.attr("title").unwrap().read_scalar::<String>().unwrap(),
        "héllo wörld"
    );
    assert_eq!(
        root.attr("title").unwrap().read_strings().unwrap(),
        ["héllo wörld"]
    );
    assert_eq!(
        f.dataset("from_strs").unwrap().read_strings().unwrap(),
        refs
    );
    assert_eq!(
        f.dataset("utf8/chunked").unwrap().read_strings().unwrap(),
        s
    );
    let fixed: Vec<String> = f
        .dataset("fixed")
        .unwrap()
        .read_vec::<FixedAscii<5>>()
        .unwrap()
        .iter()
        .map(|x| x.as_str().to_owned())
        .collect();
    assert_eq!(fixed, refs);
    // The same strings read as VarLenUnicode.
    let u = f
        .dataset("utf8/contiguous")
        .unwrap()
        .read_vec::<VarLenUnicode>()
        .unwrap();
    assert_eq!(u[2].as_str(), "βeta ünïcode");
}

#[test]
fn variable_length_sequences() {
    let (_d, path) = tmp("vlen_seq.h5");
    let ints: Vec<Vec<i32>> = (0..300)
        .map(|i| (0..(i % 7)).map(|k| i * 10 - k).collect())
        .collect();
    let floats: Vec<Vec<f64>> = vec![vec![0.5, -1.25], vec![], vec![1e300]];
    {
        let f = h5::File::create(&path).unwrap();
        write_all_layouts(&f, "ints", &ints, 50);
        write_all_layouts(&f, "floats", &floats, 2);
        f.close().unwrap();
    }
    let mut exp = expect_all_layouts(
        Expectations::new(),
        "ints",
        &dtype::vlen("<i4"),
        &json!(ints),
        300,
        50,
    );
    exp = expect_all_layouts(exp, "floats", &dtype::vlen("<f8"), &json!(floats), 3, 2);
    check(&path, &exp);
    let f = h5::File::open(&path).unwrap();
    read_all_layouts(&f, "ints", &ints);
    read_all_layouts(&f, "floats", &floats);
    // Sequences convert losslessly to wider numbers.
    let wide = f
        .dataset("ints/contiguous")
        .unwrap()
        .read_vec::<Vec<i64>>()
        .unwrap();
    assert_eq!(wide[13], vec![130, 129, 128, 127, 126, 125]);
}

// ---------------------------------------------------------------------------------------------
// Compound types, enumerations and arrays from the derive.
// ---------------------------------------------------------------------------------------------

#[derive(H5Type, Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Color {
    Red = 1,
    Green = 2,
    #[h5(rename = "BLUE")]
    Blue = 40,
}

#[derive(H5Type, Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i16)]
enum Level {
    Low = -5,
    Mid = 0,
    High = 300,
}

#[derive(H5Type, Clone, Debug, PartialEq)]
#[repr(C)]
struct Inner {
    a: i16,
    b: [f32; 2],
}

#[derive(H5Type, Clone, Debug, PartialEq)]
#[repr(C)]
struct Record {
    id: u32,
    x: f64,
    flag: bool,
    name: FixedAscii<6>,
    inner: Inner,
    color: Color,
    #[h5(rename = "grid")]
    hist: [[u8; 3]; 2],
    label: String,
    samples: Vec<u16>,
}

fn records(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| Record {
            id: i as u32 * 3,
            x: i as f64 / 4.0 - 2.0,
            flag: i % 3 == 0,
            name: FixedAscii::new(&format!("n{}", i % 1000)).unwrap(),
            inner: Inner {
                a: -(i as i16),
                b: [i as f32, 0.5],
            },
            color: [Color::Red, Color::Green, Color::Blue][i % 3],
            hist: [[i as u8, 1, 2], [3, 4, (i * 2) as u8]],
            label: format!("label {i}"),
            samples: (0..(i % 4) as u16).collect(),
        })
        .collect()
}

fn record_json(r: &Record) -> Value {
    json!({
        "id": r.id,
        "x": r.x,
        "flag": r.flag,
        "name": r.name.as_str(),
        "inner": {"a": r.inner.a, "b": r.inner.b},
        "color": r.color as u8,
        "grid": r.hist,
        "label": r.label,
        "samples": r.samples,
    })
}

macro_rules! offset {
    ($t:ty, $f:ident) => {
        std::mem::offset_of!($t, $f) as u64
    };
}

/// The compound type as h5py reports it. The file holds the Rust layout (checked by h5 after
/// reopening), but libhdf5 describes a compound in memory with each variable-length *string*
/// member at its memory size (a pointer, 8 bytes, where the file element has 16) and shifts the
/// members after it down by the difference; sequences keep their size (`hvl_t`, 16 bytes).
fn record_dtype() -> Value {
    const STRING_SHRINK: u64 = 16 - 8;
    let color = dtype::enumeration("|u1", &[("Red", 1), ("Green", 2), ("BLUE", 40)]);
    let inner = dtype::compound_sized(
        &[
            ("a", json!("<i2"), offset!(Inner, a)),
            ("b", dtype::array("<f4", &[2]), offset!(Inner, b)),
        ],
        std::mem::size_of::<Inner>() as u64,
    );
    dtype::compound_sized(
        &[
            ("id", json!("<u4"), offset!(Record, id)),
            ("x", json!("<f8"), offset!(Record, x)),
            ("flag", json!("|b1"), offset!(Record, flag)),
            ("name", json!("|S6/ascii"), offset!(Record, name)),
            ("inner", inner, offset!(Record, inner)),
            ("color", color, offset!(Record, color)),
            ("grid", dtype::array("|u1", &[2, 3]), offset!(Record, hist)),
            ("label", json!("vlen-str-utf8"), offset!(Record, label)),
            (
                "samples",
                dtype::vlen("<u2"),
                offset!(Record, samples) - STRING_SHRINK,
            ),
        ],
        std::mem::size_of::<Record>() as u64 - STRING_SHRINK,
    )
}

#[test]
fn compound_types_from_the_derive() {
    let (_d, path) = tmp("compound.h5");
    let recs = records(200);
    {
        let f = h5::File::create(&path).unwrap();
        write_all_layouts(&f, "records", &recs, 32);
        read_all_layouts(&f, "records", &recs);
        // A dataset of another type refuses the records.
        let other = f
            .root()
            .unwrap()
            .new_dataset::<Inner>()
            .shape([200])
            .create("inner")
            .unwrap();
        assert!(other.write(&recs).is_err());
        f.close().unwrap();
    }
    // The file's compound type is the Rust layout.
    let h5::Datatype::Compound(t) = Record::h5_type() else {
        panic!("not a compound")
    };
    assert_eq!(t.size as usize, std::mem::size_of::<Record>());
    assert_eq!(
        t.members[8].offset as usize,
        std::mem::offset_of!(Record, samples)
    );
    let values = Value::Array(recs.iter().map(record_json).collect());
    let exp = expect_all_layouts(
        Expectations::new(),
        "records",
        &record_dtype(),
        &values,
        200,
        32,
    );
    check(&path, &exp);
    let f = h5::File::open(&path).unwrap();
    read_all_layouts(&f, "records", &recs);
    // Equal as stored (datatype version 3 arrays of the default V18 format have no
    // permutation; the derive's type carries the identity).
    let stored = f.dataset("records/chunked").unwrap().dtype().clone();
    assert!(
        h5::types::same_type(&stored, &Record::h5_type()),
        "{stored:?}"
    );
    // Fields read by name into a struct declaring them in another order, a subset.
    #[derive(H5Type, Debug, PartialEq)]
    #[repr(C)]
    struct Subset {
        label: String,
        color: Color,
        id: u64,
    }
    let sub = f
        .dataset("records/chunked")
        .unwrap()
        .read_vec::<Subset>()
        .unwrap();
    assert_eq!(
        sub[5],
        Subset {
            label: "label 5".into(),
            color: Color::Blue,
            id: 15
        }
    );
    // A field the file does not have is an error naming it.
    #[derive(H5Type, Debug)]
    #[repr(C)]
    struct Missing {
        id: u32,
        nope: f32,
    }
    let e = f
        .dataset("records/contiguous")
        .unwrap()
        .read_vec::<Missing>()
        .unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
}

#[test]
fn enumerations_from_the_derive() {
    let (_d, path) = tmp("enum.h5");
    let colors: Vec<Color> = (0..100)
        .map(|i| [Color::Green, Color::Blue, Color::Red][i % 3])
        .collect();
    let levels = vec![Level::High, Level::Low, Level::Mid, Level::Low];
    let flags = vec![true, false, false, true];
    {
        let f = h5::File::create(&path).unwrap();
        write_all_layouts(&f, "colors", &colors, 16);
        write_all_layouts(&f, "levels", &levels, 3);
        write_all_layouts(&f, "flags", &flags, 3);
        f.close().unwrap();
    }
    let colors_json = json!(colors.iter().map(|c| *c as u8).collect::<Vec<_>>());
    let levels_json = json!(levels.iter().map(|c| *c as i16).collect::<Vec<_>>());
    let mut exp = expect_all_layouts(
        Expectations::new(),
        "colors",
        &dtype::enumeration("|u1", &[("Red", 1), ("Green", 2), ("BLUE", 40)]),
        &colors_json,
        100,
        16,
    );
    exp = expect_all_layouts(
        exp,
        "levels",
        &dtype::enumeration("<i2", &[("Low", -5), ("Mid", 0), ("High", 300)]),
        &levels_json,
        4,
        3,
    );
    exp = expect_all_layouts(exp, "flags", &json!("|b1"), &json!(flags), 4, 3);
    check(&path, &exp);
    let f = h5::File::open(&path).unwrap();
    read_all_layouts(&f, "colors", &colors);
    read_all_layouts(&f, "levels", &levels);
    read_all_layouts(&f, "flags", &flags);
    // The enumeration's values are numbers too.
    let raw: Vec<i16> = f
        .dataset("levels/contiguous")
        .unwrap()
        .read::<i16>()
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(raw, [300, -5, 0, -5]);
}

#[test]
fn array_types() {
    let (_d, path) = tmp("array.h5");
    let vecs: Vec<[f64; 3]> = (0..50).map(|i| [i as f64, -(i as f64), 0.25]).collect();
    let mats: Vec<[[i32; 2]; 2]> = (0..20).map(|i| [[i, i + 1], [i * 2, -i]]).collect();
    let strs: Vec<[String; 2]> = vec![["a".into(), "bb".into()], ["".into(), "ccc".into()]];
    {
        let f = h5::File::create(&path).unwrap();
        write_all_layouts(&f, "vecs", &vecs, 8);
        write_all_layouts(&f, "mats", &mats, 6);
        write_all_layouts(&f, "strs", &strs, 1);
        f.close().unwrap();
    }
    let mut exp = expect_all_layouts(
        Expectations::new(),
        "vecs",
        &dtype::array("<f8", &[3]),
        &json!(vecs),
        50,
        8,
    );
    exp = expect_all_layouts(
        exp,
        "mats",
        &dtype::array("<i4", &[2, 2]),
        &json!(mats),
        20,
        6,
    );
    exp = expect_all_layouts(
        exp,
        "strs",
        &dtype::array("vlen-str-utf8", &[2]),
        &json!(strs),
        2,
        1,
    );
    check(&path, &exp);
    let f = h5::File::open(&path).unwrap();
    read_all_layouts(&f, "vecs", &vecs);
    read_all_layouts(&f, "mats", &mats);
    read_all_layouts(&f, "strs", &strs);
}

// ---------------------------------------------------------------------------------------------
// Object references.
// ---------------------------------------------------------------------------------------------

#[test]
fn object_references() {
    let (_d, path) = tmp("refs.h5");
    let targets = ["/g", "/g/sub", "/g/data", "/top"];
    {
        let f = h5::File::create(&path).unwrap();
        let g = f.create_group("g/sub").unwrap();
        let data = f
            .group("g")
            .unwrap()
            .new_dataset::<i32>()
            .create_with_data("data", &[1, 2, 3])
            .unwrap();
        let top = f
            .root()
            .unwrap()
            .new_dataset::<f32>()
            .create_with_data("top", &[0.5])
            .unwrap();
        let refs = vec![
            f.group("g").unwrap().reference(),
            g.reference(),
            data.reference(),
            top.reference(),
        ];
        write_all_layouts(&f, "refs", &refs, 3);
        // A struct holding a reference.
        #[derive(H5Type, Clone)]
        #[repr(C)]
        struct Pointer {
            target: ObjectRef,
            weight: f32,
        }
        let p = vec![
            Pointer {
                target: top.reference(),
                weight: 1.5,
            },
            Pointer {
                target: ObjectRef::null(),
                weight: 0.0,
            },
        ];
        f.root()
            .unwrap()
            .new_dataset::<Pointer>()
            .create_with_data("pointers", &p)
            .unwrap();
        // Dereferencing before closing.
        let back = f.dereference(&refs[2]).unwrap();
        assert_eq!(back.path(), "/g/data");
        f.close().unwrap();
    }
    let exp = expect_all_layouts(
        Expectations::new(),
        "refs",
        &json!("ref-object"),
        &json!(targets),
        4,
        3,
    )
    .dataset(
        "/pointers",
        DatasetExpect::new(
            dtype::compound(&[
                ("target", json!("ref-object"), 0),
                ("weight", json!("<f4"), 8),
            ]),
            &[2],
        )
        .values(json!([{"target": "/top", "weight": 1.5}, {"target": null, "weight": 0.0}])),
    );
    check(&path, &exp);
    let f = h5::File::open(&path).unwrap();
    for ds in ["refs/contiguous", "refs/chunked"] {
        let refs = f.dataset(ds).unwrap().read_vec::<ObjectRef>().unwrap();
        let paths: Vec<String> = refs
            .iter()
            .map(|r| f.dereference(r).unwrap().path().to_owned())
            .collect();
        assert_eq!(paths, targets);
        match f.dereference(&refs[2]).unwrap() {
            h5::Object::Dataset(d) => assert_eq!(d.read_vec::<i32>().unwrap(), [1, 2, 3]),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            f.dereference(&refs[1]).unwrap(),
            h5::Object::Group(_)
        ));
    }
    let scalar = f
        .group("refs")
        .unwrap()
        .attr("scalar")
        .unwrap()
        .read_scalar::<ObjectRef>()
        .unwrap();
    assert_eq!(f.dereference(&scalar).unwrap().path(), "/g");
    assert!(f.dereference(&ObjectRef::null()).is_err());
    // h5py's own dereferencing (`f[ref]`) of the chunked dataset's elements.
    let code = "import h5py, sys\n\
                f = h5py.File(sys.argv[1], 'r')\n\
                print(' '.join(f[r].name for r in f['refs/chunked'][()]))";
    let out = run_python(code, &[&path]);
    assert_eq!(out.trim(), targets.join(" "));
}

// ---------------------------------------------------------------------------------------------
// Data written by h5py, read into derived types.
// ---------------------------------------------------------------------------------------------

#[derive(H5Type, Debug, PartialEq)]
#[repr(C)]
struct FromPy {
    temperature: f64,
    count: i64,
    code: FixedAscii<4>,
    tags: [i16; 3],
    state: PyState,
    note: String,
    on: bool,
}

#[derive(H5Type, Debug, PartialEq, Clone, Copy)]
#[repr(u8)]
enum PyState {
    #[h5(rename = "OFF")]
    Off = 0,
    #[h5(rename = "ON")]
    On = 1,
    #[h5(rename = "BROKEN")]
    Broken = 2,
}

#[test]
fn compound_data_written_by_h5py_reads_into_derived_structs() {
    let (_d, path) = tmp("from_h5py.h5");
    // Members in another order and of other (wider or narrower) types than the struct, an extra
    // member, enumeration values that differ from the Rust discriminants (matched by name).
    let code = r#"
import h5py, numpy as np, sys
state = h5py.enum_dtype({'BROKEN': 7, 'ON': 3, 'OFF': 9}, basetype='i1')
dt = np.dtype([
    ('extra', '<u8'),
    ('note', h5py.string_dtype()),
    ('count', '<i4'),
    ('tags', '<i2', (3,)),
    ('code', 'S4'),
    ('state', state),
    ('on', '?'),
    ('temperature', '>f8'),
])
a = np.zeros(5, dtype=dt)
for i in range(5):
    a[i] = (99, 'note %d' % i, -i, (i, i + 1, i + 2), b'c%d' % i, [9, 3, 7][i % 3], i % 2 == 1, i * 1.5)
with h5py.File(sys.argv[1], 'w') as f:
    f.create_dataset('contiguous', data=a)
    f.create_dataset('chunked', data=a, chunks=(2,), compression='gzip')
    f.attrs.create('attr', a[:2])
    vl = f.create_dataset('vlen', (3,), dtype=h5py.vlen_dtype('<i2'), chunks=(2,), compression='gzip')
    vl[0] = [1, -2]; vl[2] = [300]
    f.create_group('g/h')
    refs = f.create_dataset('refs', (3,), dtype=h5py.ref_dtype)
    refs[0] = f['g/h'].ref; refs[1] = f['contiguous'].ref
"#;
    run_python(code, &[&path]);
    let want: Vec<FromPy> = (0..5)
        .map(|i| FromPy {
            temperature: i as f64 * 1.5,
            count: -(i as i64),
            code: FixedAscii::new(&format!("c{i}")).unwrap(),
            tags: [i as i16, i as i16 + 1, i as i16 + 2],
            state: [PyState::Off, PyState::On, PyState::Broken][i % 3],
            note: format!("note {i}"),
            on: i % 2 == 1,
        })
        .collect();
    let f = h5::File::open(&path).unwrap();
    for ds in ["contiguous", "chunked"] {
        assert_eq!(f.dataset(ds).unwrap().read_vec::<FromPy>().unwrap(), want);
    }
    let attr = f.root().unwrap().attr("attr").unwrap();
    assert_eq!(attr.read_vec::<FromPy>().unwrap(), want[..2]);
    assert_eq!(
        f.dataset("vlen").unwrap().read_vec::<Vec<i32>>().unwrap(),
        [vec![1, -2], vec![], vec![300]]
    );
    let refs = f.dataset("refs").unwrap().read_vec::<ObjectRef>().unwrap();
    assert_eq!(f.dereference(&refs[0]).unwrap().path(), "/g/h");
    assert_eq!(f.dereference(&refs[1]).unwrap().path(), "/contiguous");
    assert!(refs[2].is_null());
    // A narrowing conversion is refused like `Dataset::read`'s.
    #[derive(H5Type, Debug)]
    #[repr(C)]
    struct Narrow {
        extra: u32,
    }
    assert!(
        f.dataset("contiguous")
            .unwrap()
            .read_vec::<Narrow>()
            .is_err()
    );
}

// ---------------------------------------------------------------------------------------------
// Partial writes, fill values, type checks.
// ---------------------------------------------------------------------------------------------

fn range(start: usize, end: usize) -> ndarray::SliceInfoElem {
    ndarray::SliceInfoElem::Slice {
        start: start as isize,
        end: Some(end as isize),
        step: 1,
    }
}

#[test]
fn partial_writes_and_fill_values() {
    let (_d, path) = tmp("partial.h5");
    let fill = Inner {
        a: -1,
        b: [9.5, -9.5],
    };
    {
        let f = h5::File::create(&path).unwrap();
        let root = f.root().unwrap();
        // Strings written in two hyperslabs; rewriting one leaks its old heap objects only.
        let s = root
            .new_dataset::<String>()
            .shape([6])
            .chunk([4])
            .deflate(6)
            .create("strings")
            .unwrap();
        s.write_slice(&["a".to_owned(), "b".into()], [range(0, 2)])
            .unwrap();
        s.write_slice(&["e".to_owned()], [range(4, 5)]).unwrap();
        s.write_slice(&["B".to_owned()], [range(1, 2)]).unwrap();
        // Unwritten compound elements read as the fill value.
        let c = root
            .new_dataset::<Inner>()
            .shape([5])
            .chunk([2])
            .fill_value(fill.clone())
            .create("filled")
            .unwrap();
        c.write_slice(
            &[Inner {
                a: 7,
                b: [1.0, 2.0],
            }],
            [range(2, 3)],
        )
        .unwrap();
        // A fill value with variable-length data is refused, at creation.
        let e = root
            .new_dataset::<String>()
            .shape([2])
            .fill_value("x".into())
            .create("bad_fill")
            .unwrap_err();
        assert!(matches!(e, h5::Error::Unsupported(_)), "{e}");
        // Writing another type than the dataset's is refused.
        assert!(s.write(&[1u8; 6]).is_err());
        assert!(c.write(&[fill.a; 5]).is_err());
        f.close().unwrap();
    }
    let inner = |a: i16, b: [f32; 2]| json!({"a": a, "b": b});
    let exp = Expectations::new()
        .dataset(
            "/strings",
            DatasetExpect::new("vlen-str-utf8", &[6])
                .chunks(&[4])
                .gzip(6)
                .values(json!(["a", "B", "", "", "e", ""])),
        )
        .dataset(
            "/filled",
            DatasetExpect::new(
                dtype::compound(&[("a", json!("<i2"), 0), ("b", dtype::array("<f4", &[2]), 4)]),
                &[5],
            )
            .chunks(&[2])
            .fillvalue(inner(-1, [9.5, -9.5]))
            .values(json!([
                inner(-1, [9.5, -9.5]),
                inner(-1, [9.5, -9.5]),
                inner(7, [1.0, 2.0]),
                inner(-1, [9.5, -9.5]),
                inner(-1, [9.5, -9.5]),
            ])),
        );
    check(&path, &exp);
    let f = h5::File::open(&path).unwrap();
    assert_eq!(
        f.dataset("strings").unwrap().read_vec::<String>().unwrap(),
        ["a", "B", "", "", "e", ""]
    );
    let got = f.dataset("filled").unwrap().read_vec::<Inner>().unwrap();
    assert_eq!(got[0], fill);
    assert_eq!(got[2].a, 7);
}

/// Reading into a type the file's type does not convert to is an error, never a panic or a
/// silent misread.
#[test]
fn impossible_conversions_are_errors() {
    let (_d, path) = tmp("conv.h5");
    {
        let f = h5::File::create(&path).unwrap();
        let root = f.root().unwrap();
        root.new_dataset::<String>()
            .create_with_data("s", &["a".to_owned()])
            .unwrap();
        root.new_dataset::<[f64; 3]>()
            .create_with_data("a", &[[1.0, 2.0, 3.0]])
            .unwrap();
        root.new_dataset::<Level>()
            .create_with_data("e", &[Level::High])
            .unwrap();
        root.new_dataset::<i32>()
            .create_with_data("i", &[0, 1, 7])
            .unwrap();
        root.new_dataset::<Vec<u8>>()
            .create_with_data("v", &[vec![1, 2]])
            .unwrap();
        root.new_dataset::<i16>()
            .create_with_data("i16", &[0, 300, -5])
            .unwrap();
        root.new_dataset::<i16>()
            .create_with_data("i16_bad", &[0, 7])
            .unwrap();
        f.close().unwrap();
    }
    let f = h5::File::open(&path).unwrap();
    let ds = |p: &str| f.dataset(p).unwrap();
    assert!(ds("s").read_vec::<i32>().is_err());
    assert!(ds("s").read_vec::<Inner>().is_err());
    assert!(ds("s").read_vec::<Vec<u8>>().is_err());
    assert!(ds("a").read_vec::<[f64; 4]>().is_err());
    assert!(ds("a").read_vec::<[f32; 3]>().is_err()); // narrowing
    assert_eq!(ds("a").read_vec::<[f64; 3]>().unwrap(), [[1.0, 2.0, 3.0]]);
    assert!(ds("e").read_vec::<Color>().is_err()); // no member of that name
    assert_eq!(ds("e").read_vec::<i16>().unwrap(), [300]);
    // Integers convert to enumerations by value (7 is no Level), losslessly (i32 is too wide).
    assert_eq!(
        ds("i16").read_vec::<Level>().unwrap(),
        [Level::Mid, Level::High, Level::Low]
    );
    assert!(ds("i16_bad").read_vec::<Level>().is_err());
    assert!(ds("i").read_vec::<Level>().is_err());
    assert_eq!(ds("i").read_vec::<bool>().unwrap(), [false, true, true]);
    assert!(ds("v").read_vec::<String>().is_err());
    assert!(ds("v").read_vec::<ObjectRef>().is_err());
    assert_eq!(ds("v").read_scalar::<Vec<u16>>().unwrap(), [1, 2]);
    assert!(ds("i").read_scalar::<i32>().is_err()); // three elements
}

/// A generic struct derives with `H5Type` bounds on its parameters.
#[test]
fn generic_structs() {
    #[derive(H5Type, Clone, Debug, PartialEq)]
    #[repr(C)]
    struct Pair<T> {
        first: T,
        second: T,
    }
    let (_d, path) = tmp("generic.h5");
    let v = vec![
        Pair {
            first: 1.5f32,
            second: -2.0,
        },
        Pair {
            first: 0.0,
            second: 8.25,
        },
    ];
    let s = Pair {
        first: "a".to_owned(),
        second: "bc".to_owned(),
    };
    {
        let f = h5::File::create(&path).unwrap();
        let root = f.root().unwrap();
        root.write_attr("floats", &v).unwrap();
        root.write_attr_scalar("strings", s.clone()).unwrap();
        f.close().unwrap();
    }
    let pair =
        |t: &str, size: u64| dtype::compound(&[("first", json!(t), 0), ("second", json!(t), size)]);
    let exp = Expectations::new()
        .attr(
            "/",
            "floats",
            AttrExpect::new(
                pair("<f4", 4),
                json!([{"first": 1.5, "second": -2.0}, {"first": 0.0, "second": 8.25}]),
            ),
        )
        .attr(
            "/",
            "strings",
            // libhdf5's memory view: the first string shrinks to a pointer (see record_dtype).
            AttrExpect::new(
                pair("vlen-str-utf8", 24 - 8),
                json!({"first": "a", "second": "bc"}),
            ),
        );
    check(&path, &exp);
    let f = h5::File::open(&path).unwrap();
    let root = f.root().unwrap();
    assert_eq!(
        root.attr("floats")
            .unwrap()
            .read_vec::<Pair<f32>>()
            .unwrap(),
        v
    );
    assert_eq!(
        root.attr("strings")
            .unwrap()
            .read_scalar::<Pair<String>>()
            .unwrap(),
        s
    );
}
