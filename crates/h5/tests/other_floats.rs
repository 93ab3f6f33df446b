//! Floating-point layouts other than IEEE half, single and double precision: x87 extended
//! precision (numpy's `longdouble`, 80 bits in 16 bytes), big-endian IEEE quad precision and a
//! 20-bit float at bit offset 7 under the n-bit filter (whose datatype h5 refused as corrupt),
//! written by h5py; h5 reads them as f64 when asked for a lossy read (as numpy rounds the first
//! and libhdf5 converts the second), refuses
//! a lossless one, and attribute values come out the same way.

use h5_testkit::verify::run_python;

const SCRIPT: &str = r#"
import json, struct, sys
import h5py, numpy as np

values = [1.0, -2.5, 1.0 / 3.0, 1e300, -1e-300, 6.103515625e-05, 0.0, -0.0,
          float("inf"), float("-inf"), 123456789.125]
with h5py.File(sys.argv[1], "w") as f:
    ld = np.array(values, dtype=np.longdouble)
    # Beyond f64's range: f64 infinity; below it: zero (x87 holds both).
    ld = np.append(ld, [np.longdouble(10) ** 400, np.longdouble(10) ** -400])
    ld = np.append(ld, [np.longdouble(1) / 3])  # 64-bit mantissa: rounds to f64's 1/3
    f["x87"] = ld
    f["x87_nan"] = np.array([np.nan], dtype=np.longdouble)
    f.attrs["x87_attr"] = ld[:3]
    # IEEE binary128, big-endian: each f64 re-encoded exactly (15-bit exponent, 112-bit
    # mantissa), written as raw bytes through a custom type.
    quad = h5py.h5t.IEEE_F64BE.copy()
    quad.set_size(16)
    quad.set_precision(128)
    quad.set_fields(127, 112, 15, 0, 112)
    quad.set_ebias(16383)
    def encode(x):
        b = struct.unpack(">Q", struct.pack(">d", x))[0]
        sign, exp, mant = b >> 63, (b >> 52) & 0x7FF, b & ((1 << 52) - 1)
        if exp == 0x7FF:
            e = 0x7FFF
        elif exp == 0 and mant == 0:
            e = 0
        else:
            e = exp - 1023 + 16383
        return ((sign << 127) | (e << 112) | (mant << 60)).to_bytes(16, "big")
    raw = np.frombuffer(b"".join(encode(x) for x in values), dtype="V16")
    space = h5py.h5s.create_simple((len(values),))
    d = h5py.h5d.create(f.id, b"quad", quad, space)
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=quad)
    # A 20-bit float in 4 bytes from bit 7 (libhdf5's n-bit filter test type), stored through
    # the n-bit filter; libhdf5 converts the f32 values on writing.
    nbit = h5py.h5t.IEEE_F32BE.copy()
    nbit.set_fields(26, 20, 6, 7, 13)
    nbit.set_offset(7)
    nbit.set_precision(20)
    nbit.set_size(4)
    nbit.set_ebias(31)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((4,))
    dcpl.set_filter(h5py.h5z.FILTER_NBIT)
    d = h5py.h5d.create(f.id, b"nbit", nbit, h5py.h5s.create_simple((9,)), dcpl=dcpl)
    small = np.array([1 / 3, 2 / 3, 1.0, -2.2, 0.0, 1e-3, 3.5, -0.125, 7.75], dtype="<f4")
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, small, mtype=h5py.h5t.NATIVE_FLOAT)

def as_f64(f, name):
    # libhdf5's own conversion to double (numpy has no binary128 nor 20-bit floats).
    d = h5py.h5d.open(f.id, name)
    out = np.empty(d.shape, dtype="<f8")
    d.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=h5py.h5t.NATIVE_DOUBLE)
    return [float(v) for v in out]

with h5py.File(sys.argv[1], "r") as f:
    out = {
        "x87": [float(v) for v in f["x87"][()]],
        "quad": as_f64(f, b"quad"),
        "nbit": as_f64(f, b"nbit"),
        "attr": [float(v) for v in f.attrs["x87_attr"]],
        "sizes": [f["x87"].id.get_type().get_size(), f["quad"].id.get_type().get_size()],
    }
print(json.dumps(out))
"#;

fn as_f64s(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| match x {
            serde_json::Value::String(s) if s == "Infinity" => f64::INFINITY,
            serde_json::Value::String(s) if s == "-Infinity" => f64::NEG_INFINITY,
            _ => x.as_f64().unwrap(),
        })
        .collect()
}

/// Bit-exact comparison (keeps -0.0 apart from 0.0).
fn same_bits(got: &[f64], want: &[f64], what: &str) {
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(got), bits(want), "{what}: {got:?} against {want:?}");
}

#[test]
fn x87_quad_and_nbit_floats_read_as_f64_as_libhdf5_and_numpy_convert_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("floats.h5");
    let out = run_python(SCRIPT, &[&path]);
    // json.dumps writes infinities as bare Infinity tokens: quote them for serde.
    let fixed = out
        .trim()
        .replace("-Infinity", "\"-Infinity\"")
        .replace(" Infinity", " \"Infinity\"");
    let want: serde_json::Value = serde_json::from_str(&fixed).unwrap();
    assert_eq!(want["sizes"], serde_json::json!([16, 16]));
    let f = h5::File::open(&path).unwrap();
    for (name, key) in [("x87", "x87"), ("quad", "quad"), ("nbit", "nbit")] {
        let d = f.dataset(name).unwrap();
        let got: Vec<f64> = d.read_lossy::<f64>().unwrap().iter().copied().collect();
        same_bits(&got, &as_f64s(&want[key]), name);
        // Narrowing: refused unless asked for.
        let e = d.read::<f64>().unwrap_err();
        assert!(e.to_string().contains("lose data"), "{name}: {e}");
    }
    let nan: Vec<f64> = f
        .dataset("x87_nan")
        .unwrap()
        .read_lossy::<f64>()
        .unwrap()
        .iter()
        .copied()
        .collect();
    assert!(nan.len() == 1 && nan[0].is_nan(), "{nan:?}");
    // Attributes read as values (what `h5 dump --json` prints).
    let got: Vec<f64> = f
        .attr("x87_attr")
        .unwrap()
        .read_values()
        .unwrap()
        .into_iter()
        .map(|v| match v {
            h5::Value::Float(x) => x,
            other => panic!("{other:?}"),
        })
        .collect();
    same_bits(&got, &as_f64s(&want["attr"]), "attribute");
}

/// VAX G floats (`H5T_VAX_F64`) of libhdf5's own `tvms.h5` (element (i, j) = i + j), written by
/// a libhdf5 that still converted to VAX order (newer ones do not round-trip VAX floats, so no
/// h5py check is possible): read as f64, exactly.
#[test]
fn vax_floats_of_libhdf5s_test_file_read_as_f64() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/libhdf5_misc/tvms.h5");
    let f = h5::File::open(&path).unwrap();
    let d = f.dataset("Array").unwrap();
    assert_eq!(d.shape(), [5, 6]);
    let got: Vec<f64> = d.read_lossy::<f64>().unwrap().iter().copied().collect();
    let want: Vec<f64> = (0..5)
        .flat_map(|i| (0..6).map(move |j| f64::from(i + j)))
        .collect();
    assert_eq!(got, want);
}
