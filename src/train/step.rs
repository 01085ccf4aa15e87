//! One training step, written once: the loop takes its steps here, and the parity test with
//! PyTorch takes the same steps on batches of its choosing.

use burn::module::{ModuleMapper, Param};
use std::ops::Range;

use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::prelude::*;

use crate::config::AugmentConfig;
use crate::data::MnistSplit;
use crate::data::augment::Augmenter;
use crate::data::batcher::{MnistBatch, MnistBatcher};
use crate::data::resident::ResidentSplit;
use crate::model::CLASSES;
use crate::model::{Net, channels_last_memory};
use crate::platform::{self, panic_message};
use crate::train::group::{Placement, StepFailure, shard_ranges, sum_step};
use crate::train::optimizer::{Optimizer, Rates};

/// Takes training steps on samples of one split: each batch split into a shard per device,
/// each shard's cross-entropy and gradients on its device at once (a thread each), their sum
/// on the first device, and the optimizer's update there. On one device, one shard: the batch.
pub struct Stepper<'a> {
    /// The first holds the model; each other a replica that takes its weights every step.
    shards: Vec<Shard<'a>>,
    /// The devices, and the other processes of the run, if any.
    placement: Placement<'a>,
}

/// One device's part of each step.
struct Shard<'a> {
    autodiff: Device,
    split: &'a MnistSplit,
    batcher: MnistBatcher,
    /// On a GPU, the split's samples, uploaded once: a step sends only its batch's indices.
    /// The CPU backend builds each batch from the host's bytes, which costs it nothing more.
    resident: Option<ResidentSplit>,
    /// Random transforms of each batch's images, when the run asks for them.
    augmenter: Option<Augmenter>,
    loss: LossConstants,
}

/// What [`cross_entropy`] needs besides the logits and targets, uploaded once.
pub(crate) struct LossConstants {
    /// [[0, 1, …, 9]]: each class's index, to find the targets' columns.
    classes: Tensor<2>,
}

impl LossConstants {
    pub(crate) fn new(device: &Device) -> Self {
        Self {
            classes: Tensor::<1, Int>::arange(0..CLASSES as i64, device)
                .float()
                .reshape([1, CLASSES]),
        }
    }
}

/// Makes every parameter an autodiff leaf that keeps its gradient: weights made or loaded off
/// the autodiff device are neither, and moving them to it does not change that. Convolution
/// weights are laid out as the GPU's convolutions read them.
struct TrackGradients;

impl ModuleMapper for TrackGradients {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        param.map(|tensor| channels_last_memory(tensor).autodiff().require_grad())
    }
}

/// What [`Stepper::step_watched`] gives back.
pub(super) struct Stepped {
    pub(super) model: Net,
    pub(super) stats: StepStats,
    /// Whether any process of the run was asked to stop.
    pub(super) stop: bool,
    /// Whether the step failed on a process of the run: none took it, `model` is as before.
    pub(super) failed: bool,
    /// Each layer's gradient, when asked for.
    pub(super) gradients: Option<[Option<Tensor<1>>; 4]>,
}

/// A shard's place in its step: the run's step, where its samples sit in the batch, and the
/// batch's size, which its loss is the mean over.
#[derive(Clone, Copy)]
struct ShardPlace {
    step: usize,
    offset: usize,
    batch: usize,
}

impl<'a> Shard<'a> {
    fn new(device: &Device, split: &'a MnistSplit, len: usize) -> Self {
        let autodiff = device.clone().autodiff();
        let batcher = MnistBatcher::new(autodiff.clone());
        let resident =
            (*device != Device::flex()).then(|| ResidentSplit::new(split, len, &batcher));
        Self {
            split,
            batcher,
            resident,
            augmenter: None,
            loss: LossConstants::new(&autodiff),
            autodiff,
        }
    }

    fn trainable(&self, model: Net) -> Net {
        model.fork(&self.autodiff).map(&mut TrackGradients)
    }

