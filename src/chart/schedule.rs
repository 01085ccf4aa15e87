//! The learning-rate schedule previewed before a run: each step's rate against epoch, as
//! `train::schedule` will set it.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::chart::style::{ChartTheme, DrawResult};

const LR_COLOR: RGBColor = RGBColor(148, 103, 189);

/// Draws `rates` (one a step) over epochs of `batches_per_epoch` steps.
pub fn draw_schedule<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    rates: &[f64],
    batches_per_epoch: usize,
    theme: &ChartTheme,
) -> DrawResult<DB> {
    let per_epoch = batches_per_epoch.max(1) as f64;
    let epochs = (rates.len() as f64 / per_epoch).max(1.0);
    let top = rates
        .iter()
        .copied()
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .margin(6)
        .x_label_area_size(28)
        .y_label_area_size(52)
        .build_cartesian_2d(0.0..epochs, 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc("learning rate")
        .axis_style(theme.text)
        .light_line_style(theme.grid.mix(0.0))
        .bold_line_style(theme.grid)
        .label_style(theme.font(11))
        .axis_desc_style(theme.font(12))
        .x_labels(5)
        .y_labels(4)
        .y_label_formatter(&|lr| format!("{lr:.1e}"))
        .draw()?;
    let points = rates
        .iter()
        .enumerate()
        .map(|(step, &lr)| (step as f64 / per_epoch, lr));
    chart.draw_series(LineSeries::new(points, LR_COLOR.stroke_width(2)))?;
    Ok(())
}
