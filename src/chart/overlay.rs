//! Runs overlaid on one loss chart and one accuracy chart, each in its own colour and named in
//! the legend; runs that differ only by seed may be drawn as their mean, with a band for their
//! spread. Smoothing, a logarithmic loss axis and the x axis (epochs, steps or training time)
//! are the viewer's. A run shown alone is an overlay of one: its legend names its curves
//! rather than the run, and its learning rate is drawn when it moves.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

pub use crate::chart::series::{ChartOptions, PALETTE, Series, XAxis, series};
use crate::chart::series::{Curve, each_run, interval_points, test_points};
use crate::chart::style::{
    ChartError, ChartTheme, Corner, LegendRow, Mark, side_by_side_svg, smoothed_by,
};
use crate::config::ScheduleKind;
use crate::metrics::RunMetrics;

const LR_COLOR: RGBColor = RGBColor(148, 103, 189);
/// A run alone: its training and test accuracy in colours of their own.
const TRAINING_ACCURACY_COLOR: RGBColor = RGBColor(255, 127, 14);
const TEST_ACCURACY_COLOR: RGBColor = RGBColor(214, 39, 40);
const LR_CHANGE_COLOR: RGBColor = RGBColor(44, 160, 44);

/// `10^exponent` with three significant digits at most and no trailing zeros: `0.1`, `3.16`.
fn power_of_ten(exponent: f64) -> String {
    let value = 10f64.powf(exponent);
    let decimals = (2.0 - value.log10().floor()).clamp(0.0, 8.0) as usize;
    let text = format!("{value:.decimals$}");
    match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => text,
    }
}

fn axis_name(axis: XAxis) -> &'static str {
    match axis {
        XAxis::Epoch => "epoch",
        XAxis::Step => "step",
        XAxis::Time => "training time (s)",
    }
}

/// The x extent of every series' points, or of the runs' whole length where it is known (their
/// epochs or steps): a little past the last, so that a last test point is drawn whole.
fn x_extent(series: &[Series], axis: XAxis, curves: &[Vec<(f64, f64)>]) -> f64 {
    let planned = series.iter().flat_map(|s| &s.runs).map(|run| match axis {
        XAxis::Epoch => run.config.epochs as f64,
        XAxis::Step => run.total_steps as f64,
        XAxis::Time => 0.0,
    });
    let points = curves.iter().flatten().map(|p| p.0);
    let last = planned.chain(points).fold(0.0, f64::max);
    match last > 0.0 {
        true => last * 1.02,
        false => 1.0,
    }
}

/// The run a chart shows alone, when it shows one run alone.
fn alone<'a>(series: &[Series<'a>]) -> Option<&'a RunMetrics> {
    match series {
        [one] if one.runs.len() == 1 => Some(one.runs[0]),
        _ => None,
    }
}

/// Where the run's step `step` (from 1) begins on the x axis; none on the time axis, which the
/// steps' times are not kept for.
fn step_x(run: &RunMetrics, axis: XAxis, step: usize) -> Option<f64> {
    let batches_per_epoch = (run.total_steps / run.config.epochs.max(1)).max(1);
    let before = step.saturating_sub(1) as f64;
    match axis {
        XAxis::Epoch => Some(before / batches_per_epoch as f64),
        XAxis::Step => Some(before),
        XAxis::Time => None,
    }
}

/// The learning rate of each logged step, when a schedule or a change moved it; none when it
/// stayed as set.
fn learning_rates(run: &RunMetrics, axis: XAxis) -> Vec<(f64, f64)> {
    let rates: Vec<(f64, f64)> = run
        .losses
        .iter()
        .filter(|point| point.lr > 0.0)
        .filter_map(|point| Some((step_x(run, axis, point.step)?, point.lr)))
        .collect();
    let moved = rates.iter().any(|&(_, lr)| lr != rates[0].1);
    match moved || run.config.schedule.kind != ScheduleKind::Constant {
        true => rates,
        false => Vec::new(),
    }
}

/// A line of the legend.
fn legend_line(label: impl Into<String>, color: RGBAColor, width: u32) -> LegendRow {
    LegendRow {
        label: label.into(),
        mark: Mark::Line { color, width },
    }
}

