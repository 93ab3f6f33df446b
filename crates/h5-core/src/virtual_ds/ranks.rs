//! Selections by rank: a mapping pairs the `k`-th element of its source selection with the
//! `k`-th of its virtual selection, both in row-major order. A chunk of the virtual dataset
//! (a box whose dimensions before its split dimension are single indices and after it whole)
//! holds a *contiguous* range of ranks of any selection, and the elements of a regular
//! hyperslab with ranks `lo..hi` are a short list of regular hyperslabs, in row-major order.
//! Reading one chunk then reads just that range of the source selection.

use h5_format::vds::{SelectionSpec, UNLIMITED};

/// One dimension of a regular pattern: `count` blocks of `block` positions every `stride`
/// from `start` (`count` may be [`UNLIMITED`]; `block <= stride` when `count > 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Dim {
    start: u64,
    stride: u64,
    count: u64,
    block: u64,
}

impl Dim {
    /// Selected positions in this dimension (`None`: without end).
    fn positions(&self) -> Option<u64> {
        if self.count == UNLIMITED || self.block == UNLIMITED {
            None
        } else {
            Some(self.count.saturating_mul(self.block))
        }
    }

    /// Selected positions below `x`.
    fn below(&self, x: u64) -> u64 {
        let Some(span) = x.checked_sub(self.start) else {
            return 0;
        };
        let n = if self.block == UNLIMITED || self.block >= self.stride {
            span
        } else {
            let st = self.stride.max(1);
            let (full, rem) = (span.div_euclid(st), span.rem_euclid(st));
            full.saturating_mul(self.block)
                .saturating_add(rem.min(self.block))
        };
        self.positions().map_or(n, |p| n.min(p))
    }

    /// Whether position `x` is selected.
    fn selects(&self, x: u64) -> bool {
        x >= self.start && self.below(x.saturating_add(1)) > self.below(x)
    }

    /// The position of the `k`-th selected index.
    fn position(&self, k: u64) -> u64 {
        if self.block == UNLIMITED || self.block >= self.stride {
            return self.start.saturating_add(k);
        }
        let b = self.block.max(1);
        self.start
            .saturating_add(k.div_euclid(b).saturating_mul(self.stride))
            .saturating_add(k.rem_euclid(b))
    }

    /// The selected indices `k0..k1` as at most three runs of blocks, in order:
    /// `(start, stride, count, block)`.
    fn runs(&self, k0: u64, k1: u64, out: &mut Vec<[u64; 4]>) {
        if k0 >= k1 {
            return;
        }
        if self.block == UNLIMITED || self.block >= self.stride {
            let n = k1.saturating_sub(k0);
            out.push([self.position(k0), n, 1, n]);
            return;
        }
        let b = self.block.max(1);
        let mut k = k0;
        let into_block = k.rem_euclid(b);
        if into_block > 0 {
            let n = b.saturating_sub(into_block).min(k1.saturating_sub(k));
            out.push([self.position(k), n, 1, n]);
            k = k.saturating_add(n);
        }
        let whole = k1.saturating_sub(k).div_euclid(b);
        if whole > 0 {
            out.push([self.position(k), self.stride, whole, b]);
            k = k.saturating_add(whole.saturating_mul(b));
        }
        if k < k1 {
            let n = k1.saturating_sub(k);
            out.push([self.position(k), n, 1, n]);
        }
    }
}

/// A regular hyperslab (or "all" of an extent) as per-dimension patterns; at most one
/// dimension, the first, may be without end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Regular {
    dims: Vec<Dim>,
}

/// A regular hyperslab as its four lists, one entry per dimension.
pub(super) type Slab = [Vec<u64>; 4];

