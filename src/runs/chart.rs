//! Runs overlaid on one loss chart and one accuracy chart, each in its own colour and named in
//! the legend; runs that differ only by seed may be drawn as their mean, with a band for their
//! spread. Smoothing, a logarithmic loss axis and the x axis (epochs, steps or training time)
//! are the viewer's.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::metrics::RunMetrics;
use crate::metrics::chart::{side_by_side_svg, smoothed_by};
use crate::metrics::chart_style::{ChartError, ChartTheme, Corner, LegendRow, Mark};
use crate::runs::RunRecord;
use crate::runs::table::{differing_settings, seed_groups, settings_text};

/// Tableau's ten colours, as TensorBoard and matplotlib use them: a run's is its place in the
/// list of runs shown, modulo ten.
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// What the x axis counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum XAxis {
    #[default]
    Epoch,
    Step,
    /// Training time in seconds.
    Time,
}

/// How the runs are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChartOptions {
    /// How much each point of a curve keeps of the average before it, 0 to 0.99: an
    /// exponential moving average, debiased at the start, as TensorBoard smooths. 0 draws the
    /// raw values.
    pub smoothing: f64,
    pub log_loss: bool,
    pub x_axis: XAxis,
}

impl Default for ChartOptions {
    fn default() -> Self {
        Self {
            smoothing: 0.6,
            log_loss: false,
            x_axis: XAxis::Epoch,
        }
    }
}

impl ChartOptions {
    /// The smoothing the charts use: out-of-range values are brought within 0 to 0.99.
    fn smoothing(&self) -> f64 {
        match self.smoothing.is_finite() {
            true => self.smoothing.clamp(0.0, 0.99),
            false => 0.0,
        }
    }
}

/// One curve of the chart: a run, or runs that differ only by seed drawn as their mean.
pub struct Series<'a> {
    pub label: String,
    pub color: RGBColor,
    /// One run, or several drawn as their mean and spread.
    pub runs: Vec<&'a RunMetrics>,
}

/// The series for `runs` in their order, each in the palette's colour of its place: a run
/// each, or with `mean_seeds` one for each group of runs that differ only by seed, named by the
/// settings in which it differs from the others (or by its first run).
pub fn series<'a>(runs: &[&'a RunRecord], mean_seeds: bool) -> Vec<Series<'a>> {
    let groups = match mean_seeds {
        true => seed_groups(runs),
        false => Vec::new(),
    };
    let differing: Vec<_> = differing_settings(runs)
        .into_iter()
        .filter(|setting| setting.name != "seed")
        .collect();
    let mut shown = Vec::new();
    for (index, run) in runs.iter().enumerate() {
        let group = groups.iter().find(|members| members.contains(&index));
        let (label, members) = match group {
            Some(members) if members[0] != index => continue,
            Some(members) => {
                let label = match differing.is_empty() {
                    true => run.name.clone(),
                    false => settings_text(run, &differing),
                };
                (label, members.iter().map(|&i| &runs[i].metrics).collect())
            }
            None => (run.name.clone(), vec![&run.metrics]),
        };
        shown.push(Series {
            label,
            color: PALETTE[shown.len() % PALETTE.len()],
            runs: members,
        });
    }
    shown
}

/// A series' points: the mean over its runs, and the lowest and highest of them.
struct Curve {
    mean: Vec<(f64, f64)>,
    low: Vec<(f64, f64)>,
    high: Vec<(f64, f64)>,
}

impl Curve {
    /// The runs' points index by index (runs with the same settings have them at the same
    /// places), as far as the shortest goes; x is the runs' mean (time differs a little).
    fn of(runs: &[Vec<(f64, f64)>]) -> Self {
        let len = runs.iter().map(Vec::len).min().unwrap_or(0);
        let n = runs.len().max(1) as f64;
        let (mut mean, mut low, mut high) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..len {
            let x = runs.iter().map(|points| points[i].0).sum::<f64>() / n;
            let ys = runs.iter().map(|points| points[i].1);
            mean.push((x, ys.clone().sum::<f64>() / n));
            low.push((x, ys.clone().fold(f64::INFINITY, f64::min)));
            high.push((x, ys.fold(f64::NEG_INFINITY, f64::max)));
        }
        Self { mean, low, high }
    }
}

/// Where an interval or an epoch's end falls on the x axis.
fn x_of(axis: XAxis, epochs: f64, step: usize, secs: f64) -> f64 {
    match axis {
        XAxis::Epoch => epochs,
        XAxis::Step => step as f64,
        XAxis::Time => secs,
    }
}

/// A run's training loss (or accuracy) of every few steps; non-finite points are left out.
fn interval_points(
    run: &RunMetrics,
    axis: XAxis,
    value: impl Fn(&crate::train::interval::IntervalReport) -> f32,
) -> Vec<(f64, f64)> {
    run.intervals
        .iter()
        .map(|i| {
            (
                x_of(axis, i.epochs, i.step, i.training_secs),
                f64::from(value(i)),
            )
        })
        .filter(|p| p.1.is_finite())
        .collect()
}

