//! Benchmarks measured through the training loop itself, so they time what a user's run does:
//! steady-state throughput and the training time to a test accuracy. They report figures;
//! nothing asserts on speed.

use burn::prelude::Device;
use serde::Serialize;
use thiserror::Error;

use crate::config::TrainConfig;
use crate::data::Mnist;
use crate::measure::kernel_profile::{KernelProfile, KernelWatch};
use crate::train::{Placement, TrainControl, TrainError, TrainEvent, train, train_on};

#[derive(Debug, Error)]
pub enum BenchError {
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error(
        "{needed} full batches are needed but the epoch has {available}: lower the warm-up, steps or repeats"
    )]
    TooManySteps { needed: usize, available: usize },
    #[error("the run ended after {timed} of {wanted} timed windows (did it diverge?)")]
    Ended { timed: usize, wanted: usize },
    #[error("the run ended before the {steps} steps to profile (did it diverge?)")]
    NotProfiled { steps: usize },
}

/// Steady-state training speed: the median of consecutive windows of `steps_per_window` steps.
#[derive(Clone, Debug, Serialize)]
pub struct Throughput {
    /// Steps run before the first window, shader compilation and autotuning among them.
    pub warmup_steps: usize,
    pub steps_per_window: usize,
    pub batch_size: usize,
    /// Training seconds of each window, in order.
    pub window_secs: Vec<f64>,
    /// Of the median window.
    pub samples_per_sec: f64,
    pub ms_per_step: f64,
}

/// One epoch whose loss is read every `steps` steps, and the batch index of the first read at
/// or after `warmup` steps: windows run between reads, when the device has caught up.
fn windowed(
    config: &TrainConfig,
    warmup: usize,
    steps: usize,
) -> Result<(TrainConfig, usize), BenchError> {
    let config = TrainConfig {
        epochs: 1,
        log_interval: steps,
        ..config.clone()
    };
    config.validate().map_err(TrainError::from)?;
    Ok((config, warmup.div_ceil(steps).max(1) * steps))
}

/// Times `repeats` windows of `steps` steps each, after at least `warmup` steps. Windows start
/// and end at steps whose loss is read back, when the device has finished all earlier work.
pub async fn throughput(
    config: &TrainConfig,
    data: &Mnist,
    placement: Placement<'_>,
    warmup: usize,
    steps: usize,
    repeats: usize,
) -> Result<Throughput, BenchError> {
    let (steps, repeats) = (steps.max(1), repeats.max(1));
    let (config, first) = windowed(config, warmup, steps)?;
    let full_batches = data.train.len_within(config.train_limit) / config.batch_size;
    let needed = first + repeats * steps + 1;
    if needed > full_batches {
        return Err(BenchError::TooManySteps {
            needed,
            available: full_batches,
        });
    }
    let control = TrainControl::default();
    let mut marks = Vec::with_capacity(repeats + 1);
    train_on(&config, data, placement, &control, |event| {
        if let TrainEvent::Step(step) = event
            && step.loss.is_some()
            && step.batch >= first
        {
            marks.push(step.training_secs);
            if marks.len() > repeats {
                control.stop();
            }
        }
    })
    .await?;
    if marks.len() <= repeats {
        return Err(BenchError::Ended {
            timed: marks.len().saturating_sub(1),
            wanted: repeats,
        });
    }
    let window_secs: Vec<f64> = marks.windows(2).map(|w| w[1] - w[0]).collect();
    let median = median(&window_secs);
    Ok(Throughput {
        warmup_steps: first + 1,
        steps_per_window: steps,
        batch_size: config.batch_size,
        samples_per_sec: (steps * config.batch_size) as f64 / median,
        ms_per_step: 1000.0 * median / steps as f64,
        window_secs,
    })
}

/// The kernels `steps` steady-state steps launch, each timed, after at least `warmup` steps:
/// a window between two steps whose loss is read back, so all its work is launched within it.
pub async fn kernel_profile(
    config: &TrainConfig,
    data: &Mnist,
    device: &Device,
    warmup: usize,
    steps: usize,
) -> Result<KernelProfile, BenchError> {
    let steps = steps.max(1);
    let (config, first) = windowed(config, warmup, steps)?;
    let control = TrainControl::default();
    let mut watch = None;
    let mut profile = None;
    train(&config, data, device, &control, |event| {
        if let TrainEvent::Step(step) = event
            && step.loss.is_some()
            && step.batch >= first
        {
            match watch.take() {
                None => watch = Some(KernelWatch::start(true)),
                Some(watch) => {
                    profile = Some(watch.finish(steps));
                    control.stop();
                }
            }
        }
    })
    .await?;
    profile.ok_or(BenchError::NotProfiled { steps })
}

/// The test accuracy after an epoch and the training time it took to get there.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EpochAccuracy {
    pub epoch: usize,
    pub accuracy: f64,
    /// Training time up to the end of this epoch: evaluation excluded.
    pub training_secs: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimeToAccuracy {
    /// Test accuracy in percent.
    pub target: f64,
    pub epochs: Vec<EpochAccuracy>,
    /// The first epoch at or above the target, if any of `config.epochs` reached it.
    pub reached: Option<EpochAccuracy>,
}

/// Trains as `config` says until an epoch's test accuracy reaches `target` percent.
pub async fn time_to_accuracy(
    config: &TrainConfig,
    data: &Mnist,
    placement: Placement<'_>,
    target: f64,
) -> Result<TimeToAccuracy, BenchError> {
    let control = TrainControl::default();
    let mut training_secs = 0.0;
    let mut epochs = Vec::new();
    train_on(config, data, placement, &control, |event| match event {
        TrainEvent::Step(step) => training_secs = step.training_secs,
        TrainEvent::Epoch(report) => {
            if report.accuracy() >= target {
                control.stop();
            }
            epochs.push(EpochAccuracy {
                epoch: report.epoch,
                accuracy: report.accuracy(),
                training_secs,
            });
        }
        _ => {}
    })
    .await?;
    let reached = epochs.iter().find(|e| e.accuracy >= target).cloned();
    Ok(TimeToAccuracy {
        target,
        epochs,
        reached,
    })
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    match sorted.len() % 2 {
        0 => (sorted[mid - 1] + sorted[mid]) / 2.0,
        _ => sorted[mid],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
