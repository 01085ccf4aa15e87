//! The page's current model: the last run's, the one kept in this browser from an earlier
//! visit, or one loaded from a `.safetensors` file (ours or PyTorch's). The worker holds the
//! model itself, to evaluate, predict and train on from; the page holds its file, to download
//! and to keep.

use std::rc::Rc;

use web_sys::HtmlInputElement;

use super::dom::{by_id, set_text};
use super::error::PageError;
use super::state::{ModelFile, Shared};
use super::{download, storage};
use crate::config::ModelKind;
use crate::session::protocol::{LoadModel, Payload};
use crate::weights::MAX_WEIGHTS_BYTES;

fn show(page: &Shared, model: ModelFile, how: &str) {
    set_text("model-status", &format!("{how}: {}", model.about));
    page.borrow_mut().model = Some(Rc::new(model));
    page.borrow().render();
}

/// Makes `model`, which the worker already holds, the page's model and keeps it in this
/// browser; a browser that cannot keep it still has it until the page closes.
pub async fn keep(page: &Shared, model: ModelFile) -> Result<(), PageError> {
    let stored = storage::StoredModel {
        kind: model.kind,
        weights: model.weights.clone(),
        about: model.about.clone(),
    };
    let how = match storage::save(&stored).await {
        Ok(()) => "Kept in this browser".to_string(),
        Err(PageError::Storage(reason)) => format!("Not kept in this browser: {reason}"),
        Err(error) => format!("Not kept in this browser: {error}"),
    };
    show(page, model, &how);
    Ok(())
}

/// Hands a weights file to the worker, which checks it against `kind`.
async fn load(page: &Shared, model: &ModelFile) -> Result<(), PageError> {
    let trainer = page.borrow().trainer.clone();
    let weights = Payload::from(model.weights.clone());
    let kind = model.kind;
    trainer.ask(LoadModel { kind, weights }).await
}

/// The model kept by an earlier visit, if any.
pub async fn restore(page: &Shared) -> Result<(), PageError> {
    let Some(stored) = storage::load().await? else {
        return Ok(());
    };
    let model = ModelFile {
        kind: stored.kind,
        weights: stored.weights,
        about: stored.about,
    };
    load(page, &model).await?;
    show(page, model, "Restored from this browser");
    Ok(())
}

/// The weights file the user chose, for the model the form names.
pub async fn load_file(page: &Shared, kind: ModelKind) -> Result<(), PageError> {
    let file = by_id::<HtmlInputElement>("weights-file")
        .files()
        .and_then(|list| list.get(0))
        .ok_or(PageError::MissingFile("the weights file"))?;
    let name = file.name();
    let model = ModelFile {
        kind,
        weights: download::read_file(&name, file, MAX_WEIGHTS_BYTES).await?,
        about: format!("{kind} from {name}"),
    };
    load(page, &model).await?;
    keep(page, model).await
}
