//! One training run from the page: asked of an engine, its events shown as they come, its
//! model made the page's at the end; kept in this browser as it goes (`keeper`).

use std::cell::RefCell;
use std::rc::Rc;

use web_sys::{HtmlElement, HtmlInputElement, HtmlProgressElement};

use super::charts::{self, CHART_POINTS, Charts};
use super::dom::{self, by_id, now_ms, set_text};
use super::engine::{show_device, use_engine};
use super::engines::{EngineChoice, token};
use super::error::PageError;
use super::form::{backend_choice, fill_form, validate_form, write_query};
use super::keeper::Keeper;
use super::phase::Phase;
use super::state::{ModelFile, Shared, log, set_phase, show_error};
use super::{background, confusion, current, gallery, inside, learning, runs};
use crate::config::TrainConfig;
use crate::metrics::RunMetrics;
use crate::session::protocol::{FineTuned, Follow, Followed, OwnDigits, RunEnded, RunFiles, Train};
use crate::train::TrainEvent;

/// Shows an event: its line in the log, its figures, and says whether the charts have news.
fn show_event(page: &Shared, event: &TrainEvent, metrics: &RunMetrics, total: usize) -> bool {
    if let Some(line) = event.log_line() {
        log(&line);
    }
    match event {
        TrainEvent::Step(step) => {
            let done = (step.epoch - 1) * step.epoch_len + step.seen;
            by_id::<HtmlProgressElement>("progress").set_value(done as f64 / total as f64);
            set_text(
                "epoch",
                &format!("{}/{}", step.epoch, metrics.config.epochs),
            );
            set_text("step", &step.step.to_string());
            background::note_step(step.step);
            set_text("speed", &format!("{:.0}", step.samples_per_sec));
            false
        }
        TrainEvent::Interval(_) | TrainEvent::LrChanged { .. } => true,
        // A log line: the views of the network follow the run's model.
        TrainEvent::Learning(_) => {
            wasm_bindgen_futures::spawn_local(learning::redraw());
            inside::follow_run(page);
            false
        }
        TrainEvent::Epoch(report) => {
            confusion::show(report);
            set_text("test-accuracy", &format!("{:.2}%", report.accuracy()));
            true
        }
        TrainEvent::Memory(report) => {
            set_text("memory", &report.to_string());
            // Exact figures for the soak benchmark (bench/soak.mjs).
            let figures = by_id::<web_sys::HtmlElement>("memory").dataset();
            let _ = figures.set("epoch", &report.epoch.to_string());
            for (key, bytes) in [
                ("processBytes", report.process_bytes),
                ("deviceBytes", report.device_reserved_bytes),
            ] {
                let _ = figures.set(key, &bytes.map(|b| b.to_string()).unwrap_or_default());
            }
            false
        }
        TrainEvent::DeviceLost { goes_on, .. } => {
            set_text("backend", &format!("{goes_on} — the GPU was lost"));
            show_error(&event.log_line().unwrap_or_default());
            true
        }
        TrainEvent::Diverged(_) => {
            let said = event.log_line().unwrap_or_default();
            show_error(&format!("{said} Try a smaller learning rate."));
            false
        }
        TrainEvent::Done {
            samples_per_sec, ..
        } => {
            set_text("speed", &format!("{samples_per_sec:.0}"));
            false
        }
        TrainEvent::Paused { .. }
        | TrainEvent::Warning(_)
        | TrainEvent::Resumed { .. }
        | TrainEvent::Checkpoint(_)
        | TrainEvent::BestKept { .. } => false,
    }
}

/// A run as the page shows it: its figures, charts and log.
struct LiveRun {
    page: Shared,
    config: TrainConfig,
    metrics: Rc<RefCell<RunMetrics>>,
    charts: Rc<RefCell<Charts>>,
    /// Samples the whole run trains on.
    total: usize,
    /// What keeps it in this browser; none for a native engine's run, whose folder keeps it.
    keeper: Option<Rc<Keeper>>,
}

impl LiveRun {
    fn new(
        page: &Shared,
        config: TrainConfig,
        backend: String,
        train_len: usize,
        kept_here: bool,
    ) -> Self {
        set_text("log", "");
        set_text("test-accuracy", "–");
        by_id::<HtmlElement>("run-files").set_hidden(true);
        let total = config.train_limit.map_or(train_len, |l| l.min(train_len)) * config.epochs;
        let metrics = RunMetrics::new(config.clone(), backend);
        let keeper = kept_here.then(|| Rc::new(Keeper::new(&config, metrics.started_ms)));
        let metrics = Rc::new(RefCell::new(metrics));
        let id = keeper.as_ref().map(|keeper| keeper.id.clone());
        charts::show(id, metrics.clone());
        let mut charts = Charts::new();
        charts.start(&metrics.borrow());
        Self {
            page: page.clone(),
            config,
            metrics,
            charts: Rc::new(RefCell::new(charts)),
            total,
            keeper,
        }
    }

