//! How each layer learns, over the run's log lines: the update ratio of every layer (on a log
//! axis, the thousandth a good rate gives marked), the share of dead units, and each layer's
//! weights and gradients as TensorBoard's distributions (bands of percentiles over steps). The
//! CLI's learning.svg holds them all; the page draws each on a canvas.

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::chart::series::PALETTE;
use crate::chart::style::{ChartError, ChartTheme, Corner, DrawResult, LegendRow, Mark};
use crate::inspect::learning::{LayerLearning, LearningReport, Spread};
use crate::inspect::watch::GOOD_RATIO;
use crate::model::LAYERS;

const SIZE: (u32, u32) = (1200, 1500);

/// Which of a layer's values a distribution is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Values {
    Weights,
    Gradients,
}

impl Values {
    fn of(self, layer: &LayerLearning) -> Option<&Spread> {
        match self {
            Self::Weights => layer.weights.as_ref(),
            Self::Gradients => layer.gradients.as_ref(),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Weights => "weights",
            Self::Gradients => "gradients",
        }
    }
}

fn layer_color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// The steps the reports span, never empty.
fn steps(reports: &[LearningReport]) -> std::ops::Range<f64> {
    let first = reports.first().map_or(0, |r| r.step) as f64;
    let last = reports.last().map_or(1, |r| r.step) as f64;
    first..last.max(first + 1.0)
}

/// A line per layer of `figure` (what it takes of a layer) over the steps, through its finite
/// values.
fn lines(
    reports: &[LearningReport],
    figure: impl Fn(&LayerLearning) -> Option<f64>,
) -> Vec<(usize, Vec<(f64, f64)>)> {
    let lines = LAYERS.iter().enumerate().map(|(index, name)| {
        let points = reports.iter().filter_map(|report| {
            // A diverged run's figures are not all numbers: an infinite axis would never end.
            let value = figure(report.layer(name)?).filter(|v| v.is_finite())?;
            Some((report.step as f64, value))
        });
        (index, points.collect::<Vec<_>>())
    });
    lines.filter(|(_, points)| !points.is_empty()).collect()
}

fn legend_of(lines: &[(usize, Vec<(f64, f64)>)]) -> Vec<LegendRow> {
    let rows = lines.iter().map(|(index, _)| LegendRow {
        label: LAYERS[*index].to_string(),
        mark: Mark::Line {
            color: layer_color(*index).to_rgba(),
            width: 2,
        },
    });
    rows.collect()
}

/// A value's label on an axis.
type Label<'a, V> = dyn Fn(&V) -> String + 'a;

/// The mesh of a chart over steps, whole steps on the x axis, and `y`'s description and labels.
fn mesh<DB: DrawingBackend, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
    theme: &ChartTheme,
    (y_desc, y_label): (&str, &Label<'_, Y::ValueType>),
) -> DrawResult<DB>
where
    Y: Ranged + ValueFormatter<Y::ValueType>,
{
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc(y_desc)
        .axis_style(theme.text)
        .bold_line_style(theme.grid)
        .light_line_style(TRANSPARENT)
        .label_style(theme.font(13))
        .axis_desc_style(theme.font(14))
        .x_label_formatter(&|step| format!("{step:.0}"))
        .y_label_formatter(y_label)
        .draw()
}

/// ‖update‖ / ‖weights‖ of each layer against the step, on a log axis, with the thousandth a
/// well-set learning rate gives.
pub fn draw_update_ratios<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    reports: &[LearningReport],
    theme: &ChartTheme,
) -> DrawResult<DB> {
    let lines = lines(reports, |layer| layer.update_ratio.filter(|r| *r > 0.0));
    let values = lines
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.1));
    let low = values.clone().fold(GOOD_RATIO / 10.0, f64::min);
    let high = values.fold(GOOD_RATIO * 10.0, f64::max);
    let steps = steps(reports);
    let mut chart = ChartBuilder::on(area)
        .caption("Update ratio ‖update‖ / ‖weights‖", theme.font(17))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(steps.clone(), (low..high).log_scale())?;
    mesh(&mut chart, theme, ("", &|ratio| format!("{ratio:.0e}")))?;
    let good = [(steps.start, GOOD_RATIO), (steps.end, GOOD_RATIO)];
    chart.draw_series(LineSeries::new(good, theme.text.mix(0.5).stroke_width(1)))?;
    for (index, points) in &lines {
        let color = layer_color(*index);
        chart.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?;
    }
    let mut legend = legend_of(&lines);
    legend.push(LegendRow {
        label: "1e-3".into(),
        mark: Mark::Line {
            color: theme.text.mix(0.5),
            width: 1,
        },
    });
    theme.legend(&chart, &legend, Corner::UpperRight)
}

/// The share of each ReLU layer's units that never fired on the logged step's batch.
pub fn draw_dead_units<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    reports: &[LearningReport],
    theme: &ChartTheme,
) -> DrawResult<DB> {
    let lines = lines(reports, |layer| layer.dead_share.map(|share| share * 100.0));
    let top = lines
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.1))
        .fold(10.0, f64::max)
        .min(100.0);
    let mut chart = ChartBuilder::on(area)
        .caption("Dead units (never fired on the batch)", theme.font(17))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(steps(reports), 0.0..top * 1.05)?;
    mesh(
        &mut chart,
        theme,
        ("% of units", &|share| format!("{share:.0}")),
    )?;
    for (index, points) in &lines {
        let color = layer_color(*index);
        chart.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?;
    }
    theme.legend(&chart, &legend_of(&lines), Corner::UpperRight)
}

