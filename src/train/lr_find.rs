//! The learning-rate range test (Leslie Smith's, as fast.ai's `lr_find` runs it): from the
//! run's settings and model, a copy trains with a learning rate that rises exponentially each
//! step, and the loss against the rate says where training is fastest. The model and optimizer
//! given are left as they were: the test trains a copy with an optimizer of its own.

use burn::prelude::*;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::config::{MAX_LR, TrainConfig};
use crate::data::Mnist;
use crate::data::batcher::epoch_order;
use crate::model::Net;
use crate::platform;
use crate::readback::read_together;
use crate::train::group::Placement;
use crate::train::optimizer::{Optimizer, Rates};
use crate::train::schedule;
use crate::train::step::Stepper;
use crate::train::{TrainControl, TrainError};

/// fast.ai's smoothing of the loss: each step keeps this share of the average before it.
const SMOOTHING: f64 = 0.98;
/// The test ends once the smoothed loss passes this many times its lowest.
const DIVERGED: f64 = 4.0;
/// The losses are read back this many steps at a time, in one transfer: a read-back at every
/// step would stall the device's queue at every step. A test that diverges runs up to this
/// many steps past it, on its own copy, and leaves them out.
const READ_EVERY: usize = 10;
pub const MAX_STEPS: usize = 10_000;

/// The range the learning rate rises through.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LrRange {
    pub start: f64,
    pub end: f64,
    pub steps: usize,
}

impl Default for LrRange {
    fn default() -> Self {
        Self {
            start: 1e-6,
            end: 1.0,
            steps: 100,
        }
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum LrRangeError {
    #[error("the range test's rates must rise from above 0 to at most {MAX_LR}, got {0} to {1}")]
    Rates(f64, f64),
    #[error("the range test takes 2 to {MAX_STEPS} steps, got {0}")]
    Steps(usize),
}

impl LrRange {
    pub fn validate(&self) -> Result<(), LrRangeError> {
        let rising = self.start > 0.0 && self.start < self.end && self.end <= MAX_LR;
        if !(rising && self.start.is_finite() && self.end.is_finite()) {
            return Err(LrRangeError::Rates(self.start, self.end));
        }
        match (2..=MAX_STEPS).contains(&self.steps) {
            true => Ok(()),
            false => Err(LrRangeError::Steps(self.steps)),
        }
    }

    /// The rate of step `index` (from 0): start × (end / start)^(index / (steps − 1)).
    pub fn rate(&self, index: usize) -> f64 {
        let done = index as f64 / (self.steps - 1) as f64;
        self.start * (self.end / self.start).powf(done)
    }
}

/// One step of the test.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LrPoint {
    pub lr: f64,
    /// The batch's loss, before the step; not finite once the test diverged.
    #[serde(with = "crate::json_float")]
    pub loss: f32,
    /// The loss smoothed as fast.ai smooths it (debiased), which the suggestion reads.
    pub smoothed: f64,
}

/// The rule the suggestion follows.
pub const SUGGESTION_RULE: &str = "the rate of the lowest smoothed loss, divided by 10";

/// What the test found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LrFinding {
    pub points: Vec<LrPoint>,
    /// By [`SUGGESTION_RULE`]; none when no loss was finite.
    pub suggestion: Option<f64>,
    /// Whether the test ended early, its loss diverging.
    pub diverged: bool,
}

impl LrFinding {
    fn from_points(points: Vec<LrPoint>, diverged: bool) -> Self {
        let lowest = points
            .iter()
            .filter(|p| p.smoothed.is_finite())
            .min_by(|a, b| a.smoothed.total_cmp(&b.smoothed));
        Self {
            suggestion: lowest.map(|p| p.lr / 10.0),
            points,
            diverged,
        }
    }
}

/// Runs the test on `model` (left as it is) with `config`'s optimizer, batch size and seed,
/// each point reported through `on_point` as it comes; `control` stops it early.
pub async fn find_lr(
    model: &Net,
    config: &TrainConfig,
    range: LrRange,
    data: &Mnist,
    placement: Placement<'_>,
    control: &TrainControl,
    mut on_point: impl FnMut(&LrPoint),
) -> Result<LrFinding, TrainError> {
    config.validate()?;
    range.validate()?;
    let epoch_len = data.train.len_within(config.train_limit);
    if epoch_len == 0 {
        return Err(TrainError::EmptyData("training"));
    }
    // Augmented as the run would be: the range test measures the run's landscape.
    let stepper =
        Stepper::over(placement, &data.train, epoch_len).augmented(&config.augment, config.seed);
    // Off the autodiff graph first: a model fresh from a run is on it.
    let mut copy = stepper.trainable(model.valid());
    let mut optimizer = Optimizer::new(config);
    let order = epoch_order(epoch_len, config.seed, 1);
    let mut batches = order.chunks(config.batch_size).cycle();
    let mut smoother = Smoother::default();
    let mut unread: Vec<(f64, Tensor<1>)> = Vec::with_capacity(READ_EVERY);
    for index in 0..range.steps {
        if control.is_stopped() {
            break;
        }
        let indices = batches.next().expect("a cycle of a non-empty order");
        // One-cycle's momentum, if the settings name it, as its first step has it.
        let rates = Rates {
            lr: range.rate(index),
            ..schedule::rates(config, 0, 1)
        };
        let stats;
        (copy, stats) = stepper.step(copy, &mut optimizer, rates, index, indices);
        unread.push((rates.lr, stats.loss()));
        if unread.len() == READ_EVERY && smoother.read(&mut unread, &mut on_point).await? {
            return Ok(smoother.finding(true));
        }
        platform::yield_now().await;
    }
    let diverged = smoother.read(&mut unread, &mut on_point).await?;
    Ok(smoother.finding(diverged))
}

