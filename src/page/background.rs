//! A run whose tab goes to the background. The run trains in the page's worker and yields
//! through a message channel, which browsers do not throttle as they throttle a hidden page's
//! timers; a browser may still slow it (a hidden tab's lower priority, a frozen tab). When the
//! tab comes back, the run's pace while hidden is compared with its pace before, and a run that
//! lost more than a tenth of it says so in the log.

use std::cell::RefCell;
use std::collections::VecDeque;

use wasm_bindgen::prelude::*;

use super::dom::now_ms;
use super::state::{Shared, log};
use crate::pace::{slowed_while_hidden, steps_per_s};

/// The steps before the tab went to the background that its pace is taken over.
const PACE_WINDOW_MS: f64 = 20_000.0;

#[derive(Default)]
struct Pace {
    /// (time in ms, step) of the run's recent steps, oldest first.
    recent: VecDeque<(f64, usize)>,
    /// When the tab went to the background: the time, the step, the pace before (steps/s).
    hidden: Option<(f64, usize, Option<f64>)>,
}

thread_local! {
    static PACE: RefCell<Pace> = RefCell::new(Pace::default());
}

/// A step of the run on show.
pub fn note_step(step: usize) {
    let now = now_ms();
    PACE.with(|pace| {
        let mut pace = pace.borrow_mut();
        // A new run starts its steps again.
        if pace.recent.back().is_some_and(|&(_, last)| step < last) {
            *pace = Pace::default();
        }
        pace.recent.push_back((now, step));
        while pace
            .recent
            .front()
            .is_some_and(|&(t, _)| now - t > PACE_WINDOW_MS)
        {
            pace.recent.pop_front();
        }
    });
}

/// Watches the tab going to the background and coming back, for the page's lifetime.
pub fn wire(page: &Shared) {
    let page = page.clone();
    let on_change = Closure::<dyn FnMut()>::new(move || {
        let document = web_sys::window().and_then(|w| w.document());
        let Some(document) = document else { return };
        let training = page.borrow().phase.is_training();
        if document.hidden() {
            went_to_background(training);
        } else if let Some(said) = came_back(training) {
            log(&said);
        }
    });
    if let Some(document) = web_sys::window().and_then(|w| w.document()) {
        let _ = document.add_event_listener_with_callback(
            "visibilitychange",
            on_change.as_ref().unchecked_ref(),
        );
    }
    on_change.forget();
}

fn went_to_background(training: bool) {
    let now = now_ms();
    PACE.with(|pace| {
        let mut pace = pace.borrow_mut();
        let step = pace.recent.back().map(|&(_, step)| step);
        pace.hidden = match (training, step) {
            (true, Some(step)) => Some((now, step, steps_per_s(pace.recent.iter().copied()))),
            _ => None,
        };
    });
}

fn came_back(training: bool) -> Option<String> {
    let now = now_ms();
    PACE.with(|pace| {
        let mut pace = pace.borrow_mut();
        let (since, step_then, before) = pace.hidden.take()?;
        let step_now = pace.recent.back()?.1;
        // A run that ended in the background is judged up to its last step.
        let until = match training {
            true => now,
            false => pace.recent.back()?.0,
        };
        let hidden_pace = step_now.saturating_sub(step_then) as f64 / ((until - since) / 1000.0);
        slowed_while_hidden(before?, hidden_pace, until - since)
    })
}