/// The legend of a run alone on the loss chart: what a faint point is and the smoothed curve
/// over them; none before it has points.
fn loss_legend(run: &RunMetrics, color: RGBColor, smoothing: f64) -> Vec<LegendRow> {
    if !run.intervals.iter().any(|i| i.loss.is_finite()) {
        return Vec::new();
    }
    if smoothing == 0.0 {
        return vec![legend_line("training loss", color.to_rgba(), 2)];
    }
    // Merged intervals stand for more steps: the longest says what a faint point is.
    let raw = match run.intervals.iter().map(|i| i.steps).max().unwrap_or(1) {
        1 => "each step".to_string(),
        n => format!("each {n} steps"),
    };
    vec![
        legend_line(raw, color.mix(0.3), 1),
        legend_line("smoothed", color.to_rgba(), 2),
    ]
}

/// What a chart drew: each series' line, as smoothed.
pub type Drawn<DB> =
    Result<Vec<Vec<(f64, f64)>>, DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// What the loss and the accuracy charts have in common around their plotting area.
struct Frame {
    caption: &'static str,
    /// The width of the left axis's labels.
    left: u32,
    /// Whether a right axis is drawn (the learning rate's).
    right: bool,
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

impl Frame {
    /// The chart on `area` over `x` and `y`, captioned, its axes' label areas made.
    fn build<'a, DB: DrawingBackend>(
        &self,
        area: &'a DrawingArea<DB, Shift>,
        theme: &ChartTheme,
        x: std::ops::Range<f64>,
        y: std::ops::Range<f64>,
    ) -> Result<Chart<'a, DB>, DrawingAreaErrorKind<DB::ErrorType>> {
        let mut builder = ChartBuilder::on(area);
        builder
            .caption(self.caption, theme.font(18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(self.left);
        if self.right {
            builder.right_y_label_area_size(60);
        }
        builder.build_cartesian_2d(x, y)
    }
}

/// Past this many series a chart leaves out what would only crowd it, and cost a long draw:
/// the faint raw curves under smoothed ones, and the test accuracy's dots.
const DETAILED_SERIES: usize = 12;

/// Draws a curve: with smoothing (and `faint`), the raw mean faint and the smoothed one over
/// it; a band between the smoothed lowest and highest where it stands for several runs.
/// Returns the line.
fn draw_curve<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    curve: &Curve,
    (runs, color): (usize, RGBColor),
    smoothing: f64,
    (width, faint): (u32, bool),
) -> Result<Vec<(f64, f64)>, DrawingAreaErrorKind<DB::ErrorType>> {
    if runs > 1 && !curve.mean.is_empty() {
        let low = smoothed_by(&curve.low, smoothing);
        let high = smoothed_by(&curve.high, smoothing);
        let outline: Vec<(f64, f64)> = low.into_iter().chain(high.into_iter().rev()).collect();
        chart.draw_series([Polygon::new(outline, color.mix(0.15).filled())])?;
    }
    if smoothing > 0.0 && faint {
        chart.draw_series(LineSeries::new(
            curve.mean.iter().copied(),
            color.mix(0.3).stroke_width(1),
        ))?;
    }
    if let [point] = curve.mean[..] {
        chart.draw_series([Circle::new(point, 3, color.filled())])?;
    }
    let line = smoothed_by(&curve.mean, smoothing);
    chart.draw_series(LineSeries::new(
        line.iter().copied(),
        color.stroke_width(width),
    ))?;
    Ok(line)
}

/// Legend rows at most: past it, the last row says how many more series the chart draws.
const LEGEND_ROWS: usize = 12;

fn legend(series: &[Series]) -> Vec<LegendRow> {
    let named = match series.len() > LEGEND_ROWS {
        true => LEGEND_ROWS - 1,
        false => series.len(),
    };
    let more = (series.len() > named).then(|| LegendRow {
        label: format!("and {} more", series.len() - named),
        mark: Mark::Line {
            color: TRANSPARENT,
            width: 1,
        },
    });
    series[..named]
        .iter()
        .map(|s| LegendRow {
            label: match s.runs.len() {
                1 => s.label.clone(),
                n => format!("{} (mean of {n})", s.label),
            },
            mark: Mark::Line {
                color: s.color.to_rgba(),
                width: 2,
            },
        })
        .chain(more)
        .collect()
}

