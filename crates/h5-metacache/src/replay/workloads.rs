//! Built-in workloads, generated deterministically as trace text.
//!
//! [`tour_trace`] is the seed's motivating case: a group whose local name heap grows past the initial
//! cache size while many small B-tree and symbol-table nodes stream through. With the default
//! adaptive configuration the cache grows (flash increases when the heap doubles, threshold increases
//! at epoch ends) and reaches a high hit rate; a fixed 2 MiB cache cannot hold the pinned heap and
//! thrashes.

use std::fmt::Write as _;

use crate::flags::{InsertFlags, UnprotectFlags};
use crate::trace::TraceOp;

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

/// Class id of B-tree nodes in the tour.
pub const TOUR_BTREE: u8 = 0;
/// Class id of symbol-table nodes.
pub const TOUR_SNOD: u8 = 1;
/// Class id of the local name heap.
pub const TOUR_HEAP: u8 = 2;
/// Class id of the object headers visited once each (the stream).
pub const TOUR_OHDR: u8 = 3;

/// Address of the local heap.
const HEAP_ADDR: u64 = 0x1_0000;
/// Size of the B-tree root.
const ROOT_SIZE: usize = 2 * KIB;
/// Size of a symbol-table node (HDF5's SNOD with 8 entries of 40 bytes plus its header).
const SNOD_SIZE: usize = 328;
/// Symbol-table nodes per B-tree leaf.
const SNODS_PER_LEAF: usize = 4;
/// Size of a streamed object header.
const OHDR_SIZE: usize = 512;
/// Leaf sizes the generator picks from.
const LEAF_SIZES: [usize; 4] = [544, KIB, 2 * KIB, 4 * KIB];

/// Parameters of the tour workload. [`Default`] is the tour the `h5 tour` command replays.
#[derive(Clone, Debug, PartialEq)]
pub struct TourParams {
    /// Seed of the xorshift generator.
    pub seed: u64,
    /// Lookup steps. Each protects the heap (read-only), the B-tree root, one leaf and one of its
    /// symbol-table nodes, then unprotects them: 4 protects a step.
    pub steps: usize,
    /// B-tree leaves in the finished group (each with 4 symbol-table nodes of 328 bytes).
    pub leaves: usize,
    /// The group grows (leaves inserted, heap resized) during the first `growth_steps` steps.
    pub growth_steps: usize,
    /// Initial heap size.
    pub heap_initial: usize,
    /// Final heap size; the heap doubles until it reaches it.
    pub heap_final: usize,
    /// One object header (512 bytes, never revisited) is visited every `stream_every` steps
    /// (0: none).
    pub stream_every: usize,
    /// Skew of leaf popularity: leaf `n * u^skew` is looked up, for uniform `u` (1: uniform).
    pub skew: f64,
    /// Multiplier of every node size (root, leaves, symbol-table nodes, object headers). A scaled-down
    /// tour for slow (debug, fully checked) builds uses 10 times fewer, 10 times larger nodes and 10
    /// times fewer steps with a 10 times shorter epoch: the same bytes and the same accesses per node
    /// and per epoch.
    pub size_scale: usize,
}

impl Default for TourParams {
    fn default() -> Self {
        Self {
            seed: 0x5eed_0943_b29f_8c1c,
            steps: 125_000,
            leaves: 1_400,
            growth_steps: 37_500,
            heap_initial: 64 * KIB,
            heap_final: 5 * MIB,
            stream_every: 50,
            skew: 2.0,
            size_scale: 1,
        }
    }
}

/// A small, fixed-seed xorshift64* generator (no external dependency; deterministic everywhere).
#[derive(Clone, Debug)]
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        Self(seed | 1)
    }
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() >> 32) as usize * n) >> 32
    }
}

/// One B-tree leaf and its symbol-table nodes.
struct Leaf {
    addr: u64,
    size: usize,
    snods: [u64; SNODS_PER_LEAF],
}

struct Writer {
    out: String,
}

