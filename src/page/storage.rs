//! This browser's IndexedDB: the database and its stores, and the last trained or loaded
//! model, kept so that it survives a reload (its weights as `.safetensors` bytes, its kind and a
//! line saying what it is). The runs kept to compare are `run_store`'s.

use js_sys::{Object, Promise, Reflect, Uint8Array};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    Event, IdbDatabase, IdbOpenDbRequest, IdbRequest, IdbTransaction, IdbTransactionMode,
};

use super::error::PageError;
use crate::config::ModelKind;
use crate::platform::js_error;

const DATABASE: &str = "webtrain";
/// The database's version: 2 added the runs' stores, 3 the user's digits.
const VERSION: u32 = 3;
const STORE: &str = "models";
const KEY: &str = "last";
/// Each kept run's record, as JSON, by its id.
pub(super) const RUNS: &str = "runs";
/// Each kept run's weights, by its id: apart, so that listing runs reads no weights.
pub(super) const RUN_WEIGHTS: &str = "run-weights";
/// The user's own digits, as MNIST's two IDX files.
pub(super) const DIGITS: &str = "digits";

pub struct StoredModel {
    pub kind: ModelKind,
    pub weights: Vec<u8>,
    /// What the page says about it, e.g. "lenet, trained on the CPU: 98.24% on 10000 test images".
    pub about: String,
}

pub(super) fn failed(error: JsValue) -> PageError {
    PageError::Storage(js_error(error))
}

/// Waits for a request to succeed.
pub(super) async fn finished(request: &IdbRequest) -> Result<JsValue, PageError> {
    let promise = Promise::new(&mut |resolve, reject| {
        request.set_onsuccess(Some(&resolve));
        request.set_onerror(Some(&reject));
    });
    JsFuture::from(promise).await.map_err(|_| {
        let reason = request.error().ok().flatten().map(|e| e.message());
        PageError::Storage(reason.unwrap_or_else(|| "the request failed".into()))
    })?;
    request.result().map_err(failed)
}

/// Waits for a transaction to commit: its writes are kept only then. A full disk or a spent
/// quota aborts it after its requests succeeded, with the reason as its error.
pub(super) async fn committed(
    transaction: &IdbTransaction,
    writes: Promise,
) -> Result<(), PageError> {
    JsFuture::from(writes).await.map_err(|_| {
        let reason = transaction
            .error()
            .map(|error| format!("{}: {}", error.name(), error.message()));
        PageError::Storage(reason.unwrap_or_else(|| "the browser aborted the write".into()))
    })?;
    Ok(())
}

pub(super) async fn open() -> Result<IdbDatabase, PageError> {
    let factory = web_sys::window()
        .and_then(|window| window.indexed_db().ok().flatten())
        .ok_or_else(|| PageError::Storage("this browser has no IndexedDB".into()))?;
    let request: IdbOpenDbRequest = factory.open_with_u32(DATABASE, VERSION).map_err(failed)?;
    // The first open of a version in this browser creates the stores it lacks.
    let create = Closure::once_into_js(move |event: Event| {
        let database = event
            .target()
            .and_then(|target| target.dyn_into::<IdbOpenDbRequest>().ok())
            .and_then(|request| request.result().ok())
            .and_then(|result| result.dyn_into::<IdbDatabase>().ok());
        if let Some(database) = database {
            // A store the database has already is refused (ConstraintError), and stays as it is.
            for store in [STORE, RUNS, RUN_WEIGHTS, DIGITS] {
                let _ = database.create_object_store(store);
            }
        }
    });
    request.set_onupgradeneeded(Some(create.unchecked_ref()));
    finished(&request).await?.dyn_into().map_err(failed)
}

/// What a write transaction's commit or abort will settle. Made before any request: the
/// transaction may end before an await returns.
pub(super) fn on_commit(transaction: &IdbTransaction) -> Promise {
    Promise::new(&mut |resolve, reject| {
        transaction.set_oncomplete(Some(&resolve));
        transaction.set_onabort(Some(&reject));
    })
}

pub async fn save(model: &StoredModel) -> Result<(), PageError> {
    let database = open().await?;
    let transaction = database
        .transaction_with_str_and_mode(STORE, IdbTransactionMode::Readwrite)
        .map_err(failed)?;
    let writes = on_commit(&transaction);
    let store = transaction.object_store(STORE).map_err(failed)?;
    let value = Object::new();
    let weights = Uint8Array::from(model.weights.as_slice());
    for (key, field) in [
        ("kind", JsValue::from(model.kind.to_string())),
        ("weights", weights.into()),
        ("about", JsValue::from(model.about.as_str())),
    ] {
        Reflect::set(&value, &key.into(), &field).map_err(failed)?;
    }
    store.put_with_key(&value, &KEY.into()).map_err(failed)?;
    committed(&transaction, writes).await
}

/// The kept model, if there is one and it is still readable.
pub async fn load() -> Result<Option<StoredModel>, PageError> {
    let database = open().await?;
    let transaction = database.transaction_with_str(STORE).map_err(failed)?;
    let store = transaction.object_store(STORE).map_err(failed)?;
    let value = finished(&store.get(&KEY.into()).map_err(failed)?).await?;
    if value.is_undefined() {
        return Ok(None);
    }
    let field = |key: &str| Reflect::get(&value, &key.into()).map_err(failed);
    let kind = field("kind")?
        .as_string()
        .and_then(|kind| kind.parse().ok())
        .ok_or_else(|| PageError::Storage("the kept model names no known model".into()))?;
    let weights: Uint8Array = field("weights")?
        .dyn_into()
        .map_err(|_| PageError::Storage("the kept model has no weights".into()))?;
    Ok(Some(StoredModel {
        kind,
        weights: weights.to_vec(),
        about: field("about")?.as_string().unwrap_or_default(),
    }))
}
