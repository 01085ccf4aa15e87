//! What a run produced, gathered from its events: written as metrics.json by the CLI, kept
//! with the run in the page, and what `chart` draws.

use serde::{Deserialize, Serialize};

use crate::config::TrainConfig;
use crate::inspect::learning::LearningReport;
use crate::inspect::watch::LearningWarning;
use crate::train::checkpoint::Position;
use crate::train::interval::IntervalReport;
use crate::train::{Divergence, EpochReport, MemoryReport, Outcome, TrainEvent};

/// A training loss read back at a log interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossPoint {
    pub step: usize,
    pub epoch: usize,
    #[serde(with = "crate::json_float")]
    pub loss: f32,
    /// The learning rate of that step; 0 in records from before rates were kept.
    #[serde(default)]
    pub lr: f64,
}

/// The learning rate changed while the run went, from `step` on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LrChange {
    pub step: usize,
    pub lr: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunMetrics {
    pub config: TrainConfig,
    /// The backend and adapter that trained, as shown to the user.
    pub backend: String,
    pub losses: Vec<LossPoint>,
    /// The training loss and accuracy of every few steps: what the charts draw.
    #[serde(default)]
    pub intervals: Vec<IntervalReport>,
    /// Steps the whole run takes, known from its first step: the charts' extent.
    pub total_steps: usize,
    pub epochs: Vec<EpochReport>,
    pub samples_per_sec: f64,
    pub outcome: Option<Outcome>,
    pub divergence: Option<Divergence>,
    /// Why the GPU was lost, when the run went on on the CPU backend.
    pub device_lost: Option<String>,
    pub memory: Vec<MemoryReport>,
    pub lr_changes: Vec<LrChange>,
    /// When the run started, in milliseconds since 1970 (UTC); 0 where it was not recorded.
    #[serde(default)]
    pub started_ms: f64,
    /// Training time so far, in seconds: evaluation and pauses excluded.
    #[serde(default)]
    pub training_secs: f64,
    /// The epoch whose model the run kept, when early stopping chose it.
    #[serde(default)]
    pub best_epoch: Option<usize>,
    /// How each layer learned, at each log line.
    #[serde(default)]
    pub learning: Vec<LearningReport>,
    /// What the learning figures warned of.
    #[serde(default)]
    pub warnings: Vec<LearningWarning>,
}

impl RunMetrics {
    pub fn new(config: TrainConfig, backend: String) -> Self {
        Self {
            config,
            backend,
            losses: Vec::new(),
            intervals: Vec::new(),
            total_steps: 0,
            epochs: Vec::new(),
            samples_per_sec: 0.0,
            outcome: None,
            divergence: None,
            device_lost: None,
            memory: Vec::new(),
            lr_changes: Vec::new(),
            // Whole milliseconds: JSON gives them back exactly.
            started_ms: web_time::SystemTime::now()
                .duration_since(web_time::UNIX_EPOCH)
                .map_or(0.0, |since| since.as_millis() as f64),
            training_secs: 0.0,
            best_epoch: None,
            learning: Vec::new(),
            warnings: Vec::new(),
        }
    }

    pub fn record(&mut self, event: &TrainEvent) {
        match event {
            TrainEvent::Step(step) => {
                self.total_steps = step.batches_per_epoch * self.config.epochs;
                self.samples_per_sec = step.samples_per_sec;
                self.training_secs = step.training_secs;
                if let Some(loss) = step.loss {
                    self.losses.push(LossPoint {
                        step: step.step,
                        epoch: step.epoch,
                        loss,
                        lr: step.lr,
                    });
                }
            }
            TrainEvent::Interval(report) => self.intervals.push(report.clone()),
            TrainEvent::Epoch(report) => self.epochs.push(report.clone()),
            TrainEvent::Memory(report) => self.memory.push(report.clone()),
            TrainEvent::Learning(report) => self.learning.push((**report).clone()),
            TrainEvent::Warning(warning) => self.warnings.push(warning.clone()),
            TrainEvent::LrChanged { step, lr } => self.lr_changes.push(LrChange {
                step: *step,
                lr: *lr,
            }),
            TrainEvent::BestKept { epoch, .. } => self.best_epoch = Some(*epoch),
            TrainEvent::Checkpoint(_) | TrainEvent::Paused { .. } | TrainEvent::Resumed { .. } => {}
            // The steps after the checkpoint are taken again, on the CPU.
            TrainEvent::DeviceLost {
                reason,
                resumed_at_step,
                ..
            } => {
                self.forget_steps_after(*resumed_at_step);
                self.device_lost = Some(reason.clone());
            }
            TrainEvent::Diverged(divergence) => {
                self.divergence = Some(divergence.clone());
                self.outcome = Some(Outcome::Diverged);
            }
            TrainEvent::Done {
                outcome,
                samples_per_sec,
            } => {
                self.outcome = Some(*outcome);
                self.samples_per_sec = *samples_per_sec;
            }
        }
    }

