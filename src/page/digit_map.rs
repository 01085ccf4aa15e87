//! Where the digits lie, on the page: the first test digits on fc1's first two principal axes,
//! for this model (the run's at its last log line while one trains), fresh weights (before
//! training) or a run ticked in the runs table. Each dot shows its digit under the pointer and
//! opens it in the view of the network on a click; with the keyboard, the arrow keys step
//! through the digits and Enter opens one.

use std::cell::RefCell;

use wasm_bindgen::JsCast;
use web_sys::{Element, HtmlCanvasElement, HtmlElement, HtmlOptionElement, MouseEvent};

use super::canvas::draw_canvas;
use super::digit::draw_digit;
use super::dom::{self, by_id, document, set_text, value};
use super::error::PageError;
use super::form::form_config;
use super::inside;
use super::run_store;
use super::state::Shared;
use crate::chart::digit_map::draw_digit_map;
use crate::data::IMAGE_PIXELS;
use crate::inspect::projector::DIGITS;
use crate::runs::{Engine, RunRecord};
use crate::session::protocol::{MapDigits, MapOf, MappedDigits, Payload};

/// How near the pointer a dot must be to be the one pointed at, in the canvas's pixels.
const NEAR: f64 = 8.0;

/// The map drawn: each digit's place on the canvas, its label and pixels, and the digit the
/// keyboard is on.
struct Drawn {
    places: Vec<(i32, i32)>,
    labels: Vec<u8>,
    pixels: Vec<u8>,
    focus: Option<usize>,
}

thread_local! {
    static DRAWN: RefCell<Option<Drawn>> = const { RefCell::new(None) };
    /// The runs the map can be of, besides this model and fresh weights: those ticked.
    static OFFERED: RefCell<Vec<RunRecord>> = const { RefCell::new(Vec::new()) };
}

/// The runs ticked in the runs table that this browser keeps the weights of, offered as the
/// map's model.
pub(super) fn offer(runs: &[RunRecord]) {
    let select = by_id::<Element>("map-of");
    let chosen = value("map-of");
    // Leave this model and fresh weights; the runs after them are offered anew.
    while select.child_element_count() > 2 {
        if let Some(last) = select.last_element_child() {
            last.remove();
        }
    }
    let offered: Vec<RunRecord> = runs
        .iter()
        .filter(|run| run.engine == Engine::Browser && run.failure.is_none())
        .cloned()
        .collect();
    for run in &offered {
        let option: HtmlOptionElement = document()
            .create_element("option")
            .expect("an option")
            .unchecked_into();
        option.set_value(&format!("run:{}", run.id));
        option.set_text(&format!("the run {}", run.name));
        let _ = select.append_child(&option);
    }
    OFFERED.with(|kept| *kept.borrow_mut() = offered);
    dom::set_value("map-of", &chosen);
    if value("map-of").is_empty() {
        dom::set_value("map-of", "current");
    }
}

/// Which model the map is of, as the select says, and its title.
async fn chosen_model() -> Result<(MapOf, String), PageError> {
    let chosen = value("map-of");
    if chosen == "fresh" {
        let config = form_config()?;
        let title = format!("Before training ({}, seed {})", config.model, config.seed);
        let of = MapOf::Fresh {
            kind: config.model,
            seed: config.seed,
        };
        return Ok((of, title));
    }
    let run = chosen
        .strip_prefix("run:")
        .and_then(|id| OFFERED.with(|kept| kept.borrow().iter().find(|r| r.id == id).cloned()));
    let Some(run) = run else {
        return Ok((MapOf::Current, "This model".into()));
    };
    let weights = run_store::weights(&run.id).await?;
    let weights =
        weights.ok_or_else(|| PageError::Storage(format!("{} has no weights kept", run.name)))?;
    let of = MapOf::Weights {
        kind: run.metrics.config.model,
        weights: Payload::from(weights),
    };
    Ok((of, run.name))
}

async fn map(page: &Shared) -> Result<(), PageError> {
    let len = match value("map-count").trim().parse::<usize>() {
        Ok(len @ 2..=10_000) => len,
        _ => {
            set_text("map-status", "Test digits: a number from 2 to 10000.");
            return Ok(());
        }
    };
    set_text("map-status", "Mapping…");
    let (of, title) = chosen_model().await?;
    let trainer = page.borrow().trainer.clone();
    let MappedDigits { map, pixels } = trainer.ask(MapDigits { of, len }).await?;
    let places = draw_canvas("digit-map", |area, theme| {
        draw_digit_map(area, &map, &title, theme)
    });
    let Some(places) = places else {
        return Ok(());
    };
    let canvas = by_id::<HtmlElement>("digit-map");
    canvas.set_hidden(false);
    let explained = (map.explained[0] + map.explained[1]) * 100.0;
    let said = format!(
        "{title}: {} test digits; the two axes hold {explained:.0}% of fc1's variance. Point at a digit to see it, click to look inside.",
        map.points.len()
    );
    set_text("map-status", &said);
    let _ = canvas
        .dataset()
        .set("points", &map.points.len().to_string());
    DRAWN.with(|drawn| {
        *drawn.borrow_mut() = Some(Drawn {
            places,
            labels: map.labels,
            pixels: pixels.into_bytes(),
            focus: None,
        })
    });
    Ok(())
}