/// The series' training loss against the chosen x axis; the last series (the live run, where
/// there is one) is drawn over the others.
pub fn draw_loss<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    series: &[Series],
    options: &ChartOptions,
    theme: &ChartTheme,
) -> Drawn<DB> {
    let axis = options.x_axis;
    // On a logarithmic axis the chart draws log10 of each loss, labelled with the loss itself.
    let value = |loss: f32| match options.log_loss {
        true if loss > 0.0 => loss.log10(),
        true => f32::NAN,
        false => loss,
    };
    let per_run = each_run(series, |run| interval_points(run, axis, |i| value(i.loss)));
    let curves: Vec<Curve> = per_run.iter().map(|runs| Curve::of(runs)).collect();
    let all: Vec<Vec<(f64, f64)>> = per_run.iter().flatten().cloned().collect();
    let ys = all.iter().flatten().map(|p| p.1);
    let (bottom, top) = match options.log_loss {
        true => {
            let (low, high) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), y| {
                (l.min(y), h.max(y))
            });
            match low.is_finite() {
                true => (low.floor(), high.ceil().max(low.floor() + 1.0)),
                false => (-2.0, 1.0),
            }
        }
        false => (0.0, ys.fold(0.1, f64::max) * 1.05),
    };
    let run = alone(series);
    let rates = run.map_or_else(Vec::new, |run| learning_rates(run, axis));
    let extent = x_extent(series, axis, &all);
    let frame = Frame {
        caption: "Training loss",
        left: 55,
        right: !rates.is_empty(),
    };
    let mut chart = frame.build(area, theme, 0.0..extent, bottom..top)?;
    let log = options.log_loss;
    // Enough decimals that no two labels read the same, on the short axis of a run not begun.
    let decimals = if top - bottom < 1.0 { 2 } else { 1 };
    let y_desc = match log {
        true => "cross-entropy (log scale)",
        false => "cross-entropy",
    };
    let y_labels = |y: &f64| match log {
        true => power_of_ten(*y),
        false => format!("{y:.decimals$}"),
    };
    theme.mesh_labelled(&mut chart, axis_name(axis), y_desc, Some(&y_labels))?;
    let smoothing = options.smoothing();
    let detailed = series.len() <= DETAILED_SERIES;
    let mut lines = Vec::new();
    for (s, curve) in series.iter().zip(&curves) {
        let what = (s.runs.len(), s.color);
        lines.push(draw_curve(
            &mut chart,
            curve,
            what,
            smoothing,
            (2, detailed),
        )?);
    }
    let Some(run) = run else {
        theme.legend(&chart, &legend(series), Corner::UpperRight)?;
        return Ok(lines);
    };
    let mut rows = loss_legend(run, series[0].color, smoothing);
    // Each change of the learning rate: a vertical line where its first step begins, labelled.
    for change in &run.lr_changes {
        let Some(x) = step_x(run, axis, change.step) else {
            continue;
        };
        let color = LR_CHANGE_COLOR;
        chart.draw_series(LineSeries::new(
            [(x, bottom), (x, top)],
            color.stroke_width(2),
        ))?;
        let at = (x, bottom + (top - bottom) * 0.95);
        let font = ("sans-serif", 14).into_font().color(&color);
        chart.draw_series([Text::new(format!("lr {}", change.lr), at, font)])?;
    }
    if rates.is_empty() {
        theme.legend(&chart, &rows, Corner::UpperRight)?;
        return Ok(lines);
    }
    let lr_top = rates.iter().map(|p| p.1).fold(0.0, f64::max) * 1.05;
    let mut chart = chart.set_secondary_coord(0.0..extent, 0.0..lr_top);
    chart
        .configure_secondary_axes()
        .y_desc("learning rate")
        .axis_style(theme.text)
        .label_style(theme.font(12))
        .axis_desc_style(theme.font(14))
        .draw()?;
    chart.draw_secondary_series(LineSeries::new(rates, LR_COLOR.stroke_width(2)))?;
    rows.push(legend_line("learning rate", LR_COLOR.to_rgba(), 2));
    theme.legend(&chart, &rows, Corner::UpperRight)?;
    Ok(lines)
}

