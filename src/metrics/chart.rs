//! The run's charts against epoch: training loss, and training and test accuracy, drawn with
//! plotters on any backend (SVG for the CLI's loss.svg).

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::config::ScheduleKind;
use crate::metrics::RunMetrics;
use crate::metrics::chart_style::{ChartError, ChartTheme, Corner, DrawResult, LegendRow, Mark};

const SIZE: (u32, u32) = (960, 400);
const LOSS_COLOR: RGBColor = RGBColor(31, 119, 180);
const ACCURACY_COLOR: RGBColor = RGBColor(214, 39, 40);
const TRAIN_ACCURACY_COLOR: RGBColor = RGBColor(255, 127, 14);
const LR_CHANGE_COLOR: RGBColor = RGBColor(44, 160, 44);
const LR_COLOR: RGBColor = RGBColor(148, 103, 189);

/// One of the charts, drawn on any plotters backend: SVG natively, a canvas in the page.
pub type DrawFn<DB> = fn(&DrawingArea<DB, Shift>, &RunMetrics, &ChartTheme) -> DrawResult<DB>;

/// How much each smoothed point keeps of the one before it (an exponential moving average,
/// debiased at the start, as TensorBoard smooths).
const SMOOTHING: f64 = 0.8;

/// The smoothed curve through `points`.
fn smoothed(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    smoothed_by(points, SMOOTHING)
}

/// The curve through `points` smoothed by `smoothing` (0 to below 1): each point keeps that
/// share of the average before it. 0 gives the points themselves.
pub(crate) fn smoothed_by(points: &[(f64, f64)], smoothing: f64) -> Vec<(f64, f64)> {
    let (mut average, mut weight) = (0.0, 0.0);
    points
        .iter()
        .map(|&(x, y)| {
            average = smoothing * average + (1.0 - smoothing) * y;
            weight = smoothing * weight + (1.0 - smoothing);
            (x, average / weight)
        })
        .collect()
}

/// The chart's x extent in epochs: the run's, or what the points reach past it; a little past
/// that, so that the last epoch's test point is drawn whole.
fn epoch_extent(metrics: &RunMetrics) -> f64 {
    let reached = metrics.intervals.last().map_or(0.0, |i| i.epochs);
    reached.max(metrics.config.epochs as f64).max(1.0) * 1.02
}

/// A series drawn twice: its raw points faint (in the legend as `raw_label`, if any), its
/// smoothed curve over them (as `label`). Returns its legend rows: none before it has points.
fn draw_smoothed<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    points: &[(f64, f64)],
    color: RGBColor,
    (raw_label, label): (Option<String>, &str),
) -> Result<Vec<LegendRow>, DrawingAreaErrorKind<DB::ErrorType>> {
    let faint = color.mix(0.3);
    chart.draw_series(LineSeries::new(
        points.iter().copied(),
        faint.stroke_width(1),
    ))?;
    // A run with one point so far has no line yet: a marker.
    if let [point] = points {
        chart.draw_series([Circle::new(*point, 3, color.filled())])?;
    }
    chart.draw_series(LineSeries::new(smoothed(points), color.stroke_width(2)))?;
    if points.is_empty() {
        return Ok(Vec::new());
    }
    let raw = raw_label.map(|label| LegendRow {
        label,
        mark: Mark::Line {
            color: faint,
            width: 1,
        },
    });
    let smooth = LegendRow {
        label: label.to_string(),
        mark: Mark::Line {
            color: color.to_rgba(),
            width: 2,
        },
    };
    Ok(raw.into_iter().chain([smooth]).collect())
}

