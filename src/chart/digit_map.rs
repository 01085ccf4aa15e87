//! Where the digits lie: each test digit a dot on fc1's first two principal axes, coloured by
//! its label (SVG for `webtrain inspect`, a canvas in the page, which also needs each dot's
//! place to find the digit under the pointer).

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::chart::series::PALETTE;
use crate::chart::style::{ChartError, ChartTheme, Corner, LegendRow, Mark, side_by_side_svg};
use crate::inspect::projector::DigitMap;
use crate::model::CLASSES;

/// One map's size, in the page and the SVG.
pub const SIZE: (u32, u32) = (520, 520);
const DOT: i32 = 3;

/// A label's colour.
pub fn label_color(label: u8) -> RGBColor {
    PALETTE[usize::from(label) % PALETTE.len()]
}

/// Draws `map` on `area` under `title`; each digit's place in the area's pixels, in the map's
/// order.
pub fn draw_digit_map<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    map: &DigitMap,
    title: &str,
    theme: &ChartTheme,
) -> Result<Vec<(i32, i32)>, DrawingAreaErrorKind<DB::ErrorType>> {
    // Whole numbers where the axes span more than a few units, tenths where less.
    let label = |span: f64| {
        move |v: &f64| match span > 5.0 {
            true => format!("{v:.0}"),
            false => format!("{v:.1}"),
        }
    };
    let extent = |axis: usize| {
        let values = map.points.iter().map(|p| f64::from(p[axis]));
        let low = values.clone().fold(f64::INFINITY, f64::min);
        let high = values.fold(f64::NEG_INFINITY, f64::max);
        match low < high {
            true => {
                let margin = (high - low) * 0.05;
                (low - margin)..(high + margin)
            }
            false => -1.0..1.0,
        }
    };
    let (x, y) = (extent(0), extent(1));
    let (x_label, y_label) = (label(x.end - x.start), label(y.end - y.start));
    let axis = |i: usize| {
        format!(
            "axis {} ({:.0}% of the variance)",
            i + 1,
            map.explained[i] * 100.0
        )
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, theme.font(17))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(45)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_desc(axis(0))
        .y_desc(axis(1))
        .axis_style(theme.text)
        .bold_line_style(theme.grid)
        .light_line_style(TRANSPARENT)
        .label_style(theme.font(12))
        .axis_desc_style(theme.font(13))
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .draw()?;
    let dots = map.points.iter().zip(&map.labels).map(|(point, label)| {
        let at = (f64::from(point[0]), f64::from(point[1]));
        Circle::new(at, DOT, label_color(*label).mix(0.8).filled())
    });
    chart.draw_series(dots)?;
    let legend: Vec<LegendRow> = (0..CLASSES as u8)
        .map(|label| LegendRow {
            label: label.to_string(),
            mark: Mark::Dot(label_color(label)),
        })
        .collect();
    theme.legend(&chart, &legend, Corner::UpperRight)?;
    let places = map.points.iter().map(|point| {
        let at = (f64::from(point[0]), f64::from(point[1]));
        chart.backend_coord(&at)
    });
    Ok(places.collect())
}

/// Two maps side by side, each under its title, as an SVG document.
pub fn render_svg(
    (left_title, left): (&str, &DigitMap),
    (right_title, right): (&str, &DigitMap),
) -> Result<String, ChartError> {
    let size = (SIZE.0 * 2, SIZE.1);
    side_by_side_svg(size, |left_area, right_area, theme| {
        draw_digit_map(left_area, left, left_title, theme)?;
        draw_digit_map(right_area, right, right_title, theme).map(|_| ())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_digit_is_a_dot_where_its_place_says() {
        let map = DigitMap {
            points: vec![[0.0, 0.0], [10.0, 5.0], [-4.0, 2.0]],
            labels: vec![3, 7, 3],
            explained: [0.4, 0.2],
        };
        let svg = render_svg(("Before", &map), ("After", &map)).unwrap();
        assert!(svg.contains("Before") && svg.contains("After"));
        assert!(svg.contains("axis 1 (40% of the variance)"));
        // Three dots each, and a legend dot a digit.
        assert_eq!(svg.matches("<circle").count(), 2 * (3 + 10), "{svg}");
        // The places found are inside the drawing, the rightmost digit rightmost.
        let mut canvas = String::new();
        let root = SVGBackend::with_string(&mut canvas, SIZE).into_drawing_area();
        let places = draw_digit_map(&root, &map, "", &ChartTheme::LIGHT).unwrap();
        assert!(
            places
                .iter()
                .all(|(x, y)| (0..520).contains(x) && (0..520).contains(y))
        );
        assert!(places[1].0 > places[0].0 && places[0].0 > places[2].0);
        assert!(
            places[1].1 < places[0].1,
            "higher values sit higher: {places:?}"
        );
    }
}
