//! The byte-shuffle filter (id 2): byte `j` of every element is gathered into plane `j`.
//! Bytes past the last whole element are left in place, as libhdf5 does.

use crate::pipeline::Ctx;

/// The element size: client data 0 when present (libhdf5 sets it), else the dataset's.
pub(crate) fn elem_size(cd: &[u32], ctx: &Ctx) -> usize {
    cd.first()
        .and_then(|&v| usize::try_from(v).ok())
        .filter(|&v| v > 0)
        .unwrap_or(ctx.elem_size)
}

/// Shuffles `data` (elements of `es` bytes) into byte planes.
pub(crate) fn shuffle(data: &[u8], es: usize) -> Vec<u8> {
    if es <= 1 || data.len() < es {
        return data.to_vec();
    }
    // `es` > 1 here; `body` ≤ `data.len()`.
    let body = data
        .len()
        .saturating_sub(data.len().checked_rem(es).unwrap_or(0));
    let (whole, tail) = data.split_at(body);
    let mut out = Vec::with_capacity(data.len());
    for j in 0..es {
        out.extend(whole.iter().skip(j).step_by(es));
    }
    out.extend_from_slice(tail);
    out
}

/// Undoes [`shuffle`].
pub(crate) fn unshuffle(data: &[u8], es: usize) -> Vec<u8> {
    if es <= 1 || data.len() < es {
        return data.to_vec();
    }
    // `es` > 1 and `data.len()` ≥ `es` here, so `n` ≥ 1; plane j is data[j*n .. (j+1)*n].
    let n = data.len().checked_div(es).unwrap_or(1);
    let body = data
        .len()
        .saturating_sub(data.len().checked_rem(es).unwrap_or(0));
    let (whole, tail) = data.split_at(body);
    let mut out = vec![0u8; data.len()];
    let (out_whole, out_tail) = out.split_at_mut(body);
    for (j, plane) in whole.chunks_exact(n).enumerate() {
        for (dst, &b) in out_whole.iter_mut().skip(j).step_by(es).zip(plane) {
            *dst = b;
        }
    }
    out_tail.copy_from_slice(tail);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_tail() {
        let data: Vec<u8> = (0..23u8).collect();
        for es in 1..9 {
            let s = shuffle(&data, es);
            assert_eq!(unshuffle(&s, es), data, "es {es}");
        }
        assert_eq!(
            shuffle(&[1, 2, 3, 4, 5, 6, 7], 2),
            vec![1, 3, 5, 2, 4, 6, 7]
        );
    }
}
