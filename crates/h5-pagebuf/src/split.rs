//! Splitting an I/O request at page boundaries (the seed's §3.4.1.2 rule).

/// One piece of a split request: `len` bytes at `offset`, starting `skip` bytes into the
/// caller's buffer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Piece {
    /// Byte offset in the file.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Offset of the piece in the caller's buffer.
    pub skip: u64,
}

/// Splits `[offset, offset + len)` into at most three pieces, each of which either starts on a
/// page boundary or stays within one page: a leading fragment up to the first boundary, the
/// whole-page middle, and a trailing fragment. A request that already starts on a boundary, or
/// fits inside one page, is one piece. Every piece is non-empty; `len == 0` gives none.
pub fn split_at_pages(offset: u64, len: u64, page_size: u64) -> Vec<Piece> {
    let mut out = Vec::with_capacity(3);
    if len == 0 || page_size == 0 {
        if len > 0 {
            out.push(Piece {
                offset,
                len,
                skip: 0,
            });
        }
        return out;
    }
    let end = offset.saturating_add(len);
    let in_page = offset % page_size;
    let first_boundary = offset - in_page + page_size;
    if in_page == 0 || end <= first_boundary {
        out.push(Piece {
            offset,
            len,
            skip: 0,
        });
        return out;
    }
    let lead = first_boundary - offset;
    out.push(Piece {
        offset,
        len: lead,
        skip: 0,
    });
    let middle_end = end - end % page_size;
    if middle_end > first_boundary {
        out.push(Piece {
            offset: first_boundary,
            len: middle_end - first_boundary,
            skip: lead,
        });
    }
    if end > middle_end && middle_end >= first_boundary {
        out.push(Piece {
            offset: middle_end,
            len: end - middle_end,
            skip: middle_end - offset,
        });
    }
    out
}

/// Splits `[offset, offset + len)` into one piece per page it touches.
pub fn per_page(offset: u64, len: u64, page_size: u64) -> Vec<Piece> {
    let mut out = Vec::new();
    if page_size == 0 || len == 0 {
        return out;
    }
    let end = offset.saturating_add(len);
    let mut at = offset;
    while at < end {
        let page_end = (at / page_size + 1).saturating_mul(page_size);
        let piece_end = page_end.min(end);
        out.push(Piece {
            offset: at,
            len: piece_end - at,
            skip: at - offset,
        });
        at = piece_end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // SWMR-073: a 6000-byte write 100 bytes before a 4 KiB page boundary becomes pieces of
    // 100, 4096 and 1804 bytes, each inside one page or page-aligned.
    #[test]
    fn swmr_073_three_pieces() {
        let p = split_at_pages(8092, 6000, 4096);
        assert_eq!(
            p,
            vec![
                Piece {
                    offset: 8092,
                    len: 100,
                    skip: 0
                },
                Piece {
                    offset: 8192,
                    len: 4096,
                    skip: 100
                },
                Piece {
                    offset: 12288,
                    len: 1804,
                    skip: 4196
                },
            ]
        );
        for piece in &p {
            let within_one = piece.offset / 4096 == (piece.offset + piece.len - 1) / 4096;
            assert!(piece.offset % 4096 == 0 || within_one);
        }
    }

    #[test]
    fn aligned_or_small_requests_are_one_piece() {
        assert_eq!(split_at_pages(4096, 9000, 4096).len(), 1);
        assert_eq!(split_at_pages(10, 100, 4096).len(), 1);
        assert_eq!(split_at_pages(4000, 96, 4096).len(), 1);
        // Crossing one boundary, no whole page in between: two pieces.
        let p = split_at_pages(4000, 200, 4096);
        assert_eq!(p.len(), 2);
        assert_eq!((p[1].offset, p[1].len, p[1].skip), (4096, 104, 96));
        assert!(split_at_pages(5, 0, 4096).is_empty());
    }

    #[test]
    fn per_page_pieces_cover_the_request() {
        let p = per_page(100, 9000, 4096);
        assert_eq!(p.len(), 3);
        assert_eq!(p.iter().map(|x| x.len).sum::<u64>(), 9000);
        assert_eq!(p[2].offset, 8192);
        assert_eq!(p[2].skip, 8092);
    }
}
