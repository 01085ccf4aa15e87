//! Files in and out of the page: MNIST downloaded from the page's own origin or the user's
//! files, and the trained weights saved as a download.

use js_sys::{Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    Blob, BlobPropertyBag, File, HtmlAnchorElement, HtmlInputElement, ReadableStreamDefaultReader,
    Response, Url,
};

use super::PageError;
use super::dom::{by_id, js_error};
use crate::config::ModelKind;
use crate::data::{
    MAX_IDX_BYTES, Mnist, MnistSplit, TEST_IMAGES, TEST_LABELS, TRAIN_IMAGES, TRAIN_LABELS,
};

/// The four files in the order they are fetched, each with the id of its file input.
const FILES: [(&str, &str); 4] = [
    (TRAIN_IMAGES, "file-train-images"),
    (TRAIN_LABELS, "file-train-labels"),
    (TEST_IMAGES, "file-test-images"),
    (TEST_LABELS, "file-test-labels"),
];

/// Files named as the user knows them: MNIST's names when downloaded, their own otherwise.
fn split(files: &[(String, Vec<u8>)]) -> Result<Mnist, PageError> {
    let [(ti, tib), (tl, tlb), (ei, eib), (el, elb)] = files else {
        unreachable!("four files")
    };
    Ok(Mnist {
        train: MnistSplit::from_idx(ti, tib, tl, tlb)?,
        test: MnistSplit::from_idx(ei, eib, el, elb)?,
    })
}

/// Streams `url` into memory, reporting the fraction received; refuses more than any MNIST
/// file can hold.
async fn fetch_bytes(
    file: &str,
    url: &str,
    on_progress: &dyn Fn(f64),
) -> Result<Vec<u8>, PageError> {
    let failed = |message: String| PageError::Download {
        file: file.to_string(),
        message,
    };
    let window = web_sys::window().expect("a window");
    let response: Response = JsFuture::from(window.fetch_with_str(url))
        .await
        .and_then(|r| r.dyn_into())
        .map_err(|e| failed(js_error(e)))?;
    if !response.ok() {
        return Err(failed(format!("HTTP {} for {url}", response.status())));
    }
    let length = response
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|l| l.parse::<f64>().ok());
    let body = response
        .body()
        .ok_or_else(|| failed("empty response".into()))?;
    let reader: ReadableStreamDefaultReader = body
        .get_reader()
        .dyn_into()
        .map_err(|e| failed(js_error(e.into())))?;
    let mut bytes = Vec::new();
    loop {
        let chunk = JsFuture::from(reader.read())
            .await
            .map_err(|e| failed(js_error(e)))?;
        if Reflect::get(&chunk, &"done".into())
            .ok()
            .and_then(|d| d.as_bool())
            .unwrap_or(true)
        {
            break;
        }
        let value: Uint8Array = Reflect::get(&chunk, &"value".into())
            .and_then(|v| v.dyn_into())
            .map_err(|e| failed(js_error(e)))?;
        let start = bytes.len();
        if (start + value.length() as usize) as u64 > MAX_IDX_BYTES {
            return Err(PageError::TooLarge {
                file: file.to_string(),
                limit: MAX_IDX_BYTES as usize,
            });
        }
        bytes.resize(start + value.length() as usize, 0);
        value.copy_to(&mut bytes[start..]);
        // A server may send the .gz with Content-Encoding: then more bytes arrive than announced.
        if let Some(length) = length {
            on_progress((bytes.len() as f64 / length).min(1.0));
        }
    }
    Ok(bytes)
}

/// Downloads the gzipped MNIST files served beside the page, reporting overall progress.
pub async fn download(on_progress: impl Fn(f64, &str)) -> Result<Mnist, PageError> {
    let mut files = Vec::new();
    for (index, (name, _)) in FILES.iter().enumerate() {
        let report =
            |fraction: f64| on_progress((index as f64 + fraction) / FILES.len() as f64, name);
        report(0.0);
        files.push((
            name.to_string(),
            fetch_bytes(name, &format!("./{name}.gz"), &report).await?,
        ));
    }
    on_progress(1.0, "parsing");
    split(&files)
}

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
        .map_err(|e| PageError::Download {
            file: name.to_string(),
            message: js_error(e),
        })?;
    Ok(Uint8Array::new(&buffer).to_vec())
}

/// The user's four IDX files (raw or gzip) from the file inputs.
pub async fn from_inputs() -> Result<Mnist, PageError> {
    let mut files = Vec::new();
    for (name, input) in FILES {
        let file = by_id::<HtmlInputElement>(input)
            .files()
            .and_then(|list| list.get(0))
            .ok_or(PageError::MissingFile(name))?;
        let label = file.name();
        let bytes = read_file(&label, file, MAX_IDX_BYTES as usize).await?;
        files.push((label, bytes));
    }
    split(&files)
}

/// Offers weights as `webtrain-<model>.safetensors`; returns what the page says about it.
pub fn save_weights(weights: &[u8], kind: ModelKind) -> Result<String, PageError> {
    let refused = |e: JsValue| PageError::Save(js_error(e));
    let parts = js_sys::Array::of1(&Uint8Array::from(weights));
    let options = BlobPropertyBag::new();
    options.set_type("application/octet-stream");
    let blob = Blob::new_with_u8_array_sequence_and_options(&parts, &options).map_err(refused)?;
    let url = Url::create_object_url_with_blob(&blob).map_err(refused)?;
    let name = format!("webtrain-{kind}.safetensors");
    let link: HtmlAnchorElement = super::dom::document()
        .create_element("a")
        .map_err(refused)?
        .unchecked_into();
    link.set_href(&url);
    link.set_download(&name);
    link.click();
    let _ = Url::revoke_object_url(&url);
    Ok(format!(
        "Saved {name} ({:.1} MB)",
        weights.len() as f64 / 1e6
    ))
}
