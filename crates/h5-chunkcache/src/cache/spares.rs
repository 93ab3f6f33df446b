//! Buffers a scan is done with, handed to the chunks it loads next.
//!
//! A scan (a read larger than the limit, `read.rs`) decodes and drops a batch of chunks after
//! another. Dropped, their buffers go back to the allocator, which returns freed memory to the
//! system when much of it is free at once; the next batch then takes new pages, each a page
//! fault and a page of zeroes from the kernel. Measured on a whole read of W2b (1 GiB of
//! shuffled and deflated `f32`), that was 350,000 faults and about 30 % of the CPU time. The
//! scan keeps them instead: its stored images and decoded chunks are reused by the next batch's
//! reads and decodes ([`crate::ChunkLayout::decode_reusing`]). The set is bounded and emptied
//! when the read ends: it is memory of the read in progress, not of the cache.
//!
//! Reads that admit what they load recycle too, with a smaller bound (`ChunkCache::recycled`):
//! the buffers of clean chunks evicted to make room, and the images their decodes are done with,
//! serve the next load. Without it a cache at its limit frees a chunk per chunk it loads while
//! the decode of the next one allocates anew (on a codec thread, into another allocator arena
//! than the one the caller frees into): W6's peak was 6 MiB above its heap for that alone.

/// The most bytes the spares hold. A scan's batches are about `read::SCAN_BATCH_BYTES` (more
/// for large chunks: one per codec thread; two batches in flight) and only their buffers
/// circulate, so this bound only limits scans of very large chunks.
const MAX_BYTES: usize = 16 << 20;

/// Spare buffers (their capacity is what counts; their contents are garbage).
#[derive(Debug)]
pub(super) struct Spares {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
    /// The most bytes held (at most [`MAX_BYTES`]).
    limit: usize,
    /// How many times the bytes asked for a spare handed out may hold at most.
    oversize: usize,
}

impl Default for Spares {
    fn default() -> Self {
        Spares::bounded(MAX_BYTES)
    }
}

impl Spares {
    /// An empty set holding at most `limit` bytes (and never more than [`MAX_BYTES`]).
    pub(super) fn bounded(limit: usize) -> Spares {
        Spares {
            bufs: Vec::new(),
            bytes: 0,
            limit: limit.min(MAX_BYTES),
            oversize: usize::MAX,
        }
    }

    /// The set handing out only spares of at most `factor` times the bytes asked for. For
    /// buffers that become cached chunks, which the budget counts by their capacity: a small
    /// chunk must not take a large chunk's allocation.
    pub(super) fn fitting_within(self, factor: usize) -> Spares {
        Spares {
            oversize: factor,
            ..self
        }
    }

    /// Keeps `buf` for reuse, unless it has no allocation or the set is full.
    pub(super) fn put(&mut self, buf: Vec<u8>) {
        let cap = buf.capacity();
        if cap == 0 || self.bytes.saturating_add(cap) > self.limit {
            return;
        }
        self.bytes += cap;
        self.bufs.push(buf);
    }

    /// The smallest spare of at least `min` bytes of capacity and within the set's oversize
    /// factor of it (empty when none is).
    pub(super) fn take(&mut self, min: usize) -> Vec<u8> {
        let most = min.saturating_mul(self.oversize);
        let best = self
            .bufs
            .iter()
            .enumerate()
            .filter(|(_, b)| (min..=most).contains(&b.capacity()))
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match best {
            Some(i) => {
                let buf = self.bufs.swap_remove(i);
                self.bytes -= buf.capacity();
                buf
            }
            None => Vec::new(),
        }
    }

    /// Whether any buffer is kept.
    pub(super) fn is_empty(&self) -> bool {
        self.bufs.is_empty()
    }

    /// Gives every buffer back to the allocator.
    pub(super) fn clear(&mut self) {
        self.bufs.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_smallest_fitting_and_stays_bounded() {
        let mut s = Spares::default();
        s.put(Vec::with_capacity(300));
        s.put(Vec::with_capacity(100));
        s.put(Vec::with_capacity(200));
        s.put(Vec::new());
        assert_eq!(s.take(150).capacity(), 200);
        assert_eq!(s.take(150).capacity(), 300);
        assert_eq!(s.take(150).capacity(), 0, "none fits: a new buffer");
        assert_eq!(s.take(1).capacity(), 100);
        let mut small = Spares::bounded(250);
        small.put(Vec::with_capacity(200));
        small.put(Vec::with_capacity(100));
        assert_eq!(small.bytes, 200, "the second would pass the bound");
        assert_eq!(Spares::bounded(usize::MAX).limit, MAX_BYTES);
        let mut near = Spares::bounded(1000).fitting_within(2);
        near.put(Vec::with_capacity(400));
        assert_eq!(near.take(100).capacity(), 0, "four times too large: kept");
        assert_eq!(near.take(200).capacity(), 400);
        assert!(s.is_empty());
        s.put(Vec::with_capacity(MAX_BYTES));
        s.put(Vec::with_capacity(1));
        assert_eq!(s.bytes, MAX_BYTES, "over the bound: dropped");
        s.clear();
        assert!(s.is_empty() && s.bytes == 0);
    }
}
