//! The user's files in and out of the page: their own MNIST files and weights read in, the
//! trained model saved as a download (its weights, or an ONNX model).

use js_sys::Uint8Array;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{Blob, BlobPropertyBag, File, HtmlAnchorElement, HtmlInputElement, Url};

use super::dom::by_id;
use super::error::PageError;
use crate::config::ModelKind;
use crate::data::{MAX_IDX_BYTES, TEST_IMAGES, TEST_LABELS, TRAIN_IMAGES, TRAIN_LABELS};
use crate::platform::js_error;
use crate::session::protocol::NamedFile;

/// The training pair, then the test pair, in the order the worker takes them, each file with
/// the id of its input.
const PAIRS: [[(&str, &str); 2]; 2] = [
    [
        (TRAIN_IMAGES, "file-train-images"),
        (TRAIN_LABELS, "file-train-labels"),
    ],
    [
        (TEST_IMAGES, "file-test-images"),
        (TEST_LABELS, "file-test-labels"),
    ],
];

/// A file the user chose, read into memory unless it is larger than `limit` bytes.
pub async fn read_file(name: &str, file: File, limit: usize) -> Result<Vec<u8>, PageError> {
    if file.size() > limit as f64 {
        return Err(PageError::TooLarge {
            file: file.name(),
            limit,
        });
    }
    let buffer = JsFuture::from(file.array_buffer())
        .await
        .map_err(|e| PageError::Read {
            file: name.to_string(),
            message: js_error(e),
        })?;
    Ok(Uint8Array::new(&buffer).to_vec())
}

/// The files chosen: the training pair, and the test pair when both its files are chosen (with
/// none, the engine holds a fifth of the training pair out).
pub async fn from_inputs() -> Result<Vec<NamedFile>, PageError> {
    let chosen = |input: &str| by_id::<HtmlInputElement>(input).files()?.get(0);
    let [train, test] = PAIRS.map(|pair| pair.map(|(name, input)| (name, chosen(input))));
    let test = match test {
        [(_, None), (_, None)] => Vec::new(),
        test => test.to_vec(),
    };
    let mut files = Vec::new();
    for (name, file) in train.into_iter().chain(test) {
        let file = file.ok_or(PageError::MissingFile(name))?;
        let label = file.name();
        let bytes = read_file(&label, file, MAX_IDX_BYTES as usize).await?;
        files.push(NamedFile {
            name: label,
            bytes: bytes.into(),
        });
    }
    Ok(files)
}

/// Offers weights as `webtrain-<model>.safetensors`; returns what the page says about it.
pub fn save_weights(weights: &[u8], kind: ModelKind) -> Result<String, PageError> {
    save_model(weights, &format!("webtrain-{kind}.safetensors"))
}

/// Offers the model as `webtrain-<model>.onnx`; returns what the page says about it.
pub fn save_onnx(onnx: &[u8], kind: ModelKind) -> Result<String, PageError> {
    save_model(onnx, &format!("webtrain-{kind}.onnx"))
}

fn save_model(bytes: &[u8], name: &str) -> Result<String, PageError> {
    save_file(bytes, name, "application/octet-stream")?;
    Ok(format!("Saved {name} ({:.1} MB)", bytes.len() as f64 / 1e6))
}

/// Offers `bytes` as a download named `name`.
pub fn save_file(bytes: &[u8], name: &str, mime: &str) -> Result<(), PageError> {
    let refused = |e: JsValue| PageError::Save(js_error(e));
    let parts = js_sys::Array::of1(&Uint8Array::from(bytes));
    let options = BlobPropertyBag::new();
    options.set_type(mime);
    let blob = Blob::new_with_u8_array_sequence_and_options(&parts, &options).map_err(refused)?;
    let url = Url::create_object_url_with_blob(&blob).map_err(refused)?;
    let link: HtmlAnchorElement = super::dom::document()
        .create_element("a")
        .map_err(refused)?
        .unchecked_into();
    link.set_href(&url);
    link.set_download(name);
    link.click();
    let _ = Url::revoke_object_url(&url);
    Ok(())
}