    /// The images of the samples at `indices`, untransformed, on the device without autodiff:
    /// from the split kept on a GPU, so that only their indices are uploaded.
    fn images(&self, indices: &[usize]) -> Tensor<4> {
        let images = match &self.resident {
            Some(resident) => resident.images(indices),
            None => self.batcher.batch(self.split, indices).images,
        };
        images.inner()
    }

    /// The gradients of the batch's mean loss that this shard's samples, `indices`, make up,
    /// and their figures.
    fn gradients(
        &self,
        model: &Net,
        indices: &[usize],
        place: ShardPlace,
    ) -> (GradientsParams, StepStats) {
        let MnistBatch { images, targets } = match &self.resident {
            Some(resident) => resident.batch(&self.batcher, self.split, indices),
            None => self.batcher.batch(self.split, indices),
        };
        let images = match &self.augmenter {
            Some(augmenter) => augmenter.apply_part(images, place.step, place.offset, place.batch),
            None => images,
        };
        let loss = cross_entropy(model.forward(images), targets, &self.loss, place.batch);
        let grads = GradientsParams::from_grads(loss.backward.backward(), model);
        (grads, loss.stats)
    }
}

impl<'a> Stepper<'a> {
    /// A stepper on `device` for the first `len` samples of `split`, unaugmented.
    pub fn new(device: &'a Device, split: &'a MnistSplit, len: usize) -> Self {
        Self::over(Placement::on(std::slice::from_ref(device)), split, len)
    }

    /// A stepper that takes `placement`'s share of each batch, split over its devices (the
    /// first holds the model), for the first `len` samples of `split`, unaugmented.
    pub fn over(placement: Placement<'a>, split: &'a MnistSplit, len: usize) -> Self {
        let shards = placement.devices.iter();
        Self {
            shards: shards
                .map(|device| Shard::new(device, split, len))
                .collect(),
            placement,
        }
    }

    /// Each batch's images transformed as `ranges` say (when on), drawn from `seed`.
    pub fn augmented(mut self, ranges: &AugmentConfig, seed: u64) -> Self {
        for shard in &mut self.shards {
            shard.augmenter = Augmenter::new(ranges, seed, &shard.autodiff);
        }
        self
    }

    /// The part of a batch (or test set) of `len` that this process takes.
    pub fn share(&self, len: usize) -> Range<usize> {
        self.placement.share(len)
    }

    /// The images of the samples at `indices`, untransformed, on the first device without
    /// autodiff, where [`Net::valid`] leaves the model.
    pub fn images(&self, indices: &[usize]) -> Tensor<4> {
        self.shards[0].images(indices)
    }

    /// `model`'s weights on this stepper's first device, ready to be trained.
    pub fn trainable(&self, model: Net) -> Net {
        self.shards[0].trainable(model)
    }

    /// The run's step `step` (counted from 0, which draws its augmentation) of `model` (from
    /// [`Self::trainable`]) on the samples at `indices` (each below the length the stepper was
    /// made with) at `rates`: the updated model, and the batch's figures before the update,
    /// left on the first device.
    pub fn step(
        &self,
        model: Net,
        optimizer: &mut Optimizer,
        rates: Rates,
        step: usize,
        indices: &[usize],
    ) -> (Net, StepStats) {
        let (model, stats, _) = self.step_agreeing(model, optimizer, rates, step, indices, false);
        (model, stats)
    }

    /// [`Self::step`], `stop` saying whether this process was asked to stop: true after the
    /// step if any process of the run was, so that all stop after the same step.
    pub(super) fn step_agreeing(
        &self,
        model: Net,
        optimizer: &mut Optimizer,
        rates: Rates,
        step: usize,
        indices: &[usize],
        stop: bool,
    ) -> (Net, StepStats, bool) {
        let stepped = self.step_watched(model, optimizer, rates, (step, indices), stop, false);
        (stepped.model, stepped.stats, stepped.stop)
    }

