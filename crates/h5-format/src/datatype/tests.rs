//! Datatype decoding tests: real messages from h5py, hand-built images for every class and
//! version, corruption sweeps.

use super::*;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn dec(b: &[u8]) -> Result<Datatype> {
    Datatype::decode(&mut Reader::new(b, "datatype", 0))
}

/// Decodes and checks that every byte was consumed.
fn dec_all(h: &str) -> Datatype {
    let b = hex(h);
    let mut r = Reader::new(&b, "datatype", 0);
    let t = Datatype::decode(&mut r).unwrap();
    assert!(r.is_empty(), "{h}: {} bytes left", r.remaining());
    t
}

// Real datatype messages. Generated with h5py 3.12.1 (HDF5 1.14.4):
//   h5py.h5t.py_create(np.dtype(dt)).encode()[2:]   # H5Tencode; drop its 2-byte header
// for dt in '<i1','<u1','<i2','>u2','>i4','<u4','<i8','>u8','<f2','>f4','<f8','>f8'; strings:
//   s = h5py.h5t.C_S1.copy(); s.set_size(12)                          -> STR12 (nullterm)
//   s.set_size(5); s.set_strpad(STR_SPACEPAD); s.set_cset(CSET_UTF8)  -> STR5_SPACE_UTF8
// bfloat16: IEEE_F32LE.copy(); set_fields(15, 7, 8, 0, 7); set_size(2); set_ebias(127).
// Messages in files: walked the object headers of files written with libver 'earliest'/'latest'.
const INTS: [(&str, u32, bool, ByteOrder, &str); 8] = [
    (
        "100800000100000000000800",
        1,
        true,
        ByteOrder::LittleEndian,
        "int8",
    ),
    (
        "100000000100000000000800",
        1,
        false,
        ByteOrder::LittleEndian,
        "uint8",
    ),
    (
        "100800000200000000001000",
        2,
        true,
        ByteOrder::LittleEndian,
        "int16 LE",
    ),
    (
        "100100000200000000001000",
        2,
        false,
        ByteOrder::BigEndian,
        "uint16 BE",
    ),
    (
        "100900000400000000002000",
        4,
        true,
        ByteOrder::BigEndian,
        "int32 BE",
    ),
    (
        "100000000400000000002000",
        4,
        false,
        ByteOrder::LittleEndian,
        "uint32 LE",
    ),
    (
        "100800000800000000004000",
        8,
        true,
        ByteOrder::LittleEndian,
        "int64 LE",
    ),
    (
        "100100000800000000004000",
        8,
        false,
        ByteOrder::BigEndian,
        "uint64 BE",
    ),
];
const F16LE: &str = "11200f0002000000000010000a05000a0f000000";
const F32BE: &str = "11211f000400000000002000170800177f000000";
const F64LE: &str = "11203f000800000000004000340b0034ff030000";
const F64BE: &str = "11213f000800000000004000340b0034ff030000";
const BF16: &str = "11200f000200000000001000070800077f000000";
const STR12: &str = "130000000c000000";
const STR5_SPACE_UTF8: &str = "1312000005000000";
/// h5py.string_dtype('utf-8') in a file (vlen string, size 16 = 4 + 8-byte address + 4; base
/// is a 1-byte unsigned char). Followed by 4 bytes of object-header padding.
const VLEN_UTF8_FILE: &str = "190101001000000010000000010000000000080000000000";
/// h5py.string_dtype('ascii') via H5Tencode (memory type: size 8 = char pointer).
const VLEN_ASCII_MEM: &str = "1901000008000000100000000100000000000800";
/// h5py.vlen_dtype(np.int32) via H5Tencode (memory type: size 16 = hvl_t).
const VLEN_I32: &str = "1900000010000000100800000400000000002000";
/// h5py.enum_dtype({'RED':0,'GREEN':1,'BLUE':42}, basetype=np.int16): version 1, names
/// padded to 8, values packed after the names.
const ENUM16: &str = "1803000002000000100800000200000000001000424c554500000000475245454e00000052454400000000002a0001000000";
/// np.dtype(bool) as h5py stores it: enum int8 {FALSE=0, TRUE=1}.
const BOOL: &str = "180200000100000010080000010000000000080046414c534500000054525545000000000001";
/// np.dtype('V7'): opaque, no tag.
const OPAQUE7: &str = "1500000007000000";
const OBJREF: &str = "1700000008000000";
const REGREF: &str = "170100000c000000";
/// np.dtype([('a','<i4'),('b','>f8'),('c',[('x','u1'),('y','<i2',(2,3))])]): version 2
/// compound (array member 'y' is an array type v2 with permutation), nested compound.
const COMPOUND_V2: &str = "260300001900000061000000000000000000000010080000040000000000200062000000000000000400000011213f000800000000004000340b0034ff03000063000000000000000c000000260200000d0000007800000000000000000000001000000001000000000008007900000000000000010000002a0000000c0000000200000002000000030000000000000001000000100800000200000000001000";
/// The same kind of type written with libver='latest' (version 3: unpadded names, 1-byte
/// offsets, array v3): [('a','<i4'),('b',[('x','u1'),('y','<i2',(2,))])].
const COMPOUND_V3: &str = "460200000900000061000010080000040000000000200062000446020000050000007800001000000001000000000008007900014a000000040000000102000000100800000200000000001000";
/// np.dtype(('<f4',(3,2))): array v2 with permutation [0, 1].
const ARRAY_V2: &str = "2a00000018000000020000000300000002000000000000000100000011201f000400000000002000170800177f000000";
/// np.dtype('<c16') as h5py 3.12 stores it: a version 1 compound {r: float64, i: float64},
/// each member with the v1 dimensionality fields (0 = scalar).
const CPLX_COMPOUND_V1: &str = "16020000100000007200000000000000000000000000000000000000000000000000000000000000000000000000000011203f000800000000004000340b0034ff0300006900000000000000080000000000000000000000000000000000000000000000000000000000000011203f000800000000004000340b0034ff030000";

