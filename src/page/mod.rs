//! The browser page: a form, controls, live charts and a log. The training loop runs in a
//! worker (src/worker), which the page asks through [`trainer::Trainer`]; the main thread only
//! draws what it reports.

mod current;
mod dom;
mod download;
mod engine;
mod form;
mod insight;
mod phase;
mod run;
mod storage;
mod trainer;

use std::cell::RefCell;
use std::rc::Rc;

use thiserror::Error;
use web_sys::{HtmlElement, HtmlProgressElement};

use crate::config::{ConfigError, TrainConfig, check_lr};
use crate::device::DeviceError;
use crate::session::protocol::Request;
use dom::{by_id, set_text};
use engine::{EngineChoice, Engines};
pub use form::settings_from_query;
use form::{
    backend_choice, copy_link, form_config, prefill_from_query, show_query_error, validate_form,
    wire_form, write_query,
};
use phase::{Holding, Phase};
use trainer::Trainer;

#[derive(Debug, Error)]
pub enum PageError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// What the worker refused, in its words.
    #[error("{0}")]
    Worker(String),
    #[error("the training worker stopped: {0}")]
    WorkerGone(String),
    #[error("{file}: cannot be read: {message}")]
    Read { file: String, message: String },
    #[error("{file}: larger than the {} MiB such a file can be", limit >> 20)]
    TooLarge { file: String, limit: usize },
    #[error("choose all four files: {0} is missing")]
    MissingFile(&'static str),
    #[error("the browser refused the download: {0}")]
    Save(String),
    #[error("this browser could not keep the model: {0}")]
    Storage(String),
    #[error("the native engine is there only when webtrain ui opens the page (with its token)")]
    NoNative,
}

/// What the page holds between clicks.
struct Session {
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

impl Session {
    fn render(&self) {
        let holding = Holding {
            data: self.data.is_some(),
            model: self.model.is_some(),
            worker_gone: self.worker_gone,
        };
        phase::render(self.phase, &holding);
    }
}

type Shared = Rc<RefCell<Session>>;

thread_local! {
    /// The page's one session, for the panic hook and the worker's crash, which come from
    /// outside any handler.
    static SESSION: RefCell<Option<Shared>> = const { RefCell::new(None) };
}

pub fn start() {
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&info.to_string().into());
        fail(&format!("internal error: {info}"));
    }));
    prefill_from_query();
    let engines = match Engines::start(worker_stopped) {
        Ok(engines) => engines,
        Err(error) => return fail(&error.to_string()),
    };
    let session = Rc::new(RefCell::new(Session {
        trainer: engines.browser.clone(),
        engines,
        phase: Phase::Loading,
        data: None,
        model: None,
        worker_gone: false,
        runs: 0,
    }));
    SESSION.with(|s| *s.borrow_mut() = Some(session.clone()));
    wire_form();
    wire_controls(&session);
    wire_warm_up(&session);
    insight::wire_drawing(&session);
    insight::wire_confusion(&session);
    wasm_bindgen_futures::spawn_local(async move {
        if let Err(error) = boot(&session).await {
            fail(&error.to_string());
        }
    });
}

fn set_phase(session: &Shared, phase: Phase) {
    session.borrow_mut().phase = phase;
    session.borrow().render();
}

fn show_error(message: &str) {
    set_text("error", message);
    by_id::<HtmlElement>("error").set_hidden(message.is_empty());
}

/// Shows `message` and puts the page in `Failed`; also from the panic hook, which may come
/// while the session is borrowed.
fn fail(message: &str) {
    fail_with(message, |_| {});
}

fn fail_with(message: &str, change: impl FnOnce(&mut Session)) {
    let session = SESSION.with(|s| s.borrow().clone());
    match session.as_ref().map(|s| s.try_borrow_mut()) {
        // What failed after the worker stopped failed because it did: that message stands.
        Some(Ok(session)) if session.worker_gone => {}
        Some(Ok(mut session)) => {
            show_error(message);
            change(&mut session);
            session.phase = Phase::Failed;
            session.render();
        }
        _ => {
            show_error(message);
            let body = dom::document().body().expect("a body");
            let _ = body.dataset().set("state", Phase::Failed.name());
        }
    }
}

/// The worker is gone for good: every control that asks it is disabled, a reload is offered.
fn worker_stopped(why: &str) {
    fail_with(
        &format!("the training worker stopped: {why}. Reload the page to start again."),
        |session| session.worker_gone = true,
    );
}

fn log(line: &str) {
    let log = by_id::<HtmlElement>("log");
    let _ = log.append_with_str_1(&format!("{line}\n"));
    log.set_scroll_top(log.scroll_height());
}

