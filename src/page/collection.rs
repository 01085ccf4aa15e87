//! The user's own digits: added from the draw pad (a digit's button, or its key on the pad),
//! from the test gallery's mistakes with their true digit, or uploaded as images (PNG or JPEG,
//! one digit each); all brought into MNIST's form (`data::mnist_form`). Shown by digit, each
//! removable, kept in this browser, and exported as MNIST's two IDX files.

use std::cell::RefCell;

use js_sys::Promise;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{Blob, Element, HtmlButtonElement, HtmlCanvasElement, HtmlInputElement};

use super::digit::{digit_figure, drawn_digit};
use super::dom::{self, by_id, document, set_text};
use super::error::PageError;
use super::{digit_store, download};
use crate::data::MnistSplit;
use crate::data::mnist_form::{MAX_SIDE, from_rgba};
use crate::model::CLASSES;

/// An uploaded image larger than this is no photo of one digit.
const MAX_UPLOAD_BYTES: f64 = 16.0 * 1024.0 * 1024.0;

thread_local! {
    static DIGITS: RefCell<MnistSplit> = RefCell::new(MnistSplit::blank(0));
}

#[wasm_bindgen]
extern "C" {
    // The browser's image decoder and a 2D context's drawImage for what it decodes, without
    // web-sys's features for them.
    #[wasm_bindgen(js_name = createImageBitmap)]
    fn create_image_bitmap(image: &Blob) -> Promise;
    type Drawing;
    #[wasm_bindgen(method, js_name = drawImage)]
    fn draw_image(this: &Drawing, image: &JsValue, x: f64, y: f64);
}

pub(super) fn wire() {
    for digit in 0..CLASSES as u8 {
        dom::on(&format!("add-as-{digit}"), "click", move |_| {
            add_drawing(digit)
        });
    }
    dom::on("draw", "keydown", |event| {
        if let Some(Ok(digit)) = dom::key(&event).map(|k| k.parse::<u8>()) {
            add_drawing(digit);
        }
    });
    dom::on("upload-digits", "change", |_| {
        wasm_bindgen_futures::spawn_local(async {
            if let Err(error) = upload().await {
                set_text("collection-status", &error.to_string());
            }
        });
    });
    dom::on("export-digits", "click", |_| {
        if let Err(error) = export() {
            set_text("collection-status", &error.to_string());
        }
    });
    dom::on("collection-grid", "click", |event| {
        let target = event.target().and_then(|t| t.dyn_into::<Element>().ok());
        let index = target
            .and_then(|t| t.get_attribute("data-remove"))
            .and_then(|i| i.parse().ok());
        if let Some(index) = index {
            DIGITS.with(|d| d.borrow_mut().remove(index));
            changed("Removed.");
        }
    });
    wasm_bindgen_futures::spawn_local(async {
        match digit_store::load().await {
            Ok(Some(kept)) => DIGITS.with(|d| *d.borrow_mut() = kept),
            Ok(None) => {}
            Err(error) => set_text("collection-status", &error.to_string()),
        }
        render();
    });
}

/// The collection as its images (784 bytes each) and labels; none while it is empty.
pub(super) fn digits() -> Option<(Vec<u8>, Vec<u8>)> {
    let digits = DIGITS.with(|d| d.borrow().clone());
    (!digits.is_empty()).then(|| digits.into_parts())
}

/// Adds a digit in MNIST's form, labelled `label`.
pub(super) fn add(label: u8, pixels: &[u8]) {
    if DIGITS.with(|d| d.borrow_mut().push(label, pixels)) {
        changed(&format!("Added a {label}."));
    }
}

fn add_drawing(label: u8) {
    match drawn_digit(&by_id("draw")) {
        Some(pixels) => add(label, &pixels),
        None => set_text("collection-status", "Draw a digit first."),
    }
}

/// Shows the collection and keeps it.
fn changed(said: &str) {
    render();
    set_text("collection-status", said);
    let digits = DIGITS.with(|d| d.borrow().clone());
    wasm_bindgen_futures::spawn_local(async move {
        if let Err(error) = digit_store::save(&digits).await {
            set_text(
                "collection-status",
                &format!("Not kept in this browser: {error}"),
            );
        }
    });
}