/// The series' training accuracy (thin) and test accuracy after each epoch (thick, with its
/// points) against the chosen x axis. Returns the training accuracy's lines.
pub fn draw_accuracy<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    series: &[Series],
    options: &ChartOptions,
    theme: &ChartTheme,
) -> Drawn<DB> {
    let axis = options.x_axis;
    let training = each_run(series, |run| interval_points(run, axis, |i| i.accuracy));
    let test = each_run(series, |run| test_points(run, axis));
    let smoothing = options.smoothing();
    let training_curves: Vec<Curve> = training.iter().map(|runs| Curve::of(runs)).collect();
    let test_curves: Vec<Curve> = test.iter().map(|runs| Curve::of(runs)).collect();
    // From 90 % unless a curve starts lower, in steps of 10.
    let lowest = training_curves
        .iter()
        .map(|c| smoothed_by(&c.mean, smoothing))
        .chain(test_curves.iter().map(|c| c.low.clone()))
        .flatten()
        .map(|p| p.1)
        .fold(90.0, f64::min);
    let low = (lowest / 10.0).floor().max(0.0) * 10.0;
    let all: Vec<Vec<(f64, f64)>> = training.iter().chain(&test).flatten().cloned().collect();
    let frame = Frame {
        caption: "Accuracy",
        left: 50,
        right: false,
    };
    let mut chart = frame.build(area, theme, 0.0..x_extent(series, axis, &all), low..100.0)?;
    let run = alone(series);
    let y = match run {
        Some(_) => "%",
        None => "% (thin: training, dots: test)",
    };
    theme.mesh(&mut chart, axis_name(axis), y)?;
    let detailed = series.len() <= DETAILED_SERIES;
    let mut lines = Vec::new();
    for (i, s) in series.iter().enumerate() {
        // A run alone has a colour a curve; runs overlaid, a colour a run, training thin and
        // test thick.
        let ((training_color, training_width), (test_color, test_width)) = match run {
            Some(_) => ((TRAINING_ACCURACY_COLOR, 2), (TEST_ACCURACY_COLOR, 2)),
            None => ((s.color, 1), (s.color, 3)),
        };
        let runs = s.runs.len();
        let training = &training_curves[i];
        let style = (training_width, detailed);
        lines.push(draw_curve(
            &mut chart,
            training,
            (runs, training_color),
            smoothing,
            style,
        )?);
        let test = &test_curves[i];
        draw_curve(
            &mut chart,
            test,
            (runs, test_color),
            0.0,
            (test_width, detailed),
        )?;
        if detailed {
            let dots = test
                .mean
                .iter()
                .map(|&p| Circle::new(p, 4, test_color.filled()));
            chart.draw_series(dots)?;
        }
    }
    let rows = match run {
        None => legend(series),
        Some(run) => {
            let training = (run.intervals.iter().any(|i| i.accuracy.is_finite()))
                .then(|| legend_line("training", TRAINING_ACCURACY_COLOR.to_rgba(), 2));
            let test = (!run.epochs.is_empty()).then(|| LegendRow {
                label: "test".into(),
                mark: Mark::Dot(TEST_ACCURACY_COLOR),
            });
            training.into_iter().chain(test).collect()
        }
    };
    theme.legend(&chart, &rows, Corner::LowerRight)?;
    Ok(lines)
}

