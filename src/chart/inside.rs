//! One digit seen from inside the network, drawn on any plotters backend (SVG for `webtrain
//! inspect`, a canvas in the page): the digit and the saliency of a class over it, the ten
//! probabilities, conv1's filters, and each layer's maps: conv1, the first pooling, conv2, the
//! second pooling and fc1's units as a strip. Each map is drawn a square a value, by the
//! largest value of its layer: a ReLU's outputs from black (0) to white; the filters, which
//! have signs, from blue through the background to red.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::chart::style::{ChartError, ChartTheme, DrawResult};
use crate::data::IMAGE_SIDE;
use crate::inspect::inside::{Inside, Maps};
use crate::model::CLASSES;

/// The drawing's size: the page's canvas and the SVG's.
pub const SIZE: (u32, u32) = (960, 540);
const GAP: i32 = 4;
/// Maps a row, at most.
const COLUMNS: usize = 10;
const NEGATIVE: RGBColor = RGBColor(31, 119, 180);
const POSITIVE: RGBColor = RGBColor(214, 39, 40);
const GUESS: RGBColor = RGBColor(44, 160, 44);

/// How a layer's values become colours.
#[derive(Clone, Copy)]
enum Shade {
    /// 0 black to the largest white.
    Brightness { largest: f32 },
    /// Blue below 0, red above, the background at 0.
    Signed { largest: f32 },
}

impl Shade {
    fn of(values: &[f32], signed: bool) -> Self {
        let largest = values
            .iter()
            .filter(|v| v.is_finite())
            .fold(0.0_f32, |m, v| m.max(v.abs()))
            .max(f32::MIN_POSITIVE);
        match signed {
            true => Self::Signed { largest },
            false => Self::Brightness { largest },
        }
    }

    fn color(self, value: f32, theme: &ChartTheme) -> RGBColor {
        let mix = |from: RGBColor, to: RGBColor, share: f32| {
            let share = if share.is_finite() {
                share.clamp(0.0, 1.0)
            } else {
                1.0
            };
            let channel =
                |a: u8, b: u8| (f32::from(a) + (f32::from(b) - f32::from(a)) * share) as u8;
            RGBColor(
                channel(from.0, to.0),
                channel(from.1, to.1),
                channel(from.2, to.2),
            )
        };
        match self {
            Self::Brightness { largest } => mix(BLACK, WHITE, value / largest),
            Self::Signed { largest } if value < 0.0 => {
                mix(theme.background, NEGATIVE, -value / largest)
            }
            Self::Signed { largest } => mix(theme.background, POSITIVE, value / largest),
        }
    }
}

/// Draws `count` square grids of `side` (values row by row, one after the other) from `at`,
/// `scale` pixels a value, up to [`COLUMNS`] a row; their caption above. Returns the height
/// taken, caption included.
fn draw_grids<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (caption, at): (&str, (i32, i32)),
    maps: &Maps,
    (scale, shade): (i32, Shade),
    theme: &ChartTheme,
) -> Result<i32, DrawingAreaErrorKind<DB::ErrorType>> {
    let (x0, y0) = at;
    area.draw(&Text::new(caption.to_string(), (x0, y0), theme.font(14)))?;
    let top = y0 + 20;
    let cell = maps.side as i32 * scale;
    for index in 0..maps.count {
        let (row, column) = ((index / COLUMNS) as i32, (index % COLUMNS) as i32);
        let (left, up) = (x0 + column * (cell + GAP), top + row * (cell + GAP));
        draw_square(area, maps.map(index), maps.side, (left, up, scale), |v| {
            shade.color(v, theme)
        })?;
    }
    let rows = maps.count.div_ceil(COLUMNS) as i32;
    Ok(20 + rows * (cell + GAP))
}

/// One grid of `side` × `side` values at (`left`, `up`), `scale` pixels a value.
fn draw_square<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    values: &[f32],
    side: usize,
    (left, up, scale): (i32, i32, i32),
    color: impl Fn(f32) -> RGBColor,
) -> DrawResult<DB> {
    for (at, value) in values.iter().enumerate() {
        let (row, column) = ((at / side) as i32, (at % side) as i32);
        let (x, y) = (left + column * scale, up + row * scale);
        area.draw(&Rectangle::new(
            [(x, y), (x + scale, y + scale)],
            color(*value).filled(),
        ))?;
    }
    Ok(())
}