#[test]
fn real_integers() {
    for (h, size, signed, order, desc) in INTS {
        let t = dec_all(h);
        let Datatype::FixedPoint(f) = &t else {
            panic!("{t:?}")
        };
        assert_eq!((f.size, f.signed, f.order), (size, signed, order), "{h}");
        assert_eq!((f.bit_offset, u32::from(f.precision)), (0, size * 8));
        assert_eq!(t.size(), size);
        assert_eq!(t.describe(), desc);
        assert_eq!(
            t.is_native_int(),
            size == 1 || order == ByteOrder::LittleEndian
        );
    }
}

#[test]
fn real_floats() {
    let t = dec_all(F16LE);
    assert_eq!(t.describe(), "float16 LE");
    let Datatype::Float(f) = t else { panic!() };
    assert_eq!(
        (
            f.exponent_location,
            f.exponent_size,
            f.mantissa_size,
            f.exponent_bias
        ),
        (10, 5, 10, 15)
    );
    assert_eq!(f.sign_location, 15);
    assert_eq!(f.normalization, Normalization::Implied);
    assert_eq!(dec_all(F32BE).describe(), "float32 BE");
    assert_eq!(dec_all(F64LE).describe(), "float64 LE");
    assert!(dec_all(F64LE).is_native_float());
    assert_eq!(dec_all(F64BE).describe(), "float64 BE");
    assert_eq!(dec_all(BF16).describe(), "bfloat16 LE");
}

#[test]
fn real_strings() {
    assert_eq!(
        dec_all(STR12),
        Datatype::String(StringType {
            size: 12,
            padding: StringPadding::NullTerminate,
            charset: Charset::Ascii
        })
    );
    assert_eq!(dec_all(STR12).describe(), "string(12, nullterm, ascii)");
    assert_eq!(
        dec_all(STR5_SPACE_UTF8).describe(),
        "string(5, spacepad, utf8)"
    );
    let b = hex(VLEN_UTF8_FILE);
    let mut r = Reader::new(&b, "datatype", 0);
    let t = Datatype::decode(&mut r).unwrap();
    assert_eq!(r.remaining(), 4); // padding left for the caller
    assert_eq!(t.size(), 16);
    assert_eq!(t.describe(), "vlen string utf8");
    assert!(t.has_indirection());
    let Datatype::VarLen(v) = t else { panic!() };
    assert_eq!(
        v.kind,
        VarLenKind::String {
            padding: StringPadding::NullTerminate,
            charset: Charset::Utf8
        }
    );
    assert_eq!(dec_all(VLEN_I32).describe(), "vlen sequence of int32 LE");
    assert_eq!(dec_all(VLEN_ASCII_MEM).describe(), "vlen string ascii");
    assert_eq!(dec_all(VLEN_ASCII_MEM).size(), 8);
}

#[test]
fn real_enums_opaque_references() {
    let t = dec_all(ENUM16);
    assert_eq!(t.size(), 2);
    assert_eq!(t.describe(), "enum int16 LE {BLUE=42, GREEN=1, RED=0}");
    let Datatype::Enum(e) = &t else { panic!() };
    assert_eq!(e.members[0].value, vec![42, 0]);
    assert_eq!(dec_all(BOOL).describe(), "enum int8 {FALSE=0, TRUE=1}");
    assert_eq!(dec_all(OPAQUE7).describe(), "opaque(7)");
    let r = dec_all(OBJREF);
    assert_eq!(
        r,
        Datatype::Reference(ReferenceType {
            size: 8,
            kind: ReferenceKind::Object,
            encoding_version: 0
        })
    );
    assert_eq!(r.describe(), "object reference");
    assert_eq!(dec_all(REGREF).describe(), "region reference");
    assert_eq!(dec_all(REGREF).size(), 12);
}

