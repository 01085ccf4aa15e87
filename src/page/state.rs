//! What the page holds between clicks, and what every part of it does with that: its phase,
//! its error line, its log, and its end when something fails for good. The engine's own state is
//! `crate::session`'s.

use std::cell::RefCell;
use std::rc::Rc;

use web_sys::HtmlElement;

use super::dom::{self, by_id, set_text};
use super::engines::Engines;
use super::phase::{self, Holding, Phase};
use super::trainer::Trainer;
use crate::config::ModelKind;
use crate::session::protocol::{DataLoaded, DataOrigin};

/// A model the page holds: the worker holds the model itself, to evaluate, predict and train on
/// from; the page its file, to download and to keep.
pub struct ModelFile {
    pub kind: ModelKind,
    /// Its `.safetensors` file, as downloaded and as kept in IndexedDB.
    pub weights: Vec<u8>,
    pub about: String,
}

/// What the page holds between clicks (the engine's own state is `crate::session`'s).
pub struct Page {
    pub engines: Engines,
    /// The engine the page uses: it holds the page's MNIST and model.
    pub trainer: Rc<Trainer>,
    pub phase: Phase,
    /// The training and test set sizes, once MNIST is loaded.
    pub data: Option<(usize, usize)>,
    /// The last run's model (a diverged run's last finite weights), a kept or a loaded one.
    pub model: Option<Rc<ModelFile>>,
    pub worker_gone: bool,
    /// Runs started so far: an answer asked for before the latest run began is stale.
    pub runs: u32,
}

impl Page {
    pub fn render(&self) {
        let holding = Holding {
            data: self.data.is_some(),
            model: self.model.is_some(),
            worker_gone: self.worker_gone,
        };
        phase::render(self.phase, &holding);
    }
}

pub type Shared = Rc<RefCell<Page>>;

thread_local! {
    /// The page's state, for the panic hook and the worker's crash, which come from
    /// outside any handler.
    pub(super) static PAGE: RefCell<Option<Shared>> = const { RefCell::new(None) };
}

pub fn set_phase(page: &Shared, phase: Phase) {
    page.borrow_mut().phase = phase;
    page.borrow().render();
}

pub fn show_error(message: &str) {
    set_text("error", message);
    by_id::<HtmlElement>("error").set_hidden(message.is_empty());
}

/// Shows `message` and puts the page in `Failed`; also from the panic hook, which may come
/// while the page is borrowed.
pub fn fail(message: &str) {
    fail_with(message, |_| {});
}

pub fn fail_with(message: &str, change: impl FnOnce(&mut Page)) {
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
pub fn engine_stopped(stopped: &str) {
    fail_with(
        &format!("{stopped}. Reload the page to start again."),
        |page| page.worker_gone = true,
    );
}

pub fn log(line: &str) {
    let log = by_id::<HtmlElement>("log");
    let _ = log.append_with_str_1(&format!("{line}\n"));
    log.set_scroll_top(log.scroll_height());
}

/// The engine's data made the page's: its line says whose it is.
pub fn use_data(
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
