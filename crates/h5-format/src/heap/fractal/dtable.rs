//! The doubling table of a fractal heap's managed space: pure arithmetic, no bytes.
//!
//! Invariants (checked by [`DoublingTable::new`]): `width`, the starting block size and the
//! maximum direct block size are powers of two, starting ≤ maximum direct block size,
//! `first_row_bits ≤ max_heap_size_bits ≤ 64`. Under them every value below fits in a `u64`:
//! the largest block offset in a table is `2^(max_heap_size_bits - 1)`. The fields are public
//! for construction in tests and tools; the methods stay panic-free (returning `None` or an
//! error) even for a table that breaks the invariants.

use crate::error::{FormatError, Result};

/// Parameters of a doubling table (from the fractal heap header).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct DoublingTable {
    /// Number of columns (a power of two).
    pub width: u16,
    /// Size of the blocks in rows 0 and 1 (a power of two).
    pub start_block_size: u64,
    /// Largest direct block size (a power of two ≥ the starting block size).
    pub max_direct_block_size: u64,
    /// Bits of the heap's linear address space (so heap offsets are `< 2^bits`).
    pub max_heap_size_bits: u16,
}

/// What a doubling-table slot holds.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ChildKind {
    /// A direct block.
    Direct,
    /// An indirect block with this many rows.
    Indirect {
        /// Rows of the child indirect block.
        rows: u16,
    },
}

/// Where a heap offset falls within one indirect block.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct BlockLocation {
    /// Row of the slot.
    pub row: u16,
    /// Column of the slot.
    pub column: u16,
    /// Index of the slot (`row * width + column`): direct-block slots come first in the
    /// indirect block, so for [`ChildKind::Direct`] it indexes the direct entries, and for
    /// [`ChildKind::Indirect`] subtract `direct_rows * width` to index the indirect entries.
    pub entry: usize,
    /// Heap offset of the child block's first byte.
    pub block_offset: u64,
    /// Heap space the child block covers (its size for a direct block).
    pub block_size: u64,
    /// Whether the child is a direct or an indirect block.
    pub kind: ChildKind,
}

fn bad(what: String) -> FormatError {
    FormatError::Corrupted {
        structure: "fractal heap doubling table",
        address: crate::UNDEFINED_ADDRESS,
        reason: what,
    }
}

impl DoublingTable {
    /// Checks the parameters (see the module invariants).
    pub fn new(
        width: u16,
        start_block_size: u64,
        max_direct_block_size: u64,
        max_heap_size_bits: u16,
    ) -> Result<Self> {
        let t = Self {
            width,
            start_block_size,
            max_direct_block_size,
            max_heap_size_bits,
        };
        if !width.is_power_of_two() {
            return Err(bad(format!("table width {width} not a power of two")));
        }
        if !start_block_size.is_power_of_two() {
            return Err(bad(format!(
                "starting block size {start_block_size} not a power of two"
            )));
        }
        if !max_direct_block_size.is_power_of_two() || max_direct_block_size < start_block_size {
            return Err(bad(format!(
                "maximum direct block size {max_direct_block_size} not a power of two ≥ {start_block_size}"
            )));
        }
        if max_heap_size_bits > 64 || u32::from(max_heap_size_bits) < t.first_row_bits() {
            return Err(bad(format!(
                "maximum heap size of {max_heap_size_bits} bits (first row needs {})",
                t.first_row_bits()
            )));
        }
        Ok(t)
    }

    /// log2 of the starting block size.
    pub fn start_bits(&self) -> u32 {
        self.start_block_size.trailing_zeros()
    }

    /// log2 of the heap space covered by row 0 (`width * start_block_size`).
    pub fn first_row_bits(&self) -> u32 {
        // Each at most 64.
        self.start_bits()
            .saturating_add(u32::from(self.width).trailing_zeros())
    }

    /// Rows of the largest (root) indirect block.
    pub fn max_root_rows(&self) -> u32 {
        u32::from(self.max_heap_size_bits)
            .saturating_add(1)
            .saturating_sub(self.first_row_bits())
    }

    /// Number of leading rows that hold direct blocks.
    pub fn max_direct_rows(&self) -> u32 {
        self.max_direct_block_size
            .trailing_zeros()
            .saturating_add(2)
            .saturating_sub(self.start_bits())
    }

    /// Block size of `row` (`None` beyond the root's rows).
    pub fn row_block_size(&self, row: u32) -> Option<u64> {
        if row >= self.max_root_rows() {
            return None;
        }
        if row == 0 {
            Some(self.start_block_size)
        } else {
            self.start_block_size.checked_shl(row.saturating_sub(1))
        }
    }