    /// [`Self::step_agreeing`], and each layer's gradient (as [`Net::layer_gradients`] gives
    /// them) when `watched`: the learning figures of a logged step.
    pub(super) fn step_watched(
        &self,
        model: Net,
        optimizer: &mut Optimizer,
        rates: Rates,
        (step, indices): (usize, &[usize]),
        stop: bool,
        watched: bool,
    ) -> Stepped {
        let share = self.placement.share(indices.len());
        let Some(group) = self.placement.group else {
            let (grads, stats) = self.gradients(&model, step, indices, share);
            let stats = stats.expect("a process alone takes the whole batch");
            return self.update(model, optimizer, rates, (grads, stats), stop, watched);
        };
        // A fault here, on this process alone, must not leave the others waiting in the sum:
        // it says so there, and every process stops before this step.
        let computed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            platform::provoked_panic_at_step(step);
            self.gradients(&model, step, indices, share.clone())
        }));
        let (grads, stats, why) = match computed {
            Ok((grads, stats)) => (grads, stats, None),
            Err(panic) => (
                GradientsParams::new(),
                None,
                Some(panic_message(panic.as_ref())),
            ),
        };
        let figures = stats.map(|stats| [stats.losses, stats.right]);
        let at = (share, indices.len());
        let summed = sum_step(group, &model, grads, figures, at, (stop, why.is_some()));
        let [losses, right] = summed.figures;
        let stats = StepStats { losses, right };
        if let Some(rank) = summed.failed {
            group.fail(StepFailure { rank, step, why });
            return Stepped {
                model,
                stats,
                stop: true,
                failed: true,
                gradients: None,
            };
        }
        self.update(
            model,
            optimizer,
            rates,
            (summed.grads, stats),
            summed.stop,
            watched,
        )
    }

    /// `model` updated by `grads`, and the step's figures.
    fn update(
        &self,
        model: Net,
        optimizer: &mut Optimizer,
        rates: Rates,
        (grads, stats): (GradientsParams, StepStats),
        stop: bool,
        watched: bool,
    ) -> Stepped {
        let gradients = watched.then(|| model.layer_gradients(&grads));
        let model = optimizer.step(rates, model, grads);
        Stepped {
            model,
            stats,
            stop,
            failed: false,
            gradients,
        }
    }

    /// The gradients of the batch's mean loss that this process's `share` of `indices` makes
    /// up, as the sum of its shards', each taken on its device by a thread of its own (the
    /// first's on this one); that share's figures, in the batch's order. None for a share of
    /// nothing (a process beyond an epoch's last, short batch).
    fn gradients(
        &self,
        model: &Net,
        step: usize,
        indices: &[usize],
        share: Range<usize>,
    ) -> (GradientsParams, Option<StepStats>) {
        let part = &indices[share.clone()];
        // A short batch leaves the devices past its length idle.
        let shards = &self.shards[..self.shards.len().min(part.len())];
        let ranges = shard_ranges(part.len(), shards.len().max(1));
        let place = |range: &Range<usize>| ShardPlace {
            step,
            offset: share.start + range.start,
            batch: indices.len(),
        };
        let (main, replicas) = match shards {
            [] => return (GradientsParams::new(), None),
            [main, replicas @ ..] => (main, replicas),
        };
        if replicas.is_empty() {
            let (grads, stats) = main.gradients(model, part, place(&ranges[0]));
            return (grads, Some(stats));
        }
        std::thread::scope(|scope| {
            let replicas: Vec<_> = replicas
                .iter()
                .zip(&ranges[1..])
                .map(|(shard, range)| {
                    let (weights, samples, place) =
                        (model.valid(), &part[range.clone()], place(range));
                    scope.spawn(move || {
                        let replica = shard.trainable(weights);
                        let (grads, stats) = shard.gradients(&replica, samples, place);
                        (grads.to_device(&main.autodiff, &replica), stats)
                    })
                })
                .collect();
            let (grads, stats) = main.gradients(model, &part[ranges[0].clone()], place(&ranges[0]));
            let mut sum = GradientsAccumulator::<Net>::new();
            sum.accumulate(model, grads);
            let (mut losses, mut right) = (vec![stats.losses], vec![stats.right]);
            for replica in replicas {
                let (grads, stats) = replica
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                sum.accumulate(model, grads);
                losses.push(stats.losses.to_device(&main.autodiff));
                right.push(stats.right.to_device(&main.autodiff));
            }
            let stats = StepStats {
                losses: Tensor::cat(losses, 0),
                right: Tensor::cat(right, 0),
            };
            (sum.grads(), Some(stats))
        })
    }
}

