//! The user's own digits, kept in this browser's IndexedDB as MNIST's two IDX files.

use js_sys::{Object, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use web_sys::IdbTransactionMode;

use super::error::PageError;
use super::storage::{DIGITS, committed, failed, finished, on_commit, open};
use crate::data::MnistSplit;
use crate::data::idx::{parse_images, parse_labels};

const KEY: &str = "collection";

/// Keeps `digits` in place of what was kept.
pub async fn save(digits: &MnistSplit) -> Result<(), PageError> {
    let database = open().await?;
    let transaction = database
        .transaction_with_str_and_mode(DIGITS, IdbTransactionMode::Readwrite)
        .map_err(failed)?;
    let writes = on_commit(&transaction);
    let (images, labels) = digits.to_idx();
    let value = Object::new();
    for (key, bytes) in [("images", images), ("labels", labels)] {
        let field = Uint8Array::from(bytes.as_slice());
        Reflect::set(&value, &key.into(), &field).map_err(failed)?;
    }
    let store = transaction.object_store(DIGITS).map_err(failed)?;
    store.put_with_key(&value, &KEY.into()).map_err(failed)?;
    committed(&transaction, writes).await
}

/// The kept digits; none when nothing is kept.
pub async fn load() -> Result<Option<MnistSplit>, PageError> {
    let database = open().await?;
    let transaction = database.transaction_with_str(DIGITS).map_err(failed)?;
    let store = transaction.object_store(DIGITS).map_err(failed)?;
    let value = finished(&store.get(&KEY.into()).map_err(failed)?).await?;
    if value.is_undefined() {
        return Ok(None);
    }
    let bytes = |key: &str| -> Result<Vec<u8>, PageError> {
        let field: JsValue = Reflect::get(&value, &key.into()).map_err(failed)?;
        let array: Uint8Array = field
            .dyn_into()
            .map_err(|_| PageError::Storage("the kept digits are damaged".into()))?;
        Ok(array.to_vec())
    };
    let damaged = |e: String| PageError::Storage(format!("the kept digits are damaged: {e}"));
    let images = parse_images("images", &bytes("images")?).map_err(|e| damaged(e.to_string()))?;
    let labels = parse_labels("labels", &bytes("labels")?).map_err(|e| damaged(e.to_string()))?;
    MnistSplit::from_parts(images, labels)
        .map(Some)
        .map_err(|e| damaged(e.to_string()))
}
