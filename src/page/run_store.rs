//! The runs this browser keeps, in IndexedDB: each run's record as JSON (settings, curves, end)
//! and, apart, its weights. A run's record is written as it trains, so a closed tab keeps what
//! was trained until then. A write the browser refuses (its quota spent) is an error to show.

use js_sys::{Array, Promise, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{IdbTransaction, IdbTransactionMode};

use super::error::PageError;
use super::storage::{RUN_WEIGHTS, RUNS, committed, failed, finished, on_commit, open};
use crate::runs::RunRecord;

/// A transaction that writes both stores, and what its commit will settle.
async fn write_both() -> Result<(IdbTransaction, Promise), PageError> {
    let database = open().await?;
    let stores = Array::of2(&RUNS.into(), &RUN_WEIGHTS.into());
    let transaction = database
        .transaction_with_str_sequence_and_mode(&stores, IdbTransactionMode::Readwrite)
        .map_err(failed)?;
    let writes = on_commit(&transaction);
    Ok((transaction, writes))
}

/// Writes `run`'s record, and its weights when given, in one transaction.
pub async fn put(run: &RunRecord, weights: Option<&[u8]>) -> Result<(), PageError> {
    let (transaction, writes) = write_both().await?;
    let json = serde_json::to_string(run).expect("a run is plain data");
    let key = JsValue::from(run.id.as_str());
    let records = transaction.object_store(RUNS).map_err(failed)?;
    records.put_with_key(&json.into(), &key).map_err(failed)?;
    if let Some(weights) = weights {
        let store = transaction.object_store(RUN_WEIGHTS).map_err(failed)?;
        store
            .put_with_key(&Uint8Array::from(weights).into(), &key)
            .map_err(failed)?;
    }
    committed(&transaction, writes).await
}

/// Every kept run, and how many records could not be read (a newer page's, or damaged).
pub async fn all() -> Result<(Vec<RunRecord>, usize), PageError> {
    let database = open().await?;
    let transaction = database.transaction_with_str(RUNS).map_err(failed)?;
    let store = transaction.object_store(RUNS).map_err(failed)?;
    let values: Array = finished(&store.get_all().map_err(failed)?)
        .await?
        .dyn_into()
        .map_err(failed)?;
    let mut runs = Vec::new();
    let mut unreadable = 0;
    for value in values.iter() {
        let run = value
            .as_string()
            .and_then(|json| serde_json::from_str::<RunRecord>(&json).ok());
        match run {
            Some(run) => runs.push(run),
            None => unreadable += 1,
        }
    }
    Ok((runs, unreadable))
}

/// A kept run's weights, if they were kept.
pub async fn weights(id: &str) -> Result<Option<Vec<u8>>, PageError> {
    let database = open().await?;
    let transaction = database.transaction_with_str(RUN_WEIGHTS).map_err(failed)?;
    let store = transaction.object_store(RUN_WEIGHTS).map_err(failed)?;
    let value = finished(&store.get(&id.into()).map_err(failed)?).await?;
    Ok(value
        .dyn_into::<Uint8Array>()
        .ok()
        .map(|bytes| bytes.to_vec()))
}

/// Forgets a run: its record and its weights.
pub async fn delete(id: &str) -> Result<(), PageError> {
    let (transaction, writes) = write_both().await?;
    for store in [RUNS, RUN_WEIGHTS] {
        let store = transaction.object_store(store).map_err(failed)?;
        store.delete(&id.into()).map_err(failed)?;
    }
    committed(&transaction, writes).await
}
