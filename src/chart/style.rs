//! What every chart shares: the theme's colours, the mesh, the legend, smoothing, two charts
//! side by side as an SVG document, and the errors drawing gives.

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use thiserror::Error;

pub type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

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

    pub(crate) fn font(&self, size: u32) -> TextStyle<'static> {
        ("sans-serif", size).into_font().color(&self.text)
    }

    /// The mesh, labels and axis descriptions in this theme's colours.
    pub(crate) fn mesh<DB, X, Y, XT, YT>(
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
        self.mesh_labelled(chart, x, y, None)
    }

    /// [`Self::mesh`], the y axis's values labelled by `y_labels` where given.
    pub(crate) fn mesh_labelled<DB, X, Y, XT, YT>(
        &self,
        chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
        x: &str,
        y: &str,
        y_labels: Option<&dyn Fn(&YT) -> String>,
    ) -> DrawResult<DB>
    where
        DB: DrawingBackend,
        X: Ranged<ValueType = XT> + ValueFormatter<XT>,
        Y: Ranged<ValueType = YT> + ValueFormatter<YT>,
    {
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(x)
            .y_desc(y)
            .axis_style(self.text)
            .bold_line_style(self.grid)
            // Light lines between the labelled ones: more to draw at each redraw, little to read.
            .light_line_style(TRANSPARENT)
            .label_style(self.font(13))
            .axis_desc_style(self.font(14));
        if let Some(y_labels) = y_labels {
            mesh.y_label_formatter(y_labels);
        }
        mesh.draw()
    }

    /// The series' legend in a corner of the plotting area, in this theme's colours. Drawn here
    /// rather than by plotters' series labels, which measure their text with the font alone: in
    /// a browser, a forced layout of the page for each label. This measures through the backend.
    pub(crate) fn legend<DB, X, Y>(
        &self,
        chart: &ChartContext<'_, DB, Cartesian2d<X, Y>>,
        rows: &[LegendRow],
        corner: Corner,
    ) -> DrawResult<DB>
    where
        DB: DrawingBackend,
        X: Ranged,
        Y: Ranged,
    {
        const INSET: i32 = 10;
        const PADDING: i32 = 6;
        const MARK: i32 = 18;
        const GAP: i32 = 6;
        if rows.is_empty() {
            return Ok(());
        }
        let area = chart.plotting_area().strip_coord_spec();
        let font = self.font(13);
        let mut width = 0;
        let mut row_height = 0;
        for row in rows {
            let (w, h) = area.estimate_text_size(&row.label, &font)?;
            width = width.max(w as i32);
            row_height = row_height.max(h as i32 + 2);
        }
        let (box_width, box_height) = (
            2 * PADDING + MARK + GAP + width,
            2 * PADDING + row_height * rows.len() as i32,
        );
        let (area_width, area_height) = area.dim_in_pixel();
        let left = area_width as i32 - INSET - box_width;
        let top = match corner {
            Corner::UpperRight => INSET,
            Corner::LowerRight => area_height as i32 - INSET - box_height,
        };
        let bounds = [(left, top), (left + box_width, top + box_height)];
        area.draw(&Rectangle::new(bounds, self.background.mix(0.85).filled()))?;
        area.draw(&Rectangle::new(bounds, self.grid))?;
        let label_font = font.pos(Pos::new(HPos::Left, VPos::Center));
        for (i, row) in rows.iter().enumerate() {
            let y = top + PADDING + row_height * i as i32 + row_height / 2;
            let x = left + PADDING;
            match row.mark {
                Mark::Line { color, width } => area.draw(&PathElement::new(
                    [(x, y), (x + MARK, y)],
                    color.stroke_width(width),
                ))?,
                Mark::Dot(color) => {
                    area.draw(&Circle::new((x + MARK / 2, y), 4, color.filled()))?
                }
            }
            area.draw(&Text::new(
                row.label.as_str(),
                (x + MARK + GAP, y),
                label_font.clone(),
            ))?;
        }
        Ok(())
    }
}

/// The corner of the plotting area a legend sits in.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Corner {
    UpperRight,
    LowerRight,
}

/// What a legend row shows before its label: the series' line, or its points' dot.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Mark {
    Line { color: RGBAColor, width: u32 },
    Dot(RGBColor),
}

#[derive(Clone, Debug)]
pub(crate) struct LegendRow {
    pub(crate) label: String,
    pub(crate) mark: Mark,
}

#[derive(Debug, Error)]
#[error("drawing the chart failed: {0}")]
pub struct ChartError(pub(crate) String);

/// The curve through `points` smoothed by `smoothing` (0 to below 1): each point keeps that
/// share of the average before it, an exponential moving average debiased at the start, as
/// TensorBoard smooths. 0 gives the points themselves.
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

    #[test]
    fn the_smoothed_curve_starts_on_the_data_and_follows_it() {
        let flat = smoothed_by(&[(0.0, 2.0), (1.0, 2.0), (2.0, 2.0)], 0.8);
        assert!(flat.iter().all(|p| (p.1 - 2.0).abs() < 1e-12), "{flat:?}");
        let step: Vec<(f64, f64)> = (0..40).map(|x| (x as f64, f64::from(x >= 10))).collect();
        let curve = smoothed_by(&step, 0.8);
        assert_eq!(curve[9].1, 0.0);
        assert!(curve[10].1 > 0.1 && curve[10].1 < 0.5, "{:?}", curve[10]);
        assert!(curve.windows(2).skip(10).all(|w| w[0].1 < w[1].1));
        assert!(curve[39].1 > 0.99);
        assert_eq!(smoothed_by(&step, 0.0), step);
    }
}
