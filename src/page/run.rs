//! One training run from the page: asked of the worker, its events drawn as they come, its model
//! kept at the end.

use std::cell::RefCell;
use std::rc::Rc;

use plotters::prelude::IntoDrawingArea;
use web_sys::{HtmlCanvasElement, HtmlElement, HtmlInputElement, HtmlProgressElement};

use super::canvas::ChartCanvas;
use super::dom::{self, by_id, set_text};
use super::engine::{EngineChoice, token, use_engine};
use super::form::{fill_form, form_config};
use super::phase::Phase;
use super::{
    PageError, Shared, current, insight, log, run_store, runs, set_phase, show_device, show_error,
};
use crate::config::TrainConfig;
use crate::metrics::RunMetrics;
use crate::metrics::chart::{self, ChartTheme};
use crate::platform::yield_now;
use crate::runs::chart::{self as runs_chart, PALETTE, Series};
use crate::runs::{Engine, RunRecord};
use crate::session::protocol::{Follow, Followed, RunEnded, RunFiles, Train};
use crate::train::TrainEvent;

/// The charts redraw at most this often, however short the intervals.
const REDRAW_MS: f64 = 250.0;
/// Points the page keeps for a chart; older ones are merged in pairs beyond it.
const CHART_POINTS: usize = 2000;

thread_local! {
    /// The run the charts show (the live one, or the last), with its id where the browser keeps
    /// it: what a change of the runs selected redraws.
    static SHOWN: RefCell<Option<(Option<String>, Rc<RefCell<RunMetrics>>)>> =
        const { RefCell::new(None) };
}

/// Redraws chart `index` (0: loss, 1: accuracy): the shown run alone, or with the runs
/// selected in the runs table; a chart that cannot draw is reported in the console, training
/// goes on.
fn draw(index: usize, metrics: &RunMetrics, shown_id: Option<&str>) {
    let canvas = Charts::CANVASES[index];
    let element = by_id::<HtmlElement>(canvas);
    let Some(backend) = ChartCanvas::new(by_id::<HtmlCanvasElement>(canvas)) else {
        return;
    };
    let area = backend.into_drawing_area();
    let theme = chart_theme();
    let drawn = area
        .fill(&theme.background)
        .and_then(|_| match runs::overlay() {
            None => Charts::DRAW[index](&area, metrics, &theme).map(|()| None),
            Some((selected, options, mean_seeds)) => {
                let refs: Vec<&RunRecord> = selected.iter().collect();
                let mut series = runs_chart::series(&refs, mean_seeds);
                let shown_selected = shown_id.is_some_and(|id| selected.iter().any(|r| r.id == id));
                if !metrics.intervals.is_empty() && !shown_selected {
                    series.push(Series {
                        label: "this run".into(),
                        color: PALETTE[series.len() % PALETTE.len()],
                        runs: vec![metrics],
                    });
                }
                let curves = match index {
                    0 => runs_chart::draw_loss(&area, &series, &options, &theme)?,
                    _ => runs_chart::draw_accuracy(&area, &series, &options, &theme)?,
                };
                let labels: Vec<String> = series.into_iter().map(|s| s.label).collect();
                Ok(Some((labels, curves)))
            }
        });
    // What the e2e tests read of a comparison: the series drawn and each one's curve.
    let figures = element.dataset();
    match drawn {
        Ok(Some((labels, curves))) => {
            let _ = figures.set("series", &labels.join("\n"));
            let ys: Vec<Vec<f64>> = curves
                .iter()
                .map(|curve| curve.iter().map(|p| p.1).collect())
                .collect();
            let _ = figures.set("curves", &serde_json::to_string(&ys).unwrap_or_default());
        }
        Ok(None) => {
            let _ = figures.delete("series");
            let _ = figures.delete("curves");
        }
        Err(error) => web_sys::console::warn_1(&format!("{canvas}: {error}").into()),
    }
}

/// Both charts again, for the shown run: the runs selected or the way they are drawn changed.
/// A redraw asked while one is under way may draw a chart once more; each draw is whole.
pub fn redraw() {
    let shown = SHOWN.with(|shown| shown.borrow().clone());
    let (id, metrics) = match shown {
        Some(shown) => shown,
        None => {
            let config = form_config().unwrap_or_default();
            (
                None,
                Rc::new(RefCell::new(RunMetrics::new(config, String::new()))),
            )
        }
    };
    // Each chart in a task of its own, after the one that asked: with many runs shown, each is
    // a long draw.
    wasm_bindgen_futures::spawn_local(async move {
        for index in 0..2 {
            yield_now().await;
            draw(index, &metrics.borrow(), id.as_deref());
        }
    });
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
        let id = SHOWN.with(|shown| shown.borrow().as_ref().and_then(|(id, _)| id.clone()));
        draw(chart, metrics, id.as_deref());
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

/// Keeps a run in this browser as it trains: its record now and then, and at its end with its
/// weights.
struct Keeper {
    id: String,
    name: String,
    saved_at: std::cell::Cell<f64>,
    /// Whether a write was refused: said once, not at every try.
    refused: std::cell::Cell<bool>,
}

/// A record of a training run is written at most this often (and at each epoch's end).
const KEEP_MS: f64 = 5000.0;

impl Keeper {
    fn new(config: &TrainConfig, started_ms: f64) -> Self {
        let random = (js_sys::Math::random() * 65536.0) as u32;
        Self {
            id: format!("{:x}-{random:04x}", started_ms as u64),
            name: format!(
                "{} · {} lr {} · seed {}",
                config.model, config.optimizer, config.lr, config.seed
            ),
            saved_at: std::cell::Cell::new(0.0),
            refused: std::cell::Cell::new(false),
        }
    }

    fn record(&self, metrics: &RunMetrics, failure: Option<String>) -> RunRecord {
        RunRecord {
            id: self.id.clone(),
            name: self.name.clone(),
            engine: Engine::Browser,
            failure,
            metrics: metrics.clone(),
        }
    }

    /// Writes `run` (and `weights`), and shows it in the runs table once it is kept.
    async fn keep(&self, run: RunRecord, weights: Option<Vec<u8>>) {
        self.saved_at.set(now_ms());
        match run_store::put(&run, weights.as_deref()).await {
            Ok(()) => runs::show(run),
            Err(error) if !self.refused.replace(true) => {
                let reason = match error {
                    PageError::Storage(reason) => reason,
                    other => other.to_string(),
                };
                show_error(&format!(
                    "This run cannot be kept in this browser: {reason}"
                ))
            }
            Err(_) => {}
        }
    }

    /// Whether `event` calls for a write of the run's record.
    fn due(&self, event: &TrainEvent) -> bool {
        matches!(event, TrainEvent::Epoch(_)) || now_ms() - self.saved_at.get() >= KEEP_MS
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
        SHOWN.with(|shown| *shown.borrow_mut() = Some((id, metrics.clone())));
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
    let kept_here = choice != EngineChoice::Native;
    let live = LiveRun::new(page, config.clone(), backend, train_len, kept_here);
    let from_model = by_id::<HtmlInputElement>("from-model").checked();
    let request = Train {
        config,
        backend: choice.device(),
        from_model,
    };
    let ended = trainer.ask_reporting(request, live.on_event()).await;
    let shown = live.end(page, ended).await;
    // The native engine's run folder is its record: the table lists it from there.
    if choice == EngineChoice::Native {
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
    let shown = match ended {
        Ok(Some(end)) => run.end(page, Ok(end)).await,
        Ok(None) => Ok(()),
        Err(error) => run.end(page, Err(error)).await,
    };
    runs::reload_native(page).await?;
    shown
}
