//! MNIST in the worker: downloaded from the page's own origin once, then read from the
//! browser's cache ([`MnistCache`]); or parsed from the user's files.

use js_sys::{Reflect, Uint8Array};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{ReadableStreamDefaultReader, Response, WorkerGlobalScope};

use crate::data::{MAX_IDX_BYTES, Mnist, TEST_IMAGES, TEST_LABELS, TRAIN_IMAGES, TRAIN_LABELS};
use crate::platform::js_error;
use crate::session::protocol::NamedFile;
use crate::session::{SessionError, mnist_from_files};

use super::cache::MnistCache;

/// MNIST's four files in the order they are fetched and given.
const FILES: [&str; 4] = [TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS];

/// `url` from the browser's cache, or else downloaded (and a copy kept there), streamed into
/// memory with the fraction received reported; refuses more than any MNIST file can hold.
async fn fetch_bytes(
    file: &str,
    url: &str,
    cache: Option<&MnistCache>,
    on_progress: &dyn Fn(f64),
) -> Result<Vec<u8>, SessionError> {
    let failed = |message: String| SessionError::Download {
        file: file.to_string(),
        message,
    };
    if let Some(kept) = match cache {
        Some(cache) => cache.get(url).await,
        None => None,
    } {
        return read_body(file, kept, on_progress).await;
    }
    let scope: WorkerGlobalScope = js_sys::global().unchecked_into();
    let response: Response = JsFuture::from(scope.fetch_with_str(url))
        .await
        .and_then(|r| r.dyn_into())
        .map_err(|e| failed(js_error(e)))?;
    if !response.ok() {
        return Err(failed(format!("HTTP {} for {url}", response.status())));
    }
    // The copy is kept once the whole body has come: a download cut short keeps nothing.
    let copy = cache.and_then(|_| response.clone().ok());
    let bytes = read_body(file, response, on_progress).await?;
    if let (Some(cache), Some(copy)) = (cache, copy) {
        cache.put(url, &copy).await;
    }
    Ok(bytes)
}

/// A response's body, streamed into memory.
async fn read_body(
    file: &str,
    response: Response,
    on_progress: &dyn Fn(f64),
) -> Result<Vec<u8>, SessionError> {
    let failed = |message: String| SessionError::Download {
        file: file.to_string(),
        message,
    };
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
            return Err(SessionError::TooLarge {
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

/// The gzipped MNIST files served beside the page, from the browser's cache once downloaded,
/// reporting overall progress.
pub async fn download(on_progress: &dyn Fn(f64, &str)) -> Result<Mnist, SessionError> {
    let cache = MnistCache::open().await;
    let mut files = Vec::new();
    for (index, name) in FILES.iter().enumerate() {
        let report =
            |fraction: f64| on_progress((index as f64 + fraction) / FILES.len() as f64, name);
        report(0.0);
        // Relative to the worker's script, which lies beside the page.
        let url = format!("./{name}.gz");
        let bytes = fetch_bytes(name, &url, cache.as_ref(), &report).await?;
        files.push(NamedFile {
            name: name.to_string(),
            bytes: bytes.into(),
        });
    }
    on_progress(1.0, "parsing");
    let parsed = mnist_from_files(files);
    if parsed.is_err() {
        MnistCache::clear().await;
    }
    parsed
}
