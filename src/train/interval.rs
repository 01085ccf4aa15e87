//! The training loss and accuracy of every few steps, for the charts. Each step's figures are
//! summed on the device, by position in the batch; the sums are read back with a read the loop
//! makes anyway (a logged step's loss, an epoch's last one) in the same transfer, or at once on
//! the CPU backend, where a read costs nothing, and summed on the host. The chart adds no
//! readback and no reduction, and the device never waits for it.

use burn::prelude::*;
use burn::tensor::ExecutionError;
use serde::{Deserialize, Serialize};

use crate::train::step::StepStats;

/// Chart points an epoch gets at least, when it has as many steps.
pub const POINTS_PER_EPOCH: usize = 64;

/// Steps an interval spans for an epoch of `batches_per_epoch`: 14 for MNIST at batch 64.
pub fn steps_per_interval(batches_per_epoch: usize) -> usize {
    (batches_per_epoch / POINTS_PER_EPOCH).max(1)
}

/// The mean training loss and the accuracy of a few consecutive steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntervalReport {
    pub epoch: usize,
    /// The interval's last step, counted over the run from 1.
    pub step: usize,
    /// Epochs of training done at its end, fractional: the charts' x axis.
    pub epochs: f64,
    pub steps: usize,
    pub samples: usize,
    /// The mean of its samples' losses.
    #[serde(with = "crate::json_float")]
    pub loss: f32,
    /// Percent of its training samples classed right, each before its step's update.
    #[serde(with = "crate::json_float")]
    pub accuracy: f32,
    /// The run's training time at its last step, in seconds: the charts' x axis by time.
    #[serde(default)]
    pub training_secs: f64,
}

impl IntervalReport {
    /// Two neighbouring intervals as one, for a chart that keeps a bounded number of points.
    pub fn merge(&self, later: &Self) -> Self {
        let steps = self.steps + later.steps;
        let samples = self.samples + later.samples;
        let loss = (self.loss * self.steps as f32 + later.loss * later.steps as f32) / steps as f32;
        let correct = self.accuracy * self.samples as f32 + later.accuracy * later.samples as f32;
        Self {
            steps,
            samples,
            loss,
            accuracy: correct / samples.max(1) as f32,
            ..later.clone()
        }
    }
}

/// Sums by position in the batch and class, on the device, of the steps' [`StepStats`]: each
/// position's losses and how many times it was classed right. Adding a step's is one
/// elementwise kernel, and the host sums the positions and classes once they are read.
struct Part(StepStats);

impl Part {
    fn len(&self) -> usize {
        self.0.samples()
    }

    fn add(&mut self, step: &StepStats) {
        self.0 = StepStats {
            losses: self.0.losses.clone() + step.losses.clone(),
            right: self.0.right.clone() + step.right.clone(),
        };
    }
}

/// An interval: what is known of it on the host, and its sums on the device (one part, or two
/// when it ends with an epoch's shorter last batch).
struct Sums {
    report: IntervalReport,
    parts: Vec<Part>,
}

/// Sums the steps' figures on the device by interval, and reads them back when asked.
pub struct IntervalMeter {
    every: usize,
    batch_size: usize,
    epoch_len: usize,
    batches_per_epoch: usize,
    /// Read each interval as it ends: the device is the host.
    reads_are_free: bool,
    open: Option<Sums>,
    ended: Vec<Sums>,
}

impl IntervalMeter {
    pub fn new(epoch_len: usize, batch_size: usize, reads_are_free: bool) -> Self {
        let batches_per_epoch = epoch_len.div_ceil(batch_size);
        Self {
            every: steps_per_interval(batches_per_epoch),
            batch_size,
            epoch_len,
            batches_per_epoch,
            reads_are_free,
            open: None,
            ended: Vec::new(),
        }
    }

    /// Adds the figures of run step `step`, batch `batch` of epoch `epoch`, taken when the run
    /// had trained `training_secs` seconds.
    pub fn add(
        &mut self,
        stats: &StepStats,
        (epoch, step, batch): (usize, usize, usize),
        training_secs: f64,
    ) {
        let samples = stats.samples();
        let seen = batch * self.batch_size + samples;
        let mut sums = self.open.take().unwrap_or_else(|| Sums {
            report: IntervalReport {
                epoch,
                step,
                epochs: 0.0,
                steps: 0,
                samples: 0,
                loss: f32::NAN,
                accuracy: f32::NAN,
                training_secs,
            },
            parts: Vec::new(),
        });
        match sums.parts.last_mut() {
            Some(part) if part.len() == samples => part.add(stats),
            _ => sums.parts.push(Part(stats.clone())),
        }
        sums.report = IntervalReport {
            step,
            epochs: (epoch - 1) as f64 + seen as f64 / self.epoch_len as f64,
            steps: sums.report.steps + 1,
            samples: sums.report.samples + samples,
            training_secs,
            ..sums.report
        };
        self.open = Some(sums);
        if (batch + 1) % self.every == 0 || batch + 1 == self.batches_per_epoch {
            self.end_open();
        }
    }