impl Regular {
    /// `spec` over `extent` as patterns: "all", regular hyperslabs (unlimited only in the
    /// first dimension) and block lists that are regular hyperslabs written out (libhdf5's
    /// version 1 encoding lists every block); `None` for other selections.
    pub(super) fn of(spec: &SelectionSpec, extent: &[u64]) -> Option<Regular> {
        let dims = match spec {
            SelectionSpec::Blocks { rank, corners } => return Self::of_blocks(*rank, corners),
            SelectionSpec::All => extent
                .iter()
                .map(|&e| Dim {
                    start: 0,
                    stride: e.max(1),
                    count: 1,
                    block: e,
                })
                .collect(),
            SelectionSpec::Regular {
                start,
                stride,
                count,
                block,
            } => {
                let dims: Vec<Dim> = start
                    .iter()
                    .zip(stride)
                    .zip(count)
                    .zip(block)
                    .map(|(((&start, &stride), &count), &block)| Dim {
                        start,
                        stride,
                        count,
                        block,
                    })
                    .collect();
                if dims.iter().skip(1).any(|d| d.positions().is_none()) {
                    return None;
                }
                dims
            }
            _ => return None,
        };
        Some(Regular { dims })
    }

    /// A list of boxes (`rank` start corners and `rank` inclusive end corners each) as the
    /// regular hyperslab it writes out: per dimension, the boxes' ranges are equally long and
    /// equally spaced, and every combination of them is listed exactly once.
    fn of_blocks(rank: usize, corners: &[u64]) -> Option<Regular> {
        let width = rank.checked_mul(2).filter(|&w| w > 0)?;
        if corners.len().checked_rem(width) != Some(0) || corners.is_empty() {
            return None;
        }
        let boxes = corners.len().checked_div(width)?;
        let mut dims = Vec::with_capacity(rank);
        let mut combinations = 1u64;
        for d in 0..rank {
            // The distinct ranges of dimension d, ascending.
            let mut ranges: Vec<(u64, u64)> = corners
                .chunks_exact(width)
                .map(|c| Some((*c.get(d)?, *c.get(rank.checked_add(d)?)?)))
                .collect::<Option<_>>()?;
            ranges.sort_unstable();
            ranges.dedup();
            let &(start, end) = ranges.first()?;
            let block = end.checked_sub(start)?.checked_add(1)?;
            let stride = match ranges.get(1) {
                Some(&(next, _)) => next.checked_sub(start)?,
                None => block,
            };
            if stride < block {
                return None;
            }
            for (k, &(s, e)) in ranges.iter().enumerate() {
                let want = start.checked_add(stride.checked_mul(k as u64)?)?;
                if s != want || e.checked_sub(s)?.checked_add(1)? != block {
                    return None;
                }
            }
            let count = ranges.len() as u64;
            combinations = combinations.checked_mul(count)?;
            dims.push(Dim {
                start,
                stride,
                count,
                block,
            });
        }
        // Distinct boxes whose ranges all belong to the pattern, as many as its combinations:
        // every combination, once.
        let mut listed: Vec<&[u64]> = corners.chunks_exact(width).collect();
        listed.sort_unstable();
        listed.dedup();
        (listed.len() == boxes && boxes as u64 == combinations).then_some(Regular { dims })
    }

    /// Elements of the dimensions after `d` (one index of dimension `d` holds this many ranks).
    fn inner(&self, d: usize) -> u64 {
        self.dims
            .iter()
            .skip(d.saturating_add(1))
            .fold(1u64, |a, x| {
                a.saturating_mul(x.positions().unwrap_or(u64::MAX))
            })
    }

    /// The ranks of the selected elements inside the box whose dimensions before `split` are
    /// the single indices `fixed`, dimension `split` is `lo..hi` and later dimensions are whole:
    /// a contiguous range (empty when a fixed index is not selected).
    pub(super) fn ranks_in(&self, fixed: &[u64], split: usize, lo: u64, hi: u64) -> (u64, u64) {
        let mut base = 0u64;
        for (d, (&x, dim)) in fixed.iter().zip(&self.dims).enumerate() {
            if !dim.selects(x) {
                return (0, 0);
            }
            base = base.saturating_add(dim.below(x).saturating_mul(self.inner(d)));
        }
        let Some(dim) = self.dims.get(split) else {
            // A box of single indices only (rank 0, or every dimension fixed).
            return (base, base.saturating_add(1));
        };
        let inner = self.inner(split);
        (
            base.saturating_add(dim.below(lo).saturating_mul(inner)),
            base.saturating_add(dim.below(hi).saturating_mul(inner)),
        )
    }

    /// The elements with ranks `lo..hi` as regular hyperslabs whose elements, taken in order
    /// and each in row-major order, are those ranks in order.
    pub(super) fn pieces(&self, lo: u64, hi: u64) -> Vec<Slab> {
        let mut out = Vec::new();
        self.pieces_from(0, &mut Vec::new(), lo, hi, &mut out);
        out
    }