#[test]
fn real_compounds_and_arrays() {
    let t = dec_all(COMPOUND_V2);
    assert_eq!(t.size(), 25);
    assert_eq!(
        t.describe(),
        "compound{a: int32 LE, b: float64 BE, c: compound{x: uint8, y: array[2x3] of int16 LE}}"
    );
    let Datatype::Compound(c) = &t else { panic!() };
    assert_eq!(
        c.members.iter().map(|m| m.offset).collect::<Vec<_>>(),
        [0, 4, 12]
    );
    let Datatype::Compound(inner) = &c.members[2].datatype else {
        panic!()
    };
    let Datatype::Array(a) = &inner.members[1].datatype else {
        panic!()
    };
    assert_eq!(a.permutation, Some(vec![0, 1]));
    assert_eq!(inner.members[1].offset, 1);

    let t = dec_all(COMPOUND_V3);
    assert_eq!(
        t.describe(),
        "compound{a: int32 LE, b: compound{x: uint8, y: array[2] of int16 LE}}"
    );
    let Datatype::Compound(c) = &t else { panic!() };
    let Datatype::Compound(inner) = &c.members[1].datatype else {
        panic!()
    };
    let Datatype::Array(a) = &inner.members[1].datatype else {
        panic!()
    };
    assert_eq!(a.permutation, None);

    let t = dec_all(ARRAY_V2);
    assert_eq!(t.size(), 24);
    assert_eq!(t.describe(), "array[3x2] of float32 LE");
    assert_eq!(
        dec_all(CPLX_COMPOUND_V1).describe(),
        "compound{r: float64 LE, i: float64 LE}"
    );
}

// ---- Hand-built images (bytes documented inline) ----

/// 8-byte header: class | version << 4, 24-bit flags, u32 size.
fn head(class: u8, version: u8, flags: u32, size: u32) -> Vec<u8> {
    let mut b = vec![class | (version << 4)];
    b.extend_from_slice(&flags.to_le_bytes()[..3]);
    b.extend_from_slice(&size.to_le_bytes());
    b
}

fn int32le() -> Vec<u8> {
    let mut b = head(0, 1, 0x08, 4);
    b.extend_from_slice(&[0, 0, 32, 0]);
    b
}

#[test]
fn fixed_point_with_padding_and_partial_precision() {
    // Class 0 v1, flags BE | lo_pad | hi_pad (0x07, unsigned), size 2, offset 4, precision 10.
    let mut b = head(0, 1, 0x07, 2);
    b.extend_from_slice(&[4, 0, 10, 0]);
    let t = dec(&b).unwrap();
    assert_eq!(
        t,
        Datatype::FixedPoint(FixedPoint {
            size: 2,
            order: ByteOrder::BigEndian,
            signed: false,
            lo_pad: true,
            hi_pad: true,
            bit_offset: 4,
            precision: 10
        })
    );
    assert_eq!(t.describe(), "uint16 BE (10 bits at 4)");
    assert!(!t.is_native_int());
}

#[test]
fn vax_and_custom_floats() {
    // Class 1 v3, flags: BE bit 0 + bit 6 (VAX), implied normalization (bits 4-5 = 2),
    // sign at 31; size 4; offset 0, precision 32, exponent 23+8, mantissa 0+23, bias 129.
    let mut b = head(1, 3, 0x41 | 0x20 | (31 << 8), 4);
    b.extend_from_slice(&[0, 0, 32, 0, 23, 8, 0, 23, 129, 0, 0, 0]);
    let Datatype::Float(f) = dec(&b).unwrap() else {
        panic!()
    };
    assert_eq!(f.order, ByteOrder::Vax);
    assert_eq!(f.exponent_bias, 129);
    assert_eq!(f.ieee_name(), None);
    // A 24-bit float (size 3, e 7, m 16, bias 63, msb-set normalization, internal pad).
    let mut b = head(1, 1, 0x10 | 0x08 | (23 << 8), 3);
    b.extend_from_slice(&[0, 0, 24, 0, 16, 7, 0, 16, 63, 0, 0, 0]);
    let t = dec(&b).unwrap();
    let Datatype::Float(f) = &t else { panic!() };
    assert_eq!(f.normalization, Normalization::MsbSet);
    assert!(f.internal_pad);
    assert_eq!(
        t.describe(),
        "float(3 bytes, sign 23, exp 16+7 bias 63, mant 0+16) LE"
    );
    // Reserved byte order (bit 6 without bit 0) and normalization 3 are errors.
    let mut b = head(1, 3, 0x40 | (31 << 8), 4);
    b.extend_from_slice(&[0, 0, 32, 0, 23, 8, 0, 23, 127, 0, 0, 0]);
    assert!(dec(&b).is_err());
    let mut b = head(1, 1, 0x30 | (31 << 8), 4);
    b.extend_from_slice(&[0, 0, 32, 0, 23, 8, 0, 23, 127, 0, 0, 0]);
    assert!(dec(&b).is_err());
}

