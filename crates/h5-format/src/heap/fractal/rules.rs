//! libhdf5's rules for growing a fractal heap's managed space, as pure arithmetic on the
//! header: the smallest direct block for an object, rows of a new or doubled root indirect
//! block, the data bytes a row's slots hold. Shared by [`super::FractalHeapBuilder`] and by
//! engines that grow heaps in place.

use super::dtable::DoublingTable;
use super::header::FractalHeapHeader;

impl DoublingTable {
    /// Row of the blocks of `size` bytes (a power of two not below the starting size; 0 for
    /// smaller sizes).
    pub fn size_to_row(&self, size: u64) -> u32 {
        if size <= self.start_block_size {
            0
        } else {
            size.trailing_zeros()
                .saturating_sub(self.start_bits())
                .saturating_add(1)
        }
    }

    /// Heap offset of slot `entry` (row-major) of an indirect block at heap offset
    /// `block_offset` (`None`: no such row).
    pub fn entry_offset(&self, block_offset: u64, entry: usize) -> Option<u64> {
        let width = usize::from(self.width);
        let row = u32::try_from(entry.checked_div(width)?).ok()?;
        let column = u64::try_from(entry.checked_rem(width)?).ok()?;
        block_offset
            .checked_add(self.row_offset(row)?)?
            .checked_add(column.checked_mul(self.row_block_size(row)?)?)
    }
}

impl FractalHeapHeader {
    /// libhdf5's smallest direct block for an object of `len` bytes: the starting size, or the
    /// next power of two above `len`, doubled when the block header leaves too little room
    /// (`None` when that exceeds the maximum direct block size).
    pub fn min_block_size(&self, len: u64) -> Option<u64> {
        let start = self.table.start_block_size;
        let mut min = if len < start {
            start
        } else {
            // The power of two above `len` (`len` >= `start` > 0: fewer than 64 leading zeros).
            1u64.checked_shl(64u32.saturating_sub(len.leading_zeros()))?
        };
        if min < (self.direct_block_header_len() as u64).checked_add(len)? {
            min = min.checked_mul(2)?;
        }
        (min <= self.table.max_direct_block_size).then_some(min)
    }

    /// Rows of a new root indirect block whose first new direct block must hold `min` bytes:
    /// all the rows the root can have when the heap starts with 0 rows, else at least the
    /// starting rows and enough rows for a `min`-byte block.
    pub fn new_root_rows(&self, min: u64) -> u32 {
        let t = &self.table;
        if self.starting_root_rows == 0 {
            return t.max_root_rows();
        }
        let mut row_off = min.trailing_zeros().saturating_sub(t.start_bits());
        if row_off > 0 {
            row_off = row_off.saturating_add(1);
        }
        u32::from(self.starting_root_rows).max(row_off.saturating_add(1))
    }

    /// Rows of the root indirect block of `old` rows once doubled for a `min`-byte block, and
    /// the rows below which slots are skipped to reach such a block (0: none skipped). `None`
    /// when the root cannot grow.
    pub fn doubled_root_rows(&self, old: u32, min: u64) -> Option<(u32, u32)> {
        let t = &self.table;
        let skip_direct =
            old < t.max_direct_rows() && t.row_block_size(old).is_some_and(|s| min > s);
        let min_rows = if skip_direct {
            t.size_to_row(min).saturating_add(1)
        } else {
            0
        };
        let new = min_rows.max(old.saturating_mul(2).min(t.max_root_rows()));
        (new > old).then_some((new, min_rows))
    }

    /// Data bytes of the direct blocks of one slot of `row`: a direct block's (its size less
    /// its header), or every block of the child indirect block the slot holds.
    pub fn row_free_space(&self, row: u32) -> u64 {
        let t = &self.table;
        let overhead = self.direct_block_header_len() as u64;
        if row < t.max_direct_rows() {
            t.row_block_size(row)
                .map_or(0, |s| s.saturating_sub(overhead))
        } else {
            let rows = t.child_rows(row).map_or(0, u32::from);
            self.rows_free_space(rows)
        }
    }

    /// Data bytes of every slot of an indirect block of `rows` rows.
    pub fn rows_free_space(&self, rows: u32) -> u64 {
        let width = u64::from(self.table.width);
        (0..rows).fold(0u64, |sum, r| {
            sum.saturating_add(self.row_free_space(r).saturating_mul(width))
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::heap::fractal::{FractalHeapBuilder, FractalHeapParams};
    use crate::reader::Sizes;

    /// libhdf5's rules on the dense-link heap (512-byte starting blocks, 21-byte block
    /// headers): minimum blocks, root rows, row data bytes.
    #[test]
    fn rules_follow_libhdf5() {
        let h = FractalHeapBuilder::new(FractalHeapParams::dense_links(), Sizes::EIGHT)
            .unwrap()
            .header()
            .clone();
        assert_eq!(h.direct_block_header_len(), 21);
        assert_eq!(h.min_block_size(20), Some(512));
        assert_eq!(h.min_block_size(500), Some(1024));
        assert_eq!(h.min_block_size(512), Some(1024));
        assert_eq!(h.min_block_size(1010), Some(2048));
        assert_eq!(h.min_block_size(4096), Some(8192));
        assert_eq!(h.min_block_size(70_000), None);
        assert_eq!(h.table.size_to_row(512), 0);
        assert_eq!(h.table.size_to_row(1024), 2);
        assert_eq!(h.new_root_rows(512), 1);
        assert_eq!(h.new_root_rows(2048), 4);
        assert_eq!(h.doubled_root_rows(1, 512), Some((2, 0)));
        assert_eq!(h.doubled_root_rows(2, 4096), Some((5, 5)));
        assert_eq!(h.doubled_root_rows(22, 512), None);
        assert_eq!(h.row_free_space(0), 491);
        assert_eq!(h.rows_free_space(1), 4 * 491);
        assert_eq!(h.table.entry_offset(0, 5), Some(512 * 4 + 512));
    }
}