/// The cross-entropy of a batch, and what to call `backward` on for its gradients.
pub(crate) struct CrossEntropy {
    pub(crate) stats: StepStats,
    /// `logits` times the loss's gradient with respect to them, (softmax − one-hot) / batch,
    /// held constant: so the gradient of its sum, which `backward` takes, is that gradient.
    pub(crate) backward: Tensor<2>,
}

/// Cross-entropy of `logits` [batch, classes] against `targets` [batch], as PyTorch's
/// `CrossEntropyLoss` computes it (whose mean over the batch is [`StepStats::loss`]), with the
/// gradient of the mean over `mean_over` samples: the batch's, of which `logits` may be a shard:
/// log Σ exp(logits) − the target's logit, by sample.
///
/// The gradient is given in closed form rather than left to autodiff, which differentiates
/// the max, the log-sum-exp, the gather and the mean one by one: on WebGPU a dozen small
/// kernels a step, each a launch, where this is one elementwise kernel.
pub(crate) fn cross_entropy(
    logits: Tensor<2>,
    targets: Tensor<1, Int>,
    constants: &LossConstants,
    mean_over: usize,
) -> CrossEntropy {
    let [batch, _] = logits.dims();
    let targets = targets.reshape([batch, 1]);
    let values = logits.clone().detach();
    let max = values.clone().max_dim(1); // [batch, 1]
    let shifted = values - max; // [batch, classes], at most 0
    let exp = shifted.clone().exp(); // [batch, classes]
    let sum = exp.clone().sum_dim(1); // [batch, 1]
    // 1 at the target's column, 0 elsewhere: 1 − |class − target|, at least 0. Arithmetic
    // rather than a comparison, so that fusion takes it into its neighbours' kernels.
    let one_hot = (constants.classes.clone() - targets.float()).abs().neg();
    let one_hot = one_hot.add_scalar(1.0).clamp_min(0.0); // [batch, classes]
    // Only the target's column is kept: the loss there is log Σ exp − the shifted logit, and
    // the sample is right where that logit is the largest (ties count as right).
    // log Σ exp taken over every column, not once a row: in the browser's build a [batch, 1]
    // result here is a kernel of its own.
    let log_sum = (shifted.clone().mul_scalar(0.0) + sum.clone()).log(); // [batch, classes]
    let losses = (log_sum - shifted.clone()) * one_hot.clone(); // [batch, classes]
    let right = one_hot.clone().mask_fill(shifted.lower_elem(0.0), 0.0); // [batch, classes]
    let softmax = exp / sum;
    let gradient = (softmax - one_hot).div_scalar(mean_over as f64);
    CrossEntropy {
        stats: StepStats { losses, right },
        backward: logits * gradient,
    }
}

/// A step's figures, left on the device until the loop reads them, all before the update.
/// Kept by class, [batch, classes], with only each sample's target column non-zero: the sums
/// over classes are left to whoever reads them, as a sum here would be a reduction every step.
#[derive(Clone)]
pub struct StepStats {
    /// Each sample's loss, at its target's column.
    pub losses: Tensor<2>,
    /// 1 at a sample's target's column where the model classed it right.
    pub right: Tensor<2>,
}

impl StepStats {
    /// The batch's mean loss [1]: computed when asked, so that a step whose loss is not read
    /// launches no reduction for it.
    pub fn loss(&self) -> Tensor<1> {
        let [batch, _] = self.losses.dims();
        self.losses.clone().sum().div_scalar(batch as f64)
    }

    /// Samples in the batch.
    pub fn samples(&self) -> usize {
        self.losses.dims()[0]
    }
}

