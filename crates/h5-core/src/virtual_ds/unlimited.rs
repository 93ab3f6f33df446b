//! Unlimited virtual mappings: the arithmetic of a regular hyperslab that is unlimited in one
//! dimension, as libhdf5 clips it (`H5S_hyper_clip_unlim`, `H5S_hyper_get_clip_extent_match`).
//!
//! Along its unlimited dimension such a selection picks the positions `p0 < p1 < ...`: one
//! block without end (`block` unlimited, or blocks that touch: `block == stride`), or blocks of
//! `block` positions every `stride`. libhdf5 pairs a mapping's source and virtual selections by
//! *slices*, the first `n` of these positions: the source offers as many as its extent holds,
//! and the virtual extent is the smallest one that holds as many (the "last available" view,
//! libhdf5's default: the extent ends at the end of the last slice, not at the next block).

use h5_format::vds::{SelectionSpec, UNLIMITED};

use crate::error::{Error, Result};

/// Blocks a clipped selection with a partial last block may list (each becomes a box).
const MAX_CLIPPED_BLOCKS: u64 = 1 << 20;

/// The unlimited dimension of a regular hyperslab and its pattern there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Unlimited {
    /// The dimension.
    pub(super) dim: usize,
    /// The first selected position.
    start: u64,
    /// `None`: one block without end; `Some((block, stride))`: `block` positions every
    /// `stride` (`block <= stride`; when equal, every position from `start` on).
    blocks: Option<(u64, u64)>,
}

impl Unlimited {
    /// The unlimited dimension of `spec`, if it is a regular hyperslab unlimited in exactly one
    /// dimension (a count or a block of [`UNLIMITED`], not both).
    pub(super) fn of(spec: &SelectionSpec) -> Option<Unlimited> {
        let SelectionSpec::Regular {
            start,
            stride,
            count,
            block,
        } = spec
        else {
            return None;
        };
        let mut dims = (0..start.len())
            .filter(|&d| count.get(d) == Some(&UNLIMITED) || block.get(d) == Some(&UNLIMITED));
        let dim = dims.next()?;
        if dims.next().is_some() {
            return None;
        }
        let (s, st, c, b) = (
            *start.get(dim)?,
            *stride.get(dim)?,
            *count.get(dim)?,
            *block.get(dim)?,
        );
        let blocks = match (c == UNLIMITED, b == UNLIMITED) {
            (true, true) => return None,
            // One block without end.
            (false, true) => (c == 1).then_some(None)?,
            // Blocks without end (touching blocks select every position from `start`).
            (true, false) => (b > 0 && st >= b).then_some(Some((b, st)))?,
            (false, false) => return None,
        };
        Some(Unlimited {
            dim,
            start: s,
            blocks,
        })
    }

    /// The first position of block `j` and its length, or `None` for one block without end
    /// (an unlimited count of blocks that touch has blocks: a printf-style mapping's).
    pub(super) fn block(&self, j: u64) -> Option<(u64, u64)> {
        let (b, st) = self.blocks?;
        Some((self.start.saturating_add(j.saturating_mul(st)), b))
    }

    /// The first block's start and length and the distance between blocks, or `None` for one
    /// block without end.
    pub(super) fn blocks(&self) -> Option<(u64, u64, u64)> {
        self.blocks.map(|(b, st)| (self.start, b, st))
    }

    /// How many selected positions an extent of `dims` offers in this dimension (0 when `dims`
    /// lacks it).
    pub(super) fn slices_in(&self, dims: &[u64]) -> u64 {
        dims.get(self.dim).map_or(0, |&e| self.slices_below(e))
    }

    /// The pattern as runs of selected positions: `None` when they make one run from `start`
    /// (one block, or blocks that touch), else `(block, stride)`.
    fn runs(&self) -> Option<(u64, u64)> {
        self.blocks.filter(|&(b, st)| b < st)
    }

    /// How many selected positions lie below `extent` (the slices a dataset of that extent
    /// offers).
    pub(super) fn slices_below(&self, extent: u64) -> u64 {
        let Some(span) = extent.checked_sub(self.start) else {
            return 0;
        };
        match self.runs() {
            None => span,
            Some((b, st)) => {
                let st = st.max(1);
                let (full, rem) = (span.div_euclid(st), span.rem_euclid(st));
                full.saturating_mul(b).saturating_add(rem.min(b))
            }
        }
    }

    /// The smallest extent holding the first `n` slices: it ends with the last of them (0 when
    /// `n` is 0).
    pub(super) fn extent_for(&self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        match self.runs() {
            None => self.start.saturating_add(n),
            Some((b, st)) => {
                let b1 = b.max(1);
                let (whole, rem) = (n.div_euclid(b1), n.rem_euclid(b1));
                if rem > 0 {
                    self.start
                        .saturating_add(whole.saturating_mul(st))
                        .saturating_add(rem)
                } else {
                    self.start
                        .saturating_add(whole.saturating_sub(1).saturating_mul(st))
                        .saturating_add(b)
                }
            }
        }
    }

