//! The run's two charts on the page: the shown run (the live one, or the last) alone, or over
//! the runs ticked in the runs table; redrawn as a run goes, a chart a task, at most a few times
//! a second.

use std::cell::RefCell;
use std::rc::Rc;

use plotters::prelude::IntoDrawingArea;
use web_sys::{HtmlCanvasElement, HtmlElement};

use super::canvas::{ChartCanvas, chart_theme};
use super::dom::{by_id, now_ms};
use crate::chart::overlay::{self as runs_chart, ChartOptions, PALETTE, Series};
use crate::chart::run as chart;
use crate::config::TrainConfig;
use crate::metrics::RunMetrics;
use crate::platform::yield_now;
use crate::runs::RunRecord;

/// The charts redraw at most this often, however short the intervals.
const REDRAW_MS: f64 = 250.0;
/// Points the page keeps for a chart; older ones are merged in pairs beyond it.
pub(super) const CHART_POINTS: usize = 2000;

/// The run the charts show (the live one, or the last), with its id where the browser keeps it.
type Shown = (Option<String>, Rc<RefCell<RunMetrics>>);

thread_local! {
    /// The run the charts show: what a change of the runs selected redraws.
    static SHOWN: RefCell<Option<Shown>> = const { RefCell::new(None) };
    /// The runs ticked in the runs table, in its order, with how to draw them: none when none
    /// is ticked.
    static OVERLAY: RefCell<Option<Overlay>> = const { RefCell::new(None) };
}

/// Runs drawn with the shown one, and how.
pub(super) struct Overlay {
    pub runs: Vec<RunRecord>,
    pub options: ChartOptions,
    pub mean_seeds: bool,
}

/// What the charts overlay from now on; `redraw` shows it.
pub(super) fn set_overlay(overlay: Option<Overlay>) {
    OVERLAY.with(|kept| *kept.borrow_mut() = overlay);
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
    let overlay = OVERLAY.with(|overlay| overlay.take());
    let drawn = area.fill(&theme.background).and_then(|_| match &overlay {
        None => Charts::DRAW[index](&area, metrics, &theme).map(|()| None),
        Some(Overlay {
            runs: selected,
            options,
            mean_seeds,
        }) => {
            let refs: Vec<&RunRecord> = selected.iter().collect();
            let mut series = runs_chart::series(&refs, *mean_seeds);
            let shown_selected = shown_id.is_some_and(|id| selected.iter().any(|r| r.id == id));
            if !metrics.intervals.is_empty() && !shown_selected {
                series.push(Series {
                    label: "this run".into(),
                    color: PALETTE[series.len() % PALETTE.len()],
                    runs: vec![metrics],
                });
            }
            let curves = match index {
                0 => runs_chart::draw_loss(&area, &series, options, &theme)?,
                _ => runs_chart::draw_accuracy(&area, &series, options, &theme)?,
            };
            let labels: Vec<String> = series.into_iter().map(|s| s.label).collect();
            Ok(Some((labels, curves)))
        }
    });
    OVERLAY.with(|kept| *kept.borrow_mut() = overlay);
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
            figures.delete("series");
            figures.delete("curves");
        }
        Err(error) => web_sys::console::warn_1(&format!("{canvas}: {error}").into()),
    }
}

/// Makes `metrics` (of the kept run `id`, if the browser keeps it) the run the charts show.
pub(super) fn show(id: Option<String>, metrics: Rc<RefCell<RunMetrics>>) {
    SHOWN.with(|shown| *shown.borrow_mut() = Some((id, metrics)));
}

/// The shown run's learning figures: none before any run.
pub(super) fn shown_learning() -> Vec<crate::inspect::learning::LearningReport> {
    SHOWN
        .with(|shown| {
            let shown = shown.borrow();
            shown
                .as_ref()
                .map(|(_, metrics)| metrics.borrow().learning.clone())
        })
        .unwrap_or_default()
}

/// Both charts again, for the shown run: the runs selected or the way they are drawn changed.
/// Before any run, the axes follow the settings `form` reads (only then: a click that ticks
/// many runs redraws as often). A redraw asked while one is under way may draw a chart once
/// more; each draw is whole.
pub fn redraw(form: impl FnOnce() -> TrainConfig) {
    let shown = SHOWN.with(|shown| shown.borrow().clone());
    let (id, metrics) = match shown {
        Some(shown) => shown,
        None => {
            let config = form();
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

/// The charts, redrawn while a run trains when they have news and `REDRAW_MS` have passed since
/// the last redraw: one chart a time, in turn, so that a redraw is a short task on the page's
/// main thread.
pub(super) struct Charts {
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

    pub(super) fn new() -> Self {
        Self {
            drawn_at: 0.0,
            stale: [false; 2],
            next: 0,
            draws: 0,
        }
    }

    pub(super) fn news(&mut self) {
        self.stale = [true; 2];
    }

    /// Redraws the next stale chart, if its time has come.
    pub(super) fn update(&mut self, metrics: &RunMetrics) {
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
    pub(super) fn start(&mut self, metrics: &RunMetrics) {
        self.draw_one(0, metrics);
        self.stale[1] = true;
        self.next = 1;
        self.drawn_at = 0.0;
    }

    /// Both charts, each in a task of its own: at the end of a run, and before the first.
    pub(super) async fn draw_in_turn(charts: &RefCell<Self>, metrics: &RefCell<RunMetrics>) {
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

/// The charts' axes before any run, for the form's settings (`form`): each in a task of its
/// own, while MNIST downloads, so that a run's first redraw is not the charts' first (the
/// browser compiles their code on its first call).
pub async fn draw_empty(form: TrainConfig) {
    let config = form;
    let metrics = RefCell::new(RunMetrics::new(config, String::new()));
    Charts::draw_in_turn(&RefCell::new(Charts::new()), &metrics).await;
}
