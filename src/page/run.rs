//! One training run from the page: asked of the worker, its events drawn as they come, its model
//! kept at the end.

use std::cell::RefCell;
use std::rc::Rc;

use plotters::prelude::IntoDrawingArea;
use web_sys::{HtmlCanvasElement, HtmlElement, HtmlInputElement, HtmlProgressElement};

use super::canvas::ChartCanvas;
use super::dom::{self, by_id, set_text};
use super::engine::{EngineChoice, token, use_engine};
use super::form::form_config;
use super::phase::Phase;
use super::{PageError, Shared, current, insight, log, set_phase, show_device, show_error};
use crate::config::TrainConfig;
use crate::metrics::RunMetrics;
use crate::metrics::chart::{self, ChartTheme};
use crate::platform::yield_now;
use crate::session::protocol::{Follow, Followed, RunEnded, RunFiles, Train};
use crate::train::TrainEvent;

/// The charts redraw at most this often, however short the intervals.
const REDRAW_MS: f64 = 250.0;
/// Points the page keeps for a chart; older ones are merged in pairs beyond it.
const CHART_POINTS: usize = 2000;

/// Redraws a chart; a chart that cannot draw is reported in the console, training goes on.
fn draw(canvas: &str, metrics: &RunMetrics, draw: chart::DrawFn<ChartCanvas>) {
    let Some(backend) = ChartCanvas::new(by_id::<HtmlCanvasElement>(canvas)) else {
        return;
    };
    let area = backend.into_drawing_area();
    let theme = chart_theme();
    if let Err(error) = area
        .fill(&theme.background)
        .and_then(|_| draw(&area, metrics, &theme))
    {
        web_sys::console::warn_1(&format!("{canvas}: {error}").into());
    }
}

/// The page's colour scheme, as the stylesheet follows it.
fn chart_theme() -> ChartTheme {
    let dark = web_sys::window()
        .and_then(|w| w.match_media("(prefers-color-scheme: dark)").ok().flatten())
        .is_some_and(|query| query.matches());
    match dark {
        true => ChartTheme::DARK,
        false => ChartTheme::LIGHT,
    }
}

fn now_ms() -> f64 {
    js_sys::Date::now()
}

/// The charts, redrawn while a run trains when they have news and `REDRAW_MS` have passed since
/// the last redraw: one chart a time, in turn, so that a redraw is a short task on the page's
/// main thread.
struct Charts {
    drawn_at: f64,
    /// Whether each chart, loss and accuracy, has news.
    stale: [bool; 2],
    /// The chart the next redraw draws first.
    next: usize,
    draws: u32,
}

impl Charts {
    const CANVASES: [&str; 2] = ["loss-chart", "accuracy-chart"];
    const DRAW: [chart::DrawFn<ChartCanvas>; 2] = [chart::draw_loss, chart::draw_accuracy];

    fn new() -> Self {
        Self {
            drawn_at: 0.0,
            stale: [false; 2],
            next: 0,
            draws: 0,
        }
    }

    fn news(&mut self) {
        self.stale = [true; 2];
    }

    /// Redraws the next stale chart, if its time has come.
    fn update(&mut self, metrics: &RunMetrics) {
        if now_ms() - self.drawn_at < REDRAW_MS {
            return;
        }
        let Some(chart) = [self.next, 1 - self.next]
            .into_iter()
            .find(|&c| self.stale[c])
        else {
            return;
        };
        self.draw_one(chart, metrics);
        self.next = 1 - chart;
    }

    /// A new run's charts: the loss now, the accuracy with the run's first event (in a task of
    /// its own).
    fn start(&mut self, metrics: &RunMetrics) {
        self.draw_one(0, metrics);
        self.stale[1] = true;
        self.next = 1;
        self.drawn_at = 0.0;
    }

    /// Both charts, each in a task of its own: at the end of a run, and before the first.
    async fn draw_in_turn(charts: &RefCell<Self>, metrics: &RefCell<RunMetrics>) {
        charts.borrow_mut().draw_one(0, &metrics.borrow());
        yield_now().await;
        charts.borrow_mut().draw_one(1, &metrics.borrow());
    }

    fn draw_one(&mut self, chart: usize, metrics: &RunMetrics) {
        draw(Self::CANVASES[chart], metrics, Self::DRAW[chart]);
        self.drawn_at = now_ms();
        self.stale[chart] = false;
        if chart == 0 {
            self.draws += 1;
            // What the e2e tests bound: the points drawn and the loss chart's redraws.
            let figures = by_id::<web_sys::HtmlElement>("loss-chart").dataset();
            let _ = figures.set("points", &metrics.intervals.len().to_string());
            let _ = figures.set("draws", &self.draws.to_string());
        }
    }
}

