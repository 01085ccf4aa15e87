//! What a run reports as it goes: each step, interval, epoch and its end, and what happened to
//! it on the way (a pause, a new learning rate, a lost GPU, a divergence).

use std::fmt;
use std::sync::Arc;

use burn::prelude::*;
use serde::{Deserialize, Serialize};

use crate::config::StopOn;
use crate::inspect::learning::LearningReport;
use crate::inspect::watch::LearningWarning;
use crate::model::CLASSES;
use crate::platform;
use crate::train::checkpoint::Checkpoint;
use crate::train::interval::IntervalReport;

/// One training step done; `loss` is reported only every `log_interval` steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    pub epoch: usize,
    /// Steps since the start of the run, from 1.
    pub step: usize,
    /// Index of the batch within the epoch, from 0.
    pub batch: usize,
    pub batches_per_epoch: usize,
    pub batch_size: usize,
    /// Training samples of this epoch done, this batch included.
    pub seen: usize,
    pub epoch_len: usize,
    #[serde(with = "crate::json_float::option")]
    pub loss: Option<f32>,
    /// Training samples per second of training time so far.
    pub samples_per_sec: f64,
    /// Training time so far, in seconds: evaluation and pauses excluded.
    pub training_secs: f64,
    /// The learning rate this step was taken with, as its schedule set it.
    pub lr: f64,
}

/// The test set evaluated after an epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochReport {
    pub epoch: usize,
    #[serde(with = "crate::json_float")]
    pub test_loss: f32,
    pub correct: usize,
    pub total: usize,
    /// Test images by true digit (row) and predicted digit (column); boxed, so that every
    /// event is not as large as this one.
    pub confusion: Box<[[usize; CLASSES]; CLASSES]>,
}

/// What the run holds after an epoch: a long run's figures stay flat unless something leaks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryReport {
    pub epoch: usize,
    /// Resident memory natively; the wasm module's linear memory in the browser.
    pub process_bytes: Option<u64>,
    /// What burn's allocator reserves on the device (GPU backends only).
    pub device_reserved_bytes: Option<u64>,
    pub device_in_use_bytes: Option<u64>,
}

impl MemoryReport {
    pub(super) fn sample(epoch: usize, device: &Device) -> Self {
        let pool = device.memory_pool_usage();
        Self {
            epoch,
            process_bytes: platform::process_memory_bytes(),
            device_reserved_bytes: pool.as_ref().map(|p| p.bytes_reserved),
            device_in_use_bytes: pool.as_ref().map(|p| p.bytes_in_use),
        }
    }
}

/// The loss became NaN or infinite; the run stopped there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    pub epoch: usize,
    pub step: usize,
    pub lr: f64,
    #[serde(with = "crate::json_float")]
    pub loss: f32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Completed,
    Stopped,
    Diverged,
    /// Early stopping ended it: the test set had stopped improving.
    #[serde(rename = "early-stopped")]
    EarlyStopped,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TrainEvent {
    Step(StepReport),
    /// The training loss and accuracy of the last few steps, read a little after them.
    Interval(IntervalReport),
    Epoch(EpochReport),
    /// After each epoch's evaluation.
    Memory(MemoryReport),
    /// How each layer learns, at each log line; boxed, as it is the largest event.
    Learning(Box<LearningReport>),
    /// Something in the learning figures worth a line of the log.
    Warning(LearningWarning),
    /// The run paused before this step (through [`TrainControl::pause`]): whoever shows the
    /// run shows it paused, whichever page paused it.
    Paused {
        step: usize,
    },
    /// It goes on with this step.
    Resumed {
        step: usize,
    },
    /// The learning rate changed (through [`TrainControl::set_lr`]) from this step on.
    LrChanged {
        step: usize,
        lr: f64,
    },
    /// Taken whenever the loss is logged and after each epoch's evaluation. Not serialised: a
    /// checkpoint is written as its own file.
    #[serde(skip)]
    Checkpoint(Arc<Checkpoint>),
    /// A GPU was lost; the run goes on from the last checkpoint on the devices left, or on the
    /// CPU backend when none is.
    DeviceLost {
        reason: String,
        resumed_at_step: usize,
        /// Where the run goes on, as the log says it: "the CPU (2 threads)", or "2 devices
        /// (cpu, gpu:1)".
        goes_on: String,
    },
    Diverged(Divergence),
    /// With early stopping on, at the end of the run: the model kept is this epoch's.
    BestKept {
        epoch: usize,
        on: StopOn,
        /// The test loss, or the accuracy in %, at that epoch.
        value: f64,
        /// Whether early stopping ended the run.
        ended_early: bool,
    },
    Done {
        outcome: Outcome,
        samples_per_sec: f64,
    },
}