/// Training loss of every few steps against epoch, and the learning rate (never smoothed, on
/// its own axis) when it moves.
pub fn draw_loss<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    metrics: &RunMetrics,
    theme: &ChartTheme,
) -> DrawResult<DB> {
    let points: Vec<(f64, f64)> = metrics
        .intervals
        .iter()
        .filter(|i| i.loss.is_finite())
        .map(|i| (i.epochs, f64::from(i.loss)))
        .collect();
    let top = points.iter().map(|p| p.1).fold(0.1, f64::max) * 1.05;
    let batches_per_epoch = (metrics.total_steps / metrics.config.epochs.max(1)).max(1);
    let rates = learning_rates(metrics, batches_per_epoch);
    let lr_top = rates.iter().map(|p| p.1).fold(0.0, f64::max) * 1.05;
    let mut builder = ChartBuilder::on(area);
    builder
        .caption("Training loss", theme.font(18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50);
    if !rates.is_empty() {
        builder.right_y_label_area_size(60);
    }
    let mut chart = builder.build_cartesian_2d(0.0..epoch_extent(metrics), 0.0..top)?;
    theme.mesh(&mut chart, "epoch", "cross-entropy")?;
    // Merged intervals stand for more steps: the longest says what a faint point is.
    let steps = metrics.intervals.iter().map(|i| i.steps).max().unwrap_or(1);
    let raw = match steps {
        1 => "each step".to_string(),
        n => format!("each {n} steps"),
    };
    let mut legend = draw_smoothed(&mut chart, &points, LOSS_COLOR, (Some(raw), "smoothed"))?;
    // Each change of the learning rate: a vertical line where its first step begins, labelled.
    for change in &metrics.lr_changes {
        let x = change.step.saturating_sub(1) as f64 / batches_per_epoch as f64;
        chart.draw_series(LineSeries::new(
            [(x, 0.0), (x, top)],
            LR_CHANGE_COLOR.stroke_width(2),
        ))?;
        chart.draw_series([Text::new(
            format!("lr {}", change.lr),
            (x, top * 0.95),
            ("sans-serif", 14).into_font().color(&LR_CHANGE_COLOR),
        )])?;
    }
    if rates.is_empty() {
        return theme.legend(&chart, &legend, Corner::UpperRight);
    }
    let mut chart = chart.set_secondary_coord(0.0..epoch_extent(metrics), 0.0..lr_top);
    chart
        .configure_secondary_axes()
        .y_desc("learning rate")
        .axis_style(theme.text)
        .label_style(theme.font(12))
        .axis_desc_style(theme.font(14))
        .draw()?;
    chart.draw_secondary_series(LineSeries::new(rates, LR_COLOR.stroke_width(2)))?;
    legend.push(LegendRow {
        label: "learning rate".to_string(),
        mark: Mark::Line {
            color: LR_COLOR.to_rgba(),
            width: 2,
        },
    });
    theme.legend(&chart, &legend, Corner::UpperRight)
}

/// The learning rate of each logged step against epoch, when a schedule or a change moved it;
/// none when it stayed as set.
fn learning_rates(metrics: &RunMetrics, batches_per_epoch: usize) -> Vec<(f64, f64)> {
    let rates: Vec<(f64, f64)> = metrics
        .losses
        .iter()
        .filter(|point| point.lr > 0.0)
        .map(|point| {
            (
                point.step.saturating_sub(1) as f64 / batches_per_epoch as f64,
                point.lr,
            )
        })
        .collect();
    let moved = rates.iter().any(|&(_, lr)| lr != rates[0].1);
    match moved || metrics.config.schedule.kind != ScheduleKind::Constant {
        true => rates,
        false => Vec::new(),
    }
}

/// Test accuracy after each epoch, and training accuracy of every few steps, against epoch.
pub fn draw_accuracy<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    metrics: &RunMetrics,
    theme: &ChartTheme,
) -> DrawResult<DB> {
    let training: Vec<(f64, f64)> = metrics
        .intervals
        .iter()
        .map(|i| (i.epochs, f64::from(i.accuracy)))
        .filter(|p| p.1.is_finite())
        .collect();
    let test: Vec<(f64, f64)> = metrics
        .epochs
        .iter()
        .map(|e| (e.epoch as f64, e.accuracy()))
        .collect();
    // From 90 % unless a curve starts lower, in steps of 10.
    let lowest = smoothed(&training)
        .iter()
        .chain(&test)
        .map(|p| p.1)
        .fold(90.0, f64::min);
    let low = (lowest / 10.0).floor().max(0.0) * 10.0;
    let mut chart = ChartBuilder::on(area)
        .caption("Accuracy", theme.font(18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..epoch_extent(metrics), low..100.0)?;
    theme.mesh(&mut chart, "epoch", "%")?;
    let mut legend = draw_smoothed(
        &mut chart,
        &training,
        TRAIN_ACCURACY_COLOR,
        (None, "training"),
    )?;
    chart.draw_series(LineSeries::new(
        test.iter().copied(),
        ACCURACY_COLOR.stroke_width(2),
    ))?;
    if !test.is_empty() {
        legend.push(LegendRow {
            label: "test".to_string(),
            mark: Mark::Dot(ACCURACY_COLOR),
        });
    }
    chart.draw_series(
        test.iter()
            .map(|&p| Circle::new(p, 4, ACCURACY_COLOR.filled())),
    )?;
    theme.legend(&chart, &legend, Corner::LowerRight)
}

/// Both charts side by side as an SVG document.
pub fn render_svg(metrics: &RunMetrics) -> Result<String, ChartError> {
    side_by_side_svg(SIZE, |left, right, theme| {
        draw_loss(left, metrics, theme)?;
        draw_accuracy(right, metrics, theme)
    })
}

/// Two charts side by side, drawn by `draw` on the light theme, as an SVG document of `size`.
pub(crate) fn side_by_side_svg(
    size: (u32, u32),
    draw: impl for<'a, 'b> FnOnce(
        &DrawingArea<SVGBackend<'a>, Shift>,
        &DrawingArea<SVGBackend<'a>, Shift>,
        &'b ChartTheme,
    ) -> DrawResult<SVGBackend<'a>>,
) -> Result<String, ChartError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let theme = ChartTheme::LIGHT;
        let drawn = root.fill(&theme.background).and_then(|()| {
            let (left, right) = root.split_horizontally(size.0 / 2);
            draw(&left, &right, &theme)?;
            root.present()
        });
        drawn.map_err(|e| ChartError(e.to_string()))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;
    use crate::train::EpochReport;
    use crate::train::interval::IntervalReport;

    fn interval(step: usize) -> IntervalReport {
        IntervalReport {
            epoch: 1,
            step,
            epochs: step as f64 / 100.0,
            steps: 10,
            samples: 640,
            loss: 2.0 / step as f32,
            accuracy: 100.0 - 50.0 / step as f32,
            training_secs: step as f64 / 10.0,
        }
    }

    #[test]
    fn svg_shows_the_loss_and_both_accuracies_against_epoch() {
        let mut metrics = RunMetrics::new(TrainConfig::default(), "cpu".into());
        metrics.total_steps = 1000;
        metrics.intervals = (1..=5).map(|s| interval(s * 10)).collect();
        metrics.epochs = vec![EpochReport {
            epoch: 1,
            test_loss: 0.1,
            correct: 9800,
            total: 10000,
            confusion: [[0; crate::model::CLASSES]; crate::model::CLASSES],
        }];
        let svg = render_svg(&metrics).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..50.min(svg.len())]);
        assert!(svg.contains("Training loss") && svg.contains("Accuracy"));
        let text = |t: &str| svg.matches(&format!(">\n{t}\n</text>")).count();
        assert_eq!(text("epoch"), 2, "x axes in epochs");
        for label in ["smoothed", "training", "test"] {
            assert_eq!(text(label), 1, "legend {label}");
        }
        // The raw points' line faint and the smoothed one over it (and in the legend), for the
        // loss and the training accuracy; the test accuracy's line.
        let lines = |color: &str, opacity: &str| {
            let line = format!("<polyline fill=\"none\" opacity=\"{opacity}\" stroke=\"{color}\"");
            svg.matches(&line).count()
        };
        assert_eq!((lines("#1F77B4", "0.3"), lines("#1F77B4", "1")), (2, 2));
        assert_eq!((lines("#FF7F0E", "0.3"), lines("#FF7F0E", "1")), (1, 2));
        assert_eq!(text("each 10 steps"), 1, "what a faint point is");
        assert_eq!(lines("#D62728", "1"), 1);
        assert!(svg.contains("<circle"), "points are drawn");
        assert!(!svg.contains("lr 0.05"));
        metrics.lr_changes = vec![crate::metrics::LrChange {
            step: 250,
            lr: 0.05,
        }];
        let svg = render_svg(&metrics).unwrap();
        assert!(svg.contains("lr 0.05"), "the change is labelled");
    }

    #[test]
    fn a_run_without_points_draws_its_axes_and_no_legend() {
        let metrics = RunMetrics::new(TrainConfig::default(), "cpu".into());
        let svg = render_svg(&metrics).unwrap();
        let text = |t: &str| svg.matches(&format!(">\n{t}\n</text>")).count();
        assert_eq!(text("epoch"), 2);
        for label in ["each step", "smoothed", "training", "test"] {
            assert_eq!(text(label), 0, "legend {label}");
        }
    }

    #[test]
    fn the_smoothed_curve_starts_on_the_data_and_follows_it() {
        let flat = smoothed(&[(0.0, 2.0), (1.0, 2.0), (2.0, 2.0)]);
        assert!(flat.iter().all(|p| (p.1 - 2.0).abs() < 1e-12), "{flat:?}");
        let step: Vec<(f64, f64)> = (0..40).map(|x| (x as f64, f64::from(x >= 10))).collect();
        let curve = smoothed(&step);
        assert_eq!(curve[9].1, 0.0);
        assert!(curve[10].1 > 0.1 && curve[10].1 < 0.5, "{:?}", curve[10]);
        assert!(curve.windows(2).skip(10).all(|w| w[0].1 < w[1].1));
        assert!(curve[39].1 > 0.99);
    }

    #[test]
    fn a_diverged_run_draws_its_finite_points() {
        let mut metrics = RunMetrics::new(TrainConfig::default(), "cpu".into());
        metrics.intervals = vec![
            interval(10),
            IntervalReport {
                loss: f32::NAN,
                accuracy: f32::NAN,
                ..interval(20)
            },
        ];
        assert!(render_svg(&metrics).is_ok());
    }
}