#[test]
fn time_bitfield_opaque_tag() {
    // Time: class 2 v1, BE, size 8, precision 64.
    let mut b = head(2, 1, 1, 8);
    b.extend_from_slice(&[64, 0]);
    let t = dec(&b).unwrap();
    assert_eq!(
        t,
        Datatype::Time(TimeType {
            size: 8,
            order: ByteOrder::BigEndian,
            precision: 64
        })
    );
    assert_eq!(t.describe(), "time64 BE");
    // Bitfield: class 4 v1, LE, size 2, offset 0, precision 16.
    let mut b = head(4, 1, 0, 2);
    b.extend_from_slice(&[0, 0, 16, 0]);
    assert_eq!(dec(&b).unwrap().describe(), "bitfield16 LE");
    // Opaque: class 5 v1, tag length 8, size 3, tag "blob" NUL-padded to 8.
    let mut b = head(5, 1, 8, 3);
    b.extend_from_slice(b"blob\0\0\0\0");
    let t = dec(&b).unwrap();
    assert_eq!(t.describe(), "opaque(3, \"blob\")");
}

#[test]
fn compound_v1_array_member() {
    // Class 6 v1, 1 member, size 24: name "m" padded to 8, offset 0, rank 2, reserved 3,
    // permutation word 0x0100 (perm [0, 1]), reserved 4, dims 2, 3, 0, 0, member int32 LE.
    let mut b = head(6, 1, 1, 24);
    b.extend_from_slice(b"m\0\0\0\0\0\0\0");
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&[2, 0, 0, 0]);
    b.extend_from_slice(&0x0100u32.to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    for d in [2u32, 3, 0, 0] {
        b.extend_from_slice(&d.to_le_bytes());
    }
    b.extend_from_slice(&int32le());
    let t = dec(&b).unwrap();
    let Datatype::Compound(c) = &t else { panic!() };
    let Datatype::Array(a) = &c.members[0].datatype else {
        panic!()
    };
    assert_eq!((a.dims.clone(), a.size), (vec![2, 3], 24));
    assert_eq!(a.permutation, Some(vec![0, 1]));
    assert_eq!(t.describe(), "compound{m: array[2x3] of int32 LE}");
    // Member beyond the compound: size 20 instead of 24.
    b[4] = 20;
    assert!(dec(&b).is_err());
}

#[test]
fn compound_v3_offset_widths() {
    // Size 300 needs 2-byte offsets: class 6 v3, 1 member "a" at offset 296 (0x0128), int32.
    let mut b = head(6, 3, 1, 300);
    b.extend_from_slice(b"a\0");
    b.extend_from_slice(&[0x28, 0x01]);
    b.extend_from_slice(&int32le());
    let Datatype::Compound(c) = dec(&b).unwrap() else {
        panic!()
    };
    assert_eq!(c.members[0].offset, 296);
    assert_eq!(offset_width(255), 1);
    assert_eq!(offset_width(256), 2);
    assert_eq!(offset_width(0x1_0000), 3);
    assert_eq!(offset_width(0x100_0000), 4);
}

#[test]
fn enum_v3_unpadded_names() {
    // Class 8 v3, 2 members, size 1: base uint8 (v1), names "A\0" "BC\0", values 5, 7.
    let mut b = head(8, 3, 2, 1);
    b.extend_from_slice(&head(0, 1, 0, 1));
    b.extend_from_slice(&[0, 0, 8, 0]);
    b.extend_from_slice(b"A\0BC\0");
    b.extend_from_slice(&[5, 7]);
    let t = dec(&b).unwrap();
    assert_eq!(t.describe(), "enum uint8 {A=5, BC=7}");
    // Signed base with negative value: int8 {N=-1}.
    let mut b = head(8, 3, 1, 1);
    b.extend_from_slice(&head(0, 1, 8, 1));
    b.extend_from_slice(&[0, 0, 8, 0]);
    b.extend_from_slice(b"N\0");
    b.push(0xff);
    assert_eq!(dec(&b).unwrap().describe(), "enum int8 {N=-1}");
    // Enum size differing from its base.
    let mut b = head(8, 3, 0, 2);
    b.extend_from_slice(&head(0, 1, 0, 1));
    b.extend_from_slice(&[0, 0, 8, 0]);
    assert!(dec(&b).is_err());
}