impl TrainEvent {
    /// What the run's log says of this event, in the CLI and the page alike: PyTorch's example's
    /// lines for steps and epochs, and a sentence for what happened on the way. None for what
    /// the log does not show.
    pub fn log_line(&self) -> Option<String> {
        match self {
            Self::Step(step) => step.log_line(),
            Self::Epoch(report) => Some(report.to_string()),
            Self::Warning(warning) => Some(warning.to_string()),
            Self::Paused { step } => Some(format!("Paused before step {step}")),
            Self::Resumed { step } => Some(format!("Resumed at step {step}")),
            Self::LrChanged { step, lr } => Some(format!("Learning rate {lr} from step {step}")),
            Self::DeviceLost {
                reason,
                resumed_at_step,
                goes_on,
            } => Some(format!(
                "The GPU was lost ({reason}). Training goes on on {goes_on} from step \
                 {resumed_at_step}, the last checkpoint."
            )),
            Self::Diverged(divergence) => Some(format!("Training {divergence}.")),
            Self::BestKept {
                epoch,
                on,
                value,
                ended_early,
            } => {
                let value = match on {
                    StopOn::Loss => format!("test loss {value:.4}"),
                    StopOn::Accuracy => format!("test accuracy {value:.2}%"),
                };
                let why = match ended_early {
                    true => "Early stopping: the test set stopped improving",
                    false => "Early stopping",
                };
                Some(format!(
                    "{why}; keeping epoch {epoch}'s model, the best ({value})"
                ))
            }
            Self::Interval(_)
            | Self::Memory(_)
            | Self::Learning(_)
            | Self::Checkpoint(_)
            | Self::Done { .. } => None,
        }
    }
}

impl StepReport {
    /// PyTorch MNIST example's log line, for steps whose loss was read.
    pub fn log_line(&self) -> Option<String> {
        let seen = self.batch * self.batch_size;
        let percent = 100.0 * self.batch as f64 / self.batches_per_epoch as f64;
        self.loss.map(|loss| {
            format!(
                "Train Epoch: {} [{seen}/{} ({percent:.0}%)]\tLoss: {loss:.6}",
                self.epoch, self.epoch_len
            )
        })
    }
}

impl EpochReport {
    pub fn accuracy(&self) -> f64 {
        100.0 * self.correct as f64 / self.total as f64
    }
}

impl fmt::Display for EpochReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Test set: Average loss: {:.4}, Accuracy: {}/{} ({:.2}%)",
            self.test_loss,
            self.correct,
            self.total,
            self.accuracy()
        )
    }
}

/// "wasm 84.2 MB · GPU 12.3 MB", "RSS 312.0 MB": what the page and the soak benchmark show.
impl fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let megabytes = |bytes: u64| bytes as f64 / 1e6;
        let mut parts = Vec::new();
        if let Some(bytes) = self.process_bytes {
            let process = platform::PROCESS_MEMORY;
            parts.push(format!("{process} {:.1} MB", megabytes(bytes)));
        }
        if let Some(bytes) = self.device_reserved_bytes {
            parts.push(format!("GPU {:.1} MB", megabytes(bytes)));
        }
        match parts.is_empty() {
            true => f.write_str("unknown"),
            false => f.write_str(&parts.join(" · ")),
        }
    }
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "diverged at epoch {}, step {} (lr {}): the loss is {}",
            self.epoch, self.step, self.lr, self.loss
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_read_like_pytorchs_example() {
        let step = StepReport {
            epoch: 1,
            step: 101,
            batch: 100,
            batches_per_epoch: 938,
            batch_size: 64,
            seen: 6464,
            epoch_len: 60000,
            loss: Some(0.123456),
            samples_per_sec: 1000.0,
            training_secs: 6.4,
            lr: 0.01,
        };
        assert_eq!(
            step.log_line().unwrap(),
            "Train Epoch: 1 [6400/60000 (11%)]\tLoss: 0.123456"
        );
        assert_eq!(StepReport { loss: None, ..step }.log_line(), None);
        let epoch = EpochReport {
            epoch: 1,
            test_loss: 0.04123,
            correct: 9868,
            total: 10000,
            confusion: Box::new([[0; CLASSES]; CLASSES]),
        };
        assert_eq!(
            TrainEvent::Epoch(epoch).log_line().unwrap(),
            "Test set: Average loss: 0.0412, Accuracy: 9868/10000 (98.68%)"
        );
        assert_eq!(
            TrainEvent::Step(step).log_line().unwrap(),
            "Train Epoch: 1 [6400/60000 (11%)]\tLoss: 0.123456"
        );
    }

    #[test]
    fn what_happens_on_the_way_is_one_sentence() {
        let lost = TrainEvent::DeviceLost {
            reason: "device removed".into(),
            resumed_at_step: 40,
            goes_on: "the CPU (2 threads)".into(),
        };
        assert_eq!(
            lost.log_line().unwrap(),
            "The GPU was lost (device removed). Training goes on on the CPU (2 threads) from \
             step 40, the last checkpoint."
        );
        let kept = TrainEvent::BestKept {
            epoch: 3,
            on: StopOn::Loss,
            value: 0.04123,
            ended_early: true,
        };
        assert_eq!(
            kept.log_line().unwrap(),
            "Early stopping: the test set stopped improving; keeping epoch 3's model, the best \
             (test loss 0.0412)"
        );
        let diverged = TrainEvent::Diverged(Divergence {
            epoch: 1,
            step: 7,
            lr: 10.0,
            loss: f32::NAN,
        });
        assert_eq!(
            diverged.log_line().unwrap(),
            "Training diverged at epoch 1, step 7 (lr 10): the loss is NaN."
        );
        assert_eq!(
            TrainEvent::Paused { step: 5 }.log_line().unwrap(),
            "Paused before step 5"
        );
        let done = TrainEvent::Done {
            outcome: Outcome::Completed,
            samples_per_sec: 1.0,
        };
        assert_eq!(done.log_line(), None);
    }
}
