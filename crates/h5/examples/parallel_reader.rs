//! A multi-threaded reader: one open file shared by several threads (handles are `Send +
//! Sync` and cheap to clone), each reading its own band of rows of a chunked, compressed
//! dataset through the shared chunk cache, the results checked against a single-threaded read.
//!
//! Run with `cargo run --example parallel_reader`.

use std::thread;

use h5::ndarray::{Array2, s};

const ROWS: usize = 2048;
const COLS: usize = 512;
const THREADS: usize = 4;

fn main() -> h5::Result<()> {
    let dir = tempfile::tempdir().map_err(|e| h5::Error::Invalid(e.to_string()))?;
    let path = dir.path().join("field.h5");
    {
        let file = h5::File::create(&path)?;
        let field = Array2::from_shape_fn((ROWS, COLS), |(i, j)| ((i * COLS + j) % 1000) as f64);
        file.new_dataset::<f64>()
            .shape([ROWS, COLS])
            .chunk([128, 128])
            .shuffle()
            .deflate(3)
            .create("field")?
            .write(&field)?;
        file.close()?;
    }
    let file = h5::File::open(&path)?;
    let field = file.dataset("field")?;
    let band = ROWS / THREADS;
    let sums: Vec<f64> = thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let field = field.clone();
                scope.spawn(move || -> h5::Result<f64> {
                    let rows = field.read_slice::<f64>(s![t * band..(t + 1) * band, ..])?;
                    Ok(rows.sum())
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("reader thread panicked"))
            .collect::<h5::Result<Vec<f64>>>()
    })?;
    let total: f64 = sums.iter().sum();
    let whole: f64 = field.read_2d::<f64>()?.sum();
    assert_eq!(total, whole);
    let stats = file.chunk_cache_stats()?;
    println!(
        "{THREADS} threads summed {ROWS} x {COLS} values to {total}; chunk cache: {} misses, {} hits",
        stats.misses, stats.hits
    );
    Ok(())
}
