//! A digit on the page: drawn from MNIST's bytes into a captioned figure, or read from a
//! canvas it was drawn on, in MNIST's form.

use wasm_bindgen::JsCast;
use web_sys::{CanvasRenderingContext2d, Element, HtmlCanvasElement, ImageData};

use super::dom::document;
use crate::data::{IMAGE_SIDE, mnist_form};

pub(super) fn element(tag: &str, text: &str) -> Element {
    let element = document().create_element(tag).expect("a valid tag");
    element.set_text_content(Some(text));
    element
}

pub(super) fn context(canvas: &HtmlCanvasElement) -> CanvasRenderingContext2d {
    canvas
        .get_context("2d")
        .ok()
        .flatten()
        .and_then(|c| c.dyn_into().ok())
        .expect("a 2d canvas")
}

/// A figure of one digit, captioned.
pub(super) fn digit_figure(pixels: &[u8], caption: &str, title: &str) -> Element {
    let figure = element("figure", "");
    let canvas: HtmlCanvasElement = document()
        .create_element("canvas")
        .expect("a canvas")
        .unchecked_into();
    canvas.set_width(IMAGE_SIDE as u32);
    canvas.set_height(IMAGE_SIDE as u32);
    draw_digit(&canvas, pixels);
    let _ = figure.append_child(&canvas);
    let _ = figure.append_child(&element("figcaption", caption));
    let _ = figure.set_attribute("title", title);
    figure
}

/// Draws 28x28 MNIST bytes (0 = background) white on black onto `canvas`.
pub(super) fn draw_digit(canvas: &HtmlCanvasElement, pixels: &[u8]) {
    let rgba: Vec<u8> = pixels.iter().flat_map(|&p| [p, p, p, 255]).collect();
    let side = IMAGE_SIDE as u32;
    // A copy out of the wasm memory: shared (threads), it is refused by ImageData.
    let rgba = js_sys::Uint8ClampedArray::from(rgba.as_slice());
    if let Ok(image) = ImageData::new_with_js_u8_clamped_array_and_sh(&rgba, side, side) {
        let _ = context(canvas).put_image_data(&image, 0.0, 0.0);
    }
}

/// What is drawn on `canvas` in MNIST's form (`data::mnist_form`: cropped to its ink, fitted
/// into 20×20, centred by its mass in 28×28), one byte a pixel. `None` while nothing is drawn.
pub(super) fn drawn_digit(canvas: &HtmlCanvasElement) -> Option<Vec<u8>> {
    let (width, height) = (canvas.width(), canvas.height());
    let rgba = context(canvas)
        .get_image_data(0.0, 0.0, width.into(), height.into())
        .ok()?
        .data();
    mnist_form::from_rgba(&rgba, width as usize, height as usize).ok()
}
