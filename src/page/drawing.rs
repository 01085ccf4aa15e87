//! A canvas to draw a digit on, and each digit's probability as it is drawn.

use std::cell::Cell;
use std::rc::Rc;

use wasm_bindgen::JsCast;
use web_sys::{HtmlCanvasElement, HtmlProgressElement, PointerEvent};

use super::digit::{context, drawn_digit};
use super::dom::{self, by_id, set_text};
use super::error::PageError;
use super::state::Shared;
use crate::model::CLASSES;
use crate::predict::predicted;
use crate::session::protocol::{Payload, Predict};

const GUESS_EVERY_MS: f64 = 150.0;

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
pub fn wire(page: &Shared) {
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
