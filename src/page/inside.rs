//! One digit, layer by layer: a digit picked (a test digit, one of a confusion-matrix cell, the
//! drawing, or a dot of the digits' map) is drawn as the model sees it: its saliency, the
//! probabilities, conv1's filters and each layer's maps. While a run goes, the view follows the
//! run's model at each log line; the engine answers from the checkpoint it took there, so the
//! view reads nothing of the device between log lines.

use std::cell::{Cell, RefCell};

use web_sys::{Element, HtmlElement};

use super::canvas::draw_canvas;
use super::digit::drawn_digit;
use super::dom::{self, by_id, now_ms, set_text, value};
use super::error::PageError;
use super::state::Shared;
use crate::chart::inside::draw_inside;
use crate::inspect::saliency::Smoothing;
use crate::session::protocol::{LookInside, Payload};

/// The digit in view, and what it is, as the status says it.
struct Viewed {
    pixels: Vec<u8>,
    about: String,
}

thread_local! {
    static VIEWED: RefCell<Option<Viewed>> = const { RefCell::new(None) };
    /// Whether the engine is being asked: a refresh asked meanwhile waits for its answer.
    static ASKING: Cell<bool> = const { Cell::new(false) };
    static AGAIN: Cell<bool> = const { Cell::new(false) };
    /// When the view was last asked for, and how long its answer took.
    static LAST_ASKED: Cell<f64> = const { Cell::new(0.0) };
    static LAST_TOOK: Cell<f64> = const { Cell::new(0.0) };
}

/// Looks inside the model at `pixels` (28×28 bytes), which `about` names ("test image 17").
pub(super) fn look_at(page: &Shared, pixels: Vec<u8>, about: String) {
    VIEWED.with(|viewed| *viewed.borrow_mut() = Some(Viewed { pixels, about }));
    refresh(page);
    by_id::<Element>("inside-heading").scroll_into_view();
}

/// A run's log lines refresh the view at most this often.
const LIVE_REFRESH_MS: f64 = 1000.0;
/// And after this many times as long as the last answer took: each refresh is a forward pass
/// (SmoothGrad's copies a backward pass too) that the engine computes between the run's steps,
/// on the devices (on the CPU backend, the cores) that train, so the view takes at most about
/// a twentieth of the run's time (docs/inside.md).
const LIVE_WAIT_FACTOR: f64 = 20.0;

/// At a run's log line: the view again, unless it was asked for too recently.
pub(super) fn follow_run(page: &Shared) {
    let wait = LAST_TOOK.with(|took| (took.get() * LIVE_WAIT_FACTOR).max(LIVE_REFRESH_MS));
    if LAST_ASKED.with(|last| now_ms() - last.get() >= wait) {
        refresh(page);
    }
}

/// Asks again for the digit in view, if there is one: at a run's end, or when the saliency's
/// settings change. One question at a time: those asked meanwhile are one more.
pub(super) fn refresh(page: &Shared) {
    if VIEWED.with(|viewed| viewed.borrow().is_none()) {
        return;
    }
    if ASKING.with(|asking| asking.replace(true)) {
        AGAIN.with(|again| again.set(true));
        return;
    }
    let page = page.clone();
    wasm_bindgen_futures::spawn_local(async move {
        loop {
            if let Err(error) = show(&page).await {
                set_text("inside-status", &error.to_string());
            }
            if !AGAIN.with(|again| again.replace(false)) {
                break;
            }
        }
        ASKING.with(|asking| asking.set(false));
    });
}

/// The saliency's settings, as the view's controls say them.
fn saliency_settings() -> (Option<usize>, Smoothing) {
    let class = value("saliency-class").parse().ok();
    let copies = value("saliency-smoothing").parse().unwrap_or(1);
    let smoothing = Smoothing {
        copies,
        ..Smoothing::SMOOTHGRAD
    };
    (class, smoothing)
}

async fn show(page: &Shared) -> Result<(), PageError> {
    let Some((pixels, about)) = VIEWED.with(|viewed| {
        let viewed = viewed.borrow();
        viewed.as_ref().map(|v| (v.pixels.clone(), v.about.clone()))
    }) else {
        return Ok(());
    };
    let (class, smoothing) = saliency_settings();
    LAST_ASKED.with(|last| last.set(now_ms()));
    let trainer = page.borrow().trainer.clone();
    let pixels = Payload::from(pixels);
    let looked = trainer
        .ask(LookInside {
            pixels,
            class,
            smoothing,
        })
        .await?;
    LAST_TOOK.with(|took| took.set(now_ms() - LAST_ASKED.with(Cell::get)));
    let inside = &looked.inside;
    if draw_canvas("inside-view", |area, theme| {
        draw_inside(area, inside, theme)
    })
    .is_none()
    {
        return Ok(());
    }
    let canvas = by_id::<HtmlElement>("inside-view");
    canvas.set_hidden(false);
    let guess = inside.guess();
    let model = match looked.at_step {
        Some(step) => format!("the run's {} at step {step}", looked.model),
        None => format!("the current {}", looked.model),
    };
    let said = format!(
        "{about}: {model} takes it for a {guess} ({:.1}%). Saliency of {}.",
        inside.probabilities[guess] * 100.0,
        inside.class
    );
    set_text("inside-status", &said);
    let _ = canvas.set_attribute(
        "aria-label",
        &format!(
            "{about} inside {model}: taken for a {guess}; its saliency for {}, conv1's {} filters and each layer's maps",
            inside.class, inside.filters.count
        ),
    );
    let figures = canvas.dataset();
    let shown = figures
        .get("shown")
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(0);
    let _ = figures.set("shown", &(shown + 1).to_string());
    let _ = figures.set("guess", &guess.to_string());
    let _ = figures.set(
        "step",
        &looked.at_step.map(|s| s.to_string()).unwrap_or_default(),
    );
    let _ = figures.set(
        "maps",
        &format!("{} {}", inside.conv1.count, inside.conv2.count),
    );
    Ok(())
}

/// The view's controls: the saliency's settings, and the drawing's "Look inside".
pub(super) fn wire(page: &Shared) {
    for id in ["saliency-class", "saliency-smoothing"] {
        let page = page.clone();
        dom::on(id, "change", move |_| refresh(&page));
    }
    let page = page.clone();
    dom::on("look-inside-drawing", "click", move |_| {
        match drawn_digit(&by_id("draw")) {
            Some(pixels) => look_at(&page, pixels, "Your drawing".into()),
            None => set_text("draw-status", "Draw a digit first."),
        }
    });
}

/// Makes the digit of `figure` (its canvas) open this view: a click, or Enter or Space once
/// it has the focus.
pub(super) fn make_lookable(page: &Shared, figure: &Element, pixels: Vec<u8>, about: String) {
    let Ok(Some(canvas)) = figure.query_selector("canvas") else {
        return;
    };
    let _ = canvas.set_attribute("tabindex", "0");
    let _ = canvas.set_attribute("role", "button");
    let _ = canvas.set_attribute("aria-label", &format!("Look inside the network at {about}"));
    let look = {
        let page = page.clone();
        move || look_at(&page, pixels.clone(), about.clone())
    };
    let on_click = look.clone();
    dom::on_element(&canvas, "click", move |_| on_click());
    dom::on_element(&canvas, "keydown", move |event| {
        if matches!(dom::key(&event).as_deref(), Some("Enter" | " ")) {
            event.prevent_default();
            look();
        }
    });
}
