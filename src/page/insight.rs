//! What the network learned, on the page: the test set's confusion matrix after each epoch, a
//! gallery of test digits with the predicted and true labels (mistakes marked), and a canvas
//! to draw a digit on and see each digit's probability as it is drawn.

use std::cell::Cell;
use std::rc::Rc;

use wasm_bindgen::JsCast;
use web_sys::{
    CanvasRenderingContext2d, Element, HtmlCanvasElement, HtmlProgressElement, ImageData,
    PointerEvent,
};

use super::dom::{self, by_id, document, set_text};
use super::{PageError, Shared, collection};
use crate::data::{IMAGE_SIDE, mnist_form};
use crate::model::CLASSES;
use crate::predict::predicted;
use crate::session::protocol::{Confused, Gallery, Payload, Predict};
use crate::train::EpochReport;

const GUESS_EVERY_MS: f64 = 150.0;

fn element(tag: &str, text: &str) -> Element {
    let element = document().create_element(tag).expect("a valid tag");
    element.set_text_content(Some(text));
    element
}

fn context(canvas: &HtmlCanvasElement) -> CanvasRenderingContext2d {
    canvas
        .get_context("2d")
        .ok()
        .flatten()
        .and_then(|c| c.dyn_into().ok())
        .expect("a 2d canvas")
}