    /// Ranks `lo..hi` of the sub-selection whose dimensions before `d` are the positions
    /// `prefix`.
    fn pieces_from(&self, d: usize, prefix: &mut Vec<u64>, lo: u64, hi: u64, out: &mut Vec<Slab>) {
        if lo >= hi {
            return;
        }
        let Some(dim) = self.dims.get(d) else {
            // Every dimension fixed: one element.
            out.push(self.slab(prefix, [0, 1, 1, 1], d));
            return;
        };
        let inner = self.inner(d).max(1);
        let (mut k0, off0) = (lo.div_euclid(inner), lo.rem_euclid(inner));
        let (k1, off1) = (hi.div_euclid(inner), hi.rem_euclid(inner));
        if k0 == k1 {
            prefix.push(dim.position(k0));
            self.pieces_from(d.saturating_add(1), prefix, off0, off1, out);
            prefix.pop();
            return;
        }
        if off0 > 0 {
            prefix.push(dim.position(k0));
            self.pieces_from(d.saturating_add(1), prefix, off0, inner, out);
            prefix.pop();
            k0 = k0.saturating_add(1);
        }
        let mut runs = Vec::new();
        dim.runs(k0, k1, &mut runs);
        for run in runs {
            out.push(self.slab(prefix, run, d));
        }
        if off1 > 0 {
            prefix.push(dim.position(k1));
            self.pieces_from(d.saturating_add(1), prefix, 0, off1, out);
            prefix.pop();
        }
    }

    /// The hyperslab: `prefix` fixed, `run` in dimension `d`, the pattern after it.
    fn slab(&self, prefix: &[u64], run: [u64; 4], d: usize) -> Slab {
        let rank = self.dims.len();
        let mut s: Slab = [
            Vec::with_capacity(rank),
            Vec::with_capacity(rank),
            Vec::with_capacity(rank),
            Vec::with_capacity(rank),
        ];
        let mut put = |v: [u64; 4]| {
            for (list, x) in s.iter_mut().zip(v) {
                list.push(x);
            }
        };
        for &p in prefix {
            put([p, 1, 1, 1]);
        }
        if d < rank {
            put(run);
        }
        for dim in self.dims.iter().skip(d.saturating_add(1)) {
            put([dim.start, dim.stride, dim.count, dim.block]);
        }
        s
    }
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// Every selected coordinate of a limited pattern, row-major.
    fn elements(r: &Regular) -> Vec<Vec<u64>> {
        let per_dim: Vec<Vec<u64>> = r
            .dims
            .iter()
            .map(|d| (0..d.positions().unwrap()).map(|k| d.position(k)).collect())
            .collect();
        let mut out = vec![vec![]];
        for xs in per_dim {
            out = out
                .into_iter()
                .flat_map(|p: Vec<u64>| {
                    xs.iter().map(move |&x| {
                        let mut q = p.clone();
                        q.push(x);
                        q
                    })
                })
                .collect();
        }
        out
    }

    fn slab_elements(s: &Slab) -> Vec<Vec<u64>> {
        let dims: Vec<Dim> = (0..s[0].len())
            .map(|d| Dim {
                start: s[0][d],
                stride: s[1][d],
                count: s[2][d],
                block: s[3][d],
            })
            .collect();
        elements(&Regular { dims })
    }

    fn regular(start: &[u64], stride: &[u64], count: &[u64], block: &[u64]) -> Regular {
        Regular::of(
            &SelectionSpec::Regular {
                start: start.to_vec(),
                stride: stride.to_vec(),
                count: count.to_vec(),
                block: block.to_vec(),
            },
            &[],
        )
        .unwrap()
    }

    #[test]
    fn every_rank_range_is_its_elements_in_order() {
        let patterns = [
            regular(&[1, 0, 2], &[3, 2, 1], &[3, 2, 4], &[2, 1, 1]),
            regular(&[0, 1], &[4, 3], &[2, 3], &[3, 2]),
            Regular::of(&SelectionSpec::All, &[3, 5]).unwrap(),
            regular(&[5], &[1], &[1], &[7]),
        ];
        for r in &patterns {
            let all = elements(r);
            let n = all.len() as u64;
            for lo in 0..=n {
                for hi in lo..=n {
                    let got: Vec<Vec<u64>> =
                        r.pieces(lo, hi).iter().flat_map(slab_elements).collect();
                    assert_eq!(got, all[lo as usize..hi as usize], "{r:?} {lo}..{hi}");
                }
            }
        }
    }