impl Writer {
    fn op(&mut self, op: TraceOp) {
        let _ = writeln!(self.out, "{op}");
    }
    fn protect(&mut self, addr: u64, size: usize, class: u8, read_only: bool) {
        self.op(TraceOp::Protect {
            addr,
            size,
            class,
            read_only,
        });
    }
    fn unprotect(&mut self, addr: u64, flags: UnprotectFlags) {
        self.op(TraceOp::Unprotect { addr, flags });
    }
}

/// The built-in tour trace ([`TourParams::default`]): about 500,000 protects, 10 epochs of the
/// default epoch length.
pub fn tour_trace() -> String {
    tour_trace_with(&TourParams::default())
}

/// Generate a tour trace with the given parameters (deterministic: the same parameters give the same
/// text).
///
/// The trace has no `set_config` record (the replay's configuration applies) and no recorded
/// results. Layout: the heap (class [`TOUR_HEAP`]) at 0x10000, inserted pinned; the B-tree root
/// (class [`TOUR_BTREE`]) after the heap's final extent; leaves (class [`TOUR_BTREE`], 544 B to
/// 4 KiB) and their symbol-table nodes (class [`TOUR_SNOD`], 328 B) after that; streamed object
/// headers (class [`TOUR_OHDR`], 512 B) last (all sizes times `size_scale`). Leaf popularity is
/// skewed: leaf `i` of `n` is chosen as `n * u^skew` for uniform `u`, so the oldest leaves are the
/// hottest.
pub fn tour_trace_with(p: &TourParams) -> String {
    let mut rng = XorShift::new(p.seed);
    let scale = p.size_scale.max(1);
    let (root_size, snod_size, ohdr_size) =
        (ROOT_SIZE * scale, SNOD_SIZE * scale, OHDR_SIZE * scale);
    let heap_final = p.heap_final.max(p.heap_initial).max(1);
    let mut heap_size = p.heap_initial.max(1);
    // Address layout: heap, root, nodes, stream; each region starts on a 64 KiB boundary.
    let align = |a: u64| a.div_ceil(0x1_0000) * 0x1_0000;
    let root_addr = align(HEAP_ADDR + heap_final as u64);
    let node_base = align(root_addr + root_size as u64);
    let node_bound = (p.leaves * (LEAF_SIZES[3] * scale + SNODS_PER_LEAF * snod_size)) as u64;
    let mut next_stream = align(node_base + node_bound);
    let mut next_addr = node_base;

    let mut w = Writer {
        out: String::with_capacity(p.steps * 4 * 2 * 24 + 4096),
    };
    w.out.push_str(crate::trace::TRACE_HEADER);
    w.out.push('\n');
    let _ = writeln!(
        w.out,
        "# built-in tour: {} lookup steps over a growing group of {} B-tree leaves; heap {} -> {} bytes",
        p.steps, p.leaves, heap_size, heap_final
    );
    w.op(TraceOp::Insert {
        addr: HEAP_ADDR,
        size: heap_size,
        class: TOUR_HEAP,
        flags: InsertFlags::PIN,
    });
    w.op(TraceOp::Insert {
        addr: root_addr,
        size: root_size,
        class: TOUR_BTREE,
        flags: InsertFlags::NONE,
    });
    let mut leaves: Vec<Leaf> = Vec::with_capacity(p.leaves);
    let growth_steps = p.growth_steps.clamp(1, p.steps.max(1));
    // Name bytes each new leaf adds to the heap, so that the last leaf brings it to `heap_final`.
    let per_leaf = heap_final.saturating_sub(heap_size) / p.leaves.max(1);
    let heap_start = heap_size;
    for step in 0..p.steps {
        // Grow the group: insert the leaves due by this step, write their names into the heap.
        let due = if step >= growth_steps {
            p.leaves
        } else {
            (p.leaves * (step + 1)).div_ceil(growth_steps)
        };
        while leaves.len() < due {
            let size = LEAF_SIZES[rng.below(LEAF_SIZES.len())] * scale;
            let addr = next_addr;
            next_addr += size as u64;
            let mut snods = [0u64; SNODS_PER_LEAF];
            for s in &mut snods {
                *s = next_addr;
                next_addr += snod_size as u64;
            }
            for (a, sz, class) in std::iter::once((addr, size, TOUR_BTREE))
                .chain(snods.iter().map(|&s| (s, snod_size, TOUR_SNOD)))
            {
                w.op(TraceOp::Insert {
                    addr: a,
                    size: sz,
                    class,
                    flags: InsertFlags::NONE,
                });
            }
            leaves.push(Leaf { addr, size, snods });
            // The root gains a key; the heap gains the leaf's names and doubles when full.
            w.protect(root_addr, root_size, TOUR_BTREE, false);
            w.unprotect(root_addr, UnprotectFlags::DIRTIED);
            let needed = heap_start + per_leaf * leaves.len();
            w.protect(HEAP_ADDR, heap_size, TOUR_HEAP, false);
            if needed > heap_size {
                heap_size = (heap_size * 2).max(needed).min(heap_final);
                w.op(TraceOp::Resize {
                    addr: HEAP_ADDR,
                    new_size: heap_size,
                });
            }
            w.unprotect(HEAP_ADDR, UnprotectFlags::DIRTIED);
        }
        if leaves.is_empty() {
            continue;
        }
        // A name lookup: heap, root, a leaf, one of its symbol-table nodes.
        let u = rng.unit();
        let li = (u.powf(p.skew) * leaves.len() as f64) as usize;
        let leaf = &leaves[li.min(leaves.len() - 1)];
        let snod = leaf.snods[rng.below(SNODS_PER_LEAF)];
        let write = rng.below(16) == 0;
        w.protect(HEAP_ADDR, heap_size, TOUR_HEAP, true);
        w.protect(root_addr, root_size, TOUR_BTREE, true);
        w.protect(leaf.addr, leaf.size, TOUR_BTREE, true);
        w.protect(snod, snod_size, TOUR_SNOD, !write);
        if p.stream_every > 0 && step % p.stream_every == 0 {
            w.protect(next_stream, ohdr_size, TOUR_OHDR, true);
            w.unprotect(next_stream, UnprotectFlags::NONE);
            next_stream += ohdr_size as u64;
        }
        w.unprotect(
            snod,
            if write {
                UnprotectFlags::DIRTIED
            } else {
                UnprotectFlags::NONE
            },
        );
        w.unprotect(leaf.addr, UnprotectFlags::NONE);
        w.unprotect(root_addr, UnprotectFlags::NONE);
        w.unprotect(HEAP_ADDR, UnprotectFlags::NONE);
    }
    w.op(TraceOp::Flush);
    w.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xorshift_is_deterministic_and_in_range() {
        let mut a = XorShift::new(7);
        let mut b = XorShift::new(7);
        for _ in 0..1000 {
            let (x, y) = (a.below(10), b.below(10));
            assert_eq!(x, y);
            assert!(x < 10);
            let u = a.unit();
            assert_eq!(u, b.unit());
            assert!((0.0..1.0).contains(&u));
        }
    }

    #[test]
    fn small_tour_is_deterministic_and_parses() {
        let p = TourParams {
            steps: 200,
            leaves: 20,
            growth_steps: 50,
            ..TourParams::default()
        };
        let t = tour_trace_with(&p);
        assert_eq!(t, tour_trace_with(&p));
        let recs = crate::trace::parse_trace(&t).expect("tour parses");
        let protects = recs
            .iter()
            .filter(|r| matches!(r.op, TraceOp::Protect { .. }))
            .count();
        // 4 per lookup step + 2 per leaf added (root and heap) + 1 streamed header every 50 steps.
        assert_eq!(protects, 200 * 4 + 20 * 2 + 4);
        let inserts = recs
            .iter()
            .filter(|r| matches!(r.op, TraceOp::Insert { .. }))
            .count();
        assert_eq!(inserts, 2 + 20 * 5);
    }
}
