//! Helpers to turn manifest values (see the crate docs for the encoding) into Rust values and to
//! compare them with what the engine read.

use serde_json::Value;

use crate::{Object, sha256_hex};

/// Parses a manifest float (a `repr` string such as `"1.5"`, `"-0.0"`, `"inf"`, `"nan"`, or a
/// plain JSON number). Exact: the strings are shortest round-trip representations of an f64.
pub fn parse_f64(v: &Value) -> Option<f64> {
    match v {
        Value::String(s) => s.parse::<f64>().ok(),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// True when `a` and `b` are the same float: bit-equal after treating every NaN as equal
/// (so `0.0` and `-0.0` differ, as they do on disk).
pub fn same_f64(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// Flattens the first `rank` levels of nested lists (a dataset of that rank) into its elements
/// in C order. `rank == 0` returns the value itself. Deeper lists (array-typed elements, vlen
/// sequences) stay intact.
pub fn flatten(v: &Value, rank: usize) -> Vec<&Value> {
    let mut out = Vec::new();
    fn go<'a>(v: &'a Value, rank: usize, out: &mut Vec<&'a Value>) {
        match (rank, v) {
            (0, _) => out.push(v),
            (_, Value::Array(items)) => items.iter().for_each(|i| go(i, rank - 1, out)),
            _ => out.push(v),
        }
    }
    go(v, rank, &mut out);
    out
}

/// Flattens any nesting of lists completely (e.g. a dataset whose elements are arrays).
pub fn flatten_all(v: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    fn go<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
        match v {
            Value::Array(items) => items.iter().for_each(|i| go(i, out)),
            _ => out.push(v),
        }
    }
    go(v, &mut out);
    out
}

/// The dataset's inline values flattened to elements (rank from `shape`).
pub fn elements(obj: &Object) -> Option<Vec<&Value>> {
    let v = obj.values.as_ref()?;
    let rank = obj.shape.as_ref().map_or(0, Vec::len);
    Some(flatten(v, rank))
}

/// Inline values of a float dataset as f64, C order.
pub fn f64_values(obj: &Object) -> Option<Vec<f64>> {
    elements(obj)?.into_iter().map(parse_f64).collect()
}

/// Inline values of a signed integer (or enum, or bool as 0/1) dataset, C order.
pub fn i64_values(obj: &Object) -> Option<Vec<i64>> {
    elements(obj)?
        .into_iter()
        .map(|v| match v {
            Value::Bool(b) => Some(i64::from(*b)),
            _ => v.as_i64(),
        })
        .collect()
}

/// Inline values of an unsigned integer dataset, C order.
pub fn u64_values(obj: &Object) -> Option<Vec<u64>> {
    elements(obj)?.into_iter().map(Value::as_u64).collect()
}

/// Inline values of a string dataset (as h5py returns them: fixed-size padding removed), C order.
pub fn string_values(obj: &Object) -> Option<Vec<String>> {
    elements(obj)?
        .into_iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// Compares f64 values read by the engine with the manifest's inline values; returns a
/// description of the first difference.
pub fn check_f64s(obj: &Object, actual: &[f64]) -> Result<(), String> {
    let expected = f64_values(obj).ok_or_else(|| format!("{}: no float values", obj.path))?;
    if expected.len() != actual.len() {
        return Err(format!(
            "{}: {} values expected, {} read",
            obj.path,
            expected.len(),
            actual.len()
        ));
    }
    match expected
        .iter()
        .zip(actual)
        .position(|(e, a)| !same_f64(*e, *a))
    {
        Some(i) => Err(format!(
            "{}: element {i}: expected {:?}, read {:?}",
            obj.path, expected[i], actual[i]
        )),
        None => Ok(()),
    }
}

/// Compares the C-order little-endian bytes of all elements, as the engine read them, with the
/// manifest: `values_sha256` for large datasets, or `raw_hex` for small fixed-size ones when the
/// file type is little-endian (for big-endian file types, compare `raw_hex` with the raw bytes
/// instead).
pub fn check_le_bytes(obj: &Object, le_bytes: &[u8]) -> Result<(), String> {
    if let Some(h) = &obj.values_sha256 {
        let got = sha256_hex(le_bytes);
        return if &got == h {
            Ok(())
        } else {
            Err(format!("{}: sha256 {got}, expected {h}", obj.path))
        };
    }
    match obj.raw_bytes() {
        Some(raw) if raw == le_bytes => Ok(()),
        Some(_) => Err(format!("{}: bytes differ from raw_hex", obj.path)),
        None => Err(format!("{}: neither values_sha256 nor raw_hex", obj.path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_parse_exactly() {
        assert_eq!(parse_f64(&json!("1.5")), Some(1.5));
        assert!(same_f64(parse_f64(&json!("-0.0")).unwrap_or(0.0), -0.0));
        assert!(!same_f64(0.0, -0.0));
        assert!(parse_f64(&json!("nan")).is_some_and(f64::is_nan));
        assert_eq!(parse_f64(&json!("-inf")), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(&json!("5e-324")), Some(f64::from_bits(1)));
        assert_eq!(parse_f64(&json!("1.7976931348623157e+308")), Some(f64::MAX));
    }

    #[test]
    fn flatten_respects_rank() {
        let v = json!([[[1, 2], [3, 4]], [[5, 6], [7, 8]]]);
        assert_eq!(flatten(&v, 1).len(), 2);
        assert_eq!(flatten(&v, 2).len(), 4);
        assert_eq!(flatten(&v, 3).len(), 8);
        assert_eq!(flatten_all(&v).len(), 8);
        assert_eq!(flatten(&json!(7), 0), vec![&json!(7)]);
    }
}