/// Selects the device for `choice` in its engine and says which it is, and why when it is the
/// CPU against the choice; returns what trains.
async fn show_device(session: &Shared, choice: EngineChoice) -> Result<String, PageError> {
    let trainer = session.borrow().engines.for_choice(choice)?;
    let (description, fallback) = trainer.device(choice.device()).await?;
    let description = match Rc::ptr_eq(&trainer, &session.borrow().engines.browser) {
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

async fn boot(session: &Shared) -> Result<(), PageError> {
    set_phase(session, Phase::Loading);
    engine::offer_native(session).await?;
    // A device the worker refuses (`?backend=gpu` without WebGPU), or `native` without
    // `webtrain ui`, is said, and said again at Start; the page still loads, for the other
    // backends.
    let device = match show_device(session, backend_choice()?).await {
        Err(PageError::Worker(refusal)) => Some(refusal),
        Err(refusal @ PageError::NoNative) => Some(refusal.to_string()),
        other => other.map(|_| None)?,
    };
    if device.is_none() {
        warm_up(session);
    }
    // The page starts on the engine its backend names, and gets MNIST there.
    let choice = backend_choice()?;
    let trainer = {
        let engines = &session.borrow().engines;
        engines
            .for_choice(choice)
            .unwrap_or(engines.browser.clone())
    };
    session.borrow_mut().trainer = trainer.clone();
    let progress = by_id::<HtmlProgressElement>("data-progress");
    let sizes = trainer
        .download(move |fraction, file| {
            progress.set_value(fraction);
            set_text("data-status", &format!("Downloading MNIST: {file}…"));
        })
        .await?;
    use_data(session, sizes);
    match current::restore(session).await {
        Ok(()) => insight::show_gallery(session).await?,
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
    set_phase(session, Phase::Ready);
    // A run the native engine is going on with (started from a tab since closed) is shown.
    run::follow_native(session).await
}

/// Settings a run's kernels are built for: changing one builds them again.
const KERNEL_SETTINGS: [&str; 4] = ["model", "optimizer", "batch-size", "backend-choice"];

fn wire_warm_up(session: &Shared) {
    for id in KERNEL_SETTINGS {
        let s = session.clone();
        dom::on(id, "change", move |_| {
            let idle = {
                let session = s.borrow();
                !session.phase.is_training() && !session.worker_gone
            };
            if idle {
                warm_up(&s);
            }
        });
    }
}

/// Builds the GPU kernels for a run of the form's settings while MNIST downloads or the user
/// reads the page, so that the first step of a run started meanwhile or later need not wait
/// for them.
fn warm_up(session: &Shared) {
    thread_local! {
        /// Warm-ups asked for so far: only the latest one's answer is shown.
        static WARM_UPS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    let (Ok(config), Ok(choice)) = (form_config(), backend_choice()) else {
        return;
    };
    let Ok(trainer) = session.borrow().engines.for_choice(choice) else {
        return;
    };
    let this = WARM_UPS.with(|n| {
        n.set(n.get() + 1);
        n.get()
    });
    let kernels = by_id::<HtmlElement>("kernels");
    let _ = kernels.remove_attribute("data-done");
    kernels.set_text_content(None);
    wasm_bindgen_futures::spawn_local(async move {
        let said = match trainer.warm_up(config, choice.device()).await {
            Ok(Some(ms)) => format!(" · kernels built in {:.1} s", ms / 1000.0),
            Ok(None) => String::new(),
            // Not the user's error: the run builds its own kernels, and says what fails.
            Err(error) => {
                web_sys::console::warn_1(&format!("warm-up: {error}").into());
                String::new()
            }
        };
        if WARM_UPS.with(|n| n.get()) == this {
            kernels.set_text_content(Some(&said));
            let _ = kernels.set_attribute("data-done", "");
        }
    });
}

fn use_data(session: &Shared, (train, test): (usize, usize)) {
    set_text(
        "data-status",
        &format!("MNIST: {train} training and {test} test images"),
    );
    session.borrow_mut().data = Some((train, test));
}

/// Sends a pause, resume, stop or learning rate to the run; a refusal is shown. `then` runs
/// once the worker has it; the loop acts on it before its next step.
fn control(session: &Shared, request: Request, then: impl FnOnce() + 'static) {
    let trainer = session.borrow().trainer.clone();
    wasm_bindgen_futures::spawn_local(async move {
        match trainer.control(request).await {
            Ok(()) => then(),
            Err(error) => show_error(&error.to_string()),
        }
    });
}

fn wire_controls(session: &Shared) {
    let s = session.clone();
    dom::on("start", "click", move |_| {
        let Some((config, choice, train_len)) = begin_run(&s) else {
            return;
        };
        let s = s.clone();
        wasm_bindgen_futures::spawn_local(async move {
            if let Err(error) = run::run(&s, config, choice, train_len).await {
                fail(&error.to_string());
            }
        });
    });
    let s = session.clone();
    dom::on("pause", "click", move |_| {
        let Phase::Training { paused } = s.borrow().phase else {
            return;
        };
        let request = match paused {
            true => Request::Resume,
            false => Request::Pause,
        };
        let s2 = s.clone();
        control(&s, request, move || {
            // Unless the run ended meanwhile.
            if s2.borrow().phase.is_training() {
                set_phase(&s2, Phase::Training { paused: !paused });
            }
        });
    });
    let s = session.clone();
    dom::on("stop", "click", move |_| control(&s, Request::Stop, || {}));
    let s = session.clone();
    dom::on("apply-lr", "click", move |_| {
        let mut lr = TrainConfig::default();
        match lr
            .set("lr", &dom::value("lr"))
            .and_then(|_| check_lr(lr.lr))
        {
            Ok(()) => control(&s, Request::SetLr(lr.lr), || {}),
            Err(error) => show_error(&error.to_string()),
        }
    });
    let s = session.clone();
    dom::on("download-weights", "click", move |_| {
        if let Some(model) = &s.borrow().model {
            match download::save_weights(&model.weights, model.kind) {
                Ok(message) => set_text("weights-status", &message),
                Err(error) => show_error(&error.to_string()),
            }
        }
    });
    let s = session.clone();
    dom::on("load-weights", "click", move |_| {
        // The run in progress makes the worker's model its own at the end.
        if s.borrow().phase.is_training() {
            return;
        }
        let s = s.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let loaded = match form_config() {
                Ok(config) => current::load_file(&s, config.model).await,
                Err(error) => Err(error.into()),
            };
            let loaded = match loaded {
                Ok(()) => insight::show_gallery(&s).await,
                failed => failed,
            };
            show_error(&loaded.err().map(|e| e.to_string()).unwrap_or_default());
        });
    });
    let s = session.clone();
    dom::on("evaluate", "click", move |_| {
        // Counted at the click: a spawned task first runs after this turn's other clicks.
        let (trainer, runs) = (s.borrow().trainer.clone(), s.borrow().runs);
        let s = s.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let len = form_config()
                .ok()
                .and_then(|c| c.test_limit)
                .unwrap_or(usize::MAX);
            let evaluated = trainer.evaluate(len).await;
            // A run started meanwhile: its figures are the page's now, not the old model's.
            if s.borrow().runs != runs {
                return;
            }
            match evaluated {
                Ok(report) => {
                    log(&report.to_string());
                    set_text("test-accuracy", &format!("{:.2}%", report.accuracy()));
                    insight::show_confusion(&report);
                    if let Err(error) = insight::show_gallery(&s).await {
                        show_error(&error.to_string());
                    }
                }
                Err(error) => show_error(&error.to_string()),
            }
        });
    });
    dom::on("reload", "click", |_| {
        let _ = web_sys::window().map(|window| window.location().reload());
    });
    dom::on("copy-link", "click", |_| {
        wasm_bindgen_futures::spawn_local(async {
            if let Err(error) = copy_link().await {
                show_error(&error.to_string());
            }
        });
    });
    dom::on("copy-command", "click", |_| {
        wasm_bindgen_futures::spawn_local(async {
            if let Err(error) = form::copy_command().await {
                show_error(&error.to_string());
            }
        });
    });
    let s = session.clone();
    dom::on("use-files", "click", move |_| {
        // Not while MNIST downloads, nor during a run, nor twice at once.
        let before = s.borrow().phase;
        if matches!(before, Phase::Loading | Phase::Training { .. }) {
            return;
        }
        set_phase(&s, Phase::Loading);
        let s = s.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let trainer = s.borrow().trainer.clone();
            let loaded = match download::from_inputs().await {
                Ok(files) => trainer.use_files(files).await,
                Err(error) => Err(error),
            };
            match loaded {
                Ok(sizes) => {
                    use_data(&s, sizes);
                    show_error("");
                    set_phase(&s, Phase::Ready);
                }
                // The data already loaded stays usable: only the message changes.
                Err(error) => {
                    set_phase(&s, before);
                    show_error(&error.to_string());
                }
            }
        });
    });
}

/// Checks that a run can start and puts the page in `Training` at once, before anything is
/// awaited, so that a second click finds Start disabled; what the run is, if it can start.
fn begin_run(session: &Shared) -> Option<(TrainConfig, EngineChoice, usize)> {
    let (phase, data, gone) = {
        let session = session.borrow();
        (session.phase, session.data, session.worker_gone)
    };
    if gone || matches!(phase, Phase::Loading | Phase::Training { .. }) {
        return None;
    }
    let Some((train_len, _)) = data else {
        show_error("MNIST is not loaded yet");
        return None;
    };
    let config = validate_form().ok()?;
    let choice = match backend_choice() {
        Ok(choice) => choice,
        Err(error) => {
            show_error(&error.to_string());
            return None;
        }
    };
    write_query(&config, choice);
    session.borrow_mut().runs += 1;
    set_phase(session, Phase::Training { paused: false });
    Some((config, choice, train_len))
}
