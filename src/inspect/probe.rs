//! A logged step's learning figures, gathered on the device where the step left its weights
//! and gradients, and read back in one transfer: each layer's parameters and gradient (for
//! their spread), the two sums its update ratio needs, and its units' largest outputs on the
//! batch (for the dead ones).

use burn::prelude::*;

use super::learning::{LayerLearning, LearningReport, Spread, dead_share};
use crate::model::{LAYERS, LayerOutputs, Net};
use crate::readback::{ReadbackError, read_together};

/// One layer's tensors at the step, on the device until read.
struct LayerTensors {
    weights: Tensor<1>,
    gradient: Option<Tensor<1>>,
    /// [‖after − before‖², ‖before‖²], when the layer is not frozen.
    norms: Option<Tensor<1>>,
    /// Each unit's largest output on the batch, for a layer with a ReLU.
    largest: Option<Tensor<1>>,
}

/// The figures of one step, on the device until [`LearningProbe::read`].
pub struct LearningProbe {
    epoch: usize,
    step: usize,
    layers: Vec<LayerTensors>,
}

impl LearningProbe {
    /// The figures of step `step` of `epoch`, which took `before` to `after` with `gradients`
    /// (by layer, as [`Net::layer_gradients`] gives them), on a batch that gave `outputs`;
    /// `frozen` says of each layer whether the step left it as it was.
    pub fn gather(
        (epoch, step): (usize, usize),
        (before, after): (&Net, &Net),
        gradients: [Option<Tensor<1>>; 4],
        frozen: [bool; 4],
        outputs: &LayerOutputs,
    ) -> Self {
        let before = before.valid().layer_parameters();
        let after = after.valid().layer_parameters();
        let largest = outputs.largest_by_unit();
        let layers = before.into_iter().zip(after).zip(gradients).zip(largest);
        let layers = layers
            .zip(frozen)
            .map(|((((before, after), gradient), largest), frozen)| {
                let norms = (!frozen).then(|| {
                    let moved = (after.clone() - before.clone()).powi_scalar(2).sum();
                    Tensor::cat(vec![moved, before.powi_scalar(2).sum()], 0)
                });
                LayerTensors {
                    weights: after,
                    gradient,
                    norms,
                    largest,
                }
            });
        Self {
            epoch,
            step,
            layers: layers.collect(),
        }
    }

    /// The figures read back, in one transfer, and worked out on the host.
    pub async fn read(self) -> Result<LearningReport, ReadbackError> {
        let mut tensors = Vec::new();
        for layer in &self.layers {
            tensors.push(layer.weights.clone());
            tensors.extend(
                [&layer.gradient, &layer.norms, &layer.largest]
                    .into_iter()
                    .flatten()
                    .cloned(),
            );
        }
        let mut read = read_together(tensors).await?.into_iter();
        let mut next = |present: bool| present.then(|| read.next()).flatten().unwrap_or_default();
        let layers = LAYERS.iter().zip(&self.layers).map(|(name, layer)| {
            let weights = Spread::of(&next(true));
            let gradients = Spread::of(&next(layer.gradient.is_some()));
            let update_ratio = match next(layer.norms.is_some())[..] {
                [moved, size] if size > 0.0 => Some((f64::from(moved) / f64::from(size)).sqrt()),
                _ => None,
            };
            let largest = next(layer.largest.is_some());
            LayerLearning {
                name: name.to_string(),
                weights,
                gradients,
                update_ratio,
                dead_share: dead_share(&largest, largest.len()),
            }
        });
        Ok(LearningReport {
            epoch: self.epoch,
            step: self.step,
            layers: layers.collect(),
        })
    }
}
