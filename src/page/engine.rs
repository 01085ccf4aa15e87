//! The engine the page trains on, and its device: the native engine offered when there is one,
//! the device each choice selects said on the page, and MNIST and the current model taken to
//! the engine chosen.

use std::rc::Rc;

use web_sys::{HtmlElement, HtmlOptionElement};

use super::dom::{by_id, set_text};
use super::engines::EngineChoice;
use super::error::PageError;
use super::state::{Shared, use_data};
use super::trainer::Trainer;
use crate::device::BackendChoice;
use crate::session::protocol::{DeviceSelected, Download, LoadModel, Payload, SelectDevice};

/// Offers the native engine in the backend select and learns whether it has a GPU.
pub async fn offer_native(page: &Shared) -> Result<(), PageError> {
    let Some(native) = page.borrow().engines.native.clone() else {
        return Ok(());
    };
    // The backend line says which device and why once a run starts.
    let choice = BackendChoice::Auto;
    let selected = native.ask(SelectDevice { choice }).await?;
    let gpu = selected.fallback.is_none();
    if selected.hardware_gpus > 1 {
        let all = by_id::<HtmlOptionElement>("native-all-option");
        all.set_disabled(false);
        all.set_hidden(false);
        all.set_text(&format!("native — all GPUs ({})", selected.hardware_gpus));
    }
    let option = by_id::<HtmlOptionElement>("native-option");
    option.set_disabled(false);
    option.set_hidden(false);
    option.set_text(if gpu {
        "native — GPU"
    } else {
        "native — CPU"
    });
    page.borrow_mut().engines.native_gpu = gpu;
    Ok(())
}

/// Makes the engine `choice` trains on the page's: MNIST and the page's model go there first.
pub async fn use_engine(page: &Shared, choice: EngineChoice) -> Result<Rc<Trainer>, PageError> {
    let (engine, current) = {
        let page = page.borrow();
        (page.engines.for_choice(choice)?, page.trainer.clone())
    };
    if Rc::ptr_eq(&engine, &current) {
        return Ok(engine);
    }
    set_text("data-status", "Loading MNIST in the other engine…");
    let sizes = engine.ask(Download {}).await?;
    let model = page.borrow().model.clone();
    if let Some(model) = model {
        let weights = Payload::from(model.weights.clone());
        let kind = model.kind;
        engine.ask(LoadModel { kind, weights }).await?;
    }
    page.borrow_mut().trainer = engine.clone();
    use_data(page, sizes);
    Ok(engine)
}

/// Selects the device for `choice` in its engine and says which it is, and why when it is the
/// CPU against the choice; returns what trains.
pub async fn show_device(page: &Shared, choice: EngineChoice) -> Result<String, PageError> {
    let trainer = page.borrow().engines.for_choice(choice)?;
    let DeviceSelected {
        description,
        fallback,
        hardware_gpus,
    } = trainer
        .ask(SelectDevice {
            choice: choice.device(),
        })
        .await?;
    let description = match choice {
        EngineChoice::NativeAllGpus => {
            format!("all {hardware_gpus} GPUs, each batch split over them")
        }
        _ => description,
    };
    let description = match Rc::ptr_eq(&trainer, &page.borrow().engines.browser) {
        true => description,
        false => format!("native — {description}"),
    };
    set_text("backend", &description);
    let banner = by_id::<HtmlElement>("banner");
    banner.set_hidden(fallback.is_none());
    banner.set_text_content(Some(&format!(
        "Training on the CPU: {}",
        fallback.unwrap_or_default()
    )));
    Ok(description)
}
