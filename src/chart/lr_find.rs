//! The learning-rate range test's chart: the loss against the learning rate on a log axis, raw
//! and smoothed, and the suggested rate marked (SVG for `webtrain lr-find`, a canvas in the page).

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::chart::style::{ChartError, ChartTheme, Corner, DrawResult, LegendRow, Mark};
use crate::train::lr_find::LrFinding;

const SIZE: (u32, u32) = (640, 400);
const LOSS_COLOR: RGBColor = RGBColor(31, 119, 180);
const SUGGESTION_COLOR: RGBColor = RGBColor(44, 160, 44);

/// Draws `finding` on `area`.
pub fn draw_lr_finding<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    finding: &LrFinding,
    theme: &ChartTheme,
) -> DrawResult<DB> {
    let finite: Vec<_> = finding
        .points
        .iter()
        .filter(|p| p.loss.is_finite())
        .collect();
    let lrs = finding.points.iter().map(|p| p.lr);
    let low = lrs.clone().fold(f64::INFINITY, f64::min).min(1e-6);
    let high = lrs.fold(0.0, f64::max).max(low * 10.0);
    // Up to twice the first smoothed loss: the divergence at the end would flatten the rest.
    let first = finite.first().map_or(2.5, |p| p.smoothed);
    let top = finite
        .iter()
        .map(|p| p.smoothed)
        .fold(0.1, f64::max)
        .min(first * 2.0);
    let mut chart = ChartBuilder::on(area)
        .caption("Learning-rate range test", theme.font(18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d((low..high).log_scale(), 0.0..top * 1.05)?;
    chart
        .configure_mesh()
        .x_desc("learning rate")
        .y_desc("training loss")
        .axis_style(theme.text)
        .bold_line_style(theme.grid)
        .light_line_style(TRANSPARENT)
        .label_style(theme.font(13))
        .axis_desc_style(theme.font(14))
        .x_label_formatter(&|lr| rate_label(*lr))
        .draw()?;
    let raw = finite.iter().map(|p| (p.lr, f64::from(p.loss).min(top)));
    chart.draw_series(LineSeries::new(raw, LOSS_COLOR.mix(0.3).stroke_width(1)))?;
    let smoothed = finite.iter().map(|p| (p.lr, p.smoothed.min(top)));
    chart.draw_series(LineSeries::new(smoothed, LOSS_COLOR.stroke_width(2)))?;
    let mut legend = vec![LegendRow {
        label: "smoothed loss".into(),
        mark: Mark::Line {
            color: LOSS_COLOR.to_rgba(),
            width: 2,
        },
    }];
    if let Some(lr) = finding.suggestion {
        chart.draw_series(LineSeries::new(
            [(lr, 0.0), (lr, top)],
            SUGGESTION_COLOR.stroke_width(2),
        ))?;
        legend.push(LegendRow {
            label: format!("suggested {}", short(lr)),
            mark: Mark::Line {
                color: SUGGESTION_COLOR.to_rgba(),
                width: 2,
            },
        });
    }
    theme.legend(&chart, &legend, Corner::LowerRight)
}

/// An axis label: "1e-6", "0.001", "1".
fn rate_label(lr: f64) -> String {
    match (1e-3..1e3).contains(&lr) {
        true => format!("{:.0e}", lr)
            .parse::<f64>()
            .unwrap_or(lr)
            .to_string(),
        false => format!("{lr:.0e}"),
    }
}

/// A rate in three significant figures: 0.0123, 1.5e-5.
pub fn short(lr: f64) -> String {
    let text = format!("{lr:.2e}");
    match (1e-3..1e3).contains(&lr) {
        true => format!("{}", text.parse::<f64>().unwrap_or(lr)),
        false => text,
    }
}

/// The chart as an SVG document.
pub fn render_svg(finding: &LrFinding) -> Result<String, ChartError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let theme = ChartTheme::LIGHT;
        let drawn = root
            .fill(&theme.background)
            .and_then(|()| draw_lr_finding(&root, finding, &theme))
            .and_then(|()| root.present());
        drawn.map_err(|e| ChartError(e.to_string()))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::lr_find::LrPoint;

    #[test]
    fn draws_the_curve_and_names_the_suggestion() {
        let points = (0..50)
            .map(|i| {
                let lr = 1e-6 * 10f64.powf(i as f64 / 49.0 * 6.0);
                let loss = 2.3 - (i as f64 / 30.0).min(1.0) * 2.0 + if i > 40 { 5.0 } else { 0.0 };
                LrPoint {
                    lr,
                    loss: loss as f32,
                    smoothed: loss,
                }
            })
            .collect();
        let finding = LrFinding {
            points,
            suggestion: Some(0.0123),
            diverged: true,
        };
        let svg = render_svg(&finding).unwrap();
        assert!(svg.contains("suggested 0.0123"), "{svg}");
        assert!(svg.contains("learning rate"));
        assert_eq!(short(1.5e-5), "1.50e-5");
        assert_eq!(rate_label(9.999_999e-5), "1e-4");
        assert_eq!(rate_label(0.001), "0.001");
        assert_eq!(rate_label(1.0), "1");
    }
}
