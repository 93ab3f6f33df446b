//! Buffers whose size comes from a file (a dataset's dimensions × element size, an attribute's,
//! a count): allocated fallibly, so that a size no memory can hold (a damaged dimension, or a
//! real dataset bigger than memory) is [`Error::TooLarge`] instead of an aborted process.

use crate::error::{Error, Result};

/// A buffer of `len` zero bytes (`None`: the size overflowed) for `what` (named in the error).
pub fn zeroed(what: impl FnOnce() -> String, len: Option<u64>) -> Result<Vec<u8>> {
    filled(what, len, 0)
}

/// A buffer of `len` elements equal to `value`.
pub fn filled<T: Clone>(
    what: impl FnOnce() -> String,
    len: Option<u64>,
    value: T,
) -> Result<Vec<T>> {
    let n = len.and_then(|n| usize::try_from(n).ok());
    let mut v = Vec::new();
    match n {
        Some(n) if v.try_reserve_exact(n).is_ok() => {
            v.resize(n, value);
            Ok(v)
        }
        _ => Err(Error::too_large(
            what(),
            len.and_then(|n| n.checked_mul(std::mem::size_of::<T>() as u64)),
        )),
    }
}

/// The product of `factors` (a dataset's dimensions and element size), `None` when it
/// overflows.
pub fn product(factors: impl IntoIterator<Item = u64>) -> Option<u64> {
    factors
        .into_iter()
        .try_fold(1u64, |acc, f| acc.checked_mul(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn sizes_no_memory_holds_are_typed_errors() {
        assert_eq!(zeroed(|| "x".into(), Some(3)).unwrap(), vec![0, 0, 0]);
        let e = zeroed(|| "dataset /d".into(), Some(1 << 62)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TooLarge);
        assert!(e.to_string().contains("dataset /d"), "{e}");
        assert!(e.to_string().contains(&(1u64 << 62).to_string()), "{e}");
        let e = zeroed(|| "dataset /d".into(), None).unwrap_err();
        assert!(
            matches!(
                e,
                Error::TooLarge {
                    bytes: u64::MAX,
                    ..
                }
            ),
            "{e:?}"
        );
        // 2^63 elements of 4 bytes: the byte count itself overflows.
        let e = filled(|| "n".into(), Some(1 << 63), 0u32).unwrap_err();
        assert!(
            matches!(
                e,
                Error::TooLarge {
                    bytes: u64::MAX,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(product([2, 3, 4]), Some(24));
        assert_eq!(product([1 << 40, 1 << 40]), None);
    }
}