    /// Ends the interval under way where it stands: the run stops.
    pub fn end_open(&mut self) {
        self.ended.extend(self.open.take());
    }

    /// Whether to read now, though the loop reads nothing else.
    pub fn wants_read(&self) -> bool {
        self.reads_are_free && !self.ended.is_empty()
    }

    /// Reads `loss` (a step's) and the ended intervals in one transfer.
    pub async fn read(
        &mut self,
        loss: Option<Tensor<1>>,
    ) -> Result<(Option<f32>, Vec<IntervalReport>), ExecutionError> {
        let ended = std::mem::take(&mut self.ended);
        let mut tensors: Vec<Tensor<1>> = loss.iter().cloned().collect();
        for part in ended.iter().flat_map(|sums| &sums.parts) {
            tensors.push(part.0.losses.clone().flatten(0, 1));
            tensors.push(part.0.right.clone().flatten(0, 1));
        }
        let values = match tensors.len() {
            0 => return Ok((None, Vec::new())),
            1 => tensors.remove(0),
            _ => Tensor::cat(tensors, 0),
        };
        let values: Vec<f32> = values
            .into_data_async()
            .await?
            .try_into_vec_as::<f32>()
            .map_err(|error| ExecutionError::WithContext {
                reason: format!("{error:?}"),
            })?;
        let (loss_value, mut rest) = values.split_at(usize::from(loss.is_some()));
        // A part's sums of losses and of right answers.
        let mut take = |part: &Part| -> (f64, f64) {
            let len = part.0.losses.shape().num_elements();
            let (losses, others) = rest.split_at(len);
            let (right, others) = others.split_at(len);
            rest = others;
            let sum = |values: &[f32]| values.iter().copied().map(f64::from).sum();
            (sum(losses), sum(right))
        };
        let reports = ended
            .into_iter()
            .map(|sums| {
                let (mut loss, mut correct) = (0.0, 0.0);
                for part in &sums.parts {
                    let (part_loss, part_correct) = take(part);
                    loss += part_loss;
                    correct += part_correct;
                }
                let samples = sums.report.samples as f64;
                IntervalReport {
                    loss: (loss / samples) as f32,
                    accuracy: (100.0 * correct / samples) as f32,
                    ..sums.report
                }
            })
            .collect();
        Ok((loss_value.first().copied(), reports))
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::TensorData;

    use super::*;

    /// A step whose samples each had loss `loss`, classed right where `correct` is 1, held at
    /// their target's column of two, the second.
    fn stats(loss: f32, correct: &[f32]) -> StepStats {
        let device = Device::flex();
        let by_class = |values: Vec<f32>| {
            let len = values.len();
            Tensor::from_data(TensorData::new(values, [len / 2, 2]), &device)
        };
        StepStats {
            losses: by_class(correct.iter().flat_map(|_| [0.0, loss]).collect()),
            right: by_class(correct.iter().flat_map(|&right| [0.0, right]).collect()),
        }
    }

    #[test]
    fn an_epoch_of_938_batches_gets_67_points_and_a_short_one_a_point_a_step() {
        assert_eq!(steps_per_interval(938), 14);
        assert_eq!(938usize.div_ceil(14), 67);
        assert_eq!(steps_per_interval(60), 1);
        assert_eq!(steps_per_interval(0), 1);
    }

    /// 300 samples in batches of 2: 150 steps an epoch, intervals of 2 steps.
    #[test]
    fn sums_each_interval_and_reads_them_with_a_logged_loss() {
        let mut meter = IntervalMeter::new(300, 2, false);
        meter.add(&stats(2.0, &[0.0, 0.0]), (1, 1, 0), 0.5);
        assert!(
            !meter.wants_read(),
            "the GPU's intervals wait for a read the loop makes"
        );
        meter.add(&stats(1.0, &[1.0, 1.0]), (1, 2, 1), 1.0);
        meter.add(&stats(0.5, &[1.0, 0.0]), (1, 3, 2), 1.5);
        let (loss, intervals) =
            pollster::block_on(meter.read(Some(stats(0.25, &[0.0, 0.0]).loss()))).unwrap();
        assert_eq!(loss, Some(0.25));
        assert_eq!(
            intervals,
            vec![IntervalReport {
                epoch: 1,
                step: 2,
                epochs: 4.0 / 300.0,
                steps: 2,
                samples: 4,
                loss: 1.5,
                accuracy: 50.0,
                // The time of its last step.
                training_secs: 1.0,
            }]
        );
        // The interval under way ends where the run stops.
        meter.end_open();
        let (loss, intervals) = pollster::block_on(meter.read(None)).unwrap();
        assert_eq!(loss, None);
        assert_eq!((intervals[0].step, intervals[0].steps), (3, 1));
        assert_eq!((intervals[0].loss, intervals[0].accuracy), (0.5, 50.0));
        assert_eq!(intervals[0].training_secs, 1.5);
        assert_eq!(
            pollster::block_on(meter.read(None)).unwrap(),
            (None, vec![])
        );
    }

    #[test]
    fn the_last_batch_ends_its_interval_and_counts_its_own_samples() {
        // 5 samples in batches of 2: batches of 2, 2 and 1; each its own interval.
        let mut meter = IntervalMeter::new(5, 2, true);
        let batches: [&[f32]; 3] = [&[1.0, 1.0], &[1.0, 0.0], &[1.0]];
        for (batch, correct) in batches.into_iter().enumerate() {
            meter.add(&stats(1.0, correct), (2, 4 + batch, batch), 0.5);
            assert!(
                meter.wants_read(),
                "on the CPU each interval is read as it ends"
            );
        }
        let (_, intervals) = pollster::block_on(meter.read(None)).unwrap();
        let figures: Vec<_> = intervals
            .iter()
            .map(|i| (i.step, i.samples, i.epochs, i.accuracy))
            .collect();
        assert_eq!(
            figures,
            vec![(4, 2, 1.4, 100.0), (5, 2, 1.8, 50.0), (6, 1, 2.0, 100.0)]
        );
    }

    #[test]
    fn an_interval_ending_in_a_short_batch_counts_all_its_samples() {
        // 259 samples in batches of 2: 130 batches, the last of 1; intervals of 2 steps.
        let mut meter = IntervalMeter::new(259, 2, true);
        meter.add(&stats(1.0, &[1.0, 0.0]), (1, 129, 128), 0.5);
        meter.add(&stats(3.0, &[1.0]), (1, 130, 129), 0.5);
        let (_, intervals) = pollster::block_on(meter.read(None)).unwrap();
        let interval = &intervals[0];
        assert_eq!(
            (interval.steps, interval.samples, interval.epochs),
            (2, 3, 1.0)
        );
        assert_eq!((interval.loss, interval.accuracy), (5.0 / 3.0, 200.0 / 3.0));
    }

    #[test]
    fn a_diverged_interval_survives_json() {
        let diverged = IntervalReport {
            epoch: 1,
            step: 3,
            epochs: 0.5,
            steps: 1,
            samples: 64,
            loss: f32::NAN,
            accuracy: f32::NAN,
            training_secs: 2.5,
        };
        let json = serde_json::to_string(&diverged).unwrap();
        let back: IntervalReport = serde_json::from_str(&json).unwrap();
        assert!(back.loss.is_nan() && back.accuracy.is_nan(), "{json}");
    }

    #[test]
    fn merged_intervals_weigh_their_steps_and_samples() {
        let first = IntervalReport {
            epoch: 1,
            step: 10,
            epochs: 0.1,
            steps: 10,
            samples: 640,
            loss: 2.0,
            accuracy: 50.0,
            training_secs: 1.0,
        };
        let second = IntervalReport {
            step: 15,
            epochs: 0.15,
            steps: 5,
            samples: 320,
            loss: 0.5,
            accuracy: 80.0,
            training_secs: 1.5,
            ..first.clone()
        };
        let merged = first.merge(&second);
        assert_eq!((merged.step, merged.steps, merged.samples), (15, 15, 960));
        assert_eq!(merged.training_secs, 1.5, "the time of its last step");
        assert!((merged.loss - 1.5).abs() < 1e-6);
        assert!((merged.accuracy - 60.0).abs() < 1e-4);
    }
}
