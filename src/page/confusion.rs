//! The test set's confusion matrix after each epoch, and the digits of a cell clicked.

use wasm_bindgen::JsCast;
use web_sys::Element;

use super::digit::{digit_figure, element};
use super::dom::{self, by_id, set_text};
use super::error::PageError;
use super::inside;
use super::state::Shared;
use crate::model::CLASSES;
use crate::session::protocol::Confused;
use crate::train::EpochReport;

/// The confusion matrix as a table: rows are true digits, columns predicted ones.
pub fn show(report: &EpochReport) {
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
        let pixels = digit.pixels.bytes().to_vec();
        let figure = digit_figure(&pixels, &format!("{percent:.0} %"), &title);
        let about = format!("test image {}", digit.index);
        inside::make_lookable(page, &figure, pixels, about);
        let _ = shown.append_child(&figure);
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
pub fn wire(page: &Shared) {
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
