//! One training step, written once: the loop takes its steps here, and the parity test with
//! PyTorch takes the same steps on batches of its choosing.

use burn::module::{ModuleMapper, Param};
use burn::nn::loss::{CrossEntropyLoss, CrossEntropyLossConfig};
use burn::optim::GradientsParams;
use burn::prelude::*;

use crate::data::{MnistBatch, MnistBatcher, MnistSplit};
use crate::model::Net;
use crate::optimizer::Optimizer;
use crate::resident::ResidentSplit;

/// Takes training steps on one device, on samples of one split: the batch built there,
/// cross-entropy (mean over the batch, as PyTorch's `CrossEntropyLoss`), its gradients, the
/// optimizer's update.
pub struct Stepper<'a> {
    autodiff: Device,
    loss_fn: CrossEntropyLoss,
    split: &'a MnistSplit,
    batcher: MnistBatcher,
    /// On a GPU, the split's samples, uploaded once: a step sends only its batch's indices.
    /// The CPU backend builds each batch from the host's bytes, which costs it nothing more.
    resident: Option<ResidentSplit>,
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
            loss_fn: CrossEntropyLossConfig::new().init(&autodiff),
            split,
            batcher,
            resident,
            autodiff,
        }
    }

    /// `model`'s weights on this stepper's device, ready to be trained.
    pub fn trainable(&self, model: Net) -> Net {
        model.fork(&self.autodiff).map(&mut TrackGradients)
    }

    /// One step of `model` (from [`Self::trainable`]) on the samples at `indices` (each below
    /// the length the stepper was made with) with learning rate `lr`: the updated model, and
    /// the batch's loss before the update, left on the device.
    pub fn step(
        &self,
        model: Net,
        optimizer: &mut Optimizer,
        lr: f64,
        indices: &[usize],
    ) -> (Net, Tensor<1>) {
        let MnistBatch { images, targets } = match &self.resident {
            Some(resident) => resident.batch(indices),
            None => self.batcher.batch(self.split, indices),
        };
        let loss = self.loss_fn.forward(model.forward(images), targets);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        (optimizer.step(lr, model, grads), loss)
    }
}