/// Both charts side by side as an SVG document: what `webtrain compare` writes.
pub fn render_svg(series: &[Series], options: &ChartOptions) -> Result<String, ChartError> {
    side_by_side_svg((1200, 480), |left, right, theme| {
        draw_loss(left, series, options, theme)?;
        draw_accuracy(right, series, options, theme).map(|_| ())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;
    use crate::runs::tests::run;

    fn drawn<'a>(label: &str, color: usize, runs: Vec<&'a RunMetrics>) -> Series<'a> {
        Series {
            label: label.to_string(),
            color: PALETTE[color],
            runs,
        }
    }

    fn hex(color: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", color.0, color.1, color.2)
    }

    #[test]
    fn each_run_has_its_colour_and_its_name_in_the_legend() {
        let a = run("lr 0.01", TrainConfig::default(), 2.0, &[97.0, 98.0]);
        let b = run("lr 0.1", TrainConfig::default(), 3.0, &[96.0, 97.5]);
        let shown = [
            drawn("lr 0.01", 0, vec![&a.metrics]),
            drawn("lr 0.1", 1, vec![&b.metrics]),
        ];
        let svg = render_svg(&shown, &ChartOptions::default()).unwrap();
        let text = |t: &str| svg.matches(&format!(">\n{t}\n</text>")).count();
        // Each name in both charts' legends.
        assert_eq!((text("lr 0.01"), text("lr 0.1")), (2, 2), "{svg}");
        for color in [PALETTE[0], PALETTE[1]] {
            assert!(
                svg.contains(&format!("stroke=\"{}\"", hex(color))),
                "{}",
                hex(color)
            );
        }
        assert_eq!(text("epoch"), 2);
    }

    #[test]
    fn smoothing_0_draws_the_raw_values_exactly() {
        let a = run("a", TrainConfig::default(), 2.0, &[97.0]);
        let points = interval_points(&a.metrics, XAxis::Epoch, |i| i.loss);
        assert_eq!(smoothed_by(&points, 0.0), points);
        let smoothed = smoothed_by(&points, 0.9);
        assert_ne!(smoothed, points);
        let first = (smoothed[0].1 - points[0].1).abs();
        assert!(
            first < 1e-12,
            "debiased: the first point is the data's, off by {first}"
        );
        let options = ChartOptions {
            smoothing: 0.0,
            ..ChartOptions::default()
        };
        let svg = render_svg(&[drawn("a", 0, vec![&a.metrics])], &options).unwrap();
        assert!(
            !svg.contains("opacity=\"0.3\""),
            "no faint raw curve under a raw one"
        );
        // Out of range: brought within 0 to 0.99.
        let wild = ChartOptions {
            smoothing: 7.0,
            ..ChartOptions::default()
        };
        assert_eq!(wild.smoothing(), 0.99);
        assert_eq!(
            ChartOptions {
                smoothing: f64::NAN,
                ..wild
            }
            .smoothing(),
            0.0
        );
    }

    #[test]
    fn the_x_axis_is_epochs_steps_or_time() {
        let a = run("a", TrainConfig::default(), 2.0, &[97.0, 98.0]);
        let xs = |axis| -> Vec<f64> {
            let points = test_points(&a.metrics, axis);
            points.iter().map(|p| p.0).collect()
        };
        assert_eq!(xs(XAxis::Epoch), [1.0, 2.0]);
        assert_eq!(xs(XAxis::Step), [100.0, 200.0]);
        assert_eq!(xs(XAxis::Time), [5.0, 10.0]);
        for (axis, name) in [(XAxis::Step, "step"), (XAxis::Time, "training time (s)")] {
            let options = ChartOptions {
                x_axis: axis,
                ..ChartOptions::default()
            };
            let svg = render_svg(&[drawn("a", 0, vec![&a.metrics])], &options).unwrap();
            assert_eq!(svg.matches(&format!(">\n{name}\n</text>")).count(), 2);
        }
    }

    #[test]
    fn a_log_axis_labels_losses_by_powers_of_ten() {
        let a = run("a", TrainConfig::default(), 20.0, &[97.0]);
        let options = ChartOptions {
            log_loss: true,
            ..ChartOptions::default()
        };
        let svg = render_svg(&[drawn("a", 0, vec![&a.metrics])], &options).unwrap();
        assert!(svg.contains("cross-entropy (log scale)"));
        assert!(
            svg.contains(">\n1\n</text>") && svg.contains(">\n0.1\n</text>"),
            "{svg}"
        );
    }

    #[test]
    fn runs_differing_by_seed_draw_as_their_mean_with_a_band() {
        let a = run("a", TrainConfig::default(), 2.0, &[97.0]);
        let b = run("b", TrainConfig::default(), 4.0, &[98.0]);
        let per_run = [&a, &b].map(|r| interval_points(&r.metrics, XAxis::Epoch, |i| i.loss));
        let curve = Curve::of(&per_run);
        assert_eq!(curve.mean[0].1, (per_run[0][0].1 + per_run[1][0].1) / 2.0);
        assert_eq!(
            (curve.low[0].1, curve.high[0].1),
            (per_run[0][0].1, per_run[1][0].1)
        );
        let svg = render_svg(
            &[drawn("lr 0.01", 2, vec![&a.metrics, &b.metrics])],
            &ChartOptions::default(),
        )
        .unwrap();
        assert!(svg.contains("lr 0.01 (mean of 2)"));
        assert!(svg.contains("<polygon"), "the band");
    }

    #[test]
    fn a_legend_of_many_runs_names_a_dozen_and_counts_the_rest() {
        let a = run("a", TrainConfig::default(), 2.0, &[97.0]);
        let many: Vec<Series> = (0..30)
            .map(|i| drawn(&format!("run {i}"), i % 10, vec![&a.metrics]))
            .collect();
        let rows = legend(&many);
        assert_eq!(rows.len(), 12);
        assert_eq!(rows[10].label, "run 10");
        assert_eq!(rows[11].label, "and 19 more");
        assert_eq!(legend(&many[..12]).len(), 12);
    }
}
