//! The browser page: a form, controls, live charts and a log. The training loop runs in a
//! worker (src/worker), which the page asks through [`trainer::Trainer`]; the main thread only
//! draws what it reports.

mod current;
mod dom;
mod download;
mod insight;
mod storage;
mod trainer;

use std::cell::RefCell;
use std::rc::Rc;

use plotters::prelude::{IntoDrawingArea, WHITE};
use plotters_canvas::CanvasBackend;
use thiserror::Error;
use wasm_bindgen::JsValue;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    HtmlButtonElement, HtmlElement, HtmlInputElement, HtmlProgressElement, UrlSearchParams,
};

use crate::chart;
use crate::config::{ConfigError, TrainConfig, check_lr};
use crate::device::{BackendChoice, DeviceError};
use crate::metrics::RunMetrics;
use crate::train::{Outcome, TrainEvent};
use crate::worker::protocol::Request;
use dom::{by_id, set_text};
use trainer::Trainer;

/// Ids of the form's fields; the setting of each is its id with `_` for `-`.
const FIELDS: [&str; 10] = [
    "model",
    "optimizer",
    "lr",
    "momentum",
    "batch-size",
    "epochs",
    "seed",
    "log-interval",
    "train-limit",
    "test-limit",
];

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
}

/// The body's `data-state`, which tests and scripts wait on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Loading,
    Ready,
    Training,
    Paused,
    Done,
    Stopped,
    Diverged,
    Error,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Loading => "loading",
            State::Ready => "ready",
            State::Training => "training",
            State::Paused => "paused",
            State::Done => "done",
            State::Stopped => "stopped",
            State::Diverged => "diverged",
            State::Error => "error",
        }
    }
}

/// What the page holds between clicks.
struct Session {
    trainer: Rc<Trainer>,
    /// The training and test set sizes, once MNIST is loaded.
    data: Option<(usize, usize)>,
    /// Whether the run in progress is paused; `None` between runs.
    paused: Option<bool>,
    /// The last run's model (a diverged run's last finite weights), a kept or a loaded one.
    model: Option<Rc<current::ModelFile>>,
}

type Shared = Rc<RefCell<Session>>;

pub fn start() {
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&info.to_string().into());
        fail(&format!("internal error: {info}"));
    }));
    prefill_from_query();
    let trainer = match Trainer::spawn(|why| fail(&format!("the training worker stopped: {why}"))) {
        Ok(trainer) => Rc::new(trainer),
        Err(error) => return fail(&error.to_string()),
    };
    let session = Rc::new(RefCell::new(Session {
        trainer,
        data: None,
        paused: None,
        model: None,
    }));
    wire_form();
    wire_controls(&session);
    insight::wire_drawing(&session);
    wasm_bindgen_futures::spawn_local(async move {
        if let Err(error) = boot(&session).await {
            fail(&error.to_string());
        }
    });
}

fn set_state(state: State) {
    let body = dom::document().body().expect("a body");
    let _ = body.dataset().set("state", state.name());
    let training = matches!(state, State::Training | State::Paused);
    let ready = !matches!(state, State::Loading) && !training;
    by_id::<HtmlButtonElement>("start").set_disabled(!ready);
    by_id::<HtmlButtonElement>("pause").set_disabled(!training);
    by_id::<HtmlButtonElement>("stop").set_disabled(!training);
    by_id::<HtmlButtonElement>("apply-lr").set_disabled(!training);
    by_id::<HtmlButtonElement>("use-files").set_disabled(training);
    set_text(
        "pause",
        if state == State::Paused {
            "Resume"
        } else {
            "Pause"
        },
    );
}

fn show_error(message: &str) {
    set_text("error", message);
    by_id::<HtmlElement>("error").set_hidden(message.is_empty());
}

fn fail(message: &str) {
    show_error(message);
    set_state(State::Error);
}