#[test]
fn revised_references_v4() {
    // Class 7 v4: type 2 (object2) | encoding version 1 << 4; size 64.
    for (ty, kind, desc) in [
        (2, ReferenceKind::Object2, "object reference (revised)"),
        (
            3,
            ReferenceKind::DatasetRegion2,
            "region reference (revised)",
        ),
        (4, ReferenceKind::Attribute, "attribute reference"),
    ] {
        let t = dec(&head(7, 4, ty | 0x10, 64)).unwrap();
        assert_eq!(
            t,
            Datatype::Reference(ReferenceType {
                size: 64,
                kind,
                encoding_version: 1
            })
        );
        assert_eq!(t.describe(), desc);
        // Needs version 4; encoding version must be 1.
        assert!(dec(&head(7, 3, ty | 0x10, 64)).is_err());
        assert!(dec(&head(7, 4, ty | 0x20, 64)).is_err());
    }
    // Old kinds are fine in version 4 (types upgraded with a sibling member).
    assert!(dec(&head(7, 4, 0, 8)).is_ok());
    assert!(dec(&head(7, 4, 5, 8)).is_err());
}

#[test]
fn vlen_sequence_and_array_v3() {
    // Array v3: class 10, size 8, rank 2, dims 2, 1, base int32 LE.
    let mut b = head(10, 3, 0, 8);
    b.push(2);
    b.extend_from_slice(&2u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&int32le());
    assert_eq!(dec(&b).unwrap().describe(), "array[2x1] of int32 LE");
    // Array in version 1 is invalid; wrong total size is invalid.
    let mut bad = b.clone();
    bad[0] = 10 | (1 << 4);
    assert!(dec(&bad).is_err());
    let mut bad = b.clone();
    bad[4] = 9;
    assert!(dec(&bad).is_err());
    // Rank 0 and rank 33.
    let mut bad = head(10, 3, 0, 4);
    bad.push(0);
    bad.extend_from_slice(&int32le());
    assert!(dec(&bad).is_err());
    let mut bad = head(10, 3, 0, 4);
    bad.push(33);
    bad.extend_from_slice(&[1; 200]);
    assert!(dec(&bad).is_err());
    // Vlen string with unknown padding 3 is unsupported.
    let mut b = head(9, 1, 1 | (3 << 4), 16);
    b.extend_from_slice(&head(0, 1, 0, 1));
    b.extend_from_slice(&[0, 0, 8, 0]);
    assert!(dec(&b).is_err());
}

#[test]
fn complex_v5() {
    // Class 11 v5, flags homogeneous (bit 0), rectangular; size 8; base float32 LE (v1).
    let f32le = hex("11201f000400000000002000170800177f000000");
    let mut b = head(11, 5, 1, 8);
    b.extend_from_slice(&f32le);
    let t = dec(&b).unwrap();
    let Datatype::Complex(c) = &t else { panic!() };
    assert_eq!(c.form, ComplexForm::Rectangular);
    assert_eq!(t.describe(), "complex of float32 LE");
    assert_eq!(t.size(), 8);
    // Polar form (bits 1-2 = 1).
    let mut b = head(11, 5, 1 | 2, 8);
    b.extend_from_slice(&f32le);
    assert_eq!(dec(&b).unwrap().describe(), "complex polar of float32 LE");
    // Errors: version 4, heterogeneous, reserved form, wrong size, integer base.
    for (v, flags, size) in [(4, 1, 8), (5, 0, 8), (5, 1 | 6, 8), (5, 1, 16)] {
        let mut b = head(11, v, flags, size);
        b.extend_from_slice(&f32le);
        assert!(dec(&b).is_err(), "{v} {flags} {size}");
    }
    let mut b = head(11, 5, 1, 8);
    b.extend_from_slice(&int32le());
    assert!(dec(&b).is_err());
}

#[test]
fn header_errors() {
    // Version 0 and 6, size 0, class 12, string charset 2 and padding 3.
    assert!(dec(&head(0, 0, 0, 4)).is_err());
    assert!(dec(&head(3, 6, 0, 4)).is_err());
    assert!(dec(&head(3, 1, 0, 0)).is_err());
    assert!(dec(&head(12, 1, 0, 4)).is_err());
    assert!(dec(&head(3, 1, 0x20, 4)).is_err());
    assert!(dec(&head(3, 1, 0x03, 4)).is_err());
    // Precision beyond the size, precision 0.
    let mut b = head(0, 1, 0, 2);
    b.extend_from_slice(&[8, 0, 16, 0]);
    assert!(dec(&b).is_err());
    let mut b = head(0, 1, 0, 2);
    b.extend_from_slice(&[0, 0, 0, 0]);
    assert!(dec(&b).is_err());
    // Compound without members.
    assert!(dec(&head(6, 1, 0, 4)).is_err());
}

