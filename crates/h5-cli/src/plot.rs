//! Plots of replays (plotters, SVG backend): hit rate and cache size per epoch, one line per
//! configuration replayed.

use std::path::Path;

use plotters::prelude::*;

use crate::metacache::Run;

const MIB: f64 = 1024.0 * 1024.0;

/// Colours of the runs, in order.
const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Draws `runs` into the SVG file `out`: the hit rate per epoch above, the maximum size (solid)
/// and the bytes cached (thin) per epoch below.
pub(crate) fn replay_plot(runs: &[Run], out: &Path) -> Result<(), String> {
    match out.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => {}
        _ => {
            return Err(format!(
                "{}: plots are written as SVG (name the file *.svg)",
                out.display()
            ));
        }
    }
    draw(runs, out).map_err(|e| format!("cannot draw {}: {e}", out.display()))
}

fn draw(runs: &[Run], out: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let epochs = runs
        .iter()
        .map(|r| r.report.epochs.len())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let top_size = runs
        .iter()
        .flat_map(|r| r.report.epochs.iter())
        .map(|e| e.max_size.max(e.cur_size) as f64 / MIB)
        .fold(1.0f64, f64::max)
        * 1.1;
    let root = SVGBackend::new(out, (900, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let (upper, lower) = root.split_vertically(320);
    let mut hit = ChartBuilder::on(&upper)
        .caption("metadata cache: hit rate per epoch", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0.5f64..epochs + 0.5, 0f64..1.05f64)?;
    hit.configure_mesh()
        .x_desc("epoch")
        .y_desc("hit rate")
        .draw()?;
    for (i, run) in runs.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let points = run
            .report
            .epochs
            .iter()
            .map(|e| (e.epoch as f64, e.hit_rate));
        hit.draw_series(LineSeries::new(points, colour.stroke_width(2)))?
            .label(run.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour));
    }
    hit.configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    let mut size = ChartBuilder::on(&lower)
        .caption(
            "cache size per epoch (thick: maximum size, thin: bytes cached)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0.5f64..epochs + 0.5, 0f64..top_size)?;
    size.configure_mesh().x_desc("epoch").y_desc("MiB").draw()?;
    for (i, run) in runs.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let epochs = &run.report.epochs;
        size.draw_series(LineSeries::new(
            epochs
                .iter()
                .map(|e| (e.epoch as f64, e.max_size as f64 / MIB)),
            colour.stroke_width(3),
        ))?;
        size.draw_series(LineSeries::new(
            epochs
                .iter()
                .map(|e| (e.epoch as f64, e.cur_size as f64 / MIB)),
            colour.mix(0.6).stroke_width(1),
        ))?;
    }
    root.present()?;
    Ok(())
}