    /// Heap offset of the first block of `row` within its indirect block.
    pub fn row_offset(&self, row: u32) -> Option<u64> {
        if row >= self.max_root_rows() {
            return None;
        }
        if row == 0 {
            Some(0)
        } else {
            1u64.checked_shl(self.first_row_bits().saturating_add(row).saturating_sub(1))
        }
    }

    /// Heap space covered by an indirect block of `rows` rows (`None` if it would exceed the
    /// heap's address space).
    pub fn indirect_span(&self, rows: u16) -> Option<u64> {
        if rows == 0 || u32::from(rows) > self.max_root_rows() {
            return None;
        }
        1u64.checked_shl(
            self.first_row_bits()
                .saturating_add(u32::from(rows))
                .saturating_sub(1),
        )
    }

    /// Rows of the indirect block that sits in `row` (a row past the direct rows).
    pub fn child_rows(&self, row: u32) -> Option<u16> {
        let size = self.row_block_size(row)?;
        let rows = size
            .trailing_zeros()
            .checked_sub(self.first_row_bits())?
            .saturating_add(1);
        u16::try_from(rows).ok()
    }

    /// Number of direct and indirect rows of an indirect block with `rows` rows.
    pub fn split_rows(&self, rows: u16) -> (u32, u32) {
        let direct = u32::from(rows).min(self.max_direct_rows());
        (direct, u32::from(rows).saturating_sub(direct))
    }

    /// Which child of an indirect block holds `heap_offset`. The indirect block starts at heap
    /// offset `iblock_offset` (0 for the root) and has `iblock_rows` rows. Errors if the
    /// offset is outside the block.
    #[allow(
        clippy::arithmetic_side_effects,
        reason = "the invariants re-checked on entry (powers of two, at most 64 bits of heap) bound every value: the offsets stay inside the block's span"
    )]
    pub fn locate(
        &self,
        iblock_offset: u64,
        iblock_rows: u16,
        heap_offset: u64,
    ) -> Result<BlockLocation> {
        // Re-check the invariants: the arithmetic below relies on them.
        Self::new(
            self.width,
            self.start_block_size,
            self.max_direct_block_size,
            self.max_heap_size_bits,
        )?;
        if iblock_rows == 0 || u32::from(iblock_rows) > self.max_root_rows() {
            return Err(bad(format!(
                "indirect block of {iblock_rows} rows (at most {})",
                self.max_root_rows()
            )));
        }
        // `None` only when the block covers all 2^64 offsets.
        let span = 1u64.checked_shl(self.first_row_bits() + u32::from(iblock_rows) - 1);
        let rel = heap_offset
            .checked_sub(iblock_offset)
            .filter(|&r| span.is_none_or(|s| r < s))
            .ok_or_else(|| {
                bad(format!(
                    "heap offset {heap_offset} outside the {iblock_rows}-row indirect block at heap offset {iblock_offset}"
                ))
            })?;
        // Row 0 covers 2^first_row_bits bytes (all of them when that is 2^64).
        let in_first_row = u64::from(self.width)
            .checked_mul(self.start_block_size)
            .is_none_or(|f| rel < f);
        let (row, column) = if in_first_row {
            (0, rel / self.start_block_size)
        } else {
            let high = 63 - rel.leading_zeros();
            let row = high - self.first_row_bits() + 1;
            let size = self
                .row_block_size(row)
                .ok_or_else(|| bad(format!("no row {row} in the table")))?;
            (row, (rel - (1u64 << high)) / size)
        };
        if row >= u32::from(iblock_rows) {
            return Err(bad(format!(
                "heap offset {heap_offset} in row {row} of a {iblock_rows}-row block"
            )));
        }
        let block_size = self
            .row_block_size(row)
            .ok_or_else(|| bad(format!("row {row}")))?;
        let row_offset = self
            .row_offset(row)
            .ok_or_else(|| bad(format!("row {row}")))?;
        // column < width ≤ 2^15 and the block fits in the span, so these cannot overflow.
        let block_offset = iblock_offset + row_offset + column * block_size;
        let kind = if row < self.max_direct_rows() {
            ChildKind::Direct
        } else {
            ChildKind::Indirect {
                rows: self
                    .child_rows(row)
                    .ok_or_else(|| bad(format!("child rows of row {row}")))?,
            }
        };
        Ok(BlockLocation {
            row: row as u16,
            column: column as u16,
            entry: row as usize * usize::from(self.width) + column as usize,
            block_offset,
            block_size,
            kind,
        })
    }
}
