//! A table of records: a derived compound type stored as a one-dimensional chunked,
//! compressed dataset that grows as rows arrive, with column units as attributes; then read
//! back whole, by rows, and one column through a narrower struct (compound members are matched
//! by name, so a reader may ask for only the columns it needs).
//!
//! Run with `cargo run --example compound_table`.

use h5::H5Type;
use h5::ndarray::s;

/// One row as written.
#[derive(H5Type, Clone, Debug, PartialEq)]
#[repr(C)]
struct Reading {
    station: u32,
    time: f64,
    temperature: f32,
    pressure: f32,
    label: h5::FixedAscii<8>,
}

/// The columns a reader wants: members are found by name in the file's type.
#[derive(H5Type, Clone, Debug, PartialEq)]
#[repr(C)]
struct Temperature {
    station: u32,
    temperature: f32,
}

fn reading(i: u32) -> Reading {
    Reading {
        station: i % 7,
        time: f64::from(i) * 60.0,
        temperature: 15.0 + (i % 10) as f32 * 0.5,
        pressure: 1013.0 - (i % 5) as f32,
        label: h5::FixedAscii::new(&format!("st{:03}", i % 7)).expect("ASCII label"),
    }
}

fn main() -> h5::Result<()> {
    let dir = tempfile::tempdir().map_err(|e| h5::Error::Invalid(e.to_string()))?;
    let path = dir.path().join("table.h5");
    {
        let file = h5::File::create(&path)?;
        let table = file
            .new_dataset::<Reading>()
            .shape([0])
            .max_shape([None])
            .chunk([256])
            .shuffle()
            .deflate(4)
            .create("readings")?;
        table.write_attr_str("time_units", "s")?;
        table.write_attr_str("temperature_units", "degC")?;
        // Rows arrive in batches.
        for batch in 0..10u32 {
            let rows: Vec<Reading> = (batch * 100..(batch + 1) * 100).map(reading).collect();
            table.append(&rows)?;
        }
        file.close()?;
    }
    let file = h5::File::open(&path)?;
    let table = file.dataset("readings")?;
    assert_eq!(table.shape(), [1000]);
    let all = table.read_1d::<Reading>()?;
    assert_eq!(all[123], reading(123));
    let window = table.read_slice::<Reading>(s![500..510])?;
    assert_eq!(window[0], reading(500));
    let temps = table.read_vec::<Temperature>()?;
    let station_3: Vec<f32> = temps
        .iter()
        .filter(|t| t.station == 3)
        .map(|t| t.temperature)
        .collect();
    let mean = station_3.iter().sum::<f32>() / station_3.len() as f32;
    println!(
        "{} rows; station 3: {} readings, mean temperature {mean:.2} {}",
        all.len(),
        station_3.len(),
        table.attr("temperature_units")?.read_scalar::<String>()?
    );
    Ok(())
}
