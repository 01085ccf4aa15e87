//! A run the page trains, kept in this browser as it goes: its record now and then (so a closed
//! tab keeps what was trained), and at its end with its weights.

use std::cell::Cell;

use super::dom::now_ms;
use super::error::PageError;
use super::state::show_error;
use super::{run_store, runs};
use crate::config::TrainConfig;
use crate::metrics::RunMetrics;
use crate::runs::{Engine, RunRecord};
use crate::train::TrainEvent;

/// Keeps a run in this browser as it trains: its record now and then, and at its end with its
/// weights.
pub(super) struct Keeper {
    pub(super) id: String,
    name: String,
    pub(super) saved_at: Cell<f64>,
    /// Whether a write was refused: said once, not at every try.
    refused: Cell<bool>,
}

/// A record of a training run is written at most this often (and at each epoch's end).
const KEEP_MS: f64 = 5000.0;

impl Keeper {
    pub(super) fn new(config: &TrainConfig, started_ms: f64) -> Self {
        let random = (js_sys::Math::random() * 65536.0) as u32;
        Self {
            id: format!("{:x}-{random:04x}", started_ms as u64),
            name: format!(
                "{} · {} lr {} · seed {}",
                config.model, config.optimizer, config.lr, config.seed
            ),
            saved_at: Cell::new(0.0),
            refused: Cell::new(false),
        }
    }

    pub(super) fn record(&self, metrics: &RunMetrics, failure: Option<String>) -> RunRecord {
        RunRecord {
            id: self.id.clone(),
            name: self.name.clone(),
            engine: Engine::Browser,
            failure,
            metrics: metrics.clone(),
        }
    }

    /// Writes `run` (and `weights`), and shows it in the runs table once it is kept.
    pub(super) async fn keep(&self, run: RunRecord, weights: Option<Vec<u8>>) {
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
    pub(super) fn due(&self, event: &TrainEvent) -> bool {
        matches!(event, TrainEvent::Epoch(_)) || now_ms() - self.saved_at.get() >= KEEP_MS
    }
}