/// The canvas's own pixels under a mouse event (the canvas is drawn at its width, shown at
/// the page's).
fn canvas_point(event: &MouseEvent) -> (f64, f64) {
    let canvas = by_id::<HtmlCanvasElement>("digit-map");
    let shown = canvas.get_bounding_client_rect();
    let scale = f64::from(canvas.width()) / shown.width().max(1.0);
    (
        f64::from(event.offset_x()) * scale,
        f64::from(event.offset_y()) * scale,
    )
}

/// The digit nearest `point`, if one is near enough.
fn nearest(point: (f64, f64)) -> Option<usize> {
    DRAWN.with(|drawn| {
        let drawn = drawn.borrow();
        let places = &drawn.as_ref()?.places;
        let distance =
            |&(x, y): &(i32, i32)| (f64::from(x) - point.0).hypot(f64::from(y) - point.1);
        let (index, place) = places
            .iter()
            .enumerate()
            .min_by(|a, b| distance(a.1).total_cmp(&distance(b.1)))?;
        (distance(place) <= NEAR).then_some(index)
    })
}

/// Digit `index`'s pixels and label.
fn digit(index: usize) -> Option<(Vec<u8>, u8)> {
    DRAWN.with(|drawn| {
        let drawn = drawn.borrow();
        let drawn = drawn.as_ref()?;
        let pixels = drawn
            .pixels
            .get(index * IMAGE_PIXELS..(index + 1) * IMAGE_PIXELS)?;
        Some((pixels.to_vec(), *drawn.labels.get(index)?))
    })
}

/// Shows digit `index` beside its dot; none hides the tip.
fn show_tip(index: Option<usize>) {
    let tip = by_id::<HtmlElement>("map-tip");
    let found = index.and_then(|index| Some((index, digit(index)?)));
    let Some((index, (pixels, label))) = found else {
        tip.set_hidden(true);
        return;
    };
    let place = DRAWN.with(|drawn| drawn.borrow().as_ref().map(|d| d.places[index]));
    let Some((x, y)) = place else {
        return;
    };
    if let Ok(Some(canvas)) = tip.query_selector("canvas") {
        draw_digit(canvas.unchecked_ref(), &pixels);
    }
    if let Ok(Some(caption)) = tip.query_selector("figcaption") {
        caption.set_text_content(Some(&format!("test image {index}: a {label}")));
    }
    let canvas = by_id::<HtmlCanvasElement>("digit-map");
    let scale = canvas.get_bounding_client_rect().width() / f64::from(canvas.width()).max(1.0);
    let (left, top) = (f64::from(x) * scale + 12.0, f64::from(y) * scale + 12.0);
    // Through the style object (CSSOM), which the page's Content-Security-Policy allows where
    // it refuses style attributes.
    if let Ok(style) = js_sys::Reflect::get(&tip, &"style".into()) {
        let top = top + f64::from(canvas.offset_top());
        let _ = js_sys::Reflect::set(&style, &"left".into(), &format!("{left:.0}px").into());
        let _ = js_sys::Reflect::set(&style, &"top".into(), &format!("{top:.0}px").into());
    }
    tip.set_hidden(false);
}

/// Opens digit `index` in the view of the network.
fn open(page: &Shared, index: usize) {
    if let Some((pixels, _)) = digit(index) {
        inside::look_at(page, pixels, format!("test image {index}"));
    }
}

/// The keyboard's digit moved by `by` (wrapping), shown.
fn step_focus(by: isize) -> Option<usize> {
    let focus = DRAWN.with(|drawn| {
        let mut drawn = drawn.borrow_mut();
        let drawn = drawn.as_mut()?;
        let len = drawn.places.len() as isize;
        let next = match drawn.focus {
            Some(at) => (at as isize + by).rem_euclid(len),
            None if by < 0 => len - 1,
            None => 0,
        } as usize;
        drawn.focus = Some(next);
        Some(next)
    });
    show_tip(focus);
    focus
}

pub(super) fn wire(page: &Shared) {
    let s = page.clone();
    dom::on("map-digits", "click", move |_| {
        let s = s.clone();
        wasm_bindgen_futures::spawn_local(async move {
            if let Err(error) = map(&s).await {
                set_text("map-status", &error.to_string());
            }
        });
    });
    dom::on("digit-map", "mousemove", |event| {
        if let Some(event) = event.dyn_ref::<MouseEvent>() {
            show_tip(nearest(canvas_point(event)));
        }
    });
    dom::on("digit-map", "mouseleave", |_| show_tip(None));
    let s = page.clone();
    dom::on("digit-map", "click", move |event| {
        let found = event
            .dyn_ref::<MouseEvent>()
            .and_then(|e| nearest(canvas_point(e)));
        if let Some(index) = found {
            open(&s, index);
        }
    });
    let s = page.clone();
    dom::on("digit-map", "keydown", move |event| {
        let by = match dom::key(&event).as_deref() {
            Some("ArrowRight" | "ArrowDown") => 1,
            Some("ArrowLeft" | "ArrowUp") => -1,
            Some("Enter" | " ") => {
                event.prevent_default();
                let focus = DRAWN.with(|d| d.borrow().as_ref().and_then(|d| d.focus));
                if let Some(index) = focus {
                    open(&s, index);
                }
                return;
            }
            Some("Escape") => return show_tip(None),
            _ => return,
        };
        event.prevent_default();
        step_focus(by);
    });
    dom::on("digit-map", "blur", |_| show_tip(None));
    dom::set_value("map-count", &DIGITS.to_string());
}
