//! The page's current model: the last run's, the one kept in this browser from an earlier
//! visit, or one loaded from a `.safetensors` file (ours or PyTorch's). It lives on the CPU
//! backend, whatever trained it: evaluating and predicting need no GPU, and training on from it
//! copies it to the run's device.

use std::rc::Rc;

use burn::prelude::Device;
use web_sys::{HtmlButtonElement, HtmlInputElement};

use super::dom::{by_id, set_text};
use super::{PageError, Shared, download, storage};
use crate::config::ModelKind;
use crate::data::MnistBatcher;
use crate::model::Net;
use crate::train::{EpochReport, evaluate};
use crate::weights::{MAX_WEIGHTS_BYTES, from_safetensors, to_cpu, to_safetensors};

pub struct CurrentModel {
    pub net: Net,
    pub kind: ModelKind,
    /// Its `.safetensors` file, as downloaded and as kept in IndexedDB.
    pub weights: Vec<u8>,
    pub about: String,
}

fn show(model: &CurrentModel, how: &str) {
    set_text("model-status", &format!("{how}: {}", model.about));
    for button in ["download-weights", "evaluate"] {
        by_id::<HtmlButtonElement>(button).set_disabled(false);
    }
}

impl CurrentModel {
    /// From a `.safetensors` file's bytes, checked against `kind`.
    pub fn from_file(weights: Vec<u8>, kind: ModelKind, about: String) -> Result<Self, PageError> {
        Ok(Self {
            net: from_safetensors(weights.clone(), kind, &Device::flex())?,
            kind,
            weights,
            about,
        })
    }

    /// A trained model on any device, copied to the CPU and written once.
    pub async fn from_trained(
        net: &Net,
        kind: ModelKind,
        about: String,
    ) -> Result<Self, PageError> {
        let net = to_cpu(net, kind).await?;
        Ok(Self {
            weights: to_safetensors(&net)?,
            net,
            kind,
            about,
        })
    }
}

/// Makes `model` the page's model and keeps it in this browser; a browser that cannot keep it
/// still has it until the page closes.
pub async fn keep(session: &Shared, model: CurrentModel) -> Result<(), PageError> {
    let kind = model.kind;
    let stored = storage::StoredModel {
        kind,
        weights: model.weights.clone(),
        about: model.about.clone(),
    };
    let how = match storage::save(&stored).await {
        Ok(()) => "Kept in this browser",
        Err(_) => "Not kept in this browser (no storage)",
    };
    show(&model, how);
    session.borrow_mut().model = Some(Rc::new(model));
    Ok(())
}

/// The model kept by an earlier visit, if any.
pub async fn restore(session: &Shared) -> Result<(), PageError> {
    let Some(stored) = storage::load().await? else {
        return Ok(());
    };
    let model = CurrentModel::from_file(stored.weights, stored.kind, stored.about)?;
    show(&model, "Restored from this browser");
    session.borrow_mut().model = Some(Rc::new(model));
    Ok(())
}

/// The weights file the user chose, for the model the form names.
pub async fn load_file(session: &Shared, kind: ModelKind) -> Result<(), PageError> {
    let file = by_id::<HtmlInputElement>("weights-file")
        .files()
        .and_then(|list| list.get(0))
        .ok_or(PageError::MissingFile("the weights file"))?;
    let name = file.name();
    let weights = download::read_file(&name, file, MAX_WEIGHTS_BYTES).await?;
    let model = CurrentModel::from_file(weights, kind, format!("{kind} from {name}"))?;
    keep(session, model).await
}

/// The current model's test loss and accuracy on the first `len` test images.
pub async fn evaluate_on_test(session: &Shared, len: usize) -> Result<EpochReport, PageError> {
    let (model, data) = {
        let session = session.borrow();
        (session.model.clone(), session.data.clone())
    };
    let (Some(model), Some(data)) = (model, data) else {
        return Err(PageError::NoModel);
    };
    let len = data.test.len_within(Some(len));
    let batcher = MnistBatcher::new(Device::flex());
    Ok(evaluate(&model.net, &data.test, len, &batcher, 0).await?)
}

/// The current model, to train on from: it must be of the model the form names.
pub fn to_train_from(session: &Shared, kind: ModelKind) -> Result<Net, PageError> {
    match &session.borrow().model {
        Some(model) if model.kind == kind => Ok(model.net.clone()),
        Some(model) => Err(PageError::OtherModel {
            loaded: model.kind,
            chosen: kind,
        }),
        None => Err(PageError::NoModel),
    }
}
