//! One training step, written once: the loop takes its steps here, and the parity test with
//! PyTorch takes the same steps on batches of its choosing.

use burn::module::{ModuleMapper, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;

use crate::data::{MnistBatch, MnistBatcher, MnistSplit};
use crate::model::Net;
use crate::optimizer::Optimizer;
use crate::resident::ResidentSplit;

/// Takes training steps on one device, on samples of one split: the batch built there,
/// cross-entropy, its gradients, the optimizer's update.
pub struct Stepper<'a> {
    autodiff: Device,
    split: &'a MnistSplit,
    batcher: MnistBatcher,
    /// On a GPU, the split's samples, uploaded once: a step sends only its batch's indices.
    /// The CPU backend builds each batch from the host's bytes, which costs it nothing more.
    resident: Option<ResidentSplit>,
    /// [[1, 0]], uploaded once: see [`cross_entropy`].
    first: Tensor<2>,
}

/// Makes every parameter an autodiff leaf that keeps its gradient: weights made or loaded off
/// the autodiff device are neither, and moving them to it does not change that.
struct TrackGradients;

impl ModuleMapper for TrackGradients {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        param.map(|tensor| tensor.autodiff().require_grad())
    }
}

impl<'a> Stepper<'a> {
    /// A stepper on `device` for the first `len` samples of `split`.
    pub fn new(device: &Device, split: &'a MnistSplit, len: usize) -> Self {
        let autodiff = device.clone().autodiff();
        let batcher = MnistBatcher::new(autodiff.clone());
        let resident =
            (*device != Device::flex()).then(|| ResidentSplit::new(split, len, &batcher));
        Self {
            split,
            batcher,
            resident,
            first: Tensor::from_floats([[1.0, 0.0]], &autodiff),
            autodiff,
        }
    }

    /// `model`'s weights on this stepper's device, ready to be trained.
    pub fn trainable(&self, model: Net) -> Net {
        model.fork(&self.autodiff).map(&mut TrackGradients)
    }

    /// One step of `model` (from [`Self::trainable`]) on the samples at `indices` (each below
    /// the length the stepper was made with) with learning rate `lr`: the updated model, and
    /// the batch's figures before the update, left on the device.
    pub fn step(
        &self,
        model: Net,
        optimizer: &mut Optimizer,
        lr: f64,
        indices: &[usize],
    ) -> (Net, StepStats) {
        let MnistBatch { images, targets } = match &self.resident {
            Some(resident) => resident.batch(indices),
            None => self.batcher.batch(self.split, indices),
        };
        let (loss, samples) = cross_entropy(model.forward(images), targets, &self.first);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let model = optimizer.step(lr, model, grads);
        let stats = StepStats {
            loss: loss.detach(),
            samples,
        };
        (model, stats)
    }
}

/// Cross-entropy of `logits` [batch, classes] against `targets` [batch] as PyTorch's
/// `CrossEntropyLoss` (the mean over the batch) and burn's compute it, on the autodiff graph;
/// and, off it, each sample's loss and whether its target has the largest logit (1 or 0), side
/// by side [batch, 2]. `first` is [[1, 0]]: one elementwise kernel writes both columns.
/// A sample is right when its target's log-probability is the largest one, 0 - log Σ exp; a
/// gap below f32's rounding counts as right.
fn cross_entropy(
    logits: Tensor<2>,
    targets: Tensor<1, Int>,
    first: &Tensor<2>,
) -> (Tensor<1>, Tensor<2>) {
    let [batch, _] = logits.dims();
    let max = logits.clone().detach().max_dim(1); // [batch, 1]
    let shifted = logits - max;
    let log_sum_exp = shifted.clone().exp().sum_dim(1).log(); // [batch, 1]
    let picked = (shifted - log_sum_exp.clone()).gather(1, targets.reshape([batch, 1]));
    let log_likelihood = picked.clone().detach();
    // A comparison: in burn 0.22's fusion on wgpu, computing it as `clamp_max(0).sign() + 1` or
    // `exp(10³⁰·x)`, one kernel fewer, broke training (tests/pytorch_parity.rs).
    let right = (log_likelihood.clone() + log_sum_exp.detach())
        .greater_equal_elem(0.0)
        .float();
    let samples = log_likelihood.neg() * first.clone() + right * (first.clone().neg() + 1.0);
    (picked.mean().neg(), samples)
}

/// A step's figures, left on the device until the loop reads them, all before the update: the
/// batch's mean loss [1], and each sample's loss and whether the model classed it right (1 or 0)
/// [batch, 2].
pub struct StepStats {
    pub loss: Tensor<1>,
    pub samples: Tensor<2>,
}

#[cfg(test)]
mod tests {
    use burn::nn::loss::CrossEntropyLossConfig;

    use super::*;

    #[test]
    fn cross_entropy_is_burns_and_counts_the_right_guesses() {
        let device = Device::flex();
        let logits = Tensor::<2>::from_floats(
            [
                [2.0, 1.0, 0.1],
                [0.5, 2.5, -1.0],
                [0.0, 0.0, 3.0],
                [1.0, -2.0, 0.9],
            ],
            &device,
        );
        let targets = Tensor::<1, Int>::from_ints([0, 2, 2, 1], &device);
        let first = Tensor::from_floats([[1.0, 0.0]], &device);
        let (loss, samples) = cross_entropy(logits.clone(), targets.clone(), &first);
        let burns = CrossEntropyLossConfig::new()
            .init(&device)
            .forward(logits, targets);
        let (ours, burns) = (loss.into_scalar::<f32>(), burns.into_scalar::<f32>());
        assert!((ours - burns).abs() < 1e-6, "{ours} against {burns}");
        let samples = samples.into_data().try_to_vec::<f32>().unwrap();
        let (losses, right): (Vec<f32>, Vec<f32>) =
            samples.chunks(2).map(|pair| (pair[0], pair[1])).unzip();
        assert_eq!(right, [1.0, 0.0, 1.0, 0.0]);
        let mean = losses.iter().sum::<f32>() / 4.0;
        assert!((mean - ours).abs() < 1e-6, "{losses:?}");
    }
}
