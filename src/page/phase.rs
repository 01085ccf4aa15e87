//! Where the page is: one value, and the one function that shows it. Every control's state
//! follows from the phase and from what the page holds (data, a model, a live worker), so that
//! no click can find a button enabled that the phase does not allow.

use web_sys::HtmlButtonElement;

use super::dom::{self, by_id, set_text};
use crate::train::Outcome;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Selecting the device and downloading MNIST.
    Loading,
    Ready,
    /// From the click on Start until the run's answer.
    Training {
        paused: bool,
    },
    Finished(Outcome),
    /// The learning-rate range test going.
    FindingLr,
    Failed,
}

impl Phase {
    /// The body's `data-state`, which tests and scripts wait on.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Loading => "loading",
            Phase::Ready => "ready",
            Phase::Training { paused: false } => "training",
            Phase::Training { paused: true } => "paused",
            Phase::Finished(Outcome::Completed) => "done",
            Phase::Finished(Outcome::Stopped) => "stopped",
            Phase::Finished(Outcome::Diverged) => "diverged",
            Phase::Finished(Outcome::EarlyStopped) => "stopped-early",
            Phase::FindingLr => "finding-lr",
            Phase::Failed => "error",
        }
    }

    /// What a screen reader says when the page enters this phase.
    pub fn announcement(self) -> &'static str {
        match self {
            Phase::Loading => "Loading MNIST",
            Phase::Ready => "Ready to train",
            Phase::Training { paused: false } => "Training",
            Phase::Training { paused: true } => "Training paused",
            Phase::Finished(Outcome::Completed) => "Training done",
            Phase::Finished(Outcome::Stopped) => "Training stopped",
            Phase::Finished(Outcome::Diverged) => "Training diverged",
            Phase::Finished(Outcome::EarlyStopped) => {
                "Training stopped early: the test set stopped improving"
            }
            Phase::FindingLr => "Finding a learning rate",
            Phase::Failed => "Training failed: see the error",
        }
    }

    pub fn is_training(self) -> bool {
        matches!(self, Phase::Training { .. })
    }
}

/// What else decides which controls work.
pub struct Holding {
    pub data: bool,
    pub model: bool,
    /// The worker stopped: nothing can be asked of it any more.
    pub worker_gone: bool,
}

/// Shows `phase`: the body's state and every control's.
pub fn render(phase: Phase, holding: &Holding) {
    let body = dom::document().body().expect("a body");
    let _ = body.dataset().set("state", phase.name());
    set_text("run-state", phase.announcement());
    let alive = !holding.worker_gone;
    let training = phase.is_training() && alive;
    let finding = phase == Phase::FindingLr && alive;
    let idle = alive && !matches!(phase, Phase::Loading | Phase::FindingLr) && !phase.is_training();
    let enabled = [
        ("start", idle && holding.data),
        ("find-lr", idle && holding.data),
        ("pause", training),
        // Stop ends a range test too.
        ("stop", training || finding),
        ("apply-lr", training),
        ("use-files", idle),
        ("load-weights", idle),
        ("evaluate", idle && holding.model && holding.data),
        ("download-weights", holding.model),
        ("download-onnx", holding.model),
        // The map asks the engine while a run goes too: it answers between steps.
        (
            "map-digits",
            alive && holding.data && phase != Phase::Loading,
        ),
    ];
    for (id, enabled) in enabled {
        by_id::<HtmlButtonElement>(id).set_disabled(!enabled);
    }
    by_id::<HtmlButtonElement>("reload").set_hidden(alive);
    set_text(
        "pause",
        match phase {
            Phase::Training { paused: true } => "Resume",
            _ => "Pause",
        },
    );
}