    /// Forgets what the run did after `position`, where it is resumed and records it again.
    pub fn truncate_to(&mut self, position: &Position) {
        self.forget_steps_after(position.step);
        self.epochs.retain(|report| report.epoch < position.epoch);
        self.memory.retain(|report| report.epoch < position.epoch);
        self.outcome = None;
        self.divergence = None;
    }

    fn forget_steps_after(&mut self, step: usize) {
        self.losses.retain(|point| point.step <= step);
        self.intervals.retain(|interval| interval.step <= step);
        self.lr_changes.retain(|change| change.step <= step);
        self.learning.retain(|report| report.step <= step);
        self.warnings.retain(|warning| warning.step <= step);
    }

    /// Keeps at most `max` loss points and as many intervals (at least 2 of each) for a chart
    /// of a run of any length: past it, neighbouring points are merged in pairs. Halving keeps
    /// the cost linear in the run's length; the points come since the last halving stay as they
    /// came.
    pub fn thin(&mut self, max: usize) {
        halve(&mut self.losses, max, |earlier, later| LossPoint {
            loss: (earlier.loss + later.loss) / 2.0,
            ..later.clone()
        });
        halve(&mut self.intervals, max, IntervalReport::merge);
        // Each log line's figures are whole: of two, the later stays.
        halve(&mut self.learning, max, |_, later| later.clone());
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("metrics are plain data")
    }
}

/// Merges neighbouring `points` in pairs (a lone last one kept) once there are more than `max`.
fn halve<T: Clone>(points: &mut Vec<T>, max: usize, merge: impl Fn(&T, &T) -> T) {
    if points.len() <= max.max(2) {
        return;
    }
    *points = points
        .chunks(2)
        .map(|pair| match pair {
            [earlier, later] => merge(earlier, later),
            lone => lone[0].clone(),
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::StepReport;

    #[test]
    fn thinning_bounds_the_points_and_keeps_the_curve() {
        let mut metrics = RunMetrics::new(TrainConfig::default(), "cpu".into());
        for step in 1..=100_000 {
            metrics.losses.push(LossPoint {
                step,
                epoch: 1 + step / 1000,
                loss: 1.0 / step as f32,
                lr: 0.01,
            });
            metrics.thin(1000);
            assert!(metrics.losses.len() <= 1000);
        }
        assert!(metrics.losses.len() > 500, "{}", metrics.losses.len());
        let last = metrics.losses.last().unwrap();
        assert_eq!((last.step, last.epoch), (100_000, 101));
        assert!(metrics.losses.windows(2).all(|w| w[0].step < w[1].step));
        assert!(metrics.losses.windows(2).all(|w| w[0].loss >= w[1].loss));
        // The first point stands for the first losses, 1/1, 1/2, …, merged.
        let first = &metrics.losses[0];
        assert!(first.step > 1 && first.loss < 1.0, "{first:?}");
    }

    #[test]
    fn records_logged_losses_epochs_and_outcome() {
        let mut metrics = RunMetrics::new(TrainConfig::default(), "cpu".into());
        let step = |step, loss| {
            TrainEvent::Step(StepReport {
                epoch: 1,
                step,
                batch: step - 1,
                batches_per_epoch: 10,
                batch_size: 64,
                seen: 64 * step,
                epoch_len: 640,
                loss,
                samples_per_sec: 100.0,
                training_secs: 0.64 * step as f64,
                lr: 0.01,
            })
        };
        metrics.record(&step(1, Some(2.3)));
        metrics.record(&step(2, None));
        metrics.record(&TrainEvent::Epoch(EpochReport {
            epoch: 1,
            test_loss: 0.5,
            correct: 9,
            total: 10,
            confusion: Box::new([[0; crate::model::CLASSES]; crate::model::CLASSES]),
        }));
        metrics.record(&TrainEvent::Done {
            outcome: Outcome::Completed,
            samples_per_sec: 123.0,
        });
        assert_eq!(
            metrics.losses,
            vec![LossPoint {
                step: 1,
                epoch: 1,
                loss: 2.3,
                lr: 0.01,
            }]
        );
        assert_eq!(metrics.total_steps, 20);
        assert_eq!(metrics.epochs.len(), 1);
        assert_eq!(metrics.outcome, Some(Outcome::Completed));
        let json: serde_json::Value = serde_json::from_str(&metrics.to_json()).unwrap();
        assert_eq!(json["samples_per_sec"], 123.0);
        assert_eq!(json["config"]["batch_size"], 64);
        assert_eq!(json["epochs"][0]["correct"], 9);
    }
}
