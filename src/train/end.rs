//! How a run ends: the outcome reported, and the model it keeps (early stopping's best epoch's,
//! when early stopping is on).

use burn::prelude::*;

use super::checkpoint::CheckpointError;
use super::early_stop::EarlyStopState;
use super::{Outcome, TrainError, TrainEvent, Trained};
use crate::config::TrainConfig;
use crate::model::Net;
use crate::model::model_from_weights;

/// How a run ended, and what it keeps.
pub(super) struct End<'a> {
    outcome: Outcome,
    samples_per_sec: f64,
    early: &'a EarlyStopState,
}

impl<'a> End<'a> {
    pub(super) fn new(outcome: Outcome, samples_per_sec: f64, early: &'a EarlyStopState) -> Self {
        Self {
            outcome,
            samples_per_sec,
            early,
        }
    }

    /// Reports the end; the model kept is `model`, or early stopping's best epoch's.
    pub(super) fn finish(
        self,
        model: Net,
        config: &TrainConfig,
        device: &Device,
        on_event: &mut impl FnMut(TrainEvent),
    ) -> Result<Trained, TrainError> {
        let (model, best_epoch) = match &self.early.best {
            Some(best) => {
                let kept = model_from_weights(config.model, &best.weights, device)
                    .map_err(CheckpointError::from)?;
                on_event(TrainEvent::BestKept {
                    epoch: best.epoch,
                    on: config.early_stop.on,
                    value: best.value,
                    ended_early: self.outcome == Outcome::EarlyStopped,
                });
                (kept, Some(best.epoch))
            }
            None => (model, None),
        };
        if self.outcome != Outcome::Diverged {
            on_event(TrainEvent::Done {
                outcome: self.outcome,
                samples_per_sec: self.samples_per_sec,
            });
        }
        Ok(Trained {
            model,
            outcome: self.outcome,
            best_epoch,
        })
    }
}