    /// What draws each event as it comes.
    fn on_event(&self) -> impl FnMut(TrainEvent) + 'static {
        let (metrics, charts, total) = (self.metrics.clone(), self.charts.clone(), self.total);
        let (page, keeper) = (self.page.clone(), self.keeper.clone());
        move |event: TrainEvent| {
            // Whichever page paused the run, each that shows it shows it paused.
            let paused = match event {
                TrainEvent::Paused { .. } => Some(true),
                TrainEvent::Resumed { .. } => Some(false),
                _ => None,
            };
            if let Some(paused) = paused
                && page.borrow().phase.is_training()
            {
                set_phase(&page, Phase::Training { paused });
            }
            let mut metrics = metrics.borrow_mut();
            metrics.record(&event);
            metrics.thin(CHART_POINTS);
            if let Some(keeper) = keeper.as_ref().filter(|keeper| keeper.due(&event)) {
                let (keeper, run) = (keeper.clone(), keeper.record(&metrics, None));
                keeper.saved_at.set(now_ms());
                wasm_bindgen_futures::spawn_local(async move { keeper.keep(run, None).await });
            }
            let mut charts = charts.borrow_mut();
            if show_event(&page, &event, &metrics, total) {
                charts.news();
            }
            // An epoch's end fills the confusion matrix: the charts wait for the next event, so
            // that each stays a short task on the main thread.
            if !matches!(event, TrainEvent::Epoch(_)) {
                charts.update(&metrics);
            }
        }
    }

    /// The run has ended: its model becomes the page's, its files are linked.
    async fn end(self, page: &Shared, ended: Result<RunEnded, PageError>) -> Result<(), PageError> {
        Charts::draw_in_turn(&self.charts, &self.metrics).await;
        learning::redraw().await;
        if let Some(keeper) = &self.keeper {
            let failure = ended.as_ref().err().map(ToString::to_string);
            let run = keeper.record(&self.metrics.borrow(), failure);
            let weights = ended.as_ref().ok().map(|end| end.weights.bytes().to_vec());
            keeper.keep(run, weights).await;
        }
        let RunEnded {
            outcome,
            weights,
            files,
            ..
        } = ended?;
        let about = {
            let metrics = self.metrics.borrow();
            // With early stopping, the model is the best epoch's, not the last's.
            let kept = match metrics.best_epoch {
                Some(best) => metrics.epochs.iter().find(|report| report.epoch == best),
                None => metrics.epochs.last(),
            };
            let result = match kept {
                Some(report) => {
                    format!("{:.2}% on {} test images", report.accuracy(), report.total)
                }
                None => "not evaluated".to_string(),
            };
            let epoch = match metrics.best_epoch {
                Some(best) => format!(", epoch {best}'s (the best)"),
                None => String::new(),
            };
            format!(
                "{}{epoch}, trained on {}: {result}",
                self.config.model, metrics.backend
            )
        };
        if let Some(files) = files {
            show_files(&files);
        }
        let model = ModelFile {
            kind: self.config.model,
            weights: weights.into_bytes(),
            about,
        };
        current::keep(page, model).await?;
        // The view of the network: the model the run ended with.
        inside::refresh(page);
        gallery::show(page).await?;
        set_phase(page, Phase::Finished(outcome));
        Ok(())
    }
}

/// Links the files the native engine wrote for the run, as `webtrain ui` serves them.
fn show_files(files: &RunFiles) {
    let list = by_id::<HtmlElement>("run-files");
    list.set_text_content(Some(&format!("Written to {}: ", files.folder)));
    let token = token().unwrap_or_default();
    let document = super::dom::document();
    for name in &files.written {
        let Ok(link) = document.create_element("a") else {
            continue;
        };
        let _ = link.set_attribute("href", &format!("runs/{}/{name}?token={token}", files.name));
        let _ = link.set_attribute("target", "_blank");
        link.set_text_content(Some(name));
        let _ = list.append_child(&link);
        let _ = list.append_with_str_1(" ");
    }
    if let Some(error) = &files.error {
        let _ = list.append_with_str_1(&format!("Not all could be written: {error}"));
    }
    list.set_hidden(false);
}