#[cfg(test)]
mod tests {
    use burn::nn::loss::CrossEntropyLossConfig;
    use burn::tensor::TensorData;

    use super::*;

    #[test]
    fn cross_entropy_is_burns_and_counts_the_right_guesses() {
        let device = Device::flex();
        let rows = [
            [2.0, 1.0, 0.1],
            [0.5, 2.5, -1.0],
            [0.0, 0.0, 3.0],
            [1.0, -2.0, 0.9],
        ];
        let picks = [0, 2, 2, 1];
        let logits = Tensor::<2>::from_floats(rows, &device);
        let targets = Tensor::<1, Int>::from_ints(picks, &device);
        let classes = Tensor::<1, Int>::arange(0..3, &device)
            .float()
            .reshape([1, 3]);
        let stats = cross_entropy(
            logits.clone(),
            targets.clone(),
            &LossConstants { classes },
            4,
        )
        .stats;
        let burns = CrossEntropyLossConfig::new()
            .init(&device)
            .forward(logits, targets);
        let ours = stats.loss();
        let (ours, burns) = (ours.into_scalar::<f32>(), burns.into_scalar::<f32>());
        assert!((ours - burns).abs() < 1e-6, "{ours} against {burns}");
        let rows_of = |by_class: Tensor<2>| {
            let values = by_class.into_data().try_to_vec::<f32>().unwrap();
            values.chunks(3).map(<[f32]>::to_vec).collect::<Vec<_>>()
        };
        let (losses, right) = (rows_of(stats.losses), rows_of(stats.right));
        // Nothing outside the target's column.
        for (pick, (loss, right)) in picks.iter().zip(losses.iter().zip(&right)) {
            for class in (0..3).filter(|class| class != pick) {
                assert_eq!(
                    (loss[class], right[class]),
                    (0.0, 0.0),
                    "{losses:?} {right:?}"
                );
            }
        }
        let right: Vec<f32> = right.iter().map(|row| row.iter().sum()).collect();
        assert_eq!(right, [1.0, 0.0, 1.0, 0.0]);
        // Each sample's loss, log Σ exp − the target's logit, worked out here in f64.
        for ((row, pick), loss) in rows.iter().zip(picks).zip(&losses) {
            let log_sum_exp = row.iter().map(|&z: &f64| z.exp()).sum::<f64>().ln();
            let expected = log_sum_exp - row[pick];
            let found = f64::from(loss[pick]);
            assert!((found - expected).abs() < 1e-6, "{losses:?}");
        }
    }

    /// The closed-form gradient is the one autodiff finds for burn's own cross-entropy.
    #[test]
    fn cross_entropy_has_the_gradient_autodiff_finds() {
        let device = Device::flex().autodiff();
        let values: Vec<f32> = (0..7 * 10)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) / 4.0)
            .collect();
        let logits = || Tensor::<2>::from_data(TensorData::new(values.clone(), [7, 10]), &device);
        let targets = Tensor::<1, Int>::from_ints([3, 0, 9, 9, 5, 1, 7], &device);
        let gradient_of = |loss_of: &dyn Fn(Tensor<2>) -> Tensor<2>| {
            let logits = logits().require_grad();
            let grads = loss_of(logits.clone()).backward();
            logits
                .grad(&grads)
                .unwrap()
                .into_data()
                .try_to_vec::<f32>()
                .unwrap()
        };
        let constants = LossConstants::new(&device);
        let ours =
            gradient_of(&|logits| cross_entropy(logits, targets.clone(), &constants, 7).backward);
        let burns = gradient_of(&|logits| {
            let loss = CrossEntropyLossConfig::new()
                .init(&device)
                .forward(logits, targets.clone());
            loss.reshape([1, 1])
        });
        for (ours, burns) in ours.iter().zip(&burns) {
            assert!((ours - burns).abs() < 1e-6, "{ours:?} against {burns:?}");
        }
        assert!(burns.iter().any(|g| g.abs() > 0.01));
    }
}
