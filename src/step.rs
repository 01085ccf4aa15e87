//! One training step, written once: the loop takes its steps here, and the parity test with
//! PyTorch takes the same steps on batches of its choosing.

use burn::module::{ModuleMapper, Param};
use burn::nn::loss::{CrossEntropyLoss, CrossEntropyLossConfig};
use burn::optim::GradientsParams;
use burn::prelude::*;

use crate::data::{MnistBatch, MnistBatcher, MnistSplit};
use crate::model::Net;
use crate::optimizer::Optimizer;

/// Takes training steps on one device: the batch built there, cross-entropy (mean over the
/// batch, as PyTorch's `CrossEntropyLoss`), its gradients, the optimizer's update.
pub struct Stepper {
    autodiff: Device,
    loss_fn: CrossEntropyLoss,
    batcher: MnistBatcher,
}

/// Makes every parameter an autodiff leaf that keeps its gradient: weights made or loaded off
/// the autodiff device are neither, and moving them to it does not change that.
struct TrackGradients;

impl ModuleMapper for TrackGradients {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        param.map(|tensor| tensor.autodiff().require_grad())
    }
}

impl Stepper {
    pub fn new(device: &Device) -> Self {
        let autodiff = device.clone().autodiff();
        Self {
            loss_fn: CrossEntropyLossConfig::new().init(&autodiff),
            batcher: MnistBatcher::new(autodiff.clone()),
            autodiff,
        }
    }

    /// `model`'s weights on this stepper's device, ready to be trained.
    pub fn trainable(&self, model: Net) -> Net {
        model.fork(&self.autodiff).map(&mut TrackGradients)
    }

    /// One step of `model` (from [`Self::trainable`]) on the samples at `indices` of `split`
    /// with learning rate `lr`: the updated model, and the batch's loss before the update,
    /// left on the device.
    pub fn step(
        &self,
        model: Net,
        optimizer: &mut Optimizer,
        lr: f64,
        split: &MnistSplit,
        indices: &[usize],
    ) -> (Net, Tensor<1>) {
        let MnistBatch { images, targets } = self.batcher.batch(split, indices);
        let loss = self.loss_fn.forward(model.forward(images), targets);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        (optimizer.step(lr, model, grads), loss)
    }
}
