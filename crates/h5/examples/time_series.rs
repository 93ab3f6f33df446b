//! An extensible time series: a dataset of (unlimited × channels) samples that grows one block
//! at a time as an acquisition runs, a second handle that sees each new length (handles read
//! the shape the file shares), and reads of the latest window.
//!
//! Run with `cargo run --example time_series`.

use h5::ndarray::{Array2, s};

const CHANNELS: usize = 4;
const BLOCK: usize = 250;

fn main() -> h5::Result<()> {
    let dir = tempfile::tempdir().map_err(|e| h5::Error::Invalid(e.to_string()))?;
    let path = dir.path().join("series.h5");
    let file = h5::File::create(&path)?;
    let series = file
        .new_dataset::<f32>()
        .shape([0, CHANNELS])
        .max_shape([None, Some(CHANNELS)])
        .chunk([1024, CHANNELS])
        .deflate(1)
        .create("acquisition/samples")?;
    series.write_attr_scalar("rate_hz", 1000.0f64)?;
    // A monitor opened its own handle before the acquisition started.
    let monitor = file.dataset("acquisition/samples")?;
    for block in 0..8 {
        let t0 = block * BLOCK;
        let samples = Array2::from_shape_fn((BLOCK, CHANNELS), |(t, c)| {
            ((t0 + t) as f32 * 0.01 * (c + 1) as f32).sin()
        });
        series.append(&samples)?;
        // The monitor sees the new length without reopening.
        let rows = monitor.shape()[0];
        let last = monitor.read_slice::<f32>(s![rows - 1, ..])?;
        println!("{rows:5} samples, last row {last:.3}");
    }
    // The last 100 samples of channel 2, read as f64 (a lossless conversion).
    let rows = series.shape()[0];
    let window = series.read_slice::<f64>(s![rows - 100.., 2])?;
    assert_eq!(window.len(), 100);
    let expected = ((rows - 1) as f32 * 0.01 * 3.0).sin();
    assert_eq!(window[99], f64::from(expected));
    file.close()?;
    let reopened = h5::File::open(&path)?;
    assert_eq!(
        reopened.dataset("acquisition/samples")?.shape(),
        [8 * BLOCK, CHANNELS]
    );
    Ok(())
}
