//! The CPU time of W4's append phase alone (h5-bench's `w4`: 1000 extensible int32 datasets,
//! chunk 1024, then 100 rounds appending 100 elements to each, and the close), as the thread's
//! own CPU time (`/proc/thread-self/schedstat`, Linux), which other processes' load moves less
//! than wall time. Prints the best and every repetition's time.
//!
//! `cargo run --release -p h5-bench --example w4cpu -- [default|latest] [repetitions]`

use h5::{CreateOptions, FileAccess, FormatBounds};
use ndarray::SliceInfoElem;

/// This thread's CPU time so far, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("/proc/thread-self/schedstat (Linux)")
}

/// One run of W4 into `path`; returns the append phase's CPU time in nanoseconds.
fn run(path: &std::path::Path, bounds: FormatBounds) -> h5::Result<u64> {
    let options = CreateOptions {
        bounds,
        ..Default::default()
    };
    let file = h5::File::create_with(path, &FileAccess::new(), &options)?;
    let dsets = (0..1000)
        .map(|j| {
            file.new_dataset::<i32>()
                .shape([0])
                .max_shape([None])
                .chunk([1024])
                .create(&format!("d{j:04}"))
        })
        .collect::<h5::Result<Vec<h5::Dataset>>>()?;
    let start = thread_cpu_ns();
    let mut buf = vec![0i32; 100];
    for k in 0..100usize {
        let (lo, hi) = (k * 100, (k + 1) * 100);
        for (j, d) in dsets.iter().enumerate() {
            d.resize([hi])?;
            for (e, v) in buf.iter_mut().enumerate() {
                *v = (j * 1_000_000 + lo + e) as i32;
            }
            let sel = [SliceInfoElem::Slice {
                start: lo as isize,
                end: Some(hi as isize),
                step: 1,
            }];
            d.write_slice(&buf, sel)?;
        }
    }
    drop(dsets);
    file.close()?;
    Ok(thread_cpu_ns() - start)
}

fn main() -> h5::Result<()> {
    let mut args = std::env::args().skip(1);
    let bounds = match args.next().as_deref() {
        Some("latest") => FormatBounds::LATEST,
        _ => FormatBounds::default(),
    };
    let reps: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(5);
    let path = std::env::temp_dir().join(format!("w4cpu-{}.h5", std::process::id()));
    let mut all = Vec::new();
    for _ in 0..reps {
        all.push(run(&path, bounds)? / 1_000_000);
        std::fs::remove_file(&path).map_err(|e| h5::Error::Invalid(e.to_string()))?;
    }
    let best = all.iter().min().copied().unwrap_or_default();
    println!("{bounds:?}: append + close CPU best {best} ms, all {all:?}");
    Ok(())
}
