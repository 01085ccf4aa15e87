//! The run's charts: training loss per log interval and test accuracy per epoch, drawn with
//! plotters on any backend (SVG for the CLI's loss.svg).

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use thiserror::Error;

use crate::metrics::RunMetrics;

const SIZE: (u32, u32) = (960, 400);
const LOSS_COLOR: RGBColor = RGBColor(31, 119, 180);
const ACCURACY_COLOR: RGBColor = RGBColor(214, 39, 40);
const LR_CHANGE_COLOR: RGBColor = RGBColor(44, 160, 44);

pub type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;
/// One of the charts, drawn on any plotters backend: SVG natively, a canvas in the page.
pub type DrawFn<DB> = fn(&DrawingArea<DB, Shift>, &RunMetrics, &ChartTheme) -> DrawResult<DB>;

/// The colours around the series, for a light or a dark page; the series keep theirs.
#[derive(Clone, Copy, Debug)]
pub struct ChartTheme {
    pub background: RGBColor,
    pub text: RGBColor,
    pub grid: RGBColor,
}

impl ChartTheme {
    pub const LIGHT: Self = Self {
        background: WHITE,
        text: RGBColor(29, 35, 42),
        grid: RGBColor(208, 215, 222),
    };
    /// The page's dark panel (`web/style.css`).
    pub const DARK: Self = Self {
        background: RGBColor(22, 27, 34),
        text: RGBColor(230, 237, 243),
        grid: RGBColor(48, 54, 61),
    };

    fn font(&self, size: u32) -> TextStyle<'static> {
        ("sans-serif", size).into_font().color(&self.text)
    }

    /// The mesh, labels and axis descriptions in this theme's colours.
    fn mesh<DB, X, Y, XT, YT>(
        &self,
        chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
        x: &str,
        y: &str,
    ) -> DrawResult<DB>
    where
        DB: DrawingBackend,
        X: Ranged<ValueType = XT> + ValueFormatter<XT>,
        Y: Ranged<ValueType = YT> + ValueFormatter<YT>,
    {
        chart
            .configure_mesh()
            .x_desc(x)
            .y_desc(y)
            .axis_style(self.text)
            .bold_line_style(self.grid)
            .light_line_style(self.grid.mix(0.4))
            .label_style(self.font(13))
            .axis_desc_style(self.font(14))
            .draw()
    }
}

/// Training loss against step.
pub fn draw_loss<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    metrics: &RunMetrics,
    theme: &ChartTheme,
) -> DrawResult<DB> {
    let max_step = metrics
        .losses
        .last()
        .map_or(0, |p| p.step)
        .max(metrics.total_steps)
        .max(1);
    let max_loss = metrics.losses.iter().map(|p| p.loss).fold(0.1f32, f32::max);
    let mut chart = ChartBuilder::on(area)
        .caption("Training loss", theme.font(18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(0..max_step + 1, 0f32..max_loss * 1.05)?;
    theme.mesh(&mut chart, "step", "cross-entropy")?;
    let points = || metrics.losses.iter().map(|p| (p.step, p.loss));
    chart.draw_series(LineSeries::new(points(), LOSS_COLOR.stroke_width(2)))?;
    // Markers too: a run with one log point so far has no line yet.
    chart.draw_series(points().map(|p| Circle::new(p, 3, LOSS_COLOR.filled())))?;
    // Each change of the learning rate: a vertical line at its first step, labelled.
    let top = max_loss * 1.05;
    for change in &metrics.lr_changes {
        chart.draw_series(LineSeries::new(
            [(change.step, 0.0), (change.step, top)],
            LR_CHANGE_COLOR.stroke_width(2),
        ))?;
        chart.draw_series([Text::new(
            format!("lr {}", change.lr),
            (change.step, top * 0.95),
            ("sans-serif", 14).into_font().color(&LR_CHANGE_COLOR),
        )])?;
    }
    Ok(())
}

/// Test accuracy against epoch.
pub fn draw_accuracy<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    metrics: &RunMetrics,
    theme: &ChartTheme,
) -> DrawResult<DB> {
    let epochs = metrics.config.epochs.max(1);
    let low = metrics
        .epochs
        .iter()
        .map(|e| e.accuracy())
        .fold(90.0, f64::min)
        .floor();
    let mut chart = ChartBuilder::on(area)
        .caption("Test accuracy", theme.font(18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(0..epochs + 1, low..100.0)?;
    theme.mesh(&mut chart, "epoch", "%")?;
    let points: Vec<(usize, f64)> = metrics
        .epochs
        .iter()
        .map(|e| (e.epoch, e.accuracy()))
        .collect();
    chart.draw_series(LineSeries::new(
        points.iter().copied(),
        ACCURACY_COLOR.stroke_width(2),
    ))?;
    chart.draw_series(
        points
            .iter()
            .map(|&p| Circle::new(p, 4, ACCURACY_COLOR.filled())),
    )?;
    Ok(())
}

#[derive(Debug, Error)]
#[error("drawing the chart failed: {0}")]
pub struct ChartError(String);

/// Both charts side by side as an SVG document.
pub fn render_svg(metrics: &RunMetrics) -> Result<String, ChartError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let draw = || -> DrawResult<SVGBackend<'_>> {
            let theme = ChartTheme::LIGHT;
            root.fill(&theme.background)?;
            let (left, right) = root.split_horizontally(SIZE.0 / 2);
            draw_loss(&left, metrics, &theme)?;
            draw_accuracy(&right, metrics, &theme)?;
            root.present()
        };
        draw().map_err(|e| ChartError(e.to_string()))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;
    use crate::metrics::LossPoint;
    use crate::train::EpochReport;

    #[test]
    fn svg_shows_both_series() {
        let mut metrics = RunMetrics::new(TrainConfig::default(), "cpu".into());
        metrics.losses = (1..=5)
            .map(|s| LossPoint {
                step: s * 100,
                epoch: 1,
                loss: 2.0 / s as f32,
            })
            .collect();
        metrics.epochs = vec![EpochReport {
            epoch: 1,
            test_loss: 0.1,
            correct: 9800,
            total: 10000,
            confusion: [[0; crate::train::CLASSES]; crate::train::CLASSES],
        }];
        let svg = render_svg(&metrics).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..50.min(svg.len())]);
        assert!(svg.contains("Training loss") && svg.contains("Test accuracy"));
        assert!(svg.contains("<polyline"), "a loss line is drawn");
        assert!(svg.contains("<circle"), "an accuracy point is drawn");
        assert!(!svg.contains("lr 0.05"));
        metrics.lr_changes = vec![crate::metrics::LrChange {
            step: 250,
            lr: 0.05,
        }];
        let svg = render_svg(&metrics).unwrap();
        assert!(svg.contains("lr 0.05"), "the change is labelled");
    }
}