/// The confusion matrix as a table: rows are true digits, columns predicted ones.
pub fn show_confusion(report: &EpochReport) {
    let table = by_id::<Element>("confusion");
    table.set_text_content(None);
    let header = element("tr", "");
    let _ = header.append_child(&element("th", "true ╲ predicted"));
    for digit in 0..CLASSES {
        let _ = header.append_child(&element("th", &digit.to_string()));
    }
    let _ = table.append_child(&header);
    for (digit, row) in report.confusion.iter().enumerate() {
        let tr = element("tr", "");
        let _ = tr.append_child(&element("th", &digit.to_string()));
        for (predicted, count) in row.iter().enumerate() {
            let cell = element("td", "");
            let class = match (predicted == digit, *count > 0) {
                (true, _) => "hit",
                (false, true) => "miss",
                (false, false) => "none",
            };
            cell.set_class_name(class);
            // A cell with digits in it opens them.
            let content = match count {
                0 => element("span", "0"),
                _ => {
                    let button = element("button", &count.to_string());
                    let _ = button.set_attribute("type", "button");
                    let _ = button.set_attribute("data-truth", &digit.to_string());
                    let _ = button.set_attribute("data-guess", &predicted.to_string());
                    let _ = button.set_attribute(
                        "aria-label",
                        &format!(
                            "{count} test images of a {digit} taken for a {predicted}: show them"
                        ),
                    );
                    button
                }
            };
            let _ = cell.append_child(&content);
            let _ = tr.append_child(&cell);
        }
        let _ = table.append_child(&tr);
    }
    let _ = table.set_attribute("data-total", &report.total.to_string());
    set_text(
        "confusion-caption",
        &format!(
            "Epoch {}: {} test images, {} right. Click a number to see those digits.",
            report.epoch, report.total, report.correct
        ),
    );
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

/// The test digits of the confusion matrix's cell that `button` is, with the model's
/// probability for its guess under each.
async fn show_confused(page: &Shared, button: &Element) -> Result<(), PageError> {
    let number = |element: &Element, name: &str| {
        element
            .get_attribute(name)
            .and_then(|value| value.parse::<usize>().ok())
    };
    let table = by_id::<Element>("confusion");
    let (Some(truth), Some(guess), Some(len)) = (
        number(button, "data-truth"),
        number(button, "data-guess"),
        number(&table, "data-total"),
    ) else {
        return Ok(());
    };
    set_text("confused-caption", "Looking…");
    let trainer = page.borrow().trainer.clone();
    let asked = Confused {
        truth: truth as u8,
        guess,
        len,
    };
    let digits = trainer.ask(asked).await?;
    let shown = by_id::<Element>("confused");
    shown.set_text_content(None);
    for digit in &digits {
        let percent = 100.0 * digit.probability;
        let title = format!(
            "test image {}: true {}, predicted {} with {percent:.1} %",
            digit.index, digit.truth, digit.guess
        );
        let _ = shown.append_child(&digit_figure(
            &digit.pixels.bytes(),
            &format!("{percent:.0} %"),
            &title,
        ));
    }
    let what = match truth == guess {
        true => format!("{truth}s the model gets right"),
        false => format!("{truth}s the model takes for a {guess}"),
    };
    let count = button.text_content().unwrap_or_default();
    let caption = match digits.len().to_string() == count {
        true => format!("{what}: {count}, with its probability for {guess}"),
        false => format!(
            "{what}: {count}, the first {} shown, with its probability for {guess}",
            digits.len()
        ),
    };
    set_text("confused-caption", &caption);
    Ok(())
}

/// Clicking a number of the confusion matrix shows its digits.
pub fn wire_confusion(page: &Shared) {
    let s = page.clone();
    dom::on("confusion", "click", move |event| {
        let Some(button) = event
            .target()
            .and_then(|target| target.dyn_into::<Element>().ok())
            .and_then(|target| target.closest("button[data-truth]").ok().flatten())
        else {
            return;
        };
        let s = s.clone();
        wasm_bindgen_futures::spawn_local(async move {
            if let Err(error) = show_confused(&s, &button).await {
                set_text("confused-caption", &error.to_string());
            }
        });
    });
}

/// Draws 28x28 MNIST bytes (0 = background) white on black onto `canvas`.
fn draw_digit(canvas: &HtmlCanvasElement, pixels: &[u8]) {
    let rgba: Vec<u8> = pixels.iter().flat_map(|&p| [p, p, p, 255]).collect();
    let side = IMAGE_SIDE as u32;
    // A copy out of the wasm memory: shared (threads), it is refused by ImageData.
    let rgba = js_sys::Uint8ClampedArray::from(rgba.as_slice());
    if let Ok(image) = ImageData::new_with_js_u8_clamped_array_and_sh(&rgba, side, side) {
        let _ = context(canvas).put_image_data(&image, 0.0, 0.0);
    }
}

/// The current model's guesses on test digits: the first ones and some of its mistakes.
pub async fn show_gallery(page: &Shared) -> Result<(), PageError> {
    if page.borrow().model.is_none() {
        return Ok(());
    }
    let trainer = page.borrow().trainer.clone();
    let digits = trainer.ask(Gallery {}).await?;
    let gallery = by_id::<Element>("gallery");
    gallery.set_text_content(None);
    for digit in digits {
        let (index, truth, guess) = (digit.index, digit.truth, digit.guess);
        let right = usize::from(truth) == guess;
        let caption = match right {
            true => format!("{guess}"),
            false => format!("{guess}, is {truth}"),
        };
        let title = format!("test image {index}: true {truth}, predicted {guess}");
        let pixels = digit.pixels.bytes().to_vec();
        let figure = digit_figure(&pixels, &caption, &title);
        figure.set_class_name(if right { "right" } else { "mistake" });
        if !right {
            // A mistake can be taught: added to one's own digits with its true label.
            let add = element("button", &format!("Add as {truth}"));
            let _ = add.set_attribute("type", "button");
            let _ = add.set_attribute("class", "add-mistake");
            dom::on_element(&add, "click", move |_| collection::add(truth, &pixels));
            let _ = figure.append_child(&add);
        }
        let _ = gallery.append_child(&figure);
    }
    Ok(())
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

async fn show_probabilities(page: &Shared) -> Result<(), PageError> {
    if page.borrow().model.is_none() {
        set_text("draw-status", "Train or load a model first.");
        return Ok(());
    }
    let Some(pixels) = drawn_digit(&by_id("draw")) else {
        return Ok(());
    };
    let trainer = page.borrow().trainer.clone();
    let pixels = Payload::from(pixels);
    let digits = trainer.ask(Predict { pixels }).await?.by_digit;
    for (digit, p) in digits.iter().enumerate() {
        by_id::<HtmlProgressElement>(&format!("p{digit}")).set_value(f64::from(*p));
        set_text(&format!("p{digit}-text"), &format!("{:.1}%", 100.0 * p));
    }
    set_text(
        "draw-status",
        &format!("Looks like a {}", predicted(&digits)),
    );
    Ok(())
}

fn guess(page: &Shared) {
    let page = page.clone();
    wasm_bindgen_futures::spawn_local(async move {
        if let Err(error) = show_probabilities(&page).await {
            set_text("draw-status", &error.to_string());
        }
    });
}

fn clear_drawing() {
    let canvas = by_id::<HtmlCanvasElement>("draw");
    let context = context(&canvas);
    context.set_fill_style_str("black");
    context.fill_rect(0.0, 0.0, canvas.width().into(), canvas.height().into());
    for digit in 0..CLASSES {
        by_id::<HtmlProgressElement>(&format!("p{digit}")).set_value(0.0);
        set_text(&format!("p{digit}-text"), "");
    }
    set_text("draw-status", "Draw a digit.");
}

/// Strokes follow the pointer while a button is down; the probabilities follow each stroke.
pub fn wire_drawing(page: &Shared) {
    clear_drawing();
    let canvas = by_id::<HtmlCanvasElement>("draw");
    let pen = context(&canvas);
    pen.set_stroke_style_str("white");
    pen.set_line_width(22.0);
    pen.set_line_cap("round");
    pen.set_line_join("round");
    let drawing = Rc::new(Cell::new(false));
    let d = drawing.clone();
    let (p, c) = (pen.clone(), canvas.clone());
    dom::on("draw", "pointerdown", move |event| {
        let Some(event) = event.dyn_ref::<PointerEvent>() else {
            return;
        };
        let _ = c.set_pointer_capture(event.pointer_id());
        d.set(true);
        p.begin_path();
        p.move_to(event.offset_x().into(), event.offset_y().into());
        p.line_to(event.offset_x().into(), event.offset_y().into());
        p.stroke();
    });
    let (d, s) = (drawing.clone(), page.clone());
    let last_guess = Cell::new(0.0);
    dom::on("draw", "pointermove", move |event| {
        let Some(event) = event.dyn_ref::<PointerEvent>() else {
            return;
        };
        if !d.get() {
            return;
        }
        pen.line_to(event.offset_x().into(), event.offset_y().into());
        pen.stroke();
        // Live while drawing, but not more often than the model can answer.
        let now = js_sys::Date::now();
        if now - last_guess.get() > GUESS_EVERY_MS {
            last_guess.set(now);
            guess(&s);
        }
    });
    let s = page.clone();
    dom::on("draw", "pointerup", move |_| {
        drawing.set(false);
        guess(&s);
    });
    dom::on("clear-drawing", "click", |_| clear_drawing());
}