    /// `spec` (whose unlimited dimension this is) with only block `j` there: the virtual
    /// selection of a printf-style mapping's `j`-th source.
    pub(super) fn block_selection(&self, spec: &SelectionSpec, j: u64) -> Result<SelectionSpec> {
        let (first, len) = self.block(j).ok_or_else(|| {
            Error::Invalid("a printf-style virtual selection without blocks".into())
        })?;
        self.replace(spec, Some(first), [len, 1, len])
    }

    /// `spec` (whose unlimited dimension this is) with its start there replaced by `start` (if
    /// any) and its stride, count and block there by `sizes`.
    fn replace(
        &self,
        spec: &SelectionSpec,
        start: Option<u64>,
        sizes: [u64; 3],
    ) -> Result<SelectionSpec> {
        let SelectionSpec::Regular {
            start: starts,
            stride,
            count,
            block,
        } = spec
        else {
            return Err(Error::Invalid(
                "an unlimited virtual selection that is not a hyperslab".into(),
            ));
        };
        let mut lists = [starts.clone(), stride.clone(), count.clone(), block.clone()];
        let [stride_d, count_d, block_d] = sizes;
        let values = [start, Some(stride_d), Some(count_d), Some(block_d)];
        for (list, value) in lists.iter_mut().zip(values) {
            let slot = list.get_mut(self.dim).ok_or_else(|| {
                Error::Invalid("an unlimited selection without its dimension".into())
            })?;
            if let Some(v) = value {
                *slot = v;
            }
        }
        let [start, stride, count, block] = lists;
        Ok(SelectionSpec::Regular {
            start,
            stride,
            count,
            block,
        })
    }

    /// `spec` (whose unlimited dimension this is) limited to the positions below `extent` in
    /// that dimension: a regular hyperslab, or a union of boxes when the last block is cut.
    pub(super) fn clip(&self, spec: &SelectionSpec, extent: u64) -> Result<SelectionSpec> {
        let Some(span) = extent.checked_sub(self.start).filter(|&s| s > 0) else {
            return Ok(SelectionSpec::None);
        };
        let Some((b, st)) = self.runs() else {
            return self.replace(spec, None, [span, 1, span]);
        };
        // Blocks starting below the extent; the last may end past it.
        let blocks = span.div_ceil(st.max(1));
        let cut = self.replace(spec, None, [st, blocks, b])?;
        let last_end = self
            .start
            .saturating_add(blocks.saturating_sub(1).saturating_mul(st))
            .saturating_add(b);
        if last_end <= extent {
            return Ok(cut);
        }
        let boxes = cut.block_list(MAX_CLIPPED_BLOCKS).ok_or_else(|| {
            Error::Unsupported(format!(
                "an unlimited virtual selection cut into more than {MAX_CLIPPED_BLOCKS} blocks"
            ))
        })?;
        let rank = spec.rank().unwrap_or(0);
        let d = self.dim;
        let mut corners = Vec::with_capacity(boxes.len().saturating_mul(rank.saturating_mul(2)));
        for (lo, mut hi) in boxes {
            if let Some(h) = hi.get_mut(d) {
                *h = (*h).min(extent.saturating_sub(1));
            }
            corners.extend(lo);
            corners.extend(hi);
        }
        Ok(SelectionSpec::Blocks { rank, corners })
    }
}