/// The collection as a row a digit, each sample with its remove button.
fn render() {
    let grid = by_id::<Element>("collection-grid");
    grid.set_text_content(None);
    let digits = DIGITS.with(|d| d.borrow().clone());
    for label in 0..CLASSES as u8 {
        let samples: Vec<usize> = (0..digits.len())
            .filter(|&i| digits.label(i) == label)
            .collect();
        if samples.is_empty() {
            continue;
        }
        let row = document().create_element("div").expect("a div");
        row.set_class_name("digit-row");
        let _ = row.set_attribute("data-digit", &label.to_string());
        let heading = document().create_element("span").expect("a span");
        heading.set_text_content(Some(&format!("{label} ×{}", samples.len())));
        let _ = row.append_child(&heading);
        for index in samples {
            let figure = digit_figure(digits.image(index), "", &format!("your {label}"));
            let remove = document().create_element("button").expect("a button");
            remove.set_text_content(Some("×"));
            let _ = remove.set_attribute("type", "button");
            let _ = remove.set_attribute("data-remove", &index.to_string());
            let _ = remove.set_attribute("aria-label", &format!("Remove this {label}"));
            let _ = figure.append_child(&remove);
            let _ = row.append_child(&figure);
        }
        let _ = grid.append_child(&row);
    }
    let count = digits.len();
    by_id::<Element>("collection-empty").set_class_name(if count == 0 {
        ""
    } else {
        "visually-hidden"
    });
    by_id::<HtmlButtonElement>("export-digits").set_disabled(count == 0);
    by_id::<HtmlButtonElement>("fine-tune").set_disabled(count == 0);
    let _ = by_id::<Element>("collection-grid").set_attribute("data-count", &count.to_string());
}

/// The label an upload gets: the select's digit, or the first digit in the file's name.
fn upload_label(name: &str) -> Option<u8> {
    match dom::value("upload-label").parse::<u8>() {
        Ok(digit) => Some(digit),
        Err(_) => name.chars().find_map(|c| c.to_digit(10)).map(|d| d as u8),
    }
}

/// Adds each chosen image, or says why one is refused.
async fn upload() -> Result<(), PageError> {
    let input = by_id::<HtmlInputElement>("upload-digits");
    let Some(files) = input.files() else {
        return Ok(());
    };
    let (mut added, mut refused) = (0, Vec::new());
    for index in 0..files.length() {
        let Some(file) = files.get(index) else {
            continue;
        };
        let name = file.name();
        match decode(&file, &name).await {
            Ok(pixels) => match upload_label(&name) {
                Some(label) => {
                    DIGITS.with(|d| d.borrow_mut().push(label, &pixels));
                    added += 1;
                }
                None => refused.push(format!(
                    "{name}: which digit? Choose it, or name the file after it"
                )),
            },
            Err(why) => refused.push(format!("{name}: {why}")),
        }
    }
    input.set_value("");
    let said = match refused.is_empty() {
        true => format!("Added {added} uploaded digits."),
        false => format!("Added {added}; refused {}", refused.join("; ")),
    };
    changed(&said);
    Ok(())
}

/// An image file in MNIST's form, or why it is not a digit image.
async fn decode(file: &web_sys::File, name: &str) -> Result<Vec<u8>, String> {
    let kind = file.type_();
    if !matches!(kind.as_str(), "image/png" | "image/jpeg") {
        return Err(format!(
            "a PNG or JPEG image, not {}",
            if kind.is_empty() { "this" } else { &kind }
        ));
    }
    if file.size() > MAX_UPLOAD_BYTES {
        return Err("larger than 16 MiB".into());
    }
    let bitmap = JsFuture::from(create_image_bitmap(file))
        .await
        .map_err(|_| format!("{name} cannot be read as an image"))?;
    let size = |key: &str| {
        js_sys::Reflect::get(&bitmap, &key.into())
            .ok()
            .and_then(|v| v.as_f64())
    };
    let (width, height) = (size("width").unwrap_or(0.0), size("height").unwrap_or(0.0));
    if width < 1.0 || height < 1.0 || width > MAX_SIDE as f64 || height > MAX_SIDE as f64 {
        return Err(format!("{width}×{height} pixels: 1 to {MAX_SIDE} a side"));
    }
    let canvas: HtmlCanvasElement = document()
        .create_element("canvas")
        .map_err(|_| "no canvas".to_string())?
        .unchecked_into();
    canvas.set_width(width as u32);
    canvas.set_height(height as u32);
    let context = canvas
        .get_context("2d")
        .ok()
        .flatten()
        .ok_or("no 2D context")?;
    context
        .unchecked_ref::<Drawing>()
        .draw_image(&bitmap, 0.0, 0.0);
    let context: web_sys::CanvasRenderingContext2d = context.unchecked_into();
    let rgba = context
        .get_image_data(0.0, 0.0, width, height)
        .map_err(|_| "its pixels cannot be read".to_string())?
        .data();
    from_rgba(&rgba, width as usize, height as usize).map_err(|e| e.to_string())
}

/// Offers the collection as MNIST's training pair, which `--data` and "Use my own files" read.
fn export() -> Result<(), PageError> {
    let (images, labels) = DIGITS.with(|d| d.borrow().to_idx());
    download::save_file(
        &images,
        "train-images-idx3-ubyte",
        "application/octet-stream",
    )?;
    download::save_file(
        &labels,
        "train-labels-idx1-ubyte",
        "application/octet-stream",
    )?;
    set_text(
        "collection-status",
        "Exported your digits as train-images-idx3-ubyte and train-labels-idx1-ubyte.",
    );
    Ok(())
}