/// The charts' axes before any run, for the form's settings: each in a task of its own, while
/// MNIST downloads, so that a run's first redraw is not the charts' first (the browser compiles
/// their code on its first call).
pub async fn draw_empty() {
    let config = form_config().unwrap_or_default();
    let metrics = RefCell::new(RunMetrics::new(config, String::new()));
    Charts::draw_in_turn(&RefCell::new(Charts::new()), &metrics).await;
}

/// Shows an event's figures and says whether the charts have news.
fn show_event(event: &TrainEvent, metrics: &RunMetrics, total: usize) -> bool {
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
            }
            false
        }
        TrainEvent::Interval(_) => true,
        TrainEvent::Epoch(report) => {
            log(&report.to_string());
            insight::show_confusion(report);
            set_text("test-accuracy", &format!("{:.2}%", report.accuracy()));
            true
        }
        TrainEvent::LrChanged { step, lr } => {
            log(&format!("Learning rate {lr} from step {step}"));
            true
        }
        TrainEvent::Paused { step } => {
            log(&format!("Paused before step {step}"));
            false
        }
        TrainEvent::Resumed { step } => {
            log(&format!("Resumed at step {step}"));
            false
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
        TrainEvent::Checkpoint(_) => false,
        TrainEvent::DeviceLost {
            reason,
            resumed_at_step,
            cpu_threads,
        } => {
            let message = format!(
                "The GPU was lost ({reason}). Training goes on on the CPU ({cpu_threads}) from step {resumed_at_step}, the last checkpoint."
            );
            log(&message);
            set_text("backend", &format!("CPU, {cpu_threads} — the GPU was lost"));
            show_error(&message);
            true
        }
        TrainEvent::Diverged(divergence) => {
            let message = format!("Training {divergence}. Try a smaller learning rate.");
            log(&message);
            show_error(&message);
            false
        }
        TrainEvent::Done {
            samples_per_sec, ..
        } => {
            set_text("speed", &format!("{samples_per_sec:.0}"));
            false
        }
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
}

impl LiveRun {
    fn new(page: &Shared, config: TrainConfig, backend: String, train_len: usize) -> Self {
        set_text("log", "");
        set_text("test-accuracy", "–");
        by_id::<HtmlElement>("run-files").set_hidden(true);
        let total = config.train_limit.map_or(train_len, |l| l.min(train_len)) * config.epochs;
        let metrics = RunMetrics::new(config.clone(), backend);
        let mut charts = Charts::new();
        charts.start(&metrics);
        Self {
            page: page.clone(),
            config,
            metrics: Rc::new(RefCell::new(metrics)),
            charts: Rc::new(RefCell::new(charts)),
            total,
        }
    }

    /// What draws each event as it comes.
    fn on_event(&self) -> impl FnMut(TrainEvent) + 'static {
        let (metrics, charts, total) = (self.metrics.clone(), self.charts.clone(), self.total);
        let page = self.page.clone();
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
            let mut charts = charts.borrow_mut();
            if show_event(&event, &metrics, total) {
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
        let RunEnded {
            outcome,
            weights,
            files,
        } = ended?;
        let about = {
            let metrics = self.metrics.borrow();
            let result = match metrics.epochs.last() {
                Some(report) => {
                    format!("{:.2}% on {} test images", report.accuracy(), report.total)
                }
                None => "not evaluated".to_string(),
            };
            format!(
                "{}, trained on {}: {result}",
                self.config.model, metrics.backend
            )
        };
        if let Some(files) = files {
            show_files(&files);
        }
        let model = current::ModelFile {
            kind: self.config.model,
            weights: weights.into_bytes(),
            about,
        };
        current::keep(page, model).await?;
        insight::show_gallery(page).await?;
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

/// One training run on the engine `choice` names; the page is already in `Training`.
pub async fn run(
    page: &Shared,
    config: TrainConfig,
    choice: EngineChoice,
    train_len: usize,
) -> Result<(), PageError> {
    let trainer = use_engine(page, choice).await?;
    let backend = show_device(page, choice).await?;
    let live = LiveRun::new(page, config.clone(), backend, train_len);
    let from_model = by_id::<HtmlInputElement>("from-model").checked();
    let request = Train {
        config,
        backend: choice.device(),
        from_model,
    };
    let ended = trainer.ask_reporting(request, live.on_event()).await;
    live.end(page, ended).await
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
        ));
    };
    let drawn = live.clone();
    let on_progress = move |followed: Followed| match followed {
        Followed::Run { config, device } => on_run(config, device),
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
    match ended {
        Ok(Some(end)) => run.end(page, Ok(end)).await,
        Ok(None) => Ok(()),
        Err(error) => run.end(page, Err(error)).await,
    }
}

/// The form, showing a run's settings.
fn fill_form(config: &TrainConfig) {
    for (name, value) in config.pairs() {
        dom::set_value(&name.replace('_', "-"), &value);
    }
}
