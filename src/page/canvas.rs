//! The charts' canvas: plotters' canvas backend, measuring text with the canvas itself.
//!
//! plotters measures text in a browser by adding a styled `<span>` to the page and reading its
//! size: a forced layout of the whole page for every label, the most of a chart's redraw on the
//! main thread, and a style attribute that the page's Content-Security-Policy refuses (and
//! reports to the console each time). `measureText` lays out nothing.

use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};
use plotters_canvas::CanvasBackend;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::wasm_bindgen;

use plotters::coord::Shift;
use plotters::prelude::{DrawingArea, DrawingAreaErrorKind, IntoDrawingArea};

use crate::chart::style::ChartTheme;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

#[wasm_bindgen]
extern "C" {
    // A 2D context's `measureText` and the figures of its TextMetrics the charts need, without
    // web-sys's feature for them.
    type Measuring;
    #[wasm_bindgen(method, js_name = measureText)]
    fn measure_text(this: &Measuring, text: &str) -> TextMetrics;
    type TextMetrics;
    #[wasm_bindgen(method, getter)]
    fn width(this: &TextMetrics) -> f64;
    #[wasm_bindgen(method, getter, js_name = fontBoundingBoxAscent)]
    fn font_ascent(this: &TextMetrics) -> Option<f64>;
    #[wasm_bindgen(method, getter, js_name = fontBoundingBoxDescent)]
    fn font_descent(this: &TextMetrics) -> Option<f64>;
}

/// A canvas element as plotters draws on it.
pub struct ChartCanvas {
    inner: CanvasBackend,
    context: CanvasRenderingContext2d,
}

impl ChartCanvas {
    pub fn new(canvas: HtmlCanvasElement) -> Option<Self> {
        let context = canvas.get_context("2d").ok()??.dyn_into().ok()?;
        let inner = CanvasBackend::with_canvas_object(canvas)?;
        Some(Self { inner, context })
    }
}

type CanvasError = <CanvasBackend as DrawingBackend>::ErrorType;
type Drawn = Result<(), DrawingErrorKind<CanvasError>>;

impl DrawingBackend for ChartCanvas {
    type ErrorType = CanvasError;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Drawn {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Drawn {
        self.inner.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Drawn {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Drawn {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Drawn {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Drawn {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Drawn {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Drawn {
        self.inner.fill_polygon(vert, style)
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Drawn {
        self.inner.draw_text(text, style, pos)
    }

    fn blit_bitmap(&mut self, pos: BackendCoord, size: (u32, u32), src: &[u8]) -> Drawn {
        self.inner.blit_bitmap(pos, size, src)
    }

    /// The text's width and its font's height, unrotated, as the canvas would draw it (the font
    /// string is `draw_text`'s).
    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<CanvasError>> {
        let size = style.size();
        self.context.set_font(&format!(
            "{} {}px {}",
            style.style().as_str(),
            size,
            style.family().as_str(),
        ));
        let metrics = self.context.unchecked_ref::<Measuring>().measure_text(text);
        // Browsers without the font box (before 2023) get a line of 1.2 em.
        let height = match (metrics.font_ascent(), metrics.font_descent()) {
            (Some(ascent), Some(descent)) => ascent + descent,
            _ => size * 1.2,
        };
        Ok((metrics.width().ceil() as u32, height.ceil() as u32))
    }
}

/// The page's colour scheme, as the stylesheet follows it.
pub fn chart_theme() -> ChartTheme {
    let dark = web_sys::window()
        .and_then(|w| w.match_media("(prefers-color-scheme: dark)").ok().flatten())
        .is_some_and(|query| query.matches());
    match dark {
        true => ChartTheme::DARK,
        false => ChartTheme::LIGHT,
    }
}

/// What drawing on a canvas gives: its result, or the canvas's error.
pub type DrawnOn<T> = Result<T, DrawingAreaErrorKind<CanvasError>>;

/// Draws on the canvas `id` in the page's colours, its background first: what `draw` gives, or
/// none where it could not draw (said in the console; the page goes on).
pub fn draw_canvas<T>(
    id: &str,
    draw: impl FnOnce(&DrawingArea<ChartCanvas, Shift>, &ChartTheme) -> DrawnOn<T>,
) -> Option<T> {
    let backend = ChartCanvas::new(super::dom::by_id::<HtmlCanvasElement>(id))?;
    let area = backend.into_drawing_area();
    let theme = chart_theme();
    let drawn = area
        .fill(&theme.background)
        .and_then(|()| draw(&area, &theme))
        .and_then(|drawn| area.present().map(|()| drawn));
    match drawn {
        Ok(drawn) => Some(drawn),
        Err(error) => {
            web_sys::console::warn_1(&format!("{id}: {error}").into());
            None
        }
    }
}