/// A fine-tune of the current model on one's own digits: the digits, and what shows its
/// judgement at the run's end.
pub struct FineTune {
    pub digits: OwnDigits,
    pub show: fn(&FineTuned),
}

/// Checks that a run can start and puts the page in `Training` at once, before anything is
/// awaited, so that a second click finds Start disabled; what the run is, if it can start.
pub fn begin_run(page: &Shared) -> Option<(TrainConfig, EngineChoice, usize)> {
    let (phase, data, gone) = {
        let page = page.borrow();
        (page.phase, page.data, page.worker_gone)
    };
    if gone || matches!(phase, Phase::Loading | Phase::Training { .. }) {
        return None;
    }
    let Some((train_len, _)) = data else {
        show_error("MNIST is not loaded yet");
        return None;
    };
    let choice = match backend_choice() {
        Ok(choice) => choice,
        Err(error) => {
            show_error(&error.to_string());
            return None;
        }
    };
    // The engine's choice says over which devices a run splits its batches.
    dom::set_value("devices", &choice.devices().to_string());
    let config = validate_form().ok()?;
    write_query(&config, choice);
    page.borrow_mut().runs += 1;
    set_phase(page, Phase::Training { paused: false });
    Some((config, choice, train_len))
}

/// One training run on the engine `choice` names; the page is already in `Training`. With
/// `fine_tune`, a fine-tune of the current model on one's own digits, judged at its end.
pub async fn run(
    page: &Shared,
    config: TrainConfig,
    choice: EngineChoice,
    train_len: usize,
    fine_tune: Option<FineTune>,
) -> Result<(), PageError> {
    let trainer = use_engine(page, choice).await?;
    let backend = show_device(page, choice).await?;
    let kept_here = !choice.is_native();
    let live = LiveRun::new(page, config.clone(), backend, train_len, kept_here);
    let from_model = by_id::<HtmlInputElement>("from-model").checked();
    let (own_digits, show_judged) = match fine_tune {
        Some(FineTune { digits, show }) => (Some(digits), Some(show)),
        None => (None, None),
    };
    let request = Train {
        config,
        backend: choice.device(),
        from_model,
        own_digits,
    };
    let ended = trainer.ask_reporting(request, live.on_event()).await;
    if let (
        Ok(RunEnded {
            fine_tuned: Some(judged),
            ..
        }),
        Some(show),
    ) = (&ended, show_judged)
    {
        show(judged);
    }
    let shown = live.end(page, ended).await;
    // The native engine's run folder is its record: the table lists it from there.
    if choice.is_native() {
        runs::reload_native(page).await?;
    }
    shown
}

/// Shows the native engine's run going, if it has one: the page takes it as its own, with its
/// history, and can pause, stop or steer it.
pub async fn follow_native(page: &Shared) -> Result<(), PageError> {
    let (native, data) = {
        let page = page.borrow();
        (page.engines.native.clone(), page.data)
    };
    let (Some(native), Some((train_len, _))) = (native, data) else {
        return Ok(());
    };
    let live: Rc<RefCell<Option<LiveRun>>> = Rc::default();
    let (joined, s, engine) = (live.clone(), page.clone(), native.clone());
    let on_run = move |config: TrainConfig, device: String| {
        fill_form(&config);
        dom::set_value("backend-choice", "native");
        set_text("backend", &format!("native — {device}"));
        // Pause, stop and the learning rate go to the engine that trains.
        s.borrow_mut().trainer = engine.clone();
        s.borrow_mut().runs += 1;
        set_phase(&s, Phase::Training { paused: false });
        *joined.borrow_mut() = Some(LiveRun::new(
            &s,
            config,
            format!("native — {device}"),
            train_len,
            false,
        ));
    };
    let drawn = live.clone();
    let on_progress = move |followed: Followed| match followed {
        Followed::Run { config, device } => on_run(*config, device),
        Followed::Event(event) => {
            if let Some(live) = drawn.borrow().as_ref() {
                live.on_event()(event);
            }
        }
    };
    let ended = native.ask_reporting(Follow {}, on_progress).await;
    let Some(run) = live.borrow_mut().take() else {
        return ended.map(|_| ());
    };
    let shown = match ended {
        Ok(Some(end)) => run.end(page, Ok(end)).await,
        Ok(None) => Ok(()),
        Err(error) => run.end(page, Err(error)).await,
    };
    runs::reload_native(page).await?;
    shown
}
