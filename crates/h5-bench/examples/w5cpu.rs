//! The CPU time of W5's create phase alone (h5-bench's `w5`: one group `g` of 20,000
//! one-element int64 datasets `d00000`…, each created with its value, then the close), as the
//! thread's own CPU time (`/proc/thread-self/schedstat`, Linux), which other processes' load
//! moves less than wall time. Prints the best and every repetition's time. Under callgrind,
//! run it with one repetition.
//!
//! `cargo run --release -p h5-bench --example w5cpu -- [default|latest] [repetitions] [members]`

use h5::{CreateOptions, FileAccess, FormatBounds};

/// This thread's CPU time so far, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("/proc/thread-self/schedstat (Linux)")
}

/// One run of W5's create phase into `path`; returns its CPU time in nanoseconds.
fn run(path: &std::path::Path, bounds: FormatBounds, members: usize) -> h5::Result<u64> {
    let start = thread_cpu_ns();
    let options = CreateOptions {
        bounds,
        ..Default::default()
    };
    let file = h5::File::create_with(path, &FileAccess::new(), &options)?;
    let g = file.create_group("g")?;
    for i in 0..members {
        g.new_dataset::<i64>()
            .create_with_data(&format!("d{i:05}"), &[i as i64 * 7 - 3])?;
    }
    drop(g);
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
    let members: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(20_000);
    let path = std::env::temp_dir().join(format!("w5cpu-{}.h5", std::process::id()));
    let mut all = Vec::new();
    for _ in 0..reps {
        all.push(run(&path, bounds, members)? / 1_000_000);
        std::fs::remove_file(&path).map_err(|e| h5::Error::Invalid(e.to_string()))?;
    }
    let best = all.iter().min().copied().unwrap_or_default();
    println!("{bounds:?}: create + close CPU best {best} ms, all {all:?}");
    Ok(())
}