/// The points so far and fast.ai's smoothing of their losses.
struct Smoother {
    average: f64,
    lowest: f64,
    points: Vec<LrPoint>,
}

impl Default for Smoother {
    fn default() -> Self {
        Self {
            average: 0.0,
            lowest: f64::INFINITY,
            points: Vec::new(),
        }
    }
}

impl Smoother {
    /// Reads the steps' losses in one transfer and takes them in order; true once the smoothed
    /// loss diverged, the steps after that one left out as if never taken.
    async fn read(
        &mut self,
        unread: &mut Vec<(f64, Tensor<1>)>,
        on_point: &mut impl FnMut(&LrPoint),
    ) -> Result<bool, TrainError> {
        if unread.is_empty() {
            return Ok(false);
        }
        let (rates, losses): (Vec<f64>, Vec<Tensor<1>>) = unread.drain(..).unzip();
        let losses = read_together(losses).await?;
        for (lr, loss) in rates.into_iter().zip(losses) {
            let loss = loss.first().copied().unwrap_or(f32::NAN);
            if self.take(lr, loss, on_point) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// One step's loss; true once the smoothed loss diverged.
    fn take(&mut self, lr: f64, loss: f32, on_point: &mut impl FnMut(&LrPoint)) -> bool {
        self.average = SMOOTHING * self.average + (1.0 - SMOOTHING) * f64::from(loss);
        let taken = self.points.len() as i32 + 1;
        let smoothed = self.average / (1.0 - SMOOTHING.powi(taken));
        let point = LrPoint { lr, loss, smoothed };
        on_point(&point);
        self.points.push(point);
        let diverged = !smoothed.is_finite() || smoothed > DIVERGED * self.lowest;
        self.lowest = self.lowest.min(smoothed);
        diverged
    }

    fn finding(self, diverged: bool) -> LrFinding {
        LrFinding::from_points(self.points, diverged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_rises_exponentially_from_start_to_end() {
        let range = LrRange::default();
        assert_eq!(range.rate(0), 1e-6);
        assert!((range.rate(99) - 1.0).abs() < 1e-12);
        assert!((range.rate(33) / range.rate(0) - 10f64.powf(6.0 * 33.0 / 99.0)).abs() < 1e-9);
        assert!(
            LrRange {
                start: 1.0,
                end: 0.1,
                steps: 100
            }
            .validate()
            .is_err()
        );
        assert!(LrRange { steps: 1, ..range }.validate().is_err());
    }

    #[test]
    fn the_losses_smooth_as_fast_ais_and_divergence_is_four_times_the_lowest() {
        let mut smoother = Smoother::default();
        let mut shown = 0;
        let mut take =
            |smoother: &mut Smoother, loss| smoother.take(0.1, loss, &mut |_| shown += 1);
        assert!(!take(&mut smoother, 2.0));
        // Debiased, the first smoothed loss is the loss itself.
        assert!((smoother.points[0].smoothed - 2.0).abs() < 1e-12);
        assert!(!take(&mut smoother, 1.0));
        let expected = (0.02 * 0.98 * 2.0 + 0.02 * 1.0) / (1.0 - 0.98f64.powi(2));
        assert!((smoother.points[1].smoothed - expected).abs() < 1e-12);
        assert!(!take(&mut smoother, 1.0));
        // The lowest smoothed loss is about 1.3: a loss of 1,000 drives the average past 4×.
        assert!(take(&mut smoother, 1000.0));
        assert!(take(&mut smoother, f32::NAN));
        assert_eq!(shown, 5);
        assert!(smoother.finding(true).diverged);
    }

    #[test]
    fn the_suggestion_is_the_lowest_smoothed_losss_rate_over_ten() {
        let point = |lr, smoothed| LrPoint {
            lr,
            loss: smoothed as f32,
            smoothed,
        };
        let finding = LrFinding::from_points(
            vec![
                point(0.001, 2.0),
                point(0.01, 1.0),
                point(0.1, 0.5),
                point(1.0, f64::NAN),
            ],
            true,
        );
        assert_eq!(finding.suggestion, Some(0.01));
        assert_eq!(LrFinding::from_points(Vec::new(), false).suggestion, None);
    }
}
