//! ndarray slice descriptions (`s![..]`) as HDF5 hyperslabs.

use std::cell::RefCell;

use h5_chunkcache::selection::Hyperslab;
use ndarray::SliceInfoElem;

use crate::Error;

/// The hyperslab a slice selects in a dataset of `dims`, and the shape of the result (indexed
/// dimensions dropped, new axes added). Negative positions count from the end; steps must be
/// positive (HDF5 strides are); dimensions not named are taken whole.
pub fn hyperslab(elems: &[SliceInfoElem], dims: &[u64]) -> Result<(Hyperslab, Vec<usize>), Error> {
    hyperslab_reusing(elems, dims, None)
}

/// [`hyperslab`] built in the lists of an earlier result `old` (a handle's repeated writes
/// allocate nothing once their lists have grown to the rank).
pub fn hyperslab_reusing(
    elems: &[SliceInfoElem],
    dims: &[u64],
    old: Option<(Hyperslab, Vec<usize>)>,
) -> Result<(Hyperslab, Vec<usize>), Error> {
    let (mut start, mut stride, mut count, mut block, mut shape) = match old {
        Some((h, shape)) => (h.start, h.stride, h.count, h.block, shape),
        None => (
            Vec::with_capacity(dims.len()),
            Vec::with_capacity(dims.len()),
            Vec::with_capacity(dims.len()),
            Vec::with_capacity(dims.len()),
            Vec::new(),
        ),
    };
    for v in [&mut start, &mut stride, &mut count, &mut block] {
        v.clear();
    }
    shape.clear();
    let mut d = 0usize;
    let bad = |m: String| Error::Invalid(m);
    for e in elems {
        match *e {
            SliceInfoElem::NewAxis => shape.push(1),
            SliceInfoElem::Index(i) => {
                let n = *dims
                    .get(d)
                    .ok_or_else(|| bad("more indices than dimensions".into()))?;
                let p = resolve(i, n).filter(|&p| p < n).ok_or_else(|| {
                    bad(format!(
                        "index {i} out of bounds for dimension {d} of size {n}"
                    ))
                })?;
                start.push(p);
                stride.push(1);
                count.push(1);
                d += 1;
            }
            SliceInfoElem::Slice {
                start: s,
                end,
                step,
            } => {
                let n = *dims
                    .get(d)
                    .ok_or_else(|| bad("more slices than dimensions".into()))?;
                if step <= 0 {
                    return Err(bad(format!(
                        "step {step} in dimension {d}: only positive steps are supported"
                    )));
                }
                let a = resolve(s, n)
                    .filter(|&a| a <= n)
                    .ok_or_else(|| bad(format!("start {s} out of bounds in dimension {d}")))?;
                let b = match end {
                    None => n,
                    Some(e) => resolve(e, n)
                        .filter(|&b| b <= n)
                        .ok_or_else(|| bad(format!("end {e} out of bounds in dimension {d}")))?,
                };
                let len = b.saturating_sub(a);
                let k = len.div_ceil(step as u64);
                start.push(a);
                stride.push(step as u64);
                count.push(k);
                shape.push(to_usize(k)?);
                d += 1;
            }
        }
    }
    for &n in &dims[d.min(dims.len())..] {
        start.push(0);
        stride.push(1);
        count.push(n);
        shape.push(to_usize(n)?);
    }
    block.resize(start.len(), 1);
    let slab = Hyperslab::from_vecs(start, stride, count, block)
        .map_err(|e| Error::Invalid(e.to_string()))?;
    Ok((slab, shape))
}

thread_local! {
    /// The lists of this thread's last written hyperslab, reused by its next one: in memory the
    /// thread has just used, where lists kept by each handle would be cold when many datasets
    /// are written in turn.
    static KEPT: RefCell<Option<(Hyperslab, Vec<usize>)>> = const { RefCell::new(None) };
}

/// The lists [`keep`] kept on this thread, if any (taken: a nested write builds its own).
pub(crate) fn take_kept() -> Option<(Hyperslab, Vec<usize>)> {
    KEPT.with(|k| k.try_borrow_mut().ok().and_then(|mut k| k.take()))
}

/// Keeps `slab` and `shape` for this thread's next [`hyperslab_reusing`].
pub(crate) fn keep(slab: Hyperslab, shape: Vec<usize>) {
    KEPT.with(|k| {
        if let Ok(mut k) = k.try_borrow_mut() {
            *k = Some((slab, shape));
        }
    });
}

fn resolve(i: isize, n: u64) -> Option<u64> {
    if i >= 0 {
        Some(i as u64)
    } else {
        n.checked_sub(i.unsigned_abs() as u64)
    }
}

fn to_usize(v: u64) -> Result<usize, Error> {
    usize::try_from(v).map_err(|_| Error::Invalid(format!("{v} elements do not fit in memory")))
}

#[cfg(test)]
mod tests {
    use super::*;

    // `ndarray::s!` expands to code with `#[allow(unsafe_code)]`, which the workspace's
    // `forbid(unsafe_code)` rejects, so the tests spell the slices out.
    fn sl(start: isize, end: Option<isize>, step: isize) -> SliceInfoElem {
        SliceInfoElem::Slice { start, end, step }
    }

    #[test]
    fn slices_become_hyperslabs() {
        // s![1..7;2, -3.., 4]
        let info = [sl(1, Some(7), 2), sl(-3, None, 1), SliceInfoElem::Index(4)];
        let (h, shape) = hyperslab(&info, &[10, 8, 6]).unwrap();
        assert_eq!(shape, [3, 3]);
        assert_eq!(
            h,
            Hyperslab::new(&[1, 5, 4], &[2, 1, 1], &[3, 3, 1], &[1, 1, 1]).unwrap()
        );
        let (h, shape) = hyperslab(&[sl(2, Some(4), 1)], &[10, 3]).unwrap();
        assert_eq!(shape, [2, 3]);
        assert_eq!(
            h,
            Hyperslab::new(&[2, 0], &[1, 1], &[2, 3], &[1, 1]).unwrap()
        );
        let (_, shape) = hyperslab(&[SliceInfoElem::NewAxis, sl(0, None, 1)], &[4]).unwrap();
        assert_eq!(shape, [1, 4]);
        assert!(hyperslab(&[sl(0, None, -1)], &[4]).is_err());
        assert!(hyperslab(&[SliceInfoElem::Index(5)], &[4]).is_err());
        assert!(hyperslab(&[SliceInfoElem::Index(0), SliceInfoElem::Index(0)], &[4]).is_err());
        let (_, shape) = hyperslab(&[sl(3, Some(3), 1)], &[4]).unwrap();
        assert_eq!(shape, [0]);
    }
}
