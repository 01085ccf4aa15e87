//! How each layer learns, on the page: the shown run's update ratios, dead units and the
//! chosen layer's distribution, redrawn at each log line; and beside them those of each run
//! ticked in the runs table, so that runs compare side by side.

use std::cell::RefCell;

use wasm_bindgen::JsCast;
use web_sys::{Element, HtmlCanvasElement};

use super::canvas::draw_canvas;
use super::charts;
use super::digit::element;
use super::dom::{self, by_id, document, value};
use crate::chart::learning::{Values, draw_dead_units, draw_distribution, draw_update_ratios};
use crate::inspect::learning::LearningReport;
use crate::platform::yield_now;
use crate::runs::RunRecord;

/// Runs drawn beside the shown one, at most.
const COMPARED: usize = 4;

thread_local! {
    /// The runs ticked in the runs table, drawn beside the shown one.
    static COMPARED_RUNS: RefCell<Vec<RunRecord>> = const { RefCell::new(Vec::new()) };
}

/// The chosen layer and values.
fn chosen() -> (String, Values) {
    let values = match value("learning-values").as_str() {
        "gradients" => Values::Gradients,
        _ => Values::Weights,
    };
    (value("learning-layer"), values)
}

/// The shown run's charts, each in a task of its own.
pub(super) async fn redraw() {
    let reports = charts::shown_learning();
    let (layer, values) = chosen();
    draw_canvas("ratio-chart", |area, theme| {
        draw_update_ratios(area, &reports, theme)
    });
    yield_now().await;
    draw_canvas("dead-chart", |area, theme| {
        draw_dead_units(area, &reports, theme)
    });
    yield_now().await;
    draw_canvas("distribution-chart", |area, theme| {
        draw_distribution(area, &reports, (&layer, values), theme)
    });
    let figures = by_id::<Element>("ratio-chart");
    let _ = figures.set_attribute("data-reports", &reports.len().to_string());
}

/// A canvas for a compared run's chart, in `figure`.
fn canvas_in(figure: &Element, label: &str) -> HtmlCanvasElement {
    let canvas: HtmlCanvasElement = document()
        .create_element("canvas")
        .expect("a canvas")
        .unchecked_into();
    canvas.set_width(520);
    canvas.set_height(300);
    let _ = canvas.set_attribute("role", "img");
    let _ = canvas.set_attribute("aria-label", label);
    let _ = figure.append_child(&canvas);
    canvas
}

/// The compared runs' charts: each run a figure of its update ratios and the chosen layer's
/// distribution.
fn draw_compared() {
    let container = by_id::<Element>("learning-compared");
    container.set_text_content(None);
    let runs = COMPARED_RUNS.with(|runs| runs.borrow().clone());
    let (layer, values) = chosen();
    let shown = runs.iter().filter(|run| !run.metrics.learning.is_empty());
    for (index, run) in shown.take(COMPARED).enumerate() {
        let figure = element("figure", "");
        let _ = figure.append_child(&element("figcaption", &run.name));
        let _ = container.append_child(&figure);
        let reports: &[LearningReport] = &run.metrics.learning;
        let ratio_id = format!("compared-ratio-{index}");
        let ratio = canvas_in(&figure, &format!("{}: each layer's update ratio", run.name));
        ratio.set_id(&ratio_id);
        draw_canvas(&ratio_id, |area, theme| {
            draw_update_ratios(area, reports, theme)
        });
        let spread_id = format!("compared-distribution-{index}");
        let label = format!("{}: {layer}'s {}", run.name, values.name());
        let spread = canvas_in(&figure, &label);
        spread.set_id(&spread_id);
        draw_canvas(&spread_id, |area, theme| {
            draw_distribution(area, reports, (&layer, values), theme)
        });
    }
}

/// The runs ticked in the runs table: drawn beside the shown one.
pub(super) fn compare(runs: &[RunRecord]) {
    COMPARED_RUNS.with(|compared| *compared.borrow_mut() = runs.to_vec());
    draw_compared();
}

pub(super) fn wire() {
    for id in ["learning-layer", "learning-values"] {
        dom::on(id, "change", |_| {
            wasm_bindgen_futures::spawn_local(redraw());
            draw_compared();
        });
    }
}