fn log(line: &str) {
    let log = by_id::<HtmlElement>("log");
    let _ = log.append_with_str_1(&format!("{line}\n"));
    log.set_scroll_top(log.scroll_height());
}

fn search() -> String {
    web_sys::window()
        .and_then(|window| window.location().search().ok())
        .unwrap_or_default()
}

/// The settings a link's query carries (`?lr=0.05&batch_size=128&backend=cpu`), as written.
fn query_pairs(search: &str) -> Vec<(String, String)> {
    let Ok(params) = UrlSearchParams::new_with_str(search) else {
        return Vec::new();
    };
    let names = FIELDS.iter().map(|id| id.replace('-', "_"));
    names
        .chain(["backend".to_string()])
        .filter_map(|name| Some((name.clone(), params.get(&name)?)))
        .collect()
}

/// The run a link describes, checked as the form checks it: what the page shows in `#error`
/// when it opens such a link.
pub fn settings_from_query(search: &str) -> Result<(TrainConfig, BackendChoice), PageError> {
    let pairs = query_pairs(search);
    let mut backend = BackendChoice::Auto;
    let mut settings = Vec::new();
    for (name, value) in &pairs {
        match name.as_str() {
            "backend" => backend = value.parse()?,
            _ => settings.push((name.as_str(), value.as_str())),
        }
    }
    Ok((TrainConfig::from_pairs(settings)?, backend))
}

/// Fills the form from the URL's query, so a run can be shared as a link. Bad values land in
/// the form, where validation marks them, and the first problem is shown.
fn prefill_from_query() {
    let search = search();
    for (name, value) in query_pairs(&search) {
        let id = match name.as_str() {
            "backend" => "backend-choice".to_string(),
            _ => name.replace('_', "-"),
        };
        let before = dom::value(&id);
        dom::set_value(&id, &value);
        // A select refuses a value that is none of its options: it keeps its own then.
        if dom::value(&id) != value {
            dom::set_value(&id, &before);
        }
    }
    show_query_error();
}

/// What is wrong with the link the page was opened with, if anything.
fn show_query_error() {
    if let Err(error) = settings_from_query(&search()) {
        show_error(&error.to_string());
    }
}

fn form_pairs() -> Vec<(String, String)> {
    FIELDS
        .iter()
        .map(|id| (id.replace('-', "_"), dom::value(id)))
        .collect()
}

fn form_config() -> Result<TrainConfig, ConfigError> {
    TrainConfig::from_pairs(form_pairs().iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

fn backend_choice() -> Result<BackendChoice, DeviceError> {
    dom::value("backend-choice").parse()
}

/// Marks each field whose value is bad on its own and shows what is wrong with the form.
fn validate_form() -> Result<TrainConfig, ConfigError> {
    for ((name, value), id) in form_pairs().iter().zip(FIELDS) {
        let mut alone = TrainConfig::default();
        let bad = alone
            .set(name, value)
            .and_then(|_| alone.validate())
            .is_err();
        let _ = by_id::<HtmlElement>(id)
            .class_list()
            .toggle_with_force("invalid", bad);
    }
    let result = form_config();
    show_error(
        &result
            .as_ref()
            .err()
            .map(ToString::to_string)
            .unwrap_or_default(),
    );
    result
}

fn wire_form() {
    for id in FIELDS {
        dom::on(id, "input", |_| {
            let _ = validate_form();
        });
    }
}

/// The page's address with every setting in its query: a link that restores the form.
fn settings_link(config: &TrainConfig, choice: BackendChoice) -> Option<String> {
    let params = UrlSearchParams::new().ok()?;
    for (name, value) in config.pairs() {
        params.append(name, &value);
    }
    params.append("backend", &choice.to_string());
    let location = web_sys::window()?.location();
    Some(format!(
        "{}{}?{}",
        location.origin().ok()?,
        location.pathname().ok()?,
        String::from(params.to_string())
    ))
}

/// Writes the run's settings into the URL without reloading.
fn write_query(config: &TrainConfig, choice: BackendChoice) {
    let history = web_sys::window().and_then(|w| w.history().ok());
    if let (Some(history), Some(link)) = (history, settings_link(config, choice)) {
        let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&link));
    }
}

