//! "Fine-tune on my digits": the current model trained on one's own digits with the form's
//! settings (freeze, MNIST's share) and a fine-tune's own epochs and learning rate, low by
//! default; then the model before and after, side by side, and the digits that changed verdict.

use wasm_bindgen::JsCast;
use web_sys::Element;

use super::collection;
use super::digit::digit_figure;
use super::dom::{self, by_id, document, set_text};
use super::form::form_config;
use super::run::{self, FineTune, begin_run};
use super::state::{Shared, fail};
use crate::config::{ConfigError, TrainConfig};
use crate::data::IMAGE_PIXELS;
use crate::session::protocol::{FineTuned, OwnDigits, Payload};
use crate::train::fine_tune::Measured;

/// A fine-tune's own epochs and learning rate, by their settings' names: a few passes, at a
/// tenth of a fresh run's rate, so that what the model knows is moved, not replaced.
const FINE_TUNE_SETTINGS: [(&str, &str); 2] = [("epochs", "5"), ("lr", "0.001")];

pub(super) fn wire(page: &Shared) {
    for (name, value) in FINE_TUNE_SETTINGS {
        dom::set_value(&format!("fine-tune-{name}"), value);
    }
    let s = page.clone();
    dom::on("fine-tune", "click", move |_| {
        let Some(own) = collection::digits() else {
            set_text("collection-status", "Add some digits of your own first.");
            return;
        };
        // The form's settings with the fine-tune's own, checked whole before the run begins.
        let overrides: Vec<(&str, String)> = FINE_TUNE_SETTINGS
            .iter()
            .map(|(name, _)| (*name, dom::value(&format!("fine-tune-{name}"))))
            .collect();
        let config = match form_config().and_then(|c| with_overrides(c, &overrides)) {
            Ok(config) => config,
            Err(error) => return set_text("collection-status", &error.to_string()),
        };
        // The form's settings once more, as a run checks them; ours are those with overrides.
        let Some((_, choice, train_len)) = begin_run(&s) else {
            return;
        };
        set_text("collection-status", "Fine-tuning on your digits…");
        let s = s.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let digits = OwnDigits {
                images: Payload::from(own.0),
                labels: Payload::from(own.1),
            };
            let fine_tune = FineTune { digits, show };
            if let Err(error) = run::run(&s, config, choice, train_len, Some(fine_tune)).await {
                fail(&error.to_string());
            }
        });
    });
}

/// `config` with the fine-tune's own settings in place, validated.
fn with_overrides(
    mut config: TrainConfig,
    overrides: &[(&str, String)],
) -> Result<TrainConfig, ConfigError> {
    for (name, value) in overrides {
        config.set(name, value)?;
    }
    config.validate()?;
    Ok(config)
}

fn mnist(measured: &Measured) -> String {
    measured
        .mnist_accuracy
        .map_or("–".into(), |a| format!("{a:.2}%"))
}

/// The model before and after, and each held-out digit whose verdict changed.
fn show(judged: &FineTuned) {
    let (before, after) = (&judged.before, &judged.after);
    let rows = [
        (
            "your held-out digits",
            format!("{:.1}%", before.held_out.accuracy()),
            format!("{:.1}%", after.held_out.accuracy()),
        ),
        ("MNIST's test set", mnist(before), mnist(after)),
    ];
    let table = by_id::<Element>("fine-tune-report");
    table.set_inner_html(
        "<tr><th></th><th scope=\"col\">before</th><th scope=\"col\">after</th></tr>",
    );
    for (what, was, now) in rows {
        let row = document().create_element("tr").expect("a row");
        for (tag, text) in [("th", what), ("td", was.as_str()), ("td", now.as_str())] {
            let cell = document().create_element(tag).expect("a cell");
            cell.set_text_content(Some(text));
            let _ = row.append_child(&cell);
        }
        let _ = table.append_child(&row);
    }
    let figures = table.unchecked_ref::<web_sys::HtmlElement>().dataset();
    let _ = figures.set("heldOutBefore", &before.held_out.accuracy().to_string());
    let _ = figures.set("heldOutAfter", &after.held_out.accuracy().to_string());
    let mnist_accuracy = |m: &Measured| m.mnist_accuracy.map(|a| a.to_string()).unwrap_or_default();
    let _ = figures.set("mnistBefore", &mnist_accuracy(before));
    let _ = figures.set("mnistAfter", &mnist_accuracy(after));
    let changed = by_id::<Element>("fine-tune-changed");
    changed.set_text_content(None);
    let images = judged.changed_images.bytes();
    for (change, pixels) in judged.changed.iter().zip(images.chunks_exact(IMAGE_PIXELS)) {
        let verdict = if change.fixed() {
            "now right"
        } else {
            "now wrong"
        };
        let caption = format!("{} → {}", change.before, change.after);
        let title = format!("your {}: {caption}, {verdict}", change.label);
        let figure = digit_figure(pixels, &caption, &title);
        figure.set_class_name(if change.fixed() { "right" } else { "mistake" });
        let _ = changed.append_child(&figure);
    }
    set_text(
        "collection-status",
        &format!(
            "Fine-tuned: {} of your held-out digits changed verdict.",
            judged.changed.len()
        ),
    );
}