#[test]
fn deep_nesting_is_refused_not_overflowing() {
    // 10 000 nested vlen sequences: must error (depth limit), not overflow the stack.
    let mut b = Vec::new();
    for _ in 0..10_000 {
        b.extend_from_slice(&head(9, 1, 0, 16));
    }
    b.extend_from_slice(&int32le());
    assert!(dec(&b).is_err());
    // 30 levels are fine.
    let mut b = Vec::new();
    for _ in 0..30 {
        b.extend_from_slice(&head(9, 1, 0, 16));
    }
    b.extend_from_slice(&int32le());
    assert!(dec(&b).is_ok());
}

#[test]
fn huge_counts_do_not_allocate() {
    // Enum with 65535 members of 4-byte base but no bytes for them.
    let mut b = head(8, 3, 0xFFFF, 4);
    b.extend_from_slice(&int32le());
    assert!(dec(&b).is_err());
    // Compound with 65535 members but only one present.
    let mut b = head(6, 3, 0xFFFF, 4);
    b.extend_from_slice(b"a\0\0");
    b.extend_from_slice(&int32le());
    assert!(dec(&b).is_err());
    // Array dims whose product overflows u32.
    let mut b = head(10, 3, 0, 4);
    b.push(2);
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    b.extend_from_slice(&int32le());
    assert!(dec(&b).is_err());
}

#[test]
fn every_truncation_is_an_error() {
    let mut all: Vec<Vec<u8>> = [
        F16LE,
        F64BE,
        BF16,
        STR12,
        VLEN_I32,
        ENUM16,
        BOOL,
        OPAQUE7,
        OBJREF,
        COMPOUND_V2,
        COMPOUND_V3,
        ARRAY_V2,
        CPLX_COMPOUND_V1,
    ]
    .iter()
    .map(|h| hex(h))
    .collect();
    all.extend(INTS.iter().map(|i| hex(i.0)));
    for b in &all {
        dec(b).unwrap();
        for n in 0..b.len() {
            assert!(dec(&b[..n]).is_err(), "{b:02x?} truncated to {n}");
        }
    }
}

#[test]
fn byte_flips_never_panic() {
    // Every single-byte corruption of the real messages decodes or errors, never panics.
    for h in [
        COMPOUND_V2,
        COMPOUND_V3,
        ENUM16,
        ARRAY_V2,
        CPLX_COMPOUND_V1,
        F16LE,
    ] {
        let b = hex(h);
        for i in 0..b.len() {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut c = b.clone();
                c[i] = v;
                let _ = dec(&c);
            }
        }
    }
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = dec(&b);
        }

        #[test]
        fn arbitrary_tails_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..128), class in 0u8..12, version in 1u8..6, flags in any::<u32>()) {
            let mut b = head(class, version, flags & 0xFF_FFFF, 16);
            b.extend_from_slice(&tail);
            let _ = dec(&b);
        }
    }
}

// ---- Encoding ----

/// The version in a message's first byte.
fn version_of(b: &[u8]) -> u8 {
    b[0] >> 4
}