/// The digit, and beside it the saliency: the digit dimmed, the gradient's size over it in red.
fn draw_digit_and_saliency<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    inside: &Inside,
    (x0, y0): (i32, i32),
    theme: &ChartTheme,
) -> DrawResult<DB> {
    const SCALE: i32 = 4;
    let pixels: Vec<f32> = inside
        .pixels
        .iter()
        .map(|p| f32::from(*p) / 255.0)
        .collect();
    area.draw(&Text::new("The digit", (x0, y0), theme.font(14)))?;
    let gray = |v: f32| Shade::Brightness { largest: 1.0 }.color(v, theme);
    draw_square(area, &pixels, IMAGE_SIDE, (x0, y0 + 20, SCALE), gray)?;
    let x1 = x0 + IMAGE_SIDE as i32 * SCALE + 16;
    let caption = match inside.smoothing.copies > 1 {
        true => format!(
            "Saliency of {}, SmoothGrad ×{}",
            inside.class, inside.smoothing.copies
        ),
        false => format!("Saliency of {}", inside.class),
    };
    area.draw(&Text::new(caption, (x1, y0), theme.font(14)))?;
    let largest = inside
        .saliency
        .iter()
        .filter(|v| v.is_finite())
        .fold(f32::MIN_POSITIVE, |m, v| m.max(v.abs()));
    let heat: Vec<f32> = inside.saliency.iter().map(|g| g.abs() / largest).collect();
    let over = |at: usize| {
        let dim = Shade::Brightness { largest: 1.0 }.color(pixels[at] * 0.35, theme);
        let share = if heat[at].is_finite() {
            heat[at].clamp(0.0, 1.0)
        } else {
            1.0
        };
        let channel = |a: u8, b: u8| (f32::from(a) + (f32::from(b) - f32::from(a)) * share) as u8;
        RGBColor(channel(dim.0, 255), channel(dim.1, 64), channel(dim.2, 32))
    };
    let indices: Vec<f32> = (0..heat.len()).map(|i| i as f32).collect();
    draw_square(area, &indices, IMAGE_SIDE, (x1, y0 + 20, SCALE), |i| {
        over(i as usize)
    })
}

/// The ten probabilities as bars, the guess's in green.
fn draw_probabilities<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    inside: &Inside,
    (x0, y0): (i32, i32),
    theme: &ChartTheme,
) -> DrawResult<DB> {
    const WIDTH: i32 = 150;
    const ROW: i32 = 11;
    let guess = inside.guess();
    let caption = format!("Probabilities: {guess}");
    area.draw(&Text::new(caption, (x0, y0), theme.font(14)))?;
    let label = theme.font(11).pos(Pos::new(HPos::Left, VPos::Center));
    for digit in 0..CLASSES {
        let y = y0 + 20 + digit as i32 * ROW;
        let p = inside.probabilities[digit];
        let p = if p.is_finite() {
            p.clamp(0.0, 1.0)
        } else {
            0.0
        };
        area.draw(&Text::new(
            digit.to_string(),
            (x0, y + ROW / 2),
            label.clone(),
        ))?;
        let (left, length) = (x0 + 12, (p * WIDTH as f32).round() as i32);
        let color = if digit == guess { GUESS } else { theme.text };
        area.draw(&Rectangle::new(
            [(left, y + 2), (left + length.max(1), y + ROW - 2)],
            color.filled(),
        ))?;
        let share = format!("{:.1}%", p * 100.0);
        area.draw(&Text::new(
            share,
            (left + WIDTH + 6, y + ROW / 2),
            label.clone(),
        ))?;
    }
    Ok(())
}

/// Everything, laid out in [`SIZE`].
pub fn draw_inside<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    inside: &Inside,
    theme: &ChartTheme,
) -> DrawResult<DB> {
    let margin = 10;
    draw_digit_and_saliency(area, inside, (margin, margin), theme)?;
    draw_probabilities(area, inside, (margin + 350, margin), theme)?;
    let filters = (
        format!("conv1's {} filters, 5×5", inside.filters.count),
        (margin + 580, margin),
    );
    let signed = Shade::of(&inside.filters.values, true);
    draw_grids(
        area,
        (&filters.0, filters.1),
        &inside.filters,
        (4, signed),
        theme,
    )?;
    let mut y = margin + 150;
    let rows = [
        [("conv1", &inside.conv1, 2), ("pool1", &inside.pool1, 2)],
        [("conv2", &inside.conv2, 3), ("pool2", &inside.pool2, 4)],
    ];
    for row in rows {
        let mut x = margin;
        let mut height = 0;
        for (name, maps, scale) in row {
            let caption = format!("{name}: {} maps, {}×{}", maps.count, maps.side, maps.side);
            let shade = Shade::of(&maps.values, false);
            height = height.max(draw_grids(
                area,
                (&caption, (x, y)),
                maps,
                (scale, shade),
                theme,
            )?);
            let cell = maps.side as i32 * scale + GAP;
            x += cell * maps.count.min(COLUMNS) as i32 + 30;
        }
        y += height + 10;
    }
    // fc1's units in rows of a hundred: a strip.
    let units = inside.fc1.len();
    let per_row = units.min(100);
    let strip = Maps {
        count: 1,
        side: per_row,
        values: inside.fc1.clone(),
    };
    let caption = format!("fc1: {units} units");
    area.draw(&Text::new(caption, (margin, y), theme.font(14)))?;
    let shade = Shade::of(&strip.values, false);
    let scale = 9;
    for (row, values) in strip.values.chunks(per_row).enumerate() {
        for (column, value) in values.iter().enumerate() {
            let (x, yy) = (margin + column as i32 * scale, y + 20 + row as i32 * scale);
            let color = shade.color(*value, theme);
            area.draw(&Rectangle::new(
                [(x, yy), (x + scale - 1, yy + scale - 1)],
                color.filled(),
            ))?;
        }
    }
    Ok(())
}

/// The drawing as an SVG document.
pub fn render_svg(inside: &Inside) -> Result<String, ChartError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let theme = ChartTheme::LIGHT;
        let drawn = root
            .fill(&theme.background)
            .and_then(|()| draw_inside(&root, inside, &theme))
            .and_then(|()| root.present());
        drawn.map_err(|e| ChartError(e.to_string()))?;
    }
    Ok(svg)
}
