//! One run's charts, the CLI's loss.svg and the page's while a run goes: training loss, and
//! training and test accuracy, against epoch. A run alone is an overlay of one.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::chart::overlay::{self, ChartOptions, PALETTE, Series, XAxis};
use crate::chart::style::{ChartError, ChartTheme, DrawResult, side_by_side_svg};
use crate::metrics::RunMetrics;

const SIZE: (u32, u32) = (960, 400);

/// One of the charts, drawn on any plotters backend: SVG natively, a canvas in the page.
pub type DrawFn<DB> = fn(&DrawingArea<DB, Shift>, &RunMetrics, &ChartTheme) -> DrawResult<DB>;

/// How a run alone is drawn: smoothed a little more than overlaid runs, whose curves cross.
const OPTIONS: ChartOptions = ChartOptions {
    smoothing: 0.8,
    log_loss: false,
    x_axis: XAxis::Epoch,
};

fn alone(metrics: &RunMetrics) -> [Series<'_>; 1] {
    [Series {
        label: String::new(),
        color: PALETTE[0],
        runs: vec![metrics],
    }]
}

/// Training loss of every few steps against epoch, and the learning rate (never smoothed, on
/// its own axis) when it moves.
pub fn draw_loss<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    metrics: &RunMetrics,
    theme: &ChartTheme,
) -> DrawResult<DB> {
    overlay::draw_loss(area, &alone(metrics), &OPTIONS, theme).map(|_| ())
}

/// Test accuracy after each epoch, and training accuracy of every few steps, against epoch.
pub fn draw_accuracy<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    metrics: &RunMetrics,
    theme: &ChartTheme,
) -> DrawResult<DB> {
    overlay::draw_accuracy(area, &alone(metrics), &OPTIONS, theme).map(|_| ())
}

/// Both charts side by side as an SVG document.
pub fn render_svg(metrics: &RunMetrics) -> Result<String, ChartError> {
    side_by_side_svg(SIZE, |left, right, theme| {
        draw_loss(left, metrics, theme)?;
        draw_accuracy(right, metrics, theme)
    })
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
            confusion: Box::new([[0; crate::model::CLASSES]; crate::model::CLASSES]),
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
        assert_eq!(lines("#D62728", "1"), 1);
        assert_eq!(text("each 10 steps"), 1, "what a faint point is");
        assert!(svg.contains("<circle"), "points are drawn");
        assert!(!svg.contains("lr 0.05") && !svg.contains("learning rate"));
        metrics.lr_changes = vec![crate::metrics::LrChange {
            step: 250,
            lr: 0.05,
        }];
        let svg = render_svg(&metrics).unwrap();
        assert!(svg.contains("lr 0.05"), "the change is labelled");
    }

    #[test]
    fn a_scheduled_rate_is_drawn_on_its_own_axis() {
        let mut metrics = RunMetrics::new(TrainConfig::default(), "cpu".into());
        metrics.total_steps = 1000;
        metrics.intervals = (1..=5).map(|s| interval(s * 10)).collect();
        metrics.losses = (1..=5)
            .map(|s| crate::metrics::LossPoint {
                step: s * 10,
                epoch: 1,
                loss: 1.0,
                lr: 0.01 / s as f64,
            })
            .collect();
        let svg = render_svg(&metrics).unwrap();
        let text = |t: &str| svg.matches(&format!(">\n{t}\n</text>")).count();
        assert_eq!(text("learning rate"), 2, "its axis and its legend");
        assert!(svg.contains("stroke=\"#9467BD\""), "its line");
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
        let labels: Vec<&str> = svg
            .split("</text>")
            .filter_map(|t| t.rsplit('>').next())
            .map(str::trim)
            .collect();
        assert!(
            labels.contains(&"2.0"),
            "the x axis spans the run's 2 epochs"
        );
        let loss_axis: Vec<&str> = labels[3..]
            .iter()
            .take_while(|l| **l != "0.0")
            .copied()
            .collect();
        let distinct: std::collections::BTreeSet<&&str> = loss_axis.iter().collect();
        assert!(loss_axis.len() > 3, "{labels:?}");
        assert_eq!(distinct.len(), loss_axis.len(), "{loss_axis:?}");
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