/// Per dimension, the end (one past the last selected index) of `spec` in the dimensions other
/// than `skip`; 0 where nothing bounds it ("all", "none", the skipped dimension). libhdf5's
/// virtual extent never shrinks below these (`min_dims`).
pub(super) fn selection_ends(spec: &SelectionSpec, rank: usize, skip: Option<usize>) -> Vec<u64> {
    let mut ends = vec![0u64; rank];
    let mut widen = |d: usize, last: u64| {
        if Some(d) != skip
            && let Some(e) = ends.get_mut(d)
        {
            *e = (*e).max(last.saturating_add(1));
        }
    };
    match spec {
        SelectionSpec::None | SelectionSpec::All => {}
        SelectionSpec::Regular {
            start,
            stride,
            count,
            block,
        } => {
            for (d, (((&s, &st), &c), &b)) in
                start.iter().zip(stride).zip(count).zip(block).enumerate()
            {
                if c == 0 || b == 0 || c == UNLIMITED || b == UNLIMITED {
                    continue;
                }
                widen(
                    d,
                    s.saturating_add(c.saturating_sub(1).saturating_mul(st))
                        .saturating_add(b.saturating_sub(1)),
                );
            }
        }
        SelectionSpec::Points { .. } => {
            for p in spec.points() {
                for (d, &x) in p.iter().enumerate() {
                    widen(d, x);
                }
            }
        }
        SelectionSpec::Blocks { .. } => {
            for (_, hi) in spec.boxes() {
                for (d, &x) in hi.iter().enumerate() {
                    widen(d, x);
                }
            }
        }
    }
    ends
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regular(start: &[u64], stride: &[u64], count: &[u64], block: &[u64]) -> SelectionSpec {
        SelectionSpec::Regular {
            start: start.to_vec(),
            stride: stride.to_vec(),
            count: count.to_vec(),
            block: block.to_vec(),
        }
    }

    #[test]
    fn an_unlimited_block_reaches_as_far_as_the_extent() {
        let s = regular(&[2, 0], &[1, 1], &[1, 1], &[UNLIMITED, 4]);
        let u = Unlimited::of(&s).unwrap();
        assert_eq!(u.dim, 0);
        assert_eq!(u.slices_below(2), 0);
        assert_eq!(u.slices_below(7), 5);
        assert_eq!(u.extent_for(5), 7);
        assert_eq!(u.extent_for(0), 0);
        assert_eq!(
            u.clip(&s, 7).unwrap(),
            regular(&[2, 0], &[5, 1], &[1, 1], &[5, 4])
        );
        assert_eq!(u.clip(&s, 2).unwrap(), SelectionSpec::None);
    }

    #[test]
    fn touching_blocks_are_one_block() {
        let s = regular(&[0], &[1], &[UNLIMITED], &[1]);
        let u = Unlimited::of(&s).unwrap();
        assert_eq!(u.block(3), Some((3, 1)));
        assert_eq!(
            Unlimited::of(&regular(&[0], &[1], &[1], &[UNLIMITED]))
                .unwrap()
                .block(0),
            None
        );
        assert_eq!(u.slices_below(9), 9);
        assert_eq!(u.clip(&s, 3).unwrap(), regular(&[0], &[3], &[1], &[3]));
    }

    #[test]
    fn strided_blocks_count_partial_blocks_and_end_with_the_last_slice() {
        // Blocks of 2 rows every 3 from row 1: rows 1, 2, 4, 5, 7, 8, ...
        let s = regular(&[1, 0], &[3, 1], &[UNLIMITED, 1], &[2, 4]);
        let u = Unlimited::of(&s).unwrap();
        assert_eq!(u.block(2), Some((7, 2)));
        assert_eq!(u.slices_below(8), 5);
        assert_eq!(u.slices_below(7), 4);
        assert_eq!(u.slices_below(4), 2);
        // The 5th slice is row 7: the extent ends there (libhdf5's last-available view).
        assert_eq!(u.extent_for(5), 8);
        assert_eq!(u.extent_for(4), 6);
        // Clipped at 6: two whole blocks, a regular hyperslab.
        assert_eq!(
            u.clip(&s, 6).unwrap(),
            regular(&[1, 0], &[3, 1], &[2, 1], &[2, 4])
        );
        // Clipped at 8: the third block loses its second row.
        assert_eq!(
            u.clip(&s, 8).unwrap(),
            SelectionSpec::Blocks {
                rank: 2,
                corners: vec![1, 0, 2, 3, 4, 0, 5, 3, 7, 0, 7, 3],
            }
        );
    }

    #[test]
    fn a_printf_block_is_the_selection_with_one_block_there() {
        let s = regular(&[1, 0], &[3, 1], &[UNLIMITED, 1], &[2, 4]);
        let u = Unlimited::of(&s).unwrap();
        assert_eq!(
            u.block_selection(&s, 2).unwrap(),
            regular(&[7, 0], &[2, 1], &[1, 1], &[2, 4])
        );
        let one = regular(&[0], &[1], &[1], &[UNLIMITED]);
        assert!(
            Unlimited::of(&one)
                .unwrap()
                .block_selection(&one, 0)
                .is_err()
        );
    }

    #[test]
    fn selections_unlimited_in_two_ways_or_not_at_all_have_no_pattern() {
        assert_eq!(Unlimited::of(&regular(&[0], &[1], &[4], &[1])), None);
        assert_eq!(
            Unlimited::of(&regular(&[0, 0], &[1, 1], &[UNLIMITED, UNLIMITED], &[1, 1])),
            None
        );
        assert_eq!(
            Unlimited::of(&regular(&[0], &[1], &[UNLIMITED], &[UNLIMITED])),
            None
        );
        // An unlimited block repeated is not a pattern libhdf5 accepts either.
        assert_eq!(
            Unlimited::of(&regular(&[0], &[9], &[2], &[UNLIMITED])),
            None
        );
        assert_eq!(Unlimited::of(&SelectionSpec::All), None);
    }

    #[test]
    fn selection_ends_skip_the_unlimited_dimension() {
        let s = regular(&[1, 2], &[3, 1], &[UNLIMITED, 1], &[2, 4]);
        assert_eq!(selection_ends(&s, 2, Some(0)), vec![0, 6]);
        let fixed = regular(&[0, 0], &[3, 1], &[2, 1], &[2, 5]);
        assert_eq!(selection_ends(&fixed, 2, None), vec![5, 5]);
        assert_eq!(selection_ends(&SelectionSpec::All, 2, None), vec![0, 0]);
        let pts = SelectionSpec::Points {
            rank: 2,
            coords: vec![4, 1, 0, 7],
        };
        assert_eq!(selection_ends(&pts, 2, None), vec![5, 8]);
    }
}
