//! The browser page: a form, controls, live charts and a log. The training loop runs in a
//! worker (src/worker), which the page asks through [`trainer::Trainer`]; the main thread only
//! draws what it reports.

mod canvas;
mod charts;
mod collection;
mod controls;
mod current;
mod digit_store;
mod dom;
mod download;
mod engine;
mod fine_tune;
mod form;
mod insight;
mod keeper;
mod lr_finder;
mod phase;
mod run;
mod run_store;
mod runs;
mod runs_table;
mod schedule_preview;
mod storage;
mod trainer;

use std::cell::RefCell;
use std::rc::Rc;

use thiserror::Error;
use web_sys::{HtmlElement, HtmlProgressElement};

use crate::config::ConfigError;
use crate::device::DeviceError;
use crate::session::protocol::{DataLoaded, DataOrigin, DeviceSelected, Download, SelectDevice};
use controls::{warm_up, wire_controls, wire_warm_up};
use dom::{by_id, set_text};
use engine::{EngineChoice, Engines};
pub use form::settings_from_query;
use form::{backend_choice, prefill_from_query, show_query_error, validate_form, wire_form};
use phase::{Holding, Phase};
use trainer::Trainer;

#[derive(Debug, Error)]
pub enum PageError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Range(#[from] crate::train::lr_find::LrRangeError),
    /// What the worker refused, in its words.
    #[error("{0}")]
    Worker(String),
    /// The engine can answer nothing more.
    #[error("{engine} stopped: {why}")]
    EngineGone { engine: &'static str, why: String },
    #[error("{file}: cannot be read: {message}")]
    Read { file: String, message: String },
    #[error("{file}: larger than the {} MiB such a file can be", limit >> 20)]
    TooLarge { file: String, limit: usize },
    #[error("choose all four files: {0} is missing")]
    MissingFile(&'static str),
    #[error("the browser refused the download: {0}")]
    Save(String),
    #[error("the browser's storage: {0}")]
    Storage(String),
    #[error("the native engine is there only when webtrain ui opens the page (with its token)")]
    NoNative,
    #[error("the page could not be drawn: {0}")]
    Dom(String),
}

/// What the page holds between clicks (the engine's own state is `crate::session`'s).
struct Page {
    engines: Engines,
    /// The engine the page uses: it holds the page's MNIST and model.
    trainer: Rc<Trainer>,
    phase: Phase,
    /// The training and test set sizes, once MNIST is loaded.
    data: Option<(usize, usize)>,
    /// The last run's model (a diverged run's last finite weights), a kept or a loaded one.
    model: Option<Rc<current::ModelFile>>,
    worker_gone: bool,
    /// Runs started so far: an answer asked for before the latest run began is stale.
    runs: u32,
}

impl Page {
    fn render(&self) {
        let holding = Holding {
            data: self.data.is_some(),
            model: self.model.is_some(),
            worker_gone: self.worker_gone,
        };
        phase::render(self.phase, &holding);
    }
}

type Shared = Rc<RefCell<Page>>;

thread_local! {
    /// The page's state, for the panic hook and the worker's crash, which come from
    /// outside any handler.
    static PAGE: RefCell<Option<Shared>> = const { RefCell::new(None) };
}

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
    insight::wire_drawing(&page);
    insight::wire_confusion(&page);
    runs::wire();
    lr_finder::wire(&page);
    collection::wire();
    fine_tune::wire(&page);
    wasm_bindgen_futures::spawn_local(async move {
        if let Err(error) = boot(&page).await {
            fail(&error.to_string());
        }
    });
}

fn set_phase(page: &Shared, phase: Phase) {
    page.borrow_mut().phase = phase;
    page.borrow().render();
}

fn show_error(message: &str) {
    set_text("error", message);
    by_id::<HtmlElement>("error").set_hidden(message.is_empty());
}

/// Shows `message` and puts the page in `Failed`; also from the panic hook, which may come
/// while the page is borrowed.
fn fail(message: &str) {
    fail_with(message, |_| {});
}

fn fail_with(message: &str, change: impl FnOnce(&mut Page)) {
    let page = PAGE.with(|s| s.borrow().clone());
    match page.as_ref().map(|s| s.try_borrow_mut()) {
        // What failed after the worker stopped failed because it did: that message stands.
        Some(Ok(page)) if page.worker_gone => {}
        Some(Ok(mut page)) => {
            show_error(message);
            change(&mut page);
            page.phase = Phase::Failed;
            page.render();
        }
        _ => {
            show_error(message);
            let body = dom::document().body().expect("a body");
            let _ = body.dataset().set("state", Phase::Failed.name());
        }
    }
}

/// An engine is gone for good (`stopped` says which and why): every control that asks it is
/// disabled, a reload is offered.
fn engine_stopped(stopped: &str) {
    fail_with(
        &format!("{stopped}. Reload the page to start again."),
        |page| page.worker_gone = true,
    );
}

fn log(line: &str) {
    let log = by_id::<HtmlElement>("log");
    let _ = log.append_with_str_1(&format!("{line}\n"));
    log.set_scroll_top(log.scroll_height());
}

/// Selects the device for `choice` in its engine and says which it is, and why when it is the
/// CPU against the choice; returns what trains.
async fn show_device(page: &Shared, choice: EngineChoice) -> Result<String, PageError> {
    let trainer = page.borrow().engines.for_choice(choice)?;
    let choice = choice.device();
    let DeviceSelected {
        description,
        fallback,
    } = trainer.ask(SelectDevice { choice }).await?;
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
    charts::draw_empty().await;
    let progress = by_id::<HtmlProgressElement>("data-progress");
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
        Ok(()) => insight::show_gallery(page).await?,
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

fn use_data(
    page: &Shared,
    DataLoaded {
        train,
        test,
        origin,
    }: DataLoaded,
) {
    let status = match origin {
        DataOrigin::Mnist => format!("MNIST: {train} training and {test} test images"),
        DataOrigin::Files => format!("Your files: {train} training and {test} test images"),
        DataOrigin::FilesHeldOut => format!(
            "Your files: {train} training images, and {test} held out to test (a fifth of each digit)"
        ),
    };
    set_text("data-status", &status);
    page.borrow_mut().data = Some((train, test));
}