/// Shows the link to the form's settings and copies it to the clipboard.
async fn copy_link() -> Result<(), PageError> {
    let (config, choice) = (validate_form()?, backend_choice()?);
    let link = settings_link(&config, choice).unwrap_or_default();
    write_query(&config, choice);
    dom::set_value("share-link", &link);
    by_id::<HtmlElement>("share-link").set_hidden(false);
    let clipboard = web_sys::window().map(|w| w.navigator().clipboard());
    let copied = match clipboard {
        Some(clipboard) => JsFuture::from(clipboard.write_text(&link)).await.is_ok(),
        None => false,
    };
    set_text(
        "link-status",
        match copied {
            true => "Link copied",
            false => "Copy the link above",
        },
    );
    Ok(())
}

/// Selects the device for `choice` in the worker and says which it is, and why when it is the
/// CPU against the choice; returns what trains.
async fn show_device(session: &Shared, choice: BackendChoice) -> Result<String, PageError> {
    let trainer = session.borrow().trainer.clone();
    let (description, fallback) = trainer.device(choice).await?;
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
    set_state(State::Loading);
    show_device(session, backend_choice()?).await?;
    let progress = by_id::<HtmlProgressElement>("data-progress");
    let trainer = session.borrow().trainer.clone();
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
    set_state(State::Ready);
    Ok(())
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
        let s = s.clone();
        wasm_bindgen_futures::spawn_local(async move {
            if let Err(error) = run(&s).await {
                fail(&error.to_string());
            }
        });
    });
    let s = session.clone();
    dom::on("pause", "click", move |_| {
        let Some(paused) = s.borrow().paused else {
            return;
        };
        let request = match paused {
            true => Request::Resume,
            false => Request::Pause,
        };
        let s2 = s.clone();
        control(&s, request, move || {
            // Unless the run ended meanwhile.
            if let Some(state) = s2.borrow_mut().paused.as_mut() {
                *state = !paused;
                set_state(if paused {
                    State::Training
                } else {
                    State::Paused
                });
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
        let s = s.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let len = form_config()
                .ok()
                .and_then(|c| c.test_limit)
                .unwrap_or(usize::MAX);
            let trainer = s.borrow().trainer.clone();
            match trainer.evaluate(len).await {
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
    dom::on("copy-link", "click", |_| {
        wasm_bindgen_futures::spawn_local(async {
            if let Err(error) = copy_link().await {
                show_error(&error.to_string());
            }
        });
    });
    let s = session.clone();
    dom::on("use-files", "click", move |_| {
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
                    set_state(State::Ready);
                }
                // The data already loaded stays usable: only the message changes.
                Err(error) => show_error(&error.to_string()),
            }
        });
    });
}

/// Redraws a chart; a chart that cannot draw is reported in the console, training goes on.
fn draw(canvas: &str, metrics: &RunMetrics, draw: chart::DrawFn<CanvasBackend>) {
    let Some(backend) = CanvasBackend::new(canvas) else {
        return;
    };
    let area = backend.into_drawing_area();
    if let Err(error) = area.fill(&WHITE).and_then(|_| draw(&area, metrics)) {
        web_sys::console::warn_1(&format!("{canvas}: {error}").into());
    }
}

fn show_event(event: &TrainEvent, metrics: &RunMetrics, total: usize) {
    match event {
        TrainEvent::Step(step) => {
            let done = (step.epoch - 1) * step.epoch_len + step.seen;
            by_id::<HtmlProgressElement>("progress").set_value(done as f64 / total as f64);
            set_text(
                "epoch",
                &format!("{}/{}", step.epoch, metrics.config.epochs),
            );
            set_text("step", &step.step.to_string());
            set_text("speed", &format!("{:.0}", step.samples_per_sec));
            if let Some(line) = step.log_line() {
                log(&line);
                draw("loss-chart", metrics, chart::draw_loss);
            }
        }
        TrainEvent::Epoch(report) => {
            log(&report.to_string());
            insight::show_confusion(report);
            set_text("test-accuracy", &format!("{:.2}%", report.accuracy()));
            draw("accuracy-chart", metrics, chart::draw_accuracy);
        }
        TrainEvent::LrChanged { step, lr } => {
            log(&format!("Learning rate {lr} from step {step}"));
            draw("loss-chart", metrics, chart::draw_loss);
        }
        TrainEvent::Memory(report) => {
            set_text("memory", &report.to_string());
            // Exact figures for the soak benchmark (bench/soak.mjs).
            let figures = by_id::<HtmlElement>("memory").dataset();
            let _ = figures.set("epoch", &report.epoch.to_string());
            for (key, bytes) in [
                ("processBytes", report.process_bytes),
                ("deviceBytes", report.device_reserved_bytes),
            ] {
                let _ = figures.set(key, &bytes.map(|b| b.to_string()).unwrap_or_default());
            }
        }
        TrainEvent::Checkpoint(_) => {}
        TrainEvent::DeviceLost {
            reason,
            resumed_at_step,
        } => {
            let message = format!(
                "The GPU was lost ({reason}). Training goes on on the CPU from step {resumed_at_step}, the last checkpoint."
            );
            log(&message);
            set_text("backend", "CPU — the GPU was lost");
            show_error(&message);
            draw("loss-chart", metrics, chart::draw_loss);
        }
        TrainEvent::Diverged(divergence) => {
            let message = format!("Training {divergence}. Try a smaller learning rate.");
            log(&message);
            show_error(&message);
        }
        TrainEvent::Done {
            samples_per_sec, ..
        } => set_text("speed", &format!("{samples_per_sec:.0}")),
    }
}

/// One training run from the form's settings, in the worker.
async fn run(session: &Shared) -> Result<(), PageError> {
    let Ok(config) = validate_form() else {
        return Ok(());
    };
    let choice = backend_choice()?;
    write_query(&config, choice);
    let Some((train_len, _)) = session.borrow().data else {
        return Ok(());
    };
    let backend = show_device(session, choice).await?;
    session.borrow_mut().paused = Some(false);
    set_state(State::Training);
    set_text("log", "");
    set_text("test-accuracy", "–");
    let total = config.train_limit.map_or(train_len, |l| l.min(train_len)) * config.epochs;
    let metrics = RunMetrics::new(config.clone(), backend);
    draw("loss-chart", &metrics, chart::draw_loss);
    draw("accuracy-chart", &metrics, chart::draw_accuracy);
    let metrics = Rc::new(RefCell::new(metrics));
    let m = metrics.clone();
    let on_event = move |event: TrainEvent| {
        m.borrow_mut().record(&event);
        show_event(&event, &m.borrow(), total);
    };
    let from_model = by_id::<HtmlInputElement>("from-model").checked();
    let trainer = session.borrow().trainer.clone();
    let trained = trainer
        .train(config.clone(), choice, from_model, on_event)
        .await;
    session.borrow_mut().paused = None;
    let (outcome, weights) = trained?;
    let about = {
        let metrics = metrics.borrow();
        let result = match metrics.epochs.last() {
            Some(report) => format!("{:.2}% on {} test images", report.accuracy(), report.total),
            None => "not evaluated".to_string(),
        };
        format!("{}, trained on {}: {result}", config.model, metrics.backend)
    };
    let model = current::ModelFile {
        kind: config.model,
        weights,
        about,
    };
    current::keep(session, model).await?;
    insight::show_gallery(session).await?;
    set_state(match outcome {
        Outcome::Completed => State::Done,
        Outcome::Stopped => State::Stopped,
        Outcome::Diverged => State::Diverged,
    });
    Ok(())
}
