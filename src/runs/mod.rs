//! Runs kept to be compared: each run's settings, engine, curves and end. The page keeps its
//! runs in IndexedDB and a native engine in its run folders (`metrics.json`); both read as
//! [`RunRecord`]s, which the runs table lists and the charts overlay.

pub mod export;
pub mod table;

use serde::{Deserialize, Serialize};

use crate::metrics::RunMetrics;
use crate::train::Outcome;

/// Where a run trained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// In a browser's worker, on WebGPU or its CPU.
    Browser,
    /// On a native engine: `webtrain ui` or the CLI.
    Native,
}

/// How a run ended, as the runs table says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunEnd {
    Finished,
    Stopped,
    /// Early stopping ended it.
    #[serde(rename = "stopped-early")]
    StoppedEarly,
    Diverged,
    /// An error ended it.
    Failed,
    /// No end was recorded: it is training, or what trained it went away (a closed tab).
    Unfinished,
}

/// One run as it is kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Unique among the runs kept in one place (a browser, a run folder's parent).
    pub id: String,
    /// What the table and the legend call it; the user may rename it.
    pub name: String,
    pub engine: Engine,
    /// Why it failed, when an error ended it.
    #[serde(default)]
    pub failure: Option<String>,
    /// Its settings (the seed included), backend line, curves, speed and outcome.
    pub metrics: RunMetrics,
}

impl RunRecord {
    pub fn end(&self) -> RunEnd {
        match (&self.failure, self.metrics.outcome) {
            (Some(_), _) => RunEnd::Failed,
            (None, Some(Outcome::Completed)) => RunEnd::Finished,
            (None, Some(Outcome::Stopped)) => RunEnd::Stopped,
            (None, Some(Outcome::Diverged)) => RunEnd::Diverged,
            (None, Some(Outcome::EarlyStopped)) => RunEnd::StoppedEarly,
            (None, None) => RunEnd::Unfinished,
        }
    }

    /// The best test accuracy (%) and the epoch that reached it, the first of equals.
    pub fn best(&self) -> Option<(usize, f64)> {
        self.metrics
            .epochs
            .iter()
            .map(|report| (report.epoch, report.accuracy()))
            .fold(None, |best, (epoch, accuracy)| match best {
                Some((_, top)) if top >= accuracy => best,
                _ => Some((epoch, accuracy)),
            })
    }

    /// The last epoch's test accuracy (%).
    pub fn final_accuracy(&self) -> Option<f64> {
        self.metrics.epochs.last().map(|report| report.accuracy())
    }
}

impl std::fmt::Display for RunEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Finished => "finished",
            Self::Stopped => "stopped",
            Self::StoppedEarly => "stopped early",
            Self::Diverged => "diverged",
            Self::Failed => "failed",
            Self::Unfinished => "unfinished",
        })
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Browser => "browser",
            Self::Native => "native",
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::TrainConfig;
    use crate::model::CLASSES;
    use crate::train::EpochReport;
    use crate::train::interval::IntervalReport;

    /// A run of `epochs` epochs of 10 intervals each, its loss falling from `loss` and its test
    /// accuracies those given, one an epoch.
    pub fn run(name: &str, config: TrainConfig, loss: f32, accuracies: &[f64]) -> RunRecord {
        let mut metrics = RunMetrics::new(config, "CPU (flex), 2 threads".into());
        metrics.total_steps = 100 * accuracies.len().max(1);
        for epoch in 1..=accuracies.len() {
            for i in 1..=10 {
                let step = (epoch - 1) * 100 + i * 10;
                metrics.intervals.push(IntervalReport {
                    epoch,
                    step,
                    epochs: step as f64 / 100.0,
                    steps: 10,
                    samples: 640,
                    loss: loss / step as f32,
                    accuracy: 90.0 + (step as f32 / 100.0),
                    training_secs: step as f64 / 20.0,
                });
            }
        }
        metrics.epochs = accuracies
            .iter()
            .enumerate()
            .map(|(i, &accuracy)| EpochReport {
                epoch: i + 1,
                test_loss: 0.1,
                correct: (accuracy * 100.0).round() as usize,
                total: 10_000,
                confusion: Box::new([[0; CLASSES]; CLASSES]),
            })
            .collect();
        metrics.outcome = Some(Outcome::Completed);
        metrics.training_secs = 10.0 * accuracies.len() as f64;
        metrics.samples_per_sec = 6400.0;
        RunRecord {
            id: name.to_string(),
            name: name.to_string(),
            engine: Engine::Browser,
            failure: None,
            metrics,
        }
    }

    #[test]
    fn the_best_epoch_is_the_first_to_reach_the_top_accuracy() {
        let record = run("a", TrainConfig::default(), 2.0, &[97.0, 98.5, 98.5, 98.1]);
        assert_eq!(record.best(), Some((2, 98.5)));
        assert_eq!(record.final_accuracy(), Some(98.1));
        let empty = run("b", TrainConfig::default(), 2.0, &[]);
        assert_eq!((empty.best(), empty.final_accuracy()), (None, None));
    }

    #[test]
    fn the_end_says_what_ended_the_run() {
        let mut record = run("a", TrainConfig::default(), 2.0, &[98.0]);
        assert_eq!(record.end(), RunEnd::Finished);
        record.metrics.outcome = Some(Outcome::Diverged);
        assert_eq!(record.end(), RunEnd::Diverged);
        record.metrics.outcome = None;
        assert_eq!(record.end(), RunEnd::Unfinished);
        record.failure = Some("the GPU was lost".into());
        assert_eq!(record.end(), RunEnd::Failed);
        assert_eq!(record.end().to_string(), "failed");
    }
}
