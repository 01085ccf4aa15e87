//! The form's schedule preview: the learning rate of every step of the run the form describes,
//! drawn before Start, and kept in the canvas's `data-rates` for the page's tests.

use plotters::prelude::*;
use web_sys::{HtmlCanvasElement, HtmlElement};

use super::canvas::ChartCanvas;
use super::canvas::chart_theme;
use super::dom::by_id;
use crate::chart::schedule::draw_schedule;
use crate::config::TrainConfig;
use crate::data::MNIST_TRAIN_LEN;
use crate::train::schedule::learning_rates;

/// Above this many steps, `data-rates` holds every n-th only.
const MAX_KEPT_RATES: usize = 5000;

/// Draws the schedule of `config` over MNIST's training set (or its limit).
pub(super) fn draw(config: &TrainConfig) {
    let epoch_len = config
        .train_limit
        .unwrap_or(MNIST_TRAIN_LEN)
        .min(MNIST_TRAIN_LEN);
    let batches_per_epoch = epoch_len.div_ceil(config.batch_size);
    let rates = learning_rates(config, batches_per_epoch);
    let element = by_id::<HtmlElement>("schedule-preview");
    let stride = rates.len().div_ceil(MAX_KEPT_RATES).max(1);
    let kept: Vec<f64> = rates.iter().step_by(stride).copied().collect();
    let figures = element.dataset();
    let _ = figures.set("rates", &serde_json::to_string(&kept).unwrap_or_default());
    let _ = figures.set("stride", &stride.to_string());
    let Some(backend) = ChartCanvas::new(by_id::<HtmlCanvasElement>("schedule-preview")) else {
        return;
    };
    let area = backend.into_drawing_area();
    let theme = chart_theme();
    let drawn = area
        .fill(&theme.background)
        .and_then(|()| draw_schedule(&area, &rates, batches_per_epoch, &theme));
    if let Err(error) = drawn {
        web_sys::console::warn_1(&format!("schedule-preview: {error}").into());
    }
}