    #[test]
    fn a_box_holds_the_ranks_of_the_elements_inside_it() {
        let r = regular(&[1, 0, 2], &[3, 2, 1], &[3, 2, 4], &[2, 1, 1]);
        let all = elements(&r);
        // Boxes: rows 0..9 split in dim 0; dim 0 fixed and dim 1 split; dims 0 and 1 fixed.
        for (fixed, split, lo, hi) in [
            (vec![], 0, 0, 9),
            (vec![], 0, 2, 5),
            (vec![4], 1, 0, 3),
            (vec![4], 1, 1, 3),
            (vec![3], 1, 0, 4),
            (vec![4, 2], 2, 3, 5),
        ] {
            let inside: Vec<usize> = all
                .iter()
                .enumerate()
                .filter(|(_, e)| {
                    e.iter().zip(&fixed).all(|(a, b)| a == b) && (lo..hi).contains(&e[fixed.len()])
                })
                .map(|(i, _)| i)
                .collect();
            let (a, b) = r.ranks_in(&fixed, split, lo, hi);
            let want = inside
                .first()
                .map_or((a, a), |&f| (f as u64, *inside.last().unwrap() as u64 + 1));
            assert_eq!((a, b), want, "{fixed:?} {split} {lo}..{hi}");
            assert_eq!(b - a, inside.len() as u64, "contiguous");
        }
    }

    #[test]
    fn block_lists_of_regular_hyperslabs_are_regular() {
        // Rows 0, 10, 20 of columns 2..=5 and 8..=11 (libhdf5's version 1 encoding).
        let listed = SelectionSpec::Blocks {
            rank: 2,
            corners: vec![
                0, 2, 0, 5, 0, 8, 0, 11, 10, 2, 10, 5, 10, 8, 10, 11, 20, 2, 20, 5, 20, 8, 20, 11,
            ],
        };
        assert_eq!(
            Regular::of(&listed, &[]),
            Some(regular(&[0, 2], &[10, 6], &[3, 2], &[1, 4]))
        );
        // One box.
        let one = SelectionSpec::Blocks {
            rank: 2,
            corners: vec![3, 4, 5, 9],
        };
        assert_eq!(
            Regular::of(&one, &[]),
            Some(regular(&[3, 4], &[3, 6], &[1, 1], &[3, 6]))
        );
        // A combination missing, unequal blocks, uneven spacing, overlaps: irregular.
        for corners in [
            vec![0, 2, 0, 5, 0, 8, 0, 11, 10, 2, 10, 5],
            vec![0, 0, 0, 1, 5, 0, 5, 2],
            vec![0, 0, 0, 0, 2, 0, 2, 0, 5, 0, 5, 0],
            vec![0, 0, 0, 3, 0, 2, 0, 5],
        ] {
            assert_eq!(
                Regular::of(&SelectionSpec::Blocks { rank: 2, corners }, &[]),
                None
            );
        }
    }

    #[test]
    fn an_unlimited_first_dimension_counts_without_end() {
        let r = regular(&[1, 0], &[3, 1], &[UNLIMITED, 1], &[2, 4]);
        // Rows 1, 2, 4, 5, 7, ...: rows 4..8 hold ranks 8..20 (rows 4, 5, 7).
        assert_eq!(r.ranks_in(&[], 0, 4, 8), (8, 20));
        let got: Vec<Vec<u64>> = r.pieces(8, 20).iter().flat_map(slab_elements).collect();
        assert_eq!(got.len(), 12);
        assert_eq!(got[0], vec![4, 0]);
        assert_eq!(got[11], vec![7, 3]);
        // Unlimited beyond the first dimension is not a pattern.
        assert!(
            Regular::of(
                &SelectionSpec::Regular {
                    start: vec![0, 0],
                    stride: vec![1, 1],
                    count: vec![1, UNLIMITED],
                    block: vec![1, 1],
                },
                &[],
            )
            .is_none()
        );
    }
}
