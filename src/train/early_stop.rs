//! Early stopping, as Keras's `EarlyStopping(restore_best_weights=True)`: after each epoch the
//! test loss (or accuracy) is compared with the best so far; after `patience` epochs without
//! an improvement of more than `min_delta` the run ends, and whatever ended it, the model kept
//! is the best epoch's.

use std::collections::BTreeMap;
use std::sync::Arc;

use burn::tensor::TensorData;
use serde::{Deserialize, Serialize};

use crate::config::{EarlyStopConfig, StopOn};
use crate::train::EpochReport;

/// The best epoch so far and how many epochs have passed without beating it: a checkpoint
/// keeps it, so a resumed run stops where the whole run would have.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EarlyStopState {
    pub best: Option<BestEpoch>,
    /// Epochs since the best one.
    pub since_best: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BestEpoch {
    pub epoch: usize,
    /// What early stopping watches, at that epoch: the test loss, or the accuracy in %.
    pub value: f64,
    /// The weights after that epoch, by parameter path, as a checkpoint holds them; kept
    /// beside the settings and position rather than in their JSON.
    #[serde(skip)]
    pub weights: Arc<BTreeMap<String, TensorData>>,
}

/// What an epoch's evaluation means for the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The best epoch so far: its weights are to be kept.
    Improved,
    /// Not better, and patience is not yet spent.
    Waiting,
    /// Patience is spent: the run ends.
    Stop,
}

impl EarlyStopState {
    /// Takes an epoch's evaluation into account; early stopping off (no patience) watches
    /// nothing and never stops.
    pub fn observe(&mut self, config: &EarlyStopConfig, report: &EpochReport) -> Verdict {
        let Some(patience) = config.patience else {
            return Verdict::Waiting;
        };
        let value = match config.on {
            StopOn::Loss => f64::from(report.test_loss),
            StopOn::Accuracy => report.accuracy(),
        };
        let improved = match (&self.best, config.on) {
            (None, _) => value.is_finite(),
            (Some(best), StopOn::Loss) => value < best.value - config.min_delta,
            (Some(best), StopOn::Accuracy) => value > best.value + config.min_delta,
        };
        if improved {
            self.best = Some(BestEpoch {
                epoch: report.epoch,
                value,
                weights: Arc::default(),
            });
            self.since_best = 0;
            return Verdict::Improved;
        }
        self.since_best += 1;
        match self.since_best >= patience {
            true => Verdict::Stop,
            false => Verdict::Waiting,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CLASSES;

    fn report(epoch: usize, test_loss: f32, correct: usize) -> EpochReport {
        EpochReport {
            epoch,
            test_loss,
            correct,
            total: 100,
            confusion: Box::new([[0; CLASSES]; CLASSES]),
        }
    }

    #[test]
    fn stops_after_patience_epochs_without_an_improvement_beyond_min_delta() {
        let config = EarlyStopConfig {
            patience: Some(2),
            min_delta: 0.01,
            on: StopOn::Loss,
        };
        let mut state = EarlyStopState::default();
        let verdicts: Vec<Verdict> = [0.5, 0.4, 0.395, 0.41, 0.3]
            .iter()
            .enumerate()
            .map(|(i, &loss)| state.observe(&config, &report(i + 1, loss, 90)))
            .collect();
        // 0.395 is better than 0.4, but not by more than 0.01.
        use Verdict::*;
        assert_eq!(verdicts, [Improved, Improved, Waiting, Stop, Improved]);
        assert_eq!(state.best.as_ref().map(|b| b.epoch), Some(5));
    }

    #[test]
    fn on_accuracy_a_higher_value_is_better() {
        let config = EarlyStopConfig {
            patience: Some(1),
            min_delta: 0.0,
            on: StopOn::Accuracy,
        };
        let mut state = EarlyStopState::default();
        assert_eq!(
            state.observe(&config, &report(1, 0.5, 90)),
            Verdict::Improved
        );
        assert_eq!(
            state.observe(&config, &report(2, 0.1, 95)),
            Verdict::Improved
        );
        assert_eq!(state.observe(&config, &report(3, 0.05, 95)), Verdict::Stop);
        assert_eq!(state.best.unwrap().value, 95.0);
    }

    #[test]
    fn without_patience_nothing_is_watched() {
        let mut state = EarlyStopState::default();
        let verdict = state.observe(&EarlyStopConfig::default(), &report(1, 0.5, 90));
        assert_eq!(
            (verdict, state),
            (Verdict::Waiting, EarlyStopState::default())
        );
    }
}
