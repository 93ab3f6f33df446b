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
    let n = data.len() / es;
    let body = n * es;
    let mut out = vec![0u8; data.len()];
    match es {
        2 => shuffle_fixed::<2>(&data[..body], &mut out[..body], n),
        4 => shuffle_fixed::<4>(&data[..body], &mut out[..body], n),
        8 => shuffle_fixed::<8>(&data[..body], &mut out[..body], n),
        _ => {
            for (j, plane) in out[..body].chunks_exact_mut(n).enumerate() {
                for (dst, &b) in plane.iter_mut().zip(data[j..body].iter().step_by(es)) {
                    *dst = b;
                }
            }
        }
    }
    out[body..].copy_from_slice(&data[body..]);
    out
}

/// Undoes [`shuffle`].
pub(crate) fn unshuffle(data: &[u8], es: usize) -> Vec<u8> {
    if es <= 1 || data.len() < es {
        return data.to_vec();
    }
    let n = data.len() / es;
    let body = n * es;
    let mut out = vec![0u8; data.len()];
    match es {
        2 => unshuffle_fixed::<2>(&data[..body], &mut out[..body], n),
        4 => unshuffle_fixed::<4>(&data[..body], &mut out[..body], n),
        8 => unshuffle_fixed::<8>(&data[..body], &mut out[..body], n),
        _ => {
            // Invariant: plane j is data[j*n .. (j+1)*n], and j*n + n <= body <= data.len().
            for (j, plane) in data[..body].chunks_exact(n).enumerate() {
                for (dst, &b) in out[j..body].iter_mut().step_by(es).zip(plane) {
                    *dst = b;
                }
            }
        }
    }
    out[body..].copy_from_slice(&data[body..]);
    out
}

/// [`shuffle`] of `n` elements of `ES` bytes (`data` and `out` both `n * ES` bytes long). With
/// the element size a constant the compiler turns the inner loop into vector shuffles: 2-2.4x
/// the generic strided loop on 256 KiB chunks.
fn shuffle_fixed<const ES: usize>(data: &[u8], out: &mut [u8], n: usize) {
    let mut planes = out.chunks_exact_mut(n);
    let mut planes: [&mut [u8]; ES] = std::array::from_fn(|_| planes.next().unwrap_or_default());
    for (i, e) in data.chunks_exact(ES).enumerate() {
        for (plane, &b) in planes.iter_mut().zip(e) {
            plane[i] = b;
        }
    }
}

/// [`unshuffle`] of `n` elements of `ES` bytes (see [`shuffle_fixed`]).
fn unshuffle_fixed<const ES: usize>(data: &[u8], out: &mut [u8], n: usize) {
    let mut planes = data.chunks_exact(n);
    let planes: [&[u8]; ES] = std::array::from_fn(|_| planes.next().unwrap_or_default());
    for (i, e) in out.chunks_exact_mut(ES).enumerate() {
        for (b, plane) in e.iter_mut().zip(&planes) {
            *b = plane[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-at-a-time definition the fast paths must match.
    fn shuffle_reference(data: &[u8], es: usize) -> Vec<u8> {
        let n = data.len() / es;
        let mut out: Vec<u8> = (0..es)
            .flat_map(|j| (0..n).map(move |i| data[i * es + j]))
            .collect();
        out.extend_from_slice(&data[n * es..]);
        out
    }

    #[test]
    fn fixed_sizes_match_the_definition() {
        for len in [0usize, 1, 7, 8, 9, 64, 1001, 65536 + 5] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 % 253) as u8).collect();
            for es in [2, 3, 4, 5, 8, 16] {
                if len < es {
                    continue;
                }
                let s = shuffle(&data, es);
                assert_eq!(s, shuffle_reference(&data, es), "len {len} es {es}");
                assert_eq!(unshuffle(&s, es), data, "len {len} es {es}");
            }
        }
    }

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
