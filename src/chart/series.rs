//! What a chart of runs draws: each run, or runs that differ only by seed as their mean, in a
//! colour of its own (`Series`); how it is drawn (`ChartOptions`); and each series' points on
//! the x axis chosen, as a mean with its lowest and highest.

use plotters::style::RGBColor;
use serde::{Deserialize, Serialize};

use crate::metrics::RunMetrics;
use crate::runs::RunRecord;
use crate::runs::table::{differing_settings, seed_groups, settings_text};
use crate::train::interval::IntervalReport;

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
    pub(super) fn smoothing(&self) -> f64 {
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
pub(super) struct Curve {
    pub(super) mean: Vec<(f64, f64)>,
    pub(super) low: Vec<(f64, f64)>,
    pub(super) high: Vec<(f64, f64)>,
}

impl Curve {
    /// The runs' points index by index (runs with the same settings have them at the same
    /// places), as far as the shortest goes; x is the runs' mean (time differs a little).
    pub(super) fn of(runs: &[Vec<(f64, f64)>]) -> Self {
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
pub(super) fn x_of(axis: XAxis, epochs: f64, step: usize, secs: f64) -> f64 {
    match axis {
        XAxis::Epoch => epochs,
        XAxis::Step => step as f64,
        XAxis::Time => secs,
    }
}

/// A run's training loss (or accuracy) of every few steps; non-finite points are left out.
pub(super) fn interval_points(
    run: &RunMetrics,
    axis: XAxis,
    value: impl Fn(&IntervalReport) -> f32,
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
pub(super) fn test_points(run: &RunMetrics, axis: XAxis) -> Vec<(f64, f64)> {
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

/// `points` of each run of each series.
pub(super) fn each_run(
    series: &[Series],
    points: impl Fn(&RunMetrics) -> Vec<(f64, f64)>,
) -> Vec<Vec<Vec<(f64, f64)>>> {
    let of_series = |s: &Series| s.runs.iter().map(|run| points(run)).collect();
    series.iter().map(of_series).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;
    use crate::runs::tests::run;

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
}
