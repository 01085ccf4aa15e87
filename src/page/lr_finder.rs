//! "Find a learning rate": the range test asked of the engine the form names, on the model a
//! run would start from; its curve drawn as it comes, the suggested rate marked, and "Use" to
//! put that rate in the form and the link.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use plotters::prelude::*;
use web_sys::{HtmlButtonElement, HtmlCanvasElement, HtmlElement, HtmlInputElement};

use super::canvas::ChartCanvas;
use super::canvas::chart_theme;
use super::dom::{self, by_id, set_text};
use super::engine::use_engine;
use super::error::PageError;
use super::form::{backend_choice, validate_form, write_query};
use super::phase::Phase;
use super::state::{Shared, log, set_phase, show_error};
use crate::chart::lr_find::{draw_lr_finding, short};
use crate::session::protocol::FindLr;
use crate::train::lr_find::{LrFinding, LrPoint, LrRange, SUGGESTION_RULE};

/// The curve is drawn again every this many steps while the test goes.
const DRAW_EVERY: usize = 10;

thread_local! {
    /// The last test's suggestion, as "Use" puts it in the form.
    static SUGGESTED: Cell<Option<f64>> = const { Cell::new(None) };
}

pub(super) fn wire(page: &Shared) {
    let defaults = LrRange::default();
    dom::set_value("lr-find-start", &defaults.start.to_string());
    dom::set_value("lr-find-end", &defaults.end.to_string());
    dom::set_value("lr-find-steps", &defaults.steps.to_string());
    let s = page.clone();
    dom::on("find-lr", "click", move |_| {
        let s = s.clone();
        wasm_bindgen_futures::spawn_local(async move {
            if let Err(error) = find(&s).await {
                show_error(&error.to_string());
            }
        });
    });
    dom::on("use-lr", "click", |_| use_suggestion());
}

/// The range from its fields: the first and last rates and the steps between.
fn range() -> Result<LrRange, PageError> {
    let number = |id: &str| dom::value(id).trim().parse::<f64>().unwrap_or(f64::NAN);
    let steps = dom::value("lr-find-steps").trim().parse().unwrap_or(0);
    let range = LrRange {
        start: number("lr-find-start"),
        end: number("lr-find-end"),
        steps,
    };
    range.validate()?;
    Ok(range)
}

async fn find(page: &Shared) -> Result<(), PageError> {
    let idle = matches!(page.borrow().phase, Phase::Ready | Phase::Finished(_));
    if !idle || page.borrow().data.is_none() {
        return Ok(());
    }
    let (config, choice, range) = (validate_form()?, backend_choice()?, range()?);
    show_error("");
    SUGGESTED.with(|s| s.set(None));
    by_id::<HtmlButtonElement>("use-lr").set_disabled(true);
    set_text("lr-find-status", "Finding a learning rate…");
    set_phase(page, Phase::FindingLr);
    let found = async {
        let trainer = use_engine(page, choice).await?;
        let request = FindLr {
            config,
            backend: choice.device(),
            from_model: by_id::<HtmlInputElement>("from-model").checked(),
            range,
        };
        let points: Rc<RefCell<Vec<LrPoint>>> = Rc::default();
        let drawn = points.clone();
        let on_point = move |point: LrPoint| {
            let mut points = drawn.borrow_mut();
            points.push(point);
            if points.len().is_multiple_of(DRAW_EVERY) {
                let so_far = LrFinding {
                    points: points.clone(),
                    suggestion: None,
                    diverged: false,
                };
                draw(&so_far);
            }
        };
        trainer.ask_reporting(request, on_point).await
    }
    .await;
    set_phase(page, Phase::Ready);
    let finding = found?;
    draw(&finding);
    show(&finding);
    Ok(())
}

/// Says what the test found, and offers its suggestion.
fn show(finding: &LrFinding) {
    let ended = match (finding.diverged, finding.points.last()) {
        (true, Some(last)) => format!(
            "The loss diverged at {}, where the test ended. ",
            short(last.lr)
        ),
        _ => String::new(),
    };
    let said = match finding.suggestion {
        Some(lr) => format!("{ended}Suggested: {} ({SUGGESTION_RULE}).", short(lr)),
        None => format!("{ended}No suggestion: no loss was finite."),
    };
    set_text("lr-find-status", &said);
    log(&said);
    let figures = by_id::<HtmlElement>("lr-find-chart").dataset();
    let suggestion = finding.suggestion.map(short).unwrap_or_default();
    let _ = figures.set("suggestion", &suggestion);
    let _ = figures.set("points", &finding.points.len().to_string());
    SUGGESTED.with(|s| s.set(finding.suggestion));
    by_id::<HtmlButtonElement>("use-lr").set_disabled(finding.suggestion.is_none());
}

fn draw(finding: &LrFinding) {
    let canvas = by_id::<HtmlCanvasElement>("lr-find-chart");
    canvas.set_hidden(false);
    let Some(backend) = ChartCanvas::new(canvas) else {
        return;
    };
    let area = backend.into_drawing_area();
    let theme = chart_theme();
    let drawn = area
        .fill(&theme.background)
        .and_then(|()| draw_lr_finding(&area, finding, &theme));
    if let Err(error) = drawn {
        web_sys::console::warn_1(&format!("lr-find-chart: {error}").into());
    }
}

/// Puts the suggested rate in the form, and the form in the address.
fn use_suggestion() {
    let Some(lr) = SUGGESTED.with(Cell::get) else {
        return;
    };
    dom::set_value("lr", &short(lr));
    if let (Ok(config), Ok(choice)) = (validate_form(), backend_choice()) {
        write_query(&config, choice);
        set_text(
            "lr-find-status",
            &format!("Learning rate set to {}.", short(lr)),
        );
    }
}