/// The distribution of `layer`'s `values` over the steps: its percentile bands nested (the
/// whole range palest, ±0.5σ darkest) and the median.
pub fn draw_distribution<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    reports: &[LearningReport],
    (layer, values): (&str, Values),
    theme: &ChartTheme,
) -> DrawResult<DB> {
    let bands: Vec<(f64, [f64; 9])> = reports
        .iter()
        .filter_map(|report| {
            let spread = values.of(report.layer(layer)?)?;
            let finite = spread.bands.0.iter().all(|v| v.is_finite());
            finite.then(|| (report.step as f64, spread.bands.0.map(f64::from)))
        })
        .collect();
    let low = bands
        .iter()
        .map(|(_, b)| b[0])
        .fold(f64::INFINITY, f64::min);
    let high = bands
        .iter()
        .map(|(_, b)| b[8])
        .fold(f64::NEG_INFINITY, f64::max);
    let (low, high) = match low < high {
        true => (low, high),
        false if low.is_finite() => (low - 1.0, low + 1.0),
        false => (-1.0, 1.0),
    };
    let margin = (high - low) * 0.05;
    let color = layer_color(LAYERS.iter().position(|l| *l == layer).unwrap_or(0));
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{layer} {}", values.name()), theme.font(17))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(steps(reports), (low - margin)..(high + margin))?;
    // Labels at a millionth of the range from 0 are 0, not a rounding's 1e-17.
    let zero = (high - low) * 1e-6;
    let label = |v: &f64| match v.abs() < zero {
        true => "0".to_string(),
        false => format!("{v:.1e}"),
    };
    mesh(&mut chart, theme, ("", &label))?;
    if bands.is_empty() {
        return Ok(());
    }
    // From the widest band in: each drawn over the last, darker.
    for (depth, (lower, upper)) in [(0, 8), (1, 7), (2, 6), (3, 5)].into_iter().enumerate() {
        let top = bands.iter().map(|(step, b)| (*step, b[upper]));
        let bottom = bands.iter().rev().map(|(step, b)| (*step, b[lower]));
        let outline: Vec<_> = top.chain(bottom).collect();
        let shade = color.mix(0.15 + 0.15 * depth as f64).filled();
        chart.draw_series(std::iter::once(Polygon::new(outline, shade)))?;
    }
    let median = bands.iter().map(|(step, b)| (*step, b[4]));
    chart.draw_series(LineSeries::new(median, color.stroke_width(2)))?;
    Ok(())
}

/// Every chart of the run's learning, as one SVG document: the update ratios and dead units
/// side by side, then a row per layer of its weights' and gradients' distributions.
pub fn render_svg(reports: &[LearningReport]) -> Result<String, ChartError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let theme = ChartTheme::LIGHT;
        let drawn = root.fill(&theme.background).and_then(|()| {
            let panels = root.split_evenly((1 + LAYERS.len(), 2));
            draw_update_ratios(&panels[0], reports, &theme)?;
            draw_dead_units(&panels[1], reports, &theme)?;
            for (row, layer) in LAYERS.iter().enumerate() {
                let at = 2 * (row + 1);
                draw_distribution(&panels[at], reports, (layer, Values::Weights), &theme)?;
                draw_distribution(&panels[at + 1], reports, (layer, Values::Gradients), &theme)?;
            }
            root.present()
        });
        drawn.map_err(|e| ChartError(e.to_string()))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::learning::Spread;

    fn report(step: usize) -> LearningReport {
        let values: Vec<f32> = (0..100)
            .map(|i| (i as f32 - 50.0) * step as f32 * 1e-3)
            .collect();
        let layers = LAYERS.iter().map(|name| LayerLearning {
            name: name.to_string(),
            weights: Spread::of(&values),
            gradients: (*name != "conv1").then(|| Spread::of(&values)).flatten(),
            update_ratio: Some(1e-3 * step as f64 / 100.0),
            dead_share: (*name != "fc2").then_some(0.1),
        });
        LearningReport {
            epoch: 1,
            step,
            layers: layers.collect(),
        }
    }

    #[test]
    fn draws_every_layer_and_names_each_chart() {
        let reports: Vec<_> = (1..6).map(|i| report(i * 100)).collect();
        let svg = render_svg(&reports).unwrap();
        for title in [
            "Update ratio",
            "Dead units",
            "conv1 weights",
            "conv1 gradients",
            "fc2 gradients",
        ] {
            assert!(svg.contains(title), "{title}");
        }
        // Four nested bands a distribution, for 7 of the 8 (conv1 has no gradients here).
        assert_eq!(svg.matches("<polygon").count(), 4 * 7, "{svg}");
        // Nothing to draw is drawn as empty charts, not an error; nor are a diverged run's.
        assert!(render_svg(&[]).is_ok());
        let mut diverged = report(100);
        for layer in &mut diverged.layers {
            layer.update_ratio = Some(f64::INFINITY);
            layer.dead_share = Some(f64::NAN);
            layer.weights = Spread::of(&[f32::NAN, f32::INFINITY, 1.0]);
        }
        assert!(render_svg(&[report(50), diverged]).is_ok());
    }
}