/// Decodes `b`, encodes at the version it was written with, expects the same bytes.
fn byte_exact(b: &[u8]) {
    let t = dec(b).unwrap();
    let e = t.encode(version_of(b)).unwrap();
    assert_eq!(hex_of(&e), hex_of(b), "{}", t.describe());
    assert_eq!(t.encoded_len(version_of(b)).unwrap(), b.len());
    assert_eq!(dec(&e).unwrap(), t);
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn encode_real_messages_byte_exact() {
    let mut all: Vec<&str> = INTS.iter().map(|i| i.0).collect();
    all.extend([
        F16LE,
        F32BE,
        F64LE,
        F64BE,
        BF16,
        STR12,
        STR5_SPACE_UTF8,
        VLEN_ASCII_MEM,
        VLEN_I32,
        ENUM16,
        BOOL,
        OPAQUE7,
        OBJREF,
        REGREF,
        COMPOUND_V2,
        COMPOUND_V3,
        ARRAY_V2,
        CPLX_COMPOUND_V1,
    ]);
    for h in all {
        byte_exact(&hex(h));
    }
    // In a file the message is followed by 4 bytes of object-header padding.
    let b = hex(VLEN_UTF8_FILE);
    byte_exact(&b[..b.len() - 4]);
}

#[test]
fn encode_hand_built_images_byte_exact() {
    // Compound v1 with an array member (intrinsic shape), compound v3 with 2-byte offsets,
    // enum v3, array v3, revised references v4, complex v5 (polar), bitfield, time, VAX
    // float, opaque with tags of 3 and 8 bytes.
    let mut imgs = Vec::new();
    let mut b = head(6, 1, 1, 24);
    b.extend_from_slice(b"m\0\0\0\0\0\0\0");
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&[2, 0, 0, 0]);
    b.extend_from_slice(&0x0100u32.to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    for d in [2u32, 3, 0, 0] {
        b.extend_from_slice(&d.to_le_bytes());
    }
    b.extend_from_slice(&int32le());
    imgs.push(b);
    let mut b = head(6, 3, 1, 300);
    b.extend_from_slice(b"a\0");
    b.extend_from_slice(&[0x28, 0x01]);
    b.extend_from_slice(&int32le());
    imgs.push(b);
    let mut b = head(6, 3, 1, 70000);
    b.extend_from_slice(b"a\0");
    b.extend_from_slice(&[0x01, 0x00, 0x01]);
    b.extend_from_slice(&int32le());
    imgs.push(b);
    let mut b = head(8, 3, 2, 1);
    b.extend_from_slice(&head(0, 1, 0, 1));
    b.extend_from_slice(&[0, 0, 8, 0]);
    b.extend_from_slice(b"A\0BC\0");
    b.extend_from_slice(&[5, 7]);
    imgs.push(b);
    let mut b = head(10, 3, 0, 8);
    b.push(2);
    b.extend_from_slice(&2u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&int32le());
    imgs.push(b);
    for ty in [2, 3, 4] {
        imgs.push(head(7, 4, ty | 0x10, 64));
    }
    let mut b = head(11, 5, 1 | 2, 8);
    b.extend_from_slice(&hex("11201f000400000000002000170800177f000000"));
    imgs.push(b);
    let mut b = head(4, 1, 0x07, 2);
    b.extend_from_slice(&[4, 0, 10, 0]);
    imgs.push(b);
    let mut b = head(2, 1, 1, 4);
    b.extend_from_slice(&[32, 0]);
    imgs.push(b);
    // VAX float64, internal padding, MSB-set normalization, sign at 15.
    let mut b = head(1, 1, 0x41 | 0x08 | 0x10 | (15 << 8), 8);
    b.extend_from_slice(&[0, 0, 64, 0, 7, 8, 0, 55, 129, 0, 0, 0]);
    imgs.push(b);
    let mut b = head(5, 1, 8, 2);
    b.extend_from_slice(b"abc\0\0\0\0\0");
    imgs.push(b);
    let mut b = head(5, 1, 8, 2);
    b.extend_from_slice(b"abcdefgh");
    imgs.push(b);
    for b in imgs {
        byte_exact(&b);
    }
}

#[test]
fn encode_versions_and_errors() {
    let i32le = dec(&int32le()).unwrap();
    assert_eq!(i32le.min_version(), 1);
    assert_eq!(i32le.upgraded_version(3), 1);
    let arr = Datatype::Array(ArrayType {
        size: 8,
        dims: vec![2],
        permutation: None,
        base: Box::new(i32le.clone()),
    });
    assert_eq!(arr.min_version(), 2);
    assert_eq!(arr.upgraded_version(3), 3);
    // Version 2 writes the identity permutation; version 1 cannot hold an array.
    let e = arr.encode(2).unwrap();
    let Datatype::Array(a) = dec(&e).unwrap() else {
        panic!()
    };
    assert_eq!(a.permutation, Some(vec![0]));
    assert!(arr.encode(1).is_err());
    assert!(i32le.encode(0).is_err());
    assert!(i32le.encode(6).is_err());
    let cplx = dec(&{
        let mut b = head(11, 5, 1, 8);
        b.extend_from_slice(&hex("11201f000400000000002000170800177f000000"));
        b
    })
    .unwrap();
    assert_eq!(cplx.min_version(), 5);
    assert!(cplx.encode(4).is_err());
    // Compound: no members, a NUL in a name, a version-1 array member without permutation.
    let empty = Datatype::Compound(CompoundType {
        size: 4,
        members: vec![],
    });
    assert!(empty.encode(1).is_err());
    let member = |name: &str, datatype: Datatype| {
        Datatype::Compound(CompoundType {
            size: 8,
            members: vec![CompoundMember {
                name: name.into(),
                offset: 0,
                datatype,
            }],
        })
    };
    assert!(member("a\0b", i32le.clone()).encode(1).is_err());
    assert_eq!(member("a", arr.clone()).min_version(), 2);
    assert!(member("a", arr.clone()).encode(1).is_err());
    assert!(member("a", arr.clone()).encode(2).is_ok());
    // Opaque tag too long; enum value of the wrong width.
    let op = Datatype::Opaque(OpaqueType {
        size: 1,
        tag: "x".repeat(249),
    });
    assert!(op.encode(1).is_err());
    let en = Datatype::Enum(EnumType {
        base: Box::new(i32le.clone()),
        members: vec![EnumMember {
            name: "A".into(),
            value: vec![1],
        }],
    });
    assert!(en.encode(1).is_err());
    // A version-3 compound holds version-3 nested compounds and arrays, version-1 atoms.
    let nested = member("n", member("m", arr.clone()));
    let e = nested.encode(3).unwrap();
    assert_eq!(version_of(&e), 3);
    let inner_at = 8 + 2 + 1; // header, "n\0", 1-byte offset
    assert_eq!(version_of(&e[inner_at..]), 3);
    assert_eq!(dec(&e).unwrap(), member("n", member("m", arr)));
}

mod encode_prop {
    use super::*;
    use proptest::prelude::*;

    fn atom() -> impl Strategy<Value = Datatype> {
        prop_oneof![
            (
                proptest::sample::select(vec![1u32, 2, 4, 8]),
                any::<bool>(),
                any::<bool>()
            )
                .prop_map(|(size, signed, be)| Datatype::FixedPoint(FixedPoint {
                    size,
                    order: if be {
                        ByteOrder::BigEndian
                    } else {
                        ByteOrder::LittleEndian
                    },
                    signed,
                    lo_pad: false,
                    hi_pad: !signed,
                    bit_offset: 0,
                    precision: (size * 8) as u16,
                })),
            (1u32..40, 0usize..3, any::<bool>()).prop_map(|(size, p, utf8)| {
                Datatype::String(StringType {
                    size,
                    padding: [
                        StringPadding::NullTerminate,
                        StringPadding::NullPad,
                        StringPadding::SpacePad,
                    ][p],
                    charset: if utf8 { Charset::Utf8 } else { Charset::Ascii },
                })
            }),
            (1u32..20, "[a-z]{0,20}")
                .prop_map(|(size, tag)| Datatype::Opaque(OpaqueType { size, tag })),
            Just(Datatype::Reference(ReferenceType {
                size: 8,
                kind: ReferenceKind::Object,
                encoding_version: 0
            })),
        ]
    }

    fn datatype() -> impl Strategy<Value = Datatype> {
        atom().prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec((inner.clone(), "[a-z]{1,12}"), 1..4).prop_map(|ms| {
                    let mut offset = 0;
                    let members = ms
                        .into_iter()
                        .map(|(datatype, name)| {
                            let m = CompoundMember {
                                name,
                                offset,
                                datatype,
                            };
                            offset += m.datatype.size();
                            m
                        })
                        .collect();
                    Datatype::Compound(CompoundType {
                        size: offset,
                        members,
                    })
                }),
                (inner.clone(), proptest::collection::vec(1u32..4, 1..3)).prop_map(
                    |(base, dims)| {
                        Datatype::Array(ArrayType {
                            size: dims.iter().product::<u32>() * base.size(),
                            dims,
                            permutation: None,
                            base: Box::new(base),
                        })
                    }
                ),
                inner.prop_map(|base| Datatype::VarLen(VarLenType {
                    size: 16,
                    kind: VarLenKind::Sequence,
                    base: Box::new(base),
                })),
            ]
        })
    }

    proptest! {
        #[test]
        fn encode_decode_round_trip(t in datatype(), v in 3u8..6) {
            let b = t.encode(v).unwrap();
            prop_assert_eq!(dec(&b).unwrap(), t.clone());
            // And the bytes are the canonical ones: re-encoding gives them back.
            prop_assert_eq!(dec(&b).unwrap().encode(v).unwrap(), b);
        }

        #[test]
        fn enum_round_trip(names in proptest::collection::btree_set("[A-Z]{1,9}", 0..6), v in 1u8..6) {
            let members = names
                .into_iter()
                .enumerate()
                .map(|(i, name)| EnumMember { name, value: vec![i as u8, 0] })
                .collect();
            let base = Datatype::FixedPoint(FixedPoint {
                size: 2,
                order: ByteOrder::LittleEndian,
                signed: true,
                lo_pad: false,
                hi_pad: false,
                bit_offset: 0,
                precision: 16,
            });
            let t = Datatype::Enum(EnumType { base: Box::new(base), members });
            prop_assert_eq!(dec(&t.encode(v).unwrap()).unwrap(), t);
        }
    }
}
