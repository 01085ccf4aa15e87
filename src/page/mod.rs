//! The browser page: a form, controls, live charts and a log. The training loop runs in a
//! worker (src/worker), which the page asks through [`trainer::Trainer`]; the main thread only
//! draws what it reports.
//!
//! Below the widgets: `state` (what the page holds, its phase, error line and log), `error`,
//! `dom`, `engines` and `trainer` (the engines and how they are asked), `storage`, `download`
//! and `canvas`. Each widget is a file of its own, and none reaches above itself.

mod background;
mod canvas;
mod charts;
mod collection;
mod confusion;
mod controls;
mod current;
mod digit;
mod digit_map;
mod digit_store;
mod dom;
mod download;
mod drawing;
mod engine;
mod engines;
mod error;
mod fine_tune;
mod form;
mod gallery;
mod inside;
mod keeper;
mod learning;
mod lr_finder;
mod phase;
mod run;
mod run_store;
mod runs;
mod runs_table;
mod schedule_preview;
mod state;
mod storage;
mod trainer;

use std::cell::RefCell;
use std::rc::Rc;

use web_sys::HtmlProgressElement;

use crate::session::protocol::Download;
use controls::{warm_up, wire_controls, wire_warm_up};
use dom::{by_id, set_text};
use engine::show_device;
use engines::Engines;
use error::PageError;
pub use form::settings_from_query;
use form::{backend_choice, prefill_from_query, show_query_error, validate_form, wire_form};
use phase::Phase;
use state::{PAGE, Page, Shared, engine_stopped, fail, set_phase, show_error, use_data};

pub fn start() {
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&info.to_string().into());
        fail(&format!("internal error: {info}"));
    }));
    prefill_from_query();
    let engines = match Engines::start(engine_stopped) {
        Ok(engines) => engines,
        Err(error) => return fail(&error.to_string()),
    };
    let page = Rc::new(RefCell::new(Page {
        trainer: engines.browser.clone(),
        engines,
        phase: Phase::Loading,
        data: None,
        model: None,
        worker_gone: false,
        runs: 0,
    }));
    PAGE.with(|s| *s.borrow_mut() = Some(page.clone()));
    wire_form();
    wire_controls(&page);
    wire_warm_up(&page);
    drawing::wire(&page);
    confusion::wire(&page);
    runs::wire();
    lr_finder::wire(&page);
    collection::wire();
    fine_tune::wire(&page);
    inside::wire(&page);
    learning::wire();
    digit_map::wire(&page);
    background::wire(&page);
    wasm_bindgen_futures::spawn_local(async move {
        if let Err(error) = boot(&page).await {
            fail(&error.to_string());
        }
    });
}

async fn boot(page: &Shared) -> Result<(), PageError> {
    set_phase(page, Phase::Loading);
    engine::offer_native(page).await?;
    // A device the worker refuses (`?backend=gpu` without WebGPU), or `native` without
    // `webtrain ui`, is said, and said again at Start; the page still loads, for the other
    // backends.
    let device = match show_device(page, backend_choice()?).await {
        Err(PageError::Worker(refusal)) => Some(refusal),
        Err(refusal @ PageError::NoNative) => Some(refusal.to_string()),
        other => other.map(|_| None)?,
    };
    if device.is_none() {
        warm_up(page);
    }
    // The page starts on the engine its backend names, and gets MNIST there.
    let choice = backend_choice()?;
    let trainer = {
        let engines = &page.borrow().engines;
        engines
            .for_choice(choice)
            .unwrap_or(engines.browser.clone())
    };
    page.borrow_mut().trainer = trainer.clone();
    charts::draw_empty(form::form_config().unwrap_or_default()).await;
    learning::redraw().await;
    let progress = by_id::<HtmlProgressElement>("data-progress");
    dom::isolation_settled().await;
    let sizes = trainer
        .ask_reporting(Download {}, move |downloaded| {
            progress.set_value(downloaded.fraction);
            let file = downloaded.file;
            set_text("data-status", &format!("Downloading MNIST: {file}…"));
        })
        .await?;
    use_data(page, sizes);
    if let Err(error) = runs::load(page).await {
        show_error(&format!(
            "The runs kept in this browser cannot be shown: {error}"
        ));
    }
    match current::restore(page).await {
        Ok(()) => gallery::show(page).await?,
        Err(error) => set_text(
            "model-status",
            &format!("The model kept in this browser is unusable: {error}"),
        ),
    }
    if validate_form().is_ok() {
        show_query_error();
    }
    if let Some(refusal) = device {
        show_error(&refusal);
    }
    set_phase(page, Phase::Ready);
    // A run the native engine is going on with (started from a tab since closed) is shown.
    run::follow_native(page).await
}
