//! `h5-bench threads`: reads of data already in the chunk cache, from one thread and from
//! several threads sharing one `h5::File` (issue 15's target: 8 threads ≥ 1.8× one thread on 2
//! cores). Hits are served under the chunk cache's shared lock, so the copies run in parallel.
//!
//! The file (written by h5, once per run) holds one 2048×2048 float32 dataset in 256×256
//! chunks with shuffle + deflate(1): 16 MiB decoded, which the default 64 MiB cache holds
//! whole. One untimed full read makes every chunk resident; then the same list of random 64×64
//! blocks (fixed seed) is read by 1 thread and, split evenly, by `threads` threads, alternating,
//! `reps` times each; every block read is checked against the generator after the timing.

use std::path::Path;
use std::time::Instant;

use h5::Dataset;
use ndarray::SliceInfoElem;

use crate::common::{BenchResult, Bits, checksum, cpu_secs, h5e, median, slab_starts};

const SIDE: usize = 2048;
const CHUNK: usize = 256;
const BLOCK: usize = 64;
const SEED: u64 = 0x5EED_7EAD;

/// The value at (`r`, `c`).
fn value(r: usize, c: usize) -> f32 {
    crate::all::field_value(SIDE, 3, r, c)
}

fn block(r: usize, c: usize) -> [SliceInfoElem; 2] {
    let range = |a: usize| SliceInfoElem::Slice {
        start: a as isize,
        end: Some((a + BLOCK) as isize),
        step: 1,
    };
    [range(r), range(c)]
}

/// Reads the blocks at `corners` from `ds` into `out` (one block after the other).
fn read_blocks(ds: &Dataset, corners: &[(usize, usize)], out: &mut [f32]) -> BenchResult<()> {
    for (&(r, c), dst) in corners.iter().zip(out.chunks_exact_mut(BLOCK * BLOCK)) {
        ds.read_slice_into(block(r, c), dst).map_err(h5e)?;
    }
    Ok(())
}

/// The checksum of blocks read by [`read_blocks`] (computed after the timing).
fn sum_blocks(out: &[f32]) -> u64 {
    out.chunks_exact(BLOCK * BLOCK).fold(0u64, |acc, b| {
        acc.wrapping_add(checksum(b.iter().map(|x| x.bits())))
    })
}

/// The checksum [`read_blocks`] must give for `corners`.
fn expected(corners: &[(usize, usize)]) -> u64 {
    corners.iter().fold(0u64, |acc, &(r, c)| {
        acc.wrapping_add(checksum(
            (r..r + BLOCK).flat_map(|y| (c..c + BLOCK).map(move |x| value(y, x).bits())),
        ))
    })
}

fn write_input(path: &Path) -> BenchResult<()> {
    let data: Vec<f32> = (0..SIDE)
        .flat_map(|r| (0..SIDE).map(move |c| value(r, c)))
        .collect();
    let f = h5::File::create(path).map_err(h5e)?;
    f.root()
        .and_then(|g| {
            g.new_dataset::<f32>()
                .shape([SIDE, SIDE])
                .chunk([CHUNK, CHUNK])
                .shuffle()
                .deflate(1)
                .create("data")
        })
        .and_then(|d| d.write(&data))
        .map_err(h5e)?;
    f.close().map_err(h5e)
}

/// Runs the comparison; returns whether every check passed.
pub(crate) fn run(reads: usize, threads: usize, reps: usize, dir: &Path) -> BenchResult<bool> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("threads.h5");
    write_input(&path)?;
    let file = h5::File::open(&path).map_err(h5e)?;
    let ds = file.dataset("data").map_err(h5e)?;
    // Every chunk resident.
    let all = ds.read::<f32>().map_err(h5e)?;
    drop(all);
    let corners = slab_starts(reads, SIDE, BLOCK, SEED);
    let want = expected(&corners);
    let per = corners.len().div_ceil(threads.max(1));
    let mut ok = true;
    let (mut one, mut many) = (Vec::new(), Vec::new());
    // Results go to one preallocated buffer (touched before the timing), checked afterwards.
    let mut out = vec![1f32; corners.len() * BLOCK * BLOCK];
    let (mut cpu_one, mut cpu_many) = (0.0, 0.0);
    let mut run_one = |ok: &mut bool| -> BenchResult<f64> {
        out.fill(0.0);
        let c0 = cpu_secs().unwrap_or(0.0);
        let t = Instant::now();
        read_blocks(&ds, &corners, &mut out)?;
        let secs = t.elapsed().as_secs_f64();
        cpu_one += cpu_secs().unwrap_or(0.0) - c0;
        *ok &= sum_blocks(&out) == want;
        Ok(secs)
    };
    let mut out2 = vec![1f32; corners.len() * BLOCK * BLOCK];
    let mut run_many = |ok: &mut bool| -> BenchResult<f64> {
        out2.fill(0.0);
        let c0 = cpu_secs().unwrap_or(0.0);
        let t = Instant::now();
        let results: Vec<BenchResult<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = corners
                .chunks(per)
                .zip(out2.chunks_mut(per * BLOCK * BLOCK))
                .map(|(part, dst)| {
                    let ds = ds.clone();
                    s.spawn(move || read_blocks(&ds, part, dst))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a reader panicked".into())))
                .collect()
        });
        let secs = t.elapsed().as_secs_f64();
        cpu_many += cpu_secs().unwrap_or(0.0) - c0;
        results.into_iter().collect::<BenchResult<Vec<()>>>()?;
        *ok &= sum_blocks(&out2) == want;
        Ok(secs)
    };
    for rep in 0..reps {
        if rep % 2 == 0 {
            one.push(run_one(&mut ok)?);
            many.push(run_many(&mut ok)?);
        } else {
            many.push(run_many(&mut ok)?);
            one.push(run_one(&mut ok)?);
        }
    }
    let reps = reps.max(1);
    let stats = file.chunk_cache_stats().map_err(h5e)?;
    let (t1, tn) = (median(one), median(many));
    println!(
        "h5-bench threads: {reads} random {BLOCK}x{BLOCK} reads of cached data ({SIDE}x{SIDE} \
         f32, {CHUNK}x{CHUNK} chunks, shuffle+deflate(1)), medians of {reps}, {} cores, load {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    // CPU time per read tells, on a machine whose cores other processes share, whether the
    // threads added work (contention) even when the wall time cannot show their parallelism.
    let per_read = |cpu: f64| cpu / (reps * reads) as f64 * 1e6;
    println!(
        "  1 thread: {:.1} ms ({:.0} reads/s, {:.1} us CPU/read)   {threads} threads: {:.1} ms \
         ({:.0} reads/s, {:.1} us CPU/read)   speed-up {:.2}x   cache misses after warm-up: {}   \
         check: {}",
        t1 * 1e3,
        reads as f64 / t1,
        per_read(cpu_one),
        tn * 1e3,
        reads as f64 / tn,
        per_read(cpu_many),
        t1 / tn,
        stats.misses - (SIDE / CHUNK * SIDE / CHUNK) as u64,
        if ok { "ok" } else { "MISMATCH" }
    );
    Ok(ok)
}
