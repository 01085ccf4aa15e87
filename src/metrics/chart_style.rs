//! What every chart shares: the theme's colours, the mesh, the legend, and the errors drawing
//! gives.

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
        chart
            .configure_mesh()
            .x_desc(x)
            .y_desc(y)
            .axis_style(self.text)
            .bold_line_style(self.grid)
            // Light lines between the labelled ones: more to draw at each redraw, little to read.
            .light_line_style(TRANSPARENT)
            .label_style(self.font(13))
            .axis_desc_style(self.font(14))
            .draw()
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