/// A run's test accuracy after each epoch, where the epoch's last interval ends.
fn test_points(run: &RunMetrics, axis: XAxis) -> Vec<(f64, f64)> {
    run.epochs
        .iter()
        .filter_map(|report| {
            let last = run.intervals.iter().rev().find(|i| i.epoch == report.epoch);
            let x = match (axis, last) {
                (XAxis::Epoch, _) => report.epoch as f64,
                (_, Some(i)) => x_of(axis, i.epochs, i.step, i.training_secs),
                (_, None) => return None,
            };
            Some((x, report.accuracy())).filter(|p| p.1.is_finite())
        })
        .collect()
}

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

/// `points` of each run of each series.
fn each_run(
    series: &[Series],
    points: impl Fn(&RunMetrics) -> Vec<(f64, f64)>,
) -> Vec<Vec<Vec<(f64, f64)>>> {
    let of_series = |s: &Series| s.runs.iter().map(|run| points(run)).collect();
    series.iter().map(of_series).collect()
}

fn axis_name(axis: XAxis) -> &'static str {
    match axis {
        XAxis::Epoch => "epoch",
        XAxis::Step => "step",
        XAxis::Time => "training time (s)",
    }
}

/// The x extent of every series' points, a little past the last.
fn x_extent(curves: &[Vec<(f64, f64)>]) -> f64 {
    let last = curves.iter().flatten().map(|p| p.0).fold(0.0, f64::max);
    match last > 0.0 {
        true => last * 1.02,
        false => 1.0,
    }
}

/// What a chart drew: each series' line, as smoothed.
pub type Drawn<DB> =
    Result<Vec<Vec<(f64, f64)>>, DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// Past this many series a chart leaves out what would only crowd it, and cost a long draw:
/// the faint raw curves under smoothed ones, and the test accuracy's dots.
const DETAILED_SERIES: usize = 12;

/// Draws a curve: with smoothing (and `faint`), the raw mean faint and the smoothed one over
/// it; a band between the smoothed lowest and highest where it stands for several runs.
/// Returns the line.
fn draw_curve<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
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
        true => (loss > 0.0).then(|| loss.log10()).unwrap_or(f32::NAN),
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
    let mut chart = ChartBuilder::on(area)
        .caption("Training loss", theme.font(18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..x_extent(&all), bottom..top)?;
    let log = options.log_loss;
    chart
        .configure_mesh()
        .x_desc(axis_name(axis))
        .y_desc(match log {
            true => "cross-entropy (log scale)",
            false => "cross-entropy",
        })
        .y_label_formatter(&|y| match log {
            true => power_of_ten(*y),
            false => format!("{y:.1}"),
        })
        .axis_style(theme.text)
        .bold_line_style(theme.grid)
        .light_line_style(TRANSPARENT)
        .label_style(theme.font(13))
        .axis_desc_style(theme.font(14))
        .draw()?;
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
    theme.legend(&chart, &legend(series), Corner::UpperRight)?;
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
    let mut chart = ChartBuilder::on(area)
        .caption("Accuracy", theme.font(18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..x_extent(&all), low..100.0)?;
    theme.mesh(
        &mut chart,
        axis_name(axis),
        "% (thin: training, dots: test)",
    )?;
    let detailed = series.len() <= DETAILED_SERIES;
    let mut lines = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let what = (s.runs.len(), s.color);
        let training = &training_curves[i];
        lines.push(draw_curve(
            &mut chart,
            training,
            what,
            smoothing,
            (1, detailed),
        )?);
        let test = &test_curves[i];
        draw_curve(&mut chart, test, what, 0.0, (3, detailed))?;
        if detailed {
            let dots = test
                .mean
                .iter()
                .map(|&p| Circle::new(p, 4, s.color.filled()));
            chart.draw_series(dots)?;
        }
    }
    theme.legend(&chart, &legend(series), Corner::LowerRight)?;
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
    fn seed_groups_become_one_series_named_by_what_differs() {
        let config = |lr: f64, seed: u64| TrainConfig {
            lr,
            seed,
            ..TrainConfig::default()
        };
        let a = run("a", config(0.01, 1), 2.0, &[97.0]);
        let b = run("b", config(0.1, 1), 2.0, &[97.0]);
        let c = run("c", config(0.01, 2), 2.0, &[97.0]);
        let shown = series(&[&a, &b, &c], true);
        let labels: Vec<(&str, usize)> = shown
            .iter()
            .map(|s| (s.label.as_str(), s.runs.len()))
            .collect();
        assert_eq!(labels, [("lr 0.01", 2), ("b", 1)]);
        assert_eq!((shown[0].color, shown[1].color), (PALETTE[0], PALETTE[1]));
        let each: Vec<String> = series(&[&a, &b, &c], false)
            .into_iter()
            .map(|s| s.label)
            .collect();
        assert_eq!(each, ["a", "b", "c"]);
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
